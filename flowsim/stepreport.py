"""What a simulated training step spent its time on, in terms a person reads at a glance.

:func:`step_breakdown` turns a step's flows and their simulated times into a
:class:`StepBreakdown`: the step's critical path split into compute and each kind of
communication, the pipeline bubble, per-tier link utilization with each tier's busiest
links, and a per-stage activity chart (when each pipeline stage computed and when it had
communication of each kind in flight). ``flowsim run`` prints it (:func:`describe_step`) and
stores it in the trace (:mod:`flowsim.trace`, group ``/training``).

Critical path
    The chain of flows and compute that ends last, walked backwards from the last flow to
    finish: a flow's time from ready to finish (route latency, overhead and transfer) is
    communication of its kind; the ``delay_s`` before it is compute; a flow that waited for
    its ``start_s`` ends the walk, and the time before it is compute when it belongs to the
    training step (a rank's compute before its first flow, a gradient bucket's ready time)
    and waiting otherwise (a checkpoint's start time). The parts add up to the step time
    exactly. The step's ``compute_s`` is the longest compute path with free communication;
    the critical path's compute can be shorter than that, where communication delayed one
    rank more than the compute of another, so the critical path's communication is at least
    the exposed communication ``step_s - compute_s`` and says which kind it was.
Kinds
    From a flow's ``phase`` tag: ``tp`` (TP collectives), ``pp`` (activations and their
    gradients between stages), ``dp`` (``gradients``: the DP buckets, and ``params``: the
    distributed optimizer's and FSDP's parameter all-gathers), ``ep`` (expert
    all-to-alls), ``cp`` (context parallelism's key and value transfers), ``checkpoint``; any
    other flow of the scenario is ``other``.
Tiers
    Links grouped by what they are (:func:`link_groups`): NVLink (scale-up), PCIe and the
    rest of the host, InfiniBand and Ethernet (scale-out, by technology).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowsim.budgets import budget_links
from flowsim.formatting import format_seconds
from flowsim.hardware import LinkTier, is_infiniband
from flowsim.result import SimulationResult
from flowsim.strings import CodedStrings, coded
from flowsim.topology import Topology
from flowsim.workload import Workload

__all__ = [
    "ACTIVITIES",
    "COMMUNICATION_KINDS",
    "TIER_LABELS",
    "LinkUse",
    "StepBreakdown",
    "TierUsage",
    "busiest_link",
    "critical_path",
    "describe_step",
    "link_groups",
    "merged_intervals",
    "step_breakdown",
]

#: Kinds of communication in a step, as printed and stored, and the ``phase`` tags they come from
#: (``cp``, context parallelism's key and value exchange, since 2026-12-06: last, so that the
#: kinds and activities of older traces keep their numbers).
COMMUNICATION_KINDS = ("tp", "pp", "dp", "ep", "checkpoint", "other", "cp")
_KIND_OF_PHASE = {"tp": "tp", "pp": "pp", "gradients": "dp", "params": "dp", "ep": "ep", "checkpoint": "checkpoint",
                  "cp": "cp", "compute": ""}
#: Phases whose flows wait for a ``start_s`` that is compute (their rank's compute before its
#: first flow, a bucket's ready time), not a wait.
_COMPUTE_STARTS = frozenset({"tp", "pp", "gradients", "params", "ep", "cp", "compute"})
#: Rows of the activity chart: forward and backward compute, then each kind of communication.
ACTIVITIES = ("forward", "backward", *COMMUNICATION_KINDS)
#: Printed names of the kinds and tier groups.
_KIND_LABELS = {"tp": "TP", "pp": "PP", "dp": "DP", "ep": "EP", "checkpoint": "checkpoint", "other": "other",
                "cp": "CP"}
#: Tier groups in order, and how they are printed.
TIER_LABELS = {"nvlink": "NVLink", "host": "PCIe/host", "infiniband": "InfiniBand", "ethernet": "Ethernet",
               "scale_out": "scale-out"}


@dataclass(frozen=True)
class TierUsage:
    """One tier group's links over the step.

    Attributes
    ----------
    tier : str
        A key of :data:`TIER_LABELS`.
    n_links : int
        Links of the group in the topology.
    max_utilization, mean_utilization : float
        Mean utilization over the step of its busiest link, and averaged over its links that
        carried bytes.
    top_links : tuple of int
        Its busiest link ids, busiest first (links that carried nothing left out).
    top_utilization : tuple of float
        Their mean utilization over the step.
    """

    tier: str
    n_links: int
    max_utilization: float
    mean_utilization: float
    top_links: tuple[int, ...]
    top_utilization: tuple[float, ...]


@dataclass(frozen=True)
class StepBreakdown:
    """A simulated training step, broken down (see the module docstring).

    Attributes
    ----------
    step_s, compute_s, bubble_s : float
        The step time, its compute (longest compute path with free communication, the bubble
        included) and the pipeline bubble (0 without pipeline parallelism).
    critical_compute_s, critical_wait_s : float
        Compute and waiting for a start time on the critical path.
    critical_communication_s : dict of str to float
        Per kind of :data:`COMMUNICATION_KINDS`: its time on the critical path.
    tiers : tuple of TierUsage
        Per tier group present in the topology, in :data:`TIER_LABELS` order.
    activity_stage, activity_kind : numpy.ndarray
        int64[n]: the pipeline stage (0 for a data-parallel step) and the
        :data:`ACTIVITIES` index of each activity interval.
    activity_start_s, activity_end_s : numpy.ndarray
        float64[n]: when some rank of the stage began and ended that activity; intervals of
        one stage and activity do not overlap.
    layout : dict of str to int
        ``tp``, ``pp``, ``dp`` (Megatron's, without ``cp``), ``ep``, ``n_microbatches``,
        ``virtual_stages`` and ``cp`` of the step.
    """

    step_s: float
    compute_s: float
    bubble_s: float
    critical_compute_s: float
    critical_wait_s: float
    critical_communication_s: Mapping[str, float]
    tiers: tuple[TierUsage, ...]
    activity_stage: np.ndarray
    activity_kind: np.ndarray
    activity_start_s: np.ndarray
    activity_end_s: np.ndarray
    layout: Mapping[str, int] = field(default_factory=dict)

    @property
    def exposed_communication_s(self) -> float:
        """``step_s - compute_s``: the communication the compute did not hide."""
        return self.step_s - self.compute_s

    @property
    def critical_path_s(self) -> float:
        """The critical path's parts added up (the step time, to rounding)."""
        return self.critical_compute_s + self.critical_wait_s + sum(self.critical_communication_s.values())


def _group_of(tier: int, technology: str) -> str:
    """The :data:`TIER_LABELS` key of a link of ``tier`` and ``technology``."""
    if tier == LinkTier.SCALE_UP:
        return "nvlink"
    if tier == LinkTier.HOST:
        return "host"
    if is_infiniband(technology):
        return "infiniband"
    return "ethernet" if technology.startswith("eth") else "scale_out"


def link_groups(topology: Topology) -> tuple[tuple[str, ...], np.ndarray]:
    """The tier groups present and each link's group.

    NVLink for the scale-up tier, PCIe/host for the host tier, and the scale-out tier split
    by technology: InfiniBand (``ib_*``), Ethernet (``eth*``), anything else ``scale_out``.

    Returns
    -------
    names : tuple of str
        Keys of :data:`TIER_LABELS` present, in its order.
    group : numpy.ndarray
        int64[n_links]: each link's index into ``names``.
    """
    keys = np.empty(topology.n_links, dtype=object)
    for link, (tier, technology) in enumerate(zip(topology.link_tier.tolist(), topology.link_technology, strict=True)):
        keys[link] = _group_of(tier, technology)
    names = tuple(k for k in TIER_LABELS if k in set(keys.tolist()))
    index = {k: i for i, k in enumerate(names)}
    return names, np.array([index[k] for k in keys.tolist()], dtype=np.int64)


#: Relative difference of utilization below which two links count as equally busy (rounding
#: of bytes summed over flows).
_SAME_USE = 1e-9


@dataclass(frozen=True)
class LinkUse:
    """The busiest link of a run (:func:`busiest_link`).

    Attributes
    ----------
    name : str
        The link's name, or a shared budget's (``"budget nvls n0.nvswitch in"``).
    tier : str
        What it is, as printed: a value of :data:`TIER_LABELS`, ``"NVLS-budget"`` for the
        budget an NVLS all-reduce's messages share in one server's switch
        (:mod:`flowsim.budgets`), ``"budget"`` for another shared budget: one word each, so
        that a table's columns split on spaces.
    utilization : float
        Bytes it carried over what its capacity moves in the run's time.
    """

    name: str
    tier: str
    utilization: float


def busiest_link(topology: Topology, workload: Workload, result: SimulationResult, duration_s: float) -> LinkUse | None:
    """The link (or shared budget) of highest mean utilization over ``duration_s`` (> 0);
    None where no link carried a byte.

    A shared budget counts as a link (the engine solves it as one): an NVLS all-reduce
    held to its ceiling shows its budget full where no NVLink is. Of links equally busy (to
    :data:`_SAME_USE`), the one farthest out is named: the network before the host, the
    host before NVLink, any link before a budget. A GPU's traffic to its NIC crosses a PCIe
    link and the NIC's link at one rate where both move 400 Gb/s (DGX H100), and the NIC's
    is the one a person looks at.
    """
    utilization = result.link_bytes[: topology.n_links] / (topology.link_capacity_Bps * duration_s)
    names: list[str] = []
    budgets = budget_links(workload, topology.n_links)
    if budgets is not None:
        drawn = budgets.link_of_flow >= 0
        carried = np.bincount(budgets.link_of_flow[drawn] - topology.n_links,
                              weights=workload.size_bytes[drawn], minlength=budgets.capacity_Bps.size)
        utilization = np.concatenate([utilization, carried / (budgets.capacity_Bps * duration_s)])
        names = list(budgets.names)
    if not utilization.size or not utilization.max() > 0:
        return None
    busiest = np.flatnonzero(utilization >= utilization.max() * (1.0 - _SAME_USE))
    outward = np.where(busiest < topology.n_links, topology.link_tier[np.minimum(busiest, topology.n_links - 1)], -1)
    link = int(busiest[np.argmax(outward)])
    if link >= topology.n_links:
        name = names[link - topology.n_links]
        return LinkUse(name, "NVLS-budget" if name.startswith("budget nvls ") else "budget", float(utilization[link]))
    tier = TIER_LABELS[_group_of(int(topology.link_tier[link]), topology.link_technology[link])]
    return LinkUse(topology.link_names[link], tier, float(utilization[link]))


def _tier_usage(topology: Topology, result: SimulationResult, step_s: float, top: int) -> tuple[TierUsage, ...]:
    names, group = link_groups(topology)
    utilization = result.link_utilization(step_s if step_s > 0 else None)
    usage = []
    for g, name in enumerate(names):
        links = np.flatnonzero(group == g)
        util = utilization[links]
        used = result.link_bytes[links] > 0
        order = np.argsort(-util, kind="stable")
        order = order[used[order]][:top]
        usage.append(TierUsage(
            name, int(links.size), float(util.max()), float(util[used].mean()) if used.any() else 0.0,
            tuple(links[order].tolist()), tuple(util[order].tolist()),
        ))
    return tuple(usage)


def _kinds(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Per flow: its :data:`COMMUNICATION_KINDS` index (-1 for compute markers), and whether a
    ``start_s`` it waited for was compute."""
    phases, codes = coded(workload.tags.get("phase", CodedStrings.constant("", len(workload))))
    kinds = [_KIND_OF_PHASE.get(phase, "other") for phase in phases]
    kind_of = np.array([COMMUNICATION_KINDS.index(k) if k else -1 for k in kinds], dtype=np.int64)
    computed = np.array([phase in _COMPUTE_STARTS for phase in phases], dtype=bool)
    return kind_of[codes], computed[codes]


def critical_path(
    workload: Workload, result: SimulationResult, compute_s: float = 0.0
) -> tuple[float, float, dict[str, float]]:
    """The critical path of a simulated step, in parts (see the module docstring).

    Parameters
    ----------
    workload : Workload
        The step's flows (tag ``phase`` gives each its kind).
    result : SimulationResult
        Their simulated times.
    compute_s : float
        The step's compute; when it ends after the last flow, the critical path is compute
        alone.

    Returns
    -------
    compute_s, wait_s : float
        Compute and waiting for a start time on the path.
    communication_s : dict of str to float
        Per kind of :data:`COMMUNICATION_KINDS`.
    """
    communication = dict.fromkeys(COMMUNICATION_KINDS, 0.0)
    makespan = result.makespan_s
    if not len(workload) or compute_s >= makespan:
        return compute_s, 0.0, communication
    kind, computed = _kinds(workload)
    ready, finish = result.ready_s, result.finish_s
    indptr, indices = workload.dep_indptr, workload.dep_indices
    per_kind = np.zeros(len(COMMUNICATION_KINDS))
    path_compute = wait = 0.0
    flow = int(np.argmax(finish))
    while True:
        if kind[flow] >= 0:
            per_kind[kind[flow]] += finish[flow] - ready[flow]
        deps = indices[indptr[flow] : indptr[flow + 1]]
        if deps.size:
            last = int(deps[np.argmax(finish[deps])])
            if finish[last] + workload.delay_s[flow] >= workload.start_s[flow]:
                path_compute += ready[flow] - finish[last]
                flow = last
                continue
        if computed[flow]:
            path_compute += ready[flow]
        else:
            wait += ready[flow]
        break
    communication.update(zip(COMMUNICATION_KINDS, per_kind.tolist(), strict=True))
    return path_compute, wait, communication


def merged_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[start, end]`` as disjoint intervals in time order
    (intervals that touch are merged)."""
    if not start.size:
        return np.empty(0), np.empty(0)
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    opens = np.concatenate([[True], start[1:] > reach[:-1]])
    first = np.flatnonzero(opens)
    last = np.concatenate([first[1:] - 1, [start.size - 1]])
    return start[first], reach[last]


def _activity(
    workload: Workload, result: SimulationResult, compute: Sequence[tuple[int, int, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per stage and activity, the merged intervals: ``compute`` gives ``(stage, 0 | 1 for
    forward | backward, starts, ends)``; communication comes from the flows' ``stage`` tags
    (stage 0 without one)."""
    kind, _ = _kinds(workload)
    names, codes = coded(workload.tags.get("stage", CodedStrings.constant("", len(workload))))
    stages = np.array([int(s) if s else 0 for s in names], dtype=np.int64)[codes]
    pieces: list[tuple[int, int, np.ndarray, np.ndarray]] = list(compute)
    busy = result.finish_s > result.ready_s
    for k in range(len(COMMUNICATION_KINDS)):
        for stage in np.unique(stages[(kind == k) & busy]).tolist():
            chosen = (kind == k) & busy & (stages == stage)
            pieces.append((stage, 2 + k, result.ready_s[chosen], result.finish_s[chosen]))
    merged: dict[tuple[int, int], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for stage, activity, start, end in pieces:
        at = merged.setdefault((stage, activity), ([], []))
        at[0].append(start)
        at[1].append(end)
    if not merged:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0)
    stage_col, activity_col, start_col, end_col = [], [], [], []
    for (stage, activity), (starts, ends) in sorted(merged.items()):
        lo, hi = merged_intervals(np.concatenate(starts), np.concatenate(ends))
        stage_col.append(np.full(lo.size, stage, dtype=np.int64))
        activity_col.append(np.full(lo.size, activity, dtype=np.int64))
        start_col.append(lo)
        end_col.append(hi)
    return (np.concatenate(stage_col), np.concatenate(activity_col),
            np.concatenate(start_col).astype(np.float64), np.concatenate(end_col).astype(np.float64))


def step_breakdown(
    topology: Topology,
    workload: Workload,
    result: SimulationResult,
    *,
    compute_s: float,
    bubble_s: float = 0.0,
    compute_intervals: Sequence[tuple[int, int, np.ndarray, np.ndarray]] = (),
    layout: Mapping[str, int] | None = None,
    top: int = 3,
) -> StepBreakdown:
    """Break a simulated step down (see the module docstring).

    Parameters
    ----------
    topology, workload, result
        The step's run.
    compute_s, bubble_s : float
        The step's compute and pipeline bubble (``ParallelStep.compute_s`` ...).
    compute_intervals : sequence of (stage, 0 or 1, starts, ends)
        Forward (0) and backward (1) compute of each stage's ranks
        (``ParallelStep.compute_intervals(result)``).
    layout : mapping, optional
        ``tp``, ``pp``, ``dp``, ``ep``, ``n_microbatches``, ``virtual_stages``, ``cp``, stored as they are.
    top : int
        Busiest links kept per tier group.

    Returns
    -------
    StepBreakdown
    """
    step_s = max(compute_s, result.makespan_s)
    path_compute, wait, communication = critical_path(workload, result, compute_s)
    stage, kind, start, end = _activity(workload, result, compute_intervals)
    return StepBreakdown(
        step_s, compute_s, bubble_s, path_compute, wait, communication, _tier_usage(topology, result, step_s, top),
        stage, kind, start, end, dict(layout or {}),
    )


def describe_step(breakdown: StepBreakdown, topology: Topology) -> list[str]:
    """The lines ``flowsim run`` prints for a training step."""
    b = breakdown
    lines = [
        f"training step {format_seconds(b.step_s)}: compute {format_seconds(b.compute_s)}, "
        f"exposed communication {format_seconds(b.exposed_communication_s)}"
    ]
    if b.bubble_s > 0:
        lines.append(
            f"  pipeline bubble {format_seconds(b.bubble_s)} ({b.bubble_s / b.compute_s:.1%} of the compute)"
        )
    # The kinds the step has (its activity chart shows them) and any other on the path.
    present = {ACTIVITIES[k] for k in set(b.activity_kind.tolist())}
    kinds = [f"{_KIND_LABELS[k]} {format_seconds(s)}" for k, s in b.critical_communication_s.items()
             if s > 0 or k in present]
    parts = [f"compute {format_seconds(b.critical_compute_s)}", *kinds]
    if b.critical_wait_s > 0:
        parts.append(f"waiting {format_seconds(b.critical_wait_s)}")
    lines.append(f"  critical path {format_seconds(b.critical_path_s)}: " + ", ".join(parts))
    lines.append("  link tiers (mean utilization over the step: busiest link, mean of links used; top links):")
    width = max(len(TIER_LABELS[t.tier]) for t in b.tiers) if b.tiers else 0
    for t in b.tiers:
        top = ", ".join(f"{topology.link_names[link]} {u:.0%}" for link, u in
                        zip(t.top_links, t.top_utilization, strict=True)) or "none used"
        lines.append(
            f"    {TIER_LABELS[t.tier]:<{width}}  {t.max_utilization:6.1%} {t.mean_utilization:6.1%}  "
            f"({t.n_links} links)  {top}"
        )
    return lines
