"""NCCL's chunk sizes (src/enqueue.cc calcCollChunking, 2.30.7), checked on cases worked out
by hand from the rules in flowsim/collectives/chunks.py's docstring."""

import pytest

from flowsim.collectives.chunks import NCCL_BUFFER_BYTES, nccl_chunking, pipeline_pieces
from flowsim.errors import InputError

MiB = 1 << 20


def test_buffers_are_nccls_defaults():
    assert NCCL_BUFFER_BYTES == {"ll": 524288, "ll128": 4915200, "simple": 4194304}


@pytest.mark.parametrize(
    ("collective", "algorithm", "protocol", "chunk", "slices"),
    [
        # Simple ring all-reduce: 512 KiB slots x ALLREDUCE_CHUNKSTEPS 4, in 2 slices.
        ("all_reduce", "ring", "simple", 2 * MiB, 2),
        ("all_gather", "ring", "simple", 2 * MiB, 2),
        # Broadcast: BROADCAST_CHUNKSTEPS 1.
        ("broadcast", "ring", "simple", 512 * 1024, 1),
        # LL: 64 KiB slots of 16-byte lines, half payload.
        ("all_reduce", "ring", "ll", 32 * 1024, 1),
        # LL128: 614,400-byte slots, 15 of 16 words payload.
        ("all_reduce", "ring", "ll128", 576000, 1),
        # Tree, Simple: one slot.
        ("all_reduce", "tree", "simple", 512 * 1024, 1),
    ],
)
def test_chunk_of_each_protocol(collective, algorithm, protocol, chunk, slices):
    got = nccl_chunking(collective, algorithm, protocol, 1 << 34, n_channels=16, n_nodes=2, n_ranks=16)
    assert (got.chunk_bytes, got.slices_per_chunk, got.streams) == (chunk, slices, protocol != "simple")


@pytest.mark.parametrize(
    ("n_bytes", "chunk"),
    [
        # 16 channels x 8 heads = 128 concurrent operations.
        (4 * MiB, 32768),  # < 4 x 128 x 128K -> 64K; < 1 x 128 x 64K = 8 MiB -> 32K
        (8 * MiB, 65536),  # < 64 MiB -> 64K; not < 8 MiB
        (16 * MiB, 65536),
        (64 * MiB, 131072),  # not < 64 MiB; < 16 x 128 x 128K but the chunk is not > 128K
        (1 << 30, 131072),
    ],
)
def test_nvls_tree_chunk_shrinks_below_its_thresholds(n_bytes, chunk):
    got = nccl_chunking("all_reduce", "nvls_tree", "simple", n_bytes, n_channels=16, n_heads=8, n_nodes=2)
    assert got.chunk_bytes == chunk


def test_nvls_tree_chunk_is_64k_from_four_nodes():
    got = nccl_chunking("all_reduce", "nvls_tree", "simple", 1 << 34, n_channels=16, n_heads=8, n_nodes=4)
    assert got.chunk_bytes == 65536


@pytest.mark.parametrize(
    ("n_bytes", "chunk"),
    [
        (128 * MiB, 65536),  # < 64 x 128 x 128K = 1 GiB -> 64K; not < 8 x 128 x 64K = 64 MiB
        (32 * MiB, 32768),  # < 64 MiB -> 32K; not < 2 x 128 x 32K = 8 MiB
        (4 * MiB, 16384),  # < 8 MiB -> 16K
        (2 << 30, 131072),
    ],
)
def test_nvls_chunk_shrinks_below_its_thresholds(n_bytes, chunk):
    got = nccl_chunking("all_reduce", "nvls", "simple", n_bytes, n_channels=16, n_heads=8)
    assert got.chunk_bytes == chunk


def test_ll128_tree_chunk_shrinks_for_mid_sizes():
    # 2 nodes of 8: nstepsLL128 = 1 + 1 + 0.8 = 2.8. 2 MiB / (16 x chunk) stays under
    # 2.8 x 64 / 8 = 22.4: 576000 -> 288000 -> 144000 -> 72000 (the last above 128K);
    # then under 2.8 x 16 / 8 = 5.6: 72000 -> 36000 (1.8 < 5.6) -> 18000 (3.6 < 5.6).
    got = nccl_chunking("all_reduce", "tree", "ll128", 2 * MiB, n_channels=16, n_nodes=2, n_ranks=16)
    assert got.chunk_bytes == 18000


