"""Routing: routes written out by hand, route validity, ECMP spread, and max-min rates of
simple patterns against hand calculations."""

import math
import re

import numpy as np
import pytest

from flowsim import max_min_rates
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster, fat_tree
from flowsim.failures import apply_failures
from flowsim.presets import preset
from flowsim.routes import Routes
from flowsim.routing import NoRouteError, Router, route, split_route, validate_routes
from flowsim.strings import CodedStrings
from flowsim.topology import NodeKind, TopologyBuilder

G = 1e9


def names(topo, routes, flow=0):
    return [topo.link_names[link] for link in routes.route(flow)]


def rates(topo, routes):
    return max_min_rates(routes, topo.link_capacity_Bps)


# --- routes, link by link ---------------------------------------------------------------------

def test_nvswitch_route():
    topo = preset("dgx_h100", figure="nominal")
    assert names(topo, route(topo, ["gpu0"], ["gpu5"])) == ["gpu0->nvswitch", "nvswitch->gpu5"]
    assert names(topo, route(topo, ["gpu3"], ["nvswitch"])) == ["gpu3->nvswitch"]


def test_a_single_node_on_each_side_is_one_pair():
    topo = preset("dgx_h100", figure="nominal")
    for src, dst in (("gpu0", "gpu5"), (topo.node_id("gpu0"), np.int64(topo.node_id("gpu5"))), ("gpu0", ["gpu5"])):
        routes = route(topo, src, dst)
        assert routes.n_flows == 1 and names(topo, routes) == ["gpu0->nvswitch", "nvswitch->gpu5"]
    assert Router(topo).split("gpu0", "gpu5", max_paths=2).routes.n_flows == 1


def test_dgx1_direct_nvlink_through_one_gpu_and_pcie_to_its_nic():
    topo = preset("dgx1_v100", figure="nominal")
    r = route(topo, ["gpu0", "gpu0", "gpu7", "gpu0"], ["gpu3", "gpu5", "gpu0", "nic0"])
    assert names(topo, r, 0) == ["gpu0->gpu3"]
    assert topo.link_capacity_Bps[r.route(0)[0]] == 50 * G  # NV2: two NVLink 2 links
    # GPU0 and GPU5 share no NVLink (SYS in nvidia-smi): NCCL goes through a GPU linked to both
    # (its NVB path, P2P/indirect), not through the CPUs. GPU1 (NV1 to GPU0, NV2 to GPU5) and GPU4
    # (NV2, NV1) give one NVLink's 25 GB/s each: the first, GPU1.
    assert names(topo, r, 1) == ["gpu0->gpu1", "gpu1->gpu5"]
    # GPU7 to GPU0: through GPU3 (NV1 and NV2: 25 GB/s) or GPU4 (NV2 and NV2: 50): GPU4.
    assert names(topo, r, 2) == ["gpu7->gpu4", "gpu4->gpu0"]
    assert names(topo, r, 3) == ["gpu0->pcie0", "pcie0->nic0"]


def test_pcie_server_with_peer_to_peer():
    topo = preset("pcie_server", figure="nominal")
    r = route(topo, ["gpu0", "gpu0", "gpu0"], ["gpu1", "gpu2", "gpu4"])
    assert names(topo, r, 0) == ["gpu0->pcie0", "pcie0->gpu1"]
    assert names(topo, r, 1) == ["gpu0->pcie0", "pcie0->cpu0", "cpu0->pcie1", "pcie1->gpu2"]
    assert names(topo, r, 2) == ["gpu0->pcie0", "pcie0->cpu0", "cpu0->cpu1", "cpu1->pcie2", "pcie2->gpu4"]


def test_pcie_server_without_peer_to_peer_stages_in_host_memory():
    topo = preset("pcie_server", figure="nominal", p2p=False)
    r = route(topo, ["gpu0", "gpu0"], ["gpu1", "gpu4"])
    staged = ["gpu0->pcie0", "pcie0->cpu0", "cpu0<->mem0", "cpu0<->mem0"]
    assert names(topo, r, 0) == staged + ["cpu0->pcie0", "pcie0->gpu1"]
    # Across sockets the buffer is in the receiver's memory (NCCL's SHM_LOCALITY default).
    assert names(topo, r, 1) == [
        "gpu0->pcie0", "pcie0->cpu0", "cpu0->cpu1", "cpu1<->mem1", "cpu1<->mem1", "cpu1->pcie2", "pcie2->gpu4",
    ]


