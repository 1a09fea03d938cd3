"""The checks every command runs on its output paths before any work."""

import math

import numpy as np
import pytest

from flowsim.errors import InputError, image_file, output_file, relative_tolerance, whole_number


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


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3)])
def test_whole_numbers_come_from_python_or_numpy(value):
    assert whole_number("n", value) == 3 and type(whole_number("n", value)) is int


@pytest.mark.parametrize(
    "value, minimum, message",
    [
        (0, 1, "n must be a positive integer, got 0"),
        (-1, 0, "n must be a non-negative integer, got -1"),
        (1, 2, "n must be an integer >= 2, got 1"),
        (True, 1, "n must be a positive integer, got True"),
        (np.True_, 1, "n must be a positive integer, got"),
        (2.0, 1, "n must be a positive integer, got 2.0"),
        ("2", 1, "n must be a positive integer, got '2'"),
    ],
)
def test_a_whole_number_that_is_not_one_names_the_parameter(value, minimum, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        whole_number("n", value, minimum)


@pytest.mark.parametrize("value", [0, 1e-12, np.float32(1e-3), np.float64(0.5)])
def test_relative_tolerances_in_0_to_1_are_floats(value):
    assert relative_tolerance("tol", value) == float(value)


@pytest.mark.parametrize("value", [-1e-3, 1.0, math.nan, math.inf, False, "0.1", None])
def test_a_relative_tolerance_outside_0_to_1_names_the_parameter(value):
    with pytest.raises(InputError, match=r"tol must be a number in \[0, 1\), got"):
        relative_tolerance("tol", value)
