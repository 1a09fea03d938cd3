"""Routing: (source, destination) node pairs to link lists, as a :class:`~flowsim.routes.Routes`.

Inside a server
    Over NVLink (a direct link, or through the NVSwitch) when NVLink joins the two nodes
    (GPU to GPU, or GPU to NVSwitch); otherwise over PCIe, through a PCIe switch or through
    the CPU root complex (and the inter-socket link).
    Without peer-to-peer (``Topology.server_p2p``) GPU copies are staged in host memory:
    GPU -> switch -> root complex -> host memory -> root complex -> switch -> GPU, crossing
    the memory link twice. The memory is the one nearest the receiving GPU, where NCCL's SHM
    transport puts its buffer (``NCCL_SHM_LOCALITY``, receiver side by default; docs/hardware.md
    §3.3), so a copy between sockets crosses the inter-socket link once, before the memory.
    GPU <-> NIC traffic goes peer-to-peer (GPUDirect RDMA) or, with ``gpudirect=False``, is
    staged the same way, through the memory nearest the source. Host paths are breadth-first
    shortest paths that pass only through PCIe switches and CPUs.
    Two nodes of one server that neither NVLink nor host links join (the Grace CPUs of two
    GB200 superchips) have no route.
Between servers
    Source -> its exit NIC -> switches -> the destination's NIC -> destination. A node's exit
    is itself (a NIC or storage target on the network), the NIC it names (a GPU's rail NIC,
    a CPU's front-end port), or the NIC of its server nearest to it over host links. When the
    two exits are on different networks (a GPU's InfiniBand rail, a storage target on
    Ethernet), another NIC of one side's server on the other's network is used, one of those
    nearest to that side's node over host links (a front-end port on the GPU's own socket,
    not one across the inter-socket link), picked like a next hop (below) when several are
    as near. Among the switches one hop closer to the destination's leaf,
    ``method`` picks:

    ``"shortest"``
        always the first (lowest link id): deterministic, and maximally unbalanced.
    ``"ecmp"``
        a hash of (seed, source, destination, switch): per-flow ECMP as switches do it.
    ``"dmodk"``
        D-mod-k: the destination's key ``d`` (its leaf and port number) picks
        ``(d // s) % n`` where ``n`` is the choice count at this hop and ``s`` the product of
        the counts at earlier hops; on a fat-tree this is destination-mod-k routing, which is
        contention-free for shift permutations.
    ``"auto"`` (the default)
        each network as its switches route: D-mod-k where the destination's cable is
        InfiniBand (``ib_*``), ECMP where it is Ethernet. InfiniBand switches forward by
        the destination's LID along tables the subnet manager computes, "for each target LID
        ... what port should be used to get to that LID", and the fat-tree routing engine
        recommended for fat-trees "optimizes routing for a congestion-free 'shift'
        communication pattern" (NVIDIA SM / OpenSM routing engines, docs/hardware.md §4.5);
        Ethernet switches hash each flow's headers onto one of the equal-cost next hops.
To and from network switches
    A pair that ends at a switch (an in-network reduction's messages, IB SHARP) goes from a
    node of a server to the NIC it leaves through, over that NIC's cable to its switch, and
    on over one more cable where the switch is not that one; between two switches over their
    cable; back the same way.
Fluid split
    :meth:`Router.split` spreads each pair over up to ``max_paths`` distinct equal-cost
    network paths, each part a flow with an equal share of the bytes.

Every route returned is checked to be a contiguous walk from its source to its destination.
Build a :class:`Router` once per topology (it holds the search tables) and call it for as many
batches of pairs as needed; :func:`route` is the one-shot form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from flowsim.errors import InputError, whole_number
from flowsim.hardware import LinkTier, is_infiniband
from flowsim.routes import Routes
from flowsim.strings import CodedStrings
from flowsim.topology import NETWORK_SWITCH_KINDS, NodeKind, Topology
from flowsim_kernels import routing as kernel
from flowsim_kernels.csr import csr_gather_rows
from flowsim_kernels.progress import deferred_interrupt

__all__ = [
    "METHODS",
    "NoRouteError",
    "Router",
    "SplitRoutes",
    "describe_method",
    "route",
    "split_route",
    "validate_routes",
]

#: Routing methods between servers.
METHODS = {
    "auto": kernel.METHOD_AUTO,
    "ecmp": kernel.METHOD_ECMP,
    "dmodk": kernel.METHOD_DMODK,
    "shortest": kernel.METHOD_SHORTEST,
}

#: One node (name or id) or a sequence of them.
Nodes = str | int | Sequence[str | int] | np.ndarray


#: Flows :meth:`Router.route` looks at to tell whether their pairs repeat enough to route
#: each distinct pair once.
_REPEAT_SAMPLE = 4096


class NoRouteError(InputError):
    """A pair of nodes that no route joins; ``pair`` is its index in the pairs routed, so that
    a caller can name the flow."""

    def __init__(self, message: str, pair: int) -> None:
        super().__init__(message)
        self.pair = pair


@dataclass(frozen=True)
class SplitRoutes:
    """Pairs split over equal-cost paths: one flow per part.

    Attributes
    ----------
    routes : Routes
        One route per part.
    pair : int64[n_parts]
        Index of the (source, destination) pair each part belongs to; parts of a pair are
        consecutive.
    share : float64[n_parts]
        Fraction of its pair's bytes each part carries; the shares of a pair sum to 1.
    """

    routes: Routes
    pair: np.ndarray
    share: np.ndarray


def _group(rows: np.ndarray, n_rows: int, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """CSR grouping: row pointers, then each column's entries sorted by row (stable)."""
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return (indptr, *(np.asarray(c, dtype=np.int64)[order] for c in columns))


