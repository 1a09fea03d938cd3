"""Sweeps: spec expansion and errors, the journal and results table, local pool and Dask
against serial, a failing run, and a sweep killed with SIGKILL then resumed."""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from flowsim.commands import sweep as sweep_cli
from flowsim.errors import InputError
from flowsim.nccl import busbw_Bps
from flowsim.scenario import load_scenario, run_scenario
from flowsim.sweep import (
    METRICS,
    RunTask,
    journal_path,
    load_sweep,
    read_journal,
    read_results,
    run_sweep,
)
from flowsim.trace import open_trace

SCENARIOS = Path(__file__).parents[1] / "data" / "scenarios"
#: One all-reduce on one DGX H100: a few hundred flows, tens of milliseconds a run.
BASE = """
[topology]
preset = "dgx_h100"
figure = "effective"

[[workload.collective]]
op = "all_reduce"
size_bytes = 1048576
"""
FAKE_METRICS = ["makespan_s", "n_events"]


def fake_runner(task: RunTask) -> dict[str, float]:
    """Metrics computed from the task's document alone; size 3 fails."""
    size = task.document["workload"]["collective"][0]["size_bytes"]
    if size == 3:
        raise InputError("size 3 is not allowed here")
    seed = task.document.get("options", {}).get("seed", 0)
    nominal = task.document["topology"]["figure"] == "nominal"
    return {"makespan_s": size * 1e-9 + nominal, "n_events": float(seed)}


def refusing_runner(task: RunTask) -> dict[str, float]:
    raise AssertionError(f"run {task.key} should have been skipped")


def write_spec(tmp_path: Path, axes: str, metrics=FAKE_METRICS, base: str = BASE) -> Path:
    (tmp_path / "base.toml").write_text(base)
    spec = tmp_path / "sweep.toml"
    spec.write_text(f'[sweep]\nscenario = "base.toml"\nmetrics = {json.dumps(metrics)}\n{axes}')
    return spec


GRID_ZIP_RANDOM = """
[sweep.grid]
"topology.figure" = ["nominal", "effective"]
"workload.collective.0.size_bytes" = [1, 2]

[sweep.zip]
"options.seed" = [10, 20, 30]
"options.routing" = ["ecmp", "dmodk", "shortest"]

[sweep.random]
samples = 2
seed = 7
"workload.collective.0.channels" = {int_uniform = [1, 4]}
"""


def test_grid_zip_random_expand_as_a_product(tmp_path):
    sweep = load_sweep(write_spec(tmp_path, GRID_ZIP_RANDOM))
    assert sweep.parameters == ("topology.figure", "workload.collective.0.size_bytes", "options.seed",
                                "options.routing", "workload.collective.0.channels")
    assert len(sweep.runs) == 2 * 2 * 3 * 2
    assert [run.index for run in sweep.runs] == list(range(24))
    fixed = [tuple(run.params[p] for p in sweep.parameters[:4]) for run in sweep.runs[::2]]
    assert fixed[:4] == [("nominal", 1, 10, "ecmp"), ("nominal", 1, 20, "dmodk"), ("nominal", 1, 30, "shortest"),
                         ("nominal", 2, 10, "ecmp")]
    assert fixed[-1] == ("effective", 2, 30, "shortest")
    draws = [run.params["workload.collective.0.channels"] for run in sweep.runs[:2]]
    # The same two random samples pair with every grid and zip point.
    assert all([run.params["workload.collective.0.channels"] for run in sweep.runs[i:i + 2]] == draws
               for i in range(0, 24, 2))
    assert len({run.key for run in sweep.runs}) == 24 or draws[0] == draws[1]
    assert sweep.task(sweep.runs[1]).document["workload"]["collective"][0]["channels"] == draws[1]
    assert sweep.task(sweep.runs[1]).document["options"] == {"seed": 10, "routing": "ecmp"}


