"""Calls back to back (flowsim.collectives.calls): a chain's calls overlap as nccl-tests times
them; worked out by hand on three GPUs around one switch."""

import json
from pathlib import Path

import pytest

from flowsim.check import check_log, parse_nccl_log
from flowsim.cli import main
from flowsim.collectives import broadcast, collective_time, reduce
from flowsim.collectives.calls import back_to_back, time_per_call
from flowsim.collectives.report import sweep
from flowsim.errors import InputError
from flowsim.pipeline import run
from flowsim.workload import Workload
from test_collectives import ZERO, G, star_topology

RANKS = ["g0", "g1", "g2"]


@pytest.mark.parametrize("build", [broadcast, reduce], ids=["broadcast", "reduce"])
def test_two_chain_calls_by_hand(build):
    # 4 slices of 1 GB over 2 hops, each GPU's cable to the switch at 1 GB/s: a slice takes
    # 1 s. The first call ends at 5 s (4 slices, then the last one's second hop). Its first
    # sender is done at 4 s and sends the second call's slices 4-8 s; the middle GPU ends its
    # first call at 5 s, then forwards the second call's slices 5-9 s.
    one = build(RANKS, 4 * G, slices=4, costs=ZERO)
    two = back_to_back(one, RANKS)
    finish = run(star_topology(3), two).result.finish_s
    assert finish[: len(one)].max() == pytest.approx(5.0, rel=1e-12)
    assert finish[len(one):].max() == pytest.approx(9.0, rel=1e-12)
    # 20 calls: 5 s, then 4 s each.
    assert time_per_call(5.0, 9.0, 20) == pytest.approx(81 / 20)
    timed = collective_time(star_topology(3), build.__name__, 4 * G, channels=1, slices=4, costs=ZERO, calls=20)
    assert timed.time_s == pytest.approx(81 / 20, rel=1e-12) and timed.calls_run == 2
    # Both calls' flows were laid out and solved: flows and classes count them alike.
    assert timed.flows == len(timed.run.workload) == 2 * len(one) and timed.flow_classes <= timed.flows


def test_second_call_waits_for_its_sender_only():
    two = back_to_back(broadcast(RANKS, 2 * G, slices=2, costs=ZERO), RANKS)
    # Flows: hop 0 slices 0, 1 (g0 -> g1), hop 1 slices 0, 1 (g1 -> g2), then again.
    assert [name.removeprefix("call1.") for name in two.names[:4]] == \
        [name.removeprefix("call2.") for name in two.names[4:]]
    waits = {two.names[f]: sorted(two.names[d] for d in two.dependencies(f)) for f in range(8)}
    first_g0, first_g1 = (two.names[4 + i] for i in (0, 2))
    # g0's first send of the second call waits for g0's last of the first (its second slice);
    # g1's for what it forwarded last; no later slice waits for more than its own call's.
    assert waits[first_g0] == [two.names[1]]
    assert sorted(waits[first_g1]) == sorted([two.names[4], two.names[3]])
    assert all(name.startswith("call2.") for f in (5, 7) for name in waits[two.names[f]])


def test_a_hop_another_gpu_relays_is_its_sender_s():
    # g1 forwards to h0 on another server through g0 (a rail's NIC behind g0): the relayed
    # flow leaves g0 but carries what arrived at g1, and g1's kernel sends it. g0's part of
    # the first call ends with its own send, and its next call does not wait for the relay.
    w = Workload.build(["a", "a2", "b", "b2"], ["g0", "g0", "g0", "g0"], ["g1", "g1", "h0", "h0"], [1.0] * 4,
                       depends_on=[[], [0], [0], [1, 2]])
    two = back_to_back(w, ["g0", "g1", "h0"])
    assert [two.dependencies(f).tolist() for f in range(4, 8)] == [[1], [4], [4, 3], [5, 6]]


