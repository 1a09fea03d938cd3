"""Sweeps: spec expansion and errors, the journal and results table, local pool and Dask
against serial, a failing run, and a sweep killed with SIGKILL then resumed; rates mode
(batched all-at-once max-min) against a slow per-run loop over ``max_min_rates``."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import flowsim.sweep
from flowsim import batched, max_min_rates
from flowsim.batched import BackendUnavailable, BatchProblem, available_backends
from flowsim.collectives.report import busbw_Bps
from flowsim.commands import sweep as sweep_cli
from flowsim.errors import InputError
from flowsim.files import held_exclusively
from flowsim.hardware import LinkTier
from flowsim.routing import Router
from flowsim.scenario import load_scenario, run_scenario, scenario_from_document
from flowsim.sweep import (
    METRICS,
    RATE_METRICS,
    RunTask,
    canonical_json,
    journal_path,
    load_sweep,
    read_journal,
    read_results,
    run_sweep,
    write_results,
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


def dying_runner(task: RunTask) -> dict[str, float]:
    """:func:`fake_runner`, except that the nominal run of size 5 kills its process, as the
    out-of-memory killer would."""
    document = task.document
    if document["topology"]["figure"] == "nominal" and document["workload"]["collective"][0]["size_bytes"] == 5:
        os._exit(9)
    return fake_runner(task)


def refusing_runner(task: RunTask) -> dict[str, float]:
    raise AssertionError(f"run {task.key} should have been skipped")


def tracing_runner(task: RunTask) -> dict[str, float]:
    """:func:`fake_runner` that also writes a stand-in trace where the task asks for one."""
    values = fake_runner(task)
    if task.trace_path is not None:
        Path(task.trace_path).write_text(task.key)
    return values


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


def test_random_samples_default_to_one_and_seed_to_zero(tmp_path):
    draw = '"workload.collective.0.size_bytes" = {log_uniform = [1e3, 1e9]}\n'
    omitted = load_sweep(write_spec(tmp_path, f"[sweep.random]\n{draw}"))
    seeded = load_sweep(write_spec(tmp_path, f"[sweep.random]\nseed = 5\n{draw}"))
    explicit = load_sweep(write_spec(tmp_path, f"[sweep.random]\nsamples = 1\nseed = 0\n{draw}"))
    assert len(omitted.runs) == len(seeded.runs) == 1
    assert [r.params for r in omitted.runs] == [r.params for r in explicit.runs]
    assert len(load_sweep(write_spec(tmp_path, f"[sweep.random]\nsamples = 3\n{draw}")).runs) == 3


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
    message = r"sweep\.metrics\[1\]: unknown metric 'makespan'; valid ones with solve = 'time': "
    with pytest.raises(InputError, match=message) as err:
        load_sweep(spec)
    assert str(err.value).startswith(str(spec)) and all(m in str(err.value) for m in METRICS)


@pytest.mark.parametrize(
    ("spec", "key", "message"),
    [
        ("[sweep\n", "", "not valid TOML"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\ncolour = 1\n'
         '[sweep.grid]\n"options.seed" = [1]\n', "sweep.colour",
         "unknown key; expected one of grid, metrics, random, scenario, solve, zip"),
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
        # One path spelled twice in an axis kept the last spelling's values only; a path and one
        # inside it showed in the table values that were not run.
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = [1, 2]\n'
         'options.seed = [3]\n', "sweep.grid.options.seed", "given twice in sweep.grid (a quoted key and a dotted"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.zip]\n'
         '"workload.collective.00.size_bytes" = [1]\n"workload.collective.0.size_bytes" = [2]\n',
         "sweep.zip.workload.collective.0.size_bytes", "sweeps what sweep.zip.workload.collective.00.size_bytes sweeps"),
        # A missing array indexed was made a table of "0" keys, which the scenario refused as
        # "expected an array ..., got a table" on every run.
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.fail.0" = ["n0.nic0"]\n',
         "sweep.grid.options.fail.0", "the scenario has no options.fail to index with 0; sweep options.fail itself"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.degrade" = [{}]\n'
         '[sweep.zip]\n"options.degrade.n0.nic3" = [0.25]\n', "sweep.zip.options.degrade.n0.nic3",
         "sweeps what sweep.grid.options.degrade sweeps (one lies in the other)"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 0\nseed = 1\n'
         '"options.seed" = {int_uniform = [0, 3]}\n', "sweep.random.samples", "expected an integer >= 1, got an integer 0"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nseed = -1\n'
         '"options.seed" = {int_uniform = [0, 3]}\n', "sweep.random.seed", "expected an integer >= 0, got an integer -1"),
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n',
         "sweep.random", "expected at least one field to draw"),
        # Every run is built before the first starts: a sweep too large fails at once.
        ('[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 1000001\nseed = 1\n'
         '"options.seed" = {int_uniform = [0, 3]}\n', "sweep.random.samples",
         "1,000,001 samples; a sweep may have at most 1,000,000 runs"),
        (f'[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.grid]\n"options.seed" = {list(range(1001))}\n'
         f'"options.time_rel_tol" = {[0.0] * 100}\n[sweep.zip]\n"options.routing" = {["ecmp"] * 10}\n'
         '[sweep.random]\nsamples = 2\nseed = 1\n"workload.collective.0.size_bytes" = {int_uniform = [1, 3]}\n',
         "sweep", "2,002,000 runs (1,001 values of sweep.grid.options.seed x 100 values of "
         "sweep.grid.options.time_rel_tol x 10 of sweep.zip x 2 samples); a sweep may have at most 1,000,000: "
         "split it into several sweeps"),
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
        *[(f'[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s"]\n[sweep.random]\nsamples = 2\nseed = 1\n'
           f'"workload.collective.0.size_bytes" = {{{kind} = {bounds}}}\n',
           f"sweep.random.workload.collective.0.size_bytes.{kind}", message)
          for kind, bounds, message in [
              ("log_uniform", "[1e3, nan]", "expected finite numbers, got the bound nan in [1000.0, nan]"),
              ("uniform", "[nan, 1e6]", "expected finite numbers, got the bound nan in [nan, 1000000.0]"),
              ("uniform", "[1, inf]", "expected finite numbers, got the bound inf in [1, inf]"),
              ("log_uniform", "[-inf, 1]", "expected finite numbers, got the bound -inf"),
              ("uniform", f"[0, {10**400}]", "expected finite numbers, got the bound 1000"),
              ("uniform", "[-1e308, 1e308]", "expected high - low to be a finite number"),
              ("log_uniform", "[-1, 3]", "expected 0 < low, got [-1, 3]"),
              ("int_uniform", f"[0, {2**64}]", f"expected integers from -2**63 to 2**63 - 1, got the bound {2**64}"),
              ("int_uniform", "[3, 1]", "two integers with low <= high, got [3, 1]"),
              ("choice", "[]", "expected a non-empty array, got []"),
          ]],
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


@pytest.mark.parametrize(("base", "message"), [
    (BASE + "[options]\nrecord_flowz = true\n", "base.toml: options.record_flowz: unknown key"),
    (BASE + "[optoins]\nseed = 1\n", "base.toml: optoins: unknown key"),
    (BASE.replace("[topology]", "[scenario]\nnmae = 'x'\n[topology]"), "base.toml: scenario.nmae: unknown key"),
    # A sweep that names itself as its scenario.
    ('[sweep]\nscenario = "base.toml"\n[sweep.grid]\n"topology.figure" = ["nominal"]\n',
     "base.toml: sweep: unknown key"),
])
def test_a_misspelt_section_or_option_of_the_base_scenario_stops_the_sweep_before_any_run(tmp_path, base, message):
    # Every run failed alike with it ('failed: run N ... unknown key' once a run), and a table
    # of failed rows was written.
    spec = write_spec(tmp_path, SIZES, base=base)
    with pytest.raises(InputError, match=re.escape(message)):
        load_sweep(spec)


def allowing_runner(task: RunTask) -> dict[str, float]:
    """:func:`fake_runner` once size 3 is allowed (the cause of its failures fixed)."""
    size = task.document["workload"]["collective"][0]["size_bytes"]
    return {"makespan_s": size * 1e-9 + 2.0, "n_events": 0.0}


def test_a_resumed_sweep_keeps_failed_runs_unless_asked_to_retry_them(tmp_path, capsys):
    fake_rows(tmp_path, "out", workers=1)
    sweep = load_sweep(tmp_path / "sweep.toml")
    kept = run_sweep(sweep, tmp_path / "out.h5", runner=refusing_runner, workers=1)
    assert (kept.n_ran, kept.n_skipped, kept.n_failed) == (0, 6, 2)
    # Only the two failed runs (size 3) run again; the others keep their rows.
    retried = run_sweep(sweep, tmp_path / "out.h5", runner=allowing_runner, workers=1, retry_failed=True)
    assert (retried.n_ran, retried.n_skipped, retried.n_failed) == (2, 4, 0)
    columns = read_results(tmp_path / "out.h5").columns
    assert columns["status"].tolist() == ["ok"] * 6
    np.testing.assert_array_equal(columns["makespan_s"], [1 + 1e-9, 2 + 3e-9, 1 + 5e-9, 1e-9, 2 + 3e-9, 5e-9])
    # From the command line.
    from flowsim.cli import main

    assert main(["sweep", str(tmp_path / "sweep.toml"), "-o", str(tmp_path / "out.h5"), "--retry-failed", "-q"]) == 0
    assert "6 runs (0 ran, 6 already done) -> " in capsys.readouterr().out


def test_flowsim_plot_of_a_results_table_says_how_to_read_it(tmp_path, capsys):
    # 'flowsim plot' of a sweep's table said only "not a flowsim trace".
    from flowsim.cli import main

    fake_rows(tmp_path, "serial", workers=1)
    table = tmp_path / "serial.h5"
    assert main(["plot", str(table), "--kind", "utilization", "-o", str(tmp_path / "u.png")]) == 2
    assert capsys.readouterr().err == (
        f"flowsim: error: {table}: a flowsim sweep's results table, not a trace: flowsim.sweep.read_results("
        f"{str(table)!r}).to_pandas() reads it (docs/sweep-format.md); 'flowsim sweep --traces' writes a trace of "
        "each run, which this plots\n")
    assert not (tmp_path / "u.png").exists()


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


def test_a_run_that_kills_its_worker_fails_alone_and_the_others_go_on(tmp_path):
    # A dead worker broke the pool: the sweep ended with BrokenProcessPool and the runs not
    # yet finished never ran.
    serial = fake_rows(tmp_path, "serial", workers=1)
    outcome = run_sweep(load_sweep(tmp_path / "sweep.toml"), tmp_path / "pool.h5", runner=dying_runner, workers=2)
    assert (outcome.n_runs, outcome.n_ran, outcome.n_failed) == (6, 6, 3)
    pool = read_results(outcome.output).columns
    died = [i for i, error in enumerate(pool["error"]) if "worker process running it died" in error]
    assert died == [2]  # nominal, size 5
    for name in ("makespan_s", "status", "error"):
        others = [i for i in range(6) if i != 2]
        np.testing.assert_array_equal(pool[name][others], serial[name][others], err_msg=name)


def test_dask_local_cluster_gives_the_serial_rows(tmp_path):
    pytest.importorskip("distributed")
    serial = fake_rows(tmp_path, "serial", workers=1)
    dask = fake_rows(tmp_path, "dask", workers=2, dask="local")
    for name in serial:
        if name != "wall_s":
            np.testing.assert_array_equal(dask[name], serial[name], err_msg=name)


def test_a_run_that_kills_its_dask_worker_fails_alone_and_the_others_go_on(tmp_path):
    pytest.importorskip("distributed")
    import dask
    serial = fake_rows(tmp_path, "serial", workers=1)
    # Dask gives up on a task at once rather than after killing three more workers.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        outcome = run_sweep(
            load_sweep(tmp_path / "sweep.toml"), tmp_path / "dask.h5", runner=dying_runner, workers=2, dask="local"
        )
    assert (outcome.n_runs, outcome.n_ran, outcome.n_failed) == (6, 6, 3)
    rows = read_results(outcome.output).columns
    assert [i for i, error in enumerate(rows["error"]) if "worker process running it died" in error] == [2]
    others = [i for i in range(6) if i != 2]
    np.testing.assert_array_equal(rows["makespan_s"][others], serial["makespan_s"][others])


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
                  dask="tcp://127.0.0.1:1", traces=tmp_path / "none-traces")
    # Nothing ran, so nothing is left behind: an empty table and journal used to be.
    assert not any(path.name.startswith("none") for path in tmp_path.iterdir())


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


def test_busbw_takes_the_collective_as_the_scenario_spells_it(tmp_path):
    # A scenario takes "allreduce" and "alltoall_perf" (NCCL's and nccl-tests' spellings);
    # the metric failed every run on them ("unknown collective").
    for spelled, name in (("allreduce", "all_reduce"), ("alltoall_perf", "all_to_all")):
        base = BASE.replace('op = "all_reduce"', f'op = "{spelled}"')
        spec = write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [0]\n', ["makespan_s", "busbw_Bps"], base=base)
        outcome = run_sweep(load_sweep(spec), tmp_path / f"{spelled}.h5", workers=1)
        assert outcome.n_failed == 0
        columns = read_results(outcome.output).columns
        assert columns["busbw_Bps"][0] == busbw_Bps(name, 1048576, columns["makespan_s"][0], 8) > 0


def flowsim_sweep(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="flowsim")
    sweep_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sweep", *map(str, argv)])
    return args.func(args)


def test_a_failing_run_is_recorded_and_the_cli_says_so(tmp_path, capsys):
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.algorithm" = ["ring", "bogus", "tree"]\n',
                      ["makespan_s", "busbw_Bps"])
    assert flowsim_sweep(spec, "-o", tmp_path / "out.h5", "--workers", "1") == 1
    out, err = capsys.readouterr()
    assert "3 runs (3 ran, 1 failed)" in out
    # Which run failed and why, without opening the table: the run, its parameters, its error.
    failed = [line for line in err.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 1 and failed[0].startswith('failed: run 1 (workload.collective.0.algorithm = "bogus"): ')
    assert "bogus" in failed[0].split("): ", 1)[1]
    assert err.splitlines()[-1] == "a rerun keeps the failed runs' errors; --retry-failed runs them again"
    columns = read_results(tmp_path / "out.h5").columns
    assert columns["status"].tolist() == ["ok", "error", "ok"]
    assert "bogus" in columns["error"][1] and str(tmp_path / "base.toml") in columns["error"][1]
    assert np.isnan(columns["makespan_s"][1]) and (columns["makespan_s"][[0, 2]] > 0).all()


def test_integers_past_int64_are_kept_as_text(tmp_path):
    # A grid value of 10**20 stopped the table's writing with a Python error (int64 cannot
    # hold it), after the runs; 2**53 + 1 among floats would have been rounded.
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.size_bytes" = [1, 100000000000000000000]\n'
                                '"options.seed" = [0.5, 9007199254740993]\n')
    outcome = run_sweep(load_sweep(spec), tmp_path / "out.h5", runner=fake_runner, workers=1)
    columns = read_results(outcome.output).columns
    assert columns["workload.collective.0.size_bytes"].tolist() == ["1", "1"] + ["100000000000000000000"] * 2
    assert columns["options.seed"].tolist() == ["0.5", "9007199254740993"] * 2
    assert columns["status"].tolist() == ["ok"] * 4


def test_inspect_summarises_a_results_table(tmp_path, capsys):
    # 'flowsim inspect' on a sweep's table said "not a flowsim trace"; it now shows the runs.
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.algorithm" = ["ring", "bogus", "tree"]\n')
    assert flowsim_sweep(spec, "-o", tmp_path / "out.h5", "--workers", "1", "-q") == 1
    capsys.readouterr()
    from flowsim.cli import main

    assert main(["inspect", str(tmp_path / "out.h5"), "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == ["runs: 3 of 3 finished (2 ok, 1 failed)", "parameters: workload.collective.0.algorithm",
                          "metrics: makespan_s, n_events"]
    assert lines[4].split() == ["index", "workload.collective.0.algorithm", "makespan_s", "n_events", "status"]
    assert lines[5].split()[:2] == ["0", "ring"] and lines[5].split()[4] == "ok"
    assert lines[6].split() == ["1", "bogus", "nan", "nan", "error"]
    assert lines[7].startswith("... 1 more rows: flowsim.sweep.read_results(")
    assert lines[8].startswith("error of run 1: ") and "bogus" in lines[8] and len(lines) == 9


def test_inspect_summarises_a_table_of_no_finished_runs(tmp_path, capsys):
    # A sweep interrupted before its first run finished writes a table of no rows.
    sweep = load_sweep(write_spec(tmp_path, SIZES))
    write_results(tmp_path / "out.h5", sweep, {})
    from flowsim.cli import main

    assert main(["inspect", str(tmp_path / "out.h5")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "runs: 0 of 6 finished (0 ok, 0 failed)" and len(lines) == 5


def test_a_damaged_results_table_is_named_in_one_line(tmp_path):
    sweep = load_sweep(write_spec(tmp_path, SIZES))
    path = write_results(tmp_path / "out.h5", sweep, {})
    with h5py.File(path, "a") as root:
        del root["runs"]["status"]
    with pytest.raises(InputError, match=r"out\.h5: damaged sweep results table: .*'status'"):
        read_results(path)
    with h5py.File(path, "a") as root:
        root["runs"].attrs["columns"] = json.dumps(["index", "key", "error"])
    with pytest.raises(InputError, match=r"out\.h5: damaged sweep results table: no 'status' column"):
        read_results(path)


def test_the_cli_names_three_failed_runs_and_counts_the_rest(tmp_path, capsys):
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.algorithm" = ["a", "b", "c", "d", "e"]\n')
    assert flowsim_sweep(spec, "-o", tmp_path / "out.h5", "--workers", "1", "-q") == 1
    failed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("failed: ")]
    assert [line.split(" (")[0] for line in failed[:3]] == ["failed: run 0", "failed: run 1", "failed: run 2"]
    assert failed[3:] == ["failed: 2 more runs (the table's 'error' column says why)"]


def test_busbw_needs_one_collective(tmp_path):
    two = BASE + '\n[[workload.collective]]\nop = "all_gather"\nsize_bytes = 4096\nname = "ag"\n'
    spec = write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [0]\n', ["makespan_s", "busbw_Bps"], base=two)
    with pytest.raises(InputError, match=r"sweep\.metrics\[1\]: busbw_Bps needs a workload of exactly one"):
        load_sweep(spec)


@pytest.mark.parametrize("metric", ["step_time_s", "exposed_communication_s"])
def test_training_metrics_need_a_training_step(tmp_path, metric):
    # Without one, step_time_s was the makespan and exposed_communication_s all of it.
    spec = write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [0]\n', ["makespan_s", metric])
    with pytest.raises(InputError, match=rf"sweep\.metrics\[1\]: {metric} is a training step's, and the scenario "
                                         r"has no \[workload\.training\]"):
        load_sweep(spec)
    training = BASE.split("[[workload.collective]]")[0] + (
        "[workload.training]\nlayers = 1\nforward_s = 1e-3\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\n")
    assert load_sweep(write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [0]\n', [metric], base=training)).runs


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


def pool_workers(pid: int) -> list[int]:
    """The process-pool workers among the children of ``pid`` (Linux's /proc)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="lists a process's children through Linux's /proc")
def test_sigkill_of_a_sweep_takes_its_pool_workers_with_it(tmp_path):
    # Issue 30: reparented workers of a killed sweep ran on for minutes with their memory.
    spec = write_spec(tmp_path, f'[sweep.zip]\n"workload.collective.0.size_bytes" = {KILL_SIZES}\n')
    journal = journal_path(tmp_path / "out.h5")
    command = [sys.executable, "-c", SWEEP_CLI, "sweep", str(spec), "-o", str(tmp_path / "out.h5"), "--workers", "2",
               "-q"]
    child = subprocess.Popen(command)
    deadline = time.monotonic() + 300
    while complete_lines(journal) < 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    workers = pool_workers(child.pid)
    assert len(workers) == 2 and child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 10
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [w for w in workers if alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived their sweep"


def test_an_edited_flow_list_runs_its_runs_again(tmp_path):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9, 4e9]\n', ["makespan_s"],
                        solve="time")
    output, flows = tmp_path / "out.h5", tmp_path / "parking.csv"
    flows.write_text(PARKING_FLOWS.replace("3e9", "3e9x"))
    bad = run_sweep(load_sweep(spec), output, workers=1)
    assert (bad.n_ran, bad.n_failed) == (2, 2)
    assert "line 4, column 'size_bytes'" in read_results(output).columns["error"][0]
    flows.write_text(PARKING_FLOWS)
    fixed = run_sweep(load_sweep(spec), output, workers=1)
    assert (fixed.n_ran, fixed.n_skipped, fixed.n_failed) == (2, 0, 0)
    before = read_results(output).columns["makespan_s"]
    flows.write_text(PARKING_FLOWS.replace("3e9", "6e9"))
    bigger = run_sweep(load_sweep(spec), output, workers=1)
    assert (bigger.n_ran, bigger.n_skipped) == (2, 0)
    assert (read_results(output).columns["makespan_s"] > before).all()
    assert run_sweep(load_sweep(spec), output, runner=refusing_runner, workers=1).n_skipped == 2


