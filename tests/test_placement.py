"""One placement of collectives for every caller: scenario files, ``flowsim collective``
(:func:`flowsim.collectives.collective_time`), training steps and ``flowsim check`` all lay a
collective out through :func:`flowsim.collectives.collective_workload`."""

from __future__ import annotations

import numpy as np
import pytest

from flowsim.collectives import ALGORITHM_TABLE, P2P_NVLINK_EFFICIENCY, collective_time, collective_workload
from flowsim.collectives.constants import constants_of
from flowsim.collectives.report import sweep
from flowsim.collectives.tuner import tree_correction
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.presets import preset
from flowsim.scenario import parse_scenario, run_scenario
from flowsim.topology import NodeKind
from flowsim.training import data_parallel_step
from flowsim.workload import Workload

TWO_DGX = '[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "effective"\n'


def assert_same_workload(a: Workload, b: Workload) -> None:
    assert a.names == b.names
    assert a.src == b.src and a.dst == b.dst
    for column in ("size_bytes", "start_s", "dep_indptr", "dep_indices", "delay_s", "overhead_s", "weight", "cap_Bps"):
        np.testing.assert_array_equal(getattr(a, column), getattr(b, column), err_msg=column)
    assert dict(a.tags) == dict(b.tags)


@pytest.fixture(scope="module")
def two_dgx():
    return build_cluster("dgx_h100", 2, figure="effective")


def _scenario_workload(table: str) -> Workload:
    return parse_scenario(TWO_DGX + "[[workload.collective]]\n" + table).workload


@pytest.mark.parametrize(("collective", "algorithm"), sorted(ALGORITHM_TABLE))
def test_a_scenario_collective_is_the_collective_the_cli_runs(two_dgx, collective, algorithm):
    # NVLS runs inside one server; everything else over both servers' 16 GPUs.
    ranks = [f"n0.gpu{i}" for i in range(8)] if algorithm == "nvls" else None
    size = 3 * 2**20
    table = f'op = "{collective}"\nalgorithm = "{algorithm}"\nsize_bytes = {size}\n'
    if ranks is not None:
        table += "ranks = [" + ", ".join(f'"{r}"' for r in ranks) + "]\n"
    from_file = _scenario_workload(table)
    from_cli = collective_time(two_dgx, collective, size, ranks=ranks, algorithm=algorithm).run.workload
    assert_same_workload(from_file, from_cli)


def test_scenario_ring_all_reduce_takes_what_flowsim_collective_says(two_dgx):
    # The case at a smaller size: before one placement, the scenario file ran one
    # channel with NVLink costs and took 7.8x the time `flowsim collective` printed.
    size = 16 * 2**20
    table = f'[[workload.collective]]\nop = "all_reduce"\nalgorithm = "ring"\nsize_bytes = {size}\n'
    scenario = parse_scenario(TWO_DGX + table)
    (row,) = sweep(two_dgx, "all_reduce", [size], algorithm="ring")
    assert run_scenario(scenario).result.makespan_s * 1e6 == pytest.approx(row.time_us, rel=1e-12)
    # NCCL's 16 channels, laid out as one lane per rail (8 NICs per DGX H100 server).
    assert row.channels == 16 and len(set(scenario.workload.tags["channel"])) == 8
    # The default, NCCL's choice, is the same from both too.
    default = parse_scenario(TWO_DGX + table.replace('algorithm = "ring"\n', ""))
    (auto,) = sweep(two_dgx, "all_reduce", [size])
    assert run_scenario(default).result.makespan_s * 1e6 == pytest.approx(auto.time_us, rel=1e-12)


@pytest.mark.parametrize("protocol", ["ll", "ll128", "simple"])
def test_scenario_collectives_take_a_protocol(two_dgx, protocol):
    table = f'op = "all_gather"\nsize_bytes = 65536\nprotocol = "{protocol}"\n'
    plan = collective_workload(two_dgx, "all_gather", 65536, protocol=protocol)
    assert_same_workload(_scenario_workload(table), plan.workload)


def test_send_defaults_to_the_same_pair_everywhere(two_dgx):
    plan = collective_workload(two_dgx, "send", 2**20)
    assert plan.ranks == ("n0.gpu7", "n1.gpu0")
    assert_same_workload(_scenario_workload('op = "send"\nsize_bytes = 1048576\n'), plan.workload)


def test_training_buckets_are_placed_as_collective_workload_places_them(two_dgx):
    step = data_parallel_step(two_dgx, layer_backward_s=[1e-3], layer_grad_bytes=[4e6], bucket_bytes=4e6)
    bucket = collective_workload(two_dgx, "all_reduce", 4e6)
    flows = [i for i, name in enumerate(step.workload.names) if name.startswith("bucket0.")]
    assert [step.workload.names[i] for i in flows] == [f"bucket0.{name}" for name in bucket.workload.names]
    np.testing.assert_array_equal(step.workload.size_bytes[flows], bucket.workload.size_bytes)
    assert [step.workload.src[i] for i in flows] == list(bucket.workload.src)
    assert [step.workload.dst[i] for i in flows] == list(bucket.workload.dst)
    np.testing.assert_array_equal(step.workload.overhead_s[flows], bucket.workload.overhead_s)