def test_flows_off_the_ranks_join_no_part():
    # A switch's own flow (a multicast, say) neither ends a rank's part nor waits for one.
    w = Workload.build(["a", "m"], ["g0", "sw"], ["g1", "g1"], [1.0, 1.0], depends_on=[[], [0]])
    two = back_to_back(w, ["g0", "g1"])
    assert [two.dependencies(f).tolist() for f in range(4)] == [[], [0], [0], [2]]


def test_rings_do_not_overlap_and_one_call_is_one_run():
    topology = star_topology(4)
    ranks = ["g0", "g1", "g2", "g3"]
    ring = [collective_time(topology, "all_reduce", 8 * G, ranks=ranks, costs=ZERO, calls=n) for n in (1, 20)]
    assert ring[0].time_s == ring[1].time_s and ring[1].calls_run == 1
    chain = collective_time(topology, "broadcast", 8 * G, ranks=ranks, costs=ZERO, slices=4)
    assert chain.calls_run == 1 and chain.time_s == pytest.approx(chain.run.makespan_s)
    assert len(chain.run.workload) == len(broadcast(ranks, 8 * G, slices=4, costs=ZERO))


def test_calls_must_be_a_count():
    with pytest.raises(InputError, match="calls"):
        collective_time(star_topology(3), "broadcast", G, calls=0)


def test_sweep_times_nccl_tests_iterations_unless_blocking():
    topology = star_topology(3)
    rows = {n: sweep(topology, "broadcast", [3 << 30], costs=ZERO, channels=1, slices=4, iters=n)[0] for n in (1, 20)}
    blocking = sweep(topology, "broadcast", [3 << 30], costs=ZERO, channels=1, slices=4, blocking=True)[0]
    t = (3 << 30) / 4 / G  # one slice's time
    assert rows[1].time_us == pytest.approx(5 * t * 1e6) == blocking.time_us
    assert rows[20].time_us == pytest.approx(81 / 20 * t * 1e6)
    # The busiest link's use is one call's bytes over a call's mean time: 4 slices of 5.
    assert rows[1].busiest_utilization == pytest.approx(4 / 5)
    assert rows[20].busiest_utilization == pytest.approx(4 / (81 / 20))
    # nccl-tests' -G multiplies the calls; -m merges an iteration's calls into one of their
    # bytes (NCCL's aggregation): 10 calls of 2 S, slices of 2 t, for 20 broadcasts.
    both = sweep(topology, "broadcast", [3 << 30], costs=ZERO, channels=1, slices=4, iters=5, agg_iters=2,
                 cuda_graph=2)[0]
    assert both.time_us == pytest.approx((5 + 9 * 4) * 2 / 20 * t * 1e6)


def test_collective_command_takes_iters_and_blocking(capsys):
    def row(*extra):
        assert main(["collective", "broadcast", "--system", "dgx_h100", "-b", "8M", "-e", "8M", "--json",
                     *extra]) == 0
        output = json.loads(capsys.readouterr().out)
        assert output["iters"] == (int(extra[1]) if extra[:1] == ("-n",) else 20)
        return output["rows"][0]["time_us"]

    one, default, many = row("-n", "1"), row(), row("-n", "100")
    assert row("-z", "1") == one
    assert many < default < one


BROADCAST_LOG = """\
#  Rank  0 Group  0 Pid   1000 on      box-0 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1001 on      box-0 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   1002 on      box-0 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   1003 on      box-0 device  3 [0x5d] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     8388608       2097152     float    none       0    60.00  139.81  139.81      0    60.00  139.81  139.81      0
"""