def test_keys_cover_the_content_of_the_files_runs_read(tmp_path):
    axes = '[sweep.grid]\n"workload.flows" = ["parking.csv", "other.csv"]\n'
    spec = parking_spec(tmp_path, axes)
    sweep = load_sweep(spec)
    assert sweep.files == (tmp_path.resolve() / "parking.csv", tmp_path.resolve() / "other.csv")
    (tmp_path / "other.csv").write_text(OTHER_FLOWS + "g6,a,c,1e9,,,,\n")
    edited = load_sweep(spec)
    assert edited.runs[0].key == sweep.runs[0].key and edited.runs[1].key != sweep.runs[1].key
    # Content, not paths: the same files elsewhere give the same keys.
    (tmp_path / "copy").mkdir()
    elsewhere = parking_spec(tmp_path / "copy", axes)
    (tmp_path / "copy" / "other.csv").write_text((tmp_path / "other.csv").read_text())
    assert [run.key for run in load_sweep(elsewhere).runs] == [run.key for run in edited.runs]
    # A run that reads no file keeps the key it had before files counted.
    plain = load_sweep(write_spec(tmp_path, '[sweep.grid]\n"options.seed" = [1]\n'))
    salt = hashlib.sha256(canonical_json(plain.document).encode()).hexdigest()
    assert plain.runs[0].key == hashlib.sha256(f'{salt}\n{{"options.seed":1}}'.encode()).hexdigest()


