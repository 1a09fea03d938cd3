"""NCCL's tuning constants, per NCCL version, as its sources give them.

Every number here is copied from NCCL's sources at the tag named in each entry's ``source``
([NCCL] ``src/graph/tuning.cc`` for the latencies, bandwidth caps and tree correction
factors, ``src/graph/search.cc`` for the search's speed arrays, ``src/graph/topo.h`` for
the NVLink bandwidths, ``src/transport/nvls.cc`` for the NVLS channel counts);
docs/hardware.md §7.3 lists them and how the versions differ. Where a version's *rules*
differ (not only its numbers), :mod:`flowsim.collectives.tuner` switches on
:attr:`NcclConstants.release`. The tuner makes NCCL's choice from them and
:func:`flowsim.collectives.nccl_costs` charges their latencies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from flowsim.errors import InputError

__all__ = [
    "ALGORITHM_RELEASES",
    "DEFAULT_NCCL_VERSION",
    "NCCL_ALGORITHMS",
    "NCCL_PROTOCOLS",
    "NCCL_VERSIONS",
    "NcclConstants",
    "constants_of",
    "leave_out",
    "nccl_release",
    "nearest_version",
    "predated",
    "predated_algorithm",
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
    two nodes, more nodes. A version older than a GPU generation (2.19.3 and Blackwell)
    repeats the row NCCL gives that generation (``compCapIndex`` stops at its newest row).
    ``per_channel_max_nvls_tree_bw`` and ``nvls_efficiency`` are ``None`` for versions
    before 2.28.3, whose NVLS model has neither. ``nvlink_bw`` is NCCL's bandwidth of one
    NVLink by flowsim's NVLink generation name (``topo.h`` ``SMxx_NVLINK_BW``).
    """

    version: str
    base_latency_us: tuple[tuple[float, float, float], ...]
    hw_latency_us: Mapping[str, tuple[tuple[float, float, float], ...]]
    ll_max_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_ring_ll128_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_tree_ll128_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_tree_bw: tuple[tuple[float, float, float], ...]
    per_channel_max_nvls_tree_bw: tuple[tuple[float, float, float], ...] | None
    nvls_efficiency: tuple[float, float, float, float] | None
    tree_correction: tuple[tuple[float, ...], ...]
    speeds_intra: Mapping[str, tuple[float, ...]]
    speeds_inter: Mapping[str, tuple[float, ...]]
    nvls_channels: Mapping[str, int]
    nvlink_bw: Mapping[str, float]
    source: str

    @property
    def release(self) -> tuple[int, ...]:
        """The version as numbers, ``(2, 26, 2)``: what the tuner's version switches compare."""
        return tuple(int(part) for part in self.version.split("."))


_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
# treeCorrectionFactor[NCCL_NUM_PROTOCOLS][23] of v2.19.3-1 and v2.26.2-1 (one entry shorter).
_TREE_CORRECTION_23 = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
# search.cc speed arrays: "volta" and "ampere" share the first pair.
_SPEEDS_VOLTA_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_SPEEDS_VOLTA_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
                       0.24, 0.12)
_SPEEDS_SM90_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
_SPEEDS_SM90_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
_SPEEDS_INTRA = {
    "volta": _SPEEDS_VOLTA_INTRA,
    "ampere": _SPEEDS_VOLTA_INTRA,
    "hopper": _SPEEDS_SM90_INTRA,
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
_SPEEDS_INTER = {
    "volta": _SPEEDS_VOLTA_INTER,
    "ampere": _SPEEDS_VOLTA_INTER,
    "hopper": _SPEEDS_SM90_INTER,
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                  1.2, 0.24, 0.12),
}
# topo.h SMxx_NVLINK_BW by flowsim's NVLink generation (docs/hardware.md §1.1): SM60, SM70,
# SM80, SM86, SM90, SM100.
_NVLINK_BW = {"nvlink1": 18.0, "nvlink2": 20.0, "nvlink3": 20.0, "nvlink3_ga102": 12.0, "nvlink4": 20.6,
              "nvlink5": 40.1}

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
    nvlink_bw=_NVLINK_BW,
    source="[NCCL] master 2.30.7: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

