"""``flowsim collective``: nccl-tests-like rows on the terminal and as JSON."""

import argparse
import io
import json
import re
import sys
from pathlib import Path

import pytest

from flowsim.cli import main as flowsim
from flowsim.collectives import collective_time
from flowsim.commands.collective import add_parser, run_collective
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.systemfile import resolve_system


def test_registers_collective_with_its_handler():
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["collective", "all_reduce", "--system", "dgx-h100"])
    assert args.func is run_collective
    # No --nodes: the system file's [cluster] nodes, else one server (run_collective decides).
    # No -f: a factor of 2, or 1 where -i is given (run_collective decides).
    assert (args.nodes, args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes) == (None, "32M", "32M", None,
                                                                                          None)
    assert (args.datatype, args.op) == ("float", "sum")


def _rows(out):
    return [line.split() for line in out.splitlines() if not line.startswith("#")]


def test_an_nccl_tests_command_line_runs_as_it_is(capsys):
    # all_reduce_perf's options, timing ones included (-n -w -c -t -z -a), with a fixed increment (-i).
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "-b", "1M", "-e", "4M", "-i", "1M", "-t", "1", "-g", "1",
            "-n", "20", "-w", "5", "-c", "1", "-z", "0", "-a", "1", "-N", "1"]
    assert flowsim(argv) == 0
    rows = _rows(capsys.readouterr().out)
    assert [int(r[0]) for r in rows] == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    # -f 2 with -i: the factor, as nccl-tests (a factor above 1 wins).
    assert flowsim([*argv, "-f", "2"]) == 0
    assert [int(r[0]) for r in _rows(capsys.readouterr().out)] == [1 << 20, 2 << 20, 4 << 20]


def test_the_type_and_reduction_decide_whether_nvls_runs(capsys):
    # One DGX H100 at 64 MiB: NVLS for a float sum; NCCL's NVLS has no int8 and no average.
    base = ["collective", "all_reduce", "--system", "dgx-h100", "-b", "64M", "-e", "64M"]
    ran = {}
    for extra in ([], ["-d", "int8"], ["-o", "avg"], ["-d", "half", "-o", "max"], ["-d", "bfloat16", "-o", "prod"]):
        assert flowsim([*base, *extra]) == 0
        (row,) = _rows(capsys.readouterr().out)
        ran[row[2], row[3]] = row[5]
    assert ran == {("float", "sum"): "nvls", ("int8", "sum"): "ring", ("float", "avg"): "ring",
                   ("half", "max"): "nvls", ("bfloat16", "prod"): "ring"}
    assert flowsim([*base, "-d", "int8", "--algorithm", "nvls"]) == 2
    assert "NCCL runs no nvls all_reduce here: the NVSwitch has no reduction for sum on int8" in capsys.readouterr().err