def test_traces_asked_for_after_the_runs_are_written(tmp_path):
    first = fake_rows(tmp_path, "out", workers=1)
    output, traces = tmp_path / "out.h5", tmp_path / "traces"
    journal = journal_path(output).read_text()
    sweep = load_sweep(tmp_path / "sweep.toml")
    outcome = run_sweep(sweep, output, runner=tracing_runner, workers=1, traces=traces)
    assert (outcome.n_ran, outcome.n_skipped, outcome.n_retraced, outcome.untraced) == (0, 6, 4, ())
    ok = first["key"][first["status"] == "ok"]
    assert sorted(path.name for path in traces.iterdir()) == sorted(f"{key}.h5" for key in ok)
    # The rows, wall_s included, are the journal's: the runs ran again for their traces only.
    assert journal_path(output).read_text() == journal
    again = read_results(output).columns
    for name in first:
        np.testing.assert_array_equal(again[name], first[name], err_msg=name)
    assert run_sweep(sweep, output, runner=refusing_runner, workers=1, traces=traces).n_retraced == 0


def test_cli_says_which_traces_it_could_not_write(tmp_path, capsys, monkeypatch):
    spec = write_spec(tmp_path, '[sweep.grid]\n"workload.collective.0.size_bytes" = [1048576, 2097152]\n',
                      ["makespan_s"])
    output, traces = tmp_path / "out.h5", tmp_path / "traces"
    assert flowsim_sweep(spec, "-o", output, "--workers", "1", "-q") == 0
    before = read_results(output).columns

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(flowsim.sweep.runs, "write_trace", full_disk)
    assert flowsim_sweep(spec, "-o", output, "--workers", "1", "-q", "--traces", traces) == 1
    printed = capsys.readouterr()
    assert "2 runs (0 ran, 2 already done, 2 of them ran again for their traces) -> " in printed.out
    assert (f"trace not written: run 1 ({before['key'][1]}): OSError: [Errno 28] No space left on device"
            in printed.err)
    np.testing.assert_array_equal(read_results(output).columns["wall_s"], before["wall_s"])
    monkeypatch.undo()
    assert flowsim_sweep(spec, "-o", output, "--workers", "1", "-q", "--traces", traces) == 0
    assert "2 of them ran again for their traces" in capsys.readouterr().out
    assert open_trace(traces / f"{before['key'][1]}.h5").makespan_s == before["makespan_s"][1]


