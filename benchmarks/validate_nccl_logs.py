"""flowsim's predictions against real nccl-tests logs, by message-size band.

Run from the repository root::

    python benchmarks/validate_nccl_logs.py [--plot DIR] [--markdown] [--log FILE ...]

For every log listed in ``data/validation/nccl_tests/index.json`` (verbatim output of
nccl-tests on real clusters; the directory's README.md cites each one's public source), the
log is parsed and every row predicted through :func:`flowsim.check.check_log`, the path
``flowsim check`` takes, with the index's nodes and GPUs per node, on the system
:func:`index_system` reads from the entry: its ``system`` where it names one (a preset, a
shipped system such as ``gcp-a3-mega``, or a system file of the repository); else the cloud
instance its ``gpu`` or ``nic`` text names (``OCI BM.GPU4.8``, ``p5.48xlarge``,
``a3-megagpu-8g``: :data:`INSTANCES`); else the AWS instance the log's aws-ofi-nccl lines name;
else NVIDIA's server of its GPU as ``flowsim check`` picks one without ``--system``
(``H200``: ``dgx-h200``; an A100 the index puts on NVSwitch without saying SXM: ``dgx-a100``),
or the one its message suggests for a GPU of no NVIDIA server (a GH200: CSCS's quad node,
``data/systems/alps_gh200.toml``; a GB300: OCI's racks), with, across servers, the NICs its
``nic`` text gives where they differ from that server's (``8x RoCE 200 Gb/s``:
:func:`nics_from_text`); PCIe cards (an L40S, an RTX 4090; a GPU sold as both, such as an
"H100 80GB", where the entry's ``intra`` says PCIe alone) on a box of the index's GPUs a node
as ``flowsim check`` guesses one (:func:`flowsim.presets.guessed_pcie_box`), across nodes only
where the ``nic`` text gives their speed. An entry none of that fits (an NVL
card, a GPU of no server flowsim ships) is listed as not checked, with the reason, and the
others are checked. The index's NCCL environment (``NCCL_ALGO`` ...) is passed on as
``nccl_env`` where the prediction API takes that keyword, and left out where it does not (a
keyword check, so a newer flowsim uses it without a change here). NCCL's choice follows the
constants of the index's ``nccl_version``, else of the version the log prints, as ``flowsim
check`` follows a log's: that version where flowsim has it, else the newest older one it has,
else (none) the default; the table's ``nccl`` column says which. Printed per log: the error
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
import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from flowsim.check import CheckReport, NcclTestLog, check_log, parse_nccl_log
from flowsim.check.log import RankInfo
from flowsim.check.report import (
    DEFAULT_SYSTEMS,
    SUGGESTED_SYSTEMS,
    RowCheck,
    default_system,
    error_by_band,
    platform_system,
)
from flowsim.collectives import collective_time
from flowsim.errors import InputError
from flowsim.formatting import format_size
from flowsim.hardware import GPU_MODELS, gpu_model, gpu_model_value
from flowsim.presets import preset_spec
from flowsim.servers import MAX_NIC_PORTS, ServerSpec
from flowsim.systemfile import format_system, resolve_system, system_from_document

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "data" / "validation" / "nccl_tests"

#: Bands of the validation table: latency-bound, in between, bandwidth-bound.
BANDS: tuple[tuple[str, int, float], ...] = (
    ("< 64 KiB", 0, 64 << 10),
    ("64 KiB - 1 MiB", 64 << 10, 1 << 20),
    (">= 1 MiB", 1 << 20, math.inf),
)

#: Cloud instances as their providers name them (shape, instance type or family, in an index
#: entry's ``gpu`` or ``nic`` text; case ignored) -> the shipped system that describes them.
INSTANCES: tuple[tuple[str, str], ...] = (
    (r"\bp4de\b", "aws-p4de"), (r"\bp4d\b", "aws-p4d"), (r"\bp5e\b", "aws-p5e"), (r"\bp5\b", "aws-p5"),
    (r"\bp6-b200\b", "aws-p6-b200"),
    (r"\ba3[- ]?high", "gcp-a3-high"), (r"\ba3[- ]?mega", "gcp-a3-mega"), (r"\ba3[- ]?ultra", "gcp-a3-ultra"),
    (r"\ba4[- ]?high|\bgcp[- ]a4\b", "gcp-a4"),
    (r"(?<![a-z0-9])nd96a\w*_v4\b|\bnd a100 v4\b", "azure-nd-a100-v4"),
    (r"(?<![a-z0-9])nd96\w*_h100_v5\b|\bnd h100 v5\b", "azure-nd-h100-v5"),
    (r"(?<![a-z0-9])nd96\w*_h200_v5\b|\bnd h200 v5\b", "azure-nd-h200-v5"),
    (r"\bbm\.gpu4\.8\b", "oci-bm-gpu4-8"), (r"\bbm\.gpu\.h100\.8\b", "oci-bm-gpu-h100-8"),
    (r"\bbm\.gpu\.b300\.8\b", "oci-bm-gpu-b300-8"),
)

# A NIC's kind by the words that name it (TCP first: no RDMA, which flowsim does not model; EFA
# and Ethernet before InfiniBand's speed grades, which RoCE NICs' texts may also carry; NVIDIA's
# Spectrum-X and BlueField SuperNICs are Ethernet), and InfiniBand's grades by speed (Gb/s)
# where no figure is given (HDR100 and NDR200 the split ports' 100 and 200).
_NIC_KINDS = (("tcp", r"\btcp\b|\bsockets?\b|no rdma"), ("efa", r"\befa"),
              ("roce", r"roce|ethernet|gbe\b|spectrum|supernic|bluefield"), ("ib", r"infiniband|\bib\b|\b[xnhe]dr"))
_GRADES = {"xdr": 800, "ndr": 400, "hdr": 200, "edr": 100, "hdr100": 100, "ndr200": 200}


@dataclass(frozen=True)
class Entry:
    """One log of the index: its file, cluster, NCCL environment and GPU (as the index says).

    ``system`` names what it is checked on (the table's system column), ``server`` is that
    system as :func:`flowsim.check.check_log` takes it and ``log`` the log as read, with the
    NCCL version its constants follow; ``problem``, where not empty, says why it cannot be
    checked (then ``server`` and ``log`` are None)."""

    file: str
    system: str
    nodes: int
    gpus_per_node: int
    env: dict[str, str]
    healthy: bool
    nccl_version: str | None = None
    gpu: str = ""
    server: str | ServerSpec | None = None
    problem: str = ""
    log: NcclTestLog | None = field(default=None, repr=False, compare=False)


def nics_from_text(text: str) -> dict | None:
    """The compute NICs a server's ``nic`` text states, as a system file's ``[server.nics]``
    keys (``count``, ``speed_gbps``, ``kind``; each only where the text says it), or None
    where it gives no speed (in Gb/s, or as an InfiniBand grade: NDR, HDR ...).

    >>> nics_from_text("8x InfiniBand NDR 400 Gb/s per node (ConnectX-7)")
    {'speed_gbps': 400, 'count': 8, 'kind': 'ib'}
    >>> nics_from_text("16 x 200 Gb/s RoCE")
    {'speed_gbps': 200, 'count': 16, 'kind': 'roce'}
    >>> nics_from_text("ConnectX-7, NDR200") is None, nics_from_text("one HDR NIC a GPU")
    (False, {'speed_gbps': 200, 'per_gpu': True, 'kind': 'ib'})

    A count "per GPU" is no server's (``per_gpu`` says so), nor one "across the N nodes"
    (``nodes`` says over how many).
    """
    low = text.lower()
    grade = re.search(r"\b((?:hdr|ndr)\s*(?:100|200)|[xnhe]dr)\b", low)
    figure = re.search(r"(\d+)\s*(?:gb/s|gbps|gbit|gb\b|g\b|gbe)", low)
    if figure is None and grade is None:
        return None
    nics: dict = {"speed_gbps": int(figure.group(1)) if figure else _GRADES[grade.group(1).replace(" ", "")]}
    count = re.search(r"(?<![\w.])(\d+)\s*[x\u00d7]\s*(?!large)", low)
    if count:
        nics["count"] = int(count.group(1))
    if re.search(r"\b(?:per|a|each|one per)\s+gpu\b", low) and not (
            count and int(count.group(1)) > 1 and re.search(r"\bone\s+(?:\S+\s+){0,3}?(?:per|a|each)\s+gpu\b", low)):
        nics["per_gpu"] = True  # "1x 400Gb/s per GPU", not "8x 400Gb/s, one per GPU" (8 a node, one a GPU)
    if across := re.search(r"\bacross\s+(?:the\s+|all\s+)?(\d+)\s+(?:nodes|servers|hosts)\b", low):
        nics["nodes"] = int(across.group(1))
    kind = next((k for k, pattern in _NIC_KINDS if re.search(pattern, low)), None)
    if kind:
        nics["kind"] = kind
    return nics


def _with_nics(name: str, nic_text: str, system: str | ServerSpec) -> tuple[str, str | ServerSpec]:
    """``system`` (a preset or shipped system's name, or a server), labelled ``name``, its NICs as
    ``nic_text`` states them where they differ (:func:`nics_from_text`): the table's label and
    the system. A GPU's several NICs become ports of one, as system files give them."""
    base = resolve_system(system)[0] if isinstance(system, str) else system
    spec = base if isinstance(base, ServerSpec) else preset_spec(base)
    stated = nics_from_text(nic_text)
    if stated is None:
        return name, base
    doc = tomllib.loads(format_system(spec))
    server = doc["server"]
    old = server.get("nics", {})
    nics = {"count": old.get("count", 0), "speed_gbps": old.get("speed_gbps"), "kind": old.get("kind", "ib"),
            "ports": old.get("ports", 1)}
    if stated.get("kind") == "tcp":
        raise InputError(f"the index's NICs ({nic_text!r}) run TCP sockets, which flowsim does not model")
    gpus = server["gpus"]
    count = stated.get("count", nics["count"] or 1)  # a server without compute NICs (a PCIe box) gets one
    if stated.get("per_gpu"):
        count *= gpus  # "1x 400Gb/s NDR per GPU"
    if stated.get("nodes"):
        if count % stated["nodes"]:
            raise InputError(f"the index's NICs ({nic_text!r}) do not split evenly over its {stated['nodes']} nodes")
        count //= stated["nodes"]  # "16 x 400G across the 2 nodes"
    if "count" in stated and not stated.get("per_gpu") and spec.hosts > 1 and count <= spec.gpus_per_host * MAX_NIC_PORTS:
        count *= spec.hosts  # a node's: a rack's compute trays (4 NICs a GB200 tray) are its nodes, not 72 a rack
    ports = count // gpus if count > gpus and count % gpus == 0 else 1
    if count and gpus % count and ports == 1:
        raise InputError(f"the index's NICs ({nic_text!r}) do not split evenly over {name}'s {gpus} GPUs")
    new = {"count": count // ports, "speed_gbps": stated["speed_gbps"] * ports,
           "kind": stated.get("kind", nics["kind"]), "ports": ports}
    if new == nics:
        return name, base
    if new["count"] != nics["count"]:  # the NICs' places follow the count: each on its first GPU's switch
        server["nics"] = {}
        for switch in server.get("pcie", {}).get("switches", []):
            if isinstance(switch, dict):
                switch.pop("nics", None)
    server["nics"] = {**{k: v for k, v in server.get("nics", {}).items() if k == "serves"}, **new}
    label = f"{name} with {new['count'] * ports} x {stated['speed_gbps']} Gb/s {new['kind']}"
    return label, system_from_document(doc, source=f"the index's nic text {nic_text!r}", name=name).spec


def index_system(item: dict, log: NcclTestLog) -> tuple[str, str | ServerSpec]:
    """The system an index entry's log is checked on (module docstring): the table's label and
    what :func:`flowsim.check.check_log` takes.

    Raises
    ------
    InputError
        No system fits the entry (an NVL card, a GPU of no server flowsim ships, PCIe cards
        across nodes whose NICs the entry does not give).
    """
    if item.get("system"):  # a cloud system or a system file the index names
        name = item["system"]
        return name, resolve_system(str(ROOT / name) if name.endswith(".toml") else name)[0]
    gpu, nic = item.get("gpu") or "", item.get("nic") or ""
    text = f"{gpu} {nic}".lower()
    name = next((system for pattern, system in INSTANCES if re.search(pattern, text)), None) or platform_system(log)
    if name is not None:
        return name, resolve_system(name)[0]
    # A rack's name after its GPU ("GB200 NVL72") is no PCIe card's "NVL" (the H100 NVL), nor
    # is a count before it ("8x L40S") the GPU's.
    model = re.sub(r"\s*\bNVL(?:36|72)\b.*", "", gpu, flags=re.IGNORECASE)
    model = re.sub(r"^\s*\d+\s*[x\u00d7]\s*", "", model)
    intra = (item.get("intra") or "").lower()
    nvlink = GPU_MODELS[known][0] if (known := gpu_model(model)) else None  # an SXM module's, a bridge's (_ga102)
    if re.search(r"\bpcie\b", intra) and not re.search(r"nvswitch|nvlink|\bnv\d", intra) \
            and nvlink and not nvlink.endswith("_ga102") and not re.search(r"pcie", model, re.IGNORECASE):
        # The index puts a GPU sold as SXM modules and PCIe cards on PCIe alone: the card
        # ("H100 80GB", "A100 40GB").
        model = f"{model} PCIe"
    name = gpu_model_value(model, DEFAULT_SYSTEMS, None)
    card = re.search(r"pcie|\bnvl\b", model, re.IGNORECASE)
    if name is None and model and not card and "nvswitch" in intra and not re.search(r"\b(?:no|without)\s+nvswitch",
                                                                                        intra):
        # An SXM module the index names without its form ("A100 (SXM, NVLink/NVSwitch)",
        # "NVIDIA A100 80GB").
        name = gpu_model_value(f"{gpu_model(model) or model.split()[0]}-SXM", DEFAULT_SYSTEMS, None)
    if name is None:
        # A GPU of no NVIDIA server flowsim ships, on the system flowsim check suggests for it
        # (a GH200 on CSCS's quad node, a GB300 in OCI's racks), its NICs as the index gives them.
        name = gpu_model_value(model, ((piece, system) for piece, system, _ in SUGGESTED_SYSTEMS), None)
    system: str | ServerSpec | None = name if name is None or not name.endswith(".toml") else \
        resolve_system(str(ROOT / name))[0]  # a system file of the repository, labelled by its path there
    if system is None:
        # The GPU the index names (as if the rank lines of a server's GPUs named it), else the
        # rank lines', as flowsim check takes it without --system (PCIe cards: a box of the
        # index's GPUs a node as flowsim guesses it), or why none fits.
        ranks = tuple(RankInfo(k, "host", k, model, 0) for k in range(item["gpus_per_node"]))
        named = replace(log, ranks=ranks, platform=None) if model else log
        try:
            system = default_system(named)
        except InputError:
            what = f"the GPU {gpu!r}" if gpu else "an entry without 'gpu' whose log's rank lines name none"
            raise InputError(f"no flowsim server for {what}: give the entry a 'system' (a preset or shipped system, "
                             "'flowsim presets', or a system file, docs/system-format.md)") from None
    guessed = name is None and isinstance(system, ServerSpec)  # a box of PCIe cards
    if guessed and item["nodes"] > 1 and not nics_from_text(nic):
        raise InputError(f"the index's PCIe cards ({gpu!r}) run on {item['nodes']} nodes and its 'nic' text gives no "
                         "NIC speed: give the entry a 'system' (a system file, docs/system-format.md)")
    label = system.name if isinstance(system, ServerSpec) and guessed else name or str(system)
    if item["nodes"] > 1 and nic:
        return _with_nics(label, nic, system)
    return label, system if isinstance(system, ServerSpec) else resolve_system(system)[0]


def entries(directory: Path = LOGS) -> list[Entry]:
    """The index's logs, in its order; one whose system cannot be told has its ``problem``."""
    listed = []
    for number, item in enumerate(json.loads((directory / "index.json").read_text()), 1):
        missing = [key for key in ("file", "nodes", "gpus_per_node") if key not in item]
        if missing:
            raise InputError(f"{directory / 'index.json'}: entry {number} has no {', '.join(map(repr, missing))}")
        version = item.get("nccl_version")
        entry = Entry(item["file"], "-", item["nodes"], item["gpus_per_node"], dict(item.get("env") or {}),
                      item.get("healthy", True), version, item.get("gpu") or "")
        try:
            log = parse_nccl_log(directory / entry.file, nodes=entry.nodes, gpus_per_node=entry.gpus_per_node)
            label, server = index_system(item, log)
        except InputError as err:
            listed.append(replace(entry, problem=str(err)))
            continue
        # The index's version, else the log's, as check_log takes the one a log prints.
        version = version or log.nccl_version
        listed.append(replace(entry, system=label, server=server, nccl_version=version,
                              log=replace(log, nccl_version=version)))
    return listed


def prediction_options(env: dict[str, str]) -> dict:
    """Keywords for the prediction: the ``NCCL_*`` variables as ``nccl_env`` where
    ``collective_time`` takes it (the others, ``CUDA_DEVICE_ORDER`` say, are not NCCL's)."""
    nccl = {key: value for key, value in env.items() if key.startswith("NCCL_")}
    return {"nccl_env": nccl} if "nccl_env" in inspect.signature(collective_time).parameters else {}


def check_entry(entry: Entry, *, sizes: Sequence[int] | None = None) -> CheckReport:
    """``flowsim check`` of one log with its index's cluster: every row predicted, or only
    the rows of ``sizes``.

    Raises
    ------
    InputError
        The entry cannot be checked (:attr:`Entry.problem`), or the prediction refuses it.
    """
    if entry.server is None or entry.log is None:
        raise InputError(entry.problem or f"{entry.file}: no system")
    log = entry.log
    if sizes is not None:
        wanted = set(sizes)
        log = _only_rows(log, wanted)
    return check_log(log, system=entry.server, nodes=entry.nodes, **prediction_options(entry.env))


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
        unchecked: list[str] = []
        healthy: list[CheckReport] = []
        for entry in selected:
            try:
                report = check_entry(entry)
            except InputError as err:  # the others are checked; this one says why not
                unchecked.append(entry.file)
                table.append([entry.file, entry.system, "-", "yes" if entry.healthy else "no", *("-" for _ in BANDS),
                              f"not checked: {err}"])
                continue
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
    if unchecked:
        print(f"validate_nccl_logs: {len(unchecked)} of {len(selected)} logs not checked "
              f"({', '.join(unchecked)}): the table's last column says why", file=sys.stderr)
    return 1 if unchecked and len(unchecked) == len(selected) else 0


if __name__ == "__main__":
    sys.exit(main())
