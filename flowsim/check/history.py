"""The HDF5 history of checks, so trends over days show, and its plot.

h5py and matplotlib are imported when used: the check itself needs neither.
"""

from __future__ import annotations

import datetime
import errno
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flowsim._version import __version__
from flowsim.check.report import CheckReport, size_range
from flowsim.errors import InputError, file_kind, image_file, output_file
from flowsim.files import hdf5_format, locked, replaced_atomically
from flowsim.formatting import format_size
from flowsim.presets import system_name

__all__ = [
    "AppendedCheck", "History", "PastChange", "append_checks", "append_history", "history_file", "history_plot_file",
    "is_history_file", "plot_history", "read_history",
]

#: ``format`` attribute of a history file.
_HISTORY_FORMAT = "flowsim-nccl-check-history"
#: ``version`` attribute this module writes. Versions 2 to 4 added the columns of
#: ``_ADDED_COLUMNS``; an older history reads with their defaults there and takes new
#: checks, the older checks' new columns filled with the defaults. A reader that knows only
#: an older version reads a newer history too: it ignores datasets it does not know.
_HISTORY_VERSION = 4

# HDF5 history: group -> dataset -> (dtype kind, value of a report / row check).
_CHECK_COLUMNS = {
    "check_id": "i8",
    "time_unix": "f8",
    "run_time_unix": "f8",
    "run_time_from": "str",
    "label": "str",
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
    "n_fast": "i8",
    "warnings": "str",
    "nccl_version": "str",
    "nccl": "str",
    "flowsim_version": "str",
    "run_index": "i8",
    "run_count": "i8",
    "options": "str",
    "log_sha256": "str",
    "cluster_sha256": "str",
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
    "fast": "bool",
    "root": "i8",
    "dtype": "str",
    "redop": "str",
    "algorithm": "str",
    "protocol": "str",
    "channels": "i8",
    "flag": "str",
}
# Columns added after version 1 (n_fast, warnings, fast), 2 (root, dtype, redop) and 3 (the
# rest) -> their value for checks written before them.
_ADDED_COLUMNS = {
    "n_fast": 0, "warnings": "", "fast": False, "root": -1, "dtype": "", "redop": "",
    "run_time_unix": np.nan, "run_time_from": "check", "label": "",
    "nccl_version": "", "nccl": "", "flowsim_version": "", "run_index": 0, "run_count": 0, "options": "",
    "log_sha256": "", "cluster_sha256": "",
    "algorithm": "", "protocol": "", "channels": -1, "flag": "",
}
# Added columns whose value for older checks is another column's: a check written before
# the run's time was stored ran, as far as the history knows, when it was checked.
_COPIED_COLUMNS = {"run_time_unix": "time_unix"}


def _h5py():
    import h5py

    return h5py


def _dtype(kind: str):
    return _h5py().string_dtype() if kind == "str" else np.dtype(kind)


def _older(group, name: str, kind: str, n: int) -> np.ndarray:
    """The value of column ``name``, added after the history was started, for its ``n``
    checks or rows written before it (``group``'s)."""
    if name in _COPIED_COLUMNS:
        return group[_COPIED_COLUMNS[name]][:n]
    return np.full(n, _ADDED_COLUMNS[name], dtype=object if kind == "str" else kind)


def _append(group, columns: dict, values: dict) -> None:
    n_new = len(values["check_id"])
    n_old = group["check_id"].shape[0] if "check_id" in group else 0
    for name, kind in columns.items():
        if name not in group:
            # A column newer than the history: the checks already there get its default.
            group.create_dataset(name, shape=(0,), maxshape=(None,), dtype=_dtype(kind), chunks=(256,))
            if n_old:
                group[name].resize((n_old,))
                group[name][:] = _older(group, name, kind, n_old)
        dataset = group[name]
        start = dataset.shape[0]
        dataset.resize((start + n_new,))
        dataset[start:] = np.asarray(values[name], dtype=object if kind == "str" else kind)


