"""``flowsim check``: nccl-tests output parsed, predicted, flagged and kept in an HDF5 history."""

import argparse
import dataclasses
import io
import json
import multiprocessing
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest

import flowsim.check
import flowsim.check.log as log_rows
from flowsim.check import (
    append_history,
    check_log,
    check_nccl_log,
    history_file,
    history_plot_file,
    parse_nccl_log,
    parse_nccl_logs,
    plot_history,
    read_history,
)
from flowsim.check.history import _history_lines
from flowsim.check.log import RankInfo
from flowsim.check.parse import _shape_of_listed, nccl_version_from_code
from flowsim.check.report import LATENCY_TOLERANCE, _short_without_nvls, default_system, other_choices, time_bounds
from flowsim.collectives import all_to_all_v_bytes
from flowsim.collectives.report import NcclRow
from flowsim.commands.check import add_parser
from flowsim.errors import InputError
from flowsim.presets import preset_spec
from flowsim.servers import ServerSpec
from instances import two_host_h100_log

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
ALL_GATHER = DATA / "all_gather_perf_dgx_h100_1node.txt"
ALL_REDUCE_4 = DATA / "all_reduce_perf_dgx_h100_4node.txt"
DEGRADED = DATA / "all_reduce_perf_dgx_h100_2node_degraded.txt"
REDUCE_SCATTER = DATA / "reduce_scatter_perf_dgx_h100_2node.txt"
ALLTOALL = DATA / "alltoall_perf_dgx_h100_1node.txt"
VALIDATION = DATA.parent / "validation" / "nccl_tests"
SENDRECV = DATA / "sendrecv_perf_dgx_h100_2node.txt"

# Predictions only for the largest sizes keep each check to a few simulations.
LARGE = 512 << 20


@pytest.fixture(scope="module")
def sendrecv_report():
    return check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30)


def flowsim_check(argv):
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *argv])
    return args.func(args)


@pytest.mark.parametrize(
    "path, binary, collective, ranks, hosts, n_rows, first, last",
    [
        (ALL_GATHER, "all_gather_perf", "all_gather", 8, 1, 11, 1 << 20, 1 << 30),
        (ALL_REDUCE_4, "all_reduce_perf", "all_reduce", 32, 4, 14, 1 << 20, 8 << 30),
        (DEGRADED, "all_reduce_perf", "all_reduce", 16, 2, 8, 16 << 20, 2 << 30),
        (REDUCE_SCATTER, "reduce_scatter_perf", "reduce_scatter", 16, 2, 11, 4 << 20, 4 << 30),
        (ALLTOALL, "alltoall_perf", "all_to_all", 8, 1, 11, 1 << 20, 1 << 30),
        (SENDRECV, "sendrecv_perf", "send", 2, 2, 11, 1 << 20, 1 << 30),
    ],
)
def test_parses_every_sample(path, binary, collective, ranks, hosts, n_rows, first, last):
    log = parse_nccl_log(path)
    assert (log.binary, log.collective) == (binary, collective)
    assert (log.n_ranks, log.n_nodes, len(log.rows)) == (ranks, hosts, n_rows)
    assert (log.rows[0].size_bytes, log.rows[-1].size_bytes) == (first, last)
    assert [r.rank for r in log.ranks] == list(range(ranks))
    for row in log.rows:
        # nccl-tests' algbw is S / t (GB/s from bytes and microseconds), to print precision.
        assert row.out_of_place.algbw_GBps == pytest.approx(row.size_bytes / row.out_of_place.time_us / 1e3, rel=2e-3)
        assert row.in_place.algbw_GBps == pytest.approx(row.size_bytes / row.in_place.time_us / 1e3, rel=2e-3)


