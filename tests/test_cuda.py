"""The CUDA backend: its kernels against the CPU kernel, and compiled ahead of time for sm_90.

Solving needs a GPU or numba-cuda's simulator; CI runs this module on its own with the
simulator switched on before numba is imported::

    NUMBA_ENABLE_CUDASIM=1 pytest tests/test_cuda.py

Without either, those tests skip. Compiling to PTX needs numba-cuda and its CUDA 13 wheels
(``pip install 'flowsim[cuda]'``) but no GPU, and does not run under the simulator.
"""

import importlib.util
import math
import os
import re
import types

import numpy as np
import pytest

from flowsim import InputError
from flowsim.batched import BatchProblem, available_backends, solve_batch
from instances import parking_lot_kernel_arguments, random_batch

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
HAS_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None

needs_cuda = pytest.mark.skipif(
    "cuda" not in available_backends(),
    reason="no CUDA backend here: needs numba-cuda and a GPU, or NUMBA_ENABLE_CUDASIM=1",
)
needs_compiler = pytest.mark.skipif(
    not HAS_NUMBA_CUDA or SIMULATOR,
    reason="compiling to PTX needs numba-cuda with its CUDA wheels, outside the simulator",
)

G = 1e9


# --- solving (GPU or simulator) ------------------------------------------------------------------

@needs_cuda
def test_spec_hand_cases_one_per_instance():
    # Instance 0: parking lot (case 3); 1: cap 0.3 on f2 (case 6, f3 idle on B); 2: weights.
    rates = solve_batch(
        [[0, 1], [0], [1]],
        [[1 * G, 2 * G], [1 * G, 2 * G], [1 * G, 2 * G]],
        weights=[[1, 1, 1], [1, 1, 1], [1, 3, 1]],
        caps_Bps=[[math.inf] * 3, [math.inf, 0.3 * G, math.inf], [math.inf] * 3],
        backend="cuda",
    )
    np.testing.assert_allclose(
        rates,
        [[0.5 * G, 0.5 * G, 1.5 * G], [0.7 * G, 0.3 * G, 1.3 * G], [0.25 * G, 0.75 * G, 1.75 * G]],
        rtol=1e-12,
    )


@needs_cuda
@pytest.mark.parametrize("n_flows, n_links, max_hops", [(8, 3, 2), (30, 6, 4)], ids=lambda v: str(v))
def test_matches_cpu_on_random_instances(rng, n_flows, n_links, max_hops):
    problem = BatchProblem.build(*random_batch(rng, 3, n_flows, n_links, max_hops))
    np.testing.assert_allclose(problem.solve("cuda"), problem.solve("cpu"), rtol=1e-9)


@needs_cuda
def test_matches_cpu_with_ties_empty_routes_and_idle_links(rng):
    # Integer capacities and unit weights make links tie; f0 has no link (cap only); link 7
    # carries nothing.
    routes = [[]] + [rng.choice(7, size=rng.integers(1, 4), replace=False).tolist() for _ in range(20)]
    capacity = rng.integers(1, 4, (2, 8)).astype(float) * 10.0
    caps = np.full((2, 21), np.inf)
    caps[:, 0] = [3.0, 7.0]
    problem = BatchProblem.build(routes, capacity, caps_Bps=caps)
    rates = problem.solve("cuda")
    np.testing.assert_allclose(rates, problem.solve("cpu"), rtol=1e-9)
    assert rates[:, 0].tolist() == [3.0, 7.0]


@needs_cuda
def test_more_flows_and_links_than_threads(rng, monkeypatch):
    # Each thread strides over several flows and links when a block is smaller than both.
    from flowsim_kernels import cuda_maxmin

    monkeypatch.setattr(cuda_maxmin, "MAX_THREADS_PER_BLOCK", 32)
    assert cuda_maxmin.threads_per_block(70, 40) == 32
    problem = BatchProblem.build(*random_batch(rng, 1, 70, 40, 3))
    np.testing.assert_allclose(problem.solve("cuda"), problem.solve("cpu"), rtol=1e-9)


def staircase(n_links):
    """Links 0..n-1 of capacity 2, 4, ..., 2n; flow ``2i`` crosses links i and i+1, flow
    ``2i + 1`` link i alone (the last link has only its lone flow and flow ``2n - 4``).

    Levels rise along the line, so only the lowest unfrozen link is ever ready: progressive
    filling freezes one link per round, ``n_links`` rounds. Returns the routes, the
    capacities and the rates worked out link by link.
    """
    routes = []
    for i in range(n_links - 1):
        routes += [[i, i + 1], [i]]
    routes.append([n_links - 1])
    capacity = 2.0 * np.arange(1, n_links + 1)
    rates = []
    taken = 0.0  # by the pair flow frozen at the link before
    for i in range(n_links - 1):
        share = (capacity[i] - taken) / 2
        rates += [share, share]
        taken = share
    rates.append(capacity[-1] - taken)
    return routes, capacity, np.array(rates)


