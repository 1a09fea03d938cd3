"""nccl-tests-style reporting: algbw, busbw and a sweep over message sizes.

Definitions from nccl-tests ``doc/PERFORMANCE.md`` ([NT-PERF], docs/hardware.md §6.1, docs/model.md
"Collectives"): for a collective of ``S`` bytes taking ``t``, ``algbw = S / t`` and
``busbw = algbw x factor``, with factor ``2(n - 1)/n`` for all-reduce, ``(n - 1)/n`` for
all-gather, reduce-scatter and all-to-all, and 1 for broadcast, reduce and send. ``S`` is the
per-rank buffer for all-reduce, broadcast, reduce and send, and the total over ranks for
all-gather, reduce-scatter and all-to-all. Sizes are written as nccl-tests takes them
(``-b 8 -e 8G -f 2``, K/M/G/T = powers of 1024) and rounded down, as nccl-tests does, to
whole elements (and, for the split collectives, to ``n`` equal parts).

A row's time is also at least what the host needs to launch it (:func:`launch_floor_us`):
nccl-tests issues its iterations back to back, one kernel launch per GPU a thread drives
(``-g``), so a thread driving several GPUs paces small messages (docs/hardware.md §6.2).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from flowsim.collectives.builders import COLLECTIVES, all_to_all_v_bytes
from flowsim.collectives.constants import DEFAULT_NCCL_VERSION, NCCL_ALGORITHMS, NCCL_PROTOCOLS, nccl_release
from flowsim.collectives.placement import alltoallv_spread, collective_time
from flowsim.collectives.tuner import DTYPE_BYTES, NCCL_COLLECTIVES, NcclChoice, check_reduction
from flowsim.errors import InputError, whole_number
from flowsim.routing import Router
from flowsim.stepreport import busiest_link
from flowsim.topology import Topology

__all__ = [
    "DTYPE_BYTES",
    "HOST_LAUNCH_US_PER_GPU",
    "NCCL_TESTS_ITERS",
    "ROOTED",
    "SPLIT",
    "SUM_SHOWN",
    "NcclRow",
    "algbw_Bps",
    "algbw_factor",
    "bus_factor",
    "busbw_Bps",
    "empty_call_runs",
    "format_table",
    "iter_sweep",
    "launch_floor_us",
    "message_sizes",
    "model_note",
    "nccl_model_note",
    "parse_size",
    "rows_to_json",
    "sweep",
    "table_footer",
    "table_header",
    "table_row",
]

#: Host time (us) a thread spends per GPU it drives to launch one iteration's collective:
#: the slope of a one-thread ``all_reduce_perf -g N`` on a DGX A100, (33.7 - 16.88) / 4 us
#: from N = 4 to 8 (NVIDIA/nccl-tests#123; docs/hardware.md §6.2).
HOST_LAUNCH_US_PER_GPU = 4.2

#: Iterations nccl-tests times back to back by default (``-n``; ``int iters = 20;`` in
#: [NT-PERF] src/common.cu).
NCCL_TESTS_ITERS = 20

#: Collectives whose S is split into n equal parts, one per rank (nccl-tests' count is a part's).
SPLIT = frozenset({"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter", "hypercube", "all_to_all_v"})
#: Collectives whose rows show the redop (sendrecv_perf prints it too, reducing nothing).
SUM_SHOWN = frozenset({"all_reduce", "reduce_scatter", "reduce", "send"})
#: Collectives with a root (nccl-tests prints it; the others print -1).
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
# Column widths of the table (the first one after nccl-tests' leading "#"), the busiest link's last.
_WIDTHS = (11, 12, 8, 6, 5, 9, 6, 4, 10, 8, 8, 16)
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def bus_factor(collective: str, n_ranks: int) -> float:
    """busbw / algbw of ``collective`` on ``n_ranks`` ranks, both as nccl-tests prints them
    (its ``*GetBw``).

    >>> bus_factor("all_reduce", 8)
    1.75
    """
    if collective not in COLLECTIVES:
        raise InputError(f"unknown collective {collective!r}; valid ones: {', '.join(COLLECTIVES)}")
    n_ranks = whole_number("n_ranks", n_ranks)
    if collective == "all_reduce":
        return 2 * (n_ranks - 1) / n_ranks
    if collective in SPLIT and collective != "hypercube":
        return (n_ranks - 1) / n_ranks
    return 1.0


def algbw_factor(collective: str, n_ranks: int) -> float:
    """The algbw nccl-tests prints over ``S / t``: ``(n - 1) / n`` for ``hypercube_perf``,
    which counts the bytes a rank receives (``count x (nranks - 1)``, src/hypercube.cu), 1
    for the others."""
    if collective == "hypercube":
        n_ranks = whole_number("n_ranks", n_ranks)
        return (n_ranks - 1) / n_ranks
    return 1.0


def algbw_Bps(size_bytes: float, time_s: float) -> float:
    """``S / t`` (B/s); 0 for ``S = 0``."""
    if not time_s > 0:
        if size_bytes == 0:
            return 0.0
        raise InputError(f"time_s must be > 0 for a non-empty collective, got {time_s!r}")
    return size_bytes / time_s


def busbw_Bps(collective: str, size_bytes: float, time_s: float, n_ranks: int) -> float:
    """nccl-tests' busbw (B/s): ``S / t x algbw_factor x bus_factor``."""
    return algbw_Bps(size_bytes, time_s) * algbw_factor(collective, n_ranks) * bus_factor(collective, n_ranks)


