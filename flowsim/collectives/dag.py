"""Building blocks of the collectives' flow DAGs: the message collector, argument checks,
rings, chains and trees.

Channels and slices
-------------------
``channels`` splits the data over independent copies of the algorithm (NCCL's channels;
each channel may use its own ring order, see :func:`rotated_rings` and :func:`mesh_rings`). ``slices`` cuts each
channel's message of every step into pieces sent one after another, so that step ``s + 1``
of slice ``k`` can start while step ``s`` of slice ``k + 1`` is still on its way: the
pipelining of NCCL's ``NCCL_STEPS`` slots. Placed by
:func:`~flowsim.collectives.collective_workload` with NCCL's choice, a message is cut into
the pieces one of NCCL's channels moves it in (:mod:`flowsim.collectives.chunks`: its chunks
per loop and slices per chunk). Built directly, a message is cut into NCCL's Simple slot
size (:data:`NCCL_SLOT_BYTES`). Either way at most :data:`MAX_RING_SLICES` pieces in a ring (where
every link is busy at every step anyway, so slices add flows but little overlap) and
:data:`MAX_PIPELINE_SLICES` in chains, trees and NVLS (where slicing is what keeps the hops
busy: a chain of ``h`` hops cut into ``k`` slices takes ``(h + k - 1) / k`` times one hop's
transfer).

Steps and streams
-----------------
A ring's step DAG has ``channels x steps x n x slices`` messages: about 2n^2 per channel for
an all-reduce, 134 million at 8,192 ranks with one channel and one slice, far more than a
flow-level model can hold. ``model="stream"`` lays each channel's ring out as one flow per
hop instead, carrying every chunk that crosses the hop (``steps x S / (n x channels)``
bytes), all hops at once: the ring's steady state, where every hop streams slices as fast
as its share of the links allows, so that the slowest hop sets the time as it does in the
step DAG. What the stream drops is the step structure: a hop's rate does not wait on the
hop before it. Latency is kept as in the step DAG, where a hop starts sending after one
step latency but its last chunk arrives no sooner than the chain of forwarded chunks it
closes: each hop's flow pays the base and its own step latency, and a zero-byte flow
beside it pays the base and the whole chain, so the hop is done at the later of the two.
The chain pays, for each of its ``steps`` hops, the step latency and the transfer of the
hop's first slice at the messages' cap (a lane's share of NCCL's model bandwidth), where
there is one: a step of one slice takes both, one after the other. Where the links alone
set a hop's rate, the chain charges the latency alone. Route latencies: the engine adds
each flow's own; the chain's other switch hops, 0.1-0.5 us each against NCCL's 3.4-14 us
per step, are not charged. ``model="auto"`` (the
default) keeps the step DAG up to :data:`STEP_MESSAGE_LIMIT` messages and streams above it.
A ring of more than :data:`CLASS_LAYOUT_FROM` pieces whose caller finds classes of its hops
(:class:`HopSymmetry`; :mod:`flowsim.collectives.symmetry`) is laid out by them instead, if
that takes at most :data:`STEP_MESSAGE_LIMIT`: one message per class, step and slice, solved
as the full step DAG's quotient, with its times.
The workload's ``model`` tag says which layout was built. NVLSTree streams as rings do
(:func:`~flowsim.collectives.builders.nvls_tree_all_reduce`: each message of a chunk once,
with all its slices, starting when the first slice reaches it), and so do Simple trees
and chains (:func:`_tree_all_reduce`, :func:`_chain`: each hop once, streamed as LL's
hops are). Algorithms without a stream form (NVLS inside one server, PAT, point-to-point)
take ``model="auto"`` or ``"steps"``: above the limit, ``"auto"`` refuses with the message
count before building anything, and ``"steps"`` builds regardless.

"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from flowsim.collectives.chunks import NCCL_BUFFER_BYTES, NCCL_STEPS
from flowsim.collectives.costs import CollectiveCosts, nccl_costs
from flowsim.errors import InputError, is_real, whole_number
from flowsim.formatting import format_bytes
from flowsim.strings import CodedStrings, JoinedStrings, PackedStrings, StringColumn
from flowsim.workload import Workload

#: NCCL's Simple-protocol slot: ``DEFAULT_BUFFSIZE`` (4 MiB) over ``NCCL_STEPS`` (8)
#: ([NCCL] device.h, docs/hardware.md §7.1).
NCCL_SLOT_BYTES = NCCL_BUFFER_BYTES["simple"] // NCCL_STEPS

#: Most slices the default slicing cuts a ring step's message into.
MAX_RING_SLICES = 4

#: Most slices the default slicing cuts a chain's, tree's or NVLS message into.
MAX_PIPELINE_SLICES = 64

#: Layouts of ring algorithms (see "Steps and streams"): one message per step, one flow per
#: hop, or the step DAG up to :data:`STEP_MESSAGE_LIMIT` messages and the stream above.
MODELS = ("auto", "steps", "stream")
#: Most messages ``model="auto"`` lays out as a step DAG: about a minute of simulation and
#: a few GB of memory; the 1,024-GPU one-channel ring all-reduce (2.1 million) stays in it.
STEP_MESSAGE_LIMIT = 4_000_000
#: Memory one message of a step DAG takes at a run's peak, laid out, routed and solved:
#: ring all-reduces of 2.1 and 8.4 million messages (32 and 64 DGX H100, 1 GiB, LL128 on 16
#: channels) peaked at 549 and 1,518 MB, 154 bytes a message apart (2-core AMD EPYC VM,
#: 2026-12-05). A step DAG that would take more than the machine's memory is refused.
STEP_MESSAGE_BYTES = 150
#: Memory one flow of a ring laid out by classes of hops takes at a run's peak (every flow is
#: solved, none grouped again): 8.4 and 1.05 million flows (a ring all-reduce of 1 GiB, LL128
#: on 16 channels, over 1,024 and 128 DGX H100) peaked 2,176 and 281 MB above the 290 and 201
#: MB of the same runs streamed, 259-268 bytes a flow (2-core AMD EPYC VM, 2026-12-06; 281-295
#: while the messages were routed a second time for the run's routes), rounded up.
CLASS_FLOW_BYTES = 300
#: Rings of more pieces than this are laid out by classes of hops where a caller asks for
#: them (:class:`HopSymmetry`) and finds few: the 1,024-GPU ring all-reduce of 1 GiB with one
#: channel (2.1 million pieces) took 0.68 s so against 2.51 s for its full step DAG by flow
#: classes, 256 DGX H100 GPUs' (2.1 million) 0.16 s against 1.06 s, the same times; small
#: rings keep their full DAG, every message in the run's workload.
CLASS_LAYOUT_FROM = 100_000

Ranks = Sequence[str]
Servers = Mapping[str, Hashable] | None
#: Each rank's rail (the NIC it leaves its server through, numbered alike on every server).
Rails = Mapping[str, Hashable] | None


@dataclass
class _Block:
    """Messages of a :class:`_FlowDag` frozen into columns, in the order they were added;
    ``dep_counts[i]`` of ``dep_indices`` (flow indices) are message ``i``'s dependencies.
    String columns are lists or compact columns (:mod:`flowsim.strings`).
    :meth:`_FlowDag.workload` empties each column once it has joined them."""

    labels: Sequence[str]
    src: Sequence[str]
    dst: Sequence[str]
    size: np.ndarray
    overhead: np.ndarray
    cap: np.ndarray
    dep_counts: np.ndarray
    dep_indices: np.ndarray
    step: Sequence[str]
    channel: Sequence[str]

    @classmethod
    def of_messages(
        cls, labels: Sequence[str], src: Sequence[str], dst: Sequence[str], size: Sequence[float],
        overhead: Sequence[float], cap: Sequence[float], deps: Sequence[Sequence[int]], step: Sequence[str],
        channel: Sequence[str],
    ) -> _Block:
        """The block of messages given one item each (``deps``: each one's dependencies)."""
        return cls(
            labels, src, dst, np.array(size, dtype=np.float64), np.array(overhead, dtype=np.float64),
            np.array(cap, dtype=np.float64), np.fromiter(map(len, deps), dtype=np.int64, count=len(deps)),
            np.fromiter(itertools.chain.from_iterable(deps), dtype=np.int64), step, channel,
        )


class _FlowDag:
    """Collects the messages of one collective, then freezes them into a Workload.

    Messages come one by one (:meth:`add`, :meth:`after`, :meth:`extend`, kept in lists) or
    a channel's millions at once as NumPy columns (:meth:`extend_block`); the lists become a
    :class:`_Block` whenever a block follows them, so flow indices stay in the order added.
    """

    def __init__(
        self, name: str, costs: CollectiveCosts, servers: Servers, model: str = "steps", rails: Rails = None
    ) -> None:
        self.name = name
        self.costs = costs
        self.servers = _check_servers(servers, name)
        self.model = model
        self.rails = rails
        self._on_rail: dict[tuple[Hashable, Hashable], str] = {}
        if rails is not None:
            if not isinstance(rails, Mapping):
                raise InputError(
                    f"{name}: rails must map each rank name to its rail (a dict), got {type(rails).__name__}"
                )
            if self.servers is not None:
                for rank, rail in rails.items():
                    self._on_rail.setdefault((self._server(self.servers, rank), rail), rank)
        self.labels: list[str] = []
        self.src: list[str] = []
        self.dst: list[str] = []
        self.size: list[float] = []
        self.deps: list[list[int]] = []
        self.overhead: list[float] = []
        self.step: list[str] = []
        self.channel: list[str] = []
        self.cap: list[float] = []
        self.blocks: list[_Block] = []
        self._in_blocks = 0
        self._crosses: dict[tuple[str, str], bool] = {}

    def __len__(self) -> int:
        return self._in_blocks + len(self.labels)

    def _server(self, servers: Mapping[str, Hashable], rank: str) -> Hashable:
        try:
            return servers[rank]
        except KeyError:
            raise InputError(f"collective {self.name!r}: rank {rank!r} has no server in `servers`") from None

    def crosses_servers(self, src: str, dst: str) -> bool:
        """Whether a message from ``src`` to ``dst`` leaves its server (asked once per pair:
        builders ask it for every message)."""
        crosses = self._crosses.get((src, dst))
        if crosses is None:
            servers = self.servers
            crosses = servers is not None and self._server(servers, src) != self._server(servers, dst)
            self._crosses[src, dst] = crosses
        return crosses

    def proxy(self, src: str, dst: str) -> str | None:
        """The rank a ring hop from ``src`` to ``dst`` leaves its server through, where that
        is not ``src``: the rank of ``src``'s server on ``dst``'s rail. NCCL lays a ring out as
        ``NET n -> GPU a -> ... -> GPU x -> NET n`` ([NCCL] src/graph/search.cc, crossNic 0
        tried first; docs/hardware.md §7.4), leaving through the NIC it came in by, on one rail; GPU x hands its data
        to that NIC over PCIe or through the NIC's own GPU (PXN). flowsim sends the hop from
        that GPU and does not charge the hand-over: it takes PCIe where GPU x shares the NIC's
        switch, and NVLink has room for it beside a ring held to the NICs (the effective NVLink
        rate, NCCL's ring constant, would bind it falsely). None inside a server, without
        ``rails``, when ``src`` is on ``dst``'s rail or its server has no rank there."""
        if self.rails is None or self.servers is None or not self.crosses_servers(src, dst):
            return None
        try:
            rail = self.rails[dst]
            if self.rails[src] == rail:
                return None
        except KeyError as err:
            raise InputError(f"collective {self.name!r}: rank {err.args[0]!r} has no rail in `rails`") from None
        return self._on_rail.get((self._server(self.servers, src), rail))

    def step_latency(self, src: str, dst: str) -> float:
        """The per-step latency of a message from ``src`` to ``dst``: inter- or intra-server."""
        return self.costs.inter_step_s if self.crosses_servers(src, dst) else self.costs.intra_step_s

    def wire_efficiency(self, src: str, dst: str) -> float:
        """The payload fraction of a message's bytes on the wire from ``src`` to ``dst``: the
        costs' ``intra_wire_efficiency`` inside a server where set, else their ``wire_efficiency``."""
        if self.costs.intra_wire_efficiency is not None and not self.crosses_servers(src, dst):
            return self.costs.intra_wire_efficiency
        return self.costs.wire_efficiency

    def ring_latency_overlaps(self, src: str, dst: str) -> bool:
        """Whether a ring hop's step latency runs in the shadow of the messages before it:
        across servers (NCCL's proxy keeps ``NCCL_STEPS`` sends in flight) and with LL and
        LL128 (posted line by line); with Simple inside a server the sending CTA waits,
        copies and posts each slice, so it pays the latency after the hop's previous message."""
        return self.costs.streams or self.crosses_servers(src, dst)

    def after(
        self,
        label: str,
        src: str,
        dst: str,
        payload_bytes: float,
        deps: list[int],
        previous: int,
        step: int | str,
        channel: int,
        *,
        overlaps: bool,
        step_latency_s: float | None = None,
        wire_efficiency: float | None = None,
        cap_Bps: float = math.inf,
    ) -> int:
        """Add a message that follows ``previous`` on its connection and waits for ``deps``.
        With ``overlaps`` its step latency runs from when ``deps`` are done, in the shadow of
        ``previous``: a zero-byte message ``label.due`` at the sender (a software cost, it
        crosses no link) pays it; else the message pays it once both are done.
        ``step_latency_s``, ``wire_efficiency`` and ``cap_Bps`` as :meth:`add`."""
        if overlaps:
            latency = self.step_latency(src, dst) if step_latency_s is None else step_latency_s
            deps = [self.add(f"{label}.due", src, src, 0.0, deps, step, channel, step_latency_s=latency)]
            step_latency_s = 0.0
        return self.add(label, src, dst, payload_bytes, [*deps, previous], step, channel, step_latency_s,
                        wire_efficiency, cap_Bps)

    def add(
        self,
        label: str,
        src: str,
        dst: str,
        payload_bytes: float,
        deps: list[int],
        step: int | str,
        channel: int,
        step_latency_s: float | None = None,
        wire_efficiency: float | None = None,
        cap_Bps: float = math.inf,
    ) -> int:
        """Add one message; returns its flow index. It pays ``step_latency_s`` (default: its
        own hop's step latency), and the base latency if it waits for nothing; its bytes on
        the wire are the payload over ``wire_efficiency`` (default the costs', their
        ``intra_wire_efficiency`` where set and the message stays in its server), at a rate of
        at most ``cap_Bps`` on the wire."""
        overhead = self.step_latency(src, dst) if step_latency_s is None else step_latency_s
        if not deps:
            overhead += self.costs.base_s
        self.labels.append(f"{self.name}.{label}")
        self.src.append(src)
        self.dst.append(dst)
        efficiency = self.wire_efficiency(src, dst) if wire_efficiency is None else wire_efficiency
        self.size.append(payload_bytes / efficiency)
        self.cap.append(cap_Bps)
        self.deps.append(deps)
        self.overhead.append(overhead)
        self.step.append(str(step))
        self.channel.append(str(channel))
        return len(self) - 1

    def extend(
        self, labels: list[str], src: list[str], dst: list[str], size: list[float], deps: list[list[int]],
        overhead: list[float], step: list[str], channel: str,
    ) -> None:
        """Append messages laid out in bulk, as :meth:`add` would one by one: ``labels`` in
        full (the collective's name first), sizes on the wire, overheads with every latency
        counted, no rate cap."""
        self.labels += labels
        self.src += src
        self.dst += dst
        self.size += size
        self.deps += deps
        self.overhead += overhead
        self.step += step
        self.channel += [channel] * len(labels)
        self.cap += [math.inf] * len(labels)

    def extend_block(self, block: _Block) -> None:
        """Append messages laid out as columns (labels in full, sizes on the wire,
        overheads with every latency counted), after those added so far."""
        self._flush()
        self.blocks.append(block)
        self._in_blocks += len(block.labels)

    def repeat_last(self, unit: int, copies: int, head: str, number: int) -> bool:
        """Append ``copies`` copies of the last ``unit`` messages, where these continue a
        pattern: the ``unit`` messages before them are the same, moved ``unit`` on.

        Every label of the last unit reads ``head + str(number) + rest`` (the previous unit's
        ``head + str(number - 1) + rest``); copy ``i`` is numbered ``number + i``, its
        dependencies into the last two units moved ``i x unit`` on, earlier ones kept. Both
        units must have been added one by one (not in a block). Returns False, adding
        nothing, when the last unit is not its predecessor moved on (the caller goes on
        message by message).
        """
        end = len(self.labels)
        if copies < 1 or end < 2 * unit:
            return False
        base = len(self) - unit
        last, previous = slice(end - unit, end), slice(end - 2 * unit, end - unit)
        own = head + str(number)
        before = head + str(number - 1)
        rests = []
        for label, earlier in zip(self.labels[last], self.labels[previous], strict=True):
            if not (label.startswith(own) and earlier.startswith(before)) or label[len(own):] != earlier[len(before):]:
                return False
            rests.append(label[len(own):])
        for column in (self.src, self.dst, self.size, self.overhead, self.cap, self.step, self.channel):
            if column[last] != column[previous]:
                return False
        for deps, earlier_deps in zip(self.deps[last], self.deps[previous], strict=True):
            if deps != [d + unit if d >= base - 2 * unit else d for d in earlier_deps]:
                return False
        counts = np.fromiter(map(len, self.deps[last]), dtype=np.int64, count=unit)
        flat = np.fromiter(itertools.chain.from_iterable(self.deps[last]), dtype=np.int64)
        moves = (flat >= base - unit).astype(np.int64)
        shift = np.repeat(np.arange(1, copies + 1, dtype=np.int64) * unit, flat.size)
        self.extend_block(_Block(
            labels=[head + str(number + i) + rest for i in range(1, copies + 1) for rest in rests],
            src=self.src[last] * copies,
            dst=self.dst[last] * copies,
            size=np.tile(np.array(self.size[last], dtype=np.float64), copies),
            overhead=np.tile(np.array(self.overhead[last], dtype=np.float64), copies),
            cap=np.tile(np.array(self.cap[last], dtype=np.float64), copies),
            dep_counts=np.tile(counts, copies),
            dep_indices=np.tile(flat, copies) + shift * np.tile(moves, copies),
            step=self.step[last] * copies,
            channel=self.channel[last] * copies,
        ))
        return True

    def _flush(self) -> None:
        """The messages added one by one so far, as a block."""
        if not self.labels:
            return
        block = _Block.of_messages(
            self.labels, self.src, self.dst, self.size, self.overhead, self.cap, self.deps, self.step, self.channel
        )
        self.labels, self.src, self.dst, self.size, self.deps = [], [], [], [], []
        self.overhead, self.step, self.channel, self.cap = [], [], [], []
        self.blocks.append(block)
        self._in_blocks += len(block.labels)

    def workload(self, collective: str) -> Workload:
        """The messages as a :class:`Workload` tagged ``collective``; the collector is empty
        afterwards (its columns move into the workload)."""
        self._flush()
        blocks, self.blocks = self.blocks, []
        n = len(self)
        self._in_blocks = 0

        # Each column of every block goes as soon as it is joined: a ring of a million
        # messages would otherwise hold its columns twice (about 200 MB on 16 servers).
        def joined(column: str, packed: type[PackedStrings] | type[CodedStrings]) -> StringColumn:
            return packed.from_chunks(_emptied(blocks, column))

        # A ring's labels stay joined, a few thousand heads and tails coded per message;
        # others are packed.
        joined_labels = bool(blocks) and all(isinstance(b.labels, JoinedStrings) for b in blocks)

        def stacked(column: str, dtype: type) -> np.ndarray:
            values: np.ndarray = np.empty(0, dtype=dtype)
            if blocks:
                values = np.concatenate([getattr(b, column) for b in blocks]).astype(dtype, copy=False)
            for b in blocks:
                setattr(b, column, np.empty(0, dtype=dtype))
            values.flags.writeable = False  # frozen: the workload takes it without a copy
            return values

        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(stacked("dep_counts", np.int64), out=indptr[1:])
        indptr.flags.writeable = False
        return Workload.build(
            JoinedStrings.from_chunks(_emptied(blocks, "labels")) if joined_labels else joined("labels", PackedStrings),
            joined("src", CodedStrings),
            joined("dst", CodedStrings),
            stacked("size", np.float64),
            dependency_csr=(indptr, stacked("dep_indices", np.int64)),
            overhead_s=stacked("overhead", np.float64),
            cap_Bps=stacked("cap", np.float64),
            tags={
                "collective": CodedStrings.constant(collective, n),
                "model": CodedStrings.constant(self.model, n),
                "step": joined("step", CodedStrings),
                "channel": joined("channel", CodedStrings),
            },
        )


def _emptied(blocks: list[_Block], column: str) -> Iterator[Sequence[str]]:
    """``column`` of every block in order, each block's column let go once read."""
    for b in blocks:
        values = getattr(b, column)
        setattr(b, column, ())
        yield values


# --- argument checks -----------------------------------------------------------------------


def _check_ranks(ranks: Ranks, what: str, minimum: int = 2) -> tuple[str, ...]:
    if isinstance(ranks, str):
        raise InputError(f"{what}: ranks must be a sequence of node names, got the string {ranks!r}")
    if not isinstance(ranks, (Sequence, np.ndarray)):
        raise InputError(f"{what}: ranks must be a sequence of node names, got {ranks!r}")
    ranks = tuple(ranks)
    for r in ranks:
        if not isinstance(r, str):
            raise InputError(f"{what}: ranks are node names, got {r!r}")
    if len(ranks) < minimum:
        raise InputError(f"{what} needs at least {minimum} ranks, got {len(ranks)}")
    if len(set(ranks)) != len(ranks):
        seen: set[str] = set()
        for r in ranks:
            if r in seen:
                raise InputError(f"{what}: rank {r!r} appears twice")
            seen.add(r)
    return ranks


def check_size(size_bytes: float, what: str) -> float:
    """``size_bytes`` as a float, refused (naming ``what``) unless a finite number >= 0 (not
    a bool, which float() takes as 1 byte, nor a string of digits)."""
    if not is_real(size_bytes):
        raise InputError(f"{what}: size_bytes must be a number, got {size_bytes!r}")
    size = float(size_bytes)
    if not (math.isfinite(size) and size >= 0):
        raise InputError(f"{what}: size_bytes is {size_bytes!r}; it must be finite and >= 0")
    return size


def _check_caps(what: str, **caps: float) -> None:
    """An :class:`InputError` naming the first of ``caps`` (rates, B/s) that is not > 0 (inf
    for none)."""
    for name, value in caps.items():
        if not value > 0:
            raise InputError(f"{what}: {name} must be > 0, got {value!r}")


def _check_orders(
    orders: Sequence[Ranks] | None, ranks: tuple[str, ...], channels: int, what: str
) -> list[tuple[str, ...]]:
    if orders is None:
        return [ranks] * channels
    checked = [tuple(o) for o in orders]
    if len(checked) != channels:
        raise InputError(f"{what}: {len(checked)} ring orders for {channels} channels")
    members = set(ranks)
    for c, order in enumerate(checked):
        if len(order) != len(ranks) or set(order) != members:
            raise InputError(f"{what}: ring order of channel {c} is not a permutation of the ranks")
    return checked


def _slices(slices: int | None, piece_bytes: float, what: str, most: int, slot_bytes: int = 0) -> int:
    """The slice count asked for, or pieces of ``slot_bytes`` (default NCCL's Simple slot,
    :data:`NCCL_SLOT_BYTES`), at most ``most``."""
    if slices is not None:
        return whole_number(f"{what}: slices", slices)
    return int(min(most, max(1, math.ceil(piece_bytes / (slot_bytes or NCCL_SLOT_BYTES)))))


# --- ring, chain and tree building blocks ----------------------------------------------------


@dataclass(frozen=True)
class RingHops:
    """Every hop of a ring's channels: what its step DAG repeats at every step and slice.

    Hop ``h`` is channel ``lane[h]``'s hop from ``src[h]`` (position ``position[h]`` of the
    ranks) to ``dst[h]``, its pieces sent by ``sender[h]`` (``src[h]``, or across servers the
    rank on the receiver's rail, :meth:`_FlowDag.proxy`); it forwards what hop
    ``forwards[h]`` (the one before it on its ring) delivered. ``latency[h]``: its step
    latency; ``due[h]``: whether it pays that in a zero-byte ``.due`` message in the shadow
    of its previous piece (:meth:`_FlowDag.ring_latency_overlaps`); ``caps[h]``: the rate
    caps of its ``.due`` messages and of its pieces; every piece carries ``payload`` bytes
    on the wire.
    """

    lane: np.ndarray
    position: np.ndarray
    src: list[str]
    dst: list[str]
    sender: list[str]
    forwards: np.ndarray
    latency: np.ndarray
    due: np.ndarray
    caps: np.ndarray
    payload: float

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class HopClasses:
    """Classes of a ring's hops whose messages share rates at every instant, step by step
    (docs/model.md "Flow classes"): hop ``representative[k]`` stands for the ``size[k]``
    hops of class ``k``, all forwarding from hops of class ``forwards[k]``."""

    representative: np.ndarray
    forwards: np.ndarray
    size: np.ndarray


class HopSymmetry(Protocol):
    """What a ring builder asks for the classes of its hops (:class:`HopClasses`), and tells
    what it laid out by them; see :func:`_ring_collective`."""

    def classes(self, hops: RingHops, most: int | None) -> HopClasses | None:
        """Classes of ``hops``; None where there are none worth laying out by, or more than
        ``most`` (where given)."""
        ...

    def laid_out(self, message_class: np.ndarray, piece: np.ndarray) -> None:
        """The ring was laid out by the classes last given: its message ``i`` is one of class
        ``message_class[i]``'s, a piece over the hop (``piece[i]``) or its ``.due`` message
        at the sender."""
        ...


def _ring_hops(
    dag: _FlowDag, orders: Sequence[tuple[str, ...]], chunk_bytes: float, slices: int, cap_Bps: float,
    net_cap_Bps: float,
) -> RingHops:
    """The hops of every channel of :func:`_ring`, channel by channel."""
    rank_index = {r: i for i, r in enumerate(orders[0])}
    n = len(orders[0])
    costs = dag.costs
    src = [r for order in orders for r in order]
    dst = [order[(p + 1) % n] for order in orders for p in range(n)]
    crosses = np.array([dag.crosses_servers(a, b) for a, b in zip(src, dst, strict=True)], dtype=bool)
    # Each hop's pieces at most at the caps; its .due messages stay at the sender.
    caps = np.stack([np.full(crosses.size, cap_Bps), np.where(crosses, min(cap_Bps, net_cap_Bps), cap_Bps)], axis=1)
    before = np.roll(np.arange(n, dtype=np.int64), 1)  # each position's predecessor on its ring
    return RingHops(
        lane=np.repeat(np.arange(len(orders), dtype=np.int64), n),
        position=np.array([rank_index[r] for r in src], dtype=np.int64),
        src=src,
        dst=dst,
        # A hop between servers leaves through the rank on the receiver's rail (NCCL's PXN).
        sender=[dag.proxy(a, b) or a for a, b in zip(src, dst, strict=True)],
        forwards=(np.arange(len(orders), dtype=np.int64)[:, None] * n + before[None, :]).reshape(-1),
        latency=np.where(crosses, costs.inter_step_s, costs.intra_step_s),
        due=crosses | costs.streams,
        caps=caps,
        payload=chunk_bytes / slices / costs.wire_efficiency,
    )


def _ring(
    dag: _FlowDag,
    orders: Sequence[tuple[str, ...]],
    chunk_bytes: float,
    n_steps: int,
    slices: int,
    ready: Mapping[str, list[int]],
    phase: str,
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
) -> dict[str, list[int]]:
    """Ring steps on every channel; returns, per rank, the messages it receives last.

    ``ready[rank]``: messages that must have arrived before ``rank`` sends its first step.

    On channel ``c``, step ``s``, slice ``k`` rank ``p`` of the order sends a piece to rank
    ``p + 1`` once it has received slice ``k`` of step ``s - 1`` (``ready`` before step 0).
    One connection per hop, a FIFO of slots: a message follows the hop's previous one (slice
    ``k - 1``, or the last slice of step ``s - 1``), paying its step latency as
    :meth:`_FlowDag.ring_latency_overlaps` says, in the shadow of the previous one through a
    zero-byte ``.due`` message, or after it. Messages are numbered step by step, rank by
    rank, slice by slice, each ``.due`` message just before its own; the index arithmetic
    of :func:`_ring_steps` lays out the channel's millions of messages at once. Every message
    is capped at ``cap_Bps``, and between servers at ``net_cap_Bps`` too.
    """
    hops = _ring_hops(dag, orders, chunk_bytes, slices, cap_Bps, net_cap_Bps)
    n = len(orders[0])
    done: dict[str, list[int]] = {r: [] for r in orders[0]}
    for c in range(len(orders)):
        chosen = np.arange(c * n, (c + 1) * n, dtype=np.int64)
        message, _ = _ring_steps(dag, hops, chosen, hops.forwards[chosen] - c * n, n_steps, slices, ready, phase)
        last = message[n_steps - 1]
        for p, h in enumerate(chosen.tolist()):
            done[hops.dst[h]].extend(last[p].tolist())
    return done


def _ring_classes(
    dag: _FlowDag, hops: RingHops, classes: HopClasses, n_steps: int, slices: int, phase: str
) -> tuple[np.ndarray, np.ndarray]:
    """The quotient of :func:`_ring`'s step DAG by hop classes: the messages of each class's
    first hop alone, each forwarding its class's ``forwards`` class's message. Every
    message stands for those of its class's hops, which share its times and rates. Returns
    each message's class, and whether it is a piece (else a ``.due`` message)."""
    start = len(dag)
    message, due = _ring_steps(dag, hops, classes.representative, classes.forwards, n_steps, slices, {}, phase)
    of_piece = np.broadcast_to(np.arange(classes.size.size)[None, :, None], message.shape).reshape(-1)
    at = message.reshape(-1) - start
    has_due = due.reshape(-1)
    message_class = np.full(len(dag) - start, -1, dtype=np.int64)
    message_class[at] = of_piece
    message_class[at[has_due] - 1] = of_piece[has_due]  # a .due message just before its piece
    assert message_class.min() >= 0
    piece = np.zeros(message_class.size, dtype=bool)
    piece[at] = True
    return message_class, piece


def _ring_steps(
    dag: _FlowDag,
    hops: RingHops,
    chosen: np.ndarray,
    forwards: np.ndarray,
    n_steps: int,
    slices: int,
    ready: Mapping[str, list[int]],
    phase: str,
) -> tuple[np.ndarray, np.ndarray]:
    """The messages of hops ``chosen`` (of ``hops``) at every step and slice, hop ``chosen[i]``
    forwarding what ``chosen[forwards[i]]`` delivered; returns the ``[step, hop, slice]``
    indices of the pieces, and whether a ``.due`` message comes just before each."""
    n = chosen.size
    # Per (step, hop, slice) in the order messages are added: does a .due message come first?
    due = np.broadcast_to(hops.due[chosen][None, :, None], (n_steps, n, slices)).copy()
    due[0, :, 0] = False  # the first message of a hop follows nothing
    first = len(dag) + np.cumsum(1 + due, axis=None).reshape(due.shape) - 1 - due
    message = first + due
    previous = np.empty_like(message)
    previous[:, :, 1:] = message[:, :, :-1]
    previous[1:, :, 0] = message[:-1, :, -1]
    received = message[:, forwards, :]  # what each hop forwards, delivered the step before
    # A label is its channel's and step's head and its hop's and slice's tail
    # (flowsim.strings.JoinedStrings).
    lanes, lane_of = np.unique(hops.lane[chosen], return_inverse=True)
    heads = [f"{dag.name}.{phase}ch{c}.step{s}." for s in range(n_steps) for c in lanes.tolist()]
    channels = [str(c) for c in lanes.tolist()]
    tails = [f"r{p}.sl" for p in hops.position[chosen].tolist()]
    columns = _Hops(
        [hops.src[h] for h in chosen.tolist()], [hops.dst[h] for h in chosen.tolist()],
        [hops.sender[h] for h in chosen.tolist()], tails, lane_of, hops.latency[chosen], hops.caps[chosen],
    )
    dag.extend_block(_ring_first_step(
        dag, columns, heads[: lanes.size], channels, due[0], previous[0], ready, hops.payload
    ))
    if n_steps > 1:
        dag.extend_block(_ring_later_steps(
            columns, heads[lanes.size:], channels, due[1:], received[:-1], previous[1:], hops.payload,
            int(first[1, 0, 0]),
        ))
    return message, due


@dataclass(frozen=True)
class _Hops:
    """The columns of the hops :func:`_ring_steps` lays out: endpoints, senders, label tails,
    channel (an index into the layout's channels), step latency and caps (``[hop, 2]``: of
    the ``.due`` messages and of the pieces)."""

    src: list[str]
    dst: list[str]
    senders: list[str]
    tails: list[str]
    lane: np.ndarray
    latency: np.ndarray
    caps: np.ndarray


def _ring_first_step(
    dag: _FlowDag,
    hops: _Hops,
    heads: list[str],
    channels: list[str],
    due: np.ndarray,
    previous: np.ndarray,
    ready: Mapping[str, list[int]],
    payload: float,
) -> _Block:
    """Step 0 of :func:`_ring_steps` (``due``, ``previous``: its ``[hop, slice]`` planes),
    message by message: each hop's first slice waits for its sender's ``ready`` messages (or
    pays the base latency), the later slices follow it on the hop. A label is the hop's
    channel's head (``heads``, per channel) and its tail, followed by the slice (and
    ``.due``)."""
    costs = dag.costs
    labels: list[str] = []  # the tails
    deps: list[list[int]] = []
    overhead: list[float] = []
    sizes: list[float] = []
    from_: list[str] = []
    receivers: list[str] = []
    rate_caps: list[float] = []
    lane: list[int] = []
    for p, hop in enumerate(hops.tails):
        src, dst, sender = hops.src[p], hops.dst[p], hops.senders[p]
        before = list(ready.get(src, ()))
        hop_latency = float(hops.latency[p])
        due_cap, piece_cap = hops.caps[p].tolist()
        added = len(labels)
        for k in range(due.shape[1]):
            label = hop + str(k)
            if k == 0:
                labels.append(label)
                deps.append(before)
                overhead.append(hop_latency if before else hop_latency + costs.base_s)
                sizes.append(payload)
                from_.append(sender)
                receivers.append(dst)
                rate_caps.append(piece_cap)
            elif due[p, k]:
                labels += (label + ".due", label)
                deps += (before, [len(dag) + len(labels) - 2, int(previous[p, k])])
                overhead += (hop_latency if before else hop_latency + costs.base_s, 0.0)
                sizes += (0.0, payload)
                from_ += (src, sender)
                receivers += (src, dst)
                rate_caps += (due_cap, piece_cap)
            else:
                labels.append(label)
                deps.append([*before, int(previous[p, k])])
                overhead.append(hop_latency)
                sizes.append(payload)
                from_.append(sender)
                receivers.append(dst)
                rate_caps.append(piece_cap)
        lane += [int(hops.lane[p])] * (len(labels) - added)
    n = len(labels)
    lanes = np.array(lane, dtype=np.int64)
    return _Block.of_messages(
        JoinedStrings(heads, lanes, labels, np.arange(n)), from_, receivers, sizes, overhead, rate_caps, deps,
        CodedStrings.constant("0", n), CodedStrings.narrowed(channels, lanes),
    )


def _ring_later_steps(
    hops: _Hops,
    heads: list[str],
    channels: list[str],
    due: np.ndarray,
    received: np.ndarray,
    previous: np.ndarray,
    payload: float,
    start: int,
) -> _Block:
    """Steps 1 onwards of :func:`_ring_steps` as columns, their first message numbered
    ``start``: ``due``, ``received`` (the message each piece waits for) and ``previous``
    (the one it follows on the hop) indexed ``[step - 1, hop, slice]``; ``heads`` per step
    and channel (step-major).

    A piece with a ``.due`` message is two messages: the ``.due`` one (at the sender, zero
    bytes, paying the hop's step latency once the received piece is in) and the piece
    (waiting for it and the previous piece, paying nothing more); one without is the piece,
    waiting for both and paying the step latency itself.
    """
    n_later, n, slices = due.shape
    n_lanes = len(channels)
    pieces = due.size
    has_due = due.reshape(-1)
    counts = 1 + has_due
    piece = np.repeat(np.arange(pieces), counts)  # the piece each message belongs to
    is_due = np.zeros(piece.size, dtype=bool)
    is_due[(np.cumsum(counts) - counts)[has_due]] = True
    rank = (piece // slices) % n
    # Dependencies: [received] for a .due message; [its .due, previous] for the piece after
    # one; [received, previous] for a piece alone.
    index = start + np.arange(piece.size, dtype=np.int64)
    after_due = has_due[piece] & ~is_due
    pairs = np.stack([np.where(after_due, index - 1, received.reshape(-1)[piece]), previous.reshape(-1)[piece]], axis=1)
    keep = np.stack([np.ones(piece.size, dtype=bool), ~is_due], axis=1)
    names = hops.src + hops.dst + hops.senders
    step = piece // (n * slices)
    # Labels and endpoints as compact columns (a channel's million labels as Python strings
    # would be the build's largest allocation): a label is its step's and channel's head and
    # its hop's, slice's and .due's tail, the endpoints, steps and channel coded.
    tails = [hop + str(k) + due_tail for hop in hops.tails for k in range(slices) for due_tail in ("", ".due")]
    return _Block(
        labels=JoinedStrings(heads, step * n_lanes + hops.lane[rank], tails, 2 * (piece % (n * slices)) + is_due),
        src=CodedStrings.narrowed(names, np.where(is_due, rank, 2 * n + rank)),
        dst=CodedStrings.narrowed(names, np.where(is_due, rank, n + rank)),
        size=np.where(is_due, 0.0, payload),
        overhead=np.where(after_due, 0.0, hops.latency[rank]),
        cap=hops.caps[rank, np.where(is_due, 0, 1)],
        dep_counts=np.where(is_due, 1, 2).astype(np.int64),
        dep_indices=pairs[keep],
        step=CodedStrings.narrowed([str(s) for s in range(1, n_later + 1)], step),
        channel=CodedStrings.narrowed(channels, hops.lane[rank]),
    )


def _pat_items(n: int, dim: int) -> int:
    """Data items a rank sends along dimension ``dim`` (to the rank ``2**dim`` away) in PAT on
    ``n`` ranks: the offsets ``j 2**(dim + 1)`` with ``j 2**(dim + 1) + 2**dim < n``, the data
    that still has a rank to reach through that hop."""
    stride = 1 << (dim + 1)
    return (n - (1 << dim) + stride - 1) // stride


def _pat(dag: _FlowDag, ranks: tuple[str, ...], item_bytes: float, pieces: int, channel: int, gather: bool) -> None:
    """PAT on one channel ([NCCL] src/include/collectives.h ``PatAGAlgorithm``,
    ``PatRSAlgorithm``; src/device/prims_simple.h connects each rank to the ranks ``2**d``
    away). All-gather (``gather``) sends to ``rank - 2**d`` from the farthest dimension down,
    each rank forwarding its own item and all it has received; reduce-scatter sends partial
    sums to ``rank + 2**d`` from the nearest dimension up. A message carries
    :func:`_pat_items` items of ``item_bytes`` (``n - 1`` in all, as a ring) and waits for the
    messages its rank received before it; each piece of the channel's data runs the whole
    schedule, behind the previous piece on each connection."""
    n = len(ranks)
    dims = range((n - 1).bit_length())
    order = list(reversed(dims)) if gather else list(dims)
    previous: dict[tuple[int, int], int] = {}
    for k in range(pieces):
        received: list[list[int]] = [[] for _ in range(n)]
        for d in order:
            items = _pat_items(n, d)
            sent = []
            for r in range(n):
                peer = (r - (1 << d)) % n if gather else (r + (1 << d)) % n
                src, dst = ranks[r], ranks[peer]
                # All-gather: a message of the rank's own item only waits for nothing.
                deps = list(received[r]) if items > 1 or not gather else []
                label = f"ch{channel}.pc{k}.dim{d}.r{r}"
                last = previous.get((r, d))
                if last is None:
                    flow = dag.add(label, src, dst, items * item_bytes, deps, d, channel)
                else:
                    flow = dag.after(label, src, dst, items * item_bytes, deps, last, d, channel,
                                     overlaps=dag.ring_latency_overlaps(src, dst))
                previous[(r, d)] = flow
                sent.append((peer, flow))
            for peer, flow in sent:
                received[peer].append(flow)


def _stream_ring(
    dag: _FlowDag,
    orders: Sequence[tuple[str, ...]],
    chunk_bytes: float,
    n_steps: int,
    ready: Mapping[str, list[int]],
    phase: str,
    slices: int = 1,
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
) -> dict[str, list[int]]:
    """The ring of :func:`_ring` as one flow per hop and channel (``model="stream"``);
    returns, per rank, the flows it receives.

    Hop ``p`` (``order[p] -> order[p + 1]``) carries ``n_steps`` chunks after the step
    latencies its messages would pay one after another in the step DAG (``n_steps x slices``
    of them with Simple between GPUs of a server, where each follows the one before; one
    across servers and with LL or LL128, where they overlap). Beside it, a zero-byte flow
    takes what the step DAG's longest chain of forwarded chunks takes: over each of the
    ``n_steps`` hops ending at ``p``, the hop's step latency and its first slice's transfer,
    then the last step's other slices on hop ``p``. Both are capped at ``cap_Bps``, and
    between servers at ``net_cap_Bps`` too, and a slice's transfer is charged at the cap
    where one is set; where the links alone set a hop's rate, which the layout does not
    know, the chain charges its latency only.
    """
    done: dict[str, list[int]] = {r: [] for r in orders[0]}
    for c, order in enumerate(orders):
        n = len(order)
        pairs = [(order[p], order[(p + 1) % n]) for p in range(n)]
        crosses = np.array([dag.crosses_servers(a, b) for a, b in pairs], dtype=bool)
        latency = np.array([dag.step_latency(a, b) for a, b in pairs])
        wire = np.array([chunk_bytes / slices / dag.wire_efficiency(a, b) for a, b in pairs])
        hop_cap = np.where(crosses, min(cap_Bps, net_cap_Bps), cap_Bps)
        slice_s = wire / hop_cap  # 0 where uncapped
        hop = latency + slice_s
        laps, rest = divmod(n_steps, n)
        # The chain ending at hop p: `laps` whole turns, then hops p - rest + 1 .. p.
        around = np.concatenate([np.zeros(1), np.cumsum(np.concatenate([hop, hop]))])
        chain = laps * hop.sum() + around[n + 1 : 2 * n + 1] - around[n + 1 - rest : 2 * n + 1 - rest]
        chain += (slices - 1) * slice_s
        steps = f"0-{n_steps - 1}"
        for p, (src, dst) in enumerate(pairs):
            deps = list(ready.get(src, ()))
            label = f"{phase}ch{c}.stream.r{p}"
            serial = 1 if dag.ring_latency_overlaps(src, dst) else n_steps * slices
            sender = dag.proxy(src, dst) or src  # across servers, the rank on dst's rail (PXN)
            done[dst].append(dag.add(label, sender, dst, n_steps * chunk_bytes, deps, steps, c,
                                     step_latency_s=serial * float(latency[p]), cap_Bps=float(hop_cap[p])))
            done[dst].append(dag.add(f"{label}.chain", sender, dst, 0.0, deps, steps, c,
                                     step_latency_s=float(chain[p]), cap_Bps=float(hop_cap[p])))
    return done


def _model(model: str, n_messages: int, what: str) -> str:
    """``"steps"`` or ``"stream"``: ``model``, or for ``"auto"`` the step DAG up to
    :data:`STEP_MESSAGE_LIMIT` messages; a step DAG must fit in memory (:func:`_fits_memory`)."""
    if model not in MODELS:
        raise InputError(f"{what}: unknown model {model!r}; valid ones: {', '.join(MODELS)}")
    if model == "auto":
        return "steps" if n_messages <= STEP_MESSAGE_LIMIT else "stream"
    if model == "steps":
        _fits_memory(n_messages, what, "or the stream model (model='stream', --model stream)")
    return model


def physical_memory_bytes() -> int | None:
    """This machine's memory (``sysconf``), None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _memory_short(n_messages: int, per_message: int) -> int | None:
    """The machine's memory (bytes) where ``n_messages`` at ``per_message`` bytes each would
    take more than it; None where they fit or the machine does not say."""
    memory = physical_memory_bytes()
    return memory if memory is not None and n_messages * per_message > memory else None


def _fits_memory(n_messages: int, what: str, instead: str, per_message: int = STEP_MESSAGE_BYTES) -> None:
    """An :class:`InputError` where a step DAG of ``n_messages`` would take more than the
    machine's memory at ``per_message`` bytes a message (numpy would fail, or the system's
    out-of-memory killer end the run without a word); ``instead`` says what else to run."""
    memory = _memory_short(n_messages, per_message)
    if memory is not None:
        needed = n_messages * per_message
        raise InputError(
            f"{what} laid out as steps is {n_messages:,} messages, about {format_bytes(needed)} at "
            f"{per_message} bytes a message, more than this machine's {format_bytes(memory)} of memory; "
            f"use fewer ranks, channels or slices, {instead}"
        )


def _steps_only(model: str, n_messages: int, what: str) -> None:
    """Check ``model`` for an algorithm without a stream form: ``"auto"`` refuses more than
    :data:`STEP_MESSAGE_LIMIT` messages, ``"steps"`` any number that fits in memory
    (:func:`_fits_memory`)."""
    if model not in MODELS:
        raise InputError(f"{what}: unknown model {model!r}; valid ones: {', '.join(MODELS)}")
    if model == "stream":
        raise InputError(
            f"{what} has no stream model; rings have one (all_reduce, reduce_scatter, all_gather, "
            "hierarchical_all_reduce), and so have trees, chains (broadcast, reduce), nvls_tree_all_reduce and "
            "the reductions in the network (nvls_sharp_all_reduce, collnet_direct_all_reduce, collnet_chain_all_reduce)"
        )
    if model == "auto" and n_messages > STEP_MESSAGE_LIMIT:
        raise InputError(
            f"{what} over {n_messages:,} messages is more than the {STEP_MESSAGE_LIMIT:,} laid out by "
            "default (it has no stream model); use fewer ranks, channels or slices, a ring (algorithm='ring', "
            "--algorithm ring, which streams), or model='steps' (--model steps) to build it anyway"
        )
    if model == "steps":
        _fits_memory(n_messages, what, "or a ring (algorithm='ring', --algorithm ring, which streams)")


def _chain(
    dag: _FlowDag,
    order: Sequence[str],
    piece_bytes: float,
    slices: int,
    channel: int,
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    stream_slices: int = 0,
) -> None:
    """Pipelined chain ``order[0] -> order[1] -> ...``: slice ``k`` of hop ``h`` after slice
    ``k`` of hop ``h - 1`` and slice ``k - 1`` of hop ``h``; with a streaming protocol every
    hop is :func:`_streamed` after the start of the hop before it. A chain is a ring opened at
    its root, so a hop between servers leaves through the rank on the receiver's rail, as a
    ring's (:meth:`_FlowDag.proxy`). Every message is capped at ``cap_Bps``, and between
    servers at ``net_cap_Bps``. ``stream_slices`` > 0 streams a Simple chain
    (``model="stream"``) as :func:`_tree_all_reduce` streams a tree: each hop's first of its
    ``stream_slices`` slices (of ``piece_bytes`` in all) as the start the next hop waits
    for, the rest as one flow."""
    # The step DAG's chain pays each slice's latency after the one before, between servers too.
    first_slice = _first_slice_sender(stream_slices, overlap_across=False) if stream_slices else None
    previous: list[int] = []
    for h in range(len(order) - 1):
        current: list[int] = []
        sender, receiver = dag.proxy(order[h], order[h + 1]) or order[h], order[h + 1]
        cap = min(cap_Bps, net_cap_Bps if dag.crosses_servers(sender, receiver) else math.inf)
        for k in range(slices):
            deps = [previous[k]] if previous else []
            if k:
                deps.append(current[k - 1])
            if first_slice is not None:
                current.append(first_slice(dag, {}, f"hop{h}.sl{k}", f"ch{channel}", sender, receiver, piece_bytes,
                                           deps, h, channel, cap_Bps=cap))
            elif dag.costs.streams:
                current.append(_streamed(dag, {}, f"hop{h}.sl{k}", f"ch{channel}", sender, receiver, piece_bytes,
                                         deps, h, channel, cap_Bps=cap))
            else:
                current.append(dag.add(f"ch{channel}.hop{h}.sl{k}", sender, receiver, piece_bytes, deps, h,
                                       channel, cap_Bps=cap))
        previous = current


def _in_order(
    dag: _FlowDag,
    last: dict[str, int],
    kind: str,
    label: str,
    src: str,
    dst: str,
    payload_bytes: float,
    deps: list[int],
    step: int,
    channel: int,
    wire_efficiency: float | None = None,
    cap_Bps: float = math.inf,
    step_latency_s: float | None = None,
) -> int:
    """Add message ``label.kind``, after ``deps`` and after the previous message of its kind
    (``last[kind]``, then updated); ``wire_efficiency``, ``cap_Bps`` and ``step_latency_s``
    as :meth:`_FlowDag.add`. Across servers the step latency runs from when ``deps`` are
    done, in the shadow of the previous message (see :func:`_ring`)."""
    if kind in last:
        last[kind] = dag.after(f"{label}.{kind}", src, dst, payload_bytes, deps, last[kind], step, channel,
                               overlaps=dag.crosses_servers(src, dst), step_latency_s=step_latency_s,
                               wire_efficiency=wire_efficiency, cap_Bps=cap_Bps)
    else:
        last[kind] = dag.add(f"{label}.{kind}", src, dst, payload_bytes, deps, step, channel, step_latency_s,
                             wire_efficiency, cap_Bps)
    return last[kind]


def _streamed(
    dag: _FlowDag,
    last: dict[str, int],
    kind: str,
    label: str,
    src: str,
    dst: str,
    payload_bytes: float,
    deps: list[int],
    step: int,
    channel: int,
    step_latency_s: float | None = None,
    cap_Bps: float = math.inf,
    first_bytes: float = 0.0,
    serial_s: float = 0.0,
    wire_efficiency: float | None = None,
) -> int:
    """A hop of a streaming protocol (:attr:`CollectiveCosts.streams`): a zero-byte message
    ``label.kind.start`` pays the hop's step latency after ``deps`` (the starts of the hops
    feeding it), and the data ``label.kind`` leaves when it does, at most at ``cap_Bps``.
    Returns the start, which is what the next hops wait for; the collective ends when every
    hop's data has arrived. ``step_latency_s`` as :meth:`_FlowDag.add`.

    A streamed Simple hop (``model="stream"``) forwards whole slices: its start carries the
    first slice (``first_bytes`` of the payload), so the next hops start once it is through,
    and the data the rest, after ``serial_s``: the step latencies its slices pay one after
    another where the step DAG's do. ``wire_efficiency`` as :meth:`_FlowDag.add`."""
    start = _in_order(dag, last, f"{kind}.start", label, src, dst, first_bytes, deps, step, channel,
                      step_latency_s=step_latency_s, cap_Bps=cap_Bps, wire_efficiency=wire_efficiency)
    _in_order(dag, last, kind, label, src, dst, payload_bytes - first_bytes, [start], step, channel,
              step_latency_s=serial_s, cap_Bps=cap_Bps, wire_efficiency=wire_efficiency)
    return start


