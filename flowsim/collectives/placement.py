"""Collectives placed on a topology: one layout for every caller.

:func:`collective_workload` turns (collective, size, options) into flows on a topology's
GPUs, choosing what the caller left open as NCCL would on that hardware: the ranks (every
GPU, or for ``send`` every GPU sending to the next, timed by the pair :func:`send_pair`
picks), the channel count and each channel's ring order, NCCL's software costs for the
protocol and the intra-server hardware, and for NVLS the NVSwitch. :func:`collective_time`
runs that layout. ``flowsim collective``, ``flowsim check``, scenario files (and so sweeps)
and training steps all go through :func:`collective_workload`, so one question has one
answer.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.budgets import SHARED_CAP_TAG, budget_tag
from flowsim.collectives.builders import (
    ALGORITHM_TABLE,
    ALLTOALLV_MATRIX_FILE,
    ALLTOALLV_SPREAD,
    PEER_SPLIT,
    STREAMED,
    algorithm_of,
    all_to_all_v_bytes,
    check_algorithm,
    check_protocol,
    hypercube_rounds,
    hypercube_workload,
)
from flowsim.collectives.calls import OVERLAPPING, back_to_back, time_per_call
from flowsim.collectives.chunks import nccl_chunking, pipeline_pieces
from flowsim.collectives.constants import DEFAULT_NCCL_VERSION, constants_of
from flowsim.collectives.costs import (
    NVLS_BUSBW_CEILING_GBPS,
    P2P_NVLINK_EFFICIENCY,
    CollectiveCosts,
    collnet_costs,
    nccl_costs,
    nvls_costs,
    nvls_sharp_costs,
    nvls_tree_costs,
    pat_costs,
)
from flowsim.collectives.dag import (
    MAX_PIPELINE_SLICES,
    MAX_RING_SLICES,
    _check_ranks,
    check_size,
    ranks_by_server,
    tree_hops,
)
from flowsim.collectives.rings import (
    mesh_link_counts,
    mesh_rings,
    mesh_server_rings,
    nic_spread_offsets,
    rank_servers,
    rotated_rings,
)
from flowsim.collectives.symmetry import RingClasses
from flowsim.collectives.tuner import (
    FP8_TYPES,
    P2P_PER_CHANNEL_NET_GBPS,
    NcclChoice,
    NcclEnv,
    NoNcclChoice,
    P2pChannels,
    check_reduction,
    collnet_heads,
    describe_system,
    fp8_refusal,
    gpudirect_rdma,
    half_block_nvlink_GBps,
    max_channels,
    merged_env,
    nccl_choice,
    nvls_refusal,
    p2p_channels,
    ring_net_overhead_us,
    sharp_leaves,
    tree_correction,
    version_refusal,
)
from flowsim.engine import DEFAULT_TIME_REL_TOL
from flowsim.errors import InputError, check_options, keyword_options, whole_number
from flowsim.hardware import LinkTier
from flowsim.pipeline import RunResult, run
from flowsim.routing import Router
from flowsim.strings import CodedStrings, coded
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload

#: GPU generations (compute capability // 10) whose ring channels across servers are held to
#: :data:`HOPPER_RING_NET_CHANNEL_GBPS`: Hopper, where it was measured.
HOPPER_RING_NET_CHANNEL_SM = (9,)
#: Most a Simple ring channel of a Hopper GPU moves over its hop between servers, in GB/s.
#: Calibrated on the run NVIDIA's maintainer called good in nccl-tests#309 (4 servers of 8
#: H100, 365.84 GB/s: NCCL's default 16 channels, two a NIC of 400 Gb/s, 16 x 22.8 = 365),
#: where 24 channels (NCCL_MIN_CTAS=24) reach the NICs; held out on other runs in
#: docs/model.md "Ring channels across servers".
HOPPER_RING_NET_CHANNEL_GBPS = 22.8

__all__ = [
    "CollectivePlan",
    "CollectiveRun",
    "P2P_LL_THRESHOLD",
    "TUNED_COLLECTIVES",
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
    channels : int
        Channels the collective ran on: for a send, NCCL's point-to-point channels for it
        (:func:`~flowsim.collectives.tuner.p2p_channels`); for an all-to-all, those each
        peer's share runs on (the peers' channels are the communicator's).
    model : str
        ``"steps"`` or ``"stream"``: how the rings were laid out (see
        :mod:`flowsim.collectives`).
    ranks : tuple of str
    size_bytes : float
        ``S`` as nccl-tests counts it (see :mod:`flowsim.collectives`).
    time_s : float
        From the start to the last message's arrival; of ``calls`` back to back, their mean
        time (:func:`collective_time`).
    costs : CollectiveCosts
    run : RunResult
    nccl : NcclChoice or None
        NCCL's choice behind it (:func:`~flowsim.collectives.tuner.nccl_choice`), where
        NCCL's tuner chose (collectives other than all-to-all and send, with NCCL's costs).
    flow_classes : int
        How many flows were solved: the classes of flows that share rates at every instant
        (docs/model.md "Flow classes"), or every flow of the workload where they were not
        worth it or not asked for.
    gpudirect : bool
        Whether its network traffic moved with GPUDirect RDMA, or staged through host memory.
    n_flows : int
        Flows of the collective: its workload's, or where its ring was laid out by classes
        of hops, its full step DAG's (``run``'s workload then holds one message per class,
        step and slice; see :attr:`flows`).
    calls_run : int
        Calls ``run`` holds: 2 where calls back to back overlap (a chain's,
        :mod:`flowsim.collectives.calls`; ``n_flows`` then counts both calls' flows); else 1.
    """

    collective: str
    algorithm: str
    protocol: str
    channels: int
    model: str
    ranks: tuple[str, ...]
    size_bytes: float
    time_s: float
    costs: CollectiveCosts
    run: RunResult
    nccl: NcclChoice | None = None
    flow_classes: int = 0
    gpudirect: bool = True
    n_flows: int = 0
    calls_run: int = 1

    @property
    def flows(self) -> int:
        """Flows of the collective: its workload's, or those of the full step DAG that a
        ring laid out by classes of hops stands for (``n_flows``)."""
        return self.n_flows or len(self.run.workload)

    @property
    def solved_over(self) -> str:
        """What the engine solved: ``"classes: 312 of 98,304 flows"``, or ``"full DAG:
        98,304 flows"``."""
        n_flows = self.flows
        if self.flow_classes and self.flow_classes < n_flows:
            return f"classes: {self.flow_classes:,} of {n_flows:,} flows"
        return f"full DAG: {n_flows:,} flows"

    @property
    def latency_s(self) -> float:
        """The part of :attr:`time_s` that does not grow with the size, as NCCL's model
        puts it (:attr:`NcclChoice.model_latency_us`); for point-to-point messages and custom
        costs, the base latency and one step latency the messages pay."""
        if self.nccl is not None:
            return self.nccl.model_latency_us * 1e-6
        return self.costs.base_s + max(self.costs.intra_step_s, self.costs.inter_step_s)


def _intra_hardware(topology: Topology, ranks: Sequence[str]) -> str:
    """``"nvlink"`` when every rank has an NVLink, else ``"pci"`` (NCCL's intra-node hwLat row)."""
    for rank in ranks:
        if not np.any(topology.link_tier[topology.links_from(rank)] == LinkTier.SCALE_UP):
            return "pci"
    return "nvlink"


def _nvswitched(topology: Topology, ranks: Sequence[str]) -> bool:
    """Whether every rank links to an NVSwitch, so that any GPU of its server is one NVLink
    path away (not so on PCIe, nor between the pairs of an NVLink bridge)."""
    for rank in ranks:
        links = topology.links_from(rank)
        scale_up = links[topology.link_tier[links] == LinkTier.SCALE_UP]
        if not np.any(topology.node_kind[topology.link_dst[scale_up]] == NodeKind.NVSWITCH):
            return False
    return True


def _step_latency_us(topology: Topology, ranks: Sequence[str]) -> float:
    """The latency (us) each step between ``ranks``' servers pays on top of NCCL's own figure:
    the largest of their servers' :attr:`~flowsim.topology.Topology.server_step_latency_s`
    (what the network plugin reports to NCCL, unless the system says otherwise; NCCL's
    tuner takes the reported one, :attr:`~flowsim.collectives.tuner.NcclSystem.net_latency_us`)."""
    servers = {int(topology.node_server[topology.node_id(rank)]) for rank in ranks}
    return max(float(topology.server_step_latency_s[s]) for s in servers if s >= 0) * 1e6 if servers - {-1} else 0.0


def _default_channels(topology: Topology, ranks: Sequence[str], servers: dict[str, str]) -> int:
    """1 inside one server; across servers, the most distinct exit NICs any server's ranks
    have (one channel per rail)."""
    if len(set(servers.values())) < 2:
        return 1
    nics: dict[str, set[int]] = {}
    for rank in ranks:
        nics.setdefault(servers[rank], set()).add(int(topology.node_nic[topology.node_id(rank)]))
    return max(1, max(len(n) for n in nics.values()))


