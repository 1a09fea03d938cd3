"""The shipped cloud systems against the published nccl-tests measurements the README's cloud
table cites ("Cloud instances against published measurements"): NCCL's own choice of
algorithm at the measurement's largest size, within 10% (issue 26's bound), as
``flowsim collective COLLECTIVE --system SYSTEM --nodes N -b SIZE -e SIZE`` predicts it
(all-reduce unless a row says otherwise; GB200 NVL72 racks on a fat-tree, which their 72
rails need).

The measured figures are the publications' (each row names its source); a row the model
misses by more is a strict xfail whose reason says why. Rows of older software (the NCCL
2.9.9 p4d runs of NVIDIA/nccl#527) are left out: flowsim models NCCL 2.30.7's tables.
"""

from pathlib import Path

import pytest

from flowsim.check import check_nccl_log
from flowsim.collectives import collective_time
from flowsim.collectives.report import busbw_Bps
from flowsim.fabrics import build_cluster
from flowsim.systemfile import resolve_system

GiB = 1 << 30
TOLERANCE = 0.10


def _miss(reason):
    """A row the model misses by more than :data:`TOLERANCE`: a strict xfail saying why."""
    return pytest.mark.xfail(strict=True, reason=reason)


_A3_MEGA = _miss(
    "Google's TCPXO profile runs the tree (rings and trees, Simple, NVLS off); NCCL's model of it "
    "gives 310 GB/s and flowsim holds a tree to that (294.7), where the run reached 338.82 (-13%)",
)
_GB200_A2A_3_RACKS = _miss(
    "all-to-all across servers: the model gives the NICs' full rate to the remote share "
    "(N/(N-1) x a NIC's rate on N NVLink domains, reached under D-mod-k on the preset's InfiniBand); "
    "measured runs fall below that as N grows: +6% on 2 racks, +15% on 3 (this row), +29% against "
    "NVIDIA's 48 GB/s on 4 DGX H100 (docs/validation.md)",
)
_A3_ULTRA_RINGS = _miss(
    "a ring across 2 A3 Ultra VMs at 40.7 GB/s a NIC (325.7 busbw; two runs, SkyPilot's and Google's own "
    "test pods, within 0.1%) where the model's 16 Hopper ring channels give 45.6 (364.4, +12%): the rate of "
    "nccl-tests#309's 4 and 8 InfiniBand servers with NCCL's defaults, 81% of the NICs, below the 91% the "
    "model is calibrated to (docs/model.md 'Ring channels across servers')",
)
_A3_HIGH_TCPX = _miss(
    "GPUDirect-TCPX on 2 A3 High VMs moves 66 GB/s busbw in an all-reduce ring (SkyPilot's table) and 50-71 "
    "in all-gathers (dstack's and Google's GKE test plan), where the model's 4 NICs of 200 Gb/s give 96: TCPX is "
    "TCP, not RDMA, and the system file takes the NICs at their line rate (its figures are guesses, saying so)",
)
_P5_A2A = _miss(
    "all-to-all across 2 p5 hosts at 79.25 GB/s busbw where the model gives the NICs' full rate to the "
    "remote share (89.7, +13%); the same runs on 4 and 8 hosts: 54.07 and 49.63 against 61.9 and 53.9",
)
_P5_RING_8_HOSTS = _miss(
    "the p5 all-gather on 8 hosts moves 293.71 GB/s busbw, 73% of its NICs, where 2 and 4 hosts moved 82-83% "
    "(+9-10%, within bounds); the model keeps a Hopper ring channel at 22.8 GB/s across servers however many "
    "hosts it crosses (360.5, +23%)",
)
_H20_RING = _miss(
    "one HGX H20 run of nccl-tests (nccl-tests#306, NCCL not printed) reached 361.10 GB/s at 2 GiB, what the "
    "model's ring gives (363.7 with NCCL_NVLS_ENABLE=0, +0.7%); the model takes NCCL's choice, NVLS (471.6, +31%), "
    "which would move more: whether NVLS did not run (an NCCL older than it, multicast off) or H20's NVLS moves less "
    "than H100's, the log does not say",
)
_SKYPILOT_GCP = "skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md (2 x a3-ultragpu-8g on GKE, NCCL 2.26.6)"
_OCI_B300 = "oracle-quickstart/oci-gpu-quickstarts nvidia/B300/README-B300.md @6a0abdc7 (NCCL 2.28.9)"
_OCI_A100 = "oracle-japan/ocitutorials content/hpc/benchmark/run-nccltests-ubuntu/index.md @40114268 (NCCL 2.26.5)"
_P5_CSV = ("crazyguitar/aws-gpu-communication-benchmark @fd167f97 (p5.48xlarge on SageMaker HyperPod, the CSV of its "
           "nccl-tests runs; AWS's NCCL tuner plugin, NCCL_BUFFSIZE=8388608)")