def history_file(path: str | os.PathLike, *, inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """``path`` as a :class:`~pathlib.Path` :func:`append_history` can add to; an
    :class:`InputError` naming it otherwise, the file left as it is.

    A history may be a missing or empty file (one is started there), an HDF5 file with
    nothing in it, or a flowsim check history of this flowsim's version or older; any other
    file, HDF5 or not, belongs to someone else, and a newer history to a newer flowsim (it
    reads, :func:`read_history`, but appending would drop what this flowsim does not know).
    The path must also pass :func:`flowsim.errors.output_file` (``inputs``: files the run
    reads).
    """
    target = output_file(path, "the check history", inputs=inputs, streams=False)
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
            version = f.attrs.get("version")
            if found == _HISTORY_FORMAT and version is not None and int(version) > _HISTORY_VERSION:
                # Appending would write this version over it, with the newer columns left a
                # check short of the rest.
                raise InputError(
                    f"{target}: a check history written by a newer flowsim (version {int(version)}; this flowsim "
                    f"writes {_HISTORY_VERSION}); left as it is, append with that flowsim or give another history file"
                )
    except OSError as err:
        raise InputError(f"{target}: cannot open it as a check history: {err}") from None
    return target


def append_history(
    report: CheckReport,
    path: str | os.PathLike,
    *,
    run_time: datetime.datetime | None = None,
    label: str = "",
    options: str = "",
    force: bool = False,
) -> int:
    """Append ``report`` to an HDF5 history file (created if missing); returns its check id
    (that of the check already there where the run was checked alike before and not
    ``force``). :func:`append_checks` of one report, which says more."""
    return append_checks([report], path, run_time=run_time, label=label, options=options, force=force)[0].check_id


def append_checks(
    reports: Sequence[CheckReport],
    path: str | os.PathLike,
    *,
    run_time: datetime.datetime | None = None,
    label: str = "",
    options: str = "",
    force: bool = False,
) -> list[AppendedCheck]:
    """Append ``reports`` to an HDF5 history file (created if missing), all or none; returns
    for each its check id and how its run compares with the latest earlier check alike.

    Each run is compared with the latest check in the history (the ``reports`` before it
    included) whose run ran earlier and that checked the same binary on the same system,
    nodes and ranks with the same ``options``: each size both checks predicted, of the same
    root, type and reduction, whose measured busbw, out-of-place and in-place both, fell
    below ``1 - threshold`` times that check's (or rose above ``1 + threshold`` times it),
    the report's threshold (:class:`PastChange`).

    A run already in the history, checked alike (the same text, :attr:`~flowsim.check.log.
    NcclTestLog.sha256`, on the same system and nodes with the same threshold, algorithm,
    protocol, figure, fabric and ``options``), is not appended again unless ``force``: its
    :class:`AppendedCheck` is ``repeated``, naming the check there. A nightly script that
    checks a directory of logs again adds no copies to the trend.

    ``run_time`` is when the run ran (a backfilled log's day, not today's); by default the
    time stamp of the log's first stamped line (:attr:`~flowsim.check.log.NcclTestLog.started`),
    else the check's time. A time without a zone is UTC. ``label`` is free text that names the
    run (a build id, a ticket). ``options`` are the prediction's options that the report does
    not hold, as the command line gave them (``--fail n0.nic0 --nccl-version 2.19.3``), so that
    two checks of one log with other options tell apart.

    Layout: group ``checks`` holds one row per check (``check_id``, ``time_unix`` (when it was
    checked), ``run_time_unix`` (when the run ran), ``run_time_from`` (``"date"``: given,
    ``"log"``: its time stamps, ``"check"``: neither, the check's time), ``label``,
    ``source``, ``binary``, ``system``, ``nodes``, ``ranks``, ``threshold``, ``algorithm``,
    ``protocol``, ``figure``, ``fabric``, ``n_flagged``, ``avg_busbw_GBps`` (NaN where the
    log lacks it), ``n_fast``, ``warnings`` (the report's, one per line), ``nccl_version``
    (whose constants predicted), ``nccl`` (where that version came from: ``NCCL 2.26.2
    (log)``, ``(given)``, ``(default: ...)``), ``flowsim_version``, ``run_index`` and
    ``run_count`` (run k of n in its file), ``options``, ``log_sha256`` (the run's text's,
    :attr:`~flowsim.check.log.NcclTestLog.sha256`)); group ``rows``
    one row per (check, size) (``check_id``, ``size_bytes``, measured busbw and time
    out-of-place and in-place, ``predicted_time_us``, ``predicted_busbw_GBps``, ``ratio`` =
    the lower of the two measured / predicted ratios, ``flagged`` (slower, faster or wrong),
    ``fast`` (faster than predicted); NaN where not predicted; ``root``, ``dtype`` and
    ``redop`` as the row printed them, -1 and "" where it printed none: the blocks of a run of
    every root, type or reduction); ``algorithm``, ``protocol`` and ``channels`` the
    prediction ran ("" and -1 where not predicted), ``flag`` (``SHORT``, ``FAST``, ``WRONG``,
    comma-separated as the report prints them, "" where OK). Every dataset is one-dimensional
    and resizable.
    Attributes: ``format`` and ``version`` (4; ``n_fast``, ``warnings`` and ``fast`` are new
    in 2, ``root``, ``dtype`` and ``redop`` in 3, ``run_time_unix``, ``run_time_from``,
    ``label``, ``nccl_version`` to ``log_sha256``, and the rows' ``algorithm`` to ``flag`` in
    4; an older history is appended to in place, its earlier checks given 0, "", False, -1,
    "", "", their check time, "check", and "" (0 for run indices, -1 for channels: unknown)
    for the rest).

    ``path`` must pass :func:`history_file`. The history is appended to a copy, renamed over
    it when complete (:func:`flowsim.files.replaced_atomically`): an error, a crash or Ctrl-C
    leaves the history as it was, never half-appended; a disk that fills up is an
    :class:`OSError` (``ENOSPC``) naming the history. Checks appending to one history at
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
                appended = [(None if force else _repeated(f, report, options))
                            or _append_check(f, report, run_time, label, options) for report in reports]
    except (OSError, RuntimeError) as err:
        # HDF5 reports a failed write as OSError or RuntimeError, the errno only in its text,
        # over lines that name the hidden temporary file: said in one line naming the history.
        text = str(err)
        if getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or any(
            sign in text for sign in ("errno = 28", "errno = 122", "No space left", "Disk quota exceeded")
        ):
            raise OSError(errno.ENOSPC, "the disk filled up while writing the check history; nothing was added to it",
                          str(path)) from None
        if isinstance(err, RuntimeError):
            raise
        raise InputError(f"{path}: cannot write the check history: {text.splitlines()[0] if text else err!r}") from None
    return appended


def _run_time(report: CheckReport, given: datetime.datetime | None) -> tuple[float, str]:
    """When ``report``'s run ran (Unix time) and what says so (``run_time_from``)."""
    if given is not None:
        when, source = given, "date"
    elif report.log.started is not None:
        when, source = datetime.datetime.fromisoformat(report.log.started), "log"
    else:
        when, source = datetime.datetime.fromisoformat(report.checked_at), "check"
    return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).timestamp(), source


