"""Calls back to back, as nccl-tests times them.

nccl-tests times ``iters`` calls launched one after another on each GPU's stream, then
divides by their count (``BenchTime`` in [NT-PERF] src/common.cu: the loop of
``startColl``, one ``completeColl`` after it, ``deltaSec = elapsed / (iters * agg_iters)``).
A GPU's next call starts when its own kernel of the previous one ends, not when the call
has ended everywhere. Where every rank sends and receives to the end of a call (rings,
trees), that is about when the call ends. In a chain it is not: a broadcast's root is done
once its last piece has left, and starts the next call while the pieces travel down the
chain (a reduce's first ranks likewise), so calls overlap and the time per call tends to the
busiest link's time per call rather than one call's time through the whole chain.
:data:`OVERLAPPING` names those collectives.

:func:`back_to_back` lays two calls out so, and :func:`time_per_call` turns their times into
what nccl-tests prints for ``calls`` of them: the first call's time, and each later one's
lead over the one before it, which two calls show (the steady state of a chain whose links
are alike).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from flowsim.errors import whole_number
from flowsim.workload import Workload

__all__ = ["OVERLAPPING", "back_to_back", "time_per_call"]

#: Collectives whose calls overlap when nccl-tests runs them back to back: NCCL's chains
#: (broadcast and reduce, a ring opened at the root).
OVERLAPPING = ("broadcast", "reduce")


def back_to_back(workload: Workload, ranks: Sequence[str]) -> Workload:
    """Two calls of ``workload``, the second issued on each rank when the rank's part of
    the first has ended.

    A rank's part of a call is every flow it sends or receives (a hop that another GPU
    relays between servers is its sender's, :func:`_senders`); it has ended when those of
    them that no other flow of the rank waits for have. Each flow of the second call that a
    rank sends, and that waits for no other flow the rank sends in it (its first sends on
    each channel), waits for those too. What a rank receives waits only for its sender, as
    a GPU may write into its peer's buffer before the peer's next kernel starts (NCCL's
    slots; a chain fills fewer than it has). Flows named ``call1.NAME`` and ``call2.NAME``;
    flows between nodes that are not ``ranks`` (an NVSwitch, a NIC) join no rank's part.

    >>> from flowsim.workload import Workload
    >>> w = Workload.build(["a", "b"], ["g0", "g1"], ["g1", "g2"], [1.0, 1.0], depends_on=[[], [0]])
    >>> two = back_to_back(w, ["g0", "g1", "g2"])
    >>> list(two.names)
    ['call1.a', 'call1.b', 'call2.a', 'call2.b']
    >>> [two.dependencies(f).tolist() for f in range(4)]
    [[], [0], [0], [2, 1]]
    """
    n = len(workload)
    index = {name: i for i, name in enumerate(ranks)}
    src = np.fromiter((index.get(name, -1) for name in workload.src), np.int64, n)
    dst = np.fromiter((index.get(name, -1) for name in workload.dst), np.int64, n)
    indptr, waits_for = workload.dep_indptr, workload.dep_indices
    waiting = np.repeat(np.arange(n), np.diff(indptr))
    src = _senders(src, dst, waiting, waits_for, n)
    # A flow is not the last of its sender's (receiver's) part where a flow of that rank waits for it.
    src_waited, dst_waited = np.zeros(n, bool), np.zeros(n, bool)
    for end, waited in ((src, src_waited), (dst, dst_waited)):
        of_rank = end[waits_for]
        same = (of_rank >= 0) & ((of_rank == src[waiting]) | (of_rank == dst[waiting]))
        waited[waits_for[same]] = True
    last = np.concatenate([np.flatnonzero((src >= 0) & ~src_waited), np.flatnonzero((dst >= 0) & ~dst_waited)])
    last_rank = np.concatenate([src[(src >= 0) & ~src_waited], dst[(dst >= 0) & ~dst_waited]])
    order = np.argsort(last_rank, kind="stable")
    last, last_rank = last[order], last_rank[order]
    last_start = np.searchsorted(last_rank, np.arange(len(ranks) + 1))
    # First sends of each rank: those that wait for no flow the same rank sends.
    sends_after_own = np.zeros(n, bool)
    sends_after_own[waiting[(src[waiting] >= 0) & (src[waits_for] == src[waiting])]] = True
    first = (src >= 0) & ~sends_after_own

    extra = np.where(first, last_start[src + 1] - last_start[src], 0)  # first: sent by a rank
    own = np.diff(indptr)
    counts = np.concatenate([own, own + extra])
    new_indptr = np.zeros(2 * n + 1, np.int64)
    np.cumsum(counts, out=new_indptr[1:])
    new_indices = np.empty(new_indptr[-1], np.int64)
    new_indices[: waits_for.size] = waits_for
    # The second call's own waits, each moved past the first call ...
    edge = np.arange(waits_for.size)
    new_indices[new_indptr[n + waiting] + edge - indptr[waiting]] = waits_for + n
    # ... then its first sends' waits for their rank's part of the first call.
    adds = np.flatnonzero(extra)
    row = np.repeat(adds, extra[adds])
    k = np.arange(row.size) - np.repeat(np.cumsum(extra[adds]) - extra[adds], extra[adds])
    new_indices[new_indptr[n + row] + own[row] + k] = last[last_start[src[row]] + k]
    both = Workload.concat([workload.renamed("call1."), workload.renamed("call2.")])
    new_indptr.flags.writeable = new_indices.flags.writeable = False
    return replace(both, dep_indptr=new_indptr, dep_indices=new_indices)


def _senders(src: np.ndarray, dst: np.ndarray, waiting: np.ndarray, waits_for: np.ndarray, n: int) -> np.ndarray:
    """Each flow's sending rank: its source, but for a hop between servers that another
    rank's GPU relays (NCCL's PXN, a rail's NIC reached through a GPU of the sender's server):
    there no flow it waits for arrives at its source, and the rank the data it forwards
    arrived at sends it, whose kernel the relay's network proxy serves. ``src``, ``dst``:
    each flow's rank index (-1 for other nodes); ``waiting[e]`` waits for ``waits_for[e]``."""
    arrives = dst[waits_for]
    at_source = np.zeros(n, bool)
    at_source[waiting[arrives == src[waiting]]] = True
    # A flow fed at other ranks only, all one: its sender (hops fed from two ranks keep theirs).
    # The message before it on its own connection (the same source and destination) feeds nothing.
    same = (src[waits_for] == src[waiting]) & (dst[waits_for] == dst[waiting])
    fed = (arrives >= 0) & ~at_source[waiting] & ~same
    senders = src.copy()
    lowest = np.full(n, np.iinfo(np.int64).max)
    highest = np.full(n, -1)
    np.minimum.at(lowest, waiting[fed], arrives[fed])
    np.maximum.at(highest, waiting[fed], arrives[fed])
    relayed = (highest >= 0) & (lowest == highest) & ~at_source & (src >= 0)
    senders[relayed] = highest[relayed]
    return senders


def time_per_call(first_s: float, second_s: float, calls: int) -> float:
    """Mean time of ``calls`` calls back to back (what nccl-tests prints), from the end of
    the first (``first_s``) and of the second (``second_s``) of two laid out by
    :func:`back_to_back`: the first call's time and ``calls - 1`` leads of ``second_s -
    first_s``.

    >>> time_per_call(7.0, 11.0, 20)   # a chain of 4 hops, 4 slices: 7 slice times, then 4 per call
    4.15
    """
    calls = whole_number("calls", calls, minimum=1)
    return (first_s + (calls - 1) * (second_s - first_s)) / calls
