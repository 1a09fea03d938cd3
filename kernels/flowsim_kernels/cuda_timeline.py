"""Many time simulations at once on an NVIDIA GPU (numba-cuda): small runs one per thread,
the others one per thread block.

Both kernels follow :func:`flowsim_kernels.timeline.simulate_instance`'s schedule step for
step: :func:`simulate_batch_kernel` runs that very function, compiled for the GPU, one run
per thread; :func:`simulate_blocks_kernel` runs its block-wide form,
:func:`_simulate_instance_block`, in which every loop over the flows in flight is shared
among a block's threads. Import this module only when the CUDA backend is asked for: it
needs the ``numba-cuda`` package (``pip install 'flowsim[cuda]'``).

Notes
-----
Measured on one NVIDIA H200 against the 16 cores of the same machine (2026-12-04,
``benchmarks/gpu/bench_time_gpu.py``: 10,000 collectives on 1-8 DGX H100, 4-4,449 flow
classes, median 232): a run per thread took 8.4 s, 0.44x the CPU batch's 3.7 s. A thread
runs a run's loop about 50 times slower than a CPU core (the slowest run, 2,613 classes:
1.9 s against 40 ms), and 10,000 threads fill under 4% of the GPU, so the batch waited on
its largest runs. A run per block of 64 threads took 2.4 s (1.5x the CPU batch; 2.1-2.2 s with
blocks of 32 to 128 in a second timing); the finish times agree with the CPU's to 1.6e-14.
By run size, 2,000 runs at a time: under 512 classes the GPU and the 16 cores took about the
same time (within 15%), from 512 classes blocks of 32-128 threads 1.2-1.6x less. A lone
4,449-class run takes 96 ms in a block (3.8 ms on one core): every instant is several barriers
and block-wide reductions over state kept in device memory, so a lone large run is still
better on the CPU engine. Runs under :data:`SMALL_RUN_FLOWS` flows stay one per thread (a
block would idle most of its threads on them), on a second stream beside the blocks.

A whole ``flowsim sweep`` of 10,000 distinct collectives (data/sweeps/collectives_10k.toml,
``benchmarks/gpu/bench_sweep_gpu.py``, the same H200 that day) spent 48 s simulating its
batches here against 127 s on the 16 cores. A block sums a link's rates with atomics, in no
fixed order, so its rates differ from the CPU's in the last bits: harmless where a run is
well conditioned (all its all-reduces, all-gathers and reduce-scatters agreed to 3.4e-15),
but 442 of its broadcasts and reduces across servers have schedules that turn on those bits
and moved by up to 2.1% (docs/model.md "Time").
"""

import math

import numpy as np
from numba import cuda

from flowsim_kernels.timeline import ARRIVED, DONE, LATENT, PENDING, TRANSFERRING, UNSOLVED, WAITING, simulate_instance

#: Threads per block of :func:`simulate_batch_kernel`.
THREADS_PER_BLOCK = 64

#: Threads of the block that simulates a run of :data:`SMALL_RUN_FLOWS` flows or more
#: (:func:`simulate_blocks_kernel`); 1: every run on a thread of its own.
THREADS_PER_RUN = 64

#: Runs with fewer flows than this run one per thread (:func:`simulate_batch_kernel`).
SMALL_RUN_FLOWS = 32

_simulate_instance_device = cuda.jit(device=True)(simulate_instance)

#: Argument types of the kernel, for compiling it ahead of time (to PTX) without a GPU.
KERNEL_SIGNATURES = {
    "simulate_batch_kernel": (
        "void(int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "int64[::1], float64[::1], float64[::1], float64[::1], int64[::1], "
        "float64[::1], float64[::1], float64[::1], int64[:, ::1], float64, float64)"
    ),
    "simulate_blocks_kernel": (
        "void(int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "int64[::1], int64[::1], float64[::1], float64[::1], float64[::1], int64[::1], "
        "float64[::1], float64[::1], float64[::1], int64[:, ::1], float64, float64)"
    ),
}