def test_gpudirect_off_stages_nic_traffic():
    topo = preset("dgx_h100", figure="nominal")
    on = route(topo, ["gpu5", "nic5"], ["nic5", "gpu5"])
    off = route(topo, ["gpu5", "nic5"], ["nic5", "gpu5"], gpudirect=False)
    assert names(topo, on, 0) == ["gpu5->pcie5", "pcie5->nic5"]
    assert names(topo, off, 0) == [
        "gpu5->pcie5", "pcie5->cpu1", "cpu1<->mem1", "cpu1<->mem1", "cpu1->pcie5", "pcie5->nic5",
    ]
    assert names(topo, off, 1) == [
        "nic5->pcie5", "pcie5->cpu1", "cpu1<->mem1", "cpu1<->mem1", "cpu1->pcie5", "pcie5->gpu5",
    ]
    # GPU-to-GPU NVLink traffic does not depend on GPUDirect RDMA.
    assert names(topo, route(topo, ["gpu0"], ["gpu1"], gpudirect=False)) == ["gpu0->nvswitch", "nvswitch->gpu1"]


def test_gb200_gpu_reaches_its_grace_over_c2c():
    topo = preset("gb200_nvl72", figure="nominal")
    r = route(topo, ["gpu5", "gpu5"], ["mem2", "nic5"], gpudirect=False)
    assert names(topo, r, 0) == ["gpu5->cpu2", "cpu2<->mem2"]
    assert names(topo, r, 1) == ["gpu5->cpu2", "cpu2<->mem2", "cpu2<->mem2", "cpu2->pcie5", "pcie5->nic5"]


def test_route_between_servers_leaves_through_the_rail_nic():
    topo = build_cluster("dgx_h100", 64, figure="nominal")
    r = Router(topo).route(["n0.gpu2", "n0.gpu2"], ["n5.gpu2", "n40.gpu6"], method="shortest")
    assert names(topo, r, 0) == [
        "n0.gpu2->n0.pcie2", "n0.pcie2->n0.nic2", "n0.nic2->ib.su0.rail2", "ib.su0.rail2->n5.nic2",
        "n5.nic2->n5.pcie2", "n5.pcie2->n5.gpu2",
    ]
    assert names(topo, r, 1) == [
        "n0.gpu2->n0.pcie2", "n0.pcie2->n0.nic2", "n0.nic2->ib.su0.rail2", "ib.su0.rail2->ib.spine0",
        "ib.spine0->ib.su1.rail6", "ib.su1.rail6->n40.nic6", "n40.nic6->n40.pcie6", "n40.pcie6->n40.gpu6",
    ]


def test_storage_traffic_uses_the_front_end_network():
    topo = build_cluster("dgx_h100", 2, figure="nominal", storage_targets=1)
    r = route(topo, ["storage0"], ["n1.cpu0"], method="shortest")
    assert names(topo, r) == ["storage0->eth.leaf0", "eth.leaf0->n1.fe0", "n1.fe0->n1.cpu0"]


def test_a_pair_with_itself_gets_an_empty_route():
    topo = preset("dgx_h100", figure="nominal")
    assert route(topo, ["gpu1"], ["gpu1"]).hop_counts().tolist() == [0]


