"""Many time simulations at once (:mod:`flowsim.timeline`) against the CPU engine, one run after
another, on the same runs in the same session.

The runs: nccl-tests-style sweeps (8 B to 8 GiB, factor 4) of all-reduce, all-gather and
reduce-scatter on 1 and 2 DGX H100, NCCL's choice of algorithm at each size, laid out, routed
and grouped into flow classes before timing (96 runs of 4 to about 1,000 classes). A round
simulates all of them: in one batch on the CPU backend (every core), or with
:func:`flowsim.engine.simulate` run by run on the same classes. ``--flows-scale`` keeps a
share of the sizes (at least 4 a collective). ``extra_info["runs_per_s"]`` is runs over the
fastest round.
"""

import pytest

from flowsim.collectives import collective_workload
from flowsim.engine import simulate
from flowsim.fabrics import build_cluster
from flowsim.pipeline import prepare_routed
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.timeline import simulate_prepared

EXPONENTS = list(range(3, 34, 2))


@pytest.fixture(scope="module")
def prepared_runs(request):
    scale = request.config.getoption("--flows-scale")
    exponents = EXPONENTS if scale >= 1 else EXPONENTS[:: max(1, min(len(EXPONENTS) // 4, round(1 / scale)))]
    runs = []
    for nodes in (1, 2):
        topology = build_cluster("dgx_h100", nodes, figure="effective")
        router = Router(topology)
        for collective in ("all_reduce", "all_gather", "reduce_scatter"):
            for e in exponents:
                workload = collective_workload(topology, collective, 1 << e, router=router).workload
                routes = router.route(workload.src, workload.dst)
                runs.append(prepare_routed(topology, workload, routes, classes=True))
    return runs


def engine_one_by_one(runs):
    results = []
    for run in runs:
        inp = run.solved
        results.append(simulate(
            Routes.from_csr(inp.flow_link_indptr, inp.flow_link_indices, inp.capacity_Bps.shape[0]), inp.capacity_Bps, inp.size_bytes, latency_s=inp.latency_s, start_s=inp.start_s,
            weights=inp.weight, caps_Bps=inp.cap_Bps, depends_on=(inp.dep_indptr, inp.dep_indices),
            delay_s=inp.delay_s, overhead_s=inp.overhead_s,
        ))
    return results


@pytest.mark.parametrize("how", ["batch_cpu", "engine"], ids=lambda h: f"how={h}")
def test_runs_per_second(benchmark, prepared_runs, how):
    simulate_all = (lambda: simulate_prepared(prepared_runs)) if how == "batch_cpu" else (
        lambda: engine_one_by_one(prepared_runs))
    simulate_all()  # warm-up: compile or load the kernels
    results = benchmark.pedantic(simulate_all, rounds=3, iterations=1)
    assert len(results) == len(prepared_runs)
    benchmark.extra_info["n_runs"] = len(prepared_runs)
    benchmark.extra_info["classes"] = sum(int(r.solved.size_bytes.shape[0]) for r in prepared_runs)
    if benchmark.stats is not None:
        benchmark.extra_info["runs_per_s"] = len(prepared_runs) / benchmark.stats.stats.min
