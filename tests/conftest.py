import os
import threading

import numpy as np
import pytest


@pytest.fixture(scope="session")
def h100():
    """One DGX H100 at effective rates (topologies are immutable: shared by every test)."""
    from flowsim.presets import preset

    return preset("dgx_h100", figure="effective")


@pytest.fixture(scope="session")
def a100():
    """One DGX A100 at effective rates."""
    from flowsim.presets import preset

    return preset("dgx_a100", figure="effective")


@pytest.fixture(scope="session")
def two_h100():
    """Two DGX H100 on a rail-optimized fabric, effective rates."""
    from flowsim.fabrics import build_cluster

    return build_cluster("dgx_h100", 2, figure="effective")


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


@pytest.fixture
def make_fifo(tmp_path):
    """``make_fifo(name)`` makes a FIFO in ``tmp_path``. Should the code under test wait to
    read one, a writer that opens and closes it ends the wait with an empty read, so that a
    test of not waiting fails instead of hanging."""
    made = []
    stop = threading.Event()

    def release():
        while not stop.wait(0.2):
            for path in made:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # no reader waits
                    continue
                os.close(fd)

    def make(name):
        path = tmp_path / name
        os.mkfifo(path)
        made.append(path)
        return path

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    yield make
    stop.set()
    thread.join()
