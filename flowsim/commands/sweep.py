"""``flowsim sweep SWEEP.toml -o RESULTS.h5``: run a what-if sweep into an HDF5 table.

Runs go to a local process pool (``--workers``, default every core; 1 runs serially) or to
Dask (``--dask local`` starts a LocalCluster, ``--dask tcp://HOST:PORT`` uses a running
scheduler). Each finished run is journalled in ``RESULTS.h5.journal``; rerunning the same
command skips the runs already there, so a killed sweep resumes; with ``--traces DIR``, those
whose trace is not in DIR run again to write it (their rows stay as journalled). The
progress bar goes to stderr, the summary line to stdout. The exit status is 1 when any run
failed (the first three are named on stderr with their parameters and error; every error is
in the table) or a trace could not be written (named on stderr),
130 after Ctrl-C (the table then holds the runs finished so far).

A sweep with ``solve = "rates"`` solves each run's all-at-once max-min allocation instead of
simulating it: runs are built in this process and those sharing routes are solved as one
batch on ``--backend`` (``cpu``, the default, uses every core; ``cuda`` needs
``pip install 'flowsim[cuda]'`` and an NVIDIA GPU; ``auto`` picks cuda where it can run).
A ``solve = "time"`` sweep given ``--backend`` is built on the ``--workers``, and its runs
of up to ``flowsim.sweep.MAX_BATCH_FLOWS`` flow classes are simulated in batches in this
process, one run per core or per GPU thread or block (the table's ``ran_on`` column says where each
went). ``--workers`` is for time sweeps, ``--dask`` and ``--traces`` for those without
``--backend``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flowsim.batched import BACKENDS
from flowsim.commands.argtypes import positive_int
from flowsim.sweep import load_sweep, run_sweep
from flowsim.sweep.journal import ERRORS_SHOWN

__all__ = ["add_parser", "sweep_command"]


def sweep_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim sweep``: load the spec, run what is not in the journal, write the
    table; returns 0, 1 if any run failed or a trace could not be written, 130 if
    interrupted.

    A bad spec, an unknown field or metric, or an output path or traces directory that cannot
    be written raise :class:`~flowsim.errors.InputError` naming the file and key before
    anything runs.
    """
    sweep = load_sweep(args.sweep)
    try:
        outcome = run_sweep(
            sweep,
            args.output,
            workers=args.workers,
            dask=args.dask,
            traces=args.traces,
            progress=None if args.quiet else sys.stderr,
            backend=args.backend,
            retry_failed=args.retry_failed,
        )
    except KeyboardInterrupt:
        print(f"interrupted; finished runs are in {args.output}; rerun the command to resume", file=sys.stderr)
        return 130
    plural = "batch" if outcome.n_batches == 1 else "batches"
    batches = (f" in {outcome.n_batches} {plural} on {outcome.backend}, {outcome.batch_s:.2f} s"
               if outcome.n_batches else "")
    skipped = f", {outcome.n_skipped} already done" if outcome.n_skipped else ""
    retraced = f", {outcome.n_retraced} of them ran again for their traces" if outcome.n_retraced else ""
    failed = f", {outcome.n_failed} failed" if outcome.n_failed else ""
    for reason in outcome.untraced:
        print(f"trace not written: {reason}", file=sys.stderr)
    for failure in outcome.failures[:ERRORS_SHOWN]:
        print(f"failed: {failure}", file=sys.stderr)
    if outcome.n_failed > ERRORS_SHOWN:
        print(f"failed: {outcome.n_failed - ERRORS_SHOWN} more runs (the table's 'error' column says why)",
              file=sys.stderr)
    if outcome.n_failed:
        print("a rerun keeps the failed runs' errors; --retry-failed runs them again", file=sys.stderr)
    print(f"{outcome.n_runs} runs ({outcome.n_ran} ran{batches}{skipped}{retraced}{failed}) -> {outcome.output}")
    return 1 if outcome.n_failed or outcome.untraced else 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim sweep SWEEP -o RESULTS [--workers N] [--dask ADDRESS] [--traces DIR]
    [--backend B] [--retry-failed] [-q]``; its handler is :func:`sweep_command`."""
    parser = subparsers.add_parser(
        "sweep", help="run a parameter sweep over a scenario into an HDF5 table", description=__doc__
    )
    parser.add_argument("sweep", type=Path, help="a TOML sweep spec")
    parser.add_argument("-o", "--output", type=Path, required=True, help="HDF5 results table to write")
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="worker processes (default: every core; 1 runs serially)"
    )
    parser.add_argument(
        "--dask", metavar="ADDRESS", default=None,
        help="'local' to start a Dask LocalCluster, or a scheduler address such as tcp://host:8786",
    )
    parser.add_argument("--traces", type=Path, default=None, help="write each run's full trace here (KEY.h5)")
    parser.add_argument(
        "--backend", choices=BACKENDS, default=None,
        help="where a solve = 'rates' sweep solves its batches (default: cpu), or a solve = 'time' sweep "
             "simulates its runs in batches (default: the CPU engine's workers)",
    )
    parser.add_argument(
        "--retry-failed", action="store_true",
        help="run again the runs the journal holds as failed (by default a resumed sweep keeps their errors)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(func=sweep_command)
    return parser

