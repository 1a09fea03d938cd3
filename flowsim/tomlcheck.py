"""Checking parsed TOML documents (scenario files, sweep specs) with errors that name the
file, the dotted key and what was expected."""

from __future__ import annotations

from collections.abc import Mapping

from flowsim.errors import InputError

__all__ = ["Where", "join", "show"]


class Where:
    """Checks values of a parsed TOML document; errors read ``file: key: message``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, key: str, message: str) -> InputError:
        return InputError(f"{self.source}: {key}: {message}" if key else f"{self.source}: {message}")

    def table(self, value: object, key: str) -> dict:
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {show(value)}")
        return value

    def tables(self, value: object, key: str) -> list[dict]:
        if value is None:
            raise self.error(key, f"missing; expected a non-empty array of tables ([[{key}]])")
        if not isinstance(value, list) or not value:
            raise self.error(key, f"expected a non-empty array of tables ([[{key}]]), got {show(value)}")
        return [self.table(item, f"{key}[{i}]") for i, item in enumerate(value)]

    def string(self, table: Mapping, key: str, prefix: str, default: str | None = None) -> str:
        if key not in table:
            if default is None:
                raise self.error(join(prefix, key), "missing; expected a string")
            return default
        value = table[key]
        if not isinstance(value, str):
            raise self.error(join(prefix, key), f"expected a string, got {show(value)}")
        return value

    def boolean(self, table: Mapping, key: str, prefix: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.error(join(prefix, key), f"expected true or false, got {show(value)}")
        return value

    def number(self, table: Mapping, key: str, prefix: str, default: float | None = None) -> float:
        if key not in table:
            if default is None:
                raise self.error(join(prefix, key), "missing; expected a number")
            return default
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(join(prefix, key), f"expected a number, got {show(value)}")
        return float(value)

    def choice(self, table: Mapping, key: str, prefix: str, choices, default: str | None = None) -> str:
        value = self.string(table, key, prefix, default)
        if value not in choices:
            raise self.error(join(prefix, key), f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
        return value

    def integer(self, table: Mapping, key: str, prefix: str, minimum: int) -> int:
        if key not in table:
            raise self.error(join(prefix, key), f"missing; expected an integer >= {minimum}")
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(join(prefix, key), f"expected an integer >= {minimum}, got {show(value)}")
        return value

    def only(self, table: Mapping, allowed, prefix: str) -> None:
        extra = sorted(set(table) - set(allowed))
        if extra:
            raise self.error(
                join(prefix, extra[0]), f"unknown key; expected one of {', '.join(sorted(allowed))}"
            )


def join(prefix: str, key: str) -> str:
    """The dotted key ``prefix.key`` (``key`` alone at the top level)."""
    return f"{prefix}.{key}" if prefix else key


def show(value: object) -> str:
    """A value as an error message names it: its TOML kind and its text."""
    if isinstance(value, dict):
        return "a table"
    kinds = {list: "an array", bool: "a boolean", str: "a string", int: "an integer", float: "a number"}
    return f"{kinds.get(type(value), type(value).__name__)} {value!r}"