@dataclass(frozen=True)
class PastChange:
    """Sizes of a run whose measured busbw moved beyond the check's threshold against an
    earlier check of the same cluster (:func:`append_checks`): a band of consecutive sizes
    (of one root, type and reduction) that all got slower, or all faster.

    ``check_id`` and ``run_time_unix`` are the earlier check's; ``now_GBps`` and
    ``then_GBps`` the two runs' out-of-place busbw at ``size_bytes``, the band's largest size.
    """

    slower: bool
    check_id: int
    run_time_unix: float
    sizes: tuple[int, ...]
    size_bytes: int
    now_GBps: float
    then_GBps: float

    def __str__(self) -> str:
        day = datetime.datetime.fromtimestamp(self.run_time_unix, datetime.UTC).date().isoformat()
        return (f"{'slower' if self.slower else 'faster'} than check {self.check_id} of {day} at "
                f"{size_range(self.sizes)}: {self.now_GBps:.1f} against {self.then_GBps:.1f} GB/s at "
                f"{format_size(self.size_bytes)}")


@dataclass(frozen=True)
class AppendedCheck:
    """A check :func:`append_checks` appended: its id, the earlier check alike it was compared
    with (None where the history holds none) and the sizes that moved against it; or, where
    ``repeated``, the check already in the history of the same run checked alike, in place of
    which nothing was appended."""

    check_id: int
    compared_with: int | None = None
    changes: tuple[PastChange, ...] = ()
    repeated: bool = False

    @property
    def slower(self) -> tuple[PastChange, ...]:
        """The bands of sizes slower than the earlier check."""
        return tuple(change for change in self.changes if change.slower)