#: How a message is laid out: :func:`_in_order`, or a sender of
#: :func:`_first_slice_sender`; returns what the messages after it wait for.
_Send = Callable[..., int]


def _first_slice_sender(slices: int, overlap_across: bool = True) -> _Send:
    """A sender with :func:`_in_order`'s arguments that lays a message of ``slices`` slices
    out streamed (:func:`_streamed`): its first slice is the start the messages after it
    wait for, the rest one flow, which pays the step latencies of its slices one after
    another, as the step DAG's slices do: inside a server, and between servers too unless
    ``overlap_across`` (where the step DAG's slices there pay theirs in the shadow of the
    ones before, :func:`_in_order`); ``step_latency_s`` as :func:`_in_order`'s."""
    def send(dag: _FlowDag, last: dict[str, int], kind: str, label: str, src: str, dst: str, payload_bytes: float,
             deps: list[int], step: int, channel: int, wire_efficiency: float | None = None,
             cap_Bps: float = math.inf, step_latency_s: float | None = None) -> int:
        overlaps = overlap_across and dag.crosses_servers(src, dst)
        latency = dag.step_latency(src, dst) if step_latency_s is None else step_latency_s
        serial = 0.0 if overlaps else (slices - 1) * latency
        return _streamed(dag, last, kind, label, src, dst, payload_bytes, deps, step, channel, cap_Bps=cap_Bps,
                         first_bytes=payload_bytes / slices, serial_s=serial, wire_efficiency=wire_efficiency,
                         step_latency_s=step_latency_s)
    return send


