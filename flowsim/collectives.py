"""Collectives as flow DAGs over a list of GPU node names.

Each builder returns a :class:`~flowsim.workload.Workload`: one flow per message a rank
sends, with dependencies saying which message must have arrived before it can be sent.
:func:`flowsim.pipeline.run` routes and simulates it; :mod:`flowsim.nccl` reports times as
nccl-tests does.

Message sizes follow nccl-tests ([NT-PERF], fact sheet 6.1): ``size_bytes`` is the buffer
size ``S`` that nccl-tests prints. For all-reduce, broadcast and reduce it is each rank's
buffer; for all-gather, reduce-scatter and all-to-all it is the *total* (``n`` chunks of
``S / n``).

Algorithms
----------
Ring (all-reduce, reduce-scatter, all-gather)
    Ranks in a ring; at every step each rank sends a chunk of ``S / n`` to its successor, and
    a rank's step ``s`` message leaves when the chunk it forwards (its predecessor's step
    ``s - 1`` message) has arrived. All-reduce has ``2(n - 1)`` steps, the others ``n - 1``.
Chain (broadcast, reduce)
    The root's data travels a chain through all ranks (towards the root for reduce), cut into
    slices so that the hops overlap.
Double binary tree (all-reduce)
    Two complementary binary trees, each carrying half of the data: reduce up each tree,
    then broadcast down, slice by slice (NCCL >= 2.4, fact sheet 7.1). Across servers the
    tree nodes are servers, each a chain of its ranks, as NCCL builds them.
Hierarchical (all-reduce)
    Ring reduce-scatter inside each server, ring all-reduce among the ranks with the same
    local index across servers (one ring per rail), ring all-gather inside each server.
NVLS (all-reduce)
    NVLink SHARP on NVSwitch generation 3 and later (fact sheet 1.3): the switch reads every
    rank's copy of chunk ``j`` and returns the sum to rank ``j`` (``multimem.ld_reduce``),
    which writes it once to the switch, and the switch multicasts it to every rank
    (``multimem.st``). Each rank moves ``S (1 + 1/n)`` each way instead of the ring's
    ``2 S (n - 1)/n``.
All-to-all, send
    One message per (source, destination) pair, all sent at once.

Channels and slices
-------------------
``channels`` splits the data over independent copies of the algorithm (NCCL's channels;
each channel may use its own ring order, see :func:`rotated_rings` and :func:`mesh_rings`). ``slices`` cuts each
channel's message of every step into pieces sent one after another, so that step ``s + 1``
of slice ``k`` can start while step ``s`` of slice ``k + 1`` is still on its way: the
pipelining of NCCL's ``NCCL_STEPS`` slots. By default a message is cut into NCCL's Simple
slot size (:data:`NCCL_SLOT_BYTES`), at most :data:`MAX_RING_SLICES` pieces in a ring (where
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
step latency but its last chunk arrives no sooner than the chain of ``steps`` step latencies
it crossed: each hop's flow pays the base and its own step latency, and a zero-byte flow
beside it pays the base and the whole chain, so the hop is done at the later of the two
(route latencies: the engine adds each flow's own; the chain's other switch hops, 0.1-0.5
us each against NCCL's 3.4-14 us per step, are not charged). ``model="auto"`` (the
default) keeps the step DAG up to :data:`STEP_MESSAGE_LIMIT` messages and streams above it.
The workload's ``model`` tag says which layout was built. Algorithms without a stream form
(trees, chains, NVLS, all-to-all) take ``model="auto"`` or ``"steps"``: above the limit,
``"auto"`` refuses with the message count before building anything, and ``"steps"`` builds
regardless.

Software costs
--------------
:class:`CollectiveCosts` gives the time NCCL's own tuning model charges ([NCCL]
``src/graph/tuning.cc``, fact sheet 7.2-7.3): a base latency once per collective (added to
the messages that wait for nothing) and a per-step latency on every message, the
intra-server one (NVLink or PCIe) or the inter-server one (network) depending on whether the
message leaves its server. These are overheads on top of the route latency the topology
gives. The protocol's wire efficiency (LL carries 50% payload, LL128 120/128) inflates the
bytes on the wire. Each slice pays the per-step latency, so slicing adds
``(slices - 1)`` step latencies to the critical path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.errors import InputError, whole_number
from flowsim.workload import Workload

__all__ = [
    "ALGORITHMS",
    "COLLECTIVES",
    "MAX_PIPELINE_SLICES",
    "MAX_RING_SLICES",
    "MODELS",
    "NCCL_SLOT_BYTES",
    "NVLS_EFFICIENCY",
    "PROTOCOLS",
    "STEP_MESSAGE_LIMIT",
    "CollectiveCosts",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "build_collective",
    "hierarchical_all_reduce",
    "mesh_rings",
    "nccl_costs",
    "nvls_all_reduce",
    "nvls_costs",
    "reduce",
    "reduce_scatter",
    "resolve_algorithm",
    "rotated_rings",
    "send",
    "tree_all_reduce",
]

#: NCCL protocols, in the order of NCCL's constant arrays.
PROTOCOLS = ("ll", "ll128", "simple")

#: Algorithms :func:`build_collective` knows, per collective.
ALGORITHMS = {
    "all_reduce": ("ring", "tree", "hierarchical", "nvls"),
    "reduce_scatter": ("ring",),
    "all_gather": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("p2p",),
    "send": ("p2p",),
}

#: Collective names, as nccl-tests' binaries call them (``all_reduce_perf`` ...).
COLLECTIVES = tuple(ALGORITHMS)

#: NCCL's Simple-protocol slot: ``DEFAULT_BUFFSIZE`` (4 MiB) over ``NCCL_STEPS`` (8)
#: ([NCCL] device.h, fact sheet 7.1).
NCCL_SLOT_BYTES = (1 << 22) // 8

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

_NCCL_SOURCE = "[NCCL] master 2.30.7 src/graph/tuning.cc baseLat/hwLat, fact sheet 7.3"
_US = 1e-6
# baseLat (us) per algorithm, protocols LL / LL128 / Simple.
_BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
# hwLat (us) per hardware and algorithm, protocols LL / LL128 / Simple.
_STEP_LATENCY_US = {
    ("nvlink", "tree"): (0.6, 1.25, 4.0),
    ("nvlink", "ring"): (0.6, 1.9, 3.4),
    ("pci", "tree"): (1.0, 1.9, 4.0),
    ("pci", "ring"): (1.0, 2.5, 5.7),
    ("net", "tree"): (5.0, 8.5, 14.0),
    ("net", "ring"): (2.7, 4.0, 14.0),
}
# Payload fraction on the wire ([NCCL] device.h, fact sheet 7.1): LL lines carry 4 B of data
# per 8 B; LL128 lines 120 B per 128 B; Simple sends whole chunks.
_WIRE_EFFICIENCY = (0.5, 120 / 128, 1.0)

Ranks = Sequence[str]
Servers = Mapping[str, Hashable] | None


@dataclass(frozen=True)
class CollectiveCosts:
    """Software costs a collective's messages pay on top of their routes.

    Attributes
    ----------
    base_s : float
        Once per collective (added to the messages that wait for nothing), >= 0.
    intra_step_s, inter_step_s : float
        Per message between ranks of one server / of different servers, >= 0.
    wire_efficiency : float
        Payload fraction of the bytes on the wire, in (0, 1]: a message of ``b`` payload
        bytes is a flow of ``b / wire_efficiency`` bytes.
    source : str
        Where the numbers come from.
    """

    base_s: float
    intra_step_s: float
    inter_step_s: float
    wire_efficiency: float
    source: str

    def __post_init__(self) -> None:
        for what in ("base_s", "intra_step_s", "inter_step_s"):
            value = getattr(self, what)
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"collective cost {what} is {value!r}; it must be finite and >= 0")
        if not 0 < self.wire_efficiency <= 1:
            raise InputError(f"wire_efficiency is {self.wire_efficiency!r}; it must be in (0, 1]")

    @classmethod
    def zero(cls) -> CollectiveCosts:
        """No software cost, no protocol overhead: bandwidth and route latency only."""
        return cls(0.0, 0.0, 0.0, 1.0, "none: bandwidth and route latency only")


def nccl_costs(algorithm: str = "ring", protocol: str = "simple", intra: str = "nvlink") -> CollectiveCosts:
    """NCCL's latency constants and the protocol's wire efficiency.

    Parameters
    ----------
    algorithm : {"ring", "tree"}
        NCCL algorithm whose ``baseLat`` / ``hwLat`` row to use. Chains (broadcast, reduce)
        use the ring row; point-to-point messages have no row of their own and use it too.
    protocol : {"ll", "ll128", "simple"}
    intra : {"nvlink", "pci"}
        Hardware between ranks of one server; between servers it is the network (``NET``).

    Returns
    -------
    CollectiveCosts
        ``base_s = baseLat``, ``intra_step_s = hwLat[intra]``, ``inter_step_s = hwLat[NET]``
        from NCCL master 2.30.7 (fact sheet 7.3); LL 50% and LL128 120/128 payload.

    Examples
    --------
    >>> c = nccl_costs("ring", "simple")
    >>> round(c.base_s * 1e6, 1), round(c.intra_step_s * 1e6, 1), round(c.inter_step_s * 1e6, 1)
    (8.4, 3.4, 14.0)
    """
    if algorithm not in _BASE_LATENCY_US:
        raise InputError(f"no NCCL latency constants for algorithm {algorithm!r}; valid ones: ring, tree")
    if protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; valid ones: {', '.join(PROTOCOLS)}")
    if intra not in ("nvlink", "pci"):
        raise InputError(f"unknown intra-server hardware {intra!r}; valid ones: nvlink, pci")
    p = PROTOCOLS.index(protocol)
    return CollectiveCosts(
        base_s=_BASE_LATENCY_US[algorithm][p] * _US,
        intra_step_s=_STEP_LATENCY_US[(intra, algorithm)][p] * _US,
        inter_step_s=_STEP_LATENCY_US[("net", algorithm)][p] * _US,
        wire_efficiency=_WIRE_EFFICIENCY[p],
        source=f"{_NCCL_SOURCE} ({algorithm}, {protocol}, {intra}/net); [NCCL] device.h protocol payload",
    )


#: NCCL's ``nvlsEfficiency`` by the NVLink generation of the GPUs: Hopper 0.85, Blackwell
#: 0.74 ([NCCL] tuning.cc, fact sheet 1.3 and 7.3). Older generations have no NVLS.
NVLS_EFFICIENCY = {"nvlink4": 0.85, "nvlink5": 0.74}


def nvls_costs(nvlink: str) -> CollectiveCosts:
    """NCCL's NVLS costs for GPUs of NVLink generation ``nvlink``.

    NCCL's model charges NVLS one latency, ``hwLat[NVLINK][NVLS][Simple]`` = 25 us, with no
    per-step term and ``baseLat`` 0 (fact sheet 7.1-7.3); it is the base here. Its bandwidth
    is the NVLink bandwidth times ``nvlsEfficiency``, here the wire efficiency.

    >>> c = nvls_costs("nvlink4")
    >>> round(c.base_s * 1e6, 1), c.intra_step_s, c.wire_efficiency
    (25.0, 0.0, 0.85)
    """
    if nvlink not in NVLS_EFFICIENCY:
        raise InputError(
            f"NVLS needs NVSwitch generation 3 or later (GPUs on {', '.join(NVLS_EFFICIENCY)}), got {nvlink!r}"
        )
    return CollectiveCosts(
        base_s=25.0 * _US,
        intra_step_s=0.0,
        inter_step_s=0.0,
        wire_efficiency=NVLS_EFFICIENCY[nvlink],
        source=f"{_NCCL_SOURCE} (NVLS hwLat, Simple); nvlsEfficiency for {nvlink}",
    )


class _FlowDag:
    """Collects the messages of one collective, then freezes them into a Workload."""

    def __init__(self, name: str, costs: CollectiveCosts, servers: Servers, model: str = "steps") -> None:
        self.name = name
        self.costs = costs
        self.servers = servers
        self.model = model
        self.labels: list[str] = []
        self.src: list[str] = []
        self.dst: list[str] = []
        self.size: list[float] = []
        self.deps: list[list[int]] = []
        self.overhead: list[float] = []
        self.step: list[str] = []
        self.channel: list[str] = []

    def _server(self, rank: str) -> Hashable:
        try:
            return self.servers[rank]
        except KeyError:
            raise InputError(f"collective {self.name!r}: rank {rank!r} has no server in `servers`") from None

    def step_latency(self, src: str, dst: str) -> float:
        """The per-step latency of a message from ``src`` to ``dst``: inter- or intra-server."""
        inter = self.servers is not None and self._server(src) != self._server(dst)
        return self.costs.inter_step_s if inter else self.costs.intra_step_s

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
    ) -> int:
        """Add one message; returns its flow index. It pays ``step_latency_s`` (default: its
        own hop's step latency), and the base latency if it waits for nothing."""
        overhead = self.step_latency(src, dst) if step_latency_s is None else step_latency_s
        if not deps:
            overhead += self.costs.base_s
        self.labels.append(f"{self.name}.{label}")
        self.src.append(src)
        self.dst.append(dst)
        self.size.append(payload_bytes / self.costs.wire_efficiency)
        self.deps.append(deps)
        self.overhead.append(overhead)
        self.step.append(str(step))
        self.channel.append(str(channel))
        return len(self.labels) - 1

    def workload(self, collective: str) -> Workload:
        n = len(self.labels)
        return Workload.build(
            self.labels,
            self.src,
            self.dst,
            np.array(self.size, dtype=np.float64),
            depends_on=self.deps,
            overhead_s=np.array(self.overhead, dtype=np.float64),
            tags={
                "collective": [collective] * n,
                "model": [self.model] * n,
                "step": self.step,
                "channel": self.channel,
            },
        )


# --- argument checks -----------------------------------------------------------------------


def _check_ranks(ranks: Ranks, what: str, minimum: int = 2) -> tuple[str, ...]:
    if isinstance(ranks, str):
        raise InputError(f"{what}: ranks must be a sequence of node names, got the string {ranks!r}")
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


def _check_size(size_bytes: float, what: str) -> float:
    try:
        size = float(size_bytes)
    except (TypeError, ValueError):
        raise InputError(f"{what}: size_bytes must be a number, got {size_bytes!r}") from None
    if not (math.isfinite(size) and size >= 0):
        raise InputError(f"{what}: size_bytes is {size_bytes!r}; it must be finite and >= 0")
    return size


def _check_orders(
    orders: Sequence[Ranks] | None, ranks: tuple[str, ...], channels: int, what: str
) -> list[tuple[str, ...]]:
    if orders is None:
        return [ranks] * channels
    orders = [tuple(o) for o in orders]
    if len(orders) != channels:
        raise InputError(f"{what}: {len(orders)} ring orders for {channels} channels")
    members = set(ranks)
    for c, order in enumerate(orders):
        if len(order) != len(ranks) or set(order) != members:
            raise InputError(f"{what}: ring order of channel {c} is not a permutation of the ranks")
    return orders


def _slices(slices: int | None, piece_bytes: float, what: str, most: int) -> int:
    """The slice count asked for, or NCCL-slot sized pieces (at most ``most``)."""
    if slices is not None:
        return whole_number(f"{what}: slices", slices)
    return int(min(most, max(1, math.ceil(piece_bytes / NCCL_SLOT_BYTES))))


# --- ring, chain and tree building blocks ----------------------------------------------------


def _ring(
    dag: _FlowDag,
    orders: Sequence[tuple[str, ...]],
    chunk_bytes: float,
    n_steps: int,
    slices: int,
    ready: Mapping[str, list[int]],
    phase: str,
) -> dict[str, list[int]]:
    """Ring steps on every channel; returns, per rank, the messages it receives last.

    ``ready[rank]``: messages that must have arrived before ``rank`` sends its first step.
    """
    rank_index = {r: i for i, r in enumerate(orders[0])}
    n = len(orders[0])
    piece = chunk_bytes / slices
    done: dict[str, list[int]] = {r: [] for r in orders[0]}
    for c, order in enumerate(orders):
        flow = np.full((n_steps, n, slices), -1, dtype=np.int64)
        for s in range(n_steps):
            for p in range(n):
                src, dst = order[p], order[(p + 1) % n]
                for k in range(slices):
                    deps = [int(flow[s - 1, p - 1, k])] if s else list(ready.get(src, ()))
                    if k:
                        deps.append(int(flow[s, p, k - 1]))
                    label = f"{phase}ch{c}.step{s}.r{rank_index[src]}.sl{k}"
                    flow[s, p, k] = dag.add(label, src, dst, piece, deps, s, c)
        for p in range(n):
            done[order[(p + 1) % n]].extend(flow[n_steps - 1, p].tolist())
    return done


def _stream_ring(
    dag: _FlowDag,
    orders: Sequence[tuple[str, ...]],
    chunk_bytes: float,
    n_steps: int,
    ready: Mapping[str, list[int]],
    phase: str,
) -> dict[str, list[int]]:
    """The ring of :func:`_ring` as one flow per hop and channel (``model="stream"``);
    returns, per rank, the flows it receives.

    Hop ``p`` (``order[p] -> order[p + 1]``) carries ``n_steps`` chunks after its own step
    latency; beside it, a zero-byte flow pays the step latencies of the ``n_steps`` hops
    ending at ``p``: the step DAG's longest chain of forwarded chunks.
    """
    done: dict[str, list[int]] = {r: [] for r in orders[0]}
    for c, order in enumerate(orders):
        n = len(order)
        hop = np.array([dag.step_latency(order[p], order[(p + 1) % n]) for p in range(n)])
        laps, rest = divmod(n_steps, n)
        # The chain ending at hop p: `laps` whole turns, then hops p - rest + 1 .. p.
        around = np.concatenate([np.zeros(1), np.cumsum(np.concatenate([hop, hop]))])
        chain = laps * hop.sum() + around[n + 1 : 2 * n + 1] - around[n + 1 - rest : 2 * n + 1 - rest]
        steps = f"0-{n_steps - 1}"
        for p in range(n):
            src, dst = order[p], order[(p + 1) % n]
            deps = list(ready.get(src, ()))
            label = f"{phase}ch{c}.stream.r{p}"
            done[dst].append(dag.add(label, src, dst, n_steps * chunk_bytes, deps, steps, c))
            done[dst].append(dag.add(f"{label}.chain", src, dst, 0.0, deps, steps, c, step_latency_s=float(chain[p])))
    return done


def _model(model: str, n_messages: int, what: str) -> str:
    """``"steps"`` or ``"stream"``: ``model``, or for ``"auto"`` the step DAG up to
    :data:`STEP_MESSAGE_LIMIT` messages."""
    if model not in MODELS:
        raise InputError(f"{what}: unknown model {model!r}; valid ones: {', '.join(MODELS)}")
    if model == "auto":
        return "steps" if n_messages <= STEP_MESSAGE_LIMIT else "stream"
    return model


def _no_slices_in_a_stream(model: str, slices: int | None, what: str) -> None:
    if model == "stream" and slices is not None:
        raise InputError(f"{what}: slices cut the messages of steps; a stream has none (give model='steps')")


def _steps_only(model: str, n_messages: int, what: str) -> None:
    """Check ``model`` for an algorithm without a stream form: ``"auto"`` refuses more than
    :data:`STEP_MESSAGE_LIMIT` messages, ``"steps"`` takes any number."""
    if model not in MODELS:
        raise InputError(f"{what}: unknown model {model!r}; valid ones: {', '.join(MODELS)}")
    if model == "stream":
        raise InputError(
            f"{what} has no stream model; rings have one (all_reduce, reduce_scatter, all_gather, "
            "hierarchical_all_reduce)"
        )
    if model == "auto" and n_messages > STEP_MESSAGE_LIMIT:
        raise InputError(
            f"{what} over {n_messages:,} messages is more than the {STEP_MESSAGE_LIMIT:,} laid out by "
            "default (it has no stream model); use fewer ranks, channels or slices, or model='steps' "
            "(--model steps) to build it anyway"
        )


def _chain(dag: _FlowDag, order: Sequence[str], piece_bytes: float, slices: int, channel: int) -> None:
    """Pipelined chain ``order[0] -> order[1] -> ...``: slice ``k`` of hop ``h`` after slice
    ``k`` of hop ``h - 1`` and slice ``k - 1`` of hop ``h``."""
    previous: list[int] = []
    for h in range(len(order) - 1):
        current: list[int] = []
        for k in range(slices):
            deps = [previous[k]] if previous else []
            if k:
                deps.append(current[k - 1])
            current.append(dag.add(f"ch{channel}.hop{h}.sl{k}", order[h], order[h + 1], piece_bytes, deps, h, channel))
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
) -> int:
    """Add message ``label.kind``, after ``deps`` and after the previous message of its kind
    (``last[kind]``, then updated)."""
    if kind in last:
        deps = [*deps, last[kind]]
    last[kind] = dag.add(f"{label}.{kind}", src, dst, payload_bytes, deps, step, channel)
    return last[kind]


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


