"""Failures and degradation: a topology with links, NICs or switches taken out or slowed.

A what-if about a broken cluster ("what does my all-reduce take with n0's NIC 3 down?") runs
on a copy of the topology with the broken parts removed or slowed, made by
:func:`apply_failures` (a scenario's ``fail`` and ``degrade`` options).

Patterns
    Shell-style patterns (:func:`fnmatch.fnmatchcase`: ``*``, ``?``, ``[...]``; case
    counts) matched against node names and link names. A pattern selects every link whose
    name it matches, every link touching a node whose name it matches, and the reverse of
    each selected link (the other direction of the same cable: a cable fails or slows as a
    whole, so ``"n0.nic3->ib.su0.rail3"`` takes ``"ib.su0.rail3->n0.nic3"`` with it). A
    pattern that matches no node and no link name is an error naming it.
``fail``
    The selected links are removed. A failed node keeps its name but has no links left,
    so that an error can name it.
``degrade``
    Pattern -> factor in (0, 1]: the selected links' capacities are multiplied by the
    factor (latencies are kept). A link selected by several patterns takes the product of
    their factors; a failed link stays failed. A factor of 0 is a failure (use ``fail``);
    above 1 is an upgrade, which the topology's own parameters express (link figures,
    switch models).

Rerouting
    Routing runs on the result, so no route crosses a removed link: between servers, ECMP
    and D-mod-k choose among the next hops left, over the remaining switches. A node whose
    NIC (``Topology.node_nic``: a GPU's rail NIC) lost all its network links is moved to
    the NIC of its server on the same network that is nearest over host links (fewest
    hops through PCIe switches and CPUs, then the lowest node id), and everything that
    reads the topology follows: routes, ring orders and NCCL's channel search. On a DGX
    H100 whose ``nic3`` failed, GPU 3 leaves through ``nic0`` (PCIe switch 3, CPU 0, PCIe
    switch 0), so ``nic0`` carries rails 0 and 3. Where no NIC of that network is left in
    the server, the node has none (-1): collectives refuse it, naming the rank, and its
    other traffic leaves as a node without a NIC does (through the nearest port of any
    network). A pair that no route joins any more is an error naming the flow (or the
    collective) and both nodes.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from flowsim.errors import InputError
from flowsim.hardware import LinkTier
from flowsim.routing import Router
from flowsim.topology import NETWORK_SWITCH_KINDS, NodeKind, Topology

__all__ = ["apply_failures", "check_degrade_factor", "describe_changes", "select_links"]


def select_links(topology: Topology, pattern: str) -> np.ndarray:
    """Ids (int64, ascending) of the links ``pattern`` selects (see the module docstring).

    Raises
    ------
    InputError
        When ``pattern`` is not a non-empty string or matches no node or link name.
    """
    if not isinstance(pattern, str) or not pattern:
        raise InputError(f"expected a node or link name pattern (a non-empty string), got {pattern!r}")
    t = topology
    nodes = np.fromiter((fnmatchcase(name, pattern) for name in t.node_names), dtype=bool, count=t.n_nodes)
    links = np.fromiter((fnmatchcase(name, pattern) for name in t.link_names), dtype=bool, count=t.n_links)
    if not nodes.any() and not links.any():
        raise InputError(f"pattern {pattern!r} matches no node or link name")
    selected = links | nodes[t.link_src] | nodes[t.link_dst]
    # The other direction of each selected cable: the links from its head back to its tail.
    pair = t.link_src * t.n_nodes + t.link_dst
    reverse = t.link_dst[selected] * t.n_nodes + t.link_src[selected]
    selected |= np.isin(pair, reverse)
    return np.flatnonzero(selected).astype(np.int64)


def check_degrade_factor(factor: object) -> float:
    """``factor`` as a float; an :class:`InputError` unless it is a real number in (0, 1]."""
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or not 0.0 < float(factor) <= 1.0:
        raise InputError(f"expected a capacity factor in (0, 1], got {factor!r} (0 is a failure: use fail)")
    return float(factor)


def apply_failures(
    topology: Topology, *, fail: Iterable[str] = (), degrade: Mapping[str, float] | None = None
) -> Topology:
    """``topology`` with the links ``fail`` selects removed and those ``degrade`` selects
    slowed, and nodes whose NIC lost its network moved to the nearest NIC left.

    Parameters
    ----------
    topology : Topology
    fail : iterable of str
        Node or link name patterns (see the module docstring).
    degrade : mapping of str to float, optional
        Pattern -> capacity factor in (0, 1].

    Returns
    -------
    Topology
        ``topology`` itself when there is nothing to apply; else a new one with the same
        nodes and servers, the links left in their order (names kept) and the new NIC of
        each node whose NIC was cut off its network.

    Raises
    ------
    InputError
        Naming the pattern that matches nothing or has a bad factor, by its key as a
        scenario writes it (``fail[0]``, ``degrade."ib.spine*"``).

    Examples
    --------
    >>> from flowsim.fabrics import build_cluster
    >>> cluster = build_cluster("dgx_h100", 2, figure="effective")
    >>> broken = apply_failures(cluster, fail=["n0.nic3"], degrade={"ib.spine*": 0.5})
    >>> cluster.n_links - broken.n_links  # n0.nic3's PCIe and InfiniBand cables
    4
    >>> broken.node_names[int(broken.node_nic[broken.node_id("n0.gpu3")])]
    'n0.nic0'
    """
    if isinstance(fail, str):
        raise InputError(f"fail: expected a list of patterns, got the string {fail!r}")
    patterns = list(fail)
    factors = dict(degrade or {})
    if not patterns and not factors:
        return topology
    t = topology
    failed = np.zeros(t.n_links, dtype=bool)
    for i, pattern in enumerate(patterns):
        try:
            failed[select_links(t, pattern)] = True
        except InputError as err:
            raise InputError(f"fail[{i}]: {err}") from None
    scale = np.ones(t.n_links)
    for pattern, factor in factors.items():
        try:
            scale[select_links(t, pattern)] *= check_degrade_factor(factor)
        except InputError as err:
            raise InputError(f'degrade."{pattern}": {err}') from None
    keep = np.flatnonzero(~failed)
    broken = _with_links(t, keep, t.link_capacity_Bps[keep] * scale[keep], t.node_nic)
    node_nic = _moved_nics(t, broken)
    if node_nic is None:
        return broken
    return _with_links(broken, np.arange(broken.n_links), broken.link_capacity_Bps, node_nic)


def _with_links(t: Topology, keep: np.ndarray, capacity_Bps: np.ndarray, node_nic: np.ndarray) -> Topology:
    """``t`` with links ``keep`` only, at ``capacity_Bps``, and nodes leaving through ``node_nic``."""
    return Topology(
        node_names=t.node_names,
        node_kind=t.node_kind,
        node_server=t.node_server,
        node_nic=node_nic,
        server_names=t.server_names,
        server_p2p=t.server_p2p,
        server_net_latency_s=t.server_net_latency_s,
        server_step_latency_s=t.server_step_latency_s,
        server_gpu_sm=t.server_gpu_sm,
        server_nic_ports=t.server_nic_ports,
        nccl_env=t.nccl_env,
        link_names=tuple(t.link_names[i] for i in keep.tolist()),
        link_src=t.link_src[keep],
        link_dst=t.link_dst[keep],
        link_capacity_Bps=capacity_Bps,
        link_latency_s=t.link_latency_s[keep],
        link_technology=tuple(t.link_technology[i] for i in keep.tolist()),
        link_tier=t.link_tier[keep],
        link_shared=t.link_shared[keep],
    )


def _network(t: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Which nodes are network endpoints (a node off the switches with a network link, as
    routing counts them), and each node's network (connected component of network links)."""
    network = t.link_tier == LinkTier.SCALE_OUT
    touches = np.zeros(t.n_nodes, dtype=bool)
    touches[t.link_src[network]] = True
    touches[t.link_dst[network]] = True
    endpoint = touches & ~np.isin(t.node_kind, NETWORK_SWITCH_KINDS)
    graph = coo_matrix(
        (np.ones(int(network.sum())), (t.link_src[network], t.link_dst[network])), shape=(t.n_nodes, t.n_nodes)
    )
    return endpoint, connected_components(graph, directed=False)[1]


