"""The network a simulation runs on: typed nodes, directed links, servers.

A :class:`Topology` is frozen and holds arrays ready for the kernels; build one with a
:class:`TopologyBuilder` (which checks names as they come) or take one from
:mod:`flowsim.presets` / :mod:`flowsim.fabrics`.

Modelling conventions
---------------------
* A link is directed. A full-duplex cable is two links (:meth:`TopologyBuilder.add_cable`).
  A shared medium, such as a socket's host memory whose bandwidth reads and writes share, is
  one link marked ``shared`` that routes may cross in either direction; a staged copy through
  host memory crosses it twice (write, then read) and so uses twice its rate there.
* Parallel cables between the same two nodes are one link whose capacity is their sum
  (for instance the DGX-1's double NVLinks).
* A *server* is a group of nodes inside one chassis or NVLink domain (a DGX, an NVL72 rack).
  Routing between nodes of one server uses its NVLink and host links; between servers it
  leaves through a NIC. Each node may name the NIC it uses to leave (``node_nic``): a GPU's
  rail NIC, a CPU's front-end port.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

import numpy as np

from flowsim.errors import InputError, first_repeat, flag, is_real
from flowsim.hardware import LinkTier, link_technology
from flowsim.strings import CodedStrings

__all__ = ["NETWORK_SWITCH_KINDS", "LinkTier", "NodeKind", "Topology", "TopologyBuilder"]


class NodeKind(IntEnum):
    """What a node is. The solver sees links only; kinds drive routing and presets."""

    GPU = 0
    CPU = 1
    """A CPU socket and its PCIe root complex."""
    HOST_MEMORY = 2
    PCIE_SWITCH = 3
    NVSWITCH = 4
    NIC = 5
    IB_LEAF = 6
    IB_SPINE = 7
    IB_CORE = 8
    ETH_SWITCH = 9
    STORAGE = 10


#: Kinds of the switches of InfiniBand and Ethernet networks.
NETWORK_SWITCH_KINDS = (NodeKind.IB_LEAF, NodeKind.IB_SPINE, NodeKind.IB_CORE, NodeKind.ETH_SWITCH)


def checked_nccl_env(pairs, what: str) -> tuple[tuple[str, str], ...]:
    """``pairs`` (a mapping or (name, value) pairs) as a tuple of (``NCCL_*`` name, string
    value); an :class:`~flowsim.errors.InputError` naming ``what`` and the variable otherwise."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    checked = []
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise InputError(f"{what}: expected (NCCL_NAME, value) pairs, got {item!r}")
        key, value = item
        if not isinstance(key, str) or not key.startswith("NCCL_"):
            raise InputError(f"{what}: {key!r} is not an NCCL_ variable")
        if not isinstance(value, str):
            raise InputError(f"{what}: {key} must be a string, got {value!r}")
        checked.append((key, value))
    return tuple(checked)


