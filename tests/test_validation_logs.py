"""flowsim against real nccl-tests logs (data/validation/nccl_tests/): every log parses, every
row is predicted, and the large-message rows of the healthy logs are close to the model.

Predicting every row of the forty-nine logs takes about 20 s on one core, so the whole logs are
predicted here, through ``benchmarks/validate_nccl_logs.py`` (the path ``flowsim check``
takes). Logs the model misses today are strict xfails whose reason says why, so that a change
that fixes (or breaks) them shows.
"""

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import pytest

from flowsim.check import parse_nccl_log

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "validate_nccl_logs.py"
_spec = importlib.util.spec_from_file_location("flowsim_validate_nccl_logs", SCRIPT)
validate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = validate  # dataclasses look their module up by name
_spec.loader.exec_module(validate)

ENTRIES = {e.file: e for e in validate.entries()}
GiB = 1 << 30

# Every healthy log is within 15% at >= 1 GiB (docs/validation.md "Validation against real
# nccl-tests logs"); a log the model misses there would be a strict xfail saying why.
# GCP A3 Mega (GPUDirect-TCPXO, with Google's NCCL profile: rings and trees, Simple) runs a
# tree; from 4 GiB it moves 9% more than NCCL's own model of that tree (310 GB/s), to which
# flowsim holds a tree, so those rows are -11% to -13%; not FAST, since the same tree on the
# links alone is as fast (docs/validation.md).
TCPXO = "gcp_a3mega_h100_2n8g_allreduce.txt"
# One H100 per host on 10 hosts (NCCL 2.29.2): NCCL gives each network peer 2 channels, which
# flowsim holds to NCCL's own 14 GB/s a channel (P2P_PER_CHANNEL_NET_GBPS); this cluster's
# channels moved 12.5 GB/s (24.9 for the pair), and its 2-host sendrecv on 4 channels 43.8
# where all-reduce reaches 48.9: its point-to-point runs about 10% below the model throughout,
# and the 2-channel rows, +12% to +15%, are flagged SHORT.
SENDRECV_10N1G = "xxrjun_h100_10n1g_sendrecv.txt"
# The same cluster's 80-GPU all-reduce, all-gather and reduce-scatter (held out, 2026-12-04)
# plateau at 314-324 GB/s, 40 GB/s a NIC where its one-GPU-per-host all-reduce reaches 48.9.
# The model's ring, 16 Hopper channels at 22.8 GB/s each across servers (docs/model.md "Ring
# channels across servers", calibrated on another cluster's 4 servers at 91% of their NICs),
# gives 364: 12-19% from 1 GiB (the all-reduce's NVLSTree rows at 1-2 GiB within 3%); the
# reduce-scatter's 8 and 16 GiB rows, 0.87-0.89, are flagged SHORT. The repository does not
# say what the hosts are; nccl-tests#309's 4 and 8 servers ran at this cluster's rate, 81%.
# GCP A3 High (GPUDirect-TCPX), dstack's all-gather on 2 VMs (held out, 2026-12-05): 49-50 GB/s
# busbw from 128 MiB where the system's rings over 4 NICs of 200 Gb/s give 96; other published
# A3 High runs also move well below the NICs' line rate (docs/validation.md). Every size is flagged SHORT.
TCPX = "dstack_gcp_a3high_h100_2n8g_allgather.txt"
# OCI's 2 BM.GPU4.8 (16 x 100 Gb/s RoCE a node; held out, 2026-12-06): from 1 GiB 219-238 GB/s,
# more than the 200 GB/s the ports give a ring, so NCCL ran its tree there. NCCL 2.19.3 sees the
# 16 ports as 16 devices (it predates NCCL_IB_MERGE_NICS), where its model puts the tree ahead,
# and flowsim's replay runs it too (tests/test_tuner.py); held to NCCL's model of it, 220.8 GB/s,
# the tree gives 169-201: 15-23% under, as GCP A3 Mega's tree is, and not FAST for the same reason.
OCI_A100_TREE = "ocihpcoke_a100_2n8g_allreduce.txt"
# ABCI's 2 A100 nodes with NCCL_COLLNET_ENABLE=1 (held out, 2026-12-07): the model runs
# CollNet, 170 GB/s busbw at 2 GiB, where the run moved 105, 10% above the ring without
# CollNet (96). Its SHARP job had one low-latency tree (LLT, 1,024 bytes a transaction) and no
# streaming aggregation, off unless SHARP_COLL_ENABLE_SAT=1 (NVIDIA SHARP v2.6.1; today's
# SHARP plugin sets it), which flowsim's CollNet takes the fabric to do; NCCL 2.8 by its
# module, before CollNet Direct.
SHARP_LLT = "abci_a100_2n8g_allreduce_sharp.txt"
_SHARP_LLT = pytest.mark.xfail(strict=True, reason="ABCI's SHARP with low-latency trees only (no SAT): 105 GB/s busbw "
                               "where flowsim's CollNet streams at 170")
