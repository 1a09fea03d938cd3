"""Flow classes: a simulation solved once per class of flows that share rates at every
instant, then expanded back to every flow and link (docs/model.md "Flow classes").

:func:`flow_classes` finds the coarsest equitable partition of a simulation's flows and
links (colour refinement from the flows' and links' own attributes) and builds the quotient
problem: one flow per flow class, one link per link class, the class's flow crossing a
link class as many times as each of its links is crossed by flows of the class.
:class:`FlowClasses` maps the quotient's answers back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowsim_kernels.classes import (
    first_of_each,
    fold_keys,
    is_equitable,
    quotient_dependencies,
    quotient_routes,
    refine_classes,
    route_latency,
)
from flowsim_kernels.engine import EngineInput

__all__ = ["FlowClasses", "flow_classes"]


@dataclass(frozen=True)
class FlowClasses:
    """A simulation's flows and links in classes, and its quotient problem.

    Attributes
    ----------
    flow_class : int64[n_flows]
        Class of each flow (``0 .. n_flow_classes - 1``).
    link_class : int64[n_links]
        Class of each link.
    quotient : EngineInput
        One flow per flow class and one link per link class, for the event engine: the
        class's attributes (its first flow's), its route latency folded into its overhead
        (the quotient's links have none), and a route listing each link class as many times
        as each of its links carries flows of the class.
    representative : int64[n_flow_classes]
        The first flow of each class (to name a class in messages).
    n_rounds : int
        Rounds of colour refinement it took.
    """

    flow_class: np.ndarray
    link_class: np.ndarray
    quotient: EngineInput
    representative: np.ndarray
    n_rounds: int

    @property
    def n_flow_classes(self) -> int:
        return self.representative.shape[0]

    @property
    def n_link_classes(self) -> int:
        return self.quotient.capacity_Bps.shape[0]

    def expand_segments(
        self, seg_entity: np.ndarray, n_quotient_entities: int, with_flows: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rate segments recorded on the quotient's links (and flows), grouped per entity of
        the full problem: ``(indptr, take)``, where ``take`` indexes the quotient's segment
        arrays sorted by entity, and every link (flow) gets its class's segments."""
        order = np.argsort(seg_entity, kind="stable")
        q_indptr = np.zeros(n_quotient_entities + 1, dtype=np.int64)
        np.cumsum(np.bincount(seg_entity, minlength=n_quotient_entities), out=q_indptr[1:])
        n_lc = self.n_link_classes
        entity_of = self.link_class
        if with_flows:
            entity_of = np.concatenate([self.link_class, n_lc + self.flow_class])
        counts = q_indptr[entity_of + 1] - q_indptr[entity_of]
        indptr = np.zeros(entity_of.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        offset = np.arange(indptr[-1], dtype=np.int64) - np.repeat(indptr[:-1], counts)
        take = order[np.repeat(q_indptr[entity_of], counts) + offset]
        return indptr, take


#: Share of the flows above which classes are not worth solving by: past it, refinement
#: gives up and the full problem is solved (the quotient would save less than it costs).
MOST_CLASS_SHARE = 0.5


def flow_classes(
    inp: EngineInput,
    link_flow_indptr: np.ndarray,
    link_flow_indices: np.ndarray,
    *,
    cyclic: bool = False,
    extra: Sequence[np.ndarray] = (),
    most: int | None = None,
) -> FlowClasses | None:
    """The coarsest equitable classes of a checked simulation's flows and links, and its
    quotient (see docs/model.md "Flow classes"); None when there would be more than
    :data:`MOST_CLASS_SHARE` of the flows.

    Flows start in one class per distinct (size, start, weight, cap, delay, overhead plus
    route latency; whether it transfers follows from its size), links per distinct capacity; colour refinement
    (:func:`flowsim_kernels.classes.refine_classes`) splits them until every flow of a
    class crosses as many links of each link class, every link of a class carries as many
    flows of each flow class, and every flow of a class waits for as many flows of each
    class. Refinement hashes; the result is checked exactly (equal attributes, and
    :func:`flowsim_kernels.classes.is_equitable` counts), and should a hash collision ever
    merge what differs, every flow and link gets its own class (the full problem).

    ``link_flow_indptr``, ``link_flow_indices``: the transpose of ``inp``'s routes.
    ``cyclic``: the dependencies may form cycles (see :func:`~flowsim_kernels.classes.refine_classes`).
    ``extra``: more attributes per flow (float64 columns) that the flows of a class share.
    ``most``: give up past this many classes too.
    """
    n_flows = inp.size_bytes.shape[0]
    n_links = inp.capacity_Bps.shape[0]
    transfers = inp.size_bytes > 0
    latency = route_latency(inp.flow_link_indptr, inp.flow_link_indices, inp.latency_s, inp.overhead_s)
    # The flows' attributes column by column: stacked, they would take 6 x 8 bytes a flow at
    # once (56 MB for the 1.2 million flows of a 16-server ring), twice over in the check.
    # Whether a flow transfers is its size's being > 0: the size keeps such flows apart.
    attributes = (inp.size_bytes, inp.start_s, inp.weight, inp.cap_Bps, inp.delay_s, latency, *extra)
    flow_keys = np.zeros(n_flows, dtype=np.uint64)
    for column in attributes:
        fold_keys(flow_keys, column.view(np.uint64))
    link_keys = np.zeros(n_links, dtype=np.uint64)
    fold_keys(link_keys, inp.capacity_Bps.view(np.uint64))
    flow_class = np.empty(n_flows, dtype=np.int64)
    link_class = np.empty(n_links, dtype=np.int64)
    most_classes = int(MOST_CLASS_SHARE * n_flows) if most is None else min(int(MOST_CLASS_SHARE * n_flows), most)
    n_fc, n_lc, n_rounds = refine_classes(
        flow_keys, link_keys,
        inp.flow_link_indptr, inp.flow_link_indices, link_flow_indptr, link_flow_indices,
        inp.dep_indptr, inp.dep_indices, transfers, cyclic, most_classes, flow_class, link_class,
    )
    if n_fc < 0:
        return None
    representative, seen_flows = first_of_each(flow_class, n_fc)
    first_link, seen_links = first_of_each(link_class, n_lc)
    assert (seen_flows, seen_links) == (n_fc, n_lc)  # classes are numbered by first appearance
    exact = (
        all(np.array_equal(column, column[representative][flow_class]) for column in attributes)
        and np.array_equal(inp.capacity_Bps, inp.capacity_Bps[first_link][link_class])
        and is_equitable(
            flow_class, link_class, n_fc, n_lc, inp.flow_link_indptr, inp.flow_link_indices, link_flow_indptr,
            link_flow_indices, inp.dep_indptr, inp.dep_indices, transfers,
        )
    )
    if not exact:
        return None
    return _quotient(inp, flow_class, link_class, representative, first_link, latency, transfers, int(n_rounds))


def _quotient(
    inp: EngineInput,
    flow_class: np.ndarray,
    link_class: np.ndarray,
    representative: np.ndarray,
    first_link: np.ndarray,
    latency: np.ndarray,
    transfers: np.ndarray,
    n_rounds: int,
) -> FlowClasses:
    """The quotient problem of equitable classes."""
    n_fc = representative.shape[0]
    class_size = np.bincount(flow_class, minlength=n_fc)
    link_class_size = np.bincount(link_class, minlength=first_link.shape[0])
    q_indptr, q_indices = quotient_routes(
        inp.flow_link_indptr, inp.flow_link_indices, link_class, link_class_size, representative, class_size,
        transfers,
    )
    dep_indptr, dep_indices = quotient_dependencies(inp.dep_indptr, inp.dep_indices, flow_class, representative)
    quotient = EngineInput(
        q_indptr,
        q_indices,
        np.ascontiguousarray(inp.capacity_Bps[first_link]),
        np.zeros(first_link.shape[0]),
        np.ascontiguousarray(inp.size_bytes[representative]),
        np.ascontiguousarray(inp.start_s[representative]),
        np.ascontiguousarray(inp.weight[representative]),
        np.ascontiguousarray(inp.cap_Bps[representative]),
        np.ascontiguousarray(inp.delay_s[representative]),
        np.ascontiguousarray(latency[representative]),
        dep_indptr,
        dep_indices,
    )
    return FlowClasses(flow_class, link_class, quotient, representative, n_rounds)
