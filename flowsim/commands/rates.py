"""``flowsim rates SCENARIO.toml``: every flow of a scenario at once, max-min fair, no time.

The instantaneous allocation if all the scenario's flows with bytes to move ran together
(:func:`flowsim.scenario.rates_problem`): total throughput and
the saturated links that bound it. ``--scale`` repeats it with every link capacity
multiplied (one instance per factor, solved as a batch on ``--backend``: ``cpu`` uses every
core; ``cuda`` needs ``pip install 'flowsim[cuda]'`` and an NVIDIA GPU; ``auto`` picks cuda
where it can run). ``--system`` runs the scenario's flows on another system: it replaces the
``cluster`` of its ``[topology]`` (a preset, a shipped system such as ``aws-p5``, or a system
file), keeping the node count and the fabric keys.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from flowsim.batched import BACKENDS, BatchProblem, resolve_backend
from flowsim.commands.argtypes import non_negative_int, number_type
from flowsim.errors import InputError
from flowsim.fairshare import SATURATED_REL_TOL, check_ratios
from flowsim.formatting import format_rate
from flowsim.scenario import load_scenario, rates_problem

__all__ = ["add_parser", "rates_command"]


def rates_command(args: argparse.Namespace) -> int:
    """Handler of ``flowsim rates``: print throughput and bottlenecks per capacity scale."""
    scenario = load_scenario(args.scenario, system=args.system)
    t = scenario.topology
    flows, instant = rates_problem(scenario)
    if not flows.size:
        # As 'flowsim run' accepts such a scenario (a makespan of 0), this is an answer, not an error.
        print(f"# {scenario.name}: 0 flows with bytes to move (of {len(scenario.workload):,}): nothing to solve")
        return 0
    routes = instant.routes
    scales = np.array(args.scale, dtype=np.float64)
    names = [scenario.workload.names[f] for f in flows]
    with np.errstate(over="ignore"):  # reported below
        capacities = scales[:, None] * t.link_capacity_Bps[None, :]
    for scale, scaled in zip(scales, capacities, strict=True):
        # Checked per factor, so that the error names it: 1e300 sends capacities past float64,
        # 1e-300 puts them 1e300 below the flows' caps.
        if not np.isfinite(scaled).all():
            link = int(np.argmin(np.isfinite(scaled)))
            raise InputError(f"--scale {scale:g}: link {t.link_names[link]!r} would have "
                             f"{t.link_capacity_Bps[link]:.6g} x {scale:g} B/s, past float64's range")
        try:
            check_ratios(scaled, instant.weight, instant.cap_Bps, names, t.link_names)
        except InputError as err:
            raise InputError(f"--scale {scale:g}: {err}") from None
    problem = BatchProblem.build(
        routes, capacities, instant.weight, instant.cap_Bps, link_names=t.link_names, flow_names=names,
    )
    backend = resolve_backend(args.backend)
    rates = problem.solve(backend)
    on = f" on {args.system}" if args.system else ""
    print(f"# {scenario.name}{on}: {flows.size:,} flows over {t.n_links:,} links, all at once ({backend} backend)")
    for scale, capacity, rate in zip(scales, problem.capacity_Bps, rates, strict=True):
        load = routes.per_link_sum(rate)
        saturated = np.flatnonzero(load >= capacity * (1 - SATURATED_REL_TOL))
        by_flows = np.bincount(routes.flow_link_indices, minlength=t.n_links)[saturated]
        print(
            f"capacity x{scale:g}: total {format_rate(rate.sum())}, "
            f"min flow {format_rate(rate.min())}, {saturated.size} saturated links"
        )
        for link in saturated[np.argsort(-by_flows, kind="stable")][: args.top]:
            print(f"  {t.link_names[link]:<32} {format_rate(capacity[link]):>14}")
    return 0


# argparse ``type``s of the options.
_scale = number_type(float, lambda value: value > 0 and np.isfinite(value), "a positive finite number")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``flowsim rates``; its handler is :func:`rates_command`."""
    parser = subparsers.add_parser(
        "rates", help="max-min rates of all of a scenario's flows at once", description=__doc__
    )
    parser.add_argument("scenario", type=Path, help="a TOML scenario file")
    parser.add_argument(
        "--scale", type=_scale, nargs="+", default=[1.0], help="link capacity factors, one instance each"
    )
    parser.add_argument(
        "--system",
        help="run on this system instead of the scenario's cluster: a preset, a shipped system ('aws-p5') or "
        "a system file (FILE.toml, docs/system-format.md)",
    )
    parser.add_argument("--backend", choices=BACKENDS, default="cpu", help="where to solve (default: cpu)")
    parser.add_argument(
        "--top", type=non_negative_int, default=5, help="saturated links to list per instance (default 5; 0: none)"
    )
    parser.set_defaults(func=rates_command)
    return parser
