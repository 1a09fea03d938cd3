"""``flowsim collective``: an nccl-tests-like sweep of one collective on a preset cluster.

    flowsim collective all_reduce --system dgx-h100 --nodes 4 -b 8 -e 8G -f 2 [--json]
    flowsim collective all_reduce --system data/systems/l40s.toml -b 8 -e 8G   # a system file

prints one row per message size (size, count, type, redop, root, then what ran: algorithm,
protocol and channels, then time, algbw, busbw) as soon as that size has run, as
``all_reduce_perf`` does, then the algorithms and models that ran and the average busbw; or
the same rows as JSON at the end. On a terminal (or with ``--progress``) a note on stderr
says which size is being built, routed and simulated. By default each size runs what NCCL's tuner would pick;
``--nccl-env NCCL_ALGO=Ring`` (repeatable) steers it as NCCL's environment does. Every GPU is a
rank, or with ``--gpus-per-node G`` each host's first G (a run of one GPU a node).
``--fabric``, ``--switch`` and ``--oversubscription`` shape the compute fabric (a system
file's ``[cluster]`` table gives defaults); by default one server gets none, as its GPUs never
reach its compute NICs, and a note says that ``--switch`` or ``--oversubscription`` then has no
effect. ``--fail PATTERN`` and ``--degrade PATTERN=FACTOR`` (repeatable) take
links, NICs or switches out or slow them, as a scenario's ``fail`` and ``degrade`` options do
(``--fail n0.nic3``, ``--degrade 'ib.spine*=0.5'``); the title line says what changed.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from flowsim.collectives import ALGORITHMS, COLLECTIVES, MODELS, PROTOCOLS, STEP_MESSAGE_LIMIT
from flowsim.collectives.builders import algorithm_name, protocol_name
from flowsim.collectives.constants import nccl_release
from flowsim.collectives.placement import send_pair
from flowsim.collectives.report import (
    DTYPE_BYTES,
    NCCL_TESTS_ITERS,
    ROOTED,
    STEP_BYTES,
    SUM_SHOWN,
    NcclRow,
    iter_sweep,
    message_sizes,
    nccl_model_note,
    rows_to_json,
    solved_note,
    table_footer,
    table_header,
    table_row,
)
from flowsim.collectives.tuner import (
    FP8_TYPES,
    NCCL_COLLECTIVES,
    REDOPS,
    channel_env_notes,
    describe_system,
    gpudirect_rdma,
    max_channels,
    merged_env,
    system_env_taken,
)
from flowsim.commands.argtypes import (
    add_cluster_arguments,
    add_failure_arguments,
    add_nccl_arguments,
    add_time_tolerance_argument,
    cluster_options,
    collective_arg,
    failed_cluster,
    nccl_version_lacks,
    non_negative_int,
    number_type,
    parse_nccl_env,
    positive_int,
)
from flowsim.commands.progress import Notes, add_progress_argument, show_progress
from flowsim.engine import DEFAULT_TIME_REL_TOL, time_window_note
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster, front_end_only_note, resolve_fabric
from flowsim.failures import describe_changes
from flowsim.hardware import FIGURES, gpu_compute_capability
from flowsim.presets import preset_spec
from flowsim.routing import METHODS, describe_method
from flowsim.servers import ServerSpec

__all__ = ["add_parser", "rank_gpus", "run_collective"]


_root_rank = number_type(int, lambda value: value >= -1, "a rank number, or -1 for every root in turn")

# nccl-tests' options that shape its timing loop and data checks, not the collective NCCL
# runs (src/common.cu, 2.19.6): taken and left alone.
_TIMING_OPTIONS = (
    ("-t", "nthreads", "threads per process (each drives -g GPUs)"),
    ("-w", "warmup_iters", "warm-up iterations"),
    ("-N", "run_cycles", "times the whole sweep runs"),
    ("-p", "parallel_init", "initialise the threads' communicators in parallel"),
    ("-c", "check", "iterations whose results are checked"),
    ("-y", "stream_null", "run on the default stream"),
    ("-T", "timeout", "seconds before a hung run is stopped"),
    ("-C", "report_cputime", "report the host's time instead of the GPU's"),
    ("-S", "report_timestamps", "print a timestamp per size"),
    ("-a", "average", "which rank's time is reported"),
    ("-M", "memory", "report GPU memory use"),
    ("-I", "per_iter_timing", "time each iteration"),
    ("-K", "per_iter_skip", "iterations left out of those figures"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``collective`` on ``subparsers``; its handler is :func:`run_collective`
    (set as ``func``)."""
    parser = subparsers.add_parser(
        "collective",
        help="nccl-tests-like sweep of one collective on a preset cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "collective",
        type=collective_arg,
        help=f"one of {', '.join(COLLECTIVES)}; also as NCCL and nccl-tests spell them "
        "(allreduce, alltoall_perf, sendrecv ...)",
    )
    add_cluster_arguments(parser, required=True)
    parser.add_argument("--nodes", type=positive_int, help="number of servers (default: the system file's, else 1)")
    parser.add_argument(
        "--gpus-per-node", type=positive_int,
        help="GPUs each host runs a rank on, its first ones (devices 0 to G-1, as a launcher's G processes a "
        "host take them); a host is a server, or a tray of a rack-scale system (default: all)",
    )
    parser.add_argument("-b", "--minbytes", default="32M", help="smallest size, e.g. 8, 512K, 1G (default 32M)")
    parser.add_argument("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    parser.add_argument(
        "-f", "--stepfactor", type=positive_int,
        help="size multiplication factor (default 2, or 1 where -i is given); 1: sizes grow by -i",
    )
    parser.add_argument(
        "-i", "--stepbytes",
        help=f"size increment where the factor is 1, as nccl-tests' -i (default {STEP_BYTES >> 20}M)",
    )
    parser.add_argument(
        "-d", "--datatype", default="float", choices=(*DTYPE_BYTES, "all"),
        help="data type (default float); all: each in turn, a block of rows each, as nccl-tests' -d all",
    )
    parser.add_argument(
        "-o", "--op", default="sum", choices=(*REDOPS, "all"),
        help="reduction (default sum): NCCL's NVLS reduces only sums and min/max of some types "
        "(docs/model.md); all: each in turn, for the collectives that reduce",
    )
    parser.add_argument(
        "-g", "--ngpus", type=positive_int, default=1,
        help="GPUs each nccl-tests thread drives (default 1): one kernel launch per GPU per iteration, "
             "which bounds small sizes (docs/hardware.md 6.2)",
    )
    parser.add_argument("-m", "--agg_iters", type=positive_int, default=1, help="collectives per iteration (default 1)")
    parser.add_argument("-G", "--cudagraph", type=non_negative_int, default=0,
                        help="CUDA graph launches (default 0: none)")
    parser.add_argument(
        "-n", "--iters", type=positive_int, default=NCCL_TESTS_ITERS,
        help=f"timed iterations, back to back (default {NCCL_TESTS_ITERS}): a broadcast's or reduce's calls overlap, "
        "and their rows are the mean time of a call (docs/model.md)",
    )
    parser.add_argument(
        "-z", "--blocking", type=non_negative_int, default=0,
        help="wait for each call to end before the next (default 0: back to back)",
    )
    parser.add_argument(
        "--algorithm",
        default="auto",
        type=algorithm_name,
        choices=("auto", *sorted({a for algs in ALGORITHMS.values() for a in algs})),
        help="flowsim's name or NCCL's (Ring, NVLSTree); default auto: what NCCL's tuner picks per size (p2p for "
        "all_to_all, gather, scatter, hypercube, all_to_all_v and send)",
    )
    parser.add_argument(
        "--protocol",
        default="auto",
        type=protocol_name,
        choices=("auto", *PROTOCOLS),
        help="NCCL protocol (LL128 or ll128 ...); default auto: what NCCL's tuner picks per size",
    )
    add_nccl_arguments(parser)
    add_failure_arguments(parser)
    parser.add_argument(
        "-r", "--root", type=_root_rank,
        help=f"the root's rank of {', '.join(sorted(ROOTED))} (default 0), or -1 for every root in turn, a "
        "block of rows each, as nccl-tests' -r",
    )
    parser.add_argument("--channels", type=positive_int, help="default: the channels NCCL runs each size on")
    parser.add_argument("--slices", type=positive_int, help="pieces per message (default: NCCL slot sized)")
    parser.add_argument(
        "--model",
        default="auto",
        choices=MODELS,
        help="one message per step and slice, or streamed (rings, trees, chains and NVLSTree); auto streams "
        f"those of more than {STEP_MESSAGE_LIMIT:,} messages, unless a ring's classes of hops lay its steps out in "
        "fewer (default auto)",
    )
    parser.add_argument("--figure", default="effective", choices=FIGURES, help="link rates (default effective)")
    parser.add_argument("--routing", default="auto", choices=tuple(METHODS),
                        help="path choice between servers (auto: D-mod-k on InfiniBand, ECMP on Ethernet)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="ECMP hash seed")
    add_time_tolerance_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--tuning", action="store_true",
        help="under each row, NCCL's predicted time of every algorithm and protocol its tuner weighed, the least "
        "of which ran (as NCCL_DEBUG_SUBSYS=TUNING explains a choice; JSON rows carry it as nccl_model_us)",
    )
    add_progress_argument(parser)
    timing = parser.add_argument_group(
        "nccl-tests' timing options", "taken so that an nccl-tests command line runs as it is; they shape how "
        "nccl-tests times and checks its runs, not what NCCL runs, so they change no row",
    )
    for short, long, what in _TIMING_OPTIONS:
        timing.add_argument(short, f"--{long}", metavar="N", type=non_negative_int, help=what)
    parser.set_defaults(func=run_collective)
    return parser


