"""Instantaneous weighted max-min fair rates: the public face of the solver kernel."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from flowsim.errors import InputError, first_repeat, float_array, float_column, item_label, relative_tolerance
from flowsim.routes import Routes, count_routes
from flowsim.strings import StringColumn
from flowsim_kernels.maxmin import max_min_fair

#: Links or caps whose fair levels lie within this relative distance saturate in one round.
DEFAULT_TIE_REL_TOL = 1e-12
#: A link loaded to within this relative distance of its capacity counts as saturated: the
#: solver's feasibility tolerance (docs/model.md "Rates").
SATURATED_REL_TOL = 1e-9
# Largest fair level or weight sum accepted: float64 ends near 1.8e308, and the solver adds
# and scales levels and weights (a few orders of magnitude of room).
_LEVEL_LIMIT = 1e300
#: Largest ratio of one flow's weight to another's that the solver and the engine take
#: (docs/model.md "Supported range"): rates come out exact to 1e-9 within it, checked by
#: tests/test_fuzz_invariants.py; beyond it the share left to the light flows is a
#: difference of float64 numbers too close to keep their digits.
MAX_WEIGHT_RATIO = 1e6
#: Largest ratio between any two of the link capacities and finite rate caps (the same
#: section and test).
MAX_RATE_RATIO = 1e6


@dataclass(frozen=True)
class FairShareProblem:
    """Flows, routes and links, checked once and held as the kernel's arrays.

    Build with :meth:`build` (which also takes routes as lists, and names for errors) or
    construct from a :class:`~flowsim.Routes` and arrays, which are checked as
    :func:`max_min_rates` checks them; call :meth:`solve` as often as needed (for instance
    with other capacities through :meth:`with_capacities`) without re-checking the routes.
    """

    routes: Routes
    capacity_Bps: np.ndarray
    weight: np.ndarray
    cap_Bps: np.ndarray
    #: The routes' transpose (links' flows), made from ``routes``.
    link_flow_indptr: np.ndarray = field(init=False, repr=False)
    link_flow_indices: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.routes, Routes):
            raise InputError(
                f"FairShareProblem takes a flowsim.Routes, not {type(self.routes).__name__} "
                "(FairShareProblem.build also takes lists of links)"
            )
        self._hold(*checked_flows(self.routes, self.capacity_Bps, self.weight, self.cap_Bps))

    def _hold(self, routes: Routes, capacity: np.ndarray, weight: np.ndarray, cap: np.ndarray) -> None:
        """Take checked arrays (:func:`checked_flows`) and the routes' transpose."""
        link_flow_indptr, link_flow_indices = routes.transpose()
        for name, value in (("routes", routes), ("capacity_Bps", capacity), ("weight", weight), ("cap_Bps", cap),
                            ("link_flow_indptr", link_flow_indptr), ("link_flow_indices", link_flow_indices)):
            object.__setattr__(self, name, value)

    @classmethod
    def build(
        cls,
        routes: Routes | Sequence[Sequence[int | str]],
        capacity_Bps: Sequence[float] | np.ndarray,
        weights: Sequence[float] | np.ndarray | None = None,
        caps_Bps: Sequence[float] | np.ndarray | None = None,
        *,
        link_names: Sequence[str] | None = None,
        flow_names: Sequence[str] | None = None,
    ) -> FairShareProblem:
        """Check routes, capacities, weights and caps as :func:`max_min_rates` does, naming
        links and flows by ``link_names`` and ``flow_names``, and transpose the routes."""
        checked = checked_flows(routes, capacity_Bps, weights, caps_Bps, link_names=link_names, flow_names=flow_names)
        problem = object.__new__(cls)  # checked once, here with the names: the constructor would check again
        problem._hold(*checked)
        return problem

    @property
    def n_flows(self) -> int:
        return self.routes.n_flows

    @property
    def n_links(self) -> int:
        return self.routes.n_links

    def with_capacities(self, capacity_Bps: Sequence[float] | np.ndarray) -> FairShareProblem:
        """The same flows over links of other capacities (checked; the routes are not)."""
        capacity = check_capacities(capacity_Bps)
        if capacity.shape[0] != self.n_links:
            raise InputError(f"expected {self.n_links} capacities, got {capacity.shape[0]}")
        check_level_range(capacity, self.weight, self.cap_Bps, None)
        problem = copy.copy(self)
        object.__setattr__(problem, "capacity_Bps", capacity)
        return problem

    def solve(self, tie_rel_tol: float = DEFAULT_TIE_REL_TOL) -> np.ndarray:
        """Rates of all flows in B/s (float64[n_flows]); ``tie_rel_tol`` (see
        :func:`check_tie_rel_tol`): levels within this relative distance of a round's lowest
        are frozen in that round."""
        tie_rel_tol = check_tie_rel_tol(tie_rel_tol)
        rate = np.empty(self.n_flows, dtype=np.float64)
        max_min_fair(
            self.routes.flow_link_indptr,
            self.routes.flow_link_indices,
            self.link_flow_indptr,
            self.link_flow_indices,
            self.capacity_Bps,
            self.weight,
            self.cap_Bps,
            tie_rel_tol,
            rate,
        )
        return rate


