"""Link technologies, NVLink and NVSwitch generations and switch models, with sourced figures.

Every rate here is in bytes per second **per direction**. Vendors quote NVLink in GB/s
*bidirectional* and InfiniBand / Ethernet in Gb/s per direction; the tables keep each vendor
number as written and convert it once, in :func:`_bidirectional_GBps` and :func:`_Gbps`.

Each figure carries the source key of ``docs/hardware.md`` it comes from. Two figures are
available for every link technology and callers pick one explicitly:

``"nominal"``
    The line rate the vendor or the standard quotes (per direction).
``"effective"``
    What NCCL-like traffic achieves: NCCL's own model constants, or NVIDIA's measured
    nccl-tests peaks.

Where docs/hardware.md gives only one number for a technology (inter-socket links, NVLink-C2C),
that number serves as both figures and :attr:`Figure.note` says so. Host-memory bandwidth is
not in docs/hardware.md at all: those figures are DDR channel arithmetic, marked as such.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from flowsim.errors import InputError

_T = TypeVar("_T")
_D = TypeVar("_D")

#: The two figures every link technology has.
FIGURES = ("nominal", "effective")


class LinkTier(IntEnum):
    """Where a link sits; routing treats each tier by its own rules."""

    SCALE_UP = 0
    """NVLink between GPUs and NVSwitches."""
    HOST = 1
    """Inside a server's host: PCIe, NVLink-C2C, inter-socket links, host memory."""
    SCALE_OUT = 2
    """Between servers: InfiniBand and Ethernet."""


@dataclass(frozen=True)
class Figure:
    """One sourced rate (B/s per direction)."""

    rate_Bps: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class LinkTechnology:
    """A kind of link: its tier, its nominal and effective rates per direction."""

    name: str
    tier: LinkTier
    description: str
    nominal: Figure
    effective: Figure
    nccl_GBps: float | None = None
    """NCCL's model bandwidth for one such link (GB/s, ``topo.h``) where it is not the
    effective figure: NCCL's topology search and tuner see this, the flows the effective rate."""

    def figure(self, figure: str) -> Figure:
        """The ``"nominal"`` or ``"effective"`` figure."""
        _check_figure(figure)
        return self.nominal if figure == "nominal" else self.effective

    def rate_Bps(self, figure: str) -> float:
        """Rate per direction (B/s) under the chosen figure."""
        return self.figure(figure).rate_Bps


@dataclass(frozen=True)
class NVLinkGeneration:
    """An NVLink generation: per-link technology and links per GPU."""

    name: str
    gpu: str
    links_per_gpu: int
    link: LinkTechnology
    source: str

    def per_gpu_Bps(self, figure: str) -> float:
        """All of one GPU's NVLinks together, per direction (B/s)."""
        return self.links_per_gpu * self.link.rate_Bps(figure)


@dataclass(frozen=True)
class NVSwitchGeneration:
    """An NVSwitch chip generation."""

    name: str
    nvlink: str
    ports_per_chip: int
    used_in: str
    source: str

    def chip_Bps(self, figure: str) -> float:
        """Switching capacity of one chip per direction (B/s): ports x NVLink rate."""
        return self.ports_per_chip * link_rate(self.nvlink, figure=figure)


@dataclass(frozen=True)
class SwitchModel:
    """A network switch: port technology, radix and forwarding latency per hop."""

    name: str
    technology: str
    radix: int
    hop_latency_s: float
    source: str


def _check_figure(figure: str) -> None:
    if figure not in FIGURES:
        raise InputError(f"unknown figure {figure!r}; choose one of {', '.join(FIGURES)}")


def _GBps(value: float) -> float:
    """GB/s (1e9 B/s) per direction to B/s."""
    return value * 1e9


def _bidirectional_GBps(value: float) -> float:
    """Vendor GB/s counting both directions (NVLink marketing) to B/s per direction."""
    return value * 1e9 / 2


def _Gbps(value: float) -> float:
    """Gb/s per direction (InfiniBand, Ethernet) to B/s."""
    return value * 1e9 / 8


