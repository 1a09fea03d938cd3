"""NCCL's choice of algorithm, protocol, channels and threads, from NCCL's own cost model.

NCCL picks, for each collective call, the (algorithm, protocol) pair its tuning model
predicts fastest, then how many channels (one CTA each) and threads run it. flowsim makes
the same choice from the same rules, on the system a topology describes, and then simulates
that choice with flows (:mod:`flowsim.collectives.placement`), so contention and topology
still come from the flows.

The rules, each with its file in NCCL's sources (tag and constants per version in
:data:`NCCL_VERSIONS`; docs/hardware.md §7 lists them). Where NCCL changed a rule between
the versions flowsim has, the code switches on the version's release at that rule and names
the tag where it changed (docs/hardware.md §7.3 tables them); the text below is 2.30.7's:

Topology search (``src/graph/search.cc`` ``ncclTopoCompute``)
    For each pattern (ring, tree, NVLS) NCCL searches for as many channels as the links
    hold at a per-channel speed taken from a fixed array (``speedArrayIntra`` /
    ``speedArrayInter`` and their SM90 and SM100 variants): pass 1 walks the array down
    from the fastest speed the paths allow until channels fit; rings and trees then
    duplicate their channels when the speed is high (``ncclTopoDupChannels``); pass 2
    raises the speed again while the channels still fit (both bandwidths for rings, the
    inter-node one for NVLS, the intra-node one for trees). flowsim replays the passes on
    the topology's own links instead of NCCL's path search: a channel loads each link its
    ring (or its NVLS fan-in and fan-out) crosses by its speed, the inter-node one on the
    paths between GPUs and NICs and the intra-node one between GPUs, with each link
    counted at NCCL's bandwidth for it (``bwIntra`` per NVLink, PCIe and inter-socket links
    as NCCL's ``topo.h`` rates, a NIC at its line rate), and channels are added while every
    link holds them. The communicator then runs twice the smaller of the ring and tree
    channel counts (``src/graph/connect.cc``), doubled again on Hopper and later across
    servers when the ring's speed exceeds 45 GB/s and fewer than 16 channels remain.
Cost model (``src/graph/tuning.cc`` ``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``)
    Per collective, algorithm and protocol: a bus bandwidth (channels x speed, with the
    protocol's caps ``llMaxBws``, ``perChMaxRingLL128Bws``, ``perChMaxTreeBws``, ... and the
    NVLS efficiency), converted to an algorithm bandwidth, and a latency (``baseLat`` plus
    ``hwLat`` per step, intra- and inter-node). Time = latency + bytes / bandwidth, with the
    tree correction factors by size and the ring plateau factor.
Channels and threads (``src/enqueue.cc`` ``topoGetAlgoInfo``)
    For rings and trees, channels drop one at a time, and then threads halve, while
    ``bytes < channels x threads x threshold`` (``NCCL_*_THREAD_THRESHOLD`` in
    ``src/include/comm.h``; the ring LL threshold is multiplied by the rank count). NVLS
    runs ``nvlsChannels`` channels (``src/transport/nvls.cc``).
Reduction and data type (``src/include/device.h`` ``ncclNvlsSupported``, ``src/enqueue.cc``
``hostToDevRedOp`` and ``updateCollCostTable``; :func:`nvls_refusal`)
    NVLS and NVLSTree reduce in the NVSwitch, which has sum and min/max on 32- and 64-bit
    integers, half and bfloat16, and sum alone on float and double: no 8-bit type, no
    product, and no average on floating types (NCCL runs it as a sum of pre-multiplied
    inputs). All-gather reduces nothing and takes NVLS whatever its type from v2.22.3-1.
    PAT has no reduce-scatter that averages or pre-multiplies.
Point-to-point channels (``src/graph/paths.cc``, ``src/enqueue.cc``; :func:`p2p_channels`)
    Sends and all-to-all are no tuned collective: each peer gets a few of the
    communicator's channels, by what the pair's path asks (NVLinks, or the NIC's bandwidth
    at ``NCCL_P2P_PER_CHANNEL_NET_BW`` a channel) and how many peers share them, and a send
    takes more of them as its size grows.

What flowsim takes from the choice: the algorithm, the protocol (its latencies and wire
efficiency), the channel count, and each channel's share of the model's bus bandwidth as a
rate cap on the channel's messages, so that a collective NCCL runs on few channels cannot
use all the links; for a send, its channels, each held to :data:`P2P_PER_CHANNEL_NET_GBPS`
across servers and to :data:`P2P_NVLINK_BYTES_PER_CYCLE` at the SM clock over NVLink.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowsim.collectives.chunks import MIN_BUFFER_BYTES, NCCL_BUFFER_BYTES, NCCL_STEPS, NVLS_CHUNK_BYTES
from flowsim.collectives.constants import (
    DEFAULT_NCCL_VERSION,
    NCCL_ALGORITHMS,
    NCCL_PROTOCOLS,
    NcclConstants,
    constants_of,
)
from flowsim.collectives.costs import COLLNET_ARITY_US
from flowsim.collectives.dag import ranks_by_server
from flowsim.collectives.rings import mesh_link_counts, mesh_rings, mesh_server_rings, rank_servers, rotated_rings
from flowsim.errors import InputError
from flowsim.hardware import LinkTier, gpu_sm_clock_GHz, link_technology
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.topology import NodeKind, Topology

__all__ = [
    "DATA_TYPES",
    "DTYPE_BYTES",
    "FP8_TYPES",
    "NCCL_COLLECTIVES",
    "COLLNET_ALGORITHMS",
    "NCCL_ENV_KEYS",
    "REDOPS",
    "NoNcclChoice",
    "NcclChoice",
    "NcclEnv",
    "NcclGraph",
    "NcclSystem",
    "NvlsTuning",
    "P2P_NVLINK_BYTES_PER_CYCLE",
    "P2P_PER_CHANNEL_NET_GBPS",
    "PATH_TYPES",
    "P2pChannels",
    "GDR_ENV_KEYS",
    "check_reduction",
    "channel_env_notes",
    "check_routed_env",
    "collnet_heads",
    "communicator_channels",
    "describe_system",
    "fp8_refusal",
    "half_block_nvlink_GBps",
    "device_redop",
    "max_channels",
    "merged_env",
    "nccl_choice",
    "nvls_refusal",
    "nvls_tuning",
    "version_refusal",
    "p2p_channels",
    "ring_net_overhead_us",
    "gdr_env_key",
    "gdr_path",
    "gpudirect_rdma",
    "nic_path_types",
]

# Names NCCL_ALGO and NCCL_PROTO accept ([NCCL] src/enqueue.cc ncclAlgoStr, ncclProtoStr).
_ALGO_NAMES = {"tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
               "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
_PROTO_NAMES = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
# NCCL's function names, as NCCL_ALGO and NCCL_PROTO prefixes take them, for flowsim's collectives.
_FUNCTION_NAMES = {"broadcast": "broadcast", "reduce": "reduce", "allgather": "all_gather",
                   "reducescatter": "reduce_scatter", "allreduce": "all_reduce", "sendrecv": "send",
                   "alltoall": "all_to_all"}
_COMPCAPS = ("volta", "ampere", "hopper", "blackwell")


# src/include/device.h and comm.h.
_WARP = 32
_MAX_NTHREADS = 640
_SIMPLE_MAX_NTHREADS = 512
_LL_MAX_NTHREADS = 512
_LL128_MAX_NTHREADS = 640
_THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
# CollNet Direct's and Chain's Simple threshold ([NCCL] src/graph/tuning.cc ncclTopoTuneModel).
_COLLNET_THREAD_THRESHOLD = 512
_PCI_BW = 12.0  # src/graph/topo.h PCI_BW (Gen3 x16): below it rings get 256 Simple threads
# Compute capability by the NVLink generation of a GPU's links ([NCCL] topo.h SMxx_NVLINK_BW).
_NVLINK_SM = {"nvlink1": 60, "nvlink2": 70, "nvlink3": 80, "nvlink3_ga102": 86, "nvlink4": 90, "nvlink5": 100}
_GENERATION_SM = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}


class NoNcclChoice(InputError):
    """NCCL's model enables no algorithm and protocol for the call (as NCCL's ``No algorithm/
    protocol available`` warning)."""


@dataclass(frozen=True)
class NcclSystem:
    """What NCCL's tuner sees of a set of ranks on a topology.

    Attributes
    ----------
    n_ranks, n_nodes : int
        Ranks and servers (NCCL's nodes).
    sm : int
        The GPUs' lowest compute capability, times ten (60 ... 120): ``gpu_generation``'s, else
        their models', else their NVLink generation's. :attr:`compcap` is the row of NCCL's tables.
    intra : str
        ``"nvlink"`` when every rank has an NVLink, else ``"pci"``.
    nvswitch : bool
        Every rank links to an NVSwitch (NVLS needs Hopper or later as well).
    cpu_vendor : str
        ``"intel"``, ``"amd"`` or ``"other"``, from the servers' inter-socket links; picks the
        multi-node ``llMaxBws`` row.
    net_latency_us : float
        What the network plugin reports as its latency (``graph->latencyInter``, the largest of
        the ranks' servers' :attr:`~flowsim.topology.Topology.server_net_latency_s`): NCCL adds
        it to every inter-server step, twice with Simple (its flush), [NCCL] tuning.cc.
    net_GBps : float
        ``comm->minNetBw`` ([NCCL] src/graph/topo.cc ``ncclTopoGetMinNetBw``): the slowest
        path from a GPU of the first server to its NIC (GB/s); 0 on one server.
    nic_near : bool
        Those paths stay under PCIe switches (``PATH_PXB`` or nearer, no CPU on the way).
    nic_pxn : bool
        Some GPU of that server has such a path: the others can reach a NIC through it over
        NVLink (NCCL's PXN, ``PATH_PXN``) rather than through the CPU.
    gpudirect : bool
        The GPUs' network traffic moves with GPUDirect RDMA (:func:`gpudirect_rdma`); False
        where it is staged through host memory, which NCCL's paths then cross.
    sharp : bool
        The ranks span servers and every rank leaves its server through a NIC cabled to an
        InfiniBand switch that reduces in the network (SHARP v2 on HDR, v3 on NDR, v4 on XDR,
        docs/hardware.md §4.2): what NCCL's CollNet needs of the fabric, with
        ``NCCL_COLLNET_ENABLE=1`` and the SHARP plugin.
    sharp_v3 : bool
        Those switches are NDR or XDR (SHARP v3 or later), which reduce bfloat16, int8 and
        uint8 too (:data:`SHARP_TYPES`).
    """

    n_ranks: int
    n_nodes: int
    sm: int
    intra: str
    nvswitch: bool
    cpu_vendor: str
    net_latency_us: float = 0.0
    net_GBps: float = 0.0
    nic_near: bool = True
    nic_pxn: bool = True
    sharp: bool = False
    gpudirect: bool = True
    sharp_v3: bool = False

    @property
    def compcap(self) -> str:
        """The row of NCCL's tables (``compCapIndex``)."""
        return "blackwell" if self.sm >= 100 else "hopper" if self.sm >= 90 else "ampere" if self.sm >= 80 else "volta"

    @property
    def ppn(self) -> float:
        """Ranks per node, as NCCL computes it (a float)."""
        return self.n_ranks / self.n_nodes

    @property
    def compcap_index(self) -> int:
        return _COMPCAPS.index(self.compcap)

    @property
    def node_index(self) -> int:
        """0, 1 or 2: one node, two nodes, more (NCCL's ``index2``)."""
        return self.n_nodes - 1 if self.n_nodes <= 2 else 2


@dataclass(frozen=True)
class NcclGraph:
    """One pattern's search result: channels and per-channel speeds (GB/s); ``fallback`` where
    no channel fit even the slowest speed of the search's array, and NCCL runs one channel in
    rank order at a placeholder 0.1 GB/s (:data:`FALLBACK_GBPS`). CollNet Direct's graph
    also counts its heads (``collNetHeadsNum``: the GPUs its channels start on, one a NIC)."""

    n_channels: int
    bw_intra: float
    bw_inter: float
    fallback: bool = False
    heads: int = 0


#: The speed NCCL gives a pattern its search found no channel for, with one channel in rank
#: order ("Could not find a path for pattern %d, falling back to simple order", [NCCL]
#: v2.30.7-1 src/graph/search.cc ncclTopoCompute): a placeholder its tuner's model divides by,
#: not a rate the channel moves at. A PCIe box without peer-to-peer whose GPUs share switch
#: uplinks comes to it on Blackwell, whose slowest intra-server search speed is 18 GB/s.
FALLBACK_GBPS = 0.1


@dataclass(frozen=True)
class NcclChoice:
    """What NCCL runs for one call, and what its model predicts.

    Attributes
    ----------
    algorithm, protocol : str
        NCCL's names (:data:`NCCL_ALGORITHMS`, ``"ll"``, ``"ll128"``, ``"simple"``).
    n_channels : int
        Channels (CTAs) the call runs on, after the shrink for small sizes.
    max_channels : int
        Channels the communicator has for this algorithm.
    model_channels : int
        The channels the model's bus bandwidth is shared over: the communicator's without
        the user's ``NCCL_MIN/MAX_NCHANNELS`` and ``NCCL_MIN/MAX_CTAS``, which change how many
        channels run but not the bandwidth NCCL's model gives (``graphs[a]->nChannels * bw``,
        [NCCL] v2.30.7-1 src/graph/tuning.cc, is the topology search's); ``max_channels``
        for NVLS.
    n_threads : int
        Threads per channel.
    model_time_us : float
        NCCL's predicted time for the call.
    bus_bandwidth_GBps : float
        The model's bus bandwidth for this algorithm and protocol (before conversion to an
        algorithm bandwidth): what ``max_channels`` channels move together. For NVLS before
        NCCL 2.28.3, whose model converts with a flat 5/6, the algorithm bandwidth times
        ``nsteps / n`` (nccl-tests' busbw), as the ring's conversion counts it.
    table : mapping of (algorithm, protocol) to float
        The model's time (us) for every enabled pair, as NCCL_DEBUG_SUBSYS=TUNING prints it.
    system : NcclSystem
    version : str
    buffers : mapping of str to int
        Each protocol's per-connection buffer in bytes (:meth:`NcclEnv.buffers`), which sets
        its slots and chunks (:func:`~flowsim.collectives.chunks.nccl_chunking`).
    model_latency_us : float
        The latency term of ``model_time_us`` (``baseLat`` and ``hwLat`` per step, with the
        ring's factor where NCCL applies it): what of the time does not depend on the size.
    fallback : bool
        The algorithm's graph is NCCL's fallback (:class:`NcclGraph`): its model bandwidth is
        a placeholder the choice follows, not a limit on what the channel moves.
    net_overhead_ns : int or None
        ``NCCL_NET_OVERHEAD`` where the environment sets it (:func:`ring_net_overhead_us`).
    """

    algorithm: str
    protocol: str
    n_channels: int
    max_channels: int
    n_threads: int
    model_time_us: float
    bus_bandwidth_GBps: float
    table: Mapping[tuple[str, str], float] = field(repr=False)
    system: NcclSystem = field(repr=False)
    version: str = DEFAULT_NCCL_VERSION
    model_latency_us: float = 0.0
    nvls: NvlsTuning | None = None
    buffers: Mapping[str, int] = field(default_factory=lambda: dict(NCCL_BUFFER_BYTES), repr=False)
    fallback: bool = False
    net_overhead_ns: int | None = None
    model_channels: int = 0

    def __post_init__(self) -> None:
        if not self.model_channels:
            object.__setattr__(self, "model_channels", self.max_channels)

    def channel_bandwidth_Bps(self, channels: int | None = None) -> float:
        """One channel's share of the model's bus bandwidth (B/s of payload) on a call of
        ``channels`` channels (default :attr:`n_channels`): over :attr:`model_channels`, or
        over the call's where it runs on more (``NCCL_MIN_NCHANNELS``). A call on fewer
        channels, shrunk for its size or bounded by ``NCCL_MAX_NCHANNELS`` or the caller,
        moves their share; one on more does not exceed the model."""
        ran = self.n_channels if channels is None else channels
        return self.bus_bandwidth_GBps * 1e9 / max(self.model_channels, ran)


# --- the system ----------------------------------------------------------------------------


def _nccl_link_bw(topology: Topology, link: int, constants: NcclConstants) -> float:
    """NCCL's bandwidth (GB/s) of one link: NCCL's model rate per link of its technology
    (NVLink as the version's ``topo.h`` gives it; PCIe, inter-socket: flowsim's "effective"
    figures are those) times the links it stands for, and a NIC's line rate (NCCL's net
    speed). A technology's own NCCL figure (``nccl_GBps``, e.g. ``SRP_QPI_BW`` for a UPI 2.0
    link) replaces its effective one. Host memory bounds nothing: NCCL's topology graph has
    no memory node, so a path staged through it counts its PCIe and inter-socket links only
    (docs/hardware.md §3.3)."""
    src, dst = int(topology.link_src[link]), int(topology.link_dst[link])
    if NodeKind.HOST_MEMORY in (topology.node_kind[src], topology.node_kind[dst]):
        return math.inf
    name = topology.link_technology[link]
    technology = link_technology(name)
    capacity = float(topology.link_capacity_Bps[link])
    nominal, effective = technology.nominal.rate_Bps, technology.effective.rate_Bps
    if technology.tier == LinkTier.SCALE_OUT:
        # NCCL's net speed is the port's line rate (props.speed, in Mb/s), whichever figure
        # the topology's links were built with.
        per_link = nominal / 1e9
    elif name in constants.nvlink_bw:
        per_link = constants.nvlink_bw[name]
    else:
        per_link = technology.nccl_GBps if technology.nccl_GBps is not None else effective / 1e9
    for figure in (nominal, effective):
        count = capacity / figure
        if abs(count - round(count)) < 1e-6 * max(1.0, count):
            return round(count) * per_link
    return capacity / 1e9


def _port_split(topology: Topology, link: int, constants: NcclConstants) -> int:
    """The network devices NCCL makes of the NIC a network link leaves (or enters): one per
    port before 2.20, one for the NIC from v2.20.3-1, whose ``NCCL_IB_MERGE_NICS`` (default 1)
    merges the ports of a NIC (same PCI path, GUID and link layer) into one device at their
    summed speed ([NCCL] src/transport/net_ib.cc ``ncclIbFindMatchingDev``)."""
    if _since(constants, (2, 20, 3)):
        return 1
    server = max(int(topology.node_server[topology.link_src[link]]), int(topology.node_server[topology.link_dst[link]]))
    return int(topology.server_nic_ports[server]) if server >= 0 else 1


def _cpu_vendor(topology: Topology, servers: set[int]) -> str:
    src, dst = topology.link_src, topology.link_dst
    between_cpus = (topology.node_kind[src] == NodeKind.CPU) & (topology.node_kind[dst] == NodeKind.CPU)
    ours = between_cpus & np.isin(topology.node_server[src], list(servers))
    vendors = set()
    for link in np.flatnonzero(ours).tolist():
        technology = topology.link_technology[link]
        vendors.add("amd" if technology.startswith("xgmi") else "intel" if technology[:3] in ("upi", "qpi")
                    else "other")
    if vendors == {"intel"}:
        return "intel"
    if "amd" in vendors:
        return "amd"
    return "other"


def describe_system(
    topology: Topology, ranks: Sequence[str], *, gpu_generation: str | None = None
) -> NcclSystem:
    """What NCCL's tuner sees of ``ranks`` on ``topology`` (see :class:`NcclSystem`).

    ``gpu_generation`` (``"volta"``, ``"ampere"``, ``"hopper"``, ``"blackwell"``) overrides
    the GPUs' compute capability, which is their model's where the topology knows it
    (:attr:`~flowsim.topology.Topology.server_gpu_sm`), else their NVLinks' generation's; GPUs
    of unknown models on PCIe only count as Ampere.
    """
    servers = rank_servers(topology, ranks)
    server_ids = {int(topology.node_server[topology.node_id(r)]) for r in ranks}
    sms: set[int] = set()
    nvswitch = True
    intra = "nvlink"
    for rank in ranks:
        nvlinks = [int(link) for link in topology.links_from(rank) if topology.link_tier[link] == LinkTier.SCALE_UP]
        if not nvlinks:
            intra = "pci"
            nvswitch = False
            continue
        sms.update(_NVLINK_SM[topology.link_technology[link]] for link in nvlinks
                   if topology.link_technology[link] in _NVLINK_SM)
        if not any(topology.node_kind[topology.link_dst[link]] == NodeKind.NVSWITCH for link in nvlinks):
            nvswitch = False
    if gpu_generation is not None:
        if gpu_generation not in _GENERATION_SM:
            raise InputError(f"unknown GPU generation {gpu_generation!r}; valid ones: {', '.join(_GENERATION_SM)}")
        sm = _GENERATION_SM[gpu_generation]
    elif all(topology.server_gpu_sm[s] > 0 for s in server_ids):
        # The GPU models' own compute capability, as NCCL reads it (cudaCompCap): an RTX 4090
        # is 89 (Ampere's rows, compCapIndex of [NCCL] v2.30.7 src/graph/tuning.cc), an RTX
        # 5090 120 (Blackwell's).
        sm = min(int(topology.server_gpu_sm[s]) for s in server_ids)
    elif sms:
        sm = min(sms)
    else:
        # GPUs on PCIe only of an unknown model: Ampere's rows, which differ from the others
        # here only in llMaxBws (39-282 GB/s), above any PCIe ring.
        sm = _GENERATION_SM["ampere"]
    net_latency_us = max(float(topology.server_net_latency_s[s]) for s in server_ids) * 1e6
    cables = _sharp_cables(topology, ranks)
    sharp = len(server_ids) > 1 and len(cables) == len(ranks)
    sharp_v3 = sharp and all(technology in SHARP_V3_TECHNOLOGIES for _, technology in cables.values())
    return NcclSystem(len(ranks), len(set(servers.values())), sm, intra, nvswitch,
                      _cpu_vendor(topology, server_ids), net_latency_us, sharp=sharp, sharp_v3=sharp_v3)


#: InfiniBand generations whose switches reduce in the network (docs/hardware.md §4.2).
SHARP_TECHNOLOGIES = ("ib_hdr", "ib_ndr", "ib_xdr")
#: Those of SHARP v3 or later (NDR, XDR), which reduce bfloat16, int8 and uint8 too.
SHARP_V3_TECHNOLOGIES = ("ib_ndr", "ib_xdr")


def sharp_leaves(topology: Topology, ranks: Sequence[str]) -> dict[str, str]:
    """The leaf switch each of ``ranks`` reaches through the NIC it leaves its server by, over
    an InfiniBand generation that reduces in the network (:data:`SHARP_TECHNOLOGIES`); ranks
    without one (no NIC, an older InfiniBand, or Ethernet: RoCE, EFA) are left out. One pass
    over the links for all the ranks."""
    return {rank: leaf for rank, (leaf, _) in _sharp_cables(topology, ranks).items()}


def _sharp_cables(topology: Topology, ranks: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each of ``ranks`` with a NIC cabled to a SHARP leaf: that leaf and the cable's technology."""
    kind = topology.node_kind
    cables = np.flatnonzero((kind[topology.link_src] == NodeKind.NIC) & (kind[topology.link_dst] == NodeKind.IB_LEAF)
                            & np.isin(np.asarray(topology.link_technology), SHARP_TECHNOLOGIES))
    cable_of: dict[int, int] = {}
    for link in cables.tolist():  # the first cable of a NIC, by link id
        cable_of.setdefault(int(topology.link_src[link]), link)
    nics = topology.node_nic[topology.node_ids(list(ranks))].tolist()
    return {rank: (topology.node_names[int(topology.link_dst[cable_of[nic]])],
                   topology.link_technology[cable_of[nic]])
            for rank, nic in zip(ranks, nics, strict=True) if nic in cable_of}


# --- the topology search -------------------------------------------------------------------


class _Loads:
    """Per-link load of one channel of a pattern, and the links' NCCL bandwidths."""

    def __init__(self, topology: Topology, router: Router, pairs: list[tuple[str, str]], weights: list[float],
                 constants: NcclConstants, gpudirect: bool = True, intel: bool = False):
        sources, destinations = [s for s, _ in pairs], [d for _, d in pairs]
        routes = router.route(sources, destinations, method="shortest", gpudirect=gpudirect)
        src_ids, dst_ids = topology.node_ids(sources), topology.node_ids(destinations)
        indices = routes.flow_link_indices
        flow_of = np.repeat(np.arange(routes.n_flows), np.diff(routes.flow_link_indptr))
        per_link = np.asarray(weights, dtype=np.float64)[flow_of]
        kinds = topology.node_kind
        if intel:
            # A GPU's path through one Intel CPU's root complex (PATH_PHB) takes 6/5 of its
            # speed on each PCIe link ([NCCL] src/graph/search.cc followPath,
            # INTEL_P2P_OVERHEAD in src/graph/topo.h: Intel CPUs turn GPU P2P traffic into
            # 64-byte TLPs). A path staged through host memory passes its CPU twice.
            ends = topology.link_dst[indices]
            at_cpu = kinds[ends] == NodeKind.CPU
            visits = np.unique(np.stack([flow_of[at_cpu], ends[at_cpu]]), axis=1)
            one_cpu = np.bincount(visits[0], minlength=routes.n_flows) == 1
            from_gpu = kinds[src_ids] == NodeKind.GPU
            used_links = np.unique(indices)
            pcie = np.zeros(topology.n_links, dtype=bool)
            pcie[used_links] = [topology.link_technology[link].startswith("pcie") for link in used_links.tolist()]
            per_link = np.where((one_cpu & from_gpu)[flow_of] & pcie[indices], per_link * 6 / 5, per_link)
        # A path between servers (GPU to NIC, NIC to GPU) takes the channel's inter-node speed
        # on every link it crosses, a path between two GPUs the intra-node one ([NCCL]
        # src/graph/search.cc ncclTopoFollowPath: bwIntra only where both ends are GPUs or
        # NVSwitches), so a tree's GPUs may talk faster than its PCIe links to the NICs carry.
        server = topology.node_server
        across = (server[src_ids] != server[dst_ids])[flow_of]
        load_intra = np.bincount(indices, weights=np.where(across, 0.0, per_link), minlength=topology.n_links)
        load_inter = np.bincount(indices, weights=np.where(across, per_link, 0.0), minlength=topology.n_links)
        # NCCL's search sees a server's links and its NICs' line rate, not the fabric beyond
        # them: links between two switches outside the servers do not bound its channels.
        in_server = (server[topology.link_src] >= 0) | (server[topology.link_dst] >= 0)
        used = np.flatnonzero((load_intra + load_inter > 0) & in_server)
        self.load_intra = load_intra[used]
        self.load_inter = load_inter[used]
        # A link's NCCL bandwidth turns on its technology, capacity and ends' kinds alone:
        # worked out once for each such kind of link (a server's links are a few kinds).
        kinds = topology.node_kind
        by_kind: dict[tuple[str, float, int, int], float] = {}
        bw = []
        for link in used.tolist():
            key = (topology.link_technology[link], float(topology.link_capacity_Bps[link]),
                   int(kinds[topology.link_src[link]]), int(kinds[topology.link_dst[link]]))
            if key not in by_kind:
                by_kind[key] = _nccl_link_bw(topology, link, constants)
            bw.append(by_kind[key])
        self.bw = np.array(bw, dtype=np.float64)
        self.inter = topology.link_tier[used] == int(LinkTier.SCALE_OUT)
        # Before 2.20 each port of a NIC is a network device of its own (_port_split).
        self.ports = np.array([_port_split(topology, link, constants) if inter else 1
                               for link, inter in zip(used.tolist(), self.inter.tolist(), strict=True)],
                              dtype=np.float64)

    def channels(self, bw_intra: float, bw_inter: float, most: int) -> int:
        """How many channels at these speeds every link holds (at most ``most``).

        A channel leaves a server through one NIC and takes its whole speed from that NIC's
        line rate (NCCL's search subtracts it from the ``LINK_NET`` link, [NCCL]
        src/graph/search.cc ``ncclTopoFollowPath``), so a NIC holds a whole number of
        channels: four 12.5 GB/s NICs hold 4 channels at 10 GB/s, not 5 (and a NIC of two ports
        that NCCL takes apart, each port a whole number). Links inside the
        server are averaged over the rings that cross them, each path at its own speed:
        ``bw_inter`` between a GPU and a NIC, ``bw_intra`` between two GPUs."""
        net = self.ports * np.floor(self.bw / self.ports / bw_inter + 1e-9) / np.where(self.inter, self.load_inter, 1.0)
        demand = self.load_intra * bw_intra + self.load_inter * bw_inter
        fit = np.floor(np.where(self.inter, net, self.bw / demand) + 1e-9)
        return int(min(most, fit.min())) if fit.size else most


def _search(
    loads: _Loads | _DirectLoads, speeds: tuple[float, ...], *, pattern: str, min_channels: int, max_channels: int,
    max_bw: float, total_bw: float, sm: int,
) -> NcclGraph:
    """ncclTopoCompute's two passes (see the module docstring) over the speed array."""
    index = 0
    while index < len(speeds) - 1 and (speeds[index] > max_bw or speeds[index] * min_channels > total_bw):
        index += 1
    best = NcclGraph(0, 0.0, 0.0)
    # Pass 1: the fastest speed at which channels fit; keep going down while a slower speed
    # is more than 0.49 of the best one, and keep a later result only when it moves more.
    while True:
        s = speeds[index]
        n = loads.channels(s, s, max_channels)
        # ncclTopoCompareGraphs ([NCCL] src/graph/search.cc): more channels at any speed for
        # NVLS ("NVLS channels correspond to GPUs pulling from NVLS. So the more the better").
        if n >= min_channels and (n * s > best.n_channels * best.bw_intra
                                  or pattern == "nvls" and n > best.n_channels):
            best = NcclGraph(n, s, s)
        if best.n_channels and (best.n_channels == max_channels or best.n_channels * best.bw_inter >= total_bw):
            break
        if index < len(speeds) - 1 and (best.n_channels == 0 or speeds[index + 1] / best.bw_inter > .49):
            index += 1
            continue
        break
    if best.n_channels == 0:
        # NVLS has no fallback: NCCL leaves it without channels, so it is not run.
        return best if pattern == "nvls" else NcclGraph(1, FALLBACK_GBPS, FALLBACK_GBPS, fallback=True)
    # ncclTopoDupChannels: rings and trees at high speed run twice the channels at half speed;
    # not above compute capability 8.0 (Ada and later too) below 50 GB/s on more than 4 channels.
    if pattern != "nvls" and best.bw_intra >= 25.0 and not (
        sm > 80 and best.bw_intra < 50.0 and best.n_channels > 4
    ):
        dup = min(best.n_channels * 2, max_channels)
        factor = math.ceil(dup / best.n_channels)
        best = NcclGraph(dup, best.bw_intra / factor, best.bw_inter / factor)
    # Pass 2: raise the speed while the same channels still fit.
    index = next((i for i, s in enumerate(speeds) if s <= best.bw_inter), len(speeds) - 1)
    while index > 0:
        faster = speeds[index - 1]
        if pattern == "ring":
            trial = NcclGraph(best.n_channels, faster, faster)
        elif pattern == "nvls":
            if best.bw_inter >= best.bw_intra * 2:
                break
            trial = NcclGraph(best.n_channels, best.bw_intra, faster)
        else:
            if best.bw_intra >= best.bw_inter * 2:
                break
            trial = NcclGraph(best.n_channels, faster, best.bw_inter)
        if loads.channels(trial.bw_intra, trial.bw_inter, max_channels) < best.n_channels:
            break
        best = trial
        index -= 1
    return best


def _path_bandwidths(topology: Topology, router: Router, pairs: list[tuple[str, str]],
                     constants: NcclConstants) -> list[float]:
    """NCCL's bandwidth of each pair's path: its slowest link (``path->bw``)."""
    routes = router.route([s for s, _ in pairs], [d for _, d in pairs], method="shortest")
    return _route_bandwidths(topology, routes, constants)


def _route_bandwidths(topology: Topology, routes: Routes, constants: NcclConstants) -> list[float]:
    """NCCL's bandwidth of each route: its slowest link."""
    return [
        min(_nccl_link_bw(topology, int(link), constants) for link in routes.route(i).tolist())
        for i in range(routes.n_flows)
    ]


def _graphs(topology: Topology, ranks: Sequence[str], system: NcclSystem, constants: NcclConstants,
            router: Router, gpudirect: bool = True) -> dict[str, NcclGraph]:
    """The ring, tree and (where NVLS runs) NVLS graphs of ``ranks``; without ``gpudirect``
    the paths between GPUs and NICs go through host memory, as NCCL's do without GPUDirect
    RDMA ([NCCL] src/graph/paths.cc ``ncclTopoComputePaths``: ``addInterStep`` through the
    GPU's CPU)."""
    servers = rank_servers(topology, ranks)
    inter = system.n_nodes > 1
    speeds = (constants.speeds_inter if inter else constants.speeds_intra)[system.compcap]
    groups = ranks_by_server(ranks, servers)
    # A ring channel's load, averaged over the rings NCCL's channels follow: on a mesh of
    # direct NVLinks (the DGX-1) the rings the mesh holds; across servers one rotation per
    # local rank (each enters and leaves every server through another rail); else one ring.
    orders = []
    if not system.nvswitch and inter:
        orders = mesh_server_rings(topology, ranks, servers)
    elif not system.nvswitch:
        counts = mesh_link_counts(topology, ranks)
        orders = mesh_rings(ranks, counts) if counts.any() else []
    if not orders:
        orders = rotated_rings(ranks, min(len(g) for g in groups.values()) if inter else 1, servers)
    ring_pairs, ring_weights = [], []
    for order in orders:
        for i, src in enumerate(order):
            ring_pairs.append((src, order[(i + 1) % len(order)]))
            ring_weights.append(1.0 / len(orders))
    intel = system.cpu_vendor == "intel"
    ring_loads = _Loads(topology, router, ring_pairs, ring_weights, constants, gpudirect, intel)
    gpu0 = ranks[0]
    first_group = groups[servers[gpu0]]
    # system->maxBw (src/graph/search.cc ncclTopoSearchInit): across servers the paths from
    # the GPUs to their NICs (the slowest of them here; NCCL takes the fastest, the same on
    # servers whose GPUs each have a NIC path alike), inside one the fastest to another GPU.
    if inter:
        max_bw = _nic_paths(topology, router, first_group, constants, gpudirect)[0]
    elif len(first_group) > 1:
        max_bw = max(_path_bandwidths(topology, router, [(gpu0, g) for g in first_group[1:]], constants))
    else:
        max_bw = 0.0
    own = [int(link) for link in topology.links_from(gpu0)]
    nvlink_bw = sum(_nccl_link_bw(topology, link, constants) for link in own
                    if topology.link_tier[link] == LinkTier.SCALE_UP)
    pci_bw = max((_nccl_link_bw(topology, link, constants) for link in own
                  if topology.link_tier[link] == LinkTier.HOST),
                 default=0.0)
    total_bw = max(nvlink_bw, pci_bw)
    ndevs = len(first_group)
    tree_total = total_bw * ndevs / (ndevs - 1) if ndevs > 1 else total_bw
    ring = _search(ring_loads, speeds, pattern="ring", min_channels=1,
                   max_channels=max_channels(constants.version) // 2, max_bw=max_bw, total_bw=total_bw, sm=system.sm)
    tree = _search(ring_loads, speeds, pattern="tree", min_channels=ring.n_channels,
                   max_channels=ring.n_channels, max_bw=max_bw, total_bw=tree_total, sm=system.sm)
    graphs = {"ring": ring, "tree": tree}
    if system.nvswitch and system.compcap in ("hopper", "blackwell"):
        switch_pairs, switch_weights = [], []
        heads = min(32, len(first_group))
        for rank in ranks:
            links = topology.links_from(rank)
            to_switch = [int(link) for link in links
                         if topology.node_kind[topology.link_dst[link]] == NodeKind.NVSWITCH]
            switch = topology.node_names[int(topology.link_dst[to_switch[0]])]
            share = 1.0 + 1.0 / len(groups[servers[rank]])
            switch_pairs += [(rank, switch), (switch, rank)]
            switch_weights += [share, share]
            if inter:
                switch_pairs.append((rank, topology.node_names[int(topology.node_nic[topology.node_id(rank)])]))
                switch_weights.append(1.0 / len(groups[servers[rank]]))
        nvls_loads = _Loads(topology, router, switch_pairs, switch_weights, constants, gpudirect, intel)
        graphs["nvls"] = _search(nvls_loads, speeds, pattern="nvls", min_channels=1 if inter else heads,
                                 max_channels=heads, max_bw=max_bw, total_bw=tree_total, sm=system.sm)
    if inter and system.sharp and system.nvswitch:
        n_heads = len(collnet_heads(topology, first_group))
        direct = _DirectLoads(n_heads, len(first_group), nvlink_bw, max_bw)
        graphs["collnet_direct"] = dataclasses.replace(
            _search(direct, speeds, pattern="collnet_direct", min_channels=1,
                    max_channels=min(COLLNET_MAX_LOCAL_RANKS, len(first_group)), max_bw=max_bw, total_bw=tree_total,
                    sm=system.sm), heads=n_heads)
    return graphs


def collnet_heads(topology: Topology, group: Sequence[str]) -> list[str]:
    """CollNet Direct's heads among one server's ranks ``group``: for each NIC they leave by, in
    their order, the first rank on it, at most :data:`COLLNET_MAX_LOCAL_RANKS` ([NCCL]
    src/graph/search.cc ``ncclTopoSearchRecNet``: one channel per NIC, headed by the NIC's
    local GPU, no GPU heading two)."""
    heads: dict[int, str] = {}
    for rank in group:
        heads.setdefault(int(topology.node_nic[topology.node_id(rank)]), rank)
    return list(heads.values())[:COLLNET_MAX_LOCAL_RANKS]


class _DirectLoads:
    """What CollNet Direct's channels ask of a server ([NCCL] src/graph/search.cc
    ``ncclTopoSearchTryCollnetDirect``): each its own head and NIC, at the inter-node speed to
    and from the network, and NVLink from its head to each other GPU and back at the
    intra-node speed over ``n_gpus - 1``; :meth:`channels` as :class:`_Loads`'s."""

    def __init__(self, n_heads: int, n_gpus: int, nvlink_bw: float, nic_bw: float):
        self.n_heads, self.n_gpus, self.nvlink_bw, self.nic_bw = n_heads, n_gpus, nvlink_bw, nic_bw

    def channels(self, bw_intra: float, bw_inter: float, most: int) -> int:
        """Channels that fit: one per head while its NIC path takes ``bw_inter``, as many as
        the busiest GPU's NVLinks carry (a head sends ``bw_intra`` to the others and
        ``bw_intra / (n_gpus - 1)`` to every other channel's head)."""
        if bw_inter > self.nic_bw + 1e-9 or bw_intra > self.nvlink_bw + 1e-9:
            return 0
        fit = 1 + math.floor((self.nvlink_bw / bw_intra - 1) * (self.n_gpus - 1) + 1e-9)
        return min(most, self.n_heads, fit)


# --- reduction operations and data types ------------------------------------------------

#: Element size (bytes) of nccl-tests' data types (its ``-d`` names; ``f8e4m3`` and ``f8e5m2``
#: where NCCL has FP8).
DTYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float": 4,
    "double": 8,
    "bfloat16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
}
#: nccl-tests' data types, in its order.
DATA_TYPES = tuple(DTYPE_BYTES)
#: nccl-tests' reduction operations (its ``-o`` names): ``ncclSum``, ``ncclProd``, ``ncclMax``,
#: ``ncclMin``, ``ncclAvg``, and an op of ``ncclRedOpCreatePreMulSum`` (``mulsum``).
REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum")
_INTEGER_TYPES = frozenset({"int8", "uint8", "int32", "uint32", "int64", "uint64"})
# The types NVLS reduces, by device operation ([NCCL] src/include/device.h ncclNvlsSupported,
# the same from v2.19.3-1 to v2.30.7-1).
_NVLS_TYPES = {
    "sum": frozenset({"int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"}),
    "minmax": frozenset({"int32", "uint32", "int64", "uint64", "half", "bfloat16"}),
}
# Collectives that reduce: the others pass ncclSum to NCCL whatever nccl-tests' -o says.
_REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})


def check_reduction(dtype: str, redop: str) -> None:
    """An :class:`~flowsim.errors.InputError` naming the valid ones unless ``dtype`` is one of
    :data:`DATA_TYPES` and ``redop`` one of :data:`REDOPS`."""
    if dtype not in DATA_TYPES:
        raise InputError(f"unknown data type {dtype!r}; valid ones: {', '.join(DATA_TYPES)}")
    if redop not in REDOPS:
        raise InputError(f"unknown reduction {redop!r}; valid ones: {', '.join(REDOPS)}")


def device_redop(redop: str, dtype: str) -> str:
    """The operation NCCL's kernels run for nccl-tests' ``redop`` on ``dtype`` ([NCCL]
    v2.30.7-1 src/enqueue.cc ``hostToDevRedOp``): ``"sum"``, ``"prod"``, ``"minmax"`` (max and
    min), ``"sum_post_div"`` (an average of integers) or ``"pre_mul_sum"`` (an average of
    floating types, each input multiplied by 1/n first, and ``mulsum``).

    >>> device_redop("avg", "int32"), device_redop("avg", "bfloat16"), device_redop("max", "half")
    ('sum_post_div', 'pre_mul_sum', 'minmax')
    """
    check_reduction(dtype, redop)
    if redop in ("max", "min"):
        return "minmax"
    if redop == "avg":
        return "sum_post_div" if dtype in _INTEGER_TYPES else "pre_mul_sum"
    return "pre_mul_sum" if redop == "mulsum" else redop


#: nccl-tests' FP8 types (``ncclFloat8e4m3``, ``ncclFloat8e5m2``; [NCCL] v2.24.3-1 src/nccl.h.in
#: is the first to have them).
FP8_TYPES = ("f8e4m3", "f8e5m2")
# What NCCL runs as point-to-point sends, which no FP8 check stops.
_POINT_TO_POINT = frozenset({"send", "all_to_all", "all_to_all_v", "gather", "scatter", "hypercube"})


def fp8_refusal(collective: str, dtype: str, sm: int, version: str = DEFAULT_NCCL_VERSION) -> str | None:
    """Why NCCL ``version`` refuses ``collective`` of ``dtype`` on GPUs of compute capability
    ``sm`` (x 10), or None: FP8 types arrived in 2.24.3, and below SM90 NCCL refuses a
    collective of them ([NCCL] v2.24.3-1 to v2.30.7-1 src/enqueue.cc ``taskAppend``: "FP8
    reduction support begins with sm90 capable devices."), from v2.28.3-1 only one that reduces
    (all-gather and broadcast pass). Sends (all-to-all, gather, scatter) are not checked.

    >>> fp8_refusal("all_gather", "f8e4m3", 80) is None, fp8_refusal("all_gather", "f8e4m3", 80, "2.27.7") is None
    (True, False)
    """
    if dtype not in FP8_TYPES:
        return None
    constants = constants_of(version)
    if not _since(constants, (2, 24, 3)):
        return f"NCCL {version} has no FP8 types ({dtype}): ncclFloat8e4m3 and ncclFloat8e5m2 arrived in 2.24.3"
    moves_only = collective in ("all_gather", "broadcast") and _since(constants, (2, 28, 3))
    if sm < 90 and collective not in _POINT_TO_POINT and not moves_only:
        return (f"NCCL {version} refuses {collective} of {dtype} on SM{sm} GPUs (\"FP8 reduction support begins with "
                "sm90 capable devices.\"" + ("" if collective in _REDUCING else "; from 2.28.3 it gathers them") + ")")
    return None


def nvls_refusal(collective: str, dtype: str = "float", redop: str = "sum",
                 version: str = DEFAULT_NCCL_VERSION) -> str | None:
    """Why NCCL runs no NVLS or NVLSTree for ``collective`` of ``dtype`` reduced by ``redop``
    (nccl-tests' ``-d`` and ``-o`` names), or None where the reduction allows them.

    NCCL takes NVLS only where the NVSwitch has the reduction ([NCCL] src/enqueue.cc
    ``ncclPrepareTasks``: ``ncclNvlsSupported``, src/include/device.h); all-gather, which
    reduces nothing, from v2.22.3-1 whatever its type (before, as a sum of its type). A
    collective that reduces nothing passes NCCL a sum, whatever ``redop`` says.

    >>> nvls_refusal("all_reduce", "bfloat16", "max") is None
    True
    >>> nvls_refusal("all_reduce", "float", "avg")
    "the NVSwitch has no reduction for avg on float (NCCL runs it as 'pre_mul_sum')"
    """
    return _nvls_refusal(collective, dtype, redop, constants_of(version))


def _nvls_refusal(collective: str, dtype: str, redop: str, constants: NcclConstants) -> str | None:
    op = device_redop(redop if collective in _REDUCING else "sum", dtype)
    if collective == "all_gather" and _since(constants, (2, 22, 3)):
        return None
    if dtype in _NVLS_TYPES.get(op, ()):
        return None
    named = f"{redop} on {dtype}" if collective in _REDUCING else f"the sum NCCL passes on {dtype}"
    return f"the NVSwitch has no reduction for {named} (NCCL runs it as {op!r})"


#: The types NCCL's SHARP plugin reduces in the network ([SHARP] src/sharp_plugin.c
#: ``typeConvert``): bfloat16, int8 and uint8 only on SHARP v3 and later (NDR, XDR), where the
#: plugin finds them in the switches' capabilities (``NCCL_SHARP_V3_DATATYPES``' default).
SHARP_TYPES = frozenset({"half", "int32", "uint32", "float", "int64", "uint64", "double"})
SHARP_V3_TYPES = frozenset({"bfloat16", "int8", "uint8"})
#: NCCL's CollNet algorithms without NVLS: IB SHARP behind direct NVLink copies (Direct) or a
#: chain of the server's GPUs (Chain).
COLLNET_ALGORITHMS = ("collnet_direct", "collnet_chain")
# NCCL's algorithms that run Simple only ([NCCL] tuning.cc: NVLS, NVLSTree, PAT and CollNet's
# other protocols have no bandwidth).
_SIMPLE_ONLY = ("nvls", "nvls_tree", "pat", *COLLNET_ALGORITHMS)
#: ``NCCL_COLLNET_NODE_THRESHOLD``'s default ([NCCL] v2.30.7-1 src/init.cc): fewer servers
#: than this run no CollNet.
COLLNET_NODE_THRESHOLD = 2
#: ``NCCL_MAX_DIRECT_ARITY`` + 1 ([NCCL] src/include/device.h): the most GPUs a server may
#: have for CollNet Direct and Chain ([NCCL] src/enqueue.cc ``updateCollCostTable``), and the
#: most CollNet Direct heads a server has ([NCCL] src/graph/search.cc ``ncclTopoCompute``).
COLLNET_MAX_LOCAL_RANKS = 8


def _collnet_off(system: NcclSystem, env: NcclEnv) -> str | None:
    """Why the communicator runs without CollNet, or None where it has it ([NCCL] src/init.cc:
    ``NCCL_COLLNET_ENABLE``, a network that reduces, ``NCCL_COLLNET_NODE_THRESHOLD``)."""
    if env.integer("NCCL_COLLNET_ENABLE") != 1:
        return "CollNet (IB SHARP) runs only with NCCL_COLLNET_ENABLE=1"
    # The servers first: NCCL turns CollNet off below NCCL_COLLNET_NODE_THRESHOLD servers
    # ([NCCL] v2.30.7-1 src/init.cc: "less than CollNet node threshold"), whatever the fabric.
    threshold = env.integer("NCCL_COLLNET_NODE_THRESHOLD")
    threshold = COLLNET_NODE_THRESHOLD if threshold is None else threshold
    if system.n_nodes < 2:
        return ("CollNet reduces in the network between servers, and the ranks are in one (NCCL turns it off below "
                f"NCCL_COLLNET_NODE_THRESHOLD={threshold} servers)")
    if system.n_nodes < threshold:
        return (f"CollNet runs on {threshold} servers or more (NCCL_COLLNET_NODE_THRESHOLD), the ranks are on "
                f"{system.n_nodes}")
    if not system.sharp:
        return ("CollNet needs every rank's NIC on an InfiniBand leaf with SHARP (HDR, NDR, XDR; RoCE and EFA "
                "reduce nothing)")
    return None


def _collnet_refusal(system: NcclSystem, env: NcclEnv, collective: str, dtype: str, redop: str) -> str | None:
    """Why NCCL runs no CollNet (IB SHARP) for this call, or None where it may: CollNet
    Direct and Chain, and NVLS across servers, which needs it ([NCCL] src/init.cc
    ``collnetEnable``, src/enqueue.cc ``ncclGetCollNetSupport``: an average or a
    pre-multiplied sum asks the plugin for a sum; ``opConvert`` of [SHARP] reduces sums,
    maxima and minima). All-gather and reduce-scatter go through the plugin's ``iallgather``
    and ``ireducescatter`` (collNet v8, [SHARP]), which :func:`_gathers_by_rail` checks."""
    off = _collnet_off(system, env)
    if off is not None:
        return off
    if collective == "all_gather":
        return None  # the network gathers bytes: any type
    types = SHARP_TYPES | (SHARP_V3_TYPES if system.sharp_v3 else frozenset())
    if device_redop(redop, dtype) == "prod" or dtype not in types:
        newer = " (SHARP v3, NDR or XDR, for bfloat16, int8 and uint8)" if dtype in SHARP_V3_TYPES else ""
        return f"the SHARP plugin reduces no {redop} on {dtype}{newer}"
    return None


def version_refusal(algorithm: str, collective: str, version: str = DEFAULT_NCCL_VERSION,
                    n_nodes: int = 2) -> str | None:
    """Why NCCL ``version`` has no ``algorithm`` (NCCL's name) for ``collective`` on ``n_nodes``
    servers, or None where it has one: PAT from v2.23.4-1 ([NCCL] src/graph/tuning.cc
    ``NCCL_ALGO_PAT``), all-gather and reduce-scatter through the network with CollNet
    Direct from v2.20.5-1, with NVLS across servers from v2.27.3-1 (up to v2.26.x
    ``updateCollCostTable`` skips NVLS for them where ``nNodes > 1``, [NCCL] src/enqueue.cc).
    The reason NCCL_ALGO gets, and a named algorithm too.

    >>> version_refusal("collnet_direct", "reduce_scatter", "2.19.3")
    'NCCL runs reduce_scatter through the network from 2.20.5'
    >>> version_refusal("nvls", "all_gather", "2.26.2", n_nodes=2)
    'NCCL runs all_gather with NVLS across servers from 2.27.3'
    """
    constants = constants_of(version)
    if algorithm == "pat" and not _since(constants, (2, 23, 4)):
        return "PAT arrived in NCCL 2.23.4"
    if collective in ("all_gather", "reduce_scatter"):
        if algorithm == "collnet_direct" and not _since(constants, (2, 20, 5)):
            return f"NCCL runs {collective} through the network from 2.20.5"
        if algorithm == "nvls" and n_nodes > 1 and not _since(constants, (2, 27, 3)):
            return f"NCCL runs {collective} with NVLS across servers from 2.27.3"
    return None


def _gathers_by_rail(system: NcclSystem, graphs: Mapping[str, NcclGraph], constants: NcclConstants,
                     collective: str) -> str | None:
    """Why NCCL runs no all-gather or reduce-scatter through the network (CollNet Direct, NVLS
    across servers) in a version that has them (:func:`version_refusal`), or None: with the
    plugin's ``iallgather`` or ``ireducescatter`` (the SHARP plugin's collNet v8 has both,
    [SHARP]), and one head a GPU: "AllGather/ReduceScatter requires 1:1 GPU:NIC", no server
    with more ranks than CollNet Direct has heads (``collNetHeadsNum``, [NCCL] v2.27.7-1 and
    v2.30.7-1 src/graph/tuning.cc). Each head's rail carries its own GPU's share."""
    direct = graphs.get("collnet_direct")
    heads = 0 if direct is None else direct.heads
    local = math.ceil(system.ppn)  # the busiest server has at least as many
    if local > heads:
        return (f"{collective} through the network needs a NIC (a CollNet head) per GPU: {local} GPUs, {heads} "
                f"head{'' if heads == 1 else 's'}")
    return None


# --- NCCL's environment --------------------------------------------------------------------

#: NCCL environment variables the tuner follows; any other ``NCCL_*`` is accepted and ignored
#: (it tunes transports flowsim does not model), and reported in :attr:`NcclEnv.ignored`.
NCCL_ENV_KEYS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                 "NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_NTHREADS",
                 "NCCL_PAT_ENABLE", "NCCL_COLLNET_ENABLE", "NCCL_NVLS_NCHANNELS", "NCCL_NCHANNELS_PER_NET_PEER",
                 "NCCL_MIN_P2P_NCHANNELS", "NCCL_MAX_P2P_NCHANNELS", "NCCL_P2P_PER_CHANNEL_NET_BW",
                 "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE",
                 "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_P2P_PCI_CHUNKSIZE", "NCCL_NVLS_CHUNKSIZE",
                 "NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_C2C", "NCCL_NET_OVERHEAD",
                 "NCCL_COLLNET_NODE_THRESHOLD")
