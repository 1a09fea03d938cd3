"""``flowsim check``: nccl-tests output measured against flowsim's prediction for the cluster.

    flowsim check NCCL_TESTS_OUTPUT [...] [--system dgx-h100|FILE.toml] [--nodes 4 --gpus-per-node 8]
                  [--fabric F --switch S --oversubscription O]
                  [--threshold 0.1] [--latency-tolerance 2] [--history history.h5] [--plot trend.png]
                  [--json]
    flowsim check --history history.h5 --plot trend.png

prints, per message size, the predicted busbw, the measured out-of-place and in-place busbw
and their ratio to the prediction, and flags sizes whose measured busbw is below
``1 - threshold`` of the prediction (SHORT: the cluster underperforms), above ``1 + threshold``
(FAST: the system description is probably wrong; a ring or tree, whose lanes the model holds
to NCCL's modelled bandwidth, only where it also beats the same choice on its links alone), or
where nccl-tests counted wrong elements (WRONG). Without ``--system``, each run is checked on
NVIDIA's server of the GPU its rank lines name (``dgx-h100`` for an ``NVIDIA H100 80GB HBM3``,
:data:`flowsim.check.report.DEFAULT_SYSTEMS`), or on the AWS instance the aws-ofi-nccl plugin's
INFO line names (``NET/OFI Running on p5.48xlarge platform``: ``aws-p5``), with a note on
stderr saying which runs went on which server. The part of a predicted time that is NCCL's
latency (its ``baseLat`` and ``hwLat`` constants, which rank algorithms rather than time
them) may be up to ``1 + latency-tolerance`` times longer or shorter (default 3x), so
latency-bound sizes are flagged only when far off (a run whose threads each drive several
GPUs, -g N, one launch round longer still: CUDA's launch overheads of single-process runs);
then the prediction's error by size band. Warnings, one line each, say where the log's
GPU model, ranks or hosts differ from the system given (or its test or GPUs per host from
``--collective`` or ``--gpus-per-node``: the log's are taken), or what the log lacks; with
NCCL_DEBUG=INFO lines, where NCCL's communicator had other channels than the model's, and
network connections without GPUDirect RDMA or over TCP sockets. Each row is predicted with
the data type and reduction it printed (NCCL's NVLS reduces only some), and, where NCCL's
TUNING lines (NCCL_DEBUG_SUBSYS=TUNING) say what it ran, with NCCL's algorithm and protocol
(a warning says where flowsim's replay of NCCL's tuner chose otherwise); where another
algorithm and protocol NCCL may have run (a close call in its model, or its best without
NVLS) would flag none of two or more flagged sizes, a last line says which (a choice rather
than a fault). Output is read
as people paste it (``-`` reads standard input: ``srun ... all_reduce_perf ... | flowsim check -``):
launcher prefixes, interleaved lines of other programs, no rank lines (then
``--nodes`` and ``--gpus-per-node`` give the cluster's shape); so is the JSON file
nccl-tests' ``-J FILE`` writes. A file holding several runs one after another (a script that
runs each binary in turn) is checked run by run, and so are several files (a pairwise
sweep's logs: ``flowsim check logs/*.log``): each report headed ``# run K of N`` (``--brief``:
a line per run; ``--json``: an array of the reports of the runs read), then a line counting
the runs OK, flagged and not checked. A run that cannot be checked (a file that cannot be read,
a run that failed or was cut off before its results, one whose GPU names no server without
``--system``, one the options cannot predict) gets an error line ending "(not checked)" and the
other runs are checked; where none can be, each gets its line. With ``--fail PATTERN`` and
``--degrade PATTERN=FACTOR`` (repeatable) predict the cluster with links, NICs or switches
taken out or slowed (:mod:`flowsim.failures`): does the log match a cluster with one NIC
down? With ``--history`` the check is appended to an HDF5 history, dated by ``--date``, else by the
time stamp of the log's first stamped line, else by the check's time, and named by
``--label``; each report then ends with where its run got slower (or faster) than the
cluster's latest earlier run in the history, by more than the threshold, against the same
binary, system, shape and prediction options (``slower than check 3 of 2024-07-17 at
1 MiB-16 GiB: 427.0 against 469.2 GB/s at 16 GiB``). A run the history already holds,
checked alike (the same text, system, shape, threshold and options), is not appended again
(a warning says which check holds it) unless ``--force``. The runs of one command are
appended together: a failure (a full disk) records none of them. ``--plot`` draws the
history's measured / predicted ratio over the runs' time (needs matplotlib), of
``--collective``, ``--system`` and ``--nodes`` where given, a panel per shape of cluster
(nodes and ranks). Progress (each size being built, routed and simulated) goes to stderr
when it is a terminal, or with ``--progress``. Both paths are checked before the
check runs, so that a bad one fails before anything is added to the history. Exit status:
0 when no size is flagged, 1 when some are or a run got slower than the cluster's earlier run
in the history, 2 on bad input or a run that cannot be read.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import shlex
import sys
from pathlib import Path

from flowsim.check import (
    BINARIES,
    AppendedCheck,
    CheckReport,
    NcclTestLog,
    append_checks,
    check_log,
    default_system,
    history_file,
    history_plot_file,
    parse_nccl_logs,
    plot_history,
)
from flowsim.check.report import GUESSED_BOX, LATENCY_TOLERANCE, UNNAMED_GPU, platform_system
from flowsim.collectives import PROTOCOLS
from flowsim.collectives.builders import algorithm_name, protocol_name
from flowsim.collectives.report import parse_size
from flowsim.commands.argtypes import (
    add_cluster_arguments,
    add_failure_arguments,
    add_nccl_arguments,
    add_time_tolerance_argument,
    cluster_options,
    collective_arg,
    parse_degrade,
    parse_nccl_env,
    positive_int,
)
from flowsim.commands.progress import Notes, add_progress_argument, show_progress
from flowsim.errors import STDIN, InputError, read_stdin, unstorable_text
from flowsim.hardware import FIGURES
from flowsim.presets import guessed_box_words
from flowsim.servers import ServerSpec

__all__ = ["add_parser", "check_command"]

_COLLECTIVE_BINARY = {collective: binary for binary, collective in BINARIES.items()}


def _fraction(text: str) -> float:
    # argparse would name this function in its message ("invalid _fraction value").
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid fraction value: {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"threshold must be in [0, 1), got {text}")
    return value


def _date(text: str) -> datetime.datetime:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid date: {text!r} (an ISO date or date-time: 2024-07-18, 2024-07-18T15:41:05)") from None
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"latency tolerance must be a number >= 0, got {text}")
    return value


def _parse(args: argparse.Namespace, unread: list[InputError]) -> list[NcclTestLog]:
    """Each nccl-tests run in the outputs ``args`` name, file by file, parsed with their
    collective and cluster shape; runs that cannot be read go to ``unread``, unless none
    can be (then the first one's error is raised)."""
    options = dict(collective=args.collective, nodes=args.nodes, gpus_per_node=args.gpus_per_node, errors=unread)
    logs = [
        log
        for path in args.output
        for log in (parse_nccl_logs(read_stdin("nccl-tests output"), source="<stdin>", **options)
                    if str(path) == STDIN else parse_nccl_logs(path, **options))
    ]
    if not logs:
        raise _every(unread)
    return logs


def _every(errors: list[InputError]) -> InputError:
    """The error to raise where no run could be read or checked: the one, or each of several
    (its own line, ending "(not checked)" as where others are checked)."""
    if len(errors) == 1:
        return errors[0]
    return InputError("\n".join(f"{err} (not checked)" for err in errors))


def _summary(reports: list[CheckReport], n_unread: int, n_files: int) -> str:
    """The closing line of a check of several runs: how many were OK, flagged, not read."""
    flagged = sum(not report.ok for report in reports)
    files = f" in {n_files} files" if n_files > 1 else ""
    unread = f"; {n_unread} not checked (the errors on stderr)" if n_unread else ""
    return (f"\n# {len(reports)} run(s) checked{files}: {len(reports) - flagged} with every size OK, "
            f"{flagged} with sizes flagged{unread}")


def _named(log: NcclTestLog, err: InputError, several: bool) -> InputError:
    """``err`` of one run, naming the run's file where several runs or files are checked,
    and the run where its file holds several (``logs.txt, run 2 of 3``): the same error of
    two runs would read the same otherwise."""
    text = str(err)
    if text.startswith(f"{log.source}: "):
        return InputError(f"{log.named}: {text.removeprefix(f'{log.source}: ')}")
    return InputError(f"{log.named}: {text}" if several and not text.startswith(log.source) else text)


def _default_systems(logs: list[NcclTestLog],
                     unread: list[InputError]) -> tuple[list[NcclTestLog], list[str | ServerSpec]]:
    """The runs that name their system when ``--system`` is not given, and each one's:
    NVIDIA's server of the GPU its rank lines name, or a box of PCIe cards as flowsim guesses
    it (:func:`flowsim.check.report.default_system`), said in one line on stderr. A run that
    names none goes to ``unread``, unless none does (then the first one's error is raised)."""
    named_logs, systems, failed = [], [], []
    for log in logs:
        try:
            systems.append(default_system(log))
            named_logs.append(log)
        except InputError as err:
            failed.append(_named(log, err, len(logs) + len(unread) > 1))
    if not named_logs:
        raise _every([*unread, *failed])
    unread.extend(failed)
    logs = named_logs
    runs: dict[str | ServerSpec, list[int]] = {}  # system: the runs checked on it, from 1
    named: dict[str | ServerSpec, str] = {}  # system: what it is taken for (the AWS instance, the GPU, the box)
    instances = False  # whether a run was checked on the AWS instance its INFO lines name
    for k, (log, system) in enumerate(zip(logs, systems, strict=True), start=1):
        runs.setdefault(system, []).append(k)
        instance = log.platform if platform_system(log) is not None else None
        instances |= instance is not None
        gpu = next(gpu for gpu in log.gpu_models if gpu != UNNAMED_GPU)
        named.setdefault(system, instance or gpu)
    guessed = {system: log for log, system in zip(logs, systems, strict=True) if isinstance(system, ServerSpec)}
    if len(runs) == 1 and guessed:
        box, log = next(iter(guessed.items()))
        where = f"on a box of PCIe cards as flowsim guesses it, {box.name}: {_box_words(box, log)}; {GUESSED_BOX}"
    elif len(runs) == 1:
        where = (f"on {systems[0]}, the AWS instance the log's NCCL INFO lines name ({named[systems[0]]})"
                 if instances else f"on {systems[0]}, NVIDIA's server of the log's {named[systems[0]]}")
    else:
        what = ("NVIDIA's server of its GPU or the AWS instance its NCCL INFO lines name" if instances
                else "NVIDIA's server of its GPU")
        where = f"each run on {what}" + (", or a box of PCIe cards as flowsim guesses it" if guessed else "") + ": "
        where += ", ".join(
            (f"{system.name} ({_box_words(system, guessed[system])})" if isinstance(system, ServerSpec) else system)
            + f" for run{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))} ({named[system]})"
            for system, ks in runs.items())
        if guessed:
            where += f"; a box's {GUESSED_BOX.removeprefix('its ')}"
    print(f"flowsim check: no --system: checking {where}" + ("" if guessed else " (--system names another)"),
          file=sys.stderr)
    return logs, systems


def _box_words(spec: ServerSpec, log: NcclTestLog) -> str:
    """A guessed box of PCIe cards in words (:func:`flowsim.presets.guessed_box_words`), and
    where ``log``'s NCCL INFO lines show peer-to-peer, which the guess lacks."""
    words = guessed_box_words(spec)
    if "P2P" not in dict(log.local_links):
        return words
    return (f"{words}, where the log's NCCL INFO lines show peer-to-peer (GPUs under a common PCIe switch, an "
            "NVLink bridge, or NCCL_P2P_LEVEL)")


def _prediction_options(args: argparse.Namespace) -> str:
    """The options that change the prediction and that a report does not hold, as given
    (``--fail n0.nic0 --nccl-version 2.19.3``): the history keeps them, so that two checks of
    one log with other options tell apart."""
    given = [(name, value) for name, values in (("--fail", args.fail), ("--degrade", args.degrade),
                                                 ("--nccl-env", args.nccl_env)) for value in values]
    if args.nccl_version_asked is not None:
        given.append(("--nccl-version", args.nccl_version_asked))
    return shlex.join(word for pair in given for word in pair)


def _past_lines(check: AppendedCheck | None, brief: bool = False) -> str:
    """The lines under a report that say where its run got slower or faster than the
    cluster's earlier run in the history; empty without a history or an earlier run."""
    if check is None:
        return ""
    if brief:
        return "".join(f"; {change}" for change in check.changes)
    if check.compared_with is None:
        return ""
    if not check.changes:
        return f"\n# against check {check.compared_with}, the cluster's earlier run: no size moved beyond the threshold"
    return "".join(f"\n# {change}" for change in check.changes)


def _history_dict(check: AppendedCheck) -> dict:
    """A report's ``history`` key in ``--json``: its check id, the earlier run's and what moved."""
    return {"check_id": check.check_id, "compared_with": check.compared_with,
            "changes": [{**dataclasses.asdict(change), "text": str(change)} for change in check.changes]}


def _cluster(args: argparse.Namespace, system: str | ServerSpec | None) -> dict:
    """:func:`check_log`'s ``system`` and fabric keywords for ``system`` (a preset or system
    file, or the box :func:`default_system` guessed) with the command's ``--fabric``,
    ``--switch`` and ``--oversubscription``."""
    if isinstance(system, ServerSpec):
        given = {"fabric": args.fabric, "switch": args.switch, "oversubscription": args.oversubscription}
        return {"system": system, "fabric": "auto", **{key: value for key, value in given.items() if value is not None}}
    server, _, cluster = cluster_options(argparse.Namespace(**{**vars(args), "system": system}))
    cluster.pop("n_nodes", None)  # the servers are the hosts the log names (or --nodes)
    return {"system": server, **cluster}


def check_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim check``; returns 0 (all sizes OK), 1 (some flagged) or 2 (bad input)."""
    try:
        if not args.output and args.plot is None:
            raise InputError(f"give an nccl-tests output file ('{STDIN}' reads it from standard input), or --history "
                             "with --plot")
        if [str(path) for path in args.output].count(STDIN) > 1:
            raise InputError(f"standard input ('{STDIN}') is read once: name it once")
        if args.plot is not None and args.history is None:
            raise InputError("--plot draws the history: give --history FILE too")
        given = [name for name, on in (("--date", args.date is not None), ("--label", args.label),
                                       ("--force", args.force)) if on]
        if given and (args.history is None or not args.output):
            raise InputError(f"{given[0]} goes into the history with the check: give a log and --history FILE too")
        if args.label and (why := unstorable_text(args.label)):
            raise InputError(f"--label: {why}")
        if args.tuning and args.brief:
            raise InputError("--tuning prints under the table's rows, which --brief leaves out: give one of them")
        logs = None  # parsed here only when the logs must name the systems, else below
        unread: list[InputError] = []  # runs that cannot be read: said, and the others checked
        run_systems = None  # without --system, each run's: NVIDIA's server of its GPU
        if args.output and args.system is None:
            logs, run_systems = _default_systems(_parse(args, unread), unread)
        try:
            min_bytes = parse_size(args.min_bytes)
        except InputError as err:
            raise InputError(f"--min-bytes: {err}") from None
        files = [path for path in args.output if str(path) != STDIN]  # the inputs an output must not replace
        if args.output and args.history is not None:
            history_file(args.history, inputs=files)
        if args.plot is not None:
            history_plot_file(args.plot, inputs=[*files, *([] if args.history is None else [args.history])])
        status = 0
        if args.output:
            logs = _parse(args, unread) if logs is None else logs
            if run_systems is None:
                run_systems = [args.system] * len(logs)
            clusters = {name: _cluster(args, name) for name in dict.fromkeys(run_systems)}
            options = dict(
                nodes=args.nodes, threshold=args.threshold, latency_tolerance=args.latency_tolerance,
                algorithm=args.algorithm, protocol=args.protocol, figure=args.figure, min_bytes=min_bytes,
                # The version as named: check_log leaves out what it lacked under the log's settings too.
                nccl_env=parse_nccl_env(args.nccl_env), nccl_version=args.nccl_version_asked,
                fail=args.fail, degrade=parse_degrade(args.degrade), time_rel_tol=args.time_rel_tol,
            )
            # Every run is checked before anything is printed or recorded, so that bad input
            # leaves the history as it was. A run that cannot be checked is said and the others
            # are checked, unless none can be (then the first one's error alone).
            reports, failed = [], []
            notes = Notes(sys.stderr, in_place=True) if show_progress(args) else None
            for k, (log, name) in enumerate(zip(logs, run_systems, strict=True), start=1):
                if notes is not None:  # each size's stages, as flowsim collective shows them
                    run = f"run {k} of {len(logs)}, " if len(logs) > 1 else ""
                    options["progress"] = lambda message, run=run: notes(f"{run}{message}")
                try:
                    reports.append(check_log(log, **clusters[name], **options))
                except InputError as err:
                    # check_log names a failure by its keyword (fail[0], degrade."n0.nic0"), as a
                    # scenario file does; here they are options, as flowsim collective names them.
                    failed.append(_named(log, InputError(f"--{err}" if str(err).startswith(("fail[", "degrade."))
                                                         else str(err)), len(logs) + len(unread) > 1))
            if notes is not None:
                notes.clear()
            if not reports:
                raise _every([*unread, *failed])
            unread.extend(failed)
            # Appended before the reports are printed: each report ends with how its run compares
            # with the cluster's earlier run in the history. All the runs or none, so that a
            # failure leaves no part of the command recorded for a rerun to record again.
            appended: list[AppendedCheck | None] = [None] * len(reports)
            if args.history is not None:
                appended = list(append_checks(reports, args.history, run_time=args.date, label=args.label,
                                              options=_prediction_options(args), force=args.force))
            if args.json:  # one run's report as an object, several runs' (read or not) as an array
                dicts = [{**report.to_dict(), **({} if check is None else {"history": _history_dict(check)})}
                         for report, check in zip(reports, appended, strict=True)]
                print(json.dumps(dicts[0] if len(dicts) + len(unread) == 1 else dicts, indent=2))
            else:
                checked = list(zip(reports, appended, strict=True))
                print("\n".join(report.format_brief() + _past_lines(check, brief=True) for report, check in checked)
                      if args.brief else "\n\n".join(
                    (report.format_text(args.tuning) if len(reports) == 1
                     else f"# run {k} of {len(reports)}: {report.log.binary}\n{report.format_text(args.tuning)}")
                    + _past_lines(check)
                    for k, (report, check) in enumerate(checked, start=1)
                ))
                if len(reports) + len(unread) > 1:
                    print(_summary(reports, len(unread), len(args.output)))
            for report, check in zip(reports, appended, strict=True):
                if check is not None and check.repeated:
                    print(f"flowsim check: warning: {report.log.named}: already in {args.history} as check "
                          f"{check.check_id}, checked alike; not appended again (--force appends it)", file=sys.stderr)
                elif check is not None:
                    print(f"check {check.check_id} appended to {args.history}", file=sys.stderr)
            # A run slower than the cluster's own earlier run fails the check as a flagged size does.
            status = 0 if all(report.ok and not (check and check.slower)
                              for report, check in zip(reports, appended, strict=True)) else 1
            for problem in unread:
                print(f"flowsim check: error: {problem} (not checked)", file=sys.stderr)
            status = 2 if unread else status
        if args.plot is not None:
            binary = None if args.collective is None else _COLLECTIVE_BINARY[args.collective]  # collective_arg's name
            system = None  # as the history names it: a preset's name, or a system file's server
            if args.system is not None:
                server = _cluster(args, args.system)["system"]
                system = server if isinstance(server, str) else server.name
            path = plot_history(args.history, args.plot, binary=binary, system=system, nodes=args.nodes)
            print(f"history plot -> {path}", file=sys.stderr)
    except (InputError, ImportError) as err:
        for line in str(err).splitlines():  # several runs none of which could be read: a line each
            print(f"flowsim check: error: {line}", file=sys.stderr)
        return 2
    return status


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``check`` on ``subparsers``; its handler is :func:`check_command` (set as ``func``)."""
    parser = subparsers.add_parser(
        "check",
        help="compare nccl-tests output with flowsim's prediction and flag rows slower or faster than it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "output", nargs="*", type=Path, metavar="OUTPUT",
        help="nccl-tests output files: text (one binary's run, or several one after another) or the JSON file -J "
        "writes; several files are checked one after another; '-' reads standard input (a pasted or piped log). "
        f"Every nccl-tests binary is read: {', '.join(BINARIES)}"
    )
    add_cluster_arguments(parser, required=False)
    parser.add_argument("--nodes", type=positive_int, help="servers (default: the hosts named in the rank lines)")
    parser.add_argument(
        "--gpus-per-node", type=positive_int,
        help="GPUs used per server, for output without '#  Rank' lines (with --nodes); where the rank lines say "
        "otherwise, theirs are taken, with a warning",
    )
    parser.add_argument(
        "--threshold",
        type=_fraction,
        default=0.1,
        help="flag below (1 - threshold) and above (1 + threshold) x predicted busbw (default 0.1)",
    )
    parser.add_argument(
        "--latency-tolerance",
        type=_tolerance,
        default=LATENCY_TOLERANCE,
        help="the predicted latency (NCCL's constants) may be off by a factor 1 + this either way (default 2)",
    )
    parser.add_argument(
        "--collective",
        type=collective_arg,
        help="the nccl-tests binary or its collective (all_gather_perf, allgather, all_gather ...); "
        "default: read from the output or file name (a log that names its test is checked as that test, with a "
        "warning where this names another); with --plot alone, the checks to draw",
    )
    parser.add_argument(
        "--algorithm", type=algorithm_name,
        help="flowsim algorithm, or NCCL's name (Ring, NVLSTree); default auto: what NCCL's tuner picks per size",
    )
    parser.add_argument(
        "--protocol", default="auto", type=protocol_name, choices=("auto", *PROTOCOLS),
        help="NCCL protocol (LL128 or ll128 ...; default auto: NCCL's choice)",
    )
    add_nccl_arguments(parser, version_from_log=True)
    add_failure_arguments(parser)
    add_time_tolerance_argument(parser)
    parser.add_argument("--figure", default="effective", choices=FIGURES, help="link rates (default effective)")
    parser.add_argument("--min-bytes", default="1", help="predict only sizes from this one, e.g. 64M (default 1)")
    parser.add_argument("--history", type=Path, help="HDF5 history to append this check to")
    parser.add_argument(
        "--date", type=_date,
        help="when the run ran, for the history (ISO date or date-time, UTC unless it names a zone); default: the "
        "time stamp of the log's first stamped line ([2024-07-18 15:41:05], kubectl --timestamps), else now",
    )
    parser.add_argument(
        "--force", action="store_true",
        help="append a run the history already holds, checked alike (the same log text and options), again",
    )
    add_progress_argument(parser)
    parser.add_argument("--label", default="", help="free text naming the run in the history (a build id, a ticket)")
    parser.add_argument("--plot", type=Path, help="draw the history's measured / predicted ratio over time here")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    output.add_argument(
        "--brief", action="store_true",
        help="one line per run: the log, its flagged sizes and the range of measured / predicted busbw",
    )
    parser.add_argument(
        "--tuning", action="store_true",
        help="under each row, NCCL's predicted time (us) of every algorithm and protocol its tuner weighed, the one "
        "the prediction ran marked, then the row's measured times (JSON rows carry it as nccl_model_us)",
    )
    parser.set_defaults(func=check_command)
    return parser