def test_output_paths_are_checked_before_any_run(tmp_path):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9]\n', ["makespan_s"],
                        solve="time")
    sweep = load_sweep(spec)
    (tmp_path / "results").mkdir()
    (tmp_path / "dir.h5.journal").mkdir()
    files = {path: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    cases = [
        ("results", None, "results': the results table must be a file name, not a directory"),
        ("parking.toml", None, "the results table would replace the input file"),
        ("parking.csv", None, "the results table would replace the input file"),
        ("sweep.toml", None, "the results table would replace the input file"),
        ("dir.h5", None, "dir.h5.journal': the sweep journal must be a file name, not a directory"),
        ("out.h5", "parking.csv", "parking.csv: the traces must go to a directory, and this is a file"),
        ("out.h5", "no/traces", "traces: cannot create the traces directory: "),
        ("out.h5", "out.h5", "out.h5: the traces directory is also the results table"),
    ]
    for output, traces, message in cases:
        with pytest.raises(InputError, match=re.escape(message)):
            run_sweep(sweep, tmp_path / output, runner=refusing_runner, workers=1,
                      traces=None if traces is None else tmp_path / traces)
    assert {path: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()} == files
    assert sorted(path.name for path in tmp_path.iterdir() if path.is_dir()) == ["dir.h5.journal", "results"]


# --- rates mode ---------------------------------------------------------------------------------

#: The parking lot of docs/model.md case 3: link A (1 GB/s) carries f1 and f2, link B (2 GB/s) f1 and f3.
PARKING = """
[topology]
servers = [{name = "box"}]
nodes = [{name = "a", kind = "gpu", server = "box"}, {name = "b", kind = "pcie_switch", server = "box"},
         {name = "c", kind = "gpu", server = "box"}]
links = [{name = "A", src = "a", dst = "b", capacity_Bps = 1e9, technology = "pcie4"},
         {name = "B", src = "b", dst = "c", capacity_Bps = 2e9, technology = "pcie4"}]

[workload]
flows = "parking.csv"
"""
PARKING_FLOWS = "name,src,dst,size_bytes\nf1,a,c,1e9\nf2,a,b,5e8\nf3,b,c,3e9\n"
#: Other flows over the same links, with a weight, a cap, a zero-byte flow and a capped local
#: copy (an empty route): other routes, so another batch.
OTHER_FLOWS = ("name,src,dst,size_bytes,weight,cap_Bps,start_s,depends_on\n"
               "g1,a,c,2e9,2,,,\ng2,a,b,1e9,,3e8,0.5,g1\ng3,b,c,0,,,,\ng4,b,c,1e9,,,,\ng5,a,a,1e9,,4e8,,\n")
#: The parking lot's flows with other weights and a cap: the same routes, so the same batch.
WEIGHTED_FLOWS = "name,src,dst,size_bytes,weight,cap_Bps\nf1,a,c,1e9,3,\nf2,a,b,5e8,1,2e8\nf3,b,c,3e9,1,\n"
#: A local copy with no rate cap: no finite rate, so the run fails.
UNLIMITED_FLOWS = "name,src,dst,size_bytes\nh1,a,c,1e9\nh2,a,a,1e9\n"


def parking_spec(tmp_path: Path, axes: str, metrics=RATE_METRICS, solve: str = "rates") -> Path:
    (tmp_path / "parking.csv").write_text(PARKING_FLOWS)
    (tmp_path / "other.csv").write_text(OTHER_FLOWS)
    (tmp_path / "weighted.csv").write_text(WEIGHTED_FLOWS)
    (tmp_path / "unlimited.csv").write_text(UNLIMITED_FLOWS)
    (tmp_path / "parking.toml").write_text(PARKING)
    spec = tmp_path / "sweep.toml"
    spec.write_text(f'[sweep]\nscenario = "parking.toml"\nsolve = "{solve}"\nmetrics = {json.dumps(list(metrics))}\n'
                    f'{axes}')
    return spec


@pytest.fixture
def solves(monkeypatch) -> list[int]:
    """The instance count of every ``BatchProblem.solve`` call made during the test."""
    calls: list[int] = []
    solve = BatchProblem.solve

    def counting(self, *args, **kwargs):
        calls.append(self.n_instances)
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(BatchProblem, "solve", counting)
    return calls


def slow_rates_metrics(sweep, run) -> tuple[tuple, dict[str, float]]:
    """One run the slow way: its own scenario, routes and ``max_min_rates`` of the flows with
    bytes to move, link sums in loops. Returns its routes as (n_links, indptr, indices) lists
    and its metrics."""
    task = sweep.task(run)
    scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    t, w, o = scenario.topology, scenario.workload, scenario.options
    moving = [f for f in range(len(w)) if w.size_bytes[f] > 0]
    src, dst = [w.src[f] for f in moving], [w.dst[f] for f in moving]
    routes = Router(t).route(src, dst, method=o.routing, seed=o.seed, gpudirect=o.gpudirect)
    rate = max_min_rates(routes, t.link_capacity_Bps, w.weight[moving], w.cap_Bps[moving])
    size = w.size_bytes[moving]
    load, carried = np.zeros(t.n_links), np.zeros(t.n_links)
    for f in range(len(moving)):
        for link in routes.route(f):
            load[link] += rate[f]
            carried[link] += size[f]
    capacity = t.link_capacity_Bps
    saturated = [load[i] >= capacity[i] * (1 - 1e-9) for i in range(t.n_links)]
    metrics = {
        "aggregate_rate_Bps": sum(rate),
        "min_rate_Bps": min(rate),
        "mean_rate_Bps": sum(rate) / len(rate),
        "max_utilization": max(load[i] / capacity[i] for i in range(t.n_links)),
        "saturated_links": sum(saturated),
        **{f"saturated_links_{tier.name.lower()}": sum(s and t.link_tier[i] == tier for i, s in enumerate(saturated))
           for tier in LinkTier},
        "drain_at_rates_s": max(size[f] / rate[f] for f in range(len(moving))),
        "busiest_link_s": max(carried[i] / capacity[i] for i in range(t.n_links)),
        "n_flows": len(moving),
    }
    return (routes.n_links, routes.flow_link_indptr.tolist(), routes.flow_link_indices.tolist()), metrics


def assert_matches_slow_loop(sweep, columns, rtol=1e-12) -> int:
    """Every ok row's metrics against :func:`slow_rates_metrics`; returns the number of
    distinct routes among those runs (the batches the sweep should have solved)."""
    routes = set()
    for row, run in enumerate(sweep.runs):
        assert columns["key"][row] == run.key
        if columns["status"][row] != "ok":
            continue
        run_routes, expected = slow_rates_metrics(sweep, run)
        routes.add(json.dumps(run_routes))
        for name in sweep.metrics:
            np.testing.assert_allclose(columns[name][row], expected[name], rtol=rtol, err_msg=f"{name}, run {row}")
    return len(routes)


def test_rates_parking_lot_by_hand_in_one_batch(tmp_path, solves):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9, 3e9, 0.5e9]\n')
    outcome = run_sweep(load_sweep(spec), tmp_path / "out.h5")
    assert (outcome.n_ran, outcome.n_failed, outcome.backend, outcome.n_batches) == (3, 0, "cpu", 1)
    assert solves == [3]
    columns = read_results(outcome.output).columns
    # Each run's wall_s holds its share of the batch's solve, and its own build besides.
    assert 0 < outcome.batch_s < columns["wall_s"].sum()
    # B = 2: rates 0.5, 0.5, 1.5 (docs/model.md case 3). B = 3: f3 takes the rest of B, 2.5. B = 0.5:
    # B saturates first at 0.25 each for f1 and f3, then f2 takes the rest of A, 0.75.
    G = 1e9
    expected = {
        "aggregate_rate_Bps": [2.5 * G, 3.5 * G, 1.25 * G],
        "min_rate_Bps": [0.5 * G, 0.5 * G, 0.25 * G],
        "mean_rate_Bps": [2.5 * G / 3, 3.5 * G / 3, 1.25 * G / 3],
        "max_utilization": [1.0, 1.0, 1.0],
        "saturated_links": [2, 2, 2],
        "saturated_links_host": [2, 2, 2],
        "saturated_links_scale_out": [0, 0, 0],
        # max size / rate: f1 1/0.5 and f3 3/1.5; f1 1/0.5; f3 3/0.25.
        "drain_at_rates_s": [2.0, 2.0, 12.0],
        # max bytes / capacity: B 4/2; A 1.5/1; B 4/0.5.
        "busiest_link_s": [2.0, 1.5, 8.0],
        "n_flows": [3, 3, 3],
    }
    for name, values in expected.items():
        np.testing.assert_allclose(columns[name], values, rtol=1e-15, err_msg=name)
    assert (columns["wall_s"] > 0).all()
    # docs/model.md case 3 over time finishes at 2.0 too: here the drain at the first rates agrees.
    assert run_scenario(load_scenario(tmp_path / "parking.toml")).result.makespan_s == pytest.approx(2.0)