def checked_flows(
    routes: Routes | Sequence[Sequence[int | str]],
    capacity_Bps: Sequence[float] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
    caps_Bps: Sequence[float] | np.ndarray | None = None,
    *,
    link_names: Sequence[str] | None = None,
    flow_names: Sequence[str] | None = None,
    idle: np.ndarray | None = None,
) -> tuple[Routes, np.ndarray, np.ndarray, np.ndarray]:
    """Routes, capacities, weights and caps checked (see :func:`max_min_rates`), as
    ``(routes, capacity_Bps, weight, cap_Bps)`` arrays, without the transpose of the routes
    that :meth:`FairShareProblem.build` adds (an event simulation needs none: its kernel
    builds what it uses).

    ``idle`` (bool[n_flows]) marks flows that never take a rate, such as a simulation's
    zero-byte flows: they need no route or cap. Any other flow with an empty route needs
    a finite cap.
    """
    capacity = check_capacities(capacity_Bps, link_names)
    check_flow_names(flow_names, count_routes(routes))
    if not isinstance(routes, Routes):
        index = {name: i for i, name in enumerate(link_names)} if link_names is not None else None
        routes = Routes.from_lists(routes, capacity.shape[0], index, flow_names)
    elif routes.n_links != capacity.shape[0]:
        raise InputError(
            f"routes are over {routes.n_links} links but capacity_Bps has {capacity.shape[0]}"
        )
    n_flows = routes.n_flows
    weight = _flow_array(weights, n_flows, 1.0, "weights", flow_names)
    bad = np.flatnonzero(~(weight > 0) | ~np.isfinite(weight))
    if bad.size:
        f = int(bad[0])
        raise InputError(
            f"{item_label('flow', f, flow_names)} has weight {float(weight[f])!r}; weights must be finite and > 0"
        )
    cap = _flow_array(caps_Bps, n_flows, np.inf, "caps_Bps", flow_names)
    bad = np.flatnonzero(~(cap > 0))
    if bad.size:
        f = int(bad[0])
        raise InputError(
            f"{item_label('flow', f, flow_names)} has rate cap {float(cap[f])!r} B/s; caps must be > 0 "
            "(inf for none)"
        )
    unbounded = (routes.hop_counts() == 0) & np.isinf(cap)
    if idle is not None:
        unbounded &= ~np.asarray(idle, dtype=bool)
    unlimited = np.flatnonzero(unbounded)
    if unlimited.size:
        f = int(unlimited[0])
        raise InputError(
            f"{item_label('flow', f, flow_names)} has an empty route and no rate cap, so no finite rate"
        )
    check_level_range(capacity, weight, cap, flow_names, link_names)
    return routes, capacity, weight, cap


def check_tie_rel_tol(tie_rel_tol: object) -> float:
    """``tie_rel_tol`` as a float; an :class:`InputError` unless it is a number in [0, 1).

    A negative or NaN tolerance would keep the fill from ever freezing a link (it hangs); 1
    or more would merge levels a factor of 2 or more apart (and ``inf`` every level).
    """
    return relative_tolerance("tie_rel_tol", tie_rel_tol)


