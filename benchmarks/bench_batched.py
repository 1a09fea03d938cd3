"""pytest-benchmark: a batch solved on all CPU cores against a loop of serial solves.

    pytest benchmarks/bench_batched.py                            # timings
    pytest benchmarks/bench_batched.py --benchmark-disable        # smoke run (CI)
    pytest benchmarks/bench_batched.py --benchmark-compare        # against the last saved run
"""

import numba
import numpy as np
import pytest

from flowsim import Routes
from flowsim.batched import BatchProblem
from flowsim_kernels.maxmin import max_min_fair

#: (flows per instance, instances): about the same number of flows per batch.
SIZES = [(1_000, 512), (10_000, 64), (100_000, 8)]


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


@pytest.fixture(params=SIZES, ids=[f"n_flows={f}-n_instances={i}" for f, i in SIZES])
def problem(request, rng):
    """Shared routes of 2 to 6 links over n_flows / 8 links; per-instance capacities,
    weights and caps (20% of flows)."""
    n_flows, n_instances = request.param
    n_links = n_flows // 8
    hops = rng.integers(2, 7, n_flows)
    indptr = np.zeros(n_flows + 1, dtype=np.int64)
    np.cumsum(hops, out=indptr[1:])
    routes = Routes.from_csr(indptr, rng.integers(0, n_links, indptr[-1]), n_links)
    shape = (n_instances, n_flows)
    cap = np.where(rng.random(shape) < 0.2, rng.uniform(0.5e9, 50e9, shape), np.inf)
    return BatchProblem.build(
        routes, rng.uniform(10e9, 400e9, (n_instances, n_links)), rng.choice([0.5, 1.0, 2.0], shape), cap
    )


def serial_loop(problem):
    """The same instances one after another through the serial kernel, on one core."""
    rate = np.empty((problem.n_instances, problem.n_flows))
    for i in range(problem.n_instances):
        max_min_fair(
            problem.routes.flow_link_indptr,
            problem.routes.flow_link_indices,
            problem.link_flow_indptr,
            problem.link_flow_indices,
            problem.capacity_Bps[i],
            problem.weight[i],
            problem.cap_Bps[i],
            1e-12,
            rate[i],
        )
    return rate


def test_batched_cpu(benchmark, problem):
    expected = serial_loop(problem)  # also the warm-up: compiles or loads both kernels
    problem.solve()
    benchmark.extra_info["threads"] = numba.get_num_threads()
    np.testing.assert_array_equal(benchmark(problem.solve), expected)


def test_serial_loop(benchmark, problem):
    serial_loop(problem)
    assert benchmark(serial_loop, problem).shape == (problem.n_instances, problem.n_flows)