@cuda.jit(cache=True)
def simulate_batch_kernel(order, flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr,
                          flow_link_indices, capacity, latency, size, start, weight, cap, delay, overhead, dep_count,
                          dependents_indptr, dependents_indices, waiting, phase, event_at, remaining, rate, previous,
                          active, level, used, wsum, live, ready, transfer_start, finish, counts, tie_rel_tol,
                          time_rel_tol):
    """Thread ``j`` simulates instance ``order[j]``; arrays and offsets as
    :func:`flowsim_kernels.timeline.simulate_batch`, work arrays flat like the per-flow and
    per-link inputs."""
    j = cuda.grid(1)
    if j >= order.shape[0]:
        return
    i = order[j]
    f0, f1 = flow_offsets[i], flow_offsets[i + 1]
    l0, l1 = link_offsets[i], link_offsets[i + 1]
    _simulate_instance_device(
        flow_link_indptr[f0 + i : f1 + i + 1],
        flow_link_indices[incidence_offsets[i] : incidence_offsets[i + 1]],
        capacity[l0:l1], latency[l0:l1], size[f0:f1], start[f0:f1], weight[f0:f1], cap[f0:f1], delay[f0:f1],
        overhead[f0:f1], dep_count[f0:f1],
        dependents_indptr[f0 + i : f1 + i + 1],
        dependents_indices[dependent_offsets[i] : dependent_offsets[i + 1]],
        waiting[f0:f1], phase[f0:f1], event_at[f0:f1], remaining[f0:f1], rate[f0:f1], previous[f0:f1],
        active[f0:f1], level[l0:l1], used[l0:l1], wsum[l0:l1], live[l0:l1],
        ready[f0:f1], transfer_start[f0:f1], finish[f0:f1], counts[i], tie_rel_tol, time_rel_tol,
    )


# --- one run per thread block --------------------------------------------------------------------

#: Most threads per block of :func:`simulate_blocks_kernel` (the size of its shared scratch).
MAX_BLOCK_THREADS = 256


@cuda.jit(device=True)
def _block_min(value, scratch):
    """The least ``value`` over the block's threads, returned to every thread (a barrier)."""
    tid = cuda.threadIdx.x
    scratch[tid] = value
    cuda.syncthreads()
    half = cuda.blockDim.x // 2
    while half > 0:
        if tid < half:
            scratch[tid] = min(scratch[tid], scratch[tid + half])
        cuda.syncthreads()
        half //= 2
    out = scratch[0]
    cuda.syncthreads()
    return out


@cuda.jit(device=True)
def _block_sum(value, scratch):
    """The sum of ``value`` over the block's threads, returned to every thread (a barrier)."""
    tid = cuda.threadIdx.x
    scratch[tid] = value
    cuda.syncthreads()
    half = cuda.blockDim.x // 2
    while half > 0:
        if tid < half:
            scratch[tid] += scratch[tid + half]
        cuda.syncthreads()
        half //= 2
    out = scratch[0]
    cuda.syncthreads()
    return out


