"""Collectives as flow DAGs: flow counts, dependency structure, hand-computed times.

Hand-computed cases use 1e9 bytes and 1e9 B/s, zero link latency and no software cost
(``CollectiveCosts.zero()``) unless a case says otherwise.
"""

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import flowsim.collectives.builders as builders_module
import flowsim.collectives.dag as collective_dag
from flowsim.check import parse_nccl_log
from flowsim.collectives import (
    COLLECTIVES,
    MAX_PIPELINE_SLICES,
    MAX_RING_SLICES,
    NCCL_SLOT_BYTES,
    CollectiveCosts,
    all_gather,
    all_reduce,
    all_to_all,
    all_to_all_v,
    all_to_all_v_bytes,
    broadcast,
    build_collective,
    collective_time,
    collective_workload,
    collnet_chain_all_reduce,
    collnet_direct_all_gather,
    collnet_direct_all_reduce,
    collnet_direct_reduce_scatter,
    gather,
    hierarchical_all_reduce,
    hypercube,
    mesh_rings,
    nccl_costs,
    nvls_all_reduce,
    nvls_costs,
    nvls_sharp_all_gather,
    nvls_sharp_all_reduce,
    nvls_sharp_reduce_scatter,
    nvls_tree_all_reduce,
    reduce,
    reduce_scatter,
    rotated_rings,
    scatter,
    send,
    send_pair,
    tree_all_reduce,
)
from flowsim.collectives.report import (
    algbw_Bps,
    algbw_factor,
    bus_factor,
    busbw_Bps,
    empty_call_runs,
    format_table,
    message_sizes,
    parse_size,
    rows_to_json,
    sweep,
)
from flowsim.collectives.rings import mesh_link_counts, mesh_server_rings, rank_servers
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.pipeline import run
from flowsim.presets import DGX1_NVLINK_COUNTS, preset
from flowsim.routing import Router
from flowsim.systemfile import parse_system
from flowsim.topology import NodeKind, TopologyBuilder
from flowsim.workload import Workload

G = 1e9
ZERO = CollectiveCosts.zero()
RANKS = ["g0", "g1", "g2", "g3"]


def ring_topology(n=4, rate_Bps=G):
    """GPU ``i`` -> GPU ``i + 1`` (mod n), one directed link each, all of ``rate_Bps``."""
    b = TopologyBuilder()
    s = b.add_server("box")
    for i in range(n):
        b.add_node(f"g{i}", NodeKind.GPU, server=s)
    for i in range(n):
        b.add_link(f"g{i}", f"g{(i + 1) % n}", rate_Bps, technology="nvlink4")
    return b.build()


def star_topology(n=4, rate_Bps=G, servers=1):
    """``servers`` boxes of ``n`` GPUs, each GPU cabled to its box's NVSwitch at ``rate_Bps``."""
    b = TopologyBuilder()
    for k in range(servers):
        s = b.add_server(f"box{k}")
        b.add_node(f"sw{k}", NodeKind.NVSWITCH, server=s)
        for i in range(n):
            name = f"g{i}" if servers == 1 else f"b{k}g{i}"
            b.add_node(name, NodeKind.GPU, server=s)
            b.add_cable(name, f"sw{k}", rate_Bps, technology="nvlink4")
    return b.build()


def names(workload, flows):
    return [workload.names[f] for f in flows]


# --- flow counts and structure ----------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: all_reduce(RANKS, G, channels=2, slices=3), 2 * 3 * 4 * 2 * 3),
        (lambda: reduce_scatter(RANKS, G, channels=2, slices=3), 3 * 4 * 2 * 3),
        (lambda: all_gather(RANKS, G, channels=2, slices=3), 3 * 4 * 2 * 3),
        (lambda: broadcast(RANKS, G, channels=2, slices=3), 3 * 2 * 3),
        (lambda: reduce(RANKS, G, channels=2, slices=3), 3 * 2 * 3),
        (lambda: all_to_all(RANKS, G), 4 * 3),
        (lambda: gather(RANKS, G), 3),
        (lambda: scatter(RANKS, G, root=3), 3),
        (lambda: send("g0", "g1", G, channels=2, slices=3), 2 * 3),
        (lambda: tree_all_reduce(RANKS, G, channels=2, slices=3), 2 * 2 * 3 * 2 * 3),
        (lambda: nvls_all_reduce(RANKS, G, switch="sw", channels=2, slices=3), 2 * 4 * 3 * (4 + 1 + 1 + 4)),
    ],
    ids=["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "gather", "scatter", "send",
         "tree", "nvls"],
)
def test_flow_counts(build, expected):
    assert len(build()) == expected


def test_ring_all_reduce_step_waits_for_the_chunk_it_forwards_and_its_hop():
    w = all_reduce(RANKS, 4 * G, slices=1, costs=ZERO)
    assert len(w) == 2 * 3 * 4
    for f in range(len(w)):
        step = int(w.tags["step"][f])
        deps = w.dependencies(f)
        if step == 0:
            assert deps.size == 0
        else:
            forwarded, previous = deps
            assert w.dst[forwarded] == w.src[f]  # the chunk arrived at this rank ...
            assert int(w.tags["step"][forwarded]) == step - 1  # ... in the previous step
            # One connection per hop: the hop's previous message went first.
            assert (w.src[previous], w.dst[previous]) == (w.src[f], w.dst[f])
            assert int(w.tags["step"][previous]) == step - 1
    np.testing.assert_allclose(w.size_bytes, G)  # S / n
    assert names(w, w.dependencies(w.names.index("all_reduce.ch0.step5.r2.sl0"))) == [
        "all_reduce.ch0.step4.r1.sl0",
        "all_reduce.ch0.step4.r2.sl0",
    ]


def test_every_rank_sends_2_n_minus_1_over_n_of_s_in_all_reduce():
    w = all_reduce(RANKS, 4 * G, channels=3, slices=2, costs=ZERO)
    for r in RANKS:
        sent = sum(w.size_bytes[f] for f in range(len(w)) if w.src[f] == r)
        assert sent == pytest.approx(2 * 3 / 4 * 4 * G)


def test_slices_follow_each_other_and_the_forwarded_slice():
    w = all_reduce(RANKS, 4 * G, slices=3, costs=ZERO)
    f = w.names.index("all_reduce.ch0.step2.r1.sl2")
    assert sorted(names(w, w.dependencies(f))) == ["all_reduce.ch0.step1.r0.sl2", "all_reduce.ch0.step2.r1.sl1"]


def test_channels_use_their_own_ring_orders():
    orders = [RANKS, RANKS[::-1]]
    w = all_gather(RANKS, 4 * G, channels=2, orders=orders, slices=1)
    ch1 = [f for f in range(len(w)) if w.tags["channel"][f] == "1" and w.tags["step"][f] == "0"]
    assert {(w.src[f], w.dst[f]) for f in ch1} == {("g3", "g2"), ("g2", "g1"), ("g1", "g0"), ("g0", "g3")}


def test_broadcast_is_a_chain_from_the_root_and_reduce_runs_it_backwards():
    b = broadcast(RANKS, G, root=2, slices=1)
    assert [(b.src[f], b.dst[f]) for f in range(len(b))] == [("g2", "g3"), ("g3", "g0"), ("g0", "g1")]
    r = reduce(RANKS, G, root=2, slices=1)
    assert [(r.src[f], r.dst[f]) for f in range(len(r))] == [("g1", "g0"), ("g0", "g3"), ("g3", "g2")]
    assert [list(r.dependencies(f)) for f in range(len(r))] == [[], [0], [1]]


def test_all_to_all_sends_s_over_n_to_every_other_rank():
    w = all_to_all(RANKS, 4 * G, costs=ZERO)
    assert {(s, d) for s, d in zip(w.src, w.dst)} == {(a, b) for a in RANKS for b in RANKS if a != b}
    np.testing.assert_allclose(w.size_bytes, G)
    assert w.dep_indices.size == 0


def test_gather_and_scatter_move_s_over_n_between_the_root_and_every_other_rank():
    g = gather(RANKS, 4 * G, root=2, costs=ZERO)
    assert sorted(zip(g.src, g.dst)) == [("g0", "g2"), ("g1", "g2"), ("g3", "g2")]
    assert g.names[0] == "gather.r0.to.r2"
    s = scatter(RANKS, 4 * G, root=2, costs=ZERO)
    assert sorted(zip(s.src, s.dst)) == [("g2", "g0"), ("g2", "g1"), ("g2", "g3")]
    for w in (g, s):
        np.testing.assert_allclose(w.size_bytes, G)
        assert w.dep_indices.size == 0
    with pytest.raises(InputError, match=r"gather: root must be a rank index in 0..3, got 4"):
        gather(RANKS, G, root=4)
    with pytest.raises(InputError, match=r"scatter: root must be a rank index in 0..3, got True"):
        scatter(RANKS, G, root=True)


@pytest.mark.parametrize("collective", [gather, scatter])
def test_gather_and_scatter_on_a_switch_wait_for_the_roots_link(collective):
    # Three messages of 1 GB share the root's one link of 1 GB/s: 3 s; nccl-tests' busbw is
    # S / t x (n - 1) / n = 4/3 x 3/4 GB/s, the link.
    out = run(star_topology(), collective(RANKS, 4 * G, root=1, costs=ZERO))
    assert out.makespan_s == pytest.approx(3.0)
    assert busbw_Bps(collective.__name__, 4 * G, out.makespan_s, 4) == pytest.approx(G)


def test_hypercube_doubles_what_each_pair_swaps_round_by_round():
    w = hypercube(RANKS, 4 * G, costs=ZERO)
    pairs = [(w.src[f], w.dst[f], w.size_bytes[f]) for f in range(len(w))]
    # Round 0 swaps S / 4 with position XOR 1, round 1 S / 2 with position XOR 2 (nccl-tests src/hypercube.cu).
    assert pairs == [("g0", "g1", G), ("g1", "g0", G), ("g2", "g3", G), ("g3", "g2", G),
                     ("g0", "g2", 2 * G), ("g1", "g3", 2 * G), ("g2", "g0", 2 * G), ("g3", "g1", 2 * G)]
    assert w.names[4] == "hypercube.k1.r0.to.r2.send.ch0.hop0.sl0"
    # g0 -> g2 starts once g0's and g2's round-0 calls have both ended: both ways of each pair.
    assert sorted(w.dependencies(4).tolist()) == [0, 1, 2, 3]
    assert all(w.dependencies(f).size == 0 for f in range(4))
    with pytest.raises(InputError, match="hypercube pairs rank r with r XOR 2\\^k, so it needs a power-of-two number "
                                         "of ranks, got 3"):
        hypercube(RANKS[:3], G)


def test_hypercube_on_a_switch_takes_a_round_per_doubling():
    # 1 GB each way over each GPU's 1 GB/s link (1 s), then 2 GB (2 s); nccl-tests prints
    # algbw = busbw = S (n - 1) / n / t = 3 GB / 3 s.
    out = run(star_topology(), hypercube(RANKS, 4 * G, costs=ZERO))
    assert out.makespan_s == pytest.approx(3.0)
    assert busbw_Bps("hypercube", 4 * G, out.makespan_s, 4) == pytest.approx(G)


def test_alltoallv_sends_by_distance_as_nccl_tests_generates_it():
    # nccl-tests src/alltoallv.cu, spread 1: d S / (n (n - 1) / 2) to the rank d ahead,
    # truncated to 16 bytes: 6000 B on 4 ranks is 1000, 2000 and 3000 B, trimmed to 992, 2000, 2992.
    assert all_to_all_v_bytes(4, 6000)[1].tolist() == [2992, 0, 992, 2000]
    # Spread 0: S / n to every rank, itself included.
    assert all_to_all_v_bytes(4, 6400, 0.0)[2].tolist() == [1600] * 4
    assert all_to_all_v_bytes(4, 6000, 0.5)[0].tolist() == [736, 1248, 1744, 2240]  # halfway, each trimmed
    with pytest.raises(InputError, match=r"NCCL_TESTS_ALLTOALLV_SPREAD must be a number in \[0, 1\], got 1.5"):
        all_to_all_v_bytes(4, 6000, 1.5)
    w = all_to_all_v(RANKS, 6 * G, costs=ZERO)
    sizes = {(a, b): size for a, b, size in zip(w.src, w.dst, w.size_bytes, strict=True)}
    assert len(w) == 12 and sizes[("g0", "g1")] == G and sizes[("g0", "g3")] == 3 * G and sizes[("g3", "g0")] == G


def test_alltoallv_on_a_switch_keeps_each_link_busy_to_the_end():
    # Every link carries 1, 2 and 3 GB (one of each distance) at 1 GB/s: a third each until
    # the 1 GB messages end (3 s), a half each until the 2 GB ones do (5 s), then the last
    # GB alone: 6 s, the 6 GB a rank sends over its link.
    out = run(star_topology(), all_to_all_v(RANKS, 6 * G, costs=ZERO))
    assert out.makespan_s == pytest.approx(6.0)


def test_tree_all_reduce_reduces_up_then_broadcasts_down():
    w = tree_all_reduce(RANKS, 4 * G, slices=1, costs=ZERO)
    # NCCL's trees on 4 ranks: tree 0 is 0 <- 2 <- {1, 3}; tree 1 (mirrored) 3 <- 1 <- {0, 2}.
    up0 = {(w.src[f], w.dst[f]) for f in range(len(w)) if "tree0" in w.names[f] and ".up." in w.names[f]}
    assert up0 == {("g1", "g2"), ("g3", "g2"), ("g2", "g0")}
    up1 = {(w.src[f], w.dst[f]) for f in range(len(w)) if "tree1" in w.names[f] and ".up." in w.names[f]}
    assert up1 == {("g0", "g1"), ("g2", "g1"), ("g1", "g3")}
    root_down = w.names.index("all_reduce.tree0.ch0.sl0.down.r2")  # 0 -> 2, after 2 -> 0 arrived
    assert names(w, w.dependencies(root_down)) == ["all_reduce.tree0.ch0.sl0.up.r2"]
    np.testing.assert_allclose(w.size_bytes, 2 * G)  # each tree carries S / 2


