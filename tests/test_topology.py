"""The topology model: builder, arrays, validation errors that name the culprit."""

import re

import numpy as np
import pytest

from flowsim.errors import InputError
from flowsim.hardware import LinkTier
from flowsim.topology import NodeKind, Topology, TopologyBuilder


def small() -> TopologyBuilder:
    """Two GPUs on an NVLink cable, one CPU with its host memory, one PCIe switch."""
    b = TopologyBuilder()
    s = b.add_server("box", p2p=False)
    for name, kind in (("gpu0", NodeKind.GPU), ("gpu1", NodeKind.GPU), ("sw", NodeKind.PCIE_SWITCH),
                       ("cpu", NodeKind.CPU), ("mem", NodeKind.HOST_MEMORY), ("nic", NodeKind.NIC)):
        b.add_node(name, kind, server=s)
    b.add_cable("gpu0", "gpu1", 50e9, technology="nvlink4")
    b.add_cable("gpu0", "sw", 63e9, technology="pcie5", latency_s=1e-7)
    b.add_cable("sw", "cpu", 63e9, technology="pcie5")
    b.add_cable("nic", "sw", 63e9, technology="pcie5")
    b.add_link("cpu", "mem", 300e9, technology="ddr5_4800_8ch", shared=True)
    b.set_nic("gpu0", "nic")
    return b


def test_builder_arrays_hold_what_was_added():
    topo = small().build()
    assert topo.node_names == ("gpu0", "gpu1", "sw", "cpu", "mem", "nic")
    assert topo.link_names[:4] == ("gpu0->gpu1", "gpu1->gpu0", "gpu0->sw", "sw->gpu0")
    assert topo.link_names[-1] == "cpu<->mem"
    assert topo.link_capacity_Bps.dtype == np.float64 and topo.link_latency_s.dtype == np.float64
    for arr in (topo.link_src, topo.link_dst, topo.node_kind, topo.link_tier, topo.node_nic):
        assert arr.dtype == np.int64
    assert topo.link_capacity_Bps.tolist() == [50e9, 50e9] + [63e9] * 6 + [300e9]
    assert topo.link_latency_s.tolist() == [0, 0, 1e-7, 1e-7, 0, 0, 0, 0, 0]
    assert topo.link_src[topo.link_id("sw->cpu")] == 2 and topo.link_dst[topo.link_id("sw->cpu")] == 3
    assert topo.link_shared.tolist() == [False] * 8 + [True]
    assert topo.link_technology[0] == "nvlink4" and topo.link_technology[-1] == "ddr5_4800_8ch"
    assert topo.link_tier.tolist() == [LinkTier.SCALE_UP] * 2 + [LinkTier.HOST] * 7
    assert topo.node_nic.tolist() == [5, -1, -1, -1, -1, -1]
    assert topo.server_names == ("box",) and topo.server_p2p.tolist() == [False]
    assert topo.node_server.tolist() == [0] * 6


def test_arrays_are_read_only():
    topo = small().build()
    with pytest.raises(ValueError):
        topo.link_capacity_Bps[0] = 1.0
    with pytest.raises(ValueError):
        topo.link_src[0] = 3


def test_lookups_and_helpers():
    topo = small().build()
    assert topo.gpus().tolist() == [0, 1]
    assert topo.nodes_of_kind(NodeKind.HOST_MEMORY).tolist() == [4]
    assert topo.node_index["cpu"] == 3 and topo.link_index["gpu1->gpu0"] == 1
    assert topo.server_nodes("box").tolist() == list(range(6))
    # The shared memory link leaves both of its ends.
    assert [topo.link_names[i] for i in topo.links_from("mem")] == ["cpu<->mem"]
    assert topo.link_between("mem", "cpu") == topo.link_id("cpu<->mem")
    assert topo.node_ids(["gpu1", 3]).tolist() == [1, 3]
    with pytest.raises(InputError, match="unknown node 'gpu9'"):
        topo.node_id("gpu9")
    with pytest.raises(InputError, match="unknown link 'a->b'"):
        topo.link_id("a->b")
    with pytest.raises(InputError, match="0 links from 'gpu1' to 'cpu'"):
        topo.link_between("gpu1", "cpu")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.add_node("gpu0", NodeKind.GPU), "duplicate node name 'gpu0'"),
        (lambda b: b.add_server("box"), "duplicate server name 'box'"),
        (lambda b: b.add_server("box2", step_latency_s=-1e-6), "server 'box2': step latency -1e-06 s must be finite"),
        (lambda b: b.add_server("box2", net_latency_s=float("nan")), "server 'box2': network latency nan s must be"),
        (lambda b: b.add_server("box2", gpu_sm=-1), "server 'box2': compute capability -1 must be an integer >= 0"),
        (lambda b: b.add_server("box2", nic_ports=0), "server 'box2': ports a NIC 0 must be an integer >= 1"),
        (lambda b: b.add_link("gpu0", "gpu1", 1.0, technology="nvlink4"),
         "duplicate link name 'gpu0->gpu1'; merge parallel cables"),
        (lambda b: b.add_link("gpu0", "ghost", 1.0, technology="pcie5"), "link 'gpu0->ghost' ends at unknown node"),
        (lambda b: b.add_link("ghost", "gpu0", 1.0, technology="pcie5"), "link 'ghost->gpu0' starts at unknown node"),
        (lambda b: b.add_link("gpu1", "cpu", 1.0, technology="warp"), "link 'gpu1->cpu': unknown link technology"),
        (lambda b: b.set_nic("gpu1", "nic9"), "unknown node 'nic9'"),
        (lambda b: b.add_node("x", NodeKind.GPU, server=4), "node 'x': unknown server id 4"),
        (lambda b: b.add_node("x", 99), "node 'x': unknown kind 99"),
        (lambda b: b.add_link("gpu1", "cpu", "fast", technology="pcie5"), "link 'gpu1->cpu': capacity_Bps and"),
        (lambda b: b.add_link("gpu1", "cpu", 1.0, technology="x", tier=7), "link 'gpu1->cpu': unknown tier 7"),
    ],
)
def test_builder_rejects_bad_names(mutate, message):
    b = small()
    with pytest.raises(InputError, match=re.escape(message)):
        mutate(b)
    # Nothing of the refused item stays: the builder still builds, and the name is free.
    b.add_link("gpu1", "cpu", 1e9, technology="pcie5")
    b.add_node("x", NodeKind.GPU)
    assert b.build().n_links == small().build().n_links + 1