def _mesh_orders(topology: Topology, ranks: Sequence[str], servers: dict[str, str]) -> list[tuple[str, ...]]:
    """The rings of an NVLink mesh: inside one server :func:`mesh_rings`, across servers
    :func:`mesh_server_rings`; empty where the GPUs form no mesh."""
    if len(ranks) < 2:
        return []
    if len(set(servers.values())) > 1:
        return mesh_server_rings(topology, ranks, servers)
    counts = mesh_link_counts(topology, ranks)
    return mesh_rings(ranks, counts) if counts.any() else []


def _distinct_rings(
    topology: Topology, ranks: Sequence[str], servers: dict[str, str], rings: Sequence[tuple[str, ...]]
) -> int:
    """How many different rings NCCL's channels follow: the rings of an NVLink mesh (``rings``,
    :func:`_mesh_orders`), one per rail across servers, else one."""
    if rings:
        return len(rings)
    if len(set(servers.values())) == 1:
        return 1
    return _default_channels(topology, ranks, servers)


def _rails(topology: Topology, ranks: Sequence[str], servers: dict[str, str]) -> dict[str, int] | None:
    """Each rank's rail: the place of the NIC it leaves through among its server's NICs (by
    node id, failed ones included), the same for the same NIC of every server built alike;
    None where a rank has no NIC."""
    ids = topology.node_ids(ranks)
    nics = topology.node_nic[ids]
    if (nics < 0).any():
        return None
    server_ids = topology.node_server[ids]
    is_nic = topology.node_kind == NodeKind.NIC
    place = {
        int(server): {int(nic): i for i, nic in enumerate(np.flatnonzero(is_nic & (topology.node_server == server)))}
        for server in np.unique(server_ids)
    }
    return {rank: place[int(server)][int(nic)] for rank, server, nic in zip(ranks, server_ids, nics, strict=True)}


def _nic_offsets(topology: Topology, first: Sequence[str], gpudirect: bool) -> list[int]:
    """:func:`~flowsim.collectives.rings.nic_spread_offsets` of one server's ranks ``first``;
    without ``gpudirect``, spread over the PCIe uplinks their NICs sit behind (the switch a
    NIC links to, or its CPU)."""
    nics = topology.node_nic[topology.node_ids(first)].tolist()
    if gpudirect:
        return nic_spread_offsets(nics)
    uplinks = []
    for nic in nics:
        near = [int(topology.link_dst[link]) for link in topology.links_from(nic)
                if topology.node_kind[topology.link_dst[link]] in (NodeKind.PCIE_SWITCH, NodeKind.CPU)]
        uplinks.append(near[0] if near else nic)
    return nic_spread_offsets(nics, uplinks)


def _ring_orders(
    topology: Topology, ranks: Sequence[str], servers: dict[str, str], channels: int | None, gpudirect: bool,
    rings: Sequence[tuple[str, ...]],
) -> list[tuple[str, ...]]:
    """Ring order per channel: NVLink mesh rings (``rings``, :func:`_mesh_orders`) where the
    GPUs of a server link directly (the DGX-1; across servers
    :func:`~flowsim.collectives.rings.mesh_server_rings`), else
    :func:`~flowsim.collectives.rotated_rings`, rotated to leave each server through its NICs
    in turn (:func:`~flowsim.collectives.rings.nic_spread_offsets`)."""
    if rings:
        n = len(rings) if channels is None else channels
        return [rings[c % len(rings)] for c in range(n)]
    n = _default_channels(topology, ranks, servers) if channels is None else channels
    first = [r for r in ranks if servers[r] == servers[ranks[0]]]
    return rotated_rings(ranks, n, servers, _nic_offsets(topology, first, gpudirect))


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


def collective_time(
    topology: Topology,
    collective: str,
    size_bytes: float,
    *,
    ranks: Sequence[str] | None = None,
    algorithm: str | None = "auto",
    protocol: str = "auto",
    channels: int | None = None,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    nccl_env: Mapping[str, str] | None = None,
    nccl_version: str = DEFAULT_NCCL_VERSION,
    routing: str = "auto",
    seed: int = 0,
    gpudirect: bool | None = None,
    router: Router | None = None,
    progress: Callable[[str], None] | None = None,
    classes: bool = True,
    dtype: str = "float",
    redop: str = "sum",
    time_rel_tol: float = DEFAULT_TIME_REL_TOL,
    model_caps: bool = True,
    calls: int = 1,
    **layout,
) -> CollectiveRun:
    """Simulate one collective over GPUs of ``topology``.

    Parameters
    ----------
    topology : Topology
    collective : str
        One of :data:`flowsim.collectives.COLLECTIVES`.
    size_bytes : float
        ``S`` as nccl-tests counts it, taken as given: the call is simulated even at 0 bytes
        (its latencies), and not trimmed to whole elements or 16-byte parts. The rows of
        :func:`~flowsim.collectives.sweep` (``flowsim collective``) are nccl-tests': sizes
        trimmed as it trims them, and 0 for a call NCCL discards
        (:func:`~flowsim.collectives.report.empty_call_runs`).
    ranks : sequence of str, optional
        GPU node names in ring order; default every GPU of ``topology`` in id order
        (for ``send``: the pair of them :func:`send_pair` picks).
    algorithm : str, optional
        One of :data:`flowsim.collectives.ALGORITHMS` for the collective, or ``"auto"`` (the
        default): the algorithm NCCL's tuner picks (:mod:`flowsim.collectives.tuner`) among
        those flowsim builds. ``None`` is the collective's first algorithm.
    protocol : {"auto", "simple", "ll", "ll128"}
        NCCL protocol whose latencies and wire efficiency apply; ``"auto"`` (the default)
        is the one NCCL's tuner picks (for all-to-all and send, NCCL's point-to-point rule:
        LL up to 16 KiB per peer and channel, ``NCCL_P2P_LL_THRESHOLD``).
    channels : int, optional
        Default: the channels NCCL runs the call on (its communicator's channels, fewer for
        small sizes; :attr:`NcclChoice.n_channels`), each capped at its share of NCCL's
        modelled bus bandwidth. A send between servers runs on NCCL's point-to-point
        channels for its size (:func:`~flowsim.collectives.tuner.p2p_channels`), each held
        to :data:`~flowsim.collectives.tuner.P2P_PER_CHANNEL_NET_GBPS`; an all-to-all's pair
        between servers to their sum. With custom ``costs``, for a send inside a server and
        for the hierarchical all-reduce: 1 inside one server, one per rail across servers.
        Ring orders come from
        :func:`~flowsim.collectives.rotated_rings`, or inside one server whose GPUs have
        direct NVLinks (a mesh such as the DGX-1) from
        :func:`~flowsim.collectives.mesh_rings`, one channel per ring found by default.
    slices : int, optional
        See :mod:`flowsim.collectives`.
    costs : CollectiveCosts, optional
        Replace NCCL's constants (then ``protocol`` must be ``"simple"`` or ``"auto"``, and
        NCCL's model does not choose: ``"auto"`` is the collective's first algorithm). By default
        :func:`~flowsim.collectives.nccl_costs` with NVLink or PCIe as the intra-server
        hardware, whichever the ranks have.
    model : {"auto", "steps", "stream"}
        Rings as one message per step or one flow per hop (ring all-reduce,
        reduce-scatter, all-gather and hierarchical all-reduce; see "Steps and streams" in
        :mod:`flowsim.collectives`). ``"auto"`` streams rings whose step DAG would exceed
        :data:`~flowsim.collectives.STEP_MESSAGE_LIMIT` messages, and refuses the other
        algorithms past that many (``"steps"`` builds them anyway). With ``classes``, a
        ring of more than :data:`~flowsim.collectives.dag.CLASS_LAYOUT_FROM` pieces is laid
        out as steps by classes of its hops where they give at most that many (under
        ``"steps"``, any number that fits in memory): the full step DAG's times
        (:mod:`flowsim.collectives.symmetry`); its run's workload then holds one message per
        class, step and slice (:attr:`CollectiveRun.flows` counts the full DAG's).
    nccl_env : mapping of str to str, optional
        NCCL environment variables the choice follows (``NCCL_ALGO``, ``NCCL_PROTO``,
        ``NCCL_NVLS_ENABLE``, ``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS``, ...:
        :data:`~flowsim.collectives.tuner.NCCL_ENV_KEYS`).
    nccl_version : str
        NCCL version whose constants apply (:data:`~flowsim.collectives.constants.NCCL_VERSIONS`).
    routing, seed, router
        As :func:`flowsim.pipeline.run`.
    gpudirect : bool, optional
        Whether network traffic moves with GPUDirect RDMA (the NIC reading and writing GPU
        memory) or is staged through host memory, for NCCL's choice and for the flows' routes;
        default what NCCL decides (:func:`~flowsim.collectives.tuner.gpudirect_rdma`: each
        GPU's path to its NIC against ``NCCL_NET_GDR_LEVEL``).
    progress : callable, optional
        Called with a short note before building the flows and before routing and simulating
        them; given, the engine also prints its progress line (see
        :func:`flowsim.engine.simulate`).
    classes : bool
        Solve once per class of flows that share rates at every instant (the same times, see
        docs/model.md "Flow classes"), and lay large rings out by classes of hops
        (``model``); False solves every flow of the full DAG.
    dtype, redop : str
        The data type and reduction, as nccl-tests' ``-d`` and ``-o`` name them (default
        ``"float"`` and ``"sum"``, nccl-tests' own): NCCL takes NVLS, NVLSTree and PAT only for
        the reductions they have (:func:`~flowsim.collectives.tuner.nvls_refusal`).
    time_rel_tol : float
        Events this close in relative time are one instant (:func:`flowsim.engine.simulate`):
        the default keeps the times exact; 1e-3 bounds a crowd of flows that finish one by one
        (an all-to-all across hashed spine paths) at a small, measured error.
    model_caps : bool
        Hold each lane of a ring or tree to its channels' share of NCCL's modelled bandwidth
        where that is a throughput limit (the default: LL's and LL128's caps, trees, calls on
        fewer channels); False leaves those lanes to what the links and the GPUs' copy rates
        give, the most the hardware described allows (``flowsim check``'s bound for
        ``FAST``).
    calls : int
        Calls made back to back, as nccl-tests makes its ``iters`` (default 1, one call):
        ``time_s`` is then their mean time. Only a chain's calls overlap
        (:data:`~flowsim.collectives.calls.OVERLAPPING`); two of them are simulated
        (:mod:`flowsim.collectives.calls`) and ``run`` holds both (:attr:`CollectiveRun.calls_run`).
    **layout
        ``orders``, ``servers``, ``switch``, ``root``, ``communicator``: see
        :func:`collective_workload`.

    Returns
    -------
    CollectiveRun
    """
    _check_topology(topology, "collective_time")
    allowed = (*keyword_options(collective_time, skip=3)[0], *_LAYOUT_OPTIONS)
    check_options(layout, allowed, "collective_time")  # else a TypeError naming collective_workload
    calls = whole_number("calls", calls, minimum=1)
    if router is None:
        router = Router(topology)
    if progress is not None:
        progress("building the flows")
    plan = collective_workload(
        topology, collective, size_bytes, ranks=ranks, algorithm=algorithm, protocol=protocol, channels=channels,
        slices=slices, costs=costs, model=model, nccl_env=nccl_env, nccl_version=nccl_version, router=router,
        dtype=dtype, redop=redop, gpudirect=gpudirect, hop_classes=classes, routing=routing, seed=seed,
        model_caps=model_caps, **layout,
    )
    # A chain's calls back to back overlap: two of them show by how much (flowsim.collectives.calls).
    overlapping = calls > 1 and collective in OVERLAPPING and plan.quotient is None
    if plan.quotient is not None:
        n_flows = plan.quotient.n_flows
        if progress is not None:
            progress(f"simulating {n_flows:,} flows as {len(plan.workload):,}, by classes of hops")
        outcome = plan.quotient.run(plan.workload, progress=progress is not None, time_rel_tol=time_rel_tol)
    else:
        n_flows = len(plan.workload)
        workload = back_to_back(plan.workload, plan.ranks) if overlapping else plan.workload
        if progress is not None:
            progress(f"routing and simulating {len(workload):,} flows"
                     + (f" (two calls back to back, {n_flows:,} each)" if overlapping else ""))
        outcome = run(
            topology, workload, routing=routing, seed=seed, gpudirect=plan.gpudirect, router=router,
            progress=progress is not None, classes=classes, time_rel_tol=time_rel_tol,
        )
    time_s = outcome.makespan_s
    if overlapping:
        finish = outcome.result.finish_s
        time_s = time_per_call(float(finish[:n_flows].max()), float(finish[n_flows:].max()), calls)
        n_flows *= 2  # the flows laid out and solved: both calls
    solved = outcome.result.n_flow_classes
    return CollectiveRun(
        collective, plan.algorithm, plan.protocol, plan.channels, plan.model, plan.ranks, float(size_bytes),
        time_s, plan.costs, outcome, plan.nccl, n_flows if solved is None else solved,
        plan.gpudirect, n_flows, 2 if overlapping else 1,
    )


