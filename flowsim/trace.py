"""HDF5 traces: one simulation run in a self-describing file, and a reader for it.

A trace holds the topology, the workload, the routes and the simulation result of one run,
in columns that any HDF5 tool can read (``h5py``, ``h5dump``, HDFView, MATLAB, ...).
:func:`write_trace` writes one; :func:`open_trace` reads it back as NumPy arrays.

Schema version 1
----------------
Units are bytes, seconds and bytes per second, as in the rest of flowsim. Strings are
variable-length UTF-8 (``f["flows/name"].asstr()[:]`` in h5py). Ids are int64 row numbers
into the table they name (a node id is a row of ``/topology/node_*``). Every dataset is
one-dimensional, chunked and gzip-compressed at level 1 (byte-shuffled columns of times and
sizes shrink as well as at level 4, in half the time); numeric ones are byte-shuffled too and
checksummed with HDF5's Fletcher-32 filter (which HDF5 refuses on variable-length strings;
string datasets carry a digest instead, see ``/``). A *CSR pair*
``X_indptr`` (int64[n + 1]) / ``X_indices`` holds row ``i``'s entries in
``X_indices[X_indptr[i]:X_indptr[i + 1]]``, as in SciPy.

``/`` (attributes)
    ``format = "flowsim-trace"``; ``schema_version = 1``; ``flowsim_version``,
    ``numba_version``, ``numpy_version``, ``h5py_version`` of the writer (``flowsim_version`` is
    ``"unknown"`` from a copy neither installed nor run from its checkout); ``created_utc``
    (ISO 8601); ``scenario_text``: the scenario file the run came from, verbatim ("" if none);
    ``metadata_sha256``: the SHA-256 (hex) of every other attribute in the file and of how
    each dataset is stored: type, shape, chunks, filters (see :func:`_metadata_digest`). Every string dataset has the
    attribute ``sha256``: the SHA-256 of its strings in UTF-8, each followed by a NUL.
    Fletcher-32 covers the datasets' stored chunks; these digests cover what it cannot reach
    (HDF5 keeps variable-length strings, attributes and types outside the chunks). Traces
    written before flowsim stored checksums have none of them, and are read unchecked.
``/topology``
    Nodes: ``node_name`` (str), ``node_kind`` (int64, :class:`flowsim.topology.NodeKind`;
    the attribute ``node_kinds`` lists the names by value), ``node_server`` (int64 server id,
    -1 for none), ``node_nic`` (int64 node id of the NIC it leaves its server through, -1 for
    none). Servers: ``server_name`` (str), ``server_p2p`` (bool), ``server_net_latency_s``
    (float64), ``server_gpu_sm`` (int64), ``server_step_latency_s`` (float64) and
    ``server_nic_ports`` (int64; each absent from traces written before it, read as 0, the
    step latency as the network latency, the ports as 1).
    Links: ``link_name`` (str),
    ``link_src`` / ``link_dst`` (int64 node ids), ``link_capacity_Bps`` (float64, per
    direction), ``link_latency_s`` (float64), ``link_technology`` (str, a
    :mod:`flowsim.hardware` tag), ``link_tier`` (int64, :class:`flowsim.hardware.LinkTier`;
    attribute ``link_tiers`` lists the names), ``link_shared`` (bool).
``/flows`` (one row per flow; attribute ``n_flows``)
    Workload: ``name`` (str, unique), ``src`` / ``dst`` (int64 node ids), ``size_bytes``,
    ``start_s``, ``delay_s``, ``overhead_s``, ``weight``, ``cap_Bps`` (float64; ``inf`` for
    no cap), and the dependency CSR pair ``dep_indptr`` / ``dep_indices`` (flow ids each flow
    waits for). Result: ``ready_s``, ``transfer_start_s``, ``finish_s`` (float64 s).
    Routes: the CSR pair ``link_indptr`` / ``link_indices`` (link ids, source to
    destination). Tags: one subgroup of ``tags`` per tag column (e.g. ``tags/collective``,
    ``tags/step``), dictionary-encoded as ``categories`` (str) and ``codes``
    (int64[n_flows], row numbers into ``categories``), with the column's name in its
    attribute ``name``. The subgroup is named after the column, except that ``%`` and ``/``
    (a path separator to HDF5) are written ``%25`` and ``%2F``, a column named ``.`` is
    ``%2E`` and one with an empty name ``%``. When per-flow rates were recorded: ``segment_indptr``
    (int64[n_flows + 1]) and ``segment_start_s``, ``segment_end_s``, ``segment_rate_Bps``:
    each flow's rate as constant pieces.
``/links`` (one row per link; attribute ``n_links``)
    ``capacity_Bps`` (float64) and ``bytes`` (float64, bytes carried). When link rates were
    recorded (attribute ``segments_recorded``): ``segment_indptr`` (int64[n_links + 1]) and
    ``segment_start_s``, ``segment_end_s``, ``segment_rate_Bps``: each link's rate as
    consecutive constant pieces; pieces at rate 0 are omitted.
``/jobs`` (only in traces of scenarios with ``[[job]]`` tables; attribute ``n_jobs``)
    Per job (see :mod:`flowsim.jobresults`): ``name``, ``kind``, ``placement`` (str);
    ``n_gpus``, ``iterations`` (int64); ``start_s``, ``compute_s``, ``mean_iteration_s``,
    ``alone_mean_iteration_s`` (the job alone on the same GPUs and routes), ``slowdown``,
    ``exposed_communication_s``, ``alone_exposed_communication_s`` (float64; the last two NaN
    but for training jobs). Per iteration, a CSR pair by job: ``iteration_indptr``
    (int64[n_jobs + 1]), ``iteration_s`` and ``alone_iteration_s`` (float64). Per contended
    link and party (a job, or the flows outside jobs): ``contention_link`` (link id),
    ``contention_job`` (job row, -1 for the flows outside jobs), ``contention_bytes``,
    ``contention_busy_s`` and ``contention_overlap_s`` (the link's time with two or more
    parties moving bytes on it; float64). Each flow's job is its tag ``job`` (and its
    iteration the tag ``iteration``) in ``/flows/tags``.
``/training`` (optional: runs with a training step; see :mod:`flowsim.stepreport`)
    Attributes: ``step_s``, ``compute_s``, ``bubble_s``, ``critical_compute_s``,
    ``critical_wait_s`` (float64); ``communication_kinds`` (str list) and
    ``critical_communication_s`` (float64 per kind, the critical path's communication);
    ``activities`` (str list, the activity names ``activity_kind`` indexes); ``tiers`` (str
    list of tier groups); ``tp``, ``pp``, ``dp``, ``ep``, ``n_microbatches``,
    ``virtual_stages`` and ``cp`` (int64; model chunks a rank and the context-parallel size,
    absent from traces written before flowsim stored them, which read as 1).
    Datasets: the activity chart ``activity_stage``, ``activity_kind`` (int64) and
    ``activity_start_s``, ``activity_end_s`` (float64); per tier group ``tier_n_links``
    (int64), ``tier_max_utilization``, ``tier_mean_utilization`` (float64); its busiest links
    ``bottleneck_tier`` (int64, row of ``tiers``), ``bottleneck_link`` (int64 link id),
    ``bottleneck_utilization`` (float64). Traces without a training step, and those written
    before flowsim stored it, have no such group.
``/job_training`` (optional: runs with training jobs, ``[[job]]`` with ``[job.training]``)
    Attribute ``jobs`` (str list, in the order of ``/jobs``); a group per job named there,
    laid out as ``/training``: the job's first iteration broken down, its times from the
    iteration's start (:func:`flowsim.training.job_breakdowns`). Traces written before
    flowsim stored it (2026-12-07) have none.
``/summary`` (attributes only)
    Counts (int64): ``n_flows``, ``n_links``, ``n_events``, ``n_rate_updates``,
    ``n_rates_resolved``, ``n_rates_changed``. Figures (float64): ``makespan_s``,
    ``fct_p50_s``, ``fct_p90_s``, ``fct_p99_s``, ``fct_p99.9_s`` (flow completion time,
    finish minus ready, over every flow: zero-byte ones, such as a collective's or a training
    step's markers and compute steps, included), ``max_link_utilization``,
    ``total_link_bytes``.

Reliability
-----------
:func:`write_trace` writes to a hidden temporary file in the target's directory and renames
it into place only once it is complete and flushed, so a crash or a Ctrl-C leaves either
the previous file or none, never a partial trace under the target name. Strings it cannot
store (with a NUL character, or not encodable as UTF-8) are refused before it writes, and
:func:`check_writable` finds them before a run. Large columns are written in chunks of
:data:`WRITE_CHUNK` rows, so writing adds bounded memory on top of the arrays being written.
:func:`open_trace` reports a file that is not HDF5, truncated, not a flowsim trace, of a
newer schema version, or damaged (a checksum that does not match; a column whose length,
type, values or ids disagree with
the schema or the counts it depends on: ``n_flows``, ``n_links``, the topology's nodes, a
CSR pointer, a tag's categories; a summary attribute missing or not a number) as
:class:`~flowsim.errors.InputError`, before any of it is used. It refuses, before reading
anything, a path that is not a regular file (a FIFO would block the read) and a file that
would make HDF5 read other files: an external link, a dataset with external storage, a
virtual dataset. :func:`write_trace` checks that the disk has room for the trace
uncompressed before it writes (see :func:`trace_bytes`), and a disk that fills up anyway
gives an :class:`OSError` (``ENOSPC``) naming the trace, the temporary file removed.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import h5py
import numba
import numpy as np

import flowsim
from flowsim.deflate import ColumnWriter
from flowsim.errors import InputError, file_kind, first_repeat, path_argument, unstorable_text
from flowsim.files import replaced_atomically
from flowsim.hardware import LinkTier
from flowsim.result import FlowTimes, SimulationResult
from flowsim.routes import Routes
from flowsim.stepreport import ACTIVITIES, COMMUNICATION_KINDS, StepBreakdown, TierUsage
from flowsim.strings import JoinedStrings, chunks, coded, utf8_chunks, utf8_size
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload

__all__ = [
    "FORMAT", "JOB_COLUMNS", "SCHEMA_VERSION", "WRITE_CHUNK", "Trace", "check_writable", "open_trace", "trace_bytes",
    "write_trace",
]

#: Value of the root attribute ``format``.
FORMAT = "flowsim-trace"
#: Schema version this module writes and the newest it reads.
SCHEMA_VERSION = 1
#: Rows per HDF5 chunk and per write of a large column.
WRITE_CHUNK = 1 << 16

_STR = h5py.string_dtype("utf-8")
_SEGMENT_COLUMNS = ("segment_start_s", "segment_end_s", "segment_rate_Bps")
_WORKLOAD_COLUMNS = ("size_bytes", "start_s", "delay_s", "overhead_s", "weight", "cap_Bps")
_RESULT_COLUMNS = ("ready_s", "transfer_start_s", "finish_s")
#: Summary attributes that are counts (int64; float64 in traces written before flowsim stored
#: them as integers).
_SUMMARY_COUNTS = ("n_flows", "n_links", "n_events", "n_rate_updates", "n_rates_resolved", "n_rates_changed")
#: Summary attributes every trace has (``n_rates_changed`` came later).
#: ``/jobs`` columns by the table whose rows they are and their kind.
JOB_COLUMNS = {
    **{c: ("job", "strings") for c in ("name", "kind", "placement")},
    **{c: ("job", "integers") for c in ("n_gpus", "iterations")},
    **{c: ("job", "numbers") for c in ("start_s", "compute_s", "mean_iteration_s", "alone_mean_iteration_s",
                                       "slowdown", "exposed_communication_s", "alone_exposed_communication_s")},
    "iteration_indptr": ("indptr", "integers"),
    **{c: ("iteration", "numbers") for c in ("iteration_s", "alone_iteration_s")},
    **{c: ("contention", "integers") for c in ("contention_link", "contention_job")},
    **{c: ("contention", "numbers") for c in ("contention_bytes", "contention_busy_s", "contention_overlap_s")},
}
_SUMMARY_REQUIRED = (
    "makespan_s", "n_flows", "n_links", "n_events", "n_rate_updates", "n_rates_resolved", "fct_p50_s", "fct_p90_s",
    "fct_p99_s", "fct_p99.9_s", "max_link_utilization", "total_link_bytes",
)


def _dataset(group: h5py.Group, name: str, n: int, dtype) -> h5py.Dataset:
    numeric = dtype is not _STR
    return group.create_dataset(
        name,
        shape=(n,),
        maxshape=(None,),
        dtype=dtype,
        chunks=(max(1, min(n, WRITE_CHUNK)),),
        compression="gzip",
        compression_opts=1,
        shuffle=numeric,
        fletcher32=numeric,  # HDF5 refuses the filter on variable-length strings
    )


def _write_array(columns: ColumnWriter, group: h5py.Group, name: str, values: np.ndarray, dtype) -> None:
    """Create dataset ``name`` for ``values`` and queue them on ``columns``, which compresses
    them while the trace goes on and writes them by :meth:`ColumnWriter.finish`."""
    values = np.asarray(values)
    columns.put(_dataset(group, name, values.shape[0], dtype), values)


def _write_strings(columns: ColumnWriter, group: h5py.Group, name: str, values) -> None:
    ds = _dataset(group, name, len(values), _STR)
    digest = hashlib.sha256()
    lo = 0
    # Written as UTF-8 bytes, which h5py stores as they are: a compact column encodes each
    # of its parts once, not each of its rows (3.3 million flow names in a training step).
    for chunk in utf8_chunks(values, WRITE_CHUNK):
        ds[lo : lo + len(chunk)] = np.array(chunk, dtype=object)
        digest.update(b"\0".join(chunk) + b"\0")  # as _hash_strings hashes the decoded strings
        lo += len(chunk)
        columns.poll()  # numeric columns compressed meanwhile
    ds.attrs["sha256"] = digest.hexdigest()


def _hash_strings(digest, values) -> None:
    """Add ``values`` to ``digest`` as the ``sha256`` attribute of a string dataset holds
    them: UTF-8, each followed by a NUL (which no stored string has)."""
    if len(values):
        digest.update(("\0".join(values) + "\0").encode("utf-8"))


def _canonical(value) -> str:
    """An attribute value as text that changes whenever the value does: exact for floats
    (``repr`` round-trips), the same across NumPy versions (no array printing options)."""
    if isinstance(value, np.ndarray):
        return "[" + ",".join(_canonical(v) for v in value.tolist()) + "]"
    if isinstance(value, np.generic):
        value = value.item()
    return f"{type(value).__name__}:{value!r}"


def _layout(dataset: h5py.Dataset) -> str:
    """How HDF5 stores ``dataset``, as text: its datatype in HDF5's own encoding (a float's
    exponent bias, say, which NumPy's dtype does not show), shape, chunk shape and filters
    with their parameters (a shuffle's element size, say)."""
    plist = dataset.id.get_create_plist()
    filters = [plist.get_filter(i)[:3] for i in range(plist.get_nfilters())]
    return f"{dataset.id.get_type().encode().hex()}\0{dataset.shape}\0{dataset.chunks}\0{filters}"


def _metadata_digest(objects: list[tuple[str, h5py.HLObject]]) -> str:
    """SHA-256 (hex) of a file's metadata, given its ``objects`` (:func:`_objects`): each
    object's path (sorted), a dataset's :func:`_layout`, then each attribute's name (sorted)
    and :func:`_canonical` value, all but ``metadata_sha256`` itself. HDF5 keeps these in
    object headers that it does not checksum: one flipped bit can turn float64 into float128
    or change a float's exponent bias, and every value read with it."""
    digest = hashlib.sha256()
    for name, item in sorted(objects, key=lambda named: named[0]):
        if isinstance(item, h5py.Dataset):
            digest.update(f"{name}\0{_layout(item)}\n".encode())
        attrs = item.attrs
        for key in sorted(attrs):
            if name == "/" and key == "metadata_sha256":
                continue
            digest.update(f"{name}\0{key}\0{_canonical(attrs[key])}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _tag_group_name(key: str) -> str:
    """The name of tag ``key``'s group (see the schema): distinct for distinct names, and
    never a path, ``.`` (the group itself) or empty, which HDF5 would misread or refuse."""
    if key == "":
        return "%"
    if key == ".":
        return "%2E"
    return key.replace("%", "%25").replace("/", "%2F")


def _write_tag(columns: ColumnWriter, group: h5py.Group, key: str, values: Sequence[str]) -> None:
    # Categories in the order they first appear (flowsim.strings.coded).
    categories, codes = coded(values)
    tag = group.create_group(_tag_group_name(key))
    tag.attrs["name"] = key
    _write_array(columns, tag, "codes", codes, np.int64)
    _write_strings(columns, tag, "categories", list(categories))


def _write_segments(columns: ColumnWriter, group: h5py.Group, indptr: np.ndarray, result: SimulationResult) -> None:
    lo, hi = int(indptr[0]), int(indptr[-1])
    _write_array(columns, group, "segment_indptr", indptr - lo, np.int64)
    for column in _SEGMENT_COLUMNS:
        _write_array(columns, group, column, getattr(result, column)[lo:hi], np.float64)


def _check_shapes(topology: Topology, workload: Workload, routes: Routes, result: SimulationResult) -> None:
    n = len(workload)
    if routes.n_flows != n or result.n_flows != n:
        raise InputError(
            f"trace parts disagree on the flow count: workload {n}, routes {routes.n_flows}, result {result.n_flows}"
        )
    if routes.n_links != topology.n_links or result.link_bytes.shape[0] != topology.n_links:
        raise InputError(
            f"trace parts disagree on the link count: topology {topology.n_links}, routes {routes.n_links}, "
            f"result {result.link_bytes.shape[0]}"
        )


def _check_strings(values, subject) -> None:
    """Raise an :class:`InputError` naming ``subject(i)`` and the value for the first of
    ``values`` that a trace cannot store."""
    # One pass over each chunk's joined text (a chunk: millions of flow names would otherwise
    # be joined into one string of hundreds of MB), or over a JoinedStrings' parts, which
    # hold every character of its rows; the row is looked for only when something is wrong.
    pieces = values.parts if isinstance(values, JoinedStrings) else chunks(values, WRITE_CHUNK)
    if all(unstorable_text("".join(piece)) is None for piece in pieces):
        return
    for i, value in enumerate(values):
        why = unstorable_text(value)
        if why is not None:
            raise InputError(f"{subject(i)} {value!r} cannot be stored in a trace: {why}")


def check_writable(topology: Topology, workload: Workload, *, scenario_text: str = "") -> None:
    """Check that :func:`write_trace` can store every string of a run; call it before the
    run to fail before the simulation rather than after.

    Raises
    ------
    InputError
        Naming the node, server, link, flow or tag with a string that has a NUL character
        (HDF5 strings end at one) or a lone surrogate (not encodable as UTF-8).
    """
    _check_strings(topology.node_names, lambda i: "node name")
    _check_strings(topology.server_names, lambda i: "server name")
    _check_strings(topology.link_names, lambda i: "link name")
    _check_strings(topology.link_technology, lambda i: f"link {topology.link_names[i]!r}: technology")
    _check_strings(workload.names, lambda i: "flow name")
    _check_strings(list(workload.tags), lambda i: "tag name")
    for key, values in workload.tags.items():
        # Each distinct value once; a bad one names the first flow that has it.
        categories, codes = coded(values)
        _check_strings(
            categories,
            lambda i, key=key, codes=codes: f"flow {workload.names[int(np.argmax(codes == i))]!r}: tag {key!r}: value",
        )
    why = unstorable_text(scenario_text)
    if why is not None:
        raise InputError(f"the scenario text cannot be stored in a trace: {why}")


def _write_topology(columns: ColumnWriter, root: h5py.File, topology: Topology) -> None:
    g = root.create_group("topology")
    g.attrs["node_kinds"] = [k.name for k in NodeKind]
    g.attrs["link_tiers"] = [t.name for t in LinkTier]
    _write_strings(columns, g, "node_name", topology.node_names)
    for name in ("node_kind", "node_server", "node_nic"):
        _write_array(columns, g, name, getattr(topology, name), np.int64)
    _write_strings(columns, g, "server_name", topology.server_names)
    _write_array(columns, g, "server_p2p", topology.server_p2p, np.bool_)
    _write_array(columns, g, "server_net_latency_s", topology.server_net_latency_s, np.float64)
    _write_array(columns, g, "server_step_latency_s", topology.server_step_latency_s, np.float64)
    _write_array(columns, g, "server_gpu_sm", topology.server_gpu_sm, np.int64)
    _write_array(columns, g, "server_nic_ports", topology.server_nic_ports, np.int64)
    _write_strings(columns, g, "link_name", topology.link_names)
    for name, dtype in (
        ("link_src", np.int64), ("link_dst", np.int64), ("link_capacity_Bps", np.float64),
        ("link_latency_s", np.float64), ("link_tier", np.int64), ("link_shared", np.bool_),
    ):
        _write_array(columns, g, name, getattr(topology, name), dtype)
    _write_strings(columns, g, "link_technology", topology.link_technology)


def _write_flows(
    columns: ColumnWriter, root: h5py.File, topology: Topology, workload: Workload, routes: Routes,
    result: SimulationResult,
) -> None:
    g = root.create_group("flows")
    g.attrs["n_flows"] = len(workload)
    # The columns the flows hold are compressed while their names are written; the node
    # ids, made for the trace, after (queued, a column is held until it is written).
    for column in _WORKLOAD_COLUMNS:
        _write_array(columns, g, column, getattr(workload, column), np.float64)
    for column in _RESULT_COLUMNS:
        _write_array(columns, g, column, getattr(result, column), np.float64)
    _write_array(columns, g, "dep_indptr", workload.dep_indptr, np.int64)
    _write_array(columns, g, "dep_indices", workload.dep_indices, np.int64)
    _write_array(columns, g, "link_indptr", routes.flow_link_indptr, np.int64)
    _write_array(columns, g, "link_indices", routes.flow_link_indices, np.int64)
    _write_strings(columns, g, "name", workload.names)
    node_ids = topology.node_index
    for column in ("src", "dst"):
        nodes, codes = coded(getattr(workload, column))  # each distinct node looked up once
        try:
            ids = np.fromiter(map(node_ids.__getitem__, nodes), dtype=np.int64, count=len(nodes))
        except KeyError as err:
            raise InputError(f"flow {column} {err.args[0]!r} is not a node of the topology") from None
        _write_array(columns, g, column, ids[codes], np.int64)
        columns.finish()  # one such column held at a time
    tags = g.create_group("tags")
    for key, values in workload.tags.items():
        _write_tag(columns, tags, key, values)
    if result.flow_segment_indptr is not None:
        _write_segments(columns, g, result.flow_segment_indptr, result)


def _write_links(columns: ColumnWriter, root: h5py.File, result: SimulationResult) -> None:
    g = root.create_group("links")
    g.attrs["n_links"] = result.link_bytes.shape[0]
    g.attrs["segments_recorded"] = result.link_segment_indptr is not None
    _write_array(columns, g, "capacity_Bps", result.link_capacity_Bps, np.float64)
    _write_array(columns, g, "bytes", result.link_bytes, np.float64)
    if result.link_segment_indptr is not None:
        _write_segments(columns, g, result.link_segment_indptr, result)


def _check_jobs(jobs: Mapping[str, np.ndarray], n_links: int) -> None:
    """An :class:`InputError` unless ``jobs`` holds exactly :data:`JOB_COLUMNS`, each table's
    columns of one length, the iteration pointer over the iteration rows."""
    if set(jobs) != set(JOB_COLUMNS):
        raise InputError(f"jobs: expected the columns {', '.join(JOB_COLUMNS)}, got {', '.join(jobs)}")
    lengths: dict[str, int] = {}
    for name, (table, _) in JOB_COLUMNS.items():
        n = len(jobs[name]) - (1 if table == "indptr" else 0)
        if lengths.setdefault("job" if table == "indptr" else table, n) != n:
            raise InputError(f"jobs: column {name!r} has {len(jobs[name])} rows, unlike the rest of its table")
    indptr = np.asarray(jobs["iteration_indptr"])
    if indptr[0] != 0 or indptr[-1] != lengths["iteration"] or np.any(np.diff(indptr) < 0):
        raise InputError("jobs: iteration_indptr is not an index pointer over the iteration rows")
    links = np.asarray(jobs["contention_link"])
    if np.any((links < 0) | (links >= n_links)):
        raise InputError("jobs: contention_link holds an id that is not a link of the topology")


def _write_jobs(columns: ColumnWriter, root: h5py.File, jobs: Mapping[str, np.ndarray]) -> None:
    g = root.create_group("jobs")
    g.attrs["n_jobs"] = len(jobs["name"])
    for name, (_, kind) in JOB_COLUMNS.items():
        if kind == "strings":
            _write_strings(columns, g, name, [str(v) for v in jobs[name]])
        else:
            _write_array(columns, g, name, np.asarray(jobs[name]), np.int64 if kind == "integers" else np.float64)


def write_trace(
    path: str | os.PathLike,
    topology: Topology,
    workload: Workload,
    routes: Routes,
    result: SimulationResult,
    *,
    scenario_text: str = "",
    jobs: Mapping[str, np.ndarray] | None = None,
    training: StepBreakdown | None = None,
    job_training: Mapping[str, StepBreakdown] | None = None,
) -> Path:
    """Write one run to an HDF5 trace (schema :data:`SCHEMA_VERSION`), atomically.

    Parameters
    ----------
    path : str or path-like
        Target file; replaced if it exists. Its directory must exist.
    topology : Topology
        The network the run used.
    workload : Workload
        The flows; ``src`` and ``dst`` must be node names of ``topology``.
    routes : Routes
        One route per flow over ``topology``'s links.
    result : SimulationResult
        What :func:`flowsim.simulate` returned for these flows and routes.
    scenario_text : str
        The scenario file the run came from, stored verbatim.
    jobs : mapping of str to numpy.ndarray, optional
        The ``/jobs`` columns (:data:`JOB_COLUMNS`), as
        :meth:`flowsim.jobresults.JobsReport.table` gives them.
    training : StepBreakdown, optional
        The run's training step broken down (:func:`flowsim.training.training_breakdown`),
        stored in ``/training``.
    job_training : mapping of str to StepBreakdown, optional
        Each training job's first iteration broken down, by job name
        (:func:`flowsim.training.job_breakdowns`), stored in ``/job_training``.

    Returns
    -------
    Path
        The trace's path.

    Raises
    ------
    InputError
        When the parts disagree on the flow or link count, a flow names an unknown node, or
        a string cannot be stored (see :func:`check_writable`); nothing is written then.
    OSError
        When the directory is not writable, or the disk has no room for the trace
        (``ENOSPC``: checked before writing against :func:`trace_bytes`, and caught if the
        disk fills up anyway); no file is left behind.

    Notes
    -----
    Written whole or not at all (:func:`flowsim.files.replaced_atomically`): on any error
    or a Ctrl-C ``path`` is untouched.
    """
    _check_shapes(topology, workload, routes, result)
    check_writable(topology, workload, scenario_text=scenario_text)
    if jobs is not None:
        _check_jobs(jobs, topology.n_links)
        _check_strings([str(v) for name in ("name", "kind", "placement") for v in jobs[name]], lambda i: "job text")
    target = Path(path)
    needs_bytes = trace_bytes(topology, workload, routes, result, scenario_text)
    if jobs is not None:
        needs_bytes += sum(np.asarray(v).nbytes + 32 * len(v) for v in jobs.values())
    steps = [training] if training is not None else []
    steps += list((job_training or {}).values())
    for step in steps:  # the activity chart; the rest is a few hundred bytes
        needs_bytes += 32 * step.activity_start_s.shape[0] + 4096
    with replaced_atomically(target, needs_bytes=needs_bytes) as tmp_name:
        try:
            _write_file(tmp_name, topology, workload, routes, result, scenario_text, jobs, training, job_training)
        except (OSError, RuntimeError) as err:
            # HDF5 reports a failed write as OSError or RuntimeError, the errno only in its text.
            if getattr(err, "errno", None) == errno.ENOSPC or "errno = 28" in str(err) or "No space left" in str(err):
                raise OSError(
                    errno.ENOSPC, "the disk filled up while writing the trace; nothing was written", str(target)
                ) from None
            raise
    return target


def _write_file(
    tmp_name: str, topology: Topology, workload: Workload, routes: Routes, result: SimulationResult, scenario_text: str,
    jobs: Mapping[str, np.ndarray] | None, training: StepBreakdown | None,
    job_training: Mapping[str, StepBreakdown] | None,
) -> None:
    with h5py.File(tmp_name, "w") as root, ColumnWriter() as columns:
        root.attrs["format"] = FORMAT
        root.attrs["schema_version"] = SCHEMA_VERSION
        root.attrs["flowsim_version"] = flowsim.__version__
        root.attrs["numba_version"] = numba.__version__
        root.attrs["numpy_version"] = np.__version__
        root.attrs["h5py_version"] = h5py.__version__
        root.attrs["created_utc"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        root.attrs["scenario_text"] = scenario_text
        _write_topology(columns, root, topology)
        _write_flows(columns, root, topology, workload, routes, result)
        _write_links(columns, root, result)
        if jobs is not None:
            _write_jobs(columns, root, jobs)
        summary = root.create_group("summary")
        summary.attrs.update(result.summary())
        summary.attrs["n_links"] = topology.n_links
        summary.attrs["n_rate_updates"] = result.n_rate_updates
        summary.attrs["n_rates_resolved"] = result.n_rates_resolved
        summary.attrs["n_rates_changed"] = result.n_rates_changed
        if training is not None:
            _write_training(columns, root.create_group("training"), training)
        if job_training:
            steps = root.create_group("job_training")
            steps.attrs["jobs"] = list(job_training)
            for name, step in job_training.items():
                _write_training(columns, steps.create_group(name), step)
        columns.finish()
        root.attrs["metadata_sha256"] = _metadata_digest(_objects(Path(tmp_name), root))


#: Float attributes of ``/training``.
_TRAINING_FIGURES = ("step_s", "compute_s", "bubble_s", "critical_compute_s", "critical_wait_s")
#: Integer attributes of ``/training``: the step's layout (``virtual_stages`` and ``cp`` since
#: 2026-12-06, read as 1 where absent).
_TRAINING_LAYOUT = ("tp", "pp", "dp", "ep", "n_microbatches", "virtual_stages", "cp")
_LATER_LAYOUT = ("virtual_stages", "cp")


def _write_training(columns: ColumnWriter, g: h5py.Group, b: StepBreakdown) -> None:
    for key in _TRAINING_FIGURES:
        g.attrs[key] = float(getattr(b, key))
    g.attrs["communication_kinds"] = list(COMMUNICATION_KINDS)
    g.attrs["critical_communication_s"] = np.array([b.critical_communication_s[k] for k in COMMUNICATION_KINDS])
    g.attrs["activities"] = list(ACTIVITIES)
    g.attrs["tiers"] = [t.tier for t in b.tiers]
    for key in _TRAINING_LAYOUT:
        g.attrs[key] = int(b.layout.get(key, 1))
    for name, values, dtype in (
        ("activity_stage", b.activity_stage, np.int64), ("activity_kind", b.activity_kind, np.int64),
        ("activity_start_s", b.activity_start_s, np.float64), ("activity_end_s", b.activity_end_s, np.float64),
        ("tier_n_links", np.array([t.n_links for t in b.tiers]), np.int64),
        ("tier_max_utilization", np.array([t.max_utilization for t in b.tiers]), np.float64),
        ("tier_mean_utilization", np.array([t.mean_utilization for t in b.tiers]), np.float64),
        ("bottleneck_tier", np.array([i for i, t in enumerate(b.tiers) for _ in t.top_links]), np.int64),
        ("bottleneck_link", np.array([link for t in b.tiers for link in t.top_links]), np.int64),
        ("bottleneck_utilization", np.array([u for t in b.tiers for u in t.top_utilization]), np.float64),
    ):
        _write_array(columns, g, name, np.asarray(values, dtype=dtype), dtype)


#: Room for HDF5's own metadata in :func:`trace_bytes`: object headers, chunk indexes, the
#: superblock. A trace of 12 flows, nearly all metadata, takes about 130 kB.
_HDF5_OVERHEAD_BYTES = 1 << 18


def trace_bytes(
    topology: Topology, workload: Workload, routes: Routes, result: SimulationResult, scenario_text: str = ""
) -> int:
    """The most bytes :func:`write_trace` takes for a run: every column uncompressed, each
    string with HDF5's overhead, plus room for HDF5's own metadata. Compression usually makes
    the file much smaller; this is what the disk must have free before the write starts."""
    arrays = (
        topology.node_kind, topology.node_server, topology.node_nic, topology.server_p2p,
        topology.server_net_latency_s, topology.server_step_latency_s, topology.server_gpu_sm,
        topology.server_nic_ports, topology.link_src,
        topology.link_dst, topology.link_capacity_Bps, topology.link_latency_s, topology.link_tier,
        topology.link_shared, workload.dep_indptr, workload.dep_indices, routes.flow_link_indptr,
        routes.flow_link_indices, result.link_capacity_Bps, result.link_bytes,
        *(getattr(workload, c) for c in _WORKLOAD_COLUMNS), *(getattr(result, c) for c in _RESULT_COLUMNS),
        *(getattr(result, c) for c in _SEGMENT_COLUMNS if getattr(result, c) is not None),
        *(i for i in (result.flow_segment_indptr, result.link_segment_indptr) if i is not None),
    )
    n_bytes = sum(np.asarray(a).nbytes for a in arrays) + 16 * len(workload)  # src and dst ids
    strings = [
        topology.node_names, topology.server_names, topology.link_names, topology.link_technology, workload.names,
        *(coded(values)[0] for values in workload.tags.values()),
    ]
    # A variable-length string: a 16-byte reference in the dataset, its bytes and a 16-byte
    # header in HDF5's global heap.
    n_bytes += sum(utf8_size(values) + 32 * len(values) for values in strings)
    n_bytes += 8 * len(workload) * len(workload.tags) + len(scenario_text.encode("utf-8"))
    return int(n_bytes * 1.01) + _HDF5_OVERHEAD_BYTES


@dataclass(frozen=True, eq=False)
class Trace(FlowTimes):
    """A trace read back into memory: NumPy arrays named as in the schema.

    Attributes
    ----------
    path : Path
    metadata : dict
        The root attributes (versions, ``created_utc``, ``schema_version``, ...).
    scenario_text : str
    topology : Topology
    names : object ndarray[n_flows] of str
    src, dst : int64[n_flows]
        Node ids; ``topology.node_names[i]`` names them.
    size_bytes, start_s, delay_s, overhead_s, weight, cap_Bps : float64[n_flows]
    dep_indptr, dep_indices : int64
        Dependency CSR pair.
    ready_s, transfer_start_s, finish_s : float64[n_flows]
    flow_link_indptr, flow_link_indices : int64
        Route CSR pair.
    tags : dict of str to object ndarray[n_flows] of str
        Keyed by the tag's column name.
    link_capacity_Bps, link_bytes : float64[n_links]
    link_segment_indptr : int64[n_links + 1] or None
    link_segment_start_s, link_segment_end_s, link_segment_rate_Bps : float64 or None
    flow_segment_indptr : int64[n_flows + 1] or None
    flow_segment_start_s, flow_segment_end_s, flow_segment_rate_Bps : float64 or None
    summary : dict of str to int or float
        The ``/summary`` attributes: counts (``n_*``) as int, the rest as float.
    jobs : dict of str to numpy.ndarray or None
        The ``/jobs`` columns (:data:`JOB_COLUMNS`; strings as object arrays), or None for a
        trace without jobs (and every trace written before jobs existed).
    training : StepBreakdown or None
        The ``/training`` group: the run's training step broken down; None without one.
    job_training : dict of str to StepBreakdown
        The ``/job_training`` groups by job name: each training job's first iteration broken
        down; empty without training jobs.
    """

    path: Path
    metadata: Mapping[str, object]
    scenario_text: str
    topology: Topology
    names: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    delay_s: np.ndarray
    overhead_s: np.ndarray
    weight: np.ndarray
    cap_Bps: np.ndarray
    dep_indptr: np.ndarray
    dep_indices: np.ndarray
    ready_s: np.ndarray
    transfer_start_s: np.ndarray
    finish_s: np.ndarray
    flow_link_indptr: np.ndarray
    flow_link_indices: np.ndarray
    tags: Mapping[str, np.ndarray]
    link_capacity_Bps: np.ndarray
    link_bytes: np.ndarray
    summary: Mapping[str, int | float]
    link_segment_indptr: np.ndarray | None = None
    link_segment_start_s: np.ndarray | None = None
    link_segment_end_s: np.ndarray | None = None
    link_segment_rate_Bps: np.ndarray | None = None
    flow_segment_indptr: np.ndarray | None = None
    flow_segment_start_s: np.ndarray | None = None
    flow_segment_end_s: np.ndarray | None = None
    flow_segment_rate_Bps: np.ndarray | None = None
    jobs: Mapping[str, np.ndarray] | None = None
    training: StepBreakdown | None = None
    job_training: Mapping[str, StepBreakdown] = field(default_factory=dict)

    def busiest_links(self, n: int) -> np.ndarray:
        """Ids of the ``n`` links with the highest mean utilization, busiest first (int64);
        links that carried nothing are left out."""
        util = self.link_utilization()
        order = np.argsort(-util, kind="stable")
        return order[util[order] > 0][:n].astype(np.int64)

    def link_segments(self, link: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(start_s, end_s, rate_Bps)`` of one link's constant-rate pieces."""
        if self.link_segment_indptr is None:
            raise InputError(f"{self.path}: link rates were not recorded in this trace")
        if not 0 <= link < self.topology.n_links:
            raise IndexError(f"link {link} out of range: there are {self.topology.n_links}")
        start, end, rate = self.link_segment_start_s, self.link_segment_end_s, self.link_segment_rate_Bps
        assert start is not None and end is not None and rate is not None  # read with the indptr
        lo, hi = self.link_segment_indptr[link], self.link_segment_indptr[link + 1]
        return start[lo:hi], end[lo:hi], rate[lo:hi]

    def route(self, flow: int) -> np.ndarray:
        """The link ids of one flow's route, in order."""
        return self.flow_link_indices[self.flow_link_indptr[flow] : self.flow_link_indptr[flow + 1]]

    def to_pandas(self) -> dict:
        """The node, link and flow tables as pandas DataFrames (needs pandas).

        Returns
        -------
        dict
            ``"nodes"`` (name, kind, server), ``"links"`` (name, src, dst, technology, tier,
            capacity_Bps, latency_s, bytes, utilization) and ``"flows"`` (name, src, dst,
            size_bytes, start_s, ready_s, transfer_start_s, finish_s, fct_s, hops, one
            column per tag); node, kind, tier, technology and tag columns are categorical.
            A tag named like one of the flow table's own columns (a flow list's
            ``finish_s`` column, say) is the column ``tag:<name>`` (prefixed again while
            another tag has that name), so that it neither replaces that column nor is
            lost.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Trace.to_pandas needs pandas: pip install pandas") from None
        t = self.topology
        node_names = pd.Categorical.from_codes(np.arange(t.n_nodes), categories=list(t.node_names))
        kinds = [k.name for k in NodeKind]
        tiers = [k.name for k in LinkTier]
        server_names = np.array(list(t.server_names) + [""], dtype=object)
        nodes = pd.DataFrame({
            "name": list(t.node_names),
            "kind": pd.Categorical.from_codes(t.node_kind, categories=kinds),
            "server": server_names[t.node_server],
        })
        links = pd.DataFrame({
            "name": list(t.link_names),
            "src": node_names[t.link_src],
            "dst": node_names[t.link_dst],
            "technology": pd.Categorical(list(t.link_technology)),
            "tier": pd.Categorical.from_codes(t.link_tier, categories=tiers),
            "capacity_Bps": self.link_capacity_Bps,
            "latency_s": t.link_latency_s,
            "bytes": self.link_bytes,
            "utilization": self.link_utilization(),
        })
        flows = pd.DataFrame({
            "name": self.names,
            "src": node_names[self.src],
            "dst": node_names[self.dst],
            "size_bytes": self.size_bytes,
            "start_s": self.start_s,
            "ready_s": self.ready_s,
            "transfer_start_s": self.transfer_start_s,
            "finish_s": self.finish_s,
            "fct_s": self.fct_s,
            "hops": np.diff(self.flow_link_indptr),
        })
        # Tags named like the table's own columns go last, so that a tag itself named
        # "tag:<name>" keeps its name and theirs is the one prefixed again.
        for key in sorted(self.tags, key=lambda key: key in flows):
            column = key
            while column in flows:
                column = f"tag:{column}"
            flows[column] = pd.Categorical(self.tags[key])
        return {"nodes": nodes, "links": links, "flows": flows}


def _open_error(path: Path, why: str) -> InputError:
    return InputError(f"{path}: {why}")


def _check_header(path: Path, root: h5py.File) -> dict[str, object]:
    metadata = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in root.attrs.items()}
    if metadata.get("format") != FORMAT:
        raise _open_error(path, f"not a flowsim trace (the root attribute 'format' is not {FORMAT!r})")
    version = metadata.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _open_error(path, f"not a flowsim trace (schema_version {version!r} is not an integer)")
    if version > SCHEMA_VERSION:
        raise _open_error(
            path,
            f"trace schema version {version} is newer than this flowsim ({flowsim.__version__}) reads "
            f"(up to {SCHEMA_VERSION}); upgrade flowsim",
        )
    if version < 1:
        raise _open_error(path, f"unknown trace schema version {version}")
    if not isinstance(metadata.get("scenario_text", ""), str):
        raise _open_error(
            path, f"damaged trace: the root attribute 'scenario_text' is {metadata['scenario_text']!r}, expected text"
        )
    return metadata


def _damaged(path: Path, dataset: str, why: str) -> InputError:
    return _open_error(path, f"damaged trace: {dataset} {why}")


def _group(path: Path, parent: h5py.Group, name: str) -> h5py.Group:
    group = parent[name]
    if not isinstance(group, h5py.Group):
        raise _damaged(path, group.name, "is not a group")
    return group


def _count(path: Path, group: h5py.Group, attribute: str) -> int:
    value = group.attrs.get(attribute)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _damaged(path, group.name, f"attribute {attribute!r} is {value!r}, expected a non-negative integer")
    return int(value)


#: Most times deflate (gzip) can shrink data. A dataset whose rows take more than this many
#: times the bytes it stores has a damaged row count, which reading would allocate.
_MAX_EXPANSION = 1032


def _column(path: Path, group: h5py.Group, name: str, rows: tuple[int, str] | None, kind: str) -> np.ndarray:
    """Dataset ``name`` of ``group``, checked to be one-dimensional, of ``kind``
    ("integers", "numbers", "booleans" or "strings"), no longer than the bytes it stores
    can hold and, when ``rows`` (count, what it counts) is given, that long."""
    ds = group[name]
    if not isinstance(ds, h5py.Dataset):
        raise _damaged(path, ds.name, "is not a dataset")
    if ds.ndim != 1:
        raise _damaged(path, ds.name, f"has shape {ds.shape}, expected one dimension")
    is_str = h5py.check_string_dtype(ds.dtype) is not None
    fits = {
        "integers": ds.dtype.kind in "iu", "numbers": ds.dtype.kind in "iuf", "booleans": ds.dtype.kind == "b",
        "strings": is_str,
    }[kind]
    if not fits:
        raise _damaged(path, ds.name, f"has dtype {ds.dtype}, expected {kind}")
    if rows is not None and ds.shape[0] != rows[0]:
        raise _damaged(path, ds.name, f"has {ds.shape[0]} rows, expected {rows[0]} ({rows[1]})")
    stored = ds.id.get_storage_size()
    if ds.shape[0] * ds.dtype.itemsize > _MAX_EXPANSION * stored:
        raise _damaged(path, ds.name, f"has {ds.shape[0]} rows but stores only {stored} bytes")
    try:
        values = ds.asstr()[:] if is_str else ds[:]
    except OSError as err:  # Fletcher-32 or inflate refused a stored chunk
        raise _damaged(path, ds.name, f"cannot be read back: its stored data is damaged ({err})") from None
    expected = ds.attrs.get("sha256")
    if is_str and expected is not None:
        digest = hashlib.sha256()
        for lo in range(0, values.shape[0], WRITE_CHUNK):
            _hash_strings(digest, values[lo : lo + WRITE_CHUNK].tolist())
        if digest.hexdigest() != expected:
            raise _damaged(path, ds.name, "does not match its checksum (attribute 'sha256'): its strings changed")
    return values


def _finite_at_least_zero(values: np.ndarray) -> np.ndarray:
    return np.isfinite(values) & (values >= 0)


#: What each numeric flow and link column may hold, as the workload checks and the engine
#: produce them: a test of the values and what it expects, for the message.
_VALUES = {
    **{c: (_finite_at_least_zero, "a finite number >= 0")
       for c in ("size_bytes", "start_s", "delay_s", "overhead_s", "bytes", *_RESULT_COLUMNS, *_SEGMENT_COLUMNS)},
    "weight": (lambda v: np.isfinite(v) & (v > 0), "a finite number > 0"),
    "capacity_Bps": (lambda v: np.isfinite(v) & (v > 0), "a finite number > 0"),
    "cap_Bps": (lambda v: v > 0, "a number > 0 (inf for no cap)"),
}


def _numbers(path: Path, group: h5py.Group, name: str, rows: tuple[int, str] | None) -> np.ndarray:
    """A numeric column, checked as :func:`_column` does and to hold the values
    :data:`_VALUES` allows it (a NaN finish time would otherwise pass as a time)."""
    values = _column(path, group, name, rows, "numbers")
    test, expected = _VALUES[name]
    bad = np.flatnonzero(~test(values))
    if bad.size:
        i = int(bad[0])
        raise _damaged(path, group[name].name, f"row {i} is {values[i].item()!r}, expected {expected}")
    return values


def _unique(path: Path, group: h5py.Group, name: str, rows: tuple[int, str]) -> np.ndarray:
    """A string column, checked as :func:`_column` does and to repeat no value."""
    values = _column(path, group, name, rows, "strings")
    repeat = first_repeat(values.tolist())
    if repeat is not None:
        i, j = repeat
        raise _damaged(path, group[name].name, f"rows {i} and {j} are both {values[j]!r}; they must be unique")
    return values


#: Topology columns besides the names: (the table whose rows they are, their kind).
_TOPOLOGY_COLUMNS = {
    "node_kind": ("node", "integers"), "node_server": ("node", "integers"), "node_nic": ("node", "integers"),
    "server_p2p": ("server", "booleans"), "link_src": ("link", "integers"), "link_dst": ("link", "integers"),
    "link_capacity_Bps": ("link", "numbers"), "link_latency_s": ("link", "numbers"),
    "link_technology": ("link", "strings"), "link_tier": ("link", "integers"), "link_shared": ("link", "booleans"),
}


def _read_topology(path: Path, g: h5py.Group) -> Topology:
    """The topology in ``g``: each column's type and length checked here, the values (ids,
    kinds, tiers, capacities, unique names) by :class:`Topology`."""
    names = {table: _column(path, g, f"{table}_name", None, "strings") for table in ("node", "server", "link")}
    rows = {table: (values.shape[0], f"{table}s in {g.name}/{table}_name") for table, values in names.items()}
    columns: dict[str, Any] = {
        column: _column(path, g, column, rows[table], kind) for column, (table, kind) in _TOPOLOGY_COLUMNS.items()
    }
    # Traces written before these columns have none: 0, the default (the step latency: the
    # network latency; the ports: 1).
    for column, kind in (("server_net_latency_s", "numbers"), ("server_gpu_sm", "integers"),
                         ("server_step_latency_s", "numbers"), ("server_nic_ports", "integers")):
        if column in g:
            columns[column] = _column(path, g, column, rows["server"], kind)
    try:
        return Topology(
            node_names=tuple(names["node"]), server_names=tuple(names["server"]), link_names=tuple(names["link"]),
            link_technology=tuple(columns.pop("link_technology")), **columns,
        )
    except InputError as err:
        raise _open_error(path, f"damaged topology in trace: {err}") from None


def _indptr(path: Path, group: h5py.Group, name: str, rows: tuple[int, str], n_entries: int) -> np.ndarray:
    """A CSR index pointer of ``rows[0]`` rows into ``n_entries`` entries, checked."""
    indptr = _column(path, group, name, (rows[0] + 1, f"one more than {rows[1]}"), "integers")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != n_entries:
        raise _damaged(
            path, group[name].name,
            f"is not a valid index pointer: it must start at 0, never decrease and end at {n_entries}",
        )
    return indptr


def _ids(
    path: Path, group: h5py.Group, name: str, rows: tuple[int, str] | None, n_ids: int, what: str
) -> np.ndarray:
    """An id column, checked to hold row numbers of a table of ``n_ids`` ``what``."""
    ids = _column(path, group, name, rows, "integers")
    bad = np.flatnonzero((ids < 0) | (ids >= n_ids))
    if bad.size:
        i = int(bad[0])
        raise _damaged(path, group[name].name, f"row {i} is {int(ids[i])}, not one of the {n_ids} {what}")
    return ids


def _csr(
    path: Path, group: h5py.Group, prefix: str, rows: tuple[int, str], n_ids: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    indices = _ids(path, group, f"{prefix}_indices", None, n_ids, what)
    return _indptr(path, group, f"{prefix}_indptr", rows, indices.shape[0]), indices


def _segments(path: Path, group: h5py.Group, rows: tuple[int, str]) -> dict[str, np.ndarray]:
    """``indptr``, ``start_s``, ``end_s``, ``rate_Bps`` of a group's segments, if it has them."""
    if "segment_indptr" not in group:
        return {}
    columns = {c.removeprefix("segment_"): _numbers(path, group, c, None) for c in _SEGMENT_COLUMNS}
    n_segments = columns["start_s"].shape[0]
    for column in _SEGMENT_COLUMNS[1:]:
        if group[column].shape[0] != n_segments:
            raise _damaged(
                path, group[column].name, f"has {group[column].shape[0]} rows, expected {n_segments} (segments)"
            )
    return {"indptr": _indptr(path, group, "segment_indptr", rows, n_segments), **columns}


def _tags(path: Path, flows: h5py.Group, rows: tuple[int, str]) -> dict[str, np.ndarray]:
    tags = {}
    group = _group(path, flows, "tags")
    for key in group:
        tag = _group(path, group, key)
        # Traces written before tags carried their name have it only as the group's.
        name = tag.attrs.get("name", key)
        if not isinstance(name, str):
            raise _damaged(path, tag.name, f"attribute 'name' is {name!r}, expected text")
        if name in tags:
            raise _damaged(path, tag.name, f"is a second group of tag {name!r}")
        categories = _column(path, tag, "categories", None, "strings").astype(object)
        tags[name] = categories[_ids(path, tag, "codes", rows, categories.shape[0], "categories")]
    return tags


def _summary(path: Path, group: h5py.Group, n_flows: int, n_links: int) -> dict[str, int | float]:
    """The summary attributes: counts as int, the rest float; checked to be numbers, to
    include every one a trace has, and to agree with the flow and link counts."""
    summary: dict[str, int | float] = {}
    for key, value in group.attrs.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _damaged(path, group.name, f"attribute {key!r} is {value!r}, expected a number")
        if key in _SUMMARY_COUNTS:
            # Traces written before counts were stored as integers hold them as floats.
            if not (float(value).is_integer() and value >= 0):
                raise _damaged(path, group.name, f"attribute {key!r} is {value!r}, expected a non-negative integer")
            summary[key] = int(value)
        else:
            summary[key] = float(value)
    missing = [key for key in _SUMMARY_REQUIRED if key not in summary]
    if missing:
        raise _damaged(path, group.name, f"lacks the attribute {missing[0]!r}")
    for key, n, where in (("n_flows", n_flows, "/flows"), ("n_links", n_links, "/links")):
        if summary[key] != n:
            raise _damaged(path, group.name, f"has {key} {summary[key]} but {where} has {n}")
    return summary


def _jobs(path: Path, group: h5py.Group, n_links: int) -> dict[str, np.ndarray]:
    """The ``/jobs`` columns, each checked for its kind and its table's length, the
    iteration pointer and the link and job ids."""
    n_jobs = _count(path, group, "n_jobs")
    n_iterations = group["iteration_s"].shape[0] if isinstance(group.get("iteration_s"), h5py.Dataset) else 0
    n_contention = group["contention_link"].shape[0] if isinstance(group.get("contention_link"), h5py.Dataset) else 0
    rows = {"job": (n_jobs, f"n_jobs of {group.name}"), "iteration": (n_iterations, "iterations"),
            "contention": (n_contention, "contention rows")}
    columns: dict[str, np.ndarray] = {}
    for name, (table, kind) in JOB_COLUMNS.items():
        if table == "indptr":
            columns[name] = _indptr(path, group, name, rows["job"], n_iterations)
        elif name == "contention_link":
            columns[name] = _ids(path, group, name, rows[table], n_links, "links")
        else:
            columns[name] = _column(path, group, name, rows[table], kind)
    parties = columns["contention_job"]
    bad = np.flatnonzero((parties < -1) | (parties >= n_jobs))
    if bad.size:
        i = int(bad[0])
        raise _damaged(path, group["contention_job"].name, f"row {i} is {int(parties[i])}, not a job row or -1")
    for name in ("name", "kind", "placement"):
        columns[name] = columns[name].astype(object)
    return columns


def _attribute(path: Path, group: h5py.Group, key: str, kind: type) -> object:
    """Attribute ``key`` of ``group``, checked to be a ``kind`` (float: finite, >= 0; int:
    >= 1; list: strings; numpy.ndarray: finite numbers >= 0)."""
    value = group.attrs.get(key)
    if isinstance(value, np.generic):
        value = value.item()
    if kind is list and isinstance(value, np.ndarray) and value.dtype.kind in "OU":
        value = [str(v) for v in value.tolist()]
    fits = {
        float: isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value) and value >= 0,
        int: isinstance(value, int) and not isinstance(value, bool) and value >= 1,
        list: isinstance(value, list) and all(isinstance(v, str) for v in value),
        np.ndarray: isinstance(value, np.ndarray) and value.dtype.kind == "f" and bool(np.all(np.isfinite(value)))
        and bool(np.all(value >= 0)),
    }[kind]
    if not fits:
        raise _damaged(path, group.name, f"attribute {key!r} is {value!r}, expected {kind.__name__}")
    return float(value) if kind is float else value


def _training(path: Path, g: h5py.HLObject, n_links: int) -> StepBreakdown:
    """The ``/training`` group, checked: names match this flowsim's kinds and activities,
    ids lie in range, columns agree in length."""
    if not isinstance(g, h5py.Group):
        raise _damaged(path, g.name, "is not a group")
    kinds = _attribute(path, g, "communication_kinds", list)
    critical = cast(np.ndarray, _attribute(path, g, "critical_communication_s", np.ndarray))
    # Traces written before the kind "cp" (2026-12-06) have the others, in the same order.
    stored = len(COMMUNICATION_KINDS) - (kinds == list(COMMUNICATION_KINDS[:-1]))
    if kinds != list(COMMUNICATION_KINDS[:stored]) or critical.shape != (stored,):
        raise _damaged(path, g.name, f"has communication kinds {kinds!r}, expected {list(COMMUNICATION_KINDS)!r}")
    missing = len(COMMUNICATION_KINDS) - stored
    critical = np.concatenate([critical, np.zeros(missing)])
    if _attribute(path, g, "activities", list) != list(ACTIVITIES[:len(ACTIVITIES) - missing]):
        raise _damaged(path, g.name, f"has activities other than {list(ACTIVITIES)!r}")
    tiers = cast(list, _attribute(path, g, "tiers", list))
    per_tier = (len(tiers), f"tiers of {g.name}")

    def floats(name: str, rows: tuple[int, str] | None) -> np.ndarray:
        values = _column(path, g, name, rows, "numbers").astype(np.float64)
        bad = np.flatnonzero(~_finite_at_least_zero(values))
        if bad.size:
            row = int(bad[0])
            raise _damaged(path, g[name].name, f"row {row} is {values[row]!r}, expected a finite number >= 0")
        return values

    start = floats("activity_start_s", None)
    rows = (start.shape[0], f"rows of {g.name}/activity_start_s")
    end = floats("activity_end_s", rows)
    kind = _ids(path, g, "activity_kind", rows, len(ACTIVITIES), "activities")
    stage = _ids(path, g, "activity_stage", rows, int(cast(int, _attribute(path, g, "pp", int))), "stages")
    n_links_of = _column(path, g, "tier_n_links", per_tier, "integers")
    top_tier = _ids(path, g, "bottleneck_tier", None, len(tiers), "tiers")
    top_rows = (top_tier.shape[0], f"rows of {g.name}/bottleneck_tier")
    top_link = _ids(path, g, "bottleneck_link", top_rows, n_links, "links")
    top_util = floats("bottleneck_utilization", top_rows)
    usage = tuple(
        TierUsage(
            name, int(n_links_of[i]), float(high), float(mean), tuple(top_link[top_tier == i].tolist()),
            tuple(top_util[top_tier == i].tolist()),
        )
        for i, (name, high, mean) in enumerate(zip(
            tiers, floats("tier_max_utilization", per_tier), floats("tier_mean_utilization", per_tier), strict=True
        ))
    )
    figures = {key: cast(float, _attribute(path, g, key, float)) for key in _TRAINING_FIGURES}
    return StepBreakdown(
        critical_communication_s=dict(zip(COMMUNICATION_KINDS, critical.tolist(), strict=True)), tiers=usage,
        activity_stage=stage, activity_kind=kind, activity_start_s=start, activity_end_s=end,
        layout={key: int(cast(int, _attribute(path, g, key, int))) if key in g.attrs or key not in _LATER_LAYOUT
                else 1 for key in _TRAINING_LAYOUT}, **figures,
    )


def _read_trace(path: Path, root: h5py.File, metadata: Mapping[str, object]) -> Trace:
    """The trace in ``root``, every column checked against the schema and the counts it
    depends on, so that damage is reported here and not as a crash of whatever reads the
    trace."""
    topology = _read_topology(path, _group(path, root, "topology"))
    flows, links = _group(path, root, "flows"), _group(path, root, "links")
    n_flows, n_links = _count(path, flows, "n_flows"), _count(path, links, "n_links")
    if n_links != topology.n_links:
        raise _damaged(path, links.name, f"has n_links {n_links} but the topology has {topology.n_links} links")
    per_flow, per_link = (n_flows, f"n_flows of {flows.name}"), (n_links, f"n_links of {links.name}")
    dep_indptr, dep_indices = _csr(path, flows, "dep", per_flow, n_flows, "flows")
    link_indptr, link_indices = _csr(path, flows, "link", per_flow, n_links, "links")
    return Trace(
        path=path,
        metadata=metadata,
        scenario_text=cast(str, metadata.get("scenario_text", "")),  # a str: checked by _check_header
        topology=topology,
        names=_unique(path, flows, "name", per_flow),
        src=_ids(path, flows, "src", per_flow, topology.n_nodes, "nodes"),
        dst=_ids(path, flows, "dst", per_flow, topology.n_nodes, "nodes"),
        **{c: _numbers(path, flows, c, per_flow) for c in _WORKLOAD_COLUMNS + _RESULT_COLUMNS},
        dep_indptr=dep_indptr,
        dep_indices=dep_indices,
        flow_link_indptr=link_indptr,
        flow_link_indices=link_indices,
        tags=_tags(path, flows, per_flow),
        link_capacity_Bps=_numbers(path, links, "capacity_Bps", per_link),
        link_bytes=_numbers(path, links, "bytes", per_link),
        summary=_summary(path, _group(path, root, "summary"), n_flows, n_links),
        **{f"link_segment_{k}": v for k, v in _segments(path, links, per_link).items()},
        **{f"flow_segment_{k}": v for k, v in _segments(path, flows, per_flow).items()},
        jobs=_jobs(path, _group(path, root, "jobs"), n_links) if "jobs" in root else None,
        training=_training(path, root["training"], n_links) if "training" in root else None,
        job_training=_job_training(path, _group(path, root, "job_training"), n_links) if "job_training" in root
        else {},
    )


def _job_training(path: Path, g: h5py.Group, n_links: int) -> dict[str, StepBreakdown]:
    """The ``/job_training`` groups, in the order its attribute ``jobs`` names them."""
    names = cast(list, _attribute(path, g, "jobs", list))
    if sorted(names) != sorted(g):
        raise _damaged(path, g.name, f"holds {sorted(g)!r}, but its attribute 'jobs' names {names!r}")
    return {name: _training(path, g[name], n_links) for name in names}


def _objects(path: Path, group: h5py.Group) -> list[tuple[str, h5py.HLObject]]:
    """Every group and dataset from ``group`` down, by path; an :class:`InputError` if
    reading one would make HDF5 read another file: an external link, a dataset stored in
    external files or a virtual dataset (a crafted trace could so show another local file's
    bytes). Soft links are refused too: a trace has none, and they could loop. Links are
    looked at without being followed."""
    found: list[tuple[str, h5py.HLObject]] = [(group.name, group)]
    for name in group:
        link = group.get(name, getlink=True)
        where = f"{group.name.rstrip('/')}/{name}"
        if isinstance(link, h5py.ExternalLink):
            raise _open_error(
                path, f"refused: {where} is an external link to {link.filename!r}; a trace keeps all its data in itself"
            )
        if isinstance(link, h5py.SoftLink):
            raise _open_error(path, f"refused: {where} is a soft link to {link.path!r}, which a trace never has")
        item = group[name]
        if isinstance(item, h5py.Group):
            found += _objects(path, item)
        elif isinstance(item, h5py.Dataset):
            if item.external:
                files = ", ".join(repr(entry[0]) for entry in item.external)
                raise _open_error(path, f"refused: dataset {where} stores its data in other files ({files})")
            if item.is_virtual:
                raise _open_error(path, f"refused: dataset {where} is a virtual dataset, mapped from other files")
            found.append((where, item))
    return found


def _check_metadata(path: Path, root: h5py.File, objects: list[tuple[str, h5py.HLObject]]) -> None:
    """Raise an :class:`InputError` if the metadata do not match ``metadata_sha256``, or
    the file has checksummed datasets but not that digest (it was lost to damage)."""
    expected = root.attrs.get("metadata_sha256")
    if expected is None:
        sizes = root.get("flows/size_bytes")
        if isinstance(sizes, h5py.Dataset) and sizes.fletcher32:
            raise _damaged(path, "/", "lacks the attribute 'metadata_sha256' that its checksummed datasets come with")
        return
    if _metadata_digest(objects) != expected:
        raise _damaged(
            path, "/", "attributes or dataset types do not match their checksum (attribute 'metadata_sha256')"
        )


def open_trace(path: str | os.PathLike) -> Trace:
    """Read a trace written by :func:`write_trace` into memory.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    Trace

    Raises
    ------
    InputError
        Naming the file when it is missing, not a regular file, not HDF5, truncated or
        damaged (a checksum that does not match; naming the damaged dataset or attribute),
        not a flowsim trace, written with a newer schema version than this flowsim reads, or
        linked to other files (external links, external or virtual datasets: refused), or
        when ``path`` is not a path.
    """
    path = path_argument(path, "open_trace: path")
    try:
        mode = path.stat().st_mode
    except OSError:
        raise _open_error(path, "no such trace file") from None
    if not stat.S_ISREG(mode):
        raise _open_error(path, f"is {file_kind(mode)}, not a trace file")
    try:
        root = h5py.File(path, "r")
    except OSError as err:
        raise _open_error(path, f"not a readable HDF5 file (truncated or not HDF5): {err}") from None
    with root:
        try:
            objects = _objects(path, root)
            trace = _read_trace(path, root, _check_header(path, root))
            # Last, so that damage the schema checks see is named by them.
            _check_metadata(path, root, objects)
            return trace
        except InputError:
            raise
        # h5py reports a damaged object header or attribute message as RuntimeError.
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as err:
            raise _open_error(path, f"damaged or incomplete flowsim trace: {err}") from None
