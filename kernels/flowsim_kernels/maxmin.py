"""Weighted max-min fair rates by progressive filling over lazily ordered link levels."""

import numpy as np
from numba import njit

from flowsim_kernels.csr import csr_row_lengths
from flowsim_kernels.heap import heap_pop, heap_push, heap_replace_top

# Columns of the per-link fill state, side by side so that freezing a flow touches one
# cache line per link it crosses.
RESIDUAL = 0  # capacity not yet given to frozen flows, B/s
WEIGHT_SUM = 1  # sum of the weights of the unfrozen flows
UNFROZEN = 2  # number of unfrozen flows (exact in float64)
WEIGHT_COUNTED = 3  # the weight sum when last summed afresh
#: Number of columns of the fill state.
STATE_COLUMNS = 4

# A running weight sum that fell below this share of the weight summed into it has lost
# digits to cancellation (at most about 1e-16 / this, relative): it is summed afresh.
_CANCELLED = 1e-4


@njit(cache=True)
def max_min_fair(
    flow_link_indptr,
    flow_link_indices,
    link_flow_indptr,
    link_flow_indices,
    capacity_Bps,
    weight,
    cap_Bps,
    tie_rel_tol,
    rate_Bps,
):
    """Weighted max-min fair allocation of flows over shared directed links.

    Parameters
    ----------
    flow_link_indptr : int64[n_flows + 1]
    flow_link_indices : int64[n_incidences]
        Flow -> link CSR: the links each flow crosses. Not mutated.
    link_flow_indptr : int64[n_links + 1]
    link_flow_indices : int64[n_incidences]
        Its transpose: the flows crossing each link. Not mutated.
    capacity_Bps : float64[n_links]
        Link capacities (B/s), finite and > 0. Not mutated.
    weight : float64[n_flows]
        Flow weights, finite and > 0. Not mutated.
    cap_Bps : float64[n_flows]
        Flow rate caps (B/s), > 0; ``inf`` for none. A flow with no link must have a finite
        cap. Not mutated.
    tie_rel_tol : float
        Links (and caps) whose fair level is within this relative distance of the lowest one
        are frozen in the same round.
    rate_Bps : float64[n_flows]
        Output: each flow's rate (B/s). Mutated.

    Returns
    -------
    n_rounds : int
        Number of filling rounds (distinct freezing levels).

    Notes
    -----
    Sets up the fill state for all flows and links and runs :func:`progressive_fill`; see
    there for the algorithm. Cost O(I + N_L log N_L + F_c log F_c) plus the heap traffic of
    re-queued links, for I incidences, N_L links that carry flows and F_c capped flows.
    """
    n_flows = flow_link_indptr.shape[0] - 1
    n_links = link_flow_indptr.shape[0] - 1
    state = np.empty((n_links, STATE_COLUMNS), dtype=np.float64)
    n_busy = 0
    for link in range(n_links):
        if link_flow_indptr[link + 1] > link_flow_indptr[link]:
            n_busy += 1
    busy = np.empty(n_busy, dtype=np.int64)
    j = 0
    for link in range(n_links):
        if link_flow_indptr[link + 1] > link_flow_indptr[link]:
            busy[j] = link
            j += 1
        state[link, RESIDUAL] = capacity_Bps[link]
    flows = np.arange(n_flows)
    in_fill = np.ones(n_flows, dtype=np.bool_)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    work_keys = np.empty(3 * n_busy + 2 * n_flows, dtype=np.float64)
    work_items = np.empty(3 * n_busy + 2 * n_flows, dtype=np.int64)
    return progressive_fill(
        flows, busy, in_fill, frozen,
        flow_link_indptr, flow_link_indices,
        link_flow_indptr[:-1], csr_row_lengths(link_flow_indptr), link_flow_indices,
        weight, cap_Bps, tie_rel_tol, False, state, work_keys, work_items, rate_Bps,
    )


