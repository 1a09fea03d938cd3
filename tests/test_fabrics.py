"""Fat-trees, SuperPOD units and clusters: counts from their closed forms and docs/hardware.md,
bisection bandwidth by maximum flow."""

import dataclasses
import re

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from flowsim.errors import InputError
from flowsim.fabrics import build_cluster, fat_tree, leaf_spine, resolve_fabric
from flowsim.hardware import LinkTier
from flowsim.presets import preset_spec
from flowsim.routing import route
from flowsim.topology import NodeKind, TopologyBuilder

G = 1e9
NDR = 50 * G  # ib_ndr nominal, per direction


def max_flow_Bps(topo, sources, sinks, unit_Bps=1e9):
    """Maximum flow from one node set to another over the topology's network links.

    Capacities go to scipy as integers in ``unit_Bps``; a super source and super sink join the
    two sets with unbounded links.
    """
    n = topo.n_nodes
    network = topo.link_tier == LinkTier.SCALE_OUT
    cap = np.rint(topo.link_capacity_Bps[network] / unit_Bps).astype(np.int64)
    np.testing.assert_allclose(cap * unit_Bps, topo.link_capacity_Bps[network])
    big = int(cap.sum())
    assert big < 2**31
    rows = np.concatenate([topo.link_src[network], np.full(len(sources), n), np.asarray(sinks)])
    cols = np.concatenate([topo.link_dst[network], np.asarray(sources), np.full(len(sinks), n + 1)])
    vals = np.concatenate([cap, np.full(len(sources) + len(sinks), big)])
    graph = csr_matrix((vals.astype(np.int32), (rows, cols)), shape=(n + 2, n + 2))
    return maximum_flow(graph, n, n + 1).flow_value * unit_Bps


def kinds(topo, kind):
    return len(topo.nodes_of_kind(kind))


@pytest.mark.parametrize(("k", "hosts", "links"), [(4, 16, 96), (8, 128, 768), (16, 1024, 6144), (32, 8192, 49152)])
def test_k_ary_fat_tree_counts(k, hosts, links):
    # k^3/4 hosts; 3 k^3/4 cables (host-edge, edge-agg, agg-core), two directed links each.
    topo = fat_tree(k, figure="nominal")
    assert kinds(topo, NodeKind.NIC) == hosts == k**3 // 4
    assert topo.n_links == links == 2 * 3 * k**3 // 4
    assert kinds(topo, NodeKind.IB_LEAF) == k * k // 2
    assert kinds(topo, NodeKind.IB_SPINE) == k * k // 2
    assert kinds(topo, NodeKind.IB_CORE) == k * k // 4
    np.testing.assert_array_equal(topo.link_capacity_Bps, NDR)


def test_k_ary_fat_tree_wiring():
    k = 8
    topo = fat_tree(k, figure="nominal")
    kind = topo.node_kind
    for switch_kind, up_kind, down_kind in (
        (NodeKind.IB_LEAF, NodeKind.IB_SPINE, NodeKind.NIC),
        (NodeKind.IB_SPINE, NodeKind.IB_CORE, NodeKind.IB_LEAF),
    ):
        for switch in topo.nodes_of_kind(switch_kind):
            out = topo.link_dst[topo.link_src == switch]
            assert np.count_nonzero(kind[out] == up_kind) == k // 2
            assert np.count_nonzero(kind[out] == down_kind) == k // 2
    for core in topo.nodes_of_kind(NodeKind.IB_CORE):
        spines = topo.link_dst[topo.link_src == core]
        assert spines.size == k  # one aggregation switch in each of the k pods
    host = topo.node_id("host5")
    assert topo.node_names[topo.link_dst[topo.link_src == host][0]] == "leaf1"  # 5 // (k/2)


