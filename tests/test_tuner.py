"""NCCL's choice (flowsim.collectives.tuner) against hand-worked cases of NCCL's rules.

Every expected number below is worked out here from NCCL's sources (docs/hardware.md §7):
the search's speed arrays and passes (src/graph/search.cc), the cost model
(src/graph/tuning.cc) and the channel shrink (src/enqueue.cc).
"""

from __future__ import annotations

import pytest

from flowsim.collectives import collective_time
from flowsim.collectives.constants import NCCL_VERSIONS
from flowsim.collectives.report import busbw_Bps
from flowsim.collectives.tuner import (
    NcclEnv,
    NcclGraph,
    NcclSystem,
    _graphs,
    _shrink,
    describe_system,
    device_redop,
    nccl_choice,
    nvls_refusal,
    nvls_tuning,
)
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.hardware import link_rate
from flowsim.presets import pcie_workstation_spec, preset
from flowsim.routing import Router
from flowsim.servers import build_server

MiB, GiB = 1 << 20, 1 << 30


def _graphs_of(topology):
    ranks = [topology.node_names[g] for g in topology.gpus()]
    system = describe_system(topology, ranks)
    return system, _graphs(topology, ranks, system, NCCL_VERSIONS["2.30.7"], Router(topology))


def test_the_system_is_read_off_the_topology(h100, a100, two_h100):
    system, _ = _graphs_of(h100)
    assert (system.n_ranks, system.n_nodes, system.sm, system.intra, system.nvswitch) == (8, 1, 90, "nvlink", True)
    assert system.cpu_vendor == "intel"  # Sapphire Rapids UPI between the sockets
    assert _graphs_of(a100)[0].cpu_vendor == "amd"  # EPYC: xGMI between the sockets
    assert _graphs_of(two_h100)[0].n_nodes == 2


def test_a100_rings_are_12_channels_at_20(a100):
    # 12 NVLink 3 at NCCL's 20 GB/s: 240 GB/s per GPU. Pass 1 starts at 40 (240 / 40 = 6
    # channels, 6 x 40 = 240: perfect). Duplication (40 >= 25, Ampere) gives 12 x 20; pass 2
    # cannot raise 12 channels to 30 (12 x 30 > 240).
    _, graphs = _graphs_of(a100)
    assert (graphs["ring"].n_channels, graphs["ring"].bw_intra) == (12, 20.0)
    assert (graphs["tree"].n_channels, graphs["tree"].bw_intra) == (12, 20.0)
    assert "nvls" not in graphs  # NVSwitch generation 2: no NVLink SHARP


def test_h100_rings_and_nvls_graphs(h100):
    # 18 NVLink 4 at 20.6: 370.8 GB/s. Ring pass 1: 60 GB/s fits 6 channels (360); slower
    # speeds while more than .49 of 60 (50, 40, 30) move no more than 360, so 6 x 60 stays;
    # duplicated (Hopper at 60 >= 50) to 12 x 30.
    _, graphs = _graphs_of(h100)
    assert (graphs["ring"].n_channels, graphs["ring"].bw_intra) == (12, 30.0)
    # NVLS: 8 heads; a GPU's link carries each channel once and its own head's twice, 9/8 of
    # a channel's speed per channel: 8 x 50 x 9/8 = 450 > 370.8, 8 x 40 x 9/8 = 360 fits.
    # Pass 2 raises the inter-node speed (no inter-node link here) to 60, below 2 x 40.
    nvls = graphs["nvls"]
    assert (nvls.n_channels, nvls.bw_intra, nvls.bw_inter) == (8, 40.0, 60.0)


def test_two_h100_servers_run_a_channel_per_nic(two_h100):
    # Across servers the speeds are the inter-node array (48 first, under the NIC's 50). A ring
    # channel crosses one NIC each way per server and 7 of 8 GPUs' NVLinks: 8 channels fit
    # (8 x 48 x 7/8 = 336 <= 370.8); no duplication (Hopper, 48 < 50 with more than 4).
    _, graphs = _graphs_of(two_h100)
    assert (graphs["ring"].n_channels, graphs["ring"].bw_intra) == (8, 48.0)
    assert graphs["nvls"].n_channels == 8


def test_a_trees_paths_to_the_nics_take_its_inter_node_speed():
    # Two DGX A100 (8 NICs of 200 Gb/s, each behind a PCIe Gen4 switch at NCCL's 24 GB/s). The
    # search charges a path between a GPU and a NIC the channel's inter-node speed and a path
    # between two GPUs its intra-node one ([NCCL] src/graph/search.cc ncclTopoFollowPath):
    # pass 1 fits 8 channels at 24, and pass 2 raises the tree's intra speed over NVLink (12 x 20
    # = 240 GB/s a GPU) to 30 (8 x 30 = 240; 48 does not fit), while the PCIe links carry 24 a
    # channel. Charged the intra speed, the PCIe links held the tree at 24 until 2026-12-06.
    two = build_cluster("dgx_a100", 2, figure="effective")
    _, graphs = _graphs_of(two)
    assert graphs["ring"] == NcclGraph(8, 24.0, 24.0)
    assert graphs["tree"] == NcclGraph(8, 30.0, 24.0)
    # Two servers: NCCL's model takes bwIntra for both. Tree: min(8 x 30 x 0.92, 8 x 23.6) =
    # 188.8 GB/s of bus bandwidth, x 0.5; ring: 8 x 24 = 192, x 16/30. The ring wins at 8 GiB.
    choice = nccl_choice(two, "all_reduce", 8 * GiB, nccl_env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"})
    assert choice.bus_bandwidth_GBps == pytest.approx(8 * 23.6)
    assert nccl_choice(two, "all_reduce", 8 * GiB).algorithm == "ring"


def test_before_nccl_2_20_each_port_of_a_nic_is_a_network_device():
    # OCI BM.GPU4.8: 8 NICs of two 100 Gb/s ports (the system file's ports = 2). From 2.20.3
    # NCCL merges a NIC's ports (NCCL_IB_MERGE_NICS): 8 devices of 25 GB/s, 8 channels at 24,
    # and the tree's GPUs at 30, as on a DGX A100 pair (above); its model, 188.8, loses to the
    # ring's 192. NCCL 2.19.3 sees 16 devices of 12.5 GB/s: pass 1 fits one channel at 12 on
    # each, 16 in all (16 x 12 = 192 over 12 NVLinks' 240), and pass 2 raises the tree's intra
    # speed to 15 (16 x 15 = 240; 18 does not fit). Its model gives the tree min(16 x 15 x 0.92,
    # 16 x 23.6) = 220.8 GB/s of bus bandwidth, 110.4 of algorithm bandwidth, ahead of the
    # ring's 16 x 12 x 16/30 = 102.4: NCCL 2.19.3 runs the tree at 8 GiB, as OCI's 2.19.3 run
    # of this shape did (data/validation/nccl_tests/ocihpcoke_a100_2n8g_allreduce.txt, 238 GB/s,
    # more than any ring over these NICs).
    from flowsim.systemfile import resolve_system

    system, _, _ = resolve_system("oci-bm-gpu4-8")
    assert system.nic_ports == 2
    two = build_cluster(system, 2, figure="effective")
    ranks = [two.node_names[g] for g in two.gpus()]
    described = describe_system(two, ranks)
    for version, ring, tree, algorithm in (("2.19.3", (16, 12.0, 12.0), (16, 15.0, 12.0), "tree"),
                                           ("2.20.5", (8, 24.0, 24.0), (8, 30.0, 24.0), "ring")):
        graphs = _graphs(two, ranks, described, NCCL_VERSIONS[version], Router(two))
        assert graphs["ring"] == NcclGraph(*ring) and graphs["tree"] == NcclGraph(*tree), version
        assert nccl_choice(two, "all_reduce", 8 * GiB, version=version).algorithm == algorithm, version
    choice = nccl_choice(two, "all_reduce", 8 * GiB, version="2.19.3")
    assert choice.bus_bandwidth_GBps == pytest.approx(16 * 15 * 0.92)
    assert choice.system.net_GBps == 12.5  # minNetBw: a port's speed


def test_nvls_bus_bandwidth_on_one_h100_node(h100):
    # min(40 x 0.85 x 7/8 x 2, 60) = 59.5 per channel, 8 channels: 476 GB/s (nccl-tests shows
    # 476-483 on an H100 node).
    choice = nccl_choice(h100, "all_reduce", 8 * GiB)
    assert (choice.algorithm, choice.protocol) == ("nvls", "simple")
    assert choice.bus_bandwidth_GBps == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 2)
    assert (choice.n_channels, choice.max_channels) == (16, 16)  # NVLS_NCHANNELS_SM90


