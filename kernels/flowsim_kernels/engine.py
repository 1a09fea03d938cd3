"""Event-driven flow simulation: arrivals, latencies, max-min sharing, completions.

The whole event loop runs here, in compiled code. After each batch of simultaneous events
only the flows whose rates can change are re-solved, with :func:`progressive_fill` over the
residual capacity the other flows leave.
"""

from collections import namedtuple

import numba
import numpy as np
from numba import njit

from flowsim_kernels.csr import csr_row_lengths, csr_transpose
from flowsim_kernels.heap import heap_pop, heap_push, iheap_remove, iheap_set
from flowsim_kernels.maxmin import RESIDUAL, STATE_COLUMNS, UNFROZEN, WEIGHT_SUM, progressive_fill
from flowsim_kernels.progress import poll
from flowsim_kernels.slots import grow_block, initial_blocks

#: Arrays describing a simulation; see :func:`simulate_flows`.
EngineInput = namedtuple(
    "EngineInput",
    [
        "flow_link_indptr",  # int64[n_flows + 1]
        "flow_link_indices",  # int64[n_incidences]
        "capacity_Bps",  # float64[n_links]
        "latency_s",  # float64[n_links]
        "size_bytes",  # float64[n_flows]
        "start_s",  # float64[n_flows]
        "weight",  # float64[n_flows]
        "cap_Bps",  # float64[n_flows]
        "delay_s",  # float64[n_flows]
        "overhead_s",  # float64[n_flows]
        "dep_indptr",  # int64[n_flows + 1]
        "dep_indices",  # int64[n_deps]
    ],
)

# Event kinds. Readiness and transfer starts wait in one heap (item flow * 2 + kind, at most
# one of each per flow); predicted completions in an indexed heap, one entry per flow.
_READY = 0
_TRANSFER = 1
_FINISH = 2

# Flow phases.
_WAITING = 0
_LATENT = 1
_ACTIVE = 2
_DONE = 3

#: What to record as rate segments.
RECORD_NONE = 0
RECORD_LINKS = 1
RECORD_LINKS_AND_FLOWS = 2

# Columns of the per-slot values.
_S_RATE = 0
_S_LEVEL = 1
_S_WEIGHT = 2

# Columns of the per-link values, after the fill's own (its ``state``), and of the per-flow
# values: each row holds what an update reads together, so that the links and flows it
# touches take a cache line or two each; the engine reads them through column views.
_L_CAPACITY = STATE_COLUMNS + 0
_L_SAT_LEVEL = STATE_COLUMNS + 1
_L_FIXED_LOAD = STATE_COLUMNS + 2
_L_FIXED_TOP = STATE_COLUMNS + 3
_L_REGION_LOAD = STATE_COLUMNS + 4
_L_REGION_TOP = STATE_COLUMNS + 5
_L_REGION_LEAST = STATE_COLUMNS + 6
_L_NEW_LOAD = STATE_COLUMNS + 7
_L_NEW_SAT_LEVEL = STATE_COLUMNS + 8
_L_REGION_SHARE = STATE_COLUMNS + 9
_L_REGION_WEIGHT = STATE_COLUMNS + 10
_L_REGION_COUNT = STATE_COLUMNS + 11
_LINK_COLUMNS = STATE_COLUMNS + 12
_F_WEIGHT = 0
_F_CAP = 1
_F_RATE = 2
_F_NEW_RATE = 3
_F_LEAST = 4
_FLOW_COLUMNS = 5

# Predicted change of a link's load: bits of ``link_push``.
_GAINS = 1
_LOSES = 2

# The prediction takes an unsaturated link that a flow rises through to fill when its spare
# capacity is below this share of the rate the batch frees or takes (the departures' rates
# and the arrivals' least rates): rising flows share out about that rate, so a link with
# less room is likely to fill, and the flows above its fill level to drop. Left to the
# check, such links show up only after a fill and cost further rounds. On a fat-tree
# (benchmarks/bench_engine.py), with this share against without: 1.08 against 1.40 rounds
# per update at 80% load and 14% fewer flows re-solved; 1.03 against 1.14 rounds at 50%.
# Predicting every such link to fill joins more flows that keep their rates than the rounds
# save; shares from 0.15 to 0.5 do about as well as 0.3.
_FILL_SHARE = 0.3

# Relative slack when checking that a partial re-solve left a max-min allocation.
_CHECK_REL_TOL = 1e-9

# Relative rounding error per flow of a link's load summed from its flows' rates: a few
# units of float64's rounding (2**-53).
_ROUNDING = 4.0 * 2.0**-53


