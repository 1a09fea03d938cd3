"""NCCL's point-to-point channels (flowsim.collectives.tuner.p2p_channels) against cases
worked by hand from NCCL's sources: [NCCL] src/graph/paths.cc ``ncclTopoGetNchannels`` and
``ncclTopoComputeP2pChannels`` (v2.19.3-1, v2.28.9-1, v2.29.2-1 and master), src/enqueue.cc
``scheduleP2pTasksToPlan`` and ``addP2pToPlan`` (``calcP2pChunkSize`` in v2.19.3-1).

The communicator's channel count is pinned with NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS so
that each case depends on the point-to-point rules only. A DGX H100 GPU reaches its NIC at
NCCL's 48 GB/s (PCIe Gen5 x16, below the NDR port's 50) and another GPU of its server over
18 NVLinks of 20.6 GB/s (36 channels asked, 2 per NVLink).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from flowsim.check import parse_nccl_log
from flowsim.collectives import collective_time, collective_workload
from flowsim.collectives.tuner import (
    P2P_NVLINK_BYTES_PER_CYCLE,
    P2P_PER_CHANNEL_NET_GBPS,
    P2pChannels,
    p2p_channels,
)
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def _pinned(channels: int, **more: str) -> dict[str, str]:
    return {"NCCL_MIN_NCHANNELS": str(channels), "NCCL_MAX_NCHANNELS": str(channels), **more}


@pytest.fixture(scope="module")
def ten_h100():
    return build_cluster("dgx_h100", 10, figure="effective")


def _gpu0s(nodes: int) -> list[str]:
    return [f"n{n}.gpu0" for n in range(nodes)]


def _all(nodes: int) -> list[str]:
    return [f"n{n}.gpu{g}" for n in range(nodes) for g in range(8)]


def test_80_ranks_leave_one_channel_a_network_peer(ten_h100):
    # 2.29.2 on: a network peer asks max(1 NIC, ceil(48 / 14)) = 4, a local one 36; 4 per
    # peer, halved while 4 x ceil(80 / 8) = 40, then 20, exceed the 16 channels: 1.
    p2p = p2p_channels(ten_h100, _all(10), nccl_env=_pinned(16), version="2.30.7")
    assert (p2p.per_peer, p2p.total, p2p.chunk_bytes) == (1, 16, 128 * KiB)
    assert p2p.for_send(16 * GiB) == 1
    # NCCL_NCHANNELS_PER_NET_PEER replaces the 4 and stops the halving: min(16, 4).
    given = p2p_channels(ten_h100, _all(10), nccl_env=_pinned(16, NCCL_NCHANNELS_PER_NET_PEER="4"))
    assert given.per_peer == 4


def test_one_gpu_per_host_by_version(ten_h100):
    ranks = _gpu0s(10)
    # 2.29.2 on: 4 x ceil(10 / 8) = 8 > 4 channels, 2 x 2 = 4 fits: 2.
    assert p2p_channels(ten_h100, ranks, nccl_env=_pinned(4), version="2.29.7").per_peer == 2
    # 2.20.3-2.28: two, halved while 2 x 10 > 4 x 4: 1; at least the 1 NIC: 1.
    assert p2p_channels(ten_h100, ranks, nccl_env=_pinned(4), version="2.28.9").per_peer == 1
    # 2.19.3: NCCL_NCHANNELS_PER_NET_PEER's default, 2.
    assert p2p_channels(ten_h100, ranks, nccl_env=_pinned(4), version="2.19.3").per_peer == 2
    # NCCL_P2P_PER_CHANNEL_NET_BW=7 asks ceil(48 / 7) = 7, 8 as a power of two; on 2 ranks
    # and 16 channels 8 x 1 fits.
    pair = p2p_channels(ten_h100, _gpu0s(2), nccl_env=_pinned(16, NCCL_P2P_PER_CHANNEL_NET_BW="7"))
    assert pair.per_peer == 8


def test_a_send_across_servers_starts_on_fewer_channels():
    # 2 ranks, 4 channels, 4 a peer: a send starts from 2 (4 x 2 ranks > 4), takes
    # min(2, ceil(bytes / 64 KiB)) and doubles while a part exceeds the 128 KiB chunk.
    p2p = P2pChannels(per_peer=4, total=4, n_ranks=2, n_nodes=2, chunk_bytes=128 * KiB)
    assert [p2p.for_send(b) for b in (0, 40 * KiB, 100 * KiB, 1 * MiB, GiB)] == [1, 1, 2, 4, 4]


def test_a_send_inside_one_h100_server_doubles_its_channels_with_its_size():
    # One DGX H100: 36 asked, 64 as a power of two, at most the 32 channels. A send starts on
    # 4 (32 x 8 ranks > 32 until 4) and doubles while a part exceeds 32 x 512 KiB = 16 MiB:
    # the 4, 4, 8 and 16 channels of the measured 32-256 MiB sendrecv rows (docs/validation.md).
    h100 = build_cluster("dgx_h100", 1, figure="effective", fabric="none")
    p2p = p2p_channels(h100, _all(1), nccl_env=_pinned(32))
    assert (p2p.per_peer, p2p.total, p2p.chunk_bytes) == (32, 32, 512 * KiB)
    assert [p2p.for_send(s) for s in (32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, GiB)] == [4, 4, 8, 16, 32]


def test_2_19_3_chunks_a_send_as_calc_p2p_chunk_size():
    # v2.19.3-1, one server: the most halves while 32 x 8 > 4 x 32, to 16; the least to 4.
    # Parts of at least 512 KiB / 8, at most 32 chunks: 1 GiB on 4, 8, then 16 channels
    # (64 MiB parts, 16 chunks); 1 MiB: one part of 256 KiB on each of 4 channels.
    p2p = P2pChannels(per_peer=32, total=32, n_ranks=8, n_nodes=1, chunk_bytes=512 * KiB, version="2.19.3")
    assert [p2p.for_send(s) for s in (MiB, 64 * MiB, GiB)] == [4, 4, 16]


def test_sendrecv_across_ten_servers_moves_a_channels_rate(ten_h100):
    # nccl-tests' sendrecv on all 80 GPUs: the pair that crosses the network sends on 1
    # channel, at NCCL's 14 GB/s a channel.
    run = collective_time(ten_h100, "send", 4 * GiB, communicator=_all(10))
    assert run.channels == 1
    assert 4 * GiB / run.time_s == pytest.approx(P2P_PER_CHANNEL_NET_GBPS * 1e9, rel=0.01)
    # The same pair alone in its communicator gets 4 channels, and the NIC's rate.
    pair = collective_time(ten_h100, "send", 4 * GiB, ranks=["n0.gpu7", "n1.gpu7"])
    assert pair.channels == 4 and 4 * GiB / pair.time_s > 45e9


def test_an_all_to_all_holds_only_its_pairs_across_servers(ten_h100):
    # 2.28.9 on 2 ranks of 2 servers: two a peer (2 x 2 <= 4 x 4): 28 GB/s for the pair.
    plan = collective_workload(ten_h100, "all_to_all", GiB, ranks=_gpu0s(2), nccl_version="2.28.9")
    assert set(plan.workload.cap_Bps.tolist()) == {2 * P2P_PER_CHANNEL_NET_GBPS * 1e9 / plan.costs.wire_efficiency}
    # Inside one server a pair is held to its channels at the NVLink channel rate: 32 of 32
    # (512 MiB a peer, parts of at most 16 MiB), each 10.81 bytes a cycle at 1.98 GHz.
    inside = collective_workload(ten_h100, "all_to_all", GiB, ranks=["n0.gpu0", "n0.gpu1"], nccl_env=_pinned(32))
    assert inside.workload.cap_Bps.tolist() == pytest.approx(
        [32 * 10.81 * 1.98e9 / inside.costs.intra_wire_efficiency] * len(inside.workload.cap_Bps))


def test_a_gathers_and_a_scatters_channels_take_their_whole_block(ten_h100):
    # A gather's ranks only send and its root only receives (a scatter's the other way), so
    # each channel's work takes its whole block, twice the half an all-to-all's pair gets
    # ([NCCL] src/device/sendrecv.h): 8 ranks of one server, 8 GiB, 1 GiB a peer on all 32
    # channels (parts of at most 32 chunks of 512 KiB = 16 MiB), 2 x 10.81 bytes a cycle at 1.98 GHz.
    ranks = [f"n0.gpu{g}" for g in range(8)]
    for collective in ("gather", "scatter"):
        plan = collective_workload(ten_h100, collective, 8 * GiB, ranks=ranks, nccl_env=_pinned(32), root=3)
        assert plan.channels == 32 and len(plan.workload) == 7
        assert plan.workload.cap_Bps.tolist() == pytest.approx(
            [32 * 2 * 10.81 * 1.98e9 / plan.costs.intra_wire_efficiency] * 7)
        assert {plan.workload.dst[0] if collective == "gather" else plan.workload.src[0]} == {"n0.gpu3"}
    pair = collective_workload(ten_h100, "all_to_all", 8 * GiB, ranks=ranks, nccl_env=_pinned(32))
    assert pair.workload.cap_Bps[0] == pytest.approx(32 * 10.81 * 1.98e9 / pair.costs.intra_wire_efficiency)
    # Those caps hold no flow at 8 GiB: the root's NVLinks carry 7 S / 8, as every rank's do
    # in an all-to-all, at the same payload fraction, so the three bus bandwidths agree.
    times = {c: collective_time(ten_h100, c, 8 * GiB, ranks=ranks).time_s for c in ("gather", "scatter", "all_to_all")}
    assert times["gather"] == pytest.approx(times["all_to_all"], rel=2e-3)
    assert times["scatter"] == pytest.approx(times["all_to_all"], rel=2e-3)
    # By hand: 7 S / 8 through the root's 18 NVLinks of 20.6 GB/s at the payload fraction
    # 0.86, nccl-tests' busbw (7 / 8 S / t) is their rate; the latencies take 0.1% of 25 ms.
    root_link = 18 * 20.6e9 * 0.86
    assert 7 / 8 * 8 * GiB / times["gather"] == pytest.approx(root_link, rel=2e-3)


def test_a_hypercubes_rounds_are_the_sendrecvs_of_their_sizes_one_after_another(ten_h100):
    # 8 ranks: rounds of S / 8, S / 4, S / 2 a rank, each an NCCL call whose pairs share no
    # NVLink, so each takes what one pair's send of that size takes, with its own channels
    # and protocol (LL up to 16 KiB a peer and channel).
    ranks = [f"n0.gpu{g}" for g in range(8)]
    protocols = []
    for size in (64 * KiB, 32 * MiB, 8 * GiB):
        plan = collective_workload(ten_h100, "hypercube", size, ranks=ranks)
        rounds = [collective_workload(ten_h100, "send", size / 8 * 2**k, ranks=ranks[:2], communicator=ranks)
                  for k in range(3)]
        protocols.append([r.protocol for r in rounds])
        assert (plan.protocol, plan.channels) == (rounds[-1].protocol, rounds[-1].channels)
        expected = sum(collective_time(ten_h100, "send", size / 8 * 2**k, ranks=ranks[:2], communicator=ranks).time_s
                       for k in range(3))
        assert collective_time(ten_h100, "hypercube", size, ranks=ranks).time_s == pytest.approx(expected, rel=1e-6)
    # 64 KiB: 8 and 16 KiB a peer on LL, then 32 KiB on one channel, Simple.
    assert protocols == [["ll", "ll", "simple"], ["simple"] * 3, ["simple"] * 3]


def test_an_alltoallvs_sends_each_take_the_channels_of_their_size(ten_h100):
    # 8 ranks, 2 GiB: the rank d ahead gets d x 2 GiB / 28, from 73 MiB (d = 1, on 8 channels
    # of at most 16 MiB parts) to 512 MiB (d = 7, on 32); NCCL sizes each send's channels by
    # its own bytes, and the row reports the largest send's.
    ranks = [f"n0.gpu{g}" for g in range(8)]
    p2p = p2p_channels(ten_h100, ranks)
    plan = collective_workload(ten_h100, "all_to_all_v", 2 * GiB, ranks=ranks)
    w = plan.workload
    position = {rank: i for i, rank in enumerate(ranks)}
    distance = [(position[b] - position[a]) % 8 for a, b in zip(w.src, w.dst, strict=True)]
    payload = [(d * 2 * GiB / 28) // 16 * 16 for d in distance]
    channels = [p2p.for_send(b) for b in payload]
    assert (min(channels), max(channels), plan.channels) == (8, 32, 32)
    assert w.cap_Bps.tolist() == pytest.approx([c * H100_CHANNEL_Bps / plan.costs.intra_wire_efficiency
                                                for c in channels])
    # What nccl-tests' spread sets, through the environment as nccl-tests reads it.
    even = collective_workload(ten_h100, "all_to_all_v", 2 * GiB, ranks=ranks,
                               nccl_env={"NCCL_TESTS_ALLTOALLV_SPREAD": "0"}).workload
    assert even.size_bytes * plan.costs.intra_wire_efficiency == pytest.approx([256 * MiB] * 56)
    with pytest.raises(InputError, match="NCCL_TESTS_ALLTOALLV_SPREAD='2': expected a number in \\[0, 1\\]"):
        collective_workload(ten_h100, "all_to_all_v", MiB, ranks=ranks, nccl_env={"NCCL_TESTS_ALLTOALLV_SPREAD": "2"})
    with pytest.raises(InputError, match="NCCL_TESTS_ALLTOALLV_MATRIX_FILE: an alltoallv of a traffic matrix file"):
        collective_workload(ten_h100, "all_to_all_v", MiB, ranks=ranks,
                            nccl_env={"NCCL_TESTS_ALLTOALLV_MATRIX_FILE": "t.txt"})


# --- a channel's rate inside an NVLink server -------------------------------------------------

VALIDATION = Path(__file__).resolve().parents[1] / "data" / "validation" / "nccl_tests"


# NCCL's Simple ring base latency and one NVLink step (8.4 + 3.4 us, 2.29 and 2.30), which a
# send inside a DGX H100 pays (tests/test_placement.py works it by hand); its links add none.
LATENCY_S = 11.8e-6
CHUNK = 512 * KiB  # NCCL_P2P_NVL_CHUNKSIZE ([NCCL] src/init.cc)
H100_CHANNEL_Bps = 10.81 * 1.98e9


def _send_time(size: float, channels: int, channel_Bps: float, latency_s: float = LATENCY_S) -> float:
    """A send inside an NVLink server, by hand: the latency, then each channel's part and the
    one chunk (or the whole part, if smaller) copied out after it, at the channel's rate."""
    part = size / channels
    return latency_s + (part + min(CHUNK, part)) / channel_Bps


