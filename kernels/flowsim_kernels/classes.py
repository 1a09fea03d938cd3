"""Classes of flows and links that share rates at every instant: colour refinement (1-WL)
of the flow-link-dependency graph to its coarsest equitable partition, and an exact check
that a partition is equitable (docs/model.md "Flow classes")."""

import numpy as np
from numba import njit

# splitmix64's constants (Steele, Lea and Flood, "Fast splittable pseudorandom number
# generators", OOPSLA 2014): a bijective mix of 64 bits, so distinct inputs stay distinct
# and sums of mixed values hash multisets with collisions about as rare as random 64-bit
# numbers collide.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
# Offsets that keep an item's own class and its three kinds of neighbour (links, flows,
# dependencies) apart: arbitrary odd 64-bit constants, far apart, so that small class
# numbers plus one never equal small class numbers plus another (with small offsets, own
# class 0 beside neighbour class 1 hashed as own class 1 beside neighbour class 0).
_OWN_SEED = np.uint64(0x8F3A1C5B2D7E9461)
_LINK_SEED = np.uint64(0x5BD1E995C6A4A793)
_FLOW_SEED = np.uint64(0xC2B2AE3D27D4EB4F)
_DEP_SEED = np.uint64(0x165667B19E3779F9)


@njit(cache=True, inline="always")
def _mix(x):
    z = x + _GOLDEN
    z = (z ^ (z >> _S30)) * _MUL1
    z = (z ^ (z >> _S27)) * _MUL2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def _slot(slot_key, slot_id, mask, key):
    """The slot of ``key`` in an open-addressing table (linear probing): where it is, or the
    empty slot where it goes."""
    h = _mix(key) & mask
    while slot_id[h] >= 0 and slot_key[h] != key:
        h = (h + np.uint64(1)) & mask
    return h


@njit(cache=True)
def _dense(keys, ids):
    """Number the distinct values of ``keys`` 0, 1, ... in order of first appearance into
    ``ids``; return how many there are. An open-addressing hash table kept at most half
    full, grown (doubled and refilled) as distinct values come: its memory follows the
    distinct values (the classes, usually few), not the keys (millions of flows). O(n)
    amortised."""
    n = keys.shape[0]
    size = 64
    mask = np.uint64(size - 1)
    slot_key = np.empty(size, dtype=np.uint64)
    slot_id = np.full(size, -1, dtype=np.int64)
    n_groups = 0
    for j in range(n):
        key = keys[j]
        h = _slot(slot_key, slot_id, mask, key)
        if slot_id[h] < 0:
            if 2 * (n_groups + 1) > size:
                size *= 2
                mask = np.uint64(size - 1)
                old_key, old_id = slot_key, slot_id
                slot_key = np.empty(size, dtype=np.uint64)
                slot_id = np.full(size, -1, dtype=np.int64)
                for k in range(old_id.shape[0]):
                    if old_id[k] >= 0:
                        g = _slot(slot_key, slot_id, mask, old_key[k])
                        slot_key[g] = old_key[k]
                        slot_id[g] = old_id[k]
                h = _slot(slot_key, slot_id, mask, key)
            slot_key[h] = key
            slot_id[h] = n_groups
            n_groups += 1
        ids[j] = slot_id[h]
    return n_groups


@njit(cache=True)
def _waits_for_earlier(dep_indptr, dep_indices):
    """Whether every flow depends only on flows listed before it."""
    for f in range(dep_indptr.shape[0] - 1):
        for k in range(dep_indptr[f], dep_indptr[f + 1]):
            if dep_indices[k] >= f:
                return False
    return True


