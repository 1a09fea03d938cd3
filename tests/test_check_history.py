"""``flowsim check --history``: what a check history records, so that trends over days and
changes of the cluster, the model or the options tell apart."""

import argparse
import datetime
from pathlib import Path

import h5py
import numpy as np
import pytest

from flowsim.check import append_history, check_nccl_log, parse_nccl_log, read_history
from flowsim.commands.check import add_parser

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
SENDRECV = DATA / "sendrecv_perf_dgx_h100_2node.txt"


def flowsim_check(argv):
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *argv])
    return args.func(args)


def _unix(text):
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp()


def test_the_run_is_dated_by_its_log_or_date_not_by_the_check(tmp_path, capsys):
    # Backfilled logs were all stored at the day they were checked, seconds apart.
    stamped = tmp_path / "night.log"
    stamped.write_text("".join(f"[2024-07-16 01:00:{k % 60:02d}] {line}\n"
                               for k, line in enumerate(SENDRECV.read_text().splitlines())))
    assert parse_nccl_log(stamped).started == "2024-07-16T01:00:00+00:00"
    history = tmp_path / "h.h5"
    argv = ["--system", "dgx-h100", "--min-bytes", "1G", "--history", str(history)]
    assert flowsim_check([str(stamped), *argv, "--label", "build 41"]) == 0
    assert flowsim_check([str(SENDRECV), *argv, "--date", "2024-07-15"]) == 0
    assert flowsim_check([str(SENDRECV), *argv]) == 0
    checks = read_history(history).checks
    assert checks["run_time_unix"][:2].tolist() == [_unix("2024-07-16T01:00:00"), _unix("2024-07-15")]
    assert checks["run_time_from"].tolist() == ["log", "date", "check"]
    assert checks["run_time_unix"][2] == checks["time_unix"][2]
    assert checks["label"].tolist() == ["build 41", "", ""]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        flowsim_check([str(SENDRECV), *argv, "--date", "last tuesday"])
    assert "invalid date: 'last tuesday'" in capsys.readouterr().err
    assert flowsim_check([str(SENDRECV), "--system", "dgx-h100", "--label", "x"]) == 2
    assert "--label goes into the history" in capsys.readouterr().err


def test_a_history_from_before_run_times_reads_them_as_check_times(tmp_path):
    path = tmp_path / "h.h5"
    report = check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30)
    append_history(report, path)
    with h5py.File(path, "r+") as f:  # what a version 3 writer left
        for name in ("run_time_unix", "run_time_from", "label"):
            del f["checks"][name]
        f.attrs["version"] = 3
    old = read_history(path)
    assert old.checks["run_time_unix"].tolist() == old.checks["time_unix"].tolist()
    append_history(report, path, run_time=datetime.datetime(2024, 7, 15, tzinfo=datetime.UTC), label="b2")
    both = read_history(path).checks
    assert both["run_time_unix"][0] == both["time_unix"][0] and both["run_time_unix"][1] == _unix("2024-07-15")
    assert both["label"].tolist() == ["", "b2"] and both["run_time_from"].tolist() == ["check", "date"]
    assert np.isfinite(both["run_time_unix"]).all()


def test_the_plot_orders_runs_by_their_time(tmp_path):
    pytest.importorskip("matplotlib")
    from flowsim.check import plot_history

    path = tmp_path / "h.h5"
    report = check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30)
    for day in (17, 15, 16):  # backfilled out of order
        append_history(report, path, run_time=datetime.datetime(2024, 7, day, tzinfo=datetime.UTC))
    assert plot_history(path, tmp_path / "trend.png").stat().st_size > 0
