"""Collectives placed on a topology: one layout for every caller.

:func:`collective_workload` turns (collective, size, options) into flows on a topology's
GPUs, choosing what the caller left open as NCCL would on that hardware: the ranks (every
GPU, or for ``send`` the pair :func:`send_pair` picks), the channel count and each channel's
ring order, NCCL's software costs for the protocol and the intra-server hardware, and for
NVLS the NVSwitch. :func:`collective_time` runs that layout. ``flowsim collective``,
``flowsim check``, scenario files (and so sweeps) and training steps all go through
:func:`collective_workload`, so one question has one answer.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.collectives.builders import algorithm_of
from flowsim.collectives.costs import PROTOCOLS, CollectiveCosts, nccl_costs, nvls_costs
from flowsim.collectives.rings import mesh_rings, rotated_rings
from flowsim.errors import InputError
from flowsim.hardware import LinkTier
from flowsim.pipeline import RunResult, run
from flowsim.routing import Router
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload

__all__ = [
    "CollectivePlan",
    "CollectiveRun",
    "check_nvswitch",
    "collective_time",
    "collective_workload",
    "rank_servers",
    "send_pair",
]


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


def _default_channels(topology: Topology, ranks: Sequence[str], servers: dict[str, str]) -> int:
    """1 inside one server; across servers, the most distinct exit NICs any server's ranks
    have (one channel per rail)."""
    if len(set(servers.values())) < 2:
        return 1
    nics: dict[str, set[int]] = {}
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
    topology: Topology, ranks: Sequence[str], servers: dict[str, str], channels: int | None
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


def check_nvswitch(topology: Topology, switch: str) -> None:
    """Raise :class:`~flowsim.errors.InputError` unless ``switch`` names an NVSwitch node."""
    if switch not in topology.node_index:
        raise InputError(f"{switch!r} is not a node of the topology")
    kind = NodeKind(topology.node_kind[topology.node_index[switch]])
    if kind != NodeKind.NVSWITCH:
        raise InputError(f"{switch!r} is a {kind.name.lower()} node, not an NVSwitch")


def _nvls_switch(topology: Topology, ranks: Sequence[str], switch: str | None) -> tuple[str, str]:
    """The NVSwitch node all ranks reach over one NVLink each (``switch`` when given) and the
    NVLink technology of those links."""
    if switch is not None:
        check_nvswitch(topology, switch)
    technologies = set()
    switches = set()
    for rank in ranks:
        links = topology.links_from(rank)
        to_switch = links[topology.node_kind[topology.link_dst[links]] == NodeKind.NVSWITCH]
        if switch is not None:
            to_switch = to_switch[topology.link_dst[to_switch] == topology.node_index[switch]]
        if to_switch.size != 1:
            target = f"NVSwitch {switch!r}" if switch is not None else "one NVSwitch"
            raise InputError(f"NVLS needs each rank on {target}; {rank!r} has {to_switch.size} links to it")
        switches.add(int(topology.link_dst[to_switch[0]]))
        technologies.add(topology.link_technology[int(to_switch[0])])
    if len(switches) != 1 or len(technologies) != 1:
        raise InputError("NVLS needs all ranks on the same NVSwitch over the same NVLink generation")
    return topology.node_names[switches.pop()], technologies.pop()


def rank_servers(topology: Topology, ranks: Sequence[str]) -> dict[str, str]:
    """Server name of each rank; a node outside every server is a server of its own."""
    servers = topology.node_server[topology.node_ids(ranks)].tolist()
    return {r: topology.server_names[s] if s >= 0 else r for r, s in zip(ranks, servers, strict=True)}


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
    **layout,
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
        As :func:`flowsim.pipeline.run`.
    **layout
        ``orders``, ``servers``, ``switch``, ``root``: see :func:`collective_workload`.

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
    protocols: tuple[str, ...]
    if protocol != "auto":
        protocols = (protocol,)
    else:
        protocols = ("simple",) if algorithm == "nvls" else PROTOCOLS
    best: CollectiveRun | None = None
    for candidate in protocols:
        plan = collective_workload(
            topology, collective, size_bytes, ranks=ranks, algorithm=algorithm, protocol=candidate,
            channels=channels, slices=slices, costs=costs, model=model, **layout,
        )
        outcome = run(topology, plan.workload, routing=routing, seed=seed, gpudirect=gpudirect, router=router)
        if best is None or outcome.makespan_s < best.time_s:
            best = CollectiveRun(
                collective, plan.algorithm, plan.protocol, plan.model, plan.ranks, float(size_bytes),
                outcome.makespan_s, plan.costs, outcome,
            )
    assert best is not None  # at least one protocol was simulated
    return best


def send_pair(topology: Topology, ranks: Sequence[str]) -> list[str]:
    """The two ranks whose ``send`` an nccl-tests ``sendrecv_perf`` run waits for.

    That run shifts data around the ring of ``ranks``, every rank sending to the next at
    once; the first ring neighbours on different servers cross the network and bound it
    (assuming the other pairs do not share its links), else the first two ranks.
    """
    server = rank_servers(topology, ranks)
    for i in range(len(ranks)):
        j = (i + 1) % len(ranks)
        if server[ranks[i]] != server[ranks[j]]:
            return [ranks[i], ranks[j]]
    return list(ranks[:2])


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
    orders: Sequence[Sequence[str]] | None = None,
    servers: Mapping[str, Hashable] | None = None,
    switch: str | None = None,
    root: int | None = None,
) -> CollectivePlan:
    """The flows of one collective on ``topology``, laid out as every caller lays it out.

    Arguments as for :func:`collective_time`, except that ``protocol`` names one protocol
    (not ``"auto"``), and these overrides of what the topology decides (each only for the
    algorithms whose :attr:`~flowsim.collectives.Algorithm.options` name it):

    orders : sequence of sequence of str, optional
        One ring order per channel (a permutation of ``ranks`` each); ``channels`` defaults
        to their count.
    servers : mapping of str to hashable, optional
        Server of each rank, for per-step latencies and grouping; default each rank's server
        in the topology (a node outside every server is its own).
    switch : str, optional
        NVLS: the NVSwitch node; default the one every rank links to.
    root : int, optional
        Broadcast and reduce: the root's position in ``ranks`` (default 0).

    Use it to place a collective inside a larger workload (a training step's gradient
    buckets, a scenario file's ``[[workload.collective]]``).
    """
    entry = algorithm_of(collective, algorithm)
    if protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; valid ones: {', '.join(PROTOCOLS)}")
    if costs is not None and protocol != "simple":
        raise InputError(f"give either costs or protocol {protocol!r}, not both")
    given = {"channels": channels, "slices": slices, "orders": orders, "servers": servers, "switch": switch,
             "root": root}
    refused = [key for key, value in given.items() if value is not None and key not in entry.options]
    if refused:
        takes = ", ".join(sorted(entry.options)) or "no layout options"
        raise InputError(
            f"bad parameters for {collective}: {entry.name} takes no {', '.join(refused)} (it takes {takes})"
        )
    if ranks is None:
        gpus = [topology.node_names[g] for g in topology.gpus()]
        ranks = send_pair(topology, gpus) if collective == "send" else gpus
    ranks = tuple(ranks)
    if len(ranks) < 2:
        raise InputError(f"{collective} needs at least 2 ranks, got {len(ranks)}")
    topology_servers = rank_servers(topology, ranks)
    options: dict = {}
    if "servers" in entry.options:
        options["servers"] = topology_servers if servers is None else servers
    if root is not None:
        options["root"] = root
    nvlink = ""
    if "switch" in entry.options:
        if len(set(topology_servers.values())) != 1:
            raise InputError("NVLS is modelled inside one server; the ranks span several")
        options["switch"], nvlink = _nvls_switch(topology, ranks, switch)
    if "channels" in entry.options:
        if orders is not None:
            options["orders"] = [tuple(o) for o in orders]
            n_channels = len(options["orders"]) if channels is None else channels
        elif entry.ring_ordered:
            options["orders"] = _ring_orders(topology, ranks, topology_servers, channels)
            n_channels = len(options["orders"])
        else:
            n_channels = _default_channels(topology, ranks, topology_servers) if channels is None else channels
        options.update(channels=n_channels, slices=slices)
    if costs is not None:
        chosen = ("custom", costs)
    elif entry.name == "nvls":
        if protocol != "simple":
            raise InputError(f"NVLS runs NCCL's Simple protocol only, not {protocol!r}")
        chosen = ("simple", nvls_costs(nvlink))
    else:
        table = "tree" if entry.name == "tree" else "ring"
        chosen = (protocol, nccl_costs(table, protocol, _intra_hardware(topology, ranks)))
    workload = entry.builder(ranks, size_bytes, costs=chosen[1], model=model, **options)
    return CollectivePlan(entry.name, chosen[0], workload.tags["model"][0], ranks, chosen[1], workload)