#: Keywords of :func:`collective_time` it passes on to :func:`collective_workload`.
_LAYOUT_OPTIONS = ("orders", "servers", "switch", "root", "communicator")


def _check_topology(topology: object, what: str) -> None:
    """An :class:`InputError` naming ``what`` unless ``topology`` is a :class:`Topology`."""
    if not isinstance(topology, Topology):
        raise InputError(f"{what}: topology must be a flowsim Topology (flowsim.preset, flowsim.build_cluster, ...), "
                         f"got {topology!r} ({type(topology).__name__})")


def _gpu_ranks(topology: Topology, ranks: Sequence[str], what: str) -> tuple[str, ...]:
    """``ranks`` as a tuple, checked: at least two GPU nodes of ``topology``, each once; an
    :class:`InputError` naming ``what`` and the first rank that is not one otherwise."""
    ranks = _check_ranks(ranks, what)
    why = topology.not_gpu(ranks)
    if why is not None:
        raise InputError(f"{what}: ranks: {why}")
    return ranks


def _check_servers(topology: Topology, ranks: tuple[str, ...], servers: object, what: str) -> None:
    """A ``servers`` table, which regroups ``ranks`` among the topology's servers: an
    :class:`InputError` naming ``what`` and the table unless it gives every rank, and only
    the ranks, one of the topology's server names (or, for a rank outside every server, its
    own name, as the default gives it)."""
    if not isinstance(servers, Mapping):
        raise InputError(f"{what}: servers must be a mapping of rank to server name, got {servers!r}")
    members = set(ranks)
    extra = next((rank for rank in servers if rank not in members), None)
    if extra is not None:
        raise InputError(f"{what}: servers: {extra!r} is not one of the collective's ranks")
    missing = next((rank for rank in ranks if rank not in servers), None)
    if missing is not None:
        raise InputError(f"{what}: servers: the table gives no server for rank {missing!r}; give every rank's")
    valid = set(topology.server_names) | {rank for rank, own in rank_servers(topology, ranks).items() if own == rank}
    bad = next((rank for rank in ranks if servers[rank] not in valid), None)
    if bad is not None:
        raise InputError(f"{what}: servers: rank {bad!r}: {servers[bad]!r} is not a server of the topology")


def send_pair(topology: Topology, ranks: Sequence[str]) -> list[str]:
    """The two ranks whose ``send`` an nccl-tests ``sendrecv_perf`` run waits for.

    That run shifts data around the ring of ``ranks``, every rank sending to the next at
    once; the first ring neighbours on different servers cross the network and bound it, else
    the first two ranks. :func:`collective_workload` lays out the other pairs' sends beside
    it, which share its links where a PCIe uplink, staged host memory or a NIC carries several.
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
    (``model``: ``"steps"`` or ``"stream"``; ``channels``: a send's NCCL channels, 0 for an
    all-to-all; ``nccl``: NCCL's choice where its tuner chose; ``gpudirect``: whether its
    network traffic moves with GPUDirect RDMA or is staged through host memory, as its flows
    are to be routed; ``quotient``: where a ring was laid out by classes of its hops, which
    the workload's messages stand for, :meth:`RingClasses.run` simulates it)."""

    algorithm: str
    protocol: str
    channels: int
    model: str
    ranks: tuple[str, ...]
    costs: CollectiveCosts
    workload: Workload
    nccl: NcclChoice | None = None
    gpudirect: bool = True
    quotient: RingClasses | None = None