# v2.28.9-1 (the newest 2.28 release): every value read from that tag's sources; what is
# not named here equals master's (2.30.7).
_V2_28_9 = replace(
    _MASTER,
    version="2.28.9",
    # Blackwell {2*36.7, 34.6, 2*36.7} in v2.28.9-1 src/graph/tuning.cc perChMaxRingLL128Bws
    # (2.30.7: {40.0, 40.0, 40.0}; 34.5/34.6/34.5 in 2.29.2-2.29.3, 40s from v2.29.7-1).
    per_channel_max_ring_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (73.4, 34.6, 73.4)),
    # Blackwell beyond two nodes 43.8 in v2.28.9-1 src/graph/tuning.cc perChMaxNVLSTreeBws
    # (2.30.7: 80.0, from v2.30.3-1; 43.1 in v2.28.3-1 and v2.28.7-1).
    per_channel_max_nvls_tree_bw=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 43.8)),
    # treeCorrectionFactor[NCCL_NUM_PROTOCOLS][23] in v2.28.9-1 src/graph/tuning.cc (2.30.7
    # has 24 columns, from v2.29.2-1, for its NVLSTree correction).
    tree_correction=_TREE_CORRECTION_23,
    # v2.28.9-1 src/graph/search.cc: sm100SpeedArrayIntra has no 45.0 (added in v2.29.2-1),
    # sm100SpeedArrayInter neither 86.0 (v2.30.3-1) nor 80.0 (v2.29.7-1).
    speeds_intra={**_SPEEDS_INTRA, "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)},
    speeds_inter={**_SPEEDS_INTER, "blackwell": (96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0,
                                                 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)},
    source="[NCCL] v2.28.9-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

# v2.29.7-1 (the newest 2.29 release): every value read from that tag's sources; what is
# not named here equals master's (2.30.7): its tuning.cc arrays, treeCorrectionFactor[..][24],
# baseLat and hwLat rows and nvlsEfficiency, its search.cc arrays but one, its topo.h NVLink
# bandwidths and its nvls.cc channel counts.
_V2_29_7 = replace(
    _MASTER,
    version="2.29.7",
    # Blackwell beyond two nodes 43.8 in v2.29.7-1 src/graph/tuning.cc perChMaxNVLSTreeBws
    # (80.0 from v2.30.3-1).
    per_channel_max_nvls_tree_bw=_V2_28_9.per_channel_max_nvls_tree_bw,
    # v2.29.7-1 src/graph/search.cc sm100SpeedArrayInter: 80.0 but no 86.0 (v2.30.3-1).
    speeds_inter={**_SPEEDS_INTER, "blackwell": (96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0,
                                                 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)},
    source="[NCCL] v2.29.7-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

_V2_26_2 = NcclConstants(
    version="2.26.2",
    # PAT has no baseLat row in v2.26.2-1: its latency starts from a literal 8 us ("Base
    # time" in ncclTopoTuneModel), kept here as master keeps it, in the PAT row.
    base_latency_us=((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (8.0, 8.0, 8.0)),
    # No hwLat row for PAT either (zero); PAT's latency reads the NET Tree row.
    hw_latency_us={
        "nvlink": ((.6, 1.25, 4.0), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 0)),
        "pci": ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        "net": ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14), (0, 0, 0)),
    },
    ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0)),
    # Blackwell rows are twice Hopper's in v2.26.2-1 (2*36.7, 2*29.0, 2*38.7, ...).
    per_channel_max_ring_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (73.4, 73.4, 73.4)),
    per_channel_max_tree_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (73.4, 73.4, 58.0)),
    per_channel_max_tree_bw=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (77.4, 82.8, 72.0)),
    per_channel_max_nvls_tree_bw=None,
    nvls_efficiency=None,
    tree_correction=_TREE_CORRECTION_23,
    speeds_intra={**_SPEEDS_INTRA, "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0)},
    speeds_inter={**_SPEEDS_INTER, "blackwell": _SPEEDS_SM90_INTER},
    nvls_channels={"hopper": 16, "blackwell": 32},
    nvlink_bw={**_NVLINK_BW, "nvlink5": 40.0},
    source="[NCCL] v2.26.2-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

# v2.27.7-1 (the newest 2.27 release), every value read from that tag's sources: its
# tuning.cc arrays are v2.26.2-1's, byte for byte (PAT without baseLat and hwLat rows, NET
# NVLSTree 14, Blackwell caps twice Hopper's, 23 tree factors, no nvlsEfficiency or
# perChMaxNVLSTreeBws: the NVLS model before v2.28.3-1); its search.cc speed arrays and
# topo.h NVLink bandwidths are v2.28.9-1's: the sm100 intra array's trailing 18.0 from
# v2.27.3-1, the sm100 inter array its own from v2.27.3-1 (47.9, 45.0, ...), 48.0 / 45.1 from
# v2.27.5-1, a leading 96.0 from v2.27.6-1, SM100_NVLINK_BW 40.1 from v2.27.5-1. Its NVLS
# channels are 2.26.2's (24 in one Blackwell NVLink domain: the tuner's 2.27.3 switch).
_V2_27_7 = replace(
    _V2_26_2,
    version="2.27.7",
    speeds_intra=_V2_28_9.speeds_intra,
    speeds_inter=_V2_28_9.speeds_inter,
    nvlink_bw=_V2_28_9.nvlink_bw,
    source="[NCCL] v2.27.7-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

# v2.19.3-1 knows no Blackwell: its compCapIndex stops at Hopper, its search takes the SM90
# speed arrays and topo.h SM90_NVLINK_BW for any compute capability from 90, so the Blackwell
# entries repeat Hopper's.
_V2_19_3 = NcclConstants(
    version="2.19.3",
    base_latency_us=((6.8, 14.0, 0), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
    hw_latency_us={
        "nvlink": ((.6, 1.25, 28), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 23), (0, 0, 23), (0, 0, 0)),
        "pci": ((1.0, 1.9, 28), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        "net": ((5.0, 8.5, 28), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14), (0, 0, 0)),
    },
    ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0)),
    per_channel_max_ring_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (36.7, 36.7, 36.7)),
    per_channel_max_tree_ll128_bw=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (36.7, 36.7, 29.0)),
    per_channel_max_tree_bw=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (38.7, 41.4, 36.0)),
    per_channel_max_nvls_tree_bw=None,
    nvls_efficiency=None,
    tree_correction=_TREE_CORRECTION_23,
    speeds_intra={
        **_SPEEDS_INTRA,
        "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0),
        "blackwell": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0),
    },
    speeds_inter={**_SPEEDS_INTER, "blackwell": _SPEEDS_SM90_INTER},
    nvls_channels={"hopper": 16, "blackwell": 16},
    nvlink_bw={**_NVLINK_BW, "nvlink4": 20.0, "nvlink5": 20.0},
    source="[NCCL] v2.19.3-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

