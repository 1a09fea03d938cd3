"""What the README shows a command printing is what it prints today.

The README quotes outputs and tables of example commands; when the model moves, they went
stale unseen (2026-12-06: the NIC-failure sweep's healthy run, the jobs example and its
placement sweep, the two-DGX sweep's ring makespans). These tests run each command the
README shows (all but the 3.3-million-flow Llama step, which is kept out of the suite's way)
and compare what it prints, and the tables built from its results, with the README's text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowsim import cli
from flowsim.formatting import format_seconds
from flowsim.sweep import load_sweep, read_results, run_sweep

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def shown(command: str) -> list[str]:
    """The lines the README shows under ``$ command`` in a code block, up to the block's end
    or the next command (a command continued with ``\\`` is joined first)."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", README, flags=re.M | re.S)
    for block in blocks:
        lines = block.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("$ ") and " ".join(line[2:].split()) == command:
                rest = lines[i + 1:]
                end = next((j for j, later in enumerate(rest) if later.startswith("$ ")), len(rest))
                return rest[:end]
    raise AssertionError(f"the README shows no `$ {command}`")


def table_after(heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line holding ``heading``."""
    text = README[README.index(heading):]
    rows = re.search(r"^\|.*\|\n\|[-| ]+\|\n((?:\|.*\|\n)+)", text, flags=re.M)
    assert rows is not None, heading
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in rows.group(1).splitlines()]


def printed(capsys, *argv: str) -> list[str]:
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


def test_the_nic_failure_scenario_prints_what_the_readme_shows(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario = str(ROOT / "data/scenarios/nic_failure_two_dgx_h100.toml")
    out = printed(capsys, "run", scenario, "-o", "nic_failure.h5", "-q")
    assert out == [line.replace("data/scenarios/", "") for line in
                   shown("flowsim run data/scenarios/nic_failure_two_dgx_h100.toml -o nic_failure.h5 -q")]


def test_the_failed_nic_collective_prints_the_readme_row(capsys):
    command = ("flowsim collective all_reduce --system dgx-h100 --nodes 2 -b 1G -e 1G --nccl-env NCCL_ALGO=Ring "
               "--nccl-env NCCL_PROTO=Simple --fail n0.nic3")
    header, ellipsis, row = shown(command)
    out = printed(capsys, *command.split()[1:])
    assert ellipsis == "..."
    assert out[0] == header and row in out


def test_the_tuning_note_is_the_readme_one(capsys):
    command = "flowsim collective all_reduce --system dgx-h100 --nodes 2 -b 1M -e 1M --tuning"
    row, note = shown(command)
    out = printed(capsys, *command.split()[1:])
    assert out[out.index(row) + 1] == note


def test_the_jobs_scenario_prints_what_the_readme_shows(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = printed(capsys, "run", str(ROOT / "data/scenarios/jobs_sharing_16_dgx_h100.toml"), "-o", "jobs.h5", "-q")
    lines = shown("flowsim run data/scenarios/jobs_sharing_16_dgx_h100.toml -o jobs.h5 -q")
    assert lines[-1] == "  ..."  # the README cuts the list of contended links
    assert out[:len(lines) - 1] == lines[:-1]


def test_the_pcie_workstation_rows_are_what_the_readme_shows(capsys):
    out = printed(capsys, "collective", "all_reduce", "--system", "rtx5090_8x", "-b", "1G", "-e", "8G")
    rows = {line.split()[0]: line.split() for line in out if line.strip() and line.strip()[0].isdigit()}
    for line in shown("flowsim collective all_reduce --system rtx5090_8x -b 1G -e 8G"):
        size, _, *rest = line.split()  # the README leaves out the count, type, reduction and root
        assert rows[size][5:] == rest


def _sweep(tmp_path, name):
    outcome = run_sweep(load_sweep(ROOT / "data/sweeps" / name), tmp_path / "results.h5", workers=1)
    assert outcome.n_failed == 0
    return read_results(outcome.output).columns


def test_the_nic_failure_sweep_is_the_readme_table(tmp_path):
    columns = _sweep(tmp_path, "nic_failure.toml")
    table = table_after("and `data/sweeps/nic_failure.toml` sets it beside the healthy cluster")
    assert [row[1:] for row in table] == [
        [format_seconds(makespan), f"{busbw / 1e9:.1f} GB/s"]
        for makespan, busbw in zip(columns["makespan_s"], columns["busbw_Bps"], strict=True)
    ]


def test_the_job_placement_sweep_is_the_readme_table(tmp_path):
    columns = _sweep(tmp_path, "job_placement.toml")
    table = table_after("keeping `job.NAME.slowdown` and the other job metrics")
    assert [row[1:] for row in table] == [
        [f"{dp:.3f}", f"{mp:.3f}", f"{ckpt:.3f}", f"{exposed * 1e3:.2f} ms"]
        for dp, mp, ckpt, exposed in zip(columns["job.dp.slowdown"], columns["job.mp.slowdown"],
                                         columns["job.ckpt.slowdown"], columns["job.mp.exposed_communication_s"],
                                         strict=True)
    ]


@pytest.mark.parametrize("figure", ["nominal", "effective"])
def test_the_two_dgx_sweep_is_the_readme_table(tmp_path, figure):
    columns = _sweep(tmp_path, "two_dgx_collectives.toml")
    table = table_after("is a complete example (`flowsim sweep")
    heads = ["ring", "hierarchical"]
    # Columns: the all-to-all, then ring and hierarchical on nominal figures, then on effective.
    first = 1 if figure == "nominal" else 3
    for i, row in enumerate(table):
        for k, algorithm in enumerate(heads):
            run = [j for j in range(len(columns["makespan_s"]))
                   if columns["topology.figure"][j] == figure
                   and columns["workload.collective.0.algorithm"][j] == algorithm][i]
            assert row[first + k] == format_seconds(columns["makespan_s"][run])


def test_the_readme_snippet_reading_a_check_history_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pandas")
    monkeypatch.chdir(tmp_path)
    log = str(ROOT / "data/nccl_tests/sendrecv_perf_dgx_h100_2node.txt")
    for day in ("2024-07-15", "2024-07-16"):
        assert cli.main(["check", log, "--system", "dgx-h100", "--min-bytes", "1G", "--history", "history.h5",
                         "--date", day, "--force"]) == 0
    snippet = re.search(r"```python\n(from flowsim.check import read_history\n.*?)```", README, flags=re.S)
    assert snippet is not None
    names: dict = {}
    exec(snippet.group(1), names)
    trend = names["trend"]
    assert trend.shape == (2, 11) and [str(t.date()) for t in trend.index] == ["2024-07-15", "2024-07-16"]
    assert trend[1 << 30].tolist() == [46.98, 46.98]