def test_explicit_orders_set_the_channels(two_dgx):
    ranks = ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]
    orders = [ranks, ranks[::-1]]
    plan = collective_workload(two_dgx, "all_reduce", 2**20, ranks=ranks, orders=orders, slices=1)
    assert set(plan.workload.tags["channel"]) == {"0", "1"}
    # Channel 1 runs the reversed ring: its first message goes from n1.gpu1 to n1.gpu0.
    first = plan.workload.tags["channel"].index("1")
    assert (plan.workload.src[first], plan.workload.dst[first]) == ("n1.gpu1", "n1.gpu0")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"collective": "all_to_all", "slices": 2}, r"bad parameters for all_to_all: p2p takes no slices"),
        ({"collective": "all_reduce", "algorithm": "ring", "root": 1}, "bad parameters for all_reduce: ring takes no root"),
        ({"collective": "all_reduce", "algorithm": "nvls"}, r"NVLS runs across servers only with CollNet \(NCCL_COLLNET_ENABLE=1"),
        ({"collective": "all_reduce", "ranks": ["n0.gpu0", "nope"]}, "unknown node 'nope'"),
        ({"collective": "all_reduce", "algorithm": "nvls", "ranks": ["n0.gpu0", "n0.gpu1"], "switch": "n0.gpu2"},
         "'n0.gpu2' is a gpu node, not an NVSwitch"),
        # Before NCCL's tuner sees them (a NaN size raised ValueError there, an infinite one OverflowError).
        ({"collective": "all_reduce", "size_bytes": float("nan")}, r"all_reduce: size_bytes is nan; it must be finite"),
        ({"collective": "all_gather", "size_bytes": float("inf")}, r"all_gather: size_bytes is inf; it must be finite"),
        ({"collective": "all_reduce", "size_bytes": -1.0}, r"all_reduce: size_bytes is -1.0; it must be finite"),
    ],
)
def test_bad_placement_names_what_is_wrong(two_dgx, options, message):
    collective = options.pop("collective")
    size = options.pop("size_bytes", 2**20)
    with pytest.raises(InputError, match=message):
        collective_workload(two_dgx, collective, size, **options)


def test_algorithms_and_protocols_as_nccl_spells_them(two_dgx):
    # NCCL_ALGO=Ring / NVLSTree and NCCL_PROTO=LL128 / Simple name what flowsim's names do.
    for (algorithm, protocol), (ours, proto) in {("Ring", "LL128"): ("ring", "ll128"),
                                                 ("NVLSTree", "Simple"): ("nvls_tree", "simple")}.items():
        plan = collective_workload(two_dgx, "all_reduce", 2**20, algorithm=algorithm, protocol=protocol)
        same = collective_workload(two_dgx, "all_reduce", 2**20, algorithm=ours, protocol=proto)
        assert (plan.algorithm, plan.protocol) == (same.algorithm, same.protocol) == (ours, proto)
        assert len(plan.workload) == len(same.workload)


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
def test_nvls_halves_move_each_chunk_once_through_the_switch(collective):
    # One DGX H100: every GPU's link to the switch carries S (all chunks: the multicast of
    # an all-gather, the reads of a reduce-scatter) at 370.8 GB/s x nvlsEfficiency 0.85, after
    # NVLS's 25 us; the pipeline of 64 slices adds about 1/64 of a chunk's transfer.
    h100 = build_cluster("dgx_h100", 1, figure="effective")
    size = 1 << 30
    out = collective_time(h100, collective, size, algorithm="nvls")
    assert (out.algorithm, out.protocol) == ("nvls", "simple")
    assert out.time_s == pytest.approx(25e-6 + size / (370.8e9 * 0.85), rel=0.03)
    # Each slice of each chunk: n messages into the switch and one out (reduce-scatter), or
    # one in and n out (all-gather).
    per_slice = 8 + 1
    assert len(out.run.workload) % per_slice == 0


def test_nccl_keeps_rings_for_all_gather_on_one_h100_node():
    # NVLS all-gather's bus bandwidth in NCCL's model is 8 x 40 x 0.85 x 7/8 x 7/8 = 208 GB/s,
    # the ring's 12 x 30 = 360: NCCL's tuner keeps the ring at 1 GiB.
    h100 = build_cluster("dgx_h100", 1, figure="effective")
    assert collective_workload(h100, "all_gather", 1 << 30).algorithm == "ring"