@pytest.mark.parametrize("k", [4, 8])
@pytest.mark.parametrize("oversubscription", [1, 2])
def test_fat_tree_bisection_is_its_closed_form(k, oversubscription):
    # Worst bisection: first k/2 pods against the rest. Closed form: k^3/8 x rate / o.
    topo = fat_tree(k, figure="nominal", oversubscription=oversubscription)
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    half = hosts.size // 2
    expected = k**3 / 8 * NDR / oversubscription
    assert max_flow_Bps(topo, hosts[:half], hosts[half:]) == pytest.approx(expected)
    assert max_flow_Bps(topo, hosts[half:], hosts[:half]) == pytest.approx(expected)


def test_fat_tree_bisection_halves_at_two_to_one():
    full, thin = (fat_tree(8, figure="effective", oversubscription=o) for o in (1, 2))
    hosts = full.nodes_of_kind(NodeKind.NIC)
    a, b = hosts[:64], hosts[64:]
    assert max_flow_Bps(thin, a, b) == pytest.approx(max_flow_Bps(full, a, b) / 2)
    # 2:1 at the edge: k/4 uplinks per edge switch and k/4 aggregation switches per pod.
    assert kinds(thin, NodeKind.IB_SPINE) == 8 * 2 and kinds(thin, NodeKind.IB_CORE) == 2 * 4


@pytest.mark.parametrize(("oversubscription", "spines", "bisection"), [(1, 2, 64 * NDR), (2, 1, 32 * NDR)])
def test_leaf_spine(oversubscription, spines, bisection):
    # 128 hosts on 64-port QM9700 leaves: 4 leaves of 32 hosts, 32 (or 16) uplinks each.
    topo = leaf_spine(128, figure="nominal", oversubscription=oversubscription)
    assert kinds(topo, NodeKind.IB_LEAF) == 4 and kinds(topo, NodeKind.IB_SPINE) == spines
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    assert max_flow_Bps(topo, hosts[:64], hosts[64:]) == pytest.approx(bisection)


def test_leaf_spine_capacity_limit():
    # Two tiers of radix-64 switches hold 64^2/2 = 2,048 hosts (docs/hardware.md §4.2).
    assert kinds(leaf_spine(2048, figure="nominal"), NodeKind.NIC) == 2048
    with pytest.raises(InputError, match="do not fit two tiers of 64-port switches"):
        leaf_spine(2049, figure="nominal")


def cables(topo, lower, upper):
    """Cables between two switch kinds (parallel cables are one link of summed capacity)."""
    kind = topo.node_kind
    links = (kind[topo.link_src] == lower) & (kind[topo.link_dst] == upper)
    return topo.link_capacity_Bps[links].sum() / NDR


@pytest.mark.parametrize(
    ("units", "leaves", "spines", "cores", "leaf_spine_cables", "spine_core_cables"),
    [
        # [SPOD-B200] table, docs/hardware.md §4.4; the one-unit row is [SPOD-H100]'s (8 leaf, 4 spine).
        (1, 8, 4, 0, 256, 0),
        (2, 16, 8, 0, 512, 0),
        (4, 32, 16, 0, 1024, 0),
        (8, 64, 32, 0, 2048, 0),
        (16, 128, 128, 64, 4096, 4096),
        (32, 256, 256, 128, 8192, 8192),
    ],
)
def test_superpod_switch_and_cable_counts(units, leaves, spines, cores, leaf_spine_cables, spine_core_cables):
    topo = build_cluster("dgx_b200", 32 * units, figure="nominal")
    assert kinds(topo, NodeKind.IB_LEAF) == leaves
    assert kinds(topo, NodeKind.IB_SPINE) == spines
    assert kinds(topo, NodeKind.IB_CORE) == cores
    kind = topo.node_kind
    node_leaf = np.count_nonzero((kind[topo.link_src] == NodeKind.NIC) & (kind[topo.link_dst] == NodeKind.IB_LEAF))
    assert node_leaf == 32 * units * 8
    assert cables(topo, NodeKind.IB_LEAF, NodeKind.IB_SPINE) == leaf_spine_cables
    assert cables(topo, NodeKind.IB_SPINE, NodeKind.IB_CORE) == spine_core_cables
    assert len(topo.gpus()) == 256 * units


