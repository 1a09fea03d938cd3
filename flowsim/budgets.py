"""Shared rate budgets: flows whose rates together stay under one cap, wherever they go.

A flow draws on a budget through its ``shared_cap`` tag, ``"GROUP=CAPACITY"`` (capacity in
bytes per second on the wire, as ``repr`` writes a float); ``""`` for none. Every flow
tagged with one group shares that group's capacity, the smallest where its flows give
several. The simulation treats a budget as one more link, of that capacity and no latency,
crossed by its flows (max-min sharing takes it as it takes any link); results show the
topology's links only.

NVLS all-reduces use it (docs/model.md "NVLS's shared budget"):
:func:`flowsim.collectives.placement.collective_workload` puts a server's NVLS messages
into its switch on one budget and those out of it on another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowsim.errors import InputError
from flowsim.routes import Routes
from flowsim.strings import coded
from flowsim.workload import Workload
from flowsim_kernels.csr import csr_append_entries

__all__ = ["SHARED_CAP_TAG", "BudgetLinks", "budget_links", "budget_tag"]

#: The tag that names a flow's budget.
SHARED_CAP_TAG = "shared_cap"


def budget_tag(group: str, capacity_Bps: float) -> str:
    """The ``shared_cap`` tag of a flow on budget ``group`` of ``capacity_Bps``."""
    if "=" in group or not group:
        raise InputError(f"a budget's group must be a non-empty name without '=', got {group!r}")
    if not (math.isfinite(capacity_Bps) and capacity_Bps > 0):
        raise InputError(f"budget {group!r}: capacity must be finite and > 0 B/s, got {capacity_Bps!r}")
    return f"{group}={capacity_Bps!r}"


@dataclass(frozen=True)
class BudgetLinks:
    """The budgets of a workload as extra links numbered from the topology's link count.

    ``link_of_flow``: int64[n_flows], each flow's budget link, -1 for none;
    ``capacity_Bps`` and ``names``: per budget link, in the order of first appearance."""

    link_of_flow: np.ndarray
    capacity_Bps: np.ndarray
    names: tuple[str, ...]

    def routes(self, routes: Routes) -> Routes:
        """``routes`` with each flow's budget link after its own links."""
        indptr, indices = csr_append_entries(routes.flow_link_indptr, routes.flow_link_indices, self.link_of_flow)
        indptr.flags.writeable = False
        indices.flags.writeable = False
        return Routes.from_csr(indptr, indices, routes.n_links + self.capacity_Bps.size)


def budget_links(workload: Workload, n_links: int) -> BudgetLinks | None:
    """The budgets ``workload``'s flows draw on, as links ``n_links``, ``n_links + 1``, ...;
    None where no flow draws on one. A malformed tag is an :class:`InputError` naming the
    flow."""
    column = workload.tags.get(SHARED_CAP_TAG)
    if column is None:
        return None
    # Each distinct tag parsed once (a training step tags millions of flows with a few).
    tags, codes = coded(column)
    if not any(tags):
        return None
    index: dict[str, int] = {}
    capacity: list[float] = []
    link_of_tag = np.full(len(tags), -1, dtype=np.int64)
    for i, tag in enumerate(tags):
        if not tag:
            continue
        group, equals, value = tag.rpartition("=")
        try:
            cap = float(value)
        except ValueError:
            cap = math.nan
        if not equals or not group or not (math.isfinite(cap) and cap > 0):
            flow = workload.names[int(np.argmax(codes == i))]
            raise InputError(f"flow {flow!r} has {SHARED_CAP_TAG} {tag!r}; expected "
                             "GROUP=CAPACITY (bytes per second, finite and > 0)")
        k = index.setdefault(group, len(index))
        if k == len(capacity):
            capacity.append(cap)
        else:
            capacity[k] = min(capacity[k], cap)
        link_of_tag[i] = n_links + k
    link_of_flow = link_of_tag[codes]
    return BudgetLinks(link_of_flow, np.array(capacity, dtype=np.float64), tuple(f"budget {g}" for g in index))