def test_scenario_nccl_env_steers_the_choice_and_bad_keys_are_named(two_dgx):
    from flowsim.errors import InputError

    table = 'op = "all_reduce"\nsize_bytes = 1073741824\n'
    assert set(_scenario_workload(table).tags["collective"]) == {"all_reduce"}
    ring = _scenario_workload(table + 'nccl_env = {NCCL_ALGO = "Ring"}\n')
    assert_same_workload(ring, collective_workload(two_dgx, "all_reduce", 1 << 30, algorithm="ring").workload)
    with pytest.raises(InputError, match=r"workload\.collective\[0\]\.nccl_env\.ALGO: is not an NCCL_ variable"):
        _scenario_workload(table + 'nccl_env = {ALGO = "Ring"}\n')
    with pytest.raises(InputError, match=r"workload\.collective\[0\]\.nccl_env: expected a table"):
        _scenario_workload(table + 'nccl_env = "NCCL_ALGO=Ring"\n')


def test_tree_lanes_move_at_nccls_tree_algorithm_bandwidth(two_dgx):
    # NCCL's tree algorithm bandwidth is half its bus bandwidth (tuning.cc, ratio .5), times
    # its treeCorrectionFactor for the size: LL128 at 1 MiB, entry log2(2^20 / 64) = 14 of the
    # LL128 row, 0.6. Each of flowsim's 8 lanes (one per rail) stands for 16 / 8 channels and
    # runs both trees, so a tree message moves at a quarter of its channels' share of the bus
    # bandwidth, over the protocol's wire efficiency (LL128: 120/128). At 8 GiB (entry 27, past
    # the table) no factor applies.
    lanes = 8
    for size, factor in ((1 << 20, 0.6), (8 << 30, 1.0)):
        plan = collective_workload(two_dgx, "all_reduce", size, algorithm="tree", protocol="ll128")
        choice = plan.nccl
        expected = choice.n_channels / lanes * choice.channel_bandwidth_Bps() / 4 * factor / (120 / 128)
        data = plan.workload.size_bytes > 0
        np.testing.assert_allclose(plan.workload.cap_Bps[data], expected)


def test_model_caps_off_leaves_rings_and_trees_to_their_links(two_dgx):
    # The tree's lanes lose their share of NCCL's model (the cap just above) and keep only what
    # the hardware sets: none of the tree's messages is capped then, and the call is faster. A
    # Simple ring on all its channels is not held to NCCL's model anyway: the same flows.
    capped = collective_workload(two_dgx, "all_reduce", 1 << 30, algorithm="tree", protocol="ll128")
    free = collective_workload(two_dgx, "all_reduce", 1 << 30, algorithm="tree", protocol="ll128", model_caps=False)
    assert np.isfinite(capped.workload.cap_Bps[capped.workload.size_bytes > 0]).all()
    assert np.isinf(free.workload.cap_Bps).all()
    times = [collective_time(two_dgx, "all_reduce", 1 << 30, algorithm="tree", protocol="simple",
                             model_caps=caps).time_s for caps in (True, False)]
    assert times[1] < times[0]
    ring = [collective_workload(two_dgx, "all_reduce", 1 << 30, algorithm="ring", protocol="simple",
                                model_caps=caps).workload for caps in (True, False)]
    assert_same_workload(*ring)


def test_a_simple_tree_takes_nccls_model_time_where_its_chunks_fill_the_pipeline(two_dgx):
    # A Simple tree forwards whole slices: through 2 servers of 8 GPUs a slice crosses 7 chain
    # hops and 1 between servers up, then 1 and 7 down (d = 16), so at the cap (the model's
    # bandwidth with treeCorrectionFactor) k slices would take (k + 15) slice times where the
    # model counts k. The cap is raised by (k + 15) / k: 16 for the one slice of 1 MiB, 79/64
    # for the 64 slices of 1 GiB. The hops between servers and the root's keep that cap.
    from flowsim.collectives.dag import tree_hops

    assert tree_hops(2, 8) == 16
    assert tree_hops(8, 1) == 6  # NCCL's binary tree over 8 ranks (ncclGetBtree): 0 -> 4 -> 2 -> 1
    lanes = 8
    for size in (1 << 20, 4 << 20, 1 << 30):
        plan = collective_workload(two_dgx, "all_reduce", size, algorithm="tree", protocol="simple")
        choice, w = plan.nccl, plan.workload
        slices = len({name.split(".sl")[1].split(".")[0] for name in w.names if ".sl" in name})
        share = choice.n_channels / lanes * choice.channel_bandwidth_Bps() / 4
        expected = share * tree_correction(constants_of(choice.version), "simple", size) * (slices + 15) / slices
        kept = (w.size_bytes > 0) & np.array([".up." in n or ".down." in n or (".chaindown." in n and s == head)
                                              for n, s, head in zip(w.names, w.src, _root_heads(w), strict=True)])
        np.testing.assert_allclose(w.cap_Bps[kept], expected / plan.costs.wire_efficiency)
    # From 1 GiB NCCL's chunks fill the pipeline (2,048 a channel): the time is the model's.
    time_us = collective_time(two_dgx, "all_reduce", 1 << 30, algorithm="tree", protocol="simple").time_s * 1e6
    assert time_us == pytest.approx(plan.nccl.model_time_us, rel=0.06)


