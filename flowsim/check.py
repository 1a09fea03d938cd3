"""Measured nccl-tests results against flowsim's prediction for the same cluster.

A cluster whose nccl-tests bus bandwidth falls well below what its fabric allows has
something broken (a degraded link, a wrong NCCL setting). :func:`check_nccl_log` parses the
output of one nccl-tests binary (``all_reduce_perf``, ``all_gather_perf``,
``reduce_scatter_perf``, ``alltoall_perf``, ``sendrecv_perf``; also ``broadcast_perf`` and
``reduce_perf``), predicts every row with :func:`flowsim.collectives.report.sweep` on a preset cluster
(:func:`flowsim.fabrics.build_cluster`) and flags rows whose measured busbw falls short of
the prediction by more than a threshold. :func:`append_history` keeps each check in an HDF5
file so trends over days show; :func:`plot_history` draws them. :func:`history_file` and
:func:`history_plot_file` check those two outputs, so that a command can refuse a bad path
before it runs the check.

The format read is the one nccl-tests prints (``src/common.cu`` and ``src/util.cu`` of
NVIDIA/nccl-tests): optional ``# nccl-tests version`` and ``# Collective test starting:
NAME`` lines (NAME may carry the binary's build suffix, ``all_reduce_perf_mpi``), the
``# nThread ... nGpus ...`` line, ``# Using devices`` and one
``#  Rank R [Group G] Pid P on HOST device D [BUS] NAME`` line per rank, the column titles
(``out-of-place ... in-place``) and the header naming the columns, then one row per size::

    size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong

(out-of-place, then in-place; ``#wrong`` is ``N/A`` without validation; a time, bandwidth
or ``#wrong`` that is not a finite, non-negative number is an error, as nccl-tests prints
none for a size it completed), and the closing ``# Avg bus bandwidth : X`` line. Each
column is read where the header names it: older versions lack ``redop`` or ``root`` and
title ``#wrong`` ``error`` (printed as ``0e+00``), ``-C 1`` titles ``time`` ``cputime``,
per-iteration statistics add columns after each ``#wrong``, and columns after the in-place
``#wrong`` (timestamps) are skipped. Lines of other programs (``NCCL INFO``, ``mpirun``)
may be interleaved; the prefixes launchers put on every line are removed
(``[1,0]<stdout>:`` of ``mpirun --tag-output``, ``[0]`` of MPICH's ``-prepend-rank``,
``  0:`` of ``srun --label``), as is a UTF-8 byte-order mark. Sizes are nccl-tests' ``S``
(the total over ranks for all-gather, reduce-scatter and all-to-all), busbw and algbw are
in GB/s (1e9 B/s), times in microseconds.

Prediction choices: rank ``r`` on the ``i``-th host named in the rank lines, device ``d``,
is GPU ``n{i}.gpu{d}`` of the cluster, passed to flowsim in rank order. A
``sendrecv_perf`` run shifts data around the ring of ranks, every rank sending ``S`` to the
next at once; it is predicted as one ``send`` between the pair the ring waits for
(:func:`flowsim.pipeline.send_pair`: the first ring neighbours on different hosts, or ranks
0 and 1 on one host), assuming the other pairs do not share its links.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from flowsim.collectives import resolve_algorithm
from flowsim.errors import InputError, image_file, output_file, whole_number
from flowsim.fabrics import build_cluster
from flowsim.files import locked, replaced_atomically
from flowsim.collectives.report import bus_factor, busbw_Bps, sweep
from flowsim.collectives.placement import send_pair

__all__ = [
    "BINARIES",
    "CheckReport",
    "History",
    "Measurement",
    "NcclTestLog",
    "RankInfo",
    "RowCheck",
    "TestRow",
    "append_history",
    "check_log",
    "check_nccl_log",
    "history_file",
    "history_plot_file",
    "parse_nccl_log",
    "plot_history",
    "read_history",
]

#: nccl-tests binary -> flowsim collective.
BINARIES = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "alltoall_perf": "all_to_all",
    "sendrecv_perf": "send",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
}
_COLLECTIVE_BINARY = {collective: binary for binary, collective in BINARIES.items()}

# What launchers put before every line: Open MPI's "mpirun --tag-output" ("[1,0]<stdout>:"),
# MPICH's "-prepend-rank" ("[0] ") and Slurm's "srun --label" ("  0: ", the task number
# right-aligned). The srun label is digits then a colon: a row starts with digits then a space.
_TAG_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\[\d+\] | *\d+: )")
# A binary name not inside another word ("all_reduce_perf_dgx.txt" names all_reduce_perf).
_BINARY_NAME = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(BINARIES) + r")(?![A-Za-z0-9])")


def _file_name_alternative(binary: str) -> str:
    # In a file name a binary may follow "_" ("node1_all_gather_perf"), but not as the tail of
    # a longer binary glued to a word: "xall_reduce_perf" does not name reduce_perf.
    longer = [other[: -len(binary)] for other in BINARIES if other != binary and other.endswith("_" + binary)]
    return "".join(f"(?<!{re.escape(prefix)})" for prefix in longer) + binary


# A binary name in a file name whose '-' are read as '_' ("nccl-all-gather-perf.txt").
_FILE_BINARY_NAME = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(map(_file_name_alternative, BINARIES)) + r")(?![A-Za-z0-9])"
)
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
# The test name is the binary's, with any suffix it was built with (NAME_SUFFIX=_mpi).
_STARTING_BINARY = re.compile("(" + "|".join(BINARIES) + r")(?:_\S+)?")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_NTHREAD = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_RANK = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
# The four columns of each half of a row, as the table header names them.
_HALF = ("time", "algbw", "busbw", "#wrong")
# Older nccl-tests title '#wrong' "error"; '-C 1' (CPU time) titles 'time' "cputime".
_HEADER_SYNONYMS = {"error": "#wrong", "cputime": "time"}
_HEADER_EXPECTED = (
    "'#  size  count  type  [redop]  [root]', then 'time  algbw  busbw  #wrong' for each of the two halves "
    "('error' for '#wrong' and 'cputime' for 'time' are read too; further columns after each '#wrong' "
    "are skipped)"
)
_HISTORY_FORMAT = "flowsim-nccl-check-history"


@dataclass(frozen=True)
class RankInfo:
    """One ``#  Rank`` line: rank, host, CUDA device, and the line number it is on."""

    rank: int
    host: str
    device: int
    device_name: str
    line: int


