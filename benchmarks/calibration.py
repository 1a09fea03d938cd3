"""A small fixed workload timed beside the benchmark suites, so their timings normalise.

A benchmark's time divided by this workload's time, both measured in the same pytest
session, is a figure that depends much less on the machine (CPU speed, turbo, load from
other processes) than either time alone; ``benchmarks/regress.py`` stores and compares such
figures. The workload mixes the two kinds of work the suites do:

* one serial max-min solve (:class:`flowsim.FairShareProblem`) of 100,000 flows over
  10,000 links, 2 to 6 links a route, seeded so the instance is the same everywhere: the
  compiled kernel;
* a Python loop of 6 NumPy passes (sort, cumulative sum, gather) over 100,000 doubles:
  interpreter and memory-bound array work, as in topology building and routing.

It is collected only when named explicitly (``pytest benchmarks/calibration.py``): the
file name does not match ``bench_*.py``, so ``pytest benchmarks`` leaves it out.
"""

from __future__ import annotations

import numpy as np

from flowsim import FairShareProblem, Routes

__all__ = ["CALIBRATION_NAME", "build_workload", "run_workload", "test_calibration"]

#: The benchmark name ``regress.py`` looks for in pytest-benchmark's JSON.
CALIBRATION_NAME = "test_calibration"

_SEED = 20261130
_N_FLOWS = 100_000
_N_LINKS = 10_000
_N_VALUES = 100_000
_NUMPY_PASSES = 6


def build_workload() -> tuple[FairShareProblem, np.ndarray]:
    """The fixed max-min instance and the array the NumPy loop works on.

    Returns
    -------
    problem : FairShareProblem
        100,000 flows over 10,000 links with capacities uniform in 10-400 GB/s.
    values : ndarray of float64, shape (100000,)
        Seeded standard normal values; not mutated by :func:`run_workload`.
    """
    rng = np.random.default_rng(_SEED)
    hops = rng.integers(2, 7, _N_FLOWS)
    indptr = np.zeros(_N_FLOWS + 1, dtype=np.int64)
    np.cumsum(hops, out=indptr[1:])
    indices = rng.integers(0, _N_LINKS, indptr[-1]).astype(np.int64)
    routes = Routes.from_csr(indptr, indices, _N_LINKS)
    problem = FairShareProblem.build(routes, rng.uniform(10e9, 400e9, _N_LINKS))
    return problem, rng.standard_normal(_N_VALUES)


def run_workload(problem: FairShareProblem, values: np.ndarray) -> float:
    """One max-min solve and the NumPy loop; returns a checksum so nothing is skipped.

    Parameters
    ----------
    problem : FairShareProblem
        From :func:`build_workload`.
    values : ndarray of float64
        From :func:`build_workload`.

    Returns
    -------
    float
        Total rate (B/s) plus a sum from the loop; the same on every call.
    """
    total = float(problem.solve().sum())
    order = np.arange(values.size)
    for _ in range(_NUMPY_PASSES):
        order = np.argsort(values[order] + order * 1e-9, kind="stable")
        total += float(np.cumsum(values[order])[-1])
    return total


def test_calibration(benchmark):
    """pytest-benchmark entry: time :func:`run_workload` after a warm-up call (JIT compile)."""
    problem, values = build_workload()
    expected = run_workload(problem, values)
    assert benchmark(run_workload, problem, values) == expected
