"""NCCL's choice under each version flowsim has constants for, against NCCL's model worked by
hand from that version's sources ([NCCL] tags v2.19.3-1, v2.26.2-1, v2.27.7-1, v2.28.9-1 and v2.30.7-1:
src/graph/tuning.cc, search.cc, connect.cc, topo.h, src/transport/nvls.cc; docs/hardware.md
§7.3), and the version ``flowsim check`` takes from a log.

The named case is the cluster of data/validation/nccl_tests/gh_nccltests309_h100_2n8g_ib400_
allreduce.txt, which ran NCCL 2.26.2: two DGX H100 servers, 16 ranks, eight 400 Gb/s NICs each.
Its search gives the same graphs in 2.26.2 as in 2.30.7 (same SM90 speed arrays and
SM90_NVLINK_BW 20.6): rings and trees 8 channels at 48 GB/s (tests/test_tuner.py), and NVLS
8 channels at 40 intra-node and 48 inter-node: at 48 a channel loads each GPU's NVLinks by
48 x 9/8 = 54 (6 fit in 18 x 20.6 = 370.8), at 45 by 50.6 (7 fit, 315 > 288), at 40 by 45
(8 fit, every head: done); pass 2 raises the inter-node speed to 48 (a NIC carries 1/8 of a
channel).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowsim.check import check_nccl_log, parse_nccl_log
from flowsim.check.report import nccl_version_of
from flowsim.collectives.constants import NCCL_VERSIONS, constants_of, nccl_release, nearest_version
from flowsim.collectives.tuner import (
    NcclEnv,
    NcclSystem,
    _ll128_enabled,
    _model,
    _nccl_link_bw,
    _search_once,
    nccl_choice,
)
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.presets import preset
from flowsim.systemfile import resolve_system

MiB, GiB = 1 << 20, 1 << 30


def _model_of(topology, collective, version, ranks=None):
    ranks = ranks or [topology.node_names[g] for g in topology.gpus()]
    constants = constants_of(version)
    system, graphs = _search_once(topology, ranks, constants, None, None)
    return graphs, _model(system, graphs, constants, collective, NcclEnv({}))


def test_the_named_case_searches_the_same_graphs_in_2_26_2(two_h100):
    graphs, _ = _model_of(two_h100, "all_reduce", "2.26.2")
    assert (graphs["ring"].n_channels, graphs["ring"].bw_intra) == (8, 48.0)
    assert (graphs["nvls"].n_channels, graphs["nvls"].bw_intra, graphs["nvls"].bw_inter) == (8, 40.0, 48.0)


def test_nvls_tree_model_time_of_the_named_case_under_2_26_2(two_h100):
    # v2.26.2-1 tuning.cc, NVLSTree on 2 nodes: bw = min(bwIntra 40, bwInter 48) = 40, busBw =
    # 8 x 40 = 320, algbw = 320 x 5/6 = 266.67 GB/s; latency = baseLat 0 + hwLat[NVLINK]
    # [NVLSTree] 25 + 2 x log2(2) x hwLat[NET][NVLSTree][Simple] 14 = 53 us. At 8 GiB:
    # 53 + 8589934592 / (1000 x 266.67) = 32265.25 us (the log measured 34381 us).
    choice = nccl_choice(two_h100, "all_reduce", 8 * GiB, version="2.26.2")
    assert (choice.algorithm, choice.protocol, choice.n_channels) == ("nvls_tree", "simple", 16)
    assert choice.model_time_us == pytest.approx(53 + 8 * GiB / (1000 * 320 * 5 / 6))
    assert choice.model_time_us == pytest.approx(32265.25, abs=0.01)
    # Reported as nccl-tests' busbw: algbw x 2 (n - 1) / n = 266.67 x 30 / 16 = 500.
    assert choice.bus_bandwidth_GBps == pytest.approx(500.0)
    # 2.30.7 (v2.30.7-1): min(48 x 0.85 x 7/8 x 2, 2 x 48, 57.7) x 8 = 461.6 bus, x 16/30
    # algbw; latency 25 + 2 x 20.9 = 66.8.
    master = nccl_choice(two_h100, "all_reduce", 8 * GiB)
    assert master.model_time_us == pytest.approx(66.8 + 8 * GiB / (1000 * 461.6 * 16 / 30))


def test_at_1_mib_the_named_case_picks_nvls_tree_in_2_26_2_and_tree_ll128_in_2_30_7(two_h100):
    # Tree LL128 (both versions): latency 14.0 + 2 x (7 x 1.25 + 1 x 8.5) = 48.5; busBw 8 x 48
    # = 384 -> min(x .92, 8 x perChMaxTreeBw 41.4 = 331.2) -> min(x 120/128, 8 x 36.7 = 293.6)
    # = 293.6, algbw x .5 = 146.8, tree correction LL128 at log2(1 MiB / 64) = 14: .6.
    tree_ll128 = 48.5 + MiB / (1000 * 293.6 * 0.5 * 0.6)
    nvls_tree_2_26_2 = 53 + MiB / (1000 * 320 * 5 / 6)  # 56.93 us
    old = nccl_choice(two_h100, "all_reduce", MiB, version="2.26.2")
    assert old.table[("tree", "ll128")] == pytest.approx(tree_ll128)  # 60.40 us
    assert (old.algorithm, old.model_time_us) == ("nvls_tree", pytest.approx(nvls_tree_2_26_2))
    new = nccl_choice(two_h100, "all_reduce", MiB)
    assert (new.algorithm, new.protocol, new.model_time_us) == ("tree", "ll128", pytest.approx(tree_ll128))


def test_ring_latency_counts_inter_node_steps_per_version(two_h100):
    # Ring Simple all-reduce, 16 ranks on 2 nodes: nsteps 30; intraLat max(hwLat NVLink 3.4,
    # 3 x 1 us Intel net overhead) = 3.4; interLat hwLat[NET][Ring][Simple] 14. Inter-node
    # steps: 2 x (2 - 1) = 2 from v2.23.4-1, 2 x 2 = 4 in v2.19.3-1. At 8 B no plateau factor
    # (8 / (channels x 16) < 64); algbw 8 x 48 x 16/30.
    bytes_time = 8 / (1000 * 8 * 48 * 16 / 30)
    for version in ("2.30.7", "2.26.2"):
        table = nccl_choice(two_h100, "all_reduce", 8, version=version).table
        assert table[("ring", "simple")] == pytest.approx(8.4 + 28 * 3.4 + 2 * 14 + bytes_time)  # 131.6
    table = nccl_choice(two_h100, "all_reduce", 8, version="2.19.3").table
    assert table[("ring", "simple")] == pytest.approx(8.4 + 26 * 3.4 + 4 * 14 + bytes_time)  # 152.8


def test_communicator_channels_double_by_each_versions_rule(two_h100):
    # connect.cc: 2 x min(8 ring, 8 tree) = 16, then doubled on Hopper across nodes with rings
    # faster than 45 GB/s: below 16 channels from v2.20.3-1 (so not here), up to 64 in v2.19.3-1.
    ring = {"NCCL_ALGO": "ring"}
    for version, channels in (("2.30.7", 16), ("2.26.2", 16), ("2.19.3", 32)):
        choice = nccl_choice(two_h100, "all_reduce", 8 * GiB, nccl_env=ring, version=version)
        assert choice.max_channels == channels, version


def test_rings_ran_on_nvls_channels_from_2_22_3_to_2_27(h100):
    # v2.26.2-1 src/graph/connect.cc: after NCCL_MAX_NCHANNELS, "if (comm->nChannels <
    # comm->nvlsChannels)" the channels are copied up to NVLS's (16 on Hopper; NCCL_MAX_CTAS
    # bounds those, NCCL_MAX_NCHANNELS does not), and rings run on them; v2.28.3-1 dropped it.
    # Without NVLS (NCCL_NVLS_ENABLE=0: nvlsChannels 0) nothing is raised.
    capped = {"NCCL_ALGO": "ring", "NCCL_MAX_NCHANNELS": "8"}
    for version, env, channels in (("2.26.2", capped, 16), ("2.28.9", capped, 8), ("2.30.7", capped, 8),
                                   ("2.26.2", {**capped, "NCCL_NVLS_ENABLE": "0"}, 8),
                                   ("2.26.2", {**capped, "NCCL_MAX_CTAS": "12"}, 12)):
        choice = nccl_choice(h100, "all_reduce", 8 * GiB, nccl_env=env, version=version)
        assert choice.max_channels == channels, (version, env)


@pytest.fixture(scope="module")
def two_b300():
    spec, _, cluster = resolve_system("oci-bm-gpu-b300-8")
    return build_cluster(spec, 2, figure="effective", fabric="rail_optimized")


def test_nvls_search_keeps_more_channels_at_a_lower_speed(two_b300):
    # ncclTopoCompareGraphs: for NVLS "the more the better", more channels win at any speed.
    # A B300's 18 NVLinks give NCCL 18 x 40.1 = 721.8 GB/s; an NVLS channel loads them by
    # 9/8 of its speed. The search starts at 96 (the GPU's PCIe Gen6 path to its 800 Gb/s
    # NIC): 96 x 9/8 = 108, 6 channels fit. 2.28.9's sm100 inter speeds go on to 48: 54, 13
    # fit, 8 heads: 8 channels at 48 replace 6 at 96 (384 < 576 GB/s); pass 2 then raises
    # the inter-node speed to 96. 2.30.7's array has 86 (7 fit) and 80 (90 each: 8 fit).
    for version, graph in (("2.28.9", (8, 48.0, 96.0)), ("2.30.7", (8, 80.0, 96.0))):
        nvls = _model_of(two_b300, "all_reduce", version)[0]["nvls"]
        assert (nvls.n_channels, nvls.bw_intra, nvls.bw_inter) == graph, version


def test_two_b300_servers_ran_rings_under_2_28_9(two_b300):
    # 2.28.9's model: NVLSTree 8 channels x min(48 x 0.74 x 7/8 x 2 = 62.16, 2 x 96, 96) =
    # 497.3 GB/s, rings 16 x 48 = 768: the ring wins, as OCI's run with NCCL 2.28.9 shows
    # (766.54 GB/s at 8 GiB, the ring's bound of eight 800 Gb/s NICs; README cloud table).
    _, model = _model_of(two_b300, "all_reduce", "2.28.9")
    assert model[("nvls_tree", "simple")][2] == pytest.approx(8 * 48 * 0.74 * 7 / 8 * 2)
    assert model[("ring", "simple")][2] == pytest.approx(768.0)
    assert nccl_choice(two_b300, "all_reduce", 8 * GiB, version="2.28.9").algorithm == "ring"


def test_nvls_on_one_h100_node_before_2_28_3(h100):
    # NVLS graph 8 x 40 intra, 60 inter (tests/test_tuner.py; in 2.19.3 too: 18 NVLinks at
    # SM90_NVLINK_BW 20.0 = 360 hold 8 x 40 x 9/8 = 360 exactly). v2.26.2-1 and v2.19.3-1:
    # bw = min(40, 60), busBw 320, algbw x 5/6; latency hwLat[NVLINK][NVLS] 25 (2.26.2), 23
    # (2.19.3); NVLS_NCHANNELS 16.
    for version, latency in (("2.26.2", 25.0), ("2.19.3", 23.0)):
        choice = nccl_choice(h100, "all_reduce", GiB, version=version)
        assert (choice.algorithm, choice.n_channels) == ("nvls", 16)
        assert choice.model_time_us == pytest.approx(latency + GiB / (1000 * 320 * 5 / 6))
    # 2.30.7: 8 x min(40 x 0.85 x 7/8 x 2, 60) = 476 bus, x 8/14 algbw.
    assert nccl_choice(h100, "all_reduce", GiB).model_time_us == pytest.approx(25 + GiB / (1000 * 476 * 8 / 14))


def test_nvls_all_gather_bandwidth_is_not_converted_since_2_23_4(h100):
    # v2.23.4-1 on, tuning.cc converts bus to algorithm bandwidth for rings only in all-gather
    # and reduce-scatter. 2.30.7: 8 x min(40 x 0.85 x 7/8 x 7/8, 60) = 208.25 GB/s, latency 25.
    # 2.26.2: 8 x min(40, 60) = 320 unconverted. 2.19.3 converts NVLS's too: 320 x 5/6, and 23.
    tables = {v: nccl_choice(h100, "all_gather", GiB, version=v).table for v in NCCL_VERSIONS}
    assert tables["2.30.7"][("nvls", "simple")] == pytest.approx(25 + GiB / (1000 * 208.25))
    assert tables["2.26.2"][("nvls", "simple")] == pytest.approx(25 + GiB / (1000 * 320))
    assert tables["2.19.3"][("nvls", "simple")] == pytest.approx(23 + GiB / (1000 * 320 * 5 / 6))
    # v2.27.3-1 to v2.27.7-1: all-gather and reduce-scatter take min(bwIntra x (ppn-1)/ppn,
    # bwInter x 0.9) = min(40 x 7/8, 60 x 0.9) = 35, 8 x 35 = 280 unconverted.
    assert tables["2.27.7"][("nvls", "simple")] == pytest.approx(25 + GiB / (1000 * 280))


def test_ring_ll_bandwidth_of_2_19_3(a100):
    # A100 node: rings 12 x 20 = 240 GB/s; llMaxBws[Ampere][1 node] 87.7 in every version.
    # v2.19.3-1: busBw x 1/4 for all-reduce (60), x 1/3 for all-gather (80); from v2.21.5-1
    # x .5 (120, capped at 87.7).
    for collective, old_bus in (("all_reduce", 60.0), ("all_gather", 80.0)):
        assert _model_of(a100, collective, "2.19.3")[1][("ring", "ll")][2] == pytest.approx(old_bus)
        assert _model_of(a100, collective, "2.26.2")[1][("ring", "ll")][2] == pytest.approx(87.7)


def test_pat_exists_from_2_23_4(two_h100):
    # One rank per node: PAT for all-gather (ncclPatEnable). v2.26.2-1: latency = 8 ("Base
    # time") + log2(2) x (hwLat[NET][Tree][Simple] 14 / 3.5) + 2 x 2.8 = 17.6 us, as
    # 2.30.7's baseLat 8 + the same. v2.19.3-1 has no PAT.
    ranks = ["n0.gpu0", "n1.gpu0"]
    for version in ("2.30.7", "2.26.2"):
        assert _model_of(two_h100, "all_gather", version, ranks)[1][("pat", "simple")][0] == pytest.approx(17.6)
    assert ("pat", "simple") not in _model_of(two_h100, "all_gather", "2.19.3", ranks)[1]


@pytest.mark.parametrize(
    ("sm", "since"),
    [
        # v2.19.3-1 lists 70, 80, 90; v2.25.1-1 adds 100 and 120; from v2.27.3-1 SM70 and on.
        (86, (2, 27, 3)),
        (100, (2, 25, 1)),
        (90, (2, 19, 3)),
        (60, None),
    ],
)
def test_ll128_default_follows_each_versions_list(sm, since):
    system = NcclSystem(8, 1, sm, "nvlink", False, "intel")
    enabled = {v: since is not None and nccl_release(v) >= since for v in NCCL_VERSIONS}
    assert {v: _ll128_enabled(system, constants_of(v)) for v in NCCL_VERSIONS} == enabled
    assert enabled["2.24.3"] == (sm == 90) and enabled["2.25.1"] == (sm in (90, 100))
    assert not _ll128_enabled(NcclSystem(8, 1, sm, "pci", False, "intel"), constants_of("2.30.7"))


def test_nvlink_bandwidth_per_version(h100):
    # topo.h: SM90_NVLINK_BW 20.0 in v2.19.3-1, 20.6 from v2.20.3-1; a GPU's 18 NVLinks.
    link = next(int(link) for link in h100.links_from("gpu0") if h100.link_technology[link] == "nvlink4")
    assert _nccl_link_bw(h100, link, constants_of("2.19.3")) == pytest.approx(18 * 20.0)
    assert _nccl_link_bw(h100, link, constants_of("2.26.2")) == pytest.approx(18 * 20.6)
    b200 = preset("dgx_b200", figure="effective")
    link = next(int(link) for link in b200.links_from("gpu0") if b200.link_technology[link] == "nvlink5")
    # SM100_NVLINK_BW 40.0 in v2.26.2-1, 40.1 in v2.30.7-1.
    assert _nccl_link_bw(b200, link, constants_of("2.26.2")) == pytest.approx(18 * 40.0)
    assert _nccl_link_bw(b200, link, constants_of("2.30.7")) == pytest.approx(18 * 40.1)


def test_blackwell_nvls_tree_takes_the_tree_factors_since_2_29_2():
    # v2.29.2-1 tuning.cc: NVLSTree all-reduce on SM100 with x86 hosts multiplies its bandwidth
    # by treeCorrectionFactor[Simple][log2(bytes / 64)]: .5 at 1 MiB (log 14), none from 1 GiB
    # (log 24, past the table).
    two_b200 = build_cluster("dgx_b200", 2, figure="effective")
    _, model = _model_of(two_b200, "all_reduce", "2.30.7")
    latency, algbw, _ = model[("nvls_tree", "simple")]
    table = nccl_choice(two_b200, "all_reduce", MiB).table
    assert table[("nvls_tree", "simple")] == pytest.approx(latency + MiB / (1000 * algbw * 0.5))
    table = nccl_choice(two_b200, "all_reduce", GiB).table
    assert table[("nvls_tree", "simple")] == pytest.approx(latency + GiB / (1000 * algbw))


def test_2_26_2_constants_are_its_sources():
    # Spot checks against v2.26.2-1: hwLat NET NVLSTree 14 (20.9 in 2.30.7), Blackwell rows
    # twice Hopper's, no nvlsEfficiency, 23 tree factors, sm100 speeds without 45 and 18.
    c = constants_of("2.26.2")
    assert c.hw_latency_us["net"][5] == (0, 0, 14)
    assert c.per_channel_max_tree_bw[3] == (77.4, 82.8, 72.0)
    assert c.per_channel_max_ring_ll128_bw[3] == (73.4, 73.4, 73.4)
    assert c.nvls_efficiency is None and c.per_channel_max_nvls_tree_bw is None
    assert {len(row) for row in c.tree_correction} == {23}
    assert c.speeds_intra["blackwell"] == (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0)
    assert c.speeds_inter["blackwell"][0] == 48.0
    assert c.nvls_channels == {"hopper": 16, "blackwell": 32}
    assert list(NCCL_VERSIONS) == ["2.30.7", "2.29.7", "2.28.9", "2.27.7", "2.26.2", "2.25.1", "2.24.3", "2.23.4",
                                   "2.22.3", "2.21.5", "2.20.5", "2.19.3"]


def test_2_20_to_2_25_constants_are_their_sources():
    # Their tuning.cc arrays change at three tags ([NCCL] v2.20.5-1 ... v2.25.1-1): v2.21.5-1
    # hwLat NVLink NVLS / NVLSTree 23 -> 25 and Hopper's llMaxBws {87.7, 22.5, 19.0} ->
    # {141, 45, 35}; v2.23.4-1 Tree Simple baseLat 0 -> 8.4 and hwLat 28 -> 4.0 / 4.0 / 14;
    # v2.25.1-1 Blackwell rows (2 x Hopper's), sm100 speed arrays, SM100_NVLINK_BW 40.0 and
    # 32 NVLS channels on Blackwell, as v2.26.2-1. search.cc's sm90 intra array gains 11.0 at
    # v2.21.5-1; topo.h's SM90_NVLINK_BW is 20.6 from v2.20.3-1.
    tree_simple = {v: (constants_of(v).base_latency_us[0][2], constants_of(v).hw_latency_us["nvlink"][0][2],
                       constants_of(v).hw_latency_us["pci"][0][2], constants_of(v).hw_latency_us["net"][0][2])
                   for v in ("2.20.5", "2.21.5", "2.22.3", "2.23.4", "2.24.3", "2.25.1")}
    assert tree_simple == {"2.20.5": (0, 28, 28, 28), "2.21.5": (0, 28, 28, 28), "2.22.3": (0, 28, 28, 28),
                           "2.23.4": (8.4, 4.0, 4.0, 14), "2.24.3": (8.4, 4.0, 4.0, 14), "2.25.1": (8.4, 4.0, 4.0, 14)}
    assert [constants_of(v).hw_latency_us["nvlink"][4][2] for v in ("2.20.5", "2.21.5")] == [23, 25]
    assert [constants_of(v).ll_max_bw[2] for v in ("2.20.5", "2.21.5")] == [(87.7, 22.5, 19.0), (141.0, 45.0, 35.0)]
    for version in ("2.20.5", "2.21.5", "2.22.3", "2.23.4", "2.24.3"):
        c = constants_of(version)
        # No Blackwell yet: its rows, speeds and NVLink are Hopper's.
        assert c.ll_max_bw[3] == c.ll_max_bw[2] and c.per_channel_max_tree_bw[3] == (38.7, 41.4, 36.0)
        assert c.speeds_intra["blackwell"] == c.speeds_intra["hopper"] and c.nvlink_bw["nvlink5"] == 20.6
        assert c.nvlink_bw["nvlink4"] == 20.6 and c.nvls_channels == {"hopper": 16, "blackwell": 16}
        assert (11.0 in c.speeds_intra["hopper"]) == (version != "2.20.5")
    c, newer = constants_of("2.25.1"), constants_of("2.26.2")
    assert (c.ll_max_bw, c.per_channel_max_tree_bw, c.speeds_intra, c.speeds_inter, c.nvlink_bw, c.nvls_channels) == (
        newer.ll_max_bw, newer.per_channel_max_tree_bw, newer.speeds_intra, newer.speeds_inter, newer.nvlink_bw,
        newer.nvls_channels)


def test_pat_bandwidth_factor_of_its_first_release(two_h100):
    # One rank per node (PAT's rule): busBw x .85 in v2.23.4-1, x .75 from v2.24.3-1.
    ranks = [f"n{i}.gpu0" for i in range(2)]
    bandwidths = {v: _model_of(two_h100, "all_gather", v, ranks)[1][("pat", "simple")][1] for v in ("2.23.4", "2.24.3")}
    assert bandwidths["2.23.4"] == pytest.approx(bandwidths["2.24.3"] * .85 / .75)


def test_2_27_7_constants_are_its_sources():
    # Spot checks against v2.27.7-1: tuning.cc's arrays are 2.26.2's (no nvlsEfficiency, NET
    # NVLSTree 14, Blackwell rows twice Hopper's), search.cc's sm100 arrays and topo.h's
    # SM100_NVLINK_BW 40.1 are 2.28.9's.
    c, older, newer = constants_of("2.27.7"), constants_of("2.26.2"), constants_of("2.28.9")
    assert c.nvls_efficiency is None and c.per_channel_max_nvls_tree_bw is None
    assert (c.hw_latency_us, c.per_channel_max_tree_bw, c.per_channel_max_ring_ll128_bw) == (
        older.hw_latency_us, older.per_channel_max_tree_bw, older.per_channel_max_ring_ll128_bw)
    assert (c.speeds_intra, c.speeds_inter, c.nvlink_bw) == (newer.speeds_intra, newer.speeds_inter, newer.nvlink_bw)
    assert c.speeds_inter["blackwell"][:2] == (96.0, 48.0) and c.nvlink_bw["nvlink5"] == 40.1


def test_2_28_9_constants_are_its_sources():
    # Spot checks against v2.28.9-1 src/graph/tuning.cc and search.cc: the new NVLS model
    # (nvlsEfficiency, perChMaxNVLSTreeBws with 43.8 beyond two Blackwell nodes, 80.0 from
    # v2.30.3-1), Blackwell ring LL128 {2*36.7, 34.6, 2*36.7} (40s from v2.29.7-1), 23 tree
    # factors (24 from v2.29.2-1), sm100 speeds without 45 intra (v2.29.2-1) or 86 and 80
    # inter (v2.30.3-1, v2.29.7-1).
    c = constants_of("2.28.9")
    assert c.nvls_efficiency == (0.0, 0.0, 0.85, 0.74)
    assert c.per_channel_max_nvls_tree_bw[3] == (0.0, 96.0, 43.8)
    assert c.per_channel_max_ring_ll128_bw[3] == (73.4, 34.6, 73.4)
    assert {len(row) for row in c.tree_correction} == {23}
    assert c.speeds_intra["blackwell"] == (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
    assert c.speeds_inter["blackwell"][:4] == (96.0, 48.0, 45.1, 42.0)
    assert c.hw_latency_us["net"][5] == (0, 0, 20.9) and c.nvlink_bw["nvlink5"] == 40.1


def test_2_29_7_constants_are_its_sources():
    # Spot checks against v2.29.7-1 src/graph/tuning.cc and search.cc: Blackwell ring LL128
    # {40.0, 40.0, 40.0} and 24 tree factors as 2.30.7, perChMaxNVLSTreeBws 43.8 beyond two
    # Blackwell nodes as 2.28.9 (80.0 from v2.30.3-1), sm100SpeedArrayInter with 80.0 but
    # without 86.0, sm100SpeedArrayIntra with 45.0.
    c = constants_of("2.29.7")
    assert c.per_channel_max_ring_ll128_bw[3] == (40.0, 40.0, 40.0)
    assert c.per_channel_max_tree_ll128_bw[3] == (55.6, 31.67, 20.0)
    assert c.per_channel_max_nvls_tree_bw[3] == (0.0, 96.0, 43.8)
    assert {len(row) for row in c.tree_correction} == {24}
    assert c.speeds_inter["blackwell"][:4] == (96.0, 80.0, 48.0, 45.1)
    assert c.speeds_intra["blackwell"][4:7] == (50.0, 45.0, 40.0)
    assert c.hw_latency_us["net"][5] == (0, 0, 20.9) and c.nvls_efficiency == (0.0, 0.0, 0.85, 0.74)


@pytest.mark.parametrize(
    ("printed", "nearest"),
    [("2.26.2+cuda12.8", "2.26.2"), ("2.27.1", "2.27.7"), ("2.31.0", "2.30.7"), ("2.19.3", "2.19.3"),
     ("2.20.5+cuda12.2", "2.20.5"), ("2.20.3", "2.20.5"), ("2.21.5", "2.21.5"), ("2.23.4+cuda12.6", "2.23.4"),
     ("2.24.1", "2.24.3"), ("2.25.1", "2.25.1"), ("2.18.1", "2.19.3"), ("2.26", None), ("unknown", None),
      # A series takes its own constants, older releases of it too.
     ("2.28.3", "2.28.9"), ("2.28.9+cuda13.1", "2.28.9"), ("2.29.2", "2.29.7"), ("2.30.3", "2.30.7")],
)
def test_nearest_version(printed, nearest):
    assert nearest_version(printed) == nearest
    assert (nccl_release(printed) is None) == (nearest is None)


def test_unknown_version_is_one_clear_error(h100):
    with pytest.raises(InputError, match=r"no constants for NCCL '2.27.1'; flowsim has 2.30.7, 2.29.7, 2.28.9, 2.27.7, 2.26.2, 2.25.1, "
                       r"2.24.3, 2.23.4, 2.22.3, 2.21.5, 2.20.5, 2.19.3"):
        nccl_choice(h100, "all_reduce", MiB, version="2.27.1")


# --- the version flowsim check takes -------------------------------------------------------

DEGRADED = Path(__file__).resolve().parents[1] / "data" / "nccl_tests" / "all_reduce_perf_dgx_h100_2node_degraded.txt"


def _with_version(version: str | None) -> str:
    """The two-node all-reduce sample, printing ``NCCL version {version}`` after its rank lines,
    and without the library version of its nccl-tests header (``nccl-library=22703``)."""
    lines = [line.split(" nccl-headers=")[0] + "\n" if line.startswith("# nccl-tests version") else line
             for line in DEGRADED.read_text().splitlines(keepends=True)]
    last_rank = max(i for i, line in enumerate(lines) if line.startswith("#  Rank"))
    if version is not None:
        lines.insert(last_rank + 1, f"NCCL version {version}\n")
    return "".join(lines)


@pytest.mark.parametrize(
    ("printed", "given", "version", "words"),
    [
        ("2.26.2+cuda12.8", None, "2.26.2", "NCCL 2.26.2 (log)"),
        ("2.27.1+cuda12.9", None, "2.27.7", "NCCL 2.27.1 (log) -> constants of 2.27.7"),
        ("2.29.2", None, "2.29.7", "NCCL 2.29.2 (log) -> constants of 2.29.7"),
        ("2.18.1", None, "2.19.3", "NCCL 2.18.1 (log) -> constants of 2.19.3, the oldest flowsim has"),
        ("2.21.5+cuda12.4", None, "2.21.5", "NCCL 2.21.5 (log)"),
        ("2.24.1", None, "2.24.3", "NCCL 2.24.1 (log) -> constants of 2.24.3"),
        ("2.28.3+cuda12.9", None, "2.28.9", "NCCL 2.28.3 (log) -> constants of 2.28.9"),
        (None, None, "2.30.7", "NCCL 2.30.7 (default: the log prints no NCCL version)"),
        ("2.26.2+cuda12.8", "2.30.7", "2.30.7", "NCCL 2.30.7 (given)"),
        ("mine", None, "2.30.7", "NCCL 'mine' (log: not a version) -> constants of 2.30.7"),
    ],
)
def test_the_check_takes_the_logs_version(printed, given, version, words):
    log = parse_nccl_log(_with_version(printed), collective="all_reduce")
    assert nccl_version_of(log, given) == (version, words)


def test_a_given_version_is_taken_as_a_printed_one_and_a_non_version_is_one_clear_error():
    # As --nccl-version and a log's own line: the constants of its series, else the newest older.
    log = parse_nccl_log(_with_version(None), collective="all_reduce")
    assert nccl_version_of(log, "2.27.1") == ("2.27.7", "NCCL 2.27.1 (given) -> constants of 2.27.7")
    assert nccl_version_of(log, "2.4.8") == ("2.19.3", "NCCL 2.4.8 (given) -> constants of 2.19.3, the oldest "
                                                       "flowsim has")
    assert nccl_version_of(log, "2.26.2") == ("2.26.2", "NCCL 2.26.2 (given)")
    with pytest.raises(InputError, match="nccl_version: expected an NCCL version MAJOR.MINOR.PATCH, got 'v2'"):
        nccl_version_of(log, "v2")


def test_the_report_predicts_with_the_logs_version_and_says_so():
    text = _with_version("2.26.2+cuda12.8")
    report = check_nccl_log(text, system="dgx-h100", min_bytes=2 << 30)
    assert report.nccl_version == "2.26.2" and json.loads(report.to_json())["nccl"] == "NCCL 2.26.2 (log)"
    assert report.format_text().splitlines()[1].endswith("rail_optimized fabric, NCCL 2.26.2 (log)")
    # NVLSTree's latency pays the network's hwLat twice on 2 servers: 14 us under 2.26.2,
    # 20.9 under 2.30.7, 13.8 us apart: the prediction follows the version. (At 2 GiB both
    # move at NVLS's shared budget, so their bandwidth parts are alike.)
    given = check_nccl_log(text, system="dgx-h100", min_bytes=2 << 30, nccl_version="2.30.7")
    assert given.nccl == "NCCL 2.30.7 (given)"
    assert given.rows[-1].predicted_latency_us - report.rows[-1].predicted_latency_us == pytest.approx(13.8)


def test_cli_nccl_version_overrides_the_log(tmp_path, capsys):
    from flowsim.cli import main as flowsim

    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_with_version("2.27.1+cuda12.9"))
    argv = ["check", str(path), "--system", "dgx-h100", "--min-bytes", "2G", "--json"]
    flowsim(argv)
    assert json.loads(capsys.readouterr().out)["nccl"] == "NCCL 2.27.1 (log) -> constants of 2.27.7"
    flowsim([*argv, "--nccl-version", "2.19.3"])
    data = json.loads(capsys.readouterr().out)
    assert (data["nccl_version"], data["nccl"]) == ("2.19.3", "NCCL 2.19.3 (given)")


def test_cli_takes_any_nccl_version_as_a_log_would(capsys):
    # 2.31.0 has no constants of its own: the CLI takes 2.30.7's, the newest older, as for a
    # log printing it, and says so; 2.10.3 is older than every version flowsim has: the oldest.
    from flowsim.cli import main as flowsim

    argv = ["collective", "all_reduce", "--system", "dgx-h100", "-b", "1M", "-e", "1M", "--json"]
    flowsim([*argv, "--nccl-version", "2.31.0"])
    out = capsys.readouterr()
    assert json.loads(out.out)["nccl_version"] == "2.30.7"
    assert out.err.count("no constants of NCCL 2.31.0; it takes those of 2.30.7, the newest older") == 1
    flowsim([*argv, "--nccl-version", "2.10.3"])
    assert ("takes those of 2.19.3, the oldest it has; NCCL 2.10.3 had no NVLS, left out (NCCL_NVLS_ENABLE=0 "
            "unless --nccl-env sets it)") in capsys.readouterr().err
    flowsim([*argv, "--nccl-version", "2.17.1"])
    assert "NCCL 2.17.1 had no NVLSTree, left out (NCCL_ALGO=^NVLSTree unless" in capsys.readouterr().err
    flowsim([*argv, "--nccl-version", "2.18.3"])
    assert "had no" not in capsys.readouterr().err
    flowsim([*argv, "--nccl-version", "2.26.2"])
    out = capsys.readouterr()
    assert json.loads(out.out)["nccl_version"] == "2.26.2" and "note" not in out.err
    with pytest.raises(SystemExit):
        flowsim([*argv, "--nccl-version", "v2"])
    assert "expected an NCCL version MAJOR.MINOR.PATCH" in capsys.readouterr().err
    # A series flowsim has a release of is that release; one it has none of is refused.
    flowsim([*argv, "--nccl-version", "2.26"])
    out = capsys.readouterr()
    assert json.loads(out.out)["nccl_version"] == "2.26.2"
    assert "NCCL 2.26: flowsim takes the constants of 2.26.2, the release of that series it has" in out.err
    # One it has none of, as its last release would be (2.18.x had NVLSTree from 2.18.1).
    flowsim([*argv, "--nccl-version", "2.18"])
    err = capsys.readouterr().err
    assert "no constants of NCCL 2.18; it takes those of 2.19.3, the oldest it has" in err and "had no" not in err
    with pytest.raises(SystemExit):
        flowsim([*argv, "--nccl-version", "2.x"])
    assert "or a series MAJOR.MINOR (flowsim has 2.30.7, " in capsys.readouterr().err


def test_an_older_nccl_version_leaves_out_what_it_lacked(capsys, tmp_path):
    # NCCL 2.10.3 had no NVLS: one DGX H100's 1 GiB all-reduce runs a ring under it, as the
    # log of a run of 2.10.3 would be predicted, unless --nccl-env says otherwise.
    from flowsim.cli import main as flowsim

    argv = ["collective", "all_reduce", "--system", "dgx-h100", "-b", "1G", "-e", "1G", "--json"]

    def ran(*extra):
        out = json.loads(capsys.readouterr().out if flowsim([*argv, *extra]) == 0 else "")
        return out["rows"][0]["algorithm"], out["nccl_env"]

    assert ran()[0] == "nvls"
    assert ran("--nccl-version", "2.10.3") == ("ring", {"NCCL_NVLS_ENABLE": "0"})
    assert ran("--nccl-version", "2.10.3", "--nccl-env", "NCCL_NVLS_ENABLE=1")[0] == "nvls"
    # flowsim check says what it took, with the caller's variables.
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_with_version("2.27.1+cuda12.9"))
    flowsim(["check", str(path), "--system", "dgx-h100", "--min-bytes", "2G", "--json", "--nccl-version", "2.4.8"])
    assert json.loads(capsys.readouterr().out)["nccl"] == (
        "NCCL 2.4.8 (given) -> constants of 2.19.3, the oldest flowsim has, NCCL_NVLS_ENABLE=0 (NCCL 2.4.8 predates "
        "NVLS, 2.17.1), NCCL_PROTO=^LL128 (NCCL 2.4.8 predates LL128, 2.5.6)")
    # Under the log's and the caller's settings: an exclusion list extended, a choice kept.
    checked = ["check", str(path), "--system", "dgx-h100", "--min-bytes", "2G", "--json", "--nccl-version", "2.17.1"]
    flowsim([*checked, "--nccl-env", "NCCL_ALGO=^Tree"])
    assert json.loads(capsys.readouterr().out)["nccl"].endswith(
        "NCCL_ALGO=^Tree (given), NCCL_ALGO=^Tree,NVLSTree (NCCL 2.17.1 predates NVLSTree, 2.18.1)")
    flowsim([*checked, "--nccl-env", "NCCL_ALGO=Ring"])
    assert "predates" not in json.loads(capsys.readouterr().out)["nccl"]
    assert ran("--nccl-version", "2.17.1", "--nccl-env", "NCCL_ALGO=^Tree")[1] == {"NCCL_ALGO": "^Tree,NVLSTree"}
