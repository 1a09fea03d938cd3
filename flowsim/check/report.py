"""A parsed nccl-tests run checked against flowsim's prediction for the same cluster, and
the report of the check.

Prediction choices: rank ``r`` on the ``i``-th host named in the rank lines, device ``d``,
is GPU ``n{i}.gpu{d}`` of the cluster, passed to flowsim in rank order. A
``sendrecv_perf`` run shifts data around the ring of ranks, every rank sending ``S`` to the
next at once; it is predicted as one ``send`` between the pair the ring waits for
(:func:`flowsim.pipeline.send_pair`: the first ring neighbours on different hosts, or ranks
0 and 1 on one host), assuming the other pairs do not share its links.

The check is two-sided. A row slower than predicted beyond its bounds (``SHORT``) says the
cluster underperforms: a degraded link, a wrong NCCL setting. A row faster than predicted
beyond them (``FAST``) says the system description is probably
wrong (an H100 log checked as ``dgx-a100``, more NICs than the preset has) or the model
misses what NCCL did there (an algorithm it does not predict). A size is flagged only when
both its runs (out-of-place and in-place, where the log has both) are beyond the bounds: what
slows a cluster slows both, one run alone far off is a noisy iteration. Where the log's GPU model,
rank count or hosts differ from the system given, the report says so, one line each.

The bounds (:func:`time_bounds`) split the predicted time in two: its latency (NCCL's
``baseLat`` and ``hwLat``, what does not grow with the size) and the rest (bandwidth and
contention, from the flows). The rest is held to a busbw within ``threshold`` (10%); the
latency to a factor ``1 + latency_tolerance`` (3x) either way, because NCCL's latency constants rank its
algorithms rather than time them (on the calibration logs real floors are up to 2.1x them).
So a latency-bound row is flagged only when it is far off, and a bandwidth-bound row as soon
as it is 10% off.

NCCL's choice follows the constants of the NCCL version the log prints (``NCCL version
2.26.2+cuda12.8``) when flowsim has that version's, else of its series' or the newest older version it has
(:func:`flowsim.collectives.constants.nearest_version`), else of the default version; a
version given to the check overrides the log's. The report's header says which.

Measured against predicted is compared as times (``predicted time / measured time``, which
equals measured busbw / predicted busbw for the same size and ranks): nccl-tests prints busbw
with two decimals, 0.00 for the smallest sizes, while its times keep their precision.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from flowsim.check.log import placed_error, where
from flowsim.check.parse import NcclTestLog, RankInfo, TestRow, parse_nccl_log
from flowsim.collectives import resolve_algorithm
from flowsim.collectives.builders import ALLTOALLV_MATRIX_FILE, ALLTOALLV_SPREAD
from flowsim.collectives.calls import OVERLAPPING
from flowsim.collectives.constants import (
    DEFAULT_NCCL_VERSION,
    NCCL_ALGORITHMS,
    NCCL_PROTOCOLS,
    NCCL_VERSIONS,
    PredatedAlgorithm,
    constants_of,
    leave_out,
    nccl_release,
    nearest_version,
    predated,
)
from flowsim.collectives.placement import send_pair
from flowsim.collectives.report import (
    DTYPE_BYTES,
    NCCL_TESTS_ITERS,
    ROOTED,
    NcclRow,
    busbw_Bps,
    launch_floor_us,
    model_note,
    sweep,
)
from flowsim.collectives.tuner import (
    COLLNET_ALGORITHMS,
    NCCL_COLLECTIVES,
    NCCL_ENV_KEYS,
    REDOPS,
    NcclEnv,
    communicator_channels,
    describe_system,
    gpudirect_rdma,
    merged_env,
    nccl_choice,
    system_env_taken,
)
from flowsim.engine import DEFAULT_TIME_REL_TOL, time_window_note
from flowsim.errors import InputError, whole_number
from flowsim.fabrics import build_cluster, front_end_only_note, resolve_fabric
from flowsim.failures import apply_failures, describe_changes
from flowsim.formatting import format_size
from flowsim.hardware import gpu_model_value
from flowsim.presets import GUESSED_PREFIX, PRESETS, guessed_pcie_box, system_name
from flowsim.servers import ServerSpec
from flowsim.topology import Topology

__all__ = [
    "AWS_PLATFORMS",
    "CLOSE_CALL",
    "LATENCY_TOLERANCE",
    "SIZE_BANDS",
    "BandError",
    "CheckReport",
    "RowCheck",
    "SUGGESTED_SYSTEMS",
    "check_log",
    "check_nccl_log",
    "default_system",
    "nccl_version_of",
    "other_choices",
    "platform_system",
    "time_bounds",
]

_KiB, _MiB, _GiB = 1 << 10, 1 << 20, 1 << 30

#: Message-size bands of the report's error summary: (label, lowest size, first size past it).
#: Below 64 KiB NCCL is latency-bound, from 1 MiB bandwidth takes over, past 1 GiB the
#: busbw has settled.
SIZE_BANDS: tuple[tuple[str, int, float], ...] = (
    ("< 64 KiB", 0, 64 * _KiB),
    ("64 KiB - 1 MiB", 64 * _KiB, _MiB),
    ("1 MiB - 64 MiB", _MiB, 64 * _MiB),
    ("64 MiB - 1 GiB", 64 * _MiB, _GiB),
    (">= 1 GiB", _GiB, math.inf),
)

# The GPU each preset is built with, as nccl-tests' rank lines name it ("NVIDIA H100 80GB
# HBM3"); a preset missing here (pcie_server: any PCIe GPU) is not compared.
_PRESET_GPU = {"dgx1_v100": "V100", "dgx_a100": "A100", "dgx_h100": "H100", "dgx_b200": "B200", "gb200_nvl72": "B200",
               "rtx5090_8x": "RTX 5090", "rtx4090_8x": "RTX 4090"}

#: The name the NVIDIA driver prints for a GPU it has no product name for (early GB200
#: drivers, coreweave/nccl-tests#43): it says nothing about the model.
UNNAMED_GPU = "NVIDIA Graphics Device"


#: The system :func:`default_system` takes for a log's GPUs: NVIDIA's own server of each SXM
#: GPU (its DGX, or for the GPUs NVIDIA sells in China, H800, A800 and H20, the HGX board
#: servers are built on, shipped in flowsim/systems/), found by a piece of the device name
#: nccl-tests' rank lines print (``NVIDIA H100 80GB HBM3``), the first piece that matches
#: (:func:`flowsim.hardware.gpu_model_value`; ``H200`` before ``H20``, which it holds). PCIe and
#: NVL cards (``NVIDIA H100 PCIe``, ``NVIDIA H200 NVL``), the GH200 and the GB300 have no
#: NVIDIA server flowsim ships: they have none (:data:`_SUGGESTED` names what may fit).
DEFAULT_SYSTEMS: tuple[tuple[str, str | None], ...] = (
    ("PCIe", None), ("NVL", None), ("GH200", None), ("GB300", None),
    ("GB200", "gb200-nvl72"), ("B300", "dgx-b300"), ("B200", "dgx-b200"), ("H200", "dgx-h200"),
    ("H100", "dgx-h100"), ("H800", "hgx-h800"), ("H20", "hgx-h20"), ("A100-SXM", "dgx-a100"),
    ("A800-SXM", "hgx-a800"), ("V100-SXM2", "dgx1-v100"),
)


#: Systems a log's GPU may be in, which :func:`default_system` names without taking them
#: (GPU, system, when it fits): OCI's GB300 racks (one cloud's NICs) and the repository's GH200
#: quad node (one centre's machine; a path in the repository, not in the package).
SUGGESTED_SYSTEMS: tuple[tuple[str, str, str], ...] = (
    ("GB300", "oci-bm-gpu-gb300-4", "if its racks are OCI's (800 Gb/s of RoCE a GPU; 'flowsim presets')"),
    ("GH200", "data/systems/alps_gh200.toml", "(in the repository) if its nodes are quad nodes like those of CSCS's "
                                              "Alps (4 GPUs linked all to all, a 200 Gb/s NIC each)"),
)
_SUGGESTED = tuple((gpu, f"in no {'NVIDIA ' if gpu == 'GB300' else ''}server flowsim ships: --system {system} {when}")
                   for gpu, system, when in SUGGESTED_SYSTEMS)

#: What a guessed box of PCIe cards leaves to the user (:func:`default_system`).
GUESSED_BOX = ("its layout is a guess, and the figures move with it: --system names the box's own (a preset, or a "
               "system file; 'flowsim system import' writes one from its 'nvidia-smi topo -m')")


#: The shipped AWS systems by the instance family the aws-ofi-nccl plugin's INFO line names
#: (``NET/OFI Running on p5.48xlarge platform``: ``p5``), lower case.
AWS_PLATFORMS = {"p4d": "aws-p4d", "p4de": "aws-p4de", "p5": "aws-p5", "p5e": "aws-p5e", "p6-b200": "aws-p6-b200"}


def platform_system(log: NcclTestLog) -> str | None:
    """The shipped system of the AWS instance ``log``'s INFO lines name
    (:attr:`NcclTestLog.platform`, :data:`AWS_PLATFORMS`); None where they name none flowsim
    ships (p5en, a GPU instance of another family) or no instance at all."""
    if log.platform is None:
        return None
    return AWS_PLATFORMS.get(log.platform.split(".")[0].lower())


def default_system(log: NcclTestLog) -> str | ServerSpec:
    """The system to check ``log`` on when none is given: the AWS instance its INFO lines name
    where flowsim ships it (:func:`platform_system`), else NVIDIA's server of the GPU its rank
    lines name (:data:`DEFAULT_SYSTEMS`), else, for PCIe cards on one host, a box of as many as
    the log ran on as flowsim guesses one (:func:`flowsim.presets.guessed_pcie_box`).

    Raises
    ------
    InputError
        The log names no GPU (no rank lines, or only the driver's unnamed device), its GPUs
        are of no server flowsim ships nor PCIe cards on one host, or of two different ones.
    """
    instance = platform_system(log)
    if instance is not None:
        return instance
    named = [name for name in log.gpu_models if name != UNNAMED_GPU]
    if not named:
        said = (f" (they print {UNNAMED_GPU!r}, the driver's name for a GPU it has no product name for)"
                if UNNAMED_GPU in log.gpu_models else "")
        raise InputError(f"--system is required to check an nccl-tests output whose rank lines name no GPU model{said}")
    systems: dict[str | ServerSpec, str] = {}
    for name in named:
        system: str | ServerSpec | None = gpu_model_value(name, DEFAULT_SYSTEMS, None)
        if system is None and len(set(named)) == 1:
            system = _guessed_box(log, name)
        if system is None:
            suggested = gpu_model_value(name, _SUGGESTED, None)
            which = (f"{suggested}, else a system file (docs/system-format.md)"
                     if suggested is not None else
                     "in no server flowsim ships; name a preset or shipped system ('flowsim presets') or a "
                     "system file (docs/system-format.md; 'flowsim system import' writes one from the server's "
                     "'nvidia-smi topo -m')")
            raise InputError(f"--system is required: the log's GPU {name} is {which}")
        systems[system] = name
    if len(systems) > 1:
        raise InputError(f"--system is required: the log's GPUs ({', '.join(named)}) are of different servers")
    return next(iter(systems))


def _guessed_box(log: NcclTestLog, gpu: str) -> ServerSpec | None:
    """The box of PCIe cards ``gpu`` that :func:`default_system` checks ``log`` on: as many as
    its busiest host ran on; None where ``gpu`` is no such card; an error where the log runs
    on several hosts (their NICs are the user's to give)."""
    per_host = Counter(rank.host for rank in log.ranks)
    box = guessed_pcie_box(gpu, max(per_host.values()))
    if box is None:
        return None
    if len(per_host) > 1:
        raise InputError(f"--system is required: the log's GPU {gpu} is a PCIe card and the run spans "
                         f"{len(per_host)} hosts, whose NICs flowsim cannot guess: a system file gives them "
                         "(docs/system-format.md; 'flowsim system import' writes one from a host's "
                         "'nvidia-smi topo -m')")
    return box


@dataclass(frozen=True)
class RowCheck:
    """Measured against predicted for one size.

    ``ratio_*`` is measured busbw over predicted busbw (predicted over measured time);
    ``short`` when either measured time is above :func:`time_bounds`' upper bound, ``fast``
    when either is below its lower one; ``wrong`` when nccl-tests counted wrong elements.
    ``predicted_latency_us`` is the part of the predicted time that does not grow with the
    size (NCCL's latency, or the host's launch floor where ``launch_bound``: the floor set
    the predicted time). ``algorithm``, ``protocol`` and ``channels`` are what the prediction
    ran for the size (as :func:`flowsim.collectives.report.sweep` gives them; an all-to-all's
    channels are each peer's). Predicted fields are None for rows not predicted (size 0 or below
    ``min_bytes``). ``root`` is the row's, as printed (-1 for a collective without one; None
    where the table has no root column); ``dtype`` and ``redop`` too (``redop`` None where the
    table has no redop column). ``nccl_ran`` is what NCCL's TUNING lines say it ran for the
    size (``"ring/ll"``, flowsim's names), None without them. ``busiest_link``,
    ``busiest_tier`` and ``busiest_utilization`` are the prediction's busiest link (or NVLS
    budget), what it is and how busy over the predicted time
    (:func:`flowsim.stepreport.busiest_link`), None where the size was not predicted or no
    link carried a byte. ``nccl_model_us`` is NCCL's predicted time (us) of each algorithm and
    protocol its tuner weighed for the size (:attr:`NcclRow.nccl_model_us`; empty where no
    tuner chose: point-to-point collectives, or a size not predicted).
    """

    size_bytes: int
    measured_busbw_out_GBps: float
    measured_busbw_in_GBps: float
    measured_time_out_us: float
    measured_time_in_us: float
    predicted_time_us: float | None
    predicted_busbw_GBps: float | None
    ratio_out: float | None
    ratio_in: float | None
    short: bool
    wrong: bool
    fast: bool = False
    predicted_latency_us: float | None = None
    launch_bound: bool = False
    algorithm: str | None = None
    protocol: str | None = None
    channels: int | None = None
    root: int | None = None
    dtype: str | None = None
    redop: str | None = None
    nccl_ran: str | None = None
    busiest_link: str | None = None
    busiest_tier: str | None = None
    busiest_utilization: float | None = None
    nccl_model_us: dict[str, float] = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        """Short of the prediction, faster than it, or wrong elements counted."""
        return self.short or self.fast or self.wrong

    @property
    def error_out(self) -> float | None:
        """Error of the prediction against the out-of-place column: predicted busbw /
        measured busbw - 1 (positive: the model is faster than the cluster)."""
        return None if not self.ratio_out else 1.0 / self.ratio_out - 1.0


@dataclass(frozen=True)
class BandError:
    """The prediction's error over one band of message sizes (:attr:`RowCheck.error_out`).

    ``median_abs`` is the median of ``|error|``; ``worst`` the signed error of largest
    magnitude, at ``worst_size``.
    """

    label: str
    n_sizes: int
    median_abs: float
    worst: float
    worst_size: int


def error_by_band(rows: Sequence[RowCheck], bands: Sequence[tuple[str, int, float]] = SIZE_BANDS) -> list[BandError]:
    """:class:`BandError` of each band (label, lowest size, first size past it) holding a
    predicted row, in band order."""
    summary = []
    for label, low, high in bands:
        errors = [(r.error_out, r.size_bytes) for r in rows if low <= r.size_bytes < high and r.error_out is not None]
        if errors:
            worst, worst_size = max(errors, key=lambda e: abs(e[0]))
            summary.append(
                BandError(label, len(errors), statistics.median(abs(e) for e, _ in errors), worst, worst_size)
            )
    return summary


@dataclass(frozen=True)
class CheckReport:
    """One nccl-tests run checked against flowsim.

    Attributes
    ----------
    log : NcclTestLog
    system : str
        Preset name (``"dgx_h100"``).
    nodes : int
    threshold, latency_tolerance : float
        How far a row may be from the prediction before it is flagged (:func:`time_bounds`).
    algorithm, protocol, figure, fabric : str
        How the prediction was made (see :func:`flowsim.collectives.collective_time`).
    rows : tuple of RowCheck
    checked_at : str
        UTC time of the check, ISO 8601.
    warnings : tuple of str
        One line each: what the log lacks (:attr:`NcclTestLog.warnings`) and where it
        disagrees with the system given (GPU model, rank count, hosts).
    nccl_version : str
        The NCCL version whose constants the prediction used (a key of
        :data:`~flowsim.collectives.constants.NCCL_VERSIONS`).
    nccl : str
        Where that version comes from: ``"NCCL 2.26.2 (log)"``, ``"NCCL 2.27.1 (log) ->
        constants of 2.26.2"``, ``"NCCL 2.19.3 (given)"``, ...
    launch_floor_us : float
        The least time of an iteration that the log's host launches set (nccl-tests' ``-g``,
        ``-m``, ``-G``; :func:`flowsim.collectives.report.launch_floor_us`).
    failures : str
        What ``fail`` and ``degrade`` changed in the predicted cluster
        (:func:`flowsim.failures.describe_changes`); empty without them.
    explained : tuple of str
        One line per block of flagged sizes that another algorithm and protocol NCCL may have
        run there (one its model rates within :data:`CLOSE_CALL` of its choice, or its best
        without NVLS) would flag none of (:func:`other_choices`): which, and at which sizes.
        The flags stand; the line says what the cluster may have run instead of a fault.
    not_nvls : tuple of (int, str, str)
        ``SHORT`` sizes predicted with NVLS or NVLSTree that NCCL's best choice without them
        would flag ``SHORT`` too, so that NVLS missing on the cluster does not explain them:
        each size, that choice (``"ring/simple"``) and what bounds its prediction (a link's
        kind, or ``"latency"``, as :meth:`format_text`'s lines name them).
    fast_within_links : tuple of int
        Sizes faster than the prediction by more than the threshold that are not ``FAST``:
        a ring's or tree's lanes held to NCCL's modelled bandwidth, which the rows beat,
        while on the links alone the same choice is as fast as they are.
    cluster_sha256 : str
        SHA-256 of the cluster the prediction ran on as built (the server's description and
        the links of its servers and fabric, :func:`_cluster_sha256`): two system files of one
        name but other NICs differ here, which a history tells apart (empty: not known).
    """

    log: NcclTestLog
    system: str
    nodes: int
    threshold: float
    algorithm: str
    protocol: str
    figure: str
    fabric: str
    rows: tuple[RowCheck, ...]
    checked_at: str = field(default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat())
    warnings: tuple[str, ...] = ()
    latency_tolerance: float = 0.0
    nccl_version: str = DEFAULT_NCCL_VERSION
    nccl: str = f"NCCL {DEFAULT_NCCL_VERSION} (default)"
    launch_floor_us: float = 0.0
    failures: str = ""
    explained: tuple[str, ...] = ()
    not_nvls: tuple[tuple[int, str, str], ...] = ()
    fast_within_links: tuple[int, ...] = ()
    cluster_sha256: str = ""

    @property
    def flagged(self) -> tuple[RowCheck, ...]:
        """Rows flagged, in log order."""
        return tuple(r for r in self.rows if r.flagged)

    @property
    def short(self) -> tuple[RowCheck, ...]:
        """Rows slower than predicted by more than the threshold."""
        return tuple(r for r in self.rows if r.short)

    @property
    def fast(self) -> tuple[RowCheck, ...]:
        """Rows faster than predicted by more than the threshold."""
        return tuple(r for r in self.rows if r.fast)

    @property
    def wrong(self) -> tuple[RowCheck, ...]:
        """Rows in which nccl-tests counted wrong elements, predicted or not."""
        return tuple(r for r in self.rows if r.wrong)

    @property
    def ok(self) -> bool:
        """No row flagged."""
        return not self.flagged

    def error_by_band(self, bands: Sequence[tuple[str, int, float]] = SIZE_BANDS) -> list[BandError]:
        """The prediction's error by message-size band (:func:`error_by_band`)."""
        return error_by_band(self.rows, bands)

    def to_dict(self) -> dict:
        """JSON-ready summary: the check's settings, the log's description and every row."""
        log = self.log
        return {
            "source": log.source,
            "binary": log.binary,
            "collective": log.collective,
            "ranks": log.n_ranks,
            "hosts": list(log.hosts),
            "system": self.system,
            "nodes": self.nodes,
            "threshold": self.threshold,
            "latency_tolerance": self.latency_tolerance,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "figure": self.figure,
            "fabric": self.fabric,
            "nccl_version": self.nccl_version,
            "nccl": self.nccl,
            "launch_floor_us": self.launch_floor_us,
            "failures": self.failures,
            "checked_at": self.checked_at,
            "avg_busbw_GBps": log.avg_busbw_GBps,
            "n_flagged": len(self.flagged),
            "n_short": len(self.short),
            "n_fast": len(self.fast),
            "n_wrong": len(self.wrong),
            "warnings": list(self.warnings),
            "explained": list(self.explained),
            "not_nvls": [{"size_bytes": size, "without_nvls": choice, "bound": bound}
                         for size, choice, bound in self.not_nvls],
            "fast_within_links": list(self.fast_within_links),
            "error_by_band": [asdict(b) for b in self.error_by_band()],
            "rows": [{**asdict(r), "flagged": r.flagged, "error_out": r.error_out} for r in self.rows],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)

    def format_text(self, tuning: bool = False) -> str:
        """A table: size, what the prediction ran (algorithm, protocol, channels), predicted
        busbw, measured busbw and ratio (out-of-place, in-place), flag; then the error by size
        band and a closing summary. Warnings come first. With ``tuning``, under each row NCCL's
        predicted time of every algorithm and protocol its tuner weighed, beside the row's
        measured times (:func:`~flowsim.collectives.report.model_note`)."""
        log = self.log
        gpus = f" ({', '.join(log.gpu_models)})" if log.gpu_models else ""
        lines = [
            f"# {log.source}: {log.binary}, {log.n_ranks} ranks on {log.n_nodes} node(s){gpus}",
            *(f"# warning: {w}" for w in self.warnings),
            f"# predicted: {self.nodes} x {self.system}, {self.algorithm} algorithm, {self.protocol} protocol, "
            f"{self.figure} link rates, {self.fabric} fabric, {self.nccl}"
            + (f", failures: {self.failures}" if self.failures else ""),
            *self._launch_line(),
            # Not '.0%': a threshold of 0.005 would read "below 100%".
            f"# flag: SHORT below {100 * (1 - self.threshold):.12g}% of predicted busbw (the cluster underperforms), "
            f"FAST above {100 * (1 + self.threshold):.12g}% (the system description is probably wrong), "
            "WRONG where #wrong > 0;",
            f"#       the predicted time's latency part (NCCL's constants) may be up to "
            f"{1 + self.latency_tolerance:.12g}x longer or shorter; SHORT and FAST need both runs of a size;",
            "#       a ring or tree is FAST only if also faster than on its links alone (NCCL's model caps its lanes)",
            "#       size  what the model ran      predicted    out-of-place       in-place",
            "#        (B)       algo  proto  nch  busbw(GB/s)  busbw(GB/s) ratio  busbw(GB/s) ratio  flag",
        ]
        several_roots = len({r.root for r in self.rows if r.root is not None and r.root >= 0}) > 1
        # A run of every type or reduction (nccl-tests' -d all, -o all) prints a block of sizes each.
        several_ops = len({(r.dtype, r.redop) for r in self.rows}) > 1
        for i, r in enumerate(self.rows):
            previous = self.rows[i - 1] if i else None
            if several_ops and (previous is None or (r.dtype, r.redop) != (previous.dtype, previous.redop)):
                lines.append(f"# {r.dtype}" + (f" {r.redop}" if r.redop not in (None, "none") else ""))
            if several_roots and (previous is None or r.root != previous.root):
                lines.append(f"# root {r.root}")
            predicted = "-" if r.predicted_busbw_GBps is None else f"{r.predicted_busbw_GBps:.2f}"
            ratios = ["-" if x is None else f"{x:.2f}" for x in (r.ratio_out, r.ratio_in)]
            flag = ",".join(name for name, on in (("SHORT", r.short), ("FAST", r.fast), ("WRONG", r.wrong)) if on)
            ran = [("-" if x is None else str(x)) for x in (r.algorithm, r.protocol, r.channels)]
            lines.append(
                f"{r.size_bytes:12d}  {ran[0]:>9} {ran[1]:>6} {ran[2]:>4}  {predicted:>11}  "
                f"{r.measured_busbw_out_GBps:11.2f} {ratios[0]:>5}  {r.measured_busbw_in_GBps:11.2f} {ratios[1]:>5}  "
                f"{flag}".rstrip()
            )
            note = model_note(r.nccl_model_us, f"{r.algorithm}/{r.protocol}") if tuning else ""
            if note:
                lines.append(f"{note}; measured {r.measured_time_out_us:.2f} out-of-place, "
                             f"{r.measured_time_in_us:.2f} in-place")
        lines.extend(self._busiest_lines())
        bands = self.error_by_band()
        if bands:
            lines.append("# error of the prediction by size (predicted / measured busbw - 1, out-of-place):")
            width = max(len(b.label) for b in bands)
            lines.extend(
                f"#   {b.label:<{width}}  {b.n_sizes:3d} size{'s' if b.n_sizes != 1 else ' '}  "
                f"median |error| {100 * b.median_abs:6.1f}%  worst {100 * b.worst:+7.1f}% at {b.worst_size} B"
                for b in bands
            )
        lines.append(self._summary())
        lines.extend(f"# {line}" for line in self.explained)
        return "\n".join(lines)

    def format_brief(self) -> str:
        """One line: the log, its closing summary (:meth:`format_text`'s last line), and the
        range of measured / predicted busbw (out-of-place) over the predicted sizes."""
        log = self.log
        ratios = [r.ratio_out for r in self.rows if r.ratio_out is not None]
        spread = f"; measured / predicted {min(ratios):.2f}-{max(ratios):.2f}" if ratios else ""
        n = len(self.warnings)
        warned = f"; {n} warning{'s' if n > 1 else ''}, in the full report" if n else ""
        other = "; the flagged sizes fit another of NCCL's choices, in the full report" if self.explained else ""
        return (f"{log.named}: {log.binary}, {log.n_ranks} ranks on {log.n_nodes} node(s): "
                f"{self._summary().removeprefix('# ')}{spread}{warned}{other}")

    def _busiest_lines(self) -> list[str]:
        """What bounds the prediction, size range by size range: the kind of its busiest link
        where that link is at least :data:`BOUND_USE` busy over the predicted time, else
        latency (and the pipeline's fill), with the busiest link's use."""
        spans: list[tuple[str, list[RowCheck]]] = []
        for r in sorted((r for r in self.rows if r.busiest_tier is not None), key=lambda r: r.size_bytes):
            bound = _bound(r.busiest_tier, r.busiest_utilization)
            if spans and spans[-1][0] == bound:
                spans[-1][1].append(r)
            else:
                spans.append((bound, [r]))
        parts = []
        for bound, rows in spans:
            use = sorted(math.floor(100 * (r.busiest_utilization or 0.0)) for r in rows)
            busy = f"{use[0]}%" if use[0] == use[-1] else f"{use[0]}-{use[-1]}%"
            what = "busiest link" if bound == "latency" else "its use"
            parts.append(f"{bound} at {size_range([r.size_bytes for r in rows])} ({what} {busy})")
        if not parts:
            return []
        lines = ["# what bounds the predicted time: " + ", ".join(parts)]
        not_nvls = {size: (choice, bound) for size, choice, bound in self.not_nvls}
        for flag, advice in (("SHORT", _WHERE_TO_LOOK), ("FAST", _WHAT_TO_CHECK)):
            flagged: dict[str, list[int]] = {}
            for bound, rows in spans:
                flagged.setdefault(bound, []).extend(
                    r.size_bytes for r in rows if getattr(r, flag.lower())
                    and not (flag == "SHORT" and r.size_bytes in not_nvls and r.algorithm in _NVLS_FAMILY))
            for bound, sizes in flagged.items():
                if sizes:
                    guess = (f"; or at the guess: {self.system} is flowsim's guess of the box, whose own layout "
                             "(a system file) may set another bound"
                             if bound == "PCIe/host" and self.system.startswith(GUESSED_PREFIX) else "")
                    lines.append(f"# {flag} where {bound} bounds the prediction ({size_range(sizes)}): "
                                 f"{advice.get(bound, advice['network'])}{guess}")
        by_bound: dict[str, list[tuple[int, str]]] = {}
        for size, (choice, bound) in sorted(not_nvls.items()):
            by_bound.setdefault(bound, []).append((size, choice))
        ran = {r.size_bytes: r.algorithm for r in self.rows if r.algorithm in _NVLS_FAMILY}
        for bound, found in by_bound.items():
            sizes = [size for size, _ in found]
            nvls = "/".join(dict.fromkeys(str(ran.get(size)) for size in sizes))
            choices = ", ".join(dict.fromkeys(choice for _, choice in found))
            lines.append(f"# SHORT at {size_range(sizes)}, predicted with {nvls}: not NVLS missing on the cluster, "
                         f"since NCCL's best choice without it ({choices}) is faster than measured too; {bound} bounds "
                         f"that choice: {_WHERE_TO_LOOK.get(bound, _WHERE_TO_LOOK['network'])}")
        if self.fast_within_links:
            pairs = {r.size_bytes: f"{r.algorithm}/{r.protocol}" for r in self.rows}
            choices = ", ".join(dict.fromkeys(pairs[size] for size in self.fast_within_links))
            lines.append(f"# not FAST at {size_range(list(self.fast_within_links))}: faster than NCCL's model of "
                         f"{choices}, to which flowsim holds it, but not than the links described allow it (NCCL's "
                         "trees between servers beat that model on some clusters, docs/validation.md)")
        return lines

    def _launch_line(self) -> list[str]:
        """The host's launch floor, where the log's threads drive several GPUs each."""
        gpus = self.log.n_gpus
        if not self.launch_floor_us or gpus is None or gpus < 2:
            return []
        bound = sum(r.launch_bound for r in self.rows)
        sets = (f"the predicted time of {bound} size{'s' if bound != 1 else ''}" if bound
                else "less than every size's predicted time")
        return [f"# host: one thread launches {gpus} GPUs' kernels per iteration (-g {gpus}): at least "
                f"{self.launch_floor_us:.1f} us per iteration, {sets}; a row may "
                f"take that much longer before it is flagged SHORT (single-process runs carry CUDA's launch "
                "overheads, nccl-tests#333)"]

    def _summary(self) -> str:
        """The closing line: flagged sizes among those predicted, and why the others were not."""
        predicted = [r for r in self.rows if r.predicted_busbw_GBps is not None]
        left_out = [r for r in self.rows if r.predicted_busbw_GBps is None]
        n = sum(r.flagged for r in predicted)
        if n:
            summary = f"# {n} of {len(predicted)} predicted size{'s' if len(predicted) != 1 else ''} flagged"
            sides = [
                f"{k} {why}"
                for k, why in (
                    (sum(r.short for r in predicted), "slower than predicted (SHORT)"),
                    (sum(r.fast for r in predicted), "faster than predicted (FAST: check --system and the model)"),
                    # Corrupt results, whether or not the size is also SHORT or FAST.
                    (sum(r.wrong for r in predicted), "with wrong elements (WRONG: nccl-tests found corrupt results)"),
                )
                if k
            ]
            summary += ": " + ", ".join(sides)
        elif len(predicted) > 1:
            summary = f"# all {len(predicted)} predicted sizes OK"
        else:
            summary = "# the predicted size is OK" if predicted else "# no size predicted"
        if left_out:
            zero = sum(r.size_bytes == 0 for r in left_out)
            counts = ((len(left_out) - zero, "below min-bytes"), (zero, "of 0 bytes"))
            wrong = sum(r.wrong for r in left_out)
            summary += f"; not predicted: {', '.join(f'{k} {why}' for k, why in counts if k)}"
            summary += f" ({wrong} flagged WRONG)" if wrong else ""
        return summary


def _host_layout(spec: ServerSpec, devices: dict[int, int]) -> tuple[int, int]:
    """(hosts per server, GPUs per host) of the log on ``spec``: one host per server, but on
    a rack-scale system whose hosts are compute trays (:attr:`ServerSpec.hosts`: a GB200
    NVL72 rack is 18 trays of 4 GPUs, [DGXGB200-UG], each tray one host running its own
    ranks) and whose log's hosts each use at most a tray's GPUs, the trays of one rack."""
    trays, per_tray = spec.hosts, spec.gpus_per_host
    if trays > 1 and all(d < per_tray for d in devices.values()):
        return trays, per_tray
    return 1, spec.n_gpus


def _bus_key(bus: str) -> tuple:
    """Sort key of a PCI bus id as nccl-tests prints it (``0000:18:00``, ``0x18``): its hex
    fields in order, else the text."""
    try:
        return (0, *(int(part, 16) for part in re.split(r"[:.]", bus.lower().removeprefix("0x"))))
    except ValueError:
        return (1, bus)


def _local_devices(log: NcclTestLog) -> tuple[dict[int, int], list[str]]:
    """Each rank's GPU index on its host: its CUDA device, except on a host where ranks
    repeat a device number with different PCI bus ids (each process seeing only its own GPU,
    ``CUDA_VISIBLE_DEVICES`` set per rank), where the host's GPUs are taken in bus order;
    with a warning line per such host."""
    devices = {r.rank: r.device for r in log.ranks}
    warnings = []
    by_host: dict[str, list[RankInfo]] = {}
    for r in log.ranks:
        by_host.setdefault(r.host, []).append(r)
    for host, ranks in by_host.items():
        if len({r.device for r in ranks}) == len(ranks):
            continue
        buses = sorted({r.bus for r in ranks}, key=_bus_key)
        if "" in buses or len(buses) != len(ranks):
            continue  # the same GPU named twice: _rank_gpus says so
        index = {bus: i for i, bus in enumerate(buses)}
        devices.update({r.rank: index[r.bus] for r in ranks})
        warnings.append(
            f"host {host}: {len(ranks)} ranks name device(s) {', '.join(map(str, sorted({r.device for r in ranks})))} "
            "with different PCI bus ids (CUDA_VISIBLE_DEVICES set per rank): taking the host's GPUs in bus order"
        )
    return devices, warnings


def _rank_gpus(log: NcclTestLog, system: str, topology, layout: tuple[int, int], n_servers: int,
               devices: dict[int, int]) -> list[str]:
    """GPU node names of the ranks: host ``i`` (first-appearance order) is server ``n{i}``,
    the rank's GPU ``devices[rank]`` (:func:`_local_devices`). On a rack-scale system
    (``layout``) the hosts are trays, spread evenly over the ``n_servers`` racks that hold
    them, the fewest (32 hosts in 2 racks of 18 trays: 16 in each, as OCI's 2-rack runs use
    them, and as NVLSTree, which needs the same ranks in every rack, can run), in order.

    An :class:`InputError` names a device the server lacks, or two ranks on one GPU.
    """
    per_host = layout[1]
    host_index = {host: i for i, host in enumerate(log.hosts)}
    per_rack = -(-len(host_index) // n_servers)
    names = set(topology.node_names)
    gpus: dict[str, RankInfo] = {}
    for r in log.ranks:
        server, tray = divmod(host_index[r.host], per_rack)
        gpu = f"n{server}.gpu{tray * per_host + devices[r.rank]}"
        if gpu not in names:
            raise placed_error(
                log.source, r, f"rank {r.rank} uses device {r.device}, which a {system} server does not have"
            )
        if gpu in gpus:
            first = gpus[gpu]
            raise placed_error(
                log.source,
                r,
                f"ranks {first.rank} ({where(first.line, first.key)}) and {r.rank} ({where(r.line, r.key)}) "
                f"both name device {r.device} "
                f"on host {r.host} (bus {r.bus or 'not printed'}): two ranks on one GPU; flowsim needs each "
                "rank's own GPU",
            )
        gpus[gpu] = r
    return list(gpus)


def _what_ran(values: Sequence[str]) -> str:
    """The one value every prediction shares, else them all joined by "/" in first-seen order
    (``"tree/nvls_tree"`` where NCCL's choice changes with the size)."""
    return "/".join(dict.fromkeys(values))


def _cluster_sha256(server: str | ServerSpec, cluster: Topology) -> str:
    """SHA-256 of the cluster as built (:attr:`CheckReport.cluster_sha256`): the server's
    description (a preset's name) and the links of ``cluster`` (their names, ends, rates and
    latencies), so that the fabric's switch, scalable unit and oversubscription count as
    built, not as given (``--switch qm9700`` names DGX H100 servers' default switch)."""
    digest = hashlib.sha256(repr(server).encode())
    digest.update("\0".join(cluster.link_names).encode())
    for column in (cluster.link_src, cluster.link_dst, cluster.link_capacity_Bps, cluster.link_latency_s):
        digest.update(column.tobytes())
    return digest.hexdigest()


# A GPU name's form, as nvidia-smi names them: PCIe cards ("NVIDIA H100 PCIe", the bridged
# "NVIDIA H100 NVL" and "NVIDIA H200 NVL") and SXM modules ("NVIDIA A100-SXM4-40GB", and the
# H100's "NVIDIA H100 80GB HBM3", whose PCIe card has HBM2e).
_PCIE_CARD = re.compile(r"\b(?:PCIE|NVL)\b", re.IGNORECASE)
_SXM_MODULE = re.compile(r"\bSXM\d*\b|\bHBM3\b", re.IGNORECASE)


def _mismatches(log: NcclTestLog, system: str, model: str | None, nodes: int | None, topology,
                n_servers: int, layout: tuple[int, int], gpu_fabric: str | None = None) -> list[str]:
    """One line for each way the log differs from ``nodes`` servers of ``system`` (GPU
    ``model``, on ``gpu_fabric`` where known): GPU model and form, hosts, rank count
    (``n_servers``: the servers its hosts fill; ``layout`` as :func:`_host_layout`)."""
    lines = []
    # Matched as gpu_model_value matches a piece: "H20" is not in "NVIDIA H200".
    others = [name for name in log.gpu_models
              if model is not None and not gpu_model_value(name, [(model, True)], False) and name != UNNAMED_GPU]
    if others:
        lines.append(f"the log's GPUs are {', '.join(others)}, not the {model} of a {system} server: check --system")
    # The model matches, the form may not: an "NVIDIA H100 PCIe" checked on an NVSwitch
    # server, an "A100-SXM4-40GB" on a box of PCIe cards.
    cards = [name for name in log.gpu_models if name not in others and _PCIE_CARD.search(name)]
    modules = [name for name in log.gpu_models if name not in others and _SXM_MODULE.search(name)]
    if cards and gpu_fabric == "nvswitch":
        lines.append(f"the log's GPUs are {', '.join(cards)}, PCIe cards, where a {system} server's are on NVSwitches: "
                     "check --system")
    if modules and gpu_fabric == "pcie":
        lines.append(f"the log's GPUs are {', '.join(modules)}, SXM modules, where a {system} server's are PCIe cards "
                     "without NVLink: check --system")
    # Without rank lines the hosts are the --nodes given (made up from them): nothing to compare.
    if nodes is not None and nodes != n_servers and log.ranks_from == "rank lines":
        hosts = f" in {n_servers} {system} server(s)" if n_servers != log.n_nodes else ""
        lines.append(
            f"the log names {log.n_nodes} host(s) ({', '.join(log.hosts)}){hosts}, not {nodes} (--nodes): "
            f"predicting on the {n_servers} it names"
        )
    hosts_per_server, per_host = layout
    if hosts_per_server > 1:
        gpus, where = log.n_nodes * per_host, f"{log.n_nodes} tray(s) of a {system} have"
    else:
        gpus, where = len(topology.gpus()), f"{n_servers} x {system} has"
    if log.n_ranks != gpus:
        lines.append(
            f"the log has {log.n_ranks} ranks on {log.n_nodes} host(s); {where} {gpus} GPUs: "
            f"predicting the {log.n_ranks} ranks it names"
        )
    return lines


# NCCL's names of the collectives its tuner chooses for ([NCCL] src/collectives.cc
# ncclFuncToString), and of its algorithms (ncclAlgoToString) in flowsim's spelling.
_NCCL_FUNCTION_NAMES = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
                        "broadcast": "Broadcast", "reduce": "Reduce"}
_NCCL_ALGORITHM_NAMES = {name.upper(): name for name in NCCL_ALGORITHMS}


def _nccl_ran(log: NcclTestLog) -> tuple[dict[int, tuple[str, str]], list[int]]:
    """What NCCL's TUNING lines say it ran at each of the log's sizes, ``{S: (algorithm,
    protocol)}`` in flowsim's names, and the sizes whose lines disagree among themselves."""
    function = _NCCL_FUNCTION_NAMES.get(log.collective)
    seen: dict[int, set[tuple[str, str]]] = {}
    for call in log.nccl_calls:
        if function is None or call.function not in ("", function):
            continue
        if call.per_rank:
            algorithm = _NCCL_ALGORITHM_NAMES.get(call.algorithm.upper())
            protocol = call.protocol.lower() if call.protocol.lower() in NCCL_PROTOCOLS else None
        else:
            index_a, index_p = int(call.algorithm), int(call.protocol)
            algorithm = NCCL_ALGORITHMS[index_a] if index_a < len(NCCL_ALGORITHMS) else None
            protocol = NCCL_PROTOCOLS[index_p] if index_p < len(NCCL_PROTOCOLS) else None
        if algorithm is None or protocol is None:
            continue
        # From v2.26.2-1 an all-gather's or reduce-scatter's line counts a rank's part.
        split = call.per_rank and log.collective in ("all_gather", "reduce_scatter")
        seen.setdefault(call.n_bytes * log.n_ranks if split else call.n_bytes, set()).add((algorithm, protocol))
    ran = {size: next(iter(choices)) for size, choices in seen.items() if len(choices) == 1}
    return ran, sorted(size for size, choices in seen.items() if len(choices) > 1)


def _info_notes(log: NcclTestLog, topology, gpus: list[str], options: dict, staged: bool) -> list[str]:
    """One line for each way NCCL's INFO lines in the log say the run differed from the
    prediction's: the communicator's channels, network connections without GPUDirect RDMA
    (unless the prediction, ``staged``, goes through host memory too)."""
    lines = []
    if len(log.nccl_channels) > 1:
        counts = "; ".join(f"{coll} coll and {nvls} nvls" for coll, nvls in log.nccl_channels)
        lines.append(f"NCCL's INFO lines print several communicators' channels ({counts}): not compared with the "
                     "model's")
    elif log.nccl_channels and _same_series(log.nccl_version, options.get("nccl_version", DEFAULT_NCCL_VERSION)):
        # Only where the run's NCCL is of a series whose rules flowsim has: the search's
        # rules changed between them (docs/hardware.md §7.3), and an unknown version may be any.
        ran = log.nccl_channels[0]
        version = options.get("nccl_version", DEFAULT_NCCL_VERSION)
        model = communicator_channels(topology, gpus, nccl_env=merged_env(topology, options.get("nccl_env")),
                                      version=version)
        if ran != model:
            lines.append(
                f"NCCL's INFO lines print {ran[0]} coll and {ran[1]} nvls channels; flowsim's replay of NCCL "
                f"{version}'s search gives {model[0]} and {model[1]}: the servers that ran may differ from the system "
                "described (NICs, NVLinks), the run may have set NCCL_MIN_NCHANNELS or NCCL_MAX_NCHANNELS, or the "
                "replay may miss this system"
            )
    for network, with_gdr, without in log.net_sends:
        if network == "Socket":
            lines.append(
                f"{with_gdr + without} network connections in NCCL's INFO lines run over TCP sockets (NET/Socket): "
                "NCCL found no RDMA network (InfiniBand, RoCE, EFA), where the prediction takes the system's NICs"
            )
        elif without and network in _RDMA_NETWORKS and not staged:
            lines.append(
                f"{without} of the {with_gdr + without} NET/{network} connections in NCCL's INFO lines run without "
                "GPUDirect RDMA (no '/GDRDMA'): NCCL stages them through host memory, as where nvidia-peermem is not "
                "loaded, where the prediction takes GPUDirect RDMA"
            )
    if log.net_devices and len({rank.host for rank in log.ranks}) > 1:
        # The compute NICs the first host's GPUs leave by, as the system describes them.
        first = log.ranks[0].host
        host_nics = len({int(topology.node_nic[topology.node_id(gpu)])
                         for rank, gpu in zip(log.ranks, gpus, strict=True) if rank.host == first} - {-1})
        if log.net_devices[0] < host_nics:
            lines.append(
                f"NCCL's INFO lines list {log.net_devices[0]} network device(s) for a rank's IB transport (NET/IB : "
                f"Using ...) where each host of the system has {host_nics} compute NICs: the run had fewer NICs "
                "than the prediction (NCCL_IB_HCA, a port down); --fail takes NICs out of the prediction"
            )
    through_memory = dict(log.local_links).get("SHM", 0)
    if through_memory and describe_system(topology, gpus).intra == "nvlink":
        total = sum(count for _, count in log.local_links)
        lines.append(
            f"{through_memory} of the {total} connections inside servers in NCCL's INFO lines go through host memory "
            "(via SHM), where the prediction moves them over NVLink: NCCL's peer-to-peer transport was off for them "
            "(NCCL_P2P_DISABLE or NCCL_P2P_LEVEL set, or peer access refused: a VM, a container without IPC, ACS)"
        )
    return lines


def _ran_without_gdr(log: NcclTestLog) -> bool:
    """Whether NCCL's INFO lines list RDMA connections, none with GPUDirect RDMA."""
    rdma = [(with_gdr, without) for network, with_gdr, without in log.net_sends if network in _RDMA_NETWORKS]
    return bool(rdma) and all(with_gdr == 0 for with_gdr, _ in rdma)


def _same_series(printed: str | None, version: str) -> bool:
    """Whether NCCL ``printed`` by a log is of ``version``'s series (2.26.5 and 2.26.2)."""
    release, taken = nccl_release(printed or ""), nccl_release(version)
    return release is not None and taken is not None and release[:2] == taken[:2]


def _sizes_text(sizes: Iterable[int]) -> str:
    """``"3 size(s): 65536, 131072, 262144 B"``, the first six of them."""
    ordered = sorted(set(sizes))
    shown = ", ".join(str(size) for size in ordered[:6])
    return f"{len(ordered)} size(s): {shown}{', ...' if len(ordered) > 6 else ''} B"


def size_range(sizes: Sequence[int]) -> str:
    """``"8 MiB-2 GiB"``, or ``"8 MiB"`` where the sizes are one."""
    low, high = format_size(min(sizes)), format_size(max(sizes))
    return low if low == high else f"{low}-{high}"


#: A link busy at least this share of a predicted time bounds it (``flowsim check``'s line
#: on what bounds the prediction); below it, no link is busy half the time and latency does.
BOUND_USE = 0.5


def _bound(tier: str | None, utilization: float | None) -> str:
    """What bounds a predicted time: its busiest link's kind ``tier`` where that link is at
    least :data:`BOUND_USE` busy over it, else ``"latency"``."""
    return str(tier) if tier and (utilization or 0.0) >= BOUND_USE else "latency"

#: Where to look when sizes are SHORT, by what bounds their prediction (a link's kind as
#: :func:`flowsim.stepreport.busiest_link` names it, or latency); other kinds are networks.
_WHERE_TO_LOOK = {
    "latency": "look at per-call and per-step costs rather than bandwidth (kernel launches, NCCL's proxy thread, "
               "the network's latency, a busy host)",
    "NVLink": "look at the GPUs' NVLinks and NVSwitches (nvidia-smi nvlink --status, the fabric manager)",
    "NVLS-budget": "look at whether NCCL ran NVLink SHARP (NCCL_NVLS_ENABLE, the fabric manager's multicast support)",
    "PCIe/host": "look at PCIe links and host memory (link width and generation, ACS and the IOMMU, NUMA placement)",
    "network": "look at the network (NIC ports and their speed, cables, switches, GPUDirect RDMA)",
}
#: What of the system description to check when sizes are FAST, by what bounds their
#: prediction (as :data:`_WHERE_TO_LOOK`): the part that moves less in the model than on the cluster.
_WHAT_TO_CHECK = {
    "latency": "the cluster's per-step costs are below NCCL's constants (check the NCCL version: --nccl-version)",
    "NVLink": "check the system's GPUs and NVLinks (generation, links a GPU: --system)",
    "NVLS-budget": "check the system's GPUs and NVSwitches (generation: --system)",
    "PCIe/host": "check the system's PCIe generation and layout and its host memory (a system file's pcie, cpu)",
    "network": "check the system's NICs (count, speed and kind: a system file's nics)",
}

#: How much slower than its choice NCCL's model may rate an algorithm and protocol that may
#: still be what ran: against measurements NCCL's model is off by up to 2x (docs/validation.md, "What the
#: model still misses": LL and LL128 at 1-16 MiB), and the topology NCCL detects may differ from
#: the one the check predicts, so a pair within 2x could have won on the cluster.
CLOSE_CALL = 2.0
#: The algorithms a cluster may lack whatever the model says (multicast off, an older NCCL):
#: without them NCCL takes its best other choice.
_NVLS_FAMILY = ("nvls", "nvls_tree")
#: NCCL's names of its algorithms and protocols, as NCCL_ALGO and NCCL_PROTO take them.
_NCCL_NAMES = {"tree": "Tree", "ring": "Ring", "collnet_direct": "CollNetDirect", "collnet_chain": "CollNetChain",
               "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT", "ll": "LL", "ll128": "LL128", "simple": "Simple"}


def _measured_us(row: TestRow) -> list[float]:
    """The times (us) a row's runs took, out-of-place then in-place, those it printed."""
    return [m.time_us for m in (row.out_of_place, row.in_place) if m.time_us > 0]


def other_choices(
    flagged: Sequence[tuple[TestRow, NcclRow]],
    alternatives: Iterable[tuple[str, str]],
    predict: Callable[[str, str, list[int]], list[NcclRow]],
    allowance: Callable[[NcclRow], tuple[float, float]],
) -> str | None:
    """The line that says which other of NCCL's choices would flag none of ``flagged`` (rows
    of one block with the prediction that flagged them), None where none clears them all or
    fewer than two sizes are flagged (one size off alone is more likely noise than a choice).

    Each of ``alternatives`` (algorithm, protocol; NCCL's names, :data:`NCCL_ALGORITHMS`)
    other than a row's own is predicted at the flagged sizes (``predict(algorithm,
    protocol, sizes)``, rows in the order of the sizes; an alternative flowsim cannot lay
    out is skipped); a row is cleared where both its measured times fall inside
    ``allowance(prediction)``, the (low, high) times the check allows. Only an alternative
    that clears every flagged row counts (a cluster at fault is slow at many sizes, and one
    choice seldom fits them all); of those, the one whose predictions are nearest the
    measured times (the smallest median of ``|log(measured / predicted)|``).
    """
    sizes = [row.size_bytes for row, _ in flagged]
    if len(set(sizes)) < 2:
        return None
    best: tuple[float, str, str] | None = None
    for algorithm, protocol in alternatives:
        if any((own.algorithm, own.protocol) == (algorithm, protocol) for _, own in flagged):
            continue  # what flagged a row cannot clear it
        try:
            rows = predict(algorithm, protocol, sizes)
        except InputError:
            continue
        cleared: list[int] = []
        misses: list[float] = []
        for (row, _), prediction in zip(flagged, rows, strict=True):
            measured = _measured_us(row)
            if not measured:
                continue
            low, high = allowance(prediction)
            if min(measured) <= high and max(measured) >= low:
                cleared.append(row.size_bytes)
            misses.extend(abs(math.log(t / prediction.time_us)) for t in measured)
        if len(cleared) == len(flagged):
            key = (-statistics.median(misses), algorithm, protocol)
            if best is None or key[0] > best[0]:
                best = key
    if best is None:
        return None
    _, algorithm, protocol = best
    return (f"the flagged {_sizes_text(sizes)} fit {algorithm}/{protocol}, which NCCL also weighs there: NCCL may have "
            "run it rather than the cluster being at fault (--nccl-env "
            f"NCCL_ALGO={_NCCL_NAMES[algorithm]} --nccl-env NCCL_PROTO={_NCCL_NAMES[protocol]} predicts them so; "
            "NCCL_DEBUG_SUBSYS=TUNING prints what NCCL ran)")


def _short_without_nvls(
    flagged: Sequence[tuple[TestRow, NcclRow]],
    allowance: Callable[[NcclRow], tuple[float, float]],
    predict: Callable[[str, str, list[int]], list[NcclRow]],
    table_at: Callable[[int], Mapping[tuple[str, str], float]],
) -> list[tuple[int, str, str]]:
    """Of ``flagged`` (rows of one block with the prediction that flagged them), the ``SHORT``
    sizes predicted with NVLS or NVLSTree that NCCL's best choice without them (the fastest
    other pair of ``table_at(size)``, NCCL's model there) would flag ``SHORT`` as well: (size,
    that choice as ``"algorithm/protocol"``, what bounds its prediction). NVLS missing on the
    cluster (multicast off, an older NCCL) would make NCCL run that choice, so it cannot
    explain a row slower than that choice allows too."""
    by_choice: dict[tuple[str, str], list[tuple[TestRow, list[float]]]] = {}
    for row, own in flagged:
        measured = _measured_us(row)
        if own.algorithm not in _NVLS_FAMILY or not measured or min(measured) <= allowance(own)[1]:
            continue  # not NVLS's, or not SHORT
        without = {pair: t for pair, t in table_at(row.size_bytes).items() if pair[0] not in _NVLS_FAMILY}
        if without:
            by_choice.setdefault(min(without, key=without.__getitem__), []).append((row, measured))
    found = []
    for (algorithm, protocol), rows in by_choice.items():
        try:
            predictions = predict(algorithm, protocol, [row.size_bytes for row, _ in rows])
        except InputError:
            continue  # a choice flowsim cannot lay out here
        for (row, measured), prediction in zip(rows, predictions, strict=True):
            if min(measured) > allowance(prediction)[1]:
                found.append((row.size_bytes, f"{algorithm}/{protocol}",
                              _bound(prediction.busiest_tier, prediction.busiest_utilization)))
    return found


def _replay_note(topology, log: NcclTestLog, ranks: Sequence[str], follow: Mapping[int, tuple[str, str]],
                 options: Mapping) -> str:
    """Where flowsim's replay of NCCL's tuner (the model's own choice) agrees with what NCCL's
    TUNING lines say it ran."""
    env = merged_env(topology, options.get("nccl_env"))
    differ = []
    for size, choice in sorted(follow.items()):
        try:
            replay = nccl_choice(topology, log.collective, size, ranks=ranks, nccl_env=env,
                                 version=options.get("nccl_version", DEFAULT_NCCL_VERSION))
        except InputError:
            continue
        replayed = (replay.algorithm, replay.protocol)
        if replayed != choice:
            differ.append(f"{size} B: NCCL {'/'.join(choice)}, replay {'/'.join(replayed)}")
    agreed = f"agrees at {len(follow) - len(differ)} of {len(follow)}"
    return (f"NCCL's TUNING lines say what it ran at {len(follow)} size(s): each is predicted with NCCL's algorithm "
            f"and protocol; flowsim's replay of NCCL's tuner {agreed}"
            + (f" ({'; '.join(differ[:4])}{'; ...' if len(differ) > 4 else ''})" if differ else ""))


# Networks whose connections NCCL runs with GPUDirect RDMA where the GPU and NIC allow it:
# its own InfiniBand / RoCE transport and AWS's EFA plugin (aws-ofi-nccl).
_RDMA_NETWORKS = frozenset({"IB", "AWS Libfabric", "Libfabric"})
# The compute NICs (ServerSpec.nic_kind) of each network NCCL's "Using network" line names: its
# own IB transport (InfiniBand and RoCE verbs), the aws-ofi-nccl plugin's (EFA, and HPE
# Slingshot through its cxi provider, which system files describe as RoCE-like Ethernet).
_NETWORK_NICS = {"IB": ("ib", "roce"), "AWS Libfabric": ("efa", "roce"), "Libfabric": ("efa", "roce")}


def _command_env(log: NcclTestLog) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """The variables the log's command lines set (:attr:`NcclTestLog.command_env`) that NCCL
    would take, and those it would not, with why (a shell variable left unexpanded,
    ``NCCL_ALGO=$ALGO``, is no algorithm)."""
    taken: dict[str, str] = {}
    refused = []
    for key, value in log.command_env:
        try:
            NcclEnv({key: value}).check()
        except InputError as err:
            refused.append((key, value, str(err).removeprefix("NCCL environment: ")))
        else:
            taken[key] = value
    return taken, refused


def _network_mismatch(log: NcclTestLog, spec: ServerSpec | None, command_env: Mapping[str, str]) -> list[str]:
    """A line where the network NCCL's INFO lines say a run of several hosts used
    (:attr:`NcclTestLog.networks`) is not one the system's compute NICs are: TCP sockets
    (or ``NCCL_IB_DISABLE=1``, which the log's INFO or command lines, ``command_env`` as
    :func:`_command_env` takes them, set), or EFA against
    InfiniBand or RoCE NICs and the other way round."""
    if spec is None or len({rank.host for rank in log.ranks}) < 2:
        return []
    lines = []
    env = {**command_env, **dict(log.nccl_env)}
    if env.get("NCCL_IB_DISABLE") == "1" and "Socket" not in log.networks and spec.nic_kind != "efa":
        lines.append(f"the log sets NCCL_IB_DISABLE=1: NCCL runs between servers over TCP sockets, which flowsim "
                     f"does not model; the prediction takes the system's {spec.nic_kind} NICs")
    for network in log.networks:
        if network == "Socket" and not any(name == "Socket" for name, _, _ in log.net_sends):
            lines.append(f"NCCL's INFO lines say it ran between servers over TCP sockets (Using network Socket): NCCL "
                         f"found no RDMA network (InfiniBand, RoCE, EFA), where the prediction takes the system's "
                         f"{spec.nic_kind} NICs")
        elif network in _NETWORK_NICS and spec.nic_kind not in _NETWORK_NICS[network]:
            ran = ("EFA or Slingshot, through the aws-ofi-nccl plugin" if "efa" in _NETWORK_NICS[network]
                   else "InfiniBand or RoCE")
            lines.append(f"NCCL's INFO lines say it ran between servers over {network} ({ran}), where the system's "
                         f"compute NICs are {spec.nic_kind}: check --system (AWS instances: aws-p4d, aws-p5, ...; "
                         "docs/system-format.md)")
    return lines


#: Default of ``latency_tolerance``: a row's latency (what of its predicted time does not grow
#: with the size, NCCL's ``baseLat`` and ``hwLat``) may be up to 3 times NCCL's constants, or a
#: third of them, before the row is flagged. NCCL's constants rank its algorithms; real
#: latencies depend on the NCCL version, the launch mode and the hosts. On the calibration
#: logs (data/validation/nccl_tests) the measured floors were 2.1x NCCL's LL ring latency on
#: one A100 server driven by one process (the host's launch floor, charged since, explains it:
#: docs/hardware.md §6.2) and 1.9x its LL128 ring latency on two H100 servers.
LATENCY_TOLERANCE = 2.0


def time_bounds(
    predicted_us: float, latency_us: float, threshold: float, latency_tolerance: float
) -> tuple[float, float]:
    """The measured times (us) a row may take without a flag: the predicted time's
    size-dependent part at a busbw between ``1 - threshold`` and ``1 + threshold`` times the
    predicted one, and its latency part (at most the predicted time) between
    ``1 / (1 + latency_tolerance)`` and ``1 + latency_tolerance`` times itself. Without
    latency these are the plain busbw bounds.

    >>> time_bounds(100.0, 20.0, 0.2, 2.0)   # 80 us of bandwidth, 20 us of latency
    (73.33333333333334, 160.0)
    """
    latency = min(max(latency_us, 0.0), predicted_us)
    rest = predicted_us - latency
    return rest / (1 + threshold) + latency / (1 + latency_tolerance), rest / (1 - threshold) + (
        1 + latency_tolerance
    ) * latency


def nccl_version_of(log: NcclTestLog, given: str | None = None) -> tuple[str, str]:
    """The NCCL version whose constants predict ``log``, and the report's words for it.

    ``given`` (``--nccl-version``, any MAJOR.MINOR.PATCH) wins; else the version the log
    prints. Its constants where flowsim has them, else those of its series, else of the newest
    older version flowsim has (:func:`~flowsim.collectives.constants.nearest_version`); else
    the default's.

    Returns
    -------
    (str, str)
        The version (a key of :data:`~flowsim.collectives.constants.NCCL_VERSIONS`) and the
        words: ``"NCCL 2.26.2 (log)"``, ``"NCCL 2.27.1 (log) -> constants of 2.26.2"``,
        ``"NCCL 2.19.3 (given)"``, ``"NCCL 2.4.8 (given) -> constants of 2.19.3, the oldest
        flowsim has"``, ``"NCCL 2.30.7 (default: the log prints no NCCL version)"``.
    """
    printed: str | None = given
    whose = "given"
    if given is not None and nccl_release(given) is None:
        raise InputError(f"nccl_version: expected an NCCL version MAJOR.MINOR.PATCH, got {given!r}")
    if given is None:
        printed, whose = _printed_version(log), "log"
    if printed is None:
        return DEFAULT_NCCL_VERSION, f"NCCL {DEFAULT_NCCL_VERSION} (default: the log prints no NCCL version)"
    release = nccl_release(printed)
    if release is None:
        return DEFAULT_NCCL_VERSION, f"NCCL {printed!r} (log: not a version) -> constants of {DEFAULT_NCCL_VERSION}"
    nearest = constants_of(nearest_version(printed) or DEFAULT_NCCL_VERSION)
    if nearest.release == release:
        return nearest.version, f"NCCL {printed} ({whose})"
    oldest = ", the oldest flowsim has" if release < min(c.release for c in NCCL_VERSIONS.values()) else ""
    return nearest.version, f"NCCL {printed} ({whose}) -> constants of {nearest.version}{oldest}"


def _printed_version(log: NcclTestLog) -> str | None:
    """The NCCL version ``log`` prints, without its build (``"2.26.2+cuda12.8"`` ->
    ``"2.26.2"``); None where it prints none."""
    return None if log.nccl_version is None else log.nccl_version.split("+")[0]


def _trees_off(log: NcclTestLog) -> int | None:
    """The ``NCCL_TREE_THRESHOLD`` ``log``'s INFO lines say the environment set, where it
    turned the trees of the log's NCCL off; else None. NCCL 2.4 alone had it ([NCCL]
    v2.4.2-1 to v2.4.8-1 src/init.cc; neither 2.3 nor 2.5): an all-reduce of up to that many
    bytes ran as a tree, a larger one as a ring (src/enqueue.cc, getPatternInfo), and at 0 or
    below no tree was built (-2, the default, has NCCL compute the threshold). Its INFO line
    prints the value unsigned (``%lu``): -1 as 18446744073709551615."""
    value = dict(log.nccl_env).get("NCCL_TREE_THRESHOLD", "")
    release = nccl_release(_printed_version(log) or "")
    if not value.isdigit() or release is None or release[:2] != (2, 4):
        return None
    threshold = int(value) - (1 << 64 if int(value) >= 1 << 63 else 0)
    return threshold if threshold <= 0 and threshold != -2 else None


def _predated(log: NcclTestLog, given: str | None, env: Mapping[str, str]) -> tuple[tuple[PredatedAlgorithm, str], ...]:
    """What the NCCL ``given`` (``--nccl-version``) names, else the one ``log`` prints, did
    not have yet, for the check to leave out: the first algorithm it predates
    (:func:`~flowsim.collectives.constants.predated_algorithm`: NVLS before 2.17.1, NVLSTree
    before 2.18.1) and LL128 before 2.5.6
    (:func:`~flowsim.collectives.constants.predated_protocol`), each with the value of its
    variable that leaves it out under ``env`` (the log's, the caller's and the system's:
    :func:`~flowsim.collectives.constants.leave_out`, an exclusion list there extended);
    none where no version is named, it had them all, or ``env`` sets the variable otherwise.
    """
    named = given if given is not None else _printed_version(log)
    release = None if named is None else nccl_release(named)
    if release is None:
        return ()
    values = [(lacked, leave_out(env, lacked)) for lacked in predated(release)]
    return tuple((lacked, value) for lacked, value in values if value is not None)


# Older nccl-tests print NCCL's first names of two types (ncclChar, ncclInt).
_OLD_TYPE_NAMES = {"char": "int8", "int": "int32"}


def _reduction_of(row: TestRow) -> tuple[str | None, str | None]:
    """The data type and reduction a row is predicted with, as nccl-tests' -d and -o name them:
    what it printed (a sum where it printed none); None for a name nccl-tests does not print."""
    dtype = _OLD_TYPE_NAMES.get(row.dtype, row.dtype)
    redop = "sum" if row.redop in (None, "none") else row.redop
    return (dtype if dtype in DTYPE_BYTES else None), (redop if redop in REDOPS else None)


def _root_of(row: TestRow, collective: str) -> int:
    """The root a row is predicted with: the one it printed, for a collective that has one (0,
    collective_time's default, where it printed none)."""
    return row.root if collective in ROOTED and row.root is not None and row.root > 0 else 0


def check_log(
    log: NcclTestLog,
    *,
    system: str | ServerSpec,
    nodes: int | None = None,
    threshold: float = 0.1,
    algorithm: str | None = None,
    protocol: str = "auto",
    figure: str = "effective",
    fabric: str = "auto",
    min_bytes: int = 1,
    switch: str | None = None,
    oversubscription: float = 1.0,
    su_size: int | None = None,
    latency_tolerance: float = LATENCY_TOLERANCE,
    nccl_version: str | None = None,
    fail: Sequence[str] = (),
    degrade: Mapping[str, float] | None = None,
    **options,
) -> CheckReport:
    """Predict each row of a parsed run and compare.

    Parameters
    ----------
    log : NcclTestLog
        From :func:`parse_nccl_log`.
    system, nodes, threshold, algorithm, protocol, figure, fabric, min_bytes, switch, oversubscription,
    su_size, latency_tolerance, nccl_version, fail, degrade
        As :func:`check_nccl_log`.
    **options
        Passed to :func:`flowsim.collectives.report.sweep` (and so to
        :func:`flowsim.collectives.collective_time`).

    Returns
    -------
    CheckReport
    """
    server = system if isinstance(system, ServerSpec) else system_name(system)
    model: str | None
    if isinstance(server, ServerSpec):
        system, model = server.name, server.gpu
    else:
        system, model = server, _PRESET_GPU.get(server)
    if nodes is not None:
        nodes = whole_number("nodes", nodes)
    if not 0 <= threshold < 1:
        raise InputError(f"threshold must be in [0, 1), got {threshold!r}")
    if not (isinstance(latency_tolerance, (int, float)) and 0 <= latency_tolerance < math.inf):
        raise InputError(f"latency_tolerance must be a number >= 0, got {latency_tolerance!r}")
    if log.n_ranks < 2:
        raise InputError(f"{log.source}: {log.n_ranks} rank; flowsim predicts collectives of 2 or more ranks")
    if algorithm is not None:
        # Only an algorithm asked for is passed on: collective_time's own default applies otherwise.
        options["algorithm"] = resolve_algorithm(log.collective, algorithm) if algorithm != "auto" else algorithm
    version, nccl = nccl_version_of(log, nccl_version)
    options["nccl_version"] = version
    if options.get("nccl_env"):
        # What the caller sets (--nccl-env), as the header says what the log's and the system's set.
        nccl = f"{nccl}, {' '.join(f'{key}={value}' for key, value in options['nccl_env'].items())} (given)"
    command_env, refused_env = _command_env(log)
    warnings_env = tuple(f"the log's command line sets {key}={value}, which is no value NCCL takes ({why}): not used"
                         for key, value, why in refused_env)
    if log.nccl_env or command_env:
        # What the log's INFO lines say the environment set, and under them what its command
        # lines set (where NCCL_DEBUG=INFO did not print it), under what the caller gives.
        given = dict(options.get("nccl_env") or {})
        options["nccl_env"] = {**command_env, **dict(log.nccl_env), **given}
        taken = [f"{key}={value}" for key, value in log.nccl_env if key in NCCL_ENV_KEYS and key not in given]
        if taken:
            nccl = f"{nccl}, {' '.join(taken)} (log)"
        commanded = [f"{key}={value}" for key, value in command_env.items()
                     if key in NCCL_ENV_KEYS and key not in given and key not in dict(log.nccl_env)]
        if commanded:
            nccl = f"{nccl}, {' '.join(commanded)} (command line)"
    trees_off = _trees_off(log)
    if trees_off is not None and "NCCL_ALGO" not in (options.get("nccl_env") or {}):
        options["nccl_env"] = {**(options.get("nccl_env") or {}), "NCCL_ALGO": "Ring"}
        nccl = (f"{nccl}, NCCL_ALGO=Ring (log: NCCL_TREE_THRESHOLD={trees_off}, with which NCCL "
                f"{_printed_version(log)} ran no trees)")
    spec = server if isinstance(server, ServerSpec) else PRESETS[server].spec() if server in PRESETS else None
    devices, device_notes = _local_devices(log)
    layout = (1, 0) if spec is None else _host_layout(spec, devices)
    n_servers = -(-log.n_nodes // layout[0])
    fabric = resolve_fabric(fabric, n_servers, server, switch=switch, su_size=su_size,
                            oversubscription=oversubscription)
    intact = build_cluster(server, n_servers, figure=figure, fabric=fabric, switch=switch,
                           oversubscription=oversubscription, su_size=su_size)
    topology = apply_failures(intact, fail=fail, degrade=degrade)
    # The system's own NCCL environment (a cloud image's profile) runs under the log's and the
    # caller's (collective_workload merges it); the header says what of it was taken.
    system_env = system_env_taken(intact, options.get("nccl_env") or {})
    if system_env:
        nccl = f"{nccl}, {' '.join(f'{key}={value}' for key, value in system_env.items())} (system)"
    for lacked, value in _predated(log, nccl_version, merged_env(intact, options.get("nccl_env"))):
        # What the NCCL named or the log's did not have yet, under what the log, the caller
        # and the system set (an exclusion list of theirs extended).
        options["nccl_env"] = {**(options.get("nccl_env") or {}), lacked.key: value}
        named = nccl_version if nccl_version is not None else _printed_version(log)
        nccl = f"{nccl}, {lacked.key}={value} (NCCL {named} predates {lacked.name}, {lacked.since})"
    warnings = (*log.warnings, *warnings_env, *device_notes,
                *_mismatches(log, system, model, nodes, topology, n_servers, layout,
                             None if spec is None else spec.gpu_fabric),
                *_network_mismatch(log, spec, command_env),
                *([front_end_only_note(n_servers)] if fabric == "none" and n_servers > 1 else []))
    gpus = _rank_gpus(log, system, topology, layout, n_servers, devices)
    # Whether the prediction stages network traffic through host memory (the caller's
    # gpudirect, else NCCL's rule under the environment: NCCL_NET_GDR_LEVEL=LOC, say).
    staged = options["gpudirect"] is False if "gpudirect" in options else not gpudirect_rdma(
        topology, gpus, nccl_env=merged_env(topology, options.get("nccl_env")), version=version)
    if staged:
        nccl = f"{nccl}, network traffic staged through host memory (no GPUDirect RDMA)"
    warnings += tuple(_info_notes(log, topology, gpus, options, staged))
    if options.get("time_rel_tol", DEFAULT_TIME_REL_TOL) > DEFAULT_TIME_REL_TOL:
        warnings += (f"predicted with {time_window_note(options['time_rel_tol'])}",)
    ranks = send_pair(topology, gpus) if log.collective == "send" else gpus
    launch = {"gpus_per_thread": log.n_gpus or 1, "agg_iters": log.agg_iters or 1, "cuda_graph": log.cuda_graph or 0}
    if log.iters is None and log.collective in OVERLAPPING and not log.blocking:
        warnings += (f"the log does not say how many iterations nccl-tests timed (-n): taken as {NCCL_TESTS_ITERS}, "
                     f"its default, over which a {log.collective}'s calls overlap back to back",)
    if log.collective == "send":
        # NCCL's channels for the pair's send follow the communicator of all the log's ranks.
        options["communicator"] = gpus
    if log.collective == "all_to_all_v":
        if any(r.count == 0 and r.size_bytes > 0 for r in log.rows):
            # nccl-tests prints a count of 0 where the sizes come from a matrix file (src/alltoallv.cu).
            raise InputError(f"{log.source}: an alltoallv_perf run of a traffic matrix file ({ALLTOALLV_MATRIX_FILE}; "
                             "its rows print count 0): the per-peer sizes are in the file, which flowsim does not have")
        if ALLTOALLV_SPREAD not in merged_env(intact, options.get("nccl_env")):
            warnings += (f"the log does not say alltoallv_perf's spread ({ALLTOALLV_SPREAD}): taken as nccl-tests' "
                         f"default, 1 (--nccl-env {ALLTOALLV_SPREAD}=X where the run set another)",)
    if log.collective == "hypercube" and (launch["gpus_per_thread"] > 1 or launch["agg_iters"] > 1):
        # nccl-tests wraps a thread's GPUs (-g) and aggregated iterations (-m) in one NCCL group,
        # which merges the rounds' own groups into one call (src/common.cu, src/hypercube.cu).
        warnings += ("nccl-tests ran this hypercube's rounds inside one NCCL group (-g or -m above 1), so NCCL "
                     "issued them together; the prediction runs them one after another",)
    # Each size the log printed, as it is (aligned=False: an nccl-tests before 2.13.12 did not
    # trim a rank's part to 16 bytes), with the root its row printed (nccl-tests' -r; -r -1
    # runs every root in turn, a block of sizes each).
    # Rows of every type or reduction (-d all, -o all) are predicted with their own: NCCL
    # takes NVLS and PAT only for the reductions they have. A name nccl-tests does not print
    # is predicted as its default, float and sum, with a warning.
    sizes_by_run: dict[tuple[int, str, str, str, str], set[int]] = {}
    unknown = sorted({f"{name!r}" for row in log.rows for name, known in zip((row.dtype, row.redop),
                      _reduction_of(row), strict=True) if known is None})
    if unknown:
        warnings += (f"data type or reduction {', '.join(unknown)} is not one nccl-tests prints: predicted as "
                     "float and sum",)

    # Where NCCL's TUNING lines say what it ran (NCCL_DEBUG_SUBSYS=TUNING), each size runs
    # that algorithm and protocol, unless the caller named one: the check then measures the
    # links under NCCL's own choice, and a note says where the model's replay of NCCL's tuner
    # chose otherwise.
    ran, mixed = _nccl_ran(log)
    collnet_ran = sorted(size for size, (algorithm_ran, _) in ran.items()
                         if algorithm_ran in COLLNET_ALGORITHMS or (algorithm_ran == "nvls" and log.n_nodes > 1))
    if collnet_ran and "NCCL_COLLNET_ENABLE" not in merged_env(topology, options.get("nccl_env")):
        # NCCL ran CollNet (NVLS across servers is NVLS with it), so the run had it enabled.
        options["nccl_env"] = {**(options.get("nccl_env") or {}), "NCCL_COLLNET_ENABLE": "1"}
        warnings += (f"NCCL's TUNING lines show CollNet (IB SHARP) at {_sizes_text(collnet_ran)}: predicted with "
                     "NCCL_COLLNET_ENABLE=1",)
    steered = "algorithm" in options or protocol != "auto"
    follow = {} if steered else dict(ran)
    if mixed:
        warnings += (f"NCCL's TUNING lines name more than one algorithm or protocol at {_sizes_text(mixed)}: "
                     "predicted with the model's choice there",)

    def run_of(row: TestRow) -> tuple[int, str, str, str, str]:
        dtype, redop = _reduction_of(row)
        algorithm_ran, protocol_ran = follow.get(row.size_bytes, ("", ""))
        return _root_of(row, log.collective), dtype or "float", redop or "sum", algorithm_ran, protocol_ran

    for row in log.rows:
        if row.size_bytes >= max(min_bytes, 1):
            sizes_by_run.setdefault(run_of(row), set()).add(row.size_bytes)
    def sweep_options(run: tuple[int, str, str, str, str], **extra: Any) -> dict[str, Any]:
        """The keywords :func:`sweep` predicts one block of the log with: its root, data type
        and reduction, the log's launch settings and the caller's options."""
        root, dtype, redop = run[:3]
        return {"dtype": dtype, "redop": redop, "ranks": ranks, "aligned": False, **launch,
                "iters": log.iters or NCCL_TESTS_ITERS, "blocking": log.blocking, **options, **extra,
                **({"root": root} if root else {})}

    def noted(what: str) -> dict[str, Any]:
        """A progress keyword for a pass after the prediction's own, whose notes say which
        (``"on the links alone: 1,048,576 B (1/3): ..."``); none where nobody watches."""
        note = options.get("progress")
        return {} if note is None else {"progress": lambda message: note(f"{what}: {message}")}

    def predict(run: tuple[int, str, str, str, str], sizes: list[int], **extra: Any) -> tuple[list, str | None]:
        """The rows of ``sizes`` (each as it is: a log's sizes are whole elements of its type)
        of one block of the log, with NCCL's algorithm and protocol where its TUNING lines
        say them, and why not (None where nothing was refused) where flowsim cannot lay
        those out: the model's choice then."""
        algorithm_ran, protocol_ran = run[3:]
        common = sweep_options(run, **extra)
        refusal = None
        if algorithm_ran:
            try:
                return sweep(topology, log.collective, sizes, algorithm=algorithm_ran, protocol=protocol_ran,
                             **common), None
            except InputError as err:
                refusal = str(err)
        return sweep(topology, log.collective, sizes, protocol=protocol, **common), refusal

    predicted_rows = {}
    refused: dict[tuple[str, str], list[int]] = {}  # (NCCL's choice, why flowsim cannot build it): sizes
    for run, run_sizes in sorted(sizes_by_run.items()):
        asked = sorted(run_sizes)
        rows_run, refusal = predict(run, asked)
        if refusal is not None:
            refused.setdefault((f"{run[3]}/{run[4]}", refusal), []).extend(asked)
        predicted_rows.update({(*run, size): row for size, row in zip(asked, rows_run, strict=True)})
    for (choice, why), refused_sizes in refused.items():
        warnings += (f"NCCL ran {choice} at {_sizes_text(refused_sizes)}, which flowsim cannot lay out here ({why}): "
                     "predicted with the model's choice there",)
    if follow:
        warnings += (_replay_note(topology, log, ranks, follow, options),)
    if _ran_without_gdr(log) and not staged and predicted_rows:
        # What the cluster moves as it ran, staged: the largest size, the first block's settings.
        root, dtype, redop, algorithm_ran, protocol_ran, size = max(predicted_rows, key=lambda key: key[-1])
        (as_staged,), _ = predict((root, dtype, redop, algorithm_ran, protocol_ran), [size], gpudirect=False,
                                **noted("staged through host memory"))
        moved = max((r.out_of_place.busbw_GBps for r in log.rows if r.size_bytes == size), default=0.0)
        warnings += (f"staged through host memory as the INFO lines say, the model gives {as_staged.busbw_GBps:.2f} "
                     f"GB/s busbw at {size} B, where the log measured {moved:.2f} (--nccl-env "
                     "NCCL_NET_GDR_LEVEL=LOC predicts every row so)",)
    predictions = list(predicted_rows.values())
    # A thread that drives several GPUs (-g N > 1) adds CUDA's launch overheads to each
    # iteration (NVIDIA's AddyLaddy in nccl-tests#333: higher latency "due to the CUDA latency
    # overheads of single process jobs"): a row may take one launch round longer before it
    # is flagged SHORT. The prediction keeps the round as a floor only (launch_floor_us).
    host_allowance = launch_floor_us(**launch) if launch["gpus_per_thread"] > 1 else 0.0

    def allowance(prediction: NcclRow) -> tuple[float, float]:
        """The (low, high) measured times a row of ``prediction`` may take unflagged."""
        low, high = time_bounds(prediction.time_us, prediction.latency_us, threshold, latency_tolerance)
        return low, high + host_allowance

    # FAST means faster than the hardware described allows. Rings' and trees' lanes are held
    # to NCCL's modelled bandwidth, which a cluster's NCCL may beat (GCP A3 Mega's and OCI's
    # A100 pair's trees, docs/validation.md): a row faster than that model is FAST only where
    # it also beats the same choice on the links alone (model_caps=False).
    beyond: dict[tuple[int, str, str, str, str], set[int]] = {}
    for row in log.rows:
        prediction = predicted_rows.get((*run_of(row), row.size_bytes))
        measured = _measured_us(row)
        if prediction is not None and prediction.algorithm in ("ring", "tree") and measured \
                and max(measured) < allowance(prediction)[0]:
            beyond.setdefault(run_of(row), set()).add(row.size_bytes)
    links_allow: dict[tuple, NcclRow] = {}
    for run, sizes in sorted(beyond.items()):
        rows_links, _ = predict(run, sorted(sizes), model_caps=False, **noted("on the links alone"))
        links_allow.update({(*run, size): row for size, row in zip(sorted(sizes), rows_links, strict=True)})
    algorithm = _what_ran([p.algorithm for p in predictions]) or str(algorithm or "auto")
    protocol = _what_ran([p.protocol for p in predictions]) or protocol
    fast_within_links: list[int] = []
    checks = []
    for row in log.rows:
        prediction = predicted_rows.get((*run_of(row), row.size_bytes))
        nccl_ran = ran.get(row.size_bytes)
        predicted_time = predicted_busbw = ratio_out = ratio_in = latency = None
        short = fast = False
        if prediction is not None:
            predicted_time, latency = prediction.time_us, prediction.latency_us
            predicted_busbw = busbw_Bps(log.collective, row.size_bytes, predicted_time * 1e-6, log.n_ranks) / 1e9
            ratio_out, ratio_in = (
                predicted_time / m.time_us if m.time_us > 0 else None for m in (row.out_of_place, row.in_place)
            )
            low, high = allowance(prediction)
            # Both runs of a size (out-of-place, in-place) must be off: what slows or speeds up
            # a cluster shows in both, while one run alone far off is a noisy iteration (the
            # 256 B out-of-place run of nccl-tests#309 at 0.27 of the in-place one's busbw).
            measured = _measured_us(row)
            short = bool(measured) and min(measured) > high
            fast = bool(measured) and max(measured) < low
            on_links = links_allow.get((*run_of(row), row.size_bytes))
            if fast and on_links is not None and max(measured) >= allowance(on_links)[0]:
                fast = False
                fast_within_links.append(row.size_bytes)
        wrong = any(m.wrong for m in (row.out_of_place, row.in_place))
        busy = prediction if prediction is not None and prediction.busiest_tier else None  # a link carried bytes
        checks.append(
            RowCheck(
                row.size_bytes,
                row.out_of_place.busbw_GBps,
                row.in_place.busbw_GBps,
                row.out_of_place.time_us,
                row.in_place.time_us,
                predicted_time,
                predicted_busbw,
                ratio_out,
                ratio_in,
                short,
                wrong,
                fast,
                latency,
                prediction is not None and prediction.launch_bound,
                algorithm=None if prediction is None else prediction.algorithm,
                protocol=None if prediction is None else prediction.protocol,
                channels=None if prediction is None else prediction.channels,
                root=row.root,
                dtype=row.dtype,
                redop=row.redop,
                nccl_ran=None if nccl_ran is None else "/".join(nccl_ran),
                busiest_link=None if busy is None else busy.busiest_link,
                busiest_tier=None if busy is None else busy.busiest_tier,
                busiest_utilization=None if busy is None else busy.busiest_utilization,
                nccl_model_us={} if prediction is None else dict(prediction.nccl_model_us),
            )
        )
    # Flagged sizes another of NCCL's choices would clear, block by block: what NCCL may have
    # run instead of what the model's replay of its tuner picks (a close call in its model, or
    # its best choice without NVLS; not where its TUNING lines say what ran, nor where the
    # caller named an algorithm or protocol).
    explained: list[str] = []
    not_nvls: list[tuple[int, str, str]] = []
    flagged_by_run: dict[tuple[int, str, str, str, str], list[tuple[TestRow, NcclRow]]] = {}
    for row, check in zip(log.rows, checks, strict=True):
        run = run_of(row)
        prediction = predicted_rows.get((*run, row.size_bytes))
        if (check.short or check.fast) and prediction is not None and row.size_bytes not in follow and not steered:
            flagged_by_run.setdefault(run, []).append((row, prediction))
    env = merged_env(topology, options.get("nccl_env"))
    # NCCL chooses for an iteration's -m calls merged into one (flowsim.collectives.sweep).
    merged = launch["agg_iters"] if log.collective in NCCL_COLLECTIVES else 1
    for run, flagged in flagged_by_run.items():
        dtype, redop = run[1:3]
        common = sweep_options(run, **noted("what else NCCL may have run"))
        try:
            tuned = nccl_choice(topology, log.collective, merged * max(row.size_bytes for row, _ in flagged),
                                ranks=ranks, nccl_env=env, version=version, dtype=dtype, redop=redop)
        except InputError:
            continue  # no tuner's choice (point-to-point collectives): nothing else weighed
        table = tuned.table
        # What may have run: a close call in NCCL's model, or its best choice without NVLS.
        chosen = (tuned.algorithm, tuned.protocol)
        weighed = {pair for pair, time_us in table.items() if time_us <= CLOSE_CALL * table[chosen]}
        without = {pair: time_us for pair, time_us in table.items() if pair[0] not in _NVLS_FAMILY}
        if chosen[0] in _NVLS_FAMILY and without:
            weighed.add(min(without, key=without.__getitem__))

        def predict_other(algorithm: str, protocol_other: str, sizes: list[int], common=common) -> list[NcclRow]:
            return sweep(topology, log.collective, sizes, algorithm=algorithm, protocol=protocol_other, **common)

        line = other_choices(flagged, sorted(weighed), predict_other, allowance)
        if line is not None:
            explained.append(line)

        def table_at(size: int, dtype: str = dtype, redop: str = redop) -> Mapping[tuple[str, str], float]:
            return nccl_choice(topology, log.collective, merged * size, ranks=ranks, nccl_env=env, version=version,
                               dtype=dtype, redop=redop).table

        not_nvls.extend(_short_without_nvls(flagged, allowance, predict_other, table_at))
    return CheckReport(
        log,
        system,
        n_servers,
        float(threshold),
        algorithm,
        protocol,
        figure,
        fabric,
        tuple(checks),
        warnings=tuple(warnings),
        explained=tuple(explained),
        not_nvls=tuple(sorted(set(not_nvls))),
        fast_within_links=tuple(sorted(set(fast_within_links))),
        latency_tolerance=float(latency_tolerance),
        nccl_version=version,
        nccl=nccl,
        launch_floor_us=launch_floor_us(**launch),
        failures=describe_changes(intact, topology),
        cluster_sha256=_cluster_sha256(server, intact),
    )


def check_nccl_log(
    path_or_text: str | os.PathLike,
    *,
    system: str | ServerSpec,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    threshold: float = 0.1,
    collective: str | None = None,
    algorithm: str | None = None,
    protocol: str = "auto",
    figure: str = "effective",
    fabric: str = "auto",
    min_bytes: int = 1,
    switch: str | None = None,
    oversubscription: float = 1.0,
    su_size: int | None = None,
    latency_tolerance: float = LATENCY_TOLERANCE,
    nccl_version: str | None = None,
    fail: Sequence[str] = (),
    degrade: Mapping[str, float] | None = None,
    **options,
) -> CheckReport:
    """Parse nccl-tests output, predict every row with flowsim and flag rows slower or faster
    than predicted.

    Parameters
    ----------
    path_or_text : str or path-like
        A file, or the output itself (a ``str`` holding a newline).
    system : str or ServerSpec
        Server preset (``"dgx-h100"`` or ``"dgx_h100"``), or a server description (a system
        file's, :mod:`flowsim.systemfile`).
    nodes : int, optional
        Servers in the cluster. With rank lines in the log, the hosts they name are
        predicted, with a warning where ``nodes`` differs; without them, the cluster's shape
        (with ``gpus_per_node``, see :func:`parse_nccl_log`).
    gpus_per_node : int, optional
        GPUs used per server, for a log without rank lines.
    threshold, latency_tolerance : float
        Flag a row when its out-of-place or in-place time is outside :func:`time_bounds`:
        slower (``SHORT``) or faster (``FAST``) than predicted by more than ``threshold`` of
        the predicted time's size-dependent part and ``1 + latency_tolerance`` times its
        latency (default :data:`LATENCY_TOLERANCE`).
    collective : str, optional
        See :func:`parse_nccl_log`.
    algorithm : str, optional
        flowsim algorithm (default: :func:`flowsim.collectives.collective_time`'s).
    protocol : {"auto", "simple", "ll", "ll128"}
        NCCL protocol costs; ``"auto"`` keeps the fastest, as NCCL's tuner does.
    figure : {"effective", "nominal"}
        Link rates.
    fabric : str
        Compute fabric between servers (:data:`flowsim.fabrics.FABRICS`); ``"auto"``: none
        for one server (a rack-scale system's NVLink domain needs none), rail-optimized for
        more.
    switch : str, optional
        Switch model of the compute fabric (default: the one matching the NICs).
    oversubscription : float
        Leaf down/up port ratio of the compute fabric.
    su_size : int, optional
        Servers in a scalable unit of a rail-optimized fabric (default: what the switches
        take, :func:`flowsim.fabrics.build_cluster`).
    min_bytes : int
        Rows below this size are reported but not predicted (small sizes are latency-bound
        and take as long to simulate as large ones).
    nccl_version : str, optional
        NCCL version whose constants apply (a key of
        :data:`~flowsim.collectives.constants.NCCL_VERSIONS`); default: the version the log
        prints, or the one of its series, or the newest older one flowsim has (:func:`nccl_version_of`).
    fail, degrade
        What-ifs on the predicted cluster: node or link name patterns taken out, and pattern
        -> capacity factor in (0, 1], as :func:`flowsim.failures.apply_failures`.
    **options
        Passed to :func:`flowsim.collectives.report.sweep`.

    Returns
    -------
    CheckReport

    Examples
    --------
    >>> report = check_nccl_log("data/nccl_tests/all_gather_perf_dgx_h100_1node.txt",
    ...                         system="dgx-h100", min_bytes=1 << 30)  # doctest: +SKIP
    >>> report.ok  # doctest: +SKIP
    True
    """
    log = parse_nccl_log(path_or_text, collective=collective, nodes=nodes, gpus_per_node=gpus_per_node)
    return check_log(
        log,
        system=system,
        nodes=nodes,
        threshold=threshold,
        algorithm=algorithm,
        protocol=protocol,
        figure=figure,
        fabric=fabric,
        min_bytes=min_bytes,
        switch=switch,
        oversubscription=oversubscription,
        su_size=su_size,
        latency_tolerance=latency_tolerance,
        nccl_version=nccl_version,
        fail=fail,
        degrade=degrade,
        **options,
    )