# --- NVLink: vendor per-link bidirectional GB/s (converted here, once) and NCCL's per-link
# model value ([NCCL] topo.h SMxx_NVLINK_BW), docs/hardware.md §1.1.
_NVLINK_TABLE = (
    # name, GPU, links/GPU, per-link bidirectional GB/s, NCCL GB/s per link, sources
    ("nvlink1", "P100", 4, 40.0, 18.0, "[STAS] NVLink table; [NCCL] topo.h SM60_NVLINK_BW"),
    ("nvlink2", "V100", 6, 50.0, 20.0, "[DGX1-WP]; [NCCL] topo.h SM70_NVLINK_BW"),
    ("nvlink3", "A100", 12, 50.0, 20.0, "[NVL-PAGE]; NVIDIA/nccl-tests#149; [NCCL] topo.h SM80_NVLINK_BW"),
    ("nvlink3_ga102", "A40 / RTX A6000", 4, 28.125, 12.0, "GA102 whitepaper; [NCCL] topo.h SM86_NVLINK_BW"),
    ("nvlink4", "H100 / H200", 18, 50.0, 20.6, "[NVS3-BLOG]; [STAS]; [NCCL] topo.h SM90_NVLINK_BW"),
    ("nvlink5", "B200 / GB200", 18, 100.0, 40.1, "[NVL-PAGE]; [STAS]; [NCCL] topo.h SM100_NVLINK_BW"),
)


def _nvlink_generations() -> dict[str, NVLinkGeneration]:
    generations = {}
    for name, gpu, links, bidirectional, nccl, source in _NVLINK_TABLE:
        link = LinkTechnology(
            name,
            LinkTier.SCALE_UP,
            f"one {name} link ({gpu})",
            Figure(_bidirectional_GBps(bidirectional), source, f"{bidirectional:g} GB/s bidirectional per link"),
            Figure(_GBps(nccl), "[NCCL] topo.h", "NCCL's per-link model bandwidth"),
        )
        generations[name] = NVLinkGeneration(name, gpu, links, link, source)
    return generations


_NVLINK = _nvlink_generations()

#: GPUs sold with fewer NVLinks than their generation has, by a piece of their name: the H800
#: with 8 NVLink 4 links (200 GB/s per direction) and the A800 with 8 NVLink 3 links (400 GB/s
#: bidirectional, the H800's note there: [uncertain]), docs/hardware.md §1.1.
_CUT_DOWN_NVLINKS = (("H800", 8), ("A800", 8))


def gpu_nvlinks(gpu: str) -> int | None:
    """NVLinks of a GPU model sold with fewer than its generation has (``8`` for an
    ``NVIDIA H800``), else None.

    >>> gpu_nvlinks("NVIDIA H800"), gpu_nvlinks("H100")
    (8, None)
    """
    return gpu_model_value(gpu, _CUT_DOWN_NVLINKS, None)


