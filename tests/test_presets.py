"""Hardware figures and server presets against the numbers of docs/hardware.md.

Every expected value below is written out from ``docs/hardware.md`` (section in
the comment), not computed from the code under test.
"""

import re

import numpy as np
import pytest

from flowsim.errors import InputError
from flowsim.hardware import (
    FIGURES,
    LinkTier,
    link_rate,
    link_technology,
    nvlink_per_gpu,
    nvswitch_generation,
    switch_for,
    switch_model,
    technology_names,
)
from flowsim.presets import DGX1_NVLINK_COUNTS, compute_nics, frontend_nics, pcie_server, preset, preset_names
from flowsim.routing import route
from flowsim.topology import NodeKind

G = 1e9


# --- hardware ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "nominal", "effective"),
    [
        # 1.1: per link, vendor GB/s bidirectional halved; NCCL SMxx_NVLINK_BW per direction
        ("nvlink1", 20 * G, 18.0 * G),
        ("nvlink2", 25 * G, 20.0 * G),
        ("nvlink3", 25 * G, 20.0 * G),
        ("nvlink3_ga102", 14.0625 * G, 12.0 * G),
        ("nvlink4", 25 * G, 20.6 * G),
        ("nvlink5", 50 * G, 40.1 * G),
        # 3.1: x16 payload per direction; NCCL width*speed/80
        ("pcie3", 15.75 * G, 12 * G),
        ("pcie4", 31.5 * G, 24 * G),
        ("pcie5", 63 * G, 48 * G),
        ("pcie6", 121 * G, 96 * G),
        # 4.1: Gb/s per direction / 8; NCCL NET_BW and nccl-tests RDMA busbw
        ("ib_edr", 12.5 * G, 12 * G),
        ("ib_hdr", 25 * G, 24 * G),
        ("ib_ndr", 50 * G, 48 * G),
        ("ib_xdr", 100 * G, 96 * G),
        # 5 and V1
        ("eth100g", 12.5 * G, 12 * G),
        ("eth200g", 25 * G, 24 * G),
        ("eth400g", 50 * G, 48 * G),
        ("eth800g", 100 * G, 96 * G),
        # 3.1 NCCL inter-socket constants (one figure only), 1.1 NVLink-C2C
        ("qpi_broadwell", 6 * G, 6 * G),
        ("upi_skylake", 10 * G, 10 * G),
        ("upi_sapphire_rapids", 22 * G, 22 * G),
        ("upi_emerald_rapids", 40 * G, 40 * G),
        ("xgmi_amd", 16 * G, 16 * G),
        ("nvlink_c2c", 450 * G, 450 * G),
    ],
)
def test_link_rates_per_direction(name, nominal, effective):
    assert link_rate(name, figure="nominal") == pytest.approx(nominal, rel=1e-12)
    assert link_rate(name, figure="effective") == pytest.approx(effective, rel=1e-12)


@pytest.mark.parametrize(
    ("generation", "bidirectional", "effective"),
    [
        # 1.1 "Per-GPU total, uni / bi"; effective = links x NCCL per-link value
        ("nvlink1", 160 * G, 4 * 18.0 * G),
        ("nvlink2", 300 * G, 6 * 20.0 * G),
        ("nvlink3", 600 * G, 12 * 20.0 * G),
        ("nvlink4", 900 * G, 18 * 20.6 * G),
        ("nvlink5", 1800 * G, 18 * 40.1 * G),
    ],
)
def test_nvlink_per_gpu(generation, bidirectional, effective):
    assert 2 * nvlink_per_gpu(generation, figure="nominal") == pytest.approx(bidirectional, rel=1e-12)
    assert nvlink_per_gpu(generation, figure="effective") == pytest.approx(effective, rel=1e-12)


def test_nvswitch_chip_capacity():
    # 1.2: gen 3 "3.2 TB/s full duplex (64 x 50)"; gen 4 "7.2 TB/s per chip".
    assert 2 * nvswitch_generation("nvswitch3").chip_Bps("nominal") == pytest.approx(3.2e12)
    assert 2 * nvswitch_generation("nvswitch4").chip_Bps("nominal") == pytest.approx(7.2e12)


@pytest.mark.parametrize(
    ("generation", "chips", "gpus", "links_per_gpu"),
    [("nvswitch2", 6, 8, 12), ("nvswitch3", 4, 8, 18), ("nvswitch4", 2, 8, 18), ("nvswitch4", 18, 72, 18)],
)
def test_nvswitch_chips_have_a_port_for_every_gpu_link(generation, chips, gpus, links_per_gpu):
    # Why one non-blocking NVSwitch node per system is faithful (presets docstring).
    assert chips * nvswitch_generation(generation).ports_per_chip >= gpus * links_per_gpu


def test_every_figure_names_its_source():
    for name in technology_names():
        tech = link_technology(name)
        for figure in FIGURES:
            assert tech.figure(figure).source, f"{name} {figure} has no source"
            assert tech.rate_Bps(figure) > 0