def _tree_all_reduce(
    dag: _FlowDag,
    ranks: tuple[str, ...],
    groups: list[tuple[str, ...]],
    payload_bytes: float,
    channels: int,
    slices: int,
) -> None:
    """Both trees of every channel, slice by slice, over tree nodes that are chains.

    With one group, every rank is a tree node. With several (servers), each server is a
    tree node: a chain of its ranks, rotated by the channel, whose first rank (the head)
    talks to the parent and child servers. Going up, slice ``k`` runs down the chain to the
    head, which sends it to the parent once it has the chain's and every child's slice ``k``;
    going down, a head forwards slice ``k`` to its child servers and along its chain.
    """
    index = {r: i for i, r in enumerate(ranks)}
    units = [(r,) for r in ranks] if len(groups) == 1 else groups
    n = len(units)
    for t, parent in enumerate(_double_binary_tree(n)):
        children: list[list[int]] = [[] for _ in range(n)]
        for i, up in enumerate(parent):
            if up >= 0:
                children[up].append(i)
        root = parent.index(-1)
        top_down = [root]
        for node in top_down:
            top_down.extend(children[node])
        for c in range(channels):
            tag = t * channels + c
            chains = [u[c % len(u) :] + u[: c % len(u)] for u in units]
            last: dict[str, int] = {}
            up = [[-1] * slices for _ in range(n)]
            reduced: list[list[int]] = [[] for _ in range(slices)]
            for node in reversed(top_down):
                chain = chains[node]
                for k in range(slices):
                    label = f"tree{t}.ch{c}.sl{k}"
                    arrived: list[int] = []
                    for pos in range(len(chain) - 1, 0, -1):
                        src, dst = chain[pos], chain[pos - 1]
                        kind = f"chainup.r{index[src]}"
                        arrived = [_in_order(dag, last, kind, label, src, dst, payload_bytes, arrived, 0, tag)]
                    inputs = arrived + [up[child][k] for child in children[node]]
                    if node == root:
                        reduced[k] = inputs
                        continue
                    head = chain[0]
                    kind = f"up.r{index[head]}"
                    up[node][k] = _in_order(
                        dag, last, kind, label, head, chains[parent[node]][0], payload_bytes, inputs, 0, tag
                    )
            down = [[-1] * slices for _ in range(n)]
            for node in top_down:
                chain = chains[node]
                for k in range(slices):
                    label = f"tree{t}.ch{c}.sl{k}"
                    ready = reduced[k] if node == root else [down[node][k]]
                    for child in children[node]:
                        kind = f"down.r{index[chains[child][0]]}"
                        down[child][k] = _in_order(
                            dag, last, kind, label, chain[0], chains[child][0], payload_bytes, ready, 1, tag
                        )
                    arrived = ready
                    for pos in range(1, len(chain)):
                        kind = f"chaindown.r{index[chain[pos]]}"
                        arrived = [
                            _in_order(
                                dag, last, kind, label, chain[pos - 1], chain[pos], payload_bytes, arrived, 1, tag
                            )
                        ]


