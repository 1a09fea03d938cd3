"""Collectives end to end on DGX H100 clusters: build the flow DAG, route, simulate.

Full scale: a 1,024-GPU (128-node) all-to-all, about a million flows starting together; a
1,024-GPU ring all-reduce laid out as steps (one channel, one slice: 2 x 1,023 dependent
steps per rank, about two million flows); and an 8,192-GPU (1,024-node) ring all-reduce as
NCCL would run it, one ring per rail (8 channels), streamed (one flow per hop and channel,
and its latency chain: 131,072 flows; its step DAG would be over a billion messages).
``--flows-scale`` shrinks the node count with the flow count. ``extra_info`` records flows,
events and rate updates.
"""

import math

import pytest

from flowsim.collectives import all_reduce, all_to_all, collective_time
from flowsim.fabrics import build_cluster
from flowsim.pipeline import run

FULL_NODES = 128
FULL_STREAM_NODES = 1024


def n_nodes(flows_scale):
    # Both collectives' flow counts grow with the square of the GPU count (pairs, or ranks x
    # steps), so the node count scales with the square root of the flow scale.
    return max(2, round(FULL_NODES * math.sqrt(flows_scale)))


def cluster_and_gpus(nodes):
    topology = build_cluster("dgx_h100", nodes, figure="effective")
    return topology, [topology.node_names[g] for g in topology.gpus()]


def run_and_record(benchmark, topology, workload):
    record(benchmark, topology, benchmark.pedantic(run, args=(topology, workload), rounds=1, iterations=1).result)


def record(benchmark, topology, result):
    benchmark.extra_info.update(
        n_gpus=len(topology.gpus()),
        n_flows=result.n_flows,
        n_events=result.n_events,
        n_rate_updates=result.n_rate_updates,
        makespan_s=result.makespan_s,
    )


@pytest.fixture(scope="module", autouse=True)
def compiled():
    topology, gpus = cluster_and_gpus(2)
    run(topology, all_to_all(gpus, 1 << 20))


def test_all_to_all(benchmark, flows_scale):
    topology, gpus = cluster_and_gpus(n_nodes(flows_scale))
    run_and_record(benchmark, topology, all_to_all(gpus, 64 * 2**20 * len(gpus)))


def test_ring_all_reduce(benchmark, flows_scale):
    topology, gpus = cluster_and_gpus(n_nodes(flows_scale))
    run_and_record(benchmark, topology, all_reduce(gpus, 1 << 30, channels=1, slices=1))


def test_streamed_ring_all_reduce(benchmark, flows_scale):
    # Streamed, flows grow with the GPU count: the node count scales with the flow scale.
    topology = build_cluster("dgx_h100", max(2, round(FULL_STREAM_NODES * flows_scale)), figure="effective")

    def layout_route_simulate():
        return collective_time(topology, "all_reduce", 1 << 30, model="stream")

    outcome = benchmark.pedantic(layout_route_simulate, rounds=1, iterations=1)
    record(benchmark, topology, outcome.run.result)
    benchmark.extra_info["time_s"] = outcome.time_s