def _host_technologies() -> list[LinkTechnology]:
    pcie = [
        # gen, x16 payload GB/s per direction (spec), NCCL width*speed/80 and NVIDIA busbw slide
        (3, 15.75, 12.0, "[NCCL] topo.h PCI_BW (Gen3 x16)"),
        (4, 31.5, 24.0, "[NCCL] topo.cc kvDictPciGen; [GTC24] PCIe Gen4 busbw"),
        (5, 63.0, 48.0, "[NCCL] topo.cc kvDictPciGen; [GTC24] PCIe Gen5 busbw"),
        (6, 121.0, 96.0, "[NCCL] topo.cc kvDictPciGen; [GTC25] PCIe Gen6 busbw"),
    ]
    techs = [
        LinkTechnology(
            f"pcie{gen}",
            LinkTier.HOST,
            f"PCIe Gen{gen} x16",
            Figure(_GBps(spec), "[STAS] PCIe table; docs/hardware.md §3.1", "x16 payload rate after encoding"),
            Figure(_GBps(nccl), source),
        )
        for gen, spec, nccl, source in pcie
    ]
    # Inter-socket links at NCCL's model bandwidth ([NCCL] topo.h): what NCCL's search assumes.
    only_nccl = ("NCCL's model value serves as both figures (line rates: upi2_sapphire_rapids, upi2_emerald_rapids, "
                 "upi2_granite_rapids, xgmi_genoa; docs/hardware.md §3.3)")
    for name, description, value, constant in (
        ("qpi_broadwell", "Intel QPI, Broadwell", 6.0, "BDW_QPI_BW"),
        ("upi_skylake", "Intel UPI, Skylake to Ice Lake", 10.0, "SKL_QPI_BW"),
        ("upi_sapphire_rapids", "Intel UPI, Sapphire Rapids", 22.0, "SRP_QPI_BW"),
        ("upi_emerald_rapids", "Intel UPI, Emerald Rapids", 40.0, "ERP_QPI_BW"),
        ("xgmi_amd", "AMD socket-to-socket (Infinity Fabric)", 16.0, "AMD_BW"),
    ):
        figure = Figure(_GBps(value), f"[NCCL] topo.h {constant}", only_nccl)
        techs.append(LinkTechnology(name, LinkTier.HOST, description, figure, figure))
    # Modern inter-socket links at their line rate (docs/hardware.md §3.3): NCCL's topo.h keeps
    # one constant per CPU generation for its search, which the flows do not use.
    line_rate = "no measured figure; the line rate serves as both figures"
    for name, description, value, constant, nccl, source in (
        ("upi2_sapphire_rapids", "Intel UPI 2.0, Sapphire Rapids, 4 links x 16 GT/s", 4 * 16 * 2.0, "SRP_QPI_BW",
         22.0, "docs/hardware.md §3.3 (UPI 2.0 16 GT/s, 2 B per transfer; 4 links on the Xeon Platinum 8480+)"),
        ("upi2_emerald_rapids", "Intel UPI 2.0, Emerald Rapids, 4 links x 20 GT/s", 4 * 20 * 2.0, "ERP_QPI_BW",
         40.0, "docs/hardware.md §3.3 (UPI 2.0 20 GT/s, 2 B per transfer, 4 links) [uncertain link count]"),
        ("upi2_granite_rapids", "Intel UPI 2.0, Granite Rapids, 6 links x 24 GT/s", 6 * 24 * 2.0, "ERP_QPI_BW",
         40.0, "docs/hardware.md §3.3 (UPI 2.0 24 GT/s, 2 B per transfer, 6 links) [uncertain link count]"),
        ("xgmi_genoa", "AMD xGMI, EPYC 9004 (Genoa), 4 links x16 at 32 Gb/s", 4 * 16 * 32 / 8, "AMD_BW",
         16.0, "docs/hardware.md §3.3 (Lenovo LP1852: four xGMI links, 512 GB/s both directions)"),
    ):
        figure = Figure(_GBps(value), source, line_rate)
        techs.append(LinkTechnology(name, LinkTier.HOST, f"{description} (NCCL: {constant})", figure, figure,
                                    nccl_GBps=nccl))
    c2c = Figure(
        _GBps(450.0),
        "[STAS] NVLink-C2C (450 GB/s per direction, 900 bidirectional) [uncertain for GB200]",
        "no measured figure in docs/hardware.md; the line rate serves as both figures",
    )
    techs.append(LinkTechnology("nvlink_c2c", LinkTier.HOST, "NVLink-C2C, Grace to GPU", c2c, c2c))
    # Host memory (DRAM) bandwidth of one socket: read and write share it, so presets model it
    # as one shared link. Not in docs/hardware.md: channels x MT/s x 8 bytes.
    for name, description, channels, mts in (
        ("ddr4_2400_4ch", "4 channels DDR4-2400 (Xeon E5 v4 socket)", 4, 2400),
        ("ddr4_3200_8ch", "8 channels DDR4-3200 (EPYC Rome / Xeon Ice Lake socket)", 8, 3200),
        ("ddr5_4800_8ch", "8 channels DDR5-4800 (Xeon Sapphire Rapids socket)", 8, 4800),
        ("ddr5_5600_8ch", "8 channels DDR5-5600 (Xeon Emerald Rapids socket)", 8, 5600),
        ("ddr5_4800_12ch", "12 channels DDR5-4800 (EPYC Genoa socket)", 12, 4800),
    ):
        figure = Figure(
            channels * mts * 1e6 * 8,
            "not in docs/hardware.md: JEDEC DDR arithmetic, channels x MT/s x 8 B [uncertain]",
            "no measured figure; the peak serves as both figures",
        )
        techs.append(LinkTechnology(name, LinkTier.HOST, description, figure, figure))
    grace = Figure(
        _GBps(512.0),
        "not in docs/hardware.md: NVIDIA Grace LPDDR5X 'up to 512 GB/s' [uncertain]",
        "no measured figure; the peak serves as both figures",
    )
    techs.append(LinkTechnology("lpddr5x_grace", LinkTier.HOST, "Grace LPDDR5X", grace, grace))
    return techs


