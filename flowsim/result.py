"""What a simulation returns: per-flow times, per-link rate segments, summaries."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from flowsim.errors import InputError


class FlowTimes:
    """Figures derived from per-flow times and per-link bytes, shared by results and traces.

    Needs ``ready_s``, ``finish_s``, ``link_bytes`` and ``link_capacity_Bps`` attributes.
    """

    ready_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    link_capacity_Bps: np.ndarray

    @property
    def n_flows(self) -> int:
        return self.finish_s.shape[0]

    @property
    def makespan_s(self) -> float:
        """Time the last flow finishes (0 for no flows)."""
        return float(self.finish_s.max()) if self.n_flows else 0.0

    @property
    def fct_s(self) -> np.ndarray:
        """Flow completion times: finish minus ready (float64[n_flows], s)."""
        return self.finish_s - self.ready_s

    def fct_percentiles(self, q: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9)) -> dict[float, float]:
        """Flow-completion-time percentiles (s) over every flow, zero-byte ones (markers,
        compute steps) included; NaN when there are no flows."""
        if not self.n_flows:
            return {p: float("nan") for p in q}
        return dict(zip(q, np.percentile(self.fct_s, q).tolist(), strict=True))

    def link_utilization(self, duration_s: float | None = None) -> np.ndarray:
        """Mean utilization of each link over ``duration_s`` (> 0; default: the makespan,
        zeros when that is 0)."""
        if duration_s is not None and not (0 < duration_s < float("inf")):
            raise InputError(f"duration_s must be finite and > 0, got {duration_s!r}")
        duration = self.makespan_s if duration_s is None else duration_s
        if duration <= 0:
            return np.zeros_like(self.link_bytes)
        return self.link_bytes / (self.link_capacity_Bps * duration)


@dataclass(frozen=True)
class SimulationResult(FlowTimes):
    """Outcome of :func:`flowsim.simulate`.

    Per flow (float64[n_flows], seconds): ``ready_s`` (dependencies met and delay over),
    ``transfer_start_s`` (route latency over; joins the fair share), ``finish_s`` (last byte
    delivered). Per link: ``link_bytes`` (bytes carried) over ``link_capacity_Bps``.
    When link recording is on, ``link_segment_indptr`` (int64[n_links + 1]) points into
    ``segment_start_s``, ``segment_end_s`` and ``segment_rate_Bps``: each link's rate as
    consecutive constant pieces (pieces at rate 0 are omitted).

    Engine counters: ``n_events`` (readiness, transfer starts and completions handled),
    ``n_rate_updates`` (re-solves), ``n_rates_resolved`` (flow rates computed over all
    re-solves) and ``n_rates_changed`` (those that differ from the flow's previous rate,
    arrivals included: what an exact engine cannot avoid computing).

    Solved by classes (``simulate(..., classes=True)``): ``n_flow_classes`` and
    ``n_link_classes`` (else None), and the engine counters count the classes' events.
    """

    ready_s: np.ndarray
    transfer_start_s: np.ndarray
    finish_s: np.ndarray
    size_bytes: np.ndarray
    link_capacity_Bps: np.ndarray
    link_bytes: np.ndarray
    n_events: int
    n_rate_updates: int
    n_rates_resolved: int
    n_rates_changed: int
    link_segment_indptr: np.ndarray | None = None
    segment_start_s: np.ndarray | None = None
    segment_end_s: np.ndarray | None = None
    segment_rate_Bps: np.ndarray | None = None
    flow_segment_indptr: np.ndarray | None = None
    n_flow_classes: int | None = None
    n_link_classes: int | None = None

    def first_links(self, n_links: int) -> SimulationResult:
        """This result with links ``n_links`` onward left out (with their rate segments):
        the links a simulation adds after the topology's (:mod:`flowsim.budgets`)."""
        if self.link_segment_indptr is None:
            return replace(self, link_capacity_Bps=self.link_capacity_Bps[:n_links],
                           link_bytes=self.link_bytes[:n_links])
        indptr = self.link_segment_indptr
        cut_from, cut_to = int(indptr[n_links]), int(indptr[-1])  # the added links' pieces
        assert self.segment_start_s is not None and self.segment_end_s is not None
        assert self.segment_rate_Bps is not None

        def kept(pieces: np.ndarray) -> np.ndarray:
            return np.concatenate([pieces[:cut_from], pieces[cut_to:]])

        flow_indptr = None if self.flow_segment_indptr is None else self.flow_segment_indptr - (cut_to - cut_from)
        return replace(
            self, link_capacity_Bps=self.link_capacity_Bps[:n_links], link_bytes=self.link_bytes[:n_links],
            link_segment_indptr=indptr[: n_links + 1], segment_start_s=kept(self.segment_start_s),
            segment_end_s=kept(self.segment_end_s), segment_rate_Bps=kept(self.segment_rate_Bps),
            flow_segment_indptr=flow_indptr,
        )

    def link_segments(self, link: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(start_s, end_s, rate_Bps)`` of one link's constant-rate pieces."""
        if self.link_segment_indptr is None:
            raise ValueError("link rates were not recorded; simulate with record_links=True")
        return self._pieces(self.link_segment_indptr, link, "link")

    def flow_segments(self, flow: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(start_s, end_s, rate_Bps)`` of one flow's constant-rate pieces."""
        if self.flow_segment_indptr is None:
            raise ValueError("flow rates were not recorded; simulate with record_flows=True")
        return self._pieces(self.flow_segment_indptr, flow, "flow")

    def _pieces(self, indptr: np.ndarray, i: int, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = indptr.shape[0] - 1
        if not 0 <= i < n:  # a negative index would slice the wrong pieces, or none
            raise IndexError(f"{kind} {i} out of range: there are {n} ({kind}s 0..{n - 1})")
        start, end, rate = self.segment_start_s, self.segment_end_s, self.segment_rate_Bps
        assert start is not None and end is not None and rate is not None  # recorded with any indptr
        lo, hi = indptr[i], indptr[i + 1]
        return start[lo:hi], end[lo:hi], rate[lo:hi]

    def summary(self) -> dict[str, int | float]:
        """Makespan, flow-completion-time percentiles and link figures as plain floats, and
        the flow and event counts as ints."""
        out: dict[str, int | float] = {
            "makespan_s": self.makespan_s, "n_flows": int(self.n_flows), "n_events": int(self.n_events),
        }
        for p, v in self.fct_percentiles().items():
            out[f"fct_p{p:g}_s"] = v
        util = self.link_utilization()
        out["max_link_utilization"] = float(util.max()) if util.size else 0.0
        out["total_link_bytes"] = float(self.link_bytes.sum())
        return out
