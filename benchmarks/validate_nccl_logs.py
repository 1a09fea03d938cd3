"""flowsim's predictions against real nccl-tests logs, by message-size band.

Run from the repository root::

    python benchmarks/validate_nccl_logs.py [--plot DIR] [--markdown] [--log FILE ...]

For every log listed in ``data/validation/nccl_tests/index.json`` (verbatim output of
nccl-tests on real clusters; the directory's README.md cites each one's public source), the
log is parsed and every row predicted through :func:`flowsim.check.check_log`, the path
``flowsim check`` takes, on the index's ``system`` where it names one (a cloud system such as
``gcp-a3-mega``), else the preset of its GPU (``dgx-a100``, ``dgx-h100`` or ``gb200-nvl72``),
with the index's nodes and GPUs per node. The index's NCCL environment (``NCCL_ALGO`` ...) is passed on as
``nccl_env`` where the prediction API takes that keyword, and left out where it does not (a
keyword check, so a newer flowsim uses it without a change here). NCCL's choice follows the
constants of the index's ``nccl_version`` (the version the log prints) as ``flowsim check``
follows a log's: that version where flowsim has it, else the newest older one it has, else
(``null``) the default; the table's ``nccl`` column says which. Printed per log: the error
of the prediction (predicted / measured busbw - 1, out-of-place column), median and worst
``|error|``, over sizes below 64 KiB, from 64 KiB to 1 MiB, and from 1 MiB; and the sizes
``flowsim check`` flags at its default threshold.

A last row pools every row of the healthy logs shown (where there are two or more): the error
a user meets on a log of theirs, and how many of those rows ``flowsim check`` flags.

``--plot DIR`` writes one PNG per log (busbw against size: measured points, predicted line,
log x axis); ``--markdown`` prints the table as Markdown, for the README ("Real nccl-tests
logs").
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flowsim.check import CheckReport, check_log, parse_nccl_log
from flowsim.check.report import RowCheck, error_by_band
from flowsim.collectives import collective_time
from flowsim.errors import InputError
from flowsim.formatting import format_size
from flowsim.systemfile import resolve_system

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "data" / "validation" / "nccl_tests"

#: Bands of the validation table: latency-bound, in between, bandwidth-bound.
BANDS: tuple[tuple[str, int, float], ...] = (
    ("< 64 KiB", 0, 64 << 10),
    ("64 KiB - 1 MiB", 64 << 10, 1 << 20),
    (">= 1 MiB", 1 << 20, math.inf),
)

# The index's GPU -> flowsim preset.
_PRESETS = {"A100": "dgx-a100", "H100": "dgx-h100", "GB200": "gb200-nvl72"}


@dataclass(frozen=True)
class Entry:
    """One log of the index: its file, cluster, NCCL environment and GPU (as the index says)."""

    file: str
    system: str
    nodes: int
    gpus_per_node: int
    env: dict[str, str]
    healthy: bool
    nccl_version: str | None = None
    gpu: str = ""


def entries(directory: Path = LOGS) -> list[Entry]:
    """The index's logs, in its order."""
    listed = []
    for item in json.loads((directory / "index.json").read_text()):
        # A cloud system or a system file where the index names one, else the DGX of the log's GPU.
        system = item.get("system") or next((preset for gpu, preset in _PRESETS.items() if gpu in item["gpu"]), None)
        if system is None:
            raise InputError(f"{item['file']}: no flowsim preset for GPU {item['gpu']!r}")
        listed.append(
            Entry(item["file"], system, item["nodes"], item["gpus_per_node"], dict(item["env"]), item["healthy"],
                  item.get("nccl_version"), item["gpu"])
        )
    return listed


def prediction_options(env: dict[str, str]) -> dict:
    """Keywords for the prediction: the ``NCCL_*`` variables as ``nccl_env`` where
    ``collective_time`` takes it (the others, ``CUDA_DEVICE_ORDER`` say, are not NCCL's)."""
    nccl = {key: value for key, value in env.items() if key.startswith("NCCL_")}
    return {"nccl_env": nccl} if "nccl_env" in inspect.signature(collective_time).parameters else {}


