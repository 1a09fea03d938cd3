"""Failures and degradation (flowsim.failures, a scenario's ``fail`` and ``degrade`` options):
what a pattern selects, rerouting around what it removed, the errors, and a failed NIC's
effect on an all-reduce worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flowsim import cli
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.failures import apply_failures, select_links
from flowsim.routing import Router
from flowsim.scenario import parse_scenario, run_scenario, scenario_from_document
from flowsim.sweep import parse_sweep
from flowsim.topology import NodeKind, TopologyBuilder

GiB = 1 << 30
NDR, PCIE5 = 48e9, 48e9  # effective figures, docs/hardware.md §3.1 and §4.1


@pytest.fixture(scope="module")
def cluster():
    return build_cluster("dgx_h100", 2, figure="effective")


def _names(topology, links):
    return sorted(topology.link_names[int(link)] for link in links)


# --- what a pattern selects ------------------------------------------------------------------


def test_a_node_pattern_selects_every_link_touching_the_node(cluster):
    assert _names(cluster, select_links(cluster, "n0.nic3")) == [
        "ib.su0.rail3->n0.nic3", "n0.nic3->ib.su0.rail3", "n0.nic3->n0.pcie3", "n0.pcie3->n0.nic3",
    ]


def test_a_link_pattern_takes_the_other_direction_of_its_cable(cluster):
    assert _names(cluster, select_links(cluster, "n0.nic3->ib.su0.rail3")) == [
        "ib.su0.rail3->n0.nic3", "n0.nic3->ib.su0.rail3",
    ]


def test_globs_select_switches_by_name(cluster):
    # 8 rail leaves, 4 spines each joined to every leaf by one (merged) cable: 32 cables.
    links = select_links(cluster, "ib.spine*")
    assert links.size == 2 * 8 * 4
    assert all("ib.spine" in name for name in _names(cluster, links))


@pytest.mark.parametrize("pattern", ["n9.nic3", "N0.NIC3", "ib.spine9*"])
def test_a_pattern_that_matches_nothing_is_an_error_naming_it(cluster, pattern):
    with pytest.raises(InputError) as err:
        apply_failures(cluster, fail=["n0.nic3", pattern])
    assert str(err.value) == f"fail[1]: pattern '{pattern}' matches no node or link name"


# --- the topology after failures ---------------------------------------------------------------


def test_nothing_to_apply_is_the_same_topology(cluster):
    assert apply_failures(cluster) is cluster
    assert apply_failures(cluster, fail=[], degrade={}) is cluster


def test_failing_a_nic_removes_its_links_and_keeps_the_node(cluster):
    broken = apply_failures(cluster, fail=["n0.nic3"])
    assert broken.n_links == cluster.n_links - 4
    assert broken.node_names == cluster.node_names
    assert not np.any(broken.link_src == broken.node_id("n0.nic3"))
    assert not np.any(broken.link_dst == broken.node_id("n0.nic3"))
    # The links left keep their names, order and figures.
    kept = [cluster.link_id(name) for name in broken.link_names]
    assert kept == sorted(kept)
    np.testing.assert_array_equal(broken.link_capacity_Bps, cluster.link_capacity_Bps[kept])


def test_a_gpu_whose_nic_failed_leaves_through_the_nearest_nic_on_its_network(cluster):
    # DGX H100: GPU g and NIC g share PCIe switch g; switches 0-3 hang off CPU 0. NICs 0-2
    # are 4 host hops from GPU 3 (pcie3, cpu0, pcie0), the front-end port fe0 on CPU 0 is
    # nearer (2 hops) but on the Ethernet network, NICs 4-7 are across the UPI link: nic0.
    broken = apply_failures(cluster, fail=["n0.nic3"])
    nic_of = {g: broken.node_names[int(broken.node_nic[broken.node_id(g)])] for g in ("n0.gpu3", "n1.gpu3")}
    assert nic_of == {"n0.gpu3": "n0.nic0", "n1.gpu3": "n1.nic3"}
    # Socket 1's GPU 5 moves to nic4, the lowest of its socket's NICs.
    other = apply_failures(cluster, fail=["n1.nic5"])
    assert other.node_names[int(other.node_nic[other.node_id("n1.gpu5")])] == "n1.nic4"


def test_failing_a_leaf_moves_the_gpus_of_its_rail(cluster):
    broken = apply_failures(cluster, fail=["ib.su0.rail3"])
    moved = np.flatnonzero(broken.node_nic != cluster.node_nic)
    assert [broken.node_names[n] for n in moved] == ["n0.gpu3", "n1.gpu3"]
    assert broken.node_names[int(broken.node_nic[broken.node_id("n1.gpu3")])] == "n1.nic0"


def test_a_gpu_with_no_nic_left_on_its_network_has_none(cluster):
    broken = apply_failures(cluster, fail=["n0.nic*"])
    gpus = [broken.node_id(f"n0.gpu{g}") for g in range(8)]
    assert broken.node_nic[gpus].tolist() == [-1] * 8
    # The CPUs' front-end ports are on another network and stay.
    assert broken.node_names[int(broken.node_nic[broken.node_id("n0.cpu0")])] == "n0.fe0"


def test_degrade_scales_both_directions_and_factors_multiply(cluster):
    broken = apply_failures(cluster, degrade={"n0.nic3->ib.*": 0.5, "ib.su0.rail3": 0.5})
    capacity = dict(zip(broken.link_names, broken.link_capacity_Bps.tolist(), strict=True))
    assert capacity["n0.nic3->ib.su0.rail3"] == capacity["ib.su0.rail3->n0.nic3"] == NDR / 4
    assert capacity["n1.nic3->ib.su0.rail3"] == NDR / 2
    assert capacity["n0.nic3->n0.pcie3"] == PCIE5  # not selected
    assert broken.n_links == cluster.n_links
    np.testing.assert_array_equal(broken.link_latency_s, cluster.link_latency_s)


def test_a_failed_link_stays_failed_when_degraded_too(cluster):
    broken = apply_failures(cluster, fail=["n0.nic3"], degrade={"n0.nic*": 0.5})
    assert "n0.nic3->n0.pcie3" not in broken.link_index
    assert broken.link_capacity_Bps[broken.link_id("n0.nic2->n0.pcie2")] == PCIE5 / 2


@pytest.mark.parametrize("factor", [0, -0.5, 1.5, float("nan"), float("inf"), True, "0.5"])
def test_degrade_factors_must_lie_in_0_1(cluster, factor):
    with pytest.raises(InputError, match=r"degrade\.\"ib\.spine\*\": expected a capacity factor in \(0, 1\]"):
        apply_failures(cluster, degrade={"ib.spine*": factor})


def test_a_lone_string_is_not_a_list_of_patterns(cluster):
    with pytest.raises(InputError, match="fail: expected a list of patterns"):
        apply_failures(cluster, fail="n0.nic3")


# --- routing around what failed --------------------------------------------------------------


def test_routes_avoid_failed_links_and_use_the_new_nic(cluster):
    broken = apply_failures(cluster, fail=["n0.nic3"])
    routes = Router(broken).route(["n0.gpu3", "n1.gpu3"], ["n1.gpu4", "n0.gpu3"])
    path = [broken.link_names[link] for link in routes.route(0)]
    spine = path[5].split("->")[1]  # the one ECMP picked
    assert path == [
        "n0.gpu3->n0.pcie3", "n0.pcie3->n0.cpu0", "n0.cpu0->n0.pcie0", "n0.pcie0->n0.nic0",
        "n0.nic0->ib.su0.rail0", f"ib.su0.rail0->{spine}", f"{spine}->ib.su0.rail4", "ib.su0.rail4->n1.nic4",
        "n1.nic4->n1.pcie4", "n1.pcie4->n1.gpu4",
    ]
    assert [broken.link_names[link] for link in routes.route(1)][-5:] == [
        "ib.su0.rail0->n0.nic0", "n0.nic0->n0.pcie0", "n0.pcie0->n0.cpu0", "n0.cpu0->n0.pcie3", "n0.pcie3->n0.gpu3",
    ]


def test_ecmp_picks_among_the_spines_left(cluster):
    broken = apply_failures(cluster, fail=["ib.spine0", "ib.spine1", "ib.spine2"])
    pairs = [(f"n0.gpu{a}", f"n1.gpu{b}") for a in range(8) for b in range(8) if a != b]
    routes = Router(broken).route([s for s, _ in pairs], [d for _, d in pairs], method="ecmp", seed=3)
    spines = {broken.node_names[int(broken.link_dst[link])] for link in routes.flow_link_indices
              if broken.node_kind[broken.link_dst[link]] == NodeKind.IB_SPINE}
    assert spines == {"ib.spine3"}


def test_host_hops_count_pcie_and_cpu_hops(cluster):
    router = Router(cluster)
    assert router.host_hops("n0.gpu3", ["n0.nic3", "n0.nic0", "n0.fe0", "n0.nic4", "n1.nic0"]).tolist() == [
        2, 4, 3, 5, -1,
    ]


def test_a_node_with_no_links_is_named_in_the_routing_error():
    b = TopologyBuilder()
    box = b.add_server("box")
    for gpu in "abc":
        b.add_node(gpu, NodeKind.GPU, server=box)
    b.add_cable("a", "b", 1e9, technology="nvlink4")
    with pytest.raises(InputError, match="no route from 'a' to 'c': 'c' has no links"):
        Router(b.build()).route("a", "c")


# --- scenario files ----------------------------------------------------------------------------

BASE = """
[topology]
cluster = "dgx_h100"
n_nodes = 2
figure = "effective"