def _root_heads(w: Workload) -> list[str]:
    """For each message of a tree all-reduce on two DGX H100, the rank that heads its tree's
    root server on its lane: the sender of the tree's ``.down.`` message on that lane."""
    heads = {n.split(".sl")[0]: s for n, s in zip(w.names, w.src, strict=True) if ".down." in n}
    return [heads.get(n.split(".sl")[0], "") for n in w.names]


def test_a_simple_tree_in_one_chunk_crosses_each_chain_at_half_a_block(two_dgx):
    # Below a chunk a channel (256 KiB at 4 MiB on 16 channels, NCCL's chunk 512 KiB) its
    # data crosses the tree hop after hop, and every rank but the root splits its thread
    # block between up and down (runTreeSplit): each hop inside a server other than the
    # root's moves at most half a block, P2P_NVLINK_BYTES_PER_CYCLE at H100's 1.98 GHz, 21.4
    # GB/s a channel, two channels a lane, one on each tree. The slice's longest path crosses
    # the child server's chain up (7 hops) and down (7 hops) so held: 14 x 256 KiB / 21.4
    # GB/s = 171.5 us, beyond NCCL's model (129 us).
    from flowsim.collectives.tuner import half_block_nvlink_GBps

    size = 4 << 20
    plan = collective_workload(two_dgx, "all_reduce", size, algorithm="tree", protocol="simple")
    w = plan.workload
    held = half_block_nvlink_GBps(90) * 1e9
    assert held == pytest.approx(21.4e9, rel=1e-3)
    chain = (w.size_bytes > 0) & np.array([".chain" in n for n in w.names])
    root_hop = np.array([".chaindown." in n and s == head for n, s, head in zip(w.names, w.src, _root_heads(w),
                                                                                 strict=True)])
    np.testing.assert_allclose(w.cap_Bps[chain & ~root_hop], held)
    assert (w.cap_Bps[chain & root_hop] > held).all()
    bound_us = 14 * (size / 2 / 8) / held * 1e6
    assert bound_us == pytest.approx(171.5, abs=0.1)
    time_us = collective_time(two_dgx, "all_reduce", size, algorithm="tree", protocol="simple").time_s * 1e6
    assert bound_us < time_us < 2 * bound_us
    assert plan.nccl.model_time_us < bound_us


def test_nvls_tree_on_two_servers_takes_more_slices_by_the_message_budget():
    # NCCL moves 8 GiB on 2 DGX H100 in 512 chunks of 128 KiB a head (16 channels, 8 heads);
    # the DAG cuts a head's share into NVLS_MESSAGE_BUDGET // (2 x 8 x 18 + 4 x 8 x 1) = 125
    # slices, 320 messages each, where it took 64; from 4 servers on the budget gives fewer
    # than 64, and 64 stay.
    import re

    from flowsim.collectives.placement import NVLS_MESSAGE_BUDGET

    def slices(topology):
        names = collective_workload(topology, "all_reduce", 8 << 30, algorithm="nvls_tree").workload.names
        return len({re.search(r"\.sl(\d+)\.", name).group(1) for name in names})

    assert NVLS_MESSAGE_BUDGET // 320 == 125
    assert slices(build_cluster("dgx_h100", 2, figure="effective")) == 125
    assert slices(build_cluster("dgx_h100", 4, figure="effective")) == 64


def test_nvls_messages_of_a_server_share_its_budget_each_way():
    # An NVLS all-reduce's busbw stays at its generation's measured ceiling C (docs/hardware.md
    # 1.3). A server's m chunks each take m reduce messages and one store into its switch, and
    # one result and m multicasts out of it: (m + 1) S each way, which at busbw C over n ranks
    # is (m + 1) C n / (2(n - 1)) of payload, over nvlsEfficiency on the wire.
    rack = preset("gb200_nvl72", figure="effective")
    plan = collective_workload(rack, "all_reduce", 1 << 30)
    assert plan.algorithm == "nvls"
    w = plan.workload
    data = w.size_bytes > 0
    budget = 73 * 850e9 * 72 / 142 / 0.74
    tags = np.array(w.tags["shared_cap"])
    into = np.array([d == "nvswitch" for d in w.dst]) & data
    out_of = np.array([s == "nvswitch" for s in w.src]) & data
    assert into.sum() == out_of.sum() and (into | out_of)[data].all()
    assert set(tags[into]) == {f"nvls nvswitch in={budget!r}"} and set(tags[out_of]) == {f"nvls nvswitch out={budget!r}"}
    assert set(tags[~data]) <= {""} and np.isinf(w.cap_Bps).all()  # no message is capped on its own
    # NVLSTree on 2 DGX H100 (n = 16, m = 8): each server's switch its own two budgets of
    # 9 x 480 x 16 / 30 GB/s over 0.85; the tree's messages between servers none.
    two = build_cluster("dgx_h100", 2, figure="effective")
    plan = collective_workload(two, "all_reduce", 1 << 30)
    assert plan.algorithm == "nvls_tree"
    w = plan.workload
    budget = 9 * 480e9 * 16 / 30 / 0.85
    assert set(w.tags["shared_cap"]) == {""} | {f"nvls n{k}.nvswitch {way}={budget!r}" for k in (0, 1)
                                               for way in ("in", "out")}
    tree = [(".up.t" in name or ".down.t" in name) and size > 0 for name, size in zip(w.names, w.size_bytes)]
    assert any(tree) and {t for t, yes in zip(w.tags["shared_cap"], tree) if yes} == {""}
    # Rings and all-gathers have none.
    ring = collective_workload(two, "all_reduce", 1 << 30, algorithm="ring").workload
    assert "shared_cap" not in ring.tags


