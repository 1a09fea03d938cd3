"""Progress on stderr for the commands: whether to show it, and its notes.

Stage notes (``[elapsed] message``) and the engine's progress line
(:mod:`flowsim_kernels.progress`, from two seconds into a simulation) are for a person
watching: a command shows them when stderr is a terminal, or with ``--progress`` (a log
file, a CI job), and never with ``-q``, as git does with its progress. ``flowsim run`` keeps
its few stage notes in logs too (a line per stage, as before); only its engine line waits
for a terminal or ``--progress``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

__all__ = ["Notes", "add_progress_argument", "show_progress"]

# Back to the start of the line and erase it (ANSI "erase in line"), for notes in place.
_ERASE_LINE = "\r\x1b[K"


class Notes:
    """Prints ``[elapsed] message`` notes to a stream: a line each, or with ``in_place`` on a
    terminal, one line rewritten in place that :meth:`clear` erases (before a table row goes
    to the same terminal on stdout)."""

    def __init__(self, stream: TextIO, in_place: bool = False) -> None:
        self.stream = stream
        self.in_place = in_place and stream.isatty()
        self.start = time.perf_counter()
        self.shown = False

    def __call__(self, message: str) -> None:
        text = f"[{time.perf_counter() - self.start:7.2f} s] {message}"
        if self.in_place:
            print(_ERASE_LINE + text, end="", file=self.stream, flush=True)
            self.shown = True
        else:
            print(text, file=self.stream, flush=True)

    def clear(self) -> None:
        """Erase the note shown in place, if any."""
        if self.shown:
            print(_ERASE_LINE, end="", file=self.stream, flush=True)
            self.shown = False


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress``: show progress on stderr even when it is not a terminal."""
    parser.add_argument(
        "--progress", action="store_true",
        help="progress on stderr even when it is not a terminal (default: only on a terminal)",
    )


def show_progress(args: argparse.Namespace) -> bool:
    """Whether to show progress: ``--progress`` or a terminal on stderr, never with ``-q``."""
    if getattr(args, "quiet", False):
        return False
    return bool(args.progress) or sys.stderr.isatty()
