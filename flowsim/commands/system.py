"""``flowsim system import``: a system file from the output of ``nvidia-smi topo -m``.

    flowsim system import TOPO.txt -o system.toml --gpu H100 --nic-speed 400
                          [--nic-kind ib|roce|efa] [--pcie 5] [--nvlink nvlink4] [--sockets 2]
                          [--intersocket upi_sapphire_rapids] [--memory ddr5_4800_8ch]
                          [--frontend-speed 100] [--no-p2p | --p2p] [--name NAME] [--nodes N]

reads the matrix (from standard input where TOPO.txt is '-': ``nvidia-smi topo -m | flowsim
system import - -o system.toml ...``; NVLink counts, PCIe relations, NUMA affinity, NIC legend) and writes a
system file (docs/system-format.md) whose comments say what came from the matrix and what
from options or guesses. Options give what the matrix cannot say: the GPU model, the NICs'
speed and kind, and where the defaults are guesses, the PCIe generation and the host's links.
The file is written whole or not at all, and never over the matrix it reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flowsim.commands.argtypes import positive_int
from flowsim.errors import STDIN, InputError, output_file, read_output_file, read_stdin
from flowsim.files import replaced_atomically
from flowsim.systemfile import NIC_KINDS, format_system, parse_system
from flowsim.topoimport import import_system, parse_topo_matrix

__all__ = ["add_parser", "import_command"]


def import_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim system import``: write the system file; returns 0.

    An output path that cannot be written or would replace the matrix it reads (see
    :func:`~flowsim.errors.output_file`) raises :class:`~flowsim.errors.InputError` before
    anything is read.
    """
    what = "the nvidia-smi topo -m output"
    if args.name is not None and not args.name.strip():
        raise InputError("--name: empty; give the system a name, or leave --name out for the output file's stem")
    piped = str(args.topology) == STDIN
    if args.output.suffix.lower() != ".toml":  # --system takes a file as one by its suffix
        raise InputError(f"-o {args.output}: a system file's name ends in .toml (--system and scenarios take it "
                         "so); give one that does")
    output_file(args.output, "the system file", inputs=[] if piped else [args.topology])
    if piped:
        source, text = "<stdin>", read_stdin(what)
    else:
        source, text = str(args.topology), read_output_file(args.topology, what, piped=True)
    matrix = parse_topo_matrix(text, source=source)
    name = args.name or args.output.stem
    spec, notes = import_system(
        matrix, name=name, gpu=args.gpu, nic_speed_gbps=args.nic_speed, nic_kind=args.nic_kind, pcie=args.pcie,
        nvlink=args.nvlink, sockets=args.sockets, intersocket=args.intersocket, memory=args.memory,
        frontend_speed_gbps=args.frontend_speed, p2p=args.p2p,
    )
    for note in notes:
        if note.startswith("check: "):  # what the matrix contradicts itself on: said, not only written
            print(f"flowsim: {note}", file=sys.stderr)
    cluster = {"n_nodes": args.nodes} if args.nodes is not None else None
    text = format_system(spec, cluster=cluster, comments=(f"Imported by 'flowsim system import' from {source}:",
                                                          *(f"  {note}" for note in notes)))
    parse_system(text, source=str(args.output), name=name)  # what is written reads back
    with replaced_atomically(args.output) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    print(f"{spec.n_gpus} x {spec.gpu} ({spec.gpu_fabric}), {spec.n_nics} compute NIC(s), {spec.sockets} socket(s) "
          f"-> {args.output}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim system import``; its handler is :func:`import_command`."""
    parser = subparsers.add_parser("system", help="make system files (import nvidia-smi topo -m)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    imp = actions.add_parser("import", help="a system file from the output of nvidia-smi topo -m",
                             description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    imp.add_argument("topology", type=Path, help="a text file holding the output of nvidia-smi topo -m ('-' reads "
                     "it from standard input: nvidia-smi topo -m | flowsim system import - ...)")
    imp.add_argument("-o", "--output", type=Path, required=True, help="the system file to write (FILE.toml)")
    imp.add_argument("--gpu", required=True, help="GPU model, e.g. H100, A100, V100, L40S, 'RTX 4090'")
    imp.add_argument("--nic-speed", type=positive_int, help="compute NIC port speed in Gb/s (100, 200, 400, 800)")
    imp.add_argument("--nic-kind", choices=NIC_KINDS, default="ib", help="ib (default), roce or efa")
    imp.add_argument("--pcie", type=positive_int, help="PCIe generation (default: the GPU's)")
    imp.add_argument("--nvlink", help="NVLink generation, e.g. nvlink4 (default: the GPU's)")
    imp.add_argument("--sockets", type=positive_int, help="CPU sockets (default: one per NUMA node of the GPUs)")
    imp.add_argument("--intersocket", help="inter-socket link technology (default: a guess by PCIe generation)")
    imp.add_argument("--memory", help="host memory technology of one socket (default: a guess by PCIe generation)")
    imp.add_argument("--frontend-speed", type=positive_int, default=100,
                     help="speed (Gb/s) of NICs nearest to no GPU, taken as front-end ports (default 100)")
    p2p = imp.add_mutually_exclusive_group()
    p2p.add_argument("--no-p2p", dest="p2p", action="store_false", default=None,
                     help="GPUs without peer-to-peer over PCIe (default for GeForce cards: their driver allows none)")
    p2p.add_argument("--p2p", dest="p2p", action="store_true", default=None,
                     help="GPUs with peer-to-peer over PCIe (default, but for GeForce cards: a patched driver's)")
    imp.add_argument("--name", help="system name (default: the output file's stem)")
    imp.add_argument("--nodes", type=positive_int, help="servers in the cluster (adds a [cluster] table)")
    imp.set_defaults(func=import_command)
    return parser