def test_random_samples_are_seeded_and_in_range(tmp_path):
    axes = """
[sweep.random]
samples = 50
seed = {seed}
"workload.collective.0.size_bytes" = {{log_uniform = [1e3, 1e9]}}
"options.seed" = {{int_uniform = [0, 3]}}
"topology.figure" = {{choice = ["nominal", "effective"]}}
"workload.collective.0.start_s" = {{uniform = [0.5, 1.5]}}
"""
    first = load_sweep(write_spec(tmp_path, axes.format(seed=1)))
    again = load_sweep(write_spec(tmp_path, axes.format(seed=1)))
    other = load_sweep(write_spec(tmp_path, axes.format(seed=2)))
    assert [r.params for r in first.runs] == [r.params for r in again.runs]
    assert [r.key for r in first.runs] == [r.key for r in again.runs]
    assert [r.params for r in first.runs] != [r.params for r in other.runs]
    sizes = np.array([r.params["workload.collective.0.size_bytes"] for r in first.runs])
    assert (1e3 <= sizes).all() and (sizes <= 1e9).all() and sizes.min() < 1e5 and sizes.max() > 1e7
    seeds = [r.params["options.seed"] for r in first.runs]
    assert set(seeds) == {0, 1, 2, 3} and all(type(s) is int for s in seeds)
    assert {r.params["topology.figure"] for r in first.runs} == {"nominal", "effective"}
    starts = np.array([r.params["workload.collective.0.start_s"] for r in first.runs])
    assert (0.5 <= starts).all() and (starts <= 1.5).all()


def test_dotted_keys_and_quoted_paths_are_the_same_runs(tmp_path):
    quoted = load_sweep(write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.size_bytes" = [1, 2]\n'))
    dotted = load_sweep(write_spec(tmp_path, "[sweep.grid]\nworkload.collective.0.size_bytes = [1, 2]\n"))
    zipped = load_sweep(write_spec(tmp_path, "[sweep.zip]\nworkload.collective.0.size_bytes = [2, 1]\n"))
    assert [r.key for r in quoted.runs] == [r.key for r in dotted.runs] == [r.key for r in zipped.runs][::-1]
    changed = load_sweep(write_spec(tmp_path, "[sweep.grid]\nworkload.collective.0.size_bytes = [1, 2]\n",
                                    base=BASE.replace("effective", "nominal")))
    assert not {r.key for r in changed.runs} & {r.key for r in quoted.runs}


@pytest.mark.parametrize(
    ("axes", "key", "names"),
    [
        # A field the base scenario lacks: the scenario checker names the valid ones.
        ('"topology.figur" = ["nominal"]', "sweep.grid.topology.figur", ["expected one of p2p"]),
        ('"options.sead" = [1]', "sweep.grid.options.sead", ["seed", "routing"]),
        ('"optionz.seed" = [1]', "sweep.grid.optionz.seed", ["options", "workload"]),
        # Paths through arrays of tables and values.
        ('"workload.collective.size_bytes" = [1]', "sweep.grid.workload.collective.size_bytes",
         ["workload.collective is an array of 1", "index 0..0"]),
        ('"workload.collective.2.op" = ["send"]', "sweep.grid.workload.collective.2.op", ["index 0..0, got 2"]),
        ('"topology.figure.x" = [1]', "sweep.grid.topology.figure.x", ["topology.figure is a str"]),
        ('"topology" = [1]', "sweep.grid.topology", ["such as 'topology.n_nodes'"]),
    ],
)
def test_unknown_fields_name_the_valid_ones(tmp_path, axes, key, names):
    spec = write_spec(tmp_path, f"[sweep.grid]\n{axes}\n")
    with pytest.raises(InputError) as err:
        load_sweep(spec)
    message = str(err.value)
    assert message.startswith(f"{spec}: {key}: ")
    assert all(name in message for name in names), message


def test_unknown_metric_names_the_valid_ones(tmp_path):
    spec = write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [1]\n', metrics=["makespan_s", "makespan"])
    with pytest.raises(InputError, match=r"sweep\.metrics\[1\]: unknown metric 'makespan'; valid ones: ") as err:
        load_sweep(spec)
    assert str(err.value).startswith(str(spec)) and all(m in str(err.value) for m in METRICS)


@pytest.mark.parametrize(
    ("spec", "key", "message"),
    [
        ("[sweep\n", "", "not valid TOML"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\ncolour = 1\n'
         '[sweep.grid]\n"options.seed" = [1]\n', "sweep.colour", "unknown key; expected one of grid, metrics, random, scenario, zip"),
        ('[sweep]\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = [1]\n', "sweep.scenario",
         "expected the base scenario's path"),
        ('[sweep]\nscenario = "nope.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = [1]\n',
         "sweep.scenario", "cannot read the scenario"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = "makespan_s"\n[sweep.grid]\n"options.seed" = [1]\n',
         "sweep.metrics", "expected a non-empty array of metric names"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n', "sweep", "expected at least one axis"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = []\n',
         "sweep.grid.options.seed", "non-empty array"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = 3\n',
         "sweep.grid.options.seed", "expected an array of values"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.zip]\n"options.seed" = [1, 2]\n'
         '"options.routing" = ["ecmp"]\n', "sweep.zip", "equal lengths, got options.seed: 2, options.routing: 1"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = [1]\n'
         '[sweep.zip]\n"options.seed" = [2]\n', "sweep.zip.options.seed", "more than one of grid, zip and random"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nseed = 1\n'
         '"options.seed" = {int_uniform = [0, 3]}\n', "sweep.random.samples", "expected an integer >= 1"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n',
         "sweep.random", "expected at least one field to draw"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n'
         '"options.seed" = {normal = [0, 3]}\n', "sweep.random.options.seed.normal",
         "expected a distribution ({uniform = [...]}, {log_uniform"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n'
         '"options.seed" = {int_uniform = [0, 3], choice = [1]}\n', "sweep.random.options.seed",
         "expected one of uniform, log_uniform, int_uniform, choice"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n'
         '"workload.collective.0.size_bytes" = {log_uniform = [0, 3]}\n',
         "sweep.random.workload.collective.0.size_bytes.log_uniform", "expected 0 < low"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n'
         '"options.seed" = {int_uniform = [0.5, 3]}\n', "sweep.random.options.seed.int_uniform",
         "two integers with low <= high"),
    ],
)
def test_bad_specs_name_file_and_key(tmp_path, spec, key, message):
    (tmp_path / "base.toml").write_text(BASE)
    path = tmp_path / "sweep.toml"
    path.write_text(spec)
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert str(err.value).startswith(f"{path}: {key}: " if key else f"{path}: "), str(err.value)
    assert message in str(err.value)