@njit(cache=True)
def progressive_fill(
    flows,
    links,
    in_fill,
    frozen,
    flow_link_indptr,
    flow_link_indices,
    link_slot_start,
    link_slot_count,
    slot_flow,
    weight,
    cap_Bps,
    tie_rel_tol,
    summed,
    state,
    work_keys,
    work_items,
    rate_Bps,
):
    """Max-min fair rates of a set of flows over the residual capacity of their links.

    The core of :func:`max_min_fair` and of the event engine's partial re-solves.

    Parameters
    ----------
    flows : int64[n_fill]
        The flows to allocate. Not mutated.
    links : int64[n_fill_links]
        Every link crossed by those flows with a finite residual (others may be listed).
        Not mutated.
    in_fill : bool[n_flows]
        True exactly for ``flows``; slots of other flows are skipped. Not mutated.
    frozen : bool[n_flows]
        Workspace, False for ``flows`` on entry; True for them on return.
    flow_link_indptr, flow_link_indices : int64[n_flows + 1], int64[n_incidences]
        Flow -> link CSR. Not mutated.
    link_slot_start, link_slot_count : int64[n_links]
        Link ``l``'s flows are ``slot_flow[link_slot_start[l]:][:link_slot_count[l]]``; they
        include every flow of ``flows`` crossing ``l``. Not mutated.
    slot_flow : int64[n_slots]
        Not mutated.
    weight, cap_Bps : float64[n_flows]
        Weights (> 0) and rate caps (B/s, > 0, inf for none). Not mutated.
    tie_rel_tol : float
        Levels within this relative distance of the lowest are frozen in the same round.
    summed : bool
        Whether the caller has set ``state[l, WEIGHT_SUM]`` and ``state[l, UNFROZEN]`` of
        each link of ``links`` to the weight sum and the number of ``flows`` crossing it,
        added in the order of ``flows`` from 0.0 (as here, so the values are the same to the
        bit): the event engine sums the weights for its bounds anyway, and taking them from
        there saves a pass over the routes.
    state : float64[n_links, >= STATE_COLUMNS]
        On entry ``state[l, RESIDUAL]`` is the capacity left for ``flows`` on each link of
        ``links``, ``inf`` for a link the caller knows they cannot fill (it is never
        ordered, and need not be listed; every flow must still meet a finite link or its
        cap); the other columns of listed links are set here, those of unlisted ones are
        scratch. Columns from ``STATE_COLUMNS`` on are the caller's and left alone. Mutated.
    work_keys, work_items : float64[m], int64[m], m >= 3 len(links) + 2 len(flows)
        Workspace (the link heap and the sorted link and cap streams: nothing is allocated
        here, since the event engine calls this for every re-solve).
    rate_Bps : float64[n_flows]
        Output: the rate of each flow of ``flows``. Other entries untouched.

    Returns
    -------
    n_rounds : int

    Notes
    -----
    Progressive filling on the fair level ``rate / weight``. A link's level is the level at
    which it would saturate, ``residual / sum of unfrozen weights``. Freezing a flow at the
    current level ``L`` only raises the level of an unsaturated link it crosses
    (``(C - L w) / (W - w) >= C / W`` when ``C / W >= L``), so a link's last computed level
    is a lower bound of its true level. Links are taken in order of their initial level from
    one sorted array (a stable merge sort, so ties keep the order of ``links``), merged
    with a min-heap holding only links whose level was out of date when they came up
    ("lazy key increase"): the lowest entry whose recomputed level equals its key is the
    true lowest level, as every other key bounds its link's level from below. Caps form a
    second stream sorted by ``cap / weight``. Each round takes the lowest
    level ``L`` and freezes, with all their unfrozen flows, every cap at ``L``, then every
    link at ``L`` (within ``tie_rel_tol``, its flows at ``L``), then every cap within
    ``tie_rel_tol`` above ``L``: a flow whose link is in the round gets the link's level
    even when its cap is a hair higher. Before a link freezes flows, a weight sum that fell below 1e-4
    of the weight summed into it is summed afresh from its slots: with weights far apart,
    taking the large ones back out would otherwise leave the rest with too few digits and
    the link short of saturation.

    Cost: O(I + N log N + R log R + F_c log F_c) for I incidences of ``flows``, N links
    with flows, R re-queued links and F_c capped flows; a frozen link scans its slots once,
    twice when its weights are summed afresh.
    """
    n_links_in = links.shape[0]
    if not summed:
        for j in range(n_links_in):
            link = links[j]
            state[link, WEIGHT_SUM] = 0.0
            state[link, UNFROZEN] = 0.0
        for i in range(flows.shape[0]):
            f = flows[i]
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                link = flow_link_indices[k]
                state[link, WEIGHT_SUM] += weight[f]
                state[link, UNFROZEN] += 1.0

    # Workspace layout: the link heap, then the links by initial level, then the capped flows
    # by cap level, then room for sorting.
    sorted_from = n_links_in
    n_busy = 0
    for j in range(n_links_in):
        link = links[j]
        if state[link, UNFROZEN] > 0 and state[link, RESIDUAL] < np.inf:
            state[link, WEIGHT_COUNTED] = state[link, WEIGHT_SUM]
            work_items[sorted_from + n_busy] = link
            work_keys[sorted_from + n_busy] = max(state[link, RESIDUAL], 0.0) / state[link, WEIGHT_SUM]
            n_busy += 1
    cap_from = sorted_from + n_busy
    n_capped = 0
    for i in range(flows.shape[0]):
        f = flows[i]
        if cap_Bps[f] < np.inf:
            work_items[cap_from + n_capped] = f
            work_keys[cap_from + n_capped] = cap_Bps[f] / weight[f]
            n_capped += 1
    spare = cap_from + n_capped
    _sort_pairs(work_keys, work_items, sorted_from, n_busy, spare)
    _sort_pairs(work_keys, work_items, cap_from, n_capped, spare)
    sorted_end = sorted_from + n_busy
    next_sorted = sorted_from
    heap_size = 0
    next_cap = cap_from
    cap_end = cap_from + n_capped

    n_left = flows.shape[0]
    n_rounds = 0
    while n_left > 0:
        while next_cap < cap_end and frozen[work_items[next_cap]]:
            next_cap += 1
        cap_key = work_keys[next_cap] if next_cap < cap_end else np.inf
        # Settle the lowest link entry until its key is its link's true level, which makes
        # it the lowest level of all links.
        while True:
            from_heap, key, link = _lowest(work_keys, work_items, next_sorted, sorted_end, heap_size)
            if key == np.inf or key > cap_key:
                break
            if state[link, UNFROZEN] > 0:
                current = _level(state, link, key)
                if current == key:
                    break
            else:
                current = np.inf  # nothing left to freeze: drop the entry
            if from_heap:
                if current < np.inf:
                    heap_replace_top(work_keys, work_items, heap_size, current, link)
                else:
                    heap_size = heap_pop(work_keys, work_items, heap_size)
            else:
                next_sorted += 1
                if current < np.inf:
                    heap_size = heap_push(work_keys, work_items, heap_size, current, link)
        fill = min(key, cap_key)
        if fill == np.inf:
            break  # only flows with neither a link nor a cap remain: callers reject those
        threshold = fill * (1.0 + tie_rel_tol)
        n_rounds += 1

        # Caps at the round's level first, then its links, then the caps a hair above it: a
        # flow whose link is in the round gets the link's level, as in exact filling; frozen
        # at its cap first, it would take capacity that the flows left on the link are owed
        # (all of it, for a flow of weight 1e12 times smaller).
        next_cap, n_left = _freeze_caps(
            fill, next_cap, cap_end, n_left, work_keys, work_items, cap_Bps, weight, flow_link_indptr,
            flow_link_indices, frozen, rate_Bps, state,
        )

        while True:
            from_heap, key, link = _lowest(work_keys, work_items, next_sorted, sorted_end, heap_size)
            if key > threshold:
                break
            if from_heap:
                heap_size = heap_pop(work_keys, work_items, heap_size)
            else:
                next_sorted += 1
            if state[link, UNFROZEN] == 0:
                continue
            start = link_slot_start[link]
            if state[link, WEIGHT_SUM] < _CANCELLED * state[link, WEIGHT_COUNTED]:
                # Most of the weight summed here has frozen (weights far apart): sum what is
                # left afresh, and take the level it gives, even a hair below the bound.
                w = 0.0
                for s in range(start, start + link_slot_count[link]):
                    f = slot_flow[s]
                    if in_fill[f] and not frozen[f]:
                        w += weight[f]
                state[link, WEIGHT_SUM] = w
                state[link, WEIGHT_COUNTED] = w
                current = max(state[link, RESIDUAL], 0.0) / w
            else:
                current = _level(state, link, key)
            if current > threshold:
                heap_size = heap_push(work_keys, work_items, heap_size, current, link)
                continue
            level = min(fill, current)
            for s in range(start, start + link_slot_count[link]):
                f = slot_flow[s]
                if in_fill[f] and not frozen[f]:
                    _freeze(
                        f, level * weight[f], weight[f], flow_link_indptr, flow_link_indices, frozen, rate_Bps, state
                    )
                    n_left -= 1

        next_cap, n_left = _freeze_caps(
            threshold, next_cap, cap_end, n_left, work_keys, work_items, cap_Bps, weight, flow_link_indptr,
            flow_link_indices, frozen, rate_Bps, state,
        )
    return n_rounds


