"""flowsim: a flow-level network model of GPU clusters.

Flows share directed links with weighted max-min fairness; see the README's "Model"
section for the contract.
"""

from flowsim._version import __version__
from flowsim.batched import BackendUnavailable, available_backends, solve_batch
from flowsim.collectives import collective_time, collective_workload
from flowsim.engine import simulate
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster, fat_tree, leaf_spine
from flowsim.failures import apply_failures
from flowsim.fairshare import FairShareProblem, max_min_rates
from flowsim.hardware import link_rate
from flowsim.pipeline import run
from flowsim.presets import preset, preset_names
from flowsim.result import SimulationResult
from flowsim.routes import Routes
from flowsim.routing import Router, route, split_route
from flowsim.scenario import load_scenario, run_scenario
from flowsim.servers import ServerSpec, build_server
from flowsim.systemfile import load_system
from flowsim.topology import NodeKind, Topology, TopologyBuilder
from flowsim.trace import open_trace, write_trace
from flowsim.training import data_parallel_step, parallel_layout, parallel_step, run_training_step
from flowsim.workload import Workload

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
    "leaf_spine",
    "link_rate",
    "load_scenario",
    "load_system",
    "max_min_rates",
    "open_trace",
    "parallel_layout",
    "parallel_step",
    "preset",
    "preset_names",
    "route",
    "run",
    "run_scenario",
    "run_training_step",
    "simulate",
    "solve_batch",
    "split_route",
    "write_trace",
]