def parse_size(text: str | int) -> int:
    """Bytes of an nccl-tests size: an integer with an optional K, M, G or T (powers of 1024).

    >>> parse_size("8G"), parse_size("512K"), parse_size(8)
    (8589934592, 524288, 8)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)B?\s*", str(text), flags=re.IGNORECASE)
        if match is None:
            raise InputError(f"size {text!r} is not an integer with an optional K, M, G or T suffix")
        value = int(match.group(1)) * _SUFFIX[match.group(2).upper()]
    if value < 0:
        raise InputError(f"size {text!r} is negative")
    return value


#: nccl-tests' increment between sizes where no factor above 1 is given (its ``-i``).
STEP_BYTES = 1 << 20
#: The most sizes a sweep takes: a fixed increment of a few bytes up to gigabytes (``-i 1``)
#: would list billions, each one simulation.
MAX_SIZES = 100_000


def message_sizes(begin: str | int, end: str | int, factor: int = 2, step: str | int = STEP_BYTES) -> list[int]:
    """nccl-tests' ``-b begin -e end -f factor -i step``: ``begin, begin x factor, ...`` up to
    ``end``, or with a factor of 1 ``begin, begin + step, ...`` (src/common.cu: the factor
    where it is above 1, else the increment).

    >>> message_sizes("1K", "8K")
    [1024, 2048, 4096, 8192]
    >>> message_sizes("1M", "4M", 1, "1M")
    [1048576, 2097152, 3145728, 4194304]
    """
    lo, hi = parse_size(begin), parse_size(end)
    factor = whole_number("factor", factor, minimum=1)
    increment = parse_size(step)
    if lo < 1 or hi < lo:
        raise InputError(f"sizes must satisfy 1 <= begin <= end, got begin {lo} and end {hi}")
    if factor == 1 and increment < 1:
        raise InputError(f"with a factor of 1 the sizes grow by the increment, which must be at least 1, "
                         f"got {increment}")
    if factor == 1 and (hi - lo) // increment >= MAX_SIZES:
        raise InputError(f"sizes {lo} to {hi} by {increment} bytes are {(hi - lo) // increment + 1:,} sizes, over "
                         f"{MAX_SIZES:,}: give a larger increment (-i) or a factor (-f 2)")
    sizes = [lo]
    while (sizes[-1] * factor if factor > 1 else sizes[-1] + increment) <= hi:
        sizes.append(sizes[-1] * factor if factor > 1 else sizes[-1] + increment)
    return sizes


def launch_floor_us(gpus_per_thread: int = 1, *, agg_iters: int = 1, cuda_graph: int = 0) -> float:
    """The least time (us) of one nccl-tests iteration that the host sets: a thread launches
    one kernel per GPU it drives (``-g``), iterations back to back (docs/hardware.md §6.2).

    0 where the launches are not one per collective: with CUDA graphs (``-G``, ``cuda_graph
    > 0``) or several collectives per iteration (``-m``, ``agg_iters > 1``), which NCCL may
    merge into fewer launches.

    >>> launch_floor_us(8)   # 8 x 4.2 us
    33.6
    """
    gpus_per_thread = whole_number("gpus_per_thread", gpus_per_thread, minimum=1)
    agg_iters = whole_number("agg_iters", agg_iters, minimum=1)
    cuda_graph = whole_number("cuda_graph", cuda_graph, minimum=0)
    if cuda_graph > 0 or agg_iters > 1:
        return 0.0
    return round(gpus_per_thread * HOST_LAUNCH_US_PER_GPU, 9)


@dataclass(frozen=True)
class NcclRow:
    """One row of an nccl-tests table.

    ``size_bytes`` is ``S`` after rounding; ``count`` the elements of one rank's part of it
    where the collective splits ``S`` over the ranks, else of ``S``; ``time_us`` the simulated
    time; ``algbw_GBps`` and ``busbw_GBps`` in GB/s (1e9 B/s), as nccl-tests prints them;
    ``algorithm``, ``protocol`` and ``channels`` what ran (as NCCL's
    ``NCCL_DEBUG_SUBSYS=TUNING`` lines say it; ``protocol`` is ``"custom"`` with explicit
    costs, ``channels`` a send's point-to-point channels, an all-to-all's per peer); ``model``
    how rings were laid out (``"steps"`` or ``"stream"``, see :mod:`flowsim.collectives`);
    ``latency_us`` the part of
    the time that does not grow with the size (:attr:`CollectiveRun.latency_s`);
    ``launch_bound`` whether the host's launch floor (:func:`launch_floor_us`) set the time
    rather than the simulated collective (then ``latency_us`` is the whole time); ``flows``
    the flows laid out and ``flow_classes`` how many the engine solved
    (:attr:`CollectiveRun.flow_classes`); ``busiest_link``, ``busiest_tier`` and
    ``busiest_utilization`` the link (or NVLS budget) busiest over the row's time, what it
    is and how busy (:func:`flowsim.stepreport.busiest_link`; ``""`` and 0 where no link
    carried a byte): near 1 where that link bounds the call, well below where latency does;
    ``nccl_model_us`` NCCL's predicted time (us) of every algorithm and protocol its tuner
    weighed for the size (``"ring/ll"``: ..., flowsim's names, in NCCL's order), the least of
    which it ran (:attr:`~flowsim.collectives.tuner.NcclChoice.table`); empty where NCCL's
    tuner did not choose (all-to-all, send, explicit costs).
    """

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str
    channels: int
    model: str
    latency_us: float = 0.0
    launch_bound: bool = False
    flows: int = 0
    flow_classes: int = 0
    busiest_link: str = ""
    busiest_tier: str = ""
    busiest_utilization: float = 0.0
    nccl_model_us: dict[str, float] = field(default_factory=dict)


def empty_call_runs(collective: str, nccl_version: str = DEFAULT_NCCL_VERSION) -> bool:
    """Whether an nccl-tests row of 0 bytes still runs an NCCL call, and so takes its latency.

    nccl-tests' gather and scatter return before calling NCCL (``if (count == 0) return
    testSuccess;``, src/gather.cu, src/scatter.cu), and its alltoallv sends nothing (``if
    (send_count > 0)``, src/alltoallv.cu). NCCL discards an empty collective from
    2.22.3 on ([NCCL] v2.22.3-1 src/enqueue.cc ``if (info->count == 0) return ncclSuccess;``);
    an all-to-all is one from 2.28 (``ncclAlltoAll``; nccl-tests groups sends and receives
    before). A send of 0 bytes still runs: its proxy takes one step of 0 bytes (v2.30.7-1
    src/enqueue.cc), so sendrecv, hypercube and an older all-to-all do.
    """
    if collective in ("gather", "scatter", "all_to_all_v"):
        return False
    if collective in ("send", "hypercube"):
        return True
    release = nccl_release(nccl_version) or nccl_release(DEFAULT_NCCL_VERSION)
    assert release is not None
    return release < ((2, 28, 0) if collective == "all_to_all" else (2, 22, 3))


def _rounded(collective: str, size_bytes: int, element_bytes: int, n_ranks: int, aligned: bool) -> tuple[int, int]:
    """(S, count) as nccl-tests prints them: S rounded down to whole elements, split in ``n``
    equal parts where the collective splits it, each part trimmed to a multiple of 16 bytes
    where ``aligned`` (nccl-tests 2.13.12 and later, "so that ... non-pow2 ranks have buffer
    addresses aligned": ``(count/nranks) & ~(16/eltSize - 1)`` in each ``*GetCollByteCount``),
    and the count of elements of one part (each rank's chunk, or each peer's for all-to-all:
    nccl-tests prints its ``paramcount``)."""
    elements = size_bytes // element_bytes
    if collective not in SPLIT:
        return elements * element_bytes, elements
    part = elements // n_ranks
    if aligned:
        part &= ~(16 // element_bytes - 1)
    return part * n_ranks * element_bytes, part


def sweep(
    topology: Topology,
    collective: str,
    sizes_bytes: Sequence[int],
    *,
    dtype: str = "float",
    redop: str = "sum",
    ranks: Sequence[str] | None = None,
    gpus_per_thread: int = 1,
    agg_iters: int = 1,
    cuda_graph: int = 0,
    iters: int = NCCL_TESTS_ITERS,
    blocking: bool = False,
    aligned: bool = True,
    **options,
) -> list[NcclRow]:
    """Simulate ``collective`` at each size, as an nccl-tests run does.

    Parameters
    ----------
    topology : Topology
    collective : str
        One of :data:`flowsim.collectives.COLLECTIVES`.
    sizes_bytes : sequence of int
        ``S`` per row, e.g. from :func:`message_sizes`; each is rounded down to whole
        elements of ``dtype`` (and, for a collective that splits ``S`` over the ranks, to
        equal parts of whole elements, each a multiple of 16 bytes where ``aligned``).
    dtype : str
        A key of :data:`DTYPE_BYTES`.
    redop : str
        nccl-tests' reduction (``-o``; :data:`flowsim.collectives.tuner.REDOPS`), shown in
        the rows of the collectives that print one. With ``dtype`` it decides whether NCCL
        may take NVLS, NVLSTree or PAT (:func:`flowsim.collectives.tuner.nvls_refusal`).
    ranks : sequence of str, optional
        GPU node names; default every GPU (see :func:`flowsim.collectives.collective_time`).
    gpus_per_thread, agg_iters, cuda_graph : int
        nccl-tests' ``-g``, ``-m`` and ``-G``: how the host launches each iteration, which
        sets a least time per row (:func:`launch_floor_us`; default: one GPU per thread).
        An iteration's ``agg_iters`` calls are one NCCL group, which NCCL merges into one
        task of their bytes and chooses for (``src/enqueue.cc`` ``ncclPrepareTasks``): a row
        is a call of ``agg_iters x S`` over ``agg_iters``.
    iters : int
        nccl-tests' ``-n``, the iterations it times back to back (default 20, its own): with
        ``cuda_graph`` the calls whose mean a row's time is, where calls overlap (a
        broadcast's or reduce's chain, :mod:`flowsim.collectives.calls`).
    blocking : bool
        nccl-tests' ``-z``: each call waits for the one before it to end on every GPU (the
        stream synchronised), so calls do not overlap.
    aligned : bool
        Trim each rank's part to 16 bytes as nccl-tests 2.13.12 and later do (default);
        False keeps the sizes of a log an older nccl-tests printed, whose parts are not.
    **options
        Passed to :func:`flowsim.collectives.collective_time` (``algorithm``, ``protocol``,
        ``channels``, ``slices``, ``costs``, ``model``, ``nccl_env``, ``nccl_version``,
        ``routing``, ``seed``, ``gpudirect``, ``progress``).

    Returns
    -------
    list of NcclRow
    """
    return list(iter_sweep(topology, collective, sizes_bytes, dtype=dtype, redop=redop, ranks=ranks,
                           gpus_per_thread=gpus_per_thread, agg_iters=agg_iters, cuda_graph=cuda_graph,
                           iters=iters, blocking=blocking, aligned=aligned, **options))


def iter_sweep(
    topology: Topology,
    collective: str,
    sizes_bytes: Sequence[int],
    *,
    dtype: str = "float",
    redop: str = "sum",
    ranks: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    gpus_per_thread: int = 1,
    agg_iters: int = 1,
    cuda_graph: int = 0,
    iters: int = NCCL_TESTS_ITERS,
    blocking: bool = False,
    aligned: bool = True,
    **options,
) -> Iterator[NcclRow]:
    """:func:`sweep` one row at a time, each as soon as its size has run.

    The data type, the collective and every size are checked before this returns; the
    rest of the input when the first size runs. ``progress``, if given, is called with a
    short note before each size's stages (see :func:`flowsim.collectives.collective_time`),
    prefixed with the size and its place in the sweep.
    """
    check_reduction(dtype, redop)
    if collective not in COLLECTIVES:
        raise InputError(f"unknown collective {collective!r}; valid ones: {', '.join(COLLECTIVES)}")
    router = options.pop("router", None) or Router(topology)
    if ranks is None:
        n_ranks = 2 if collective == "send" else len(topology.gpus())
    else:
        n_ranks = len(ranks)
    sizes = [_rounded(collective, parse_size(requested), DTYPE_BYTES[dtype], n_ranks, aligned)
             for requested in sizes_bytes]
    floor_us = launch_floor_us(gpus_per_thread, agg_iters=agg_iters, cuda_graph=cuda_graph)
    # The agg_iters calls of an iteration are one NCCL group of one size, whose collectives
    # NCCL merges into one task of their bytes before it chooses ("We aggregate operations
    # that are within 4X size of each other", [NCCL] src/enqueue.cc ncclPrepareTasks, every
    # version flowsim has): an iteration is one call of agg_iters x S, chosen for that size.
    # Point-to-point calls (sends, all-to-alls, gathers, scatters, hypercube's rounds) are no
    # such tasks: they stay agg_iters calls. Every call runs back to back, each CUDA graph
    # launch again; blocking, each after the one before has ended (startColl synchronises).
    merged = agg_iters if collective in NCCL_COLLECTIVES else 1
    calls = whole_number("iters", iters, minimum=1) * max(cuda_graph, 1) * (agg_iters // merged)
    if blocking:
        calls = 1
    return _rows(topology, collective, sizes, dtype, redop, ranks, n_ranks, router, progress, floor_us,
                 {**options, "calls": calls}, merged)


def _rows(
    topology: Topology,
    collective: str,
    sizes: Sequence[tuple[int, int]],
    dtype: str,
    redop: str,
    ranks: Sequence[str] | None,
    n_ranks: int,
    router: Router,
    progress: Callable[[str], None] | None,
    floor_us: float,
    options: dict,
    agg_iters: int = 1,
) -> Iterator[NcclRow]:
    spread = alltoallv_spread(topology, options.get("nccl_env")) if collective == "all_to_all_v" else None
    for i, (size, count) in enumerate(sizes):
        note = None if progress is None else _prefixed(progress, f"{size:,} B ({i + 1}/{len(sizes)})")
        # An iteration's agg_iters calls run as one of their bytes (iter_sweep); a row is one call's mean.
        outcome = collective_time(topology, collective, size * agg_iters, ranks=ranks, router=router, progress=note,
                                  dtype=dtype, redop=redop, **options)
        time_s, latency_s = outcome.time_s / agg_iters, outcome.latency_s / agg_iters
        if spread is not None:
            # alltoallv_perf prints what a rank sends, its parts each trimmed to 16 bytes
            # (nccl-tests src/alltoallv.cu: max(sendBytes, recvBytes)), and counts its bandwidth on it.
            size = int(all_to_all_v_bytes(n_ranks, size, spread)[0].sum())
        runs = size > 0 or empty_call_runs(collective, options.get("nccl_version", DEFAULT_NCCL_VERSION))
        if not runs:
            # Nothing runs (nccl-tests' own timing, 0.24-1.65 us in the repository's logs, is not modelled).
            time_s = latency_s = 0.0
        launch_bound = runs and floor_us * 1e-6 > time_s
        if launch_bound:
            time_s = latency_s = floor_us * 1e-6
        run = outcome.run
        # Over a call's mean time, what one call moves (of the calls the run holds).
        busiest = busiest_link(run.topology, run.workload, run.result, time_s * agg_iters * outcome.calls_run) \
            if time_s > 0 else None
        row = NcclRow(
            size_bytes=size,
            count=count,
            dtype=dtype,
            redop=redop if collective in SUM_SHOWN else "none",
            root=(options.get("root") or 0) if collective in ROOTED else -1,
            time_us=time_s * 1e6,
            algbw_GBps=algbw_Bps(size, time_s) * algbw_factor(collective, n_ranks) / 1e9,
            busbw_GBps=busbw_Bps(collective, size, time_s, n_ranks) / 1e9,
            algorithm=outcome.algorithm,
            protocol=outcome.protocol,
            channels=outcome.channels,
            model=outcome.model,
            latency_us=latency_s * 1e6,
            launch_bound=launch_bound,
            flows=outcome.flows,
            flow_classes=outcome.flow_classes,
            busiest_link="" if busiest is None else busiest.name,
            busiest_tier="" if busiest is None else busiest.tier,
            busiest_utilization=0.0 if busiest is None else busiest.utilization,
            nccl_model_us=_model_times(outcome.nccl),
        )
        # The run (its flows, routes and results) goes before the next size is built, not
        # after: held while the next one runs, two sizes' flows would be in memory at once.
        del outcome, run
        yield row


def _model_times(choice: NcclChoice | None) -> dict[str, float]:
    """NCCL's predicted time (us) per algorithm and protocol it weighed, ``"ring/ll"``: ...,
    in NCCL's order; empty without a choice."""
    if choice is None:
        return {}
    pairs = sorted(choice.table, key=lambda pair: (NCCL_ALGORITHMS.index(pair[0]), NCCL_PROTOCOLS.index(pair[1])))
    return {f"{a}/{p}": choice.table[(a, p)] for a, p in pairs}


