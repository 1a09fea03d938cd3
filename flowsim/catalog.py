"""What flowsim knows, as tables to read: the server presets, link technologies and switch
models, each rate per direction and with the source it comes from (keys of ``docs/hardware.md``)."""

from __future__ import annotations

import re

from flowsim.collectives.tuner import SHARP_TECHNOLOGIES, gdr_path, nic_path_types
from flowsim.fabrics import build_cluster, default_switch, resolve_fabric
from flowsim.formatting import format_rate, format_runs, format_seconds
from flowsim.hardware import link_rate, link_technology, nvlink_generation, switch_model, switch_names, technology_names
from flowsim.presets import compute_nics, frontend_nics, preset, preset_info, preset_names, preset_spec
from flowsim.servers import build_server
from flowsim.systemfile import (
    SystemFile,
    find_system,
    is_shipped_system,
    is_system_file,
    resolve_system,
    shipped_system_names,
)

__all__ = ["SECTIONS", "describe_presets", "describe_system", "find_described"]

#: Tables :func:`describe_presets` prints (``flowsim presets --only`` picks one).
SECTIONS = ("systems", "links", "switches")

# A section of docs/hardware.md: §2.1, §V1.
_SECTION = r"§(?:V\d+|\d+(?:\.\d+)?)"
_SOURCE = re.compile(rf"\[[A-Z][A-Z0-9-]*\]|docs/hardware\.md {_SECTION}(?:(?:,| and) {_SECTION})*|NVIDIA/[\w-]+#\d+")
_RST_ROLE = re.compile(r":\w+:`~?([^`]+)`")


def _doc_sources(doc: str) -> str:
    """Source keys a preset builder's docstring cites, in order of first mention."""
    found = dict.fromkeys(_SOURCE.findall(" ".join(doc.split())))
    return ", ".join(found) or "see the flowsim.presets docstring"


def _systems() -> list[str]:
    lines = ["Systems (flowsim.presets; one server each, 'cluster' in a scenario for many, 'flowsim presets NAME' "
             "for its figures):"]
    for name in preset_names():
        info = preset_info(name)
        topology = preset(name, figure="nominal")
        doc = info.build.__doc__ or ""
        summary = _RST_ROLE.sub(r"\1", doc.strip().splitlines()[0]) if doc.strip() else ""
        nics = compute_nics(topology)
        lines += [
            f"  {name}: {len(topology.gpus())} GPUs, {topology.n_nodes} nodes, {topology.n_links} links; "
            + (f"{len(nics)} compute NICs ({info.compute_nic}), " if nics else "no compute NICs, ")
            + f"front-end ports: {len(frontend_nics(topology))} ({info.frontend_nic})",
            f"    {summary}",
            f"    sources: {_doc_sources(doc)}",
        ]
    lines += ["", "Shipped systems (flowsim/systems; --system NAME, 'flowsim presets NAME' for their figures):"]
    for name in shipped_system_names():
        lines.append(f"  {name}: {find_system(name).description}")
    return lines


def _links() -> list[str]:
    lines = ["Link technologies (flowsim.hardware; rates per direction):"]
    for name in technology_names():
        t = link_technology(name)
        lines.append(f"  {name} [{t.tier.name.lower()}]: {t.description}")
        for label, figure in (("nominal", t.nominal), ("effective", t.effective)):
            note = f" ({figure.note})" if figure.note else ""
            lines.append(f"    {label:<9} {format_rate(figure.rate_Bps):>12}  {figure.source}{note}")
    return lines


def _switches() -> list[str]:
    lines = ["Switch models (flowsim.hardware):"]
    for name in switch_names():
        s = switch_model(name)
        lines.append(
            f"  {name}: {s.radix} x {s.technology}, {format_seconds(s.hop_latency_s) if s.hop_latency_s else 'no'} "
            f"hop latency; {s.source}"
        )
    return lines


def describe_presets(only: str | None = None) -> str:
    """The tables ``flowsim presets`` prints: all, or the one ``only`` names."""
    tables = {"systems": _systems, "links": _links, "switches": _switches}
    chosen = SECTIONS if only is None else (only,)
    return "\n\n".join("\n".join(tables[section]()) for section in chosen)


def _rates(technology: str, count: float = 1) -> str:
    nominal, effective = (count * link_rate(technology, figure=f) for f in ("nominal", "effective"))
    return f"{format_rate(nominal)} nominal, {format_rate(effective)} effective"


def _gdr_line(server, nccl_env: dict[str, str]) -> str:
    """Each GPU's path to its NIC (NCCL's path types) and whether NCCL's default rule, under
    the system's own environment, moves network traffic with GPUDirect RDMA over it."""
    gpus = [server.node_names[g] for g in server.gpus()]
    types = nic_path_types(server, gpus)
    by_type: dict[str, list[int]] = {}
    for i, gpu in enumerate(gpus):
        if gpu in types:
            by_type.setdefault(types[gpu], []).append(i)
    parts = []
    for kind, ids in by_type.items():
        near = gdr_path(kind, nccl_env=nccl_env)
        parts.append(f"{kind} from GPU{'s' if len(ids) > 1 else ''} {format_runs(ids)} "
                     f"({'GPUDirect RDMA' if near else 'staged through host memory'})")
    return ("  GPU-NIC paths, as NCCL's NCCL_NET_GDR_LEVEL (default PXB) takes them: " + "; ".join(parts))