# --- every route is valid ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pcie_server", "dgx1_v100", "dgx_a100", "dgx_h100", "dgx_b200", "gb200_nvl72"])
def test_every_route_between_gpus_and_nics_is_valid(name):
    topo = build_cluster(name, 2, figure="nominal", fabric="fat_tree", p2p=False)
    ends = np.concatenate([topo.gpus(), topo.nodes_of_kind(NodeKind.NIC)])
    src, dst = (a.ravel() for a in np.meshgrid(ends, ends, indexing="ij"))
    if name == "gb200_nvl72":
        # Host links reach only a GPU's own superchip (Grace c: GPUs and NICs 2c and 2c+1,
        # front-end port c): keep pairs of GPUs, pairs within a superchip, pairs across racks.
        chip = np.full(topo.n_nodes, -1)
        for node, name in enumerate(topo.node_names):
            local = name.split(".")[1]
            if local[:3] in ("gpu", "nic"):
                chip[node] = int(local[3:]) // 2
            elif local[:2] == "fe":
                chip[node] = int(local[2:])
        gpu = topo.node_kind == NodeKind.GPU
        keep = (gpu[src] & gpu[dst]) | (chip[src] == chip[dst]) | (topo.node_server[src] != topo.node_server[dst])
        src, dst = src[keep], dst[keep]
    for gpudirect in (True, False):
        routes = Router(topo).route(src, dst, gpudirect=gpudirect)
        validate_routes(topo, routes, src, dst)
        # The same check written out: each link leaves the node the previous one reached.
        for f in np.random.default_rng(0).choice(routes.n_flows, 200):
            at = src[f]
            for link in routes.route(f):
                crossed_back = topo.link_shared[link] and topo.link_dst[link] == at
                assert topo.link_src[link] == at or crossed_back
                at = topo.link_src[link] if crossed_back else topo.link_dst[link]
            assert at == dst[f]


def test_validate_routes_names_the_broken_flow():
    topo = preset("pcie_server", figure="nominal")
    links = topo.link_index
    gap = Routes.from_lists([["gpu0->pcie0", "cpu0->pcie1"]], topo.n_links, links)
    with pytest.raises(InputError, match=re.escape(
        "flow 0 ('gpu0' -> 'gpu2') is not contiguous: link 'cpu0->pcie1' does not continue from link 'gpu0->pcie0'"
    )):
        validate_routes(topo, gap, ["gpu0"], ["gpu2"])
    short = Routes.from_lists([["gpu0->pcie0"]], topo.n_links, links)
    with pytest.raises(InputError, match="does not reach its destination: it ends with link 'gpu0->pcie0'"):
        validate_routes(topo, short, ["gpu0"], ["gpu1"])
    wrong_start = Routes.from_lists([["pcie0->gpu1"]], topo.n_links, links)
    with pytest.raises(InputError, match="does not continue from its source"):
        validate_routes(topo, wrong_start, ["gpu0"], ["gpu1"])
    with pytest.raises(InputError, match="has an empty route"):
        validate_routes(topo, Routes.from_lists([[]], topo.n_links), ["gpu0"], ["gpu1"])
    # A shared link may be crossed either way.
    staged = Routes.from_lists([["gpu0->pcie0", "pcie0->cpu0", "cpu0<->mem0"]], topo.n_links, links)
    validate_routes(topo, staged, ["gpu0"], ["mem0"])


# --- spread over equal-cost paths -------------------------------------------------------------

def core_uplinks(topo):
    kind = topo.node_kind
    return np.flatnonzero((kind[topo.link_src] == NodeKind.IB_SPINE) & (kind[topo.link_dst] == NodeKind.IB_CORE))


@pytest.mark.parametrize("seed", range(5))
def test_ecmp_spreads_a_random_permutation(seed):
    # k=16 fat-tree, 1,024 hosts, random permutation. A flow leaves its pod with probability
    # 15/16 and ECMP puts it on one of the 1,024 aggregation -> core links uniformly, so the
    # load of a link is about Poisson(15/16): the share of links used should be
    # 1 - exp(-15/16) = 0.608 (stated tolerance 0.04, ~3.5 standard deviations), and no link
    # should carry more than 8 flows, where always taking the first next hop ("shortest")
    # piles 60+ flows on one link.
    k = 16
    topo = fat_tree(k, figure="nominal")
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    perm = hosts[np.random.default_rng(seed).permutation(hosts.size)]
    router = Router(topo)
    uplinks = core_uplinks(topo)
    load = np.bincount(router.route(hosts, perm, method="ecmp", seed=seed).flow_link_indices, minlength=topo.n_links)
    assert abs(np.mean(load[uplinks] > 0) - (1 - math.exp(-15 / 16))) < 0.04
    assert load.max() <= 8
    first = np.bincount(router.route(hosts, perm, method="shortest").flow_link_indices, minlength=topo.n_links)
    assert first[uplinks].max() >= 60


