"""One server from its description: GPUs, their NVLink or PCIe fabric, host and NICs.

A :class:`ServerSpec` says what a server's owner knows about it (GPU count and model, NVSwitch
or NVLink mesh or PCIe only, the PCIe switches and which GPUs and NICs sit on each, CPU
sockets, NICs and front-end ports); :func:`build_server` turns it into a
:class:`~flowsim.topology.Topology`. Every preset of :mod:`flowsim.presets` is a
``ServerSpec``, and so is every system file (:mod:`flowsim.systemfile`): both are built here,
by the same code.

Modelling choices (sources in docs/hardware.md and :mod:`flowsim.presets`):

* The NVSwitch chips of one server are one ``nvswitch`` node: a GPU's link to it carries
  all its NVLinks (``nvlinks_per_gpu``), as in NCCL's topology graph.
* An NVLink mesh is one directed link per ordered GPU pair, of as many NVLinks as the pair
  has (parallel NVLinks are one link of their summed rate).
* A PCIe switch links at the PCIe rate to each of its GPUs and NICs and to its socket's root
  complex; a GPU on a CPU root port is a switch of its own. Host memory of a socket is one
  shared link; sockets are chained by their inter-socket link.
* On a Grace host (``cpu = "grace"``) each GPU also reaches its Grace over NVLink-C2C, and
  each Grace has its own front-end port; the Graces share no inter-socket link.

Node names: ``gpu{i}``, ``nvswitch``, ``cpu{s}``, ``mem{s}``, ``pcie{j}``, ``nic{r}`` (compute
NIC ``r``), ``fe{j}`` (front-end port).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowsim.errors import FieldError, InputError, blame, is_real, whole_number
from flowsim.hardware import (
    GPU_MODELS,
    HOST_MEMORY_TECHNOLOGIES,
    INTERSOCKET_TECHNOLOGIES,
    LinkTier,
    check_gpu_nvlink,
    gpu_compute_capability,
    gpu_model,
    link_rate,
    link_technology,
    nvlink_generation,
)
from flowsim.topology import NodeKind, Topology, TopologyBuilder, checked_nccl_env

__all__ = ["CPU_KINDS", "GPU_FABRICS", "MAX_NIC_PORTS", "PcieSwitch", "ServerSpec", "build_server"]

#: How a server's GPUs reach each other.
GPU_FABRICS = ("nvswitch", "nvlink_mesh", "pcie")

#: The most GPUs, CPU sockets and front-end ports a server may have: an NVLink domain reaches
#: 576 GPUs (docs/hardware.md §1.3), and a larger count is a typo that would take without end to build.
MAX_SERVER_PARTS = 576

#: The most ports a NIC may have (ConnectX cards have one or two; a larger count is a typo).
MAX_NIC_PORTS = 8

#: Host kinds: x86 sockets with PCIe root complexes, or Grace superchips (NVLink-C2C to GPUs).
CPU_KINDS = ("x86", "grace")


@dataclass(frozen=True)
class PcieSwitch:
    """One PCIe switch: the GPUs and compute NICs on it and the socket it hangs off."""

    gpus: tuple[int, ...]
    nics: tuple[int, ...] = ()
    socket: int | None = None
    """CPU socket; None spreads the switches evenly over the sockets in order."""


@dataclass(frozen=True)
class ServerSpec:
    """A server as its owner describes it.

    Attributes
    ----------
    name : str
        The server's name in the topology.
    gpu : str
        GPU model, as ``nvidia-smi`` names it in part (``"H100"``, ``"L40S"``).
    n_gpus : int
    gpu_fabric : {"nvswitch", "nvlink_mesh", "pcie"}
    nvlink : str or None
        NVLink generation (:func:`flowsim.hardware.nvlink_generation`) for NVSwitch and mesh.
    nvlinks_per_gpu : int or None
        NVLinks of a GPU into the NVSwitches; None: the generation's full count.
    nvlink_counts : tuple of tuple of int, or None
        NVLinks between GPU i and GPU j (a symmetric matrix, zero diagonal) of a mesh.
    p2p : bool
        GPUs copy peer-to-peer over PCIe; without, PCIe traffic is staged in host memory.
    pcie : str
        PCIe technology (``"pcie3"`` ... ``"pcie6"``).
    cpu : {"x86", "grace"}
    sockets : int
    intersocket : str or None
        Link technology between consecutive sockets (None on Grace hosts).
    memory : str
        Host-memory technology of one socket.
    switches : tuple of PcieSwitch
        Every GPU on exactly one switch; compute NICs numbered 0..n-1, each on one switch.
    gpu_nics : tuple of int, or None
        The compute NIC each GPU uses; None: a NIC on its own switch (spread evenly over the
        switch's GPUs), else one on its socket, else any, in turn.
    compute_nic, frontend_nic : str
        Port technologies of the compute NICs and of the front-end ports.
    frontend_ports : int
        Front-end (storage / in-band) Ethernet ports, spread over the sockets in turn.
    nic_kind : str
        ``"ib"``, ``"roce"`` or ``"efa"``: how the compute NICs talk (reported).
    net_latency_us : float
        Latency (us) the NICs' NCCL network plugin reports, which NCCL adds to each
        inter-server step (docs/hardware.md §5.1): 0 for InfiniBand and RoCE (NCCL's IB
        transport reports none); aws-ofi-nccl's figure of the instance for EFA.
    nic_ports : int
        Ports of each compute NIC, whose technology gives their summed speed (two 100 Gb/s
        ports: a 200 Gb/s NIC): NCCL before 2.20 takes each port as a network device of its
        own, from 2.20 it merges them (``NCCL_IB_MERGE_NICS``, docs/hardware.md §7.4).
    step_latency_us : float or None
        Latency (us) each step between servers pays on the wire on top of NCCL's own figure,
        where it differs from ``net_latency_us`` (None: the same): aws-ofi-nccl's figure is
        chosen to steer NCCL's choice, not measured (docs/model.md "Latency the network plugin
        reports").
    nccl_env : tuple of (str, str)
        The NCCL environment the platform's software stack sets (a cloud image's NCCL
        profile): what NCCL's tuner follows on it unless told otherwise
        (:attr:`flowsim.topology.Topology.nccl_env`).
    hosts : int
        Hosts the server's GPUs are split over, each running its own processes: 1, or for a
        rack-scale NVLink domain its compute trays (a GB200 NVL72 rack: 18 of 4 GPUs), which
        ``flowsim check`` matches with the hosts a log names.
    """

    name: str
    gpu: str
    n_gpus: int
    gpu_fabric: str
    pcie: str
    sockets: int
    intersocket: str | None
    memory: str
    switches: tuple[PcieSwitch, ...]
    compute_nic: str
    frontend_nic: str
    frontend_ports: int
    nvlink: str | None = None
    nvlinks_per_gpu: int | None = None
    nvlink_counts: tuple[tuple[int, ...], ...] | None = None
    p2p: bool = True
    cpu: str = "x86"
    gpu_nics: tuple[int, ...] | None = None
    nic_kind: str = "ib"
    net_latency_us: float = 0.0
    nccl_env: tuple[tuple[str, str], ...] = ()
    hosts: int = 1
    step_latency_us: float | None = None
    nic_ports: int = 1

    @property
    def n_nics(self) -> int:
        """Compute NICs."""
        return sum(len(s.nics) for s in self.switches)

    def grace_of(self, gpu: int) -> int:
        """On a Grace host, the socket (Grace) GPU ``gpu`` reaches over NVLink-C2C: the GPUs
        split evenly over the sockets in order."""
        return gpu // -(-self.n_gpus // self.sockets)

    @property
    def gpu_pcie(self) -> str:
        """The PCIe technology of the GPUs' own links: the server's (:attr:`pcie`), or the
        GPU's host interface where that is an older generation (an L40S, a Gen4 card, runs
        its Gen5 slot at Gen4; :data:`~flowsim.hardware.GPU_MODELS`). NICs and switch
        uplinks keep the server's."""
        model = gpu_model(self.gpu)
        if model is None or not self.pcie.startswith("pcie"):  # a host technology of another kind runs as given
            return self.pcie
        card = f"pcie{GPU_MODELS[model][1]}"
        return card if link_rate(card, figure="nominal") < link_rate(self.pcie, figure="nominal") else self.pcie

    @property
    def gpus_per_host(self) -> int:
        """GPUs of one host (:attr:`hosts`): the server's, or a compute tray's (4 of a GB200 NVL72 rack)."""
        return self.n_gpus // self.hosts

    def check(self) -> None:
        """Raise :class:`~flowsim.errors.InputError` naming the first inconsistent field: a
        :class:`~flowsim.errors.FieldError` carrying the field's name where one field is wrong,
        a plain one where only the whole server is (two GPUs no path joins)."""
        with blame("n_gpus"):
            n = whole_number("gpus", self.n_gpus)
        with blame("sockets"):
            whole_number("sockets", self.sockets)
        with blame("frontend_ports"):
            whole_number("frontend ports", self.frontend_ports, minimum=0)
        parts = (("n_gpus", "GPUs", n), ("sockets", "sockets", self.sockets),
                 ("frontend_ports", "front-end ports", self.frontend_ports))
        for field, what, count in parts:
            if count > MAX_SERVER_PARTS:
                raise FieldError(field, f"{count} {what}: a server has at most {MAX_SERVER_PARTS} (an NVLink "
                                        "domain's most GPUs, docs/hardware.md §1.3)")
        with blame("nic_ports"):
            if whole_number("ports a NIC", self.nic_ports) > MAX_NIC_PORTS:
                raise InputError(f"{self.nic_ports} ports a NIC: a NIC has at most {MAX_NIC_PORTS}")
        with blame("hosts"):
            if whole_number("hosts", self.hosts) > n or n % self.hosts:
                raise InputError(f"{self.hosts} hosts cannot split {n} GPUs evenly")
        latencies = [("net_latency_us", "network latency", self.net_latency_us)]
        if self.step_latency_us is not None:  # None: the network latency
            latencies.append(("step_latency_us", "step latency", self.step_latency_us))
        for field, what, value in latencies:
            if not (is_real(value) and math.isfinite(value) and value >= 0):
                raise FieldError(field, f"{what} {value!r} us must be a finite number >= 0")
        with blame("nccl_env"):
            checked_nccl_env(self.nccl_env, "NCCL environment")
        if self.gpu_fabric not in GPU_FABRICS:
            raise FieldError("gpu_fabric", f"unknown GPU fabric {self.gpu_fabric!r}; valid ones: "
                                           f"{', '.join(GPU_FABRICS)}")
        if self.cpu not in CPU_KINDS:
            raise FieldError("cpu", f"unknown CPU kind {self.cpu!r}; valid ones: {', '.join(CPU_KINDS)}")
        if self.gpu_fabric != "pcie":
            if self.nvlink is None:
                raise FieldError("nvlink", f"a {self.gpu_fabric} server needs its NVLink generation")
            with blame("nvlink"):
                generation = nvlink_generation(self.nvlink)
                check_gpu_nvlink(self.gpu, self.nvlink)
            if self.nvlinks_per_gpu is not None:
                with blame("nvlinks_per_gpu"):
                    whole_number("NVLinks per GPU", self.nvlinks_per_gpu)
                if self.nvlinks_per_gpu > generation.links_per_gpu:
                    raise FieldError("nvlinks_per_gpu", f"{self.nvlinks_per_gpu} NVLinks per GPU: a "
                                                        f"{generation.gpu} has at most {generation.links_per_gpu} "
                                                        f"({self.nvlink})")
        if self.gpu_fabric == "nvlink_mesh":
            with blame("nvlink_counts"):
                self._check_mesh()
        hosts = {"pcie": self.pcie, "memory": self.memory}
        if self.intersocket is not None:
            hosts["intersocket"] = self.intersocket
        elif self.cpu == "x86" and self.sockets > 1:
            raise FieldError("intersocket", f"{self.sockets} x86 sockets need their inter-socket link")
        for what, technology in hosts.items():
            # An NVLink or network technology here would build, then fail to route.
            tier = link_technology(technology).tier
            if tier != LinkTier.HOST:
                raise FieldError(what, f"{what}={technology!r} is a {tier.name.lower()} technology; a server's "
                                       "PCIe, inter-socket link and memory take host ones")
        # A host technology of another kind (PCIe as memory, memory between sockets) builds
        # and runs at that kind's rate.
        kinds = {"intersocket": ("inter-socket link", INTERSOCKET_TECHNOLOGIES),
                 "memory": ("host memory", HOST_MEMORY_TECHNOLOGIES)}
        for what, (kind, valid) in kinds.items():
            given = hosts.get(what)
            if given is not None and given not in valid:
                raise FieldError(what, f"{what}={given!r} is no {kind}; valid ones: {', '.join(valid)}")
        nics = (("compute_nic", "compute NIC", self.compute_nic), ("frontend_nic", "front-end port", self.frontend_nic))
        for field, what, technology in nics:
            if link_technology(technology).tier != LinkTier.SCALE_OUT:
                raise FieldError(field, f"{what} technology {technology!r} is not a network one")
        self._check_switches(n)
        if self.cpu == "grace" and self.sockets > 1 and self.gpu_fabric != "nvswitch":
            self._check_grace_paths()
        if self.cpu == "grace" and self.sockets > 1:
            with blame("gpu_nics"):
                self._check_grace_nics()

    def _check_grace_nics(self) -> None:
        # A GPU reaches its NIC through its own Grace or its PCIe switch; routes do not relay
        # a GPU's network traffic through another GPU (NCCL's PXN), which a NIC on another
        # Grace would need.
        socket_of_nic = {r: self.socket_of(j) for j, s in enumerate(self.switches) for r in s.nics}
        switch_of_gpu = {g: j for j, s in enumerate(self.switches) for g in s.gpus}
        for g, nic in enumerate(self.rails()):
            if nic < 0:
                continue
            near = {self.grace_of(g), self.socket_of(switch_of_gpu[g])}
            if socket_of_nic[nic] not in near and nic not in self.switches[switch_of_gpu[g]].nics:
                raise InputError(f"GPU {g}'s NIC {nic} is on another Grace: a GPU's network traffic goes through its "
                                 "own Grace or PCIe switch, not through another GPU (NCCL's PXN); give each Grace's "
                                 "GPUs NICs of their own")

    def _check_grace_paths(self) -> None:
        # Graces share no inter-socket link, and a route passes through one GPU at most (NCCL's
        # NVB path): two GPUs need an NVLink between them, a GPU linked to both, or a Grace
        # both reach (by NVLink-C2C or their PCIe switches).
        n = self.n_gpus
        graces = [{self.grace_of(g)} for g in range(n)]
        for j, switch in enumerate(self.switches):
            for g in switch.gpus:
                graces[g].add(self.socket_of(j))
        counts = self.nvlink_counts if self.gpu_fabric == "nvlink_mesh" else None
        for a in range(n):
            for b in range(a + 1, n):
                linked = counts is not None and (counts[a][b] or any(counts[a][i] and counts[i][b] for i in range(n)))
                if not graces[a] & graces[b] and not linked:
                    raise InputError(f"GPUs {a} and {b} are on different Graces, which share no inter-socket "
                                     "link, and no NVLink joins them, directly or through one GPU: give them "
                                     "NVLinks or one Grace")

    def _check_mesh(self) -> None:
        counts = self.nvlink_counts
        n = self.n_gpus
        if counts is None or len(counts) != n or any(len(row) != n for row in counts):
            raise InputError(f"an NVLink mesh needs a {n} x {n} matrix of NVLink counts")
        assert self.nvlink is not None
        most = nvlink_generation(self.nvlink).links_per_gpu
        for i, row in enumerate(counts):
            for j, count in enumerate(row):
                if count < 0:
                    raise InputError(f"NVLink counts must be >= 0: GPU {i} to GPU {j} has {count}")
                if count > most:  # before int64 takes it: a count may be any integer
                    raise InputError(f"GPU {i} to GPU {j}: {count} NVLinks; a {nvlink_generation(self.nvlink).gpu} "
                                     f"has at most {most} ({self.nvlink})")
        matrix = np.array(counts, dtype=np.int64)
        wrong = np.argwhere((matrix != matrix.T) | np.eye(n, dtype=bool) & (matrix != 0))
        if wrong.size:
            i, j = (int(v) for v in wrong[0])
            raise InputError(f"NVLink counts must be symmetric, with a zero diagonal: GPU {i} to GPU {j} has "
                             f"{int(matrix[i, j])}" + (f", GPU {j} to GPU {i} {int(matrix[j, i])}" if i != j else ""))
        busiest = int(matrix.sum(axis=1).argmax())
        if matrix[busiest].sum() > most:
            raise InputError(f"GPU {busiest} has {int(matrix[busiest].sum())} NVLinks; a "
                             f"{nvlink_generation(self.nvlink).gpu} has at most {most} ({self.nvlink})")

    def _check_switches(self, n_gpus: int) -> None:
        if not self.switches:
            raise FieldError("switches", "a server needs at least one PCIe switch (or root port) for its GPUs")
        gpus = [g for s in self.switches for g in s.gpus]
        if sorted(gpus) != list(range(n_gpus)):
            raise FieldError("switches", f"the PCIe switches must hold each GPU 0..{n_gpus - 1} once, got "
                                         f"{sorted(gpus)}")
        nics = [r for s in self.switches for r in s.nics]
        if sorted(nics) != list(range(len(nics))):
            raise FieldError("switches", f"the PCIe switches must hold each NIC 0..{len(nics) - 1} once, got "
                                         f"{sorted(nics)}")
        for j, s in enumerate(self.switches):
            if s.socket is not None and not 0 <= s.socket < self.sockets:
                raise FieldError("switches", f"PCIe switch {j} is on socket {s.socket}; the server has {self.sockets}")
        if self.gpu_nics is not None:
            if len(self.gpu_nics) != n_gpus or not all(0 <= r < len(nics) for r in self.gpu_nics):
                raise FieldError("gpu_nics", f"expected a NIC 0..{len(nics) - 1} for each of the {n_gpus} GPUs, "
                                             f"got {list(self.gpu_nics)}")

    def socket_of(self, j: int) -> int:
        """Socket of PCIe switch ``j``."""
        socket = self.switches[j].socket
        return j * self.sockets // len(self.switches) if socket is None else socket

    def rails(self) -> list[int]:
        """The compute NIC of each GPU (-1 for none)."""
        if self.gpu_nics is not None:
            return list(self.gpu_nics)
        out = [-1] * self.n_gpus
        by_socket: dict[int, list[int]] = {}
        for j, s in enumerate(self.switches):
            by_socket.setdefault(self.socket_of(j), []).extend(s.nics)
        every = [r for s in self.switches for r in s.nics]
        for s in self.switches:
            for k, g in enumerate(s.gpus):
                if s.nics:
                    out[g] = s.nics[k * len(s.nics) // len(s.gpus)]
        for j, s in enumerate(self.switches):
            # GPUs on a switch without a NIC: the NICs of their socket, else all, in turn.
            for g in s.gpus:
                if out[g] < 0 and every:
                    near = by_socket.get(self.socket_of(j)) or every
                    out[g] = near[g % len(near)]
        return out


def build_server(spec: ServerSpec, *, figure: str) -> Topology:
    """The topology of one server described by ``spec``; ``figure`` picks every link's rate.

    Raises
    ------
    InputError
        Naming the first inconsistent field of ``spec`` (see :meth:`ServerSpec.check`).

    Examples
    --------
    >>> spec = ServerSpec("box", "L40S", 2, "pcie", "pcie4", 1, None, "ddr4_3200_8ch",
    ...                   (PcieSwitch((0, 1), (0,)),), "eth200g", "eth100g", 1)
    >>> topology = build_server(spec, figure="nominal")
    >>> len(topology.gpus()), topology.node_names[topology.node_nic[topology.node_id("gpu1")]]
    (2, 'nic0')
    """
    spec.check()
    b = TopologyBuilder()
    server = b.add_server(spec.name, p2p=spec.p2p, net_latency_s=spec.net_latency_us * 1e-6,
                          gpu_sm=gpu_compute_capability(spec.gpu),
                          step_latency_s=None if spec.step_latency_us is None else spec.step_latency_us * 1e-6,
                          nic_ports=spec.nic_ports)
    for g in range(spec.n_gpus):
        b.add_node(f"gpu{g}", NodeKind.GPU, server=server)
    if spec.gpu_fabric == "nvswitch":
        assert spec.nvlink is not None
        b.add_node("nvswitch", NodeKind.NVSWITCH, server=server)
        links = nvlink_generation(spec.nvlink).links_per_gpu if spec.nvlinks_per_gpu is None else spec.nvlinks_per_gpu
        per_gpu = links * link_rate(spec.nvlink, figure=figure)
        for g in range(spec.n_gpus):
            b.add_cable(f"gpu{g}", "nvswitch", per_gpu, technology=spec.nvlink)
    elif spec.gpu_fabric == "nvlink_mesh":
        assert spec.nvlink is not None and spec.nvlink_counts is not None
        counts = np.array(spec.nvlink_counts, dtype=np.int64)
        link = link_rate(spec.nvlink, figure=figure)
        for i, j in zip(*np.nonzero(counts), strict=True):
            b.add_link(f"gpu{i}", f"gpu{j}", counts[i, j] * link, technology=spec.nvlink)
    if spec.cpu == "grace":
        _add_grace_host(b, server, spec, figure)
    else:
        _add_x86_host(b, server, spec, figure)
    for g, nic in enumerate(spec.rails()):
        if nic >= 0:
            b.set_nic(f"gpu{g}", f"nic{nic}")
    return b.build(nccl_env=spec.nccl_env)


def _add_memory(b: TopologyBuilder, server: int, spec: ServerSpec, socket: int, figure: str) -> None:
    b.add_node(f"cpu{socket}", NodeKind.CPU, server=server)
    b.add_node(f"mem{socket}", NodeKind.HOST_MEMORY, server=server)
    b.add_link(f"cpu{socket}", f"mem{socket}", link_rate(spec.memory, figure=figure), technology=spec.memory,
               shared=True)


def _add_x86_host(b: TopologyBuilder, server: int, spec: ServerSpec, figure: str) -> None:
    pcie = link_rate(spec.pcie, figure=figure)
    gpu_pcie = link_rate(spec.gpu_pcie, figure=figure)
    for s in range(spec.sockets):
        _add_memory(b, server, spec, s, figure)
    if spec.intersocket is not None:
        for s in range(1, spec.sockets):
            b.add_cable(f"cpu{s - 1}", f"cpu{s}", link_rate(spec.intersocket, figure=figure),
                        technology=spec.intersocket)
    for j, switch in enumerate(spec.switches):
        b.add_node(f"pcie{j}", NodeKind.PCIE_SWITCH, server=server)
        b.add_cable(f"pcie{j}", f"cpu{spec.socket_of(j)}", pcie, technology=spec.pcie)
        for g in switch.gpus:
            b.add_cable(f"gpu{g}", f"pcie{j}", gpu_pcie, technology=spec.gpu_pcie)
        for r in switch.nics:
            b.add_node(f"nic{r}", NodeKind.NIC, server=server)
            b.add_cable(f"nic{r}", f"pcie{j}", pcie, technology=spec.pcie)
    for j in range(spec.frontend_ports):
        b.add_node(f"fe{j}", NodeKind.NIC, server=server)
        b.add_cable(f"fe{j}", f"cpu{j % spec.sockets}", pcie, technology=spec.pcie)
    _set_frontend(b, spec)


def _set_frontend(b: TopologyBuilder, spec: ServerSpec) -> None:
    if spec.frontend_ports:
        for s in range(spec.sockets):
            b.set_nic(f"cpu{s}", f"fe{s % spec.frontend_ports}")
            b.set_nic(f"mem{s}", f"fe{s % spec.frontend_ports}")


def _add_grace_host(b: TopologyBuilder, server: int, spec: ServerSpec, figure: str) -> None:
    pcie = link_rate(spec.pcie, figure=figure)
    gpu_pcie = link_rate(spec.gpu_pcie, figure=figure)
    c2c = link_rate("nvlink_c2c", figure=figure)
    for s in range(spec.sockets):
        _add_memory(b, server, spec, s, figure)
        for j in range(s, spec.frontend_ports, spec.sockets):
            b.add_node(f"fe{j}", NodeKind.NIC, server=server)
            b.add_cable(f"fe{j}", f"cpu{s}", pcie, technology=spec.pcie)
    _set_frontend(b, spec)
    for j, switch in enumerate(spec.switches):
        for g in switch.gpus:
            b.add_cable(f"gpu{g}", f"cpu{spec.grace_of(g)}", c2c, technology="nvlink_c2c")
        b.add_node(f"pcie{j}", NodeKind.PCIE_SWITCH, server=server)
        for r in switch.nics:
            b.add_node(f"nic{r}", NodeKind.NIC, server=server)
        for g in switch.gpus:
            b.add_cable(f"pcie{j}", f"gpu{g}", gpu_pcie, technology=spec.gpu_pcie)
        for end in (*(f"nic{r}" for r in switch.nics), f"cpu{spec.socket_of(j)}"):
            b.add_cable(f"pcie{j}", end, pcie, technology=spec.pcie)