def nccl_model_note(row: NcclRow) -> str:
    """A comment line with ``row``'s :attr:`NcclRow.nccl_model_us`, as NCCL's tuner weighed
    them (``""`` where it did not choose): what ``flowsim collective --tuning`` prints under
    each row.

    >>> row = NcclRow(1024, 256, "float", "sum", -1, 9.5, 0.1, 0.19, "ring", "ll", 1, "steps",
    ...               nccl_model_us={"tree/ll": 12.0, "ring/ll": 9.25})
    >>> nccl_model_note(row)
    '#   NCCL model (us): tree/ll 12.00, ring/ll 9.25 (ran)'
    """
    return model_note(row.nccl_model_us, f"{row.algorithm}/{row.protocol}")


def model_note(model_us: Mapping[str, float], ran: str) -> str:
    """:func:`nccl_model_note`'s line for NCCL's predicted times ``model_us`` (``"algo/proto"``
    to us, in NCCL's order), ``ran`` marked; ``""`` for none. NVLS across servers, which
    flowsim lays out as ``nvls_sharp``, is NCCL's ``nvls``.

    >>> model_note({"tree/ll": 25.26, "ring/ll": 30.1}, "tree/ll")
    '#   NCCL model (us): tree/ll 25.26 (ran), ring/ll 30.10'
    >>> model_note({"collnet_direct/simple": 50.43, "nvls/simple": 48.12}, "nvls_sharp/simple")
    '#   NCCL model (us): collnet_direct/simple 50.43, nvls/simple 48.12 (ran)'
    """
    if not model_us:
        return ""
    if ran.startswith("nvls_sharp/"):
        ran = "nvls/" + ran.removeprefix("nvls_sharp/")
    parts = [f"{name} {t:.2f}{' (ran)' if name == ran else ''}" for name, t in model_us.items()]
    return "#   NCCL model (us): " + ", ".join(parts)


