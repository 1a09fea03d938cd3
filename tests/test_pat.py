"""PAT (NCCL's Parallel Aggregated Trees) all-gather and reduce-scatter: the schedule, its
chunks, its costs and when NCCL's tuner picks it (one rank per server, NCCL 2.23.4 and later)."""

import pytest

from flowsim.collectives import CollectiveCosts, collective_time, pat_all_gather, pat_costs, pat_reduce_scatter
from flowsim.collectives.chunks import nccl_chunking
from flowsim.collectives.dag import _pat_items
from flowsim.fabrics import build_cluster


@pytest.fixture(scope="module")
def eight_servers():
    topology = build_cluster("dgx_h100", 8, figure="effective")
    gpus = [topology.node_names[g] for g in topology.gpus()]
    return topology, gpus[::8]  # the first GPU of each server: one rank per server


def test_each_dimension_carries_the_items_that_still_have_somewhere_to_go():
    # 8 ranks: distance 4 carries 1 item, 2 carries 2, 1 carries 4 (7 = n - 1, as a ring).
    assert [_pat_items(8, d) for d in (2, 1, 0)] == [1, 2, 4]
    # 5 ranks: offsets j 2^(d+1) with j 2^(d+1) + 2^d < 5: d=2: {0}; d=1: {0}; d=0: {0, 2}.
    assert [_pat_items(5, d) for d in (2, 1, 0)] == [1, 1, 2]
    assert [_pat_items(3, d) for d in (1, 0)] == [1, 1]


def test_all_gather_sends_far_first_and_forwards_what_arrived():
    w = pat_all_gather(["a", "b", "c", "d"], 4e6, slices=1, costs=CollectiveCosts.zero())
    messages = [(w.src[i], w.dst[i], w.size_bytes[i]) for i in range(len(w.src))]
    # Dimension 1 (rank r to r - 2, 1 MB each), then dimension 0 (r to r - 1, 2 MB each).
    assert messages == [
        ("a", "c", 1e6), ("b", "d", 1e6), ("c", "a", 1e6), ("d", "b", 1e6),
        ("a", "d", 2e6), ("b", "a", 2e6), ("c", "b", 2e6), ("d", "c", 2e6),
    ]
    # a forwards what c sent it (message 2) with its own item.
    assert [list(w.dependencies(i)) for i in range(8)] == [[], [], [], [], [2], [3], [0], [1]]


def test_reduce_scatter_sends_near_first_and_waits_for_the_partial_sums():
    w = pat_reduce_scatter(["a", "b", "c", "d"], 4e6, slices=1, costs=CollectiveCosts.zero())
    messages = [(w.src[i], w.dst[i], w.size_bytes[i]) for i in range(len(w.src))]
    assert messages == [
        ("a", "b", 2e6), ("b", "c", 2e6), ("c", "d", 2e6), ("d", "a", 2e6),
        ("a", "c", 1e6), ("b", "d", 1e6), ("c", "a", 1e6), ("d", "b", 1e6),
    ]
    # a's partial sum for c includes what d sent it (message 3).
    assert [list(w.dependencies(i)) for i in range(4, 8)] == [[3], [0], [1], [2]]


def test_pieces_follow_each_other_on_each_connection():
    w = pat_all_gather(["a", "b"], 2e6, slices=2, costs=CollectiveCosts.zero())
    # One dimension; piece 1 of a -> b waits for piece 0 of a -> b.
    assert list(w.size_bytes) == [0.5e6, 0.5e6, 0.5e6, 0.5e6]
    assert [w.src[i] + w.dst[i] for i in range(4)] == ["ab", "ba", "ab", "ba"]
    assert list(w.dependencies(2)) == [0]


def test_without_costs_pat_moves_a_ring_s_bytes_through_each_nic(eight_servers):
    topology, ranks = eight_servers
    nic = topology.link_capacity_Bps[topology.link_names.index("n0.nic0->ib.su0.rail0")]  # 48 GB/s
    times = [collective_time(topology, "all_gather", size, ranks=ranks, algorithm="pat", slices=1,
                             costs=CollectiveCosts.zero()).time_s for size in (64 << 20, 128 << 20)]
    # Steps of 1, 2 and 4 chunks of S / 8, one after another, each at the NIC's rate: 7/8 S
    # (the three hops' route latencies cancel in the difference).
    assert times[1] - times[0] == pytest.approx(7 / 8 * (64 << 20) / nic, rel=1e-9)


def test_pat_costs_are_nccl_s_latency_model():
    # 2.30.7: baseLat[PAT] 8 us + 8 ranks x 2.8 us; each hop NET Tree Simple 14 us / 3.5.
    costs = pat_costs(8)
    assert costs.base_s == pytest.approx(30.4e-6) and costs.inter_step_s == pytest.approx(4e-6)
    # Forced on several ranks per server: PAT's own NET row, 14 us in 2.30.7, 0 in 2.26.2.
    assert pat_costs(16, one_per_node=False, version="2.26.2").inter_step_s == 0.0


def test_pat_chunks_halve_with_the_bytes():
    # 512 KiB Simple slots; all-gather halves while 32 x channels x chunk > bytes, to 64 KiB.
    def chunk(collective, n_bytes):
        return nccl_chunking(collective, "pat", "simple", n_bytes, n_channels=4).chunk_bytes

    assert chunk("all_gather", 1 << 30) == 524288       # 512 Ki x 4 x 32 = 64 MiB <= 1 GiB
    assert chunk("all_gather", 32 << 20) == 262144      # 256 Ki x 4 x 32 = 32 MiB, not above
    assert chunk("all_gather", 1 << 20) == 65536        # the floor
    assert chunk("reduce_scatter", 32 << 20) == 524288  # 512 Ki x 4 x 16 = 32 MiB


def test_nccl_picks_pat_with_one_rank_per_server_at_mid_sizes(eight_servers):
    topology, ranks = eight_servers
    # NCCL 2.30.7's model on 8 servers of one rank: ring/LL at 1 KiB (41.6 against PAT's 42.4
    # us), PAT at 64 KiB and 1 MiB, ring from 16 MiB (PAT's bandwidth is 0.75 of the tree's).
    picked = {size: collective_time(topology, "all_gather", size, ranks=ranks).algorithm
              for size in (1 << 10, 64 << 10, 1 << 20, 16 << 20)}
    assert picked == {1 << 10: "ring", 64 << 10: "pat", 1 << 20: "pat", 16 << 20: "ring"}
    assert collective_time(topology, "reduce_scatter", 1 << 20, ranks=ranks).algorithm == "pat"
    # Off by NCCL_PAT_ENABLE=0, before 2.23.4, and with several ranks per server.
    assert collective_time(topology, "all_gather", 1 << 20, ranks=ranks,
                           nccl_env={"NCCL_PAT_ENABLE": "0"}).algorithm == "ring"
    assert collective_time(topology, "all_gather", 1 << 20, ranks=ranks, nccl_version="2.19.3").algorithm == "ring"
    gpus = [topology.node_names[g] for g in topology.gpus()]
    assert collective_time(topology, "all_gather", 1 << 20, ranks=gpus[:16]).algorithm != "pat"
