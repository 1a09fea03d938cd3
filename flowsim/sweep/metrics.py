"""The metrics a sweep run may keep: of a simulated run (``solve = "time"``) and of an
all-at-once max-min allocation (``solve = "rates"``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from flowsim.collectives.builders import collective_name
from flowsim.collectives.report import busbw_Bps
from flowsim.errors import InputError
from flowsim.fairshare import SATURATED_REL_TOL
from flowsim.hardware import LinkTier
from flowsim.jobresults import JOB_METRICS
from flowsim.routes import Routes
from flowsim.scenario import ScenarioRun
from flowsim.training import exposed_communication_s, step_time_s

__all__ = ["METRICS", "METRIC_FUNCTIONS", "RATE_METRICS", "RATE_METRIC_FUNCTIONS", "SOLVES", "Allocation",
           "TRAINING_METRICS", "job_metric", "only_collective", "only_training"]


def _fct(q: float) -> Callable[[ScenarioRun, Mapping], float]:
    return lambda run, document: run.result.fct_percentiles((q,))[q]


def _max_utilization(run: ScenarioRun, document: Mapping) -> float:
    util = run.result.link_utilization()
    return float(util.max()) if util.size else 0.0


def _tier_utilization(tier: LinkTier, reduce: Callable[[np.ndarray], float]) -> Callable[[ScenarioRun, Mapping], float]:
    def metric(run: ScenarioRun, document: Mapping) -> float:
        util = run.result.link_utilization()[run.scenario.topology.link_tier == int(tier)]
        return float(reduce(util)) if util.size else math.nan

    return metric


def only_collective(document: Mapping) -> Mapping:
    """The ``[[workload.collective]]`` table of a workload made of just one collective."""
    workload = document.get("workload")
    if not isinstance(workload, dict):
        workload = {}
    collectives = workload.get("collective")
    if not isinstance(collectives, list) or len(collectives) != 1 or "flows" in workload:
        raise InputError("busbw_Bps needs a workload of exactly one [[workload.collective]] and no flow list")
    return collectives[0]


#: Metrics of a ``[workload.training]`` step: a run without one has no step to time.
TRAINING_METRICS = ("step_time_s", "exposed_communication_s")


def only_training(document: Mapping, metric: str) -> None:
    """An :class:`InputError` naming ``metric`` unless the workload has a training step (its
    time would be the makespan, and its exposed communication all of it)."""
    workload = document.get("workload")
    if not isinstance(workload, dict) or "training" not in workload:
        raise InputError(f"{metric} is a training step's, and the scenario has no [workload.training] (a [[job]]'s: "
                         f"job.NAME.iteration_s, job.NAME.exposed_communication_s)")


def _step_time(run: ScenarioRun, document: Mapping) -> float:
    only_training(document, "step_time_s")
    return step_time_s(run.scenario.compute_s, run.result.makespan_s)


def _exposed_communication(run: ScenarioRun, document: Mapping) -> float:
    only_training(document, "exposed_communication_s")
    return exposed_communication_s(run.scenario.compute_s, run.result.makespan_s)


def _busbw(run: ScenarioRun, document: Mapping) -> float:
    """nccl-tests bus bandwidth of the workload's only collective."""
    collective = only_collective(document)
    op = collective_name(collective["op"])  # as the scenario took it: "alltoall_perf", "allreduce" ...
    if "ranks" in collective:
        n_ranks = len(collective["ranks"])
    else:
        n_ranks = 2 if op == "send" else len(run.scenario.topology.gpus())
    time_s = run.result.makespan_s - collective.get("start_s", 0.0)
    return busbw_Bps(op, collective["size_bytes"], time_s, n_ranks)


METRIC_FUNCTIONS: dict[str, Callable[[ScenarioRun, Mapping], float]] = {
    "makespan_s": lambda run, document: run.result.makespan_s,
    "fct_p50_s": _fct(50.0),
    "fct_p99_s": _fct(99.0),
    "max_link_utilization": _max_utilization,
    **{
        f"utilization_{stat}_{tier.name.lower()}": _tier_utilization(tier, reduce)
        for tier in LinkTier
        for stat, reduce in (("max", np.max), ("mean", np.mean))
    },
    "busbw_Bps": _busbw,
    "step_time_s": _step_time,
    "exposed_communication_s": _exposed_communication,
    "n_events": lambda run, document: float(run.result.n_events),
    "n_flows": lambda run, document: float(run.result.n_flows),
}
#: Metric names a sweep with ``solve = "time"`` may keep. Per-tier utilization is NaN where a
#: topology has no link of that tier; ``wall_s`` (seconds a run took) is always kept.
METRICS = tuple(METRIC_FUNCTIONS)

