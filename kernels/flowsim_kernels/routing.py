"""Routing kernels: breadth-first search tables, path assembly per pair, route checks.

A route is assembled in up to three segments, each by its own kernel:

* inside one server (:func:`server_paths`): a path of a breadth-first-search tree of the
  server's class (servers with identical structure share one table): over NVLink (transit
  through NVSwitches only) where one joins the pair, else over host links (transit through
  PCIe switches and CPU root complexes). GPU pairs without peer-to-peer, and GPU-NIC
  pairs without GPUDirect RDMA, are staged: source -> nearest host memory -> destination;
* across the network (:func:`network_paths`), from the exit NIC :func:`route_exits` picks to
  the destination's NIC. At each switch the next hop is one of the neighbours one hop
  closer to the destination's leaf, picked by the method: ``METHOD_SHORTEST`` the first,
  ``METHOD_ECMP`` a hash of (seed, source, destination, switch), ``METHOD_DMODK`` digit
  ``(key // stride) % n`` of the destination's D-mod-k key, ``stride`` being the product of
  the choice counts at earlier hops, ``METHOD_AUTO`` the one of the network the choice is
  made on (``endpoint_method``: D-mod-k on InfiniBand, ECMP on Ethernet). A path rank
  ``r`` > 0 (fluid splits) shifts each choice by the next mixed-radix digit of ``r``, so ranks
  below the number of equal-cost paths give distinct paths.

The kernels read the arrays they need out of :class:`RoutingTables` once, before their loop,
and pass arrays (never the tuple) to helpers: Numba reference-counts every array of a tuple
handed to an inlined helper that branches, once per call, which made routing ten times
slower.

Nothing here imports :mod:`flowsim`; inputs are validated by ``flowsim.routing``.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

METHOD_SHORTEST = 0
METHOD_ECMP = 1
METHOD_DMODK = 2
METHOD_AUTO = 3

ROLE_OTHER = 0
ROLE_GPU = 1
ROLE_NIC = 2

NO_ROUTE = -1
NO_EXIT = -2


class RoutingTables(NamedTuple):
    """Arrays the path kernels read (all int64; none is mutated).

    Node arrays are indexed by node id (``n``), server arrays by server id (``S``), class
    arrays by server class (``C``), local node (``M`` = largest server) and local link (``K`` =
    most internal links of a server), switch arrays by switch row (``W``) and leaf column
    (``L``).
    """

    node_role: np.ndarray
    """[n] ``ROLE_GPU``, ``ROLE_NIC`` or ``ROLE_OTHER``."""
    node_server: np.ndarray
    """[n] server id, -1 outside servers."""
    node_local: np.ndarray
    """[n] index of the node within its server, -1 outside servers."""
    node_exit: np.ndarray
    """[n] network endpoint through which the node leaves (itself for endpoints), -1 none."""
    server_class: np.ndarray
    """[S] class of each server."""
    server_p2p: np.ndarray
    """[S] 1 if GPUs may copy peer-to-peer over PCIe, else 0."""
    server_link_indptr: np.ndarray
    server_links: np.ndarray
    """CSR [S] -> ids of the server's internal links in local order."""
    server_endpoint_indptr: np.ndarray
    server_endpoints: np.ndarray
    """CSR [S] -> the server's network endpoints, ascending."""
    nvl_parent: np.ndarray
    nvl_depth: np.ndarray
    host_parent: np.ndarray
    host_depth: np.ndarray
    """[C, M, M] breadth-first-search trees from each local source: the local link entering
    each local node and its hop count (-1 unreachable), over NVLink and over host links."""
    link_end_sum: np.ndarray
    """[C, K] sum of the local ids of each local link's two ends (one end gives the other)."""
    staging: np.ndarray
    """[C, M] local id of the host memory a node stages through, -1 none."""
    endpoint_component: np.ndarray
    endpoint_switch_row: np.ndarray
    endpoint_leaf_col: np.ndarray
    endpoint_up_link: np.ndarray
    endpoint_down_link: np.ndarray
    endpoint_dmodk_key: np.ndarray
    endpoint_method: np.ndarray
    """[n] per network endpoint: its network, the switch it attaches to (as a row and as a
    leaf column), its links up and down, its D-mod-k key, the method ``METHOD_AUTO`` takes
    for routes to it; -1 for other nodes."""
    switch_adj_indptr: np.ndarray
    switch_adj_row: np.ndarray
    switch_adj_link: np.ndarray
    """CSR [W] -> switch neighbours (rows) and the links to them, ascending by link id."""
    leaf_dist: np.ndarray
    """[L, W] hops from each switch to each leaf, -1 unreachable (leaf-major, so that the
    switches scanned on the way to one leaf share cache lines)."""
    next_hops: np.ndarray
    """[L, W] number of neighbours of each switch one hop closer to each leaf."""


