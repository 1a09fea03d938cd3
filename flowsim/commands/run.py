"""``flowsim run SCENARIO.toml -o TRACE.h5``: simulate a scenario file and write its trace.

Progress notes (load, build, route, simulate, write, each with the elapsed time) go to
stderr, and on a terminal (or with ``--progress``) the engine's progress line on runs longer
than two seconds; the result line (flows, and the flow classes they were solved as where
fewer, makespan, trace path) goes to stdout, then for a
scenario with ``fail`` or ``degrade`` options what they changed (links removed and slowed,
nodes moved to another NIC), and for a scenario with a training step the step time, its
compute and the communication the compute left exposed, the pipeline bubble, the critical
path split into compute and each kind of communication (TP, PP, DP, EP, checkpoint), and per
link tier (NVLink, PCIe/host, InfiniBand, Ethernet) its utilization and busiest links (the
same breakdown goes into the trace, ``/training``); for a scenario with ``[[job]]`` tables,
each job run once more alone on the same GPUs, and a table of each job's mean iteration time
alone and shared, its slowdown, and the links where jobs contended (each training job's first
iteration broken down goes into the trace, ``/job_training``, for ``flowsim plot --kind gantt``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flowsim.commands.progress import Notes, add_progress_argument, show_progress
from flowsim.errors import InputError, output_file
from flowsim.files import refuse_foreign
from flowsim.formatting import format_seconds
from flowsim.jobresults import job_results
from flowsim.scenario import load_scenario, run_scenario
from flowsim.stepreport import describe_step
from flowsim.trace import FORMAT as TRACE_FORMAT
from flowsim.trace import check_writable, write_trace
from flowsim.training import job_breakdowns, training_breakdown

__all__ = ["add_parser", "run_command"]


def run_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim run``: load, route, simulate, write the trace; returns 0.

    Errors in the scenario, an output path that cannot be written or would replace a file
    the scenario reads (see :func:`~flowsim.errors.output_file`), or a string the trace
    cannot store (see :func:`~flowsim.trace.check_writable`) raise
    :class:`~flowsim.errors.InputError` naming the file (and key, flow or tag) before the
    simulation runs.
    """
    progress = None if args.quiet else Notes(sys.stderr)
    note = progress or (lambda message: None)
    output = output_file(
        args.output if args.output is not None else Path(args.scenario.stem + ".h5"), "the trace",
        inputs=[args.scenario],
    )
    note(f"loading {args.scenario}")
    scenario = load_scenario(args.scenario, progress=progress)
    # Checked again now that the scenario says which other files it reads (its flow list).
    output_file(output, "the trace", inputs=[args.scenario, *scenario.files])
    refuse_foreign(output, TRACE_FORMAT, "a trace")
    try:
        check_writable(scenario.topology, scenario.workload, scenario_text=scenario.text)
    except InputError as err:
        raise InputError(f"{scenario.source}: {err}") from None
    run = run_scenario(scenario, progress=progress, live=show_progress(args))
    jobs = job_results(run, progress=progress) if scenario.jobs else None
    breakdown = None
    if scenario.training is not None:
        note("breaking the training step down")
        # The step's flows end the [workload] flows; the jobs' flows come after them.
        end = scenario.jobs[0].lo if scenario.jobs else len(scenario.workload)
        breakdown = training_breakdown(
            scenario.topology, scenario.training, scenario.workload, run.result,
            offset=end - len(scenario.training.workload), routes=run.routes,
        )
    job_training = job_breakdowns(scenario.topology, scenario.jobs, scenario.workload, run.result, run.routes)
    note(f"writing {output}")
    write_trace(
        output, scenario.topology, scenario.workload, run.routes, run.result, scenario_text=scenario.text,
        jobs=None if jobs is None else jobs.table(), training=breakdown, job_training=job_training,
    )
    note("done")
    makespan = format_seconds(run.result.makespan_s)
    classes = run.result.n_flow_classes
    solved = ""
    if classes is not None and classes < run.result.n_flows:
        solved = f" (solved as {classes:,} flow class{'es' if classes > 1 else ''})"
    print(f"{scenario.name}: {run.result.n_flows:,} flows{solved}, makespan {makespan} -> {output}")
    if scenario.failures:
        print(f"failures: {scenario.failures}")
    if breakdown is not None:
        print("\n".join(describe_step(breakdown, scenario.topology)))
    if jobs is not None:
        print(jobs.format_text())
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim run SCENARIO [-o TRACE] [-q] [--progress]``; its handler is :func:`run_command`."""
    parser = subparsers.add_parser("run", help="simulate a scenario file and write an HDF5 trace", description=__doc__)
    parser.add_argument("scenario", type=Path, help="a TOML scenario file")
    parser.add_argument(
        "-o", "--output", type=Path, default=None,
        help="trace to write (default: the scenario file's name with .h5, here)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress notes on stderr")
    add_progress_argument(parser)
    parser.set_defaults(func=run_command)
    return parser