def test_switch_models():
    assert switch_model("qm9700").radix == 64 and switch_model("qm8700").radix == 40
    assert switch_model("q3400").radix == 144
    assert switch_for("ib_ndr").name == "qm9700"
    assert switch_model("qm8700").hop_latency_s == pytest.approx(130e-9)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: link_rate("nvlink9", figure="nominal"), "unknown link technology 'nvlink9'; valid ones: "),
        (lambda: link_rate("nvlink4", figure="peak"), "unknown figure 'peak'; choose one of nominal, effective"),
        (lambda: nvswitch_generation("nvswitch7"), "unknown NVSwitch generation 'nvswitch7'; valid ones: nvswitch1"),
        (lambda: switch_model("qm1"), "unknown switch model 'qm1'; valid ones: "),
        (lambda: switch_for("eth200g"), "no switch model with 'eth200g' ports"),
    ],
)
def test_hardware_lookups_fail_clearly(call, message):
    with pytest.raises(InputError, match=re.escape(message)):
        call()


def test_unknown_technology_lists_the_valid_ones():
    with pytest.raises(InputError) as err:
        link_technology("pcie7")
    for name in ("pcie5", "nvlink4", "ib_ndr", "eth400g", "upi_sapphire_rapids"):
        assert name in str(err.value)


# --- presets ----------------------------------------------------------------------------------

def nvlink_out_Bps(topo):
    """Sum of the NVLink capacity leaving each GPU, in GPU order."""
    scale_up = topo.link_tier == LinkTier.SCALE_UP
    return np.bincount(topo.link_src[scale_up], weights=topo.link_capacity_Bps[scale_up], minlength=topo.n_nodes)[
        topo.gpus()
    ]


@pytest.mark.parametrize(
    ("name", "n_gpus", "nominal", "effective"),
    [
        # 1.1 per-GPU uni: V100 150, A100 300, H100 450, B200 / GB200 900 GB/s;
        # effective: links x NCCL per-link GB/s (6 x 20, 12 x 20, 18 x 20.6, 18 x 40.1).
        ("dgx1_v100", 8, 150 * G, 120 * G),
        ("dgx_a100", 8, 300 * G, 240 * G),
        ("dgx_h100", 8, 450 * G, 370.8 * G),
        ("dgx_b200", 8, 900 * G, 721.8 * G),
        ("gb200_nvl72", 72, 900 * G, 721.8 * G),
    ],
)
def test_per_gpu_nvlink_bandwidth_matches_docs_hardware(name, n_gpus, nominal, effective):
    for figure, expected in (("nominal", nominal), ("effective", effective)):
        topo = preset(name, figure=figure)
        out = nvlink_out_Bps(topo)
        assert out.size == n_gpus
        np.testing.assert_allclose(out, expected, rtol=1e-12)
        scale_up = topo.link_tier == LinkTier.SCALE_UP
        into = np.bincount(topo.link_dst[scale_up], weights=topo.link_capacity_Bps[scale_up], minlength=topo.n_nodes)
        np.testing.assert_allclose(into[topo.gpus()], expected, rtol=1e-12)


def test_pcie_server_has_no_nvlink():
    topo = preset("pcie_server", figure="nominal")
    assert not np.any(topo.link_tier == LinkTier.SCALE_UP)
    assert len(topo.gpus()) == 8


def test_dgx1_adjacency_is_exact():
    # docs/hardware.md §2.1, NVLink link-count matrix from `nvidia-smi topo -m` on a DGX-1 (V100).
    expected = [
        [0, 1, 1, 2, 2, 0, 0, 0],
        [1, 0, 2, 1, 0, 2, 0, 0],
        [1, 2, 0, 2, 0, 0, 1, 0],
        [2, 1, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 1, 1, 2],
        [0, 2, 0, 0, 1, 0, 2, 1],
        [0, 0, 1, 0, 1, 2, 0, 2],
        [0, 0, 0, 1, 2, 1, 2, 0],
    ]
    assert DGX1_NVLINK_COUNTS.tolist() == expected
    for figure, per_link in (("nominal", 25 * G), ("effective", 20 * G)):
        topo = preset("dgx1_v100", figure=figure)
        counts = np.zeros((8, 8))
        for link in np.flatnonzero(topo.link_tier == LinkTier.SCALE_UP):
            i, j = topo.link_src[link], topo.link_dst[link]
            counts[i, j] = topo.link_capacity_Bps[link] / per_link
        assert counts.tolist() == expected


def test_dgx1_mesh_properties():
    # 2.1: 16 GPU-pair edges, degree 4, 6 links per GPU, 8 doubled edges.
    m = DGX1_NVLINK_COUNTS
    assert (m == m.T).all()
    assert np.count_nonzero(np.triu(m)) == 16
    assert (np.count_nonzero(m, axis=1) == 4).all() and (m.sum(axis=1) == 6).all()
    assert np.count_nonzero(np.triu(m) == 2) == 8


