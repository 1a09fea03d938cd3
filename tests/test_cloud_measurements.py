"""The shipped cloud systems against the published nccl-tests measurements the README's cloud
table cites ("Cloud instances against published measurements"): NCCL's own choice of
algorithm at the measurement's largest size, within 10% (issue 26's bound), as
``flowsim collective all_reduce --system SYSTEM --nodes N -b SIZE -e SIZE`` predicts it.

The measured figures are the publications' (each row names its source); a row the model
misses by more is a strict xfail whose reason says why. Rows of older software (the NCCL
2.9.9 p4d runs of NVIDIA/nccl#527) are left out: flowsim models NCCL 2.30.7's tables.
"""

import pytest

from flowsim.collectives import collective_time
from flowsim.collectives.report import busbw_Bps
from flowsim.fabrics import build_cluster
from flowsim.systemfile import resolve_system

GiB = 1 << 30
TOLERANCE = 0.10

_A3_MEGA = pytest.mark.xfail(
    strict=True,
    reason="Google's TCPXO profile runs the tree (rings and trees, Simple, NVLS off); NCCL's model of it "
    "gives 310 GB/s and flowsim holds a tree to that (294.7), where the run reached 338.82 (-13%)",
)


def _row(system, nodes, size, measured, source, marks=()):
    return pytest.param(system, nodes, size, measured, source, id=f"{system}-{nodes}n", marks=marks)


# (system, servers, size, measured busbw GB/s, source)
MEASURED = [
    _row("aws-p4d", 1, GiB, 230.77, "NVIDIA/nccl#527"),
    _row("aws-p4d", 2, GiB, 76.21, "AWS DLAMI Developer Guide, 'Using EFA on the DLAMI' (NCCL 2.23.4)"),
    _row("aws-p4de", 2, 2 * GiB, 78.33, "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests @88c2e71b"),
    _row("aws-p5", 2, 8 * GiB, 479.28, "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests @88c2e71b"),
    _row("azure-nd-a100-v4", 1, 8 * GiB, 231.58, "Azure/AI-benchmarking-guide ND_A100_v4_results.md"),
    _row("azure-nd-h200-v5", 1, 8 * GiB, 479.98, "Azure/AI-benchmarking-guide ND_H200_v5_results.md"),
    _row("azure-nd-h100-v5", 2, 8 * GiB, 482.0, "JingchaoZhang.github.io, 'NCCL AllReduce Scaling'"),
    _row("gcp-a4", 2, 8 * GiB, 683.52, "dstackai/dstack examples/clusters/a4/README.md @30a0dd56"),
    _row("azure-nd-gb200-v6", 1, 8 * GiB, 834.57, "coreweave/nccl-tests#43 (a CoreWeave GB200 NVL72 rack)"),
    _row("dgx-b200", 2, 8 * GiB, 690.07, "coreweave/nccl-tests#92 (CoreWeave's B200 nodes)"),
    _row("dgx-h100", 2, 8 * GiB, 440.58, "coreweave/nccl-tests#92 (CoreWeave's H100 nodes)"),
    _row("gcp-a3-mega", 2, 8 * GiB, 338.82, "lessizzmore/create-a3mega-ztan-fork", marks=_A3_MEGA),
]


@pytest.mark.parametrize("system, nodes, size, measured, source", MEASURED)
def test_a_cloud_system_is_within_10_percent_of_its_published_measurement(system, nodes, size, measured, source):
    spec, _, cluster = resolve_system(system)
    cluster.pop("n_nodes", None)
    topology = build_cluster(spec, nodes, figure="effective", fabric="auto" if nodes == 1 else "rail_optimized",
                             **cluster)
    predicted = busbw_Bps("all_reduce", size, collective_time(topology, "all_reduce", size).time_s,
                          len(topology.gpus())) / 1e9
    assert abs(predicted / measured - 1) <= TOLERANCE, (system, nodes, round(predicted, 2), measured, source)
