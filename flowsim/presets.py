"""Server presets: one :class:`~flowsim.topology.Topology` per real system.

Every figure comes from ``docs/hardware.md`` (source keys in brackets); the rates
themselves live in :mod:`flowsim.hardware`, and ``figure="nominal"`` or ``"effective"`` picks
which one each link gets.

=================  ====  ========================  ===========  =====  ===============================  =========
preset             GPUs  scale-up                  NVLink/GPU   PCIe   sockets, inter-socket, memory    rail NICs
                                                   nom. / eff.
=================  ====  ========================  ===========  =====  ===============================  =========
``pcie_server``    8     none                      -            Gen4   2 x86, UPI (Skylake), DDR4-3200  4 x HDR
``dgx1_v100``      8     cube-mesh, NVLink 2       150 / 120    Gen3   2 Xeon, QPI (Broadwell),         4 x EDR
                                                                       DDR4-2400 x 4 ch
``dgx_a100``       8     6 NVSwitch gen 2          300 / 240    Gen4   2 AMD EPYC, xGMI, DDR4-3200      8 x HDR
``dgx_h100``       8     4 NVSwitch gen 3          450 / 370.8  Gen5   2 Xeon 8480C, UPI (SPR),         8 x NDR
                                                                       DDR5-4800
``dgx_b200``       8     2 NVSwitch gen 4 chips    900 / 721.8  Gen5   2 Xeon 8570, UPI (EMR),          8 x NDR
                                                                       DDR5-5600
``gb200_nvl72``    72    18 NVSwitch gen 4 chips   900 / 721.8  Gen5   36 Grace, NVLink-C2C to its      72 x NDR
                                                                       2 GPUs, LPDDR5X
=================  ====  ========================  ===========  =====  ===============================  =========

NVLink per GPU is in GB/s per direction. x86 memory has 8 channels unless noted; memory
bandwidth is not in docs/hardware.md (see :mod:`flowsim.hardware`). Rail NICs are the compute
NICs, one rail each; a GPU uses the NIC on its PCIe switch (two GPUs share one on the DGX-1
and the PCIe server).

Sources: NVLink links per GPU and rates: docs/hardware.md §1.1 ([DGX1-WP], [NVL-PAGE], [NVS3-BLOG],
[NCCL]); NVSwitch counts: 1.2 ([A100-WP], [BASEPOD], [SPOD-GB200], [NVL-PAGE]); DGX-1
adjacency: 2.1 (``nvidia-smi topo -m``, identical in the Microway guide and
microsoft/msccl-tools); PCIe, NIC and CPU layouts: 2.1 and 3.2 ([BASEPOD], [DGXH100-UG],
[DGXGB200-UG], NVIDIA/nccl#1505, NVIDIA/nccl#1264, NADDOD DGX blog); front-end ports: 3.2 and 5
([ENT-RA], [BASEPOD]).

Modelling choices
-----------------
* The NVSwitch chips of one system are one ``nvswitch`` node, as in NCCL's topology graph:
  the hardware spreads each GPU's traffic over all its NVLinks, so a GPU's link to the node
  carries ``links_per_gpu`` NVLinks. The chips' ports suffice for every GPU link
  (:func:`flowsim.hardware.nvswitch_generation`), so the switch itself is non-blocking.
* Host memory of a socket is one shared link (reads and writes share DRAM bandwidth).
* Links inside a server have zero latency: the 2-25 us GPU-to-GPU latencies of docs/hardware.md
  (section 1.1) are software costs, given per message by the workload.
* Where docs/hardware.md does not give the PCIe layout (DGX H100 and B200: "1 NIC per GPU
  (PIX)"), each GPU shares a PCIe switch with its NIC, four switches per socket. The DGX A100
  "switch complexes" (2 GPUs + 2 NICs, PXB) are one switch each. In the GB200 NVL72 each GPU
  reaches its Grace over NVLink-C2C and shares a PCIe switch with its NIC and that Grace; the
  NIC attachment is not in docs/hardware.md **[uncertain]**.

Node names inside a server: ``gpu{i}``, ``nvswitch``, ``cpu{s}``, ``mem{s}``, ``pcie{j}``,
``nic{r}`` (compute NIC of rail ``r``), ``fe{j}`` (front-end Ethernet port).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flowsim.errors import InputError, check_options, keyword_options
from flowsim.hardware import LinkTier, link_rate, link_technology, nvlink_generation
from flowsim.topology import NodeKind, Topology, TopologyBuilder

__all__ = [
    "DGX1_NVLINK_COUNTS",
    "PRESETS",
    "Preset",
    "compute_nics",
    "dgx1_v100",
    "dgx_a100",
    "dgx_b200",
    "dgx_h100",
    "frontend_nics",
    "gb200_nvl72",
    "pcie_server",
    "preset",
    "preset_info",
    "preset_names",
]

#: NVLinks between GPU i and GPU j of a DGX-1 (V100), in CUDA device order: docs/hardware.md §2.1,
#: from ``nvidia-smi topo -m`` (NV1 / NV2 entries; 0 = no NVLink).
DGX1_NVLINK_COUNTS = np.array(
    [
        [0, 1, 1, 2, 2, 0, 0, 0],
        [1, 0, 2, 1, 0, 2, 0, 0],
        [1, 2, 0, 2, 0, 0, 1, 0],
        [2, 1, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 1, 1, 2],
        [0, 2, 0, 0, 1, 0, 2, 1],
        [0, 0, 1, 0, 1, 2, 0, 2],
        [0, 0, 0, 1, 2, 1, 2, 0],
    ],
    dtype=np.int64,
)
DGX1_NVLINK_COUNTS.flags.writeable = False


@dataclass(frozen=True)
class _Host:
    """PCIe, sockets and NICs of an x86 server."""

    pcie: str
    sockets: int
    intersocket: str
    memory: str
    switches: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    """Per PCIe switch: its GPUs and its compute NICs. Switches split evenly over sockets."""
    frontend_ports: int


def _add_x86_host(b: TopologyBuilder, server: int, host: _Host, figure: str) -> None:
    for what, technology in (("pcie", host.pcie), ("intersocket", host.intersocket), ("memory", host.memory)):
        # An NVLink or network technology here would build, then fail to route.
        if link_technology(technology).tier != LinkTier.HOST:
            raise InputError(f"{what}={technology!r} is a {link_technology(technology).tier.name.lower()} "
                             "technology; a server's PCIe, inter-socket link and memory take host ones")
    pcie = link_rate(host.pcie, figure=figure)
    for s in range(host.sockets):
        b.add_node(f"cpu{s}", NodeKind.CPU, server=server)
        b.add_node(f"mem{s}", NodeKind.HOST_MEMORY, server=server)
        b.add_link(f"cpu{s}", f"mem{s}", link_rate(host.memory, figure=figure), technology=host.memory, shared=True)
    for s in range(1, host.sockets):
        b.add_cable(f"cpu{s - 1}", f"cpu{s}", link_rate(host.intersocket, figure=figure), technology=host.intersocket)
    n_switches = len(host.switches)
    for j, (gpus, nics) in enumerate(host.switches):
        switch = f"pcie{j}"
        b.add_node(switch, NodeKind.PCIE_SWITCH, server=server)
        b.add_cable(switch, f"cpu{j * host.sockets // n_switches}", pcie, technology=host.pcie)
        for g in gpus:
            b.add_cable(f"gpu{g}", switch, pcie, technology=host.pcie)
        for r in nics:
            b.add_node(f"nic{r}", NodeKind.NIC, server=server)
            b.add_cable(f"nic{r}", switch, pcie, technology=host.pcie)
    _add_frontend(b, server, host, pcie)


def _add_frontend(b: TopologyBuilder, server: int, host: _Host, pcie_Bps: float) -> None:
    for j in range(host.frontend_ports):
        socket = j % host.sockets
        b.add_node(f"fe{j}", NodeKind.NIC, server=server)
        b.add_cable(f"fe{j}", f"cpu{socket}", pcie_Bps, technology=host.pcie)
    for s in range(host.sockets):
        port = f"fe{s % host.frontend_ports}"
        b.set_nic(f"cpu{s}", port)
        b.set_nic(f"mem{s}", port)


def _add_gpus(b: TopologyBuilder, server: int, n: int) -> None:
    for g in range(n):
        b.add_node(f"gpu{g}", NodeKind.GPU, server=server)


def _add_nvswitch(b: TopologyBuilder, server: int, n_gpus: int, nvlink: str, figure: str) -> None:
    b.add_node("nvswitch", NodeKind.NVSWITCH, server=server)
    per_gpu = nvlink_generation(nvlink).per_gpu_Bps(figure)
    for g in range(n_gpus):
        b.add_cable(f"gpu{g}", "nvswitch", per_gpu, technology=nvlink)


def _set_rails(b: TopologyBuilder, host: _Host) -> None:
    for gpus, nics in host.switches:
        for k, g in enumerate(gpus):
            b.set_nic(f"gpu{g}", f"nic{nics[k * len(nics) // len(gpus)]}")


def _nvswitch_server(
    name: str, *, figure: str, p2p: bool, nvlink: str, host: _Host, n_gpus: int = 8
) -> Topology:
    b = TopologyBuilder()
    server = b.add_server(name, p2p=p2p)
    _add_gpus(b, server, n_gpus)
    _add_nvswitch(b, server, n_gpus, nvlink, figure)
    _add_x86_host(b, server, host, figure)
    _set_rails(b, host)
    return b.build()


def _one_nic_per_gpu(n_gpus: int) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    return tuple(((g,), (g,)) for g in range(n_gpus))


def pcie_server(
    *,
    figure: str,
    p2p: bool = True,
    pcie: str = "pcie4",
    intersocket: str = "upi_skylake",
    memory: str = "ddr4_3200_8ch",
) -> Topology:
    """Eight GPUs behind four PCIe switches on two CPU sockets, no NVLink.

    Each switch holds two GPUs and one compute NIC; switches 0-1 hang off socket 0, 2-3 off
    socket 1 (the DGX-1's PCIe tree without its NVLinks, docs/hardware.md §2.1). One front-end
    Ethernet port (100 GbE) on socket 0.

    With ``p2p=False``, GPU-to-GPU traffic is staged through host memory: GPU -> switch ->
    root complex -> host memory -> root complex -> switch -> GPU, as NCCL's SHM transport does
    on PCIe systems without peer-to-peer (docs/hardware.md §3.1, NVIDIA/nccl#1639).
    """
    host = _Host(
        pcie=pcie,
        sockets=2,
        intersocket=intersocket,
        memory=memory,
        switches=(((0, 1), (0,)), ((2, 3), (1,)), ((4, 5), (2,)), ((6, 7), (3,))),
        frontend_ports=1,
    )
    b = TopologyBuilder()
    server = b.add_server("pcie_server", p2p=p2p)
    _add_gpus(b, server, 8)
    _add_x86_host(b, server, host, figure)
    _set_rails(b, host)
    return b.build()


def dgx1_v100(*, figure: str, p2p: bool = True) -> Topology:
    """DGX-1 with eight V100: the hybrid cube-mesh of :data:`DGX1_NVLINK_COUNTS`.

    GPU pairs with two NVLinks get one link of twice the NVLink 2 rate. Four PLX Gen3 PCIe
    switches each hold two GPUs and one EDR NIC (GPU0/1 with ``nic0`` = mlx5_0, GPU2/3 with
    ``nic1`` = mlx5_1, ...); two switches per Xeon socket, sockets joined by QPI; two 10GbE
    ports. Sources: docs/hardware.md §2.1 ([DGX1-WP], ``nvidia-smi topo -m``, NVIDIA/nccl#671,
    NADDOD DGX blog).
    """
    host = _Host(
        pcie="pcie3",
        sockets=2,
        intersocket="qpi_broadwell",
        memory="ddr4_2400_4ch",
        switches=(((0, 1), (0,)), ((2, 3), (1,)), ((4, 5), (2,)), ((6, 7), (3,))),
        frontend_ports=2,
    )
    b = TopologyBuilder()
    server = b.add_server("dgx1_v100", p2p=p2p)
    _add_gpus(b, server, 8)
    link = link_rate("nvlink2", figure=figure)
    for i, j in zip(*np.nonzero(DGX1_NVLINK_COUNTS), strict=True):
        b.add_link(f"gpu{i}", f"gpu{j}", DGX1_NVLINK_COUNTS[i, j] * link, technology="nvlink2")
    _add_x86_host(b, server, host, figure)
    _set_rails(b, host)
    return b.build()


def dgx_a100(*, figure: str, p2p: bool = True) -> Topology:
    """DGX A100: eight A100 on six second-generation NVSwitches (12 NVLink 3 per GPU).

    Four PCIe Gen4 switch complexes, each with two GPUs and their two HDR NICs (GPU i uses
    ``nic{i}``), two per AMD EPYC socket; two 200 GbE front-end ports [uncertain speed].
    Sources: docs/hardware.md §1.2 and §3.2 ([A100-WP], NVIDIA/nccl#1505, NVIDIA/DCGM#149,
    NVIDIA/nccl#812).
    """
    host = _Host(
        pcie="pcie4",
        sockets=2,
        intersocket="xgmi_amd",
        memory="ddr4_3200_8ch",
        switches=tuple(((2 * k, 2 * k + 1), (2 * k, 2 * k + 1)) for k in range(4)),
        frontend_ports=2,
    )
    return _nvswitch_server("dgx_a100", figure=figure, p2p=p2p, nvlink="nvlink3", host=host)


def dgx_h100(*, figure: str, p2p: bool = True) -> Topology:
    """DGX H100: eight H100 on four third-generation NVSwitches (18 NVLink 4 per GPU).

    Eight single-port ConnectX-7 NDR NICs, one per GPU (PIX; rail ``r`` = GPU ``r``,
    docs/hardware.md §3.2 port map), PCIe Gen5, two Xeon Platinum 8480C over UPI, two 200 GbE
    front-end ports. Sources: [BASEPOD], [DGXH100-UG], [NVS3-BLOG], [ENT-RA], NVIDIA/nccl#1264.
    """
    host = _Host(
        pcie="pcie5",
        sockets=2,
        intersocket="upi_sapphire_rapids",
        memory="ddr5_4800_8ch",
        switches=_one_nic_per_gpu(8),
        frontend_ports=2,
    )
    return _nvswitch_server("dgx_h100", figure=figure, p2p=p2p, nvlink="nvlink4", host=host)


def dgx_b200(*, figure: str, p2p: bool = True) -> Topology:
    """HGX / DGX B200: eight B200 on two NVLink 5 switch chips (18 NVLink 5 per GPU).

    Eight ConnectX-7 NDR NICs, one per GPU; PCIe Gen5; two Xeon Platinum 8570 (Emerald
    Rapids) over UPI; two 200 GbE front-end ports. Sources: [BASEPOD], [NVL-PAGE], [ENT-RA],
    docs/hardware.md §1.2 and §3.2.
    """
    host = _Host(
        pcie="pcie5",
        sockets=2,
        intersocket="upi_emerald_rapids",
        memory="ddr5_5600_8ch",
        switches=_one_nic_per_gpu(8),
        frontend_ports=2,
    )
    return _nvswitch_server("dgx_b200", figure=figure, p2p=p2p, nvlink="nvlink5", host=host)


def gb200_nvl72(*, figure: str, p2p: bool = True) -> Topology:
    """GB200 NVL72 rack: 72 B200 and 36 Grace on 18 NVLink 5 switch chips.

    18 compute trays of 2 Grace + 4 GPUs; each GPU has one NVLink 5 link to each of the 18
    switch chips (900 GB/s per direction, one ``nvswitch`` node here), NVLink-C2C to its Grace
    (Grace ``c`` hosts GPUs ``2c`` and ``2c + 1``), and one ConnectX-7 NDR NIC (4 per tray).
    Each Grace has one BlueField-3 front-end port at 400 GbE (2 per tray) [uncertain speed].
    Sources: [DGXGB200-UG], [SPOD-GB200], [NVL-PAGE], [STAS] (C2C).
    """
    b = TopologyBuilder()
    server = b.add_server("gb200_nvl72", p2p=p2p)
    n_gpus, n_grace = 72, 36
    _add_gpus(b, server, n_gpus)
    _add_nvswitch(b, server, n_gpus, "nvlink5", figure)
    pcie = link_rate("pcie5", figure=figure)
    c2c = link_rate("nvlink_c2c", figure=figure)
    for c in range(n_grace):
        b.add_node(f"cpu{c}", NodeKind.CPU, server=server)
        b.add_node(f"mem{c}", NodeKind.HOST_MEMORY, server=server)
        memory = link_rate("lpddr5x_grace", figure=figure)
        b.add_link(f"cpu{c}", f"mem{c}", memory, technology="lpddr5x_grace", shared=True)
        b.add_node(f"fe{c}", NodeKind.NIC, server=server)
        b.add_cable(f"fe{c}", f"cpu{c}", pcie, technology="pcie5")
        b.set_nic(f"cpu{c}", f"fe{c}")
        b.set_nic(f"mem{c}", f"fe{c}")
    for g in range(n_gpus):
        grace = f"cpu{g // 2}"
        b.add_cable(f"gpu{g}", grace, c2c, technology="nvlink_c2c")
        b.add_node(f"pcie{g}", NodeKind.PCIE_SWITCH, server=server)
        b.add_node(f"nic{g}", NodeKind.NIC, server=server)
        for end in (f"gpu{g}", f"nic{g}", grace):
            b.add_cable(f"pcie{g}", end, pcie, technology="pcie5")
        b.set_nic(f"gpu{g}", f"nic{g}")
    return b.build()


@dataclass(frozen=True)
class Preset:
    """A server preset: its builder and the port technologies of its NICs."""

    build: Callable[..., Topology]
    compute_nic: str
    """Technology of the compute (rail) NICs' network ports."""
    frontend_nic: str
    """Technology of the front-end (storage / in-band) Ethernet ports."""


#: Preset name -> builder, compute NIC technology and front-end port technology.
PRESETS: dict[str, Preset] = {
    "pcie_server": Preset(pcie_server, "ib_hdr", "eth100g"),
    "dgx1_v100": Preset(dgx1_v100, "ib_edr", "eth10g"),
    "dgx_a100": Preset(dgx_a100, "ib_hdr", "eth200g"),
    "dgx_h100": Preset(dgx_h100, "ib_ndr", "eth200g"),
    "dgx_b200": Preset(dgx_b200, "ib_ndr", "eth200g"),
    "gb200_nvl72": Preset(gb200_nvl72, "ib_ndr", "eth400g"),
}


def preset_names() -> tuple[str, ...]:
    """Names of the server presets."""
    return tuple(PRESETS)


def preset_info(name: str) -> Preset:
    """Builder and NIC technologies of one preset; unknown names list the valid ones."""
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; valid ones: {', '.join(PRESETS)}")
    return PRESETS[name]


def preset(name: str, *, figure: str, **options) -> Topology:
    """One server of preset ``name``; ``options`` go to its builder (e.g. ``p2p=False``).

    Examples
    --------
    >>> topo = preset("dgx_h100", figure="nominal")
    >>> len(topo.gpus()), float(topo.link_capacity_Bps[topo.link_id("gpu0->nvswitch")] / 1e9)
    (8, 450.0)
    """
    build = preset_info(name).build
    allowed, _ = keyword_options(build)
    check_options(options, [key for key in allowed if key != "figure"], f"preset {name!r}")
    return build(figure=figure, **options)


def compute_nics(topology: Topology, server: int = 0) -> list[int]:
    """Compute NICs of one server in rail order: each first used by the lowest-numbered GPU."""
    gpus = topology.gpus()
    gpus = gpus[topology.node_server[gpus] == server]
    rails: list[int] = []
    for nic in topology.node_nic[gpus].tolist():
        if nic >= 0 and nic not in rails:
            rails.append(nic)
    return rails


def frontend_nics(topology: Topology, server: int = 0) -> list[int]:
    """NICs of one server that no GPU uses: its front-end (storage / in-band) ports."""
    rails = set(compute_nics(topology, server))
    nics = topology.nodes_of_kind(NodeKind.NIC)
    return [int(n) for n in nics if topology.node_server[n] == server and int(n) not in rails]
