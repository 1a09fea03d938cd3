"""What-if sweeps: one base scenario, many parameter values, one result row per run.

A sweep spec is TOML. It names a base scenario (:mod:`flowsim.scenario`), the metrics to
keep, and axes over the scenario's fields. Runs execute in a local process pool or on a Dask
cluster; each finished run is appended to a journal so that a killed sweep resumes where it
stopped, and the table of all runs is written to HDF5.

Format
------
``[sweep]``
    ``scenario = "base.toml"`` (relative to the sweep file); ``solve``, ``"time"`` (the
    default: simulate each run over time) or ``"rates"`` (each run's instantaneous max-min
    allocation, see below); and ``metrics``, a non-empty array of names from :data:`METRICS`
    (``solve = "time"``, where ``job.NAME.slowdown`` and the other figures of
    :data:`flowsim.jobresults.JOB_METRICS` name a ``[[job]]``'s) or :data:`RATE_METRICS`
    (``solve = "rates"``).
``[sweep.grid]``
    ``"path" = [v1, v2, ...]``: every combination of the listed values (a product).
``[sweep.zip]``
    ``"path" = [...]``: equal-length lists that advance together.
``[sweep.random]``
    ``samples`` (a positive integer, default 1), ``seed`` (a non-negative integer, default 0) and
    ``"path" = {uniform = [a, b]}``, ``{log_uniform = [a, b]}`` (``0 < a``),
    ``{int_uniform = [a, b]}`` (both ends included) or ``{choice = [...]}``: ``samples``
    seeded draws of every such field together.

The three kinds combine as a product (grid, then zip, then random; the last varies
fastest) of at most :data:`MAX_RUNS` runs. A path is dotted and indexes the base scenario's
TOML document, with integers for arrays of tables: ``"topology.n_nodes"``,
``"workload.collective.0.size_bytes"``; unquoted, the same path is TOML dotted keys and
means the same. A path may name a field the base scenario leaves out (``options.seed``);
the scenario checker then names the valid fields when it is not one.

Runs and results
----------------
A run's key is the SHA-256 of its parameters as canonical JSON, salted with the base
scenario's document and the content (SHA-256) of every file the run reads
(:data:`FILE_FIELDS`: its flow list), so a run is the same whatever the worker count, order
or expansion of the spec, or the machine, and editing a flow list runs its runs again. Each
finished run is one JSON line in ``<output>.journal``, handed to the operating system as
soon as it arrives (a SIGKILL loses none) and fsync'd once 0.2 s have passed since the last
fsync, and at the end; a last line cut short by a kill is ignored and dropped. Runs whose
key is in the journal are not run again; one that lacks a metric the spec now asks for runs
again, and one without the trace asked for runs again to write it (its row stays). The
HDF5 table (see :func:`write_results`) is rebuilt from the journal, atomically, when the
sweep ends or is interrupted. Parallel runs go to workers in batches of up to 32 (about 16
batches per worker), so short runs do not pay a pool's or Dask's per-task cost each.

Rates mode
----------
With ``solve = "rates"`` a run is not simulated over time: every flow of its scenario with
bytes to move is active at once, and the run is its weighted max-min allocation
(:func:`flowsim.scenario.rates_problem`, as ``flowsim rates`` computes it). Start times,
dependencies, delays, latencies and overheads play no part. Runs are built in this process
(scenario, routes, and the run's capacities, weights and caps, checked on their own so that
a bad run fails alone), then grouped by routes: runs with the same link count and the same flow -> link CSR arrays (a
sweep of capacities, weights, caps or sizes) are solved together by one
:meth:`flowsim.batched.BatchProblem.solve` on the chosen backend (``cpu``, ``cuda`` or
``auto``), runs whose routes differ form other batches. A batch holds at most
:data:`BATCH_RUNS` runs; and when the runs waiting in all batches together hold more than
:data:`BATCH_VALUES` values (a run counts its links twice and its flows four times:
capacities, tiers, weights, caps, sizes and rates; a batch its flow-link crossings twice),
the largest batch is solved early, so a batch exceeds that size only when one run does. A
run's ``wall_s`` is its own build and metric time plus an equal share of its batch's
check-and-solve time. Its key is salted with the mode, so the two modes never share journal
records.

Time sweeps on a backend
------------------------
With ``solve = "time"`` and a ``backend`` (``cpu``, ``cuda`` or ``auto``; ``flowsim sweep
--backend``), runs are built on the local workers (or in this process with one) and grouped
into flow classes
(docs/model.md "Flow classes"), and every run of at most :data:`MAX_BATCH_FLOWS` classes
is simulated in a batch by :func:`flowsim.timeline.simulate_prepared`: one run per core or,
on a GPU, per thread (under 32 classes) or thread block, the same times as the CPU engine
to rounding. A batch holds up to :data:`BATCH_FLOWS` classes, and is simulated early once its runs hold
:data:`WAITING_FLOWS` flows before grouping (each keeps its flows until its metrics are
taken). Larger runs, runs with a coarse ``time_rel_tol`` (the batch keeps the default's
exact instants) and every run of a sweep that asks for a job metric run on the CPU engine
on the worker that built them. The results table's ``ran_on`` column says where each run went (``cpu``,
``cuda`` or ``engine``); ``n_events`` counts the events of the engine that ran it.
Dask and traces are for the CPU engine's sweeps, not these.

Modules
-------
:mod:`~flowsim.sweep.spec` (the spec and its runs), :mod:`~flowsim.sweep.metrics`,
:mod:`~flowsim.sweep.runs` (one run), :mod:`~flowsim.sweep.rates` (rates mode),
:mod:`~flowsim.sweep.timebatch` (time sweeps on a backend),
:mod:`~flowsim.sweep.journal` (journal and results table), :mod:`~flowsim.sweep.executors`
(serial, process pool, Dask), :mod:`~flowsim.sweep.progress` and
:mod:`~flowsim.sweep.driver` (:func:`run_sweep`); the names below are the package's.
"""

from flowsim.sweep.driver import SweepOutcome, run_sweep
from flowsim.sweep.journal import (
    FORMAT,
    SweepTable,
    journal_path,
    read_journal,
    read_results,
    write_results,
)
from flowsim.sweep.metrics import METRICS, RATE_METRICS, SOLVES
from flowsim.sweep.rates import BATCH_RUNS, BATCH_VALUES
from flowsim.sweep.runs import Runner, RunRecord, execute, simulate_run
from flowsim.sweep.spec import (
    DISTRIBUTIONS,
    FILE_FIELDS,
    MAX_RUNS,  # noqa: F401 - public, as before the split, though not in __all__
    RunSpec,
    RunTask,
    Sweep,
    apply_params,
    canonical_json,
    load_sweep,
    parse_sweep,
)
from flowsim.sweep.timebatch import BATCH_FLOWS, MAX_BATCH_FLOWS, WAITING_FLOWS

__all__ = [
    "BATCH_FLOWS",
    "BATCH_RUNS",
    "BATCH_VALUES",
    "DISTRIBUTIONS",
    "FILE_FIELDS",
    "FORMAT",
    "MAX_BATCH_FLOWS",
    "METRICS",
    "RATE_METRICS",
    "SOLVES",
    "RunRecord",
    "RunSpec",
    "RunTask",
    "Runner",
    "Sweep",
    "SweepOutcome",
    "SweepTable",
    "WAITING_FLOWS",
    "apply_params",
    "canonical_json",
    "execute",
    "journal_path",
    "load_sweep",
    "parse_sweep",
    "read_journal",
    "read_results",
    "run_sweep",
    "simulate_run",
    "write_results",
]
