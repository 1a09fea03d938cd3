"""Batched max-min throughput on an NVIDIA GPU against all CPU cores, once their answers agree.

Run from the repository root, with flowsim installed (``pip install -e '.[cuda]'``) or
with ``PYTHONPATH=.:kernels`` where nothing can be installed::

    python benchmarks/gpu/bench_gpu.py                  # GPU and CPU, the full table
    python benchmarks/gpu/bench_gpu.py --threads 256 512 1024   # a GPU column per block size
    python benchmarks/gpu/bench_gpu.py --shared         # instances share weights and caps
    python benchmarks/gpu/bench_gpu.py --resident       # also with the inputs left on the GPU
    python benchmarks/gpu/bench_gpu.py --cpu-only       # the CPU column alone, no GPU needed
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu/bench_gpu.py --smoke   # tiny, on the simulator

First the GPU's rates are checked against the CPU's on seeded random batches (relative 1e-9),
then each size's batch is timed end to end (host-device copies included) and a table of
instances per second is printed, with a GPU column for each largest block size asked for
(``--threads``; the launcher's default when none is). A block size the compiled kernel cannot
launch (too many registers a thread) is reported and left out. With ``--resident``, two more
columns time the kernel on inputs already on the GPU, as a sweep that kept its instances there
between solves would: with the rates copied back, and the kernel alone. Exit status: 0 on success, 1
if the GPU and CPU disagree, 2 if the CUDA backend cannot run here (without ``--cpu-only``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import os
import sys
import time
from collections.abc import Iterator

import numba
import numpy as np

from flowsim import Routes
from flowsim.batched import BackendUnavailable, BatchProblem, resolve_backend

#: (flows per instance, instances per GPU batch, instances per CPU batch). GPU batches fill
#: an H200 (132 multiprocessors, one block per instance) at least twice over; the CPU times
#: the first instances of the same batch, enough to keep 16 cores busy.
SIZES = [(1_000, 8192, 2048), (10_000, 1024, 256), (100_000, 264, 32)]
SMOKE_SIZES = [(24, 3, 3), (60, 2, 2)]
#: (flows, links, instances, integer capacities) of the batches checked before timing.
CHECKS = [(40, 6, 8, False), (40, 6, 8, True), (500, 60, 16, False), (3000, 300, 8, True)]
SMOKE_CHECKS = [(16, 4, 2, False), (16, 4, 2, True)]
RTOL = 1e-9


def random_batch(
    rng: np.random.Generator, n_flows: int, n_links: int, n_instances: int, ties: bool = False, shared: bool = False
) -> BatchProblem:
    """Shared routes of 2 to 6 distinct links (``n_links >= 2``); capacities, weights and
    20% caps per instance, or with ``shared`` weights and caps drawn once for all instances.

    With ``ties``, capacities are small integers (and caps 0.5-50) and weights 1, so many links saturate at
    exactly the same level.
    """
    max_hops = min(6, n_links)
    hops = rng.integers(2, max_hops + 1, n_flows)
    indptr = np.zeros(n_flows + 1, dtype=np.int64)
    np.cumsum(hops, out=indptr[1:])
    # Each route walks forward from a random link by steps that add up to less than
    # n_links, so its links are distinct.
    steps = rng.integers(1, (n_links - 1) // (max_hops - 1) + 1, indptr[-1])
    starts = indptr[:-1]
    steps[starts] = rng.integers(0, n_links, n_flows)
    walk = np.cumsum(steps)
    walk -= np.repeat(walk[starts] - steps[starts], hops)
    routes = Routes.from_csr(indptr, walk % n_links, n_links)
    shape = (n_flows,) if shared else (n_instances, n_flows)
    if ties:
        capacity = rng.integers(1, 4, (n_instances, n_links)) * 40.0
        weight = np.ones(shape)
    else:
        capacity = rng.uniform(10e9, 400e9, (n_instances, n_links))
        weight = rng.choice([0.5, 1.0, 2.0, 3.0], shape)
    # Caps on the capacities' scale: flowsim takes capacities and caps at most 1e6 apart.
    low, high = (0.5, 50.0) if ties else (0.5e9, 50e9)
    cap = np.where(rng.random(shape) < 0.2, rng.uniform(low, high, shape), np.inf)
    return BatchProblem.build(routes, capacity, weight, cap)


def agree(gpu: np.ndarray, cpu: np.ndarray, what: str) -> bool:
    rel = np.abs(gpu - cpu) / cpu
    worst = float(rel.max(initial=0.0))
    if worst <= RTOL:
        print(f"  ok    {what}: max relative difference {worst:.1e}")
        return True
    i, f = np.unravel_index(int(np.argmax(rel)), rel.shape)
    print(f"  FAIL  {what}: instance {i} flow {f}: GPU {gpu[i, f]!r} CPU {cpu[i, f]!r} (relative {worst:.1e})")
    return False


def best_time(solve, repeats: int) -> float:
    """Best wall-clock seconds of ``repeats`` calls, after one untimed warm-up call."""
    solve()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        solve()
        best = min(best, time.perf_counter() - start)
    return best


@contextlib.contextmanager
def launcher_setting(module_name: str, name: str, value: int) -> Iterator[None]:
    """Set ``flowsim_kernels.<module_name>.<name>`` (a CUDA launcher's setting) to ``value``
    inside the ``with``."""
    module = importlib.import_module(f"flowsim_kernels.{module_name}")
    default = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, default)


def largest_block(threads: int) -> contextlib.AbstractContextManager[None]:
    """Let the CUDA launcher use blocks of up to ``threads`` threads inside the ``with``."""
    return launcher_setting("cuda_maxmin", "MAX_THREADS_PER_BLOCK", threads)


def launchable(threads: list[int]) -> list[int]:
    """The block sizes of ``threads`` that the compiled kernel can launch; prints its resources.

    Call after the kernel ran once, so that it is compiled. The simulator launches any size.
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return threads
    from flowsim_kernels.cuda_maxmin import max_min_fair_batch_kernel

    kernel = next(iter(max_min_fair_batch_kernel.overloads.values()))
    print(f"kernel: {kernel.regs_per_thread} registers a thread, blocks of up to {kernel.max_threads_per_block} threads")
    for n in threads:
        if n > kernel.max_threads_per_block:
            print(f"  blocks of {n} threads cannot launch: left out")
    return [n for n in threads if n <= kernel.max_threads_per_block]


def resident_rates(problem: BatchProblem, repeats: int) -> tuple[float, float, np.ndarray]:
    """Instances per second of the launcher's kernel, block size and work arrays on inputs
    copied to the GPU beforehand: with the rates copied back to the host, and the kernel
    alone; and the rates."""
    from numba import cuda

    from flowsim_kernels import cuda_maxmin

    routes = problem.routes
    n_instances, n_flows, n_links = problem.n_instances, problem.n_flows, problem.n_links
    inputs = [cuda.to_device(np.ascontiguousarray(a)) for a in (
        routes.flow_link_indptr, routes.flow_link_indices, problem.link_flow_indptr, problem.link_flow_indices,
        np.broadcast_to(problem.capacity_Bps, (n_instances, n_links)),
        np.broadcast_to(problem.weight, (n_instances, n_flows)),
        np.broadcast_to(problem.cap_Bps, (n_instances, n_flows)))]
    by_link, by_flow = (n_instances, n_links), (n_instances, n_flows)
    work = [cuda.device_array(by_link, np.float64), cuda.device_array(by_link, np.bool_),
            cuda.device_array(by_link, np.int32), cuda.device_array(by_link, np.float64),
            cuda.device_array(by_link, np.int32),
            cuda.device_array((n_instances, problem.link_flow_indices.shape[0]), np.int32),
            cuda.device_array(by_flow, np.int32), cuda.device_array(by_flow, np.float64)]
    rate = cuda.device_array(by_flow, np.float64)
    threads = cuda_maxmin.threads_per_block(n_flows, n_links)

    def kernel() -> None:
        cuda_maxmin.max_min_fair_batch_kernel[n_instances, threads](*inputs, *work, rate)
        cuda.synchronize()

    host = np.empty(by_flow)
    with_copy = best_time(lambda: (kernel(), rate.copy_to_host(host)), repeats)
    return n_instances / with_copy, n_instances / best_time(kernel, repeats), host


def cuda_usable() -> bool:
    """Whether the CUDA backend runs here; if not, says why on stderr."""
    try:
        resolve_backend("cuda")
    except BackendUnavailable as err:
        print(f"{err}\n(run with --cpu-only to time the CPU path alone)", file=sys.stderr)
        return False
    return True


def describe_machine(use_cuda: bool) -> None:
    print(f"numba {numba.__version__}, numpy {np.__version__}, {numba.get_num_threads()} CPU threads")
    if use_cuda:
        from numba import cuda

        device = "simulator" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else cuda.get_current_device().name
        print(f"numba-cuda {importlib.metadata.version('numba-cuda')}, device: {device}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a quick run, e.g. on the CUDA simulator")
    parser.add_argument("--cpu-only", action="store_true", help="time the CPU path alone")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per size (best counts)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument(
        "--shared",
        action="store_true",
        help="time batches whose instances share weights and caps (a sweep over capacities)",
    )
    parser.add_argument(
        "--resident",
        action="store_true",
        help="also time the kernel on inputs left on the GPU (with the rates copied back, and alone)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        metavar="N",
        help="largest block sizes to time, powers of two (default: the launcher's)",
    )
    args = parser.parse_args(argv)

    use_cuda = not args.cpu_only
    if use_cuda and not cuda_usable():
        return 2
    describe_machine(use_cuda)
    rng = np.random.default_rng(args.seed)

    threads: list[int] = []
    if use_cuda:
        from flowsim_kernels import cuda_maxmin

        checks = [(random_batch(rng, *c), c[3]) for c in (SMOKE_CHECKS if args.smoke else CHECKS)]
        checks[0][0].solve("cuda")  # compiles the kernel, so that launchable() can read it
        threads = launchable(args.threads or [cuda_maxmin.MAX_THREADS_PER_BLOCK])
        if not threads:
            return 2
        print(f"checking GPU against CPU (relative {RTOL:g}):")
        ok = True
        for problem, ties in checks:
            cpu_rates = problem.solve("cpu")
            what = f"{problem.n_instances} x {problem.n_flows} flows over {problem.n_links} links{', ties' if ties else ''}"
            for n in threads:
                with largest_block(n):
                    ok &= agree(problem.solve("cuda"), cpu_rates, f"{what}, blocks <= {n}")
        if not ok:
            return 1

    rows = []
    for n_flows, gpu_instances, cpu_instances in SMOKE_SIZES if args.smoke else SIZES:
        n_links = max(8, n_flows // 8)
        problem = random_batch(rng, n_flows, n_links, gpu_instances if use_cuda else cpu_instances, shared=args.shared)
        cpu_problem = BatchProblem(
            problem.routes,
            problem.link_flow_indptr,
            problem.link_flow_indices,
            problem.capacity_Bps[:cpu_instances],
            problem.weight[:cpu_instances],
            problem.cap_Bps[:cpu_instances],
        )
        cpu_s = best_time(lambda p=cpu_problem: p.solve("cpu"), args.repeats)
        cpu_rate = cpu_instances / cpu_s
        incidences = problem.routes.n_incidences
        row = [f"{n_flows:,}", f"{n_links:,}", f"{incidences:,}", f"{cpu_instances:,}", f"{cpu_rate:,.0f}"]
        if use_cuda:
            row.append(f"{gpu_instances:,}")
            cpu_rates = cpu_problem.solve("cpu")
            best_rate = 0.0
            for n in threads:
                with largest_block(n):
                    gpu_s = best_time(lambda p=problem: p.solve("cuda"), args.repeats)
                    what = f"timed batch, {n_flows} flows, blocks <= {n}"
                    if not agree(problem.solve("cuda")[:cpu_instances], cpu_rates, what):
                        return 1
                row.append(f"{gpu_instances / gpu_s:,.0f}")
                best_rate = max(best_rate, gpu_instances / gpu_s)
            row.append(f"{best_rate / cpu_rate:.1f}x")
            if args.resident:
                with_copy, alone, rates = resident_rates(problem, args.repeats)
                if not agree(rates[:cpu_instances], cpu_rates, f"resident batch, {n_flows} flows"):
                    return 1
                row += [f"{with_copy:,.0f}", f"{with_copy / cpu_rate:.1f}x", f"{alone:,.0f}", f"{alone / cpu_rate:.1f}x"]
        rows.append(row)

    header = ["flows", "links", "incidences", "CPU batch", "CPU inst/s"]
    if use_cuda:
        header += ["GPU batch", *(f"GPU<={n} inst/s" for n in threads), "best GPU/CPU"]
        if args.resident:
            header += ["resident inst/s", "/CPU", "kernel alone inst/s", "/CPU"]
    widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(header)]
    print()
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