def test_rates_match_a_slow_loop_with_routes_that_change_and_a_bad_run(tmp_path, solves):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"workload.flows" = ["parking.csv", "other.csv", "unlimited.csv"]\n'
                                  '"topology.links.0.capacity_Bps" = [1e9, 4e9, -1.0, 0.25e9]\n')
    sweep = load_sweep(spec)
    outcome = run_sweep(sweep, tmp_path / "out.h5")
    columns = read_results(outcome.output).columns
    statuses = columns["status"].reshape(3, 4)
    assert (statuses[:2] == [["ok", "ok", "error", "ok"]] * 2).all() and (statuses[2] == "error").all()
    assert "link 'A' has capacity -1.0 B/s" in columns["error"][2]
    assert columns["error"][9].startswith(f"{tmp_path / 'parking.toml'}: flow 'h2' has an empty route and no rate cap")
    assert np.isnan(columns["aggregate_rate_Bps"][2]) and outcome.n_failed == 6
    # Two flow lists that build: two sets of routes, one batch each, of three runs each.
    assert assert_matches_slow_loop(sweep, columns) == 2
    assert sorted(solves) == [3, 3] and outcome.n_batches == 2


def test_rates_match_a_slow_loop_on_a_cluster(tmp_path, solves):
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'[sweep]\nscenario = "{SCENARIOS / "rail_optimized_cluster.toml"}"\nsolve = "rates"\n'
        f"metrics = {json.dumps(list(RATE_METRICS))}\n"
        '[sweep.grid]\n"topology.switch" = ["qm8700", "qm9700"]\n"topology.figure" = ["nominal", "effective"]\n'
        '"options.gpudirect" = [true, false]\n'
    )
    sweep = load_sweep(spec)
    outcome = run_sweep(sweep, tmp_path / "out.h5")
    columns = read_results(outcome.output).columns
    assert (columns["status"] == "ok").all()
    n_routes = assert_matches_slow_loop(sweep, columns)
    assert n_routes == 2 and len(solves) == outcome.n_batches == n_routes and sum(solves) == 8
    # Without GPUDirect the NIC traffic is staged through host memory, and that binds.
    by_gpudirect = columns["saturated_links_host"].reshape(4, 2)
    assert (by_gpudirect[:, 1] > 0).all()


def test_rates_batches_are_bounded(tmp_path, solves, monkeypatch):
    spec = parking_spec(tmp_path, '[sweep.zip]\n"topology.links.1.capacity_Bps" = [1e9, 2e9, 3e9, 4e9, 5e9]\n')
    sweep = load_sweep(spec)
    whole = read_results(run_sweep(sweep, tmp_path / "whole.h5").output).columns
    monkeypatch.setattr(flowsim.sweep.rates, "BATCH_RUNS", 2)
    by_two = read_results(run_sweep(sweep, tmp_path / "two.h5").output).columns
    # A run of the parking lot holds 2 * 2 + 4 * 3 values and its routes 2 * 4: one run
    # passes this budget, so each is solved as it arrives.
    monkeypatch.setattr(flowsim.sweep.rates, "BATCH_VALUES", 20)
    alone = read_results(run_sweep(sweep, tmp_path / "alone.h5").output).columns
    assert solves == [5, 2, 2, 1, 1, 1, 1, 1, 1]
    for name in (*sweep.metrics, "key", "status"):
        np.testing.assert_array_equal(by_two[name], whole[name], err_msg=name)
        np.testing.assert_array_equal(alone[name], whole[name], err_msg=name)