@dataclass(frozen=True)
class Measurement:
    """One half of a row (out-of-place or in-place).

    ``wrong`` is the ``#wrong`` column, None where nccl-tests printed ``N/A``.
    """

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None


@dataclass(frozen=True)
class TestRow:
    """One size of an nccl-tests table, with the line number it is on.

    ``redop`` and ``root`` are None where the table has no such column (older nccl-tests
    print them only for the tests that use them, or not at all); ``root`` is -1 where
    nccl-tests printed it for a test without a root.
    """

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Measurement
    in_place: Measurement
    line: int


@dataclass(frozen=True)
class NcclTestLog:
    """A parsed nccl-tests run.

    Attributes
    ----------
    source : str
        File path, or ``"<text>"``.
    collective : str
        flowsim collective name (a value of :data:`BINARIES`).
    binary : str
        nccl-tests binary (a key of :data:`BINARIES`, without a build suffix such as
        ``_mpi``).
    version : str or None
        ``# nccl-tests version`` when printed.
    n_threads, n_gpus : int
        ``-t`` and ``-g`` of the run (GPUs per thread).
    ranks : tuple of RankInfo
        In rank order.
    rows : tuple of TestRow
    avg_busbw_GBps : float
        The closing ``# Avg bus bandwidth`` figure.
    """

    source: str
    collective: str
    binary: str
    version: str | None
    n_threads: int
    n_gpus: int
    ranks: tuple[RankInfo, ...]
    rows: tuple[TestRow, ...]
    avg_busbw_GBps: float

    @property
    def n_ranks(self) -> int:
        """Ranks listed in the rank lines."""
        return len(self.ranks)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names in order of first appearance in the rank lines."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def n_nodes(self) -> int:
        """Distinct hosts in the rank lines."""
        return len(self.hosts)


def _error(source: str, line: int, message: str) -> InputError:
    return InputError(f"{source}, line {line}: {message}")


def _read(path_or_text: str | os.PathLike) -> tuple[str, str]:
    """(text, source name): a path (Path, or a str without a newline) is read."""
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return path_or_text, "<text>"
    path = Path(path_or_text)
    try:
        return path.read_text(errors="replace"), str(path)
    except OSError as err:
        raise InputError(f"{path}: cannot read nccl-tests output: {err.strerror}") from None


def _number(text: str, kind: type, source: str, line: int, column: str):
    try:
        return kind(text)
    except ValueError:
        raise _error(
            source, line, f"column {column!r} should be {'an integer' if kind is int else 'a number'}, got {text!r}"
        ) from None


def _measured(text: str, source: str, line: int, column: str) -> float:
    # float() also reads "nan", "inf" and "-1", which would pass every comparison or flag
    # a healthy size; nccl-tests prints none of them for a size it completed.
    value = _number(text, float, source, line, column)
    if not (math.isfinite(value) and value >= 0):
        raise _error(source, line, f"column {column!r} should be a finite, non-negative measurement, got {text!r}")
    return value


def _count(text: str, source: str, line: int, column: str) -> int:
    value = _number(text, int, source, line, column)
    if value < 0:
        raise _error(source, line, f"column {column!r} should be a non-negative integer, got {text!r}")
    return value


def _measurement(tokens: Sequence[str], source: str, line: int, half: str) -> Measurement:
    # Older nccl-tests print this column as a float ("0e+00"), hence float before int.
    wrong = None if tokens[3] == "N/A" else int(_measured(tokens[3], source, line, f"{half} #wrong"))
    return Measurement(
        time_us=_measured(tokens[0], source, line, f"{half} time"),
        algbw_GBps=_measured(tokens[1], source, line, f"{half} algbw"),
        busbw_GBps=_measured(tokens[2], source, line, f"{half} busbw"),
        wrong=wrong,
    )