def _prefixed(progress: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda message: progress(f"{prefix}: {message}")


def format_table(rows: Sequence[NcclRow], title: str = "") -> str:
    """Rows as nccl-tests prints them (size, count, type, redop, root, time, algbw, busbw),
    with what ran (algorithm, protocol, channels) before the time and the busiest link's
    kind and utilization after the busbw, ``title`` as a comment line above and the average
    busbw below: :func:`table_header`, :func:`table_row` for each row, then
    :func:`table_footer`."""
    lines = [table_header(title), *(table_row(r) for r in rows)]
    if rows:
        lines.append(table_footer(rows))
    return "\n".join(lines)


def table_header(title: str = "") -> str:
    """The lines of :func:`format_table` above its rows: ``title`` as a comment, the column
    names and units."""
    lines = [f"# {title}"] if title else []
    for names in (
        ("size", "count", "type", "redop", "root", "algo", "proto", "nch", "time", "algbw", "busbw", "busiest link"),
        ("(B)", "(elements)", "", "", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "(use)"),
    ):
        lines.append("#" + " ".join(f"{name:>{width}}" for name, width in zip(names, _WIDTHS, strict=True)).rstrip())
    return "\n".join(lines)


def table_row(r: NcclRow) -> str:
    """One row of :func:`format_table`."""
    values = (r.size_bytes, r.count, r.dtype, r.redop, r.root, r.algorithm, r.protocol, r.channels)
    numbers = (r.time_us, r.algbw_GBps, r.busbw_GBps)
    busiest = f"{r.busiest_tier} {math.floor(100 * r.busiest_utilization)}%" if r.busiest_tier else "-"
    return (
        " ".join(f"{v:>{w}}" for v, w in zip(values, (12, *_WIDTHS[1:8]), strict=True))
        + " "
        + " ".join(f"{v:>{w}.2f}" for v, w in zip(numbers, _WIDTHS[8:11], strict=True))
        + f" {busiest:>{_WIDTHS[11]}}"
    )


def table_footer(rows: Sequence[NcclRow]) -> str:
    """The line of :func:`format_table` below its rows: the average busbw (rows non-empty)."""
    average = sum(r.busbw_GBps for r in rows) / len(rows)
    return f"# Avg bus bandwidth    : {average:.4g}"


def solved_note(rows: Sequence[NcclRow]) -> str:
    """A line saying what the engine solved over the sweep: at how many sizes the flow
    classes (and how many at the largest of them), at how many the full DAG."""
    by_classes = [r for r in rows if 0 < r.flow_classes < r.flows]
    full = len(rows) - len(by_classes)
    parts = []
    if by_classes:
        r = by_classes[-1]
        parts.append(
            f"flow classes at {len(by_classes)} of {len(rows)} sizes ({r.flow_classes:,} of {r.flows:,} flows at "
            f"{r.size_bytes} B)"
        )
    if full:
        parts.append(f"the full DAG at {full} of {len(rows)} sizes")
    return f"{'# Solved over':<23}: " + "; ".join(parts)


def rows_to_json(rows: Sequence[NcclRow], **metadata) -> str:
    """``{**metadata, "rows": [...]}`` as JSON text, one object per row."""
    return json.dumps({**metadata, "rows": [asdict(r) for r in rows]}, indent=2)