def _column(group, name: str, kind: str) -> np.ndarray:
    """Column ``name`` of the open history's ``group`` (``checks`` or ``rows``), its older
    value where the history predates it."""
    if name in group:
        return group[name].asstr()[()] if kind == "str" else group[name][()]
    return _older(group, name, kind, group["check_id"].shape[0])


_BLOCKLESS = (-1, "", "")
# The trend plot's legend: at most this many rows to a column, each this tall (inches, at
# matplotlib's "small" font).
_LEGEND_ROWS = 24
_LEGEND_ROW_INCHES = 0.2  # the root, type and reduction of rows written before version 3


def _compared(f, report: CheckReport, ran: float, options: str) -> tuple[int | None, tuple[PastChange, ...]]:
    """The latest check in the open history ``f`` alike ``report``'s (its run ran before
    ``ran``, same binary, system, shape and ``options``) and the bands of sizes whose busbw
    moved against it beyond the report's threshold; (None, ()) where there is none."""
    if "checks" not in f or "check_id" not in f["checks"] or not f["checks"]["check_id"].shape[0]:
        return None, ()
    checks = f["checks"]
    columns = {name: _column(checks, name, _CHECK_COLUMNS[name]) for name in
               ("check_id", "run_time_unix", "binary", "system", "nodes", "ranks", "options", "cluster_sha256")}
    alike = ((columns["run_time_unix"] < ran) & (columns["binary"] == report.log.binary)
             & (columns["system"] == report.system) & (columns["nodes"] == report.nodes)
             & (columns["ranks"] == report.log.n_ranks) & (columns["options"] == options)
             & _same_cluster(columns["cluster_sha256"], report))
    if not alike.any():
        return None, ()
    # The latest run; of two that ran at once, the later check.
    latest = max(np.flatnonzero(alike), key=lambda k: (columns["run_time_unix"][k], k))
    past_id = int(columns["check_id"][latest])
    rows = f["rows"]
    these = np.flatnonzero(rows["check_id"][()] == past_id)
    past: dict[tuple[int, int, str, str], int] = {}
    for index, size, root, dtype, redop in zip(
        these.tolist(), rows["size_bytes"][()][these].tolist(), _column(rows, "root", "i8")[these].tolist(),
        _column(rows, "dtype", "str")[these].tolist(), _column(rows, "redop", "str")[these].tolist(), strict=True,
    ):
        past[(size, root, dtype, redop)] = index
    ratio = rows["ratio"][()]
    out, inp = rows["measured_busbw_out_GBps"][()], rows["measured_busbw_in_GBps"][()]
    changes: list[PastChange] = []
    band: list[tuple[int, float, float]] = []  # the band being read: (size, now, then)
    direction = None
    block = None

    def close() -> None:
        if band and direction is not None:
            size, now, then = band[-1]
            changes.append(PastChange(direction, past_id, float(columns["run_time_unix"][latest]),
                                      tuple(b[0] for b in band), size, now, then))

    for r in report.rows:
        key = (-1 if r.root is None else r.root, r.dtype or "", r.redop or "")
        k = past.get((r.size_bytes, *key), past.get((r.size_bytes, *_BLOCKLESS)))
        moved = None
        if r.predicted_time_us is not None and k is not None and np.isfinite(ratio[k]) and out[k] > 0 and inp[k] > 0:
            low, high = 1.0 - report.threshold, 1.0 + report.threshold
            if r.measured_busbw_out_GBps < low * out[k] and r.measured_busbw_in_GBps < low * inp[k]:
                moved = True
            elif r.measured_busbw_out_GBps > high * out[k] and r.measured_busbw_in_GBps > high * inp[k]:
                moved = False
        if moved != direction or key != block:
            close()
            band, direction, block = [], moved, key
        if moved is not None:
            band.append((r.size_bytes, r.measured_busbw_out_GBps, float(out[k])))
    close()
    return past_id, tuple(changes)


