"""The checks every command runs on its output paths before any work."""

import pytest

from flowsim.errors import InputError, image_file, output_file


def test_an_output_is_refused_at_an_inputs_path_even_before_either_exists(tmp_path):
    # 'flowsim check --history x.png --plot x.png': neither exists yet, and the history was
    # appended (created) before the plot found it had taken its path.
    target = tmp_path / "x.png"
    with pytest.raises(InputError, match="the plot would replace the input file"):
        output_file(target, "the plot", inputs=[tmp_path / "sub" / ".." / "x.png"])
    assert output_file(target, "the plot", inputs=[tmp_path / "y.png"]) == target


def test_a_name_the_file_system_refuses_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match=r"a{300}\.h5: cannot write the table there: File name too long"):
        output_file(tmp_path / ("a" * 300 + ".h5"), "the table")


def test_pgf_needs_its_tex_system(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import flowsim.errors

    monkeypatch.setattr(flowsim.errors.shutil, "which", lambda name: None)
    with pytest.raises(InputError, match=r"writes \.pgf with xelatex, which is not on PATH; use \.pdf or \.svg"):
        image_file(tmp_path / "plot.pgf", "the plot")
    monkeypatch.setattr(flowsim.errors.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert image_file(tmp_path / "plot.pgf", "the plot") == tmp_path / "plot.pgf"