def collective_workload(
    topology: Topology,
    collective: str,
    size_bytes: float,
    *,
    ranks: Sequence[str] | None = None,
    algorithm: str | None = "auto",
    protocol: str = "auto",
    channels: int | None = None,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    nccl_env: Mapping[str, str] | None = None,
    nccl_version: str = DEFAULT_NCCL_VERSION,
    orders: Sequence[Sequence[str]] | None = None,
    servers: Mapping[str, str] | None = None,
    switch: str | None = None,
    root: int | None = None,
    router: Router | None = None,
    communicator: Sequence[str] | None = None,
    dtype: str = "float",
    redop: str = "sum",
    gpudirect: bool | None = None,
    hop_classes: bool = False,
    routing: str = "auto",
    seed: int = 0,
    model_caps: bool = True,
) -> CollectivePlan:
    """The flows of one collective on ``topology``, laid out as every caller lays it out.

    Arguments as for :func:`collective_time`, and these overrides of what the topology
    decides (each only for the algorithms whose
    :attr:`~flowsim.collectives.Algorithm.options` name it):

    orders : sequence of sequence of str, optional
        One ring order per channel (a permutation of ``ranks`` each); ``channels`` defaults
        to their count.
    servers : mapping of str to str, optional
        Server of each rank, for per-step latencies and grouping: every rank, each given one
        of the topology's server names (the ranks regrouped among them); default each rank's
        server in the topology (a node outside every server is its own).
    switch : str, optional
        NVLS: the NVSwitch node; default the one every rank links to.
    root : int, optional
        Broadcast, reduce, gather and scatter: the root's position in ``ranks`` (default 0).
    communicator : sequence of str, optional
        Point-to-point collectives (send, all-to-all, hypercube ...): the ranks of the NCCL
        communicator the messages go in, whose size sets NCCL's channels for a peer
        (:func:`~flowsim.collectives.tuner.p2p_channels`); default ``ranks``, or for a send
        without ``ranks`` every GPU of ``topology``: as in
        nccl-tests' ``sendrecv_perf``, each sends to the next at once, the plan's ``ranks`` being
        the pair :func:`send_pair` picks, and its workload holds every pair's send.
    dtype, redop, gpudirect, model_caps
        See :func:`collective_time`.
    hop_classes : bool
        A ring of more than :data:`~flowsim.collectives.dag.CLASS_LAYOUT_FROM` pieces laid
        out as steps by the classes of its hops, routed by ``routing`` and ``seed``, where it
        has few (the plan's ``quotient``; :func:`collective_time` asks for it). Placed in a larger
        workload, a collective's messages must all be there: the default lays out each.

    Use it to place a collective inside a larger workload (a training step's gradient
    buckets, a scenario file's ``[[workload.collective]]``).
    """
    _check_topology(topology, "collective_workload")
    size_bytes = check_size(size_bytes, collective)  # before NCCL's tuner does arithmetic with it
    if nccl_env is not None and not isinstance(nccl_env, Mapping):
        raise InputError(f"nccl_env must be a mapping of NCCL variable to value ({{'NCCL_ALGO': 'Ring'}}), "
                         f"got {nccl_env!r}")
    # Names as NCCL spells them too (NCCL_ALGO=Ring, NCCL_PROTO=LL128), as the command line takes them.
    if algorithm is not None:
        algorithm = check_algorithm(collective, algorithm)
    protocol = check_protocol(protocol)
    check_reduction(dtype, redop)  # whether or not NCCL's tuner looks at them
    if channels is not None:
        channels = whole_number(f"{collective}: channels", channels)
    if costs is not None and protocol not in ("simple", "auto"):
        raise InputError(f"give either costs or protocol {protocol!r}, not both")
    if costs is None and channels is not None and channels > max_channels(nccl_version):
        raise InputError(f"channels={channels}: NCCL {nccl_version} runs at most {max_channels(nccl_version)} "
                         "(MAXCHANNELS)")
    # nccl-tests' sendrecv_perf (a send without ranks): every rank sends to the next at once.
    ring_of_sends: tuple[str, ...] = ()
    if ranks is None:
        gpus = [topology.node_names[g] for g in topology.gpus()]
        ranks = send_pair(topology, gpus) if collective == "send" else gpus
        if collective == "send":
            ring_of_sends = tuple(gpus)
            if communicator is None:
                communicator = gpus
    ranks = _gpu_ranks(topology, ranks, collective)
    if dtype in FP8_TYPES:
        fp8 = fp8_refusal(collective, dtype, describe_system(topology, ranks).sm, nccl_version)
        if fp8 is not None:
            raise InputError(fp8)
    if gpudirect is None:
        gpudirect = gpudirect_rdma(topology, communicator if communicator is not None else ranks,
                                   nccl_env=merged_env(topology, nccl_env), version=nccl_version, router=router)
    same_send = functools.partial(collective_workload, topology, "send", algorithm=algorithm,
                                  protocol=protocol, channels=channels, slices=slices, costs=costs, model=model,
                                  nccl_env=nccl_env, nccl_version=nccl_version, router=router, gpudirect=gpudirect)
    choice: NcclChoice | None = None
    if costs is None and collective in TUNED_COLLECTIVES:
        choice = _nccl(topology, collective, size_bytes, ranks, algorithm, protocol, model, nccl_env, nccl_version,
                       dtype, redop, router, gpudirect)
    if choice is not None:
        if algorithm == "auto":
            algorithm = choice.algorithm
        protocol = choice.protocol
    elif algorithm == "auto":
        algorithm = None
    entry = algorithm_of(collective, algorithm)
    if entry.name == "nvls" and choice is not None and choice.algorithm == "nvls" and choice.system.n_nodes > 1:
        # NCCL's NVLS across servers (with CollNet only) is NVLS inside them and IB SHARP between.
        entry = algorithm_of(collective, "nvls_sharp")
    p2p_sends = 0
    p2p: P2pChannels | None = None
    peer_bytes = size_bytes / len(ranks) if collective in PEER_SPLIT else size_bytes  # what a send to one peer moves
    sent: np.ndarray | None = None  # an alltoallv's bytes from rank i to rank j
    spread = 1.0
    if collective == "all_to_all_v":
        spread = alltoallv_spread(topology, nccl_env)
        sent = all_to_all_v_bytes(len(ranks), size_bytes, spread)
        peer_bytes = float(sent.max())  # the largest message: its protocol and channels are the row's
    if entry.name == "p2p" and costs is None:
        # NCCL's channels for a send to one peer (every peer's share of an all-to-all), in
        # the communicator of all the ranks (an nccl-tests sendrecv's, not its busiest pair's).
        env = merged_env(topology, nccl_env)
        p2p = p2p_channels(topology, tuple(communicator) if communicator is not None else ranks, nccl_env=env,
                           version=nccl_version, router=router, gpudirect=gpudirect)
        p2p_sends = p2p.for_send(peer_bytes)
    if protocol == "auto":
        simple_only = costs is not None or entry.name in _SIMPLE_ONLY
        protocol = "simple" if simple_only else _p2p_protocol(peer_bytes, channels or p2p_sends or None)
    given = {"channels": channels, "slices": slices, "orders": orders, "servers": servers, "switch": switch,
             "root": root}
    refused = [key for key, value in given.items() if value is not None and key not in entry.options]
    if refused:
        takes = ", ".join(sorted(entry.options & given.keys())) or "no layout options"
        raise InputError(
            f"bad parameters for {collective}: {entry.name} takes no {', '.join(refused)} (it takes {takes})"
        )
    if servers is not None:
        _check_servers(topology, ranks, servers, collective)
    if collective == "hypercube" and costs is None:
        # Each round is an NCCL call of its own, its sends laid out as NCCL lays out a send
        # (channels, protocol and caps for its size) in the communicator of all the ranks.
        round_plans = [[same_send(part, ranks=(src, dst), communicator=communicator or ranks,
                                  servers=None if servers is None else {r: servers[r] for r in (src, dst)})
                        for src, dst, part in round_] for round_ in hypercube_rounds(ranks, size_bytes)]
        final = round_plans[-1][0]  # the largest round's send, for the row's protocol and channels
        cube = hypercube_workload([[plan.workload for plan in round_] for round_ in round_plans])
        return CollectivePlan("p2p", final.protocol, final.channels, cube.tags["model"][0], ranks, final.costs, cube,
                              gpudirect=gpudirect)
    # NCCL's channel count, and each channel's share of its bus bandwidth as a rate cap, for
    # the rings and trees NCCL's choice names. NCCL's channels that run the same ring are
    # identical copies (the search duplicates them, src/graph/search.cc): flowsim lays them
    # out as one lane per distinct ring (one per rail across servers, one per mesh ring on an
    # NVLink mesh, one inside an NVSwitch server) whose cap is the sum of its channels'.
    topology_servers = rank_servers(topology, ranks)
    # The rings of an NVLink mesh (a search over the mesh and, across servers, its NICs),
    # found once for the call where a step below needs them.
    mesh_orders = functools.cache(lambda: _mesh_orders(topology, ranks, topology_servers))
    # A fallback graph's speed is NCCL's placeholder (tuner.FALLBACK_GBPS): its one channel
    # moves what the links give.
    capped = choice is not None and entry.name in ("ring", "tree") and not choice.fallback
    fill = 1.0
    split_fill = 1.0
    lane_channels = 1.0
    reported = 0
    # The channels the call runs on: NCCL's, or the caller's (one lane each).
    ran = (choice.n_channels if channels is None else channels) if choice is not None else 0
    if choice is not None and channels is None and orders is None:
        reported = choice.n_channels
        if capped:
            channels = min(choice.n_channels, _distinct_rings(topology, ranks, topology_servers, mesh_orders()))
            lane_channels = choice.n_channels / channels
    options: dict = {}
    if sent is not None:
        options["spread"] = spread
    if "servers" in entry.options:
        options["servers"] = topology_servers if servers is None else servers
    if root is not None:
        options["root"] = root
    if "offsets" in entry.options:
        mesh = mesh_orders()
        if not mesh and len(set(topology_servers.values())) > 1:
            # NCCL's search starts channel c on NIC c mod nNets, trees as rings: each channel's
            # chain has its head, which talks to the other servers, on the next NIC.
            first = [r for r in ranks if topology_servers[r] == topology_servers[ranks[0]]]
            options["offsets"] = _nic_offsets(topology, first, gpudirect)
        elif mesh and "chains" in entry.options:
            # On an NVLink mesh (the DGX-1) NCCL searches a tree's chains as it searches its
            # rings, over NVLink from one NIC's GPU to the other's ([NCCL] src/graph/search.cc):
            # the GPUs in index order would step between GPUs with no NVLink, through the CPUs.
            options["chains"] = mesh
    if "rails" in entry.options and len(set(topology_servers.values())) > 1 \
            and _nvswitched(topology, ranks) and not mesh_orders():
        # NCCL's rings leave a server through the NIC they came in by (docs/hardware.md §7.4),
        # the last GPU handing its data to that NIC's own GPU over NVLink (PXN). Without
        # NVLink it sends to a NIC itself: PXN needs the relaying GPU an NVLink path away
        # ([NCCL] v2.30.7-1 src/graph/paths.cc, ``paths[GPU][g].type <= PATH_NVL``).
        options["rails"] = _rails(topology, ranks, topology_servers)
    nvlink = ""
    if "switch" in entry.options:
        if len(set(topology_servers.values())) != 1:
            raise InputError("NVLS runs across servers only with CollNet (NCCL_COLLNET_ENABLE=1 on an InfiniBand "
                             "fabric with SHARP; algorithm nvls_sharp); NVLSTree runs across them without")
        options["switch"], nvlink = _nvls_switch(topology, ranks, switch)
    if entry.name in ("nvls_tree", "nvls_sharp"):
        by_server = ranks_by_server(ranks, topology_servers)
        switches = {server: _nvls_switch(topology, members, None) for server, members in by_server.items()}
        options["switches"] = {server: found[0] for server, found in switches.items()}
        nvlink = next(iter(switches.values()))[1]
        if entry.name == "nvls_sharp":
            options["sharp"] = _sharp_paths(topology, by_server)
        elif choice is not None:
            # Each tree message's share of NCCL's NVLSTree bandwidth: the channels' algorithm
            # bandwidth over the chunks (one per local rank) their heads carry.
            algbw = choice.bus_bandwidth_GBps * 1e9 * len(ranks) / (2 * (len(ranks) - 1))
            options["tree_cap_Bps"] = algbw * choice.n_channels / choice.max_channels / len(
                next(iter(by_server.values()))
            )
    if entry.name in ("collnet_direct", "collnet_chain") and len(set(topology_servers.values())) < 2:
        raise InputError(f"{entry.name}: the ranks are in one server; CollNet reduces in the network across servers")
    if entry.name in ("collnet_direct", "nvls_sharp") and collective != "all_reduce":
        first = next(iter(ranks_by_server(ranks, topology_servers).values()))
        nics = len(collnet_heads(topology, first))
        if nics < len(first):
            raise InputError(f"{entry.name}: {collective} through the network needs a NIC for every GPU (NCCL: "
                             f"\"AllGather/ReduceScatter requires 1:1 GPU:NIC\"); a server's {len(first)} ranks "
                             f"leave it through {nics} NIC(s)")
    if entry.name == "collnet_direct":
        members = ranks_by_server(ranks, topology_servers)
        first = next(iter(members.values()))
        heads = [first.index(rank) for rank in collnet_heads(topology, first)]
        options["heads"] = heads
        # Head j's chunk climbs from the leaf of each server's head j.
        options["sharp"] = _sharp_paths(topology, {server: [group[h] for h in heads if h < len(group)]
                                                   for server, group in members.items()})
    elif entry.name == "collnet_chain":
        options["sharp"] = _sharp_paths(topology, ranks_by_server(ranks, topology_servers))
    n_channels = 0
    if "channels" in entry.options:
        if orders is not None:
            options["orders"] = [tuple(o) for o in orders]
            n_channels = len(options["orders"]) if channels is None else channels
        elif entry.ring_ordered:
            options["orders"] = _ring_orders(topology, ranks, topology_servers, channels, gpudirect, mesh_orders())
            n_channels = len(options["orders"])
        elif entry.name in ("nvls", "nvls_tree", "nvls_sharp", "pat", "collnet_direct") and choice is not None \
                and channels is None:
            # NVLS channels pull from the one switch with no per-channel figure, and PAT's and
            # CollNet Direct's channels run the same schedule side by side: one lane.
            n_channels = 1
        elif entry.name == "collnet_chain" and choice is not None and channels is None:
            # One lane per chain NCCL's channels run (one per NIC), each carrying its channels.
            n_channels = min(choice.n_channels, _distinct_rings(topology, ranks, topology_servers, mesh_orders()))
        else:
            n_channels = _default_channels(topology, ranks, topology_servers) if channels is None else channels
            if entry.name == "p2p" and p2p_sends and channels is None \
                    and len({topology_servers[rank] for rank in ranks}) > 1:
                # A send across servers: one flow per NCCL channel, each held to its rate below.
                n_channels = p2p_sends
        if slices is None and choice is not None and orders is None and entry.name in _NCCL_BUILT:
            # Each lane stands for channels that work in step, so it is cut into the pieces
            # one of NCCL's channels moves its share in: its chunks (and slices). The
            # hierarchical all-reduce is no NCCL algorithm: its rings keep their own slices.
            slices = _nccl_pieces(collective, entry.name, choice, size_bytes, ranks, topology_servers,
                                  heads=len(options.get("heads", ())))
            if capped and entry.name == "tree" and choice.protocol == "simple":
                # Simple forwards whole slices; LL and LL128 stream their lines through every hop.
                fill = _tree_fill(slices, ranks, topology_servers)
                # Slices stand for NCCL's chunks, up to MAX_PIPELINE_SLICES of them: a hop held
                # to its own rate (the split block below) moves NCCL's chunks through the
                # pipeline, so its cap takes back only what the fewer, larger slices add.
                chunks = _nccl_pieces(collective, entry.name, choice, size_bytes, ranks, topology_servers,
                                      most=None)
                split_fill = fill / _tree_fill(chunks, ranks, topology_servers)
        options.update(channels=n_channels, slices=slices)
    intra = _intra_hardware(topology, ranks)
    step_latency = _step_latency_us(topology, ranks)
    if costs is not None:
        chosen = ("custom", costs)
    elif entry.name in ("nvls", "nvls_tree", "nvls_sharp"):
        if protocol != "simple":
            raise InputError(f"NVLS runs NCCL's Simple protocol only, not {protocol!r}")
        if entry.name == "nvls":
            chosen = ("simple", nvls_costs(nvlink, version=nccl_version))
        elif entry.name == "nvls_tree":
            chosen = ("simple", nvls_tree_costs(nvlink, version=nccl_version, net_latency_us=step_latency))
        else:
            chosen = ("simple", nvls_sharp_costs(nvlink, version=nccl_version, net_latency_us=step_latency))
    elif entry.name in ("collnet_direct", "collnet_chain"):
        if protocol != "simple":
            raise InputError(f"CollNet runs NCCL's Simple protocol only, not {protocol!r}")
        per_server = len(ranks) // len(set(topology_servers.values()))
        chosen = ("simple", collnet_costs(entry.name, per_server, intra, version=nccl_version,
                                          net_latency_us=step_latency))
    elif entry.name == "pat":
        if protocol != "simple":
            raise InputError(f"PAT runs NCCL's Simple protocol only, not {protocol!r}")
        one_per_node = len(set(topology_servers.values())) == len(ranks)
        chosen = ("simple", pat_costs(len(ranks), one_per_node=one_per_node, version=nccl_version,
                                      net_latency_us=step_latency))
    else:
        table = "tree" if entry.name == "tree" else "ring"
        chosen = (protocol, nccl_costs(table, protocol, intra, version=nccl_version,
                                       net_latency_us=step_latency))
        if entry.name == "p2p" and protocol == "simple" and intra == "nvlink" \
                and (collective in PEER_SPLIT or (p2p is not None and p2p.reads)):
            # An all-to-all's messages over NVLink, and a send where NCCL reads its peer's
            # buffer (Ampere), move less than rings do on the same links (measured,
            # P2P_NVLINK_EFFICIENCY); a send NCCL writes moves what a ring moves. A gather's,
            # a scatter's and an alltoallv's grouped sends to several peers are taken to move
            # what an all-to-all's do (no measurement of them was found). Across servers the
            # NIC moves them.
            chosen = (protocol, dataclasses.replace(chosen[1], intra_wire_efficiency=P2P_NVLINK_EFFICIENCY))
    if entry.name == "ring" and choice is not None and collective not in ("broadcast", "reduce"):
        # A ring across servers posts a network send at every step, and NCCL's model charges
        # each step inside a server at least that post's CPU cost (ring_net_overhead_us).
        post_s = ring_net_overhead_us(choice.system, chosen[0], choice.net_overhead_ns) * 1e-6
        chosen = (chosen[0], dataclasses.replace(chosen[1], intra_step_s=max(chosen[1].intra_step_s, post_s)))
    if entry.name == "tree" and chosen[0] == "simple" and intra == "nvlink" and choice is not None:
        # Each direction of a Simple tree channel's hop inside a server moves what half of
        # its thread block copies (docs/model.md "Tree channels inside a server"); a lane
        # carries lane_channels of NCCL's channels, half of them on each of its two trees.
        half_block = half_block_nvlink_GBps(choice.system.sm)
        if half_block is not None:
            options["split_cap_Bps"] = half_block * 1e9 * lane_channels / 2 * split_fill / chosen[1].wire_efficiency
    if capped and entry.name == "ring" and chosen[0] == "simple" and choice is not None \
            and ran >= choice.model_channels:
        # A Simple ring's model bandwidth is what NCCL's topology search reserved per channel
        # (its speed arrays, docs/hardware.md §7.4), not a throughput limit: on as many
        # channels as the search gave (or more, NCCL_MIN_NCHANNELS) it moves what the links give.
        # LL, LL128 and trees keep the model's per-channel protocol limits (llMaxBw,
        # perChMax*Bw), and a call on fewer channels (a small size, NCCL_MAX_NCHANNELS) its
        # channels' share.
        capped = False
    lane_cap = math.inf
    if capped and model_caps:
        assert choice is not None
        share = lane_channels * choice.channel_bandwidth_Bps(ran)
        if entry.name == "tree":
            # NCCL's tree moves a channel's data at half its bus bandwidth (the algorithm
            # bandwidth, src/graph/tuning.cc: ratio .5), and each lane runs both of NCCL's
            # trees side by side, each for half of the lane's channels.
            share /= 4 / fill
            if collective == "all_reduce":
                share *= tree_correction(constants_of(choice.version), protocol, size_bytes)
        lane_cap = share / chosen[1].wire_efficiency
    net_cap = math.inf
    if entry.name == "ring" and chosen[0] == "simple" and choice is not None \
            and choice.system.sm // 10 in HOPPER_RING_NET_CHANNEL_SM:
        # A Hopper ring channel's hop between servers moves at most HOPPER_RING_NET_CHANNEL_GBPS
        # (calibrated, docs/model.md "Ring channels across servers"); a lane carries its channels.
        net_cap = HOPPER_RING_NET_CHANNEL_GBPS * 1e9 * lane_channels / chosen[1].wire_efficiency
    if "caps" in entry.options:
        # Rings, chains and trees cap their own messages (streamed, their first slices move at the caps).
        options.update(cap_Bps=lane_cap, net_cap_Bps=net_cap)
    else:
        assert lane_cap == net_cap == math.inf, entry.name  # only rings, chains and trees are capped
    symmetry = None
    if hop_classes and "symmetry" in entry.options:
        symmetry = options["symmetry"] = RingClasses(topology, router or Router(topology), routing, seed, gpudirect)
    workload = entry.builder(ranks, size_bytes, costs=chosen[1], model=model, **options)
    quotient = symmetry if symmetry is not None and symmetry.message_class is not None else None
    if p2p_sends:
        assert p2p is not None
        # Each of NCCL's channels to a peer moves at most P2P_PER_CHANNEL_NET_GBPS across the
        # network and, over NVLink, what its CTA copies at the GPU's clock (docs/model.md
        # "Point-to-point channels"). A send's channels run side by side, one flow each, an
        # all-to-all's flow is a peer's; a flow carries its payload over its wire efficiency.
        sends: int | np.ndarray = p2p_sends
        part: float | np.ndarray = peer_bytes / p2p_sends
        if sent is not None:
            # Each of an alltoallv's sends on the channels its own size gives.
            position = {rank: i for i, rank in enumerate(ranks)}
            pairs = zip(workload.src, workload.dst, strict=True)
            payload = np.array([sent[position[a], position[b]] for a, b in pairs], dtype=np.float64)
            channels_of = {b: p2p.for_send(b) for b in np.unique(payload).tolist()}
            sends = np.array([channels_of[b] for b in payload.tolist()], dtype=np.float64)
            part = payload / sends
        scale = sends * 1e9 / (n_channels if collective == "send" else 1)
        used = chosen[1]
        inside = p2p.nvlink_channel_GBps if intra == "nvlink" else None
        if inside is not None and collective in _ONE_SIDED:
            # A channel's work that only sends, or only receives, takes the whole block
            # ([NCCL] v2.30.7-1 src/device/sendrecv.h: "Sends without recvs use more warps",
            # and a receive without a send likewise): a gather's senders and its root, a
            # scatter's root and its receivers.
            inside *= 2
        across_flows, inside_flows = _server_pairs(topology, workload)
        channels_net_cap = P2P_PER_CHANNEL_NET_GBPS * scale / used.wire_efficiency
        cap = np.where(across_flows, np.minimum(workload.cap_Bps, channels_net_cap), workload.cap_Bps)
        overhead = workload.overhead_s
        if inside is not None:
            nvlink_cap = inside * scale / (used.intra_wire_efficiency or used.wire_efficiency)
            cap = np.where(inside_flows, np.minimum(cap, nvlink_cap), cap)
            if chosen[0] == "simple":
                # Simple moves a channel's part through the receiver's buffer a chunk at a time:
                # the receiver copies a chunk out once it is in, so the last chunk's copy
                # follows the transfer (docs/model.md "Point-to-point channels"); the last
                # message of each pair's chain (none waits for it) pays it.
                last = np.ones(len(overhead), dtype=bool)
                last[workload.dep_indices] = False
                overhead = np.where(inside_flows & last, overhead + np.minimum(p2p.chunk_bytes, part) / (inside * 1e9),
                                    overhead)
        workload = dataclasses.replace(workload, cap_Bps=cap, overhead_s=overhead)
        reported = p2p_sends
    if collective == "all_reduce" and entry.name in ("nvls", "nvls_tree", "nvls_sharp") \
            and nvlink in NVLS_BUSBW_CEILING_GBPS:
        # A call on fewer NVLS channels than NCCL runs it on unbounded (NCCL_NVLS_NCHANNELS,
        # NCCL_MAX_CTAS) moves their share, as a ring's channels do (NCCL_MAX_NCHANNELS;
        # NcclChoice.model_channels, docs/model.md "NVLS's shared budget").
        share = min(1.0, ran / choice.model_channels) if choice is not None and ran else 1.0
        workload = with_nvls_budget(topology, workload, _nvls_budget_Bps(nvlink, ranks, topology_servers)
                                    * share / chosen[1].wire_efficiency)
    if ring_of_sends:
        # The pair the run waits for shares links with the other ranks' sends where a PCIe
        # switch's uplink, host memory a copy is staged through, or a NIC carries several: all
        # of them run beside it, each laid out as NCCL lays out its own.
        others = []
        for i, src in enumerate(ring_of_sends):
            dst = ring_of_sends[(i + 1) % len(ring_of_sends)]
            if (src, dst) != ranks:
                other = same_send(size_bytes, ranks=(src, dst), communicator=communicator)
                others.append(other.workload.renamed(f"{src}->{dst}."))
        workload = Workload.concat([workload, *others])
    return CollectivePlan(entry.name, chosen[0], reported or n_channels, workload.tags["model"][0], ranks, chosen[1],
                          workload, choice, gpudirect, quotient)


