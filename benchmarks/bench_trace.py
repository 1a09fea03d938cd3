"""Trace I/O: writing and reading back the HDF5 trace of a DGX H100 cluster all-to-all.

Full scale: 64 nodes (512 GPUs, about 260,000 flows) with link rates recorded.
``--flows-scale`` shrinks the node count with the flow count.
"""

import math

import pytest

from flowsim.collectives import all_to_all
from flowsim.fabrics import build_cluster
from flowsim.pipeline import run
from flowsim.trace import open_trace, write_trace

FULL_NODES = 64


@pytest.fixture(scope="module")
def finished_run(request):
    nodes = max(2, round(FULL_NODES * math.sqrt(request.config.getoption("--flows-scale"))))
    topology = build_cluster("dgx_h100", nodes, figure="effective")
    gpus = [topology.node_names[g] for g in topology.gpus()]
    return run(topology, all_to_all(gpus, 2**20 * len(gpus)), record_links=True)


def write(path, r):
    return write_trace(path, r.topology, r.workload, r.routes, r.result)


def test_write_trace(benchmark, tmp_path, finished_run):
    path = tmp_path / "trace.h5"
    benchmark(write, path, finished_run)
    benchmark.extra_info["n_flows"] = finished_run.result.n_flows
    benchmark.extra_info["file_bytes"] = path.stat().st_size


def test_open_trace(benchmark, tmp_path, finished_run):
    path = write(tmp_path / "trace.h5", finished_run)
    trace = benchmark(open_trace, path)
    assert trace.n_flows == finished_run.result.n_flows