def test_the_hierarchical_all_reduce_keeps_its_own_slices(two_dgx):
    # It is no NCCL algorithm: NCCL's chunks (cut per channel, 32 of 512 KiB at 256 MiB over
    # 16 channels) are not its rings' pieces; its phases slice as the builder does.
    from flowsim.collectives import hierarchical_all_reduce, rank_servers

    plan = collective_workload(two_dgx, "all_reduce", 256 << 20, algorithm="hierarchical")
    built = hierarchical_all_reduce(plan.ranks, 256 << 20, servers=rank_servers(two_dgx, plan.ranks), channels=8,
                                    costs=plan.costs)
    assert plan.workload.names == built.names


def test_rings_across_servers_stay_on_their_rails_as_nccls_do():
    # NCCL lays a ring out as NET n -> GPU a -> ... -> GPU x -> NET n (src/graph/search.cc):
    # it leaves a server through the NIC it came in by. On 16 DGX H100 under 4:1 spines no
    # ring hop then crosses a spine, and the oversubscription costs the ring nothing.
    times = []
    for oversubscription in (1, 4):
        topology = build_cluster("dgx_h100", 16, figure="effective", oversubscription=oversubscription)
        outcome = collective_time(topology, "all_reduce", 1 << 30, nccl_env={"NCCL_ALGO": "ring"}, model="stream")
        routes, names = outcome.run.routes, topology.link_names
        crossing = [f for f in range(routes.n_flows) if any("spine" in names[i] for i in routes.route(f).tolist())]
        assert crossing == []
        times.append(outcome.time_s)
    assert times[0] == times[1]


def test_broadcast_and_reduce_chains_across_servers_stay_on_their_rails():
    # A chain is NCCL's ring opened at the root: its hops between servers stay on one rail,
    # so under 4:1 spines none crosses a spine.
    topology = build_cluster("dgx_h100", 16, figure="effective", oversubscription=4)
    names = topology.link_names
    for collective in ("broadcast", "reduce"):
        outcome = collective_time(topology, collective, 1 << 24)
        routes = outcome.run.routes
        assert routes.n_flows > 127  # every hop of every lane, sliced
        assert not any("spine" in names[i] for f in range(routes.n_flows) for i in routes.route(f).tolist())


def test_nvls_across_servers_with_collnet_reduces_in_the_fabric_leaf_then_spine():
    # NCCL_COLLNET_ENABLE=1 on InfiniBand: NVLS inside the servers, IB SHARP between them. Four
    # DGX H100 in two scalable units of two: each rail's two leaves reduce their servers' chunk
    # and send one sum up to a spine cabled to both, which returns it down each leaf.
    topology = build_cluster("dgx_h100", 4, figure="effective", su_size=2)
    plan = collective_workload(topology, "all_reduce", 64 << 20, nccl_env={"NCCL_COLLNET_ENABLE": "1"})
    assert (plan.algorithm, plan.protocol, plan.nccl.algorithm) == ("nvls_sharp", "simple", "nvls")
    w = plan.workload
    first = [f for f, name in enumerate(w.names) if ".chunk3.sl0.up." in name and not name.endswith(".due")]
    ends = {w.names[f].split(".up.")[1]: (w.src[f], w.dst[f]) for f in first}
    assert ends["s0"] == ("n0.gpu3", "ib.su0.rail3") and ends["s3"] == ("n3.gpu3", "ib.su1.rail3")
    spine = ends["ib.su0.rail3"][1]
    assert ends["ib.su1.rail3"] == ("ib.su1.rail3", spine) and topology.node_kind[topology.node_id(spine)] == \
        NodeKind.IB_SPINE
    outcome = collective_time(topology, "all_reduce", 64 << 20, nccl_env={"NCCL_COLLNET_ENABLE": "1"})
    assert outcome.algorithm == "nvls_sharp" and outcome.time_s > 0
    # Without CollNet NCCL keeps NVLS inside servers (NVLSTree across them).
    assert collective_workload(topology, "all_reduce", 64 << 20).algorithm == "nvls_tree"
    # An EFA fabric reduces nothing: asked for by name, the builder says so.
    from flowsim.systemfile import resolve_system

    efa = build_cluster(resolve_system("aws-p5")[0], 2, figure="effective")
    with pytest.raises(InputError, match=r"IB SHARP needs every rank's NIC on an HDR, NDR or XDR InfiniBand leaf; "
                                         r"'n0.gpu0' leaves its server through none"):
        collective_workload(efa, "all_reduce", 64 << 20, algorithm="nvls_sharp")