# Each protocol's buffer variable ([NCCL] src/init.cc computeBuffSizes).
_BUFFER_KEYS = {"ll": "NCCL_LL_BUFFSIZE", "ll128": "NCCL_LL128_BUFFSIZE", "simple": "NCCL_BUFFSIZE"}
# The point-to-point chunk's variable by path ([NCCL] src/init.cc computeBuffSizes).
_P2P_CHUNK_KEYS = {"net": "NCCL_P2P_NET_CHUNKSIZE", "nvlink": "NCCL_P2P_NVL_CHUNKSIZE", "pci": "NCCL_P2P_PCI_CHUNKSIZE"}
# Byte counts NCCL takes from the environment for chunks, each at least one 128-byte line.
_CHUNK_KEYS = (*_P2P_CHUNK_KEYS.values(), "NCCL_NVLS_CHUNKSIZE", "NCCL_NVLSTREE_MAX_CHUNKSIZE")
# Chunk variables whose NCCL default is -2, "unset" ([NCCL] v2.30.7-1 src/transport/nvls.cc).
_UNSET_BY_MINUS_TWO = ("NCCL_NVLSTREE_MAX_CHUNKSIZE",)
#: NCCL's path types, nearest first ([NCCL] v2.30.7-1 src/graph/topo.cc ``topoPathTypeStr``):
#: the names ``NCCL_NET_GDR_LEVEL`` takes.
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
# NCCL_NET_GDR_LEVEL given as a number, the older numbering ([NCCL] src/graph/paths.cc
# levelsOldToNew; a number above 5 counts as 5).
_OLD_PATH_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def _list_entries(value: str, key: str) -> list[tuple[str, str]]:
    """The ``(function prefix or "", elements)`` entries of an ``NCCL_ALGO``/``NCCL_PROTO``
    value as NCCL's ``parseList`` ([NCCL] v2.30.7-1 src/graph/tuning.cc) reads them: split
    with ``strtok_r``, which skips empty pieces (``"simple;"`` is one entry, an empty value
    none), and only a first entry that starts the value may go without a prefix."""
    entries = []
    for position, entry in enumerate(value.split(";")):
        if not entry:
            continue
        parts = [part for part in entry.split(":") if part]
        if not parts:
            raise InputError(f"{key}={value!r}: the entry {entry!r} names neither a function nor an algorithm")
        if len(parts) == 1:
            if position:
                raise InputError(f"{key}={value!r}: every entry but the first needs a function prefix")
            entries.append(("", parts[0]))
            continue
        if parts[0].lower() not in _FUNCTION_NAMES:
            raise InputError(f"{key}={value!r}: unknown function {parts[0]!r}; valid ones: "
                             f"{', '.join(_FUNCTION_NAMES)}")
        entries.append((parts[0], parts[1]))
    return entries


