"""What a sweep keeps: the journal of finished runs (one JSON line each, so that a killed
sweep resumes) and the HDF5 results table rebuilt from it."""

from __future__ import annotations

import datetime
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import flowsim
from flowsim.errors import InputError
from flowsim.files import hdf5_format, replaced_atomically
from flowsim.sweep.runs import RunRecord
from flowsim.sweep.spec import Sweep, canonical_json

__all__ = ["ERRORS_SHOWN", "FORMAT", "JournalWriter", "SweepTable", "is_results_file", "journal_path", "read_journal",
           "read_results", "write_results"]


#: ``format`` attribute of a results file.
FORMAT = "flowsim-sweep-results"

#: Failed runs whose error a summary spells out (``flowsim sweep``, ``flowsim inspect``); the
#: table's ``error`` column holds them all.
ERRORS_SHOWN = 3

def journal_path(output: str | os.PathLike) -> Path:
    """The journal next to a results file: ``results.h5`` -> ``results.h5.journal``."""
    output = Path(output)
    return output.with_name(output.name + ".journal")


def read_journal(path: str | os.PathLike) -> dict[str, RunRecord]:
    """Records of a journal by key (a later line for a key wins); {} if there is no file.

    A last line without its newline (a write cut short) is ignored.

    Raises
    ------
    InputError
        When a complete line is not a journal record.
    """
    path = Path(path)
    if not path.exists():
        return {}
    records = {}
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    for number, line in enumerate(lines[:-1], start=1):
        if not line:
            continue
        try:
            row = json.loads(line)
            record = RunRecord(row["key"], row["params"], row["status"], row["error"], row["metrics"], row["wall_s"],
                               str(row.get("ran_on", "")))
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}: line {number}: not a sweep journal record ({err})") from None
        records[record.key] = record
    return records


class JournalWriter:
    """Appends records as JSON lines; first drops a torn last line.

    Every append is flushed to the operating system at once, so killing the sweep (even
    with SIGKILL) loses no appended record. ``fsync`` (against a machine crash) runs at most
    every ``fsync_interval_s`` and on close: one fsync per record (about 2 ms on a virtual
    disk) would double the time of a small run.
    """

    def __init__(self, path: Path, fsync_interval_s: float = 0.2) -> None:
        self.file = open(path, "a+b")  # noqa: SIM115 - closed by close()
        self.file.seek(0)
        data = self.file.read()
        if data and not data.endswith(b"\n"):
            self.file.truncate(data.rfind(b"\n") + 1)
        self.fsync_interval_s = fsync_interval_s
        self.synced = time.monotonic()

    def append(self, records: Sequence[RunRecord]) -> None:
        self.file.write(b"".join(record.to_json().encode() + b"\n" for record in records))
        self.file.flush()
        if time.monotonic() - self.synced >= self.fsync_interval_s:
            self.sync()

    def sync(self) -> None:
        os.fsync(self.file.fileno())
        self.synced = time.monotonic()

    def close(self) -> None:
        self.sync()
        self.file.close()


def _column(values: list) -> np.ndarray:
    """Values of one parameter as a typed column; mixed or structured values, and integers
    int64 (or, among floats, float64) cannot hold exactly, as JSON text."""
    if all(isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.bool_)
    if all(isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63 for v in values):
        return np.array(values, dtype=np.int64)
    if all(isinstance(v, float) or isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 2**53
           for v in values):
        return np.array(values, dtype=np.float64)
    return np.array([v if isinstance(v, str) else canonical_json(v) for v in values], dtype=object)


def _table(sweep: Sweep, records: Mapping[str, RunRecord]) -> dict[str, np.ndarray]:
    """Columns of the finished runs, in index order; parameter dtypes follow all runs."""
    rows = [run for run in sweep.runs if run.key in records]
    done = np.array([run.key in records for run in sweep.runs], dtype=bool)
    columns: dict[str, np.ndarray] = {
        "index": np.array([run.index for run in rows], dtype=np.int64),
        "key": np.array([run.key for run in rows], dtype=object),
    }
    for path in sweep.parameters:
        columns[path] = _column([run.params[path] for run in sweep.runs])[done]
    for name in sweep.metrics:
        columns[name] = np.array([records[run.key].metrics.get(name, math.nan) for run in rows], dtype=np.float64)
    columns["status"] = np.array([records[run.key].status for run in rows], dtype=object)
    columns["error"] = np.array([records[run.key].error for run in rows], dtype=object)
    columns["wall_s"] = np.array([records[run.key].wall_s for run in rows], dtype=np.float64)
    if any(records[run.key].ran_on for run in rows):
        columns["ran_on"] = np.array([records[run.key].ran_on for run in rows], dtype=object)
    return columns