def test_ecmp_is_deterministic_per_seed():
    topo = fat_tree(8, figure="nominal")
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    perm = np.roll(hosts, 37)
    router = Router(topo)
    a, b, c = (router.route(hosts, perm, method="ecmp", seed=s) for s in (3, 3, 4))
    assert np.array_equal(a.flow_link_indices, b.flow_link_indices)
    assert not np.array_equal(a.flow_link_indices, c.flow_link_indices)


def test_dmodk_is_contention_free_for_every_shift():
    # D-mod-k on a k-ary fat-tree: host h sends to (h + s) mod N; no link carries two flows.
    topo = fat_tree(8, figure="nominal")
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    router = Router(topo)
    for shift in range(1, hosts.size):
        r = router.route(hosts, np.roll(hosts, -shift), method="dmodk")
        assert np.bincount(r.flow_link_indices).max() == 1, shift


def _same_routes(a, b):
    return np.array_equal(a.flow_link_indptr, b.flow_link_indptr) and np.array_equal(
        a.flow_link_indices, b.flow_link_indices
    )


@pytest.mark.parametrize(("technology", "expected"), [("ib_ndr", "dmodk"), ("eth400g", "ecmp")])
def test_auto_routes_infiniband_by_destination_and_ethernet_by_flow_hash(technology, expected):
    # A random permutation on a k=8 fat-tree: "auto" (the default) is D-mod-k on InfiniBand
    # cables and seeded ECMP on Ethernet ones, pair for pair; the two methods differ on these
    # pairs, so the comparison tells them apart.
    topo = fat_tree(8, figure="nominal", technology=technology)
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    perm = hosts[np.random.default_rng(5).permutation(hosts.size)]
    router = Router(topo)
    auto = router.route(hosts, perm, seed=7)
    by = {m: router.route(hosts, perm, method=m, seed=7) for m in ("dmodk", "ecmp")}
    assert not _same_routes(by["dmodk"], by["ecmp"])
    assert _same_routes(auto, by[expected])
    assert _same_routes(route(topo, hosts, perm, method="auto", seed=7), by[expected])


def test_auto_routes_each_network_of_a_cluster_as_its_switches_do():
    # 96 DGX H100 (3 scalable units) with storage on the front-end Ethernet: GPU traffic
    # between units crosses InfiniBand spines by D-mod-k; storage reads cross Ethernet by ECMP.
    topo = build_cluster("dgx_h100", 96, figure="nominal", storage_targets=8)
    router = Router(topo)
    gpus = [f"n{i}.gpu{i % 8}" for i in range(0, 96, 3)]
    peers = [f"n{(i + 37) % 96}.gpu{(i + 3) % 8}" for i in range(0, 96, 3)]
    gpu_routes = {m: router.route(gpus, peers, method=m, seed=2) for m in ("auto", "dmodk", "ecmp")}
    assert not _same_routes(gpu_routes["dmodk"], gpu_routes["ecmp"])
    assert _same_routes(gpu_routes["auto"], gpu_routes["dmodk"])
    readers = [f"n{i}.cpu{i % 2}" for i in range(96)]
    stores = [f"storage{i % 8}" for i in range(96)]
    storage_routes = {m: router.route(stores, readers, method=m, seed=2) for m in ("auto", "dmodk", "ecmp")}
    assert not _same_routes(storage_routes["dmodk"], storage_routes["ecmp"])
    assert _same_routes(storage_routes["auto"], storage_routes["ecmp"])


def test_shift_rates_dmodk_full_and_shortest_collides():
    # k=4, 16 hosts, every flow host h -> host (h + 4) mod 16 (next pod). D-mod-k: no two flows
    # share a link, so each gets the full 50 GB/s. "shortest": both hosts of an edge switch go
    # up the same link, so each gets 50 / 2 = 25 GB/s at best.
    topo = fat_tree(4, figure="nominal")
    hosts = topo.nodes_of_kind(NodeKind.NIC)
    router = Router(topo)
    dmodk = rates(topo, router.route(hosts, np.roll(hosts, -4), method="dmodk"))
    np.testing.assert_allclose(dmodk, 50 * G, rtol=1e-12)
    first = rates(topo, router.route(hosts, np.roll(hosts, -4), method="shortest"))
    assert first.max() <= 25 * G * (1 + 1e-12)


