"""Collectives end to end on DGX H100 clusters: build the flow DAG, route, simulate.

Full scale: a 1,024-GPU (128-node) all-to-all, about a million flows starting together; a
1,024-GPU ring all-reduce laid out as steps (one channel, one slice: 2 x 1,023 dependent
steps per rank, about two million flows), also through ``collective_time`` as its full step
DAG by flow classes and laid out by classes of hops, side by side; an 8,192-GPU (1,024-node)
ring all-reduce as NCCL would run it, one ring per rail (8 channels), streamed (one flow per
hop and channel, and its latency chain: 131,072 flows) and as steps, exact (its step DAG is
2.1 billion messages, laid out by classes of hops as 8.4 million flows); and
NCCL's own choice for that all-reduce, NVLSTree, streamed (about 360,000 flows, its step DAG
11.5 million messages); and with ``NCCL_COLLNET_ENABLE=1`` on 512 DGX A100, CollNet Direct,
reduced in the switches of a three-tier fabric.
An nccl-tests sweep (8 B to 8 GiB, factor 4) of all-reduce on 16 DGX H100, as
``flowsim collective all_reduce --system dgx-h100 --nodes 16 -b 8 -e 8G -f 4`` runs it,
solved by flow classes and over the full step DAG side by side, on ECMP and
destination-mod-k routing (docs/model.md "Flow classes"); the all-to-all on ECMP and on the
default routing (D-mod-k on this InfiniBand fabric).
``--flows-scale`` shrinks the node count with the flow count. ``extra_info`` records flows,
events and rate updates (and the sweep's flows and classes solved).
"""

import math

import pytest

import flowsim.collectives.dag as dag_module
from flowsim.collectives import all_reduce, all_to_all, collective_time
from flowsim.collectives.report import message_sizes, sweep
from flowsim.fabrics import build_cluster
from flowsim.pipeline import run

FULL_NODES = 128
FULL_STREAM_NODES = 1024
FULL_SWEEP_NODES = 16
FULL_COLLNET_NODES = 512


def n_nodes(flows_scale):
    # Both collectives' flow counts grow with the square of the GPU count (pairs, or ranks x
    # steps), so the node count scales with the square root of the flow scale.
    return max(2, round(FULL_NODES * math.sqrt(flows_scale)))


def cluster_and_gpus(nodes):
    topology = build_cluster("dgx_h100", nodes, figure="effective")
    return topology, [topology.node_names[g] for g in topology.gpus()]


def run_and_record(benchmark, topology, workload, **options):
    outcome = benchmark.pedantic(run, args=(topology, workload), kwargs=options, rounds=1, iterations=1)
    record(benchmark, topology, outcome.result)


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


@pytest.mark.parametrize("routing", ["ecmp", "auto"])
def test_all_to_all(benchmark, flows_scale, routing):
    # On the InfiniBand fabric "auto" is D-mod-k: the flows fall into a few classes, where
    # ECMP's hashed spine paths keep most of them apart (docs/model.md "Flow classes").
    topology, gpus = cluster_and_gpus(n_nodes(flows_scale))
    run_and_record(benchmark, topology, all_to_all(gpus, 64 * 2**20 * len(gpus)), routing=routing)


def test_ring_all_reduce(benchmark, flows_scale):
    topology, gpus = cluster_and_gpus(n_nodes(flows_scale))
    run_and_record(benchmark, topology, all_reduce(gpus, 1 << 30, channels=1, slices=1))


def collective_and_record(benchmark, topology, collective="all_reduce", size=1 << 30, **options):
    """One collective_time call of ``collective`` (default a 1 GiB all-reduce: its layout,
    routing and simulation) timed, with its flows, the flows it solved, its time and what
    ran recorded."""
    outcome = benchmark.pedantic(collective_time, args=(topology, collective, size), kwargs=options, rounds=1,
                                 iterations=1)
    record(benchmark, topology, outcome.run.result)
    benchmark.extra_info.update(time_s=outcome.time_s, n_flows=outcome.flows, n_flows_solved=outcome.flow_classes,
                                algorithm=outcome.algorithm, model=outcome.model)