def test_pipeline_pieces_count_loops_and_slices():
    simple = nccl_chunking("all_reduce", "ring", "simple", 1 << 30, n_channels=1)
    # 8 ranks x 2 MiB loops: 64 MiB per channel is 4 loops of 2 slices.
    assert pipeline_pieces(simple, 64 * MiB, 8, 64) == 8
    assert pipeline_pieces(simple, 64 * MiB, 8, 4) == 4
    # Slices are at least 32 KiB (prims_simple.h: max(nelem / 2, sliceSize / 32)): a 24 KiB
    # chunk goes in one, a 40 KiB chunk in two (32 KiB and 8 KiB).
    assert pipeline_pieces(simple, 8 * 24 * 1024, 8, 64) == 1
    assert pipeline_pieces(simple, 8 * 40 * 1024, 8, 64) == 2
    tree = nccl_chunking("all_reduce", "tree", "simple", 1 << 30, n_channels=1)
    assert pipeline_pieces(tree, 5 * 512 * 1024 + 1, 1, 64) == 6


def test_bad_chunking_input_is_refused():
    with pytest.raises(InputError, match="unknown protocol"):
        nccl_chunking("all_reduce", "ring", "ll64", 1, n_channels=1)
    with pytest.raises(InputError, match="channels and heads"):
        nccl_chunking("all_reduce", "ring", "simple", 1, n_channels=0)


@pytest.mark.parametrize(
    ("protocol", "buffer", "chunk", "min_slice"),
    [
        # NCCL_BUFFSIZE=1 MiB: 128 KiB slots x 4 chunk steps; slices of 2 slots / 32.
        ("simple", MiB, 512 * 1024, 8 * 1024),
        # NCCL_BUFFSIZE=8 MiB (GCP's A3 Mega profile): 1 MiB slots, 4 MiB chunks.
        ("simple", 8 * MiB, 4 * MiB, 64 * 1024),
        # NCCL_LL_BUFFSIZE=256 KiB: 32 KiB slots, half payload.
        ("ll", 256 * 1024, 16 * 1024, 1024),
        # NCCL_LL128_BUFFSIZE=1 MiB: 128 KiB slots, 15 of 16 words payload.
        ("ll128", MiB, 122880, 4 * 1024),
    ],
)
def test_a_buffer_from_the_environment_sets_slots_chunks_and_slices(protocol, buffer, chunk, min_slice):
    got = nccl_chunking("all_reduce", "ring", protocol, 1 << 34, n_channels=16, n_nodes=2, n_ranks=16,
                        buffer_bytes=buffer)
    assert (got.chunk_bytes, got.min_slice_bytes) == (chunk, min_slice)


def test_nvls_chunk_is_capped_by_a_small_simple_buffer():
    # calcCollChunking starts NVLS from the Simple slot: a 512 KiB buffer's 64 KiB slot is under
    # nvlsChunkSize (128 KiB), and 1 GiB on 16 x 8 is not under 64 x 128 x 64 KiB.
    got = nccl_chunking("all_reduce", "nvls", "simple", 1 << 30, n_channels=16, n_heads=8, buffer_bytes=512 * 1024)
    assert got.chunk_bytes == 65536


def test_a_buffer_without_a_line_per_slot_is_refused():
    with pytest.raises(InputError, match="under 1024"):
        nccl_chunking("all_reduce", "ring", "simple", 1, n_channels=1, buffer_bytes=512)


@pytest.mark.parametrize(("algorithm", "n_bytes", "chunk"), [
    # CollNet Direct on 4 servers of 8 (24 channels, 8 heads, depth 2): from the 512 KiB slot,
    # halved while bytes / (24 x 8 x chunk) < 128, not below 128 KiB; then while < 16, not
    # below 64 KiB, then 32 KiB. 1 GiB: 10.7 and 21.3 under 128, so 128 KiB; 8 GiB: 85.3
    # under 128, 170.7 not, so 256 KiB; 4 MiB: 128 KiB, then 0.17 under 16, so 64 and 32 KiB.
    ("collnet_direct", 1 << 30, 131072),
    ("collnet_direct", 8 << 30, 262144),
    ("collnet_direct", 4 << 20, 32768),
    # CollNet Chain (depth 8, the ranks of a server): from min(256 KiB, the slot), halved while
    # bytes / (24 x chunk) < 512, not below 128 KiB; while < 64, not below 64 KiB; while < 8,
    # not below 32 KiB. 1 GiB: 170.7 under 512, so 128 KiB, and 341 is not under 64; 64 MiB:
    # 128 KiB, 21.3 under 64, so 64 KiB, and 42.7 is not under 8.
    ("collnet_chain", 1 << 30, 131072),
    ("collnet_chain", 64 << 20, 65536),
])
def test_collnet_chunks_shrink_below_their_thresholds(algorithm, n_bytes, chunk):
    chunking = nccl_chunking("all_reduce", algorithm, "simple", n_bytes, n_channels=24,
                             n_heads=8 if algorithm == "collnet_direct" else 1, n_nodes=4, n_ranks=32)
    assert (chunking.chunk_bytes, chunking.slices_per_chunk, chunking.streams) == (chunk, 1, False)
