"""Time mode on a backend (``solve = "time"`` with ``backend``): runs built in this process and
simulated in batches by :func:`flowsim.timeline.simulate_prepared`, one run per CPU core or
GPU thread (see :mod:`flowsim.sweep`, "Time sweeps on a backend").

A run joins a batch when its flows, grouped into flow classes, are at most
:data:`MAX_BATCH_FLOWS`, it keeps the default ``time_rel_tol`` and it asks for no job metric;
any other runs on the CPU engine here,
as the workers would run it. The results table's ``ran_on`` column says which: the backend's
name (``cpu`` or ``cuda``) or ``engine``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from flowsim.engine import DEFAULT_TIME_REL_TOL, PreparedRun
from flowsim.errors import InputError
from flowsim.pipeline import prepare_routed
from flowsim.routes import Routes
from flowsim.scenario import Scenario, ScenarioRun, route_scenario, scenario_from_document
from flowsim.sweep.metrics import METRIC_FUNCTIONS, job_metric
from flowsim.sweep.runs import RunRecord, execute, failed_record, simulate_run
from flowsim.sweep.spec import RunSpec, RunTask, Sweep
from flowsim.timeline import simulate_prepared

__all__ = ["BATCH_FLOWS", "MAX_BATCH_FLOWS", "WAITING_FLOWS", "TimeSolver"]

#: Most flows (after grouping into classes) of a run that a batch takes. A run holds one core
#: or GPU thread for its whole event loop, and every instant re-solves all the flows in flight
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

    run: RunSpec
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
    """Builds time-mode runs one by one and simulates those that fit in batches on ``backend``
    (``"cpu"`` or ``"cuda"``, resolved); ``n_batches`` counts the batches simulated."""

    def __init__(self, sweep: Sweep, backend: str) -> None:
        self.sweep, self.backend = sweep, backend
        self.waiting: list[_TimeRun] = []
        self.n_batches = 0
        self._job_metrics = any(job_metric(name) is not None for name in sweep.metrics)

    def records(self, runs: Iterable[RunSpec]) -> Iterator[list[RunRecord]]:
        """Yield a failed build's or an engine run's record at once, and a batch's records
        when it is simulated."""
        for run in runs:
            task = self.sweep.task(run)
            if self._job_metrics:
                yield [_on_engine(task)]
                continue
            start = time.perf_counter()
            try:
                built = self._build(run, task, start)
            except Exception as err:  # noqa: BLE001 - recorded in the run's row
                yield [failed_record(run.key, run.params, self.sweep.metrics, err, time.perf_counter() - start)]
                continue
            if built is None:
                yield [_on_engine(task)]
                continue
            self.waiting.append(built)
            if (sum(w.n_flows for w in self.waiting) >= BATCH_FLOWS
                    or sum(w.n_held for w in self.waiting) >= WAITING_FLOWS):
                yield self._simulate()
        if self.waiting:
            yield self._simulate()

    def _build(self, run: RunSpec, task: RunTask, start: float) -> _TimeRun | None:
        """``run`` built and prepared by classes, or None when it is not for a batch: too
        large, or asking for coarse time (``options.time_rel_tol``, which the batch does not
        follow)."""
        scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
        topology, workload = scenario.topology, scenario.workload
        routes = route_scenario(scenario)
        try:
            prepared = prepare_routed(topology, workload, routes, classes=True)
        except InputError as err:
            raise InputError(f"{scenario.source}: {err}") from None
        built = _TimeRun(run, task, scenario, routes, prepared, time.perf_counter() - start)
        fits = built.n_flows <= MAX_BATCH_FLOWS and scenario.options.time_rel_tol == DEFAULT_TIME_REL_TOL
        return built if fits else None

    def _simulate(self) -> list[RunRecord]:
        batch, self.waiting = self.waiting, []
        self.n_batches += 1
        start = time.perf_counter()
        try:
            results = simulate_prepared([w.prepared for w in batch], backend=self.backend)
        except Exception as err:  # noqa: BLE001 - recorded in each run's row
            share = (time.perf_counter() - start) / len(batch)
            return [failed_record(w.run.key, w.run.params, self.sweep.metrics, err, w.build_s + share) for w in batch]
        share = (time.perf_counter() - start) / len(batch)
        records = []
        for built, result in zip(batch, results, strict=True):
            begin = time.perf_counter()
            outcome = ScenarioRun(built.scenario, built.routes, result)
            try:
                metrics = {name: float(METRIC_FUNCTIONS[name](outcome, built.task.document))
                           for name in self.sweep.metrics}
            except Exception as err:  # noqa: BLE001 - recorded in the run's row
                records.append(failed_record(built.run.key, built.run.params, self.sweep.metrics, err,
                                             built.build_s + share + time.perf_counter() - begin))
                continue
            records.append(RunRecord(built.run.key, built.run.params, "ok", "", metrics,
                                     built.build_s + share + time.perf_counter() - begin, self.backend))
        return records


def _on_engine(task: RunTask) -> RunRecord:
    """``task`` run on the CPU engine, as a worker runs it."""
    record = execute(simulate_run, task)
    return RunRecord(record.key, record.params, record.status, record.error, record.metrics, record.wall_s, "engine")