def test_tree_across_servers_is_a_tree_of_chains():
    servers = {"a0": 0, "a1": 0, "b0": 1, "b1": 1}
    w = tree_all_reduce(list(servers), 4 * G, servers=servers, channels=2, slices=1, costs=ZERO)
    # Tree 0 over the two servers: server 0 is the root. Channel 0 chains a0-a1 and b0-b1 with
    # heads a0 and b0; channel 1 rotates them (heads a1 and b1).
    pairs = {(w.src[f], w.dst[f]) for f, name in enumerate(w.names) if name.startswith("all_reduce.tree0.ch0.")}
    assert pairs == {("b1", "b0"), ("a1", "a0"), ("b0", "a0"), ("a0", "b0"), ("a0", "a1"), ("b0", "b1")}
    up = w.names.index("all_reduce.tree0.ch0.sl0.up.r2")  # b0 -> a0 after b1 -> b0
    assert names(w, w.dependencies(up)) == ["all_reduce.tree0.ch0.sl0.chainup.r3"]
    down = w.names.index("all_reduce.tree0.ch0.sl0.down.r2")  # a0 -> b0 once a0 has it all
    assert sorted(names(w, w.dependencies(down))) == [
        "all_reduce.tree0.ch0.sl0.chainup.r1",
        "all_reduce.tree0.ch0.sl0.up.r2",
    ]
    pairs = {(w.src[f], w.dst[f]) for f, name in enumerate(w.names) if name.startswith("all_reduce.tree0.ch1.")}
    assert ("b1", "a1") in pairs and ("a1", "b1") in pairs  # channel 1's heads are a1 and b1


def test_dgx1_all_to_all_goes_over_nvlink_through_one_gpu_at_most():
    # NCCL sends between two DGX-1 GPUs with no NVLink between them through a GPU linked to both
    # (P2P/indirect); through the CPUs (QPI) the all-to-all of one DGX-1 ran at 3 GB/s busbw.
    topo = preset("dgx1_v100", figure="effective")
    out = collective_time(topo, "all_to_all", 1 << 24)
    indptr, indices = out.run.routes.flow_link_indptr, out.run.routes.flow_link_indices
    hops = {tuple(topo.link_technology[link] for link in indices[indptr[f]:indptr[f + 1]])
            for f in range(len(indptr) - 1)}
    assert hops - {()} == {("nvlink2",), ("nvlink2", "nvlink2")}


def test_a_tree_on_one_server_is_one_chain_over_nvlink():
    # NCCL's double binary tree spans nodes; inside one node its tree is a chain of the GPUs
    # ([NCCL] src/graph/connect.cc). One DGX-1's chain walks a mesh ring, one NVLink a hop: as a
    # binary tree over the GPUs in index order it crossed the CPUs, at 9x NCCL's model time.
    topo = preset("dgx1_v100", figure="effective")
    out = collective_time(topo, "all_reduce", 1 << 24, algorithm="tree", protocol="simple")
    w, routes = out.run.workload, out.run.routes
    indptr, indices = routes.flow_link_indptr, routes.flow_link_indices
    hops = {tuple(topo.link_technology[link] for link in indices[indptr[f]:indptr[f + 1]]) for f in range(len(w))}
    assert hops - {()} == {("nvlink2",)}
    # Each channel's two trees are the same chain of 8 GPUs: 7 pairs up, the same 7 reversed down.
    for name in ("all_reduce.tree0.ch0.", "all_reduce.tree1.ch0."):
        pairs = {(w.src[f], w.dst[f]) for f in range(len(w)) if w.names[f].startswith(name) and w.src[f] != w.dst[f]}
        assert len(pairs) == 14 and {(b, a) for a, b in pairs} == pairs
    ups = {w.src[f] for f in range(len(w))
           if w.names[f].startswith("all_reduce.tree0.ch0.") and ".chainup." in w.names[f]}
    assert len(ups) == 7  # every GPU but the head sends up


def test_tree_chains_order_each_servers_chain_per_channel():
    servers = {"a0": 0, "a1": 0, "a2": 0, "b0": 1, "b1": 1, "b2": 1}
    chains = [("a2", "a0", "a1", "b2", "b0", "b1"), ("b1", "b0", "b2", "a1", "a0", "a2")]
    w = tree_all_reduce(list(servers), 4 * G, servers=servers, channels=3, slices=1, costs=ZERO, chains=chains)

    def pairs(channel):
        return {(w.src[f], w.dst[f]) for f, name in enumerate(w.names)
                if name.startswith(f"all_reduce.tree0.ch{channel}.")}

    # Channel 0: chains a2-a0-a1 and b2-b0-b1, heads a2 and b2; channel 1 a1-a0-a2 and b1-b0-b2;
    # channel 2 repeats channel 0.
    assert pairs(0) == {("a0", "a2"), ("a1", "a0"), ("b0", "b2"), ("b1", "b0"), ("b2", "a2"),
                        ("a2", "b2"), ("a2", "a0"), ("a0", "a1"), ("b2", "b0"), ("b0", "b1")}
    assert ("b1", "a1") in pairs(1) and ("a1", "b1") in pairs(1) and ("a0", "a1") in pairs(1)
    assert pairs(2) == pairs(0)
    with pytest.raises(InputError, match="offsets or chains, not both"):
        tree_all_reduce(list(servers), G, servers=servers, chains=chains, offsets=[0])
    with pytest.raises(InputError, match="chains must be a non-empty list of orders of the ranks"):
        tree_all_reduce(list(servers), G, servers=servers, chains=[("a0", "a1", "b0", "b1")])


def test_nvls_reduces_in_the_switch_then_multicasts():
    w = nvls_all_reduce(RANKS, 4 * G, switch="sw", slices=2, costs=ZERO)
    result = w.names.index("all_reduce.ch0.chunk2.sl1.result")
    assert (w.src[result], w.dst[result]) == ("sw", "g2")
    assert sorted(names(w, w.dependencies(result))) == sorted(
        [f"all_reduce.ch0.chunk2.sl1.reduce.r{i}" for i in range(4)] + ["all_reduce.ch0.chunk2.sl0.result"]
    )
    store = w.names.index("all_reduce.ch0.chunk2.sl1.store")
    assert (w.src[store], w.dst[store]) == ("g2", "sw")
    multicast = [f for f in range(len(w)) if ".chunk2.sl1.multicast" in w.names[f]]
    assert sorted(w.dst[f] for f in multicast) == RANKS
    assert all(store in w.dependencies(f) for f in multicast)
    np.testing.assert_allclose(w.size_bytes, 0.5 * G)  # S / n / slices
    assert nvls_costs("nvlink5").wire_efficiency == 0.74


def test_hierarchical_phases_chain_per_rank():
    servers = {"a0": 0, "a1": 0, "b0": 1, "b1": 1}
    w = hierarchical_all_reduce(list(servers), 4 * G, servers=servers, slices=1, costs=ZERO)
    # 2 servers x reduce-scatter (1 step x 2 ranks) + 2 rails x all-reduce (2 steps x 2) + all-gather,
    # and a zero-byte ".due" before each rail message that follows another on its hop
    assert len(w) == 4 + 8 + 4 + 4
    rail = w.names.index("all_reduce.ar.rail0.ch0.step0.r0.sl0")  # a0 -> b0
    assert (w.src[rail], w.dst[rail]) == ("a0", "b0")
    assert names(w, w.dependencies(rail)) == ["all_reduce.rs.srv0.ch0.step0.r1.sl0"]  # a1 -> a0 arrived
    np.testing.assert_allclose(w.size_bytes[rail], 1 * G)  # S / ppn / servers


def test_costs_charge_base_once_and_a_step_latency_per_message():
    costs = CollectiveCosts(base_s=5.0, intra_step_s=1.0, inter_step_s=3.0, wire_efficiency=0.5, source="test")
    servers = {"g0": 0, "g1": 0, "g2": 1, "g3": 1}
    w = all_reduce(RANKS, 4 * G, slices=1, costs=costs, servers=servers)
    due = [f for f in range(len(w)) if w.names[f].endswith(".due")]
    for f in range(len(w)):
        if f in due:
            continue
        inter = servers[w.src[f]] != servers[w.dst[f]]
        first = w.tags["step"][f] == "0"
        if inter and not first:
            # Across servers the latency is paid by a zero-byte message at the sender that
            # waits for the forwarded chunk; the message then follows its hop's previous one.
            (paid,) = [d for d in w.dependencies(f) if d in due]
            assert (w.overhead_s[f], w.overhead_s[paid], w.src[paid], w.dst[paid]) == (0.0, 3.0, w.src[f], w.src[f])
        else:
            assert w.overhead_s[f] == (3.0 if inter else 1.0) + (5.0 if first else 0.0)
    np.testing.assert_allclose(w.size_bytes[[f for f in range(len(w)) if f not in due]], 2 * G)  # payload / efficiency


def test_nccl_costs_are_the_constants_of_docs_hardware():
    c = nccl_costs("ring", "simple", "nvlink")
    assert (c.base_s, c.intra_step_s, c.inter_step_s, c.wire_efficiency) == pytest.approx((8.4e-6, 3.4e-6, 14e-6, 1.0))
    c = nccl_costs("tree", "ll", "pci")
    assert (c.base_s, c.intra_step_s, c.inter_step_s, c.wire_efficiency) == pytest.approx((6.8e-6, 1.0e-6, 5.0e-6, 0.5))
    assert nccl_costs("ring", "ll128").wire_efficiency == pytest.approx(120 / 128)
    assert "tuning.cc" in c.source


def test_default_slices_are_nccl_slot_sized_and_bounded():
    assert len(all_reduce(RANKS, 4 * NCCL_SLOT_BYTES)) == 24  # one slot per step: 1 slice
    assert len(all_reduce(RANKS, 4 * 3 * NCCL_SLOT_BYTES)) == 24 * 3
    assert len(all_reduce(RANKS, 1e12)) == 24 * MAX_RING_SLICES
    assert len(broadcast(RANKS, 1e12)) == 3 * MAX_PIPELINE_SLICES


def test_rotated_rings_start_each_server_at_the_channel():
    servers = {"a0": 0, "a1": 0, "a2": 0, "b0": 1, "b1": 1, "b2": 1}
    rings = rotated_rings(list(servers), 3, servers)
    assert rings[1] == ("a1", "a2", "a0", "b1", "b2", "b0")
    assert rings[2] == ("a2", "a0", "a1", "b2", "b0", "b1")


def test_mesh_rings_decompose_the_dgx1_cube_mesh():
    ranks = [f"gpu{i}" for i in range(8)]
    rings = mesh_rings(ranks, DGX1_NVLINK_COUNTS)
    assert len(rings) == 6  # one ring per NVLink of each GPU
    used = np.zeros((8, 8), dtype=int)
    for ring in rings:
        assert sorted(ring) == sorted(ranks)
        idx = [ranks.index(r) for r in ring]
        for a, b in zip(idx, idx[1:] + idx[:1]):
            used[a, b] += 1
    assert (used <= DGX1_NVLINK_COUNTS).all()


def test_mesh_rings_of_a_full_mesh_of_four_take_every_link():
    # Four GPUs linked all to all (a GH200 quad node: 6 NVLinks a pair): only 2 of the 6
    # directed Hamiltonian cycles fit link-disjoint, on 8 of the 12 directed pairs; on half a
    # pair's links each, all 6 fit, and each directed pair carries 2 of them.
    full = np.ones((4, 4), dtype=np.int64) - np.eye(4, dtype=np.int64)
    rings = mesh_rings(["a", "b", "c", "d"], full)
    assert len(rings) == 6 and len(set(rings)) == 6
    use = {}
    for ring in rings:
        for src, dst in zip(ring, ring[1:] + ring[:1]):
            use[src, dst] = use.get((src, dst), 0) + 1
    assert len(use) == 12 and set(use.values()) == {2}
    # One GH200 quad node's ring all-reduce then runs on all 18 NVLinks of each GPU: within 3%
    # of their effective 370.8 GB/s (2 of 3 pairs' links, 244 GB/s, until 2026-12-05).
    topo = build_cluster(parse_system(GH200_QUAD).spec, 1, figure="effective", fabric="none")
    out = collective_time(topo, "all_reduce", 1 << 30, algorithm="ring", protocol="simple")
    assert busbw_Bps("all_reduce", 1 << 30, out.time_s, 4) == pytest.approx(370.8e9, rel=0.03)