def test_rail_optimized_wiring():
    topo = build_cluster("dgx_h100", 64, figure="nominal")
    for node in (0, 31, 32, 63):
        for rail in range(8):
            nic = topo.node_id(f"n{node}.nic{rail}")
            leaf = topo.link_dst[(topo.link_src == nic) & (topo.link_tier == LinkTier.SCALE_OUT)]
            assert [topo.node_names[x] for x in leaf] == [f"ib.su{node // 32}.rail{rail}"]
    # "Traffic per rail ... is always one hop away from the other 31 nodes in a SU" [SPOD-H100].
    r = route(topo, ["n0.nic3"], ["n31.nic3"])
    assert [topo.link_names[x] for x in r.route(0)] == ["n0.nic3->ib.su0.rail3", "ib.su0.rail3->n31.nic3"]
    r = route(topo, ["n0.nic3"], ["n32.nic3"])
    assert len(r.route(0)) == 4  # leaf, spine, leaf


def test_rail_optimized_bisection():
    # Two units, non-blocking: half the NICs can send to the other half at full rate.
    topo = build_cluster("dgx_h100", 64, figure="nominal")
    nics = np.array([topo.node_id(f"n{i}.nic{r}") for i in range(64) for r in range(8)])
    assert max_flow_Bps(topo, nics[:256], nics[256:]) == pytest.approx(256 * NDR)
    thin = build_cluster("dgx_h100", 64, figure="nominal", oversubscription=2)
    assert max_flow_Bps(thin, nics[:256], nics[256:]) == pytest.approx(128 * NDR)


def test_fat_tree_fabric_packs_nics_in_order():
    topo = build_cluster("dgx_a100", 8, figure="nominal", fabric="fat_tree")
    # 64 HDR NICs on 40-port QM8700 leaves, 20 per leaf.
    assert kinds(topo, NodeKind.IB_LEAF) == 4
    nic = topo.node_id("n2.nic4")  # NIC 20 in order -> second leaf
    leaf = topo.link_dst[(topo.link_src == nic) & (topo.link_tier == LinkTier.SCALE_OUT)][0]
    assert topo.node_names[leaf] == "ib.leaf1"
    assert topo.link_capacity_Bps[topo.link_between(nic, leaf)] == 25 * G


def test_a_cable_runs_at_the_slower_port():
    # NDR NICs of a DGX H100 on HDR QM8700 switches: 200 Gb/s = 25 GB/s per direction.
    topo = build_cluster("dgx_h100", 2, figure="nominal", switch="qm8700")
    link = topo.link_between("n1.nic3", "ib.su0.rail3")
    assert topo.link_capacity_Bps[link] == 25 * G and topo.link_technology[link] == "ib_hdr"


def test_ethernet_network_and_storage():
    topo = build_cluster("dgx_h100", 4, figure="nominal", storage_targets=3, fabric="none")
    assert kinds(topo, NodeKind.STORAGE) == 3 and kinds(topo, NodeKind.IB_LEAF) == 0
    assert kinds(topo, NodeKind.ETH_SWITCH) == 1  # 8 front-end ports + 3 targets on one leaf
    port = topo.node_id("n1.fe0")
    leaf = topo.node_id("eth.leaf0")
    assert topo.link_capacity_Bps[topo.link_between(port, leaf)] == 25 * G  # 200 GbE
    assert topo.link_capacity_Bps[topo.link_between("storage2", leaf)] == 50 * G  # 400 GbE
    r = route(topo, ["n1.gpu0"], ["storage2"])
    names = [topo.link_names[x] for x in r.route(0)]
    assert names[-2:] == ["n1.fe0->eth.leaf0", "eth.leaf0->storage2"] or names[-2:] == [
        "n1.fe1->eth.leaf0",
        "eth.leaf0->storage2",
    ]