#: Messages an NVLS or NVLSTree call may be laid out in where NCCL's chunks would give more
#: slices than :data:`~flowsim.collectives.dag.MAX_PIPELINE_SLICES`: on 64 slices the stages
#: of a chunk (reduce, result, store, multicast, and NVLSTree's hops between servers) fill and
#: drain the pipeline for several percent of a large call, where NCCL runs hundreds to
#: thousands of 128 KiB chunks. One server of 8 GPUs (144 messages a slice) gets 277 slices,
#: two (320) 125; a 72-GPU rack and 4 or more servers keep 64.
NVLS_MESSAGE_BUDGET = 40_000

#: Collectives whose algorithm and protocol NCCL's tuner chooses; the others (all-to-all,
#: gather, scatter, hypercube, alltoallv and send) are point-to-point messages, which it does not.
TUNED_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
# Collectives whose ranks each only send or only receive.
_ONE_SIDED = frozenset({"gather", "scatter"})
# NCCL's algorithms flowsim builds, under the same names (the hierarchical all-reduce has no
# NCCL counterpart: its phases are rings, so NCCL's ring model picks its protocol).
_NCCL_BUILT = ("ring", "tree", "nvls", "nvls_tree", "nvls_sharp", "pat", "collnet_direct", "collnet_chain")
# Algorithms that reduce in the network through NCCL's CollNet (IB SHARP).
_COLLNET_BUILT = ("collnet_direct", "collnet_chain", "nvls_sharp")
# flowsim's algorithms that run one of NCCL's under another name: the hierarchical all-reduce's
# phases are rings, NVLS across servers (nvls_sharp) is NCCL's NVLS with CollNet.
_NCCL_NAMES = {"hierarchical": "ring", "nvls_sharp": "nvls"}
# Algorithms that run NCCL's Simple protocol only.
_SIMPLE_ONLY = frozenset({"nvls", "nvls_tree", "nvls_sharp", "pat", "collnet_direct", "collnet_chain"})
# NCCL_P2P_LL_THRESHOLD ([NCCL] src/enqueue.cc): point-to-point messages up to this many bytes
# per channel use LL.
P2P_LL_THRESHOLD = 16384


