"""Compact columns of strings, for workloads of millions of flows.

A tuple of a million flow names holds a million Python strings: about 80 bytes each for
names of 30 characters, plus the tuple's pointer. The step DAG of a collective on 16 servers
has 1.2 million such names, a 3D training step 3.3 million, and their tags repeat a few
values each. Two read-only sequences keep them in a fraction of that:

- :class:`PackedStrings`: every string's UTF-8 bytes in one buffer, with offsets (flow
  names, all distinct): the characters and 8 bytes a string.
- :class:`CodedStrings`: each distinct value once, and a small integer code per row (tags,
  endpoints): 1 to 4 bytes a row, none for a column of one value.
- :class:`JoinedStrings`: each row two coded parts joined (the flows of a collective copied
  into a training step thousands of times: the copy's prefix, and the flow's own name), so
  that no row's string exists until it is read: 8 bytes a row.

Both behave as the tuples they replace: indexing gives a ``str``, slicing a tuple of them,
iteration every value in order, ``+`` with a tuple a tuple, ``==`` compares with any
sequence of strings element by element.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

__all__ = [
    "CodedStrings", "JoinedStrings", "PackedStrings", "StringColumn", "chunks", "coded", "first_duplicate", "prefixed",
    "utf8_chunks", "utf8_size",
]

#: Rows decoded at a time when a column is iterated.
_CHUNK = 65_536


class StringColumn(Sequence[str]):
    """A read-only sequence of strings stored compactly; subclasses give :meth:`_take`."""

    __slots__ = ()

    def _take(self, lo: int, hi: int) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _utf8_chunks(self, size: int) -> Iterator[list[bytes]]:
        """The rows UTF-8 encoded, ``size`` at a time (:func:`utf8_chunks`)."""
        n = len(self)
        for lo in range(0, n, size):
            yield [value.encode("utf-8") for value in self._take(lo, min(n, lo + size))]

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        n = len(self)
        if isinstance(index, slice):
            lo, hi, step = index.indices(n)
            if step == 1:
                return tuple(self._take(lo, hi)) if hi > lo else ()
            return tuple(self[i] for i in range(lo, hi, step))
        i = operator.index(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {index} of {n}")
        return self._take(i, i + 1)[0]

    def __iter__(self) -> Iterator[str]:
        n = len(self)
        # Chunk by chunk, each a list the C-level chain walks: no Python frame per row.
        return itertools.chain.from_iterable(self._take(lo, min(n, lo + _CHUNK)) for lo in range(0, n, _CHUNK))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compares by value, like a list

    def __add__(self, other: object) -> tuple[str, ...]:
        if not isinstance(other, (tuple, StringColumn)):
            return NotImplemented
        return (*self, *other)

    def __radd__(self, other: object) -> tuple[str, ...]:
        if not isinstance(other, tuple):
            return NotImplemented
        return (*other, *self)

    def __repr__(self) -> str:
        shown = ", ".join(repr(s) for s in self[:3])
        return f"{type(self).__name__}([{shown}{', ...' if len(self) > 3 else ''}], n={len(self)})"


class PackedStrings(StringColumn):
    """Strings as one UTF-8 buffer and offsets into it.

    Parameters
    ----------
    data : bytes
        Every string's UTF-8 encoding, one after another.
    offsets : int64[n + 1]
        String ``i`` is ``data[offsets[i]:offsets[i + 1]]``.
    """

    __slots__ = ("_ascii", "_data", "_offsets")

    def __init__(self, data: bytes, offsets: np.ndarray) -> None:
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != len(data) or (
            offsets.size > 1 and bool(np.any(np.diff(offsets) < 0))
        ):
            raise ValueError("offsets must rise from 0 to the data's length")
        offsets.flags.writeable = False
        self._data = bytes(data)
        self._offsets = offsets
        self._ascii = self._data.isascii()  # then byte offsets are character offsets

    @classmethod
    def from_strings(cls, values: Iterable[str]) -> PackedStrings:
        """Pack ``values`` (each a ``str``), reading them chunk by chunk."""
        return cls.from_chunks(chunks(values))

    @classmethod
    def from_chunks(cls, pieces: Iterable[Sequence[str]]) -> PackedStrings:
        """Pack the strings of ``pieces`` (sequences of ``str``, or packed columns, whose
        bytes are taken as they are), one after another."""
        parts: list[bytes] = []
        lengths: list[np.ndarray] = []
        for piece in pieces:
            if isinstance(piece, PackedStrings):
                parts.append(piece._data)
                lengths.append(np.diff(piece._offsets))
                continue
            for chunk in chunks(piece) if isinstance(piece, StringColumn) else (piece,):
                cls._pack(chunk, parts, lengths)
        offsets = np.zeros(1 + sum(a.size for a in lengths), dtype=np.int64)
        if lengths:
            np.cumsum(np.concatenate(lengths), out=offsets[1:])
        return cls(b"".join(parts), offsets)

    @staticmethod
    def _pack(chunk: Sequence[str], parts: list[bytes], lengths: list[np.ndarray]) -> None:
        """Append ``chunk``'s UTF-8 bytes to ``parts`` and each row's byte count to ``lengths``."""
        text = "".join(chunk)
        if text.isascii():  # a character a byte: one encoding for the chunk
            lengths.append(np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk)))
            parts.append(text.encode("ascii"))
            return
        encoded = [s.encode("utf-8", "surrogatepass") for s in chunk]
        lengths.append(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        parts.append(b"".join(encoded))

    def __len__(self) -> int:
        return self._offsets.size - 1

    def __reduce__(self) -> tuple:
        return (PackedStrings, (self._data, self._offsets))  # checked and frozen again on load

    @property
    def nbytes(self) -> int:
        """Bytes the column holds (buffer and offsets)."""
        return len(self._data) + self._offsets.nbytes

    def prefixed(self, prefix: str) -> PackedStrings:
        """Every row with ``prefix`` put before it, built on the buffer in NumPy (no row
        becomes a Python string)."""
        head = np.frombuffer(prefix.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        n = len(self)
        offsets = self._offsets + head.size * np.arange(n + 1, dtype=np.int64)
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        own = np.ones(out.size, dtype=bool)  # the bytes that are the rows' own
        starts = offsets[:-1]
        for k in range(head.size):  # the prefix's k-th byte, in every row
            at = starts + k
            out[at] = head[k]
            own[at] = False
        out[own] = np.frombuffer(self._data, dtype=np.uint8)
        return PackedStrings(out.tobytes(), offsets)

    def _utf8_chunks(self, size: int) -> Iterator[list[bytes]]:
        if not self._ascii:  # the buffer may hold surrogates (surrogatepass): encode strictly
            yield from super()._utf8_chunks(size)
            return
        data, n = self._data, len(self)
        for lo in range(0, n, size):
            offsets = self._offsets[lo : min(n, lo + size) + 1].tolist()
            yield [data[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]

    def _take(self, lo: int, hi: int) -> list[str]:
        offsets = self._offsets[lo : hi + 1].tolist()
        data = self._data
        if self._ascii:
            base = offsets[0]
            text = data[base : offsets[-1]].decode("ascii")
            return [text[a - base : b - base] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        return [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


class CodedStrings(StringColumn):
    """Strings as their distinct values and one code per row.

    Parameters
    ----------
    categories : sequence of str
        The distinct values.
    codes : integer array of shape (n,)
        Row ``i`` is ``categories[codes[i]]``.
    """

    __slots__ = ("_categories", "_codes", "_lookup")

    def __init__(self, categories: Sequence[str], codes: np.ndarray) -> None:
        codes = np.asarray(codes)
        if codes.ndim != 1 or not np.issubdtype(codes.dtype, np.integer):
            raise ValueError("codes must be a 1-D integer array")
        if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= len(categories)):
            raise ValueError(f"codes must lie in 0 .. {len(categories) - 1}")
        if codes.flags.writeable:
            codes = codes.copy()
            codes.flags.writeable = False
        self._categories = tuple(categories)
        self._codes = codes
        self._lookup = np.array(self._categories + ("",), dtype=object)[:-1]  # 1-D even for one tuple

    @classmethod
    def from_strings(cls, values: Iterable[str]) -> CodedStrings:
        """Code ``values``: categories in the order they first appear."""
        return cls.from_chunks(chunks(values))

    @classmethod
    def from_chunks(cls, pieces: Iterable[Sequence[str]]) -> CodedStrings:
        """Code the strings of ``pieces`` (sequences of ``str``, or coded columns, recoded
        per category), one after another."""
        index: dict[str, int] = {}
        parts = [np.empty(0, dtype=np.int64)]
        for chunk in pieces:
            if isinstance(chunk, CodedStrings):
                # Categories in the order their rows first appear, as the rows would give them.
                used, first = np.unique(chunk.codes, return_index=True)
                for code in used[np.argsort(first)].tolist():
                    index.setdefault(chunk.categories[code], len(index))
                recode = np.array([index.get(value, -1) for value in chunk.categories], dtype=np.int64)
                parts.append(recode[chunk.codes])
                continue
            for value in dict.fromkeys(chunk):  # a chunk's distinct values, in order
                index.setdefault(value, len(index))
            parts.append(np.fromiter(map(index.__getitem__, chunk), dtype=np.int64, count=len(chunk)))
        return cls.narrowed(tuple(index), np.concatenate(parts))

    @classmethod
    def narrowed(cls, categories: Sequence[str], codes: np.ndarray) -> CodedStrings:
        """Rows ``categories[codes[i]]``, the codes copied once into the narrowest integer
        type that holds them (a byte a row for up to 127 values)."""
        narrow = _narrow(np.asarray(codes), len(categories))
        narrow.flags.writeable = False  # a fresh copy: the column's own
        return cls(categories, narrow)

    @classmethod
    def in_order_of_appearance(cls, categories: Sequence[str], codes: np.ndarray) -> CodedStrings:
        """Rows ``categories[codes[i]]``, coded as :meth:`from_strings` codes them: the
        categories that appear, in the order they first do; the work is NumPy's, per row."""
        used, first = np.unique(codes, return_index=True)
        order = used[np.argsort(first)]
        number = _narrow(np.zeros(len(categories), dtype=np.int64), order.size)
        number[order] = np.arange(order.size)
        renumbered = number[codes]
        renumbered.flags.writeable = False  # a fresh array: the column's own, not copied again
        return cls(tuple(categories[c] for c in order.tolist()), renumbered)

    @classmethod
    def constant(cls, value: str, n: int) -> CodedStrings:
        """``n`` rows of ``value``, in no memory per row."""
        return cls((value,), np.broadcast_to(np.zeros(1, dtype=np.int8), (n,)))

    @property
    def categories(self) -> tuple[str, ...]:
        return self._categories

    @property
    def codes(self) -> np.ndarray:
        """Read-only codes, one per row."""
        return self._codes

    def __len__(self) -> int:
        return self._codes.size

    def __reduce__(self) -> tuple:
        return (CodedStrings, (self._categories, self._codes))  # checked and frozen again on load

    def prefixed(self, prefix: str) -> CodedStrings:
        """Every row with ``prefix`` put before it: the categories prefixed, the codes kept."""
        return CodedStrings(tuple(prefix + c for c in self._categories), self._codes)

    def _take(self, lo: int, hi: int) -> list[str]:
        return self._lookup[self._codes[lo:hi]].tolist()

    def _utf8_chunks(self, size: int) -> Iterator[list[bytes]]:
        encoded = _encoded(self._categories)  # each category once
        for lo in range(0, len(self), size):
            yield encoded[self._codes[lo : lo + size]].tolist()


