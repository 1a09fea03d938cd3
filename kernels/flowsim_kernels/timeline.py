"""Many independent time simulations at once: one instance per CPU core, GPU thread or GPU block.

:func:`simulate_instance` runs the event loop of docs/model.md "Time" for one instance, re-solving
every transferring flow's max-min rate (textbook progressive filling over the links in use) at
each instant. It is written once, in the subset of Python that
both Numba targets compile: :func:`simulate_batch` runs it on every CPU core (``prange`` over
instances), and :mod:`flowsim_kernels.cuda_timeline` compiles the same function as a CUDA device
function, one small instance per GPU thread, and runs a block-wide form of it on the larger
ones, one per thread block.

Notes
-----
The instances of a sweep are small (a collective's flow classes, tens to thousands of flows),
and independent, so the batch, not the instance, is what runs in parallel: each instance's
loop is the plain sequential one, without the incremental re-solve or the heaps of
:func:`flowsim_kernels.engine.simulate_flows`, whose branching and data-dependent memory would
serialise a GPU warp. Each instant visits the flows in flight (ready, in their latency or
transferring) and each rate solve costs O(rounds x their flow-link incidences): no heap, no
partial re-solve, only flat arrays. ``tests/reference.py`` ``simulate_reference`` is the twin
it follows step for step.

Arrays of one instance (the caller slices them out of the batch's flat arrays; indices are
local to the instance):

- routes: ``flow_link_indptr`` (``n_flows + 1``, from 0) and ``flow_link_indices``;
- dependencies: ``dep_count`` (per flow) and the transposed CSR ``dependents_indptr`` /
  ``dependents_indices`` (each flow's waiters, one entry per listing);
- per link ``capacity`` (> 0) and ``latency``; per flow ``size``, ``start``, ``weight``,
  ``cap`` (``inf`` for none), ``delay``, ``overhead``;
- work: per flow ``waiting`` (int64), ``phase`` (int64), ``event_at``, ``remaining``,
  ``rate``, ``previous``, ``active`` (int64); per link ``level``, ``used``, ``wsum`` and
  ``live`` (int64); every entry is written before it is read, so they need no initial values;
- out: per flow ``ready``, ``transfer_start``, ``finish``; ``counts`` (int64[4]).
"""

import math

import numpy as np
from numba import njit, prange

# Flow phases.
WAITING = 0  # for dependencies
PENDING = 1  # ready at event_at
LATENT = 2  # in its route latency and overhead; transfers from event_at
TRANSFERRING = 3
ARRIVED = 4  # a zero-byte flow whose transfer began: it finishes at this instant
DONE = 5

#: ``rate`` of a transferring flow not yet frozen by the solve (or that began at this instant).
UNSOLVED = -1.0