def _network_technologies() -> list[LinkTechnology]:
    techs = []
    for name, gbps, effective, source in (
        ("ib_edr", 100, 12.0, "[NCCL] topo.h NET_BW (100 Gbit)"),
        ("ib_hdr", 200, 24.0, "[GTC24] 200Gb RDMA busbw"),
        ("ib_ndr", 400, 48.0, "[GTC24] 400Gb RDMA busbw; NVIDIA/nccl-tests#290 (46-48 GB/s per NIC)"),
        ("ib_xdr", 800, 96.0, "docs/hardware.md §4.1 (~96 GB/s expected) [uncertain]"),
    ):
        techs.append(
            LinkTechnology(
                name,
                LinkTier.SCALE_OUT,
                f"InfiniBand {name[3:].upper()} 4x port, {gbps} Gb/s",
                Figure(_Gbps(gbps), "[STAS] IB table, docs/hardware.md §4.1"),
                Figure(_GBps(effective), source),
            )
        )
    techs.append(
        LinkTechnology(
            "eth10g",
            LinkTier.SCALE_OUT,
            "10 GbE (DGX-1 in-band ports)",
            Figure(_Gbps(10), "docs/hardware.md §3.2 (DGX-1: 2 x 10GbE)"),
            Figure(_Gbps(10), "docs/hardware.md §3.2", "no measured figure; the line rate serves as both figures"),
        )
    )
    for gbps, effective, source in (
        (100, 12.0, "[NCCL] topo.h NET_BW (100 Gbit), RDMA"),
        (200, 24.0, "[GTC24] 200Gb RDMA (IB/RoCE) busbw"),
        (400, 48.0, "[GTC24] 400Gb RDMA busbw"),
        (800, 96.0, "scaled from 400 Gb/s RDMA (48 GB/s) like XDR, docs/hardware.md §8 [uncertain]"),
    ):
        techs.append(
            LinkTechnology(
                f"eth{gbps}g",
                LinkTier.SCALE_OUT,
                f"{gbps} GbE (RoCE for the effective figure)",
                Figure(_Gbps(gbps), "docs/hardware.md §5 (IEEE 802.3 speeds)"),
                Figure(_GBps(effective), source),
            )
        )
    return techs


#: The links between a server's CPU sockets (docs/hardware.md §3.3): NCCL's own model figures
#: (``qpi_broadwell`` to ``xgmi_amd``, [NCCL] topo.h, what NCCL's search assumes), and modern
#: links at their line rates (``upi2_*``, ``xgmi_genoa``).
INTERSOCKET_TECHNOLOGIES = (
    "qpi_broadwell", "upi_skylake", "upi_sapphire_rapids", "upi_emerald_rapids", "xgmi_amd",
    "upi2_sapphire_rapids", "upi2_emerald_rapids", "upi2_granite_rapids", "xgmi_genoa",
)
#: One socket's host memory.
HOST_MEMORY_TECHNOLOGIES = (
    "ddr4_2400_4ch", "ddr4_3200_8ch", "ddr5_4800_8ch", "ddr5_5600_8ch", "ddr5_4800_12ch", "lpddr5x_grace",
)

_TECHNOLOGIES: dict[str, LinkTechnology] = {
    t.name: t
    for t in (
        [g.link for g in _NVLINK.values()] + _host_technologies() + _network_technologies()
    )
}

_NVSWITCH: dict[str, NVSwitchGeneration] = {
    g.name: g
    for g in (
        NVSwitchGeneration(
            "nvswitch1", "nvlink2", 18, "DGX-2 / HGX-2: 12 chips [uncertain]",
            "[A100-WP] NVSwitch generation table; NVIDIA/nccl-tests#78",
        ),
        NVSwitchGeneration(
            "nvswitch2", "nvlink3", 36, "DGX A100 / HGX A100: 6 chips (ports [uncertain])",
            "[A100-WP]; NVIDIA/nccl#1505",
        ),
        NVSwitchGeneration(
            "nvswitch3", "nvlink4", 64, "DGX H100 / HGX H100 / H200: 4 chips",
            "[NVS3-BLOG]; [BASEPOD]",
        ),
        NVSwitchGeneration(
            "nvswitch4", "nvlink5", 72, "HGX/DGX B200: 2 chips; GB200 NVL72: 18 chips",
            "[NVL-PAGE]; [SPOD-GB200]",
        ),
    )
}

