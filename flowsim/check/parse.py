"""nccl-tests output parsed: the run's ranks and hosts, and every row of its table.

The format read is the one nccl-tests prints (``src/common.cu`` and ``src/util.cu`` of
NVIDIA/nccl-tests): optional ``# nccl-tests version`` and ``# Collective test starting:
NAME`` lines (NAME may carry the binary's build suffix, ``all_reduce_perf_mpi``), the
``# nThread ... nGpus ...`` line, ``# Using devices`` and one
``#  Rank R [Group G] Pid P on HOST device D [BUS] NAME`` line per rank, ``NCCL version V``,
the column titles
(``out-of-place ... in-place``) and the header naming the columns, then one row per size::

    size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong

(out-of-place, then in-place; ``#wrong`` is ``N/A`` without validation; a time, bandwidth
or ``#wrong`` that is not a finite, non-negative number is an error, as nccl-tests prints
none for a size it completed), and the closing ``# Avg bus bandwidth : X`` line. Each
column is read where the header names it: older versions lack ``redop`` or ``root`` and
title ``#wrong`` ``error`` (printed as ``0e+00``), ``-C 1`` titles ``time`` ``cputime``,
per-iteration statistics add columns after each ``#wrong``, and columns after the in-place
``#wrong`` (timestamps) are skipped. Lines of other programs (``NCCL INFO``, ``mpirun``)
may be interleaved; the prefixes launchers put on every line are removed
(``[1,0]<stdout>:`` of ``mpirun --tag-output``, ``[0]`` of MPICH's ``-prepend-rank``, which
it writes inside rows too, ``  0:`` of ``srun --label``, ``node7: `` of pdsh, ``(pid=12, ...)`` of Ray, an ISO time
stamp of ``kubectl logs --timestamps``, ``Thu Jul 18 15:41:05 2024<stdout>:`` of ``mpirun
--timestamp-output``, ``[pod/NAME/CONTAINER]`` of ``kubectl logs --prefix``, ``NAME  |`` of
Docker Compose, nested ones too, and behind a Markdown quote marker
``>`` or a list's indentation), as is a UTF-8 byte-order mark. rccl-tests output (AMD's fork,
for RCCL) is refused with one line.

Output as people paste it is read too: comment lines whose ``#`` a Markdown renderer ate
(``nThread 1 nGpus 8 ...``, ``Rank 0 Group 0 ...``), no ``# nThread`` line, no rank lines
(then the ranks and hosts come from ``nodes`` and ``gpus_per_node``, or from the busbw / algbw
ratio, which fixes the rank count of all-reduce, all-gather, reduce-scatter and all-to-all,
with the hosts and devices of the rank lines a paste kept where they allow one shape),
and no closing ``# Avg bus bandwidth`` line (a table pasted in part: a warning, not an error).
Rows after that line, and a size a table prints twice, are named in warnings: two processes'
tables interleaved, as nccl-tests built without MPI prints one per process.
A file of several runs is cut into runs at their opening lines (rows pasted without their
header open a table as the header would); where a script named each binary before running it
(``Running: ./build/all_reduce_perf ...``), or a command line stands between two runs
(``./broadcast_perf -b 8 ...``), the lines between them go with the run after them.
Sizes are nccl-tests' ``S``
(the total over ranks for all-gather, reduce-scatter and all-to-all), busbw and algbw are
in GB/s (1e9 B/s), times in microseconds.

The JSON file nccl-tests' ``-J`` option writes is read by :mod:`~flowsim.check.nccl_json`
into the same :class:`~flowsim.check.log.NcclTestLog`.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flowsim.check.log import (
    Measurement,
    NcclCall,
    NcclTestLog,
    RankInfo,
    TestRow,
    line_error,
    nccl_version_from_code,
)
from flowsim.check.nccl_json import JsonRun, is_json_output, read_json_run
from flowsim.collectives.report import DTYPE_BYTES, ROOTED, SPLIT, SUM_SHOWN, bus_factor
from flowsim.errors import InputError, read_output_file, whole_number
from flowsim.formatting import format_runs

__all__ = [
    "BINARIES", "Measurement", "NcclTestLog", "RankInfo", "TestRow", "line_error", "parse_nccl_log", "parse_nccl_logs",
]


#: nccl-tests binary -> flowsim collective.
BINARIES = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "alltoall_perf": "all_to_all",
    "sendrecv_perf": "send",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "gather_perf": "gather",
    "scatter_perf": "scatter",
    "hypercube_perf": "hypercube",
    "alltoallv_perf": "all_to_all_v",
}
_COLLECTIVE_BINARY = {collective: binary for binary, collective in BINARIES.items()}

# What launchers put before every line: Open MPI's "mpirun --tag-output" ("[1,0]<stdout>:",
# and Open MPI 5's PRRTE forms "[1,0][node7:4242]<stdout>:" and "[prterun-node7-4242@1,0]<stdout>:"),
# MPICH's "-prepend-rank" ("[0] "), Slurm's "srun --label" ("  0: ", the task number
# right-aligned), HPE PALS' "mpiexec --label" ("node7.hsn 0: ", a host then the rank), pdsh /
# clush ("node7: ", a host name, or an IPv4 address, then a colon and a space), syslog and
# journald ("Jul 18 15:41:05 node7 slurmd[1234]: ", the time then a host and a program), Ray's
# "(head, rank=0, pid=3808) ", kubectl's "--timestamps" (an ISO 8601 time then a space) and
# Open MPI's "mpirun --timestamp-output" (ctime's "Thu Jul 18 15:41:05 2024" before the
# stream's tag, with or without --tag-output's rank: "Thu Jul 18 15:41:05 2024<stdout>:", as
# NVIDIA/nccl#1368 shows it), kubectl's "--prefix" ("[pod/launcher-x7k2p/launcher] ") and
# Docker Compose's logs (the container's name, padded, then "| ": "nccl-worker-1  | "); the
# times that loggers put first: moreutils' ts ("Dec 06 07:44:54 " by default, "[2024-07-18
# 15:41:05] " as its manual's example formats it, "00:00:05 " with -i or -s), Jenkins'
# timestamper ("[2024-07-18T15:41:05.123Z] ", or the time alone) and Python's logging
# ("2024-07-18 15:41:05,123 ", then its level: "INFO "); and what pasting adds: Markdown's quote marker (">", a
# quoted reply on GitHub) and the indentation of a block inside a list, before any of them.
# The srun label is digits then a colon: a row starts with digits then a space. A host name
# starts with a letter, and NCCL's own "host:pid:tid [d] NCCL INFO" lines have no space after
# the first colon, so neither is taken for a prefix. Spaces may be tabs (a paste that turned
# runs of spaces into tabs).
_TAG_PREFIX = re.compile(
    r"^\s*(?:\[[^\],\s]+,\d+\](?:\[[^\]\s]+\])?<std(?:out|err)>:\s?|\[\d+\]\s|\d+:\s|[A-Za-z][\w.-]*:\s"
    r"|[A-Za-z][\w.-]*\s+\d+:\s|\d{1,3}(?:\.\d{1,3}){3}:\s|[A-Za-z][\w.-]*\s+[\w./-]+\[\d+\]:\s"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)(?::[\w.]+:|\s)|\([^()]*pid=\d+[^()]*\)\s?|>"
    r"|\d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s"
    r"|\[\d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]\s?"
    r"|[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?\s"
    r"|\[\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s?|\d\d:\d\d:\d\d(?:[.,]\d+)?\s"
    r"|[A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4}(?:\[\d+,\d+\])?<std(?:out|err)>:\s?"
    r"|\[pod/[^\]\s]+\]\s|[A-Za-z][\w.-]*\s+\|\s)"
)
# A terminal's colour codes ("\x1b[0;32m"), where a log was saved with them: dropped anywhere.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# MPICH's "-prepend-rank" marker at a line's start, one of _TAG_PREFIX's prefixes.
_RANK_MARKER = re.compile(r"^\s*(\[\d+\])\s")
# nccl-tests' comment lines as a Markdown renderer leaves them, their leading '#' taken for a
# heading: restored before parsing.
_HASHLESS = re.compile(
    r"^(?:nThread\s+\d|Using\s+devices$|Rank\s+\d+\s.*\bon\s|size\s+count\s|\(B\)\s|out-of-place\s"
    r"|Avg\s+bus\s+bandwidth\s*:|Out\s+of\s+bounds\s+values|nccl-tests\s+version\s|Collective\s+test\s+starting:)"
)
# NCCL's own version line: alone (NCCL_DEBUG=VERSION) or in an INFO line ("host:12:34 [0] NCCL
# INFO NCCL version 2.18.3+cuda12.2").
_NCCL_VERSION = re.compile(r"^(?:\S+\s+\[\d+\]\s+NCCL\s+INFO\s+)?NCCL\s+version\s+(\S+)")
# NCCL's INFO line for a variable the environment sets ([NCCL] src/misc/param.cc prints
# integers with a full stop after them, src/graph/tuning.cc NCCL_ALGO and NCCL_PROTO without).
_ENV_SET = re.compile(r"\bNCCL\s+INFO\s+(NCCL_[A-Z0-9_]+)\s+set\s+by\s+environment\s+to\s+(\S+?)\.?$")
# NCCL's INFO line with the communicator's channels once its tuning model is set ([NCCL]
# src/init.cc; "%d collnet channels" from v2.20, absent before).
_CHANNELS = re.compile(
    r"\bNCCL\s+INFO\s+(\d+)\s+coll\s+channels,(?:\s+\d+\s+collnet\s+channels,)?\s+(\d+)\s+nvls\s+channels,"
)
# NCCL's INFO line for each rank's communicator, from v2.21.5-1 with the cluster's shape
# ([NCCL] src/init.cc: "comm 0x5639e9f0e8c0 rank 0 nRanks 24 nNodes 3 localRanks 8 localRank 0").
_COMM_SHAPE = re.compile(
    r"\bNCCL\s+INFO\s+comm\s+\S+\s+rank\s+\d+\s+nRanks\s+(\d+)\s+nNodes\s+(\d+)\s+localRanks\s+(\d+)\b"
)
# NCCL's INFO line for each call's choice with NCCL_DEBUG_SUBSYS=TUNING, rank 0's ([NCCL]
# src/enqueue.cc): from v2.26.2-1 by name, with the call's channels and its count times the
# type's size ("AllGather: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}");
# from v2.20.3-1 by number, with the model's time ("[AllReduce: ]262144 Bytes -> Algo 0 proto 1
# time 54.707825"), the bytes the call moves in all.
_TUNING_NAMED = re.compile(
    r"\bNCCL\s+INFO\s+(\w+):\s+(\d+)\s+Bytes\s+->\s+Algo\s+(\w+)\s+proto\s+(\w+)\s+channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)
_TUNING_NUMBERED = re.compile(
    r"\bNCCL\s+INFO\s+(?:(\w+):\s+)?(\d+)\s+Bytes\s+->\s+Algo\s+(\d+)\s+proto\s+(\d+)\s+time\s+[-+.\deE]+\s*$"
)
# NCCL's INFO line for each network connection a rank sets up, "/GDRDMA" where GPUDirect RDMA
# carries it ([NCCL] src/transport/net.cc: "Channel 00/0 : 7[7] -> 8[0] [send] via
# NET/IB/0/GDRDMA"; the network's name may hold spaces, "NET/AWS Libfabric/0"). Older NCCL
# printed the same line as "Channel 00 : 0[1b000] -> ..." (2.7 to 2.11, the bus id in hex,
# no connection index), "Ring 00 : 0[1b000] -> 1[1b000] [send] via NET/IB/0" (2.5 and 2.6:
# v2.6.4-1 src/transport/net.cc; its trees connect through the same lines) and "Ring 00 :
# 0 -> 1 [send] ..." (v2.4.8-1 src/transport/net.cc).
_NET_SEND = re.compile(
    r"\bNCCL\s+INFO\s+(?:Channel|Ring)\s+\d+(?:/\d+)?\s*:.*\[send\]\s+via\s+NET/(.+?)/\d+(?:\(\d+\))?(/GDRDMA)?"
)
# NCCL's INFO line for each connection inside a server: "via P2P/CUMEM/read" (and P2P/IPC,
# P2P/direct pointer, P2P/indirect), or "via SHM/direct/direct" through host memory
# ([NCCL] src/transport/p2p.cc, src/transport/shm.cc; "Channel 00 : ..." without the
# connection index in SHM's line of 2.30.7). Older NCCL printed them as net.cc's lines
# above ("Ring 00 : 0[1b000] -> 1[1c000] via P2P/IPC" in v2.6.4-1 src/transport/p2p.cc, a
# rank alone in v2.4.8-1's "via P2P/common device"), SHM's as "via direct shared memory"
# (up to 2.12: v2.12.12-1 src/transport/shm.cc).
_LOCAL_LINK = re.compile(
    r"\bNCCL\s+INFO\s+(?:Channel|Ring)\s+\d+(?:/\d+)?\s*:\s*\d+(?:\[[0-9a-fA-F]+\])?\s*->\s*\d+(?:\[[0-9a-fA-F]+\])?"
    r"\s+via\s+(?:(P2P)/|(SHM)/|direct\s+shared\s+memory)"
)
# NCCL's INFO line listing the devices its IB transport uses, each " [i]name:port[...]/IB"
# or "/RoCE" ([NCCL] src/transport/net_ib/init.cc, src/transport/net_ib.cc in 2.19).
_IB_USING = re.compile(r"\bNCCL\s+INFO\s+NET/IB\s*:\s*Using((?:\s+\[\d+\][^\s;\[]+)+)")
# A command line before the run's table (mpirun's, srun's, a container's "docker run -e
# NCCL_ALGO=Ring ...", a shell's "export" or "env", a binary's, behind a prompt: "$ ",
# "[root@host ~]# ", "(venv) user@host:~$ "): the NCCL variables it sets ("-x NCCL_ALGO=Ring",
# "export NCCL_PROTO=Simple", "NCCL_ALGO=Tree ./build/all_reduce_perf ..."). Prose that names
# a variable ("Please try export NCCL_ALGO=Tree") starts otherwise. A command written over
# several lines, each but the last ending in a backslash ("mpirun -np 16 \", "-x
# NCCL_MIN_NCHANNELS=32 \", ...), sets what each of its lines sets. So does one pasted as
# Markdown's inline code ("`mpirun ... -x NCCL_IB_DISABLE=1 ...`"), or that sets other
# variables first ("CUDA_VISIBLE_DEVICES=0,1 NCCL_P2P_LEVEL=NVL ./all_reduce_perf").
# A bare '#' is no prompt: a shell script's comment ("# export NCCL_ALGO=Tree") sets nothing.
_PROMPT = (r"(?:(?:\([\w.-]+\)\s*)?(?:(?:\[[^\]]*\]|[\w.-]+@[\w.-]+(?::\S*)?)\s*[$#>%]|[$>%])\s*)?")
_PROGRAM = (r"(?:(?:mpirun|mpiexec|srun|sbatch|salloc|torchrun|docker|podman|apptainer|singularity|kubectl|export|env)"
            r"(?![\w-])|\S*[a-z]_perf(?:_\w+)?\b)")
# Behind backticks or other variables only a program counts: "`NCCL_ALGO=Ring` helped" and
# "FOO=1 NCCL_PROTO=LL gave worse numbers" are prose.
_COMMAND_LINE = re.compile(
    rf"^{_PROMPT}(?:(?:sudo|time|nohup)\s+)*(?:{_PROGRAM}|NCCL_[A-Z0-9_]+=)"
    rf"|^`*{_PROMPT}`*(?:(?:sudo|time|nohup)\s+|[A-Za-z_]\w*=\S*\s+)*{_PROGRAM}"
)
# A variable and its value: up to a blank, quote, backtick, semicolon or backslash (a continuation
# written without a blank before it), or a comma that starts the next NAME= of a list
# (Slurm's --export=ALL,NCCL_ALGO=Tree,NCCL_PROTO=Simple); other commas are the value's
# (NCCL_IB_HCA=mlx5_0,mlx5_1).
_COMMAND_ENV = re.compile(r"(?<![\w-])(NCCL_[A-Z0-9_]+)=((?:[^\s'\";\\,`]|,(?![A-Za-z_]\w*=))+)")
# NCCL's INFO line for the network it runs between servers ("NCCL INFO Using network IB";
# "Socket", "AWS Libfabric" for the aws-ofi-nccl plugin, [NCCL] src/init.cc).
_USING_NETWORK = re.compile(r"\bNCCL\s+INFO\s+Using\s+network\s+(\S.*?)\s*$")
# The aws-ofi-nccl plugin's INFO line for the instance it runs on, with its platform's topology
# file ("NET/OFI Running on p5.48xlarge platform, Setting NCCL_TOPO_FILE ..."; "Running on P4d
# platform" in older plugins: the AWS EFA user guide's and aws-samples' example logs).
_OFI_PLATFORM = re.compile(r"\bNCCL\s+INFO\s+NET/OFI\s+Running\s+on\s+(\S+)\s+platform\b", re.IGNORECASE)
# nccl-tests 2.13 and later print the library's NCCL_VERSION_CODE ("nccl-library=22703").
_LIBRARY_CODE = re.compile(r"\bnccl-library=(\d+)\b")
# A binary name not inside another word ("all_reduce_perf_dgx.txt" names all_reduce_perf).
_BINARY_NAME = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(BINARIES) + r")(?![A-Za-z0-9])")


def _file_name_alternative(binary: str) -> str:
    # In a file name a binary may follow "_" ("node1_all_gather_perf"), but not as the tail of
    # a longer binary glued to a word: "xall_reduce_perf" does not name reduce_perf.
    longer = [other[: -len(binary)] for other in BINARIES if other != binary and other.endswith("_" + binary)]
    return "".join(f"(?<!{re.escape(prefix)})" for prefix in longer) + binary


# A binary name in a file name whose '-' are read as '_' ("nccl-all-gather-perf.txt").
_FILE_BINARY_NAME = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(map(_file_name_alternative, BINARIES)) + r")(?![A-Za-z0-9])"
)
# A collective as people spell it without "_perf": its words joined by '_', '-' or nothing
# ("alltoall" for alltoall_perf). In text (a wrapper's "-t all_gather") not inside a longer
# word or name ("reduce" in "all_reduce" names no reduce); in a file name, between any
# characters but letters and digits ("b200_allgather_2node.txt"; "all_gather_perfx" is a
# binary's name glued to a word, which names nothing).
def _spelled(binary: str, before: str, after: str) -> re.Pattern:
    words = binary.removesuffix("_perf").replace("alltoallv", "all_to_all_v").replace("alltoall", "all_to_all")
    words = words.replace("sendrecv", "send_recv")
    return re.compile(f"(?<![{before}])" + "[_-]?".join(words.split("_")) + f"(?!{after})", re.IGNORECASE)


_SPELLED_IN_TEXT = {b: _spelled(b, "A-Za-z0-9_-", "[A-Za-z0-9]|[_-][A-Za-z]") for b in BINARIES}
_SPELLED_IN_NAME = {b: _spelled(b, "A-Za-z0-9", "[A-Za-z0-9]|[_-]perf[A-Za-z0-9]") for b in BINARIES}


def _spelled_binaries(text: str, patterns: Mapping[str, re.Pattern]) -> set[str]:
    """The binaries ``text`` spells, but for one spelled only inside another's spelling
    ("reduce" inside "all_reduce")."""
    found = [(b, m.start(), m.end()) for b, pattern in patterns.items() for m in pattern.finditer(text)]

    def inside_longer(b: str, start: int, end: int) -> bool:
        return any(c != b and lo <= start and end <= hi and hi - lo > end - start for c, lo, hi in found)

    return {b for b, start, end in found if not inside_longer(b, start, end)}


_STARTING = re.compile(r"^#\s*Collective\s+test\s+starting:\s*(\S+)")
# The test name is the binary's, with any suffix it was built with (NAME_SUFFIX=_mpi).
_STARTING_BINARY = re.compile("(" + "|".join(BINARIES) + r")(?:_\S+)?")
_VERSION = re.compile(r"^#\s*nccl-tests\s+version\s+(\S+)")
_NTHREAD = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
# Its step between sizes: a factor (-f), or bytes (-i) ([NT-PERF] src/common.cu).
_STEP_BYTES = re.compile(r"\bstep:\s*(\d+)\(bytes\)")
# What nccl-tests prints when a call fails, and stops ([NT-PERF] src/common.h NCCLCHECK and
# CUDACHECK, docs/hardware.md):
# " Test NCCL failure common.cu:1279 'remote process exited or there was a network error'";
# and where a call outlasts -T, "node005: Test timeout (10s) common.cu:523".
_TEST_FAILURE = re.compile(r"Test (?:NCCL|CUDA) failure.*|Test timeout \(\d+s\).*")
# Later fields of that line, where the nccl-tests version prints them: -a and -G.
_AGG_ITERS = re.compile(r"\bagg\s+iters:\s*(\d+)")
# nccl-tests' -z: each call waits for the one before to end ("# Blocking Enabled: wait and
# barrier after each inner iteration (-m)", "... wait for completion and barrier after each
# collective" before 2.13; [NT-PERF] src/util.cu).
_BLOCKING = re.compile(r"^#\s*Blocking\s+Enabled\b")
# The timed iterations (-n), after the warm-up's: "warmup iters: 5 iters: 20".
_ITERS = re.compile(r"\bwarmup\s+iters:\s*\d+\s+iters:\s*(\d+)")
_GRAPH = re.compile(r"\bgraph:\s*(\d+)")
_RANK = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
# A row's tail without its size, count, type, ...: a time with a decimal point, then
# bandwidths and #wrong (a row that other output, NCCL's INFO lines, cut in two).
_FRAGMENT = re.compile(r"^\d+\.\d+(\s+(\d+\.\d+|\d+|N/A)){3,}\s*$")
# Open MPI's count of notices it did not repeat ("8 more processes have sent help message
# help-mtl-ofi.txt / OFI call fail"), printed without a prefix, so inside the table.
_MPI_HELP = re.compile(r"^\d+ more process(?:es)? ha(?:s|ve) sent help message")
# A line of dots where a paste left lines out ("...", "#  ...", "…").
_ELISION = re.compile(r"^#?\s*(?:\.{3,}|\u2026)\s*$")
# rccl-tests, AMD's fork of nccl-tests for RCCL: its version line, and a line nccl-tests
# never printed (rccl-tests src/common.cu) that stands in where a paste lost the first.
_RCCL = re.compile(r"^#\s*(?:rccl-tests\s+version\b|Errors\s+with\s+asterisks\s+indicate\s+errors\b)")
# Without "not checked": flowsim check ends the line of each run it skips so.
_NOT_NCCL = "rccl-tests output (AMD GPUs and RCCL): flowsim models NCCL on NVIDIA GPUs"
_AVG = re.compile(r"^#\s*Avg\s+bus\s+bandwidth\s*:\s*(\S+)")
_USING_DEVICES = re.compile(r"^#\s*Using\s+devices\s*$")


def _is_caption(stripped: str) -> bool:
    """Whether ``stripped`` is the line naming the table's halves ("out-of-place  in-place")."""
    return "out-of-place" in stripped and "in-place" in stripped