def _read_only(values, dtype) -> np.ndarray:
    arr = np.array(values, dtype=dtype, order="C")
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Topology:
    """Nodes, directed links and servers, as read-only arrays.

    Attributes
    ----------
    node_names : tuple of str
    node_kind : int64[n_nodes]
        :class:`NodeKind` values.
    node_server : int64[n_nodes]
        Server of each node, -1 for nodes outside servers (network switches, storage).
    node_nic : int64[n_nodes]
        The NIC a node uses to leave its server, -1 for none.
    server_names : tuple of str
    server_p2p : bool[n_servers]
        Whether GPUs of the server can copy peer-to-peer over PCIe; without it their PCIe
        traffic is staged through host memory.
    server_net_latency_s : float64[n_servers], optional (empty: all 0)
        Latency the server's network plugin reports to NCCL for its NICs (NCCL's
        ``ncclNetProperties_t.latency``, docs/hardware.md §5.1), which NCCL's tuner adds to
        every inter-server step; 0 (the default) for InfiniBand and RoCE, whose transport
        reports none.
    server_step_latency_s : float64[n_servers], optional (empty: ``server_net_latency_s``)
        Latency each step between the server and another pays on the wire on top of NCCL's
        own per-step figure (``hwLat``), where it differs from what the plugin reports:
        aws-ofi-nccl reports a value chosen to steer NCCL's choice of algorithm, not one
        measured (docs/model.md "Latency the network plugin reports").
    server_nic_ports : int64[n_servers], optional (empty: all 1)
        Ports of each of the server's compute NICs, whose links carry the ports' summed
        speed: NCCL before 2.20 takes each port as a network device of its own, and from
        2.20 merges them (``NCCL_IB_MERGE_NICS``, docs/hardware.md §7.4).
    server_gpu_sm : int64[n_servers], optional (empty: all 0)
        Compute capability x 10 of the server's GPUs, as NCCL reads it (89 for an RTX 4090);
        0 where the GPU model is unknown (NCCL's tuner then goes by the GPUs' NVLinks).
    link_names : tuple of str
    link_src, link_dst : int64[n_links]
        Node ids at each end. For a shared link the direction is nominal.
    link_capacity_Bps : float64[n_links]
        Capacity (B/s per direction), finite and > 0.
    link_latency_s : float64[n_links]
        Latency (s), finite and >= 0.
    link_technology : tuple of str
        Technology tag of each link (see :mod:`flowsim.hardware`).
    link_tier : int64[n_links]
        :class:`~flowsim.hardware.LinkTier` values.
    link_shared : bool[n_links]
        True for a shared medium that routes may cross in either direction.
    nccl_env : tuple of (str, str), optional (empty: none)
        The NCCL environment the cluster's software stack sets (a cloud image's profile, a
        system file's ``[nccl] env``): NCCL's tuner follows it where the caller's own
        environment does not name the variable. Traces do not keep it (what it steered is
        in the workload's tags: the algorithm, protocol and channels that ran).

    Construction checks every array (lengths, ids, capacities, latencies, unique names) and
    raises :class:`~flowsim.errors.InputError` naming the offending node or link.
    """

    node_names: tuple[str, ...]
    node_kind: np.ndarray
    node_server: np.ndarray
    node_nic: np.ndarray
    server_names: tuple[str, ...]
    server_p2p: np.ndarray
    link_names: tuple[str, ...]
    link_src: np.ndarray
    link_dst: np.ndarray
    link_capacity_Bps: np.ndarray
    link_latency_s: np.ndarray
    link_technology: tuple[str, ...]
    link_tier: np.ndarray
    link_shared: np.ndarray
    server_net_latency_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    server_gpu_sm: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    nccl_env: tuple[tuple[str, str], ...] = ()
    server_step_latency_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    server_nic_ports: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if len(self.server_net_latency_s) == 0:
            object.__setattr__(self, "server_net_latency_s", np.zeros(len(self.server_names)))
        if len(self.server_step_latency_s) == 0:
            object.__setattr__(self, "server_step_latency_s", np.array(self.server_net_latency_s, dtype=np.float64))
        if len(self.server_gpu_sm) == 0:
            object.__setattr__(self, "server_gpu_sm", np.zeros(len(self.server_names), dtype=np.int64))
        if len(self.server_nic_ports) == 0:
            object.__setattr__(self, "server_nic_ports", np.ones(len(self.server_names), dtype=np.int64))
        for name, dtype in (
            ("node_kind", np.int64), ("node_server", np.int64), ("node_nic", np.int64),
            ("server_p2p", np.bool_), ("server_net_latency_s", np.float64), ("server_gpu_sm", np.int64),
            ("server_step_latency_s", np.float64), ("server_nic_ports", np.int64), ("link_src", np.int64),
            ("link_dst", np.int64),
            ("link_capacity_Bps", np.float64), ("link_latency_s", np.float64),
            ("link_tier", np.int64), ("link_shared", np.bool_),
        ):
            object.__setattr__(self, name, _read_only(getattr(self, name), dtype))
        for name in ("node_names", "server_names", "link_names", "link_technology"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "nccl_env", checked_nccl_env(self.nccl_env, "topology nccl_env"))
        self._check()

    def _check(self) -> None:
        n_nodes, n_links, n_servers = len(self.node_names), len(self.link_names), len(self.server_names)
        for what, arrays, n in (
            ("node", ("node_kind", "node_server", "node_nic"), n_nodes),
            ("server", ("server_p2p", "server_net_latency_s", "server_gpu_sm", "server_step_latency_s",
                        "server_nic_ports"), n_servers),
            (
                "link",
                ("link_src", "link_dst", "link_capacity_Bps", "link_latency_s", "link_technology",
                 "link_tier", "link_shared"),
                n_links,
            ),
        ):
            for name in arrays:
                value = getattr(self, name)
                if len(value) != n or (isinstance(value, np.ndarray) and value.ndim != 1):
                    raise InputError(f"{name} must have one entry per {what} ({n}), got {np.shape(value)}")
        for what, names in (("node", self.node_names), ("link", self.link_names), ("server", self.server_names)):
            _check_unique(names, what)
        kinds = {int(k) for k in NodeKind}
        bad = np.flatnonzero(~np.isin(self.node_kind, list(kinds)))
        if bad.size:
            i = int(bad[0])
            raise InputError(f"node {self.node_names[i]!r} has unknown kind {int(self.node_kind[i])}")
        for ids, n, what in ((self.node_server, n_servers, "server"), (self.node_nic, n_nodes, "NIC")):
            bad = np.flatnonzero((ids < -1) | (ids >= n))
            if bad.size:
                i = int(bad[0])
                raise InputError(f"node {self.node_names[i]!r} refers to unknown {what} id {int(ids[i])}")
        leaves = np.flatnonzero(self.node_nic >= 0)
        bad = leaves[self.node_kind[self.node_nic[leaves]] != NodeKind.NIC]
        if bad.size:
            i = int(bad[0])
            raise InputError(
                f"node {self.node_names[i]!r} leaves through {self.node_names[int(self.node_nic[i])]!r}, "
                "which is not a NIC"
            )
        # A node leaves its own server (routing looks the NIC up among that server's nodes).
        bad = leaves[self.node_server[self.node_nic[leaves]] != self.node_server[leaves]]
        if bad.size:
            i = int(bad[0])
            raise InputError(
                f"node {self.node_names[i]!r} leaves through {self.node_names[int(self.node_nic[i])]!r}, "
                "a NIC outside its server"
            )
        for end, ids in (("starts", self.link_src), ("ends", self.link_dst)):
            bad = np.flatnonzero((ids < 0) | (ids >= n_nodes))
            if bad.size:
                i = int(bad[0])
                raise InputError(
                    f"link {self.link_names[i]!r} {end} at unknown node id {int(ids[i])} "
                    f"(there are {n_nodes} nodes)"
                )
        loops = np.flatnonzero(self.link_src == self.link_dst)
        if loops.size:
            raise InputError(f"link {self.link_names[int(loops[0])]!r} starts and ends at the same node")
        cap = self.link_capacity_Bps
        bad = np.flatnonzero(~(cap > 0) | ~np.isfinite(cap))
        if bad.size:
            i = int(bad[0])
            raise InputError(
                f"link {self.link_names[i]!r} has capacity {float(cap[i])!r} B/s; capacities must be finite and > 0"
            )
        lat = self.link_latency_s
        bad = np.flatnonzero(~(lat >= 0) | ~np.isfinite(lat))
        if bad.size:
            i = int(bad[0])
            raise InputError(
                f"link {self.link_names[i]!r} has latency {float(lat[i])!r} s; latencies must be finite and >= 0"
            )
        for column, what in (("server_net_latency_s", "network latency"), ("server_step_latency_s", "step latency")):
            net = getattr(self, column)
            bad = np.flatnonzero(~(net >= 0) | ~np.isfinite(net))
            if bad.size:
                i = int(bad[0])
                raise InputError(f"server {self.server_names[i]!r} has {what} {float(net[i])!r} s; "
                                 "it must be finite and >= 0")
        bad = np.flatnonzero(self.server_gpu_sm < 0)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"server {self.server_names[i]!r} has compute capability {int(self.server_gpu_sm[i])}; "
                             "it must be >= 0 (0: unknown)")
        bad = np.flatnonzero(self.server_nic_ports < 1)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"server {self.server_names[i]!r} has {int(self.server_nic_ports[i])} ports a NIC; "
                             "it must be >= 1")
        bad = np.flatnonzero(~np.isin(self.link_tier, [int(t) for t in LinkTier]))
        if bad.size:
            i = int(bad[0])
            raise InputError(f"link {self.link_names[i]!r} has unknown tier {int(self.link_tier[i])}")

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_links(self) -> int:
        return len(self.link_names)

    @property
    def n_servers(self) -> int:
        return len(self.server_names)

    @cached_property
    def node_index(self) -> Mapping[str, int]:
        """Node name -> node id."""
        return {name: i for i, name in enumerate(self.node_names)}

    @cached_property
    def link_index(self) -> Mapping[str, int]:
        """Link name -> link id."""
        return {name: i for i, name in enumerate(self.link_names)}

    def node_id(self, name: str) -> int:
        """Id of the node called ``name``."""
        try:
            return self.node_index[name]
        except KeyError:
            raise InputError(f"unknown node {name!r}") from None

    def node_ids(self, nodes: Iterable[str | int] | np.ndarray) -> np.ndarray:
        """Node ids (int64) of node names or ids, checked."""
        if isinstance(nodes, np.ndarray) and np.issubdtype(nodes.dtype, np.integer):
            ids = nodes.astype(np.int64, copy=False).ravel()
        elif isinstance(nodes, CodedStrings):  # each distinct name looked up once
            return self.node_ids(list(nodes.categories))[nodes.codes]
        else:
            nodes = nodes if isinstance(nodes, (list, tuple, np.ndarray)) else list(nodes)
            try:  # known names, the usual case: in one pass
                ids = np.fromiter(map(self.node_index.__getitem__, nodes), dtype=np.int64, count=len(nodes))
            except (KeyError, TypeError):  # ids, or an unknown name: one by one, naming it
                ids = np.array(
                    [self.node_id(n) if isinstance(n, str) else _int_id(n) for n in nodes], dtype=np.int64
                )
        bad = np.flatnonzero((ids < 0) | (ids >= self.n_nodes))
        if bad.size:
            raise InputError(f"unknown node id {int(ids[bad[0]])} (there are {self.n_nodes} nodes)")
        return ids

    def not_gpu(self, nodes: Sequence[str]) -> str | None:
        """Why ``nodes`` (names of this topology's nodes) are not all GPUs: the first that is
        not, and its kind; None where every one is."""
        kinds = self.node_kind[self.node_ids(nodes)]
        other = np.flatnonzero(kinds != NodeKind.GPU)
        if not other.size:
            return None
        return f"{nodes[int(other[0])]!r} is not a GPU (a {NodeKind(int(kinds[other[0]])).name.lower()} node)"

    def link_id(self, name: str) -> int:
        """Id of the link called ``name``."""
        try:
            return self.link_index[name]
        except KeyError:
            raise InputError(f"unknown link {name!r}") from None

    def nodes_of_kind(self, kind: NodeKind) -> np.ndarray:
        """Ids (int64, ascending) of the nodes of one kind."""
        return np.flatnonzero(self.node_kind == NodeKind(kind)).astype(np.int64)

    def gpus(self) -> np.ndarray:
        """Ids (int64, ascending) of all GPUs."""
        return self.nodes_of_kind(NodeKind.GPU)

    def server_nodes(self, server: int | str) -> np.ndarray:
        """Ids (int64, ascending) of the nodes of one server (by id or name)."""
        if isinstance(server, str):
            if server not in self.server_names:
                raise InputError(f"unknown server {server!r}")
            server = self.server_names.index(server)
        return np.flatnonzero(self.node_server == server).astype(np.int64)

    def links_from(self, node: int | str) -> np.ndarray:
        """Ids of the links leaving ``node`` (shared links touching it count both ways)."""
        i = self.node_id(node) if isinstance(node, str) else int(node)
        return np.flatnonzero((self.link_src == i) | (self.link_shared & (self.link_dst == i))).astype(np.int64)

    def link_between(self, src: int | str, dst: int | str) -> int:
        """The id of the link from ``src`` to ``dst`` (error if none or several)."""
        a = self.node_id(src) if isinstance(src, str) else int(src)
        b = self.node_id(dst) if isinstance(dst, str) else int(dst)
        forward = (self.link_src == a) & (self.link_dst == b)
        found = np.flatnonzero(forward | (self.link_shared & (self.link_src == b) & (self.link_dst == a)))
        if found.size != 1:
            raise InputError(
                f"{found.size} links from {self.node_names[a]!r} to {self.node_names[b]!r}, expected one"
            )
        return int(found[0])


