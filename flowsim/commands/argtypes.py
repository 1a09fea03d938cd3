"""What the commands' argument parsers share: numbers checked as they are parsed (so that a
bad value is reported as argparse reports it), and the NCCL options of ``flowsim collective``
and ``flowsim check`` (``--nccl-env``, ``--nccl-version``)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from flowsim.collectives.builders import collective_name
from flowsim.collectives.constants import (
    DEFAULT_NCCL_VERSION,
    NCCL_VERSIONS,
    PredatedAlgorithm,
    leave_out,
    nccl_release,
    nearest_version,
    predated,
)
from flowsim.collectives.tuner import NcclEnv
from flowsim.engine import DEFAULT_TIME_REL_TOL
from flowsim.errors import InputError
from flowsim.fabrics import FABRICS
from flowsim.failures import apply_failures
from flowsim.hardware import switch_names
from flowsim.presets import preset_names
from flowsim.servers import ServerSpec
from flowsim.systemfile import resolve_system, shipped_system_names
from flowsim.topology import Topology

T = TypeVar("T")

__all__ = ["add_cluster_arguments", "add_failure_arguments", "add_nccl_arguments", "add_time_tolerance_argument",
           "cluster_options", "collective_arg", "failed_cluster", "nccl_version_lacks", "non_negative_int",
           "number_type", "parse_degrade", "parse_nccl_env", "positive_int"]


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

#: An argparse ``type``: an integer >= 0.
non_negative_int = number_type(int, lambda value: value >= 0, "a non-negative integer")


def add_time_tolerance_argument(parser: argparse.ArgumentParser) -> None:
    """``--time-rel-tol``: the engine's time windows (:func:`flowsim.engine.simulate`)."""
    parser.add_argument(
        "--time-rel-tol",
        type=number_type(float, lambda value: 0.0 <= value < 1.0, "a number in [0, 1)"),
        default=DEFAULT_TIME_REL_TOL,
        metavar="TOL",
        help=f"events this close in relative time are one instant (default {DEFAULT_TIME_REL_TOL:g}: exact "
        "times); 1e-3 for crowds of flows that finish one by one, as an all-to-all's on hashed spine paths",
    )


def collective_arg(text: str) -> str:
    """An argparse ``type``: a collective as flowsim, NCCL or nccl-tests spell it
    (:func:`flowsim.collectives.collective_name`), in flowsim's spelling."""
    try:
        return collective_name(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


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
        f"the version the log prints, else the one of its series or the newest older one flowsim has; "
        f"{DEFAULT_NCCL_VERSION} where it prints none"
        if version_from_log
        else DEFAULT_NCCL_VERSION
    )
    parser.add_argument(
        "--nccl-version",
        default=None if version_from_log else DEFAULT_NCCL_VERSION,
        action=_NcclVersion,
        metavar="VERSION",
        help=f"NCCL version whose constants and rules apply: {', '.join(NCCL_VERSIONS)}, or any other "
        f"MAJOR.MINOR.PATCH, which takes the one of its series, else the newest older of these, leaving out what "
        f"the version named did not have yet (NVLS, NVLSTree, LL128) (default {default})",
    )
    parser.set_defaults(nccl_version_asked=None)


class _NcclVersion(argparse.Action):
    """``--nccl-version``: the version of :data:`NCCL_VERSIONS` that stands for the NCCL
    named (:func:`~flowsim.collectives.constants.nearest_version`: the same release, else one
    of its series, else the newest older one), and in ``nccl_version_asked`` the version as
    named, whose lacks (:func:`nccl_version_lacks`: NVLS before 2.17.1, NVLSTree before
    2.18.1, LL128 before 2.5.6) :func:`parse_nccl_env` leaves out (``flowsim check`` works
    them out with the log's own settings). Where the version taken is another release, one
    note on stderr says which, and what is left out."""

    def __call__(self, parser, namespace, values, option_string=None):
        text = release = str(values)
        series = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
        if series is not None:
            # A series (2.26): the release of it flowsim has, else as its last release would be.
            found = [v for v, c in NCCL_VERSIONS.items() if c.release[:2] == (int(series[1]), int(series[2]))]
            release = found[0] if found else f"{series[1]}.{series[2]}.999"
            if found:
                print(f"# note: NCCL {text.strip()}: flowsim takes the constants of {found[0]}, the release of that "
                      "series it has", file=sys.stderr)
                text = found[0]
        version, wanted = nearest_version(release), nccl_release(release)
        if version is None or wanted is None:
            raise argparse.ArgumentError(self, f"expected an NCCL version MAJOR.MINOR.PATCH or a series "
                                               f"MAJOR.MINOR (flowsim has {', '.join(NCCL_VERSIONS)}), got {text!r}")
        taken = NCCL_VERSIONS[version].release
        lacked = predated(wanted)
        if taken != wanted:
            which = ("the one of its series" if taken[:2] == wanted[:2] else
                     "the newest older version it has" if taken < wanted else "the oldest it has")
            missing = "".join(f"; NCCL {text.strip()} had no {item.name}, left out ({item.key}={item.value} unless "
                              "--nccl-env sets it)" for item in lacked)
            print(f"# note: flowsim has no constants of NCCL {text.strip()}; it takes those of {version}, "
                  f"{which}{missing}", file=sys.stderr)
        setattr(namespace, self.dest, version)
        namespace.nccl_version_asked = release.strip()  # a series as its last release would be