_TCPX = pytest.mark.xfail(strict=True, reason="GPUDirect-TCPX on A3 High: 50 GB/s busbw where 4 NICs of 200 Gb/s give a "
                          "ring 96")
TEN_HOSTS = ("xxrjun_h100_10n8g_allreduce.txt", "xxrjun_h100_10n8g_allgather.txt", "xxrjun_h100_10n8g_reducescatter.txt")
_TEN_HOSTS = pytest.mark.xfail(
    strict=True, reason="10 hosts x 8 H100: rings at 40 GB/s a NIC where the model's channels give 45.5, 12-19%")
_OCI_A100_TREE = pytest.mark.xfail(strict=True, reason="OCI BM.GPU4.8 x 2 from 1 GiB: NCCL's tree at 219-238 GB/s, above "
                                   "NCCL's model of it, to which flowsim holds trees (169-201)")
_SHORT = {
    SENDRECV_10N1G: pytest.mark.xfail(
        strict=True, reason="10 hosts x 1 H100 sendrecv: 12.5 GB/s a channel where NCCL's figure, which flowsim "
        "takes, is 14; flagged SHORT"),
    TEN_HOSTS[2]: pytest.mark.xfail(
        strict=True, reason="10 hosts x 8 H100 reduce-scatter at 8-16 GiB: 0.87-0.89 of the model, flagged SHORT"),
    TCPX: _TCPX,
    SHARP_LLT: _SHARP_LLT,
}
HEALTHY = [
    pytest.param(name, id=name.removesuffix(".txt"),
                 marks=[_TEN_HOSTS] if name in TEN_HOSTS else [_TCPX] if name == TCPX
                 else [_OCI_A100_TREE] if name == OCI_A100_TREE else [_SHARP_LLT] if name == SHARP_LLT else [])
    for name, entry in ENTRIES.items() if entry.healthy
]
HEALTHY_UNFLAGGED = [
    pytest.param(name, id=name.removesuffix(".txt"), marks=[_SHORT[name]] if name in _SHORT else [])
    for name, entry in ENTRIES.items() if entry.healthy
]
DEGRADED = [name for name, entry in ENTRIES.items() if not entry.healthy]


@pytest.fixture(scope="module")
def reports():
    return {name: validate.check_entry(entry) for name, entry in ENTRIES.items()}


def test_the_index_lists_every_log_and_cites_its_source():
    directory = validate.LOGS
    listed = json.loads((directory / "index.json").read_text())
    assert sorted(item["file"] for item in listed) == sorted(p.name for p in directory.glob("*.txt"))
    readme = (directory / "README.md").read_text()
    for item in listed:
        assert item["file"] in readme and item["source"].split()[0] in readme
    assert DEGRADED == ["gh_nccltests290_h100_2n8g_ib_allreduce_ring_degraded.txt"]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_log_parses_with_what_it_says(name):
    entry = ENTRIES[name]
    log = parse_nccl_log(validate.LOGS / name, nodes=entry.nodes, gpus_per_node=entry.gpus_per_node)
    assert log.n_ranks == entry.nodes * entry.gpus_per_node and log.n_nodes == entry.nodes
    assert log.rows and all(r.out_of_place.time_us > 0 for r in log.rows)
    if log.ranks_from == "rank lines":
        # The GPU the index names (its first family that the index's text mentions).
        gpu = next(family for family in ("GH200", "GB200", "A100", "H200", "H100", "B200") if family in entry.gpu)
        assert len(log.gpu_models) == 1 and gpu in log.gpu_models[0]
        assert all(host.startswith(("node", "bm-h100-", "inst-", "gpu-dp-", "cnode3-", "ztan-mig-", "h100-ord01-", "nid",
                                    "nccl-test-host-", "nccl-allreduce-job0-mpiworker-", "pool0-", "a000",
                                    "pt0", "spt0"))
                   for host in log.hosts)
    else:
        # Logs pasted without their rank lines, or with the last of them only: the index's
        # shape, and a warning saying so.
        assert any("no rank lines" in w or "(pasted in part)" in w for w in log.warnings)