_IB_HOP = "docs/hardware.md §4.3 and §8 (IB switch hop 0.1-0.15 us)"
_NO_ETH_LATENCY = "no Ethernet switch latency in docs/hardware.md (0)"
_SWITCHES: dict[str, SwitchModel] = {
    s.name: s
    for s in (
        SwitchModel("sb7800", "ib_edr", 36, 90e-9, "docs/hardware.md §4.2 (~90 ns) [uncertain]"),
        SwitchModel("qm8700", "ib_hdr", 40, 130e-9, f"docs/hardware.md §4.2 (~130 ns); {_IB_HOP} [uncertain]"),
        SwitchModel("qm9700", "ib_ndr", 64, 150e-9, f"[QM97-UM] radix; '<150 ns', {_IB_HOP} [uncertain]"),
        SwitchModel("q3400", "ib_xdr", 144, 150e-9, f"Q3400-RA manual radix; latency {_IB_HOP} [uncertain]"),
        SwitchModel(
            "sn4600c", "eth100g", 64, 0.0,
            f"[BASEPOD] SN4600C, 64 ports [uncertain]; {_NO_ETH_LATENCY}",
        ),
        SwitchModel("sn5400", "eth400g", 64, 0.0, f"[STAS] SN5400 64 x 400GbE; {_NO_ETH_LATENCY}"),
        SwitchModel("sn5600", "eth800g", 64, 0.0, f"[STAS] SN5600 64 x 800GbE; {_NO_ETH_LATENCY}"),
    )
}