_DSTACK_GCP = "dstackai/dstack mkdocs/docs/examples/clusters/gcp.md @511c318c"
_OCI_GB200 = "oracle-quickstart/oci-gpu-quickstarts nvidia/GB200/README-GB200.md @6a0abdc7 (NCCL 2.27.3, 16 trays a rack)"


def _row(system, nodes, size, measured, source, marks=(), collective="all_reduce"):
    name = Path(system).stem if system.endswith(".toml") else system
    return pytest.param(collective, system, nodes, size, measured, source,
                        id=f"{name}-{nodes}n-{collective}", marks=marks)


# System files of the repository's (data/systems/), for machines no shipped system describes.
SYSTEM_FILES = Path(__file__).resolve().parents[1] / "data" / "systems"


# (collective, system, servers, size, measured busbw GB/s, source)
MEASURED = [
    _row("aws-p4d", 1, GiB, 230.77, "NVIDIA/nccl#527"),
    _row("aws-p4d", 2, GiB, 76.21, "AWS DLAMI Developer Guide, 'Using EFA on the DLAMI' (NCCL 2.23.4)"),
    _row("aws-p4de", 2, 2 * GiB, 78.33, "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests @88c2e71b"),
    _row("aws-p5", 2, 8 * GiB, 479.28, "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests @88c2e71b"),
    _row("azure-nd-a100-v4", 1, 8 * GiB, 231.58, "Azure/AI-benchmarking-guide ND_A100_v4_results.md"),
    _row("azure-nd-a100-v4", 2, 8 * GiB, 187.67, "blog post 'Running GPU Enabled HPC Applications on Azure Machine "
         "Learning Platform' (2 x Standard_ND96asr_v4)"),
    _row("azure-nd-h200-v5", 1, 8 * GiB, 479.98, "Azure/AI-benchmarking-guide ND_H200_v5_results.md"),
    _row("azure-nd-h100-v5", 2, 8 * GiB, 482.0, "JingchaoZhang.github.io, 'NCCL AllReduce Scaling'"),
    _row("gcp-a4", 2, 8 * GiB, 683.52, "dstackai/dstack examples/clusters/a4/README.md @30a0dd56"),
    _row("azure-nd-gb200-v6", 1, 8 * GiB, 834.57, "coreweave/nccl-tests#43 (a CoreWeave GB200 NVL72 rack)"),
    _row("dgx-b200", 2, 8 * GiB, 690.07, "coreweave/nccl-tests#92 (CoreWeave's B200 nodes)"),
    _row("dgx-h100", 2, 8 * GiB, 440.58, "coreweave/nccl-tests#92 (CoreWeave's H100 nodes)"),
    _row("dgx-h200", 2, 8 * GiB, 484.39, "argonne-lcf/oci-howto 4_jobscript.md @166a3009 (OCI's H200 nodes, NCCL 2.27.5)"),
    _row("gcp-a3-mega", 2, 8 * GiB, 338.82, "lessizzmore/create-a3mega-ztan-fork", marks=_A3_MEGA),
    _row("gcp-a3-ultra", 2, 8 * GiB, 325.72, _SKYPILOT_GCP, collective="all_gather", marks=_A3_ULTRA_RINGS),
    _row("oci-bm-gpu4-8", 1, 10 * GiB, 232.20, _OCI_A100),
    _row("oci-bm-gpu4-8", 2, 10 * GiB, 191.76, _OCI_A100),
    _row("oci-bm-gpu-b300-8", 1, 8 * GiB, 834.84, _OCI_B300),
    _row("oci-bm-gpu-b300-8", 2, 8 * GiB, 766.54, _OCI_B300),
    _row("oci-bm-gpu-b300-8", 1, 8 * GiB, 675.55, _OCI_B300, collective="all_to_all"),
    _row("oci-bm-gpu-b300-8", 2, 8 * GiB, 180.98, _OCI_B300, collective="all_to_all"),
    _row("gb200-nvl72", 2, 8 * GiB, 799.79, _OCI_GB200),
    _row("gb200-nvl72", 3, 8 * GiB, 748.93, _OCI_GB200),
    _row("gb200-nvl72", 2, 8 * GiB, 89.70, _OCI_GB200, collective="all_to_all"),
    _row("gb200-nvl72", 3, 8 * GiB, 62.49, _OCI_GB200, collective="all_to_all", marks=_GB200_A2A_3_RACKS),
    # Found after the systems were written (2026-12-05), held out.
    _row("aws-p6-b200", 4, 16 * GiB, 377.0, "awslabs/awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md "
         "@95b939cd ('Verified - p6-b200 x4', the figure in prose)"),
    _row("aws-p5", 2, 2 * GiB, 328.58, _P5_CSV + " data/nccl_all_gather.csv", collective="all_gather"),
    _row("aws-p5", 4, 2 * GiB, 330.92, _P5_CSV + " data/nccl_all_gather.csv", collective="all_gather"),
    _row("aws-p5", 8, 2 * GiB, 293.71, _P5_CSV + " data/nccl_all_gather.csv", collective="all_gather",
         marks=_P5_RING_8_HOSTS),
    _row("aws-p5", 2, 2 * GiB, 79.25, _P5_CSV + " data/nccl_alltoall.csv", collective="all_to_all", marks=_P5_A2A),
    _row("aws-p5", 8, 2 * GiB, 49.63, _P5_CSV + " data/nccl_alltoall.csv", collective="all_to_all"),
    _row("gcp-a3-high", 2, 2 * GiB, 65.72, "skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md @088eebc2 "
         "(2 x a3-highgpu-8g, the README's table)", marks=_A3_HIGH_TCPX),
    # The HGX servers of the GPUs sold in China (added 2026-12-06, held out): the one run found.
    _row("hgx-h20", 1, 2 * GiB, 361.10, "NVIDIA/nccl-tests#306 (8 x H20, the first node's table)", marks=_H20_RING),
    # Raw logs, also in data/validation/nccl_tests/ (tests/test_validation_logs.py checks every row).
    _row("oci-bm-gpu-h100-8", 2, 16 * GiB, 471.22, "oracle-quickstart/oci-hpc documentation/Troubleshooting.md "
         "@b5285a68 (NCCL 2.23.4)"),
    _row("gcp-a3-mega", 2, 8 * GiB, 188.54, _DSTACK_GCP + " tab 'A3 Mega'", collective="all_gather"),
    _row("gcp-a3-high", 2, 8 * GiB, 50.17, _DSTACK_GCP + " tab 'A3 High/Edge'", collective="all_gather",
         marks=_A3_HIGH_TCPX),
    # Google's own all-gather test on 2 A4 High VMs (added 2026-12-07, held out).
    _row("gcp-a4", 2, 8 * GiB, 366.29, "GoogleCloudPlatform/cluster-toolkit examples/gke-a4-highgpu/README.md "
         "@74f7e3da", collective="all_gather"),
    # CSCS's Alps GH200 nodes, at the run's largest size (128 MiB).
    _row(str(SYSTEM_FILES / "alps_gh200.toml"), 2, 128 << 20, 122.57,
         "eth-cscs/cscs-docs docs/software/communication/nccl.md @80abed13"),
]


