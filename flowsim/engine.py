"""``simulate``: flows over links in time, as the "Time" section of docs/model.md defines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.errors import InputError, flag, float_column, item_label, relative_tolerance
from flowsim.fairshare import DEFAULT_TIE_REL_TOL, check_flow_names, checked_flows
from flowsim.quotient import FlowClasses, flow_classes
from flowsim.result import SimulationResult
from flowsim.routes import Routes, count_routes
from flowsim_kernels.dag import find_cycle_member
from flowsim_kernels.engine import (
    RECORD_LINKS,
    RECORD_LINKS_AND_FLOWS,
    RECORD_NONE,
    EngineInput,
    simulate_flows,
)
from flowsim_kernels.progress import begin as progress_begin
from flowsim_kernels.progress import deferred_interrupt
from flowsim_kernels.progress import finish as progress_done

#: Events within this relative distance of each other are handled as one instant (docs/model.md "Time").
DEFAULT_TIME_REL_TOL = 1e-12


def time_window_note(time_rel_tol: float) -> str:
    """One line saying that times were computed with coarse time windows.

    >>> time_window_note(1e-3)
    'events within a relative 0.001 of each other taken as one instant: the times are not exact (docs/model.md "Time")'
    """
    return (f"events within a relative {time_rel_tol:g} of each other taken as one instant: the times are not "
            'exact (docs/model.md "Time")')


#: ``simulate``'s modes: re-solve only the flows an event can affect, or every transferring flow.
MODES = ("incremental", "full")

# What the kernel's overflow code names, by its remainder.
_TIMES = ("ready", "transfer-start", "finish")

# Work (events plus flow rates computed) between the kernel's polls for Ctrl-C and progress:
# tens of polls a second, so a Ctrl-C stops a run within a moment and a progress line can
# come every half second, yet too few to cost anything measurable.
_POLL_EVERY = 1 << 16


def simulate(
    routes: Routes | Sequence[Sequence[int | str]],
    capacity_Bps: Sequence[float] | np.ndarray,
    size_bytes: Sequence[float] | np.ndarray,
    *,
    latency_s: Sequence[float] | np.ndarray | None = None,
    start_s: Sequence[float] | np.ndarray | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
    caps_Bps: Sequence[float] | np.ndarray | None = None,
    depends_on: Sequence[Sequence[int]] | tuple[np.ndarray, np.ndarray] | None = None,
    delay_s: Sequence[float] | np.ndarray | None = None,
    overhead_s: Sequence[float] | np.ndarray | None = None,
    record_links: bool = False,
    record_flows: bool = False,
    mode: str = "incremental",
    time_rel_tol: float = DEFAULT_TIME_REL_TOL,
    progress: bool = False,
    link_names: Sequence[str] | None = None,
    flow_names: Sequence[str] | None = None,
    classes: bool = False,
) -> SimulationResult:
    """Simulate flows sharing links max-min fairly until every flow has finished.

    Parameters
    ----------
    routes
        One route per flow: link ids (or names, with ``link_names``), or a ``Routes``.
    capacity_Bps, latency_s
        Per link: capacity (B/s, finite, > 0) and latency (s, >= 0; default 0).
    size_bytes
        Per flow: bytes to deliver (>= 0, finite).
    start_s
        Per flow: earliest ready time (s, >= 0; default 0).
    weights, caps_Bps
        Per flow: max-min weight (> 0; default 1) and rate cap (B/s, > 0; default none).
    depends_on
        Per flow, the flows it waits for: a list of index lists, or a CSR pair
        ``(dep_indptr, dep_indices)``. A flow is ready at
        ``max(start_s, last dependency's finish + delay_s)``.
    delay_s, overhead_s
        Per flow: compute time after the dependencies, and per-message overhead added to the
        route latency (s, >= 0; default 0).
    record_links, record_flows
        Record piecewise-constant rates per link (and, with ``record_flows``, per flow too:
        link rates come with them) in the result.
    mode
        ``"incremental"`` re-solves only the flows an event can affect; ``"full"`` re-solves
        every transferring flow at every event (for comparison).
    time_rel_tol
        Events whose times lie within this relative distance of the earliest pending one are
        handled as one instant, in [0, 1). The default, 1e-12, is the one docs/model.md sets: the
        times are exact.
        A larger value coarsens time, trading exactness for speed where completions crowd:
        every event of a window is recorded at its own time, but the rates it changes are
        re-solved once, at the window's last event, so freed capacity stays idle and arrivals
        wait until then (no link above capacity, every byte delivered; a flow that an
        arrival in the window would have slowed finishes earlier than exact, others later).
        Measured on bursts of 10,000 and 30,000 flows on a k=16 fat-tree, 1e-2 makes 27 and
        75 times fewer updates and moves finish times by 0.2-0.3% on average, 1.1-1.6% at
        most; 1e-3 by 0.03% on average, 0.15% at most.
    progress
        Print how far the run has got on stderr, at most twice a second, once it has run two
        seconds.
    classes
        Solve once per class of flows that share rates at every instant (the coarsest
        equitable partition of flows and links, docs/model.md "Flow classes") and give every
        flow its class's times and every link its class's rates: the same answer, to
        rounding, in the time of the classes rather than the flows where the flows are
        symmetric (a collective on a regular fabric). Where more than half the flows would
        be classes of their own, it solves the full problem. The result's
        ``n_flow_classes`` and ``n_link_classes`` say how many there were (every flow and
        link, when the full problem was solved), and its engine counters count the events
        of what was solved.

    Returns
    -------
    SimulationResult
    """
    record_links = flag("record_links", record_links)
    classes = flag("classes", classes)
    record_flows = flag("record_flows", record_flows)
    progress = flag("progress", progress)
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    time_rel_tol = relative_tolerance("time_rel_tol", time_rel_tol)
    prepared = prepare(
        routes, capacity_Bps, size_bytes, latency_s=latency_s, start_s=start_s, weights=weights, caps_Bps=caps_Bps,
        depends_on=depends_on, delay_s=delay_s, overhead_s=overhead_s, link_names=link_names,
        flow_names=flow_names, classes=classes,
    )
    grouped, size = prepared.grouped, prepared.inp.size_bytes
    n_flows, n_links = size.shape[0], prepared.routes.n_links
    record = RECORD_LINKS_AND_FLOWS if record_flows else RECORD_LINKS if record_links else RECORD_NONE
    solved = prepared.solved
    n_solved = solved.size_bytes.shape[0]
    ready = np.empty(n_solved)
    transfer_start = np.empty(n_solved)
    finish = np.empty(n_solved)
    if progress:
        progress_begin()
    try:
        with deferred_interrupt():
            overflow, n_events, n_updates, n_resolved, n_changed, seg_entity, seg_start, seg_end, seg_rate = (
                simulate_flows(
                    solved,
                    mode == "incremental",
                    record,
                    DEFAULT_TIE_REL_TOL,
                    time_rel_tol,
                    _POLL_EVERY,
                    progress,
                    ready,
                    transfer_start,
                    finish,
                )
            )
    finally:
        if progress:
            progress_done()
    # A class's failure is its first flow's.
    culprit = prepared.culprit
    if overflow >= 0:
        f, what = divmod(int(overflow), 3)
        label = item_label("flow", culprit(f), flow_names)
        raise InputError(
            f"{label}'s {_TIMES[what]} time is beyond float64's range (about 1.8e308 s): its size, "
            "start, delays or latencies are too large, or its rate too small"
        )
    stuck = np.flatnonzero(np.isnan(finish))
    if stuck.size:
        # Every flow of a DAG finishes once its rate is positive, which max-min fairness gives
        # each transferring flow: this is a solver defect, not an input the user can fix.
        label = item_label("flow", culprit(int(stuck[0])), flow_names)
        raise RuntimeError(f"{label} never finished ({stuck.size} flows in all): a flowsim defect, please report it")
    segments = {}
    if record != RECORD_NONE:
        n_entities = n_links + (n_flows if record_flows else 0)
        if grouped is None:
            order = np.argsort(seg_entity, kind="stable")
            indptr = np.zeros(n_entities + 1, dtype=np.int64)
            np.cumsum(np.bincount(seg_entity, minlength=n_entities), out=indptr[1:])
        else:
            n_quotient = grouped.n_link_classes + (grouped.n_flow_classes if record_flows else 0)
            indptr, order = grouped.expand_segments(seg_entity, n_quotient, record_flows)
        segments = dict(
            link_segment_indptr=indptr[: n_links + 1],
            segment_start_s=seg_start[order],
            segment_end_s=seg_end[order],
            segment_rate_Bps=seg_rate[order],
        )
        if record_flows:
            segments["flow_segment_indptr"] = indptr[n_links:]
    return prepared.result(ready, transfer_start, finish, (n_events, n_updates, n_resolved, n_changed), **segments)


@dataclass(frozen=True)
class PreparedRun:
    """A run checked and laid out for the kernels: ``routes`` (checked; capacities, weights
    and caps checked in ``inp``), ``inp`` (every flow), ``grouped`` where it is solved by classes (else
    None), the ``flow_names`` errors name flows by, and whether ``classes`` were asked for
    (then, where ``grouped`` is None, every flow and link is its own class). Results show
    links ``0 .. shown_links - 1`` only, where ``shown_links`` is set (links after the
    topology's: shared budgets, :mod:`flowsim.budgets`)."""

    routes: Routes
    inp: EngineInput
    grouped: FlowClasses | None
    flow_names: Sequence[str] | None = None
    classes: bool = False
    shown_links: int | None = None

    @property
    def class_counts(self) -> tuple[int | None, int | None]:
        """``(n_flow_classes, n_link_classes)`` as a result reports them: None without classes."""
        if not self.classes:
            return None, None
        if self.grouped is None:
            return self.inp.size_bytes.shape[0], self.routes.n_links
        return self.grouped.n_flow_classes, self.grouped.n_link_classes

    @property
    def solved(self) -> EngineInput:
        """What the kernel simulates: the classes' quotient, or every flow."""
        return self.inp if self.grouped is None else self.grouped.quotient

    def lift(self, times: np.ndarray) -> np.ndarray:
        """Per-flow times from the solved problem's (each flow its class's)."""
        return times if self.grouped is None else times[self.grouped.flow_class]

    def culprit(self, solved_flow: int) -> int:
        """The flow that stands for ``solved_flow`` in messages (a class's first flow)."""
        return solved_flow if self.grouped is None else int(self.grouped.representative[solved_flow])

    def result(self, ready: np.ndarray, transfer_start: np.ndarray, finish: np.ndarray,
               counters: tuple[int, int, int, int], **segments) -> SimulationResult:
        """The result of the solved problem's times (lifted to every flow), the engine
        ``counters`` (events, rate updates, rates resolved, rates changed) and ``segments``
        (already per link and flow)."""
        size = self.inp.size_bytes
        n_flow_classes, n_link_classes = self.class_counts
        result = SimulationResult(
            ready_s=self.lift(ready),
            transfer_start_s=self.lift(transfer_start),
            finish_s=self.lift(finish),
            size_bytes=size,
            link_capacity_Bps=self.inp.capacity_Bps,
            link_bytes=self.routes.per_link_sum(size),
            n_events=int(counters[0]),
            n_rate_updates=int(counters[1]),
            n_rates_resolved=int(counters[2]),
            n_rates_changed=int(counters[3]),
            n_flow_classes=n_flow_classes,
            n_link_classes=n_link_classes,
            **segments,
        )
        return result if self.shown_links is None else result.first_links(self.shown_links)


def prepare(
    routes: Routes | Sequence[Sequence[int | str]],
    capacity_Bps: Sequence[float] | np.ndarray,
    size_bytes: Sequence[float] | np.ndarray,
    *,
    latency_s: Sequence[float] | np.ndarray | None = None,
    start_s: Sequence[float] | np.ndarray | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
    caps_Bps: Sequence[float] | np.ndarray | None = None,
    depends_on: Sequence[Sequence[int]] | tuple[np.ndarray, np.ndarray] | None = None,
    delay_s: Sequence[float] | np.ndarray | None = None,
    overhead_s: Sequence[float] | np.ndarray | None = None,
    link_names: Sequence[str] | None = None,
    flow_names: Sequence[str] | None = None,
    classes: bool = False,
) -> PreparedRun:
    """Check one run's arguments (as :func:`simulate` takes them) and lay them out for the
    kernels, grouped into flow classes with ``classes``; errors name the flow or link."""
    classes = flag("classes", classes)
    n_flows = count_routes(routes)
    check_flow_names(flow_names, n_flows)
    size = _nonnegative(size_bytes, n_flows, None, "size_bytes", flow_names, "flow")
    # A zero-byte flow never transfers (it finishes when its latency ends), so it needs no
    # route or cap: a dependency join, for instance.
    routes, capacity, weight, cap = checked_flows(
        routes, capacity_Bps, weights, caps_Bps, link_names=link_names, flow_names=flow_names, idle=size == 0
    )
    start = _nonnegative(start_s, n_flows, 0.0, "start_s", flow_names, "flow")
    delay = _nonnegative(delay_s, n_flows, 0.0, "delay_s", flow_names, "flow")
    overhead = _nonnegative(overhead_s, n_flows, 0.0, "overhead_s", flow_names, "flow")
    latency = _nonnegative(latency_s, routes.n_links, 0.0, "latency_s", link_names, "link")
    dep_indptr, dep_indices = _dependency_csr(depends_on, n_flows, flow_names)
    inp = EngineInput(
        routes.flow_link_indptr,
        routes.flow_link_indices,
        capacity,
        latency,
        size,
        start,
        weight,
        cap,
        delay,
        overhead,
        dep_indptr,
        dep_indices,
    )
    # The flows crossing each link, for the classes only, let go once they are found (the
    # event kernel keeps its own per-link slots).
    grouped = flow_classes(inp, *routes.transpose()) if classes else None
    return PreparedRun(routes, inp, grouped, flow_names, classes)


def _nonnegative(values, n, default, what, names, kind):
    if values is None and default is None:
        raise InputError(f"{what} is required")
    arr = float_column(values, n, default, what, kind)
    bad = np.flatnonzero(~(arr >= 0) | ~np.isfinite(arr))
    if bad.size:
        i = int(bad[0])
        label = item_label(kind, i, names)
        raise InputError(f"{label} has {what} {float(arr[i])!r}; it must be finite and >= 0")
    arr.flags.writeable = False
    return arr


def _dependency_csr(depends_on, n_flows, flow_names):
    if depends_on is None:
        return np.zeros(n_flows + 1, dtype=np.int64), np.empty(0, dtype=np.int64)
    if isinstance(depends_on, tuple) and len(depends_on) == 2 and isinstance(depends_on[0], np.ndarray):
        if any(np.asarray(a).dtype.kind not in "iu" for a in depends_on):
            raise InputError("depends_on CSR arrays must hold integers (flow indices)")
        indptr = np.ascontiguousarray(depends_on[0], dtype=np.int64)
        indices = np.ascontiguousarray(depends_on[1], dtype=np.int64)
        if (
            indptr.shape != (n_flows + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0)
            or indptr[-1] != indices.size
        ):
            raise InputError("depends_on CSR pointers do not match the flows")
    else:
        if len(depends_on) != n_flows:
            raise InputError(f"depends_on has {len(depends_on)} entries for {n_flows} flows")
        for f, deps in enumerate(depends_on):
            if isinstance(deps, (str, bytes)) or not isinstance(deps, (Sequence, np.ndarray)):
                raise InputError(
                    f"{item_label('flow', f, flow_names)} depends on {deps!r}; give a list of flow indices "
                    "(empty for none)"
                )
        indptr = np.zeros(n_flows + 1, dtype=np.int64)
        np.cumsum([len(d) for d in depends_on], out=indptr[1:])
        for f, deps in enumerate(depends_on):
            for d in deps:
                if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
                    raise InputError(
                        f"{item_label('flow', f, flow_names)} depends on {d!r}; dependencies are flow indices "
                        "(integers)"
                    )
        indices = np.array([int(d) for deps in depends_on for d in deps], dtype=np.int64)
    bad = np.flatnonzero((indices < 0) | (indices >= n_flows))
    if bad.size:
        f = int(np.searchsorted(indptr, bad[0], side="right") - 1)
        raise InputError(f"{item_label('flow', f, flow_names)} depends on unknown flow {int(indices[bad[0]])}")
    member = find_cycle_member(indptr, indices)
    if member >= 0:
        raise InputError(f"dependency cycle through {item_label('flow', int(member), flow_names)}")
    return indptr, indices
