"""Many max-min fair-share instances over the same routes at once, on CPU cores or a GPU.

A sweep over one topology and traffic pattern (capacities, weights or caps varied) is a
batch: the routes are checked and transposed once, and every instance is solved in parallel,
on all CPU cores (``backend="cpu"``) or on an NVIDIA GPU through numba-cuda
(``backend="cuda"``, from ``pip install 'flowsim[cuda]'``). Instances with different routes
are separate batches.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from flowsim.errors import InputError, float_array
from flowsim.fairshare import (
    DEFAULT_TIE_REL_TOL,
    FairShareProblem,
    check_capacities,
    check_flow_names,
    check_level_range,
    check_tie_rel_tol,
)
from flowsim.routes import Routes, count_routes
from flowsim_kernels.batched import max_min_fair_batch

T = TypeVar("T")
R = TypeVar("R")

#: Values of ``backend``: ``"auto"`` is ``"cuda"`` where that backend can run, else ``"cpu"``.
BACKENDS = ("cpu", "cuda", "auto")


class BackendUnavailable(InputError):
    """A solver backend was asked for that cannot run here; the message says what is missing."""


def available_backends() -> tuple[str, ...]:
    """The backends that can run here: ``"cpu"`` always, ``"cuda"`` when usable.

    ``"cuda"`` is usable when numba-cuda is installed and finds a GPU (or runs its simulator,
    ``NUMBA_ENABLE_CUDASIM=1``).
    """
    return ("cpu",) if _cuda_unavailable_reason() else ("cpu", "cuda")


def resolve_backend(backend: str) -> str:
    """The backend that ``backend`` runs on here: ``"cpu"`` or ``"cuda"``.

    Raises
    ------
    InputError
        ``backend`` is not one of :data:`BACKENDS`.
    BackendUnavailable
        ``backend="cuda"`` cannot run here: numba-cuda is missing, or no GPU was found.
    """
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}")
    if backend == "cpu":
        return "cpu"
    reason = _cuda_unavailable_reason()
    if reason is None:
        return "cuda"
    if backend == "auto":
        return "cpu"
    raise BackendUnavailable(reason)


@dataclass(frozen=True)
class BatchProblem:
    """Instances sharing one set of routes, checked once and held as the kernels' arrays.

    Build with :meth:`build`, then :meth:`solve` on any backend. ``capacity_Bps`` is
    float64[n_instances, n_links]; ``weight`` and ``cap_Bps`` are float64[n_instances, n_flows].
    All arrays are read-only; weights or caps given once for every instance are held as one
    row broadcast over the instances (a first stride of 0), so the CUDA backend sends that
    row to the GPU once. The other arrays are C-contiguous. The kernels index the arrays
    without bounds checks, so constructing a batch checks their shapes (an
    :class:`InputError` names the array).
    """

    routes: Routes
    link_flow_indptr: np.ndarray
    link_flow_indices: np.ndarray
    capacity_Bps: np.ndarray
    weight: np.ndarray
    cap_Bps: np.ndarray

    @classmethod
    def build(
        cls,
        routes: Routes | Sequence[Sequence[int | str]],
        capacity_Bps: Sequence[Sequence[float]] | np.ndarray,
        weights: Sequence[float] | Sequence[Sequence[float]] | np.ndarray | None = None,
        caps_Bps: Sequence[float] | Sequence[Sequence[float]] | np.ndarray | None = None,
        *,
        link_names: Sequence[str] | None = None,
        flow_names: Sequence[str] | None = None,
    ) -> BatchProblem:
        """Check a batch; arguments as for :func:`solve_batch`."""
        capacity = float_array(capacity_Bps, "capacity_Bps")
        if capacity.ndim != 2 or capacity.shape[0] == 0:
            raise InputError(
                f"capacity_Bps must be one row of link capacities per instance, shape "
                f"[n_instances >= 1, n_links]; got shape {capacity.shape}"
            )
        n_instances, n_links = capacity.shape
        # The checks judge each value on its own against an interval (> 0, finite, not NaN),
        # so some instance has a bad value exactly when the column minima or maxima do:
        # checking those two rows checks the whole batch, and only a failure visits instances.
        lowest_capacity = capacity.min(axis=0)
        _check_extremes(
            lambda row: check_capacities(row, link_names),
            [lowest_capacity, capacity.max(axis=0)],
            capacity,
        )
        # Before the routes are read: a route's index into flow_names names it in errors.
        check_flow_names(flow_names, count_routes(routes))
        if not isinstance(routes, Routes):
            index = {name: i for i, name in enumerate(link_names)} if link_names is not None else None
            routes = Routes.from_lists(routes, n_links, index, flow_names)
        weight = _per_instance(weights, n_instances, "weights")
        cap = _per_instance(caps_Bps, n_instances, "caps_Bps")
        # Weights and caps likewise, their extreme rows paired with valid capacities (the
        # lowest, which keep levels lowest). Building a problem also checks the range of its
        # levels, which judges values of different instances together here; a failure that
        # no instance repeats on its own comes from that, and ranges are checked instance by
        # instance below.
        problem = _check_extremes(
            lambda row: FairShareProblem.build(routes, row[0], row[1], row[2], flow_names=flow_names),
            [(lowest_capacity, w, c) for w, c in zip(_extremes(weight), _extremes(cap), strict=True)],
            zip(capacity, _rows(weight, n_instances), _rows(cap, n_instances), strict=True),
        )
        weight = problem.weight if weight is None or weight.ndim == 1 else weight
        cap = problem.cap_Bps if cap is None or cap.ndim == 1 else cap
        _check_level_ranges(capacity, weight, cap, flow_names)
        return cls.from_checked(problem, capacity, weight, cap)

    @classmethod
    def from_checked(
        cls, problem: FairShareProblem, capacity_Bps: np.ndarray, weight: np.ndarray, cap_Bps: np.ndarray
    ) -> BatchProblem:
        """A batch over ``problem``'s routes (and their transpose) of instances checked already,
        each as a :class:`FairShareProblem` over those routes; only the shapes are checked.

        ``capacity_Bps`` is float64[n_instances, n_links]; ``weight`` and ``cap_Bps`` are
        float64[n_flows] or float64[1, n_flows] for every instance (held as one broadcast row)
        or float64[n_instances, n_flows]. C-contiguous float64 arrays are kept, not copied, and
        made read-only: hand over arrays the batch may own.

        Raises
        ------
        InputError
            An array is not shaped as above.
        """
        capacity = _read_only(capacity_Bps)
        n_flows = problem.n_flows
        # A capacity array that is not 2-D is reported by the constructor; one instance stands
        # in until then.
        shape = (capacity.shape[0] if capacity.ndim == 2 else 1, n_flows)

        def held(values: np.ndarray) -> np.ndarray:
            values = _read_only(values)
            shared = values.shape in ((n_flows,), (1, n_flows))
            return np.broadcast_to(values, shape) if shared else values

        return cls(
            problem.routes,
            problem.link_flow_indptr,
            problem.link_flow_indices,
            capacity,
            held(weight),
            held(cap_Bps),
        )

    def __post_init__(self) -> None:
        # The kernels index these arrays by the routes' flows and links without bounds checks.
        n_links, n_flows = self.routes.n_links, self.routes.n_flows
        capacity_shape = self.capacity_Bps.shape
        if len(capacity_shape) != 2 or capacity_shape[0] == 0 or capacity_shape[1] != n_links:
            raise InputError(
                f"capacity_Bps has shape {capacity_shape}; a batch over {n_links} links needs "
                f"[n_instances >= 1, {n_links}]"
            )
        if self.link_flow_indptr.shape != (n_links + 1,) or self.link_flow_indices.shape != (self.routes.n_incidences,):
            raise InputError(
                f"link_flow_indptr and link_flow_indices have shapes {self.link_flow_indptr.shape} and "
                f"{self.link_flow_indices.shape}; the transpose of the routes needs ({n_links + 1},) and "
                f"({self.routes.n_incidences},)"
            )
        expected = (capacity_shape[0], n_flows)
        for name in ("weight", "cap_Bps"):
            shape = getattr(self, name).shape
            if shape != expected:
                raise InputError(
                    f"{name} has shape {shape}; {capacity_shape[0]} instances of {n_flows} flows need "
                    f"{expected}, or a row of {n_flows} shared by all instances"
                )

    @property
    def n_instances(self) -> int:
        return self.capacity_Bps.shape[0]

    @property
    def n_flows(self) -> int:
        return self.routes.n_flows

    @property
    def n_links(self) -> int:
        return self.routes.n_links

    def solve(self, backend: str = "cpu", tie_rel_tol: float = DEFAULT_TIE_REL_TOL) -> np.ndarray:
        """Rates (B/s) of every flow in every instance, float64[n_instances, n_flows].

        Parameters
        ----------
        backend
            ``"cpu"`` gives bit for bit what :meth:`FairShareProblem.solve` gives for each
            instance; ``"cuda"`` runs
            :func:`flowsim_kernels.cuda_maxmin.max_min_fair_batch_kernel`; ``"auto"`` is
            ``"cuda"`` where it can run, else ``"cpu"``.
        tie_rel_tol
            A number in [0, 1). On ``"cpu"``, levels within this relative distance of a
            round's lowest are frozen at that lowest level in the same round. The CUDA kernel
            merges no near-ties (each flow freezes at the level of the link or cap that binds
            it), so its rates do not depend on ``tie_rel_tol``.

        Notes
        -----
        Both backends fill progressively in float64: a flow that shares links with flows of up
        to ``r`` times its weight carries a relative error of about ``r`` units in the last
        place, its rate being what they leave. The CPU kernel also freezes levels within
        ``tie_rel_tol`` of a round's lowest at that lowest level, which moves their flows by
        up to ``tie_rel_tol`` relative, and a light flow sharing links with them by up to
        about ``tie_rel_tol * r``; the CUDA kernel does not. Elsewhere the two agree to
        rounding (about 1e-14 on the GPU benchmark's random instances).

        Raises
        ------
        InputError
            ``tie_rel_tol`` is not a number in [0, 1), or ``backend`` is unknown.
        BackendUnavailable
            ``backend="cuda"`` cannot run here.
        """
        tie_rel_tol = check_tie_rel_tol(tie_rel_tol)
        cuda = resolve_backend(backend) == "cuda"
        rate = np.empty((self.n_instances, self.n_flows), dtype=np.float64)
        # The kernels take one row for all instances where they share their values.
        capacity, weight, cap = (
            a[:1] if a.strides[0] == 0 else a for a in (self.capacity_Bps, self.weight, self.cap_Bps)
        )
        args = (
            self.routes.flow_link_indptr,
            self.routes.flow_link_indices,
            self.link_flow_indptr,
            self.link_flow_indices,
            capacity,
            weight,
            cap,
        )
        if cuda:
            from flowsim_kernels.cuda_maxmin import max_min_fair_batch_cuda

            max_min_fair_batch_cuda(*args, rate)
        else:
            max_min_fair_batch(*args, tie_rel_tol, rate)
        return rate


def solve_batch(
    routes: Routes | Sequence[Sequence[int | str]],
    capacity_Bps: Sequence[Sequence[float]] | np.ndarray,
    weights: Sequence[float] | Sequence[Sequence[float]] | np.ndarray | None = None,
    caps_Bps: Sequence[float] | Sequence[Sequence[float]] | np.ndarray | None = None,
    *,
    backend: str = "cpu",
    link_names: Sequence[str] | None = None,
    flow_names: Sequence[str] | None = None,
) -> np.ndarray:
    """Weighted max-min fair rates (B/s) of many instances over the same routes.

    Parameters
    ----------
    routes
        A :class:`~flowsim.Routes`, or one sequence of links per flow (integer ids, or names
        when ``link_names`` is given); the same in every instance.
    capacity_Bps
        float64[n_instances, n_links]: each instance's link capacities, finite and > 0.
    weights
        Flow weights (> 0): float64[n_flows] shared by all instances, or
        float64[n_instances, n_flows]; default 1.
    caps_Bps
        Flow rate caps (> 0, ``inf`` for none), shaped like ``weights``; default none.
    backend
        ``"cpu"`` (all cores; the default, bit for bit :func:`~flowsim.max_min_rates` per
        instance), ``"cuda"`` (an NVIDIA GPU: the same rates up to rounding, except where
        levels within 1e-12 of each other meet weights far apart, see
        :meth:`BatchProblem.solve`) or ``"auto"`` (``"cuda"`` where it can run, else
        ``"cpu"``).
    link_names, flow_names
        Used to look up named links and to name the offending item in errors.

    Returns
    -------
    numpy.ndarray
        float64[n_instances, n_flows]: each flow's rate in each instance.

    Raises
    ------
    InputError
        Bad input; the message names the instance, flow or link.
    BackendUnavailable
        ``backend="cuda"`` without numba-cuda installed or without a GPU.

    Examples
    --------
    The parking lot of docs/model.md case 3, then with link B doubled:

    >>> solve_batch([[0, 1], [0], [1]], [[1e9, 2e9], [1e9, 4e9]]) / 1e9
    array([[0.5, 0.5, 1.5],
           [0.5, 0.5, 3.5]])
    """
    problem = BatchProblem.build(
        routes, capacity_Bps, weights, caps_Bps, link_names=link_names, flow_names=flow_names
    )
    return problem.solve(backend)


def _numba_cuda_installed() -> bool:
    return importlib.util.find_spec("numba_cuda") is not None


def _cuda_device_found() -> bool:
    from numba import cuda  # numba-cuda's target once it is installed

    return bool(cuda.is_available())


def _cuda_unavailable_reason() -> str | None:
    if not _numba_cuda_installed():
        return "backend 'cuda' needs the numba-cuda package: pip install 'flowsim[cuda]'"
    if not _cuda_device_found():
        return (
            "backend 'cuda': numba-cuda is installed but found no CUDA GPU (no device, or no "
            "NVIDIA driver); use the cpu or auto backend"
        )
    return None


def _per_instance(values, n_instances: int, what: str) -> np.ndarray | None:
    """``values`` as a float64 array, [n_flows] if shared or [n_instances, n_flows]; or None."""
    if values is None:
        return None
    arr = float_array(values, what)
    if arr.ndim == 2 and arr.shape[0] != n_instances:
        raise InputError(f"{what} has {arr.shape[0]} rows for {n_instances} instances")
    if arr.ndim > 2:
        raise InputError(f"{what} must be [n_flows] or [n_instances, n_flows]; got shape {arr.shape}")
    return arr


def _extremes(arr: np.ndarray | None) -> list[np.ndarray | None]:
    """The two rows that stand for ``arr`` in checks: its column minima and maxima."""
    if arr is None or arr.ndim < 2:
        return [arr, arr]
    return [arr.min(axis=0), arr.max(axis=0)]


def _rows(arr: np.ndarray | None, n_instances: int) -> Iterable[np.ndarray | None]:
    return iter(arr) if arr is not None and arr.ndim == 2 else [arr] * n_instances


def _check_extremes(check: Callable[[T], R], extremes: list[T], instances: Iterable[T]) -> R:
    """``check`` each extreme row; return the last result.

    When one fails, each instance is checked on its own: the error names the first failing
    instance, unless every instance fails alike (a shared bad value), which needs no name.
    When none fails, the extremes failed a check that judges values together (such as a
    level, capacity over weight) only by pairing values of different instances: the batch
    passes, and the last instance's result is returned.
    """
    for row in extremes:
        try:
            result = check(row)
        except InputError:
            return _check_each(check, instances)
    return result


def _check_each(check: Callable[[T], R], instances: Iterable[T]) -> R:
    """``check`` every instance; the last result, or an :class:`InputError` naming the first
    failing instance (no name if every instance fails alike)."""
    messages: list[str | None] = []
    for instance in instances:
        try:
            result = check(instance)
            messages.append(None)
        except InputError as instance_err:
            messages.append(str(instance_err))
    failing = [(i, m) for i, m in enumerate(messages) if m is not None]
    if not failing:
        return result
    i, message = failing[0]
    if len(failing) == len(messages) and all(m == message for _, m in failing):
        raise InputError(message) from None
    raise InputError(f"instance {i}: {message}") from None


def _check_level_ranges(
    capacity: np.ndarray, weight: np.ndarray, cap: np.ndarray, flow_names: Sequence[str] | None
) -> None:
    """:func:`check_level_range` for every instance on its own; the error names the instance.

    ``capacity`` is [n_instances, n_links], ``weight`` and ``cap`` [n_flows] (shared) or
    [n_instances, n_flows]. The check fails for some instance exactly when it fails for the
    one with the highest ratio of largest capacity or finite cap to smallest weight, the one
    with the largest weight sum, or those with the highest ratios of largest to smallest
    weight and of largest to smallest capacity or finite cap: only those are checked unless
    one fails.
    """
    n_instances = capacity.shape[0]
    if weight.shape[-1] == 0:
        return
    weight = np.broadcast_to(weight, (n_instances, weight.shape[-1]))
    cap = np.broadcast_to(cap, weight.shape)
    top = np.maximum(capacity.max(axis=1, initial=0.0), np.where(np.isfinite(cap), cap, 0.0).max(axis=1))
    finite_cap = np.isfinite(cap)
    bottom = np.minimum(capacity.min(axis=1, initial=np.inf), np.where(finite_cap, cap, np.inf).min(axis=1))
    with np.errstate(over="ignore"):  # an infinite ratio or sum is the worst, and reported
        ratio = top / weight.min(axis=1)
        total = weight.sum(axis=1)
        weight_ratio = weight.max(axis=1) / weight.min(axis=1)
        rate_ratio = top / bottom
    worst = sorted({int(np.argmax(r)) for r in (ratio, total, weight_ratio, rate_ratio)})
    _check_extremes(
        lambda instance: check_level_range(*instance, flow_names),
        [(capacity[i], weight[i], cap[i]) for i in worst],
        zip(capacity, weight, cap, strict=True),
    )


def _read_only(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a read-only C-contiguous float64 array, copied only if it is not one yet."""
    out = np.ascontiguousarray(arr, dtype=np.float64)
    out.flags.writeable = False
    return out