@njit(cache=True)
def simulate_flows(
    inp,
    incremental,
    record,
    tie_rel_tol,
    time_rel_tol,
    poll_every,
    show_progress,
    ready_s,
    transfer_start_s,
    finish_s,
):
    """Run flows to completion; fill in their ready, transfer-start and finish times.

    Parameters
    ----------
    inp : EngineInput
        Routes (flow -> link CSR), link capacities (B/s, > 0) and latencies (s, >= 0), flow
        sizes (bytes, >= 0), earliest start times (s), weights (> 0), rate caps (B/s, inf
        for none), delays after dependencies (s), per-message overheads (s), and the flows
        each flow waits for (CSR). Checked by the caller: the dependencies form a DAG and
        every flow with an empty route has a finite cap. Not mutated.
    incremental : bool
        Re-solve only the flows an event can affect (True) or every transferring flow.
    record : int
        ``RECORD_NONE``, ``RECORD_LINKS`` (rate segments per link) or
        ``RECORD_LINKS_AND_FLOWS`` (also per flow, entity ``n_links + f``).
    tie_rel_tol : float
        Max-min levels within this relative distance saturate together.
    time_rel_tol : float
        Events within this relative distance of the earliest pending one are handled
        together.
    poll_every : int
        After about this much work (events handled plus flow rates computed), checked before
        each instant, after each event taken and between the rounds of a re-solve (so also
        inside an instant of millions of events), call
        :func:`flowsim_kernels.progress.poll`: it reports
        progress and says whether :func:`flowsim_kernels.progress.deferred_interrupt` holds
        back a Ctrl-C, in which case the run stops there (the outputs are then partial) for
        the caller to deliver it; 0 for never.
    show_progress : bool
        Whether the polls report progress on stderr (at most twice a second).
    ready_s, transfer_start_s, finish_s : float64[n_flows]
        Outputs (s). Mutated.

    Returns
    -------
    overflow : int
        -1, or ``flow * 3 + what`` for the first flow whose ready (``what`` 0), transfer
        start (1) or finish (2) time is not a finite float64; the run stops there (the
        outputs are then partial).
    n_events : int
        Events handled (readiness, transfer starts, completions).
    n_updates : int
        Rate re-solves.
    n_resolved : int
        Flow rates computed over all re-solves (a measure of their total size).
    n_changed : int
        Of those, the ones that differ from the flow's rate before (arrivals included):
        the least any exact partial re-solve must compute.
    seg_entity : int64[n_seg]
    seg_start_s, seg_end_s, seg_rate_Bps : float64[n_seg]
        Constant-rate pieces of each recorded entity, in time order per entity; pieces at
        rate 0 are left out.

    Notes
    -----
    A priority queue holds readiness and transfer starts; an indexed one holds each
    transferring flow's predicted completion, moved only when its rate changes. Remaining
    bytes are settled lazily at those moments.

    Partial re-solve: when a flow at level r (rate / weight) leaves, every flow below r
    keeps its rate (below r the filling runs exactly as before: the leaving flow's links do
    not saturate below r either way). Symmetrically, a flow arriving with final level r
    changes no flow below r, and r is at least ``min(cap / w, min over its links of capacity
    / total weight)``. So each batch seeds the re-solve with the arriving flows and a
    prediction of the flows, at or above those levels, that must move: the change is
    followed from link to link on the old levels (a saturated link that loses load lets its
    top flows rise unless a cap or an unchanged saturated link holds them; one that gains
    load pushes down its top flows and those above the level at which its rising flows would
    fill it; each moving flow passes the opposite change to its other links; an unsaturated
    link is treated like a saturated one that gains load where the arriving flows on it,
    with the others at their rates, would overflow it below the level at which the first of
    the arriving flows' caps and links stops them, and where a rising flow crosses it with
    less spare capacity than ``_FILL_SHARE`` of the rate the batch frees or takes; whether
    any other unsaturated link fills is left to the check). The region is filled over the
    capacity the others leave, on the links it may fill: each of its flows gets at least its
    cap or the lowest fair share on its route, hence at most a link's residual less what the
    others there get at least, and a link these upper bounds cannot fill is left out (so the
    result is feasible by construction; an uncapped flow keeps a link in the fill: on the
    link that sets its upper bound, the bounds of all the flows there add up to at least the
    residual). The result is then checked against the definition of max-min fairness on
    every touched link (every flow capped or with a bottleneck where its level is the
    largest): a flow that fails is added, with the flows that block it, and the region is
    solved again. Re-solved flows below the lowest level that must still move keep their new
    rates through the next rounds (they are checked like the others). Since the allocation
    is unique, the check makes the result exact whatever the seed; the seed only makes it
    small.

    Cost per batch: one pass over the slots of each link the prediction reaches (twice at
    most, once per direction of change), the fills of the region's rounds (see
    :func:`progressive_fill`; 1.03 to 1.08 rounds per batch on average on a fat-tree at 50
    to 80% load) plus, per round, a few passes over the region's routes and one over the
    slots of each touched link.

    The loop runs in these phases, each under a numbered comment header in the code, with
    what each reads and writes:

    0. Set-up, once: the per-flow rows (``weight``, ``cap_Bps``, ``rate``, ``new_rate``,
       ``least``), the slot pool (``link_slot_*``, ``slot_*``, ``inc_slot``), dependents
       and ``n_waiting``, ``route_latency``, the per-link rows of ``state``, the region's
       and prediction's workspaces, the event heap with every flow free of dependencies,
       the completion heap and the segment arrays.
    1. Next instant: the earliest key of either heap; stops on a time that is not finite
       (``overflow``) or on a held-back Ctrl-C seen by the poll (``numba.objmode``, every
       ``poll_every`` units of work).
    2. Take the events up to ``now + time_rel_tol * |now|``: writes ``ready_s``,
       ``transfer_start_s``, ``finish_s``, ``phase``, ``settled_at`` and ``n_waiting``;
       arriving flows take a slot per link (``grow_block`` may move blocks), finishing
       ones give theirs up; lists ``arrivals`` and ``departures``; pushes and pops both
       heaps; polls as in 1.
    3. Seed the region: touches the departures' links (``link_mark``, ``touched``) and
       joins the arrivals (``in_region``, ``region``, their slots at rate 0 and level -1);
       sets ``threshold`` and ``shifted`` from their rates and least levels, summing each
       arrival link's slot weights once per batch (``slot_weight_sum``,
       ``weight_summed_at``); copies the arrivals' routes (``region_route``,
       ``region_links``, ``region_slots``, up to ``n_copied``) and sums their weights and
       count per link (``region_weight``, ``region_count``).
    4. Predict (incremental): spreads ``link_push`` and ``link_fills`` from link to link
       through ``link_stack``, caches ``seed_fill`` and ``seed_overflow``, and joins the
       flows predicted to move, copying their routes and summing their weights as in 3;
       reads the slots, ``link_sat_level``, ``link_load`` and caps. Full mode joins every
       active flow instead.
    5. Rounds until the check passes. (a) Fill: copies the routes not yet copied (as in
       3), sums ``fixed_load`` and ``fixed_top`` of newly touched links, the region's
       bounds (``least``, ``region_share``, ``region_least``, ``region_load``) and the
       residuals in ``state`` (inf for links the region cannot fill, the rest listed in
       ``fill_links``, with the fill's weight sums from ``region_weight`` and
       ``region_count``), runs :func:`progressive_fill` into ``new_rate`` (using
       ``frozen`` and the fill workspaces), then ``new_load`` and ``new_sat_level``. (b) Check: reads the new and
       old saturation levels, slots and rates; marks ``visit_stamp`` (new ``stamp``) and
       lists the flows that must move in ``to_join`` (``pending``), with ``lowest_move``;
       polls as in 1 before widening (a Ctrl-C skips the commit). (c) Widen: settles
       region flows below ``lowest_move`` (``settled``, ``settled_list``; their slots and
       the fixed sums take their new rates; the route copies and weight sums then start
       afresh), joins the listed flows (``rejoined`` if settled before), takes them out of
       the fixed sums and re-sums the links where one was the top.
    6. Commit: settled flows back into the region; when recording, the departures'
       pieces (``split_*`` and ``piece_*`` in a coarse time window) and flows'; each
       region flow's slots take its new rate, and a changed rate settles ``remaining`` and
       ``settled_at`` and moves the flow's completion; each touched link takes
       ``new_load`` and ``new_sat_level`` (recording the piece that ends) and its marks
       (``link_mark``, ``link_push``, ``link_fills``, ``seed_*``) and region sums
       (``region_weight``, ``region_count``) are cleared.

    The phases stay in one function, not in inlined helpers over a NamedTuple of these
    arrays: split that way (bit-identical results) the loop ran 1.15 to 2 times as long on
    the fat-tree benchmarks (80% load: 5.6 s against 3.9 s; 50%: 1.6 s against 0.8 s), as
    each phase, at each batch, reference-counts every array it takes from the workspace
    (the compiled loop keeps 562 ``NRT_incref`` calls against 129), and its first call
    compiled in about 34 s against 24 to 30 s.
    """
    # --- 0. set-up: workspaces and queues, once per run ---------------------------------------
    n_flows = inp.flow_link_indptr.shape[0] - 1
    n_links = inp.capacity_Bps.shape[0]
    n_inc = inp.flow_link_indices.shape[0]
    fl_ptr = inp.flow_link_indptr
    fl_idx = inp.flow_link_indices
    # Locals rather than fields of inp inside the loops, like the arrays above.
    size_bytes = inp.size_bytes
    start_s = inp.start_s
    delay_s = inp.delay_s
    # Per flow: weight, cap, committed rate, re-solved rate and least rate, one row each.
    flow_val = np.zeros((n_flows, _FLOW_COLUMNS), dtype=np.float64)
    weight = flow_val[:, _F_WEIGHT]
    cap_Bps = flow_val[:, _F_CAP]
    rate = flow_val[:, _F_RATE]
    new_rate = flow_val[:, _F_NEW_RATE]
    least = flow_val[:, _F_LEAST]
    for f in range(n_flows):
        weight[f] = inp.weight[f]
        cap_Bps[f] = inp.cap_Bps[f]

    # Per link, a block of slots (see flowsim_kernels.slots) holding the flows transferring
    # over it, with each one's rate, level and weight side by side so that link scans read
    # memory in order. A flow being re-solved shows rate 0 and level -1 in its slots.
    link_slot_total = np.zeros(n_links, dtype=np.int64)
    for k in range(n_inc):
        link_slot_total[fl_idx[k]] += 1
    link_slot_start, link_slot_cap, slot_end = initial_blocks(link_slot_total)
    link_slot_count = np.zeros(n_links, dtype=np.int64)
    slot_flow = np.empty(n_inc, dtype=np.int64)
    slot_inc = np.empty(n_inc, dtype=np.int64)
    slot_val = np.zeros((n_inc, 3), dtype=np.float64)
    inc_slot = np.empty(n_inc, dtype=np.int64)

    dependents_ptr, dependents = csr_transpose(inp.dep_indptr, inp.dep_indices, n_flows)
    n_waiting = csr_row_lengths(inp.dep_indptr)

    route_latency = inp.overhead_s.copy()
    for f in range(n_flows):
        for k in range(fl_ptr[f], fl_ptr[f + 1]):
            route_latency[f] += inp.latency_s[fl_idx[k]]

    phase = np.zeros(n_flows, dtype=np.int64)
    remaining = size_bytes.copy()
    settled_at = np.zeros(n_flows, dtype=np.float64)
    ready_s[:] = np.nan
    transfer_start_s[:] = np.nan
    finish_s[:] = np.nan

    # Per link: committed load and since when. In one row each: the fill's state, capacity,
    # largest level if saturated (else -1), and the re-solve's sums: load and top level of the
    # flows not being re-solved; load (upper bounds, then new rates), top level and least
    # rates of the region's flows; load and top level if saturated after the re-solve; the
    # residual per unit of the region's weight; the region's weight and number of flows
    # (summed as flows join, 0 between updates).
    link_load = np.zeros(n_links, dtype=np.float64)
    link_since = np.zeros(n_links, dtype=np.float64)
    # Per link: weight sum of its slots and the batch (n_updates) it was summed in, for the
    # arrivals' least levels.
    slot_weight_sum = np.zeros(n_links, dtype=np.float64)
    weight_summed_at = np.full(n_links, -1, dtype=np.int64)
    state = np.zeros((n_links, _LINK_COLUMNS), dtype=np.float64)
    capacity = state[:, _L_CAPACITY]
    link_sat_level = state[:, _L_SAT_LEVEL]
    fixed_load = state[:, _L_FIXED_LOAD]
    fixed_top = state[:, _L_FIXED_TOP]
    region_load = state[:, _L_REGION_LOAD]
    region_top = state[:, _L_REGION_TOP]
    region_weight = state[:, _L_REGION_WEIGHT]
    region_count = state[:, _L_REGION_COUNT]
    region_least = state[:, _L_REGION_LEAST]
    new_load = state[:, _L_NEW_LOAD]
    new_sat_level = state[:, _L_NEW_SAT_LEVEL]
    region_share = state[:, _L_REGION_SHARE]
    for link in range(n_links):
        capacity[link] = inp.capacity_Bps[link]
    link_sat_level[:] = -1.0

    # Workspaces of the re-solve.
    fill_work_keys = np.empty(3 * n_links + 2 * n_flows, dtype=np.float64)
    fill_work_items = np.empty(3 * n_links + 2 * n_flows, dtype=np.int64)
    in_region = np.zeros(n_flows, dtype=np.bool_)
    pending = np.zeros(n_flows, dtype=np.bool_)
    settled = np.zeros(n_flows, dtype=np.bool_)
    rejoined = np.zeros(n_flows, dtype=np.bool_)
    settled_list = np.empty(n_flows, dtype=np.int64)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    region = np.empty(n_flows, dtype=np.int64)
    # The region's routes, copied in region order as flows join (again after a widening
    # settles flows): region flow ``region[i]`` crosses
    # ``region_links[region_route[i]:region_route[i + 1]]``, for ``i < n_copied``, and holds
    # the slots ``region_slots[...]`` of the same range.
    region_route = np.zeros(n_flows + 1, dtype=np.int64)
    region_links = np.empty(n_inc, dtype=np.int64)
    region_slots = np.empty(n_inc, dtype=np.int64)
    to_join = np.empty(n_flows, dtype=np.int64)
    link_mark = np.zeros(n_links, dtype=np.bool_)
    touched = np.empty(n_links, dtype=np.int64)
    fill_links = np.empty(n_links, dtype=np.int64)
    visit_stamp = np.zeros(n_flows, dtype=np.int64)
    stamp = 0
    # Workspaces of the prediction: each link's predicted change of load, whether it is an
    # unsaturated link predicted to fill, its fill and overflow levels for the arriving flows
    # (NaN until worked out), the links whose flows are still to look at (a saturated link
    # is stacked once per bit it gains, an unsaturated one once when predicted to fill), and
    # room for the flows of the busiest link that :func:`_fill_levels` lists.
    link_push = np.zeros(n_links, dtype=np.int64)
    link_fills = np.zeros(n_links, dtype=np.bool_)
    seed_fill = np.full(n_links, np.nan)
    seed_overflow = np.full(n_links, np.nan)
    link_stack = np.empty(2 * n_links, dtype=np.int64)
    fill_above = np.empty((link_slot_total.max() if n_links > 0 else 0, 3), dtype=np.float64)
    arrivals = np.empty(n_flows, dtype=np.int64)
    departures = np.empty(n_flows, dtype=np.int64)

    ev_keys = np.empty(2 * n_flows, dtype=np.float64)
    ev_items = np.empty(2 * n_flows, dtype=np.int64)
    n_ev = 0
    for f in range(n_flows):
        if n_waiting[f] == 0:
            n_ev = heap_push(ev_keys, ev_items, n_ev, start_s[f], f * 2 + _READY)
    fin_keys = np.empty(n_flows, dtype=np.float64)
    fin_items = np.empty(n_flows, dtype=np.int64)
    fin_position = np.full(n_flows, -1, dtype=np.int64)
    n_fin = 0

    seg_entity = np.empty(1024, dtype=np.int64)
    seg_data = np.empty((1024, 3), dtype=np.float64)
    n_seg = 0
    # Recording with a coarse time window: per link, the load and end of its piece being
    # split at the batch's early finishes; per incidence of those flows, their pieces.
    split_mark = np.zeros(n_links, dtype=np.bool_)
    split_load = np.empty(n_links, dtype=np.float64)
    split_end = np.empty(n_links, dtype=np.float64)
    piece_load = np.empty(n_inc if record != RECORD_NONE else 0, dtype=np.float64)
    piece_end = np.empty(n_inc if record != RECORD_NONE else 0, dtype=np.float64)

    n_events = 0
    n_updates = 0
    n_resolved = 0
    n_changed = 0
    n_finished = 0
    next_poll = poll_every
    interrupted = False
    overflow = -1
    while n_ev > 0 or n_fin > 0:
        # --- 1. next instant: stop on overflow or Ctrl-C, report progress ---------------------
        now = _next_time(ev_keys, n_ev, fin_keys, n_fin)
        if not now < np.inf:
            # Times beyond float64's range (huge sizes or times, tiny rates) cannot be ordered.
            if n_fin > 0 and not fin_keys[0] < np.inf:
                overflow = fin_items[0] * 3 + _FINISH
            else:
                overflow = ev_items[0] // 2 * 3 + ev_items[0] % 2
            break
        if poll_every > 0 and n_events + n_resolved >= next_poll:
            next_poll = n_events + n_resolved + poll_every
            with numba.objmode(interrupted="boolean"):
                interrupted = poll(show_progress, n_finished, n_flows, now, n_events)
            if interrupted:
                break

        # --- 2. take the instant's events: flows take or leave their slots --------------------
        limit = now + time_rel_tol * abs(now)
        n_arr = 0
        n_dep = 0
        while True:
            t = _next_time(ev_keys, n_ev, fin_keys, n_fin)
            if not t <= limit or t == np.inf:  # inf: both queues are empty, or see above
                break
            if n_fin > 0 and fin_keys[0] == t:
                f = fin_items[0]
                n_fin = iheap_remove(fin_keys, fin_items, fin_position, n_fin, f)
                kind = _FINISH
            else:
                item = ev_items[0]
                n_ev = heap_pop(ev_keys, ev_items, n_ev)
                f = item // 2
                kind = item - 2 * f
            n_events += 1
            if poll_every > 0 and n_events + n_resolved >= next_poll:
                # An instant can hold millions of events (a burst of flows): poll here too.
                next_poll = n_events + n_resolved + poll_every
                with numba.objmode(interrupted="boolean"):
                    interrupted = poll(show_progress, n_finished, n_flows, now, n_events)
                if interrupted:
                    break
            now = max(now, t)
            if kind == _READY:
                ready_s[f] = t
                phase[f] = _LATENT
                if route_latency[f] > 0:
                    n_ev = heap_push(ev_keys, ev_items, n_ev, t + route_latency[f], f * 2 + _TRANSFER)
                    continue
                kind = _TRANSFER
            if kind == _TRANSFER:
                transfer_start_s[f] = t
                if size_bytes[f] > 0:
                    phase[f] = _ACTIVE
                    settled_at[f] = t
                    for k in range(fl_ptr[f], fl_ptr[f + 1]):
                        link = fl_idx[k]
                        if link_slot_count[link] == link_slot_cap[link]:
                            slot_end = grow_block(
                                link, link_slot_start, link_slot_count, link_slot_cap, link_slot_total,
                                slot_flow, slot_inc, slot_val, inc_slot, slot_end,
                            )
                        s = link_slot_start[link] + link_slot_count[link]
                        link_slot_count[link] += 1
                        slot_flow[s] = f
                        slot_inc[s] = k
                        inc_slot[k] = s
                        slot_val[s, _S_WEIGHT] = weight[f]
                    arrivals[n_arr] = f
                    n_arr += 1
                    continue
            # A completion, or a transfer of zero bytes, which completes at once.
            finish_s[f] = t
            n_finished += 1
            if phase[f] == _ACTIVE:
                for k in range(fl_ptr[f], fl_ptr[f + 1]):
                    link = fl_idx[k]
                    last = link_slot_start[link] + link_slot_count[link] - 1
                    s = inc_slot[k]
                    moved = slot_inc[last]
                    slot_flow[s] = slot_flow[last]
                    slot_inc[s] = moved
                    for c in range(slot_val.shape[1]):  # not a row slice: a view is reference-counted
                        slot_val[s, c] = slot_val[last, c]
                    inc_slot[moved] = s
                    link_slot_count[link] -= 1
                departures[n_dep] = f
                n_dep += 1
            phase[f] = _DONE
            for k in range(dependents_ptr[f], dependents_ptr[f + 1]):
                g = dependents[k]
                n_waiting[g] -= 1
                if n_waiting[g] == 0:
                    n_ev = heap_push(ev_keys, ev_items, n_ev, max(start_s[g], t + delay_s[g]), g * 2 + _READY)
        if interrupted:
            break
        if n_arr == 0 and n_dep == 0:
            continue

        # --- 3. seed the region: touch the departures' links, join the arrivals ---------------
        n_updates += 1
        n_region = 0
        n_touched = 0
        threshold = np.inf
        shifted = 0.0  # rate the batch frees or takes: departures' rates, arrivals' least
        for i in range(n_dep):
            f = departures[i]
            shifted += rate[f]
            threshold = min(threshold, rate[f] / weight[f])
            n_touched = _touch_route(f, fl_ptr, fl_idx, link_mark, touched, n_touched)
        for i in range(n_arr):
            f = arrivals[i]
            bound = cap_Bps[f] / weight[f]
            for k in range(fl_ptr[f], fl_ptr[f + 1]):
                link = fl_idx[k]
                if weight_summed_at[link] != n_updates:
                    # Once per link and batch: summed per arrival, a burst of n flows took
                    # time quadratic in n (minutes at a few million) before its first poll.
                    weight_summed_at[link] = n_updates
                    start = link_slot_start[link]
                    w = 0.0
                    for s in range(start, start + link_slot_count[link]):
                        w += slot_val[s, _S_WEIGHT]
                    slot_weight_sum[link] = w
                bound = min(bound, capacity[link] / slot_weight_sum[link])
            threshold = min(threshold, bound)
            shifted += bound * weight[f]
            n_region, n_touched = _join(
                f, in_region, region, n_region, fl_ptr, fl_idx, inc_slot, slot_val, link_mark, touched, n_touched
            )
        # The passes over the region's routes read them from one array, in order, copied here
        # and as flows join: each flow's row of the routes lies anywhere in memory, reached
        # through its own, and such chains of loads took half the time of those passes. The
        # links' weight sums of the region, in region order, come with the copy.
        n_copied = _copy_routes(
            0, n_region, region, fl_ptr, fl_idx, inc_slot, weight, region_route, region_links, region_slots,
            region_weight, region_count,
        )
        # --- 4. predict the flows that move (incremental), or take all (full) -----------------
        if incremental:
            # Predict which flows move by following the change from saturated link to
            # saturated link, on the old levels: where one loses load, the flows at its top
            # level rise, unless a cap or a saturated link no change has reached holds them;
            # where one gains load, the flows at its top level drop, and so do those above the
            # level at which its rising flows would fill it. A flow that moves makes its other
            # links gain or lose in turn. Only flows at or above the threshold can move. The
            # check below still decides. An unsaturated link is followed where arriving flows
            # overflow it (below), and where a flow rises through it while its spare capacity
            # is below a share of the rate the batch frees or takes (``_FILL_SHARE``); whether
            # any other fills is left to the check.
            floor_level = threshold * (1.0 - _CHECK_REL_TOL)
            fill_spare = _FILL_SHARE * shifted
            n_stack = 0
            # The seeds pass no spare capacity: the arriving flows' own links are judged by
            # their overflow (below), and departures only take load away.
            for i in range(n_dep):
                n_stack = _spread(
                    departures[i], -1, _LOSES, fl_ptr, fl_idx, link_push, link_sat_level, floor_level,
                    link_stack, n_stack, link_fills, capacity, link_load, 0.0,
                )
            for i in range(n_arr):
                f = arrivals[i]
                n_stack = _spread(
                    f, -1, _GAINS, fl_ptr, fl_idx, link_push, link_sat_level, floor_level,
                    link_stack, n_stack, link_fills, capacity, link_load, 0.0,
                )
                # An unsaturated link fills if the arriving flows on it, with the others at their
                # rates, overflow it below the level at which the first of their caps and links
                # (each where it fills, with the flows above giving way) stops them. Each link's
                # levels are worked out once per batch.
                level = cap_Bps[f] / weight[f]
                for k in range(fl_ptr[f], fl_ptr[f + 1]):
                    link = fl_idx[k]
                    if np.isnan(seed_fill[link]):
                        seed_overflow[link], seed_fill[link] = _fill_levels(
                            link, capacity[link], link_slot_start, link_slot_count, slot_val, fill_above
                        )
                    level = min(level, seed_fill[link])
                for k in range(fl_ptr[f], fl_ptr[f + 1]):
                    link = fl_idx[k]
                    if (
                        link_sat_level[link] < 0
                        and not link_fills[link]
                        and seed_overflow[link] <= level * (1.0 + _CHECK_REL_TOL)
                    ):
                        link_fills[link] = True
                        link_stack[n_stack] = link
                        n_stack += 1
            while n_stack > 0:
                n_stack -= 1
                link = link_stack[n_stack]
                change = link_push[link]
                moved = ((change & _GAINS) << 1) | ((change & _LOSES) >> 1)  # against the link
                top = link_sat_level[link]  # saturated, or predicted to fill
                floor = max(threshold, top) * (1.0 - _CHECK_REL_TOL)
                if change & _GAINS:
                    _, fill = _fill_levels(link, capacity[link], link_slot_start, link_slot_count, slot_val, fill_above)
                    above_fill = max(floor_level, fill * (1.0 + _CHECK_REL_TOL))
                    # A saturated link's top flows drop too, an unsaturated one's only those above.
                    floor = min(floor, above_fill) if top >= 0 else above_fill
                start = link_slot_start[link]
                for s in range(start, start + link_slot_count[link]):
                    if slot_val[s, _S_LEVEL] < floor:
                        continue
                    h = slot_flow[s]
                    if change == _LOSES and _held_elsewhere(
                        h, slot_val[s, _S_RATE], cap_Bps, weight, fl_ptr, fl_idx, link_push, link_sat_level
                    ):
                        continue
                    in_region[h] = True
                    region[n_region] = h
                    at = region_route[n_region]
                    n_region += 1
                    # _join, _copy_routes and _spread in one pass over the route.
                    for k in range(fl_ptr[h], fl_ptr[h + 1]):
                        other = fl_idx[k]
                        slot = inc_slot[k]
                        slot_val[slot, _S_RATE] = 0.0
                        slot_val[slot, _S_LEVEL] = -1.0
                        if not link_mark[other]:
                            link_mark[other] = True
                            touched[n_touched] = other
                            n_touched += 1
                        region_links[at] = other
                        region_slots[at] = slot
                        at += 1
                        region_weight[other] += weight[h]
                        region_count[other] += 1.0
                        if other == link or link_push[other] | moved == link_push[other]:
                            continue
                        link_push[other] |= moved
                        if link_sat_level[other] >= floor_level:
                            link_stack[n_stack] = other
                            n_stack += 1
                        elif (
                            moved & _GAINS
                            and link_sat_level[other] < 0
                            and not link_fills[other]
                            and capacity[other] - link_load[other] < fill_spare
                        ):
                            link_fills[other] = True
                            link_stack[n_stack] = other
                            n_stack += 1
                    region_route[n_region] = at
            n_copied = n_region
        else:
            for g in range(n_flows):
                if phase[g] == _ACTIVE and not in_region[g]:
                    n_region, n_touched = _join(
                        g, in_region, region, n_region, fl_ptr, fl_idx, inc_slot, slot_val,
                        link_mark, touched, n_touched,
                    )

        # --- 5. fill, check and widen the region until the check passes -----------------------
        n_summed = 0  # touched[:n_summed] have their fixed load and top level summed
        n_settled = 0
        while True:
            # --- 5a. fill: fixed sums, bounds, progressive fill, new loads --------------------
            for j in range(n_summed, n_touched):
                link = touched[j]
                fixed_load[link], fixed_top[link] = _fixed_sums(link, link_slot_start, link_slot_count, slot_val)
            n_summed = n_touched
            for j in range(n_touched):
                link = touched[j]
                state[link, RESIDUAL] = capacity[link] - fixed_load[link]
                region_load[link] = 0.0  # upper bounds first, then the new rates
                region_top[link] = -1.0
                region_least[link] = 0.0
            # A link that its region flows cannot fill, even each at the most it could get,
            # never bottlenecks them: leave it out of the fill (an infinite residual) so that
            # only links that may saturate are ordered. Each flow gets at least its cap or
            # the lowest fair share on its route (no link of it saturates below that level),
            # so at most the residual of a link less what the others there get at least.
            n_copied = _copy_routes(
                n_copied, n_region, region, fl_ptr, fl_idx, inc_slot, weight, region_route, region_links,
                region_slots, region_weight, region_count,
            )
            # Each link's fair share, divided once per link rather than once per flow on it.
            for j in range(n_touched):
                link = touched[j]
                if region_weight[link] > 0:
                    region_share[link] = state[link, RESIDUAL] / region_weight[link]
            for i in range(n_region):
                g = region[i]
                share = cap_Bps[g] / weight[g]
                for k in range(region_route[i], region_route[i + 1]):
                    share = min(share, region_share[region_links[k]])
                least[g] = max(share, 0.0) * weight[g]
                for k in range(region_route[i], region_route[i + 1]):
                    region_least[region_links[k]] += least[g]
            for i in range(n_region):
                g = region[i]
                most = cap_Bps[g]
                for k in range(region_route[i], region_route[i + 1]):
                    link = region_links[k]
                    most = min(most, state[link, RESIDUAL] - (region_least[link] - least[g]))
                most = max(most, 0.0)
                for k in range(region_route[i], region_route[i + 1]):
                    region_load[region_links[k]] += most
            # The sum of the bounds carries the rounding of each bound's difference of sums:
            # ``n`` bounds of a link of ``n`` flows are each off by up to ``n`` roundings of its
            # residual (a link that exactly fills, every flow at its fair share, summed 1.3e-9
            # short with 7,120 flows on it, and left out it left its flows at rate 0). Only a
            # link short by more than that is left out; keeping one in costs the fill time only.
            n_fill_links = 0
            for j in range(n_touched):
                link = touched[j]
                flows_on = link_slot_count[link] + 1.0
                margin = _CHECK_REL_TOL + _ROUNDING * flows_on * flows_on
                if region_load[link] < state[link, RESIDUAL] * (1.0 - margin):
                    state[link, RESIDUAL] = np.inf
                else:
                    fill_links[n_fill_links] = link
                    n_fill_links += 1
                    state[link, WEIGHT_SUM] = region_weight[link]  # see progressive_fill's summed
                    state[link, UNFROZEN] = region_count[link]
                region_load[link] = 0.0
            progressive_fill(
                region[:n_region], fill_links[:n_fill_links], in_region, frozen, fl_ptr, fl_idx,
                link_slot_start, link_slot_count, slot_flow, weight, cap_Bps,
                tie_rel_tol, True, state, fill_work_keys, fill_work_items, new_rate,
            )
            n_resolved += n_region
            for i in range(n_region):
                g = region[i]
                frozen[g] = False
                level = new_rate[g] / weight[g]
                for k in range(region_route[i], region_route[i + 1]):
                    link = region_links[k]
                    region_load[link] += new_rate[g]
                    region_top[link] = max(region_top[link], level)
            for j in range(n_touched):
                link = touched[j]
                new_load[link] = fixed_load[link] + region_load[link]
                # Spare capacity within the fill's tie tolerance and rounding counts as
                # none; a looser slack (1e-9 of the capacity) let a light flow, whose share is
                # a small part of its link, sit below its max-min rate by far more than 1e-9.
                slack = 2.0 * tie_rel_tol + _ROUNDING * (link_slot_count[link] + 1)
                saturated = new_load[link] >= capacity[link] * (1.0 - slack)
                new_sat_level[link] = max(fixed_top[link], region_top[link]) if saturated else -1.0

            # --- 5b. check: list the flows without a bottleneck, and their blockers -----------
            # Fixed flows that were bottlenecked on a link (at its top level) keep that
            # bottleneck unless the link lost its saturation or a flow now tops them there.
            stamp += 1
            n_join = 0
            lowest_move = np.inf  # lowest level at which a flow must still move
            for j in range(n_touched):
                link = touched[j]
                old = link_sat_level[link]
                if old < 0 or 0 <= new_sat_level[link] <= old * (1.0 + _CHECK_REL_TOL):
                    continue
                floor = old * (1.0 - _CHECK_REL_TOL)
                start = link_slot_start[link]
                for s in range(start, start + link_slot_count[link]):
                    if slot_val[s, _S_LEVEL] < floor:
                        continue
                    h = slot_flow[s]
                    if visit_stamp[h] == stamp:
                        continue
                    visit_stamp[h] = stamp
                    r = new_rate[h] if settled[h] else rate[h]
                    if not _has_bottleneck(
                        h, r, cap_Bps, weight, fl_idx, fl_ptr[h], fl_ptr[h + 1], link_mark, new_sat_level,
                        link_sat_level,
                    ):
                        lowest_move = min(lowest_move, r / weight[h])
                        pending[h] = True
                        to_join[n_join] = h
                        n_join += 1
            for i in range(n_settled):
                h = settled_list[i]
                if settled[h] and not pending[h]:
                    if not _has_bottleneck(
                        h, new_rate[h], cap_Bps, weight, fl_idx, fl_ptr[h], fl_ptr[h + 1], link_mark,
                        new_sat_level, link_sat_level,
                    ):
                        lowest_move = min(lowest_move, new_rate[h] / weight[h])
                        pending[h] = True
                        to_join[n_join] = h
                        n_join += 1
            # Re-solved flows must top their bottleneck: fixed flows above them there give way.
            for i in range(n_region):
                g = region[i]
                if _has_bottleneck(
                    g, new_rate[g], cap_Bps, weight, region_links, region_route[i], region_route[i + 1],
                    link_mark, new_sat_level, link_sat_level,
                ):
                    continue
                lowest_move = min(lowest_move, new_rate[g] / weight[g])
                ceiling = new_rate[g] / weight[g] * (1.0 + _CHECK_REL_TOL)
                for k in range(region_route[i], region_route[i + 1]):
                    link = region_links[k]
                    if new_sat_level[link] < 0:
                        continue
                    start = link_slot_start[link]
                    for s in range(start, start + link_slot_count[link]):
                        h = slot_flow[s]
                        if slot_val[s, _S_LEVEL] > ceiling and not pending[h]:
                            pending[h] = True
                            to_join[n_join] = h
                            n_join += 1
            if n_join == 0:
                break
            if poll_every > 0 and n_events + n_resolved >= next_poll:
                next_poll = n_events + n_resolved + poll_every
                with numba.objmode(interrupted="boolean"):
                    interrupted = poll(show_progress, n_finished, n_flows, now, n_events)
                if interrupted:
                    break

            # --- 5c. widen: settle the flows below the lowest move, join the listed -----------
            # Re-solved flows below every level that must still move keep their new rates
            # (below a moving level the filling runs as it did): they are settled, treated
            # as fixed at their new rates and checked like the others until the commit.
            floor = lowest_move * (1.0 - _CHECK_REL_TOL)
            kept = 0
            for i in range(n_region):
                g = region[i]
                level = new_rate[g] / weight[g]
                if rejoined[g] or level >= floor:
                    region[kept] = g
                    kept += 1
                    continue
                in_region[g] = False
                settled[g] = True
                settled_list[n_settled] = g
                n_settled += 1
                for k in range(fl_ptr[g], fl_ptr[g + 1]):
                    link = fl_idx[k]
                    slot = inc_slot[k]
                    slot_val[slot, _S_RATE] = new_rate[g]
                    slot_val[slot, _S_LEVEL] = level
                    fixed_load[link] += new_rate[g]
                    fixed_top[link] = max(fixed_top[link], level)
            if kept < n_region:
                # Positions moved: copy the routes and sum the weights again, in the new order.
                n_copied = 0
                for j in range(n_touched):
                    region_weight[touched[j]] = 0.0
                    region_count[touched[j]] = 0.0
            n_region = kept
            for i in range(n_join):
                h = to_join[i]
                pending[h] = False
                # Links summed before lose h from their fixed flows.
                r = rate[h]
                if settled[h]:
                    settled[h] = False
                    rejoined[h] = True
                    r = new_rate[h]
                level = r / weight[h]
                for k in range(fl_ptr[h], fl_ptr[h + 1]):
                    link = fl_idx[k]
                    if link_mark[link]:
                        fixed_load[link] -= r
                        if level >= fixed_top[link]:
                            fixed_top[link] = np.inf  # re-sum below, once h's slots are marked
                n_region, n_touched = _join(
                    h, in_region, region, n_region, fl_ptr, fl_idx, inc_slot, slot_val,
                    link_mark, touched, n_touched,
                )
            for j in range(n_summed):
                link = touched[j]
                if fixed_top[link] == np.inf:
                    fixed_load[link], fixed_top[link] = _fixed_sums(link, link_slot_start, link_slot_count, slot_val)

        if interrupted:
            break

        # --- 6. commit: rates, pieces, completions, link loads and marks ----------------------
        for i in range(n_settled):
            g = settled_list[i]
            if settled[g]:
                settled[g] = False
                region[n_region] = g
                n_region += 1
        # Room for this instant's rate segments, made once here: an array variable reassigned
        # inside a loop is reference-counted at every iteration of it, recording or not.
        if record != RECORD_NONE:
            n_dep_inc = 0
            early = False  # a flow finished before the instant (in a coarse time window)
            for i in range(n_dep):
                f = departures[i]
                n_dep_inc += fl_ptr[f + 1] - fl_ptr[f]
                early |= finish_s[f] < now
            seg_entity, seg_data = _reserve(
                seg_entity, seg_data, n_seg + n_dep + n_region + n_touched + n_dep_inc
            )
            if early:
                # Its links carried its rate only until it finished: cut their pieces at each
                # finish of the batch. Loads are summed back from the flows left, last finish
                # first (the flows left keep their old rates until the instant, arrivals had
                # none), so that an emptied link shows 0; pieces are then written in time order.
                for i in range(n_dep - 1, -1, -1):
                    f = departures[i]
                    for k in range(fl_ptr[f], fl_ptr[f + 1]):
                        link = fl_idx[k]
                        if not split_mark[link]:
                            split_mark[link] = True
                            load = 0.0
                            start = link_slot_start[link]
                            for s in range(start, start + link_slot_count[link]):
                                load += rate[slot_flow[s]]
                            split_load[link] = load
                            split_end[link] = now
                        piece_load[k] = split_load[link]
                        piece_end[k] = split_end[link]
                        split_load[link] += rate[f]
                        split_end[link] = finish_s[f]
                for i in range(n_dep):
                    f = departures[i]
                    for k in range(fl_ptr[f], fl_ptr[f + 1]):
                        link = fl_idx[k]
                        if split_mark[link]:  # the committed load up to the first finish
                            split_mark[link] = False
                            n_seg = _segment(
                                seg_entity, seg_data, n_seg, link, link_since[link], finish_s[f], link_load[link]
                            )
                            link_since[link] = now
                        n_seg = _segment(seg_entity, seg_data, n_seg, link, finish_s[f], piece_end[k], piece_load[k])
        if record == RECORD_LINKS_AND_FLOWS:
            for i in range(n_dep):
                f = departures[i]
                n_seg = _segment(seg_entity, seg_data, n_seg, n_links + f, settled_at[f], finish_s[f], rate[f])
        for i in range(n_region):
            g = region[i]
            in_region[g] = False
            rejoined[g] = False
            r = new_rate[g]
            level = r / weight[g]
            # Flows settled by a widening, put back after the copied ones, have no copy.
            if i < n_copied:
                start, stop, slots = region_route[i], region_route[i + 1], region_slots
            else:
                start, stop, slots = fl_ptr[g], fl_ptr[g + 1], inc_slot
            for k in range(start, stop):
                s = slots[k]
                slot_val[s, _S_RATE] = r
                slot_val[s, _S_LEVEL] = level
            if r == rate[g]:
                continue
            n_changed += 1
            if record == RECORD_LINKS_AND_FLOWS and rate[g] > 0:
                n_seg = _segment(seg_entity, seg_data, n_seg, n_links + g, settled_at[g], now, rate[g])
            remaining[g] = max(remaining[g] - rate[g] * (now - settled_at[g]), 0.0)
            settled_at[g] = now
            rate[g] = r
            n_fin = iheap_set(fin_keys, fin_items, fin_position, n_fin, g, now + remaining[g] / r)
        for j in range(n_touched):
            link = touched[j]
            link_mark[link] = False
            link_push[link] = 0
            link_fills[link] = False
            seed_fill[link] = np.nan
            seed_overflow[link] = np.nan
            link_sat_level[link] = new_sat_level[link]
            region_weight[link] = 0.0
            region_count[link] = 0.0
            if new_load[link] != link_load[link]:
                if record != RECORD_NONE:
                    n_seg = _segment(seg_entity, seg_data, n_seg, link, link_since[link], now, link_load[link])
                link_load[link] = new_load[link]
                link_since[link] = now
    return (
        overflow,
        n_events,
        n_updates,
        n_resolved,
        n_changed,
        seg_entity[:n_seg].copy(),
        seg_data[:n_seg, 0].copy(),
        seg_data[:n_seg, 1].copy(),
        seg_data[:n_seg, 2].copy(),
    )