@needs_cuda
@pytest.mark.parametrize("flows_per_thread", [4, 1])
def test_one_link_per_round_for_many_rounds(monkeypatch, flows_per_thread):
    # Blocks of 32 threads (fewer than the 79 flows and 40 links) or of 128 (more than both).
    from flowsim_kernels import cuda_maxmin

    monkeypatch.setattr(cuda_maxmin, "FLOWS_PER_THREAD", flows_per_thread)
    routes, capacity, expected = staircase(40)
    assert expected[:4].tolist() == [1.0, 1.0, 1.5, 1.5]
    problem = BatchProblem.build(routes, capacity[None, :])
    rates = problem.solve("cuda")
    np.testing.assert_allclose(rates[0], expected, rtol=1e-12)
    np.testing.assert_allclose(rates, problem.solve("cpu"), rtol=1e-9)


@needs_cuda
def test_near_ties_around_a_ring_freeze_together(monkeypatch):
    # 48 links in a ring, flow i over links i and i+1: every link has two flows and a level
    # of 1 up to a relative 1e-14, so all of them are ready in the first round.
    from flowsim_kernels import cuda_maxmin

    monkeypatch.setattr(cuda_maxmin, "MAX_THREADS_PER_BLOCK", 32)
    n = 48
    routes = [[i, (i + 1) % n] for i in range(n)]
    capacity = 2.0 * (1.0 + 1e-14 * np.arange(n))[None, :]
    problem = BatchProblem.build(routes, capacity)
    rates = problem.solve("cuda")
    np.testing.assert_allclose(rates, 1.0, rtol=1e-12)
    np.testing.assert_allclose(rates, problem.solve("cpu"), rtol=1e-9)


# Weights 2**18 (2.6e5, inside the supported 1e6) apart on links whose levels lie within
# 2**-41 of each other. A light flow's rate is what the heavy flows leave on its link, so
# freezing a heavy flow off its own level moves the light one's rate far more. Values are exact
# in float64.
H = 2.0**9  # the heavy weight; the light one is 1 / H
NEAR_TIES = {
    # Link 1 (f0 and f1) at level 1 exactly, link 0 (f0 alone) 2**-41 higher: link 1 binds both.
    "shared link first": ([[0, 1], [1]], [H * (1 + 2.0**-41), H + 1 / H], [H, 1 / H], None, [H, 1 / H]),
    # Link 0 (f2 alone, level 1) freezes first, link 1 (f0 alone, level 1 + 2**-41) next, and
    # link 2 (f0 and f1, 2**-40 higher still) leaves f1 the 2 / H its capacity holds beyond f0.
    "chain": (
        [[1, 2], [2], [0]],
        [1.0, H * (1 + 2.0**-41), H * (1 + 2.0**-41) + 2 / H],
        [H, 1 / H, 1.0],
        None,
        [H * (1 + 2.0**-41), 2 / H, 1.0],
    ),
}


@needs_cuda
@pytest.mark.parametrize("case", NEAR_TIES)
def test_near_ties_between_weights_far_apart_give_exact_filling(case):
    routes, capacity, weights, caps, expected = NEAR_TIES[case]
    problem = BatchProblem.build(routes, [capacity], weights, caps)
    rates = problem.solve("cuda")
    np.testing.assert_allclose(rates[0], expected, rtol=1e-12)
    # No tolerance merges levels on the GPU, so none changes its rates.
    np.testing.assert_array_equal(problem.solve("cuda", tie_rel_tol=0.5), rates)


@needs_cuda
def test_weights_beyond_the_supported_range_are_refused_on_the_gpu_too():
    # 1e6 and 1e-6: 1e12 apart, past what float64 carries through the filling (docs/model.md,
    # "Supported range"); the batch is refused before any backend runs it.
    with pytest.raises(InputError, match=r"flowsim takes weights at most 1e\+06 apart"):
        BatchProblem.build([[0, 1], [1]], [[1e15, 1.0000000000015e15]], [1e6, 1e-6]).solve("cuda")


@needs_cuda
def test_rates_do_not_depend_on_the_block_size(rng, monkeypatch):
    # Every sum is taken by one thread in a fixed order, so the rates are bit for bit the
    # same however many threads share the flows and links; many caps freeze over rounds.
    from flowsim_kernels import cuda_maxmin

    monkeypatch.setattr(cuda_maxmin, "FLOWS_PER_THREAD", 1)
    problem = BatchProblem.build(*random_batch(rng, 3, 200, 50, 4, p_capped=0.5))
    by_block = {}
    for max_threads in (32, 64, 256):
        monkeypatch.setattr(cuda_maxmin, "MAX_THREADS_PER_BLOCK", max_threads)
        assert cuda_maxmin.threads_per_block(200, 50) == max_threads
        by_block[max_threads] = problem.solve("cuda")
    np.testing.assert_allclose(by_block[32], problem.solve("cpu"), rtol=1e-9)
    np.testing.assert_array_equal(by_block[64], by_block[32])
    np.testing.assert_array_equal(by_block[256], by_block[32])