def _same_cluster(cluster_sha256: np.ndarray, report: CheckReport) -> np.ndarray:
    """Which checks ran on ``report``'s cluster as built: of one system name, two files with
    other NICs (or one cluster with another switch or oversubscription) are not alike. A
    check that predates the column (empty) is taken as alike, as it was."""
    return (cluster_sha256 == report.cluster_sha256) | (cluster_sha256 == "") | (report.cluster_sha256 == "")


def _repeated(f, report: CheckReport, options: str) -> AppendedCheck | None:
    """The check of ``report``'s run in the open history ``f`` made alike, ``repeated``; None
    where there is none."""
    if "checks" not in f or "check_id" not in f["checks"]:
        return None
    checks = f["checks"]
    same = _column(checks, "log_sha256", "str") == report.log.sha256
    for name, value in (("system", report.system), ("nodes", report.nodes), ("threshold", report.threshold),
                        ("algorithm", report.algorithm), ("protocol", report.protocol), ("figure", report.figure),
                        ("fabric", report.fabric), ("options", options)):
        same &= _column(checks, name, _CHECK_COLUMNS[name]) == value
    same &= _same_cluster(_column(checks, "cluster_sha256", "str"), report)
    found = np.flatnonzero(same & bool(report.log.sha256))
    return None if not found.size else AppendedCheck(int(checks["check_id"][found[0]]), repeated=True)