[[workload.collective]]
op = "all_reduce"
size_bytes = 1073741824
nccl_env = {NCCL_ALGO = "Ring", NCCL_PROTO = "Simple"}
model = "stream"
"""


def _scenario(options: str = "", base: str = BASE):
    return parse_scenario(base + ("\n[options]\n" + options if options else ""), source="s.toml")


def test_failing_one_nic_doubles_a_ring_all_reduce_as_worked_out_by_hand():
    # Two DGX H100 (16 ranks) on a rail-optimized NDR fabric, effective figures: NVLink 18 x
    # 20.6 = 370.8 GB/s per GPU, PCIe Gen5 and NDR ports 48 GB/s. A 1 GiB ring all-reduce on
    # NCCL's Simple protocol, streamed (one flow per hop and lane).
    #
    # Layout: NCCL runs 16 channels; flowsim lays them out as 8 lanes, one per rail, lane c
    # the ring that rotates each server's GPUs by c (n0.gpu c .. n0.gpu c-1, n1.gpu c ..
    # n1.gpu c-1): it enters each server at GPU c through NIC c and leaves it on the same
    # rail, as NCCL's rings do (NET c -> GPU c -> ... -> GPU c-1 -> NET c): the hop from
    # GPU c-1 is sent from GPU c through NIC c. A lane carries S/8; each of its hops carries
    # 2(n-1) = 30 chunks of S/(8 x 16): 30 x 8 MiB = 251,658,240 bytes.
    #
    # Every NIC up: NCCL's search fits 8 channels at 48 GB/s (one per NIC), a bus bandwidth
    # of 384 GB/s over 16 channels: 24 GB/s each, 48 GB/s for a lane of two channels. Each
    # NIC link carries one lane each way (48 = its capacity); a GPU's NVLink carries 7 lanes
    # (336 < 370.8). A Hopper ring channel moves at most 22.8 GB/s across servers
    # (HOPPER_RING_NET_CHANNEL_GBPS, docs/model.md "Ring channels across servers"): the hops
    # between servers run at 2 x 22.8 = 45.6 GB/s, under the NICs' 48.
    #
    # n0.nic3 failed: n0.gpu3 leaves through n0.nic0 (pcie3, cpu0, pcie0: the nearest NIC of
    # the InfiniBand network, nic1 and nic2 as near, nic0 the lowest), so it is on rail 0.
    # n0.nic0 now receives lanes 0 (to gpu0) and 3 (to gpu3, sent from n1's rail 0, n1.gpu0);
    # lane 3 leaves n0 from gpu2 through nic2 (n0 has no GPU on rail 3 any more). NCCL's search (docs/hardware.md §7.4): at 48 GB/s
    # nic0 holds 48 / (48 x 2/8) = 4 channels, 4 x 48 = 192, which no slower speed beats down
    # to 24 (8 x 24 = 192) before the next (22) falls under .49 of 48; duplicated (Hopper,
    # not more than 4 channels) to 8 channels at 24; 8 at 30 do not fit nic0. Bus bandwidth
    # 8 x 24 = 192 GB/s: 12 per channel, 24 GB/s per lane. The flows agree: nic0's 48 GB/s
    # shared by two lanes is 24 each (under the channels' 45.6). Every hop runs at 24 GB/s.
    #
    # Latency, the same in both: the last hops to finish cross the network, after NCCL's
    # base latency for ring/Simple (8.4 us), one network step (hwLat NET ring/Simple 14 us,
    # docs/hardware.md §7.3) and the route's one switch hop (NIC -> rail leaf -> NIC, 150 ns:
    # the hop stays on its rail). The chains of 30 step latencies beside them (under 0.2 ms)
    # finish earlier.
    hop_bytes = 30 * GiB / (8 * 16)
    latency = 8.4e-6 + 14e-6 + 150e-9
    healthy = run_scenario(_scenario())
    broken = run_scenario(_scenario('fail = ["n0.nic3"]'))
    assert healthy.result.makespan_s == pytest.approx(latency + hop_bytes / 45.6e9, rel=1e-9)
    # Lane 3 leaves n0 through nic2 and crosses a spine to n1's rail 3 (a 450 ns route where
    # the others take 150 ns); it shares nic2 at 24 GB/s but gets a little more while the
    # other lanes' hops, held to 45.6 GB/s, still start or end around it, so it ends within
    # the extra 300 ns of the hops into nic0.
    assert latency + hop_bytes / 24e9 - 1e-12 <= broken.result.makespan_s <= latency + hop_bytes / 24e9 + 300e-9
    # The rerouted hops: lanes 0 and 3 reach n0 through nic0, and nothing touches nic3.
    t, w, routes = broken.scenario.topology, broken.scenario.workload, broken.routes
    downlink = t.link_id("ib.su0.rail0->n0.nic0")
    through = sorted({f"{w.src[f]}->{w.dst[f]}" for f in range(len(w)) if w.size_bytes[f] > 0
                      and downlink in routes.route(f).tolist()})
    assert through == ["n1.gpu0->n0.gpu0", "n1.gpu0->n0.gpu3"]
    assert not any("nic3" in name for name in t.link_names if name.startswith("n0."))
    assert broken.scenario.failures == "4 links removed, 0 slowed, n0.gpu3 leaves through n0.nic0 (was n0.nic3)"
    assert healthy.scenario.failures == ""


def test_a_nic_at_half_speed_is_its_links_at_half_capacity():
    scenario = _scenario('degrade = {"n0.nic3" = 0.5}')
    t = scenario.topology
    assert t.link_capacity_Bps[t.link_id("n0.nic3->ib.su0.rail3")] == NDR / 2
    assert t.link_capacity_Bps[t.link_id("n0.pcie3->n0.nic3")] == PCIE5 / 2
    assert scenario.failures == "0 links removed, 4 slowed"


def test_unquoted_dotted_patterns_are_patterns():
    # {n0.nic3 = 0.5} is the TOML table {n0 = {nic3 = 0.5}}: the pattern "n0.nic3".
    assert _scenario("degrade = {n0.nic3 = 0.5}").options.degrade == (("n0.nic3", 0.5),)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ('fail = ["n9.nic3"]', "s.toml: options.fail[0]: pattern 'n9.nic3' matches no node or link name"),
        ('fail = "n0.nic3"', "s.toml: options.fail: expected an array of node or link name patterns, got a string"),
        ("fail = [3]", "s.toml: options.fail[0]: expected a node or link name pattern, got an integer 3"),
        ('fail = [""]', "s.toml: options.fail[0]: expected a node or link name pattern, got a string ''"),
        ('degrade = {"ib.spine*" = 1.5}', 's.toml: options.degrade."ib.spine*": expected a capacity factor in'),
        ('degrade = {"ib.spine*" = 0}', 's.toml: options.degrade."ib.spine*": expected a capacity factor in'),
        ('degrade = {"zz*" = 0.5}', "s.toml: options.degrade.\"zz*\": pattern 'zz*' matches no node or link name"),
        ("degrade = 3", "s.toml: options.degrade: expected a table, got an integer 3"),
        # What the failures cut off, named by the collective and the pair of GPUs.
        ('fail = ["n0.gpu3"]', "s.toml: workload.collective[0]: no route from 'n0.gpu2' to 'n0.gpu3': "
                               "'n0.gpu3' has no links"),
        ('fail = ["n0.nic*"]', "s.toml: workload.collective[0]: rank 'n0.gpu0' has no NIC to leave its server "
                               "through: the failures given took every NIC of its server's compute network"),
    ],
)
def test_bad_failure_options_are_one_line_naming_the_key(options, message):
    with pytest.raises(InputError) as err:
        _scenario(options)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


FLOWS_BASE = """
[topology]
cluster = "dgx_h100"
n_nodes = 2
figure = "effective"

