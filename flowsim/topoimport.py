"""A server description from ``nvidia-smi topo -m``: ``flowsim system import``.

The matrix says how each pair of devices (GPUs and NICs) is connected, and the affinity
columns which CPU (NUMA node) each GPU hangs off; what it cannot say (the GPU model, the NIC
speed and kind, the PCIe generation, the CPUs' link and memory) comes from options.

Reading the matrix (the legend of ``nvidia-smi topo -m``; NCCL's path types,
docs/hardware.md §3.1):

* ``NV#``: ``#`` bonded NVLinks. Every GPU pair joined by the same count, more NVLinks in all
  than one GPU has (18 per H100 against 7 x 18), is an NVSwitch server with ``#`` NVLinks
  per GPU; anything else is a mesh of those counts.
* ``PIX`` and ``PXB`` (one or several PCIe bridges, no host bridge): the same PCIe switch
  (complex); devices so related, directly or through others, share one switch.
* ``PHB``, ``NODE``: the same CPU, through its host bridge(s); ``SYS``: another socket (``SOC``
  in old drivers' output).
* Sockets: one per distinct ``NUMA Affinity`` (else ``CPU Affinity``) of the GPUs, in the
  order of their first number; ``--sockets`` folds NUMA nodes of one socket (EPYC in NPS2/NPS4)
  together, consecutive ones, as Linux numbers them. A group of NICs without GPUs is on the
  socket of the GPU nearest to it.
* NICs: a NIC that is the nearest NIC of some GPU is a compute NIC; each GPU uses its nearest
  (ties: GPUs without a choice first, then the NIC fewest GPUs took, the one serving the GPU
  nearest in number, the first); compute NICs are numbered in order of the lowest GPU they
  serve, as rails are. NICs equally near the same GPUs and no other, several for each (an OCI
  BM.GPU4.8's four ports a GPU pair), are ports of one NIC a GPU (:func:`_nic_choices`). A NIC
  nearest to no GPU is a front-end port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from flowsim.errors import InputError
from flowsim.hardware import (
    ETHERNET_SPEEDS,
    GPU_MODELS,
    INFINIBAND_SPEEDS,
    gpu_model,
    gpu_peer_to_peer,
    nvlink_generation,
    nvlink_names,
    nvswitch_generation,
)
from flowsim.servers import MAX_NIC_PORTS, PcieSwitch, ServerSpec

__all__ = ["GPU_MODELS", "TopoMatrix", "import_system", "parse_topo_matrix"]

#: Models whose PCIe generation no source in docs/hardware.md gives: Blackwell Ultra's Gen6
#: is its ConnectX-8 NICs' (§3.1), which flowsim/systems/dgx_b300.toml takes for the GPUs too;
#: a GB200's Gen5 is the DGX B200's (§3.2), the same GPU beside an x86 host.
_PCIE_GUESSED = ("B300", "GB300", "GB200")
# Superchips whose GPUs sit beside Grace CPUs (NVLink-C2C; the matrix's NUMA nodes are the
# Graces): their hosts are Grace's, not an x86 server's.
_GRACE_GPUS = ("GH200", "GB200", "GB300")
# Hardware threads of the largest Xeon socket NCCL's model takes as Skylake's (Skylake-SP to Ice
# Lake-SP, up to 40 cores with Hyper-Threading: [NCCL] src/graph/topo.cc, where an Intel CPU of
# model id 0x55 up to Sapphire Rapids' 0x8F is SKL): a GPU whose socket lists more sits in a
# newer host than the guess of _HOSTS (or an AMD one).
_SKYLAKE_THREADS = 80
# Host defaults by PCIe generation, where the options do not give them [guess: a typical
# server of the GPU's time; the written file says so].
_HOSTS = {3: ("upi_skylake", "ddr4_2400_4ch"), 4: ("upi_skylake", "ddr4_3200_8ch"),
          5: ("upi_sapphire_rapids", "ddr5_4800_8ch"), 6: ("upi_emerald_rapids", "ddr5_5600_8ch")}
# The speeds a system file takes (docs/system-format.md): RoCE and EFA ports are Ethernet's.
_NIC_SPEEDS = {"ib": INFINIBAND_SPEEDS, "roce": ETHERNET_SPEEDS, "efa": ETHERNET_SPEEDS}
# Nearness of a PCIe relation, best first (NCCL's path types).
_PATH_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
_NUMBER = re.compile(r"\d+")
# Select Graphic Rendition codes: recent drivers underline the header (ESC [4m ... ESC [0m) even
# when the output is piped, a paste from a terminal keeps "[4m" and "[0m" without the ESC, and
# one through `cat -v` or `less` shows the ESC as "^[".
_SGR = re.compile(r"(?:\x1b|\^\[)?\[[0-9;]*m")
_NV = re.compile(r"NV(\d+)$")


@dataclass(frozen=True)
class TopoMatrix:
    """What one ``nvidia-smi topo -m`` output says.

    Attributes
    ----------
    devices : tuple of str
        Column names (``GPU0``..., then NICs: ``NIC0`` or ``mlx5_0``).
    relation : dict of (str, str) to str
        The cell of each row and column both named (``"NV18"``, ``"PIX"``, ...).
    affinity : dict of str to str
        Each GPU's NUMA affinity, else CPU affinity (its socket's key); absent if neither.
    nic_names : dict of str to str
        The NIC legend (``NIC0`` -> ``mlx5_0``).
    source : str
        Where it was read from, for errors about the server it makes.
    cpus : dict of str to str
        Each GPU's CPU Affinity (``"0-55,112-167"``), where the output gives one.
    """

    devices: tuple[str, ...]
    relation: dict[tuple[str, str], str]
    affinity: dict[str, str]
    nic_names: dict[str, str]
    source: str = "<topo>"
    cpus: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if re.fullmatch(r"GPU\d+", d)]

    @property
    def nics(self) -> list[str]:
        return [d for d in self.devices if not re.fullmatch(r"GPU\d+", d)]

    def between(self, a: str, b: str) -> str | None:
        """The relation of two devices, from either one's row."""
        return self.relation.get((a, b)) or self.relation.get((b, a))


