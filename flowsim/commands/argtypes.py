"""argparse ``type``s the commands share: numbers checked as they are parsed, so that a bad
value is reported as argparse reports it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["number_type", "positive_int"]


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