def test_split_parts_are_distinct_and_share_the_bytes():
    topo = fat_tree(8, figure="nominal")
    split = split_route(topo, ["host0", "host0", "host0"], ["host127", "host5", "host1"], max_paths=100)
    # (k/2)^2 = 16 paths to another pod, k/2 = 4 to another edge of the pod, 1 on the edge.
    assert np.bincount(split.pair).tolist() == [16, 4, 1]
    np.testing.assert_allclose(np.bincount(split.pair, weights=split.share), 1.0)
    parts = [tuple(split.routes.route(p)) for p in range(split.routes.n_flows)]
    assert len(set(parts)) == 21
    assert parts[0] == tuple(route(topo, ["host0"], ["host127"]).route(0))
    capped = split_route(topo, ["host0"], ["host127"], max_paths=3)
    assert capped.share.tolist() == [1 / 3] * 3


def test_split_restores_the_rate_lost_to_a_collision():
    # k=4: host0 and host1 (same edge switch) send to host8 and host9 (another pod). With
    # "shortest" both take the first uplink: 25 GB/s each. Split over all 4 paths, every
    # aggregation and core link carries one part of each flow at 12.5 GB/s and no link is
    # above 50 GB/s, so each flow gets 4 x 12.5 = 50 GB/s.
    topo = fat_tree(4, figure="nominal")
    src, dst = ["host0", "host1"], ["host8", "host9"]
    np.testing.assert_allclose(rates(topo, route(topo, src, dst, method="shortest")), 25 * G)
    split = split_route(topo, src, dst, max_paths=4, method="shortest")
    per_flow = np.bincount(split.pair, weights=rates(topo, split.routes))
    np.testing.assert_allclose(per_flow, 50 * G, rtol=1e-12)


# --- max-min rates of simple patterns ---------------------------------------------------------

@pytest.mark.parametrize(("figure", "per_gpu"), [("nominal", 450 * G), ("effective", 18 * 20.6 * G)])
def test_dgx_h100_all_to_all(figure, per_gpu):
    # 8 GPUs, 56 flows. Every flow crosses its source's GPU->NVSwitch link and its
    # destination's NVSwitch->GPU link; each such link carries 7 flows, all equal by symmetry:
    # rate = 450 GB/s / 7 = 64.29 GB/s (nominal) or 370.8 / 7 = 52.97 GB/s (effective).
    topo = preset("dgx_h100", figure=figure)
    gpus = topo.gpus()
    src, dst = (a.ravel() for a in np.meshgrid(gpus, gpus, indexing="ij"))
    off = src != dst
    r = rates(topo, route(topo, src[off], dst[off]))
    assert r.size == 56
    np.testing.assert_allclose(r, per_gpu / 7, rtol=1e-12)


def test_pcie_pair_across_sockets_is_limited_by_upi():
    # GPU0 (socket 0) -> GPU4 (socket 1), peer-to-peer: PCIe Gen4 x16 31.5 GB/s on the
    # switch links, UPI (NCCL's Skylake figure) 10 GB/s between the root complexes: 10 GB/s.
    for p2p in (True, False):  # staged, host memory (204.8 GB/s / 2 crossings) does not bind
        topo = preset("pcie_server", figure="nominal", p2p=p2p)
        np.testing.assert_allclose(rates(topo, route(topo, ["gpu0"], ["gpu4"])), [10 * G], rtol=1e-12)


def test_pcie_pair_through_the_root_complex():
    # P2P, GPU0 -> GPU2 and GPU1 -> GPU3: both cross pcie0 -> cpu0 and cpu0 -> pcie1
    # (31.5 GB/s each), so 31.5 / 2 = 15.75 GB/s each.
    topo = preset("pcie_server", figure="nominal")
    np.testing.assert_allclose(rates(topo, route(topo, ["gpu0", "gpu1"], ["gpu2", "gpu3"])), 15.75 * G, rtol=1e-12)
    # No P2P, GPU0 <-> GPU1 (both behind pcie0), staged in mem0: pcie0 -> cpu0 carries both
    # flows (31.5 / 2 = 15.75); the memory link is crossed 4 times (204.8 / 4 = 51.2): 15.75.
    topo = preset("pcie_server", figure="nominal", p2p=False)
    np.testing.assert_allclose(rates(topo, route(topo, ["gpu0", "gpu1"], ["gpu1", "gpu0"])), 15.75 * G, rtol=1e-12)