def test_nvls_tree_bus_bandwidth_on_two_h100_nodes(two_h100):
    # min(48 x 0.85 x 7/8 x 2, 2 x 48, perChMaxNVLSTreeBw[Hopper][2 nodes] = 57.7) x 8 = 461.6
    # (nccl-tests shows 461-469 GB/s at 2-16 GiB on two H100 nodes).
    choice = nccl_choice(two_h100, "all_reduce", 8 * GiB)
    assert choice.algorithm == "nvls_tree"
    assert choice.bus_bandwidth_GBps == pytest.approx(8 * 57.7)


@pytest.mark.parametrize(
    ("size", "algorithm", "protocol"),
    [(4096, "ring", "ll"), (MiB, "ring", "ll"), (2 * MiB, "nvls", "simple"), (GiB, "nvls", "simple")],
)
def test_switch_points_on_one_h100_node(h100, size, algorithm, protocol):
    # Ring LL: 6.6 + 14 x 0.6 = 15 us and min(llMaxBw 141, 360 x 0.5) x 8/14 = 80.6 GB/s;
    # NVLS: 25 us and 476 x 8/14 = 272 GB/s. Equal near 1.1 MiB: ring/LL to 1 MiB, NVLS from 2.
    choice = nccl_choice(h100, "all_reduce", size)
    assert (choice.algorithm, choice.protocol) == (algorithm, protocol)


def test_model_times_are_latency_plus_bytes_over_bandwidth(h100):
    choice = nccl_choice(h100, "all_reduce", MiB)
    assert choice.table[("ring", "ll")] == pytest.approx(15.0 + MiB / (1000 * 141 * 8 / 14))
    assert choice.table[("nvls", "simple")] == pytest.approx(25.0 + MiB / (1000 * 476 * 8 / 14))
    # Ring Simple on one node: 8.4 + 14 x 3.4 us, 12 x 30 = 360 GB/s bus.
    assert choice.table[("ring", "simple")] == pytest.approx(8.4 + 14 * 3.4 + MiB / (1000 * 360 * 8 / 14))


def test_channels_then_threads_shrink_for_small_sizes():
    # bytes < channels x threads x threshold: channels drop to 1 first, then threads halve
    # while they are a multiple of 128 (src/enqueue.cc topoGetAlgoInfo).
    assert _shrink(8 << 20, 24, 512, 64) == (24, 512)
    assert _shrink(64 << 10, 24, 512, 64) == (2, 512)  # 65536 = 2 x 512 x 64
    assert _shrink(8192, 24, 512, 64) == (1, 128)
    assert _shrink(64, 24, 512, 64) == (1, 64)  # 64 is not a multiple of 128: it stays


def test_the_ring_ll_threshold_counts_the_ranks(h100):
    # Ring LL's threshold is 8 x nRanks = 64 bytes per thread: at 64 KiB, 2 of 24 channels.
    choice = nccl_choice(h100, "all_reduce", 64 << 10)
    assert (choice.algorithm, choice.protocol, choice.n_channels, choice.max_channels) == ("ring", "ll", 2, 24)


def test_nccl_environment_steers_the_choice(h100, two_h100):
    assert nccl_choice(h100, "all_reduce", 8 * GiB, nccl_env={"NCCL_NVLS_ENABLE": "0"}).algorithm == "ring"
    ring = nccl_choice(two_h100, "all_reduce", 8 * GiB, nccl_env={"NCCL_ALGO": "Ring"})
    assert (ring.algorithm, ring.protocol) == ("ring", "simple")
    only_ll = nccl_choice(h100, "all_reduce", 8 * GiB, nccl_env={"NCCL_PROTO": "LL", "NCCL_ALGO": "ring"})
    assert only_ll.protocol == "ll"
    few = nccl_choice(h100, "all_reduce", 8 * GiB, nccl_env={"NCCL_ALGO": "ring", "NCCL_MAX_NCHANNELS": "4"})
    assert (few.n_channels, few.max_channels) == (4, 4)
    ignored = NcclEnv({"NCCL_IB_HCA": "mlx5_0", "NCCL_ALGO": "ring"}).ignored
    assert ignored == ("NCCL_IB_HCA",)


