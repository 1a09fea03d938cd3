"""The ``flowsim`` command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from flowsim.fairshare import max_min_rates


def _demo(args: argparse.Namespace) -> int:
    gb = 1e9
    rates = max_min_rates([["A", "B"], ["A"], ["B"]], [1 * gb, 2 * gb], link_names=["A", "B"])
    print("parking lot: link A 1 GB/s, link B 2 GB/s; f1 crosses A and B, f2 A, f3 B")
    for name, rate in zip(("f1", "f2", "f3"), rates):
        print(f"  {name}: {rate / gb:.3f} GB/s")
    print(f"  total {np.sum(rates) / gb:.3f} GB/s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flowsim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the built-in parking-lot example")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