[workload]
flows = "flows.csv"
"""


def test_a_flow_the_failures_cut_off_is_named(tmp_path):
    (tmp_path / "flows.csv").write_text("name,src,dst,size_bytes\nok,n0.gpu0,n0.gpu1,1e6\ncut,n0.gpu0,n1.gpu0,1e6\n")
    text = FLOWS_BASE + '\n[options]\nfail = ["ib.*", "eth.*"]\n'
    scenario = parse_scenario(text, source="s.toml", base_dir=tmp_path)
    with pytest.raises(InputError, match="s.toml: routing: flow 'cut': no route from 'n0.gpu0' to 'n1.gpu0'"):
        run_scenario(scenario)


def test_without_spines_rail_crossing_traffic_turns_at_the_destination_server(tmp_path):
    # The rail leaves lose their spines: each rail is a network of its own, and a flow from
    # rail 7 to a GPU of rail 0 crosses rail 7 and then the destination server's PCIe.
    (tmp_path / "flows.csv").write_text("name,src,dst,size_bytes\nf,n0.gpu7,n1.gpu0,1e6\n")
    text = FLOWS_BASE + '\n[options]\nfail = ["ib.spine*"]\n'
    run = run_scenario(parse_scenario(text, source="s.toml", base_dir=tmp_path))
    t = run.scenario.topology
    assert [t.link_names[link] for link in run.routes.route(0)] == [
        "n0.gpu7->n0.pcie7", "n0.pcie7->n0.nic7", "n0.nic7->ib.su0.rail7", "ib.su0.rail7->n1.nic7",
        "n1.nic7->n1.pcie7", "n1.pcie7->n1.cpu1", "n1.cpu1->n1.cpu0", "n1.cpu0->n1.pcie0", "n1.pcie0->n1.gpu0",
    ]


# --- sweeps ------------------------------------------------------------------------------------


def test_failures_are_sweep_axes(tmp_path):
    (tmp_path / "base.toml").write_text(BASE)
    sweep = parse_sweep(
        """
