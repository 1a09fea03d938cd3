"""Workload to simulated times: route each flow over the topology, then simulate.

:func:`run` is the method in one call: a checked :class:`~flowsim.workload.Workload` (what
moves), a :class:`~flowsim.topology.Topology` (where), routing of every (source,
destination) pair, and :func:`~flowsim.engine.simulate`. :func:`collective_time` builds a
collective over a topology's GPUs (:mod:`flowsim.collectives`) and runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.collectives import (
    PROTOCOLS,
    CollectiveCosts,
    build_collective,
    mesh_rings,
    nccl_costs,
    nvls_costs,
    resolve_algorithm,
    rotated_rings,
)
from flowsim.engine import simulate
from flowsim.errors import InputError
from flowsim.hardware import LinkTier
from flowsim.result import SimulationResult
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload

__all__ = ["CollectiveRun", "RunResult", "collective_time", "run", "send_pair"]

# simulate() arguments that the workload and the topology provide.
_PROVIDED = frozenset(
    {"latency_s", "start_s", "weights", "caps_Bps", "depends_on", "delay_s", "overhead_s", "link_names", "flow_names"}
)
# Collectives whose algorithms take ring orders (one per channel).
_RING_ORDERED = {
    ("all_reduce", "ring"),
    ("reduce_scatter", "ring"),
    ("all_gather", "ring"),
    ("broadcast", "ring"),
    ("reduce", "ring"),
}


@dataclass(frozen=True)
class RunResult:
    """A simulated workload with what it ran on.

    Attributes
    ----------
    topology : Topology
    workload : Workload
    routes : Routes
        Route of each flow of ``workload`` over ``topology``'s links.
    result : SimulationResult
        Per-flow times and per-link figures, flows in ``workload`` order.
    """

    topology: Topology
    workload: Workload
    routes: Routes
    result: SimulationResult

    @property
    def makespan_s(self) -> float:
        """Time the last flow finishes."""
        return self.result.makespan_s


def _route_pairs(router: Router, workload: Workload, routing: str, seed: int, gpudirect: bool) -> Routes:
    """Routes of every flow, computing each distinct (source, destination) pair once."""
    topology = router.topology
    src = topology.node_ids(workload.src)
    dst = topology.node_ids(workload.dst)
    pairs, inverse = np.unique(src * topology.n_nodes + dst, return_inverse=True)
    unique = router.route(
        pairs // topology.n_nodes, pairs % topology.n_nodes, method=routing, seed=seed, gpudirect=gpudirect
    )
    inverse = inverse.ravel()
    hops = unique.hop_counts()[inverse]
    indptr = np.zeros(len(workload) + 1, dtype=np.int64)
    np.cumsum(hops, out=indptr[1:])
    offset_in_route = np.arange(indptr[-1], dtype=np.int64) - np.repeat(indptr[:-1], hops)
    indices = unique.flow_link_indices[np.repeat(unique.flow_link_indptr[inverse], hops) + offset_in_route]
    return Routes.from_csr(indptr, indices, topology.n_links, flow_names=workload.names)


def run(
    topology: Topology,
    workload: Workload,
    *,
    routing: str = "ecmp",
    seed: int = 0,
    gpudirect: bool = True,
    router: Router | None = None,
    **simulate_options,
) -> RunResult:
    """Route every flow of ``workload`` over ``topology`` and simulate.

    Parameters
    ----------
    topology : Topology
    workload : Workload
        Flows between node names of ``topology``.
    routing : {"ecmp", "dmodk", "shortest"}
        Path choice between servers (:mod:`flowsim.routing`).
    seed : int
        ECMP hash seed.
    gpudirect : bool
        GPU <-> NIC traffic peer-to-peer, or staged in host memory.
    router : Router, optional
        A router of ``topology`` to reuse across calls (its tables are built once).
    **simulate_options
        Passed to :func:`~flowsim.engine.simulate` (``record_links``, ``record_flows``,
        ``mode``, ``time_rel_tol``). Link latencies and capacities come from the topology, flow columns from
        the workload.

    Returns
    -------
    RunResult

    Examples
    --------
    >>> from flowsim.presets import preset
    >>> topo = preset("dgx_h100", figure="nominal")
    >>> w = Workload.build(["a"], ["gpu0"], ["gpu1"], [450e9])
    >>> run(topo, w).makespan_s
    1.0
    """
    if not isinstance(topology, Topology):
        raise InputError(f"topology must be a Topology, got {type(topology).__name__}")
    if not isinstance(workload, Workload):
        raise InputError(f"workload must be a Workload, got {type(workload).__name__}")
    clash = sorted(_PROVIDED & set(simulate_options))
    if clash:
        raise InputError(f"run() takes {', '.join(clash)} from the workload and topology; do not pass them")
    if router is None:
        router = Router(topology)
    elif router.topology is not topology:
        raise InputError("router was built for another topology")
    routes = _route_pairs(router, workload, routing, seed, gpudirect)
    return RunResult(topology, workload, routes, simulate_routed(topology, workload, routes, **simulate_options))


def simulate_routed(topology: Topology, workload: Workload, routes: Routes, **simulate_options) -> SimulationResult:
    """Simulate ``workload`` over ``topology`` along ``routes`` (one per flow).

    Link capacities and latencies come from the topology, flow columns from the workload;
    ``simulate_options`` (``record_links``, ``record_flows``, ``mode``, ``progress``) go to
    :func:`~flowsim.engine.simulate`.
    """
    return simulate(
        routes,
        topology.link_capacity_Bps,
        workload.size_bytes,
        latency_s=topology.link_latency_s,
        start_s=workload.start_s,
        weights=workload.weight,
        caps_Bps=workload.cap_Bps,
        depends_on=(workload.dep_indptr, workload.dep_indices),
        delay_s=workload.delay_s,
        overhead_s=workload.overhead_s,
        link_names=topology.link_names,
        flow_names=workload.names,
        **simulate_options,
    )


@dataclass(frozen=True)
class CollectiveRun:
    """One simulated collective.

    Attributes
    ----------
    collective, algorithm, protocol : str
        What ran; ``protocol`` is ``"custom"`` when explicit costs were given.
    model : str
        ``"steps"`` or ``"stream"``: how the rings were laid out (see
        :mod:`flowsim.collectives`).
    ranks : tuple of str
    size_bytes : float
        ``S`` as nccl-tests counts it (see :mod:`flowsim.collectives`).
    time_s : float
        From the start to the last message's arrival.
    costs : CollectiveCosts
    run : RunResult
    """

    collective: str
    algorithm: str
    protocol: str
    model: str
    ranks: tuple[str, ...]
    size_bytes: float
    time_s: float
    costs: CollectiveCosts
    run: RunResult


def _intra_hardware(topology: Topology, ranks: Sequence[str]) -> str:
    """``"nvlink"`` when every rank has an NVLink, else ``"pci"`` (NCCL's intra-node hwLat row)."""
    for rank in ranks:
        if not np.any(topology.link_tier[topology.links_from(rank)] == LinkTier.SCALE_UP):
            return "pci"
    return "nvlink"


def _default_channels(topology: Topology, ranks: Sequence[str], servers: dict[str, int]) -> int:
    """1 inside one server; across servers, the most distinct exit NICs any server's ranks
    have (one channel per rail)."""
    if len(set(servers.values())) < 2:
        return 1
    nics: dict[int, set[int]] = {}
    for rank in ranks:
        nics.setdefault(servers[rank], set()).add(int(topology.node_nic[topology.node_id(rank)]))
    return max(1, max(len(n) for n in nics.values()))


def _mesh_link_counts(topology: Topology, ranks: Sequence[str]) -> np.ndarray:
    """Direct NVLinks between ranks, in units of the thinnest one (int64 matrix)."""
    ids = topology.node_ids(ranks)
    position = np.full(topology.n_nodes, -1, dtype=np.int64)
    position[ids] = np.arange(ids.size)
    a, b = position[topology.link_src], position[topology.link_dst]
    direct = np.flatnonzero((a >= 0) & (b >= 0) & (topology.link_tier == LinkTier.SCALE_UP))
    counts = np.zeros((ids.size, ids.size), dtype=np.int64)
    if direct.size:
        capacity = topology.link_capacity_Bps[direct]
        counts[a[direct], b[direct]] = np.rint(capacity / capacity.min()).astype(np.int64)
    return counts


def _ring_orders(
    topology: Topology, ranks: Sequence[str], servers: dict[str, int], channels: int | None
) -> list[tuple[str, ...]]:
    """Ring order per channel: NVLink mesh rings inside one server whose GPUs link directly
    (the DGX-1), else :func:`~flowsim.collectives.rotated_rings`."""
    if len(set(servers.values())) == 1 and len(ranks) > 1:
        counts = _mesh_link_counts(topology, ranks)
        rings = mesh_rings(ranks, counts) if counts.any() else []
        if rings:
            n = len(rings) if channels is None else channels
            return [rings[c % len(rings)] for c in range(n)]
    n = _default_channels(topology, ranks, servers) if channels is None else channels
    return rotated_rings(ranks, n, servers)


def _nvls_switch(topology: Topology, ranks: Sequence[str], servers: dict[str, int]) -> tuple[str, str]:
    """The NVSwitch node of the ranks' one server and the NVLink technology reaching it."""
    if len(set(servers.values())) != 1:
        raise InputError("NVLS is modelled inside one server; the ranks span several")
    technologies = set()
    switches = set()
    for rank in ranks:
        links = topology.links_from(rank)
        ends = topology.link_dst[links]
        to_switch = links[topology.node_kind[ends] == NodeKind.NVSWITCH]
        if to_switch.size != 1:
            raise InputError(f"NVLS needs each rank on one NVSwitch; {rank!r} has {to_switch.size} links to one")
        switches.add(int(topology.link_dst[to_switch[0]]))
        technologies.add(topology.link_technology[int(to_switch[0])])
    if len(switches) != 1 or len(technologies) != 1:
        raise InputError("NVLS needs all ranks on the same NVSwitch over the same NVLink generation")
    return topology.node_names[switches.pop()], technologies.pop()


def collective_time(
    topology: Topology,
    collective: str,
    size_bytes: float,
    *,
    ranks: Sequence[str] | None = None,
    algorithm: str | None = None,
    protocol: str = "simple",
    channels: int | None = None,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    routing: str = "ecmp",
    seed: int = 0,
    gpudirect: bool = True,
    router: Router | None = None,
) -> CollectiveRun:
    """Simulate one collective over GPUs of ``topology``.

    Parameters
    ----------
    topology : Topology
    collective : str
        One of :data:`flowsim.collectives.COLLECTIVES`.
    size_bytes : float
        ``S`` as nccl-tests counts it.
    ranks : sequence of str, optional
        GPU node names in ring order; default every GPU of ``topology`` in id order
        (for ``send``: the pair of them :func:`send_pair` picks).
    algorithm : str, optional
        One of :data:`flowsim.collectives.ALGORITHMS` for the collective (default: the first).
    protocol : {"simple", "ll", "ll128", "auto"}
        NCCL protocol whose latencies and wire efficiency apply; ``"auto"`` simulates each
        and keeps the fastest, as NCCL's tuner picks the one its model predicts fastest.
    channels : int, optional
        Default 1 inside one server; across servers, one per rail (distinct NICs of a
        server's ranks), with ring orders from :func:`~flowsim.collectives.rotated_rings`.
        Inside one server whose GPUs have direct NVLinks (a mesh such as the DGX-1), rings
        follow them: :func:`~flowsim.collectives.mesh_rings`, one channel per ring found.
    slices : int, optional
        See :mod:`flowsim.collectives`.
    costs : CollectiveCosts, optional
        Replace NCCL's constants (then ``protocol`` must stay ``"simple"``). By default
        :func:`~flowsim.collectives.nccl_costs` with NVLink or PCIe as the intra-server
        hardware, whichever the ranks have.
    model : {"auto", "steps", "stream"}
        Rings as one message per step or one flow per hop (ring all-reduce,
        reduce-scatter, all-gather and hierarchical all-reduce; see "Steps and streams" in
        :mod:`flowsim.collectives`). ``"auto"`` streams rings whose step DAG would exceed
        :data:`~flowsim.collectives.STEP_MESSAGE_LIMIT` messages, and refuses the other
        algorithms past that many (``"steps"`` builds them anyway).
    routing, seed, gpudirect, router
        As :func:`run`.

    Returns
    -------
    CollectiveRun
    """
    if protocol not in (*PROTOCOLS, "auto"):
        raise InputError(f"unknown protocol {protocol!r}; valid ones: {', '.join((*PROTOCOLS, 'auto'))}")
    if costs is not None and protocol != "simple":
        raise InputError(f"give either costs or protocol {protocol!r}, not both")
    if router is None:
        router = Router(topology)
    # "auto" simulates every protocol and keeps the fastest; NVLS has only Simple.
    if protocol != "auto":
        protocols = (protocol,)
    else:
        protocols = ("simple",) if algorithm == "nvls" else PROTOCOLS
    best: CollectiveRun | None = None
    for candidate in protocols:
        plan = collective_workload(
            topology, collective, size_bytes, ranks=ranks, algorithm=algorithm, protocol=candidate,
            channels=channels, slices=slices, costs=costs, model=model,
        )
        outcome = run(topology, plan.workload, routing=routing, seed=seed, gpudirect=gpudirect, router=router)
        if best is None or outcome.makespan_s < best.time_s:
            best = CollectiveRun(
                collective, plan.algorithm, plan.protocol, plan.model, plan.ranks, float(size_bytes),
                outcome.makespan_s, plan.costs, outcome,
            )
    return best


@dataclass(frozen=True)
class CollectivePlan:
    """A collective laid out on a topology: its flows and the choices behind them
    (``model``: ``"steps"`` or ``"stream"``)."""

    algorithm: str
    protocol: str
    model: str
    ranks: tuple[str, ...]
    costs: CollectiveCosts
    workload: Workload


def send_pair(topology: Topology, ranks: Sequence[str]) -> list[str]:
    """The two ranks whose ``send`` an nccl-tests ``sendrecv_perf`` run waits for.

    That run shifts data around the ring of ``ranks``, every rank sending to the next at
    once; the first ring neighbours on different servers cross the network and bound it
    (assuming the other pairs do not share its links), else the first two ranks.
    """
    server = [int(topology.node_server[topology.node_id(r)]) for r in ranks]
    for i in range(len(ranks)):
        j = (i + 1) % len(ranks)
        if server[i] != server[j]:
            return [ranks[i], ranks[j]]
    return list(ranks[:2])


def collective_workload(
    topology: Topology,
    collective: str,
    size_bytes: float,
    *,
    ranks: Sequence[str] | None = None,
    algorithm: str | None = None,
    protocol: str = "simple",
    channels: int | None = None,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> CollectivePlan:
    """The flows of one collective on ``topology``, laid out as :func:`collective_time` does.

    Arguments as for :func:`collective_time`, except that ``protocol`` names one protocol
    (not ``"auto"``). Use it to place a collective inside a larger workload (a training
    step's gradient buckets, for instance).
    """
    algorithm = resolve_algorithm(collective, algorithm)
    if protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; valid ones: {', '.join(PROTOCOLS)}")
    if costs is not None and protocol != "simple":
        raise InputError(f"give either costs or protocol {protocol!r}, not both")
    if ranks is None:
        gpus = [topology.node_names[g] for g in topology.gpus()]
        ranks = send_pair(topology, gpus) if collective == "send" else gpus
    ranks = tuple(ranks)
    if len(ranks) < 2:
        raise InputError(f"{collective} needs at least 2 ranks, got {len(ranks)}")
    servers = {r: int(topology.node_server[topology.node_id(r)]) for r in ranks}
    options: dict = {"servers": servers}
    if algorithm == "nvls":
        switch, nvlink = _nvls_switch(topology, ranks, servers)
        options = {"switch": switch}
    if (collective, algorithm) in _RING_ORDERED:
        orders = _ring_orders(topology, ranks, servers, channels)
        options.update(channels=len(orders), slices=slices, orders=orders)
    elif collective != "all_to_all":
        n_channels = _default_channels(topology, ranks, servers) if channels is None else channels
        options.update(channels=n_channels, slices=slices)
    elif channels is not None or slices is not None:
        raise InputError("all_to_all sends one message per pair; it takes no channels or slices")
    if costs is not None:
        chosen = ("custom", costs)
    elif algorithm == "nvls":
        if protocol != "simple":
            raise InputError(f"NVLS runs NCCL's Simple protocol only, not {protocol!r}")
        chosen = ("simple", nvls_costs(nvlink))
    else:
        table = "tree" if algorithm == "tree" else "ring"
        chosen = (protocol, nccl_costs(table, protocol, _intra_hardware(topology, ranks)))
    workload = build_collective(
        collective, ranks, size_bytes, algorithm=algorithm, costs=chosen[1], model=model, **options
    )
    return CollectivePlan(algorithm, chosen[0], workload.tags["model"][0], ranks, chosen[1], workload)
