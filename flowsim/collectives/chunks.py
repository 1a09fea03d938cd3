"""NCCL's chunks: how much data one channel moves per step, and how many such pieces follow
each other through the pipeline.

NCCL moves a collective's data through per-channel buffers of ``NCCL_STEPS`` (8) slots per
connection. The slot (``stepSize``) is the protocol's buffer over ``NCCL_STEPS``; a *chunk*
is what one step of the algorithm sends, and the chunks of one channel follow each other
through the slots, so that the steps of consecutive chunks overlap (the pipeline). Each
rule below is NCCL 2.30.7's (file named on each; docs/hardware.md §7.4):

Buffers (``src/init.cc``, ``src/include/device.h``)
    Simple: ``DEFAULT_BUFFSIZE`` 4 MiB. LL: ``NCCL_LL_LINES_PER_THREAD`` (8) x
    ``NCCL_LL_MAX_NTHREADS`` (512) x ``NCCL_STEPS`` x 16-byte lines (512 KiB), half of it
    payload. LL128: ``NCCL_LL128_ELEMS_PER_THREAD`` (120) x ``NCCL_LL128_MAX_NTHREADS``
    (640) x ``NCCL_STEPS`` x 8 bytes (4.9 MB), 15 of every 16 words payload.
    ``NCCL_BUFFSIZE``, ``NCCL_LL_BUFFSIZE`` and ``NCCL_LL128_BUFFSIZE`` replace them
    (``computeBuffSizes``), and every slot, chunk and slice below scales with them.
Chunk (``src/enqueue.cc`` ``calcCollChunking``)
    ``stepSize x chunkSteps`` of payload, where ``chunkSteps`` is the collective's
    ``*_CHUNKSTEPS`` (``src/include/collectives.h``: 4 for ring all-reduce, all-gather and
    reduce-scatter with Simple, 1 otherwise), then per algorithm: NVLS caps the chunk at
    ``nvlsChunkSize`` (128 KiB, ``src/transport/nvls.cc``) and halves it down to 64, 32 and
    16 KiB while the bytes are under 64, 8 and 2 times ``channels x heads x chunk``;
    NVLSTree starts from ``min(nvlsChunkSize, nvlsTreeMaxChunkSize)`` (the tree maximum is
    64 KiB from 4 nodes) and drops to 256, 128, 64 and 32 KiB under 32, 16, 4 and 1 times
    ``channels x heads x chunk``; the LL128 tree halves the chunk while
    ``bytes / (channels x chunk)`` is under ``(1 + log2(nodes) + ppn / 10) x 64 / ppn``
    (down to 128 KiB) and ``... x 16 / ppn`` (down to 32 KiB); CollNet Direct halves the
    chunk while ``bytes / (channels x heads x chunk)`` is under 64 times its depth (down to
    128 KiB), then 8 times (down to 64, then 32 KiB), and CollNet Chain from at most 256 KiB
    while ``bytes / (channels x chunk)`` is under 64, 8 and 1 times its depth (down to 128, 64
    and 32 KiB).
Slices (``src/device/prims_simple.h``)
    With Simple, a ring step's chunk goes as ``chunkSteps / sliceSteps`` (2) slices, each
    posted to the peer as it completes; LL and LL128 post every line (16 or 128 bytes) as it
    is written, so their steps stream.
Loops (``src/device/all_reduce.h`` ``runRing``)
    A ring channel works through its share in loops of ``ranks x chunk``; the last loop's
    chunk shrinks to its remainder over the ranks.

:func:`nccl_chunking` gives the chunk and slices of one call; :func:`pipeline_pieces`
turns them into the number of pieces one channel's message of one step (ring) or one
channel's data (trees, NVLS) is cut into, which is what flowsim's step DAG slices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowsim.errors import InputError

__all__ = [
    "MIN_BUFFER_BYTES",
    "NCCL_BUFFER_BYTES",
    "NCCL_STEPS",
    "NVLS_CHUNK_BYTES",
    "NcclChunking",
    "nccl_chunking",
    "pipeline_pieces",
]

#: Slots per connection ([NCCL] src/include/device.h).
NCCL_STEPS = 8

#: Each protocol's per-connection buffer in bytes, lines and flags included ([NCCL]
#: src/init.cc ``DEFAULT_LL_BUFFSIZE``, ``DEFAULT_LL128_BUFFSIZE``, ``DEFAULT_BUFFSIZE``).
NCCL_BUFFER_BYTES = {
    "ll": 8 * 512 * NCCL_STEPS * 16,
    "ll128": 120 * 640 * NCCL_STEPS * 8,
    "simple": 1 << 22,
}

#: The smallest buffer flowsim takes: ``NCCL_STEPS`` slots of one LL128 line (128 bytes), so
#: that every protocol's slot holds payload.
MIN_BUFFER_BYTES = NCCL_STEPS * 128

#: ``nvlsChunkSize``: ``NCCL_NVLS_CHUNKSIZE``'s default ([NCCL] src/transport/nvls.cc).
NVLS_CHUNK_BYTES = 128 * 1024

# *_CHUNKSTEPS / *_SLICESTEPS of ring Simple ([NCCL] src/include/collectives.h): all-reduce,
# all-gather and reduce-scatter take NCCL_STEPS / 2 and NCCL_STEPS / 4; the others 1 and 1.
_RING_SIMPLE_STEPS = {
    "all_reduce": (NCCL_STEPS // 2, NCCL_STEPS // 4),
    "all_gather": (NCCL_STEPS // 2, NCCL_STEPS // 4),
    "reduce_scatter": (NCCL_STEPS // 2, NCCL_STEPS // 4),
}


@dataclass(frozen=True)
class NcclChunking:
    """One call's chunking.

    Attributes
    ----------
    chunk_bytes : int
        Payload one channel sends per step of the algorithm (per head for NVLS and NVLSTree).
    slices_per_chunk : int
        Pieces a chunk is posted in (Simple ring: ``chunkSteps / sliceSteps``; else 1).
    min_slice_bytes : int
        Smallest slice (Simple: the slice's slots over 32); a chunk under
        ``slices_per_chunk`` of these goes in fewer slices.
    streams : bool
        LL and LL128: each line is posted as it is written, so a hop forwards data before the
        chunk has arrived.
    """

    chunk_bytes: int
    slices_per_chunk: int
    min_slice_bytes: int
    streams: bool


def _log2i(x: int) -> int:
    return int(x).bit_length() - 1 if x > 0 else -1


def nccl_chunking(
    collective: str,
    algorithm: str,
    protocol: str,
    n_bytes: int,
    *,
    n_channels: int,
    n_heads: int = 1,
    n_nodes: int = 1,
    n_ranks: int = 1,
    nvls_chunk_bytes: int = NVLS_CHUNK_BYTES,
    nvls_tree_max_chunk_bytes: int | None = None,
    buffer_bytes: int | None = None,
) -> NcclChunking:
    """NCCL's chunk for one call ([NCCL] src/enqueue.cc ``calcCollChunking``, 2.30.7).

    Parameters
    ----------
    collective : str
        flowsim's name (``"all_reduce"`` ...).
    algorithm : {"ring", "tree", "nvls", "nvls_tree", "pat", "collnet_direct", "collnet_chain"}
    protocol : {"ll", "ll128", "simple"}
    n_bytes : int
        The call's bytes as NCCL counts them (each rank's buffer for all-reduce).
    n_channels : int
        Channels the call runs on.
    n_heads : int
        NVLS and NVLSTree: the NVLS heads (ranks of one server); CollNet Direct: its heads.
    n_nodes, n_ranks : int
        Servers and ranks of the communicator (the LL128 tree's and CollNet Direct's rules).
    nvls_chunk_bytes, nvls_tree_max_chunk_bytes : int
        ``nvlsChunkSize`` and ``nvlsTreeMaxChunkSize`` (:func:`flowsim.collectives.tuner.nvls_tuning`);
        default 128 KiB, and 64 KiB from 4 nodes, else the chunk.
    buffer_bytes : int, optional
        The protocol's per-connection buffer (``comm->buffSizes``: ``NCCL_BUFFSIZE``,
        ``NCCL_LL_BUFFSIZE``, ``NCCL_LL128_BUFFSIZE``); default :data:`NCCL_BUFFER_BYTES`.

    Examples
    --------
    A 4 MiB NVLSTree all-reduce on 2 servers of 8 H100 (16 channels, 8 heads): 4 MiB is
    under 4 x 128 x 128 KiB, so 64 KiB, and under 1 x 128 x 64 KiB, so 32 KiB:

    >>> nccl_chunking("all_reduce", "nvls_tree", "simple", 4 << 20, n_channels=16, n_heads=8, n_nodes=2).chunk_bytes
    32768
    """
    if protocol not in NCCL_BUFFER_BYTES:
        raise InputError(f"unknown protocol {protocol!r}; valid ones: {', '.join(NCCL_BUFFER_BYTES)}")
    if n_channels < 1 or n_heads < 1:
        raise InputError(f"chunking needs channels and heads >= 1, got {n_channels} and {n_heads}")
    if buffer_bytes is None:
        buffer_bytes = NCCL_BUFFER_BYTES[protocol]
    if buffer_bytes < MIN_BUFFER_BYTES:
        raise InputError(f"a {protocol} buffer of {buffer_bytes} bytes is under {MIN_BUFFER_BYTES}: "
                         f"{NCCL_STEPS} slots of one 128-byte line")
    step = buffer_bytes // NCCL_STEPS
    chunk_steps, slice_steps = 1, 1
    if protocol == "simple" and algorithm == "ring":
        chunk_steps, slice_steps = _RING_SIMPLE_STEPS.get(collective, (1, 1))
    chunk = step * chunk_steps
    if protocol == "ll":
        chunk //= 2
    elif protocol == "ll128":
        chunk = chunk // 16 * 15
    concurrent = n_channels * n_heads
    if nvls_tree_max_chunk_bytes is None:
        nvls_tree_max_chunk_bytes = 65536 if n_nodes >= 4 else nvls_chunk_bytes
    if algorithm == "nvls":
        chunk = min(chunk, nvls_chunk_bytes)
        for times, floor in ((64, 65536), (8, 32768), (2, 16384)):
            if n_bytes < times * concurrent * chunk and chunk > floor:
                chunk = floor
    elif algorithm == "nvls_tree":
        chunk = min(nvls_chunk_bytes, nvls_tree_max_chunk_bytes)
        for times, floor in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
            if n_bytes < times * concurrent * chunk and chunk > floor:
                chunk = floor
    elif algorithm == "collnet_direct":
        # Halved while bytes / (channels x heads x chunk) is under depth x 64 (down to
        # 128 KiB), then depth x 8 (down to 64 KiB, then 32 KiB); the depth is 2 where a
        # server has several ranks, else 1 ([NCCL] src/graph/connect.cc connectCollNet).
        depth = 2 if n_ranks > n_nodes else 1
        for times, floor in ((64, 131072), (8, 65536), (8, 32768)):
            while n_bytes // (concurrent * chunk) < depth * times and chunk > floor:
                chunk //= 2
    elif algorithm == "collnet_chain":
        # The Simple slot, at most 256 KiB, halved while bytes / (channels x chunk) is under
        # depth x 64 (down to 128 KiB), depth x 8 (64 KiB) and depth (32 KiB); the depth is
        # the ranks of a server ([NCCL] src/graph/connect.cc ncclTopoPostset).
        depth = max(1, n_ranks // n_nodes)
        chunk = min(256 * 1024, chunk)
        for times, floor in ((64, 131072), (8, 65536), (1, 32768)):
            while n_bytes // (n_channels * chunk) < depth * times and chunk > floor:
                chunk //= 2
    elif algorithm == "pat":
        # All-gather halves while 32 x channels x chunk exceeds the bytes, reduce-scatter 16 x,
        # down to 64 KiB (``n_bytes``: the gathered total, as ncclFuncMaxSendRecvCount).
        times = 32 if collective == "all_gather" else 16
        while chunk * n_channels * times > n_bytes and chunk > 65536:
            chunk //= 2
    elif algorithm == "tree" and protocol == "ll128":
        ppn = n_ranks / n_nodes
        steps = 1 + _log2i(n_nodes) + 0.1 * ppn
        while n_bytes // (n_channels * chunk) < steps * 64 / ppn and chunk > 131072:
            chunk //= 2
        while n_bytes // (n_channels * chunk) < steps * 16 / ppn and chunk > 32768:
            chunk //= 2
    return NcclChunking(chunk, chunk_steps // slice_steps, step * slice_steps // 32, protocol != "simple")


def pipeline_pieces(chunking: NcclChunking, channel_bytes: float, n_parts: int, most: int) -> int:
    """Pieces one channel's data goes in, at most ``most``.

    ``channel_bytes`` is one channel's share of the call; ``n_parts`` the parts it is cut into
    before chunking (the ranks of a ring, whose loops carry one chunk per rank; the heads of
    NVLS and NVLSTree; 1 for trees). Every loop's chunk goes as
    :attr:`~NcclChunking.slices_per_chunk` slices of at least
    :attr:`~NcclChunking.min_slice_bytes` ([NCCL] src/device/prims_simple.h: ``sliceSize =
    max(nelem / SlicePerChunk, sliceSize / 32)``).

    >>> simple = nccl_chunking("all_reduce", "ring", "simple", 1 << 30, n_channels=24)
    >>> simple.chunk_bytes, simple.slices_per_chunk, simple.min_slice_bytes
    (2097152, 2, 32768)
    >>> pipeline_pieces(simple, (1 << 30) / 24, 8, 64)   # 5.3 MiB per rank: 3 loops of 2 slices
    6
    >>> pipeline_pieces(simple, (1 << 20) / 24, 8, 64)   # 5.3 KiB per rank: one slice
    1
    """
    part = channel_bytes / n_parts
    loops = max(1, math.ceil(part / chunking.chunk_bytes))
    chunk = part / loops
    slices = min(chunking.slices_per_chunk, max(1, math.ceil(chunk / chunking.min_slice_bytes)))
    return int(min(most, loops * slices))