@njit(cache=True)
def topological_order(dep_indptr, dep_indices):
    """Flows in an order where every flow comes after the flows it depends on (Kahn's
    algorithm; the dependencies must form a DAG). O(n + n_deps)."""
    n = dep_indptr.shape[0] - 1
    n_waiting = np.empty(n, dtype=np.int64)
    head_of = np.zeros(n + 1, dtype=np.int64)
    for f in range(n):
        n_waiting[f] = dep_indptr[f + 1] - dep_indptr[f]
        for k in range(dep_indptr[f], dep_indptr[f + 1]):
            head_of[dep_indices[k] + 1] += 1
    for f in range(n):
        head_of[f + 1] += head_of[f]
    dependents = np.empty(dep_indices.shape[0], dtype=np.int64)
    fill = head_of[:-1].copy()
    for f in range(n):
        for k in range(dep_indptr[f], dep_indptr[f + 1]):
            d = dep_indices[k]
            dependents[fill[d]] = f
            fill[d] += 1
    order = np.empty(n, dtype=np.int64)
    tail = 0
    for f in range(n):
        if n_waiting[f] == 0:
            order[tail] = f
            tail += 1
    head = 0
    while head < tail:
        d = order[head]
        head += 1
        for k in range(head_of[d], head_of[d + 1]):
            f = dependents[k]
            n_waiting[f] -= 1
            if n_waiting[f] == 0:
                order[tail] = f
                tail += 1
    return order


@njit(cache=True)
def refine_classes(
    flow_key, link_key, flow_link_indptr, flow_link_indices, link_flow_indptr, link_flow_indices,
    dep_indptr, dep_indices, transfers, cyclic, most_flow_classes, flow_colour, link_colour,
):
    """Coarsest equitable refinement of the colours of flows and links, by colour refinement.

    Parameters
    ----------
    flow_key : uint64[n_flows]
        Hash of each flow's attributes: flows start in one class per distinct key. Mutated
        (workspace).
    link_key : uint64[n_links]
        Hash of each link's attributes, likewise.
    flow_link_indptr, flow_link_indices, link_flow_indptr, link_flow_indices
        The flow -> link CSR and its transpose. Not mutated.
    dep_indptr, dep_indices : int64[n_flows + 1], int64[n_deps]
        The flows each flow waits for (a DAG unless ``cyclic``). Not mutated.
    transfers : bool[n_flows]
        Flows that take a rate; the links of the others play no part. Not mutated.
    cyclic : bool
        Whether the dependencies may form cycles (a ring's hops, each forwarding what the
        one before it sent): then each round hashes the classes of the flows a flow depends
        on as the round before left them, and a difference travels one dependency a round.
    most_flow_classes : int
        Give up (returning -1 classes) once there are more flow classes than this.
    flow_colour, link_colour : int64[n_flows], int64[n_links]
        Output: the class of each flow and link, numbered by first appearance.

    Returns
    -------
    n_flow_classes, n_link_classes, n_rounds : int

    Notes
    -----
    Each round: a link's new class hashes its class and the multiset of the classes of the
    transferring flows crossing it; a flow's hashes its class, the multiset of its links'
    classes (if it transfers) and, in topological order, the multiset of the new classes
    of the flows it depends on, so one pass settles the dependencies whatever the depth of
    the DAG (with ``cyclic``, in any order, their classes of the round before).
    Multisets hash as sums of mixed values. It stops when a round splits no class. Hashes
    may collide, in principle: callers check the result with :func:`is_equitable`.
    O(rounds x (incidences + deps + (flows + links) log)).
    """
    n_flows = flow_colour.shape[0]
    n_links = link_colour.shape[0]
    # Builders list a flow after the flows it waits for; then their order is topological
    # as it stands, and the sort (five arrays of the flows' size) is not needed.
    forward = cyclic or _waits_for_earlier(dep_indptr, dep_indices)
    order = np.empty(0, dtype=np.int64) if forward else topological_order(dep_indptr, dep_indices)
    n_fc = _dense(flow_key, flow_colour)
    n_lc = _dense(link_key, link_colour)
    n_rounds = 0
    while n_fc <= most_flow_classes:
        n_rounds += 1
        for link in range(n_links):
            h = np.uint64(0)
            for k in range(link_flow_indptr[link], link_flow_indptr[link + 1]):
                f = link_flow_indices[k]
                if transfers[f]:
                    h += _mix(np.uint64(flow_colour[f]) + _FLOW_SEED)
            link_key[link] = _mix(_mix(np.uint64(link_colour[link]) + _OWN_SEED) + h)
        new_lc = _dense(link_key, link_colour)
        for i in range(n_flows):
            f = i if forward else order[i]
            h = np.uint64(0)
            if transfers[f]:
                for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                    h += _mix(np.uint64(link_colour[flow_link_indices[k]]) + _LINK_SEED)
            d_sum = np.uint64(0)
            for k in range(dep_indptr[f], dep_indptr[f + 1]):
                d = dep_indices[k]
                d_sum += _mix((np.uint64(flow_colour[d]) if cyclic else flow_key[d]) + _DEP_SEED)
            flow_key[f] = _mix(_mix(_mix(np.uint64(flow_colour[f]) + _OWN_SEED) + h) + d_sum)
        new_fc = _dense(flow_key, flow_colour)
        if new_fc == n_fc and new_lc == n_lc:
            return n_fc, n_lc, n_rounds
        if new_fc < n_fc or new_lc < n_lc:
            break  # refinement never merges: hashes collided, give up
        n_fc = new_fc
        n_lc = new_lc
    return -1, n_lc, n_rounds