# The newest release of each series from 2.20 to 2.25, every value read from that tag's
# sources. Their tuning.cc arrays change at three tags only: v2.21.5-1 (hwLat NVLink NVLS and
# NVLSTree 25, Hopper's llMaxBws {141, 45, 35}), v2.23.4-1 (the Tree Simple latencies
# master has: baseLat 8.4, hwLat 4.0 / 4.0 / 14) and v2.25.1-1 (Blackwell rows, as
# v2.26.2-1's); search.cc's sm90SpeedArrayIntra gains 11.0 at v2.21.5-1 and sm100 arrays come
# at v2.25.1-1; topo.h's SM90_NVLINK_BW is 20.6 from v2.20.3-1 and SM100_NVLINK_BW 40.0 from
# v2.25.1-1; nvls.cc's channels are NVLS_NCHANNELS 16 until v2.25.1-1 splits them 16 / 32.
# Before v2.25.1-1 NCCL knows no Blackwell: compCapIndex stops at Hopper and any compute
# capability from 90 takes the SM90 speed arrays and NVLink bandwidth, so the Blackwell
# entries repeat Hopper's, as in 2.19.3.
_V2_20_5 = replace(
    _V2_19_3,
    version="2.20.5",
    nvlink_bw={**_NVLINK_BW, "nvlink5": 20.6},
    source="[NCCL] v2.20.5-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)
_SPEEDS_SM90_INTRA_2_21 = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
_V2_21_5 = replace(
    _V2_20_5,
    version="2.21.5",
    hw_latency_us={
        "nvlink": ((.6, 1.25, 28), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 0)),
        "pci": _V2_19_3.hw_latency_us["pci"],
        "net": _V2_19_3.hw_latency_us["net"],
    },
    ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (141.0, 45.0, 35.0)),
    speeds_intra={**_SPEEDS_INTRA, "hopper": _SPEEDS_SM90_INTRA_2_21, "blackwell": _SPEEDS_SM90_INTRA_2_21},
    source="[NCCL] v2.21.5-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)