@njit(cache=True, inline="always")
def _fixed_sums(link, link_slot_start, link_slot_count, slot_val):
    """Load and top level of the flows on ``link`` that are not being re-solved."""
    start = link_slot_start[link]
    load = 0.0
    top = -1.0
    for s in range(start, start + link_slot_count[link]):
        load += slot_val[s, _S_RATE]
        top = max(top, slot_val[s, _S_LEVEL])
    return load, top


@njit(cache=True, inline="always")
def _join(g, in_region, region, n_region, fl_ptr, fl_idx, inc_slot, slot_val, link_mark, touched, n_touched):
    """Add flow ``g`` to the region being re-solved: mark its slots and touch its links."""
    in_region[g] = True
    region[n_region] = g
    for k in range(fl_ptr[g], fl_ptr[g + 1]):
        s = inc_slot[k]
        slot_val[s, _S_RATE] = 0.0
        slot_val[s, _S_LEVEL] = -1.0
    return n_region + 1, _touch_route(g, fl_ptr, fl_idx, link_mark, touched, n_touched)


@njit(cache=True, inline="always")
def _copy_routes(
    first, n_region, region, fl_ptr, fl_idx, inc_slot, weight, region_route, region_links, region_slots,
    region_weight, region_count,
):
    """Copy the routes of ``region[first:n_region]`` and their slots into ``region_links`` and
    ``region_slots`` after those before them, adding each flow's weight and 1 to its links'
    sums; return ``n_region``."""
    at = region_route[first]
    for i in range(first, n_region):
        g = region[i]
        for k in range(fl_ptr[g], fl_ptr[g + 1]):
            link = fl_idx[k]
            region_links[at] = link
            region_slots[at] = inc_slot[k]
            at += 1
            region_weight[link] += weight[g]
            region_count[link] += 1.0
        region_route[i + 1] = at
    return n_region


