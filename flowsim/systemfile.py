"""System files: a server (and optionally its cluster) described in TOML, data only.

The format is in ``docs/system-format.md``. A system file becomes a
:class:`~flowsim.servers.ServerSpec`, built by :func:`flowsim.servers.build_server` as every
preset is, and the cluster keys :func:`flowsim.fabrics.build_cluster` takes. Errors raise
:class:`~flowsim.errors.InputError` naming the file and the key.

    >>> system = parse_system('''
    ... [server]
    ... gpu = "L40S"
    ... gpus = 8
    ... gpu_fabric = "pcie"
    ... pcie = { generation = 4, switches = [[0, 1, 2, 3], [4, 5, 6, 7]] }
    ... cpu = { sockets = 2, interconnect = "upi_sapphire_rapids", memory = "ddr5_4800_8ch" }
    ... nics = { count = 2, speed_gbps = 200, kind = "roce" }
    ... [cluster]
    ... nodes = 4
    ... ''', name="l40s")
    >>> system.spec.n_gpus, system.spec.compute_nic, system.spec.rails(), system.cluster
    (8, 'eth200g', [0, 0, 0, 0, 1, 1, 1, 1], {'n_nodes': 4})
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from flowsim.collectives.tuner import NcclEnv
from flowsim.errors import FieldError, InputError, read_text_file
from flowsim.fabrics import FABRICS, compute_switch
from flowsim.hardware import (
    ETHERNET_SPEEDS,
    HOST_MEMORY_TECHNOLOGIES,
    INFINIBAND_SPEEDS,
    INTERSOCKET_TECHNOLOGIES,
    check_gpu_nvlink,
    gpu_nvlinks,
    gpu_peer_to_peer,
    is_infiniband,
    nvlink_generation,
    nvswitch_generation,
    switch_names,
)
from flowsim.presets import preset_names, system_name
from flowsim.servers import CPU_KINDS, GPU_FABRICS, MAX_NIC_PORTS, MAX_SERVER_PARTS, PcieSwitch, ServerSpec
from flowsim.tomlcheck import Where, join, show

__all__ = [
    "NIC_KINDS", "SystemFile", "find_system", "format_system", "is_shipped_system", "is_system_file", "load_system",
    "merge", "parse_system", "resolve_system", "shipped_system_names", "system_from_document",
]

#: How compute NICs talk: InfiniBand, RDMA over Converged Ethernet, AWS Elastic Fabric Adapter.
NIC_KINDS = ("ib", "roce", "efa")
_PCIE_GENERATIONS = {3: "pcie3", 4: "pcie4", 5: "pcie5", 6: "pcie6"}
_NVSWITCH_NAMES = ("nvswitch1", "nvswitch2", "nvswitch3", "nvswitch4")
_CLUSTER = {"nodes": "n_nodes", "fabric": "fabric", "switch": "switch", "oversubscription": "oversubscription",
            "su_size": "su_size"}


@dataclass(frozen=True)
class SystemFile:
    """A parsed system file.

    Attributes
    ----------
    name, description : str
    spec : ServerSpec
        The server.
    cluster : dict
        Keyword arguments of :func:`flowsim.fabrics.build_cluster` the ``[cluster]`` table
        gives (``n_nodes``, ``fabric``, ``switch``, ``oversubscription``, ``su_size``).
    source : str
        The file, for messages.
    """

    name: str
    description: str
    spec: ServerSpec
    cluster: dict = field(default_factory=dict)
    source: str = "<string>"


def is_system_file(name: str) -> bool:
    """Whether a ``--system`` or ``cluster`` value names a system file rather than a preset."""
    return name.lower().endswith(".toml")


def merge(base: Mapping, overrides: Mapping) -> dict:
    """``base`` with ``overrides`` laid over it, table by table (a scenario's changes to a system file)."""
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _integers(where: Where, value: object, key: str, *, allow_empty: bool = False) -> tuple[int, ...]:
    if (not isinstance(value, list) or (not value and not allow_empty)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise where.error(key, f"expected an array of integers, got {show(value)}")
    return tuple(value)


def _integer(where: Where, table: Mapping, key: str, prefix: str, default: int | None = None, minimum: int = 1) -> int:
    if key not in table and default is not None:
        return default
    return where.integer(table, key, prefix, minimum)


def _speed(where: Where, table: Mapping, prefix: str, speeds: Mapping[int, str]) -> str:
    return speeds[_one_of(where, table, "speed_gbps", prefix, tuple(speeds), " (Gb/s)")]


def _one_of(where: Where, table: Mapping, key: str, prefix: str, values: tuple[int, ...], unit: str = "") -> int:
    """``table[key]``, an integer among ``values``; an error naming the key that says it is
    missing where it is, as the other keys' errors do."""
    known = f"one of {', '.join(map(str, values))}{unit}"
    if key not in table:
        raise where.error(join(prefix, key), f"missing; expected {known}")
    value = table[key]
    if not isinstance(value, int) or isinstance(value, bool) or value not in values:
        raise where.error(join(prefix, key), f"expected {known}, got {show(value)}")
    return value


def _gpu_fabric(where: Where, server: Mapping, gpu: str, n_gpus: int) -> dict:
    fabric = where.choice(server, "gpu_fabric", "server", GPU_FABRICS)
    options: dict = {}
    if fabric == "nvswitch":
        name = where.string(server, "nvswitch", "server")
        try:
            options["nvlink"] = nvswitch_generation(name).nvlink
            check_gpu_nvlink(gpu, options["nvlink"])
        except InputError as err:
            raise where.error("server.nvswitch", str(err)) from None
        if "nvlinks_per_gpu" in server:
            options["nvlinks_per_gpu"] = where.integer(server, "nvlinks_per_gpu", "server", 1)
            most = nvlink_generation(options["nvlink"]).links_per_gpu
            if options["nvlinks_per_gpu"] > most:
                raise where.error("server.nvlinks_per_gpu", f"expected at most {most} ({options['nvlink']}), got "
                                                            f"{options['nvlinks_per_gpu']}")
        elif (links := gpu_nvlinks(gpu)) is not None:  # an H800's 8 NVLinks, not NVLink 4's 18
            options["nvlinks_per_gpu"] = links
    elif fabric == "nvlink_mesh":
        options["nvlink"] = where.string(server, "nvlink", "server")
        try:
            nvlink_generation(options["nvlink"])
            check_gpu_nvlink(gpu, options["nvlink"])
        except InputError as err:
            raise where.error("server.nvlink", str(err)) from None
        counts = server.get("nvlink_counts")
        if counts is None:
            raise where.error("server.nvlink_counts", f"missing; expected {n_gpus} rows of {n_gpus} NVLink counts")
        if not isinstance(counts, list) or len(counts) != n_gpus:
            raise where.error("server.nvlink_counts", f"expected {n_gpus} rows of {n_gpus} NVLink counts, "
                                                      f"got {show(counts)}")
        rows = tuple(_integers(where, row, f"server.nvlink_counts[{i}]") for i, row in enumerate(counts))
        options["nvlink_counts"] = rows
    for key in ("nvswitch", "nvlinks_per_gpu", "nvlink", "nvlink_counts"):
        wanted = {"nvswitch": ("nvswitch", "nvlinks_per_gpu"), "nvlink_mesh": ("nvlink", "nvlink_counts")}
        if key in server and key not in wanted.get(fabric, ()):
            raise where.error(join("server", key), f"not a key of gpu_fabric = {fabric!r}")
    return {"gpu_fabric": fabric, **options}


def _switches(where: Where, pcie: Mapping, n_gpus: int, sockets: int) -> list[dict[str, Any]]:
    """The PCIe switches as tables of gpus, nics (None: placed by the NICs' ``serves``) and socket."""
    if "switches" not in pcie:
        return [{"gpus": (g,), "nics": None, "socket": None} for g in range(n_gpus)]
    value = pcie["switches"]
    if not isinstance(value, list) or not value:
        raise where.error("server.pcie.switches", f"expected an array of GPU lists or tables, got {show(value)}")
    out: list[dict[str, Any]] = []
    for j, item in enumerate(value):
        key = f"server.pcie.switches[{j}]"
        if isinstance(item, list):
            out.append({"gpus": _integers(where, item, key, allow_empty=True), "nics": None, "socket": None})
            continue
        table = where.table(item, key)
        where.only(table, ("gpus", "nics", "socket"), key)
        nics = _integers(where, table["nics"], f"{key}.nics", allow_empty=True) if "nics" in table else None
        socket = where.integer(table, "socket", key, 0) if "socket" in table else None
        if socket is not None and socket >= sockets:
            raise where.error(f"{key}.socket", f"the server has {sockets} socket(s), 0..{sockets - 1}; got {socket}")
        out.append({"gpus": _integers(where, table.get("gpus", []), f"{key}.gpus", allow_empty=True),
                    "nics": nics, "socket": socket})
    gpus = sorted(g for s in out for g in s["gpus"])
    if gpus != list(range(n_gpus)):
        raise where.error("server.pcie.switches", f"expected each GPU 0..{n_gpus - 1} on one switch, got {gpus}")
    return out


class _Nics(NamedTuple):
    """A server's compute NICs as ``[server.nics]`` describes them (:class:`ServerSpec`'s
    fields of the same names)."""

    compute_nic: str  # the link technology
    nic_kind: str
    gpu_nics: tuple[int, ...] | None  # the NIC each GPU uses
    net_latency_us: float  # what NCCL's network plugin reports
    step_latency_us: float | None  # None: the same
    nic_ports: int


def _nics(where: Where, server: Mapping, switches: list[dict[str, Any]], n_gpus: int) -> _Nics:
    """The server's compute NICs; places them on ``switches``."""
    nics = where.table(server.get("nics", {}), "server.nics")
    where.only(nics, ("count", "speed_gbps", "kind", "ports", "serves", "net_latency_us", "step_latency_us"),
               "server.nics")

    def microseconds(key: str) -> float:
        value = where.number(nics, key, "server.nics", 0.0)
        if not (math.isfinite(value) and value >= 0):
            raise where.error(f"server.nics.{key}", f"expected a number of microseconds >= 0, got {value!r}")
        return value

    net_latency = microseconds("net_latency_us")
    step_latency = microseconds("step_latency_us") if "step_latency_us" in nics else None
    count = _integer(where, nics, "count", "server.nics", 0, minimum=0)
    if nics and "count" not in nics:  # count = 0 given with the rest is a sweep's server without NICs
        raise where.error("server.nics.count", f"missing; the NICs' {', '.join(sorted(nics))} given without it "
                                               "(default 0: none)")
    kind = where.choice(nics, "kind", "server.nics", NIC_KINDS, "ib")
    ports = _integer(where, nics, "ports", "server.nics", 1)
    if ports > MAX_NIC_PORTS:
        raise where.error("server.nics.ports", f"expected at most {MAX_NIC_PORTS} ports a NIC, got {ports}")
    speeds = INFINIBAND_SPEEDS if kind == "ib" else ETHERNET_SPEEDS  # port speeds (Gb/s) of the NICs' family
    technology = _speed(where, nics, "server.nics", speeds) if count else "ib_ndr"
    placed = [r for s in switches for r in (s["nics"] or ())]
    if placed and not count:
        raise where.error("server.nics.count", f"missing: server.pcie.switches place NICs {sorted(placed)}; give "
                                               "[server.nics] their count and speed_gbps")
    if placed and sorted(placed) != list(range(count)):
        raise where.error("server.pcie.switches", f"the switches' nics must name each NIC 0..{count - 1} once, "
                                                  f"got {sorted(placed)}")
    if "serves" in nics:
        serves = nics["serves"]
        if not isinstance(serves, list) or len(serves) != count:
            raise where.error("server.nics.serves", f"expected {count} lists of GPUs, one per NIC, got {show(serves)}")
        groups = [_integers(where, g, f"server.nics.serves[{r}]") for r, g in enumerate(serves)]
    elif placed and count <= n_gpus:
        # NICs on the switches: each GPU takes one on its own switch, else one on its socket
        # (ServerSpec.rails), not the consecutive GPUs' (a NIC numbered 1 on GPU 0's switch
        # served GPUs 4-7 across the sockets, staged through host memory).
        groups = []
    elif count and count <= n_gpus and n_gpus % count == 0:
        per = n_gpus // count
        groups = [tuple(range(r * per, (r + 1) * per)) for r in range(count)]
    elif count > n_gpus:
        raise where.error("server.nics", f"{count} NICs for {n_gpus} GPUs: flowsim gives each GPU one NIC; "
                                         "describe a GPU's several NICs as one of several ports ('ports', at "
                                         "'speed_gbps' each" + (f": count = {n_gpus}, ports = {count // n_gpus})"
                                                                if count % n_gpus == 0 else ")"))
    elif count:
        raise where.error("server.nics", f"{count} NICs for {n_gpus} GPUs, which do not split evenly: give "
                                         "'serves', the GPUs each NIC serves")
    else:
        groups = []
    gpu_nics = [-1] * n_gpus
    for r, group in enumerate(groups):
        for g in group:
            if not 0 <= g < n_gpus:
                raise where.error(f"server.nics.serves[{r}]", f"GPU {g} is not a GPU of the server's 0..{n_gpus - 1}")
            if gpu_nics[g] >= 0:
                raise where.error(f"server.nics.serves[{r}]", f"GPU {g} is served by NIC {gpu_nics[g]} already: "
                                  "flowsim gives each GPU one NIC (a GPU's several NICs are one of several 'ports')")
            gpu_nics[g] = r
    if groups and min(gpu_nics) < 0:  # flowsim gives each GPU one NIC (docs/system-format.md)
        raise where.error("server.nics.serves", f"GPU {gpu_nics.index(-1)} is served by no NIC")
    if not placed:
        switch_of = {g: j for j, s in enumerate(switches) for g in s["gpus"]}
        for s in switches:
            s["nics"] = []
        for r, group in enumerate(groups):
            switches[switch_of[group[0]]]["nics"].append(r)
    for s in switches:
        s["nics"] = tuple(s["nics"] or ())
    return _Nics(technology, kind, tuple(gpu_nics) if groups else None, net_latency,
                 step_latency, ports)


def _server(where: Where, server: Mapping, name: str) -> ServerSpec:
    where.only(server, ("gpu", "gpus", "gpu_fabric", "p2p", "nvswitch", "nvlinks_per_gpu", "nvlink", "nvlink_counts",
                        "pcie", "cpu", "nics", "frontend", "hosts"), "server")
    gpu = where.string(server, "gpu", "server")
    n_gpus = where.integer(server, "gpus", "server", 1)
    if n_gpus > MAX_SERVER_PARTS:  # before the switches take it as a range
        raise where.error("server.gpus", f"expected at most {MAX_SERVER_PARTS} (an NVLink domain's most GPUs, "
                                         f"docs/hardware.md §1.3), got {n_gpus}")
    fabric = _gpu_fabric(where, server, gpu, n_gpus)
    cpu = where.table(server.get("cpu", {}), "server.cpu")
    where.only(cpu, ("kind", "sockets", "interconnect", "memory"), "server.cpu")
    cpu_kind = where.choice(cpu, "kind", "server.cpu", CPU_KINDS, "x86")
    sockets = where.integer(cpu, "sockets", "server.cpu", 1)
    if "interconnect" in cpu and (sockets == 1 or cpu_kind == "grace"):
        why = "Graces share none" if cpu_kind == "grace" else "a server of 1 socket has none"
        raise where.error("server.cpu.interconnect", f"the link between consecutive sockets; {why}")
    interconnect = where.choice(cpu, "interconnect", "server.cpu", INTERSOCKET_TECHNOLOGIES) \
        if "interconnect" in cpu or (sockets > 1 and cpu_kind == "x86") else None
    memory = where.choice(cpu, "memory", "server.cpu", HOST_MEMORY_TECHNOLOGIES)
    pcie = where.table(server.get("pcie", {}), "server.pcie")
    where.only(pcie, ("generation", "switches"), "server.pcie")
    generation = _one_of(where, pcie, "generation", "server.pcie", tuple(_PCIE_GENERATIONS))
    switches = _switches(where, pcie, n_gpus, sockets)
    nics = _nics(where, server, switches, n_gpus)
    frontend = where.table(server.get("frontend", {}), "server.frontend")
    where.only(frontend, ("ports", "speed_gbps"), "server.frontend")
    ports = _integer(where, frontend, "ports", "server.frontend", 0, minimum=0)
    if "speed_gbps" in frontend and "ports" not in frontend:
        # Not refused with ports = 0 given: a sweep over ports keeps the speed for its other values.
        raise where.error("server.frontend.speed_gbps", "the speed of front-end ports, given without ports "
                                                        "(default 0: none); give ports too")
    frontend_nic = _speed(where, frontend, "server.frontend", ETHERNET_SPEEDS) if ports else "eth100g"
    spec = ServerSpec(
        name, gpu, n_gpus, fabric["gpu_fabric"], _PCIE_GENERATIONS[generation], sockets, interconnect, memory,
        tuple(PcieSwitch(s["gpus"], s["nics"], s["socket"]) for s in switches), nics.compute_nic, frontend_nic, ports,
        nvlink=fabric.get("nvlink"), nvlinks_per_gpu=fabric.get("nvlinks_per_gpu"),
        nvlink_counts=fabric.get("nvlink_counts"), p2p=where.boolean(server, "p2p", "server", gpu_peer_to_peer(gpu)),
        cpu=cpu_kind,
        gpu_nics=nics.gpu_nics, nic_kind=nics.nic_kind, net_latency_us=nics.net_latency_us,
        step_latency_us=nics.step_latency_us, nic_ports=nics.nic_ports,
        hosts=_integer(where, server, "hosts", "server", 1),
    )
    try:
        spec.check()
    except FieldError as err:
        raise where.error(_SPEC_KEYS.get(err.field, "server"), str(err)) from None
    except InputError as err:  # about the server as a whole
        raise where.error("server", str(err)) from None
    return spec


#: The key of a system file that holds each :class:`ServerSpec` field its own check
#: (:meth:`ServerSpec.check`) may find wrong; a field several keys make (the NVLink
#: generation, a ``[server.nvswitch]`` or ``nvlink`` key by the fabric) is the server's.
_SPEC_KEYS = {
    "n_gpus": "server.gpus", "sockets": "server.cpu.sockets", "frontend_ports": "server.frontend.ports",
    "nic_ports": "server.nics.ports", "hosts": "server.hosts", "net_latency_us": "server.nics.net_latency_us",
    "step_latency_us": "server.nics.step_latency_us", "nccl_env": "nccl.env", "gpu_fabric": "server.gpu_fabric",
    "cpu": "server.cpu.kind", "nvlinks_per_gpu": "server.nvlinks_per_gpu", "nvlink_counts": "server.nvlink_counts",
    "intersocket": "server.cpu.interconnect", "memory": "server.cpu.memory", "pcie": "server.pcie.generation",
    "compute_nic": "server.nics.speed_gbps", "frontend_nic": "server.frontend.speed_gbps",
    "switches": "server.pcie.switches", "gpu_nics": "server.nics",
}


def _cluster(where: Where, table: Mapping) -> dict:
    where.only(table, tuple(_CLUSTER), "cluster")
    out: dict = {}
    if "nodes" in table:
        out["n_nodes"] = where.integer(table, "nodes", "cluster", 1)
    if "fabric" in table:
        out["fabric"] = where.choice(table, "fabric", "cluster", FABRICS)
    if "switch" in table:
        out["switch"] = where.choice(table, "switch", "cluster", switch_names())
    if "oversubscription" in table:
        out["oversubscription"] = where.number(table, "oversubscription", "cluster")
        if not 1 <= out["oversubscription"] < math.inf:
            raise where.error("cluster.oversubscription", f"expected a number >= 1 (leaf down to up ports), got "
                                                          f"{show(out['oversubscription'])}")
    if "su_size" in table:
        out["su_size"] = where.integer(table, "su_size", "cluster", 1)
    return out


def _nccl_env(where: Where, doc: Mapping) -> tuple[tuple[str, str], ...]:
    """``[nccl] env``: the NCCL environment the system's software sets, a table of
    ``NCCL_NAME = "value"``, each value read as NCCL's tuner would read it."""
    nccl = where.table(doc.get("nccl", {}), "nccl")
    where.only(nccl, ("env",), "nccl")
    env = where.table(nccl.get("env", {}), "nccl.env")
    for key, value in env.items():
        if not key.startswith("NCCL_"):
            raise where.error(f"nccl.env.{key}", "is not an NCCL_ variable")
        if not isinstance(value, str):
            raise where.error(f"nccl.env.{key}", f"expected a string, as in NCCL's environment, got {show(value)}")
        try:
            NcclEnv({key: value}).check()
        except InputError as err:
            raise where.error(f"nccl.env.{key}", str(err)) from None
    return tuple(env.items())


def system_from_document(doc: Mapping, *, source: str = "<string>", name: str = "system") -> SystemFile:
    """A system file's parsed TOML document (a dict) checked and turned into a :class:`SystemFile`."""
    where = Where(source)
    where.only(doc, ("name", "description", "server", "cluster", "nccl"), "")
    name = where.string(doc, "name", "", name)
    if not name.strip():
        raise where.error("name", "expected the system's name (headers and tables show it), got an empty string")
    if "server" not in doc:
        raise where.error("server", "missing; expected a [server] table")
    spec = _server(where, where.table(doc["server"], "server"), name)
    env = _nccl_env(where, doc)
    if env:
        spec = dataclasses.replace(spec, nccl_env=env)
    cluster = _cluster(where, where.table(doc.get("cluster", {}), "cluster"))
    if "switch" in cluster and spec.n_nics:
        try:  # an InfiniBand NIC has no port for an Ethernet switch, nor RoCE for InfiniBand
            compute_switch(spec, cluster["switch"])
        except InputError as err:
            raise where.error("cluster.switch", str(err)) from None
    return SystemFile(name, where.string(doc, "description", "", ""), spec, cluster, source)


def parse_system(text: str, *, source: str = "<string>", name: str = "system",
                 overrides: Mapping | None = None) -> SystemFile:
    """Parse a system file's TOML text, with ``overrides`` (a table of its keys) laid over it."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{source}: not valid TOML: {err}") from None
    return system_from_document(merge(doc, overrides or {}), source=source, name=name)


def load_system(path: str | os.PathLike, overrides: Mapping | None = None) -> SystemFile:
    """Load a system file (format: docs/system-format.md); its name defaults to the file's stem."""
    path = Path(path)
    return parse_system(read_text_file(path, "the system file"), source=str(path), name=path.stem,
                        overrides=overrides)


#: System files that ship with flowsim (cloud instances), by name.
SHIPPED = Path(__file__).resolve().parent / "systems"


def shipped_system_names() -> tuple[str, ...]:
    """Names of the system files that ship with flowsim (``aws_p5``, ``gcp_a3_mega``, ...)."""
    return tuple(sorted(path.stem for path in SHIPPED.glob("*.toml")))


def is_shipped_system(value: str) -> bool:
    """Whether ``value`` names a system file that ships with flowsim (as :func:`~flowsim.presets.system_name`
    reads it: ``'-'`` and ``'_'`` alike, case ignored)."""
    return not is_system_file(value) and system_name(value) in shipped_system_names()


def system_path(value: str, base_dir: str | os.PathLike = ".") -> Path:
    """The file a ``--system`` or ``cluster`` value names: a shipped system by its name
    (``aws-p5``), else a system file, relative to ``base_dir``."""
    if is_shipped_system(value):
        return SHIPPED / f"{system_name(value)}.toml"
    return Path(base_dir) / value


def find_system(value: str) -> SystemFile:
    """A system file (``*.toml``) or, by name, one that ships with flowsim (``aws-p5``)."""
    return load_system(system_path(value))


def systems_expected() -> str:
    """What a system name may be, for messages refusing one: the presets, the shipped
    systems and a system file."""
    return (f"a preset ({', '.join(preset_names())}), a shipped system ({', '.join(shipped_system_names())}) "
            "or a system file (FILE.toml)")


def did_you_mean(value: str) -> str:
    """`` (did you mean ...?)`` naming the presets and shipped systems ``value`` is part of
    (``h100``: dgx_h100, azure_nd_h100_v5, oci_bm_gpu_h100_8) or a slip of (``dgx_h1000``),
    else ``""``: for messages refusing an unknown system name."""
    name = system_name(value)
    names = (*preset_names(), *shipped_system_names())
    close = [n for n in names if name and name in n] or difflib.get_close_matches(name, names, n=3, cutoff=0.8)
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"


def resolve_system(value: str) -> tuple[str | ServerSpec, str, dict]:
    """What a ``--system`` value names: a system file (``*.toml``), a shipped one
    (:func:`shipped_system_names`) or a preset, named as :func:`~flowsim.presets.system_name` reads
    names (``'-'`` and ``'_'`` alike, case ignored). Returns the
    system :func:`flowsim.fabrics.build_cluster` takes, its name, and the file's cluster keys
    (empty for a preset).

    Raises
    ------
    InputError
        ``value`` is none of the three; the message lists the presets and shipped systems.
    """
    if is_system_file(value) or is_shipped_system(value):
        system = find_system(value)
        return system.spec, system.name, dict(system.cluster)
    name = system_name(value)
    if name not in preset_names():
        raise InputError(
            f"unknown system {value!r}{did_you_mean(value)}: expected {systems_expected()}"
        )
    return name, name, {}


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def format_system(spec: ServerSpec, *, cluster: Mapping | None = None, description: str = "",
                  comments: tuple[str, ...] = ()) -> str:
    """A system file (TOML text) describing ``spec`` (and ``cluster``: build_cluster's
    ``n_nodes``, ``fabric``, ``switch``, ``oversubscription``, ``su_size``), which
    :func:`parse_system` reads back into the same server."""
    lines = [f"# {line}" if line else "#" for line in comments]
    lines.append(f"name = {_toml_value(spec.name)}")
    if description:
        lines.append(f"description = {_toml_value(description)}")
    lines += ["", "[server]", f"gpu = {_toml_value(spec.gpu)}", f"gpus = {spec.n_gpus}",
              f"gpu_fabric = {_toml_value(spec.gpu_fabric)}", f"p2p = {_toml_value(spec.p2p)}"]
    if spec.hosts > 1:
        lines.append(f"hosts = {spec.hosts}")
    if spec.gpu_fabric == "nvswitch":
        switch = next(name for name in _NVSWITCH_NAMES if nvswitch_generation(name).nvlink == spec.nvlink)
        lines.append(f"nvswitch = {_toml_value(switch)}")
        if spec.nvlinks_per_gpu is not None:
            lines.append(f"nvlinks_per_gpu = {spec.nvlinks_per_gpu}")
    elif spec.gpu_fabric == "nvlink_mesh":
        assert spec.nvlink_counts is not None
        lines.append(f"nvlink = {_toml_value(spec.nvlink)}")
        lines.append("nvlink_counts = [")
        lines += [f"    {_toml_value(list(row))}," for row in spec.nvlink_counts]
        lines.append("]")
    switches = []
    for j, s in enumerate(spec.switches):
        table: dict[str, object] = {"gpus": list(s.gpus), "nics": list(s.nics)}
        if s.socket is not None or spec.socket_of(j) != j * spec.sockets // len(spec.switches):
            table["socket"] = spec.socket_of(j)
        switches.append(table)
    lines += ["", "[server.pcie]", f"generation = {spec.pcie.removeprefix('pcie')}", "switches = ["]
    lines += [f"    {_toml_value(s)}," for s in switches]
    lines += ["]", "", "[server.cpu]", f"kind = {_toml_value(spec.cpu)}", f"sockets = {spec.sockets}"]
    if spec.intersocket is not None and spec.sockets > 1:  # one socket's has no link to use (and files take none)
        lines.append(f"interconnect = {_toml_value(spec.intersocket)}")
    lines.append(f"memory = {_toml_value(spec.memory)}")
    lines += ["", "[server.nics]", f"count = {spec.n_nics}"]
    if spec.n_nics:
        speeds = INFINIBAND_SPEEDS if is_infiniband(spec.compute_nic) else ETHERNET_SPEEDS
        speed = next(gbps for gbps, technology in speeds.items() if technology == spec.compute_nic)
        kind = spec.nic_kind if spec.nic_kind != "ib" or is_infiniband(spec.compute_nic) else "roce"
        lines += [f"speed_gbps = {speed}", f"kind = {_toml_value(kind)}"]
        if spec.nic_ports != 1:
            lines.append(f"ports = {spec.nic_ports}")
        rails = spec.rails()
        serves = [[g for g, r in enumerate(rails) if r == n] for n in range(spec.n_nics)]
        lines.append(f"serves = {_toml_value(serves)}")
        if spec.net_latency_us:
            lines.append(f"net_latency_us = {spec.net_latency_us!r}")
        if spec.step_latency_us is not None:
            lines.append(f"step_latency_us = {spec.step_latency_us!r}")
    lines += ["", "[server.frontend]", f"ports = {spec.frontend_ports}"]
    if spec.frontend_ports:
        speed = next(gbps for gbps, technology in ETHERNET_SPEEDS.items() if technology == spec.frontend_nic)
        lines.append(f"speed_gbps = {speed}")
    if cluster:
        lines += ["", "[cluster]"]
        lines += [f"{key} = {_toml_value(cluster[name])}" for key, name in _CLUSTER.items() if name in cluster]
    if spec.nccl_env:
        lines += ["", "[nccl.env]"] + [f"{key} = {_toml_value(value)}" for key, value in spec.nccl_env]
    return "\n".join(lines) + "\n"
