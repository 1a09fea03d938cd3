"""Slow, obviously correct twins of the kernels, in plain Python.

They follow docs/model.md word for word and favour clarity over speed; the kernels are tested
against them.
"""

from __future__ import annotations

import math


def max_min_reference(routes, capacity, weight=None, cap=None, tie_rel_tol=1e-12):
    """Weighted max-min fair rates by textbook progressive filling.

    Every round rescans every link: raise all unfrozen flows' rate/weight together to the
    lowest level at which a link saturates or a cap is reached, freeze the flows there, repeat.
    """
    n = len(routes)
    weight = [1.0] * n if weight is None else [float(w) for w in weight]
    cap = [math.inf] * n if cap is None else [float(c) for c in cap]
    rate = [0.0] * n
    frozen = [False] * n
    flows_on = {}
    for f, route in enumerate(routes):
        for link in route:
            flows_on.setdefault(link, []).append(f)
    while not all(frozen):
        levels = {}
        for link, flows in flows_on.items():
            live = [f for f in flows if not frozen[f]]
            if live:
                used = sum(rate[f] for f in flows if frozen[f])
                levels[link] = (capacity[link] - used) / sum(weight[f] for f in live)
        cap_levels = {f: cap[f] / weight[f] for f in range(n) if not frozen[f] and cap[f] < math.inf}
        fill = min(list(levels.values()) + list(cap_levels.values()))
        limit = fill * (1 + tie_rel_tol)
        to_freeze = {}
        for f, lv in cap_levels.items():
            if lv <= limit:
                to_freeze[f] = cap[f]
        for link, lv in levels.items():
            if lv <= limit:
                for f in flows_on[link]:
                    if not frozen[f] and f not in to_freeze:
                        to_freeze[f] = fill * weight[f]
        for f, r in to_freeze.items():
            rate[f] = r
            frozen[f] = True
    return rate


def simulate_reference(routes, capacity, size, latency=None, start=None, weight=None, cap=None,
                       depends_on=None, delay=None, overhead=None, time_rel_tol=1e-12):
    """Event-by-event simulation that re-solves every rate with :func:`max_min_reference`.

    Returns ``(ready, transfer_start, finish)`` lists. Follows docs/model.md "Time" literally: a
    flow is ready at max(start, last dependency's finish + delay), waits its route latency
    plus overhead, then transfers at its max-min rate, recomputed whenever the set of
    transferring flows changes.
    """
    n = len(routes)
    latency = latency if latency is not None else [0.0] * len(capacity)
    start = start if start is not None else [0.0] * n
    weight = weight if weight is not None else [1.0] * n
    cap = cap if cap is not None else [math.inf] * n
    depends_on = depends_on if depends_on is not None else [[] for _ in range(n)]
    delay = delay if delay is not None else [0.0] * n
    overhead = overhead if overhead is not None else [0.0] * n

    ready = [math.nan] * n
    transfer = [math.nan] * n
    finish = [math.nan] * n
    waiting = [len(d) for d in depends_on]
    ready_at = {f: start[f] for f in range(n) if waiting[f] == 0}  # pending readiness
    transfer_at = {}  # flows in their latency: when they start transferring
    remaining = {}  # transferring flows: bytes left
    rates = {}
    now = 0.0

    def finish_flow(f, t):
        finish[f] = t
        for g in range(n):
            if f in depends_on[g]:
                waiting[g] -= depends_on[g].count(f)
                if waiting[g] == 0:
                    ready_at[g] = max(start[g], t + delay[g])

    while ready_at or transfer_at or remaining:
        candidates = list(ready_at.values()) + list(transfer_at.values())
        candidates += [now + remaining[f] / rates[f] for f in remaining]
        t = min(candidates)
        limit = t + time_rel_tol * abs(t)
        for f in remaining:
            remaining[f] -= rates[f] * (t - now)
        now = t
        changed = True
        while changed:
            changed = False
            done = [f for f in remaining if f in rates and (remaining[f] <= 0 or now + remaining[f] / rates[f] <= limit)]
            for f in done:
                del remaining[f]
                finish_flow(f, now)
                changed = True
            for f in [f for f, at in ready_at.items() if at <= limit]:
                del ready_at[f]
                ready[f] = now
                transfer_at[f] = now + sum(latency[link] for link in routes[f]) + overhead[f]
                changed = True
            for f in [f for f, at in transfer_at.items() if at <= limit]:
                del transfer_at[f]
                transfer[f] = now
                if size[f] > 0:
                    remaining[f] = size[f]
                else:
                    finish_flow(f, now)
                changed = True
        active = sorted(remaining)
        solved = max_min_reference(
            [routes[f] for f in active], capacity, [weight[f] for f in active], [cap[f] for f in active]
        )
        rates = dict(zip(active, solved))
    return ready, transfer, finish


