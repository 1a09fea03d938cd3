"""Shared fixtures and machine details for the benchmark suites."""

import os

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


@pytest.fixture
def flows_scale(request):
    return request.config.getoption("--flows-scale")


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["numba"] = numba.__version__
    machine_info["numpy"] = np.__version__
    machine_info["numba_threads"] = numba.get_num_threads()
    machine_info["cpu_count"] = os.cpu_count()


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