def test_the_nvlink_channel_rate_is_the_h100_logs_median_over_the_sm_clock():
    # The calibration, redone from the verbatim log: 8 H100 (NCCL 2.29.2) send 32, 64 and
    # 128 MiB on 4, 4 and 8 channels (worked by hand in the test above); each row's part a
    # channel and the chunk copied out after it, over its time less the latency, is a
    # channel's rate, and their median over 1.98 GHz the constant.
    log = parse_nccl_log(VALIDATION / "xxrjun_h100_1n8g_sendrecv.txt")
    times = {row.size_bytes: row.out_of_place.time_us * 1e-6 for row in log.rows}
    rates = [(size / channels + CHUNK) / (times[size] - LATENCY_S)
             for size, channels in ((32 * MiB, 4), (64 * MiB, 4), (128 * MiB, 8))]
    assert [round(r / 1e9, 1) for r in rates] == [21.7, 21.4, 21.3]
    assert statistics.median(rates) / 1.98e9 == pytest.approx(P2P_NVLINK_BYTES_PER_CYCLE, rel=1e-3)


def test_a_send_inside_an_a100_server_is_held_by_its_channels_held_out():
    # Held out of the calibration: 8 A100 (li-plus/playground) send 128 MiB to the next GPU in
    # 1211.2 us (110.81 GB/s), on 8 channels (parts of at most 16 MiB) at 1.41 GHz, 10.81 x
    # 1.41 = 15.2 GB/s a channel: 117.0 GB/s, +5.6%. Held by NVLink alone (flowsim before) it
    # was 202 GB/s, +83%.
    a100 = build_cluster("dgx_a100", 1, figure="effective", fabric="none")
    run = collective_time(a100, "send", 128 * MiB)
    assert run.channels == 8
    assert run.time_s == pytest.approx(_send_time(128 * MiB, 8, 10.81 * 1.41e9), rel=1e-3)
    assert 128 * MiB / run.time_s == pytest.approx(110.81e9, rel=0.06)


