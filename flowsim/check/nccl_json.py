"""nccl-tests' JSON output (``-J FILE``, nccl-tests 2.18.5 and later) read into ranks and rows.

The writer is ``src/util.cu`` of NVIDIA/nccl-tests (``JSON_FILE_VERSION`` 1 to 3, read at
2.19.6): one object, on one line, whose keys this module reads are

- ``args``: the command line, ``args[0]`` the binary (``./build/all_reduce_perf``);
- ``env``: the environment as ``"KEY=VALUE"`` strings (rank 0's process);
- ``nccl_version``: NCCL's ``NCCL_VERSION_CODE`` (``22703``);
- ``config``: ``nthreads``, ``ngpus``, ``iterations``, ``aggregated_iterations``, ``graph`` and ``devices``,
  one ``{rank, group, pid, hostname, device, device_hex, device_info}`` per process, parsed
  from the first of the process's ``#  Rank`` lines (``parseRankInfo``), so a process that
  drives ``nthreads x ngpus`` GPUs stands for that many ranks on consecutive devices;
- ``results``: one object per size, ``{size, count, type, redop, root, out_of_place,
  in_place, ...}``, ``root`` a string (``"    -1"``), each half ``{time | cpu_time, alg_bw,
  bus_bw, nwrong}`` (``nwrong`` null without validation), ``out_of_place`` null where
  nccl-tests ran in-place only;
- ``average_bus_bandwidth.bandwidth`` (spelled ``average_bus_bandwidith.bandwidith`` before
  nccl-tests commit 85ca91d, February 2026).

nccl-tests writes a number that is not one (NaN) as the string ``"nan"``: an error here, as
in text output. A file cut short (the run killed or hung at a large size) is read up to its
last complete result, with a warning, as a text log pasted in part is.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from flowsim.check.log import Measurement, RankInfo, TestRow, nccl_version_from_code
from flowsim.errors import InputError

__all__ = ["JsonRun", "is_json_output", "read_json_run"]

#: The newest ``JSON_FILE_VERSION`` read (nccl-tests 2.19.6).
NEWEST_FORMAT = 3

# Every result object ends with its "experiment_name" string: the end of the last complete
# result in a file cut short.
_RESULT_END = re.compile(r'"experiment_name"\s*:\s*"(?:[^"\\]|\\.)*"\s*}')


@dataclass(frozen=True)
class JsonRun:
    """What one JSON file says, in :class:`~flowsim.check.log.NcclTestLog`'s terms (all but
    the binary, which :func:`~flowsim.check.parse.parse_nccl_log` tells from ``program``,
    ``command`` and the rows).

    ``program`` is the file name of ``args[0]`` (``"all_reduce_perf_mpi"``; empty without
    ``args``), ``command`` the arguments joined by spaces.
    """

    program: str
    command: str
    n_threads: int
    n_gpus: int
    agg_iters: int | None
    cuda_graph: int | None
    ranks: tuple[RankInfo, ...]
    rows: tuple[TestRow, ...]
    avg_busbw_GBps: float | None
    nccl_version: str | None
    nccl_env: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    iters: int | None = None
    blocking: bool = False


# A line of nccl-tests' text output: a comment line ('# nThread', '#  Rank', the table header).
_TEXT_LINE = re.compile(r"^\s*#", re.MULTILINE)
# A JSON array of objects (or an empty one), not a launcher's '[1,0]<stdout>:' before a text line.
_ARRAY_START = re.compile(r"\s*\[\s*[{\]]")


def is_json_output(text: str) -> bool:
    """Whether ``text`` is a JSON document rather than nccl-tests' text output: it starts with
    a brace (or is an array of objects, which :func:`read_json_run` refuses) and has no
    comment line (a text log may follow a launcher's JSON log line)."""
    return (text.lstrip().startswith("{") or _ARRAY_START.match(text) is not None) and _TEXT_LINE.search(text) is None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Reader:
    """Typed access to the keys of one JSON document; errors name the source and key path."""

    def __init__(self, source: str):
        self.source = source

    def error(self, path: str, message: str) -> InputError:
        return InputError(f"{self.source}, {path}: {message}")

    def get(self, obj: dict, path: str, key: str, *, required: bool = True) -> Any:
        if key not in obj:
            if required:
                raise InputError(f"{self.source}: key {_join(path, key)} is missing")
            return None
        return obj[key]

    def typed(self, obj: dict, path: str, key: str, kind: type, what: str, *, required: bool = True) -> Any:
        value = self.get(obj, path, key, required=required)
        if value is None and not required:
            return None
        # JSON's true and false are Python bools, which are ints too: not a count.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(_join(path, key), f"expected {what}, got {json.dumps(value)}")
        return value

    def count(self, obj: dict, path: str, key: str, *, minimum: int = 0) -> int:
        value = self.typed(obj, path, key, int, "a whole number")
        if value < minimum:
            raise self.error(_join(path, key), f"expected a whole number of at least {minimum}, got {value}")
        return value

    def optional_count(self, obj: dict, path: str, key: str) -> int | None:
        """A whole number >= 0 where the key is there, else None (keys older files lack)."""
        return None if key not in obj else self.count(obj, path, key)

    def measured(self, obj: dict, path: str, key: str) -> float:
        """A time, bandwidth or count nccl-tests measured: a finite number >= 0."""
        value = self.get(obj, path, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise self.error(
                _join(path, key), f"expected a finite number >= 0 as nccl-tests writes one, got {json.dumps(value)}"
            )
        return float(value)


def _load(text: str, source: str) -> tuple[dict, str | None]:
    """The document, and a warning where it was cut short and is read up to its last
    complete result (else None)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        # A run killed mid-way leaves the results list and the top object open.
        ends = list(_RESULT_END.finditer(text))
        if ends and '"results"' in text[: ends[-1].start()]:
            try:
                document = json.loads(text[: ends[-1].end()] + "]}")
            except json.JSONDecodeError:
                document = None
            if isinstance(document, dict):
                return document, (
                    f"the JSON output ends inside the results (line {err.lineno}, column {err.colno}: "
                    f"{err.msg}): the run was cut short; the results up to the last complete one are checked"
                )
        raise InputError(
            f"{source}, line {err.lineno}, column {err.colno}: not valid JSON ({err.msg}); "
            "expected the file nccl-tests' -J option writes"
        ) from None
    return document, None  # an object: the text starts with a brace


def _ranks(read: _Reader, config: dict, per_process: int) -> tuple[RankInfo, ...]:
    devices = read.typed(config, "config", "devices", list, "a list of devices")
    ranks: dict[int, RankInfo] = {}
    for index, device in enumerate(devices):
        path = f"config.devices[{index}]"
        if not isinstance(device, dict):
            raise read.error(path, f"expected an object, got {json.dumps(device)}")
        first = read.count(device, path, "rank")
        host = read.typed(device, path, "hostname", str, "a host name")
        cuda_device = read.count(device, path, "device")
        bus = read.typed(device, path, "device_hex", str, "a PCI bus id", required=False) or ""
        name = read.typed(device, path, "device_info", str, "a device name", required=False) or ""
        if first % per_process:
            raise read.error(
                f"{path}.rank",
                f"rank {first} is not the first of a process's {per_process} ranks (nthreads x ngpus)",
            )
        for offset in range(per_process):
            rank = first + offset
            if rank in ranks:
                raise read.error(f"{path}.rank", f"rank {rank} is listed twice (also {ranks[rank].key})")
            # The process's other ranks drive the devices after its first (nccl-tests'
            # writeDeviceReport); their bus ids are not in the file.
            ranks[rank] = RankInfo(
                rank, host, cuda_device + offset, " ".join(name.split()), 0, bus.strip() if offset == 0 else "", path
            )
    if not ranks:
        raise read.error("config.devices", "no devices listed")
    missing = sorted(set(range(len(ranks))) - set(ranks))
    if missing:
        raise read.error("config.devices", f"lists {len(ranks)} ranks but not rank {missing[0]}")
    return tuple(ranks[r] for r in range(len(ranks)))


def _half(read: _Reader, result: dict, path: str, key: str) -> Measurement | None:
    half = read.get(result, path, key)
    where = f"{path}.{key}"
    if half is None:
        return None
    if not isinstance(half, dict):
        raise read.error(where, f"expected an object, got {json.dumps(half)}")
    time_key = "cpu_time" if "cpu_time" in half and "time" not in half else "time"
    wrong = half.get("nwrong")
    return Measurement(
        time_us=read.measured(half, where, time_key),
        algbw_GBps=read.measured(half, where, "alg_bw"),
        busbw_GBps=read.measured(half, where, "bus_bw"),
        wrong=None if wrong is None else int(read.measured(half, where, "nwrong")),
    )


def _rows(read: _Reader, results: list) -> tuple[TestRow, ...]:
    rows = []
    for index, result in enumerate(results):
        path = f"results[{index}]"
        if not isinstance(result, dict):
            raise read.error(path, f"expected an object, got {json.dumps(result)}")
        in_place = _half(read, result, path, "in_place")
        out_of_place = _half(read, result, path, "out_of_place")
        if in_place is None or out_of_place is None:
            raise read.error(
                path,
                f"{'out_of_place' if out_of_place is None else 'in_place'} is null: flowsim checks runs that "
                "measure both halves (nccl-tests leaves out-of-place out only when replaying a trace)",
            )
        root_text = read.typed(result, path, "root", str, "the root as nccl-tests writes it (a string)")
        try:
            root = int(root_text)
        except ValueError:
            raise read.error(
                f"{path}.root", f"expected a whole number in a string, got {json.dumps(root_text)}"
            ) from None
        rows.append(
            TestRow(
                size_bytes=read.count(result, path, "size"),
                count=read.count(result, path, "count"),
                dtype=read.typed(result, path, "type", str, "a data type name"),
                redop=read.typed(result, path, "redop", str, "a reduction name"),
                root=root,
                out_of_place=out_of_place,
                in_place=in_place,
                line=0,
                key=path,
            )
        )
    return tuple(rows)


def _environment(read: _Reader, document: dict) -> tuple[tuple[str, str], ...]:
    """The ``NCCL_*`` variables of the ``env`` list, in order."""
    env = read.typed(document, "", "env", list, "a list of 'KEY=VALUE' strings", required=False) or []
    pairs = []
    for index, entry in enumerate(env):
        if not isinstance(entry, str):
            raise read.error(f"env[{index}]", f"expected a 'KEY=VALUE' string, got {json.dumps(entry)}")
        key, equals, value = entry.partition("=")
        if equals and key.startswith("NCCL_"):
            pairs.append((key, value))
    return tuple(pairs)


def read_json_run(text: str, source: str) -> JsonRun:
    """Read the JSON file nccl-tests' ``-J`` option writes.

    Raises
    ------
    InputError
        Naming the source and the key (``results[3].in_place.bus_bw``): a JSON array rather
        than the one object nccl-tests writes, not JSON (line and column), a key missing or
        of the wrong kind, a measurement that is not a finite number >= 0, ranks listed twice
        or not from 0, no results.
    """
    read = _Reader(source)
    if _ARRAY_START.match(text):
        # Several -J files put in a list, say: each run is one object, read from a file of its own.
        raise InputError(f"{source}: a JSON array at the top level, where nccl-tests' -J output is one JSON object "
                         "(its run); give each run's object as a file of its own")
    document, cut_short = _load(text, source)
    warnings = [] if cut_short is None else [cut_short]
    format_version = read.typed(document, "", "version", int, "a whole number", required=False)
    if format_version is not None and format_version > NEWEST_FORMAT:
        warnings.append(
            f"JSON format version {format_version} is newer than the {NEWEST_FORMAT} flowsim reads; "
            "reading the keys it knows"
        )
    config = read.typed(document, "", "config", dict, "an object")
    n_threads = read.count(config, "config", "nthreads", minimum=1)
    n_gpus = read.count(config, "config", "ngpus", minimum=1)
    ranks = _ranks(read, config, n_threads * n_gpus)
    rows = _rows(read, read.typed(document, "", "results", list, "a list of results"))
    if not rows:
        raise read.error("results", "no results (the run stopped before its first size?)")
    # Two spellings: nccl-tests fixed 'bandwidith' in commit 85ca91d.
    average_key = next((k for k in ("average_bus_bandwidth", "average_bus_bandwidith") if k in document), None)
    avg = None
    if average_key is not None:
        average = read.typed(document, "", average_key, dict, "an object")
        avg = read.measured(average, average_key, "bandwidth" if "bandwidth" in average else "bandwidith")
    elif cut_short is None:
        warnings.append(
            f"no average_bus_bandwidth after results[{len(rows) - 1}]: the run did not finish; "
            f"the {len(rows)} results present are checked"
        )
    args = read.typed(document, "", "args", list, "a list of strings", required=False) or []
    if not all(isinstance(arg, str) for arg in args):
        raise read.error("args", "expected a list of strings")
    code = read.optional_count(document, "", "nccl_version")
    return JsonRun(
        program=os.path.basename(args[0]) if args else "",
        command=" ".join(args),
        n_threads=n_threads,
        n_gpus=n_gpus,
        agg_iters=read.optional_count(config, "config", "aggregated_iterations"),
        iters=read.optional_count(config, "config", "iterations"),
        # A string ("false", "true") in the files nccl-tests writes, a JSON bool read too.
        blocking=str(config.get("blocking_collectives", "false")).lower() in ("true", "1"),
        cuda_graph=read.optional_count(config, "config", "graph"),
        ranks=ranks,
        rows=rows,
        avg_busbw_GBps=avg,
        nccl_version=nccl_version_from_code(code) if code else None,
        nccl_env=_environment(read, document),
        warnings=tuple(warnings),
    )
