"""A sweep from end to end: what still has to run (from the journal), running it (rates
batches, or an executor), journalling each result as it arrives, and the results table."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from flowsim.batched import resolve_backend
from flowsim.errors import InputError, output_file, whole_number
from flowsim.files import held_exclusively, refuse_foreign
from flowsim.sweep.executors import Engine, dask_engine, process_pool, serial
from flowsim.sweep.journal import FORMAT as RESULTS_FORMAT
from flowsim.sweep.journal import (
    JournalWriter,
    journal_path,
    read_journal,
    write_results,
)
from flowsim.sweep.progress import ProgressBar
from flowsim.sweep.rates import RatesSolver
from flowsim.sweep.runs import Runner, RunRecord, simulate_run
from flowsim.sweep.spec import RunSpec, Sweep, trace_file
from flowsim.sweep.timebatch import TimeSolver

__all__ = ["SweepOutcome", "run_sweep"]


@dataclass(frozen=True)
class SweepOutcome:
    """What :func:`run_sweep` did: ``n_runs`` in the spec (``n_unique`` distinct keys),
    ``n_skipped`` found in the journal, ``n_ran`` now; ``n_failed`` rows with status
    ``"error"`` in the results (old and new). With ``solve = "rates"``, ``backend`` is where
    the batches ran (``"cpu"`` or ``"cuda"``), ``n_batches`` how many were solved now and
    ``batch_s`` the seconds that took; likewise for a time sweep on a backend. On the CPU
    engine's workers they are None, 0 and 0.0. ``n_retraced`` of the skipped runs ran again
    to write the trace asked for; ``untraced`` says, for each of those that failed, which run
    and why (its row keeps the journal's result). ``failures`` says, for each run in the
    results whose status is ``"error"``, in run order, which run, its parameters and why."""

    output: Path
    journal: Path
    n_runs: int
    n_unique: int
    n_skipped: int
    n_ran: int
    n_failed: int
    backend: str | None = None
    n_batches: int = 0
    n_retraced: int = 0
    untraced: tuple[str, ...] = ()
    batch_s: float = 0.0
    failures: tuple[str, ...] = ()

def run_sweep(
    sweep: Sweep,
    output: str | os.PathLike,
    *,
    workers: int | None = None,
    dask: str | None = None,
    traces: str | os.PathLike | None = None,
    runner: Runner = simulate_run,
    progress: TextIO | None = None,
    backend: str | None = None,
    retry_failed: bool = False,
) -> SweepOutcome:
    """Run every run of ``sweep`` not yet in the journal and write the results table.

    Parameters
    ----------
    sweep : Sweep
    output : str or path-like
        The HDF5 results file; the journal is ``<output>.journal`` (:func:`journal_path`).
    workers : int, optional
        Local worker processes (default: :func:`os.cpu_count`); 1 runs serially in this
        process. With ``dask="local"``, the LocalCluster's worker count. Time mode only, as
        are ``dask``, ``traces`` and ``runner``; with a ``backend``, the processes that build
        the runs (and run those that go to the CPU engine).
    dask : str, optional
        ``"local"`` to start a :class:`distributed.LocalCluster` (processes, one thread
        each), or a scheduler address (``"tcp://host:8786"``) to use an existing cluster.
    traces : str or path-like, optional
        A directory to write each run's full trace to (``<key>.h5``); created if its parent
        exists. A run found in the journal whose trace is not there runs again to write it
        (its row stays the journal's); a failed run has no trace.
    runner : callable
        ``runner(task) -> {metric: value}`` for one :class:`RunTask`; must pickle (a
        module-level function) for a pool or Dask. Default :func:`simulate_run`.
    progress : text stream, optional
        Where to draw the progress bar (``sys.stderr``); None draws nothing.
    backend : {"cpu", "cuda", "auto"}, optional
        Where the batches are solved (rates mode: default ``"cpu"``, every core) or
        simulated (time mode: given, runs go in batches to the backend, see "Time sweeps on
        a backend" in :mod:`flowsim.sweep`; not given, to the CPU engine's workers);
        ``"auto"`` is ``"cuda"`` where it can run.
    retry_failed : bool
        Run again the runs the journal holds as failed (a worker that ran out of memory, once
        more is given), where by default they keep their error.

    Returns
    -------
    SweepOutcome

    Raises
    ------
    InputError
        Before any run, when ``output`` or its journal cannot be written or would replace an
        input file (:func:`flowsim.errors.output_file`), is not a regular file, is held by
        another sweep (:func:`flowsim.files.held_exclusively`), ``traces`` is not a directory and
        cannot be made one, ``workers`` is not positive, or an argument does not apply to the
        sweep's ``solve`` mode.
    BackendUnavailable
        ``backend="cuda"`` without numba-cuda installed or without a GPU.
    KeyboardInterrupt
        Passed on after the results table has been written from the journal.

    Notes
    -----
    Runs with equal keys (equal parameters) run once and share their row values. Results
    arrive in any order; the table is ordered by run index, so it does not depend on the
    worker count (except ``wall_s``). With ``solve = "rates"`` the runs are built and solved
    in this process (see the module docstring); ``wall_s`` then holds a share of each batch's
    solve time.
    """
    inputs: tuple[str | Path, ...] = (sweep.source, sweep.scenario_path, *sweep.files)
    output = output_file(output, "the results table", inputs=inputs, streams=False)
    refuse_foreign(output, RESULTS_FORMAT, "a sweep's results table")
    journal = output_file(journal_path(output), "the sweep journal", inputs=inputs, streams=False)
    solver: RatesSolver | TimeSolver | None = None
    if sweep.solve == "rates" or backend is not None:
        rates = sweep.solve == "rates"
        # A rates sweep builds in this process; a time sweep on a backend builds on workers.
        time_only: list[tuple[str, object]] = [("workers", workers)] if rates else []
        time_only += [("dask", dask), ("traces", traces)]
        given = [name for name, value in time_only if value is not None]
        if runner is not simulate_run:
            given.append("runner")
        if given and rates:
            raise InputError(
                f"{sweep.source}: {', '.join(given)}: for sweeps with solve = 'time' only; with solve = 'rates' "
                f"the runs are built in this process and each batch is solved on the backend"
            )
        if given:
            raise InputError(
                f"{sweep.source}: {', '.join(given)}: for sweeps on the CPU engine's workers; with a backend "
                f"the runs are built on local workers and simulated in batches on it"
            )
        resolved = resolve_backend("cpu" if backend is None else backend)
        if rates:
            solver = RatesSolver(sweep, resolved)
        else:
            builders = whole_number("workers", (os.cpu_count() or 1) if workers is None else workers)
            solver = TimeSolver(sweep, resolved, builders)
            workers = None
    else:
        if workers is None:
            workers = os.cpu_count() or 1
        workers = whole_number("workers", workers)
    trace_dir = None if traces is None else _trace_directory(traces, output, journal)
    # Two sweeps on one output would each run nearly every run and overwrite the other's table.
    with held_exclusively(output, "sweep"):
        return _run_held(sweep, output, journal, workers, dask, trace_dir, runner, progress, solver, retry_failed)


def _run_held(
    sweep: Sweep, output: Path, journal: Path, workers: int | None, dask: str | None, trace_dir: Path | None,
    runner: Runner, progress: TextIO | None, solver: RatesSolver | TimeSolver | None, retry_failed: bool,
) -> SweepOutcome:
    """:func:`run_sweep` once every argument is checked and the output is held."""
    records = read_journal(journal)
    if retry_failed:  # a later record of a key wins, in the journal as here
        records = {key: record for key, record in records.items() if record.status == "ok"}
    first: dict[str, RunSpec] = {}
    for run in sweep.runs:
        first.setdefault(run.key, run)
    unique = list(first.values())
    # A journalled run lacking a metric this spec asks for (an earlier spec's) runs again.
    todo = [run for run in unique if run.key not in records or not set(sweep.metrics) <= set(records[run.key].metrics)]
    retrace: list[RunSpec] = []
    if trace_dir is not None:
        # A journalled run keeps its row, but a trace asked for now is written by running it
        # again; a failed run has no trace to write.
        pending = {run.key for run in todo}
        retrace = [run for run in unique if run.key not in pending and records[run.key].status == "ok"
                   and not trace_file(trace_dir, run.key).exists()]
    retracing = {run.key for run in retrace}
    untraced: list[str] = []
    with contextlib.ExitStack() as resources:
        results: Iterator[list[RunRecord]]
        if solver is not None:
            results = solver.records(todo)
        else:
            engine: Engine
            assert workers is not None  # set above for the CPU engine's workers, the only case without a solver
            work = todo + retrace
            if dask is not None:
                engine = resources.enter_context(dask_engine(dask, workers))
            else:
                engine = serial if workers == 1 or len(work) <= 1 else process_pool
                workers = min(workers, len(work))
            results = engine(runner, (sweep.task(run, trace_dir) for run in work), len(work), workers)
        if trace_dir is not None:
            trace_dir.mkdir(exist_ok=True)
        bar = ProgressBar(progress, len(unique), len(unique) - len(todo) - len(retrace))
        writer = JournalWriter(journal)
        try:
            for finished in results:
                ran = [record for record in finished if record.key not in retracing]
                untraced += [f"run {first[record.key].index} ({record.key}): {record.error}"
                             for record in finished if record.key in retracing and record.status != "ok"]
                writer.append(ran)
                records.update((record.key, record) for record in ran)
                bar.update(finished)
        finally:
            writer.close()
            bar.close()
            # The journal is the record of what finished: an interrupt can land between a
            # batch reaching it and reaching ``records``.
            records = read_journal(journal)
            write_results(output, sweep, records)
    failures = tuple(_failure(run, records[run.key]) for run in sweep.runs if records[run.key].status != "ok")
    return SweepOutcome(output, journal, len(sweep.runs), len(unique), len(unique) - len(todo), len(todo),
                        len(failures), None if solver is None else solver.backend,
                        0 if solver is None else solver.n_batches, len(retrace), tuple(untraced),
                        0.0 if solver is None else solver.batch_s, failures)


def _failure(run: RunSpec, record: RunRecord) -> str:
    """``run 3 (topology.n_nodes = 4, ...): why`` for a failed run."""
    params = ", ".join(f"{path} = {json.dumps(value, default=str)}" for path, value in run.params.items())
    return f"run {run.index} ({params}): {record.error}"


def _trace_directory(traces: str | os.PathLike, output: Path, journal: Path) -> Path:
    """``traces`` as a directory the runs can write their traces into (made by the caller if
    missing); an :class:`InputError` naming it otherwise, before any run starts."""
    directory = Path(traces)
    if os.path.lexists(directory) and not directory.is_dir():
        raise InputError(f"{directory}: the traces must go to a directory, and this is a file")
    existing = directory if directory.is_dir() else directory.parent
    if not existing.is_dir():
        raise InputError(f"{directory}: cannot create the traces directory: {str(existing)!r} does not exist")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{directory}: the directory {str(existing)!r} is not writable")
    for path, what in ((output, "the results table"), (journal, "the sweep journal")):
        if directory.resolve() == path.resolve():
            raise InputError(f"{directory}: the traces directory is also {what}")
    return directory
