"""A damaged Numba cache entry is compiled again, with a line that says so, not an
``UnpicklingError`` at every run (flowsim_kernels.cache)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

KERNEL = textwrap.dedent("""
    from numba import njit


    @njit(cache=True)
    def add_one(x):
        return x + 1
""")
#: Imports flowsim_kernels (as flowsim does before any kernel), then calls a cached kernel.
CALL = "import flowsim_kernels, kernel; print(kernel.add_one(41))"


def _call(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return subprocess.run([sys.executable, "-c", CALL], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)


@pytest.mark.parametrize("suffix", [".nbc", ".nbi"], ids=["data file", "index"])
def test_a_truncated_cache_entry_is_compiled_again_and_said(tmp_path, suffix):
    (tmp_path / "kernel.py").write_text(KERNEL)
    first = _call(tmp_path)
    assert (first.returncode, first.stdout, first.stderr) == (0, "42\n", "")
    [entry] = (tmp_path / "cache").rglob(f"*{suffix}")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    damaged = _call(tmp_path)
    assert (damaged.returncode, damaged.stdout) == (0, "42\n"), damaged.stderr
    [line] = damaged.stderr.splitlines()
    assert line.startswith("flowsim: the Numba cache entry ") and "add_one" in line
    assert " is damaged (" in line and line.endswith("); compiling it again")
    # Compiling wrote a good entry over the damaged one: the next run is quiet.
    repaired = _call(tmp_path)
    assert (repaired.returncode, repaired.stdout, repaired.stderr) == (0, "42\n", "")