def test_rates_resume_skips_done_runs(tmp_path, solves):
    spec = parking_spec(tmp_path, '[sweep.zip]\n"topology.links.1.capacity_Bps" = [1e9, 2e9, 3e9, 4e9, -5.0]\n')
    sweep = load_sweep(spec)
    first = read_results(run_sweep(sweep, tmp_path / "out.h5").output).columns
    again = run_sweep(sweep, tmp_path / "out.h5")
    assert (again.n_ran, again.n_skipped, again.n_failed, again.n_batches) == (0, 5, 1, 0)
    # The failed run is journalled as soon as its build fails, before the batch of four.
    journal = journal_path(tmp_path / "out.h5")
    lines = journal.read_text().splitlines(keepends=True)
    assert [json.loads(line)["status"] for line in lines] == ["error"] + ["ok"] * 4
    journal.write_text("".join(lines[:2]))
    resumed = run_sweep(sweep, tmp_path / "out.h5")
    assert (resumed.n_ran, resumed.n_skipped, resumed.n_batches) == (3, 2, 1)
    assert solves == [4, 3]
    columns = read_results(tmp_path / "out.h5").columns
    for name in first:
        if name != "wall_s":
            np.testing.assert_array_equal(columns[name], first[name], err_msg=name)


def test_rates_interrupt_keeps_the_solved_batches(tmp_path, monkeypatch):
    spec = parking_spec(tmp_path, '[sweep.zip]\n"topology.links.1.capacity_Bps" = [1e9, 2e9, 3e9, 4e9, 5e9]\n')
    sweep = load_sweep(spec)
    monkeypatch.setattr(flowsim.sweep.rates, "BATCH_RUNS", 2)
    solve, calls = BatchProblem.solve, []

    def ctrl_c_at_the_second(self, *args, **kwargs):
        calls.append(self.n_instances)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(BatchProblem, "solve", ctrl_c_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, tmp_path / "out.h5")
    assert read_results(tmp_path / "out.h5").columns["index"].tolist() == [0, 1]
    monkeypatch.setattr(BatchProblem, "solve", solve)
    resumed = run_sweep(sweep, tmp_path / "out.h5")
    assert (resumed.n_ran, resumed.n_skipped, resumed.n_batches) == (3, 2, 2)
    assert read_results(tmp_path / "out.h5").columns["index"].tolist() == list(range(5))


def test_rates_and_time_runs_never_share_keys(tmp_path):
    axes = '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9]\n'
    rates = load_sweep(parking_spec(tmp_path, axes, ["n_flows"]))
    time_ = load_sweep(parking_spec(tmp_path, axes, ["n_flows"], solve="time"))
    assert (rates.solve, time_.solve) == ("rates", "time")
    assert rates.runs[0].key != time_.runs[0].key
    # Time-mode keys are those of a spec that does not name its mode.
    plain = tmp_path / "plain.toml"
    plain.write_text(time_.text.replace('solve = "time"\n', ""))
    assert load_sweep(plain).runs[0].key == time_.runs[0].key


@pytest.mark.parametrize(
    ("solve", "metric", "message"),
    [
        ("rates", "makespan_s", "'makespan_s' is a metric of solve = 'time'; valid ones with solve = 'rates': "),
        ("rates", "fct_p99_s", "'fct_p99_s' is a metric of solve = 'time'"),
        ("rates", "busbw_Bps", "'busbw_Bps' is a metric of solve = 'time'"),
        ("time", "aggregate_rate_Bps", "'aggregate_rate_Bps' is a metric of solve = 'rates'; valid ones with "
                                       "solve = 'time': "),
        ("rates", "rate", "unknown metric 'rate'; valid ones with solve = 'rates': "),
    ],
)
def test_a_metric_of_the_other_mode_is_named_at_parse_time(tmp_path, solve, metric, message):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"options.seed" = [1]\n', ["n_flows", metric], solve=solve)
    with pytest.raises(InputError) as err:
        load_sweep(spec)
    assert str(err.value).startswith(f"{spec}: sweep.metrics[1]: {message}"), str(err.value)
    assert all(name in str(err.value) for name in (RATE_METRICS if solve == "rates" else METRICS))


def test_unknown_solve_mode(tmp_path):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"options.seed" = [1]\n', solve="instant")
    with pytest.raises(InputError, match=r"sweep\.solve: expected one of 'time', 'rates', got 'instant'"):
        load_sweep(spec)


def test_arguments_of_the_other_mode_are_errors(tmp_path):
    axes = '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9]\n'
    rates = load_sweep(parking_spec(tmp_path, axes, ["n_flows"]))
    for kwargs, named in [({"workers": 2}, "workers"), ({"dask": "local", "traces": tmp_path}, "dask, traces"),
                          ({"runner": fake_runner}, "runner")]:
        with pytest.raises(InputError, match=f"{named}: for sweeps with solve = 'time' only"):
            run_sweep(rates, tmp_path / "out.h5", **kwargs)
    time_ = load_sweep(parking_spec(tmp_path, axes, ["n_flows"], solve="time"))
    with pytest.raises(InputError, match="dask, traces: for sweeps on the CPU engine's workers; with a backend"):
        run_sweep(time_, tmp_path / "out.h5", backend="cpu", dask="local", traces=tmp_path)
    with pytest.raises(InputError, match="backend must be one of 'cpu', 'cuda', 'auto'; got 'gpu'"):
        run_sweep(rates, tmp_path / "out.h5", backend="gpu")
    assert not journal_path(tmp_path / "out.h5").exists()


def test_cuda_without_numba_cuda_is_the_rates_command_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(batched, "_numba_cuda_installed", lambda: False)
    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9]\n')
    with pytest.raises(BackendUnavailable, match=re.escape("backend 'cuda' needs the numba-cuda package")):
        run_sweep(load_sweep(spec), tmp_path / "out.h5", backend="cuda")
    outcome = run_sweep(load_sweep(spec), tmp_path / "out.h5", backend="auto")
    assert (outcome.backend, outcome.n_failed) == ("cpu", 0)


@pytest.mark.skipif("cuda" in available_backends(), reason="a CUDA backend is usable here")
def test_cli_backend_cuda_here_says_what_is_missing(tmp_path, capsys):
    from flowsim.cli import main

    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [2e9]\n')
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out.h5"), "--backend", "cuda"]) == 2
    assert "flowsim: error: backend 'cuda'" in capsys.readouterr().err


def test_rates_runs_that_differ_in_weights_and_caps_share_a_batch(tmp_path, solves):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"workload.flows" = ["parking.csv", "weighted.csv"]\n'
                                  '"topology.links.1.capacity_Bps" = [2e9, 0.5e9]\n')
    sweep = load_sweep(spec)
    outcome = run_sweep(sweep, tmp_path / "out.h5")
    assert (outcome.n_failed, outcome.n_batches) == (0, 1) and solves == [4]
    assert assert_matches_slow_loop(sweep, read_results(outcome.output).columns) == 1


@pytest.mark.skipif("cuda" not in available_backends(),
                    reason="no CUDA backend here: needs numba-cuda and a GPU, or NUMBA_ENABLE_CUDASIM=1")
def test_rates_on_cuda_match_the_slow_loop(tmp_path, solves):
    # One batch whose runs share weights and caps (sent to the GPU once), one whose runs
    # differ in them.
    spec = parking_spec(tmp_path, '[sweep.grid]\n"workload.flows" = ["parking.csv", "other.csv", "weighted.csv"]\n'
                                  '"topology.links.1.capacity_Bps" = [2e9, 3e9, 0.5e9]\n')
    sweep = load_sweep(spec)
    outcome = run_sweep(sweep, tmp_path / "out.h5", backend="cuda")
    assert (outcome.backend, outcome.n_failed, outcome.n_batches) == ("cuda", 0, 2) and sorted(solves) == [3, 6]
    columns = read_results(outcome.output).columns
    assert assert_matches_slow_loop(sweep, columns, rtol=1e-9) == 2
    np.testing.assert_allclose(columns["drain_at_rates_s"][:3], [2.0, 2.0, 12.0], rtol=1e-9)


