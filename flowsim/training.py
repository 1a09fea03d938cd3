"""A data-parallel training step: backward compute per layer, gradient buckets all-reduced as
they become ready (overlapping the compute still to do), and optional checkpoint writes.

The step is a workload for :func:`flowsim.run`: compute is not simulated as flows, it sets
when each gradient bucket may start. Layers are listed from the input to the output;
backward runs from the last layer to the first, so layer ``i``'s gradient is ready at
``forward_s + sum(layer_backward_s[i:])``. As in PyTorch DDP, gradients fill buckets in the
order they become ready, a bucket closing once it holds ``bucket_bytes`` (or at the first
layer); a bucket's all-reduce starts when its last gradient is ready and the previous
bucket's all-reduce has finished (one communication stream). Checkpoint writes, when asked
for, go from every rank to the storage targets at ``checkpoint_start_s`` and share the links
with everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.collectives import CollectiveCosts
from flowsim.errors import InputError
from flowsim.hardware import LinkTier
from flowsim.pipeline import RunResult, collective_workload, run
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload

__all__ = ["TrainingStep", "TrainingStepResult", "data_parallel_step", "run_training_step"]


@dataclass(frozen=True)
class TrainingStep:
    """A training step laid out as flows.

    Attributes
    ----------
    workload : Workload
        Gradient all-reduce flows (tag ``phase`` = ``"gradients"``, ``bucket`` = its index)
        and checkpoint writes (``phase`` = ``"checkpoint"``).
    compute_s : float
        When the forward and backward compute ends.
    bucket_ready_s : numpy.ndarray
        float64[n_buckets]: when each bucket's last gradient is ready, in all-reduce order.
    bucket_bytes : numpy.ndarray
        float64[n_buckets]: each bucket's size.
    """

    workload: Workload
    compute_s: float
    bucket_ready_s: np.ndarray
    bucket_bytes: np.ndarray


@dataclass(frozen=True)
class TrainingStepResult:
    """A simulated step.

    Attributes
    ----------
    step_s : float
        Until both the compute and the last flow are done.
    compute_s : float
    exposed_communication_s : float
        ``step_s - compute_s``: communication the compute did not hide.
    tier_utilization : dict
        Per link tier present (``"scale_up"``, ``"host"``, ``"scale_out"``): ``(max, mean)``
        utilization over the step, the mean over the tier's links that carried bytes.
    run : RunResult
    """

    step_s: float
    compute_s: float
    exposed_communication_s: float
    tier_utilization: dict[str, tuple[float, float]]
    run: RunResult


def data_parallel_step(
    topology: Topology,
    *,
    layer_backward_s: Sequence[float],
    layer_grad_bytes: Sequence[float],
    forward_s: float = 0.0,
    bucket_bytes: float = 25 * 2**20,
    ranks: Sequence[str] | None = None,
    algorithm: str | None = None,
    protocol: str = "simple",
    costs: CollectiveCosts | None = None,
    checkpoint_bytes_per_rank: float = 0.0,
    checkpoint_start_s: float = 0.0,
) -> TrainingStep:
    """Lay out one data-parallel step over ``ranks`` (default: every GPU of ``topology``).

    Parameters
    ----------
    topology : Topology
    layer_backward_s, layer_grad_bytes : sequence of float
        Per layer, input to output: backward compute time (s, >= 0) and gradient size
        (bytes, >= 0).
    forward_s : float
        Forward compute before the backward pass starts (s).
    bucket_bytes : float
        Gradient bucket size (bytes, > 0; PyTorch DDP's default is 25 MiB).
    ranks, algorithm, protocol, costs
        How each bucket is all-reduced, as :func:`flowsim.pipeline.collective_workload`.
    checkpoint_bytes_per_rank : float
        Bytes each rank writes to storage (0: no checkpoint). Ranks write to the topology's
        storage targets in turn.
    checkpoint_start_s : float
        When the checkpoint writes start (s).

    Returns
    -------
    TrainingStep
    """
    backward = _column(layer_backward_s, "layer_backward_s")
    grads = _column(layer_grad_bytes, "layer_grad_bytes")
    if backward.shape != grads.shape or backward.size == 0:
        raise InputError(
            f"layer_backward_s and layer_grad_bytes need one value per layer, got {backward.size} and {grads.size}"
        )
    for value, what in ((forward_s, "forward_s"), (checkpoint_bytes_per_rank, "checkpoint_bytes_per_rank"),
                        (checkpoint_start_s, "checkpoint_start_s")):
        if not np.isfinite(value) or value < 0:
            raise InputError(f"{what} must be finite and >= 0, got {value!r}")
    if not np.isfinite(bucket_bytes) or bucket_bytes <= 0:
        raise InputError(f"bucket_bytes must be finite and > 0, got {bucket_bytes!r}")

    ready = forward_s + np.cumsum(backward[::-1])[::-1]  # layer i: forward + backward of i..last
    sizes, ready_at = [], []
    filled = 0.0
    for layer in range(backward.size - 1, -1, -1):
        filled += grads[layer]
        if filled >= bucket_bytes or layer == 0:
            sizes.append(filled)
            ready_at.append(ready[layer])
            filled = 0.0
    parts = []
    for k, (size, at) in enumerate(zip(sizes, ready_at)):
        if size == 0:
            continue
        plan = collective_workload(
            topology, "all_reduce", size, ranks=ranks, algorithm=algorithm, protocol=protocol, costs=costs
        )
        parts.append((k, at, size, plan.workload))
        ranks = plan.ranks
    if ranks is None:
        ranks = tuple(topology.node_names[g] for g in topology.gpus())
    workload = _chain_buckets(parts)
    if checkpoint_bytes_per_rank > 0:
        workload = Workload.concat([workload, _checkpoint(topology, ranks, checkpoint_bytes_per_rank, checkpoint_start_s)])
    return TrainingStep(
        workload,
        float(forward_s + backward.sum()),
        np.array([at for _, at, _, _ in parts], dtype=np.float64),
        np.array([size for _, _, size, _ in parts], dtype=np.float64),
    )


def run_training_step(topology: Topology, step: TrainingStep, **run_options) -> TrainingStepResult:
    """Simulate ``step`` on ``topology`` (``run_options`` as :func:`flowsim.run`)."""
    outcome = run(topology, step.workload, **run_options)
    step_s = max(step.compute_s, outcome.result.makespan_s)
    carried = outcome.result.link_bytes
    utilization = outcome.result.link_utilization(step_s)
    tiers = {}
    for tier in LinkTier:
        on_tier = topology.link_tier == tier
        if on_tier.any():
            used = on_tier & (carried > 0)
            mean = float(utilization[used].mean()) if used.any() else 0.0
            tiers[tier.name.lower()] = (float(utilization[on_tier].max()), mean)
    return TrainingStepResult(step_s, step.compute_s, step_s - step.compute_s, tiers, outcome)


def _column(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"{what} must be one value per layer")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if bad.size:
        raise InputError(f"{what}[{int(bad[0])}] is {float(arr[bad[0]])!r}; it must be finite and >= 0")
    return arr


def _chain_buckets(parts: list[tuple[int, float, float, Workload]]) -> Workload:
    """One workload of the buckets' all-reduces, each starting no earlier than its gradients
    are ready and only after the previous bucket's all-reduce has finished."""
    names, src, dst, size, start, deps, delay, overhead, weight, cap = ([] for _ in range(10))
    tags: dict[str, list[str]] = {"phase": [], "bucket": []}
    previous_sinks: list[int] = []
    for k, at, _, w in parts:
        offset = len(names)
        waited_on = np.zeros(len(w), dtype=bool)
        waited_on[w.dep_indices] = True
        for i in range(len(w)):
            own = (w.dependencies(i) + offset).tolist()
            deps.append(own if own else list(previous_sinks))
        previous_sinks = (np.flatnonzero(~waited_on) + offset).tolist()
        names += [f"bucket{k}.{n}" for n in w.names]
        src += w.src
        dst += w.dst
        size.append(w.size_bytes)
        start.append(np.maximum(w.start_s, at))
        delay.append(w.delay_s)
        overhead.append(w.overhead_s)
        weight.append(w.weight)
        cap.append(w.cap_Bps)
        tags["phase"] += ["gradients"] * len(w)
        tags["bucket"] += [str(k)] * len(w)
    def cat(columns: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(columns) if columns else np.empty(0)

    return Workload.build(
        names, src, dst, cat(size), start_s=cat(start), depends_on=deps, delay_s=cat(delay),
        overhead_s=cat(overhead), weight=cat(weight), cap_Bps=cat(cap), tags=tags,
    )


def _checkpoint(topology: Topology, ranks: Sequence[str], bytes_per_rank: float, start_s: float) -> Workload:
    targets = [topology.node_names[i] for i in topology.nodes_of_kind(NodeKind.STORAGE)]
    if not targets:
        raise InputError("checkpoint writes need storage targets in the topology (build_cluster(..., storage_targets=N))")
    dst = [targets[i % len(targets)] for i in range(len(ranks))]
    return Workload.build(
        [f"checkpoint.{r}" for r in ranks], list(ranks), dst, [bytes_per_rank] * len(ranks),
        start_s=start_s, tags={"phase": ["checkpoint"] * len(ranks), "bucket": [""] * len(ranks)},
    )
