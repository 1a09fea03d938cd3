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

Each preset is a :class:`~flowsim.servers.ServerSpec` (``dgx_h100_spec()`` and so on, or
:func:`preset_spec`) built by :func:`flowsim.servers.build_server`, the code that builds system
files too.

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

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from flowsim.errors import InputError, check_options, keyword_options
from flowsim.hardware import GPU_MODELS, gpu_compute_capability, gpu_model, gpu_peer_to_peer
from flowsim.servers import PcieSwitch, ServerSpec, build_server
from flowsim.topology import NodeKind, Topology

__all__ = [
    "DGX1_NVLINK_COUNTS",
    "GUESSED_PREFIX",
    "PRESETS",
    "Preset",
    "compute_nics",
    "dgx1_v100",
    "dgx_a100",
    "dgx_b200",
    "dgx_h100",
    "frontend_nics",
    "gb200_nvl72",
    "guessed_box_words",
    "guessed_pcie_box",
    "pcie_server",
    "pcie_workstation",
    "rtx4090_workstation",
    "preset",
    "preset_info",
    "preset_names",
    "preset_spec",
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


def _switches(*groups: tuple[tuple[int, ...], tuple[int, ...]]) -> tuple[PcieSwitch, ...]:
    return tuple(PcieSwitch(gpus, nics) for gpus, nics in groups)


def _one_nic_per_gpu(n_gpus: int) -> tuple[PcieSwitch, ...]:
    return tuple(PcieSwitch((g,), (g,)) for g in range(n_gpus))


def pcie_server_spec(
    *,
    p2p: bool = True,
    pcie: str = "pcie4",
    intersocket: str = "upi_skylake",
    memory: str = "ddr4_3200_8ch",
) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`pcie_server`."""
    return ServerSpec(
        "pcie_server", "GPU", 8, "pcie", pcie, 2, intersocket, memory,
        _switches(((0, 1), (0,)), ((2, 3), (1,)), ((4, 5), (2,)), ((6, 7), (3,))),
        "ib_hdr", "eth100g", 1, p2p=p2p,
    )


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
    spec = pcie_server_spec(p2p=p2p, pcie=pcie, intersocket=intersocket, memory=memory)
    return build_server(spec, figure=figure)


def dgx1_v100_spec(*, p2p: bool = True) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`dgx1_v100`."""
    return ServerSpec(
        "dgx1_v100", "V100", 8, "nvlink_mesh", "pcie3", 2, "qpi_broadwell", "ddr4_2400_4ch",
        _switches(((0, 1), (0,)), ((2, 3), (1,)), ((4, 5), (2,)), ((6, 7), (3,))),
        "ib_edr", "eth10g", 2, nvlink="nvlink2", nvlink_counts=tuple(map(tuple, DGX1_NVLINK_COUNTS.tolist())),
        p2p=p2p,
    )


# The presets pcie_workstation_spec builds, by GPU: their servers go by the presets' names.
_WORKSTATION_PRESETS = {"RTX 5090": "rtx5090_8x", "RTX 4090": "rtx4090_8x"}


def pcie_workstation_spec(
    *,
    n_gpus: int = 8,
    gpus_per_switch: int = 1,
    sockets: int = 2,
    p2p: bool = False,
    pcie: str = "pcie5",
    intersocket: str = "upi2_sapphire_rapids",
    memory: str = "ddr5_4800_8ch",
    gpu: str = "RTX 5090",
) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`pcie_workstation` (``gpu``: the GPU model)."""
    if n_gpus < 1 or sockets < 1 or gpus_per_switch < 1 or n_gpus % (sockets * gpus_per_switch):
        raise InputError(f"pcie_workstation: n_gpus={n_gpus} does not split into {sockets} socket(s) of "
                         f"switches of gpus_per_switch={gpus_per_switch}")
    switches = _switches(*((tuple(range(j, j + gpus_per_switch)), ()) for j in range(0, n_gpus, gpus_per_switch)))
    return ServerSpec(
        _WORKSTATION_PRESETS.get(gpu, "pcie_workstation"), gpu, n_gpus, "pcie", pcie, sockets, intersocket, memory,
        switches, "eth100g", "eth100g", 1, p2p=p2p,
    )


def pcie_workstation(
    *,
    figure: str,
    n_gpus: int = 8,
    gpus_per_switch: int = 1,
    sockets: int = 2,
    p2p: bool = False,
    pcie: str = "pcie5",
    intersocket: str = "upi2_sapphire_rapids",
    memory: str = "ddr5_4800_8ch",
    gpu: str = "RTX 5090",
) -> Topology:
    """PCIe GPUs without NVLink or compute NICs, spread evenly over the CPU sockets.

    ``gpus_per_switch=1`` puts each GPU on its own x16 root port (the 8-GPU Sapphire Rapids
    boxes of NVIDIA/nccl#1639 and #1530: four GPUs per socket, one root bus each); more shares
    one x16 uplink per PCIe switch. One front-end Ethernet port on socket 0. GeForce GPUs have
    no peer-to-peer (``p2p=False``, the default): NCCL's SHM transport stages every copy in
    the receiving GPU's socket memory, which each hop crosses twice (write, then read), so a
    ring of ``k`` GPUs per socket loads its memory with ``2k`` times the ring's rate
    (docs/hardware.md §3.3). The defaults are the 8 x RTX 5090 host of NVIDIA/nccl#1639
    (2 x Xeon 8480+, 16 DIMMs of DDR5-4800). ``gpu`` names the GPU model: a card's own PCIe
    link runs at the older of its host interface's generation and ``pcie`` (any other name,
    "GPU", runs it at ``pcie``).
    """
    spec = pcie_workstation_spec(n_gpus=n_gpus, gpus_per_switch=gpus_per_switch, sockets=sockets, p2p=p2p,
                                 pcie=pcie, intersocket=intersocket, memory=memory, gpu=gpu)
    return build_server(spec, figure=figure)


#: How the name of a box :func:`guessed_pcie_box` guesses starts, which no preset's does.
GUESSED_PREFIX = "guessed_"


def guessed_pcie_box(gpu: str, n_gpus: int) -> ServerSpec | None:
    """flowsim's guess of a box of ``n_gpus`` PCIe cards ``gpu`` (as nvidia-smi names it) whose
    layout nothing else gives (:func:`guessed_box_words` says it); None where ``gpu`` is no PCIe card
    flowsim knows (an SXM module, an NVL card whose NVLink bridges matter, a superchip, a GPU
    of unknown compute capability).

    The guess is :func:`pcie_workstation_spec`'s host (Sapphire Rapids sockets, DDR5-4800),
    each GPU on its own x16 root port, one socket for up to 4 GPUs or an odd count, else two,
    its PCIe generation the card's host interface (:data:`flowsim.hardware.GPU_MODELS`, else its
    architecture's: Volta and Turing Gen3, Ampere and Ada Gen4, Hopper and Blackwell Gen5,
    Blackwell Ultra Gen6). Between root ports NCCL takes no peer-to-peer (only up to a common
    PCIe switch, docs/hardware.md §3.3), so copies are staged through host memory whatever the
    card; GeForce cards have none anyway. NVLink bridges (an RTX A6000 or H100 PCIe pair) are
    not in it. Its name says it is a guess (``guessed_8x_nvidia_l40s``); no preset has it.

    >>> spec = guessed_pcie_box("NVIDIA GeForce RTX 4090", 8)
    >>> spec == replace(rtx4090_workstation_spec(), gpu="NVIDIA GeForce RTX 4090", name=spec.name), spec.name
    (True, 'guessed_8x_nvidia_geforce_rtx_4090')
    >>> guessed_box_words(spec)
    '8 x NVIDIA GeForce RTX 4090 on PCIe Gen4, each on its own root port, over 2 sockets (Sapphire Rapids): copies \
staged through host memory'
    >>> guessed_pcie_box("NVIDIA H100 80GB HBM3", 8) is None, guessed_pcie_box("NVIDIA H100 NVL", 2) is None
    (True, True)
    """
    sm = gpu_compute_capability(gpu)
    model = gpu_model(gpu)
    nvlink = GPU_MODELS[model][0] if model else None
    sxm = nvlink is not None and not nvlink.endswith("_ga102") and not re.search(r"PCIE", gpu, re.IGNORECASE)
    if not sm or sxm or re.search(r"\bNVL\b|GH200|GB[23]00", gpu, re.IGNORECASE) or n_gpus < 1:
        return None
    generation = GPU_MODELS[model][1] if model else 3 if sm < 80 else 4 if sm < 90 else 6 if sm == 103 else 5
    sockets = 2 if n_gpus > 4 and n_gpus % 2 == 0 else 1
    name = f"{GUESSED_PREFIX}{n_gpus}x_" + re.sub(r"[^a-z0-9]+", "_", gpu.lower()).strip("_")
    return replace(pcie_workstation_spec(n_gpus=n_gpus, sockets=sockets, p2p=gpu_peer_to_peer(gpu),
                                         pcie=f"pcie{generation}", gpu=gpu), name=name)


def guessed_box_words(spec: ServerSpec) -> str:
    """A box :func:`guessed_pcie_box` guessed, in words (its cards, their PCIe generation, its
    sockets; each card on a root port of its own, so copies staged through host memory)."""
    return (f"{spec.n_gpus} x {spec.gpu} on PCIe Gen{spec.pcie.removeprefix('pcie')}, each on its own root port, "
            f"over {spec.sockets} socket{'s' if spec.sockets > 1 else ''} (Sapphire Rapids): copies staged through "
            "host memory")


def rtx4090_workstation_spec(
    *,
    n_gpus: int = 8,
    gpus_per_switch: int = 1,
    sockets: int = 2,
    p2p: bool = False,
    pcie: str = "pcie4",
    intersocket: str = "upi2_sapphire_rapids",
    memory: str = "ddr5_4800_8ch",
) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`rtx4090_workstation`."""
    return pcie_workstation_spec(n_gpus=n_gpus, gpus_per_switch=gpus_per_switch, sockets=sockets, p2p=p2p,
                                 pcie=pcie, intersocket=intersocket, memory=memory, gpu="RTX 4090")


