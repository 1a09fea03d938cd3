"""NCCL's software costs: a base latency per collective, a latency per step, the
protocol's wire efficiency.

:class:`CollectiveCosts` gives the time NCCL's own tuning model charges ([NCCL]
``src/graph/tuning.cc``, docs/hardware.md §7.2-7.3): a base latency once per collective (added to
the messages that wait for nothing) and a per-step latency on every message, the
intra-server one (NVLink or PCIe) or the inter-server one (network) depending on whether the
message leaves its server. These are overheads on top of the route latency the topology
gives. The protocol's wire efficiency (LL carries 50% payload, LL128 120/128) inflates the
bytes on the wire. Each slice pays the per-step latency (one CTA per channel waits for,
copies and posts its slices one after another), so slicing adds ``(slices - 1)`` step
latencies to the critical path. LL and LL128 stream (:attr:`CollectiveCosts.streams`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowsim.collectives.constants import (
    DEFAULT_NCCL_VERSION,
    NCCL_ALGORITHMS,
    NCCL_PROTOCOLS,
    constants_of,
)
from flowsim.errors import InputError

__all__ = [
    "NVLS_BUSBW_CEILING_GBPS",
    "NVLS_EFFICIENCY",
    "P2P_NVLINK_EFFICIENCY",
    "PAT_PER_RANK_US",
    "PROTOCOLS",
    "CollectiveCosts",
    "collnet_costs",
    "nccl_costs",
    "nvls_costs",
    "nvls_sharp_costs",
    "nvls_tree_costs",
    "pat_costs",
]

#: NCCL protocols, in the order of NCCL's constant arrays.
PROTOCOLS = NCCL_PROTOCOLS

_US = 1e-6
# Payload fraction on the wire ([NCCL] device.h, docs/hardware.md §7.1): LL lines carry 4 B of data
# per 8 B; LL128 lines 120 B per 128 B; Simple sends whole chunks.
_WIRE_EFFICIENCY = (0.5, 120 / 128, 1.0)




@dataclass(frozen=True)
class CollectiveCosts:
    """Software costs a collective's messages pay on top of their routes.

    Attributes
    ----------
    base_s : float
        Once per collective (added to the messages that wait for nothing), >= 0.
    intra_step_s, inter_step_s : float
        Per message between ranks of one server / of different servers, >= 0.
    wire_efficiency : float
        Payload fraction of the bytes on the wire, in (0, 1]: a message of ``b`` payload
        bytes is a flow of ``b / wire_efficiency`` bytes.
    source : str
        Where the numbers come from.
    intra_wire_efficiency : float or None
        Where set, the payload fraction of messages between ranks of one server, in (0, 1],
        instead of ``wire_efficiency`` (which then applies to messages between servers).
    streams : bool
        The protocol forwards data line by line (NCCL's LL and LL128 post every 16- or
        128-byte line with its flag, [NCCL] src/device/prims_ll.h, prims_ll128.h): a tree or
        chain hop starts forwarding one step latency after the hop feeding it starts, not
        after it ends. False (Simple): a hop forwards a chunk once it has arrived.
    """

    base_s: float
    intra_step_s: float
    inter_step_s: float
    wire_efficiency: float
    source: str
    streams: bool = False
    intra_wire_efficiency: float | None = None

    def __post_init__(self) -> None:
        for what in ("base_s", "intra_step_s", "inter_step_s"):
            value = getattr(self, what)
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"collective cost {what} is {value!r}; it must be finite and >= 0")
        for what in ("wire_efficiency", "intra_wire_efficiency"):
            value = getattr(self, what)
            if value is not None and not 0 < value <= 1:
                raise InputError(f"{what} is {value!r}; it must be in (0, 1]")

    @classmethod
    def zero(cls) -> CollectiveCosts:
        """No software cost, no protocol overhead: bandwidth and route latency only."""
        return cls(0.0, 0.0, 0.0, 1.0, "none: bandwidth and route latency only")


def nccl_costs(
    algorithm: str = "ring", protocol: str = "simple", intra: str = "nvlink", *, version: str = DEFAULT_NCCL_VERSION,
    net_latency_us: float = 0.0,
) -> CollectiveCosts:
    """NCCL's latency constants and the protocol's wire efficiency.

    Parameters
    ----------
    algorithm : {"ring", "tree"}
        NCCL algorithm whose ``baseLat`` / ``hwLat`` row to use. Chains (broadcast, reduce)
        use the ring row; point-to-point messages have no row of their own and use it too.
    protocol : {"ll", "ll128", "simple"}
    intra : {"nvlink", "pci"}
        Hardware between ranks of one server; between servers it is the network (``NET``).
    version : str
        NCCL version whose constants apply (a key of
        :data:`flowsim.collectives.constants.NCCL_VERSIONS`; default the newest).
    net_latency_us : float
        The network plugin's latency, which NCCL's model adds to the network's step latency,
        twice for Simple: the reported figure (:attr:`flowsim.collectives.NcclSystem.net_latency_us`)
        where it is what a step pays, and the collective placement passes the servers' own
        (:attr:`flowsim.topology.Topology.server_step_latency_s`, docs/model.md "Latency the
        network plugin reports").

    Returns
    -------
    CollectiveCosts
        ``base_s = baseLat``, ``intra_step_s = hwLat[intra]``, ``inter_step_s = hwLat[NET]``
        (plus the plugin's latency) of that version (docs/hardware.md §7.3); LL 50% and LL128
        120/128 payload.

    Examples
    --------
    >>> c = nccl_costs("ring", "simple")
    >>> round(c.base_s * 1e6, 1), round(c.intra_step_s * 1e6, 1), round(c.inter_step_s * 1e6, 1)
    (8.4, 3.4, 14.0)
    """
    if algorithm not in ("ring", "tree"):
        raise InputError(f"no NCCL latency constants for algorithm {algorithm!r}; valid ones: ring, tree")
    constants = constants_of(version)
    if protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; valid ones: {', '.join(PROTOCOLS)}")
    if intra not in ("nvlink", "pci"):
        raise InputError(f"unknown intra-server hardware {intra!r}; valid ones: nvlink, pci")
    p, a = PROTOCOLS.index(protocol), NCCL_ALGORITHMS.index(algorithm)
    return CollectiveCosts(
        base_s=constants.base_latency_us[a][p] * _US,
        intra_step_s=constants.hw_latency_us[intra][a][p] * _US,
        inter_step_s=(constants.hw_latency_us["net"][a][p] + _plugin_latency(net_latency_us, protocol)) * _US,
        wire_efficiency=_WIRE_EFFICIENCY[p],
        streams=protocol != "simple",
        source=f"{constants.source} baseLat/hwLat ({algorithm}, {protocol}, {intra}/net); [NCCL] device.h protocol "
        "payload",
    )


#: NCCL's ``nvlsEfficiency`` by the NVLink generation of the GPUs: Hopper 0.85, Blackwell
#: 0.74 ([NCCL] tuning.cc, docs/hardware.md §1.3 and §7.3). Older generations have no NVLS.
NVLS_EFFICIENCY = {"nvlink4": 0.85, "nvlink5": 0.74}

#: The all-reduce bus bandwidth (GB/s) an NVLS-based all-reduce (NVLS, NVLSTree, NVLS with
#: IB SHARP) reaches at most, by NVLink generation (docs/hardware.md §1.3). Measured, it does
#: not grow with the ranks: on NVLink5 850 on 8 B200 and on 32 GPUs of a GB200 NVL72
#: ([GTC25]) and 834.57 on a whole rack (coreweave/nccl-tests#43), where NVLS's link traffic
#: would let the links carry 2(n-1)/(n+1) of their rate (1006 GB/s on 72 GPUs); on NVLink4
#: 480 on 8 H100 ([GTC24], [GTC25]; "On 8 GPUs, you should reach a peak busBw of
#: ~480GB/s", sjeaugey, NVIDIA/nccl-tests#212), 480 again on 32 H100 with IB SHARP ([GTC25])
#: and 440.58-468.46 on 16 H100 with NVLSTree (coreweave/nccl-tests#92, nccl-tests#309).
#: NCCL's model, too, gives NVLS a bus bandwidth that does not grow with the ranks. What
#: sets it has no published figure; flowsim holds each server's NVLS messages of an
#: all-reduce to a shared budget that gives this bus bandwidth
#: (:func:`flowsim.collectives.placement.with_nvls_budget`, docs/model.md).
NVLS_BUSBW_CEILING_GBPS = {"nvlink4": 480.0, "nvlink5": 850.0}


#: Payload fraction of NCCL's point-to-point messages (send/recv, and the all-to-all made of
#: them) between GPUs of one server over NVLink, Simple protocol, of the rate the links give
#: NCCL's rings. Measured, not derived: on NVSwitch servers all-to-all busbw is 86-94% of
#: ring all-reduce busbw on the same links (320 against 370 GB/s on 8 H100, 210 against 232
#: on 8 A100, 640 against 700 on 8 B200, 640 against 680 on 32 GPUs of a GB200 NVL72,
#: [GTC25]), and sendrecv_perf between 8 A100 reaches 195 GB/s where all-reduce reaches 232
#: (docs/hardware.md §1.1 and V1). The mechanism is NCCL's, its size is not sourced: the
#: point-to-point kernel splits each channel's warps between its sends and receives, "each
#: warp sending or receiving to a different peer" (NCCL 2.8 release notes, NVIDIA/nccl#401),
#: and "Send/Recv operations are mostly optimized for alltoall ..., so individual send/recv
#: might not achieve peak bandwidth" (sjeaugey, NVIDIA/nccl#464). Calibrated on one figure,
#: 8 H100's 320 against the model's 370.6 (320 / 370.6 = 0.863); the other figures are held
#: out (docs/model.md gives their errors).
#: Messages between servers keep the full rate: across servers an RDMA NIC, not the SMs,
#: moves the data, and at scale all-to-all reaches one NIC's rate, as the model gives. A send
#: takes it where NCCL reads its peer's buffer (Ampere), not where NCCL writes it (Hopper and
#: later: 8 H100's sendrecv moves what rings move, docs/model.md "Point-to-point over NVLink").
P2P_NVLINK_EFFICIENCY = 0.86


def nvls_costs(nvlink: str, *, version: str = DEFAULT_NCCL_VERSION) -> CollectiveCosts:
    """NCCL's NVLS costs for GPUs of NVLink generation ``nvlink``.

    NCCL's model charges NVLS one latency, ``hwLat[NVLINK][NVLS][Simple]`` (25 us in NCCL
    2.30.7, 23 us in 2.19.3), with no per-step term and ``baseLat`` 0 (docs/hardware.md
    §7.1-7.3); it is the base here. Its bandwidth is the NVLink bandwidth times
    ``nvlsEfficiency``, here the wire efficiency.

    >>> c = nvls_costs("nvlink4")
    >>> round(c.base_s * 1e6, 1), c.intra_step_s, c.wire_efficiency
    (25.0, 0.0, 0.85)
    """
    if nvlink not in NVLS_EFFICIENCY:
        raise InputError(
            f"NVLS needs NVSwitch generation 3 or later (GPUs on {', '.join(NVLS_EFFICIENCY)}), got {nvlink!r}"
        )
    constants = constants_of(version)
    simple, nvls = PROTOCOLS.index("simple"), NCCL_ALGORITHMS.index("nvls")
    return CollectiveCosts(
        base_s=constants.hw_latency_us["nvlink"][nvls][simple] * _US,
        intra_step_s=0.0,
        inter_step_s=0.0,
        wire_efficiency=NVLS_EFFICIENCY[nvlink],
        source=f"{constants.source} (NVLS hwLat, Simple); nvlsEfficiency for {nvlink}",
    )


def _plugin_latency(net_latency_us: float, protocol: str) -> float:
    """The network plugin's latency as NCCL's tuner charges it per inter-server step: once,
    and once more for Simple's flush ([NCCL] tuning.cc ``interLat += graphs[a]->latencyInter``)."""
    if not (math.isfinite(net_latency_us) and net_latency_us >= 0):
        raise InputError(f"network latency {net_latency_us!r} us must be finite and >= 0")
    return net_latency_us * (2 if protocol == "simple" else 1)


def nvls_tree_costs(
    nvlink: str, *, version: str = DEFAULT_NCCL_VERSION, net_latency_us: float = 0.0
) -> CollectiveCosts:
    """NCCL's NVLSTree costs for GPUs of NVLink generation ``nvlink``.

    NCCL's model charges NVLSTree ``hwLat[NVLINK][NVLS_TREE][Simple]`` once (25 us in
    2.30.7) and ``hwLat[NET][NVLS_TREE][Simple]`` per tree level up and down (20.9 us in
    2.30.7, 14 us in 2.19.3; docs/hardware.md §7.1-7.3), plus twice the network plugin's
    ``net_latency_us``: the base here, and the per-step latency of the tree's messages
    between servers. ``nvlsEfficiency`` is the wire
    efficiency of the switch's messages.

    >>> c = nvls_tree_costs("nvlink4")
    >>> round(c.base_s * 1e6, 1), round(c.inter_step_s * 1e6, 1), c.wire_efficiency
    (25.0, 20.9, 0.85)
    """
    return _nvls_across(nvlink, "nvls_tree", "NVLSTree", version, net_latency_us)


def nvls_sharp_costs(
    nvlink: str, *, version: str = DEFAULT_NCCL_VERSION, net_latency_us: float = 0.0
) -> CollectiveCosts:
    """NCCL's costs for NVLS across servers through the network's in-switch reduction (IB
    SHARP, NCCL's CollNet), for GPUs of NVLink generation ``nvlink``.

    NCCL's model charges it ``hwLat[NVLINK][NVLS][Simple]`` once inside the servers (25 us in
    2.30.7) and ``hwLat[NET][NVLS][Simple]`` once across them (18 us), plus twice the network
    plugin's ``net_latency_us`` ([NCCL] tuning.cc: NVLS latency ``intraLat + interLat`` when
    ``nNodes > 1``; docs/hardware.md §7.2-7.3): the base here, and the step latency of the
    message into the network. ``nvlsEfficiency`` is the wire efficiency of the switch's
    messages.

    >>> c = nvls_sharp_costs("nvlink4")
    >>> round(c.base_s * 1e6, 1), round(c.inter_step_s * 1e6, 1), c.wire_efficiency
    (25.0, 18.0, 0.85)
    """
    return _nvls_across(nvlink, "nvls", "NVLS", version, net_latency_us)


def _nvls_across(nvlink: str, algorithm: str, name: str, version: str, net_latency_us: float) -> CollectiveCosts:
    """NVLS's costs across servers: ``hwLat[NVLINK][algorithm][Simple]`` once as the base,
    ``hwLat[NET][algorithm][Simple]`` plus twice the plugin's latency per network step."""
    nvls = nvls_costs(nvlink, version=version)
    constants = constants_of(version)
    simple, index = PROTOCOLS.index("simple"), NCCL_ALGORITHMS.index(algorithm)
    return CollectiveCosts(
        base_s=constants.hw_latency_us["nvlink"][index][simple] * _US,
        intra_step_s=0.0,
        inter_step_s=(constants.hw_latency_us["net"][index][simple] + _plugin_latency(net_latency_us, "simple")) * _US,
        wire_efficiency=nvls.wire_efficiency,
        source=f"{constants.source} ({name} hwLat NVLink and NET, Simple); nvlsEfficiency for {nvlink}",
    )


#: CollNet Direct's serialization per GPU of a server beyond the first, us ([NCCL] tuning.cc:
#: "Add 0.4 us arity serialization latency").
COLLNET_ARITY_US = 0.4


def collnet_costs(
    algorithm: str, ranks_per_server: int, intra: str = "nvlink", *, version: str = DEFAULT_NCCL_VERSION,
    net_latency_us: float = 0.0,
) -> CollectiveCosts:
    """NCCL's costs for CollNet (IB SHARP without NVLS): ``"collnet_direct"`` or
    ``"collnet_chain"`` on servers of ``ranks_per_server`` ranks, Simple.

    NCCL's model charges CollNet Direct ``2 x (min(1, m - 1) x intraLat + (m - 1) x 0.4) +
    interLat`` and CollNet Chain ``2 x (m - 1) x intraLat + interLat`` for ``m`` ranks a server
    ([NCCL] tuning.cc; ``interLat`` the NET row, the Tree's with one rank a server since
    2.23.4, plus twice the network plugin's ``net_latency_us``; docs/hardware.md §7.2-7.3).
    Here ``intraLat`` is the step latency of each message inside a server (Direct's copies
    to and from the head take one step each way, Chain's hops one each), ``interLat`` that
    of the message into the network, and Direct's serialization the base.

    >>> c = collnet_costs("collnet_direct", 8)
    >>> round(c.base_s * 1e6, 1), round(c.intra_step_s * 1e6, 1), round(c.inter_step_s * 1e6, 1)
    (5.6, 3.7, 31.0)
    """
    if algorithm not in ("collnet_direct", "collnet_chain"):
        raise InputError(f"CollNet's costs are for collnet_direct or collnet_chain, not {algorithm!r}")
    if intra not in ("nvlink", "pci"):
        raise InputError(f"unknown intra-server hardware {intra!r}; valid ones: nvlink, pci")
    constants = constants_of(version)
    simple, index = PROTOCOLS.index("simple"), NCCL_ALGORITHMS.index(algorithm)
    one_per_node = ranks_per_server == 1 and (constants.release >= (2, 23, 4))
    row = NCCL_ALGORITHMS.index("tree") if one_per_node else index
    serial = 2 * (ranks_per_server - 1) * COLLNET_ARITY_US if algorithm == "collnet_direct" else 0.0
    return CollectiveCosts(
        base_s=serial * _US,
        intra_step_s=constants.hw_latency_us[intra][index][simple] * _US,
        inter_step_s=(constants.hw_latency_us["net"][row][simple] + _plugin_latency(net_latency_us, "simple")) * _US,
        wire_efficiency=1.0,
        source=f"{constants.source} ({'CollNet Direct' if algorithm == 'collnet_direct' else 'CollNet Chain'} "
        "hwLat inside servers and NET, Simple)",
    )


#: PAT's linear latency term per rank ([NCCL] tuning.cc: ``nRanks * 2.8``, "still a linear part").
PAT_PER_RANK_US = 2.8


def pat_costs(
    n_ranks: int, *, one_per_node: bool = True, version: str = DEFAULT_NCCL_VERSION, net_latency_us: float = 0.0
) -> CollectiveCosts:
    """NCCL's PAT costs (all-gather and reduce-scatter, Simple) for ``n_ranks`` ranks.

    NCCL's model charges PAT ``baseLat[PAT] + log2(nNodes) x interLat / 3.5 + nRanks x 2.8``
    us ([NCCL] tuning.cc, since 2.23.4; docs/hardware.md §7.2), where ``interLat`` is the NET
    Tree row with one rank per node (PAT's own NET row otherwise). Here the base is
    ``baseLat[PAT] + nRanks x 2.8`` and each hop between servers (one per dimension)
    ``interLat / 3.5`` (``interLat`` with twice the network plugin's ``net_latency_us``, as
    for every Simple protocol); the model has no term for hops inside a server.

    >>> c = pat_costs(8)
    >>> round(c.base_s * 1e6, 1), round(c.inter_step_s * 1e6, 1), c.intra_step_s
    (30.4, 4.0, 0.0)
    """
    constants = constants_of(version)
    simple, pat = PROTOCOLS.index("simple"), NCCL_ALGORITHMS.index("pat")
    row = NCCL_ALGORITHMS.index("tree") if one_per_node else pat
    return CollectiveCosts(
        base_s=(constants.base_latency_us[pat][simple] + n_ranks * PAT_PER_RANK_US) * _US,
        intra_step_s=0.0,
        inter_step_s=(constants.hw_latency_us["net"][row][simple] + _plugin_latency(net_latency_us, "simple")) / 3.5
        * _US,
        wire_efficiency=1.0,
        source=f"{constants.source} PAT latency (baseLat, NET {'Tree' if one_per_node else 'PAT'} hwLat / 3.5, "
        f"{PAT_PER_RANK_US} us per rank)",
    )