def _parse_list(value: str, names: Mapping[str, str], key: str, collective: str) -> set[str]:
    """NCCL's ``parseList`` for one collective: the enabled names.

    ``"ring,tree"`` enables those; ``"^ll"`` everything but; ``"allreduce:tree;broadcast:ring"``
    per function, the first entry optionally without a prefix for every function
    (:func:`_list_entries`; an empty value leaves every name enabled).
    """
    enabled = set(names.values())
    for prefix, elements in _list_entries(value, key):
        if prefix and _FUNCTION_NAMES[prefix.lower()] != collective:
            continue
        negate = elements.startswith("^")
        listed = set()
        for element in (e for e in elements[negate:].split(",") if e):
            if element.lower() not in names:
                raise InputError(f"{key}={value!r}: unknown name {element!r}; valid ones: {', '.join(names)}")
            listed.add(names[element.lower()])
        enabled = set(names.values()) - listed if negate else listed
    return enabled


@dataclass(frozen=True)
class NcclEnv:
    """NCCL environment variables as the tuner reads them."""

    values: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in self.values.items():
            if not isinstance(key, str) or not key.startswith("NCCL_"):
                raise InputError(f"NCCL environment: {key!r} is not an NCCL_ variable")
            if not isinstance(value, str):
                raise InputError(f"NCCL environment: {key} must be a string, got {value!r}")

    @property
    def ignored(self) -> tuple[str, ...]:
        """The variables given that flowsim does not model. nccl-tests' own (``NCCL_TESTS_*``)
        are not NCCL's: they are read where they apply (alltoallv's pattern,
        :func:`flowsim.collectives.placement.alltoallv_spread`)."""
        return tuple(sorted(k for k in self.values if k not in NCCL_ENV_KEYS and not k.startswith("NCCL_TESTS_")))

    def check(self) -> None:
        """Read every variable the tuner follows as it would (each collective's algorithms
        and protocols, the integers), so that a bad value is refused before any collective
        runs; an :class:`~flowsim.errors.InputError` names it."""
        for collective in NCCL_COLLECTIVES:
            self.algorithms(collective)
            self.protocols(collective)
        for key in NCCL_ENV_KEYS:
            if key not in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NET_GDR_LEVEL"):
                self.integer(key)
        self.gdr_level()
        self.buffers()
        for key in _CHUNK_KEYS:
            self.chunk(key, 0)

    def buffers(self) -> dict[str, int]:
        """Each protocol's per-connection buffer in bytes: ``NCCL_LL_BUFFSIZE``,
        ``NCCL_LL128_BUFFSIZE`` and ``NCCL_BUFFSIZE`` where given, else NCCL's defaults
        (:data:`~flowsim.collectives.chunks.NCCL_BUFFER_BYTES`; [NCCL] src/init.cc
        ``computeBuffSizes``, where -2 means unset). A buffer under
        :data:`~flowsim.collectives.chunks.MIN_BUFFER_BYTES` is refused."""
        out = dict(NCCL_BUFFER_BYTES)
        for protocol, key in _BUFFER_KEYS.items():
            value = self.integer(key)
            if value is None or value == -2:
                continue
            if value < MIN_BUFFER_BYTES:
                raise InputError(f"NCCL environment: {key}={value} is under {MIN_BUFFER_BYTES} bytes "
                                 f"({NCCL_STEPS} slots of one 128-byte line)")
            out[protocol] = value
        return out

    def chunk(self, key: str, default: int) -> int:
        """A chunk size in bytes from ``key`` (``NCCL_P2P_NVL_CHUNKSIZE`` ...), else ``default``
        (also for -2 where that is NCCL's "unset"); under 128 bytes (one line) is refused."""
        value = self.integer(key)
        if value is None or (value == -2 and key in _UNSET_BY_MINUS_TWO):
            return default
        if value < 128:
            raise InputError(f"NCCL environment: {key}={value} is under 128 bytes (one line)")
        return value

    def gdr_level(self) -> str | None:
        """``NCCL_NET_GDR_LEVEL`` as a path type of :data:`PATH_TYPES`: its name, or a number in
        NCCL's older numbering (0 ``LOC`` ... 4 ``SYS``; [NCCL] src/graph/paths.cc
        ``ncclGetLevel``); None where unset. NCCL ignores a value that is neither; flowsim
        refuses it."""
        value = self.values.get("NCCL_NET_GDR_LEVEL")
        if value is None:
            return None
        if value in PATH_TYPES:
            return value
        number = re.match(r"[0-9]+", value)
        if number is None:
            raise InputError(f"NCCL environment: NCCL_NET_GDR_LEVEL={value!r} is none of NCCL's path types "
                             f"({', '.join(PATH_TYPES)}) nor a number")
        return _OLD_PATH_LEVELS[min(int(number.group()), len(_OLD_PATH_LEVELS) - 1)]

    def integer(self, *keys: str) -> int | None:
        for key in keys:
            if key in self.values:
                try:
                    return int(self.values[key])
                except ValueError:
                    raise InputError(f"NCCL environment: {key}={self.values[key]!r} is not an integer") from None
        return None

    def algorithms(self, collective: str) -> set[str]:
        value = self.values.get("NCCL_ALGO")
        return set(NCCL_ALGORITHMS) if value is None else _parse_list(value, _ALGO_NAMES, "NCCL_ALGO", collective)

    def protocols(self, collective: str) -> set[str]:
        value = self.values.get("NCCL_PROTO")
        return set(NCCL_PROTOCOLS) if value is None else _parse_list(value, _PROTO_NAMES, "NCCL_PROTO", collective)

    def protocols_set(self, collective: str) -> bool:
        """Whether ``NCCL_PROTO`` has an entry for ``collective`` (one without a prefix, or
        its function's): then NCCL enables what it lists as given, LL128 included, without
        LL128's default rule (``protoEnable`` 1, not 2, [NCCL] src/graph/tuning.cc)."""
        value = self.values.get("NCCL_PROTO")
        if value is None:
            return False
        return any(not prefix or _FUNCTION_NAMES[prefix.lower()] == collective
                   for prefix, _ in _list_entries(value, "NCCL_PROTO"))