SIZES = '[sweep.grid]\n"topology.figure" = ["nominal", "effective"]\n"workload.collective.0.size_bytes" = [1, 3, 5]\n'


def fake_rows(tmp_path: Path, name: str, **options) -> dict[str, np.ndarray]:
    sweep = load_sweep(write_spec(tmp_path, SIZES))
    outcome = run_sweep(sweep, tmp_path / f"{name}.h5", runner=fake_runner, **options)
    assert (outcome.n_runs, outcome.n_ran, outcome.n_skipped, outcome.n_failed) == (6, 6, 0, 2)
    return read_results(outcome.output).columns


def test_results_table_and_journal(tmp_path):
    columns = fake_rows(tmp_path, "serial", workers=1)
    assert list(columns) == ["index", "key", "topology.figure", "workload.collective.0.size_bytes", "makespan_s",
                             "n_events", "status", "error", "wall_s"]
    assert columns["index"].tolist() == list(range(6))
    assert columns["topology.figure"].tolist() == ["nominal"] * 3 + ["effective"] * 3
    assert columns["workload.collective.0.size_bytes"].dtype == np.int64
    assert columns["status"].tolist() == ["ok", "error", "ok"] * 2
    assert columns["error"].tolist() == ["", "size 3 is not allowed here", ""] * 2
    np.testing.assert_array_equal(columns["makespan_s"], [1 + 1e-9, np.nan, 1 + 5e-9, 1e-9, np.nan, 5e-9])
    assert (columns["wall_s"] >= 0).all()
    lines = journal_path(tmp_path / "serial.h5").read_text().splitlines()
    assert sorted(json.loads(line)["key"] for line in lines) == sorted(columns["key"])


def test_results_as_a_dataframe(tmp_path):
    pd = pytest.importorskip("pandas")
    columns = fake_rows(tmp_path, "serial", workers=1)
    frame = read_results(tmp_path / "serial.h5").to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(columns)
    assert frame["status"].tolist() == columns["status"].tolist()


def test_reading_bad_results_and_journals(tmp_path):
    (tmp_path / "bad.journal").write_text('{"key": "a"}\n{"key": "b", "par\n')
    with pytest.raises(InputError, match=r"bad\.journal: line 1: not a sweep journal record"):
        read_journal(tmp_path / "bad.journal")
    with pytest.raises(InputError, match=r"missing\.h5: cannot open the results"):
        read_results(tmp_path / "missing.h5")