def _group_by_server(ranks: tuple[str, ...], servers: Servers, what: str) -> list[tuple[str, ...]]:
    if servers is None:
        return [ranks]
    groups: dict[Hashable, list[str]] = {}
    for r in ranks:
        if r not in servers:
            raise InputError(f"{what}: rank {r!r} has no server in `servers`")
        groups.setdefault(servers[r], []).append(r)
    return [tuple(g) for g in groups.values()]


def _prepare(
    what: str, ranks: Ranks, size_bytes: float, channels: int, costs: CollectiveCosts | None, algorithm: str
) -> tuple[tuple[str, ...], float, int, CollectiveCosts]:
    ranks = _check_ranks(ranks, what)
    size = _check_size(size_bytes, what)
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
) -> Workload:
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    n = len(ranks)
    chunk = size / n / channels
    orders = _check_orders(orders, ranks, channels, what)
    _no_slices_in_a_stream(model, slices, what)
    n_slices = _slices(slices, chunk, what, MAX_RING_SLICES)
    model = _model(model, channels * n_steps(n) * n * n_slices, what)
    dag = _FlowDag(what, costs, servers, model)
    if model == "stream":
        _stream_ring(dag, orders, chunk, n_steps(n), {}, "")
    else:
        _ring(dag, orders, chunk, n_steps(n), n_slices, {}, "")
    return dag.workload(what)


