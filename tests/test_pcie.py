"""PCIe hosts as NCCL runs them without peer-to-peer: staging through the receiver's memory,
modern inter-socket links, and what NCCL's search sees of them (docs/hardware.md §3.3).

Expected values are hand-computed from the mechanism and the sourced figures, not by the code.
"""

from pathlib import Path

import pytest

import flowsim
from flowsim.collectives.tuner import nccl_choice
from flowsim.errors import InputError
from flowsim.hardware import link_rate, link_technology
from flowsim.presets import pcie_workstation, preset
from flowsim.servers import build_server
from flowsim.topoimport import import_system, parse_topo_matrix


def _names(topology, routes):
    return [topology.link_names[i] for i in routes.flow_link_indices]


def test_a_copy_between_sockets_is_staged_in_the_receivers_memory():
    topology = preset("rtx5090_8x", figure="effective")
    routes = flowsim.route(topology, ["gpu3"], ["gpu4"])
    # GPU 3 (socket 0) writes across UPI into socket 1's memory; GPU 4 reads it there.
    assert _names(topology, routes) == [
        "gpu3->pcie3", "pcie3->cpu0", "cpu0->cpu1", "cpu1<->mem1", "cpu1<->mem1", "cpu1->pcie4", "pcie4->gpu4",
    ]


def test_modern_inter_socket_figures():
    # UPI 2.0: 2 bytes per transfer per direction; Sapphire Rapids 4 links at 16 GT/s.
    assert link_rate("upi2_sapphire_rapids", figure="nominal") == pytest.approx(4 * 16e9 * 2)
    # Emerald Rapids 4 x 20 GT/s, Granite Rapids 6 x 24 GT/s.
    assert link_rate("upi2_emerald_rapids", figure="effective") == pytest.approx(4 * 20e9 * 2)
    assert link_rate("upi2_granite_rapids", figure="effective") == pytest.approx(6 * 24e9 * 2)
    # Genoa: 4 xGMI links of 16 lanes at 32 Gb/s = 256 GB/s each way (512 both, Lenovo LP1852).
    assert link_rate("xgmi_genoa", figure="nominal") == pytest.approx(256e9)
    # NCCL's search keeps its topo.h constants.
    assert link_technology("upi2_sapphire_rapids").nccl_GBps == 22.0
    assert link_technology("xgmi_genoa").nccl_GBps == 16.0
    # Genoa socket: 12 channels of DDR5-4800 x 8 bytes = 460.8 GB/s (Lenovo LP1852 table).
    assert link_rate("ddr5_4800_12ch", figure="effective") == pytest.approx(460.8e9)


def test_a_staged_ring_on_one_socket_is_bound_by_its_memory():
    topology = preset("rtx5090_8x", figure="effective")
    ring = ["gpu0", "gpu1", "gpu2", "gpu3"]
    routes = flowsim.route(topology, ring, ring[1:] + ring[:1])
    rates = flowsim.max_min_rates(routes, capacity_Bps=topology.link_capacity_Bps)
    # Each of the 4 copies writes and reads socket 0's memory (8 x 4800 MT/s x 8 B = 307.2 GB/s):
    # 8 crossings share it, 38.4 GB/s each, below the 48 GB/s of a PCIe Gen5 x16 link.
    assert rates == pytest.approx([38.4e9] * 4)


@pytest.mark.parametrize(("gpus_per_switch", "expected"), [
    # Four GPUs a socket on their own root ports: the 8 copies staged in a socket's memory
    # (4 writes, 4 reads) share its 307.2 GB/s, 38.4 GB/s each, below the 48 of an x16 link.
    (1, 307.2e9 / 8),
    # Four to a switch: each copy crosses the switch's x16 uplink up (write) and down (read),
    # four each way.
    (4, link_rate("pcie5", figure="effective") / 4),
])
def test_sendrecv_shares_the_host_with_every_ranks_send(gpus_per_switch, expected):
    # nccl-tests' sendrecv_perf sends from every rank to the next at once; flowsim ran its one
    # slowest pair alone and gave it the whole x16 link, 48 GB/s.
    topology = pcie_workstation(figure="effective", gpus_per_switch=gpus_per_switch)
    run = flowsim.collectives.collective_time(topology, "send", 2**30)
    assert 2**30 / run.time_s == pytest.approx(expected, rel=0.01)