def test_rank_lines_give_hosts_devices_and_line_numbers():
    log = parse_nccl_log(ALL_REDUCE_4)
    assert log.hosts == ("dgx-a01", "dgx-a02", "dgx-a03", "dgx-a04")
    assert [r.device for r in log.ranks[:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert log.ranks[0].line == 6 and log.ranks[31].line == 37
    assert log.ranks[0].device_name == "NVIDIA H100 80GB HBM3"
    assert (log.version, log.n_threads, log.n_gpus) == ("2.18.3", 1, 1)
    single = parse_nccl_log(ALL_GATHER)
    assert single.version is None and single.n_gpus == 8 and single.n_nodes == 1


def test_out_of_place_and_in_place_columns_and_wrong_counts():
    row = parse_nccl_log(ALLTOALL).rows[0]
    assert row.line == 18
    assert (row.size_bytes, row.count, row.dtype, row.redop, row.root) == (1048576, 32768, "float", "none", -1)
    assert (row.out_of_place.time_us, row.out_of_place.algbw_GBps, row.out_of_place.busbw_GBps) == (32.87, 31.90, 27.92)
    assert (row.in_place.time_us, row.in_place.busbw_GBps) == (32.74, 28.03)
    assert row.out_of_place.wrong == 0 and row.in_place.wrong is None  # "N/A"


def test_in_place_first_header_swaps_the_halves():
    text = ALL_GATHER.read_text().replace(
        "out-of-place                       in-place", "in-place                       out-of-place"
    )
    swapped, original = parse_nccl_log(text, collective="all_gather").rows[0], parse_nccl_log(ALL_GATHER).rows[0]
    assert swapped.out_of_place == original.in_place and swapped.in_place == original.out_of_place


def test_mpirun_tags_and_nccl_info_lines_are_skipped():
    log = parse_nccl_log(REDUCE_SCATTER)
    assert log.n_ranks == 16 and log.rows[0].line == 32 and log.avg_busbw_GBps == pytest.approx(272.777)


def test_collective_from_text_file_name_or_columns():
    text = ALL_GATHER.read_text()
    with pytest.raises(InputError, match="all_gather_perf, alltoall_perf"):
        parse_nccl_log(text)  # no name anywhere, and both fit the columns
    assert parse_nccl_log("$ ./build/all_gather_perf -b 1M -e 1G -g 8\n" + text).binary == "all_gather_perf"
    assert parse_nccl_log(text, collective="alltoall_perf").collective == "all_to_all"
    unnamed = "\n".join(line for line in DEGRADED.read_text().splitlines() if "Collective test" not in line)
    assert parse_nccl_log(unnamed).binary == "all_reduce_perf"  # only all_reduce: sum and 2(n-1)/n
    with pytest.raises(InputError, match="unknown collective 'custom'"):
        parse_nccl_log(text, collective="custom")


def _lines(path):
    return path.read_text().splitlines()


def test_truncated_row_names_its_line():
    lines = _lines(ALL_GATHER)
    lines[16] = lines[16][:60]
    with pytest.raises(InputError, match=r"<text>, line 17: expected 13 columns.*got 6 \(truncated row\?\)"):
        parse_nccl_log("\n".join(lines))


def test_output_cut_inside_its_last_row_is_read_with_a_warning_naming_that_row(tmp_path, capsys):
    # The first 1900 bytes of the log end on line 24 inside the 5th row, whose size alone,
    # '5368709' of 536870912, is there: rows 20-23 (32-256 MiB) are checked, the 5th skipped.
    path = VALIDATION / "xxrjun_h100_1n8g_allreduce.txt"
    cut = tmp_path / "cut.txt"
    cut.write_bytes(path.read_bytes()[:1900])
    assert cut.read_text().splitlines()[-1] == "   5368709"
    log = parse_nccl_log(cut)
    assert [row.size_bytes for row in log.rows] == [33554432, 67108864, 134217728, 268435456]
    assert log.warnings == ("line 24: the output ends inside this row (1 of 13 columns); skipped, the 4 complete "
                            "rows before it are checked",)
    assert flowsim_check([str(cut), "--system", "dgx-h100", "--brief"]) == 0
    assert capsys.readouterr().out.startswith(f"{cut}: all_reduce_perf, 8 ranks on 1 node(s): all 4 predicted sizes "
                                              "OK;")
    # A short row with rows after it is inside the table: still an error.
    lines = path.read_text().splitlines()
    lines[22] = lines[22][:40]
    with pytest.raises(InputError, match=r"<text>, line 23: expected 13 columns.*got 3 \(truncated row\?\)"):
        parse_nccl_log("\n".join(lines))


def test_output_cut_before_the_average_is_read_with_a_warning_naming_the_last_row():
    # People paste part of a table; the rows present are checked, and the report says so.
    lines = _lines(ALL_GATHER)[:20]
    log = parse_nccl_log("\n".join(lines) + "\n", collective="all_gather")
    assert log.avg_busbw_GBps is None and len(log.rows) == 5
    assert len(log.warnings) == 1
    assert "no '# Avg bus bandwidth' line after the row on line 20" in log.warnings[0]


def test_output_cut_in_the_header():
    lines = _lines(ALL_GATHER)[:8]
    with pytest.raises(InputError, match=r"line 8: output ends before the .*table header"):
        parse_nccl_log("\n".join(lines) + "\n")


def test_non_numeric_column_names_line_and_column():
    lines = _lines(SENDRECV)
    lines[16] = lines[16].replace("46.22", "46,22", 1)
    with pytest.raises(InputError, match=r"line 17: column 'out-of-place algbw' should be a number, got '46,22'"):
        parse_nccl_log("\n".join(lines), collective="send")


@pytest.mark.parametrize(
    "column, value, name",
    [
        (7, "nan", "out-of-place busbw"),
        (5, "inf", "out-of-place time"),
        (11, "-1.5", "in-place busbw"),
        (8, "nan", "out-of-place #wrong"),
        (12, "-1", "in-place #wrong"),
    ],
)
def test_a_measurement_that_is_not_a_finite_non_negative_number_names_line_and_column(column, value, name):
    lines = _lines(SENDRECV)
    tokens = lines[16].split()
    tokens[column] = value
    lines[16] = "  ".join(tokens)
    with pytest.raises(InputError, match=rf"<text>, line 17: column '{name}' should be a finite, non-negative"):
        parse_nccl_log("\n".join(lines), collective="send")


def test_a_negative_count_names_line_and_column():
    # (A line starting with a minus sign is not a row: other programs' lines may interleave.)
    lines = _lines(SENDRECV)
    tokens = lines[16].split()
    tokens[1] = "-" + tokens[1]
    lines[16] = "  ".join(tokens)
    with pytest.raises(InputError, match=r"<text>, line 17: column 'count' should be a non-negative integer"):
        parse_nccl_log("\n".join(lines), collective="send")


def test_a_nan_average_bus_bandwidth_is_an_error():
    text = "\n".join(
        line if "Avg bus bandwidth" not in line else "# Avg bus bandwidth    : nan" for line in _lines(SENDRECV)
    )
    with pytest.raises(InputError, match="column 'Avg bus bandwidth' should be a finite, non-negative"):
        parse_nccl_log(text, collective="send")


def test_rank_line_problems():
    lines = _lines(ALL_GATHER)
    broken = lines.copy()
    broken[5] = "#  Rank  2 Group  0 Pid  52011 on    h100-07"
    with pytest.raises(InputError, match=r"line 6: expected '#  Rank R \[Group G\] Pid P on HOST device D"):
        parse_nccl_log("\n".join(broken))
    twice = lines.copy()
    twice[4] = twice[3]
    with pytest.raises(InputError, match=r"line 5: rank 0 is listed twice \(also line 4\).*without MPI"):
        parse_nccl_log("\n".join(twice))


def test_without_rank_lines_the_ranks_come_from_the_arguments_or_the_busbw_ratio():
    lines = _lines(ALL_GATHER)
    text = "\n".join(line for line in lines if "Rank" not in line)
    # One process drove all 8 ranks (nThread 1 nGpus 8) and the busbw ratio says 8: one host.
    log = parse_nccl_log(text, collective="all_gather")
    assert (log.n_ranks, log.hosts, log.ranks_from) == (8, ("node0",), "busbw ratio")
    assert [r.device for r in log.ranks] == list(range(8))
    # Without the nThread line one process is not known to have driven them: --nodes says it.
    headless = "\n".join(line for line in text.splitlines() if "nThread" not in line)
    # Either half of the shape is enough, the ratio giving the rank count: the message says so.
    with pytest.raises(InputError, match=r"no '#  Rank .*lines.*says 8 ranks\); give the cluster's shape: --nodes N or "
                       r"--gpus-per-node G, either one \(nodes= or gpus_per_node=\): the other follows from the 8 "
                       r"ranks$"):
        parse_nccl_log(headless, collective="all_gather")
    # One that does not divide the count: both.
    with pytest.raises(InputError, match=r"says 8 ranks\); give the cluster's shape: --nodes N --gpus-per-node G"):
        parse_nccl_log(headless, collective="all_gather", nodes=3)
    assert parse_nccl_log(headless, collective="all_gather", nodes=1).n_ranks == 8
    shaped = parse_nccl_log(headless, collective="all_gather", nodes=2, gpus_per_node=8)
    assert shaped.hosts == ("node0", "node1") and shaped.ranks_from == "arguments"
    assert any("ratio says 8 ranks, not 2 node(s) x 8" in w for w in shaped.warnings)
    # sendrecv's busbw equals its algbw whatever the rank count: only the arguments tell.
    sendrecv = "\n".join(line for line in _lines(SENDRECV) if "Rank" not in line)
    with pytest.raises(InputError, match=r"unknown; give the cluster's shape: --nodes N --gpus-per-node G"):
        parse_nccl_log(sendrecv, nodes=2)
    assert parse_nccl_log(sendrecv, nodes=2, gpus_per_node=1).hosts == ("node0", "node1")


def test_rows_pasted_without_the_table_header_are_read_as_nccl_tests_prints_them():
    full = parse_nccl_log(ALL_GATHER)
    rows = [line for line in _lines(ALL_GATHER) if re.match(r"^\s+\d", line)]
    log = parse_nccl_log("my all-gather on one DGX H100:\n" + "\n".join(rows), collective="all_gather", nodes=1)
    assert (log.binary, log.n_ranks) == ("all_gather_perf", 8)
    assert [(r.size_bytes, r.out_of_place, r.in_place) for r in log.rows] == [
        (r.size_bytes, r.out_of_place, r.in_place) for r in full.rows]
    assert log.warnings[0].startswith("line 2: rows without nccl-tests' table header; their columns are read as "
                                      "nccl-tests prints them (size count type redop root time algbw busbw #wrong")
    # An older nccl-tests printed no redop and root.
    older = [" ".join(line.split()[:3] + line.split()[5:]) for line in rows]
    assert [r.out_of_place for r in parse_nccl_log("\n".join(older), collective="all_gather", nodes=1).rows] == [
        r.out_of_place for r in full.rows]
    # nccl-tests before 2.13 printed one of redop (all-reduce) and root (broadcast), and the
    # largest error where '#wrong' is now (NVIDIA/nccl#527's p4d rows).
    for fourth, keep in (("redop", 3), ("root", 4)):
        rows_of = [" ".join(line.split()[:3] + line.split()[keep:keep + 1] + line.split()[5:]) for line in rows]
        got = parse_nccl_log("\n".join(rows_of), collective="all_gather", nodes=1)
        assert [dataclasses.replace(r.out_of_place, max_error=None) for r in got.rows] == [
            r.out_of_place for r in full.rows]
        assert {r.out_of_place.max_error for r in got.rows} == {0.0}  # the 0 printed, read as an error
        assert (got.rows[0].redop, got.rows[0].root) == (("none", None) if fourth == "redop" else (None, -1))
        assert f"(size count type {fourth} time algbw busbw error time" in got.warnings[0]
    # Today's 13 columns of a reduce (root 0) that lost the last are no such row: the fifth
    # column is no time the sixth is the size over (a re-audit; they were read and flagged WRONG).
    clipped = ["   134217728      33554432     float     sum       0    413.3  324.75  324.75      0    414.3  323.96"
               "  323.96", "   268435456      67108864     float     sum       0    789.2  340.14  340.14      0    788.8"
               "  340.31  340.31"]
    with pytest.raises(InputError, match="no '#  size  count  type ...' table header"):
        parse_nccl_log("\n".join(clipped), collective="reduce", nodes=1, gpus_per_node=8)
    # Numbers that are not a row of nccl-tests are not taken for one.
    with pytest.raises(InputError, match="no '#  size  count  type ...' table header"):
        parse_nccl_log("\n".join(line.replace(" float ", " floats ") for line in rows), collective="all_gather",
                       nodes=1)


def test_older_rank_lines_without_group_are_read():
    text = ALL_GATHER.read_text().replace(" Group  0", "")
    assert parse_nccl_log(text, collective="all_gather").n_ranks == 8


def test_runs_one_after_another_are_read_run_by_run(tmp_path):
    # A script's log: the all-to-all's run (with its version and "starting" lines), then an
    # all-reduce's as an older nccl-tests prints it (the run starts at its nThread line).
    first = ALLTOALL.read_text() + "# Collective test concluded: alltoall_perf\n#\n\n"
    second = "".join(ALL_REDUCE_4.read_text().splitlines(keepends=True)[2:])
    assert second.startswith("# nThread")
    logs = parse_nccl_logs(first + second)
    assert [log.binary for log in logs] == ["alltoall_perf", "all_reduce_perf"]
    assert logs[0].rows == parse_nccl_log(ALLTOALL).rows
    alone = parse_nccl_log(second)
    assert [r.size_bytes for r in logs[1].rows] == [r.size_bytes for r in alone.rows]
    assert logs[1].n_ranks == alone.n_ranks == 32 and logs[1].hosts == alone.hosts
    # Line numbers are the whole text's.
    assert logs[1].rows[0].line == len(first.splitlines()) + alone.rows[0].line
    bad = second.replace(" 65.49 ", " 6x.49 ", 1)  # the 1 MiB row's out-of-place time
    assert bad != second
    with pytest.raises(InputError, match=rf"line {len(first.splitlines()) + _first_row_line(bad)}: "):
        parse_nccl_logs(first + bad)
    path = tmp_path / "every_binary.log"
    path.write_text(first + second)
    assert [log.source for log in parse_nccl_logs(path)] == [str(path)] * 2
    # One run: a list of one; JSON (-J) holds one run.
    assert len(parse_nccl_logs(ALLTOALL)) == 1
    assert len(parse_nccl_logs(DATA / "all_reduce_perf_dgx_h100_4node.json")) == 1


# A run that failed before its results, as nccl-tests prints it (its header, then the error of
# the first failed call), then the next binary's run.
FAILED_RUN = """# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807
# Collective test starting: alltoall_perf
# nThread 1 nGpus 1 minBytes 33554432 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
#
node1: Test NCCL failure common.cu:1279 'remote process exited or there was a network error / '
 .. node1 pid 4011: Test failure common.cu:1159
"""


def test_a_run_that_failed_is_said_and_the_others_are_read(tmp_path, capsys):
    text = FAILED_RUN + SENDRECV.read_text()
    with pytest.raises(InputError, match=r"<text>, line 5: the run failed before printing results: "
                       r"Test NCCL failure common.cu:1279 'remote process exited or there was a network error / '"):
        parse_nccl_logs(text)
    with pytest.raises(InputError, match="line 5: the run failed before printing results"):
        parse_nccl_log(FAILED_RUN)
    unread = []
    logs = parse_nccl_logs(text, errors=unread)
    assert [log.binary for log in logs] == ["sendrecv_perf"] and len(unread) == 1
    assert logs[0].rows[0].line == len(FAILED_RUN.splitlines()) + parse_nccl_log(SENDRECV).rows[0].line
    # flowsim check: the readable runs checked and printed, one error line for the other, status 2.
    path = tmp_path / "pair.log"
    path.write_text(text)
    assert flowsim_check([str(path), "--system", "dgx-h100", "--min-bytes", "1G"]) == 2
    captured = capsys.readouterr()
    assert f"# {path}: sendrecv_perf" in captured.out
    assert captured.out.rstrip().endswith("with sizes flagged; 1 not checked (the errors on stderr)")
    assert captured.err == (f"flowsim check: error: {path}, line 5: the run failed before printing results: Test NCCL "
                            "failure common.cu:1279 'remote process exited or there was a network error / ' "
                            "(not checked)\n")
    # Nothing readable: each run's error, its own line (the second's may say another thing).
    lone = tmp_path / "failed.log"
    lone.write_text(FAILED_RUN + FAILED_RUN)
    assert flowsim_check([str(lone), "--system", "dgx-h100"]) == 2
    failure = ("the run failed before printing results: Test NCCL failure common.cu:1279 'remote process exited or "
               "there was a network error / ' (not checked)\n")
    assert capsys.readouterr().err == (f"flowsim check: error: {lone}, line 5: {failure}"
                                       f"flowsim check: error: {lone}, line 11: {failure}")
    # One run alone that cannot be read: its error, as for any bad input.
    lone.write_text(FAILED_RUN)
    assert flowsim_check([str(lone), "--system", "dgx-h100"]) == 2
    assert capsys.readouterr().err == f"flowsim check: error: {lone}, line 5: {failure.replace(' (not checked)', '')}"


def test_a_run_that_timed_out_is_said_as_a_failure():
    # nccl-tests' -T: "HOST: Test timeout (Ns) common.cu:523" where a call outlasts it, on a row's
    # start as the run stops there (src/common.cu).
    head, rows = SENDRECV.read_text().split("#       size", 1)
    table = "#       size" + rows
    first = next(line for line in table.splitlines() if re.match(r"^\s*\d", line))
    cut = head + table[: table.index(first)] + first[:60] + "node1: Test timeout (10s) common.cu:523\n"
    with pytest.raises(InputError, match=r"the run failed before printing results: Test timeout \(10s\) common.cu:523"):
        parse_nccl_log(cut)
    second = table.splitlines()[table.splitlines().index(first) + 1]
    later = head + table[: table.index(second)] + second[:60] + "node1: Test timeout (10s) common.cu:523\n"
    assert any("the run failed after the row on line" in w and "Test timeout (10s)" in w
               for w in parse_nccl_log(later).warnings)


def _first_row_line(text):
    return next(k for k, line in enumerate(text.splitlines(), start=1) if re.match(r"^\s*\d+\s", line))


def test_check_reports_each_run_of_a_file(tmp_path, capsys):
    path = tmp_path / "two.log"
    path.write_text(ALLTOALL.read_text() + SENDRECV.read_text())
    history = tmp_path / "history.h5"
    status = flowsim_check([str(path), "--system", "dgx-h100", "--min-bytes", "256M", "--history", str(history)])
    out = capsys.readouterr().out
    assert "# run 1 of 2: alltoall_perf" in out and "# run 2 of 2: sendrecv_perf" in out
    assert out.index("# run 1 of 2") < out.index("# run 2 of 2")
    reports = [check_log(log, system="dgx-h100", min_bytes=256 << 20) for log in parse_nccl_logs(path)]
    assert status == (0 if all(r.ok for r in reports) else 1)
    n_flagged = sum(not r.ok for r in reports)
    assert out.rstrip().endswith(f"# 2 run(s) checked: {2 - n_flagged} with every size OK, {n_flagged} with sizes "
                                 "flagged")
    assert flowsim.check.read_history(history).n_checks == 2
    assert flowsim_check([str(path), "--system", "dgx-h100", "--min-bytes", "256M", "--json"]) == status
    listed = json.loads(capsys.readouterr().out)
    assert [r["binary"] for r in listed] == ["alltoall_perf", "sendrecv_perf"]


def test_brief_prints_a_line_per_run(capsys):
    argv = [str(ALLTOALL), str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "256M"]
    status = flowsim_check([*argv, "--brief"])
    lines = capsys.readouterr().out.splitlines()
    reports = [check_log(parse_nccl_log(path), system="dgx-h100", min_bytes=256 << 20) for path in (ALLTOALL, SENDRECV)]
    assert status == (0 if all(r.ok for r in reports) else 1)
    assert lines[:2] == [r.format_brief() for r in reports] and lines[2] == "" and lines[3].startswith("# 2 run(s)")
    for line, report in zip(lines, reports, strict=False):
        ratios = [r.ratio_out for r in report.rows if r.ratio_out is not None]
        log = report.log
        assert line.startswith(f"{log.source}: {log.binary}, {log.n_ranks} ranks on {log.n_nodes} node(s): ")
        assert line.endswith(", in the full report") == bool(report.warnings)
        assert f"measured / predicted {min(ratios):.2f}-{max(ratios):.2f}" in line
    with pytest.raises(SystemExit):  # --brief or --json, not both
        flowsim_check([*argv, "--brief", "--json"])


def test_the_lines_of_a_files_runs_say_which_run(tmp_path, capsys):
    # Two runs of one file that fail alike: each error line says its run, as each brief line does.
    path = tmp_path / "two_a40.log"
    path.write_text(SENDRECV.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA A40") * 2)
    assert flowsim_check([str(path), str(SENDRECV), "--brief", "--min-bytes", "1G"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": --system is required")[0] for line in err[1:]] == [
        f"flowsim check: error: {path}, run {k} of 2" for k in (1, 2)]
    path.write_text(SENDRECV.read_text() * 2)
    flowsim_check([str(path), "--system", "dgx-h100", "--brief", "--min-bytes", "1G"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": sendrecv_perf")[0] for line in lines[:2]] == [f"{path}, run {k} of 2" for k in (1, 2)]
    assert [log.run for log in parse_nccl_logs(path)] == [(1, 2), (2, 2)] and parse_nccl_log(SENDRECV).run == (1, 1)


def test_tuning_prints_nccls_model_under_each_row(tmp_path, capsys):
    # The 16 H100 of nccl-tests#309 on two servers: NCCL's tree with LL at 8 B costs its
    # latency alone, by hand 6.8 + 2 x ((8 - 1) x 0.6 + log2(2) x 5.0) = 25.2 us (docs/hardware.md
    # §7.3: base latency of Tree/LL, NVLink and network hardware latencies of Tree/LL).
    log = VALIDATION / "gh_nccltests309_h100_2n8g_ib400_allreduce.txt"
    lines = log.read_text().splitlines()
    first_row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8"])
    short = tmp_path / "all_reduce_perf_309.txt"  # its 8 B and 16 B rows; the name says the binary
    short.write_text("\n".join(lines[:first_row + 2]) + "\n")
    report = check_nccl_log(short, system="dgx-h100")
    row = report.rows[0]
    assert row.size_bytes == 8 and (row.algorithm, row.protocol) == ("tree", "ll")
    assert row.nccl_model_us["tree/ll"] == pytest.approx(25.2, abs=0.01)
    assert min(row.nccl_model_us, key=row.nccl_model_us.__getitem__) == "tree/ll"
    assert "NCCL model" not in report.format_text()
    text = report.format_text(tuning=True).splitlines()
    at = next(i for i, line in enumerate(text) if line.split()[:1] == ["8"])
    assert text[at + 1].startswith("#   NCCL model (us): tree/ll 25.20 (ran), tree/ll128 ")
    assert text[at + 1].endswith(f"; measured {row.measured_time_out_us:.2f} out-of-place, "
                                 f"{row.measured_time_in_us:.2f} in-place")
    assert flowsim_check([str(short), "--system", "dgx-h100", "--tuning"]) == (0 if report.ok else 1)
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("#   NCCL model (us): ") for line in out) == 2
    assert flowsim_check([str(short), "--system", "dgx-h100", "--json"]) == (0 if report.ok else 1)
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["nccl_model_us"] == pytest.approx(row.nccl_model_us)


def test_tuning_notes_only_what_a_tuner_chose(sendrecv_report, capsys):
    # Point-to-point collectives have no tuner's choice: no note under their rows.
    assert all(not r.nccl_model_us for r in sendrecv_report.rows)
    assert sendrecv_report.format_text(tuning=True) == sendrecv_report.format_text()
    assert flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--tuning", "--brief"]) == 2
    assert capsys.readouterr().err.strip() == ("flowsim check: error: --tuning prints under the table's rows, which "
                                               "--brief leaves out: give one of them")


def test_check_takes_several_files_one_after_another(tmp_path, capsys):
    status = flowsim_check([str(ALLTOALL), str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "256M"])
    out = capsys.readouterr().out
    assert f"# run 1 of 2: alltoall_perf\n# {ALLTOALL}:" in out and f"# run 2 of 2: sendrecv_perf\n# {SENDRECV}:" in out
    assert status == flowsim_check([str(ALLTOALL), "--system", "dgx-h100", "--min-bytes", "256M"]) | flowsim_check(
        [str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "256M"])
    # A file that is not nccl-tests output among them: one error line naming it, the others
    # checked, status 2.
    capsys.readouterr()
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    assert flowsim_check([str(ALLTOALL), str(bad), "--system", "dgx-h100"]) == 2
    captured = capsys.readouterr()
    assert f"# {ALLTOALL}: alltoall_perf" in captured.out
    assert captured.err == (f"flowsim check: error: {bad}: no '#  size  count  type ...' table header and no "
                            "'# nThread' line: is this nccl-tests output? (not checked)\n")
    # --json: an array wherever several runs were given, read or not (the reports of those read).
    assert flowsim_check([str(ALLTOALL), str(bad), "--system", "dgx-h100", "--json"]) == 2
    reports = json.loads(capsys.readouterr().out)
    assert isinstance(reports, list) and [r["source"] for r in reports] == [str(ALLTOALL)]
    # None readable: each one's error line, nothing printed.
    assert flowsim_check([str(bad), str(bad), "--system", "dgx-h100"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == 2 * (f"flowsim check: error: {bad}: no '#  size  count  type ...' "
                                                       "table header and no '# nThread' line: is this nccl-tests "
                                                       "output? (not checked)\n")


def test_a_page_of_runs_each_cut_to_its_table_is_read_run_by_run():
    # A how-to page: a whole run, a sentence, a run pasted from its rank lines on, another
    # from its caption on (no rank lines: the shape comes from the arguments).
    lines = ALL_GATHER.read_text().splitlines(keepends=True)
    using = lines.index("# Using devices\n")
    caption = next(n for n, line in enumerate(lines) if "out-of-place" in line)
    prose = "\nOn the next server, the output should look as below.\n\n"
    text = "".join(lines) + prose + "".join(lines[using:]) + prose + "".join(lines[caption:])
    logs = parse_nccl_logs(text, collective="all_gather", nodes=1, gpus_per_node=8)
    whole = parse_nccl_log(ALL_GATHER)
    assert len(logs) == 3
    assert [[(r.size_bytes, r.out_of_place) for r in log.rows] for log in logs] == \
        [[(r.size_bytes, r.out_of_place) for r in whole.rows]] * 3
    assert [log.ranks_from for log in logs][:2] == ["rank lines"] * 2 and logs[2].ranks_from != "rank lines"
    assert logs[1].hosts == whole.hosts and logs[1].n_ranks == logs[2].n_ranks == 8
    # Each run's lines are the whole text's: the second run's first row follows the prose.
    second_start = len(lines) + prose.count("\n")
    assert logs[1].rows[0].line == second_start + (whole.rows[0].line - using)
    assert logs[0].rows[-1].line == whole.rows[-1].line


# NVIDIA/nccl#340's paste: the tail of a run as an older nccl-tests printed its rows (no redop
# and root, '#wrong' as '0e+00'), without its header, then the next command and its nThread line.
OLD_ROWS_THEN_NEXT_RUN = """```
       32768          4096   float    13.39    1.22    1.22  0e+00    11.85    1.38    1.38  0e+00
       65536          8192   float    16.57    1.98    1.98  0e+00    13.83    2.37    2.37  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 6.6972

./broadcast_perf -b 8 -e 128M -f 2 -g 2
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20
"""


def test_rows_without_their_header_then_the_next_run_are_two_runs():
    # The rows open their run's table as a header would: the nThread line after them starts
    # the next run, which the paste cut before its table (one error, not the whole file's).
    unread = []
    logs = parse_nccl_logs(OLD_ROWS_THEN_NEXT_RUN, collective="all_gather", nodes=1, gpus_per_node=2, errors=unread)
    assert [(r.size_bytes, r.line) for log in logs for r in log.rows] == [(32768, 2), (65536, 3)]
    assert [str(err) for err in unread] == [
        "<text>, line 8: output ends before the '#  size  count  type ...' table header (truncated?)"]
    # The command line goes with the run it starts, not with the rows before it.
    header = "#  size  count  type  root  time  algbw  busbw  error  time  algbw  busbw  error\n"
    row = "     1048576        262144   float     0    47.38   22.13   22.13  0e+00    46.84   22.39   22.39  0e+00\n"
    unread = []
    logs = parse_nccl_logs(OLD_ROWS_THEN_NEXT_RUN + header + row, nodes=1, gpus_per_node=2, errors=unread)
    assert [log.binary for log in logs] == ["broadcast_perf"] and logs[0].rows[0].line == 10
    assert len(unread) == 1 and "cannot tell which nccl-tests binary" in str(unread[0])
    # Read as one run, the second run is refused by its line, naming no Python function.
    with pytest.raises(InputError, match=r"^<text>, line 8: a second nccl-tests run starts here, where one run was "
                       r"expected$"):
        parse_nccl_log(OLD_ROWS_THEN_NEXT_RUN, collective="all_gather", nodes=1, gpus_per_node=2)


# nccl-tests#182: two processes of nccl-tests built without MPI (2 GPUs each) printing to one
# stream, their rows interleaved, each table closed by its own average.
INTERLEAVED = """#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong
   134217728      33554432     float     sum      -1    29770    4.51    4.51      0    29873    4.49    4.49      0
   134217728      33554432     float     sum      -1    27666    4.85    4.85      0    27662    4.85    4.85      0
   268435456      67108864     float     sum      -1    55270    4.86    4.86      0    55213    4.86    4.86      0
testgpu1:2832:2832 [1] NCCL INFO comm 0x55c6f1c65b50 rank 0 nranks 2 cudaDev 0 busId 3000 - Destroy COMPLETE
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.7535
#

   268435456      67108864     float     sum      -1    59440    4.52    4.52      0    59568    4.51    4.51      0
# Avg bus bandwidth    : 1.6796
"""


def test_a_sweep_run_again_is_said_as_run_cycles():
    # nccl-tests' -N 3 prints its sizes three times in one table (src/common.cu, run_cycles).
    text = ALL_REDUCE_4.read_text()
    rows = [line for line in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    cycled = text.replace("\n".join(rows), "\n".join(rows * 3))
    log = parse_nccl_log(cycled)
    assert len(log.rows) == 3 * len(rows)
    first = log.rows[0].line
    assert (f"line {first + len(rows)}: the sizes run again from this line (first on line {first}), 3 times in all: "
            "nccl-tests' -N (run cycles), or a second process's table after the first; each row is checked"
            ) in log.warnings
    # With -d all (or -o all, -r -1) each block runs its cycles in turn.
    doubles = [row.replace("float", "double") for row in rows]
    blocks = parse_nccl_log(text.replace("\n".join(rows), "\n".join(rows * 2 + doubles * 2)))
    assert any("nccl-tests' -N (run cycles)" in w for w in blocks.warnings)
    assert not any("interleaved" in w for w in blocks.warnings)


def test_two_processes_interleaved_are_said_not_dropped():
    log = parse_nccl_log(INTERLEAVED, collective="all_reduce", nodes=1, gpus_per_node=2)
    assert [r.line for r in log.rows] == [2, 3, 4]
    assert ("line 10: a row after the table's closing '# Avg bus bandwidth' line; skipped: another process's table "
            "interleaved with this one? (nccl-tests built without MPI runs one test per process, each printing its "
            "own)") in log.warnings
    assert ("line 3: size 134217728 B printed a second time in the same table (first on line 2): two processes' "
            "tables interleaved? (nccl-tests built without MPI runs one test per process, each printing its own); "
            "each row is checked") in log.warnings
    # Sizes nccl-tests rounds to the same one are not: size 0 (below a rank's element), or
    # sizes a step in bytes (-i) finer than an element apart.
    nthread = "# nThread 1 nGpus 2 minBytes 134217728 maxBytes 268435456 step: {}\n"
    zeros = INTERLEAVED.replace("134217728      33554432", "0             0").split("testgpu1")[0]
    for text in (zeros, nthread.format("2(bytes)") + INTERLEAVED):
        assert not any("printed a second time" in w
                       for w in parse_nccl_log(text, collective="all_reduce", nodes=1, gpus_per_node=2).warnings)
    assert any("printed a second time" in w for w in parse_nccl_log(
        nthread.format("2(factor)") + INTERLEAVED, collective="all_reduce", nodes=1, gpus_per_node=2).warnings)


def test_a_header_without_hashes_and_prose_after_a_table():
    # Output shown through a tool that drops '#' (dstack's docs: 'wrong' for '#wrong'), and a
    # sentence after the table that starts with a number: not a row.
    text = ALL_GATHER.read_text().replace("#wrong", "wrong").replace("# Avg bus bandwidth    : 232.948 \n", "")
    text += "356 GB/s bus bandwidth at 8 GiB, at parity with the run before on the other fabric.\n"
    log = parse_nccl_log(text, collective="all_gather")
    assert [r.size_bytes for r in log.rows] == [r.size_bytes for r in parse_nccl_log(ALL_GATHER).rows]
    # A row cut after its size where the output ends is skipped, with a warning; one the
    # table's average follows is still a truncated row.
    cut = parse_nccl_log(text + "2\n", collective="all_gather")
    assert cut.rows == log.rows
    assert f"line {len(text.splitlines()) + 1}: the output ends inside this row (1 of 13 columns); skipped, the " \
        f"{len(log.rows)} complete rows before it are checked" in cut.warnings
    with pytest.raises(InputError, match=r"got 1 \(truncated row\?\): '2'"):
        parse_nccl_log(text + "2\n# Avg bus bandwidth    : 232.948\n", collective="all_gather")


def test_a_table_kept_as_comments_is_said_so():
    # A run kept in a Makefile or a script, each row behind a '#': not a table cut short.
    text = "\n".join("#" + line if line[:1] == " " else line for line in _lines(SENDRECV))
    first = _first_row_line(SENDRECV.read_text())
    with pytest.raises(InputError, match=rf"^<text>, line {first}: the table's rows are comment lines \('#' before "
                                         r"each, as on this line\): remove the '#' to check them$"):
        parse_nccl_log(text)


def test_not_nccl_tests_output_and_two_runs(tmp_path):
    with pytest.raises(InputError, match="no '#  size  count  type ...' table header and no '# nThread' line"):
        parse_nccl_log("hello\nworld\n")
    with pytest.raises(InputError, match=r"line 31: a second nccl-tests run starts here"):
        parse_nccl_log(ALL_GATHER.read_text() + ALL_GATHER.read_text(), collective="all_gather")
    with pytest.raises(InputError, match="cannot read nccl-tests output"):
        parse_nccl_log(tmp_path / "missing.txt")


def test_healthy_sample_is_not_flagged():
    report = check_nccl_log(SENDRECV, system="dgx-h100", nodes=2, min_bytes=LARGE)
    assert report.ok and report.system == "dgx_h100" and report.algorithm == "p2p"
    predicted = [r for r in report.rows if r.predicted_busbw_GBps is not None]
    assert [r.size_bytes for r in predicted] == [512 << 20, 1 << 30]
    # One NDR NIC between the two servers: about 48 GB/s predicted, 47 measured.
    assert all(45 < r.predicted_busbw_GBps < 50 and 0.9 < r.ratio_out < 1.05 for r in predicted)
    assert all(r.predicted_time_us is None and not r.flagged for r in report.rows[:-2])


def test_the_report_says_what_bounds_each_predicted_size():
    # A send between two DGX H100 crosses one NDR NIC (48 GB/s effective) from end to end: its
    # link carries the size at the predicted busbw, busy that share of the predicted time.
    report = check_nccl_log(SENDRECV, system="dgx-h100", nodes=2, min_bytes=LARGE)
    predicted = [r for r in report.rows if r.predicted_busbw_GBps is not None]
    assert all(r.busiest_tier == "InfiniBand" and r.busiest_link == "n0.nic0->ib.su0.rail0" for r in predicted)
    assert [r.busiest_utilization for r in predicted] == pytest.approx([r.predicted_busbw_GBps / 48 for r in predicted])
    assert all(r.busiest_tier is None and r.busiest_utilization is None for r in report.rows[:-2])
    assert "# what bounds the predicted time: InfiniBand at 512 MiB-1 GiB (its use 99%)" in report.format_text()
    assert json.loads(report.to_json())["rows"][-1]["busiest_tier"] == "InfiniBand"
    # From 1 MiB: no link is busy half of the smallest size's time.
    line = next(x for x in check_nccl_log(SENDRECV, system="dgx-h100", nodes=2).format_text().splitlines()
                if x.startswith("# what bounds"))
    assert line.startswith("# what bounds the predicted time: latency at 1 MiB (busiest link ")
    assert line.endswith(", InfiniBand at 2 MiB-1 GiB (its use 65-99%)")


def test_short_sizes_say_where_to_look_by_what_bounds_them():
    # The degraded sample ran rings: under NCCL_ALGO=Ring its 1-2 GiB rows are SHORT where the
    # NICs bound the model (a ring across two servers, the NDR links near full).
    report = check_nccl_log(DEGRADED, system="dgx-h100", nccl_env={"NCCL_ALGO": "Ring"}, min_bytes=1 << 30)
    assert [r.busiest_tier for r in report.short] == ["InfiniBand", "InfiniBand"]
    assert ("# SHORT where InfiniBand bounds the prediction (1 GiB-2 GiB): look at the network (NIC ports and "
            "their speed, cables, switches, GPUDirect RDMA)") in report.format_text().splitlines()
    # Checked as NCCL's choice, NVLSTree, NVLS's budget bounds the same rows, but NCCL's ring
    # (what it runs without NVLS) is still twice as fast as the log: the network again, not NVLS.
    text = check_nccl_log(DEGRADED, system="dgx-h100", min_bytes=1 << 30).format_text()
    assert "NVLS-budget at 1 GiB-2 GiB" in text and "look at whether NCCL ran NVLink SHARP" not in text
    assert ("# SHORT at 1 GiB-2 GiB, predicted with nvls_tree: not NVLS missing on the cluster, since NCCL's best "
            "choice without it (ring/simple) is faster than measured too; InfiniBand bounds that choice: look at the "
            "network") in text
    # No SHORT row, no such line.
    assert "# SHORT where" not in check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=LARGE).format_text()
    # An H100 log checked as a DGX A100 is FAST where the A100's NVLinks bound the model.
    fast = check_nccl_log(ALL_GATHER, system="dgx-a100", min_bytes=1 << 30)
    assert [r.busiest_tier for r in fast.fast] == ["NVLink"]
    assert ("# FAST where NVLink bounds the prediction (1 GiB): check the system's GPUs and NVLinks (generation, "
            "links a GPU: --system)") in fast.format_text().splitlines()


def test_degraded_sample_is_flagged_short():
    report = check_nccl_log(DEGRADED, system="dgx_h100", threshold=0.1, min_bytes=1 << 30)
    flagged = report.flagged
    assert [r.size_bytes for r in flagged] == [1 << 30, 2 << 30]
    assert all(r.short and not r.wrong and r.ratio_out < 0.6 for r in flagged)
    # the same rows pass once the threshold allows a 65% shortfall (NCCL's default on two
    # DGX H100 at these sizes is NVLSTree, predicted near 490 GB/s; the log shows 184)
    assert check_log(parse_nccl_log(DEGRADED), system="dgx-h100", threshold=0.65, min_bytes=1 << 30).ok


def test_wrong_elements_are_flagged():
    lines = _lines(SENDRECV)
    tokens = lines[21].split()
    tokens[8] = "3"  # the out-of-place run's: nccl-tests reports no in-place sendrecv's (src/sendrecv.cu)
    lines[21] = "  ".join(tokens)
    report = check_nccl_log("\n".join(lines), system="dgx-h100", min_bytes=1 << 30)
    assert report.rows[-1].wrong and report.rows[-1].flagged and not report.ok
    assert report.format_text().splitlines()[-1].startswith(
        "# 1 of 1 predicted size flagged: 1 with wrong elements (WRONG: nccl-tests found corrupt results);")
    # Counted whether or not the size is also slow: a corrupt and degraded run says both.
    lines[21] = ("  1073741824     268435456     float     sum      -1  45715.2   23.49   23.49       3  45533.0   23.58"
                 "   23.58       3")
    degraded = check_nccl_log("\n".join(lines), system="dgx-h100", min_bytes=1 << 30)
    summary = degraded.format_text().splitlines()[-1]
    assert summary.startswith("# 1 of 1 predicted size flagged: 1 slower than predicted (SHORT), 1 with wrong "
                              "elements (WRONG: nccl-tests found corrupt results);")
    assert json.loads(degraded.to_json())["n_wrong"] == 1


def test_a_log_that_differs_from_the_system_given_is_warned_about_one_line_each():
    report = check_nccl_log(SENDRECV, system="dgx-a100", nodes=4, min_bytes=1 << 30)
    assert report.nodes == 2
    assert len(report.warnings) == 3
    gpu, hosts, ranks = report.warnings
    assert "H100" in gpu and "not the A100 of a dgx_a100 server: check --system" in gpu
    assert hosts == "the log names 2 host(s) (dgx-b11, dgx-b12), not 4 (--nodes): predicting on the 2 it names"
    assert ranks == "the log has 2 ranks on 2 host(s); 2 x dgx_a100 has 16 GPUs: predicting the 2 ranks it names"
    text = report.format_text().splitlines()
    assert text[1:4] == [f"# warning: {w}" for w in report.warnings]
    assert check_nccl_log(ALL_GATHER, system="dgx-h100", min_bytes=8 << 30).warnings == ()
    # An H200 log is no H20's: the model was matched as a substring, and "H20" is in "H200".
    h200 = ALL_GATHER.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H200")
    from flowsim.systemfile import find_system

    h20 = find_system("hgx-h20").spec
    warnings = check_nccl_log(h200, system=h20, collective="all_gather", min_bytes=8 << 30).warnings
    assert warnings[0] == "the log's GPUs are NVIDIA H200, not the H20 of a hgx_h20 server: check --system"


def test_a_log_of_another_form_of_the_systems_gpu_is_warned_about():
    # The model matched, so an H100 PCIe log passed on an NVSwitch server without a word; so did
    # an A100 SXM log on a box of PCIe cards, and any log on the RTX presets.
    pcie = ALL_GATHER.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe")
    warnings = check_nccl_log(pcie, system="dgx-h100", collective="all_gather", min_bytes=8 << 30).warnings
    assert warnings == ("the log's GPUs are NVIDIA H100 PCIe, PCIe cards, where a dgx_h100 server's are on "
                        "NVSwitches: check --system",)
    a100 = VALIDATION / "oci_bmgpu48_a100_1n8g_allreduce.txt"
    box = dataclasses.replace(preset_spec("rtx4090_8x"), gpu="A100", name="a100_pcie_box")
    assert ("the log's GPUs are NVIDIA A100-SXM4-40GB, SXM modules, where a a100_pcie_box server's are PCIe cards "
            "without NVLink: check --system") in check_nccl_log(a100, system=box, min_bytes=8 << 30).warnings
    assert ("the log's GPUs are NVIDIA A100-SXM4-40GB, not the RTX 4090 of a rtx4090_8x server: check --system"
            in check_nccl_log(a100, system="rtx4090-8x", min_bytes=8 << 30).warnings)
    assert check_nccl_log(a100, system="dgx-a100", min_bytes=8 << 30).warnings == ()
    # The bridged H100 NVL is a PCIe card too; an H100 SXM's name says HBM3, not SXM.
    nvl = ALL_GATHER.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL")
    assert "PCIe cards, where a dgx_h100 server's are on NVSwitches" in check_nccl_log(
        nvl, system="dgx-h100", collective="all_gather", min_bytes=8 << 30).warnings[0]
    cards = dataclasses.replace(preset_spec("rtx4090_8x"), gpu="H100", name="h100_cards")
    assert "NVIDIA H100 80GB HBM3, SXM modules, where a h100_cards server's are PCIe cards" in check_nccl_log(
        ALL_GATHER, system=cards, collective="all_gather", min_bytes=8 << 30).warnings[0]


def test_rows_faster_than_predicted_are_flagged_fast():
    # An H100 log checked as DGX A100: the cluster beats the model, so the system is wrong.
    report = check_nccl_log(ALL_GATHER, system="dgx-a100", min_bytes=1 << 30)
    assert report.flagged and report.flagged == report.fast and not report.short
    assert all(r.fast and not r.short and r.ratio_out > 1.1 and r.error_out < -0.09 for r in report.flagged)
    assert report.format_text().splitlines()[-1] == (
        "# 1 of 1 predicted size flagged: 1 faster than predicted (FAST: check --system and the model); "
        "not predicted: 10 below min-bytes"
    )
    assert next(line for line in report.format_text().splitlines() if line.split()[0] == str(1 << 30)).endswith("FAST")
    assert check_nccl_log(ALL_GATHER, system="dgx-h100", min_bytes=1 << 30).ok


def test_error_by_size_band():
    report = check_nccl_log(ALL_GATHER, system="dgx-h100", min_bytes=32 << 20)
    bands = report.error_by_band()
    assert [b.label for b in bands] == ["1 MiB - 64 MiB", "64 MiB - 1 GiB", ">= 1 GiB"]
    assert [b.n_sizes for b in bands] == [1, 4, 1]
    for band in bands:
        rows = [r for r in report.rows if r.predicted_time_us is not None and r.size_bytes in range(32 << 20, 2 << 30)]
        errors = [r.error_out for r in rows]
        assert band.median_abs >= 0 and abs(band.worst) >= band.median_abs and band.worst in errors
    assert "# error of the prediction by size" in report.format_text()
    assert [b["label"] for b in json.loads(report.to_json())["error_by_band"]] == [b.label for b in bands]
    text = SENDRECV.read_text().replace("device  0 [0000:18:00]", "device  9 [0000:18:00]", 1)
    with pytest.raises(InputError, match=r"line 6: rank 0 uses device 9, which a dgx_h100 server does not have"):
        check_nccl_log(text, system="dgx-h100", min_bytes=1 << 30)


def test_report_json_and_text():
    report = check_nccl_log(DEGRADED, system="dgx-h100", min_bytes=2 << 30)
    data = json.loads(report.to_json())
    assert (data["binary"], data["ranks"], data["hosts"], data["n_flagged"]) == (
        "all_reduce_perf",
        16,
        ["dgx-c01", "dgx-c02"],
        1,
    )
    assert data["rows"][-1]["flagged"] and data["rows"][-1]["ratio_out"] < 0.6
    text = report.format_text().splitlines()
    row = next(line for line in text if line.split()[0] == str(2 << 30))
    assert row.endswith("SHORT") and text[-1].startswith("# 1 of 1") and text[-2].startswith("#   >= 1 GiB")
    assert (
        text[-1] == "# 1 of 1 predicted size flagged: 1 slower than predicted (SHORT); not predicted: 7 below min-bytes"
    )


def test_summary_counts_the_predicted_sizes(sendrecv_report):
    summary = sendrecv_report.format_text().splitlines()[-1]
    assert summary == "# the predicted size is OK; not predicted: 10 below min-bytes"
    lines = _lines(SENDRECV)
    lines[11] = lines[11].replace("     1048576        262144", "           0             0", 1)
    lines[12] = lines[12].rsplit(None, 1)[0] + "      3"
    report = check_nccl_log("\n".join(lines), system="dgx-h100", min_bytes=1 << 30)
    assert report.format_text().splitlines()[-1] == (
        "# the predicted size is OK; not predicted: 9 below min-bytes, 1 of 0 bytes (1 flagged WRONG)"
    )


def test_history_appends_and_reads_back(tmp_path):
    path = tmp_path / "history.h5"
    first = check_nccl_log(DEGRADED, system="dgx-h100", min_bytes=1 << 30)
    second = check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30)
    assert append_history(first, path) == 0
    assert append_history(second, path) == 1
    history = read_history(path)
    assert history.n_checks == 2
    assert history.checks["binary"].tolist() == ["all_reduce_perf", "sendrecv_perf"]
    assert history.checks["n_flagged"].tolist() == [2, 0]
    rows = history.rows
    assert rows["check_id"].tolist() == [0] * 8 + [1] * 11
    assert rows["size_bytes"][:8].tolist() == [r.size_bytes for r in first.rows]
    ratio = rows["ratio"][:8]
    assert np.isnan(ratio[:6]).all() and (ratio[6:] < 0.6).all()
    assert rows["flagged"][:8].tolist() == [False] * 6 + [True] * 2
    with h5py.File(path) as f:
        assert f["rows/ratio"].maxshape == (None,) and f.attrs["format"] == "flowsim-nccl-check-history"


def test_a_version_1_history_still_loads_and_takes_new_checks(tmp_path, sendrecv_report):
    path = tmp_path / "history.h5"
    append_history(sendrecv_report, path)
    # What a version 1 writer left: no n_fast, warnings or fast datasets.
    with h5py.File(path, "r+") as f:
        for name in ("checks/n_fast", "checks/warnings", "rows/fast"):
            del f[name]
        f.attrs["version"] = 1
    old = read_history(path)
    assert old.checks["n_fast"].tolist() == [0] and old.checks["warnings"].tolist() == [""]
    assert old.rows["fast"].tolist() == [False] * 11
    faster = check_nccl_log(ALL_GATHER, system="dgx-a100", min_bytes=1 << 30)
    assert append_history(faster, path) == 1
    both = read_history(path)
    assert both.checks["n_fast"].tolist() == [0, 1]
    assert both.checks["warnings"][0] == "" and "not the A100 of a dgx_a100 server" in both.checks["warnings"][1]
    assert both.rows["fast"].tolist() == [False] * 11 + [False] * 10 + [True]
    assert all(len(column) == 2 for column in both.checks.values())
    assert all(len(column) == 22 for column in both.rows.values())
    with h5py.File(path) as f:
        assert f.attrs["version"] == 4


def test_a_version_2_history_takes_each_rows_root_type_and_reduction(tmp_path, sendrecv_report):
    path = tmp_path / "history.h5"
    append_history(sendrecv_report, path)
    with h5py.File(path, "r+") as f:  # what a version 2 writer left
        for name in ("rows/root", "rows/dtype", "rows/redop"):
            del f[name]
        f.attrs["version"] = 2
    assert read_history(path).rows["dtype"].tolist() == [""] * 11
    # A run of two types: its blocks told apart in the history.
    typed = check_nccl_log(_typed_log(("float", "sum"), ("int8", "sum")), system="dgx-h100")
    assert append_history(typed, path) == 1
    rows = read_history(path).rows
    assert rows["dtype"].tolist() == [""] * 11 + ["float", "float", "int8", "int8"]
    assert rows["redop"][11:].tolist() == ["sum"] * 4 and rows["root"].tolist() == [-1] * 15


def test_history_refuses_other_files_and_leaves_them_as_they_are(tmp_path, sendrecv_report):
    other, unformatted, text = tmp_path / "other.h5", tmp_path / "mydata.h5", tmp_path / "notes.txt"
    with h5py.File(other, "w") as f:
        f.attrs["format"] = "something else"
    with h5py.File(unformatted, "w") as f:
        f["experiment/results"] = [1.0, 2.0]
    text.write_text("not HDF5\n")
    for path, message in (
        (other, r"not a flowsim check history \(format 'something else'"),
        (unformatted, r"mydata.h5: an HDF5 file that is not a flowsim check history \(no 'format' attribute"),
        (text, "notes.txt: cannot open it as a check history"),
    ):
        before = path.read_bytes()
        with pytest.raises(InputError, match=message):
            append_history(sendrecv_report, path)
        assert path.read_bytes() == before
    with pytest.raises(InputError, match="no such check history file"):
        read_history(tmp_path / "absent.h5")


def test_an_empty_file_becomes_a_history(tmp_path, sendrecv_report):
    empty, empty_hdf5 = tmp_path / "empty.h5", tmp_path / "empty_hdf5.h5"
    empty.touch()
    h5py.File(empty_hdf5, "w").close()
    for path in (empty, empty_hdf5):
        assert append_history(sendrecv_report, path) == 0
        assert read_history(path).n_checks == 1


def test_an_interrupted_append_leaves_the_history_as_it_was(tmp_path, sendrecv_report, monkeypatch):
    path = tmp_path / "history.h5"
    append_history(sendrecv_report, path)
    before = path.read_bytes()
    real_append = flowsim.check.history._append

    def interrupted_after_the_checks_row(group, columns, values):
        if group.name == "/rows":
            raise KeyboardInterrupt
        real_append(group, columns, values)

    monkeypatch.setattr(flowsim.check.history, "_append", interrupted_after_the_checks_row)
    with pytest.raises(KeyboardInterrupt):
        append_history(sendrecv_report, path, force=True)
    # No temporary file is left; the lock file stays (see flowsim.files.locked).
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [".history.h5.lock", "history.h5"]


def _append_times(report, path, n):
    for _ in range(n):
        append_history(report, path, force=True)


def test_checks_appending_to_one_history_at_once_all_land(tmp_path, sendrecv_report):
    # Each append copies the history and renames the copy over it: without taking turns,
    # one process's check was replaced by the other's copy.
    path = tmp_path / "history.h5"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_times, args=(sendrecv_report, path, 6)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    assert sorted(read_history(path).checks["check_id"].tolist()) == list(range(18))


def test_a_history_behind_a_symbolic_link_is_appended_where_it_lives(tmp_path, sendrecv_report):
    shared, link = tmp_path / "shared.h5", tmp_path / "link.h5"
    append_history(sendrecv_report, shared)
    link.symlink_to(shared)
    assert append_history(sendrecv_report, link, force=True) == 1
    assert link.is_symlink() and read_history(shared).n_checks == 2


def test_plot_history(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "history.h5"
    append_history(check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30), path)
    out = plot_history(path, tmp_path / "trend.png")
    assert out.stat().st_size > 0
    with pytest.raises(InputError, match="no check of alltoall_perf"):
        plot_history(path, tmp_path / "none.png", binary="alltoall_perf")


def test_plot_history_draws_a_line_per_size_and_block(tmp_path):
    # A -d all -o all run prints a block of sizes per type and reduction: each block of a
    # size is its own line, labelled with the block; a run of one block, by size alone.
    path = tmp_path / "history.h5"
    append_history(check_nccl_log(_typed_log(("float", "sum"), ("int8", "sum")), system="dgx-h100"), path)
    history = read_history(path)
    selected = np.isfinite(history.rows["ratio"])
    lines = _history_lines(history.rows, selected)
    assert [label for label, _ in lines] == ["64M float sum", "64M int8 sum", "128M float sum", "128M int8 sum"]
    assert all(len(rows) == 1 for _, rows in lines)
    single = tmp_path / "single.h5"
    append_history(check_nccl_log(_typed_log(("float", "sum")), system="dgx-h100"), single)
    plain = read_history(single)
    assert [label for label, _ in _history_lines(plain.rows, np.isfinite(plain.rows["ratio"]))] == ["64M", "128M"]


def test_plot_path_is_checked_before_the_history_is_read(tmp_path):
    pytest.importorskip("matplotlib")
    absent = tmp_path / "absent.h5"
    for output, message in (
        (tmp_path / "trend.xyz", r"trend.xyz: the history plot needs a file name ending in an image format.*png"),
        (tmp_path / "trend", "needs a file name ending in an image format"),
        (tmp_path / "nodir" / "trend.png", "the directory .*nodir' does not exist"),
    ):
        with pytest.raises(InputError, match=message):
            plot_history(absent, output)
    assert history_plot_file(tmp_path / "TREND.SVG") == tmp_path / "TREND.SVG"


@pytest.fixture
def no_matplotlib(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_matplotlib)


def test_plot_without_matplotlib_says_what_to_install(tmp_path, no_matplotlib):
    with pytest.raises(ImportError, match=r"pip install 'flowsim\[plot\]'"):
        plot_history(tmp_path / "history.h5", tmp_path / "trend.png")


def test_cli_exit_status_output_and_history(tmp_path, capsys):
    history = tmp_path / "h.h5"
    argv = ["--system", "dgx-h100", "--nodes", "2", "--min-bytes", "1G", "--history", str(history)]
    assert flowsim_check([str(DEGRADED), *argv]) == 1
    out = capsys.readouterr()
    assert "2 of 2 predicted sizes flagged" in out.out and "check 0 appended" in out.err
    assert flowsim_check([str(SENDRECV), *argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_flagged"] == 0
    assert read_history(history).n_checks == 2
    assert flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--nodes", "4", "--min-bytes", "1G"]) == 0
    assert "# warning: the log names 2 host(s) (dgx-b11, dgx-b12), not 4 (--nodes)" in capsys.readouterr().out
    rankless = tmp_path / "sendrecv_perf.txt"
    rankless.write_text("\n".join(line for line in _lines(SENDRECV) if "Rank" not in line))
    assert flowsim_check([str(rankless), "--system", "dgx-h100", "--min-bytes", "1G"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line, naming the flags to pass
    assert (
        flowsim_check(
            [str(rankless), "--system", "dgx-h100", "--nodes", "2", "--gpus-per-node", "1", "--min-bytes", "1G"]
        )
        == 0
    )
    assert flowsim_check(["--plot", str(tmp_path / "p.png")]) == 2
    assert "--history" in capsys.readouterr().err


def _stdin(monkeypatch, data: bytes) -> None:
    """Standard input holding ``data``, as a pipe would give it."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_cli_reads_the_output_from_standard_input(monkeypatch, capsys):
    argv = ["--system", "dgx-h100", "--min-bytes", "1G", "--json"]
    assert flowsim_check([str(DEGRADED), *argv]) == 1
    from_file = json.loads(capsys.readouterr().out)
    # Piped in with a launcher's prefix on every line and bytes that are not UTF-8 in a line of
    # prose (first: a UTF-16 byte order mark, but no UTF-16 text after it).
    piped = b"".join(b"[1,0]<stdout>:" + line for line in DEGRADED.read_bytes().splitlines(keepends=True))
    _stdin(monkeypatch, b"\xff\xfe not UTF-8\n" + piped)
    assert flowsim_check(["-", *argv]) == 1
    from_stdin = json.loads(capsys.readouterr().out)
    assert (from_file["source"], from_stdin["source"]) == (str(DEGRADED), "<stdin>")
    assert from_stdin["n_short"] == from_file["n_short"] == 2
    assert {**from_stdin, "source": "", "checked_at": ""} == {**from_file, "source": "", "checked_at": ""}


@pytest.mark.parametrize(("argv", "data", "message"), [
    (["-", "-"], b"", "standard input ('-') is read once: name it once"),
    (["-"], b"", "<stdin>: empty: no nccl-tests output in it"),
    (["-"], b"all good\n", "<stdin>: no '#  size  count  type ...' table header"),
    ([], b"", "give an nccl-tests output file ('-' reads it from standard input), or --history with --plot"),
])
def test_cli_standard_input_that_cannot_be_checked_says_why_in_one_line(monkeypatch, capsys, argv, data, message):
    _stdin(monkeypatch, data)
    assert flowsim_check([*argv, "--system", "dgx-h100"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1 and captured.out == ""


def _log_of(*gpus):
    """A parsed log whose rank lines name ``gpus``, one rank each on one host."""
    rank_lines = "\n".join(f"#  Rank {r} Group  0 Pid {100 + r} on host device {r} [0000:{r:02x}:00] {gpu}"
                           for r, gpu in enumerate(gpus))
    return parse_nccl_log(f"# Using devices\n{rank_lines}\n" + "\n".join(
        line for line in _lines(SENDRECV) if "Rank" not in line and "Using devices" not in line))


@pytest.mark.parametrize(("gpu", "system"), [
    ("NVIDIA H100 80GB HBM3", "dgx-h100"), ("NVIDIA H200", "dgx-h200"), ("NVIDIA A100-SXM4-40GB", "dgx-a100"),
    ("NVIDIA A100-SXM4-80GB", "dgx-a100"), ("NVIDIA B200", "dgx-b200"), ("NVIDIA B300 SXM6 AC", "dgx-b300"),
    ("NVIDIA GB200", "gb200-nvl72"), ("Tesla V100-SXM2-32GB", "dgx1-v100"),
    # The GPUs NVIDIA sells in China, on the HGX servers flowsim ships for them; "H20" is a
    # piece of "H200" and "GH200", which keep their own.
    ("NVIDIA H800", "hgx-h800"), ("NVIDIA H20", "hgx-h20"), ("NVIDIA A800-SXM4-80GB", "hgx-a800"),
])
def test_a_log_without_system_is_checked_on_nvidias_server_of_its_gpu(gpu, system):
    assert default_system(_log_of(gpu, gpu)) == system


@pytest.mark.parametrize(("gpu", "ranks", "pcie", "sockets", "p2p"), [
    # GeForce cards have no peer-to-peer; the others have it, though not between root ports.
    # One socket for up to 4 GPUs or an odd count, else two; the card's own PCIe generation.
    ("NVIDIA GeForce RTX 4090", 8, "pcie4", 2, False), ("NVIDIA GeForce RTX 5090", 4, "pcie5", 1, False),
    ("NVIDIA GeForce RTX 2080 Ti", 2, "pcie3", 1, False), ("NVIDIA L40S", 8, "pcie4", 2, True),
    ("NVIDIA H100 PCIe", 2, "pcie5", 1, True), ("NVIDIA A100 80GB PCIe", 4, "pcie4", 1, True),
    ("NVIDIA RTX A6000", 3, "pcie4", 1, True), ("Tesla T4", 6, "pcie3", 2, True), ("NVIDIA L4", 5, "pcie4", 1, True),
])
def test_a_log_of_pcie_cards_on_one_host_is_checked_on_a_guessed_box(gpu, ranks, pcie, sockets, p2p):
    box = default_system(_log_of(*[gpu] * ranks))
    assert isinstance(box, ServerSpec)
    assert (box.gpu, box.n_gpus, box.gpu_fabric, box.pcie, box.sockets, box.p2p, box.n_nics) == (
        gpu, ranks, "pcie", pcie, sockets, p2p, 0)
    assert all(len(switch.gpus) == 1 for switch in box.switches)  # each on its own root port


def test_a_guessed_box_of_8_rtx_4090_is_the_rtx4090_8x_preset_named_as_a_guess():
    box = default_system(_log_of(*["NVIDIA GeForce RTX 4090"] * 8))
    assert box == replace(preset_spec("rtx4090_8x"), gpu="NVIDIA GeForce RTX 4090", name=box.name)
    # Not the preset's name (a box of 6, or one with peer-to-peer, is none of it), nor a name
    # --system would take for a preset.
    assert box.name == "guessed_8x_nvidia_geforce_rtx_4090"
    assert default_system(_log_of(*["NVIDIA GeForce RTX 4090"] * 6)).name == "guessed_6x_nvidia_geforce_rtx_4090"


def _box_log(path, gpu, n=2, info=""):
    """SENDRECV's rows on one host ``box`` of ``n`` GPUs ``gpu`` (NCCL INFO lines ``info`` first), written to ``path``."""
    rank_lines = "\n".join(f"#  Rank {r} Group  0 Pid 100 on box device {r} [0000:{r + 1:02x}:00] {gpu}"
                           for r in range(n))
    path.write_text(f"{info}# Using devices\n{rank_lines}\n" + "\n".join(
        line for line in _lines(SENDRECV) if "Rank" not in line and "Using devices" not in line))
    return path


def test_cli_names_each_runs_system_a_guessed_box_as_a_guess(tmp_path, capsys):
    box = _box_log(tmp_path / "box.txt", "NVIDIA L4")
    flowsim_check([str(box), str(SENDRECV), "--min-bytes", "1G", "--brief"])
    assert capsys.readouterr().err.splitlines()[0] == (
        "flowsim check: no --system: checking each run on NVIDIA's server of its GPU, or a box of PCIe cards as "
        "flowsim guesses it: guessed_2x_nvidia_l4 (2 x NVIDIA L4 on PCIe Gen4, each on its own root port, over 1 "
        "socket (Sapphire Rapids): copies staged through host memory) for run 1 (NVIDIA L4), dgx-h100 for run 2 "
        "(NVIDIA H100 80GB HBM3); a box's layout is a guess, and the figures move with it: --system names the box's "
        "own (a preset, or a system file; 'flowsim system import' writes one from its 'nvidia-smi topo -m')")


def test_cli_says_where_a_guessed_box_lacks_the_peer_to_peer_the_log_shows(tmp_path, capsys):
    # NCCL takes peer-to-peer only under a common PCIe switch (or over a bridge, or as
    # NCCL_P2P_LEVEL lets it); a guess of root ports has none, and the note says so.
    info = "box:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    path = _box_log(tmp_path / "l40s.txt", "NVIDIA L40S", info=info)
    flowsim_check([str(path), "--min-bytes", "1G"])
    taken = capsys.readouterr()
    assert ("on PCIe Gen4, each on its own root port, over 1 socket (Sapphire Rapids): copies staged through host "
            "memory, where the log's NCCL INFO lines show peer-to-peer (GPUs under a common PCIe switch, an NVLink "
            "bridge, or NCCL_P2P_LEVEL); its layout is a guess") in taken.err
    # The rows flagged where PCIe bounds the guess say the guess may be what is off.
    assert ("# FAST where PCIe/host bounds the prediction (1 GiB): check the system's PCIe generation and layout and "
            "its host memory (a system file's pcie, cpu); or at the guess: guessed_2x_nvidia_l40s is flowsim's guess "
            "of the box, whose own layout (a system file) may set another bound") in taken.out


def test_pcie_cards_across_hosts_need_a_system_for_their_nics():
    log = _log_of(*["NVIDIA L40S"] * 2)
    across = replace(log, ranks=tuple(replace(rank, host=f"host{rank.rank}") for rank in log.ranks))
    with pytest.raises(InputError, match="the log's GPU NVIDIA L40S is a PCIe card and the run spans 2 hosts, whose "
                                         "NICs flowsim cannot guess: a system file gives them"):
        default_system(across)


@pytest.mark.parametrize(("gpus", "why"), [
    (("NVIDIA H200 NVL",), "the log's GPU NVIDIA H200 NVL is in no server flowsim ships"),
    (("NVIDIA H100 NVL",), "the log's GPU NVIDIA H100 NVL is in no server flowsim ships"),
    (("NVIDIA RTX A400",), "the log's GPU NVIDIA RTX A400 is in no server flowsim ships"),  # no known architecture
    (("NVIDIA GH200 480GB",), "the log's GPU NVIDIA GH200 480GB is in no server flowsim ships: --system "
                              "data/systems/alps_gh200.toml (in the repository) if its nodes are quad nodes"),
    (("NVIDIA GB300",), "the log's GPU NVIDIA GB300 is in no NVIDIA server flowsim ships: --system "
                        "oci-bm-gpu-gb300-4 if its racks are OCI's"),
    (("NVIDIA H100 80GB HBM3", "NVIDIA H200"), "the log's GPUs (NVIDIA H100 80GB HBM3, NVIDIA H200) are of "
                                                "different servers"),
    (("NVIDIA Graphics Device",), "whose rank lines name no GPU model (they print 'NVIDIA Graphics Device', the "
                                  "driver's name for a GPU it has no product name for)"),
])
def test_a_log_without_system_whose_gpu_has_no_server_asks_for_one(gpus, why):
    with pytest.raises(InputError, match=re.escape(why)):
        default_system(_log_of(*gpus))


def _on_aws(platform):
    """SENDRECV (2 hosts of 8 H100) with the aws-ofi-nccl plugin's INFO lines naming ``platform``."""
    info = (f"ip-10-1-2-3:101:101 [0] NCCL INFO NET/OFI Running on {platform} platform, Setting NCCL_TOPO_FILE "
            "environment variable to /opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml/p5.48xl-topo.xml\n"
            "ip-10-1-2-3:101:101 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 32 nics)\n")
    return SENDRECV.read_text().replace("# Using devices", info + "# Using devices", 1)


@pytest.mark.parametrize(("platform", "system"), [
    ("p5.48xlarge", "aws-p5"), ("p5e.48xlarge", "aws-p5e"), ("P4d", "aws-p4d"), ("p4de.24xlarge", "aws-p4de"),
    ("p6-b200.48xlarge", "aws-p6-b200"),
    # An instance flowsim ships no system for: NVIDIA's server of the log's GPU (H100).
    ("p5en.48xlarge", "dgx-h100"),
])
def test_a_log_whose_info_lines_name_an_aws_instance_is_checked_on_it(platform, system):
    # aws-ofi-nccl names the instance it runs on ("NET/OFI Running on p5.48xlarge platform";
    # "P4d" in older plugins), where its NICs are EFA's, not the DGX's InfiniBand.
    log = parse_nccl_log(_on_aws(platform))
    assert log.platform == platform and default_system(log) == system


def test_a_network_the_system_s_nics_do_not_run_is_warned_about():
    from flowsim.systemfile import resolve_system

    # NCCL's "Using network" line: EFA's plugin where the system's NICs are InfiniBand (an AWS
    # log whose plugin names no platform, checked on a DGX), the reverse, and TCP sockets.
    def using(network):
        return SENDRECV.read_text().replace(
            "# Using devices", f"ip-10-1-2-3:101:101 [0] NCCL INFO Using network {network}\n# Using devices", 1)

    efa = parse_nccl_log(using("AWS Libfabric"))
    assert efa.networks == ("AWS Libfabric",)
    warned = [w for w in check_log(efa, system="dgx-h100", min_bytes=1 << 30).warnings if "Using network" in w
              or "ran between servers over" in w]
    assert warned == ["NCCL's INFO lines say it ran between servers over AWS Libfabric (EFA or Slingshot, through the "
                      "aws-ofi-nccl plugin), where the system's compute NICs are ib: check --system (AWS instances: "
                      "aws-p4d, aws-p5, ...; docs/system-format.md)"]
    # Slingshot runs through the same plugin; its system files give RoCE-like NICs (Alps).
    alps = resolve_system(str(Path(__file__).parents[1] / "data/systems/alps_gh200.toml"))[0]
    assert alps.nic_kind == "roce" and not any(
        "ran between servers over" in w for w in check_log(efa, system=alps, min_bytes=1 << 30).warnings)
    p5 = resolve_system("aws-p5")[0]
    assert not any("ran between servers over" in w for w in check_log(efa, system=p5, min_bytes=1 << 30).warnings)
    ib = check_log(parse_nccl_log(using("IB")), system=p5, min_bytes=1 << 30)
    assert any("over IB (InfiniBand or RoCE), where the system's compute NICs are efa" in w for w in ib.warnings)
    assert not any("ran between servers" in w for w in check_log(parse_nccl_log(using("IB")), system="dgx-h100",
                                                                  min_bytes=1 << 30).warnings)
    tcp = check_log(parse_nccl_log(using("Socket")), system="dgx-h100", min_bytes=1 << 30)
    assert any(w.startswith("NCCL's INFO lines say it ran between servers over TCP sockets") for w in tcp.warnings)


@pytest.mark.parametrize("command", [
    "mpirun -np 16 -x NCCL_ALGO=Tree -x NCCL_IB_DISABLE=1 ./build/sendrecv_perf -b 8 -e 1G",
    "$ export NCCL_ALGO=Tree NCCL_IB_DISABLE=1",
    "NCCL_IB_DISABLE=1 NCCL_ALGO=Tree srun ./build/sendrecv_perf -b 8 -e 1G",
    # Over several lines behind a shell's prompt, as people paste an mpirun they wrote that way.
    "[root@node1 ~]# mpirun --allow-run-as-root -np 16 \\\n-x NCCL_ALGO=Tree \\\n  -x NCCL_IB_DISABLE=1 \\\n"
    "  ./build/sendrecv_perf -b 8 -e 1G",
    "(venv) user@node1:~/nccl-tests$ NCCL_IB_DISABLE=1 NCCL_ALGO=Tree ./build/sendrecv_perf -b 8 -e 1G",
    "docker run --gpus all -e NCCL_ALGO=Tree -e NCCL_IB_DISABLE=1 nvcr.io/nvidia/pytorch:24.05-py3 sendrecv_perf",
    # Slurm's export list, and continuations written without a blank before the backslash.
    "sbatch --export=ALL,NCCL_ALGO=Tree,NCCL_IB_DISABLE=1 nccl.sbatch",
    "mpirun -np 16 \\\n-x NCCL_ALGO=Tree\\\n-x NCCL_IB_DISABLE=1\\\n./build/sendrecv_perf -b 8 -e 1G",
    "NCCL_ALGO=Tree NCCL_IB_DISABLE=1 mpirun -np 16 \\\n  ./build/sendrecv_perf \\\n  -b 8 -e 1G",
    # As Markdown's inline code (nccl-tests#323), and after variables of other programs.
    "`[root@node1 ~]$ mpirun -np 16 -x NCCL_ALGO=Tree -x NCCL_IB_DISABLE=1 ./build/sendrecv_perf -b 8 -e 1G`",
    "CUDA_VISIBLE_DEVICES=0,1 NCCL_ALGO=Tree NCCL_IB_DISABLE=1 ./build/sendrecv_perf -b 8 -e 1G",
    "$ OMPI_MCA_btl=^openib UCX_TLS=rc,cuda NCCL_ALGO=Tree NCCL_IB_DISABLE=1 mpirun -np 16 ./build/sendrecv_perf",
])
def test_nccl_variables_a_command_line_sets_are_taken(command):
    # The run's command, pasted with its output, sets what NCCL's INFO lines (NCCL_DEBUG=INFO)
    # would have said; those win where both say.
    text = SENDRECV.read_text()
    log = parse_nccl_log(command + "\n" + text)
    assert dict(log.command_env) == {"NCCL_ALGO": "Tree", "NCCL_IB_DISABLE": "1"}
    # Between two runs of one file, the command goes with the run it starts, the binary's
    # line ended by a backslash too (it stayed with the first run, whose table was read).
    first, second = parse_nccl_logs(text + command + "\n" + text)
    assert (first.command_env, dict(second.command_env)) == ((), {"NCCL_ALGO": "Tree", "NCCL_IB_DISABLE": "1"})
    # So where only the command names the binary, with its options (older nccl-tests' runs
    # do not name it): the lines of "./build/sendrecv_perf \", "-b 8 ..." are one.
    unnamed = "\n".join(line for line in text.splitlines() if "Collective test starting" not in line) + "\n"
    first, second = parse_nccl_logs(unnamed + command + "\n" + unnamed, collective="send")
    named = "-b 8" in command
    assert (first.command_env, dict(second.command_env)) == ((), {"NCCL_ALGO": "Tree", "NCCL_IB_DISABLE": "1"}
                                                             if named else {})
    report = check_log(log, system="dgx-h100", min_bytes=1 << 30)
    assert report.nccl.endswith(", NCCL_ALGO=Tree (command line)")
    assert ("the log sets NCCL_IB_DISABLE=1: NCCL runs between servers over TCP sockets, which flowsim does not "
            "model; the prediction takes the system's ib NICs") in report.warnings
    info = "node1:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
    both = check_log(parse_nccl_log(command + "\n" + info + text), system="dgx-h100", min_bytes=1 << 30)
    assert "NCCL_ALGO=Ring (log)" in both.nccl and "(command line)" not in both.nccl
    # Prose that names a variable is no command, and nothing after the table is the run's:
    # a reply that suggests a setting does not steer the prediction.
    assert parse_nccl_log("We set NCCL_ALGO=Ring to compare.\n" + text).command_env == ()
    assert parse_nccl_log("Setting CUDA_VISIBLE_DEVICES=0 and NCCL_ALGO=Ring helped\n" + text).command_env == ()
    # Behind backticks or other variables only a program makes a command (a re-audit); a
    # shell script's comment sets nothing.
    for prose in ("`NCCL_ALGO=Ring` helped a lot on the other cluster; this is the default run:",
                  "FOO=1 NCCL_PROTO=LL gave much worse numbers than this default run", "# export NCCL_ALGO=Tree"):
        assert parse_nccl_log(prose + "\n" + text).command_env == (), prose
    # Words that begin with a command's name are not it; a comma in a value is the value's.
    assert parse_nccl_log("dockerd restarted; NCCL_ALGO=Ring in the job spec\n" + text).command_env == ()
    assert dict(parse_nccl_log("mpirun -x NCCL_IB_HCA=mlx5_0,mlx5_1 ./build/sendrecv_perf\n" + text).command_env) \
        == {"NCCL_IB_HCA": "mlx5_0,mlx5_1"}
    # A line after a command that ended (no backslash) is not the command's.
    assert parse_nccl_log("mpirun -np 16 -x NCCL_ALGO=Tree ./build/sendrecv_perf\n-x NCCL_PROTO=LL is worth a try\n"
                          + text).command_env == (("NCCL_ALGO", "Tree"),)
    assert parse_nccl_log(text + "\nPlease try export NCCL_ALGO=Tree and rerun.\n"
                          "export NCCL_ALGO=Tree\n").command_env == ()
    # A value NCCL would not take (a shell variable left unexpanded) is said and not used.
    unexpanded = check_log(parse_nccl_log("mpirun -x NCCL_ALGO=$ALGO ./build/sendrecv_perf\n" + text),
                           system="dgx-h100", min_bytes=1 << 30)
    assert "(command line)" not in unexpanded.nccl
    assert any(w.startswith("the log's command line sets NCCL_ALGO=$ALGO, which is no value NCCL takes") and
               w.endswith(": not used") for w in unexpanded.warnings)


def test_cli_without_system_names_the_aws_instance_it_checks_on(tmp_path, capsys):
    path = tmp_path / "p5.txt"
    path.write_text(_on_aws("p5.48xlarge"))
    assert flowsim_check([str(path), "--min-bytes", "1G", "--brief"]) == 0
    assert capsys.readouterr().err == ("flowsim check: no --system: checking on aws-p5, the AWS instance the log's "
                                       "NCCL INFO lines name (p5.48xlarge) (--system names another)\n")
    assert flowsim_check([str(path), str(SENDRECV), "--min-bytes", "1G", "--brief"]) == 0
    assert ("each run on NVIDIA's server of its GPU or the AWS instance its NCCL INFO lines name: aws-p5 for run 1 "
            "(p5.48xlarge), dgx-h100 for run 2 (NVIDIA H100 80GB HBM3)") in capsys.readouterr().err


def test_cli_without_system_checks_on_the_gpus_server_and_says_so(capsys):
    argv = [str(SENDRECV), "--min-bytes", "1G", "--json"]
    assert flowsim_check([*argv, "--system", "dgx-h100"]) == 0
    given = capsys.readouterr()
    assert flowsim_check(argv) == 0
    taken = capsys.readouterr()
    assert {**json.loads(taken.out), "checked_at": ""} == {**json.loads(given.out), "checked_at": ""}
    assert taken.err == ("flowsim check: no --system: checking on dgx-h100, NVIDIA's server of the log's "
                         "NVIDIA H100 80GB HBM3 (--system names another)\n")


def test_cli_refuses_bad_output_paths_before_checking(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    history = tmp_path / "h.h5"
    argv = [str(SENDRECV), "--system", "dgx-h100", "--history", str(history)]
    bad_plots = ((tmp_path / "nodir" / "p.png", "nodir' does not exist"), (tmp_path / "x.xyz", "image format"))
    for plot, message in bad_plots:
        assert flowsim_check([*argv, "--plot", str(plot)]) == 2
        captured = capsys.readouterr()
        assert message in captured.err and captured.out == ""
    mydata = tmp_path / "mydata.h5"
    with h5py.File(mydata, "w") as f:
        f["experiment/results"] = [1.0]
    assert flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--history", str(mydata)]) == 2
    assert "not a flowsim check history" in capsys.readouterr().err
    assert not history.exists()
    with h5py.File(mydata) as f:
        assert list(f) == ["experiment"] and not f.attrs


def test_cli_without_matplotlib_refuses_plot_before_checking(tmp_path, capsys, no_matplotlib):
    history = tmp_path / "h.h5"
    argv = [str(SENDRECV), "--system", "dgx-h100", "--history", str(history), "--plot", str(tmp_path / "p.png")]
    assert flowsim_check(argv) == 2
    assert "pip install 'flowsim[plot]'" in capsys.readouterr().err and not history.exists()


def test_cli_time_windows_are_taken_and_said(capsys):
    argv = [str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "1G", "--json"]
    assert flowsim_check(argv) == 0
    exact = json.loads(capsys.readouterr().out)
    assert flowsim_check([*argv, "--time-rel-tol", "1e-3"]) == 0
    coarse = json.loads(capsys.readouterr().out)
    note = ('predicted with events within a relative 0.001 of each other taken as one instant: the times are not '
            'exact (docs/model.md "Time")')
    assert note in coarse["warnings"] and note not in exact["warnings"]
    with pytest.raises(SystemExit):
        flowsim_check([*argv, "--time-rel-tol", "1"])
    assert "argument --time-rel-tol: expected a number in [0, 1), got '1'" in capsys.readouterr().err


def test_cli_threshold_that_is_not_a_number(capsys):
    with pytest.raises(SystemExit):
        flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--threshold", "abc"])
    assert "argument --threshold: invalid fraction value: 'abc'" in capsys.readouterr().err


def test_a_missing_rank_line_is_named_and_the_shape_can_stand_in():
    # A hole in the rank lines (a paste, a launcher or a filter left some out): the ranks come
    # from the cluster's shape, as without rank lines, and the missing ones are named.
    lines = [line for line in _lines(ALL_GATHER) if not line.startswith("#  Rank  3 ")]
    text = "\n".join(line for line in lines if "nThread" not in line)
    # The 7 lines on one host, devices 0-7 but 3, and the ratio's 8 ranks fit one shape alone.
    alone = parse_nccl_log(text, collective="all_gather")
    assert (alone.n_ranks, alone.ranks_from) == (8, "listed ranks' hosts and devices and the busbw ratio")
    log = parse_nccl_log(text, collective="all_gather", nodes=1)
    assert (log.n_ranks, log.ranks_from) == (8, "busbw ratio")
    assert any(w.startswith("rank lines for 7 ranks only (none for rank 3); assuming 1 host(s) x 8 GPU(s)")
               for w in log.warnings)
    # Without a busbw ratio (a sendrecv's is 1 whatever the ranks) nothing fixes the count.
    holed = "\n".join(line for line in _lines(SENDRECV) if not line.startswith("#  Rank  0 ") and "nThread" not in line)
    # The error names the table's header line: a page may hold several runs.
    header = next(n for n, line in enumerate(holed.splitlines(), 1) if re.match(r"#\s+size\s+count", line))
    with pytest.raises(InputError, match=rf"line {header}: a rank line for rank 1 only \(pasted in part\), so the "
                                         r"ranks and hosts of this table are unknown; give the cluster's shape"):
        parse_nccl_log(holed)


def test_rank_lines_of_each_hosts_last_rank_and_a_row_cut_by_info_lines():
    # The shape of a real 2-host H200 paste (a Go parser's test sample in a public repository,
    # its numbers replaced): only ranks 7 and 15 listed, NCCL INFO lines inside the table and
    # a row's tail left on its own line. The rows around it are read; the tail is named.
    text = "\n".join([
        "# nGpus(perProc) 1 minBytes 1 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
        "#  Rank  7 Group  0 Pid 1001 on hostA device  7 [0xd7] NVIDIA H200",
        "#  Rank 15 Group  0 Pid 2001 on hostB device  7 [0xd7] NVIDIA H200",
        "NCCL version 2.27.7+cuda12.4",
        "#",
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
        "#wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        "hostB:11:12 [7] NCCL INFO Connected all trees",
        "    500.0    0.00    0.00      0    130.0    0.00    0.00      0",
        "     1048576        524288  bfloat16     sum      -1    100.0   10.49   19.66      0    100.0   10.49   19.66"
        "      0",
        "  1073741824     536870912  bfloat16     sum      -1   5000.0  214.75  402.65      0   5000.0  214.75  402.65"
        "      0",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 211.2",
    ])
    log = parse_nccl_log(text, collective="all_reduce", nodes=2)
    assert (log.n_ranks, len(log.rows), log.gpu_models) == (16, 2, ("NVIDIA H200",))
    assert "line 12: times and bandwidths without a size (a row that other output cut in two); skipped" in log.warnings
    assert any(w.startswith("rank lines for 2 ranks only (none for ranks 0-6, 8-14); assuming 2 host(s) x 8 GPU(s)")
               for w in log.warnings)
    # With 4 GPUs a host, rank 7 would be device 3 of host 2: a listed rank that does not sit
    # where the shape puts it is named.
    moved = parse_nccl_log(text, collective="all_reduce", nodes=4, gpus_per_node=4)
    assert any(w.startswith("line 4: rank 7 is device 7 on hostA, not device 3 of host 2 of 4") for w in moved.warnings)


def test_a_paste_that_starts_in_the_middle_of_the_rank_lines_takes_the_shape_from_the_arguments():
    # Ranks 5-7 only: the list was cut at its top, as sources paste it (coreweave/nccl-tests#43
    # shows only rank 71 of 72). The shape comes from the arguments, the GPU from the lines.
    lines = [line for line in _lines(ALL_GATHER) if not line.startswith(("#  Rank  0 ", "#  Rank  1 ",
                                                                          "#  Rank  2 ", "#  Rank  3 ",
                                                                          "#  Rank  4 "))]
    text = "\n".join(line for line in lines if "nThread" not in line)
    # Ranks 5-7 on one host as devices 5-7 and the ratio's 8 ranks: one host of 8.
    assert parse_nccl_log(text, collective="all_gather").hosts == ("node0",)
    log = parse_nccl_log(text, collective="all_gather", nodes=1, gpus_per_node=8)
    assert (log.n_ranks, log.hosts, log.ranks_from) == (8, ("node0",), "arguments")
    assert log.gpu_models == ("NVIDIA H100 80GB HBM3",)
    assert any(w.startswith("rank lines for ranks 5-7 only (pasted in part); assuming 1 host(s) x 8 GPU(s)")
               for w in log.warnings)
    with pytest.raises(InputError, match=r"line \d+: rank 7 is listed, but 1 node\(s\) x 4 GPU\(s\) make 4 ranks"):
        parse_nccl_log(text, collective="all_gather", nodes=1, gpus_per_node=4)


def test_cli_min_bytes_that_is_not_a_size_names_the_option(capsys):
    assert flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "abc"]) == 2
    assert "error: --min-bytes: size 'abc' is not an integer" in capsys.readouterr().err


def test_a_test_name_with_a_build_suffix_names_its_binary():
    # nccl-tests built with MPI=1 NAME_SUFFIX=_mpi names itself all_reduce_perf_mpi.
    text = SENDRECV.read_text()
    for name in ("sendrecv_perf_mpi", "sendrecv_perf_custom_build"):
        assert parse_nccl_log(text.replace("starting: sendrecv_perf", f"starting: {name}")).binary == "sendrecv_perf"
    for name in ("custom_perf_mpi", "xsendrecv_perf", "sendrecv_perfx"):
        with pytest.raises(InputError, match=f"nccl-tests binary '{name}' is not one flowsim checks"):
            parse_nccl_log(text.replace("starting: sendrecv_perf", f"starting: {name}"))


LAUNCHER_PREFIXES = [
    lambda i: "[1,0]<stdout>:",  # mpirun --tag-output
    lambda i: "[0] ",  # MPICH -prepend-rank
    lambda i: "  0: ",  # srun --label, task number right-aligned
    lambda i: f"{i % 12}: ",  # srun --label of a few tasks
    lambda i: "[1,0]<stdout>: ",  # Open MPI 5 (prterun) leaves a space
    lambda i: "dgx-b11.cluster: ",  # pdsh / clush: the host name
    lambda i: "(head, rank=0, pid=3808) [1,0]<stdout>:",  # Ray around mpirun: nested
    lambda i: "2025-03-04T10:12:13.123456789Z ",  # kubectl logs --timestamps
    lambda i: "Thu Jul 18 15:41:05 2024<stdout>:",  # mpirun --timestamp-output (NVIDIA/nccl#1368)
    lambda i: "Mon Jan  6 09:05:01 2025[1,0]<stdout>:",  # the same with --tag-output, a one-digit day
    lambda i: "[pod/mpi-launcher-x7k2p/launcher] ",  # kubectl logs --prefix
    lambda i: "nccl-worker-1  | ",  # docker compose logs: the container's name, padded
    lambda i: "Dec 06 07:44:54 ",  # moreutils' ts, its default format
    lambda i: "[2024-07-18 15:41:05] ",  # ts '[%Y-%m-%d %H:%M:%S]', its manual's example
    lambda i: f"00:00:{i % 60:02d}.{i:06d} ",  # ts -s "%H:%M:%.S", time since the start
    lambda i: "[2024-07-18T15:41:05.123Z] ",  # Jenkins' timestamper
    lambda i: "[15:41:05] ",  # the time alone, bracketed
    lambda i: "2024-07-18 15:41:05,123 ",  # Python's logging, its default format
    lambda i: "> ",  # a quoted reply on GitHub (Markdown's quote marker)
    lambda i: "> > ",  # a quote of a quote
    lambda i: "    [1,0]<stdout>:",  # mpirun's tag in a block indented inside a Markdown list
    lambda i: ">     ",  # an indented block quoted
    lambda i: "[1,0][dgx-b11:4242]<stdout>: ",  # Open MPI 5 (prterun) --output tag-detailed
    lambda i: "[prterun-dgx-b11-4242@1,0]<stdout>: ",  # Open MPI 5 --output tag-fullname
    lambda i: f"x3006c0s1b1n0.hsn.cm {i % 8}: ",  # HPE PALS mpiexec --label: the host, then the rank
    lambda i: "10.0.0.11: ",  # pdsh with the hosts given as addresses
    lambda i: "Jul 18 15:41:05 node005 slurmd[1234]: ",  # syslog / journald
    lambda i: "2024-07-18 15:41:05,123 INFO ",  # Python's logging, with its level
    lambda i: "INFO:root:",  # Python's logging.basicConfig default
]


@pytest.mark.parametrize("prefix", LAUNCHER_PREFIXES)
def test_launcher_prefixes_are_removed(prefix):
    plain = parse_nccl_log(SENDRECV)
    prefixed = parse_nccl_log("\n".join(prefix(i) + line for i, line in enumerate(_lines(SENDRECV))))
    assert (prefixed.binary, prefixed.ranks, prefixed.rows) == (plain.binary, plain.ranks, plain.rows)


def test_a_terminal_s_colour_codes_are_dropped():
    # A log saved from a terminal that coloured it ('\x1b[0;32m' ... '\x1b[0m').
    plain = parse_nccl_log(SENDRECV)
    coloured = parse_nccl_log("\n".join(f"\x1b[0;32m{line}\x1b[0m" for line in _lines(SENDRECV)))
    assert (coloured.binary, coloured.ranks, coloured.rows) == (plain.binary, plain.ranks, plain.rows)


def test_mpich_rank_markers_inside_rows_are_removed():
    # NVIDIA/nccl#1453: MPICH's -prepend-rank writes '[0]' before each piece of output the
    # program flushed, inside rows too; NCCL's INFO lines print ranks so and keep them.
    text = SENDRECV.read_text().replace(
        "# Using devices", "node005:4321:4321 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n# Using devices")
    plain = parse_nccl_log(text)
    lines = []
    for line in text.splitlines():
        if line[:1] == " ":  # a row: a marker after its root and after its out-of-place '#wrong'
            tokens = line.split()
            line = "  ".join(tokens[:5]) + "[0]  " + "  ".join(tokens[5:9]) + "[0]  " + "  ".join(tokens[9:])
        elif line.startswith("# Avg"):
            line += "[0]"
        lines.append("[0] " + line)
    marked = parse_nccl_log("\n".join(lines))
    assert "-1[0]" in lines[_first_row_line(text) - 1]
    assert (marked.rows, marked.avg_busbw_GBps, marked.local_links) == (
        plain.rows, plain.avg_busbw_GBps, plain.local_links) and plain.local_links == (("P2P", 1),)


@pytest.mark.parametrize("prefix", LAUNCHER_PREFIXES)
def test_launcher_prefixes_are_removed_where_a_paste_made_spaces_tabs(prefix):
    plain = parse_nccl_log(SENDRECV)
    lines = (re.sub(" +", "\t", prefix(i) + line) for i, line in enumerate(_lines(SENDRECV)))
    tabbed = parse_nccl_log("\n".join(lines))
    assert (tabbed.binary, tabbed.ranks, tabbed.rows, tabbed.avg_busbw_GBps, tabbed.warnings) == (
        plain.binary, plain.ranks, plain.rows, plain.avg_busbw_GBps, plain.warnings)


def test_tabs_between_words_read_as_spaces():
    """A log pasted through a tool that turned runs of spaces into tabs reads as the original:
    its comment lines (the closing '# Avg bus bandwidth' among them), the GPUs' names, NCCL's
    version line and its INFO lines saying what the environment set."""
    text = SENDRECV.read_text().replace(
        "# Using devices",
        "node005:4321:4321 [0] NCCL INFO NCCL version 2.27.5+cuda12.9\n"
        "node005:4321:4321 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n# Using devices", 1)
    plain = parse_nccl_log(text)
    tabbed = parse_nccl_log("\n".join(re.sub(" +", "\t", line) for line in text.splitlines()))
    assert plain.avg_busbw_GBps is not None and plain.nccl_version == "2.27.5+cuda12.9"
    assert plain.nccl_env == (("NCCL_ALGO", "Ring"),)
    assert tabbed == plain


def _relaid(header, row, path=SENDRECV):
    """The sample at ``path`` with its column header replaced by ``header`` and each row by
    ``row(tokens)`` (tokens: the 13 columns nccl-tests prints today)."""
    lines = []
    for line in _lines(path):
        if line.lstrip("#").split()[:2] == ["size", "count"]:
            lines.append(header)
        elif line[:1] == " ":
            lines.append("  ".join(row(line.split())))
        else:
            lines.append(line)
    return "\n".join(lines)


def _error_columns(tokens):
    # Older nccl-tests print the 'error' column as a float.
    return ["0e+00" if i in (8, 12) else t for i, t in enumerate(tokens)]


_PER_ITERATION = ["1.5", "2.5", "3.5", "0.4"]  # i_min i_max i_p99 i_cv% of one half


@pytest.mark.parametrize(
    "header, row, redop, root",
    [
        (  # per-iteration statistics after each half
            "#  size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%  "
            "time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%",
            lambda t: t[:9] + _PER_ITERATION + t[9:] + _PER_ITERATION,
            "sum",
            -1,
        ),
        (  # -S 1: a timestamp after the in-place half
            "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong  timestamp",
            lambda t: t + ["2025-06-01", "12:00:00"],
            "sum",
            -1,
        ),
        (  # -C 1: CPU time
            "#  size  count  type  redop  root  cputime  algbw  busbw  #wrong  cputime  algbw  busbw  #wrong",
            lambda t: t,
            "sum",
            -1,
        ),
        (  # older: no root column, 'error' for '#wrong'
            "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error",
            lambda t: _error_columns(t)[:4] + _error_columns(t)[5:],
            "sum",
            None,
        ),
        (  # older all_gather_perf and sendrecv_perf: neither redop nor root
            "#  size  count  type  time  algbw  busbw  error  time  algbw  busbw  error",
            lambda t: _error_columns(t)[:3] + _error_columns(t)[5:],
            None,
            None,
        ),
        (  # older broadcast_perf: root but no redop
            "#  size  count  type  root  time  algbw  busbw  error  time  algbw  busbw  error",
            lambda t: _error_columns(t)[:3] + ["0"] + _error_columns(t)[5:],
            None,
            0,
        ),
    ],
)
def test_columns_are_read_where_the_header_names_them(header, row, redop, root):
    relaid = parse_nccl_log(_relaid(header, row), collective="send")
    plain = parse_nccl_log(SENDRECV)
    # The older 'error' column is each half's largest relative error (0 here), not a count.
    legacy = "error" in header.split()

    def expected(half):
        return dataclasses.replace(half, max_error=0.0) if legacy else half

    def expected_in_place(half):
        # sendrecv.cu reports no in-place errors (reportErrors = in_place ? 0 : 1): the old
        # 'error' printed there counts for nothing.
        return dataclasses.replace(half, wrong=None, max_error=None) if legacy else half

    assert relaid.rows == tuple(dataclasses.replace(r, redop=redop, root=root, out_of_place=expected(r.out_of_place),
                                                    in_place=expected_in_place(r.in_place)) for r in plain.rows)


def test_a_table_without_redop_and_root_columns_leaves_the_binary_to_the_busbw_ratio():
    header = "#  size  count  type  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"
    text = _relaid(header, lambda t: t[:3] + t[5:], ALL_GATHER)
    # (n-1)/n fits five binaries once redop "none" is not printed to rule out reduce_scatter,
    # nor root -1 to rule out gather and scatter.
    with pytest.raises(
        InputError, match="fits all_gather_perf, alltoall_perf, gather_perf, reduce_scatter_perf, scatter_perf"
    ):
        parse_nccl_log(text)
    assert parse_nccl_log(text, collective="all_gather").rows[0].redop is None


@pytest.mark.parametrize(
    "header",
    [
        "#  size  count  type  redop  root  time  busbw  algbw  #wrong  time  busbw  algbw  #wrong",
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong",
        "#  size  count  redop  type  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
    ],
)
def test_a_header_in_an_unknown_layout_is_named(header):
    with pytest.raises(
        InputError,
        match=r"<text>, line 10: table header not understood: expected '#  size  count  type  \[redop\]  \[root\]', "
        r"then 'time  algbw  busbw  #wrong' for each of the two halves.*got '#  size  count",
    ):
        parse_nccl_log(_relaid(header, lambda t: t), collective="send")


def test_a_row_short_of_the_per_iteration_columns_is_truncated():
    header = (
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%  "
        "time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%"
    )
    with pytest.raises(
        InputError,
        match=r"<text>, line 12: expected 17 columns \(size count type redop root time algbw busbw #wrong i_min "
        r"i_max i_p99 i_cv% time algbw busbw #wrong, as the header on line 10 names them\); got 13 \(truncated row\?\)",
    ):
        parse_nccl_log(_relaid(header, lambda t: t), collective="send")


@pytest.mark.parametrize(
    "name",
    ["nccl-all_gather_perf.txt", "nccl-all-gather-perf.txt", "all_gather_perf_node1.txt", "node1_all_gather_perf.txt"],
)
def test_file_name_with_a_prefix_or_suffix_names_the_binary(tmp_path, name):
    path = tmp_path / name
    path.write_text(ALL_GATHER.read_text())
    assert parse_nccl_log(path).binary == "all_gather_perf"


@pytest.mark.parametrize("name", ["xall_gather_perf.txt", "xall_reduce_perf.txt", "all_gather_perfx.txt"])
def test_a_binary_name_glued_to_a_word_names_nothing(tmp_path, name):
    path = tmp_path / name
    path.write_text(ALL_GATHER.read_text())
    with pytest.raises(InputError, match=r"cannot tell which .*\(fits all_gather_perf, alltoall_perf\)"):
        parse_nccl_log(path)


def test_a_byte_order_mark_is_skipped(tmp_path):
    # The mark would hide the sample's first line, '# nThread ...'.
    path = tmp_path / "all_gather_perf.txt"
    path.write_text(ALL_GATHER.read_text(), encoding="utf-8-sig")
    for source in (path, "\ufeff" + ALL_GATHER.read_text()):
        assert parse_nccl_log(source, collective="all_gather").rows == parse_nccl_log(ALL_GATHER).rows


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_output_saved_as_utf_16_is_read(tmp_path, encoding):
    # Windows PowerShell 5's '>' (an ssh run's output saved on a laptop) writes UTF-16 with a
    # byte order mark; "utf-16-le" and "utf-16-be" here write the mark by hand.
    path = tmp_path / "all_gather_perf.txt"
    mark = {"utf-16": "", "utf-16-le": "\ufeff", "utf-16-be": "\ufeff"}[encoding]
    path.write_bytes((mark + ALL_GATHER.read_text().replace("\n", "\r\n")).encode(encoding))
    assert parse_nccl_log(path, collective="all_gather").rows == parse_nccl_log(ALL_GATHER).rows


def test_two_ranks_naming_one_gpu_are_an_error():
    # Ranks 0 and 1 on the same device and the same PCI bus: one GPU.
    text = ALL_GATHER.read_text().replace("device  1 [0000:2a:00]", "device  0 [0000:18:00]")
    with pytest.raises(
        InputError,
        match=r"<text>, line 5: ranks 0 \(line 4\) and 1 \(line 5\) both name device 0 on host h100-07 "
        r"\(bus 0000:18:00\): two ranks on one GPU",
    ):
        check_nccl_log(text, system="dgx-h100", collective="all_gather", min_bytes=1 << 30)


def test_ranks_that_each_see_their_gpu_as_device_0_are_placed_in_bus_order():
    # srun --gpus-per-task=1 and the like: every process sees its GPU as device 0, and the
    # rank lines differ only in the bus id. Reverse the rank order so that bus order matters.
    lines = _lines(ALL_GATHER)
    rank_lines = [i for i, line in enumerate(lines) if line.startswith("#  Rank")]
    buses = [lines[i].split("[")[1].split("]")[0] for i in rank_lines]
    for rank, i in enumerate(rank_lines):
        lines[i] = f"#  Rank {rank:2d} Group  0 Pid  {52011 + rank} on    h100-07 device  0 [{buses[7 - rank]}] " \
                   "NVIDIA H100 80GB HBM3"
    report = check_nccl_log("\n".join(lines), system="dgx-h100", collective="all_gather", min_bytes=1 << 30)
    assert report.warnings == (
        "host h100-07: 8 ranks name device(s) 0 with different PCI bus ids (CUDA_VISIBLE_DEVICES set per rank): "
        "taking the host's GPUs in bus order",
    )
    # The same prediction as the log with its devices numbered.
    numbered = check_nccl_log(ALL_GATHER, system="dgx-h100", min_bytes=1 << 30)
    assert [r.predicted_time_us for r in report.rows] == [r.predicted_time_us for r in numbered.rows]


@pytest.mark.parametrize("threshold, shown", [(0.005, "99.5%"), (0.125, "87.5%"), (0.1, "90%"), (0.0, "100%")])
def test_the_threshold_is_shown_without_rounding(sendrecv_report, threshold, shown):
    report = dataclasses.replace(sendrecv_report, threshold=threshold)
    flag = next(line for line in report.format_text().splitlines() if line.startswith("# flag:"))
    above = f"{100 * (1 + threshold):.12g}%"
    assert flag.startswith(
        f"# flag: SHORT below {shown} of predicted busbw (the cluster underperforms), FAST above {above}"
    )


def test_comment_lines_whose_hash_markdown_ate_are_read():
    # Pasted outside a code block, GitHub renders '# nThread ...' as a heading and the copy
    # loses the '#'.
    plain = parse_nccl_log(SENDRECV)
    eaten = "\n".join(line.lstrip("#") if line.startswith("#") else line for line in _lines(SENDRECV))
    log = parse_nccl_log(eaten)
    assert (log.binary, log.ranks, log.rows, log.avg_busbw_GBps) == (
        plain.binary,
        plain.ranks,
        plain.rows,
        plain.avg_busbw_GBps,
    )


def test_gpu_model_and_nccl_version_are_read():
    text = ALL_GATHER.read_text().replace("#\n#  ", "NCCL version 2.26.2+cuda12.8\n#\n#  ", 1)
    log = parse_nccl_log(text, collective="all_gather")
    assert log.nccl_version == "2.26.2+cuda12.8"
    assert len(log.gpu_models) == 1 and "H100" in log.gpu_models[0]


def test_the_nccl_version_comes_from_nccls_info_line_or_the_library_code_nccl_tests_prints():
    # nccl-tests 2.13 and later print NCCL_VERSION_CODE: X * 10000 + Y * 100 + Z (22703 is
    # 2.27.3), X * 1000 + Y * 100 + Z up to 2.8 (2708 is 2.7.8; src/nccl.h.in).
    assert parse_nccl_log(ALL_REDUCE_4).nccl_version == "2.27.3"
    assert (nccl_version_from_code(22703), nccl_version_from_code(23004)) == ("2.27.3", "2.30.4")
    assert nccl_version_from_code(2708) == "2.7.8"
    # NCCL_DEBUG=INFO prints NCCL's own line, which says the build too; it wins.
    info = ALL_REDUCE_4.read_text().replace(
        "# Using devices", "dgx-a01:41230:41230 [0] NCCL INFO NCCL version 2.27.5+cuda12.9\n# Using devices", 1)
    assert parse_nccl_log(info).nccl_version == "2.27.5+cuda12.9"
    # Without either the version is unknown.
    bare = "\n".join(line for line in _lines(ALL_GATHER) if "nccl-library" not in line)
    assert parse_nccl_log(bare, collective="all_gather").nccl_version is None


def test_a_log_of_an_nccl_older_than_nvls_or_nvlstree_is_predicted_without_them():
    # NVLS arrived in NCCL 2.17.1 and NVLSTree in 2.18.1 (their tags' src/include/devcomm.h):
    # flowsim's oldest constants (2.19.3) have both, so an older log's NCCL is told to leave
    # them out, as the header says; a version given, or a key the log sets, wins.
    one = (VALIDATION / "xxrjun_h100_1n8g_allreduce.txt").read_text()

    def of_release(text, code):
        return parse_nccl_log(text.replace("nccl-headers=22902 nccl-library=22902",
                                           f"nccl-headers={code} nccl-library={code}"))

    report = check_log(of_release(one, 21605), system="dgx-h100", min_bytes=1 << 30)
    assert report.algorithm == "ring"
    assert report.nccl.endswith(", NCCL_NVLS_ENABLE=0 (NCCL 2.16.5 predates NVLS, 2.17.1)")
    assert check_log(of_release(one, 21705), system="dgx-h100", min_bytes=1 << 30).algorithm == "nvls"
    given = check_log(of_release(one, 21605), system="dgx-h100", min_bytes=1 << 30, nccl_version="2.19.3")
    assert given.algorithm == "nvls" and "predates" not in given.nccl
    asked = check_log(of_release(one, 21605), system="dgx-h100", min_bytes=1 << 30, nccl_env={"NCCL_NVLS_ENABLE": "1"})
    assert asked.algorithm == "nvls" and "predates" not in asked.nccl
    two = of_release(two_host_h100_log(), 21705)
    older = check_log(two, system="dgx-h100")
    assert older.algorithm != "nvls_tree" and older.nccl.endswith("NCCL_ALGO=^NVLSTree (NCCL 2.17.5 predates NVLSTree, 2.18.1)")
    assert check_log(of_release(two_host_h100_log(), 21803), system="dgx-h100").algorithm == "nvls_tree"


def test_a_log_of_an_nccl_older_than_ll128_is_predicted_without_it():
    # LL128 arrived in NCCL 2.5.6 (v2.5.6-1 src/include/core.h first defines NCCL_PROTO_LL128):
    # a 2.4 log was predicted with LL128 at 512 KiB-32 MiB (an AWS p3dn log of NCCL 2.4.8).
    text = (VALIDATION / "together_h100_1n8g_allgather_ring.txt").read_text()

    def of_release(code):
        log = parse_nccl_log(text.replace("nccl-headers=22602 nccl-library=22602",
                                          f"nccl-headers={code} nccl-library={code}"))
        return check_log(log, system="dgx-h100", nccl_env={"NCCL_ALGO": "Ring"}, min_bytes=1 << 20)

    older, newer = of_release(2408), of_release(2506)
    assert older.nccl.endswith("NCCL_PROTO=^LL128 (NCCL 2.4.8 predates LL128, 2.5.6)")
    assert "ll128" not in {row.protocol for row in older.rows}
    assert "LL128" not in newer.nccl and "ll128" in {row.protocol for row in newer.rows}


def test_flagged_sizes_another_of_nccls_choices_fits_are_said_to_be_a_choice_not_a_fault():
    # nccl-tests#309's run with the ring forced (NCCL_ALGO=Ring, NCCL_MIN_CTAS=24), checked
    # without its environment: the model's NCCL takes NVLSTree from 4 MiB, faster than the
    # ring the run had, and flags 1-8 GiB; the ring fits every flagged size, and the report
    # says so under the flags, which stand.
    log = parse_nccl_log(VALIDATION / "gh_nccltests309_h100_2n8g_ib400_allreduce_ring_tuned.txt", nodes=2,
                         gpus_per_node=8)
    report = check_log(log, system="dgx-h100", min_bytes=1 << 30)
    assert [r.size_bytes for r in report.short] == [1 << 30, 2 << 30, 4 << 30, 8 << 30]
    assert report.explained == (
        "the flagged 4 size(s): 1073741824, 2147483648, 4294967296, 8589934592 B fit ring/simple, which NCCL also "
        "weighs there: NCCL may have run it rather than the cluster being at fault (--nccl-env NCCL_ALGO=Ring "
        "--nccl-env NCCL_PROTO=Simple predicts them so; NCCL_DEBUG_SUBSYS=TUNING prints what NCCL ran)",)
    assert report.format_text().endswith("\n# " + report.explained[0])
    assert report.to_dict()["explained"] == list(report.explained)
    # NVLS missing explains them, so the advice on NVLS stands.
    assert report.not_nvls == () and "look at whether NCCL ran NVLink SHARP" in report.format_text()
    # With the run's environment nothing is flagged, nor explained; an algorithm named steers
    # the check, which then weighs nothing else.
    ran = check_log(log, system="dgx-h100", min_bytes=1 << 30, nccl_env={"NCCL_ALGO": "Ring", "NCCL_MIN_CTAS": "24"})
    assert ran.ok and ran.explained == ()
    named = check_log(log, system="dgx-h100", min_bytes=1 << 30, algorithm="nvls_tree")
    assert named.short and named.explained == ()
    # A cluster at fault is slow at every size, which no other choice fits.
    degraded = check_log(parse_nccl_log(VALIDATION / "gh_nccltests290_h100_2n8g_ib_allreduce_ring_degraded.txt"),
                         system="dgx-h100")
    assert len(degraded.short) == 11 and degraded.explained == ()


def test_short_sizes_no_choice_without_nvls_clears_are_not_put_down_to_nvls():
    # The degraded pair of DGX H100 (nccl-tests#290: 87-102 GB/s busbw from 32 MiB), checked on
    # the model's NVLSTree: NCCL's best choice without NVLS, which a cluster without multicast
    # would run (LL128 then Simple rings, 356-362 GB/s at 1-8 GiB), is still 3.5-4x faster, so
    # the report sends the reader to what bounds that choice, the network, and not to NVLS.
    degraded = check_log(parse_nccl_log(VALIDATION / "gh_nccltests290_h100_2n8g_ib_allreduce_ring_degraded.txt"),
                         system="dgx-h100")
    assert {r.algorithm for r in degraded.short} == {"nvls_tree"}
    large = [(size, choice, bound) for size, choice, bound in degraded.not_nvls if size >= 32 << 20]
    assert [size for size, _, _ in large] == [r.size_bytes for r in degraded.short if r.size_bytes >= 32 << 20]
    assert {bound for _, _, bound in large} == {"InfiniBand"} and ("ring/simple" in {c for _, c, _ in large})
    text = degraded.format_text()
    assert "look at whether NCCL ran NVLink SHARP" not in text
    assert ("# SHORT at 32 MiB-8 GiB, predicted with nvls_tree: not NVLS missing on the cluster, since NCCL's best "
            "choice without it (ring/ll128, ring/simple) is faster than measured too; InfiniBand bounds that choice: "
            "look at the network") in text
    assert degraded.to_dict()["not_nvls"][-1] == {"size_bytes": 8 << 30, "without_nvls": "ring/simple",
                                                   "bound": "InfiniBand"}


def test_short_without_nvls_weighs_short_nvls_rows_against_the_best_choice_without_nvls():
    # Rows measured at twice the time NVLS predicted (SHORT in a band of 0.9 to 1.1 of a
    # prediction): NCCL's model rates the ring best without NVLS at each size, and the ring
    # predicts 150 us for 1 MiB (measured 200: still SHORT) and 400 us for 2 MiB (measured 400:
    # it fits, so NVLS missing would explain that size). A FAST row and a ring's own row are
    # not NVLS's shortfalls; a choice flowsim cannot lay out is passed over.
    short_1m, short_2m = _flagged_row(1 << 20, 200.0), _flagged_row(2 << 20, 400.0)
    fast = _flagged_row(4 << 20, 100.0)
    fast = fast[0], dataclasses.replace(fast[1], time_us=400.0)
    ring_row = _flagged_row(8 << 20, 800.0, algorithm="ring")
    times = {1 << 20: 150.0, 2 << 20: 400.0, 4 << 20: 410.0, 8 << 20: 300.0}

    def predict(algorithm, protocol, sizes):
        if algorithm == "pat":
            raise InputError("PAT runs one GPU per node only")
        return [NcclRow(size, 0, "float", "sum", -1, times[size], 0.0, 0.0, algorithm, protocol, 16, "steps",
                        busiest_tier="InfiniBand", busiest_utilization=0.9) for size in sizes]

    def band(prediction):
        return 0.9 * prediction.time_us, 1.1 * prediction.time_us

    def table(size):
        return {("nvls", "simple"): 10.0, ("ring", "simple"): 20.0, ("tree", "simple"): 30.0}

    found = _short_without_nvls([short_1m, short_2m, fast, ring_row], band, predict, table)
    assert found == [(1 << 20, "ring/simple", "InfiniBand")]
    assert _short_without_nvls([short_1m], band, predict, lambda size: {("pat", "simple"): 1.0}) == []
    assert _short_without_nvls([short_1m], band, predict, lambda size: {("nvls", "simple"): 1.0}) == []


def _flagged_row(size, time_us, algorithm="nvls", protocol="simple"):
    measured = log_rows.Measurement(time_us, 0.0, 0.0, 0)
    predicted = NcclRow(size, size // 4, "float", "sum", -1, time_us / 2, 0.0, 0.0, algorithm, protocol, 16, "steps")
    return log_rows.TestRow(size, size // 4, "float", "sum", -1, measured, measured, 1), predicted


def test_other_choices_needs_one_choice_that_fits_every_flagged_size():
    # Measured 100 and 200 us where NVLS predicted half; "ring" predicts 95 and 190 us, "tree"
    # 100 us and 100 us (fits the first only), "pat" cannot be laid out. The check's band here:
    # 0.9 to 1.1 of a prediction.
    flagged = [_flagged_row(1 << 20, 100.0), _flagged_row(2 << 20, 200.0)]
    times = {"ring": [95.0, 190.0], "tree": [100.0, 100.0], "nvls_tree": [99.0, 201.0]}

    def predict(algorithm, protocol, sizes):
        if algorithm == "pat":
            raise InputError("PAT runs one GPU per node only")
        return [NcclRow(size, 0, "float", "sum", -1, t, 0.0, 0.0, algorithm, protocol, 16, "steps")
                for size, t in zip(sizes, times[algorithm], strict=True)]

    def band(prediction):
        return 0.9 * prediction.time_us, 1.1 * prediction.time_us

    line = other_choices(flagged, [("pat", "simple"), ("tree", "simple"), ("ring", "simple"), ("nvls", "simple")],
                         predict, band)
    assert line is not None and line.startswith("the flagged 2 size(s): 1048576, 2097152 B fit ring/simple,")
    # Of two that fit, the nearer (NVLSTree: 1% off, the ring 5%).
    both = other_choices(flagged, [("ring", "simple"), ("nvls_tree", "simple")], predict, band)
    assert both is not None and "fit nvls_tree/simple" in both and "NCCL_ALGO=NVLSTree" in both
    assert other_choices(flagged, [("tree", "simple"), ("pat", "simple"), ("nvls", "simple")], predict, band) is None
    # One size off alone is more likely noise than a choice: no line, whatever fits it.
    assert other_choices(flagged[:1], [("ring", "simple")], predict, band) is None


def test_the_nccl_environment_the_info_lines_print_steers_the_prediction():
    # With NCCL_DEBUG=INFO NCCL prints each variable the environment sets (tuning.cc: "NCCL_ALGO
    # set by environment to Ring"; param.cc integers with a full stop). The check predicts
    # with them, under what it is given, and says which it took.
    info = [
        "node005:4321:4321 [0] NCCL INFO NCCL_ALGO set by environment to Ring",
        "node005:4321:4321 [0] NCCL INFO NCCL_IB_QPS_PER_CONNECTION set by environment to 2.",
        "node007:4322:4322 [8] NCCL INFO NCCL_ALGO set by environment to Ring",
    ]
    text = DEGRADED.read_text().replace("# Using devices", "\n".join([*info, "# Using devices"]), 1)
    log = parse_nccl_log(text)
    assert log.nccl_env == (("NCCL_ALGO", "Ring"), ("NCCL_IB_QPS_PER_CONNECTION", "2")) and log.warnings == ()
    report = check_log(log, system="dgx-h100", min_bytes=1 << 30)
    assert report.algorithm == "ring" and report.nccl.endswith(", NCCL_ALGO=Ring (log)")
    given = check_log(log, system="dgx-h100", min_bytes=1 << 30, nccl_env={"NCCL_ALGO": "NVLSTree"})
    assert given.algorithm == "nvls_tree" and "(log)," not in given.nccl
    clash = parse_nccl_log(text.replace("[8] NCCL INFO NCCL_ALGO set by environment to Ring",
                                        "[8] NCCL INFO NCCL_ALGO set by environment to Tree"))
    assert clash.nccl_env[0] == ("NCCL_ALGO", "Ring")
    assert any("NCCL_ALGO set to two values by NCCL's INFO lines; using the first, Ring" in w for w in clash.warnings)


def test_cli_nccl_env_steers_the_prediction(capsys):
    from flowsim.cli import main as flowsim

    argv = ["check", str(DEGRADED), "--system", "dgx-h100", "--min-bytes", "1G", "--json"]
    assert flowsim(argv) == 1
    default = json.loads(capsys.readouterr().out)
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO=Ring"]) == 1
    ring = json.loads(capsys.readouterr().out)
    # NCCL's default at 1-2 GiB on two DGX H100 is NVLSTree; with NCCL_ALGO=Ring, a ring.
    assert (default["algorithm"], ring["algorithm"]) == ("nvls_tree", "ring")
    assert flowsim([*argv, "--nccl-env", "NCCL_ALGO"]) == 2
    assert "--nccl-env 'NCCL_ALGO': expected NCCL_NAME=VALUE" in capsys.readouterr().err


def test_time_bounds_hold_the_bandwidth_part_to_the_threshold_and_the_latency_to_a_factor():
    # 100 us predicted, 30 of them latency: 70 us at a busbw within 10% (63.6-77.8 us) and
    # 30 us of latency within 3x (10-90 us).
    low, high = time_bounds(100.0, 30.0, 0.1, 2.0)
    assert (low, high) == pytest.approx((70 / 1.1 + 10.0, 70 / 0.9 + 90.0))
    # Without latency the bounds are the busbw threshold's, and a latency past the predicted
    # time counts as all of it.
    assert time_bounds(100.0, 0.0, 0.1, 2.0) == pytest.approx((100 / 1.1, 100 / 0.9))
    assert time_bounds(100.0, 250.0, 0.1, 2.0) == pytest.approx((100 / 3, 300.0))


def test_latency_bound_rows_are_held_to_nccls_latency_within_a_factor():
    # A healthy 2-node H100 log: from 512 B to 64 KiB it measured 28-34 us where NCCL's tree/LL
    # latency is 25.2 us and the flows add 1-6 us. Held to 10% as a whole, those rows are short;
    # with the latency allowed 3x, none is.
    log = parse_nccl_log(VALIDATION / "gh_nccltests309_h100_2n8g_ib400_allreduce.txt")
    strict = check_log(log, system="dgx-h100", latency_tolerance=0.0)
    default = check_log(log, system="dgx-h100")
    small = {512, 1024, 8192, 16384, 32768, 65536}
    assert small <= {r.size_bytes for r in strict.short}
    assert [r.size_bytes for r in default.flagged] == []
    assert default.latency_tolerance == LATENCY_TOLERANCE == 2.0
    with pytest.raises(InputError, match="latency_tolerance must be a number >= 0"):
        check_log(log, system="dgx-h100", latency_tolerance=-1)


def test_a_row_is_flagged_only_when_both_its_runs_are_off():
    # nccl-tests#309 at 256 B: out-of-place 94.40 us, in-place 25.90 us, against a predicted
    # 26-27 us whose latency may be 3x off: the out-of-place run alone is beyond the bound.
    text = (VALIDATION / "gh_nccltests309_h100_2n8g_ib400_allreduce.txt").read_text()
    row = "         256            64     float     sum      -1    94.40    0.00    0.01      0    25.90    0.01    0.02      0"
    assert row in text
    one_slow = check_log(parse_nccl_log(text), system="dgx-h100")
    assert 256 not in [r.size_bytes for r in one_slow.flagged]
    both_slow = text.replace(row, row.replace("25.90    0.01    0.02", "94.40    0.00    0.01"))
    assert [r.size_bytes for r in check_log(parse_nccl_log(both_slow), system="dgx-h100").short] == [256]
    # Faster than predicted: both runs at a tenth of the time are FAST, one of them alone is not.
    one_fast = text.replace(row, row.replace("94.40    0.00    0.01", " 2.59    0.10    0.19"))
    assert 256 not in [r.size_bytes for r in check_log(parse_nccl_log(one_fast), system="dgx-h100").flagged]
    both_fast = one_fast.replace(" 2.59    0.10    0.19      0    25.90", " 2.59    0.10    0.19      0     2.59")
    assert [r.size_bytes for r in check_log(parse_nccl_log(both_fast), system="dgx-h100").fast] == [256]


def test_an_empty_file_a_binary_one_and_a_directory_are_named_for_what_they_are(tmp_path):
    empty, binary = tmp_path / "empty.txt", tmp_path / "a.out"
    empty.write_text("\n  \n")
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(200))
    with pytest.raises(InputError, match=r"empty.txt: empty: no nccl-tests output in it$"):
        parse_nccl_log(empty)
    with pytest.raises(InputError, match=r"a.out: not text \(binary data\): no nccl-tests output in it$"):
        parse_nccl_log(binary)
    with pytest.raises(InputError, match=r"cannot read nccl-tests output: it is a directory, not a regular file; "
                                         r"name a file in it instead$"):
        parse_nccl_log(tmp_path)


def test_a_fifo_as_log_or_history_is_refused_without_waiting(tmp_path, make_fifo):
    fifo = make_fifo("fifo")
    # A process substitution (<(ssh host cat log)) is one: standard input takes what it would have held.
    with pytest.raises(InputError, match=r"fifo: cannot read nccl-tests output: it is a FIFO \(named pipe\), not a "
                                         r"regular file; pipe it in and name it '-' instead$"):
        parse_nccl_log(fifo)
    with pytest.raises(InputError, match=r"fifo: is a FIFO \(named pipe\), not a regular file: the check history "
                                         r"must be a regular file \(left as it is\)"):
        history_file(fifo)
    with pytest.raises(InputError, match=r"fifo: is a FIFO \(named pipe\), not a check history file"):
        read_history(fifo)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_the_nthread_line_gives_gpus_per_thread_aggregation_and_graphs():
    lines = _lines(ALL_GATHER)
    log = parse_nccl_log("\n".join(lines), collective="all_gather")
    assert (log.n_threads, log.n_gpus) == (1, 8)
    header = next(i for i, line in enumerate(lines) if "nThread" in line)
    lines[header] = ("# nThread 2 nGpus 4 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
                     "iters: 20 agg iters: 4 validation: 1 graph: 10")
    log = parse_nccl_log("\n".join(lines), collective="all_gather")
    assert (log.n_threads, log.n_gpus, log.agg_iters, log.cuda_graph) == (2, 4, 4, 10)
    # Older nccl-tests print neither field.
    lines[header] = "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20"
    log = parse_nccl_log("\n".join(lines), collective="all_gather")
    assert (log.agg_iters, log.cuda_graph) == (None, None)


def test_the_launch_floor_is_gpus_per_thread_times_the_host_launch_cost():
    from flowsim.collectives.report import HOST_LAUNCH_US_PER_GPU, launch_floor_us

    assert HOST_LAUNCH_US_PER_GPU == 4.2  # (33.7 - 16.88) / 4, NVIDIA/nccl-tests#123
    assert launch_floor_us(8) == pytest.approx(33.6)
    assert launch_floor_us(1) == pytest.approx(4.2)
    # CUDA graphs and aggregated iterations launch otherwise: no floor.
    assert launch_floor_us(8, cuda_graph=10) == 0.0
    assert launch_floor_us(8, agg_iters=4) == 0.0
    with pytest.raises(InputError, match="gpus_per_thread must be a positive integer, got 0"):
        launch_floor_us(0)
    with pytest.raises(InputError, match="cuda_graph must be a non-negative integer, got -1"):
        launch_floor_us(1, cuda_graph=-1)


def test_gb200_trays_are_hosts_of_one_rack():
    # A GB200 NVL72 log runs one host per compute tray (4 GPUs each, devices 0-3): 8 hosts
    # are 8 of the 18 trays of one rack, one NVLink domain, not 8 racks.
    lines = _lines(ALL_REDUCE_4)
    for i, line in enumerate(lines):
        if line.startswith("#  Rank"):
            rank = int(line.split()[2])
            lines[i] = (f"#  Rank {rank:2d} Group  0 Pid  {41230 + rank} on   tray-{rank // 4:02d} device  {rank % 4} "
                        "[0000:18:00] NVIDIA GB200")
    log = parse_nccl_log("\n".join(lines), collective="all_reduce")
    assert (log.n_ranks, log.n_nodes) == (32, 8)
    report = check_log(log, system="gb200-nvl72", nodes=1, min_bytes=8 << 30)
    assert report.nodes == 1 and report.warnings == ()
    # One server: NCCL's NVLS on the rack's switches, no compute fabric.
    assert report.algorithm == "nvls" and report.fabric == "none"
    # A DGX H100 log keeps one host per server.
    dgx = check_log(parse_nccl_log(ALL_REDUCE_4), system="dgx-h100", min_bytes=8 << 30)
    assert dgx.nodes == 4
    # 20 trays need 2 racks, and take 10 of each: NVLSTree, which needs as many ranks in every
    # rack, runs (filling the first rack left 2 trays in the second, which it refuses).
    trays = "\n".join(f"#  Rank {r:2d} Group  0 Pid  {100 + r} on   tray-{r // 4:02d} device  {r % 4} "
                      "[0000:18:00] NVIDIA GB200" for r in range(80))
    body = [line for line in lines if not line.startswith("#  Rank")]
    racks = check_log(parse_nccl_log("\n".join([*body[:5], trays, *body[5:]]), collective="all_reduce"),
                      system="gb200-nvl72", fabric="fat_tree", min_bytes=8 << 30)
    assert (racks.nodes, racks.algorithm) == (2, "nvls_tree")


@pytest.mark.parametrize(("listed", "fitting", "shape"), [
    # OCI's 2-host GB300 run: ranks 0, 1 on one host, 6, 7 on the other, devices 0-3.
    ({0: ("a", 0), 1: ("a", 1), 6: ("b", 2), 7: ("b", 3)}, (8, 8), (2, 4)),
    # Each end of 128 ranks kept; 127 to 133 ranks fit the ratio, and 128 and 132 both fit
    # 4 GPUs a host: the one that ends at the last rank listed.
    ({0: ("x", 0), 1: ("x", 1), 126: ("y", 2), 127: ("y", 3)}, (127, 133), (32, 4)),
    # Every rank on device 0 (CUDA_VISIBLE_DEVICES set per rank), ranks 0 and 1 on one host:
    # no shape puts them both on device 0 of one host.
    ({0: ("x", 0), 1: ("x", 0)}, (8, 8), None),
    # 8,192 ranks, whose printed figures fit hundreds of counts: tried by divisors, at once.
    ({0: ("h0", 0), 8191: ("h1023", 7)}, (8000, 8400), (1024, 8)),
    # Printed figures that fit thousands of counts fix nothing.
    ({0: ("h0", 0), 8191: ("h1023", 7)}, (2, 50000), None),
])
def test_the_rank_lines_a_paste_kept_fix_the_hosts_where_one_shape_fits(listed, fitting, shape):
    ranks = {r: RankInfo(r, host, device, "NVIDIA GB300", r + 1) for r, (host, device) in listed.items()}
    assert _shape_of_listed(ranks, fitting) == shape


@pytest.mark.parametrize(
    ("preamble", "name", "binary"),
    [
        ("run_nccl_tests.sh -t all_gather -b 1K -e 8G host0 host1\n", "out.txt", "all_gather_perf"),
        ("mpirun -np 2 ./alltoall -b 8\n", "out.txt", "alltoall_perf"),
        ("", "b200_allgather_2node.log", "all_gather_perf"),
        ("", "h100-all-to-all.txt", "alltoall_perf"),
    ],
)
def test_rows_that_fit_several_binaries_take_the_one_the_text_or_file_name_spells(tmp_path, preamble, name, binary):
    # all_gather_perf and alltoall_perf share the bus factor (n-1)/n: a wrapper's command line
    # or the file name, spelled without "_perf", says which ran.
    path = tmp_path / name
    path.write_text(preamble + ALL_GATHER.read_text())
    assert parse_nccl_log(path).binary == binary


@pytest.mark.parametrize(
    ("preamble", "name"),
    [
        ("compared all_gather with alltoall\n", "out.txt"),  # both spelled: still ambiguous
        ("", "all_reduce.txt"),  # spells a binary the rows do not fit
        ("-t gather_all\n", "gatherall.txt"),
    ],
)
def test_a_spelling_that_does_not_settle_the_binary_leaves_the_error(tmp_path, preamble, name):
    path = tmp_path / name
    path.write_text(preamble + ALL_GATHER.read_text())
    with pytest.raises(InputError, match=r"cannot tell which .*\(fits all_gather_perf, alltoall_perf\)"):
        parse_nccl_log(path)


@pytest.mark.parametrize("spelling", ["all_gather_perf", "all_gather", "allgather", "All-Gather"])
def test_the_collective_option_takes_any_spelling(tmp_path, capsys, spelling):
    path = tmp_path / "out.txt"  # rows that fit all_gather_perf and alltoall_perf alike
    path.write_text(ALL_GATHER.read_text())
    assert flowsim_check([str(path), "--system", "dgx-h100", "--collective", spelling, "--min-bytes", "1G"]) == 0
    assert ": all_gather_perf, 8 ranks on 1 node(s)" in capsys.readouterr().out.splitlines()[0]


def test_a_collective_the_log_contradicts_is_warned_and_the_logs_test_checked(capsys):
    # The log's line 2 is '# Collective test starting: all_reduce_perf': the binary names
    # itself, so a --collective naming another gets a warning, as a --nodes the rank lines
    # contradict does, and the run is checked as the all-reduce it is.
    path = VALIDATION / "xxrjun_h100_1n8g_allreduce.txt"
    assert parse_nccl_log(path).warnings == ()
    log = parse_nccl_log(path, collective="all_gather")
    assert (log.binary, log.collective) == ("all_reduce_perf", "all_reduce")
    assert log.warnings == ("line 2: the log names its test all_reduce_perf, not all_gather_perf (--collective): "
                            "checking it as the all_reduce_perf it names",)
    assert parse_nccl_log(path, collective="all_reduce_perf").warnings == ()
    assert flowsim_check([str(path), "--system", "dgx-h100", "--collective", "all_gather", "--brief"]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: all_reduce_perf, 8 ranks on 1 node(s): all 10 predicted "
                                              "sizes OK;")


def test_gpus_per_node_the_rank_lines_contradict_is_warned():
    # 8 rank lines on the one host cnode3-002: --gpus-per-node 4 is warned about, as --nodes is.
    path = VALIDATION / "xxrjun_h100_1n8g_allreduce.txt"
    log = parse_nccl_log(path, gpus_per_node=4)
    assert (log.n_ranks, log.n_nodes) == (8, 1)
    assert log.warnings == ("the log's rank lines put 8 GPU(s) on each host, not 4 (--gpus-per-node): predicting "
                            "the ranks they name",)
    assert parse_nccl_log(path, gpus_per_node=8).warnings == ()


def test_a_row_whose_count_does_not_make_its_size_is_warned():
    # Line 20: 33554432 B of double, 4194304 x 8 B; a count of 4194305 makes 33554440 B.
    path = VALIDATION / "xxrjun_h100_1n8g_allreduce.txt"
    text = path.read_text()
    assert "    33554432       4194304    double" in text
    log = parse_nccl_log(text.replace("    33554432       4194304    double", "    33554432       4194305    double"))
    assert log.warnings == ("line 20: count 4194305 of double (8 B) makes 33554440 B, not the 33554432 B of the size "
                            "column: a row edited or garbled; predicting the size",)
    assert (log.rows[0].size_bytes, log.rows[0].count) == (33554432, 4194305)
    # An all-gather prints each rank's count: line 20's 524288 doubles x 8 ranks are its 33554432 B,
    # 524289 would be 33554496 B; line 21's 1048576 x 8 x 8 = 67108864 B, 1048575 would be 67108800 B.
    path = VALIDATION / "xxrjun_h100_1n8g_allgather.txt"
    text = path.read_text()
    assert parse_nccl_log(text).warnings == ()
    text = text.replace("    33554432        524288    double", "    33554432        524289    double")
    text = text.replace("    67108864       1048576    double", "    67108864       1048575    double")
    assert parse_nccl_log(text).warnings == (
        "lines 20, 21: count 524289 of double (8 B) for each of 8 ranks makes 33554496 B, not the 33554432 B of the "
        "size column (the first of them): a row edited or garbled; predicting the size",)


def test_cli_without_system_checks_each_file_on_its_own_gpus_server(capsys):
    a100 = VALIDATION / "oci_bmgpu48_a100_1n8g_allreduce.txt"
    argv = ["--min-bytes", "1G", "--json"]
    alone = []
    for path, system in ((SENDRECV, "dgx-h100"), (a100, "dgx-a100")):
        flowsim_check([str(path), "--system", system, *argv])
        alone.append({**json.loads(capsys.readouterr().out), "checked_at": ""})
    flowsim_check([str(SENDRECV), str(a100), *argv])
    taken = capsys.readouterr()
    assert [{**report, "checked_at": ""} for report in json.loads(taken.out)] == alone
    assert taken.err == ("flowsim check: no --system: checking each run on NVIDIA's server of its GPU: dgx-h100 "
                         "for run 1 (NVIDIA H100 80GB HBM3), dgx-a100 for run 2 (NVIDIA A100-SXM4-40GB) "
                         "(--system names another)\n")


def test_cli_without_system_checks_pcie_cards_on_a_guessed_box_and_says_so(tmp_path, capsys):
    path = _box_log(tmp_path / "l40s.txt", "NVIDIA L40S")
    assert flowsim_check([str(path), "--min-bytes", "1G", "--json"]) in (0, 1)
    taken = capsys.readouterr()
    assert taken.err == (
        "flowsim check: no --system: checking on a box of PCIe cards as flowsim guesses it, guessed_2x_nvidia_l40s: "
        "2 x NVIDIA L40S on PCIe Gen4, each on its own root port, over 1 socket (Sapphire Rapids): copies staged "
        "through host memory; its layout is a guess, and the figures move with it: --system names the box's own (a "
        "preset, or a system file; 'flowsim system import' writes one from its 'nvidia-smi topo -m')\n")
    report = json.loads(taken.out)
    assert report["system"] == "guessed_2x_nvidia_l40s"
    # A send from one GPU to the other, staged through host memory, crosses each one's x16 Gen4 root
    # port: 24 GB/s (docs/hardware.md §3.1's effective Gen4 figure); the H100 run's rows beat it
    # (FAST), as its NVLink does.
    last = report["rows"][-1]
    assert last["predicted_busbw_GBps"] == pytest.approx(24.0, rel=1e-3) and last["fast"]
    assert report["nodes"] == 1 and last["busiest_tier"] == "PCIe/host"


def test_cli_without_system_names_the_file_whose_gpu_has_no_server(tmp_path, capsys):
    # The file whose GPU names no server is not checked; the other one is, as an unreadable file
    # among others leaves them checked.
    unnamed = tmp_path / "unnamed.txt"
    unnamed.write_text(SENDRECV.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL"))
    assert flowsim_check([str(SENDRECV), str(unnamed), "--brief"]) == 2
    taken = capsys.readouterr()
    assert taken.out.startswith(f"{SENDRECV}: sendrecv_perf, 2 ranks on 2 node(s): ")
    assert taken.out.rstrip().endswith("1 run(s) checked in 2 files: 1 with every size OK, 0 with sizes flagged; "
                                       "1 not checked (the errors on stderr)")
    assert taken.err.splitlines()[1:] == [
        f"flowsim check: error: {unnamed}: --system is required: the log's GPU NVIDIA H100 NVL is in no server "
        "flowsim ships; name a preset or shipped system ('flowsim presets') or a system file "
        "(docs/system-format.md; 'flowsim system import' writes one from the server's 'nvidia-smi topo -m') "
        "(not checked)"]
    # Alone, it is the one error.
    assert flowsim_check([str(unnamed)]) == 2
    assert capsys.readouterr().err.startswith("flowsim check: error: --system is required: the log's GPU NVIDIA H100 "
                                              "NVL is in no server flowsim ships;")


def test_a_file_that_cannot_be_read_is_not_checked_and_the_others_are(tmp_path, capsys):
    missing = tmp_path / "missing.txt"
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"config": {\n')
    assert flowsim_check([str(SENDRECV), str(missing), str(bad_json), "--system", "dgx-h100", "--brief"]) == 2
    taken = capsys.readouterr()
    assert taken.out.startswith(f"{SENDRECV}: sendrecv_perf, 2 ranks on 2 node(s): ")
    assert "1 run(s) checked in 3 files: 1 with every size OK, 0 with sizes flagged; 2 not checked" in taken.out
    assert taken.err.splitlines() == [
        f"flowsim check: error: {missing}: cannot read nccl-tests output: No such file or directory (not checked)",
        f"flowsim check: error: {bad_json}, line 2, column 1: not valid JSON (Expecting property name enclosed in "
        "double quotes); expected the file nccl-tests' -J option writes (not checked)"]


def test_a_run_the_model_cannot_predict_is_not_checked_and_the_others_are(tmp_path, capsys):
    # A node the one-node log's cluster lacks: that run is not checked, the two-node one is.
    one_node = VALIDATION / "xxrjun_h100_1n8g_allreduce.txt"
    assert flowsim_check([str(one_node), str(SENDRECV), "--system", "dgx-h100", "--fail", "n1.nic0", "--brief"]) == 2
    taken = capsys.readouterr()
    assert taken.out.startswith(f"{SENDRECV}: sendrecv_perf, 2 ranks on 2 node(s): ")
    assert taken.err == (f"flowsim check: error: {one_node}: --fail[0]: pattern 'n1.nic0' matches no node or link "
                         "name (not checked)\n")


def test_each_row_says_what_the_model_ran():
    # 4 of a DGX H100's GPUs send 32 MiB-128 MiB on 8 channels and 256 MiB on 16 (NCCL's
    # point-to-point rule, worked by hand in tests/test_p2p_channels.py), as NCCL's TUNING
    # lines would say; JSON rows carry the same.
    log = Path(__file__).resolve().parents[1] / "data" / "validation" / "nccl_tests" / "xxrjun_h100_1n4g_sendrecv.txt"
    report = check_nccl_log(log, system="dgx-h100", min_bytes=33554432)
    assert [(r.algorithm, r.protocol, r.channels) for r in report.rows[:4]] == [("p2p", "simple", 8)] * 3 + [
        ("p2p", "simple", 16)]
    row = next(line for line in report.format_text().splitlines() if line.split()[0] == str(32 << 20))
    assert row.split()[1:4] == ["p2p", "simple", "8"]
    assert json.loads(report.to_json())["rows"][3]["channels"] == 16
    # A row not predicted says so in each column.
    skipped = check_nccl_log(log, system="dgx-h100", min_bytes=64 << 20)
    first = next(line for line in skipped.format_text().splitlines() if line.split()[0] == str(32 << 20))
    assert first.split()[1:5] == ["-", "-", "-", "-"]


def test_a_run_that_failed_midway_is_checked_up_to_its_failure():
    # nccl-tests writes the failure onto the row it was printing (NVIDIA/nccl-tests#355 shows
    # "  2097152  32768  float  none  -1 node0: Test CUDA failure common.cu:389 ..."): the rows
    # before it are checked, the failure is named, and a failure at the first size is the
    # failed run it is.
    lines = _lines(ALL_GATHER)
    third = next(i for i, line in enumerate(lines) if line.lstrip().startswith("4194304"))
    cut = lines[:third] + [
        "     4194304        131072     float    none      -1 node0: Test CUDA failure common.cu:389 "
        "'an illegal memory access was encountered'",
        " .. node0 pid 62767: Test failure common.cu:519",
    ]
    log = parse_nccl_log("\n".join(cut), collective="all_gather")
    assert [row.size_bytes for row in log.rows] == [1 << 20, 2 << 20]
    assert (f"line {third + 1}: the run failed after the row on line {third}: Test CUDA failure common.cu:389 "
            "'an illegal memory access was encountered'; the 2 rows before it are checked") in log.warnings
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("1048576"))
    with pytest.raises(InputError, match=rf"line {first + 1}: the run failed before printing results: Test CUDA "
                                         "failure common.cu:389"):
        parse_nccl_log("\n".join(lines[:first] + [cut[third]]), collective="all_gather")


def test_open_mpi_notices_and_elided_rank_lines_inside_a_paste():
    # Open MPI counts the notices it did not repeat on lines of their own, unprefixed, so they
    # fall inside the table ("8 more processes have sent help message help-mtl-ofi.txt / OFI
    # call fail"): skipped. A "..." where the paste left rank lines out makes the listed ones
    # a part, as a list cut at its top does.
    lines = _lines(ALL_GATHER)
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("1048576"))
    noisy = lines[:first] + ["8 more processes have sent help message help-mtl-ofi.txt / OFI call fail"] + \
        lines[first:first + 2] + ["1 more process has sent help message help-mtl-ofi.txt / OFI call fail"] + \
        lines[first + 2:]
    assert len(parse_nccl_log("\n".join(noisy), collective="all_gather").rows) == len(parse_nccl_log(ALL_GATHER).rows)
    rank5 = next(i for i, line in enumerate(lines) if line.startswith("#  Rank  5 "))
    elided = [line for i, line in enumerate(lines) if not (rank5 <= i < rank5 + 3)]
    elided.insert(rank5, "...")
    text = "\n".join(line for line in elided if "nThread" not in line)
    assert any(w.startswith("rank lines for ranks 0-4 only (pasted in part); assuming 1 host(s) x 8 GPU(s)")
               for w in parse_nccl_log(text, collective="all_gather").warnings)
    assert parse_nccl_log(text, collective="all_gather", nodes=1).n_ranks == 8


PASTED = DATA / "pasted"


def test_runs_announced_by_a_script_take_the_binary_named_before_them():
    """A script that prints each command before running it (wohlbier/nccl-tests' README, an
    nccl-tests from before '# Collective test starting'): the line naming a binary sits
    after the previous run's '# Avg bus bandwidth' and goes with the run it announces."""
    runs = parse_nccl_logs(PASTED / "dgx2_v100_five_binaries.txt")
    assert [r.binary for r in runs] == [
        "all_gather_perf", "all_reduce_perf", "broadcast_perf", "reduce_perf", "reduce_scatter_perf"]
    # The busbw each table's last row prints (8 GiB on 12 V100 of a DGX-2), in file order.
    assert [r.rows[-1].out_of_place.busbw_GBps for r in runs] == [73.75, 123.56, 122.15, 122.73, 64.16]
    assert all(len(r.rows) == 31 and len(r.ranks) == 12 for r in runs)


def test_old_all_to_all_rows_with_an_empty_reduction_and_prose_labels_between_blocks_are_read():
    """nccl-tests#78: two blocks labelled "all_reduce result" and "alltoall result"; the
    all-to-all's rows (nccl-tests of 2020-2022) print nothing under 'redop', one column short,
    and an in-place error of 1 that nccl-tests does not report (its 'Out of bounds values :
    0 OK')."""
    runs = parse_nccl_logs(PASTED / "nccltests78_v100_two_blocks_labelled.txt", nodes=8, gpus_per_node=8)
    assert [r.binary for r in runs] == ["all_reduce_perf", "alltoall_perf"]
    alltoall = runs[1].rows
    assert [(r.size_bytes, r.redop, r.out_of_place.time_us, r.in_place.busbw_GBps) for r in alltoall] == [
        (268435456, "none", 520935.0, 0.51), (536870912, "none", 1041974.0, 0.51)]
    assert [(r.out_of_place.wrong, r.in_place.wrong) for r in alltoall] == [(0, None), (0, None)]
    assert [(r.out_of_place.wrong, r.in_place.wrong) for r in runs[0].rows] == [(0, 0), (0, 0)]
    # A row that lost its last column, its reduction printed, is still a cut row.
    first = (PASTED / "nccltests78_v100_two_blocks_labelled.txt").read_text().split("alltoall result")[0]
    with pytest.raises(InputError, match="expected 12 columns .* got 11 \\(truncated row\\?\\)"):
        parse_nccl_logs(first.replace("4.33  2e-06\n", "4.33\n", 1), nodes=8, gpus_per_node=8)


def test_an_indented_block_behind_launcher_tags_is_read_and_its_elisions_skipped():
    log = parse_nccl_log(PASTED / "eks_g5_efa_2node_tagged_list.txt", collective="all_reduce", nodes=2, gpus_per_node=1)
    assert [r.size_bytes for r in log.rows] == [262144, 524288, 1048576, 2097152, 4194304]
    assert (log.rows[0].out_of_place.busbw_GBps, log.rows[-1].in_place.busbw_GBps) == (1.34, 2.51)
    assert log.nccl_version == "2.12.7+cuda11.4" and log.avg_busbw_GBps == 1.15327


def test_a_count_that_holds_the_whole_size_rules_out_the_split_collectives():
    """2 ranks, busbw = algbw: a sendrecv, an all-reduce or (by the ratio alone) a
    reduce-scatter; the count (size / 4 for floats) is a whole buffer's, which all-gather,
    reduce-scatter and all-to-all do not print. The two left stay a question."""
    path = PASTED / "v100_pcie_2node_markdown_list.txt"
    with pytest.raises(InputError, match=r"cannot tell which nccl-tests binary wrote this output "
                                         r"\(fits all_reduce_perf, sendrecv_perf\)"):
        parse_nccl_log(path)
    log = parse_nccl_log(path, collective="all_reduce")
    assert (len(log.rows), [r.host for r in log.ranks]) == (25, ["sw53", "sw54"])


@pytest.mark.parametrize(("edit", "where"), [
    (lambda text: "# rccl-tests version 2.17.9-develop:2596ca5f71 rccl-headers=22803 rccl-library=22707\n" + text,
     "line 1"),
    (lambda text: text.replace("# Out of bounds", "# Errors with asterisks indicate errors that have exceeded the "
                                                  "maximum threshold.\n# Out of bounds"), "line 2[0-9]"),
    (lambda text: text.replace("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"), "line 6: rank 0 is an AMD Instinct MI300X"),
])
def test_rccl_tests_output_is_refused_in_one_line(edit, where, tmp_path, capsys):
    with pytest.raises(InputError, match=where + r".*rccl-tests output \(AMD GPUs and RCCL\): flowsim models NCCL on "
                                               r"NVIDIA GPUs$"):
        parse_nccl_log(edit(SENDRECV.read_text()))
    # Among other files: its line says once that it was not checked.
    path = tmp_path / "rccl.txt"
    path.write_text(edit(SENDRECV.read_text()))
    assert flowsim_check([str(SENDRECV), str(path), "--system", "dgx-h100", "--min-bytes", "1G", "--brief"]) == 2
    assert capsys.readouterr().err.endswith("flowsim models NCCL on NVIDIA GPUs (not checked)\n")


def test_a_rank_count_the_printed_bandwidths_cannot_pin_down_is_not_called_a_mismatch():
    """busbw / algbw of a 128-rank all-to-all, 47.30 / 47.67 as printed to 0.01 GB/s, fits
    any count from 126 to 132 (OCI's GB300 run on 2 racks prints exactly these): the 128
    given stand, with no warning; one outside is named with the whole range."""
    text = SENDRECV.read_text().replace("sendrecv_perf", "alltoall_perf")
    rows = [line for line in text.splitlines() if re.match(r"\s+\d", line)]
    body = text.replace("\n".join(rows), "  8589934592      16777216     float    none      -1   180191   47.67   47.30"
                                         "      0   179150   47.95   47.57    N/A")
    body = "\n".join(line for line in body.splitlines() if "Rank" not in line)
    fits = parse_nccl_log(body, nodes=32, gpus_per_node=4)
    assert not any("ratio says" in w for w in fits.warnings)
    off = parse_nccl_log(body, nodes=30, gpus_per_node=4)
    assert any("the busbw / algbw ratio says 126 to 132 ranks, not 30 node(s) x 4 GPU(s)" in w for w in off.warnings)


def test_a_thread_driving_several_gpus_may_take_one_launch_round_longer_before_a_row_is_short():
    """OCI's A100 server, one thread driving 8 GPUs: LL at 1-2 MiB takes 76.7 and 112 us where
    the model gives 35.9 and 56.8. Within 3x NCCL's latency (about 15 us) they would be SHORT;
    a single-process run carries CUDA's launch overheads (nccl-tests#333), so a row may take one
    launch round, 8 x 4.2 = 33.6 us, longer. With one GPU a thread the same rows are SHORT."""
    path = VALIDATION / "oci_bmgpu48_a100_1n8g_allreduce.txt"
    report = check_nccl_log(path, system="dgx-a100", min_bytes=1 << 20)
    rows = {r.size_bytes: r for r in report.rows}
    assert not rows[1 << 20].short and not rows[2 << 20].short
    assert "a row may take that much longer before it is flagged SHORT" in report.format_text()
    # From 1 MiB the model's times are all longer than the round; below, the round sets 14 of them.
    assert "at least 33.6 us per iteration, less than every size's predicted time;" in report.format_text()
    whole = check_nccl_log(path, system="dgx-a100").format_text()
    assert "at least 33.6 us per iteration, the predicted time of 14 sizes;" in whole
    one_each = "\n".join(line.replace("nGpus 8", "nGpus 1") for line in path.read_text().splitlines())
    split = check_log(parse_nccl_log(one_each, nodes=1, gpus_per_node=8), system="dgx-a100", min_bytes=1 << 20)
    assert [r.size_bytes for r in split.rows if r.short] == [1 << 20, 2 << 20]


def _box_preamble(min_bytes: int, max_bytes: int, factor: int) -> list[str]:
    """The lines of a constructed nccl-tests output (src/util.cu's layout) from ``# nThread``
    to the table's header: one thread, 8 H100 of host ``box-1``."""
    return [
        f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: {factor}(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(f"#  Rank  {r} Group  0 Pid {100 + r} on box-1 device  {r} [0000:{r}b:00] NVIDIA H100 80GB HBM3"
          for r in range(8)),
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)",
    ]


def _rooted_log(binary: str | None, *roots: int) -> str:
    """A constructed ``gather_perf`` / ``scatter_perf`` output (layout of nccl-tests
    src/util.cu; not a measurement): 8 H100 of one host, a block of rows for each of
    ``roots`` (default 0; several as ``-r -1`` runs them), float, the count a rank's
    part (``*GetCollByteCount``), busbw = algbw x 7/8 (``*GetBw``). ``binary`` None leaves out
    the line that names it. A ``hypercube_perf`` run has no root (-1) and prints algbw =
    busbw = 7/8 of the size over the time (src/hypercube.cu)."""
    cube = binary is not None and binary.startswith("hypercube")
    lines = ["# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902"]
    if binary is not None:
        lines.append(f"# Collective test starting: {binary}")
    lines += _box_preamble(1 << 20, 512 << 20, 8)
    for root in roots or (-1 if cube else 0,):
        for size, time_us in ((1 << 20, 40.0), (8 << 20, 80.0), (64 << 20, 320.0), (512 << 20, 2000.0)):
            algbw = size / time_us / 1e3 * (7 / 8 if cube else 1)
            half = f"  {time_us:7.2f}  {algbw:6.2f}  {algbw * (1 if cube else 7 / 8):6.2f}       0"
            lines.append(f"{size:12d}  {size // 32:12d}     float    none  {root:6d}{half}{half}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 150.0", "#"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("binary", ["gather_perf", "scatter_perf"])
def test_gather_and_scatter_outputs_are_read_and_checked(tmp_path, capsys, binary):
    log = parse_nccl_log(_rooted_log(binary))
    assert (log.binary, log.collective, log.n_ranks) == (binary, binary.removesuffix("_perf"), 8)
    assert [r.root for r in log.rows] == [0] * 4 and log.rows[-1].out_of_place.busbw_GBps == pytest.approx(234.88)
    path = tmp_path / "out.txt"
    path.write_text(_rooted_log(binary))
    assert flowsim_check([str(path), "--system", "dgx-h100", "--json"]) in (0, 1)
    checked = json.loads(capsys.readouterr().out)
    assert checked["binary"] == binary and [r["algorithm"] for r in checked["rows"]] == ["p2p"] * 4


def test_gather_and_scatter_rows_look_alike_and_are_told_apart_by_name():
    # Rooted, no reduction, (n-1)/n: only the name tells a gather from a scatter.
    text = _rooted_log(None)
    with pytest.raises(InputError, match=r"fits gather_perf, scatter_perf\); give the collective explicitly \(--collective NAME, collective=\)"):
        parse_nccl_log(text)
    assert parse_nccl_log(text, source="node1_scatter_perf.txt").binary == "scatter_perf"
    assert parse_nccl_log(text, collective="gather").binary == "gather_perf"


def test_a_rooted_log_is_predicted_with_its_root(monkeypatch):
    seen = []
    real_sweep = flowsim.check.report.sweep

    def sweep(*args, **options):
        seen.append(options.get("root"))
        return real_sweep(*args, **options)

    monkeypatch.setattr(flowsim.check.report, "sweep", sweep)
    report = check_nccl_log(_rooted_log("gather_perf", 6), system="dgx-h100")
    assert seen == [6] and report.log.rows[0].root == 6
    check_nccl_log(_rooted_log("scatter_perf"), system="dgx-h100")
    assert seen == [6, None]  # root 0: collective_time's own default


def test_a_log_of_every_root_in_turn_is_checked_block_by_block(monkeypatch):
    # nccl-tests -r -1 runs the sweep once per root: a block of sizes each, each predicted with
    # its root. A sweep that takes root r's time (r + 1) times shows which block got which.
    real_sweep = flowsim.check.report.sweep

    def sweep(*args, **options):
        root = options.get("root", 0)
        return [dataclasses.replace(r, time_us=r.time_us * (root + 1)) for r in real_sweep(*args, **options)]

    monkeypatch.setattr(flowsim.check.report, "sweep", sweep)
    report = check_nccl_log(_rooted_log("scatter_perf", 0, 1, 2), system="dgx-h100")
    assert [r.root for r in report.rows] == [0] * 4 + [1] * 4 + [2] * 4
    times = [r.predicted_time_us for r in report.rows]
    assert times[4:8] == pytest.approx([2 * t for t in times[:4]]) and times[8:] == pytest.approx([3 * t for t in times[:4]])
    lines = report.format_text().splitlines()
    assert [line for line in lines if line.startswith("# root")] == ["# root 0", "# root 1", "# root 2"]
    assert lines[lines.index("# root 1") + 1].split()[0] == "1048576"
    assert report.to_dict()["rows"][5]["root"] == 1
    assert "# root" not in check_nccl_log(_rooted_log("scatter_perf", 3), system="dgx-h100").format_text()


def test_a_hypercube_output_is_read_by_its_name_or_its_rows(tmp_path, capsys):
    text = _rooted_log("hypercube_perf")
    log = parse_nccl_log(text)
    assert (log.binary, log.collective, log.rows[-1].root) == ("hypercube_perf", "hypercube", -1)
    # No root, nothing reduced, busbw = algbw with a count of a rank's part: no other binary.
    unnamed = "\n".join(line for line in text.splitlines() if "Collective test" not in line)
    assert parse_nccl_log(unnamed).binary == "hypercube_perf"
    path = tmp_path / "out.txt"
    path.write_text(text)
    assert flowsim_check([str(path), "--system", "dgx-h100", "--json"]) in (0, 1)
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["algorithm"] for r in rows] == ["p2p"] * 4 and rows[-1]["root"] == -1
    assert not any("one NCCL group" in w for w in check_nccl_log(text, system="dgx-h100").warnings)
    grouped = check_nccl_log(text.replace("nGpus 1", "nGpus 8"), system="dgx-h100", nodes=1)  # -g 8
    assert ("nccl-tests ran this hypercube's rounds inside one NCCL group (-g or -m above 1), so NCCL issued them "
            "together; the prediction runs them one after another") in grouped.warnings


def test_sizes_an_older_nccl_tests_printed_are_predicted_as_they_are(monkeypatch):
    # Before 2.13.12 nccl-tests did not trim a rank's part to 16 bytes: 100 B of floats on 8
    # ranks ran as 3 floats a rank, 96 B, which trimmed would be no bytes at all.
    lines = _lines(ALL_GATHER)
    first = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    half = "    10.00    0.01    0.01       0"
    lines[first] = f"{96:12d}  {3:12d}     float    none      -1{half}{half}"
    predicted = []
    real_sweep = flowsim.check.report.sweep

    def sweep(*args, **options):
        rows = real_sweep(*args, **options)
        predicted.extend(r.size_bytes for r in rows)
        return rows

    monkeypatch.setattr(flowsim.check.report, "sweep", sweep)
    report = check_nccl_log("\n".join(lines), system="dgx-h100", collective="all_gather")
    # The rows, then (where a size is flagged) the same sizes under NCCL's other choices.
    sizes = [r.size_bytes for r in report.rows]
    assert predicted[:len(sizes)] == sizes and set(predicted) <= set(sizes) and predicted[0] == 96


@pytest.mark.parametrize(("option", "message"), [
    (["--fail", "n9.*"], "--fail[0]: pattern 'n9.*' matches no node or link name"),
    (["--degrade", "x=0.5"], '--degrade."x": pattern \'x\' matches no node or link name'),
])
def test_cli_names_a_bad_failure_as_its_option(capsys, option, message):
    assert flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "1G", *option]) == 2
    assert capsys.readouterr().err == f"flowsim check: error: {message}\n"


def _alltoallv_log(count_of=lambda part: part) -> str:
    """A constructed ``alltoallv_perf`` output (not a measurement): 8 H100, floats, spread 1,
    each row's size what a rank sends (the parts of nccl-tests src/alltoallv.cu summed),
    its count the even part, busbw = algbw x 7/8."""
    lines = _rooted_log("alltoallv_perf").splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    rows = []
    for total, time_us in ((1 << 20, 40.0), (8 << 20, 80.0), (64 << 20, 320.0), (512 << 20, 2000.0)):
        size = int(all_to_all_v_bytes(8, total)[0].sum())
        algbw = size / time_us / 1e3
        half = f"  {time_us:7.2f}  {algbw:6.2f}  {algbw * 7 / 8:6.2f}       0"
        rows.append(f"{size:12d}  {count_of(total // 32):12d}     float    none      -1{half}{half}")
    return "\n".join(lines[:first] + rows + lines[first + 4:]) + "\n"


def test_an_alltoallv_output_is_checked_on_its_generated_pattern():
    report = check_nccl_log(_alltoallv_log(), system="dgx-h100")
    assert report.log.binary == "alltoallv_perf" and [r.algorithm for r in report.rows] == ["p2p"] * 4
    spread = ("the log does not say alltoallv_perf's spread (NCCL_TESTS_ALLTOALLV_SPREAD): taken as nccl-tests' "
              "default, 1 (--nccl-env NCCL_TESTS_ALLTOALLV_SPREAD=X where the run set another)")
    assert spread in report.warnings
    given = check_nccl_log(_alltoallv_log(), system="dgx-h100", nccl_env={"NCCL_TESTS_ALLTOALLV_SPREAD": "0.5"})
    assert spread not in given.warnings
    assert given.rows[-1].predicted_busbw_GBps != report.rows[-1].predicted_busbw_GBps
    with pytest.raises(InputError, match=r"an alltoallv_perf run of a traffic matrix file "
                                         r"\(NCCL_TESTS_ALLTOALLV_MATRIX_FILE; its rows print count 0\)"):
        check_nccl_log(_alltoallv_log(lambda part: 0), system="dgx-h100")


def test_a_json_alltoallv_takes_its_spread_from_the_environment_it_records(tmp_path):
    # nccl-tests -J records the environment: its NCCL_TESTS_ALLTOALLV_SPREAD is the run's.
    document = json.loads((DATA / "all_reduce_perf_dgx_h100_4node.json").read_text())
    document["args"][0] = document["args"][0].replace("all_reduce_perf", "alltoallv_perf")
    document["env"] = [*document.get("env", []), "NCCL_TESTS_ALLTOALLV_SPREAD=0"]
    for result in document["results"]:
        result["redop"], result["count"] = "none", result["size"] // 4 // 32
        for half in ("out_of_place", "in_place"):
            result[half]["bus_bw"] = result[half]["alg_bw"] * 31 / 32
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document))
    report = check_nccl_log(path, system="dgx-h100")
    assert report.log.binary == "alltoallv_perf" and dict(report.log.nccl_env)["NCCL_TESTS_ALLTOALLV_SPREAD"] == "0"
    assert not any("spread" in w for w in report.warnings)


def _typed_log(*blocks: tuple[str, str], slower: float = 1.0) -> str:
    """A constructed ``all_reduce_perf`` output (layout of nccl-tests src/util.cu; not a
    measurement): 8 H100 of one host, a block of two sizes for each (type, redop) of
    ``blocks``, as ``-d all -o all`` prints them, busbw = algbw x 14/8; times ``slower``
    times those of a healthy server."""
    lines = [
        "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902",
        "# Collective test starting: all_reduce_perf",
        *_box_preamble(64 << 20, 128 << 20, 2),
    ]
    element = {"int8": 1, "float": 4, "bfloat16": 2, "char": 1}
    for dtype, redop in blocks:
        for size, time_us in ((64 << 20, 300.0 * slower), (128 << 20, 550.0 * slower)):
            algbw = size / time_us / 1e3
            half = f"  {time_us:7.2f}  {algbw:6.2f}  {algbw * 14 / 8:6.2f}       0"
            lines.append(f"{size:12d}  {size // element[dtype]:12d}  {dtype:>8}  {redop:>6}      -1{half}{half}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 300.0", "#"]
    return "\n".join(lines) + "\n"


def test_each_row_is_predicted_with_its_type_and_reduction():
    # NCCL's NVLS reduces a float sum, not int8 nor an average (src/include/device.h): on one
    # DGX H100 the same sizes run NVLS in the float sum's block and a ring in the others.
    report = check_nccl_log(_typed_log(("float", "sum"), ("int8", "sum"), ("bfloat16", "avg"), ("char", "max")),
                            system="dgx-h100")
    assert [(r.dtype, r.redop, r.algorithm) for r in report.rows[::2]] == [
        ("float", "sum", "nvls"), ("int8", "sum", "ring"), ("bfloat16", "avg", "ring"), ("char", "max", "ring")]
    float_sum, int8_sum = report.rows[1].predicted_time_us, report.rows[3].predicted_time_us
    assert int8_sum > 1.2 * float_sum
    lines = report.format_text().splitlines()
    assert [line for line in lines if line.startswith("# ") and len(line.split()) <= 3] == [
        "# float sum", "# int8 sum", "# bfloat16 avg", "# char max"]
    assert report.to_dict()["rows"][4]["dtype"] == "bfloat16"
    assert not any("not one nccl-tests prints" in w for w in report.warnings)
    # One block alone prints no block line.
    assert "# float sum" not in check_nccl_log(_typed_log(("float", "sum")), system="dgx-h100").format_text()


def test_the_not_nvls_line_sets_aside_only_the_rows_nvls_predicted():
    # Four times slower than a healthy server: the float sum's NVLS rows are slower than the
    # ring NCCL would run without NVLS too (one line says so), and the int8 block's rows, a
    # ring's at the same sizes, keep their own advice.
    report = check_nccl_log(_typed_log(("float", "sum"), ("int8", "sum"), slower=4.0), system="dgx-h100")
    assert all(r.short for r in report.rows)
    assert [size for size, _, _ in report.not_nvls] == [64 << 20, 128 << 20]
    text = report.format_text()
    assert "# SHORT at 64 MiB-128 MiB, predicted with nvls: not NVLS missing on the cluster" in text
    assert "# SHORT where NVLink bounds the prediction (64 MiB-128 MiB): look at the GPUs' NVLinks" in text


def test_a_type_nccl_tests_does_not_print_is_predicted_as_float_with_a_warning():
    report = check_nccl_log(_typed_log(("float", "sum")).replace("   float     sum", "  float8  median"),
                            system="dgx-h100")
    assert [w for w in report.warnings if "not one nccl-tests prints" in w] == [
        "data type or reduction 'float8', 'median' is not one nccl-tests prints: predicted as float and sum"]
    assert report.rows[0].algorithm == "nvls"


def _with_info(text: str, *info: str, version: str | None = "2.30.7+cuda12.9") -> str:
    """``text`` with NCCL INFO lines (and NCCL's version line) before its table, as a run with
    NCCL_DEBUG=INFO prints them ([NCCL] src/init.cc, src/transport/net.cc)."""
    head, table = text.split("#       size", 1)
    lines = ([f"NCCL version {version}"] if version else []) + [f"box-1:100:110 [0] NCCL INFO {line}" for line in info]
    return head + "\n".join(lines) + "\n#       size" + table


@pytest.mark.parametrize(("version", "value", "nccl_env", "ring"), [
    ("2.4.8+cuda10.0", "0", None, True),  # the AWS EFA guide's p3dn log
    ("2.4.2+cuda10.0", "18446744073709551615", None, True),  # -1, which NCCL prints unsigned
    ("2.4.8+cuda10.0", "18446744073709551614", None, False),  # -2: NCCL's default, its own threshold
    ("2.4.8+cuda10.0", "4096", None, False),  # trees up to 4 KiB: not a choice NCCL_ALGO makes
    ("2.5.6+cuda10.1", "0", None, False),  # gone from 2.5
    ("2.4.8+cuda10.0", "0", {"NCCL_ALGO": "Tree"}, False),  # the caller's setting wins
])
def test_nccl_24s_tree_threshold_of_0_predicts_rings(version, value, nccl_env, ring):
    # 64 KiB on two DGX H100 without NVLS or LL128: a tree by NCCL's tuner, where NCCL 2.4
    # built none with NCCL_TREE_THRESHOLD=0 (v2.4.8-1 src/init.cc, src/enqueue.cc).
    info = [f"NCCL version {version}", f"NCCL_TREE_THRESHOLD set by environment to {value}."]
    text = two_host_h100_log(info, busbw="20.00", time_us="100.0").replace(
        "1073741824     268435456", "     65536         16384")
    report = check_nccl_log(text, system="dgx-h100", nccl_env=nccl_env)
    assert report.rows[0].algorithm == ("ring" if ring else "tree")
    said = f"NCCL_ALGO=Ring (log: NCCL_TREE_THRESHOLD={value if value == '0' else -1}, with which NCCL " \
        f"{version.split('+')[0]} ran no trees)"
    assert (said in report.format_text()) == ring


def test_nccl_info_lines_say_where_the_run_differs_from_the_prediction():
    ok = _typed_log(("float", "sum"))
    # 2.20 on: "collnet channels" in the line; before, not (both read).
    log = parse_nccl_log(_with_info(ok, "32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, "
                                        "32 p2p channels per peer"))
    assert log.nccl_channels == ((32, 16),)
    assert parse_nccl_log(_with_info(ok, "16 coll channels, 0 nvls channels, 16 p2p channels, 16 p2p channels per "
                                         "peer")).nccl_channels == ((16, 0),)
    # One DGX H100 under NCCL 2.30.7: the replay of its search gives 24 ring channels and 16 NVLS ones.
    report = check_nccl_log(_with_info(ok, "8 coll channels, 8 collnet channels, 0 nvls channels, 8 p2p channels, "
                                           "2 p2p channels per peer"), system="dgx-h100")
    (note,) = [w for w in report.warnings if "coll and" in w]
    assert note.startswith("NCCL's INFO lines print 8 coll and 0 nvls channels; flowsim's replay of NCCL 2.30.7's "
                           "search gives 24 and 16")
    same = "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    assert not [w for w in check_nccl_log(_with_info(ok, same), system="dgx-h100").warnings if "coll and" in w]
    # A version of a series whose rules flowsim does not have, or none printed (nor the library
    # code nccl-tests prints): not compared.
    unversioned = ok.replace("# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902\n", "")
    for text, version in ((ok, "2.18.6+cuda12.2"), (unversioned, None)):
        other = _with_info(text, "8 coll channels, 0 nvls channels, 8 p2p channels, 2 p2p channels per peer",
                           version=version)
        assert not [w for w in check_nccl_log(other, system="dgx-h100").warnings if "coll and" in w]


@pytest.mark.parametrize(("network", "gdr", "expected"), [
    ("IB", "/GDRDMA", None),
    ("IB", "", "2 of the 2 NET/IB connections in NCCL's INFO lines run without GPUDirect RDMA"),
    ("AWS Libfabric", "", "2 of the 2 NET/AWS Libfabric connections"),
    ("Socket", "", "2 network connections in NCCL's INFO lines run over TCP sockets (NET/Socket)"),
    ("GPUDirectTCPX", "", None),  # Google's TCPX plugin moves GPU memory without RDMA by design
])
def test_network_connections_without_rdma_are_named(network, gdr, expected):
    sends = [f"Channel 0{c}/0 : 7[7] -> 8[0] [send] via NET/{network}/{c}{gdr}" for c in range(2)]
    log = _with_info(_typed_log(("float", "sum")), *sends, "Channel 00/0 : 8[0] -> 7[7] [receive] via NET/IB/0")
    notes = [w for w in check_nccl_log(log, system="dgx-h100").warnings if "NET/" in w]
    assert notes == [] if expected is None else len(notes) == 1 and notes[0].startswith(expected)


@pytest.mark.parametrize(("lines", "version", "sends", "local"), [
    # NCCL 2.4.8 (v2.4.8-1 src/transport/net.cc, p2p.cc, shm.cc): ranks alone on the network's lines.
    (["Ring 00 : 0 -> 8 [send] via NET/IB/0/GDRDMA", "Ring 01 : 0 -> 8 [send] via NET/IB/1",
      "Ring 00 : 8 -> 0 [receive] via NET/IB/0", "Ring 00 : 0[0] -> 1[1] via P2P/IPC",
      "Ring 00 : 1 -> 2 via P2P/common device", "Ring 00 : 2[2] -> 3[3] via direct shared memory"],
     "2.4.8+cuda10.0", (("IB", 1, 1),), (("P2P", 2), ("SHM", 1))),
    # NCCL 2.6.4 (v2.6.4-1): each rank's bus id in hex (aws-samples' EKS example on EFA).
    (["Ring 00 : 0[160] -> 1[160] [send] via NET/AWS Libfabric/0",
      "Ring 00 : 0[1b000] -> 1[1c000] via P2P/IPC"], "2.6.4+cuda10.1", (("AWS Libfabric", 0, 1),), (("P2P", 1),)),
    # NCCL 2.7 to 2.11 (v2.11.4-1): "Channel", no connection index yet.
    (["Channel 00 : 0[1b000] -> 8[1b000] [send] via NET/IB/0/GDRDMA",
      "Channel 00 : 0[1b000] -> 1[1c000] via direct shared memory"], "2.11.4+cuda11.4", (("IB", 1, 0),),
     (("SHM", 1),)),
])
def test_older_nccls_connection_lines_are_read(lines, version, sends, local):
    log = parse_nccl_log(_with_info(_typed_log(("float", "sum")), *lines, version=version))
    assert (log.net_sends, log.local_links) == (sends, local)


@pytest.mark.parametrize(("lines", "system", "counted", "expected"), [
    # NCCL 2.19's SHM line, and 2.30.7's without the connection index: through host memory
    # on an NVLink server.
    (["Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct", "Channel 01 : 1[1] -> 2[2] via SHM/direct",
      "Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM/read"], "dgx-h100", (("SHM", 2), ("P2P", 1)),
     "2 of the 3 connections inside servers in NCCL's INFO lines go through host memory (via SHM), where the "
     "prediction moves them over NVLink"),
    (["Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", "Channel 00/1 : 1[1] -> 2[2] via P2P/IPC"], "dgx-h100",
     (("P2P", 2),), None),
    # PCIe GPUs: NCCL's default P2P level (PXB) takes pairs across a CPU through host memory.
    (["Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"], "rtx4090_8x", (("SHM", 1),), None),
])
def test_connections_inside_servers_through_host_memory_are_named(lines, system, counted, expected):
    log = _with_info(_typed_log(("float", "sum")), *lines)
    assert parse_nccl_log(log).local_links == counted
    notes = [w for w in check_nccl_log(log, system=system).warnings if "via SHM" in w]
    assert notes == [] if expected is None else len(notes) == 1 and notes[0].startswith(expected)


@pytest.mark.parametrize(("devices", "expected"), [
    # NCCL_IB_HCA=mlx5_0,mlx5_3 on two DGX H100: 2 of their 8 compute NICs.
    ("[0]mlx5_0:1/IB [1]mlx5_3:1/IB", "NCCL's INFO lines list 2 network device(s) for a rank's IB transport"),
    # All 8 and two storage ports, as NCCL lists them without NCCL_IB_HCA.
    (" ".join(f"[{d}]mlx5_{d}:1/IB" for d in range(10)), None),
])
def test_fewer_network_devices_than_the_systems_nics_are_named(devices, expected):
    log = two_host_h100_log([f"NET/IB : Using {devices} [RO]; OOB eth0:10.0.0.1<0>"])
    assert parse_nccl_log(log).net_devices == (len(devices.split()),)
    notes = [w for w in check_nccl_log(log, system="dgx-h100").warnings if "network device" in w]
    assert notes == [] if expected is None else len(notes) == 1 and notes[0].startswith(expected)
    # One host: no network between its GPUs, nothing to say.
    one = _with_info(_typed_log(("float", "sum")), f"NET/IB : Using {devices} [RO]; OOB eth0:10.0.0.1<0>")
    assert not [w for w in check_nccl_log(one, system="dgx-h100").warnings if "network device" in w]


def test_nccl_tuning_lines_set_each_sizes_algorithm_and_protocol():
    # NCCL_DEBUG_SUBSYS=TUNING: rank 0's line per call. One DGX H100 ran a ring at 64 and 128
    # MiB (NCCL_ALGO=Ring, say) where the model's replay of NCCL's tuner takes NVLS.
    lines = [f"AllReduce: {size} Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..23}}"
             for size in (64 << 20, 128 << 20) for _ in range(3)]
    report = check_nccl_log(_with_info(_typed_log(("float", "sum")), *lines), system="dgx-h100")
    assert [(r.nccl_ran, r.algorithm, r.protocol) for r in report.rows] == [("ring/simple", "ring", "simple")] * 2
    (note,) = [w for w in report.warnings if "TUNING" in w]
    assert note == ("NCCL's TUNING lines say what it ran at 2 size(s): each is predicted with NCCL's algorithm and "
                    "protocol; flowsim's replay of NCCL's tuner agrees at 0 of 2 (67108864 B: NCCL ring/simple, replay "
                    "nvls/simple; 134217728 B: NCCL ring/simple, replay nvls/simple)")
    assert report.to_dict()["rows"][0]["nccl_ran"] == "ring/simple"
    # Before 2.26 NCCL printed numbers (Algo 4 is NVLS, proto 2 Simple) and the model's time.
    numbered = [f"{size} Bytes -> Algo 4 proto 2 time 301.25" for size in (64 << 20, 128 << 20)]
    report = check_nccl_log(_with_info(_typed_log(("float", "sum")), *numbered), system="dgx-h100")
    assert [r.nccl_ran for r in report.rows] == ["nvls/simple"] * 2
    assert any("agrees at 2 of 2" in w for w in report.warnings)
    # An algorithm asked for wins over the log's.
    report = check_nccl_log(_with_info(_typed_log(("float", "sum")), *lines), system="dgx-h100", algorithm="nvls")
    assert [r.algorithm for r in report.rows] == ["nvls"] * 2 and not any("TUNING" in w for w in report.warnings)


def test_nccl_tuning_lines_of_a_split_collective_count_a_ranks_part_from_2_26():
    # From v2.26.2-1 an all-gather's line prints count x type size: S / 8 on 8 ranks.
    text = _typed_log(("float", "sum")).replace("all_reduce_perf", "all_gather_perf").replace("   sum  ", "  none  ")
    lines = [f"AllGather: {size // 8} Bytes -> Algo RING proto LL128 channel{{Lo..Hi}}={{0..15}}"
             for size in (64 << 20, 128 << 20)]
    log = parse_nccl_log(_with_info(text, *lines, "AllReduce: 67108864 Bytes -> Algo NVLS proto SIMPLE "
                                                  "channel{Lo..Hi}={0..15}"))
    assert log.collective == "all_gather"
    report = check_log(log, system="dgx-h100")
    assert [(r.nccl_ran, r.protocol) for r in report.rows] == [("ring/ll128", "ll128")] * 2


def test_collnet_in_tuning_lines_is_followed_with_collnet_enabled():
    # CollNet in NCCL's TUNING lines says the run had NCCL_COLLNET_ENABLE=1: the check takes it,
    # and lays out CollNet Direct where NCCL ran it (two DGX A100 on HDR InfiniBand, whose
    # leaves reduce), at the communicator's 24 channels (16, and half as many again with
    # CollNet). One server has no network to reduce in: the model's choice there, saying why.
    text = (VALIDATION / "ocihpcoke_a100_2n8g_allreduce.txt").read_text()
    lines = [f"AllReduce: {size} Bytes -> Algo COLLNET_DIRECT proto SIMPLE channel{{Lo..Hi}}={{0..23}}"
             for size in (1 << 30, 2 << 30)]
    report = check_nccl_log(_with_info(text, *lines), system="dgx-a100")
    followed = {r.size_bytes: (r.algorithm, r.protocol, r.channels) for r in report.rows if r.size_bytes in (1 << 30,
                                                                                                          2 << 30)}
    assert followed == {1 << 30: ("collnet_direct", "simple", 24), 2 << 30: ("collnet_direct", "simple", 24)}
    assert "NCCL's TUNING lines show CollNet (IB SHARP) at 2 size(s): 1073741824, 2147483648 B: predicted with " \
           "NCCL_COLLNET_ENABLE=1" in report.warnings
    one = [f"AllReduce: {size} Bytes -> Algo COLLNET_DIRECT proto SIMPLE channel{{Lo..Hi}}={{0..7}}"
           for size in (64 << 20, 128 << 20)]
    report = check_nccl_log(_with_info(_typed_log(("float", "sum")), *one), system="dgx-h100")
    assert [r.algorithm for r in report.rows] == ["nvls"] * 2
    assert ("NCCL ran collnet_direct/simple at 2 size(s): 67108864, 134217728 B, which flowsim cannot lay out here "
            "(collnet_direct: the ranks are in one server; CollNet reduces in the network across servers): "
            "predicted with the model's choice there") in report.warnings


def test_an_all_gather_through_the_network_in_tuning_lines_is_laid_out():
    # An all-gather's TUNING lines name CollNet Direct (NCCL 2.20.5 on, per-rank bytes from
    # 2.26.2): the check takes the run as one with NCCL_COLLNET_ENABLE=1 and lays out CollNet
    # Direct where NCCL ran it (on the channels NCCL's tuning gives, as for every algorithm).
    text = (VALIDATION / "xxrjun_h100_10n8g_allgather.txt").read_text()
    sizes = (33553920, 67107840)
    lines = [f"AllGather: {size // 80} Bytes -> Algo COLLNET_DIRECT proto SIMPLE channel{{Lo..Hi}}={{0..15}}"
             for size in sizes]
    report = check_nccl_log(_with_info(text, *lines, version="2.29.2+cuda12.8"), system="dgx-h100")
    followed = {r.size_bytes: (r.algorithm, r.protocol, r.nccl_ran) for r in report.rows if r.size_bytes in sizes}
    assert followed == dict.fromkeys(sizes, ("collnet_direct", "simple", "collnet_direct/simple"))
    assert any("NCCL_COLLNET_ENABLE=1" in warning for warning in report.warnings)


def test_nccl_comm_lines_give_the_shape_of_a_log_without_rank_lines():
    # From 2.21 each rank's INFO line has the cluster's shape ([NCCL] src/init.cc).
    bare = "\n".join(line for line in _typed_log(("float", "sum")).splitlines() if "Rank  " not in line) + "\n"
    comm = [f"comm 0x55{r}0 rank {r} nRanks 8 nNodes 1 localRanks 8 localRank {r} MNNVL 0" for r in range(8)]
    log = parse_nccl_log(_with_info(bare, *comm))
    assert (log.n_nodes, log.n_ranks, log.ranks_from) == (1, 8, "NCCL INFO comm lines")
    assert any(w.endswith("(from the NCCL INFO comm lines)") for w in log.warnings)
    # The caller's shape wins; nodes of different sizes give none.
    assert parse_nccl_log(_with_info(bare, *comm), nodes=2, gpus_per_node=4).n_nodes == 2
    uneven = ["comm 0x1 rank 0 nRanks 6 nNodes 2 localRanks 4 localRank 0", "comm 0x2 rank 5 nRanks 6 nNodes 2 "
              "localRanks 2 localRank 1"]
    with pytest.raises(InputError, match="give the cluster's shape"):
        parse_nccl_log(_with_info(bare, *uneven))


def test_the_old_error_column_is_judged_as_nccl_tests_judged_it():
    # nccl-tests before 2.13 printed each half's largest relative error ('error', '%5.0le'),
    # an out-of-bounds value where it passed DeltaMaxValue(type) x (ranks - 1): the DGX-2 log's
    # all-gather at 4 and 8 GiB (1e+00 on 12 ranks, its trailer '4 FAILED'), not its all-reduce's
    # rounding (6e-08 to 2e-07, under 1e-5 x 11).
    text = (Path(__file__).parents[1] / "data/nccl_tests/pasted/dgx2_v100_five_binaries.txt").read_text()
    gather, reduce_all = parse_nccl_logs(text)[:2]
    wrong = [row.size_bytes for row in gather.rows if row.out_of_place.wrong]
    assert wrong == [4294967280, 8589934560] and all(row.in_place.wrong for row in gather.rows[-2:])
    assert gather.rows[-1].out_of_place.max_error == 1.0
    assert not any(row.out_of_place.wrong or row.in_place.wrong for row in reduce_all.rows)
    assert reduce_all.rows[0].out_of_place.max_error == 2e-07
    # An error of 0.5 is out of bounds too, though not a whole element.
    first = reduce_all.rows[0]
    edited = text.replace("61.03    0.00    0.00  2e-07", "61.03    0.00    0.00  5e-01", 1)
    assert parse_nccl_logs(edited)[1].rows[0].out_of_place.wrong == 1 and first.size_bytes == 8
    # A count of wrong elements (nccl-tests 2.13 on, its header's '#wrong') is read as it is, a
    # million or more in '%g''s form too.
    assert parse_nccl_log(SENDRECV).rows[0].out_of_place.max_error is None
    lines = _lines(SENDRECV)
    last = lines[21].rsplit(None, 1)
    lines[21] = f"{last[0]}  1.67772e+07"
    half = parse_nccl_log("\n".join(lines)).rows[-1].in_place
    assert (half.wrong, half.max_error) == (16777200, None)


def _split_by_tuning(row, prefix=""):
    """``row`` as nccl-tests and NCCL print it onto one stream with NCCL_DEBUG=INFO: its start,
    each half, and between them the TUNING line of each call, written onto the piece before
    it (NVIDIA/nccl#1453)."""
    tokens = row.split()
    tuning = (f"{prefix}dgx-a01:41230:41230 [0] NCCL INFO AllReduce: {tokens[0]} Bytes -> Algo RING proto SIMPLE "
              "channel{Lo..Hi}={0..31}")
    pieces = ["   ".join(tokens[:5]), "   ".join(tokens[5:9]), "   ".join(tokens[9:])]
    return "\n".join([f"{prefix}{pieces[0]}{tuning}", tuning, f"{prefix}{pieces[1]}{tuning}", tuning,
                      f"{prefix}{pieces[2]}"])


@pytest.mark.parametrize("prefix", ["", "[0] "], ids=["bare", "mpich"])
def test_rows_split_by_nccl_debug_lines_are_joined(prefix):
    text = ALL_REDUCE_4.read_text()
    rows = [line for line in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)][:2]
    split = text
    for row in rows:
        split = split.replace(row, _split_by_tuning(row, prefix))
    if prefix:
        split = "\n".join(prefix + line for line in split.splitlines())
    whole, joined = parse_nccl_log(text), parse_nccl_log(split)
    assert [dataclasses.replace(r, line=0) for r in joined.rows] == [dataclasses.replace(r, line=0) for r in whole.rows]
    assert any("rows split over lines by other output (NCCL's INFO lines), read joined" in w for w in joined.warnings)
    # The TUNING lines written onto the pieces are read too.
    assert {(c.n_bytes, c.algorithm) for c in joined.nccl_calls} == {(1048576, "RING"), (2097152, "RING")}


def test_a_binary_the_rows_contradict_is_warned_about(tmp_path):
    # An all-gather's output saved under an all-reduce's name, or checked with --collective
    # all_reduce: its rows' busbw / algbw ((n-1)/n) and redop ('none') are no all-reduce's.
    path = tmp_path / "all_reduce_perf_h100.txt"
    path.write_text(ALL_GATHER.read_text())
    by_name = parse_nccl_log(path)
    assert by_name.binary == "all_reduce_perf"
    assert any(w.startswith("the file name names all_reduce_perf, but the rows fit all_gather_perf") and
               w.endswith("checked as all_reduce_perf (--collective names the binary)") for w in by_name.warnings)
    asked = parse_nccl_log(ALL_GATHER.read_text(), collective="all_reduce")
    assert asked.binary == "all_reduce_perf"
    assert any(w.startswith("--collective names all_reduce_perf, but the rows fit all_gather_perf") and
               w.endswith("checked as all_reduce_perf") for w in asked.warnings)
    assert not any("but the rows fit" in w for w in parse_nccl_log(ALL_GATHER).warnings)


def test_a_quoted_average_before_the_table_is_skipped_and_small_rows_tell_their_binary():
    # aws-k8s-tester#503: a reply quoting the end of the run it answers ("> # Avg bus
    # bandwidth : 92.3405") before its own run made the whole paste unreadable.
    text = SENDRECV.read_text()
    quoted = "> # Out of bounds values : 0 OK\n> # Avg bus bandwidth    : 92.3405\n\nShouldn't this be higher?\n\n"
    log = parse_nccl_log(quoted + text)
    assert [r.size_bytes for r in log.rows] == [r.size_bytes for r in parse_nccl_log(text).rows]
    assert any(w.startswith("line 2: an '# Avg bus bandwidth' line before the table (another run's, pasted in "
                            "part): skipped") for w in log.warnings)
    # Rows under 1 GB/s of algbw (DeepEP#303: 8 H20, small sizes only) still tell all-reduce
    # from sendrecv by their printed figures' ratio, each within 0.005: 0.31 / 0.18 is 1.65 to
    # 1.80, all-reduce's 1.75 on 8 ranks, not sendrecv's 1.
    rows = ["        1024           256     float     sum      -1    23.18    0.04    0.08      0    22.95    0.04"
            "    0.08      0",
            "        2048           512     float     sum      -1    23.33    0.09    0.15      0    23.01    0.09"
            "    0.16      0",
            "        4096          1024     float     sum      -1    23.20    0.18    0.31      0    23.12    0.18"
            "    0.31      0"]
    assert parse_nccl_log("\n".join(rows), nodes=1, gpus_per_node=8).binary == "all_reduce_perf"
    # Figures too coarse to tell (every algbw printed 0.00) stay a question.
    zeros = [r.replace("0.04    0.08", "0.00    0.00").replace("0.09    0.15", "0.00    0.00")
             .replace("0.18    0.31", "0.00    0.00") for r in rows]
    with pytest.raises(InputError, match="cannot tell which nccl-tests binary"):
        parse_nccl_log("\n".join(zeros), nodes=1, gpus_per_node=8)


def test_dots_after_a_whole_rank_list_leave_out_other_lines_not_ranks():
    # nccl-tests#321: all ranks listed, then "..." where the poster cut NCCL's INFO lines, whose
    # comm lines count those ranks: the listed placement stands (it was replaced by an assumed one).
    lines = SENDRECV.read_text().splitlines()
    header = next(k for k, line in enumerate(lines) if line.startswith("#       size"))
    info = ["dgx-b11:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0", "..."]
    log = parse_nccl_log("\n".join(lines[:header - 1] + info + lines[header - 1:]))
    assert log.ranks_from == "rank lines" and not any("pasted in part" in w for w in log.warnings)
    # Without a comm line that counts them, dots after the rank lines may have cut some.
    cut = parse_nccl_log("\n".join(lines[:header - 1] + ["..."] + lines[header - 1:]), nodes=2, gpus_per_node=1)
    assert any("pasted in part" in w for w in cut.warnings)


@pytest.mark.parametrize("command, shape", [
    ("mpirun -np 32 -npernode 8 ./build/all_reduce_perf -b 8 -e 1G -f 2 -n 50", (4, 8)),
    ("mpirun --allow-run-as-root -H node1:8,node2:8,node3:8,node4:8 -x NCCL_DEBUG=WARN all_reduce_perf -b 8", (4, 8)),
    ("$ mpirun -np 32 --map-by ppr:8:node \\\n  ./build/all_reduce_perf -b 8 -e 1G", (4, 8)),
    ("srun --nodes=4 --ntasks-per-node=8 --mpi=pmix ./all_reduce_perf -b 8 -e 1G", (4, 8)),
    ("srun -N 4 -n 32 ./all_reduce_perf -b 8 -e 1G -n 20", (4, 8)),
])
def test_without_rank_lines_the_launchers_command_gives_the_shape(command, shape):
    # nccl-tests#78: "mpirun -n 256 -npernode 16 ..." pasted with a table but no rank lines.
    # Only the options before the binary are the launcher's (-n after it is nccl-tests' iterations).
    lines = [line for line in ALL_REDUCE_4.read_text().splitlines() if "#  Rank" not in line]
    log = parse_nccl_log(command + "\n" + "\n".join(lines))
    assert (log.n_nodes, log.n_ranks // log.n_nodes) == shape
    assert any(w.startswith(f"no rank lines; assuming {shape[0]} host(s) x {shape[1]} GPU(s)") and
               "the launcher's command line" in w for w in log.warnings)
    # --nodes and --gpus-per-node still win; a launcher without a whole shape gives none, nor
    # one its own -np or the busbw ratio (32 ranks here) contradicts (a re-audit).
    assert parse_nccl_log(command + "\n" + "\n".join(lines), nodes=2, gpus_per_node=16).n_nodes == 2
    for other in ("mpirun -np 32 --hostfile hosts ./build/all_reduce_perf -b 8",
                  "mpirun -np 16 -npernode 8 -H a:8,b:8,c:8 ./build/all_reduce_perf -b 8",
                  "`mpirun -np 64 -N 8 ./build/all_reduce_perf` hangs on 8 nodes, so here are 4:"):
        with pytest.raises(InputError, match="give the cluster's shape"):
            parse_nccl_log(other + "\n" + "\n".join(lines))


def test_a_host_named_once_a_slot_counts_once():
    # Open MPI's "-H n1,n1,...": a host repeated for each of its slots is one host.
    lines = [line for line in ALL_REDUCE_4.read_text().splitlines() if "#  Rank" not in line]
    hosts = ",".join(f"n{k}" for k in range(4) for _ in range(8))
    log = parse_nccl_log(f"mpirun -np 32 -H {hosts} ./build/all_reduce_perf -b 8\n" + "\n".join(lines))
    assert (log.n_nodes, log.n_ranks) == (4, 32)
