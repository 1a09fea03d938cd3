"""What a parsed nccl-tests run holds: its ranks, the rows of its table, and where each was
read (a line of text output, or a key of the JSON file ``-J`` writes).

:mod:`~flowsim.check.parse` fills these from text output, :mod:`~flowsim.check.nccl_json`
from JSON output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowsim.errors import InputError

__all__ = [
    "Measurement",
    "NcclCall",
    "NcclTestLog",
    "RankInfo",
    "TestRow",
    "line_error",
    "nccl_version_from_code",
    "placed_error",
    "where",
]


def nccl_version_from_code(code: int) -> str:
    """``"2.27.3"`` from NCCL_VERSION_CODE 22703: ``X * 10000 + Y * 100 + Z``, or ``X * 1000 +
    Y * 100 + Z`` up to 2.8 (``NCCL_VERSION`` in [NCCL] src/nccl.h.in)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


@dataclass(frozen=True)
class RankInfo:
    """One rank: rank, host, CUDA device, the line of its ``#  Rank`` line (0 in JSON output
    and for ranks made up from the cluster's shape), the device's PCI bus id as printed
    (``"0000:18:00"``, ``"0x18"``; empty where unknown), and in JSON output the key it was
    read from (``"config.devices[1]"``)."""

    rank: int
    host: str
    device: int
    device_name: str
    line: int
    bus: str = ""
    key: str = ""


@dataclass(frozen=True)
class Measurement:
    """One half of a row (out-of-place or in-place).

    ``wrong`` is the ``#wrong`` column, None where nccl-tests printed ``N/A``. nccl-tests
    before 2.13 printed each half's largest relative error there instead (``error``, as
    ``1e-07``), which ``max_error`` keeps; ``wrong`` is then 1 where that error is beyond the
    bound nccl-tests counted an out-of-bounds value at (``DeltaMaxValue(type) x (ranks - 1)``,
    [NT-PERF] src/common.cu before 2.13: 1e-2 for half and bfloat16, 1e-5 for float, 1e-12
    for double, any for integers), else 0.
    """

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None
    max_error: float | None = None


@dataclass(frozen=True)
class TestRow:
    """One size of an nccl-tests table, with the line it is on (text output) or the key it
    was read from (``"results[3]"``, JSON output; ``line`` 0).

    ``redop`` and ``root`` are None where the table has no such column (older nccl-tests
    print them only for the tests that use them, or not at all); ``root`` is -1 where
    nccl-tests printed it for a test without a root.
    """

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Measurement
    in_place: Measurement
    line: int
    key: str = ""


@dataclass(frozen=True)
class NcclCall:
    """What one of NCCL's TUNING lines says rank 0 ran for a call (``NCCL_DEBUG=INFO
    NCCL_DEBUG_SUBSYS=TUNING``, [NCCL] src/enqueue.cc).

    ``function`` is NCCL's name (``AllReduce``; empty where the line has none, before
    v2.23.4-1), ``algorithm`` and ``protocol`` as printed (``RING`` and ``LL128`` from
    v2.26.2-1, NCCL's numbers before: ``1`` and ``1``), ``channels`` the call's (None where
    not printed). ``per_rank``: ``n_bytes`` is the call's count times its type's size (from
    v2.26.2-1: a rank's part for all-gather and reduce-scatter), else the bytes it moves in all.
    """

    function: str
    n_bytes: int
    algorithm: str
    protocol: str
    channels: int | None
    per_rank: bool