[sweep]
scenario = "base.toml"
metrics = ["makespan_s"]

[sweep.grid]
"options.fail" = [[], ["n0.nic3"], ["ib.su0.rail3"]]
"options.degrade.ib.spine*" = [1.0, 0.5]
""",
        base_dir=tmp_path,
    )
    scenarios = [scenario_from_document(sweep.task(run).document, text="") for run in sweep.runs]
    assert [s.options.fail for s in scenarios[::2]] == [(), ("n0.nic3",), ("ib.su0.rail3",)]
    assert [s.options.degrade for s in scenarios[:2]] == [(("ib.spine*", 1.0),), (("ib.spine*", 0.5),)]
    # n0.nic3: a PCIe and an NDR cable; the rail-3 leaf: two NIC cables and four spine cables.
    intact = scenarios[0].topology.n_links
    assert [s.topology.n_links for s in scenarios[::2]] == [intact, intact - 4, intact - 12]
    spine = scenarios[1].topology.link_id("ib.su0.rail0->ib.spine0")
    assert scenarios[1].topology.link_capacity_Bps[spine] == scenarios[0].topology.link_capacity_Bps[spine] / 2


def test_the_cli_reports_a_bad_factor_in_one_line_and_writes_no_trace(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(BASE + '\n[options]\ndegrade = {"ib.spine*" = 2}\n')
    assert cli.main(["run", str(scenario), "-o", str(tmp_path / "t.h5"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (f'flowsim: error: {scenario}: options.degrade."ib.spine*": expected a capacity factor in (0, 1], '
                   "got 2 (0 is a failure: use fail)\n")
    assert not (tmp_path / "t.h5").exists()


# --- --fail and --degrade on flowsim collective and flowsim check ----------------------------

RING = ["--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_PROTO=Simple"]


def _collective_row(capsys, *options: str) -> tuple[str, list[str]]:
    assert cli.main(["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1G", "-e", "1G",
                     "--model", "stream", *RING, *options]) == 0
    lines = capsys.readouterr().out.splitlines()
    (row,) = [line.split() for line in lines if not line.startswith("#")]
    return lines[0], row


def test_collective_fail_and_degrade_options_give_the_hand_worked_ring_times(capsys):
    # The streamed 1 GiB ring of test_failing_one_nic_doubles_a_ring_all_reduce_as_worked_out_by_hand:
    # 8.4 + 14 + 0.15 us of latency plus 251,658,240 bytes per hop at 45.6 GB/s (every NIC
    # up, two Hopper ring channels across servers) = 5541.37 us, or at 24 GB/s = 10508.31
    # us, and 0.03 us more with n0.nic3 down, where the last hop crosses a spine (that test).
    # A NIC at half speed (24 GB/s): NCCL's search finds the same 8 channels at 24 GB/s as
    # with its GPU moved to nic0, and the hops that cross it run at 24 GB/s.
    title, healthy = _collective_row(capsys)
    assert healthy[8] == "5541.37" and "failures" not in title
    title, failed = _collective_row(capsys, "--fail", "n0.nic3")
    assert failed[8] == "10508.34"
    assert title.endswith("; failures: 4 links removed, 0 slowed, n0.gpu3 leaves through n0.nic0 (was n0.nic3)")
    title, slowed = _collective_row(capsys, "--degrade", "n0.nic3=0.5")
    assert slowed[8] == "10508.31" and title.endswith("; failures: 0 links removed, 4 slowed")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--fail", "n0.nic9"], "flowsim: error: --fail[0]: pattern 'n0.nic9' matches no node or link name\n"),
        (["--degrade", "n0.nic3=2"],
         'flowsim: error: --degrade."n0.nic3": expected a capacity factor in (0, 1], got 2.0 (0 is a failure: use '
         "fail)\n"),
        (["--degrade", "n0.nic3"], "flowsim: error: --degrade 'n0.nic3': expected PATTERN=FACTOR\n"),
        (["--degrade", "n0.nic3=half"], "flowsim: error: --degrade 'n0.nic3=half': the factor 'half' is not a number\n"),
    ],
)
def test_bad_fail_and_degrade_options_are_one_line(capsys, options, message):
    assert cli.main(["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", *options]) == 2
    assert capsys.readouterr().err == message


def test_check_predicts_the_cluster_with_the_failures_given(capsys):
    # The deliberately degraded 2 x DGX H100 log (about 185 GB/s busbw, half a healthy pair)
    # against a ring/Simple prediction: with every NIC up the log is flagged; with n0.nic3
    # down the latencies stay and each hop's 251,658,240 bytes go at 24 instead of 45.6 GB/s
    # (two Hopper ring channels across servers): 4966.94 us more for the 1 GiB row, and the
    # log matches.
    log = "data/nccl_tests/all_reduce_perf_dgx_h100_2node_degraded.txt"
    common = ["check", log, "--system", "dgx-h100", "--min-bytes", "1G", *RING, "--json"]
    assert cli.main(common) == 1
    healthy = json.loads(capsys.readouterr().out)
    assert cli.main([*common, "--fail", "n0.nic3"]) == 0
    failed = json.loads(capsys.readouterr().out)
    row = {r["size_bytes"]: r for r in healthy["rows"]}[1 << 30]
    broken = {r["size_bytes"]: r for r in failed["rows"]}[1 << 30]
    assert broken["predicted_time_us"] - row["predicted_time_us"] == pytest.approx(
        251_658_240 / 24e3 - 251_658_240 / 45.6e3, abs=0.005)
    assert (healthy["failures"], failed["failures"]) == (
        "", "4 links removed, 0 slowed, n0.gpu3 leaves through n0.nic0 (was n0.nic3)"
    )
