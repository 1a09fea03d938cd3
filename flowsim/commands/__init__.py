"""Subcommands of the ``flowsim`` command line, one module each with ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse

from flowsim.commands import check, collective, inspect, plot, presets, rates, run, sweep

__all__ = ["COMMANDS", "add_parsers"]

#: Subcommand modules, in the order ``flowsim --help`` lists them.
COMMANDS = (run, inspect, plot, presets, rates, sweep, collective, check)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register every subcommand of :data:`COMMANDS` on ``subparsers``."""
    for command in COMMANDS:
        command.add_parser(subparsers)
