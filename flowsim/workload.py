"""Workloads: flows between endpoints, with sizes, start times and dependencies.

A :class:`Workload` says *what* moves (from which node to which, how many bytes, after
what); routing over a topology says *where*. Collectives and training steps build
workloads; :func:`flowsim.run` routes and simulates them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from flowsim.errors import InputError, float_column, is_frozen
from flowsim.strings import StringColumn, first_duplicate, prefixed

#: Most names :meth:`Workload.build` checks for repeats with a set.
_SET_CHECK_MAX = 65_536


@dataclass(frozen=True)
class Workload:
    """A table of flows, one row per flow, checked on construction.

    Attributes
    ----------
    names : sequence of str
        Unique flow ids, used in errors and traces (e.g. ``"ar.step3.r7"``): a tuple, or for
        the millions of flows builders lay out a compact column that reads as one
        (:mod:`flowsim.strings`); so are ``src``, ``dst`` and the tags.
    src, dst : sequence of str
        Source and destination node names; the same node for a local copy.
    size_bytes : float64[n]
        Bytes to move, >= 0.
    start_s : float64[n]
        Earliest time the flow may become ready, >= 0.
    dep_indptr, dep_indices : int64[n + 1], int64[n_deps]
        CSR of the flows each flow waits for (indices into this table).
    delay_s : float64[n]
        Time between the last dependency finishing and readiness (compute), >= 0.
    overhead_s : float64[n]
        Per-message overhead added to the route latency, >= 0.
    weight : float64[n]
        Max-min weight, > 0.
    cap_Bps : float64[n]
        Rate cap, > 0, inf for none.
    tags : Mapping[str, sequence of str]
        Free-form string columns (``collective``, ``step``, ...), one value per flow.
    """

    names: Sequence[str]
    src: Sequence[str]
    dst: Sequence[str]
    size_bytes: np.ndarray
    start_s: np.ndarray
    dep_indptr: np.ndarray
    dep_indices: np.ndarray
    delay_s: np.ndarray
    overhead_s: np.ndarray
    weight: np.ndarray
    cap_Bps: np.ndarray
    tags: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def build(
        cls,
        names: Sequence[str],
        src: Sequence[str],
        dst: Sequence[str],
        size_bytes: Sequence[float] | np.ndarray,
        *,
        start_s: Sequence[float] | np.ndarray | None = None,
        depends_on: Sequence[Sequence[int | str]] | None = None,
        dependency_csr: tuple[np.ndarray, np.ndarray] | None = None,
        delay_s: Sequence[float] | np.ndarray | None = None,
        overhead_s: Sequence[float] | np.ndarray | None = None,
        weight: Sequence[float] | np.ndarray | None = None,
        cap_Bps: Sequence[float] | np.ndarray | None = None,
        tags: Mapping[str, Sequence[str]] | None = None,
    ) -> Workload:
        """Check and freeze a workload. ``depends_on`` holds flow indices or names;
        ``dependency_csr`` gives the same as a CSR pair ``(indptr, indices)`` of flow indices
        (what builders laying out millions of messages at once have), instead."""
        names = _strings(names)
        n = len(names)
        # Past a few tens of thousands, hashes sorted in NumPy find a repeat in half the
        # time of a set of the names (3.3 million names: 0.6 s against 1.3 s).
        large = isinstance(names, StringColumn) or n > _SET_CHECK_MAX
        twice = first_duplicate(names) if large or len(set(names)) != n else None
        if twice is not None:
            raise InputError(f"flow name {names[twice[1]]!r} is used twice (flows {twice[0]} and {twice[1]})")
        src = _strings(src)
        dst = _strings(dst)
        for what, col in (("src", src), ("dst", dst)):
            if len(col) != n:
                raise InputError(f"{what} has {len(col)} entries for {n} flows")
        size = _column(size_bytes, n, 0.0, "size_bytes", names, lower=0.0)
        start = _column(start_s, n, 0.0, "start_s", names, lower=0.0)
        delay = _column(delay_s, n, 0.0, "delay_s", names, lower=0.0)
        overhead = _column(overhead_s, n, 0.0, "overhead_s", names, lower=0.0)
        w = _column(weight, n, 1.0, "weight", names, lower=0.0, strict=True)
        cap = _column(cap_Bps, n, np.inf, "cap_Bps", names, lower=0.0, strict=True, allow_inf=True)
        if dependency_csr is None:
            dep_indptr, dep_indices = _dependencies(depends_on, n, names)
        elif depends_on is not None:
            raise InputError("give the dependencies as depends_on or as dependency_csr, not both")
        else:
            dep_indptr, dep_indices = _csr_dependencies(dependency_csr, n, names)
        frozen_tags = {}
        for key, values in (tags or {}).items():
            values = _strings(values)
            if len(values) != n:
                raise InputError(f"tag {key!r} has {len(values)} values for {n} flows")
            frozen_tags[key] = values
        return cls(names, src, dst, size, start, dep_indptr, dep_indices, delay, overhead, w, cap, frozen_tags)

    @classmethod
    def concat(cls, parts: Sequence[Workload]) -> Workload:
        """One workload holding ``parts`` in order; dependencies are re-indexed, tag columns
        missing from a part are filled with empty strings."""
        offsets = np.cumsum([0] + [len(p) for p in parts])
        keys = sorted({k for p in parts for k in p.tags})
        # Each part's dependency CSR, its indices moved past the parts before it.
        edge_offsets = np.cumsum([0] + [p.dep_indices.size for p in parts])
        indptr = np.concatenate([np.zeros(1, np.int64)]
                                + [p.dep_indptr[1:] + e for p, e in zip(parts, edge_offsets[:-1], strict=True)])
        indices = np.concatenate([np.empty(0, np.int64)]
                                 + [p.dep_indices + off for p, off in zip(parts, offsets[:-1], strict=True)])
        return cls.build(
            [n for p in parts for n in p.names],
            [s for p in parts for s in p.src],
            [d for p in parts for d in p.dst],
            _cat(parts, "size_bytes"),
            start_s=_cat(parts, "start_s"),
            dependency_csr=(indptr, indices),
            delay_s=_cat(parts, "delay_s"),
            overhead_s=_cat(parts, "overhead_s"),
            weight=_cat(parts, "weight"),
            cap_Bps=_cat(parts, "cap_Bps"),
            tags={k: [v for p in parts for v in p.tags.get(k, ("",) * len(p))] for k in keys},
        )

    def renamed(self, prefix: str, start_s: float = 0.0) -> Workload:
        """This workload with ``prefix`` put before every flow name and ``start_s`` added to
        every start time, the rest as it is. A common prefix keeps the names distinct, so they
        are not checked again: millions of a collective's names are prefixed in their compact
        column (:func:`flowsim.strings.prefixed`)."""
        names = prefixed(self.names, prefix)
        start = _column(self.start_s + start_s, len(self), 0.0, "start_s", names, lower=0.0)
        return replace(self, names=names, start_s=start)

    def dependencies(self, flow: int) -> np.ndarray:
        return self.dep_indices[self.dep_indptr[flow] : self.dep_indptr[flow + 1]]


def _strings(values: Sequence[object]) -> Sequence[str]:
    """``values`` as a tuple of str (each through ``str`` unless all are str already), or
    as they are where they are a compact column of strings (:mod:`flowsim.strings`)."""
    if isinstance(values, StringColumn):
        return values
    values = tuple(values)
    if set(map(type, values)) <= {str}:
        return cast(tuple[str, ...], values)
    return tuple(str(v) for v in values)


def _cat(parts: Sequence[Workload], attr: str) -> np.ndarray:
    return np.concatenate([getattr(p, attr) for p in parts]) if parts else np.empty(0)


def _column(
    values: Sequence[float] | np.ndarray | None,
    n: int,
    default: float,
    what: str,
    names: Sequence[str],
    *,
    lower: float,
    strict: bool = False,
    allow_inf: bool = False,
) -> np.ndarray:
    arr = float_column(values, n, default, what, scalar=True)
    bad = np.isnan(arr) | (arr <= lower if strict else arr < lower)
    if not allow_inf:
        bad |= np.isinf(arr)
    if bad.any():
        i = int(np.argmax(bad))
        rule = f"> {lower:g}" if strict else f">= {lower:g}"
        rule += "" if allow_inf else " and finite"
        raise InputError(f"flow {names[i]!r} has {what} {float(arr[i])!r}; it must be {rule}")
    arr.flags.writeable = False
    return arr


def _integer_dependencies(depends_on: Sequence[Sequence[int | str]], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The CSR pair of ``depends_on`` when every entry is a plain ``int`` index of another
    flow (what builders such as the collectives' give, millions at a time), in one pass of
    NumPy; None otherwise, for :func:`_dependencies`' checks flow by flow to name the problem.
    """
    try:
        counts = np.fromiter(map(len, depends_on), dtype=np.int64, count=n)
    except TypeError:
        return None
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    flat = list(itertools.chain.from_iterable(depends_on))
    if not set(map(type, flat)) <= {int}:  # bool, str, numpy integers: checked one by one
        return None
    indices = np.array(flat, dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    if indices.size and (indices.min() < 0 or indices.max() >= n or bool(np.any(indices == owner))):
        return None
    indptr.flags.writeable = False
    indices.flags.writeable = False
    return indptr, indices


def _csr_dependencies(
    csr: tuple[np.ndarray, np.ndarray], n: int, names: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """``dependency_csr`` checked: an ``indptr`` of ``n + 1`` non-decreasing offsets from 0
    to the length of ``indices``, each index another flow's."""
    indptr, indices = (a if is_frozen(a, np.int64) else np.array(a, dtype=np.int64) for a in csr)
    if indptr.shape != (n + 1,) or indices.ndim != 1:
        raise InputError(f"dependency_csr: indptr has shape {indptr.shape} for {n} flows (needs {n + 1},) "
                         f"and indices shape {indices.shape} (needs one dimension)")
    counts = np.diff(indptr)
    if indptr[0] != 0 or indptr[-1] != indices.size or bool(np.any(counts < 0)):
        raise InputError(f"dependency_csr: indptr must rise from 0 to {indices.size} (the length of indices)")
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    bad = (indices < 0) | (indices >= n) | (indices == owner)
    if bad.any():
        at = int(np.argmax(bad))
        i, j = int(owner[at]), int(indices[at])
        what = "itself" if i == j else f"unknown flow {j} (flows are 0..{n - 1})"
        raise InputError(f"flow {names[i]!r} depends on {what}")
    indptr.flags.writeable = False
    indices.flags.writeable = False
    return indptr, indices


def _dependencies(
    depends_on: Sequence[Sequence[int | str]] | None,
    n: int,
    names: Sequence[str],
) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.zeros(n + 1, dtype=np.int64)
    if depends_on is None:
        indptr.flags.writeable = False
        return indptr, np.empty(0, dtype=np.int64)
    if len(depends_on) != n:
        raise InputError(f"depends_on has {len(depends_on)} entries for {n} flows")
    fast = _integer_dependencies(depends_on, n)
    if fast is not None:
        return fast
    # Names, or something wrong: flow by flow, naming the first bad entry.
    index = dict(zip(names, range(n), strict=True))
    flat: list[int] = []
    for i, deps in enumerate(depends_on):
        for d in deps:
            if isinstance(d, str):
                if d not in index:
                    raise InputError(f"flow {names[i]!r} depends on unknown flow {d!r}")
                j = index[d]
            elif isinstance(d, bool) or not isinstance(d, (int, np.integer)):
                raise InputError(f"flow {names[i]!r} depends on {d!r}; name a flow or give its index (an integer)")
            else:
                j = int(d)
                if not 0 <= j < n:
                    raise InputError(f"flow {names[i]!r} depends on unknown flow {j} (flows are 0..{n - 1})")
            if j == i:
                raise InputError(f"flow {names[i]!r} depends on itself")
            flat.append(j)
        indptr[i + 1] = len(flat)
    indices = np.array(flat, dtype=np.int64)
    indptr.flags.writeable = False
    indices.flags.writeable = False
    return indptr, indices
