"""Time sweeps of collectives on an NVIDIA GPU against all CPU cores, once their answers agree.

Run from the repository root, with flowsim installed (``pip install -e '.[cuda]'``) or with
``PYTHONPATH=.:kernels``::

    python benchmarks/gpu/bench_time_gpu.py                 # 10,000 runs, GPU and CPU
    python benchmarks/gpu/bench_time_gpu.py --threads-per-run 1 32 64   # a GPU row for each
    python benchmarks/gpu/bench_time_gpu.py --cpu-only      # the CPU batch alone, no GPU needed
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu/bench_time_gpu.py --smoke   # tiny, on the simulator

The runs are collectives on DGX H100 clusters (sizes x node counts x collectives, NCCL's
choice of algorithm for each), laid out, routed and grouped into flow classes once
(:func:`flowsim.pipeline.prepare_routed`); the distinct runs are repeated to ``--runs`` in the batch
(the batch's time, the best of ``--repeats`` calls, is simulation alone: laying out, routing and grouping are timed apart).
The batch is then simulated by :func:`flowsim.timeline.simulate_prepared` on the CPU (one run
per core) and on the GPU (one run per thread), every run's finish times checked against the
CPU's (relative 1e-9), and runs per second printed, end to end (host-device copies
included), for each ``--threads-per-run`` (1: a run per GPU thread; a power of two: a run per
block of that many threads; default the launcher's), beside the CPU engine's (:func:`flowsim.simulate`, one run after another on one
core) for the distinct runs. Exit status: 0 on success, 1 if GPU and CPU disagree, 2 if the
CUDA backend cannot run here (without ``--cpu-only``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numba
import numpy as np
from bench_gpu import cuda_usable, describe_machine, launcher_setting  # beside this file

from flowsim.collectives import collective_workload
from flowsim.fabrics import build_cluster
from flowsim.pipeline import prepare_routed, simulate_routed
from flowsim.routing import Router
from flowsim.timeline import simulate_prepared

RTOL = 1e-9
NODES = (1, 2, 4, 8)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
EXPONENTS = range(3, 34, 2)  # 8 B to 8 GiB, every factor of 4
SMOKE = ((1,), ("all_reduce",), (10, 20))


def distinct_runs(nodes, collectives, exponents):
    """The prepared runs and the (topology, workload) pairs they came from."""
    runs, pairs = [], []
    for n in nodes:
        topology = build_cluster("dgx_h100", n, figure="effective")
        router = Router(topology)
        for collective in collectives:
            for e in exponents:
                workload = collective_workload(topology, collective, 1 << e, router=router).workload
                routes = router.route(workload.src, workload.dst)
                runs.append(prepare_routed(topology, workload, routes, classes=True))
                pairs.append((topology, workload, routes))
    return runs, pairs


def timed(function, repeats: int = 1):
    """``function``'s result and its best wall-clock seconds over ``repeats`` calls."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = function()
        best = min(best, time.perf_counter() - start)
    return out, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the batch (default 10,000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls of each batch (best counts)")
    parser.add_argument("--cpu-only", action="store_true", help="time the CPU batch alone")
    parser.add_argument("--smoke", action="store_true", help="a few tiny runs (for the CUDA simulator)")
    parser.add_argument("--threads-per-run", type=int, nargs="+", metavar="N",
                        help="GPU threads per run to time: 1, or a power of two up to 256 (default: the launcher's)")
    args = parser.parse_args(argv)
    use_cuda = not args.cpu_only
    if use_cuda and not cuda_usable():
        return 2
    describe_machine(use_cuda)
    axes = SMOKE if args.smoke else (NODES, COLLECTIVES, EXPONENTS)
    (runs, pairs), build_s = timed(lambda: distinct_runs(*axes))
    solved = [r.solved.size_bytes.shape[0] for r in runs]
    n_runs = 4 if args.smoke else args.runs
    batch = [runs[i % len(runs)] for i in range(n_runs)]
    print(f"{len(runs)} distinct runs laid out, routed and grouped in {build_s:.1f} s: {min(solved)}-"
          f"{max(solved)} flow classes (median {int(np.median(solved))}); the batch repeats them to {n_runs:,}")

    simulate_prepared(batch[:2])  # compiles the CPU kernels, the batch's and the engine's
    simulate_routed(*pairs[0], classes=True)
    engine_s = 0.0
    for topology, workload, routes in pairs:
        engine_s += timed(lambda t=topology, w=workload, r=routes: simulate_routed(t, w, r, classes=True))[1]
    cpu, cpu_s = timed(lambda: simulate_prepared(batch), args.repeats)
    rows = [("CPU engine, one run after another", len(runs), engine_s),
            (f"CPU batch, {numba.get_num_threads()} threads", n_runs, cpu_s)]
    best_gpu_s = np.inf
    if use_cuda:
        from flowsim_kernels import cuda_timeline

        for threads in args.threads_per_run or [cuda_timeline.THREADS_PER_RUN]:
            with launcher_setting("cuda_timeline", "THREADS_PER_RUN", threads):
                simulate_prepared(batch[:2], backend="cuda")  # compiles the GPU kernel
                gpu, gpu_s = timed(lambda: simulate_prepared(batch, backend="cuda"), args.repeats)
            worst = max(float(np.max(np.abs(g.finish_s / c.finish_s - 1), initial=0.0)) for g, c in zip(gpu, cpu))
            print(f"GPU ({threads} threads a run) against CPU batch: largest relative difference of a finish time "
                  f"{worst:.2e}")
            if not worst <= RTOL:
                return 1
            what = "GPU batch, one run per thread" if threads == 1 else f"GPU batch, a run per {threads} threads"
            rows.append((what, n_runs, gpu_s))
            best_gpu_s = min(best_gpu_s, gpu_s)
    print()
    print(f"{'':36s} {'runs':>8s} {'seconds':>9s} {'runs/s':>10s}")
    for what, n, seconds in rows:
        print(f"{what:36s} {n:8,d} {seconds:9.3f} {n / seconds:10,.0f}")
    if use_cuda:
        print(f"best GPU / CPU batch: {cpu_s / best_gpu_s:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