_V2_22_3 = replace(
    _V2_21_5,
    version="2.22.3",
    source="[NCCL] v2.22.3-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)
_V2_23_4 = replace(
    _V2_21_5,
    version="2.23.4",
    # PAT (new in v2.23.4-1) has no baseLat or hwLat row: zeros, its latency from a literal
    # 8 us as in 2.26.2 (kept in the PAT row, as _V2_26_2 keeps it).
    base_latency_us=_V2_26_2.base_latency_us,
    hw_latency_us={
        "nvlink": ((.6, 1.25, 4.0), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 0)),
        "pci": ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        "net": ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14), (0, 0, 0)),
    },
    source="[NCCL] v2.23.4-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)
_V2_24_3 = replace(
    _V2_23_4,
    version="2.24.3",
    source="[NCCL] v2.24.3-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)
_V2_25_1 = replace(
    _V2_26_2,
    version="2.25.1",
    source="[NCCL] v2.25.1-1: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/transport/nvls.cc",
)

#: NCCL versions whose constants flowsim has (docs/hardware.md §7.3), newest first.
NCCL_VERSIONS: dict[str, NcclConstants] = {c.version: c for c in (_MASTER, _V2_29_7, _V2_28_9, _V2_27_7,
                                                                   _V2_26_2, _V2_25_1, _V2_24_3, _V2_23_4,
                                                                   _V2_22_3, _V2_21_5, _V2_20_5, _V2_19_3)}
#: The version :func:`nccl_choice` follows unless told otherwise: the newest flowsim has.
DEFAULT_NCCL_VERSION = "2.30.7"

#: The NCCL release that brought each algorithm newer than the oldest constants flowsim has
#: (2.19.3) do not tell apart: NVLS from v2.17.1-1 and NVLSTree from v2.18.1-1, the tags whose
#: src/include/devcomm.h first defines ``NCCL_ALGO_NVLS`` and ``NCCL_ALGO_NVLS_TREE``. A run of
#: an older NCCL had none of them, whatever constants flowsim predicts it with. (PAT, from
#: v2.23.4-1, is newer than 2.19.3: its constants' own rule leaves it out.)
ALGORITHM_RELEASES: dict[str, tuple[int, int, int]] = {"nvls": (2, 17, 1), "nvls_tree": (2, 18, 1)}
# NCCL's name of each of those algorithms and the environment variable that leaves it out
# (NCCL_NVLS_ENABLE=0 leaves NVLSTree out too).
_LEAVE_OUT = {"nvls": ("NVLS", "NCCL_NVLS_ENABLE", "0"), "nvls_tree": ("NVLSTree", "NCCL_ALGO", "^NVLSTree")}


@dataclass(frozen=True)
class PredatedAlgorithm:
    """The first algorithm of :data:`ALGORITHM_RELEASES` an NCCL release predates: NCCL's
    name for it, the release that brought it (``"2.17.1"``), and the NCCL environment
    variable (``key=value``) that leaves it out of a prediction."""

    name: str
    since: str
    key: str
    value: str


def predated_algorithm(release: tuple[int, ...]) -> PredatedAlgorithm | None:
    """What NCCL ``release`` (:func:`nccl_release`) did not have yet of
    :data:`ALGORITHM_RELEASES`, the oldest such first; None where it had them all.

    >>> predated_algorithm((2, 16, 5)).key, predated_algorithm((2, 17, 1)).value, predated_algorithm((2, 18, 1))
    ('NCCL_NVLS_ENABLE', '^NVLSTree', None)
    """
    for algorithm, since in ALGORITHM_RELEASES.items():
        if release < since:
            return PredatedAlgorithm(_LEAVE_OUT[algorithm][0], ".".join(map(str, since)), *_LEAVE_OUT[algorithm][1:])
    return None


#: The NCCL release that brought LL128: v2.5.6-1, whose src/include/core.h first defines
#: ``NCCL_PROTO_LL128`` (v2.4.8-1 has LL and Simple only). A run of an older NCCL had none.
LL128_RELEASE = (2, 5, 6)


def predated(release: tuple[int, ...]) -> tuple[PredatedAlgorithm, ...]:
    """What NCCL ``release`` did not have yet: the first algorithm it predates
    (:func:`predated_algorithm`) and LL128 (:func:`predated_protocol`), those that apply.

    >>> [item.name for item in predated((2, 4, 8))], predated((2, 18, 1))
    (['NVLS', 'LL128'], ())
    """
    return tuple(item for item in (predated_algorithm(release), predated_protocol(release)) if item is not None)


def leave_out(env: Mapping[str, str], lacked: PredatedAlgorithm) -> str | None:
    """The value of ``lacked.key`` that leaves ``lacked`` out under ``env`` (the variables
    set already), or None where ``env``'s own setting stands: unset, ``lacked.value``; an
    exclusion list (``NCCL_ALGO=^Tree``), the list with it added (``^Tree,NVLSTree``) unless
    it names it; any other setting (``NCCL_NVLS_ENABLE=1``, ``NCCL_ALGO=Ring,NVLSTree``) is
    the caller's choice.

    >>> nvls_tree = predated_algorithm((2, 17, 1))
    >>> leave_out({}, nvls_tree), leave_out({"NCCL_ALGO": "^Tree"}, nvls_tree)
    ('^NVLSTree', '^Tree,NVLSTree')
    >>> leave_out({"NCCL_ALGO": "^nvlstree"}, nvls_tree), leave_out({"NCCL_ALGO": "Ring"}, nvls_tree)
    (None, None)
    """
    current = env.get(lacked.key)
    if current is None:
        return lacked.value
    current = current.strip()
    if not (lacked.value.startswith("^") and current.startswith("^")) or ":" in current:
        return None
    names = [name.strip() for name in current[1:].split(",") if name.strip()]
    if lacked.value[1:].lower() in (name.lower() for name in names):
        return None
    return "^" + ",".join([*names, lacked.value[1:]])


def predated_protocol(release: tuple[int, ...]) -> PredatedAlgorithm | None:
    """LL128 where NCCL ``release`` (:func:`nccl_release`) predates it (:data:`LL128_RELEASE`),
    with the environment variable that leaves it out; None where it had LL128.

    >>> predated_protocol((2, 4, 8)).value, predated_protocol((2, 5, 6))
    ('^LL128', None)
    """
    if release < LL128_RELEASE:
        return PredatedAlgorithm("LL128", ".".join(map(str, LL128_RELEASE)), "NCCL_PROTO", "^LL128")
    return None


def constants_of(version: str) -> NcclConstants:
    """The constants of NCCL ``version``; an unknown one is an
    :class:`~flowsim.errors.InputError` naming the versions flowsim has."""
    if version not in NCCL_VERSIONS:
        raise InputError(f"no constants for NCCL {version!r}; flowsim has {', '.join(NCCL_VERSIONS)}")
    return NCCL_VERSIONS[version]


def nccl_release(version: str) -> tuple[int, int, int] | None:
    """``(2, 26, 2)`` for a version as NCCL prints it (``"2.26.2"``, ``"2.26.2+cuda12.8"``);
    ``None`` where it does not start with ``MAJOR.MINOR.PATCH``."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(?![\d.])", version.strip())
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def nearest_version(version: str) -> str | None:
    """The version of :data:`NCCL_VERSIONS` whose constants stand for NCCL ``version`` as a
    log prints it (``"2.27.1+cuda12.8"``): the same release, else one of the same series
    (2.27.3 takes 2.27.7's: a series changes its rules at its first release), else the newest
    older one flowsim has, else (older than all) the oldest. ``None`` where ``version`` is not
    one (:func:`nccl_release`).

    >>> nearest_version("2.26.2+cuda12.8"), nearest_version("2.27.1"), nearest_version("2.28.3")
    ('2.26.2', '2.27.7', '2.28.9')
    >>> nearest_version("2.29.2"), nearest_version("2.18.1")
    ('2.29.7', '2.19.3')
    """
    wanted = nccl_release(version)
    if wanted is None:
        return None
    by_release = sorted(NCCL_VERSIONS.values(), key=lambda c: c.release)
    series = [c.version for c in by_release if c.release[:2] == wanted[:2]]
    if series:
        return next((v for v in series if nccl_release(v) == wanted), series[-1])
    older = [c.version for c in by_release if c.release <= wanted]
    return older[-1] if older else by_release[0].version