@dataclass(frozen=True)
class NcclTestLog:
    """A parsed nccl-tests run.

    Attributes
    ----------
    source : str
        File path, or ``"<text>"``.
    collective : str
        flowsim collective name (a value of :data:`flowsim.check.parse.BINARIES`).
    binary : str
        nccl-tests binary (a key of :data:`flowsim.check.parse.BINARIES`, without a build
        suffix such as ``_mpi``).
    version : str or None
        ``# nccl-tests version`` when printed (JSON output does not say).
    n_threads, n_gpus : int or None
        ``-t`` and ``-g`` of the run (GPUs per thread); None without a ``# nThread`` line.
    agg_iters, cuda_graph : int or None
        ``-m`` (collectives per iteration) and ``-G`` (CUDA graph launches, 0 when off) as the
        ``# nThread`` line (or JSON's ``config``) gives them; None where it does not (older
        nccl-tests, no line).
    ranks : tuple of RankInfo
        In rank order: from the rank lines (JSON's ``config.devices``), else made up from the cluster's shape (hosts
        ``node0``, ``node1``, ..., ranks filling each host's devices in turn, ``line`` 0 and
        no device name); ``ranks_from`` says which.
    rows : tuple of TestRow
    avg_busbw_GBps : float or None
        The closing ``# Avg bus bandwidth`` figure (JSON's ``average_bus_bandwidth``); None
        when the output lacks it (pasted in part, a run cut short; ``warnings`` says so).
    nccl_version : str or None
        NCCL's ``NCCL version`` line when printed (``2.26.2+cuda12.8``, alone or in an INFO
        line), else the library version nccl-tests prints as ``nccl-library=22703`` or JSON's
        ``nccl_version`` holds (``2.27.3``).
    ranks_from : {"rank lines", "arguments", "NCCL INFO comm lines", "busbw ratio", ...}
        Where the ranks and hosts come from.
    warnings : tuple of str
        One line each: what the output lacks, or where it disagrees with the arguments.
    nccl_env : tuple of (str, str)
        The ``NCCL_*`` variables NCCL's INFO lines say the environment set (``NCCL INFO
        NCCL_ALGO set by environment to Ring``, with ``NCCL_DEBUG=INFO``), or JSON's ``env``
        list holds, in order.
    nccl_channels : tuple of (int, int)
        Each distinct (coll, nvls) channel count NCCL's INFO lines print for a communicator
        (``NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, ...``), sorted;
        empty without them.
    net_sends : tuple of (str, int, int)
        Per network NCCL's INFO lines name (``IB``, ``Socket``, ``AWS Libfabric``), the
        connections they list with and without GPUDirect RDMA (``[send] via NET/IB/0/GDRDMA``
        and ``[send] via NET/IB/0``), in order of first appearance.
    nccl_calls : tuple of NcclCall
        What NCCL's TUNING lines say it ran, in order.
    local_links : tuple of (str, int)
        Per transport NCCL's INFO lines name for connections inside a server (``P2P``: peer
        to peer over NVLink or PCIe, ``Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read``;
        ``SHM``: through host memory, ``via SHM/direct/direct``), how many they list, in
        order of first appearance.
    net_devices : tuple of int
        The distinct counts of network devices NCCL's INFO lines say a rank's IB transport
        uses (``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ...``, after ``NCCL_IB_HCA``),
        sorted; empty without them.
    platform : str or None
        The AWS instance type the aws-ofi-nccl plugin's INFO line names (``NET/OFI Running on
        p5.48xlarge platform``; ``P4d`` in older plugins), the first such; None without one.
    run : (int, int)
        The run's place among its source's runs, and their count (``(2, 3)``: the second of
        three, those that could not be read counted too); ``(1, 1)`` for a source of one run.
    started : str or None
        When the run ran, as far as its text says: the time stamp of its first line that
        carries one with a date (``[2024-07-18 15:41:05]``, ``kubectl logs --timestamps``'
        ``2024-07-18T15:41:05.123Z``, ``mpirun --timestamp-output``'s ``Thu Jul 18 15:41:05
        2024``), ISO 8601, UTC where the stamp names no zone; None where no line carries one.
    sha256 : str
        SHA-256 (hex) of the run's text as read: its part of a file of several runs, after as
        many empty lines as its place in the file (so that two equal runs of one file differ);
        the whole file for JSON. A history tells the same run appended twice by it.
    command_env : tuple of (str, str)
        The ``NCCL_*`` variables a command line before the run's table sets (a line that
        starts with ``mpirun``, ``srun``, ``export``, ``env``, a binary or ``NCCL_X=``, behind
        a prompt or not: ``mpirun -x NCCL_ALGO=Ring``, ``export NCCL_PROTO=Simple``,
        ``NCCL_ALGO=Tree ./build/...``), the last setting of each, in order.
    networks : tuple of str
        The networks NCCL's INFO lines say it uses between servers (``NCCL INFO Using network
        IB``: ``"IB"``, ``"Socket"``, ``"AWS Libfabric"``), in the order first named.
    blocking : bool
        Whether nccl-tests ran blocking (``-z``: its ``# Blocking Enabled`` line, JSON's
        ``config.blocking_collectives``): each call waited for the one before to end.
    iters : int or None
        ``-n``, the iterations nccl-tests timed back to back, as the ``# nThread`` line
        (``iters: 20``, after the warm-up's) or JSON's ``config.iterations`` gives it; None
        where neither does.
    """

    source: str
    collective: str
    binary: str
    version: str | None
    n_threads: int | None
    n_gpus: int | None
    ranks: tuple[RankInfo, ...]
    rows: tuple[TestRow, ...]
    avg_busbw_GBps: float | None
    nccl_version: str | None = None
    ranks_from: str = "rank lines"
    warnings: tuple[str, ...] = ()
    agg_iters: int | None = None
    cuda_graph: int | None = None
    nccl_env: tuple[tuple[str, str], ...] = ()
    nccl_channels: tuple[tuple[int, int], ...] = ()
    net_sends: tuple[tuple[str, int, int], ...] = ()
    nccl_calls: tuple[NcclCall, ...] = ()
    local_links: tuple[tuple[str, int], ...] = ()
    net_devices: tuple[int, ...] = ()
    platform: str | None = None
    run: tuple[int, int] = (1, 1)
    # Of the text rather than the run: the same run pasted otherwise (tabs, a launcher's
    # prefixes, time stamps) parses equal.
    started: str | None = field(default=None, compare=False)
    sha256: str = field(default="", compare=False)
    iters: int | None = None
    networks: tuple[str, ...] = ()
    command_env: tuple[tuple[str, str], ...] = ()
    blocking: bool = False

    @property
    def named(self) -> str:
        """The source, and the run where it holds several (``"logs.txt, run 2 of 3"``): what
        tells a run's messages from its neighbours'."""
        k, n = self.run
        return self.source if n == 1 else f"{self.source}, run {k} of {n}"

    @property
    def n_ranks(self) -> int:
        """Ranks listed in the rank lines."""
        return len(self.ranks)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names in order of first appearance in the rank lines."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def n_nodes(self) -> int:
        """Distinct hosts in the rank lines."""
        return len(self.hosts)

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """Device names in the rank lines (``NVIDIA H100 80GB HBM3``), in order of first
        appearance; empty without rank lines."""
        return tuple(dict.fromkeys(r.device_name for r in self.ranks if r.device_name))


def line_error(source: str, line: int, message: str) -> InputError:
    return InputError(f"{source}, line {line}: {message}")


def where(line: int, key: str = "") -> str:
    """Where a rank or row was read: ``"line 12"`` in text output, its key
    (``"config.devices[1]"``) in JSON output, empty where neither is known (ranks made up
    from the cluster's shape have line 0)."""
    return key or (f"line {line}" if line > 0 else "")


def placed_error(source: str, item: RankInfo | TestRow, message: str) -> InputError:
    """An error naming the source and where in it ``item`` was read (:func:`where`)."""
    at = where(item.line, item.key)
    return InputError(f"{source}, {at}: {message}" if at else f"{source}: {message}")