def all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Ring all-reduce: ``2(n - 1)`` steps of ``S / n`` bytes per rank and channel.

    Parameters
    ----------
    ranks : sequence of str
        Node names of the ``n >= 2`` ranks (GPUs), in ring order.
    size_bytes : float
        ``S``, each rank's buffer (>= 0).
    channels : int
        Independent rings, each carrying ``S / channels``.
    slices : int, optional
        Pieces each step's message is cut into; default: NCCL slot sized, at most
        :data:`MAX_RING_SLICES`.
    orders : sequence of sequences of str, optional
        Ring order of each channel, each a permutation of ``ranks`` (default: ``ranks``).
    servers : mapping of str to hashable, optional
        Server of each rank, to charge inter-server messages the network step latency
        (default: all ranks in one server).
    costs : CollectiveCosts, optional
        Default: :func:`nccl_costs` ``("ring", "simple", "nvlink")``.
    model : {"auto", "steps", "stream"}
        One message per step, or one flow per hop (see "Steps and streams" in
        :mod:`flowsim.collectives`); ``"auto"`` streams above :data:`STEP_MESSAGE_LIMIT`
        messages. ``slices`` apply to the steps only (giving them with ``"stream"`` is an
        error; ``"auto"`` counts them and drops them if it streams).

    Returns
    -------
    Workload
        Flow ``{"all_reduce"}.ch{c}.step{s}.r{i}.sl{k}`` is rank ``i``'s step ``s`` message on
        channel ``c``; it depends on the message it forwards (step ``s - 1`` of its ring
        predecessor) and on its own previous slice. Streamed, flow ``all_reduce.ch{c}.stream.r{p}``
        is the hop from position ``p`` of channel ``c``'s ring order to the next, and
        ``all_reduce.ch{c}.stream.r{p}.chain`` its zero-byte latency chain. Tags:
        ``collective``, ``model``, ``step``, ``channel``.

    Examples
    --------
    >>> w = all_reduce(["g0", "g1", "g2", "g3"], 4e6, slices=1)
    >>> len(w), float(w.size_bytes[0]), w.names[4]
    (24, 1000000.0, 'all_reduce.ch0.step1.r0.sl0')
    >>> [w.names[i] for i in w.dependencies(4)]
    ['all_reduce.ch0.step0.r3.sl0']
    """
    return _ring_collective(
        "all_reduce",
        ranks,
        size_bytes,
        lambda n: 2 * (n - 1),
        channels=channels,
        slices=slices,
        orders=orders,
        servers=servers,
        costs=costs,
        model=model,
    )


def reduce_scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Ring reduce-scatter: ``n - 1`` steps of ``S / n`` bytes (``S``: the total input of a
    rank, as nccl-tests counts it). Parameters as :func:`all_reduce`."""
    return _ring_collective(
        "reduce_scatter",
        ranks,
        size_bytes,
        lambda n: n - 1,
        channels=channels,
        slices=slices,
        orders=orders,
        servers=servers,
        costs=costs,
        model=model,
    )


