"""Many time simulations at once, on every CPU core or on an NVIDIA GPU.

A what-if sweep simulates many small, independent runs: a collective at each size, node count
and algorithm, grouped into flow classes (docs/model.md "Flow classes"), is tens to thousands
of flows. :func:`simulate_prepared` takes such runs, checked and laid out by
:func:`flowsim.engine.prepare`, and simulates all of them in one batch: ``backend="cpu"`` runs
one run per core (:func:`flowsim_kernels.timeline.simulate_batch`), ``backend="cuda"`` runs of
under 32 flows one per GPU thread and the others one per block of 64 threads
(:mod:`flowsim_kernels.cuda_timeline`, from ``pip install 'flowsim[cuda]'``). All run
:func:`flowsim_kernels.timeline.simulate_instance`'s schedule (a block shares out its loops
over the flows in flight): the event loop of docs/model.md "Time" with every transferring
flow's rate re-solved at each instant, so the
times equal :func:`flowsim.simulate`'s to rounding. :func:`run_many` routes and prepares
(topology, workload) pairs and returns what :func:`flowsim.run` returns for each.

What a batch does not give: rate segments (``record_links``, ``record_flows``), the
progress line, and coarse time: its instants are :func:`flowsim.simulate`'s at the default
``time_rel_tol`` (docs/model.md "Time"), whose coarser windows, which keep each event's own
time, the batch does not follow. Each instant re-solves every flow in flight, with no
incremental re-solve, so the batch suits many small runs; a large one, or one with many
flows at once, is better given to :func:`flowsim.simulate`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flowsim.batched import resolve_backend
from flowsim.engine import DEFAULT_TIME_REL_TOL, PreparedRun
from flowsim.errors import InputError, item_label
from flowsim.fairshare import DEFAULT_TIE_REL_TOL
from flowsim.pipeline import RunResult, check_endpoints, prepare_routed
from flowsim.result import SimulationResult
from flowsim.routing import Router
from flowsim.topology import Topology
from flowsim.workload import Workload
from flowsim_kernels.csr import csr_transpose
from flowsim_kernels.timeline import simulate_batch

__all__ = ["run_many", "simulate_prepared"]


class _Packed:
    """The solved problems of a batch as flat arrays with per-run offsets (see
    :func:`flowsim_kernels.timeline.simulate_batch`)."""

    def __init__(self, runs: Sequence[PreparedRun]) -> None:
        solved = [run.solved for run in runs]
        n_flows = [s.size_bytes.shape[0] for s in solved]
        n_links = [s.capacity_Bps.shape[0] for s in solved]
        self.flow_offsets = _offsets(n_flows)
        self.link_offsets = _offsets(n_links)
        self.incidence_offsets = _offsets([s.flow_link_indices.shape[0] for s in solved])
        # Each flow's waiters, one entry per listing: the dependencies transposed.
        dependents = [csr_transpose(s.dep_indptr, s.dep_indices, s.size_bytes.shape[0]) for s in solved]
        self.dependent_offsets = _offsets([d[1].shape[0] for d in dependents])
        self.flow_link_indptr = np.concatenate([s.flow_link_indptr for s in solved]).astype(np.int64)
        self.flow_link_indices = np.concatenate([s.flow_link_indices for s in solved]).astype(np.int64)
        self.dependents_indptr = np.concatenate([d[0] for d in dependents])
        self.dependents_indices = np.concatenate([d[1] for d in dependents])
        self.dep_count = np.concatenate([np.diff(s.dep_indptr) for s in solved]).astype(np.int64)
        # Per link, then per flow, in the kernels' order.
        self.columns = [
            np.concatenate([getattr(s, name) for s in solved]).astype(np.float64)
            for name in ("capacity_Bps", "latency_s", "size_bytes", "start_s", "weight", "cap_Bps", "delay_s",
                         "overhead_s")
        ]

    def arguments(self) -> list[np.ndarray]:
        """The batch's inputs in the kernels' order."""
        return [
            self.flow_offsets, self.link_offsets, self.incidence_offsets, self.dependent_offsets,
            self.flow_link_indptr, self.flow_link_indices, *self.columns, self.dep_count,
            self.dependents_indptr, self.dependents_indices,
        ]


def _offsets(counts: Sequence[int]) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def simulate_prepared(
    runs: Sequence[PreparedRun],
    *,
    backend: str = "cpu",
) -> list[SimulationResult]:
    """Simulate every run of ``runs`` in one batch.

    Parameters
    ----------
    runs : sequence of PreparedRun
        From :func:`flowsim.engine.prepare` (with ``classes=True``, each run's classes are
        simulated and every flow gets its class's times).
    backend : {"cpu", "cuda", "auto"}
        ``"cpu"``: one run per core at a time; ``"cuda"``: one run per GPU thread or block;
        ``"auto"``: ``"cuda"`` where it can run (:func:`flowsim.batched.available_backends`).

    Returns
    -------
    list of SimulationResult
        In ``runs`` order, without rate segments; the engine counters count what this
        engine did (one re-solve of every transferring flow per instant).

    Raises
    ------
    InputError
        ``backend`` is bad, or a run's times go beyond float64's range
        (the message names the run and flow).
    BackendUnavailable
        ``backend="cuda"`` without numba-cuda or a GPU.
    """
    cuda = resolve_backend(backend) == "cuda"
    if not runs:
        return []
    packed = _Packed(runs)
    n_solved = int(packed.flow_offsets[-1])
    ready, transfer_start, finish = (np.empty(n_solved) for _ in range(3))
    counts = np.zeros((len(runs), 4), dtype=np.int64)
    arguments = [*packed.arguments(), ready, transfer_start, finish, counts, DEFAULT_TIE_REL_TOL,
                 DEFAULT_TIME_REL_TOL]
    if cuda:
        from flowsim_kernels.cuda_timeline import simulate_batch_cuda

        simulate_batch_cuda(*arguments)
    else:
        simulate_batch(*arguments)
    results = []
    for i, run in enumerate(runs):
        part = slice(int(packed.flow_offsets[i]), int(packed.flow_offsets[i + 1]))
        stuck = np.flatnonzero(~np.isfinite(finish[part]))
        if stuck.size:
            label = item_label("flow", run.culprit(int(stuck[0])), run.flow_names)
            raise InputError(
                f"run {i}: {label}'s times are beyond float64's range (about 1.8e308 s): its size, start, delays "
                "or latencies are too large, or its rate too small"
            )
        results.append(run.result(ready[part], transfer_start[part], finish[part], tuple(counts[i, [1, 0, 2, 3]])))
    return results


def run_many(
    runs: Sequence[tuple[Topology, Workload]],
    *,
    routing: str = "auto",
    seed: int = 0,
    gpudirect: bool = True,
    classes: bool = True,
    backend: str = "cpu",
) -> list[RunResult]:
    """Route and simulate many (topology, workload) pairs in one batch: for each, what
    :func:`flowsim.run` returns (without rate segments).

    ``routing``, ``seed`` and ``gpudirect`` as :func:`flowsim.run`; ``classes`` as
    :func:`flowsim.simulate` (on by default: a batch's runs are meant to be small);
    ``backend`` as :func:`simulate_prepared`. A bad run raises an
    :class:`InputError` naming it (``run 3: ...``) before anything is simulated.

    Examples
    --------
    NCCL's all-reduce on one DGX H100 at 1 MiB and 1 GiB (216 and 9,216 messages, 27 and 256
    classes), as :func:`flowsim.run` gives them one by one:

    >>> from flowsim import build_cluster, collective_workload
    >>> topology = build_cluster("dgx_h100", 1, figure="effective")
    >>> runs = [(topology, collective_workload(topology, "all_reduce", size).workload) for size in (2**20, 2**30)]
    >>> [(round(r.makespan_s * 1e6, 1), r.result.n_flow_classes) for r in run_many(runs)]
    [(28.0, 27), (4054.4, 256)]
    """
    routers: dict[int, Router] = {}
    prepared, routed = [], []
    for i, (topology, workload) in enumerate(runs):
        if id(topology) not in routers:
            routers[id(topology)] = Router(topology)
        router = routers[id(topology)]
        try:
            try:
                routes = router.route(workload.src, workload.dst, method=routing, seed=seed, gpudirect=gpudirect)
            except InputError:
                check_endpoints(topology, workload)  # names the flow where a node is unknown
                raise
            prepared.append(prepare_routed(topology, workload, routes, classes=classes))
        except InputError as err:
            raise InputError(f"run {i}: {err}") from None
        routed.append(routes)
    results = simulate_prepared(prepared, backend=backend)
    return [RunResult(topology, workload, routes, result)
            for (topology, workload), routes, result in zip(runs, routed, results, strict=True)]
