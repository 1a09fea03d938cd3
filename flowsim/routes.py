"""Routes of many flows as one flow -> link CSR matrix, checked once."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import countOf

import numpy as np

from flowsim.errors import InputError, is_frozen, item_label, whole_number
from flowsim_kernels.csr import csr_row_value_sums, csr_transpose
from flowsim_kernels.progress import deferred_interrupt

# Routes whose links :func:`_plain_link_ids` reads in one go.
_PLAIN_ROUTE_TYPES = frozenset({list, tuple})


@dataclass(frozen=True)
class Routes:
    """Routes of ``n_flows`` flows over ``n_links`` directed links.

    ``flow_link_indices[flow_link_indptr[f]:flow_link_indptr[f + 1]]`` are the links flow
    ``f`` crosses, in order from source to destination. The arrays are int64, C-contiguous
    and read-only; build instances with :meth:`from_lists` or :meth:`from_csr`, which check
    them.
    """

    flow_link_indptr: np.ndarray
    flow_link_indices: np.ndarray
    n_links: int

    def __post_init__(self) -> None:
        # Built directly, unchecked arrays would reach the kernels, which index without
        # bounds checks (a link id out of range crashed the interpreter).
        n_links = whole_number("n_links", self.n_links, minimum=0)
        indptr, indices = _checked_csr(self.flow_link_indptr, self.flow_link_indices, n_links, None)
        object.__setattr__(self, "flow_link_indptr", indptr)
        object.__setattr__(self, "flow_link_indices", indices)
        object.__setattr__(self, "n_links", n_links)

    @property
    def n_flows(self) -> int:
        return self.flow_link_indptr.shape[0] - 1

    @property
    def n_incidences(self) -> int:
        return self.flow_link_indices.shape[0]

    def route(self, flow: int) -> np.ndarray:
        """The links of one flow, in order."""
        return self.flow_link_indices[self.flow_link_indptr[flow] : self.flow_link_indptr[flow + 1]]

    def hop_counts(self) -> np.ndarray:
        return np.diff(self.flow_link_indptr)

    def per_link_sum(self, per_flow: np.ndarray) -> np.ndarray:
        """Each link's sum of a per-flow quantity over the flows crossing it: rates give link
        loads (B/s), sizes give bytes carried (float64[n_links])."""
        with deferred_interrupt():  # a kernel that returns arrays: see flowsim_kernels.progress
            return csr_row_value_sums(self.flow_link_indptr, self.flow_link_indices,
                                      np.ascontiguousarray(per_flow, dtype=np.float64), self.n_links)

    def transpose(self) -> tuple[np.ndarray, np.ndarray]:
        """``(link_flow_indptr, link_flow_indices)``: the flows crossing each link."""
        with deferred_interrupt():  # a kernel that returns arrays: see flowsim_kernels.progress
            return csr_transpose(self.flow_link_indptr, self.flow_link_indices, self.n_links)

    @classmethod
    def from_lists(
        cls,
        routes: Sequence[Sequence[int | str]],
        n_links: int,
        link_index: Mapping[str, int] | None = None,
        flow_names: Sequence[str] | None = None,
    ) -> Routes:
        """Build from one list of links per flow.

        Links are integer ids in ``[0, n_links)``, or names looked up in ``link_index``.
        Routes that are all lists or tuples of Python ints convert in one go (about 30 ns
        per link on a 2-core VM, less than the max-min solve takes per link); names, NumPy
        scalars and other sequences go link by link (about 500 ns per link).
        """
        count_routes(routes)
        n_links = whole_number("n_links", n_links, minimum=0)
        plain = set(map(type, routes)) <= _PLAIN_ROUTE_TYPES
        if not plain:
            for f, route in enumerate(routes):
                # A bare link (0, "nvl0") or None would fail len() or be read letter by letter; a
                # set or a mapping has no order from source to destination.
                if isinstance(route, (str, bytes)) or not isinstance(route, (Sequence, np.ndarray)):
                    raise InputError(
                        f"{item_label('flow', f, flow_names)} has route {route!r}; a route is a sequence of links "
                        "in order (a list or tuple)"
                    )
        lengths = np.fromiter(map(len, routes), dtype=np.int64, count=len(routes))
        indptr = np.zeros(len(routes) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        indices = _plain_link_ids(routes, n_links) if plain else None
        if indices is None:
            indices = link_ids_one_by_one(routes, indptr, n_links, link_index, flow_names)
        return cls(indptr, indices, n_links)

    @classmethod
    def from_csr(
        cls,
        flow_link_indptr: np.ndarray,
        flow_link_indices: np.ndarray,
        n_links: int,
        flow_names: Sequence[str] | None = None,
    ) -> Routes:
        """Build from CSR arrays, checking pointers and link ids."""
        n_links = whole_number("n_links", n_links, minimum=0)
        indptr, indices = _checked_csr(flow_link_indptr, flow_link_indices, n_links, flow_names)
        return cls(indptr, indices, n_links)



def _checked_csr(
    flow_link_indptr: object, flow_link_indices: object, n_links: int, flow_names: Sequence[str] | None
) -> tuple[np.ndarray, np.ndarray]:
    """The CSR arrays as read-only int64 arrays (copied unless they are already frozen,
    :func:`~flowsim.errors.is_frozen`); an :class:`InputError` unless they are 1-d integer
    arrays, the pointers start at 0, never decrease and end at the number of link ids, and
    every link id is in ``[0, n_links)``."""
    arrays = []
    for name, values in (("flow_link_indptr", flow_link_indptr), ("flow_link_indices", flow_link_indices)):
        arr = np.asarray(values)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"{name} must be a 1-d integer array, got {arr.dtype} {arr.shape}")
        if not is_frozen(arr, np.int64):
            arr = np.array(arr, dtype=np.int64, order="C")  # a copy no caller can change
            arr.flags.writeable = False
        arrays.append(arr)
    indptr, indices = arrays
    if indptr.shape[0] < 1 or indptr[0] != 0:
        raise InputError("flow_link_indptr must start at 0")
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        f = int(np.argmax(steps < 0))
        raise InputError(f"flow_link_indptr decreases at {item_label('flow', f, flow_names)}")
    if indptr[-1] != indices.shape[0]:
        raise InputError(
            f"flow_link_indptr ends at {int(indptr[-1])} but flow_link_indices has {indices.shape[0]} entries"
        )
    bad = np.flatnonzero((indices < 0) | (indices >= n_links))
    if bad.size:
        k = int(bad[0])
        f = int(np.searchsorted(indptr, k, side="right") - 1)
        raise InputError(
            f"{item_label('flow', f, flow_names)} routes over unknown link {int(indices[k])} {_link_range(n_links)}"
        )
    return indptr, indices


def count_routes(routes: Routes | Sequence[Sequence[int | str]]) -> int:
    """Number of flows in ``routes`` (a :class:`Routes` or one sequence of links per flow);
    an :class:`InputError` if it is not a sized sequence (a generator, a string)."""
    if isinstance(routes, Routes):
        return routes.n_flows
    if not hasattr(routes, "__len__") or isinstance(routes, (str, bytes)):
        raise InputError(f"routes must be a sequence with one route per flow, got {type(routes).__name__}")
    return len(routes)


def link_ids_one_by_one(
    routes: Sequence[Sequence[int | str]],
    indptr: np.ndarray,
    n_links: int,
    link_index: Mapping[str, int] | None,
    flow_names: Sequence[str] | None,
) -> np.ndarray:
    """The links of ``routes`` as int64 ids, flow after flow, looked at one by one: names,
    NumPy scalars, and an :class:`InputError` naming the first wrong link with its flow.

    :meth:`Routes.from_lists` takes this way only where :func:`_plain_link_ids` cannot; it
    costs about 500 ns per link, and the benchmarks time it as the conversion it replaced.
    """
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    for f, route in enumerate(routes):
        start = indptr[f]
        for k, link in enumerate(route):
            indices[start + k] = _link_id(link, f, n_links, link_index, flow_names)
    return indices


def _plain_link_ids(routes: Sequence[Sequence[int | str]], n_links: int) -> np.ndarray | None:
    """All the links of ``routes`` (lists or tuples), flow after flow, as int64, where every
    one is a Python int in ``[0, n_links)``; None otherwise (a name, a bool, a float, a NumPy
    scalar, a link out of range), for :func:`link_ids_one_by_one`.

    About 20 ns per link where the link-by-link loop takes 500: one list of every link
    (``list.extend`` per route), converted by ``array('q')``, which takes Python ints only
    (a float, a string or a NumPy scalar fails it) but also bools; those can only be the 0s
    and 1s, so only those are looked at again.
    """
    flat: list = []
    deque(map(flat.extend, routes), maxlen=0)  # extend by each route, at C speed
    try:
        ids = np.frombuffer(array("q", flat), dtype=np.int64)
    except (TypeError, OverflowError):
        return None
    if ids.size and (ids.min() < 0 or ids.max() >= n_links):
        return None
    zeros_and_ones = np.flatnonzero(ids <= 1).tolist()
    if countOf(map(type, map(flat.__getitem__, zeros_and_ones)), bool):
        return None
    return ids


def _link_id(
    link: int | str,
    flow: int,
    n_links: int,
    link_index: Mapping[str, int] | None,
    flow_names: Sequence[str] | None,
) -> int:
    if isinstance(link, str):
        if link_index is None or link not in link_index:
            raise InputError(f"{item_label('flow', flow, flow_names)} routes over unknown link {link!r}")
        return link_index[link]
    if isinstance(link, (bool, np.bool_)) or not isinstance(link, (int, np.integer)):
        raise InputError(
            f"{item_label('flow', flow, flow_names)}: link ids must be integers or names, got {link!r}"
        )
    if not 0 <= link < n_links:
        raise InputError(
            f"{item_label('flow', flow, flow_names)} routes over unknown link {int(link)} {_link_range(n_links)}"
        )
    return int(link)


def _link_range(n_links: int) -> str:
    """The link ids there are, for messages: ``(links are 0..3)``, or ``(there are no links)``."""
    return f"(links are 0..{n_links - 1})" if n_links else "(there are no links)"