def rtx4090_workstation(
    *,
    figure: str,
    n_gpus: int = 8,
    gpus_per_switch: int = 1,
    sockets: int = 2,
    p2p: bool = False,
    pcie: str = "pcie4",
    intersocket: str = "upi2_sapphire_rapids",
    memory: str = "ddr5_4800_8ch",
) -> Topology:
    """Eight RTX 4090 (PCIe Gen4 x16, no NVLink, no peer-to-peer) on two Sapphire Rapids sockets.

    The :func:`pcie_workstation` host with the GPUs' links at Gen4, the RTX 4090's host
    interface: four GPUs per socket, each on its own root port (the bus ids of an 8 x RTX 4090
    host); GeForce GPUs copy through host memory. The options are :func:`pcie_workstation`'s,
    ``pcie`` defaulting to Gen4. Sources: docs/hardware.md §3.1 and §3.3, NVIDIA/nccl#1530, NVIDIA/nccl#1639.
    """
    spec = rtx4090_workstation_spec(n_gpus=n_gpus, gpus_per_switch=gpus_per_switch, sockets=sockets, p2p=p2p,
                                    pcie=pcie, intersocket=intersocket, memory=memory)
    return build_server(spec, figure=figure)


def dgx1_v100(*, figure: str, p2p: bool = True) -> Topology:
    """DGX-1 with eight V100: the hybrid cube-mesh of :data:`DGX1_NVLINK_COUNTS`.

    GPU pairs with two NVLinks get one link of twice the NVLink 2 rate. Four PLX Gen3 PCIe
    switches each hold two GPUs and one EDR NIC (GPU0/1 with ``nic0`` = mlx5_0, GPU2/3 with
    ``nic1`` = mlx5_1, ...); two switches per Xeon socket, sockets joined by QPI; two 10GbE
    ports. Sources: docs/hardware.md §2.1 ([DGX1-WP], ``nvidia-smi topo -m``, NVIDIA/nccl#671,
    NADDOD DGX blog).
    """
    return build_server(dgx1_v100_spec(p2p=p2p), figure=figure)