def test_check_reads_the_iterations_and_warns_without_them():
    header = ("# nThread 1 nGpus 1 minBytes 8388608 maxBytes 8388608 step: 2(factor) warmup iters: 5 iters: 100 "
              "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
    with_line = parse_nccl_log(header + BROADCAST_LOG, collective="broadcast")
    without = parse_nccl_log(BROADCAST_LOG, collective="broadcast", nodes=1, gpus_per_node=4)
    assert with_line.iters == 100 and without.iters is None
    hundred, twenty = (check_log(log, system="dgx_h100") for log in (with_line, without))
    assert any("-n): taken as 20" in w for w in twenty.warnings)
    assert not any("-n)" in w for w in hundred.warnings)
    # A hundred calls share one call's pipeline fill more thinly than twenty.
    assert hundred.rows[0].predicted_time_us < twenty.rows[0].predicted_time_us


def test_json_output_gives_the_iterations():
    text = (Path(__file__).parents[1] / "data/nccl_tests/all_reduce_perf_dgx_h100_4node.json").read_text()
    assert parse_nccl_log(text).iters == 20
    assert parse_nccl_log(text.replace('"iterations":20', '"iterations":7')).iters == 7


DGX2 = Path(__file__).parents[1] / "data/nccl_tests/pasted/dgx2_v100_five_binaries.txt"
# 16 V100 on first-generation NVSwitches, 6 NVLinks each (docs/hardware.md §1.1-1.2): the NVLink
# side of a DGX-2, all that a run inside it crosses (its host side, which the file must give,
# carries none of these runs' bytes).
DGX2_SERVER = """\
[server]
gpu = "Tesla V100-SXM3-32GB"
gpus = 16
gpu_fabric = "nvswitch"
nvswitch = "nvswitch1"
pcie = { generation = 3 }
cpu = { sockets = 1, memory = "ddr4_2400_4ch" }
"""


@pytest.mark.parametrize("run", [2, 3], ids=["broadcast", "reduce"])
def test_a_dgx2_chain_measured_back_to_back(tmp_path, run):
    # wohlbier/nccl-tests' broadcast_perf and reduce_perf on 12 of a DGX-2's V100 (-g 12, 20
    # iterations; the machine shared with another user, whose GPUs the run left out). One
    # call's pipeline alone is up to 4.8 times slower than the rows from 1 MiB; 20 calls back
    # to back are what they measured, within 6.2% from 64 MiB, as the all-reduce run of the
    # same log is.
    from flowsim.check import parse_nccl_logs
    from flowsim.systemfile import resolve_system

    path = tmp_path / "dgx2.toml"
    path.write_text(DGX2_SERVER)
    server = resolve_system(str(path))[0]
    log = parse_nccl_logs(DGX2)[run]
    assert log.collective == ("broadcast", "reduce")[run - 2] and log.iters == 20
    checked = {n: check_log(log, system=server, min_bytes=1 << 20, iters=n) for n in (1, 20)}
    large = [r for r in checked[20].rows if r.size_bytes >= 64 << 20]
    assert len(large) == 8 and all(abs(r.error_out) < 0.07 for r in large)
    assert not checked[20].flagged
    assert len(checked[1].fast) >= 10


def test_check_reads_blocking_runs_as_one_call_each():
    # nccl-tests' -z prints "# Blocking Enabled: ..." under its nThread line (src/util.cu) and
    # writes config.blocking_collectives in -J JSON: each call waited for the one before.
    header = ("# nThread 1 nGpus 1 minBytes 8388608 maxBytes 8388608 step: 2(factor) warmup iters: 5 iters: 20 "
              "agg iters: 1 validation: 1 graph: 0\n"
              "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n#\n# Using devices\n")
    blocking = parse_nccl_log(header + BROADCAST_LOG, collective="broadcast")
    free = parse_nccl_log(header.replace("# Blocking Enabled", "# Other") + BROADCAST_LOG, collective="broadcast")
    assert blocking.blocking and not free.blocking
    one = check_log(blocking, system="dgx_h100").rows[0].predicted_time_us
    twenty = check_log(free, system="dgx_h100").rows[0].predicted_time_us
    single = check_log(free, system="dgx_h100", iters=1).rows[0].predicted_time_us
    assert one == pytest.approx(single) and twenty < one / 2
    text = (Path(__file__).parents[1] / "data/nccl_tests/all_reduce_perf_dgx_h100_4node.json").read_text()
    assert not parse_nccl_log(text).blocking
    assert parse_nccl_log(text.replace('"blocking_collectives":"false"', '"blocking_collectives":"true"')).blocking