def _append_check(f, report: CheckReport, run_time: datetime.datetime | None, label: str,
                  options: str) -> AppendedCheck:
    """Append one check and its rows to the open history ``f``, and compare its run with the
    latest earlier check alike (:func:`_compared`)."""
    log = report.log
    f.attrs["format"] = _HISTORY_FORMAT
    f.attrs["version"] = _HISTORY_VERSION
    checks = f.require_group("checks")
    check_id = int(checks["check_id"][-1]) + 1 if "check_id" in checks and checks["check_id"].shape[0] else 0
    when = datetime.datetime.fromisoformat(report.checked_at).timestamp()
    ran, ran_from = _run_time(report, run_time)
    compared_with, changes = _compared(f, report, ran, options)
    _append(
        checks,
        _CHECK_COLUMNS,
        {
            "check_id": [check_id],
            "time_unix": [when],
            "run_time_unix": [ran],
            "run_time_from": [ran_from],
            "label": [label],
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
            "avg_busbw_GBps": [np.nan if log.avg_busbw_GBps is None else log.avg_busbw_GBps],
            "n_fast": [len(report.fast)],
            "warnings": ["\n".join(report.warnings)],
            "nccl_version": [report.nccl_version],
            "nccl": [report.nccl],
            "flowsim_version": [__version__],
            "run_index": [log.run[0]],
            "run_count": [log.run[1]],
            "options": [options],
            "log_sha256": [log.sha256],
            "cluster_sha256": [report.cluster_sha256],
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
            "ratio": [
                np.nan if r.ratio_out is None or r.ratio_in is None else min(r.ratio_out, r.ratio_in) for r in rows
            ],
            "flagged": [r.flagged for r in rows],
            "fast": [r.fast for r in rows],
            "root": [-1 if r.root is None else r.root for r in rows],
            "dtype": [r.dtype or "" for r in rows],
            "redop": [r.redop or "" for r in rows],
            "algorithm": [r.algorithm or "" for r in rows],
            "protocol": [r.protocol or "" for r in rows],
            "channels": [-1 if r.channels is None else r.channels for r in rows],
            "flag": [",".join(name for name, on in (("SHORT", r.short), ("FAST", r.fast), ("WRONG", r.wrong)) if on)
                     for r in rows],
        },
    )
    return AppendedCheck(check_id, compared_with, changes)


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

    def to_pandas(self) -> dict:
        """The ``checks`` and ``rows`` tables as pandas DataFrames (needs pandas), under those
        keys; ``checks`` with ``run_time`` and ``checked_at``, the two Unix times as UTC
        timestamps. Rows belong to checks by ``check_id``."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("History.to_pandas needs pandas: pip install pandas") from None
        checks = pd.DataFrame(self.checks)
        checks["run_time"] = pd.to_datetime(checks["run_time_unix"], unit="s", utc=True)
        checks["checked_at"] = pd.to_datetime(checks["time_unix"], unit="s", utc=True)
        return {"checks": checks, "rows": pd.DataFrame(self.rows)}

    def describe(self, top: int = 10) -> str:
        """A summary for ``flowsim inspect``: a line per check (the latest ``top``) with its
        run's time and label, log, binary, system, shape and flagged sizes, then the command
        that draws the trend."""
        checks, rows = self.checks, self.rows
        n = self.n_checks
        lines = [f"{self.path}: flowsim check history, {n} check(s)"]
        if n:
            first, last = (datetime.datetime.fromtimestamp(float(t), datetime.UTC).strftime("%Y-%m-%d %H:%M")
                           for t in (checks["run_time_unix"].min(), checks["run_time_unix"].max()))
            lines[0] += f", runs of {first} to {last} UTC"
        shown = range(max(0, n - top), n)
        if n > top:
            lines.append(f"the latest {top} (inspect --top N shows more):")
        for k in shown:
            check_id = int(checks["check_id"][k])
            mine = rows["check_id"] == check_id
            flags = [flag for value in rows["flag"][mine] for flag in value.split(",") if flag]
            counts = ", ".join(f"{flags.count(name)} {name}" for name in ("SHORT", "FAST", "WRONG") if name in flags)
            predicted = int(np.isfinite(rows["ratio"][mine]).sum())
            verdict = f"{int(checks['n_flagged'][k])} of {predicted} sizes flagged" + (f" ({counts})" if counts else "")
            when = datetime.datetime.fromtimestamp(float(checks["run_time_unix"][k]), datetime.UTC)
            label = f" [{checks['label'][k]}]" if checks["label"][k] else ""
            index, count = int(checks["run_index"][k]), int(checks["run_count"][k])
            run = f" (run {index} of {count})" if count > 1 else ""
            lines.append(f"  check {check_id}: {when:%Y-%m-%d %H:%M}{label} {checks['source'][k]}{run}: "
                         f"{checks['binary'][k]} on {checks['system'][k]}, {int(checks['ranks'][k])} ranks on "
                         f"{int(checks['nodes'][k])} node(s): {verdict}")
        binaries = list(dict.fromkeys(checks["binary"].tolist()))
        for binary in binaries:
            collective = f" --collective {binary}" if len(binaries) > 1 else ""
            lines.append(f"draw it: flowsim check --history {self.path} --plot trend.png{collective}")
        return "\n".join(lines)


def is_history_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an HDF5 file whose root says it is a check history (False for
    anything else, unreadable files included)."""
    return hdf5_format(path) == _HISTORY_FORMAT