@njit(cache=True)
def server_bfs(adj_indptr, adj_node, adj_link, transit, parent, depth):
    """Breadth-first-search trees from every node of one small graph.

    Parameters
    ----------
    adj_indptr : int64[m + 1]
    adj_node : int64[e]
    adj_link : int64[e]
        Local adjacency: the neighbours of each local node and the local link reaching them,
        in the order they are to be tried. Not mutated.
    transit : int64[m]
        1 where a path may pass through the node, 0 where it may only start or end.
        Not mutated.
    parent : int64[m, m]
        Output: ``parent[s, v]`` is the local link entering ``v`` on the tree from ``s``
        (-1 for ``s`` itself and unreachable nodes). Mutated.
    depth : int64[m, m]
        Output: hops from ``s`` to ``v``, -1 if unreachable. Mutated.

    Notes
    -----
    One breadth-first search per source, first-found parent wins: O(m (m + e)).
    """
    m = adj_indptr.shape[0] - 1
    queue = np.empty(m, dtype=np.int64)
    for s in range(m):
        for v in range(m):
            parent[s, v] = -1
            depth[s, v] = -1
        depth[s, s] = 0
        queue[0] = s
        head = 0
        tail = 1
        while head < tail:
            u = queue[head]
            head += 1
            if u != s and transit[u] == 0:
                continue
            for e in range(adj_indptr[u], adj_indptr[u + 1]):
                v = adj_node[e]
                if depth[s, v] < 0:
                    depth[s, v] = depth[s, u] + 1
                    parent[s, v] = adj_link[e]
                    queue[tail] = v
                    tail += 1


@njit(cache=True)
def leaf_distances(rev_indptr, rev_row, leaf_rows, dist):
    """Hop distances from every switch to every leaf.

    Parameters
    ----------
    rev_indptr : int64[w + 1]
    rev_row : int64[e]
        Reverse switch adjacency: for each switch, the switches with a link *to* it.
        Not mutated.
    leaf_rows : int64[l]
        Switch row of each leaf column. Not mutated.
    dist : int64[l, w]
        Output: hops from switch ``r`` to leaf ``c`` at ``dist[c, r]``, -1 unreachable.
        Mutated.

    Notes
    -----
    One breadth-first search per leaf over reversed links: O(l (w + e)).
    """
    w = rev_indptr.shape[0] - 1
    queue = np.empty(w, dtype=np.int64)
    for c in range(leaf_rows.shape[0]):
        for r in range(w):
            dist[c, r] = -1
        dist[c, leaf_rows[c]] = 0
        queue[0] = leaf_rows[c]
        head = 0
        tail = 1
        while head < tail:
            u = queue[head]
            head += 1
            for e in range(rev_indptr[u], rev_indptr[u + 1]):
                v = rev_row[e]
                if dist[c, v] < 0:
                    dist[c, v] = dist[c, u] + 1
                    queue[tail] = v
                    tail += 1


@njit(cache=True)
def next_hop_counts(adj_indptr, adj_row, dist, counts):
    """How many neighbours of each switch are one hop closer to each leaf.

    Parameters
    ----------
    adj_indptr : int64[w + 1]
    adj_row : int64[e]
        Forward switch adjacency (neighbour rows). Not mutated.
    dist : int64[l, w]
        From :func:`leaf_distances`. Not mutated.
    counts : int64[l, w]
        Output; 0 at the leaf itself and where it is unreachable. Mutated.

    Notes
    -----
    O(l x e).
    """
    for c in range(dist.shape[0]):
        for r in range(adj_indptr.shape[0] - 1):
            counts[c, r] = 0
            if dist[c, r] > 0:
                for e in range(adj_indptr[r], adj_indptr[r + 1]):
                    if dist[c, adj_row[e]] == dist[c, r] - 1:
                        counts[c, r] += 1


@njit(cache=True, inline="always")
def _mix32(x):
    # Integer hash on 32 bits (multiply-xorshift); products stay below 2**59, so int64 never
    # overflows, with or without the JIT.
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    return (x >> 16) ^ x


