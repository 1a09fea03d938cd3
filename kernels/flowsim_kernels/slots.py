"""Per-link slot blocks in one pool: where the engine keeps the flows transferring over
each link, side by side.

Link ``l`` owns the block ``[start[l], start[l] + cap[l])`` of the pool and its flows fill
the first ``count[l]`` slots. A block starts small (``BLOCK`` slots, or fewer if fewer
flows ever cross the link) and doubles when full, up to the number of flows that ever cross
the link (``total[l]``), so the slots in use stay close together: a few per link, where a
row of the static link -> flow CSR would spread them over every flow of the run. On a
fat-tree at 80% load (benchmarks/bench_engine.py) that took about 8% off the run.

A grown block moves to the pool's unused end. When the end is reached, the blocks are
packed again, in place, each with room for twice its flows; if that would leave less than a
quarter of the pool free, each link gets its whole CSR row instead (``total`` slots, which
never grow again). The pool has one slot per incidence, as many as the static layout.

A moved slot keeps its order within its link (the engine's sums over a link read the same
values in the same order) and each incidence's slot (``inc_slot``) follows it.
"""

import numpy as np
from numba import njit

#: Initial slots per link.
BLOCK = 4


@njit(cache=True)
def initial_blocks(total):
    """Starts and capacities of each link's first block, and the pool's end in use."""
    cap = np.minimum(total, BLOCK)
    start = np.empty_like(total)
    end = 0
    for link in range(total.shape[0]):
        start[link] = end
        end += cap[link]
    return start, cap, end


@njit(cache=True)
def grow_block(link, start, count, cap, total, slot_flow, slot_inc, slot_val, inc_slot, end):
    """Make room for one more flow on full ``link`` (``count < total`` there); return the
    pool's new end in use."""
    size = min(2 * cap[link], total[link])
    if end + size > slot_flow.shape[0]:
        return _repack(start, count, cap, total, slot_flow, slot_inc, slot_val, inc_slot)
    _move(start[link], end, count[link], slot_flow, slot_inc, slot_val, inc_slot)
    start[link] = end
    cap[link] = size
    return end + size


@njit(cache=True)
def _repack(start, count, cap, total, slot_flow, slot_inc, slot_val, inc_slot):
    """Lay the blocks out again from the pool's start, in their current order; return the
    pool's end in use.

    Two passes keep every copy from overwriting slots not yet copied: the first packs the
    flows tightly (each block lands at or before where it was: the blocks before it held at
    least as many slots), the second, from the last block back, spreads them to their new
    capacities (each lands at or after its packed place, past every block still packed).
    """
    n_links = start.shape[0]
    new_cap = np.empty(n_links, dtype=np.int64)
    for link in range(n_links):
        new_cap[link] = min(total[link], max(BLOCK, 2 * count[link]))
    if new_cap.sum() > slot_flow.shape[0] - slot_flow.shape[0] // 4:
        for link in range(n_links):
            new_cap[link] = total[link]
    order = np.argsort(start, kind="mergesort")
    packed = 0
    for i in range(n_links):
        link = order[i]
        _move(start[link], packed, count[link], slot_flow, slot_inc, slot_val, inc_slot)
        start[link] = packed
        packed += count[link]
    end = new_cap.sum()
    at = end
    for i in range(n_links - 1, -1, -1):
        link = order[i]
        at -= new_cap[link]
        _move(start[link], at, count[link], slot_flow, slot_inc, slot_val, inc_slot)
        start[link] = at
        cap[link] = new_cap[link]
    return end


@njit(cache=True)
def _move(source, target, n, slot_flow, slot_inc, slot_val, inc_slot):
    """Move ``n`` slots from ``source`` to ``target``, safely when the ranges overlap."""
    if source == target:
        return
    step = 1 if target < source else -1
    first = 0 if step == 1 else n - 1
    for i in range(first, first + step * n, step):
        s = source + i
        t = target + i
        slot_flow[t] = slot_flow[s]
        slot_inc[t] = slot_inc[s]
        for c in range(slot_val.shape[1]):
            slot_val[t, c] = slot_val[s, c]
        inc_slot[slot_inc[t]] = t