def read_history(path: str | os.PathLike) -> History:
    """Read a history written by :func:`append_history` (strings as ``str`` objects)."""
    h5py = _h5py()
    path = Path(path)
    if not path.is_file():
        what = f"is {file_kind(path.stat().st_mode)}, not a" if path.exists() else "no such"
        raise InputError(f"{path}: {what} check history file")
    if path.stat().st_size == 0:
        # An empty file takes checks (history_file), but holds none yet: not HDF5's "file
        # signature not found".
        raise InputError(f"{path}: the history holds no checks (an empty file)")
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != _HISTORY_FORMAT:
                raise InputError(f"{path}: not a flowsim check history (no format attribute {_HISTORY_FORMAT!r})")
            tables = []
            for group, columns in (("checks", _CHECK_COLUMNS), ("rows", _ROW_COLUMNS)):
                missing = [c for c in columns if c not in f[group] and c not in _ADDED_COLUMNS]
                if missing:
                    raise InputError(f"{path}: group {group!r} lacks datasets {', '.join(missing)}")
                n = f[group]["check_id"].shape[0]
                tables.append(
                    {
                        c: (f[group][c].asstr()[()] if kind == "str" else f[group][c][()])
                        if c in f[group]
                        # An older history: the column's value for checks written before it.
                        else _older(f[group], c, kind, n)
                        for c, kind in columns.items()
                    }
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
    nodes: int | None = None,
    sizes: Sequence[int] | None = None,
) -> Path:
    """Plot measured / predicted busbw over the runs' time, one line per message size (and per block of
    an ``-r -1``, ``-d all`` or ``-o all`` run: its root, type and reduction), and save it.

    Parameters
    ----------
    history : History or path
    output : path
        Image file (format from the suffix: ``.png``, ``.svg``, ``.pdf``).
    binary, system : str, optional
        Keep checks of this nccl-tests binary / system (a preset's or system's name, as
        :func:`~flowsim.presets.system_name` reads names) only; by default the binary of the
        latest check.
    nodes : int, optional
        Keep checks of this many nodes only. Checks of several shapes (nodes and ranks) are
        drawn in a panel each, a size in the same colour in all.
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
    if not isinstance(history, History):
        history = read_history(history)
    _trend_figure(history, binary, system, nodes, sizes).savefig(output, dpi=120)
    return output


def _trend_figure(history: History, binary: str | None, system: str | None, nodes: int | None,
                  sizes: Sequence[int] | None):
    """:func:`plot_history`'s figure, of ``history`` read."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    checks = history.checks
    if history.n_checks == 0:
        raise InputError(f"{history.path}: the history holds no checks")
    binary = checks["binary"][-1] if binary is None else binary
    keep = checks["binary"] == binary
    if system is not None:
        wanted = system_name(system)
        keep &= np.array([system_name(str(name)) == wanted for name in checks["system"]], dtype=bool)
    if nodes is not None:
        keep &= checks["nodes"] == nodes
    if not keep.any():
        where = "".join(f" {word} {value}" for word, value in (("on", system), ("with nodes", nodes)) if value)
        raise InputError(f"{history.path}: no check of {binary}{where}")
    when = dict(zip(checks["check_id"][keep].tolist(), checks["run_time_unix"][keep].tolist(), strict=True))
    thresholds = checks["threshold"][keep]
    rows = history.rows
    selected = np.isin(rows["check_id"], list(when)) & np.isfinite(rows["ratio"])
    if sizes is not None:
        selected &= np.isin(rows["size_bytes"], list(sizes))
    if not selected.any():
        # An empty plot with a 0-1 time axis said nothing of why.
        asked = "" if sizes is None else " among the sizes asked for"
        raise InputError(f"{history.path}: no size of the {int(keep.sum())} check(s) of {binary} was predicted{asked} "
                         "(check --min-bytes): nothing to draw")
    # Each shape of cluster (nodes, ranks) in its own panel: one size's busbw on 1 and on 10
    # servers are two trends, never one line.
    shape_of = {int(c): (int(n), int(r)) for c, n, r in zip(checks["check_id"][keep], checks["nodes"][keep],
                                                            checks["ranks"][keep], strict=True)}
    shapes = sorted(set(shape_of.values()))
    lines = _history_lines(rows, selected)
    # The legend beside the axes (a line per size, the flagged mark and the two flag bounds),
    # in as many columns as keep it within the figure's height; a figure too short for it had
    # its axes collapse to nothing (matplotlib's "constrained_layout not applied" warning)
    # and the legend cut off.
    n_entries = len(lines) + 3
    n_columns = math.ceil(n_entries / _LEGEND_ROWS)
    height = max(1.0 + (4.0 if len(shapes) == 1 else 3.0) * len(shapes),
                 0.8 + _LEGEND_ROW_INCHES * math.ceil(n_entries / n_columns))
    fig = Figure(figsize=(8.0 + 1.2 * n_columns, height), layout="constrained")
    axes = fig.subplots(len(shapes), 1, sharex=True, squeeze=False)[:, 0]
    handles = {}
    for ax, shape in zip(axes, shapes, strict=True):
        for i, (label, these) in enumerate(lines):
            these = these[[shape_of[int(c)] == shape for c in rows["check_id"][these]]]
            if not these.size:
                continue
            # In the order the runs ran: a log backfilled after later ones goes where it belongs.
            these = these[np.argsort([when[c] for c in rows["check_id"][these]], kind="stable")]
            # An object array of datetimes, as matplotlib makes of a list (its stubs take arrays only).
            times = np.array([datetime.datetime.fromtimestamp(when[c], datetime.UTC) for c in rows["check_id"][these]])
            # Past ten lines the colours repeat, with another marker; a size keeps its own in every panel.
            (handles[label],) = ax.plot(times, rows["ratio"][these], marker="os^Dv"[i // 10 % 5], color=f"C{i % 10}",
                                        label=label)
            # A flagged point is marked: the dashed bounds are the latest check's threshold, not
            # necessarily the one each point was flagged by.
            flagged = rows["flagged"][these]
            if flagged.any():
                handles["flagged"] = ax.scatter(times[flagged], rows["ratio"][these][flagged], marker="x", color="red",
                                                s=60, zorder=3)
        ax.axhline(1.0, color="0.5", linewidth=1)
        handles["flag below"] = ax.axhline(1.0 - float(thresholds[-1]), color="0.25", linestyle="--", linewidth=1)
        handles["flag above"] = ax.axhline(1.0 + float(thresholds[-1]), color="0.25", linestyle=":", linewidth=1)
        ax.set_ylabel("measured / predicted busbw")
        if len(shapes) > 1:
            ax.set_title(f"{shape[1]} ranks on {shape[0]} node(s)", fontsize="medium")
    axes[-1].set_xlabel("run time (UTC)")
    fig.suptitle(f"{binary}: {int(keep.sum())} check(s) from {Path(history.path).name}")
    # Beside the axes, where it hides no line (a sweep's sizes fill the plot's height).
    marks = ("flagged", "flag below", "flag above")  # after the sizes, wherever a panel met them
    order = [name for name in handles if name not in marks] + [name for name in marks if name in handles]
    fig.legend([handles[name] for name in order], order, fontsize="small", loc="outside right upper", ncols=n_columns)
    # Dates as short as the runs' span allows (runs seconds apart read "55:05.000000" otherwise).
    locator = AutoDateLocator()
    axes[-1].xaxis.set_major_locator(locator)
    axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator))
    return fig


