"""Scenario files: a topology, a workload and run options in TOML, checked on load.

A scenario is data only: it is parsed with :mod:`tomllib` and never executes code. Errors
raise :class:`~flowsim.errors.InputError` naming the file, the key (``topology.links[2].src``)
or CSV line and column, and what was expected.

Format
------
``[scenario]`` (optional)
    ``name`` and ``description`` (strings).
``[topology]``: exactly one of
    ``preset = "dgx_h100"``
        One server of :mod:`flowsim.presets`. ``figure = "nominal" | "effective"`` is
        required; any other key is a parameter of that preset's builder: ``p2p`` (default
        true) for each, and ``pcie``, ``intersocket``, ``memory`` (host technologies) for
        ``pcie_server``.
    ``cluster = "dgx_h100"``
        :func:`flowsim.fabrics.build_cluster` of that system: ``n_nodes`` and ``figure`` are
        required; ``fabric`` (default ``"auto"``: none for one server, rail-optimized for
        more, a fat-tree where rail leaves do not fit), ``switch``, ``su_size``,
        ``oversubscription``, ``storage_targets``, ``storage_technology``, ``ethernet_switch``
        and the preset's own parameters are optional.
    ``cluster = "FILE.toml"``
        The same, of the server a system file describes (relative to the scenario file,
        format in docs/system-format.md): its ``[cluster]`` keys are the defaults (``n_nodes``
        defaults to its ``nodes``, else 1), and a ``[topology.system]`` table of the file's own
        keys (``server.nics.speed_gbps = 400``) is laid over the file, so that a sweep can vary
        them (``"topology.system.server.nics.count"``).
    ``[[topology.nodes]]`` and ``[[topology.links]]`` (and optionally ``[[topology.servers]]``)
        Nodes and links given explicitly. A server: ``name``, ``p2p`` (default true). A
        node: ``name``, ``kind`` (a :class:`~flowsim.topology.NodeKind` name such as
        ``"gpu"`` or ``"nic"``), optional ``server`` (a server name) and ``nic`` (the NIC
        node it leaves its server through). A link: ``src``, ``dst``, ``capacity_Bps``,
        ``technology`` (a :mod:`flowsim.hardware` tag), optional ``latency_s`` (default 0),
        ``tier`` (``"scale_up"``, ``"host"``, ``"scale_out"``; default: the technology's),
        ``shared`` (default false), ``duplex`` (default false: true adds the two links
        ``src->dst`` and ``dst->src`` of a full-duplex cable) and ``name`` (not with
        ``duplex``).
``[workload]``: at least one of
    ``flows = "flows.csv"``
        A flow list, relative to the scenario file. Header row, then one flow per row.
        Required columns ``name``, ``src``, ``dst``, ``size_bytes``; optional ``start_s``,
        ``depends_on`` (names of flows it waits for, ``;``-separated), ``delay_s``,
        ``overhead_s``, ``weight``, ``cap_Bps`` (an empty cell takes the default). Any other
        column is a tag (a string per flow, e.g. ``job`` or ``step``) kept in the trace.
    ``[[workload.collective]]`` (needs :mod:`flowsim.collectives`)
        ``op`` (one of ``flowsim.collectives.COLLECTIVES``: ``"all_reduce"``,
        ``"all_to_all"``, ``"send"``, ...) and ``size_bytes`` (``S`` as nccl-tests counts
        it) are required. ``ranks``: GPU node names in ring order (default: every GPU of the
        topology; for ``send`` the pair :func:`flowsim.collectives.send_pair` picks).
        ``name``: a prefix for the flow names (needed when two collectives would otherwise
        share names); ``start_s``: added to every flow's start time. The collective is laid
        out by :func:`flowsim.collectives.collective_workload`, as ``flowsim collective``
        and training steps lay it out, with its options as keys: ``algorithm`` and
        ``protocol`` (default ``"auto"``: what NCCL's tuner picks), ``nccl_env`` (a table of
        NCCL_* = "value" the choice follows, as NCCL's environment), ``nccl_version``,
        ``channels``, ``slices``, ``model``, and the overrides ``orders`` (one ring order per
        channel), ``servers`` (a table of rank = server name), ``switch`` (NVLS: an NVSwitch
        node of the topology) and ``root`` (broadcast, reduce, gather, scatter). Left out,
        each is chosen from the topology as those commands choose it.
    ``[workload.training]`` (see :mod:`flowsim.training`)
        One training step over the topology's GPUs (or ``ranks``): ``layers`` (count) and
        ``layer_backward_s`` / ``layer_grad_bytes`` (one number for every layer, or a list of
        ``layers`` numbers) are required; ``bucket_bytes`` (default 25 MiB), ``ranks``,
        ``algorithm`` (gradient all-reduce algorithm, default ``"auto"``: NCCL's choice),
        ``protocol`` (default ``"auto"``), ``nccl_env`` (a table of NCCL_* = "value"),
        ``nccl_version``, ``checkpoint_bytes_per_rank`` and ``checkpoint_start_s`` are
        optional. Alone, or with
        ``forward_s``, it is a data-parallel step (:func:`flowsim.training.data_parallel_step`).
        With any of ``tp``, ``pp``, ``dp``, ``layer_forward_s`` (then required, per layer like
        ``layer_backward_s``), ``n_microbatches``, ``schedule`` (``"1f1b"`` or ``"gpipe"``),
        ``virtual_stages`` (model chunks a rank: Megatron's interleaved 1F1B),
        ``activation_bytes``, ``tp_all_reduce_bytes``, ``tp_algorithm``, ``tp_across_servers``,
        ``sequence_parallel``, ``distributed_optimizer``, ``fsdp``, ``fsdp_sharding`` (``"full"``,
        ``"hybrid"``, ``"grad_op"`` or ``"hybrid_grad_op"``), ``fsdp_no_sync``, ``cp``, ``cp_kv_bytes`` or
        ``slices``, it is a tensor/pipeline/data parallel step in Megatron's rank order
        (:func:`flowsim.training.parallel_step`, whose arguments these keys are).
    Parts are concatenated in that order: the flow list, the collectives, the training step.
``[[job]]`` (optional; with them ``[workload]`` is optional too)
    Jobs sharing the cluster (:mod:`flowsim.jobs`): ``name``; exactly one of
    ``[job.training]`` (the keys of ``[workload.training]`` but ``ranks``),
    ``[job.collective]`` (those of ``[[workload.collective]]`` but ``ranks``, ``name`` and
    ``start_s``) or ``[job.storage]`` (``bytes_per_gpu``, ``direction = "write" | "read"``);
    exactly one of ``ranks`` (GPU names), ``servers`` (server names) or ``placement``
    (``"packed"``, ``"spread"`` or ``"random"``, with ``gpus`` and optionally
    ``gpus_per_server`` and, for ``random``, ``seed``); ``start_s`` (default 0) and
    ``iterations`` (default 1). Placements may not overlap. Job flows follow the
    workload's, and :func:`flowsim.jobresults.job_results` runs each job alone for its
    slowdown.
``[options]`` (optional)
    ``routing`` (``"auto"``, ``"ecmp"``, ``"dmodk"`` or ``"shortest"``; default ``"auto"``: D-mod-k
    on InfiniBand, ECMP on Ethernet), ``seed`` (ECMP hash seed, default 0), ``gpudirect``
    (GPU-NIC traffic peer-to-peer, or staged through host memory when false; NCCL's choice for
    the scenario's collectives follows it; default true, or where a system file's
    ``[nccl.env]`` names ``NCCL_NET_GDR_LEVEL`` or ``NCCL_NET_GDR_C2C``, what NCCL decides for
    the cluster's GPUs), ``record_links`` (per-link rate
    segments in the trace, default true), ``record_flows`` (per-flow rate segments, default
    false), ``mode`` (``"incremental"`` or ``"full"``, default ``"incremental"``),
    ``time_rel_tol`` (events this close in relative time are one instant, in [0, 1); default
    1e-12, exact; larger values coarsen time for crowded bursts, see
    :func:`flowsim.engine.simulate`), ``classes`` (solve once per class of flows that share
    rates at every instant, the same times; default true, false solves every flow), ``fail``
    (an array of node or link name patterns whose links are removed) and ``degrade`` (a
    table of pattern = capacity factor in (0, 1]); see :mod:`flowsim.failures`. The topology
    is changed before the workload is laid out on it, so collectives and routes go around
    what failed.
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from flowsim.collectives.builders import check_algorithm, check_protocol
from flowsim.collectives.constants import DEFAULT_NCCL_VERSION
from flowsim.collectives.tuner import DATA_TYPES, REDOPS, gdr_env_key, gpudirect_rdma
from flowsim.engine import DEFAULT_TIME_REL_TOL, MODES
from flowsim.errors import InputError, path_argument, read_text_file
from flowsim.fabrics import build_cluster
from flowsim.failures import apply_failures, check_degrade_factor, describe_changes
from flowsim.fairshare import FairShareProblem
from flowsim.hardware import FIGURES, LinkTier, gpu_peak_flops
from flowsim.jobs import (
    JOB_KINDS,
    POLICIES,
    Job,
    Placement,
    PlacementError,
    check_job_name,
    place_jobs,
    repeat_iterations,
    storage_workload,
)
from flowsim.models import ModelShape, model_preset, step_shape
from flowsim.pipeline import simulate_routed
from flowsim.presets import preset, preset_names, preset_spec, system_name
from flowsim.result import SimulationResult
from flowsim.routes import Routes
from flowsim.routing import METHODS, NoRouteError, Router, describe_method
from flowsim.systemfile import (
    did_you_mean,
    is_shipped_system,
    is_system_file,
    load_system,
    system_path,
    systems_expected,
)
from flowsim.tomlcheck import Where, join, show
from flowsim.topology import NodeKind, Topology, TopologyBuilder
from flowsim.training import (
    FSDP_SHARDINGS,
    SCHEDULES,
    ParallelStep,
    TrainingStep,
    check_step_size,
    data_parallel_step,
    parallel_step,
)
from flowsim.workload import Workload

__all__ = ["FLOW_COLUMNS", "Options", "Scenario", "ScenarioRun", "check_outline", "load_scenario", "parse_scenario",
           "rates_problem", "read_flow_csv", "route_scenario", "run_scenario"]

E = TypeVar("E", bound=Enum)

#: Flow-list CSV columns flowsim reads as numbers or dependencies; the first four are required.
FLOW_COLUMNS = ("name", "src", "dst", "size_bytes", "start_s", "depends_on", "delay_s", "overhead_s",
                "weight", "cap_Bps")
_REQUIRED_FLOW_COLUMNS = FLOW_COLUMNS[:4]
#: Numeric columns and the value of an empty cell (None: the cell is required).
_FLOW_DEFAULTS = {"size_bytes": None, "start_s": 0.0, "delay_s": 0.0, "overhead_s": 0.0, "weight": 1.0,
                  "cap_Bps": np.inf}
_SECTIONS = ("scenario", "topology", "workload", "options", "job")


@dataclass(frozen=True)
class Options:
    """How a scenario runs: routing and what the simulation records."""

    routing: str = "auto"
    seed: int = 0
    gpudirect: bool = True
    record_links: bool = True
    record_flows: bool = False
    mode: str = "incremental"
    time_rel_tol: float = DEFAULT_TIME_REL_TOL
    classes: bool = True
    """Solve once per class of flows that share rates at every instant (the same times)."""
    fail: tuple[str, ...] = ()
    """Node or link name patterns taken out of the topology (:mod:`flowsim.failures`)."""
    degrade: tuple[tuple[str, float], ...] = ()
    """(pattern, capacity factor in (0, 1]) pairs slowing the links they select."""


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario: checked topology and workload, run options, and the source text.

    Attributes
    ----------
    source : str
        The file it came from (or ``"<string>"``), used in error messages.
    text : str
        The TOML text, verbatim (stored in traces).
    name, description : str
    topology : Topology
    workload : Workload
    options : Options
    compute_s : float
        Compute time of a ``[workload.training]`` step (0 without one): the step takes
        ``max(compute_s, makespan)``.
    files : tuple of Path
        The files it read besides its own (its system file, its flow list), so that outputs
        stay off them.
    failures : str
        What ``options.fail`` and ``options.degrade`` changed in the topology
        (:func:`flowsim.failures.describe_changes`); empty without them.
    jobs : tuple of Job
        The ``[[job]]`` tables, placed and laid out after the ``[workload]`` flows
        (:mod:`flowsim.jobs`); empty without them.
    training : TrainingStep or ParallelStep, optional
        The ``[workload.training]`` step, whose flows end the workload.
    """

    source: str
    text: str
    name: str
    description: str
    topology: Topology
    workload: Workload
    options: Options
    compute_s: float = 0.0
    files: tuple[Path, ...] = ()
    failures: str = ""
    jobs: tuple[Job, ...] = ()
    training: TrainingStep | ParallelStep | None = None