@njit(cache=True)
def _has_bottleneck(g, r, cap_Bps, weight, links, start, stop, link_mark, new_sat_level, link_sat_level):
    """Is flow ``g`` at rate ``r`` capped, or the largest level on a saturated link? Its route is
    ``links[start:stop]``."""
    if r >= cap_Bps[g] * (1.0 - _CHECK_REL_TOL):
        return True
    level = r / weight[g]
    for k in range(start, stop):
        link = links[k]
        top = new_sat_level[link] if link_mark[link] else link_sat_level[link]
        if top >= 0 and level >= top * (1.0 - _CHECK_REL_TOL):
            return True
    return False


@njit(cache=True)
def _held_elsewhere(h, r, cap_Bps, weight, fl_ptr, fl_idx, link_push, link_sat_level):
    """Does flow ``h`` at rate ``r`` stay put through its cap or an unchanged saturated link?"""
    if r >= cap_Bps[h] * (1.0 - _CHECK_REL_TOL):
        return True
    level = r / weight[h]
    for k in range(fl_ptr[h], fl_ptr[h + 1]):
        link = fl_idx[k]
        top = link_sat_level[link]
        if link_push[link] == 0 and top >= 0 and level >= top * (1.0 - _CHECK_REL_TOL):
            return True
    return False