@cuda.jit(device=True)
def _simulate_instance_block(flow_link_indptr, flow_link_indices, capacity, latency, size, start, weight, cap, delay,
                             overhead, dep_count, dependents_indptr, dependents_indices, waiting, phase, event_at,
                             remaining, rate, previous, active, spare, level, used, wsum, live, ready, transfer_start,
                             finish, counts, tie_rel_tol, time_rel_tol, fscratch, iscratch, tail):
    """:func:`flowsim_kernels.timeline.simulate_instance` run by a whole thread block: every
    loop over the flows in flight is shared out among the threads, with a barrier where one
    thread reads what another wrote. ``spare`` is one more per-flow work array; ``fscratch``,
    ``iscratch`` (one entry per thread) and ``tail`` (one) are the block's shared memory.

    The same instants, events and rounds as the sequential loop, in the same order; what
    differs is the order of the flows in ``active`` (appended and kept through atomic
    counters) and so the order in which a link's used rate and unfrozen weights are summed
    (atomic additions): rates agree with the sequential loop's to rounding.
    """
    tid = cuda.threadIdx.x
    step = cuda.blockDim.x
    n_flows = size.shape[0]
    if tid == 0:
        tail[0] = 0
    cuda.syncthreads()
    for f in range(tid, n_flows, step):
        waiting[f] = dep_count[f]
        ready[f] = math.nan
        transfer_start[f] = math.nan
        finish[f] = math.nan
        remaining[f] = 0.0
        rate[f] = UNSOLVED
        if dep_count[f] == 0:
            phase[f] = PENDING
            event_at[f] = start[f]
            active[cuda.atomic.add(tail, 0, 1)] = f
        else:
            phase[f] = WAITING
    cuda.syncthreads()
    n_active = tail[0]
    now = 0.0
    instants = 0
    resolved = 0
    events = 0  # this thread's
    rates_changed = 0  # this thread's
    while n_active > 0:
        t = math.inf
        for i in range(tid, n_active, step):
            f = active[i]
            if phase[f] == TRANSFERRING:
                t = min(t, now + remaining[f] / rate[f])
            else:
                t = min(t, event_at[f])
        t = _block_min(t, fscratch)
        if t == math.inf:
            break  # times beyond float64's range: the caller finds flows without a finish
        instants += 1
        limit = t + time_rel_tol * abs(t)
        for i in range(tid, n_active, step):
            f = active[i]
            if phase[f] == TRANSFERRING:
                remaining[f] -= rate[f] * (t - now)
        now = t
        changed = True
        while changed:
            # Completions; a waiter whose last dependency completes joins the list's tail.
            if tid == 0:
                tail[0] = n_active
            cuda.syncthreads()
            done = 0
            for i in range(tid, n_active, step):
                f = active[i]
                if phase[f] == ARRIVED or (phase[f] == TRANSFERRING and rate[f] > 0.0 and (
                        remaining[f] <= 0.0 or now + remaining[f] / rate[f] <= limit)):
                    phase[f] = DONE
                    finish[f] = now
                    done += 1
                    for k in range(dependents_indptr[f], dependents_indptr[f + 1]):
                        g = dependents_indices[k]
                        if cuda.atomic.sub(waiting, g, 1) == 1:
                            phase[g] = PENDING
                            event_at[g] = max(start[g], now + delay[g])
                            active[cuda.atomic.add(tail, 0, 1)] = g
            cuda.syncthreads()
            n_listed = tail[0]
            if cuda.syncthreads_or(done) != 0:  # drop the completed flows from the list
                if tid == 0:
                    tail[0] = 0
                cuda.syncthreads()
                for i in range(tid, n_listed, step):
                    f = active[i]
                    if phase[f] != DONE:
                        spare[cuda.atomic.add(tail, 0, 1)] = f
                cuda.syncthreads()
                n_active = tail[0]
                for i in range(tid, n_active, step):
                    active[i] = spare[i]
                cuda.syncthreads()
            started = 0
            for i in range(tid, n_active, step):
                f = active[i]
                if phase[f] == PENDING and event_at[f] <= limit:
                    ready[f] = now
                    route_latency = 0.0
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        route_latency += latency[flow_link_indices[k]]
                    phase[f] = LATENT
                    event_at[f] = now + route_latency + overhead[f]
                    started += 1
                # The same thread holds flow f in both passes: no barrier between them.
                if phase[f] == LATENT and event_at[f] <= limit:
                    transfer_start[f] = now
                    if size[f] > 0.0:
                        phase[f] = TRANSFERRING
                        remaining[f] = size[f]
                    else:
                        phase[f] = ARRIVED
                    started += 1
            events += done + started
            changed = cuda.syncthreads_or(done + started) != 0
        # Re-solve every transferring flow's rate.
        unfrozen = 0
        for i in range(tid, n_active, step):
            f = active[i]
            if phase[f] == TRANSFERRING:
                previous[f] = rate[f]
                rate[f] = UNSOLVED
                unfrozen += 1
        unfrozen = _block_sum(unfrozen, iscratch)
        resolved += unfrozen
        while unfrozen > 0:
            for i in range(tid, n_active, step):
                f = active[i]
                if phase[f] == TRANSFERRING:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        used[link] = 0.0
                        wsum[link] = 0.0
                        live[link] = 0
            cuda.syncthreads()
            for i in range(tid, n_active, step):
                f = active[i]
                if phase[f] == TRANSFERRING:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        if rate[f] >= 0.0:
                            cuda.atomic.add(used, link, rate[f])
                        else:
                            cuda.atomic.add(wsum, link, weight[f])
                            cuda.atomic.add(live, link, 1)
            cuda.syncthreads()
            fill = math.inf
            for i in range(tid, n_active, step):
                f = active[i]
                if phase[f] == TRANSFERRING:
                    for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                        link = flow_link_indices[k]
                        if live[link] > 0:
                            level[link] = (capacity[link] - used[link]) / wsum[link]
                            fill = min(fill, level[link])
                    if rate[f] < 0.0 and cap[f] < math.inf:
                        fill = min(fill, cap[f] / weight[f])
            fill = _block_min(fill, fscratch)  # also the barrier after the levels are written
            bound = fill * (1.0 + tie_rel_tol)
            frozen = 0
            for i in range(tid, n_active, step):
                f = active[i]
                if phase[f] == TRANSFERRING and rate[f] < 0.0:
                    if cap[f] < math.inf and cap[f] / weight[f] <= bound:
                        rate[f] = cap[f]
                        frozen += 1
                    else:
                        # Flows of a saturated link, on this round's levels.
                        for k in range(flow_link_indptr[f], flow_link_indptr[f + 1]):
                            link = flow_link_indices[k]
                            if live[link] > 0 and level[link] <= bound:
                                rate[f] = fill * weight[f]
                                frozen += 1
                                break
            unfrozen -= _block_sum(frozen, iscratch)
        for i in range(tid, n_active, step):
            f = active[i]
            if phase[f] == TRANSFERRING and rate[f] != previous[f]:
                rates_changed += 1
    events = _block_sum(events, iscratch)
    rates_changed = _block_sum(rates_changed, iscratch)
    if tid == 0:
        counts[0] = instants
        counts[1] = events
        counts[2] = resolved
        counts[3] = rates_changed