def test_mesh_rings_without_a_hamiltonian_cycle():
    star = np.zeros((4, 4), dtype=int)
    star[0, 1:] = star[1:, 0] = 1
    assert mesh_rings(RANKS, star) == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: all_reduce(["g0"], G), "at least 2 ranks"),
        (lambda: all_reduce(["g0", "g1", "g0"], G), "rank 'g0' appears twice"),
        (lambda: all_reduce("g0g1", G), "sequence of node names"),
        (lambda: all_reduce(RANKS, -1.0), "size_bytes is -1.0"),
        (lambda: all_reduce(RANKS, G, channels=0), "channels must be a positive integer"),
        (lambda: all_reduce(RANKS, G, slices=0), "slices must be a positive integer"),
        (lambda: all_reduce(RANKS, G, channels=2, orders=[RANKS]), "1 ring orders for 2 channels"),
        (lambda: all_reduce(RANKS, G, orders=[["g0", "g1", "g2", "g9"]]), "channel 0 is not a permutation"),
        (lambda: all_reduce(RANKS, G, servers={"g0": 0}), "rank 'g1' has no server"),
        (lambda: all_reduce(RANKS, G, costs="fast"), "costs must be a CollectiveCosts"),
        (lambda: broadcast(RANKS, G, root=4), "root must be a rank index"),
        (lambda: send("g0", "g0", G), "rank 'g0' appears twice"),
        (lambda: hierarchical_all_reduce(["a", "b", "c"], G, servers={"a": 0, "b": 0, "c": 1}), "different numbers"),
        (lambda: build_collective("all_reduce", RANKS, G, algorithm="collnet"), "no algorithm 'collnet'"),
        (lambda: build_collective("custom", RANKS, G), "unknown collective 'custom'"),
        (lambda: nccl_costs("ring", "ll256"), "unknown protocol 'll256'"),
        (lambda: nvls_costs("nvlink3"), "NVSwitch generation 3 or later"),
        (lambda: nvls_all_reduce(RANKS, G, switch="g0"), "switch must be the NVSwitch's node name"),
        (lambda: CollectiveCosts(0.0, -1.0, 0.0, 1.0, "x"), "intra_step_s is -1.0"),
        (lambda: CollectiveCosts(0.0, 0.0, 0.0, 0.0, "x"), "wire_efficiency is 0.0"),
    ],
)
def test_bad_input_names_the_offending_item(call, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# --- hand-computed times ------------------------------------------------------------------


def test_ring_all_reduce_takes_2_n_minus_1_over_n_s_over_b():
    topo = ring_topology()
    out = run(topo, all_reduce(RANKS, 4 * G, slices=1, costs=ZERO))
    assert out.makespan_s == pytest.approx(2 * 3 / 4 * 4)  # 6 s
    assert busbw_Bps("all_reduce", 4 * G, out.makespan_s, 4) == pytest.approx(G)  # = link rate


@pytest.mark.parametrize("slices", [1, 4])
@pytest.mark.parametrize("channels", [1, 2])
def test_ring_bandwidth_term_does_not_depend_on_chunking(channels, slices):
    out = run(ring_topology(), all_reduce(RANKS, 4 * G, channels=channels, slices=slices, costs=ZERO))
    assert out.makespan_s == pytest.approx(6.0)


def test_ring_all_reduce_latency_adds_base_and_one_step_latency_per_step():
    costs = CollectiveCosts(base_s=0.5, intra_step_s=0.25, inter_step_s=9.0, wire_efficiency=1.0, source="test")
    out = run(ring_topology(), all_reduce(RANKS, 4 * G, slices=1, costs=costs))
    assert out.makespan_s == pytest.approx(0.5 + 6 * 0.25 + 6.0)


@pytest.mark.parametrize("build", [reduce_scatter, all_gather])
def test_reduce_scatter_and_all_gather_take_n_minus_1_over_n_s_over_b(build):
    out = run(ring_topology(), build(RANKS, 4 * G, slices=1, costs=ZERO))
    assert out.makespan_s == pytest.approx(3.0)


@pytest.mark.parametrize("slices", [1, 2, 8])
def test_pipelined_chain_broadcast(slices):
    # 3 hops of S / slices each, pipelined: (3 + slices - 1) slice times.
    out = run(ring_topology(), broadcast(RANKS, 4 * G, slices=slices, costs=ZERO))
    assert out.makespan_s == pytest.approx((3 + slices - 1) * 4 / slices)


def test_all_to_all_on_a_switch_takes_n_minus_1_over_n_s_over_b():
    out = run(star_topology(), all_to_all(RANKS, 4 * G, costs=ZERO))
    assert out.makespan_s == pytest.approx(3.0)
    assert busbw_Bps("all_to_all", 4 * G, out.makespan_s, 4) == pytest.approx(G)


def test_messages_inside_a_server_take_the_intra_wire_efficiency():
    # Two servers of two ranks; S = 4 GB, so each message carries 1 GB of payload. Inside a
    # server at efficiency 0.5 that is 2 GB on the wire; between servers the full 1.0 keeps 1 GB.
    costs = CollectiveCosts(0.0, 0.0, 0.0, 1.0, "test", intra_wire_efficiency=0.5)
    servers = {"g0": "a", "g1": "a", "g2": "b", "g3": "b"}
    w = all_to_all(RANKS, 4 * G, servers=servers, costs=costs)
    sizes = {(s, d): b for s, d, b in zip(w.src, w.dst, w.size_bytes, strict=True)}
    assert sizes[("g0", "g1")] == sizes[("g3", "g2")] == 2 * G
    assert sizes[("g0", "g2")] == sizes[("g3", "g1")] == 1 * G
    with pytest.raises(InputError, match="intra_wire_efficiency is 1.5"):
        CollectiveCosts(0.0, 0.0, 0.0, 1.0, "test", intra_wire_efficiency=1.5)


def test_tree_all_reduce_on_a_switch():
    # Up: 1->2 and 3->2 share g2's downlink (S/2 each at B/2: 4 s), then 2->0 (2 s).
    # Tree 1 mirrors it on other links at the same time. Down: 0->2 (2 s), then 2->1 and
    # 2->3 share g2's uplink (4 s). Total 12 s = 3 S / B.
    out = run(star_topology(), tree_all_reduce(RANKS, 4 * G, slices=1, costs=ZERO))
    assert out.makespan_s == pytest.approx(12.0)


def test_tree_split_cap_holds_every_rank_but_the_root_on_a_switch():
    # NCCL's Simple tree splits a channel's thread block between reducing up and broadcasting
    # down, except at the root (runTreeSplit): at split_cap_Bps = B / 4 the same tree takes
    # up 1->2, 3->2 at B/4 (8 s), 2->0 at B/4 (8 s), down 0->2 from the root at B (2 s), then
    # 2->1, 2->3 at B/4 (8 s): 26 s. Tree 1 runs on other links at the same time.
    w = tree_all_reduce(RANKS, 4 * G, slices=1, costs=ZERO, split_cap_Bps=G / 4)
    out = run(star_topology(), w)
    assert out.makespan_s == pytest.approx(26.0)


def test_tree_split_cap_spares_the_root_and_the_hops_between_servers():
    servers = {"a0": 0, "a1": 0, "b0": 1, "b1": 1}
    w = tree_all_reduce(list(servers), 4 * G, servers=servers, slices=1, costs=ZERO, split_cap_Bps=5.0)
    capped = {(w.src[f], w.dst[f]) for f, name in enumerate(w.names) if name.startswith("all_reduce.tree0.")
              and w.cap_Bps[f] == 5.0}
    # Tree 0's root head is a0: its own hop down its chain and both hops between servers
    # keep their rate; every other rank's hop inside its server is held.
    assert capped == {("a1", "a0"), ("b1", "b0"), ("b0", "b1")}
    assert np.isinf(w.cap_Bps[[f for f, name in enumerate(w.names) if name.startswith("all_reduce.tree0.")
                               and (w.src[f], w.dst[f]) not in capped]]).all()
    with pytest.raises(InputError, match="split_cap_Bps must be > 0"):
        tree_all_reduce(list(servers), 4 * G, servers=servers, split_cap_Bps=0.0)


def test_a_step_dag_larger_than_memory_is_refused_before_it_is_built(monkeypatch):
    # 8 ranks, one channel, 4 slices: 14 steps x 8 ranks x 4 slices = 448 messages at 150
    # bytes, 67,200 bytes; a machine of 50,000 bytes refuses them before any is laid out.
    monkeypatch.setattr(collective_dag, "physical_memory_bytes", lambda: 50_000)
    ranks = [f"g{i}" for i in range(8)]
    with pytest.raises(InputError, match=r"all_reduce laid out as steps is 448 messages, about 67.20 kB at 150 bytes a "
                                         r"message, more than this machine's 50.00 kB of memory; .*--model stream"):
        all_reduce(ranks, 8 * G, slices=4, model="steps")
    with pytest.raises(InputError, match=r"tree_all_reduce laid out as steps is .*--model stream"):
        tree_all_reduce(ranks, 8 * G, slices=64, model="steps")
    with pytest.raises(InputError, match=r"broadcast laid out as steps is .*--model stream"):
        broadcast(ranks, 8 * G, slices=64, model="steps")
    with pytest.raises(InputError, match=r"nvls_all_reduce laid out as steps is .* --algorithm ring"):
        nvls_all_reduce(ranks, 8 * G, switch="sw", slices=64, model="steps")
    # model="auto" streams a ring past STEP_MESSAGE_LIMIT instead, and what fits is built.
    monkeypatch.setattr(collective_dag, "physical_memory_bytes", lambda: 70_000)
    assert len(all_reduce(ranks, 8 * G, slices=4, model="steps")) >= 448
    monkeypatch.setattr(collective_dag, "physical_memory_bytes", lambda: None)  # the system does not say
    assert len(all_reduce(ranks, 8 * G, slices=4, model="steps")) >= 448


def test_nvls_all_reduce_on_a_switch():
    # Unsliced: every rank's 4 chunk copies go up together (4 s), the sums come down to their
    # owners (1 s), go back up (1 s) and are multicast, 4 chunks into each rank (4 s).
    out = run(star_topology(), nvls_all_reduce(RANKS, 4 * G, switch="sw0", slices=1, costs=ZERO))
    assert out.makespan_s == pytest.approx(10.0)
    # Pipelined, it nears S (1 + 1/n) / B = 5 s each way at once.
    out = run(star_topology(), nvls_all_reduce(RANKS, 4 * G, switch="sw0", slices=64, costs=ZERO))
    assert 5.0 < out.makespan_s < 5.0 * 1.05


def test_send_takes_s_over_b():
    out = run(star_topology(), send("g0", "g3", 4 * G, channels=2, costs=ZERO))
    assert out.makespan_s == pytest.approx(4.0)


def test_hierarchical_all_reduce_on_two_dgx_h100():
    # Reduce-scatter inside each server ((7/8) S at the NVLink rate), all-reduce of each S/8
    # shard between the two servers over its rail (2 steps of S/16 at the NIC rate, each
    # crossing one leaf: 150 ns), all-gather inside each server ((7/8) S at the NVLink rate).
    topo = build_cluster("dgx_h100", 2, figure="effective")
    ranks = [topo.node_names[g] for g in topo.gpus()]
    servers = {r: int(topo.node_server[topo.node_id(r)]) for r in ranks}
    size = 2.0**30
    out = run(topo, hierarchical_all_reduce(ranks, size, servers=servers, slices=1, costs=ZERO))
    nvlink, nic, leaf_hop = 18 * 20.6e9, 48e9, 150e-9
    assert out.makespan_s == pytest.approx(2 * 7 / 8 * size / nvlink + size / 8 / nic + 2 * leaf_hop, rel=1e-9)


# --- pipeline and presets -------------------------------------------------------------------


def test_run_routes_each_flow_and_rejects_workload_columns():
    topo = preset("dgx_h100", figure="nominal")
    w = Workload.build(["a", "b"], ["gpu0", "gpu1"], ["gpu1", "gpu0"], [450e9, 225e9])
    out = run(topo, w)
    assert [topo.link_names[link] for link in out.routes.route(0)] == ["gpu0->nvswitch", "nvswitch->gpu1"]
    np.testing.assert_allclose(out.result.finish_s, [1.0, 0.5])
    with pytest.raises(InputError, match="start_s"):
        run(topo, w, start_s=[0.0, 0.0])
    with pytest.raises(InputError, match="another topology"):
        run(topo, w, router=Router(preset("dgx_a100", figure="nominal")))


def test_dgx1_rings_follow_its_nvlinks():
    topo = preset("dgx1_v100", figure="nominal")
    out = collective_time(topo, "all_reduce", 2**20, channels=2, costs=ZERO, slices=1)
    assert set(out.run.workload.tags["channel"]) == {"0", "1"}
    # Every message crosses one direct NVLink, never PCIe.
    assert set(np.diff(out.run.routes.flow_link_indptr)) == {1}
    assert {topo.link_technology[link] for link in out.run.routes.flow_link_indices} == {"nvlink2"}


def test_dgx1_rings_across_servers_walk_the_mesh_and_leave_through_one_nic_each():
    # Two DGX-1s: NCCL's inter-node rings enter at a NIC, walk the server's GPUs over NVLink and
    # leave through a NIC; rotated rings in index order would step from GPU 3 to GPU 4 through
    # the CPUs (QPI, 6 GB/s) and ran at 6 GB/s.
    topo = build_cluster("dgx1_v100", 2, figure="effective")
    ranks = [topo.node_names[g] for g in topo.gpus()]
    rings = mesh_server_rings(topo, ranks, rank_servers(topo, ranks))
    nvlinks = mesh_link_counts(topo, ranks[:8])
    exits = set()
    for ring in rings:
        local = [int(r.split("gpu")[1]) for r in ring[:8]]
        assert [int(r.split("gpu")[1]) for r in ring[8:]] == local  # both servers alike
        assert all(nvlinks[a, b] > 0 for a, b in zip(local, local[1:]))  # NVLink hops only
        # In and out through one NIC (GPUs 2k and 2k + 1 share NIC k).
        assert local[0] // 2 == local[-1] // 2
        exits.add(local[-1] // 2)
    # Six mesh rings over 4 NICs: 4 rings, one per NIC.
    assert len(rings) == 4 and exits == {0, 1, 2, 3}
    # The ring all-reduce then runs at the 4 EDR NICs' rate: each ring's inter-server hop carries
    # its 30 steps of S / 64 (4 rings, 16 ranks) at one NIC's rate, so busbw = 1.875 x 64 x NIC / 30.
    nic = topo.link_capacity_Bps[topo.link_names.index("n0.nic0->ib.su0.rail0")]
    out = collective_time(topo, "all_reduce", 1 << 30, algorithm="ring", protocol="simple")
    assert busbw_Bps("all_reduce", 1 << 30, out.time_s, 16) == pytest.approx(4 * nic, rel=0.005)


def test_dgx1_trees_across_servers_chain_over_nvlink():
    # NCCL searches a tree's chains as it searches its rings: on a DGX-1, over NVLink from one
    # NIC's GPU to the other's. Chains of the GPUs in index order stepped from GPU 3 to GPU 4
    # and from 7 to 0 through the CPUs (QPI): 256 MiB ran at 6 GB/s busbw where NCCL's model of
    # its tree gives 64 (until 2026-12-07).
    topo = build_cluster("dgx1_v100", 2, figure="effective")
    out = collective_time(topo, "all_reduce", 1 << 24, algorithm="tree", protocol="simple")
    indptr, indices = out.run.routes.flow_link_indptr, out.run.routes.flow_link_indices
    crossing = 0
    for f in range(len(indptr) - 1):
        hops = [topo.link_technology[link] for link in indices[indptr[f]:indptr[f + 1]]]
        if not hops:
            continue  # a step's zero-byte start, on no link
        if "ib_edr" in hops:
            # GPU -> PCIe switch -> its NIC, the rail, NIC -> switch -> GPU: never the CPUs.
            assert hops.count("pcie3") == 4 and set(hops) == {"pcie3", "ib_edr"}, hops
            crossing += 1
        else:
            assert hops == ["nvlink2"], hops  # one direct NVLink inside a server
    assert crossing > 0


GH200_QUAD = """
[server]
gpu = "GH200"
gpus = 4
gpu_fabric = "nvlink_mesh"
nvlink = "nvlink4"
nvlink_counts = [[0, 6, 6, 6], [6, 0, 6, 6], [6, 6, 0, 6], [6, 6, 6, 0]]
pcie = { generation = 5 }
cpu = { sockets = 4, kind = "grace", memory = "lpddr5x_grace" }
nics = { count = 4, speed_gbps = 200, kind = "roce" }
"""


def test_mesh_rings_across_servers_with_a_nic_a_gpu_enter_at_every_nic():
    # A GH200 quad node (an HPE Cray EX blade's: 4 GPUs linked all to all, a NIC each): no two
    # GPUs share a NIC, so each mesh ring enters (and, by PXN, leaves) at every GPU in turn.
    # Every ring entered at GPU 0 until 2026-12-05: one NIC carried every channel, and the ring
    # all-reduce ran at a quarter of the NICs' rate.
    topo = build_cluster(parse_system(GH200_QUAD).spec, 2, figure="effective")
    ranks = [topo.node_names[g] for g in topo.gpus()]
    rings = mesh_server_rings(topo, ranks, rank_servers(topo, ranks))
    entries = [int(ring[0].split("gpu")[1]) for ring in rings]
    # K4's six directed Hamiltonian cycles (each on half of every pair's links), each entered
    # at each of its 4 GPUs.
    assert len(rings) == 24 and sorted(entries) == [g for g in range(4) for _ in range(6)]
    assert len(set(rings)) == 24
    for ring in rings:
        assert [r.split(".")[1] for r in ring[4:]] == [r.split(".")[1] for r in ring[:4]]
    # Two rings a NIC, each crossing twice per 14 steps of S / 64: busbw = 1.75 x 64 x NIC / 28.
    nic = topo.link_capacity_Bps[topo.link_names.index("n0.nic0->ib.su0.rail0")]
    out = collective_time(topo, "all_reduce", 1 << 30, algorithm="ring", protocol="simple")
    assert busbw_Bps("all_reduce", 1 << 30, out.time_s, 8) == pytest.approx(4 * nic, rel=0.01)


A100_QUAD_TWO_NICS = """
[server]
gpu = "A100"
gpus = 4
gpu_fabric = "nvlink_mesh"
nvlink = "nvlink3"
nvlink_counts = [[0, 4, 4, 4], [4, 0, 4, 4], [4, 4, 0, 4], [4, 4, 4, 0]]
pcie = { generation = 4 }
cpu = { sockets = 1, memory = "ddr4_3200_8ch" }
nics = { count = 2, speed_gbps = 200, kind = "ib", serves = [[0, 3], [1, 2]] }
"""


@pytest.mark.parametrize("channels", [None, 2])
def test_mesh_rings_across_servers_end_near_their_nics_and_take_the_nics_in_turn(channels):
    # 4 GPUs linked all to all (ALCF Polaris's A100 nodes), a NIC for GPUs 0 and 3 and one for
    # 1 and 2, each NIC under the PCIe switch of its first GPU. Until 2026-12-07 mesh rings
    # with no two GPUs of one NIC side by side were cut at GPU 0, and a call took the rings
    # in the mesh's order: its 2 channels both entered through NIC 0, and the ring all-reduce
    # ran at one NIC's rate.
    topo = build_cluster(parse_system(A100_QUAD_TWO_NICS).spec, 2, figure="effective")
    ranks = [topo.node_names[g] for g in topo.gpus()]
    rings = mesh_server_rings(topo, ranks, rank_servers(topo, ranks))
    nic_of = {0: 0, 3: 0, 1: 1, 2: 1}
    entries = [nic_of[int(ring[0][-1])] for ring in rings]
    assert entries == [0, 1] * (len(rings) // 2)  # channel c starts at NIC c mod 2
    # The 4 of K4's 6 mesh rings that pass between GPUs 0 and 1, the two under their NICs'
    # switches, enter and leave at them; the other 2 at one of them.
    ends = sorted(sorted((int(ring[0][-1]), int(ring[3][-1]))) for ring in rings)
    assert len(rings) == 6 and ends[:4] == [[0, 1]] * 4 and all(0 in e or 1 in e for e in ends)
    nic = topo.link_capacity_Bps[topo.link_names.index("n0.nic0->ib.su0.rail0")]
    # Two channels asked for move their share of NCCL's model (2 of its 4 channels' 48 GB/s):
    # without the model's caps, they show whether they take the NICs in turn.
    out = collective_time(topo, "all_reduce", 1 << 30, algorithm="ring", protocol="simple", channels=channels,
                          model_caps=channels is None)
    assert busbw_Bps("all_reduce", 1 << 30, out.time_s, 8) == pytest.approx(2 * nic, rel=0.01)
    if channels is not None:
        capped = collective_time(topo, "all_reduce", 1 << 30, algorithm="ring", protocol="simple", channels=channels)
        assert busbw_Bps("all_reduce", 1 << 30, capped.time_s, 8) == pytest.approx(2 * 12e9, rel=0.01)


def test_run_passes_simulate_options():
    topo = preset("dgx_h100", figure="nominal")
    w = Workload.build(["a"], ["gpu0"], ["gpu1"], [450e9])
    out = run(topo, w, record_links=True)
    start, end, rate = out.result.link_segments(topo.link_id("gpu0->nvswitch"))
    assert (start.tolist(), end.tolist(), rate.tolist()) == ([0.0], [1.0], [450e9])


def test_collective_time_on_dgx_h100_reaches_the_nvlink_rate():
    topo = preset("dgx_h100", figure="nominal")
    out = collective_time(topo, "all_reduce", 2**30, costs=ZERO)
    assert busbw_Bps("all_reduce", 2**30, out.time_s, 8) == pytest.approx(450 * G)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "all_to_all"])
@pytest.mark.parametrize("channels", [0, -1, 1.5, True])
def test_a_bad_channel_count_is_named_with_the_collective(collective, channels):
    # It named an internal function: "rotated_rings: channels must be a positive integer".
    with pytest.raises(InputError, match=f"^{collective}: channels must be a positive integer, got {channels!r}$"):
        collective_time(preset("dgx_h100", figure="effective"), collective, 1024, channels=channels)


def test_user_channel_bounds_change_the_channels_not_their_share():
    # NCCL's model bandwidth is the topology search's (graphs[a]->nChannels * bw, [NCCL]
    # v2.30.7-1 src/graph/tuning.cc), whatever NCCL_MIN/MAX_NCHANNELS make of the communicator.
    # One channel moved all of it (356.8 GB/s, as on 24), and a 128 KiB call on the 4 channels
    # NCCL shrinks to took 41 us with NCCL_MIN_NCHANNELS=64 against 24.8 us without.
    topo = preset("dgx_h100", figure="effective")
    ring = {"NCCL_ALGO": "ring"}
    one = sweep(topo, "all_reduce", [2**30], nccl_env={**ring, "NCCL_MAX_NCHANNELS": "1"})[0]
    assert one.channels == 1
    # One of the 24 channels' share of NCCL's 360 GB/s Simple ring model: 15 GB/s.
    assert one.busbw_GBps == pytest.approx(15.0, rel=0.01)
    # The caller's one channel (--channels 1) is held so too: it moved all 24 channels' worth.
    asked = sweep(topo, "all_reduce", [2**30], nccl_env=ring, channels=1)[0]
    assert asked.channels == 1 and asked.time_us == pytest.approx(one.time_us, rel=1e-9)
    small = [sweep(topo, "all_reduce", [2**17], nccl_env={**ring, **extra})[0] for extra in ({}, {"NCCL_MIN_NCHANNELS": "64"})]
    assert small[0].channels == small[1].channels == 4
    assert small[1].time_us == pytest.approx(small[0].time_us, rel=1e-12)
    # On all 64 channels a large call moves what the links give, as on the communicator's 24.
    many = sweep(topo, "all_reduce", [2**30], nccl_env={**ring, "NCCL_MIN_NCHANNELS": "64"})[0]
    assert many.channels == 64 and many.busiest_link.startswith("gpu")


def test_fewer_nvls_channels_move_their_share_of_the_nvls_budget():
    # NCCL_NVLS_NCHANNELS (and the CTA bounds) set the call's NVLS channels, not NCCL's model
    # bandwidth: as a ring's channels, a call on k of the default 16 moves k/16 of it (it was
    # as fast on 2 as on 16, and faster at 64 MiB: 276.8 us against 327.0).
    topo = preset("dgx_h100", figure="effective")
    rows = {n: sweep(topo, "all_reduce", [2**26, 2**30], nccl_env={"NCCL_NVLS_NCHANNELS": str(n)})
            for n in (2, 8, 16)}
    assert all(r.algorithm == "nvls" and r.channels == n for n, pair in rows.items() for r in pair)
    for k in range(2):
        assert rows[2][k].time_us > rows[8][k].time_us > rows[16][k].time_us
    # At 1 GiB the budget binds: busbw in proportion to the channels.
    full = rows[16][1].busbw_GBps
    assert rows[8][1].busbw_GBps == pytest.approx(full * 8 / 16, rel=0.03)
    assert rows[2][1].busbw_GBps == pytest.approx(full * 2 / 16, rel=0.03)
    assert sweep(topo, "all_reduce", [2**30])[0].time_us == pytest.approx(rows[16][1].time_us, rel=1e-12)


def test_an_iterations_aggregated_calls_run_as_one_call_of_their_bytes():
    # nccl-tests -m 8: eight 1 MiB all-reduces in one group, which NCCL merges into one task
    # of 8 MiB and chooses for ([NCCL] src/enqueue.cc ncclPrepareTasks): NVLS on one DGX H100,
    # where a 1 MiB call alone runs a ring with LL.
    topo = preset("dgx_h100", figure="effective")
    alone, merged = (sweep(topo, "all_reduce", [2**20], agg_iters=m)[0] for m in (1, 8))
    whole = sweep(topo, "all_reduce", [2**23])[0]
    assert (alone.algorithm, alone.protocol) == ("ring", "ll")
    assert (merged.algorithm, merged.channels) == (whole.algorithm, whole.channels) == ("nvls", 16)
    assert merged.size_bytes == 2**20 and merged.time_us == pytest.approx(whole.time_us / 8, rel=1e-12)
    # All-to-alls are point-to-point: no task to merge, eight calls of 1 MiB.
    pair = sweep(topo, "all_to_all", [2**20], agg_iters=8)[0]
    assert pair.time_us == pytest.approx(sweep(topo, "all_to_all", [2**20])[0].time_us, rel=0.05)
    assert merged.busbw_GBps == pytest.approx(whole.busbw_GBps, rel=1e-12)


def test_small_messages_are_latency_bound_and_busbw_grows_with_size():
    topo = preset("dgx_h100", figure="effective")
    sizes = message_sizes("1K", "1G", 8)
    rows = sweep(topo, "all_reduce", sizes, algorithm="ring", protocol="simple")
    busbw = [r.busbw_GBps for r in rows]
    assert all(a < b for a, b in itertools.pairwise(busbw))
    # Latency-bound: 1 KiB and 8 KiB take nearly the same time, NCCL's ring latency
    # (8.4 us base + 14 steps x 3.4 us = 56 us) and, at 1 KiB, 14 steps of 128 B on the one
    # channel NCCL runs it on, at that channel's share of the bus bandwidth (12 search
    # channels x 30 GB/s over the communicator's 24 channels = 15 GB/s).
    assert rows[0].channels == 1
    assert rows[0].time_us == pytest.approx(8.4 + 14 * 3.4 + 14 * 128 / 15e9 * 1e6, rel=1e-9)
    # 8 KiB: 14 steps of 1 KiB on that one channel.
    assert rows[1].time_us == pytest.approx(8.4 + 14 * 3.4 + 14 * 1024 / 15e9 * 1e6, rel=1e-9)
    # 256 MiB: NCCL's 24 channels each move 256 MiB / 24 / 8 = 1.3 MiB per step, one chunk in
    # two slices (chunks.py); on all 24 channels a Simple ring is not held to the search's
    # 360 GB/s, so the one lane's 16 MiB slices go at the NVLink rate, 370.8 GB/s, each after
    # the one before it on its hop and its step latency: 28 slice times.
    assert rows[-1].channels == 24
    time_us = 8.4 + 28 * (3.4 + 2**28 / 8 / 2 / 370.8e9 * 1e6)
    assert rows[-1].time_us == pytest.approx(time_us, rel=1e-9)
    assert 0.9 * 370.8 < busbw[-1] < 370.8  # approaches the NVLink rate


def test_protocol_auto_keeps_the_fastest():
    topo = preset("dgx_h100", figure="effective")
    small = collective_time(topo, "all_reduce", 1024, protocol="auto")
    large = collective_time(topo, "all_reduce", 2**30, protocol="auto")
    assert small.protocol == "ll"
    assert large.protocol == "simple"
    with pytest.raises(InputError, match="either costs or protocol"):
        collective_time(topo, "all_reduce", 1024, protocol="ll", costs=ZERO)
    with pytest.raises(InputError, match="needs at least 2 ranks"):
        collective_time(topo, "all_reduce", 1024, ranks=["gpu0"])
    with pytest.raises(InputError, match="unknown node 'gpu9'"):
        collective_time(topo, "all_reduce", 1024, ranks=["gpu0", "gpu9"])
    # A CPU, memory or NIC rank was laid out as if it were a GPU; a name alone was read letter by letter.
    with pytest.raises(InputError, match=r"^all_reduce: ranks: 'cpu0' is not a GPU \(a cpu node\)$"):
        collective_time(topo, "all_reduce", 1024, ranks=["gpu0", "cpu0"])
    with pytest.raises(InputError, match=r"^all_to_all: ranks: 'nic1' is not a GPU \(a nic node\)$"):
        collective_workload(topo, "all_to_all", 1024, ranks=["gpu0", "gpu1", "nic1"])
    with pytest.raises(InputError, match="all_reduce: ranks must be a sequence of node names, got the string 'gpu0'"):
        collective_time(topo, "all_reduce", 1024, ranks="gpu0")


def test_servers_regroups_ranks_among_the_topologys_servers_only():
    two = build_cluster("dgx_h100", 2, figure="effective")
    ranks = ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]
    real = {"n0.gpu0": "n0", "n0.gpu1": "n0", "n1.gpu0": "n1", "n1.gpu1": "n1"}
    # Names the topology lacks ran, as if the ranks were on servers of their own.
    with pytest.raises(InputError, match=r"^all_reduce: servers: rank 'n0\.gpu0': 'zz' is not a server of the "
                                         r"topology$"):
        collective_workload(two, "all_reduce", 2**20, ranks=ranks, algorithm="ring", servers=dict.fromkeys(ranks, "zz"))
    # A partial table was named only by the builder, after the layout: "rank 'n0.gpu1' has no server".
    with pytest.raises(InputError, match=r"^all_reduce: servers: the table gives no server for rank 'n0\.gpu1'"):
        collective_workload(two, "all_reduce", 2**20, ranks=ranks, algorithm="ring", servers={"n0.gpu0": "n0"})
    with pytest.raises(InputError, match=r"^all_reduce: servers: 'n0\.gpu5' is not one of the collective's ranks$"):
        collective_workload(two, "all_reduce", 2**20, ranks=ranks, algorithm="ring",
                            servers={**real, "n0.gpu5": "n0"})
    # The topology's own grouping, given, lays out what the default does.
    given = collective_workload(two, "all_reduce", 2**20, ranks=ranks, algorithm="ring", servers=real).workload
    default = collective_workload(two, "all_reduce", 2**20, ranks=ranks, algorithm="ring").workload
    assert given.names == default.names
    np.testing.assert_array_equal(given.size_bytes, default.size_bytes)