def all_gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Ring all-gather: ``n - 1`` steps of ``S / n`` bytes (``S``: the gathered total, as
    nccl-tests counts it). Parameters as :func:`all_reduce`."""
    return _ring_collective(
        "all_gather",
        ranks,
        size_bytes,
        lambda n: n - 1,
        channels=channels,
        slices=slices,
        orders=orders,
        servers=servers,
        costs=costs,
        model=model,
    )


def _chain_collective(
    what: str,
    ranks: Ranks,
    size_bytes: float,
    root: int,
    towards_root: bool,
    *,
    channels: int,
    slices: int | None,
    orders: Sequence[Ranks] | None,
    servers: Servers,
    costs: CollectiveCosts | None,
    model: str,
) -> Workload:
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    if isinstance(root, (bool, np.bool_)) or not isinstance(root, (int, np.integer)) or not 0 <= root < len(ranks):
        raise InputError(f"{what}: root must be a rank index in 0..{len(ranks) - 1}, got {root!r}")
    piece = size / channels
    n_slices = _slices(slices, piece, what, MAX_PIPELINE_SLICES)
    _steps_only(model, channels * n_slices * (len(ranks) - 1), what)
    dag = _FlowDag(what, costs, servers)
    for c, order in enumerate(_check_orders(orders, ranks, channels, what)):
        at = order.index(ranks[root])
        chain = order[at:] + order[:at]
        _chain(dag, chain[::-1] if towards_root else chain, piece / n_slices, n_slices, c)
    return dag.workload(what)


def broadcast(
    ranks: Ranks,
    size_bytes: float,
    *,
    root: int = 0,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Pipelined chain broadcast of ``S`` bytes from ``ranks[root]``.

    Each channel's ring order, rotated to start at the root, is the chain; slice ``k`` of
    hop ``h`` waits for slice ``k`` of hop ``h - 1`` and slice ``k - 1`` of hop ``h``.
    ``model`` is ``"auto"`` or ``"steps"`` (a chain has no stream form: see "Steps and
    streams" in :mod:`flowsim.collectives`). Other parameters as :func:`all_reduce`.
    """
    return _chain_collective(
        "broadcast",
        ranks,
        size_bytes,
        root,
        False,
        channels=channels,
        slices=slices,
        orders=orders,
        servers=servers,
        costs=costs,
        model=model,
    )


def reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    root: int = 0,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Pipelined chain reduce of ``S`` bytes into ``ranks[root]``: the broadcast chain run
    backwards. Parameters as :func:`broadcast`."""
    return _chain_collective(
        "reduce",
        ranks,
        size_bytes,
        root,
        True,
        channels=channels,
        slices=slices,
        orders=orders,
        servers=servers,
        costs=costs,
        model=model,
    )


def all_to_all(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """All-to-all: every rank sends ``S / n`` bytes to every other rank, all at once.

    ``S`` is a rank's total buffer, as nccl-tests counts it. ``n (n - 1)`` flows
    ``all_to_all.r{i}.to.r{j}`` without dependencies; each pays the base latency and one step
    latency. ``model`` is ``"auto"`` or ``"steps"`` (see :func:`broadcast`). Other
    parameters as :func:`all_reduce`.
    """
    ranks, size, _, costs = _prepare("all_to_all", ranks, size_bytes, 1, costs, "ring")
    n = len(ranks)
    _steps_only(model, n * (n - 1), "all_to_all")
    dag = _FlowDag("all_to_all", costs, servers)
    for i, src in enumerate(ranks):
        for j, dst in enumerate(ranks):
            if i != j:
                dag.add(f"r{i}.to.r{j}", src, dst, size / n, [], 0, 0)
    return dag.workload("all_to_all")


def send(
    src: str,
    dst: str,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Point-to-point send of ``S`` bytes (pipeline parallelism), ``channels x slices``
    flows; slice ``k`` of a channel follows slice ``k - 1``. One hop gains nothing from
    slicing, so ``slices`` defaults to 1. ``model`` as :func:`broadcast`."""
    ranks, size, channels, costs = _prepare("send", (src, dst), size_bytes, channels, costs, "ring")
    piece = size / channels
    n_slices = _slices(slices, piece, "send", 1)
    _steps_only(model, channels * n_slices, "send")
    dag = _FlowDag("send", costs, servers)
    for c in range(channels):
        _chain(dag, ranks, piece / n_slices, n_slices, c)
    return dag.workload("send")