def _lookup(table: dict, name: str, what: str):
    try:
        return table[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown {what} {name!r}; valid ones: {', '.join(sorted(table))}") from None


def technology_names() -> tuple[str, ...]:
    """Names of all link technologies, sorted."""
    return tuple(sorted(_TECHNOLOGIES))


#: Link technologies of network ports by speed (Gb/s), as system files and ``flowsim system
#: import`` name them: InfiniBand's, and Ethernet's (RoCE and EFA ports, front-end ports).
INFINIBAND_SPEEDS = {100: "ib_edr", 200: "ib_hdr", 400: "ib_ndr", 800: "ib_xdr"}
ETHERNET_SPEEDS = {10: "eth10g", 100: "eth100g", 200: "eth200g", 400: "eth400g", 800: "eth800g"}


def is_infiniband(technology: str) -> bool:
    """Whether links of ``technology`` are InfiniBand (``ib_edr`` ... ``ib_xdr``); the other
    network technologies are Ethernet's (``eth10g`` ... ``eth800g``).

    >>> is_infiniband("ib_ndr"), is_infiniband("eth400g")
    (True, False)
    """
    return technology.startswith("ib_")


def link_technology(name: str) -> LinkTechnology:
    """The link technology called ``name`` (``"nvlink4"``, ``"pcie5"``, ``"ib_ndr"``, ...)."""
    return _lookup(_TECHNOLOGIES, name, "link technology")


def link_rate(name: str, *, figure: str) -> float:
    """Rate of one link of technology ``name`` per direction (B/s).

    Parameters
    ----------
    name : str
        A technology from :func:`technology_names`.
    figure : {"nominal", "effective"}
        The vendor line rate, or what NCCL-like traffic achieves.

    Examples
    --------
    >>> link_rate("nvlink4", figure="nominal") / 1e9  # 50 GB/s bidirectional per link
    25.0
    >>> link_rate("ib_ndr", figure="effective") / 1e9
    48.0
    """
    return link_technology(name).rate_Bps(figure)


def nvlink_generation(name: str) -> NVLinkGeneration:
    """NVLink generation ``"nvlink1"`` ... ``"nvlink5"`` (or ``"nvlink3_ga102"``)."""
    return _lookup(_NVLINK, name, "NVLink generation")


def nvlink_names() -> tuple[str, ...]:
    """Names of all NVLink generations, sorted."""
    return tuple(sorted(_NVLINK))


def nvlink_per_gpu(name: str, *, figure: str) -> float:
    """All NVLinks of one GPU of generation ``name``, per direction (B/s).

    >>> nvlink_per_gpu("nvlink4", figure="nominal") / 1e9  # "900 GB/s" bidirectional
    450.0
    """
    return nvlink_generation(name).per_gpu_Bps(figure)


def nvswitch_generation(name: str) -> NVSwitchGeneration:
    """NVSwitch generation ``"nvswitch1"`` ... ``"nvswitch4"``."""
    return _lookup(_NVSWITCH, name, "NVSwitch generation")


def switch_model(name: str) -> SwitchModel:
    """Network switch model (``"qm9700"``, ``"sn5600"``, ...)."""
    return _lookup(_SWITCHES, name, "switch model")


def switch_names() -> tuple[str, ...]:
    """Names of all network switch models, sorted."""
    return tuple(sorted(_SWITCHES))


def switch_for(technology: str) -> SwitchModel:
    """The switch model whose ports run ``technology`` (the first by name if several)."""
    link_technology(technology)
    for name in sorted(_SWITCHES):
        if _SWITCHES[name].technology == technology:
            return _SWITCHES[name]
    raise InputError(
        f"no switch model with {technology!r} ports; models: "
        + ", ".join(f"{s.name} ({s.technology})" for s in _SWITCHES.values())
    )


# Compute capability (major x 10 + minor, as NCCL's cudaCompCap) of GPU models, by the name
# nvidia-smi gives them ([CUDA-GPUS], docs/hardware.md §1.4). Longer names first, so that
# "RTX 4090" is not read as something shorter it contains.
_GPU_SM = (
    ("RTXPRO6000", 120), ("RTX5090", 120), ("RTX5080", 120), ("RTX4090", 89), ("RTX4080", 89), ("RTX6000ADA", 89),
    ("RTX5000ADA", 89), ("RTX4500ADA", 89), ("RTX4000SFFADA", 89), ("RTX4000ADA", 89), ("RTX5070", 120),
    ("RTX5060", 120), ("RTX2000ADA", 89), ("RTX4070", 89), ("RTX4060", 89), ("L20", 89), ("RTX3090", 86),
    ("RTX3080", 86), ("RTX3070", 86), ("RTX3060", 86), ("RTX3050", 86), ("A6000", 86), ("A5000", 86), ("A4000", 86),
    ("A3000", 86), ("A2000", 86), ("A16", 86), ("A2", 86), ("QUADRORTX8000", 75), ("QUADRORTX6000", 75),
    ("QUADRORTX5000", 75), ("QUADRORTX4000", 75), ("TITANRTX", 75), ("RTX2080", 75), ("RTX2070", 75), ("RTX2060", 75),
    ("GTX1660", 75), ("GTX1650", 75), ("T4", 75), ("TITANV", 70), ("TITANXP", 61), ("TITANX", 61), ("GTX1080", 61),
    ("GTX1070", 61), ("GTX1060", 61), ("QUADROP6000", 61), ("QUADROP5000", 61), ("QUADROP4000", 61), ("P40", 61),
    ("P4", 61), ("GB200", 100), ("GB300", 103), ("B300", 103), ("B200", 100), ("B100", 100), ("GH200", 90),
    ("H200", 90), ("H100", 90), ("H800", 90), ("H20", 90), ("L40S", 89), ("L40", 89), ("L4", 89), ("A100", 80),
    ("A800", 80), ("A30", 80), ("A40", 86), ("A10G", 86), ("A10", 86), ("V100", 70), ("P100", 60),
)


def _model_name(name: str) -> str:
    """A GPU name as :func:`gpu_model_value` reads it: upper case, without "NVIDIA" and
    "GeForce" (``"NVIDIA GeForce RTX 4090"`` -> ``" RTX 4090"``)."""
    return name.upper().replace("NVIDIA", "").replace("GEFORCE", "")


@functools.cache
def _piece_pattern(piece: str) -> re.Pattern[str]:
    """``piece`` as a pattern over :func:`_model_name`: spaces and dashes allowed anywhere
    between its characters, and a piece ending in a digit not followed by another digit (an
    "RTX A4000" holds no A40, an "H200" no H20, an "L40S" no L4)."""
    chars = "".join(_model_name(piece).split()).replace("-", "")
    pattern = r"[\s-]*".join(map(re.escape, chars))
    return re.compile(pattern + r"(?!\d)" if chars[-1:].isdigit() else pattern)


def gpu_model_value(name: str, table: Iterable[tuple[str, _T]], default: _D) -> _T | _D:
    """The value of the first ``(piece, value)`` of ``table`` whose piece GPU ``name`` holds
    (:func:`_piece_pattern`: case, spaces and dashes aside, a piece ending in a digit whole;
    list a longer piece before a shorter one it holds); ``default`` where none does.

    >>> gpu_model_value("NVIDIA A100-SXM4-40GB", [("A100 SXM", "sxm"), ("A100", "any")], None)
    'sxm'
    >>> gpu_model_value("NVIDIA RTX A4000", [("A40", "A40")], None) is None
    True
    """
    model = _model_name(name)
    return next((value for piece, value in table if _piece_pattern(piece).search(model)), default)


#: GPU model (as nvidia-smi names it, in part) -> NVLink generation (None: PCIe only) and
#: PCIe generation. NVLink generations: docs/hardware.md §1.1 (the GPU column of
#: this module's NVLink table); PCIe generations are the GPUs' host interfaces
#: (Volta Gen3, Ampere and Ada Gen4, Hopper and Blackwell Gen5, Blackwell Ultra Gen6: the
#: servers of docs/hardware.md §3.2 and the RTX 5090's, V5) [guess where a product has
#: variants, and those flowsim.topoimport marks]. Longer names are matched first ("L40S"
#: before "L40"), and "A6000" is the RTX A6000.
GPU_MODELS: dict[str, tuple[str | None, int]] = {
    "P100": ("nvlink1", 3),
    "V100": ("nvlink2", 3),
    "A100": ("nvlink3", 4),
    "A800": ("nvlink3", 4),
    "A40": ("nvlink3_ga102", 4),
    "A6000": ("nvlink3_ga102", 4),
    "GH200": ("nvlink4", 5),
    "GB200": ("nvlink5", 5),
    "GB300": ("nvlink5", 6),
    "H100": ("nvlink4", 5),
    "H800": ("nvlink4", 5),
    "H200": ("nvlink4", 5),
    "H20": ("nvlink4", 5),
    "B200": ("nvlink5", 5),
    "B300": ("nvlink5", 6),
    "L40S": (None, 4),
    "L40": (None, 4),
    "L4": (None, 4),
    "A10": (None, 4),
    "RTX 4090": (None, 4),
    "RTX 5090": (None, 5),
    "T4": (None, 3),
}


def gpu_model(gpu: str) -> str | None:
    """The :data:`GPU_MODELS` entry GPU ``gpu`` is (:func:`gpu_model_value`, longer entries
    first); None if none.

    >>> gpu_model("NVIDIA H100 80GB HBM3"), gpu_model("NVIDIA RTX A4000")
    ('H100', None)
    """
    return gpu_model_value(gpu, ((model, model) for model in sorted(GPU_MODELS, key=len, reverse=True)), None)


def check_gpu_nvlink(gpu: str, nvlink: str) -> None:
    """Raise :class:`InputError` where GPU ``gpu``, a model :data:`GPU_MODELS` knows, has no
    NVLink or another generation than ``nvlink``: a server built so would move more (or less)
    than its GPUs can.

    >>> check_gpu_nvlink("NVIDIA H100 80GB HBM3", "nvlink5")
    Traceback (most recent call last):
    ...
    flowsim.errors.InputError: the NVIDIA H100 80GB HBM3 has NVLink nvlink4, not nvlink5
    """
    model = gpu_model(gpu)
    if model is None:
        return
    own = GPU_MODELS[model][0]
    if own is None:
        raise InputError(f"the {gpu} has no NVLink: its GPUs talk over PCIe")
    if own != nvlink:
        raise InputError(f"the {gpu} has NVLink {own}, not {nvlink}")


#: GeForce cards by name (TITAN and GTX too; RTX 2050 to 5090, not the professional RTX 4000
#: Ada or RTX A6000): NVIDIA's driver gives them no peer-to-peer over PCIe, so NCCL stages their
#: copies in host memory even under a common PCIe switch (docs/hardware.md §3.3: measured on the
#: RTX 4090 and 5090; the older GeForce cards taken alike [uncertain]).
_GEFORCE = re.compile(r"GEFORCE|TITAN|\bGTX\b|\bRTX\s*[2-5]0[5-9]0(?!\d)", re.IGNORECASE)


def gpu_peer_to_peer(gpu: str) -> bool:
    """Whether NVIDIA's driver gives GPU ``gpu`` (as nvidia-smi names it) peer-to-peer over
    PCIe: not a GeForce card's (:data:`_GEFORCE`), which a patched driver may change.

    >>> gpu_peer_to_peer("NVIDIA GeForce RTX 3090"), gpu_peer_to_peer("RTX 4090"), gpu_peer_to_peer("NVIDIA L40S")
    (False, False, True)
    """
    return not _GEFORCE.search(gpu)


def gpu_compute_capability(model: str) -> int:
    """Compute capability x 10 of a GPU model (``"H100"``, ``"NVIDIA GeForce RTX 4090"``), as
    NCCL reads it (its ``cudaCompCap``); 0 for a model not in docs/hardware.md §1.4.

    >>> gpu_compute_capability("NVIDIA GeForce RTX 4090"), gpu_compute_capability("L40S"), gpu_compute_capability("GPU")
    (89, 89, 0)
    """
    return gpu_model_value(model, _GPU_SM, 0)


#: The SM clock (GHz) of the SXM data-center GPU of a compute capability, at its boost:
#: A100 1.41 (A100 whitepaper; 19.5 FP32 TFLOPS = 108 SMs x 64 lanes x 2 x 1.41 GHz), H100 and
#: H200 1.98 (67 FP32 TFLOPS = 132 SMs x 128 lanes x 2 x 1.98 GHz, their datasheets), B200
#: 1.98 (a third-party specification table, uncertain); sources in docs/hardware.md §1.5.
#: Other compute capabilities have no figure here.
_SXM_SM_CLOCK_GHZ = {80: 1.41, 90: 1.98, 100: 1.98}


def gpu_sm_clock_GHz(sm: int) -> float | None:
    """The boost SM clock (GHz) of the SXM GPU of compute capability ``sm`` (x 10), ``None``
    where docs/hardware.md §1.5 gives none.

    >>> gpu_sm_clock_GHz(90), gpu_sm_clock_GHz(80), gpu_sm_clock_GHz(120)
    (1.98, 1.41, None)
    """
    return _SXM_SM_CLOCK_GHZ.get(sm)


#: Peak dense BF16 tensor-core throughput per GPU (FLOP/s), by the GPU model a
#: :class:`~flowsim.servers.ServerSpec` names; sources in docs/hardware.md §9.1. NVIDIA's
#: datasheets quote these with 2:4 sparsity, twice the dense figure given here.
GPU_PEAK_BF16_FLOPS = {
    "A100": 312e12,
    "A800": 312e12,
    "H100": 989e12,
    "H800": 989e12,
    "H200": 989e12,
    "GH200": 989e12,
    "B200": 2.25e15,
    "B300": 2.25e15,
    "GB200": 2.5e15,
    "GB300": 2.5e15,
    "L40S": 362.05e12,
}

#: GPU models flowsim knows with no sourced peak dense BF16 figure, and why (docs/hardware.md §9.1).
_NO_PEAK_BF16 = {
    "V100": "V100 has no BF16 tensor cores; for an FP16 step give peak_flops = 125e12, its FP16 tensor-core peak "
            "(NVIDIA V100 datasheet, SXM2)",
    "H20": "NVIDIA publishes no datasheet for the H20; give peak_flops",
}


def gpu_peak_flops(gpu: str) -> float:
    """Peak dense BF16 FLOP/s of GPU model ``gpu`` (a key of :data:`GPU_PEAK_BF16_FLOPS`)."""
    if gpu in _NO_PEAK_BF16:
        raise InputError(f"no peak BF16 FLOP/s for GPU {gpu!r}: {_NO_PEAK_BF16[gpu]}")
    if gpu not in GPU_PEAK_BF16_FLOPS:
        raise InputError(
            f"no peak BF16 FLOP/s for GPU {gpu!r}; known: {', '.join(GPU_PEAK_BF16_FLOPS)} (or give peak_flops)"
        )
    return GPU_PEAK_BF16_FLOPS[gpu]
