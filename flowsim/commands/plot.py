"""``flowsim plot TRACE.h5 --kind utilization|fct-cdf|timeline|gantt|tiers -o OUT.png``: plots of a trace.

``utilization``
    Utilization over time of the ``--top`` busiest links (all that carried traffic if there
    are fewer), from the recorded link rate segments: one panel each, or one heatmap row
    each (mean utilization per time bin) beyond 16 links. Their mean utilization as bars
    when the trace has no segments. ``--tier infiniband`` (or ``nvlink``, ``host``,
    ``ethernet``): the busiest links of that tier group only.
``fct-cdf``
    Cumulative distribution of flow completion times (finish minus ready), one curve per
    value of ``--by TAG`` if given.
``timeline``
    One row per flow (the ``--max-flows`` earliest ready): a thin line while it waits for
    its route latency, a thick one while it transfers, coloured by ``--by TAG`` if given.
``gantt``
    A training step's compute and each kind of communication (TP, PP, DP, EP, checkpoint)
    per pipeline stage, over all the stage's ranks (a trace of a run with a training step),
    and a chart for each training job's first iteration (``[[job]]`` with ``[job.training]``).
``tiers``
    Utilization over time of each link tier group (NVLink, PCIe/host, InfiniBand, Ethernet)
    and of its busiest link.

Needs matplotlib (``pip install 'flowsim[plot]'``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flowsim.check.history import is_history_file
from flowsim.commands.argtypes import positive_int
from flowsim.errors import InputError
from flowsim.plot import KINDS, MAX_PANELS, plot_trace
from flowsim.sweep.journal import is_results_file
from flowsim.trace import open_trace

# KINDS, MAX_PANELS and plot_trace are flowsim.plot's, also importable from here as before.
__all__ = ["KINDS", "MAX_PANELS", "add_parser", "plot_command", "plot_trace"]


def plot_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim plot``: :func:`plot_trace` of ``args.trace``; returns 0."""
    if is_history_file(args.trace):
        # "not a flowsim trace" said what it is not, not where its plot is drawn.
        raise InputError(f"{args.trace}: a flowsim check history, not a trace: 'flowsim check --history "
                         f"{args.trace} --plot {args.output}' draws it, 'flowsim inspect {args.trace}' lists its "
                         "checks")
    if is_results_file(args.trace):
        raise InputError(f"{args.trace}: a flowsim sweep's results table, not a trace: "
                         f"flowsim.sweep.read_results({str(args.trace)!r}).to_pandas() reads it "
                         "(docs/sweep-format.md); 'flowsim sweep --traces' writes a trace of each run, which this "
                         "plots")
    path = plot_trace(open_trace(args.trace), args.kind, args.output, top=args.top, by=args.by,
                      max_flows=args.max_flows, tier=args.tier)
    print(f"{args.kind} plot -> {path}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim plot TRACE --kind KIND -o OUT``; its handler is :func:`plot_command`."""
    parser = subparsers.add_parser(
        "plot", help="plot link utilization, FCT distribution, a flow timeline, a training step's Gantt chart or tier "
        "utilization (matplotlib)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("trace", type=Path, help="an HDF5 trace written by 'flowsim run'")
    parser.add_argument("--kind", choices=KINDS, required=True, help="what to plot")
    parser.add_argument("-o", "--output", type=Path, required=True, help="image to write (.png, .svg, .pdf, ...)")
    parser.add_argument(
        "--top", type=positive_int, default=8,
        help=f"links in a utilization plot (default 8; more than carried traffic: all; over {MAX_PANELS}: a heatmap)",
    )
    parser.add_argument("--by", default=None, help="tag to group flows by (fct-cdf, timeline)")
    parser.add_argument(
        "--tier", default=None, choices=("nvlink", "host", "infiniband", "ethernet", "scale_out"),
        help="utilization: only the busiest links of this link tier group",
    )
    parser.add_argument("--max-flows", type=positive_int, default=200, help="flows in a timeline (default 200)")
    parser.set_defaults(func=plot_command)
    return parser