@dataclass(frozen=True)
class _Layout:
    """Where a row's columns are (token positions), from the table header on ``line``."""

    names: tuple[str, ...]
    redop: int | None
    root: int | None
    halves: tuple[int, int]  # the 'time' column of each half, in printed order
    line: int

    @property
    def needed(self) -> int:
        """Tokens a row needs: up to the second half's '#wrong'; later ones are skipped."""
        return self.halves[1] + len(_HALF)


def _layout(stripped: str, source: str, line: int) -> _Layout:
    """The columns the header line ``stripped`` (``#  size  count  type ...``) names."""
    names = tuple(_HEADER_SYNONYMS.get(name, name) for name in stripped.lstrip("#").split())
    optional = {}
    position = 3
    for name in ("redop", "root"):
        if names[position : position + 1] == (name,):
            optional[name] = position
            position += 1
    # Per-iteration statistics (i_min i_max ...) follow each '#wrong'; the next 'time' starts
    # the second half.
    second = next((i for i in range(position + len(_HALF), len(names)) if names[i] == "time"), None)
    if (
        names[:3] != ("size", "count", "type")
        or names[position : position + len(_HALF)] != _HALF
        or second is None
        or names[second : second + len(_HALF)] != _HALF
    ):
        raise _error(source, line, f"table header not understood: expected {_HEADER_EXPECTED}; got {stripped!r}")
    return _Layout(names, optional.get("redop"), optional.get("root"), (position, second), line)


def _row(text: str, source: str, line: int, layout: _Layout, in_place_first: bool) -> TestRow:
    tokens = text.split()
    if len(tokens) < layout.needed:
        raise _error(
            source,
            line,
            f"expected {layout.needed} columns ({' '.join(layout.names[: layout.needed])}, as the header on "
            f"line {layout.line} names them); got {len(tokens)} (truncated row?): {text.strip()!r}",
        )
    first_half, second_half = ("in-place", "out-of-place") if in_place_first else ("out-of-place", "in-place")
    start, later = layout.halves
    first = _measurement(tokens[start : start + len(_HALF)], source, line, first_half)
    second = _measurement(tokens[later : later + len(_HALF)], source, line, second_half)
    return TestRow(
        size_bytes=_number(tokens[0], int, source, line, "size"),  # a row starts with digits
        count=_count(tokens[1], source, line, "count"),
        dtype=tokens[2],
        redop=None if layout.redop is None else tokens[layout.redop],
        root=None if layout.root is None else _number(tokens[layout.root], int, source, line, "root"),
        out_of_place=second if in_place_first else first,
        in_place=first if in_place_first else second,
        line=line,
    )


def _infer_binary(rows: Sequence[TestRow], n_ranks: int) -> set[str]:
    """Binaries consistent with the rows' redop, root and busbw / algbw ratio."""
    measured = [r.out_of_place for r in rows if r.out_of_place.algbw_GBps >= 1.0]
    ratio = measured[-1].busbw_GBps / measured[-1].algbw_GBps if measured else None
    candidates = set()
    for binary, collective in BINARIES.items():
        reducing = collective in ("all_reduce", "reduce_scatter", "reduce", "send")
        rooted = collective in ("broadcast", "reduce")
        # A column the table lacks (None) tells nothing.
        if any(
            (r.redop is not None and (r.redop != "none") != reducing)
            or (r.root is not None and (r.root >= 0) != rooted)
            for r in rows
        ):
            continue
        if ratio is not None and abs(ratio - bus_factor(collective, n_ranks)) > 0.05 * bus_factor(collective, n_ranks):
            continue
        candidates.add(binary)
    return candidates


