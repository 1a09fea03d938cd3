"""flowsim: a flow-level network model of GPU clusters.

Flows share directed links with weighted max-min fairness; see docs/model.md for the
contract and docs/design.md for how collectives, the solver and the engine work.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from flowsim._version import __version__

# The module of each public name, imported on first use (PEP 562): ``import flowsim`` loads
# neither NumPy nor Numba nor h5py, so that the ``flowsim`` command is inside its Ctrl-C
# handling (flowsim.cli.main) before the slow imports start.
_EXPORTS = {
    "BackendUnavailable": "flowsim.batched",
    "available_backends": "flowsim.batched",
    "solve_batch": "flowsim.batched",
    "collective_time": "flowsim.collectives",
    "collective_workload": "flowsim.collectives",
    "simulate": "flowsim.engine",
    "InputError": "flowsim.errors",
    "build_cluster": "flowsim.fabrics",
    "fat_tree": "flowsim.fabrics",
    "leaf_spine": "flowsim.fabrics",
    "apply_failures": "flowsim.failures",
    "FairShareProblem": "flowsim.fairshare",
    "max_min_rates": "flowsim.fairshare",
    "link_rate": "flowsim.hardware",
    "job_results": "flowsim.jobresults",
    "model_preset": "flowsim.models",
    "step_shape": "flowsim.models",
    "run": "flowsim.pipeline",
    "run_many": "flowsim.timeline",
    "preset": "flowsim.presets",
    "preset_names": "flowsim.presets",
    "SimulationResult": "flowsim.result",
    "Routes": "flowsim.routes",
    "Router": "flowsim.routing",
    "route": "flowsim.routing",
    "split_route": "flowsim.routing",
    "load_scenario": "flowsim.scenario",
    "run_scenario": "flowsim.scenario",
    "ServerSpec": "flowsim.servers",
    "build_server": "flowsim.servers",
    "load_system": "flowsim.systemfile",
    "NodeKind": "flowsim.topology",
    "Topology": "flowsim.topology",
    "TopologyBuilder": "flowsim.topology",
    "open_trace": "flowsim.trace",
    "write_trace": "flowsim.trace",
    "data_parallel_step": "flowsim.training",
    "parallel_layout": "flowsim.training",
    "parallel_step": "flowsim.training",
    "run_training_step": "flowsim.training",
    "Workload": "flowsim.workload",
}

if TYPE_CHECKING:
    from flowsim.batched import BackendUnavailable, available_backends, solve_batch
    from flowsim.collectives import collective_time, collective_workload
    from flowsim.engine import simulate
    from flowsim.errors import InputError
    from flowsim.fabrics import build_cluster, fat_tree, leaf_spine
    from flowsim.failures import apply_failures
    from flowsim.fairshare import FairShareProblem, max_min_rates
    from flowsim.hardware import link_rate
    from flowsim.jobresults import job_results
    from flowsim.models import model_preset, step_shape
    from flowsim.pipeline import run
    from flowsim.presets import preset, preset_names
    from flowsim.result import SimulationResult
    from flowsim.routes import Routes
    from flowsim.routing import Router, route, split_route
    from flowsim.scenario import load_scenario, run_scenario
    from flowsim.servers import ServerSpec, build_server
    from flowsim.systemfile import load_system
    from flowsim.timeline import run_many
    from flowsim.topology import NodeKind, Topology, TopologyBuilder
    from flowsim.trace import open_trace, write_trace
    from flowsim.training import data_parallel_step, parallel_layout, parallel_step, run_training_step
    from flowsim.workload import Workload


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'flowsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "BackendUnavailable",
    "FairShareProblem",
    "InputError",
    "NodeKind",
    "Router",
    "Routes",
    "ServerSpec",
    "SimulationResult",
    "Topology",
    "TopologyBuilder",
    "Workload",
    "__version__",
    "apply_failures",
    "available_backends",
    "build_cluster",
    "build_server",
    "collective_time",
    "collective_workload",
    "data_parallel_step",
    "fat_tree",
    "job_results",
    "leaf_spine",
    "link_rate",
    "load_scenario",
    "load_system",
    "max_min_rates",
    "model_preset",
    "open_trace",
    "parallel_layout",
    "parallel_step",
    "preset",
    "preset_names",
    "route",
    "run",
    "run_many",
    "run_scenario",
    "run_training_step",
    "simulate",
    "solve_batch",
    "split_route",
    "step_shape",
    "write_trace",
]
