"""Shared fixtures, machine details and the run's options for the benchmark suites."""

import os
from pathlib import Path

import numba
import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--flows-scale",
        type=float,
        default=1.0,
        help=(
            "multiply the flow counts of the engine, collective and sweep suites (CI's smoke run "
            "uses a small scale); the max-min, routes, batched, topology and trace suites keep their sizes"
        ),
    )


# Node ids collected, and those left after -k deselected some (pytest-benchmark's JSON lists
# only what ran), so that benchmarks/regress.py tells a benchmark the run left out from one
# that was selected but did not run, or is gone. The collected ones are taken first, before
# pytest's own hook deselects.
_COLLECTED = pytest.StashKey[list]()
_SELECTED = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    config.stash[_COLLECTED] = [item.nodeid for item in items]


def pytest_collection_finish(session):
    session.config.stash[_SELECTED] = [item.nodeid for item in session.items]


# Benchmarks skipped on this machine (the Dask ones without distributed installed): selected,
# but not to be counted as gone.
_SKIPPED: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _SKIPPED.append(report.nodeid)


@pytest.fixture
def flows_scale(request):
    return request.config.getoption("--flows-scale")


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["numba"] = numba.__version__
    machine_info["numpy"] = np.__version__
    machine_info["numba_threads"] = numba.get_num_threads()
    machine_info["cpu_count"] = os.cpu_count()


def pytest_benchmark_update_json(config, benchmarks, output_json):
    # pytest-benchmark's JSON keeps neither the command line nor this option, so a baseline
    # saved from it (benchmarks/regress.py save --from-json) could only guess how the run was
    # made, and a comparison would rerun other sizes and other benchmarks.
    output_json["flowsim_run"] = {
        "flows_scale": config.getoption("--flows-scale"),
        "keyword": config.getoption("keyword"),
        "args": [_from_root(config, arg) for arg in config.args],
        "collected": config.stash.get(_COLLECTED, []),
        "selected": config.stash.get(_SELECTED, []),
        "skipped": list(_SKIPPED),
    }


def _from_root(config, arg):
    """A file, folder or node id given to pytest, relative to the root folder where it lies there."""
    path, sep, rest = arg.partition("::")
    resolved = (Path(config.invocation_params.dir) / path).resolve()
    if resolved.is_relative_to(config.rootpath):
        path = resolved.relative_to(config.rootpath).as_posix()
    return path + sep + rest


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