@needs_cuda
def test_inputs_shared_by_all_instances_give_the_same_rates(rng):
    # Weights and caps given once (broadcast over the instances, as in a sweep over
    # capacities) cross to the GPU as one row, and capacities given once likewise.
    routes, capacity, weight, cap = random_batch(rng, 4, 60, 12, 4, p_capped=0.5)
    shared = BatchProblem.build(routes, capacity, weight[0], cap[0])
    assert shared.weight.strides[0] == 0 and shared.cap_Bps.strides[0] == 0
    own = BatchProblem.build(routes, capacity, np.tile(weight[0], (4, 1)), np.tile(cap[0], (4, 1)))
    rates = shared.solve("cuda")
    np.testing.assert_array_equal(rates, own.solve("cuda"))
    np.testing.assert_allclose(rates, shared.solve("cpu"), rtol=1e-9)

    one_capacity = BatchProblem(
        shared.routes, shared.link_flow_indptr, shared.link_flow_indices,
        np.broadcast_to(capacity[0], capacity.shape), weight, cap,
    )
    rates = one_capacity.solve("cuda")
    np.testing.assert_allclose(rates, one_capacity.solve("cpu"), rtol=1e-9)
    np.testing.assert_array_equal(rates[1], BatchProblem.build(routes, capacity[:1], weight[1], cap[1]).solve("cuda")[0])


@needs_cuda
def test_launcher_refuses_more_flows_than_int32_numbers():
    from flowsim_kernels.cuda_maxmin import max_min_fair_batch_cuda

    many = np.broadcast_to(np.ones((1, 1)), (1, 2**31))
    empty = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError, match="int32"):
        max_min_fair_batch_cuda(empty, empty, empty, empty, np.ones((1, 0)), many, many, many)


@needs_cuda
def test_launcher_refuses_rows_that_are_not_one_per_instance_or_one():
    # A block reads its instance's row unchecked; one row too few used to be replaced by
    # copies of the first row.
    from flowsim_kernels.cuda_maxmin import max_min_fair_batch_cuda

    routes, (capacity, weight, cap), rate = parking_lot_kernel_arguments(3)
    for bad, message in [
        ((capacity[:2], weight, cap), "capacity_Bps has shape (2, 2); expected (3 or 1, 2)"),
        ((capacity, weight[:2], cap), "weight has shape (2, 3); expected (3 or 1, 3)"),
        ((capacity, weight, cap[:, :2]), "cap_Bps has shape (3, 2); expected (3 or 1, 3)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            max_min_fair_batch_cuda(*routes, *bad, rate)
    max_min_fair_batch_cuda(*routes, capacity[:1], weight[:1], cap, rate)
    np.testing.assert_array_equal(rate, [[0.5, 0.5, 1.5]] * 3)


@needs_cuda
@pytest.mark.parametrize("tie_rel_tol", [-1e-12, math.inf])
def test_tie_rel_tol_is_checked_on_the_cuda_backend_too(tie_rel_tol):
    # The CUDA kernel does not use it, but used to: -1e-12 hung it, inf gave infinite rates.
    problem = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0]])
    with pytest.raises(InputError, match=re.escape(f"tie_rel_tol must be a number in [0, 1), got {tie_rel_tol!r}")):
        problem.solve("cuda", tie_rel_tol=tie_rel_tol)


@needs_cuda
def test_no_flows():
    assert solve_batch([], [[1.0], [2.0]], backend="cuda").shape == (2, 0)


@needs_cuda
def test_no_links_only_caps():
    rates = solve_batch([[], []], np.ones((2, 0)), caps_Bps=[[3.0, 4.0], [5.0, 6.0]], backend="cuda")
    assert rates.tolist() == [[3.0, 4.0], [5.0, 6.0]]


# --- ahead-of-time compilation (no GPU) -----------------------------------------------------------

KERNEL_MODULES = ("cuda_maxmin", "cuda_timeline")


def cuda_kernels():
    """Every CUDA kernel of flowsim_kernels' CUDA modules, by name, with its signature."""
    import importlib

    from numba import cuda

    kernels = {}
    for module_name in KERNEL_MODULES:
        module = importlib.import_module(f"flowsim_kernels.{module_name}")
        for name, obj in vars(module).items():
            if isinstance(obj, cuda.dispatcher.CUDADispatcher) and name.endswith("_kernel"):
                kernels[name] = (obj, module.KERNEL_SIGNATURES.get(name))
    return kernels


