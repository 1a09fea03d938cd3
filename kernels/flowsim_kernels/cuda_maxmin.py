"""Batched weighted max-min fair rates on an NVIDIA GPU (numba-cuda), one thread block per instance.

Import this module only when the CUDA backend is asked for: it needs the ``numba-cuda``
package (``pip install 'flowsim[cuda]'``), which makes ``numba.cuda`` its own target.
"""

import numpy as np
from numba import cuda

#: Largest thread block the launcher uses; a power of two. 1024 launches: the kernel needs 56
#: registers a thread on an H200.
MAX_THREADS_PER_BLOCK = 1024

#: Flows (or links) per thread that :func:`threads_per_block` aims at. Timed alone on an H200,
#: the kernel ran 1k-flow instances fastest in blocks of 256, 10k-flow ones in 512 (within 7%
#: of 256 and 1024) and 100k-flow ones in 1024 (1.3x 512, 1.7x 256).
FLOWS_PER_THREAD = 4

#: Argument types of every kernel here, for compiling them ahead of time (to PTX, say)
#: without a GPU. They are the types the launcher passes.
KERNEL_SIGNATURES = {
    "max_min_fair_batch_kernel": (
        "void(int64[::1], int64[::1], int64[::1], int64[::1], "
        "float64[:, ::1], float64[:, ::1], float64[:, ::1], "
        "float64[:, ::1], boolean[:, ::1], int32[:, ::1], float64[:, ::1], int32[:, ::1], "
        "int32[:, ::1], int32[:, ::1], float64[:, ::1], float64[:, ::1])"
    ),
    "repeat_row_kernel": "void(float64[::1], float64[:, ::1])",
}

#: Threads per block, and most blocks, of :func:`repeat_row_kernel` (a grid-stride loop).
REPEAT_THREADS = 256
REPEAT_MAX_BLOCKS = 1024


