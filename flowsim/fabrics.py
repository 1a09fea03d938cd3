"""Fabrics between servers: InfiniBand fat-trees and rail-optimized SuperPOD units, Ethernet.

All switched fabrics here are folded Clos networks built the same way:

* **leaves** take endpoints (NIC ports, storage targets) on their down ports and spend
  ``down / oversubscription`` ports going up;
* **two tiers**: every leaf connects to every spine; the spine count is the smallest that
  fits the switch radix and divides a leaf's uplinks evenly;
* **three tiers**: leaves are grouped in pods (a scalable unit, or a k-ary pod); each pod has
  its own spines with as many ports up as down; spine ``j`` of every pod joins core plane
  ``j``, and each plane has the fewest core switches that fit the radix.

Parallel cables between two switches are one link of their summed capacity; a cable between
an endpoint and a switch runs at the slower of their two port speeds. Links into a switch
carry its forwarding latency (one hop); links into an endpoint carry none.

This reproduces the switch and cable counts of the DGX SuperPOD reference architectures
([SPOD-B200] table in docs/hardware.md §4.4: e.g. 4 SUs = 32 leaves, 16 spines, 1024 + 1024 cables;
32 SUs = 256 leaves, 256 spines, 128 cores) and the classic k-ary fat-tree (k pods of k/2
edge and k/2 aggregation switches, (k/2)^2 cores, k^3/4 hosts).

Oversubscription ``o`` thins the leaf uplinks (``down / o`` of them; it must divide), so the
bisection bandwidth of a fat-tree is ``hosts / 2 x rate / o``.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from flowsim.errors import InputError, whole_number
from flowsim.hardware import SwitchModel, is_infiniband, link_rate, switch_for, switch_model, switch_names
from flowsim.presets import compute_nics, frontend_nics, preset_spec
from flowsim.servers import ServerSpec, build_server
from flowsim.topology import NodeKind, Topology, TopologyBuilder

__all__ = ["FABRICS", "build_cluster", "compute_switch", "default_switch", "fat_tree", "leaf_spine", "resolve_fabric"]

#: Compute fabrics :func:`build_cluster` knows.
FABRICS = ("rail_optimized", "fat_tree", "none", "auto")


@dataclass(frozen=True)
class _Endpoint:
    node: str
    technology: str


@dataclass(frozen=True)
class _Clos:
    """How to build one switched fabric."""

    prefix: str
    switch: SwitchModel
    figure: str
    kinds: tuple[NodeKind, NodeKind, NodeKind]
    """Node kinds of leaf, spine and core switches."""


def _uplinks(down: int, oversubscription: float) -> int:
    real = isinstance(oversubscription, numbers.Real) and not isinstance(oversubscription, bool)
    if not real or not oversubscription >= 1:
        raise InputError(f"oversubscription must be a number >= 1, got {oversubscription!r}")
    up = down / oversubscription
    if up < 1 or abs(up - round(up)) > 1e-9:
        raise InputError(
            f"oversubscription {oversubscription!r} does not divide the {down} down ports of a leaf "
            "into a whole number of uplinks"
        )
    return int(round(up))


def _spread(n_lower: int, up_each: int, ports_each: int) -> int | None:
    """Fewest upper switches that ``n_lower`` switches with ``up_each`` uplinks each can
    spread over evenly (the same cable count from every lower to every upper switch) using
    at most ``ports_each`` ports of each upper switch; None if no count fits."""
    for n in range(1, up_each + 1):
        if up_each % n == 0 and n_lower * (up_each // n) <= ports_each:
            return n
    return None


def _add_switch_links(b: TopologyBuilder, lower: str, upper: str, n_cables: int, clos: _Clos) -> None:
    rate = n_cables * link_rate(clos.switch.technology, figure=clos.figure)
    b.add_cable(lower, upper, rate, latency_s=clos.switch.hop_latency_s, technology=clos.switch.technology)


def _add_leaves(b: TopologyBuilder, leaves: Sequence[tuple[str, Sequence[_Endpoint]]], clos: _Clos) -> None:
    """Leaf switches and their endpoint cables, which run at the slower of the two ports."""
    port = clos.switch.technology
    for leaf, endpoints in leaves:
        b.add_node(leaf, clos.kinds[0])
        for e in endpoints:
            technology = min(e.technology, port, key=lambda t: link_rate(t, figure=clos.figure))
            rate = link_rate(technology, figure=clos.figure)
            b.add_link(e.node, leaf, rate, latency_s=clos.switch.hop_latency_s, technology=technology)
            b.add_link(leaf, e.node, rate, technology=technology)


def _host_leaves(b: TopologyBuilder, n_hosts: int, per_leaf: int, technology: str) -> list[tuple[str, list[_Endpoint]]]:
    """Hosts ``host{i}`` (kind NIC), ``per_leaf`` to each leaf ``leaf{i // per_leaf}``."""
    leaves = []
    for leaf in range(-(-n_hosts // per_leaf)):
        hosts = range(leaf * per_leaf, min(n_hosts, (leaf + 1) * per_leaf))
        for h in hosts:
            b.add_node(f"host{h}", NodeKind.NIC)
        leaves.append((f"leaf{leaf}", [_Endpoint(f"host{h}", technology) for h in hosts]))
    return leaves


@dataclass(frozen=True)
class _Tiers:
    """Switch counts of one Clos fabric, found from port counts alone so that a fabric that
    cannot be built is refused before any of the cluster is."""

    n_leaves: int
    down: int
    """Endpoint ports per leaf."""
    up: int
    """Uplinks per leaf."""
    n_tiers: int
    spines: int
    """Spines (two tiers) or spines per pod (three tiers)."""
    cores: int
    """Core switches per plane (three tiers)."""
    pod_size: int


def _plan_clos(
    n_leaves: int, *, down: int, oversubscription: float, switch: SwitchModel, pod_size: int, tiers: int | None = None
) -> _Tiers:
    """Tiers of ``n_leaves`` leaves, each with ``down`` ports facing endpoints.

    ``pod_size`` consecutive leaves form a pod when three tiers are used. ``tiers=None``
    picks one tier for a lone leaf, else two if they fit the radix, else three.
    """
    radix = switch.radix
    if down >= radix:
        raise InputError(f"{down} down ports per leaf leave no uplinks on a {radix}-port {switch.name}")
    up = _uplinks(down, oversubscription)
    if down + up > radix:
        raise InputError(f"{down} down + {up} up ports exceed the radix {radix} of {switch.name}")
    spines = _spread(n_leaves, up, radix)
    if tiers is None:
        tiers = 1 if n_leaves == 1 else 2 if spines is not None else 3
    if tiers == 1:
        return _Tiers(n_leaves, down, up, 1, 0, 0, pod_size)
    if tiers == 2:
        if spines is None:
            raise InputError(f"{n_leaves} leaves with {up} uplinks each do not fit two tiers of {radix}-port switches")
        return _Tiers(n_leaves, down, up, 2, spines, 0, pod_size)
    if n_leaves % pod_size:
        raise InputError(f"{n_leaves} leaves do not make whole pods of {pod_size}")
    per_pod = _spread(pod_size, up, radix // 2)
    if per_pod is None:
        raise InputError(f"a pod of {pod_size} leaves with {up} uplinks each does not fit {radix}-port spines")
    per_plane = _spread(n_leaves // pod_size, pod_size * up // per_pod, radix)
    if per_plane is None:
        raise InputError(f"{n_leaves // pod_size} pods do not fit a core tier of {radix}-port switches")
    return _Tiers(n_leaves, down, up, 3, per_pod, per_plane, pod_size)


def _add_clos(
    b: TopologyBuilder, leaves: Sequence[tuple[str, Sequence[_Endpoint]]], tiers: _Tiers, clos: _Clos
) -> None:
    """Add ``tiers.n_leaves`` leaves (name and endpoints each, at most ``tiers.down``),
    spines and cores."""
    _add_leaves(b, leaves, clos)
    if tiers.n_tiers == 2:
        for s in range(tiers.spines):
            spine = f"{clos.prefix}spine{s}"
            b.add_node(spine, clos.kinds[1])
            for leaf, _ in leaves:
                _add_switch_links(b, leaf, spine, tiers.up // tiers.spines, clos)
    elif tiers.n_tiers == 3:
        per_pod, per_plane, pod_size = tiers.spines, tiers.cores, tiers.pod_size
        spine_up = pod_size * tiers.up // per_pod
        for plane in range(per_pod):
            for c in range(per_plane):
                b.add_node(f"{clos.prefix}core{plane * per_plane + c}", clos.kinds[2])
        for pod in range(tiers.n_leaves // pod_size):
            for j in range(per_pod):
                spine = f"{clos.prefix}spine{pod * per_pod + j}"
                b.add_node(spine, clos.kinds[1])
                for leaf, _ in leaves[pod * pod_size : (pod + 1) * pod_size]:
                    _add_switch_links(b, leaf, spine, tiers.up // per_pod, clos)
                for c in range(per_plane):
                    _add_switch_links(b, spine, f"{clos.prefix}core{j * per_plane + c}", spine_up // per_plane, clos)


def _ib_clos(switch: SwitchModel, figure: str, prefix: str) -> _Clos:
    return _Clos(prefix, switch, figure, (NodeKind.IB_LEAF, NodeKind.IB_SPINE, NodeKind.IB_CORE))


def _endpoint_switch(technology: str, hop_latency_s: float | None, radix: int) -> SwitchModel:
    model = switch_for(technology)
    latency = model.hop_latency_s if hop_latency_s is None else float(hop_latency_s)
    return SwitchModel(f"{radix}-port {technology} switch", technology, radix, latency, model.source)


def fat_tree(
    k: int,
    *,
    figure: str,
    technology: str = "ib_ndr",
    oversubscription: float = 1.0,
    hop_latency_s: float | None = None,
) -> Topology:
    """Three-level k-ary fat-tree of ``k``-port switches whose hosts are endpoints.

    k pods of k/2 edge (``leaf{i}``) and k/2 aggregation (``spine{i}``) switches, (k/2)^2 core
    switches, and k^3/4 hosts (``host{i}``, kind NIC), host ``i`` on edge ``i // (k/2)``.
    All links run ``technology``; each switch adds ``hop_latency_s`` (default: the hop latency,
    in docs/hardware.md, of that technology's switch). With ``oversubscription`` o each edge
    switch has k/(2o) uplinks (and each pod k/(2o) aggregation switches, under (k/2)^2/o core
    switches), so the bisection bandwidth is k^3/8 x rate / o.

    With links counted as the directed links of each cable, k=16 has 1,024 hosts and 6,144
    links, and k=32 has 8,192 hosts and 49,152 links (3 k^3/4 cables).
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 2 or k % 2:
        raise InputError(f"a k-ary fat-tree needs an even k >= 2, got {k!r}")
    k = int(k)
    half = k // 2
    switch = _endpoint_switch(technology, hop_latency_s, k)
    tiers = _plan_clos(k * half, down=half, oversubscription=oversubscription, switch=switch, pod_size=half, tiers=3)
    b = TopologyBuilder()
    _add_clos(b, _host_leaves(b, k * half * half, half, technology), tiers, _ib_clos(switch, figure, ""))
    return b.build()


def leaf_spine(
    n_hosts: int,
    *,
    figure: str,
    switch: str = "qm9700",
    oversubscription: float = 1.0,
) -> Topology:
    """Two-level leaf/spine fabric of ``switch`` models whose hosts are endpoints.

    Each leaf takes half its radix in hosts (``host{i}`` on ``leaf{i // (radix / 2)}``) and
    ``radix / (2 o)`` uplinks spread evenly over the spines. At most radix^2/2 hosts
    (2,048 for the 64-port QM9700, docs/hardware.md §4.2). Bisection bandwidth: hosts / 2 x rate / o
    when the hosts fill whole leaves.
    """
    model = switch_model(switch)
    n_hosts = whole_number("n_hosts", n_hosts)
    down = model.radix // 2
    n_leaves = -(-n_hosts // down)
    tiers = _plan_clos(n_leaves, down=down, oversubscription=oversubscription, switch=model, pod_size=n_leaves, tiers=2)
    b = TopologyBuilder()
    _add_clos(b, _host_leaves(b, n_hosts, down, model.technology), tiers, _ib_clos(model, figure, ""))
    return b.build()


def front_end_only_note(n_servers: int) -> str:
    """What a ``"none"`` fabric means for ``n_servers`` (> 1) servers, for a command to say."""
    return (f"no compute fabric joins the {n_servers} servers, only their front-end Ethernet: traffic between them "
            "takes it, while NCCL's choice is worked out as if their compute NICs carried it")


def resolve_fabric(
    fabric: str,
    n_nodes: int,
    system: str | ServerSpec | None = None,
    *,
    switch: str | None = None,
    su_size: int | None = None,
    oversubscription: float = 1.0,
) -> str:
    """``fabric`` with ``"auto"`` made concrete: ``"none"`` for one server; for more,
    ``"rail_optimized"``, unless ``system`` is given and its rail leaves do not fit the
    switches (``switch``, ``su_size`` and ``oversubscription`` as :func:`build_cluster`'s)
    where a ``"fat_tree"`` does: a rack-scale system's 72 rails a rack, say."""
    if fabric not in FABRICS:
        raise InputError(f"unknown fabric {fabric!r}; valid ones: {', '.join(FABRICS)}")
    if fabric != "auto":
        return fabric
    if n_nodes == 1:
        return "none"
    if system is not None:
        spec = system if isinstance(system, ServerSpec) else preset_spec(system)
        if spec.n_nics:
            try:
                model = compute_switch(spec, switch)
            except InputError:
                return "rail_optimized"  # building it names the switch that is not known
            size = whole_number("su_size", model.radix // 2 if su_size is None else su_size)
            if (not _fits(model, "rail_optimized", n_nodes, size, oversubscription, spec.n_nics)
                    and _fits(model, "fat_tree", n_nodes, size, oversubscription, spec.n_nics)):
                return "fat_tree"
    return "rail_optimized"


def compute_switch(spec: ServerSpec, switch: str | None) -> SwitchModel:
    """The compute fabric's switch model: ``switch``, else :func:`default_switch`'s; an
    :class:`~flowsim.errors.InputError` where ``switch`` is not of the compute NICs' family
    (an InfiniBand NIC has no port to plug into an Ethernet switch, nor RoCE into InfiniBand)."""
    if switch is None:
        return default_switch(spec.compute_nic)
    model = switch_model(switch)
    _check_family(model, spec.compute_nic, f"the servers' compute NICs (kind {spec.nic_kind!r})", "switch")
    return model


def _family(technology: str) -> str:
    return "InfiniBand" if is_infiniband(technology) else "Ethernet"


def _check_family(model: SwitchModel, technology: str, ports: str, key: str) -> None:
    """An :class:`~flowsim.errors.InputError` naming ``key``, the switch and ``ports`` unless
    the switch's ports are of the family of ``technology`` ports."""
    if _family(model.technology) != _family(technology):
        raise InputError(
            f"{key} {model.name!r} is an {_family(model.technology)} switch and {ports} are "
            f"{_family(technology)} ({technology}): give an {_family(technology)} switch"
        )


def _plan_compute(model: SwitchModel, fabric: str, n_nodes: int, size: int, oversubscription: float,
                  n_rails: int) -> _Tiers:
    """The tiers of a ``fabric`` of ``model`` switches for ``n_nodes`` servers of ``n_rails``
    compute NICs each (``size`` servers a scalable unit); raises
    :class:`~flowsim.errors.InputError` where the switches cannot hold them."""
    if fabric == "rail_optimized":
        return _plan_clos(-(-n_nodes // size) * n_rails, down=size, oversubscription=oversubscription, switch=model,
                          pod_size=n_rails)
    return _plan_packed(n_nodes * n_rails, oversubscription, model)


def _fits(model: SwitchModel, fabric: str, n_nodes: int, size: int, oversubscription: float, n_rails: int) -> bool:
    """Whether :func:`_plan_compute` finds a plan."""
    try:
        _plan_compute(model, fabric, n_nodes, size, oversubscription, n_rails)
    except InputError:
        return False
    return True


def default_switch(technology: str) -> SwitchModel:
    """The switch model a compute fabric of ``technology`` NICs gets by default: the one whose
    ports run ``technology``, else the slowest of the same family (InfiniBand or Ethernet)
    whose ports are at least as fast (a 200 GbE RoCE NIC on a 400 GbE switch port runs at
    200 Gb/s)."""
    try:
        return switch_for(technology)
    except InputError:
        family = technology.split("_")[0] if is_infiniband(technology) else "eth"
        rate = link_rate(technology, figure="nominal")
        faster = [switch_model(name) for name in switch_names()
                  if switch_model(name).technology.startswith(family)
                  and link_rate(switch_model(name).technology, figure="nominal") >= rate]
        if not faster:
            raise
        return min(faster, key=lambda m: (link_rate(m.technology, figure="nominal"), m.name))


def build_cluster(
    system: str | ServerSpec,
    n_nodes: int,
    *,
    figure: str,
    fabric: str = "rail_optimized",
    switch: str | None = None,
    su_size: int | None = None,
    oversubscription: float = 1.0,
    storage_targets: int = 0,
    storage_technology: str = "eth400g",
    ethernet_switch: str = "sn5600",
    **preset_options,
) -> Topology:
    """``n_nodes`` servers of preset ``system``, a compute fabric and an Ethernet network.

    Parameters
    ----------
    system : str or ServerSpec
        A preset of :mod:`flowsim.presets` (``"dgx_h100"``, ...), or a server description
        (:class:`flowsim.servers.ServerSpec`, as a system file gives).
    n_nodes : int
        Number of servers; server ``i`` is named ``n{i}`` and its nodes ``n{i}.gpu0`` etc.
    figure : {"nominal", "effective"}
        Which rate every link gets.
    fabric : {"rail_optimized", "fat_tree", "none", "auto"}
        ``"rail_optimized"``: DGX SuperPOD scalable units of ``su_size`` servers; compute NIC
        ``r`` of every server in unit ``s`` goes to leaf ``ib.su{s}.rail{r}``, so same-rail
        traffic inside a unit is one switch hop ([SPOD-H100], [SPOD-B200]). Two tiers while
        they fit the radix, then units become pods under a core tier. ``"fat_tree"``: compute
        NICs fill leaves in order (``ib.leaf{i}``), half the radix each, with the same tiering
        (pods of radix/2 leaves). ``"none"``: no compute fabric. ``"auto"``: none for one
        server (its GPUs talk over its own NVLink and PCIe, never its compute NICs, so a
        rack-scale system needs no fabric sized for its 72 NICs), rail-optimized for more, or a
        fat-tree where the rail leaves do not fit the switches and a fat-tree does (72 rails a
        GB200 NVL72 rack; :func:`resolve_fabric`).
    switch : str, optional
        Switch model (:func:`flowsim.hardware.switch_names`); default: the model whose ports
        match the system's compute NICs (QM9700 for NDR; :func:`default_switch`); one of their
        family (InfiniBand or Ethernet). A cable between a NIC and a switch port of different
        speeds runs at the slower one.
    su_size : int, optional
        Servers per scalable unit, default half the switch radix (32 for a 64-port switch).
    oversubscription : float
        Leaf down/up port ratio of the compute fabric (1 = non-blocking).
    storage_targets : int
        Storage targets (``storage{i}``) on the Ethernet network, one ``storage_technology``
        port each. The Ethernet network (two or three tiers of ``ethernet_switch``, leaves
        half down, non-blocking) joins every server's front-end ports and the targets; it is
        built whenever servers have front-end ports or targets exist.
    ethernet_switch : str
        Switch model of the Ethernet network (an Ethernet one).
    **preset_options
        Passed to the preset (e.g. ``p2p=False``); for a ServerSpec, only ``p2p``.

    Returns
    -------
    Topology
    """
    n_nodes = whole_number("n_nodes", n_nodes)
    storage_targets = whole_number("storage_targets", storage_targets, minimum=0)
    if isinstance(system, ServerSpec):
        unknown = set(preset_options) - {"p2p"}
        if unknown:
            raise InputError(f"unknown server option(s) {', '.join(sorted(unknown))}; a server description takes p2p")
        spec = dataclasses.replace(system, **preset_options)
    else:
        spec = preset_spec(system, **preset_options)
    fabric = resolve_fabric(fabric, n_nodes, spec, switch=switch, su_size=su_size, oversubscription=oversubscription)
    system = spec.name
    server = build_server(spec, figure=figure)
    rails = [server.node_names[n] for n in compute_nics(server)]
    frontend = [server.node_names[n] for n in frontend_nics(server)]
    # Every fabric is planned from the counts first: a cluster too large for its switches
    # is refused at once, not after building thousands of servers.
    if fabric != "none":
        one_server = "; one server needs none for its own collectives: fabric none (or auto)" if n_nodes == 1 else ""
        if not rails:
            raise InputError(f"{fabric} compute fabric of {n_nodes} {system} servers: the server has no compute NICs"
                             + (one_server or " (a system file gives them in [server.nics])"))
        model = compute_switch(spec, switch)
        size = model.radix // 2 if su_size is None else su_size
        if fabric == "rail_optimized":
            size = whole_number("su_size", size)
        try:
            compute = _plan_compute(model, fabric, n_nodes, size, oversubscription, len(rails))
        except InputError as err:
            hint = one_server
            # A rail leaf per compute NIC of a server: a rack-scale system (72 NICs per GB200
            # NVL72 rack) has more rails than a pod of leaves fits under its spines. One server
            # needs no fabric at all, which is the one to name there.
            if (not one_server and fabric == "rail_optimized"
                    and _fits(model, "fat_tree", n_nodes, size, oversubscription, len(rails))):
                hint = f"; {system} has {len(rails)} compute NICs per server, one rail each: fabric 'fat_tree' fits"
            raise InputError(f"{fabric} compute fabric of {n_nodes} {system} servers: {err}{hint}") from None
    n_ports = n_nodes * len(frontend) + storage_targets
    if n_ports:
        ethernet_model = switch_model(ethernet_switch)
        _check_family(ethernet_model, "eth100g", "the front-end ports and storage targets", "ethernet_switch")
        try:
            ethernet = _plan_packed(n_ports, 1.0, ethernet_model)
        except InputError as err:
            raise InputError(f"Ethernet network of {n_ports} ports: {err}") from None
    b = TopologyBuilder()
    for i in range(n_nodes):
        b.add_topology(server, prefix=f"n{i}.", server_names=[f"n{i}"])
    if fabric == "rail_optimized":
        leaves = []
        for s in range(-(-n_nodes // size)):
            unit = range(s * size, min(n_nodes, (s + 1) * size))
            for r, rail in enumerate(rails):
                leaves.append((f"ib.su{s}.rail{r}", [_Endpoint(f"n{i}.{rail}", spec.compute_nic) for i in unit]))
        _add_clos(b, leaves, compute, _ib_clos(model, figure, "ib."))
    elif fabric == "fat_tree":
        nics = [_Endpoint(f"n{i}.{rail}", spec.compute_nic) for i in range(n_nodes) for rail in rails]
        _add_packed(b, nics, compute, _ib_clos(model, figure, "ib."))
    if n_ports:
        ports = [_Endpoint(f"n{i}.{fe}", spec.frontend_nic) for i in range(n_nodes) for fe in frontend]
        for t in range(storage_targets):
            b.add_node(f"storage{t}", NodeKind.STORAGE)
            ports.append(_Endpoint(f"storage{t}", storage_technology))
        _add_packed(b, ports, ethernet, _Clos("eth.", ethernet_model, figure, (NodeKind.ETH_SWITCH,) * 3))
    return b.build(nccl_env=spec.nccl_env)


def _plan_packed(n_endpoints: int, oversubscription: float, switch: SwitchModel) -> _Tiers:
    """Tiers of ``n_endpoints`` endpoints filling leaves of half the radix in order.

    Up to ``radix`` leaves fit two tiers; beyond, leaves form pods of radix/2 and the last
    pod is filled up with empty leaves.
    """
    down = switch.radix // 2
    n_leaves = -(-n_endpoints // down)
    if n_leaves > switch.radix:
        n_leaves = -(-n_leaves // down) * down
    return _plan_clos(n_leaves, down=down, oversubscription=oversubscription, switch=switch, pod_size=down)


def _add_packed(b: TopologyBuilder, endpoints: Sequence[_Endpoint], tiers: _Tiers, clos: _Clos) -> None:
    """Endpoints in leaves of ``tiers.down`` each, as :func:`_plan_packed` counted them."""
    down = tiers.down
    leaves = [(f"{clos.prefix}leaf{i}", endpoints[i * down : (i + 1) * down]) for i in range(tiers.n_leaves)]
    _add_clos(b, leaves, tiers, clos)