def _is_header(line: str) -> bool:
    """Whether ``line`` is a header: it starts with GPU0 (after a tab), where GPU0's own row
    goes on with a cell of the matrix."""
    cells = line.split()
    return cells[:1] == ["GPU0"] and not (cells[1:2] and (cells[1] in ("X", "SOC", *_PATH_RANK) or _NV.match(cells[1])))


def _affinity_cells(line: str, n_devices: int) -> list[str]:
    """The cells of a row after its ``n_devices`` relations (CPU Affinity, NUMA Affinity, ...),
    an empty one kept: a GPU whose CPUs are not known has an empty CPU Affinity, which a split
    on whitespace drops, so that the NUMA Affinity was read from the next column.

    nvidia-smi separates cells by tabs; where a paste turned them into spaces, a cell starts
    at a tab stop (every 8 columns from the row's name), and a stop skipped is an empty cell.
    """
    tokens = list(re.finditer(r"\S+", line))
    if len(tokens) <= n_devices + 1:
        return []
    rest = line[tokens[n_devices].end():]
    if "\t" in rest:
        return [cell.strip() for cell in rest.split("\t")[1:]]
    start, end, cells = tokens[0].start(), tokens[n_devices].end(), []
    for token in tokens[n_devices + 1:]:
        stop = start + ((end - start) // 8 + 1) * 8  # where a tab after the cell before went
        cells += [""] * max(0, (token.start() - stop) // 8) + [token.group()]
        end = token.end()
    return cells


def parse_topo_matrix(text: str, *, source: str = "<topo>") -> TopoMatrix:
    """Read the output of ``nvidia-smi topo -m`` (tabs or spaces; legends optional; terminal
    colour and underline codes, with or without their escape byte, ignored).

    Raises
    ------
    InputError
        Naming ``source`` and the line when there is no GPU header or a row does not fit it.
    """
    lines = _SGR.sub("", text).splitlines()
    header_at = next((i for i, line in enumerate(lines) if _is_header(line)), None)
    if header_at is None:
        raise InputError(f"{source}: no 'GPU0 GPU1 ...' header line: not the output of 'nvidia-smi topo -m'")
    header = lines[header_at].split("CPU Affinity")[0].split()
    has_cpu = "CPU Affinity" in lines[header_at]
    has_numa = "NUMA Affinity" in lines[header_at]
    devices = tuple(header)
    if len(set(devices)) != len(devices):
        raise InputError(f"{source}: line {header_at + 1}: a device is named twice in the header")
    relation: dict[tuple[str, str], str] = {}
    affinity: dict[str, str] = {}
    cpus: dict[str, str] = {}
    nic_names: dict[str, str] = {}
    # The rows run from the header to the first line that is not one (a blank line, the
    # legend); the NIC legend follows, up to another header: what a paste adds after the
    # matrix (nvidia-smi topo -p2p's own GPU0 ... table) is not the matrix.
    rows_end = False
    for number, line in enumerate(lines[header_at + 1:], start=header_at + 2):
        if _is_header(line):
            break
        legend = re.fullmatch(r"\s*(NIC\d+):\s*(\S+)\s*", line)
        if legend:
            nic_names[legend.group(1)] = legend.group(2)
            continue
        cells = line.split()
        rows_end = rows_end or bool(relation) and (not cells or cells[0] not in devices)
        if rows_end or not cells or cells[0] not in devices:
            continue
        name, values = cells[0], cells[1:]
        if len(values) < len(devices):
            raise InputError(f"{source}: line {number}: {name} has {len(values)} cells for {len(devices)} devices")
        for column, value in zip(devices, values, strict=False):
            # Old drivers' SOC is today's SYS; their legend: "Connection traversing PCIe as
            # well as the SMP link between CPU sockets (e.g. QPI)".
            value = "SYS" if value == "SOC" else value
            if (column == name) != (value == "X"):
                raise InputError(f"{source}: line {number}: {name} to {column} is {value!r}; "
                                 + ("a device to itself is X" if column == name else "X is a device to itself"))
            if value != "X" and not _NV.match(value) and value not in _PATH_RANK:
                raise InputError(f"{source}: line {number}: {name} to {column} is {value!r}; expected X, NV#, "
                                 "PIX, PXB, PHB, NODE or SYS")
            relation[(name, column)] = value
        cpu, numa = (_affinity_cells(line, len(devices)) + ["", ""])[:2]
        if name.startswith("GPU") and has_cpu and (numa if has_numa and numa else cpu):
            affinity[name] = numa if has_numa and numa else cpu
        if name.startswith("GPU") and has_cpu and cpu:
            cpus[name] = cpu
    gpus = [d for d in devices if re.fullmatch(r"GPU\d+", d)]
    if not gpus:
        raise InputError(f"{source}: the header names no GPU")
    missing = [g for g in gpus if (g, g) not in relation]
    if missing:
        raise InputError(f"{source}: no row for {', '.join(missing)}")
    return TopoMatrix(devices, relation, affinity, nic_names, source, cpus)


def _nvlinks(matrix: TopoMatrix, gpus: list[str]) -> list[list[int]]:
    counts = [[0] * len(gpus) for _ in gpus]
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            match = _NV.match(matrix.between(a, b) or "") if i != j else None
            counts[i][j] = int(match.group(1)) if match else 0
    return counts


def _groups(matrix: TopoMatrix) -> list[set[str]]:
    """Devices that share a PCIe switch (PIX / PXB, transitively), GPUs' groups first."""
    parent = {d: d for d in matrix.devices}

    def root(d: str) -> str:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for (a, b), value in matrix.relation.items():
        if value in ("PIX", "PXB") and a in parent and b in parent:
            parent[root(a)] = root(b)
    groups: dict[str, set[str]] = {}
    for d in matrix.devices:
        groups.setdefault(root(d), set()).add(d)
    return list(groups.values())


def _nic_choices(near: dict[str, list[str]]) -> tuple[int, dict[str, list[tuple[str, ...]]]]:
    """The ports of a NIC, and each GPU's choice of NICs made of them, from each GPU's equally
    near NICs ``near``.

    NICs equally near the same GPUs and near no other (a GPU pair's four 100 Gb/s ports on an
    OCI BM.GPU4.8) serve those GPUs together: NCCL gives each GPU ``ceil(NICs / GPUs)`` of them,
    its channels spread over them (ncclTopoGetLocalNet, src/graph/topo.cc), and from 2.20 merges
    a card's ports (``NCCL_IB_MERGE_NICS``). flowsim gives each GPU one NIC, every NIC the same
    ports: NICs of as many ports as every such set has for each of its GPUs, 1 where a set has
    fewer NICs than GPUs or shares a NIC with another (those NICs serve several GPUs). The NICs
    a set has beyond its ports times its GPUs are in no choice.
    """
    sharers: dict[tuple[str, ...], list[str]] = {}
    for g, nics in near.items():
        sharers.setdefault(tuple(nics), []).append(g)
    ports = min(MAX_NIC_PORTS, min((
        max(1, len(nics) // len(owners)) if all(nic not in near[h] for h in near if h not in owners for nic in nics)
        else 1 for nics, owners in sharers.items()), default=1))
    return ports, {g: [tuple(nics[i:i + ports]) for i in range(0, len(nics) - ports + 1, ports)]
                   for g, nics in near.items()}


def _cpu_count(cpus: str) -> int:
    """CPUs of a CPU Affinity cell (``"0-55,112-167"``: 112); 0 where it lists none."""
    total = 0
    for part in cpus.split(","):
        bounds = [int(x) for x in _NUMBER.findall(part)[:2]]
        total += bounds[1] - bounds[0] + 1 if len(bounds) == 2 and bounds[1] >= bounds[0] else len(bounds[:1])
    return total


def _first_number(affinity: str) -> tuple[int, int]:
    """Sort key of an affinity cell: its first number (``"3"``, ``"24-31,88-95"``), cells
    without one (``"N/A"``) after every cell with one, in their order (a stable sort)."""
    found = _NUMBER.search(affinity)
    return (0, int(found.group())) if found else (1, 0)


def import_system(
    matrix: TopoMatrix,
    *,
    name: str,
    gpu: str,
    nic_speed_gbps: int | None = None,
    nic_kind: str = "ib",
    pcie: int | None = None,
    nvlink: str | None = None,
    sockets: int | None = None,
    intersocket: str | None = None,
    memory: str | None = None,
    frontend_speed_gbps: int = 100,
    p2p: bool | None = None,
) -> tuple[ServerSpec, list[str]]:
    """The server ``matrix`` shows, and notes on what came from options or guesses.

    Parameters
    ----------
    matrix : TopoMatrix
        From :func:`parse_topo_matrix`.
    name, gpu : str
        The server's name and GPU model (:data:`GPU_MODELS` knows their NVLink and PCIe).
    nic_speed_gbps : int, optional
        Compute NIC port speed (Gb/s); needed when the matrix shows NICs.
    nic_kind : {"ib", "roce", "efa"}
    pcie : int, optional
        PCIe generation; default the GPU's.
    nvlink : str, optional
        NVLink generation; default the GPU's.
    sockets : int, optional
        CPU sockets; default one per NUMA node the GPUs name.
    intersocket, memory : str, optional
        Host link technologies; default a typical host of the PCIe generation [guess].
    frontend_speed_gbps : int
        Speed of NICs nearest to no GPU (front-end ports).
    p2p : bool, optional
        GPU peer-to-peer over PCIe (``nvidia-smi topo -p2p r`` says; the matrix does not);
        default on, but off for GeForce cards (:func:`flowsim.hardware.gpu_peer_to_peer`), whose driver
        allows none.

    Returns
    -------
    ServerSpec, list of str
    """
    notes: list[str] = []
    model = gpu_model(gpu)
    known = GPU_MODELS[model] if model else None
    gpus = sorted(matrix.gpus, key=lambda d: int(d[3:]))
    n = len(gpus)
    counts = _nvlinks(matrix, gpus)
    linked = [c for row in counts for c in row if c]
    if pcie is None:
        if known is None:
            raise InputError(f"unknown GPU model {gpu!r} (known: {', '.join(GPU_MODELS)}): give its PCIe "
                             f"generation, --pcie N ({', '.join(map(str, _HOSTS))})")
        pcie = known[1]
        # A PCIe card's link runs at the older of its own and its slot's generations (an RTX
        # 5090 in a Threadripper 3975X's Gen4 slot); an SXM module's is its board's.
        card = not linked
        notes.append(f"PCIe Gen{pcie}: the {gpu}'s host interface"
                     + (" [guess: give --pcie]" if model in _PCIE_GUESSED else
                        " [guess: a slot of an older generation runs it at that one's rate; give --pcie]" if card
                        else ""))
    if p2p is None:
        p2p = gpu_peer_to_peer(gpu)  # GeForce cards have none (NVIDIA/nccl-tests#307's 8 RTX 4090)
        if not p2p:
            notes.append(f"no peer-to-peer over PCIe: NVIDIA's driver gives the {model or gpu} none (nvidia-smi topo "
                         "-p2p r says; --p2p where a patched driver gives it)")
    if pcie not in _HOSTS:
        raise InputError(f"PCIe generation {pcie!r}: expected one of {', '.join(map(str, _HOSTS))}")
    fabric: dict = {"gpu_fabric": "pcie"}
    if linked:
        nvlink = nvlink or (known[0] if known else None)
        if nvlink is None:
            raise InputError(f"the matrix shows NVLinks but flowsim knows no NVLink generation of the {gpu}: "
                             f"give it, --nvlink GEN ({', '.join(nvlink_names())})")
        most = nvlink_generation(nvlink).links_per_gpu
        full = all(counts[i][j] for i in range(n) for j in range(n) if i != j)
        if full and len(set(linked)) == 1 and linked[0] * (n - 1) > most:
            fabric = {"gpu_fabric": "nvswitch", "nvlink": nvlink}
            if linked[0] != most:
                fabric["nvlinks_per_gpu"] = linked[0]
            switch = [s for s in ("nvswitch1", "nvswitch2", "nvswitch3", "nvswitch4")
                      if nvswitch_generation(s).nvlink == nvlink]
            if not switch:
                raise InputError(f"every GPU pair shows NV{linked[0]}, more than a GPU's {most} {nvlink} links, "
                                 "but no NVSwitch generation runs {nvlink}")
            notes.append(f"NVSwitch ({switch[0]}): every GPU pair is NV{linked[0]}")
        else:
            off = [g for g, row in zip(gpus, counts, strict=True) if not any(row)]
            on = [i for i, g in enumerate(gpus) if g not in off]
            every = all(counts[i][j] for i in on for j in on if i != j)  # the others all pair
            if off and every and len(set(linked)) == 1 and linked[0] * (len(on) - 1) > most:
                # The others pair as an NVSwitch server's GPUs do, more NVLinks than a mesh's GPU
                # has: these GPUs' NVLinks are down (vllm-project/vllm#16336, a B200 server's).
                raise InputError(
                    f"{matrix.source}: every other GPU pair is NV{linked[0]}, as on an NVSwitch server, but "
                    f"{', '.join(off)} show{'s' if len(off) == 1 else ''} no NVLink to any GPU: "
                    f"{'its' if len(off) == 1 else 'their'} NVLinks are down (nvidia-smi nvlink --status says "
                    "which); a flowsim NVSwitch server has every GPU on the switches: import the matrix of the "
                    "server with every GPU on NVLink")
            fabric = {"gpu_fabric": "nvlink_mesh", "nvlink": nvlink,
                      "nvlink_counts": tuple(tuple(row) for row in counts)}
            notes.append("NVLink mesh: the NV# counts of each GPU pair")
    # Sockets: the GPUs' NUMA (or CPU) affinities in the order of their first number (Linux
    # numbers the NUMA nodes and CPUs of one socket together), those without one last.
    keys = sorted(dict.fromkeys(matrix.affinity.get(g, "") for g in gpus), key=_first_number)
    numa_of = {g: keys.index(matrix.affinity.get(g, "")) for g in gpus}
    n_numa = len(keys)
    if sockets is None:
        sockets = n_numa
        # Without a NUMA Affinity column the keys are the GPUs' CPU lists.
        numa = any(matrix.affinity[g] != matrix.cpus.get(g) for g in matrix.affinity)
        notes.append(f"{sockets} socket(s): one per {'NUMA node' if numa else 'CPU list'} the GPUs name"
                     if matrix.affinity
                     else "1 socket: the output has no affinity columns")
        if n_numa > 2:
            # Servers of GPUs have one or two sockets; an AMD EPYC in NPS2 or NPS4 mode shows
            # two or four NUMA nodes a socket, a cloud VM as many as its host gives it.
            notes.append(f"check: {n_numa} NUMA nodes taken as {n_numa} sockets; an AMD EPYC host in NPS2 or NPS4 "
                         "mode (or a VM) shows several NUMA nodes a socket: --sockets 2 (or 1) folds them")
        across = next(((a, b) for (a, b), value in matrix.relation.items() if value == "SYS" and a in gpus), None)
        if n_numa == 1 and across:
            # SYS is a path between sockets, which one socket does not have: the affinities are
            # wrong (a VM's, an old driver's "1-1"), so the file's one socket is too.
            notes.append(f"check: the matrix shows SYS (a path between CPU sockets) from {across[0]} to {across[1]}, "
                         + (f"but every GPU's affinity is the same ({keys[0]})" if matrix.affinity else
                            "but it has no affinity columns") + ": written as 1 socket, and every device on it; "
                         "where the server has more, write its sockets and switches by hand")
    if not isinstance(sockets, int) or sockets < 1:
        raise InputError(f"sockets must be a positive integer, got {sockets!r}")
    if sockets > n_numa:
        # Sockets fold the NUMA nodes the GPUs name; more would be sockets without a GPU, and
        # the matrix does not say which GPUs sit on which.
        raise InputError(f"{matrix.source}: sockets {sockets}: the GPUs' affinities name {n_numa} NUMA node(s) "
                         f"({', '.join(key or 'none' for key in keys)}), which sockets fold together, at most "
                         f"{n_numa}; where the server has more sockets than its matrix shows (a VM), write its "
                         "sockets and PCIe switches by hand (docs/system-format.md)")
    socket_of = {g: numa_of[g] * sockets // n_numa for g in gpus}
    grace = model in _GRACE_GPUS
    host = _HOSTS[pcie]
    if grace:
        if intersocket is not None:
            raise InputError(f"--intersocket does not apply: a {gpu} server's CPUs are Graces, "
                             "without an x86 inter-socket link")
        memory = memory or "lpddr5x_grace"
        notes.append(f"Grace CPUs, each socket a {gpu} superchip's; host memory {memory}")
        if model in ("GB200", "GB300") and fabric["gpu_fabric"] == "nvswitch":
            # A compute tray's matrix shows its own GPUs only; in an NVL72 rack they share the
            # rack's NVLink domain with the other trays' (docs/system-format.md, hosts).
            notes.append(f"check: one {gpu} compute tray of {n} GPUs, on its own; in an NVL72 rack its GPUs share "
                         f"one NVLink domain with the other trays': write gpus = 72 and hosts = 18 in [server] "
                         "(docs/system-format.md), or run --system "
                         + ("gb200-nvl72" if model == "GB200" else "oci-bm-gpu-gb300-4 (OCI's GB300 racks)"))
    if sockets > 1 and intersocket is None and not grace:
        intersocket = host[0]
        notes.append(f"inter-socket link {intersocket} [guess: give --intersocket]")
        threads = max((_cpu_count(matrix.cpus[g]) for g in gpus if g in matrix.cpus), default=0)
        if intersocket == "upi_skylake" and threads > _SKYLAKE_THREADS:
            # The guess of a Gen3 or Gen4 GPU's host; an L40S or A100 PCIe card sits in newer ones.
            notes.append(f"check: a GPU's CPU affinity lists {threads} CPUs, more than a Xeon socket of Skylake to "
                         f"Ice Lake has ({_SKYLAKE_THREADS}): a newer or an AMD host, not the guessed {intersocket}; "
                         "give --intersocket and --memory ('flowsim presets' lists the link technologies)")
    if memory is None:
        memory = host[1]
        notes.append(f"host memory {memory} per socket [guess: give --memory]")
    # NICs: each GPU's nearest. A GPU with several equally near spreads its channels over them
    # (NCCL's ncclTopoGetLocalNet, src/graph/topo.cc: channel c of a GPU takes the NIC its device
    # index picks among them, plus c), so that a NIC shared so carries a share of each GPU's
    # traffic. flowsim gives a GPU one NIC: the GPUs with a choice (fewest choices first) take
    # the NIC fewest GPUs took, once those without a choice took theirs, so that the NICs serve
    # as evenly as the channels spread; of NICs as loaded, the one serving the GPU nearest in
    # number (consecutive GPUs share a side of a server), then the first. Two GPUs at SYS from
    # both NICs of a server whose two other GPUs have one each behind their host bridge split
    # over the two, where both took the first and a NIC served three GPUs until 2026-12-07.
    near = {g: [nic for nic in matrix.nics if _PATH_RANK.get(matrix.between(g, nic) or "SYS", 4) == best]
            for g in gpus if matrix.nics
            for best in [min(_PATH_RANK.get(matrix.between(g, nic) or "SYS", 4) for nic in matrix.nics)]}
    ports, choices = _nic_choices(near)
    nearest: dict[str, tuple[str, ...]] = {}
    served: dict[tuple[str, ...], list[int]] = {unit: [] for g in choices for unit in choices[g]}
    for g in sorted(choices, key=lambda g: len(choices[g])):
        nearest[g] = min(choices[g], key=lambda unit: (len(served[unit]),
                                                       min((abs(int(g[3:]) - h) for h in served[unit]), default=n)))
        served[nearest[g]].append(int(g[3:]))
    compute = list(dict.fromkeys(nearest[g] for g in gpus if g in nearest))
    spare = [nic for nic in matrix.nics if any(nic in near[g] for g in near) and all(nic not in u for u in compute)]
    frontend = [nic for nic in matrix.nics if all(nic not in near[g] for g in near)]
    if compute and nic_speed_gbps is None:
        raise InputError(f"the matrix shows {len(compute) * ports} compute NIC(s): give their speed (Gb/s)")
    if compute:
        if nic_kind not in _NIC_SPEEDS:
            raise InputError(f"unknown NIC kind {nic_kind!r}; valid ones: {', '.join(_NIC_SPEEDS)}")
        if nic_speed_gbps not in _NIC_SPEEDS[nic_kind]:
            raise InputError(f"NIC speed {nic_speed_gbps!r} Gb/s: {nic_kind} ports run at one of "
                             f"{', '.join(map(str, _NIC_SPEEDS[nic_kind]))}")
        if ports * nic_speed_gbps not in _NIC_SPEEDS[nic_kind]:
            raise InputError(f"{matrix.source}: each GPU has {ports} NICs of {nic_speed_gbps} Gb/s equally near, "
                             f"one NIC of {ports * nic_speed_gbps} Gb/s in flowsim, where a {nic_kind} NIC runs at "
                             f"one of {', '.join(map(str, _NIC_SPEEDS[nic_kind]))}")
    if frontend and frontend_speed_gbps not in ETHERNET_SPEEDS:
        raise InputError(f"front-end speed {frontend_speed_gbps!r} Gb/s: expected one of "
                         f"{', '.join(map(str, ETHERNET_SPEEDS))}")
    rail = {unit: r for r, unit in enumerate(compute)}
    rail_of = {unit[0]: rail[unit] for unit in compute}  # a NIC of several ports is on its first one's switch
    # PCIe switches: groups holding GPUs (by lowest GPU), then groups of compute NICs alone.
    switches = []
    for group in sorted(_groups(matrix), key=lambda s: min((int(d[3:]) for d in s if d in gpus), default=n)):
        members = sorted(int(d[3:]) for d in group if d in gpus)
        nics = sorted({rail_of[d] for d in group if d in rail_of})
        if not members and not nics:
            continue
        if members:
            socket = socket_of[f"GPU{members[0]}"]
        else:
            # The socket of the GPU nearest the NICs (PHB: behind the same host bridge), which
            # need not be a GPU whose nearest NIC they are: NICs all behind one GPU's host bridge
            # are every other GPU's nearest too, at SYS.
            unit = compute[nics[0]]
            closest = min(gpus, key=lambda g: (_PATH_RANK.get(matrix.between(g, unit[0]) or "SYS", 4),
                                               nearest.get(g) != unit))
            socket = socket_of[closest]
        switches.append(PcieSwitch(tuple(members), tuple(nics), socket))
    def named(nics: tuple[str, ...] | list[str], join: str) -> str:
        return join.join(matrix.nic_names.get(nic, nic) for nic in nics)

    if compute:
        rails = ", ".join(f"nic{rail[unit]} = {named(unit, ' + ')}" for unit in compute)
        notes.append(f"compute NICs (each GPU's nearest): {rails}")
    if ports > 1:
        notes.append(f"{ports} ports a NIC: each GPU's {ports} equally near NICs of {nic_speed_gbps} Gb/s are one "
                     f"NIC of {ports} x {nic_speed_gbps} Gb/s, as NCCL spreads the GPU's channels over them (from "
                     "2.20 it merges the ports of a card)")
    if spare:
        notes.append(f"not modelled: {named(spare, ', ')}, as near to GPUs as the NICs above, where flowsim gives "
                     "each GPU one NIC and every NIC as many ports")
    if frontend:
        notes.append(f"front-end ports (nearest to no GPU): {', '.join(matrix.nic_names.get(f, f) for f in frontend)}")
    spec = ServerSpec(
        name, gpu, n, fabric["gpu_fabric"], f"pcie{pcie}", sockets, intersocket if sockets > 1 else None, memory,
        tuple(switches),
        _NIC_SPEEDS[nic_kind][ports * nic_speed_gbps] if compute and nic_speed_gbps is not None else "ib_ndr",
        ETHERNET_SPEEDS[frontend_speed_gbps] if frontend else "eth100g", len(frontend),
        nvlink=fabric.get("nvlink"), nvlinks_per_gpu=fabric.get("nvlinks_per_gpu"),
        nvlink_counts=fabric.get("nvlink_counts"), p2p=p2p, nic_ports=ports,
        gpu_nics=tuple(rail[nearest[g]] for g in gpus) if compute else None, nic_kind=nic_kind,
        cpu="grace" if grace else "x86",
    )
    try:
        spec.check()
    except InputError as err:  # what the matrix says does not make a server flowsim takes
        raise InputError(f"{matrix.source}: {err}") from None
    return spec, notes