@njit(cache=True)
def _fill_levels(link, capacity, link_slot_start, link_slot_count, slot_val, above):
    """Levels at which ``link`` fills if its flows being re-solved rise without limit: with
    the others at their rates (where they overflow it), and with the others keeping their
    rates only up to that level (its fill level); both inf if it has no such flows. An
    overflow level below 0 (the others over capacity by rounding) is its own fill level, or
    -1 if lower.

    Water-filling by fixed-point iteration: from the overflow level, each next level lets the
    others above the last one rise too, which raises the level, until the others above a
    level are those above the one before (the next level would be the same). The levels
    only grow, so the others above each one are among those above the one before: one pass
    over the slots lists the others above the overflow level in ``above`` (float64[>= the
    link's slots, 3], the slots' columns; workspace) and each next level scans only that
    list, which keeps the flows still above.
    """
    start = link_slot_start[link]
    stop = start + link_slot_count[link]
    load = 0.0
    w_free = 0.0
    for s in range(start, stop):
        if slot_val[s, _S_LEVEL] < 0:
            w_free += slot_val[s, _S_WEIGHT]
        else:
            load += slot_val[s, _S_RATE]
    if w_free == 0:
        return np.inf, np.inf
    overflow = (capacity - load) / w_free
    if overflow < 0:
        return overflow, max(overflow, -1.0)
    n_above = 0
    for s in range(start, stop):
        if slot_val[s, _S_LEVEL] > overflow:
            for c in range(3):
                above[n_above, c] = slot_val[s, c]
            n_above += 1
    level = overflow
    while n_above > 0:
        rate_above = 0.0
        w_above = 0.0
        for i in range(n_above):
            rate_above += above[i, _S_RATE]
            w_above += above[i, _S_WEIGHT]
        new_level = (capacity - (load - rate_above)) / (w_free + w_above)
        if new_level <= level:
            break
        level = new_level
        kept = 0
        for i in range(n_above):
            if above[i, _S_LEVEL] > level:
                for c in range(3):
                    above[kept, c] = above[i, c]
                kept += 1
        if kept == n_above:
            break  # the same flows rise: the next level is this one
        n_above = kept
    return overflow, level


