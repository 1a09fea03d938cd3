"""Plots of a trace, one kind at a time (:func:`plot_trace`; ``flowsim plot`` draws them).

``utilization``
    Utilization over time of the ``top`` busiest links (all that carried traffic if there
    are fewer), from the recorded link rate segments: one panel each, or one heatmap row
    each (mean utilization per time bin) beyond 16 links. Their mean utilization as bars
    when the trace has no segments. With ``tier``, the busiest of that tier group only
    (the busiest overall are often all NVLink or all PCIe).
``fct-cdf``
    Cumulative distribution of flow completion times (finish minus ready), one curve per
    value of the tag ``by`` if given.
``timeline``
    One row per flow (the ``max_flows`` earliest ready): a thin line while it waits for
    its route latency, a thick one while it transfers, coloured by the tag ``by`` if given.
``gantt``
    A training step's activity per pipeline stage (a trace of a run with a training step):
    one row per stage for its compute (forward and backward in two colours) and one per
    kind of communication it had in flight (TP, PP, DP, EP, checkpoint), each bar the union
    over the stage's ranks, so every flow and every block of compute counts. Training jobs
    (``[[job]]`` with ``[job.training]``) get a panel each, below the ``[workload.training]``
    step's where there is one: the job's first iteration as it ran beside the others, its
    times from the iteration's start.
``tiers``
    Utilization over time of each link tier group (NVLink, PCIe/host, InfiniBand,
    Ethernet): the bytes its links carried in each time bin over what they all could have
    carried, and, thinner, its busiest link's.

Needs matplotlib (``pip install 'flowsim[plot]'``), imported only when a plot is drawn.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from flowsim.errors import InputError, image_file, whole_number
from flowsim.files import replaced_atomically
from flowsim.stepreport import StepBreakdown
from flowsim.trace import Trace

__all__ = ["KINDS", "MAX_PANELS", "plot_trace"]

#: Plot kinds ``--kind`` accepts.
KINDS = ("utilization", "fct-cdf", "timeline", "gantt", "tiers")
#: Most links a utilization plot draws one panel each; more are drawn as one heatmap.
MAX_PANELS = 16
#: Time bins of a utilization heatmap (about one per pixel column).
_HEATMAP_BINS = 1000
#: Most heatmap rows labelled with their link's name.
_LABELLED_ROWS = 100


def _time_unit(span_s: float) -> tuple[float, str]:
    """Scale and label that show times up to ``span_s`` in s, ms or us."""
    for label, scale in (("s", 1.0), ("ms", 1e-3)):
        if span_s >= scale:
            return scale, label
    return 1e-6, "us"


def _groups(trace: Trace, by: str | None) -> list[tuple[str, np.ndarray]]:
    """``(label, flow ids)`` per value of tag ``by``, or one group of all flows."""
    if by is None:
        return [("all flows", np.arange(trace.n_flows))]
    if by not in trace.tags:
        known = ", ".join(trace.tags) or "none"
        raise InputError(f"{trace.path}: no tag {by!r} in this trace; tags: {known}")
    values = trace.tags[by]
    return [(str(v) or "(empty)", np.flatnonzero(values == v)) for v in dict.fromkeys(values.tolist())]


def _busiest_of_tier(trace: Trace, top: int, tier: str) -> np.ndarray:
    """The ``top`` busiest links of tier group ``tier`` (:func:`flowsim.stepreport.link_groups`)."""
    from flowsim.stepreport import link_groups

    names, group = link_groups(trace.topology)
    if tier not in names:
        raise InputError(f"{trace.path}: no link tier {tier!r} in this trace; tiers: {', '.join(names)}")
    util = trace.link_utilization()
    links = np.flatnonzero(group == names.index(tier))
    order = links[np.argsort(-util[links], kind="stable")]
    return order[util[order] > 0][:top].astype(np.int64)


def _utilization(fig, trace: Trace, top: int, tier: str | None = None) -> None:
    links = trace.busiest_links(top) if tier is None else _busiest_of_tier(trace, top, tier)
    names = [trace.topology.link_names[link] for link in links.tolist()]
    which = "links" if tier is None else f"{tier} links"
    shown = (f"all {links.size} {which} that carried traffic" if links.size < top
             else f"the {links.size} busiest {which}")
    if trace.link_segment_indptr is None or not links.size:
        fig.set_size_inches(9, 1.2 + 0.9 * min(max(links.size, 1), MAX_PANELS))
        ax = fig.add_subplot()
        ax.barh(np.arange(links.size), trace.link_utilization()[links] * 100)
        _link_rows(ax, names, 0.0)
        ax.invert_yaxis()
        ax.set_xlabel("mean utilization over the makespan (%)")
        recorded = trace.link_segment_indptr is not None
        ax.set_title("no link carried traffic" if recorded else f"{shown} (no rate over time in this trace)")
        return
    scale, unit = _time_unit(trace.makespan_s)
    if links.size > MAX_PANELS:
        _utilization_heatmap(fig, trace, links, names, scale).set_xlabel(f"time ({unit})")
    else:
        _utilization_panels(fig, trace, links, names, scale).set_xlabel(f"time ({unit})")
    fig.suptitle(f"utilization of {shown}")


def _link_rows(ax, names: list[str], offset: float) -> None:
    """Name the rows of a per-link bar chart or heatmap, unless there are too many to read."""
    if len(names) > _LABELLED_ROWS:
        ax.set_ylabel("link (busiest first)")
        return
    small = {"fontsize": "x-small"} if len(names) > MAX_PANELS else {}
    ax.set_yticks(np.arange(len(names)) + offset, names, **small)


def _utilization_panels(fig, trace: Trace, links: np.ndarray, names: list[str], scale: float):
    """One panel per link; returns the bottom one."""
    fig.set_size_inches(9, 1.2 + 0.9 * links.size)
    axes = fig.subplots(links.size, 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, link, name) in enumerate(zip(axes, links.tolist(), names, strict=True)):
        start, end, rate = trace.link_segments(link)
        edges, values = [0.0], []
        for s, e, u in zip(start.tolist(), end.tolist(), (rate / trace.link_capacity_Bps[link]).tolist(), strict=True):
            if s > edges[-1]:
                values.append(0.0)
                edges.append(s)
            values.append(u * 100)
            edges.append(e)
        ax.stairs(values, np.array(edges) / scale, fill=True, color=f"C{i % 10}")
        ax.set_ylim(0, 105)
        ax.set_yticks([0, 100])
        ax.set_ylabel("%", rotation=0, labelpad=8)
        ax.set_title(f"{name} ({trace.topology.link_technology[link]})", loc="left", fontsize="small")
    return axes[-1]


def _binned_utilization(trace: Trace, link: int, edges_s: np.ndarray) -> np.ndarray:
    """Mean utilization of ``link`` in each bin between ``edges_s``: the bytes it carried in
    the bin (exactly, from its rate segments) over what it could have carried."""
    start, end, rate = trace.link_segments(link)
    if start.size == 0:  # bytes too few for any rate segment to be recorded (1e-300 B, say)
        return np.zeros(edges_s.size - 1)
    # Bytes carried so far is piecewise linear with knots at every segment's start and end;
    # it stays flat across the gaps between segments (rate 0 is not recorded).
    knots_s = np.column_stack([start, end]).ravel()
    carried = np.concatenate([[0.0], np.cumsum(rate * (end - start))])
    knots_bytes = np.column_stack([carried[:-1], carried[1:]]).ravel()
    per_bin = np.diff(np.interp(edges_s, knots_s, knots_bytes))
    return per_bin / (trace.link_capacity_Bps[link] * np.diff(edges_s))


def _utilization_heatmap(fig, trace: Trace, links: np.ndarray, names: list[str], scale: float):
    """One row per link, coloured by utilization; returns its axes. Panels cost matplotlib
    more than linearly in their number (60 took 14 s, a few hundred minutes) and make a
    figure metres tall."""
    fig.set_size_inches(9, 2.0 + 0.12 * min(links.size, _LABELLED_ROWS))
    edges_s = np.linspace(0.0, trace.makespan_s, _HEATMAP_BINS + 1)
    util = np.vstack([_binned_utilization(trace, link, edges_s) for link in links.tolist()])
    ax = fig.add_subplot()
    image = ax.imshow(
        util * 100, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=100,
        extent=(0.0, trace.makespan_s / scale, links.size, 0),
    )
    _link_rows(ax, names, 0.5)
    fig.colorbar(image, ax=ax, label="utilization (%)")
    return ax


#: The largest value a log axis is drawn to.
_LOG_AXIS_MAX = 1e200


def _fct_cdf(fig, trace: Trace, by: str | None) -> None:
    ax = fig.add_subplot()
    fct = trace.fct_s
    scale, unit = _time_unit(float(fct.max()) if fct.size else 0.0)
    for label, flows in _groups(trace, by):
        if flows.size:
            ax.ecdf(fct[flows] / scale, label=f"{label} ({flows.size})")
    positive = fct[fct > 0]
    # A log axis where FCTs span decades, but not to the top of float64 (a flow of 1e300 B
    # takes 1e288 s), where matplotlib's log ticks overflow.
    if positive.size and positive.max() > 100 * positive.min() and positive.max() / scale < _LOG_AXIS_MAX:
        ax.set_xscale("log")
    ax.set_xlabel(f"flow completion time ({unit})")
    ax.set_ylabel("fraction of flows")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"flow completion times of {trace.n_flows:,} flows")
    if trace.n_flows:
        ax.legend(fontsize="small", loc="lower right")


def _timeline(fig, trace: Trace, by: str | None, max_flows: int) -> None:
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot()
    shown = np.argsort(trace.ready_s, kind="stable")[:max_flows]
    row = np.empty(trace.n_flows, dtype=np.int64)
    row[shown] = np.arange(shown.size)
    scale, unit = _time_unit(trace.makespan_s)
    for i, (label, flows) in enumerate(_groups(trace, by)):
        flows = np.intersect1d(flows, shown)
        color = f"C{i % 10}"
        ax.hlines(row[flows], trace.transfer_start_s[flows] / scale, trace.finish_s[flows] / scale,
                  linewidth=3, color=color, label=label)
        ax.hlines(row[flows], trace.ready_s[flows] / scale, trace.transfer_start_s[flows] / scale,
                  linewidth=1, color=color)
    ax.invert_yaxis()
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # rows are flows: no tick between two
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("flow (by ready time)")
    ax.set_title(f"{shown.size} of {trace.n_flows} flows: thin = route latency, thick = transfer")
    if by is not None:
        ax.legend(fontsize="small", loc="best")


#: Colours of the activities (flowsim.stepreport.ACTIVITIES), colour-blind safe (Okabe-Ito).
_ACTIVITY_COLOURS = {
    "forward": "#56B4E9", "backward": "#0072B2", "tp": "#E69F00", "pp": "#009E73", "dp": "#CC79A7",
    "ep": "#D55E00", "checkpoint": "#999999", "other": "#F0E442", "cp": "#000000",
}
_ACTIVITY_LABELS = {
    "forward": "forward compute", "backward": "backward compute", "tp": "TP collectives", "pp": "PP send/receive",
    "dp": "DP gradients (and parameters)", "ep": "EP all-to-all", "checkpoint": "checkpoint write",
    "other": "other flows", "cp": "CP key/value exchange",
}
_ROW_LABELS = {"tp": "TP", "pp": "PP", "dp": "DP", "ep": "EP", "checkpoint": "ckpt", "other": "other", "cp": "CP"}


def _steps(trace: Trace) -> list[tuple[str, StepBreakdown]]:
    """The trace's training steps, each with the title of its chart: the workload's, then
    each training job's."""
    steps = [("", trace.training)] if trace.training is not None else []
    steps += [(f"job {name}: ", b) for name, b in trace.job_training.items()]
    if not steps:
        raise InputError(f"{trace.path}: no training step in this trace (written by 'flowsim run' of a scenario "
                         "with [workload.training] or a [[job]] with [job.training])")
    return steps


