"""PCIe hosts as NCCL runs them without peer-to-peer: staging through the receiver's memory,
modern inter-socket links, and what NCCL's search sees of them (docs/hardware.md §3.3).

Expected values are hand-computed from the mechanism and the sourced figures, not by the code.
"""

import pytest

import flowsim
from flowsim.collectives.tuner import nccl_choice
from flowsim.errors import InputError
from flowsim.hardware import link_rate, link_technology
from flowsim.presets import pcie_workstation, preset


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
    # does not have, does not. One channel fits at 45 (45 GB/s), two at 24 (48 GB/s): NCCL keeps
    # the most, 2 x 24 = 48, not duplicated (24 < 25).
    topology = preset("rtx5090_8x", figure="effective")
    choice = nccl_choice(topology, "all_reduce", 2**30, ranks=["gpu0", "gpu1", "gpu2", "gpu3"])
    assert choice.bus_bandwidth_GBps == pytest.approx(48.0)
    # The same host with RTX 4090 (8.9, Ampere's speeds 40, 30, 20, 18, 15, 12, ...) on Gen4
    # (24): one channel at 20 (20 GB/s), two at 12 (24 GB/s, and 12 / 20 > 0.49 keeps the
    # search going): 2 x 12 = 24, not duplicated.
    topology = preset("rtx4090_8x", figure="effective")
    choice = nccl_choice(topology, "all_reduce", 2**30, ranks=["gpu0", "gpu1", "gpu2", "gpu3"])
    assert choice.bus_bandwidth_GBps == pytest.approx(24.0)


def test_workstation_layout_errors_name_the_parameters():
    with pytest.raises(InputError, match="n_gpus=6 does not split into 4 socket"):
        pcie_workstation(figure="effective", n_gpus=6, sockets=4)