def test_the_rank_lines_hosts_and_versions_are_read():
    log = parse_nccl_log(validate.LOGS / "gh_nccltests309_h100_2n8g_ib400_allreduce.txt")
    assert log.hosts == ("bm-h100-01", "bm-h100-02") and log.n_ranks == 16
    assert log.gpu_models == ("NVIDIA H100 80GB HBM3",) and log.nccl_version == "2.26.2+cuda12.8"
    assert len(log.rows) == 32 and log.warnings == ()
    degraded = parse_nccl_log(validate.LOGS / DEGRADED[0])  # every line prefixed by srun's "0: "
    assert degraded.hosts == ("node005", "node007") and len(degraded.rows) == 11


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_row_is_predicted_finite_and_positive(reports, name):
    report = reports[name]
    entry = ENTRIES[name]
    log = parse_nccl_log(validate.LOGS / name, nodes=entry.nodes, gpus_per_node=entry.gpus_per_node)
    assert len(report.rows) == len(log.rows)
    for row in report.rows:
        if row.size_bytes == 0:  # all-gather's 8-64 B on 8 ranks: no element per rank, nothing to predict
            assert row.predicted_time_us is None
            continue
        assert row.predicted_time_us is not None and math.isfinite(row.predicted_time_us)
        assert row.predicted_time_us > 0 and row.predicted_busbw_GBps > 0


def _large(rows):
    """Rows from 1 GiB; the two largest sizes of a log that stops below 1 GiB (CSCS's, at 128 MiB)."""
    large = [r for r in rows if r.size_bytes >= GiB]
    return large or sorted(rows, key=lambda r: r.size_bytes)[-2:]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_large_messages_are_within_15_percent(reports, name):
    large = _large(reports[name].rows)
    assert large
    assert all(abs(r.error_out) <= 0.15 for r in large), [(r.size_bytes, round(r.error_out, 3)) for r in large]


@pytest.mark.parametrize("name", HEALTHY_UNFLAGGED)
def test_healthy_large_messages_are_not_flagged(reports, name):
    assert not [r.size_bytes for r in _large(reports[name].rows) if r.flagged]


@pytest.mark.parametrize("name", DEGRADED)
def test_the_degraded_log_is_flagged_short(reports, name):
    report = reports[name]
    assert not report.ok
    large = [r for r in report.rows if r.size_bytes >= GiB]
    # About 90 GB/s measured where 8 NDR NICs per node carry a ring at about 380.
    assert large and all(r.short and not r.fast and r.ratio_out < 0.3 for r in large)


