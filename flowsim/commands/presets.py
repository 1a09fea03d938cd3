"""``flowsim presets``: the server presets, link technologies and switch models flowsim knows.

Every rate is per direction, with the source it comes from (keys of ``docs/hardware.md``).
``--only`` picks one table. ``flowsim presets FILE.toml ...`` shows what system files make
instead (``flowsim presets aws-p5`` a shipped one, ``flowsim presets dgx-a100`` a preset's
server): each server's figures per GPU and its cluster.
"""

from __future__ import annotations

import argparse

from flowsim.catalog import SECTIONS, describe_presets, describe_system, find_described
from flowsim.errors import InputError

# SECTIONS and describe_presets are flowsim.catalog's, also importable from here as before.
__all__ = ["SECTIONS", "add_parser", "describe_presets", "presets_command"]


def presets_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim presets``: print :func:`describe_presets`, or
    :func:`describe_system` of each system file given (with no ``--only``); returns 0."""
    if args.systems and args.only is not None:
        raise InputError(f"--only {args.only} picks a table of what flowsim presets lists without FILE.toml; "
                         "a system is described whole")
    if args.systems:
        print("\n\n".join(describe_system(find_described(path)) for path in args.systems))
    else:
        print(describe_presets(args.only))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim presets [--only TABLE]``; its handler is :func:`presets_command`."""
    parser = subparsers.add_parser(
        "presets", help="list server presets, link technologies and switch models with sources", description=__doc__
    )
    parser.add_argument("systems", nargs="*", metavar="FILE.toml",
                        help="system files (or shipped systems and presets by name) to describe instead")
    parser.add_argument("--only", choices=SECTIONS, default=None, help="print one table only")
    parser.set_defaults(func=presets_command)
    return parser
