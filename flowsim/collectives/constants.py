"""NCCL's tuning constants, per NCCL version, as its sources give them.

Every number here is copied from NCCL's sources at the tag named in each entry's ``source``
([NCCL] ``src/graph/tuning.cc`` for the latencies, bandwidth caps and tree correction
factors, ``src/graph/search.cc`` for the search's speed arrays, ``src/transport/nvls.cc``
for the NVLS channel counts); docs/hardware.md §7.3 lists them and how the versions differ.
:mod:`flowsim.collectives.tuner` makes NCCL's choice from them and
:func:`flowsim.collectives.nccl_costs` charges their latencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flowsim.errors import InputError

__all__ = [
    "DEFAULT_NCCL_VERSION",
    "NCCL_ALGORITHMS",
    "NCCL_PROTOCOLS",
    "NCCL_VERSIONS",
    "NcclConstants",
    "constants_of",
]

#: NCCL's algorithms, in the order of its constant arrays (``NCCL_ALGO_*``).
NCCL_ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
#: NCCL's protocols, in the order of its constant arrays (``NCCL_PROTO_*``).
NCCL_PROTOCOLS = ("ll", "ll128", "simple")


@dataclass(frozen=True)
class NcclConstants:
    """One NCCL version's tuning constants ([NCCL] ``src/graph/tuning.cc``, ``search.cc``).

    Latencies in microseconds, bandwidths in GB/s. Per-algorithm rows follow
    :data:`NCCL_ALGORITHMS`, per-protocol entries :data:`NCCL_PROTOCOLS`; rows by GPU
    generation follow Volta, Ampere, Hopper, Blackwell, and their three entries one node,
    two nodes, more nodes.
    """

    version: str
    base_latency_us: tuple[tuple[float, float, float], ...]
    hw_latency_us: Mapping[str, tuple[tuple[float, float, float], ...]]
    ll_max_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_ring_ll128_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_tree_ll128_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_tree_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_nvls_tree_bw: tuple[tuple[float, float, float], ...]
    nvls_efficiency: tuple[float, float, float, float]
    tree_correction: tuple[tuple[float, ...], ...]
    speeds_intra: Mapping[str, tuple[float, ...]]
    speeds_inter: Mapping[str, tuple[float, ...]]
    nvls_channels: Mapping[str, int]
    source: str


_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
# search.cc speed arrays: "volta" and "ampere" share the first pair.
_SPEEDS_INTRA = {
    "volta": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
_SPEEDS_INTER = {
    "volta": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24,
              0.12),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                  1.2, 0.24, 0.12),
}
_SPEEDS_INTRA["ampere"] = _SPEEDS_INTRA["volta"]
_SPEEDS_INTER["ampere"] = _SPEEDS_INTER["volta"]

_MASTER = NcclConstants(
    version="2.30.7",
    base_latency_us=((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (8.0, 8.0, 8.0)),
    hw_latency_us={
        "nvlink": ((.6, 1.25, 4.0), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
        "pci": ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 4.0)),
        "net": ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9), (0, 0, 14)),
    },
    ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0)),
    per_channel_max_ring_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0)),
    per_channel_max_tree_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0)),
    per_channel_max_tree_bw=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0)),
    per_channel_max_nvls_tree_bw=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0)),
    nvls_efficiency=(0.0, 0.0, 0.85, 0.74),
    tree_correction=_TREE_CORRECTION,
    speeds_intra=_SPEEDS_INTRA,
    speeds_inter=_SPEEDS_INTER,
    nvls_channels={"hopper": 16, "blackwell": 32},
    source="[NCCL] master 2.30.7: src/graph/tuning.cc, src/graph/search.cc, src/transport/nvls.cc",
)

#: NCCL versions whose constants flowsim has (docs/hardware.md §7.3), newest first.
NCCL_VERSIONS: dict[str, NcclConstants] = {
    "2.30.7": _MASTER,
    "2.19.3": NcclConstants(
        version="2.19.3",
        base_latency_us=((6.8, 14.0, 0), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        hw_latency_us={
            "nvlink": ((.6, 1.25, 28), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 23), (0, 0, 23), (0, 0, 0)),
            "pci": ((1.0, 1.9, 28), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
            "net": ((5.0, 8.5, 28), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14), (0, 0, 0)),
        },
        ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0)),
        per_channel_max_ring_ll128_bw=_MASTER.per_channel_max_ring_ll128_bw,
        per_channel_max_tree_ll128_bw=_MASTER.per_channel_max_tree_ll128_bw,
        per_channel_max_tree_bw=_MASTER.per_channel_max_tree_bw,
        per_channel_max_nvls_tree_bw=_MASTER.per_channel_max_nvls_tree_bw,
        nvls_efficiency=_MASTER.nvls_efficiency,
        tree_correction=_TREE_CORRECTION,
        speeds_intra=_SPEEDS_INTRA,
        speeds_inter=_SPEEDS_INTER,
        nvls_channels={"hopper": 16, "blackwell": 16},
        source="[NCCL] v2.19.3-1: src/graph/tuning.cc (docs/hardware.md §7.3)",
    ),
}
#: The version :func:`nccl_choice` follows unless told otherwise: the newest flowsim has.
DEFAULT_NCCL_VERSION = "2.30.7"


def constants_of(version: str) -> NcclConstants:
    """The constants of NCCL ``version``; an unknown one is an
    :class:`~flowsim.errors.InputError` naming the versions flowsim has."""
    if version not in NCCL_VERSIONS:
        raise InputError(f"no constants for NCCL {version!r}; flowsim has {', '.join(NCCL_VERSIONS)}")
    return NCCL_VERSIONS[version]