def test_switch_hop_latency():
    # Links into a switch carry its hop latency (QM9700: 150 ns); links into hosts none.
    topo = fat_tree(4, figure="nominal")
    into_switch = topo.node_kind[topo.link_dst] != NodeKind.NIC
    np.testing.assert_array_equal(topo.link_latency_s[into_switch], 150e-9)
    np.testing.assert_array_equal(topo.link_latency_s[~into_switch], 0.0)
    r = route(topo, ["host0"], ["host15"])  # other pod: edge, agg, core, agg, edge
    assert topo.link_latency_s[r.route(0)].sum() == pytest.approx(5 * 150e-9)


def test_cluster_names_servers_and_nodes():
    topo = build_cluster("dgx1_v100", 3, figure="effective")
    assert topo.server_names == ("n0", "n1", "n2")
    assert topo.node_server[topo.node_id("n2.gpu7")] == 2
    assert topo.node_nic[topo.node_id("n1.gpu3")] == topo.node_id("n1.nic1")
    # 4 EDR rails on a 36-port switch: units of 18 servers, 4 rail leaves.
    assert kinds(topo, NodeKind.IB_LEAF) == 4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fat_tree(5, figure="nominal"), "a k-ary fat-tree needs an even k >= 2, got 5"),
        (lambda: fat_tree(True, figure="nominal"), "a k-ary fat-tree needs an even k >= 2, got True"),
        (lambda: leaf_spine(True, figure="nominal"), "n_hosts must be a positive integer, got True"),
        (lambda: build_cluster("dgx_h100", 2.0, figure="nominal"), "n_nodes must be a positive integer, got 2.0"),
        (
            lambda: build_cluster("dgx_h100", 1, figure="nominal", storage_targets=-1),
            "storage_targets must be a non-negative integer, got -1",
        ),
        (lambda: fat_tree(8, figure="nominal", oversubscription=3), "oversubscription 3 does not divide the 4 down"),
        (lambda: fat_tree(8, figure="nominal", oversubscription=0.5), "oversubscription must be a number >= 1"),
        (lambda: build_cluster("dgx_h100", 2, figure="nominal", fabric="torus"), "unknown fabric 'torus'; valid ones:"),
        (lambda: build_cluster("dgx_h200", 2, figure="nominal"), "unknown preset 'dgx_h200'; valid ones:"),
        (lambda: build_cluster("dgx_h100", 0, figure="nominal"), "n_nodes must be a positive integer, got 0"),
        (lambda: build_cluster("dgx_h100", 2, figure="nominal", switch="qm1"), "unknown switch model 'qm1'"),
        (lambda: build_cluster("dgx_h100", 2, figure="nominal", su_size=64), "64 down ports per leaf leave no uplinks"),
        # A NIC of one family on a switch of the other was cabled at the slower port's rate.
        (lambda: build_cluster("dgx_h100", 2, figure="nominal", switch="sn5600"),
         "switch 'sn5600' is an Ethernet switch and the servers' compute NICs (kind 'ib') are InfiniBand (ib_ndr): "
         "give an InfiniBand switch"),
        (lambda: build_cluster(dataclasses.replace(preset_spec("dgx_h100"), compute_nic="eth400g", nic_kind="roce"), 2,
                               figure="nominal", switch="qm9700"),
         "switch 'qm9700' is an InfiniBand switch and the servers' compute NICs (kind 'roce') are Ethernet (eth400g): "
         "give an Ethernet switch"),
        (lambda: build_cluster("dgx_h100", 2, figure="nominal", storage_targets=1, ethernet_switch="qm9700"),
         "ethernet_switch 'qm9700' is an InfiniBand switch and the front-end ports and storage targets are Ethernet"),
    ],
)
def test_fabric_errors(call, message):
    with pytest.raises(InputError, match=re.escape(message)):
        call()


def test_sizes_may_be_numpy_integers():
    # As they come out of np.arange or a sweep's array of values.
    assert fat_tree(np.int64(4), figure="nominal").n_links == fat_tree(4, figure="nominal").n_links
    two = build_cluster("dgx_h100", 2, figure="nominal")
    assert build_cluster("dgx_h100", np.int32(2), figure="nominal").n_links == two.n_links