def test_pcie_ring_without_p2p_is_bound_by_host_memory():
    # No P2P, 4 channels of DDR4-2400 per socket (76.8 GB/s). Ring 0->1->2->3->0 on socket 0:
    # each flow writes into and reads out of mem0, so mem0 carries 4 x 2 = 8 crossings:
    # 76.8 / 8 = 9.6 GB/s, below the PCIe share (31.5 / 2 = 15.75 on pcie0 -> cpu0).
    topo = preset("pcie_server", figure="nominal", p2p=False, memory="ddr4_2400_4ch")
    r = route(topo, ["gpu0", "gpu1", "gpu2", "gpu3"], ["gpu1", "gpu2", "gpu3", "gpu0"])
    assert names(topo, r, 0).count("cpu0<->mem0") == 2
    np.testing.assert_allclose(rates(topo, r), 9.6 * G, rtol=1e-12)


def test_two_dgx_h100_over_rails():
    # n0.gpu i -> n1.gpu j. Each flow has its own rail NIC at each end: NDR 50 GB/s (PCIe Gen5
    # 63 GB/s does not bind), same rail or not (the spines are non-blocking): 50 GB/s each.
    topo = build_cluster("dgx_h100", 2, figure="nominal")
    router = Router(topo)
    src = [f"n0.gpu{i}" for i in range(8)]
    for shift in (0, 1, 5):
        dst = [f"n1.gpu{(i + shift) % 8}" for i in range(8)]
        np.testing.assert_allclose(rates(topo, router.route(src, dst)), 50 * G, rtol=1e-12)
    # Without GPUDirect RDMA each side stages in host memory: GPUs 0-3 share mem0 (DDR5-4800,
    # 307.2 GB/s) with 4 flows x 2 crossings: 307.2 / 8 = 38.4 GB/s each.
    dst = [f"n1.gpu{i}" for i in range(8)]
    np.testing.assert_allclose(rates(topo, router.route(src, dst, gpudirect=False)), 38.4 * G, rtol=1e-12)


# --- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: route(t, ["gpu0"], ["gpu1"], method="x"), "unknown routing method 'x'; valid ones: auto, ecmp, dmodk, shortest"),
        (lambda t: route(t, ["gpu0"], ["gpu1"], seed=-1), "seed must be a non-negative integer, got -1"),
        (lambda t: route(t, ["gpu0", "gpu1"], ["gpu1"]), "2 sources but 1 destinations"),
        (lambda t: route(t, ["gpu0"], ["gpu99"]), "unknown node 'gpu99'"),
        (lambda t: route(t, "gpu0", "gpu99"), "unknown node 'gpu99'"),
        (lambda t: route(t, "gpu0", ["gpu1", "gpu2"]), "1 sources but 2 destinations"),
        (lambda t: route(t, ["gpu0"], 1.5), "dst must be a node name or id, or a sequence of them, got 1.5"),
        (lambda t: route(t, [0], [10**6]), "unknown node id 1000000"),
        (lambda t: route(t, ["cpu0"], ["cpu1"]), "no route from 'cpu0' to 'cpu1': no NVLink, host or network path"),
        (lambda t: split_route(t, ["gpu0"], ["gpu1"], max_paths=0), "max_paths must be a positive integer, got 0"),
    ],
)
def test_routing_errors(call, message):
    # GB200 NVL72: Grace CPUs of different superchips share no host link (presets docstring).
    topo = preset("gb200_nvl72", figure="nominal")
    with pytest.raises(InputError, match=re.escape(message)):
        call(topo)


def test_without_a_compute_fabric_gpus_use_the_front_end_network():
    topo = build_cluster("dgx_h100", 2, figure="nominal", fabric="none")
    r = route(topo, ["n0.gpu0"], ["n1.gpu0"], method="shortest")
    assert names(topo, r) == [
        "n0.gpu0->n0.pcie0", "n0.pcie0->n0.cpu0", "n0.cpu0->n0.fe0", "n0.fe0->eth.leaf0",
        "eth.leaf0->n1.fe0", "n1.fe0->n1.cpu0", "n1.cpu0->n1.pcie0", "n1.pcie0->n1.gpu0",
    ]