def test_nvls_needs_nvswitch_gen3_and_the_simple_protocol():
    with pytest.raises(InputError, match="NVSwitch generation 3 or later"):
        collective_time(preset("dgx_a100", figure="effective"), "all_reduce", 2**20, algorithm="nvls")
    h100 = preset("dgx_h100", figure="effective")
    with pytest.raises(InputError, match="Simple protocol only"):
        collective_time(h100, "all_reduce", 2**20, algorithm="nvls", protocol="ll")
    two = build_cluster("dgx_h100", 2, figure="effective")
    with pytest.raises(InputError, match=r"NVLS runs across servers only with CollNet \(NCCL_COLLNET_ENABLE=1"):
        collective_time(two, "all_reduce", 2**20, algorithm="nvls")
    collnet = collective_time(two, "all_reduce", 2**20, algorithm="nvls", nccl_env={"NCCL_COLLNET_ENABLE": "1"})
    assert collnet.algorithm == "nvls_sharp"
    assert collective_time(h100, "all_reduce", 2**20, algorithm="nvls", protocol="auto").protocol == "simple"


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_every_collective_runs_on_a_two_server_cluster(collective):
    topo = build_cluster("dgx_h100", 2, figure="effective")
    out = collective_time(topo, collective, 2**20)
    assert out.time_s > 0
    assert np.all(out.run.result.finish_s > 0)