# A row: its size, then a number, its count (or nothing, where the row was cut after its
# size); a line of prose that starts with a number ("356 GB/s at 8 GiB") is not one.
_ROW_START = re.compile(r"^\d+(?:\s+[-+]?\d|\s*$)")
# NCCL's debug line ("host:pid:tid [dev] NCCL INFO ...", the device tag gone where MPICH's
# rank marker of the same text was removed; a host glued to the row's last digits starts with
# a letter) written onto a piece of a row: NCCL and nccl-tests share standard output, and with
# NCCL_DEBUG=INFO NCCL's lines (its TUNING line of each call) land between the pieces of a row
# nccl-tests prints (NVIDIA/nccl#1453).
_GLUED_DEBUG = re.compile(
    r"(?:\[\d+(?:,\d+)*\](?:<std(?:out|err)>:)?\s*)?[A-Za-z][\w.\-]*:\d+:\d+\s+(?:\[\d+\]\s+)?NCCL\s+(?:INFO|WARN|TRACE)\b"
)
# A debug line of NCCL's on its own, whatever its host's name starts with.
_DEBUG_LINE = re.compile(r"^[\w.\-]+:\d+:\d+\s+(?:\[\d+\]\s+)?NCCL\s")
# The four columns of each half of a row, as the table header names them.
_HALF = ("time", "algbw", "busbw", "#wrong")
# Older nccl-tests title '#wrong' "error"; '-C 1' (CPU time) titles 'time' "cputime".
_HEADER_SYNONYMS = {"error": "#wrong", "wrong": "#wrong", "cputime": "time"}
_HEADER_EXPECTED = (
    "'#  size  count  type  [redop]  [root]', then 'time  algbw  busbw  #wrong' for each of the two halves "
    "('error' or 'wrong' for '#wrong' and 'cputime' for 'time' are read too; further columns after each '#wrong' "
    "are skipped)"
)