def write_results(path: str | os.PathLike, sweep: Sweep, records: Mapping[str, RunRecord]) -> Path:
    """Write the table of ``sweep``'s finished runs to HDF5, atomically.

    Parameters
    ----------
    path : str or path-like
        Target file; replaced if it exists.
    sweep : Sweep
    records : mapping
        Key -> :class:`RunRecord`; runs of ``sweep`` without a record are left out.

    Returns
    -------
    Path

    Notes
    -----
    Layout: group ``/runs`` holds one dataset per column, one row per finished run in
    index order: ``index`` (int64), ``key``, one per parameter path (bool, int64, float64
    or UTF-8 text; arrays and tables as JSON text), one per metric (float64, NaN for a
    failed run), ``status``, ``error`` (UTF-8) and ``wall_s`` (float64), and for a time sweep
    on a backend ``ran_on`` (UTF-8: ``cpu`` or ``cuda``, a batch; ``engine``, the CPU engine). Its ``columns``
    attribute lists them in order. File attributes: ``format``, ``flowsim_version``,
    ``created_utc``, ``sweep_source``, ``sweep_text``, ``scenario_text``, ``n_runs`` (in the
    spec), ``parameters`` and ``metrics`` (JSON arrays). The file is written whole or not at
    all (:func:`flowsim.files.replaced_atomically`).
    """
    target = Path(path)
    columns = _table(sweep, records)
    with replaced_atomically(target) as tmp:
        with h5py.File(tmp, "w") as root:
            root.attrs.update({
                "format": FORMAT,
                "flowsim_version": flowsim.__version__,
                "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "sweep_source": sweep.source,
                "sweep_text": sweep.text,
                "scenario_text": sweep.scenario_text,
                "n_runs": len(sweep.runs),
                "parameters": json.dumps(sweep.parameters),
                "metrics": json.dumps(sweep.metrics),
            })
            group = root.create_group("runs")
            group.attrs["columns"] = json.dumps(list(columns))
            for name, values in columns.items():
                dtype = h5py.string_dtype("utf-8") if values.dtype == object else values.dtype
                group.create_dataset(name, data=values, dtype=dtype)
    return target


@dataclass(frozen=True)
class SweepTable:
    """A results file read back: ``columns`` maps each column name to its array (text as
    ``str`` objects), in the file's order; ``attrs`` holds the file attributes."""

    columns: dict[str, np.ndarray]
    attrs: dict[str, Any]

    def __len__(self) -> int:
        return len(self.columns["index"])

    def to_pandas(self):
        """The table as a :class:`pandas.DataFrame` (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.columns)

    def describe(self, rows: int = 10, *, path: str | os.PathLike = "RESULTS.h5") -> str:
        """A readable summary for ``flowsim inspect``: provenance, runs and failures, the first
        ``rows`` rows (parameters, metrics, status) and the first errors."""
        params = json.loads(self.attrs.get("parameters", "[]"))
        metrics = json.loads(self.attrs.get("metrics", "[]"))
        status = self.columns["status"]
        failed = np.flatnonzero(status != "ok")
        lines = [
            f"sweep {self.attrs.get('sweep_source', '?')}: flowsim {self.attrs.get('flowsim_version', '?')}, "
            f"written {self.attrs.get('created_utc', '?')}",
            f"runs: {len(self)} of {self.attrs.get('n_runs', len(self))} finished ({len(self) - failed.size} ok, "
            f"{failed.size} failed)",
            f"parameters: {', '.join(params)}",
            f"metrics: {', '.join(metrics)}",
        ]
        names = ["index", *params, *metrics, "status"]
        shown = min(rows, len(self))
        cells = [[_cell(self.columns[name][i]) for name in names] for i in range(shown)]
        widths = [max([len(name), *(len(row[k]) for row in cells)]) for k, name in enumerate(names)]
        lines.append("  ".join(name.rjust(width) for name, width in zip(names, widths, strict=True)))
        lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
        if shown < len(self):
            lines.append(f"... {len(self) - shown} more rows: flowsim.sweep.read_results({str(path)!r}).to_pandas() "
                         "reads the whole table")
        for i in failed[:ERRORS_SHOWN]:
            lines.append(f"error of run {int(self.columns['index'][i])}: {self.columns['error'][i]}")
        if failed.size > ERRORS_SHOWN:
            lines.append(f"... {failed.size - ERRORS_SHOWN} more errors in the 'error' column")
        return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return str(value)


def is_results_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an HDF5 file whose root says it is a sweep results table (False for
    anything else, unreadable files included)."""
    return hdf5_format(path) == FORMAT


def read_results(path: str | os.PathLike) -> SweepTable:
    """Read a results file written by :func:`write_results`.

    Raises
    ------
    InputError
        When the file cannot be opened, is not a sweep results file or lacks a part of one.
    """
    path = Path(path)
    try:
        root = h5py.File(path, "r")
    except OSError as err:
        raise InputError(f"{path}: cannot open the results: {err}") from None
    with root:
        if root.attrs.get("format") != FORMAT:
            raise InputError(f"{path}: not a flowsim sweep results file (format {root.attrs.get('format')!r})")
        try:
            group = root["runs"]
            columns = {}
            for name in json.loads(group.attrs["columns"]):
                dataset = group[name]
                columns[name] = dataset.asstr()[()] if h5py.check_string_dtype(dataset.dtype) else dataset[()]
        except (KeyError, ValueError, TypeError, OSError) as err:  # a group, column or list missing or unreadable
            raise InputError(f"{path}: damaged sweep results table: {err}") from None
        missing = [name for name in ("index", "key", "status", "error") if name not in columns]
        if missing:
            raise InputError(f"{path}: damaged sweep results table: no {missing[0]!r} column")
        attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in root.attrs.items()}
    return SweepTable(columns, attrs)