def test_nccl_sees_its_own_upi_constant_and_no_memory():
    # 8 RTX 5090 (compute capability 12.0: NCCL's Blackwell speeds 90, 80, ..., 30, 24, 20, ...,
    # [NCCL] search.cc sm100SpeedArrayIntra) over two Sapphire Rapids sockets: every ring crosses
    # UPI, which NCCL counts at SRP_QPI_BW = 22 GB/s. One channel fits at 20, too slow to
    # duplicate (< 25), so NCCL models 1 x 20 GB/s.
    choice = nccl_choice(preset("rtx5090_8x", figure="effective"), "all_reduce", 2**30)
    assert choice.bus_bandwidth_GBps == pytest.approx(20.0)
    # 4 GPUs on socket 0: only PCIe Gen5 (48) bounds the search; host memory, which NCCL's graph
    # does not have, does not. Without peer-to-peer each hop goes GPU -> CPU -> GPU, a PATH_PHB
    # path through an Intel root complex, so it takes 6/5 of its speed on each PCIe link
    # (INTEL_P2P_OVERHEAD, [NCCL] search.cc followPath): a GPU's link carries its send and its
    # receive at 1.2 s each. One channel fits at 40 (48 / 1.2), two at 20: 1 x 40 = 2 x 20, and
    # NCCL keeps the first, then duplicates it (40 >= 25 on fewer than 5 channels): 2 x 20,
    # 40 GB/s (48 without the 6/5).
    topology = preset("rtx5090_8x", figure="effective")
    choice = nccl_choice(topology, "all_reduce", 2**30, ranks=["gpu0", "gpu1", "gpu2", "gpu3"])
    assert choice.bus_bandwidth_GBps == pytest.approx(40.0)
    # The same host with RTX 4090 (8.9, Ampere's speeds 40, 30, 20, 18, 15, 12, ...) on Gen4
    # (24): one channel at 20 (1.2 x 20 = 24), two at 10 (2 x 10 = 20, no more): 1 x 20, not
    # duplicated (20 < 25).
    topology = preset("rtx4090_8x", figure="effective")
    choice = nccl_choice(topology, "all_reduce", 2**30, ranks=["gpu0", "gpu1", "gpu2", "gpu3"])
    assert choice.bus_bandwidth_GBps == pytest.approx(20.0)


def test_intel_root_complexes_cost_nccls_search_what_nccl_printed_on_an_rtx_4090_box():
    # nccl-tests#307 (data/topo/rtx4090_8x.txt, the box's own topology): 8 RTX 4090 without
    # peer-to-peer, four behind each socket's PCIe Gen4 switch (NCCL's topology dump in the
    # issue: "CPU/0-1 (1/1/2)", x86 / Intel / Skylake, and "SYS[10.0]", SKL_QPI_BW), and its
    # INFO line "Pattern 4, crossNic 0, nChannels 1, bw 5.000000/5.000000, type SYS/PIX". Each of a
    # switch's four GPUs sends up its uplink (24 GB/s) at 6/5 of the speed: 24 / 4.8 = 5.
    # Without the 6/5 the search would give 6. Held out: the rule is NCCL's source's, the line
    # was read after.
    matrix = parse_topo_matrix((Path(__file__).parents[1] / "data" / "topo" / "rtx4090_8x.txt").read_text())
    spec, _ = import_system(matrix, name="box", gpu="NVIDIA GeForce RTX 4090", nic_speed_gbps=200, nic_kind="roce",
                            intersocket="upi_skylake", memory="ddr4_3200_8ch", p2p=False)
    topology = build_server(spec, figure="effective")
    choice = nccl_choice(topology, "all_reduce", 2**30)
    assert (choice.max_channels, choice.bus_bandwidth_GBps) == (2, pytest.approx(5.0))


def test_workstation_layout_errors_name_the_parameters():
    with pytest.raises(InputError, match="n_gpus=6 does not split into 4 socket"):
        pcie_workstation(figure="effective", n_gpus=6, sockets=4)
