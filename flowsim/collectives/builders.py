"""The collectives' builders: each lays one collective out as a flow DAG over GPU node names.

Each builder returns a :class:`~flowsim.workload.Workload`: one flow per message a rank
sends, with dependencies saying which message must have arrived before it can be sent.
:func:`flowsim.pipeline.run` routes and simulates it; :mod:`flowsim.collectives.report` reports times as
nccl-tests does.

Message sizes follow nccl-tests ([NT-PERF], docs/hardware.md §6.1): ``size_bytes`` is the buffer
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
    then broadcast down, slice by slice (NCCL >= 2.4, docs/hardware.md §7.1). Across servers the
    tree nodes are servers, each a chain of its ranks, as NCCL builds them.
Hierarchical (all-reduce)
    Ring reduce-scatter inside each server, ring all-reduce among the ranks with the same
    local index across servers (one ring per rail), ring all-gather inside each server.
NVLS (all-reduce)
    NVLink SHARP on NVSwitch generation 3 and later (docs/hardware.md §1.3): the switch reads every
    rank's copy of chunk ``j`` and returns the sum to rank ``j`` (``multimem.ld_reduce``),
    which writes it once to the switch, and the switch multicasts it to every rank
    (``multimem.st``). Each rank moves ``S (1 + 1/n)`` each way instead of the ring's
    ``2 S (n - 1)/n``.
CollNet Direct (all-reduce, ``NCCL_COLLNET_ENABLE=1`` on InfiniBand with SHARP)
    Each server's ranks copy chunk ``j`` to head ``j`` over NVLink; the heads send the sums
    into the network, whose switches reduce them across servers and return the total, which
    each head copies to the server's other ranks. NVLS with the network reducing across
    servers (``nvls_sharp``) is the same with the NVSwitch reducing inside them; CollNet
    Chain (``collnet_chain``) reduces and spreads along a chain of each server's ranks.
PAT (all-gather, reduce-scatter)
    NCCL's Parallel Aggregated Trees (2.23 and later, one rank per server by default): each
    rank talks to the ranks ``2**d`` away; all-gather forwards, from the farthest dimension
    down, its own chunk and all it has received (1, 2, 4, ... chunks), reduce-scatter the
    reverse; ``log2(n)`` steps and ``n - 1`` chunks per rank, as a ring moves.
All-to-all, send
    One message per (source, destination) pair, all sent at once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowsim.collectives.chunks import NVLS_CHUNK_BYTES
from flowsim.collectives.costs import (
    PROTOCOLS,
    CollectiveCosts,
    collnet_costs,
    nvls_costs,
    nvls_sharp_costs,
    pat_costs,
)
from flowsim.collectives.dag import (
    MAX_PIPELINE_SLICES,
    MAX_RING_SLICES,
    HopSymmetry,
    Rails,
    Ranks,
    Servers,
    _chain,
    _check_caps,
    _check_orders,
    _check_ranks,
    _double_binary_tree,
    _FlowDag,
    _group_by_server,
    _in_order,
    _model,
    _pat,
    _prepare,
    _ring,
    _ring_collective,
    _Send,
    _sliced,
    _slices,
    _steps_only,
    _stream_ring,
    _tree_all_reduce,
    _tree_shape,
    check_size,
)
from flowsim.errors import InputError, check_options, keyword_options, whole_number
from flowsim.workload import Workload


def all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    rails: Rails = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    symmetry: HopSymmetry | None = None,
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
    rails : mapping of str to hashable, optional
        Rail of each rank (its NIC, numbered alike on every server). A hop between servers
        from a rank to one on another rail leaves through the sender's server's rank on the
        receiver's rail, as NCCL's rings do (:meth:`~flowsim.collectives.dag._FlowDag.proxy`,
        docs/hardware.md §7.4): that rank sends the hop's pieces. Default: hops leave from
        their sender.
    costs : CollectiveCosts, optional
        Default: :func:`nccl_costs` ``("ring", "simple", "nvlink")``.
    model : {"auto", "steps", "stream"}
        One message per step, or one flow per hop (see "Steps and streams" in
        :mod:`flowsim.collectives`); ``"auto"`` streams above :data:`STEP_MESSAGE_LIMIT`
        messages. Streamed, ``slices`` count the step latencies a hop's messages would pay
        one after another (see :func:`~flowsim.collectives.dag._stream_ring`).
    cap_Bps, net_cap_Bps : float
        Every message's rate on the wire at most ``cap_Bps`` (B/s, > 0; inf for none), and a
        message between servers at most ``net_cap_Bps`` too: a lane's share of NCCL's model
        bandwidth, where that is a throughput limit. Streamed, the latency chain moves each
        hop's first slice at these rates.
    symmetry : HopSymmetry, optional
        Past :data:`~flowsim.collectives.dag.CLASS_LAYOUT_FROM` pieces, lay the step DAG
        out by the classes of hops it finds, one message per class
        (:func:`~flowsim.collectives.dag._ring_collective`;
        :func:`~flowsim.collectives.collective_time` passes one).

    Returns
    -------
    Workload
        Flow ``{"all_reduce"}.ch{c}.step{s}.r{i}.sl{k}`` is rank ``i``'s step ``s`` message on
        channel ``c``; it depends on the message it forwards (step ``s - 1`` of its ring
        predecessor) and on the previous message of its hop (its own previous slice, or the
        previous step's last slice). Across servers a zero-byte ``....due`` message between
        the forwarded message and it pays the step latency. Streamed, flow ``all_reduce.ch{c}.stream.r{p}``
        is the hop from position ``p`` of channel ``c``'s ring order to the next, and
        ``all_reduce.ch{c}.stream.r{p}.chain`` its zero-byte latency chain. Tags:
        ``collective``, ``model``, ``step``, ``channel``.

    Examples
    --------
    >>> w = all_reduce(["g0", "g1", "g2", "g3"], 4e6, slices=1)
    >>> len(w), float(w.size_bytes[0]), w.names[4]
    (24, 1000000.0, 'all_reduce.ch0.step1.r0.sl0')
    >>> [w.names[i] for i in w.dependencies(4)]
    ['all_reduce.ch0.step0.r3.sl0', 'all_reduce.ch0.step0.r0.sl0']
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
        rails=rails,
        cap_Bps=cap_Bps,
        net_cap_Bps=net_cap_Bps,
        symmetry=symmetry,
    )


def reduce_scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    rails: Rails = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    symmetry: HopSymmetry | None = None,
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
        rails=rails,
        cap_Bps=cap_Bps,
        net_cap_Bps=net_cap_Bps,
        symmetry=symmetry,
    )


def all_gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    rails: Rails = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    symmetry: HopSymmetry | None = None,
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
        rails=rails,
        cap_Bps=cap_Bps,
        net_cap_Bps=net_cap_Bps,
        symmetry=symmetry,
    )


def _pat_collective(
    what: str,
    ranks: Ranks,
    size_bytes: float,
    gather: bool,
    channels: int,
    slices: int | None,
    servers: Servers,
    costs: CollectiveCosts | None,
    model: str,
) -> Workload:
    ranks = _check_ranks(ranks, what)
    size = check_size(size_bytes, what)
    channels = whole_number(f"{what}: channels", channels)
    if costs is None:
        costs = pat_costs(len(ranks), one_per_node=servers is not None and len(set(servers.values())) == len(ranks))
    elif not isinstance(costs, CollectiveCosts):
        raise InputError(f"{what}: costs must be a CollectiveCosts, got {type(costs).__name__}")
    n = len(ranks)
    item = size / n / channels
    n_slices = _slices(slices, item, what, MAX_PIPELINE_SLICES)
    _steps_only(model, channels * n_slices * n * (n - 1).bit_length(), what)
    collective = "all_gather" if gather else "reduce_scatter"
    dag = _FlowDag(collective, costs, servers)
    for c in range(channels):
        _pat(dag, ranks, item / n_slices, n_slices, c, gather)
    return dag.workload(collective)


def pat_all_gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """PAT all-gather ([NCCL] src/include/collectives.h ``PatAGAlgorithm``): ``S`` is the
    gathered total. Each of ``slices`` pieces of a channel's chunks runs the whole schedule,
    behind the previous piece on each connection. Default costs: :func:`pat_costs` (one rank
    per server when ``servers`` says so); other parameters as :func:`all_reduce`.

    Four ranks, ``S`` = 4 MB: rank ``r`` sends 1 MB to ``r - 2``, then 2 MB to ``r - 1``.

    >>> w = pat_all_gather(["a", "b", "c", "d"], 4e6, slices=1, costs=CollectiveCosts.zero())
    >>> [(w.src[i], w.dst[i], float(w.size_bytes[i])) for i in (0, 4)]
    [('a', 'c', 1000000.0), ('a', 'd', 2000000.0)]
    """
    return _pat_collective("pat_all_gather", ranks, size_bytes, True, channels, slices, servers, costs, model)


def pat_reduce_scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    channels: int = 1,
    slices: int | None = None,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """PAT reduce-scatter ([NCCL] src/include/collectives.h ``PatRSAlgorithm``): ``S`` is a
    rank's input. Partial sums go to ``rank + 2**d`` from the nearest dimension up: four
    ranks send 2 chunks to ``r + 1``, then 1 to ``r + 2``. Parameters as :func:`pat_all_gather`."""
    return _pat_collective("pat_reduce_scatter", ranks, size_bytes, False, channels, slices, servers, costs, model)


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
    rails: Rails,
    costs: CollectiveCosts | None,
    model: str,
    cap_Bps: float,
    net_cap_Bps: float,
) -> Workload:
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    _check_root(root, ranks, what)
    _check_caps(what, cap_Bps=cap_Bps, net_cap_Bps=net_cap_Bps)
    piece = size / channels
    n_slices = 1 if costs.streams and slices is None else _slices(slices, piece, what, MAX_PIPELINE_SLICES)
    model = _model(model, channels * n_slices * (len(ranks) - 1), what)
    dag = _FlowDag(what, costs, servers, model, rails)
    streamed = model == "stream" and not costs.streams
    for c, order in enumerate(_check_orders(orders, ranks, channels, what)):
        at = order.index(ranks[root])
        chain = order[at:] + order[:at]
        _chain(dag, chain[::-1] if towards_root else chain, piece if streamed else piece / n_slices,
               1 if streamed else n_slices, c, cap_Bps, net_cap_Bps, n_slices if streamed else 0)
    return dag.workload(what)


def _check_root(root: int, ranks: Ranks, what: str) -> None:
    if isinstance(root, (bool, np.bool_)) or not isinstance(root, (int, np.integer)) or not 0 <= root < len(ranks):
        raise InputError(f"{what}: root must be a rank index in 0..{len(ranks) - 1}, got {root!r}")


def broadcast(
    ranks: Ranks,
    size_bytes: float,
    *,
    root: int = 0,
    channels: int = 1,
    slices: int | None = None,
    orders: Sequence[Ranks] | None = None,
    servers: Servers = None,
    rails: Rails = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
) -> Workload:
    """Pipelined chain broadcast of ``S`` bytes from ``ranks[root]``.

    Each channel's ring order, rotated to start at the root, is the chain; slice ``k`` of
    hop ``h`` waits for slice ``k`` of hop ``h - 1`` and slice ``k - 1`` of hop ``h``. With
    ``rails``, a hop between servers leaves through the sender's server's rank on the
    receiver's rail, as a ring's does (the chain is NCCL's ring, opened at the root).
    Streamed (``model``), each hop is its first slice, which the next hop waits for, and the
    rest of its slices as one flow after it (LL and LL128 chains always stream, with
    zero-byte starts). Other parameters as :func:`all_reduce`.
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
        rails=rails,
        costs=costs,
        model=model,
        cap_Bps=cap_Bps,
        net_cap_Bps=net_cap_Bps,
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
    rails: Rails = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
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
        rails=rails,
        costs=costs,
        model=model,
        cap_Bps=cap_Bps,
        net_cap_Bps=net_cap_Bps,
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


#: nccl-tests' variable for how uneven ``alltoallv_perf``'s generated pattern is, 0 (even)
#: to 1 (its default: by distance alone), and the one that names a traffic matrix file instead.
ALLTOALLV_SPREAD = "NCCL_TESTS_ALLTOALLV_SPREAD"
ALLTOALLV_MATRIX_FILE = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE"


def all_to_all_v_bytes(n_ranks: int, size_bytes: float, spread: float = 1.0) -> np.ndarray:
    """Bytes rank ``i`` sends rank ``j`` (row ``i``, column ``j``) in nccl-tests'
    ``alltoallv_perf`` of ``S`` = ``size_bytes`` over ``n`` ranks, its generated pattern
    (nccl-tests src/alltoallv.cu ``AlltoAllvGetPeerBytesDistanceWeighted``): at distance
    ``d = (j - i) mod n``, ``(1 - spread) S / n + spread d S / (n (n - 1) / 2)``, truncated to
    whole bytes and then to a multiple of 16. Every rank sends (and receives) about ``S``.

    >>> all_to_all_v_bytes(4, 6000)[0].tolist()
    [0, 992, 2000, 2992]
    """
    if not 0.0 <= spread <= 1.0:
        raise InputError(f"{ALLTOALLV_SPREAD} must be a number in [0, 1], got {spread!r}")
    distance = (np.arange(n_ranks)[None, :] - np.arange(n_ranks)[:, None]) % n_ranks
    pairs = n_ranks * (n_ranks - 1) / 2
    exact = (1.0 - spread) * size_bytes / n_ranks + spread * distance * size_bytes / pairs
    return (np.floor(exact).astype(np.int64) // 16) * 16


def all_to_all_v(
    ranks: Ranks,
    size_bytes: float,
    *,
    spread: float = 1.0,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """nccl-tests' ``alltoallv_perf``: an all-to-all whose messages differ by peer, all at once.

    ``S`` is what each rank sends in all, split by :func:`all_to_all_v_bytes` (``spread``:
    nccl-tests' :data:`ALLTOALLV_SPREAD`); NCCL runs it as one group of sends and receives.
    ``n (n - 1)`` flows ``all_to_all_v.r{i}.to.r{j}`` without dependencies, each paying the
    base latency and one step latency. nccl-tests leaves out a send of 0 bytes (a small
    ``S``'s nearest peers): its flow of 0 bytes takes only the latency the others take too.
    Other parameters as :func:`all_to_all`.
    """
    ranks, size, _, costs = _prepare("all_to_all_v", ranks, size_bytes, 1, costs, "ring")
    n = len(ranks)
    sent = all_to_all_v_bytes(n, size, spread)
    _steps_only(model, n * (n - 1), "all_to_all_v")
    dag = _FlowDag("all_to_all_v", costs, servers)
    for i, src in enumerate(ranks):
        for j, dst in enumerate(ranks):
            if i != j:
                dag.add(f"r{i}.to.r{j}", src, dst, float(sent[i, j]), [], 0, 0)
    return dag.workload("all_to_all_v")


def gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    root: int = 0,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Gather: every other rank sends ``S / n`` bytes to ``ranks[root]``, all at once.

    ``S`` is what the root ends up holding, as nccl-tests' ``gather_perf`` counts it. NCCL
    runs it as grouped point-to-point sends to the root (``ncclGather`` since NCCL 2.28,
    and nccl-tests' own ``ncclSend``/``ncclRecv`` group before: [NCCL] v2.30.7-1
    ``src/enqueue.cc``; nccl-tests ``src/gather.cu``). ``n - 1`` flows
    ``gather.r{i}.to.r{root}`` without dependencies, each paying the base latency and one
    step latency; the root's own part is a local copy, left out. Other parameters as
    :func:`all_to_all` and :func:`broadcast`.
    """
    return _rooted_p2p("gather", ranks, size_bytes, root, True, servers, costs, model)


def scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    root: int = 0,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """Scatter: ``ranks[root]`` sends ``S / n`` bytes to every other rank, all at once
    (``scatter.r{root}.to.r{j}``): :func:`gather` reversed, as nccl-tests' ``scatter_perf``
    counts it (``S`` is the root's whole buffer)."""
    return _rooted_p2p("scatter", ranks, size_bytes, root, False, servers, costs, model)


def _rooted_p2p(
    what: str,
    ranks: Ranks,
    size_bytes: float,
    root: int,
    towards_root: bool,
    servers: Servers,
    costs: CollectiveCosts | None,
    model: str,
) -> Workload:
    ranks, size, _, costs = _prepare(what, ranks, size_bytes, 1, costs, "ring")
    _check_root(root, ranks, what)
    n = len(ranks)
    _steps_only(model, n - 1, what)
    dag = _FlowDag(what, costs, servers)
    for i, rank in enumerate(ranks):
        if i != root:
            if towards_root:
                dag.add(f"r{i}.to.r{root}", rank, ranks[root], size / n, [], 0, 0)
            else:
                dag.add(f"r{root}.to.r{i}", ranks[root], rank, size / n, [], 0, 0)
    return dag.workload(what)


def hypercube(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Servers = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """nccl-tests' ``hypercube_perf``: an all-gather by recursive doubling of sends.

    ``S`` is what every rank ends up holding, ``S / n`` of it its own. In round ``k`` each rank
    swaps the ``2^k`` parts it holds with its partner (position XOR ``2^k``): a grouped send
    and receive of ``2^k S / n`` bytes, one NCCL call per round (nccl-tests
    ``src/hypercube.cu``), so ``n`` must be a power of two. Each send is :func:`send` on one
    channel, ``hypercube.k{k}.r{i}.to.r{j}.`` before its names; see
    :func:`hypercube_workload` for how rounds follow each other. Other parameters as
    :func:`all_to_all`.
    """
    ranks, size, _, costs = _prepare("hypercube", ranks, size_bytes, 1, costs, "ring")
    rounds = hypercube_rounds(ranks, size)
    _steps_only(model, len(ranks) * len(rounds), "hypercube")
    return hypercube_workload(
        [[send(src, dst, part, servers=servers, costs=costs, model=model) for src, dst, part in sends]
         for sends in rounds]
    )


def hypercube_rounds(ranks: Ranks, size_bytes: float) -> list[list[tuple[str, str, float]]]:
    """The sends of each round of :func:`hypercube`: ``(src, dst, bytes)`` for every rank
    in ``ranks`` order. An :class:`InputError` where the rank count is not a power of two."""
    n = len(ranks)
    if n < 2 or n & (n - 1):
        raise InputError(f"hypercube pairs rank r with r XOR 2^k, so it needs a power-of-two number of ranks, got {n}")
    return [
        [(ranks[i], ranks[i ^ (1 << k)], size_bytes / n * (1 << k)) for i in range(n)]
        for k in range(n.bit_length() - 1)
    ]


def hypercube_workload(rounds: Sequence[Sequence[Workload]]) -> Workload:
    """One workload of :func:`hypercube`'s sends, ``rounds[k][i]`` rank ``i``'s send of
    round ``k`` (to position ``i XOR 2^k``), named ``hypercube.k{k}.r{i}.to.r{j}.`` before
    their own names. A rank's round ``k`` is an NCCL call that starts once its call of
    round ``k - 1`` has ended, both its send and its receive; a send moves once both ends
    have started, so the first messages of rank ``i``'s send in round ``k`` wait for the last
    ones of the round ``k - 1`` sends into and out of ``i`` and its partner. Each round's
    first messages keep the launch (base) latency their sends gave them."""
    parts = [
        w.renamed(f"hypercube.k{k}.r{i}.to.r{i ^ (1 << k)}.")
        for k, sends in enumerate(rounds)
        for i, w in enumerate(sends)
    ]
    n = len(rounds[0])
    offsets = np.cumsum([0] + [len(w) for w in parts])
    # Per part: its flows no other flow of it waits for (its last messages), as indices in the whole.
    tails = []
    for w, offset in zip(parts, offsets[:-1], strict=True):
        waited = np.zeros(len(w), dtype=bool)
        waited[w.dep_indices] = True
        tails.append(np.flatnonzero(~waited) + offset)
    whole = Workload.concat(parts)
    depends_on: list[np.ndarray] = []
    for index, (w, offset) in enumerate(zip(parts, offsets[:-1], strict=True)):
        k, i = divmod(index, n)
        before = []
        if k:
            previous = 1 << (k - 1)
            for rank in (i, i ^ (1 << k)):
                before += [tails[(k - 1) * n + rank], tails[(k - 1) * n + (rank ^ previous)]]
        for f in range(len(w)):
            own = whole.dependencies(offset + f)
            depends_on.append(np.concatenate([own, *before]) if own.size == 0 and before else own)
    indptr = np.zeros(len(whole) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([d.size for d in depends_on])
    indices = np.concatenate(depends_on).astype(np.int64) if depends_on else np.empty(0, np.int64)
    return dataclasses.replace(whole, dep_indptr=indptr, dep_indices=indices)


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
    offsets: Sequence[int] | None = None,
    split_cap_Bps: float = math.inf,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    cap_Bps: float = math.inf,
    net_cap_Bps: float = math.inf,
    chains: Sequence[Sequence[str]] | None = None,
) -> Workload:
    """Double binary tree all-reduce (NCCL >= 2.4): each tree carries ``S / 2``.

    The trees are NCCL's (``ncclGetDtree``). Given ``servers``, as NCCL builds them: the
    tree nodes are the servers (one server: one chain, NCCL's tree inside a node), each a
    chain of its ranks (in
    ``ranks`` order, rotated on channel ``c`` by ``offsets[c]``, by ``c`` without them, so
    that channels use different GPUs and NICs: :func:`~flowsim.collectives.rings.nic_spread_offsets`
    gives the rotations that do so where GPUs share NICs; or, given ``chains``, a server's
    ranks in the order they come in ``chains[c]``, ``chains`` repeating when there are more
    channels: on an NVLink mesh, NCCL's chains walk the NVLinks as its rings do,
    :func:`~flowsim.collectives.rings.mesh_server_rings`) whose first rank talks to the parent
    and child servers. Without ``servers`` every rank is a tree
    node, in ``ranks`` order. A node sends slice ``k`` up once slice ``k`` has arrived from
    all below it (the reduction); the root, having all of slice ``k``, sends it down, and
    each node forwards a slice down as it arrives. ``split_cap_Bps`` caps, on the wire, each
    message a rank sends to another rank of its server, except those a tree's root sends:
    NCCL splits every other rank's thread block of a channel in two, one part reducing up
    while the other broadcasts down ([NCCL] src/device/all_reduce.h ``runTreeSplit``), and
    the root's works whole (default: no cap); ``cap_Bps`` and ``net_cap_Bps`` as
    :func:`all_reduce`'s. Default costs: :func:`nccl_costs` ``("tree", "simple",
    "nvlink")``; other parameters as :func:`all_reduce`. Streamed (``model``), each hop is
    its first slice, which the hops it feeds wait for, and the rest of its slices as one
    flow after it (:func:`~flowsim.collectives.dag._tree_all_reduce`); LL and LL128 trees
    always stream, with zero-byte starts.
    """
    what = "tree_all_reduce"
    _check_caps(what, split_cap_Bps=split_cap_Bps, cap_Bps=cap_Bps, net_cap_Bps=net_cap_Bps)
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "tree")
    piece = size / 2 / channels
    n_slices = 1 if costs.streams and slices is None else _slices(slices, piece, what, MAX_PIPELINE_SLICES)
    # Each tree spans the ranks (n - 1 edges), crossed up and down by every slice.
    model = _model(model, channels * n_slices * 2 * 2 * (len(ranks) - 1), what)
    dag = _FlowDag("all_reduce", costs, servers, model)
    if offsets is not None and (not offsets or any(int(k) != k or k < 0 for k in offsets)):
        raise InputError(f"{what}: offsets must be a non-empty list of integers >= 0, got {offsets!r}")
    if chains is not None:
        if offsets is not None:
            raise InputError(f"{what}: give offsets or chains, not both")
        chains = [tuple(order) for order in chains]
        if not chains or any(sorted(order) != sorted(ranks) for order in chains):
            raise InputError(f"{what}: chains must be a non-empty list of orders of the ranks, each rank once")
    streamed = model == "stream" and not costs.streams
    groups = None if servers is None else _group_by_server(ranks, servers, what)
    _tree_all_reduce(dag, ranks, groups, piece if streamed else piece / n_slices,
                     channels, 1 if streamed else n_slices, None if offsets is None else [int(k) for k in offsets],
                     split_cap_Bps, cap_Bps, net_cap_Bps, n_slices if streamed else 0, chains)
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
            return _stream_ring(dag, [order] * channels, chunk, n_steps, ready, phase, n_slices)
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

    ``model`` as :func:`broadcast`. Other parameters as :func:`all_reduce`; by default
    slices are NCCL's NVLS chunk (:data:`NVLS_CHUNK_BYTES`), at most
    :data:`MAX_PIPELINE_SLICES`, since the four messages of a slice follow each other.
    """
    return _nvls("nvls_all_reduce", "all_reduce", ranks, size_bytes, switch, channels, slices, costs, model,
                 reduce=True, gather=True)

def _nvls(
    what: str, collective: str, ranks: Ranks, size_bytes: float, switch: str, channels: int, slices: int | None,
    costs: CollectiveCosts | None, model: str, *, reduce: bool, gather: bool,
) -> Workload:
    """NVLS through ``switch`` over chunks of ``S / n``: the reduction of each chunk into its
    owner (``reduce``), then the owner's store and the switch's multicast (``gather``); both
    are the all-reduce, one alone reduce-scatter or all-gather."""
    if costs is None:
        costs = nvls_costs("nvlink4")
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    if not isinstance(switch, str) or switch in ranks:
        raise InputError(f"{what}: switch must be the NVSwitch's node name, not a rank, got {switch!r}")
    n = len(ranks)
    chunk = size / n / channels
    n_slices = _slices(slices, chunk, what, MAX_PIPELINE_SLICES, NVLS_CHUNK_BYTES)
    piece = chunk / n_slices
    _steps_only(model, channels * n * n_slices * (n + 1) * (reduce + gather), what)
    dag = _FlowDag(collective, costs, None)
    gather_step = 2 if reduce else 0
    for c in range(channels):
        for j, owner in enumerate(ranks):
            last: dict[str, int] = {}
            for k in range(n_slices):
                label = f"ch{c}.chunk{j}.sl{k}"
                ready: list[int] = []
                if reduce:
                    reduced = [
                        _in_order(dag, last, f"reduce.r{i}", label, r, switch, piece, [], 0, c)
                        for i, r in enumerate(ranks)
                    ]
                    ready = [_in_order(dag, last, "result", label, switch, owner, piece, reduced, 1, c)]
                if gather:
                    store = _in_order(dag, last, "store", label, owner, switch, piece, ready, gather_step, c)
                    for i, r in enumerate(ranks):
                        _in_order(dag, last, f"multicast.r{i}", label, switch, r, piece, [store], gather_step + 1, c)
    return dag.workload(collective)

def nvls_reduce_scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    switch: str,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NVLS reduce-scatter through the NVSwitch node ``switch`` (one server).

    ``S`` is the total (``n`` chunks of ``S / n``, as nccl-tests counts it). For every
    chunk ``j``, channel and slice: each rank sends its copy to the switch (``reduce.r{i}``);
    once all have, the switch sends the sum to rank ``j`` (``result``): the first half of
    :func:`nvls_all_reduce`, whose parameters these are.
    """
    return _nvls("nvls_reduce_scatter", "reduce_scatter", ranks, size_bytes, switch, channels, slices, costs, model,
                 reduce=True, gather=False)


def nvls_all_gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    switch: str,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NVLS all-gather through the NVSwitch node ``switch`` (one server).

    ``S`` is the total (``n`` chunks of ``S / n``). For every chunk ``j``, channel and slice:
    rank ``j`` writes its chunk to the switch once (``store``) and the switch multicasts it to
    every rank (``multicast.r{i}``): the second half of :func:`nvls_all_reduce`, whose
    parameters these are.
    """
    return _nvls("nvls_all_gather", "all_gather", ranks, size_bytes, switch, channels, slices, costs, model,
                 reduce=False, gather=True)


def _switch_groups(
    what: str, ranks: tuple[str, ...], servers: Mapping[str, Hashable], switches: Mapping[Hashable, str], across: str
) -> tuple[list[tuple[str, ...]], list[Hashable], list[str]]:
    """The ranks by server (at least two, with as many ranks each), each server's key and
    its NVSwitch in ``switches``; an :class:`InputError` saying what is missing."""
    groups = _servers_alike(what, ranks, servers, f"{across} (use nvls)")
    keys = [servers[group[0]] for group in groups]
    for key in keys:
        if key not in switches:
            raise InputError(f"{what}: server {key!r} has no switch in `switches`")
    return groups, keys, [switches[key] for key in keys]


def _reduce_into(dag: _FlowDag, last: dict[str, int], label: str, group: Sequence[str], index: Mapping[str, int],
                 switch: str, g: int, owner: str, piece: float, c: int, send: _Send = _in_order) -> int:
    """NVLS's reduction of one chunk inside server ``g``: every rank's copy into ``switch``
    (``reduce.r{i}``), then the sum to ``owner`` (``result.s{g}``), whose message (or start,
    with a streamed ``send``) it returns."""
    reduced = [send(dag, last, f"reduce.r{index[r]}", label, r, switch, piece, [], 0, c) for r in group]
    return send(dag, last, f"result.s{g}", label, switch, owner, piece, reduced, 1, c)


def _multicast(dag: _FlowDag, last: dict[str, int], label: str, group: Sequence[str], index: Mapping[str, int],
               switch: str, g: int, owner: str, piece: float, deps: list[int], c: int,
               send: _Send = _in_order) -> None:
    """NVLS's broadcast of one chunk inside server ``g`` once ``deps`` are in: ``owner``
    writes it to ``switch`` (``store.s{g}``), which multicasts it to every rank
    (``multicast.r{i}``)."""
    store = send(dag, last, f"store.s{g}", label, owner, switch, piece, deps, 4, c)
    for r in group:
        send(dag, last, f"multicast.r{index[r]}", label, switch, r, piece, [store], 5, c)


def _chunk_slices(
    dag: _FlowDag, channels: int, per_server: int, n_slices: int
) -> Iterator[tuple[int, int, str, dict[str, int]]]:
    """``(channel, chunk, label, last)`` for every slice of every chunk of every channel that
    the caller lays out message by message (``last`` as :func:`_in_order`'s, one per chunk);
    from :data:`TILE_FROM_SLICE` on, once a slice is the one before it moved on, the rest of
    the chunk's slices are copies of it (:meth:`_FlowDag.repeat_last`)."""
    for c in range(channels):
        for j in range(per_server):
            last: dict[str, int] = {}
            unit = 0
            for k in range(n_slices):
                if k == TILE_FROM_SLICE and dag.repeat_last(unit, n_slices - k, f"all_reduce.ch{c}.chunk{j}.sl", k - 1):
                    break  # every later slice is the last one moved on
                start = len(dag)
                yield c, j, f"ch{c}.chunk{j}.sl{k}", last
                unit = len(dag) - start


#: Slices of a channel's chunk that :func:`nvls_tree_all_reduce` lays out message by message:
#: the first has no predecessor, the second follows the first's different layout, so from
#: the fourth on a slice is the one before moved on (checked), and the rest are copies.
TILE_FROM_SLICE = 4


def nvls_tree_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    switches: Mapping[Hashable, str],
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
    tree_cap_Bps: float = math.inf,
) -> Workload:
    """NVLSTree all-reduce (NCCL >= 2.18): NVLS inside each server, trees across servers.

    Every server has the same number ``m`` of ranks; local rank ``j`` (in ``ranks`` order)
    of each server owns chunk ``j`` (``S / m``). For every channel, chunk and slice: inside
    each server every rank sends its copy to the server's switch (``reduce.r{i}``) and the
    switch sends the sum to the owner (``result``); the owners of chunk ``j`` across servers
    all-reduce it over NCCL's double binary tree of servers (each tree carries half: up to
    the root, then down, ``up.t{t}`` and ``down.t{t}``); then each owner writes the total to
    its switch (``store``), which multicasts it to the server's ranks (``multicast.r{i}``).
    Each message waits for its own previous slice; the tree's hops between servers pay the
    inter-server step latency from when their inputs are in, in the shadow of the slices
    before them (NCCL's proxy keeps ``NCCL_STEPS`` sends in flight).

    Parameters
    ----------
    servers : mapping of str to hashable
        Server of each rank (at least two servers).
    switches : mapping of hashable to str
        The NVSwitch node of each server.
    costs : CollectiveCosts
        ``base_s`` once (NVLS's latency inside the servers), ``inter_step_s`` per tree hop
        between servers; ``wire_efficiency`` (``nvlsEfficiency``) applies to the switch
        messages, the tree's messages go at full payload. Default :func:`nvls_costs`
        ``("nvlink4")`` with no inter-server step latency.
    tree_cap_Bps : float
        Rate cap of each tree message (NCCL's per-channel NVLSTree bandwidth).

    ``model`` as :func:`broadcast`; slices as :func:`nvls_all_reduce`.
    """
    what = "nvls_tree_all_reduce"
    if costs is None:
        costs = nvls_costs("nvlink4")
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    groups, _, switch_of = _switch_groups(what, ranks, servers, switches, "NVLSTree runs across servers")
    per_server = len(groups[0])
    _check_caps(what, tree_cap_Bps=tree_cap_Bps)
    chunk = size / per_server / channels
    n_slices = _slices(slices, chunk, what, MAX_PIPELINE_SLICES, NVLS_CHUNK_BYTES)
    n_servers = len(groups)
    model = _model(model, channels * per_server * n_slices * n_servers * (2 * per_server + 6), what)
    dag_servers = {**servers, **{switch_of[g]: servers[group[0]] for g, group in enumerate(groups)}}
    dag = _FlowDag("all_reduce", costs, dag_servers, model)
    index = {r: i for i, r in enumerate(ranks)}
    trees = _double_binary_tree(n_servers)
    shapes = [_tree_shape(parent) for parent in trees]
    send, piece, n_slices = _sliced(model, chunk, n_slices)
    for c, j, label, last in _chunk_slices(dag, channels, per_server, n_slices):
        owners = [group[j] for group in groups]
        results = [
            _reduce_into(dag, last, label, group, index, switch_of[g], g, owners[g], piece, c, send)
            for g, group in enumerate(groups)
        ]
        totals: list[list[int]] = [[] for _ in groups]
        for t, (parent, (children, order)) in enumerate(zip(trees, shapes, strict=True)):
            root = order[0]
            up: dict[int, int] = {}
            at_root: list[int] = []
            for g in reversed(order):
                inputs = [results[g]] + [up[child] for child in children[g]]
                if g == root:
                    at_root = inputs
                    totals[g].extend(inputs)
                    continue
                up[g] = send(dag, last, f"up.t{t}.s{g}", label, owners[g], owners[parent[g]], piece / 2,
                             inputs, 2, c, wire_efficiency=1.0, cap_Bps=tree_cap_Bps)
            # The root sends this tree's half down once this tree's reduction is in:
            # the other tree's messages into the same server are no input of it.
            down: dict[int, list[int]] = {root: at_root}
            for g in order:
                for child in children[g]:
                    message = send(dag, last, f"down.t{t}.s{child}", label, owners[g], owners[child],
                                   piece / 2, down[g], 3, c, wire_efficiency=1.0, cap_Bps=tree_cap_Bps)
                    down[child] = [message]
                    totals[child].append(message)
        for g, group in enumerate(groups):
            _multicast(dag, last, label, group, index, switch_of[g], g, owners[g], piece, totals[g], c, send)
    return dag.workload("all_reduce")


def nvls_sharp_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    switches: Mapping[Hashable, str],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NVLS all-reduce across servers with the network reducing between them (IB SHARP,
    NCCL's NVLS with CollNet): NVLS inside each server, the fabric's switches across.

    Every server has the same number ``m`` of ranks; local rank ``j`` (in ``ranks`` order)
    of each server owns chunk ``j`` (``S / m``). For every channel, chunk and slice: inside
    each server every rank sends its copy to the server's switch (``reduce.r{i}``) and the
    switch sends the sum to the owner (``result``); each owner sends it into the network
    (``up``, to the first switch of its path in ``sharp[j]``), every switch of the
    aggregation tree sends the sum of its inputs on to the next (``up.{switch}``) once they
    are in, and the root returns the total down the same tree (``down.{switch}``, then
    ``down`` to each owner); each owner writes it to its server's switch (``store``), which
    multicasts it to the server's ranks (``multicast.r{i}``). Each message waits for its own
    previous slice. The message into the network pays NCCL's one network latency
    (``costs.inter_step_s``); the rest of the round trip none.

    Parameters
    ----------
    servers, switches
        As :func:`nvls_tree_all_reduce`.
    sharp : sequence of mappings of hashable to sequence of str
        Per chunk ``j`` (one per local rank): for each server, the network switches its
        owner's message climbs, from the first (the owner's leaf) to the root, which every
        server's path ends at; the paths of two servers that meet share the rest.
    costs : CollectiveCosts
        Default :func:`nvls_sharp_costs` ``("nvlink4")``.

    ``model`` as :func:`broadcast`; slices as :func:`nvls_all_reduce`.
    """
    groups, switch_of, trees, dag, index, channels, n_slices, piece, send = _nvls_sharp_setup(
        "nvls_sharp_all_reduce", "all_reduce", ranks, size_bytes, servers, switches, sharp, channels, slices, costs,
        model, "the network reduces across servers")
    per_server = len(groups[0])
    for c, j, label, last in _chunk_slices(dag, channels, per_server, n_slices):
        owners = [group[j] for group in groups]
        results = [[_reduce_into(dag, last, label, group, index, switch_of[g], g, owners[g], piece, c, send)]
                   for g, group in enumerate(groups)]
        backs = _through_sharp(dag, last, label, c, owners, trees[j], results, piece, send)
        for g, group in enumerate(groups):
            _multicast(dag, last, label, group, index, switch_of[g], g, owners[g], piece, [backs[g]], c, send)
    return dag.workload("all_reduce")


def _nvls_sharp_setup(
    what: str, collective: str, ranks: Ranks, size_bytes: float, servers: Mapping[str, Hashable],
    switches: Mapping[Hashable, str], sharp: Sequence[Mapping[Hashable, Sequence[str]]], channels: int,
    slices: int | None, costs: CollectiveCosts | None, model: str, alone: str,
) -> tuple[list[tuple[str, ...]], list[str], list[tuple[list[tuple[str, ...]], list[str]]], _FlowDag, dict[str, int],
           int, int, float, _Send]:
    """What NVLS across servers (``what``, of ``collective``) lays out on: the ranks by server
    (an :class:`InputError` saying ``alone`` where they are in one), each server's NVSwitch,
    one aggregation tree per local rank, the DAG (each network switch its own place), each
    rank's index, the channels, the slices of a channel's chunk (``S / m``), a slice's bytes
    and the sender (:func:`_sliced`); costs default to :func:`nvls_sharp_costs`."""
    if costs is None:
        costs = nvls_sharp_costs("nvlink4")
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    groups, keys, switch_of = _switch_groups(what, ranks, servers, switches, alone)
    per_server = len(groups[0])
    trees = _sharp_trees(sharp, keys, per_server, what)
    chunk = size / per_server / channels
    n_slices = _slices(slices, chunk, what, MAX_PIPELINE_SLICES, NVLS_CHUNK_BYTES)
    n_servers = len(groups)
    model = _model(model, channels * per_server * n_slices * n_servers * (2 * per_server + 8), what)
    # Each network switch is its own place: every message to or from it leaves a server.
    fabric = {name for paths, _ in trees for path in paths for name in path}
    dag_servers = {**servers, **{switch_of[g]: keys[g] for g in range(n_servers)}, **{s: s for s in fabric}}
    dag = _FlowDag(collective, costs, dag_servers, model)
    send, piece, n_slices = _sliced(model, chunk, n_slices)
    return groups, switch_of, trees, dag, {r: i for i, r in enumerate(ranks)}, channels, n_slices, piece, send


def _through_sharp(dag: _FlowDag, last: dict[str, int], label: str, c: int, owners: Sequence[str],
                   tree: tuple[list[tuple[str, ...]], list[str]], results: Sequence[list[int]],
                   piece: float, send: _Send = _in_order) -> list[int]:
    """One chunk's round trip through the network's reduction tree (``tree`` as
    :func:`_sharp_trees` gives it): server ``g``'s owner sends its sum into the network once
    ``results[g]`` are in (``up.s{g}``, paying the network's step latency), every switch of the tree sends
    the sum of its inputs on (``up.{switch}``) once they are in, and the root returns the
    total down the same tree (``down.{switch}``, then ``down.s{g}`` to each owner); the
    owners' last messages, one per server. ``send`` lays each message out (:func:`_in_order`,
    or a stream's)."""
    every = [piece] * len(owners)
    top = _sharp_up(dag, last, label, c, owners, tree, results, every, send, reduce=True)
    return [back for back in _sharp_down(dag, last, label, c, owners, tree, top, every, send, multicast=True)
            if back is not None]


def _sharp_up(dag: _FlowDag, last: dict[str, int], label: str, c: int, owners: Sequence[str],
              tree: tuple[list[tuple[str, ...]], list[str]], deps: Sequence[list[int]], sent: Sequence[float],
              send: _Send, *, reduce: bool) -> list[int]:
    """The climb of one slice through the network's tree: server ``g``'s owner sends
    ``sent[g]`` bytes into the network once ``deps[g]`` are in (``up.s{g}``, none where it
    sends nothing), and every switch that got something sends on (``up.{switch}``) once its
    inputs are in: their sum where the network reduces (``reduce``, every input the same
    size), else all of them (a gather). The messages into the root."""
    paths, order = tree
    inputs: dict[str, list[int]] = {name: [] for name in order}
    held = dict.fromkeys(order, 0.0)
    for g, owner in enumerate(owners):
        if sent[g] > 0:
            inputs[paths[g][0]].append(send(dag, last, f"up.s{g}", label, owner, paths[g][0], sent[g], deps[g],
                                            2, c, wire_efficiency=1.0))
            held[paths[g][0]] = sent[g] if reduce else held[paths[g][0]] + sent[g]
    parent = {path[i]: path[i + 1] for path in paths for i in range(len(path) - 1)}
    for name in order[:-1]:  # leaves first, the root last
        if inputs[name]:
            inputs[parent[name]].append(
                send(dag, last, f"up.{name}", label, name, parent[name], held[name], inputs[name], 2, c,
                     wire_efficiency=1.0, step_latency_s=0.0)
            )
            held[parent[name]] = held[name] if reduce else held[parent[name]] + held[name]
    return inputs[order[-1]]


def _sharp_down(dag: _FlowDag, last: dict[str, int], label: str, c: int, owners: Sequence[str],
                tree: tuple[list[tuple[str, ...]], list[str]], top: list[int], kept: Sequence[float],
                send: _Send, *, multicast: bool) -> list[int | None]:
    """The descent of one slice from the root of the network's tree once ``top`` is in:
    each server's owner gets its ``kept[g]`` bytes (``down.s{g}``), and every switch passes
    on what the servers below it get (``down.{switch}``): the slice once where the network
    multicasts it (``multicast``: an all-reduce, an all-gather, ``kept`` the slice for
    every server), else the sum of their shares (a reduce-scatter). Each owner's last
    message, None where it gets nothing."""
    paths, order = tree
    below = dict.fromkeys(order, 0.0)
    for g, path in enumerate(paths):
        for name in path:
            below[name] = max(below[name], kept[g]) if multicast else below[name] + kept[g]
    parent = {path[i]: path[i + 1] for path in paths for i in range(len(path) - 1)}
    total = {order[-1]: top}
    for name in reversed(order[:-1]):  # the root's children first
        if below[name] > 0:
            total[name] = [send(dag, last, f"down.{name}", label, parent[name], name, below[name],
                                total[parent[name]], 3, c, wire_efficiency=1.0, step_latency_s=0.0)]
    return [send(dag, last, f"down.s{g}", label, paths[g][0], owner, kept[g], total[paths[g][0]], 3, c,
                 wire_efficiency=1.0, step_latency_s=0.0) if kept[g] > 0 else None
            for g, owner in enumerate(owners)]


def _rail_shares(n_servers: int, n_slices: int) -> list[list[float]]:
    """Per slice of a rail (each server's share of it, one server after another, as NCCL's
    CollNet Direct and NVLS kernels walk ``railGridOffset`` over ``nNodes x countPerRank``),
    the fraction of the slice each server's share makes up (exact: integer overlaps)."""
    return [[max(0, min((k + 1) * n_servers, (g + 1) * n_slices) - max(k * n_servers, g * n_slices)) / n_servers
             for g in range(n_servers)] for k in range(n_slices)]


def collnet_direct_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    heads: Sequence[int] | None = None,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NCCL's CollNet Direct all-reduce: the network reduces across servers (IB SHARP), direct
    NVLink copies gather and spread each chunk inside them ([NCCL] src/device/all_reduce.h,
    ``RunWorkColl`` for ``NCCL_ALGO_COLLNET_DIRECT``: scatter, reduce and send, receive and
    broadcast, gather).

    Every server has the same number ``m`` of ranks and heads at the same local indices
    ``heads`` (default every rank, as where each GPU has its NIC); chunk ``j`` (``S / h`` for
    ``h`` heads) belongs to head ``heads[j]`` of each server. For every channel, chunk and
    slice: each other rank of a server sends its copy to the head (``scatter.r{i}``); once
    they are in, the head sends the sum into the network and gets the total back (as
    :func:`nvls_sharp_all_reduce`, over ``sharp[j]``); then it sends the total to each other
    rank (``bcast.r{i}``). Each message waits for its own previous slice. The copies inside a
    server pay ``costs.intra_step_s``, the message into the network ``costs.inter_step_s``,
    the rest of the round trip none.

    Parameters
    ----------
    servers : mapping of str to hashable
        Server of each rank (at least two servers).
    sharp : sequence of mappings of hashable to sequence of str
        Per chunk ``j`` (one per head): for each server, the network switches its head's
        message climbs, as :func:`nvls_sharp_all_reduce`'s.
    heads : sequence of int, optional
        The heads' local indices (in ``ranks`` order within a server), distinct.
    costs : CollectiveCosts
        Default :func:`collnet_costs` ``("collnet_direct", m)``.

    ``model`` as :func:`broadcast` (streamed, each message is its chunk's slices after its
    first); slices as :func:`nvls_all_reduce`.
    """
    what = "collnet_direct_all_reduce"
    groups = _servers_alike(what, _check_ranks(ranks, what), servers, "the network reduces across servers")
    per_server = len(groups[0])
    heads = list(range(per_server)) if heads is None else list(heads)
    if not heads or len(set(heads)) != len(heads) or not all(
            isinstance(h, int) and 0 <= h < per_server for h in heads):
        raise InputError(f"{what}: heads must be distinct local indices in [0, {per_server}), got {heads!r}")
    trees, dag, index, channels, n_slices, piece, send = _collnet_setup(
        what, groups, ranks, size_bytes, servers, sharp, len(heads), len(heads), channels, slices, costs, model)
    for c, j, label, last in _chunk_slices(dag, channels, len(heads), n_slices):
        owners = [group[heads[j]] for group in groups]
        # A server of one rank has nothing to gather: its head sends its own data.
        copies = [[send(dag, last, f"scatter.r{index[r]}", label, r, owner, piece, [], 0, c)
                   for r in group if r != owner] for group, owner in zip(groups, owners, strict=True)]
        backs = _through_sharp(dag, last, label, c, owners, trees[j], copies, piece, send)
        for group, owner, back in zip(groups, owners, backs, strict=True):
            for r in group:
                if r != owner:
                    send(dag, last, f"bcast.r{index[r]}", label, owner, r, piece, [back], 4, c)
    return dag.workload("all_reduce")


def collnet_chain_all_reduce(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    offsets: Sequence[int] | None = None,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NCCL's CollNet Chain all-reduce: the network reduces across servers (IB SHARP), a
    chain of each server's ranks inside them ([NCCL] src/device/all_reduce.h, ``RunWorkColl``
    for ``NCCL_ALGO_COLLNET_CHAIN``: reduce up the chain, its head sends to the network and
    receives, then the total goes down the chain).

    Channel ``c`` carries ``S / channels``. In every server its chain is the server's ranks
    (in ``ranks`` order) rotated by ``offsets[c]`` (``c`` without them; at least
    ``channels`` of them), and the chain's first rank is its head. For every channel and
    slice: the chain's last rank sends its copy to the rank before it (``reduce.r{i}``, ``i``
    the sender), each rank passes the sum on once the one from below is in, the head sends
    the server's sum into the network and gets the total back (as
    :func:`nvls_sharp_all_reduce`, over ``sharp[h]`` for a head at local index ``h``), and the
    total goes down the chain (``bcast.r{i}``, ``i`` the receiver). Each message waits for its
    own previous slice; the hops inside a server pay ``costs.intra_step_s``, the message into
    the network ``costs.inter_step_s``, the rest of the round trip none.

    Parameters
    ----------
    servers, sharp
        As :func:`collnet_direct_all_reduce`; ``sharp`` has one tree per local rank.
    costs : CollectiveCosts
        Default :func:`collnet_costs` ``("collnet_chain", m)``.

    ``model`` as :func:`broadcast` (streamed, each message is its chunk's slices after its
    first); slices as :func:`nvls_all_reduce`.
    """
    what = "collnet_chain_all_reduce"
    groups = _servers_alike(what, _check_ranks(ranks, what), servers, "the network reduces across servers")
    per_server = len(groups[0])
    trees, dag, index, channels, n_slices, piece, send = _collnet_setup(
        what, groups, ranks, size_bytes, servers, sharp, per_server, 1, channels, slices, costs, model)
    rotations = list(range(channels)) if offsets is None else list(offsets)
    if len(rotations) < channels or not all(isinstance(k, int) and k >= 0 for k in rotations):
        raise InputError(f"{what}: offsets must be {channels} or more integers >= 0, got {offsets!r}")
    for c, _, label, last in _chunk_slices(dag, channels, 1, n_slices):
        shift = rotations[c] % per_server
        chains = [group[shift:] + group[:shift] for group in groups]
        sums = []
        for chain in chains:
            below: list[int] = []
            for k in range(len(chain) - 1, 0, -1):  # from the chain's end up to its head
                below = [send(dag, last, f"reduce.r{index[chain[k]]}", label, chain[k], chain[k - 1], piece,
                              below, 0, c)]
            sums.append(below)
        backs = _through_sharp(dag, last, label, c, [chain[0] for chain in chains], trees[shift], sums, piece, send)
        for chain, back in zip(chains, backs, strict=True):
            above = [back]
            for k in range(1, len(chain)):
                above = [send(dag, last, f"bcast.r{index[chain[k]]}", label, chain[k - 1], chain[k], piece,
                              above, 4, c)]
    return dag.workload("all_reduce")


def collnet_direct_all_gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    heads: Sequence[int] | None = None,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NCCL's CollNet Direct all-gather (NCCL >= 2.20.5): the network gathers each rail across
    servers (IB SHARP's all-gather, the plugin's ``iallgather``), direct NVLink copies spread
    it inside them ([NCCL] v2.30.7-1 src/device/all_gather.h, ``RunWorkColl`` for
    ``NCCL_ALGO_COLLNET_DIRECT``: send to the network, receive and broadcast, receive).

    ``S`` is the total (``n`` shares of ``S / n``). Every rank is a head with its own NIC
    ("AllGather/ReduceScatter requires 1:1 GPU:NIC"): rail ``j`` is the shares of local rank
    ``heads[j]`` of every server, one server's after another, ``S / m`` for ``m`` ranks a
    server. For every channel, rail and slice of the rail: each server whose share the slice
    holds sends its part into the network (``up.s{g}``), every switch of the tree passes on
    what came from below (``up.{switch}``), and the root sends the slice down the tree to
    every server's head of the rail (``down.{switch}``, ``down.s{g}``), which copies it to
    each other rank of its server (``bcast.r{i}``). Each message waits for its own previous
    slice.

    Parameters
    ----------
    servers, sharp, costs
        As :func:`collnet_direct_all_reduce`; ``sharp[j]`` is rail ``j``'s tree.
    heads : sequence of int, optional
        Every local index once (default in order): the order of the rails.

    ``model`` and slices as :func:`collnet_direct_all_reduce`.
    """
    return _collnet_rails("collnet_direct_all_gather", "all_gather", ranks, size_bytes, servers, sharp, heads,
                          channels, slices, costs, model)


def collnet_direct_reduce_scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    heads: Sequence[int] | None = None,
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NCCL's CollNet Direct reduce-scatter (NCCL >= 2.20.5): direct NVLink copies gather each
    rail inside a server, the network reduces it across servers and scatters it (IB SHARP's
    reduce-scatter, the plugin's ``ireducescatter``; [NCCL] v2.30.7-1
    src/device/reduce_scatter.h, ``RunWorkColl`` for ``NCCL_ALGO_COLLNET_DIRECT``: scatter
    to the heads, reduce and send to the network, receive).

    ``S`` is each rank's input, the total (``n`` shares of ``S / n``, as nccl-tests counts
    it); rails and heads as :func:`collnet_direct_all_gather`. For every channel, rail and
    slice of the rail: each other rank of a server sends its copy to the server's head of
    the rail (``scatter.r{i}``), the head sends the server's sum into the network, the tree
    reduces it (``up.s{g}``, ``up.{switch}``) and the root sends each server's share of the
    slice down to its head (``down.{switch}``, ``down.s{g}``). Parameters as
    :func:`collnet_direct_all_gather`.
    """
    return _collnet_rails("collnet_direct_reduce_scatter", "reduce_scatter", ranks, size_bytes, servers, sharp, heads,
                          channels, slices, costs, model)


def _collnet_rails(what: str, collective: str, ranks: Ranks, size_bytes: float, servers: Mapping[str, Hashable],
                   sharp: Sequence[Mapping[Hashable, Sequence[str]]], heads: Sequence[int] | None, channels: int,
                   slices: int | None, costs: CollectiveCosts | None, model: str) -> Workload:
    """CollNet Direct's all-gather or reduce-scatter (``collective``), one rail per head."""
    groups = _servers_alike(what, _check_ranks(ranks, what), servers, "the network gathers across servers")
    per_server = len(groups[0])
    rails = list(range(per_server)) if heads is None else list(heads)
    if sorted(rails) != list(range(per_server)) or not all(isinstance(h, int) for h in rails):
        raise InputError(f"{what}: every rank is a head (a NIC each): heads must be each of 0..{per_server - 1} "
                         f"once, got {heads!r}")
    trees, dag, index, channels, n_slices, piece, send = _collnet_setup(
        what, groups, ranks, size_bytes, servers, sharp, per_server, per_server, channels, slices, costs, model,
        collective)

    def spread(last: dict[str, int], label: str, c: int, g: int, owner: str, back: int) -> None:
        for r in groups[g]:  # the head's direct copies to each other rank of its server
            if r != owner:
                send(dag, last, f"bcast.r{index[r]}", label, owner, r, piece, [back], 4, c)

    def collect(last: dict[str, int], label: str, c: int, g: int, owner: str) -> list[int]:
        return [send(dag, last, f"scatter.r{index[r]}", label, r, owner, piece, [], 0, c)
                for r in groups[g] if r != owner]

    return _rail_slices(dag, collective, channels, [[group[h] for group in groups] for h in rails], trees, n_slices,
                        piece, send, spread, collect)


def _rail_slices(dag: _FlowDag, collective: str, channels: int, rails: Sequence[Sequence[str]],
                 trees: Sequence[tuple[list[tuple[str, ...]], list[str]]], n_slices: int, piece: float, send: _Send,
                 spread: Callable[[dict[str, int], str, int, int, str, int], None],
                 collect: Callable[[dict[str, int], str, int, int, str], list[int]]) -> Workload:
    """Every channel's slices of every rail (``rails[j]``: its owner in each server, its tree
    ``trees[j]``) through the network, as CollNet Direct and NVLS across servers run an
    all-gather or reduce-scatter (``collective``). All-gather: the servers whose shares a
    slice holds send them up (:func:`_rail_shares`), the tree gathers and multicasts the
    slice to every owner, and ``spread(last, label, c, g, owner, back)`` spreads it inside
    server ``g``. Reduce-scatter: ``collect(last, label, c, g, owner)`` brings server ``g``'s
    copies to its owner (the messages the climb waits for), the tree reduces them and sends
    each owner its server's share of the slice."""
    n_servers = len(rails[0])
    shares = _rail_shares(n_servers, n_slices)
    for c in range(channels):
        for j, owners in enumerate(rails):
            last: dict[str, int] = {}
            for k, share in enumerate(shares):
                label = f"ch{c}.rail{j}.sl{k}"
                parts = [piece * f for f in share]
                if collective == "all_gather":
                    top = _sharp_up(dag, last, label, c, owners, trees[j], [[]] * n_servers, parts, send,
                                    reduce=False)
                    backs = _sharp_down(dag, last, label, c, owners, trees[j], top, [piece] * n_servers, send,
                                        multicast=True)
                    for g, (owner, back) in enumerate(zip(owners, backs, strict=True)):
                        assert back is not None  # every server gets the whole slice
                        spread(last, label, c, g, owner, back)
                else:
                    deps = [collect(last, label, c, g, owner) for g, owner in enumerate(owners)]
                    top = _sharp_up(dag, last, label, c, owners, trees[j], deps, [piece] * n_servers, send,
                                    reduce=True)
                    _sharp_down(dag, last, label, c, owners, trees[j], top, parts, send, multicast=False)
    return dag.workload(collective)


def nvls_sharp_all_gather(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    switches: Mapping[Hashable, str],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NVLS all-gather across servers with the network gathering between them (NCCL >= 2.20.5,
    NVLS with CollNet; [NCCL] v2.30.7-1 src/device/all_gather.h, ``RunWorkColl`` for
    ``NCCL_ALGO_NVLS``, "NVLS + IB SHARP": send to the network, receive and multicast,
    gather).

    ``S`` is the total; rail ``j`` is the shares of local rank ``j`` of every server, one
    server's after another. For every channel, rail and slice of the rail: each server whose
    share the slice holds sends its part into the network from its rank ``j``, the tree
    gathers it and sends it down to every server's rank ``j`` (as
    :func:`collnet_direct_all_gather`), which writes it to its server's switch (``store``),
    which multicasts it to the server's ranks (``multicast.r{i}``). Parameters as
    :func:`nvls_sharp_all_reduce`.
    """
    return _nvls_rails("nvls_sharp_all_gather", "all_gather", ranks, size_bytes, servers, switches, sharp, channels,
                       slices, costs, model)


def nvls_sharp_reduce_scatter(
    ranks: Ranks,
    size_bytes: float,
    *,
    servers: Mapping[str, Hashable],
    switches: Mapping[Hashable, str],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]],
    channels: int = 1,
    slices: int | None = None,
    costs: CollectiveCosts | None = None,
    model: str = "auto",
) -> Workload:
    """NVLS reduce-scatter across servers with the network reducing and scattering between
    them (NCCL >= 2.20.5, NVLS with CollNet; [NCCL] v2.30.7-1 src/device/reduce_scatter.h,
    ``RunWorkColl`` for ``NCCL_ALGO_NVLS``: scatter, reduce and send to the network,
    receive).

    ``S`` is each rank's input, the total; rails as :func:`nvls_sharp_all_gather`. For every
    channel, rail and slice of the rail: inside each server every rank sends its copy to the
    switch (``reduce.r{i}``), which sends the sum to rank ``j`` (``result``); rank ``j``
    sends it into the network, the tree reduces it and the root sends each server's share of
    the slice down to its rank ``j`` (as :func:`collnet_direct_reduce_scatter`). Parameters
    as :func:`nvls_sharp_all_reduce`.
    """
    return _nvls_rails("nvls_sharp_reduce_scatter", "reduce_scatter", ranks, size_bytes, servers, switches, sharp,
                       channels, slices, costs, model)


def _nvls_rails(what: str, collective: str, ranks: Ranks, size_bytes: float, servers: Mapping[str, Hashable],
                switches: Mapping[Hashable, str], sharp: Sequence[Mapping[Hashable, Sequence[str]]], channels: int,
                slices: int | None, costs: CollectiveCosts | None, model: str) -> Workload:
    """NVLS's all-gather or reduce-scatter (``collective``) across servers, one rail per local rank."""
    groups, switch_of, trees, dag, index, channels, n_slices, piece, send = _nvls_sharp_setup(
        what, collective, ranks, size_bytes, servers, switches, sharp, channels, slices, costs, model,
        "the network gathers across servers")

    def spread(last: dict[str, int], label: str, c: int, g: int, owner: str, back: int) -> None:
        _multicast(dag, last, label, groups[g], index, switch_of[g], g, owner, piece, [back], c, send)

    def collect(last: dict[str, int], label: str, c: int, g: int, owner: str) -> list[int]:
        return [_reduce_into(dag, last, label, groups[g], index, switch_of[g], g, owner, piece, c, send)]

    return _rail_slices(dag, collective, channels, [[group[j] for group in groups] for j in range(len(groups[0]))],
                        trees, n_slices, piece, send, spread, collect)


def _collnet_setup(
    what: str, groups: list[tuple[str, ...]], ranks: Ranks, size_bytes: float, servers: Mapping[str, Hashable],
    sharp: Sequence[Mapping[Hashable, Sequence[str]]], n_trees: int, parts: int, channels: int, slices: int | None,
    costs: CollectiveCosts | None, model: str, collective: str = "all_reduce",
) -> tuple[list[tuple[list[tuple[str, ...]], list[str]]], _FlowDag, dict[str, int], int, int, float, _Send]:
    """What CollNet Direct and Chain (``what``, of ``collective``) share: ``n_trees``
    aggregation trees, the DAG (each network switch its own place), each rank's index, the
    channels, the slices a channel's ``parts`` are laid out in, a slice's bytes, and the
    sender: streamed, every message is its chunk's slices at once (one slice laid out,
    :func:`_first_slice_sender`); costs default to :func:`collnet_costs`."""
    per_server = len(groups[0])
    if costs is None:
        costs = collnet_costs(what.removesuffix(f"_{collective}"), per_server)
    ranks, size, channels, costs = _prepare(what, ranks, size_bytes, channels, costs, "ring")
    trees = _sharp_trees(sharp, [servers[group[0]] for group in groups], n_trees, what)
    chunk = size / parts / channels
    n_slices = _slices(slices, chunk, what, MAX_PIPELINE_SLICES)
    model = _model(model, channels * parts * n_slices * len(groups) * (2 * per_server + 4), what)
    fabric = {name for paths, _ in trees for path in paths for name in path}
    dag = _FlowDag(collective, costs, {**servers, **{s: s for s in fabric}}, model)
    send, piece, n_slices = _sliced(model, chunk, n_slices)
    return trees, dag, {r: i for i, r in enumerate(ranks)}, channels, n_slices, piece, send


def _servers_alike(what: str, ranks: tuple[str, ...], servers: Mapping[str, Hashable],
                   alone: str) -> list[tuple[str, ...]]:
    """``ranks`` by server: at least two servers (else an :class:`InputError` saying ``alone``
    of one) with as many ranks each."""
    groups = _group_by_server(ranks, servers, what)
    if len(groups) < 2:
        raise InputError(f"{what}: the ranks are in one server; {alone}")
    if len({len(g) for g in groups}) > 1:
        raise InputError(f"{what}: every server needs the same number of ranks, got {sorted({len(g) for g in groups})}")
    return groups


def _sharp_trees(
    sharp: Sequence[Mapping[Hashable, Sequence[str]]], keys: Sequence[Hashable], per_server: int, what: str
) -> list[tuple[list[tuple[str, ...]], list[str]]]:
    """Per chunk: each server's path of network switches, and the tree's switches with every
    one after those that send into it (the root last); an :class:`InputError` naming the
    chunk and server where a path is missing, empty, ends at another root, or leaves a
    switch by two ways."""
    if not isinstance(sharp, Sequence) or len(sharp) != per_server:
        raise InputError(f"{what}: sharp needs one aggregation tree per local rank ({per_server})")
    trees = []
    for j, tree in enumerate(sharp):
        paths = []
        for key in keys:
            path = tuple(tree.get(key, ())) if isinstance(tree, Mapping) else ()
            if not path or not all(isinstance(name, str) for name in path):
                raise InputError(f"{what}: sharp[{j}] gives server {key!r} no path of switch names")
            paths.append(path)
        root = paths[0][-1]
        parent: dict[str, str] = {}
        for key, path in zip(keys, paths, strict=True):
            if path[-1] != root:
                raise InputError(f"{what}: sharp[{j}]: server {key!r} climbs to {path[-1]!r}, not the root {root!r}")
            for below, above in zip(path, path[1:], strict=False):
                if parent.setdefault(below, above) != above:
                    raise InputError(f"{what}: sharp[{j}]: switch {below!r} sends on to both "
                                     f"{parent[below]!r} and {above!r}")
        depth = {name: len(path) - i for path in paths for i, name in enumerate(path)}
        if parent.keys() & {root}:
            raise InputError(f"{what}: sharp[{j}]: the root {root!r} sends on to {parent[root]!r}")
        order = sorted(depth, key=lambda name: (-depth[name], name))
        trees.append((paths, order))
    return trees


def _send(ranks: Ranks, size_bytes: float, **options) -> Workload:
    """:func:`send` with ``ranks = (src, dst)``, as the table calls every builder."""
    ranks = _check_ranks(ranks, "send")
    if len(ranks) != 2:
        raise InputError(f"send takes ranks = (src, dst), got {len(ranks)} ranks")
    return send(ranks[0], ranks[1], size_bytes, **options)


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of one collective: its builder and the layout options it takes.

    Attributes
    ----------
    collective, name : str
    builder : callable
        ``builder(ranks, size_bytes, *, costs, model, **options)`` returning a Workload.
    options : frozenset of str
        The builder's layout keywords besides ``costs`` and ``model``: ``channels`` and
        ``slices`` (independent copies and pipelining), ``orders`` (one ring order per
        channel), ``servers`` (rank to server, for per-step latencies and grouping),
        ``root`` (broadcast and reduce), ``switch`` (NVLS: the NVSwitch node), ``offsets``
        (the tree: each channel's rotation of a server's chain), ``chains`` (the tree on
        an NVLink mesh: each channel's chains), ``caps`` (rings,
        chains and trees: ``cap_Bps`` and ``net_cap_Bps``, each message's rate limit),
        ``symmetry`` (large rings: laid out by classes of hops,
        :class:`~flowsim.collectives.dag.HopSymmetry`).
    """

    collective: str
    name: str
    builder: Callable[..., Workload]
    options: frozenset[str]

    @property
    def ring_ordered(self) -> bool:
        """Whether it takes one ring order per channel."""
        return "orders" in self.options


_RING = frozenset({"channels", "slices", "orders", "servers", "rails", "caps", "symmetry"})
_CHAIN = frozenset({"channels", "slices", "orders", "servers", "rails", "root", "caps"})

#: Every algorithm of every collective, keyed by (collective, algorithm); the first listed
#: for a collective is its default.
ALGORITHM_TABLE: dict[tuple[str, str], Algorithm] = {
    (a.collective, a.name): a
    for a in (
        Algorithm("all_reduce", "ring", all_reduce, _RING),
        Algorithm("all_reduce", "tree", tree_all_reduce,
                  frozenset({"channels", "slices", "servers", "offsets", "chains", "caps"})),
        Algorithm("all_reduce", "hierarchical", hierarchical_all_reduce, frozenset({"channels", "slices", "servers"})),
        Algorithm("all_reduce", "nvls", nvls_all_reduce, frozenset({"channels", "slices", "switch"})),
        Algorithm("all_reduce", "nvls_tree", nvls_tree_all_reduce, frozenset({"channels", "slices", "servers"})),
        Algorithm("all_reduce", "nvls_sharp", nvls_sharp_all_reduce, frozenset({"channels", "slices", "servers"})),
        Algorithm("all_reduce", "collnet_direct", collnet_direct_all_reduce,
                  frozenset({"channels", "slices", "servers"})),
        Algorithm("all_reduce", "collnet_chain", collnet_chain_all_reduce,
                  frozenset({"channels", "slices", "servers", "offsets"})),
        Algorithm("reduce_scatter", "ring", reduce_scatter, _RING),
        Algorithm("reduce_scatter", "nvls", nvls_reduce_scatter, frozenset({"channels", "slices", "switch"})),
        Algorithm("reduce_scatter", "pat", pat_reduce_scatter, frozenset({"channels", "slices", "servers"})),
        Algorithm("reduce_scatter", "nvls_sharp", nvls_sharp_reduce_scatter,
                  frozenset({"channels", "slices", "servers"})),
        Algorithm("reduce_scatter", "collnet_direct", collnet_direct_reduce_scatter,
                  frozenset({"channels", "slices", "servers"})),
        Algorithm("all_gather", "ring", all_gather, _RING),
        Algorithm("all_gather", "nvls", nvls_all_gather, frozenset({"channels", "slices", "switch"})),
        Algorithm("all_gather", "pat", pat_all_gather, frozenset({"channels", "slices", "servers"})),
        Algorithm("all_gather", "nvls_sharp", nvls_sharp_all_gather, frozenset({"channels", "slices", "servers"})),
        Algorithm("all_gather", "collnet_direct", collnet_direct_all_gather,
                  frozenset({"channels", "slices", "servers"})),
        Algorithm("broadcast", "ring", broadcast, _CHAIN),
        Algorithm("reduce", "ring", reduce, _CHAIN),
        Algorithm("all_to_all", "p2p", all_to_all, frozenset({"servers"})),
        Algorithm("gather", "p2p", gather, frozenset({"servers", "root"})),
        Algorithm("scatter", "p2p", scatter, frozenset({"servers", "root"})),
        Algorithm("hypercube", "p2p", hypercube, frozenset({"servers"})),
        Algorithm("all_to_all_v", "p2p", all_to_all_v, frozenset({"servers"})),
        Algorithm("send", "p2p", _send, frozenset({"channels", "slices", "servers"})),
    )
}

#: Algorithms with a stream form (``model="stream"``), which NCCL's choice is held to when the
#: stream is asked for (a broadcast's or reduce's ``ring`` is a chain, which streams too).
STREAMED = frozenset({"ring", "tree", "nvls_tree", "nvls_sharp", "collnet_direct", "collnet_chain"})

#: Collectives NCCL runs as grouped point-to-point sends of ``S / n`` bytes, one per peer
#: ([NCCL] v2.30.7-1 ``src/enqueue.cc``): an all-to-all's, a gather's into its root and a
#: scatter's out of it, and an alltoallv's, ``S / n`` on average (:func:`all_to_all_v_bytes`).
PEER_SPLIT = frozenset({"all_to_all", "gather", "scatter", "all_to_all_v"})

#: Algorithms :func:`build_collective` knows, per collective (the default first).
ALGORITHMS: dict[str, tuple[str, ...]] = {}
for _collective, _name in ALGORITHM_TABLE:
    ALGORITHMS[_collective] = (*ALGORITHMS.get(_collective, ()), _name)

#: Collective names, as nccl-tests' binaries call them (``all_reduce_perf`` ...).
COLLECTIVES = tuple(ALGORITHMS)

# Other spellings people use for them: NCCL's own (``ncclAllReduce``, ``NCCL_ALGO``'s
# ``allreduce:``), nccl-tests' binaries (``alltoall_perf``, ``sendrecv_perf``, whose busiest
# pair :func:`flowsim.collectives.send_pair` finds) and hyphens; keyed without '-' and '_'.
_SPELLINGS = {name.replace("_", ""): name for name in COLLECTIVES} | {"sendrecv": "send"}


def collective_name(text: str) -> str:
    """The collective ``text`` names, spelled as :data:`COLLECTIVES` spells it; case, '-'
    and '_' do not matter, nor a trailing ``_perf``. Errors name the valid collectives.

    >>> collective_name("all-reduce"), collective_name("alltoall_perf"), collective_name("SendRecv")
    ('all_reduce', 'all_to_all', 'send')
    """
    key = text.strip().lower().removesuffix("_perf").replace("-", "").replace("_", "")
    if key not in _SPELLINGS:
        raise InputError(f"unknown collective {text!r}; valid ones: {', '.join(COLLECTIVES)}")
    return _SPELLINGS[key]


#: NCCL's names of algorithms whose flowsim name differs by more than case and '-' for '_'
#: (``NCCL_ALGO=NVLSTree``, and the same spelling in NCCL's TUNING lines).
_NCCL_ALGORITHM_NAMES = {"nvlstree": "nvls_tree", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain"}


def algorithm_name(text: str) -> str:
    """An algorithm as flowsim or NCCL spell it (``Ring``, ``NVLSTree``, ``nvls-tree``), in
    flowsim's spelling; whether the collective has it is checked where it is used.

    >>> [algorithm_name(name) for name in ("Ring", "NVLSTree", "nvls-sharp", "CollNetDirect")]
    ['ring', 'nvls_tree', 'nvls_sharp', 'collnet_direct']
    """
    key = text.strip().lower().replace("-", "_")
    return _NCCL_ALGORITHM_NAMES.get(key, key)


def protocol_name(text: str) -> str:
    """A protocol as flowsim or NCCL spell it (``LL128``, ``Simple``), in flowsim's spelling;
    whether it is one is checked where it is used.

    >>> protocol_name("LL128"), protocol_name(" Simple")
    ('ll128', 'simple')
    """
    return text.strip().lower()


def check_algorithm(collective: str, algorithm: object) -> str:
    """``algorithm`` for ``collective`` as flowsim or NCCL spell it, or ``"auto"`` (NCCL's
    choice), in flowsim's spelling; an error names the valid ones, ``auto`` among them.

    >>> check_algorithm("all_reduce", "NVLSTree"), check_algorithm("all_gather", "auto")
    ('nvls_tree', 'auto')
    """
    name = algorithm_name(algorithm) if isinstance(algorithm, str) else algorithm
    if name == "auto":
        return name
    valid = ALGORITHMS.get(collective)
    if valid is None:
        raise InputError(f"unknown collective {collective!r}; valid ones: {', '.join(COLLECTIVES)}")
    if name not in valid:
        raise InputError(f"no algorithm {algorithm!r} for {collective}; valid ones: auto, {', '.join(valid)}")
    return str(name)


def check_protocol(protocol: object) -> str:
    """``protocol`` as flowsim or NCCL spell it (``LL128``, ``Simple``), or ``"auto"`` (NCCL's
    choice), in flowsim's spelling; an error names the valid ones.

    >>> check_protocol("LL128"), check_protocol("auto")
    ('ll128', 'auto')
    """
    name = protocol_name(protocol) if isinstance(protocol, str) else protocol
    if name not in (*PROTOCOLS, "auto"):
        raise InputError(f"unknown protocol {protocol!r}; valid ones: auto, {', '.join(PROTOCOLS)}")
    return str(name)


def algorithm_of(collective: str, algorithm: str | None = None) -> Algorithm:
    """The table entry of ``collective`` and ``algorithm`` (default: the collective's first)."""
    return ALGORITHM_TABLE[(collective, resolve_algorithm(collective, algorithm))]


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
    builder = algorithm_of(collective, algorithm).builder
    allowed, required = keyword_options(builder, skip=2)
    check_options(options, allowed, f"{collective} ({builder.__name__})", required)
    return builder(ranks, size_bytes, **options)