@dataclass(frozen=True)
class ScenarioRun:
    """Routes and simulation result of one run of a :class:`Scenario`."""

    scenario: Scenario
    routes: Routes
    result: SimulationResult


# --- topology -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Key:
    """A builder parameter as a scenario file sets it: the TOML value types it takes and the
    value used when the file leaves it out (:data:`_REQUIRED`: it may not)."""

    types: tuple[type, ...]
    default: object


_REQUIRED = object()
_BOOL, _INT, _NUMBER, _STR = (bool,), (int,), (int, float), (str,)

# The topology tables' keys are the file format, so they are written out here rather than
# read from the builders' signatures: renaming a builder's parameter fails a test
# (tests/test_scenario.py checks these tables against the signatures) instead of silently
# renaming a key of every scenario file.

#: Keys of a ``cluster = ...`` table besides ``cluster`` and ``figure``: build_cluster's own
#: parameters (its preset's keys are allowed too), with build_cluster's defaults but for the
#: fabric's: "auto", as on the command line (``flowsim collective``, ``flowsim check``), so that
#: one server, whose GPUs never reach its compute NICs, gets none (a GB200 NVL72 rack's 72
#: rails fit no rail-optimized fabric), and more get the rail-optimized one where it fits.
_CLUSTER_KEYS = {
    "n_nodes": _Key(_INT, _REQUIRED),
    "fabric": _Key(_STR, "auto"),
    "switch": _Key(_STR, None),
    "su_size": _Key(_INT, None),
    "oversubscription": _Key(_NUMBER, 1.0),
    "storage_targets": _Key(_INT, 0),
    "storage_technology": _Key(_STR, "eth400g"),
    "ethernet_switch": _Key(_STR, "sn5600"),
}
_P2P = {"p2p": _Key(_BOOL, True)}
#: flowsim.presets.pcie_workstation's parameters.
_WORKSTATION = {
    "n_gpus": _Key(_INT, 8),
    "gpus_per_switch": _Key(_INT, 1),
    "sockets": _Key(_INT, 2),
    "p2p": _Key(_BOOL, False),
    "pcie": _Key(_STR, "pcie5"),
    "intersocket": _Key(_STR, "upi2_sapphire_rapids"),
    "memory": _Key(_STR, "ddr5_4800_8ch"),
}
#: Keys of a ``preset = ...`` table besides ``preset`` and ``figure``, per preset: the
#: parameters of its builder.
_PRESET_KEYS = {
    "pcie_server": {
        **_P2P,
        "pcie": _Key(_STR, "pcie4"),
        "intersocket": _Key(_STR, "upi_skylake"),
        "memory": _Key(_STR, "ddr4_3200_8ch"),
    },
    "dgx1_v100": _P2P,
    "dgx_a100": _P2P,
    "dgx_h100": _P2P,
    "dgx_b200": _P2P,
    "gb200_nvl72": _P2P,
    "rtx5090_8x": {**_WORKSTATION, "gpu": _Key(_STR, "RTX 5090")},
    "rtx4090_8x": {**_WORKSTATION, "pcie": _Key(_STR, "pcie4")},
}


def _call_builder(
    where: Where, builder: Callable, params: Mapping, fixed: Mapping, prefix: str, keys: Mapping[str, _Key]
) -> Topology:
    """Check ``params`` against ``keys``, then call ``builder(**fixed, **params)`` with the
    defaults of the keys left out; builder errors name the table."""
    where.only(params, keys, prefix)
    for key, value in params.items():
        types = keys[key].types
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            expected = " or ".join(t.__name__ for t in types)
            raise where.error(join(prefix, key), f"expected {expected}, got {show(value)}")
    defaults = {name: key.default for name, key in keys.items() if key.default is not _REQUIRED}
    try:
        return builder(**fixed, **{**defaults, **params})
    except InputError as err:
        raise where.error(prefix, str(err)) from None


def _system(where: Where, table: Mapping, key: str) -> str:
    """The preset ``table[key]`` names (as :func:`~flowsim.presets.system_name` reads it)."""
    value = table.get(key)
    if isinstance(value, str) and system_name(value) in preset_names():
        return system_name(value)
    return where.choice(table, key, "topology", preset_names())