def test_a_node_leaving_through_another_servers_nic_is_rejected():
    b = small()
    other = b.add_server("other")
    b.add_node("nic2", NodeKind.NIC, server=other)
    b.set_nic("gpu1", "nic2")
    with pytest.raises(InputError, match="node 'gpu1' leaves through 'nic2', a NIC outside its server"):
        b.build()


@pytest.mark.parametrize(
    ("capacity", "latency", "message"),
    [
        (0.0, 0.0, "link 'gpu1->cpu' has capacity 0.0 B/s"),
        (-5.0, 0.0, "link 'gpu1->cpu' has capacity -5.0 B/s"),
        (np.inf, 0.0, "link 'gpu1->cpu' has capacity inf B/s"),
        (np.nan, 0.0, "link 'gpu1->cpu' has capacity nan B/s"),
        (1e9, -1e-9, "link 'gpu1->cpu' has latency -1e-09 s"),
        (1e9, np.nan, "link 'gpu1->cpu' has latency nan s"),
    ],
)
def test_build_rejects_bad_capacity_and_latency(capacity, latency, message):
    b = small()
    b.add_link("gpu1", "cpu", capacity, latency_s=latency, technology="pcie5")
    with pytest.raises(InputError, match=re.escape(message)):
        b.build()


def test_unknown_technology_with_a_tier_is_accepted():
    b = small()
    b.add_link("gpu1", "cpu", 1e9, technology="my-bus", tier=LinkTier.HOST)
    assert b.build().link_technology[-1] == "my-bus"


def test_a_node_leaving_through_a_non_nic_is_rejected():
    b = small()
    b.set_nic("gpu1", "sw")
    with pytest.raises(InputError, match="node 'gpu1' leaves through 'sw', which is not a NIC"):
        b.build()


def direct_arrays(**changes):
    fields = {
        "node_names": ("a", "b"),
        "node_kind": [NodeKind.NIC, NodeKind.IB_LEAF],
        "node_server": [-1, -1],
        "node_nic": [-1, -1],
        "server_names": (),
        "server_p2p": [],
        "link_names": ("a->b",),
        "link_src": [0],
        "link_dst": [1],
        "link_capacity_Bps": [1e9],
        "link_latency_s": [0.0],
        "link_technology": ("ib_ndr",),
        "link_tier": [LinkTier.SCALE_OUT],
        "link_shared": [False],
    }
    fields.update(changes)
    return Topology(**fields)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"link_dst": [7]}, "link 'a->b' ends at unknown node id 7 (there are 2 nodes)"),
        ({"link_src": [-1]}, "link 'a->b' starts at unknown node id -1"),
        ({"link_dst": [0]}, "link 'a->b' starts and ends at the same node"),
        ({"node_names": ("a", "a")}, "duplicate node name 'a'"),
        ({"node_kind": [NodeKind.NIC, 99]}, "node 'b' has unknown kind 99"),
        ({"node_server": [0, -1]}, "node 'a' refers to unknown server id 0"),
        ({"link_tier": [7]}, "link 'a->b' has unknown tier 7"),
        ({"link_capacity_Bps": [1e9, 2e9]}, "link_capacity_Bps must have one entry per link (1)"),
    ],
)
def test_direct_construction_is_checked(changes, message):
    with pytest.raises(InputError, match=re.escape(message)):
        direct_arrays(**changes)


def test_add_topology_prefixes_names_and_offsets_ids():
    part = small().build()
    b = TopologyBuilder()
    b.add_node("spine", NodeKind.IB_SPINE)
    first = b.add_topology(part, prefix="n0.", server_names=["n0"])
    b.add_topology(part, prefix="n1.")
    b.add_link("n0.gpu0", "n1.gpu1", 1e9, technology="x", tier=LinkTier.SCALE_OUT, name="custom")
    whole = b.build()
    assert first == 1
    assert whole.n_nodes == 13 and whole.n_links == 19
    assert whole.server_names == ("n0", "n1.box")
    assert whole.link_names[0] == "n0.gpu0->n0.gpu1" and whole.link_names[8] == "n0.cpu<->n0.mem"
    assert whole.link_names[9] == "n1.gpu0->n1.gpu1"
    assert whole.node_nic[whole.node_id("n1.gpu0")] == whole.node_id("n1.nic")
    assert whole.node_server[whole.node_id("n1.cpu")] == 1 and whole.node_server[0] == -1
    link = whole.link_id("n1.sw->n1.cpu")
    assert (whole.node_names[whole.link_src[link]], whole.node_names[whole.link_dst[link]]) == ("n1.sw", "n1.cpu")
    with pytest.raises(InputError, match="duplicate node name 'n0.gpu0'"):
        b.add_topology(part, prefix="n0.", server_names=["again"])