def test_all_gather_and_reduce_scatter_through_the_network_on_four_dgx_h100(monkeypatch):
    # With CollNet NCCL's model takes CollNet Direct for 256 MiB (test_tuner), and NVLS across
    # servers when asked; two scalable units put a spine atop each rail's tree. Each GPU's
    # NIC carries its rail of S/8 (in for an all-gather, out for a reduce-scatter) at 48
    # GB/s, 699 us, the floor; the copies inside each server, the climb to the spine and the
    # pipeline's fill and drain add 24% with CollNet Direct (867-869 us) and 38% with NVLS
    # (964 us), whose GPUs each also move all of S to or from their switch. Past the step
    # DAG's message limit each streams, 2-10% faster than its steps (779-942 us): the
    # stream sends every server's share of a rail at once, the steps one after another.
    import flowsim.collectives.dag as collective_dag

    topology = build_cluster("dgx_h100", 4, figure="effective", su_size=2)
    size, collnet = 256 << 20, {"NCCL_COLLNET_ENABLE": "1"}
    floor = size / 8 / 48e9
    plan = collective_workload(topology, "all_gather", size, nccl_env=collnet)
    assert (plan.algorithm, plan.nccl.algorithm) == ("collnet_direct", "collnet_direct")
    w = plan.workload
    ups = {w.names[f]: (w.src[f], w.dst[f]) for f in range(len(w)) if w.names[f].startswith("all_gather.ch0.rail3.sl0.up.")}
    # A rail's first slice holds server 0's share: only it climbs, leaf then spine.
    assert ups["all_gather.ch0.rail3.sl0.up.s0"] == ("n0.gpu3", "ib.su0.rail3")
    assert len(ups) == 2 and topology.node_kind[topology.node_id(ups["all_gather.ch0.rail3.sl0.up.ib.su0.rail3"][1])] \
        == NodeKind.IB_SPINE
    steps = {}
    for collective in ("all_gather", "reduce_scatter"):
        for algo, name in (("CollNetDirect", "collnet_direct"), ("NVLS", "nvls_sharp")):
            outcome = collective_time(topology, collective, size, nccl_env={**collnet, "NCCL_ALGO": algo})
            assert (outcome.algorithm, outcome.model) == (name, "steps")
            assert 1.2 < outcome.time_s / floor < (1.3 if name == "collnet_direct" else 1.4), (collective, name)
            steps[collective, name] = outcome.time_s
    monkeypatch.setattr(collective_dag, "STEP_MESSAGE_LIMIT", 1000)
    for (collective, name), time_s in steps.items():
        algo = "CollNetDirect" if name == "collnet_direct" else "NVLS"
        stream = collective_time(topology, collective, size, nccl_env={**collnet, "NCCL_ALGO": algo})
        assert (stream.algorithm, stream.model) == (name, "stream")
        assert 0.89 * time_s < stream.time_s < time_s, (collective, name)
    # ABCI's A100 nodes have 4 HDR NICs for 8 GPUs: NCCL needs one a GPU for either, and named
    # they are refused, saying so.
    from pathlib import Path

    from flowsim.systemfile import resolve_system

    abci = build_cluster(resolve_system(str(Path(__file__).resolve().parents[1] / "data" / "systems" / "abci_a.toml"))[0],
                         2, figure="effective")
    for name in ("collnet_direct", "nvls_sharp"):
        with pytest.raises(InputError, match=f"{name}: all_gather through the network needs a NIC for every GPU "
                                             r"\(NCCL: \"AllGather/ReduceScatter requires 1:1 GPU:NIC\"\); a "
                                             "server's 8 ranks leave it through 4 NIC"):
            collective_workload(abci, "all_gather", size, algorithm=name, nccl_env=collnet)


