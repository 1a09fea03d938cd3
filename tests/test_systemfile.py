"""System files: a server and its cluster in TOML, built by the presets' builder, accepted by
``collective``, ``check``, ``presets``, scenarios and sweeps.

Expected figures are written out from docs/hardware.md (§3.1 PCIe, §4.1 and §5 ports), not
computed by the code under test.
"""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from flowsim.catalog import find_described
from flowsim.cli import main as flowsim
from flowsim.collectives import collective_workload
from flowsim.collectives.report import sweep
from flowsim.errors import FieldError, InputError
from flowsim.fabrics import build_cluster, default_switch
from flowsim.presets import pcie_workstation_spec, preset, preset_names, preset_spec
from flowsim.scenario import load_scenario, parse_scenario
from flowsim.servers import ServerSpec, build_server
from flowsim.sweep import load_sweep
from flowsim.systemfile import (
    _SPEC_KEYS,
    find_system,
    format_system,
    load_system,
    parse_system,
    resolve_system,
    shipped_system_names,
)

DATA = Path(__file__).resolve().parents[1] / "data"
L40S = DATA / "systems" / "l40s.toml"
G = 1e9


def _same(a, b) -> bool:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if not (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y):
            return False
    return True


def test_the_l40s_cluster_is_a_short_file():
    # The example: about 20 lines, not 1,105 of nodes and links.
    assert len(L40S.read_text().splitlines()) <= 20


def test_the_l40s_file_builds_its_servers_pcie_tree_and_rails():
    system = load_system(L40S)
    assert (system.name, system.cluster) == ("l40s", {"n_nodes": 4, "fabric": "rail_optimized"})
    t = build_server(system.spec, figure="effective")
    assert len(t.gpus()) == 8
    # Two switches of four GPUs and one NIC each; GPUs 0-3 leave through nic0, 4-7 through nic1.
    nic_of = {g: t.node_names[t.node_nic[t.node_id(f"gpu{g}")]] for g in range(8)}
    assert nic_of == {**{g: "nic0" for g in range(4)}, **{g: "nic1" for g in range(4, 8)}}
    for g in range(8):
        assert t.link_capacity_Bps[t.link_id(f"gpu{g}->pcie{g // 4}")] == 24 * G  # §3.1 Gen4, NCCL's 24 GB/s
    assert t.link_capacity_Bps[t.link_id("nic1->pcie1")] == 24 * G
    assert t.link_capacity_Bps[t.link_id("pcie1->cpu1")] == 24 * G
    assert not any(t.link_technology[link].startswith("nvlink") for link in range(t.n_links))


def test_an_older_card_in_a_newer_slot_runs_at_its_own_generation(tmp_path, capsys):
    # The same L40S servers with Gen5 PCIe: NICs and switch uplinks at Gen5, the GPUs' own
    # links at Gen4, the L40S's host interface (a Gen6 slot gave 4 L40S 95 GB/s busbw).
    text = L40S.read_text().replace("generation = 4", "generation = 5")
    spec = parse_system(text, name="gen5").spec
    assert (spec.pcie, spec.gpu_pcie) == ("pcie5", "pcie4")
    t = build_server(spec, figure="effective")
    assert t.link_capacity_Bps[t.link_id("gpu0->pcie0")] == 24 * G  # Gen4, NCCL's 24 GB/s
    assert t.link_capacity_Bps[t.link_id("nic0->pcie0")] == t.link_capacity_Bps[t.link_id("pcie0->cpu0")] == 48 * G
    # A card as new as its slot, or one flowsim has no generation for, takes the server's.
    assert parse_system(L40S.read_text(), name="x").spec.gpu_pcie == "pcie4"
    assert dataclasses.replace(spec, gpu="Mystery GPU").gpu_pcie == "pcie5"
    (tmp_path / "gen5.toml").write_text(text)
    assert flowsim(["presets", str(tmp_path / "gen5.toml")]) == 0
    assert "  GPUs' PCIe links: pcie4, the L40S's host interface: 31.50 GB/s nominal, 24.00 GB/s effective" \
        in capsys.readouterr().out


def test_a_200g_roce_cluster_gets_a_400g_ethernet_switch_and_runs_at_200g():
    # No switch model has 200 GbE ports: the slowest faster Ethernet one, its ports at the NIC's rate.
    assert default_switch("eth200g").name == "sn5400"
    assert default_switch("ib_ndr").name == "qm9700"
    system = load_system(L40S)
    t = build_cluster(system.spec, figure="nominal", **system.cluster)
    assert len(t.gpus()) == 32
    assert t.link_capacity_Bps[t.link_id("n3.nic1->ib.su0.rail1")] == 25 * G  # 200 Gb/s
    assert t.link_capacity_Bps[t.link_id("n0.nic0->ib.su0.rail0")] == 25 * G


def test_a_pcie_servers_ring_relays_no_hop_through_another_gpu():
    # The last GPU of a server's ring sends to a NIC itself: NCCL relays through the NIC's own
    # GPU (PXN) only over NVLink ([NCCL] v2.30.7-1 src/graph/paths.cc). flowsim relayed it over
    # PCIe, so GPUs 0 and 4 sent 1.5 times what the others did, and the 8 GiB ring ran at
    # 16.0 GB/s instead of its GPUs' PCIe rate.
    system = load_system(L40S)
    t = build_cluster(system.spec, 2, figure="effective", fabric=system.cluster["fabric"])
    w = collective_workload(t, "all_reduce", 2**30, algorithm="ring", protocol="simple").workload
    sent = {gpu: 0.0 for gpu in (t.node_names[g] for g in t.gpus())}
    for src, size in zip(w.src, w.size_bytes, strict=True):
        sent[src] += size
    assert max(sent.values()) == pytest.approx(min(sent.values()), rel=1e-9)
    row = sweep(t, "all_reduce", [2**30], algorithm="ring", protocol="simple")[0]
    assert row.busiest_link == "n0.gpu0->n0.pcie0"  # at the GPU's 24 GB/s (Gen4, NCCL's figure)
    assert row.busbw_GBps == pytest.approx(24.0, rel=0.01)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_written_as_a_system_file_builds_the_same_topology(name):
    text = format_system(preset_spec(name), description=f"the {name} preset")
    spec = parse_system(text, source=f"{name}.toml", name=name).spec
    for figure in ("nominal", "effective"):
        assert _same(build_server(spec, figure=figure), preset(name, figure=figure))


def test_nics_placed_on_switches_serve_their_switchs_gpus():
    # NIC 1 on GPUs 0-3's switch and NIC 0 on GPUs 4-7's: each GPU takes the one beside it.
    # Without 'serves' the GPUs took NIC 0 for 0-3 and NIC 1 for 4-7, across the sockets,
    # staged through host memory (15 GB/s where the same box numbered the other way gave 24).
    text = ('[server]\ngpu = "L40S"\ngpus = 8\ngpu_fabric = "pcie"\n'
            'cpu = { sockets = 2, interconnect = "upi_sapphire_rapids", memory = "ddr5_4800_8ch" }\n'
            'pcie = { generation = 4, switches = [{gpus = [0, 1, 2, 3], nics = [1]}, {gpus = [4, 5, 6, 7], nics = [0]}] }\n'
            'nics = { count = 2, speed_gbps = 200, kind = "roce" }\n')
    spec = parse_system(text, source="box.toml", name="box").spec
    assert spec.rails() == [1, 1, 1, 1, 0, 0, 0, 0]
    numbered = parse_system(text.replace("nics = [1]}", "nics = [2]}").replace("nics = [0]}", "nics = [1]}")
                            .replace("nics = [2]}", "nics = [0]}"), source="box.toml", name="box").spec
    assert numbered.rails() == [0, 0, 0, 0, 1, 1, 1, 1]
    rows = [sweep(build_cluster(s, 2, figure="effective"), "all_reduce", [2**30], algorithm="ring",
                  protocol="simple")[0] for s in (spec, numbered)]
    assert rows[0].busbw_GBps == pytest.approx(rows[1].busbw_GBps, rel=1e-9)


