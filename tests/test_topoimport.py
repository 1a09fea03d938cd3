"""``flowsim system import`` on real ``nvidia-smi topo -m`` outputs (data/topo/, sources in its
README): an NVSwitch server, a DGX-1 NVLink mesh and two PCIe boxes."""

import io
import re
import sys
from pathlib import Path

import pytest

import flowsim
from flowsim.cli import main as flowsim_main
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.presets import DGX1_NVLINK_COUNTS
from flowsim.systemfile import load_system, parse_system, resolve_system
from flowsim.topoimport import import_system, parse_topo_matrix

TOPO = Path(__file__).resolve().parents[1] / "data" / "topo"
SIZE = 8 * 2**30


def _matrix(name: str):
    path = TOPO / name
    return parse_topo_matrix(path.read_text(), source=str(path))


def _ring_s(system) -> float:
    return flowsim.collective_time(build_cluster(system, 1, figure="effective", fabric="none"), "all_reduce", SIZE,
                                   algorithm="ring").time_s


def test_reads_the_hgx_h100_matrix():
    m = _matrix("hgx_h100.txt")
    assert len(m.gpus) == 8 and len(m.nics) == 10
    assert m.between("GPU3", "GPU6") == "NV18" and m.between("GPU3", "NIC5") == "PIX"
    assert [m.affinity[f"GPU{g}"] for g in range(8)] == ["0"] * 4 + ["1"] * 4  # the NUMA Affinity column


