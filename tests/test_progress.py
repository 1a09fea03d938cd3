"""Progress on stderr: the engine's line, the compile note, and when commands show them."""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowsim import engine
from flowsim.cli import main as flowsim_command
from flowsim.errors import InputError
from flowsim_kernels import progress

ROOT = Path(__file__).parents[1]
DGX = ROOT / "data" / "scenarios" / "dgx_h100_all_to_all.toml"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_engine_line_waits_two_seconds_then_prints_lines_in_a_log(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    progress.begin()
    progress.report(1, 4, 0.5, 10)
    assert log.getvalue() == ""  # a run shorter than two seconds shows nothing
    monkeypatch.setattr(progress, "_begun", [progress._begun[0] - 2.5])
    progress.report(1, 4, 0.5, 10)
    progress.report(2, 4, 0.75, 20)  # within five seconds of the last line: none in a log
    progress.finish()
    assert log.getvalue() == "   25.0% of 4 flows done at simulated t = 0.5 s (10 events)\n"


def test_engine_line_is_redrawn_in_place_on_a_terminal(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    progress.begin()
    monkeypatch.setattr(progress, "_begun", [progress._begun[0] - 2.5])
    progress.report(3, 4, 1.5, 30)
    progress.finish()
    # Drawn over whatever the line held, then erased for what comes next.
    assert terminal.getvalue() == "\r\x1b[K   75.0% of 4 flows done at simulated t = 1.5 s (30 events)\r\x1b[K"


@pytest.mark.parametrize(("flags", "shown"), [([], False), (["--progress"], True), (["--progress", "-q"], False)])
def test_run_shows_the_engine_line_in_a_log_only_when_asked(tmp_path, capsys, monkeypatch, flags, shown):
    # Poll at every step and print at once, so that the small example shows its line.
    monkeypatch.setattr(engine, "_POLL_EVERY", 1)
    monkeypatch.setattr(progress, "_DELAY_S", 0.0)
    monkeypatch.setattr(progress, "_LOG_INTERVAL_S", 0.0)
    assert flowsim_command(["run", str(DGX), "-o", str(tmp_path / "t.h5"), *flags]) == 0
    err = capsys.readouterr().err
    assert ("flows done at simulated t" in err) == shown
    assert ("] simulating" in err) == ("-q" not in flags)  # run's stage notes: always, bar -q


def test_run_notes_when_it_builds_a_training_step(tmp_path, capsys):
    scenario = DGX.with_name("training_step_two_dgx_h100.toml")
    assert flowsim_command(["run", str(scenario), "-o", str(tmp_path / "t.h5")]) == 0
    notes = [line.split("] ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert notes[:2] == [f"loading {scenario}", "building workload.training"]


def test_scenario_notes_the_stages_of_a_3d_step(monkeypatch):
    # A 3D step's builder notes its own stages (tests/test_training.py), prefixed with the key.
    from flowsim import scenario

    def noting(topology, progress=None, **kwargs):
        progress("laying out")
        raise InputError("stop here")

    monkeypatch.setattr(scenario, "parallel_step", noting)
    notes = []
    with pytest.raises(InputError, match="stop here"):
        scenario.load_scenario(DGX.with_name("training_step_3d_dgx_h100.toml"), progress=notes.append)
    assert notes == ["building workload.training", "workload.training: laying out"]


_COMPILE = """
import sys
import numpy as np
from flowsim_kernels.progress import note_compiles
from flowsim_kernels.csr import csr_transpose
csr_transpose(np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.int32), 1)  # outside the block: silent
with note_compiles(sys.stderr):
    csr_transpose(np.array([0, 1]), np.array([0]), 1)
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") != "0", reason="nothing compiles without the JIT")
def test_compile_note_on_a_cold_cache_only(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "kernels"), os.environ.get("PYTHONPATH", "")])}

    def stderr():
        done = subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True, text=True, check=True)
        return done.stderr

    assert stderr() == (
        "flowsim: compiling the simulation kernels this command needs (the first runs after an install or an "
        "update; up to a minute, cached for later runs)\n"
    )
    assert stderr() == ""  # the same kernel, now in the cache


@pytest.mark.parametrize("flags", [[], ["--progress"]])
def test_check_notes_each_size_it_predicts_when_asked(capsys, flags):
    # A log of hundreds of servers takes minutes to predict: each size's stages go to stderr
    # (on a terminal, or with --progress in a log), and the report stays as it was on stdout.
    log = ROOT / "data" / "nccl_tests" / "all_reduce_perf_dgx_h100_4node.txt"
    assert flowsim_command(["check", str(log), "--min-bytes", "4G", *flags]) == 0
    out, err = capsys.readouterr()
    notes = [line.split("] ", 1)[1] for line in err.splitlines() if line.startswith("[")]
    if not flags:
        assert notes == []
    else:
        assert notes[0] == "4,294,967,296 B (1/2): building the flows"
        assert notes[-1].startswith("8,589,934,592 B (2/2): routing and simulating")
    assert "building the flows" not in out and "8589934592" in out
