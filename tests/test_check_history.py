"""``flowsim check --history``: what a check history records, so that trends over days and
changes of the cluster, the model or the options tell apart."""

import argparse
import datetime
import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

import flowsim
from flowsim.check import append_history, check_nccl_log, parse_nccl_log, read_history
from flowsim.check.history import _history_lines
from flowsim.commands.check import add_parser
from flowsim.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
SENDRECV = DATA / "sendrecv_perf_dgx_h100_2node.txt"
DEGRADED = DATA / "all_reduce_perf_dgx_h100_2node_degraded.txt"


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
    assert flowsim_check([str(SENDRECV), *argv, "--force"]) == 0
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
    append_history(report, path, run_time=datetime.datetime(2024, 7, 15, tzinfo=datetime.UTC), label="b2", force=True)
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
        append_history(report, path, run_time=datetime.datetime(2024, 7, day, tzinfo=datetime.UTC), force=True)
    assert plot_history(path, tmp_path / "trend.png").stat().st_size > 0


def test_the_history_keeps_what_tells_a_cluster_change_from_a_model_change(tmp_path):
    # Two checks of one log, with and without options that change the prediction, were
    # recorded identically; nor were the NCCL version, flowsim's or what each size ran.
    history = tmp_path / "h.h5"
    two = tmp_path / "two.log"
    two.write_text(SENDRECV.read_text() * 2)
    argv = ["--system", "dgx-h100", "--min-bytes", "1G", "--history", str(history)]
    flowsim_check([str(DEGRADED), *argv])
    flowsim_check([str(DEGRADED), *argv, "--fail", "n0.nic0", "--nccl-env", "NCCL_PROTO=LL128",
                   "--nccl-version", "2.19.3"])
    flowsim_check([str(two), *argv])
    history = read_history(history)
    checks, rows = history.checks, history.rows
    assert checks["options"].tolist() == ["", "--fail n0.nic0 --nccl-env NCCL_PROTO=LL128 --nccl-version 2.19.3", "", ""]
    assert checks["nccl"][:2].tolist() == ["NCCL 2.27.3 (log) -> constants of 2.27.7", "NCCL 2.19.3 (given), NCCL_PROTO=LL128 (given)"]
    assert checks["nccl_version"][:2].tolist() == ["2.27.7", "2.19.3"]
    assert set(checks["flowsim_version"]) == {flowsim.__version__}
    assert list(zip(checks["run_index"].tolist(), checks["run_count"].tolist(), strict=True)) == [
        (1, 1), (1, 1), (1, 2), (2, 2)]
    # What the model ran, per size: NVLSTree against a tree with LL128 on the failed cluster.
    ran = [(rows["algorithm"][k], rows["protocol"][k], int(rows["channels"][k]), rows["flag"][k])
           for k in np.flatnonzero((rows["check_id"] <= 1) & (rows["size_bytes"] == 1 << 30))]
    assert ran == [("nvls_tree", "simple", 16, "SHORT"), ("tree", "ll128", 16, "SHORT")]
    unpredicted = (rows["check_id"] == 0) & (rows["size_bytes"] < 1 << 30)
    assert set(rows["algorithm"][unpredicted]) == {""} and set(rows["channels"][unpredicted]) == {-1}
    assert set(rows["flag"][unpredicted]) == {""}


def test_an_upgraded_history_continues_each_sizes_line(tmp_path):
    # After a version 2 history took a version 4 check, '1G' and '1G float sum' were two lines.
    path = tmp_path / "h.h5"
    report = check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30)
    append_history(report, path)
    with h5py.File(path, "r+") as f:  # what a version 2 writer left
        for name in ("root", "dtype", "redop", "algorithm", "protocol", "channels", "flag"):
            del f["rows"][name]
        for name in ("run_time_unix", "run_time_from", "label", "nccl_version", "nccl", "flowsim_version",
                     "run_index", "run_count", "options", "log_sha256"):
            del f["checks"][name]
        f.attrs["version"] = 2
    old = read_history(path)
    assert old.checks["nccl"].tolist() == [""] and old.rows["channels"].tolist() == [-1] * 11
    append_history(report, path)
    history = read_history(path)
    assert history.rows["dtype"].tolist() == [""] * 11 + ["float"] * 11
    lines = _history_lines(history.rows, np.isfinite(history.rows["ratio"]))
    assert [(label, rows.tolist()) for label, rows in lines] == [("1G", [10, 21])]