def _read(path_or_text: str | os.PathLike, source: str | None = None) -> tuple[str, str]:
    """(text, source name): a path (Path, or a str that holds no newline and is not a JSON
    object, as nccl-tests writes on one line) is read; with ``source``, ``path_or_text`` is
    the text, named so."""
    if source is not None:
        return str(path_or_text).removeprefix("\ufeff"), source
    if isinstance(path_or_text, str) and ("\n" in path_or_text or is_json_output(path_or_text)):
        return path_or_text.removeprefix("\ufeff"), "<text>"
    # Not a regular file (a FIFO would block the read): refused, saying what it is. A byte
    # order mark (from an editor) would hide the '#' that starts a line: dropped.
    return read_output_file(path_or_text, "nccl-tests output", piped=True), str(path_or_text)


def _number(text: str, kind: type, source: str, line: int, column: str):
    try:
        return kind(text)
    except ValueError:
        raise line_error(
            source, line, f"column {column!r} should be {'an integer' if kind is int else 'a number'}, got {text!r}"
        ) from None


def _measured(text: str, source: str, line: int, column: str) -> float:
    # float() also reads "nan", "inf" and "-1", which would pass every comparison or flag
    # a healthy size; nccl-tests prints none of them for a size it completed.
    value = _number(text, float, source, line, column)
    if not (math.isfinite(value) and value >= 0):
        raise line_error(source, line, f"column {column!r} should be a finite, non-negative measurement, got {text!r}")
    return value


def _count(text: str, source: str, line: int, column: str) -> int:
    value = _number(text, int, source, line, column)
    if value < 0:
        raise line_error(source, line, f"column {column!r} should be a non-negative integer, got {text!r}")
    return value


def _measurement(tokens: Sequence[str], source: str, line: int, half: str, legacy: bool) -> Measurement:
    # nccl-tests before 2.13 print the largest relative error here (``legacy``: the header's
    # 'error', "%5.0le": "2e-07"), judged against its bound once the ranks are known (_judged);
    # later ones the count of wrong elements ('#wrong', "%g": a million or more as "1.67772e+07").
    value = None if tokens[3] == "N/A" else _measured(tokens[3], source, line, f"{half} #wrong")
    return Measurement(
        time_us=_measured(tokens[0], source, line, f"{half} time"),
        algbw_GBps=_measured(tokens[1], source, line, f"{half} algbw"),
        busbw_GBps=_measured(tokens[2], source, line, f"{half} busbw"),
        wrong=None if value is None else 0 if legacy else int(value),
        max_error=value if legacy else None,
    )


# nccl-tests' bound on a half's largest relative error before 2.13, per rank beyond the first
# (DeltaMaxValue in [NT-PERF] src/common.cu, v2.0.0-v2.11.0): an integer type's any error.
_ERROR_BOUND = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}


def _judged(rows: Sequence[TestRow], n_ranks: int) -> list[TestRow]:
    """``rows`` with each half that printed its largest relative error (nccl-tests before
    2.13) marked wrong where that error is beyond nccl-tests' bound for its type on
    ``n_ranks`` ranks, as nccl-tests counted it in its ``Out of bounds values`` line."""

    def judged(half: Measurement, dtype: str) -> Measurement:
        if half.max_error is None:
            return half
        bound = _ERROR_BOUND.get(dtype, 0.0) * max(n_ranks - 1, 0)
        return replace(half, wrong=int(half.max_error > bound))

    return [replace(row, out_of_place=judged(row.out_of_place, row.dtype), in_place=judged(row.in_place, row.dtype))
            for row in rows]


def _unreported(rows: Sequence[TestRow], binary: str, legacy: bool) -> list[TestRow]:
    """``rows`` without the largest error of a half nccl-tests before 2.13 (``legacy``, its
    'error' column) checked but did not report: the in-place run of all-to-all and
    sendrecv, whose binaries set ``reportErrors = in_place ? 0 : 1`` ([NT-PERF]
    src/alltoall.cu since 2020, src/sendrecv.cu since it came, 9dae3d3), so that what is
    printed there (an old all-to-all's ``1e+00``) is not among its ``Out of bounds values``
    and no element is wrong. From d313d20 nccl-tests prints ``N/A`` there."""
    if not legacy or binary not in ("alltoall_perf", "alltoallv_perf", "sendrecv_perf"):
        return list(rows)
    return [replace(row, in_place=replace(row.in_place, wrong=None, max_error=None)) for row in rows]


@dataclass(frozen=True)
class _Layout:
    """Where a row's columns are (token positions), from the table header on ``line``."""

    names: tuple[str, ...]
    redop: int | None
    root: int | None
    halves: tuple[int, int]  # the 'time' column of each half, in printed order
    line: int
    printed: tuple[str, ...] = ()  # the names as the header prints them ('error', 'cputime')

    @property
    def legacy_error(self) -> bool:
        """Whether the header prints 'error' (nccl-tests before 2.13) where '#wrong' is now."""
        return "error" in self.printed

    @property
    def needed(self) -> int:
        """Tokens a row needs: up to the second half's '#wrong'; later ones are skipped."""
        return self.halves[1] + len(_HALF)


def _layout(stripped: str, source: str, line: int) -> _Layout:
    """The columns the header line ``stripped`` (``#  size  count  type ...``) names."""
    names = tuple(_HEADER_SYNONYMS.get(name, name) for name in stripped.lstrip("#").split())
    optional = {}
    position = 3
    for name in ("redop", "root"):
        if names[position : position + 1] == (name,):
            optional[name] = position
            position += 1
    # Per-iteration statistics (i_min i_max ...) follow each '#wrong'; the next 'time' starts
    # the second half.
    second = next((i for i in range(position + len(_HALF), len(names)) if names[i] == "time"), None)
    if (
        names[:3] != ("size", "count", "type")
        or names[position : position + len(_HALF)] != _HALF
        or second is None
        or names[second : second + len(_HALF)] != _HALF
    ):
        raise line_error(source, line, f"table header not understood: expected {_HEADER_EXPECTED}; got {stripped!r}")
    return _Layout(names, optional.get("redop"), optional.get("root"), (position, second), line,
                   tuple(stripped.lstrip("#").split()))


# nccl-tests' table header, for rows pasted without it: with the redop and root columns every
# binary prints since nccl-tests 2.10; with one of them (before 2.13: all-reduce's and
# reduce-scatter's 'redop', broadcast's 'root', [NT-PERF] src/all_reduce.cu and
# src/broadcast.cu at 526eaca, with the largest error where '#wrong' is now), told apart by the
# fourth column, a reduction's name or a rank; and without either (older ones; 'size count type' then the halves).
_PRINTED_HEADERS = {
    len(_HALF) * 2 + 5: "#  size  count  type  redop  root  " + "  ".join(_HALF * 2),
    len(_HALF) * 2 + 3: "#  size  count  type  " + "  ".join(_HALF * 2),
}
_LEGACY_HALF = "  time  algbw  busbw  error"  # the largest error, not the count of wrong elements
_ONE_OF_REDOP_ROOT = {True: "#  size  count  type  redop" + _LEGACY_HALF * 2,
                      False: "#  size  count  type  root" + _LEGACY_HALF * 2}


def _headerless_layout(stripped: str, source: str, line: int) -> _Layout | None:
    """The layout of a row pasted without its table header (``stripped``, on ``line``): its
    columns as nccl-tests prints them, where its token count is that of one of
    :data:`_PRINTED_HEADERS` (or of a header with one of redop and root) and its third column
    names a data type; else None."""
    tokens = stripped.split()
    header = _PRINTED_HEADERS.get(len(tokens))
    if len(tokens) == len(_HALF) * 2 + 4:
        # Where its fifth column is the time, its sixth is the size over it (algbw): a row of
        # today's 13 columns that lost its last is not taken for one of these (a re-audit).
        header = _ONE_OF_REDOP_ROOT[tokens[3][:1].isalpha()] if _algbw_fits(tokens, 4) else None
    if header is None or tokens[2] not in DTYPE_BYTES:
        return None
    return _layout(header, source, line)