@pytest.mark.parametrize("collective, system, nodes, size, measured, source", MEASURED)
def test_a_cloud_system_is_within_10_percent_of_its_published_measurement(collective, system, nodes, size, measured,
                                                                          source):
    spec, _, cluster = resolve_system(system)
    cluster.pop("n_nodes", None)
    fabric = "auto" if nodes == 1 else "fat_tree" if system == "gb200-nvl72" else "rail_optimized"
    fabric = cluster.pop("fabric", fabric)  # a system file's own, where it names one
    topology = build_cluster(spec, nodes, figure="effective", fabric=fabric, **cluster)
    predicted = busbw_Bps(collective, size, collective_time(topology, collective, size).time_s,
                          len(topology.gpus())) / 1e9
    assert abs(predicted / measured - 1) <= TOLERANCE, (collective, system, nodes, round(predicted, 2), measured,
                                                        source)


OCI_GB300 = Path(__file__).resolve().parents[1] / "data" / "validation" / "oci_gb300"
_OCI_GB300_A2A_2_RACKS = _miss(
    "all-to-all on 32 hosts in 2 racks at 47.3 GB/s busbw, 0.27 of the model's 176.9: OCI's GB200 racks "
    "moved 89.7 on the same shape with NICs of half the rate (this file's GB200 rows); a network below its NICs' "
    "rate, which flowsim check flags SHORT",
)


@pytest.mark.parametrize("name, measured", [
    ("all_reduce_1host", 681.03),
    ("all_reduce_2hosts", 838.38),
    ("all_reduce_16hosts_1rack", 897.52),
    ("all_reduce_32hosts_2racks", 708.75),
    ("alltoall_1host", 624.98),
    ("alltoall_2hosts", 679.65),
    ("alltoall_16hosts_1rack", 649.03),
    pytest.param("alltoall_32hosts_2racks", 47.30, marks=_OCI_GB300_A2A_2_RACKS),
])
def test_ocis_gb300_runs_are_within_10_percent_as_flowsim_check_reads_them(name, measured):
    """OCI's GB300 NVL72 runs (data/validation/oci_gb300, held out), each checked as a user
    would: its hosts are trays of the racks their rank lines fix (16 a rack, as OCI ran
    them), at 8 GiB, NCCL 2.28.7's log -> 2.28.9's rules."""
    spec, _, _ = resolve_system("oci-bm-gpu-gb300-4")
    report = check_nccl_log(OCI_GB300 / f"{name}.txt", system=spec, fabric="fat_tree", min_bytes=8 * GiB)
    row = next(r for r in report.rows if r.size_bytes == 8 * GiB)
    assert row.measured_busbw_out_GBps == measured
    assert abs(row.predicted_busbw_GBps / measured - 1) <= TOLERANCE, (name, round(row.predicted_busbw_GBps, 2))