def equitable_classes_reference(flow_attributes, link_attributes, routes, depends_on, transfers):
    """Coarsest equitable partition by textbook colour refinement, with exact multisets.

    Flows start in classes of equal ``flow_attributes`` (hashable per flow), links of equal
    ``link_attributes``. Every round, a link's new class is its class with the sorted
    classes of the transferring flows on it, and a flow's new class is its class with the
    sorted classes of its links (if it transfers) and of the flows it waits for; rounds
    repeat until none splits a class. Returns ``(flow_class, link_class)`` numbered by first
    appearance.
    """
    def renumber(keys):
        ids = {}
        return [ids.setdefault(k, len(ids)) for k in keys]

    flow_class = renumber(flow_attributes)
    link_class = renumber(link_attributes)
    on_link = [[] for _ in link_attributes]
    for f, route in enumerate(routes):
        if transfers[f]:
            for link in route:
                on_link[link].append(f)
    while True:
        new_links = renumber(
            (link_class[i], tuple(sorted(flow_class[f] for f in on_link[i]))) for i in range(len(link_attributes))
        )
        new_flows = renumber(
            (
                flow_class[f],
                tuple(sorted(new_links[i] for i in routes[f])) if transfers[f] else (),
                tuple(sorted(flow_class[d] for d in depends_on[f])),
            )
            for f in range(len(routes))
        )
        if len(set(new_flows)) == len(set(flow_class)) and len(set(new_links)) == len(set(link_class)):
            return flow_class, link_class
        flow_class, link_class = new_flows, new_links


def ring_steps_reference(dag, orders, chunk_bytes, n_steps, slices, ready, phase):
    """The ring's step DAG message by message, through ``dag.add`` and ``dag.after``: the
    twin of :func:`flowsim.collectives.dag._ring`, which lays a channel out at once.

    On channel ``c``, step ``s``, slice ``k`` rank ``p`` sends to ``p + 1`` once it received
    slice ``k`` of step ``s - 1`` from ``p - 1`` (``ready`` before step 0), behind the hop's
    previous message (slice ``k - 1``, else the last slice of step ``s - 1``).
    """
    rank_index = {r: i for i, r in enumerate(orders[0])}
    n = len(orders[0])
    piece = chunk_bytes / slices
    done = {r: [] for r in orders[0]}
    for c, order in enumerate(orders):
        flow = {}
        for s in range(n_steps):
            for p in range(n):
                src, dst = order[p], order[(p + 1) % n]
                for k in range(slices):
                    deps = [flow[s - 1, (p - 1) % n, k]] if s else list(ready.get(src, ()))
                    label = f"{phase}ch{c}.step{s}.r{rank_index[src]}.sl{k}"
                    previous = flow[s, p, k - 1] if k else flow[s - 1, p, slices - 1] if s else None
                    sender = dag.proxy(src, dst) or src  # across servers, the rank on dst's rail
                    if sender != src:  # a .due message at src, then the piece from the proxy
                        if previous is None:
                            flow[s, p, k] = dag.add(label, sender, dst, piece, deps, s, c)
                        else:
                            due = dag.add(label + ".due", src, src, 0.0, deps, s, c,
                                          step_latency_s=dag.step_latency(src, dst))
                            flow[s, p, k] = dag.add(label, sender, dst, piece, [due, previous], s, c,
                                                    step_latency_s=0.0)
                    elif previous is None:
                        flow[s, p, k] = dag.add(label, src, dst, piece, deps, s, c)
                    else:
                        flow[s, p, k] = dag.after(label, src, dst, piece, deps, previous, s, c,
                                                  overlaps=dag.ring_latency_overlaps(src, dst))
        for p in range(n):
            done[order[(p + 1) % n]].extend(flow[n_steps - 1, p, k] for k in range(slices))
    return done