@cuda.jit(cache=True)
def max_min_fair_batch_kernel(
    flow_link_indptr,
    flow_link_indices,
    link_flow_indptr,
    link_flow_indices,
    capacity_Bps,
    weight,
    cap_Bps,
    level,
    ready,
    link_list,
    residual_Bps,
    slot_count,
    slot_flow,
    flow_list,
    pending_Bps,
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
    level : float64[n_instances, n_links]
        Work, by link: each link's fair level. Mutated.
    ready : bool[n_instances, n_links]
        Work, by link: whether a link saturates in the current round. Mutated.
    link_list : int32[n_instances, n_links]
        Work, by list position: the links that still carry unfrozen flows. Mutated.
    residual_Bps : float64[n_instances, n_links]
        Work, by list position: the capacity (B/s) of ``link_list``'s link not yet given to
        frozen flows. Mutated.
    slot_count : int32[n_instances, n_links]
        Work, by list position: how many flows of ``link_list``'s link are still listed in
        ``slot_flow``. Mutated.
    slot_flow : int32[n_instances, n_incidences]
        Work: link ``l``'s flows not yet seen frozen, in CSR order, from
        ``link_flow_indptr[l]`` on. Mutated.
    flow_list : int32[n_instances, n_flows]
        Work, by list position: the unfrozen flows. Mutated.
    pending_Bps : float64[n_instances, n_flows]
        Work, by list position: the rate (B/s) at which ``flow_list``'s flow freezes if one of
        its links is ready. Mutated.
    rate_Bps : float64[n_instances, n_flows]
        Output: each flow's rate (B/s); while solving, ``-weight`` for an unfrozen flow.
        Mutated.

    Notes
    -----
    Progressive filling in data-parallel rounds that freeze every *locally* lowest level at
    once, not only the global lowest. A link's level is ``residual / sum of unfrozen
    weights``; a flow's bound is the lowest of its links' levels and its cap level
    ``cap / weight``. Each round, with a block barrier after each step:

    1. every link with unfrozen flows takes the rates of its flows frozen since the last
       round off its residual, drops them from its slots, sums the weights of the rest and
       sets its level and marks itself ready; a link left with no unfrozen flow leaves the
       link list;
    2. every unfrozen flow computes its bound and marks as not ready each of its links whose
       level exceeds that bound; a flow whose cap level is its bound freezes at its cap and
       leaves the flow list;
    3. every other unfrozen flow that crosses a ready link freezes at ``bound * weight`` and
       leaves the flow list.

    A ready link's level is no higher than that of any link or cap its flows meet, so it is
    the bound of each of its flows. Levels only rise while filling, so none of its flows can
    freeze below that level and the link saturates exactly there: freezing it now gives the
    progressive-filling answer. The same holds for a cap that is its flow's bound. The
    globally lowest level is always ready, so every round freezes at least one flow and
    there are at most ``n_flows`` rounds; there are usually far fewer than the serial
    kernel's one round per distinct level.

    Unlike the serial kernel, no tolerance merges near-tied levels: every flow freezes at the
    level of the link or cap that binds it, computed afresh each round, so the rates are
    those of exact progressive filling up to floating-point rounding. Merging would move a
    flow by up to the tolerance times its rate; a heavy flow moved so leaves (or takes) that
    much on its other links, and a light flow there gains (or loses) it multiplied by the
    ratio of their weights: 100% for a tolerance of 1e-12 and weights 1e12 apart. Near-ties
    cost rounds instead, and only between links that share flows; counted on the
    benchmark's random instances (1,000 and 10,000 flows, with and without exact ties), the
    rounds were as many as with a tolerance of 1e-12.

    Accuracy: as in any float64 solver, a flow that shares links with flows of up to ``r``
    times its weight carries a relative error of about ``r`` units in the last place, its
    share being what the heavy flows leave. The serial kernel freezes every level within
    ``tie_rel_tol`` of a round's lowest at that lowest level, so where levels lie that close
    the two can differ by up to about ``tie_rel_tol * r``; elsewhere they agree to about
    ``r`` units in the last place (about 1e-14 on the benchmark's instances). Levels never
    drop below their previous value, which keeps rounding from breaking their monotonicity.

    Work lists instead of sweeps: thread ``t`` of a block of ``B`` owns the flows ``t, t + B,
    ...`` and the links ``t, t + B, ...``, and keeps those still unfrozen (carrying unfrozen
    flows) at list positions ``t, t + B, ...``, packed in place as they freeze. Each
    thread compacts only its own entries, so lists need neither atomics nor prefix sums,
    neighbouring threads touch neighbouring positions (coalesced), and a round's cost
    follows the work left, not the instance size. Likewise each link packs its unfrozen
    flows at the front of its own slots, so a link reads each incidence once per round
    while the flow is unfrozen, and once more when it has just frozen. ``rate_Bps`` holds
    ``-weight`` while a flow is unfrozen, so step 1 reads one number per slot to learn
    whether the flow froze, its rate, or its weight.

    Deterministic: every sum is taken by one thread in a fixed order (a link's weights in
    CSR order; its residual by round, then in CSR order), and which flows freeze depends on
    nothing else, so the rates do not depend on thread timing nor on the block size;
    nothing is atomic.

    Cost per round: O(max over threads of (slots of its listed links + incidences of its
    listed flows)), three block barriers. Over a solve that is about twice the sum, over
    rounds, of the incidences of the unfrozen flows, against twice the incidences times the
    rounds for a sweep over every flow and link.
    """
    inst = cuda.blockIdx.x
    first = cuda.threadIdx.x
    step = cuda.blockDim.x
    n_links = capacity_Bps.shape[1]
    n_flows = rate_Bps.shape[1]
    for k in range(first, link_flow_indices.shape[0], step):
        slot_flow[inst, k] = link_flow_indices[k]
    my_links = 0
    for link in range(first, n_links, step):
        count = link_flow_indptr[link + 1] - link_flow_indptr[link]
        if count > 0:
            at = first + my_links * step
            link_list[inst, at] = link
            residual_Bps[inst, at] = capacity_Bps[inst, link]
            slot_count[inst, at] = count
            level[inst, link] = 0.0
            my_links += 1
    my_flows = 0
    for f in range(first, n_flows, step):
        flow_list[inst, f] = f
        rate_Bps[inst, f] = -weight[inst, f]
        my_flows += 1
    cuda.syncthreads()

    left = True
    while left:
        kept = 0
        for j in range(my_links):
            at = first + j * step
            link = link_list[inst, at]
            start = link_flow_indptr[link]
            residual = residual_Bps[inst, at]
            weight_sum = 0.0
            n_unfrozen = 0
            for k in range(start, start + slot_count[inst, at]):
                f = slot_flow[inst, k]
                share = rate_Bps[inst, f]
                if share < 0.0:
                    weight_sum -= share
                    slot_flow[inst, start + n_unfrozen] = f
                    n_unfrozen += 1
                else:
                    residual -= share
            if n_unfrozen > 0:
                level[inst, link] = max(residual / weight_sum, level[inst, link])
                ready[inst, link] = True
                to = first + kept * step
                link_list[inst, to] = link
                residual_Bps[inst, to] = residual
                slot_count[inst, to] = n_unfrozen
                kept += 1
        my_links = kept
        cuda.syncthreads()

        kept = 0
        for j in range(my_flows):
            f = flow_list[inst, first + j * step]
            w = weight[inst, f]
            cap_level = cap_Bps[inst, f] / w
            lowest = cap_level
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                lowest = min(lowest, level[inst, flow_link_indices[k]])
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                link = flow_link_indices[k]
                if level[inst, link] > lowest:
                    ready[inst, link] = False
            if cap_level <= lowest:
                rate_Bps[inst, f] = cap_Bps[inst, f]
            else:
                to = first + kept * step
                flow_list[inst, to] = f
                pending_Bps[inst, to] = lowest * w
                kept += 1
        my_flows = kept
        cuda.syncthreads()

        kept = 0
        for j in range(my_flows):
            at = first + j * step
            f = flow_list[inst, at]
            for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                if ready[inst, flow_link_indices[k]]:
                    rate_Bps[inst, f] = pending_Bps[inst, at]
                    break
            else:
                flow_list[inst, first + kept * step] = f
                kept += 1
        my_flows = kept
        left = cuda.syncthreads_or(my_flows) != 0


@cuda.jit(cache=True)
def repeat_row_kernel(row, out):
    """Copy ``row`` (float64[n]) into every row of ``out`` (float64[m, n]). Mutates ``out``.

    A grid-stride loop over the elements of ``out``: consecutive threads write consecutive
    elements, so the writes coalesce; ``row`` is read from cache after the first pass.
    """
    n = row.shape[0]
    for k in range(cuda.grid(1), out.shape[0] * n, cuda.gridsize(1)):
        out[k // n, k % n] = row[k % n]


def threads_per_block(n_flows, n_links):
    """Smallest power of two from 32 (a warp) to :data:`MAX_THREADS_PER_BLOCK` that covers
    ``max(n_flows, n_links) / FLOWS_PER_THREAD``."""
    wanted = max(-(-max(n_flows, n_links) // FLOWS_PER_THREAD), 32)
    return min(MAX_THREADS_PER_BLOCK, 1 << (wanted - 1).bit_length())


def max_min_fair_batch_cuda(
    flow_link_indptr,
    flow_link_indices,
    link_flow_indptr,
    link_flow_indices,
    capacity_Bps,
    weight,
    cap_Bps,
    rate_Bps,
):
    """Copy a batch to the GPU, run :func:`max_min_fair_batch_kernel`, copy the rates back.

    Parameters
    ----------
    flow_link_indptr, flow_link_indices, link_flow_indptr, link_flow_indices : int64 arrays
        Shared routes and their transpose, as for the kernel. Not mutated.
    capacity_Bps : float64[n_instances or 1, n_links]
    weight : float64[n_instances or 1, n_flows]
    cap_Bps : float64[n_instances or 1, n_flows]
        As for the kernel, C-contiguous; one row serves every instance (it crosses to the GPU
        once). Not mutated.
    rate_Bps : float64[n_instances, n_flows]
        Output (B/s), C-contiguous. Mutated.

    Raises
    ------
    ValueError
        ``capacity_Bps``, ``weight`` or ``cap_Bps`` is not shaped as above, or there are more
        flows or links than int32 numbers.

    Notes
    -----
    One block per instance of :func:`threads_per_block` threads; the work arrays live in
    device memory, O(n_instances * (n_flows + n_links + n_incidences)), with flows and links
    numbered in int32. Host-device copies move the per-instance arrays once each way (a
    shared one once): in a sweep over capacities, weights and caps cross once per batch.
    Synchronous: returns when the rates are on the host.
    """
    n_instances, n_flows = rate_Bps.shape
    n_links = link_flow_indptr.shape[0] - 1
    per_instance = {
        "capacity_Bps": (capacity_Bps, n_links),
        "weight": (weight, n_flows),
        "cap_Bps": (cap_Bps, n_flows),
    }
    for name, (values, n_columns) in per_instance.items():
        # A row count other than 1 or n_instances would have blocks read rows that are not
        # there, or a row meant for another instance.
        if values.ndim != 2 or values.shape[0] not in (1, n_instances) or values.shape[1] != n_columns:
            raise ValueError(
                f"{name} has shape {values.shape}; expected ({n_instances} or 1, {n_columns}) for "
                f"{n_instances} instances of {n_flows} flows over {n_links} links"
            )
    if n_instances == 0 or n_flows == 0:
        return
    if max(n_flows, n_links) > np.iinfo(np.int32).max:
        raise ValueError(f"{n_flows} flows over {n_links} links: the CUDA kernel numbers both in int32")
    stream = cuda.stream()
    routes = (flow_link_indptr, flow_link_indices, link_flow_indptr, link_flow_indices)
    args = [cuda.to_device(a, stream=stream) for a in routes]
    args += [_per_instance_on_device(values, n_instances, stream) for values, _ in per_instance.values()]
    by_link = (n_instances, n_links)
    by_flow = (n_instances, n_flows)
    work = (
        cuda.device_array(by_link, dtype=np.float64, stream=stream),
        cuda.device_array(by_link, dtype=np.bool_, stream=stream),
        cuda.device_array(by_link, dtype=np.int32, stream=stream),
        cuda.device_array(by_link, dtype=np.float64, stream=stream),
        cuda.device_array(by_link, dtype=np.int32, stream=stream),
        cuda.device_array((n_instances, link_flow_indices.shape[0]), dtype=np.int32, stream=stream),
        cuda.device_array(by_flow, dtype=np.int32, stream=stream),
        cuda.device_array(by_flow, dtype=np.float64, stream=stream),
    )
    rate = cuda.device_array(by_flow, dtype=np.float64, stream=stream)
    max_min_fair_batch_kernel[n_instances, threads_per_block(n_flows, n_links), stream](
        *args, *work, rate
    )
    rate.copy_to_host(rate_Bps, stream=stream)
    stream.synchronize()


def _per_instance_on_device(values, n_instances, stream):
    """float64[n_instances, n] on the GPU from ``values``, one row per instance or one row
    for all (the launcher has checked that it is one of the two). A shared row crosses once
    and is repeated there by :func:`repeat_row_kernel`, so that each instance still reads its
    own row: on an H200, 264 instances of 100k flows all reading one shared row of weights
    and caps were solved 1.8x slower than with a row each."""
    if values.shape[0] != 1 or n_instances == 1:
        return cuda.to_device(values, stream=stream)
    out = cuda.device_array((n_instances, values.shape[1]), dtype=np.float64, stream=stream)
    if out.size:
        blocks = min(REPEAT_MAX_BLOCKS, -(-out.size // REPEAT_THREADS))
        repeat_row_kernel[blocks, REPEAT_THREADS, stream](cuda.to_device(values[0], stream=stream), out)
    return out