@pytest.mark.parametrize(("fabric", "message"), [
    ("rail_optimized", "rail_optimized compute fabric of 100000000 dgx_h100 servers: 3125000 pods do not fit"),
    ("fat_tree", "fat_tree compute fabric of 100000000 dgx_h100 servers: 781250 pods do not fit"),
    ("none", "Ethernet network of 200000000 ports: 195313 pods do not fit"),
], ids=["rail_optimized", "fat_tree", "none"])
def test_a_cluster_too_large_for_its_switches_is_refused_before_any_building(fabric, message, monkeypatch):
    def build(*args, **kwargs):
        raise AssertionError("servers were built before the fabric was checked")

    monkeypatch.setattr(TopologyBuilder, "add_topology", build)
    with pytest.raises(InputError, match=re.escape(message)):
        build_cluster("dgx_h100", 10**8, figure="nominal", fabric=fabric)


def test_a_rack_scale_system_on_rails_is_pointed_to_the_fabric_that_fits():
    # 72 compute NICs per GB200 NVL72 rack make 72 rail leaves, more than a pod fits under
    # 64-port spines; the same NICs packed into leaves (fat_tree) do fit. One rack needs no
    # fabric at all, and is told so rather than sent to a fat-tree.
    message = "gb200_nvl72 has 72 compute NICs per server, one rail each: fabric 'fat_tree' fits"
    with pytest.raises(InputError, match=re.escape(message)):
        build_cluster("gb200_nvl72", 2, figure="effective")
    assert build_cluster("gb200_nvl72", 2, figure="effective", fabric="fat_tree").n_servers == 2
    with pytest.raises(InputError, match=re.escape(
            "does not fit 64-port spines; one server needs none for its own collectives: fabric none (or auto)")):
        build_cluster("gb200_nvl72", 1, figure="effective")


def test_auto_fabric_takes_a_fat_tree_where_rail_leaves_do_not_fit():
    # Two GB200 NVL72 racks: 72 rails a rack are 144 rail leaves, more than a pod of 64-port
    # spines holds (the error rail_optimized gives), where 144 NICs fill 5 leaves of a fat-tree.
    assert resolve_fabric("auto", 2, "gb200_nvl72") == "fat_tree"
    assert resolve_fabric("auto", 2, "dgx_h100") == "rail_optimized"
    assert resolve_fabric("auto", 1, "gb200_nvl72") == "none"
    assert resolve_fabric("auto", 2) == "rail_optimized"  # no system: the fit is not tried
    with pytest.raises(InputError, match="does not fit 64-port spines.*fabric 'fat_tree' fits"):
        build_cluster("gb200_nvl72", 2, figure="nominal", fabric="rail_optimized")
    racks = build_cluster("gb200_nvl72", 2, figure="nominal", fabric="auto")
    assert any(name.startswith("ib.leaf") for name in racks.node_names)


def test_a_fabric_for_servers_without_nics_is_refused_saying_what_one_server_takes():
    # A scenario of one 8 x RTX 4090 box took the default rail-optimized fabric and stopped
    # there: the message now says that one server needs none.
    with pytest.raises(InputError, match=re.escape(
            "rail_optimized compute fabric of 1 rtx4090_8x servers: the server has no compute NICs; one server "
            "needs none for its own collectives: fabric none (or auto)")):
        build_cluster("rtx4090_8x", 1, figure="effective")
    with pytest.raises(InputError, match=r"of 2 rtx4090_8x servers: the server has no compute NICs \(a system file "
                                         r"gives them in \[server.nics\]\)$"):
        build_cluster("rtx4090_8x", 2, figure="effective")
    assert build_cluster("rtx4090_8x", 1, figure="effective", fabric="auto").n_links \
        == build_cluster("rtx4090_8x", 1, figure="effective", fabric="none").n_links