def _gantt_rows(b: StepBreakdown) -> dict[int, list[int]]:
    """Per stage, the activity kinds beyond compute it has rows for."""
    from flowsim.stepreport import ACTIVITIES

    stages = sorted(set(b.activity_stage.tolist())) or [0]
    return {s: [k for k in range(2, len(ACTIVITIES)) if np.any((b.activity_kind == k) & (b.activity_stage == s))]
            for s in stages}


def _gantt(fig, trace: Trace) -> None:
    from matplotlib.patches import Patch

    from flowsim.stepreport import ACTIVITIES

    steps = _steps(trace)
    rows = [_gantt_rows(b) for _, b in steps]
    heights = [1.0 + 0.32 * sum(1 + len(kinds) for kinds in own.values()) for own in rows]
    fig.set_size_inches(11, 0.8 + sum(heights))
    axes = fig.subplots(len(steps), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (title, b), own in zip(axes, steps, rows, strict=True):
        _gantt_panel(ax, b, own)
        if len(steps) > 1:
            ax.set_title(title + _step_title(b), loc="left", fontsize="small")
    shown = [0, 1, *sorted({k for own in rows for kinds in own.values() for k in kinds})]
    fig.legend(handles=[Patch(color=_ACTIVITY_COLOURS[ACTIVITIES[k]], label=_ACTIVITY_LABELS[ACTIVITIES[k]])
                        for k in shown], fontsize="small", loc="outside lower center", ncols=min(len(shown), 4),
               frameon=False)
    if len(steps) == 1:
        fig.suptitle(steps[0][0] + _step_title(steps[0][1]), fontsize="medium")
    else:
        fig.suptitle(f"{len(steps)} training steps, each from its own start", fontsize="medium")


def _step_title(b: StepBreakdown) -> str:
    from flowsim.formatting import format_seconds

    layout = b.layout
    shape = ", ".join(f"{k} {layout[k]}" for k in ("tp", "cp", "pp", "dp", "ep") if k in layout and layout[k] > 1)
    if layout.get("virtual_stages", 1) > 1:  # Megatron's virtual pipeline size (interleaved 1F1B)
        shape += f", vpp {layout['virtual_stages']}"
    return (
        f"training step {format_seconds(b.step_s)}" + (f" ({shape}, {layout.get('n_microbatches', 1)} microbatches)"
                                                       if shape else "")
        + f": compute {format_seconds(b.compute_s)}, bubble {format_seconds(b.bubble_s)}, "
        f"exposed communication {format_seconds(b.exposed_communication_s)}"
    )


def _gantt_panel(ax, b: StepBreakdown, own: dict[int, list[int]]) -> None:
    """One step's chart on ``ax``: per stage a compute row and a row per kind in ``own``."""
    from flowsim.stepreport import ACTIVITIES

    scale, unit = _time_unit(b.step_s)
    stages = list(own)
    labels: list[str] = []
    ticks: list[float] = []
    y = -1.6
    for stage in stages:
        y += 0.6
        for kind in [None, *own[stage]]:
            y += 1
            ticks.append(y)
            labels.append(f"stage {stage}  compute" if kind is None else _ROW_LABELS[ACTIVITIES[kind]])
            for k in ((0, 1) if kind is None else (kind,)):
                chosen = (b.activity_stage == stage) & (b.activity_kind == k)
                if chosen.any():
                    lo, hi = b.activity_start_s[chosen] / scale, b.activity_end_s[chosen] / scale
                    # Communication is drawn with an edge, so that a transfer shorter than a
                    # pixel still shows; compute without, so that the waits between blocks do.
                    colour = _ACTIVITY_COLOURS[ACTIVITIES[k]]
                    ax.broken_barh(list(zip(lo.tolist(), (hi - lo).tolist(), strict=True)), (y - 0.4, 0.8),
                                   facecolor=colour, edgecolor=colour, linewidth=0 if kind is None else 0.8)
    ax.set_yticks(ticks, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, b.step_s / scale)
    ax.set_xlabel(f"time ({unit})")


def _tiers(fig, trace: Trace) -> None:
    from flowsim.stepreport import TIER_LABELS, link_groups

    if trace.link_segment_indptr is None:
        raise InputError(f"{trace.path}: link rates were not recorded in this trace (options.record_links = false)")
    names, group = link_groups(trace.topology)
    span = trace.training.step_s if trace.training is not None else trace.makespan_s
    scale, unit = _time_unit(span)
    edges_s = np.linspace(0.0, span, _TIER_BINS + 1) if span > 0 else np.array([0.0, 1.0])
    fig.set_size_inches(10, 1.4 + 1.5 * len(names))
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, name) in enumerate(zip(axes, names, strict=True)):
        links = np.flatnonzero(group == i)
        used = links[trace.link_bytes[links] > 0]
        carried = np.zeros(edges_s.size - 1)
        busiest, busiest_util = None, -1.0
        for link in used.tolist():
            util = _binned_utilization(trace, link, edges_s)
            carried += util * trace.link_capacity_Bps[link]
            if trace.link_bytes[link] / trace.link_capacity_Bps[link] > busiest_util:
                busiest, busiest_util = link, trace.link_bytes[link] / trace.link_capacity_Bps[link]
        total = carried / trace.link_capacity_Bps[links].sum() * 100
        ax.stairs(total, edges_s / scale, fill=True, color=f"C{i}", alpha=0.8, label=f"all {links.size} links")
        if busiest is not None:
            ax.stairs(_binned_utilization(trace, busiest, edges_s) * 100, edges_s / scale, color="black",
                      linewidth=0.8, label=f"busiest: {trace.topology.link_names[busiest]}")
        ax.set_ylim(0, 105)
        ax.set_yticks([0, 50, 100])
        ax.set_ylabel("%")
        ax.set_title(f"{TIER_LABELS[name]} ({links.size} links, {used.size} used)", loc="left", fontsize="small")
        ax.legend(fontsize="x-small", loc="upper right")
    axes[-1].set_xlabel(f"time ({unit})")
    if span > 0:  # an empty trace has no time to show
        axes[-1].set_xlim(0, span / scale)
    fig.suptitle("utilization per link tier (bytes carried per time bin over the tier's capacity)",
                 fontsize="medium")