# --- nccl-tests reporting -------------------------------------------------------------------


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 4) == 1.5
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == bus_factor("all_to_all", 4) == 0.75
    assert bus_factor("gather", 4) == bus_factor("scatter", 4) == 0.75  # nccl-tests src/gather.cu, scatter.cu
    # hypercube_perf prints busbw = algbw = what a rank receives over the time (src/hypercube.cu).
    assert bus_factor("hypercube", 4) == 1.0 and algbw_factor("hypercube", 4) == 0.75
    assert algbw_factor("all_gather", 4) == 1.0
    assert bus_factor("broadcast", 4) == bus_factor("reduce", 4) == bus_factor("send", 2) == 1.0
    assert algbw_Bps(0, 0.0) == 0.0
    with pytest.raises(InputError, match="unknown collective"):
        bus_factor("custom", 4)


def test_sizes_parse_as_nccl_tests_does():
    assert parse_size("8") == 8 and parse_size("1k") == 1024 and parse_size("8G") == 8 * 2**30
    assert message_sizes(8, "64", 2) == [8, 16, 32, 64]
    assert message_sizes("1K", "5K", 2) == [1024, 2048, 4096]
    for bad in ("8X", "-1", "1.5G"):
        with pytest.raises(InputError, match="size"):
            parse_size(bad)
    # A factor of 1: nccl-tests' fixed increment (-i, default 1 MiB) instead.
    assert message_sizes(8, 64, 1, 24) == [8, 32, 56]
    assert message_sizes("1M", "3M", 1) == [1 << 20, 2 << 20, 3 << 20]
    with pytest.raises(InputError, match="factor"):
        message_sizes(8, 64, 0)
    with pytest.raises(InputError, match="increment, which must be at least 1, got 0"):
        message_sizes(8, 64, 1, 0)
    # -i 1 up to 8 GiB: billions of sizes, refused before any is listed.
    with pytest.raises(InputError, match=r"sizes 8 to 8589934592 by 1 bytes are 8,589,934,585 sizes, over 100,000"):
        message_sizes(8, "8G", 1, 1)


def test_sweep_rows_round_split_collectives_to_equal_parts():
    topo = preset("dgx_h100", figure="effective")
    rows = sweep(topo, "all_gather", [8, 100, 1000, 4096], dtype="float")
    # nccl-tests 2.13.12 on: each rank's part (count / 8) trimmed to 16 bytes, 4 floats:
    # 1000 B is 250 floats, 31 a rank, 28 once trimmed, 896 B in all; 100 B leaves none.
    assert [r.size_bytes for r in rows] == [0, 0, 896, 4096]
    assert [r.count for r in rows] == [0, 0, 28, 128]  # each rank's part, as nccl-tests prints it
    assert rows[0].algbw_GBps == 0.0 and rows[0].redop == "none" and rows[0].root == -1
    table = format_table(rows, "title")
    assert table.splitlines()[0] == "# title" and "4096" in table and "Avg bus bandwidth" in table
    assert '"size_bytes": 896' in rows_to_json(rows, system="dgx_h100")
    # Doubles trim to 2: 125 a part of 15, 14 kept. Collectives that do not split keep whole elements.
    assert [(r.size_bytes, r.count) for r in sweep(topo, "reduce_scatter", [1000], dtype="double")] == [(896, 14)]
    assert [(r.size_bytes, r.count) for r in sweep(topo, "all_reduce", [1001], dtype="double")] == [(1000, 125)]
    # Untrimmed, as an older nccl-tests printed them: 31 floats a rank.
    assert [(r.size_bytes, r.count) for r in sweep(topo, "all_gather", [1000], aligned=False)] == [(992, 31)]


def test_alltoallv_rows_print_what_a_rank_sends():
    topo = preset("dgx_h100", figure="effective")
    (row,) = sweep(topo, "all_to_all_v", [8 * 2**20])
    # nccl-tests prints max(sendBytes, recvBytes), the parts summed after their trim, and the
    # count of the even part (8 MiB / 8 ranks in floats); busbw on the printed size.
    assert (row.size_bytes, row.count) == (int(all_to_all_v_bytes(8, 8 * 2**20)[0].sum()), 262144)
    assert row.size_bytes == 8388560
    assert row.busbw_GBps == pytest.approx(row.size_bytes / (row.time_us * 1e3) * 7 / 8)
    assert sweep(topo, "all_to_all_v", [8])[0].time_us == 0.0  # nothing sent, nothing run


def test_rows_of_no_bytes_take_no_time_where_nothing_runs():
    # The sources the rule cites: NCCL discards an empty collective from 2.22.3, an
    # all-to-all from 2.28; nccl-tests' gather and scatter skip the call; sends still run.
    assert not empty_call_runs("all_gather", "2.22.3") and empty_call_runs("all_gather", "2.19.3")
    assert empty_call_runs("all_to_all", "2.27.7") and not empty_call_runs("all_to_all", "2.28.9")
    assert not empty_call_runs("gather", "2.19.3") and empty_call_runs("send") and empty_call_runs("hypercube")
    topo = preset("dgx_h100", figure="effective")
    # 64 B of floats on 8 ranks is 2 floats a rank, trimmed to none.
    (now,) = sweep(topo, "all_gather", [64])
    (old,) = sweep(topo, "all_gather", [64], nccl_version="2.19.3")
    assert now.size_bytes == old.size_bytes == 0 and now.time_us == now.latency_us == 0.0
    assert old.time_us > 5  # a launch and NCCL's latency
    assert sweep(topo, "send", [0])[0].time_us > 5
    # A call that runs launches its kernels: one thread driving 8 GPUs takes 8 x 4.2 us; one
    # that does not run launches nothing.
    (launched,) = sweep(topo, "all_gather", [64], nccl_version="2.19.3", gpus_per_thread=8)
    assert launched.launch_bound and launched.time_us == pytest.approx(8 * 4.2)
    assert sweep(topo, "all_gather", [64], gpus_per_thread=8)[0].time_us == 0.0


@pytest.mark.parametrize(
    "log, collective",
    [("all_gather_perf_dgx_h100_1node.txt", "all_gather"), ("alltoall_perf_dgx_h100_1node.txt", "all_to_all")],
)
def test_sweep_rows_count_elements_as_nccl_tests_logs_do(log, collective):
    measured = parse_nccl_log(Path(__file__).parents[1] / "data" / "nccl_tests" / log).rows[:2]
    rows = sweep(preset("dgx_h100", figure="effective"), collective, [r.size_bytes for r in measured])
    assert [(r.size_bytes, r.count) for r in rows] == [(r.size_bytes, r.count) for r in measured]


def test_send_defaults_to_the_pair_a_sendrecv_ring_waits_for():
    # nccl-tests' sendrecv_perf sends around the whole ring at once; across servers the pair
    # leaving the first server bounds it (flowsim check predicts the same pair).
    two = build_cluster("dgx_h100", 2, figure="effective")
    gpus = [two.node_names[g] for g in two.gpus()]
    assert send_pair(two, gpus) == ["n0.gpu7", "n1.gpu0"]
    assert collective_time(two, "send", 1 << 30).ranks == ("n0.gpu7", "n1.gpu0")
    one = preset("dgx_h100", figure="effective")
    assert send_pair(one, [one.node_names[g] for g in one.gpus()]) == ["gpu0", "gpu1"]


# --- steps and streams ----------------------------------------------------------------------

TWO_SERVERS = {"g0": 0, "g1": 0, "g2": 1, "g3": 1}
COSTS = CollectiveCosts(base_s=0.5, intra_step_s=0.25, inter_step_s=2.0, wire_efficiency=1.0, source="test")


def test_stream_is_one_flow_per_hop_and_a_zero_byte_latency_chain_beside_it():
    w = all_reduce(RANKS, 4 * G, channels=2, model="stream", servers=TWO_SERVERS, costs=COSTS)
    assert len(w) == 2 * 4 * 2 and set(w.tags["model"]) == {"stream"}
    data = [f for f in range(len(w)) if not w.names[f].endswith(".chain")]
    # Each hop carries its 2(n - 1) = 6 chunks of S / n / channels = 0.5 GB.
    assert w.size_bytes[data].tolist() == [3 * G] * 8
    assert w.size_bytes[[f for f in range(len(w)) if f not in data]].tolist() == [0.0] * 8
    assert w.dep_indices.size == 0  # every hop streams from the start
    # Hops g0>g1 and g2>g3 are intra-server: their 6 steps x 4 slices (0.5 GB in 512 KiB
    # slots, at most 4) each pay 0.25 after the one before, as in the step DAG. g1>g2 and
    # g3>g0 are inter-server, where the latencies overlap: one 2.0.
    hop = {"r0": 6 * 4 * 0.25, "r1": 2.0, "r2": 6 * 4 * 0.25, "r3": 2.0}
    for f in data:
        assert w.overhead_s[f] == pytest.approx(0.5 + hop[w.names[f].split(".")[-1]])
    # Chain of the 6 hops ending at each hop: one lap (4.5) and the hop and the one before.
    chains = {w.names[f]: w.overhead_s[f] for f in range(len(w)) if f not in data}
    assert chains["all_reduce.ch0.stream.r0.chain"] == pytest.approx(0.5 + 4.5 + 2.0 + 0.25)
    assert chains["all_reduce.ch1.stream.r1.chain"] == pytest.approx(0.5 + 4.5 + 0.25 + 2.0)


@pytest.mark.parametrize("build", [all_reduce, reduce_scatter, all_gather])
def test_stream_bandwidth_term_equals_the_step_dags(build):
    steps = run(ring_topology(), build(RANKS, 4 * G, slices=1, costs=ZERO, model="steps")).makespan_s
    stream = run(ring_topology(), build(RANKS, 4 * G, costs=ZERO, model="stream")).makespan_s
    assert stream == pytest.approx(steps)


def test_stream_time_is_the_later_of_its_transfer_and_its_latency_chain():
    costs = CollectiveCosts(base_s=0.5, intra_step_s=0.25, inter_step_s=9.0, wire_efficiency=1.0, source="test")
    # Bandwidth-bound: 6 GB at 1 GB/s after the base and the hop's 6 steps x 4 slices of
    # 0.25 s, which the step DAG's messages pay one after another on the hop.
    out = run(ring_topology(), all_reduce(RANKS, 4 * G, costs=costs, model="stream"))
    assert out.makespan_s == pytest.approx(0.5 + 24 * 0.25 + 6.0)
    steps = run(ring_topology(), all_reduce(RANKS, 4 * G, costs=costs, slices=4, model="steps"))
    assert steps.makespan_s == pytest.approx(out.makespan_s)
    # Latency-bound: one slice per step; the hop's 6 steps of 0.25 s and 1 KB each, as in
    # the step DAG.
    out = run(ring_topology(), all_reduce(RANKS, 4e3, costs=costs, model="stream"))
    assert out.makespan_s == pytest.approx(0.5 + 6 * (0.25 + 1e-6))


def test_streamed_chain_moves_each_hops_first_slice_at_the_caps():
    # LL-like costs (latencies overlap), every message held to 0.5 GB/s, between servers to
    # 0.25 GB/s. Steps of 1 GB per hop in 2 slices of 0.5 GB: 1 s a slice inside a server
    # and 2 s between servers, on top of the hops' step latencies 0.25 and 2.0.
    streaming = CollectiveCosts(base_s=0.5, intra_step_s=0.25, inter_step_s=2.0, wire_efficiency=1.0, source="test",
                                streams=True)
    w = all_reduce(RANKS, 4 * G, slices=2, model="stream", servers=TWO_SERVERS, costs=streaming,
                   cap_Bps=0.5 * G, net_cap_Bps=0.25 * G)
    chains = {w.names[f]: w.overhead_s[f] for f in range(len(w)) if w.names[f].endswith(".chain")}
    # A lap is 1.25 + 4.0 + 1.25 + 4.0 = 10.5; the 6 hops ending at r0 are a lap, r3 and r0,
    # then r0's second slice of the last step (1 s); at r1 a lap, r0 and r1, then 2 s.
    assert chains["all_reduce.ch0.stream.r0.chain"] == pytest.approx(0.5 + 10.5 + 4.0 + 1.25 + 1.0)
    assert chains["all_reduce.ch0.stream.r1.chain"] == pytest.approx(0.5 + 10.5 + 1.25 + 4.0 + 2.0)
    caps = {w.names[f]: w.cap_Bps[f] for f in range(len(w))}
    assert caps["all_reduce.ch0.stream.r0"] == 0.5 * G and caps["all_reduce.ch0.stream.r1"] == 0.25 * G