def _algbw_fits(tokens: Sequence[str], time_at: int) -> bool:
    """Whether ``tokens[time_at + 1]`` is the size over ``tokens[time_at]`` (GB/s of bytes
    over microseconds, as nccl-tests prints algbw), within its two decimals and 5%."""
    try:
        size, time_us, algbw = float(tokens[0]), float(tokens[time_at]), float(tokens[time_at + 1])
    except (ValueError, IndexError):
        return False
    if not time_us > 0:
        return False
    expected = size / time_us / 1e3
    return abs(expected - algbw) <= 0.005 + 0.05 * expected


def _tokens(text: str, layout: _Layout) -> list[str]:
    """A row's columns; one whose reduction nccl-tests printed as nothing gets ``none`` there.

    From 2020 to September 2022 nccl-tests printed all-to-all's rows (and in August 2022
    all-gather's and broadcast's) with an empty string under the header's ``redop``
    ([NT-PERF] src/alltoall.cu passes ``""`` as the operation's name, 119a0ec to 8274cb4;
    src/all_gather.cu at 51af557; ``"none"`` from d313d20), so such a row is one column
    short, a number where the reduction's name would be."""
    tokens = text.split()
    if (layout.redop is not None and len(tokens) == layout.needed - 1 and len(tokens) > layout.redop
            and not tokens[layout.redop][:1].isalpha()):
        tokens.insert(layout.redop, "none")
    return tokens


def _short_row(text: str, source: str, line: int, layout: _Layout) -> InputError | None:
    """The error of a row with fewer columns than ``layout`` needs (cut short), else None."""
    tokens = _tokens(text, layout)
    if len(tokens) >= layout.needed:
        return None
    return line_error(
        source,
        line,
        f"expected {layout.needed} columns ({' '.join(layout.printed[: layout.needed])}, as the header on "
        f"line {layout.line} names them); got {len(tokens)} (truncated row?): {text.strip()!r}",
    )


def _row(text: str, source: str, line: int, layout: _Layout, in_place_first: bool) -> TestRow:
    short = _short_row(text, source, line, layout)
    if short is not None:
        raise short
    tokens = _tokens(text, layout)
    first_half, second_half = ("in-place", "out-of-place") if in_place_first else ("out-of-place", "in-place")
    start, later = layout.halves
    first = _measurement(tokens[start : start + len(_HALF)], source, line, first_half, layout.legacy_error)
    second = _measurement(tokens[later : later + len(_HALF)], source, line, second_half, layout.legacy_error)
    return TestRow(
        size_bytes=_number(tokens[0], int, source, line, "size"),  # a row starts with digits
        count=_count(tokens[1], source, line, "count"),
        dtype=tokens[2],
        redop=None if layout.redop is None else tokens[layout.redop],
        root=None if layout.root is None else _number(tokens[layout.root], int, source, line, "root"),
        out_of_place=second if in_place_first else first,
        in_place=first if in_place_first else second,
        line=line,
    )


def _fits_bus_factor(ratios: tuple[float, float], collective: str, n_ranks: int | None) -> bool:
    """Whether busbw / algbw, somewhere in ``ratios`` (least, most: one value, or the bounds
    of the printed figures, :func:`_printed_ratio`), fits ``collective`` on ``n_ranks`` ranks
    (within 5%), or on some rank count when ``n_ranks`` is None."""
    if n_ranks is not None:
        low = high = bus_factor(collective, n_ranks)
    else:
        # 2(n-1)/n for all-reduce spans [1, 2); (n-1)/n for the split collectives [0.5, 1); 1 otherwise.
        low = bus_factor(collective, 2)
        high = _bus_factor_limit(collective) or low
    return 0.95 * low <= ratios[1] and ratios[0] <= 1.05 * high


def _printed_ratio(half: Measurement) -> tuple[float, float]:
    """The least and most busbw / algbw of ``half`` as far as its printed figures pin it down
    (to 0.01 GB/s, nccl-tests' ``%7.2f``: each within 0.005 of the value measured)."""
    return ((half.busbw_GBps - 0.005) / (half.algbw_GBps + 0.005),
            (half.busbw_GBps + 0.005) / (half.algbw_GBps - 0.005))


def _bus_factor_limit(collective: str) -> float | None:
    """The value nccl-tests' bus factor of ``collective`` tends to as the ranks grow, where it
    grows with them (``k (n - 1) / n``: twice its value on 2 ranks); None where the rank count
    does not change it."""
    two = bus_factor(collective, 2)
    return 2 * two if bus_factor(collective, 3) != two else None


def _against_rows(binary: str, named_by: str, rows: Sequence[TestRow], n_ranks: int | None,
                  warnings: list[str]) -> str:
    """``binary``, which ``named_by`` names and no line of nccl-tests' own, with a warning in
    ``warnings`` where the rows fit other binaries and not it (a log saved under another
    binary's name: an all-gather's rows checked as an all-reduce's would be half as fast).
    Only rows that print a reduction and a root, as nccl-tests has since 2.10, are judged:
    older ones counted some binaries' bus bandwidth otherwise (a DGX-2's all-gather of 2019
    prints busbw = algbw)."""
    if not rows or any(r.redop is None or r.root is None for r in rows):
        return binary
    fitting = _infer_binary(rows, n_ranks)
    if fitting and binary not in fitting:
        hint = "" if named_by == "--collective" else " (--collective names the binary)"
        warnings.append(f"{named_by} names {binary}, but the rows fit {', '.join(sorted(fitting))} (their reduction, "
                        f"root and busbw / algbw): checked as {binary}{hint}")
    return binary


def _infer_binary(rows: Sequence[TestRow], n_ranks: int | None) -> set[str]:
    """Binaries consistent with the rows' redop, root and busbw / algbw ratio (``n_ranks``
    None: on some rank count)."""
    measured = [r.out_of_place for r in rows if r.out_of_place.algbw_GBps >= 1.0]
    fastest = max((r.out_of_place for r in rows), key=lambda m: m.algbw_GBps, default=None)
    ratios: tuple[float, float] | None = None
    if measured:
        ratio = measured[-1].busbw_GBps / measured[-1].algbw_GBps
        ratios = (ratio, ratio)
    elif fastest is not None and fastest.algbw_GBps >= 0.02:
        # Where every row is slower (a paste of small sizes), the fastest row's ratio as far as
        # its two printed decimals pin it down.
        ratios = _printed_ratio(fastest)
    # All-gather, reduce-scatter, all-to-all, gather and scatter print a rank's part of the
    # size as the count (nccl-tests' *GetCollByteCount), so a row whose count holds all of it
    # is none of them.
    whole_count = any(
        r.size_bytes > 0 and r.dtype in DTYPE_BYTES and r.count * DTYPE_BYTES[r.dtype] == r.size_bytes for r in rows
    )
    candidates = set()
    for binary, collective in BINARIES.items():
        if whole_count and collective in SPLIT:
            continue
        if binary == "alltoallv_perf":
            # Only ever named: it came with nccl-tests 2.19.0, whose header names every run's
            # binary, and its rows look like an all-to-all's.
            continue
        reducing = collective in SUM_SHOWN
        rooted = collective in ROOTED
        # A column the table lacks (None) tells nothing.
        if any(
            (r.redop is not None and (r.redop != "none") != reducing)
            or (r.root is not None and (r.root >= 0) != rooted)
            for r in rows
        ):
            continue
        if ratios is not None and not _fits_bus_factor(ratios, collective, n_ranks):
            continue
        candidates.add(binary)
    return candidates


_SECOND_RUN = "a second nccl-tests run starts here, where one run was expected"
_TABLE_HEADER = re.compile(r"^#\s*size\s+count")
# A binary's name then an option: a command about to run ("./broadcast_perf -b 8 -e 128M"),
# never a report of one that ran.
_COMMAND = re.compile(_BINARY_NAME.pattern + r"(?:_\w+)?\s+-")
# A shell's line continuation: a backslash that ends a line.
_CONTINUED = re.compile(r"\\[ \t]*\n")
# A run's opening lines in the order nccl-tests prints them, then its table header.
_RUN_LINES = (_VERSION, _STARTING, _NTHREAD, _TABLE_HEADER)


def _unglued(line: str) -> list[str]:
    """``line``, or where NCCL's debug line was written onto a piece of a row
    (:data:`_GLUED_DEBUG`), the piece and then the debug line, each read on its own."""
    stripped = line.strip()
    glued = _GLUED_DEBUG.search(stripped)
    if glued is None or glued.start() == 0 or _DEBUG_LINE.match(stripped):
        return [line]
    head = stripped[: glued.start()].rstrip()
    if not (_ROW_START.match(head) or _FRAGMENT.match(head)):
        return [line]
    return [head, _strip_prefixes(stripped[glued.start():])]


def _strip_prefixes(raw: str) -> str:
    """``raw`` without the launcher prefixes before it (nested ones too) and colour codes, with the ``#``
    a Markdown renderer ate put back. In a row or a comment line after MPICH's rank marker
    (``[0]``), the same marker is removed wherever else it stands: the launcher writes it
    before each piece of output the program flushed, which may end inside a line
    (NVIDIA/nccl#1453: ``-1[0]    1626.5 ...      0[0]    2302.3``)."""
    line = _ANSI.sub("", raw).rstrip()
    marker = None
    for _ in range(4):
        rank = _RANK_MARKER.match(line)
        marker = marker or (rank and rank.group(1))
        shorter = _TAG_PREFIX.sub("", line, count=1)
        if shorter == line:
            break
        line = shorter
    stripped = line.strip()
    if marker is not None and stripped[:1] in "#0123456789":
        # Not in other lines: NCCL's INFO lines print ranks so ("0[0] -> 1[1] via P2P").
        line = line.replace(marker, "")
        stripped = line.strip()
    return "# " + stripped if _HASHLESS.match(stripped) else line


def _ranks_from_busbw(rows: Sequence[TestRow], collective: str | None) -> tuple[int, int] | None:
    """The least and most rank counts whose bus factor turns the fastest row's algbw into its
    busbw, both as printed (to 0.01 GB/s, nccl-tests' ``%7.2f``: each within 0.005 of the
    value measured), for a collective whose bus factor depends on the rank count; None
    otherwise, or where no count, or any count from some on, fits."""
    scale = None if collective is None else _bus_factor_limit(collective)
    if scale is None:
        return None
    fastest = max((r.out_of_place for r in rows), key=lambda m: m.algbw_GBps)
    if fastest.algbw_GBps < 1.0:
        return None
    low, high = _printed_ratio(fastest)
    # busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the split collectives: the
    # ratio r grows with n towards scale, n = scale / (scale - r).
    if high >= scale:
        return None
    least = max(2, math.ceil(scale / (scale - max(low, 0.0)) - 1e-9))
    most = math.floor(scale / (scale - high) + 1e-9)
    return (least, most) if least <= most else None