def parse_nccl_log(path_or_text: str | os.PathLike, *, collective: str | None = None) -> NcclTestLog:
    """Parse the output of one nccl-tests binary.

    Parameters
    ----------
    path_or_text : str or path-like
        A file, or the output itself (a ``str`` holding a newline).
    collective : str, optional
        flowsim collective name or nccl-tests binary (``"all_reduce"`` or
        ``"all_reduce_perf"``). By default the ``# Collective test starting`` line, else a
        binary name in the text (a command line), else the file name, else the only binary
        whose redop, root and busbw / algbw ratio fit the rows.

    Returns
    -------
    NcclTestLog

    Raises
    ------
    InputError
        Naming the source and line: no ``# nThread`` header, missing, duplicate or
        non-contiguous rank lines, a table header naming columns in an order it does not
        know, a row with missing or non-numeric columns, a table without rows, no
        ``# Avg bus bandwidth`` line (truncated output), a second test in the same text, or
        a collective that cannot be told.
    """
    text, source = _read(path_or_text)
    # A UTF-8 byte-order mark (from an editor) would hide the '#' that starts the first line.
    text = text.removeprefix("\ufeff")
    lines = [_TAG_PREFIX.sub("", raw).rstrip() for raw in text.splitlines()]
    binary = version = None
    header = None
    ranks: dict[int, RankInfo] = {}
    rows: list[TestRow] = []
    layout = None
    in_place_first = False
    avg = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            starting, nthread = _STARTING.match(stripped), _NTHREAD.match(stripped)
            if (starting or nthread) and (layout is not None or (nthread and header is not None)):
                raise _error(source, number, "a second nccl-tests run starts here; give one run per check")
            if starting:
                binary = starting.group(1).rsplit("/", 1)[-1]
            elif _VERSION.match(stripped):
                version = _VERSION.match(stripped).group(1)
            elif nthread:
                header = (int(nthread.group(1)), int(nthread.group(2)), number)
            elif stripped.replace("#", "").strip().startswith("Rank"):
                match = _RANK.match(stripped)
                if match is None:
                    raise _error(
                        source,
                        number,
                        f"expected '#  Rank R [Group G] Pid P on HOST device D [BUS] NAME', got {stripped!r}",
                    )
                rank = int(match.group("rank"))
                if rank in ranks:
                    raise _error(
                        source,
                        number,
                        f"rank {rank} is listed twice (also line {ranks[rank].line}); "
                        "nccl-tests built without MPI runs one independent test per process",
                    )
                ranks[rank] = RankInfo(
                    rank, match.group("host"), int(match.group("device")), match.group("name").strip(), number
                )
            elif "out-of-place" in stripped and "in-place" in stripped:
                in_place_first = stripped.index("in-place") < stripped.index("out-of-place")
            elif re.match(r"^#\s*size\s+count", stripped):
                if header is None:
                    raise _error(source, number, "table header before the '# nThread ... nGpus ...' line")
                layout = _layout(stripped, source, number)
            elif _AVG.match(stripped):
                if layout is None:
                    raise _error(source, number, "'# Avg bus bandwidth' line before any table header")
                avg = _measured(_AVG.match(stripped).group(1), source, number, "Avg bus bandwidth")
            continue
        if layout is not None and avg is None and re.match(r"^\d+\s", stripped + " "):
            rows.append(_row(stripped, source, number, layout, in_place_first))
    last = len(lines)
    if header is None:
        raise InputError(
            f"{source}: no '# nThread N nGpus G minBytes ... maxBytes ...' line: is this nccl-tests output?"
        )
    if not ranks:
        raise _error(
            source,
            header[2],
            "expected '# Using devices' and one '#  Rank R ... on HOST device D' line "
            "per rank after this header; found none",
        )
    missing = sorted(set(range(len(ranks))) - set(ranks))
    if missing:
        last_rank = max(r.line for r in ranks.values())
        raise _error(source, last_rank, f"the rank lines up to here list {len(ranks)} ranks but not rank {missing[0]}")
    if layout is None:
        raise InputError(
            f"{source}, line {last}: output ends before the '#  size  count  type ...' table header (truncated?)"
        )
    if not rows:
        raise _error(source, layout.line, "table header but no rows after it (truncated?)")
    if avg is None:
        raise InputError(
            f"{source}, line {last}: output ends after the row on line {rows[-1].line}; expected more "
            "rows or '# Avg bus bandwidth : X' (truncated: the test did not finish)"
        )
    ordered = tuple(ranks[r] for r in range(len(ranks)))
    binary = _pick_binary(collective, binary, text, source, rows, len(ordered))
    return NcclTestLog(source, BINARIES[binary], binary, version, header[0], header[1], ordered, tuple(rows), avg)


def _pick_binary(
    collective: str | None, starting: str | None, text: str, source: str, rows: Sequence[TestRow], n_ranks: int
) -> str:
    if collective is not None:
        binary = _COLLECTIVE_BINARY.get(collective, collective)
        if binary not in BINARIES:
            raise InputError(f"unknown collective {collective!r}; valid ones: {', '.join(_COLLECTIVE_BINARY)}")
        return binary
    if starting is not None:
        known = _STARTING_BINARY.fullmatch(starting)
        if known is None:
            raise InputError(
                f"{source}: nccl-tests binary {starting!r} is not one flowsim checks; "
                f"valid ones: {', '.join(BINARIES)}"
            )
        return known.group(1)
    named = set(_BINARY_NAME.findall(text))
    if len(named) == 1:
        return named.pop()
    named = set(_FILE_BINARY_NAME.findall(Path(source).name.replace("-", "_"))) if source != "<text>" else set()
    if len(named) == 1:
        return named.pop()
    fitting = _infer_binary(rows, n_ranks)
    if len(fitting) == 1:
        return fitting.pop()
    choices = ", ".join(sorted(fitting)) or "none of them"
    raise InputError(
        f"{source}: cannot tell which nccl-tests binary wrote this output (fits {choices}); "
        "give the collective explicitly"
    )