def test_collnet_direct_across_scalable_units_is_bound_by_nvlink_on_dgx_a100():
    # NCCL_COLLNET_ENABLE=1 on four DGX A100 (HDR) in two scalable units of two: NCCL's model
    # takes CollNet Direct at 1 GiB on the communicator's 24 channels. Each head's chunk climbs
    # from its rail's leaf to a spine cabled to both leaves. Every GPU moves 7/8 of S each way
    # over NVLink twice (to the heads, then from them), 1.75 S over 240 GB/s, while each NIC
    # carries S/8 each way: NVLink bounds the time, which the chunks' pipeline and NCCL's
    # 44 us latency lengthen by 0.6%.
    topology = build_cluster("dgx_a100", 4, figure="effective", su_size=2)
    collnet = {"NCCL_COLLNET_ENABLE": "1"}
    plan = collective_workload(topology, "all_reduce", 1 << 30, nccl_env=collnet)
    assert (plan.algorithm, plan.protocol, plan.channels) == ("collnet_direct", "simple", 24)
    w = plan.workload
    ends = {w.names[f].split(".up.")[1]: (w.src[f], w.dst[f]) for f in range(len(w))
            if ".chunk3.sl0.up." in w.names[f]}
    assert ends["s0"] == ("n0.gpu3", "ib.su0.rail3") and ends["s3"] == ("n3.gpu3", "ib.su1.rail3")
    assert (ends["ib.su0.rail3"], ends["ib.su1.rail3"]) == (("ib.su0.rail3", "ib.spine0"),
                                                            ("ib.su1.rail3", "ib.spine0"))
    bound = 1.75 * (1 << 30) / 240e9
    time_s = collective_time(topology, "all_reduce", 1 << 30, nccl_env=collnet).time_s
    assert bound < time_s < 1.01 * bound
    # Without CollNet, NCCL's ring; an EFA fabric has no SHARP: asked for by name, it says so.
    assert collective_workload(topology, "all_reduce", 1 << 30).algorithm == "ring"
    from flowsim.systemfile import resolve_system

    efa = build_cluster(resolve_system("aws-p4de")[0], 2, figure="effective")
    with pytest.raises(InputError, match=r"IB SHARP needs every rank's NIC on an HDR, NDR or XDR InfiniBand leaf"):
        collective_workload(efa, "all_reduce", 1 << 30, algorithm="collnet_chain")


def test_ib_sharp_trees_climb_three_tiers_and_spread_over_the_cores():
    # 12 DGX A100 in scalable units of 2 on 40-port HDR switches: three tiers (6 pods of a
    # spine each, 4 cores). Each rail's chunk climbs from its leaves to their pods' spines and
    # on to a core, the chunks taking the 4 cores in turn: rails 0 and 4 on core0. The
    # reduction in the network keeps NVLink the bound, as on one tier.
    topology = build_cluster("dgx_a100", 12, figure="effective", su_size=2)
    collnet = {"NCCL_COLLNET_ENABLE": "1"}
    w = collective_workload(topology, "all_reduce", 1 << 30, nccl_env=collnet).workload
    up = {}
    for f in range(len(w)):
        if ".ch0." in w.names[f] and ".sl0.up.ib." in w.names[f]:
            up.setdefault(w.names[f].split(".")[2], set()).add((w.src[f], w.dst[f]))
    assert up["chunk0"] == {(f"ib.su{p}.rail0", f"ib.spine{p}") for p in range(6)} | {
        (f"ib.spine{p}", "ib.core0") for p in range(6)}
    assert {dst for _, dst in up["chunk4"] if "core" in dst} == {"ib.core0"}
    assert {dst for _, dst in up["chunk5"] if "core" in dst} == {"ib.core1"}
    bound = 1.75 * (1 << 30) / 240e9
    assert bound < collective_time(topology, "all_reduce", 1 << 30, nccl_env=collnet).time_s < 1.01 * bound


def test_point_to_point_over_nvlink_moves_the_measured_share_of_the_link(two_dgx):
    # all_to_all of S over 16 ranks: S / 16 a message. Simple messages inside a server carry
    # it over NVLink at P2P_NVLINK_EFFICIENCY, those between servers over the NICs in full;
    # LL messages (small sizes) carry LL's 8 B lines whichever way they go.
    size = 2**30
    w = collective_workload(two_dgx, "all_to_all", size).workload
    inside = np.array([s.split(".")[0] == d.split(".")[0] for s, d in zip(w.src, w.dst, strict=True)])
    assert inside.sum() == 2 * 8 * 7 and (~inside).sum() == 2 * 8 * 8
    np.testing.assert_allclose(w.size_bytes[inside], size / 16 / P2P_NVLINK_EFFICIENCY, rtol=1e-15)
    np.testing.assert_array_equal(w.size_bytes[~inside], size / 16)
    small = collective_workload(two_dgx, "all_to_all", 16 * 1024).workload
    np.testing.assert_array_equal(small.size_bytes, 1024 / 0.5)


