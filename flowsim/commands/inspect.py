"""``flowsim inspect TRACE.h5``: a readable summary of a trace.

Prints the run's provenance, the topology, the flows, the makespan and flow completion times,
the busiest links by mean utilization over the makespan, overall and per link tier group
(NVLink, PCIe/host, InfiniBand, Ethernet), and a training step's breakdown. Given a sweep's
results table (``flowsim sweep -o RESULTS.h5``) instead, prints its runs, their first
``--top`` rows and the first errors; given a check history (``flowsim check --history
H.h5``), its latest ``--top`` checks (the run's time and label, log, system, shape, flagged
sizes) and the command that draws it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flowsim.check.history import is_history_file, read_history
from flowsim.commands.argtypes import positive_int
from flowsim.formatting import format_bytes, format_rate, format_seconds
from flowsim.summary import describe
from flowsim.sweep.journal import is_results_file, read_results
from flowsim.trace import open_trace

# describe and the format_* functions are flowsim.summary's and flowsim.formatting's, also
# importable from here as before.
__all__ = ["add_parser", "describe", "format_bytes", "format_rate", "format_seconds", "inspect_command"]


def inspect_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim inspect``: print :func:`describe` of ``args.trace``, or of a sweep's
    results table :meth:`~flowsim.sweep.journal.SweepTable.describe` (``--top`` rows)."""
    if is_results_file(args.trace):
        print(read_results(args.trace).describe(args.top, path=args.trace))
        return 0
    if is_history_file(args.trace):
        print(read_history(args.trace).describe(args.top))
        return 0
    print(describe(open_trace(args.trace), args.top))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim inspect TRACE [--top N]``; its handler is :func:`inspect_command`."""
    parser = subparsers.add_parser(
        "inspect", help="summarize a trace: topology, flows, makespan, busiest links", description=__doc__
    )
    parser.add_argument("trace", type=Path, help="an HDF5 trace written by 'flowsim run', a sweep's results table or "
                        "a check history ('flowsim check --history')")
    parser.add_argument("--top", type=positive_int, default=10,
                        help="busiest links to list, a sweep table's rows or a history's latest checks (default 10)")
    parser.set_defaults(func=inspect_command)
    return parser