def test_every_type_and_reduction_in_turn_as_nccl_tests(capsys):
    # -d all -o all: a block of sizes per type, and per reduction where the binary loops over them
    # (all_reduce_perf does, all_gather_perf does not); FP8 on Hopper from NCCL 2.24.
    assert flowsim(["collective", "all_reduce", "--system", "dgx-h100", "-b", "1K", "-e", "2K", "-d", "all", "-o",
                    "all"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert len(rows) == 12 * 6 * 2
    assert [(r[0], r[2], r[3]) for r in rows[:4]] == [("1024", "int8", "sum"), ("2048", "int8", "sum"),
                                                      ("1024", "int8", "prod"), ("2048", "int8", "prod")]
    assert rows[-1][2:4] == ["f8e5m2", "mulsum"]
    assert flowsim(["collective", "all_gather", "--system", "dgx-h100", "-b", "1K", "-e", "1K", "-d", "all", "-o",
                    "all", "--nccl-version", "2.19.3"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert [r[2] for r in rows] == ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
                                    "bfloat16"]
    assert {r[3] for r in rows} == {"none"}


@pytest.mark.parametrize(("given", "algorithm", "protocol"), [
    (["--algorithm", "Ring", "--protocol", "LL128"], "ring", "ll128"),  # NCCL_ALGO / NCCL_PROTO spellings
    (["--algorithm", "NVLSTree", "--protocol", "Simple"], "nvls_tree", "simple"),
    (["--algorithm", "nvls-tree"], "nvls_tree", "auto"),
])
def test_algorithm_and_protocol_as_nccl_spells_them(given, algorithm, protocol):
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["collective", "all_reduce", "--system", "dgx-h100", *given])
    assert (args.algorithm, args.protocol) == (algorithm, protocol)


def test_prints_one_row_per_size(capsys):
    assert (
        flowsim(["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "8", "-e", "1M", "-f", "4",
                 "--algorithm", "ring", "--protocol", "simple"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# flowsim all_reduce: 2 x dgx_h100, 16 ranks")
    assert lines[-3] == "# Ran                  : ring (steps)"
    # A ring on 2 servers: every size solved by classes.
    assert lines[-2].startswith("# Solved over          : flow classes at 9 of 9 sizes (")
    rows = [line.split() for line in lines if not line.startswith("#")]
    assert [int(r[0]) for r in rows] == [8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288]
    assert [int(r[1]) for r in rows] == [s // 4 for s in (8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288)]
    assert all(r[2:7] == ["float", "sum", "-1", "ring", "simple"] for r in rows)
    # NCCL's channels: fewer for small sizes, up to the communicator's 16.
    channels = [int(r[7]) for r in rows]
    assert channels == sorted(channels) and channels[0] == 1 and channels[-1] == 16
    busbw = [float(r[10]) for r in rows]
    assert busbw == sorted(busbw) and busbw[-1] > busbw[0]
    assert lines[-1].startswith("# Avg bus bandwidth")


def test_json_rows(capsys):
    argv = ["collective", "all_to_all", "--system", "dgx_a100", "-b", "1K", "-e", "4K", "--json"]
    assert flowsim(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["collective"], out["system"], out["ranks"], out["algorithm"]) == ("all_to_all", "dgx_a100", 8, "p2p")
    assert [r["size_bytes"] for r in out["rows"]] == [1024, 2048, 4096]
    assert set(out["rows"][0]) == {
        "size_bytes",
        "count",
        "dtype",
        "redop",
        "root",
        "time_us",
        "algbw_GBps",
        "busbw_GBps",
        "algorithm",
        "protocol",
        "channels",
        "model",
        "latency_us",
        "launch_bound",
        "flows",
        "flow_classes",
        "busiest_link",
        "busiest_tier",
        "busiest_utilization",
        "nccl_model_us",
    }
    row = out["rows"][-1]
    assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 7 / 8)
    assert row["busiest_tier"] == "NVLink" and 0 < row["busiest_utilization"] < 1


def test_rows_name_the_busiest_link(capsys):
    # A ring across two DGX H100 at 4 GiB moves each GPU's network share at the NICs' rate:
    # their links are busy most of the call (busbw 364 of a ring's 384 over 8 x 48 GB/s).
    # At 1 MiB latency dominates: no link is busy a tenth of the time.
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1M", "-e", "4G", "-f", "4096",
            "--algorithm", "ring", "--protocol", "simple", "--json"]
    assert flowsim(argv) == 0
    small, large = json.loads(capsys.readouterr().out)["rows"]
    assert large["busiest_tier"] == "InfiniBand" and large["busiest_link"].startswith("n")
    assert large["busiest_utilization"] == pytest.approx(large["busbw_GBps"] / 384, rel=0.01)
    assert small["busiest_utilization"] < 0.1
    argv.remove("--json")
    assert flowsim(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].rstrip().endswith("busiest link") and lines[2].rstrip().endswith("(use)")
    assert lines[4].split()[-2:] == ["InfiniBand", f"{int(100 * large['busiest_utilization'])}%"]


def test_options_reach_the_model(capsys):
    argv = [
        "collective",
        "broadcast",
        "--system",
        "dgx_b200",
        "-b",
        "64M",
        "-e",
        "64M",
        "--protocol",
        "auto",
        "--slices",
        "4",
        "-d",
        "half",
    ]
    assert flowsim(argv) == 0
    (row,) = [line.split() for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert row[1:5] == [str(2**26 // 2), "half", "none", "0"]


def test_model_is_chosen_and_shown_below_the_rows(capsys):
    argv = ["collective", "all_reduce", "--system", "dgx_h100", "--nodes", "2", "-b", "1G", "-e", "1G", "--algorithm",
            "ring"]
    assert flowsim([*argv, "--model", "stream"]) == 0
    title, *_, row, ran, _, _ = capsys.readouterr().out.splitlines()
    assert title.startswith("# flowsim all_reduce: 2 x dgx_h100, 16 ranks")
    assert ran == "# Ran                  : ring (stream)"
    assert flowsim(argv) == 0
    title, *_, steps_row, ran, _, _ = capsys.readouterr().out.splitlines()
    assert ran == "# Ran                  : ring (steps)"
    # At 1 GiB the stream's bandwidth term dominates; it agrees with the step DAG.
    assert float(row.split()[10]) == pytest.approx(float(steps_row.split()[10]), rel=0.02)


def test_time_windows_are_asked_for_and_named_below_the_rows(capsys):
    argv = ["collective", "all_reduce", "--system", "dgx_h100", "--nodes", "2", "-b", "64M", "-e", "64M",
            "--nccl-env", "NCCL_ALGO=Ring"]
    assert flowsim(argv) == 0
    exact = capsys.readouterr().out
    assert "# Time windows" not in exact
    assert flowsim([*argv, "--time-rel-tol", "1e-3"]) == 0
    coarse = capsys.readouterr().out
    (window,) = [line for line in coarse.splitlines() if line.startswith("# Time windows")]
    assert window == ('# Time windows         : events within a relative 0.001 of each other taken as one instant: '
                      'the times are not exact (docs/model.md "Time")')
    times = [float(next(line for line in out.splitlines() if not line.startswith("#")).split()[8])
             for out in (exact, coarse)]
    assert times[1] == pytest.approx(times[0], rel=1e-2)


def test_time_windows_reach_the_engine():
    # 8 DGX H100 on a fat-tree of 40-port switches, all-to-all on hashed spine paths: the
    # flows finish one by one (515 rate updates); windows of 1% re-solve a few times.
    topology = build_cluster("dgx_h100", 8, figure="nominal", fabric="fat_tree", switch="qm8700")
    exact, coarse = (collective_time(topology, "all_to_all", 4 << 20, routing="ecmp", time_rel_tol=tol)
                     for tol in (1e-12, 1e-2))
    assert exact.run.result.n_rate_updates > 100 * coarse.run.result.n_rate_updates
    assert coarse.time_s == pytest.approx(exact.time_s, rel=1e-2)
    with pytest.raises(InputError, match=r"time_rel_tol must be a number in \[0, 1\), got 1.5"):
        collective_time(topology, "all_to_all", 4 << 20, time_rel_tol=1.5)


def test_rows_say_what_nccl_runs_and_nccl_env_steers_it(capsys):
    argv = ["collective", "all_reduce", "--system", "dgx_h100", "--nodes", "2", "-b", "4K", "-e", "1G", "-f", "262144"]
    assert flowsim(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    # NCCL's tuner on two DGX H100: tree/LL at 4 KiB, NVLSTree at 1 GiB (docs/hardware.md §7).
    assert [r[5:7] for r in rows] == [["tree", "ll"], ["nvls_tree", "simple"]]
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_PROTO=Simple"]) == 0
    out = capsys.readouterr().out
    assert "NCCL_ALGO=Ring, NCCL_PROTO=Simple" in out.splitlines()[0]
    rows = [line.split() for line in out.splitlines() if not line.startswith("#")]
    assert [r[5:8] for r in rows] == [["ring", "simple", "1"], ["ring", "simple", "16"]]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--system", "dgx_h100", "--nccl-env", "ALGO=Ring"], "--nccl-env 'ALGO=Ring': expected NCCL_NAME=VALUE"),
        (["--system", "dgx_h100", "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_ALGO=Tree"],
         "--nccl-env NCCL_ALGO is given twice"),
        (["--system", "dgx_h100", "--nccl-env", "NCCL_ALGO=Rings"], "unknown name 'Rings'"),
        (["--system", "dgx_h999"], "unknown system 'dgx_h999': expected a preset (pcie_server, dgx1_v100"),
        (["--system", "dgx_h100", "-b", "1G", "-e", "1M"], "begin <= end"),
        (["--system", "dgx_h100", "-b", "1Q"], "size '1Q'"),
        (["--system", "dgx_h100", "--algorithm", "p2p"], "no algorithm 'p2p' for all_reduce"),
        (["--system", "dgx_h100", "--algorithm", "nvls", "--model", "stream"], "has no stream model"),
        (["--system", "dgx_h100", "-g", "16"], "-g 16: a nccl-tests thread drives GPUs of its own host, and each "
                                               "dgx_h100 host has 8"),
        (["--system", "gb200-nvl72", "-g", "8"], "each gb200_nvl72 host has 4"),  # a compute tray
        (["--system", "dgx_h100", "--gpus-per-node", "9"], "--gpus-per-node 9: each dgx_h100 host has 8 GPUs"),
        (["--system", "gb200-nvl72", "--gpus-per-node", "8"], "--gpus-per-node 8: each gb200_nvl72 host has 4 GPUs"),
        (["--system", "dgx_h100", "--gpus-per-node", "2", "-g", "4"],
         "-g 4: a nccl-tests thread drives GPUs of its own host, and each dgx_h100 host runs 2 (--gpus-per-node)"),
    ],
)
def test_bad_input_is_reported_not_raised(capsys, argv, message):
    assert flowsim(["collective", "all_reduce", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flowsim: error: ") and message in err


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [("--nodes", "0", "a positive integer"), ("--channels", "0", "a positive integer"),
     ("--gpus-per-node", "0", "a positive integer"),
     ("-g", "0", "a positive integer"), ("-m", "0", "a positive integer"), ("--slices", "-2", "a positive integer"),
     ("-G", "-1", "a non-negative integer"), ("--seed", "-1", "a non-negative integer"),
     ("-n", "0", "a positive integer"), ("-z", "abc", "a non-negative integer"), ("-f", "0", "a positive integer"),
     ("--time-rel-tol", "1", "a number in [0, 1)"), ("--time-rel-tol", "nan", "a number in [0, 1)")],
)
def test_counts_out_of_range_are_refused_naming_the_option(capsys, option, value, expected):
    # As argparse reports a bad value: the option, not a name inside flowsim ('gpus_per_thread').
    with pytest.raises(SystemExit) as exit_:
        flowsim(["collective", "all_reduce", "--system", "dgx_h100", option, value])
    assert exit_.value.code == 2
    name = {"-g": "-g/--ngpus", "-m": "-m/--agg_iters", "-G": "-G/--cudagraph", "-n": "-n/--iters", "-z": "-z/--blocking",
            "-f": "-f/--stepfactor"}.get(option, option)
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"flowsim collective: error: argument {name}: expected {expected}, got '{value}'")


def test_rows_are_printed_as_their_sizes_finish(capsys, monkeypatch):
    # The third size fails: the first two rows are on stdout already (before, the table was
    # printed whole at the end, so nothing was).
    from flowsim.collectives import report

    ran = []

    def third_fails(*args, **kwargs):
        ran.append(args[2])
        if len(ran) == 3:
            raise InputError("the third size fails")
        return collective_time(*args, **kwargs)

    monkeypatch.setattr(report, "collective_time", third_fails)
    argv = ["collective", "all_reduce", "--system", "dgx_h100", "-b", "1K", "-e", "1M", "-f", "4"]
    assert flowsim(argv) == 2
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("# flowsim all_reduce: 1 x dgx_h100, 8 ranks") and len(lines) == 5
    assert [int(line.split()[0]) for line in lines[3:]] == [1024, 4096]
    assert err == "flowsim: error: the third size fails\n"


def test_bad_options_print_nothing_on_stdout(capsys):
    # Checked by the first size, which runs before the header is printed.
    assert flowsim(["collective", "all_reduce", "--system", "dgx_h100", "--algorithm", "p2p"]) == 2
    assert capsys.readouterr().out == ""


ARGV = ["collective", "all_reduce", "--system", "dgx_h100", "-b", "1K", "-e", "4K", "-f", "4"]


def test_progress_notes_only_when_asked_off_a_terminal(capsys):
    assert flowsim(ARGV) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    assert flowsim([*ARGV, "--progress"]) == 0
    captured = capsys.readouterr()
    assert captured.out == quiet.out
    notes = [re.sub(r"\d[\d,]* flows$", "N flows", line.split("] ", 1)[1]) for line in captured.err.splitlines()]
    assert notes == [
        "1,024 B (1/2): building the flows",
        "1,024 B (1/2): routing and simulating N flows",
        "4,096 B (2/2): building the flows",
        "4,096 B (2/2): routing and simulating N flows",
    ]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_notes_in_place_on_a_terminal(capsys, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert flowsim(ARGV) == 0
    # Each note redrawn on one line, erased before each row goes out.
    drawn = terminal.getvalue().split("\r\x1b[K")
    assert drawn[0] == "" and drawn[-1] == ""
    notes = [text.split("] ", 1)[1] for text in drawn[1:-1] if text]
    assert notes[0] == "1,024 B (1/2): building the flows" and len(notes) == 4
    assert "\n" not in terminal.getvalue()


def test_an_error_starts_a_clean_line_after_a_note_in_place(capsys, monkeypatch):
    from flowsim.collectives import report

    def second_fails(*args, **kwargs):
        if args[2] > 1024:
            kwargs["progress"]("building the flows")
            raise InputError("the second size fails")
        return collective_time(*args, **kwargs)

    monkeypatch.setattr(report, "collective_time", second_fails)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert flowsim(ARGV) == 2
    assert terminal.getvalue().endswith("4,096 B (2/2): building the flows\r\x1b[Kflowsim: error: the second size fails\n")


def test_nccl_variables_the_model_does_not_follow_are_named_once(capsys):
    argv = ["collective", "all_reduce", "--system", "dgx_h100", "-b", "1M", "-e", "1M", "--nccl-env", "NCCL_ALGO=Ring"]
    assert flowsim(argv) == 0
    assert "does not change the model" not in capsys.readouterr().err
    assert flowsim([*argv, "--nccl-env", "NCCL_IB_HCA=mlx5_0", "--nccl-env", "NCCL_SOCKET_IFNAME=eth0"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "change the model" in line]
    assert notes == [
        "flowsim: note: NCCL_IB_HCA, NCCL_SOCKET_IFNAME do not change the model (it follows NCCL_ALGO, NCCL_PROTO, "
        "channel counts, NCCL_NVLS_ENABLE, NCCL_NVLS_NCHANNELS, NCCL_NTHREADS, buffer and chunk sizes)"
    ]
    # Buffer and chunk sizes are followed (docs/hardware.md §7.4), so not named.
    assert flowsim([*argv, "--nccl-env", "NCCL_BUFFSIZE=1048576", "--nccl-env", "NCCL_P2P_NVL_CHUNKSIZE=262144"]) == 0
    assert "change the model" not in capsys.readouterr().err


def test_a_thread_driving_several_gpus_bounds_small_sizes(capsys):
    # nccl-tests -g 8: one thread launches 8 kernels per iteration, 8 x 4.2 us = 33.6 us at least
    # (docs/hardware.md 6.2); 1 MiB on a DGX A100 (about 36 us simulated) is above it.
    argv = ["collective", "all_reduce", "--system", "dgx-a100", "-b", "64", "-e", "1M", "-f", "16384"]
    assert flowsim([*argv, "-g", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {int(r.split()[0]): float(r.split()[8]) for r in lines if not r.startswith("#")}
    assert rows[64] == 33.6 and rows[1 << 20] > 33.6
    assert "# Launch-bound         : 1 size(s) up to 64 B take the host's 33.6 us per iteration (8 GPU(s) per thread)" \
        in lines
    # One GPU per thread (the default) or CUDA graphs: NCCL's own latency shows.
    for extra in ([], ["-g", "8", "-G", "10"]):
        assert flowsim([*argv, *extra]) == 0
        out = capsys.readouterr().out
        assert "Launch-bound" not in out
        assert float(next(r for r in out.splitlines() if r.split()[0] == "64").split()[8]) < 20


def test_aggregated_iterations_are_said_in_the_output(capsys):
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "-b", "1M", "-e", "1M", "-m", "8"]
    assert flowsim([*argv, "--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert (output["agg_iters"], output["cuda_graph"], output["rows"][0]["algorithm"]) == (8, 0, "nvls")
    assert flowsim(argv) == 0
    assert "# Aggregated (-m)      : 8 calls an iteration, which NCCL merges into one of their bytes" in (
        capsys.readouterr().out)


def test_a_root_is_taken_by_the_collectives_that_have_one(capsys):
    argv = ["--system", "dgx-h100", "-b", "8M", "-e", "8M", "--json"]
    assert flowsim(["collective", "gather", *argv, "-r", "5"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert (row["root"], row["redop"], row["count"], row["algorithm"]) == (5, "none", 8 * 2**20 // 4 // 8, "p2p")
    # nccl-tests takes -r for every binary and uses it where there is a root: a note, as it is.
    assert flowsim(["collective", "all_to_all", *argv, "--root", "5"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("flowsim: note: -r/--root 5 has no effect: all_to_all has no root (broadcast, gather, "
                            "reduce and scatter have one)\n")
    assert json.loads(captured.out)["rows"][0]["root"] == -1
    assert flowsim(["collective", "scatter", *argv, "-r", "8"]) == 2
    assert capsys.readouterr().err == "flowsim: error: --root 8: the 8 ranks are 0 to 7\n"
    # -1: every root in turn, a block of sizes each, as nccl-tests' -r -1.
    assert flowsim(["collective", "scatter", "--system", "dgx-h100", "-b", "1M", "-e", "8M", "-f", "8", "-r", "-1",
                    "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["root"], r["size_bytes"]) for r in rows] == [(root, size) for root in range(8) for size in (2**20, 2**23)]
    with pytest.raises(SystemExit):
        flowsim(["collective", "scatter", *argv, "-r", "-2"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "flowsim collective: error: argument -r/--root: expected a rank number, or -1 for every root in turn, got '-2'")


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("all_reduce", "all_reduce"), ("allreduce", "all_reduce"), ("All-Reduce", "all_reduce"),
     ("alltoall_perf", "all_to_all"), ("reducescatter", "reduce_scatter"), ("sendrecv", "send"),
     ("sendrecv_perf", "send"), ("gather_perf", "gather"), ("Scatter", "scatter"),
     ("hypercube_perf", "hypercube"), ("alltoallv_perf", "all_to_all_v"), ("all-to-all-v", "all_to_all_v")],
)
def test_collectives_are_taken_as_nccl_and_nccl_tests_spell_them(spelling, name):
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    assert parser.parse_args(["collective", spelling, "--system", "dgx-h100"]).collective == name


def test_an_unknown_collective_is_one_line_naming_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exit_:
        flowsim(["collective", "allred", "--system", "dgx-h100"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "flowsim collective: error: argument collective: unknown collective 'allred'; valid ones: "
        "all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, gather, scatter, hypercube, "
        "all_to_all_v, send"
    )
    assert "Traceback" not in err


def test_alltoallvs_spread_is_taken_from_nccl_env_without_a_note(capsys):
    argv = ["collective", "alltoallv", "--system", "dgx-h100", "-b", "1M", "-e", "1M", "--json"]
    assert flowsim([*argv, "--nccl-env", "NCCL_TESTS_ALLTOALLV_SPREAD=0"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["rows"][0]["size_bytes"] == 2**20  # spread 0: S / 8 to each rank, itself too
    assert flowsim([*argv, "--nccl-env", "NCCL_TESTS_ALLTOALLV_SPREAD=x"]) == 2
    assert capsys.readouterr().err == "flowsim: error: NCCL_TESTS_ALLTOALLV_SPREAD='x' is not a number\n"


def test_a_sendrecv_says_its_communicators_ranks(capsys):
    # sendrecv_perf's ring of sends runs on every rank (10 x 8 = 80, 2 x 4 = 8 with
    # --gpus-per-node 4), though its rows time the pair it waits for: the title and JSON say so.
    argv = ["collective", "sendrecv", "--system", "dgx-h100", "-b", "1M", "-e", "1M"]
    assert flowsim([*argv, "--nodes", "10"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert title.startswith("# flowsim send: 10 x dgx_h100, 80 ranks, ")
    assert flowsim([*argv, "--nodes", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"] == 80
    assert flowsim([*argv, "--nodes", "2", "--gpus-per-node", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["collective"], out["gpus_per_node"], out["ranks"]) == ("send", 4, 8)


def test_ranks_on_each_hosts_first_gpus(capsys):
    # --gpus-per-node 2 on two DGX H100: ranks on GPUs 0 and 1 of each, in host order, as a
    # launcher's 2 processes a host take devices 0 and 1; the rows are those of the collective
    # on exactly those ranks.
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "--gpus-per-node", "2",
            "-b", "1M", "-e", "1G", "-f", "1024", "--json"]
    assert flowsim(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["nodes"], out["gpus_per_node"], out["ranks"]) == (2, 2, 4)
    topology = build_cluster("dgx_h100", 2, figure="effective", fabric="rail_optimized")
    for row in out["rows"]:
        expected = collective_time(topology, "all_reduce", row["size_bytes"],
                                   ranks=["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"])
        assert row["time_us"] == pytest.approx(expected.time_s * 1e6, rel=1e-12)
        assert (row["algorithm"], row["channels"]) == (expected.algorithm, expected.channels)
    # All of a host's GPUs is the default, row for row.
    runs = []
    for extra in ([], ["--gpus-per-node", "8"]):
        assert flowsim([*argv[:4], "--nodes", "2", "-b", "1M", "-e", "1M", *extra]) == 0
        runs.append(_rows(capsys.readouterr().out))
    assert runs[0] == runs[1]
    # A root is one of the ranks run.
    assert flowsim(["collective", "broadcast", "--system", "dgx-h100", "--nodes", "2", "--gpus-per-node", "2",
                    "-r", "4"]) == 2
    assert capsys.readouterr().err == "flowsim: error: --root 4: the 4 ranks are 0 to 3\n"


def test_one_gpu_a_node_crosses_its_nic(capsys):
    # Two DGX H100, one rank each: a ring all-reduce of two ranks sends S / 2 twice each way
    # through each rank's NIC, so busbw (= algbw for two ranks) is at most a NIC's rate, and
    # at 1 GiB the NIC is what bounds it.
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "--gpus-per-node", "1",
            "-b", "1G", "-e", "1G", "--json"]
    assert flowsim(argv) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    topology = build_cluster("dgx_h100", 2, figure="effective", fabric="rail_optimized")
    nic = topology.link_capacity_Bps[topology.link_index["n0.nic0->ib.su0.rail0"]] / 1e9
    assert out["ranks"] == 2 and row["busiest_tier"] == "InfiniBand"
    assert 0.97 * nic < row["busbw_GBps"] <= nic
    # NCCL's PAT runs all-gathers of one GPU a node (4 nodes at 1 MiB), never of a whole server.
    ran = []
    for per_node in ("1", "8"):
        assert flowsim(["collective", "all_gather", "--system", "dgx-h100", "--nodes", "4", "--gpus-per-node",
                        per_node, "-b", "1M", "-e", "1M", "--json"]) == 0
        ran.append(json.loads(capsys.readouterr().out)["rows"][0]["algorithm"])
    assert ran[0] == "pat" and ran[1] != "pat"


def test_a_rack_scale_systems_hosts_are_its_trays(capsys):
    # gb200-nvl72: 18 trays of 4 GPUs; two ranks a tray make 36 ranks in one NVLink domain.
    assert flowsim(["collective", "all_reduce", "--system", "gb200-nvl72", "--gpus-per-node", "2",
                    "-b", "1M", "-e", "1M"]) == 0
    assert "1 x gb200_nvl72, 36 ranks (2 GPU(s) a host)," in capsys.readouterr().out


def test_tuning_shows_what_nccls_model_weighed_under_each_row(capsys):
    # Two DGX H100: at 1 KiB NCCL's model has the tree with LL least, at 1 GiB NVLSTree; each
    # row's note lists every pair the tuner weighed, the least of them marked as what ran.
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1K", "-e", "1G", "-f", "1024"]
    assert flowsim([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    for row in rows:
        times = row["nccl_model_us"]
        assert {"tree/ll", "ring/simple", "nvls_tree/simple"} <= set(times)
        assert min(times, key=times.get) == f"{row['algorithm']}/{row['protocol']}"
    assert [f"{r['algorithm']}/{r['protocol']}" for r in (rows[0], rows[-1])] == ["tree/ll", "nvls_tree/simple"]
    assert flowsim([*argv, "--tuning"]) == 0
    lines = capsys.readouterr().out.splitlines()
    notes = [i for i, line in enumerate(lines) if line.startswith("#   NCCL model (us): ")]
    assert len(notes) == len(rows) == 3 and all(not lines[i - 1].startswith("#") for i in notes)
    notes = [lines[i] for i in notes]
    # The tree with LL on 2 servers of 8: baseLat 6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2 us of
    # latency (docs/hardware.md §7.3), and 1 KiB at its bandwidth.
    assert re.search(r"tree/ll 25\.2\d \(ran\)", notes[0]) and notes[0].count("(ran)") == 1
    # Without --tuning no note; an all-to-all, which NCCL's tuner does not choose, has none.
    assert flowsim(argv) == 0
    assert "NCCL model" not in capsys.readouterr().out
    assert flowsim(["collective", "all_to_all", "--system", "dgx-h100", "-b", "1M", "-e", "1M", "--tuning"]) == 0
    assert "NCCL model" not in capsys.readouterr().out


def test_a_named_algorithm_or_protocol_the_nccl_environment_leaves_out_is_an_error(capsys):
    # NCCL_PROTO=Simple with --protocol ll, NCCL_ALGO=Ring with --algorithm tree: the title
    # would say one and the rows run the other; each is refused naming both.
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1M", "-e", "1M"]
    assert flowsim([*argv, "--nccl-env", "NCCL_PROTO=Simple", "--protocol", "ll"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "flowsim: error: protocol 'll' contradicts NCCL_PROTO=Simple, which leaves it out for all_reduce: name one "
        "or the other"]
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO=Ring", "--algorithm", "tree"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "flowsim: error: algorithm 'tree' contradicts NCCL_ALGO=Ring, which leaves it out for all_reduce: name one "
        "or the other"]
    # Per function as NCCL parses it: all-reduce has rings only; the hierarchical all-reduce runs rings.
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO=tree;allreduce:ring", "--algorithm", "tree"]) == 2
    assert "NCCL_ALGO=tree;allreduce:ring, which leaves it out" in capsys.readouterr().err
    # A system file's environment (aws-p4d's NCCL_PROTO=Simple, for EFA) is the call's too.
    server, _, _ = resolve_system("aws-p4d")
    topology = build_cluster(server, 1, figure="effective")
    with pytest.raises(InputError, match=r"^protocol 'll128' contradicts NCCL_PROTO=Simple \(the system's NCCL "
                                         r"environment\), which leaves it out for all_gather"):
        collective_time(topology, "all_gather", 1 << 20, protocol="ll128")
    # Where they agree nothing changes: the tree with LL128, as named.
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO=Ring,Tree", "--nccl-env", "NCCL_PROTO=^LL", "--algorithm",
                    "tree", "--protocol", "ll128"]) == 0
    assert [r[5:7] for r in _rows(capsys.readouterr().out)] == [["tree", "ll128"]]
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO=Ring", "--algorithm", "hierarchical"]) == 0


def test_a_named_algorithm_runs_only_where_the_nccl_version_has_it_and_collnet_on_nccls_channels(capsys):
    argv = ["collective", "reduce_scatter", "--system", "dgx-h100", "--nodes", "2", "-b", "64M", "-e", "64M"]
    # NCCL 2.19.3 has no reduce-scatter through the network: named, refused as NCCL_ALGO is.
    old = ["--nccl-version", "2.19.3", "--nccl-env", "NCCL_COLLNET_ENABLE=1"]
    assert flowsim([*argv, *old, "--nccl-env", "NCCL_ALGO=CollNetDirect"]) == 2
    assert "collnet_direct: NCCL runs reduce_scatter through the network from 2.20.5" in capsys.readouterr().err
    assert flowsim([*argv, *old, "--algorithm", "collnet_direct"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "flowsim: error: NCCL 2.19.3 runs no collnet_direct reduce_scatter: NCCL runs reduce_scatter through the "
        "network from 2.20.5"]
    assert flowsim(["collective", "all_gather", "--system", "dgx-h100", "--nodes", "2", "--gpus-per-node", "1",
                    "--nccl-version", "2.19.3", "--algorithm", "pat"]) == 2
    assert "NCCL 2.19.3 runs no pat all_gather: PAT arrived in NCCL 2.23.4" in capsys.readouterr().err
    # Named, CollNet Direct runs on NCCL's channels with or without NCCL_COLLNET_ENABLE=1: 16,
    # twice the search's 8 rings (one a NIC), none added for CollNet as its chain's speeds
    # inside and across servers are equal (48 GB/s).
    for extra in ([], ["--nccl-env", "NCCL_COLLNET_ENABLE=1"]):
        assert flowsim([*argv, "--algorithm", "collnet_direct", *extra]) == 0
        assert [r[5:8] for r in _rows(capsys.readouterr().out)] == [["collnet_direct", "simple", "16"]]
    assert flowsim([*argv, "--algorithm", "collnet_direct", "--nccl-env", "NCCL_COLLNET_ENABLE=0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "flowsim: error: algorithm 'collnet_direct' runs CollNet (IB SHARP), which NCCL_COLLNET_ENABLE=0 turns off: "
        "name one or the other"]


def test_channel_counts_out_of_range_are_taken_as_nccl_takes_them_and_said(capsys):
    # Two DGX H100, rings with Simple at 64 MiB: NCCL's 16 channels (twice the search's 8).
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "64M", "-e", "64M",
            "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_PROTO=Simple"]

    def channels(*env):
        assert flowsim([*argv, *(arg for pair in env for arg in ("--nccl-env", pair))]) == 0
        captured = capsys.readouterr()
        (row,) = _rows(captured.out)
        return int(row[7]), [line for line in captured.err.splitlines() if "note" in line]

    assert channels() == (16, [])
    # ncclMaxNchannels(): below 1 is 1, with NCCL's line; -2 is NCCL's "unset".
    assert channels("NCCL_MAX_NCHANNELS=0") == (1, [
        'flowsim: note: NCCL_MAX_NCHANNELS=0: NCCL runs at most 1 channel ("User asked for a maximum of 0 channels, '
        'setting it to 1")'])
    assert channels("NCCL_MAX_NCHANNELS=-3")[0] == 1
    assert channels("NCCL_MAX_NCHANNELS=-2") == (16, [])
    # ncclMinNchannels(): at most MAXCHANNELS, 64 in 2.30.7 (src/include/device.h).
    assert channels("NCCL_MIN_NCHANNELS=1000") == (64, [
        'flowsim: note: NCCL_MIN_NCHANNELS=1000: NCCL takes 64 ("User asked for a minimum of 1000 channels, limiting '
        'to 64")'])
    # A least above the most: NCCL takes the first 4 channels and copies them up to 8
    # (src/graph/connect.cc: "We permit combining max, then min"); for the CTAs, both are the most.
    assert channels("NCCL_MIN_NCHANNELS=8", "NCCL_MAX_NCHANNELS=4") == (8, [])
    assert channels("NCCL_MIN_CTAS=8", "NCCL_MAX_CTAS=4") == (4, [
        'flowsim: note: NCCL_MIN_CTAS=8 is above NCCL_MAX_CTAS=4: NCCL takes 4 for both ("minCTAs 8 is larger than '
        'maxCTAs 4, set both to 4")'])
    # From 2.25.1 NCCL ignores a count of CTAs below 1; before, it left no channel.
    assert channels("NCCL_MAX_CTAS=0") == (16, ["flowsim: note: NCCL_MAX_CTAS=0: NCCL ignores it as too low and keeps 64"])
    assert flowsim([*argv, "--nccl-env", "NCCL_MAX_CTAS=0", "--nccl-version", "2.24.3"]) == 2
    assert "NCCL_MAX_CTAS=0 leaves NCCL 2.24.3 no channel" in capsys.readouterr().err
    # flowsim's own --channels: no more than NCCL's MAXCHANNELS, 32 before 2.25.1.
    assert flowsim([*argv, "--channels", "1000"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "flowsim: error: --channels 1000: NCCL 2.30.7 runs at most 64 channels (MAXCHANNELS)"]
    assert flowsim([*argv, "--channels", "33", "--nccl-version", "2.24.3"]) == 2
    assert "--channels 33: NCCL 2.24.3 runs at most 32 channels" in capsys.readouterr().err


def test_fp8_runs_where_nccl_has_it(capsys):
    argv = ["collective", "all_reduce", "-b", "16M", "-e", "16M", "-d", "f8e4m3"]
    # NCCL's FP8 types arrived in 2.24.3 (src/nccl.h.in).
    assert flowsim([*argv, "--system", "dgx-h100", "--nccl-version", "2.19.3"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "flowsim: error: NCCL 2.19.3 has no FP8 types (f8e4m3): ncclFloat8e4m3 and ncclFloat8e5m2 arrived in 2.24.3"]
    # Below SM90 NCCL refuses an FP8 reduction (src/enqueue.cc taskAppend) ...
    assert flowsim([*argv, "--system", "dgx-a100"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        'flowsim: error: NCCL 2.30.7 refuses all_reduce of f8e4m3 on SM80 GPUs ("FP8 reduction support begins with '
        'sm90 capable devices.")']
    # ... and from 2.28.3 no longer an all-gather, which reduces nothing; sends never.
    gather = ["collective", "all_gather", "--system", "dgx-a100", "-b", "16M", "-e", "16M", "-d", "f8e5m2"]
    assert flowsim(gather) == 0
    assert [r[2] for r in _rows(capsys.readouterr().out)] == ["f8e5m2"]
    assert flowsim([*gather, "--nccl-version", "2.27.7"]) == 2
    assert "NCCL 2.27.7 refuses all_gather of f8e5m2 on SM80 GPUs" in capsys.readouterr().err
    assert flowsim(["collective", "all_to_all", "--system", "dgx-a100", "-b", "16M", "-e", "16M", "-d", "f8e5m2",
                    "--nccl-version", "2.27.7"]) == 0
    capsys.readouterr()
    assert flowsim([*argv, "--system", "dgx-h100"]) == 0


def test_fabric_options_without_a_compute_fabric_are_said_to_have_no_effect(capsys):
    argv = ["collective", "all_reduce", "--system", "dgx-h100", "-b", "1M", "-e", "1M"]
    assert flowsim([*argv, "--oversubscription", "4", "--switch", "sn5600"]) == 0
    why = "has no effect: one server gets no compute fabric (its GPUs never reach its compute NICs; --fabric " \
          "rail_optimized builds one)"
    assert capsys.readouterr().err.splitlines() == [f"flowsim: note: --switch sn5600 {why}",
                                                    f"flowsim: note: --oversubscription 4 {why}"]
    # --fabric builds one on one server too: the options shape it, and no note.
    assert flowsim([*argv, "--fabric", "rail_optimized", "--oversubscription", "2"]) == 0
    captured = capsys.readouterr()
    assert "note" not in captured.err and "rail_optimized fabric" in captured.out


def test_a_gpu_model_flowsim_does_not_know_is_said(tmp_path, capsys):
    # "H1OO" for "H100" (or "LA0S" for "L40S") ran silently: on NVSwitch NCCL's tuning follows the NVLinks either way,
    # but on PCIe the card's own link and compute capability are the model's.
    known = Path(__file__).resolve().parents[1] / "data" / "systems" / "l40s.toml"
    typo = tmp_path / "typo.toml"
    typo.write_text(known.read_text().replace('gpu = "L40S"', 'gpu = "LA0S"'))
    argv = ["collective", "all_reduce", "-b", "1M", "-e", "1M"]
    assert flowsim([*argv, "--system", str(typo)]) == 0
    assert capsys.readouterr().err.startswith(f"flowsim: note: {typo}: the GPU 'LA0S' is no model flowsim knows")
    assert flowsim([*argv, "--system", str(known)]) == 0
    assert "no model" not in capsys.readouterr().err


def test_no_fabric_between_servers_is_said_to_leave_them_the_front_end(capsys):
    # Two servers with --fabric none ran their all-reduce over the front-end Ethernet, NCCL's
    # choice worked out on the compute NICs, and nothing said so.
    assert flowsim(["collective", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1M", "-e", "1M",
                    "--fabric", "none"]) == 0
    note = ("no compute fabric joins the 2 servers, only their front-end Ethernet: traffic between them takes it, "
            "while NCCL's choice is worked out as if their compute NICs carried it")
    assert capsys.readouterr().err.splitlines() == [f"flowsim: note: {note}"]
    # flowsim check says so too, among its warnings.
    log = Path(__file__).resolve().parents[1] / "data" / "nccl_tests" / "reduce_scatter_perf_dgx_h100_2node.txt"
    assert flowsim(["check", str(log), "--fabric", "none", "--min-bytes", "8G"]) in (0, 1)
    assert f"# warning: {note}" in capsys.readouterr().out.splitlines()
