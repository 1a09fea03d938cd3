"""Event-engine wall time on a k=16 fat-tree (1,024 hosts, NDR links).

(a) Poisson arrivals at 50% and 80% of host-link load, Pareto (shape 1.2) sizes;
(b) a burst of 100,000 flows all at t=0 of one size (the collective case: flows at one level
finish together), exact; the same with Pareto sizes, exact at 10,000 and 20,000 flows and
with coarse time windows (``time_rel_tol`` 1e-2 and 1e-3) at 100,000; (c) a million flows
with Poisson arrivals.
``extra_info`` records events, events per second, and flows re-solved and rates changed per
rate update.
Flow counts scale with ``--flows-scale``.
"""

import numpy as np
import pytest

from flowsim.engine import simulate
from instances import MEAN_SIZE_BYTES, fat_tree_traffic

K = 16


def run_and_record(benchmark, topology, routes, size, start, mode="incremental", **options):
    args = (routes, topology.link_capacity_Bps, size)
    kwargs = dict(start_s=start, latency_s=topology.link_latency_s, mode=mode, **options)
    result = benchmark.pedantic(simulate, args=args, kwargs=kwargs, rounds=1, iterations=1)
    assert np.all(np.isfinite(result.finish_s))
    benchmark.extra_info.update(
        n_flows=int(size.size),
        n_events=result.n_events,
        rates_resolved_per_update=result.n_rates_resolved / max(result.n_rate_updates, 1),
        rates_changed_per_update=result.n_rates_changed / max(result.n_rate_updates, 1),
    )
    if benchmark.stats is not None:
        benchmark.extra_info["events_per_s"] = result.n_events / benchmark.stats.stats.min
    return result


@pytest.fixture(scope="module", autouse=True)
def compiled():
    topology, routes, size, start = fat_tree_traffic(K, 50, 0.5, seed=0)
    simulate(routes, topology.link_capacity_Bps, size, start_s=start)


@pytest.mark.parametrize("load", [0.5, 0.8], ids=["load=50%", "load=80%"])
def test_poisson_100k(benchmark, flows_scale, load):
    n = max(int(100_000 * flows_scale), 100)
    run_and_record(benchmark, *fat_tree_traffic(K, n, load, seed=1))


@pytest.mark.parametrize("mode", ["incremental", "full"])
def test_poisson_10k_incremental_vs_full(benchmark, flows_scale, mode):
    n = max(int(10_000 * flows_scale), 100)
    run_and_record(benchmark, *fat_tree_traffic(K, n, 0.5, seed=2), mode=mode)


def test_burst(benchmark, flows_scale):
    n = max(int(10_000 * flows_scale), 100)
    run_and_record(benchmark, *fat_tree_traffic(K, n, 0.0, seed=3))


def test_burst_20k(benchmark, flows_scale):
    # Twice the flows of test_burst, about 14 times the rate changes (docs/design.md, "the
    # heavy-tailed burst"): where the cost per rate change shows.
    n = max(int(20_000 * flows_scale), 100)
    run_and_record(benchmark, *fat_tree_traffic(K, n, 0.0, seed=3))


def test_burst_equal_sizes(benchmark, flows_scale):
    n = max(int(100_000 * flows_scale), 100)
    topology, routes, size, start = fat_tree_traffic(K, n, 0.0, seed=3)
    run_and_record(benchmark, topology, routes, np.full(n, MEAN_SIZE_BYTES), start)


@pytest.mark.parametrize("time_rel_tol", [1e-2, 1e-3])
def test_burst_coarse_time(benchmark, flows_scale, time_rel_tol):
    n = max(int(100_000 * flows_scale), 100)
    run_and_record(benchmark, *fat_tree_traffic(K, n, 0.0, seed=3), time_rel_tol=time_rel_tol)


def test_poisson_1m(benchmark, flows_scale):
    n = max(int(1_000_000 * flows_scale), 100)
    run_and_record(benchmark, *fat_tree_traffic(K, n, 0.5, seed=4))