def merged_env(topology: Topology, given: Mapping[str, str] | None) -> dict[str, str]:
    """The NCCL environment a call on ``topology`` runs under: the topology's own
    (:attr:`~flowsim.topology.Topology.nccl_env`, a system file's ``[nccl.env]``) under
    ``given``, the caller's, which wins."""
    return {**dict(topology.nccl_env), **dict(given or {})}


def system_env_taken(topology: Topology, given: Mapping[str, str]) -> dict[str, str]:
    """The variables of the topology's own NCCL environment (:attr:`~flowsim.topology.Topology.nccl_env`, a
    system file's ``[nccl.env]``) that the tuner follows and ``given`` (the caller's, which
    wins) does not name: what of it a call takes, for a report to say."""
    return {key: value for key, value in topology.nccl_env if key in NCCL_ENV_KEYS and key not in given}


# --- the cost model ------------------------------------------------------------------------

#: The collectives NCCL's tuner chooses for (its collective tasks; the rest are point-to-point).
NCCL_COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")


def _graph_of(algorithm: str) -> str:
    """The search pattern an algorithm runs on: NVLS's for NVLS and NVLSTree, the tree's for PAT
    and CollNet Chain (whose graph NCCL searches as a tree with the ring's channels, [NCCL]
    src/init.cc: flowsim takes the tree's)."""
    if algorithm in ("nvls", "nvls_tree"):
        return "nvls"
    return "tree" if algorithm in ("pat", "collnet_chain") else algorithm