@njit(cache=True, inline="always")
def _hash(seed, a, b, c):
    h = _mix32(((seed ^ (seed >> 32)) & 0xFFFFFFFF) ^ 0x9E3779B9)
    h = _mix32(h ^ (a & 0xFFFFFFFF))
    h = _mix32(h ^ (b & 0xFFFFFFFF))
    return _mix32(h ^ (c & 0xFFFFFFFF))


@njit(cache=True, inline="always")
def _resolved(method, network_method):
    """The method a choice on a network whose ``METHOD_AUTO`` is ``network_method`` takes."""
    return network_method if method == METHOD_AUTO else method


@njit(cache=True, inline="always")
def _choose(method, seed, src, dst, at, key, stride, n):
    """Index in ``[0, n)`` of the next hop taken at node ``at``."""
    if method == METHOD_ECMP:
        return _hash(seed, src, dst, at) % n
    if method == METHOD_DMODK:
        return (key // stride) % n
    return 0


@njit(cache=True, inline="always")
def _walk(parent, depth, end_sum, links, c, base, ls, ld, write, out, pos):
    """Length of the tree path ``ls -> ld`` in class ``c``; with ``write``, its global link
    ids go to ``out[pos:]`` (``links[base + local link]``)."""
    n = depth[c, ls, ld]
    if write:
        v = ld
        for k in range(n - 1, -1, -1):
            link = parent[c, ls, v]
            out[pos + k] = links[base + link]
            v = end_sum[c, link] - v
    return n


@njit(cache=True, inline="always")
def _server_endpoint(
    indptr, endpoints, endpoint_component, node_local, reach, server, component, method, seed, src, dst, key
):
    """An endpoint of ``server`` on network ``component`` among the nearest to the node by
    host links (``reach[local id]`` hops, < 0 where none join them), chosen like a next hop
    when several are as near; -1 if none. A port on the node's own socket is preferred to
    one across the inter-socket link, as its traffic would really go."""
    nearest = -1
    count = 0
    for k in range(indptr[server], indptr[server + 1]):
        if endpoint_component[endpoints[k]] == component:
            hops = reach[node_local[endpoints[k]]]
            if hops >= 0 and (nearest < 0 or hops <= nearest):
                count = 1 if hops != nearest else count + 1
                nearest = hops
    if count == 0:
        return -1
    pick = _choose(method, seed, src, dst, server, key, 1, count)
    k = indptr[server]
    while pick >= 0:
        if endpoint_component[endpoints[k]] == component:
            if reach[node_local[endpoints[k]]] == nearest:
                pick -= 1
        k += 1
    return endpoints[k - 1]


@njit(cache=True)
def route_exits(t, src, dst, method, seed, exit_src, exit_dst):
    """The network endpoints through which each pair's route leaves and enters servers.

    Parameters
    ----------
    t : RoutingTables
    src, dst : int64[p]
        Node ids of each pair. Not mutated.
    method : int
        ``METHOD_SHORTEST``, ``METHOD_ECMP``, ``METHOD_DMODK`` or ``METHOD_AUTO``; picks among
        several NICs of a server on the other side's network.
    seed : int
        ECMP hash seed (>= 0).
    exit_src, exit_dst : int64[p]
        Output: the endpoints; -1 where the route stays inside one server (or ``src == dst``),
        ``NO_EXIT`` where the two sides share no network. Mutated.

    Notes
    -----
    Each node's own exit is used when both lie on one network; otherwise a NIC of the
    destination's server on the source exit's network that host links join to the
    destination, else such a NIC of the source's server on the destination exit's network.
    O(p x NICs per server).
    """
    node_server = t.node_server
    node_local = t.node_local
    node_exit = t.node_exit
    server_class = t.server_class
    host_depth = t.host_depth
    component = t.endpoint_component
    dmodk_key = t.endpoint_dmodk_key
    endpoint_method = t.endpoint_method
    indptr = t.server_endpoint_indptr
    endpoints = t.server_endpoints
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        exit_src[i] = -1
        exit_dst[i] = -1
        if s == d:
            continue
        if node_server[s] >= 0:
            if node_server[s] == node_server[d]:
                continue
        exit_src[i] = NO_EXIT
        exit_dst[i] = NO_EXIT
        a = node_exit[s]
        b = node_exit[d]
        if a < 0:
            continue
        if b < 0:
            continue
        if component[a] != component[b]:
            other = -1
            server = node_server[d]
            if server >= 0:
                reach = host_depth[server_class[server], node_local[d]]
                other = _server_endpoint(
                    indptr, endpoints, component, node_local, reach, server, component[a],
                    _resolved(method, endpoint_method[a]), seed, s, d, dmodk_key[b],
                )
            if other >= 0:
                b = other
            else:
                a = -1
                server = node_server[s]
                if server >= 0:
                    reach = host_depth[server_class[server], node_local[s]]
                    a = _server_endpoint(
                        indptr, endpoints, component, node_local, reach, server, component[b],
                        _resolved(method, endpoint_method[b]), seed, s, d, dmodk_key[b],
                    )
                if a < 0:
                    continue
        exit_src[i] = a
        exit_dst[i] = b


@njit(cache=True)
def server_paths(t, src, dst, gpudirect, write, pos, indices, lengths):
    """Route segments that stay inside one server: count them, or also write them.

    Parameters
    ----------
    t : RoutingTables
    src, dst : int64[p]
        Node ids; each pair lies in one server, or ``src == dst`` (an empty segment).
        Not mutated.
    gpudirect : bool
        Whether GPU-NIC traffic goes peer-to-peer (GPUDirect RDMA) or is staged in host memory.
    write : bool
        False: only count (``pos`` and ``indices`` are not read).
    pos : int64[p]
        Where each segment starts in ``indices``. Not mutated.
    indices : int64[:]
        Output when ``write``: link ids of each segment, in order. Mutated.
    lengths : int64[p]
        Output: links per segment, ``NO_ROUTE`` where none exists. Mutated.

    Notes
    -----
    Counting reads the depth tables: O(p). Writing walks the search trees back from the
    destination: O(links written).
    """
    node_role = t.node_role
    node_server = t.node_server
    node_local = t.node_local
    server_class = t.server_class
    server_p2p = t.server_p2p
    link_indptr = t.server_link_indptr
    links = t.server_links
    end_sum = t.link_end_sum
    nvl_parent = t.nvl_parent
    nvl_depth = t.nvl_depth
    host_parent = t.host_parent
    host_depth = t.host_depth
    staging = t.staging
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        lengths[i] = 0
        if s == d:
            continue
        start = 0
        if write:
            start = pos[i]
        server = node_server[s]
        c = server_class[server]
        base = link_indptr[server]
        ls = node_local[s]
        ld = node_local[d]
        gpu_gpu = False
        gpu_nic = False
        if node_role[s] == ROLE_GPU:
            gpu_gpu = node_role[d] == ROLE_GPU
            gpu_nic = node_role[d] == ROLE_NIC
        if node_role[s] == ROLE_NIC:
            gpu_nic = node_role[d] == ROLE_GPU
        staged = False
        if gpu_gpu:
            staged = server_p2p[server] == 0
        if gpu_nic:
            staged = not gpudirect
        n = _walk(nvl_parent, nvl_depth, end_sum, links, c, base, ls, ld, write, indices, start)
        if n < 0:
            if staged:
                # GPU to GPU: the buffer is in the receiver's memory, as NCCL's SHM transport
                # puts it (NCCL_SHM_LOCALITY, receiver side by default).
                mem = staging[c, ld] if gpu_gpu else staging[c, ls]
                if mem >= 0:
                    first = _walk(host_parent, host_depth, end_sum, links, c, base, ls, mem, write, indices, start)
                    if first >= 0:
                        second = _walk(
                            host_parent, host_depth, end_sum, links, c, base, mem, ld, write, indices, start + first
                        )
                        if second >= 0:
                            n = first + second
            else:
                n = _walk(host_parent, host_depth, end_sum, links, c, base, ls, ld, write, indices, start)
        lengths[i] = n


@njit(cache=True)
def network_paths(t, exit_src, exit_dst, src, dst, rank, method, seed, write, pos, indices, lengths):
    """Route segments across the network, from one endpoint to another.

    Parameters
    ----------
    t : RoutingTables
    exit_src, exit_dst : int64[p]
        Endpoints from :func:`route_exits`; a negative ``exit_src`` means no network segment
        (length 0). Not mutated.
    src, dst : int64[p]
        The pairs' own source and destination nodes: the ECMP hash key. Not mutated.
    rank : int64[p]
        Equal-cost path rank (0 = the method's own choice); read only when ``write``.
        Not mutated.
    method, seed
        As in :func:`route_exits`: pick the next hop at each switch.
    write : bool
        False: only count (``rank``, ``pos`` and ``indices`` are not read).
    pos : int64[p]
        Where each segment starts in ``indices``. Not mutated.
    indices : int64[:]
        Output when ``write``: link ids of each segment, in order. Mutated.
    lengths : int64[p]
        Output: links per segment, ``NO_ROUTE`` if the destination's leaf is unreachable.
        Mutated.

    Notes
    -----
    Counting reads the distance table: O(p). Writing scans each switch's neighbours up to the
    chosen one: O(links written x switch degree).
    """
    switch_row = t.endpoint_switch_row
    leaf_col = t.endpoint_leaf_col
    up_link = t.endpoint_up_link
    down_link = t.endpoint_down_link
    dmodk_key = t.endpoint_dmodk_key
    endpoint_method = t.endpoint_method
    adj_indptr = t.switch_adj_indptr
    adj_row = t.switch_adj_row
    adj_link = t.switch_adj_link
    dist = t.leaf_dist
    next_hops = t.next_hops
    for i in range(exit_src.shape[0]):
        lengths[i] = 0
        a = exit_src[i]
        if a < 0:
            continue
        b = exit_dst[i]
        col = leaf_col[b]
        row = switch_row[a]
        hops = dist[col, row]
        if hops < 0:
            lengths[i] = NO_ROUTE
            continue
        lengths[i] = hops + 2
        if not write:
            continue
        start = pos[i]
        indices[start] = up_link[a]
        how = _resolved(method, endpoint_method[b])
        stride = 1
        for k in range(1, hops + 1):
            count = next_hops[col, row]
            pick = _choose(how, seed, src[i], dst[i], row, dmodk_key[b], stride, count)
            pick = (pick + (rank[i] // stride) % count) % count
            stride *= count
            e = adj_indptr[row]
            while pick >= 0:
                if dist[col, adj_row[e]] == hops - k:
                    pick -= 1
                e += 1
            indices[start + k] = adj_link[e - 1]
            row = adj_row[e - 1]
        indices[start + hops + 1] = down_link[b]


@njit(cache=True)
def equal_cost_paths(t, exit_src, exit_dst, counts):
    """Number of equal-cost network paths of each pair, counted along its first path.

    Parameters
    ----------
    t : RoutingTables
    exit_src, exit_dst : int64[p]
        From :func:`route_exits`; negative for pairs inside one server. Not mutated.
    counts : int64[p]
        Output: product of the next-hop choice counts along the path (1 inside a server).
        Exact on fat-trees, where every path of a pair meets the same counts. Mutated.
    """
    for i in range(exit_src.shape[0]):
        counts[i] = 1
        if exit_src[i] < 0:
            continue
        col = t.endpoint_leaf_col[exit_dst[i]]
        row = t.endpoint_switch_row[exit_src[i]]
        while t.leaf_dist[col, row] > 0:
            counts[i] *= t.next_hops[col, row]
            e = t.switch_adj_indptr[row]
            while t.leaf_dist[col, t.switch_adj_row[e]] != t.leaf_dist[col, row] - 1:
                e += 1
            row = t.switch_adj_row[e]


@njit(cache=True)
def check_routes(indptr, indices, link_src, link_dst, link_shared, src, dst):
    """Find the first route that is not a contiguous walk from its source to its destination.

    Parameters
    ----------
    indptr : int64[p + 1]
    indices : int64[nnz]
        Flow -> link CSR. Not mutated.
    link_src, link_dst : int64[n_links]
        End nodes of each link. Not mutated.
    link_shared : int64[n_links]
        1 where a link may be crossed from ``link_dst`` to ``link_src`` too. Not mutated.
    src, dst : int64[p]
        Source and destination node of each flow. Not mutated.

    Returns
    -------
    flow : int
        First bad flow, -1 if all are valid.
    hop : int
        Position in that route of the first link not leaving the node reached so far, or the
        route's length if it ends elsewhere than at its destination.

    Notes
    -----
    One pass over the links: O(nnz).
    """
    for f in range(src.shape[0]):
        at = src[f]
        for k in range(indptr[f], indptr[f + 1]):
            link = indices[k]
            if link_src[link] == at:
                at = link_dst[link]
            elif link_shared[link] == 1 and link_dst[link] == at:
                at = link_src[link]
            else:
                return f, k - indptr[f]
        if at != dst[f]:
            return f, indptr[f + 1] - indptr[f]
    return -1, -1