def test_streamed_ring_equals_the_step_dag_where_its_latency_chain_binds():
    # Steps of 0.1 GB, one slice each, capped at 0.5 GB/s (the links give 1): each step takes
    # its latency 0.25 s and its transfer 0.2 s, one after another along the chain of
    # forwarded chunks, so 6 steps take 2.7 s, where the hop alone is busy 6 x 0.2 = 1.2 s.
    streaming = CollectiveCosts(base_s=0.0, intra_step_s=0.25, inter_step_s=0.25, wire_efficiency=1.0, source="test",
                                streams=True)
    times = {
        model: run(ring_topology(), all_reduce(RANKS, 4e8, slices=1, costs=streaming, model=model,
                                               cap_Bps=0.5 * G)).makespan_s
        for model in ("steps", "stream")
    }
    assert times["steps"] == pytest.approx(2.7)
    assert times["stream"] == pytest.approx(2.7)


def test_ring_caps_hold_every_message_and_those_between_servers():
    w = all_reduce(RANKS, 4 * G, slices=1, servers=TWO_SERVERS, costs=COSTS, cap_Bps=3 * G, net_cap_Bps=G)
    crossing = {("g1", "g2"), ("g3", "g0")}
    expected = [G if (a, b) in crossing else 3 * G for a, b in zip(w.src, w.dst, strict=True)]
    assert w.cap_Bps.tolist() == expected
    with pytest.raises(InputError, match=r"^all_gather: net_cap_Bps must be > 0, got -inf$"):
        all_gather(RANKS, G, net_cap_Bps=-math.inf)


@pytest.mark.parametrize("protocol", ["ll", "ll128"])
@pytest.mark.parametrize("size", [1 << 20, 16 << 20])
def test_streamed_ll_rings_agree_with_the_step_dag_on_two_dgx_h100(protocol, size):
    # NCCL's per-channel LL and LL128 limits bind these rings, and their chunks take one slice
    # a step: the step DAG pays each step's latency and transfer in turn, as the stream's
    # chain now does (it was 8-33% faster, charging latencies only).
    topology = build_cluster("dgx_h100", 2, figure="effective")
    times = {
        m: collective_time(topology, "all_reduce", size, algorithm="ring", protocol=protocol, model=m).time_s
        for m in ("steps", "stream")
    }
    assert times["stream"] == pytest.approx(times["steps"], rel=0.02)


def test_auto_streams_above_the_message_limit(monkeypatch):
    assert set(all_reduce(RANKS, G, slices=2).tags["model"]) == {"steps"}  # 48 messages
    monkeypatch.setattr(collective_dag, "STEP_MESSAGE_LIMIT", 47)
    assert set(all_reduce(RANKS, G, slices=2).tags["model"]) == {"stream"}
    assert set(all_reduce(RANKS, G, slices=2, model="steps").tags["model"]) == {"steps"}
    assert set(all_reduce(RANKS, G, slices=1).tags["model"]) == {"steps"}  # 24 messages


def test_streamed_hierarchical_phases_chain_per_rank():
    # Two "servers" of two ranks on one switch, every GPU cabled at 1 GB/s.
    w = hierarchical_all_reduce(RANKS, 4 * G, servers=TWO_SERVERS, model="stream", costs=ZERO)
    by_name = {name: f for f, name in enumerate(w.names)}
    # g0 sends on rail 0 once the server ring delivered to it: data and latency chain.
    rail = by_name["all_reduce.ar.rail0.ch0.stream.r0"]
    assert names(w, w.dependencies(rail)) == [
        "all_reduce.rs.srv0.ch0.stream.r1",
        "all_reduce.rs.srv0.ch0.stream.r1.chain",
    ]
    # Shards of S / 2 = 2 GB; each phase's hop carries 2 GB (reduce-scatter and all-gather:
    # 1 step of 2 GB; the rails: 2 steps of 1 GB), one hop per cable and direction: 2 s each.
    assert run(star_topology(), w).makespan_s == pytest.approx(2.0 + 2.0 + 2.0)