def _sliced(model: str, chunk: float, n_slices: int) -> tuple[_Send, float, int]:
    """How a chunk of ``n_slices`` slices is laid out: the sender, a message's bytes and the
    slices laid out one by one; streamed, each message is the whole chunk after its first
    slice (:func:`_first_slice_sender`), one slice laid out."""
    if model == "stream":
        return _first_slice_sender(n_slices), chunk, 1
    return _in_order, chunk / n_slices, n_slices


def _btree_parent(n: int, position: int) -> int:
    """Parent of ``position`` in NCCL's binary tree over ``n`` positions (``ncclGetBtree``):
    clear the lowest set bit and set the next one, or just clear it past the end; -1 for 0."""
    if position == 0:
        return -1
    bit = position & -position
    up = (position ^ bit) | (bit << 1)
    return up if up < n else position ^ bit


def _double_binary_tree(n: int) -> tuple[list[int], list[int]]:
    """Parent position of every position in NCCL's two trees (``ncclGetDtree``).

    Tree 1 is tree 0 mirrored (``n - 1 - i``) for even ``n`` and shifted by one for odd
    ``n``, so that a leaf of one tree is an inner node of the other.
    """
    tree0 = [_btree_parent(n, i) for i in range(n)]
    tree1 = []
    for i in range(n):
        if n % 2:
            up = _btree_parent(n, (i - 1) % n)
            tree1.append(-1 if up < 0 else (up + 1) % n)
        else:
            up = _btree_parent(n, n - 1 - i)
            tree1.append(-1 if up < 0 else n - 1 - up)
    return tree0, tree1