def _nccl(topology: Topology, collective: str, size_bytes: float, ranks: tuple[str, ...], algorithm: str | None,
          protocol: str, model: str, nccl_env: Mapping[str, str] | None, nccl_version: str, dtype: str, redop: str,
          router: Router | None, gpudirect: bool) -> NcclChoice | None:
    """NCCL's choice among the algorithms flowsim builds for ``collective`` (only ``algorithm``
    when one is named; only those of :data:`STREAMED` for ``model="stream"``) and the protocols allowed (only
    ``protocol`` when one is named). None when an algorithm is named that NCCL's model does
    not run here (NVLS without NVSwitch generation 3, say): the builder then says why; an
    NVLS algorithm named for a reduction the NVSwitch does not have is an error."""
    if algorithm in ("nvls", "nvls_tree", "nvls_sharp"):
        refused = nvls_refusal(collective, dtype, redop, nccl_version)
        if refused is not None:
            raise InputError(f"NCCL runs no {algorithm} {collective} here: {refused}")
    # The cluster's own environment (a cloud image's NCCL profile) under the caller's.
    env = merged_env(topology, nccl_env)
    _check_steering(topology, collective, algorithm, protocol, nccl_env, env)
    if algorithm not in ("auto", None):
        name = algorithm_of(collective, algorithm).name
        nccl_name = _NCCL_NAMES.get(name, name)
        n_nodes = len(set(rank_servers(topology, ranks).values()))
        refused = version_refusal(nccl_name, collective, nccl_version, n_nodes)
        if refused is not None:
            # What NCCL_ALGO naming it gets: the version has no such algorithm to run.
            raise InputError(f"NCCL {nccl_version} runs no {algorithm} {collective}: {refused}")
        if name in _COLLNET_BUILT:
            # A named CollNet algorithm runs as NCCL runs it with CollNet on, on the channels
            # its tuner gives it, as every other named algorithm does (CollNet's make the
            # communicator's half as many again, src/graph/connect.cc).
            enable = env.setdefault("NCCL_COLLNET_ENABLE", "1")
            if enable != "1":
                raise InputError(f"algorithm {algorithm!r} runs CollNet (IB SHARP), which NCCL_COLLNET_ENABLE="
                                 f"{enable} turns off: name one or the other")
    if protocol != "auto":
        env["NCCL_PROTO"] = protocol
    if algorithm == "auto":
        allowed = [name for name in _NCCL_BUILT if (collective, name) in ALGORITHM_TABLE]
        if model == "stream":
            # NVLS across servers is nvls_sharp, which streams; NVLS inside one does not.
            across = len(set(rank_servers(topology, ranks).values())) > 1
            allowed = [name for name in allowed if name in STREAMED or (name == "nvls" and across)]
    else:
        name = algorithm_of(collective, algorithm).name
        allowed = [_NCCL_NAMES.get(name, name)]
        env.pop("NCCL_ALGO", None)
    try:
        return nccl_choice(topology, collective, size_bytes, ranks=ranks, nccl_env=env, version=nccl_version,
                           allowed=allowed, router=router, dtype=dtype, redop=redop, gpudirect=gpudirect)
    except NoNcclChoice:
        if algorithm == "auto":
            raise
        return None