def max_min_rates(
    routes: Routes | Sequence[Sequence[int | str]],
    capacity_Bps: Sequence[float] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
    caps_Bps: Sequence[float] | np.ndarray | None = None,
    *,
    link_names: Sequence[str] | None = None,
    flow_names: Sequence[str] | None = None,
) -> np.ndarray:
    """Weighted max-min fair rates (B/s) of flows sharing directed links.

    Parameters
    ----------
    routes
        A :class:`~flowsim.Routes`, or one sequence of links per flow: integer link ids, or
        link names when ``link_names`` is given.
    capacity_Bps
        Capacity of each link, finite and > 0.
    weights
        Flow weights (> 0), default 1.
    caps_Bps
        Flow rate caps (> 0, ``inf`` for none), default none.
    link_names, flow_names
        Used to look up named links and to name the offending item in errors.

    Returns
    -------
    numpy.ndarray
        float64 rate of each flow.

    Examples
    --------
    The parking lot of docs/model.md case 3 (link A: 1 GB/s, link B: 2 GB/s):

    >>> max_min_rates([[0, 1], [0], [1]], [1e9, 2e9]) / 1e9
    array([0.5, 0.5, 1.5])
    """
    problem = FairShareProblem.build(
        routes, capacity_Bps, weights, caps_Bps, link_names=link_names, flow_names=flow_names
    )
    return problem.solve()


def check_capacities(capacity_Bps: Sequence[float] | np.ndarray, link_names: Sequence[str] | None = None) -> np.ndarray:
    """Capacities as a fresh read-only float64 array, each finite and > 0."""
    capacity = float_array(capacity_Bps, "capacity_Bps")
    if capacity.ndim != 1:
        raise InputError(f"capacity_Bps must be one value per link, got shape {capacity.shape}")
    if link_names is not None:
        check_link_names(link_names, capacity.shape[0])
    bad = np.flatnonzero(~(capacity > 0) | ~np.isfinite(capacity))
    if bad.size:
        i = int(bad[0])
        name = item_label("link", i, link_names)
        raise InputError(f"{name} has capacity {float(capacity[i])!r} B/s; capacities must be finite and > 0")
    capacity.flags.writeable = False
    return capacity


def check_link_names(link_names: Sequence[str], n_links: int) -> None:
    """An :class:`InputError` unless ``link_names`` names each of ``n_links`` links once (a
    repeated name would route every flow naming it over its last link only)."""
    if len(link_names) != n_links:
        raise InputError(f"{len(link_names)} link names for {n_links} capacities")
    repeat = first_repeat(link_names)
    if repeat is not None:
        i, j = repeat
        raise InputError(f"link names {i} and {j} are both {link_names[j]!r}; each link needs its own name")


def check_flow_names(flow_names: Sequence[str] | None, n_flows: int) -> None:
    """An :class:`InputError` unless ``flow_names`` is None or names each flow once (a
    repeated name would make errors and results name two flows alike)."""
    if flow_names is None:
        return
    if len(flow_names) != n_flows:
        raise InputError(f"{len(flow_names)} flow names for {n_flows} flows")
    # flowsim's own string columns are a Workload's names, each once since it was built: not
    # checked again for every run of millions of flows.
    repeat = None if isinstance(flow_names, StringColumn) else first_repeat(flow_names)
    if repeat is not None:
        i, j = repeat
        raise InputError(f"flow names {i} and {j} are both {flow_names[j]!r}; each flow needs its own name")