@njit(cache=True, inline="always")
def _spread(
    f, origin, change, fl_ptr, fl_idx, link_push, link_sat_level, floor_level, link_stack, n_stack,
    link_fills, capacity, link_load, fill_spare,
):
    """Add ``change`` to the links of ``f`` other than ``origin``; stack each link that gains
    a bit and may move flows: saturated, at level ``floor_level`` or above, or unsaturated,
    gaining load with less spare capacity than ``fill_spare`` (then marked as filling)."""
    for k in range(fl_ptr[f], fl_ptr[f + 1]):
        link = fl_idx[k]
        if link != origin and link_push[link] | change != link_push[link]:
            link_push[link] |= change
            if link_sat_level[link] >= floor_level:
                link_stack[n_stack] = link
                n_stack += 1
            elif (
                change & _GAINS
                and link_sat_level[link] < 0
                and not link_fills[link]
                and capacity[link] - link_load[link] < fill_spare
            ):
                link_fills[link] = True
                link_stack[n_stack] = link
                n_stack += 1
    return n_stack


@njit(cache=True, inline="always")
def _touch_route(f, fl_ptr, fl_idx, link_mark, touched, n_touched):
    for k in range(fl_ptr[f], fl_ptr[f + 1]):
        link = fl_idx[k]
        if not link_mark[link]:
            link_mark[link] = True
            touched[n_touched] = link
            n_touched += 1
    return n_touched


