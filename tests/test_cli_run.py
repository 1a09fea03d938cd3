"""The run, inspect, plot and presets commands end to end, through their own argparse parsers."""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from flowsim import __version__ as flowsim_version
from flowsim import cli
from flowsim import plot as plotting
from flowsim.commands import inspect, plot, presets, run
from flowsim.errors import InputError
from flowsim.formatting import format_runs
from flowsim.presets import preset_names
from flowsim.scenario import load_scenario, run_scenario
from flowsim.trace import open_trace, write_trace

# Examples with [[workload.collective]] tables need flowsim.collectives.
EXAMPLES = [
    path
    for path in sorted((Path(__file__).parents[1] / "data" / "scenarios").glob("*.toml"))
    if importlib.util.find_spec("flowsim.collectives") or "[[workload.collective]]" not in path.read_text()
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: A small flow-list example, used where any scenario will do.
DGX = Path(__file__).parents[1] / "data" / "scenarios" / "dgx_h100_all_to_all.toml"


def flowsim(*argv: str | Path) -> int:
    """Parse ``argv`` with a parser holding the four subcommands and run the handler."""
    parser = argparse.ArgumentParser(prog="flowsim")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (run, inspect, plot, presets):
        command.add_parser(sub)
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Every example run once: scenario path -> trace path."""
    out = tmp_path_factory.mktemp("traces")
    paths = {}
    for scenario in EXAMPLES:
        paths[scenario] = out / f"{scenario.stem}.h5"
        assert flowsim("run", scenario, "-o", paths[scenario], "-q") == 0
    return paths


@pytest.mark.parametrize("scenario", EXAMPLES, ids=lambda p: p.stem)
def test_run_writes_a_trace_of_the_scenario(traces, scenario):
    trace = open_trace(traces[scenario])
    assert trace.scenario_text == scenario.read_text()
    assert trace.n_flows > 0 and trace.makespan_s > 0
    assert trace.link_segment_indptr is not None


def test_run_notes_progress_on_stderr(tmp_path, capsys):
    scenario = DGX
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5") == 0
    captured = capsys.readouterr()
    for stage in ("loading", "routing", "simulating", "writing", "done"):
        assert stage in captured.err
    assert "makespan" in captured.out and str(tmp_path / "t.h5") in captured.out


def test_run_reports_a_training_step(tmp_path, capsys):
    scenario = DGX.with_name("training_step_two_dgx_h100.toml")
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # -q silences the engine's progress lines too
    _, step, critical, tiers, *tier_rows = captured.out.splitlines()
    loaded = load_scenario(scenario)
    makespan = run_scenario(loaded).result.makespan_s
    assert loaded.compute_s > 0
    step_s = max(loaded.compute_s, makespan)
    assert step == (
        f"training step {inspect.format_seconds(step_s)}: compute {inspect.format_seconds(loaded.compute_s)}, "
        f"exposed communication {inspect.format_seconds(step_s - loaded.compute_s)}"
    )
    # A data-parallel step: no bubble line; the critical path adds up to the step.
    assert critical.startswith(f"  critical path {inspect.format_seconds(step_s)}: compute ")
    # It names the kinds the step has, the checkpoint too though it was off the path.
    assert ", DP " in critical and ", checkpoint 0 s" in critical and "TP" not in critical
    assert tiers.startswith("  link tiers")
    # Two DGX H100 with storage: NVLink, PCIe/host, InfiniBand and Ethernet, each with its busiest links.
    assert [row.split()[0] for row in tier_rows] == ["NVLink", "PCIe/host", "InfiniBand", "Ethernet"]
    trace = open_trace(tmp_path / "t.h5")
    assert trace.training is not None and trace.training.step_s == pytest.approx(step_s)


def test_run_defaults_the_output_to_the_scenario_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert flowsim("run", DGX, "-q") == 0
    assert (tmp_path / f"{DGX.stem}.h5").is_file()


def test_run_checks_the_output_directory_first(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        flowsim("run", DGX, "-o", tmp_path / "nope" / "t.h5")


@pytest.mark.parametrize("output", ["", ".", "{tmp}"], ids=["empty", "cwd", "directory"])
def test_run_refuses_a_directory_as_output(tmp_path, output):
    with pytest.raises(InputError, match="must be a file name, not a directory"):
        flowsim("run", DGX, "-o", output.format(tmp=tmp_path))


def test_run_refuses_to_write_over_its_scenario(tmp_path):
    scenario = tmp_path / "s.toml"
    text = DGX.read_text()
    scenario.write_text(text)
    with pytest.raises(InputError, match="would replace the input file"):
        flowsim("run", scenario, "-o", scenario)
    assert scenario.read_text() == text


def test_command_line_reports_system_errors_and_ctrl_c_without_traceback(monkeypatch, capsys):
    def refused(args):
        raise PermissionError(13, "Permission denied", "t.h5")

    monkeypatch.setattr(run, "run_command", refused)
    assert cli.main(["run", str(DGX)]) == 1
    assert capsys.readouterr().err == "flowsim: error: t.h5: Permission denied\n"

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_command", interrupted)
    assert cli.main(["run", str(DGX)]) == 130
    assert capsys.readouterr().err == "flowsim: interrupted\n"

    def out_of_memory(args):
        raise MemoryError("Unable to allocate 2.00 GiB for an array with shape (268386304,) and data type int64")

    monkeypatch.setattr(run, "run_command", out_of_memory)
    assert cli.main(["run", str(DGX)]) == 1
    assert capsys.readouterr().err == (
        "flowsim: error: out of memory (Unable to allocate 2.00 GiB for an array with shape (268386304,) and data "
        "type int64); make the run smaller (fewer nodes, ranks, sizes, channels or flows)\n"
    )


def test_run_output_paths_the_system_refuses_are_input_errors(tmp_path):
    # A name over the file system's limit made Path.is_dir() raise: exit 1 with the system's
    # message after no work, where a bad output path is exit 2 (InputError) naming the file.
    with pytest.raises(InputError, match="cannot write the trace there: File name too long"):
        flowsim("run", DGX, "-o", tmp_path / ("a" * 300 + ".h5"))


def test_python_dash_m_flowsim_is_the_command():
    done = subprocess.run([sys.executable, "-m", "flowsim", "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, f"flowsim {flowsim_version}\n")


@pytest.mark.parametrize("command", ["run", "inspect", "plot", "presets", "rates", "sweep", "collective", "check"])
def test_help_texts_are_plain_text(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = capsys.readouterr().out
    assert f"usage: flowsim {command}" in text
    assert "``" not in text and ":func:" not in text


def test_check_help_names_every_binary_it_reads(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.replace("-\n", "-").split())
    for binary in ("all_reduce_perf", "sendrecv_perf", "hypercube_perf", "alltoallv_perf", "gather_perf"):
        assert binary in text


def test_pcie_server_all_to_all_is_slower_than_dgx_h100(traces):
    by_name = {p.stem: open_trace(t).makespan_s for p, t in traces.items()}
    assert by_name["pcie_server_all_to_all"] > 10 * by_name["dgx_h100_all_to_all"]


def test_run_reports_a_bad_scenario_by_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[topology]\npreset = "dgx_h100"\n')
    with pytest.raises(InputError, match=r"bad\.toml: topology\.figure: missing"):
        flowsim("run", bad, "-o", tmp_path / "t.h5")
    assert not (tmp_path / "t.h5").exists()


@pytest.mark.parametrize("scenario", EXAMPLES, ids=lambda p: p.stem)
def test_inspect_summarizes(traces, scenario, capsys):
    assert flowsim("inspect", traces[scenario], "--top", "3") == 0
    out = capsys.readouterr().out
    trace = open_trace(traces[scenario])
    assert f"flows: {trace.n_flows:,}" in out
    assert "makespan: " in out and "busiest links" in out
    s = trace.summary
    assert (f"{int(s['n_rate_updates']):,} rate updates ({int(s['n_rates_resolved']):,} rates re-solved, "
            f"{int(s['n_rates_changed']):,} changed)") in out
    busiest = trace.topology.link_names[trace.busiest_links(1)[0]]
    assert busiest in out


def test_inspect_refuses_a_foreign_file(tmp_path):
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    with pytest.raises(InputError, match="junk.h5: not a readable HDF5 file"):
        flowsim("inspect", junk)


@pytest.mark.parametrize("kind", plot.KINDS)
def test_plots_are_non_empty_pngs(traces, tmp_path, kind):
    pytest.importorskip("matplotlib")
    # A Gantt chart needs a training step; the other kinds any flows.
    example = "training_step_two_dgx_h100" if kind == "gantt" else "storage_during_training"
    trace = traces[next(p for p in EXAMPLES if p.stem == example)]
    for extra in ((), ("--by", "job")) if kind not in ("utilization", "gantt", "tiers") else ((),):
        out = tmp_path / f"{kind}{len(extra)}.png"
        assert flowsim("plot", trace, "--kind", kind, "-o", out, *extra) == 0
        data = out.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_utilization_without_segments_draws_bars(tmp_path):
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "s.toml"
    scenario.write_text(DGX.read_text().replace("[workload]", "[options]\nrecord_links = false\n\n[workload]")
                        .replace('flows = "', f'flows = "{DGX.parent}/'))
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    assert open_trace(tmp_path / "t.h5").link_segment_indptr is None
    assert flowsim("plot", tmp_path / "t.h5", "--kind", "utilization", "-o", tmp_path / "u.png") == 0
    assert (tmp_path / "u.png").read_bytes().startswith(PNG_MAGIC)


def test_plot_unknown_tag(traces, tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(InputError, match="no tag 'phase' in this trace; tags: collective"):
        flowsim("plot", traces[DGX], "--kind", "fct-cdf", "--by", "phase", "-o", tmp_path / "x.png")


def test_plot_without_matplotlib_says_how_to_install(traces, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install 'flowsim\[plot\]'"):
        flowsim("plot", traces[DGX], "--kind", "timeline", "-o", tmp_path / "x.png")


def test_plot_rejects_an_unknown_kind(traces, tmp_path, capsys):
    with pytest.raises(SystemExit):
        flowsim("plot", traces[DGX], "--kind", "heatmap", "-o", tmp_path / "x.png")
    assert "invalid choice: 'heatmap'" in capsys.readouterr().err


def test_presets_lists_systems_technologies_and_switches(capsys):
    assert flowsim("presets") == 0
    out = capsys.readouterr().out
    for name in preset_names():
        assert f"  {name}: " in out
    assert "8 GPUs" in out and "72 GPUs" in out
    # A box without compute NICs names no NIC technology ('0 compute NICs (eth100g)' until 2026-12-07).
    assert "8 compute NICs (ib_ndr), " in out and "no compute NICs, front-end ports: 1 (eth100g)" in out
    assert "ib_ndr [scale_out]" in out and "50.00 GB/s" in out and "48.00 GB/s" in out
    assert "[GTC24]" in out and "qm9700: 64 x ib_ndr" in out
    assert "sources: " in out


def test_presets_only_one_table(capsys):
    assert flowsim("presets", "--only", "switches") == 0
    out = capsys.readouterr().out
    assert out.startswith("Switch models") and "Systems" not in out and "nvlink4" not in out


def test_presets_only_is_for_the_tables_not_a_system_file(capsys):
    # --only used to be dropped without a word where a system file was given.
    assert cli.main(["presets", "dgx-h100", "--only", "links"]) == 2
    assert capsys.readouterr().err == ("flowsim: error: --only links picks a table of what flowsim presets lists "
                                       "without FILE.toml; a system is described whole\n")


def test_formatting_helpers():
    assert inspect.format_seconds(1.5e-3) == "1.500 ms"
    assert inspect.format_seconds(2.0) == "2.000 s"
    assert inspect.format_seconds(3e-8) == "30.000 ns" and inspect.format_seconds(0.0) == "0 s"
    assert inspect.format_seconds(999_999.0) == "999999.000 s"
    assert inspect.format_seconds(1e300) == "1.000e+300 s"
    assert inspect.format_bytes(1.5e9) == "1.50 GB" and inspect.format_bytes(12) == "12 B"
    assert inspect.format_bytes(1e300) == "1.00e+300 B"  # was 290 digits of TB
    assert inspect.format_rate(4.5e11) == "450.00 GB/s"
    assert format_runs([0, 1, 2, 5, 8, 9]) == "0-2, 5, 8-9" and format_runs([3]) == "3" and format_runs([]) == ""
    assert format_runs([0, 1, 2, 5, 8, 9, 11], 2) == "0-2, 5, ..." and format_runs([0, 2], 2) == "0, 2"


@pytest.mark.parametrize("kind", plot.KINDS)
def test_plots_of_a_trace_without_flows(tmp_path, kind):
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "empty.toml"
    scenario.write_text('[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload]\nflows = "f.csv"\n')
    (tmp_path / "f.csv").write_text("name,src,dst,size_bytes\n")
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    if kind == "gantt":  # a chart of a training step, which this trace has not
        with pytest.raises(InputError, match="t.h5: no training step in this trace"):
            flowsim("plot", tmp_path / "t.h5", "--kind", kind, "-o", tmp_path / "p.png")
        assert not (tmp_path / "p.png").exists()
        return
    assert flowsim("plot", tmp_path / "t.h5", "--kind", kind, "-o", tmp_path / "p.png") == 0
    assert (tmp_path / "p.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("kind", ["utilization", "tiers"])
def test_plots_of_links_whose_bytes_left_no_rate_segment(tmp_path, kind):
    # 1e-300 B a flow: the links count bytes, but each transfer takes no time, so no rate
    # segment is recorded; the tier plot's per-bin bytes interpolated over no points (a
    # Python error).
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "tiny.toml"
    scenario.write_text('[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "effective"\n'
                        '[[workload.collective]]\nop = "all_reduce"\nsize_bytes = 1e-300\n')
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    trace = open_trace(tmp_path / "t.h5")
    carrying = np.flatnonzero(trace.link_bytes > 0)
    assert carrying.size and all(trace.link_segments(link)[0].size == 0 for link in carrying.tolist())
    assert flowsim("plot", tmp_path / "t.h5", "--kind", kind, "-o", tmp_path / "p.png") == 0
    assert (tmp_path / "p.png").read_bytes().startswith(PNG_MAGIC)


def test_fct_cdf_of_flows_from_microseconds_to_1e288_seconds(tmp_path):
    # A flow of 1e300 B beside one of 1 B: matplotlib's log ticks overflowed past float64.
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "huge.toml"
    scenario.write_text('[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload]\nflows = "f.csv"\n')
    (tmp_path / "f.csv").write_text("name,src,dst,size_bytes\na,gpu0,gpu1,1e300\nb,gpu2,gpu3,1\n")
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    assert open_trace(tmp_path / "t.h5").fct_s.max() > 1e280
    assert flowsim("plot", tmp_path / "t.h5", "--kind", "fct-cdf", "-o", tmp_path / "p.png") == 0
    assert (tmp_path / "p.png").read_bytes().startswith(PNG_MAGIC)


def test_inspect_a_trace_written_without_a_scenario(tmp_path, capsys):
    scenario = load_scenario(DGX)
    outcome = run_scenario(scenario)
    path = write_trace(tmp_path / "t.h5", scenario.topology, scenario.workload, outcome.routes, outcome.result)
    assert flowsim("inspect", path) == 0
    out = capsys.readouterr().out
    assert "no scenario text" in out and "tag collective: all_to_all 56" in out


@pytest.mark.parametrize(("output", "message"), [
    ("nope/x.png", "the directory '.*nope' does not exist"),
    ("x.xyz", r"'\.xyz' is not an image format matplotlib writes; use one of .*png"),
    ("x", "no extension names a format; use one of .*svg"),
], ids=["no directory", "unknown format", "no extension"])
def test_plot_checks_the_output_before_drawing(traces, tmp_path, output, message, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(plotting, "_utilization", None)  # drawing would fail: the check must come first
    with pytest.raises(InputError, match=message):
        flowsim("plot", traces[DGX], "--kind", "utilization", "-o", tmp_path / output)
    assert list(tmp_path.iterdir()) == []


def test_plot_refuses_to_write_over_its_trace(traces, tmp_path):
    pytest.importorskip("matplotlib")
    trace = tmp_path / "t.png"
    trace.write_bytes(traces[DGX].read_bytes())
    with pytest.raises(InputError, match="would replace the input file"):
        flowsim("plot", trace, "--kind", "fct-cdf", "-o", trace)
    assert trace.read_bytes() == traces[DGX].read_bytes()


@pytest.mark.parametrize("top", ["0", "-3", "two"])
def test_plot_top_must_be_a_positive_integer(traces, tmp_path, capsys, top):
    with pytest.raises(SystemExit):
        flowsim("plot", traces[DGX], "--kind", "utilization", "--top", top, "-o", tmp_path / "x.png")
    assert f"argument --top: expected a positive integer, got '{top}'" in capsys.readouterr().err
    with pytest.raises(InputError, match="top must be a positive integer, got 0"):
        plot.plot_trace(open_trace(traces[DGX]), "utilization", tmp_path / "x.png", top=0)


def test_utilization_of_many_links_is_one_heatmap_of_exact_means(traces, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import numpy as np
    from matplotlib.figure import Figure

    drawn = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *args, **kw: (drawn.append(fig), save(fig, *args, **kw)))
    trace = open_trace(traces[next(p for p in EXAMPLES if p.stem == "storage_during_training")])
    carried = trace.busiest_links(trace.topology.n_links)
    assert carried.size > plot.MAX_PANELS
    assert flowsim("plot", trace.path, "--kind", "utilization", "--top", "1000", "-o", tmp_path / "u.png") == 0
    (fig,) = drawn
    heatmap, colorbar = fig.axes
    assert fig.get_suptitle() == f"utilization of all {carried.size} links that carried traffic"
    util = heatmap.images[0].get_array()
    assert util.shape[0] == carried.size and util.max() <= 100 + 1e-9
    # Equal time bins: each row's mean is the link's mean utilization over the makespan.
    np.testing.assert_allclose(util.mean(axis=1), 100 * trace.link_utilization()[carried], rtol=1e-9)


def _scenario_with_flows(tmp_path, csv_text):
    """A DGX H100 scenario in ``tmp_path`` whose flow list ``f.csv`` holds ``csv_text``."""
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload]\nflows = "f.csv"\n')
    (tmp_path / "f.csv").write_text(csv_text)
    return scenario


def test_run_refuses_to_write_over_its_flow_list(tmp_path, monkeypatch):
    text = "name,src,dst,size_bytes\na,gpu0,gpu1,1e6\n"
    scenario = _scenario_with_flows(tmp_path, text)
    monkeypatch.setattr(run, "run_scenario", None)  # simulating would fail: the check must come first
    with pytest.raises(InputError, match=r"f\.csv: the trace would replace the input file .*f\.csv"):
        flowsim("run", scenario, "-o", tmp_path / "f.csv", "-q")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="would replace the input file"):
        flowsim("run", "s.toml", "-o", "./f.csv", "-q")
    assert (tmp_path / "f.csv").read_text() == text


def test_run_refuses_to_write_over_its_system_file(tmp_path, monkeypatch):
    system = (
        '[server]\ngpu = "H100"\ngpus = 2\ngpu_fabric = "pcie"\npcie = { generation = 5 }\n'
        'cpu = { sockets = 1, memory = "ddr5_4800_8ch" }\n'
    )
    (tmp_path / "s.sys.toml").write_text(system)
    scenario = _scenario_with_flows(tmp_path, "name,src,dst,size_bytes\na,n0.gpu0,n0.gpu1,1e6\n")
    scenario.write_text(
        '[topology]\ncluster = "s.sys.toml"\nfigure = "nominal"\nfabric = "none"\n[workload]\nflows = "f.csv"\n'
    )
    monkeypatch.setattr(run, "run_scenario", None)  # simulating would fail: the check must come first
    with pytest.raises(InputError, match=r"s\.sys\.toml: the trace would replace the input file .*s\.sys\.toml"):
        flowsim("run", scenario, "-o", tmp_path / "s.sys.toml", "-q")
    assert (tmp_path / "s.sys.toml").read_text() == system
    assert load_scenario(scenario).files == (tmp_path / "s.sys.toml", tmp_path / "f.csv")


def test_run_replaces_a_trace_but_not_a_file_of_other_data(tmp_path, monkeypatch):
    # An audit: '-o notes.txt' turned a text file into a trace, '-o results.h5' a sweep's table.
    scenario = _scenario_with_flows(tmp_path, "name,src,dst,size_bytes\na,gpu0,gpu1,1e6\n")
    trace = tmp_path / "t.h5"
    assert flowsim("run", scenario, "-o", trace, "-q") == 0
    assert flowsim("run", scenario, "-o", trace, "-q") == 0  # re-running replaces its trace
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    table = tmp_path / "results.h5"
    import h5py

    with h5py.File(table, "w") as f:
        f.attrs["format"] = "flowsim-sweep-results"
    mine = tmp_path / "mine.h5"
    with h5py.File(mine, "w") as f:
        f["x"] = [1.0]
    monkeypatch.setattr(run, "run_scenario", None)  # refused before simulating
    for path, what in ((notes, "not an HDF5 file"), (table, "an HDF5 file of format 'flowsim-sweep-results'"),
                       (mine, "an HDF5 file without flowsim's 'format' attribute")):
        before = path.read_bytes()
        with pytest.raises(InputError, match=f"{path.name}: exists and is {what}, not a trace flowsim would replace"):
            flowsim("run", scenario, "-o", path, "-q")
        assert path.read_bytes() == before
    empty = tmp_path / "empty.h5"
    empty.touch()
    monkeypatch.undo()
    assert flowsim("run", scenario, "-o", empty, "-q") == 0


def test_run_refuses_strings_a_trace_cannot_hold_before_simulating(tmp_path, monkeypatch):
    scenario = _scenario_with_flows(tmp_path, "name,src,dst,size_bytes,job\na,gpu0,gpu1,1e6,x\x00y\n")
    monkeypatch.setattr(run, "run_scenario", None)  # simulating would fail: the check must come first
    with pytest.raises(InputError, match=r"s\.toml: flow 'a': tag 'job': value 'x\\x00y' cannot be stored in a trace"):
        flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv", "s.toml"]


def test_run_keeps_tag_columns_with_any_name(tmp_path):
    scenario = _scenario_with_flows(
        tmp_path, "name,src,dst,size_bytes,job/step,/job,.,finish_s\na,gpu0,gpu1,1e6,1,2,3,4\n"
    )
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    trace = open_trace(tmp_path / "t.h5")
    assert {k: v.tolist() for k, v in trace.tags.items()} == {"job/step": ["1"], "/job": ["2"], ".": ["3"],
                                                              "finish_s": ["4"]}
    assert trace.finish_s[0] > 0


def test_interrupted_plot_keeps_the_previous_image(traces, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    out = tmp_path / "keep.svg"
    out.write_text("<svg>the plot from before</svg>")

    def interrupted(fig, name, **kwargs):
        with open(name, "w") as image:
            image.write("<svg>half of a")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", interrupted)
    with pytest.raises(KeyboardInterrupt):
        flowsim("plot", traces[DGX], "--kind", "fct-cdf", "-o", out)
    assert out.read_text() == "<svg>the plot from before</svg>"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.svg"]


@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".PNG", PNG_MAGIC)])
def test_plot_format_follows_the_suffix(traces, tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"p{suffix}"
    assert flowsim("plot", traces[DGX], "--kind", "fct-cdf", "-o", out) == 0
    assert out.read_bytes().startswith(magic)


def test_timeline_rows_are_labelled_at_whole_flows(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import numpy as np
    from matplotlib.figure import Figure

    scenario = _scenario_with_flows(
        tmp_path, "name,src,dst,size_bytes\na,gpu0,gpu1,1e6\nb,gpu1,gpu2,2e6\nc,gpu2,gpu3,3e6\n"
    )
    assert flowsim("run", scenario, "-o", tmp_path / "t.h5", "-q") == 0
    drawn = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *args, **kw: (drawn.append(fig), save(fig, *args, **kw)))
    assert flowsim("plot", tmp_path / "t.h5", "--kind", "timeline", "-o", tmp_path / "t.png") == 0
    (fig,) = drawn
    ticks = fig.axes[0].get_yticks()
    assert ticks.size >= 2 and np.all(ticks == np.round(ticks))


def test_inspect_a_topology_without_links(tmp_path, capsys):
    from flowsim import NodeKind, TopologyBuilder, Workload
    from flowsim.engine import simulate
    from flowsim.routing import route

    builder = TopologyBuilder()
    builder.add_node("gpu0", NodeKind.GPU, server=builder.add_server("s"))
    topology = builder.build()
    workload = Workload.build([], [], [], [])
    routes = route(topology, [], [])
    result = simulate(routes, topology.link_capacity_Bps, workload.size_bytes)
    path = write_trace(tmp_path / "t.h5", topology, workload, routes, result)
    assert flowsim("inspect", path) == 0
    out = capsys.readouterr().out
    assert "topology: 1 nodes in 1 server, 0 links\n  nodes: 1 gpu\n  links: none\n" in out


# --- outputs that are not regular files, inputs that are not regular files, Ctrl-C at start ---


def _read_fifo(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    """Read ``fifo`` to its end in a thread; what was read lands in the returned list."""
    got: list[bytes] = []

    def read():
        with open(fifo, "rb") as pipe:
            got.append(pipe.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def test_run_writes_through_a_fifo_and_leaves_it_a_fifo(tmp_path):
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    thread, got = _read_fifo(fifo)
    assert flowsim("run", DGX, "-o", fifo, "-q") == 0
    thread.join(60)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    copy = tmp_path / "copy.h5"
    copy.write_bytes(got[0])
    assert len(open_trace(copy).names) == 8 * 7  # all-to-all among 8 GPUs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.h5", "pipe.h5"]
    assert not list(Path(tempfile.gettempdir()).glob("flowsim-pipe.h5.*"))


def test_run_refuses_a_socket_as_output_and_leaves_it(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(InputError, match=r"s\.sock: is a socket, not a regular file: the trace must be a regular "
                                             r"file, a character device or a FIFO \(left as it is\)"):
            flowsim("run", DGX, "-o", path, "-q")
        assert stat.S_ISSOCK(path.stat().st_mode)


def test_run_through_a_symbolic_link_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "t.h5"
    link.symlink_to(tmp_path / "real" / "t.h5")
    assert flowsim("run", DGX, "-o", link, "-q") == 0
    assert link.is_symlink()
    assert len(open_trace(tmp_path / "real" / "t.h5").names) == 56
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["t.h5"]


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux's /proc")
def test_an_output_in_proc_says_why_it_cannot_be_written(capsys):
    assert cli.main(["run", str(DGX), "-q", "-o", "/proc/version"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No such file or directory" not in err
    # Root may write in /proc as far as permissions go; the file system still refuses.
    assert ("cannot create the trace in the directory '/proc': the file system there does not allow new files" in err
            or "the directory '/proc' is not writable" in err)


@pytest.mark.parametrize("command", ["run", "rates"])
def test_a_fifo_as_scenario_is_refused_without_waiting(make_fifo, command):
    fifo = make_fifo("s.toml")
    done = subprocess.run([sys.executable, "-m", "flowsim", command, str(fifo)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.endswith(
        f"flowsim: error: {fifo}: cannot read the scenario: it is a FIFO (named pipe), not a regular file\n")


def test_ctrl_c_while_the_command_imports_prints_one_line(tmp_path):
    # The console script runs `from flowsim.cli import main; sys.exit(main())`; SIGINT is sent
    # the moment NumPy starts importing, as a Ctrl-C in the command's first second would.
    script = textwrap.dedent("""
        import os, signal, sys

        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == "numpy":
                    os.kill(os.getpid(), signal.SIGINT)
                return None

        sys.meta_path.insert(0, CtrlC())
        from flowsim.cli import main
        sys.exit(main(["presets"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr, done.stdout) == (130, "flowsim: interrupted\n", "")
