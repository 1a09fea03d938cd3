"""Time mode on a backend (``solve = "time"`` with ``backend``): runs built on the sweep's
workers (or in this process) and simulated here in batches by
:func:`flowsim.timeline.simulate_prepared`, one run per CPU core, GPU thread or GPU block (see
:mod:`flowsim.sweep`, "Time sweeps on a backend").

A run joins a batch when its flows, grouped into flow classes, are at most
:data:`MAX_BATCH_FLOWS`, it keeps the default ``time_rel_tol`` and it asks for no job metric;
any other runs on the CPU engine where it was built, as the workers would run it. The
results table's ``ran_on`` column says which: the backend's name (``cpu`` or ``cuda``) or
``engine``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from flowsim.engine import DEFAULT_TIME_REL_TOL, PreparedRun
from flowsim.errors import InputError
from flowsim.pipeline import prepare_routed
from flowsim.routes import Routes
from flowsim.scenario import Scenario, ScenarioRun, route_scenario, scenario_from_document
from flowsim.sweep.executors import _batches, _on_one_pool, process_pool
from flowsim.sweep.metrics import job_metric
from flowsim.sweep.runs import RunRecord, execute, failed_record, measure, simulate_run
from flowsim.sweep.spec import RunSpec, RunTask, Sweep
from flowsim.timeline import simulate_prepared

__all__ = ["BATCH_FLOWS", "MAX_BATCH_FLOWS", "WAITING_FLOWS", "TimeSolver"]

#: Most flows (after grouping into classes) of a run that a batch takes. A run holds one core,
#: GPU thread or GPU block for its whole event loop, and every instant re-solves all the flows in flight
#: there, so a run of many flows at once (a burst) is the incremental CPU engine's; this keeps
#: the largest out. On one core of a 2-core Xeon VM a 16-node DGX H100 all-reduce at 8 GiB (9,057
#: classes) took 22 ms in a batch, the CPU engine's kernel 10 ms; at 1 GiB (5,417) 52 and 8 ms.
MAX_BATCH_FLOWS = 16384

#: Flows (after grouping) that the runs of one batch hold together at most.
BATCH_FLOWS = 1 << 20

#: Flows (before grouping) that the runs waiting for a batch hold together at most: each keeps
#: its scenario and every flow's columns until its metrics are taken, some hundreds of bytes a
#: flow, so 2**22 flows are on the order of a GiB.
WAITING_FLOWS = 1 << 22


@dataclass(frozen=True)
class _TimeRun:
    """A run built, routed and prepared, waiting for its batch; ``build_s`` is the seconds
    that took."""

    task: RunTask
    scenario: Scenario
    routes: Routes
    prepared: PreparedRun
    build_s: float

    @property
    def n_flows(self) -> int:
        """Flows the batch simulates: the run's classes."""
        return int(self.prepared.solved.size_bytes.shape[0])

    @property
    def n_held(self) -> int:
        """Flows the run holds while it waits."""
        return int(self.prepared.inp.size_bytes.shape[0])