def _moved_nics(before: Topology, after: Topology) -> np.ndarray | None:
    """New ``node_nic`` for ``after``: each node whose NIC was a network endpoint in
    ``before`` and is none in ``after`` takes the nearest NIC of its server left on that
    network (-1 if none); None when no node needs it."""
    was_endpoint, network = _network(before)
    is_endpoint, _ = _network(after)
    nic = after.node_nic
    cut = (nic >= 0) & was_endpoint[np.maximum(nic, 0)] & ~is_endpoint[np.maximum(nic, 0)]
    movers = np.flatnonzero(cut)
    if not movers.size:
        return None
    router = Router(after)
    moved = nic.copy()
    for node in movers.tolist():
        old = int(nic[node])
        candidates = np.flatnonzero(
            is_endpoint
            & (after.node_kind == NodeKind.NIC)
            & (after.node_server == after.node_server[node])
            & (network == network[old])
        )
        hops = router.host_hops(node, candidates) if candidates.size else candidates
        reachable = hops >= 0
        # argmin takes the first of the nearest: the lowest node id.
        moved[node] = int(candidates[reachable][np.argmin(hops[reachable])]) if reachable.any() else -1
    return moved


def describe_changes(before: Topology, after: Topology, *, most: int = 4) -> str:
    """One line saying what :func:`apply_failures` changed from ``before`` to ``after``:
    links removed and slowed, and nodes that now leave through another NIC (the first
    ``most`` of them); empty when nothing changed."""
    if after is before:
        return ""
    removed = before.n_links - after.n_links
    slowed = sum(
        1 for name, capacity in zip(after.link_names, after.link_capacity_Bps.tolist(), strict=True)
        if capacity < before.link_capacity_Bps[before.link_index[name]]
    )
    parts = [f"{removed:,} links removed", f"{slowed:,} slowed"]
    moved = np.flatnonzero(after.node_nic != before.node_nic).tolist()
    names = before.node_names
    for node in moved[:most]:
        new = int(after.node_nic[node])
        parts.append(f"{names[node]} leaves through {names[new] if new >= 0 else 'no NIC'} "
                     f"(was {names[int(before.node_nic[node])]})")
    if len(moved) > most:
        parts.append(f"{len(moved) - most:,} more nodes moved to another NIC")
    return ", ".join(parts)