def test_an_imported_nvswitch_server_is_the_dgx_h100_preset():
    spec, notes = import_system(_matrix("hgx_h100.txt"), name="hgx", gpu="NVIDIA H100 80GB HBM3", nic_speed_gbps=400)
    assert (spec.gpu_fabric, spec.nvlink, spec.nvlinks_per_gpu, spec.sockets) == ("nvswitch", "nvlink4", None, 2)
    # Each GPU PIX to its own NIC: one switch each; NIC3 and NIC4 are nearest to no GPU.
    assert [(s.gpus, s.nics, s.socket) for s in spec.switches] == [((g,), (g,), g // 4) for g in range(8)]
    assert (spec.compute_nic, spec.frontend_ports) == ("ib_ndr", 2)
    assert any("NIC3, NIC4" in note for note in notes)
    assert _ring_s(spec) == _ring_s("dgx_h100")


def test_imported_bridged_pcie_pairs_are_a_mesh_of_pairs_on_root_ports():
    # nccl-tests#178's 8 A100 PCIe: NV12 bridges join 0-1, 2-3, 4-5, 6-7; the rest is PCIe
    # through a socket (NODE) or across the two (SYS); no NICs.
    spec, _ = import_system(_matrix("a100_pcie_nv12_pairs.txt"), name="box", gpu="A100 PCIe")
    assert (spec.gpu_fabric, spec.nvlink, spec.pcie, spec.sockets, spec.n_nics) == (
        "nvlink_mesh", "nvlink3", "pcie4", 2, 0)
    assert [[j for j, count in enumerate(row) if count] for row in spec.nvlink_counts] == [
        [1], [0], [3], [2], [5], [4], [7], [6]]
    assert {count for row in spec.nvlink_counts for count in row} == {0, 12}
    assert [(s.gpus, s.socket) for s in spec.switches] == [((g,), g // 4) for g in range(8)]


def test_an_imported_dgx1_is_the_dgx1_v100_mesh():
    spec, _ = import_system(_matrix("dgx1_v100.txt"), name="dgx1", gpu="Tesla V100-SXM2-16GB", nic_speed_gbps=100)
    assert spec.gpu_fabric == "nvlink_mesh" and spec.nvlink == "nvlink2"
    assert [list(row) for row in spec.nvlink_counts] == DGX1_NVLINK_COUNTS.tolist()  # docs/hardware.md §2.1
    # GPU pairs behind one PLX switch with one NIC each; nic1 is mlx5_1 (GPU2/3), not the column order.
    assert [(s.gpus, s.nics) for s in spec.switches] == [((0, 1), (0,)), ((2, 3), (1,)), ((4, 5), (2,)),
                                                         ((6, 7), (3,))]
    assert [s.socket for s in spec.switches] == [0, 0, 1, 1]  # CPU Affinity 0-19,40-59 / 20-39,60-79
    assert _ring_s(spec) == _ring_s("dgx1_v100")


OWNERS_4090 = """
[server]
gpu = "RTX 4090"
gpus = 8
gpu_fabric = "pcie"
pcie = { generation = 4, switches = [[0, 1, 2, 3], [4, 5, 6, 7]] }
cpu = { sockets = 2, interconnect = "upi_skylake", memory = "ddr4_3200_8ch" }
nics = { count = 1, speed_gbps = 200, kind = "roce", serves = [[0, 1, 2, 3, 4, 5, 6, 7]] }
"""


def test_an_imported_pcie_box_is_what_its_owner_would_write():
    m = _matrix("rtx4090_8x.txt")
    assert m.nic_names == {"NIC0": "mlx5_bond_0"}
    # GeForce cards get no peer-to-peer from NVIDIA's driver (nccl-tests#307's, which this
    # matrix is, ran without): by default the import says so, as its owner would write.
    spec, notes = import_system(m, name="box", gpu="NVIDIA GeForce RTX 4090", nic_speed_gbps=200, nic_kind="roce",
                                intersocket="upi_skylake", memory="ddr4_3200_8ch")
    owners = parse_system(OWNERS_4090 + "p2p = false\n", name="box").spec
    assert (spec.gpu_fabric, spec.pcie, spec.sockets, spec.n_nics, spec.p2p) == ("pcie", "pcie4", 2, 1, False)
    assert any(note.startswith("no peer-to-peer over PCIe: NVIDIA's driver gives the RTX 4090 none") for note in notes)
    assert _ring_s(spec) == _ring_s(owners)
    # With peer-to-peer (a patched driver), one ring crosses the sockets once each way: NCCL's
    # 10 GB/s Skylake UPI (docs/hardware.md §3.1) bounds its busbw, 2 (n-1)/n S / t.
    spec, _ = import_system(m, name="box", gpu="NVIDIA GeForce RTX 4090", nic_speed_gbps=200, nic_kind="roce",
                            intersocket="upi_skylake", memory="ddr4_3200_8ch", p2p=True)
    time_s = _ring_s(spec)
    assert spec.p2p and time_s == _ring_s(parse_system(OWNERS_4090 + "p2p = true\n", name="box").spec)
    # A system file of GeForce cards takes no peer-to-peer unless it says so, as the import does.
    assert not parse_system(OWNERS_4090, name="box").spec.p2p
    busbw = 2 * 7 / 8 * SIZE / time_s
    assert 9.5e9 < busbw <= 10e9


# A GH200 quad node as its matrix would show it where every NIC is as far from every GPU (each
# on another Grace's PCIe, SYS): a made-up matrix, no real output of one was found.
GH200_QUAD_MATRIX = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV6\tNV6\tNV6\tSYS\tSYS\tSYS\tSYS\t0-71\t0
GPU1\tNV6\t X \tNV6\tNV6\tSYS\tSYS\tSYS\tSYS\t72-143\t1
GPU2\tNV6\tNV6\t X \tNV6\tSYS\tSYS\tSYS\tSYS\t144-215\t2
GPU3\tNV6\tNV6\tNV6\t X \tSYS\tSYS\tSYS\tSYS\t216-287\t3
NIC0\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS
NIC1\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS
NIC2\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS
NIC3\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X

NIC Legend:

  NIC0: cxi0
  NIC1: cxi1
  NIC2: cxi2
  NIC3: cxi3
"""


def test_a_grace_superchip_gets_grace_hosts_and_equally_near_nics_are_shared_out():
    spec, notes = import_system(parse_topo_matrix(GH200_QUAD_MATRIX), name="quad", gpu="GH200",
                                nic_speed_gbps=200, nic_kind="roce")
    # Grace hosts, one a NUMA node, no inter-socket link; every NIC serves one GPU, where the
    # first NIC took all four GPUs (and the other three were front-end ports) until 2026-12-05.
    assert (spec.cpu, spec.sockets, spec.intersocket, spec.memory) == ("grace", 4, None, "lpddr5x_grace")
    assert (spec.n_nics, spec.gpu_nics, spec.frontend_ports) == (4, (0, 1, 2, 3), 0)
    assert spec.nvlink_counts == ((0, 6, 6, 6), (6, 0, 6, 6), (6, 6, 0, 6), (6, 6, 6, 0))
    assert any("Grace CPUs" in note for note in notes)
    with pytest.raises(InputError, match="--intersocket does not apply: a GH200 server's CPUs are Graces"):
        import_system(parse_topo_matrix(GH200_QUAD_MATRIX), name="quad", gpu="GH200", nic_speed_gbps=200,
                      nic_kind="roce", intersocket="upi_skylake")


# The 8 RTX 4090 of blog.chlc.cc's P2P post (data/topo/README.md), as their owner describes
# them: two EPYC 7542 with DDR4-3200 on 8 channels each, every GPU on a root port of its own
# (SYS to every other, the page says there is no PCIe switch), the stock driver's P2P off.
OWNERS_4090_EPYC = """
[server]
gpu = "RTX 4090"
gpus = 8
gpu_fabric = "pcie"
p2p = false
pcie = { generation = 4, switches = [[0], [1], [2], [3], [4], [5], [6], [7]] }
cpu = { sockets = 2, interconnect = "xgmi_amd", memory = "ddr4_3200_8ch" }
"""


def test_an_imported_epyc_box_in_nps4_is_what_its_owner_would_write_and_what_it_measured():
    m = _matrix("rtx4090_8x_epyc.txt")
    spec, _ = import_system(m, name="box", gpu="RTX 4090", nic_speed_gbps=100, sockets=2, intersocket="xgmi_amd",
                            memory="ddr4_3200_8ch", p2p=False)
    # NUMA nodes 3, 2, 1, 0 hold GPUs 0-3 and 7, 6, 5, 4 GPUs 4-7; the four NICs hang off GPU6's
    # host bridge (PHB), on the second socket, though every other GPU takes them at SYS.
    assert [(switch.gpus, switch.socket) for switch in spec.switches if switch.gpus] == [
        ((g,), g // 4) for g in range(8)]
    assert {switch.socket for switch in spec.switches if not switch.gpus} == {1}
    owners = parse_system(OWNERS_4090_EPYC, name="box").spec
    assert _ring_s(spec) == _ring_s(owners)
    # The same page's all_reduce_perf (-g 8, P2P off): 14.45 GB/s busbw at 128 MiB, 15.04 at
    # 32 MiB. The model, held out (the machine was added after the PCIe model): NCCL's AMD
    # figure for the link between the sockets (16 GB/s, docs/hardware.md §3.1) bounds the one
    # ring that crosses it each way, 15.65 and 15.30 (+8% and +2%).
    topology = build_cluster(spec, 1, figure="effective", fabric="none")
    for size, measured in ((128 << 20, 14.45e9), (32 << 20, 15.04e9)):
        busbw = 2 * 7 / 8 * size / flowsim.collective_time(topology, "all_reduce", size).time_s
        assert 1.0 < busbw / measured < 1.1


# An EPYC pair in NPS4 (four NUMA nodes per socket) as its matrix would show it: every GPU on a
# root port of its own (SYS to every other), listed alternating between the sockets, and both
# NICs behind GPU7's host bridge (PHB), so SYS from every other GPU. A made-up matrix, shaped as
# such outputs are.
EPYC_NPS4_MATRIX = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n" + "".join(
    f"GPU{i}\t" + "\t".join(" X " if j == i else "SYS" for j in range(8))
    + ("\tPHB\tPHB" if i == 7 else "\tSYS\tSYS") + f"\t{numa * 8}-{numa * 8 + 7}\t{numa}\n"
    for i, numa in enumerate((0, 4, 1, 5, 2, 6, 3, 7))
) + "".join(
    f"NIC{k}\t" + "\t".join("PHB" if i == 7 else "SYS" for i in range(8))
    + "\t" + "\t".join(" X " if j == k else "PIX" for j in range(2)) + "\n"
    for k in range(2)
) + "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"


def test_nps4_numa_nodes_fold_by_number_and_nics_sit_with_their_nearest_gpu():
    spec, _ = import_system(parse_topo_matrix(EPYC_NPS4_MATRIX), name="epyc", gpu="RTX 4090", nic_speed_gbps=100,
                            sockets=2, intersocket="xgmi_amd", p2p=False)
    gpu_socket = {switch.gpus[0]: switch.socket for switch in spec.switches if switch.gpus}
    # NUMA nodes 0-3 are the first socket and 4-7 the second, whatever order the GPUs come in
    # (by order of appearance, GPUs 0-3 were taken as the first socket until 2026-12-06).
    assert gpu_socket == {0: 0, 1: 1, 2: 0, 3: 1, 4: 0, 5: 1, 6: 0, 7: 1}
    # The NICs are GPU7's neighbours, on its socket, though GPU0 is the first to take NIC0 (as
    # the first of two NICs equally far, at SYS), whose socket they were given until 2026-12-06.
    assert [(switch.nics, switch.socket) for switch in spec.switches if not switch.gpus] == [((0, 1), 1)]


def test_more_numa_nodes_than_sockets_a_server_has_get_a_check_note():
    # Read as one socket a NUMA node, eight NUMA nodes are eight sockets: said, with the option.
    _, notes = import_system(parse_topo_matrix(EPYC_NPS4_MATRIX), name="epyc", gpu="RTX 4090", nic_speed_gbps=100)
    assert ("check: 8 NUMA nodes taken as 8 sockets; an AMD EPYC host in NPS2 or NPS4 mode (or a VM) shows several "
            "NUMA nodes a socket: --sockets 2 (or 1) folds them") in notes
    _, given = import_system(parse_topo_matrix(EPYC_NPS4_MATRIX), name="epyc", gpu="RTX 4090", nic_speed_gbps=100,
                             sockets=2, intersocket="xgmi_amd")
    assert not any("NUMA nodes taken as" in note for note in given)
    _, two = import_system(_matrix("hgx_h100.txt"), name="hgx", gpu="H100", nic_speed_gbps=400)
    assert not any("NUMA nodes taken as" in note for note in two)


def test_the_command_writes_a_system_file_that_loads(tmp_path, capsys):
    out = tmp_path / "h100.toml"
    assert flowsim_main(["system", "import", str(TOPO / "hgx_h100.txt"), "-o", str(out), "--gpu", "H100",
                         "--nic-speed", "400", "--nodes", "2"]) == 0
    assert "8 x H100 (nvswitch), 8 compute NIC(s), 2 socket(s)" in capsys.readouterr().out
    system = load_system(out)
    assert (system.name, system.cluster, system.spec.n_nics) == ("h100", {"n_nodes": 2}, 8)
    text = out.read_text()
    assert text.startswith("# Imported by 'flowsim system import' from ")
    assert "[guess: give --intersocket]" in text


def test_an_empty_name_is_refused(tmp_path, capsys):
    # --name "" used to fall back to the output file's stem without a word.
    out = tmp_path / "h100.toml"
    assert flowsim_main(["system", "import", str(TOPO / "hgx_h100.txt"), "-o", str(out), "--gpu", "H100",
                         "--nic-speed", "400", "--name", " "]) == 2
    assert capsys.readouterr().err == ("flowsim: error: --name: empty; give the system a name, or leave --name out "
                                       "for the output file's stem\n")
    assert not out.exists()


def test_the_command_reads_the_matrix_from_standard_input(tmp_path, capsys, monkeypatch):
    argv = ["-o", str(tmp_path / "h100.toml"), "--gpu", "H100", "--nic-speed", "400"]
    assert flowsim_main(["system", "import", str(TOPO / "hgx_h100.txt"), *argv]) == 0
    from_file = (tmp_path / "h100.toml").read_text()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((TOPO / "hgx_h100.txt").read_bytes())))
    assert flowsim_main(["system", "import", "-", *argv]) == 0
    assert "8 x H100 (nvswitch), 8 compute NIC(s)" in capsys.readouterr().out
    from_stdin = (tmp_path / "h100.toml").read_text()
    assert from_stdin.startswith("# Imported by 'flowsim system import' from <stdin>:\n")
    assert from_stdin.split("\n", 1)[1] == from_file.split("\n", 1)[1]


def test_a_matrix_saved_by_powershell_as_utf_16_is_read(tmp_path, capsys, monkeypatch):
    # Windows PowerShell 5's '>' writes UTF-16 with a byte order mark and CRLF line ends.
    argv = ["-o", str(tmp_path / "h100.toml"), "--gpu", "H100", "--nic-speed", "400"]
    assert flowsim_main(["system", "import", str(TOPO / "hgx_h100.txt"), *argv]) == 0
    expected = (tmp_path / "h100.toml").read_text().split("\n", 1)[1]
    saved = tmp_path / "topo.txt"
    saved.write_bytes((TOPO / "hgx_h100.txt").read_text().replace("\n", "\r\n").encode("utf-16"))
    assert saved.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    assert flowsim_main(["system", "import", str(saved), *argv]) == 0
    assert (tmp_path / "h100.toml").read_text().split("\n", 1)[1] == expected
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(saved.read_bytes())))
    assert flowsim_main(["system", "import", "-", *argv]) == 0
    assert (tmp_path / "h100.toml").read_text().split("\n", 1)[1] == expected
    capsys.readouterr()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], "the matrix shows 8 compute NIC(s): give their speed (Gb/s)"),
        (["--nic-speed", "300"], "NIC speed 300 Gb/s: ib ports run at one of 100, 200, 400, 800"),
    ],
)
def test_the_command_asks_for_what_the_matrix_cannot_say(tmp_path, capsys, options, message):
    out = tmp_path / "h100.toml"
    assert flowsim_main(["system", "import", str(TOPO / "hgx_h100.txt"), "-o", str(out), "--gpu", "H100",
                         *options]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_the_command_writes_only_a_toml_file(tmp_path, capsys):
    # -o hgx.txt wrote a file that --system then refused as an unknown system.
    out = tmp_path / "hgx.txt"
    assert flowsim_main(["system", "import", str(TOPO / "hgx_h100.txt"), "-o", str(out), "--gpu", "H100",
                         "--nic-speed", "400"]) == 2
    assert capsys.readouterr().err == (f"flowsim: error: -o {out}: a system file's name ends in .toml (--system and "
                                       "scenarios take it so); give one that does\n")
    assert not out.exists()


def test_the_command_refuses_to_write_over_its_matrix(tmp_path, capsys):
    matrix = tmp_path / "topo.toml"  # a matrix kept under a system file's name
    text = (TOPO / "hgx_h100.txt").read_text()
    matrix.write_text(text)
    assert flowsim_main(["system", "import", str(matrix), "-o", str(matrix), "--gpu", "H100",
                         "--nic-speed", "400"]) == 2
    assert f"{matrix}: the system file would replace the input file {matrix}" in capsys.readouterr().err
    assert matrix.read_text() == text


def test_a_matrix_that_makes_no_server_is_named():
    # NVLink counts past what a GPU has: the server's own check, said of the file it came from.
    text = "\tGPU0\tGPU1\nGPU0\t X \tNV99\nGPU1\tNV99\t X\n"
    with pytest.raises(InputError, match=re.escape("t.txt: 99 NVLinks per GPU: a H100")):
        import_system(parse_topo_matrix(text, source="t.txt"), name="x", gpu="H100", pcie=5)


def test_unknown_gpus_with_nvlinks_need_their_generation():
    with pytest.raises(InputError, match="the matrix shows NVLinks but flowsim knows no NVLink generation of the Mystery GPU"):
        import_system(_matrix("dgx1_v100.txt"), name="x", gpu="Mystery GPU", pcie=3, nic_speed_gbps=100)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\n", "t.txt: no 'GPU0 GPU1 ...' header line"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tQPI\t X\n", "t.txt: line 3: GPU1 to GPU0 is 'QPI'; expected X, NV#"),
        # A device's own cell is X, and only its own (NV18 there was taken as it came).
        ("\tGPU0\tGPU1\nGPU0\tNV4\tNV4\nGPU1\tNV4\t X\n", "t.txt: line 2: GPU0 to GPU0 is 'NV4'; a device to itself is X"),
        ("\tGPU0\tGPU1\nGPU0\t X \t X\nGPU1\tNV4\t X\n", "t.txt: line 2: GPU0 to GPU1 is 'X'; X is a device to itself"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "t.txt: no row for GPU1"),
        ("\tGPU0\tGPU1\nGPU0\t X\n", "t.txt: line 2: GPU0 has 1 cells for 2 devices"),
    ],
)
def test_bad_matrices_name_the_file_and_line(text, message):
    with pytest.raises(InputError, match=re.escape(message)):
        parse_topo_matrix(text, source="t.txt")


# Two GPUs of a B300 server as a recent driver prints them (sglang issue 26039's output, cut
# down): the header underlined with ESC [4m ... ESC [0m even when piped.
B300_UNDERLINED = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tPXB\tNODE\t0-63,128-191\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNODE\tPXB\t0-63,128-191\t0\t\tN/A\n"
    "NIC0\tPXB\tNODE\t X \tNODE\nNIC1\tNODE\tPXB\tNODE\t X \n"
)


@pytest.mark.parametrize("escape", ["\x1b", "", "^["],
                         ids=["as printed", "pasted without the escape byte", "shown by cat -v"])
def test_an_underlined_header_is_read(escape):
    # Refused as "no 'GPU0 GPU1 ...' header line" until 2026-12-07.
    m = parse_topo_matrix(B300_UNDERLINED.replace("\x1b", escape), source="t.txt")
    assert m.devices == ("GPU0", "GPU1", "NIC0", "NIC1")
    assert m.affinity == {"GPU0": "0", "GPU1": "0"} and m.between("GPU1", "NIC1") == "PXB"


# Four GPUs and a ConnectX-3 as a driver of 2016 prints them (a TensorFlow GPUDirect note's
# output): SOC where drivers now print SYS, which their legend describes the same way.
OLD_DRIVER_SOC = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tmlx4_0\tCPU Affinity
GPU0\t X \tPHB\tSOC\tSOC\tSOC\t0-5
GPU1\tPHB\t X \tSOC\tSOC\tSOC\t0-5
GPU2\tSOC\tSOC\t X \tPHB\tPHB\t6-11
GPU3\tSOC\tSOC\tPHB\t X \tPHB\t6-11
mlx4_0\tSOC\tSOC\tPHB\tPHB\t X
"""


def test_an_old_drivers_soc_is_sys():
    # Refused as "GPU0 to GPU2 is 'SOC'; expected X, NV#, ..." until 2026-12-07.
    m = parse_topo_matrix(OLD_DRIVER_SOC, source="t.txt")
    assert m.between("GPU0", "GPU2") == "SYS" and m.between("GPU0", "mlx4_0") == "SYS"
    spec, _ = import_system(m, name="old", gpu="M40", pcie=3, nic_speed_gbps=100)
    assert spec.sockets == 2 and [(s.gpus, s.socket) for s in spec.switches if s.gpus] == [((0,), 0), ((1,), 0),
                                                                                            ((2,), 1), ((3,), 1)]


# Four RTX 5060 Ti under one CPU, with 'nvidia-smi topo -p2p rw' pasted after the matrix (a
# bug report's output, cut down).
MATRIX_THEN_P2P = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tPHB\tPHB\tPHB\t0-7\t0\t\tN/A
GPU1\tPHB\t X \tPHB\tPHB\t0-7\t0\t\tN/A
GPU2\tPHB\tPHB\t X \tPHB\t0-7\t0\t\tN/A
GPU3\tPHB\tPHB\tPHB\t X \t0-7\t0\t\tN/A


$ nvidia-smi topo -p2p rw
 \tGPU0\tGPU1\tGPU2\tGPU3\t
 GPU0\tX\tOK\tOK\tOK\t
 GPU1\tOK\tX\tOK\tOK\t
 GPU2\tOK\tOK\tX\tOK\t
 GPU3\tOK\tOK\tOK\tX\t
"""


@pytest.mark.parametrize("between", ["\n\n$ nvidia-smi topo -p2p rw\n", "\n", "\nLegend:\n\n  X    = Self\n"])
def test_what_follows_the_matrix_is_not_read(between):
    # The second table was read as rows of the matrix until 2026-12-07 ("GPU0 has 3 cells").
    text = MATRIX_THEN_P2P.replace("\n\n\n$ nvidia-smi topo -p2p rw\n", between)
    m = parse_topo_matrix(text, source="t.txt")
    assert m.devices == ("GPU0", "GPU1", "GPU2", "GPU3") and m.between("GPU0", "GPU3") == "PHB"
    assert m.affinity == dict.fromkeys(m.devices, "0")


# Four A100 with NVLink and three NICs on the first CPU, as an HPC centre's notes show them
# (cut down): GPU2 and GPU3 have no CPU Affinity, an empty cell.
EMPTY_CPU_AFFINITY = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV4\tNV4\tNV4\tNODE\t0\t0\t\tN/A
GPU1\tNV4\t X \tNV4\tNV4\tNODE\t0\t0\t\tN/A
GPU2\tNV4\tNV4\t X \tNV4\tNODE\t\t1\t\tN/A
GPU3\tNV4\tNV4\tNV4\t X \tNODE\t\t1\t\tN/A
NIC0\tNODE\tNODE\tNODE\tNODE\t X
"""


@pytest.mark.parametrize("spaces", [False, True], ids=["tabs", "tabs pasted as spaces"])
def test_an_empty_cpu_affinity_keeps_the_columns(spaces):
    # GPU2 and GPU3 took the GPU NUMA ID column's "N/A" as their NUMA node until 2026-12-07.
    text = "\n".join(line.expandtabs(8) for line in EMPTY_CPU_AFFINITY.splitlines()) if spaces else EMPTY_CPU_AFFINITY
    m = parse_topo_matrix(text, source="t.txt")
    assert m.affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    spec, _ = import_system(m, name="x", gpu="A100", nic_speed_gbps=200, intersocket="upi_skylake")
    assert [s.socket for s in spec.switches if s.gpus] == [0, 0, 1, 1]


@pytest.mark.parametrize("gpu", ["B300", "NVIDIA B300 SXM6 AC", "GB300"])
def test_blackwell_ultra_is_pcie_gen6_as_a_guess(gpu):
    # Gen5, stated as the GPU's host interface, until 2026-12-07, where the shipped B300 systems
    # take Gen6 (docs/hardware.md sources it for their ConnectX-8 NICs only, so it is a guess).
    spec, notes = import_system(parse_topo_matrix(B300_UNDERLINED), name="x", gpu=gpu, nic_speed_gbps=800)
    assert spec.pcie == "pcie6"
    assert f"PCIe Gen6: the {gpu}'s host interface [guess: give --pcie]" in notes
    _, notes = import_system(parse_topo_matrix(B300_UNDERLINED), name="x", gpu="B200", nic_speed_gbps=400)
    assert "PCIe Gen5: the B200's host interface" in notes  # the DGX B200's, docs/hardware.md §3.2


# Two RTX A6000 joined by an NVLink bridge (NV4), as a user's notes show them (cut down).
A6000_PAIR = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-31\nGPU1\tNV4\t X \t0-31\n"


@pytest.mark.parametrize(("gpu", "known"), [("A6000", True), ("NVIDIA RTX A6000", True), ("RTX A4000", False),
                                            ("NVIDIA RTX A4000", False), ("NVIDIA A40", True)])
def test_gpu_models_are_matched_whole(gpu, known):
    # "RTX A4000" was an A40 (NVLink 3 of GA102) by a piece of its name, and "A6000" without
    # "RTX" unknown, until 2026-12-07.
    m = parse_topo_matrix(A6000_PAIR)
    if known:
        spec, _ = import_system(m, name="x", gpu=gpu)
        assert (spec.pcie, spec.nvlink) == ("pcie4", "nvlink3_ga102")
    else:
        with pytest.raises(InputError, match=re.escape(f"unknown GPU model {gpu!r} (known: P100, V100, ")):
            import_system(m, name="x", gpu=gpu)


def test_an_unknown_gpu_is_asked_for_the_options_it_needs():
    with pytest.raises(InputError, match=re.escape("give its PCIe generation, --pcie N (3, 4, 5, 6)")):
        import_system(parse_topo_matrix(A6000_PAIR), name="x", gpu="RTX A4000")
    with pytest.raises(InputError, match=re.escape(
            "flowsim knows no NVLink generation of the RTX A4000: give it, --nvlink GEN (nvlink1, nvlink2, nvlink3, "
            "nvlink3_ga102, nvlink4, nvlink5)")):
        import_system(parse_topo_matrix(A6000_PAIR), name="x", gpu="RTX A4000", pcie=4)
    spec, _ = import_system(parse_topo_matrix(A6000_PAIR), name="x", gpu="RTX A4000", pcie=4, nvlink="nvlink3_ga102")
    assert spec.nvlink_counts == ((0, 4), (4, 0))


# ALCF Polaris as its documentation shows the node (4 A100 on NV4, an EPYC in NPS4, the header
# without its leading tab): mlx5_0 behind GPU3's host bridge, mlx5_1 behind GPU1's, GPU0 and
# GPU2 at SYS from both.
POLARIS = """\
GPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tmlx5_1 CPU Affinity NUMA Affinity
GPU0\t X \tNV4\tNV4\tNV4\tSYS\tSYS\t24-31,56-63\t3
GPU1\tNV4\t X \tNV4\tNV4\tSYS\tPHB\t16-23,48-55\t2
GPU2\tNV4\tNV4\t X \tNV4\tSYS\tSYS\t8-15,40-47\t1
GPU3\tNV4\tNV4\tNV4\t X \tPHB\tSYS\t0-7,32-39\t0
mlx5_0\tSYS\tSYS\tSYS\tPHB\t X \tSYS
mlx5_1\tSYS\tPHB\tSYS\tSYS\tSYS\t X
"""


def test_gpus_with_a_choice_of_nic_are_spread_over_the_nics():
    # GPU0 and GPU2 both took mlx5_0 until 2026-12-07: it served three GPUs, mlx5_1 one, and two
    # servers ran at one NIC's rate (23.99 GB/s busbw); each now serves two, as NCCL's channels
    # spread those GPUs over both, with the GPU nearest in number.
    spec, notes = import_system(parse_topo_matrix(POLARIS), name="polaris", gpu="A100", nic_speed_gbps=200, sockets=1)
    assert spec.gpu_nics == (0, 0, 1, 1)
    assert "compute NICs (each GPU's nearest): nic0 = mlx5_1, nic1 = mlx5_0" in notes
    topology = build_cluster(spec, 2, figure="effective")
    busbw = 2 * 7 / 8 * SIZE / flowsim.collective_time(topology, "all_reduce", SIZE, algorithm="ring").time_s
    assert busbw == pytest.approx(47.96e9, rel=1e-3)  # two NICs of 24 GB/s


# An OCI BM.GPU4.8 as a user's output shows it (8 A100 on NVSwitch, EPYC NUMA nodes 1/3/5/7):
# each GPU pair PXB to four 100 Gb/s RoCE ports (two dual-port cards, PIX within a card), and two
# NICs at SYS from every GPU. Generated here in its shape, the NIC legend left out.
OCI_GPU4_8 = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\t" + "\t".join(f"NIC{k}" for k in range(18)) + (
    "\tCPU Affinity\tNUMA Affinity\n") + "".join(
    f"GPU{i}\t" + "\t".join(" X " if j == i else "NV12" for j in range(8)) + "\t"
    + "\t".join("PXB" if 1 + 4 * (i // 2) <= k <= 4 + 4 * (i // 2) else "SYS" for k in range(18) if k not in (0, 17))
    .join(("SYS\t", "\tSYS")) + f"\t{numa * 16}-{numa * 16 + 15}\t{numa}\n"
    for i, numa in enumerate((1, 1, 3, 3, 5, 5, 7, 7))
)


def test_nics_equally_near_the_same_gpus_serve_them_together():
    # Until 2026-12-07 each GPU took one of its pair's four ports and the other eight were
    # "front-end ports (nearest to no GPU)": half the compute network (148 GB/s on 2 servers).
    # Each GPU now has two ports of 100 Gb/s, one NIC of 200 Gb/s with ports = 2, as the shipped
    # oci_bm_gpu4_8 system describes the shape (NCCL gives each GPU two of its pair's four).
    spec, notes = import_system(parse_topo_matrix(OCI_GPU4_8), name="oci", gpu="A100", nic_speed_gbps=100,
                                nic_kind="roce", sockets=2, intersocket="xgmi_amd")
    assert (spec.n_nics, spec.nic_ports, spec.compute_nic, spec.gpu_nics) == (8, 2, "eth200g", tuple(range(8)))
    assert spec.frontend_ports == 2 and "front-end ports (nearest to no GPU): NIC0, NIC17" in notes
    assert any(note.startswith("compute NICs (each GPU's nearest): nic0 = NIC1 + NIC2, nic1 = NIC3 + NIC4,")
               for note in notes)

    def two_servers(system) -> float:
        topology = build_cluster(system, 2, figure="effective")
        return flowsim.collective_time(topology, "all_reduce", SIZE, algorithm="ring").time_s

    shipped, _, _ = resolve_system("oci-bm-gpu4-8")
    assert (shipped.n_nics, shipped.nic_ports, shipped.compute_nic) == (8, 2, "eth200g")
    assert two_servers(spec) == pytest.approx(two_servers(shipped), rel=1e-6)


def test_nics_past_what_flowsim_gives_a_gpu_are_said_and_not_taken_for_front_end_ports():
    # Three NICs behind the host bridge of two GPUs: one NIC each, the third not modelled (it was
    # called a front-end port, nearest to no GPU, until 2026-12-07).
    text = ("\tGPU0\tGPU1\tNIC0\tNIC1\tNIC2\nGPU0\t X \tPHB\tPHB\tPHB\tPHB\nGPU1\tPHB\t X \tPHB\tPHB\tPHB\n"
            "NIC0\tPHB\tPHB\t X \tPIX\tPHB\nNIC1\tPHB\tPHB\tPIX\t X \tPHB\nNIC2\tPHB\tPHB\tPHB\tPHB\t X \n")
    spec, notes = import_system(parse_topo_matrix(text), name="x", gpu="L40S", nic_speed_gbps=100, nic_kind="roce")
    assert (spec.n_nics, spec.nic_ports, spec.gpu_nics, spec.frontend_ports) == (2, 1, (0, 1), 0)
    assert any(note.startswith("not modelled: NIC2, as near to GPUs as the NICs above") for note in notes)
    with pytest.raises(InputError, match=re.escape(
            "each GPU has 2 NICs of 800 Gb/s equally near, one NIC of 1600 Gb/s in flowsim, where a roce NIC runs")):
        import_system(parse_topo_matrix(OCI_GPU4_8), name="oci", gpu="A100", nic_speed_gbps=800, nic_kind="roce")


# Eight P40 under two PCIe switches and a ConnectX-4 as an old driver prints them (a PaddlePaddle
# design note, cut down to four GPUs): the NIC at SOC (SYS) from every GPU, every GPU's CPU
# Affinity the same, so the matrix puts the NIC on another socket that the affinities do not name.
P40_NIC_ACROSS = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tCPU Affinity
GPU0\t X \tPIX\tPXB\tPXB\tSOC\t0-13
GPU1\tPIX\t X \tPXB\tPXB\tSOC\t0-13
GPU2\tPXB\tPXB\t X \tPIX\tSOC\t0-13
GPU3\tPXB\tPXB\tPIX\t X \tSOC\t0-13
mlx5_0\tSOC\tSOC\tSOC\tSOC\t X
"""


def test_sys_where_the_affinities_name_one_node_is_said(tmp_path, capsys):
    # Written as one socket without a word until 2026-12-07.
    (tmp_path / "topo.txt").write_text(P40_NIC_ACROSS)
    out = tmp_path / "p40.toml"
    assert flowsim_main(["system", "import", str(tmp_path / "topo.txt"), "-o", str(out), "--gpu", "Tesla P40",
                         "--pcie", "3", "--nic-speed", "100"]) == 0
    said = ("check: the matrix shows SYS (a path between CPU sockets) from GPU0 to mlx5_0, but every GPU's affinity "
            "is the same (0-13): written as 1 socket")
    assert f"flowsim: {said}" in capsys.readouterr().err
    assert f"#   {said}" in out.read_text()
    # Given the sockets, or with SYS nowhere, there is nothing to say.
    _, notes = import_system(parse_topo_matrix(P40_NIC_ACROSS), name="x", gpu="P40", pcie=3, nic_speed_gbps=100,
                             sockets=1)
    assert not any(note.startswith("check:") for note in notes)
    _, notes = import_system(_matrix("rtx4090_8x.txt"), name="x", gpu="RTX 4090", nic_speed_gbps=200)
    assert not any(note.startswith("check:") for note in notes)


def test_more_sockets_than_the_matrix_names_are_refused():
    # --sockets folds NUMA nodes; more sockets than the GPUs name would leave sockets without
    # a GPU, every GPU on the first (a VM's matrix, one affinity for all).
    with pytest.raises(InputError, match=re.escape("sockets 2: the GPUs' affinities name 1 NUMA node(s) (0-13), "
                                                   "which sockets fold together, at most 1")):
        import_system(parse_topo_matrix(P40_NIC_ACROSS, source="t.txt"), name="x", gpu="P40", pcie=3,
                      nic_speed_gbps=100, sockets=2)


# Six GPUs of a B200 server whose GPU2 had its NVLinks down (vllm-project/vllm#16336 showed all
# eight: GPU2 NODE or SYS to every GPU, every other pair NV18).
B200_GPU2_DOWN = """	GPU0	GPU1	GPU2	GPU3	GPU4	GPU5	CPU Affinity	NUMA Affinity
GPU0	 X 	NV18	NODE	NV18	NV18	NV18	0-55,112-167	0
GPU1	NV18	 X 	NODE	NV18	NV18	NV18	0-55,112-167	0
GPU2	NODE	NODE	 X 	NODE	SYS	SYS	0-55,112-167	0
GPU3	NV18	NV18	NODE	 X 	NV18	NV18	0-55,112-167	0
GPU4	NV18	NV18	SYS	NV18	 X 	NV18	56-111,168-223	1
GPU5	NV18	NV18	SYS	NV18	NV18	 X 	56-111,168-223	1
"""


def test_an_nvswitch_server_with_a_gpu_off_nvlink_is_said_so():
    # Read as a mesh until 2026-12-07, it was refused for 72 NVLinks a GPU, as if the matrix were wrong.
    with pytest.raises(InputError, match=re.escape(
            "t.txt: every other GPU pair is NV18, as on an NVSwitch server, but GPU2 shows no NVLink to any GPU: "
            "its NVLinks are down")):
        import_system(parse_topo_matrix(B200_GPU2_DOWN, source="t.txt"), name="x", gpu="B200")


def test_bridged_pairs_with_a_card_unbridged_are_still_a_mesh():
    # Pairs of PCIe cards joined by NVLink bridges (NV12), GPUs 4 and 5 without one: a mesh, as
    # before the NVSwitch diagnosis above, which took them for GPUs off an NVSwitch.
    rows = ["\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5"]
    for i in range(6):
        cells = [" X " if j == i else "NV12" if i // 2 == j // 2 and i < 4 else "SYS" for j in range(6)]
        rows.append(f"GPU{i}\t" + "\t".join(cells))
    spec, _ = import_system(parse_topo_matrix("\n".join(rows) + "\n"), name="x", gpu="A100")
    assert spec.gpu_fabric == "nvlink_mesh" and spec.nvlink_counts[4] == (0,) * 6


def test_roce_nics_of_10_gbps_are_imported_as_a_system_file_takes_them():
    spec, _ = import_system(parse_topo_matrix(P40_NIC_ACROSS), name="x", gpu="P40", pcie=3, nic_speed_gbps=10,
                            nic_kind="roce")
    assert spec.compute_nic == "eth10g"
    with pytest.raises(InputError, match=re.escape("NIC speed 10 Gb/s: ib ports run at one of 100, 200, 400, 800")):
        import_system(parse_topo_matrix(P40_NIC_ACROSS), name="x", gpu="P40", pcie=3, nic_speed_gbps=10)


def test_a_pcie_cards_generation_is_a_guess_and_a_grace_tray_points_to_its_rack():
    _, notes = import_system(_matrix("rtx4090_8x.txt"), name="x", gpu="RTX 4090", nic_speed_gbps=200)
    assert "PCIe Gen4: the RTX 4090's host interface [guess: a slot of an older generation runs it at that one's " \
           "rate; give --pcie]" in notes
    _, notes = import_system(_matrix("hgx_h100.txt"), name="x", gpu="H100", nic_speed_gbps=400)
    assert "PCIe Gen5: the H100's host interface" in notes
    tray = "\tGPU0\tGPU1\tGPU2\tGPU3\n" + "".join(
        f"GPU{i}\t" + "\t".join(" X " if j == i else "NV18" for j in range(4)) + "\n" for i in range(4))
    _, notes = import_system(parse_topo_matrix(tray), name="x", gpu="GB200")
    assert any(note.startswith("check: one GB200 compute tray of 4 GPUs, on its own") and
               note.endswith("or run --system gb200-nvl72") for note in notes)


def test_a_host_with_more_cpus_than_the_guessed_one_gets_a_check():
    # Four L40S of a host listing 96 cores a socket (a real matrix's affinities, 0-95,192-287):
    # PCIe Gen4 guesses a Skylake UPI, which such a socket is not.
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n" \
           "GPU0\t X \tSYS\t0-95,192-287\t0\nGPU1\tSYS\t X \t96-191,288-383\t1\n"
    _, notes = import_system(parse_topo_matrix(text), name="x", gpu="L40S")
    assert "inter-socket link upi_skylake [guess: give --intersocket]" in notes
    assert any(note.startswith("check: a GPU's CPU affinity lists 192 CPUs, more than a Xeon socket of Skylake to "
                               "Ice Lake has (80)") for note in notes)
    # Given the link, or on a host that fits the guess (nccl-tests#307's 36-core Xeons), none.
    _, notes = import_system(parse_topo_matrix(text), name="x", gpu="L40S", intersocket="upi_sapphire_rapids")
    assert not any(note.startswith("check:") for note in notes)
    _, notes = import_system(_matrix("rtx4090_8x.txt"), name="x", gpu="RTX 4090", nic_speed_gbps=200)
    assert not any(note.startswith("check:") for note in notes)
    assert "2 socket(s): one per NUMA node the GPUs name" in notes
    # Without a NUMA Affinity column the sockets are the GPUs' CPU lists, and the note says so.
    _, notes = import_system(parse_topo_matrix(text.replace("\tNUMA Affinity", "").replace("\t0\n", "\n")
                                               .replace("\t1\n", "\n")), name="x", gpu="L40S")
    assert "2 socket(s): one per CPU list the GPUs name" in notes