@cuda.jit(cache=True)
def simulate_blocks_kernel(order, flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr,
                           flow_link_indices, capacity, latency, size, start, weight, cap, delay, overhead, dep_count,
                           dependents_indptr, dependents_indices, waiting, phase, event_at, remaining, rate, previous,
                           active, spare, level, used, wsum, live, ready, transfer_start, finish, counts, tie_rel_tol,
                           time_rel_tol):
    """Block ``b`` simulates instance ``order[b]`` (blocks of a power of two threads, at most
    :data:`MAX_BLOCK_THREADS`); arrays as :func:`simulate_batch_kernel`, ``spare`` one more
    per-flow work array."""
    i = order[cuda.blockIdx.x]
    fscratch = cuda.shared.array(MAX_BLOCK_THREADS, np.float64)
    iscratch = cuda.shared.array(MAX_BLOCK_THREADS, np.int64)
    tail = cuda.shared.array(1, np.int64)
    f0, f1 = flow_offsets[i], flow_offsets[i + 1]
    l0, l1 = link_offsets[i], link_offsets[i + 1]
    _simulate_instance_block(
        flow_link_indptr[f0 + i : f1 + i + 1],
        flow_link_indices[incidence_offsets[i] : incidence_offsets[i + 1]],
        capacity[l0:l1], latency[l0:l1], size[f0:f1], start[f0:f1], weight[f0:f1], cap[f0:f1], delay[f0:f1],
        overhead[f0:f1], dep_count[f0:f1],
        dependents_indptr[f0 + i : f1 + i + 1],
        dependents_indices[dependent_offsets[i] : dependent_offsets[i + 1]],
        waiting[f0:f1], phase[f0:f1], event_at[f0:f1], remaining[f0:f1], rate[f0:f1], previous[f0:f1],
        active[f0:f1], spare[f0:f1], level[l0:l1], used[l0:l1], wsum[l0:l1], live[l0:l1],
        ready[f0:f1], transfer_start[f0:f1], finish[f0:f1], counts[i], tie_rel_tol, time_rel_tol,
        fscratch, iscratch, tail,
    )