def _preset_topology(where: Where, table: Mapping) -> Topology:
    name = _system(where, table, "preset")
    figure = where.choice(table, "figure", "topology", FIGURES)
    params = {k: v for k, v in table.items() if k not in ("preset", "figure")}
    return _call_builder(where, preset, params, {"name": name, "figure": figure}, "topology", _PRESET_KEYS[name])


def _names_system(value: object) -> bool:
    """Whether a ``cluster`` value names a system file or a shipped system (``"aws-p5"``)."""
    return isinstance(value, str) and (is_system_file(value) or is_shipped_system(value))


def _system_file_topology(where: Where, table: Mapping, base_dir: Path) -> Topology:
    """A cluster of the server a system file describes (``cluster = "FILE.toml"``, relative to
    the scenario, or the name of a shipped one), with ``system`` (a table of the file's keys)
    laid over the file."""
    figure = where.choice(table, "figure", "topology", FIGURES)
    overrides = where.table(table.get("system", {}), "topology.system")
    try:
        system = load_system(system_path(table["cluster"], base_dir), overrides=overrides)
    except InputError as err:
        raise where.error("topology.cluster", str(err)) from None
    params = {k: v for k, v in table.items() if k not in ("cluster", "figure", "system")}
    # The file's [cluster] keys are the defaults the scenario's own keys override.
    keys = {name: _Key(key.types, system.cluster.get(name, 1 if name == "n_nodes" else key.default))
            for name, key in _CLUSTER_KEYS.items()}
    return _call_builder(where, build_cluster, params, {"system": system.spec, "figure": figure}, "topology", keys)


def _gpu_model(table: Mapping, base_dir: Path) -> str | None:
    """The GPU model of an already checked ``[topology]`` table's servers, as its preset or
    system file names it; None for explicit nodes and links."""
    name = table.get("preset", table.get("cluster"))
    if not isinstance(name, str):
        return None
    if "cluster" in table and _names_system(name):
        return load_system(system_path(name, base_dir), overrides=table.get("system", {})).spec.gpu
    return preset_spec(name).gpu


def _topology_files(table: Mapping, base_dir: Path) -> tuple[Path, ...]:
    """The system file an already checked ``[topology]`` table read (none for a preset or
    explicit nodes and links)."""
    name = table.get("cluster")
    return (system_path(name, base_dir),) if isinstance(name, str) and _names_system(name) else ()


def _cluster_topology(where: Where, table: Mapping, base_dir: Path) -> Topology:
    if _names_system(table.get("cluster")):
        return _system_file_topology(where, table, base_dir)
    if isinstance(table.get("cluster"), str) and system_name(table["cluster"]) not in preset_names():
        raise where.error(
            "topology.cluster",
            f"expected {systems_expected()}, got {show(table['cluster'])}{did_you_mean(table['cluster'])}",
        )
    system = _system(where, table, "cluster")
    if "system" in table:
        # Overrides of a system file's keys: a preset has no file to override.
        raise where.error("topology.system", f"the preset {system} takes no system overrides, which change a system "
                                             "file's keys: give a system file or a shipped system as cluster "
                                             "(docs/system-format.md)")
    figure = where.choice(table, "figure", "topology", FIGURES)
    params = {k: v for k, v in table.items() if k not in ("cluster", "figure")}
    keys = {**_CLUSTER_KEYS, **_PRESET_KEYS[system]}
    where.only(params, keys, "topology")  # a misspelt key before the missing one it stands for
    if "n_nodes" not in table:
        raise where.error("topology.n_nodes", "missing; expected the number of servers (an integer)")
    return _call_builder(where, build_cluster, params, {"system": system, "figure": figure}, "topology", keys)


def _enum(where: Where, table: Mapping, key: str, prefix: str, enum: type[E]) -> E:
    names = [m.name.lower() for m in enum]
    return enum[where.choice(table, key, prefix, names).upper()]


def _explicit_topology(where: Where, table: Mapping) -> Topology:
    where.only(table, ("servers", "nodes", "links"), "topology")
    b = TopologyBuilder()
    servers: dict[str, int] = {}
    server_tables = where.tables(table["servers"], "topology.servers") if "servers" in table else []
    for i, server_table in enumerate(server_tables):
        key = f"topology.servers[{i}]"
        where.only(server_table, ("name", "p2p"), key)
        name = where.string(server_table, "name", key)
        try:
            servers[name] = b.add_server(name, p2p=where.boolean(server_table, "p2p", key, True))
        except InputError as err:
            raise where.error(key, str(err)) from None
    nodes = where.tables(table.get("nodes"), "topology.nodes")
    for i, node in enumerate(nodes):
        key = f"topology.nodes[{i}]"
        where.only(node, ("name", "kind", "server", "nic"), key)
        name = where.string(node, "name", key)
        kind = _enum(where, node, "kind", key, NodeKind)
        server = -1
        if "server" in node:
            server_name = where.string(node, "server", key)
            if server_name not in servers:
                raise where.error(f"{key}.server", f"unknown server {server_name!r}; servers: {', '.join(servers)}")
            server = servers[server_name]
        try:
            b.add_node(name, kind, server=server)
        except InputError as err:
            raise where.error(key, str(err)) from None
    for i, node in enumerate(nodes):
        if "nic" in node:
            key = f"topology.nodes[{i}].nic"
            try:
                b.set_nic(node["name"], where.string(node, "nic", f"topology.nodes[{i}]"))
            except InputError as err:
                raise where.error(key, str(err)) from None
    for i, link in enumerate(where.tables(table.get("links"), "topology.links")):
        _add_link(where, b, link, f"topology.links[{i}]")
    try:
        return b.build()
    except InputError as err:
        raise where.error("topology", str(err)) from None


def _add_link(where: Where, b: TopologyBuilder, link: Mapping, key: str) -> None:
    where.only(link, ("src", "dst", "capacity_Bps", "latency_s", "technology", "tier", "shared", "duplex", "name"), key)
    src, dst = where.string(link, "src", key), where.string(link, "dst", key)
    capacity = where.number(link, "capacity_Bps", key)
    latency = where.number(link, "latency_s", key, 0.0)
    technology = where.string(link, "technology", key)
    tier = _enum(where, link, "tier", key, LinkTier) if "tier" in link else None
    shared = where.boolean(link, "shared", key, False)
    duplex = where.boolean(link, "duplex", key, False)
    if duplex and ("name" in link or shared):
        raise where.error(key, "a duplex link is two directed links with default names; drop 'name' and 'shared'")
    try:
        if duplex:
            b.add_cable(src, dst, capacity, latency_s=latency, technology=technology, tier=tier)
        else:
            name = where.string(link, "name", key) if "name" in link else None
            b.add_link(
                src, dst, capacity, latency_s=latency, technology=technology, tier=tier, shared=shared, name=name
            )
    except InputError as err:
        raise where.error(key, str(err)) from None


def _topology(where: Where, table: Mapping, base_dir: Path) -> Topology:
    builders = [k for k in ("preset", "cluster") if k in table]
    if "nodes" in table or "links" in table:
        builders.append("nodes")
    if len(builders) != 1:
        found = f"found {', '.join(builders)}" if builders else "found none"
        raise where.error(
            "topology", f"expected exactly one of 'preset', 'cluster' or 'nodes' and 'links'; {found}"
        )
    if builders[0] == "preset":
        return _preset_topology(where, table)
    if builders[0] == "cluster":
        return _cluster_topology(where, table, base_dir)
    return _explicit_topology(where, table)


# --- workload -------------------------------------------------------------------------------