def dgx_a100_spec(*, p2p: bool = True) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`dgx_a100`."""
    return ServerSpec(
        "dgx_a100", "A100", 8, "nvswitch", "pcie4", 2, "xgmi_amd", "ddr4_3200_8ch",
        _switches(*(((2 * k, 2 * k + 1), (2 * k, 2 * k + 1)) for k in range(4))),
        "ib_hdr", "eth200g", 2, nvlink="nvlink3", p2p=p2p,
    )


def dgx_a100(*, figure: str, p2p: bool = True) -> Topology:
    """DGX A100: eight A100 on six second-generation NVSwitches (12 NVLink 3 per GPU).

    Four PCIe Gen4 switch complexes, each with two GPUs and their two HDR NICs (GPU i uses
    ``nic{i}``), two per AMD EPYC socket; two 200 GbE front-end ports [uncertain speed].
    Sources: docs/hardware.md §1.2 and §3.2 ([A100-WP], NVIDIA/nccl#1505, NVIDIA/DCGM#149,
    NVIDIA/nccl#812).
    """
    return build_server(dgx_a100_spec(p2p=p2p), figure=figure)


def dgx_h100_spec(*, p2p: bool = True) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`dgx_h100`."""
    return ServerSpec(
        "dgx_h100", "H100", 8, "nvswitch", "pcie5", 2, "upi_sapphire_rapids", "ddr5_4800_8ch",
        _one_nic_per_gpu(8), "ib_ndr", "eth200g", 2, nvlink="nvlink4", p2p=p2p,
    )


def dgx_h100(*, figure: str, p2p: bool = True) -> Topology:
    """DGX H100: eight H100 on four third-generation NVSwitches (18 NVLink 4 per GPU).

    Eight single-port ConnectX-7 NDR NICs, one per GPU (PIX; rail ``r`` = GPU ``r``,
    docs/hardware.md §3.2 port map), PCIe Gen5, two Xeon Platinum 8480C over UPI, two 200 GbE
    front-end ports. Sources: [BASEPOD], [DGXH100-UG], [NVS3-BLOG], [ENT-RA], NVIDIA/nccl#1264.
    """
    return build_server(dgx_h100_spec(p2p=p2p), figure=figure)


def dgx_b200_spec(*, p2p: bool = True) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`dgx_b200`."""
    return ServerSpec(
        "dgx_b200", "B200", 8, "nvswitch", "pcie5", 2, "upi_emerald_rapids", "ddr5_5600_8ch",
        _one_nic_per_gpu(8), "ib_ndr", "eth200g", 2, nvlink="nvlink5", p2p=p2p,
    )


def dgx_b200(*, figure: str, p2p: bool = True) -> Topology:
    """HGX / DGX B200: eight B200 on two NVLink 5 switch chips (18 NVLink 5 per GPU).

    Eight ConnectX-7 NDR NICs, one per GPU; PCIe Gen5; two Xeon Platinum 8570 (Emerald
    Rapids) over UPI; two 200 GbE front-end ports. Sources: [BASEPOD], [NVL-PAGE], [ENT-RA],
    docs/hardware.md §1.2 and §3.2.
    """
    return build_server(dgx_b200_spec(p2p=p2p), figure=figure)


def gb200_nvl72_spec(*, p2p: bool = True) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of :func:`gb200_nvl72`."""
    return ServerSpec(
        "gb200_nvl72", "B200", 72, "nvswitch", "pcie5", 36, None, "lpddr5x_grace",
        _one_nic_per_gpu(72), "ib_ndr", "eth400g", 36, nvlink="nvlink5", p2p=p2p, cpu="grace", hosts=18,
    )


def gb200_nvl72(*, figure: str, p2p: bool = True) -> Topology:
    """GB200 NVL72 rack: 72 B200 and 36 Grace on 18 NVLink 5 switch chips.

    18 compute trays of 2 Grace + 4 GPUs; each GPU has one NVLink 5 link to each of the 18
    switch chips (900 GB/s per direction, one ``nvswitch`` node here), NVLink-C2C to its Grace
    (Grace ``c`` hosts GPUs ``2c`` and ``2c + 1``), and one ConnectX-7 NDR NIC (4 per tray).
    Each Grace has one BlueField-3 front-end port at 400 GbE (2 per tray) [uncertain speed].
    Sources: [DGXGB200-UG], [SPOD-GB200], [NVL-PAGE], [STAS] (C2C).
    """
    return build_server(gb200_nvl72_spec(p2p=p2p), figure=figure)


@dataclass(frozen=True)
class Preset:
    """A server preset: its documented builder and its description (same options, no figure)."""

    build: Callable[..., Topology]
    spec: Callable[..., ServerSpec]

    @property
    def compute_nic(self) -> str:
        """Technology of the compute (rail) NICs' network ports."""
        return self.spec().compute_nic

    @property
    def frontend_nic(self) -> str:
        """Technology of the front-end (storage / in-band) Ethernet ports."""
        return self.spec().frontend_nic


#: Preset name -> builder and server description.
PRESETS: dict[str, Preset] = {
    "pcie_server": Preset(pcie_server, pcie_server_spec),
    "dgx1_v100": Preset(dgx1_v100, dgx1_v100_spec),
    "dgx_a100": Preset(dgx_a100, dgx_a100_spec),
    "dgx_h100": Preset(dgx_h100, dgx_h100_spec),
    "dgx_b200": Preset(dgx_b200, dgx_b200_spec),
    "gb200_nvl72": Preset(gb200_nvl72, gb200_nvl72_spec),
    # PCIe workstations (docs/hardware.md §3.3): no compute NICs; "eth100g" is their front-end port.
    "rtx5090_8x": Preset(pcie_workstation, pcie_workstation_spec),
    "rtx4090_8x": Preset(rtx4090_workstation, rtx4090_workstation_spec),
}


def preset_names() -> tuple[str, ...]:
    """Names of the server presets."""
    return tuple(PRESETS)


def system_name(value: str) -> str:
    """A preset's or shipped system's name as flowsim keys it, from the name as people write
    it: '-' and '_' alike, case ignored (``DGX-H100`` and ``aws-p5`` are dgx_h100 and aws_p5)."""
    return value.replace("-", "_").lower()


def preset_info(name: str) -> Preset:
    """Builder and NIC technologies of one preset (named as :func:`system_name` reads it);
    unknown names list the valid ones."""
    key = system_name(name) if isinstance(name, str) else name
    if key not in PRESETS:
        raise InputError(f"unknown preset {name!r}; valid ones: {', '.join(PRESETS)}")
    return PRESETS[key]


def preset_spec(name: str, **options) -> ServerSpec:
    """The :class:`~flowsim.servers.ServerSpec` of preset ``name`` with ``options`` (e.g. ``p2p=False``)."""
    spec = preset_info(name).spec
    allowed, _ = keyword_options(spec)
    check_options(options, allowed, f"preset {name!r}")
    return spec(**options)


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
