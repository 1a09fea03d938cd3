"""Many time simulations at once on an NVIDIA GPU (numba-cuda): one instance per thread.

The device function is :func:`flowsim_kernels.timeline.simulate_instance`, compiled for the GPU
from the same source the CPU batch runs, so both follow one schedule step for step. Import
this module only when the CUDA backend is asked for: it needs the ``numba-cuda`` package
(``pip install 'flowsim[cuda]'``).

Notes
-----
One thread runs one instance's whole event loop; a sweep of thousands of instances fills the
GPU with threads, each on its own instance's slice of flat arrays in device memory (the
instances of a sweep differ in size, so a block per instance would idle most of its threads
on the small ones). Threads of a warp diverge where their instances' events differ; whether
a block per instance (parallel scans over flows and links) wins on the largest instances is
to be measured on a GPU (benchmarks/gpu/bench_gpu.py).
"""

import numpy as np
from numba import cuda

from flowsim_kernels.timeline import simulate_instance

#: Threads per block of :func:`simulate_batch_kernel`.
THREADS_PER_BLOCK = 64

_simulate_instance_device = cuda.jit(device=True)(simulate_instance)

#: Argument types of the kernel, for compiling it ahead of time (to PTX) without a GPU.
KERNEL_SIGNATURES = {
    "simulate_batch_kernel": (
        "void(int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "int64[::1], float64[::1], float64[::1], float64[::1], int64[::1], "
        "float64[::1], float64[::1], float64[::1], int64[:, ::1], float64, float64)"
    ),
}


@cuda.jit(cache=True)
def simulate_batch_kernel(flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr,
                          flow_link_indices, capacity, latency, size, start, weight, cap, delay, overhead, dep_count,
                          dependents_indptr, dependents_indices, waiting, phase, event_at, remaining, rate, previous,
                          active, level, used, wsum, live, ready, transfer_start, finish, counts, tie_rel_tol,
                          time_rel_tol):
    """Thread ``i`` simulates instance ``i``; arrays and offsets as
    :func:`flowsim_kernels.timeline.simulate_batch`, work arrays flat like the per-flow and
    per-link inputs."""
    i = cuda.grid(1)
    if i >= flow_offsets.shape[0] - 1:
        return
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


def simulate_batch_cuda(flow_offsets, link_offsets, incidence_offsets, dependent_offsets, flow_link_indptr,
                        flow_link_indices, capacity, latency, size, start, weight, cap, delay, overhead, dep_count,
                        dependents_indptr, dependents_indices, ready, transfer_start, finish, counts, tie_rel_tol,
                        time_rel_tol):
    """Copy a batch to the GPU, run :func:`simulate_batch_kernel`, copy the times and
    counters back into ``ready``, ``transfer_start``, ``finish`` and ``counts``; arguments
    as :func:`flowsim_kernels.timeline.simulate_batch`. Synchronous."""
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
    work.append(cuda.device_array(n_flows, dtype=np.int64, stream=stream))
    work += [cuda.device_array(n_links, dtype=np.float64, stream=stream) for _ in range(3)]
    work.append(cuda.device_array(n_links, dtype=np.int64, stream=stream))
    out = [cuda.device_array(n_flows, dtype=np.float64, stream=stream) for _ in range(3)]
    out.append(cuda.device_array(counts.shape, dtype=np.int64, stream=stream))
    blocks = (n_instances + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    simulate_batch_kernel[blocks, THREADS_PER_BLOCK, stream](*inputs, *work, *out, tie_rel_tol, time_rel_tol)
    for device, host in zip(out, (ready, transfer_start, finish, counts), strict=True):
        device.copy_to_host(host, stream=stream)
    stream.synchronize()
