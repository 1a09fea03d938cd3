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

from flowsim.errors import InputError
from flowsim.fairshare import DEFAULT_TIE_REL_TOL, FairShareProblem, check_capacities, check_level_range
from flowsim.routes import Routes
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
    row to the GPU once. The other arrays are C-contiguous.
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
        capacity = np.array(capacity_Bps, dtype=np.float64, order="C")
        if capacity.ndim != 2 or capacity.shape[0] == 0:
            raise InputError(
                f"capacity_Bps must be one row of link capacities per instance, shape "
                f"[n_instances >= 1, n_links]; got shape {capacity.shape}"
            )
        n_instances, n_links = capacity.shape
        # The checks judge each value on its own against an interval (> 0, finite, not NaN),
        # so some instance has a bad value exactly when the column minima or maxima do:
        # checking those two rows checks the whole batch, and only a failure visits instances.
        _check_extremes(
            lambda row: check_capacities(row, link_names),
            [capacity.min(axis=0), capacity.max(axis=0)],
            capacity,
        )
        if not isinstance(routes, Routes):
            index = {name: i for i, name in enumerate(link_names)} if link_names is not None else None
            routes = Routes.from_lists(routes, n_links, index, flow_names)
        weight = _per_instance(weights, n_instances, "weights")
        cap = _per_instance(caps_Bps, n_instances, "caps_Bps")
        problem = _check_extremes(
            lambda pair: FairShareProblem.build(routes, capacity[0], pair[0], pair[1], flow_names=flow_names),
            list(zip(_extremes(weight), _extremes(cap), strict=True)),
            zip(_rows(weight, n_instances), _rows(cap, n_instances), strict=True),
        )
        weight = problem.weight if weight is None or weight.ndim == 1 else weight
        cap = problem.cap_Bps if cap is None or cap.ndim == 1 else cap
        # Across instances: the checks above paired each weight row with the first
        # instance's capacities only.
        check_level_range(capacity, weight, cap, flow_names)
        return cls.from_checked(problem, capacity, weight, cap)

    @classmethod
    def from_checked(
        cls, problem: FairShareProblem, capacity_Bps: np.ndarray, weight: np.ndarray, cap_Bps: np.ndarray
    ) -> BatchProblem:
        """A batch over ``problem``'s routes (and their transpose) of instances checked already,
        each as a :class:`FairShareProblem` over those routes; nothing is checked again.

        ``capacity_Bps`` is float64[n_instances, n_links]; ``weight`` and ``cap_Bps`` are
        float64[n_flows] for every instance (held as one broadcast row) or
        float64[n_instances, n_flows]. C-contiguous float64 arrays are kept, not copied, and
        made read-only: hand over arrays the batch may own.
        """
        capacity = _read_only(capacity_Bps)
        shape = (capacity.shape[0], problem.n_flows)
        return cls(
            problem.routes,
            problem.link_flow_indptr,
            problem.link_flow_indices,
            capacity,
            *(np.broadcast_to(_read_only(a), shape) if a.ndim == 1 else _read_only(a) for a in (weight, cap_Bps)),
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

        ``backend="cpu"`` gives bit for bit what :meth:`FairShareProblem.solve` gives for
        each instance; ``"cuda"`` agrees with it to a relative 1e-9 (see
        :func:`flowsim_kernels.cuda_maxmin.max_min_fair_batch_kernel`); ``"auto"`` is
        ``"cuda"`` where it can run, else ``"cpu"``.
        """
        rate = np.empty((self.n_instances, self.n_flows), dtype=np.float64)
        args = (
            self.routes.flow_link_indptr,
            self.routes.flow_link_indices,
            self.link_flow_indptr,
            self.link_flow_indices,
            # The kernels take one row for all instances where they share their values.
            *(a[:1] if a.strides[0] == 0 else a for a in (self.capacity_Bps, self.weight, self.cap_Bps)),
            float(tie_rel_tol),
            rate,
        )
        if resolve_backend(backend) == "cuda":
            from flowsim_kernels.cuda_maxmin import max_min_fair_batch_cuda

            max_min_fair_batch_cuda(*args)
        else:
            max_min_fair_batch(*args)
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
        instance), ``"cuda"`` (an NVIDIA GPU, to a relative 1e-9) or ``"auto"`` (``"cuda"``
        where it can run, else ``"cpu"``).
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
    The parking lot of SPEC case 3, then with link B doubled:

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
            "NVIDIA driver); use backend='cpu' or 'auto'"
        )
    return None


def _per_instance(values, n_instances: int, what: str) -> np.ndarray | None:
    """``values`` as a float64 array, [n_flows] if shared or [n_instances, n_flows]; or None."""
    if values is None:
        return None
    arr = np.array(values, dtype=np.float64, order="C")
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
    """
    for row in extremes:
        try:
            result = check(row)
        except InputError:
            messages: list[str | None] = []
            for instance in instances:
                try:
                    check(instance)
                    messages.append(None)
                except InputError as instance_err:
                    messages.append(str(instance_err))
            failing = [(i, m) for i, m in enumerate(messages) if m is not None]
            if not failing:  # a check that judges values together, not one by one
                raise
            i, message = failing[0]
            if len(failing) == len(messages) and all(m == message for _, m in failing):
                raise InputError(message) from None
            raise InputError(f"instance {i}: {message}") from None
    return result


def _read_only(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a read-only C-contiguous float64 array, copied only if it is not one yet."""
    out = np.ascontiguousarray(arr, dtype=np.float64)
    out.flags.writeable = False
    return out