def tree_hops(n_units: int, chain: int) -> int:
    """Hops one slice of a tree all-reduce crosses one after another (the pipeline's depth in
    :func:`_tree_all_reduce`): up the longest chain of ``chain`` ranks and the deeper of the
    two trees over ``n_units`` tree nodes to the root, then down again."""
    height = 0
    for parent in _double_binary_tree(n_units):
        depth = [0] * n_units
        for node in _tree_shape(parent)[1][1:]:
            depth[node] = depth[parent[node]] + 1
        height = max(height, max(depth))
    return 2 * (height + chain - 1)


def _tree_shape(parent: Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """The children of every position of a tree given by its ``parent`` list (-1 at the
    root), and the positions top-down, the root first."""
    children: list[list[int]] = [[] for _ in parent]
    for i, above in enumerate(parent):
        if above >= 0:
            children[above].append(i)
    top_down = [list(parent).index(-1)]
    for node in top_down:
        top_down.extend(children[node])
    return children, top_down


def _tree_all_reduce(
    dag: _FlowDag,
    ranks: tuple[str, ...],
    groups: list[tuple[str, ...]] | None,
    payload_bytes: float,
    channels: int,
    slices: int,
    offsets: Sequence[int] | None = None,
    split_cap_Bps: float = math.inf,
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    stream_slices: int = 0,
    chains: Sequence[Sequence[str]] | None = None,
) -> None:
    """Both trees of every channel, slice by slice, over tree nodes that are chains.

    Without groups, every rank is a tree node. With groups (servers), each server is a tree
    node (one server: one chain, NCCL's tree inside a node): a chain of its ranks, rotated by
    ``offsets[c]`` on channel ``c`` (by ``c`` without offsets; they repeat when there are more
    channels), or, given ``chains``, its ranks in the order they come in ``chains[c]``
    (repeating likewise), whose first rank (the head) talks to the parent and child servers.
    Going up, slice ``k`` runs down the chain to the head, which sends it to the parent once
    it has the chain's and every child's slice ``k``; going down, a head forwards slice ``k``
    to its child servers and along its chain. With a
    streaming protocol every hop is :func:`_streamed` (give one slice).

    ``split_cap_Bps`` caps each message a rank other than a tree's root head sends to a rank
    of its own server: NCCL splits such a rank's thread block between reducing up and
    broadcasting down (``runTreeSplit``), the root's works whole. ``cap_Bps`` caps every
    message, ``net_cap_Bps`` those between servers.

    ``stream_slices`` > 0 streams a Simple tree (``model="stream"``): each hop moves its
    ``stream_slices`` slices (``payload_bytes``) as LL's hops are streamed
    (:func:`_first_slice_sender`), its first slice as the start the next hops wait for, the
    rest as one flow.
    """
    stream = dag.costs.streams
    index = {r: i for i, r in enumerate(ranks)}
    first_slice = _first_slice_sender(stream_slices) if stream_slices else None

    def send(last: dict[str, int], kind: str, label: str, src: str, dst: str, deps: list[int], step: int,
             tag: int, root_head: str) -> int:
        crosses = dag.crosses_servers(src, dst)
        cap = min(cap_Bps, net_cap_Bps if crosses else math.inf,
                  math.inf if src == root_head or crosses else split_cap_Bps)
        if first_slice is not None:
            return first_slice(dag, last, kind, label, src, dst, payload_bytes, deps, step, tag, cap_Bps=cap)
        if stream:
            return _streamed(dag, last, kind, label, src, dst, payload_bytes, deps, step, tag, cap_Bps=cap)
        return _in_order(dag, last, kind, label, src, dst, payload_bytes, deps, step, tag, cap_Bps=cap)

    units = [(r,) for r in ranks] if groups is None else groups
    n = len(units)
    for t, parent in enumerate(_double_binary_tree(n)):
        children, top_down = _tree_shape(parent)
        root = top_down[0]
        for c in range(channels):
            tag = t * channels + c
            if chains is not None and groups is not None:
                place = {r: i for i, r in enumerate(chains[c % len(chains)])}
                node_chains = [tuple(sorted(u, key=place.__getitem__)) for u in units]
            else:
                k = c if offsets is None else offsets[c % len(offsets)]
                node_chains = [u[k % len(u) :] + u[: k % len(u)] for u in units]
            head = node_chains[root][0]
            last: dict[str, int] = {}
            up = [[-1] * slices for _ in range(n)]
            reduced: list[list[int]] = [[] for _ in range(slices)]
            for node in reversed(top_down):
                chain = node_chains[node]
                for k in range(slices):
                    label = f"tree{t}.ch{c}.sl{k}"
                    arrived: list[int] = []
                    for pos in range(len(chain) - 1, 0, -1):
                        src, dst = chain[pos], chain[pos - 1]
                        kind = f"chainup.r{index[src]}"
                        arrived = [send(last, kind, label, src, dst, arrived, 0, tag, head)]
                    inputs = arrived + [up[child][k] for child in children[node]]
                    if node == root:
                        reduced[k] = inputs
                        continue
                    kind = f"up.r{index[chain[0]]}"
                    up[node][k] = send(last, kind, label, chain[0], node_chains[parent[node]][0], inputs, 0, tag, head)
            down = [[-1] * slices for _ in range(n)]
            for node in top_down:
                chain = node_chains[node]
                for k in range(slices):
                    label = f"tree{t}.ch{c}.sl{k}"
                    ready = reduced[k] if node == root else [down[node][k]]
                    for child in children[node]:
                        kind = f"down.r{index[node_chains[child][0]]}"
                        down[child][k] = send(last, kind, label, chain[0], node_chains[child][0], ready, 1, tag, head)
                    arrived = ready
                    for pos in range(1, len(chain)):
                        kind = f"chaindown.r{index[chain[pos]]}"
                        arrived = [send(last, kind, label, chain[pos - 1], chain[pos], arrived, 1, tag, head)]


def _check_servers(servers: Servers, what: str) -> Servers:
    """``servers`` unchanged; an :class:`InputError` unless it is None or a mapping of rank
    name to server."""
    if servers is not None and not isinstance(servers, Mapping):
        raise InputError(
            f"{what}: servers must map each rank name to its server (a dict), got {type(servers).__name__}"
        )
    return servers


def ranks_by_server(ranks: Sequence[str], servers: Mapping[str, Hashable]) -> dict[Hashable, list[str]]:
    """``ranks`` by server, each server's in ``ranks`` order."""
    groups: dict[Hashable, list[str]] = {}
    for rank in ranks:
        groups.setdefault(servers[rank], []).append(rank)
    return groups


def _group_by_server(ranks: tuple[str, ...], servers: Servers, what: str) -> list[tuple[str, ...]]:
    servers = _check_servers(servers, what)
    if servers is None:
        return [ranks]
    for r in ranks:
        if r not in servers:
            raise InputError(f"{what}: rank {r!r} has no server in `servers`")
    return [tuple(g) for g in ranks_by_server(ranks, servers).values()]


def _prepare(
    what: str, ranks: Ranks, size_bytes: float, channels: int, costs: CollectiveCosts | None, algorithm: str
) -> tuple[tuple[str, ...], float, int, CollectiveCosts]:
    ranks = _check_ranks(ranks, what)
    size = check_size(size_bytes, what)
    channels = whole_number(f"{what}: channels", channels)
    if costs is None:
        costs = nccl_costs(algorithm)
    elif not isinstance(costs, CollectiveCosts):
        raise InputError(f"{what}: costs must be a CollectiveCosts, got {type(costs).__name__}")
    return ranks, size, channels, costs


def _ring_collective(
    what: str,
    ranks: Ranks,
    size_bytes: float,
    n_steps: Callable[[int], int],
    *,
    channels: int,
    slices: int | None,
    orders: Sequence[Ranks] | None,
    servers: Servers,
    costs: CollectiveCosts | None,
    model: str,
    rails: Rails = None,
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    symmetry: HopSymmetry | None = None,
) -> Workload:
    """A ring collective of ``n_steps(n)`` steps (see :func:`~flowsim.collectives.all_reduce`).

    With ``symmetry``, a step DAG of more than :data:`CLASS_LAYOUT_FROM` pieces is laid out
    by the classes of hops it finds, one message per class, step and slice (under ``"auto"``
    if that is at most :data:`STEP_MESSAGE_LIMIT` pieces; under ``"steps"`` if it fits in
    memory), and ``symmetry`` is told which class each message is; else the model decides as
    without it.
    """
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    _check_caps(what, cap_Bps=cap_Bps, net_cap_Bps=net_cap_Bps)
    n = len(ranks)
    chunk = size / n / channels
    orders = _check_orders(orders, ranks, channels, what)
    n_slices = _slices(slices, chunk, what, MAX_RING_SLICES)
    n_messages = channels * n_steps(n) * n * n_slices
    if symmetry is not None and model in MODELS and model != "stream" and n_messages > CLASS_LAYOUT_FROM:
        # The step DAG laid out by classes of hops, where they are few.
        dag = _FlowDag(what, costs, servers, "steps", rails)
        hops = _ring_hops(dag, orders, chunk, n_slices, cap_Bps, net_cap_Bps)
        # "auto" lays out at most the limit: past that many classes, the search stops (where
        # a failed NIC leaves nearly every hop a class of its own, it would take seconds).
        most = STEP_MESSAGE_LIMIT // (n_steps(n) * n_slices) if model == "auto" else None
        classes = symmetry.classes(hops, most) if most is None or most > 0 else None
        if classes is not None:
            n_quotient = classes.size.size * n_steps(n) * n_slices
            # Each piece, and a .due message before every piece of its hop but the first.
            n_flows = n_quotient + int(hops.due[classes.representative].sum()) * (n_steps(n) * n_slices - 1)
            if model == "steps":
                _fits_memory(n_flows, what, "or the stream model (model='stream', --model stream)", CLASS_FLOW_BYTES)
            if model == "steps" or (n_quotient <= STEP_MESSAGE_LIMIT
                                    and _memory_short(n_flows, CLASS_FLOW_BYTES) is None):
                symmetry.laid_out(*_ring_classes(dag, hops, classes, n_steps(n), n_slices, ""))
                return dag.workload(what)
    model = _model(model, n_messages, what)
    dag = _FlowDag(what, costs, servers, model, rails)
    if model == "stream":
        _stream_ring(dag, orders, chunk, n_steps(n), {}, "", n_slices, cap_Bps, net_cap_Bps)
    else:
        _ring(dag, orders, chunk, n_steps(n), n_slices, {}, "", cap_Bps, net_cap_Bps)
    return dag.workload(what)
