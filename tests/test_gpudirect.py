"""GPUDirect RDMA or staging through host memory: NCCL's rule (``ncclTopoCheckGdr``,
[NCCL] src/graph/paths.cc), its effect on NCCL's search and choice, and on the flows."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowsim import cli
from flowsim.check import check_nccl_log
from flowsim.collectives import collective_time, tuner
from flowsim.collectives.report import busbw_Bps
from flowsim.collectives.rings import nic_spread_offsets
from flowsim.collectives.tuner import NcclEnv, gdr_path, gpudirect_rdma, nccl_choice, nic_path_types
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.failures import apply_failures
from flowsim.scenario import parse_scenario, run_scenario
from flowsim.topoimport import import_system, parse_topo_matrix
from flowsim.training import data_parallel_step
from instances import two_host_h100_log

GiB = 1 << 30


@pytest.fixture(scope="module")
def two_h100():
    return build_cluster("dgx_h100", 2, figure="effective")


@pytest.fixture(scope="module")
def two_a100():
    return build_cluster("dgx_a100", 2, figure="effective")


@pytest.mark.parametrize(("value", "level"), [
    ("LOC", "LOC"), ("PIX", "PIX"), ("PHB", "PHB"), ("SYS", "SYS"), ("P2C", "P2C"),
    # NCCL's older numbers (levelsOldToNew): 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS, above that SYS.
    ("0", "LOC"), ("1", "PIX"), ("2", "PXB"), ("3", "PHB"), ("4", "SYS"), ("9", "SYS"),
])
def test_gdr_level_reads_path_names_and_old_numbers(value, level):
    assert NcclEnv({"NCCL_NET_GDR_LEVEL": value}).gdr_level() == level


def test_a_gdr_level_nccl_would_ignore_is_refused():
    with pytest.raises(InputError, match="NCCL_NET_GDR_LEVEL='loc' is none of NCCL's path types"):
        NcclEnv({"NCCL_NET_GDR_LEVEL": "loc"}).check()


def test_a_dgx_gpu_reaches_its_nic_under_one_pcie_switch(two_h100, two_a100):
    for topology in (two_h100, two_a100):
        gpus = [topology.node_names[g] for g in topology.gpus()]
        assert set(nic_path_types(topology, gpus).values()) == {"PIX"}
        assert gpudirect_rdma(topology)
        assert not gpudirect_rdma(topology, nccl_env={"NCCL_NET_GDR_LEVEL": "LOC"})
        assert gpudirect_rdma(topology, nccl_env={"NCCL_NET_GDR_LEVEL": "PIX"})
    # Inside one server nothing crosses a NIC.
    one = [two_h100.node_names[g] for g in two_h100.gpus()][:8]
    assert gpudirect_rdma(two_h100, one, nccl_env={"NCCL_NET_GDR_LEVEL": "LOC"})


@pytest.mark.parametrize(("path", "version", "env", "expected"), [
    # A NIC behind the GPU's own CPU: off unless the level reaches PHB.
    ("PHB", "2.30.7", {}, False),
    ("PHB", "2.19.3", {}, False),
    ("PHB", "2.30.7", {"NCCL_NET_GDR_LEVEL": "PHB"}, True),
    ("SYS", "2.30.7", {"NCCL_NET_GDR_LEVEL": "PHB"}, False),
    # A Grace GPU on NVLink-C2C with its NIC on the CPU: near by default from 2.27.3
    # (NCCL_NET_GDR_C2C=1), not in 2.26 (the parameter off) nor before (a PHB path).
    ("P2C", "2.30.7", {}, True),
    ("P2C", "2.30.7", {"NCCL_NET_GDR_C2C": "0"}, False),
    ("P2C", "2.30.7", {"NCCL_NET_GDR_LEVEL": "PXB"}, False),
    ("P2C", "2.27.7", {}, True),
    ("P2C", "2.27.7", {"NCCL_NET_GDR_C2C": "0"}, False),
    ("P2C", "2.26.2", {}, False),
    ("P2C", "2.26.2", {"NCCL_NET_GDR_C2C": "1"}, True),
    ("P2C", "2.19.3", {"NCCL_NET_GDR_C2C": "1"}, False),
])
def test_ncclTopoCheckGdr_by_version(monkeypatch, two_h100, path, version, env, expected):
    monkeypatch.setattr(tuner, "nic_path_types", lambda topology, ranks, router=None: {r: path for r in ranks})
    assert gpudirect_rdma(two_h100, nccl_env=env, version=version) is expected


def test_staged_nics_spread_over_the_pcie_uplinks():
    # DGX A100: two GPUs and their NICs behind each PCIe switch. Staged, a channel crosses
    # its NIC's uplink twice: the channels take one NIC behind each uplink in turn.
    assert nic_spread_offsets(list(range(8))) == list(range(8))
    assert nic_spread_offsets(list(range(8)), [0, 0, 1, 1, 2, 2, 3, 3]) == [0, 2, 4, 6, 1, 3, 5, 7]


def test_staged_search_and_flows_on_two_dgx_a100(two_a100):
    # Staged, a ring channel's traffic into and out of a server crosses one PCIe Gen4 uplink
    # (NCCL's 24 GB/s) twice, up from the GPU to host memory and up from the NIC: at 12 GB/s
    # a channel, one channel per uplink, 4 uplinks a server: 4 channels, 48 GB/s.
    env = {"NCCL_NET_GDR_LEVEL": "LOC"}
    staged = nccl_choice(two_a100, "all_reduce", GiB, nccl_env=env, gpudirect=False)
    direct = nccl_choice(two_a100, "all_reduce", GiB)
    assert staged.algorithm == direct.algorithm == "ring"
    assert staged.bus_bandwidth_GBps == pytest.approx(48.0)
    assert direct.bus_bandwidth_GBps == pytest.approx(192.0)  # 8 HDR NICs at 24 GB/s
    run = collective_time(two_a100, "all_reduce", GiB, algorithm="ring", nccl_env=env)
    assert not run.gpudirect and run.channels == 4
    assert busbw_Bps("all_reduce", GiB, run.time_s, 16) / 1e9 == pytest.approx(48.0, rel=0.01)


def test_staged_traffic_turns_ll128_off_across_servers(two_h100):
    # NCCL enables LL128 across servers only where the paths to the NICs stay under PCIe
    # switches (typeInter <= PXB, or PXN from SM90): staged, they cross the CPU.
    direct = nccl_choice(two_h100, "all_reduce", 4 << 20)
    staged = nccl_choice(two_h100, "all_reduce", 4 << 20, gpudirect=False)
    assert ("tree", "ll128") in direct.table and ("ring", "ll128") in direct.table
    assert not any(protocol == "ll128" for _, protocol in staged.table)
    assert staged.system.gpudirect is False and not staged.system.nic_near


def test_check_flags_a_run_without_gdrdma_and_says_what_staging_gives():
    # 16 H100 of two hosts, NCCL's INFO lines naming no /GDRDMA on their IB connections
    # (a constructed log: nccl-tests' layout, NCCL's INFO format of src/transport/net.cc),
    # at 150 GB/s busbw: the system can move more, so the rows are flagged, and the warning
    # says what the cluster moves staged through host memory, as it ran.
    log = two_host_h100_log([f"Channel {c:02d}/0 : 7[7] -> 8[0] [send] via NET/IB/{c}" for c in range(2)])
    report = check_nccl_log(log, system="dgx-h100", nccl_env={"NCCL_ALGO": "Ring"})
    assert report.rows[0].short
    staged = check_nccl_log(log, system="dgx-h100", nccl_env={"NCCL_ALGO": "Ring", "NCCL_NET_GDR_LEVEL": "LOC"})
    assert not staged.rows[0].short and not [w for w in staged.warnings if "GDRDMA" in w]
    assert staged.nccl.endswith(", network traffic staged through host memory (no GPUDirect RDMA)")
    assert "staged" not in report.nccl
    (cause,) = [w for w in report.warnings if "no '/GDRDMA'" in w]
    assert cause.endswith("where the prediction takes GPUDirect RDMA")
    (note,) = [w for w in report.warnings if w.startswith("staged through host memory")]
    assert note == (f"staged through host memory as the INFO lines say, the model gives "
                    f"{staged.rows[0].predicted_busbw_GBps:.2f} GB/s busbw at 1073741824 B, where the log measured "
                    "150.00 (--nccl-env NCCL_NET_GDR_LEVEL=LOC predicts every row so)")


def test_one_route_table_refuses_gdr_variables_per_collective(two_h100):
    with pytest.raises(InputError, match="NCCL_NET_GDR_LEVEL decides GPUDirect RDMA per collective.*gpudirect"):
        data_parallel_step(two_h100, layer_backward_s=[1e-3], layer_grad_bytes=[1e6],
                           nccl_env={"NCCL_NET_GDR_LEVEL": "LOC"})


def test_a_scenario_says_gpudirect_once_for_all_its_routes():
    base = """