@njit(cache=True, inline="always")
def _next_time(ev_keys, n_ev, fin_keys, n_fin):
    """Time of the earliest pending event of either queue; inf when both are empty."""
    t = ev_keys[0] if n_ev > 0 else np.inf
    if n_fin > 0 and fin_keys[0] < t:
        t = fin_keys[0]
    return t


@njit(cache=True)
def _reserve(entity, data, n):
    """Segment arrays with room for ``n`` pieces: these, or copies twice as large or more."""
    size = entity.shape[0]
    if n <= size:
        return entity, data
    while size < n:
        size *= 2
    new_entity = np.empty(size, dtype=np.int64)
    new_data = np.empty((size, 3), dtype=np.float64)
    for i in range(entity.shape[0]):
        new_entity[i] = entity[i]
        for j in range(3):
            new_data[i, j] = data[i, j]
    return new_entity, new_data


@njit(cache=True)
def _segment(entity, data, n, who, start, end, rate):
    """Write a constant-rate piece at ``n`` (skipping empty and zero-rate ones, the arrays
    having room, see :func:`_reserve`); return the new count."""
    if rate == 0.0 or end <= start:
        return n
    entity[n] = who
    data[n, 0] = start
    data[n, 1] = end
    data[n, 2] = rate
    return n + 1