def test_a_send_inside_a_dgx_h100_by_hand():
    # gpu0 -> nvswitch -> gpu1, each a cable of 18 NVLink4 links; the send pays NCCL's ring
    # Simple base latency and one NVLink step (8.4 + 3.4 us, NCCL 2.30.7), the route's link
    # latencies, and moves S bytes at the cable's rate: NCCL writes the peer's buffer on
    # Hopper, and such a send moves what a ring moves (its 32 channels, 685 GB/s, do not bind).
    # The receiver then copies the last 512 KiB chunk out of its buffer at a channel's rate
    # (10.81 bytes a cycle at 1.98 GHz).
    topology = preset("dgx_h100", figure="effective")
    size = 2**30
    up, down = topology.link_between("gpu0", "nvswitch"), topology.link_between("nvswitch", "gpu1")
    rate = topology.link_capacity_Bps[up]
    assert topology.link_capacity_Bps[down] == rate
    latency = topology.link_latency_s[up] + topology.link_latency_s[down]
    chunk = 512 * 1024
    expected = 8.4e-6 + 3.4e-6 + chunk / (10.81 * 1.98e9) + latency + size / rate
    outcome = collective_time(topology, "send", size, ranks=["gpu0", "gpu1"])
    assert outcome.time_s == pytest.approx(expected, rel=1e-9)
    # On Ampere NCCL reads the peer's buffer, and the send moves S / 0.86 bytes.
    a100 = preset("dgx_a100", figure="effective")
    up, down = a100.link_between("gpu0", "nvswitch"), a100.link_between("nvswitch", "gpu1")
    rate = a100.link_capacity_Bps[up]
    assert a100.link_capacity_Bps[down] == rate
    latency = a100.link_latency_s[up] + a100.link_latency_s[down]
    expected = 8.4e-6 + 3.4e-6 + chunk / (10.81 * 1.41e9) + latency + size / P2P_NVLINK_EFFICIENCY / rate
    assert collective_time(a100, "send", size, ranks=["gpu0", "gpu1"]).time_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("server, protocol, intra_us", [
    ("dgx_h100", "ll", 1.0),  # Sapphire Rapids (Intel): max(hwLat NVLink ring LL 0.6, 1 us)
    ("dgx_h100", "simple", 3.4),  # max(3.4, 3 x 1 us)
    ("dgx_a100", "ll", 2.0),  # EPYC (AMD): max(0.6, 2 us)
    ("dgx_a100", "simple", 6.0),  # max(3.4, 3 x 2 us)
])
def test_a_ring_across_servers_pays_a_network_post_at_every_step(server, protocol, intra_us):
    # NCCL's model charges every step of a ring across servers at least the CPU's cost of a
    # network post (src/graph/tuning.cc getNetOverhead: 1 us Intel, 2 us AMD, x3 for Simple);
    # the ring's messages inside a server pay it. On one server they pay hwLat alone. A
    # message's latency is its own overhead and its zero-byte ".due" message's, and the first
    # step's messages add NCCL's base latency (ring: LL 6.6, Simple 8.4 us).
    env = {"NCCL_ALGO": "ring", "NCCL_PROTO": protocol}
    base = {"ll": 6.6, "simple": 8.4}[protocol]
    for nodes, expected in ((2, intra_us), (1, {"ll": 0.6, "simple": 3.4}[protocol])):
        topology = build_cluster(server, nodes, figure="effective")
        plan = collective_workload(topology, "all_gather", 1 << 10, nccl_env=env)
        assert (plan.algorithm, plan.protocol) == ("ring", protocol)
        assert plan.costs.intra_step_s == pytest.approx(expected * 1e-6)
        w = plan.workload
        latency = {}
        for f, name in enumerate(w.names):
            message = name.removesuffix(".due")
            latency[message] = latency.get(message, 0.0) + float(w.overhead_s[f])
        inside = {w.names[f]: w.tags["step"][f] == "0" for f in range(len(w)) if not w.names[f].endswith(".due")
                  and w.src[f].split(".")[0] == w.dst[f].split(".")[0]}
        assert inside
        for message, first in inside.items():
            assert latency[message] == pytest.approx((expected + (base if first else 0.0)) * 1e-6), message


def test_nccl_net_overhead_sets_the_network_post_cost_as_nccl_takes_it():
    # NCCL_NET_OVERHEAD, in ns (src/graph/tuning.cc getNetOverhead: value x .001 us, -2 the
    # default): 3000 gives a multi-node LL ring's steps inside a server 3 us, Simple 9 us;
    # NCCL's own model charges the same (its latency of ring/LL across two DGX H100 grows by
    # 14 steps x (3 - 1) us = 28 us against the default).
    topology = build_cluster("dgx_h100", 2, figure="effective")
    for protocol, expected_us in (("ll", 3.0), ("simple", 9.0)):
        env = {"NCCL_ALGO": "ring", "NCCL_PROTO": protocol, "NCCL_NET_OVERHEAD": "3000"}
        plan = collective_workload(topology, "all_gather", 1 << 10, nccl_env=env)
        assert plan.costs.intra_step_s == pytest.approx(expected_us * 1e-6)
    base = collective_workload(topology, "all_gather", 8, nccl_env={"NCCL_ALGO": "ring", "NCCL_PROTO": "ll"}).nccl
    more = collective_workload(topology, "all_gather", 8, nccl_env={"NCCL_ALGO": "ring", "NCCL_PROTO": "ll",
                                                                   "NCCL_NET_OVERHEAD": "3000"}).nccl
    assert more.table[("ring", "ll")] - base.table[("ring", "ll")] == pytest.approx(14 * 2.0)
    same = collective_workload(topology, "all_gather", 1 << 10, nccl_env={"NCCL_ALGO": "ring", "NCCL_PROTO": "ll",
                                                                         "NCCL_NET_OVERHEAD": "-2"})
    assert same.costs.intra_step_s == pytest.approx(1e-6)
    with pytest.raises(InputError, match="NCCL_NET_OVERHEAD='lots' is not an integer"):
        collective_workload(topology, "all_gather", 8, nccl_env={"NCCL_NET_OVERHEAD": "lots"})
