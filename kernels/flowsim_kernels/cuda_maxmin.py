"""Batched weighted max-min fair rates on an NVIDIA GPU (numba-cuda), one thread block per instance.

Import this module only when the CUDA backend is asked for: it needs the ``numba-cuda``
package (``pip install 'flowsim[cuda]'``), which makes ``numba.cuda`` its own target.
"""

import math

import numpy as np
from numba import cuda

#: Largest thread block the launcher uses; a power of two.
MAX_THREADS_PER_BLOCK = 256

#: Argument types of every kernel here, for compiling them ahead of time (to PTX, say)
#: without a GPU. They are the types the launcher passes.
KERNEL_SIGNATURES = {
    "max_min_fair_batch_kernel": (
        "void(int64[::1], int64[::1], int64[::1], int64[::1], "
        "float64[:, ::1], float64[:, ::1], float64[:, ::1], float64, "
        "float64[:, ::1], boolean[:, ::1], float64[:, ::1], boolean[:, ::1], float64[:, ::1])"
    ),
}


@cuda.jit(cache=True)
def max_min_fair_batch_kernel(
    flow_link_indptr,
    flow_link_indices,
    link_flow_indptr,
    link_flow_indices,
    capacity_Bps,
    weight,
    cap_Bps,
    tie_rel_tol,
    level,
    ready,
    bound,
    frozen,
    rate_Bps,
):
    """Weighted max-min fair rates of a batch of instances sharing their routes; block ``i`` solves instance ``i``.

    Parameters
    ----------
    flow_link_indptr : int64[n_flows + 1]
    flow_link_indices : int64[n_incidences]
        Flow -> link CSR, the same in every instance. Not mutated.
    link_flow_indptr : int64[n_links + 1]
    link_flow_indices : int64[n_incidences]
        Its transpose: the flows crossing each link. Not mutated.
    capacity_Bps : float64[n_instances, n_links]
        Link capacities (B/s), finite and > 0. Not mutated.
    weight : float64[n_instances, n_flows]
        Flow weights, finite and > 0. Not mutated.
    cap_Bps : float64[n_instances, n_flows]
        Flow rate caps (B/s), > 0, ``inf`` for none; a flow with no link has a finite cap.
        Not mutated.
    tie_rel_tol : float64
        Levels within this relative distance of each other count as equal.
    level : float64[n_instances, n_links]
        Work: each link's fair level (``inf`` once no unfrozen flow crosses it). Mutated.
    ready : bool[n_instances, n_links]
        Work: whether a link saturates in the current round. Mutated.
    bound : float64[n_instances, n_flows]
        Work: each unfrozen flow's lowest level over its links and its cap. Mutated.
    frozen : bool[n_instances, n_flows]
        Work: whether a flow's rate is final. Mutated.
    rate_Bps : float64[n_instances, n_flows]
        Output: each flow's rate (B/s). Mutated.

    Notes
    -----
    Progressive filling in data-parallel rounds that freeze every *locally* lowest level at
    once, not only the global lowest. A link's level is ``residual / sum of unfrozen
    weights``; a flow's bound is the lowest of its links' levels and its cap level
    ``cap / weight``. Each round, with barriers between the steps:

    1. every link with unfrozen flows recomputes its residual and weight sum from its flows
       (in CSR order, so the result does not depend on thread timing) and its level;
    2. every unfrozen flow computes its bound and marks as not ready each of its links whose
       level exceeds that bound (by more than the tolerance);
    3. every unfrozen flow whose cap level equals its bound freezes at its cap, and every
       other one that crosses a ready link freezes at ``bound * weight``.

    A ready link's level is no higher than that of any link or cap its flows meet. Levels only
    rise while filling, so none of its flows can freeze below that level and the link
    saturates exactly there: freezing it now gives the progressive-filling answer. The same
    holds for a cap that is its flow's bound. The globally lowest level is always ready, so
    every round freezes at least one flow and there are at most ``n_flows`` rounds; there are
    usually far fewer than the serial kernel's one round per distinct level. Near-ties are
    snapped to the lowest level of each flow rather than to one global level, so results
    agree with the serial kernel to within a small multiple of ``tie_rel_tol``, not bit for
    bit.

    Cost per round: O((I + n_flows + n_links) / B) per thread for I incidences and B threads
    per block, plus three block barriers; nothing is atomic. Levels never drop below their previous value, which
    keeps rounding from breaking that monotonicity.
    """
    inst = cuda.blockIdx.x
    first = cuda.threadIdx.x
    step = cuda.blockDim.x
    n_links = capacity_Bps.shape[1]
    n_flows = rate_Bps.shape[1]
    for f in range(first, n_flows, step):
        frozen[inst, f] = False
    for link in range(first, n_links, step):
        level[inst, link] = 0.0
    cuda.syncthreads()
    left = True
    while left:
        for link in range(first, n_links, step):
            if level[inst, link] < math.inf:
                residual = capacity_Bps[inst, link]
                weight_sum = 0.0
                for k in range(link_flow_indptr[link], link_flow_indptr[link + 1]):
                    f = link_flow_indices[k]
                    if frozen[inst, f]:
                        residual -= rate_Bps[inst, f]
                    else:
                        weight_sum += weight[inst, f]
                if weight_sum > 0.0:
                    level[inst, link] = max(residual / weight_sum, level[inst, link])
                    ready[inst, link] = True
                else:
                    level[inst, link] = math.inf
        cuda.syncthreads()

        for f in range(first, n_flows, step):
            if not frozen[inst, f]:
                lowest = cap_Bps[inst, f] / weight[inst, f]
                for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                    lowest = min(lowest, level[inst, flow_link_indices[k]])
                bound[inst, f] = lowest
                limit = lowest * (1.0 + tie_rel_tol)
                for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                    link = flow_link_indices[k]
                    if level[inst, link] > limit:
                        ready[inst, link] = False
        cuda.syncthreads()

        pending = 0
        for f in range(first, n_flows, step):
            if not frozen[inst, f]:
                lowest = bound[inst, f]
                if cap_Bps[inst, f] / weight[inst, f] <= lowest * (1.0 + tie_rel_tol):
                    rate_Bps[inst, f] = cap_Bps[inst, f]
                    frozen[inst, f] = True
                    continue
                for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                    if ready[inst, flow_link_indices[k]]:
                        rate_Bps[inst, f] = lowest * weight[inst, f]
                        frozen[inst, f] = True
                        break
                else:
                    pending = 1
        left = cuda.syncthreads_or(pending) != 0