@njit(cache=True, inline="always")
def _freeze_caps(
    up_to, next_cap, cap_end, n_left, keys, items, cap_Bps, weight, flow_link_indptr, flow_link_indices, frozen,
    rate_Bps, state,
):
    """Freeze at their caps the unfrozen flows of the cap stream ``items[next_cap:cap_end]``
    whose cap level is at most ``up_to``; return the stream's new head and ``n_left``."""
    while next_cap < cap_end and keys[next_cap] <= up_to:
        f = items[next_cap]
        next_cap += 1
        if not frozen[f]:
            _freeze(f, cap_Bps[f], weight[f], flow_link_indptr, flow_link_indices, frozen, rate_Bps, state)
            n_left -= 1
    return next_cap, n_left


@njit(cache=True, inline="always")
def _lowest(keys, items, next_sorted, sorted_end, heap_size):
    """``(from_heap, key, link)`` of the lower of the two queues' heads; key inf if both empty.

    The heap is ``keys[:heap_size]``, the sorted queue ``keys[next_sorted:sorted_end]``.
    """
    sorted_key = keys[next_sorted] if next_sorted < sorted_end else np.inf
    if heap_size > 0 and keys[0] < sorted_key:
        return True, keys[0], items[0]
    link = items[next_sorted] if next_sorted < sorted_end else -1
    return False, sorted_key, link