def test_local_pool_gives_the_serial_rows(tmp_path):
    serial = fake_rows(tmp_path, "serial", workers=1)
    pool = fake_rows(tmp_path, "pool", workers=2)
    for name in serial:
        if name != "wall_s":
            np.testing.assert_array_equal(pool[name], serial[name], err_msg=name)


def test_dask_local_cluster_gives_the_serial_rows(tmp_path):
    pytest.importorskip("distributed")
    serial = fake_rows(tmp_path, "serial", workers=1)
    dask = fake_rows(tmp_path, "dask", workers=2, dask="local")
    for name in serial:
        if name != "wall_s":
            np.testing.assert_array_equal(dask[name], serial[name], err_msg=name)


def test_dask_scheduler_address(tmp_path):
    distributed = pytest.importorskip("distributed")
    import dask
    serial = fake_rows(tmp_path, "serial", workers=1)
    in_process = {"n_workers": 1, "threads_per_worker": 2, "processes": False, "dashboard_address": ":0"}
    with distributed.LocalCluster(**in_process) as cluster:
        remote = fake_rows(tmp_path, "remote", dask=cluster.scheduler_address)
    np.testing.assert_array_equal(remote["makespan_s"], serial["makespan_s"])
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            pytest.raises(InputError, match="cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'"):
        run_sweep(load_sweep(tmp_path / "sweep.toml"), tmp_path / "none.h5", runner=fake_runner,
                  dask="tcp://127.0.0.1:1")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream", [io.StringIO, Terminal])
def test_progress_bar(tmp_path, stream):
    progress = stream()
    run_sweep(load_sweep(write_spec(tmp_path, SIZES)), tmp_path / "out.h5", runner=fake_runner, workers=1,
              progress=progress)
    last = progress.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert re.fullmatch(r"sweep 6/6 \[#{24}\] [0-9.]+ runs/s ETA 0:00:00, 2 failed", last), last
    assert ("\r" in progress.getvalue()) == (stream is Terminal)


def test_rerun_skips_journalled_runs_and_drops_a_torn_line(tmp_path):
    first = fake_rows(tmp_path, "out", workers=1)
    journal = journal_path(tmp_path / "out.h5")
    with open(journal, "a") as file:
        file.write('{"key": "abc", "par')
    assert len(read_journal(journal)) == 6
    sweep = load_sweep(tmp_path / "sweep.toml")
    outcome = run_sweep(sweep, tmp_path / "out.h5", runner=refusing_runner, workers=2)
    assert (outcome.n_ran, outcome.n_skipped, outcome.n_failed) == (0, 6, 2)
    assert journal.read_text().endswith("}\n")
    again = read_results(tmp_path / "out.h5").columns
    for name in first:
        np.testing.assert_array_equal(again[name], first[name], err_msg=name)


def test_real_runs_match_the_scenario_and_nccl(tmp_path):
    metrics = ["makespan_s", "busbw_Bps", "utilization_max_scale_up", "utilization_mean_scale_out", "fct_p99_s"]
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.size_bytes" = [1048576, 4194304]\n', metrics)
    sweep = load_sweep(spec)
    outcome = run_sweep(sweep, tmp_path / "out.h5", workers=1, traces=tmp_path / "traces")
    assert outcome.n_failed == 0
    columns = read_results(outcome.output).columns
    for row, size in enumerate((1048576, 4194304)):
        base = tmp_path / f"s{size}.toml"
        base.write_text(BASE.replace("1048576", str(size)))
        scenario = load_scenario(base)
        result = run_scenario(scenario).result
        assert columns["makespan_s"][row] == result.makespan_s
        assert columns["fct_p99_s"][row] == result.fct_percentiles((99.0,))[99.0]
        assert columns["busbw_Bps"][row] == busbw_Bps("all_reduce", size, result.makespan_s, 8)
        scale_up = result.link_utilization()[scenario.topology.link_tier == 0]
        assert columns["utilization_max_scale_up"][row] == scale_up.max() > 0
        assert math.isnan(columns["utilization_mean_scale_out"][row])  # one server: no scale-out links
        trace = open_trace(tmp_path / "traces" / f"{columns['key'][row]}.h5")
        assert trace.makespan_s == result.makespan_s