def test_nics_on_switches_without_a_nics_table_ask_for_it():
    # It said "the switches' nics must name each NIC 0..-1 once, got [0]".
    text = ('[server]\ngpu = "L40S"\ngpus = 4\ngpu_fabric = "pcie"\ncpu = { sockets = 1, memory = "ddr5_4800_8ch" }\n'
            'pcie = { generation = 4, switches = [{gpus = [0, 1, 2, 3], nics = [0]}] }\n')
    with pytest.raises(InputError, match=re.escape("box.toml: server.nics.count: missing: server.pcie.switches place "
                                                   "NICs [0]; give [server.nics] their count and speed_gbps")):
        parse_system(text, source="box.toml", name="box")


def test_a_one_socket_server_written_as_a_system_file_reads_back():
    # A one-socket box keeps its builder's inter-socket default, which no link uses; the file
    # leaves it out, as a file of one socket must (it once wrote it, and reading it failed).
    spec = pcie_workstation_spec(n_gpus=4, sockets=1, gpu="RTX 5090")
    text = format_system(spec)
    assert "interconnect" not in text
    again = parse_system(text, source="box.toml", name=spec.name).spec
    assert _same(build_server(again, figure="effective"), build_server(spec, figure="effective"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('nics = { count = 2, speed_gbps = 300, kind = "roce" }',
         "l40s.toml: server.nics.speed_gbps: expected one of 10, 100, 200, 400, 800 (Gb/s), got an integer 300"),
        ('nics = { count = 2, speed_gbps = 200, kind = "opa" }',
         "l40s.toml: server.nics.kind: expected one of 'ib', 'roce', 'efa', got 'opa'"),
        ("pcie = { generation = 7 }", "l40s.toml: server.pcie.generation: expected one of 3, 4, 5, 6, got an integer 7"),
        # A missing key was "got NoneType None".
        ("frontend = { ports = 2 }",
         "l40s.toml: server.frontend.speed_gbps: missing; expected one of 10, 100, 200, 400, 800 (Gb/s)"),
        ("nics = { count = 2 }", "l40s.toml: server.nics.speed_gbps: missing; expected one of 100, 200, 400, 800 (Gb/s)"),
        ("pcie = { switches = [[0, 1, 2, 3], [4, 5, 6, 7]] }",
         "l40s.toml: server.pcie.generation: missing; expected one of 3, 4, 5, 6"),
        ("pcie = { generation = 4, switches = [[0, 1, 2], [4, 5, 6, 7]] }",
         "l40s.toml: server.pcie.switches: expected each GPU 0..7 on one switch, got [0, 1, 2, 4, 5, 6, 7]"),

        ("gpu_fabric = \"nvswitch\"", "l40s.toml: server.nvswitch: missing; expected a string"),
        ("nics = { count = 3, speed_gbps = 200 }",
         "l40s.toml: server.nics: 3 NICs for 8 GPUs, which do not split evenly: give 'serves'"),
        # Two NICs a GPU: 'serves' cannot say so, which the message advised; 'ports' can.
        ("nics = { count = 16, speed_gbps = 200 }",
         "l40s.toml: server.nics: 16 NICs for 8 GPUs: flowsim gives each GPU one NIC; describe a GPU's several NICs "
         "as one of several ports ('ports', at 'speed_gbps' each: count = 8, ports = 2)"),
        ("nics = { count = 2, speed_gbps = 200, serves = [[0, 1, 2, 3], [3, 4, 5, 6, 7]] }",
         "l40s.toml: server.nics.serves[1]: GPU 3 is served by NIC 0 already: flowsim gives each GPU one NIC"),
        ("nics = { count = 2, speed_gbps = 200, serves = [[0, 1, 2, 3], [4, 5, 6, 8]] }",
         "l40s.toml: server.nics.serves[1]: GPU 8 is not a GPU of the server's 0..7"),
        # A GPU no NIC serves was the whole table dropped, every GPU given a NIC of its switch.
        ("nics = { count = 2, speed_gbps = 200, serves = [[0, 1, 2, 3, 4, 5], [6]] }",
         "l40s.toml: server.nics.serves: GPU 7 is served by no NIC"),
        ("cpu = { sockets = 2, memory = \"ddr5_4800_8ch\" }",
         "l40s.toml: server.cpu.interconnect: missing; expected a string"),
        ("cpu = { memory = \"ddr5_4800_8ch\" }", "l40s.toml: server.cpu.sockets: missing; expected an integer >= 1"),
        # A GPU given another NVLink than its own moved what that NVLink moves (an L40S on
        # NVSwitch 4, an H100 ring at 715 GB/s); NVLink errors named 'server' only.
        ('gpu_fabric = "nvswitch"\nnvswitch = "nvswitch4"',
         "l40s.toml: server.nvswitch: the L40S has no NVLink: its GPUs talk over PCIe"),
        # Any host technology was taken (memory between the sockets, PCIe as memory), and a
        # typo was named as 'server' with every technology, NVLink and networks, as valid.
        ('cpu = { sockets = 2, interconnect = "ddr5_4800_8ch", memory = "ddr5_4800_8ch" }',
         "l40s.toml: server.cpu.interconnect: expected one of 'qpi_broadwell', 'upi_skylake', 'upi_sapphire_rapids', "
         "'upi_emerald_rapids', 'xgmi_amd', 'upi2_sapphire_rapids', 'upi2_emerald_rapids', 'upi2_granite_rapids', "
         "'xgmi_genoa', got 'ddr5_4800_8ch'"),
        ('cpu = { sockets = 2, interconnect = "upi_saphire_rapids", memory = "ddr5_4800_8ch" }',
         "l40s.toml: server.cpu.interconnect: expected one of 'qpi_broadwell',"),
        ('cpu = { sockets = 2, interconnect = "upi_skylake", memory = "pcie3" }',
         "l40s.toml: server.cpu.memory: expected one of 'ddr4_2400_4ch', 'ddr4_3200_8ch', 'ddr5_4800_8ch', "
         "'ddr5_5600_8ch', 'ddr5_4800_12ch', 'lpddr5x_grace', got 'pcie3'"),
        # Keys that change nothing were ignored without a word.
        ('cpu = { sockets = 1, interconnect = "upi_skylake", memory = "ddr5_4800_8ch" }',
         "l40s.toml: server.cpu.interconnect: the link between consecutive sockets; a server of 1 socket has none"),
        ('cpu = { kind = "grace", sockets = 2, interconnect = "upi_skylake", memory = "lpddr5x_grace" }',
         "l40s.toml: server.cpu.interconnect: the link between consecutive sockets; Graces share none"),
        ("frontend = { speed_gbps = 100 }",
         "l40s.toml: server.frontend.speed_gbps: the speed of front-end ports, given without ports (default 0: none)"),
        ('nics = { speed_gbps = 200, kind = "roce" }',
         "l40s.toml: server.nics.count: missing; the NICs' kind, speed_gbps given without it (default 0: none)"),
        ("cpu = { sockets = 2, interconnect = \"ib_ndr\", memory = \"ddr5_4800_8ch\" }",
         "l40s.toml: server.cpu.interconnect: expected one of 'qpi_broadwell',"),
        ("gpus = 8\ncolour = \"green\"", "l40s.toml: server.colour: unknown key"),
        ('nics = { count = 2, speed_gbps = 200, kind = "efa", net_latency_us = -75 }',
         "l40s.toml: server.nics.net_latency_us: expected a number of microseconds >= 0, got -75.0"),
        ('nics = { count = 2, speed_gbps = 200, kind = "efa", net_latency_us = "75" }',
         "l40s.toml: server.nics.net_latency_us: expected a number, got"),
        ('nics = { count = 2, speed_gbps = 200, kind = "efa", net_latency_us = 75, step_latency_us = -1 }',
         "l40s.toml: server.nics.step_latency_us: expected a number of microseconds >= 0, got -1.0"),
        ('nics = { count = 2, speed_gbps = 200, kind = "efa", step_latency_us = inf }',
         "l40s.toml: server.nics.step_latency_us: expected a number of microseconds >= 0, got inf"),
        ('nics = { count = 2, speed_gbps = 200, kind = "roce", ports = 0 }',
         "l40s.toml: server.nics.ports: expected an integer >= 1, got an integer 0"),
        ('nics = { count = 2, speed_gbps = 200, kind = "roce", ports = 9 }',
         "l40s.toml: server.nics.ports: expected at most 8 ports a NIC, got 9"),
        ('nics = { count = 2, speed_gbps = 200, kind = "roce", ports = "2" }',
         "l40s.toml: server.nics.ports: expected an integer >= 1, got"),
        ("hosts = 3", "l40s.toml: server.hosts: 3 hosts cannot split 8 GPUs evenly"),
        ("hosts = 0", "l40s.toml: server.hosts: expected an integer >= 1, got an integer 0"),
        # A list where a number goes was a Python error (a list cannot be looked up); counts past
        # any server's built one node each, without end.
        ("pcie = { generation = [4, 5] }", "l40s.toml: server.pcie.generation: expected one of 3, 4, 5, 6, got an array"),
        ('cpu = { sockets = 100000000000000000000, interconnect = "upi_sapphire_rapids", memory = "ddr5_4800_8ch" }',
         "l40s.toml: server.cpu.sockets: 100000000000000000000 sockets: a server has at most 576"),
        ("frontend = { ports = 1000000, speed_gbps = 100 }", "l40s.toml: server.frontend.ports: 1000000 front-end ports: a server has at"),
        ("gpus = 100000000000000000000", "l40s.toml: server.gpus: expected at most 576 (an NVLink domain's most GPUs"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path, change, message):
    key = change.split(" = ")[0].split("\n")[0]
    lines = [change if line.startswith(f"{key} = ") else line for line in L40S.read_text().splitlines()]
    if not any(line == change for line in lines):
        lines.insert(lines.index("[server]") + 1, change)
    path = tmp_path / "l40s.toml"
    path.write_text("\n".join(lines))
    with pytest.raises(InputError, match=re.escape(message)):
        load_system(path)


def test_presets_shows_a_nics_ports(capsys):
    assert flowsim(["presets", "oci-bm-gpu4-8"]) == 0
    out = capsys.readouterr().out
    assert "compute NICs: 8 x eth200g (roce, 2 ports), up to 1 GPU(s) each" in out
    assert "NCCL before 2.20 takes each of a NIC's 2 ports as a network device of its own" in out


def test_presets_describes_a_preset_by_name_and_says_where_the_network_reduces(capsys):
    # A preset's server by its name, as a system file's; InfiniBand HDR and later reduce in
    # the switches (SHARP v2 on HDR, v3 on NDR), RoCE and EFA do not.
    assert flowsim(["presets", "DGX-A100", "dgx_h100", "oci-bm-gpu4-8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dgx_a100 (flowsim.presets): DGX A100: eight A100 on six second-generation NVSwitches")
    assert "  in-network reduction: SHARP v2 on its InfiniBand switches" in out
    assert "  in-network reduction: SHARP v3 on its InfiniBand switches" in out
    assert out.count("in-network reduction") == 2  # not OCI's RoCE
    with pytest.raises(InputError, match=r"unknown system 'dgx_h1000' \(did you mean dgx_h100"):
        find_described("dgx_h1000")


def test_a_nics_ports_survive_a_written_system_file():
    # The ports only change what NCCL before 2.20 sees (tests/test_tuner.py); written back, a
    # file keeps them, and one port is the default, left out.
    system, _, _ = resolve_system("oci-bm-gpu4-8")
    text = format_system(system)
    assert "ports = 2" in text
    assert parse_system(text, source="oci.toml").spec == system
    assert "ports" not in format_system(preset_spec("dgx_a100")).split("[server.nics]")[1].split("[")[0]


def test_a_mesh_needs_a_symmetric_matrix(tmp_path):
    text = format_system(preset_spec("dgx1_v100")).replace("[0, 1, 1, 2, 2, 0, 0, 0]", "[0, 1, 1, 2, 2, 1, 0, 0]")
    with pytest.raises(InputError, match=re.escape("dgx1.toml: server.nvlink_counts: NVLink counts must be symmetric, with a zero "
                                                  "diagonal: GPU 0 to GPU 5 has 1, GPU 5 to GPU 0 0")):
        parse_system(text, source="dgx1.toml")


def test_nvlink_counts_out_of_any_range_are_refused_by_pair():
    # 10**20 overflowed NumPy's int64 with a Python error before the per-GPU limit was checked.
    spec = preset_spec("dgx1_v100")
    for count, message in ((10**20, "GPU 0 to GPU 1: 100000000000000000000 NVLinks; a V100 has at most 6 (nvlink2)"),
                           (-1, "NVLink counts must be >= 0: GPU 0 to GPU 1 has -1")):
        text = format_system(spec).replace("[0, 1, 1, 2, 2, 0, 0, 0]", f"[0, {count}, 1, 2, 2, 0, 0, 0]")
        with pytest.raises(InputError, match=re.escape(f"dgx1.toml: server.nvlink_counts: {message}")):
            parse_system(text, source="dgx1.toml")


@pytest.mark.parametrize("change, field", [
    (dict(sockets=0), "sockets"), (dict(hosts=3), "hosts"), (dict(nic_ports=9), "nic_ports"),
    (dict(net_latency_us=-1.0), "net_latency_us"), (dict(step_latency_us=float("nan")), "step_latency_us"),
    (dict(memory="pcie5"), "memory"), (dict(pcie="ib_ndr"), "pcie"), (dict(compute_nic="pcie5"), "compute_nic"),
    (dict(nvlinks_per_gpu=19), "nvlinks_per_gpu"), (dict(gpu_nics=(0,) * 7), "gpu_nics"), (dict(switches=()), "switches"),
    (dict(frontend_ports=1000), "frontend_ports"), (dict(nccl_env=(("ALGO", "Ring"),)), "nccl_env"),
])
def test_a_server_check_names_the_field_it_finds_wrong_and_a_file_names_its_key(change, field):
    # The field comes with the error (FieldError), so a system file names its own key for it
    # from a table rather than from the message's words.
    with pytest.raises(FieldError) as caught:
        dataclasses.replace(preset_spec("dgx_h100"), **change).check()
    assert caught.value.field == field
    assert field in {f.name for f in dataclasses.fields(ServerSpec)}
    assert set(_SPEC_KEYS) <= {f.name for f in dataclasses.fields(ServerSpec)}


def test_a_server_wrong_only_as_a_whole_names_no_field():
    quad = (DATA / "systems" / "alps_gh200.toml").read_text()
    spec = parse_system(quad, source="g.toml").spec
    chain = ((0, 6, 0, 0), (6, 0, 6, 0), (0, 6, 0, 6), (0, 0, 6, 0))
    with pytest.raises(InputError, match="GPUs 0 and 3 are on different Graces") as caught:
        dataclasses.replace(spec, nvlink_counts=chain).check()
    assert not isinstance(caught.value, FieldError)


def test_gpus_on_graces_no_link_joins_are_refused_where_the_file_is_read():
    # Each GH200 here is its own Grace, Graces share no inter-socket link and a route passes
    # through one GPU at most (NCCL's NVB path), so on a chain of NVLinks 0-1-2-3 GPUs 0 and 2
    # talk through GPU 1, but 0 and 3 over nothing: a collective then failed to route. With
    # every pair linked (CSCS's quad node) the file is read.
    quad = (DATA / "systems" / "alps_gh200.toml").read_text()
    chain = quad.replace("[[0, 6, 6, 6], [6, 0, 6, 6], [6, 6, 0, 6], [6, 6, 6, 0]]",
                         "[[0, 6, 0, 0], [6, 0, 6, 0], [0, 6, 0, 6], [0, 0, 6, 0]]")
    assert chain != quad
    with pytest.raises(InputError, match=re.escape("g.toml: server: GPUs 0 and 3 are on different Graces, which share "
                                                  "no inter-socket link, and no NVLink joins them, directly or "
                                                  "through one GPU")):
        parse_system(chain, source="g.toml")
    assert parse_system(quad, source="g.toml").spec.n_gpus == 4
    # Two GH200 on one Grace each, PCIe only, joined through a PCIe switch under one Grace: read.
    pcie = ('[server]\ngpu = "GH200"\ngpus = 2\ngpu_fabric = "pcie"\n'
            'pcie = { generation = 5, switches = [{ gpus = [0, 1], socket = 0 }] }\n'
            'cpu = { sockets = 2, kind = "grace", memory = "lpddr5x_grace" }\n')
    assert parse_system(pcie, source="p.toml").spec.n_gpus == 2
    with pytest.raises(InputError, match="GPUs 0 and 1 are on different Graces"):
        parse_system(pcie.replace("switches = [{ gpus = [0, 1], socket = 0 }]", "switches = [[0], [1]]"),
                     source="p.toml")


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")]


def test_collective_runs_on_the_l40s_file_with_its_four_servers(capsys):
    assert flowsim(["collective", "all_reduce", "--system", str(L40S), "-b", "8", "-e", "64M", "-f", "8192"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# flowsim all_reduce: 4 x l40s, 32 ranks,")
    assert "rail_optimized fabric" in out
    assert [int(r[0]) for r in _rows(out)] == [8, 65536]


def test_one_gb200_nvl72_rack_needs_no_compute_fabric(capsys):
    # Before: "rail_optimized compute fabric of 1 gb200_nvl72 servers: ... does not fit 64-port spines".
    assert flowsim(["collective", "all_reduce", "--system", "gb200-nvl72", "-b", "1M", "-e", "1M"]) == 0
    out = capsys.readouterr().out
    assert "1 x gb200_nvl72, 72 ranks" in out and "none fabric" in out
    # Two racks need a fabric sized for their 144 NICs: a fat-tree, where rail leaves do not
    # fit 64-port spines; asked for by name, the rail-optimized one says which fits.
    assert flowsim(["collective", "all_reduce", "--system", "gb200-nvl72", "--nodes", "2", "-b", "1M",
                    "-e", "1M"]) == 0
    assert "2 x gb200_nvl72, 144 ranks, effective link rates, fat_tree fabric" in capsys.readouterr().out
    assert flowsim(["collective", "all_reduce", "--system", "gb200-nvl72", "--nodes", "2", "-b", "1M",
                    "-e", "1M", "--fabric", "rail_optimized"]) == 2
    assert "fabric 'fat_tree' fits" in capsys.readouterr().err


def test_fabric_switch_and_oversubscription_reach_the_cluster(capsys):
    args = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1G", "-e", "1G",
            "--algorithm", "ring", "--protocol", "simple"]
    assert flowsim(args) == 0
    full = float(_rows(capsys.readouterr().out)[0][10])
    # On NDR the ring's 16 channels, two a NIC, hold it (22.8 GB/s each across servers,
    # docs/model.md "Ring channels across servers"): 16 x 22.8 = 364.8 GB/s of busbw. QM8700
    # ports run HDR (200 Gb/s, 24 GB/s effective, §4.1): the 8 NICs at 24 bind first, 192.
    assert full == pytest.approx(16 * 22.8, rel=0.02)
    assert flowsim([*args, "--switch", "qm8700"]) == 0
    hdr = float(_rows(capsys.readouterr().out)[0][10])
    assert hdr == pytest.approx(8 * 24, rel=0.02)
    assert flowsim([*args, "--oversubscription", "3"]) == 2
    assert "oversubscription 3.0 does not divide the 32 down ports" in capsys.readouterr().err


def test_check_takes_a_system_file(tmp_path, capsys):
    log = DATA / "nccl_tests" / "all_reduce_perf_dgx_h100_4node.txt"
    text = format_system(dataclasses.replace(preset_spec("dgx_h100"), name="my_h100"))
    path = tmp_path / "my_h100.toml"
    path.write_text(text)
    assert flowsim(["check", str(log), "--system", str(path), "--min-bytes", "8G", "--json"]) in (0, 1)
    from_file = capsys.readouterr().out
    assert flowsim(["check", str(log), "--system", "dgx-h100", "--min-bytes", "8G", "--json"]) in (0, 1)
    from_preset = json.loads(capsys.readouterr().out)
    from_file = json.loads(from_file)
    assert from_file["rows"] == from_preset["rows"] and any(r["predicted_busbw_GBps"] for r in from_file["rows"])
    assert from_file["system"] == "my_h100"
    # The file's [cluster] keys shape the fabric as they do for `collective`: su_size was
    # passed on to collective_time, which refused it ("unknown option 'su_size'").
    path.write_text(text + "\n[cluster]\nsu_size = 16\nfabric = \"rail_optimized\"\n")
    assert flowsim(["check", str(log), "--system", str(path), "--min-bytes", "8G", "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["rows"] == from_preset["rows"]


def test_presets_shows_a_system_files_figures(capsys):
    assert flowsim(["presets", str(L40S)]) == 0
    out = capsys.readouterr().out
    assert "server: 8 x L40S" in out
    assert "GPU fabric: PCIe only, peer-to-peer on" in out
    # 2 x 200 Gb/s = 50 GB/s nominal, 2 x 24 GB/s effective (§5 / [GTC24]).
    assert "compute NICs: 2 x eth200g (roce), up to 4 GPU(s) each: 50.00 GB/s nominal, 48.00 GB/s effective" in out
    assert "cluster: 4 server(s), 32 GPUs, rail_optimized compute fabric (sn5400" in out


def test_a_scenario_takes_a_system_file_and_overrides_its_keys(tmp_path):
    scenario = load_scenario(DATA / "scenarios" / "l40s_all_reduce.toml")
    assert len(scenario.topology.gpus()) == 32
    text = (DATA / "scenarios" / "l40s_all_reduce.toml").read_text().replace(
        'figure = "effective"',
        'figure = "effective"\nn_nodes = 2\nsystem = { server = { nics = { count = 1, speed_gbps = 400 } } }')
    t = parse_scenario(text, source="s.toml", base_dir=DATA / "scenarios").topology
    assert len(t.gpus()) == 16
    assert t.link_capacity_Bps[t.link_id("n1.nic0->ib.su0.rail0")] == 48 * G  # 400 Gb/s RDMA, effective (§5)
    assert "n1.nic1" not in t.node_names


def test_a_scenario_names_a_bad_system_file_and_its_key(tmp_path):
    (tmp_path / "box.toml").write_text(L40S.read_text().replace("speed_gbps = 200", "speed_gbps = 250"))
    text = '[topology]\ncluster = "box.toml"\nfigure = "nominal"\n[[workload.collective]]\nop = "all_reduce"\n' \
           "size_bytes = 1024\n"
    with pytest.raises(InputError, match=re.escape("s.toml: topology.cluster: ") + ".*box.toml: server.nics.speed_gbps"):
        parse_scenario(text, source="s.toml", base_dir=tmp_path)


def test_the_nic_sweep_varies_the_system_files_keys():
    sweep = load_sweep(DATA / "sweeps" / "l40s_nics.toml")
    assert len(sweep.runs) == 9
    # The runs' keys cover the system file's content, as they cover a flow list's.
    assert any(path.name == "l40s.toml" for path in sweep.files)


@pytest.mark.parametrize(
    ("name", "gpu", "nics", "nic_Bps"),
    [
        # Google Cloud "Networking and GPU machines": A3 Ultra and A4 8 x 400 Gb/s CX-7;
        # A3 Mega 1,800 Gbps as 8 x 200 + 200; A3 High 1,000 Gbps as 4 x 200 + 200.
        ("gcp-a3-ultra", "H200", 8, 50 * G),
        ("gcp_a4", "B200", 8, 50 * G),
        ("gcp-a3-mega", "H100", 8, 25 * G),
        ("gcp_a3_high", "H100", 4, 25 * G),
        # AWS: 32 EFA devices of 100 Gb/s, as 8 NICs of 400 Gb/s (p5, p5e); p4d and p4de 4 x
        # 100 Gb/s; p6-b200 8 x 400 Gb/s EFAv4.
        ("aws-p5", "H100", 8, 50 * G),
        ("aws-p5e", "H200", 8, 50 * G),
        ("aws_p4d", "A100", 4, 12.5 * G),
        ("aws-p4de", "A100", 4, 12.5 * G),
        ("aws-p6-b200", "B200", 8, 50 * G),
        # Azure: ND A100 v4 8 x 200 Gb/s HDR; ND H100 v5 and ND H200 v5 8 x 400 Gb/s NDR; ND
        # GB200 v6 4 x 400 Gb/s per VM of 4 GPUs, 18 VMs to an NVL72 rack (flowsim's server).
        ("azure-nd-a100-v4", "A100", 8, 25 * G),
        ("azure_nd_h100_v5", "H100", 8, 50 * G),
        ("azure-nd-h200-v5", "H200", 8, 50 * G),
        ("azure-nd-gb200-v6", "B200", 72, 50 * G),
        # OCI: BM.GPU4.8 16 x 100 Gb/s RoCE as 8 x 200; BM.GPU.H100.8 16 x 200 as 8 x 400;
        # BM.GPU.B300.8 "8 x 2 x 400 Gb/s" as 8 x 800.
        ("oci-bm-gpu4-8", "A100", 8, 25 * G),
        ("oci_bm_gpu_h100_8", "H100", 8, 50 * G),
        ("oci-bm-gpu-b300-8", "B300", 8, 100 * G),
        # NVIDIA: DGX H200 8 x 400 Gb/s NDR; DGX B300 8 x 800 Gb/s XDR.
        ("dgx-h200", "H200", 8, 50 * G),
        ("dgx_b300", "B300", 8, 100 * G),
        # HGX servers of the GPUs sold in China: H800 and H20 8 x 400 Gb/s NDR (DeepSeek's
        # 50 GB/s of IB a GPU; users' 8 ConnectX-7 of 400G), A800 8 x 200 Gb/s HDR.
        ("hgx-h800", "H800", 8, 50 * G),
        ("hgx_h20", "H20", 8, 50 * G),
        ("hgx-a800", "A800", 8, 25 * G),
    ],
)
def test_shipped_cloud_systems_resolve_with_dashes_or_underscores(name, gpu, nics, nic_Bps):
    for spelling in (name, name.replace("-", "_"), name.replace("_", "-"), name.upper()):
        system, label, cluster = resolve_system(spelling)
        # Rack-scale systems (72 rails a rack) name the fat-tree they need.
        fabric = {"fabric": "fat_tree"} if system.hosts > 1 else {}
        assert (label, cluster, system.gpu, system.n_nics) == (name.replace("-", "_"), fabric, gpu, nics)
    # A GB200 NVL72 rack has 72 rails, more than 64-port spines take: a fat-tree for all.
    t = build_cluster(system, 2, figure="nominal", fabric="fat_tree")
    out = [int(link) for link in t.links_from("n1.nic0") if t.node_server[t.link_dst[link]] < 0]
    assert [t.link_capacity_Bps[link] for link in out] == [nic_Bps]
    assert len(t.gpus()) == 2 * system.n_gpus


def test_the_dgx_h200_is_the_dgx_h100_preset_with_h200_gpus():
    # NVIDIA's DGX BasePOD reference architecture gives the DGX H200 and DGX H100 one list of
    # specifications: the same NVSwitches, PCIe, CPUs and eight 400 Gb/s NICs, one per GPU.
    system, _, _ = resolve_system("dgx-h200")
    h100 = preset_spec("dgx_h100")
    assert (system.gpu, h100.gpu) == ("H200", "H100")
    mine, its = build_server(system, figure="effective"), build_server(h100, figure="effective")
    assert mine.link_names == its.link_names and mine.node_names == its.node_names
    np.testing.assert_array_equal(mine.link_capacity_Bps, its.link_capacity_Bps)
    np.testing.assert_array_equal(mine.node_nic, its.node_nic)


def test_the_hgx_h20_is_the_dgx_h100_preset_with_h20_gpus():
    # The H20 keeps the H100's 18 NVLink 4 links; its servers' NICs as users give them are the
    # DGX H100's eight 400 Gb/s, one per GPU.
    system, _, _ = resolve_system("hgx-h20")
    mine, its = build_server(system, figure="effective"), build_server(preset_spec("dgx_h100"), figure="effective")
    assert mine.link_names == its.link_names and mine.node_names == its.node_names
    np.testing.assert_array_equal(mine.link_capacity_Bps, its.link_capacity_Bps)


@pytest.mark.parametrize(("name", "nvlink", "links"), [("hgx-h800", "nvlink4", 8), ("hgx-a800", "nvlink3", 8)])
def test_the_h800_and_a800_servers_have_eight_nvlinks_a_gpu(name, nvlink, links):
    # 400 GB/s bidirectional a GPU, 8 links of 25 GB/s a direction (docs/hardware.md §1.1),
    # where the H100 has 18 and the A100 12: 200 GB/s a direction into the NVSwitch fabric.
    system, _, _ = resolve_system(name)
    assert (system.nvlink, system.nvlinks_per_gpu) == (nvlink, links)
    t = build_server(system, figure="nominal")
    into_switches = [t.link_capacity_Bps[int(link)] for link in t.links_from("gpu0")
                     if t.node_names[t.link_dst[link]].startswith("nvswitch")]
    assert sum(into_switches) == pytest.approx(links * 25 * G)


def test_the_shipped_systems_are_listed_in_the_help():
    assert shipped_system_names() == (
        "aws_p4d", "aws_p4de", "aws_p5", "aws_p5e", "aws_p6_b200", "azure_nd_a100_v4", "azure_nd_gb200_v6",
        "azure_nd_h100_v5", "azure_nd_h200_v5", "dgx_b300", "dgx_h200", "gcp_a3_high", "gcp_a3_mega", "gcp_a3_ultra", "gcp_a4",
        "hgx_a800", "hgx_h20", "hgx_h800", "oci_bm_gpu4_8", "oci_bm_gpu_b300_8", "oci_bm_gpu_gb300_4",
        "oci_bm_gpu_h100_8",
    )


def test_a_p4d_server_leaves_through_four_100g_efa_nics_two_gpus_each():
    # AWS p4d: 4 EFA devices of 100 Gb/s for 8 GPUs. A server's traffic to another leaves
    # through at most 4 x 100 Gb/s = 400 Gb/s = 4 x 12.5 GB/s = 50 GB/s (nominal), so an
    # inter-node ring all-reduce can carry no more than 50 GB/s per server; GPUs 2k and 2k+1
    # share NIC k.
    system, _, _ = resolve_system("aws-p4d")
    t = build_cluster(system, 2, figure="nominal", fabric="rail_optimized")
    out = [t.link_capacity_Bps[t.link_id(f"n0.nic{k}->ib.su0.rail{k}")] for k in range(4)]
    assert sum(out) == 50e9
    assert [t.node_names[t.node_nic[t.node_id(f"n0.gpu{g}")]] for g in range(8)] == [
        "n0.nic0", "n0.nic0", "n0.nic1", "n0.nic1", "n0.nic2", "n0.nic2", "n0.nic3", "n0.nic3"]


@pytest.mark.parametrize(("name", "latency_s"), [("aws-p4d", 75e-6), ("aws-p6-b200", 35e-6), ("azure-nd-h100-v5", 0.0)])
def test_efa_systems_carry_the_latency_aws_ofi_nccl_reports(name, latency_s):
    # aws-ofi-nccl src/platform-aws.cpp: p4d/p4de/p5/p5e report 75 us, p5en/p6-b200 35 us;
    # NCCL's IB transport (InfiniBand and RoCE) reports 0.
    system, _, _ = resolve_system(name)
    t = build_cluster(system, 2, figure="nominal", fabric="rail_optimized")
    assert t.server_net_latency_s.tolist() == [latency_s, latency_s]


def test_rings_leave_a_server_through_its_nics_in_turn():
    from flowsim.collectives.rings import nic_spread_offsets

    # Two GPUs to a NIC (the p4d): rotations 0, 2, 4, 6 enter through NICs 0-3 and leave
    # through NICs 3, 0, 1, 2; then 1, 3, 5, 7. One NIC per GPU: 0..7 as before.
    assert nic_spread_offsets([0, 0, 1, 1, 2, 2, 3, 3]) == [0, 2, 4, 6, 1, 3, 5, 7]
    assert nic_spread_offsets(list(range(8))) == list(range(8))


def test_a_p4d_ring_all_reduce_fills_its_four_efa_nics(capsys):
    # 4 EFA NICs of 100 Gb/s at NCCL's 12 GB/s each (eth100g effective, [NCCL] NET_BW): a ring
    # all-reduce across servers reaches at most 4 x 12 = 48 GB/s busbw. With the rings rotated
    # by one GPU, two of the first four left through NIC 0 and it gave half that (23.95).
    assert flowsim(["collective", "all_reduce", "--system", "aws-p4d", "--nodes", "2", "-b", "1G", "-e", "1G",
                    "--nccl-env", "NCCL_ALGO=Ring"]) == 0
    busbw = float(_rows(capsys.readouterr().out)[0][10])
    assert 0.97 * 48 < busbw <= 48


def test_a_p4d_tree_heads_leave_through_all_four_nics():
    from flowsim.collectives import collective_time

    # NCCL's search starts tree channels on NIC c mod nNets as it does rings, so the heads of
    # a p4d's 4 tree channels are GPUs 0, 2, 4, 6 (NICs 0-3), not 0-3 (NICs 0 and 1 only):
    # each NIC carries a quarter of what crosses between the servers, S per direction.
    system, _, _ = resolve_system("aws-p4d")
    t = build_cluster(system, 2, figure="effective", fabric="rail_optimized")
    run = collective_time(t, "all_reduce", 2**30, algorithm="tree", protocol="simple", channels=4).run
    out = np.array([run.result.link_bytes[t.link_id(f"n0.nic{k}->ib.su0.rail{k}")] for k in range(4)])
    assert out.tolist() == [2**30 / 4] * 4
    across = {(s, d) for s, d in zip(run.workload.src, run.workload.dst, strict=True) if s[:2] != d[:2]}
    assert {s for s, _ in across} == {f"n{i}.gpu{g}" for i in (0, 1) for g in (0, 2, 4, 6)}


_H800 = """description = "8 x H800"
[server]
gpu = "NVIDIA H800"
gpus = 8
gpu_fabric = "nvswitch"
nvswitch = "nvswitch3"
pcie = { generation = 5 }
cpu = { sockets = 2, interconnect = "upi_sapphire_rapids", memory = "ddr5_4800_8ch" }
"""


def test_an_h800_has_eight_nvlinks_unless_the_file_says_otherwise():
    # docs/hardware.md §1.1: the H800's NVLink 4 is cut down to 8 links (200 GB/s a direction).
    assert parse_system(_H800, source="h800.toml", name="h800").spec.nvlinks_per_gpu == 8
    given = _H800.replace('nvswitch = "nvswitch3"', 'nvswitch = "nvswitch3"\nnvlinks_per_gpu = 18')
    assert parse_system(given, source="h800.toml", name="h800").spec.nvlinks_per_gpu == 18
    h100 = _H800.replace("H800", "H100")
    assert parse_system(h100, source="h100.toml", name="h100").spec.nvlinks_per_gpu is None  # all 18


def test_an_h800_server_all_reduces_as_reported():
    from flowsim.collectives import collective_time
    from flowsim.collectives.report import busbw_Bps

    # NVIDIA/nccl#1374 (2024-07-24): "a test on H800 * 8 node, the reported allreduce busBW is
    # 215 GB/s" (NVLS; the size is in a screenshot, so this takes the model's 8 GiB). Held out:
    # nothing in flowsim was set from it.
    t = build_server(parse_system(_H800, source="h800.toml", name="h800").spec, figure="effective")
    run = collective_time(t, "all_reduce", 8 * 2**30)
    busbw = busbw_Bps("all_reduce", 8 * 2**30, run.time_s, 8) / 1e9
    assert run.algorithm == "nvls" and abs(busbw / 215 - 1) < 0.05


def test_presets_lists_and_describes_the_shipped_systems(capsys):
    assert flowsim(["presets", "--only", "systems"]) == 0
    assert "  aws_p6_b200: AWS p6-b200.48xlarge: 8 x B200, 8 x 400 Gb/s EFAv4" in capsys.readouterr().out
    assert flowsim(["presets", "aws-p6-b200"]) == 0
    out = capsys.readouterr().out
    # 8 EFA NICs of 400 Gb/s, one per GPU: 8 x 50 = 400 GB/s nominal per server (48 effective each).
    assert "compute NICs: 8 x eth400g (efa), up to 1 GPU(s) each: 400.00 GB/s nominal, 384.00 GB/s effective" in out
    assert "network latency its NCCL plugin reports: 35 us, which NCCL's tuner adds to each inter-server step" in out
    assert "latency a step between servers pays on the wire: 23 us on top of NCCL's figure" in out


@pytest.mark.parametrize("name", shipped_system_names())
def test_presets_describes_every_shipped_system(name, capsys):
    # Rack-scale systems' [cluster] tables give a fabric and no node count (one rack): that
    # described the cluster with a Python error.
    assert flowsim(["presets", name]) == 0
    out = capsys.readouterr().out
    cluster = find_system(name).cluster
    if cluster:
        assert f"  cluster: {cluster.get('n_nodes', 1)} server(s), " in out


def test_a_scenario_names_a_shipped_system_as_cluster_with_dashes_or_underscores():
    text = '[topology]\ncluster = "{}"\nn_nodes = 2\nfigure = "nominal"\n[[workload.collective]]\nop = "all_reduce"\n' \
           "size_bytes = 1024\n"
    dashed, underscored, capitals = (parse_scenario(text.format(name), source="s.toml").topology
                                     for name in ("gcp-a3-mega", "gcp_a3_mega", "GCP-A3-Mega"))
    assert _same(dashed, underscored) and _same(dashed, capitals)
    # 8 RoCE NICs of 200 Gb/s per server (the shipped file), at the nominal figure: 25 GB/s.
    assert dashed.link_capacity_Bps[dashed.link_id("n1.nic7->ib.su0.rail7")] == 25 * G
    with pytest.raises(InputError, match=r"^s.toml: topology.cluster: expected a preset \(.*\), a shipped system "
                                         r"\(aws_p4d, .*\) or a system file \(FILE.toml\), got a string 'gcp-a9' "
                                         r"\(did you mean gcp_a4\?\)$"):
        parse_scenario(text.format("gcp-a9"), source="s.toml")


def test_a_scenario_names_a_preset_as_people_write_it():
    # As on the command line: '-' and '_' alike and case ignored, for `cluster` and `preset` alike.
    text = '[topology]\n{} = "{}"\n{}figure = "nominal"\n[[workload.collective]]\nop = "all_reduce"\nsize_bytes = 1024\n'
    for key, extra in (("cluster", "n_nodes = 2\n"), ("preset", "")):
        reference = parse_scenario(text.format(key, "dgx_h100", extra), source="s.toml").topology
        for spelling in ("dgx-h100", "DGX-H100", "Dgx_H100"):
            assert _same(parse_scenario(text.format(key, spelling, extra), source="s.toml").topology, reference)


@pytest.mark.parametrize(("value", "suggestion"), [
    ("h100", " (did you mean dgx_h100, azure_nd_h100_v5 or oci_bm_gpu_h100_8?)"),
    ("P5", " (did you mean aws_p5 or aws_p5e?)"),
    ("a3-ultra", " (did you mean gcp_a3_ultra?)"),
    ("dgx-h1000", " (did you mean dgx_h100, dgx_h200 or dgx_a100?)"),
    ("xyz", ""),
])
def test_an_unknown_system_name_says_which_names_it_may_mean(value, suggestion):
    with pytest.raises(InputError) as err:
        resolve_system(value)
    assert str(err.value).startswith(f"unknown system {value!r}{suggestion}: expected a preset (pcie_server, ")


def test_rates_runs_a_scenarios_flows_on_another_system(tmp_path, capsys):
    # One flow from GPU 0 of one server to GPU 0 of the other leaves through one NIC: its rate
    # is that NIC's line rate (nominal figures): 400 Gb/s (DGX H100), 200 Gb/s (GCP A3 Mega),
    # 100 Gb/s (p4d's EFA) and 200 Gb/s (the L40S file's NICs).
    (tmp_path / "one.csv").write_text("name,src,dst,size_bytes\nf,n0.gpu0,n1.gpu0,1e9\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "nominal"\n[workload]\n'
                        'flows = "one.csv"\n')
    for system, rate in ((None, "50.00 GB/s"), ("gcp-a3-mega", "25.00 GB/s"), ("aws_p4d", "12.50 GB/s"),
                         (str(L40S), "25.00 GB/s")):
        assert flowsim(["rates", str(scenario), *(["--system", system] if system else [])]) == 0
        out = capsys.readouterr().out
        assert f"total {rate}, min flow {rate}" in out, (system, out)
    assert flowsim(["rates", str(scenario), "--system", "nope"]) == 2
    assert capsys.readouterr().err.startswith("flowsim: error: --system 'nope': expected a preset (")
    # A system file that is not there was blamed on the scenario's topology.cluster.
    assert flowsim(["rates", str(scenario), "--system", str(tmp_path / "nope.toml")]) == 2
    assert capsys.readouterr().err == f"flowsim: error: --system '{tmp_path / 'nope.toml'}': no such system file\n"
    # A system file with an error of its own: it was put under the scenario's topology.cluster.
    bad = tmp_path / "bad.toml"
    bad.write_text('[server]\ngpu = "L40S"\ngpus = 8\n')
    assert flowsim(["rates", str(scenario), "--system", str(bad)]) == 2
    assert capsys.readouterr().err == f"flowsim: error: {bad}: server.gpu_fabric: missing; expected a string\n"
    preset_scenario = tmp_path / "p.toml"
    preset_scenario.write_text('[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[[workload.collective]]\n'
                               'op = "all_reduce"\nsize_bytes = 1024\n')
    assert flowsim(["rates", str(preset_scenario), "--system", "aws-p5"]) == 2
    assert "--system replaces a [topology] cluster" in capsys.readouterr().err


def test_rates_on_another_system_keeps_the_node_count_a_system_file_gave(tmp_path, capsys):
    # The L40S file's [cluster] has 4 servers and the scenario writes none: on another system
    # it ran on that system's own count (aws-p5: one server, where the flow's n3.gpu0 is not),
    # and on a preset failed asking for topology.n_nodes, a key the user never wrote.
    (tmp_path / "one.csv").write_text("name,src,dst,size_bytes\nf,n0.gpu0,n3.gpu0,1e9\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[topology]\ncluster = "{L40S}"\nfigure = "nominal"\n[workload]\nflows = "one.csv"\n')
    for system, rate in (("aws-p4d", "12.50 GB/s"), ("dgx-h100", "50.00 GB/s")):
        assert flowsim(["rates", str(scenario), "--system", system]) == 0, capsys.readouterr().err
        assert f"total {rate}, min flow {rate}" in capsys.readouterr().out
    overlaid = tmp_path / "o.toml"
    overlaid.write_text(scenario.read_text().replace("[workload]", "system = { server = { gpus = 8 } }\n[workload]"))
    assert flowsim(["rates", str(overlaid), "--system", "dgx-h100"]) == 2
    assert capsys.readouterr().err == (f"flowsim: error: {overlaid}: --system 'dgx-h100' is a preset, which takes no "
                                       "[topology] system overrides (the scenario has them); give a system file\n")
    # A scenario that names the preset itself: the key was "unknown", though the docs name it.
    preset_overlaid = tmp_path / "p.toml"
    preset_overlaid.write_text(overlaid.read_text().replace(f'cluster = "{L40S}"', 'cluster = "dgx_h100"\nn_nodes = 4'))
    assert flowsim(["rates", str(preset_overlaid)]) == 2
    assert capsys.readouterr().err == (f"flowsim: error: {preset_overlaid}: topology.system: the preset dgx_h100 takes "
                                       "no system overrides, which change a system file's keys: give a system file or "
                                       "a shipped system as cluster (docs/system-format.md)\n")


def test_a_system_files_nccl_environment_runs_under_the_callers(tmp_path, capsys):
    # Two DGX H100 whose software sets NCCL_ALGO=Ring: NCCL's tuner runs the ring there (it
    # takes NVLSTree at 1 GiB without), and --nccl-env wins where both name the variable.
    spec = dataclasses.replace(preset_spec("dgx_h100"), nccl_env=(("NCCL_ALGO", "Ring"),))
    path = tmp_path / "h100_ring.toml"
    path.write_text(format_system(spec, cluster={"n_nodes": 2}))
    assert load_system(path).spec.nccl_env == (("NCCL_ALGO", "Ring"),)
    assert build_cluster(load_system(path).spec, 2, figure="effective").nccl_env == (("NCCL_ALGO", "Ring"),)
    command = ["collective", "all_reduce", "--system", str(path), "-b", "1G", "-e", "1G"]
    assert flowsim(command) == 0
    out = capsys.readouterr().out
    assert "NCCL 2.30.7, NCCL_ALGO=Ring (system)" in out and _rows(out)[0][5] == "ring"
    assert flowsim([*command, "--nccl-env", "NCCL_ALGO=NVLSTree"]) == 0
    out = capsys.readouterr().out
    assert "(system)" not in out and _rows(out)[0][5] == "nvls_tree"
    assert flowsim(["presets", str(path)]) == 0
    assert "NCCL environment its software sets (under --nccl-env): NCCL_ALGO=Ring" in capsys.readouterr().out


@pytest.mark.parametrize(
    "table, message",
    [
        ('[nccl.env]\nALGO = "Ring"', "l40s.toml: nccl.env.ALGO: is not an NCCL_ variable"),
        ('[nccl.env]\nNCCL_ALGO = "Rings"', "l40s.toml: nccl.env.NCCL_ALGO: NCCL_ALGO='Rings': unknown name 'Rings'"),
        ('[nccl.env]\nNCCL_MIN_NCHANNELS = "four"', "l40s.toml: nccl.env.NCCL_MIN_NCHANNELS: NCCL environment: "
                                                    "NCCL_MIN_NCHANNELS='four' is not an integer"),
        ("[nccl.env]\nNCCL_MIN_NCHANNELS = 4", "l40s.toml: nccl.env.NCCL_MIN_NCHANNELS: expected a string"),
        ("[nccl]\nenvironment = {}", "l40s.toml: nccl.environment: unknown key"),
    ],
)
def test_a_bad_nccl_environment_is_named_by_its_key(tmp_path, table, message):
    path = tmp_path / "l40s.toml"
    path.write_text(L40S.read_text() + "\n" + table + "\n")
    with pytest.raises(InputError, match=re.escape(message)):
        load_system(path)


def test_gcp_a3_mega_runs_under_googles_nccl_profile(capsys):
    # Google's GPUDirect-TCPXO profile on A3 Mega (the shipped file's [nccl.env]): rings and
    # trees, Simple, NVLS off, 8 MiB buffers, larger point-to-point chunks. NCCL's tuner takes
    # the tree there at 1 GiB (NVLSTree without).
    system, _, _ = resolve_system("gcp-a3-mega")
    chunks = {"NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288",
              "NCCL_P2P_NVL_CHUNKSIZE": "1048576"}
    profile = {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0", "NCCL_MIN_NCHANNELS": "4",
               "NCCL_BUFFSIZE": "8388608", **chunks}
    assert dict(system.nccl_env) == profile
    assert flowsim(["collective", "all_reduce", "--system", "gcp-a3-mega", "--nodes", "2", "-b", "1G", "-e", "1G"]) == 0
    out = capsys.readouterr().out
    assert ("NCCL 2.30.7, NCCL_ALGO=Ring,Tree NCCL_PROTO=Simple NCCL_NVLS_ENABLE=0 NCCL_MIN_NCHANNELS=4 "
            "NCCL_BUFFSIZE=8388608 NCCL_P2P_NET_CHUNKSIZE=524288 NCCL_P2P_PCI_CHUNKSIZE=524288 "
            "NCCL_P2P_NVL_CHUNKSIZE=1048576 (system)") in out
    assert _rows(out)[0][5:7] == ["tree", "simple"]
    # Google's TCPX setup on A3 High: rings, Simple, the same chunks.
    assert dict(resolve_system("gcp-a3-high")[0].nccl_env) == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", **chunks}


def test_a_server_spec_takes_only_its_kinds_of_inter_socket_link_and_memory():
    spec = preset_spec("dgx_h100")
    with pytest.raises(InputError, match="memory='pcie3' is no host memory; valid ones: ddr4_2400_4ch, "):
        dataclasses.replace(spec, memory="pcie3").check()
    with pytest.raises(InputError, match="intersocket='ddr5_4800_8ch' is no inter-socket link; valid ones: qpi_"):
        dataclasses.replace(spec, intersocket="ddr5_4800_8ch").check()


@pytest.mark.parametrize(("fabric", "message"), [
    ('nvswitch = "nvswitch4"', "h100.toml: server.nvswitch: the H100 has NVLink nvlink4, not nvlink5"),
    ('nvswitch = "nvswitch3"\nnvlinks_per_gpu = 19', "h100.toml: server.nvlinks_per_gpu: expected at most 18 (nvlink4), got 19"),
])
def test_a_gpus_nvlink_is_its_own(tmp_path, fabric, message):
    path = tmp_path / "h100.toml"
    path.write_text(f'[server]\ngpu = "H100"\ngpus = 8\ngpu_fabric = "nvswitch"\n{fabric}\n'
                    'pcie = { generation = 5 }\ncpu = { sockets = 1, memory = "ddr5_4800_8ch" }\n')
    with pytest.raises(InputError) as err:
        load_system(path)
    assert str(err.value) == f"{tmp_path / 'h100.toml'}: {message.split(': ', 1)[1]}"


@pytest.mark.parametrize(("line", "message"), [
    ('switch = "qm9701"', "l40s.toml: cluster.switch: expected one of 'q3400', 'qm8700', 'qm9700', "),
    ("oversubscription = 0", "l40s.toml: cluster.oversubscription: expected a number >= 1 (leaf down to up ports), "
                             "got a number 0.0"),
    ("oversubscription = inf", "l40s.toml: cluster.oversubscription: expected a number >= 1 (leaf down to up "
                               "ports), got a number inf"),
    # The servers' RoCE NICs have no port for an InfiniBand switch: said of the key, not when built.
    ('switch = "qm9700"', "l40s.toml: cluster.switch: switch 'qm9700' is an InfiniBand switch and the servers' "
                          "compute NICs (kind 'roce') are Ethernet (eth200g): give an Ethernet switch"),
])
def test_a_clusters_fabric_keys_are_checked_in_the_file(tmp_path, line, message):
    # They reached the fabric's builder, whose message named neither the file nor the key.
    path = tmp_path / "l40s.toml"
    path.write_text(L40S.read_text().replace("[cluster]\n", f"[cluster]\n{line}\n"))
    with pytest.raises(InputError, match=re.escape(message)):
        load_system(path)


def test_a_system_file_is_known_by_its_suffix_in_any_case_and_needs_a_name(tmp_path, capsys):
    # BOX.TOML was looked up as a preset name; name = "" headed tables "2 x , 8 ranks".
    path = tmp_path / "BOX.TOML"
    path.write_text(L40S.read_text())
    assert flowsim(["presets", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"BOX ({path})")
    path.write_text('name = ""\n' + L40S.read_text())
    with pytest.raises(InputError, match=r"BOX\.TOML: name: expected the system's name .*, got an empty string"):
        load_system(path)


def test_a_grace_gpus_nic_is_on_its_own_grace(tmp_path):
    # One NIC for each 4-GPU tray of a GB200 rack (two Graces a tray) loaded, then failed with
    # "no route from 'gpu2' to 'nic0'": a GPU reaches a NIC through its own Grace or PCIe
    # switch, and flowsim relays no GPU's network traffic through another GPU.
    serves = [[4 * t + g for g in range(4)] for t in range(18)]
    path = tmp_path / "gb200.toml"
    path.write_text('[server]\ngpu = "GB200"\ngpus = 72\nhosts = 18\ngpu_fabric = "nvswitch"\nnvswitch = "nvswitch4"\n'
                    'pcie = { generation = 5 }\ncpu = { kind = "grace", sockets = 36, memory = "lpddr5x_grace" }\n'
                    f'nics = {{ count = 18, speed_gbps = 800, kind = "ib", serves = {serves} }}\n')
    with pytest.raises(InputError, match=r"gb200\.toml: server\.nics: GPU 2's NIC 0 is on another Grace"):
        load_system(path)
    path.write_text(path.read_text().replace("count = 18", "count = 36").replace(f"serves = {serves}",
                                                                               "serves = " + str([[2 * i, 2 * i + 1] for i in range(36)])))
    assert load_system(path).spec.n_nics == 36