@dataclass(frozen=True)
class Allocation:
    """One rates-mode run solved: what its metrics are computed from (B/s, bytes)."""

    routes: Routes
    rate_Bps: np.ndarray
    load_Bps: np.ndarray
    capacity_Bps: np.ndarray
    link_tier: np.ndarray
    size_bytes: np.ndarray

    def saturated(self) -> np.ndarray:
        """bool[n_links]: whether each link is loaded to capacity."""
        return self.load_Bps >= self.capacity_Bps * (1 - SATURATED_REL_TOL)


def _over_flows(reduce: Callable[[Allocation], np.floating]) -> Callable[[Allocation], float]:
    """A metric that reduces over flows: NaN for a run without flows."""
    return lambda a: float(reduce(a)) if a.rate_Bps.size else math.nan


def _saturated_in(tier: LinkTier) -> Callable[[Allocation], float]:
    return lambda a: float(np.count_nonzero(a.saturated() & (a.link_tier == int(tier))))


RATE_METRIC_FUNCTIONS: dict[str, Callable[[Allocation], float]] = {
    "aggregate_rate_Bps": lambda a: float(a.rate_Bps.sum()),
    "min_rate_Bps": _over_flows(lambda a: a.rate_Bps.min()),
    "mean_rate_Bps": _over_flows(lambda a: a.rate_Bps.mean()),
    "max_utilization": lambda a: float((a.load_Bps / a.capacity_Bps).max(initial=0.0)),
    "saturated_links": lambda a: float(np.count_nonzero(a.saturated())),
    **{f"saturated_links_{tier.name.lower()}": _saturated_in(tier) for tier in LinkTier},
    "drain_at_rates_s": _over_flows(lambda a: (a.size_bytes / a.rate_Bps).max()),
    "busiest_link_s": lambda a: float((a.routes.per_link_sum(a.size_bytes) / a.capacity_Bps).max(initial=0.0)),
    "n_flows": lambda a: float(a.rate_Bps.size),
}
#: Metric names a sweep with ``solve = "rates"`` may keep, each of one run's all-at-once
#: max-min allocation: ``aggregate_rate_Bps``, ``min_rate_Bps`` and ``mean_rate_Bps`` (the
#: sum, least and mean of the flows' rates; the last two NaN without flows);
#: ``max_utilization`` (the largest link load / capacity); ``saturated_links`` (links loaded
#: to within :data:`flowsim.fairshare.SATURATED_REL_TOL` of capacity) and ``saturated_links_<tier>`` (those of
#: one :class:`~flowsim.hardware.LinkTier`); ``drain_at_rates_s`` (the largest size / rate
#: over flows: when the last flow would finish if every flow kept its all-at-once rate. It is
#: not the makespan, nor a bound on it: as flows finish the others' max-min rates change,
#: up or down, and latencies, start times and dependencies are ignored);
#: ``busiest_link_s`` (the largest bytes crossing a link / its capacity: a lower bound on
#: the time to move every flow's bytes with no dependencies, whatever the rates); and
#: ``n_flows`` (the flows with bytes to move).
RATE_METRICS = tuple(RATE_METRIC_FUNCTIONS)
#: Values of ``[sweep] solve`` and the metric names each allows (with ``"time"``, the job
#: metrics :func:`job_metric` reads too).
SOLVES = {"time": METRICS, "rates": RATE_METRICS}


def job_metric(name: str) -> tuple[str, str] | None:
    """``(job, figure)`` of a job metric ``job.NAME.FIGURE`` (``FIGURE`` one of
    :data:`flowsim.jobresults.JOB_METRICS`: ``slowdown``, ``iteration_s``,
    ``alone_iteration_s``, ``exposed_communication_s``, ``alone_exposed_communication_s``),
    or None for any other name."""
    head, _, rest = name.partition(".")
    job, _, figure = rest.rpartition(".")
    if head != "job" or not job or figure not in JOB_METRICS:
        return None
    return job, figure
