"""Jobs sharing a cluster: where each job's GPUs are, and its iterations as one workload.

A scenario's ``[[job]]`` tables (:mod:`flowsim.scenario`) are jobs: a training step, a
repeated collective or storage traffic, each on its own GPUs, starting at its own time and
running a number of iterations back to back. Their flows share the fabric, so each job's
iterations take as long as max-min sharing with the others lets them;
:mod:`flowsim.jobresults` runs each job again alone on the same GPUs and routes and says
how much slower it was shared.

Placement (:func:`place_jobs`)
    A GPU belongs to one job: flowsim does not model two jobs' compute sharing a GPU, so
    placements that overlap are an error naming both jobs and the GPU. Explicit placements
    (``ranks``: GPU names; ``servers``: every GPU of those servers) are taken first, in file
    order; then each policy job, in file order, takes ``gpus`` GPUs, ``gpus_per_server`` on
    each of ``gpus / gpus_per_server`` servers (default: as many as a server of the cluster
    holds, or ``gpus`` if fewer), among the servers with that many GPUs still free, in
    server order:

    * ``packed``: the first ones (consecutive servers, so under the same leaf switches
      where the fabric groups servers in scalable units);
    * ``spread``: evenly spaced ones (candidate ``floor(i * n / k)`` for ``i`` in ``0..k-1``
      of ``n`` candidates), across the cluster's scalable units;
    * ``random``: ``k`` drawn without replacement by NumPy's ``default_rng(seed)``.

    On each server chosen, the job takes its first free GPUs in node order; its ranks are
    in server order, then GPU order.
Iterations (:func:`repeat_iterations`)
    One iteration's workload (start times relative to the iteration's start) is laid out
    ``iterations`` times. Iteration ``k`` starts with a zero-byte *marker* flow
    ``NAME.itK.start`` (ready at the job's ``start_s`` for the first, when the previous
    iteration ends for the others) that every flow of the iteration waits for, so a flow
    that started at ``t`` in the iteration is ready ``t`` after the marker, and later if
    its own dependencies finish later (a flow that waits for others and starts later than
    its ``delay_s`` waits for a marker of its own, ``NAME.itK.atI``, delayed by the
    difference). ``NAME.itK.compute`` is ready ``compute_s`` after the start (the
    iteration's compute, which flows do not carry for a data-parallel step), and
    ``NAME.itK.end`` waits for it and for every flow of the iteration that no other waits
    for: an iteration takes ``max(compute_s, its communication)``, as a training step does
    (:func:`flowsim.training.step_time_s`). Markers go from the job's first rank to itself
    and so cross no link. Every flow of a job has the tags ``job`` (its name) and
    ``iteration``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from flowsim.errors import InputError
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload

if TYPE_CHECKING:  # flowsim.training is a large import that a placement does not need
    from flowsim.training import ParallelStep, TrainingStep

__all__ = ["JOB_KINDS", "POLICIES", "Job", "Placement", "PlacementError", "check_job_name", "place_jobs",
           "repeat_iterations", "storage_workload"]

#: What a job runs: a training step, a collective, or storage reads or writes.
JOB_KINDS = ("training", "collective", "storage")
#: Placement policies (see the module docstring).
POLICIES = ("packed", "spread", "random")
#: Characters a job name may hold: it is a flow-name prefix, a tag value and part of the
#: sweep metric names ``job.NAME.slowdown``, and HDF5 reads ``/`` as a path.
_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Placement:
    """Where a job asks to run, as its ``[[job]]`` table says.

    Attributes
    ----------
    ranks : tuple of str, optional
        Explicit GPU names.
    servers : tuple of str, optional
        Explicit server names: every GPU of each.
    policy : str, optional
        One of :data:`POLICIES`.
    gpus : int
        With a policy: how many GPUs.
    gpus_per_server : int, optional
        With a policy: GPUs on each server chosen (default: a whole server, or ``gpus`` if
        fewer).
    seed : int
        With ``random``: the seed of NumPy's ``default_rng``.
    """

    ranks: tuple[str, ...] | None = None
    servers: tuple[str, ...] | None = None
    policy: str | None = None
    gpus: int = 0
    gpus_per_server: int | None = None
    seed: int = 0

    def describe(self) -> str:
        """A short label: ``packed``, ``random (seed 3)``, ``servers n0, n1``, ``4 ranks listed``."""
        if self.policy == "random":
            return f"random (seed {self.seed})"
        if self.policy is not None:
            return self.policy
        listed, what = (self.servers, "servers") if self.servers is not None else (self.ranks or (), "ranks")
        if len(listed) <= 2:
            return f"{what} {', '.join(listed)}"
        return f"{len(listed)} {what} listed"


@dataclass(frozen=True)
class Job:
    """A placed job, laid out as flows ``lo:hi`` of its scenario's workload.

    Attributes
    ----------
    name, kind : str
    ranks : tuple of str
        Its GPUs, in rank order.
    placement : str
        :meth:`Placement.describe`.
    start_s : float
    iterations : int
    compute_s : float
        Compute time of one iteration (0 but for training steps).
    lo, hi : int
        Its flows' indices in the scenario's workload (markers included).
    start_marker, end_marker : numpy.ndarray
        int64[iterations]: the index (into the scenario's workload) of each iteration's
        ``start`` and ``end`` marker.
    training : TrainingStep or ParallelStep, optional
        A training job's step (one iteration, its flows numbered from 0); None for the
        other kinds.
    """

    name: str
    kind: str
    ranks: tuple[str, ...]
    placement: str
    start_s: float
    iterations: int
    compute_s: float
    lo: int
    hi: int
    start_marker: np.ndarray
    end_marker: np.ndarray
    training: TrainingStep | ParallelStep | None = None


class PlacementError(InputError):
    """A job that cannot be placed: ``job`` is its index, the text says why."""

    def __init__(self, job: int, message: str) -> None:
        super().__init__(message)
        self.job = job


def check_job_name(name: str) -> None:
    """An :class:`InputError` unless ``name`` is a valid job name (letters, digits, ``_``, ``-``)."""
    if not _NAME.fullmatch(name):
        raise InputError(f"expected letters, digits, '_' and '-' only, got {name!r}")


def _gpus_by_server(topology: Topology) -> dict[int, list[int]]:
    """Server id -> its GPU node ids, ascending."""
    out: dict[int, list[int]] = {}
    for gpu in topology.gpus().tolist():
        server = int(topology.node_server[gpu])
        if server >= 0:
            out.setdefault(server, []).append(gpu)
    return out


def _explicit(topology: Topology, placement: Placement, by_server: dict[int, list[int]]) -> list[int]:
    if placement.ranks is not None:
        ids = []
        for rank in placement.ranks:
            if rank not in topology.node_index:
                raise InputError(f"ranks: {rank!r} is not a node of the topology")
            node = topology.node_index[rank]
            if topology.node_kind[node] != NodeKind.GPU:
                raise InputError(f"ranks: {rank!r} is not a GPU")
            ids.append(node)
        if len(set(ids)) != len(ids):
            raise InputError("ranks: a GPU is listed twice")
        return ids
    servers = {name: i for i, name in enumerate(topology.server_names)}
    ids = []
    for name in placement.servers or ():
        if name not in servers:
            raise InputError(f"servers: {name!r} is not a server of the topology")
        if servers[name] not in by_server:
            raise InputError(f"servers: {name!r} has no GPUs")
        ids += by_server[servers[name]]
    if len(set(ids)) != len(ids):
        raise InputError("servers: a server is listed twice")
    return ids


def _by_policy(
    topology: Topology, placement: Placement, by_server: dict[int, list[int]], owner: dict[int, str]
) -> list[int]:
    most = max((len(g) for g in by_server.values()), default=0)
    gpus = placement.gpus
    per_server = placement.gpus_per_server or min(gpus, most)
    if per_server == 0 or gpus % per_server:
        raise InputError(
            f"gpus: {gpus} GPUs do not split evenly into servers of {per_server}; set gpus_per_server to a divisor"
        )
    if per_server > most:
        raise InputError(f"gpus_per_server: {per_server}, but a server of this cluster has {most} GPUs")
    k = gpus // per_server
    free = {s: [g for g in gpus_of if g not in owner] for s, gpus_of in by_server.items()}
    candidates = [s for s in sorted(free) if len(free[s]) >= per_server]
    if len(candidates) < k:
        taken = sorted(set(owner.values()))
        total = sum(map(len, by_server.values()))
        by = f"; jobs {', '.join(taken)} hold {len(owner)} of its {total} GPUs" if taken else ""
        raise InputError(
            f"gpus: {gpus} GPUs need {k} server{'s' if k != 1 else ''} with {per_server} free GPUs, "
            f"the cluster has {len(candidates)}{by}"
        )
    n = len(candidates)
    if placement.policy == "packed":
        chosen = candidates[:k]
    elif placement.policy == "spread":
        chosen = [candidates[i * n // k] for i in range(k)]
    else:
        picks = np.random.default_rng(placement.seed).choice(n, size=k, replace=False)
        chosen = [candidates[i] for i in sorted(picks.tolist())]
    return [g for s in chosen for g in free[s][:per_server]]


def place_jobs(topology: Topology, placements: Sequence[tuple[str, Placement]]) -> list[tuple[str, ...]]:
    """The GPUs of each job (see the module docstring), in the order given.

    Parameters
    ----------
    topology : Topology
    placements : sequence of (name, Placement)

    Returns
    -------
    list of tuple of str
        Each job's GPU names, in rank order.

    Raises
    ------
    PlacementError
        Naming the job at fault (its index) and what is wrong: an unknown GPU or server, a
        GPU another job holds, more GPUs than are free.
    """
    by_server = _gpus_by_server(topology)
    owner: dict[int, str] = {}
    placed: dict[int, list[int]] = {}
    order = [i for i, (_, p) in enumerate(placements) if p.policy is None]
    order += [i for i, (_, p) in enumerate(placements) if p.policy is not None]
    for i in order:
        name, placement = placements[i]
        try:
            if placement.policy is None:
                ids = _explicit(topology, placement, by_server)
                clash = next((g for g in ids if g in owner), None)
                if clash is not None:
                    key = "ranks" if placement.ranks is not None else "servers"
                    raise InputError(
                        f"{key}: GPU {topology.node_names[clash]!r} is job {owner[clash]!r}'s too; "
                        "a GPU runs one job (flowsim does not model jobs sharing a GPU's compute)"
                    )
            else:
                ids = _by_policy(topology, placement, by_server, owner)
        except InputError as err:
            raise PlacementError(i, str(err)) from None
        owner.update(dict.fromkeys(ids, name))
        placed[i] = ids
    return [tuple(topology.node_names[g] for g in placed[i]) for i in range(len(placements))]


def storage_workload(topology: Topology, ranks: Sequence[str], bytes_per_gpu: float, direction: str) -> Workload:
    """Each rank writes ``bytes_per_gpu`` to (``direction = "write"``) or reads them from
    (``"read"``) the topology's storage targets, rank ``i`` to target ``i mod n``.

    Raises
    ------
    InputError
        Without storage targets, or with a size that is not a number > 0.
    """
    targets = [topology.node_names[i] for i in topology.nodes_of_kind(NodeKind.STORAGE)]
    if not targets:
        raise InputError("storage traffic needs storage targets in the topology (storage_targets = N in [topology])")
    if isinstance(bytes_per_gpu, bool) or not isinstance(bytes_per_gpu, (int, float)) or not bytes_per_gpu > 0:
        raise InputError(f"bytes_per_gpu: expected a number > 0, got {bytes_per_gpu!r}")
    store = [targets[i % len(targets)] for i in range(len(ranks))]
    src, dst = (list(ranks), store) if direction == "write" else (store, list(ranks))
    return Workload.build(
        [f"{direction}.{r}" for r in ranks], src, dst, [float(bytes_per_gpu)] * len(ranks),
        tags={"phase": [direction] * len(ranks)},
    )


def repeat_iterations(
    step: Workload, *, name: str, ranks: Sequence[str], iterations: int, start_s: float, compute_s: float
) -> tuple[Workload, np.ndarray, np.ndarray]:
    """``step`` (one iteration) laid out ``iterations`` times back to back, from ``start_s``
    (see the module docstring).

    Returns
    -------
    workload : Workload
        Flows named ``NAME.itK.<flow>`` and the markers, tagged ``job`` and ``iteration``.
    start_marker, end_marker : numpy.ndarray
        int64[iterations]: each iteration's start and end marker, indices into ``workload``.
    """
    n = len(step)
    waits = np.diff(step.dep_indptr) > 0
    waited_on = np.zeros(n, dtype=bool)
    waited_on[step.dep_indices] = True
    sinks = np.flatnonzero(~waited_on)
    # A waiting flow that starts later than its delay after its dependencies could: it needs a
    # timer marker, ready (start - delay) after the iteration start, so that with its delay it
    # is ready no earlier than its start.
    timed = np.flatnonzero(waits & (step.start_s > step.delay_s))
    timer_of = {int(f): j for j, f in enumerate(timed.tolist())}
    home = ranks[0]
    names: list[str] = []
    src: list[str] = []
    dst: list[str] = []
    size: list[np.ndarray] = []
    start: list[np.ndarray] = []
    delay: list[np.ndarray] = []
    overhead: list[np.ndarray] = []
    weight: list[np.ndarray] = []
    cap: list[np.ndarray] = []
    deps: list[list[int]] = []
    tags: dict[str, list[str]] = {key: [] for key in step.tags}
    tags["job"], tags["iteration"] = [], []
    starts, ends = [], []
    previous_end = -1
    for k in range(iterations):
        base = len(names)
        s, c, e = base, base + 1, base + 2
        first_flow = base + 3 + len(timed)
        prefix = f"{name}.it{k}"
        markers = [f"{prefix}.start", f"{prefix}.compute", f"{prefix}.end"]
        markers += [f"{prefix}.at{f}" for f in timed.tolist()]
        n_markers = len(markers)
        names += markers + [f"{prefix}.{flow}" for flow in step.names]
        src += [home] * n_markers + list(step.src)
        dst += [home] * n_markers + list(step.dst)
        size += [np.zeros(n_markers), step.size_bytes]
        marker_delay = np.concatenate([[0.0, compute_s, 0.0], step.start_s[timed] - step.delay_s[timed]])
        flow_delay = np.where(waits, step.delay_s, step.start_s)  # a flow without dependencies waits for the start
        start += [np.array([start_s if k == 0 else 0.0, 0.0, 0.0, *([0.0] * len(timed))]), np.zeros(n)]
        delay += [marker_delay, flow_delay]
        overhead += [np.zeros(n_markers), step.overhead_s]
        weight += [np.ones(n_markers), step.weight]
        cap += [np.full(n_markers, np.inf), step.cap_Bps]
        deps += [[previous_end] if previous_end >= 0 else [], [s], [c, *(sinks + first_flow).tolist()]]
        deps += [[s]] * len(timed)
        for f in range(n):
            own = (step.dependencies(f) + first_flow).tolist()
            if not own:
                deps.append([s])
            elif f in timer_of:
                deps.append([*own, base + 3 + timer_of[f]])
            else:
                deps.append(own)
        for key in step.tags:
            tags[key] += [""] * n_markers + list(step.tags[key])
        tags["job"] += [name] * (n_markers + n)
        tags["iteration"] += [str(k)] * (n_markers + n)
        starts.append(s)
        ends.append(e)
        previous_end = e
    workload = Workload.build(
        names, src, dst, np.concatenate(size), start_s=np.concatenate(start), depends_on=deps,
        delay_s=np.concatenate(delay), overhead_s=np.concatenate(overhead), weight=np.concatenate(weight),
        cap_Bps=np.concatenate(cap), tags=tags,
    )
    return workload, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