def check_level_range(
    capacity_Bps: np.ndarray,
    weight: np.ndarray,
    cap_Bps: np.ndarray,
    flow_names: Sequence[str] | None,
    link_names: Sequence[str] | None = None,
) -> None:
    """An :class:`InputError` unless weights and rates lie within :data:`MAX_WEIGHT_RATIO`
    and :data:`MAX_RATE_RATIO` of each other (see :func:`check_ratios`) and fair levels
    (rate / weight) and weight sums stay well inside float64's range, else the solver
    would return wrong rates without a sign.

    The arrays are one instance's: capacities [n_links], weights and caps [n_flows] (a batch
    checks its instances one by one). A level is at most the largest capacity or finite cap
    over the smallest weight.
    """
    if weight.size == 0:
        return
    f = int(np.argmin(weight))
    finite_caps = cap_Bps[np.isfinite(cap_Bps)]
    top = max(float(capacity_Bps.max(initial=0.0)), float(finite_caps.max(initial=0.0)))
    w = float(weight[f])
    if top / w > _LEVEL_LIMIT:
        raise InputError(
            f"{item_label('flow', f, flow_names)} has weight {w!r}: with rates up to {top:.6g} B/s its fair level "
            f"(rate / weight) would pass float64's range; weights only count relative to each "
            f"other, so scale them nearer 1"
        )
    with np.errstate(over="ignore"):  # an infinite sum is reported below
        total = float(weight.sum())
    if total > _LEVEL_LIMIT:
        raise InputError(
            f"the flows' weights add up to {total!r}, beyond float64's range; weights only count "
            f"relative to each other, so scale them nearer 1"
        )
    check_ratios(capacity_Bps, weight, cap_Bps, flow_names, link_names)


def check_ratios(
    capacity_Bps: np.ndarray,
    weight: np.ndarray,
    cap_Bps: np.ndarray,
    flow_names: Sequence[str] | None,
    link_names: Sequence[str] | None = None,
) -> None:
    """An :class:`InputError` naming the two flows (or links) furthest apart unless the
    weights lie within :data:`MAX_WEIGHT_RATIO` of each other and the capacities and
    finite caps within :data:`MAX_RATE_RATIO`; arrays as :func:`check_level_range`."""
    heavy, light = int(np.argmax(weight)), int(np.argmin(weight))
    if weight[heavy] > MAX_WEIGHT_RATIO * weight[light]:
        raise InputError(
            f"{item_label('flow', heavy, flow_names)} has weight {float(weight[heavy])!r} and "
            f"{item_label('flow', light, flow_names)} {float(weight[light])!r}, "
            f"{float(weight[heavy] / weight[light]):.3g} times less; flowsim takes weights at most "
            f"{MAX_WEIGHT_RATIO:.0e} apart (docs/model.md \"Supported range\")"
        )
    capped = np.flatnonzero(np.isfinite(cap_Bps))
    extremes = []  # (value, label) of the largest and smallest capacity and finite cap
    if capacity_Bps.size:
        for i in (int(np.argmax(capacity_Bps)), int(np.argmin(capacity_Bps))):
            extremes.append((float(capacity_Bps[i]), f"{item_label('link', i, link_names)} has capacity"))
    if capped.size:
        caps = cap_Bps[capped]
        for i in (int(capped[np.argmax(caps)]), int(capped[np.argmin(caps)])):
            extremes.append((float(cap_Bps[i]), f"{item_label('flow', i, flow_names)} has rate cap"))
    if not extremes:
        return
    top = max(extremes)
    bottom = min(extremes)
    if top[0] > MAX_RATE_RATIO * bottom[0]:
        raise InputError(
            f"{top[1]} {top[0]:.6g} B/s and {bottom[1]} {bottom[0]:.6g} B/s, {top[0] / bottom[0]:.3g} times less; "
            f"flowsim takes capacities and caps at most {MAX_RATE_RATIO:.0e} apart (docs/model.md "
            f"\"Supported range\")"
        )


def _flow_array(
    values: Sequence[float] | np.ndarray | None,
    n_flows: int,
    default: float,
    what: str,
    flow_names: Sequence[str] | None,
) -> np.ndarray:
    arr = float_column(values, n_flows, default, what)
    nan = np.flatnonzero(np.isnan(arr))
    if nan.size:
        raise InputError(f"{item_label('flow', int(nan[0]), flow_names)} has {what} NaN")
    arr.flags.writeable = False
    return arr