def simulate_batch_cuda(flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr,
                        flow_link_indices, capacity, latency, size, start, weight, cap, delay, overhead, dep_count,
                        dependents_indptr, dependents_indices, ready, transfer_start, finish, counts, tie_rel_tol,
                        time_rel_tol):
    """Copy a batch to the GPU, simulate it, copy the times and counters back into ``ready``,
    ``transfer_start``, ``finish`` and ``counts``; arguments as
    :func:`flowsim_kernels.timeline.simulate_batch`. Synchronous.

    Runs of fewer than :data:`SMALL_RUN_FLOWS` flows go one per thread
    (:func:`simulate_batch_kernel`), the others one per block of :data:`THREADS_PER_RUN`
    threads (:func:`simulate_blocks_kernel`, unless that is 1), on two streams at once; each
    kernel takes its runs largest first, so that similar runs share a warp and the longest
    start first.
    """
    threads = THREADS_PER_RUN
    if not (threads == 1 or (2 <= threads <= MAX_BLOCK_THREADS and threads & (threads - 1) == 0)):
        raise ValueError(f"THREADS_PER_RUN must be 1 or a power of two from 2 to {MAX_BLOCK_THREADS}, not {threads}")
    n_instances = flow_offsets.shape[0] - 1
    if n_instances == 0:
        return
    n_flows, n_links = int(flow_offsets[-1]), int(link_offsets[-1])
    stream = cuda.stream()
    inputs = [cuda.to_device(np.ascontiguousarray(a), stream=stream) for a in (
        flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr, flow_link_indices,
        capacity, latency, size, start, weight, cap, delay, overhead, dep_count, dependents_indptr,
        dependents_indices)]
    work = [cuda.device_array(n_flows, dtype=np.int64, stream=stream) for _ in range(2)]
    work += [cuda.device_array(n_flows, dtype=np.float64, stream=stream) for _ in range(4)]
    active = cuda.device_array(n_flows, dtype=np.int64, stream=stream)
    spare = cuda.device_array(n_flows, dtype=np.int64, stream=stream)
    by_link = [cuda.device_array(n_links, dtype=np.float64, stream=stream) for _ in range(3)]
    by_link.append(cuda.device_array(n_links, dtype=np.int64, stream=stream))
    out = [cuda.device_array(n_flows, dtype=np.float64, stream=stream) for _ in range(3)]
    out.append(cuda.device_array(counts.shape, dtype=np.int64, stream=stream))
    run_flows = np.diff(flow_offsets)
    largest_first = np.argsort(-run_flows, kind="stable")
    small = run_flows[largest_first] < (SMALL_RUN_FLOWS if threads > 1 else np.inf)
    stream.synchronize()  # the inputs are on the GPU before the second stream reads them
    by_block = largest_first[~small]
    if by_block.size:
        block_order = cuda.to_device(by_block, stream=stream)
        simulate_blocks_kernel[by_block.size, threads, stream](
            block_order, *inputs, *work, active, spare, *by_link, *out, tie_rel_tol, time_rel_tol)
    by_thread = largest_first[small]
    if by_thread.size:
        other = cuda.stream()
        thread_order = cuda.to_device(by_thread, stream=other)
        blocks = (by_thread.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        simulate_batch_kernel[blocks, THREADS_PER_BLOCK, other](
            thread_order, *inputs, *work, active, *by_link, *out, tie_rel_tol, time_rel_tol)
        other.synchronize()
    for device, host in zip(out, (ready, transfer_start, finish, counts), strict=True):
        device.copy_to_host(host, stream=stream)
    stream.synchronize()