@dataclass(frozen=True)
class RowCheck:
    """Measured against predicted for one size.

    ``ratio_*`` is measured busbw over predicted busbw; ``short`` when either is below
    ``1 - threshold``; ``wrong`` when nccl-tests counted wrong elements. Predicted fields
    are None for rows not predicted (size 0 or below ``min_bytes``).
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

    @property
    def flagged(self) -> bool:
        """Short of the prediction, or wrong elements counted."""
        return self.short or self.wrong


@dataclass(frozen=True)
class CheckReport:
    """One nccl-tests run checked against flowsim.

    Attributes
    ----------
    log : NcclTestLog
    system : str
        Preset name (``"dgx_h100"``).
    nodes : int
    threshold : float
        A row is short when measured busbw < predicted x (1 - threshold).
    algorithm, protocol, figure, fabric : str
        How the prediction was made (see :func:`flowsim.collectives.collective_time`).
    rows : tuple of RowCheck
    checked_at : str
        UTC time of the check, ISO 8601.
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
    checked_at: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat())

    @property
    def flagged(self) -> tuple[RowCheck, ...]:
        """Rows flagged, in log order."""
        return tuple(r for r in self.rows if r.flagged)

    @property
    def ok(self) -> bool:
        """No row flagged."""
        return not self.flagged

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
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "figure": self.figure,
            "fabric": self.fabric,
            "checked_at": self.checked_at,
            "avg_busbw_GBps": log.avg_busbw_GBps,
            "n_flagged": len(self.flagged),
            "rows": [{**asdict(r), "flagged": r.flagged} for r in self.rows],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)

    def format_text(self) -> str:
        """A table: size, predicted busbw, measured busbw and ratio (out-of-place, in-place), flag."""
        log = self.log
        lines = [
            f"# {log.source}: {log.binary}, {log.n_ranks} ranks on {log.n_nodes} node(s)",
            f"# predicted: {self.nodes} x {self.system}, {self.algorithm} algorithm, {self.protocol} protocol, "
            f"{self.figure} link rates, {self.fabric} fabric",
            # Not '.0%': a threshold of 0.005 would read "below 100%".
            f"# flag: measured busbw below {100 * (1 - self.threshold):.12g}% of predicted, or #wrong > 0",
            "#       size   predicted    out-of-place       in-place",
            "#        (B)  busbw(GB/s)  busbw(GB/s) ratio  busbw(GB/s) ratio  flag",
        ]
        for r in self.rows:
            predicted = "-" if r.predicted_busbw_GBps is None else f"{r.predicted_busbw_GBps:.2f}"
            ratios = ["-" if x is None else f"{x:.2f}" for x in (r.ratio_out, r.ratio_in)]
            flag = ",".join(name for name, on in (("SHORT", r.short), ("WRONG", r.wrong)) if on)
            lines.append(
                f"{r.size_bytes:12d}  {predicted:>11}  {r.measured_busbw_out_GBps:11.2f} {ratios[0]:>5}  "
                f"{r.measured_busbw_in_GBps:11.2f} {ratios[1]:>5}  {flag}".rstrip()
            )
        lines.append(self._summary())
        return "\n".join(lines)

    def _summary(self) -> str:
        """The closing line: flagged sizes among those predicted, and why the others were not."""
        predicted = [r for r in self.rows if r.predicted_busbw_GBps is not None]
        left_out = [r for r in self.rows if r.predicted_busbw_GBps is None]
        n = sum(r.flagged for r in predicted)
        if n:
            summary = f"# {n} of {len(predicted)} predicted size{'s' if len(predicted) != 1 else ''} flagged"
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


def _rank_gpus(log: NcclTestLog, system: str, topology) -> list[str]:
    """GPU node names of the ranks: host ``i`` (first-appearance order) is server ``n{i}``.

    An :class:`InputError` names a device the server lacks, or two ranks on one GPU.
    """
    host_index = {host: i for i, host in enumerate(log.hosts)}
    names = set(topology.node_names)
    gpus: dict[str, RankInfo] = {}
    for r in log.ranks:
        gpu = f"n{host_index[r.host]}.gpu{r.device}"
        if gpu not in names:
            raise _error(
                log.source, r.line, f"rank {r.rank} uses device {r.device}, which a {system} server does not have"
            )
        if gpu in gpus:
            first = gpus[gpu]
            raise _error(
                log.source,
                r.line,
                f"ranks {first.rank} (line {first.line}) and {r.rank} (line {r.line}) both name device {r.device} "
                f"on host {r.host}: two ranks on one GPU, or device numbers counted per process "
                "(CUDA_VISIBLE_DEVICES set per rank); flowsim needs each rank's own GPU",
            )
        gpus[gpu] = r
    return list(gpus)