def _check_steering(topology: Topology, collective: str, algorithm: str | None, protocol: str,
                    given: Mapping[str, str] | None, env: Mapping[str, str]) -> None:
    """An :class:`InputError` naming both where a named ``algorithm`` is not one that
    ``NCCL_ALGO`` enables for ``collective``, or a named ``protocol`` not one of ``NCCL_PROTO``'s
    (of ``env``: the system's environment under the caller's, ``given``): the call would
    otherwise run what one of them says and report the other. The hierarchical all-reduce
    runs rings, NVLS across servers (``nvls_sharp``) NCCL's NVLS."""
    nccl = NcclEnv(dict(env))
    system = dict(topology.nccl_env)
    where = {key: "" if key in (given or {}) or key not in system else " (the system's NCCL environment)"
             for key in ("NCCL_ALGO", "NCCL_PROTO")}
    if algorithm not in ("auto", None) and "NCCL_ALGO" in env:
        name = algorithm_of(collective, algorithm).name
        nccl_name = _NCCL_NAMES.get(name, name)
        if nccl_name not in nccl.algorithms(collective):
            runs = "" if nccl_name == name else f" (it runs NCCL's {nccl_name})"
            raise InputError(f"algorithm {algorithm!r}{runs} contradicts NCCL_ALGO={env['NCCL_ALGO']}"
                             f"{where['NCCL_ALGO']}, which leaves it out for {collective}: name one or the other")
    if protocol != "auto" and "NCCL_PROTO" in env and protocol not in nccl.protocols(collective):
        raise InputError(f"protocol {protocol!r} contradicts NCCL_PROTO={env['NCCL_PROTO']}{where['NCCL_PROTO']}, "
                         f"which leaves it out for {collective}: name one or the other")