def flowsim_sweep(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="flowsim")
    sweep_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sweep", *map(str, argv)])
    return args.func(args)


def test_a_failing_run_is_recorded_and_the_cli_says_so(tmp_path, capsys):
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.algorithm" = ["ring", "bogus", "tree"]\n',
                      ["makespan_s", "busbw_Bps"])
    assert flowsim_sweep(spec, "-o", tmp_path / "out.h5", "--workers", "1") == 1
    assert "3 runs (3 ran, 1 failed)" in capsys.readouterr().out
    columns = read_results(tmp_path / "out.h5").columns
    assert columns["status"].tolist() == ["ok", "error", "ok"]
    assert "bogus" in columns["error"][1] and str(tmp_path / "base.toml") in columns["error"][1]
    assert np.isnan(columns["makespan_s"][1]) and (columns["makespan_s"][[0, 2]] > 0).all()


def test_busbw_needs_one_collective(tmp_path):
    two = BASE + '\n[[workload.collective]]\nop = "all_gather"\nsize_bytes = 4096\nname = "ag"\n'
    spec = write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [0]\n', ["makespan_s", "busbw_Bps"], base=two)
    with pytest.raises(InputError, match=r"sweep\.metrics\[1\]: busbw_Bps needs a workload of exactly one"):
        load_sweep(spec)


KILL_SIZES = [2**k for k in range(12, 12 + 40)]
# Enough runs that the sweep cannot finish them all in the moment between the test seeing the
# third journal line and Ctrl-C arriving, even on a loaded machine.
INTERRUPT_SIZES = [4096 + i for i in range(2000)]

SWEEP_CLI = (
    "import argparse, sys; from flowsim.commands import sweep; p = argparse.ArgumentParser(); "
    "sweep.add_parser(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
)


def test_ctrl_c_writes_the_finished_runs(tmp_path):
    spec = write_spec(tmp_path, f'[sweep.zip]\n"workload.collective.0.size_bytes" = {INTERRUPT_SIZES}\n')
    output, journal = tmp_path / "out.h5", journal_path(tmp_path / "out.h5")
    command = [sys.executable, "-c", SWEEP_CLI, "sweep", str(spec), "-o", str(output), "--workers", "2", "-q"]
    # Its own session, so that SIGINT reaches the sweep and its workers as Ctrl-C in a terminal does.
    child = subprocess.Popen(command, start_new_session=True, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while complete_lines(journal) < 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(child.pid, signal.SIGINT)
    assert child.wait(timeout=60) == 130
    assert "rerun the command to resume" in child.stderr.read()
    columns = read_results(output).columns
    assert 3 <= len(columns["key"]) < len(INTERRUPT_SIZES)
    assert sorted(columns["key"]) == sorted(read_journal(journal))
    assert (np.diff(columns["index"]) > 0).all() and (columns["status"] == "ok").all()


def complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_then_resume_keeps_every_row_once(tmp_path):
    spec = write_spec(tmp_path, f'[sweep.zip]\n"workload.collective.0.size_bytes" = {KILL_SIZES}\n')
    output, journal = tmp_path / "out.h5", journal_path(tmp_path / "out.h5")
    command = [sys.executable, "-c", SWEEP_CLI, "sweep", str(spec), "-o", str(output), "--workers", "1", "-q"]
    child = subprocess.Popen(command)
    deadline = time.monotonic() + 300
    while complete_lines(journal) < 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    killed_at = complete_lines(journal)
    assert 3 <= killed_at < len(KILL_SIZES), "the sweep was not killed in the middle"
    assert not output.exists()

    assert subprocess.run(command, check=False).returncode == 0
    keys = [json.loads(line)["key"] for line in journal.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(KILL_SIZES)
    columns = read_results(output).columns
    assert columns["index"].tolist() == list(range(len(KILL_SIZES)))
    assert columns["workload.collective.0.size_bytes"].tolist() == KILL_SIZES
    assert (columns["status"] == "ok").all()
    fresh = run_sweep(load_sweep(spec), tmp_path / "fresh.h5", workers=1)
    expected = read_results(fresh.output).columns
    for name in ("key", "makespan_s", "n_events"):
        np.testing.assert_array_equal(columns[name], expected[name], err_msg=name)