def test_cli_runs_the_example_rates_sweep(tmp_path, capsys):
    example = Path(__file__).parents[1] / "data" / "sweeps" / "rail_cluster_rates.toml"
    assert flowsim_sweep(example, "-o", tmp_path / "rates.h5", "--backend", "auto", "-q") == 0
    backend = "cuda" if "cuda" in available_backends() else "cpu"
    out = capsys.readouterr().out
    assert re.search(rf"^12 runs \(12 ran in 2 batches on {backend}, \d+\.\d\d s\) -> ", out, re.M), out
    columns = read_results(tmp_path / "rates.h5").columns
    assert (columns["status"] == "ok").all()
    # Faster switch ports raise the total while GPUDirect keeps NIC traffic off host memory.
    total = columns["aggregate_rate_Bps"].reshape(3, 2, 2)
    assert (np.diff(total[:, 0, 0]) > 0).all()
    with pytest.raises(InputError, match="workers: for sweeps with solve = 'time' only"):
        flowsim_sweep(example, "-o", tmp_path / "rates.h5", "--workers", "2")


# --- outputs and inputs that are not regular files, strings a table cannot hold, locks ------


def test_a_fifo_as_results_table_is_refused_and_left(tmp_path, make_fifo):
    sweep = load_sweep(write_spec(tmp_path, SIZES))
    fifo = make_fifo("out.h5")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError, match=r"out\.h5: is a FIFO \(named pipe\), not a regular file: the results table "
                                         r"must be a regular file \(left as it is\)"):
        run_sweep(sweep, fifo, runner=refusing_runner, workers=1)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no journal beside it


@pytest.mark.parametrize(("axes", "key", "shown", "at"), [
    ('[sweep.grid]\n"topology.figure" = ["nominal", "eff\\u0000ective"]\n', "sweep.grid.topology.figure",
     "the value 'eff\\x00ective'", 3),
    ('[sweep.zip]\n"workload.collective.0.name" = [["a", "b\\u0000"]]\n', "sweep.zip.workload.collective.0.name",
     "the value 'b\\x00'", 1),
    ('[sweep.grid]\n"options.x\\u0000" = [1]\n', "sweep.grid.options.x\x00", "the name 'options.x\\x00'", 9),
    ('[sweep.random]\nsamples = 2\nseed = 1\n"topology.figure" = {choice = ["nominal", "x\\u0000"]}\n',
     "sweep.random.topology.figure", "the value 'x\\x00'", 1),
], ids=["grid", "zip", "name", "random choice"])
def test_a_nul_in_a_sweep_string_is_refused_when_the_sweep_is_read(tmp_path, axes, key, shown, at):
    spec = write_spec(tmp_path, axes)
    with pytest.raises(InputError) as err:
        load_sweep(spec)
    assert str(err.value) == (f"{spec}: {key}: {shown} cannot be stored in the results table: it has a NUL "
                              f"character (at character {at}), where HDF5 strings end")


def test_a_second_sweep_on_the_same_output_says_another_holds_it(tmp_path, capsys):
    spec = write_spec(tmp_path, SIZES)
    sweep = load_sweep(spec)
    output = tmp_path / "out.h5"
    with held_exclusively(output, "sweep"):
        with pytest.raises(InputError, match=rf"out\.h5: another sweep \(process {os.getpid()}\) holds it and is "
                                             r"writing it; wait for that one to end, or give another output"):
            run_sweep(sweep, output, runner=refusing_runner, workers=1)
        assert not output.exists() and not journal_path(output).exists()
    # Released: the same sweep now runs.
    assert run_sweep(sweep, output, runner=fake_runner, workers=1).n_ran == 6


def test_a_fifo_as_sweep_spec_or_base_scenario_is_refused_without_waiting(tmp_path, make_fifo):
    fifo = make_fifo("fifo.toml")
    with pytest.raises(InputError, match=r"fifo\.toml: cannot read the sweep spec: it is a FIFO \(named pipe\)"):
        load_sweep(fifo)
    spec = tmp_path / "sweep.toml"
    spec.write_text('[sweep]\nscenario = "fifo.toml"\n[sweep.grid]\n"topology.figure" = ["nominal"]\n')
    with pytest.raises(InputError, match=r"sweep\.scenario: .*fifo\.toml: cannot read the scenario: it is a FIFO"):
        load_sweep(spec)


# --- time sweeps on a backend ---------------------------------------------------------------------

def time_on_backend_and_on_the_engine(sweep, tmp_path, backend, workers=1):
    """The tables of ``sweep`` on ``backend`` (built on ``workers``) and on the CPU engine
    (one worker)."""
    batched_run = run_sweep(sweep, tmp_path / "backend.h5", backend=backend, workers=workers)
    engine_run = run_sweep(sweep, tmp_path / "engine.h5", workers=1)
    assert (batched_run.n_failed, engine_run.n_failed) == (0, 0)
    return batched_run, read_results(batched_run.output).columns, read_results(engine_run.output).columns


@pytest.mark.parametrize("workers", [1, 2], ids=lambda w: f"workers={w}")
def test_a_time_sweep_of_collectives_on_the_cpu_backend_equals_the_engine(tmp_path, workers):
    example = Path(__file__).parents[1] / "data" / "sweeps" / "two_dgx_collectives.toml"
    sweep = load_sweep(example)
    outcome, got, want = time_on_backend_and_on_the_engine(sweep, tmp_path, "cpu", workers)
    assert (outcome.backend, outcome.n_batches) == ("cpu", 1)
    assert 0 < outcome.batch_s < got["wall_s"].sum()
    assert list(got["ran_on"]) == ["cpu"] * 12 and "ran_on" not in want
    for metric in sweep.metrics:
        if metric == "n_events":  # each engine counts its own
            continue
        # Per-flow times follow the order in which events a few 1e-12 apart are taken: the two
        # kernels' sums differ in their last bits, which moves single flows of these symmetric
        # rings by microseconds (never the makespan or a link's figures). A completion-time
        # percentile that lands on such a flow moves with it.
        rtol = 0.05 if metric.startswith("fct_") else 1e-9
        np.testing.assert_allclose(got[metric], want[metric], rtol=rtol, err_msg=metric)


def test_runs_too_large_for_a_batch_run_on_the_engine(tmp_path, monkeypatch):
    monkeypatch.setattr(flowsim.sweep.timebatch, "MAX_BATCH_FLOWS", 3)
    spec = parking_spec(tmp_path, '[sweep.grid]\n"workload.flows" = ["parking.csv", "other.csv"]\n',
                        ["makespan_s", "n_events"], solve="time")
    sweep = load_sweep(spec)
    outcome, got, want = time_on_backend_and_on_the_engine(sweep, tmp_path, "cpu")
    assert list(got["ran_on"]) == ["cpu", "engine"]  # 3 flows, then 5
    np.testing.assert_allclose(got["makespan_s"], want["makespan_s"], rtol=1e-9)
    assert got["n_events"][1] == want["n_events"][1]  # the same engine