def tree_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Double binary tree all-reduce (NCCL >= 2.4): each tree carries ``S / 2``.

    The trees are NCCL's (``ncclGetDtree``). Across servers (``servers`` with more than one),
    as NCCL builds them: the tree nodes are the servers, each a chain of its ranks (in
    ``ranks`` order, rotated by the channel so that channels use different GPUs and NICs)
    whose first rank talks to the parent and child servers. Otherwise every rank is a tree
    node, in ``ranks`` order. A node sends slice ``k`` up once slice ``k`` has arrived from
    all below it (the reduction); the root, having all of slice ``k``, sends it down, and
    each node forwards a slice down as it arrives. Default costs: :func:`nccl_costs`
    ``("tree", "simple", "nvlink")``; ``model`` as :func:`broadcast`; other parameters as
    :func:`all_reduce`.
    """
    what = "tree_all_reduce"
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "tree")
    piece = size / 2 / channels
    n_slices = _slices(slices, piece, what, MAX_PIPELINE_SLICES)
    # Each tree spans the ranks (n - 1 edges), crossed up and down by every slice.
    _steps_only(model, channels * n_slices * 2 * 2 * (len(ranks) - 1), what)
    dag = _FlowDag("all_reduce", costs, servers)
    _tree_all_reduce(dag, ranks, _group_by_server(ranks, servers, what), piece / n_slices, channels, n_slices)
    return dag.workload("all_reduce")


def hierarchical_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """All-reduce in three phases: ring reduce-scatter inside each server, ring all-reduce
    of each ``S / ppn`` shard among the ranks with the same local index across servers (one
    ring per rail), ring all-gather inside each server.

    Every server must hold the same number ``ppn`` of ranks (in ``ranks`` order, grouped by
    ``servers``). A rank starts a phase once its previous phase has delivered to it.
    ``model`` applies to all three phases' rings, ``"auto"`` counting the messages of all
    of them. Other parameters as :func:`all_reduce`.
    """
    what = "hierarchical_all_reduce"
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    groups = _group_by_server(ranks, servers, what)
    ppn = len(groups[0])
    for g in groups:
        if len(g) != ppn:
            raise InputError(
                f"{what}: servers hold different numbers of ranks ({len(g)} with {g[0]!r}, {ppn} with {groups[0][0]!r})"
            )
    _no_slices_in_a_stream(model, slices, what)
    shard = size / ppn
    n_servers = len(groups)
    server_chunk = shard / channels
    rail_chunk = shard / n_servers / channels
    server_slices = _slices(slices, server_chunk, what, MAX_RING_SLICES)
    rail_slices = _slices(slices, rail_chunk, what, MAX_RING_SLICES)
    messages = channels * len(ranks) * (
        (2 * (ppn - 1) * server_slices if ppn > 1 else 0)
        + (2 * (n_servers - 1) * rail_slices if n_servers > 1 else 0)
    )
    model = _model(model, messages, what)
    dag = _FlowDag("all_reduce", costs, servers, model)

    def ring(order: tuple[str, ...], chunk: float, n_steps: int, n_slices: int, ready, phase: str):
        if model == "stream":
            return _stream_ring(dag, [order] * channels, chunk, n_steps, ready, phase)
        return _ring(dag, [order] * channels, chunk, n_steps, n_slices, ready, phase)

    done: dict[str, list[int]] = {}
    if ppn > 1:
        for i, g in enumerate(groups):
            done.update(ring(g, server_chunk, ppn - 1, server_slices, {}, f"rs.srv{i}."))
    if n_servers > 1:
        after: dict[str, list[int]] = {}
        for local in range(ppn):
            rail = tuple(g[local] for g in groups)
            after.update(ring(rail, rail_chunk, 2 * (n_servers - 1), rail_slices, done, f"ar.rail{local}."))
        done = after
    if ppn > 1:
        for i, g in enumerate(groups):
            ring(g, server_chunk, ppn - 1, server_slices, done, f"ag.srv{i}.")
    return dag.workload("all_reduce")


def nvls_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    switch: str,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NVLS all-reduce through the NVSwitch node ``switch`` (one server).

    For every chunk ``j`` (rank ``j``'s ``S / n``), channel and slice: each rank sends its
    copy to the switch (``reduce.r{i}``); once all have, the switch sends the sum to rank
    ``j`` (``result``), rank ``j`` sends it back (``store``), and the switch multicasts it
    to every rank (``multicast.r{i}``). Each of these waits for its own previous slice.

    Parameters
    ----------
    switch : str
        Node name of the NVSwitch the ranks' NVLinks reach.
    costs : CollectiveCosts
        Default: :func:`nvls_costs` ``("nvlink4")`` (Hopper); give ``nvls_costs("nvlink5")``
        for Blackwell.

    ``model`` as :func:`broadcast`. Other parameters as :func:`all_reduce`; the default
    slicing is that of chains (:data:`MAX_PIPELINE_SLICES`), since the four messages of a
    slice follow each other.
    """
    what = "nvls_all_reduce"
    if costs is None:
        costs = nvls_costs("nvlink4")
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    if not isinstance(switch, str) or switch in ranks:
        raise InputError(f"{what}: switch must be the NVSwitch's node name, not a rank, got {switch!r}")
    n = len(ranks)
    chunk = size / n / channels
    n_slices = _slices(slices, chunk, what, MAX_PIPELINE_SLICES)
    piece = chunk / n_slices
    _steps_only(model, channels * n * n_slices * (2 * n + 2), what)
    dag = _FlowDag("all_reduce", costs, None)
    for c in range(channels):
        for j, owner in enumerate(ranks):
            last: dict[str, int] = {}
            for k in range(n_slices):
                label = f"ch{c}.chunk{j}.sl{k}"
                reduced = [
                    _in_order(dag, last, f"reduce.r{i}", label, r, switch, piece, [], 0, c) for i, r in enumerate(ranks)
                ]
                result = _in_order(dag, last, "result", label, switch, owner, piece, reduced, 1, c)
                store = _in_order(dag, last, "store", label, owner, switch, piece, [result], 2, c)
                for i, r in enumerate(ranks):
                    _in_order(dag, last, f"multicast.r{i}", label, switch, r, piece, [store], 3, c)
    return dag.workload("all_reduce")


