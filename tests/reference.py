"""Slow, obviously correct twins of the kernels, in plain Python.

They follow SPEC.md word for word and favour clarity over speed; the kernels are tested
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
