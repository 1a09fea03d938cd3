"""What the commands' argument parsers share: numbers checked as they are parsed (so that a
bad value is reported as argparse reports it), and the NCCL options of ``flowsim collective``
and ``flowsim check`` (``--nccl-env``, ``--nccl-version``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from flowsim.collectives.constants import DEFAULT_NCCL_VERSION, NCCL_VERSIONS
from flowsim.errors import InputError

T = TypeVar("T")

__all__ = ["add_nccl_arguments", "number_type", "parse_nccl_env", "positive_int"]


def number_type(convert: Callable[[str], T], accept: Callable[[T], bool], expected: str) -> Callable[[str], T]:
    """An argparse ``type``: ``convert(text)`` where ``accept`` holds for it, else an error
    "expected {expected}, got 'text'"."""

    def parse(text: str) -> T:
        problem = argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        try:
            value = convert(text)
        except ValueError:
            raise problem from None
        if not accept(value):
            raise problem
        return value

    return parse


#: An argparse ``type``: a positive integer.
positive_int = number_type(int, lambda value: value >= 1, "a positive integer")


def add_nccl_arguments(parser: argparse.ArgumentParser, *, version_from_log: bool = False) -> None:
    """``--nccl-env KEY=VALUE`` (repeatable) and ``--nccl-version``: what NCCL's choice follows.

    With ``version_from_log`` (``flowsim check``) ``--nccl-version`` defaults to ``None``: the
    version the log prints decides (:func:`flowsim.check.report.nccl_version_of`)."""
    parser.add_argument(
        "--nccl-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an NCCL environment variable the choice follows (NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, "
        "NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS, ...); repeatable",
    )
    default = (
        f"the version the log prints, else the newest older one flowsim has; {DEFAULT_NCCL_VERSION} where it "
        "prints none"
        if version_from_log
        else DEFAULT_NCCL_VERSION
    )
    parser.add_argument(
        "--nccl-version",
        default=None if version_from_log else DEFAULT_NCCL_VERSION,
        choices=tuple(NCCL_VERSIONS),
        help=f"NCCL version whose constants apply (default {default})",
    )


def parse_nccl_env(pairs: list[str]) -> dict[str, str]:
    """``["NCCL_ALGO=Ring", ...]`` as a dict; a malformed pair or a repeated key is an
    :class:`~flowsim.errors.InputError` naming it."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        key = key.strip()
        if not equals or not key.startswith("NCCL_"):
            raise InputError(f"--nccl-env {pair!r}: expected NCCL_NAME=VALUE")
        if key in env:
            raise InputError(f"--nccl-env {key} is given twice")
        env[key] = value.strip()
    return env