def test_a_batch_that_fails_fails_each_of_its_runs_with_its_share_of_the_time(tmp_path, monkeypatch):
    def broken(runs, *, backend):
        time.sleep(0.01)
        raise RuntimeError("out of device memory")

    monkeypatch.setattr(flowsim.sweep.timebatch, "simulate_prepared", broken)
    spec = parking_spec(tmp_path, '[sweep.grid]\n"workload.flows" = ["parking.csv", "other.csv"]\n',
                        ["makespan_s"], solve="time")
    outcome = run_sweep(load_sweep(spec), tmp_path / "out.h5", backend="cpu", workers=1)
    assert (outcome.n_failed, outcome.n_batches) == (2, 1) and outcome.batch_s >= 0.01
    columns = read_results(outcome.output).columns
    assert list(columns["status"]) == ["error", "error"]
    assert all("out of device memory" in error for error in columns["error"])
    assert (columns["wall_s"] >= outcome.batch_s / 2).all()


@pytest.mark.skipif("cuda" not in available_backends(),
                    reason="no CUDA backend here: needs numba-cuda and a GPU, or NUMBA_ENABLE_CUDASIM=1")
def test_time_on_cuda_equals_the_engine(tmp_path):
    spec = parking_spec(tmp_path, '[sweep.grid]\n"workload.flows" = ["parking.csv", "weighted.csv"]\n'
                                  '"topology.links.1.capacity_Bps" = [2e9, 0.5e9]\n', ["makespan_s", "fct_p50_s"],
                        solve="time")
    outcome, got, want = time_on_backend_and_on_the_engine(load_sweep(spec), tmp_path, "cuda")
    assert (outcome.backend, outcome.n_batches) == ("cuda", 1) and list(got["ran_on"]) == ["cuda"] * 4
    for metric in ("makespan_s", "fct_p50_s"):
        np.testing.assert_allclose(got[metric], want[metric], rtol=1e-9, err_msg=metric)


@pytest.mark.parametrize("grid", ['"options.time_rel_tol" = [1e-12, 0.5]', '"options.classes" = [true, false]'],
                         ids=["coarse_time", "classes_off"])
def test_runs_a_batch_does_not_take_run_on_the_engine(tmp_path, grid):
    # The batch keeps the default's exact instants and solves flow classes: a coarser
    # time_rel_tol, or a run that asks for every flow solved, is the engine's.
    spec = parking_spec(tmp_path, f"[sweep.grid]\n{grid}\n", ["makespan_s"], solve="time")
    outcome, got, want = time_on_backend_and_on_the_engine(load_sweep(spec), tmp_path, "cpu")
    assert list(got["ran_on"]) == ["cpu", "engine"]
    np.testing.assert_allclose(got["makespan_s"], want["makespan_s"], rtol=1e-9)


def test_a_batch_is_simulated_early_when_its_runs_hold_many_flows(tmp_path, monkeypatch):
    # Each waiting run keeps every flow until its metrics are taken; past WAITING_FLOWS the
    # batch goes at once. The parking lot's 3 flows against a limit of 3: one batch per run.
    monkeypatch.setattr(flowsim.sweep.timebatch, "WAITING_FLOWS", 3)
    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [1e9, 2e9, 4e9]\n',
                        ["makespan_s"], solve="time")
    outcome, got, want = time_on_backend_and_on_the_engine(load_sweep(spec), tmp_path, "cpu")
    assert outcome.n_batches == 3 and list(got["ran_on"]) == ["cpu"] * 3
    np.testing.assert_allclose(got["makespan_s"], want["makespan_s"], rtol=1e-9)


def test_runs_lost_with_a_building_worker_run_on_the_engines_pool(tmp_path, monkeypatch):
    # A pool whose workers die at once: every run goes to the CPU engine's pool, which
    # finds the run that kills its worker (here none does) and records each run.
    import concurrent.futures
    import contextlib
    from concurrent.futures.process import BrokenProcessPool

    class DeadPool:
        def submit(self, *args):
            future = concurrent.futures.Future()
            future.set_exception(BrokenProcessPool("a worker died"))
            return future

    # The first pool (the building one) is dead; the engine's pools after it are real.
    real_pool = flowsim.sweep.executors._pool
    pools = iter([contextlib.nullcontext(DeadPool())])
    monkeypatch.setattr(flowsim.sweep.executors, "_pool", lambda workers: next(pools, None) or real_pool(workers))
    spec = parking_spec(tmp_path, '[sweep.grid]\n"topology.links.1.capacity_Bps" = [1e9, 2e9, 4e9]\n',
                        ["makespan_s"], solve="time")
    outcome, got, want = time_on_backend_and_on_the_engine(load_sweep(spec), tmp_path, "cpu", workers=2)
    assert outcome.n_batches == 0 and list(got["ran_on"]) == ["engine"] * 3
    np.testing.assert_allclose(got["makespan_s"], want["makespan_s"], rtol=1e-9)


def test_the_ten_thousand_run_example_expands_to_distinct_runs():
    # data/sweeps/collectives_10k.toml, the GPU time sweep of benchmarks/gpu/bench_sweep_gpu.py:
    # 8 node counts x 5 collectives x 2 link figures x 125 sizes, none the same run twice.
    sweep = load_sweep(Path(__file__).parents[1] / "data" / "sweeps" / "collectives_10k.toml")
    assert len(sweep.runs) == len({run.key for run in sweep.runs}) == 8 * 5 * 2 * 125
    sizes = sorted({run.params["workload.collective.0.size_bytes"] for run in sweep.runs})
    assert (sizes[0], sizes[-1]) == (8, 16 << 30)
    assert np.allclose(np.diff(np.log2(sizes)), 0.25, atol=0.2)  # four to each factor of two


def _worker_sigint() -> tuple[bool, object]:
    """In a pool worker: whether SIGINT is held back, and how it is handled."""
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []), signal.getsignal(signal.SIGINT)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_pool_workers_start_with_ctrl_c_held_and_then_ignore_it():
    # A Ctrl-C shortly after a sweep started reached workers still importing flowsim, which
    # printed their tracebacks. Workers are started with SIGINT held; once set up they ignore
    # it and no longer hold it. The sweep's own mask is as it was.
    from flowsim.sweep import executors

    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with executors._pool(1) as pool:
        with executors._sigint_held():
            assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
            future = pool.submit(_worker_sigint)
        assert future.result(timeout=120) == (False, signal.SIG_IGN)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_processes_started_while_ctrl_c_is_ignored_ignore_it_from_their_start():
    # Dask starts its workers from threads of its own, which a held signal does not reach:
    # they are started while the sweep ignores Ctrl-C, which they keep, so that a Ctrl-C does
    # not print their tracebacks. The sweep's handler is back afterwards.
    import multiprocessing

    from flowsim.sweep import executors

    handler = signal.getsignal(signal.SIGINT)
    with executors._sigint_ignored():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            assert pool.apply(_worker_sigint)[1] is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is handler


def test_a_sweep_replaces_its_table_but_not_a_file_of_other_data(tmp_path):
    # An audit: 'sweep -o tr.h5' replaced a trace with a results table.
    sweep = load_sweep(write_spec(tmp_path, SIZES))
    trace = tmp_path / "trace.h5"
    with h5py.File(trace, "w") as f:
        f.attrs["format"] = "flowsim-trace"
    with pytest.raises(InputError, match="trace.h5: exists and is an HDF5 file of format 'flowsim-trace', not a "
                                         "sweep's results table flowsim would replace"):
        run_sweep(sweep, trace, runner=fake_runner, workers=1)
    with h5py.File(trace) as f:
        assert f.attrs["format"] == "flowsim-trace" and not list(f)
    table = tmp_path / "out.h5"
    run_sweep(sweep, table, runner=fake_runner, workers=1)
    run_sweep(sweep, table, runner=fake_runner, workers=1)  # its own table: resumed or replaced, as before