def test_servers_on_no_common_network_have_no_route():
    b = TopologyBuilder()
    for i in range(2):
        b.add_topology(preset("dgx_h100", figure="nominal"), prefix=f"n{i}.", server_names=[f"n{i}"])
    with pytest.raises(InputError, match="no route from 'n0.gpu0' to 'n1.gpu0': no network joins their servers"):
        route(b.build(), ["n0.gpu0"], ["n1.gpu0"])


@pytest.mark.parametrize("fabric", ["rail_optimized", "none"])
@pytest.mark.parametrize("method", ["shortest", "ecmp", "dmodk"])
def test_gpus_write_to_storage_through_their_own_sockets_port(fabric, method):
    # A DGX H100 has a front-end port on each CPU. Every write left through fe0 (the first
    # port, or a hash of the two), the other socket's GPUs crossing UPI to reach it.
    cluster = build_cluster("dgx_h100", 1, figure="nominal", storage_targets=1, fabric=fabric)
    gpus = [f"n0.gpu{g}" for g in range(8)]
    routes = route(cluster, gpus, ["storage0"] * 8, method=method)
    names = [[cluster.link_names[link] for link in routes.route(f)] for f in range(8)]
    assert all("n0.cpu0->n0.fe0" in path for path in names[:4])
    assert all("n0.cpu1->n0.fe1" in path for path in names[4:])
    assert not any("n0.cpu1->n0.cpu0" in path or "n0.cpu0->n0.cpu1" in path for path in names)


def test_a_copy_that_must_be_staged_without_host_memory_says_so():
    # The message said no host path joined the GPUs, though one does: the copy needs a
    # host memory to be staged in (p2p off), and the server has none.
    b = TopologyBuilder()
    box = b.add_server("box", p2p=False)
    for name, kind in (("g0", NodeKind.GPU), ("g1", NodeKind.GPU), ("sw", NodeKind.PCIE_SWITCH), ("cpu", NodeKind.CPU)):
        b.add_node(name, kind, server=box)
    for a, z in (("g0", "sw"), ("g1", "sw"), ("sw", "cpu")):
        b.add_cable(a, z, 32e9, technology="pcie5")
    with pytest.raises(InputError, match=re.escape(
        "no route from 'g0' to 'g1': 'g0' to 'g1' is staged through host memory (no peer-to-peer) and no host "
        "memory is reachable over host links"
    )):
        route(b.build(), ["g0"], ["g1"])


def test_routes_to_and_from_network_switches():
    # An in-network reduction's messages end at switches: a GPU reaches its rail's leaf as it
    # leaves its server (GPU -> PCIe switch -> NIC -> leaf), a leaf the spine over their
    # cable, and back down the same way; a marker at a switch has an empty route.
    topology = build_cluster("dgx_h100", 4, figure="effective", su_size=2)
    router = Router(topology)
    spine = next(topology.node_names[int(topology.link_dst[link])] for link in topology.links_from("ib.su0.rail0")
                 if topology.node_kind[topology.link_dst[link]] == NodeKind.IB_SPINE)
    src = ["n0.gpu0", "ib.su0.rail0", spine, "ib.su1.rail0", "ib.su0.rail0", "n0.gpu0"]
    dst = ["ib.su0.rail0", spine, "ib.su1.rail0", "n3.gpu0", "ib.su0.rail0", "n1.gpu0"]
    routes = router.route(src, dst)
    names = [[topology.link_names[link] for link in routes.route(f)] for f in range(routes.n_flows)]
    assert names[0] == ["n0.gpu0->n0.pcie0", "n0.pcie0->n0.nic0", "n0.nic0->ib.su0.rail0"]
    assert names[1] == [f"ib.su0.rail0->{spine}"] and names[2] == [f"{spine}->ib.su1.rail0"]
    assert names[3] == ["ib.su1.rail0->n3.nic0", "n3.nic0->n3.pcie0", "n3.pcie0->n3.gpu0"]
    assert names[4] == []
    # Pairs of servers route as they did: the same GPU-to-GPU route as without switch pairs.
    assert names[5] == [topology.link_names[link] for link in router.route("n0.gpu0", "n1.gpu0").route(0)]
    with pytest.raises(InputError, match=r"no route from 'n0.nvswitch' to 'ib.su0.rail0': 'n0.nvswitch' leaves "
                                         r"its server through no NIC"):
        router.route("n0.nvswitch", "ib.su0.rail0")
    with pytest.raises(InputError, match=r"no route from 'ib.su0.rail0' to 'ib.su1.rail0': 0 links"):
        router.route("ib.su0.rail0", "ib.su1.rail0")