@pytest.mark.parametrize(
    ("value", "collective", "enabled"),
    [
        ("ring,tree", "all_reduce", {"ring", "tree"}),
        ("^ring", "all_reduce", {"tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}),
        ("allreduce:tree;broadcast:ring", "all_reduce", {"tree"}),
        ("allreduce:tree;broadcast:ring", "broadcast", {"ring"}),
        ("ring;allreduce:nvls", "all_gather", {"ring"}),
        ("NVLSTree,Ring", "all_reduce", {"nvls_tree", "ring"}),
        # strtok_r skips empty pieces (v2.30.7-1 src/graph/tuning.cc parseList): these were refused.
        ("ring;", "all_reduce", {"ring"}),
        ("ring,,tree", "all_reduce", {"ring", "tree"}),
        ("allreduce::tree", "all_reduce", {"tree"}),
        ("", "all_reduce", {"ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}),
    ],
)
def test_nccl_algo_follows_nccls_list_syntax(value, collective, enabled):
    assert NcclEnv({"NCCL_ALGO": value}).algorithms(collective) == enabled


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NCCL_ALGO": "ring,bogus"}, "unknown name 'bogus'"),
        ({"NCCL_ALGO": "ring;tree"}, "every entry but the first needs a function prefix"),
        ({"NCCL_ALGO": ";ring"}, "every entry but the first needs a function prefix"),  # NCCL's fullToken != fullStr
        ({"NCCL_ALGO": "::"}, "the entry '::' names neither a function nor an algorithm"),
        ({"NCCL_ALGO": "allgatherv:ring"}, "unknown function 'allgatherv'"),
        ({"CUDA_VISIBLE_DEVICES": "0"}, "'CUDA_VISIBLE_DEVICES' is not an NCCL_ variable"),
        ({"NCCL_MAX_NCHANNELS": "many"}, "NCCL_MAX_NCHANNELS='many' is not an integer"),
        ({"NCCL_BUFFSIZE": "512"}, "NCCL_BUFFSIZE=512 is under 1024 bytes"),
        ({"NCCL_LL_BUFFSIZE": "0"}, "NCCL_LL_BUFFSIZE=0 is under 1024 bytes"),
        ({"NCCL_LL128_BUFFSIZE": "4M"}, "NCCL_LL128_BUFFSIZE='4M' is not an integer"),
        ({"NCCL_P2P_NVL_CHUNKSIZE": "64"}, "NCCL_P2P_NVL_CHUNKSIZE=64 is under 128 bytes"),
        ({"NCCL_NVLS_CHUNKSIZE": "-1"}, "NCCL_NVLS_CHUNKSIZE=-1 is under 128 bytes"),
    ],
)
def test_bad_environment_names_the_variable(h100, env, message):
    with pytest.raises(InputError, match=message):
        nccl_choice(h100, "all_reduce", MiB, nccl_env=env)


def test_versions_differ_where_their_constants_do(h100):
    # NCCL 2.19.3: NVLS latency 23 us (hwLat), 25 in 2.26.2; the same NVLS bandwidth model in
    # both (tests/test_nccl_versions.py works it).
    new = nccl_choice(h100, "all_reduce", 16 * MiB, version="2.26.2")
    old = nccl_choice(h100, "all_reduce", 16 * MiB, version="2.19.3")
    assert new.table[("nvls", "simple")] - old.table[("nvls", "simple")] == pytest.approx(2.0, rel=1e-6)
    with pytest.raises(InputError, match="no constants for NCCL '2.1.0'"):
        nccl_choice(h100, "all_reduce", MiB, version="2.1.0")


def test_no_algorithm_left_is_one_clear_error(h100):
    with pytest.raises(InputError, match="no NCCL algorithm and protocol left for all_reduce"):
        nccl_choice(h100, "all_reduce", MiB, nccl_env={"NCCL_ALGO": "collnetdirect"})


@pytest.mark.parametrize(("system", "nodes", "collective", "env", "redop", "why"), [
    ("dgx_h100", 1, "all_reduce", {"NCCL_ALGO": "NVLSTree"}, "sum", "nvls_tree: NVLSTree runs across servers only"),
    ("dgx_h100", 1, "broadcast", {"NCCL_ALGO": "Tree"}, "sum", "tree: NCCL runs broadcast on rings only"),
    ("dgx_h100", 2, "all_gather", {"NCCL_ALGO": "Tree"}, "sum",
     "tree: NCCL runs all_gather on rings, PAT, NVLS and CollNet Direct only"),
    ("dgx_a100", 1, "all_reduce", {"NCCL_ALGO": "NVLS"}, "sum", "nvls: NVLS needs NVLink SHARP"),
    ("dgx_h100", 1, "all_reduce", {"NCCL_ALGO": "NVLS"}, "avg", "nvls: the NVSwitch has no reduction for avg on float"),
    ("dgx_h100", 1, "all_reduce", {"NCCL_ALGO": "NVLS", "NCCL_NVLS_ENABLE": "0"}, "sum", "nvls: NCCL_NVLS_ENABLE=0"),
    ("dgx_h100", 1, "all_reduce", {"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, "sum",
     "nvls: it runs Simple only, which NCCL_PROTO leaves out"),
    ("dgx_h100", 2, "all_reduce", {"NCCL_ALGO": "NVLS"}, "sum",
     "nvls: NVLS runs across servers only with CollNet"),
    ("dgx_h100", 2, "all_gather", {"NCCL_ALGO": "PAT"}, "sum", "pat: PAT runs with one GPU a server"),
    ("dgx_h100", 2, "all_reduce", {"NCCL_ALGO": "CollNetDirect,PAT"}, "sum",
     "collnet_direct: CollNet (IB SHARP) runs only with NCCL_COLLNET_ENABLE=1; pat: PAT has no all-reduce"),
    # One server: CollNet needs two (NCCL_COLLNET_NODE_THRESHOLD), whatever its NICs are cabled to.
    ("dgx_h100", 1, "all_gather", {"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1"}, "sum",
     "collnet_direct: CollNet reduces in the network between servers, and the ranks are in one (NCCL turns it off "
     "below NCCL_COLLNET_NODE_THRESHOLD=2 servers)"),
    ("dgx_h100", 2, "all_reduce", {"NCCL_ALGO": "CollNetChain", "NCCL_COLLNET_ENABLE": "1",
                                   "NCCL_COLLNET_NODE_THRESHOLD": "4"}, "sum",
     "collnet_chain: CollNet runs on 4 servers or more (NCCL_COLLNET_NODE_THRESHOLD)"),
    ("dgx_h100", 2, "all_reduce", {"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1"}, "prod",
     "collnet_direct: the SHARP plugin reduces no prod on float"),
    ("dgx_h100", 2, "all_reduce", {"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1",
                                   "NCCL_PROTO": "LL"}, "sum",
     "collnet_direct: it runs Simple only, which NCCL_PROTO leaves out"),
    ("dgx_h100", 2, "reduce_scatter", {"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1"}, "prod",
     "collnet_direct: the SHARP plugin reduces no prod on float"),
])
def test_the_error_says_why_each_allowed_algorithm_is_out(system, nodes, collective, env, redop, why):
    # NCCL's own rules for leaving an algorithm out (ncclTopoTuneModel, updateCollCostTable),
    # each named, where the environment leaves the tuner nothing.
    topology = build_cluster(system, nodes, figure="effective")
    with pytest.raises(InputError) as error:
        nccl_choice(topology, collective, MiB, nccl_env=env, redop=redop)
    assert why in str(error.value)


def test_pat_is_left_out_before_its_release_and_for_scaled_reduce_scatters():
    # One GPU on each of two servers: PAT's ranks, but not before NCCL 2.23.4, and not for a
    # reduce-scatter NCCL scales (avg).
    topology = build_cluster("dgx_h100", 2, figure="effective")
    ranks = ["n0.gpu0", "n1.gpu0"]
    assert nccl_choice(topology, "all_gather", MiB, ranks=ranks, nccl_env={"NCCL_ALGO": "PAT"}).algorithm == "pat"
    for version, redop, why in (("2.22.3", "sum", "PAT arrived in NCCL 2.23.4"),
                                ("2.30.7", "avg", "PAT's reduce-scatter does not scale (avg on float)")):
        with pytest.raises(InputError) as error:
            nccl_choice(topology, "reduce_scatter", MiB, ranks=ranks, nccl_env={"NCCL_ALGO": "PAT"}, version=version,
                        redop=redop)
        assert str(error.value).endswith(f"; pat: {why}")


def test_the_search_runs_once_per_topology_and_ranks(monkeypatch):
    import gc

    import flowsim.collectives.tuner as tuner

    calls = []
    search = tuner._graphs
    monkeypatch.setattr(tuner, "_graphs", lambda *args: calls.append(1) or search(*args))
    topology = preset("dgx_h100", figure="effective")
    for size in (MiB, GiB):
        nccl_choice(topology, "all_reduce", size)
    nccl_choice(topology, "all_gather", MiB)
    assert len(calls) == 1
    nccl_choice(topology, "all_reduce", MiB, ranks=["gpu0", "gpu1"])
    assert len(calls) == 2
    ident = id(topology)
    del topology
    gc.collect()
    assert ident not in tuner._SEARCHES


def test_an_efa_plugins_latency_joins_every_network_step():
    # aws-ofi-nccl reports 75 us on p4d (src/platform-aws.cpp); NCCL adds it to hwLat[NET],
    # twice for Simple (the flush): ring Simple 14.0 + 2 x 75 = 164 us, ring LL 2.7 + 75 =
    # 77.7 us (hwLat[NET] of NCCL 2.30.7, docs/hardware.md §7.3). InfiniBand's is 0.
    from flowsim.collectives import nccl_costs
    from flowsim.fabrics import build_cluster
    from flowsim.systemfile import resolve_system

    assert nccl_costs("ring", "simple", net_latency_us=75.0).inter_step_s == pytest.approx(164e-6)
    assert nccl_costs("ring", "ll", net_latency_us=75.0).inter_step_s == pytest.approx(77.7e-6)
    assert nccl_costs("ring", "simple").inter_step_s == pytest.approx(14e-6)
    system, _, _ = resolve_system("aws-p4d")
    t = build_cluster(system, 2, figure="nominal", fabric="rail_optimized")
    ranks = [f"n{s}.gpu{g}" for s in range(2) for g in range(8)]
    assert describe_system(t, ranks).net_latency_us == pytest.approx(75.0)
    assert describe_system(t, ranks[:8]).net_latency_us == pytest.approx(75.0)


def test_an_efa_step_pays_its_own_latency_while_the_tuner_takes_the_reported_one():
    # The shipped AWS files: aws-ofi-nccl reports 75 us (NCCL's tuner adds it), a step between
    # servers pays 23 us on the wire (step_latency_us). A 2-host p5 all-reduce of 1 KiB runs
    # NCCL's LL tree: its messages between servers pay hwLat[NET][tree][LL] 5.0 + 23 us, and
    # NCCL's model charges 5.0 + 75 for the choice.
    from flowsim.collectives import collective_workload
    from flowsim.fabrics import build_cluster
    from flowsim.systemfile import resolve_system

    system, _, _ = resolve_system("aws-p5")
    t = build_cluster(system, 2, figure="effective", fabric="rail_optimized")
    assert t.server_net_latency_s.tolist() == [75e-6, 75e-6]
    assert t.server_step_latency_s.tolist() == [23e-6, 23e-6]
    plan = collective_workload(t, "all_reduce", 1024)
    assert (plan.algorithm, plan.protocol) == ("tree", "ll")
    assert plan.nccl.system.net_latency_us == pytest.approx(75.0)
    assert plan.costs.inter_step_s == pytest.approx(28e-6)
    # Without step_latency_us a server's steps pay what its plugin reports (the DGX presets: 0).
    dgx = build_cluster("dgx_h100", 2, figure="effective")
    assert dgx.server_step_latency_s.tolist() == dgx.server_net_latency_s.tolist() == [0.0, 0.0]


def test_no_channel_at_the_slowest_speed_runs_nccls_one_channel_fallback():
    # 8 RTX 5090 without peer-to-peer, four to a PCIe Gen5 switch: each staged hop crosses its
    # switch's uplink up (the write to host memory) and down (the read), so four hops share
    # each uplink and no ring channel fits Blackwell's slowest intra-server speed (18 GB/s).
    # NCCL then runs one channel in rank order at a placeholder 0.1 GB/s ([NCCL] v2.30.7-1
    # src/graph/search.cc, "falling back to simple order"); flowsim found no algorithm and
    # refused the call.
    t = build_server(pcie_workstation_spec(gpus_per_switch=4), figure="effective")
    _, graphs = _graphs_of(t)
    assert graphs["ring"] == graphs["tree"] == NcclGraph(1, 0.1, 0.1, fallback=True)
    choice = nccl_choice(t, "all_reduce", GiB)
    assert (choice.algorithm, choice.protocol, choice.n_channels, choice.fallback) == ("ring", "simple", 2, True)
    # The placeholder is what NCCL's model divides by, not a cap: the ring moves a quarter of
    # an uplink's rate (four hops each way), busbw = x16 Gen5 / 4.
    run = collective_time(t, "all_reduce", GiB)
    assert busbw_Bps("all_reduce", GiB, run.time_s, 8) == pytest.approx(link_rate("pcie5", figure="effective") / 4,
                                                                         rel=0.01)
    # Nor does it cap LL, whose channel flowsim holds to the model's bandwidth elsewhere: 64 KiB
    # took 2.3 ms held to 0.1 GB/s, where its steps' latency is tens of microseconds.
    assert collective_time(t, "all_reduce", 64 * 1024, protocol="ll").time_s < 100e-6


@pytest.mark.parametrize(("name", "sm", "row"), [
    # Compute capabilities ([CUDA-GPUS], docs/hardware.md §1.4): RTX 4090 8.9, RTX 5090 12.0;
    # NCCL's rows: >= 100 Blackwell, >= 90 Hopper, >= 80 Ampere ([NCCL] tuning.cc compCapIndex).
    ("rtx4090_8x", 89, "ampere"),
    ("rtx5090_8x", 120, "blackwell"),
    ("dgx_h100", 90, "hopper"),
])
def test_pcie_gpus_take_their_models_compute_capability(name, sm, row):
    t = preset(name, figure="nominal")
    system = describe_system(t, [t.node_names[g] for g in t.gpus()])
    assert (system.sm, system.compcap) == (sm, row)


def test_gpu_models_read_as_nvidia_smi_names_them():
    from flowsim.hardware import gpu_compute_capability

    assert gpu_compute_capability("NVIDIA GeForce RTX 5090") == 120
    assert gpu_compute_capability("NVIDIA H100 80GB HBM3") == 90
    assert gpu_compute_capability("L40S") == 89
    assert gpu_compute_capability("A10G") == 86
    assert gpu_compute_capability("Tesla V100-SXM2-32GB") == 70
    assert gpu_compute_capability("GPU") == 0
    # CUDA GPUs page (docs/hardware.md §1.4): the RTX A4000 is 8.6 by its own row, not as an A40.
    assert gpu_compute_capability("NVIDIA RTX A4000") == 86
    assert gpu_compute_capability("NVIDIA RTX 4000 Ada Generation") == 89
    assert gpu_compute_capability("NVIDIA RTX 4000 SFF Ada Generation") == 89  # read as 0 before
    assert [gpu_compute_capability(f"NVIDIA {m}") for m in ("A16", "A2", "RTX A2000 12GB")] == [86, 86, 86]
    assert gpu_compute_capability("Tesla T4") == 75


@pytest.mark.parametrize(("name", "piece", "holds"), [
    ("NVIDIA RTX A4000", "A40", False), ("NVIDIA H200", "H20", False), ("NVIDIA L40S", "L4", False),
    ("NVIDIA A100-SXM4-80GB", "A10", False), ("NVIDIA H100 80GB HBM3", "H100", True),
    ("Tesla V100-SXM2-16GB", "V100-SXM2", True), ("NVIDIA A100-SXM4-80GB", "A100-SXM", True),
    ("NVIDIA GeForce RTX 4090", "RTX 4090", True), ("NVIDIA H100 PCIe", "PCIe", True),
])
def test_a_model_piece_ending_in_a_digit_is_matched_whole(name, piece, holds):
    # One rule for every table the GPU name is looked up in (compute capability, the default
    # system of a log, system import's NVLink and PCIe): a piece ending in a digit is not a
    # prefix of a longer number, whatever the table's order.
    from flowsim.hardware import gpu_model_value

    assert gpu_model_value(name, [(piece, True)], False) is holds


# --- NVLS channels and chunks (src/transport/nvls.cc ncclNvlsTuning) -----------------------------

KiB = 1024


def blackwell(nodes, ppn=8, net=50.0, near=True, sm=100):
    return NcclSystem(ppn * nodes, nodes, sm, "nvlink", True, "intel", 0.0, net if nodes > 1 else 0.0, near)


@pytest.mark.parametrize(
    ("system", "version", "expected"),
    [
        # Hopper: NVLS_NCHANNELS_SM90, the 128 KiB chunk; NVLSTree's largest 64 KiB from 4 nodes.
        (blackwell(1, sm=90), "2.30.7", (16, 128 * KiB, 128 * KiB)),
        (blackwell(4, sm=90), "2.30.7", (16, 128 * KiB, 64 * KiB)),
        # Blackwell in one NVLink domain: NVLS_NCHANNELS_SM100_NVL from 2.27.3, SM100's 32 before.
        (blackwell(1), "2.30.7", (24, 128 * KiB, 128 * KiB)),
        (blackwell(1), "2.26.2", (32, 128 * KiB, 128 * KiB)),
        # Across servers, ncclNvlsTreeSm100Tuning (2.30.3 on). 2 nodes, NICs >= 48 GB/s, 8 per
        # node under PCIe switches, NICs < 96: 32 channels, tree chunk 64 KiB.
        (blackwell(2), "2.30.7", (32, 128 * KiB, 64 * KiB)),
        # ... with the NIC path through a CPU: the 128 KiB that case sets.
        (blackwell(2, near=False), "2.30.7", (32, 128 * KiB, 128 * KiB)),
        # ... 4 per node: 256 KiB chunks.
        (blackwell(2, ppn=4), "2.30.7", (32, 256 * KiB, 256 * KiB)),
        # 4 nodes, NICs >= 48: 24 channels, tree chunk 64 KiB under PCIe switches, else 128.
        (blackwell(4), "2.30.7", (24, 128 * KiB, 64 * KiB)),
        (blackwell(4, near=False), "2.30.7", (24, 128 * KiB, 128 * KiB)),
        # NICs >= 96 GB/s, 8 per node: 24 channels of 256 KiB; 16 per node: 32, tree 128 KiB.
        (blackwell(4, net=100.0), "2.30.7", (24, 256 * KiB, 256 * KiB)),
        (blackwell(4, ppn=16, net=100.0), "2.30.7", (32, 128 * KiB, 128 * KiB)),
        # Slower NICs: nothing set, the defaults (64 KiB from 4 nodes).
        (blackwell(4, net=25.0), "2.30.7", (32, 128 * KiB, 64 * KiB)),
        (blackwell(2, net=25.0), "2.30.7", (32, 128 * KiB, 128 * KiB)),
        # Before 2.30.3 no SM100 tuning across servers.
        (blackwell(2), "2.26.2", (32, 128 * KiB, 128 * KiB)),
    ],
)
def test_nvls_channels_and_chunks_as_nvls_cc_sets_them(system, version, expected):
    tuning = nvls_tuning(system, NCCL_VERSIONS[version])
    assert (tuning.n_channels, tuning.chunk_bytes, tuning.tree_max_chunk_bytes) == expected


def test_one_blackwell_server_and_one_nvl72_rack_run_nvls_on_24_channels():
    from flowsim.fabrics import build_cluster

    for system, fabric in (("dgx_b200", "auto"), ("gb200_nvl72", "none")):
        topology = build_cluster(system, 1, figure="effective", fabric=fabric)
        choice = nccl_choice(topology, "all_reduce", 1 << 30)
        assert (choice.algorithm, choice.n_channels) == ("nvls", 24)
    two = build_cluster("dgx_b200", 4, figure="effective")
    choice = nccl_choice(two, "all_reduce", 1 << 30)
    # 400 Gb/s NICs behind the GPUs' PCIe switches: NCCL's minNetBw is the Gen5 path's 48 GB/s.
    assert (choice.algorithm, choice.n_channels, choice.system.net_GBps, choice.system.nic_near) == (
        "nvls_tree", 24, 48.0, True)


def test_nvls_channels_follow_nccl_nvls_nchannels_within_the_cta_bounds():
    # src/init.cc: NCCL_NVLS_NCHANNELS sets nvlsCTAs (a positive number from 2.27.3; 0 counted
    # before), then nvls.cc bounds it by NCCL_MIN_CTAS and NCCL_MAX_CTAS.
    system, latest, older = blackwell(1), NCCL_VERSIONS["2.30.7"], NCCL_VERSIONS["2.26.2"]
    for env, version, channels in (({"NCCL_NVLS_NCHANNELS": "8"}, latest, 8),
                                   ({"NCCL_NVLS_NCHANNELS": "0"}, latest, 24),
                                   ({"NCCL_NVLS_NCHANNELS": "0"}, older, 1),
                                   ({"NCCL_NVLS_NCHANNELS": "8", "NCCL_MIN_CTAS": "12"}, latest, 12),
                                   ({"NCCL_MAX_CTAS": "16"}, latest, 16),
                                   ({"NCCL_MAX_CTAS": "-1"}, latest, 24)):
        assert nvls_tuning(system, version, NcclEnv(env)).n_channels == channels, env
    from flowsim.fabrics import build_cluster

    topology = build_cluster("dgx_h100", 1, figure="effective")
    choice = nccl_choice(topology, "all_reduce", 1 << 30, nccl_env={"NCCL_NVLS_NCHANNELS": "8"})
    assert (choice.algorithm, choice.n_channels) == ("nvls", 8)


def test_collnet_enables_nvls_across_infiniband_servers_only():
    # NCCL runs NVLS across servers only with CollNet (NCCL_COLLNET_ENABLE=1 and IB SHARP);
    # then on 4 DGX H100 its model takes NVLS at 8 GiB: bus bandwidth 16 channels x min(the
    # NVLink side, the NIC's 48 GB/s per channel inter speed) = 384, on at most the
    # communicator's channels. An all-gather of 8 GiB keeps the ring, whose model beats the
    # network's (test_all_gather_and_reduce_scatter_through_the_network_by_hand), and an EFA
    # fabric (aws-p5) has no SHARP.
    from flowsim.fabrics import build_cluster
    from flowsim.systemfile import resolve_system

    four = build_cluster("dgx_h100", 4, figure="effective")
    collnet = {"NCCL_COLLNET_ENABLE": "1"}
    assert nccl_choice(four, "all_reduce", 8 * GiB).algorithm == "ring"
    choice = nccl_choice(four, "all_reduce", 8 * GiB, nccl_env=collnet)
    assert (choice.algorithm, choice.n_channels, choice.system.sharp) == ("nvls", 16, True)
    assert choice.bus_bandwidth_GBps == pytest.approx(384.0)
    assert nccl_choice(four, "all_gather", 8 * GiB, nccl_env=collnet).algorithm == "ring"
    system, _, _ = resolve_system("aws-p5")
    efa = build_cluster(system, 2, figure="effective")
    assert not describe_system(efa, [efa.node_names[g] for g in efa.gpus()]).sharp
    assert nccl_choice(efa, "all_reduce", 8 * GiB, nccl_env=collnet).algorithm != "nvls"


def _nics_on_cpu(gpu: str, near: int) -> object:
    """Two servers of 8 ``gpu`` on NVSwitch with 8 NICs, the first ``near`` GPUs sharing a
    PCIe switch with their NIC and the other NICs alone on a CPU root port."""
    from flowsim.fabrics import build_cluster
    from flowsim.systemfile import parse_system

    switches = [f"{{ gpus = [{g}], nics = [{g}] }}" if g < near else f"[{g}]" for g in range(8)]
    switches += [f"{{ gpus = [], nics = [{n}] }}" for n in range(near, 8)]
    text = f"""
[server]
gpu = "{gpu}"
gpus = 8
gpu_fabric = "nvswitch"
nvswitch = "{'nvswitch3' if gpu == 'H100' else 'nvswitch2'}"
pcie = {{ generation = {5 if gpu == 'H100' else 4}, switches = [{', '.join(switches)}] }}
cpu = {{ sockets = 2, interconnect = "upi_sapphire_rapids", memory = "ddr5_4800_8ch" }}
nics = {{ count = 8, speed_gbps = 400 }}
"""
    spec = parse_system(text, source="nics_on_cpu.toml", name="nics_on_cpu").spec
    return build_cluster(spec, 2, figure="effective")


def test_ll128_crosses_servers_only_where_nccl_allows_it_by_the_gpus_paths_to_their_nics():
    # [NCCL] tuning.cc: LL128 needs the graph's typeInter at most PATH_PXB, or PATH_PXN from
    # SM90 on (a peer GPU over NVLink that reaches a NIC under a PCIe switch).
    cases = (("A100", 8, True), ("A100", 4, False), ("A100", 0, False),
             ("H100", 8, True), ("H100", 4, True), ("H100", 0, False))
    for gpu, near, ll128 in cases:
        topology = _nics_on_cpu(gpu, near)
        choice = nccl_choice(topology, "all_reduce", 4 << 20, nccl_env={"NCCL_ALGO": "Ring"})
        system = choice.system
        assert (system.nic_near, system.nic_pxn) == (near == 8, near > 0), (gpu, near)
        # 4 MiB is LL128's on a ring wherever it is enabled.
        assert (choice.protocol == "ll128") == ll128, (gpu, near, choice.protocol)
    # One server has no path between servers to judge: LL128 stays on over NVLink.
    one = nccl_choice(preset("dgx_a100", figure="effective"), "all_reduce", 4 << 20, nccl_env={"NCCL_ALGO": "Ring"})
    assert one.protocol == "ll128"
    # NCCL_PROTO naming the collective enables what it lists as given, LL128 without its
    # default rule ("^LL" leaves LL128 set, as parseList does); an entry for another
    # function leaves the rule in place.
    far = _nics_on_cpu("A100", 0)
    for proto, ll128 in (("LL128", True), ("^LL", True), ("allreduce:LL128,Simple", True),
                         ("broadcast:LL128", False)):
        choice = nccl_choice(far, "all_reduce", 4 << 20, nccl_env={"NCCL_ALGO": "Ring", "NCCL_PROTO": proto})
        assert (choice.protocol == "ll128") == ll128, (proto, choice.protocol)


def test_a_nic_slower_than_its_pcie_path_sets_the_speeds_and_holds_whole_channels():
    # AWS p4d: four 100 Gb/s EFA NICs, each behind a PCIe Gen4 switch with two A100s. NCCL's
    # path from a GPU to the network ends at the NET node behind the NIC's 12.5 GB/s line
    # rate (src/graph/topo.cc ncclTopoAddNet), not at the 24 GB/s PCIe link, so the inter-node
    # speeds start at 12 (Ampere's speedArrayInter: 48, 30, 28, 24, 20, 18, 15, 12, ...). A
    # NIC holds floor(12.5 / 12) = 1 channel at 12: 4 channels, 48 GB/s. At 10 GB/s the four
    # NICs' 50 GB/s would hold 5 channels if pooled, but each NIC still holds 1 (40): the
    # ring keeps 4 x 12. The tree's intra speed then rises to twice its inter one, 24.
    from flowsim.fabrics import build_cluster
    from flowsim.systemfile import resolve_system

    system, _, _ = resolve_system("aws-p4d")
    two = build_cluster(system, 2, figure="effective")
    ranks = [two.node_names[g] for g in two.gpus()]
    described = describe_system(two, ranks)
    graphs = _graphs(two, ranks, described, NCCL_VERSIONS["2.30.7"], Router(two))
    assert graphs["ring"] == NcclGraph(4, 12.0, 12.0)
    assert graphs["tree"] == NcclGraph(4, 24.0, 12.0)
    choice = nccl_choice(two, "all_reduce", GiB)
    assert choice.system.net_GBps == 12.5
    # Two servers: NCCL's model takes bwIntra for both. Ring: 4 x 12 x 16/30 = 25.6 GB/s of
    # algorithm bandwidth; tree: min(4 x 24 x 0.92, 4 x 23.6) x 0.5 = 44.16. The tree wins.
    assert (choice.algorithm, choice.protocol) == ("tree", "simple")
    assert choice.bus_bandwidth_GBps == pytest.approx(4 * 24 * 0.92)


def test_nvls_chunks_follow_the_environment_from_the_versions_that_read_it():
    # NCCL_NVLS_CHUNKSIZE (src/transport/nvls.cc from v2.21.5-1) replaces the chunk, and
    # NVLSTree's largest follows it below 4 nodes; NCCL_NVLSTREE_MAX_CHUNKSIZE (src/enqueue.cc
    # from v2.20.3-1, nvls.cc from v2.30.3-1; -2: unset). flowsim's 2.19.3 tables have neither.
    KiB = 1024
    env = NcclEnv({"NCCL_NVLS_CHUNKSIZE": str(64 * KiB)})
    for version, expected in (("2.30.7", (64 * KiB, 64 * KiB)), ("2.26.2", (64 * KiB, 64 * KiB)),
                              ("2.19.3", (128 * KiB, 128 * KiB))):
        tuning = nvls_tuning(blackwell(2, net=25.0), NCCL_VERSIONS[version], env)
        assert (tuning.chunk_bytes, tuning.tree_max_chunk_bytes) == expected, version
    both = NcclEnv({"NCCL_NVLS_CHUNKSIZE": str(64 * KiB), "NCCL_NVLSTREE_MAX_CHUNKSIZE": str(32 * KiB)})
    assert nvls_tuning(blackwell(2, net=25.0), NCCL_VERSIONS["2.30.7"], both).tree_max_chunk_bytes == 32 * KiB
    for version in ("2.29.7", "2.26.2"):  # [NCCL] src/enqueue.cc NCCL_PARAM(NvlsTreeMaxChunkSize, ...)
        assert nvls_tuning(blackwell(2, net=25.0), NCCL_VERSIONS[version], both).tree_max_chunk_bytes == 32 * KiB
    assert nvls_tuning(blackwell(2, net=25.0), NCCL_VERSIONS["2.19.3"], both).tree_max_chunk_bytes == 128 * KiB
    unset = NcclEnv({"NCCL_NVLSTREE_MAX_CHUNKSIZE": "-2"})
    unset.check()
    assert nvls_tuning(blackwell(4, net=25.0), NCCL_VERSIONS["2.30.7"], unset).tree_max_chunk_bytes == 64 * KiB


def test_buffers_default_to_nccls_and_take_the_environment():
    from flowsim.collectives.chunks import NCCL_BUFFER_BYTES

    assert NcclEnv({}).buffers() == NCCL_BUFFER_BYTES
    assert NcclEnv({"NCCL_BUFFSIZE": "-2"}).buffers() == NCCL_BUFFER_BYTES  # NCCL's "unset"
    assert NcclEnv({"NCCL_BUFFSIZE": str(8 << 20)}).buffers()["simple"] == 8 << 20
    from flowsim.fabrics import build_cluster

    topology = build_cluster("dgx_h100", 1, figure="effective")
    choice = nccl_choice(topology, "all_reduce", 1 << 20, nccl_env={"NCCL_LL_BUFFSIZE": str(1 << 20)})
    assert choice.buffers["ll"] == 1 << 20


# NCCL's device operation per nccl-tests reduction and type (src/enqueue.cc hostToDevRedOp), and
# the types NVLS reduces per operation (src/include/device.h ncclNvlsSupported), written out
# here from the sources rather than from the code's tables.
_NVLS_CASES = [
    # (redop, dtype, device op, NVLS for an all-reduce)
    ("sum", "float", "sum", True),
    ("sum", "double", "sum", True),
    ("sum", "bfloat16", "sum", True),
    ("sum", "int32", "sum", True),
    ("sum", "int8", "sum", False),
    ("sum", "uint8", "sum", False),
    ("sum", "f8e4m3", "sum", False),
    ("max", "half", "minmax", True),
    ("min", "uint64", "minmax", True),
    ("max", "float", "minmax", False),
    ("min", "double", "minmax", False),
    ("prod", "bfloat16", "prod", False),
    ("prod", "int32", "prod", False),
    ("avg", "float", "pre_mul_sum", False),
    ("avg", "bfloat16", "pre_mul_sum", False),
    ("avg", "int32", "sum_post_div", False),
    ("mulsum", "half", "pre_mul_sum", False),
]


@pytest.mark.parametrize(("redop", "dtype", "op", "nvls"), _NVLS_CASES)
def test_nvls_reduces_what_the_nvswitch_has(h100, redop, dtype, op, nvls):
    assert device_redop(redop, dtype) == op
    assert (nvls_refusal("all_reduce", dtype, redop) is None) == nvls
    # One DGX H100 at 1 GiB: NVLS where the NVSwitch reduces (464 GB/s busbw), else NCCL's ring.
    choice = nccl_choice(h100, "all_reduce", GiB, dtype=dtype, redop=redop)
    assert choice.algorithm == ("nvls" if nvls else "ring")


def test_all_gather_reduces_nothing_and_takes_nvls_from_2_22_3():
    # Before v2.22.3-1 NCCL asked ncclNvlsSupported of an all-gather too, with ncclSum.
    assert nvls_refusal("all_gather", "int8", "prod") is None
    assert nvls_refusal("all_gather", "int8", "sum", version="2.19.3") is not None
    assert nvls_refusal("all_gather", "float", "prod", version="2.19.3") is None  # its sum, not -o's
    # A reduce-scatter reduces: -o counts.
    assert nvls_refusal("reduce_scatter", "float", "avg") is not None


def test_pat_reduce_scatter_takes_no_average():
    topology = build_cluster("dgx_h100", 8, figure="effective")
    ranks = [topology.node_names[g] for g in topology.gpus()][::8]
    assert nccl_choice(topology, "reduce_scatter", MiB, ranks=ranks).algorithm == "pat"
    assert nccl_choice(topology, "reduce_scatter", MiB, ranks=ranks, redop="avg").algorithm != "pat"
    assert nccl_choice(topology, "reduce_scatter", MiB, ranks=ranks, redop="max").algorithm == "pat"


def test_an_unknown_type_or_reduction_is_named(h100):
    with pytest.raises(InputError, match="unknown data type 'fp16'; valid ones: int8, uint8"):
        nccl_choice(h100, "all_reduce", MiB, dtype="fp16")
    with pytest.raises(InputError, match="unknown reduction 'mean'; valid ones: sum, prod, max, min, avg, mulsum"):
        nccl_choice(h100, "all_reduce", MiB, redop="mean")


def test_collnet_model_on_two_dgx_a100_by_hand():
    # NCCL_COLLNET_ENABLE=1 on HDR InfiniBand, whose leaves reduce. CollNet Direct's search
    # ([NCCL] src/graph/search.cc): a channel per NIC, each headed by its GPU (8), at the
    # inter speed the 25 GB/s NIC path takes (24 in Ampere's array), then the intra speed
    # raised up to twice that (48) while each GPU's 240 GB/s of NVLink carries it (a head
    # sends 48 and 48/7 to each of the 7 other heads: 96). Model ([NCCL] tuning.cc): bus
    # 8 x 48 = 384, GPU/NIC ratio 1, no Hopper factor, algbw 384 x 0.5 = 192 GB/s; latency
    # 2 x (1 x 3.7 + 7 x 0.4) + 31 = 44 us. CollNet Chain runs on the tree's graph (8 channels,
    # intra 30 GB/s): algbw 8 x 30 x 0.5 = 120, latency 2 x 7 x 2.8 + 30 = 69.2 us.
    two = build_cluster("dgx_a100", 2, figure="effective")
    ranks = [two.node_names[g] for g in two.gpus()]
    collnet = {"NCCL_COLLNET_ENABLE": "1"}
    choice = nccl_choice(two, "all_reduce", 8 * GiB, nccl_env=collnet)
    assert (choice.algorithm, choice.protocol, choice.bus_bandwidth_GBps) == ("collnet_direct", "simple", 384.0)
    assert choice.table[("collnet_direct", "simple")] == pytest.approx(44.0 + 8 * GiB / (1000 * 192.0))
    assert choice.table[("collnet_chain", "simple")] == pytest.approx(69.2 + 8 * GiB / (1000 * 120.0))
    assert ("collnet_direct", "simple") not in nccl_choice(two, "all_reduce", 8 * GiB).table
    # The communicator's channels: twice the ring's 8, and half as many again with CollNet
    # since the chain's intra speed (30) is above its inter one (24) ([NCCL] connect.cc).
    assert (choice.max_channels, nccl_choice(two, "all_reduce", 8 * GiB).max_channels) == (24, 16)
    # CollNet Direct's channel tuning at 1 MiB: down to 16 channels (the threshold 512 halved
    # to 256 at 24), 8 (128 at 12), 4 (64 at 6), then 3: 3 x 640 threads x 8 heads x 64 B =
    # 983,040 B is under 1 MiB.
    small = nccl_choice(two, "all_reduce", MiB, nccl_env=collnet)
    assert (small.algorithm, small.n_channels, small.n_threads) == ("collnet_direct", 3, 640)
    # Small sizes keep the tree with LL (34.9 us against CollNet's 44.3).
    assert nccl_choice(two, "all_reduce", 64 * 1024, nccl_env=collnet).algorithm == "tree"
    # HDR's SHARP (v2) reduces no bfloat16; prod nowhere.
    assert not describe_system(two, ranks).sharp_v3
    assert nccl_choice(two, "all_reduce", 8 * GiB, nccl_env=collnet, dtype="bfloat16").algorithm == "ring"
    assert nccl_choice(two, "all_reduce", 8 * GiB, nccl_env=collnet, redop="prod").algorithm == "ring"
    assert nccl_choice(two, "all_reduce", 8 * GiB, nccl_env=collnet, redop="avg").algorithm == "collnet_direct"


def test_collnet_direct_on_hopper_takes_nccls_factor_and_ndr_reduces_bfloat16():
    # DGX H100 on NDR: 8 heads at 48 GB/s (no room to raise the intra speed above the
    # array's top), bus 8 x 48 x 0.85 = 326.4 GB/s; SHARP v3 reduces bfloat16.
    two = build_cluster("dgx_h100", 2, figure="effective")
    env = {"NCCL_COLLNET_ENABLE": "1", "NCCL_ALGO": "CollNetDirect"}
    choice = nccl_choice(two, "all_reduce", 8 * GiB, nccl_env=env, dtype="bfloat16")
    assert (choice.algorithm, choice.bus_bandwidth_GBps) == ("collnet_direct", pytest.approx(326.4))
    assert choice.system.sharp_v3


def test_all_gather_and_reduce_scatter_through_the_network_by_hand():
    # NCCL 2.20.5 on: with CollNet, an all-gather or reduce-scatter may go through the
    # network, CollNet Direct or NVLS, one head a GPU. On 4 DGX H100 (8 heads, 48 GB/s each
    # way) CollNet Direct's model since 2.27.3: bus 8 x min(48, 48 x .9) = 345.6 GB/s, taken
    # as the algorithm bandwidth; latency 2 x (1 x 3.7 + 7 x 0.4) + 31 = 44 us, as the
    # all-reduce's. Before: 8 x 48 x .85 (the corrective ratio at 8 GPUs a server) = 326.4.
    four = build_cluster("dgx_h100", 4, figure="effective")
    collnet = {"NCCL_COLLNET_ENABLE": "1"}
    for collective in ("all_gather", "reduce_scatter"):
        choice = nccl_choice(four, collective, MiB, nccl_env=collnet)
        assert (choice.algorithm, choice.bus_bandwidth_GBps) == ("collnet_direct", pytest.approx(345.6))
        assert choice.table[("collnet_direct", "simple")] == pytest.approx(44.0 + MiB / (1000 * 345.6))
        assert ("nvls", "simple") in choice.table
        assert nccl_choice(four, collective, 8 * GiB, nccl_env=collnet).algorithm == "ring"
        older = nccl_choice(four, collective, MiB, nccl_env={**collnet, "NCCL_ALGO": "CollNetDirect"},
                            version="2.26.2")
        assert older.bus_bandwidth_GBps == pytest.approx(326.4)
        assert set(nccl_choice(four, collective, MiB, nccl_env=collnet, version="2.19.3").table) == {
            ("ring", "ll"), ("ring", "ll128"), ("ring", "simple")}
    # Across servers NVLS chunks are 32 KiB where the model's NVLS all-reduce moves under 150
    # GB/s, whatever the call: so with NVLS off for all-reduce (its bandwidth 0).
    nvls = {**collnet, "NCCL_ALGO": "allgather:nvls"}
    assert nccl_choice(four, "all_gather", 64 * MiB, nccl_env=nvls).nvls.chunk_bytes == 128 * 1024
    off = {**collnet, "NCCL_ALGO": "allgather:nvls;allreduce:ring"}
    assert nccl_choice(four, "all_gather", 64 * MiB, nccl_env=off).nvls.chunk_bytes == 32 * 1024
    # ABCI's A100 nodes: four HDR NICs for eight GPUs, four heads, so not through the network.
    from pathlib import Path

    from flowsim.systemfile import resolve_system

    abci = resolve_system(str(Path(__file__).resolve().parents[1] / "data" / "systems" / "abci_a.toml"))[0]
    half = build_cluster(abci, 2, figure="effective")
    with pytest.raises(InputError, match="collnet_direct: all_gather through the network needs a NIC "
                                         r"\(a CollNet head\) per GPU: 8 GPUs, 4 heads"):
        nccl_choice(half, "all_gather", MiB, nccl_env={**collnet, "NCCL_ALGO": "CollNetDirect"})
    assert ("collnet_direct", "simple") in nccl_choice(half, "all_reduce", GiB, nccl_env=collnet).table


def test_collnet_heads_are_one_gpu_per_nic():
    # AWS p4de: 8 A100, 4 EFA NICs, each shared by two GPUs: the first GPU on each heads.
    from flowsim.collectives.tuner import collnet_heads
    from flowsim.systemfile import resolve_system

    topology = build_cluster(resolve_system("aws-p4de")[0], 1, figure="effective")
    ranks = [topology.node_names[g] for g in topology.gpus()]
    nics = [int(topology.node_nic[topology.node_id(r)]) for r in ranks]
    heads = collnet_heads(topology, ranks)
    assert len(heads) == len(set(nics)) == 4
    assert [nics[ranks.index(h)] for h in heads] == list(dict.fromkeys(nics))


@pytest.mark.parametrize(("value", "entry"), [("", False), (";", False), ("simple;", True), (":LL128", True),
                                              ("allgather:ll128", False), ("allreduce:ll128", True)])
def test_an_nccl_proto_entry_for_the_call_is_one_parselist_reads(value, entry):
    # An empty value has no entry (NCCL's strtok_r finds none), so LL128 keeps its default
    # rule: the old split counted "" and ";" as entries and forced LL128 on, and ":LL128" as
    # none (refusing every protocol).
    assert NcclEnv({"NCCL_PROTO": value}).protocols_set("all_reduce") is entry


def test_nvls_gathers_and_scatters_at_most_32_ranks_of_a_server():
    # src/enqueue.cc updateCollCostTable: from v2.27.3-1 NVLS and NVLSTree run collectives other
    # than all-reduce only where localRanks <= NCCL_MAX_NVLS_ARITY (32, src/include/device.h);
    # v2.25.1-1 to v2.26.x kept NVLS's all-gather and reduce-scatter to nRanks <= 32.
    rack = build_cluster("gb200_nvl72", 1, figure="effective", fabric="none")
    gpus = [rack.node_names[g] for g in rack.gpus()]
    for collective in ("all_gather", "reduce_scatter"):
        for version in ("2.30.7", "2.26.2"):
            choice = nccl_choice(rack, collective, 64 * MiB, version=version)
            assert choice.algorithm == "ring", (collective, version)
            assert "nvls" not in {key[0] for key in choice.table}
        # 32 GPUs of the rack (8 trays) are one NVLS group: NVLS is weighed, as NCCL weighs it.
        assert "nvls" in {key[0] for key in nccl_choice(rack, collective, 64 * MiB, ranks=gpus[:32]).table}
        assert "nvls" not in {key[0] for key in nccl_choice(rack, collective, 64 * MiB, ranks=gpus[:36]).table}
    # All-reduce keeps NVLS on all 72.
    assert nccl_choice(rack, "all_reduce", 64 * MiB).algorithm == "nvls"
    with pytest.raises(InputError, match=r"nvls: NCCL runs NVLS all_gather on at most 32 ranks of a server "
                                         r"\(NCCL_MAX_NVLS_ARITY\), not 72 GPUs a server"):
        nccl_choice(rack, "all_gather", 64 * MiB, nccl_env={"NCCL_ALGO": "NVLS"})


def test_fp8_rings_on_more_than_8_ranks_are_ranked_last(two_h100):
    # src/enqueue.cc updateCollCostTable (from v2.24.3-1): an FP8 ring's time x 1024 where
    # nRanks > 8, a rank that puts the tree first on 2 DGX H100 at 64 MiB (ring/LL128 503.8 us,
    # tree/LL128 556.4 us in NCCL's model); the table keeps the model's times.
    fp8 = nccl_choice(two_h100, "all_reduce", 64 * MiB, dtype="f8e4m3")
    assert (fp8.algorithm, fp8.protocol) == ("tree", "ll128")
    assert fp8.table[("ring", "ll128")] < fp8.table[("tree", "ll128")] < 2 * fp8.table[("ring", "ll128")]
    # Before 2.24.3, and on 8 ranks, no such rank.
    assert nccl_choice(two_h100, "all_reduce", 64 * MiB, dtype="f8e4m3", version="2.23.4").algorithm == "ring"
    h100 = build_cluster("dgx_h100", 1, figure="effective")
    assert nccl_choice(h100, "all_reduce", 1 * MiB, dtype="f8e4m3").algorithm == "ring"


def test_a_tree_of_one_gpu_a_server_takes_nccls_tree_pattern_factor():
    # src/graph/search.cc: one GPU a server searches the TREE pattern; src/graph/tuning.cc
    # takes its bus bandwidth x .85. 16 DGX H100, one GPU each, 128 KiB: tree/LL128 94.42 us
    # against tree/LL's 99.88, as an independent replay of NCCL 2.30.7's ncclTopoTuneModel and
    # ncclTopoGetAlgoTime gave them (an audit, 2026-12-07); without the factor LL won.
    topology = build_cluster("dgx_h100", 16, figure="effective")
    ranks = [f"n{k}.gpu0" for k in range(16)]
    one = nccl_choice(topology, "all_reduce", 128 * 1024, ranks=ranks)
    assert (one.algorithm, one.protocol) == ("tree", "ll128")
    assert one.table[("tree", "ll128")] == pytest.approx(94.42, abs=0.01)
    assert one.table[("tree", "ll")] == pytest.approx(99.88, abs=0.01)


def test_nvls_across_servers_gathers_from_2_27_3_and_its_channels_are_ncclss_own():
    # src/enqueue.cc updateCollCostTable up to v2.26.x: no NVLS all-gather or reduce-scatter
    # where nNodes > 1; from v2.27.3-1 with CollNet (a re-audit: 2.26.2 chose it).
    collnet = {"NCCL_COLLNET_ENABLE": "1"}
    two = build_cluster("dgx_h100", 2, figure="effective")
    assert "nvls" not in {a for a, _ in nccl_choice(two, "all_gather", MiB, nccl_env=collnet, version="2.26.2").table}
    assert "nvls" in {a for a, _ in nccl_choice(two, "all_gather", MiB, nccl_env=collnet).table}
    # NVLS with CollNet across servers runs min(nvlsChannels, the communicator's) channels
    # (src/enqueue.cc topoGetAlgoInfo): its full share of NCCL's model, nothing set.
    b200 = build_cluster("dgx_b200", 2, figure="effective")
    choice = nccl_choice(b200, "all_reduce", GiB, nccl_env={**collnet, "NCCL_ALGO": "NVLS"})
    assert choice.algorithm == "nvls" and choice.n_channels == choice.model_channels
