"""A readable summary of a trace (:func:`describe`, what ``flowsim inspect`` prints): the run's
provenance, the topology, the flows, the makespan and flow completion times, the busiest
links by mean utilization over the makespan, overall and in each link tier group (NVLink,
PCIe/host, InfiniBand, Ethernet: the busiest links overall are often all of one tier), and a
training step's breakdown when the trace holds one."""

from __future__ import annotations

import tomllib
from collections import Counter

import numpy as np

from flowsim.formatting import format_bytes, format_rate, format_seconds
from flowsim.hardware import LinkTier
from flowsim.stepreport import TIER_LABELS, describe_step, link_groups
from flowsim.topology import NodeKind
from flowsim.trace import Trace

__all__ = ["describe"]

_MAX_TAG_VALUES = 8


def _counts(labels) -> str:
    return ", ".join(f"{count} {label}" for label, count in Counter(labels).most_common()) or "none"


def _provenance(trace: Trace) -> list[str]:
    m = trace.metadata
    return [
        f"{trace.path}: flowsim trace, schema {m.get('schema_version')}",
        f"  written {m.get('created_utc')} by flowsim {m.get('flowsim_version')} (numba {m.get('numba_version')}, "
        f"numpy {m.get('numpy_version')}, h5py {m.get('h5py_version')})",
        _scenario_line(trace.scenario_text),
    ]


def _scenario_line(text: str) -> str:
    if not text:
        return "  no scenario text"
    try:
        info = tomllib.loads(text).get("scenario", {})
    except tomllib.TOMLDecodeError:
        info = {}
    label = ": ".join(str(info[k]) for k in ("name", "description") if k in info) or "unnamed"
    return f"  scenario: {label} ({len(text.splitlines())} lines of TOML)"


def _topology(trace: Trace) -> list[str]:
    t = trace.topology
    return [
        f"topology: {t.n_nodes} nodes in {t.n_servers} server{'s' if t.n_servers != 1 else ''}, {t.n_links} links",
        f"  nodes: {_counts(NodeKind(k).name.lower() for k in t.node_kind.tolist())}",
        f"  links: {_counts(LinkTier(k).name.lower() for k in t.link_tier.tolist())}",
    ]


def _flows(trace: Trace) -> list[str]:
    lines = [
        f"flows: {trace.n_flows:,}, {format_bytes(float(trace.size_bytes.sum()))} in total, "
        f"{int(trace.dep_indptr[-1]):,} dependencies"
    ]
    for key, values in trace.tags.items():
        counts = Counter(values.tolist())
        shown = ", ".join(f"{v or '(empty)'} {c}" for v, c in counts.most_common(_MAX_TAG_VALUES))
        more = f", ... ({len(counts)} values)" if len(counts) > _MAX_TAG_VALUES else ""
        lines.append(f"  tag {key}: {shown}{more}")
    return lines


def _timing(trace: Trace) -> list[str]:
    lines = [f"makespan: {format_seconds(trace.makespan_s)}"]
    if trace.n_flows:
        fct = trace.fct_s
        p50, p90, p99 = np.percentile(fct, [50, 90, 99])
        lines.append(
            f"  flow completion time: p50 {format_seconds(p50)}, p90 {format_seconds(p90)}, "
            f"p99 {format_seconds(p99)}, max {format_seconds(float(fct.max()))}"
        )
    s = trace.summary
    line = f"  {s['n_events']:,} events, {s['n_rate_updates']:,} rate updates"
    if "n_rates_changed" in s:  # traces written before the count existed lack it
        line += f" ({s['n_rates_resolved']:,} rates re-solved, {s['n_rates_changed']:,} changed)"
    lines.append(line)
    return lines


def _busiest(trace: Trace, top: int) -> list[str]:
    links = trace.busiest_links(top)
    if not links.size:
        return ["busiest links: none carried traffic"]
    t = trace.topology
    util = trace.link_utilization()
    width = max(len(t.link_names[link]) for link in links)
    lines = [f"busiest links (mean utilization over the makespan, top {links.size}):"]
    for link in links.tolist():
        lines.append(
            f"  {t.link_names[link]:<{width}}  {util[link]:6.1%}  {format_bytes(trace.link_bytes[link]):>10}  "
            f"of {format_rate(trace.link_capacity_Bps[link]):>12}  {t.link_technology[link]}"
        )
    return lines


def _jobs(trace: Trace) -> list[str]:
    """One line per job of a trace with ``/jobs``: iterations alone and shared, slowdown."""
    jobs = trace.jobs
    if jobs is None:
        return []
    lines = [f"jobs: {len(jobs['name'])} (mean iteration alone -> shared, slowdown)"]
    for i, name in enumerate(jobs["name"].tolist()):
        lines.append(
            f"  {name}: {jobs['kind'][i]} on {int(jobs['n_gpus'][i])} GPUs ({jobs['placement'][i]}), "
            f"{int(jobs['iterations'][i])} iterations, {format_seconds(float(jobs['alone_mean_iteration_s'][i]))} -> "
            f"{format_seconds(float(jobs['mean_iteration_s'][i]))}, slowdown {float(jobs['slowdown'][i]):.3f}"
        )
    return lines


#: Busiest links listed per tier group.
_PER_TIER = 3


def _busiest_per_tier(trace: Trace) -> list[str]:
    names, group = link_groups(trace.topology)
    if len(names) < 2:  # the list above already is the one tier's
        return []
    util = trace.link_utilization()
    lines = [f"busiest links per tier (top {_PER_TIER}):"]
    width = max(len(TIER_LABELS[name]) for name in names)
    for g, name in enumerate(names):
        links = np.flatnonzero(group == g)
        order = links[np.argsort(-util[links], kind="stable")]
        shown = [f"{trace.topology.link_names[link]} {util[link]:.1%}" for link in order[:_PER_TIER].tolist()
                 if util[link] > 0]
        lines.append(f"  {TIER_LABELS[name]:<{width}}  {', '.join(shown) or 'none carried traffic'}")
    return lines


def describe(trace: Trace, top: int = 10) -> str:
    """The summary ``flowsim inspect`` prints, as text.

    Parameters
    ----------
    trace : Trace
    top : int
        How many of the busiest links to list.
    """
    step = describe_step(trace.training, trace.topology) if trace.training is not None else []
    return "\n".join(
        _provenance(trace) + _topology(trace) + _flows(trace) + _timing(trace) + _jobs(trace) + _busiest(trace, top)
        + _busiest_per_tier(trace) + step
    )
