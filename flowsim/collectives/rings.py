"""Ring orders: one per channel, rotated per server or found on a GPU mesh's direct links."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flowsim.collectives.dag import Ranks, Servers, _check_ranks, _group_by_server
from flowsim.errors import InputError, whole_number
from flowsim.hardware import LinkTier
from flowsim.topology import Topology

__all__ = ["mesh_link_counts", "mesh_rings", "mesh_server_rings", "nic_spread_offsets", "rank_servers", "rotated_rings"]


def rotated_rings(
    ranks: Ranks, channels: int, servers: Servers = None, offsets: Sequence[int] | None = None
) -> list[tuple[str, ...]]:
    """One ring order per channel: channel ``c`` rotates each server's ranks by ``offsets[c]``
    (by ``c`` by default; ``offsets`` repeat when there are more channels).

    Across servers, a channel rotated by ``k`` enters a server at its local rank ``k`` and
    leaves it from local rank ``k - 1`` (which hands its hop to local rank ``k``'s NIC where
    the builder is given ``rails``): with one NIC per GPU, rotating by ``c`` spreads the
    inter-server hops over all rails, as NCCL's channels do; :func:`nic_spread_offsets` gives
    the rotations that do so where GPUs share NICs.

    Examples
    --------
    >>> rotated_rings(["a0", "a1", "b0", "b1"], 2, {"a0": 0, "a1": 0, "b0": 1, "b1": 1})
    [('a0', 'a1', 'b0', 'b1'), ('a1', 'a0', 'b1', 'b0')]
    """
    ranks = _check_ranks(ranks, "rotated_rings", minimum=1)
    channels = whole_number("rotated_rings: channels", channels)
    groups = _group_by_server(ranks, servers, "rotated_rings")
    steps = list(range(channels)) if offsets is None else [int(k) for k in offsets]
    if not steps or any(k < 0 for k in steps):
        raise InputError(f"rotated_rings: offsets must be a non-empty list of integers >= 0, got {offsets!r}")
    rotations = [steps[c % len(steps)] for c in range(channels)]
    return [tuple(r for g in groups for r in g[k % len(g) :] + g[: k % len(g)]) for k in rotations]


def nic_spread_offsets(nics: Sequence[int], uplinks: Sequence[int] | None = None) -> list[int]:
    """Rotations of one server's ranks (``nics[i]``: the NIC local rank ``i`` leaves through)
    whose rings enter the server through its NICs in turn.

    ``uplinks[i]``, where given, names the PCIe uplink NIC ``nics[i]`` sits behind: the NICs
    are then taken one per uplink in turn (the first NIC behind each, then the second...).
    Staged through host memory, a channel's traffic in and out of the server crosses its
    NIC's uplink twice, and NCCL's search passes over a NIC whose uplink is full for the next
    one ([NCCL] src/graph/search.cc ``ncclTopoSearchRecNet``), so its channels spread over
    the uplinks first.

    NCCL's search starts channel ``c`` on NIC ``c mod nNets`` ([NCCL] src/graph/search.cc
    ``nets[(graph->nChannels + i) % netCount]``), so consecutive channels cross different
    NICs. The rotations take the first rank of each NIC, in the NICs' order, then the second
    of each, and so on: with one NIC per GPU that is 0, 1, 2, ...; with two GPUs to a NIC
    (ranks 0-1 on NIC 0, 2-3 on NIC 1) 0, 2, 1, 3, whose rings enter and leave through
    every NIC once in each round.

    >>> nic_spread_offsets([0, 0, 1, 1])
    [0, 2, 1, 3]
    >>> nic_spread_offsets([5, 6, 7])
    [0, 1, 2]
    """
    seen: dict[int, int] = {}
    position = []
    for nic in nics:
        position.append(seen.get(nic, 0))
        seen[nic] = position[-1] + 1
    order = list(dict.fromkeys(nics))
    if uplinks is not None:
        # Each NIC's place behind its uplink, as position counts a rank's behind its NIC.
        behind = dict(zip(nics, uplinks, strict=True))
        taken: dict[int, int] = {}
        place = {}
        for nic in order:
            place[nic] = taken.get(behind[nic], 0)
            taken[behind[nic]] = place[nic] + 1
        groups = list(taken)
        order.sort(key=lambda nic: (place[nic], groups.index(behind[nic])))
    return sorted(range(len(nics)), key=lambda i: (position[i], order.index(nics[i])))


def mesh_rings(
    ranks: Ranks, link_count: Sequence[Sequence[int]] | np.ndarray, *, max_search_steps: int = 100_000
) -> list[tuple[str, ...]]:
    """Ring orders over the direct links of a GPU mesh, such as the DGX-1 hybrid cube-mesh.

    Finds as many directed Hamiltonian cycles as it can such that at most
    ``link_count[i][j]`` of them use the link from rank ``i`` to rank ``j``: NCCL's ring
    search on NVLink meshes, where every ring is a channel and a double NVLink carries two.
    On the DGX-1 (V100) adjacency this finds six rings, one per NVLink of each GPU. Where
    those counts leave links no ring can take (a full mesh of 4 GPUs: 2 of its 6 directed
    cycles fit), the cycles are sought on half links (twice the counts), as NCCL's search
    shares a pair's bandwidth between channels: all 6, each pair carrying 2.

    Parameters
    ----------
    ranks : sequence of str
        The ``n`` ranks; rings are returned as orders of these names, starting at
        ``ranks[0]``.
    link_count : int array (n, n)
        Number of links from rank ``i`` to rank ``j`` (0: none).
    max_search_steps : int
        Budget of the exact (backtracking) search; past it, the best set found so far.

    Returns
    -------
    list of tuple of str
        The ring orders; empty if the mesh has no Hamiltonian cycle.
    """
    ranks = _check_ranks(ranks, "mesh_rings")
    n = len(ranks)
    counts = np.asarray(link_count)
    if counts.shape != (n, n) or not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        raise InputError(f"mesh_rings: link_count must be a non-negative integer matrix of shape ({n}, {n})")
    budget = whole_number("mesh_rings: max_search_steps", max_search_steps)
    counts = counts.astype(np.int64)
    cycles = _hamiltonian_cycles(counts)
    best = _most_cycles(cycles, counts, budget)
    if best and len(best) < _degree(counts):
        # The links' units leave links no ring can take: a full mesh of 4 GPUs (a GH200 quad
        # node) holds 2 of its 6 directed Hamiltonian cycles link-disjoint, 8 of its 12
        # directed links. NCCL's search shares a pair's links between channels as their
        # bandwidth allows; on half units (twice the count) the 6 cycles each take half of
        # every link, and every NVLink carries rings.
        halves = _most_cycles(cycles, 2 * counts, budget)
        if len(halves) > 2 * len(best):
            best = halves
    return [tuple(ranks[i] for i in cycle) for cycle in best]


def _degree(counts: np.ndarray) -> int:
    """The most link-disjoint Hamiltonian cycles ``counts`` could hold: a GPU's fewest links
    out or in."""
    return int(min(counts.sum(axis=1).min(), counts.sum(axis=0).min()))


def _hamiltonian_cycles(counts: np.ndarray) -> list[tuple[int, ...]]:
    """Every directed Hamiltonian cycle from node 0 over the links of ``counts`` (> 0)."""
    n = counts.shape[0]
    cycles: list[tuple[int, ...]] = []
    path, seen = [0], [True] + [False] * (n - 1)

    def extend() -> None:
        if len(path) == n:
            if counts[path[-1], 0] > 0:
                cycles.append(tuple(path))
            return
        for j in range(n):
            if not seen[j] and counts[path[-1], j] > 0:
                seen[j] = True
                path.append(j)
                extend()
                path.pop()
                seen[j] = False

    extend()
    return cycles


def _most_cycles(cycles: list[tuple[int, ...]], counts: np.ndarray, budget: int) -> list[tuple[int, ...]]:
    """As many of ``cycles`` (a cycle may repeat) as fit in ``counts`` links, each taking one
    of every link it crosses, searched exactly within ``budget`` steps."""
    n = counts.shape[0]
    remaining = counts.copy()
    hops = [[(c[i], c[(i + 1) % n]) for i in range(n)] for c in cycles]
    target = _degree(remaining)
    best: list[int] = []
    chosen: list[int] = []
    steps = 0

    def choose(first: int) -> bool:
        nonlocal best, steps
        if len(chosen) > len(best):
            best = list(chosen)
        if len(best) >= target or steps >= budget:
            return True
        for i in range(first, len(cycles)):
            steps += 1
            if all(remaining[a, b] > 0 for a, b in hops[i]):
                for a, b in hops[i]:
                    remaining[a, b] -= 1
                chosen.append(i)
                if choose(i):
                    return True
                chosen.pop()
                for a, b in hops[i]:
                    remaining[a, b] += 1
        return False

    choose(0)
    return [cycles[c] for c in best]


def mesh_server_rings(topology: Topology, ranks: Ranks, servers: Servers) -> list[tuple[str, ...]]:
    """Ring orders across servers whose GPUs form an NVLink mesh (DGX-1s): inside each server
    a Hamiltonian path over the mesh's direct links, entering and leaving through one NIC.

    NCCL's ring search across nodes starts a channel at a NIC, walks the server's GPUs over
    NVLink and leaves through a NIC ([NCCL] src/graph/search.cc); on a mesh, the rotated
    rings of :func:`rotated_rings` (local ranks in index order) would step between GPUs with
    no NVLink between them, through the CPUs. Each of the first server's :func:`mesh_rings`
    is cut between two GPUs, the path entering at one and leaving at the other: GPUs nearest
    their NICs (under their PCIe switch before a socket away), of the NICs fewest rings
    entered and left so far, one NIC for both first, so that a ring enters and leaves through
    one NIC where it can and through two where not. As many rings are kept as every NIC can
    take alike (the DGX-1's six mesh rings over 4 NICs: 4 rings, one per NIC). Every server
    takes the same local path, and the rings take the NICs in turn, as NCCL's channels do.
    Where every GPU has a NIC of its own (a GH200 quad node) each mesh ring is cut before each
    of its GPUs in turn, so that the rings enter (and, through PXN, leave) at every NIC alike.
    Empty where the servers are not alike or their GPUs hold no mesh ring.
    """
    groups = _group_by_server(_check_ranks(ranks, "mesh_server_rings"), servers, "mesh_server_rings")
    first = groups[0]
    if len(first) < 2 or any(len(g) != len(first) for g in groups):
        return []
    counts = mesh_link_counts(topology, first)
    cycles = mesh_rings(first, counts) if counts.any() else []
    if not cycles:
        return []
    position = {rank: i for i, rank in enumerate(first)}
    nics = topology.node_nic[topology.node_ids(first)].tolist()
    if len(set(nics)) == len(nics):
        # A NIC a GPU (a GH200 quad node): a ring enters through one GPU's NIC and leaves
        # through the same (by PXN, over NVLink to that GPU); NCCL's channels start at each
        # NIC in turn, so every GPU of every mesh ring is an entry, each NIC taking as many.
        return [tuple(g[i] for g in groups for i in local[cut:] + local[:cut])
                for local in ([position[r] for r in cycle] for cycle in cycles) for cut in range(len(local))]
    # A channel's ring enters each server at a GPU near its NIC and leaves it from a GPU near
    # a NIC ([NCCL] src/graph/search.cc: the search starts each channel at a NIC, c mod nNets,
    # takes the GPUs the paths of most bandwidth reach, and leaves through the same NIC first,
    # else another, NCCL_CROSS_NIC being 2 by default). Each ring is cut where its two ends
    # are nearest their NICs (fewest links between them), on the NICs fewest rings entered
    # and left so far, the same NIC at both ends first; NICs take as many rings each.
    hops = _nic_hops(topology, topology.node_ids(first))
    locals_ = [[position[r] for r in cycle] for cycle in cycles]
    n_nics = len(set(nics))
    keep = max(1, len(locals_) // n_nics) * n_nics if len(locals_) >= n_nics else len(locals_)
    entered: dict[int, int] = {}
    left: dict[int, int] = {}
    remaining = list(range(len(locals_)))
    paths: list[list[int]] = []
    while remaining and len(paths) < keep:
        _, k, cut = min(
            ((hops[a] + hops[b], entered.get(nics[a], 0) + left.get(nics[b], 0), nics[a] != nics[b], k, i), k, i)
            for k in remaining for local in (locals_[k],) for i in range(len(local))
            for a, b in ((local[i], local[i - 1]),)
        )
        local = locals_[k]
        remaining.remove(k)
        entered[nics[local[cut]]] = entered.get(nics[local[cut]], 0) + 1
        left[nics[local[cut - 1]]] = left.get(nics[local[cut - 1]], 0) + 1
        paths.append(local[cut:] + local[:cut])
    # Channel c starts at NIC c mod nNets: the rings take the NICs in turn, so that a call on
    # fewer channels than rings spreads over the NICs too.
    by_nic: dict[int, list[list[int]]] = {}
    for path in paths:
        by_nic.setdefault(nics[path[0]], []).append(path)
    turns = max(len(p) for p in by_nic.values())
    order = [by_nic[nic][k] for k in range(turns) for nic in sorted(by_nic) if k < len(by_nic[nic])]
    return [tuple(g[i] for g in groups for i in path) for path in order]


def _nic_hops(topology: Topology, gpus: np.ndarray) -> list[int]:
    """Links on the shortest path from each GPU of ``gpus`` to its NIC inside its server (a
    GPU and a NIC under one PCIe switch: 2; through the CPU: 4; through both sockets: 5)."""
    hops = []
    for gpu in gpus.tolist():
        nic, server = int(topology.node_nic[gpu]), int(topology.node_server[gpu])
        seen, frontier, depth = {gpu}, [gpu], 0
        while frontier and nic not in seen:
            depth += 1
            reached = []
            for node in frontier:
                for link in topology.links_from(node).tolist():
                    src, dst = int(topology.link_src[link]), int(topology.link_dst[link])
                    other = dst if src == node else src
                    if other not in seen and int(topology.node_server[other]) == server:
                        seen.add(other)
                        reached.append(other)
            frontier = reached
        hops.append(depth if nic in seen else len(topology.node_kind))
    return hops


def rank_servers(topology: Topology, ranks: Sequence[str]) -> dict[str, str]:
    """Server name of each rank; a node outside every server is a server of its own."""
    servers = topology.node_server[topology.node_ids(ranks)].tolist()
    return {r: topology.server_names[s] if s >= 0 else r for r, s in zip(ranks, servers, strict=True)}


def mesh_link_counts(topology: Topology, ranks: Sequence[str]) -> np.ndarray:
    """Direct NVLinks between ranks, in units of the thinnest one (int64 matrix)."""
    ids = topology.node_ids(ranks)
    position = np.full(topology.n_nodes, -1, dtype=np.int64)
    position[ids] = np.arange(ids.size)
    a, b = position[topology.link_src], position[topology.link_dst]
    direct = np.flatnonzero((a >= 0) & (b >= 0) & (topology.link_tier == LinkTier.SCALE_UP))
    counts = np.zeros((ids.size, ids.size), dtype=np.int64)
    if direct.size:
        capacity = topology.link_capacity_Bps[direct]
        counts[a[direct], b[direct]] = np.rint(capacity / capacity.min()).astype(np.int64)
    return counts