def test_a_send_among_four_h100_is_held_by_its_channels_held_out():
    # Held out: 4 of the calibration node's GPUs (xxrjun_h100_1n4g_sendrecv.txt). A 4-rank
    # communicator gives a peer 8 of the 32 channels (32 x 4 > 32, 16 x 4 > 32, 8 x 4 fits),
    # so 32 and 128 MiB go on 8 channels: 144.9 and 164.5 GB/s where the log shows 149.1 and
    # 162.8.
    h100 = build_cluster("dgx_h100", 1, figure="effective", fabric="none")
    four = [f"n0.gpu{g}" for g in range(4)]
    for size, measured in ((32 * MiB, 149.11e9), (128 * MiB, 162.84e9)):
        run = collective_time(h100, "send", size, ranks=four[:2], communicator=four)
        assert run.channels == 8
        assert run.time_s == pytest.approx(_send_time(size, 8, H100_CHANNEL_Bps), rel=1e-3)
        assert size / run.time_s == pytest.approx(measured, rel=0.05)


def test_an_h100_send_ramps_with_its_channels_then_meets_nvlink():
    # 8 H100: 4 channels at 32 MiB (78.3 GB/s, measured 79.5), 8 at 128 MiB (163.1, measured
    # 162.5); at 1 GiB 32 channels would move 685 GB/s and NVLink binds.
    h100 = build_cluster("dgx_h100", 1, figure="effective", fabric="none")
    small, mid, large = (collective_time(h100, "send", size) for size in (32 * MiB, 128 * MiB, GiB))
    assert small.time_s == pytest.approx(_send_time(32 * MiB, 4, H100_CHANNEL_Bps), rel=1e-3)
    assert mid.time_s == pytest.approx(_send_time(128 * MiB, 8, H100_CHANNEL_Bps), rel=1e-3)
    assert GiB / large.time_s < 0.6 * 32 * H100_CHANNEL_Bps
    # A part below a chunk is copied out whole after it: 1 MiB on 4 channels, 256 KiB each.
    # Below NCCL_P2P_LL_THRESHOLD a channel (16 KiB) LL streams its lines and pays no copy.
    assert collective_time(h100, "send", MiB).time_s == pytest.approx(_send_time(MiB, 4, H100_CHANNEL_Bps), rel=1e-3)
    tiny = collective_workload(h100, "send", 8 * KiB)
    assert tiny.protocol == "ll" and tiny.workload.overhead_s.max() == pytest.approx(7.2e-6)
    # Laid out in 4 slices, the send pays the copy once, on its last slice (an NVLink step of
    # 3.4 us on each slice after the first). The plan holds every rank's send to the next, as
    # sendrecv_perf runs them; the pair it times comes first.
    plan = collective_workload(h100, "send", 32 * MiB, slices=4)
    assert len(plan.workload) == 8 * 4 and plan.ranks == ("n0.gpu0", "n0.gpu1")
    assert (list(plan.workload.src[:4]), list(plan.workload.dst[:4])) == ([plan.ranks[0]] * 4, [plan.ranks[1]] * 4)
    sliced = plan.workload.overhead_s[:4]
    assert sliced.tolist() == pytest.approx([LATENCY_S, 3.4e-6, 3.4e-6, 3.4e-6 + CHUNK / H100_CHANNEL_Bps])