def _slower(text, factor, from_bytes):
    """``text`` (an nccl-tests output) with every row from ``from_bytes`` on ``factor`` times
    as fast: its times divided, its algbw and busbw multiplied."""
    lines = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit() and int(fields[0]) >= from_bytes:
            for time, *bandwidths in ((5, 6, 7), (9, 10, 11)):
                fields[time] = f"{float(fields[time]) / factor:.2f}"
                for k in bandwidths:
                    fields[k] = f"{float(fields[k]) * factor:.2f}"
            line = "  ".join(fields)
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_a_run_slower_than_the_clusters_own_past_is_said_and_fails(tmp_path, capsys):
    # A copy of a log with its busbw cut 9% from 1 MiB was "all predicted sizes OK", exit 0:
    # the prediction's threshold is wider than what the cluster lost overnight.
    history = tmp_path / "h.h5"
    argv = ["--system", "dgx-h100", "--min-bytes", "256M", "--threshold", "0.07", "--history", str(history)]
    steady, slower = tmp_path / "steady.log", tmp_path / "slower.log"
    steady.write_text(_slower(SENDRECV.read_text(), 1.05, 1 << 20))
    slower.write_text(_slower(SENDRECV.read_text(), 0.96, 1 << 20))  # 9% below steady
    assert flowsim_check([str(SENDRECV), *argv, "--date", "2024-07-15"]) == 0
    assert "than check" not in capsys.readouterr().out  # nothing earlier to compare with
    assert flowsim_check([str(steady), *argv, "--date", "2024-07-16"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(
        "# against check 0, the cluster's earlier run: no size moved beyond the threshold")
    assert flowsim_check([str(slower), *argv, "--date", "2024-07-17"]) == 1
    out = capsys.readouterr().out
    assert "# all 3 predicted sizes OK" in out  # within the prediction's threshold ...
    # ... but slower than the day before.
    assert re.search(r"\n# slower than check 1 of 2024-07-16 at 256 MiB-1 GiB: 45\.\d against 49\.\d GB/s at 1 GiB$",
                     out.rstrip())
    # A run backfilled before them has no earlier run; one with other prediction options is
    # compared only with checks made with those.
    assert flowsim_check([str(slower), *argv, "--date", "2024-07-14", "--force"]) == 0
    assert flowsim_check([str(steady), *argv, "--date", "2024-07-18", "--nccl-env", "NCCL_ALGO=Ring"]) == 0
    assert "than check" not in capsys.readouterr().out
    assert flowsim_check([str(steady), *argv, "--date", "2024-07-19", "--brief", "--force"]) == 0
    assert re.search(r"; faster than check 2 of 2024-07-17 at 256 MiB-1 GiB: 49\.\d against 45\.\d GB/s at 1 GiB$",
                     capsys.readouterr().out.rstrip())
    assert flowsim_check([str(slower), *argv, "--date", "2024-07-20", "--json", "--force"]) == 1
    changes = json.loads(capsys.readouterr().out)["history"]["changes"]
    assert [(c["slower"], c["check_id"], c["sizes"]) for c in changes] == [(True, 5, [1 << 28, 1 << 29, 1 << 30])]


def test_the_same_run_appended_again_is_skipped_unless_forced(tmp_path, capsys):
    # The same log appended twice was recorded twice, silently: a second point of the trend.
    history = tmp_path / "h.h5"
    argv = ["--system", "dgx-h100", "--min-bytes", "1G", "--history", str(history)]
    assert flowsim_check([str(SENDRECV), *argv]) == 0
    capsys.readouterr()
    assert flowsim_check([str(SENDRECV), *argv, "--date", "2024-07-16"]) == 0
    assert capsys.readouterr().err == (f"flowsim check: warning: {SENDRECV}: already in {history} as check 0, checked "
                                       "alike; not appended again (--force appends it)\n")
    assert read_history(history).n_checks == 1
    # Other options, another run of the same file or --force: appended.
    assert flowsim_check([str(SENDRECV), *argv, "--threshold", "0.2"]) == 0
    assert flowsim_check([str(SENDRECV), *argv, "--force"]) == 0
    two = tmp_path / "two.log"
    two.write_text(SENDRECV.read_text() * 2)
    assert flowsim_check([str(two), *argv]) == 0
    checks = read_history(history).checks
    assert checks["n_flagged"].size == 5 and len(set(checks["log_sha256"][[0, 3, 4]])) == 3
    assert checks["log_sha256"][0] == checks["log_sha256"][1] == checks["log_sha256"][2] != ""


def test_a_system_file_changed_under_its_name_is_another_cluster(tmp_path, capsys):
    # Two checks of one log on "mycluster.toml", its NICs halved in between, were taken as the
    # same run checked alike (a system's name is its file's stem), so the second was not
    # appended; nor is a check with another oversubscription alike.
    system = tmp_path / "mycluster.toml"
    text = (Path(__file__).resolve().parents[1] / "flowsim" / "systems" / "dgx_h200.toml").read_text()
    system.write_text(text)
    history = tmp_path / "h.h5"
    argv = ["--system", str(system), "--min-bytes", "1G", "--history", str(history), "--brief"]
    assert flowsim_check([str(SENDRECV), *argv]) == 0
    assert flowsim_check([str(SENDRECV), *argv]) == 0
    assert "already in" in capsys.readouterr().err
    system.write_text(text.replace("speed_gbps = 400", "speed_gbps = 200"))
    assert flowsim_check([str(SENDRECV), *argv]) == 1  # FAST against 200 Gb/s NICs
    assert "already in" not in capsys.readouterr().err
    assert flowsim_check([str(SENDRECV), *argv, "--fabric", "fat_tree", "--oversubscription", "2"]) == 1
    checks = read_history(history).checks
    assert checks["n_flagged"].size == 3 and len(set(checks["cluster_sha256"])) == 3
    # Naming the switch the servers' 200 Gb/s NICs take anyway builds the same cluster: a repeat.
    capsys.readouterr()
    assert flowsim_check([str(SENDRECV), *argv, "--switch", "qm8700"]) == 1  # HDR NICs: HDR switches
    assert "already in" in capsys.readouterr().err and read_history(history).n_checks == 3


def _shaped(text, ranks_per_host):
    """``text`` (two hosts' ranks) with its hosts' names changed so that the ranks sit
    ``ranks_per_host`` to a host: another shape of cluster for the same rows."""
    lines, rank = [], 0
    for line in text.splitlines():
        if "#  Rank" in line:
            line = re.sub(r" on\s+\S+ ", f" on host{rank // ranks_per_host} ", line)
            rank += 1
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_the_plot_keeps_to_the_system_and_nodes_and_draws_each_shape_apart(tmp_path):
    # --plot drew every system's checks, ignored --nodes, and joined one size's points of
    # 2 and 4 nodes into one line.
    pytest.importorskip("matplotlib")
    from flowsim.check.history import _trend_figure

    history = tmp_path / "h.h5"
    four_hosts = tmp_path / "four_hosts.log"
    four_hosts.write_text(_shaped(DEGRADED.read_text(), 4))
    argv = ["--min-bytes", "1G", "--history", str(history)]
    flowsim_check([str(DEGRADED), "--system", "dgx-h100", *argv])
    flowsim_check([str(DEGRADED), "--system", "dgx-a100", *argv])
    flowsim_check([str(four_hosts), "--system", "dgx-h100", *argv])
    checks = read_history(history).checks
    assert checks["nodes"].tolist() == [2, 2, 4] and checks["system"].tolist() == ["dgx_h100", "dgx_a100", "dgx_h100"]
    read = read_history(history)

    def drawn(**keep):
        figure = _trend_figure(read, None, keep.get("system"), keep.get("nodes"), None)
        return [[(line.get_label(), len(line.get_xdata())) for line in ax.get_lines() if line.get_label()[0].isdigit()]
                for ax in figure.axes]

    assert drawn() == [[("1G", 2), ("2G", 2)], [("1G", 1), ("2G", 1)]]  # a panel per shape
    assert drawn(system="dgx-h100") == [[("1G", 1), ("2G", 1)], [("1G", 1), ("2G", 1)]]
    assert drawn(system="DGX_H100", nodes=2) == [[("1G", 1), ("2G", 1)]]
    with pytest.raises(InputError, match="no check of all_reduce_perf on dgx-b200 with nodes 2"):
        drawn(system="dgx-b200", nodes=2)
    assert flowsim_check(["--history", str(history), "--plot", str(tmp_path / "a.png"), "--system", "dgx-a100",
                          "--nodes", "4"]) == 2
    assert flowsim_check(["--history", str(history), "--plot", str(tmp_path / "a.png"), "--system", "dgx-a100"]) == 0


def test_the_trend_of_32_sizes_fits_its_figure_without_warnings(tmp_path):
    # A run of 8 B-16 GiB put its legend off the image, collapsed the axes and printed
    # matplotlib's multi-line "constrained_layout not applied" UserWarning on stderr.
    pytest.importorskip("matplotlib")
    import warnings

    from flowsim.check import History, plot_history
    from flowsim.check.history import _trend_figure

    sizes = [8 << k for k in range(32)]
    n_checks = 3
    checks = {"check_id": np.arange(n_checks), "run_time_unix": 1.72e9 + 86400.0 * np.arange(n_checks),
              "binary": np.array(["all_reduce_perf"] * n_checks, dtype=object),
              "system": np.array(["dgx_h100"] * n_checks, dtype=object), "nodes": np.full(n_checks, 2),
              "ranks": np.full(n_checks, 16), "threshold": np.full(n_checks, 0.1)}
    rows = {"check_id": np.repeat(np.arange(n_checks), 32), "size_bytes": np.tile(sizes, n_checks),
            "ratio": np.linspace(0.8, 1.05, 32 * n_checks), "root": np.full(32 * n_checks, -1),
            "dtype": np.array(["float"] * 32 * n_checks, dtype=object),
            "redop": np.array(["sum"] * 32 * n_checks, dtype=object)}
    rows["flagged"] = rows["ratio"] < 0.9
    history = History(str(tmp_path / "h.h5"), checks, rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = _trend_figure(history, None, None, None, None)
        figure.savefig(tmp_path / "trend.png")
        plot_history(history, tmp_path / "again.png")
    legend, box = figure.legends[0].get_window_extent(), figure.bbox
    assert box.x0 <= legend.x0 and legend.x1 <= box.x1 and box.y0 <= legend.y0 and legend.y1 <= box.y1
    axes = figure.axes[0].get_window_extent()
    assert axes.width > 0.5 * box.width and axes.height > 0.6 * box.height


def test_a_history_of_a_newer_flowsim_is_not_appended_to(tmp_path):
    # A version 9 history with a column this flowsim does not know took the check, was
    # rewritten as version 4, and its new column was left a check short.
    path = tmp_path / "h.h5"
    report = check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30)
    append_history(report, path)
    with h5py.File(path, "r+") as f:
        f.attrs["version"] = 9
        f["checks"].create_dataset("gpu_model", data=np.array(["H100"], dtype=object), dtype=h5py.string_dtype(),
                                   maxshape=(None,))
    before = path.read_bytes()
    with pytest.raises(InputError, match=r"h.h5: a check history written by a newer flowsim \(version 9; this "
                                         r"flowsim writes 4\); left as it is"):
        append_history(report, path, force=True)
    assert path.read_bytes() == before
    assert read_history(path).n_checks == 1  # read, as far as this flowsim knows it


def test_a_disk_that_fills_up_while_appending_is_one_line_naming_the_history(tmp_path, monkeypatch, capsys):
    # A full disk gave exit status 2 and HDF5's two-line message naming the hidden temporary
    # file; a system error is status 1, and the history is left as it was.
    import flowsim.check.history as history_module
    from flowsim.cli import main

    history = tmp_path / "h.h5"
    argv = ["check", str(SENDRECV), "--system", "dgx-h100", "--min-bytes", "1G", "--history", str(history)]
    assert main(argv) == 0
    before = history.read_bytes()

    def full(f, *args):
        # What h5py raised when the temporary copy could not be written (its text, errno inside).
        raise OSError(f"[Errno 28] Can't close file (file write failed: time = Mon Dec  7 08:00:00 2026\n, filename = "
                      f"'{tmp_path}/.h.h5.2f41a_e4.tmp', file descriptor = 5, errno = 28, error message = 'No space "
                      "left on device', buf = 0x5582, total write size = 4096, bytes this sub-write = 4096, bytes "
                      "actually written = 18446744073709551615, offset = 0)")

    monkeypatch.setattr(history_module, "_append_check", full)
    capsys.readouterr()
    assert main([*argv, "--force"]) == 1
    assert capsys.readouterr().err == (f"flowsim: error: {history}: the disk filled up while writing the check "
                                       "history; nothing was added to it\n")
    assert history.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".h.h5.lock", "h.h5"]


def test_the_runs_of_one_command_are_appended_all_or_none(tmp_path, monkeypatch, capsys):
    # On a nearly full disk one run of four was recorded, and a rerun appended it again.
    import flowsim.check.history as history_module
    from flowsim.cli import main

    history = tmp_path / "h.h5"
    two = tmp_path / "two.log"
    two.write_text(SENDRECV.read_text() * 2)
    real_append = history_module._append_check
    calls = []

    def full_at_the_second(f, *args):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_append(f, *args)

    monkeypatch.setattr(history_module, "_append_check", full_at_the_second)
    argv = ["check", str(two), str(DEGRADED), "--system", "dgx-h100", "--min-bytes", "1G", "--history", str(history)]
    assert main(argv) == 1
    assert "the disk filled up while writing the check history; nothing was added to it" in capsys.readouterr().err
    assert not history.exists()
    monkeypatch.setattr(history_module, "_append_check", real_append)
    assert main(argv) == 1  # the degraded log's sizes are flagged
    assert read_history(history).n_checks == 3


def test_inspect_summarises_a_check_history_and_pandas_reads_it(tmp_path, capsys):
    # 'flowsim inspect h.h5' said "not a flowsim trace" of a check history.
    from flowsim.cli import main

    history = tmp_path / "h.h5"
    argv = ["--system", "dgx-h100", "--min-bytes", "1G", "--history", str(history)]
    main(["check", str(DEGRADED), *argv, "--date", "2024-07-15T01:00", "--label", "build 41"])
    main(["check", str(SENDRECV), *argv, "--date", "2024-07-16"])
    capsys.readouterr()
    assert main(["inspect", str(history), "--top", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{history}: flowsim check history, 2 check(s), runs of 2024-07-15 01:00 to 2024-07-16 00:00 UTC",
        "the latest 1 (inspect --top N shows more):",
        f"  check 1: 2024-07-16 00:00 {SENDRECV}: sendrecv_perf on dgx_h100, 2 ranks on 2 node(s): 0 of 1 sizes flagged",
        f"draw it: flowsim check --history {history} --plot trend.png --collective all_reduce_perf",
        f"draw it: flowsim check --history {history} --plot trend.png --collective sendrecv_perf",
    ]
    assert main(["inspect", str(history)]) == 0
    assert (f"  check 0: 2024-07-15 01:00 [build 41] {DEGRADED}: all_reduce_perf on dgx_h100, 16 ranks on 2 node(s): "
            "2 of 2 sizes flagged (2 SHORT)") in capsys.readouterr().out.splitlines()
    pytest.importorskip("pandas")
    tables = read_history(history).to_pandas()
    assert tables["checks"]["label"].tolist() == ["build 41", ""]
    assert str(tables["checks"]["run_time"][0]) == "2024-07-15 01:00:00+00:00"
    assert len(tables["rows"]) == 8 + 11


def test_the_plot_marks_flagged_points_and_says_why_it_has_nothing_to_draw(tmp_path):
    # Flagged points were not marked; a history of no predicted size drew an empty plot with
    # a 0-1 time axis, exit 0; an empty history file failed with HDF5's "file signature not
    # found".
    pytest.importorskip("matplotlib")
    from flowsim.check import plot_history
    from flowsim.check.history import _trend_figure

    history = tmp_path / "h.h5"
    append_history(check_nccl_log(DEGRADED, system="dgx-h100", min_bytes=1 << 30), history)
    figure = _trend_figure(read_history(history), None, None, None, None)
    marked = [collection for collection in figure.axes[0].collections if collection.get_offsets().shape[0]]
    assert len(marked) == 2 and all(c.get_offsets().shape == (1, 2) for c in marked)  # 1G and 2G, both SHORT
    unpredicted = tmp_path / "unpredicted.h5"
    append_history(check_nccl_log(DEGRADED, system="dgx-h100", min_bytes=64 << 30), unpredicted)
    with pytest.raises(InputError, match=r"unpredicted.h5: no size of the 1 check\(s\) of all_reduce_perf was "
                                         r"predicted \(check --min-bytes\): nothing to draw"):
        plot_history(unpredicted, tmp_path / "trend.png")
    empty = tmp_path / "empty.h5"
    empty.touch()
    with pytest.raises(InputError, match=r"empty.h5: the history holds no checks \(an empty file\)"):
        plot_history(empty, tmp_path / "trend.png")
    assert not (tmp_path / "trend.png").exists()


def test_flowsim_plot_of_a_history_says_how_to_draw_it(tmp_path, capsys):
    # 'flowsim plot h.h5 --kind utilization' said "not a flowsim trace" of a check history.
    from flowsim.cli import main

    history = tmp_path / "h.h5"
    append_history(check_nccl_log(SENDRECV, system="dgx-h100", min_bytes=1 << 30), history)
    assert main(["plot", str(history), "--kind", "utilization", "-o", str(tmp_path / "u.png")]) == 2
    assert capsys.readouterr().err == (
        f"flowsim: error: {history}: a flowsim check history, not a trace: 'flowsim check --history {history} "
        f"--plot {tmp_path / 'u.png'}' draws it, 'flowsim inspect {history}' lists its checks\n")