@needs_compiler
def test_every_kernel_has_a_signature():
    kernels = cuda_kernels()
    assert {"max_min_fair_batch_kernel", "simulate_batch_kernel", "simulate_blocks_kernel"} <= set(kernels)
    assert all(signature is not None for _, signature in kernels.values())


@needs_compiler
@pytest.mark.parametrize("cc", [(9, 0)], ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_every_kernel_compiles_to_ptx_and_assembles(cc, monkeypatch):
    import numba.cuda.dispatcher
    from numba import cuda

    # A device function (simulate_batch_kernel calls one) compiles for the current GPU's
    # compute capability; without a GPU, that is the one compiled for here.
    device = types.SimpleNamespace(compute_capability=cc)
    monkeypatch.setattr(numba.cuda.dispatcher, "get_current_device", lambda: device)
    arch = f"sm_{cc[0]}{cc[1]}"
    for name, (kernel, signature) in cuda_kernels().items():
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
        assert f".target {arch}" in ptx
        assert ".entry" in ptx and name in ptx
        # nvJitLink runs ptxas: the PTX must assemble to machine code for that chip.
        assert cubin_size(ptx, arch) > 0


def cubin_size(ptx, arch):
    """Bytes of the cubin that nvJitLink links from ``ptx`` for ``arch`` (no GPU needed)."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "flowsim_kernels")
        nvjitlink.complete(handle)
        return nvjitlink.get_linked_cubin_size(handle)
    finally:
        nvjitlink.destroy(handle)


# --- time simulations (GPU or simulator) ----------------------------------------------------------

#: (threads per run, runs with fewer flows one per thread): every run on a thread; the
#: simulator's blocks of 2 threads (it runs a block's threads as Python threads); the GPU's
#: own blocks, with and without small runs on threads.
TIME_LAYOUTS = [(1, 0), (2, 8)] if SIMULATOR else [(1, 0), (32, 32), (64, 32), (256, 0)]


@needs_cuda
@pytest.mark.parametrize(("threads", "small"), TIME_LAYOUTS, ids=lambda v: str(v))
def test_time_batch_matches_the_cpu_batch(threads, small, monkeypatch):
    from flowsim.collectives import collective_workload
    from flowsim.engine import prepare
    from flowsim.fabrics import build_cluster
    from flowsim.timeline import run_many, simulate_prepared
    from flowsim_kernels import cuda_timeline
    from test_engine import engine_kwargs, random_scenario

    monkeypatch.setattr(cuda_timeline, "THREADS_PER_RUN", threads)
    monkeypatch.setattr(cuda_timeline, "SMALL_RUN_FLOWS", small)
    rng = np.random.default_rng(7)
    # Runs with more flows than a block has threads, and fewer; dependencies, caps, zero bytes.
    scenarios = [random_scenario(rng, n_flows=n, n_links=int(rng.integers(3, 6))) for n in (1, 5, 12, 24)]
    prepared = [prepare(routes, capacity, size, **engine_kwargs(kw)) for routes, capacity, size, kw in scenarios]
    for cpu, gpu in zip(simulate_prepared(prepared), simulate_prepared(prepared, backend="cuda"), strict=True):
        for times in ("ready_s", "transfer_start_s", "finish_s"):
            np.testing.assert_allclose(getattr(gpu, times), getattr(cpu, times), rtol=1e-12)
        assert (gpu.n_events, gpu.n_rate_updates, gpu.n_rates_resolved) == (
            cpu.n_events, cpu.n_rate_updates, cpu.n_rates_resolved)
    topology = build_cluster("dgx_h100", 1, figure="effective")
    runs = [(topology, collective_workload(topology, "all_reduce", size).workload) for size in (1 << 16, 1 << 22)]
    for cpu, gpu in zip(run_many(runs), run_many(runs, backend="cuda"), strict=True):
        assert gpu.result.n_flow_classes < len(gpu.workload)
        np.testing.assert_allclose(gpu.result.finish_s, cpu.result.finish_s, rtol=1e-12)


@needs_cuda
def test_threads_per_run_must_be_one_or_a_power_of_two(monkeypatch):
    from flowsim.engine import prepare
    from flowsim.timeline import simulate_prepared
    from flowsim_kernels import cuda_timeline

    monkeypatch.setattr(cuda_timeline, "THREADS_PER_RUN", 48)
    with pytest.raises(ValueError, match="THREADS_PER_RUN must be 1 or a power of two from 2 to 256, not 48"):
        simulate_prepared([prepare([[0]], [1.0], [1.0])], backend="cuda")