def nccl_version_lacks(args: argparse.Namespace) -> tuple[PredatedAlgorithm, ...]:
    """What the NCCL ``--nccl-version`` named did not have yet
    (:func:`~flowsim.collectives.constants.predated`); none where it named none."""
    asked = args.nccl_version_asked
    release = None if asked is None else nccl_release(asked)
    return () if release is None else predated(release)


def parse_nccl_env(pairs: list[str], lacks: Sequence[PredatedAlgorithm] = ()) -> dict[str, str]:
    """``["NCCL_ALGO=Ring", ...]`` as a dict; a malformed pair or a repeated key is an
    :class:`~flowsim.errors.InputError` naming it. Variables the model does not follow
    (``NCCL_IB_HCA``, ...) are kept, and named in one note on stderr. ``lacks``, what the
    NCCL ``--nccl-version`` names did not have yet (:func:`nccl_version_lacks`), adds the
    variable that leaves each out, or to an exclusion list ``pairs`` give it
    (:func:`~flowsim.collectives.constants.leave_out`)."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        key = key.strip()
        if not equals or not key.startswith("NCCL_"):
            raise InputError(f"--nccl-env {pair!r}: expected NCCL_NAME=VALUE")
        if key in env:
            raise InputError(f"--nccl-env {key} is given twice")
        env[key] = value.strip()
    for item in lacks:
        left_out = leave_out(env, item)
        if left_out is not None:
            env[item.key] = left_out
    ignored = NcclEnv(env).ignored
    if ignored:
        print(f"flowsim: note: {', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not change the model "
              "(it follows NCCL_ALGO, NCCL_PROTO, channel counts, NCCL_NVLS_ENABLE, NCCL_NVLS_NCHANNELS, "
              "NCCL_NTHREADS, buffer and chunk sizes)", file=sys.stderr)
    return env


def add_failure_arguments(parser: argparse.ArgumentParser) -> None:
    """``--fail PATTERN`` and ``--degrade PATTERN=FACTOR`` (each repeatable): what-ifs on the
    cluster, as a scenario's ``fail`` and ``degrade`` options (:mod:`flowsim.failures`)."""
    parser.add_argument(
        "--fail", action="append", default=[], metavar="PATTERN",
        help="take out the links of the nodes or links whose names match (n0.nic3, 'ib.spine*'); repeatable",
    )
    parser.add_argument(
        "--degrade", action="append", default=[], metavar="PATTERN=FACTOR",
        help="scale the capacity of the links a pattern selects by a factor in (0, 1] ('ib.spine*=0.5'); "
        "repeatable",
    )


def parse_degrade(pairs: list[str]) -> dict[str, float]:
    """``["ib.spine*=0.5", ...]`` as a dict of pattern -> factor; a malformed pair, a factor
    that is not a number or a repeated pattern is an :class:`~flowsim.errors.InputError`
    naming it (the factor's range is checked with the patterns, by
    :func:`flowsim.failures.apply_failures`)."""
    out: dict[str, float] = {}
    for pair in pairs:
        pattern, equals, text = pair.rpartition("=")
        if not equals or not pattern:
            raise InputError(f"--degrade {pair!r}: expected PATTERN=FACTOR")
        try:
            factor = float(text)
        except ValueError:
            raise InputError(f"--degrade {pair!r}: the factor {text!r} is not a number") from None
        if pattern in out:
            raise InputError(f"--degrade {pattern!r} is given twice")
        out[pattern] = factor
    return out


def failed_cluster(topology: Topology, args: argparse.Namespace) -> Topology:
    """``topology`` with ``--fail`` and ``--degrade`` applied; an :class:`~flowsim.errors.InputError`
    naming the option and the pattern that matches nothing or has a bad factor."""
    degrade = parse_degrade(args.degrade)
    try:
        return apply_failures(topology, fail=args.fail, degrade=degrade)
    except InputError as err:
        raise InputError(f"--{err}") from None


def add_cluster_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--system PRESET|FILE.toml``, ``--fabric``, ``--switch`` and ``--oversubscription``
    (left out: the system file's ``[cluster]`` keys, else build_cluster's defaults)."""
    parser.add_argument(
        "--system",
        required=required,
        help=f"server preset ({', '.join(preset_names())}), shipped system ({', '.join(shipped_system_names())}; "
        "'-' and '_' are the same, case ignored) or a system file (FILE.toml, docs/system-format.md)",
    )
    parser.add_argument(
        "--fabric",
        choices=FABRICS,
        help="compute fabric between servers (default: the system file's, else auto: none for one server, "
        "rail_optimized for more)",
    )
    parser.add_argument("--switch", choices=switch_names(), help="switch model of the compute fabric "
                        "(default: the system file's, else the one matching the NICs)")
    parser.add_argument(
        "--oversubscription",
        type=number_type(float, lambda value: value >= 1, "a number >= 1"),
        help="leaf down/up port ratio of the compute fabric (default: the system file's, else 1)",
    )


def cluster_options(args: argparse.Namespace) -> tuple[str | ServerSpec, str, dict]:
    """The system, its name and the :func:`flowsim.fabrics.build_cluster` keywords that
    ``--system``, ``--nodes`` (where the command has it), ``--fabric``, ``--switch`` and
    ``--oversubscription`` give, over the system file's ``[cluster]`` table."""
    system, name, cluster = resolve_system(args.system)
    given = {"n_nodes": getattr(args, "nodes", None), "fabric": args.fabric, "switch": args.switch,
             "oversubscription": args.oversubscription}
    cluster.update({key: value for key, value in given.items() if value is not None})
    cluster.setdefault("fabric", "auto")
    return system, name, cluster