def _history_lines(rows: Mapping[str, np.ndarray], selected: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The trend plot's lines: one per message size and block of rows (the root, data type
    and reduction of an ``-r -1``, ``-d all`` or ``-o all`` run, which print a block of sizes
    each), with its label (the size, and the block's where the rows hold several) and its
    rows, in order of size and block.

    Rows written before version 3 stored no block (root -1, no type, no reduction): where a
    size has one block otherwise, they join its line, which continues theirs after the
    upgrade; where it has several, they keep a line of their own."""
    columns = [rows[name][selected].tolist() for name in ("size_bytes", "root", "dtype", "redop")]
    found = {(int(size), int(root), str(dtype), str(redop)) for size, root, dtype, redop in zip(*columns, strict=True)}
    blocks: dict[int, set[tuple[int, str, str]]] = {}
    for size, root, dtype, redop in found:
        blocks.setdefault(size, set()).add((root, dtype, redop))
    joined = {size: next(iter(these - {_BLOCKLESS})) for size, these in blocks.items()
              if _BLOCKLESS in these and len(these - {_BLOCKLESS}) == 1}
    keys = sorted(found - {(size, *_BLOCKLESS) for size in joined})
    several = len({key[1:] for key in keys}) > 1
    lines = []
    for size, root, dtype, redop in keys:
        these = selected & (rows["size_bytes"] == size) & (rows["root"] == root) & (rows["dtype"] == dtype) & (
            rows["redop"] == redop)
        if joined.get(size) == (root, dtype, redop):
            these |= selected & (rows["size_bytes"] == size) & (rows["root"] == -1) & (rows["dtype"] == "") & (
                rows["redop"] == "")
        named = " ".join(part for part in (dtype, redop, f"root {root}" if root >= 0 else "") if part)
        label = f"{_size_label(size)} {named}" if several and named else _size_label(size)
        lines.append((label, np.flatnonzero(these)))
    return lines


def _size_label(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)