def _nccl_pieces(collective: str, algorithm: str, choice: NcclChoice, size_bytes: float, ranks: tuple[str, ...],
                 servers: Mapping[str, Hashable], most: int | None = MAX_PIPELINE_SLICES, heads: int = 0) -> int:
    """The pieces one NCCL channel's data goes in (:func:`~flowsim.collectives.chunks.pipeline_pieces`):
    per step of a ring (one chunk per rank and loop), per tree, NVLS head or CollNet Direct
    head (``heads`` of them); trees, chains and PAT at most ``most`` (None: as many as NCCL's
    chunks)."""
    n_nodes = len(set(servers.values()))
    if algorithm in ("nvls", "nvls_tree", "nvls_sharp"):
        heads = len(ranks) // n_nodes
    elif algorithm != "collnet_direct":
        heads = 1
    tuned = {} if choice.nvls is None else {"nvls_chunk_bytes": choice.nvls.chunk_bytes,
                                            "nvls_tree_max_chunk_bytes": choice.nvls.tree_max_chunk_bytes}
    if algorithm == "nvls_sharp":
        algorithm = "nvls"  # its chunk as NCCL's tuner set it across servers (NcclChoice.nvls)
    chunking = nccl_chunking(collective, algorithm, choice.protocol, int(size_bytes), n_channels=choice.n_channels,
                             n_heads=heads, n_nodes=n_nodes, n_ranks=len(ranks),
                             buffer_bytes=choice.buffers[choice.protocol], **tuned)
    channel_bytes = float(size_bytes) / choice.n_channels
    if algorithm == "ring" and collective in ("all_reduce", "all_gather", "reduce_scatter"):
        return pipeline_pieces(chunking, channel_bytes, len(ranks), MAX_RING_SLICES)
    most = sys.maxsize if most is None else most
    if algorithm == "pat":
        # A PAT channel works through each rank's share chunk by chunk (collectives.h).
        return pipeline_pieces(chunking, channel_bytes, len(ranks), most)
    if chunking.streams:
        return 1  # trees and chains of LL and LL128 forward lines, not chunks (CollectiveCosts.streams)
    if algorithm == "nvls" and n_nodes == 1:
        # One slice is every rank's 2 x (heads + 1) messages for each of its heads' chunks.
        most = max(most, NVLS_MESSAGE_BUDGET // (heads * 2 * (heads + 1)))
    elif algorithm == "nvls_tree":
        # Each server's NVLS messages, and each head's up and down in both trees between servers.
        most = max(most, NVLS_MESSAGE_BUDGET // (n_nodes * heads * 2 * (heads + 1) + 4 * heads * (n_nodes - 1)))
    return pipeline_pieces(chunking, channel_bytes, heads, most)


def _tree_fill(slices: int, ranks: tuple[str, ...], servers: Mapping[str, Hashable]) -> float:
    """How much faster a capped tree's slices must move for the step DAG to take the time of
    NCCL's model.

    The cap is the model's bandwidth, with NCCL's ``treeCorrectionFactor``, which NCCL
    measured for the sizes whose chunks do not fill a tree's pipeline ("trees are not
    perfectly sticking to the model for medium sizes", [NCCL] src/graph/tuning.cc): the
    model's time already counts the pipeline's fill and drain. In the step DAG a slice
    crosses ``d`` hops one after another (:func:`~flowsim.collectives.dag.tree_hops`), so at
    the cap its ``slices`` take ``slices + d - 1`` slice times where the model takes
    ``slices``; the ratio returned takes that back. It is 16 for one slice through 2 servers
    of 8 GPUs (d = 16) and 79/64 for 64 slices."""
    by_server = Counter(servers[rank] for rank in ranks)
    return (slices + tree_hops(len(by_server), max(by_server.values())) - 1) / slices


def alltoallv_spread(topology: Topology, nccl_env: Mapping[str, str] | None) -> float:
    """nccl-tests' :data:`~flowsim.collectives.builders.ALLTOALLV_SPREAD` for an alltoallv
    on ``topology`` under ``nccl_env`` (over the system's own environment); 1, nccl-tests'
    default, where neither sets it. A traffic matrix file is refused: its sizes are not known."""
    env = merged_env(topology, nccl_env)
    if ALLTOALLV_MATRIX_FILE in env:
        raise InputError(f"{ALLTOALLV_MATRIX_FILE}: an alltoallv of a traffic matrix file is not modelled (its "
                         f"per-peer sizes are in the file); flowsim runs the generated pattern ({ALLTOALLV_SPREAD})")
    text = env.get(ALLTOALLV_SPREAD, "1")
    try:
        spread = float(text)
    except ValueError:
        raise InputError(f"{ALLTOALLV_SPREAD}={text!r} is not a number") from None
    if not 0.0 <= spread <= 1.0:
        raise InputError(f"{ALLTOALLV_SPREAD}={text!r}: expected a number in [0, 1]")
    return spread


def _p2p_protocol(peer_bytes: float, channels: int | None) -> str:
    """NCCL's point-to-point protocol for a send of ``peer_bytes``: LL up to
    :data:`P2P_LL_THRESHOLD` bytes per channel."""
    return "ll" if peer_bytes <= P2P_LL_THRESHOLD * (channels or 1) else "simple"


def _nvls_budget_Bps(nvlink: str, ranks: Sequence[str], servers: Mapping[str, Hashable]) -> float:
    """The payload rate a server's NVLS messages into (or out of) its switch share in an
    all-reduce of ``ranks`` (:data:`~flowsim.collectives.costs.NVLS_BUSBW_CEILING_GBPS`,
    docs/model.md "NVLS's shared budget"): the server reduces each of its ``m`` chunks of
    ``S / m`` from ``m`` copies and stores the sum once (``m + 1`` messages in), then gets
    it back and multicasts it (``m + 1`` out), so ``(m + 1) S`` each way; at the ceiling's
    bus bandwidth ``C`` the ``n`` ranks move ``S`` in ``2(n-1) S / (n C)``."""
    n, m = len(ranks), len(ranks) // len(set(servers.values()))
    return (m + 1) * NVLS_BUSBW_CEILING_GBPS[nvlink] * 1e9 * n / (2 * (n - 1))


def _sharp_paths(topology: Topology,
                 by_server: Mapping[Hashable, Sequence[str]]) -> list[dict[Hashable, tuple[str, ...]]]:
    """Per local rank ``j``: each server's path up the network's reduction tree for chunk
    ``j``, from the InfiniBand leaf of its rank ``j``'s NIC to the lowest switch above every
    server's: that leaf where one holds them all (a rail of a scalable unit), else a spine
    cabled to each of their leaves (chunk ``j`` on the ``j``-th of them), else (three tiers)
    the ``j``-th spine of each leaf's pod and a core above those spines. An
    :class:`InputError` where a rank has no InfiniBand NIC or no switch joins the leaves."""
    groups = list(by_server.items())
    leaf_of = sharp_leaves(topology, [rank for _, members in groups for rank in members])
    trees: list[dict[Hashable, tuple[str, ...]]] = []
    for j in range(len(groups[0][1])):
        leaves = {}
        for server, members in groups:
            if members[j] not in leaf_of:
                raise InputError(f"IB SHARP needs every rank's NIC on an HDR, NDR or XDR InfiniBand leaf; "
                                 f"{members[j]!r} leaves its server through none (EFA and RoCE reduce nothing)")
            leaves[server] = leaf_of[members[j]]
        distinct = sorted(set(leaves.values()))
        if len(distinct) == 1:
            trees.append({server: (leaf,) for server, leaf in leaves.items()})  # the leaf is the root
            continue
        above = [sorted(_switches_above(topology, leaf, NodeKind.IB_SPINE), key=_numbered) for leaf in distinct]
        common = sorted(set.intersection(*(set(spines) for spines in above)), key=_numbered)
        if common:
            # The chunks' trees take the spines in turn, spreading a leaf's trees over its cables up.
            trees.append({server: (leaf, common[j % len(common)]) for server, leaf in leaves.items()})
            continue
        # Three tiers: each leaf's pod's spine of plane j (its j-th), and a core above them all.
        plane = j % min(len(spines) for spines in above)
        spine_of = {leaf: spines[plane] for leaf, spines in zip(distinct, above, strict=True)}
        roots = sorted(set.intersection(*(_switches_above(topology, spine, NodeKind.IB_CORE)
                                          for spine in spine_of.values())), key=_numbered)
        if not roots:
            shown = ", ".join(distinct[:3]) + (f" and {len(distinct) - 3} more" if len(distinct) > 3 else "")
            raise InputError(f"IB SHARP: no switch joins the leaves {shown} of local rank {j} (leave "
                             "NCCL_COLLNET_ENABLE unset, or name another algorithm)")
        root = roots[j // len(above[0]) % len(roots)]
        trees.append({server: (leaf, spine_of[leaf], root) for server, leaf in leaves.items()})
    return trees


def _numbered(name: str) -> tuple[int, str]:
    """A sort key that puts ``spine2`` before ``spine10``."""
    return len(name), name


def _switches_above(topology: Topology, switch: str, kind: NodeKind) -> set[str]:
    """The switches of ``kind`` that ``switch`` has a link up to."""
    return {topology.node_names[int(topology.link_dst[link])] for link in topology.links_from(switch)
            if topology.node_kind[topology.link_dst[link]] == kind}


def with_nvls_budget(topology: Topology, workload: Workload, capacity_Bps: float) -> Workload:
    """``workload`` with each NVSwitch's NVLS messages on two shared budgets of
    ``capacity_Bps`` (on the wire): those into the switch (``nvls SWITCH in``) and those out
    of it (``nvls SWITCH out``), :mod:`flowsim.budgets`' ``shared_cap`` tag."""
    switches = [topology.node_names[i] for i in topology.nodes_of_kind(NodeKind.NVSWITCH).tolist()]
    # Tag k of ["", each switch's "in" budget, each one's "out" budget]; worked out per
    # distinct endpoint (flowsim.strings.coded), not per flow (a million on 16 servers).
    tags = ["", *(budget_tag(f"nvls {name} {way}", capacity_Bps) for way in ("in", "out") for name in switches)]
    into = {name: 1 + k for k, name in enumerate(switches)}
    out_of = {name: 1 + len(switches) + k for k, name in enumerate(switches)}
    dst_names, dst_codes = coded(workload.dst)
    src_names, src_codes = coded(workload.src)
    into_dst = np.array([into.get(name, 0) for name in dst_names], dtype=np.int32)[dst_codes]
    out_of_src = np.array([out_of.get(name, 0) for name in src_names], dtype=np.int32)[src_codes]
    # Into a switch, else out of one, else none; a zero-byte flow draws on no budget.
    tag = np.where(workload.size_bytes <= 0, 0, np.where(into_dst > 0, into_dst, out_of_src))
    column = CodedStrings.in_order_of_appearance(tags, tag)
    return dataclasses.replace(workload, tags={**workload.tags, SHARED_CAP_TAG: column})


def _server_pairs(topology: Topology, workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Masks of ``workload``'s flows between nodes of different servers of ``topology``, and
    between two nodes of one server (a flow from or to a node outside every server in neither)."""
    def server_of(column: Sequence[str]) -> np.ndarray:
        names, codes = coded(column)
        return topology.node_server[topology.node_ids(list(names))][codes]

    src, dst = server_of(workload.src), server_of(workload.dst)
    known = (src >= 0) & (dst >= 0)
    return known & (src != dst), known & (src == dst)