@njit(cache=True)
def _same_counts(indptr, indices, row, rep, colour, transfers, scratch):
    """Whether rows ``row`` and ``rep`` of a CSR have the same multiset of ``colour`` over
    their entries (entries whose item does not transfer left out when ``transfers`` has
    any entries). ``scratch`` (int64, one per colour) is zero on entry and on return."""
    check = transfers.shape[0] > 0
    for k in range(indptr[row], indptr[row + 1]):
        if not check or transfers[indices[k]]:
            scratch[colour[indices[k]]] += 1
    for k in range(indptr[rep], indptr[rep + 1]):
        if not check or transfers[indices[k]]:
            scratch[colour[indices[k]]] -= 1
    same = True
    for k in range(indptr[row], indptr[row + 1]):
        if not check or transfers[indices[k]]:
            c = colour[indices[k]]
            if scratch[c] != 0:
                same = False
            scratch[c] = 0
    for k in range(indptr[rep], indptr[rep + 1]):
        if not check or transfers[indices[k]]:
            scratch[colour[indices[k]]] = 0
    return same


@njit(cache=True)
def is_equitable(
    flow_class, link_class, n_flow_classes, n_link_classes, flow_link_indptr, flow_link_indices, link_flow_indptr,
    link_flow_indices, dep_indptr, dep_indices, transfers,
):
    """Whether the classes are equitable: every transferring flow of a class crosses as many
    links of each link class as the class's first flow, every link of a class is crossed by
    as many transferring flows of each flow class as its first link, and every flow of a
    class depends on as many flows of each class as its first flow. Transferring or not is
    taken to be part of a flow's class. Exact counting, O(incidences + deps)."""
    n_flows = flow_class.shape[0]
    first_flow = np.full(n_flow_classes, -1, dtype=np.int64)
    for f in range(n_flows):
        if first_flow[flow_class[f]] < 0:
            first_flow[flow_class[f]] = f
    first_link = np.full(n_link_classes, -1, dtype=np.int64)
    for link in range(link_class.shape[0]):
        if first_link[link_class[link]] < 0:
            first_link[link_class[link]] = link
    none = np.zeros(0, dtype=np.bool_)
    link_scratch = np.zeros(n_link_classes, dtype=np.int64)
    flow_scratch = np.zeros(n_flow_classes, dtype=np.int64)
    for f in range(n_flows):
        rep = first_flow[flow_class[f]]
        if transfers[f] != transfers[rep]:
            return False
        if transfers[f] and not _same_counts(flow_link_indptr, flow_link_indices, f, rep, link_class, none,
                                             link_scratch):
            return False
        if not _same_counts(dep_indptr, dep_indices, f, rep, flow_class, none, flow_scratch):
            return False
    for link in range(link_class.shape[0]):
        rep = first_link[link_class[link]]
        if not _same_counts(link_flow_indptr, link_flow_indices, link, rep, flow_class, transfers, flow_scratch):
            return False
    return True