def run_collective(args: argparse.Namespace) -> int:
    """Handler of ``flowsim collective``: run the sweep ``args`` describe, print it; returns 0.

    Table rows are printed as their sizes finish (JSON at the end), after the first size
    ran: bad input (an unknown preset, sizes, channels) raises
    :class:`~flowsim.errors.InputError` naming it before anything is printed.
    """
    server, system, cluster = cluster_options(args)
    if isinstance(server, ServerSpec) and not gpu_compute_capability(server.gpu):
        # A new GPU, or a misspelt one ("H1OO"): it runs, as the note says, and not silently.
        print(f"flowsim: note: {args.system}: the GPU {server.gpu!r} is no model flowsim knows (docs/hardware.md "
              "§1.4): its links run at the server's PCIe generation and NCCL's tuning takes its NVLinks' "
              "generation (Ampere's without NVLink)", file=sys.stderr)
    cluster.setdefault("n_nodes", 1)
    nccl_env = parse_nccl_env(args.nccl_env, nccl_version_lacks(args))
    most = max_channels(args.nccl_version)
    if args.channels is not None and args.channels > most:
        raise InputError(f"--channels {args.channels}: NCCL {args.nccl_version} runs at most {most} channels "
                         "(MAXCHANNELS)")
    for note in channel_env_notes(nccl_env, args.nccl_version):
        print(f"flowsim: note: {note}", file=sys.stderr)
    # The fabric "auto" makes, worked out once for the build and the table's title.
    nodes = cluster["n_nodes"]
    fabric = cluster["fabric"] = resolve_fabric(
        cluster["fabric"], nodes, server, switch=cluster.get("switch"), su_size=cluster.get("su_size"),
        oversubscription=cluster.get("oversubscription", 1.0))
    if fabric == "none":
        # Options that shape the compute fabric, where none is built (one server's GPUs never
        # reach its compute NICs): said, as --fabric would build one.
        why = ("one server gets no compute fabric (its GPUs never reach its compute NICs; --fabric rail_optimized "
               "builds one)" if nodes == 1 else "--fabric none builds no compute fabric")
        for option, value in (("--switch", args.switch), ("--oversubscription", args.oversubscription)):
            if value is not None:
                shown = f"{value:g}" if isinstance(value, float) else value
                print(f"flowsim: note: {option} {shown} has no effect: {why}", file=sys.stderr)
        if nodes > 1:
            print(f"flowsim: note: {front_end_only_note(nodes)}", file=sys.stderr)
    intact = build_cluster(server, figure=args.figure, **cluster)
    topology = failed_cluster(intact, args)
    failures = describe_changes(intact, topology)
    spec = server if isinstance(server, ServerSpec) else preset_spec(server)
    per_host = spec.gpus_per_host
    used = args.gpus_per_node or per_host
    if used > per_host:
        raise InputError(f"--gpus-per-node {used}: each {system} host has {per_host} GPUs")
    if args.ngpus > used:
        raise InputError(f"-g {args.ngpus}: a nccl-tests thread drives GPUs of its own host, and each {system} host "
                         + (f"has {per_host}" if used == per_host else f"runs {used} (--gpus-per-node)"))
    if args.root is not None and args.collective not in ROOTED:
        # nccl-tests takes -r for every binary and only the rooted ones use it: a script's one
        # command line for all of them runs.
        rooted = sorted(ROOTED)
        print(f"flowsim: note: -r/--root {args.root} has no effect: {args.collective} has no root "
              f"({', '.join(rooted[:-1])} and {rooted[-1]} have one)", file=sys.stderr)
        args.root = None
    # Every GPU by default (the collective's own ranks, and for send its ring of sends); else
    # each host's first ``used``, and for send the pair a sendrecv of those ranks waits for,
    # its channels those of their communicator (as flowsim check predicts such a log).
    gpus = None if used == per_host else rank_gpus(nodes, spec, used)
    n_gpus = len(topology.gpus()) if gpus is None else len(gpus)
    ranks = gpus if gpus is None or args.collective != "send" else send_pair(topology, gpus)
    communicator: dict[str, Any] = {} if gpus is None or args.collective != "send" else {"communicator": gpus}
    if args.root is not None and args.root >= n_gpus:
        raise InputError(f"--root {args.root}: the {n_gpus} ranks are 0 to {n_gpus - 1}")
    roots: Sequence[int | None] = [None] if args.root is None else range(n_gpus) if args.root == -1 else [args.root]
    factor = args.stepfactor if args.stepfactor is not None else 1 if args.stepbytes is not None else 2
    sizes = message_sizes(args.minbytes, args.maxbytes, factor, args.stepbytes or STEP_BYTES)
    dtypes: Sequence[str] = [args.datatype]
    if args.datatype == "all":
        gpus = [topology.node_names[g] for g in topology.gpus()]
        # FP8 types in nccl-tests' -d all: from NCCL 2.24.0, on Hopper and later (src/common.cu).
        fp8 = (nccl_release(args.nccl_version) or (0, 0, 0)) >= (2, 24, 0) and describe_system(topology, gpus).sm >= 90
        dtypes = [name for name in DTYPE_BYTES if fp8 or name not in FP8_TYPES]
    ops: Sequence[str] = [args.op]
    if args.op == "all":
        # The binaries that print a reduction run each of -o all (src/*.cu RunTest); the others one block.
        ops = REDOPS if args.collective in SUM_SHOWN else ["sum"]
    notes = Notes(sys.stderr, in_place=True) if show_progress(args) else None
    # In nccl-tests' order: each type, each reduction, each root, a block of sizes each.
    sweeps = [
        iter_sweep(
            topology,
            args.collective,
            sizes,
            dtype=dtype,
            redop=redop,
            ranks=ranks,
            algorithm=args.algorithm,
            protocol=args.protocol,
            channels=args.channels,
            slices=args.slices,
            root=root,
            model=args.model,
            nccl_env=nccl_env,
            nccl_version=args.nccl_version,
            routing=args.routing,
            seed=args.seed,
            time_rel_tol=args.time_rel_tol,
            progress=notes,
            gpus_per_thread=args.ngpus,
            agg_iters=args.agg_iters,
            cuda_graph=args.cudagraph,
            iters=args.iters,
            blocking=args.blocking > 0,
            **communicator,
        )
        for dtype, redop, root in itertools.product(dtypes, ops, roots)
    ]
    rows_run = itertools.chain.from_iterable(sweeps)
    pending = rows_run if notes is None else _erasing(notes, rows_run)
    # The communicator's ranks, for send too: its rows time the pair the ring of sends waits for.
    n_ranks = n_gpus
    rows = [next(pending)]
    # The system's own NCCL environment (a system file's [nccl] env) runs under --nccl-env.
    system_env = system_env_taken(topology, nccl_env)
    if not args.json:
        env = "".join(f", {key}={value}" for key, value in nccl_env.items())
        if system_env:
            env += ", " + " ".join(f"{key}={value}" for key, value in system_env.items()) + " (system)"
        print(
            table_header(
                f"flowsim {args.collective}: {nodes} x {system}, {n_ranks} ranks"
                f"{'' if gpus is None else f' ({used} GPU(s) a host)'}, {args.figure} link rates, "
                f"{fabric} fabric, {describe_method(topology, args.routing)} routing, NCCL {args.nccl_version}{env}"
                + (f"; failures: {failures}" if failures else "")
            )
        )
        _print_row(rows[0], args.tuning)
    for row in pending:
        rows.append(row)
        if not args.json:
            _print_row(row, args.tuning)
    ran = sorted({r.algorithm for r in rows})
    algorithm = ran[0] if len(ran) == 1 else " and ".join(ran)
    # As every row's collective decided it (the same ranks and environment for each).
    gpudirect = gpudirect_rdma(topology, nccl_env=merged_env(topology, nccl_env), version=args.nccl_version)
    if args.json:
        print(
            rows_to_json(
                rows,
                collective=args.collective,
                algorithm=algorithm,
                system=system,
                nodes=nodes,
                gpus_per_node=used,
                ranks=n_ranks,
                figure=args.figure,
                fabric=fabric,
                routing=args.routing,
                time_rel_tol=args.time_rel_tol,
                nccl_env=nccl_env,
                system_nccl_env=system_env,
                nccl_version=args.nccl_version,
                gpus_per_thread=args.ngpus,
                agg_iters=args.agg_iters,
                cuda_graph=args.cudagraph,
                iters=args.iters,
                blocking=args.blocking > 0,
                failures=failures,
                gpudirect=gpudirect,
            )
        )
    else:
        models = " and ".join(sorted({r.model for r in rows}))
        print(f"# Ran                  : {algorithm} ({models})")
        if args.agg_iters > 1 and args.collective in NCCL_COLLECTIVES:
            print(f"# Aggregated (-m)      : {args.agg_iters} calls an iteration, which NCCL merges into one of their "
                  "bytes: a row is that call over them; its NCCL model times are the merged call's")
        if args.time_rel_tol > DEFAULT_TIME_REL_TOL:
            print(f"# Time windows         : {time_window_note(args.time_rel_tol)}")
        if not gpudirect:
            print("# GPUDirect RDMA       : off, network traffic staged through host memory (a GPU's path to its NIC "
                  "is farther than NCCL_NET_GDR_LEVEL allows)")
        bound = [r for r in rows if r.launch_bound]
        if bound:
            print(f"# Launch-bound         : {len(bound)} size(s) up to {bound[-1].size_bytes} B take the host's "
                  f"{bound[0].time_us:.1f} us per iteration ({args.ngpus} GPU(s) per thread)")
        print(solved_note(rows))
        print(table_footer(rows))
    return 0