# Runs this short are sorted by insertion before merging.
_RUN = 16


@njit(cache=True)
def _sort_pairs(keys, items, lo, n, spare):
    """Sort ``keys[lo:lo + n]`` ascending, stably, moving ``items`` along.

    ``keys[spare:spare + n]`` (and ``items``) is scratch space, not overlapping. Insertion
    sort of short runs, then bottom-up merging back and forth: O(n log n), no allocation.
    """
    for run in range(lo, lo + n, _RUN):
        end = min(run + _RUN, lo + n)
        for i in range(run + 1, end):
            key = keys[i]
            item = items[i]
            j = i
            while j > run and keys[j - 1] > key:
                keys[j] = keys[j - 1]
                items[j] = items[j - 1]
                j -= 1
            keys[j] = key
            items[j] = item
    src = lo
    dst = spare
    width = _RUN
    while width < n:
        for left in range(0, n, 2 * width):
            mid = min(left + width, n)
            right = min(left + 2 * width, n)
            i = left
            j = mid
            for k in range(left, right):
                if j >= right or (i < mid and keys[src + i] <= keys[src + j]):
                    keys[dst + k] = keys[src + i]
                    items[dst + k] = items[src + i]
                    i += 1
                else:
                    keys[dst + k] = keys[src + j]
                    items[dst + k] = items[src + j]
                    j += 1
        src, dst = dst, src
        width *= 2
    if src != lo:
        for k in range(n):
            keys[lo + k] = keys[src + k]
            items[lo + k] = items[src + k]


@njit(cache=True, inline="always")
def _level(state, link, lower_bound):
    # A link's level never drops while filling; rounding can make the quotient dip a hair
    # below the bound it had, so keep the bound.
    return max(state[link, RESIDUAL] / state[link, WEIGHT_SUM], lower_bound)


@njit(cache=True, inline="always")
def _freeze(f, rate, w, flow_link_indptr, flow_link_indices, frozen, rate_Bps, state):
    frozen[f] = True
    rate_Bps[f] = rate
    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
        link = flow_link_indices[k]
        state[link, RESIDUAL] -= rate
        state[link, WEIGHT_SUM] -= w
        state[link, UNFROZEN] -= 1.0
