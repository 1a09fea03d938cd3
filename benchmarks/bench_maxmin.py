"""Max-min solve time on k-ary fat-trees with random host pairs routed by ECMP.

Reported per solve and per flow-link incidence (``extra_info["ns_per_incidence"]``).
"""

import pytest

from flowsim import FairShareProblem
from instances import fat_tree_random_pairs

CASES = [(16, 10_000), (16, 100_000), (32, 10_000), (32, 100_000), (32, 1_000_000)]


@pytest.mark.parametrize("k, n_flows", CASES, ids=[f"k={k}-n_flows={n}" for k, n in CASES])
def test_max_min_solve(benchmark, k, n_flows):
    topology, routes = fat_tree_random_pairs(k, n_flows, seed=k)
    problem = FairShareProblem.build(routes, topology.link_capacity_Bps)
    problem.solve()  # compile (or load from cache) outside the timing
    rates = benchmark(problem.solve)
    assert rates.shape == (n_flows,)
    benchmark.extra_info["n_links"] = problem.n_links
    benchmark.extra_info["n_incidences"] = routes.n_incidences
    if benchmark.stats is not None:
        benchmark.extra_info["ns_per_incidence"] = benchmark.stats.stats.min / routes.n_incidences * 1e9