def _print_row(row: NcclRow, tuning: bool) -> None:
    """``row`` as a table row, with NCCL's model of it below where ``tuning`` asks."""
    note = nccl_model_note(row) if tuning else ""
    print(table_row(row) + (f"\n{note}" if note else ""), flush=True)


def rank_gpus(nodes: int, spec: ServerSpec, per_host: int) -> list[str]:
    """GPU node names of the ranks of ``nodes`` servers of ``spec`` where each host runs one
    on its first ``per_host`` GPUs, in host order (hosts as :attr:`ServerSpec.gpus_per_host`
    counts them: a server, or a rack's trays).

    >>> from flowsim.presets import preset_spec
    >>> rank_gpus(2, preset_spec("dgx_h100"), 2)
    ['n0.gpu0', 'n0.gpu1', 'n1.gpu0', 'n1.gpu1']
    """
    host_gpus = spec.gpus_per_host
    return [f"n{server}.gpu{host * host_gpus + device}"
            for server in range(nodes) for host in range(spec.hosts) for device in range(per_host)]


def _erasing(notes: Notes, rows: Iterator[NcclRow]) -> Iterator[NcclRow]:
    """``rows``, each after the note drawn in place is erased, so that a row printed to the
    same terminal starts a clean line; erased too when the sweep stops (an error, Ctrl-C),
    before the command's last word."""
    try:
        for row in rows:
            notes.clear()
            yield row
    finally:
        notes.clear()