def simulate_instance(flow_link_indptr, flow_link_indices, capacity, latency, size, start, weight, cap, delay,
                      overhead, dep_count, dependents_indptr, dependents_indices, waiting, phase, event_at, remaining,
                      rate, previous, active, level, used, wsum, live, ready, transfer_start, finish, counts,
                      tie_rel_tol, time_rel_tol):
    """Simulate one instance (the arrays are the module docstring's); ``counts`` gets the
    engine counters: instants (one re-solve each), events (readiness, transfer starts and
    completions), rates computed over the re-solves, and those that differ from the flow's
    previous rate (arrivals included).

    Events within ``time_rel_tol`` of the earliest pending one are one instant, at its time.
    Within it, completions (transfers done, zero-byte flows arrived), then readiness, then
    transfer starts, over and over until none is left; a completion makes each waiter whose
    last dependency it was ready at ``max(start, now + delay)``. Then the transferring flows'
    rates are re-solved by textbook progressive filling: every round, the lowest level at which
    a link saturates or a cap is reached (levels within ``tie_rel_tol`` tie); caps reached there
    freeze first, at their cap, then every flow of a link saturated there, at level x weight.
    A flow listing a link twice counts twice there (flow classes' multiplicities).

    Only the flows between readiness and completion are visited (``active[:n_active]``, in
    no particular order), and only their links, so an instant costs what is in flight, not
    what the instance holds.
    """
    n_flows = size.shape[0]
    n_active = 0
    for f in range(n_flows):
        waiting[f] = dep_count[f]
        ready[f] = math.nan
        transfer_start[f] = math.nan
        finish[f] = math.nan
        remaining[f] = 0.0
        rate[f] = UNSOLVED
        if waiting[f] == 0:
            phase[f] = PENDING
            event_at[f] = start[f]
            active[n_active] = f
            n_active += 1
        else:
            phase[f] = WAITING
    now = 0.0
    instants = 0
    events = 0
    resolved = 0
    rates_changed = 0
    while n_active > 0:
        t = math.inf
        for i in range(n_active):
            f = active[i]
            if phase[f] == TRANSFERRING:
                t = min(t, now + remaining[f] / rate[f])
            else:
                t = min(t, event_at[f])
        if t == math.inf:
            break  # times beyond float64's range: the caller finds flows without a finish
        instants += 1
        limit = t + time_rel_tol * abs(t)
        for i in range(n_active):
            f = active[i]
            if phase[f] == TRANSFERRING:
                remaining[f] -= rate[f] * (t - now)
        now = t
        changed = True
        while changed:
            changed = False
            i = 0
            while i < n_active:
                f = active[i]
                if phase[f] == ARRIVED or (phase[f] == TRANSFERRING and rate[f] > 0.0 and (
                        remaining[f] <= 0.0 or now + remaining[f] / rate[f] <= limit)):
                    phase[f] = DONE
                    finish[f] = now
                    n_active -= 1
                    active[i] = active[n_active]  # the last one moves here and is visited next
                    for k in range(dependents_indptr[f], dependents_indptr[f + 1]):
                        g = dependents_indices[k]
                        waiting[g] -= 1
                        if waiting[g] == 0:
                            phase[g] = PENDING
                            event_at[g] = max(start[g], now + delay[g])
                            active[n_active] = g
                            n_active += 1
                    events += 1
                    changed = True
                else:
                    i += 1
            for i in range(n_active):
                f = active[i]
                if phase[f] == PENDING and event_at[f] <= limit:
                    ready[f] = now
                    route_latency = 0.0
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        route_latency += latency[flow_link_indices[k]]
                    phase[f] = LATENT
                    event_at[f] = now + route_latency + overhead[f]
                    events += 1
                    changed = True
            for i in range(n_active):
                f = active[i]
                if phase[f] == LATENT and event_at[f] <= limit:
                    transfer_start[f] = now
                    if size[f] > 0.0:
                        phase[f] = TRANSFERRING
                        remaining[f] = size[f]
                    else:
                        phase[f] = ARRIVED
                    events += 1
                    changed = True
        # Re-solve every transferring flow's rate.
        unfrozen = 0
        for i in range(n_active):
            f = active[i]
            if phase[f] == TRANSFERRING:
                previous[f] = rate[f]
                rate[f] = UNSOLVED
                unfrozen += 1
        resolved += unfrozen
        while unfrozen > 0:
            for i in range(n_active):
                f = active[i]
                if phase[f] == TRANSFERRING:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        used[link] = 0.0
                        wsum[link] = 0.0
                        live[link] = 0
            for i in range(n_active):
                f = active[i]
                if phase[f] == TRANSFERRING:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        if rate[f] >= 0.0:
                            used[link] += rate[f]
                        else:
                            wsum[link] += weight[f]
                            live[link] += 1
            fill = math.inf
            for i in range(n_active):
                f = active[i]
                if phase[f] == TRANSFERRING:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        if live[link] > 0:
                            level[link] = (capacity[link] - used[link]) / wsum[link]
                            fill = min(fill, level[link])
                    if rate[f] < 0.0 and cap[f] < math.inf:
                        fill = min(fill, cap[f] / weight[f])
            bound = fill * (1.0 + tie_rel_tol)
            for i in range(n_active):
                f = active[i]
                if phase[f] == TRANSFERRING and rate[f] < 0.0 and cap[f] < math.inf and cap[f] / weight[f] <= bound:
                    rate[f] = cap[f]
                    unfrozen -= 1
            # Flows of a saturated link, on this round's levels (taken before any freeze).
            for i in range(n_active):
                f = active[i]
                if phase[f] == TRANSFERRING and rate[f] < 0.0:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        if live[link] > 0 and level[link] <= bound:
                            rate[f] = fill * weight[f]
                            unfrozen -= 1
                            break
        for i in range(n_active):
            f = active[i]
            if phase[f] == TRANSFERRING and rate[f] != previous[f]:
                rates_changed += 1
    counts[0] = instants
    counts[1] = events
    counts[2] = resolved
    counts[3] = rates_changed


_simulate_instance_cpu = njit(cache=True)(simulate_instance)


@njit(cache=True, parallel=True)
def simulate_batch(flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr,
                   flow_link_indices, capacity, latency, size, start, weight, cap, delay, overhead, dep_count,
                   dependents_indptr, dependents_indices, ready, transfer_start, finish, counts, tie_rel_tol,
                   time_rel_tol):
    """Every instance of a batch, in parallel over the CPU cores.

    Instance ``i`` owns flows ``flow_offsets[i]:flow_offsets[i + 1]`` of the per-flow arrays
    (and ``flow_offsets[i] + i : flow_offsets[i + 1] + i + 1`` of the two ``indptr`` arrays,
    each of which restarts from 0), links ``link_offsets[i]:...`` of the per-link ones,
    incidences ``incidence_offsets[i]:...`` of ``flow_link_indices`` and dependents
    ``dependent_offsets[i]:...`` of ``dependents_indices``; indices inside are the instance's
    own. Writes ``ready``, ``transfer_start``, ``finish`` (per flow) and ``counts`` (int64[n_instances,
    4], :func:`simulate_instance`'s counters); work arrays are allocated per instance.
    """
    for i in prange(flow_offsets.shape[0] - 1):
        f0, f1 = flow_offsets[i], flow_offsets[i + 1]
        l0, l1 = link_offsets[i], link_offsets[i + 1]
        n, m = f1 - f0, l1 - l0
        _simulate_instance_cpu(
            flow_link_indptr[f0 + i : f1 + i + 1],
            flow_link_indices[incidence_offsets[i] : incidence_offsets[i + 1]],
            capacity[l0:l1], latency[l0:l1], size[f0:f1], start[f0:f1], weight[f0:f1], cap[f0:f1], delay[f0:f1],
            overhead[f0:f1], dep_count[f0:f1],
            dependents_indptr[f0 + i : f1 + i + 1],
            dependents_indices[dependent_offsets[i] : dependent_offsets[i + 1]],
            np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n), np.empty(n), np.empty(n), np.empty(n),
            np.empty(n, np.int64), np.empty(m), np.empty(m), np.empty(m), np.empty(m, np.int64),
            ready[f0:f1], transfer_start[f0:f1], finish[f0:f1], counts[i], tie_rel_tol, time_rel_tol,
        )
