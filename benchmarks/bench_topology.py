"""pytest-benchmark: build a 1,024-node (8,192-GPU) rail-optimized DGX H100 cluster and route
an all-to-all between its GPUs.

    pytest benchmarks/bench_topology.py                         # timings
    pytest benchmarks/bench_topology.py --benchmark-disable     # smoke run (CI)

The full all-to-all has 8,192 x 8,191 = 67,100,672 ordered pairs; at about ten links a route
its flow -> link CSR alone would take 5.4 GB, so it is routed in streamed chunks of one million
pairs, each chunk's routes dropped once counted. ``extra_info`` holds the time per million
pairs and the peak memory (tracemalloc's peak of traced allocations, NumPy arrays included,
and the process's maximum resident set size).
"""

import resource
import time
import tracemalloc

import numpy as np
import pytest

from flowsim.fabrics import build_cluster
from flowsim.routing import Router

N_NODES = 1024
CHUNK = 1_000_000


@pytest.fixture(scope="module")
def cluster():
    return build_cluster("dgx_h100", N_NODES, figure="effective")


@pytest.fixture(scope="module")
def router(cluster):
    return Router(cluster)


def all_to_all_pairs(gpus, start, stop):
    """Ordered pairs ``start`` to ``stop`` of the all-to-all: source-major, no self pairs."""
    k = np.arange(start, stop, dtype=np.int64)
    n = gpus.size
    src, offset = np.divmod(k, n - 1)
    dst = np.where(offset >= src, offset + 1, offset)
    return gpus[src], gpus[dst]


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def test_build_cluster(benchmark):
    topo = benchmark.pedantic(build_cluster, args=("dgx_h100", N_NODES), kwargs={"figure": "effective"}, rounds=3)
    benchmark.extra_info.update(n_gpus=len(topo.gpus()), n_nodes=topo.n_nodes, n_links=topo.n_links)
    assert len(topo.gpus()) == 8 * N_NODES


def test_router_tables(benchmark, cluster):
    benchmark.pedantic(Router, args=(cluster,), rounds=3)


@pytest.mark.parametrize("method", ["ecmp", "dmodk"])
def test_route_one_million_pairs(benchmark, cluster, router, method):
    src, dst = all_to_all_pairs(cluster.gpus(), 0, CHUNK)
    router.route(src[:100], dst[:100], method=method)  # compile outside the timing
    routes = benchmark(router.route, src, dst, method=method)
    benchmark.extra_info.update(pairs=CHUNK, links_per_route=routes.n_incidences / CHUNK)
    assert routes.n_flows == CHUNK


def route_streamed(router, gpus, chunk):
    """Route the whole all-to-all chunk by chunk; returns (pairs, links, seconds, traced peak)."""
    total = gpus.size * (gpus.size - 1)
    links = 0
    tracemalloc.start()
    began = time.perf_counter()
    for start in range(0, total, chunk):
        src, dst = all_to_all_pairs(gpus, start, min(total, start + chunk))
        links += router.route(src, dst).n_incidences
    seconds = time.perf_counter() - began
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return total, links, seconds, traced_peak


def test_route_full_all_to_all_streamed(benchmark, cluster, router):
    gpus = cluster.gpus()
    router.route(gpus[:2], gpus[1::-1])  # compile outside the timing
    pairs, links, seconds, traced_peak = benchmark.pedantic(
        route_streamed, args=(router, gpus, CHUNK), rounds=1, iterations=1
    )
    benchmark.extra_info.update(
        pairs=pairs,
        links=links,
        seconds_per_million_pairs=seconds / (pairs / 1e6),
        traced_peak_bytes=traced_peak,
        max_rss_bytes=peak_rss_bytes(),
    )
    assert pairs == 67_100_672