def _int_id(node) -> int:
    if isinstance(node, (bool, np.bool_)) or not isinstance(node, (int, np.integer)):
        raise InputError(f"nodes are given by name or integer id, got {node!r}")
    return int(node)


def _copied_link_name(name: str, other: Topology, link: int, node_names: list[str]) -> str | None:
    """The default name of a copied link (``"a->b"`` / ``"a<->b"`` of the new node names),
    or None when the link has a name of its own."""
    src, dst = int(other.link_src[link]), int(other.link_dst[link])
    arrow = "<->" if other.link_shared[link] else "->"
    if name != f"{other.node_names[src]}{arrow}{other.node_names[dst]}":
        return None
    return f"{node_names[src]}{arrow}{node_names[dst]}"


def _check_unique(names: tuple[str, ...], what: str) -> None:
    repeat = first_repeat(names)
    if repeat is not None:
        raise InputError(f"duplicate {what} name {names[repeat[1]]!r}")


class TopologyBuilder:
    """Collects nodes, links and servers, then :meth:`build` makes a :class:`Topology`.

    Names are checked as they are added: a duplicate node or link name, or a link to a node
    not yet added, raises :class:`~flowsim.errors.InputError` naming it. Capacities and
    latencies are checked by :class:`Topology` on :meth:`build`.

    Examples
    --------
    >>> b = TopologyBuilder()
    >>> s = b.add_server("box")
    >>> gpus = [b.add_node(f"gpu{i}", NodeKind.GPU, server=s) for i in range(2)]
    >>> b.add_cable("gpu0", "gpu1", 25e9, technology="nvlink4")
    (0, 1)
    >>> b.build().link_names
    ('gpu0->gpu1', 'gpu1->gpu0')
    """

    def __init__(self) -> None:
        self._node_index: dict[str, int] = {}
        self._node_kind: list[int] = []
        self._node_server: list[int] = []
        self._node_nic: list[int] = []
        self._server_names: list[str] = []
        self._server_p2p: list[bool] = []
        self._server_net_latency: list[float] = []
        self._server_step_latency: list[float] = []
        self._server_gpu_sm: list[int] = []
        self._server_nic_ports: list[int] = []
        self._link_index: dict[str, int] = {}
        self._link_src: list[int] = []
        self._link_dst: list[int] = []
        self._link_capacity: list[float] = []
        self._link_latency: list[float] = []
        self._link_technology: list[str] = []
        self._link_tier: list[int] = []
        self._link_shared: list[bool] = []

    @property
    def n_nodes(self) -> int:
        return len(self._node_kind)

    def add_server(
        self, name: str, *, p2p: bool = True, net_latency_s: float = 0.0, gpu_sm: int = 0,
        step_latency_s: float | None = None, nic_ports: int = 1,
    ) -> int:
        """Add a server (a chassis or NVLink domain); returns its id. ``net_latency_s``: what
        its network plugin reports to NCCL (:attr:`Topology.server_net_latency_s`);
        ``step_latency_s``: what its steps between servers pay on the wire on top of NCCL's
        figure (:attr:`Topology.server_step_latency_s`; default ``net_latency_s``);
        ``gpu_sm``: its GPUs' compute capability x 10, 0 unknown (:attr:`Topology.server_gpu_sm`);
        ``nic_ports``: ports of each of its compute NICs (:attr:`Topology.server_nic_ports`)."""
        if name in self._server_names:
            raise InputError(f"duplicate server name {name!r}")
        p2p = flag(f"server {name!r}: p2p", p2p)
        if step_latency_s is None:
            step_latency_s = net_latency_s
        for what, value in (("network latency", net_latency_s), ("step latency", step_latency_s)):
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise InputError(f"server {name!r}: {what} {value!r} s must be finite and >= 0")
        if isinstance(gpu_sm, bool) or not isinstance(gpu_sm, (int, np.integer)) or gpu_sm < 0:
            raise InputError(f"server {name!r}: compute capability {gpu_sm!r} must be an integer >= 0")
        if isinstance(nic_ports, bool) or not isinstance(nic_ports, (int, np.integer)) or nic_ports < 1:
            raise InputError(f"server {name!r}: ports a NIC {nic_ports!r} must be an integer >= 1")
        self._server_names.append(name)
        self._server_p2p.append(p2p)
        self._server_net_latency.append(float(net_latency_s))
        self._server_step_latency.append(float(step_latency_s))
        self._server_gpu_sm.append(int(gpu_sm))
        self._server_nic_ports.append(int(nic_ports))
        return len(self._server_names) - 1

    def add_node(self, name: str, kind: NodeKind | str, *, server: int = -1) -> int:
        """Add a node; returns its id. ``kind`` is a :class:`NodeKind` or its name, in any case
        (``"gpu"``, as scenario files write it)."""
        if name in self._node_index:
            raise InputError(f"duplicate node name {name!r}")
        if not -1 <= server < len(self._server_names):
            raise InputError(f"node {name!r}: unknown server id {server}")
        try:  # checked before anything is added, so that a refused node leaves no trace
            kind_id = int(NodeKind[kind.upper()] if isinstance(kind, str) else NodeKind(kind))
        except (KeyError, ValueError):
            raise InputError(
                f"node {name!r}: unknown kind {kind!r} (a NodeKind, or one of its names: "
                f"{', '.join(k.name.lower() for k in NodeKind)})"
            ) from None
        self._node_index[name] = len(self._node_kind)
        self._node_kind.append(kind_id)
        self._node_server.append(int(server))
        self._node_nic.append(-1)
        return self._node_index[name]

    def node(self, name: str) -> int:
        """Id of an added node."""
        try:
            return self._node_index[name]
        except KeyError:
            raise InputError(f"unknown node {name!r}") from None

    def set_nic(self, node: str, nic: str) -> None:
        """Make ``nic`` the NIC through which ``node`` leaves its server."""
        self._node_nic[self.node(node)] = self.node(nic)

    def add_link(
        self,
        src: str,
        dst: str,
        capacity_Bps: float,
        *,
        latency_s: float = 0.0,
        technology: str,
        tier: LinkTier | None = None,
        shared: bool = False,
        name: str | None = None,
    ) -> int:
        """Add one directed (or, with ``shared``, one shared) link; returns its id.

        ``tier`` defaults to the tier of a known ``technology``; an unknown technology tag
        needs it explicitly. The default name is ``"src->dst"`` (``"src<->dst"`` if shared).
        """
        if name is None:
            name = f"{src}<->{dst}" if shared else f"{src}->{dst}"
        if name in self._link_index:
            raise InputError(
                f"duplicate link name {name!r}; merge parallel cables into one link with their summed capacity"
            )
        for end, node in (("starts", src), ("ends", dst)):
            if node not in self._node_index:
                raise InputError(f"link {name!r} {end} at unknown node {node!r}")
        if tier is None:
            try:
                tier = link_technology(technology).tier
            except InputError as err:
                raise InputError(f"link {name!r}: {err}; or give the link's tier") from None
        # Converted before anything is added, so that a refused link leaves no trace. Only
        # numbers: float() would read "1e9" and True as numbers.
        if not (is_real(capacity_Bps) and is_real(latency_s)):
            raise InputError(
                f"link {name!r}: capacity_Bps and latency_s must be numbers, got {capacity_Bps!r} and {latency_s!r}"
            )
        capacity, latency = float(capacity_Bps), float(latency_s)
        try:
            tier_id = int(LinkTier(tier))
        except ValueError:
            raise InputError(f"link {name!r}: unknown tier {tier!r}") from None
        self._link_index[name] = len(self._link_src)
        self._link_src.append(self._node_index[src])
        self._link_dst.append(self._node_index[dst])
        self._link_capacity.append(capacity)
        self._link_latency.append(latency)
        self._link_technology.append(technology)
        self._link_tier.append(tier_id)
        self._link_shared.append(bool(shared))
        return self._link_index[name]

    def add_cable(
        self,
        a: str,
        b: str,
        capacity_Bps: float,
        *,
        latency_s: float = 0.0,
        technology: str,
        tier: LinkTier | None = None,
    ) -> tuple[int, int]:
        """Add a full-duplex cable as two links, ``a->b`` and ``b->a``; returns their ids."""
        return (
            self.add_link(a, b, capacity_Bps, latency_s=latency_s, technology=technology, tier=tier),
            self.add_link(b, a, capacity_Bps, latency_s=latency_s, technology=technology, tier=tier),
        )

    def add_topology(self, other: Topology, *, prefix: str, server_names: Iterable[str] | None = None) -> int:
        """Copy all of ``other`` in, node names prefixed; returns the first new node id.

        Links keep default names (``"a->b"`` of the new node names) or get their own prefixed.

        Servers of ``other`` come along, named ``server_names`` (default: prefixed too).
        """
        base_node = self.n_nodes
        server_names = (
            [prefix + s for s in other.server_names] if server_names is None else list(server_names)
        )
        if len(server_names) != other.n_servers:
            raise InputError(f"{len(server_names)} server names for {other.n_servers} servers")
        server_ids = np.array(
            [self.add_server(name, p2p=p2p, net_latency_s=net, gpu_sm=sm, step_latency_s=step, nic_ports=ports)
             for name, p2p, net, sm, step, ports in zip(
                server_names, other.server_p2p.tolist(), other.server_net_latency_s.tolist(),
                other.server_gpu_sm.tolist(), other.server_step_latency_s.tolist(), other.server_nic_ports.tolist(),
                strict=True)]
            + [-1],
            dtype=np.int64,
        )
        node_names = [prefix + n for n in other.node_names]
        for name in node_names:
            if name in self._node_index:
                raise InputError(f"duplicate node name {name!r}")
        link_names = [
            _copied_link_name(name, other, i, node_names) or prefix + name for i, name in enumerate(other.link_names)
        ]
        for name in link_names:
            if name in self._link_index:
                raise InputError(f"duplicate link name {name!r}")
        self._node_index.update(zip(node_names, range(base_node, base_node + other.n_nodes), strict=True))
        self._node_kind.extend(other.node_kind.tolist())
        self._node_server.extend(server_ids[other.node_server].tolist())
        self._node_nic.extend(np.where(other.node_nic >= 0, other.node_nic + base_node, -1).tolist())
        base_link = len(self._link_src)
        self._link_index.update(zip(link_names, range(base_link, base_link + other.n_links), strict=True))
        self._link_src.extend((other.link_src + base_node).tolist())
        self._link_dst.extend((other.link_dst + base_node).tolist())
        self._link_capacity.extend(other.link_capacity_Bps.tolist())
        self._link_latency.extend(other.link_latency_s.tolist())
        self._link_technology.extend(other.link_technology)
        self._link_tier.extend(other.link_tier.tolist())
        self._link_shared.extend(other.link_shared.tolist())
        return base_node

    def build(self, *, nccl_env: tuple[tuple[str, str], ...] = ()) -> Topology:
        """The checked, frozen :class:`Topology`; ``nccl_env``: :attr:`Topology.nccl_env`."""
        return Topology(
            nccl_env=nccl_env,
            node_names=tuple(self._node_index),
            node_kind=np.array(self._node_kind, dtype=np.int64),
            node_server=np.array(self._node_server, dtype=np.int64),
            node_nic=np.array(self._node_nic, dtype=np.int64),
            server_names=tuple(self._server_names),
            server_p2p=np.array(self._server_p2p, dtype=np.bool_),
            server_net_latency_s=np.array(self._server_net_latency, dtype=np.float64),
            server_gpu_sm=np.array(self._server_gpu_sm, dtype=np.int64),
            server_step_latency_s=np.array(self._server_step_latency, dtype=np.float64),
            server_nic_ports=np.array(self._server_nic_ports, dtype=np.int64),
            link_names=tuple(self._link_index),
            link_src=np.array(self._link_src, dtype=np.int64),
            link_dst=np.array(self._link_dst, dtype=np.int64),
            link_capacity_Bps=np.array(self._link_capacity, dtype=np.float64),
            link_latency_s=np.array(self._link_latency, dtype=np.float64),
            link_technology=tuple(self._link_technology),
            link_tier=np.array(self._link_tier, dtype=np.int64),
            link_shared=np.array(self._link_shared, dtype=np.bool_),
        )