def rotated_rings(ranks: Ranks, channels: int, servers: Servers = None) -> list[tuple[str, ...]]:
    """One ring order per channel: channel ``c`` rotates each server's ranks by ``c``.

    Across servers, channel ``c`` then enters a server at its local rank ``c`` and leaves it
    from local rank ``c - 1``: with one NIC per GPU, the channels spread the inter-server
    hops over all rails, as NCCL's channels do.

    Examples
    --------
    >>> rotated_rings(["a0", "a1", "b0", "b1"], 2, {"a0": 0, "a1": 0, "b0": 1, "b1": 1})
    [('a0', 'a1', 'b0', 'b1'), ('a1', 'a0', 'b1', 'b0')]
    """
    ranks = _check_ranks(ranks, "rotated_rings", minimum=1)
    channels = whole_number("rotated_rings: channels", channels)
    groups = _group_by_server(ranks, servers, "rotated_rings")
    return [tuple(r for g in groups for r in g[c % len(g) :] + g[: c % len(g)]) for c in range(channels)]


def mesh_rings(
    ranks: Ranks, link_count: Sequence[Sequence[int]] | np.ndarray, *, max_search_steps: int = 100_000
) -> list[tuple[str, ...]]:
    """Ring orders over the direct links of a GPU mesh, such as the DGX-1 hybrid cube-mesh.

    Finds as many directed Hamiltonian cycles as it can such that at most
    ``link_count[i][j]`` of them use the link from rank ``i`` to rank ``j``: NCCL's ring
    search on NVLink meshes, where every ring is a channel and a double NVLink carries two.
    On the DGX-1 (V100) adjacency this finds six rings, one per NVLink of each GPU.

    Parameters
    ----------
    ranks : sequence of str
        The ``n`` ranks; rings are returned as orders of these names, starting at
        ``ranks[0]``.
    link_count : int array (n, n)
        Number of links from rank ``i`` to rank ``j`` (0: none).
    max_search_steps : int
        Budget of the exact (backtracking) search; past it, the best set found so far.

    Returns
    -------
    list of tuple of str
        The ring orders; empty if the mesh has no Hamiltonian cycle.
    """
    ranks = _check_ranks(ranks, "mesh_rings")
    n = len(ranks)
    counts = np.asarray(link_count)
    if counts.shape != (n, n) or not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        raise InputError(f"mesh_rings: link_count must be a non-negative integer matrix of shape ({n}, {n})")
    budget = whole_number("mesh_rings: max_search_steps", max_search_steps)
    remaining = counts.astype(np.int64).copy()
    cycles: list[tuple[int, ...]] = []
    path, seen = [0], [True] + [False] * (n - 1)

    def extend() -> None:
        if len(path) == n:
            if remaining[path[-1], 0] > 0:
                cycles.append(tuple(path))
            return
        for j in range(n):
            if not seen[j] and remaining[path[-1], j] > 0:
                seen[j] = True
                path.append(j)
                extend()
                path.pop()
                seen[j] = False

    extend()
    hops = [[(c[i], c[(i + 1) % n]) for i in range(n)] for c in cycles]
    target = int(min(remaining.sum(axis=1).min(), remaining.sum(axis=0).min()))
    best: list[int] = []
    chosen: list[int] = []
    steps = 0

    def choose(first: int) -> bool:
        nonlocal best, steps
        if len(chosen) > len(best):
            best = list(chosen)
        if len(best) >= target or steps >= budget:
            return True
        for i in range(first, len(cycles)):
            steps += 1
            if all(remaining[a, b] > 0 for a, b in hops[i]):
                for a, b in hops[i]:
                    remaining[a, b] -= 1
                chosen.append(i)
                if choose(i):
                    return True
                chosen.pop()
                for a, b in hops[i]:
                    remaining[a, b] += 1
        return False

    choose(0)
    return [tuple(ranks[i] for i in cycles[c]) for c in best]


_BUILDERS: dict[tuple[str, str], Callable[..., Workload]] = {
    ("all_reduce", "ring"): all_reduce,
    ("all_reduce", "tree"): tree_all_reduce,
    ("all_reduce", "hierarchical"): hierarchical_all_reduce,
    ("all_reduce", "nvls"): nvls_all_reduce,
    ("reduce_scatter", "ring"): reduce_scatter,
    ("all_gather", "ring"): all_gather,
    ("broadcast", "ring"): broadcast,
    ("reduce", "ring"): reduce,
    ("all_to_all", "p2p"): all_to_all,
}


def resolve_algorithm(collective: str, algorithm: str | None = None) -> str:
    """``algorithm`` checked against :data:`ALGORITHMS` for ``collective``; the first listed
    when ``None``. Errors name the valid collectives or algorithms."""
    if collective not in ALGORITHMS:
        raise InputError(f"unknown collective {collective!r}; valid ones: {', '.join(COLLECTIVES)}")
    if algorithm is None:
        return ALGORITHMS[collective][0]
    if algorithm not in ALGORITHMS[collective]:
        raise InputError(
            f"no algorithm {algorithm!r} for {collective}; valid ones: {', '.join(ALGORITHMS[collective])}"
        )
    return algorithm


def build_collective(
    collective: str, ranks: Ranks, size_bytes: float, *, algorithm: str | None = None, **options
) -> Workload:
    """The workload of ``collective`` by name (:data:`COLLECTIVES`) and ``algorithm``
    (:data:`ALGORITHMS`; default: the first listed). ``send`` takes ``ranks = (src, dst)``;
    ``options`` go to the builder."""
    algorithm = resolve_algorithm(collective, algorithm)
    if collective == "send":
        ranks = _check_ranks(ranks, "send")
        if len(ranks) != 2:
            raise InputError(f"send takes ranks = (src, dst), got {len(ranks)} ranks")
        return send(ranks[0], ranks[1], size_bytes, **options)
    return _BUILDERS[(collective, algorithm)](ranks, size_bytes, **options)
