"""Routing kernels against a slow twin that routes straight from the topology in plain Python.

The twin follows the rules of ``flowsim.routing``'s docstring word for word: breadth-first
search inside servers (first-found parent, neighbours in link-id order), exit NICs, and at each
switch the neighbours one hop closer to the destination's leaf, picked by the method.
"""

from collections import deque

import numpy as np
import pytest

from flowsim.errors import InputError
from flowsim.fabrics import build_cluster, fat_tree
from flowsim.hardware import LinkTier
from flowsim.presets import preset, preset_names
from flowsim.routes import Routes
from flowsim.routing import Router, validate_routes
from flowsim.topology import NETWORK_SWITCH_KINDS, NodeKind
from flowsim_kernels.routing import check_routes

SWITCHES = set(NETWORK_SWITCH_KINDS)


def mix32(x):
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    return (x >> 16) ^ x


def ecmp_hash(seed, a, b, c):
    h = mix32(((seed ^ (seed >> 32)) & 0xFFFFFFFF) ^ 0x9E3779B9)
    for v in (a, b, c):
        h = mix32(h ^ (v & 0xFFFFFFFF))
    return h


class TwinRouter:
    """Plain-Python routing of one pair at a time."""

    def __init__(self, topo):
        self.t = topo
        self.kind = [NodeKind(k) for k in topo.node_kind]
        self.arcs = {tier: [[] for _ in range(topo.n_nodes)] for tier in LinkTier}
        for link in range(topo.n_links):
            s, d = int(topo.link_src[link]), int(topo.link_dst[link])
            tier = LinkTier(topo.link_tier[link])
            self.arcs[tier][s].append((link, d))
            if topo.link_shared[link]:
                self.arcs[tier][d].append((link, s))
        for tier in LinkTier:
            for arcs in self.arcs[tier]:
                arcs.sort()
        self.endpoints = [
            n for n in range(topo.n_nodes) if self.kind[n] not in SWITCHES and self.arcs[LinkTier.SCALE_OUT][n]
        ]
        self.attached = {e: self.arcs[LinkTier.SCALE_OUT][e][0][1] for e in self.endpoints}
        self.component = self._components()
        leaves = sorted(set(self.attached.values()))
        per_leaf = {leaf: [e for e in self.endpoints if self.attached[e] == leaf] for leaf in leaves}
        width = max((len(v) for v in per_leaf.values()), default=1)
        self.dmodk = {e: leaves.index(self.attached[e]) * width + per_leaf[self.attached[e]].index(e)
                      for e in self.endpoints}

    def _components(self):
        label = {}
        for start in self.endpoints:
            if start in label:
                continue
            queue = deque([start])
            label[start] = start
            while queue:
                u = queue.popleft()
                for _, v in self.arcs[LinkTier.SCALE_OUT][u]:
                    if v not in label:
                        label[v] = start
                        queue.append(v)
        return label

    def bfs_path(self, tier, transit, s, d):
        parent = {s: None}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            if u != s and self.kind[u] not in transit:
                continue
            for link, v in self.arcs[tier][u]:
                if v not in parent:
                    parent[v] = (link, u)
                    queue.append(v)
        if d not in parent:
            return None
        path = []
        while parent[d] is not None:
            link, d = parent[d]
            path.append(link)
        return path[::-1]

    def host_path(self, s, d):
        return self.bfs_path(LinkTier.HOST, {NodeKind.PCIE_SWITCH, NodeKind.CPU}, s, d)

    def staging_memory(self, s):
        best = None
        server = self.t.node_server[s]
        for m in self.t.nodes_of_kind(NodeKind.HOST_MEMORY):
            if self.t.node_server[m] != server:
                continue
            path = self.host_path(s, int(m))
            if path is not None and (best is None or len(path) < best[0]):
                best = (len(path), int(m))
        return None if best is None else best[1]

    def server_path(self, s, d, gpudirect):
        if s == d:
            return []
        path = self.bfs_path(LinkTier.SCALE_UP, {NodeKind.NVSWITCH}, s, d)
        if path is not None:
            return path
        ks, kd = self.kind[s], self.kind[d]
        if ks == kd == NodeKind.GPU:
            path = self.through_one_gpu(s, d)
            if path is not None:
                return path
        staged = False
        if ks == kd == NodeKind.GPU:
            staged = not self.t.server_p2p[self.t.node_server[s]]
        if {ks, kd} == {NodeKind.GPU, NodeKind.NIC}:
            staged = not gpudirect
        if not staged:
            return self.host_path(s, d)
        # GPU to GPU: staged in the receiver's memory (NCCL's SHM_LOCALITY default).
        mem = self.staging_memory(d if ks == kd == NodeKind.GPU else s)
        first, second = self.host_path(s, mem), self.host_path(mem, d)
        return None if first is None or second is None else first + second

    def through_one_gpu(self, s, d):
        """Two NVLinks through the GPU linked to both whose links give the most (the lowest
        such GPU), each pair's first link; None where no GPU is."""
        def first_link(a, b):
            links = [link for link, v in self.arcs[LinkTier.SCALE_UP][a] if v == b]
            return min(links) if links else None

        best = None
        for mid in range(self.t.n_nodes):
            if self.kind[mid] != NodeKind.GPU or mid in (s, d):
                continue
            a, b = first_link(s, mid), first_link(mid, d)
            if a is None or b is None:
                continue
            rate = min(self.t.link_capacity_Bps[a], self.t.link_capacity_Bps[b])
            if best is None or rate > best[0]:
                best = (rate, [a, b])
        return None if best is None else best[1]

    def exit_of(self, node):
        if node in self.component:
            return node
        nic = int(self.t.node_nic[node])
        if nic >= 0 and nic in self.component:
            return nic
        nearest = self.nearest_endpoints(node, self.server_endpoints(node))
        return nearest[0] if nearest else None

    def server_endpoints(self, node):
        """Endpoints of the node's server that host links join to it, ascending."""
        server = self.t.node_server[node]
        return [
            e for e in self.endpoints
            if server >= 0 and self.t.node_server[e] == server and self.host_path(node, e) is not None
        ]

    def nearest_endpoints(self, node, endpoints):
        """Those of ``endpoints`` with the shortest host path from ``node``, ascending."""
        hops = {e: len(self.host_path(node, e)) for e in endpoints}
        return [e for e in endpoints if hops[e] == min(hops.values())]

    def choose(self, method, seed, s, d, at, key, stride, n):
        if method == "ecmp":
            return ecmp_hash(seed, s, d, at) % n
        if method == "dmodk":
            return key // stride % n
        return 0

    def pick_endpoint(self, node, component, method, seed, s, d, key):
        candidates = self.nearest_endpoints(
            node, [e for e in self.server_endpoints(node) if self.component[e] == component]
        )
        if not candidates:
            return None
        server = int(self.t.node_server[node])
        return candidates[self.choose(method, seed, s, d, server, key, 1, len(candidates))]

    def network_path(self, a, b, method, seed, s, d, rank):
        leaf = self.attached[b]
        switches = [n for n in range(self.t.n_nodes) if self.kind[n] in SWITCHES]
        row = {n: i for i, n in enumerate(switches)}
        dist = {leaf: 0}
        queue = deque([leaf])
        while queue:  # backwards from the destination's leaf, switches only
            u = queue.popleft()
            for link in np.flatnonzero(self.t.link_dst == u):
                v = int(self.t.link_src[link])
                if self.kind[v] in SWITCHES and v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        at = self.attached[a]
        path = [self.arcs[LinkTier.SCALE_OUT][a][0][0]]
        stride = 1
        while at != leaf:
            options = [(link, v) for link, v in self.arcs[LinkTier.SCALE_OUT][at]
                       if self.kind[v] in SWITCHES and dist.get(v, -1) == dist[at] - 1]
            n = len(options)
            pick = (self.choose(method, seed, s, d, row[at], self.dmodk[b], stride, n) + rank // stride % n) % n
            stride *= n
            path.append(options[pick][0])
            at = options[pick][1]
        down = [link for link, v in self.arcs[LinkTier.SCALE_OUT][leaf] if v == b]
        return path + down

    def route(self, s, d, method="ecmp", seed=0, gpudirect=True, rank=0):
        t = self.t
        if s == d:
            return []
        if t.node_server[s] >= 0 and t.node_server[s] == t.node_server[d]:
            return self.server_path(s, d, gpudirect)
        a, b = self.exit_of(s), self.exit_of(d)
        if self.component[a] != self.component[b]:
            other = self.pick_endpoint(d, self.component[a], method, seed, s, d, self.dmodk[b])
            if other is not None:
                b = other
            else:
                a = self.pick_endpoint(s, self.component[b], method, seed, s, d, self.dmodk[b])
        head = self.server_path(s, a, gpudirect) if a != s else []
        tail = self.server_path(b, d, gpudirect) if b != d else []
        return head + self.network_path(a, b, method, seed, s, d, rank) + tail


def compare(topo, src, dst, **options):
    router, twin = Router(topo), TwinRouter(topo)
    routes = router.route(src, dst, **options)
    for i, (s, d) in enumerate(zip(src, dst, strict=True)):
        expected = twin.route(int(s), int(d), **options)
        got = routes.route(i).tolist()
        assert got == expected, (topo.node_names[s], topo.node_names[d], [topo.link_names[x] for x in got])


def all_pairs(nodes):
    s, d = np.meshgrid(nodes, nodes, indexing="ij")
    return s.ravel(), d.ravel()


@pytest.mark.parametrize("name", [n for n in preset_names() if n != "gb200_nvl72"])
@pytest.mark.parametrize("p2p", [True, False])
@pytest.mark.parametrize("gpudirect", [True, False])
def test_server_paths_match_twin_on_presets(name, p2p, gpudirect):
    topo = preset(name, figure="nominal", p2p=p2p)
    src, dst = all_pairs(np.flatnonzero(topo.node_kind != NodeKind.NVSWITCH))  # NVSwitch: NVLink only
    compare(topo, src, dst, gpudirect=gpudirect)


def test_server_paths_match_twin_on_nvl72(rng):
    # Host links join a Grace to its two GPUs only: host pairs are taken inside one superchip.
    topo = preset("gb200_nvl72", figure="nominal", p2p=False)
    gpus = topo.gpus()
    src, dst = rng.choice(gpus, 300), rng.choice(gpus, 300)
    compare(topo, src, dst, gpudirect=False)
    for c in rng.choice(36, 4, replace=False):
        chip = [f"gpu{2 * c}", f"gpu{2 * c + 1}", f"nic{2 * c}", f"nic{2 * c + 1}", f"cpu{c}", f"mem{c}", f"fe{c}"]
        src, dst = all_pairs(topo.node_ids(chip))
        compare(topo, src, dst, gpudirect=False)


@pytest.mark.parametrize("method", ["ecmp", "dmodk", "shortest"])
@pytest.mark.parametrize("seed", [0, 7])
def test_network_paths_match_twin_on_a_fat_tree(method, seed):
    topo = fat_tree(4, figure="nominal")
    src, dst = all_pairs(topo.nodes_of_kind(NodeKind.NIC))
    compare(topo, src, dst, method=method, seed=seed)


@pytest.mark.parametrize("method", ["ecmp", "dmodk", "shortest"])
def test_cluster_routes_match_twin(method, rng):
    topo = build_cluster("dgx_h100", 40, figure="nominal", su_size=8, storage_targets=2)  # 5 units, 2 tiers
    nodes = np.concatenate([topo.gpus(), topo.nodes_of_kind(NodeKind.CPU), topo.nodes_of_kind(NodeKind.STORAGE)])
    src, dst = rng.choice(nodes, 300), rng.choice(nodes, 300)
    compare(topo, src, dst, method=method, seed=3)
    compare(topo, src[:50], dst[:50], method=method, seed=3, gpudirect=False)


@pytest.mark.parametrize("method", ["ecmp", "dmodk"])
def test_split_ranks_match_twin(method):
    topo = fat_tree(4, figure="nominal")
    twin = TwinRouter(topo)
    split = Router(topo).split(["host0", "host0", "host0"], ["host15", "host3", "host1"], max_paths=8, method=method)
    assert split.pair.tolist() == [0, 0, 0, 0, 1, 1, 2]  # 4 paths across pods, 2 in a pod, 1 on a leaf
    rank = [0, 1, 2, 3, 0, 1, 0]
    for part, (d, r) in enumerate(zip([15, 15, 15, 15, 3, 3, 1], rank, strict=True)):
        expected = twin.route(topo.node_id("host0"), topo.node_id(f"host{d}"), method=method, rank=r)
        assert split.routes.route(part).tolist() == expected


def reference_check(routes, topo, src, dst):
    """First flow whose links do not chain from its source to its destination, else -1."""
    for f in range(routes.n_flows):
        at = src[f]
        for link in routes.route(f):
            if topo.link_src[link] == at:
                at = topo.link_dst[link]
            elif topo.link_shared[link] and topo.link_dst[link] == at:
                at = topo.link_src[link]
            else:
                return f
        if at != dst[f]:
            return f
    return -1


def test_check_routes_matches_twin(rng):
    topo = preset("pcie_server", figure="nominal", p2p=False)
    src, dst = all_pairs(topo.gpus())
    routes = Router(topo).route(src, dst)
    for _ in range(30):
        indices = routes.flow_link_indices.copy()
        k = rng.integers(indices.size)
        indices[k] = rng.integers(topo.n_links)
        broken = Routes.from_csr(routes.flow_link_indptr, indices, topo.n_links)
        flow, _ = check_routes(
            broken.flow_link_indptr, broken.flow_link_indices, topo.link_src, topo.link_dst,
            topo.link_shared.astype(np.int64), src, dst,
        )
        assert flow == reference_check(broken, topo, src, dst)
        if flow >= 0:
            with pytest.raises(InputError, match=f"flow {flow} "):
                validate_routes(topo, broken, src, dst)