@pytest.mark.parametrize(
    ("name", "rails", "gpu_nic", "frontend", "cpus", "nic_pcie_nominal"),
    [
        # 2.1 / 3.2: DGX-1: 1 EDR NIC per 2 GPUs (GPU0/1 mlx5_0, ...), 2 x 10GbE, Gen3
        ("dgx1_v100", 4, [0, 0, 1, 1, 2, 2, 3, 3], 2, 2, 15.75 * G),
        # DGX A100 / H100 / B200: one NIC per GPU (rail-optimised), 2 front-end ports
        ("dgx_a100", 8, list(range(8)), 2, 2, 31.5 * G),
        ("dgx_h100", 8, list(range(8)), 2, 2, 63 * G),
        ("dgx_b200", 8, list(range(8)), 2, 2, 63 * G),
        # GB200 NVL72: 4 CX-7 per 4-GPU tray = one per GPU; 36 Grace, one BlueField port each
        ("gb200_nvl72", 72, list(range(72)), 36, 36, 63 * G),
        ("pcie_server", 4, [0, 0, 1, 1, 2, 2, 3, 3], 1, 2, 31.5 * G),
    ],
)
def test_nics_and_sockets(name, rails, gpu_nic, frontend, cpus, nic_pcie_nominal):
    topo = preset(name, figure="nominal")
    nics = compute_nics(topo)
    assert [topo.node_names[n] for n in nics] == [f"nic{r}" for r in range(rails)]
    assert [nics.index(n) for n in topo.node_nic[topo.gpus()]] == gpu_nic
    assert len(frontend_nics(topo)) == frontend
    assert len(topo.nodes_of_kind(NodeKind.CPU)) == cpus
    assert len(topo.nodes_of_kind(NodeKind.HOST_MEMORY)) == cpus
    nic0 = topo.node_id("nic0")
    pcie = [link for link in topo.links_from(nic0) if topo.link_tier[link] == LinkTier.HOST]
    assert [topo.link_capacity_Bps[link] for link in pcie] == [nic_pcie_nominal]


@pytest.mark.parametrize("name", ["dgx1_v100", "dgx_h100", "dgx_b200", "gb200_nvl72", "pcie_server"])
def test_gpu_and_its_nic_share_a_pcie_switch(name):
    # PIX in `nvidia-smi topo -m` (docs/hardware.md §2.1, §3.2): GPU -> switch -> NIC.
    topo = preset(name, figure="nominal")
    gpus = topo.gpus()
    routes = route(topo, gpus, topo.node_nic[gpus])
    for g in range(len(gpus)):
        path = [topo.link_names[link] for link in routes.route(g)]
        assert len(path) == 2 and topo.node_kind[topo.link_dst[routes.route(g)[0]]] == NodeKind.PCIE_SWITCH, path


def test_host_figures():
    h100 = preset("dgx_h100", figure="effective")
    assert h100.link_capacity_Bps[h100.link_id("cpu0->cpu1")] == 22 * G  # SRP_QPI_BW
    assert h100.link_capacity_Bps[h100.link_id("gpu0->pcie0")] == 48 * G  # PCIe Gen5, NCCL
    assert h100.link_capacity_Bps[h100.link_id("cpu0<->mem0")] == pytest.approx(8 * 4800e6 * 8)
    dgx1 = preset("dgx1_v100", figure="nominal")
    assert dgx1.link_capacity_Bps[dgx1.link_id("cpu0->cpu1")] == 6 * G  # BDW_QPI_BW
    a100 = preset("dgx_a100", figure="nominal")
    assert a100.link_capacity_Bps[a100.link_id("cpu1->cpu0")] == 16 * G  # AMD_BW
    gb = preset("gb200_nvl72", figure="nominal")
    assert gb.link_capacity_Bps[gb.link_id("gpu3->cpu1")] == 450 * G  # NVLink-C2C
    assert gb.link_shared[gb.link_id("cpu5<->mem5")]


def test_p2p_option_is_recorded():
    assert preset("pcie_server", figure="nominal").server_p2p.tolist() == [True]
    assert preset("pcie_server", figure="nominal", p2p=False).server_p2p.tolist() == [False]


def test_presets_are_listed_and_unknown_ones_fail():
    assert preset_names() == ("pcie_server", "dgx1_v100", "dgx_a100", "dgx_h100", "dgx_b200", "gb200_nvl72",
                              "rtx5090_8x", "rtx4090_8x")
    with pytest.raises(InputError, match=re.escape("unknown preset 'dgx_h300'; valid ones: pcie_server, dgx1_v100")):
        preset("dgx_h300", figure="nominal")
    with pytest.raises(InputError, match="unknown figure 'best'"):
        preset("dgx_h100", figure="best")


@pytest.mark.parametrize(
    "option, message",
    [
        (dict(pcie="nvlink4"), "pcie='nvlink4' is a scale_up technology"),
        (dict(intersocket="eth10g"), "intersocket='eth10g' is a scale_out technology"),
        (dict(memory="nvlink5"), "memory='nvlink5' is a scale_up technology"),
    ],
)
def test_a_pcie_server_takes_host_technologies_only(option, message):
    # These built, then failed to route ("no route from 'gpu0' to 'gpu4'") or were taken silently.
    with pytest.raises(InputError, match=re.escape(message)):
        pcie_server(figure="nominal", **option)