def test_inside_a_server_of_unknown_clock_only_the_links_hold_a_channel():
    # No SM clock for compute capability 8.6 (A40, RTX A6000 pairs over NVLink bridges) in
    # docs/hardware.md §1.5: the links alone hold such a channel.
    assert P2pChannels(per_peer=4, total=32, n_ranks=8, n_nodes=1, chunk_bytes=512 * KiB, sm=86) \
        .nvlink_channel_GBps is None
    # B200 (10.0) takes 1.98 GHz, marked uncertain there: 4 channels of 21.4 GB/s at 32 MiB.
    b200 = build_cluster("dgx_b200", 1, figure="effective", fabric="none")
    plan = collective_workload(b200, "send", 32 * MiB)
    assert plan.channels == 4
    # Each of the 8 ranks' sends to the next alike (sendrecv_perf's), the plan's pair first.
    assert plan.workload.cap_Bps.tolist() == pytest.approx([4 * H100_CHANNEL_Bps] * 8)


def test_a_pair_inside_a_server_of_a_multi_server_communicator_gets_the_network_channels():
    # In a communicator spanning servers, NCCL's per-peer channels and chunk are the
    # network's for every peer: 4 a peer (ceil(48 / 14) = 4, 4 x ceil(4 / 8) fits), parts of
    # at most one 128 KiB chunk, so a 16 MiB share to the peer in the same server runs on 4
    # channels, 4 x 21.4 = 86 GB/s, far below its NVLink share, and copies one 128 KiB chunk
    # out after them (6.1 us).
    two = build_cluster("dgx_h100", 2, figure="effective")
    ranks = ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]
    p2p = p2p_channels(two, ranks)
    assert (p2p.per_peer, p2p.chunk_bytes, p2p.for_send(16 * MiB)) == (4, 128 * KiB, 4)
    plan = collective_workload(two, "all_to_all", 64 * MiB, ranks=ranks)
    src, dst = plan.workload.src, plan.workload.dst
    inside = [i for i in range(len(src)) if src[i].split(".")[0] == dst[i].split(".")[0] and src[i] != dst[i]]
    assert inside and all(plan.workload.cap_Bps[i] == pytest.approx(4 * H100_CHANNEL_Bps / plan.costs.intra_wire_efficiency)
                          for i in inside)
    assert all(plan.workload.overhead_s[i] == pytest.approx(LATENCY_S + 128 * KiB / H100_CHANNEL_Bps) for i in inside)