class Router:
    """Routing tables of one topology; call :meth:`route` or :meth:`split` per batch.

    Parameters
    ----------
    topology : Topology
        Its NVLink and host links must stay inside servers, and every network endpoint (a NIC
        or storage target with InfiniBand / Ethernet links) must hang off exactly one switch.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        t = topology
        self._check_links()
        self._linked = np.zeros(t.n_nodes, dtype=bool)
        self._linked[t.link_src] = True
        self._linked[t.link_dst] = True
        role = np.full(t.n_nodes, kernel.ROLE_OTHER, dtype=np.int64)
        role[t.node_kind == NodeKind.GPU] = kernel.ROLE_GPU
        role[t.node_kind == NodeKind.NIC] = kernel.ROLE_NIC
        network_link = t.link_tier == LinkTier.SCALE_OUT
        touches_network = np.zeros(t.n_nodes, dtype=bool)
        touches_network[t.link_src[network_link]] = True
        touches_network[t.link_dst[network_link]] = True
        endpoint = touches_network & ~np.isin(t.node_kind, NETWORK_SWITCH_KINDS)
        servers, fallback_exit = self._server_tables(endpoint)
        network = self._network_tables(endpoint)
        # A node leaves through itself (an endpoint), its own NIC, or the endpoint of its
        # server nearest to it over host links (the first of the nearest).
        node_exit = np.where(endpoint, np.arange(t.n_nodes), -1)
        own_nic = (node_exit < 0) & (t.node_nic >= 0)
        node_exit[own_nic] = np.where(endpoint[t.node_nic[own_nic]], t.node_nic[own_nic], -1)
        node_exit = np.where(node_exit < 0, fallback_exit, node_exit)
        self._tables = kernel.RoutingTables(
            node_role=role,
            node_server=t.node_server.astype(np.int64),
            node_exit=node_exit.astype(np.int64),
            **servers,
            **network,
        )

    # --- construction -------------------------------------------------------------------

    def _check_links(self) -> None:
        t = self.topology
        inside = t.link_tier != LinkTier.SCALE_OUT
        src_server = t.node_server[t.link_src]
        bad = np.flatnonzero(inside & ((src_server < 0) | (src_server != t.node_server[t.link_dst])))
        if bad.size:
            raise InputError(
                f"link {t.link_names[int(bad[0])]!r} is an NVLink or host link between different servers "
                "(or outside any); such links must stay inside one server"
            )
        bad = np.flatnonzero(~inside & t.link_shared)
        if bad.size:
            raise InputError(f"network link {t.link_names[int(bad[0])]!r} is shared; network links are directed")

    def _server_tables(self, endpoint: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Local numbering, classes of identical servers and their search tables; and for
        each node the network endpoint of its server nearest to it over host links (-1)."""
        t = self.topology
        n_servers = t.n_servers
        in_server = t.node_server >= 0
        nodes = np.flatnonzero(in_server)
        node_indptr, server_nodes = _group(t.node_server[nodes], n_servers, nodes)
        node_local = np.full(t.n_nodes, -1, dtype=np.int64)
        sizes = np.diff(node_indptr)
        node_local[server_nodes] = np.arange(server_nodes.size) - np.repeat(node_indptr[:-1], sizes)
        internal = np.flatnonzero(t.link_tier != LinkTier.SCALE_OUT)
        link_indptr, server_links = _group(t.node_server[t.link_src[internal]], n_servers, internal)
        m = int(sizes.max()) if n_servers else 1
        k = int(np.diff(link_indptr).max()) if n_servers else 1
        classes: dict[bytes, int] = {}
        server_class = np.empty(n_servers, dtype=np.int64)
        tables: list[tuple[np.ndarray, ...]] = []
        for s in range(n_servers):
            local_nodes = server_nodes[node_indptr[s] : node_indptr[s + 1]]
            links = server_links[link_indptr[s] : link_indptr[s + 1]]
            structure = np.concatenate(
                [
                    [local_nodes.size],
                    t.node_kind[local_nodes],
                    node_local[t.link_src[links]],
                    node_local[t.link_dst[links]],
                    t.link_tier[links],
                    t.link_shared[links],
                    endpoint[local_nodes],
                ]
            ).astype(np.int64)
            key = structure.tobytes()
            if key not in classes:
                classes[key] = len(tables)
                tables.append(self._class_tables(local_nodes, links, node_local, m, k, endpoint))
            server_class[s] = classes[key]
        if not tables:
            no_paths = np.full((m, m), -1, dtype=np.int64)
            tables.append((no_paths,) * 4 + (np.zeros(k, dtype=np.int64),) + (np.full(m, -1, dtype=np.int64),) * 2)
        nvl_parent, nvl_depth, host_parent, host_depth, end_sum, staging, exit_local = (
            np.stack(a) for a in zip(*tables, strict=True)
        )
        fallback = np.full(t.n_nodes, -1, dtype=np.int64)
        local = exit_local[server_class[t.node_server[nodes]], node_local[nodes]]
        fallback[nodes] = np.where(local >= 0, server_nodes[node_indptr[t.node_server[nodes]] + local], -1)
        ends = np.flatnonzero(endpoint & in_server)
        endpoint_indptr, server_endpoints = _group(t.node_server[ends], n_servers, ends)
        server_tables = {
            "node_local": node_local,
            "server_class": server_class,
            "server_p2p": t.server_p2p.astype(np.int64),
            "server_link_indptr": link_indptr,
            "server_links": server_links,
            "server_endpoint_indptr": endpoint_indptr,
            "server_endpoints": server_endpoints,
            "nvl_parent": nvl_parent,
            "nvl_depth": nvl_depth,
            "host_parent": host_parent,
            "host_depth": host_depth,
            "link_end_sum": end_sum,
            "staging": staging,
        }
        return server_tables, fallback

    def _class_tables(
        self, local_nodes: np.ndarray, links: np.ndarray, node_local: np.ndarray, m: int, k: int, endpoint: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Search trees over NVLink and host links, end sums of the links, staging memories
        and nearest network endpoints (local ids)."""
        t = self.topology
        kind = t.node_kind[local_nodes]
        src = node_local[t.link_src[links]]
        dst = node_local[t.link_dst[links]]
        ordinal = np.arange(links.size, dtype=np.int64)
        result = []
        for tier, transit_kinds in (
            (LinkTier.SCALE_UP, [NodeKind.NVSWITCH]),
            (LinkTier.HOST, [NodeKind.PCIE_SWITCH, NodeKind.CPU]),
        ):
            use = t.link_tier[links] == tier
            back = use & t.link_shared[links]
            rows = np.concatenate([src[use], dst[back]])
            cols = np.concatenate([dst[use], src[back]])
            via = np.concatenate([ordinal[use], ordinal[back]])
            # Try neighbours in link order so ties break the same way in every server.
            order = np.argsort(via, kind="stable")
            indptr, adj_node, adj_link = _group(rows[order], local_nodes.size, cols[order], via[order])
            parent = np.full((m, m), -1, dtype=np.int64)
            depth = np.full((m, m), -1, dtype=np.int64)
            kernel.server_bfs(
                indptr, adj_node, adj_link, np.isin(kind, transit_kinds).astype(np.int64),
                parent[: local_nodes.size, : local_nodes.size], depth[: local_nodes.size, : local_nodes.size],
            )
            if tier == LinkTier.SCALE_UP:
                _through_one_gpu(kind, rows, cols, via, t.link_capacity_Bps[links[via]], parent, depth)
            result += [parent, depth]
        host_depth = result[3]
        memories = np.flatnonzero(kind == NodeKind.HOST_MEMORY)
        staging = np.full(m, -1, dtype=np.int64)
        if memories.size:
            hops = host_depth[: local_nodes.size, memories]
            nearest = np.argmin(np.where(hops < 0, m, hops), axis=1)  # ties: lowest local id
            reachable = hops[np.arange(local_nodes.size), nearest] >= 0
            staging[: local_nodes.size] = np.where(reachable, memories[nearest], -1)
        end_sum = np.zeros(k, dtype=np.int64)
        end_sum[: links.size] = src + dst
        exit_local = np.full(m, -1, dtype=np.int64)
        ends = np.flatnonzero(endpoint[local_nodes])
        if ends.size:
            hops = host_depth[: local_nodes.size, ends]
            nearest = np.argmin(np.where(hops < 0, m, hops), axis=1)  # ties: the first
            reachable = hops[np.arange(local_nodes.size), nearest] >= 0
            exit_local[: local_nodes.size] = np.where(reachable, ends[nearest], -1)
        return (*result, end_sum, staging, exit_local)

    def _network_tables(self, endpoint: np.ndarray) -> dict[str, np.ndarray]:
        """Endpoint attachments, switch adjacency, distances to every leaf, networks."""
        t = self.topology
        n = t.n_nodes
        is_switch = np.isin(t.node_kind, NETWORK_SWITCH_KINDS)
        network = t.link_tier == LinkTier.SCALE_OUT
        switches = np.flatnonzero(is_switch)
        switch_row = np.full(n, -1, dtype=np.int64)
        switch_row[switches] = np.arange(switches.size)

        up = np.flatnonzero(network & endpoint[t.link_src])
        down = np.flatnonzero(network & endpoint[t.link_dst])
        for links, end, other, what in ((up, t.link_src, t.link_dst, "to"), (down, t.link_dst, t.link_src, "from")):
            bad = links[~is_switch[other[links]]]
            if bad.size:
                raise InputError(
                    f"network link {t.link_names[int(bad[0])]!r} joins two endpoints; endpoints attach to switches"
                )
            counts = np.bincount(end[links], minlength=n)
            bad = np.flatnonzero(endpoint & (counts != 1))
            if bad.size:
                i = int(bad[0])
                raise InputError(
                    f"network endpoint {t.node_names[i]!r} has {int(counts[i])} links {what} switches; "
                    "endpoints must be single-homed (one port each)"
                )
        up_link = np.full(n, -1, dtype=np.int64)
        up_link[t.link_src[up]] = up
        down_link = np.full(n, -1, dtype=np.int64)
        down_link[t.link_dst[down]] = down
        attached = np.full(n, -1, dtype=np.int64)
        attached[t.link_src[up]] = t.link_dst[up]
        fed_by = np.full(n, -1, dtype=np.int64)
        fed_by[t.link_dst[down]] = t.link_src[down]
        bad = np.flatnonzero(attached != fed_by)
        if bad.size:
            raise InputError(
                f"network endpoint {t.node_names[int(bad[0])]!r} sends to one switch and receives from another"
            )

        ends = np.flatnonzero(endpoint)
        leaves, leaf_of_end = np.unique(attached[ends], return_inverse=True)
        leaf_col = np.full(n, -1, dtype=np.int64)
        leaf_col[ends] = leaf_of_end
        endpoint_switch_row = np.full(n, -1, dtype=np.int64)
        endpoint_switch_row[ends] = switch_row[attached[ends]]
        # D-mod-k key: leaf number x ports per leaf + port number on the leaf (node order).
        per_leaf = np.bincount(leaf_of_end, minlength=leaves.size)
        by_leaf = np.argsort(leaf_of_end, kind="stable")
        port = np.empty(ends.size, dtype=np.int64)
        port[by_leaf] = np.arange(ends.size) - (np.cumsum(per_leaf) - per_leaf)[leaf_of_end[by_leaf]]
        dmodk = np.full(n, -1, dtype=np.int64)
        dmodk[ends] = leaf_of_end * (int(per_leaf.max()) if per_leaf.size else 1) + port
        # "auto": an endpoint's cable says which network it is on, and so how its switches route.
        method = np.full(n, -1, dtype=np.int64)
        method[ends] = np.where(_infiniband(t, up_link[ends]), kernel.METHOD_DMODK, kernel.METHOD_ECMP)

        between = np.flatnonzero(network & is_switch[t.link_src] & is_switch[t.link_dst])
        tail, head = switch_row[t.link_src[between]], switch_row[t.link_dst[between]]
        adj_indptr, adj_row, adj_link = _group(tail, switches.size, head, between)
        rev_indptr, rev_row = _group(head, switches.size, tail)
        dist = np.empty((leaves.size, switches.size), dtype=np.int64)
        kernel.leaf_distances(rev_indptr, rev_row, switch_row[leaves], dist)
        next_hops = np.empty_like(dist)
        kernel.next_hop_counts(adj_indptr, adj_row, dist, next_hops)

        graph = coo_matrix((np.ones(network.sum()), (t.link_src[network], t.link_dst[network])), shape=(n, n))
        _, label = connected_components(graph, directed=False)
        component = np.where(endpoint, label, -1).astype(np.int64)
        return {
            "endpoint_component": component,
            "endpoint_switch_row": endpoint_switch_row,
            "endpoint_leaf_col": leaf_col,
            "endpoint_up_link": up_link,
            "endpoint_down_link": down_link,
            "endpoint_dmodk_key": dmodk,
            "endpoint_method": method,
            "switch_adj_indptr": adj_indptr,
            "switch_adj_row": adj_row,
            "switch_adj_link": adj_link,
            "leaf_dist": dist,
            "next_hops": next_hops,
        }

    # --- routing ------------------------------------------------------------------------

    def _pairs(self, src: Nodes, dst: Nodes) -> tuple[np.ndarray, np.ndarray]:
        # Fresh writable copies: read-only arrays would compile the kernels a second time.
        s = np.array(self.topology.node_ids(_node_list(src, "src")), dtype=np.int64)
        d = np.array(self.topology.node_ids(_node_list(dst, "dst")), dtype=np.int64)
        if s.shape != d.shape:
            raise InputError(f"{s.size} sources but {d.size} destinations")
        return s, d

    def _pair_exits(self, s: np.ndarray, d: np.ndarray, method: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Exit and entry endpoints of each pair (-1 for pairs inside one server)."""
        exit_src = np.empty(s.size, dtype=np.int64)
        exit_dst = np.empty(s.size, dtype=np.int64)
        kernel.route_exits(self._tables, s, d, method, seed, exit_src, exit_dst)
        self._raise_if_missing(exit_src == kernel.NO_EXIT, s, d, "no network joins their servers")
        return exit_src, exit_dst

    def _staged_without_memory(self, a: int, b: int, gpudirect: bool) -> bool:
        """Whether traffic from ``a`` to ``b`` (one server, no NVLink path) must be staged in
        host memory, as :func:`flowsim_kernels.routing.server_paths` does, and has none."""
        t, kind = self.topology, self.topology.node_kind
        if a == b or t.node_server[a] < 0 or t.node_server[a] != t.node_server[b]:
            return False
        pair = {int(kind[a]), int(kind[b])}
        between_gpus = pair == {NodeKind.GPU}
        staged = (between_gpus and not t.server_p2p[t.node_server[a]]) or (
            pair == {NodeKind.GPU, NodeKind.NIC} and not gpudirect
        )
        tables = self._tables
        near = b if between_gpus else a
        return staged and tables.staging[tables.server_class[t.node_server[a]], tables.node_local[near]] < 0

    def _raise_if_missing(self, missing: np.ndarray, s: np.ndarray, d: np.ndarray, why: str) -> None:
        found = np.flatnonzero(missing)
        if found.size:
            i = int(found[0])
            names = self.topology.node_names
            unlinked = [names[n] for n in (s[i], d[i]) if not self._linked[n]]
            if unlinked:  # a failed node (flowsim.failures), say
                why = f"{unlinked[0]!r} has no links"
            raise NoRouteError(f"no route from {names[s[i]]!r} to {names[d[i]]!r}: {why}", i)

    def _routes(self, s, d, rank, method, seed, gpudirect) -> Routes:
        """Routes in three segments per pair: head inside the source's server (to its exit
        NIC, or to the destination if it is in the same server), network, tail."""
        t = self._tables
        exit_src, exit_dst = self._pair_exits(s, d, method, seed)
        cross = exit_src >= 0
        head_to = np.where(cross, exit_src, d)
        tail_from = np.where(cross, exit_dst, d)
        head, network, tail = (np.empty(s.size, dtype=np.int64) for _ in range(3))
        none = np.empty(0, dtype=np.int64)
        kernel.server_paths(t, s, head_to, gpudirect, False, none, none, head)
        kernel.network_paths(t, exit_src, exit_dst, s, d, rank, method, seed, False, none, none, network)
        kernel.server_paths(t, tail_from, d, gpudirect, False, none, none, tail)
        missing = (head < 0) | (network < 0) | (tail < 0)
        if missing.any():
            i = int(np.argmax(missing))
            segment = (s[i], head_to[i]) if head[i] < 0 else (tail_from[i], d[i]) if tail[i] < 0 else None
            why = "no NVLink, host or network path joins them"
            if segment is not None and self._staged_without_memory(*segment, gpudirect):
                names, kind = self.topology.node_names, self.topology.node_kind
                between_gpus = kind[segment[0]] == kind[segment[1]] == NodeKind.GPU
                why = (
                    f"{names[segment[0]]!r} to {names[segment[1]]!r} is staged through host memory (no "
                    f"{'peer-to-peer' if between_gpus else 'GPUDirect'}) and no host memory is reachable over "
                    "host links"
                )
            self._raise_if_missing(missing, s, d, why)
        indptr = np.zeros(s.size + 1, dtype=np.int64)
        np.cumsum(head + network + tail, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        at = indptr[:-1]
        kernel.server_paths(t, s, head_to, gpudirect, True, at, indices, head)
        at = at + head
        kernel.network_paths(t, exit_src, exit_dst, s, d, rank, method, seed, True, at, indices, network)
        kernel.server_paths(t, tail_from, d, gpudirect, True, at + network, indices, tail)
        routes = Routes.from_csr(indptr, indices, self.topology.n_links)
        validate_routes(self.topology, routes, s, d)
        return routes

    def route(
        self, src: Nodes, dst: Nodes, *, method: str = "auto", seed: int = 0, gpudirect: bool = True
    ) -> Routes:
        """One route per (``src[i]``, ``dst[i]``) pair.

        Parameters
        ----------
        src, dst : sequence of node names or ids, or int array
            Pairs to route; a pair with ``src == dst`` gets an empty route. A single name
            or id on both sides is one pair.
        method : {"auto", "ecmp", "dmodk", "shortest"}
            Next-hop choice between servers (see the module docstring).
        seed : int
            ECMP hash seed (>= 0); the same seed gives the same routes.
        gpudirect : bool
            GPU <-> NIC traffic peer-to-peer (GPUDirect RDMA) or staged in host memory.

        Returns
        -------
        Routes
            Flow ``i`` is pair ``i``; checked contiguous from source to destination.
        """
        code, seed = _method(method), _seed(seed)
        # A route depends on its pair alone: each distinct pair is routed once and copied to
        # the flows that share it (a training step's 3.3 million flows have a few thousand).
        coded = _coded_pairs(self.topology, src, dst)
        if coded is not None:
            # Endpoints given as coded columns (a workload's): the distinct pairs come from
            # the codes in a table, with no per-flow node ids and no sort.
            s, d, inverse = coded
            try:
                distinct = self._distinct(s, d, code, seed, gpudirect)
            except NoRouteError as err:
                raise NoRouteError(str(err), int(np.argmax(inverse == err.pair))) from None
            return self._copied(distinct, inverse)
        s, d = self._pairs(src, dst)
        # Pairs that hardly repeat (an all-to-all's, random hosts') skip the sort: a sample
        # of them says which.
        keys = s * self.topology.n_nodes + d
        sample = keys[:: max(1, keys.size // _REPEAT_SAMPLE)]
        if np.unique(sample).size > 0.9 * sample.size:
            return self._distinct(s, d, code, seed, gpudirect)
        pairs, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        del keys
        s, d = s[first], d[first]  # the flows' own let go: a million flows' worth
        try:
            distinct = self._distinct(s, d, code, seed, gpudirect)
        except NoRouteError as err:
            raise NoRouteError(str(err), int(first[err.pair])) from None
        del pairs, first, s, d
        return self._copied(distinct, inverse.ravel())

    def _copied(self, distinct: Routes, inverse: np.ndarray) -> Routes:
        """Flow ``i``'s route: ``distinct``'s route ``inverse[i]``."""
        n_flows = inverse.size
        indptr = np.zeros(n_flows + 1, dtype=np.int64)
        np.cumsum(distinct.hop_counts()[inverse], out=indptr[1:])
        with deferred_interrupt():  # a kernel that returns arrays: see flowsim_kernels.progress
            indices = csr_gather_rows(distinct.flow_link_indptr, distinct.flow_link_indices, inverse, indptr)
        # Frozen, the arrays are the routes' own (Routes.from_csr copies writeable ones).
        indptr.flags.writeable = False
        indices.flags.writeable = False
        return Routes.from_csr(indptr, indices, self.topology.n_links)

    def _distinct(self, s: np.ndarray, d: np.ndarray, method: int, seed: int, gpudirect: bool) -> Routes:
        """Routes of the pairs (``s[i]``, ``d[i]``), checked."""
        kind = self.topology.node_kind
        at_switch = np.isin(kind[s], NETWORK_SWITCH_KINDS) | np.isin(kind[d], NETWORK_SWITCH_KINDS)
        if not at_switch.any():
            return self._routes(s, d, np.zeros(s.size, dtype=np.int64), method, seed, gpudirect)
        return self._routes_with_switches(s, d, at_switch, method, seed, gpudirect)

    def _routes_with_switches(self, s, d, at_switch, method, seed, gpudirect) -> Routes:
        """Routes where some pairs end at a network switch (an in-network reduction's
        messages, :func:`flowsim.collectives.nvls_sharp_all_reduce`): from a node of a server
        to its NIC inside the server, then the NIC's cable to its switch and, where the other
        end is not that switch, one cable on; between two switches, their cable. Other pairs
        route as usual."""
        t = self.topology
        plain = np.flatnonzero(~at_switch)
        routed = self._routes(s[plain], d[plain], np.zeros(plain.size, dtype=np.int64), method, seed, gpudirect)
        switch_kinds = set(NETWORK_SWITCH_KINDS)
        # Each flow's row among the plain routes, then the routes at switches, each pair once:
        # the pairs may come here repeated (a reduction's every chunk and slice, when a sample
        # of all the pairs said they hardly repeat). The last row is empty: a marker at a switch.
        row = np.empty(s.size, dtype=np.int64)
        row[plain] = np.arange(plain.size)
        found: dict[tuple[int, int], int] = {}
        extra: list[np.ndarray] = []
        for i in np.flatnonzero(at_switch).tolist():
            a, b = int(s[i]), int(d[i])
            if a == b:
                row[i] = -1
                continue
            if (a, b) not in found:
                try:
                    if t.node_kind[a] in switch_kinds and t.node_kind[b] in switch_kinds:
                        extra.append(np.array([t.link_between(a, b)], dtype=np.int64))
                    elif t.node_kind[b] in switch_kinds:
                        extra.append(self._to_switch(a, b, gpudirect))
                    else:
                        extra.append(self._from_switch(a, b, gpudirect))
                except InputError as err:
                    raise NoRouteError(f"no route from {t.node_names[a]!r} to {t.node_names[b]!r}: {err}",
                                       i) from None
                found[(a, b)] = plain.size + len(extra) - 1
            row[i] = found[(a, b)]
        row[row < 0] = plain.size + len(extra)
        extra.append(np.empty(0, dtype=np.int64))
        extra_lengths = np.fromiter(map(len, extra), dtype=np.int64, count=len(extra))
        rows_indptr = np.concatenate([routed.flow_link_indptr,
                                      routed.flow_link_indptr[-1] + np.cumsum(extra_lengths)])
        rows_indices = np.concatenate([routed.flow_link_indices, *extra])
        indptr = np.zeros(s.size + 1, dtype=np.int64)
        np.cumsum(np.diff(rows_indptr)[row], out=indptr[1:])
        indices = csr_gather_rows(rows_indptr, rows_indices, row, indptr)
        routes = Routes.from_csr(indptr, indices, t.n_links)
        validate_routes(t, routes, s, d)
        return routes

    def _nic_and_switch(self, node: int) -> tuple[int, int, int]:
        """The NIC ``node`` leaves its server through, the link from it to its switch (a
        cable, or the NIC's own direction of a shared one) and that switch."""
        t = self.topology
        nic = node if t.node_kind[node] == NodeKind.NIC else int(t.node_nic[node])
        if nic < 0:
            raise InputError(f"{t.node_names[node]!r} leaves its server through no NIC")
        up = [int(link) for link in t.links_from(nic) if t.node_kind[t.link_dst[link]] in NETWORK_SWITCH_KINDS
              or (t.link_shared[link] and t.node_kind[t.link_src[link]] in NETWORK_SWITCH_KINDS)]
        if not up:
            raise InputError(f"NIC {t.node_names[nic]!r} has no cable to a switch")
        leaf = int(t.link_dst[up[0]]) if t.link_src[up[0]] == nic else int(t.link_src[up[0]])
        return nic, up[0], leaf

    def _to_switch(self, node: int, switch: int, gpudirect: bool) -> np.ndarray:
        t = self.topology
        nic, up, leaf = self._nic_and_switch(node)
        inside = self.route([node], [nic], gpudirect=gpudirect).route(0) if nic != node else np.empty(0, np.int64)
        onward = [] if leaf == switch else [t.link_between(leaf, switch)]
        return np.array([*inside.tolist(), up, *onward], dtype=np.int64)

    def _from_switch(self, switch: int, node: int, gpudirect: bool) -> np.ndarray:
        t = self.topology
        nic, up, leaf = self._nic_and_switch(node)
        down = up if t.link_shared[up] else t.link_between(leaf, nic)
        before = [] if leaf == switch else [t.link_between(switch, leaf)]
        inside = self.route([nic], [node], gpudirect=gpudirect).route(0) if nic != node else np.empty(0, np.int64)
        return np.array([*before, down, *inside.tolist()], dtype=np.int64)

    def host_hops(self, src: str | int, dst: Nodes) -> np.ndarray:
        """Hops from ``src`` to each of ``dst`` over host links, as host paths take them
        (through PCIe switches and CPUs only); int64, -1 where none joins them or the two are
        not in one server."""
        s = int(self.topology.node_ids(_node_list(src, "src"))[0])
        d = self.topology.node_ids(_node_list(dst, "dst"))
        t = self._tables
        server = int(self.topology.node_server[s])
        hops = np.full(d.size, -1, dtype=np.int64)
        if server < 0:
            return hops
        same = self.topology.node_server[d] == server
        hops[same] = t.host_depth[t.server_class[server], t.node_local[s], t.node_local[d[same]]]
        return hops

    def equal_cost_paths(self, src: Nodes, dst: Nodes, *, method: str = "auto", seed: int = 0) -> np.ndarray:
        """Number of equal-cost network paths of each pair (1 inside a server), int64."""
        code, seed = _method(method), _seed(seed)
        s, d = self._pairs(src, dst)
        exit_src, exit_dst = self._pair_exits(s, d, code, seed)
        counts = np.empty(s.size, dtype=np.int64)
        kernel.equal_cost_paths(self._tables, exit_src, exit_dst, counts)
        return counts

    def split(
        self,
        src: Nodes,
        dst: Nodes,
        *,
        max_paths: int,
        method: str = "auto",
        seed: int = 0,
        gpudirect: bool = True,
    ) -> SplitRoutes:
        """Fluid split: each pair over ``min(max_paths, equal-cost paths)`` distinct paths.

        Part ``r`` of a pair takes path rank ``r``: rank 0 is the path :meth:`route` gives,
        and ranks below the pair's equal-cost path count are distinct paths. Each part
        carries an equal share of its pair's bytes.
        """
        max_paths = whole_number("max_paths", max_paths)
        code, seed = _method(method), _seed(seed)
        s, d = self._pairs(src, dst)
        parts = np.minimum(self.equal_cost_paths(s, d, method=method, seed=seed), max_paths)
        pair = np.repeat(np.arange(s.size, dtype=np.int64), parts)
        rank = np.arange(pair.size, dtype=np.int64) - np.repeat(np.cumsum(parts) - parts, parts)
        routes = self._routes(s[pair], d[pair], rank, code, seed, gpudirect)
        share = 1.0 / parts[pair].astype(np.float64)
        pair.flags.writeable = False
        share.flags.writeable = False
        return SplitRoutes(routes, pair, share)


#: Most (source, destination) category pairs routed through a table of their codes (4 bytes
#: each): 2,000 distinct sources by 2,000 destinations.
_PAIR_TABLE_LIMIT = 4_000_000


def _coded_pairs(topology: Topology, src: Nodes, dst: Nodes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """For endpoints given as coded columns (:class:`~flowsim.strings.CodedStrings`, as a
    workload holds them): the source and destination node ids of the distinct pairs that
    occur, and each flow's pair (int64); None for other input, or where a table of every
    category pair would be too large (:data:`_PAIR_TABLE_LIMIT`)."""
    if not (isinstance(src, CodedStrings) and isinstance(dst, CodedStrings)):
        return None
    n_src, n_dst = len(src.categories), len(dst.categories)
    if len(src) != len(dst):
        raise InputError(f"{len(src)} sources but {len(dst)} destinations")
    if n_src * n_dst > _PAIR_TABLE_LIMIT:
        return None
    src_ids = topology.node_ids(list(src.categories))
    dst_ids = topology.node_ids(list(dst.categories))
    flat = src.codes.astype(np.int32) * np.int32(n_dst) + dst.codes.astype(np.int32)
    present = np.zeros(n_src * n_dst, dtype=bool)
    present[flat] = True
    keys = np.flatnonzero(present)
    number = np.empty(n_src * n_dst, dtype=np.int64)
    number[keys] = np.arange(keys.size, dtype=np.int64)
    inverse = number[flat]
    return src_ids[keys // n_dst], dst_ids[keys % n_dst], inverse


def _node_list(nodes: Nodes, what: str) -> Iterable[str | int] | np.ndarray:
    """``nodes``, with a lone node name or id as a list of one: iterating a name would give
    its letters."""
    if isinstance(nodes, (str, int, np.integer)):
        return [nodes]
    if not isinstance(nodes, Iterable):
        raise InputError(f"{what} must be a node name or id, or a sequence of them, got {nodes!r}")
    return nodes


def describe_method(topology: Topology, method: str) -> str:
    """``method`` as a table header names it: ``"auto"`` with what it takes on the
    topology's networks (by their cables' technology, as :class:`Router` decides).

    >>> from flowsim.fabrics import fat_tree
    >>> ib, eth = fat_tree(4, figure="nominal"), fat_tree(4, figure="nominal", technology="eth400g")
    >>> describe_method(ib, "auto"), describe_method(eth, "auto"), describe_method(ib, "ecmp")
    ('auto (D-mod-k on InfiniBand)', 'auto (ECMP on Ethernet)', 'ecmp')
    """
    _method(method)
    if method != "auto":
        return method
    kinds = set(_infiniband(topology, np.flatnonzero(topology.link_tier == LinkTier.SCALE_OUT)).tolist())
    taken = [text for infiniband, text in ((True, "D-mod-k on InfiniBand"), (False, "ECMP on Ethernet"))
             if infiniband in kinds]
    return f"auto ({', '.join(taken)})" if taken else "auto"


def _infiniband(topology: Topology, links: np.ndarray) -> np.ndarray:
    """Whether each of ``links`` is an InfiniBand cable (:func:`flowsim.hardware.is_infiniband`):
    InfiniBand switches forward by the destination's LID, which ``"auto"`` takes as D-mod-k;
    the others are Ethernet's, which hash each flow (ECMP)."""
    return np.array([is_infiniband(topology.link_technology[link]) for link in links.tolist()], dtype=bool)


def _method(method: str) -> int:
    if method not in METHODS:
        raise InputError(f"unknown routing method {method!r}; valid ones: {', '.join(METHODS)}")
    return METHODS[method]


# The routing kernels take the seed as an int64.
_MAX_SEED = 2**63 - 1


def _seed(seed: int) -> int:
    seed = whole_number("seed", seed, minimum=0)
    if seed > _MAX_SEED:
        raise InputError(f"seed must be at most 2**63 - 1 (an int64), got {seed!r}")
    return seed


def route(
    topology: Topology,
    src: Nodes,
    dst: Nodes,
    *,
    method: str = "auto",
    seed: int = 0,
    gpudirect: bool = True,
) -> Routes:
    """Route pairs once: ``Router(topology).route(src, dst, ...)``.

    Examples
    --------
    >>> from flowsim.presets import preset
    >>> topo = preset("dgx_h100", figure="nominal")
    >>> r = route(topo, ["gpu0"], ["gpu5"])
    >>> [topo.link_names[l] for l in r.route(0)]
    ['gpu0->nvswitch', 'nvswitch->gpu5']
    >>> route(topo, "gpu0", "gpu5").n_flows
    1
    """
    return Router(topology).route(src, dst, method=method, seed=seed, gpudirect=gpudirect)


def split_route(
    topology: Topology,
    src: Nodes,
    dst: Nodes,
    *,
    max_paths: int,
    method: str = "auto",
    seed: int = 0,
    gpudirect: bool = True,
) -> SplitRoutes:
    """Split pairs over equal-cost paths once: ``Router(topology).split(...)``."""
    return Router(topology).split(src, dst, max_paths=max_paths, method=method, seed=seed, gpudirect=gpudirect)


def validate_routes(topology: Topology, routes: Routes, src: Nodes, dst: Nodes) -> None:
    """Check that each route is a contiguous walk from its source to its destination.

    Raises
    ------
    InputError
        Naming the first bad flow, the link that breaks it and the node it should leave.
    """
    s = topology.node_ids(_node_list(src, "src"))
    d = topology.node_ids(_node_list(dst, "dst"))
    if routes.n_links != topology.n_links:
        raise InputError(f"routes are over {routes.n_links} links but the topology has {topology.n_links}")
    if s.size != routes.n_flows or d.size != routes.n_flows:
        raise InputError(f"{routes.n_flows} routes but {s.size} sources and {d.size} destinations")
    flow, hop = kernel.check_routes(
        routes.flow_link_indptr, routes.flow_link_indices, topology.link_src, topology.link_dst,
        topology.link_shared.astype(np.int64), s, d,
    )
    if flow < 0:
        return
    names, links = topology.node_names, topology.link_names
    path = routes.route(flow)
    where = f"flow {flow} ({names[s[flow]]!r} -> {names[d[flow]]!r})"
    if hop == 0 and path.size == 0:
        raise InputError(f"{where} has an empty route")
    if hop == path.size:
        raise InputError(f"{where} does not reach its destination: it ends with link {links[path[-1]]!r}")
    previous = "its source" if hop == 0 else f"link {links[path[hop - 1]]!r}"
    raise InputError(f"{where} is not contiguous: link {links[path[hop]]!r} does not continue from {previous}")


def _through_one_gpu(kind: np.ndarray, rows: np.ndarray, cols: np.ndarray, via: np.ndarray, capacity: np.ndarray,
                     parent: np.ndarray, depth: np.ndarray) -> None:
    """NVLink paths through one intermediate GPU, for the GPU pairs of an NVLink mesh (the
    DGX-1) that no NVLink path joins: NCCL's ``PATH_NVB``, which it prefers to any path over
    PCIe and sends over through that GPU (``P2P/indirect``), at most one intermediate, the one
    whose two NVLinks give the most bandwidth ([NCCL] v2.30.7-1 src/graph/paths.cc
    ``ncclTopoSetPaths``, ``ncclTopoCheckP2p``); ties go to the lowest GPU. ``rows``,
    ``cols``, ``via``: the tier's local links (from, to, local link), ``capacity`` theirs;
    ``parent`` and ``depth`` (the search trees over the tier) gain the paths in place."""
    n = kind.size
    gpu = kind == NodeKind.GPU
    direct = gpu[rows] & gpu[cols]
    if not direct.any():
        return
    rate = np.zeros((n, n))
    link = np.full((n, n), -1, dtype=np.int64)
    # The first of parallel links, as the search takes it.
    for r, c, v, cap in sorted(zip(rows[direct], cols[direct], via[direct], capacity[direct], strict=True),
                               key=lambda x: -x[2]):
        rate[r, c], link[r, c] = cap, v
    for a in np.flatnonzero(gpu):
        for b in np.flatnonzero(gpu & (depth[a, :n] < 0)):  # a's own depth is 0
            both = np.minimum(rate[a], rate[:, b])
            if both.max() <= 0:
                continue
            mid = int(np.argmax(both))  # the first of the best
            parent[a, b], depth[a, b] = link[mid, b], 2