#: Time bins of a tier utilization plot.
_TIER_BINS = 400


def plot_trace(
    trace: Trace,
    kind: str,
    path: str | os.PathLike,
    *,
    top: int = 8,
    by: str | None = None,
    max_flows: int = 200,
    tier: str | None = None,
) -> Path:
    """Draw one plot of ``trace`` and save it (format from the file suffix, e.g. PNG),
    replacing ``path`` only once the image is complete.

    Parameters
    ----------
    trace : Trace
    kind : {"utilization", "fct-cdf", "timeline", "gantt", "tiers"}
    path : str or path-like
        Image file; its suffix names the format (``.png``, ``.svg``, ``.pdf``, ...).
    top : int
        Links in a utilization plot (positive); more than carried traffic means all of
        those. Beyond :data:`MAX_PANELS` they are drawn as a heatmap.
    by : str, optional
        Tag whose values split the fct-cdf curves and colour the timeline.
    max_flows : int
        Flows in a timeline (the earliest ready; positive).
    tier : str, optional
        A utilization plot of one link tier group's busiest links only: ``"nvlink"``,
        ``"host"``, ``"infiniband"``, ``"ethernet"`` (see :func:`flowsim.stepreport.link_groups`).

    Returns
    -------
    Path

    Raises
    ------
    ImportError
        When matplotlib is not installed.
    InputError
        For an unknown kind or tag, a count that is not positive, or an output path that
        cannot be written or has no image format matplotlib writes; checked before drawing.
    """
    if kind not in KINDS:
        raise InputError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    top, max_flows = whole_number("top", top), whole_number("max_flows", max_flows)
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("flowsim plot needs matplotlib: pip install 'flowsim[plot]'") from None
    target = image_file(path, "the plot", inputs=[trace.path])
    fig = Figure(figsize=(9, 5), layout="constrained")
    if kind == "utilization":
        _utilization(fig, trace, int(top), tier)
    elif kind == "fct-cdf":
        _fct_cdf(fig, trace, by)
    elif kind == "timeline":
        _timeline(fig, trace, by, int(max_flows))
    elif kind == "gantt":
        _gantt(fig, trace)
    else:
        _tiers(fig, trace)
    # Written whole or not at all, as traces are. The temporary file's name has no image
    # suffix, so the format is named (image_file checked the target's suffix is one).
    with replaced_atomically(target) as tmp_name:
        fig.savefig(tmp_name, format=target.suffix.removeprefix(".").lower(), dpi=120)
    return target