def read_flow_csv(path: str | os.PathLike, topology: Topology | None = None) -> Workload:
    """Read a flow list (see the module docstring for the columns).

    Parameters
    ----------
    path : str or path-like
    topology : Topology, optional
        When given, every ``src`` and ``dst`` must be one of its nodes.

    Returns
    -------
    Workload

    Raises
    ------
    InputError
        Naming the file, line and column of a bad cell, or the flow of a bad row.
    """
    path = Path(path)
    text = read_text_file(path, "the flow list")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader, [])]
    except csv.Error as err:
        raise InputError(f"{path}: line 1: {_csv_problem(err)}") from None
    missing = [c for c in _REQUIRED_FLOW_COLUMNS if c not in header]
    if missing:
        raise InputError(
            f"{path}: line 1: the header lacks column {missing[0]!r}; required: {', '.join(_REQUIRED_FLOW_COLUMNS)}"
        )
    if len(set(header)) != len(header) or "" in header:
        raise InputError(f"{path}: line 1: column names must be unique and non-empty, got {header}")
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InputError(f"{path}: line {reader.line_num}: {len(row)} cells for {len(header)} columns")
            rows.append((reader.line_num, [cell.strip() for cell in row]))
    except csv.Error as err:
        raise InputError(f"{path}: line {reader.line_num}: {_csv_problem(err)}") from None
    columns = {name: [row[j] for _, row in rows] for j, name in enumerate(header)}
    numeric: dict[str, Any] = {}  # start_s, delay_s, ... by name
    for column in _FLOW_DEFAULTS:
        if column in columns:
            numeric[column] = _numbers(path, rows, column, columns[column])
    if topology is not None:
        for column in ("src", "dst"):
            for (line, _), node in zip(rows, columns[column], strict=True):
                if node not in topology.node_index:
                    raise InputError(f"{path}: line {line}, column {column!r}: {node!r} is not a node of the topology")
    depends_on = None
    if "depends_on" in columns:
        depends_on = [[d.strip() for d in cell.split(";") if d.strip()] for cell in columns["depends_on"]]
    tags = {name: values for name, values in columns.items() if name not in FLOW_COLUMNS}
    size = numeric.pop("size_bytes")
    try:
        return Workload.build(
            columns["name"], columns["src"], columns["dst"], size, depends_on=depends_on, tags=tags,
            **numeric,
        )
    except InputError as err:
        raise InputError(f"{path}: {err}") from None


def _csv_problem(err: csv.Error) -> str:
    """What Python's csv reader refused, for a message: its cell size limit by number."""
    if "field larger than field limit" in str(err):
        return f"a cell is longer than {csv.field_size_limit():,} characters, the most a flow list cell may hold"
    return f"not valid CSV: {err}"


def _numbers(path: Path, rows: list[tuple[int, list[str]]], column: str, cells: list[str]) -> np.ndarray:
    """Parse one numeric column; empty cells take the column's default."""
    out = np.empty(len(cells))
    for i, ((line, _), cell) in enumerate(zip(rows, cells, strict=True)):
        if not cell:
            if _FLOW_DEFAULTS[column] is None:
                raise InputError(f"{path}: line {line}, column {column!r}: empty; expected a number")
            out[i] = _FLOW_DEFAULTS[column]
            continue
        # float() also takes '1_000' and digits of other scripts ('١٠'), which no spreadsheet
        # writes and a reader of the file would not take for the number flowsim used.
        if "_" in cell or not cell.isascii():
            raise InputError(
                f"{path}: line {line}, column {column!r}: expected a number in ASCII digits without '_', got {cell!r}"
            )
        try:
            out[i] = float(cell)
        except ValueError:
            raise InputError(f"{path}: line {line}, column {column!r}: expected a number, got {cell!r}") from None
    return out


def _ranks(where: Where, topology: Topology, table: Mapping, key: str) -> list[str] | None:
    """The ``ranks`` array of GPU node names, or None when not given."""
    if "ranks" not in table:
        return None
    ranks = table["ranks"]
    if not isinstance(ranks, list) or not all(isinstance(r, str) for r in ranks):
        raise where.error(f"{key}.ranks", f"expected an array of node names, got {show(ranks)}")
    unknown = [r for r in ranks if r not in topology.node_index]
    if unknown:
        raise where.error(f"{key}.ranks", f"{unknown[0]!r} is not a node of the topology")
    why = topology.not_gpu(ranks)
    if why is not None:
        raise where.error(f"{key}.ranks", why)
    return ranks


def _check_servers(where: Where, servers: object, key: str) -> None:
    """A collective's ``servers``: a table of rank name = server name."""
    if not isinstance(servers, dict) or not all(isinstance(v, str) for v in servers.values()):
        raise where.error(key, f"expected a table of rank = server name (strings), got {show(servers)}")


def _check_nccl_env(where: Where, env: object, key: str) -> None:
    """``nccl_env``: a table of NCCL_* variable = string value, as in NCCL's environment."""
    if not isinstance(env, dict):
        raise where.error(key, f"expected a table of NCCL_NAME = \"value\" (strings), got {show(env)}")
    for name, value in env.items():
        if not isinstance(value, str):
            quoted = f' ("{value}")' if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
            raise where.error(f"{key}.{name}", f"expected a string{quoted}, got {show(value)}")
    bad = [k for k in env if not k.startswith("NCCL_")]
    if bad:
        raise where.error(f"{key}.{bad[0]}", "is not an NCCL_ variable")
    routed = gdr_env_key(env)
    if routed is not None:
        raise where.error(f"{key}.{routed}", "decides GPUDirect RDMA per collective, where a scenario's flows are "
                          "routed one way for all: set options.gpudirect instead")


def _checked(where: Where, key: str, check: Callable[..., str], *args: object) -> str:
    """What ``check(*args)`` gives (a name in flowsim's spelling); its error named by ``key``."""
    try:
        return check(*args)
    except InputError as err:
        raise where.error(key, str(err)) from None


# Keys of [[workload.collective]] besides op, size_bytes, ranks, name and start_s: the
# options of flowsim.collectives.collective_workload that a TOML value can hold.
_COLLECTIVE_OPTIONS = ("algorithm", "protocol", "channels", "slices", "model", "orders", "servers", "switch", "root",
                       "nccl_env", "nccl_version", "dtype", "redop")


def _collective(where: Where, topology: Topology, table: Mapping, key: str, gpudirect: bool) -> Workload:
    try:
        collectives = importlib.import_module("flowsim.collectives")
    except ImportError as err:
        raise where.error(
            key, f"collectives need the module flowsim.collectives, which cannot be imported ({err})"
        ) from None
    # Spelled as flowsim, NCCL or nccl-tests spell it ("all_reduce", "allreduce", "alltoall_perf").
    op = where.string(table, "op", key)
    try:
        op = collectives.collective_name(op)
    except InputError:
        raise where.error(
            f"{key}.op", f"expected one of {', '.join(map(repr, collectives.COLLECTIVES))}, got {op!r}"
        ) from None
    size = where.number(table, "size_bytes", key)
    where.only(table, ("op", "size_bytes", "ranks", "name", "start_s", *_COLLECTIVE_OPTIONS), key)
    ranks = _ranks(where, topology, table, key)
    options = {k: table[k] for k in _COLLECTIVE_OPTIONS if k in table}
    if "algorithm" in options:
        options["algorithm"] = _checked(
            where, f"{key}.algorithm", collectives.check_algorithm, op, where.string(table, "algorithm", key)
        )
    if "protocol" in options:
        options["protocol"] = _checked(
            where, f"{key}.protocol", collectives.check_protocol, where.string(table, "protocol", key)
        )
    if "dtype" in options:
        where.choice(table, "dtype", key, DATA_TYPES)
    if "redop" in options:
        where.choice(table, "redop", key, REDOPS)
    if "servers" in options:
        _check_servers(where, options["servers"], f"{key}.servers")
    if "nccl_env" in options:
        _check_nccl_env(where, options["nccl_env"], f"{key}.nccl_env")
    if "switch" in options:
        try:
            collectives.check_nvswitch(topology, where.string(table, "switch", key))
        except InputError as err:
            raise where.error(f"{key}.switch", str(err)) from None
    try:
        workload = collectives.collective_workload(topology, op, size, ranks=ranks, gpudirect=gpudirect,
                                                   **options).workload
    except InputError as err:
        raise where.error(key, str(err)) from None
    name = where.string(table, "name", key, "")
    start = where.number(table, "start_s", key, 0.0)
    if name or start:
        try:
            # Without a name, the flows keep the op's names (a start alone adds no prefix, so two
            # unnamed collectives of one op are told to take names however they start).
            workload = workload.renamed(f"{name}." if name else "", start)
        except InputError as err:
            raise where.error(key, str(err)) from None
    return workload


# Keys of [workload.training] for any step.
_TRAINING_KEYS = ("layers", "layer_backward_s", "layer_grad_bytes", "bucket_bytes", "ranks", "algorithm",
                  "protocol", "nccl_env", "nccl_version", "checkpoint_bytes_per_rank", "checkpoint_start_s")