def _counted(fitting: tuple[int, int]) -> str:
    """``"16"``, or ``"125 to 133"`` where the printed figures fit several rank counts."""
    least, most = fitting
    return str(least) if least == most else f"{least} to {most}"


#: Most rank counts :func:`_shape_of_listed` tries (printed figures of thousands of ranks fit
#: a wide range of counts, and then no shape is fixed anyway).
_MOST_COUNTS = 4096


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` >= 1, in no particular order."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in small if d * d != n]


def _misplaced(listed: Mapping[int, RankInfo], gpus_per_node: int) -> RankInfo | None:
    """The first listed rank (in rank order) that does not sit where ``gpus_per_node`` GPUs a
    host put it, host by host as NCCL and nccl-tests' rank lines number them: its device is
    its place on its host, and ranks a host apart are on different hosts. None where all do."""
    host_of: dict[int, str] = {}  # per host number, its name
    number_of: dict[str, int] = {}  # per name, its host number
    for rank in sorted(listed):
        info = listed[rank]
        node = rank // gpus_per_node
        if (info.device != rank % gpus_per_node or host_of.setdefault(node, info.host) != info.host
                or number_of.setdefault(info.host, node) != node):
            return info
    return None


def _shape_of_listed(listed: Mapping[int, RankInfo], fitting: tuple[int, int] | None) -> tuple[int, int] | None:
    """(nodes, GPUs per node) where one shape fits both the rank counts the busbw ratio
    allows (``fitting``) and the rank lines a paste kept (``listed``): ranks a host apart on
    different hosts, each rank's device its place on its host. Where several do, the one
    whose last rank is the last listed: OCI's published runs keep each end of the list
    ("Rank 0, 1, ..., 126, 127")."""
    if not listed or fitting is None or fitting[1] - fitting[0] > _MOST_COUNTS:
        return None
    # A host's GPU count divides every listed rank's distance from its device number: a
    # quick test before the whole one.
    spread = math.gcd(*(rank - info.device for rank, info in listed.items()))
    shapes = set()
    for n in range(max(fitting[0], max(listed) + 1), fitting[1] + 1):
        for g in _divisors(n):
            if not (spread and spread % g) and _misplaced(listed, g) is None:
                shapes.add((n // g, g))
    if len(shapes) > 1:
        shapes = {(nodes, g) for nodes, g in shapes if nodes * g == max(listed) + 1}
    return shapes.pop() if len(shapes) == 1 else None


# A launcher's options before the binary it runs: mpirun's (Open MPI, MPICH) processes, processes
# a node and hosts with their slots, srun's nodes and tasks a node.
_LAUNCHER = re.compile(r"(?<![\w-])(mpirun|mpiexec|srun)(?![\w-])")
_MPI_PROCESSES = re.compile(r"(?<!\S)(?:-np|-n|--np|-c)[\s=]+(\d+)(?!\S)")
_MPI_PER_NODE = re.compile(r"(?<!\S)(?:-npernode|--npernode|-N|-ppn|--ppn|-perhost)[\s=]+(\d+)(?!\S)"
                           r"|(?<!\S)--map-by[\s=]+ppr:(\d+):node\b")
_MPI_HOSTS = re.compile(r"(?<!\S)(?:-H|--host|-hosts|--hosts)[\s=]+(\S+)")
_SRUN_NODES = re.compile(r"(?<!\S)(?:-N|--nodes)[\s=]*(\d+)(?!\S)")
_SRUN_PER_NODE = re.compile(r"(?<!\S)--ntasks-per-node[\s=]+(\d+)(?!\S)")
_SRUN_TASKS = re.compile(r"(?<!\S)(?:-n|--ntasks)[\s=]*(\d+)(?!\S)")


def _launch_shape(commands: Sequence[str], per_process: int | None) -> tuple[int, int] | None:
    """Nodes and GPUs a node that the last launcher command of ``commands`` gives (``mpirun
    -np 256 -npernode 16``, ``-H a:8,b:8``, ``srun --nodes=2 --ntasks-per-node=8``), each of
    its processes driving ``per_process`` GPUs (nccl-tests' ``nThread x nGpus``, 1 where the
    output does not say); None where it gives no whole shape. Only the options before the
    binary are the launcher's (``-n`` after ``all_reduce_perf`` is nccl-tests' iterations)."""
    for command in reversed(commands):
        launcher = _LAUNCHER.search(command)
        if launcher is None:
            continue
        options = _BINARY_NAME.split(command[launcher.end():], maxsplit=1)[0]
        per_node = processes = node_count = None
        if launcher.group(1) == "srun":
            found = [_SRUN_NODES.search(options), _SRUN_PER_NODE.search(options), _SRUN_TASKS.search(options)]
            node_count, per_node, processes = (int(m.group(1)) if m else None for m in found)
        else:
            if (m := _MPI_PROCESSES.search(options)) is not None:
                processes = int(m.group(1))
            if (m := _MPI_PER_NODE.search(options)) is not None:
                per_node = int(m.group(1) or m.group(2))
            if (m := _MPI_HOSTS.search(options)) is not None:
                # Each host's slots: its ':N', else one a time it is named (Open MPI's
                # "-H n1,n1,n2,n2"); the hosts are the distinct names.
                slots: dict[str, int] = {}
                for entry in filter(None, m.group(1).split(",")):
                    host, _, count = entry.partition(":")
                    slots[host] = slots.get(host, 0) + (int(count) if count.isdigit() else 1)
                node_count = len(slots)
                if per_node is None and len(set(slots.values())) == 1:
                    per_node = next(iter(slots.values()))
        if node_count is None and processes and per_node and processes % per_node == 0:
            node_count = processes // per_node
        if per_node is None and processes and node_count and processes % node_count == 0:
            per_node = processes // node_count
        if not (node_count and per_node) or processes and node_count * per_node != processes:
            return None  # no whole shape, or one its own process count contradicts
        return node_count, per_node * (per_process or 1)
    return None


def _made_up_ranks(
    source: str,
    header_line: int,
    collective: str,
    rows: Sequence[TestRow],
    per_process: int | None,
    nodes: int | None,
    gpus_per_node: int | None,
    warnings: list[str],
    listed: Mapping[int, RankInfo],
    given: str = "arguments",
) -> tuple[tuple[RankInfo, ...], str]:
    """Ranks of output without rank lines, or with some of them only (``listed``: a paste
    that starts in the middle of the list, or the lines a launcher or a filter left), from
    the cluster's shape (``nodes`` x ``gpus_per_node``, from ``given``), completed by the
    busbw ratio where one of the two is missing. Listed ranks that do not sit as that shape
    puts them (host by host, devices in order) are named in a warning."""
    if listed:
        first, last = min(listed), max(listed)
        if first == last:
            which = f"a rank line for rank {first} only (pasted in part)"
        elif len(listed) == last - first + 1:
            which = f"rank lines for ranks {first}-{last} only (pasted in part)"
        else:
            absent = sorted(set(range(last)) - set(listed))
            which = (f"rank lines for {len(listed)} ranks only (none for rank{'s' if len(absent) > 1 else ''} "
                     f"{format_runs(absent, 4)})")
    else:
        which = "no rank lines"
    fitting = _ranks_from_busbw(rows, collective)
    # The rank count the ratio gives, where it gives one count alone.
    from_busbw = fitting[0] if fitting is not None and fitting[0] == fitting[1] else None
    how = given
    if nodes is not None and gpus_per_node is not None:
        if fitting is not None and not fitting[0] <= nodes * gpus_per_node <= fitting[1]:
            warnings.append(
                f"the busbw / algbw ratio says {_counted(fitting)} ranks, not {nodes} node(s) x "
                f"{gpus_per_node} GPU(s); using the {nodes * gpus_per_node} given"
            )
    elif from_busbw is not None and nodes is not None and from_busbw % nodes == 0:
        gpus_per_node, how = from_busbw // nodes, "busbw ratio"
    elif from_busbw is not None and gpus_per_node is not None and from_busbw % gpus_per_node == 0:
        nodes, how = from_busbw // gpus_per_node, "busbw ratio"
    elif from_busbw is not None and nodes is None and gpus_per_node is None and from_busbw == per_process:
        # One process drove every rank (nThread x nGpus of them): one host.
        nodes, gpus_per_node, how = 1, from_busbw, "busbw ratio"
    elif nodes is None and gpus_per_node is None and (shape := _shape_of_listed(listed, fitting)) is not None:
        nodes, gpus_per_node = shape
        how = "listed ranks' hosts and devices and the busbw ratio"
    else:
        known = "" if fitting is None else f" (the busbw / algbw ratio says {_counted(fitting)} ranks)"
        listing = "no '#  Rank R ... on HOST device D' lines" if not listed else which
        # Where the ratio gives the rank count, either half of the shape gives the other
        # (unless one was given that does not divide it: then both are wanted).
        either = from_busbw is not None and nodes is None and gpus_per_node is None
        flags = ("--nodes N or --gpus-per-node G, either one (nodes= or gpus_per_node=): the other follows from the "
                 f"{from_busbw} ranks" if either else "--nodes N --gpus-per-node G (nodes=, gpus_per_node=)")
        raise line_error(
            source, header_line,
            f"{listing}, so the ranks and hosts of this table are unknown{known}; give the cluster's shape: {flags}",
        )
    nodes = whole_number("nodes", nodes)
    gpus_per_node = whole_number("gpus_per_node", gpus_per_node)
    if listed and max(listed) >= nodes * gpus_per_node:
        raise InputError(
            f"{source}, line {listed[max(listed)].line}: rank {max(listed)} is listed, but {nodes} node(s) x "
            f"{gpus_per_node} GPU(s) make {nodes * gpus_per_node} ranks"
        )
    misplaced = _misplaced(listed, gpus_per_node)
    if misplaced is not None:
        rank = misplaced.rank
        warnings.append(
            f"line {misplaced.line}: rank {rank} is device {misplaced.device} on {misplaced.host}, not device "
            f"{rank % gpus_per_node} of host {rank // gpus_per_node + 1} of {nodes} as the shape assumes: the "
            "hosts' ranks may not be in order"
        )
    # The listed ranks' GPU stands for every rank's when they name one.
    names = {info.device_name for info in listed.values()}
    name = names.pop() if len(names) == 1 else ""
    ranks = tuple(
        RankInfo(rank, f"node{rank // gpus_per_node}", rank % gpus_per_node, name, 0)
        for rank in range(nodes * gpus_per_node)
    )
    warnings.append(
        f"{which}; assuming {nodes} host(s) x {gpus_per_node} GPU(s), ranks in host order (from the {how})"
    )
    return ranks, how


def parse_nccl_log(
    path_or_text: str | os.PathLike,
    *,
    collective: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    source: str | None = None,
) -> NcclTestLog:
    """Parse the output of one nccl-tests binary: what it prints, or the JSON file its ``-J``
    option writes (:mod:`~flowsim.check.nccl_json`).

    Parameters
    ----------
    path_or_text : str or path-like
        A file, or the output itself (a ``str`` holding a newline, or a JSON object).
    collective : str, optional
        flowsim collective name or nccl-tests binary (``"all_reduce"`` or
        ``"all_reduce_perf"``). By default the ``# Collective test starting`` line, else a
        binary name in the text (a command line), else the file name, else the only binary
        whose redop, root and busbw / algbw ratio fit the rows. Where the output names its
        test (that line, or a JSON file's ``args[0]``) and ``collective`` is another, the
        output's test is taken, with a warning.
    nodes, gpus_per_node : int, optional
        The cluster's shape, for output without rank lines (ignored where the output has
        them, a ``gpus_per_node`` they contradict with a warning, as
        :func:`~flowsim.check.report.check_log` warns of ``nodes``). Either one is enough
        where the busbw / algbw ratio gives the rank count; neither where one process drove
        every rank (``nThread x nGpus`` of them).
    source : str, optional
        Where set, ``path_or_text`` is the output itself, whatever it holds, and errors name
        it ``source`` (``"<stdin>"``, say) instead of a file or ``"<text>"``.

    Returns
    -------
    NcclTestLog

    Raises
    ------
    InputError
        Naming the source and line: no table, malformed, duplicate or non-contiguous rank
        lines, no rank lines and no way to tell the ranks, a table header naming columns in
        an order it does not know, a row with missing or non-numeric columns (but for a
        last row the output ends inside, skipped with a warning), a table without rows, a
        second test in the same text, or a collective that cannot be told.
    """
    text, source = _read(path_or_text, source)
    if is_json_output(text):
        return replace(_from_json(read_json_run(text, source), source, collective, gpus_per_node), sha256=_sha256(text))
    return _parse_text(text, source, collective, nodes, gpus_per_node)


def parse_nccl_logs(
    path_or_text: str | os.PathLike,
    *,
    collective: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    errors: list[InputError] | None = None,
    source: str | None = None,
) -> list[NcclTestLog]:
    """Parse output that may hold several nccl-tests runs one after another, as scripts that
    run every binary in turn log them: one :class:`NcclTestLog` per run, in order.

    A run starts at its first ``# nccl-tests version``, ``# Collective test starting`` or
    ``# nThread`` line after the table of the run before; lines between two runs' tables
    belong to the first, but for output that names each binary before its run (a script's
    ``Running: ./build/all_reduce_perf ...``) or where they hold a command line
    (``./broadcast_perf -b 8 ...``), where they go with the second. Each run is
    parsed as :func:`parse_nccl_log` parses a whole text (its collective from its own
    ``# Collective test starting`` line), and an error names the line of the whole text.
    A JSON file (``-J``) holds one run. Parameters (``source`` included) as :func:`parse_nccl_log`,
    ``collective`` applying to every run; given a list ``errors``,
    a run that cannot be read (one that failed or was cut off before its results, say) adds
    its :class:`InputError` there and is left out, where it would raise; so does a file that
    cannot be read or a JSON file that is not nccl-tests' (then the list returned is empty).
    """
    try:
        text, source = _read(path_or_text, source)
        if is_json_output(text):
            return [replace(_from_json(read_json_run(text, source), source, collective, gpus_per_node),
                            sha256=_sha256(text))]
    except InputError as err:
        # A file that cannot be read, or JSON that cannot be, is one run not read.
        if errors is None:
            raise
        errors.append(err)
        return []
    logs = []
    runs = _run_texts(text)
    for k, run in enumerate(runs, start=1):
        try:
            logs.append(replace(_parse_text(run, source, collective, nodes, gpus_per_node), run=(k, len(runs))))
        except InputError as err:
            if errors is None:
                raise
            errors.append(err)
    return logs


def _run_texts(text: str) -> list[str]:
    """Each run's part of ``text`` (see :func:`parse_nccl_logs`), after as many empty lines
    as come before it, so that its line numbers are those of the whole text."""
    raw = text.splitlines()
    stripped = [_strip_prefixes(line).strip() for line in raw]
    starts = [0]
    # The latest kind of a run's opening lines seen in the current run (version 0, starting 1,
    # nThread 2; 3 once its table header is seen): a line of a kind not later than it opens the
    # next run, so a run that failed before its table ends where the next one starts.
    seen = -1
    for number, line in enumerate(stripped):
        kind = next((k for k, pattern in enumerate(_RUN_LINES) if pattern.match(line)), None)
        if kind is None and _is_headerless_row(line):
            # Rows pasted without their header open the table as its header would: a run's
            # opening line after them starts the next run.
            seen = 3
        if kind is None:
            continue
        if kind < 3 and kind <= seen:
            starts.append(number)
            seen = -1
        elif kind == 3 and seen == 3:
            # A second table header: a run pasted from its rank lines or its header on (a page
            # that shows several runs, each cut to its table).
            starts.append(_preamble_start(stripped, number, starts[-1]))
            seen = -1
        seen = max(seen, kind)
    _start_after_averages(stripped, starts)
    ends = [*starts[1:], len(raw)]
    return ["\n" * start + "\n".join(raw[start:end]) + "\n" for start, end in zip(starts, ends, strict=True)]


def _preamble_start(stripped: Sequence[str], header: int, floor: int) -> int:
    """Where the run whose table header is on line ``header`` (0-based) starts, given that the
    run before it starts on ``floor``: at the lines just before the header that nccl-tests
    prints before its table (rank lines, '# Using devices', the out-of-place / in-place
    caption, bare '#' lines, a paste's elisions and empty lines), after anything else (the
    previous run's rows and averages, prose between the two). ``stripped``: the text's lines
    without their launcher prefixes."""
    start = header
    while start - 1 > floor and (
        not stripped[start - 1].lstrip("#").strip()
        or _RANK.match(stripped[start - 1])
        or _USING_DEVICES.match(stripped[start - 1])
        or _ELISION.match(stripped[start - 1])
        or _is_caption(stripped[start - 1])
    ):
        start -= 1
    return start


def _is_headerless_row(stripped: str) -> bool:
    """Whether ``stripped`` is a row as nccl-tests prints it, read so where a paste left out
    the table header (:func:`_headerless_layout`)."""
    return bool(_ROW_START.match(stripped)) and _headerless_layout(stripped, "", 0) is not None


def _start_after_averages(stripped: Sequence[str], starts: list[int]) -> None:
    """Move each run's start (``starts``, from the second) back to just after the previous
    run's ``# Avg bus bandwidth`` line, where the output names its binaries before their
    runs (a script's "Running: ./build/all_reduce_perf ..." line), or where the lines between
    the two runs hold a command line (``./broadcast_perf -b 8 ...``, which names the run
    after it even where a paste cut the first run's own), or where prose labels each run with
    its collective ("all_reduce result", a code block, "alltoall result", another: a comment
    on nccl-tests#78): the lines between two runs then go with the run they announce, so that
    each run is told by its own binary's name. ``stripped``: the text's lines without their
    launcher prefixes."""
    header = next((n for n in range(starts[1] if len(starts) > 1 else len(stripped))
                   if _TABLE_HEADER.match(stripped[n])), None)
    preamble = "\n".join(stripped[:header]) if header is not None else ""

    def announced(between: str) -> bool:
        if _BINARY_NAME.search(preamble):
            return _BINARY_NAME.search(between) is not None
        labelled = _spelled_binaries(preamble, _SPELLED_IN_TEXT) and _spelled_binaries(between, _SPELLED_IN_TEXT)
        return bool(labelled) or _COMMAND.search(between) is not None

    for k in range(1, len(starts)):
        averages = [n for n in range(starts[k - 1], starts[k]) if _AVG.match(stripped[n])]
        # A command written over lines that end in a backslash is read as one line.
        between = _CONTINUED.sub(" ", "\n".join(stripped[averages[-1] + 1: starts[k]])) if averages else ""
        if averages and announced(between):
            starts[k] = averages[-1] + 1


def _parse_text(
    text: str, source: str, collective: str | None, nodes: int | None, gpus_per_node: int | None
) -> NcclTestLog:
    """:func:`parse_nccl_log` of the text of one run, read from ``source``."""
    lines = [_strip_prefixes(raw) for raw in text.splitlines()]
    binary = version = nccl_version = None
    binary_line = 0  # the line of '# Collective test starting'
    header = None
    agg_iters: int | None = None
    iters: int | None = None
    blocking = False
    cuda_graph: int | None = None
    step_bytes: int | None = None  # -i: the step between sizes, in bytes
    ranks: dict[int, RankInfo] = {}
    env: dict[str, str] = {}
    env_clash: dict[str, int] = {}
    channels: set[tuple[int, int]] = set()  # (coll, nvls) channels of NCCL's INFO lines
    net_sends: dict[str, list[int]] = {}  # per network, connections with and without GPUDirect RDMA
    local_links: dict[str, int] = {}  # per transport, connections inside a server
    net_devices: set[int] = set()  # devices a rank's IB transport lists
    platform: str | None = None  # the AWS instance the aws-ofi-nccl plugin names
    networks: dict[str, None] = {}  # the networks NCCL's INFO lines say it uses, in order
    command_env: dict[str, str] = {}  # the NCCL variables the output's command lines set
    launches: list[str] = []  # the output's command lines before its table, continuations joined
    continued = False  # the last line was a command's, ending in a backslash
    choices: list[NcclCall] = []  # NCCL's TUNING lines
    shapes: set[tuple[int, int, int]] = set()  # (ranks, nodes, ranks of the node) of NCCL's comm lines
    fragments: list[int] = []
    stray_avg = 0  # the first '# Avg bus bandwidth' line before the table: another run's
    after_avg: list[int] = []  # rows after the table's average: another process's
    rows: list[TestRow] = []
    layout = None
    in_place_first = False
    avg = None
    failure: tuple[int, str] | None = None  # the first of nccl-tests' failure lines: line, text
    elided = False
    headerless: int | None = None  # the first row's line, where rows came without their header
    cut: tuple[int, InputError, str] | None = None  # a row with too few columns: its line, its error, its text
    commented: int | None = None  # the first row after the header with '#' before it
    joined: list[int] = []  # rows read from pieces that NCCL's debug lines split (their first line)
    pieces = [(number, piece) for number, raw in enumerate(lines, start=1) for piece in _unglued(raw)]
    for number, line in pieces:
        stripped = line.strip()
        if not stripped:
            continued = False
            continue
        if layout is None and (continued or _COMMAND_LINE.match(stripped)):
            for key, value in _COMMAND_ENV.findall(stripped):
                command_env[key] = value  # the last command to set it, nearest the run
            if not continued:
                launches.append("")
            launches[-1] += " " + stripped.rstrip("\\")
            continued = stripped.endswith("\\")
        else:
            continued = False
        if _ELISION.match(stripped):
            if ranks and layout is None:
                elided = True  # "..." where the rank lines were cut
            continue
        if stripped.startswith("#"):
            starting, nthread = _STARTING.match(stripped), _NTHREAD.match(stripped)
            if (starting or nthread) and (layout is not None or (nthread and header is not None)):
                raise line_error(source, number, _SECOND_RUN)
            if _RCCL.match(stripped):
                raise line_error(source, number, _NOT_NCCL)
            if starting:
                binary = starting.group(1).rsplit("/", 1)[-1]
                binary_line = number
            elif version_match := _VERSION.match(stripped):
                version = version_match.group(1)
                if (library := _LIBRARY_CODE.search(stripped)) and nccl_version is None:
                    nccl_version = nccl_version_from_code(int(library.group(1)))
            elif _BLOCKING.match(stripped):
                blocking = True
            elif nthread:
                header = (int(nthread.group(1)), int(nthread.group(2)), number)
                agg, graph = _AGG_ITERS.search(stripped), _GRAPH.search(stripped)
                agg_iters = None if agg is None else int(agg.group(1))
                timed = _ITERS.search(stripped)
                iters = None if timed is None else int(timed.group(1))
                cuda_graph = None if graph is None else int(graph.group(1))
                step = _STEP_BYTES.search(stripped)
                step_bytes = None if step is None else int(step.group(1))
            elif stripped.replace("#", "").strip().startswith("Rank"):
                match = _RANK.match(stripped)
                if match is None:
                    raise line_error(
                        source,
                        number,
                        f"expected '#  Rank R [Group G] Pid P on HOST device D [BUS] NAME', got {stripped!r}",
                    )
                rank = int(match.group("rank"))
                if rank in ranks:
                    raise line_error(
                        source,
                        number,
                        f"rank {rank} is listed twice (also line {ranks[rank].line}); "
                        "nccl-tests built without MPI runs one independent test per process",
                    )
                # The GPU's name with its words one space apart (a paste may have turned them to tabs).
                name = " ".join(match.group("name").split())
                if name.startswith("AMD"):
                    raise line_error(source, number, f"rank {rank} is an {name}: {_NOT_NCCL}")
                ranks[rank] = RankInfo(
                    rank, match.group("host"), int(match.group("device")), name, number, match.group("bus").strip()
                )
            elif _is_caption(stripped):
                in_place_first = stripped.index("in-place") < stripped.index("out-of-place")
            elif _TABLE_HEADER.match(stripped):
                if layout is not None:
                    raise line_error(source, number, _SECOND_RUN)
                layout = _layout(stripped, source, number)
            elif avg_match := _AVG.match(stripped):
                if layout is None:
                    # Another run's average, quoted or pasted in part before this run's table
                    # (a reply that quotes the last lines of the run it answers).
                    stray_avg = stray_avg or number
                    continue
                avg = _measured(avg_match.group(1), source, number, "Avg bus bandwidth")
            elif layout is not None and commented is None and _ROW_START.match(stripped.lstrip("#").strip()):
                commented = number
            continue
        failed = _TEST_FAILURE.search(stripped)
        if failure is None and failed:
            failure = (number, failed.group(0).strip())
        if failed or _MPI_HELP.match(stripped):
            continue  # a failure written onto a row's start; Open MPI's count of repeated notices
        if nccl_match := _NCCL_VERSION.match(stripped):
            nccl_version = nccl_match.group(1)
        elif env_match := _ENV_SET.search(stripped):
            key, value = env_match.groups()
            if env.setdefault(key, value) != value and key not in env_clash:
                env_clash[key] = number
        elif channels_match := _CHANNELS.search(stripped):
            channels.add((int(channels_match.group(1)), int(channels_match.group(2))))
        elif shape_match := _COMM_SHAPE.search(stripped):
            shapes.add((int(shape_match.group(1)), int(shape_match.group(2)), int(shape_match.group(3))))
        elif tuning := _TUNING_NAMED.search(stripped):
            function, n_bytes, algorithm, protocol, lo, hi = tuning.groups()
            choices.append(NcclCall(function, int(n_bytes), algorithm, protocol, int(hi) - int(lo) + 1, True))
        elif tuning := _TUNING_NUMBERED.search(stripped):
            function, n_bytes, algorithm, protocol = tuning.groups()
            choices.append(NcclCall(function or "", int(n_bytes), algorithm, protocol, None, False))
        elif net_match := _NET_SEND.search(stripped):
            net_sends.setdefault(net_match.group(1), [0, 0])[net_match.group(2) is None] += 1
        elif local_match := _LOCAL_LINK.search(stripped):
            transport = local_match.group(1) or "SHM"
            local_links[transport] = local_links.get(transport, 0) + 1
        elif using := _IB_USING.search(stripped):
            net_devices.add(using.group(1).count("["))
        elif on_platform := _OFI_PLATFORM.search(stripped):
            platform = platform or on_platform.group(1)
        elif network := _USING_NETWORK.search(stripped):
            networks.setdefault(network.group(1))
        elif layout is None and not rows and _ROW_START.match(stripped) and (
            guessed := _headerless_layout(stripped, source, number)
        ):
            layout = guessed  # rows pasted without the table header
            headerless = number
            rows.append(_row(stripped, source, number, layout, in_place_first))
        elif layout is not None and avg is None and _ROW_START.match(stripped):
            if cut is not None:
                raise cut[1]  # rows after it: a row short inside the table
            short = _short_row(stripped, source, number, layout)
            if short is None:
                rows.append(_row(stripped, source, number, layout, in_place_first))
            else:
                cut = (number, short, stripped)
        elif layout is not None and avg is None and _FRAGMENT.match(stripped):
            if cut is None:
                fragments.append(number)
                continue
            # The rest of a row other output split: read with the row's start, on its line.
            whole = f"{cut[2]} {stripped}"
            short = _short_row(whole, source, cut[0], layout)
            if short is None:
                rows.append(_row(whole, source, cut[0], layout, in_place_first))
                joined.append(cut[0])
                cut = None
            else:
                cut = (cut[0], short, whole)
        elif layout is not None and avg is not None and _ROW_START.match(stripped) and len(
            stripped.split()
        ) >= layout.needed:
            after_avg.append(number)
    last = len(lines)
    if failure is not None and not rows:
        raise line_error(source, failure[0], f"the run failed before printing results: {failure[1]}")
    if layout is None:
        if header is None and not ranks:
            if not text.strip():
                raise InputError(f"{source}: empty: no nccl-tests output in it")
            if "\0" in text or text.count("\ufffd") > len(text) // 100:
                raise InputError(f"{source}: not text (binary data): no nccl-tests output in it")
            raise InputError(
                f"{source}: no '#  size  count  type ...' table header and no '# nThread' line: "
                "is this nccl-tests output?"
            )
        raise InputError(
            f"{source}, line {last}: output ends before the '#  size  count  type ...' table header (truncated?)"
        )
    if cut is not None and (avg is not None or not rows):
        # The table goes on to its average after the short row (a row garbled, not output
        # cut off), or no row is whole.
        raise cut[1]
    if not rows and commented is not None:
        # A table kept as comments (in a Makefile, a script): not one cut short.
        raise line_error(source, commented, "the table's rows are comment lines ('#' before each, as on this line): "
                                            "remove the '#' to check them")
    if not rows:
        raise line_error(source, layout.line, "table header but no rows after it (truncated?)")
    # A paste that starts in the middle of the rank lines lists a run of them up to the last;
    # a launcher or a filter may leave some ranks' lines only (each host's last, say). Either
    # way the ranks come from the cluster's shape, as without rank lines.
    # A "..." after a whole list (its ranks 0 to N-1, N what NCCL's comm lines count) left
    # out other lines (NCCL's INFO lines, nccl-tests#321), not ranks.
    listed_whole = sorted(ranks) == list(range(len(ranks))) and any(shape[0] == len(ranks) for shape in shapes)
    partial = bool(ranks) and (elided and not listed_whole or sorted(ranks) != list(range(len(ranks))))
    warnings: list[str] = [
        f"line {line}: {key} set to two values by NCCL's INFO lines; using the first, {env[key]}"
        for key, line in env_clash.items()
    ]
    if stray_avg:
        warnings.append(f"line {stray_avg}: an '# Avg bus bandwidth' line before the table (another run's, pasted "
                        "in part): skipped")
    if headerless is not None:
        warnings.append(f"line {headerless}: rows without nccl-tests' table header; their columns are read as "
                        f"nccl-tests prints them ({' '.join(layout.printed)})")
    if joined:
        where = ", ".join(str(n) for n in joined[:5]) + (", ..." if len(joined) > 5 else "")
        warnings.append(f"line{'s' if len(joined) > 1 else ''} {where}: rows split over lines by other output "
                        "(NCCL's INFO lines), read joined")
    if fragments:
        where = ", ".join(str(n) for n in fragments[:5]) + (", ..." if len(fragments) > 5 else "")
        warnings.append(
            f"line{'s' if len(fragments) > 1 else ''} {where}: times and bandwidths without a size "
            "(a row that other output cut in two); skipped"
        )
    if after_avg:
        # nccl-tests prints its average after its last row; a row after it is another
        # process's, as two processes of nccl-tests built without MPI print to one stream.
        where = ", ".join(str(n) for n in after_avg[:5]) + (", ..." if len(after_avg) > 5 else "")
        warnings.append(
            f"line{'s' if len(after_avg) > 1 else ''} {where}: {'rows' if len(after_avg) > 1 else 'a row'} after the "
            f"table's closing '# Avg bus bandwidth' line; skipped: another process's table interleaved with this "
            "one? (nccl-tests built without MPI runs one test per process, each printing its own)"
        )
    if cut is not None:
        # The output ends inside its last row (a log cut at a byte count, a run killed while
        # printing), as it may end between two rows.
        warnings.append(f"line {cut[0]}: the output ends inside this row ({len(lines[cut[0] - 1].split())} of "
                        f"{layout.needed} columns); skipped, the {len(rows)} complete rows before it are checked")
    if failure is not None:
        warnings.append(f"line {failure[0]}: the run failed after the row on line {rows[-1].line}: {failure[1]}; "
                        f"the {len(rows)} rows before it are checked")
    elif avg is None and cut is None:
        warnings.append(
            f"no '# Avg bus bandwidth' line after the row on line {rows[-1].line}: the output is "
            f"pasted in part or the test did not finish; the {len(rows)} rows present are checked"
        )
    n_ranks = len(ranks) if ranks and not partial else None
    binary = _pick_binary(collective, binary, f"line {binary_line}", text, source, rows, n_ranks, warnings)
    ranks_from = "rank lines"
    if ranks and not partial:
        ordered = tuple(ranks[r] for r in range(len(ranks)))
        warnings.extend(_gpus_per_host_mismatch(ordered, gpus_per_node))
    else:
        per_process = None if header is None else header[0] * header[1]
        given = "arguments"
        if nodes is None and gpus_per_node is None and len(shapes) == 1:
            # NCCL's comm lines give the shape where every node has the same ranks.
            n_ranks_info, nodes_info, local = next(iter(shapes))
            if nodes_info * local == n_ranks_info:
                nodes, gpus_per_node, given = nodes_info, local, "NCCL INFO comm lines"
        launched = _launch_shape(launches, per_process) if nodes is None and gpus_per_node is None else None
        fitting = _ranks_from_busbw(rows, BINARIES[binary]) if launched else None
        if launched and (fitting is None or fitting[0] <= launched[0] * launched[1] <= fitting[1]):
            # A launcher's shape that the busbw ratio contradicts (a command quoted from another
            # run) is not taken: the ratio or the arguments decide, as without it.
            nodes, gpus_per_node, given = *launched, "launcher's command line"
        ordered, ranks_from = _made_up_ranks(
            source, layout.line, BINARIES[binary], rows, per_process, nodes, gpus_per_node, warnings, ranks, given
        )
    rows = _unreported(_judged(rows, len(ordered)), binary, layout.legacy_error)
    warnings.extend(_miscounted(rows, BINARIES[binary], len(ordered)))
    warnings.extend(_repeated(rows, BINARIES[binary], len(ordered), step_bytes))
    return NcclTestLog(
        source,
        BINARIES[binary],
        binary,
        version,
        None if header is None else header[0],
        None if header is None else header[1],
        ordered,
        tuple(rows),
        avg,
        nccl_version,
        ranks_from,
        tuple(warnings),
        agg_iters,
        cuda_graph,
        tuple(env.items()),
        tuple(sorted(channels)),
        tuple((name, with_gdr, without) for name, (with_gdr, without) in net_sends.items()),
        tuple(choices),
        tuple(local_links.items()),
        tuple(sorted(net_devices)),
        platform,
        started=_first_stamp(text),
        sha256=_sha256(text),
        iters=iters,
        networks=tuple(networks),
        command_env=tuple(command_env.items()),
        blocking=blocking,
    )


def _sha256(text: str) -> str:
    """:attr:`NcclTestLog.sha256` of a run's ``text``."""
    # A lone surrogate (bytes of a file that were not UTF-8) is hashed as it stands.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# The time stamps with a date that launchers and loggers put before a line (of _TAG_PREFIX's):
# ISO 8601 (kubectl's --timestamps, ts's and Jenkins' in brackets, Python's logging with a
# comma before the fraction) and ctime's of mpirun --timestamp-output. A stamp without a year
# (ts's default "Dec 06 07:44:54") does not date the run.
_DATED_STAMP = re.compile(
    r"^[\s>]*\[?(\d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)[\]\s]"
    r"|^[\s>]*[A-Z][a-z]{2}\s+([A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4})(?:\[\d+,\d+\])?<std(?:out|err)>:"
)


def _first_stamp(text: str) -> str | None:
    """The time stamp of the first line of ``text`` that carries one with a date, ISO 8601
    (UTC where it names no zone); None where no line does (:attr:`NcclTestLog.started`)."""
    for line in text.splitlines():
        if stamp := _DATED_STAMP.match(line):
            try:
                if stamp.group(1):
                    when = datetime.datetime.fromisoformat(stamp.group(1).replace(",", "."))
                else:
                    when = datetime.datetime.strptime(" ".join(stamp.group(2).split()), "%b %d %H:%M:%S %Y")
            except ValueError:
                continue  # a date that does not exist (2024-13-45): not a time stamp
            return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).isoformat()
    return None


def _miscounted(rows: Sequence[TestRow], collective: str, n_ranks: int) -> list[str]:
    """A warning naming the rows whose count of elements does not make their size: nccl-tests
    prints S = count x the type's size, times the ranks where the collective splits S over
    them (its ``paramcount``, each rank's or peer's part). The prediction runs the size."""
    parts = n_ranks if collective in SPLIT else 1
    wrong = [row for row in rows
             if row.dtype in DTYPE_BYTES and row.size_bytes != row.count * DTYPE_BYTES[row.dtype] * parts
             and not (collective == "all_to_all_v" and row.count == 0)]  # count 0: a matrix file's sizes
    if not wrong:
        return []
    first = wrong[0]
    element = DTYPE_BYTES[first.dtype]
    each = f" for each of {n_ranks} ranks" if parts > 1 else ""
    where = ", ".join(str(row.line or row.key) for row in wrong[:5]) + (", ..." if len(wrong) > 5 else "")
    where = f"line{'s' if len(wrong) > 1 else ''} {where}" if first.line else where  # JSON: the results' keys
    return [f"{where}: count {first.count} of {first.dtype} ({element} B){each} makes "
            f"{first.count * element * parts} B, not the {first.size_bytes} B of the size column"
            f"{' (the first of them)' if len(wrong) > 1 else ''}: a row edited or garbled; predicting the size"]


def _repeated(rows: Sequence[TestRow], collective: str, n_ranks: int, step_bytes: int | None) -> list[str]:
    """A warning naming the rows whose size an earlier row of the same table (type,
    reduction and root) printed: sizes grow down a table, so a size printed twice is two
    processes' tables interleaved (nccl-tests built without MPI runs one test per process),
    or where the whole sweep runs again in order, nccl-tests' ``-N`` (run cycles). But for
    size 0, and steps (``step_bytes``, -i) finer than a size's unit (the type's size, times
    the ranks where the collective splits it), which nccl-tests rounds to the same size."""
    unit = min((DTYPE_BYTES.get(row.dtype, 1) for row in rows), default=1) * (n_ranks if collective in SPLIT else 1)
    if step_bytes is not None and step_bytes < unit:
        return []
    first: dict[tuple, TestRow] = {}
    again = []  # (row, the earlier row of its size)
    for row in rows:
        earlier = first.setdefault((row.dtype, row.redop, row.root, row.size_bytes), row)
        if earlier is not row and row.size_bytes > 0:
            again.append((row, earlier))
    if not again:
        return []
    row, earlier = again[0]
    # Each block's sweep (a type, reduction and root: -d all, -o all, -r -1) again from a row
    # on, in order: nccl-tests' -N (run cycles) repeats it, block by block.
    blocks: dict[tuple, list[int]] = {}
    for r in rows:
        blocks.setdefault((r.dtype, r.redop, r.root), []).append(r.size_bytes)
    periods = [next((p for p in range(1, len(sizes)) if sizes[p] == sizes[0]), len(sizes)) for sizes in blocks.values()]
    cycled = zip(blocks.values(), periods, strict=True)
    if all(all(sizes[i] == sizes[i % p] for i in range(len(sizes))) for sizes, p in cycled):
        block = blocks[(row.dtype, row.redop, row.root)]
        period = periods[list(blocks).index((row.dtype, row.redop, row.root))]
        return [f"line {row.line}: the sizes run again from this line (first on line {earlier.line}), "
                f"{-(-len(block) // period)} times in all: nccl-tests' -N (run cycles), or a second process's "
                "table after the first; each row is checked"]
    where = ", ".join(str(r.line) for r, _ in again[:5]) + (", ..." if len(again) > 5 else "")
    return [f"line{'s' if len(again) > 1 else ''} {where}: size {row.size_bytes} B printed a second time in the same "
            f"table (first on line {earlier.line}){' (the first of them)' if len(again) > 1 else ''}: two processes' "
            "tables interleaved? (nccl-tests built without MPI runs one test per process, each printing its own); "
            "each row is checked"]


def _gpus_per_host_mismatch(ranks: Sequence[RankInfo], gpus_per_node: int | None) -> list[str]:
    """A warning where the ranks' hosts do not each hold ``gpus_per_node`` of them (the
    ``--gpus-per-node`` given for a log whose rank lines say otherwise), as ``--nodes`` gets one."""
    if gpus_per_node is None:
        return []
    counts = sorted(set(Counter(rank.host for rank in ranks).values()))
    if counts == [gpus_per_node]:
        return []
    held = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return [f"the log's rank lines put {held} GPU(s) on each host, not {gpus_per_node} (--gpus-per-node): "
            "predicting the ranks they name"]


def _from_json(run: JsonRun, source: str, collective: str | None, gpus_per_node: int | None = None) -> NcclTestLog:
    """The log a JSON file holds; its binary is the one ``args[0]`` names where it names one
    flowsim checks, else told as for text output (command line, file name, rows)."""
    program = run.program if _STARTING_BINARY.fullmatch(run.program) else None
    warnings = [*run.warnings, *_gpus_per_host_mismatch(run.ranks, gpus_per_node)]
    binary = _pick_binary(collective, program, "args[0]", run.command, source, run.rows, len(run.ranks), warnings)
    warnings.extend(_miscounted(run.rows, BINARIES[binary], len(run.ranks)))
    return NcclTestLog(
        source,
        BINARIES[binary],
        binary,
        None,
        run.n_threads,
        run.n_gpus,
        run.ranks,
        run.rows,
        run.avg_busbw_GBps,
        run.nccl_version,
        "rank lines",
        tuple(warnings),
        run.agg_iters,
        run.cuda_graph,
        run.nccl_env,
        iters=run.iters,
        blocking=run.blocking,
    )


def _pick_binary(
    collective: str | None,
    starting: str | None,
    starting_at: str,
    text: str,
    source: str,
    rows: Sequence[TestRow],
    n_ranks: int | None,
    warnings: list[str],
) -> str:
    """The binary that wrote the run: the test the run names (``starting``, at ``starting_at``),
    else ``collective``, else the one the text, the file name or the rows tell. A ``collective``
    the named test contradicts adds a warning to ``warnings``, as ``--nodes`` the rank lines
    contradict does: the binary prints its own name."""
    known = None if starting is None else _STARTING_BINARY.fullmatch(starting)
    if collective is not None:
        binary = _COLLECTIVE_BINARY.get(collective, collective)
        if binary not in BINARIES:
            raise InputError(f"unknown collective {collective!r}; valid ones: {', '.join(_COLLECTIVE_BINARY)}")
        if known is None:
            return _against_rows(binary, "--collective", rows, n_ranks, warnings)
        if known.group(1) == binary:
            return binary
        warnings.append(f"{starting_at}: the log names its test {starting}, not {binary} (--collective): "
                        f"checking it as the {known.group(1)} it names")
        return known.group(1)
    if starting is not None:
        if known is None:
            raise InputError(
                f"{source}: nccl-tests binary {starting!r} is not one flowsim checks; valid ones: {', '.join(BINARIES)}"
            )
        return known.group(1)
    named = set(_BINARY_NAME.findall(text))
    if len(named) == 1:
        return _against_rows(named.pop(), "the text around the table", rows, n_ranks, warnings)
    named = set(_FILE_BINARY_NAME.findall(Path(source).name.replace("-", "_"))) if source != "<text>" else set()
    if len(named) == 1:
        return _against_rows(named.pop(), "the file name", rows, n_ranks, warnings)
    fitting = _infer_binary(rows, n_ranks)
    if len(fitting) > 1:
        # Rows that fit several binaries (all-gather and all-to-all have one bus factor): the
        # one the text or file name spells, as a wrapper script's "-t all_gather" does.
        name = Path(source).name if source != "<text>" else ""
        spelled = fitting & (_spelled_binaries(text, _SPELLED_IN_TEXT) | _spelled_binaries(name, _SPELLED_IN_NAME))
        fitting = spelled if len(spelled) == 1 else fitting
    if len(fitting) == 1:
        return fitting.pop()
    choices = ", ".join(sorted(fitting)) or "none of them"
    raise InputError(
        f"{source}: cannot tell which nccl-tests binary wrote this output (fits {choices}); "
        "give the collective explicitly (--collective NAME, collective=)"
    )