def check_log(
    log: NcclTestLog,
    *,
    system: str,
    nodes: int | None = None,
    threshold: float = 0.1,
    algorithm: str | None = None,
    protocol: str = "auto",
    figure: str = "effective",
    fabric: str = "rail_optimized",
    min_bytes: int = 1,
) -> CheckReport:
    """Predict each row of a parsed run and compare.

    Parameters
    ----------
    log : NcclTestLog
        From :func:`parse_nccl_log`.
    system, nodes, threshold, algorithm, protocol, figure, fabric, min_bytes
        As :func:`check_nccl_log`.

    Returns
    -------
    CheckReport
    """
    system = system.replace("-", "_")
    if nodes is None:
        nodes = log.n_nodes
    nodes = whole_number("nodes", nodes)
    if nodes != log.n_nodes:
        raise InputError(
            f"{log.source}: the rank lines name {log.n_nodes} host(s) ({', '.join(log.hosts)}), not {nodes}"
        )
    if not 0 <= threshold < 1:
        raise InputError(f"threshold must be in [0, 1), got {threshold!r}")
    if log.n_ranks < 2:
        raise InputError(f"{log.source}: {log.n_ranks} rank; flowsim predicts collectives of 2 or more ranks")
    algorithm = resolve_algorithm(log.collective, algorithm)
    topology = build_cluster(system, nodes, figure=figure, fabric=fabric)
    gpus = _rank_gpus(log, system, topology)
    ranks = send_pair(topology, gpus) if log.collective == "send" else gpus
    predicted_sizes = sorted({r.size_bytes for r in log.rows if r.size_bytes >= max(min_bytes, 1)})
    predictions = sweep(
        topology, log.collective, predicted_sizes, dtype="int8", ranks=ranks, algorithm=algorithm, protocol=protocol
    )
    time_us = {size: p.time_us for size, p in zip(predicted_sizes, predictions)}
    checks = []
    for row in log.rows:
        predicted_time = time_us.get(row.size_bytes)
        predicted_busbw = ratio_out = ratio_in = None
        short = False
        if predicted_time is not None:
            predicted_busbw = busbw_Bps(log.collective, row.size_bytes, predicted_time * 1e-6, log.n_ranks) / 1e9
            ratio_out = row.out_of_place.busbw_GBps / predicted_busbw
            ratio_in = row.in_place.busbw_GBps / predicted_busbw
            short = min(ratio_out, ratio_in) < 1.0 - threshold
        wrong = any(m.wrong for m in (row.out_of_place, row.in_place))
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
            )
        )
    return CheckReport(log, system, nodes, float(threshold), algorithm, protocol, figure, fabric, tuple(checks))