def zero_time_finish_reference(start, delay, depends_on):
    """Each flow's finish if flows took no time once ready, flow by flow: the twin of
    :func:`flowsim_kernels.dag.zero_time_finish` (``depends_on``: lists of earlier flows)."""
    end = []
    for s, deps, d in zip(start, depends_on, delay):
        end.append(max(s, max(end[k] for k in deps) + d) if deps else s)
    return end


def placed_dependencies_reference(template, offset, points):
    """The dependencies of a collective copied into a training step at ``offset``, flow by
    flow: each flow's own (moved on), its sender's moment first where it opens the sender's
    part; the twin of ``flowsim.training._Flows.workload``, which builds every copy's at once."""
    deps = []
    for i in range(len(template.names)):
        own = [offset + int(d) for d in template.dep_indices[template.dep_indptr[i]:template.dep_indptr[i + 1]]]
        point = points.get(template.src[i])
        deps.append(list(point.deps) + own if point is not None and i in template.opens else own)
    return deps


def fletcher32_reference(data: bytes) -> int:
    """Slow twin: HDF5's H5_checksum_fletcher32 statement by statement, in 32-bit unsigned
    arithmetic (every sum taken modulo 2**32, as C's uint32_t does)."""
    mask = 0xFFFFFFFF
    sum1 = sum2 = 0
    i, words = 0, len(data) // 2
    while words:
        block = min(words, 360)
        words -= block
        for _ in range(block):
            sum1 = (sum1 + ((data[i] << 8) | data[i + 1])) & mask
            sum2 = (sum2 + sum1) & mask
            i += 2
        sum1 = ((sum1 & 0xFFFF) + (sum1 >> 16)) & mask
        sum2 = ((sum2 & 0xFFFF) + (sum2 >> 16)) & mask
    if len(data) % 2:
        sum1 = (sum1 + (data[i] << 8)) & mask
        sum2 = (sum2 + sum1) & mask
        sum1 = ((sum1 & 0xFFFF) + (sum1 >> 16)) & mask
        sum2 = ((sum2 & 0xFFFF) + (sum2 >> 16)) & mask
    sum1 = ((sum1 & 0xFFFF) + (sum1 >> 16)) & mask
    sum2 = ((sum2 & 0xFFFF) + (sum2 >> 16)) & mask
    return ((sum2 << 16) | sum1) & mask


def fill_levels_reference(capacity, slots):
    """A link's overflow and fill levels for the engine's prediction, by sorting: the twin of
    :func:`flowsim_kernels.engine._fill_levels`. ``slots`` lists ``(rate, level, weight)``,
    level -1 for a flow being re-solved (free to rise), else ``rate / weight``.

    The overflow level gives the free flows what the others leave; the fill level ``L``
    solves ``sum(w L over the free) + sum(w min(level, L) over the others) = capacity``:
    from the overflow level, the others are let rise one at a time, highest level first,
    while above the level so far (each one lowers the level below its own).
    """
    free_weight = sum(w for _, level, w in slots if level < 0)
    if free_weight == 0:
        return math.inf, math.inf
    others = sorted(((level, rate, w) for rate, level, w in slots if level >= 0), reverse=True)
    load = sum(rate for _, rate, _ in others)
    overflow = (capacity - load) / free_weight
    if overflow < 0:
        return overflow, max(overflow, -1.0)
    level = overflow
    for other_level, rate, w in others:
        if other_level <= level:
            break
        load -= rate
        free_weight += w
        level = (capacity - load) / free_weight
    return overflow, level