# Keys that make [workload.training] a tensor/pipeline/data parallel step (flowsim.training.parallel_step).
_PARALLEL_KEYS = ("tp", "pp", "dp", "layer_forward_s", "n_microbatches", "schedule", "virtual_stages",
                  "activation_bytes", "tp_all_reduce_bytes", "tp_algorithm", "tp_across_servers", "slices", "ep",
                  "ep_all_to_all_bytes", "ep_skew", "moe_layers", "sequence_parallel", "layer_expert_grad_bytes",
                  "distributed_optimizer", "fsdp", "fsdp_sharding", "fsdp_no_sync", "cp", "cp_kv_bytes", "model")
# Keys that go with `model` (flowsim.models.step_shape), and those the model's shape sets.
_MODEL_KEYS = ("micro_batch", "seq_len", "mfu", "gpu", "peak_flops", "dtype_bytes", "grad_dtype_bytes")
_SHAPED_KEYS = ("layers", "layer_forward_s", "layer_backward_s", "layer_grad_bytes", "layer_expert_grad_bytes",
                "activation_bytes", "tp_all_reduce_bytes", "ep_all_to_all_bytes", "cp_kv_bytes")
_MODEL_SHAPE_KEYS = ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "gated_mlp", "experts", "top_k",
                     "seq_len")


def _model_shape(where: Where, table: Mapping, key: str) -> ModelShape:
    """``model``: a preset name or a table of :class:`flowsim.models.ModelShape` fields."""
    value = table["model"]
    if isinstance(value, str):
        try:
            return model_preset(value)
        except InputError as err:
            raise where.error(join(key, "model"), str(err)) from None
    shape = where.table(value, join(key, "model"))
    where.only(shape, _MODEL_SHAPE_KEYS, join(key, "model"))
    at = join(key, "model")
    fields: dict[str, Any] = {
        name: where.integer(shape, name, at, 1) for name in ("layers", "hidden", "ffn", "heads", "vocab")
    }
    fields["kv_heads"] = where.integer(shape, "kv_heads", at, 1) if "kv_heads" in shape else fields["heads"]
    for name, default in (("experts", 1), ("top_k", 1), ("seq_len", 2048)):
        fields[name] = where.integer(shape, name, at, 1) if name in shape else default
    fields["gated_mlp"] = where.boolean(shape, "gated_mlp", at, True)
    try:
        return ModelShape(**fields)
    except InputError as err:
        raise where.error(at, str(err)) from None


def _shaped(where: Where, table: Mapping, key: str, gpu: str | None) -> dict[str, Any]:
    """The per-layer columns and message sizes a ``model`` gives (:func:`flowsim.models.step_shape`)."""
    given = [k for k in _SHAPED_KEYS if k in table]
    if given:
        raise where.error(join(key, given[0]), "is set by model; give one or the other")
    model = _model_shape(where, table, key)
    if "peak_flops" in table:
        peak = where.number(table, "peak_flops", key)
    else:
        name = where.string(table, "gpu", key, gpu or "")
        if not name:
            raise where.error(join(key, "gpu"), "missing; name the GPU model (or give peak_flops): the topology "
                              "is no preset or system file that names it")
        try:
            peak = gpu_peak_flops(name)
        except InputError as err:
            raise where.error(join(key, "gpu"), str(err)) from None
    if "mfu" not in table:
        raise where.error(join(key, "mfu"), "missing; the fraction of the GPU's peak the compute reaches, in (0, 1]")
    # Read (and so checked, each naming its key) before step_shape, whose own errors this
    # function names by the table.
    mfu = where.number(table, "mfu", key)
    tp, ep, cp = (where.integer(table, name, key, 1) if name in table else 1 for name in ("tp", "ep", "cp"))
    micro_batch = where.integer(table, "micro_batch", key, 1) if "micro_batch" in table else 1
    seq_len = where.integer(table, "seq_len", key, 1) if "seq_len" in table else None
    dtype_bytes = where.number(table, "dtype_bytes", key, 2.0)
    # Megatron-LM reduces BF16 gradients in FP32 (flowsim.models); PyTorch FSDP in the
    # parameters' dtype unless given a reduce_dtype ("If this is None but param_dtype is not
    # None, then the reduction uses the compute dtype": MixedPrecisionPolicy.reduce_dtype,
    # torch/distributed/fsdp/_fully_shard/_fsdp_api.py; FSDP1's MixedPrecision alike).
    fsdp = where.boolean(table, "fsdp", key, False)
    grad_dtype_bytes = where.number(table, "grad_dtype_bytes", key, dtype_bytes if fsdp else 4.0)
    sequence_parallel = where.boolean(table, "sequence_parallel", key, False)
    try:
        shape = step_shape(model, peak_flops=peak, mfu=mfu, tp=tp, ep=ep, micro_batch=micro_batch, seq_len=seq_len,
                           dtype_bytes=dtype_bytes, sequence_parallel=sequence_parallel, cp=cp,
                           grad_dtype_bytes=grad_dtype_bytes,
                           moe_layers=_moe_layers(where, table, key, model.layers))
    except InputError as err:
        raise where.error(key, str(err)) from None
    return {"layers": model.layers, **shape.as_arguments()}


def _per_layer(where: Where, table: Mapping, key: str, column: str, layers: int) -> list[float]:
    """One number for every layer, or a list of ``layers`` numbers."""
    value = table.get(column)
    if isinstance(value, list):
        if len(value) != layers:
            raise where.error(join(key, column), f"expected {layers} values (one per layer), got {len(value)}")
        return [where.number({column: v}, column, key) for v in value]
    return [where.number(table, column, key)] * layers


def _moe_layers(where: Where, table: Mapping, key: str, layers: int) -> list[bool] | None:
    """``moe_layers``: one boolean, or a list of ``layers`` of them; None when not given."""
    if "moe_layers" not in table:
        return None
    value = table["moe_layers"]
    if isinstance(value, bool):
        return [value] * layers
    if not isinstance(value, list) or len(value) != layers or not all(isinstance(v, bool) for v in value):
        raise where.error(join(key, "moe_layers"), f"expected true, false or a list of {layers} of them")
    return list(value)


def _nccl_env(where: Where, table: Mapping, key: str) -> dict[str, str]:
    if "nccl_env" not in table:
        return {}
    _check_nccl_env(where, table["nccl_env"], join(key, "nccl_env"))
    return dict(table["nccl_env"])


def _training(
    where: Where, topology: Topology, table: Mapping, key: str, note: Callable[[str], None], gpu: str | None,
    gpudirect: bool,
) -> TrainingStep | ParallelStep:
    parallel = any(k in table for k in _PARALLEL_KEYS)
    if parallel and "forward_s" in table:
        raise where.error(
            join(key, "forward_s"), "is for a data-parallel step; with tp, pp or the other 3D keys give layer_forward_s"
        )
    where.only(table, (*_TRAINING_KEYS, "forward_s", *_PARALLEL_KEYS, *(_MODEL_KEYS if "model" in table else ())), key)
    shaped = _shaped(where, table, key, gpu) if "model" in table else {}
    layers = shaped["layers"] if shaped else where.integer(table, "layers", key, 1)
    microbatches = where.integer(table, "n_microbatches", key, 1) if "n_microbatches" in table else 1
    try:
        check_step_size(layers, microbatches)
    except InputError as err:
        raise where.error(join(key, "layers"), str(err)) from None
    columns: tuple[str, ...] = ("layer_backward_s", "layer_grad_bytes")
    if parallel:
        columns = ("layer_forward_s", *columns)
        if shaped or "layer_expert_grad_bytes" in table:
            columns = (*columns, "layer_expert_grad_bytes")
    # Keyword arguments of parallel_step or data_parallel_step, which check them.
    per_layer: dict[str, Any] = {
        column: list(shaped[column]) if shaped else _per_layer(where, table, key, column, layers) for column in columns
    }
    ranks = _ranks(where, topology, table, key)
    common: dict[str, Any] = dict(
        bucket_bytes=where.number(table, "bucket_bytes", key, 25 * 2**20),
        ranks=ranks,
        algorithm=_checked(
            where, join(key, "algorithm"), check_algorithm, "all_reduce", where.string(table, "algorithm", key, "auto")
        ),
        protocol=_checked(where, join(key, "protocol"), check_protocol, where.string(table, "protocol", key, "auto")),
        nccl_env=_nccl_env(where, table, key),
        nccl_version=where.string(table, "nccl_version", key, DEFAULT_NCCL_VERSION),
        checkpoint_bytes_per_rank=where.number(table, "checkpoint_bytes_per_rank", key, 0.0),
        checkpoint_start_s=where.number(table, "checkpoint_start_s", key, 0.0),
        gpudirect=gpudirect,
    )
    if parallel:

        def count(name: str, default: int | None) -> int | None:
            return where.integer(table, name, key, 1) if name in table else default

        common.update(
            tp=count("tp", 1),
            pp=count("pp", 1),
            dp=count("dp", None),
            n_microbatches=count("n_microbatches", 1),
            slices=count("slices", None),
            schedule=where.choice(table, "schedule", key, SCHEDULES, "1f1b"),
            virtual_stages=count("virtual_stages", 1),
            activation_bytes=shaped.get("activation_bytes", where.number(table, "activation_bytes", key, 0.0)),
            tp_all_reduce_bytes=shaped.get(
                "tp_all_reduce_bytes", where.number(table, "tp_all_reduce_bytes", key, 0.0)
            ),
            tp_algorithm=_checked(
                where, join(key, "tp_algorithm"), check_algorithm, "all_reduce",
                where.string(table, "tp_algorithm", key, "auto"),
            ),
            tp_across_servers=where.boolean(table, "tp_across_servers", key, False),
            ep=count("ep", 1),
            ep_all_to_all_bytes=shaped.get(
                "ep_all_to_all_bytes", where.number(table, "ep_all_to_all_bytes", key, 0.0)
            ),
            ep_skew=where.number(table, "ep_skew", key, 1.0),
            moe_layers=_moe_layers(where, table, key, layers),
            sequence_parallel=where.boolean(table, "sequence_parallel", key, False),
            distributed_optimizer=where.boolean(table, "distributed_optimizer", key, False),
            fsdp=where.boolean(table, "fsdp", key, False),
            fsdp_sharding=where.choice(table, "fsdp_sharding", key, FSDP_SHARDINGS, "full"),
            fsdp_no_sync=where.boolean(table, "fsdp_no_sync", key, False),
            cp=count("cp", 1),
            cp_kv_bytes=shaped.get("cp_kv_bytes", where.number(table, "cp_kv_bytes", key, 0.0)),
            param_to_grad_bytes=shaped.get("param_to_grad_bytes", 1.0),
        )
    try:
        if parallel:
            return parallel_step(topology, **per_layer, **common, progress=note)
        return data_parallel_step(topology, **per_layer, forward_s=where.number(table, "forward_s", key, 0.0), **common)
    except InputError as err:
        raise where.error(key, str(err)) from None


