"""Quantities as people read them: seconds, bytes and rates in the unit that suits them."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_bytes", "format_rate", "format_runs", "format_seconds", "format_size"]


def format_seconds(seconds: float) -> str:
    """``0.00123`` -> ``"1.230 ms"``: three decimals in s, ms, us or ns; ``"1.000e+09 s"``
    from a million seconds on; ``"0 s"`` for nothing (a kind of communication the critical
    path does not cross), not ``"0.000 ns"``."""
    if seconds == 0:
        return "0 s"
    if abs(seconds) >= 1e6:  # a latency of 1e300 s would print 300 digits
        return f"{seconds:.3e} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.3f} ns"


def format_bytes(n_bytes: float) -> str:
    """Decimal units: ``1.5e9`` -> ``"1.50 GB"``; ``"1.00e+300 B"`` from a million TB on, and
    ``"3.00e-07 B"`` for amounts that would round to 0 B."""
    if abs(n_bytes) >= 1e18 or 0 < abs(n_bytes) < 0.5:  # 1e300 B would print 300 digits of TB, 1e-300 "0 B"
        return f"{n_bytes:.2e} B"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.2f} {unit}"
    return f"{n_bytes:.0f} B"


def format_size(size_bytes: int) -> str:
    """A message size in binary units, as nccl-tests' arguments write them: ``8388608`` ->
    ``"8 MiB"``, ``33553920`` -> ``"31.9995 MiB"``, ``512`` -> ``"512 B"``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:g} {unit}"
    return f"{size_bytes} B"


def format_rate(rate_Bps: float) -> str:
    """Bytes per second in decimal units: ``4.5e11`` -> ``"450.00 GB/s"``."""
    return f"{format_bytes(rate_Bps)}/s"


def format_runs(numbers: Sequence[int], most: int | None = None) -> str:
    """``[0, 1, 2, 5, 8, 9]`` as ``"0-2, 5, 8-9"``; with ``most``, the first ``most`` runs and
    ``", ..."`` after."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    shown = runs if most is None else runs[:most]
    text = [f"{a}-{b}" if b > a else str(a) for a, b in shown]
    return ", ".join(text) + (", ..." if len(shown) < len(runs) else "")