def test_the_script_prints_the_table_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    name = "oci_bmgpu48_a100_1n8g_allreduce.txt"
    assert validate.main(["--markdown", "--log", name, "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| log | system | nccl | healthy | < 64 KiB: median / worst (n)")
    assert out[2].startswith(f"| `{name}` | 1 x oci-bm-gpu4-8, ")  # the index names the shape
    assert "| 2.30.7 | yes |" in out[2]  # the index gives no version: the default
    assert (tmp_path / "oci_bmgpu48_a100_1n8g_allreduce.png").stat().st_size > 1000


def test_the_table_ends_with_the_healthy_logs_rows_pooled(reports, capsys):
    names = ["oci_bmgpu48_a100_1n8g_allreduce.txt", "liplus_a100_1n8g_sendrecv.txt", DEGRADED[0]]
    assert validate.main(["--markdown", *(f"--log={n}" for n in names)]) == 0
    last = capsys.readouterr().out.splitlines()[-1].split(" | ")
    rows = [r for n in names[:2] for r in reports[n].rows]  # the degraded log's rows stay out
    big = [r.error_out for r in rows if r.size_bytes >= 1 << 20]
    median, worst = statistics.median(abs(e) for e in big), max(big, key=abs)
    assert last[0] == "| 2 healthy logs, rows pooled" and last[-1] == f"0 of {len(rows)} rows |"
    assert last[6] == f"{100 * median:.0f}% / {validate._percent(worst)} ({len(big)})"


def test_the_nccl_environment_goes_to_the_prediction_only_where_the_api_takes_it(monkeypatch):
    env = {"NCCL_ALGO": "Ring"}
    taken = "nccl_env" in __import__("inspect").signature(validate.collective_time).parameters
    assert validate.prediction_options(env) == ({"nccl_env": env} if taken else {})

    def with_env(topology, collective, size_bytes, *, nccl_env=None, **options):
        return None

    monkeypatch.setattr(validate, "collective_time", with_env)
    assert validate.prediction_options(env) == {"nccl_env": env}


# Rows of healthy logs that `flowsim check` flags at its defaults, and why (docs/validation.md,
# "Validation against real nccl-tests logs"). Everything else of every healthy log passes.
FLAGGED_HEALTHY_ROWS = {
    # 8 H100's sendrecv: 32-128 MiB on 4, 4 and 8 channels are the calibration of
    # P2P_NVLINK_BYTES_PER_CYCLE (within 2%); the 8 A100's 128 MiB on 8 channels, held out,
    # within 4%; the H100 node's 4-GPU run, held out, within 3% at 32-128 MiB. Nothing of
    # either H100 run is flagged.
    # 586 GB/s where 1 GiB reaches 681 and 2 GiB 758: on 72 ranks (7.3 MB a rank) the rack's
    # busbw still climbs steeply; flowsim's NVLS pipeline gives 697 (+19%). While every NVLS
    # message was capped on its own, 644 (+10%), and the larger sizes 3-6% lower than now.
    "coreweave_gb200_nvl72_allreduce.txt": [512 << 20],
    # 24.9-25.0 GB/s on 2 channels a peer, 28 at NCCL's 14 GB/s a channel (see SENDRECV_10N1G).
    SENDRECV_10N1G: [1 << k for k in range(27, 35)],
    # 0.87-0.89 of the model's channels at 8-16 GiB (see TEN_HOSTS); the 32 MiB row too, 2.3x
    # NCCL's own model of its LL128 ring, as the all-gather's (not flagged there: NCCL's
    # latency part of the time is held to 3x only).
    TEN_HOSTS[2]: [(32 << 20) - 512, (8 << 30) - 512, (16 << 30) - 1024],
    # 32-64 MiB 20-35% below the NICs' rate: the 80 peers' messages of 420-840 KB do not fill
    # them; from 1 GiB within 5%.
    "xxrjun_h100_10n8g_alltoall.txt": [(32 << 20) - 512, (64 << 20) - 1024],
    # The same hosts' 20- and 40-rank all-to-alls (held out, 2026-12-05): 32 MiB 20% and 33%
    # below the NICs' rate (messages of 1.7 and 0.8 MB a peer); from 1 GiB within 7%.
    "xxrjun_h100_10n2g_alltoall.txt": [(32 << 20) - 192],
    "xxrjun_h100_10n4g_alltoall.txt": [(32 << 20) - 512],
    # Every size, 8 MiB-8 GiB: half of the model's rate (see TCPX).
    TCPX: [1 << k for k in range(23, 34)],
    # AWS's 2 x p4de, where aws-ofi-nccl forces Simple (the system file's [nccl.env]): at 8
    # MiB, with the 8 MiB buffers the plugin sets, NCCL's tree chunk is 1 MiB, one a channel,
    # crossing each server's chain hop after hop; the model holds those A100 hops to half a
    # thread block (15.2 GB/s, from H100's point-to-point rate at A100's clock) and is 1.73x
    # slower than this run there (flagged FAST). docs/validation.md.
    "aws_p4de_a100_2n8g_allreduce.txt": [8 << 20],
    # CSCS's Alps GH200 nodes over Slingshot (aws-ofi-nccl on libfabric's CXI, which reports no
    # latency to NCCL): the steps between nodes take longer than NCCL's constants say, and no
    # source gives by how much. 8 ranks' LL at 256 KiB-1 MiB 2.3-3.6x slower than the model;
    # 2 ranks' Simple ring at 1-8 MiB 1.5-5x (340 us at 1 MiB); both within 5% at 64-128 MiB.
    "cscs_alps_gh200_2n4g_allreduce.txt": [1 << 18, 1 << 19, 1 << 20],
    "cscs_alps_gh200_2n1g_allreduce.txt": [1 << 20, 1 << 21, 1 << 22, 1 << 23],
    # At 256-512 MiB the replay's LL128 tree gives 191-192 where the run moves 156-165,
    # 0.81-0.87, flagged SHORT: LL128 trees between servers run slower than the model on AWS's
    # p4de and p5 too (docs/validation.md). From 1 GiB NCCL's tree, 1.18-1.30x NCCL's model of
    # it (see OCI_A100_TREE), is not FAST: the links described allow it.
    OCI_A100_TREE: [1 << 28, 1 << 29],
    # 1 MiB-2 GiB, 0.39-0.62 of the model's CollNet (see SHARP_LLT).
    SHARP_LLT: [1 << k for k in range(20, 32)],
}


def test_trees_faster_than_nccls_model_but_not_than_their_links_are_not_fast(reports):
    # GCP A3 Mega's and OCI's A100 pair's trees beat NCCL's model of them from 4 and 1 GiB, by
    # 9-13% and 18-30%: before 2026-12-06 `flowsim check` flagged those healthy rows FAST (the
    # system described wrong). On the links alone the same trees are as fast as the runs, so
    # the rows are said to be faster than NCCL's model, and not flagged.
    for name, sizes in ((TCPXO, [4 << 30, 8 << 30]), (OCI_A100_TREE, [1 << 30, 2 << 30, 4 << 30, 8 << 30])):
        report = reports[name]
        assert list(report.fast_within_links) == sizes and not report.fast
        assert {r.algorithm for r in report.rows if r.size_bytes in sizes} == {"tree"}
        assert min(r.ratio_out for r in report.rows if r.size_bytes in sizes) > 1 + report.threshold
        assert "faster than NCCL's model of tree/simple, to which flowsim holds it" in report.format_text()


@pytest.mark.parametrize("name", [n for n, e in ENTRIES.items() if e.healthy])
def test_healthy_logs_flag_only_the_rows_explained(reports, name):
    # Latency-bound rows may be up to 3x NCCL's latency constants (flowsim.check.report.LATENCY_TOLERANCE).
    flagged = [r.size_bytes for r in reports[name].rows if r.flagged]
    assert flagged == FLAGGED_HEALTHY_ROWS.get(name, [])


def test_a_thread_driving_eight_gpus_sets_the_small_sizes_of_the_a100_log(reports):
    # The OCI A100 log ran one thread with -g 8 and is flat at 32.0-32.2 us from 64 B to 8 KiB.
    # The host's launch floor, 8 x 4.2 us = 33.6 us (docs/hardware.md 6.2; the 4.2 us comes from
    # another machine, NVIDIA/nccl-tests#123, so this log is held out), predicts them within 6%;
    # NCCL's own latency (about 15 us) would be 2x off.
    report = reports["oci_bmgpu48_a100_1n8g_allreduce.txt"]
    assert report.launch_floor_us == pytest.approx(33.6)
    small = [r for r in report.rows if r.size_bytes <= 8192]
    assert len(small) == 8 and all(r.launch_bound for r in small)
    assert all(r.predicted_time_us == pytest.approx(33.6) for r in small)
    assert all(1.0 < 33.6 / r.measured_time_out_us < 1.06 for r in small)
    # One GPU per process (the 2 x H100 logs): the floor is 4.2 us, far below NCCL's latency.
    two_nodes = reports["gh_nccltests309_h100_2n8g_ib400_allreduce.txt"]
    assert two_nodes.launch_floor_us == pytest.approx(4.2)
    assert not any(r.launch_bound for r in two_nodes.rows)


def test_the_rack_log_is_one_nvl72_of_unnamed_gpus(reports):
    # 18 trays of 4 GPUs fill one GB200 NVL72 (one NVLink domain, NVLS inside it); the driver's
    # "NVIDIA Graphics Device" names no model, so it is no GPU mismatch.
    report = reports["coreweave_gb200_nvl72_allreduce.txt"]
    assert (report.nodes, report.system, report.algorithm) == (1, "gb200_nvl72", "nvls")
    assert report.log.gpu_models == ("NVIDIA Graphics Device",)
    assert not [w for w in report.warnings if "the log's GPUs are" in w or "(--nodes)" in w]


def _index(tmp_path, *items):
    """A measurements directory of the calibration logs ``a.txt`` (2 x 8 H100, nccl-tests#309)
    and ``b.txt`` (1 x 8 A100, OCI) and an index of ``items``."""
    for name, log in (("a.txt", "gh_nccltests309_h100_2n8g_ib400_allreduce.txt"),
                      ("b.txt", "oci_bmgpu48_a100_1n8g_allreduce.txt")):
        (tmp_path / name).write_text((validate.LOGS / log).read_text())
    base = {"nccl_version": None, "env": {}, "healthy": True, "gpus_per_node": 8, "intra": "nvswitch-nvlink4"}
    (tmp_path / "index.json").write_text(json.dumps([{**base, **item} for item in items]))
    return tmp_path


@pytest.mark.parametrize("text, nics", [
    ("8x InfiniBand NDR 400 Gb/s per node (ConnectX-7)", {"speed_gbps": 400, "count": 8, "kind": "ib"}),
    ("8x400G RoCE", {"speed_gbps": 400, "count": 8, "kind": "roce"}),
    ("32 x 100 Gb/s EFA (p5.48xlarge)", {"speed_gbps": 100, "count": 32, "kind": "efa"}),
    ("2 x 100GbE", {"speed_gbps": 100, "count": 2, "kind": "roce"}),
    ("4x Slingshot-11 200 Gb/s", {"speed_gbps": 200, "count": 4}),
    ("one HDR NIC a GPU", {"speed_gbps": 200, "per_gpu": True, "kind": "ib"}),
    ("ConnectX-7 on a p5.48xlarge", None),
    # A re-audit's misreads: a count per GPU or across nodes, HDR100, TCP, NVIDIA's Ethernet.
    ("1x 400Gb/s NDR per GPU", {"speed_gbps": 400, "count": 1, "per_gpu": True, "kind": "ib"}),
    ("16 x 400G NDR across the 2 nodes", {"speed_gbps": 400, "count": 16, "nodes": 2, "kind": "ib"}),
    ("8x ConnectX-6 HDR100", {"speed_gbps": 100, "count": 8, "kind": "ib"}),
    ("100 Gb/s Ethernet, TCP sockets (no RDMA)", {"speed_gbps": 100, "kind": "tcp"}),
    ("Spectrum-X 400G", {"speed_gbps": 400, "kind": "roce"}),
])
def test_the_nic_text_of_an_index_entry_is_read(text, nics):
    assert validate.nics_from_text(text) == nics


RING = {"env": {"NCCL_ALGO": "Ring"}}


def test_an_entry_without_a_system_is_checked_on_the_server_its_gpu_and_nics_name(tmp_path):
    directory = _index(
        tmp_path,
        {"file": "a.txt", "gpu": "H200", "nodes": 2, "nic": "8x InfiniBand NDR 400 Gb/s"},
        {"file": "a.txt", "gpu": "H100 80GB HBM3", "nodes": 2, "nic": "8x InfiniBand NDR 400 Gb/s", **RING},
        {"file": "a.txt", "gpu": "H100 80GB HBM3", "nodes": 2, "nic": "8x RoCE 200 Gb/s per node", **RING},
        {"file": "a.txt", "gpu": "H100 (p5.48xlarge)", "nodes": 2, "nic": "32 x 100 Gb/s EFA"},
        {"file": "a.txt", "gpu": "H100", "nodes": 2, "nic": "16 x 200 Gb/s RoCE (OCI BM.GPU.H100.8)"},
        {"file": "b.txt", "gpu": "A100 (SXM, NVLink/NVSwitch)", "nodes": 1, "nic": "8x 100 Gb/s RoCE",
         "intra": "nvswitch-nvlink3"},
    )
    listed = validate.entries(directory)
    assert [e.system for e in listed] == ["dgx-h200", "dgx-h100", "dgx-h100 with 8 x 200 Gb/s roce", "aws-p5",
                                          "oci-bm-gpu-h100-8", "dgx-a100"]
    assert all(not e.problem for e in listed)
    roce = listed[2].server
    assert roce.nic_kind == "roce" and roce.compute_nic == "eth200g" and roce.gpu_nics == tuple(range(8))
    # A ring across two servers crosses each server's eight NICs: at half their rate, about half
    # the busbw (8 GiB, where the NICs bound it).
    big = [8 << 30]
    ib, half = (validate.check_entry(listed[k], sizes=big).rows[0] for k in (1, 2))
    assert 0.45 < half.predicted_busbw_GBps / ib.predicted_busbw_GBps < 0.55


def test_pcie_cards_rack_names_and_nic_counts_are_read_as_the_index_means_them(tmp_path):
    directory = _index(
        tmp_path,
        {"file": "a.txt", "gpu": "A100 80GB PCIe", "nodes": 2, "nic": "2x HDR 200G",
         "intra": "PCIe Gen4 switches, no NVSwitch"},
        {"file": "a.txt", "gpu": "H100 NVL", "nodes": 2, "nic": "8x 400G", "intra": "NVLink bridge pairs (no NVSwitch)"},
        {"file": "a.txt", "gpu": "H100 80GB HBM3", "nodes": 2, "nic": "1x 400Gb/s NDR per GPU"},
        {"file": "a.txt", "gpu": "H100 80GB HBM3", "nodes": 2, "nic": "16 x 400G NDR across the 2 nodes"},
        {"file": "a.txt", "gpu": "H100", "nodes": 2, "nic": "Standard_ND96isr_H100_v5, 8x NDR"},
        {"file": "a.txt", "gpu": "H100 80GB HBM3", "nodes": 2, "nic": "100 Gb/s Ethernet, TCP sockets (no RDMA)"},
        {"file": "b.txt", "gpu": "GB200 NVL72", "nodes": 1, "intra": "NVLink 5, NVSwitch"},
    )
    listed = validate.entries(directory)
    # PCIe cards: a box of the index's 8 a node as flowsim check guesses one, with the NICs the
    # index gives (two HDR ports of 200 Gb/s); NVL cards' bridges are no guess.
    assert listed[0].system == "guessed_8x_a100_80gb_pcie with 2 x 200 Gb/s ib", listed[0].problem
    box = listed[0].server
    assert (box.gpu_fabric, box.pcie, box.sockets, box.n_nics, box.compute_nic) == ("pcie", "pcie4", 2, 2, "ib_hdr")
    assert "no flowsim server for the GPU 'H100 NVL'" in listed[1].problem
    assert [e.system for e in listed[2:5]] == ["dgx-h100", "dgx-h100", "azure-nd-h100-v5"]  # 8 x 400 NDR, as the DGX
    assert "run TCP sockets, which flowsim does not model" in listed[5].problem
    assert listed[6].system == "gb200-nvl72"


def test_gpus_of_no_nvidia_server_take_the_system_check_suggests_and_a_tray_its_own_nics(tmp_path):
    directory = _index(
        tmp_path,
        {"file": "b.txt", "gpu": "NVIDIA A100 80GB", "nodes": 1, "intra": "NVSwitch (HGX A100)"},
        {"file": "a.txt", "gpu": "GH200 (quad node)", "nodes": 2, "gpus_per_node": 4, "intra": "nvlink4 mesh",
         "nic": "4x Slingshot-11 200 Gb/s per node"},
        {"file": "b.txt", "gpu": "GB300", "nodes": 2, "gpus_per_node": 4, "intra": "NVLink 5, one NVL72 rack"},
        {"file": "b.txt", "gpu": "NVIDIA GB200", "nodes": 2, "gpus_per_node": 4, "intra": "nvswitch-nvlink5",
         "nic": "4x 200 Gb/s CX-7 InfiniBand per tray"},
    )
    listed = validate.entries(directory)
    assert [e.problem for e in listed] == [""] * 4
    # An SXM A100 the index names by its memory, on NVIDIA's server as its NVSwitch says.
    assert listed[0].system == "dgx-a100"
    # A GH200 quad node, CSCS's system file in the repository (its NICs as the index states
    # them, as the file has them); a GB300 rack, OCI's.
    assert listed[1].system == "data/systems/alps_gh200.toml" and listed[1].server.n_nics == 4
    assert listed[2].system == "oci-bm-gpu-gb300-4"
    # A GB200 tray's 4 NICs are each of the rack's 18 trays': 72, at the index's 200 Gb/s.
    assert listed[3].system == "gb200-nvl72 with 72 x 200 Gb/s ib"
    assert (listed[3].server.n_nics, listed[3].server.compute_nic) == (72, "ib_hdr")


def test_pcie_entries_counts_and_nic_placements_are_read_as_written(tmp_path):
    directory = _index(
        tmp_path,
        # The rack's own count, not a tray's (it was multiplied by the 18 trays).
        {"file": "b.txt", "gpu": "GB200", "nodes": 2, "gpus_per_node": 4, "intra": "nvswitch-nvlink5",
         "nic": "72x 200G InfiniBand for the rack"},
        # Eight a node, one a GPU: not 64.
        {"file": "a.txt", "gpu": "H100 80GB HBM3", "nodes": 2, "nic": "8x 200 Gb/s NDR200, one per GPU"},
        # PCIe alone in 'intra': the GPU is a card, whatever its name says; a count before it is not its.
        {"file": "b.txt", "gpu": "H100 80GB", "nodes": 1, "intra": "PCIe Gen5"},
        {"file": "b.txt", "gpu": "8x L40S", "nodes": 1, "intra": "PCIe"},
    )
    listed = validate.entries(directory)
    assert [e.problem for e in listed] == [""] * 4
    assert listed[0].system == "gb200-nvl72 with 72 x 200 Gb/s ib" and listed[0].server.n_nics == 72
    assert listed[1].system == "dgx-h100 with 8 x 200 Gb/s ib" and listed[1].server.n_nics == 8
    assert listed[2].system == "guessed_8x_h100_80gb_pcie" and listed[2].server.pcie == "pcie5"
    assert listed[3].system == "guessed_8x_l40s"


def test_an_entry_no_system_fits_is_listed_not_checked_and_the_others_are(tmp_path, capsys):
    directory = _index(
        tmp_path,
        {"file": "b.txt", "gpu": "H100 NVL", "nodes": 1, "nic": None, "intra": "NVLink bridge pairs"},
        {"file": "a.txt", "gpu": "H100", "nodes": 2, "nic": "3 x 400 Gb/s IB"},
        {"file": "missing.txt", "gpu": "H100", "nodes": 1},
        {"file": "b.txt", "gpu": "A100-SXM4-40GB", "nodes": 1},
    )
    listed = validate.entries(directory)
    assert "no flowsim server for the GPU 'H100 NVL'" in listed[0].problem
    assert "do not split evenly over dgx-h100's 8 GPUs" in listed[1].problem
    assert "missing.txt" in listed[2].problem and listed[3].system == "dgx-a100"
    with pytest.raises(validate.InputError, match="H100 NVL"):
        validate.check_entry(listed[0])
    assert validate.main(["--directory", str(directory)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert sum("not checked: " in line for line in lines) == 3 and "1 x dgx-a100, ring" in lines[4]
    assert "3 of 4 logs not checked" in captured.err
    assert validate.main(["--directory", str(directory), "--log", "missing.txt"]) == 1
