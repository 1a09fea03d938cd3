"""Rates mode (``solve = "rates"``): runs built in this process, one by one, and solved in
batches of runs that share their routes (see :mod:`flowsim.sweep`, "Rates mode")."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.batched import BatchProblem
from flowsim.fairshare import FairShareProblem
from flowsim.routes import Routes
from flowsim.scenario import rates_problem, scenario_from_document
from flowsim.sweep.metrics import RATE_METRIC_FUNCTIONS, Allocation
from flowsim.sweep.runs import RunRecord, failed_record
from flowsim.sweep.spec import RunSpec, Sweep

__all__ = ["BATCH_RUNS", "BATCH_VALUES", "RatesSolver"]


#: Most runs one rates-mode batch holds.
BATCH_RUNS = 256
#: Most values (float64 or int64, 8 bytes each) that the runs waiting for rates-mode batches
#: hold together: 2**25 is 256 MiB.
BATCH_VALUES = 2**25

@dataclass(frozen=True)
class _RatesRun:
    """A rates-mode run built and checked on its own, waiting for its batch.

    ``build_s`` is the seconds building it took; the arrays are its links' capacities (B/s)
    and tiers, and its flows' weights, caps (B/s) and sizes (bytes).
    """

    run: RunSpec
    build_s: float
    capacity_Bps: np.ndarray
    link_tier: np.ndarray
    weight: np.ndarray
    cap_Bps: np.ndarray
    size_bytes: np.ndarray

    @property
    def n_values(self) -> int:
        """Values it holds until solved: two per link, four per flow (its rates included)."""
        return 2 * self.capacity_Bps.size + 4 * self.weight.size


def _build_rates_run(sweep: Sweep, run: RunSpec) -> tuple[FairShareProblem, _RatesRun]:
    """Build ``run``'s scenario and routes, and check its max-min problem on its own (the
    problem is returned: its routes and their transpose serve the run's batch).

    Raises
    ------
    InputError
        Naming the scenario file, when the scenario is bad for these parameter values, a
        flow cannot be routed, or a flow has neither a route nor a rate cap.
    """
    start = time.perf_counter()
    task = sweep.task(run)
    scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    flows, problem = rates_problem(scenario)
    built = _RatesRun(run, time.perf_counter() - start, problem.capacity_Bps, scenario.topology.link_tier,
                      problem.weight, problem.cap_Bps, scenario.workload.size_bytes[flows])
    return problem, built


@dataclass
class _Batch:
    """Runs over the same routes, waiting to be solved together: ``first`` is the first run's
    checked problem, whose routes and transpose the batch uses; ``n_values`` counts the runs'
    values and the routes' flow-link crossings twice (the CSR and its transpose)."""

    first: FairShareProblem
    runs: list[_RatesRun]
    n_values: int

    @property
    def routes(self) -> Routes:
        return self.first.routes


def _solve_batch(batch: _Batch, metrics: Sequence[str], backend: str) -> list[RunRecord]:
    """Solve a batch with one :meth:`BatchProblem.solve` and compute each run's metrics.

    Each run was checked when it was built, so the batch is not checked again. Each run's
    ``wall_s`` is its build time, its metric time and an equal share of the batch's solve
    time. Should the solve fail (a GPU error), every run of the batch records the error.
    """
    start = time.perf_counter()
    runs = batch.runs
    try:
        problem = BatchProblem.from_checked(
            batch.first,
            np.stack([r.capacity_Bps for r in runs]),
            _once_or_stacked([r.weight for r in runs]),
            _once_or_stacked([r.cap_Bps for r in runs]),
        )
        rates = problem.solve(backend)
    except Exception as err:  # noqa: BLE001 - recorded in every row of the batch
        share = (time.perf_counter() - start) / len(runs)
        return [failed_record(r.run.key, r.run.params, metrics, err, r.build_s + share) for r in runs]
    share = (time.perf_counter() - start) / len(runs)
    records = []
    for built, rate in zip(runs, rates, strict=True):
        begin = time.perf_counter()
        allocation = Allocation(batch.routes, rate, batch.routes.per_link_sum(rate), built.capacity_Bps,
                                 built.link_tier, built.size_bytes)
        values = {name: RATE_METRIC_FUNCTIONS[name](allocation) for name in metrics}
        wall_s = built.build_s + share + time.perf_counter() - begin
        records.append(RunRecord(built.run.key, built.run.params, "ok", "", values, wall_s))
    return records


def _once_or_stacked(rows: list[np.ndarray]) -> np.ndarray:
    """One row when every run has the same values (as in a sweep over capacities), which a
    batch keeps once for all its instances; else one row per run."""
    if all(np.array_equal(row, rows[0]) for row in rows[1:]):
        return rows[0]
    return np.stack(rows)


class RatesSolver:
    """Builds rates-mode runs one by one and solves them in batches of shared routes.

    A batch is solved when it holds :data:`BATCH_RUNS` runs, the largest one whenever the
    waiting runs pass :data:`BATCH_VALUES` values, and the rest once every run is built.
    ``n_batches`` counts the batches solved and ``batch_s`` the seconds spent solving them
    (copies to and from the backend included).
    """

    def __init__(self, sweep: Sweep, backend: str) -> None:
        self.sweep, self.backend = sweep, backend
        self.waiting: dict[tuple[int, bytes, bytes], _Batch] = {}
        self.n_values = 0
        self.n_batches = 0
        self.batch_s = 0.0

    def records(self, runs: Iterable[RunSpec]) -> Iterator[list[RunRecord]]:
        """Yield a failed build's record at once, and a batch's records when it is solved."""
        for run in runs:
            start = time.perf_counter()
            try:
                problem, built = _build_rates_run(self.sweep, run)
            except Exception as err:  # noqa: BLE001 - recorded in the run's row
                yield [failed_record(run.key, run.params, self.sweep.metrics, err, time.perf_counter() - start)]
                continue
            routes = problem.routes
            key = (routes.n_links, routes.flow_link_indptr.tobytes(), routes.flow_link_indices.tobytes())
            if key not in self.waiting:
                self.waiting[key] = _Batch(problem, [], 2 * routes.n_incidences)
                self.n_values += 2 * routes.n_incidences
            batch = self.waiting[key]
            batch.runs.append(built)
            batch.n_values += built.n_values
            self.n_values += built.n_values
            if len(batch.runs) >= BATCH_RUNS:
                yield self._solve(key)
            while self.n_values > BATCH_VALUES:
                yield self._solve(max(self.waiting, key=lambda k: self.waiting[k].n_values))
        while self.waiting:
            yield self._solve(next(iter(self.waiting)))

    def _solve(self, key: tuple[int, bytes, bytes]) -> list[RunRecord]:
        batch = self.waiting.pop(key)
        self.n_values -= batch.n_values
        self.n_batches += 1
        start = time.perf_counter()
        try:
            return _solve_batch(batch, self.sweep.metrics, self.backend)
        finally:
            self.batch_s += time.perf_counter() - start
