"""What flowsim knows, as tables to read: the server presets, link technologies and switch
models, each rate per direction and with the source it comes from (keys of ``docs/hardware.md``)."""

from __future__ import annotations

import re

from flowsim.formatting import format_rate, format_seconds
from flowsim.hardware import link_technology, switch_model, switch_names, technology_names
from flowsim.presets import compute_nics, frontend_nics, preset, preset_info, preset_names

__all__ = ["SECTIONS", "describe_presets"]

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
    lines = ["Systems (flowsim.presets; one server each, 'cluster' in a scenario for many):"]
    for name in preset_names():
        info = preset_info(name)
        topology = preset(name, figure="nominal")
        doc = info.build.__doc__ or ""
        summary = _RST_ROLE.sub(r"\1", doc.strip().splitlines()[0]) if doc.strip() else ""
        lines += [
            f"  {name}: {len(topology.gpus())} GPUs, {topology.n_nodes} nodes, {topology.n_links} links; "
            f"{len(compute_nics(topology))} compute NICs ({info.compute_nic}), "
            f"front-end ports: {len(frontend_nics(topology))} ({info.frontend_nic})",
            f"    {summary}",
            f"    sources: {_doc_sources(doc)}",
        ]
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