def _workload(
    where: Where, table: Mapping, topology: Topology, base: Path, note: Callable[[str], None], gpu: str | None,
    gpudirect: bool,
) -> tuple[list[Workload], float, tuple[Path, ...], TrainingStep | ParallelStep | None]:
    """The parts of the scenario's workload, the compute time of its training step (0 if
    none), the files it read and the training step; ``note`` is told as each collective and
    the training step is built."""
    where.only(table, ("flows", "collective", "training"), "workload")
    parts = []
    compute_s = 0.0
    step = None
    files: tuple[Path, ...] = ()
    if "flows" in table:
        name = where.string(table, "flows", "workload")
        if not name.strip():
            raise where.error("workload.flows", f"expected the flow list's file name, got {show(name)}")
        flows = base / name
        if not flows.exists():  # one that is not a regular file is named by read_flow_csv
            raise where.error("workload.flows", f"no such flow list {str(flows)!r}")
        parts.append(read_flow_csv(flows, topology))
        files = (flows,)
    if "collective" in table:
        first_names: dict[str, int] = {}  # each collective's first flow name: which one it was
        for i, collective in enumerate(where.tables(table["collective"], "workload.collective")):
            note(f"building workload.collective[{i}]")
            part = _collective(where, topology, collective, f"workload.collective[{i}]", gpudirect)
            if len(part):
                same = first_names.setdefault(part.names[0], i)
                if same != i:
                    raise where.error(f"workload.collective[{i}]",
                                      f"its flows are named as workload.collective[{same}]'s ({part.names[0]!r}, "
                                      "...); give one of them a name (a prefix for its flow names)")
            parts.append(part)
    if "training" in table:
        note("building workload.training")
        step = _training(
            where, topology, where.table(table["training"], "workload.training"), "workload.training",
            lambda message: note(f"workload.training: {message}"), gpu, gpudirect,
        )
        parts.append(step.workload)
        compute_s = step.compute_s
    if not parts:
        raise where.error(
            "workload", "expected 'flows' (a CSV flow list), [[workload.collective]] tables or [workload.training]"
        )
    return parts, compute_s, files, step


# --- jobs -----------------------------------------------------------------------------------

_JOB_KEYS = ("name", *JOB_KINDS, "placement", "gpus", "gpus_per_server", "seed", "ranks", "servers", "start_s",
             "iterations")
_POLICY_KEYS = ("gpus", "gpus_per_server", "seed")
#: Tags every job flow carries, which the [workload] flows may not hold.
_JOB_TAGS = ("job", "iteration")


def _names(where: Where, table: Mapping, key: str, what: str) -> tuple[str, ...]:
    value = table[key]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise where.error(key, f"expected a non-empty array of {what}, got {show(value)}")
    return tuple(value)


def _placement(where: Where, table: Mapping) -> Placement:
    given = [k for k in ("placement", "ranks", "servers") if k in table]
    if len(given) != 1:
        found = f"found {', '.join(given)}" if given else "found none"
        raise where.error(
            "", "expected exactly one of 'placement' (a policy: " + ", ".join(POLICIES)
            + "), 'ranks' (GPU names) or 'servers' (server names); " + found
        )
    if "placement" not in table:
        extra = next((k for k in _POLICY_KEYS if k in table), None)
        if extra is not None:
            raise where.error(extra, "is for a placement policy (placement = " + " | ".join(POLICIES) + ")")
        if "ranks" in table:
            return Placement(ranks=_names(where, table, "ranks", "GPU names"))
        return Placement(servers=_names(where, table, "servers", "server names"))
    policy = where.choice(table, "placement", "", POLICIES)
    if "gpus" not in table:
        raise where.error("gpus", f"missing; expected the number of GPUs placement = {policy!r} places")
    if "seed" in table and policy != "random":
        raise where.error("seed", "is for placement = 'random'")
    return Placement(
        policy=policy,
        gpus=where.integer(table, "gpus", "", 1),
        gpus_per_server=where.integer(table, "gpus_per_server", "", 1) if "gpus_per_server" in table else None,
        seed=where.integer(table, "seed", "", 0) if "seed" in table else 0,
    )


def _job_step(
    where: Where, topology: Topology, table: Mapping, kind: str, ranks: tuple[str, ...], note: Callable[[str], None],
    gpu: str | None, gpudirect: bool,
) -> tuple[Workload, float, TrainingStep | ParallelStep | None]:
    """One iteration of a job of ``kind`` on ``ranks``, its compute time (a model shape's
    compute on ``gpu``, the topology's GPU model) and, for a training job, its step."""
    body = where.table(table[kind], kind)
    taken = next((k for k in ("ranks", "name", "start_s") if k in body and kind != "storage"), None)
    if taken == "ranks":
        raise where.error(join(kind, "ranks"), "is set by the job's placement (ranks, servers or placement)")
    if taken is not None:
        raise where.error(join(kind, taken), f"is a key of the job itself, not of [job.{kind}]")
    if kind == "training":
        step = _training(where, topology, {**body, "ranks": list(ranks)}, kind, note, gpu, gpudirect)
        return step.workload, step.compute_s, step
    if kind == "collective":
        return _collective(where, topology, {**body, "ranks": list(ranks)}, kind, gpudirect), 0.0, None
    where.only(body, ("bytes_per_gpu", "direction"), kind)
    if "bytes_per_gpu" not in body:
        raise where.error(join(kind, "bytes_per_gpu"), "missing; expected the bytes each GPU writes or reads")
    direction = where.choice(body, "direction", kind, ("write", "read"), "write")
    try:
        return storage_workload(topology, ranks, body["bytes_per_gpu"], direction), 0.0, None
    except InputError as err:
        raise where.error(kind, str(err)) from None