def test_nccl_reads_its_peer_over_nvlink_on_ampere_only():
    # [NCCL] v2.29.7-1 src/graph/paths.cc: "Enable P2P Read for Ampere/NVLink only" (both GPUs 8.0).
    reads = [P2pChannels(per_peer=4, total=32, n_ranks=8, n_nodes=1, chunk_bytes=512 * KiB, sm=sm).reads
             for sm in (70, 80, 86, 90, 100)]
    assert reads == [False, True, False, False, False]


def test_the_chunk_follows_nccl_p2p_chunksize_and_the_simple_buffer():
    # src/init.cc computeBuffSizes: NCCL_P2P_NVL_CHUNKSIZE inside one NVLink server,
    # NCCL_P2P_NET_CHUNKSIZE across servers, then at most NCCL_BUFFSIZE / NCCL_STEPS.
    one = build_cluster("dgx_h100", 1, figure="effective", fabric="none")
    two = build_cluster("dgx_h100", 2, figure="effective")
    cases = [
        (one, {"NCCL_P2P_NVL_CHUNKSIZE": str(256 * KiB)}, 256 * KiB),
        (one, {"NCCL_P2P_NET_CHUNKSIZE": str(256 * KiB)}, 512 * KiB),  # not the net one
        (one, {"NCCL_BUFFSIZE": str(MiB)}, 128 * KiB),  # 512 KiB x 8 slots > 1 MiB
        (two, {"NCCL_P2P_NET_CHUNKSIZE": str(512 * KiB)}, 512 * KiB),
        (two, {"NCCL_P2P_NET_CHUNKSIZE": str(MiB)}, 512 * KiB),  # 8 x 1 MiB > 4 MiB
    ]
    for topology, env, chunk in cases:
        ranks = _all(1) if topology is one else _all(2)
        assert p2p_channels(topology, ranks, nccl_env=env).chunk_bytes == chunk, env


def test_a_smaller_nvlink_chunk_shortens_the_copy_after_a_send():
    # The last chunk's copy follows the transfer (docs/model.md "Point-to-point channels"):
    # 512 KiB at 21.4 GB/s is 24.5 us, 128 KiB a quarter of it; the rest of the send is alike.
    h100 = build_cluster("dgx_h100", 1, figure="effective", fabric="none")
    pair = ["n0.gpu0", "n0.gpu1"]
    default = collective_time(h100, "send", 64 * MiB, ranks=pair).time_s
    small = collective_time(h100, "send", 64 * MiB, ranks=pair,
                            nccl_env={"NCCL_P2P_NVL_CHUNKSIZE": str(128 * KiB)}).time_s
    rate = P2P_NVLINK_BYTES_PER_CYCLE * 1.98e9
    assert default - small == pytest.approx((512 - 128) * KiB / rate, rel=1e-6)