@pytest.mark.parametrize("model", ["steps", "stream"])
def test_large_messages_agree_across_models_on_two_dgx_h100(model):
    topology = build_cluster("dgx_h100", 2, figure="effective")
    times = {
        m: collective_time(topology, "all_reduce", 2**30, algorithm="ring", model=m).time_s for m in ("steps", "stream")
    }
    assert times[model] == pytest.approx(times["steps"], rel=0.02)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: all_reduce(RANKS, G, model="fluid"), "unknown model 'fluid'; valid ones: auto, steps, stream"),
        (
            lambda: collective_time(star_topology(), "all_reduce", G, algorithm="nvls", model="stream"),
            "nvls_all_reduce has no stream model; rings have one (all_reduce, reduce_scatter, all_gather, "
            "hierarchical_all_reduce), and so have trees, chains (broadcast, reduce), nvls_tree_all_reduce and the "
            "reductions in the network (nvls_sharp_all_reduce, collnet_direct_all_reduce, collnet_chain_all_reduce)",
        ),
        (lambda: collective_time(star_topology(), "all_to_all", G, model="stream"), "all_to_all has no stream"),
        (lambda: send("g0", "g1", G, model="stream"), "send has no stream model"),
    ],
)
def test_bad_model_is_named(call, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


@pytest.mark.parametrize(
    ("build", "n_messages"),
    [
        (lambda model: all_to_all(RANKS, G, model=model), 4 * 3),
        (lambda model: gather(RANKS, G, model=model), 3),
        (lambda model: nvls_all_reduce(RANKS, G, switch="sw", channels=2, slices=3, model=model), 2 * 4 * 3 * 10),
        (lambda model: send("g0", "g1", G, channels=2, slices=3, model=model), 2 * 3),
    ],
    ids=["all_to_all", "gather", "nvls", "send"],
)
def test_auto_refuses_step_dags_past_the_limit_that_have_no_stream(monkeypatch, build, n_messages):
    assert len(build("auto")) == n_messages  # the count auto checks is the count built
    monkeypatch.setattr(collective_dag, "STEP_MESSAGE_LIMIT", n_messages - 1)
    with pytest.raises(InputError, match=f"over {n_messages:,} messages is more than the {n_messages - 1:,}"):
        build("auto")
    assert set(build("steps").tags["model"]) == {"steps"}


def test_streaming_tree_forwards_lines_instead_of_chunks():
    # LL and LL128 forward each line as it arrives: every hop of both trees streams at once.
    # Each tree carries S/2 over 3 edges up and 3 down; g1's and g2's uplinks and downlinks
    # carry 4 of the 12 hops each, so every hop gets B/4 and moves 2e9 bytes in 8 s = 2 S / B
    # (store-and-forward, one slice: 12 s, test_tree_all_reduce_on_a_switch).
    streaming = CollectiveCosts(0.0, 0.0, 0.0, 1.0, "test", streams=True)
    out = run(star_topology(), tree_all_reduce(RANKS, 4 * G, costs=streaming))
    assert out.makespan_s == pytest.approx(8.0)


def test_streaming_chain_pays_the_hop_latencies_once():
    # Broadcast over 3 hops of the ring, streamed: the last hop starts after 3 step latencies
    # (0.5 s each, plus the 1 s base on the first) and all hops move S at B at once: 1 + 1.5 + 4.
    costs = CollectiveCosts(1.0, 0.5, 0.5, 1.0, "test", streams=True)
    out = run(ring_topology(), broadcast(RANKS, 4 * G, costs=costs))
    assert out.makespan_s == pytest.approx(1.0 + 3 * 0.5 + 4.0)


def test_nvls_tree_trees_do_not_wait_for_each_other():
    # On two servers each server is the root of one tree; a root sends its tree's half down
    # once its own tree's reduction is in, not after the other tree's down message arrives.
    ranks = ["b0g0", "b0g1", "b1g0", "b1g1"]
    servers = {r: r[:2] for r in ranks}
    w = nvls_tree_all_reduce(ranks, 4 * G, servers=servers, switches={"b0": "sw0", "b1": "sw1"}, slices=1)
    for f, name in enumerate(w.names):
        if ".down." in name:
            tree = name.split(".down.")[1].split(".")[0]
            other = {"t0": "t1", "t1": "t0"}[tree]
            assert not [d for d in w.dependencies(f) if f".down.{other}." in w.names[d]], name


def test_streamed_nvls_tree_sends_each_message_once_its_first_slice_ahead():
    # 4 servers of 2 GPUs, chunks of 4 GB in 4 slices. Streamed, each message of the step
    # DAG's one chunk is its first slice (the start the messages after it wait for) and the
    # rest. NCCL's tree 0 over 4 servers is 0 <- 2 <- {1, 3}.
    ranks = [f"b{s}g{g}" for s in range(4) for g in range(2)]
    servers = {r: r[:2] for r in ranks}
    costs = CollectiveCosts(base_s=1.0, intra_step_s=0.25, inter_step_s=2.0, wire_efficiency=1.0, source="test")
    w = nvls_tree_all_reduce(ranks, 8 * G, servers=servers, switches={f"b{s}": f"sw{s}" for s in range(4)},
                             slices=4, costs=costs, model="stream", tree_cap_Bps=G)
    assert set(w.tags["model"]) == {"stream"}
    flows = {name: f for f, name in enumerate(w.names)}
    # Per chunk: 2 reductions, a result, a store and 2 multicasts in each server, 3 edges up
    # and 3 down in each tree; two flows each.
    assert len(flows) == 2 * 2 * (4 * (2 + 1 + 1 + 2) + 2 * 2 * 3)
    head = "all_reduce.ch0.chunk1.sl0"

    def flow(kind):
        f = flows[f"{head}.{kind}"]
        return w.size_bytes[f], w.overhead_s[f], w.cap_Bps[f], names(w, w.dependencies(f))

    # A GPU's copy into its switch: the base and the latency, one slice of 1 GB; the rest
    # after it, paying the other three slices' latencies one after another.
    assert flow("reduce.r3.start") == (G, pytest.approx(1.25), math.inf, [])
    assert flow("reduce.r3") == (3 * G, pytest.approx(0.75), math.inf, [f"{head}.reduce.r3.start"])
    # Server 2's half chunk up tree 0 once its own sum's and its children's first slices are
    # through; between servers the slices' latencies overlap, so the rest pays none.
    assert flow("up.t0.s2.start") == (G / 2, pytest.approx(2.0), G, [
        f"{head}.result.s2.start", f"{head}.up.t0.s1.start", f"{head}.up.t0.s3.start"])
    assert flow("up.t0.s2") == (1.5 * G, 0.0, G, [f"{head}.up.t0.s2.start"])


def test_streamed_simple_tree_hops_send_their_first_slice_ahead():
    # NCCL's tree 0 over 4 ranks: 0 <- 2 <- {1, 3}. Each tree carries S / 2 = 2 GB in 4
    # slices of 0.5 GB; a hop's step latency is 0.25 s.
    costs = CollectiveCosts(base_s=1.0, intra_step_s=0.25, inter_step_s=2.0, wire_efficiency=1.0, source="test")
    w = tree_all_reduce(RANKS, 4 * G, slices=4, costs=costs, model="stream", cap_Bps=G)
    assert set(w.tags["model"]) == {"stream"}
    flows = {name: f for f, name in enumerate(w.names)}
    head = "all_reduce.tree0.ch0.sl0"

    def flow(kind):
        f = flows[f"{head}.{kind}"]
        return w.size_bytes[f], w.overhead_s[f], w.cap_Bps[f], names(w, w.dependencies(f))

    # A leaf's hop up is fed by nothing: the base and its latency, then its first slice; the
    # rest follows, paying the other three slices' latencies one after another.
    assert flow("up.r1.start") == (G / 2, pytest.approx(1.25), G, [])
    assert flow("up.r1") == (1.5 * G, pytest.approx(0.75), G, [f"{head}.up.r1.start"])
    # Rank 2 sends up once its children's first slices are in; the root sends down once its.
    assert flow("up.r2.start") == (G / 2, pytest.approx(0.25), G, [f"{head}.up.r1.start", f"{head}.up.r3.start"])
    assert flow("down.r2.start")[3] == [f"{head}.up.r2.start"]
    # Every hop once: 3 edges up and 3 down in each of the 2 trees, a first slice and the rest each.
    assert len(w) == 2 * 2 * 3 * 2


@pytest.mark.parametrize("size", [256 << 20, 1 << 30])
def test_streamed_simple_tree_agrees_with_the_step_dag_on_eight_dgx_a100(size):
    # NCCL's tree across A100 servers with Simple (its choice from a few hundred MiB on large
    # A100 clusters): streamed, within 1.1% of the step DAG; it was refused past 4 million
    # messages (about 500 servers).
    topology = build_cluster("dgx_a100", 8, figure="effective")
    times = {m: collective_time(topology, "all_reduce", size, algorithm="tree", protocol="simple", model=m).time_s
             for m in ("steps", "stream")}
    assert times["stream"] == pytest.approx(times["steps"], rel=0.02)


@pytest.mark.parametrize(
    ("build", "n_messages"),
    [
        (lambda: tree_all_reduce(RANKS, G, channels=2, slices=3), 2 * 3 * 2 * 2 * 3),
        (lambda: broadcast(RANKS, G, channels=2, slices=3), 2 * 3 * 3),
        (lambda: reduce(RANKS, G, channels=2, slices=3), 2 * 3 * 3),
    ],
    ids=["tree", "broadcast", "reduce"],
)
def test_auto_streams_trees_and_chains_above_the_message_limit(monkeypatch, build, n_messages):
    assert len(build()) == n_messages and set(build().tags["model"]) == {"steps"}
    monkeypatch.setattr(collective_dag, "STEP_MESSAGE_LIMIT", n_messages - 1)
    assert set(build().tags["model"]) == {"stream"}


def test_streamed_chain_takes_the_step_dags_time_by_hand():
    # A broadcast from g0 along g0 > g1 > g2 > g3 on the ring of 1 GB/s links: 4 GB in 4
    # slices of 1 GB, each paying 0.25 s of latency before it moves. The step DAG's pipeline
    # takes (4 slices + 3 hops - 1) x (0.25 + 1.0) after the 1 s base: 8.5 s. Streamed, the
    # first slice crosses each hop (1.25 s a hop) and the rest follows it, its three slices'
    # latencies first: the last hop's first slice starts at 1 + 2 x 1.25 + 0.25 = 3.75, is
    # through at 4.75, and the rest at 4.75 + 0.75 + 3 = 8.5 s.
    costs = CollectiveCosts(base_s=1.0, intra_step_s=0.25, inter_step_s=2.0, wire_efficiency=1.0, source="test")
    for model in ("steps", "stream"):
        w = broadcast(RANKS, 4 * G, slices=4, costs=costs, model=model, cap_Bps=2 * G)
        assert set(w.tags["model"]) == {model}
        assert run(ring_topology(), w).makespan_s == pytest.approx(8.5), model


def test_auto_streams_nvls_tree_above_the_message_limit(monkeypatch):
    ranks = [f"b{s}g{g}" for s in range(2) for g in range(2)]
    options = {"servers": {r: r[:2] for r in ranks}, "switches": {"b0": "sw0", "b1": "sw1"}, "slices": 2}
    assert set(nvls_tree_all_reduce(ranks, G, **options).tags["model"]) == {"steps"}
    monkeypatch.setattr(collective_dag, "STEP_MESSAGE_LIMIT", 10)
    assert set(nvls_tree_all_reduce(ranks, G, **options).tags["model"]) == {"stream"}


@pytest.mark.parametrize("size", [256 << 20, 4 << 30])
def test_streamed_nvls_tree_takes_nccls_model_time_on_eight_dgx_h100(size):
    # NCCL's own model of NVLSTree: its latency plus the size over its bus bandwidth.
    # Streamed, the flows take it within 5% (1-2% below it here; the step DAG takes 2-5%
    # more than the model); NVLSTree was refused past 4 million messages before it had a
    # stream, from about 350 DGX H100 on.
    topology = build_cluster("dgx_h100", 8, figure="effective")
    run = collective_time(topology, "all_reduce", size, algorithm="nvls_tree", model="stream")
    assert run.model == "stream"
    n = 64
    model_s = run.nccl.model_latency_us * 1e-6 + size * 2 * (n - 1) / n / (run.nccl.bus_bandwidth_GBps * 1e9)
    assert run.time_s == pytest.approx(model_s, rel=0.05)


@pytest.mark.parametrize("builder", ["nvls_tree", "nvls_sharp"])
@pytest.mark.parametrize("n_servers", [2, 3, 5])
def test_nvls_across_servers_slices_copied_on_equal_those_laid_out_one_by_one(monkeypatch, n_servers, builder):
    # From the fourth slice of a chunk on, slices are copies of the one before (moved on);
    # laying every slice out message by message (TILE_FROM_SLICE past the slices) is the twin.
    # IB SHARP's trees: the first two servers under leaf L0, the rest under L1, both under S.
    ranks = [f"b{s}g{g}" for s in range(n_servers) for g in range(3)]
    servers = {r: r.split("g")[0] for r in ranks}
    switches = {f"b{s}": f"sw{s}" for s in range(n_servers)}
    costs = CollectiveCosts(2e-6, 0.5e-6, 4e-6, 0.9, "test")
    tiled = []
    repeat_last = collective_dag._FlowDag.repeat_last
    monkeypatch.setattr(collective_dag._FlowDag, "repeat_last",
                        lambda dag, *a: tiled.append(repeat_last(dag, *a)) or tiled[-1])
    options = {"servers": servers, "switches": switches, "channels": 2, "slices": 9, "costs": costs}
    if builder == "nvls_tree":
        build, options["tree_cap_Bps"] = nvls_tree_all_reduce, 40e9
    else:
        paths = {f"b{s}": ("L0" if s < 2 else "L1", "S") for s in range(n_servers)}
        build, options["sharp"] = nvls_sharp_all_reduce, [paths] * 3
    copied = build(ranks, 3 * G, **options)
    assert tiled == [True] * 2 * 3  # every channel's every chunk
    monkeypatch.setattr(builders_module, "TILE_FROM_SLICE", 10**9)
    one_by_one = build(ranks, 3 * G, **options)
    for column in ("names", "src", "dst", "tags"):
        assert getattr(copied, column) == getattr(one_by_one, column), column
    for column in ("size_bytes", "overhead_s", "cap_Bps", "dep_indptr", "dep_indices"):
        np.testing.assert_array_equal(getattr(copied, column), getattr(one_by_one, column), err_msg=column)


def test_nvls_sharp_all_reduce_on_two_dgx_h100_by_hand():
    # One slice per chunk, no software costs. Chunk j (S/8) is owned by each server's GPU j:
    # every GPU sends its 8 chunks to its switch (S over its 370.8 GB/s NVLink), the switch
    # sends each owner its sum (S/8), the owner sends it through its rail's NIC to the rail's
    # leaf (S/8 at 48 GB/s), the leaf reduces the two servers' and sends the total back (S/8
    # at 48), the owner stores it in its switch (S/8) and the switch multicasts it to the
    # server's 8 GPUs (S over each one's NVLink). Route latencies are microseconds.
    topology = build_cluster("dgx_h100", 2, figure="effective")
    ranks = [topology.node_names[g] for g in topology.gpus()]
    servers = rank_servers(topology, ranks)
    size = 8e9
    w = nvls_sharp_all_reduce(
        ranks, size, servers=servers, switches={s: f"{s}.nvswitch" for s in set(servers.values())},
        sharp=[{s: (f"ib.su0.rail{j}",) for s in set(servers.values())} for j in range(8)],
        slices=1, costs=CollectiveCosts.zero(),
    )
    # Per chunk and server: 8 reduces, the result, up, down, the store and 8 multicasts.
    assert len(w) == 8 * 2 * (8 + 1 + 1 + 1 + 1 + 8)
    assert {w.dst[f] for f in range(len(w)) if w.names[f].endswith(".up.s1")} == {f"ib.su0.rail{j}" for j in range(8)}
    expected = size * (2.25 / 370.8e9 + 0.25 / 48e9)
    assert run(topology, w).makespan_s == pytest.approx(expected, rel=1e-4)


def _two_dgx_h100_on_one_leaf_a_rail():
    """Two DGX H100, their ranks, servers, and each local rank's reduction tree: its rail's leaf."""
    topology = build_cluster("dgx_h100", 2, figure="effective")
    ranks = [topology.node_names[g] for g in topology.gpus()]
    servers = rank_servers(topology, ranks)
    sharp = [{s: (f"ib.su0.rail{j}",) for s in set(servers.values())} for j in range(8)]
    return topology, ranks, servers, sharp


def test_collnet_direct_all_reduce_on_two_dgx_h100_by_hand():
    # One slice per chunk, no software costs. Chunk j (S/8) is headed by each server's GPU j:
    # every GPU copies its 7 other chunks to their heads (7S/8 over its 370.8 GB/s NVLink,
    # while receiving 7S/8 as a head), each head sends its server's sum through its rail's
    # NIC to the rail's leaf (S/8 at 48 GB/s), the leaf returns the two servers' total (S/8
    # at 48), and each head copies it to the 7 other GPUs (7S/8 each way again).
    topology, ranks, servers, sharp = _two_dgx_h100_on_one_leaf_a_rail()
    size = 8e9
    w = collnet_direct_all_reduce(ranks, size, servers=servers, sharp=sharp, slices=1, costs=CollectiveCosts.zero())
    # Per chunk and server: 7 copies in, up, down and 7 copies out.
    assert len(w) == 8 * 2 * (7 + 1 + 1 + 7)
    first = {name.removeprefix("all_reduce.ch0.chunk2.sl0."): f for f, name in enumerate(w.names)
             if ".chunk2." in name}
    assert (w.src[first["scatter.r0"]], w.dst[first["scatter.r0"]]) == ("n0.gpu0", "n0.gpu2")
    assert "scatter.r2" not in first and "bcast.r10" not in first  # the heads' own data stays
    assert set(w.dependencies(first["up.s1"])) == {first[f"scatter.r{i}"] for i in (8, 9, 11, 12, 13, 14, 15)}
    assert w.dependencies(first["bcast.r9"]) == [first["down.s1"]]
    expected = size * (1.75 / 370.8e9 + 0.25 / 48e9)
    assert run(topology, w).makespan_s == pytest.approx(expected, rel=1e-4)
    # Heads on some GPUs only (as where two GPUs share a NIC): 4 chunks of S/4.
    half = collnet_direct_all_reduce(ranks, size, servers=servers, sharp=sharp[:4], heads=[0, 2, 4, 6], slices=1)
    assert {w_name.split(".")[2] for w_name in half.names if ".scatter." in w_name} == {"chunk0", "chunk1", "chunk2",
                                                                                        "chunk3"}
    with pytest.raises(InputError, match=r"heads must be distinct local indices in \[0, 8\), got \[0, 0\]"):
        collnet_direct_all_reduce(ranks, size, servers=servers, sharp=sharp[:2], heads=[0, 0])
    with pytest.raises(InputError, match="the ranks are in one server"):
        collnet_direct_all_reduce(ranks[:8], size, servers=servers, sharp=sharp)


def test_collnet_chain_all_reduce_on_two_dgx_h100_by_hand():
    # One channel, one slice, no software costs: up each server's chain from GPU 7 to GPU 0
    # (7 hops of S, one after another, at 370.8 GB/s), GPU 0 through rail 0's NIC to its
    # leaf and back (S at 48 GB/s each way), then down the chain (7 hops of S).
    topology, ranks, servers, sharp = _two_dgx_h100_on_one_leaf_a_rail()
    size = 1e9
    w = collnet_chain_all_reduce(ranks, size, servers=servers, sharp=sharp, slices=1, costs=CollectiveCosts.zero())
    assert len(w) == 2 * (7 + 1 + 1 + 7)
    named = {name.removeprefix("all_reduce.ch0.chunk0.sl0."): f for f, name in enumerate(w.names)}
    assert (w.src[named["reduce.r7"]], w.dst[named["reduce.r7"]]) == ("n0.gpu7", "n0.gpu6")
    assert w.dependencies(named["reduce.r6"]) == [named["reduce.r7"]]
    assert w.dependencies(named["up.s0"]) == [named["reduce.r1"]] and w.dst[named["up.s0"]] == "ib.su0.rail0"
    assert w.dependencies(named["bcast.r9"]) == [named["down.s1"]]
    assert run(topology, w).makespan_s == pytest.approx(size * (14 / 370.8e9 + 2 / 48e9), rel=1e-4)
    # Channel 1 rotates each chain by one: GPU 1 heads it, on rail 1.
    two = collnet_chain_all_reduce(ranks, size, servers=servers, sharp=sharp, channels=2, slices=1)
    ups = {w_name: two.dst[f] for f, w_name in enumerate(two.names) if w_name.endswith(".up.s0")}
    assert ups == {"all_reduce.ch0.chunk0.sl0.up.s0": "ib.su0.rail0", "all_reduce.ch1.chunk0.sl0.up.s0": "ib.su0.rail1"}
    with pytest.raises(InputError, match="offsets must be 2 or more integers >= 0"):
        collnet_chain_all_reduce(ranks, size, servers=servers, sharp=sharp, channels=2, offsets=[0])


def test_collnet_direct_all_gather_on_two_dgx_h100_by_hand():
    # One slice per rail, no software costs. Rail j is the shares (S/16 each) of both
    # servers' GPU j, S/8: each GPU j sends its share through rail j's NIC to the rail's leaf
    # (S/16 at 48 GB/s), the leaf sends both shares down to each (S/8 at 48), and each GPU
    # copies its rail to the 7 others (7S/8 out of and into every GPU at 370.8 GB/s).
    topology, ranks, servers, sharp = _two_dgx_h100_on_one_leaf_a_rail()
    size = 8e9
    w = collnet_direct_all_gather(ranks, size, servers=servers, sharp=sharp, slices=1, costs=CollectiveCosts.zero())
    # Per rail and server: up, down and 7 copies.
    assert len(w) == 8 * 2 * (1 + 1 + 7)
    rail = {name.removeprefix("all_gather.ch0.rail2.sl0."): f for f, name in enumerate(w.names) if ".rail2." in name}
    assert (w.src[rail["up.s1"]], w.dst[rail["up.s1"]], w.size_bytes[rail["up.s1"]]) == ("n1.gpu2", "ib.su0.rail2",
                                                                                          size / 16)
    assert set(w.dependencies(rail["down.s0"])) == {rail["up.s0"], rail["up.s1"]}
    assert w.size_bytes[rail["down.s0"]] == size / 8 and w.dependencies(rail["bcast.r9"]) == [rail["down.s1"]]
    expected = size * (0.0625 / 48e9 + 0.125 / 48e9 + 0.875 / 370.8e9)
    assert run(topology, w).makespan_s == pytest.approx(expected, rel=1e-4)
    # Two slices: a rail's first holds server 0's share, its second server 1's; only that
    # server sends into the network.
    two = collnet_direct_all_gather(ranks, size, servers=servers, sharp=sharp, slices=2)
    assert _messages(two, "all_gather.ch0.rail0.", ".up.s") == ["sl0.up.s0", "sl1.up.s1"]
    with pytest.raises(InputError, match=r"every rank is a head \(a NIC each\): heads must be each of 0..7 once"):
        collnet_direct_all_gather(ranks, size, servers=servers, sharp=sharp[:4], heads=[0, 2, 4, 6])


def test_collnet_direct_reduce_scatter_on_two_dgx_h100_by_hand():
    # One slice per rail, no software costs. Each GPU copies the 7 other rails' S/8 to their
    # heads (7S/8 each way at 370.8 GB/s), each head sends its server's sum of its rail into
    # the network (S/8 at 48 GB/s), and the leaf sends each server its share (S/16 at 48).
    topology, ranks, servers, sharp = _two_dgx_h100_on_one_leaf_a_rail()
    size = 8e9
    w = collnet_direct_reduce_scatter(ranks, size, servers=servers, sharp=sharp, slices=1,
                                      costs=CollectiveCosts.zero())
    assert len(w) == 8 * 2 * (7 + 1 + 1)
    rail = {name.removeprefix("reduce_scatter.ch0.rail5.sl0."): f for f, name in enumerate(w.names)
            if ".rail5." in name}
    assert (w.src[rail["scatter.r8"]], w.dst[rail["scatter.r8"]]) == ("n1.gpu0", "n1.gpu5")
    assert set(w.dependencies(rail["up.s1"])) == {rail[f"scatter.r{i}"] for i in (8, 9, 10, 11, 12, 14, 15)}
    assert (w.size_bytes[rail["up.s0"]], w.size_bytes[rail["down.s0"]]) == (size / 8, size / 16)
    expected = size * (0.875 / 370.8e9 + 0.125 / 48e9 + 0.0625 / 48e9)
    assert run(topology, w).makespan_s == pytest.approx(expected, rel=1e-4)
    # Two slices: each server gets its share from the slice that holds it.
    two = collnet_direct_reduce_scatter(ranks, size, servers=servers, sharp=sharp, slices=2)
    assert _messages(two, "reduce_scatter.ch0.rail0.", ".down.s") == ["sl0.down.s0", "sl1.down.s1"]


def _messages(w: Workload, prefix: str, part: str) -> list[str]:
    """The names under ``prefix`` that hold ``part``, less the prefix, sorted."""
    return sorted(name.removeprefix(prefix) for name in w.names if name.startswith(prefix) and part in name)


@pytest.mark.parametrize(("n_servers", "per_server", "slices", "channels"), [(2, 1, 1, 1), (3, 2, 5, 2), (4, 4, 3, 1),
                                                                          (5, 3, 7, 3)])
def test_rails_through_the_network_move_each_ranks_bytes(n_servers, per_server, slices, channels):
    # What every rank sends and receives, whatever the slicing, with c = S / n a rank's share
    # and R = N c a rail (N servers of m ranks): CollNet Direct's all-gather sends its share
    # into the network and its rail to the m - 1 others, and takes in its rail and theirs;
    # its reduce-scatter sends its m - 1 other rails to their heads and its server's sum of
    # its own into the network, and takes in their copies and its share. With NVLS the switch
    # stands between: the all-gather sends its share and stores its rail, and takes in every
    # rail; the reduce-scatter sends its copy of every rail and its rail's sum, and takes in
    # the sum and its share. Servers under two leaves and a spine.
    ranks = [f"s{g}r{j}" for g in range(n_servers) for j in range(per_server)]
    servers = {r: r.split("r")[0] for r in ranks}
    paths = {f"s{g}": ("L0" if g < n_servers // 2 else "L1", "S") for g in range(n_servers)}
    size = 1000.0 * len(ranks)
    share, rail = size / len(ranks), size / per_server
    m = per_server
    expected = {  # (into a rank, out of it)
        collnet_direct_all_gather: (m * rail, share + (m - 1) * rail),
        collnet_direct_reduce_scatter: ((m - 1) * rail + share, (m - 1) * rail + rail),
        nvls_sharp_all_gather: (rail + m * rail, share + rail),
        nvls_sharp_reduce_scatter: (rail + share, m * rail + rail),
    }
    for build, (into, out) in expected.items():
        options = {"servers": servers, "sharp": [paths] * m, "slices": slices, "channels": channels,
                   "costs": CollectiveCosts.zero()}  # payload bytes, each message on the wire as is
        if build in (nvls_sharp_all_gather, nvls_sharp_reduce_scatter):
            options["switches"] = {f"s{g}": f"sw{g}" for g in range(n_servers)}
        w = build(ranks, size, model="steps", **options)
        sizes = np.asarray(w.size_bytes)
        for rank in ranks:
            got = (sizes[[d == rank for d in w.dst]].sum(), sizes[[s == rank for s in w.src]].sum())
            assert got == pytest.approx((into, out)), (build.__name__, rank)


def test_nvls_sharp_all_gather_and_reduce_scatter_on_two_dgx_h100_by_hand():
    # All-gather: GPU j sends its share into the network (S/16 at 48 GB/s), gets rail j back
    # (S/8), stores it in its switch (S/8 at 370.8 GB/s), which multicasts the 8 rails to
    # every GPU (S over each NVLink). Reduce-scatter: every GPU sends its copy of the 8 rails
    # to its switch (S), which sends GPU j the sum of rail j (S/8), GPU j sends it into the
    # network (S/8 at 48) and gets its own share back (S/16).
    topology, ranks, servers, sharp = _two_dgx_h100_on_one_leaf_a_rail()
    switches = {s: f"{s}.nvswitch" for s in set(servers.values())}
    size = 8e9
    options = {"servers": servers, "switches": switches, "sharp": sharp, "slices": 1, "costs": CollectiveCosts.zero()}
    gather = nvls_sharp_all_gather(ranks, size, **options)
    assert len(gather) == 8 * 2 * (1 + 1 + 1 + 8)
    assert run(topology, gather).makespan_s == pytest.approx(size * (0.1875 / 48e9 + 1.125 / 370.8e9), rel=1e-4)
    scatter = nvls_sharp_reduce_scatter(ranks, size, **options)
    assert len(scatter) == 8 * 2 * (8 + 1 + 1 + 1)
    rail = {name.removeprefix("reduce_scatter.ch0.rail3.sl0."): f for f, name in enumerate(scatter.names)
            if ".rail3." in name}
    assert scatter.dependencies(rail["up.s0"]) == [rail["result.s0"]] and scatter.dst[rail["up.s0"]] == "ib.su0.rail3"
    assert run(topology, scatter).makespan_s == pytest.approx(size * (1.125 / 370.8e9 + 0.1875 / 48e9), rel=1e-4)
    with pytest.raises(InputError, match="the ranks are in one server"):
        nvls_sharp_all_gather(ranks[:8], size, **options)


@pytest.mark.parametrize(("system", "nodes", "env", "algorithm", "within"), [
    ("dgx_a100", 4, {}, "collnet_direct", 0.02),
    ("dgx_h100", 4, {"NCCL_NVLS_ENABLE": "0"}, "collnet_chain", 0.02),
    ("dgx_h100", 4, {}, "nvls_sharp", 0.05),
])
def test_reductions_in_the_network_stream_past_the_message_limit(monkeypatch, system, nodes, env, algorithm, within):
    # Past the step DAG's message limit auto streams a reduction in the network: each message
    # one flow with its chunk's slices, after a first slice the messages after it wait for.
    # At 1 GiB the stream stays within 2% of the step DAG (CollNet, NVLink-bound) and 5% (NVLS,
    # whose pipeline through the network's tree it shortens: 4,419 us against 4,608).
    topology = build_cluster(system, nodes, figure="effective")
    collnet = {"NCCL_COLLNET_ENABLE": "1", **env}
    steps = collective_time(topology, "all_reduce", 1 << 30, nccl_env=collnet)
    monkeypatch.setattr(collective_dag, "STEP_MESSAGE_LIMIT", 1000)
    stream = collective_time(topology, "all_reduce", 1 << 30, nccl_env=collnet)
    assert (steps.algorithm, steps.model, stream.algorithm, stream.model) == (algorithm, "steps", algorithm, "stream")
    assert stream.flows < steps.flows
    assert stream.time_s == pytest.approx(steps.time_s, rel=within)


def test_nvls_sharp_trees_of_two_tiers_reduce_at_each_leaf_first():
    # Servers b0, b1 under leaf L0 and b2 under L1, both under spine S: each leaf sends the
    # sum of its servers' up once, the spine returns the total down each leaf, each leaf to
    # its servers' owners.
    ranks = [f"b{s}g{g}" for s in range(3) for g in range(2)]
    servers = {r: r.split("g")[0] for r in ranks}
    paths = {"b0": ("L0", "S"), "b1": ("L0", "S"), "b2": ("L1", "S")}
    w = nvls_sharp_all_reduce(ranks, 6 * G, servers=servers, switches={f"b{s}": f"sw{s}" for s in range(3)},
                              sharp=[paths, paths], slices=1)
    by_name = {name.removeprefix("all_reduce.ch0.chunk0.sl0."): f for f, name in enumerate(w.names)
               if ".chunk0." in name and not name.endswith(".due")}
    assert (w.src[by_name["up.L0"]], w.dst[by_name["up.L0"]]) == ("L0", "S")
    assert set(w.dependencies(by_name["up.L0"])) >= {by_name["up.s0"], by_name["up.s1"]}
    assert by_name["up.s2"] in w.dependencies(by_name["up.L1"])
    assert set(w.dependencies(by_name["down.L1"])) >= {by_name["up.L0"], by_name["up.L1"]}
    assert by_name["down.L1"] in w.dependencies(by_name["down.s2"])
    with pytest.raises(InputError, match=r"sharp\[1\]: server 'b2' climbs to 'T', not the root 'S'"):
        nvls_sharp_all_reduce(ranks, G, servers=servers, switches={f"b{s}": f"sw{s}" for s in range(3)},
                              sharp=[paths, {**paths, "b2": ("L1", "T")}])
    with pytest.raises(InputError, match=r"sharp\[0\] gives server 'b1' no path"):
        nvls_sharp_all_reduce(ranks, G, servers=servers, switches={f"b{s}": f"sw{s}" for s in range(3)},
                              sharp=[{"b0": ("L0",), "b2": ("L0",)}, paths])


def test_ll_ring_steps_pay_their_latency_in_the_shadow_of_the_hop_before():
    # LL and LL128 post line by line, so a ring message's step latency runs from when its data
    # is ready (a zero-byte ".due" at the sender), not after the hop's previous message:
    # 4 GB, 6 steps x 2 slices of 0.5 GB at 1 GB/s per hop, 0.25 s per step; the hop is busy
    # 6 s and the last slice's latency chain ends earlier, so 0.25 (first message) + 6 s.
    streaming = CollectiveCosts(0.0, 0.25, 0.25, 1.0, "test", streams=True)
    w = all_reduce(RANKS, 4 * G, slices=2, costs=streaming)
    due = [f for f in range(len(w)) if w.names[f].endswith(".due")]
    assert len(due) == len(w) - len(due) - 4  # every message but each hop's first
    assert all((w.src[f], w.dst[f]) == (w.src[f], w.src[f]) for f in due)
    assert run(ring_topology(), w).makespan_s == pytest.approx(0.25 + 6.0)
    # Simple: each slice pays it after the one before on the hop: 12 x (0.25 + 0.5).
    simple = CollectiveCosts(0.0, 0.25, 0.25, 1.0, "test")
    assert run(ring_topology(), all_reduce(RANKS, 4 * G, slices=2, costs=simple)).makespan_s == pytest.approx(9.0)


@pytest.mark.parametrize("rails", [None, {"a0": 0, "a1": 1, "a2": 2, "b0": 0, "b1": 1}], ids=["own_nic", "rails"])
@pytest.mark.parametrize("streams", [False, True])
@pytest.mark.parametrize(
    ("n_steps", "slices", "ready"), [(1, 2, {"a2": [1]}), (7, 1, {}), (14, 3, {}), (3, 2, {"a1": [0], "b0": [0, 1]})]
)
def test_the_ring_laid_out_at_once_equals_its_twin_message_by_message(streams, n_steps, slices, ready, rails):
    from reference import ring_steps_reference

    costs = CollectiveCosts(base_s=7e-6, intra_step_s=0.6e-6, inter_step_s=5e-6, wire_efficiency=0.9375,
                            source="test", streams=streams)
    servers = {"a0": 0, "a1": 0, "a2": 0, "b0": 1, "b1": 1}
    orders = [("a0", "a1", "a2", "b0", "b1"), ("a2", "a0", "a1", "b1", "b0")]
    dags = []
    for build in (collective_dag._ring, ring_steps_reference):
        dag = collective_dag._FlowDag("all_reduce", costs, servers, rails=rails)
        for i in range(2):  # messages already there (the ``ready`` ones) keep their numbers
            dag.add(f"before{i}", "a0", "a1", 1.0, [], 0, 0)
        done = build(dag, orders, 3e6, n_steps, slices, ready, "rs.")
        dags.append((dag, done))
    (fast, fast_done), (slow, slow_done) = dags
    assert fast_done == slow_done
    fast, slow = fast.workload("all_reduce"), slow.workload("all_reduce")
    for column in ("names", "src", "dst", "tags"):
        assert getattr(fast, column) == getattr(slow, column), column
    for column in ("size_bytes", "overhead_s", "cap_Bps", "dep_indptr", "dep_indices"):
        np.testing.assert_array_equal(getattr(fast, column), getattr(slow, column), err_msg=column)
    assert len(fast) > len(orders) * n_steps * 5 * slices  # .due messages across servers
    # Channel 0: a2 -> b0 leaves through a0 and b1 -> a0 through b0 when rails are given;
    # channel 1: a1 -> b1 is on rail 1, b0 -> a2 direct (server b has no rail 2).
    crossing = {(fast.src[i], fast.dst[i]) for i in range(len(fast)) if fast.src[i][0] != fast.dst[i][0]}
    if rails:
        assert crossing == {("a0", "b0"), ("b0", "a0"), ("a1", "b1"), ("b0", "a2")}
    else:
        assert crossing == {("a2", "b0"), ("b1", "a0"), ("a1", "b1"), ("b0", "a2")}


@pytest.mark.parametrize("streams", [False, True])
def test_chains_across_servers_leave_through_the_receivers_rail(streams):
    # Servers a and b, two rails. Broadcast from a0 along a0 a1 b0 b1: the hop a1 -> b0 goes to
    # rail 0, so a0 sends it; reduce runs the chain backwards and b0 -> a1 goes to rail 1, so
    # b1 sends it. Hops inside a server, and every dependency, stay as without rails.
    costs = CollectiveCosts(base_s=0.0, intra_step_s=1e-6, inter_step_s=5e-6, wire_efficiency=1.0, source="test",
                            streams=streams)
    servers = {"a0": 0, "a1": 0, "b0": 1, "b1": 1}
    rails = {"a0": 0, "a1": 1, "b0": 0, "b1": 1}
    ranks = ("a0", "a1", "b0", "b1")
    for build, sent in ((broadcast, {("a0", "a1"), ("a0", "b0"), ("b0", "b1")}),
                        (reduce, {("b1", "b0"), ("b1", "a1"), ("a1", "a0")})):
        plain = build(ranks, 4e6, slices=2, servers=servers, costs=costs)
        railed = build(ranks, 4e6, slices=2, servers=servers, rails=rails, costs=costs)
        moving = {(railed.src[f], railed.dst[f]) for f in range(len(railed)) if railed.size_bytes[f] > 0}
        assert moving == sent
        assert railed.names == plain.names and railed.dst == plain.dst
        np.testing.assert_array_equal(railed.dep_indices, plain.dep_indices)
        np.testing.assert_array_equal(railed.overhead_s, plain.overhead_s)
