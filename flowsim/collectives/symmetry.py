"""Large rings laid out and solved by classes of hops, exactly (docs/model.md "Rings by
classes of hops").

A ring's step DAG repeats its hops at every step and slice: the message of hop ``h`` at
step ``s`` waits for the message of the hop before it at step ``s - 1`` and follows its own
previous one. Where the hops fall into classes that share rates (the colour refinement of
:func:`flowsim.quotient.flow_classes` over one message per hop, each waiting for the hop
before it, around the ring), so do their messages at every step: the step DAG's quotient is
one message per class, step and slice. :class:`RingClasses` finds those classes for a ring
builder (a :class:`~flowsim.collectives.dag.HopSymmetry`), before a message is laid out, and
simulates the quotient the builder lays out by them; the times are the full step DAG's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from flowsim.collectives.dag import HopClasses, RingHops
from flowsim.engine import simulate
from flowsim.pipeline import RunResult
from flowsim.quotient import FlowClasses, flow_classes
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.topology import Topology
from flowsim.workload import Workload
from flowsim_kernels.classes import first_of_each, route_latency
from flowsim_kernels.csr import csr_gather_rows
from flowsim_kernels.engine import EngineInput

__all__ = ["RingClasses"]


class RingClasses:
    """Classes of a ring's hops on ``topology`` as ``router`` routes them (``routing``,
    ``seed``, ``gpudirect`` as :func:`flowsim.pipeline.run`), and the simulation of the ring
    laid out by them (:meth:`run`)."""

    def __init__(self, topology: Topology, router: Router, routing: str, seed: int, gpudirect: bool) -> None:
        self.topology = topology
        self.router = router
        self.routing = routing
        self.seed = seed
        self.gpudirect = gpudirect
        self._grouped: FlowClasses | None = None
        self._hop_routes: Routes | None = None
        self._route_latency = np.zeros(0)
        self._class_size = np.zeros(0, dtype=np.int64)
        self.message_class: np.ndarray | None = None
        self._piece = np.zeros(0, dtype=bool)

    def classes(self, hops: RingHops, most: int | None) -> HopClasses | None:
        """The coarsest equitable classes of ``hops``: one message per hop, of the ring's
        piece size, caps and step latency, a ``.due`` message or not, waiting for the hop
        before it, over the topology's links; None where more than half the hops would be
        classes of their own, or more than ``most``."""
        topology = self.topology
        routes = self.router.route(hops.sender, hops.dst, method=self.routing, seed=self.seed,
                                   gpudirect=self.gpudirect)
        n = len(hops)
        inp = EngineInput(
            routes.flow_link_indptr,
            routes.flow_link_indices,
            topology.link_capacity_Bps,
            topology.link_latency_s,
            np.full(n, hops.payload),
            np.zeros(n),
            np.ones(n),
            np.ascontiguousarray(hops.caps[:, 1]),
            np.zeros(n),
            np.ascontiguousarray(hops.latency, dtype=np.float64),
            np.arange(n + 1, dtype=np.int64),
            np.ascontiguousarray(hops.forwards, dtype=np.int64),
        )
        extra = (hops.due.astype(np.float64), np.ascontiguousarray(hops.caps[:, 0]))
        grouped = flow_classes(inp, *routes.transpose(), cyclic=True, extra=extra, most=most)
        if grouped is None:
            return None
        quotient = grouped.quotient
        # Each class waits for one class: the one its hops forward from.
        assert np.array_equal(quotient.dep_indptr, np.arange(grouped.n_flow_classes + 1))
        self._grouped = grouped
        self._hop_routes = routes
        # A route's latency (its links'), which the quotient's link classes do not carry.
        reps = grouped.representative
        self._route_latency = route_latency(
            routes.flow_link_indptr, routes.flow_link_indices, topology.link_latency_s, np.zeros(n)
        )[reps]
        self.message_class = None
        self._class_size = np.bincount(grouped.flow_class, minlength=grouped.n_flow_classes)
        return HopClasses(representative=reps, forwards=quotient.dep_indices.copy(), size=self._class_size)

    def laid_out(self, message_class: np.ndarray, piece: np.ndarray) -> None:
        self.message_class = message_class
        self._piece = piece

    @property
    def n_flows(self) -> int:
        """Messages of the full step DAG the laid-out quotient stands for."""
        assert self.message_class is not None
        return int(self._class_size[self.message_class].sum())

    def run(self, workload: Workload, *, progress: bool, time_rel_tol: float) -> RunResult:
        """Simulate ``workload``, the quotient a ring builder laid out by the classes last
        found: each piece crosses its class's link classes as often as each of their links
        carries a piece of the class, and pays its hop's route latency. The result's
        links are the topology's, each with its class's figures; its flows are the
        quotient's (``n_flow_classes``: how many)."""
        grouped, message_class = self._grouped, self.message_class
        assert grouped is not None and message_class is not None and message_class.size == len(workload)
        hop_routes = self._hop_routes
        assert hop_routes is not None
        quotient = grouped.quotient
        # A piece crosses its hop's route (a zero-byte one too: it pays the route's latency,
        # and its links play no part); a .due message stays at its sender.
        piece = self._piece
        link_class = grouped.link_class
        first_link, _ = first_of_each(link_class, grouped.n_link_classes)
        result = simulate(
            _rows(quotient.flow_link_indptr, quotient.flow_link_indices, message_class, piece, grouped.n_link_classes),
            quotient.capacity_Bps,
            workload.size_bytes,
            start_s=workload.start_s,
            weights=workload.weight,
            caps_Bps=workload.cap_Bps,
            depends_on=(workload.dep_indptr, workload.dep_indices),
            delay_s=workload.delay_s,
            overhead_s=workload.overhead_s + np.where(piece, self._route_latency[message_class], 0.0),
            link_names=[self.topology.link_names[link] for link in first_link.tolist()],
            flow_names=workload.names,
            progress=progress,
            time_rel_tol=time_rel_tol,
        )
        topology = self.topology
        result = replace(
            result,
            link_capacity_Bps=topology.link_capacity_Bps,
            link_bytes=result.link_bytes[link_class],
            n_flow_classes=len(workload),
            n_link_classes=grouped.n_link_classes,
        )
        # Each piece's route over the topology is its class's first hop's, as routed to find
        # the classes.
        routes = _rows(hop_routes.flow_link_indptr, hop_routes.flow_link_indices, grouped.representative[message_class],
                       piece, topology.n_links)
        return RunResult(topology, workload, routes, result)


def _rows(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray, taken: np.ndarray, n_links: int) -> Routes:
    """Routes whose ``i``-th is row ``rows[i]`` of a CSR of routes where ``taken[i]``, else empty."""
    empty = indptr.size - 1  # a row of no entries, appended
    rows = np.where(taken, rows, empty)
    padded = np.append(indptr, indptr[-1])
    out_indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(padded[rows + 1] - padded[rows], out=out_indptr[1:])
    return Routes.from_csr(out_indptr, csr_gather_rows(padded, indices, rows, out_indptr), n_links)