@pytest.mark.parametrize("method", ["ecmp", "dmodk", "shortest"])
def test_coded_endpoints_route_as_their_names(method):
    # Endpoints as coded columns (a workload's) take the pair table, not the sort: the same
    # routes, flow by flow, as the names; categories repeated, unused or self-pairs included.
    topo = build_cluster("dgx_h100", 4, figure="effective", fabric="fat_tree")
    rng = np.random.default_rng(4)
    gpus = [topo.node_names[g] for g in topo.gpus()]
    categories = (*gpus, gpus[0], "n3.nic0")  # a repeated category and one no flow uses
    src = CodedStrings(categories, rng.integers(0, len(gpus) + 1, 600))
    dst = CodedStrings(categories, rng.integers(0, len(gpus) + 1, 600))
    router = Router(topo)
    coded = router.route(src, dst, method=method, seed=7)
    named = router.route(list(src), list(dst), method=method, seed=7)
    assert coded.flow_link_indptr.tolist() == named.flow_link_indptr.tolist()
    assert coded.flow_link_indices.tolist() == named.flow_link_indices.tolist()


def test_a_coded_pair_without_a_route_is_named_by_its_first_flow():
    topo = apply_failures(build_cluster("dgx_h100", 2, figure="effective"), fail=["ib.*", "eth.*"])
    src = CodedStrings.from_strings(["n0.gpu0", "n0.gpu1", "n0.gpu0", "n0.gpu2", "n0.gpu2"])
    dst = CodedStrings.from_strings(["n0.gpu1", "n0.gpu2", "n0.gpu1", "n1.gpu0", "n1.gpu0"])
    with pytest.raises(NoRouteError, match="no route from 'n0.gpu2' to 'n1.gpu0'") as err:
        Router(topo).route(src, dst)
    assert err.value.pair == 3
    with pytest.raises(InputError, match="unknown node 'n9.gpu0'"):
        Router(topo).route(CodedStrings.from_strings(["n9.gpu0"]), CodedStrings.from_strings(["n0.gpu0"]))


@pytest.mark.parametrize("method", ["ecmp", "dmodk", "shortest"])
def test_repeated_pairs_route_as_each_pair_alone(method):
    # Router.route routes each distinct pair once and copies it to every flow of the pair:
    # the same routes as routing the flows one by one (the twin).
    topo = build_cluster("dgx_h100", 4, figure="effective", fabric="fat_tree")
    rng = np.random.default_rng(3)
    gpus = [topo.node_names[g] for g in topo.gpus()]
    src = [gpus[i] for i in rng.integers(0, len(gpus), 400)]
    dst = [gpus[i] for i in rng.integers(0, len(gpus), 400)]
    router = Router(topo)
    routes = router.route(src, dst, method=method, seed=5)
    assert routes.n_flows == 400 and len(set(zip(src, dst))) < 400
    for i in range(400):
        alone = router.route([src[i]], [dst[i]], method=method, seed=5)
        assert routes.route(i).tolist() == alone.route(0).tolist()


def test_a_pair_without_a_route_is_named_by_its_first_flow():
    # No network left between the servers: flows 3 and 4 share a pair that cannot be routed.
    topo = apply_failures(build_cluster("dgx_h100", 2, figure="effective"), fail=["ib.*", "eth.*"])
    src = ["n0.gpu0", "n0.gpu1", "n0.gpu0", "n0.gpu2", "n0.gpu2"]
    dst = ["n0.gpu1", "n0.gpu2", "n0.gpu1", "n1.gpu0", "n1.gpu0"]
    with pytest.raises(NoRouteError, match="no route from 'n0.gpu2' to 'n1.gpu0'") as err:
        Router(topo).route(src, dst)
    assert err.value.pair == 3