[topology]
cluster = "dgx_a100"
n_nodes = 2
figure = "effective"

[[workload.collective]]
op = "all_reduce"
size_bytes = 1073741824
nccl_env = {NCCL_ALGO = "Ring"%s}
"""
    with pytest.raises(InputError, match=r"workload\.collective\[0\]\.nccl_env\.NCCL_NET_GDR_LEVEL.*options\.gpudirect"):
        parse_scenario(base % ', NCCL_NET_GDR_LEVEL = "LOC"', source="s.toml")
    # options.gpudirect = false stages the routes, and NCCL's choice follows them: the ring
    # of test_staged_search_and_flows_on_two_dgx_a100, 48 GB/s, where with GPUDirect 192.
    scenario = parse_scenario(base % "" + "\n[options]\ngpudirect = false\n", source="s.toml")
    makespan = run_scenario(scenario).result.makespan_s
    assert busbw_Bps("all_reduce", GiB, makespan, 16) / 1e9 == pytest.approx(48.0, rel=0.01)


def test_a_gpu_relayed_to_a_near_nic_over_nvlink_keeps_gpudirect(two_h100):
    # n0.nic3 failed: n0.gpu3 leaves through n0.nic0, behind the CPU from it, and NCCL takes
    # n0.gpu0 as the relay over NVLink (PXN), whose path to the NIC (PIX) decides GPUDirect.
    failed = apply_failures(two_h100, fail=["n0.nic3"])
    gpus = [failed.node_names[g] for g in failed.gpus()]
    assert nic_path_types(failed, gpus)["n0.gpu3"] in ("PHB", "SYS")
    assert gpudirect_rdma(failed)


def test_a_system_files_gdr_level_stages_collectives_and_scenarios(tmp_path, capsys):
    # A DGX H200 whose driver gives its NICs no GPU memory, said as NCCL reads it.
    text = (Path(__file__).parents[1] / "flowsim" / "systems" / "dgx_h200.toml").read_text()
    path = tmp_path / "h200_no_gdr.toml"
    path.write_text(text + '\n[nccl.env]\nNCCL_NET_GDR_LEVEL = "LOC"\n')
    assert cli.main(["collective", "all_reduce", "--system", str(path), "--nodes", "2", "-b", "1G", "-e", "1G",
                     "--nccl-env", "NCCL_ALGO=Ring"]) == 0
    out = capsys.readouterr().out
    assert "NCCL_NET_GDR_LEVEL=LOC (system)" in out.splitlines()[0]
    assert "# GPUDirect RDMA       : off, network traffic staged through host memory" in out
    # Staged, each GPU's PCIe switch uplink carries 4 channel legs at 12 GB/s (NCCL's model:
    # 16 channels, 192 GB/s), and host memory each leg's write and read: 4 GPUs a socket x 4
    # legs x 12 GB/s x 2 = 384 GB/s of the socket's DDR5-4800 x 8 (307.2): 192 x 307.2 / 384.
    (row,) = [line.split() for line in out.splitlines() if not line.startswith("#")]
    assert float(row[10]) == pytest.approx(192 * 307.2 / 384, rel=0.01)
    scenario = f'[topology]\ncluster = "{path}"\nn_nodes = 2\nfigure = "effective"\n[[workload.collective]]\nop = "all_reduce"\n' \
               'size_bytes = 1048576\n'
    assert parse_scenario(scenario, source="s.toml").options.gpudirect is False
    # flowsim presets FILE says what each GPU's path to its NIC gives under the system's own environment.
    assert cli.main(["presets", str(path)]) == 0
    assert ("  GPU-NIC paths, as NCCL's NCCL_NET_GDR_LEVEL (default PXB) takes them: PIX from GPUs 0-7 (staged "
            "through host memory)") in capsys.readouterr().out.splitlines()
    assert parse_scenario(scenario + "[options]\ngpudirect = true\n", source="s.toml").options.gpudirect is True


def test_gpudirect_where_some_gpus_reach_the_nic_under_a_switch():
    # 8 RTX 4090 with one NIC under GPUs 0-3's switch (data/topo/rtx4090_8x.txt): GPUs 4-7
    # reach it across the sockets (SYS). NCCL decides per GPU; its rings leave a server
    # through the GPUs near the NIC, which have GPUDirect RDMA, and flowsim keeps it.
    matrix = parse_topo_matrix((Path(__file__).parents[1] / "data" / "topo" / "rtx4090_8x.txt").read_text())
    spec, _ = import_system(matrix, name="box", gpu="NVIDIA GeForce RTX 4090", nic_speed_gbps=200, nic_kind="roce")
    boxes = build_cluster(spec, 2, figure="effective")
    types = nic_path_types(boxes, [boxes.node_names[g] for g in boxes.gpus()])
    assert [types[f"n0.gpu{g}"] for g in range(8)] == ["PIX"] * 4 + ["SYS"] * 4
    assert [gdr_path(kind) for kind in ("PIX", "PXB", "P2C", "PHB", "SYS")] == [True, True, True, False, False]
    assert gpudirect_rdma(boxes)
    assert gpudirect_rdma(boxes, nccl_env={"NCCL_NET_GDR_LEVEL": "PIX"})
    assert not gpudirect_rdma(boxes, nccl_env={"NCCL_NET_GDR_LEVEL": "LOC"})
    # Only the far GPUs in the communicator: staged.
    assert not gpudirect_rdma(boxes, [f"n{s}.gpu{g}" for s in range(2) for g in range(4, 8)])


def test_the_staged_figure_takes_the_models_choice_where_nccls_cannot_be_laid_out():
    # NCCL's TUNING line names an algorithm flowsim does not lay out for the row (PAT has no
    # all-reduce): the row and the staged figure both fall back to the model's choice.
    log = two_host_h100_log([f"Channel {c:02d}/0 : 7[7] -> 8[0] [send] via NET/IB/{c}" for c in range(2)]
                            + ["AllReduce: 1073741824 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..15}"])
    report = check_nccl_log(log, system="dgx-h100")
    assert [w for w in report.warnings if w.startswith("NCCL ran pat/simple at 1 size(s)")]
    (note,) = [w for w in report.warnings if w.startswith("staged through host memory")]
    staged = check_nccl_log(log, system="dgx-h100", nccl_env={"NCCL_NET_GDR_LEVEL": "LOC"})
    assert f"the model gives {staged.rows[0].predicted_busbw_GBps:.2f} GB/s busbw" in note
