"""Training steps as workloads: data parallelism alone, or Megatron-style 3D parallelism
(tensor, pipeline and data parallel), with optional checkpoint writes.

A step is a workload for :func:`flowsim.run`. Compute is not simulated as flows: it is time
between flows, carried by start times, dependencies and ``delay_s``. Layers are listed from
the input to the output; backward runs from the last layer to the first.

Data parallelism (:func:`data_parallel_step`)
    Layer ``i``'s gradient is ready at ``forward_s + sum(layer_backward_s[i:])``. As in
    PyTorch DDP, gradients fill buckets in the order they become ready, a bucket closing
    once it holds ``bucket_bytes`` (or at the first layer); a bucket's all-reduce starts
    when its last gradient is ready and the previous bucket's all-reduce has finished (one
    communication stream).
3D parallelism (:func:`parallel_layout`, :func:`parallel_step`)
    Ranks are laid out in Megatron-LM's default order (``tp-cp-ep-dp-pp`` with one context
    and one expert group): tensor-parallel index innermost, then data-parallel, then
    pipeline stage, so that a TP group is ``tp`` consecutive ranks inside one server. Each
    rank is a stream of compute and blocking communication, as Megatron runs it:

    * a layer's forward is an attention block and an MLP block, each half of the layer's
      time and each followed by an all-reduce of ``tp_all_reduce_bytes`` over the TP group;
      its backward is the same in reverse (Megatron's two all-reduces per layer and pass).
      The compute after an all-reduce waits for it. With sequence parallelism
      (``sequence_parallel``, Megatron's ``--sequence-parallel``) each block is instead
      framed by an all-gather of ``tp_all_reduce_bytes`` before it and a reduce-scatter of
      as many after it, in both passes (the backward of each is the other): the same bytes
      over NCCL's all-gather and reduce-scatter, the block waiting for the all-gather.
    * pipeline stages exchange each microbatch's activations (forward) and their gradients
      (backward), ``activation_bytes`` each, between ranks with the same TP and DP index, in
      the batched blocking send/receive calls of Megatron's schedules (1F1B, or GPipe). A
      transfer starts once both ranks have reached the call that posts it (NCCL
      point-to-point is a rendezvous), and a rank goes on once every transfer of its call
      has arrived. With ``virtual_stages`` = v > 1 each rank holds v model chunks (virtual
      stages ``c x pp + stage``, layers split evenly over the ``v x pp`` of them) and runs
      Megatron's interleaved 1F1B, whose transfers do not block (``overlap_p2p_comm``, on by
      default in Megatron-LM with interleaving): a rank sends each output once its pass
      has ended and goes on, and a pass waits only for its own input to have arrived.
    * the gradients of the last microbatch's backward are all-reduced in buckets over each
      DP group (ranks with the same TP index and stage) as they become ready, on a separate
      communication stream that the compute does not wait for (DDP's overlap); a bucket
      starts after the previous one has finished. With Megatron's distributed optimizer
      (``distributed_optimizer``) each bucket is reduce-scattered instead, and its
      parameters all-gathered over the same group at the start of the step, bucket after
      bucket in forward order: the step's steady state, the previous step's optimizer having
      updated each rank's shard, with the gathers overlapping the forward pass
      (``overlap_param_gather``), whose first microbatch waits at a bucket's first layer
      until its gather has finished.
    * with context parallelism (``cp``), a layer's attention block runs as ``cp`` steps, each
      after the keys and values its predecessor in the CP group sent as the step before
      began (Megatron's ring of point-to-point transfers; their gradients too, backward).
    * with PyTorch FSDP's full sharding (``fsdp``, one stage) there are no buckets: each
      forward and each backward of a layer, every microbatch, waits for an all-gather of the
      layer's parameters over the DP group, and each backward is followed by a
      reduce-scatter of its gradients. The gathers run one after another on their own
      stream, each once the pass that used the parameters two gathers back has ended (FSDP's
      rate limiter, two all-gathers in flight); the reduce-scatters on a stream of their own
      that only the step's end waits for.
    * with experts (``ep`` > 1), a mixture-of-experts layer's MLP block is framed by two
      all-to-alls over the rank's expert group (``ep`` consecutive DP indices): dispatch and
      combine forwards, their gradients backwards, sized by each expert rank's share of the
      tokens (``ep_skew``). The experts' share of a layer's gradients
      (``layer_expert_grad_bytes``) fills buckets of its own, ready when the MLP block's last
      backward ends and all-reduced over the ``dp / ep`` ranks that hold the same experts
      (Megatron's expert-data-parallel group; none when ``ep = dp``), on a stream of their
      own.
    * the step ends when every rank has finished its compute and its gradients' reductions.

    Where a rank's compute is followed by a flow that also waits for something else (a
    transfer, the previous bucket), a *marker* joins the two: a zero-byte flow from the rank
    to itself, ready when the compute ends. Having no bytes (and an empty route), it
    finishes the moment it is ready.

Checkpoint writes, when asked for, go from every rank to the storage targets at
``checkpoint_start_s`` and share the links with everything else.

:func:`run_training_step` simulates a step and breaks it down
(:func:`training_breakdown`, :mod:`flowsim.stepreport`); :mod:`flowsim.models` derives the
per-layer compute and message sizes from a model's shape.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from flowsim.budgets import SHARED_CAP_TAG
from flowsim.collectives import CollectiveCosts, rank_servers
from flowsim.collectives.constants import DEFAULT_NCCL_VERSION
from flowsim.collectives.placement import collective_workload
from flowsim.collectives.tuner import check_routed_env
from flowsim.errors import InputError, whole_number
from flowsim.hardware import LinkTier
from flowsim.jobs import Job
from flowsim.pipeline import RunResult, run
from flowsim.result import SimulationResult
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.stepreport import StepBreakdown, step_breakdown
from flowsim.strings import CodedStrings, JoinedStrings
from flowsim.topology import NodeKind, Topology
from flowsim.workload import Workload
from flowsim_kernels.csr import concatenated_ranges
from flowsim_kernels.dag import zero_time_finish

__all__ = [
    "FSDP_SHARDINGS",
    "SCHEDULES",
    "ParallelLayout",
    "ParallelStep",
    "TrainingStep",
    "TrainingStepResult",
    "data_parallel_step",
    "exposed_communication_s",
    "job_breakdowns",
    "parallel_layout",
    "parallel_step",
    "run_training_step",
    "step_time_s",
    "training_breakdown",
]

#: Pipeline schedules :func:`parallel_step` lays out (``"1f1b"`` with ``virtual_stages`` > 1:
#: Megatron's interleaved 1F1B): Megatron's non-interleaved 1F1B
#: (PipeDream-Flush) and GPipe (all forwards, then all backwards).
SCHEDULES = ("1f1b", "gpipe")
#: How :func:`parallel_step` with ``fsdp`` shards: PyTorch FSDP's ``FULL_SHARD`` over the
#: whole DP group, ``HYBRID_SHARD`` over its ranks in each server, and ``SHARD_GRAD_OP`` and
#: ``_HYBRID_SHARD_ZERO2`` likewise, which keep the gathered parameters from a layer's
#: forward to its backward.
FSDP_SHARDINGS = ("full", "hybrid", "grad_op", "hybrid_grad_op")
# The shardings that free a layer's gathered parameters after its forward, to gather them
# again for its backward ([FSDP] RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES).
_RESHARD_AFTER_FORWARD = frozenset({"full", "hybrid"})


@dataclass(frozen=True)
class TrainingStep:
    """A data-parallel training step laid out as flows.

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
    ranks : tuple of str
        The GPUs of the data-parallel group.
    forward_s : float
        When the forward pass ends and the backward pass begins.
    """

    workload: Workload
    compute_s: float
    bucket_ready_s: np.ndarray
    bucket_bytes: np.ndarray
    ranks: tuple[str, ...]
    forward_s: float = 0.0

    def compute_intervals(self, result: SimulationResult) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
        """Forward (0) and backward (1) compute, as
        :func:`flowsim.stepreport.step_breakdown` takes it: one interval each, on every rank."""
        forward = (0, 0, np.array([0.0]), np.array([self.forward_s]))
        backward = (0, 1, np.array([self.forward_s]), np.array([self.compute_s]))
        return [part for part in (forward, backward) if part[3][0] > part[2][0]]


@dataclass(frozen=True)
class TrainingStepResult:
    """A simulated step.

    Attributes
    ----------
    step_s : float
        Until both the compute and the last flow are done.
    compute_s : float
        The step's compute time (see :class:`TrainingStep` and :class:`ParallelStep`).
    exposed_communication_s : float
        ``step_s - compute_s``: communication the compute did not hide.
    tier_utilization : dict
        Per link tier present (``"scale_up"``, ``"host"``, ``"scale_out"``): ``(max, mean)``
        utilization over the step, the mean over the tier's links that carried bytes.
    run : RunResult
    bubble_s : float
        The pipeline bubble of a :class:`ParallelStep` (0 for a data-parallel step).
    breakdown : StepBreakdown or None
        The step's critical path by kind of communication, its tiers and their busiest
        links, and each stage's activity (:func:`flowsim.stepreport.step_breakdown`).
    """

    step_s: float
    compute_s: float
    exposed_communication_s: float
    tier_utilization: dict[str, tuple[float, float]]
    run: RunResult
    bubble_s: float = 0.0
    breakdown: StepBreakdown | None = None


@dataclass(frozen=True)
class ParallelLayout:
    """Ranks of a tensor x pipeline x data parallel job, in Megatron's default order.

    Rank ``ranks[t + tp * (d + dp * s)]`` has TP index ``t``, DP index ``d`` and pipeline
    stage ``s``.

    Attributes
    ----------
    tp, pp, dp : int
        Tensor-parallel, pipeline-parallel and data-parallel sizes; with context parallelism
        ``dp`` counts the ranks of a stage that hold the same parameters, ``cp`` times the
        data-parallel size Megatron reports (:attr:`data_parallel`).
    ranks : tuple of str
        GPU node names, ``tp * pp * dp`` of them, in global rank order.
    ep : int
        Expert-parallel size: blocks of ``ep`` consecutive DP indices exchange tokens
        (:meth:`ep_group`); it divides ``dp``.
    cp : int
        Context-parallel size: blocks of ``cp`` consecutive DP indices split each sequence
        (:meth:`cp_group`, Megatron's ``tp-cp-ep-dp-pp`` order); it divides ``dp``.
    """

    tp: int
    pp: int
    dp: int
    ranks: tuple[str, ...]
    ep: int = 1
    cp: int = 1

    @property
    def data_parallel(self) -> int:
        """Megatron's data-parallel size: model replicas a stage has, ``dp / cp``."""
        return self.dp // self.cp

    def rank(self, tp_index: int, stage: int, dp_index: int) -> str:
        """The rank with TP index ``tp_index``, pipeline stage ``stage`` and DP index ``dp_index``."""
        return self.ranks[tp_index + self.tp * (dp_index + self.dp * stage)]

    def tp_group(self, stage: int, dp_index: int) -> tuple[str, ...]:
        """The ``tp`` ranks that share a stage's layers (one model replica's stage)."""
        return tuple(self.rank(t, stage, dp_index) for t in range(self.tp))

    def dp_group(self, tp_index: int, stage: int) -> tuple[str, ...]:
        """The ``dp`` ranks that hold the same parameters and all-reduce their gradients."""
        return tuple(self.rank(tp_index, stage, d) for d in range(self.dp))

    def edp_group(self, tp_index: int, stage: int, position: int) -> tuple[str, ...]:
        """The ``dp / ep`` ranks that hold the same experts (the same ``position`` in their
        EP groups) and reduce those experts' gradients: Megatron's expert-data-parallel
        group."""
        return tuple(self.rank(tp_index, stage, d) for d in range(position, self.dp, self.ep))

    def cp_group(self, tp_index: int, stage: int, dp_index: int) -> tuple[str, ...]:
        """The ``cp`` ranks that split the sequences of rank ``(tp_index, stage, dp_index)``'s
        microbatches: consecutive DP indices, Megatron's ``tp-cp-ep-dp-pp`` order."""
        return self._block(tp_index, stage, dp_index, self.cp)

    def _block(self, tp_index: int, stage: int, dp_index: int, size: int) -> tuple[str, ...]:
        """The ranks of the ``size`` consecutive DP indices around ``dp_index`` (a CP or an EP group)."""
        first = dp_index - dp_index % size
        return tuple(self.rank(tp_index, stage, d) for d in range(first, first + size))

    def ep_group(self, tp_index: int, stage: int, dp_index: int) -> tuple[str, ...]:
        """The ``ep`` ranks that exchange tokens with rank ``(tp_index, stage, dp_index)`` in
        an expert all-to-all: consecutive DP indices, Megatron's ``tp-cp-ep-dp-pp`` order."""
        return self._block(tp_index, stage, dp_index, self.ep)


def parallel_layout(
    topology: Topology,
    *,
    tp: int = 1,
    pp: int = 1,
    dp: int | None = None,
    ranks: Sequence[str] | None = None,
    tp_across_servers: bool = False,
    cp: int = 1,
) -> ParallelLayout:
    """Lay out ``tp x cp x pp x dp`` ranks over GPUs of ``topology`` in Megatron-LM's default order.

    Megatron-Core's default rank order is ``tp-cp-ep-dp-pp``, innermost first: TP groups
    are consecutive ranks, DP groups take every ``tp``-th rank within a stage, and stages
    are the outermost blocks. On servers of ``g`` GPUs with ``tp`` dividing ``g``, a TP
    group stays on one server's NVLink and a DP group links GPUs with the same local index
    (the same rail).

    Parameters
    ----------
    topology : Topology
    tp, pp : int
        Tensor-parallel and pipeline-parallel sizes (>= 1).
    dp : int, optional
        Data-parallel size, Megatron's (without ``cp``); default: the number of ranks over
        ``tp * cp * pp``. The layout's :attr:`ParallelLayout.dp` is ``cp`` times it.
    cp : int
        Context-parallel size (>= 1): blocks of ``cp`` consecutive DP indices
        (:meth:`ParallelLayout.cp_group`).
    ranks : sequence of str, optional
        GPU node names in global rank order; default: every GPU of ``topology`` in id order.
    tp_across_servers : bool
        Allow a TP group to span servers (its all-reduces then cross the network). By
        default that is an error, since Megatron users keep TP inside NVLink.

    Returns
    -------
    ParallelLayout

    Raises
    ------
    InputError
        When a size is not a positive integer, ``tp * pp * dp`` is not the number of ranks,
        a rank is not a node of the topology or appears twice, or a TP group would span
        servers without ``tp_across_servers``.

    Examples
    --------
    >>> from flowsim.fabrics import build_cluster
    >>> layout = parallel_layout(build_cluster("dgx_h100", 4, figure="nominal"), tp=8, pp=2)
    >>> layout.dp, layout.tp_group(1, 0)[0], layout.dp_group(3, 0)
    (2, 'n2.gpu0', ('n0.gpu3', 'n1.gpu3'))
    """
    for value, what in ((tp, "tp"), (pp, "pp"), (cp, "cp"), *(((dp, "dp"),) if dp is not None else ())):
        whole_number(what, value)
    if ranks is None:
        ranks = tuple(topology.node_names[g] for g in topology.gpus())
    elif isinstance(ranks, str):
        raise InputError(f"ranks must be a sequence of node names, got the string {ranks!r}")
    ranks = tuple(ranks)
    topology.node_ids(ranks)  # every rank a node of the topology
    seen: set[str] = set()
    for r in ranks:
        if r in seen:
            raise InputError(f"rank {r!r} appears twice")
        seen.add(r)
    if dp is None:
        if len(ranks) % (tp * pp):
            raise InputError(f"tp x pp = {tp} x {pp} = {tp * pp} does not divide the {len(ranks)} ranks")
        dp = len(ranks) // (tp * pp)  # the ranks of a stage that hold the same parameters
        if dp % cp:
            raise InputError(f"cp = {cp} does not divide the {dp} ranks a stage has over tp = {tp}")
    else:
        if cp > 1 and tp * cp * pp * dp != len(ranks):
            raise InputError(f"tp x cp x pp x dp = {tp} x {cp} x {pp} x {dp} = {tp * cp * pp * dp}, but there are "
                             f"{len(ranks)} ranks")
        dp *= cp
    if tp * pp * dp != len(ranks):
        raise InputError(f"tp x pp x dp = {tp} x {pp} x {dp} = {tp * pp * dp}, but there are {len(ranks)} ranks")
    layout = ParallelLayout(tp, pp, dp, ranks, cp=cp)
    if not tp_across_servers:
        server = topology.node_server
        for s in range(pp):
            for d in range(dp):
                group = layout.tp_group(s, d)
                own = {int(server[i]) if server[i] >= 0 else -1 - int(i) for i in topology.node_ids(group)}
                if len(own) > 1:
                    raise InputError(
                        f"TP group {group[0]!r}..{group[-1]!r} (stage {s}, DP index {d}) spans {len(own)} servers; "
                        f"keep tp within the GPUs of one server, or allow it (tp_across_servers: True in "
                        f"Python, tp_across_servers = true in a scenario)"
                    )
    return layout


@dataclass(frozen=True)
class ParallelStep:
    """A 3D-parallel training step laid out as flows.

    Attributes
    ----------
    workload : Workload
        Tag ``phase``: ``"tp"`` (TP all-reduces, or with sequence parallelism all-gathers
        and reduce-scatters), ``"pp"`` (activations and their gradients between stages),
        ``"gradients"`` (DP bucket all-reduces, or reduce-scatters with the distributed
        optimizer or FSDP, and FSDP's hybrid all-reduces), ``"params"`` (the distributed
        optimizer's and FSDP's parameter all-gathers), ``"ep"`` (expert all-to-alls),
        ``"cp"`` (context parallelism's key and value transfers), ``"compute"`` (markers,
        including one ``end.{rank}`` per rank when it is done), ``"checkpoint"``; tags
        ``stage``, ``microbatch`` and ``bucket`` where they apply (``bucket`` ``e{p}.{k}``
        for bucket ``k`` of the experts at EP position ``p``; with ``fsdp``, ``l{layer}``, the
        layer whose parameters or gradients a call moves).
    layout : ParallelLayout
    schedule : str
    n_microbatches : int
    virtual_stages : int
        Model chunks per rank (1: none; more: Megatron's interleaved 1F1B).
    compute_s : float
        The step time if every flow took no time at all (no bandwidth limit, no latency, no
        software overhead): the longest path of compute through the step's dependencies,
        pipeline bubbles included.
    stage_busy_s : numpy.ndarray
        float64[pp]: compute time of one rank of each stage,
        ``n_microbatches * sum(forward + backward of its layers)``.
    bubble_s : float
        ``compute_s - max(stage_busy_s)``: how long the busiest stage sits idle in the
        pipeline when communication is free. With equal stages of forward ``f`` and backward
        ``b`` per microbatch, 1F1B and GPipe both give ``(pp - 1)(f + b)``, the interleaved
        1F1B of ``v`` virtual stages ``(pp - 1)(f + b) / v``.
    compute_log : tuple
        Every block of compute as laid out: ``(stage, 0 | 1 for forward | backward, the
        moment it ends, seconds)``; :meth:`compute_intervals` times them after a run.
    """

    workload: Workload
    layout: ParallelLayout
    schedule: str
    n_microbatches: int
    compute_s: float
    stage_busy_s: np.ndarray
    bubble_s: float
    compute_log: tuple[tuple[int, int, _Point, float], ...] = ()
    virtual_stages: int = 1

    def compute_intervals(self, result: SimulationResult) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
        """Each stage's forward (0) and backward (1) compute blocks on all its ranks, timed by
        ``result`` (a run of :attr:`workload`), as :func:`flowsim.stepreport.step_breakdown`
        takes them."""
        log = self.compute_log
        n = len(log)
        if n == 0:
            return []
        points = [entry[2] for entry in log]
        counts = np.fromiter((len(p.deps) for p in points), dtype=np.int64, count=n)
        deps = np.fromiter(itertools.chain.from_iterable(p.deps for p in points), dtype=np.int64)
        ends = np.fromiter((p.start_s for p in points), dtype=np.float64, count=n)
        waits = counts > 0
        if deps.size:  # the last of its deps' finishes, plus its delay; its start without deps
            delay = np.fromiter((p.delay_s for p in points), dtype=np.float64, count=n)
            last = np.maximum.reduceat(result.finish_s[deps], (np.cumsum(counts) - counts)[waits])
            ends[waits] = last + delay[waits]
        seconds = np.fromiter((entry[3] for entry in log), dtype=np.float64, count=n)
        # Blocks grouped by (stage, pass), each group in log order.
        keys = np.fromiter((2 * entry[0] + entry[1] for entry in log), dtype=np.int64, count=n)
        order = np.argsort(keys, kind="stable")
        distinct, firsts = np.unique(keys[order], return_index=True)
        parts = []
        for key, chosen in zip(distinct.tolist(), np.split(order, firsts[1:]), strict=True):
            parts.append((key // 2, key % 2, ends[chosen] - seconds[chosen], ends[chosen]))
        return parts

    @property
    def bubble_fraction(self) -> float:
        """``bubble_s / compute_s`` (0 for an empty step): ``(pp - 1) / (m + pp - 1)`` for
        equal stages, ``(pp - 1) / (v m + pp - 1)`` interleaved over ``v`` virtual stages."""
        return self.bubble_s / self.compute_s if self.compute_s > 0 else 0.0


def data_parallel_step(
    topology: Topology,
    *,
    layer_backward_s: Sequence[float],
    layer_grad_bytes: Sequence[float],
    forward_s: float = 0.0,
    bucket_bytes: float = 25 * 2**20,
    ranks: Sequence[str] | None = None,
    algorithm: str | None = "auto",
    protocol: str = "auto",
    costs: CollectiveCosts | None = None,
    nccl_env: Mapping[str, str] | None = None,
    nccl_version: str = DEFAULT_NCCL_VERSION,
    checkpoint_bytes_per_rank: float = 0.0,
    checkpoint_start_s: float = 0.0,
    gpudirect: bool = True,
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
    ranks, algorithm, protocol, costs, nccl_env, nccl_version
        How each bucket is all-reduced, as :func:`flowsim.collectives.collective_workload`.
    checkpoint_bytes_per_rank : float
        Bytes each rank writes to storage (0: no checkpoint). Ranks write to the topology's
        storage targets in turn.
    checkpoint_start_s : float
        When the checkpoint writes start (s).
    gpudirect : bool
        Whether the step's network traffic moves with GPUDirect RDMA, as its flows are to be
        routed (:func:`run_training_step`'s ``gpudirect``, default True): NCCL's choices follow
        it. ``NCCL_NET_GDR_LEVEL`` and ``NCCL_NET_GDR_C2C`` in ``nccl_env`` are refused: a
        step's flows are routed one way for all of them. What NCCL would decide for a cluster
        (a system file's ``[nccl.env]`` included) is
        ``flowsim.collectives.tuner.gpudirect_rdma(topology, nccl_env=dict(topology.nccl_env))``.

    Returns
    -------
    TrainingStep
    """
    _check_layer_count(layer_backward_s, "layer_backward_s")
    backward = _column(layer_backward_s, "layer_backward_s")
    grads = _column(layer_grad_bytes, "layer_grad_bytes")
    if backward.shape != grads.shape or backward.size == 0:
        raise InputError(
            f"layer_backward_s and layer_grad_bytes need one value per layer, got {backward.size} and {grads.size}"
        )
    for value, what in ((forward_s, "forward_s"), (checkpoint_bytes_per_rank, "checkpoint_bytes_per_rank"),
                        (checkpoint_start_s, "checkpoint_start_s")):
        _check_number(value, what)
    _check_number(bucket_bytes, "bucket_bytes", positive=True)
    check_routed_env(nccl_env, "gpudirect")
    if isinstance(ranks, str):
        raise InputError(f"ranks must be a sequence of GPU names, got the string {ranks!r}")
    if (len(topology.gpus()) if ranks is None else len(ranks)) < 2:
        raise InputError("ranks: a data-parallel step needs 2 or more ranks to all-reduce its gradients over (got 1); "
                         "one GPU's step is its compute alone, which a 3D step runs (parallel_step; layer_forward_s in "
                         "a scenario)")

    ready = forward_s + np.cumsum(backward[::-1])[::-1]  # layer i: forward + backward of i..last
    parts = []
    for k, (layer, size) in enumerate(_buckets(grads, bucket_bytes)):
        at = ready[layer]
        if size == 0:
            continue
        plan = collective_workload(
            topology, "all_reduce", size, ranks=ranks, algorithm=algorithm, protocol=protocol, costs=costs,
            nccl_env=nccl_env, nccl_version=nccl_version, gpudirect=gpudirect,
        )
        parts.append((k, at, size, plan.workload))
        ranks = plan.ranks
    if ranks is None:
        ranks = tuple(topology.node_names[g] for g in topology.gpus())
    workload = _chain_buckets(parts)
    if checkpoint_bytes_per_rank > 0:
        checkpoint = _checkpoint(topology, ranks, checkpoint_bytes_per_rank, checkpoint_start_s)
        workload = Workload.concat([workload, checkpoint])
    return TrainingStep(
        workload,
        float(forward_s + backward.sum()),
        np.array([at for _, at, _, _ in parts], dtype=np.float64),
        np.array([size for _, _, size, _ in parts], dtype=np.float64),
        tuple(ranks),
        float(forward_s),
    )


def parallel_step(
    topology: Topology,
    *,
    layer_forward_s: Sequence[float],
    layer_backward_s: Sequence[float],
    layer_grad_bytes: Sequence[float],
    tp: int = 1,
    pp: int = 1,
    dp: int | None = None,
    n_microbatches: int = 1,
    schedule: str = "1f1b",
    virtual_stages: int = 1,
    activation_bytes: float = 0.0,
    tp_all_reduce_bytes: float = 0.0,
    bucket_bytes: float = 25 * 2**20,
    ranks: Sequence[str] | None = None,
    tp_across_servers: bool = False,
    algorithm: str | None = "auto",
    tp_algorithm: str | None = "auto",
    protocol: str = "auto",
    costs: CollectiveCosts | None = None,
    nccl_env: Mapping[str, str] | None = None,
    nccl_version: str = DEFAULT_NCCL_VERSION,
    slices: int | None = None,
    checkpoint_bytes_per_rank: float = 0.0,
    checkpoint_start_s: float = 0.0,
    progress: Callable[[str], None] | None = None,
    ep: int = 1,
    moe_layers: Sequence[bool] | None = None,
    ep_all_to_all_bytes: float = 0.0,
    ep_skew: float = 1.0,
    gpudirect: bool = True,
    sequence_parallel: bool = False,
    layer_expert_grad_bytes: Sequence[float] | None = None,
    distributed_optimizer: bool = False,
    fsdp: bool = False,
    fsdp_sharding: str = "full",
    fsdp_no_sync: bool = False,
    cp: int = 1,
    cp_kv_bytes: float = 0.0,
    param_to_grad_bytes: float = 1.0,
) -> ParallelStep:
    """Lay out one tensor x pipeline x data parallel training step (see the module docstring).

    Parameters
    ----------
    topology : Topology
    layer_forward_s, layer_backward_s : sequence of float
        Per layer, input to output: forward and backward compute time of one microbatch on
        one rank, TP split included (s, >= 0). The layers are split evenly over the ``pp``
        stages in order (over the ``virtual_stages x pp`` virtual stages), so their number
        must be a multiple of ``pp`` (of ``virtual_stages x pp``); give one value per stage
        for per-stage times.
    layer_grad_bytes : sequence of float
        Per layer: the gradient bytes one rank holds (its TP shard) as they are reduced,
        all-reduced over its DP group (>= 0), but for its experts' share.
    param_to_grad_bytes : float
        The bytes of the parameters that the distributed optimizer and FSDP all-gather per
        byte of those gradients (> 0; default 1): 0.5 for BF16 parameters whose gradients are
        reduced in FP32, Megatron-LM's default with ``--bf16``
        (:func:`flowsim.models.step_shape`).
    layer_expert_grad_bytes : sequence of float, optional
        Per layer: how many of ``layer_grad_bytes`` are its experts' (0 to all of them),
        all-reduced over the ``dp / ep`` ranks that hold the same experts
        (:meth:`ParallelLayout.edp_group`) in buckets of their own; default none.
    tp, pp, dp, ranks, tp_across_servers
        The layout, as :func:`parallel_layout`; ``dp`` is Megatron's data-parallel size
        (without ``cp``; default the ranks over ``tp x cp x pp``).
    cp : int
        Context-parallel size, Megatron's ``--context-parallel-size`` ([CP] in
        docs/hardware.md): each microbatch's sequences are split over ``cp`` ranks
        (consecutive after TP in Megatron's ``tp-cp-ep-dp-pp`` order), whose attention
        passes each layer's keys and values around the ring of them: every attention block
        runs as ``cp`` steps of ``1 / cp`` of its time, and before each step but the first
        a rank waits for the block its predecessor sent it at the step before, sent as that
        step began (the backward passes the key and value gradients along too: twice the
        bytes). The gradients are reduced over the ``dp x cp`` ranks of a stage. Not with
        experts or ``fsdp``. The per-layer times and sizes given are a rank's, of its ``1 /
        cp`` of the tokens (:func:`flowsim.models.step_shape` with ``cp``).
    cp_kv_bytes : float
        Bytes of keys and values one rank holds per layer and microbatch, which travel the
        context-parallel ring in the forward pass (twice that in the backward pass); more
        than 0 only with ``cp > 1``.
    n_microbatches : int
        Microbatches per step and model replica (>= 1).
    schedule : {"1f1b", "gpipe"}
    virtual_stages : int
        Model chunks per rank, Megatron's ``--num-virtual-stages-per-pipeline-rank`` (default
        1). With ``v`` > 1 (and ``schedule`` 1F1B) rank ``stage`` holds virtual stages
        ``stage``, ``stage + pp``, ... and runs Megatron's interleaved 1F1B
        (``forward_backward_pipelining_with_interleaving``, [MEGATRON] in docs/hardware.md):
        microbatches in groups of ``pp``, each group through every chunk in turn; ``(pp -
        stage - 1) x 2 + (v - 1) x pp`` warm-up forwards, then a forward and a backward at a
        time, then the rest of the backwards; transfers do not block (module docstring).
        Megatron requires ``pp`` >= 2 and ``n_microbatches`` a multiple of ``pp``.
    activation_bytes : float
        Bytes one rank sends to its peer in the next stage per microbatch (the activations),
        and back (their gradients). With 0, the stages still wait for each other.
    tp_all_reduce_bytes : float
        Bytes of each TP all-reduce (two per layer in the forward pass and two in the
        backward pass, per microbatch); 0: no TP all-reduces.
    sequence_parallel : bool
        Megatron's sequence parallelism ([SEQ-PAR] in docs/hardware.md): each TP all-reduce
        becomes a reduce-scatter of ``tp_all_reduce_bytes`` after its block and an all-gather
        of as many before it (no effect with ``tp`` = 1 or no TP bytes). The sizes given are
        taken as they are: ``activation_bytes`` and ``ep_all_to_all_bytes`` are a rank's,
        which sequence parallelism divides by ``tp`` (:func:`flowsim.models.step_shape`
        does).
    bucket_bytes : float
        Gradient bucket size (bytes, > 0; PyTorch DDP's default is 25 MiB).
    distributed_optimizer : bool
        Megatron's distributed optimizer (``use_distributed_optimizer`` with
        ``overlap_grad_reduce`` and ``overlap_param_gather``, as Megatron recipes run it;
        [MCORE-DDP] in docs/hardware.md): each gradient bucket is reduce-scattered over its
        group instead of all-reduced, and its parameters (``param_to_grad_bytes`` times its
        bytes) all-gathered over it at the start of the step, the first microbatch's forward waiting for each at the
        bucket's first layer (module docstring). No effect without data parallelism.
    fsdp : bool
        PyTorch FSDP's full sharding (``ShardingStrategy.FULL_SHARD``, ZeRO-3) over each DP
        group, a unit per layer, with FSDP's defaults ([FSDP] in docs/hardware.md): before
        each forward and each backward of a layer, every microbatch, its parameters
        (``layer_grad_bytes x param_to_grad_bytes``) are all-gathered over the group, and after each backward its
        gradients are reduce-scattered over it (no buckets). The gathers run one after
        another on their own stream, each starting once the pass that used the parameters
        two gathers back has ended (``limit_all_gathers``); the reduce-scatters on another.
        A pass waits for its gather, nothing waits for a reduce-scatter but the step's end.
        One stage, no experts, not with ``distributed_optimizer``; no effect without data
        parallelism.
    fsdp_sharding : {"full", "hybrid", "grad_op", "hybrid_grad_op"}
        With ``fsdp``: ``"full"`` (``FULL_SHARD``) shards over the whole DP group;
        ``"hybrid"`` (``HYBRID_SHARD``: "FULL_SHARD within a node, and replicate parameters
        across nodes") shards over the DP group's ranks of each server, whose all-gathers
        and reduce-scatters then stay inside it, and all-reduces each reduced shard over the
        ranks that hold it on the other servers once its reduce-scatter is done, one after
        another on a stream of their own (FSDP's ``_all_reduce_stream``). Every server must
        hold as many of each DP group's ranks. ``"grad_op"`` (``SHARD_GRAD_OP``, ZeRO-2) and
        ``"hybrid_grad_op"`` (``_HYBRID_SHARD_ZERO2``) shard as ``"full"`` and ``"hybrid"``
        but keep a layer's gathered parameters from its forward to its backward, which
        gathers nothing; with nothing freed in the forward FSDP's rate limiter holds none of
        its gathers back, so each microbatch's all go out one after another as its forward
        begins (the gathers' stream waits for the compute issued before it, FSDP's
        ``_wait_for_computation_stream``).
    fsdp_no_sync : bool
        With ``fsdp``: gradient accumulation under FSDP's ``no_sync()``, every microbatch but
        the last: gradients are reduce-scattered (and with hybrid sharding all-reduced)
        after the last microbatch's backwards only, as Megatron's buckets are; with
        ``"grad_op"`` and ``"hybrid_grad_op"`` the parameters gathered for the first
        microbatch's forward are then kept for the others (``_should_free_in_backward``),
        which gather nothing.
    algorithm, tp_algorithm : str, optional
        All-reduce algorithm of the gradient buckets and of the TP all-reduces (default
        ``"auto"``: what NCCL's tuner picks for each size), as
        :func:`flowsim.collectives.collective_workload`.
    protocol, costs, slices, nccl_env, nccl_version
        For every collective and send, as :func:`flowsim.collectives.collective_workload`.
        Fewer slices mean fewer flows (a faster simulation) and less pipelining inside each
        message: with 1, an NVLS all-reduce's reduce, store and multicast run one after
        another, and take about 1.75x the time NCCL's chunks give.
    checkpoint_bytes_per_rank, checkpoint_start_s : float
        As :func:`data_parallel_step`.
    progress : callable, optional
        Called with a short note before each stage of the building (laying out the
        schedule, timing its compute, checking the flows), which takes tens of seconds for
        millions of flows.
    ep : int
        Expert-parallel size (>= 1, dividing ``dp``): each block of ``ep`` consecutive DP
        indices (same TP index and stage) exchanges tokens (:meth:`ParallelLayout.ep_group`).
        Experts with ``tp`` > 1 need ``sequence_parallel``, as Megatron-LM's MoE layers do.
    moe_layers : sequence of bool, optional
        Per layer: whether its MLP is a mixture of experts (default: every layer when
        ``ep_all_to_all_bytes > 0``). Such a layer's MLP block is framed by two all-to-alls
        over the EP group, tag ``phase`` = ``"ep"``: the dispatch before the expert compute
        and the combine after it in the forward pass, the combine's gradient and then the
        dispatch's in the backward pass. Each is a blocking collective: a rank's compute
        goes on once the whole all-to-all has arrived.
    ep_all_to_all_bytes : float
        Bytes one rank dispatches per MoE layer and microbatch, summed over the group's
        ranks (itself included), and gets back in the combine (0: no expert all-to-alls).
    ep_skew : float
        How uneven the tokens are: the first rank of each EP group gets ``ep_skew`` times
        the mean share of every rank's tokens, the others share the rest evenly; in
        ``[1, ep]``, 1 for even routing.
    gpudirect : bool
        As :func:`data_parallel_step`'s.

    Returns
    -------
    ParallelStep

    Raises
    ------
    InputError
        Naming the argument: a bad layout (:func:`parallel_layout`), per-layer columns of
        different lengths or not divisible by ``pp``, a negative time or size, an unknown
        schedule.
    """
    n_microbatches = whole_number("n_microbatches", n_microbatches)
    check_step_size(_check_layer_count(layer_forward_s, "layer_forward_s"), n_microbatches)
    layout = parallel_layout(topology, tp=tp, pp=pp, dp=dp, cp=cp, ranks=ranks, tp_across_servers=tp_across_servers)
    cp = layout.cp
    forward = _column(layer_forward_s, "layer_forward_s")
    backward = _column(layer_backward_s, "layer_backward_s")
    grads = _column(layer_grad_bytes, "layer_grad_bytes")
    if not forward.size == backward.size == grads.size > 0:
        raise InputError(
            "layer_forward_s, layer_backward_s and layer_grad_bytes need one value per layer, "
            f"got {forward.size}, {backward.size} and {grads.size}"
        )
    expert_grads = np.zeros_like(grads) if layer_expert_grad_bytes is None else _column(
        layer_expert_grad_bytes, "layer_expert_grad_bytes")
    if expert_grads.shape != grads.shape:
        raise InputError(f"layer_expert_grad_bytes needs one value per layer ({grads.size}), got {expert_grads.size}")
    above = np.flatnonzero(expert_grads > grads)
    if above.size:
        i = int(above[0])
        raise InputError(f"layer_expert_grad_bytes[{i}] = {float(expert_grads[i])!r} is more than layer {i}'s "
                         f"gradients, layer_grad_bytes[{i}] = {float(grads[i])!r}")
    if schedule not in SCHEDULES:
        raise InputError(f"unknown schedule {schedule!r}; valid ones: {', '.join(SCHEDULES)}")
    v = whole_number("virtual_stages", virtual_stages)
    if v > 1:
        # Megatron-LM's checks for the interleaved schedule (megatron/training/arguments.py,
        # megatron/core/pipeline_parallel/schedules.py at d98e8a64).
        if schedule != "1f1b":
            raise InputError(f"virtual_stages = {v} runs Megatron's interleaved 1F1B; schedule must be '1f1b', "
                             f"not {schedule!r}")
        if layout.pp < 2:
            raise InputError(f"virtual_stages = {v} interleaves pipeline stages; it needs pp >= 2, got {layout.pp}")
        if n_microbatches % layout.pp:
            raise InputError(f"the interleaved schedule runs microbatches in groups of pp = {layout.pp}: "
                             f"n_microbatches = {n_microbatches} must be a multiple of it")
    if forward.size % (layout.pp * v):
        stages = f"pp = {layout.pp} stages" if v == 1 else f"virtual_stages x pp = {v * layout.pp} virtual stages"
        raise InputError(
            f"{forward.size} layers do not split evenly over {stages}; give a multiple of "
            f"{'pp' if v == 1 else 'virtual_stages x pp'} (one value per stage for per-stage times)"
        )
    ep = whole_number("ep", ep)
    if cp > 1 and (ep > 1 or fsdp):
        raise InputError(f"cp = {cp} is laid out without experts and without fsdp: give ep = 1 and fsdp = false")
    _check_number(cp_kv_bytes, "cp_kv_bytes")
    _check_number(param_to_grad_bytes, "param_to_grad_bytes", positive=True)
    if cp_kv_bytes and cp == 1:
        raise InputError(f"cp_kv_bytes = {cp_kv_bytes!r} is what context parallelism sends: give cp > 1 too")
    if layout.dp % ep:
        raise InputError(f"ep = {ep} does not divide dp = {layout.dp}; an expert group is ep consecutive DP indices")
    layout = replace(layout, ep=int(ep))
    _check_number(ep_all_to_all_bytes, "ep_all_to_all_bytes")
    _check_number(ep_skew, "ep_skew")
    if not 1 <= ep_skew <= ep:
        raise InputError(
            f"ep_skew must lie in [1, ep = {ep}] (the busiest rank's share over the mean), got {ep_skew!r}"
        )
    moe = _moe_layers(moe_layers, forward.size, ep_all_to_all_bytes > 0 and ep > 1)
    # Megatron-LM's MoE layers refuse to train under tensor parallelism without sequence
    # parallelism (MoELayer.forward, megatron/core/transformer/moe/moe_layer.py at d98e8a64):
    # each TP rank would dispatch all of the tokens.
    experts_present = (ep_all_to_all_bytes > 0 or expert_grads.any()) and _moe_layers(moe_layers, forward.size,
                                                                                      True).any()
    if experts_present and layout.tp > 1 and sequence_parallel is not True:
        raise InputError(f"experts with tp = {layout.tp} need sequence_parallel = true, as Megatron-LM's MoE layers do "
                         "under tensor parallelism")
    for value, what in ((activation_bytes, "activation_bytes"), (tp_all_reduce_bytes, "tp_all_reduce_bytes"),
                        (checkpoint_bytes_per_rank, "checkpoint_bytes_per_rank"),
                        (checkpoint_start_s, "checkpoint_start_s")):
        _check_number(value, what)
    _check_number(bucket_bytes, "bucket_bytes", positive=True)
    for flag, what in ((sequence_parallel, "sequence_parallel"), (distributed_optimizer, "distributed_optimizer"),
                       (fsdp, "fsdp"), (fsdp_no_sync, "fsdp_no_sync")):
        if not isinstance(flag, bool):
            raise InputError(f"{what} must be true or false, got {flag!r}")
    if fsdp:
        # FSDP shards what one stage of a model holds; flowsim lays it out for one stage.
        if layout.pp > 1:
            raise InputError(f"fsdp lays out one pipeline stage; got pp = {layout.pp}")
        if distributed_optimizer:
            raise InputError("fsdp shards the parameters, which the distributed optimizer gathers once a step: "
                             "give one of them")
        if ep > 1 or expert_grads.any():
            raise InputError("fsdp has no expert parallelism here: give ep = 1 and no layer_expert_grad_bytes")
    if fsdp_sharding not in FSDP_SHARDINGS:
        raise InputError(f"unknown fsdp_sharding {fsdp_sharding!r}; valid ones: {', '.join(FSDP_SHARDINGS)}")
    if fsdp_sharding != "full" and not fsdp:
        raise InputError(f"fsdp_sharding = {fsdp_sharding!r} is how FSDP shards: give fsdp = true too")
    if fsdp_no_sync and not fsdp:
        raise InputError("fsdp_no_sync is how FSDP accumulates gradients: give fsdp = true too")
    shards = _shard_groups(topology, layout, fsdp_sharding) if fsdp else {}
    reshard = fsdp_sharding in _RESHARD_AFTER_FORWARD
    check_routed_env(nccl_env, "gpudirect")

    router = Router(topology)  # one for every group's NCCL search, not one each

    def plan(collective: str, group: tuple[str, ...], size: float, chosen: str | None,
             communicator: tuple[str, ...] | None = None) -> Workload:
        # An all-to-all sends each message whole: it takes no slices.
        return collective_workload(
            topology, collective, size, ranks=group, algorithm=chosen, protocol=protocol, costs=costs,
            slices=None if collective == "all_to_all" else slices, nccl_env=nccl_env, nccl_version=nccl_version,
            router=router, communicator=communicator, gpudirect=gpudirect,
        ).workload

    builder = _PipelineBuilder(
        layout, forward, backward, grads, n_microbatches, schedule, float(activation_bytes),
        float(tp_all_reduce_bytes), float(bucket_bytes), plan, algorithm, tp_algorithm,
        _Experts(moe, float(ep_all_to_all_bytes), float(ep_skew)), sequence_parallel, expert_grads,
        distributed_optimizer, v, fsdp, shards, float(cp_kv_bytes), reshard, fsdp_no_sync, float(param_to_grad_bytes),
    )
    note = progress or (lambda message: None)
    what = schedule if v == 1 else f"interleaved {schedule}, {v} virtual stages a rank"
    note(f"laying out {layout.pp} stages x {layout.dp} replicas x {n_microbatches} microbatches ({what})")
    with _cyclic_gc_paused():
        builder.lay_out()
        n_step_flows = len(builder.flows)
        if checkpoint_bytes_per_rank > 0:
            checkpoint = _checkpoint(topology, layout.ranks, checkpoint_bytes_per_rank, checkpoint_start_s)
            builder.flows.place(_Template.of(checkpoint), "", {}, ("checkpoint", "", "", ""))
        note(f"checking {len(builder.flows):,} flows and their dependencies")
        workload = builder.flows.workload()
    note(f"timing the compute through {n_step_flows:,} flows")
    # The checkpoint's flows come after the step's and nothing of the step waits for them.
    finish = zero_time_finish(workload.start_s, workload.delay_s, workload.dep_indptr, workload.dep_indices)
    compute_s = float(finish[:n_step_flows].max(initial=0.0))
    # Virtual stage c x pp + s is rank s's chunk c.
    busy = n_microbatches * (forward + backward).reshape(v, layout.pp, -1).sum(axis=(0, 2))
    # With one stage nothing waits; elsewhere the difference of two float sums leaves a few
    # ulps of the compute where a stage is never idle, which a report would print as 0.000 ns.
    bubble_s = 0.0 if layout.pp == 1 else max(compute_s - float(busy.max()), 0.0)
    return ParallelStep(
        workload, layout, schedule, int(n_microbatches), compute_s, busy, bubble_s, tuple(builder.compute_log),
        virtual_stages=int(v),
    )


def step_time_s(compute_s: float, makespan_s: float) -> float:
    """The time of a training step whose compute takes ``compute_s`` and whose communication
    ends at ``makespan_s``: the communication overlaps the compute, so the longer one sets it."""
    return max(compute_s, makespan_s)


def exposed_communication_s(compute_s: float, makespan_s: float) -> float:
    """The communication the compute did not hide: :func:`step_time_s` less ``compute_s``
    (0 when the compute takes longer)."""
    return step_time_s(compute_s, makespan_s) - compute_s


def run_training_step(topology: Topology, step: TrainingStep | ParallelStep, **run_options) -> TrainingStepResult:
    """Simulate ``step`` on ``topology`` (``run_options`` as :func:`flowsim.run`)."""
    if not isinstance(step, (TrainingStep, ParallelStep)):
        raise InputError(
            f"step must be a TrainingStep or ParallelStep (from data_parallel_step or parallel_step), got "
            f"{type(step).__name__}"
        )
    outcome = run(topology, step.workload, **run_options)
    step_s = step_time_s(step.compute_s, outcome.result.makespan_s)
    carried = outcome.result.link_bytes
    utilization = outcome.result.link_utilization(step_s if step_s > 0 else None)  # zeros for an empty step
    tiers = {}
    for tier in LinkTier:
        on_tier = topology.link_tier == tier
        if on_tier.any():
            used = on_tier & (carried > 0)
            mean = float(utilization[used].mean()) if used.any() else 0.0
            tiers[tier.name.lower()] = (float(utilization[on_tier].max()), mean)
    bubble_s = step.bubble_s if isinstance(step, ParallelStep) else 0.0
    exposed_s = exposed_communication_s(step.compute_s, outcome.result.makespan_s)
    breakdown = training_breakdown(topology, step, step.workload, outcome.result)
    return TrainingStepResult(step_s, step.compute_s, exposed_s, tiers, outcome, bubble_s, breakdown)


def training_breakdown(
    topology: Topology, step: TrainingStep | ParallelStep, workload: Workload, result: SimulationResult, *,
    top: int = 3, offset: int | None = None, routes: Routes | None = None, start_s: float = 0.0,
) -> StepBreakdown:
    """:func:`flowsim.stepreport.step_breakdown` of a run of ``workload``, in which ``step``'s
    flows are rows ``offset`` on (a scenario puts its flow list and collectives first, and its
    jobs after) and the step started at ``start_s`` (a job's iteration starts at its start
    marker; the breakdown's times are from the step's start). The step's time and critical
    path come from its own flows; the links' utilization over the step counts the bytes of its
    own flows where the run's ``routes`` are given, else those of every flow of the run
    (which, past the step's end, can make a link's use over the step more than 100%).

    Parameters
    ----------
    topology : Topology
    step : TrainingStep or ParallelStep
    workload : Workload
        What ran: ``step.workload``, or other flows followed by it.
    result : SimulationResult
        The run's result.
    top : int
        Busiest links kept per tier group.
    offset : int, optional
        The row of ``step``'s first flow in ``workload``; default: its flows are the last.
    """
    if offset is None:
        offset = len(workload) - len(step.workload)
    rows = slice(offset, offset + len(step.workload))
    mine = replace(
        result, ready_s=result.ready_s[rows] - start_s, transfer_start_s=result.transfer_start_s[rows] - start_s,
        finish_s=result.finish_s[rows] - start_s, size_bytes=result.size_bytes[rows],
    )
    if routes is not None and len(step.workload) < len(workload):
        # The step's own bytes on each link: its flows' sizes along their routes.
        indptr = routes.flow_link_indptr
        links = routes.flow_link_indices[indptr[rows.start]:indptr[rows.stop]]
        sizes = np.repeat(result.size_bytes[rows], np.diff(indptr[rows.start:rows.stop + 1]))
        carried = np.bincount(links, weights=sizes, minlength=routes.n_links)
        mine = replace(mine, link_bytes=carried[: len(result.link_bytes)])
    if isinstance(step, ParallelStep):
        layout = step.layout
        shape = {"tp": layout.tp, "pp": layout.pp, "dp": layout.data_parallel, "ep": layout.ep,
                 "n_microbatches": step.n_microbatches, "virtual_stages": step.virtual_stages, "cp": layout.cp}
        bubble_s = step.bubble_s
    else:
        # The group's own count: a step without gradient bytes has no gradient flows to count
        # ranks from, and 0 made its trace unreadable.
        shape = {"tp": 1, "pp": 1, "dp": len(step.ranks), "ep": 1, "n_microbatches": 1, "virtual_stages": 1, "cp": 1}
        bubble_s = 0.0
    return step_breakdown(
        topology, step.workload, mine, compute_s=step.compute_s, bubble_s=bubble_s,
        compute_intervals=step.compute_intervals(mine), layout=shape, top=top,
    )


def job_breakdowns(
    topology: Topology, jobs: Sequence[Job], workload: Workload, result: SimulationResult, routes: Routes,
) -> dict[str, StepBreakdown]:
    """:func:`training_breakdown` of each training job's first iteration in a run of a
    scenario's ``workload``, by job name: the step as it ran beside the others, its times
    from the iteration's start marker. Each iteration is its markers, then the step's flows
    (:func:`flowsim.jobs.repeat_iterations`)."""
    out = {}
    for job in jobs:
        if job.training is not None:
            first = job.lo + (job.hi - job.lo) // job.iterations - len(job.training.workload)
            out[job.name] = training_breakdown(
                topology, job.training, workload, result, offset=first, routes=routes,
                start_s=float(result.finish_s[job.start_marker[0]]),
            )
    return out


def _moe_layers(moe_layers: Sequence[bool] | None, n_layers: int, default: bool) -> np.ndarray:
    """Per layer, whether its MLP is a mixture of experts (``default`` for every layer when
    not given)."""
    if moe_layers is None:
        return np.full(n_layers, default)
    if isinstance(moe_layers, (str, bytes)) or not hasattr(moe_layers, "__len__") or len(moe_layers) != n_layers:
        raise InputError(f"moe_layers must be one true or false per layer ({n_layers}), got {moe_layers!r}")
    if not all(isinstance(v, (bool, np.bool_)) for v in moe_layers):
        raise InputError(f"moe_layers must be true or false per layer, got {moe_layers!r}")
    return np.array(moe_layers, dtype=bool)


@dataclass(frozen=True)
class _Experts:
    """The mixture-of-experts part of a step: which layers, bytes per dispatch, skew."""

    layers: np.ndarray
    bytes: float
    skew: float

    def shares(self, ep: int) -> np.ndarray:
        """Each EP group position's share of a rank's tokens: the first ``skew / ep``, the
        rest even."""
        if ep == 1:
            return np.ones(1)
        rest = (1.0 - self.skew / ep) / (ep - 1)
        return np.array([self.skew / ep] + [rest] * (ep - 1))


def _check_number(value: object, what: str, *, positive: bool = False) -> None:
    """An :class:`InputError` unless ``value`` is a finite real number, >= 0 (> 0 if
    ``positive``); a bool or a string is not a number here."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(f"{what} must be a number, got {value!r}")
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        raise InputError(f"{what} must be finite and {'> 0' if positive else '>= 0'}, got {value!r}")


#: Most layers a training step takes: far above any published model (GPT-3 175B has 96
#: layers: Brown et al., "Language Models are Few-Shot Learners", 2020, Table 2.1), low
#: enough that a typo fails at once rather than after gigabytes of layout.
MAX_LAYERS = 10_000
#: Most layer passes (layers times microbatches) a 3D-parallel step lays out: each pass has
#: its own TP all-reduces and stage transfers, so this bounds the flows the way
#: :data:`~flowsim.collectives.STEP_MESSAGE_LIMIT` bounds a collective's.
MAX_LAYER_PASSES = 1_000_000


def check_step_size(n_layers: int, n_microbatches: int = 1) -> None:
    """An :class:`InputError` unless a step of ``n_layers`` layers and ``n_microbatches``
    microbatches is within :data:`MAX_LAYERS` and :data:`MAX_LAYER_PASSES`; checked before
    anything of the step is built."""
    if n_layers > MAX_LAYERS:
        raise InputError(f"{n_layers:,} layers is more than the {MAX_LAYERS:,} a training step takes")
    if n_layers * n_microbatches > MAX_LAYER_PASSES:
        raise InputError(
            f"{n_layers:,} layers times {n_microbatches:,} microbatches is {n_layers * n_microbatches:,} layer "
            f"passes, more than the {MAX_LAYER_PASSES:,} a training step lays out"
        )


def _check_layer_count(values: Sequence[float], what: str) -> int:
    """The number of layers ``values`` gives, checked against :data:`MAX_LAYERS`."""
    if not hasattr(values, "__len__") or isinstance(values, (str, bytes)):
        raise InputError(f"{what} must be numbers, one per layer, got {values!r}")
    check_step_size(len(values))
    return len(values)


def _column(values: Sequence[float], what: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be numbers, one per layer, got {values!r}") from None
    if arr.ndim != 1:
        raise InputError(f"{what} must be one value per layer")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if bad.size:
        raise InputError(f"{what}[{int(bad[0])}] is {float(arr[bad[0]])!r}; it must be finite and >= 0")
    return arr


def _chain_buckets(parts: list[tuple[int, float, float, Workload]]) -> Workload:
    """One workload of the buckets' all-reduces, each starting no earlier than its gradients
    are ready and only after the previous bucket's all-reduce has finished."""
    names: list[str] = []
    src: list[str] = []
    dst: list[str] = []
    deps: list[list[int]] = []
    size: list[np.ndarray] = []
    start: list[np.ndarray] = []
    delay: list[np.ndarray] = []
    overhead: list[np.ndarray] = []
    weight: list[np.ndarray] = []
    cap: list[np.ndarray] = []
    tags: dict[str, list[str]] = {"phase": [], "bucket": []}
    shared: list[str] = []  # each flow's shared budget, a tag where any flow has one
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
        shared += w.tags.get(SHARED_CAP_TAG, ("",) * len(w))
    def cat(columns: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(columns) if columns else np.empty(0)

    return Workload.build(
        names, src, dst, cat(size), start_s=cat(start), depends_on=deps, delay_s=cat(delay),
        overhead_s=cat(overhead), weight=cat(weight), cap_Bps=cat(cap),
        tags={**tags, SHARED_CAP_TAG: shared} if any(shared) else tags,
    )


def _checkpoint(topology: Topology, ranks: Sequence[str], bytes_per_rank: float, start_s: float) -> Workload:
    targets = [topology.node_names[i] for i in topology.nodes_of_kind(NodeKind.STORAGE)]
    if not targets:
        raise InputError(
            "checkpoint writes need storage targets in the topology: give topology.storage_targets (build_cluster's "
            "storage_targets)"
        )
    dst = [targets[i % len(targets)] for i in range(len(ranks))]
    return Workload.build(
        [f"checkpoint.{r}" for r in ranks], list(ranks), dst, [bytes_per_rank] * len(ranks),
        start_s=[start_s] * len(ranks), tags={"phase": ["checkpoint"] * len(ranks), "bucket": [""] * len(ranks)},
    )


def _buckets(grads: np.ndarray, bucket_bytes: float) -> list[tuple[int, float]]:
    """DDP's buckets over layers ``grads`` (input to output): filled in backward order, each
    closing once it holds ``bucket_bytes`` or at the first layer. Returns, in all-reduce
    order, the layer whose gradient closes each bucket and the bucket's bytes."""
    buckets = []
    filled = 0.0
    for layer in range(grads.size - 1, -1, -1):
        filled += grads[layer]
        if filled >= bucket_bytes or layer == 0:
            buckets.append((layer, filled))
            filled = 0.0
    return buckets


# A transfer between adjacent stages: ("act" | "grad", microbatch, boundary). Boundary ``b``
# lies between stages ``b`` and ``b + 1``; activations cross it forwards, gradients back.
_Transfer = tuple[str, int, int]


def _shard_groups(topology: Topology, layout: ParallelLayout, sharding: str) -> dict[tuple[int, int], list[tuple]]:
    """Per (stage, TP index): the groups FSDP shards the DP group's parameters over, the whole
    group (``"full"``, ``"grad_op"``), or its ranks in each server in order (``"hybrid"``,
    ``"hybrid_grad_op"``); an
    :class:`InputError` where servers hold different numbers of a group's ranks."""
    groups: dict[tuple[int, int], list[tuple]] = {}
    for stage in range(layout.pp):
        for t in range(layout.tp):
            group = layout.dp_group(t, stage)
            if sharding not in ("hybrid", "hybrid_grad_op"):
                groups[(stage, t)] = [group]
                continue
            by_server: dict[str, list[str]] = {}
            for rank, server in rank_servers(topology, group).items():
                by_server.setdefault(server, []).append(rank)
            sizes = {len(ranks) for ranks in by_server.values()}
            if len(sizes) > 1:
                raise InputError(f"fsdp_sharding = {sharding!r} shards over each server's ranks of a DP group, but the "
                                 f"group of {group[0]!r} has {min(sizes)} to {max(sizes)} ranks a server")
            groups[(stage, t)] = [tuple(ranks) for ranks in by_server.values()]
    return groups


def _stage_ops(schedule: str, stage: int, pp: int, m: int, v: int = 1) -> list[tuple]:
    """What one stage does, in order: ``("F", i, vs)`` / ``("B", i, vs)``, the forward /
    backward of microbatch ``i`` through virtual stage ``vs`` (the stage itself without
    interleaving); ``("post", transfers)``, one blocking batched send/receive call; and with
    ``v`` virtual stages a rank, ``("send", transfer)`` and ``("recv", transfer)``, a send
    that does not block and the wait for a transfer's arrival. A transfer ``(kind, i, b)``
    crosses boundary ``b``, from virtual stage ``b`` to ``b + 1`` (``"act"``) or back
    (``"grad"``).

    1F1B is Megatron's ``forward_backward_pipelining_without_interleaving``: ``pp - stage -
    1`` warm-up forwards, then one forward and one backward at a time, then the remaining
    backwards, with its combined calls (``send_forward_recv_backward``, ...). With ``v`` > 1
    it is ``forward_backward_pipelining_with_interleaving``
    (megatron/core/pipeline_parallel/schedules.py at d98e8a64: ``get_schedule_table``,
    ``get_pp_rank_microbatches``) with ``microbatch_group_size_per_vp_stage`` = ``pp``, its
    default.
    """
    if v > 1:
        return _interleaved_ops(stage, pp, m, v)
    first, last = stage == 0, stage == pp - 1

    def recv_forward(i: int) -> list[_Transfer]:
        return [] if first else [("act", i, stage - 1)]

    def send_forward(i: int) -> list[_Transfer]:
        return [] if last else [("act", i, stage)]

    def recv_backward(i: int) -> list[_Transfer]:
        return [] if last else [("grad", i, stage)]

    def send_backward(i: int) -> list[_Transfer]:
        return [] if first else [("grad", i, stage - 1)]

    ops: list[tuple] = []

    def post(transfers: list[_Transfer]) -> None:
        if transfers:
            ops.append(("post", tuple(transfers)))

    if schedule == "gpipe":
        for i in range(m):
            post(recv_forward(i))
            ops.append(("F", i, stage))
            post(send_forward(i))
        for i in range(m):
            post(recv_backward(i))
            ops.append(("B", i, stage))
            post(send_backward(i))
        return ops
    warmup = min(pp - stage - 1, m)
    steady = m - warmup
    for i in range(warmup):
        post(recv_forward(i))
        ops.append(("F", i, stage))
        post(send_forward(i))
    if steady:
        post(recv_forward(warmup))
    for i in range(steady):
        ops.append(("F", warmup + i, stage))
        post(send_forward(warmup + i) + recv_backward(i))
        ops.append(("B", i, stage))
        post(send_backward(i) + (recv_forward(warmup + i + 1) if i < steady - 1 else []))
    for i in range(steady, m):
        post(recv_backward(i))
        ops.append(("B", i, stage))
        post(send_backward(i))
    return ops


def _interleaved_ops(stage: int, pp: int, m: int, v: int) -> list[tuple]:
    """:func:`_stage_ops` of Megatron's interleaved 1F1B (``m`` a multiple of ``pp``).

    Forward ``k`` (of ``m x v``) runs the ``k``-th entry of the schedule table: microbatches
    in groups of ``pp``, each group through chunk 0, then chunk 1, ...; backward ``k`` runs
    the same microbatch through chunk ``v - 1 - c``. Each pass waits for its input and sends
    its output without waiting (``overlap_p2p_comm``).
    """
    table = [(i, c) for group in range(0, m, pp) for c in range(v) for i in range(group, group + pp)]
    total, last = m * v, v * pp - 1
    warmup = min((pp - stage - 1) * 2 + (v - 1) * pp, total)
    ops: list[tuple] = []

    def forward(k: int) -> None:
        i, c = table[k]
        vs = c * pp + stage
        if vs > 0:
            ops.append(("recv", ("act", i, vs - 1)))
        ops.append(("F", i, vs))
        if vs < last:
            ops.append(("send", ("act", i, vs)))

    def backward(k: int) -> None:
        i, c = table[k]
        vs = (v - 1 - c) * pp + stage
        if vs < last:
            ops.append(("recv", ("grad", i, vs)))
        ops.append(("B", i, vs))
        if vs > 0:
            ops.append(("send", ("grad", i, vs - 1)))

    for k in range(warmup):
        forward(k)
    for k in range(total - warmup):
        forward(warmup + k)
        backward(k)
    for k in range(total - warmup, total):
        backward(k)
    return ops


def _fsdp_ops(ops: list[tuple], reshard_after_forward: bool = True, no_sync: bool = False) -> list[tuple]:
    """``ops`` (one pass op per layer, no transfers: one stage) with PyTorch FSDP's calls
    around them, as its FULL_SHARD strategy runs with its defaults (torch/distributed/fsdp:
    ``limit_all_gathers=True``, ``backward_prefetch=BACKWARD_PRE``,
    ``reshard_after_forward=True``): each pass of a layer waits (``("unsharded", gather)``)
    for the all-gather of the layer's parameters (``("fsdp", ("gather", microbatch, layer,
    pass))``), each all-gather is laid out on its stream after the previous one and not
    before the pass that used the parameters two gathers back has ended (the rate limiter
    frees a gather's memory when its pass ends; the host runs ahead of the GPU, so the
    limiter, not where a hook issues the gather, decides when it starts), and each backward
    is followed by the reduce-scatter of the layer's gradients (``("fsdp", ("scatter", ...))``).
    A microbatch's forward begins with the root's pre-forward, which has the gathers'
    stream wait for the compute issued before it (``_wait_for_computation_stream``): its
    first gather does not start before the backward before it has ended.

    Without ``reshard_after_forward`` (SHARD_GRAD_OP) only forwards gather, and a
    microbatch's gathers all start as its forward begins, one after another on their
    stream: the forward frees nothing, so the rate limiter, which waits only for freed
    gathers, holds none back. With ``no_sync`` (gradients accumulated under ``no_sync()``
    but for the last microbatch) only the last microbatch's backwards reduce-scatter, and
    without ``reshard_after_forward`` only the first microbatch's forwards gather: no
    backward frees the parameters until the last."""
    passes = [op for op in ops if op[0] in ("F", "B")]
    assert len(passes) == len(ops), "FSDP steps have one stage: no pipeline transfers"
    gathers = [("gather", microbatch, blocks[0][0], kind) for kind, (microbatch, blocks) in passes]
    last = max(microbatch for _, (microbatch, _) in passes)
    first = min(microbatch for _, (microbatch, _) in passes)
    # Whether each pass gathers its layer's parameters first.
    gathering = [reshard_after_forward or (op[0] == "F" and not (no_sync and op[1][0] != first)) for op in passes]
    # Per gather (of the passes that gather), the pass after which it may start (-1: at once).
    released: dict[int, list[int]] = {}
    begin = -1  # the pass before the current microbatch's first forward
    for u, op in enumerate(passes):
        if op[0] == "F" and u > 0 and passes[u - 1][0] == "B":
            begin = u - 1
        if gathering[u]:
            released.setdefault(max(u - 2, begin) if reshard_after_forward else begin, []).append(u)
    out: list[tuple] = [("fsdp", gathers[g]) for g in released.get(-1, [])]
    for u, (op, gather) in enumerate(zip(passes, gathers, strict=True)):
        if gathering[u]:
            out.append(("unsharded", gather))
        out.append(op)
        if op[0] == "B" and (not no_sync or op[1][0] == last):
            out.append(("fsdp", ("scatter", *gather[1:])))
        out += [("fsdp", gathers[g]) for g in released.get(u, [])]
    return out


class _Point(NamedTuple):
    """A moment in one rank's stream: ``max(start_s, end of the last of deps + delay_s)``, or
    ``start_s`` without deps (then ``delay_s`` is 0). A named tuple: a 70B step makes half a
    million of them, and a tuple is made in half the time of a frozen dataclass."""

    deps: tuple[int, ...] = ()
    delay_s: float = 0.0
    start_s: float = 0.0


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block. Laying out a step allocates
    millions of lists and tuples, none of them in a cycle, and every full collection walks
    all of them: 1.5 s of a 70B step's 6 s layout (the Llama 3 70B scenario)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class _Template:
    """A collective's flows as plain columns, to be copied into the step as often as it runs.

    ``opens``: the flows that wait for no other flow their sender sends in the collective,
    where the sender's own progress must enter; ``senders``: their senders. ``sinks``: flows
    nothing in the collective waits for; the collective is over when they are.
    """

    names: tuple[str, ...]
    src: tuple[str, ...]
    dst: tuple[str, ...]
    columns: dict[str, array]  # float64 ("d") arrays, read once per template when the step is built
    dep_indptr: np.ndarray
    dep_indices: np.ndarray
    opens: tuple[int, ...]
    senders: frozenset[str]
    sinks: tuple[int, ...]
    open_senders: tuple[str, ...]  # the senders with opening flows
    open_sender: np.ndarray  # per opening flow (in ``opens`` order), its sender's position there
    shared: tuple[str, ...]  # each flow's shared budget (flowsim.budgets), "" for none

    @classmethod
    def of(cls, workload: Workload) -> _Template:
        src = tuple(workload.src)
        sender = {name: i for i, name in enumerate(dict.fromkeys(src))}
        sender_of = np.fromiter(map(sender.__getitem__, src), dtype=np.int64, count=len(src))
        counts = np.diff(workload.dep_indptr)
        owner = np.repeat(np.arange(len(workload), dtype=np.int64), counts)
        # A flow opens its sender's part when it waits for nothing the same sender sends.
        follows = np.zeros(len(workload), dtype=bool)
        follows[owner[sender_of[workload.dep_indices] == sender_of[owner]]] = True
        opens = tuple(np.flatnonzero(~follows).tolist())
        waited = np.zeros(len(workload), dtype=bool)
        waited[workload.dep_indices] = True
        columns = {name: array("d", np.asarray(getattr(workload, attr), dtype=np.float64).tobytes())
                   for name, attr in _COLUMNS.items()}
        position = {rank: k for k, rank in enumerate(dict.fromkeys(src[i] for i in opens))}
        names, dst = tuple(workload.names), tuple(workload.dst)
        dep_indptr, dep_indices = workload.dep_indptr, workload.dep_indices
        shared = tuple(workload.tags.get(SHARED_CAP_TAG, ("",) * len(workload)))
        sinks = np.flatnonzero(~waited)
        if sinks.size > 1:
            # One zero-byte flow marks the end: every rank that goes on after the collective
            # (and the next gradient bucket) waits for it, not for each of its sinks (an
            # NVLS all-reduce on 8 GPUs ends in 64 messages, which 8 ranks would each list).
            # It ends when the last sink does, so every time stays the same.
            end = f"{names[0].split('.')[0]}.done"
            taken = set(names)
            while end in taken:
                end += "_"
            receiver = dst[int(sinks[0])]
            names, src, dst, shared = (*names, end), (*src, receiver), (*dst, receiver), (*shared, "")
            for name, value in _END_COLUMNS.items():
                columns[name].append(value)
            dep_indices = np.concatenate([dep_indices, sinks])
            dep_indptr = np.append(dep_indptr, dep_indices.size)
            sinks = np.array([len(names) - 1])
        return cls(
            names, src, dst, columns, dep_indptr, dep_indices, opens, frozenset(position), tuple(sinks.tolist()),
            tuple(position), np.array([position[src[i]] for i in opens], dtype=np.int64), tuple(shared),
        )


# Numeric flow columns: name here -> Workload attribute.
_COLUMNS = {"size": "size_bytes", "start": "start_s", "delay": "delay_s", "overhead": "overhead_s",
            "weight": "weight", "cap": "cap_Bps"}
_TAGS = ("phase", "stage", "microbatch", "bucket")
# The columns of a collective's end marker (:meth:`_Template.of`): a zero-byte flow at once.
_END_COLUMNS = {"size": 0.0, "start": 0.0, "delay": 0.0, "overhead": 0.0, "weight": 1.0, "cap": math.inf}
# The moment of a sender that comes in with nothing to wait for.
_START = _Point()


class _Codes:
    """The distinct values of a string column (millions of flows, a few values each), each
    numbered when first seen. Values are looked up as their rows are laid out, so the numbers
    follow the order of appearance, as :func:`~flowsim.strings.coded` numbers them."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, value: str) -> int:
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.index)
        return code

    def codes_of(self, values: Sequence[str]) -> np.ndarray:
        return np.fromiter(map(self.code, values), dtype=np.int32, count=len(values))

    def column(self, codes: np.ndarray) -> CodedStrings:
        """The column of rows ``codes``, narrowed (a byte a row for a few values)."""
        return CodedStrings.narrowed(tuple(self.index), codes)


class _Flows:
    """The step's flows as they are laid out; every flow comes after those it waits for.

    Laying out copies nothing per flow: a collective placed is recorded as its template, its
    first row, name prefix and tags, and the moments its opening senders enter at; a marker
    as its row, rank, tags, name and moment. :meth:`workload` builds every column from these
    records at once, in NumPy (a 70B step's 3.3 million flows are 20,000 copies of one TP
    all-reduce and 164,000 markers, in the main)."""

    def __init__(self) -> None:
        self.n = 0  # flows so far
        self.src, self.dst = _Codes(), _Codes()
        self.shared = _Codes()  # each flow's shared budget, a tag where any flow has one
        self.tags = {key: _Codes() for key in _TAGS}
        # Flow names as heads and tails (flowsim.strings.JoinedStrings), each ending a head
        # with a dot: a copy's prefix and its template's names; a marker's name cut after its
        # last dot.
        self._heads, self._tails = _Codes(), _Codes()
        self._tag_sets: dict[tuple[str, ...], int] = {}  # per set of tags, its number
        self._tag_codes: list[tuple[int, ...]] = []  # per set of tags, its codes
        # Per template placed (by id, the template kept alive in _kinds): its number, and its
        # codes of src, dst, shared budget and name.
        self._kind_of: dict[int, int] = {}
        self._kinds: list[_Template] = []
        self._kind_codes: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        # Per copy: its template's number, first row, tag set and name prefix.
        self._copy_kind, self._copy_row, self._copy_tags, self._copy_head = (array("q") for _ in range(4))
        self._moments: list[_Point] = []  # per copy, each open sender's moment (template.open_senders)
        # Per marker: row, src, dst, tag set, head and tail of its name, moment.
        self._markers: list[tuple[int, int, int, int, int, int, _Point]] = []
        self._unnamed = 0
        self._compute_codes: dict[str, tuple[int, int, int]] = {}  # per rank: its unnamed markers' src, dst, head

    def __len__(self) -> int:
        return self.n

    def _tag_set(self, tags: tuple[str, ...]) -> int:
        number = self._tag_sets.get(tags)
        if number is None:
            number = self._tag_sets[tags] = len(self._tag_sets)
            self._tag_codes.append(tuple(self.tags[key].code(tag) for key, tag in zip(_TAGS, tags, strict=True)))
        return number

    def marker(self, rank: str, point: _Point, tags: tuple[str, ...], name: str | None = None) -> int:
        """A zero-byte flow from ``rank`` to itself, over the moment ``point``."""
        row = self.n
        if name is None:
            codes = self._compute_codes.get(rank)
            if codes is None:  # the rank's first: its codes looked up once, in the order of the others
                self.shared.code("")
                codes = self._compute_codes[rank] = (
                    self.src.code(rank), self.dst.code(rank), self._heads.code(f"compute.{rank}.")
                )
            src, dst, head = codes
            # Its tail is its number, str(k): coded as -1 - k, and the numbers' strings made
            # at once by _columns after the named tails (160,000 of them on a 70B step).
            tail = -1 - self._unnamed
            self._unnamed += 1
        else:
            head_text, dot, tail_text = name.rpartition(".")
            self.shared.code("")
            src, dst = self.src.code(rank), self.dst.code(rank)
            head, tail = self._heads.code(head_text + dot), self._tails.code(tail_text)
        self._markers.append((row, src, dst, self._tag_set(tags), head, tail, point))
        self.n = row + 1
        return row

    def advance(self, rank: str, point: _Point, seconds: float) -> _Point:
        """``point`` plus ``seconds`` of compute."""
        if not point.deps:
            return _Point((), 0.0, point.start_s + seconds)
        if point.start_s > 0:  # max(start, deps) + seconds needs the max taken first
            point = _Point((self.marker(rank, point, ("compute", "", "", "")),))
        return _Point(point.deps, point.delay_s + seconds, 0.0)

    def settle(self, rank: str, point: _Point) -> _Point:
        """The same moment with no delay, so that more dependencies can join it."""
        if point.deps and point.delay_s > 0:
            return _Point((self.marker(rank, point, ("compute", "", "", "")),))
        return point

    def join(self, rank: str, point: _Point, deps: Sequence[int], start_s: float = 0.0) -> _Point:
        """The moment both ``point`` and the end of ``deps`` (and ``start_s``) have passed."""
        point = self.settle(rank, point)
        return _Point(point.deps + tuple(deps), 0.0, max(point.start_s, start_s))

    def after(self, rank: str, point: _Point, sinks: Sequence[int], sent: bool) -> _Point:
        """Where ``rank``, at ``point`` when it entered a collective ending with ``sinks``, is
        once the collective is over. If it sent in it, ``point`` lies behind the sinks."""
        return _Point(tuple(sinks)) if sent else self.join(rank, point, sinks)

    def place(
        self, template: _Template, prefix: str, points: Mapping[str, _Point], tags: tuple[str, ...]
    ) -> list[int]:
        """Copy a collective in, names prefixed with ``prefix.`` (if any), each sender's
        opening flows waiting for its moment in ``points`` (settled first); returns the
        copy's sinks."""
        points = {rank: self.settle(rank, p) for rank, p in points.items()}
        kind = self._kind_of.get(id(template))
        if kind is None:
            kind = self._kind_of[id(template)] = len(self._kinds)
            self._kinds.append(template)
            self._kind_codes.append((self.src.codes_of(template.src), self.dst.codes_of(template.dst),
                                     self.shared.codes_of(template.shared), self._tails.codes_of(template.names)))
        row = self.n
        self._copy_kind.append(kind)
        self._copy_row.append(row)
        self._copy_tags.append(self._tag_set(tags))
        self._copy_head.append(self._heads.code(f"{prefix}." if prefix else ""))
        self._moments.extend([points.get(rank, _START) for rank in template.open_senders])
        self.n = row + len(template.names)
        return [row + k for k in template.sinks]

    def workload(self) -> Workload:
        """The flows laid out: each copy's rows its template's, its opening flows waiting for
        their sender's moment (before their own dependencies) and starting no earlier than
        it; the markers' rows between the copies."""
        # Built apart, so that the building's row-long scratch arrays are gone while the
        # workload is checked.
        names, src, dst, c, dependencies, tags = self._columns()
        return Workload.build(
            names, src, dst, c["size"], start_s=c["start"], dependency_csr=dependencies, delay_s=c["delay"],
            overhead_s=c["overhead"], weight=c["weight"], cap_Bps=c["cap"], tags=tags,
        )

    def _columns(self) -> tuple[JoinedStrings, CodedStrings, CodedStrings, dict[str, np.ndarray],
                                tuple[np.ndarray, np.ndarray], dict[str, CodedStrings]]:
        """:meth:`workload`'s names, src, dst, numeric columns, dependency CSR and tags."""
        n, templates = self.n, self._kinds
        sizes = np.array([len(t.names) for t in templates], dtype=np.int64)
        copy_kind = np.frombuffer(self._copy_kind, dtype=np.int64)
        copy_row = np.frombuffer(self._copy_row, dtype=np.int64)
        lengths = sizes[copy_kind]
        rows = _ranges(copy_row, lengths)  # the copies' rows
        marker_row, marker_src, marker_dst, marker_tags, marker_heads, marker_tails, points = (
            tuple(zip(*self._markers, strict=True)) if self._markers else ((),) * 7
        )
        marker_rows = np.array(marker_row, dtype=np.int64)
        # Each row's source: a row of the templates, end to end, then the markers.
        pick = np.empty(n, dtype=np.int64)
        pick[rows] = _ranges(_starts(sizes)[copy_kind], lengths)
        pick[marker_rows] = np.arange(marker_rows.size) + sizes.sum()

        def column(parts: list[np.ndarray], at_markers: object, dtype: type) -> np.ndarray:
            return np.concatenate([*parts, np.broadcast_to(np.asarray(at_markers, dtype=dtype), marker_rows.shape)],
                                  dtype=dtype)[pick]

        def per_copy(values: np.ndarray, at_markers: object) -> np.ndarray:
            out = np.empty(n, dtype=values.dtype)
            out[rows] = np.repeat(values, lengths)
            out[marker_rows] = at_markers
            return out

        c = {}
        for name in _COLUMNS:
            at_markers = [getattr(p, f"{name}_s") for p in points] if name in ("start", "delay") else _END_COLUMNS[name]
            c[name] = column([np.frombuffer(t.columns[name], dtype=np.float64) for t in templates], at_markers,
                             np.float64)

        # Each copy's opening flows and, per opening flow, its sender's moment. Row-long
        # scratch arrays are let go as soon as they are used: all held to the end, they raised
        # the traced peak of a 70B step's 3.3 million rows from 680 to 758 MiB.
        n_opens = np.array([len(t.opens) for t in templates], dtype=np.int64)
        n_senders = np.array([len(t.open_senders) for t in templates], dtype=np.int64)[copy_kind]
        opening = _ranges(_starts(n_opens)[copy_kind], n_opens[copy_kind])  # rows of the templates' opens, end to end
        copy_of = np.repeat(np.arange(copy_kind.size), n_opens[copy_kind])
        open_rows = copy_row[copy_of] + _cat([np.array(t.opens, dtype=np.int64) for t in templates])[opening]
        moment = _starts(n_senders)[copy_of] + _cat([t.open_sender for t in templates])[opening]
        del opening, copy_of
        moments = self._moments
        moment_start = np.fromiter((p.start_s for p in moments), dtype=np.float64, count=len(moments))
        c["start"][open_rows] = np.maximum(c["start"][open_rows], moment_start[moment])
        del moment_start

        # Dependencies, row by row: an opening flow's moment, then the flow's own (a copied
        # flow's within its copy, a marker's its moment's).
        moment_counts = np.fromiter(map(len, (p.deps for p in moments)), dtype=np.int64, count=len(moments))
        counts = moment_counts[moment]
        before = np.zeros(n, dtype=np.int64)
        before[open_rows] = counts
        marker_counts = np.fromiter(map(len, (p.deps for p in points)), dtype=np.int64, count=len(points))
        own_counts = column([np.diff(t.dep_indptr) for t in templates], marker_counts, np.int64)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(before + own_counts, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        own_at = _ranges(indptr[:-1] + before, own_counts)
        del before
        dep_sizes = np.array([t.dep_indices.size for t in templates], dtype=np.int64)
        own = _cat([*(t.dep_indices for t in templates),
                    np.fromiter(itertools.chain.from_iterable(p.deps for p in points), dtype=np.int64)])
        firsts = [t.dep_indptr[:-1] + first for t, first in zip(templates, _starts(dep_sizes), strict=True)]
        own_deps = own[_ranges(column(firsts, _starts(marker_counts) + dep_sizes.sum(), np.int64), own_counts)]
        del own, firsts
        own_deps += np.repeat(per_copy(copy_row, 0), own_counts)
        indices[own_at] = own_deps
        del own_at, own_deps, own_counts
        moment_deps = np.fromiter(itertools.chain.from_iterable(p.deps for p in moments), dtype=np.int64)
        indices[_ranges(indptr[open_rows], counts)] = moment_deps[_ranges(_starts(moment_counts)[moment], counts)]
        del open_rows, moment, counts, moment_deps
        # Frozen, the fresh arrays become the workload's own (Workload.build copies writeable ones).
        for frozen in (indptr, indices, *c.values()):
            frozen.flags.writeable = False

        def codes(part: int, at_markers: object) -> np.ndarray:  # a column of the templates' codes
            return column([codes[part] for codes in self._kind_codes], at_markers, np.int32)

        def unnamed_after(tails: np.ndarray) -> np.ndarray:  # unnamed marker k's tail after the named ones
            return np.where(tails < 0, len(self._tails.index) - 1 - tails, tails)

        names = JoinedStrings(
            tuple(self._heads.index), per_copy(np.frombuffer(self._copy_head, dtype=np.int64), marker_heads),
            (*self._tails.index, *map(str, range(self._unnamed))), unnamed_after(codes(3, marker_tails)),
        )
        tag_codes = np.array(self._tag_codes, dtype=np.int32).reshape(-1, len(_TAGS))
        tag_set = per_copy(np.frombuffer(self._copy_tags, dtype=np.int64), marker_tags)
        tags = {key: values.column(tag_codes[tag_set, k]) for k, (key, values) in enumerate(self.tags.items())}
        if any(self.shared.index):
            tags[SHARED_CAP_TAG] = self.shared.column(codes(2, self.shared.index.get("", 0)))
        src, dst = self.src.column(codes(0, marker_src)), self.dst.column(codes(1, marker_dst))
        return names, src, dst, c, (indptr, indices), tags


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    """``parts`` end to end (int64)."""
    return np.concatenate(parts, dtype=np.int64) if parts else np.empty(0, dtype=np.int64)


def _starts(lengths: np.ndarray) -> np.ndarray:
    """Where each of consecutive pieces of ``lengths`` starts."""
    return np.cumsum(lengths) - lengths


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``starts[i], starts[i] + 1, ..., starts[i] + lengths[i] - 1`` for each ``i``, one
    after another."""
    return concatenated_ranges(np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64))


class _PipelineBuilder:
    """Walks every stage replica through its schedule, laying out flows as it goes.

    Each rank's stream is a :class:`_Point`. A replica (the TP group of one stage and DP
    index) runs its ops in order; at a blocking call it posts its transfers and waits until
    the peers have posted theirs. Gradient buckets wait likewise until every rank of their
    DP group has produced them.
    """

    def __init__(
        self,
        layout: ParallelLayout,
        forward: np.ndarray,
        backward: np.ndarray,
        grads: np.ndarray,
        n_microbatches: int,
        schedule: str,
        activation_bytes: float,
        tp_all_reduce_bytes: float,
        bucket_bytes: float,
        plan: Callable[..., Workload],
        algorithm: str | None,
        tp_algorithm: str | None,
        experts: _Experts,
        sequence_parallel: bool = False,
        expert_grads: np.ndarray | None = None,
        distributed_optimizer: bool = False,
        virtual_stages: int = 1,
        fsdp: bool = False,
        shards: dict[tuple[int, int], list[tuple]] | None = None,
        cp_kv_bytes: float = 0.0,
        reshard_after_forward: bool = True,
        no_sync: bool = False,
        param_to_grad_bytes: float = 1.0,
    ) -> None:
        self.layout = layout
        self.v = virtual_stages
        # PyTorch FSDP's fully sharded parameters (ZeRO-3), a unit per layer: gathered before
        # each pass, gradients reduce-scattered after each backward (no buckets).
        self.fsdp = fsdp and layout.dp > 1
        self.grads = grads
        # Parameter bytes gathered per gradient byte reduced (BF16 parameters, FP32 gradients: 0.5).
        self.param_to_grad_bytes = param_to_grad_bytes
        # Per (stage, TP index): the groups FSDP shards over (the DP group, or its ranks in
        # each server with hybrid sharding).
        self.shards = shards or {}
        # Whether a layer's gathered parameters are freed after its forward and gathered
        # again for its backward (FULL_SHARD, HYBRID_SHARD), or kept (SHARD_GRAD_OP).
        self.reshard_after_forward = reshard_after_forward
        # Gradient accumulation under FSDP's no_sync(): gradients reduced after the last
        # microbatch only.
        self.no_sync = no_sync
        # Context parallelism: the keys and values a rank sends on per attention step, and
        # the ends of each step's transfer by its receiver.
        self.cp_kv_bytes = cp_kv_bytes
        self.cp_arrived: dict[tuple, list[int]] = {}
        self.forward = forward
        self.backward = backward
        self.m = n_microbatches
        self.schedule = schedule
        self.activation_bytes = activation_bytes
        self.tp_bytes = tp_all_reduce_bytes if layout.tp > 1 else 0.0
        # Each block's TP calls: an all-reduce after it, or an all-gather before and a
        # reduce-scatter after (sequence parallelism); none without TP bytes.
        self.tp_before, self.tp_after = (
            ("", "") if self.tp_bytes == 0 else ("all_gather", "reduce_scatter") if sequence_parallel
            else ("", "all_reduce"))
        self.plan = plan
        self.algorithm = algorithm
        self.tp_algorithm = tp_algorithm
        self.per_stage = forward.size // (layout.pp * virtual_stages)  # layers per virtual stage
        self.flows = _Flows()
        self.at = {rank: _Point() for rank in layout.ranks}
        self._templates: dict[tuple, _Template] = {}
        # Per replica (stage, DP index): its TP group.
        self.tp_groups = {(s, d): layout.tp_group(s, d) for s in range(layout.pp) for d in range(layout.dp)}
        # Per stage: the global layer that closes each non-empty bucket -> (bucket index, bytes).
        # The same for the experts' gradients, which the expert-data-parallel group reduces
        # (none where each rank holds experts no other rank does: ep = dp).
        held = np.zeros_like(grads) if expert_grads is None else expert_grads
        self.closing = self._closing(np.zeros_like(grads) if self.fsdp else grads - held, bucket_bytes)
        self.expert_closing = self._closing(held if layout.dp // layout.ep > 1 else np.zeros_like(grads), bucket_bytes)
        self.bucket_waiting: dict[tuple, dict[str, _Point]] = {}
        # Per gradient stream, (stage, TP index) or (stage, TP index, EP position) for the
        # experts': the last bucket's ends.
        self.bucket_sinks: dict[tuple, list[int]] = {}
        # With the distributed optimizer: buckets reduce-scattered, and per stream the ends
        # of each bucket's parameter all-gather by the bucket's first layer (forward order).
        self.grad_call = "reduce_scatter" if distributed_optimizer and layout.dp > 1 else "all_reduce"
        self.gathered: dict[tuple, dict[int, list[int]]] = {}
        self.posted: dict[tuple, _Point] = {}
        self.arrived: dict[tuple, list[int]] = {}
        self.experts = experts
        self.moe = experts.layers & (layout.ep > 1 and experts.bytes > 0)
        self.ep_waiting: dict[tuple, set[int]] = {}
        self.ep_done: set[tuple] = set()
        # (stage, 0 | 1 for forward | backward, the moment the block ends, its seconds).
        self.compute_log: list[tuple[int, int, _Point, float]] = []
        # FSDP: replicas (DP indices) at each of a stage's gathers and reduce-scatters, those
        # laid out, each one's ends per TP index, and per stream its last call's ends.
        self.fsdp_waiting: dict[tuple, set[int]] = {}
        self.fsdp_sinks: dict[tuple, list[int]] = {}
        self.fsdp_last: dict[tuple, list[int]] = {}

    def _closing(self, grads: np.ndarray, bucket_bytes: float) -> list[dict[int, tuple[int, float]]]:
        """Per stage: the global layer whose backward closes each non-empty bucket of
        ``grads`` -> (bucket index, bytes). Each of a stage's model chunks has buckets of
        its own (Megatron wraps each chunk in its own DDP module), numbered on from the
        previous chunk's."""
        pp = self.layout.pp
        closing = []
        for s in range(pp):
            closed: dict[int, tuple[int, float]] = {}
            for c in range(self.v):
                first = (c * pp + s) * self.per_stage
                buckets = _buckets(grads[first : first + self.per_stage], bucket_bytes)
                for layer, size in buckets:
                    if size > 0:
                        closed[first + layer] = (len(closed), size)
            closing.append(closed)
        return closing

    def template(self, collective: str, group: tuple[str, ...], size: float, algorithm: str | None,
                 communicator: tuple[str, ...] | None = None) -> _Template:
        """The flows of one call, laid out once per distinct call; ``communicator``: the NCCL
        communicator a send goes in (default its pair)."""
        key = (collective, group, size, algorithm, communicator)
        if key not in self._templates:
            self._templates[key] = _Template.of(self.plan(collective, group, size, algorithm, communicator))
        return self._templates[key]

    def lay_out(self) -> None:
        """Every rank's stream through the schedule, then one ``end.{rank}`` marker per rank."""
        layout = self.layout
        replicas = [(s, d) for s in range(layout.pp) for d in range(layout.dp)]
        if self.grad_call == "reduce_scatter":
            self.gather_parameters()
        ops = {r: self.expand(_stage_ops(self.schedule, r[0], layout.pp, self.m, self.v)) for r in replicas}
        if self.fsdp:
            ops = {r: _fsdp_ops(o, self.reshard_after_forward, self.no_sync) for r, o in ops.items()}
        next_op = dict.fromkeys(replicas, 0)
        waiting: set[tuple[int, int]] = set()
        while any(next_op[r] < len(ops[r]) for r in replicas):
            progressed = False
            for replica in replicas:
                while next_op[replica] < len(ops[replica]):
                    kind, what = ops[replica][next_op[replica]]
                    if kind == "post":
                        if replica not in waiting:
                            self.post(replica, what)
                            waiting.add(replica)
                        if not self.received(replica, what):
                            break
                        waiting.discard(replica)
                    elif kind == "send":
                        self.send(replica, what)
                    elif kind in ("recv", "cprecv"):
                        # A pipeline receive waits for its transfer, context parallelism's for
                        # the keys and values of its ring step.
                        arrived = self.received(replica, (what,)) if kind == "recv" else self.cp_received(replica, what)
                        if not arrived:
                            waiting.add(replica)
                            break
                        waiting.discard(replica)
                    elif kind == "ep":
                        if replica not in waiting:
                            self.ep_arrive(replica, what)
                            waiting.add(replica)
                        if self.ep_key(replica, what) not in self.ep_done:
                            break
                        waiting.discard(replica)
                    elif kind == "fsdp":
                        if replica not in waiting:
                            self.fsdp_arrive(replica, what)
                            waiting.add(replica)
                        if (replica[0], *what) not in self.fsdp_sinks:
                            break
                        waiting.discard(replica)
                    elif kind == "unsharded":
                        self.unsharded(replica, what)
                    else:
                        self.compute(replica, kind, *what)
                    next_op[replica] += 1
                    progressed = True
            if not progressed:
                raise RuntimeError(f"the {self.schedule} schedule ({self.v} virtual stages a rank) deadlocked: "
                               f"{sorted(waiting)} wait for their peers")
        for g, rank in enumerate(layout.ranks):
            stage, tp_index, d = g // (layout.tp * layout.dp), g % layout.tp, g // layout.tp % layout.dp
            sinks = [*self.bucket_sinks.get((stage, tp_index), []),
                     *self.bucket_sinks.get((stage, tp_index, d % layout.ep), [])]
            point = self.join_any(rank, self.at[rank], sinks)
            self.flows.marker(rank, point, ("compute", str(stage), "", ""), name=f"end.{rank}")

    def join_any(self, rank: str, point: _Point, deps: Sequence[int]) -> _Point:
        return self.flows.join(rank, point, deps) if deps else point

    # --- compute -------------------------------------------------------------------------

    def expand(self, ops: list[tuple]) -> list[tuple]:
        """``ops`` with each pass cut at its expert all-to-alls: ``(kind, (microbatch,
        blocks))`` runs ``blocks`` (``(layer, "attn" | "mlp")`` in order), ``("ep", (kind,
        microbatch, layer, "dispatch" | "combine"))`` is one all-to-all over the EP group."""
        out: list[tuple] = []
        for op in ops:
            if op[0] not in ("F", "B"):
                out.append(op)
                continue
            kind, microbatch, vs = op
            layers = range(vs * self.per_stage, (vs + 1) * self.per_stage)
            if self.fsdp:  # a pass op per layer, between which FSDP gathers and waits
                for layer in layers if kind == "F" else reversed(layers):
                    out.append((kind, (microbatch, ((layer, "attn"), (layer, "mlp")) if kind == "F"
                                       else ((layer, "mlp"), (layer, "attn")))))
                continue
            blocks: list[tuple[int, str]] = []
            cp = self.layout.cp
            for layer in layers if kind == "F" else reversed(layers):
                order: tuple[str, ...] = ("attn", "dispatch", "mlp", "combine")
                if kind == "B":
                    order = order[::-1]
                for block in order:
                    if block == "attn" and cp > 1:
                        # cp steps, each after the keys and values of the one before arrived.
                        for k in range(cp):
                            if k:
                                out.append((kind, (microbatch, tuple(blocks))))
                                out.append(("cprecv", (kind, microbatch, layer, k - 1)))
                                blocks = []
                            blocks.append((layer, f"attn@{k}"))
                    elif block in ("attn", "mlp"):
                        blocks.append((layer, block))
                    elif self.moe[layer]:
                        if blocks:
                            out.append((kind, (microbatch, tuple(blocks))))
                            blocks = []
                        out.append(("ep", (kind, microbatch, layer, block)))
            if blocks:
                out.append((kind, (microbatch, tuple(blocks))))
        return out

    def compute(
        self, replica: tuple[int, int], kind: str, microbatch: int, blocks: tuple[tuple[int, str], ...]
    ) -> None:
        """The attention and MLP ``blocks`` of a forward or backward pass of ``microbatch``,
        each half of its layer's time and followed by its TP all-reduce (with sequence
        parallelism: after its TP all-gather and followed by its TP reduce-scatter)."""
        stage, d = replica
        times = self.forward if kind == "F" else self.backward
        side = 0 if kind == "F" else 1
        # Bound once: this loop runs for every block of every rank (1.3 million on a 70B step).
        group, at, advance, log = self.tp_groups[replica], self.at, self.flows.advance, self.compute_log.append
        before, after = self.tp_before, self.tp_after
        first_pass = kind == "F" and microbatch == 0 and bool(self.gathered)
        cp = self.layout.cp
        for layer, block in blocks:
            seconds = times[layer] / 2
            label = f"mb{microbatch}.{kind}.l{layer}.{block}"
            first = last = True
            if len(block) > 4:  # "attn@k": step k of the attention block's context-parallel ring
                k = int(block[5:])
                first, last, block, seconds = k == 0, k == cp - 1, "attn", seconds / cp
            if first_pass and first:
                self.wait_for_parameters(replica, layer, block)
            if before and first:
                self.tp_call(replica, before, label, microbatch)
            if not last:  # the step's keys and values go on to the next rank as it starts
                self.cp_send(replica, kind, microbatch, layer, k)
            for rank in group:
                at[rank] = point = advance(rank, at[rank], seconds)
                log((stage, side, point, seconds))
            if after and last:
                self.tp_call(replica, after, label, microbatch)
            # A layer's backward ends with its attention block: its gradients are ready; its
            # experts' once its MLP block's backward has ended.
            if kind == "B" and microbatch == self.m - 1 and self.layout.dp > 1 and last:
                if block == "attn" and layer in self.closing[stage]:
                    self.bucket_ready(replica, *self.closing[stage][layer])
                elif block == "mlp" and layer in self.expert_closing[stage]:
                    self.bucket_ready(replica, *self.expert_closing[stage][layer], experts=True)

    # --- context parallelism -------------------------------------------------------------

    def cp_send(self, replica: tuple[int, int], kind: str, microbatch: int, layer: int, k: int) -> None:
        """Each rank of the replica sends the keys and values of attention step ``k`` (with
        their gradients in the backward pass) to the next rank of its context-parallel ring,
        without waiting."""
        stage, d = replica
        cp = self.layout.cp
        after = d - d % cp + (d + 1) % cp
        size = self.cp_kv_bytes * (2 if kind == "B" else 1)
        for t in range(self.layout.tp):
            src, dst = self.layout.rank(t, stage, d), self.layout.rank(t, stage, after)
            self.at[src] = self.flows.settle(src, self.at[src])
            template = self.template("send", (src, dst), size, None, self.layout.cp_group(t, stage, d))
            self.cp_arrived[(stage, after, t, kind, microbatch, layer, k)] = self.flows.place(
                template, f"cp.s{stage}.d{d}.t{t}.mb{microbatch}.{kind}.l{layer}.step{k}", {src: self.at[src]},
                ("cp", str(stage), str(microbatch), ""),
            )

    def cp_received(self, replica: tuple[int, int], what: tuple) -> bool:
        """Whether the keys and values of step ``what`` = ``(pass, microbatch, layer, k)``
        have been sent to the replica's ranks; if so, each waits for their arrival."""
        stage, d = replica
        keys = [(stage, d, t, *what) for t in range(self.layout.tp)]
        if any(key not in self.cp_arrived for key in keys):
            return False
        for t, key in enumerate(keys):
            rank = self.layout.rank(t, stage, d)
            self.at[rank] = self.flows.join(rank, self.at[rank], self.cp_arrived.pop(key))
        return True

    # --- expert all-to-alls --------------------------------------------------------------

    def ep_key(self, replica: tuple[int, int], what: tuple) -> tuple:
        stage, d = replica
        return (stage, d // self.layout.ep, *what)

    def ep_arrive(self, replica: tuple[int, int], what: tuple) -> None:
        """The replica reached an expert all-to-all; once its whole EP group has, it is laid
        out, one per TP index, and every rank of the group goes on when it has arrived."""
        key = self.ep_key(replica, what)
        self.ep_waiting.setdefault(key, set()).add(replica[1])
        if len(self.ep_waiting[key]) < self.layout.ep:
            return
        del self.ep_waiting[key]
        stage, d = replica
        kind, microbatch, layer, which = what
        for t in range(self.layout.tp):
            group = self.layout.ep_group(t, stage, d)
            template = self.expert_template(group, which)
            for rank in group:
                self.at[rank] = self.flows.settle(rank, self.at[rank])
            sinks = self.flows.place(
                template, f"ep.s{stage}.g{d // self.layout.ep}.t{t}.mb{microbatch}.{kind}.l{layer}.{which}",
                {r: self.at[r] for r in group}, ("ep", str(stage), str(microbatch), ""),
            )
            for rank in group:
                self.at[rank] = self.flows.after(rank, self.at[rank], sinks, rank in template.senders)
        self.ep_done.add(key)

    # --- fully sharded data parallelism --------------------------------------------------

    def fsdp_arrive(self, replica: tuple[int, int], what: tuple) -> None:
        """The replica reached an FSDP call ``(call, microbatch, layer, pass)``: the gather of
        a layer's parameters before its pass, or the reduce-scatter of its gradients after its
        backward (with hybrid sharding followed by the all-reduce of each reduced shard across
        the shard groups). Once the whole DP group has, it is laid out per TP index and shard
        group, after that group's previous call on the stream, from each rank's moment (the
        compute goes on)."""
        stage, d = replica
        key = (stage, *what)
        self.fsdp_waiting.setdefault(key, set()).add(d)
        if len(self.fsdp_waiting[key]) < self.layout.dp:
            return
        del self.fsdp_waiting[key]
        call, microbatch, layer, side = what
        size = float(self.grads[layer]) * (self.param_to_grad_bytes if call == "gather" else 1.0)
        collective = "all_gather" if call == "gather" else "reduce_scatter"
        phase = "params" if call == "gather" else "gradients"
        tags = (phase, str(stage), str(microbatch), f"l{layer}")
        for t in range(self.layout.tp):
            groups = self.shards[(stage, t)]
            ends: dict[str, list[int]] = {}  # per rank: the ends of its call
            for g, group in enumerate(groups):
                stream = (stage, t, call, g)
                if size > 0:
                    previous = self.fsdp_last.get(stream, [])
                    points = {r: self.join_any(r, self.at[r], previous) for r in group}
                    template = self.template(collective, group, size, self.algorithm)
                    prefix = f"fsdp.s{stage}.t{t}" + (f".g{g}" if len(groups) > 1 else "")
                    sinks = self.flows.place(template, f"{prefix}.mb{microbatch}.{side}.l{layer}.{call}", points, tags)
                    self.fsdp_last[stream] = sinks
                    ends.update(dict.fromkeys(group, sinks))
            if call == "scatter" and size > 0 and len(groups) > 1:
                # Each reduced shard, all-reduced over the ranks that hold it in every group,
                # on a stream of its own once its reduce-scatter is done.
                for j, holders in enumerate(zip(*groups, strict=True)):
                    stream = (stage, t, "replicate", j)
                    previous = self.fsdp_last.get(stream, [])
                    points = {r: _Point((*ends[r], *previous)) for r in holders}
                    template = self.template("all_reduce", holders, size / len(groups[0]), self.algorithm)
                    sinks = self.flows.place(
                        template, f"fsdp.s{stage}.t{t}.r{j}.mb{microbatch}.{side}.l{layer}.replicate", points, tags
                    )
                    self.fsdp_last[stream] = sinks
                    ends.update(dict.fromkeys(holders, sinks))
            for rank in self.layout.dp_group(t, stage):
                self.fsdp_sinks[(*key, t, rank)] = ends.get(rank, [])
            if call == "scatter" and size > 0:  # the step ends after the last of them (in order)
                self.bucket_sinks[(stage, t)] = sorted({f for sinks in ends.values() for f in sinks})
        self.fsdp_sinks[key] = []

    def unsharded(self, replica: tuple[int, int], what: tuple) -> None:
        """Each rank of the replica waits for the gather ``what`` before the pass it serves."""
        stage, _ = replica
        for t, rank in enumerate(self.tp_groups[replica]):
            sinks = self.fsdp_sinks[(stage, *what, t, rank)]
            if sinks:
                self.at[rank] = self.flows.join(rank, self.at[rank], sinks)

    def expert_template(self, group: tuple[str, ...], which: str) -> _Template:
        """The all-to-all over ``group`` with every flow sized by the share of tokens of the
        expert rank it goes to (dispatch) or comes from (combine)."""
        key = ("ep", group, which)
        if key not in self._templates:
            workload = self.plan("all_to_all", group, self.experts.bytes, None)
            position = {rank: i for i, rank in enumerate(group)}
            expert = workload.dst if which == "dispatch" else workload.src
            share = self.experts.shares(len(group))
            scale = np.array([len(group) * share[position[r]] for r in expert])
            self._templates[key] = _Template.of(replace(workload, size_bytes=workload.size_bytes * scale))
        return self._templates[key]

    def tp_call(self, replica: tuple[int, int], collective: str, label: str, microbatch: int) -> None:
        """One blocking ``collective`` of the TP bytes over the replica's TP group: each rank
        goes on once the call has finished (where it sent), or its own part has."""
        stage, d = replica
        group = self.tp_groups[replica]
        try:
            template = self.template(collective, group, self.tp_bytes, self.tp_algorithm)
        except InputError as err:  # an algorithm the TP group cannot run: name the argument that chose it
            if self.tp_algorithm in (None, "auto"):
                raise
            raise InputError(f"tp_algorithm = {self.tp_algorithm!r}: {err}") from None
        at, settle = self.at, self.flows.settle
        points = {}
        for rank in group:
            points[rank] = at[rank] = settle(rank, at[rank])
        sinks = self.flows.place(template, f"tp.s{stage}.d{d}.{label}", points, ("tp", str(stage), str(microbatch), ""))
        senders, done = template.senders, _Point(tuple(sinks))  # where every rank that sent goes on
        for rank in group:
            at[rank] = done if rank in senders else self.flows.after(rank, at[rank], sinks, False)

    # --- gradient buckets ----------------------------------------------------------------

    def bucket_ready(self, replica: tuple[int, int], bucket: int, size: float, experts: bool = False) -> None:
        """The replica's ranks have produced ``bucket`` (of their experts' gradients with
        ``experts``); once the whole DP group (the expert-data-parallel group) has, it is
        all-reduced (reduce-scattered with the distributed optimizer) after the group's
        previous bucket."""
        stage, d = replica
        layout = self.layout
        position = d % layout.ep if experts else None
        for t in range(layout.tp):
            stream, group = self.stream(stage, t, position)
            key = (*stream, bucket)
            rank = layout.rank(t, stage, d)
            self.bucket_waiting.setdefault(key, {})[rank] = self.at[rank]
            if len(self.bucket_waiting[key]) < len(group):
                continue
            ready = self.bucket_waiting.pop(key)
            previous = self.bucket_sinks.get(stream, [])
            points = {r: self.join_any(r, p, previous) for r, p in ready.items()}
            template = self.template(self.grad_call, group, size, self.algorithm)
            label = f"experts{position}.bucket{bucket}" if experts else f"bucket{bucket}"
            tags = ("gradients", str(stage), str(self.m - 1), f"e{position}.{bucket}" if experts else str(bucket))
            self.bucket_sinks[stream] = self.flows.place(template, f"dp.s{stage}.t{t}.{label}", points, tags)

    def stream(self, stage: int, t: int, position: int | None = None) -> tuple[tuple, tuple[str, ...]]:
        """A gradient stream's key (as :attr:`bucket_sinks`') and group: the DP group of TP
        index ``t`` at ``stage``, or with ``position`` the expert-data-parallel group of the
        experts at that EP position."""
        if position is None:
            return (stage, t), self.layout.dp_group(t, stage)
        return (stage, t, position), self.layout.edp_group(t, stage, position)

    def streams(self) -> Iterator[tuple[tuple, tuple[str, ...], dict[int, tuple[int, float]]]]:
        """Each gradient stream's key, group (:meth:`stream`) and buckets (by the layer that
        closes them)."""
        layout = self.layout
        for stage in range(layout.pp):
            for t in range(layout.tp):
                yield *self.stream(stage, t), self.closing[stage]
                if self.expert_closing[stage]:
                    for p in range(layout.ep):
                        yield *self.stream(stage, t, p), self.expert_closing[stage]

    def gather_parameters(self) -> None:
        """The distributed optimizer's parameter all-gathers, at the start of the step: per
        gradient stream, its buckets' in forward order, one after another."""
        for stream, group, closing in self.streams():
            previous: list[int] = []
            gathered = self.gathered[stream] = {}
            # A bucket closes at its first layer in forward order (buckets fill backwards).
            stage, t = stream[:2]
            experts = f"experts{stream[2]}." if len(stream) > 2 else ""
            for layer in sorted(closing):
                bucket, size = closing[layer]
                points = {r: _Point(tuple(previous)) for r in group} if previous else {}
                template = self.template("all_gather", group, size * self.param_to_grad_bytes, self.algorithm)
                tag = f"e{stream[2]}.{bucket}" if experts else str(bucket)
                previous = gathered[layer] = self.flows.place(
                    template, f"params.s{stage}.t{t}.{experts}bucket{bucket}", points, ("params", str(stage), "0", tag)
                )

    def wait_for_parameters(self, replica: tuple[int, int], layer: int, block: str) -> None:
        """Before the first forward of ``layer``'s ``block``: each rank of the replica waits
        for its parameters' all-gather where a bucket starts there (the attention block
        for the stage's own parameters, the MLP block for its experts')."""
        stage, d = replica
        for t, rank in enumerate(self.tp_groups[replica]):
            stream, _ = self.stream(stage, t, None if block == "attn" else d % self.layout.ep)
            sinks = self.gathered.get(stream, {}).get(layer)
            if sinks:
                self.at[rank] = self.flows.join(rank, self.at[rank], sinks)

    # --- pipeline transfers --------------------------------------------------------------

    def ends(self, transfer: _Transfer, d: int, t: int) -> tuple[str, str]:
        """Sender and receiver of ``transfer`` between the ranks of TP index ``t`` and DP index
        ``d`` (the ranks of the stages that hold the boundary's two virtual stages)."""
        kind, _, boundary = transfer
        pp = self.layout.pp
        before, after = self.layout.rank(t, boundary % pp, d), self.layout.rank(t, (boundary + 1) % pp, d)
        return (before, after) if kind == "act" else (after, before)

    def transfer_flows(self, transfer: _Transfer, d: int, t: int, start: _Point) -> list[int]:
        """Lay ``transfer`` out between the ranks of TP index ``t`` and DP index ``d``, its
        sender starting at ``start``; its flows' ends."""
        src, dst = self.ends(transfer, d, t)
        kind, microbatch, boundary = transfer
        sender_stage = (boundary if kind == "act" else boundary + 1) % self.layout.pp
        # In the pipeline group's communicator (its stages' ranks), as Megatron-LM
        # sends ([MEGATRON] in docs/hardware.md).
        pipeline = tuple(self.layout.rank(t, s, d) for s in range(self.layout.pp))
        template = self.template("send", (src, dst), self.activation_bytes, None, pipeline)
        # Boundaries between virtual stages with interleaving ("v"), else between stages ("s").
        where = "s" if self.v == 1 else "v"
        return self.flows.place(
            template, f"pp.{kind}.mb{microbatch}.{where}{boundary}to{boundary + 1}.d{d}.t{t}", {src: start},
            ("pp", str(sender_stage), str(microbatch), ""),
        )

    def send(self, replica: tuple[int, int], transfer: _Transfer) -> None:
        """The replica's ranks send ``transfer`` without waiting: it starts when they are there
        (the receiver posted its receive in advance) and they go on."""
        stage, d = replica
        for t in range(self.layout.tp):
            rank = self.layout.rank(t, stage, d)
            self.at[rank] = self.flows.settle(rank, self.at[rank])
            self.arrived[(*transfer, d, t)] = self.transfer_flows(transfer, d, t, self.at[rank])

    def post(self, replica: tuple[int, int], transfers: tuple[_Transfer, ...]) -> None:
        """The replica's ranks reach a blocking call; transfers whose peer is there already
        start."""
        stage, d = replica
        for t in range(self.layout.tp):
            rank = self.layout.rank(t, stage, d)
            self.at[rank] = self.flows.settle(rank, self.at[rank])
            for transfer in transfers:
                key = (*transfer, d, t)
                if key not in self.posted:
                    self.posted[key] = self.at[rank]
                    continue
                peer = self.posted.pop(key)
                both = self.flows.join(rank, self.at[rank], peer.deps, peer.start_s)
                self.arrived[key] = self.transfer_flows(transfer, d, t, both)

    def received(self, replica: tuple[int, int], transfers: tuple[_Transfer, ...]) -> bool:
        """Whether every transfer of the replica's call has been laid out; if so, its ranks
        go on once they have arrived."""
        stage, d = replica
        keys = [[(*transfer, d, t) for transfer in transfers] for t in range(self.layout.tp)]
        if any(key not in self.arrived for row in keys for key in row):
            return False
        for t, row in enumerate(keys):
            rank = self.layout.rank(t, stage, d)
            sent = any(self.ends(transfer, d, t)[0] == rank for transfer in transfers)
            sinks = [f for key in row for f in self.arrived[key]]
            self.at[rank] = self.flows.after(rank, self.at[rank], sinks, sent)
        return True