@njit(cache=True)
def route_latency(flow_link_indptr, flow_link_indices, latency_s, overhead_s):
    """Each flow's overhead plus its links' latencies, summed in the order the event engine
    sums them (so the sums are the same to the last bit)."""
    n_flows = flow_link_indptr.shape[0] - 1
    total = overhead_s.copy()
    for f in range(n_flows):
        for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
            total[f] += latency_s[flow_link_indices[k]]
    return total


@njit(cache=True)
def fold_keys(keys, bits):
    """Fold one more column into row hashes, in place: ``keys[i] = mix(keys[i] ^ bits[i])``
    (``bits``: uint64[n], a float64 column's bit patterns). Folding the columns of a table
    one after another from zeros hashes its rows without the table being stacked."""
    for i in range(keys.shape[0]):
        keys[i] = _mix(keys[i] ^ bits[i])


@njit(cache=True)
def quotient_routes(flow_link_indptr, flow_link_indices, link_class, link_class_size, representative, class_size,
                    transfers):
    """The quotient's routes: class ``c`` lists link class ``L`` ``|c| m / |L|`` times, where
    its first flow crosses ``m`` links of ``L`` (the count of flows of ``c`` on each link of
    ``L``, for equitable classes). Returns ``(indptr, indices)``."""
    n_fc = representative.shape[0]
    count = np.zeros(link_class_size.shape[0], dtype=np.int64)
    indptr = np.zeros(n_fc + 1, dtype=np.int64)
    for c in range(n_fc):
        f = representative[c]
        total = 0
        if transfers[f]:
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                count[link_class[flow_link_indices[k]]] += 1
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                lc = link_class[flow_link_indices[k]]
                if count[lc] > 0:
                    total += class_size[c] * count[lc] // link_class_size[lc]
                    count[lc] = 0
        indptr[c + 1] = indptr[c] + total
    indices = np.empty(indptr[n_fc], dtype=np.int64)
    for c in range(n_fc):
        f = representative[c]
        at = indptr[c]
        if transfers[f]:
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                count[link_class[flow_link_indices[k]]] += 1
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                lc = link_class[flow_link_indices[k]]
                if count[lc] > 0:
                    for _ in range(class_size[c] * count[lc] // link_class_size[lc]):
                        indices[at] = lc
                        at += 1
                    count[lc] = 0
    return indptr, indices


@njit(cache=True)
def quotient_dependencies(dep_indptr, dep_indices, flow_class, representative):
    """The quotient's dependencies: each class waits for the classes its first flow waits
    for, each once. Returns ``(indptr, indices)``."""
    n_fc = representative.shape[0]
    seen = np.full(n_fc, -1, dtype=np.int64)
    indptr = np.zeros(n_fc + 1, dtype=np.int64)
    for c in range(n_fc):
        f = representative[c]
        n = 0
        for k in range(dep_indptr[f], dep_indptr[f + 1]):
            d = flow_class[dep_indices[k]]
            if seen[d] != c:
                seen[d] = c
                n += 1
        indptr[c + 1] = indptr[c] + n
    indices = np.empty(indptr[n_fc], dtype=np.int64)
    seen[:] = -1
    for c in range(n_fc):
        f = representative[c]
        at = indptr[c]
        for k in range(dep_indptr[f], dep_indptr[f + 1]):
            d = flow_class[dep_indices[k]]
            if seen[d] != c:
                seen[d] = c
                indices[at] = d
                at += 1
    return indptr, indices


@njit(cache=True)
def first_of_each(classes, n_classes):
    """The first index of each class of ``classes`` (int64[n]), which are numbered 0, 1, ...
    by first appearance (as :func:`refine_classes` numbers them), and how many classes
    appeared: int64[n_classes], int."""
    first = np.empty(n_classes, dtype=np.int64)
    seen = 0
    for i in range(classes.shape[0]):
        if classes[i] == seen and seen < n_classes:
            first[seen] = i
            seen += 1
    return first, seen