def _model(system: NcclSystem, graphs: Mapping[str, NcclGraph], constants: NcclConstants, collective: str,
           env: NcclEnv, dtype: str = "float", redop: str = "sum",
           refused: dict[str, str] | None = None) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(latency us, algorithm bandwidth GB/s) and the bus bandwidth, per enabled (algorithm,
    protocol) of ``collective`` on ``dtype`` reduced by ``redop``: ncclTopoTuneModel's loop for
    one function, less what the reduction rules out (updateCollCostTable). ``refused``, if
    given, takes why each algorithm ``NCCL_ALGO`` allows has no entry."""
    n, nodes, ppn = system.n_ranks, system.n_nodes, system.ppn
    cc, i2 = system.compcap_index, system.node_index
    i1 = cc if nodes == 1 else (1 if system.cpu_vendor == "amd" else 0)
    ll_max = constants.ll_max_bw[i1][i2]
    tree_max = constants.per_channel_max_tree_bw[cc][i2]
    ring_ll128_max = constants.per_channel_max_ring_ll128_bw[cc][i2]
    tree_ll128_max = constants.per_channel_max_tree_ll128_bw[cc][i2]
    nsteps = 2 * (n - 1) if collective == "all_reduce" else n - 1 if collective in ("all_gather", "reduce_scatter") \
        else n
    algorithms = env.algorithms(collective)
    protocols = env.protocols(collective)
    ll128_by_default = not env.protocols_set(collective)
    out: dict[tuple[str, str], tuple[float, float, float]] = {}
    for a, algorithm in enumerate(NCCL_ALGORITHMS):
        if algorithm not in algorithms:
            continue
        why = _left_out(algorithm, system, graphs, constants, collective, env, dtype, redop)
        if why is not None:
            if refused is not None:
                refused[algorithm] = why
            continue
        graph = graphs[_graph_of(algorithm)]
        before = len(out)
        for p, protocol in enumerate(NCCL_PROTOCOLS):
            if protocol not in protocols:
                continue
            if algorithm in _SIMPLE_ONLY and protocol != "simple":
                continue
            if protocol == "ll128" and ll128_by_default and not _ll128_enabled(system, constants):
                continue
            bw = graph.bw_intra if nodes <= 2 or algorithm in COLLNET_ALGORITHMS else graph.bw_inter
            if algorithm in ("nvls", "nvls_tree"):
                if constants.nvls_efficiency is None or constants.per_channel_max_nvls_tree_bw is None:
                    # Before 2.28.3 ([NCCL] v2.26.2-1 and v2.19.3-1 src/graph/tuning.cc): the
                    # graph's speeds, NVLSTree's inter-node one halved beyond two nodes.
                    bw = min(graph.bw_intra, graph.bw_inter if algorithm == "nvls" or nodes <= 2
                             else graph.bw_inter / 2)
                    if algorithm == "nvls" and collective != "all_reduce" and _since(constants, (2, 27, 3)):
                        # All-gather and reduce-scatter from v2.27.3-1 ([NCCL] v2.27.7-1
                        # src/graph/tuning.cc): the local share of the intra-node speed.
                        bw = min(graph.bw_intra * (ppn - 1) / ppn, graph.bw_inter * 0.9)
                else:
                    if graph.n_channels < 2:
                        continue
                    intra_bw = (graph.bw_intra * constants.nvls_efficiency[cc] * (graph.n_channels - 1)
                                / graph.n_channels)
                    intra_bw *= 2.0 if collective == "all_reduce" else (ppn - 1) / ppn
                    inter_bw = graph.bw_inter * (2 if nodes <= 2 and algorithm == "nvls_tree" else 1)
                    nvls_tree_max = constants.per_channel_max_nvls_tree_bw[cc][i2]
                    bw = min(intra_bw, inter_bw, nvls_tree_max if algorithm == "nvls_tree" else math.inf)
            bus = graph.n_channels * bw
            if algorithm == "ring" and protocol == "ll":
                if _since(constants, (2, 21, 5)):
                    bus = min(ll_max, bus * .5)
                else:
                    # [NCCL] v2.19.3-1 src/graph/tuning.cc: a quarter across nodes and for
                    # all-reduce and reduce, else a third.
                    share = 1 / 4 if nodes > 1 or collective in ("all_reduce", "reduce") else 1 / 3
                    bus = min(ll_max, bus * share)
            if algorithm == "ring" and protocol == "ll128":
                # Before 2.23.4 ([NCCL] v2.19.3-1 src/graph/tuning.cc): 0.7 with one rank per node.
                efficiency = .7 if ppn < 2 and not _since(constants, (2, 23, 4)) else .92
                bus = min(bus * efficiency, graph.n_channels * ring_ll128_max)
            if algorithm == "tree" and collective == "all_reduce":
                bus = min(bus * .92, graph.n_channels * tree_max)
            if algorithm == "tree" and protocol == "ll":
                bus = min(bus / 3.8, ll_max)
            if algorithm == "tree" and protocol == "ll128":
                bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0), graph.n_channels * tree_ll128_max)
            if algorithm == "tree" and n == nodes:
                # With one GPU a server the search's tree is of the TREE pattern ("all NIC
                # traffic going to/from the same GPU", src/graph/search.cc ncclTopoCompute),
                # which NCCL's model takes at .85 ([NCCL] src/graph/tuning.cc: the graph's
                # pattern before v2.26.2-1, comm->maxTreePattern from it, which one server of
                # one GPU among others would set too; collective and check place ranks evenly).
                bus *= .85
            if algorithm == "pat":
                # .85 in v2.23.4-1, the first with PAT; .75 from v2.24.3-1 ([NCCL] src/graph/tuning.cc).
                bus *= .75 if _since(constants, (2, 24, 3)) else .85
            if algorithm == "collnet_direct" and collective in ("all_gather", "reduce_scatter"):
                # Each GPU's rail: from 2.27.3 its NIC's speed (x .9) or NVLink's, whichever is
                # less ([NCCL] v2.27.7-1 src/graph/tuning.cc); before, the intra speed and a
                # "measured corrective ratio" from .95 at one GPU a server to .85 at 8 ([NCCL]
                # v2.20.5-1 to v2.26.2-1).
                if _since(constants, (2, 27, 3)):
                    bus = ppn * min(graph.bw_intra, graph.bw_inter * .9)
                else:
                    w = (ppn - 1) / 7
                    bus = ppn * graph.bw_intra * (w * .85 + (1 - w) * .95)
            elif algorithm == "collnet_direct":
                # "Collnet+Direct requires all GPUs to have a local NIC to work at full speed":
                # the GPU/NIC ratio, halfway to 1; and .85 from Hopper on.
                factor = ppn / graph.n_channels
                bus /= factor - (factor - 1) / 2
                if system.sm >= 90:
                    bus *= .85
            # Bus to algorithm bandwidth: none for all-gather and reduce-scatter but on rings
            # since 2.23.4 ([NCCL] v2.23.4-1 src/graph/tuning.cc; v2.19.3-1 converts NVLS's
            # too); NVLS x 5/6 before 2.28.3 ([NCCL] v2.26.2-1), as rings since (v2.28.3-1).
            if algorithm == "ring":
                algbw = bus * n / nsteps
            elif collective in ("all_gather", "reduce_scatter") and (
                    _since(constants, (2, 23, 4)) or algorithm == "collnet_direct"):
                algbw = bus
            elif algorithm in ("nvls", "nvls_tree"):
                if constants.nvls_efficiency is not None:
                    algbw = bus * n / nsteps
                else:
                    algbw = bus * 5 / 6
                    # What the model's algorithm bandwidth is in bus terms (nccl-tests' busbw,
                    # as n / nsteps converts it since 2.28.3): what NcclChoice reports.
                    bus = algbw * nsteps / n
            else:
                algbw = bus * .5
            latency = constants.base_latency_us[a][p]
            intra_hw = system.intra
            intra_lat = constants.hw_latency_us[intra_hw][a][p]
            # With one rank per node the NET Tree latency, since 2.23.4 ([NCCL] v2.23.4-1
            # src/graph/tuning.cc); the algorithm's own before.
            one_per_node = ppn == 1 and _since(constants, (2, 23, 4))
            inter_lat = constants.hw_latency_us["net"][0 if one_per_node else a][p]
            # The network plugin's own latency (0 for NCCL's IB transport), twice for Simple.
            inter_lat += system.net_latency_us * (2 if protocol == "simple" else 1)
            if algorithm == "ring":
                hw = intra_hw if nodes == 1 else "net"
                lat = constants.hw_latency_us[hw][a][p]
                if collective in ("broadcast", "reduce"):
                    latency += lat
                else:
                    intra_lat = max(intra_lat, ring_net_overhead_us(system, protocol,
                                                                    env.integer("NCCL_NET_OVERHEAD")))
                    inter_steps = 0 if nodes == 1 else 2 * (nodes - 1) if collective == "all_reduce" else nodes - 1
                    if collective == "all_reduce" and nodes > 1 and not _since(constants, (2, 23, 4)):
                        inter_steps = 2 * nodes  # [NCCL] v2.19.3-1 src/graph/tuning.cc nInterSteps
                    latency += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
            elif algorithm == "tree":
                if collective == "all_reduce":
                    latency += 2 * ((n // nodes - 1) * intra_lat + _log2i(nodes) * inter_lat)
            elif algorithm == "nvls":
                latency = intra_lat + (inter_lat if nodes > 1 else 0.0)
            elif algorithm == "nvls_tree":
                latency += intra_lat + 2 * _log2i(nodes) * inter_lat
            elif algorithm == "pat":
                latency += _log2i(nodes) * (inter_lat / 3.5) + n * 2.8
            elif algorithm == "collnet_direct":
                local = n // nodes - 1
                latency += 2 * (min(1, local) * intra_lat + local * COLLNET_ARITY_US) + inter_lat
            elif algorithm == "collnet_chain":
                latency += 2 * (n // nodes - 1) * intra_lat + inter_lat
            out[(algorithm, protocol)] = (latency, algbw, bus)
        if refused is not None and len(out) == before:
            if algorithm in ("nvls", "nvls_tree") and graph.n_channels < 2:
                refused[algorithm] = "NVLS needs 2 channels or more"
            elif algorithm in _SIMPLE_ONLY and "simple" not in protocols:
                refused[algorithm] = "it runs Simple only, which NCCL_PROTO leaves out"
            else:
                refused[algorithm] = "NCCL_PROTO leaves none of its protocols"
    return out


def _left_out(algorithm: str, system: NcclSystem, graphs: Mapping[str, NcclGraph], constants: NcclConstants,
              collective: str, env: NcclEnv, dtype: str, redop: str) -> str | None:
    """Why NCCL's model has no entry for ``algorithm`` on this call whatever the protocol
    (ncclTopoTuneModel's rules, and updateCollCostTable's for the reduction), or None."""
    n, nodes = system.n_ranks, system.n_nodes
    if collective in ("broadcast", "reduce") and algorithm != "ring":
        return f"NCCL runs {collective} on rings only"
    if collective in ("all_gather", "reduce_scatter") and algorithm not in ("pat", "ring", "nvls", "collnet_direct"):
        return f"NCCL runs {collective} on rings, PAT, NVLS and CollNet Direct only"
    if algorithm in COLLNET_ALGORITHMS:
        refusal = _collnet_refusal(system, env, collective, dtype, redop)
        if refusal is not None:
            return refusal
        if n > nodes * COLLNET_MAX_LOCAL_RANKS:
            return f"CollNet runs with at most {COLLNET_MAX_LOCAL_RANKS} GPUs a server"
        if algorithm == "collnet_direct" and not system.nvswitch:
            return "CollNet Direct needs an NVSwitch"  # ncclTopoTuneModel: nvsCount == 0
        if collective in ("all_gather", "reduce_scatter"):
            refusal = (version_refusal(algorithm, collective, constants.version, nodes)
                       or _gathers_by_rail(system, graphs, constants, collective))
            if refusal is not None:
                return refusal
    if algorithm in ("nvls", "nvls_tree"):
        if "nvls" not in graphs:
            return "NVLS needs NVLink SHARP (third-generation NVSwitches, Hopper on) under every rank"
        if env.integer("NCCL_NVLS_ENABLE") == 0:
            return "NCCL_NVLS_ENABLE=0"
        refusal = _nvls_refusal(collective, dtype, redop, constants)
        if refusal is not None:
            return refusal
        # NCCL's NVLS gathers and scatters a server's ranks in one NVLS group of at most
        # NCCL_MAX_NVLS_ARITY (32) peers: from 2.27.3 only all-reduce runs NVLS or NVLSTree on
        # more local ranks (a GB200 NVL72 rack's 72), 2.25.1-2.26.x kept NVLS's all-gather and
        # reduce-scatter to 32 ranks in all ([NCCL] src/include/device.h; src/enqueue.cc
        # updateCollCostTable, v2.27.3-1 to v2.30.7-1 and v2.25.1-1 to v2.26.6-1).
        local = -(-n // nodes)
        per_server = _since(constants, (2, 27, 3))  # before, all ranks (from 2.25.1)
        counted = local if per_server else n if _since(constants, (2, 25, 1)) else 0
        if collective != "all_reduce" and counted > NVLS_MAX_ARITY:
            ranks = f"{local} GPUs a server" if per_server else f"{n} ranks"
            return (f"NCCL runs NVLS {collective} on at most {NVLS_MAX_ARITY} ranks of a server "
                    f"(NCCL_MAX_NVLS_ARITY), not {ranks}")
        if algorithm == "nvls_tree" and nodes == 1:
            return "NVLSTree runs across servers only"  # ncclTopoTuneModel disables it on one node
        if algorithm == "nvls" and nodes > 1:
            refusal = _collnet_refusal(system, env, collective, dtype, redop)
            if refusal is None and collective in ("all_gather", "reduce_scatter"):
                refusal = (version_refusal(algorithm, collective, constants.version, nodes)
                           or _gathers_by_rail(system, graphs, constants, collective))
            if refusal is not None:
                return ("NVLS runs across servers only with CollNet (NCCL_COLLNET_ENABLE=1 on an InfiniBand "
                        f"fabric with SHARP): {refusal}")
    if algorithm == "pat":
        if collective == "all_reduce":
            return "PAT has no all-reduce"
        refusal = version_refusal(algorithm, collective, constants.version, nodes)
        if refusal is not None:
            return refusal
        if env.integer("NCCL_PAT_ENABLE") == 0:
            return "NCCL_PAT_ENABLE=0"
        if nodes != n:
            return "PAT runs with one GPU a server"
        if collective == "reduce_scatter" and device_redop(redop, dtype) in ("pre_mul_sum", "sum_post_div"):
            # [NCCL] v2.23.4-1 to v2.30.7-1 src/enqueue.cc updateCollCostTable: "Tree
            # reduceScatter doesn't support scaling yet".
            return f"PAT's reduce-scatter does not scale ({redop} on {dtype})"
    graph = graphs.get(_graph_of(algorithm))
    if graph is None or graph.n_channels == 0:
        return "NCCL's search found no channels for it"
    return None


def ring_net_overhead_us(system: NcclSystem, protocol: str, given_ns: int | None = None) -> float:
    """What NCCL's model charges each step of a ring across servers at least (us): the CPU's
    cost of a network post, 1 us on Intel (and CPUs other than x86), 2 us on AMD, or
    ``NCCL_NET_OVERHEAD`` (``given_ns``, nanoseconds; -2, its default, keeps the CPU's),
    thrice for Simple; 0 on one server. "Inter-node rings still have to launch nsteps * net
    overhead" ([NCCL] v2.19.3-1 to v2.30.7-1 src/graph/tuning.cc ``getNetOverhead``): the
    ring's steps inside a server cost no less ("intraLat = std::max(intraLat, netOverhead)")."""
    if system.n_nodes == 1:
        return 0.0
    if given_ns is not None and given_ns != -2:
        overhead = given_ns * .001
    else:
        overhead = 2.0 if system.cpu_vendor == "amd" else 1.0
    return overhead * (3 if protocol == "simple" else 1)


#: ``NCCL_MAX_NVLS_ARITY``: the most ranks of a server one NVLS group holds ([NCCL]
#: src/include/device.h).
NVLS_MAX_ARITY = 32

#: The factor NCCL multiplies an FP8 ring's modelled time by on more than 8 ranks, "any factor
#: large enough to act as a partition between lossy and non-lossy algos" ([NCCL]
#: src/enqueue.cc updateCollCostTable, from v2.24.3-1).
FP8_RING_PENALTY = 1024.0


def _since(constants: NcclConstants, release: tuple[int, int, int]) -> bool:
    """Whether ``constants`` are of NCCL ``release`` or later: the switch of a rule NCCL
    changed at that release (each caller names the tag)."""
    return constants.release >= release


def _ll128_enabled(system: NcclSystem, constants: NcclConstants) -> bool:
    """LL128's default: over NVLink inside servers only, and on tested compute capabilities:
    SM70 and later since 2.27.3 ([NCCL] v2.30.7-1 src/graph/tuning.cc); before, only those
    its switch lists: 70, 80, 90 ([NCCL] v2.19.3-1), and 100, 120 from 2.25.1 ([NCCL]
    v2.26.2-1), so not SM86 (A40) nor SM60. Across servers, only where the GPUs reach their
    NICs under PCIe switches (the graph's ``typeInter`` at most ``PATH_PXB``), or from SM90
    on through a peer GPU that does (``PATH_PXN``): the same rule in every version flowsim
    has ([NCCL] v2.19.3-1, v2.26.2-1 and v2.30.7-1 src/graph/tuning.cc); a NIC behind the
    CPU for every GPU (``PATH_PHB`` or farther) turns LL128 off."""
    if system.intra != "nvlink":
        return False
    if system.n_nodes > 1 and not (system.nic_near or (system.sm >= 90 and system.nic_pxn)):
        return False
    if _since(constants, (2, 27, 3)):
        return system.sm >= 70
    return system.sm in ((70, 80, 90, 100, 120) if _since(constants, (2, 25, 1)) else (70, 80, 90))


def _log2i(x: int) -> int:
    return int(x).bit_length() - 1 if x > 0 else -1


def tree_correction(constants: NcclConstants, protocol: str, size_bytes: float) -> float:
    """NCCL's ``treeCorrectionFactor`` for a tree all-reduce of ``size_bytes`` with
    ``protocol``: the share of the tree's model bandwidth it reaches at that size (1 outside
    the table; [NCCL] src/graph/tuning.cc ``ncclTopoGetAlgoTime``, docs/hardware.md §7.2)."""
    log_size = _log2i(int(size_bytes) >> 6)
    row = constants.tree_correction[NCCL_PROTOCOLS.index(protocol)]
    return row[log_size] if 0 <= log_size < 23 else 1.0


def _time_us(system: NcclSystem, constants: NcclConstants, collective: str, algorithm: str, protocol: str,
             latency: float, algbw: float, n_bytes: int, n_channels: int) -> float:
    """ncclTopoGetAlgoTime for one pipelined operation."""
    log_size = _log2i(n_bytes >> 6)
    if algorithm == "tree" and collective == "all_reduce":
        algbw *= tree_correction(constants, protocol, n_bytes)
    # Since 2.29.2 NVLSTree all-reduce on Blackwell with x86 hosts takes the tree factors too
    # ([NCCL] v2.29.2-1 src/graph/tuning.cc ncclTopoGetAlgoTime).
    if (algorithm == "nvls_tree" and collective == "all_reduce" and 0 <= log_size < 24 and system.sm >= 100
            and system.cpu_vendor in ("intel", "amd") and _since(constants, (2, 29, 2))):
        algbw *= constants.tree_correction[NCCL_PROTOCOLS.index(protocol)][log_size]
    if (algorithm == "ring" and protocol == "simple" and system.n_nodes > 1 and collective == "all_reduce"
            and n_bytes / (n_channels * system.n_ranks) >= 64):
        latency *= 1.9 if system.sm < 80 else 1.4
    return latency + n_bytes / (1000 * algbw)


@dataclass(frozen=True)
class NvlsTuning:
    """``ncclNvlsTuning`` ([NCCL] src/transport/nvls.cc): the channels NVLS and NVLSTree run on,
    NVLS's chunk (``nvlsChunkSize``) and NVLSTree's largest (``nvlsTreeMaxChunkSize``), bytes."""

    n_channels: int
    chunk_bytes: int
    tree_max_chunk_bytes: int


def nvls_tuning(system: NcclSystem, constants: NcclConstants, env: NcclEnv | None = None) -> NvlsTuning:
    """What ``ncclNvlsTuning`` of ``constants``' version sets for ``system`` under ``env``.

    16 channels on Hopper and 32 on Blackwell; from 2.27.3, 24 on Blackwell inside one NVLink
    domain (``NVLS_NCHANNELS_SM100_NVL``, one server or one multi-node NVLink clique). From
    2.30.3, Blackwell across servers takes ``ncclNvlsTreeSm100Tuning``'s choice by node
    count, ranks per node, the slowest GPU-NIC path (``minNetBw``) and whether that path stays
    under PCIe switches. The chunk is 128 KiB (``NCCL_NVLS_CHUNKSIZE``) unless that tuning
    says otherwise; NVLSTree's largest is 64 KiB from 4 nodes, else the chunk.
    ``NCCL_NVLS_CHUNKSIZE`` (from 2.21.5) and ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` (from 2.20.3)
    replace the two. ``NCCL_NVLS_NCHANNELS`` replaces the channels (a positive number; from 0 before 2.27.3),
    and ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` bound them ([NCCL] src/init.cc ``nvlsCTAs``,
    ``minCTAs``, ``maxCTAs``).
    """
    channels = constants.nvls_channels.get(system.compcap, 16)
    blackwell = system.sm >= 100
    if blackwell and system.n_nodes == 1 and _since(constants, (2, 27, 3)):
        channels = 24
    chunk = tree_max = 0
    if blackwell and system.n_nodes > 1 and _since(constants, (2, 30, 3)):
        channels, chunk, tree_max = _sm100_nvls_tree(system, channels)
    if env is not None:
        # NCCL_NVLS_CHUNKSIZE replaces the chunk (src/transport/nvls.cc from v2.21.5-1) and
        # NCCL_NVLSTREE_MAX_CHUNKSIZE NVLSTree's largest (src/enqueue.cc from v2.20.3-1, the
        # SM100 tuning's nvls.cc ncclNvlsTuning from v2.30.3-1; -2 is unset), both over the
        # SM100 tuning ([NCCL] v2.30.7-1 src/transport/nvls.cc). flowsim's 2.19.3 tables
        # predate both.
        if _since(constants, (2, 21, 5)):
            chunk = env.chunk("NCCL_NVLS_CHUNKSIZE", chunk)
        if _since(constants, (2, 20, 3)):
            tree_max = env.chunk("NCCL_NVLSTREE_MAX_CHUNKSIZE", tree_max)
    chunk = chunk or NVLS_CHUNK_BYTES
    tree_max = tree_max or (65536 if system.n_nodes >= 4 else chunk)
    if env is not None:
        given = env.integer("NCCL_NVLS_NCHANNELS")
        if given is not None and (given > 0 or given == 0 and not _since(constants, (2, 27, 3))):
            channels = given
        least, most = _cta_bounds(env, constants)
        channels = max(least, min(most, channels))
    return NvlsTuning(channels, chunk, tree_max)


def _sm100_nvls_tree(system: NcclSystem, channels: int) -> tuple[int, int, int]:
    """``ncclNvlsTreeSm100Tuning`` ([NCCL] v2.30.7-1 src/transport/nvls.cc): channels, chunk
    and NVLSTree's largest chunk (0: left to the defaults)."""
    ppn, net = system.ppn, system.net_GBps
    chunk, tree_max = 128 * 1024, 0
    if system.n_nodes == 2 and net >= 48.0:
        channels, tree_max = 32, 128 * 1024
        if ppn <= 4:
            chunk = tree_max = 256 * 1024
        elif ppn >= 16 or (ppn <= 8 and system.nic_near and net < 96.0):
            tree_max = 64 * 1024
    elif net >= 96.0:
        if ppn <= 8:
            channels, chunk, tree_max = 24, 256 * 1024, 256 * 1024
        else:
            channels, tree_max = 32, 128 * 1024 if ppn < 32 else 64 * 1024
    elif net >= 48.0:
        channels, tree_max = 24, 64 * 1024 if system.nic_near else 128 * 1024
    return channels, chunk, tree_max


def nic_path_types(topology: Topology, ranks: Sequence[str], router: Router | None = None) -> dict[str, str]:
    """NCCL's type (:data:`PATH_TYPES`) of the path from each of ``ranks`` to the NIC it
    leaves its server by, taken peer-to-peer: ``PIX`` through one PCIe switch, ``PXB``
    through several, ``P2C`` from a GPU on NVLink-C2C through its CPU's PCIe, ``PHB``
    through one CPU, ``SYS`` across CPUs ([NCCL] src/graph/paths.cc ``ncclTopoComputePaths``).
    Ranks without a NIC are left out."""
    with_nic = [r for r in ranks if topology.node_nic[topology.node_id(r)] >= 0]
    if not with_nic:
        return {}
    router = router or Router(topology)
    nics = [topology.node_names[int(topology.node_nic[topology.node_id(r)])] for r in with_nic]
    routes = router.route(with_nic, nics, method="shortest")
    types = {}
    for i, rank in enumerate(with_nic):
        links = routes.route(i).tolist()
        passed = [int(topology.node_kind[topology.link_dst[link]]) for link in links[:-1]]
        cpus = passed.count(NodeKind.CPU)
        if cpus > 1:
            types[rank] = "SYS"
        elif cpus == 1:
            types[rank] = "P2C" if topology.link_technology[links[0]] == "nvlink_c2c" else "PHB"
        else:
            types[rank] = "PXB" if passed.count(NodeKind.PCIE_SWITCH) > 1 else "PIX"
    return types


def _relayed(topology: Topology, types: dict[str, str], router: Router | None) -> dict[str, str]:
    """``types`` with a GPU whose NIC is behind a CPU (``PHB``, ``SYS``) given the type of a
    GPU of its server that reaches that NIC under PCIe switches, where NVLink joins the two:
    NCCL's PXN path, whose GPUDirect RDMA turns on the relaying GPU's distance ([NCCL]
    src/graph/paths.cc ``ncclTopoComputePaths``, ``ncclTopoCheckGdr``)."""
    far = [rank for rank, kind in types.items() if kind in ("PHB", "SYS")]
    if not far:
        return types
    nvlinked = {int(g) for g in topology.gpus()
                if np.any(topology.link_tier[topology.links_from(int(g))] == LinkTier.SCALE_UP)}
    servers = {int(topology.node_server[topology.node_id(rank)]) for rank in far}
    peers = [topology.node_names[g] for g in nvlinked if int(topology.node_server[g]) in servers]
    near = {peer: kind for peer, kind in nic_path_types(topology, peers, router).items() if kind in ("PIX", "PXB")}
    out = dict(types)
    for rank in far:
        node = topology.node_id(rank)
        if node not in nvlinked:
            continue
        relays = [kind for peer, kind in near.items()
                  if topology.node_nic[topology.node_id(peer)] == topology.node_nic[node]
                  and topology.node_server[topology.node_id(peer)] == topology.node_server[node]]
        if relays:
            out[rank] = relays[0]
    return out


def gpudirect_rdma(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    *,
    nccl_env: Mapping[str, str] | None = None,
    version: str = DEFAULT_NCCL_VERSION,
    router: Router | None = None,
) -> bool:
    """Whether NCCL moves the network traffic of ``ranks`` (default every GPU) with GPUDirect
    RDMA, its NIC reading and writing GPU memory, rather than staging it through host memory.

    NCCL's ``ncclTopoCheckGdr`` ([NCCL] src/graph/paths.cc) allows it where the GPU's path to
    the NIC (:func:`nic_path_types`; for a GPU that reaches it through a peer over NVLink,
    NCCL's PXN, the peer's) is no farther than ``NCCL_NET_GDR_LEVEL``, by default ``PXB``:
    under PCIe switches, not through a CPU. A GPU on NVLink-C2C whose NIC hangs off
    its CPU (a Grace Hopper or Grace Blackwell) counts as near with ``NCCL_NET_GDR_C2C=1``:
    the default from v2.27.3-1 (a ``P2C`` path; from v2.29.2-1 the default level is
    ``P2C``), off by default in v2.26 (where such a path is ``PHB``); before v2.26 NCCL has
    no such variable and the path counts as ``PHB`` (:func:`gdr_path`). NCCL
    decides per GPU, flowsim for all the ranks at once: staged where no rank's path is near
    enough. Where some are, NCCL's rings and trees enter and leave a server through the GPUs
    near its NICs, with GPUDirect RDMA.
    ``NCCL_NET_GDR_LEVEL=LOC`` turns it off for every path, as where the GPU driver cannot
    give the NIC GPU memory (no ``nvidia-peermem`` or DMA-BUF): then NCCL's INFO lines show
    ``via NET/IB/0`` without ``/GDRDMA``. Ranks in one server, whose traffic does not leave
    it, are True.
    """
    ranks = [topology.node_names[g] for g in topology.gpus()] if ranks is None else list(ranks)
    if len(set(rank_servers(topology, ranks).values())) < 2:
        return True
    distances = set(_relayed(topology, nic_path_types(topology, ranks, router), router).values())
    return not distances or any(gdr_path(d, nccl_env=nccl_env, version=version) for d in distances)


def gdr_path(distance: str, *, nccl_env: Mapping[str, str] | None = None,
             version: str = DEFAULT_NCCL_VERSION) -> bool:
    """Whether NCCL takes GPUDirect RDMA over a GPU-NIC path of type ``distance`` (of
    :func:`nic_path_types`) under ``nccl_env`` (``NCCL_NET_GDR_LEVEL``, ``NCCL_NET_GDR_C2C``),
    by ``version``'s rule (:func:`gpudirect_rdma`)."""
    constants = constants_of(version)
    env = NcclEnv(dict(nccl_env or {}))
    c2c = env.integer("NCCL_NET_GDR_C2C")
    if c2c is None:
        c2c = 1 if _since(constants, (2, 27, 3)) else 0
    level = env.gdr_level() or ("P2C" if c2c and _since(constants, (2, 29, 2)) else "PXB")
    if distance == "P2C" and not _since(constants, (2, 29, 2)):
        # Before 2.29.2 a C2C GPU's path to its CPU's NIC counts as C2C where the parameter
        # allows it (2.26: a PHB path from such a GPU; 2.27: a P2C one).
        if c2c and _since(constants, (2, 26, 2)):
            distance = "C2C"
        elif not _since(constants, (2, 27, 3)):
            distance = "PHB"
    return PATH_TYPES.index(distance) <= PATH_TYPES.index(level)


#: The NCCL variables that decide GPUDirect RDMA (:func:`gpudirect_rdma`).
GDR_ENV_KEYS = ("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_C2C")


def gdr_env_key(nccl_env: Mapping[str, str] | None) -> str | None:
    """The first of :data:`GDR_ENV_KEYS` that ``nccl_env`` sets, None where it sets neither."""
    return next((key for key in GDR_ENV_KEYS if key in (nccl_env or {})), None)


def check_routed_env(nccl_env: Mapping[str, str] | None, instead: str) -> None:
    """Refuse :data:`GDR_ENV_KEYS` in ``nccl_env`` where one route table serves every
    collective (a training step's, a scenario's): GPUDirect RDMA is then the routes' own
    option, which ``instead`` names."""
    key = gdr_env_key(nccl_env)
    if key is not None:
        raise InputError(f"NCCL environment: {key} decides GPUDirect RDMA per collective, where these flows "
                         f"are routed one way for all: set {instead} instead")


def nccl_choice(
    topology: Topology,
    collective: str,
    size_bytes: float,
    *,
    ranks: Sequence[str] | None = None,
    nccl_env: Mapping[str, str] | None = None,
    version: str = DEFAULT_NCCL_VERSION,
    gpu_generation: str | None = None,
    allowed: Sequence[str] | None = None,
    router: Router | None = None,
    dtype: str = "float",
    redop: str = "sum",
    gpudirect: bool = True,
) -> NcclChoice:
    """What NCCL would run for ``collective`` of ``size_bytes`` (``S`` as nccl-tests counts
    it) on ``ranks`` (default every GPU of ``topology``), of ``dtype`` reduced by ``redop``.

    Parameters
    ----------
    nccl_env : mapping of str to str, optional
        NCCL environment variables (``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_NVLS_ENABLE``,
        ``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS``, ``NCCL_NTHREADS``, ...; see
        :data:`NCCL_ENV_KEYS`).
    version : str
        A key of :data:`NCCL_VERSIONS`.
    gpu_generation : str, optional
        For GPUs without NVLink: ``"volta"``, ``"ampere"``, ``"hopper"`` or ``"blackwell"``.
    allowed : sequence of str, optional
        NCCL algorithms the choice may take (default all that NCCL would consider); flowsim
        passes the ones it can build.
    router : Router, optional
        A router of ``topology`` to reuse.
    dtype, redop : str
        nccl-tests' data type (:data:`DATA_TYPES`) and reduction (:data:`REDOPS`): NVLS and
        PAT run only the reductions they have (:func:`nvls_refusal`).
    gpudirect : bool
        Whether the ranks' network traffic moves with GPUDirect RDMA (as
        :func:`gpudirect_rdma` decides), or is staged through host memory: NCCL's search
        then sees the paths through the CPU, and LL128 stays inside servers.

    Returns
    -------
    NcclChoice
    """
    constants = constants_of(version)
    check_reduction(dtype, redop)
    if collective not in NCCL_COLLECTIVES:
        raise InputError(f"NCCL's tuner chooses for {', '.join(NCCL_COLLECTIVES)}, not {collective!r}")
    env = NcclEnv(dict(nccl_env or {}))
    env.check()
    if ranks is None:
        ranks = [topology.node_names[g] for g in topology.gpus()]
    ranks = list(ranks)
    if len(ranks) < 2:
        raise InputError(f"{collective} needs at least 2 ranks, got {len(ranks)}")
    system, graphs = _search_once(topology, ranks, constants, gpu_generation, router, gpudirect)
    refused: dict[str, str] = {}
    model = _model(system, graphs, constants, collective, env, dtype, redop, refused)
    if allowed is not None:
        model = {key: value for key, value in model.items() if key[0] in allowed}
    if not model:
        # Why each algorithm the environment allows is out, in NCCL's order.
        whys = [f"{name}: {refused.get(name, 'flowsim does not build it here')}"
                for name in NCCL_ALGORITHMS if name in env.algorithms(collective)
                and (allowed is None or name in allowed or name in refused)]
        raise NoNcclChoice(f"no NCCL algorithm and protocol left for {collective} on these ranks "
                           f"(NCCL_ALGO={env.values.get('NCCL_ALGO', 'unset')}, "
                           f"NCCL_PROTO={env.values.get('NCCL_PROTO', 'unset')})" + "".join(f"; {w}" for w in whys))
    n_bytes = int(size_bytes)
    comm_channels = _comm_channels(system, graphs, constants, env)
    unbounded = NcclEnv({key: value for key, value in env.values.items() if key not in _CHANNEL_BOUNDS})
    model_channels = _comm_channels(system, graphs, constants, unbounded)
    table = {key: _time_us(system, constants, collective, key[0], key[1], lat, algbw, n_bytes, comm_channels)
             for key, (lat, algbw, _) in model.items()}
    ranked = dict(table)
    if dtype in FP8_TYPES and system.n_ranks > 8 and _since(constants, (2, 24, 3)):
        # Rings of FP8 on more than 8 ranks lose precision, so NCCL ranks them last: their
        # times x 1024 ([NCCL] src/enqueue.cc updateCollCostTable, v2.24.3-1 to v2.30.7-1),
        # a rank, not a time: the table keeps the model's times.
        ranked = {key: value * (FP8_RING_PENALTY if key[0] == "ring" else 1.0) for key, value in table.items()}
    algorithm, protocol = min(ranked, key=lambda key: (ranked[key], NCCL_ALGORITHMS.index(key[0]),
                                                       NCCL_PROTOCOLS.index(key[1])))
    max_threads = _max_threads(algorithm, protocol, graphs, env)
    nvls = None
    if algorithm in ("nvls", "nvls_tree"):
        # NVLS runs nvlsChannels, no shrink; NVLS across servers (with CollNet) at most the
        # communicator's channels ([NCCL] src/enqueue.cc topoGetAlgoInfo).
        nvls = nvls_tuning(system, constants, env)
        max_channels = nvls.n_channels
        # NCCL's model bandwidth is its search's (graphs[NVLS]->nChannels x bw) whatever
        # NCCL_NVLS_NCHANNELS or the CTA bounds make of the call's channels, as for rings:
        # each channel moves its share of what NCCL runs the call on unbounded
        # (src/graph/tuning.cc; src/enqueue.cc topoGetAlgoInfo).
        model_channels = nvls_tuning(system, constants, NcclEnv(
            {key: value for key, value in unbounded.values.items() if key != "NCCL_NVLS_NCHANNELS"})).n_channels
        if algorithm == "nvls" and system.n_nodes > 1:
            max_channels = min(max_channels, comm_channels)
            model_channels = min(model_channels, _comm_channels(system, graphs, constants, unbounded))
            # Chunks of at most 32 KiB where the model's NVLS all-reduce moves under 150 GB/s,
            # whatever the call (0 where it is off; [NCCL] src/enqueue.cc calcCollChunking).
            all_reduce = _model(system, graphs, constants, "all_reduce", env).get(("nvls", "simple"))
            if all_reduce is None or all_reduce[1] < 150:
                nvls = dataclasses.replace(nvls, chunk_bytes=min(nvls.chunk_bytes, 32768))
        n_channels, n_threads = max_channels, max_threads
    elif algorithm == "collnet_direct":
        max_channels = comm_channels
        n_channels = _collnet_shrink(n_bytes, comm_channels, max_threads, graphs["collnet_direct"].n_channels)
        n_threads = max_threads
    else:
        max_channels = comm_channels
        n_channels, n_threads = _shrink(n_bytes, comm_channels, max_threads,
                                        _threshold(algorithm, protocol, system.n_ranks))
    latency, algbw, bus = model[(algorithm, protocol)]
    bandwidth_us = _time_us(system, constants, collective, algorithm, protocol, 0.0, algbw, n_bytes, comm_channels)
    return NcclChoice(algorithm, protocol, n_channels, max_channels, n_threads, table[(algorithm, protocol)], bus,
                      table, system, constants.version,
                      model_latency_us=table[(algorithm, protocol)] - bandwidth_us, nvls=nvls, buffers=env.buffers(),
                      fallback=graphs[_graph_of(algorithm)].fallback, net_overhead_ns=env.integer("NCCL_NET_OVERHEAD"),
                      model_channels=model_channels)


def communicator_channels(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    *,
    nccl_env: Mapping[str, str] | None = None,
    version: str = DEFAULT_NCCL_VERSION,
    router: Router | None = None,
    gpudirect: bool = True,
) -> tuple[int, int]:
    """The communicator's ring and tree channels and its NVLS channels (0 where NCCL runs no
    NVLS), as NCCL's INFO line prints them once it has set its tuning model: ``16 coll
    channels, 16 collnet channels, 16 nvls channels, ...`` ([NCCL] src/init.cc); ``gpudirect``
    as :func:`nccl_choice`'s."""
    constants = constants_of(version)
    env = NcclEnv(dict(nccl_env or {}))
    env.check()
    ranks = [topology.node_names[g] for g in topology.gpus()] if ranks is None else list(ranks)
    system, graphs = _search_once(topology, ranks, constants, None, router, gpudirect)
    nvls = "nvls" in graphs and env.integer("NCCL_NVLS_ENABLE") != 0 and graphs["nvls"].n_channels > 0
    return _comm_channels(system, graphs, constants, env), nvls_tuning(system, constants, env).n_channels if nvls else 0


# Search results per topology object: a topology is immutable, and its search depends only on
# the ranks, the constants and the GPU generation, while a sweep over sizes (or a training
# step's buckets) asks for the same ones again and again. The point-to-point channels a
# server's pairs ask for (:func:`_local_p2p_channels`) are kept here too.
_SEARCHES: dict[int, tuple[weakref.ref, dict[tuple, Any]]] = {}


def _forget(ident: int, _: weakref.ref) -> None:
    _SEARCHES.pop(ident, None)


def _searched(topology: Topology) -> dict[tuple, Any]:
    """The results kept for ``topology``, dropped with it."""
    ident = id(topology)
    entry = _SEARCHES.get(ident)
    if entry is None or entry[0]() is not topology:
        entry = (weakref.ref(topology, functools.partial(_forget, ident)), {})
        _SEARCHES[ident] = entry
    return entry[1]


def _search_once(topology: Topology, ranks: Sequence[str], constants: NcclConstants, gpu_generation: str | None,
                 router: Router | None, gpudirect: bool = True) -> tuple[NcclSystem, dict[str, NcclGraph]]:
    """:func:`describe_system` and :func:`_graphs`, computed once per topology, ranks and
    GPUDirect RDMA."""
    searched = _searched(topology)
    key = (tuple(ranks), constants.version, gpu_generation, gpudirect)
    if key not in searched:
        router = router or Router(topology)
        system = describe_system(topology, ranks, gpu_generation=gpu_generation)
        graphs = _graphs(topology, ranks, system, constants, router, gpudirect)
        if system.n_nodes > 1:
            servers = rank_servers(topology, ranks)
            first = [r for r in ranks if servers[r] == servers[ranks[0]]]
            net_GBps, nic_near, nic_pxn = _nic_paths(topology, router, first, constants, gpudirect)
            system = dataclasses.replace(system, net_GBps=net_GBps, nic_near=nic_near, nic_pxn=nic_pxn,
                                         gpudirect=gpudirect)
        searched[key] = (system, graphs)
    return searched[key]


def _nic_paths(topology: Topology, router: Router, gpus: Sequence[str],
               constants: NcclConstants, gpudirect: bool = True) -> tuple[float, bool, bool]:
    """The paths from ``gpus`` (one server's) to their NICs: the slowest one's NCCL bandwidth
    (GB/s; ``minNetBw``, [NCCL] src/graph/topo.cc ``ncclTopoGetMinNetBw``), whether all stay
    under PCIe switches (``PATH_PXB`` or nearer: no CPU on the way) and whether one does.

    A path ends at NCCL's NET node, behind the NIC's link at its line rate (``ncclTopoAddNet``
    connects NIC and NET with ``LINK_NET`` at the port's speed, [NCCL] src/graph/topo.cc,
    2.23.4): a 100 Gb/s NIC behind a PCIe Gen4 x16 link is a 12.5 GB/s path, not 24.
    Without ``gpudirect`` the paths go through the GPU's CPU and host memory (``PATH_PHB``),
    and no GPU offers its NIC to the others (PXN needs GPUDirect RDMA on the GPU that
    relays, [NCCL] src/graph/paths.cc)."""
    nics = [int(topology.node_nic[topology.node_id(g)]) for g in gpus]
    if min(nics) < 0:
        # A server's GPUs lose their NIC only where failures (--fail, a scenario's fail) took
        # every NIC of its compute network (flowsim.failures).
        raise InputError(f"rank {gpus[nics.index(min(nics))]!r} has no NIC to leave its server through: "
                         "the failures given took every NIC of its server's compute network")
    routes = router.route(list(gpus), [topology.node_names[nic] for nic in nics], method="shortest",
                          gpudirect=gpudirect)
    line_rates = {nic: max((_nccl_link_bw(topology, int(link), constants) / _port_split(topology, int(link), constants)
                            for link in topology.links_from(nic)
                            if topology.link_tier[link] == LinkTier.SCALE_OUT), default=math.inf)
                  for nic in set(nics)}
    slowest = min(min(path, line_rates[nic])
                  for path, nic in zip(_route_bandwidths(topology, routes, constants), nics, strict=True))
    off_cpu = [all(topology.node_kind[int(topology.link_dst[link])] not in (NodeKind.CPU, NodeKind.HOST_MEMORY)
                   for link in routes.route(f).tolist()) for f in range(routes.n_flows)]
    return slowest, all(off_cpu), any(off_cpu)


def _comm_channels(system: NcclSystem, graphs: Mapping[str, NcclGraph], constants: NcclConstants,
                   env: NcclEnv) -> int:
    """The communicator's channels: twice the ring/tree graphs' (src/graph/connect.cc), and the
    user's NCCL_MIN/MAX_NCHANNELS."""
    top = max_channels(constants.version)
    n = min(top, 2 * min(graphs["ring"].n_channels, graphs["tree"].n_channels))
    chain = graphs["tree"]
    if _collnet_off(system, env) is None and chain.bw_intra > chain.bw_inter and system.n_ranks > system.n_nodes:
        # With CollNet, half as many again "to saturate intra-node bandwidth" where its chain
        # graph's intra-node speed is the higher ([NCCL] src/graph/connect.cc ncclTopoPostset).
        n = min(top, n + n // 2)
    # Doubled again across Hopper servers with fast rings: SM90 only and up to 64 channels in
    # [NCCL] v2.19.3-1 src/graph/connect.cc, below 16 channels from v2.20.3-1, and from SM90
    # on (Blackwell too) from v2.25.1-1.
    hopper_on = system.sm >= 90 if _since(constants, (2, 25, 1)) else system.sm == 90
    room = n < 16 if _since(constants, (2, 20, 3)) else 2 * n <= top
    if hopper_on and system.n_nodes > 1 and graphs["ring"].bw_intra > 45.0 and room:
        n *= 2
    # NCCL takes the first of them up to the most, then copies them up to the least, which
    # may be more ([NCCL] v2.30.7-1 src/graph/connect.cc ncclTopoPostset: "We permit combining
    # max, then min, to only use the first channels, then duplicate them").
    least_ctas, most_ctas = _cta_bounds(env, constants)
    n = min(_nchannels_bound(env, constants, "MAX"), n, most_ctas)
    n = max(n, _nchannels_bound(env, constants, "MIN"), least_ctas)
    if "nvls" in graphs and env.integer("NCCL_NVLS_ENABLE") != 0 and system.ppn > 2 \
            and _since(constants, (2, 22, 3)) and not _since(constants, (2, 28, 3)):
        # From 2.22.3 to 2.27.7 rings and trees ran on at least NVLS's channels where NVLS is
        # supported ([NCCL] v2.26.2-1 src/graph/connect.cc ncclTopoPostset: "if (comm->nChannels
        # < comm->nvlsChannels)" copyChannels; src/transport/nvls.cc ncclNvlsInit); 2.28.3 dropped it.
        n = max(n, nvls_tuning(system, constants, env).n_channels)
    return max(1, n)


#: The user's bounds on the communicator's channels (:func:`_comm_channels`).
_CHANNEL_BOUNDS = frozenset({"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS"})


def max_channels(version: str = DEFAULT_NCCL_VERSION) -> int:
    """``MAXCHANNELS`` of NCCL ``version`` ([NCCL] src/include/device.h): 64 from v2.25.1-1,
    32 before. No communicator has more channels, nor any call."""
    return 64 if _since(constants_of(version), (2, 25, 1)) else 32


def _nchannels_bound(env: NcclEnv, constants: NcclConstants, which: str) -> int:
    """``ncclMinNchannels()`` or ``ncclMaxNchannels()`` (``which``: ``"MIN"`` or ``"MAX"``;
    [NCCL] v2.19.3-1 to v2.30.7-1 src/graph/connect.cc): ``NCCL_{which}_NCHANNELS``, else
    ``NCCL_{which}_NRINGS`` (-2 is unset), the least from 0 to ``MAXCHANNELS``, the most from 1
    to it; what NCCL logs on the way is :func:`channel_env_notes`'."""
    top = max_channels(constants.version)
    value = None
    for key in (f"NCCL_{which}_NRINGS", f"NCCL_{which}_NCHANNELS"):
        given = env.integer(key)
        if given is not None and given != -2:
            value = given
    if which == "MIN":
        return 0 if value is None else max(0, min(top, value))
    return top if value is None else max(1, min(top, value))


def _cta_bounds(env: NcclEnv, constants: NcclConstants) -> tuple[int, int]:
    """The communicator's ``minCTAs`` and ``maxCTAs`` from ``NCCL_MIN_CTAS`` and
    ``NCCL_MAX_CTAS`` ([NCCL] v2.30.7-1 src/init.cc ``envConfigOverride``,
    ``parseCommConfig``): 1 and ``MAXCHANNELS`` unless set, each capped at ``MAXCHANNELS``,
    the least lowered to the most where above it. From v2.25.1-1 NCCL leaves a value below 1
    unset ("too low"); before, it took it, and a most below 1 left the communicator no channel,
    which is refused."""
    top = max_channels(constants.version)
    bounds = {"MIN": 1, "MAX": top}
    for which in bounds:
        given = env.integer(f"NCCL_{which}_CTAS")
        if given is None:
            continue
        if given <= 0 and which == "MAX" and not _since(constants, (2, 25, 1)):
            raise InputError(f"NCCL environment: NCCL_MAX_CTAS={given} leaves NCCL {constants.version} no channel "
                             "(from 2.25.1 NCCL ignores a value below 1)")
        if given > 0:
            bounds[which] = min(top, given)
    return min(bounds["MIN"], bounds["MAX"]), bounds["MAX"]


def channel_env_notes(nccl_env: Mapping[str, str] | None, version: str = DEFAULT_NCCL_VERSION) -> list[str]:
    """What NCCL ``version`` logs (a WARN, or an INFO from v2.25.1-1 or v2.27.3-1) as it
    takes the channel counts of ``nccl_env`` otherwise than given, one line each, as
    :func:`nccl_choice` takes them too: ``NCCL_MIN_NCHANNELS`` above ``MAXCHANNELS``,
    ``NCCL_MAX_NCHANNELS`` below 1 ([NCCL] src/graph/connect.cc), ``NCCL_MIN_CTAS`` and
    ``NCCL_MAX_CTAS`` below 1 or above ``MAXCHANNELS``, a least above the most (src/init.cc);
    and ``NCCL_MAX_NCHANNELS`` above ``MAXCHANNELS``, which NCCL lowers without a word.

    >>> channel_env_notes({"NCCL_MAX_NCHANNELS": "0"})
    ['NCCL_MAX_NCHANNELS=0: NCCL runs at most 1 channel ("User asked for a maximum of 0 channels, setting it to 1")']
    """
    constants = constants_of(version)
    env = NcclEnv(dict(nccl_env or {}))
    top = max_channels(version)
    notes = []
    for which in ("MIN", "MAX"):
        set_to = {key: env.integer(key) for key in (f"NCCL_{which}_NCHANNELS", f"NCCL_{which}_NRINGS")}
        key, given = next(((k, v) for k, v in set_to.items() if v is not None and v != -2), ("", None))
        taken = _nchannels_bound(env, constants, which)
        if given is None or given == taken:
            continue
        if which == "MIN" and given > top:
            notes.append(f'{key}={given}: NCCL takes {top} ("User asked for a minimum of {given} channels, limiting '
                         f'to {top}")')
        elif which == "MIN":
            notes.append(f"{key}={given}: NCCL takes 0, no least")
        else:
            why = (f'"User asked for a maximum of {given} channels, setting it to 1"' if given < 1
                   else f"MAXCHANNELS of NCCL {version}")
            notes.append(f"{key}={given}: NCCL runs at most {taken} channel{'' if taken == 1 else 's'} ({why})")
    least = env.integer("NCCL_MIN_CTAS")
    most = env.integer("NCCL_MAX_CTAS")
    for key, given, default in (("NCCL_MIN_CTAS", least, 1), ("NCCL_MAX_CTAS", most, top)):
        if given is None:
            continue
        if given <= 0 and _since(constants, (2, 25, 1)):
            notes.append(f"{key}={given}: NCCL ignores it as too low and keeps {default}")
        elif given > top:
            notes.append(f"{key}={given}: NCCL takes {top} (\"{key[5:8].lower()}CTAs {given} is larger than #channels "
                         f"upper limit {top}, cap it to {top}\")")
    taken_most = _cta_bounds(env, constants)[1]
    if least is not None and least > 0 and min(least, top) > taken_most:
        notes.append(f"NCCL_MIN_CTAS={least} is above NCCL_MAX_CTAS={most}: NCCL takes {taken_most} for both "
                     f"(\"minCTAs {min(least, top)} is larger than maxCTAs {taken_most}, set both to {taken_most}\")")
    return notes


def _max_threads(algorithm: str, protocol: str, graphs: Mapping[str, NcclGraph], env: NcclEnv) -> int:
    """comm->maxThreads (ncclTopoTuneModel), NCCL_NTHREADS included."""
    if protocol == "ll128":
        return _LL128_MAX_NTHREADS
    if protocol == "ll":
        default = _LL_MAX_NTHREADS
    elif algorithm == "ring":
        ring = graphs["ring"]
        default = 256 if ring.bw_intra * ring.n_channels <= _PCI_BW else _SIMPLE_MAX_NTHREADS
    elif algorithm == "tree":
        default = _SIMPLE_MAX_NTHREADS
    else:
        return _MAX_NTHREADS
    wanted = env.integer("NCCL_NTHREADS")
    if wanted is None or wanted <= 0:
        return default
    most = _LL_MAX_NTHREADS if protocol == "ll" else _SIMPLE_MAX_NTHREADS
    return most if wanted % _WARP else min(max(wanted, 2 * _WARP), most)


def _threshold(algorithm: str, protocol: str, n_ranks: int) -> int:
    if algorithm in COLLNET_ALGORITHMS:
        return _COLLNET_THREAD_THRESHOLD
    threshold = _THREAD_THRESHOLD[protocol]
    return threshold * n_ranks if algorithm == "ring" and protocol == "ll" else threshold


def _collnet_shrink(n_bytes: int, n_channels: int, n_threads: int, n_heads: int) -> int:
    """topoGetAlgoInfo's "CollNet channel tuning": fewer channels while bytes < channels x
    threads x heads x threshold, down to 16, then 8, 4, 2 and 1 while it still holds, the
    threshold halved at each of 24, 12, 6 and 3 channels; the threads stay."""
    threshold = _COLLNET_THREAD_THRESHOLD
    floor = 16
    short = True
    while floor >= 1 and short:
        while True:
            short = n_bytes < n_channels * n_threads * n_heads * threshold
            if not (short and n_channels > floor):
                break
            if n_channels == floor + floor // 2:
                threshold //= 2
            n_channels -= 1
        floor //= 2
    return n_channels


def _shrink(n_bytes: int, n_channels: int, n_threads: int, threshold: int) -> tuple[int, int]:
    """topoGetAlgoInfo: fewer channels, then fewer threads, while bytes < channels x threads x
    threshold."""
    while n_bytes < n_channels * n_threads * threshold and n_channels >= 2:
        n_channels -= 1
    while n_bytes < n_channels * n_threads * threshold and n_threads % 128 == 0:
        n_threads //= 2
    return n_channels, n_threads


# --- point-to-point channels ---------------------------------------------------------------

#: What one point-to-point channel to a peer across the network moves, GB/s of payload:
#: ``NCCL_P2P_PER_CHANNEL_NET_BW``'s default ([NCCL] v2.29.2-1 src/graph/paths.cc
#: ``ncclTopoGetNchannels``), by which NCCL from 2.29.2 gives a network peer as many channels
#: as fill the GPU's NICs. flowsim holds each such channel to it, in every version
#: (docs/model.md "Point-to-point channels").
P2P_PER_CHANNEL_NET_GBPS = 14.0
#: Payload bytes one point-to-point channel moves to a peer inside an NVLink server per cycle
#: of its GPU's SM clock (:func:`~flowsim.hardware.gpu_sm_clock_GHz`), the channel sending
#: and receiving as in nccl-tests' sendrecv. Measured, not from NCCL: 8 H100 (NCCL 2.29.2,
#: data/validation/nccl_tests/xxrjun_h100_1n8g_sendrecv.txt) send 32, 64 and 128 MiB on 4,
#: 4 and 8 channels in 422, 820 and 826 us; a row's part a channel plus the one 512 KiB chunk
#: that is copied out after it, over its time less the model's 11.8 us latency, is 21.7, 21.4
#: and 21.3 GB/s; the median, 21.40 GB/s, over 1.98 GHz. Held out: 8 A100 at 1.41 GHz, 4 of
#: the H100, and all-to-all on both (docs/model.md "Point-to-point channels").
P2P_NVLINK_BYTES_PER_CYCLE = 10.81
# NCCL_MAX_DEV_WORK_P2P_PER_BATCH ([NCCL] src/include/device.h): the peers one channel
# serves in a batch.
_P2P_PER_BATCH = 8
# NCCL_P2P_NET_CHUNKSIZE, NCCL_P2P_NVL_CHUNKSIZE, NCCL_P2P_PCI_CHUNKSIZE ([NCCL] src/init.cc).
_P2P_CHUNK_BYTES = {"net": 1 << 17, "nvlink": 1 << 19, "pci": 1 << 17}


def _pow2_up(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class P2pChannels:
    """NCCL's point-to-point channels in one communicator.

    Attributes
    ----------
    per_peer : int
        ``p2pnChannelsPerPeer``: the most channels a send to one peer runs on.
    total : int
        ``p2pnChannels``: the channels every rank's sends and receives share.
    n_ranks, n_nodes : int
        The communicator's ranks and servers.
    chunk_bytes : int
        ``p2pChunkSize``: 128 KiB across servers (256 KiB on Blackwell with Grace hosts from
        2.29.2), 512 KiB inside an NVLink server, 128 KiB over PCIe (``NCCL_P2P_NET_CHUNKSIZE``,
        ``NCCL_P2P_NVL_CHUNKSIZE``, ``NCCL_P2P_PCI_CHUNKSIZE``), at most a slot of the Simple
        buffer (``NCCL_BUFFSIZE`` / 8).
    version : str
        The NCCL version whose rules these are.
    sm : int
        The GPUs' compute capability x 10 (:attr:`NcclSystem.sm`); 0 unknown.
    """

    per_peer: int
    total: int
    n_ranks: int
    n_nodes: int
    chunk_bytes: int
    version: str = DEFAULT_NCCL_VERSION
    sm: int = 0

    @property
    def reads(self) -> bool:
        """Over NVLink NCCL reads the peer's buffer rather than writing it: on Ampere
        (compute capability 8.0) only ([NCCL] v2.29.7-1 src/graph/paths.cc ``ncclTopoCheckP2p``,
        "Enable P2P Read for Ampere/NVLink only")."""
        return self.sm == 80

    @property
    def nvlink_channel_GBps(self) -> float | None:
        """What one channel to a peer in the same server moves over NVLink (GB/s of payload):
        :func:`half_block_nvlink_GBps`; ``None`` where the clock is not known (docs/hardware.md
        §1.5), and then only the links hold a channel."""
        return half_block_nvlink_GBps(self.sm)

    def for_send(self, n_bytes: float) -> int:
        """The channels one send of ``n_bytes`` to a peer runs on ([NCCL] src/enqueue.cc
        ``scheduleP2pTasksToPlan``, ``addP2pToPlan``): from as many as let every rank's peers
        have a channel each (``per_peer`` halved while ``per_peer x n_ranks`` exceeds
        ``total``), doubling up to ``per_peer`` while a channel's part exceeds the largest
        (a chunk across servers, 32 chunks inside one). Before 2.22.3 the parts are at
        least an eighth of a chunk and, inside one server, the most a send takes is ``per_peer``
        halved while ``per_peer x n_ranks`` exceeds ``4 x total`` (v2.19.3-1 enqueue.cc
        ``calcP2pChunkSize``)."""
        n_bytes = int(n_bytes)
        if n_bytes <= 0:
            return 1
        most = least = self.per_peer
        old = not _since(constants_of(self.version), (2, 22, 3))
        if not old or self.n_nodes == 1:
            while least * self.n_ranks > self.total and least > 1:
                least //= 2
        if old and self.n_nodes == 1:
            while most * self.n_ranks > 4 * self.total and most > 1:
                most //= 2
        step = self.chunk_bytes
        smallest = step // 2 if self.n_nodes > 1 and not old else step // 8
        largest = step if self.n_nodes > 1 else 32 * step
        n = least if old else min(least, _ceil_div(n_bytes, smallest))
        part = max(smallest, _ceil_div(n_bytes, n))
        while part > largest and n <= most // 2:
            n *= 2
            part = _ceil_div(n_bytes, n)
        if old:
            # Chunks of the part rounded up to the smallest, one channel each.
            return min(n, _ceil_div(n_bytes, _ceil_div(part, smallest) * smallest))
        return n


def half_block_nvlink_GBps(sm: int) -> float | None:
    """What half of a channel's thread block moves to a GPU of its server over NVLink, GB/s
    of payload: :data:`P2P_NVLINK_BYTES_PER_CYCLE` at the SM clock of compute capability
    ``sm`` (x 10), None where the clock is not known. A point-to-point channel splits its
    block between its send and its receive ([NCCL] v2.30.7-1 src/device/sendrecv.h), a Simple
    tree's between reducing up and broadcasting down (src/device/all_reduce.h
    ``runTreeSplit``); docs/model.md "Point-to-point channels" and "Tree channels"."""
    clock = gpu_sm_clock_GHz(sm)
    return None if clock is None else P2P_NVLINK_BYTES_PER_CYCLE * clock


def p2p_channels(
    topology: Topology,
    ranks: Sequence[str],
    *,
    nccl_env: Mapping[str, str] | None = None,
    version: str = DEFAULT_NCCL_VERSION,
    router: Router | None = None,
    gpudirect: bool = True,
) -> P2pChannels:
    """NCCL's point-to-point channels in a communicator of ``ranks`` on ``topology``.

    The communicator's channels (:func:`nccl_choice`'s, within ``NCCL_MIN_P2P_NCHANNELS`` and
    ``NCCL_MAX_P2P_NCHANNELS``) rounded up to a power of two are the point-to-point ones
    ([NCCL] src/graph/paths.cc ``ncclTopoComputeP2pChannels``). Each peer gets the fewest
    channels any pair of ranks asks for, rounded up to a power of two (``ncclTopoGetNchannels``):

    - a peer in the same server over NVLink twice its NVLinks (the path's bandwidth over one
      NVLink's, topo.h; through another GPU too from 2.30.7), else 2;
    - a peer across the network ``NCCL_NCHANNELS_PER_NET_PEER`` where set, else: from 2.29.2
      one per :data:`P2P_PER_CHANNEL_NET_GBPS` of the GPU's NIC path
      (``NCCL_P2P_PER_CHANNEL_NET_BW``), at least one per NIC; from 2.20.3 two, halved while
      two per rank exceed four per point-to-point channel, at least one per NIC; before, 2.

    From 2.29.2, across servers, the per-peer channels then halve while a batch of 8 peers
    each (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``) exceeds the point-to-point channels, unless
    ``NCCL_NCHANNELS_PER_NET_PEER`` is set; otherwise (and before) at most the point-to-point
    channels. The servers are taken to be alike: the pairs looked at are those of the first
    server with two ranks. flowsim's servers reach the network through one NIC per GPU (a
    system file's NICs per GPU are one, of their summed speed), so a GPU's NIC count is one.
    ``gpudirect`` as :func:`nccl_choice`'s.
    """
    constants = constants_of(version)
    env = NcclEnv(dict(nccl_env or {}))
    ranks = list(ranks)
    system, graphs = _search_once(topology, ranks, constants, None, router, gpudirect)
    raw = _comm_channels(system, graphs, constants, env)
    most, least = env.integer("NCCL_MAX_P2P_NCHANNELS"), env.integer("NCCL_MIN_P2P_NCHANNELS")
    if most is not None:
        raw = min(raw, max(1, most))
    if least is not None:
        raw = max(raw, least)
    total = min(_pow2_up(raw), max_channels(version))
    new_rule = _since(constants, (2, 29, 2))
    asked = [] if new_rule else [raw]
    servers = rank_servers(topology, ranks)
    by_server: dict[str, list[str]] = {}
    for rank in ranks:
        by_server.setdefault(servers[rank], []).append(rank)
    members = next((m for m in by_server.values() if len(m) > 1), None)
    if members is not None:
        searched = _searched(topology)
        key = ("p2p", tuple(members), constants.version)
        if key not in searched:
            searched[key] = _local_p2p_channels(topology, members, constants, router or Router(topology))
        asked.append(searched[key])
    per_net = env.integer("NCCL_NCHANNELS_PER_NET_PEER")
    if per_net is not None and per_net <= 0:
        per_net = None  # NCCL keeps its default for a value below 1 (src/init.cc)
    if system.n_nodes > 1:
        if per_net is not None:
            asked.append(per_net)
        elif new_rule:
            per_channel = env.integer("NCCL_P2P_PER_CHANNEL_NET_BW") or int(P2P_PER_CHANNEL_NET_GBPS)
            asked.append(max(1, _ceil_div(int(system.net_GBps), max(1, per_channel))))
        elif _since(constants, (2, 20, 3)):
            two = 2
            while two * system.n_ranks > 4 * raw and two > 1:
                two //= 2
            asked.append(max(1, two))
        else:
            asked.append(2)
    per_peer = _pow2_up(min(asked)) if asked else 1
    if new_rule and system.n_nodes > 1 and per_net is None:
        while per_peer * _ceil_div(system.n_ranks, _P2P_PER_BATCH) > total and per_peer > 1:
            per_peer //= 2
    else:
        per_peer = min(per_peer, total)
    if system.n_nodes > 1:
        # Twice as large on Blackwell with Arm hosts (GB200's Grace, reached over NVLink-C2C)
        # from 2.29.2 ([NCCL] v2.29.2-1 src/init.cc: "GBx platforms only have 4 GPUs per host").
        grace = any(topology.link_technology[link] == "nvlink_c2c" for link in topology.links_from(ranks[0]))
        chunk = env.chunk(_P2P_CHUNK_KEYS["net"], _P2P_CHUNK_BYTES["net"])
        chunk *= 2 if grace and system.sm >= 100 and new_rule else 1
    else:
        kind = "nvlink" if system.intra == "nvlink" else "pci"
        chunk = env.chunk(_P2P_CHUNK_KEYS[kind], _P2P_CHUNK_BYTES[kind])
    # At most a slot of the Simple buffer ([NCCL] src/init.cc computeBuffSizes, every version
    # flowsim has: "Make sure P2P chunksize is not larger than coll chunksize").
    chunk = min(chunk, env.buffers()["simple"] // NCCL_STEPS)
    return P2pChannels(per_peer, total, system.n_ranks, system.n_nodes, chunk, constants.version, system.sm)


def _local_p2p_channels(topology: Topology, members: Sequence[str], constants: NcclConstants, router: Router) -> int:
    """The fewest channels a pair of ``members`` (one server's ranks) asks for
    (``ncclTopoGetNchannels``): over NVLink twice the path's bandwidth in NVLinks, else 2."""
    pairs = [(a, b) for a in members for b in members if a != b]
    routes = router.route([a for a, _ in pairs], [b for _, b in pairs], method="shortest")
    bandwidths = _route_bandwidths(topology, routes, constants)
    through_gpus = _since(constants, (2, 30, 7))
    fewest = math.inf
    for f, bandwidth in enumerate(bandwidths):
        links = routes.route(f).tolist()
        nvlink = all(topology.link_tier[link] == LinkTier.SCALE_UP for link in links)
        via = [int(topology.link_dst[link]) for link in links[:-1]]
        if nvlink and (through_gpus or all(topology.node_kind[node] != NodeKind.GPU for node in via)):
            one = constants.nvlink_bw.get(topology.link_technology[links[0]], bandwidth)
            fewest = min(fewest, 2 * max(1, int(bandwidth / one)))
        else:
            fewest = min(fewest, 2)
    return int(fewest)