class JoinedStrings(StringColumn):
    """Strings as two coded parts: row ``i`` is ``heads[head_codes[i]] + tails[tail_codes[i]]``.

    Parameters
    ----------
    heads, tails : sequence of str
        The parts; they need not be distinct.
    head_codes, tail_codes : integer arrays of shape (n,)
        Each row's head and tail.
    """

    __slots__ = ("_head_codes", "_heads", "_tail_codes", "_tails")

    def __init__(
        self, heads: Sequence[str], head_codes: np.ndarray, tails: Sequence[str], tail_codes: np.ndarray
    ) -> None:
        self._heads, self._head_codes = _lookup(heads, head_codes, "head_codes")
        self._tails, self._tail_codes = _lookup(tails, tail_codes, "tail_codes")
        if self._head_codes.shape != self._tail_codes.shape:
            raise ValueError(f"{self._head_codes.size} head codes for {self._tail_codes.size} tail codes")

    @classmethod
    def from_chunks(cls, pieces: Iterable[Sequence[str]]) -> JoinedStrings:
        """The rows of ``pieces``, one after another: a joined piece's rows keep their heads
        and tails, any other row is a head with the empty tail. Equal parts are kept once,
        in the order they first come, and the codes renumbered (the parts of a ring's
        million labels, a few thousand, are looked up once a piece, not once a row)."""
        parts: tuple[dict[str, int], dict[str, int]] = ({}, {})
        codes: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        for piece in pieces:
            if isinstance(piece, JoinedStrings):
                given = zip(piece.parts, (piece._head_codes, piece._tail_codes), strict=True)
            else:
                rows = tuple(piece)
                given = zip((rows, ("",)), (np.arange(len(rows)), np.zeros(len(rows), dtype=np.int64)),
                            strict=True)
            for index, out, (values, piece_codes) in zip(parts, codes, given, strict=True):
                number = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64,
                                     count=len(values))
                out.append(number[piece_codes])
        heads, tails = (tuple(index) for index in parts)
        head_codes, tail_codes = (
            _narrow(np.concatenate(out) if out else np.empty(0, dtype=np.int64), len(index))
            for out, index in zip(codes, parts, strict=True)
        )
        head_codes.flags.writeable = tail_codes.flags.writeable = False  # fresh: the column's own
        return cls(heads, head_codes, tails, tail_codes)

    @property
    def parts(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The heads and the tails: every character of every row is in them (and, if some
        part is in no row, a few more)."""
        return tuple(self._heads.tolist()), tuple(self._tails.tolist())

    def __len__(self) -> int:
        return self._head_codes.size

    def utf8_size(self) -> int:
        """Bytes of every row's UTF-8 encoding."""
        heads, tails = (np.fromiter((len(v.encode("utf-8")) for v in part), dtype=np.int64,
                                    count=len(part)) for part in self.parts)
        return int(heads[self._head_codes].sum() + tails[self._tail_codes].sum())

    def distinct_codes(self) -> np.ndarray | None:
        """One int64 per row, equal for two rows exactly when their strings are; None when
        some head is a proper prefix of another (a row's string might then be cut into a head
        and a tail in two ways: ``"a." + "b.c"`` and ``"a.b." + "c"``).

        Notes
        -----
        Heads sorted, a head that is a proper prefix of another is also one of the next
        distinct head (every string between the two starts with it), so one pass over the
        sorted heads decides it; rows are then equal exactly when their heads and their
        tails are.
        """
        heads, tails = self.parts
        ordered = sorted(set(heads))
        if any(b.startswith(a) for a, b in itertools.pairwise(ordered)):
            return None
        head = coded(heads)[1].astype(np.int64)[self._head_codes]
        return head * len(tails) + coded(tails)[1].astype(np.int64)[self._tail_codes]

    def __reduce__(self) -> tuple:
        heads, tails = self.parts
        return (JoinedStrings, (heads, self._head_codes, tails, self._tail_codes))  # checked again on load

    def prefixed(self, prefix: str) -> JoinedStrings:
        """Every row with ``prefix`` put before it: the heads prefixed, the codes kept."""
        heads, tails = self.parts
        return JoinedStrings(tuple(prefix + h for h in heads), self._head_codes, tails, self._tail_codes)

    def _take(self, lo: int, hi: int) -> list[str]:
        heads = self._heads[self._head_codes[lo:hi]].tolist()
        return list(map(operator.add, heads, self._tails[self._tail_codes[lo:hi]].tolist()))

    def _utf8_chunks(self, size: int) -> Iterator[list[bytes]]:
        heads, tails = (_encoded(part) for part in self.parts)  # each part once
        for lo in range(0, len(self), size):
            yield list(map(operator.add, heads[self._head_codes[lo : lo + size]].tolist(),
                           tails[self._tail_codes[lo : lo + size]].tolist()))


def _encoded(values: Iterable[str]) -> np.ndarray:
    """``values`` as a 1-D object array of their UTF-8 encodings, to index with codes."""
    return np.array([*(value.encode("utf-8") for value in values), b""], dtype=object)[:-1]


def _lookup(values: Sequence[str], codes: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as an object array to index with ``codes``, and ``codes`` read-only, checked
    to be 1-D integers within ``values``."""
    codes = np.asarray(codes)
    if codes.ndim != 1 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"{what} must be a 1-D integer array")
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= len(values)):
        raise ValueError(f"{what} must lie in 0 .. {len(values) - 1}")
    if codes.flags.writeable:
        codes = codes.copy()
        codes.flags.writeable = False
    return np.array((*values, ""), dtype=object)[:-1], codes  # 1-D even for one tuple


def _narrow(codes: np.ndarray, n_categories: int) -> np.ndarray:
    """``codes`` in the narrowest integer type that holds codes of ``n_categories``."""
    dtype = np.int8 if n_categories <= 127 else np.int16 if n_categories <= 32767 else np.int32
    return codes.astype(dtype)


def chunks(values: Iterable[str], size: int = _CHUNK) -> Iterator[Sequence[str]]:
    """``values`` in pieces of at most ``size``: slices of a sequence, else batches (work on
    millions of strings a piece at a time, never all of them as one string or list)."""
    if isinstance(values, Sequence):
        for lo in range(0, len(values), size):
            yield values[lo : lo + size]
        return
    iterator = iter(values)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def prefixed(values: Sequence[str], prefix: str) -> Sequence[str]:
    """``values`` with ``prefix`` put before each: a compact column stays one of its kind
    (:meth:`PackedStrings.prefixed` and the others), anything else becomes a tuple."""
    if isinstance(values, (PackedStrings, CodedStrings, JoinedStrings)):
        return values.prefixed(prefix)
    return tuple(prefix + value for value in values)


def utf8_chunks(values: Sequence[str], size: int = _CHUNK) -> Iterator[list[bytes]]:
    """``values`` UTF-8 encoded, in lists of at most ``size``: a compact column encodes each
    of its distinct parts once (a :class:`JoinedStrings` its heads and tails, a
    :class:`CodedStrings` its categories) and a :class:`PackedStrings` slices its buffer,
    so no row is decoded to be encoded again. A lone surrogate raises
    :class:`UnicodeEncodeError`, as writing the ``str`` would."""
    if isinstance(values, StringColumn):
        yield from values._utf8_chunks(size)
        return
    for chunk in chunks(values, size):
        yield [value.encode("utf-8") for value in chunk]


def utf8_size(values: Sequence[str]) -> int:
    """Bytes of every value's UTF-8 encoding: a :class:`JoinedStrings`' from its parts' and
    codes, else chunk by chunk (never all of the strings as one)."""
    if isinstance(values, JoinedStrings):
        return values.utf8_size()
    return sum(len("".join(chunk).encode("utf-8")) for chunk in chunks(values))


def _first_repeated_code(codes: np.ndarray) -> tuple[int, int] | None:
    """:func:`first_duplicate` of rows that are equal exactly when their ``codes`` are."""
    uniques, firsts = np.unique(codes, return_index=True)
    if uniques.size == codes.size:
        return None
    repeats = np.ones(codes.size, dtype=bool)
    repeats[firsts] = False
    row = int(np.argmax(repeats))
    return int(firsts[np.searchsorted(uniques, codes[row])]), row


def coded(values: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """``values`` as their distinct values and a code per row (``values[i] ==
    categories[codes[i]]``): a :class:`CodedStrings`' own, else coded in the order values first
    appear. Work per distinct value (a tag's few among millions of flows) then takes NumPy
    indexing instead of a dict lookup per row."""
    column = values if isinstance(values, CodedStrings) else CodedStrings.from_strings(values)
    return column.categories, column.codes


def first_duplicate(values: Sequence[str]) -> tuple[int, int] | None:
    """The first row that repeats an earlier one, as ``(earlier, row)``, or None.

    Rows are compared by hash first, chunk by chunk, so a compact column is never held as
    Python strings all at once; only rows whose hashes meet are compared as strings.
    """
    n = len(values)
    if isinstance(values, CodedStrings):
        return _first_repeated_code(np.asarray(values.codes))
    if isinstance(values, JoinedStrings):
        codes = values.distinct_codes()
        if codes is not None:
            return _first_repeated_code(codes)
    hashes = np.empty(n, dtype=np.int64)
    lo = 0
    for chunk in chunks(values):
        hashes[lo : lo + len(chunk)] = np.fromiter(map(hash, chunk), dtype=np.int64, count=len(chunk))
        lo += len(chunk)
    ordered = np.sort(hashes)
    met = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    if met.size == 0:
        return None
    suspects = np.flatnonzero(np.isin(hashes, met))
    seen: dict[str, int] = {}
    for i in suspects.tolist():
        value = values[i]
        if value in seen:
            return seen[value], i
        seen[value] = i
    return None