def check_nccl_log(
    path_or_text: str | os.PathLike,
    *,
    system: str,
    nodes: int | None = None,
    threshold: float = 0.1,
    collective: str | None = None,
    algorithm: str | None = None,
    protocol: str = "auto",
    figure: str = "effective",
    fabric: str = "rail_optimized",
    min_bytes: int = 1,
) -> CheckReport:
    """Parse nccl-tests output, predict every row with flowsim and flag shortfalls.

    Parameters
    ----------
    path_or_text : str or path-like
        A file, or the output itself (a ``str`` holding a newline).
    system : str
        Server preset (``"dgx-h100"`` or ``"dgx_h100"``).
    nodes : int, optional
        Servers in the cluster; must equal the hosts named in the rank lines (default: that
        count).
    threshold : float
        Flag a row when measured busbw < predicted busbw x (1 - threshold), in either the
        out-of-place or the in-place column.
    collective : str, optional
        See :func:`parse_nccl_log`.
    algorithm : str, optional
        flowsim algorithm (default: the collective's first, ring or p2p).
    protocol : {"auto", "simple", "ll", "ll128"}
        NCCL protocol costs; ``"auto"`` keeps the fastest, as NCCL's tuner does.
    figure : {"effective", "nominal"}
        Link rates.
    fabric : str
        Compute fabric between servers (:data:`flowsim.fabrics.FABRICS`).
    min_bytes : int
        Rows below this size are reported but not predicted (small sizes are latency-bound
        and take as long to simulate as large ones).

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
    log = parse_nccl_log(path_or_text, collective=collective)
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
    )


# HDF5 history: group -> dataset -> (dtype kind, value of a report / row check).
_CHECK_COLUMNS = {
    "check_id": "i8",
    "time_unix": "f8",
    "source": "str",
    "binary": "str",
    "system": "str",
    "nodes": "i8",
    "ranks": "i8",
    "threshold": "f8",
    "algorithm": "str",
    "protocol": "str",
    "figure": "str",
    "fabric": "str",
    "n_flagged": "i8",
    "avg_busbw_GBps": "f8",
}
_ROW_COLUMNS = {
    "check_id": "i8",
    "size_bytes": "i8",
    "measured_busbw_out_GBps": "f8",
    "measured_busbw_in_GBps": "f8",
    "measured_time_out_us": "f8",
    "measured_time_in_us": "f8",
    "predicted_time_us": "f8",
    "predicted_busbw_GBps": "f8",
    "ratio": "f8",
    "flagged": "bool",
}


def _h5py():
    import h5py

    return h5py


def _dtype(kind: str):
    return _h5py().string_dtype() if kind == "str" else np.dtype(kind)


def _append(group, columns: dict, values: dict) -> None:
    n_new = len(values["check_id"])
    for name, kind in columns.items():
        if name not in group:
            group.create_dataset(name, shape=(0,), maxshape=(None,), dtype=_dtype(kind), chunks=(256,))
        dataset = group[name]
        start = dataset.shape[0]
        dataset.resize((start + n_new,))
        dataset[start:] = np.asarray(values[name], dtype=object if kind == "str" else kind)


def history_file(path: str | os.PathLike, *, inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """``path`` as a :class:`~pathlib.Path` :func:`append_history` can add to; an
    :class:`InputError` naming it otherwise, the file left as it is.

    A history may be a missing or empty file (one is started there), an HDF5 file with
    nothing in it, or a flowsim check history; any other file, HDF5 or not, belongs to
    someone else. The path must also pass :func:`flowsim.errors.output_file` (``inputs``:
    files the run reads).
    """
    target = output_file(path, "the check history", inputs=inputs)
    if not target.exists() or target.stat().st_size == 0:
        return target
    try:
        with _h5py().File(target, "r") as f:
            found = f.attrs.get("format")
            if found != _HISTORY_FORMAT and (len(f) or len(f.attrs)):
                what = "no 'format' attribute" if found is None else f"format {found!r}"
                raise InputError(
                    f"{target}: an HDF5 file that is not a flowsim check history ({what}, expected "
                    f"{_HISTORY_FORMAT!r}); left as it is, give another history file"
                )
    except OSError as err:
        raise InputError(f"{target}: cannot open it as a check history: {err}") from None
    return target


def append_history(report: CheckReport, path: str | os.PathLike) -> int:
    """Append ``report`` to an HDF5 history file (created if missing); returns its check id.

    Layout: group ``checks`` holds one row per check (``check_id``, ``time_unix``,
    ``source``, ``binary``, ``system``, ``nodes``, ``ranks``, ``threshold``, ``algorithm``,
    ``protocol``, ``figure``, ``fabric``, ``n_flagged``, ``avg_busbw_GBps``); group ``rows``
    one row per (check, size) (``check_id``, ``size_bytes``, measured busbw and time
    out-of-place and in-place, ``predicted_time_us``, ``predicted_busbw_GBps``, ``ratio`` =
    the lower of the two measured / predicted ratios, ``flagged``; NaN where not predicted).
    Every dataset is one-dimensional and resizable.

    ``path`` must pass :func:`history_file`. The history is appended to a copy, renamed over
    it when complete (:func:`flowsim.files.replaced_atomically`): an error, a crash or Ctrl-C
    leaves the history as it was, never half-appended. Checks appending to one history at
    once take turns (:func:`flowsim.files.locked`), so none is lost.
    """
    h5py = _h5py()
    path = history_file(path)
    # A history reached through a symbolic link (a shared one) is replaced where it lives,
    # not by a private copy in place of the link.
    target = Path(os.path.realpath(path))
    try:
        with locked(target), replaced_atomically(target, copy_existing=True) as tmp_name:
            # Judged under the lock: another check may have started the history meanwhile.
            history_file(target)
            existing = target.exists() and target.stat().st_size > 0
            with h5py.File(tmp_name, "r+" if existing else "w") as f:
                check_id = _append_check(f, report)
    except OSError as err:
        raise InputError(f"{path}: cannot write the check history: {err}") from None
    return check_id


def _append_check(f, report: CheckReport) -> int:
    """Append one check and its rows to the open history ``f``; returns its check id."""
    log = report.log
    f.attrs["format"] = _HISTORY_FORMAT
    f.attrs["version"] = 1
    checks = f.require_group("checks")
    check_id = int(checks["check_id"][-1]) + 1 if "check_id" in checks and checks["check_id"].shape[0] else 0
    when = datetime.datetime.fromisoformat(report.checked_at).timestamp()
    _append(
        checks,
        _CHECK_COLUMNS,
        {
            "check_id": [check_id],
            "time_unix": [when],
            "source": [log.source],
            "binary": [log.binary],
            "system": [report.system],
            "nodes": [report.nodes],
            "ranks": [log.n_ranks],
            "threshold": [report.threshold],
            "algorithm": [report.algorithm],
            "protocol": [report.protocol],
            "figure": [report.figure],
            "fabric": [report.fabric],
            "n_flagged": [len(report.flagged)],
            "avg_busbw_GBps": [log.avg_busbw_GBps],
        },
    )

    def nan(value):
        return np.nan if value is None else value

    rows = report.rows
    _append(
        f.require_group("rows"),
        _ROW_COLUMNS,
        {
            "check_id": [check_id] * len(rows),
            "size_bytes": [r.size_bytes for r in rows],
            "measured_busbw_out_GBps": [r.measured_busbw_out_GBps for r in rows],
            "measured_busbw_in_GBps": [r.measured_busbw_in_GBps for r in rows],
            "measured_time_out_us": [r.measured_time_out_us for r in rows],
            "measured_time_in_us": [r.measured_time_in_us for r in rows],
            "predicted_time_us": [nan(r.predicted_time_us) for r in rows],
            "predicted_busbw_GBps": [nan(r.predicted_busbw_GBps) for r in rows],
            "ratio": [np.nan if r.ratio_out is None else min(r.ratio_out, r.ratio_in) for r in rows],
            "flagged": [r.flagged for r in rows],
        },
    )
    return check_id


@dataclass(frozen=True)
class History:
    """A check history read back: column name -> 1-D array, for ``checks`` and ``rows``."""

    path: str
    checks: dict[str, np.ndarray]
    rows: dict[str, np.ndarray]

    @property
    def n_checks(self) -> int:
        """Checks in the history."""
        return len(self.checks["check_id"])


def read_history(path: str | os.PathLike) -> History:
    """Read a history written by :func:`append_history` (strings as ``str`` objects)."""
    h5py = _h5py()
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such check history file")
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != _HISTORY_FORMAT:
                raise InputError(f"{path}: not a flowsim check history (no format attribute {_HISTORY_FORMAT!r})")
            tables = []
            for group, columns in (("checks", _CHECK_COLUMNS), ("rows", _ROW_COLUMNS)):
                missing = [c for c in columns if c not in f[group]]
                if missing:
                    raise InputError(f"{path}: group {group!r} lacks datasets {', '.join(missing)}")
                tables.append(
                    {c: f[group][c].asstr()[()] if kind == "str" else f[group][c][()] for c, kind in columns.items()}
                )
    except OSError as err:
        raise InputError(f"{path}: cannot read the check history: {err}") from None
    return History(str(path), *tables)


def history_plot_file(output: str | os.PathLike, *, inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """``output`` as a :class:`~pathlib.Path` :func:`plot_history` can save to; an
    :class:`InputError` naming it otherwise.

    The path must pass :func:`flowsim.errors.image_file` (``inputs``: files the run reads):
    writable, and ending in an image format matplotlib writes (``.png``, ``.svg``, ...).

    Raises
    ------
    ImportError
        When matplotlib is not installed.
    """
    try:
        import matplotlib  # noqa: F401 - only to say how to install it
    except ImportError:
        raise ImportError("plotting the check history needs matplotlib: pip install 'flowsim[plot]'") from None
    return image_file(output, "the history plot", inputs=inputs)


def plot_history(
    history: History | str | os.PathLike,
    output: str | os.PathLike,
    *,
    binary: str | None = None,
    system: str | None = None,
    sizes: Sequence[int] | None = None,
) -> Path:
    """Plot measured / predicted busbw over time, one line per message size, and save it.

    Parameters
    ----------
    history : History or path
    output : path
        Image file (format from the suffix: ``.png``, ``.svg``, ``.pdf``).
    binary, system : str, optional
        Keep checks of this nccl-tests binary / preset only; by default the binary of the
        latest check.
    sizes : sequence of int, optional
        Message sizes to draw (default: every predicted size).

    Returns
    -------
    Path

    Raises
    ------
    ImportError
        When matplotlib is not installed.
    InputError
        When ``output`` fails :func:`history_plot_file` or no check matches.
    """
    output = history_plot_file(output, inputs=[history.path if isinstance(history, History) else history])
    from matplotlib.figure import Figure

    if not isinstance(history, History):
        history = read_history(history)
    checks = history.checks
    if history.n_checks == 0:
        raise InputError(f"{history.path}: the history holds no checks")
    binary = checks["binary"][-1] if binary is None else binary
    keep = checks["binary"] == binary
    if system is not None:
        keep &= checks["system"] == system.replace("-", "_")
    if not keep.any():
        raise InputError(f"{history.path}: no check of {binary}{'' if system is None else ' on ' + system}")
    when = dict(zip(checks["check_id"][keep].tolist(), checks["time_unix"][keep].tolist()))
    thresholds = checks["threshold"][keep]
    rows = history.rows
    selected = np.isin(rows["check_id"], list(when)) & np.isfinite(rows["ratio"])
    if sizes is not None:
        selected &= np.isin(rows["size_bytes"], list(sizes))
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    for i, size in enumerate(np.unique(rows["size_bytes"][selected]).tolist()):
        these = np.flatnonzero(selected & (rows["size_bytes"] == size))
        times = [datetime.datetime.fromtimestamp(when[c], datetime.timezone.utc) for c in rows["check_id"][these]]
        ax.plot(times, rows["ratio"][these], marker="o", color=f"C{i % 10}", label=_size_label(size))
    ax.axhline(1.0, color="0.5", linewidth=1)
    ax.axhline(1.0 - float(thresholds[-1]), color="C3", linestyle="--", linewidth=1, label="flag below")
    ax.set_xlabel("check time (UTC)")
    ax.set_ylabel("measured / predicted busbw")
    ax.set_title(f"{binary}: {int(keep.sum())} check(s) from {Path(history.path).name}")
    ax.legend(fontsize="small", loc="best")
    fig.autofmt_xdate()
    fig.savefig(output, dpi=120)
    return output


def _size_label(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)