def check_entry(entry: Entry, directory: Path = LOGS, *, sizes: Sequence[int] | None = None) -> CheckReport:
    """``flowsim check`` of one log with its index's cluster: every row predicted, or only
    the rows of ``sizes``."""
    log = parse_nccl_log(directory / entry.file, nodes=entry.nodes, gpus_per_node=entry.gpus_per_node)
    # The index's version, as check_log takes the one a log prints.
    log = replace(log, nccl_version=entry.nccl_version)
    if sizes is not None:
        wanted = set(sizes)
        log = _only_rows(log, wanted)
    # A shipped cloud system's spec, a system file of the repository's (its path from the
    # repository's root), or the preset's name.
    system = resolve_system(str(ROOT / entry.system) if entry.system.endswith(".toml") else entry.system)[0]
    return check_log(log, system=system, nodes=entry.nodes, **prediction_options(entry.env))


def _only_rows(log, sizes: set[int]):
    return replace(log, rows=tuple(r for r in log.rows if r.size_bytes in sizes))


def _percent(x: float) -> str:
    return f"{100 * x:+.0f}%"


def nccl_cell(report: CheckReport) -> str:
    """The constants' version, and ``(log)`` where the log's (index's) version chose them."""
    return f"{report.nccl_version}{' (log)' if '(log' in report.nccl else ''}"


def band_cells(rows: Sequence[RowCheck]) -> list[str]:
    """Per band of :data:`BANDS`: ``median / worst`` |error| of ``rows``, or ``-`` without any."""
    found = {b.label: b for b in error_by_band(rows, BANDS)}
    cells = []
    for label, _, _ in BANDS:
        band = found.get(label)
        cells.append("-" if band is None else f"{100 * band.median_abs:.0f}% / {_percent(band.worst)} ({band.n_sizes})")
    return cells


def flagged_cell(report: CheckReport) -> str:
    """Flagged sizes, grouped by side."""
    parts = []
    for name, rows in (("SHORT", report.short), ("FAST", report.fast)):
        if rows:
            sizes = [r.size_bytes for r in rows]
            parts.append(f"{len(rows)} {name} ({format_size(min(sizes))}-{format_size(max(sizes))})")
    return ", ".join(parts) or "none"


def plot(report: CheckReport, entry: Entry, directory: Path) -> Path:
    """busbw against size: measured points (out-of-place), predicted line; log x axis."""
    from matplotlib.figure import Figure

    rows = [r for r in report.rows if r.predicted_busbw_GBps is not None]
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    sizes = [r.size_bytes for r in rows]
    ax.plot(sizes, [r.predicted_busbw_GBps for r in rows], color="C0", label=f"flowsim ({report.algorithm})")
    ax.plot(sizes, [r.measured_busbw_out_GBps for r in rows], "o", color="C3", markersize=4, label="measured")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (B)")
    ax.set_ylabel("busbw (GB/s)")
    health = "" if entry.healthy else " (degraded cluster)"
    ax.set_title(f"{entry.file.removesuffix('.txt')}{health}", fontsize=8)
    ax.legend(fontsize="small", loc="best")
    ax.grid(True, linewidth=0.3)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (Path(entry.file).stem + ".png")
    fig.savefig(path, dpi=80)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write one PNG per log here")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--log", action="append", help="only these files of the index (repeatable)")
    parser.add_argument("--directory", type=Path, default=LOGS, help=f"logs and index.json (default {LOGS})")
    args = parser.parse_args(argv)
    try:
        selected = [e for e in entries(args.directory) if args.log is None or e.file in args.log]
        header = ["log", "system", "nccl", "healthy", *(f"{label}: median / worst (n)" for label, _, _ in BANDS),
                  "flagged"]
        table = []
        healthy: list[CheckReport] = []
        for entry in selected:
            report = check_entry(entry, args.directory)
            system = f"{report.nodes} x {entry.system}, {report.algorithm}"  # servers (an NVL72 rack is one)
            table.append(
                [entry.file, system, nccl_cell(report), "yes" if entry.healthy else "no", *band_cells(report.rows),
                 flagged_cell(report)]
            )
            if entry.healthy:
                healthy.append(report)
            if args.plot is not None:
                print(f"plot -> {plot(report, entry, args.plot)}", file=sys.stderr)
        if len(healthy) > 1:
            # Every row of every healthy log in one pool: what a user meets on a log of theirs.
            pooled = [row for report in healthy for row in report.rows]
            flagged = sum(row.flagged for row in pooled)
            table.append([f"{len(healthy)} healthy logs, rows pooled", "", "", "", *band_cells(pooled),
                          f"{flagged} of {len(pooled)} rows"])
    except InputError as err:
        print(f"validate_nccl_logs: error: {err}", file=sys.stderr)
        return 2
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(f"`{cell}`" if i == 0 and cell.endswith(".txt") else cell
                                      for i, cell in enumerate(row)) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [header, *table]) for i in range(len(header))]
        for row in [header, *table]:
            print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