def threads_per_block(n_flows, n_links):
    """Smallest power of two from 32 (a warp) to :data:`MAX_THREADS_PER_BLOCK` covering ``max(n_flows, n_links)``."""
    wanted = max(n_flows, n_links, 32)
    return min(MAX_THREADS_PER_BLOCK, 1 << (wanted - 1).bit_length())


def max_min_fair_batch_cuda(
    flow_link_indptr,
    flow_link_indices,
    link_flow_indptr,
    link_flow_indices,
    capacity_Bps,
    weight,
    cap_Bps,
    tie_rel_tol,
    rate_Bps,
):
    """Copy a batch to the GPU, run :func:`max_min_fair_batch_kernel`, copy the rates back.

    Parameters
    ----------
    flow_link_indptr, flow_link_indices, link_flow_indptr, link_flow_indices : int64 arrays
        Shared routes and their transpose, as for the kernel. Not mutated.
    capacity_Bps : float64[n_instances, n_links]
    weight : float64[n_instances, n_flows]
    cap_Bps : float64[n_instances, n_flows]
        As for the kernel, C-contiguous. Not mutated.
    tie_rel_tol : float
    rate_Bps : float64[n_instances, n_flows]
        Output (B/s), C-contiguous. Mutated.

    Notes
    -----
    One block per instance of :func:`threads_per_block` threads; the work arrays live in
    device memory, O(n_instances * (n_flows + n_links)). Host-device copies move the
    per-instance arrays once each way. Synchronous: returns when the rates are on the host.
    """
    n_instances, n_links = capacity_Bps.shape
    n_flows = rate_Bps.shape[1]
    if n_instances == 0 or n_flows == 0:
        return
    stream = cuda.stream()
    inputs = (flow_link_indptr, flow_link_indices, link_flow_indptr, link_flow_indices, capacity_Bps, weight, cap_Bps)
    args = [cuda.to_device(a, stream=stream) for a in inputs]
    level = cuda.device_array((n_instances, n_links), dtype=np.float64, stream=stream)
    ready = cuda.device_array((n_instances, n_links), dtype=np.bool_, stream=stream)
    bound = cuda.device_array((n_instances, n_flows), dtype=np.float64, stream=stream)
    frozen = cuda.device_array((n_instances, n_flows), dtype=np.bool_, stream=stream)
    rate = cuda.device_array((n_instances, n_flows), dtype=np.float64, stream=stream)
    max_min_fair_batch_kernel[n_instances, threads_per_block(n_flows, n_links), stream](
        *args, np.float64(tie_rel_tol), level, ready, bound, frozen, rate
    )
    rate.copy_to_host(rate_Bps, stream=stream)
    stream.synchronize()
