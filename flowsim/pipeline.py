"""Workload to simulated times: route each flow over the topology, then simulate.

:func:`run` is the method in one call: a checked :class:`~flowsim.workload.Workload` (what
moves), a :class:`~flowsim.topology.Topology` (where), routing of every (source,
destination) pair, and :func:`~flowsim.engine.simulate`. Collectives are laid out on a
topology by :mod:`flowsim.collectives.placement`, which runs them through here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from flowsim.budgets import budget_links
from flowsim.engine import PreparedRun, prepare, simulate
from flowsim.errors import InputError, check_options, keyword_options
from flowsim.result import SimulationResult
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.topology import Topology
from flowsim.workload import Workload

__all__ = ["RunResult", "run", "simulate_routed"]

# simulate() arguments that the workload and the topology provide.
_PROVIDED = frozenset(
    {"latency_s", "start_s", "weights", "caps_Bps", "depends_on", "delay_s", "overhead_s", "link_names", "flow_names"}
)
@dataclass(frozen=True)
class RunResult:
    """A simulated workload with what it ran on.

    Attributes
    ----------
    topology : Topology
    workload : Workload
    routes : Routes
        Route of each flow of ``workload`` over ``topology``'s links.
    result : SimulationResult
        Per-flow times and per-link figures, flows in ``workload`` order.
    """

    topology: Topology
    workload: Workload
    routes: Routes
    result: SimulationResult

    @property
    def makespan_s(self) -> float:
        """Time the last flow finishes."""
        return self.result.makespan_s


def run(
    topology: Topology,
    workload: Workload,
    *,
    routing: str = "auto",
    seed: int = 0,
    gpudirect: bool = True,
    router: Router | None = None,
    **simulate_options,
) -> RunResult:
    """Route every flow of ``workload`` over ``topology`` and simulate.

    Parameters
    ----------
    topology : Topology
    workload : Workload
        Flows between node names of ``topology``.
    routing : {"auto", "ecmp", "dmodk", "shortest"}
        Path choice between servers (:mod:`flowsim.routing`).
    seed : int
        ECMP hash seed.
    gpudirect : bool
        GPU <-> NIC traffic peer-to-peer, or staged in host memory.
    router : Router, optional
        A router of ``topology`` to reuse across calls (its tables are built once).
    **simulate_options
        Passed to :func:`~flowsim.engine.simulate` (``record_links``, ``record_flows``,
        ``mode``, ``time_rel_tol``, ``classes``). Link latencies and capacities come from the
        topology, flow columns from the workload.

    Returns
    -------
    RunResult

    Examples
    --------
    >>> from flowsim.presets import preset
    >>> topo = preset("dgx_h100", figure="nominal")
    >>> w = Workload.build(["a"], ["gpu0"], ["gpu1"], [450e9])
    >>> run(topo, w).makespan_s
    1.0
    """
    if not isinstance(topology, Topology):
        raise InputError(f"topology must be a Topology, got {type(topology).__name__}")
    if not isinstance(workload, Workload):
        raise InputError(f"workload must be a Workload, got {type(workload).__name__}")
    clash = sorted(_PROVIDED & set(simulate_options))
    if clash:
        raise InputError(f"run() takes {', '.join(clash)} from the workload and topology; do not pass them")
    simulate_allowed, _ = keyword_options(simulate, skip=3)
    check_options(simulate_options, [key for key in simulate_allowed if key not in _PROVIDED], "run")
    if router is None:
        router = Router(topology)
    elif router.topology is not topology:
        raise InputError("router was built for another topology")
    # Each distinct (source, destination) pair routed once (Router.route), checked there.
    try:
        routes = router.route(workload.src, workload.dst, method=routing, seed=seed, gpudirect=gpudirect)
    except InputError:
        check_endpoints(topology, workload)
        raise
    return RunResult(topology, workload, routes, simulate_routed(topology, workload, routes, **simulate_options))


def check_endpoints(topology: Topology, workload: Workload) -> None:
    """An :class:`InputError` naming the first flow whose source or destination is no node
    of ``topology`` (the router names only the node)."""
    index = topology.node_index
    for f, (src, dst) in enumerate(zip(workload.src, workload.dst, strict=True)):
        for end, node in (("source", src), ("destination", dst)):
            if node not in index:
                raise InputError(f"flow {workload.names[f]!r}: {end} {node!r} is no node of the topology")


def simulate_routed(topology: Topology, workload: Workload, routes: Routes, **simulate_options) -> SimulationResult:
    """Simulate ``workload`` over ``topology`` along ``routes`` (one per flow).

    Link capacities and latencies come from the topology, flow columns from the workload;
    ``simulate_options`` (``record_links``, ``record_flows``, ``mode``, ``progress``, ``classes``) go to
    :func:`~flowsim.engine.simulate`. Flows that share a budget (:mod:`flowsim.budgets`)
    cross one more link each, left out of the result.
    """
    routes, capacity, columns = _engine_arguments(topology, workload, routes)
    result = simulate(routes, capacity, workload.size_bytes, **columns, **simulate_options)
    return result if routes.n_links == topology.n_links else result.first_links(topology.n_links)


def prepare_routed(topology: Topology, workload: Workload, routes: Routes, *, classes: bool = False) -> PreparedRun:
    """``workload`` over ``topology`` along ``routes``, checked and laid out for the kernels
    as :func:`simulate_routed` would simulate it (:func:`flowsim.engine.prepare`)."""
    routes, capacity, columns = _engine_arguments(topology, workload, routes)
    prepared = prepare(routes, capacity, workload.size_bytes, **columns, classes=classes)
    return prepared if routes.n_links == topology.n_links else replace(prepared, shown_links=topology.n_links)


def _engine_arguments(topology: Topology, workload: Workload, routes: Routes) -> tuple[Routes, np.ndarray, dict]:
    """The engine's routes, link capacities and keyword arguments for ``workload``: the
    topology's links, then one per budget its flows share (:func:`flowsim.budgets.budget_links`)."""
    columns = dict(
        latency_s=topology.link_latency_s,
        start_s=workload.start_s,
        weights=workload.weight,
        caps_Bps=workload.cap_Bps,
        depends_on=(workload.dep_indptr, workload.dep_indices),
        delay_s=workload.delay_s,
        overhead_s=workload.overhead_s,
        link_names=topology.link_names,
        flow_names=workload.names,
    )
    budgets = budget_links(workload, topology.n_links)
    if budgets is None:
        return routes, topology.link_capacity_Bps, columns
    columns["latency_s"] = np.concatenate([topology.link_latency_s, np.zeros(budgets.capacity_Bps.size)])
    columns["link_names"] = (*topology.link_names, *budgets.names)
    return budgets.routes(routes), np.concatenate([topology.link_capacity_Bps, budgets.capacity_Bps]), columns