def _prefixed(note: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda message: note(prefix + message)


def _jobs(
    where: Where, value: object, topology: Topology, first_flow: int, note: Callable[[str], None], gpu: str | None,
    gpudirect: bool,
) -> tuple[list[Workload], tuple[Job, ...]]:
    """The ``[[job]]`` tables placed and laid out, their flows numbered from ``first_flow``
    (training jobs that give a model shape compute on ``gpu``)."""
    tables = where.tables(value, "job")
    heads: list[tuple[str, Where, Placement, str]] = []
    for i, table in enumerate(tables):
        name = where.string(table, "name", f"job[{i}]")
        try:
            check_job_name(name)
        except InputError as err:
            raise where.error(f"job[{i}].name", str(err)) from None
        if any(name == other for other, _, _, _ in heads):
            raise where.error(f"job[{i}].name", f"job {name!r} is defined twice")
        at = Where(f"{where.source}: job[{i}] {name!r}")
        at.only(table, _JOB_KEYS, "")
        kinds = [k for k in JOB_KINDS if k in table]
        if len(kinds) != 1:
            found = f"found {', '.join(kinds)}" if kinds else "found none"
            raise at.error("", f"expected exactly one of [job.training], [job.collective] or [job.storage]; {found}")
        heads.append((name, at, _placement(at, table), kinds[0]))
    try:
        placed = place_jobs(topology, [(name, placement) for name, _, placement, _ in heads])
    except PlacementError as err:
        raise heads[err.job][1].error("", str(err)) from None
    parts, jobs = [], []
    lo = first_flow
    for (name, at, placement, kind), table, ranks in zip(heads, tables, placed, strict=True):
        note(f"building job {name} ({kind} on {len(ranks)} GPUs)")
        step, compute_s, training = _job_step(at, topology, table, kind, ranks, _prefixed(note, f"job {name}: "),
                                              gpu, gpudirect)
        clash = next((tag for tag in _JOB_TAGS if tag in step.tags), None)
        if clash is not None:
            raise at.error(kind, f"its flows have a tag {clash!r}, which job flows are given")
        start_s = at.number(table, "start_s", "", 0.0)
        if not 0 <= start_s < math.inf:
            raise at.error("start_s", f"expected a number >= 0, got {show(table['start_s'])}")
        iterations = at.integer(table, "iterations", "", 1) if "iterations" in table else 1
        try:
            workload, starts, ends = repeat_iterations(
                step, name=name, ranks=ranks, iterations=iterations, start_s=start_s, compute_s=compute_s
            )
        except InputError as err:
            raise at.error("", str(err)) from None
        parts.append(workload)
        jobs.append(Job(name, kind, ranks, placement.describe(), start_s, iterations, compute_s, lo,
                        lo + len(workload), starts + lo, ends + lo, training))
        lo += len(workload)
    return parts, tuple(jobs)


# --- options and the whole file -------------------------------------------------------------


def _check_outline(where: Where, doc: Mapping) -> Mapping:
    """Check a scenario document's sections and the keys of its [scenario] and [options]
    tables (what needs no topology); returns its [scenario] table."""
    where.only(doc, _SECTIONS, "")
    info = where.table(doc.get("scenario", {}), "scenario")
    where.only(info, ("name", "description"), "scenario")
    where.only(where.table(doc.get("options", {}), "options"), Options.__dataclass_fields__, "options")
    return info


def check_outline(doc: Mapping, *, source: str = "<string>") -> None:
    """Raise :class:`InputError` (naming ``source`` and the key) where scenario document
    ``doc`` has a section, or a key of [scenario] or [options], that no scenario has: a
    sweep checks its base scenario so before any run, as every run would fail alike."""
    _check_outline(Where(source), doc)


def _options(where: Where, table: Mapping) -> Options:
    """The [options] table, its keys already checked (:func:`_check_outline`)."""
    defaults = Options()
    seed = table.get("seed", defaults.seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise where.error("options.seed", f"expected a non-negative integer, got {show(seed)}")
    return Options(
        routing=where.choice(table, "routing", "options", tuple(METHODS), defaults.routing),
        seed=seed,
        gpudirect=where.boolean(table, "gpudirect", "options", defaults.gpudirect),
        record_links=where.boolean(table, "record_links", "options", defaults.record_links),
        record_flows=where.boolean(table, "record_flows", "options", defaults.record_flows),
        mode=where.choice(table, "mode", "options", MODES, defaults.mode),
        time_rel_tol=_time_rel_tol(where, table, defaults.time_rel_tol),
        classes=where.boolean(table, "classes", "options", defaults.classes),
        fail=_fail(where, table),
        degrade=_degrade(where, table),
    )


def _fail(where: Where, table: Mapping) -> tuple[str, ...]:
    patterns = table.get("fail", [])
    if not isinstance(patterns, list):
        raise where.error("options.fail", f"expected an array of node or link name patterns, got {show(patterns)}")
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            raise where.error(f"options.fail[{i}]", f"expected a node or link name pattern, got {show(pattern)}")
    return tuple(patterns)


def _degrade(where: Where, table: Mapping) -> tuple[tuple[str, float], ...]:
    out = []
    for pattern, factor in _dotted(where.table(table.get("degrade", {}), "options.degrade"), "").items():
        try:
            out.append((pattern, check_degrade_factor(factor)))
        except InputError as err:
            raise where.error(f'options.degrade."{pattern}"', str(err)) from None
    return tuple(out)


def _dotted(table: Mapping, prefix: str) -> dict[str, object]:
    """A table of patterns with nested tables flattened: unquoted, a pattern's dots make TOML
    tables (``{ib.spine2 = 0.5}`` is ``{ib = {spine2 = 0.5}}``), and so does a sweep path
    such as ``options.degrade.ib.spine2``; both mean the pattern ``"ib.spine2"``."""
    out: dict[str, object] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.update(_dotted(value, name))
        else:
            out[name] = value
    return out


def _failed(where: Where, topology: Topology, options: Options) -> Topology:
    """``topology`` with the scenario's failures and degradations applied."""
    try:
        return apply_failures(topology, fail=options.fail, degrade=dict(options.degrade))
    except InputError as err:
        raise InputError(f"{where.source}: options.{err}") from None


def _time_rel_tol(where: Where, table: Mapping, default: float) -> float:
    value = where.number(table, "time_rel_tol", "options", default)
    if not 0.0 <= value < 1.0:
        raise where.error("options.time_rel_tol", f"expected a number in [0, 1), got {show(value)}")
    return value


def _section(where: Where, doc: Mapping, section: str) -> object:
    if section not in doc:
        raise where.error(section, f"missing; expected a [{section}] table")
    return doc[section]


def parse_scenario(
    text: str,
    *,
    source: str = "<string>",
    base_dir: str | os.PathLike = ".",
    progress: Callable[[str], None] | None = None,
) -> Scenario:
    """Check a scenario given as TOML text and build its topology and workload.

    Parameters
    ----------
    text : str
        The TOML document (format in the module docstring).
    source : str
        Name used in error messages (the file name).
    base_dir : str or path-like
        Directory that relative flow-list paths start from.
    progress : callable, optional
        Called with a short note before each collective and training step is built.

    Returns
    -------
    Scenario

    Raises
    ------
    InputError
        Naming ``source``, the key and what was expected.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise Where(source).error("", f"not valid TOML: {err}") from None
    return scenario_from_document(doc, text=text, source=source, base_dir=base_dir, progress=progress)


def scenario_from_document(
    doc: Mapping,
    *,
    text: str,
    source: str = "<string>",
    base_dir: str | os.PathLike = ".",
    progress: Callable[[str], None] | None = None,
) -> Scenario:
    """Check a scenario given as a parsed TOML document (a dict) and build it.

    :func:`parse_scenario` after parsing; sweeps call it on documents they derived.
    ``text`` is kept as the scenario's text (written into traces); ``progress``, if given, is
    called with a short note before each collective and training step is built.
    """
    where = Where(source)
    info = _check_outline(where, doc)
    topology = _topology(where, where.table(_section(where, doc, "topology"), "topology"), Path(base_dir))
    option_table = where.table(doc.get("options", {}), "options")
    options = _options(where, option_table)
    if "gpudirect" not in option_table and gdr_env_key(dict(topology.nccl_env)) is not None:
        # A system file's [nccl.env] says it (NCCL_NET_GDR_LEVEL = "LOC" where the driver
        # cannot give NICs GPU memory): NCCL's rule for the cluster's GPUs sets the routes.
        options = replace(options, gpudirect=gpudirect_rdma(topology, nccl_env=dict(topology.nccl_env)))
    intact, topology = topology, _failed(where, topology, options)
    note = progress or (lambda message: None)
    parts: list[Workload] = []
    compute_s, files = 0.0, tuple[Path, ...]()
    step: TrainingStep | ParallelStep | None = None
    gpu = _gpu_model(where.table(_section(where, doc, "topology"), "topology"), Path(base_dir))
    if "workload" in doc or "job" not in doc:
        parts, compute_s, files, step = _workload(
            where, where.table(_section(where, doc, "workload"), "workload"), topology, Path(base_dir), note, gpu,
            options.gpudirect,
        )
    jobs: tuple[Job, ...] = ()
    if "job" in doc:
        clash = next((tag for part in parts for tag in _JOB_TAGS if tag in part.tags), None)
        if clash is not None:
            raise where.error("workload", f"its flows have a tag {clash!r}, which [[job]] tables give their flows")
        job_parts, jobs = _jobs(where, doc["job"], topology, sum(map(len, parts)), note, gpu, options.gpudirect)
        parts += job_parts
    try:
        workload = parts[0] if len(parts) == 1 else Workload.concat(parts)
    except InputError as err:
        raise where.error("workload" if "job" not in doc else "job", str(err)) from None
    return Scenario(
        source=source,
        text=text,
        name=where.string(info, "name", "scenario", Path(source).stem),
        description=where.string(info, "description", "scenario", ""),
        topology=topology,
        workload=workload,
        options=options,
        compute_s=compute_s,
        training=step,
        files=(*_topology_files(doc["topology"], Path(base_dir)), *files),
        failures=describe_changes(intact, topology),
        jobs=jobs,
    )


def load_scenario(
    path: str | os.PathLike, progress: Callable[[str], None] | None = None, *, system: str | None = None
) -> Scenario:
    """Load a scenario file; flow lists are found relative to it. ``progress``: as
    :func:`scenario_from_document`. ``system`` (a preset, a shipped system or a system file,
    relative to the working directory) replaces the ``cluster`` of the scenario's
    ``[topology]``, its other keys (``n_nodes``, ``fabric``, ``system`` overrides, ...) kept,
    and the node count its system file's ``[cluster]`` gave it too (the workload was written
    for those servers).

    Raises
    ------
    InputError
        When the file cannot be read or its content is bad (see :func:`parse_scenario`), or
        ``system`` is given for a topology that is not a cluster.
    """
    if isinstance(path, Mapping):
        raise InputError("load_scenario takes a scenario file's path; for a parsed TOML document (a dict) call "
                         "flowsim.scenario.scenario_from_document")
    path = path_argument(path, "load_scenario: path")
    text = read_text_file(path, "the scenario")
    if system is None:
        return parse_scenario(text, source=str(path), base_dir=path.parent, progress=progress)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise Where(str(path)).error("", f"not valid TOML: {err}") from None
    topology = doc.get("topology")
    if not isinstance(topology, dict) or "cluster" not in topology:
        raise InputError(
            f"{path}: --system replaces a [topology] cluster, and this scenario's topology has none "
            "(it names a preset, or nodes and links)"
        )
    if not (is_system_file(system) or is_shipped_system(system) or system_name(system) in preset_names()):
        raise InputError(
            f"--system {system!r}{did_you_mean(system)}: expected {systems_expected()}"
        )
    if is_system_file(system) and not Path(system).is_file():
        raise InputError(f"--system {system!r}: no such system file"
                         + (" (it is a directory)" if Path(system).is_dir() else ""))
    if is_system_file(system):
        # Read here, its errors name the file and its key; read as the scenario's cluster, they
        # were put under the scenario's topology.cluster, which the user did not write.
        load_system(system)
    where = Where(str(path))
    if "n_nodes" not in topology and _names_system(topology["cluster"]):
        # The node count the scenario ran with came from its system file's [cluster]: the
        # workload was written for it (its flows name n1.gpu0, ...), so it stays.
        try:
            replaced = load_system(system_path(topology["cluster"], path.parent), overrides=topology.get("system", {}))
        except InputError as err:
            raise where.error("topology.cluster", str(err)) from None
        topology["n_nodes"] = replaced.cluster.get("n_nodes", 1)
    if "system" in topology and not is_system_file(system) and not is_shipped_system(system):
        raise InputError(f"{path}: --system {system!r} is a preset, which takes no [topology] system overrides "
                         "(the scenario has them); give a system file")
    topology["cluster"] = str(Path(system).resolve()) if is_system_file(system) else system_name(system)
    return scenario_from_document(doc, text=text, source=str(path), base_dir=path.parent, progress=progress)


def route_scenario(scenario: Scenario, flows: np.ndarray | None = None) -> Routes:
    """Routes of a scenario's flows (or of the flows at indices ``flows``), as its options
    ask.

    Raises
    ------
    InputError
        Naming the scenario file, when a flow cannot be routed.
    """
    t, w, o = scenario.topology, scenario.workload, scenario.options
    src, dst = (w.src, w.dst) if flows is None else ([w.src[f] for f in flows], [w.dst[f] for f in flows])
    try:
        return Router(t).route(src, dst, method=o.routing, seed=o.seed, gpudirect=o.gpudirect)
    except NoRouteError as err:
        f = err.pair if flows is None else int(flows[err.pair])
        raise InputError(f"{scenario.source}: routing: flow {w.names[f]!r}: {err}") from None
    except InputError as err:
        raise InputError(f"{scenario.source}: routing: {err}") from None


def rates_problem(scenario: Scenario) -> tuple[np.ndarray, FairShareProblem]:
    """A scenario as one instant: every flow with bytes to move, active at once.

    Start times, dependencies, delays, latencies and overheads play no part, and zero-byte
    flows (which never transfer) are left out.

    Returns
    -------
    flows : int64 array
        The flows taken, as indices into the scenario's workload.
    problem : FairShareProblem
        Their routes, weights and caps over the topology's links, checked.

    Raises
    ------
    InputError
        Naming the scenario file, when a flow cannot be routed or has neither a route nor a
        rate cap.
    """
    t, w = scenario.topology, scenario.workload
    flows = np.flatnonzero(w.size_bytes > 0)
    routes = route_scenario(scenario, flows)
    try:
        problem = FairShareProblem.build(
            routes, t.link_capacity_Bps, w.weight[flows], w.cap_Bps[flows],
            link_names=t.link_names, flow_names=[w.names[f] for f in flows.tolist()],
        )
    except InputError as err:
        raise InputError(f"{scenario.source}: {err}") from None
    return flows, problem


def run_scenario(
    scenario: Scenario, progress: Callable[[str], None] | None = None, *, live: bool | None = None
) -> ScenarioRun:
    """Route a scenario's flows over its topology and simulate them.

    Parameters
    ----------
    scenario : Scenario
    progress : callable, optional
        Called with a short note before each stage (routing, simulating).
    live : bool, optional
        Whether the engine prints its progress line on stderr (see
        :func:`flowsim.engine.simulate`); default: when ``progress`` is given.

    Returns
    -------
    ScenarioRun

    Raises
    ------
    InputError
        Naming the scenario file, when a flow cannot be routed or the dependencies form a
        cycle; when ``scenario`` is not a :class:`Scenario`.
    """
    if not isinstance(scenario, Scenario):
        raise InputError(f"run_scenario takes a Scenario (flowsim.load_scenario(path) gives one), got {scenario!r} "
                         f"({type(scenario).__name__})")
    note = progress or (lambda message: None)
    t, w, o = scenario.topology, scenario.workload, scenario.options
    note(f"routing {len(w):,} flows over {t.n_links:,} links ({describe_method(t, o.routing)})")
    routes = route_scenario(scenario)
    note(f"simulating {len(w):,} flows ({routes.n_incidences:,} flow-link crossings)")
    try:
        result = simulate_routed(
            t, w, routes, record_links=o.record_links, record_flows=o.record_flows, mode=o.mode,
            time_rel_tol=o.time_rel_tol, progress=progress is not None if live is None else live, classes=o.classes,
        )
    except InputError as err:
        raise InputError(f"{scenario.source}: {err}") from None
    if o.record_flows and not o.record_links:
        result = _without_link_segments(result)
    return ScenarioRun(scenario, routes, result)


def _without_link_segments(result: SimulationResult) -> SimulationResult:
    """``result`` with its flow rate segments only: the engine records flow rates together
    with link rates, and a scenario that asked for no link rates must not get them."""
    indptr, start, end, rate = (
        result.flow_segment_indptr, result.segment_start_s, result.segment_end_s, result.segment_rate_Bps
    )
    assert indptr is not None and start is not None and end is not None and rate is not None  # flows recorded
    lo = int(indptr[0])
    return replace(
        result,
        link_segment_indptr=None,
        segment_start_s=start[lo:],
        segment_end_s=end[lo:],
        segment_rate_Bps=rate[lo:],
        flow_segment_indptr=indptr - lo,
    )
