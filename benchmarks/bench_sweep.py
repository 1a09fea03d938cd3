"""Sweep throughput, runs per second: serial, a local pool of 2 worker processes, a Dask
LocalCluster of 2 workers, and batches on the CPU and GPU backends (``--backend``: runs built
here, simulated together by :mod:`flowsim.timeline`); and rates mode (``solve = "rates"``),
batched on each backend that can run here.

Two small scenarios: ``one_dgx_all_reduce``, a 1 MiB all-reduce (ring, hierarchical or
tree) on one DGX H100, a few hundred flows and about 2 ms a run; ``two_dgx_collectives``,
``data/scenarios/collectives_two_dgx_h100.toml`` (a 256 MiB hierarchical all-reduce and an
all-to-all on two DGX H100), tens of milliseconds a run. A round is a whole sweep into a
fresh results file, so the pool and cluster start-up (spawning workers, importing flowsim,
loading Numba's cache) is counted, as a user of ``flowsim sweep`` pays it.
``extra_info["runs_per_s"]`` is runs over the fastest round. The run count (48) scales with
``--flows-scale`` (at least 6).

The rates-mode case sweeps ``two_dgx_collectives``'s link figure and all-reduce size (from
256 MiB up in 1 MiB steps, where the size no longer changes how messages are sliced), so its
runs share routes and form one batch; a round builds every run (scenario, routes) in this
process and solves the batch, all that a user of ``flowsim sweep`` with ``solve = "rates"``
waits for.
"""

import itertools
from pathlib import Path

import pytest

from flowsim.batched import available_backends
from flowsim.sweep import load_sweep, run_sweep

ONE_DGX = """
[topology]
preset = "dgx_h100"
figure = "effective"

[[workload.collective]]
op = "all_reduce"
size_bytes = 1048576
"""
TWO_DGX = Path(__file__).parents[1] / "data" / "scenarios" / "collectives_two_dgx_h100.toml"
ENGINES = {"serial": {"workers": 1}, "pool": {"workers": 2}, "dask": {"workers": 2, "dask": "local"},
           "batch_cpu": {"backend": "cpu"}, "batch_cuda": {"backend": "cuda"}}


def sweep_of(tmp_path, scenario, n_runs):
    """``n_runs`` runs of ``scenario`` differing in their ECMP seed (and, on one DGX, the
    all-reduce algorithm)."""
    spec = tmp_path / "sweep.toml"
    if scenario == "one_dgx_all_reduce":
        (tmp_path / "base.toml").write_text(ONE_DGX)
        spec.write_text(
            '[sweep]\nscenario = "base.toml"\nmetrics = ["makespan_s", "busbw_Bps", "max_link_utilization"]\n'
            '[sweep.grid]\n"workload.collective.0.algorithm" = ["ring", "hierarchical", "tree"]\n'
            f'"options.seed" = {list(range(n_runs // 3))}\n'
        )
    else:
        spec.write_text(
            f'[sweep]\nscenario = "{TWO_DGX}"\nmetrics = ["makespan_s", "max_link_utilization"]\n'
            f'[sweep.grid]\n"options.seed" = {list(range(n_runs))}\n'
        )
    return load_sweep(spec)


@pytest.mark.parametrize("engine", list(ENGINES), ids=[f"engine={e}" for e in ENGINES])
@pytest.mark.parametrize("scenario", ["one_dgx_all_reduce", "two_dgx_collectives"], ids=lambda s: f"scenario={s}")
def test_runs_per_second(benchmark, tmp_path, flows_scale, scenario, engine):
    if engine == "dask":
        pytest.importorskip("distributed")
    if engine == "batch_cuda" and "cuda" not in available_backends():
        pytest.skip("no CUDA backend here: needs numba-cuda and a GPU")
    sweep = sweep_of(tmp_path, scenario, max(int(48 * flows_scale), 6))
    # Warm-up: compile (or load from the cache) the kernels here and for the workers.
    run_sweep(sweep, tmp_path / "warm.h5", **ENGINES[engine if engine.startswith("batch") else "serial"])
    outputs = (tmp_path / f"round{i}.h5" for i in itertools.count())

    def one_sweep():
        return run_sweep(sweep, next(outputs), **ENGINES[engine])

    outcome = benchmark.pedantic(one_sweep, rounds=3, iterations=1)
    assert outcome.n_ran == len(sweep.runs) and outcome.n_failed == 0
    benchmark.extra_info["n_runs"] = len(sweep.runs)
    if benchmark.stats is not None:
        benchmark.extra_info["runs_per_s"] = len(sweep.runs) / benchmark.stats.stats.min


@pytest.mark.parametrize("backend", ["cpu", "cuda"], ids=lambda b: f"backend={b}")
def test_rates_runs_per_second(benchmark, tmp_path, flows_scale, backend):
    if backend not in available_backends():
        pytest.skip("no CUDA backend here: needs numba-cuda and a GPU")
    n_sizes = max(int(48 * flows_scale), 6) // 2
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'[sweep]\nscenario = "{TWO_DGX}"\nsolve = "rates"\n'
        'metrics = ["aggregate_rate_Bps", "min_rate_Bps", "saturated_links", "drain_at_rates_s"]\n'
        '[sweep.grid]\n"topology.figure" = ["nominal", "effective"]\n'
        f'"workload.collective.0.size_bytes" = {[2**28 + 2**16 * (k + 1) for k in range(n_sizes)]}\n'
    )
    # The sizes stay inside one of NCCL's chunk counts (256 MiB + 64 KiB to + 1.5 MiB: 17
    # NVLSTree chunks per channel and head), so every run has the same flows and the sweep
    # solves them as one batch.
    sweep = load_sweep(spec)
    # Warm-up: compile (or load from the cache) the routing and solver kernels.
    run_sweep(sweep, tmp_path / "warm.h5", backend=backend)
    outputs = (tmp_path / f"round{i}.h5" for i in itertools.count())

    def one_sweep():
        return run_sweep(sweep, next(outputs), backend=backend)

    outcome = benchmark.pedantic(one_sweep, rounds=3, iterations=1)
    assert outcome.n_ran == len(sweep.runs) and outcome.n_failed == 0 and outcome.n_batches == 1
    benchmark.extra_info["n_runs"] = len(sweep.runs)
    if benchmark.stats is not None:
        benchmark.extra_info["runs_per_s"] = len(sweep.runs) / benchmark.stats.stats.min
