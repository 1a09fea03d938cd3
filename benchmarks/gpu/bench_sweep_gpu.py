"""A whole time sweep (``flowsim sweep --backend``) on the GPU against all CPU cores, row for row.

Run from the repository root, with flowsim installed (``pip install -e '.[cuda]'``) or with
``PYTHONPATH=.:kernels``::

    python benchmarks/gpu/bench_sweep_gpu.py                       # data/sweeps/collectives_10k.toml
    python benchmarks/gpu/bench_sweep_gpu.py SWEEP.toml --workers 16
    python benchmarks/gpu/bench_sweep_gpu.py --cpu-only            # the CPU backend alone
    python benchmarks/gpu/bench_sweep_gpu.py --compare CUDA.h5 CPU.h5   # two tables written earlier
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu/bench_sweep_gpu.py --smoke   # tiny, on the simulator

The sweep runs as ``flowsim sweep SWEEP -o OUT --backend cuda`` runs it (:func:`flowsim.sweep.run_sweep`):
its runs built on ``--workers`` processes (default every core) and those that fit simulated
in batches on the backend, the others on the CPU engine (each row's ``ran_on``); then once
more with ``--backend cpu``, every batch on all CPU cores. Both start from empty journals and
compiled kernels (a tiny batch is simulated on each backend first). Every metric of every run
must agree to a relative 1e-9 (``n_events`` is each engine's own count and is not compared),
but for runs whose schedule turns on rounding, found by jittering their link capacities on
the CPU (:func:`agree`). Printed: runs, where they ran, the seconds spent simulating batches
(copies included) and in all, and runs per second each way. ``--compare CUDA.h5 CPU.h5``
runs nothing and checks two tables written earlier, as from
``flowsim sweep SWEEP -o CUDA.h5 --backend cuda`` on a GPU machine and
``flowsim sweep SWEEP -o CPU.h5 --backend cpu`` anywhere. Exit status: 0 on success, 1 if
the backends disagree or a run failed, 2 if the CUDA backend cannot run here (without
``--cpu-only`` or ``--compare``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_gpu import cuda_usable, describe_machine  # beside this file

from flowsim.collectives import collective_workload
from flowsim.fabrics import build_cluster
from flowsim.pipeline import prepare_routed
from flowsim.routing import Router
from flowsim.scenario import route_scenario, scenario_from_document
from flowsim.sweep import Sweep, load_sweep, parse_sweep, read_results, run_sweep
from flowsim.sweep.spec import RunTask
from flowsim.timeline import simulate_prepared

RTOL = 1e-9
#: Relative jitter of link capacities that tells a run whose schedule turns on rounding.
JITTER = 1e-13
#: Seeds of the jitter draws, one jittered simulation each.
SEEDS = tuple(range(1, 9))
DEFAULT_SWEEP = Path(__file__).parents[2] / "data" / "sweeps" / "collectives_10k.toml"
#: ``--smoke``: four tiny runs of the default sweep's base scenario (for the CUDA simulator).
SMOKE_SWEEP = """[sweep]
scenario = "{scenario}"
metrics = ["makespan_s", "n_flows", "max_link_utilization", "n_events"]
[sweep.grid]
"topology.n_nodes" = [1]
"workload.collective.0.op" = ["all_reduce", "broadcast"]
"workload.collective.0.size_bytes" = [8, 4096]
"""


def warm_up(backend: str) -> None:
    """Compile ``backend``'s batch kernels (and the CPU engine's) on a one-server all-reduce."""
    topology = build_cluster("dgx_h100", 1, figure="effective")
    router = Router(topology)
    workload = collective_workload(topology, "all_reduce", 1 << 20, router=router).workload
    run = prepare_routed(topology, workload, router.route(workload.src, workload.dst), classes=True)
    simulate_prepared([run, run], backend=backend)


def differences(sweep: Sweep, got: dict, want: dict) -> np.ndarray:
    """Each run's largest relative difference of a metric (``n_events``, each engine's own
    count, aside) between two results tables of ``sweep``."""
    worst = np.zeros(len(sweep.runs))
    for metric in sweep.metrics:
        if metric != "n_events":
            a, b = np.asarray(got[metric], float), np.asarray(want[metric], float)
            worst = np.maximum(worst, np.abs(a - b) / np.maximum(np.abs(b), 1e-300))
    return worst


def jittered_makespans(task: RunTask) -> np.ndarray:
    """The makespan of ``task``'s run on the CPU batch as built, then with every link's
    capacity scaled by its own random factor within 1 +- :data:`JITTER`, once per seed of
    :data:`SEEDS`: how far the run moves when its symmetries are broken at that scale."""
    scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    routes = route_scenario(scenario)
    runs = [prepare_routed(scenario.topology, scenario.workload, routes, classes=True)]
    for seed in SEEDS:
        capacity = scenario.topology.link_capacity_Bps
        factor = 1 + JITTER * np.random.default_rng(seed).uniform(-1, 1, capacity.size)
        topology = dataclasses.replace(scenario.topology, link_capacity_Bps=capacity * factor)
        runs.append(prepare_routed(topology, scenario.workload, routes, classes=True))
    return np.array([float(np.max(result.finish_s)) for result in simulate_prepared(runs)])


def agree(sweep: Sweep, gpu: dict, cpu: dict, workers: int | None) -> bool:
    """Whether the GPU's results table of ``sweep`` is the CPU's, said on stdout.

    Every run whose metrics differ beyond :data:`RTOL` is tried on the CPU with its link
    capacities jittered by 1e-13 (:func:`jittered_makespans`). Where its makespan moves
    beyond ``RTOL`` under that jitter, the run's schedule turns on rounding (a pipelined
    broadcast or reduce across servers settles into one of several schedules a percent or
    so apart, docs/model.md "Time"), and the GPU, whose atomic sums round in another order,
    cannot be held to ``RTOL`` on it. Anywhere else a difference is an error.
    """
    by_gpu = differences(sweep, gpu, cpu)
    apart = np.flatnonzero(by_gpu > RTOL)
    print(f"{len(sweep.runs) - apart.size:,} of {len(sweep.runs):,} runs: every metric within {RTOL:g} "
          f"(largest relative difference, cuda against cpu, {np.max(by_gpu[by_gpu <= RTOL], initial=0.0):.1e})")
    if apart.size == 0:
        return True
    tasks = [sweep.task(sweep.runs[i]) for i in apart]
    with concurrent.futures.ProcessPoolExecutor(workers or os.cpu_count()) as pool:
        makespans = list(pool.map(jittered_makespans, tasks))
    spread = np.array([(m.max() - m.min()) / m[0] for m in makespans])
    gap = by_gpu[apart]
    rounding = spread > RTOL
    print(f"{apart.size:,} runs differ, by up to {gap.max():.1e} (median {np.median(gap):.1e}); {int(rounding.sum()):,} "
          f"of them move on the CPU by up to {spread.max():.1e} (median {np.median(spread):.1e}) in makespan when "
          f"their link capacities are jittered by {JITTER:g}")
    for i, gpu_gap, cpu_spread in zip(apart[~rounding], gap[~rounding], spread[~rounding], strict=True):
        print(f"  run {i} {sweep.runs[i].params}: cuda differs by {gpu_gap:.1e}, its jitter moves it {cpu_spread:.1e}")
    return bool(rounding.all())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", nargs="?", default=DEFAULT_SWEEP, type=Path,
                        help="a solve = 'time' sweep file (default: data/sweeps/collectives_10k.toml)")
    parser.add_argument("--workers", type=int, help="processes that build the runs (default: every core)")
    parser.add_argument("--cpu-only", action="store_true", help="run the sweep on the CPU backend alone")
    parser.add_argument("--smoke", action="store_true", help="four tiny runs instead (for the CUDA simulator)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("CUDA.h5", "CPU.h5"),
                        help="run nothing: compare the results tables of the sweep written on each backend")
    args = parser.parse_args(argv)
    if args.compare:
        sweep = load_sweep(args.sweep)
        tables = [read_results(path).columns for path in args.compare]
        return 0 if agree(sweep, *tables, args.workers) else 1
    use_cuda = not args.cpu_only
    if use_cuda and not cuda_usable():
        return 2
    describe_machine(use_cuda)
    if args.smoke:
        scenario = (Path(__file__).parents[2] / "data" / "scenarios" / "collective_dgx_h100.toml").resolve()
        sweep = parse_sweep(SMOKE_SWEEP.format(scenario=scenario.as_posix()), source="--smoke")
    else:
        sweep = load_sweep(args.sweep)
    backends = ["cuda", "cpu"] if use_cuda else ["cpu"]
    columns, rows = {}, []
    with tempfile.TemporaryDirectory() as scratch:
        for backend in backends:
            warm_up(backend)
            start = time.perf_counter()
            outcome = run_sweep(sweep, Path(scratch) / f"{backend}.h5", backend=backend, workers=args.workers)
            wall_s = time.perf_counter() - start
            got = read_results(outcome.output).columns
            columns[backend] = got
            places, counts = np.unique(got["ran_on"], return_counts=True)
            where = ", ".join(f"{count:,} on {place}" for place, count in zip(places, counts, strict=True))
            print(f"--backend {backend}: {outcome.n_runs:,} runs ({where}), {outcome.n_batches} batch(es), "
                  f"{outcome.n_failed} failed; {outcome.batch_s:.2f} s simulating batches, {wall_s:.1f} s in all")
            if outcome.n_failed:
                return 1
            rows.append((backend, outcome.n_runs, outcome.batch_s, wall_s))
    if use_cuda and not agree(sweep, columns["cuda"], columns["cpu"], args.workers):
        return 1
    print()
    print(f"{'backend':8s} {'runs':>8s} {'batch s':>9s} {'total s':>9s} {'runs/s':>9s}")
    for backend, n, batch_s, wall_s in rows:
        print(f"{backend:8s} {n:8,d} {batch_s:9.2f} {wall_s:9.1f} {n / wall_s:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