def find_described(value: str) -> SystemFile:
    """A system file, a shipped system or a preset (one server, its figures as a system
    file's) by the name ``flowsim presets NAME`` takes."""
    if is_system_file(value) or is_shipped_system(value):
        return find_system(value)
    _, name, _ = resolve_system(value)  # a preset's name, or an error naming the valid ones
    doc = preset_info(name).build.__doc__ or ""
    summary = _RST_ROLE.sub(r"\1", doc.strip().splitlines()[0]) if doc.strip() else ""
    return SystemFile(name, summary, preset_spec(name), source="flowsim.presets")


def describe_system(system: SystemFile) -> str:
    """What a system file makes: its server's figures per GPU and its cluster (``flowsim
    presets FILE.toml``); rates per direction."""
    spec = system.spec
    server = build_server(spec, figure="nominal")
    lines = [f"{system.name} ({system.source}){': ' + system.description if system.description else ''}",
             f"  server: {spec.n_gpus} x {spec.gpu}, {server.n_nodes} nodes, {server.n_links} links"]
    if spec.gpu_fabric == "pcie":
        lines.append(f"  GPU fabric: PCIe only, peer-to-peer {'on' if spec.p2p else 'off (staged in host memory)'}")
    else:
        assert spec.nvlink is not None
        links = nvlink_generation(spec.nvlink).links_per_gpu if spec.nvlinks_per_gpu is None else spec.nvlinks_per_gpu
        if spec.gpu_fabric == "nvlink_mesh":
            assert spec.nvlink_counts is not None
            links = max(sum(row) for row in spec.nvlink_counts)
        kind = "NVSwitch" if spec.gpu_fabric == "nvswitch" else "NVLink mesh"
        lines.append(f"  GPU fabric: {kind}, {links} x {spec.nvlink} per GPU: {_rates(spec.nvlink, links)}")
    lines.append(f"  PCIe: {spec.pcie}, {len(spec.switches)} switch(es) or root port(s): {_rates(spec.pcie)} a link")
    if spec.gpu_pcie != spec.pcie:  # an older card in a newer slot runs at its own generation
        lines.append(f"  GPUs' PCIe links: {spec.gpu_pcie}, the {spec.gpu}'s host interface: {_rates(spec.gpu_pcie)}")
    cpu = f"{spec.sockets} {spec.cpu} socket(s), memory {spec.memory} ({_rates(spec.memory)} each)"
    if spec.intersocket is not None and spec.sockets > 1:
        cpu += f", joined by {spec.intersocket} ({_rates(spec.intersocket)})"
    lines.append(f"  CPU: {cpu}")
    if spec.n_nics:
        rails = spec.rails()
        per_nic = max(rails.count(r) for r in set(rails))
        ports = f", {spec.nic_ports} ports" if spec.nic_ports > 1 else ""
        lines.append(f"  compute NICs: {spec.n_nics} x {spec.compute_nic} ({spec.nic_kind}{ports}), up to {per_nic} "
                     f"GPU(s) each: {_rates(spec.compute_nic, spec.n_nics)} per server")
        if spec.nic_ports > 1:
            lines.append(f"  NCCL before 2.20 takes each of a NIC's {spec.nic_ports} ports as a network device of its "
                         "own; from 2.20 it merges them (NCCL_IB_MERGE_NICS, docs/hardware.md §7.4)")
        lines.append(_gdr_line(server, dict(spec.nccl_env)))
        if spec.compute_nic in SHARP_TECHNOLOGIES:
            version = 2 + SHARP_TECHNOLOGIES.index(spec.compute_nic)
            lines.append(f"  in-network reduction: SHARP v{version} on its InfiniBand switches, which NCCL's CollNet "
                         "reduces in with NCCL_COLLNET_ENABLE=1 (docs/design.md \"IB SHARP\")")
        if spec.net_latency_us:
            lines.append(f"  network latency its NCCL plugin reports: {spec.net_latency_us:g} us, which NCCL's tuner "
                         "adds to each inter-server step, twice with Simple (docs/hardware.md §5.1)")
        if spec.step_latency_us is not None:
            lines.append(f"  latency a step between servers pays on the wire: {spec.step_latency_us:g} us on top of "
                         "NCCL's figure, twice with Simple (docs/model.md \"Latency the network plugin reports\")")
    else:
        lines.append("  compute NICs: none (one server only)")
    lines.append(f"  front-end ports: {spec.frontend_ports} x {spec.frontend_nic}" if spec.frontend_ports
                 else "  front-end ports: none")
    if spec.nccl_env:
        lines.append("  NCCL environment its software sets (under --nccl-env): "
                     + " ".join(f"{key}={value}" for key, value in spec.nccl_env))
    if system.cluster:
        layout = {"n_nodes": 1, **system.cluster}
        n_nodes = layout["n_nodes"]
        fabric = layout["fabric"] = resolve_fabric(
            layout.get("fabric", "auto"), n_nodes, spec, switch=layout.get("switch"), su_size=layout.get("su_size"),
            oversubscription=layout.get("oversubscription", 1.0))
        cluster = build_cluster(spec, figure="nominal", **layout)
        switch = system.cluster.get("switch") or (default_switch(spec.compute_nic).name if spec.n_nics else "-")
        lines.append(f"  cluster: {n_nodes} server(s), {len(cluster.gpus())} GPUs, {fabric} compute fabric "
                     f"({switch if fabric != 'none' else 'no switches'}, oversubscription "
                     f"{system.cluster.get('oversubscription', 1.0):g}), {cluster.n_nodes} nodes, "
                     f"{cluster.n_links} links")
    return "\n".join(lines)