class TimeSolver:
    """Builds time-mode runs (on ``workers`` processes, or here with 1) and simulates those
    that fit in batches on ``backend`` (``"cpu"`` or ``"cuda"``, resolved) in this process;
    ``n_batches`` counts the batches simulated and ``batch_s`` the seconds spent simulating
    them (copies to and from the backend included, building and metrics not)."""

    def __init__(self, sweep: Sweep, backend: str, workers: int = 1) -> None:
        self.sweep, self.backend, self.workers = sweep, backend, workers
        self.waiting: list[_TimeRun] = []
        self.n_batches = 0
        self.batch_s = 0.0
        self._job_metrics = any(job_metric(name) is not None for name in sweep.metrics)

    def records(self, runs: Sequence[RunSpec]) -> Iterator[list[RunRecord]]:
        """Yield a failed build's or an engine run's record as it comes, and a batch's
        records when it is simulated."""
        tasks = (self.sweep.task(run) for run in runs)
        if self.workers > 1 and len(runs) > 1:
            built: Iterator[_TimeRun | RunRecord] = _built_on_pool(tasks, len(runs), self.workers, self._job_metrics)
        else:
            built = (_build_or_run(task, self._job_metrics) for task in tasks)
        flows = held = 0  # of the waiting runs
        for item in built:
            if isinstance(item, RunRecord):
                yield [item]
                continue
            self.waiting.append(item)
            flows, held = flows + item.n_flows, held + item.n_held
            if flows >= BATCH_FLOWS or held >= WAITING_FLOWS:
                yield self._simulate()
                flows = held = 0
        if self.waiting:
            yield self._simulate()

    def _simulate(self) -> list[RunRecord]:
        batch, self.waiting = self.waiting, []
        self.n_batches += 1
        start = time.perf_counter()
        failure: Exception | None = None
        try:
            results = simulate_prepared([w.prepared for w in batch], backend=self.backend)
        except Exception as err:  # noqa: BLE001 - recorded in each run's row
            failure = err
        elapsed = time.perf_counter() - start
        self.batch_s += elapsed
        share = elapsed / len(batch)
        if failure is not None:
            return [failed_record(w.task.key, w.task.params, self.sweep.metrics, failure, w.build_s + share)
                    for w in batch]
        records = []
        for built, result in zip(batch, results, strict=True):
            begin = time.perf_counter()
            task = built.task
            outcome = ScenarioRun(built.scenario, built.routes, result)
            try:
                metrics = measure(task, outcome)
            except Exception as err:  # noqa: BLE001 - recorded in the run's row
                records.append(failed_record(task.key, task.params, self.sweep.metrics, err,
                                             built.build_s + share + time.perf_counter() - begin))
                continue
            records.append(RunRecord(task.key, task.params, "ok", "", metrics,
                                     built.build_s + share + time.perf_counter() - begin, self.backend))
        return records


def _build_or_run(task: RunTask, job_metrics: bool) -> _TimeRun | RunRecord:
    """``task`` built and prepared by classes for a batch; or, when it is not for one (a job
    metric, too many classes, coarse time, ``classes = false``), its record from the CPU
    engine; or its failed record."""
    if job_metrics:
        return _on_engine(task)
    start = time.perf_counter()
    try:
        scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
        if scenario.options.time_rel_tol != DEFAULT_TIME_REL_TOL or not scenario.options.classes:
            return _on_engine(task)
        routes = route_scenario(scenario)
        try:
            prepared = prepare_routed(scenario.topology, scenario.workload, routes, classes=True)
        except InputError as err:
            raise InputError(f"{scenario.source}: {err}") from None
    except Exception as err:  # noqa: BLE001 - recorded in the run's row
        return failed_record(task.key, task.params, task.metrics, err, time.perf_counter() - start)
    built = _TimeRun(task, scenario, routes, prepared, time.perf_counter() - start)
    return _on_engine(task) if built.n_flows > MAX_BATCH_FLOWS else built


def _build_batch(tasks: list[RunTask], job_metrics: bool) -> list[_TimeRun | RunRecord]:
    """:func:`_build_or_run` each task: one pool task for several runs."""
    return [_build_or_run(task, job_metrics) for task in tasks]


def _built_on_pool(tasks: Iterator[RunTask], n_tasks: int, workers: int,
                   job_metrics: bool) -> Iterator[_TimeRun | RunRecord]:
    """The runs built on a pool of ``workers`` processes, as they come. Runs lost with a
    worker that died (killed, or out of memory), and those not yet built then, run on the CPU
    engine's pool instead, which finds the run that kills its worker and records it failed."""
    lost: list[RunTask] = []
    later: list[list[RunTask]] = []
    build = functools.partial(_build_batch, job_metrics=job_metrics)
    for items in _on_one_pool(build, _batches(tasks, n_tasks, workers), workers, lost, later):
        yield from items
    lost.extend(task for batch in later for task in batch)
    if lost:
        for records in process_pool(simulate_run, iter(lost), len(lost), workers):
            yield from (_ran_on_engine(record) for record in records)


def _on_engine(task: RunTask) -> RunRecord:
    """``task`` run on the CPU engine, as a worker runs it."""
    return _ran_on_engine(execute(simulate_run, task))


def _ran_on_engine(record: RunRecord) -> RunRecord:
    return dataclasses.replace(record, ran_on="engine")