@pytest.mark.parametrize("layout", ["full_dag", "hop_classes"])
def test_ring_all_reduce_as_steps(benchmark, flows_scale, monkeypatch, layout):
    # The ring of test_ring_all_reduce through collective_time: laid out by classes of hops
    # (what runs by default), and as its full step DAG solved by flow classes (what ran
    # before; the threshold of the layout by classes raised past it), the same times.
    topology, _ = cluster_and_gpus(n_nodes(flows_scale))
    if layout == "full_dag":
        monkeypatch.setattr(dag_module, "CLASS_LAYOUT_FROM", 10**12)
    collective_and_record(benchmark, topology, algorithm="ring", protocol="simple", channels=1, slices=1,
                          model="steps")


def test_exact_ring_all_reduce_at_scale(benchmark, flows_scale):
    # The ring of test_streamed_ring_all_reduce (NCCL's LL128 on 16 channels as 8 lanes) as
    # steps, exact: at full scale its step DAG is 2.1 billion messages, laid out by classes
    # of hops as 8.4 million flows.
    topology = build_cluster("dgx_h100", max(2, round(FULL_STREAM_NODES * flows_scale)), figure="effective")
    collective_and_record(benchmark, topology, algorithm="ring", model="steps")


def test_streamed_ring_all_reduce(benchmark, flows_scale):
    # Streamed, flows grow with the GPU count: the node count scales with the flow scale.
    topology = build_cluster("dgx_h100", max(2, round(FULL_STREAM_NODES * flows_scale)), figure="effective")
    collective_and_record(benchmark, topology, algorithm="ring", model="stream")


def test_nccl_choice_all_reduce_at_scale(benchmark, flows_scale):
    # NCCL's own choice at 1 GiB on 1,024 DGX H100, NVLSTree, whose step DAG (11.5 million
    # messages) is past what auto lays out: it streams (two flows per message of a chunk).
    topology = build_cluster("dgx_h100", max(2, round(FULL_STREAM_NODES * flows_scale)), figure="effective")
    collective_and_record(benchmark, topology)


def test_collnet_all_reduce_in_the_network(benchmark, flows_scale):
    # NCCL_COLLNET_ENABLE=1 on 512 DGX A100 (4,096 GPUs, HDR over three switch tiers): CollNet
    # Direct at 1 GiB, reduced in the switches; 3.2 million messages, their pairs to and
    # from the switches routed once each.
    topology = build_cluster("dgx_a100", max(2, round(FULL_COLLNET_NODES * flows_scale)), figure="effective")
    collective_and_record(benchmark, topology, nccl_env={"NCCL_COLLNET_ENABLE": "1"})


def test_collnet_all_gather_in_the_network(benchmark, flows_scale):
    # NCCL_COLLNET_ENABLE=1 on 1,024 DGX H100 (8,192 GPUs, one NIC each): a 256 MiB all-gather,
    # which NCCL's model runs as CollNet Direct, each GPU's rail gathered by the switches;
    # 1.2 million flows, solved as about a hundred classes.
    topology = build_cluster("dgx_h100", max(2, round(FULL_STREAM_NODES * flows_scale)), figure="effective")
    collective_and_record(benchmark, topology, "all_gather", 256 << 20, nccl_env={"NCCL_COLLNET_ENABLE": "1"})


@pytest.mark.parametrize("routing", ["ecmp", "dmodk"])
@pytest.mark.parametrize("classes", [False, True], ids=["full_dag", "classes"])
def test_all_reduce_sweep(benchmark, flows_scale, routing, classes):
    # The step DAG's flows grow with ranks x steps: the node count with the root of the scale.
    nodes = max(2, round(FULL_SWEEP_NODES * math.sqrt(flows_scale)))
    topology = build_cluster("dgx_h100", nodes, figure="effective")
    sizes = message_sizes(8, "8G", 4)

    def run_sweep():
        return sweep(topology, "all_reduce", sizes, routing=routing, classes=classes)

    rows = benchmark.pedantic(run_sweep, rounds=1, iterations=1)
    benchmark.extra_info.update(
        n_gpus=len(topology.gpus()),
        n_flows=sum(r.flows for r in rows),
        n_flows_solved=sum(r.flow_classes for r in rows),
        busbw_GBps=[r.busbw_GBps for r in rows],
    )
