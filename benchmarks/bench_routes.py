"""Routes given as Python lists: conversion against the solve, at 100,000 flows on a k=32
fat-tree (ECMP routes of random host pairs, as in bench_maxmin).

Side by side in one run: ``link_by_link`` (the conversion ``Routes.from_lists`` did for
every input before it read plain lists of ints in one go, and still does for names and NumPy
scalars), ``from_lists`` (lists to checked CSR arrays), ``build`` (``FairShareProblem.build``
from the lists: conversion plus the transpose and checks every input gets), and ``solve``
(the max-min solve alone). Each reports ``extra_info["ns_per_incidence"]``.
"""

import numpy as np
import pytest

from flowsim import FairShareProblem, Routes
from flowsim.routes import link_ids_one_by_one
from instances import fat_tree_random_pairs

K, N_FLOWS = 32, 100_000
STAGES = ["link_by_link", "from_lists", "build", "solve"]


@pytest.fixture(scope="module")
def instance():
    topology, routes = fat_tree_random_pairs(K, N_FLOWS, seed=K)
    lists = [route.tolist() for route in np.split(routes.flow_link_indices, routes.flow_link_indptr[1:-1])]
    return topology.link_capacity_Bps, routes, lists


@pytest.mark.parametrize("stage", STAGES, ids=[f"k={K}-n_flows={N_FLOWS}-{stage}" for stage in STAGES])
def test_lists_conversion_and_solve(benchmark, instance, stage):
    capacity, routes, lists = instance
    n_links = capacity.shape[0]
    problem = FairShareProblem.build(routes, capacity)
    problem.solve()  # compile (or load from cache) outside the timing
    work = {
        "link_by_link": lambda: link_ids_one_by_one(lists, routes.flow_link_indptr, n_links, None, None),
        "from_lists": lambda: Routes.from_lists(lists, n_links),
        "build": lambda: FairShareProblem.build(lists, capacity),
        "solve": problem.solve,
    }[stage]
    out = benchmark(work)
    if stage == "link_by_link":
        np.testing.assert_array_equal(out, routes.flow_link_indices)
    elif stage == "from_lists":
        np.testing.assert_array_equal(out.flow_link_indices, routes.flow_link_indices)
    benchmark.extra_info["n_incidences"] = routes.n_incidences
    if benchmark.stats is not None:
        benchmark.extra_info["ns_per_incidence"] = benchmark.stats.stats.min / routes.n_incidences * 1e9
