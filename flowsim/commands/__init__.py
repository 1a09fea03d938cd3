"""Subcommands of the ``flowsim`` command line, one module each with ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse
import re

from flowsim.commands import check, collective, inspect, plot, presets, rates, run, sweep, system

__all__ = ["COMMANDS", "add_parsers"]

#: Subcommand modules, in the order ``flowsim --help`` lists them.
COMMANDS = (run, inspect, plot, presets, rates, sweep, collective, check, system)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register every subcommand of :data:`COMMANDS` on ``subparsers``.

    Each takes its module docstring as its ``--help`` text, shown without the docstring's
    reStructuredText markup (``literal`` and :func:`role` quoting).
    """
    for command in COMMANDS:
        parser = command.add_parser(subparsers)
        if parser.description:
            parser.description = _plain(parser.description)


def _plain(text: str) -> str:
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
