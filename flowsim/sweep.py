"""What-if sweeps: one base scenario, many parameter values, one result row per run.

A sweep spec is TOML. It names a base scenario (:mod:`flowsim.scenario`), the metrics to
keep, and axes over the scenario's fields. Runs execute in a local process pool or on a Dask
cluster; each finished run is appended to a journal so that a killed sweep resumes where it
stopped, and the table of all runs is written to HDF5.

Format
------
``[sweep]``
    ``scenario = "base.toml"`` (relative to the sweep file); ``solve``, ``"time"`` (the
    default: simulate each run over time) or ``"rates"`` (each run's instantaneous max-min
    allocation, see below); and ``metrics``, a non-empty array of names from :data:`METRICS`
    (``solve = "time"``) or :data:`RATE_METRICS` (``solve = "rates"``).
``[sweep.grid]``
    ``"path" = [v1, v2, ...]``: every combination of the listed values (a product).
``[sweep.zip]``
    ``"path" = [...]``: equal-length lists that advance together.
``[sweep.random]``
    ``samples`` (a positive integer), ``seed`` (a non-negative integer) and
    ``"path" = {uniform = [a, b]}``, ``{log_uniform = [a, b]}`` (``0 < a``),
    ``{int_uniform = [a, b]}`` (both ends included) or ``{choice = [...]}``: ``samples``
    seeded draws of every such field together.

The three kinds combine as a product (grid, then zip, then random; the last varies
fastest) of at most :data:`MAX_RUNS` runs. A path is dotted and indexes the base scenario's
TOML document, with integers for arrays of tables: ``"topology.n_nodes"``,
``"workload.collective.0.size_bytes"``; unquoted, the same path is TOML dotted keys and
means the same. A path may name a field the base scenario leaves out (``options.seed``);
the scenario checker then names the valid fields when it is not one.

Runs and results
----------------
A run's key is the SHA-256 of its parameters as canonical JSON, salted with the base
scenario's document and the content (SHA-256) of every file the run reads
(:data:`FILE_FIELDS`: its flow list), so a run is the same whatever the worker count, order
or expansion of the spec, or the machine, and editing a flow list runs its runs again. Each
finished run is one JSON line in ``<output>.journal``, handed to the operating system as
soon as it arrives (a SIGKILL loses none) and fsync'd once 0.2 s have passed since the last
fsync, and at the end; a last line cut short by a kill is ignored and dropped. Runs whose
key is in the journal are not run again; one that lacks a metric the spec now asks for runs
again, and one without the trace asked for runs again to write it (its row stays). The
HDF5 table (see :func:`write_results`) is rebuilt from the journal, atomically, when the
sweep ends or is interrupted. Parallel runs go to workers in batches of up to 32 (about 16
batches per worker), so short runs do not pay a pool's or Dask's per-task cost each.

Rates mode
----------
With ``solve = "rates"`` a run is not simulated over time: every flow of its scenario with
bytes to move is active at once, and the run is its weighted max-min allocation
(:func:`flowsim.scenario.rates_problem`, as ``flowsim rates`` computes it). Start times,
dependencies, delays, latencies and overheads play no part. Runs are built in this process
(scenario, routes, and the run's capacities, weights and caps, checked on their own so that
a bad run fails alone), then grouped by routes: runs with the same link count and the same flow -> link CSR arrays (a
sweep of capacities, weights, caps or sizes) are solved together by one
:meth:`flowsim.batched.BatchProblem.solve` on the chosen backend (``cpu``, ``cuda`` or
``auto``), runs whose routes differ form other batches. A batch holds at most
:data:`BATCH_RUNS` runs; and when the runs waiting in all batches together hold more than
:data:`BATCH_VALUES` values (a run counts its links twice and its flows four times:
capacities, tiers, weights, caps, sizes and rates; a batch its flow-link crossings twice),
the largest batch is solved early, so a batch exceeds that size only when one run does. A
run's ``wall_s`` is its own build and metric time plus an equal share of its batch's
check-and-solve time. Its key is salted with the mode, so the two modes never share journal
records.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import datetime
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import h5py
import numpy as np

import flowsim
from flowsim.batched import BatchProblem, resolve_backend
from flowsim.errors import InputError, output_file, read_text_file, whole_number
from flowsim.files import replaced_atomically
from flowsim.fairshare import SATURATED_REL_TOL, FairShareProblem
from flowsim.tomlcheck import Where
from flowsim.hardware import LinkTier
from flowsim.collectives.report import busbw_Bps
from flowsim.routes import Routes
from flowsim.scenario import ScenarioRun, rates_problem, run_scenario, scenario_from_document
from flowsim.trace import write_trace

__all__ = [
    "BATCH_RUNS",
    "BATCH_VALUES",
    "DISTRIBUTIONS",
    "FILE_FIELDS",
    "FORMAT",
    "METRICS",
    "RATE_METRICS",
    "SOLVES",
    "RunRecord",
    "RunSpec",
    "RunTask",
    "Runner",
    "Sweep",
    "SweepOutcome",
    "SweepTable",
    "apply_params",
    "canonical_json",
    "execute",
    "journal_path",
    "load_sweep",
    "parse_sweep",
    "read_journal",
    "read_results",
    "run_sweep",
    "simulate_run",
    "write_results",
]

#: ``format`` attribute of a results file.
FORMAT = "flowsim-sweep-results"
#: Random-axis distributions a ``[sweep.random]`` field may use.
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform", "choice")

#: A runner: one :class:`RunTask` in, metric name -> value out (see :func:`simulate_run`).
Runner = Callable[["RunTask"], Mapping[str, float]]


def _fct(q: float) -> Callable[[ScenarioRun, Mapping], float]:
    return lambda run, document: run.result.fct_percentiles((q,))[q]


def _max_utilization(run: ScenarioRun, document: Mapping) -> float:
    util = run.result.link_utilization()
    return float(util.max()) if util.size else 0.0


def _tier_utilization(tier: LinkTier, reduce: Callable[[np.ndarray], float]) -> Callable[[ScenarioRun, Mapping], float]:
    def metric(run: ScenarioRun, document: Mapping) -> float:
        util = run.result.link_utilization()[run.scenario.topology.link_tier == int(tier)]
        return float(reduce(util)) if util.size else math.nan

    return metric


def _only_collective(document: Mapping) -> Mapping:
    """The ``[[workload.collective]]`` table of a workload made of just one collective."""
    workload = document.get("workload")
    collectives = workload.get("collective") if isinstance(workload, dict) else None
    if not isinstance(collectives, list) or len(collectives) != 1 or "flows" in workload:
        raise InputError("busbw_Bps needs a workload of exactly one [[workload.collective]] and no flow list")
    return collectives[0]


def _busbw(run: ScenarioRun, document: Mapping) -> float:
    """nccl-tests bus bandwidth of the workload's only collective."""
    collective = _only_collective(document)
    op = collective["op"]
    if "ranks" in collective:
        n_ranks = len(collective["ranks"])
    else:
        n_ranks = 2 if op == "send" else len(run.scenario.topology.gpus())
    time_s = run.result.makespan_s - collective.get("start_s", 0.0)
    return busbw_Bps(op, collective["size_bytes"], time_s, n_ranks)


_METRIC_FUNCTIONS: dict[str, Callable[[ScenarioRun, Mapping], float]] = {
    "makespan_s": lambda run, document: run.result.makespan_s,
    "fct_p50_s": _fct(50.0),
    "fct_p99_s": _fct(99.0),
    "max_link_utilization": _max_utilization,
    **{
        f"utilization_{stat}_{tier.name.lower()}": _tier_utilization(tier, reduce)
        for tier in LinkTier
        for stat, reduce in (("max", np.max), ("mean", np.mean))
    },
    "busbw_Bps": _busbw,
    "step_time_s": lambda run, document: max(run.scenario.compute_s, run.result.makespan_s),
    "exposed_communication_s": lambda run, document: max(run.result.makespan_s - run.scenario.compute_s, 0.0),
    "n_events": lambda run, document: float(run.result.n_events),
    "n_flows": lambda run, document: float(run.result.n_flows),
}
#: Metric names a sweep with ``solve = "time"`` may keep. Per-tier utilization is NaN where a
#: topology has no link of that tier; ``wall_s`` (seconds a run took) is always kept.
METRICS = tuple(_METRIC_FUNCTIONS)

@dataclass(frozen=True)
class _Allocation:
    """One rates-mode run solved: what its metrics are computed from (B/s, bytes)."""

    routes: Routes
    rate_Bps: np.ndarray
    load_Bps: np.ndarray
    capacity_Bps: np.ndarray
    link_tier: np.ndarray
    size_bytes: np.ndarray

    def saturated(self) -> np.ndarray:
        """bool[n_links]: whether each link is loaded to capacity."""
        return self.load_Bps >= self.capacity_Bps * (1 - SATURATED_REL_TOL)


def _over_flows(reduce: Callable[[_Allocation], np.floating]) -> Callable[[_Allocation], float]:
    """A metric that reduces over flows: NaN for a run without flows."""
    return lambda a: float(reduce(a)) if a.rate_Bps.size else math.nan


def _saturated_in(tier: LinkTier) -> Callable[[_Allocation], float]:
    return lambda a: float(np.count_nonzero(a.saturated() & (a.link_tier == int(tier))))


_RATE_METRIC_FUNCTIONS: dict[str, Callable[[_Allocation], float]] = {
    "aggregate_rate_Bps": lambda a: float(a.rate_Bps.sum()),
    "min_rate_Bps": _over_flows(lambda a: a.rate_Bps.min()),
    "mean_rate_Bps": _over_flows(lambda a: a.rate_Bps.mean()),
    "max_utilization": lambda a: float((a.load_Bps / a.capacity_Bps).max(initial=0.0)),
    "saturated_links": lambda a: float(np.count_nonzero(a.saturated())),
    **{f"saturated_links_{tier.name.lower()}": _saturated_in(tier) for tier in LinkTier},
    "drain_at_rates_s": _over_flows(lambda a: (a.size_bytes / a.rate_Bps).max()),
    "busiest_link_s": lambda a: float((a.routes.per_link_sum(a.size_bytes) / a.capacity_Bps).max(initial=0.0)),
    "n_flows": lambda a: float(a.rate_Bps.size),
}
#: Metric names a sweep with ``solve = "rates"`` may keep, each of one run's all-at-once
#: max-min allocation: ``aggregate_rate_Bps``, ``min_rate_Bps`` and ``mean_rate_Bps`` (the
#: sum, least and mean of the flows' rates; the last two NaN without flows);
#: ``max_utilization`` (the largest link load / capacity); ``saturated_links`` (links loaded
#: to within :data:`flowsim.fairshare.SATURATED_REL_TOL` of capacity) and ``saturated_links_<tier>`` (those of
#: one :class:`~flowsim.hardware.LinkTier`); ``drain_at_rates_s`` (the largest size / rate
#: over flows: when the last flow would finish if every flow kept its all-at-once rate. It is
#: not the makespan, nor a bound on it: as flows finish the others' max-min rates change,
#: up or down, and latencies, start times and dependencies are ignored);
#: ``busiest_link_s`` (the largest bytes crossing a link / its capacity: a lower bound on
#: the time to move every flow's bytes with no dependencies, whatever the rates); and
#: ``n_flows`` (the flows with bytes to move).
RATE_METRICS = tuple(_RATE_METRIC_FUNCTIONS)
#: Values of ``[sweep] solve`` and the metric names each allows.
SOLVES = {"time": METRICS, "rates": RATE_METRICS}
#: Most runs a sweep may have: every run is built (parameters and key, about 0.8 kB) before
#: the first one starts, which takes about 9 s for a million.
MAX_RUNS = 1_000_000
#: Most runs one rates-mode batch holds.
BATCH_RUNS = 256
#: Most values (float64 or int64, 8 bytes each) that the runs waiting for rates-mode batches
#: hold together: 2**25 is 256 MiB.
BATCH_VALUES = 2**25


# --- the spec -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    """One point of a sweep: its position, key and parameter values (path -> value)."""

    index: int
    key: str
    params: dict[str, Any]


@dataclass(frozen=True)
class RunTask:
    """Everything a worker needs for one run; plain data, so it pickles cheaply.

    Attributes
    ----------
    key : str
        The run's key (64 hex digits).
    params : dict
        Parameter path -> value.
    document : dict
        The base scenario's TOML document with the parameters applied.
    text : str
        Scenario text to store in a trace: the parameters as comments, then the base file.
    source : str
        The base scenario's path, for error messages.
    base_dir : str
        Absolute directory of the base scenario (flow lists are relative to it).
    metrics : tuple of str
        Names from :data:`METRICS` to compute.
    trace_path : str or None
        Where to write the run's full trace, if anywhere.
    """

    key: str
    params: dict[str, Any]
    document: dict
    text: str
    source: str
    base_dir: str
    metrics: tuple[str, ...]
    trace_path: str | None = None


@dataclass(frozen=True)
class Sweep:
    """A checked sweep spec and its expanded runs.

    Attributes
    ----------
    source : str
        The sweep file (or ``"<string>"``).
    text : str
        The sweep spec, verbatim.
    scenario_path : Path
        The base scenario file.
    scenario_text : str
        Its text, verbatim.
    document : dict
        Its parsed TOML document.
    metrics : tuple of str
        Metrics every run keeps, in the spec's order.
    parameters : tuple of str
        Parameter paths: grid, then zip, then random, each in the spec's order.
    runs : tuple of RunSpec
        Every run, in index order.
    solve : str
        ``"time"`` (simulate each run) or ``"rates"`` (each run's all-at-once allocation).
    files : tuple of Path
        Other files the runs read (:data:`FILE_FIELDS`: flow lists), each once.
    """

    source: str
    text: str
    scenario_path: Path
    scenario_text: str
    document: dict
    metrics: tuple[str, ...]
    parameters: tuple[str, ...]
    runs: tuple[RunSpec, ...]
    solve: str = "time"
    files: tuple[Path, ...] = ()

    def task(self, run: RunSpec, traces: str | os.PathLike | None = None) -> RunTask:
        """The :class:`RunTask` of ``run``; its trace goes to ``traces/<key>.h5`` if given."""
        header = [f"# flowsim sweep run {run.key}: these values replace the file's below"]
        header += [f"#   {path} = {json.dumps(value, ensure_ascii=False)}" for path, value in run.params.items()]
        return RunTask(
            key=run.key,
            params=run.params,
            document=apply_params(self.document, run.params),
            text="\n".join(header) + "\n" + self.scenario_text,
            source=str(self.scenario_path),
            base_dir=str(self.scenario_path.resolve().parent),
            metrics=self.metrics,
            trace_path=None if traces is None else str(_trace_path(traces, run.key)),
        )


def _trace_path(traces: str | os.PathLike, key: str) -> Path:
    """Where the trace of the run keyed ``key`` goes in the directory ``traces``."""
    return Path(traces) / f"{key}.h5"


def canonical_json(value: object) -> str:
    """``value`` as JSON with sorted keys and no spaces: the same text for equal values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _flatten(where: Where, table: Mapping, prefix: str, key: str, is_leaf: Callable[[object], bool],
             expected: str) -> dict:
    """Dotted path -> leaf value of a (possibly nested) axis table; a value that is neither a
    leaf nor a table is reported as not being ``expected``."""
    out = {}
    for name, value in table.items():
        path = f"{prefix}.{name}" if prefix else name
        if is_leaf(value):
            out[path] = value
        elif isinstance(value, dict):
            out.update(_flatten(where, value, path, key, is_leaf, expected))
        else:
            raise where.error(f"{key}.{path}", f"expected {expected}, got {value!r}")
    return out


def _values(where: Where, axis: str, kind: str) -> dict[str, list]:
    """Check a grid or zip table: each path -> a non-empty array of values."""
    paths = _flatten(where, where.table(axis, f"sweep.{kind}"), "", f"sweep.{kind}", lambda v: isinstance(v, list),
                     "an array of values")
    for path, values in paths.items():
        if not values:
            raise where.error(f"sweep.{kind}.{path}", "expected a non-empty array of values")
    return paths


def _distribution(where: Where, key: str, spec: Mapping) -> tuple[str, list]:
    if len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        raise where.error(key, f"expected one of {', '.join(DISTRIBUTIONS)} (e.g. {{uniform = [0, 1]}}), got {spec!r}")
    kind, args = next(iter(spec.items()))
    if not isinstance(args, list) or not args:
        raise where.error(f"{key}.{kind}", f"expected a non-empty array, got {args!r}")
    if kind == "choice":
        return kind, args
    numbers = (int,) if kind == "int_uniform" else (int, float)
    what = "integers" if kind == "int_uniform" else "numbers"
    if len(args) != 2 or any(isinstance(a, bool) or not isinstance(a, numbers) for a in args):
        raise where.error(f"{key}.{kind}", f"expected [low, high], two {what} with low <= high, got {args!r}")
    # NaN passes no comparison, so it is caught here rather than by low <= high.
    bad = next((a for a in args if not _in_range(kind, a)), None)
    if bad is not None:
        bounds = "integers from -2**63 to 2**63 - 1" if kind == "int_uniform" else "finite numbers"
        raise where.error(f"{key}.{kind}", f"expected {bounds}, got the bound {bad!r} in {args!r}")
    if args[0] > args[1]:
        raise where.error(f"{key}.{kind}", f"expected [low, high], two {what} with low <= high, got {args!r}")
    if kind == "log_uniform" and args[0] <= 0:
        raise where.error(f"{key}.{kind}", f"expected 0 < low, got {args!r}")
    if kind == "uniform" and not math.isfinite(float(args[1]) - float(args[0])):
        raise where.error(f"{key}.{kind}", f"expected high - low to be a finite number, got {args!r}")
    return kind, args


def _in_range(kind: str, bound: float) -> bool:
    """Whether ``bound`` can end a ``kind`` range: an int64 for ``int_uniform`` (TOML
    integers may be larger), a finite float for the others."""
    if kind == "int_uniform":
        return -(2**63) <= bound < 2**63
    try:
        return math.isfinite(bound)
    except OverflowError:  # an integer past the float range
        return False


def _random_points(where: Where, table: Mapping) -> tuple[list[str], list[dict]]:
    """Paths and seeded samples of ``[sweep.random]``."""
    samples = where.integer(table, "samples", "sweep.random", 1)
    if samples > MAX_RUNS:
        raise where.error("sweep.random.samples", f"{samples:,} samples; a sweep may have at most {MAX_RUNS:,} runs")
    seed = where.integer(table, "seed", "sweep.random", 0)
    fields = {k: v for k, v in table.items() if k not in ("samples", "seed")}

    def is_leaf(value: object) -> bool:
        return isinstance(value, dict) and bool(set(value) & set(DISTRIBUTIONS))

    flat = _flatten(where, fields, "", "sweep.random", is_leaf,
                    f"a distribution ({', '.join(f'{{{d} = [...]}}' for d in DISTRIBUTIONS)})")
    if not flat:
        raise where.error("sweep.random", "expected at least one field to draw besides 'samples' and 'seed'")
    dists = {path: _distribution(where, f"sweep.random.{path}", spec) for path, spec in flat.items()}
    rng = np.random.default_rng(seed)
    draw = {
        "uniform": lambda args: float(rng.uniform(args[0], args[1])),
        "log_uniform": lambda args: float(math.exp(rng.uniform(math.log(args[0]), math.log(args[1])))),
        "int_uniform": lambda args: int(rng.integers(args[0], args[1], endpoint=True)),
        "choice": lambda args: copy.deepcopy(args[int(rng.integers(len(args)))]),
    }
    points = [{path: draw[kind](args) for path, (kind, args) in dists.items()} for _ in range(samples)]
    return list(dists), points


def _split(path: str) -> list[str | int]:
    return [int(part) if part.isdigit() else part for part in path.split(".")]


def _scenario_key(parts: Sequence[str | int]) -> str:
    """A path as scenario errors write it: ``workload.collective[0].size_bytes``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _kind(value: object) -> str:
    if isinstance(value, list):
        return f"an array of {len(value)}"
    return "a table" if isinstance(value, dict) else f"a {type(value).__name__}"


def _check_path(where: Where, document: Mapping, path: str, key: str) -> tuple[str, ...]:
    """Check that ``path`` leads somewhere in ``document``. If it adds fields the document
    lacks, return their keys as scenario errors write them (``options``, ``options.seed``),
    else an empty tuple."""
    if "/" in path or path.count(".") < 1 or "" in path.split("."):
        raise where.error(key, "expected a dotted path with a section and a field, such as 'topology.n_nodes'")
    node: object = document
    walked: list[str | int] = []
    for part in _split(path):
        here = _scenario_key(walked) or "the scenario"
        if isinstance(node, dict):
            if isinstance(part, int):
                raise where.error(key, f"{here} is a table; expected one of its fields ({', '.join(node)}), got {part}")
            if part not in node:
                parts = _split(path)
                return tuple(_scenario_key(parts[:end]) for end in range(len(walked) + 1, len(parts) + 1))
            node = node[part]
        elif isinstance(node, list):
            if not isinstance(part, int) or part >= len(node):
                raise where.error(key, f"{here} is {_kind(node)}; expected an index 0..{len(node) - 1}, got {part!r}")
            node = node[part]
        else:
            raise where.error(key, f"{here} is {_kind(node)}, not a table or array; cannot index it with {part!r}")
        walked.append(part)
    return ()


def apply_params(document: Mapping, params: Mapping[str, Any]) -> dict:
    """A deep copy of ``document`` with each dotted path of ``params`` set to its value.

    Missing tables on a path are created; paths are assumed checked by :func:`parse_sweep`.
    """
    out = copy.deepcopy(dict(document))
    for path, value in params.items():
        *parents, last = _split(path)
        node: Any = out
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        node[last] = copy.deepcopy(value)
    return out


def _metrics(where: Where, metrics: object, solve: str) -> tuple[str, ...]:
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise where.error("sweep.metrics", f"expected a non-empty array of metric names, got {metrics!r}")
    valid = SOLVES[solve]
    for i, name in enumerate(metrics):
        if name not in valid:
            other = next((mode for mode, names in SOLVES.items() if name in names), None)
            what = f"{name!r} is a metric of solve = {other!r}" if other else f"unknown metric {name!r}"
            raise where.error(f"sweep.metrics[{i}]", f"{what}; valid ones with solve = {solve!r}: {', '.join(valid)}")
    if len(set(metrics)) != len(metrics):
        raise where.error("sweep.metrics", f"a metric is listed twice: {metrics!r}")
    return tuple(metrics)


#: Scenario fields that name a file a run reads, relative to the scenario file (see
#: :mod:`flowsim.scenario`): a run's key covers the content of each.
FILE_FIELDS = ("workload.flows",)


def _field(document: Mapping, params: Mapping[str, Any], path: str) -> object:
    """The value at dotted ``path`` of ``document`` with ``params`` applied; None if absent."""
    if path in params:
        return params[path]
    node: object = document
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _runs(
    document: Mapping, solve: str, base_dir: Path, *points: list[dict]
) -> tuple[tuple[RunSpec, ...], tuple[Path, ...]]:
    """The product of the grid, zip and random points (the last varies fastest), and the
    files they read (:data:`FILE_FIELDS`, relative to ``base_dir``), each once.

    A run's key is the SHA-256 of the base document's digest, the mode unless it is
    ``"time"`` (whose keys predate the modes), the SHA-256 of each file it reads (as JSON
    by field; left out when it reads none, as keys predate it; null for a file that cannot
    be read, whose run fails) and its parameters' canonical JSON.
    """
    salt = hashlib.sha256(canonical_json(document).encode()).hexdigest()
    mode = "" if solve == "time" else f"solve={solve}\n"
    digests: dict[Path, str | None] = {}
    runs = []
    for index, combination in enumerate(itertools.product(*points)):
        params = {path: value for point in combination for path, value in point.items()}
        files: dict[str, str | None] = {}
        for field in FILE_FIELDS:
            name = _field(document, params, field)
            if isinstance(name, str):
                path = base_dir / name
                if path not in digests:
                    digests[path] = _digest(path)
                files[field] = digests[path]
        read = f"files={canonical_json(files)}\n" if files else ""
        key = hashlib.sha256(f"{salt}\n{mode}{read}{canonical_json(params)}".encode()).hexdigest()
        runs.append(RunSpec(index, key, params))
    return tuple(runs), tuple(path for path, digest in digests.items() if digest is not None)


def _digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes; None when it cannot be read (the run then says why)."""
    try:
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return None


def _check_new_fields(where: Where, sweep: Sweep, new: Mapping[str, tuple[str, ...]]) -> None:
    """Build the first run's scenario so the scenario checker judges fields the base lacks.

    ``new`` maps the spec key of each such axis to the fields on its path that the base
    scenario lacks. Other errors are left to the runs, which record them.
    """
    task = sweep.task(sweep.runs[0])
    try:
        scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    except InputError as err:
        for key, fields in new.items():
            if any(f": {field}: unknown key" in str(err) for field in fields):
                raise where.error(key, f"unknown field: {err}") from None


def parse_sweep(text: str, *, source: str = "<string>", base_dir: str | os.PathLike = ".") -> Sweep:
    """Check a sweep spec given as TOML text, read its base scenario and expand its runs.

    Parameters
    ----------
    text : str
        The sweep spec (format in the module docstring).
    source : str
        Name used in error messages (the file name).
    base_dir : str or path-like
        Directory the ``scenario`` path is relative to.

    Returns
    -------
    Sweep

    Raises
    ------
    InputError
        Naming ``source``, the key (``sweep.grid.topology.n_nodes``) and what was expected;
        an unknown scenario field or metric, or a metric of the other ``solve`` mode, names
        the valid ones.
    """
    where = Where(source)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise where.error("", f"not valid TOML: {err}") from None
    where.only(doc, ("sweep",), "")
    table = where.table(doc.get("sweep"), "sweep")
    where.only(table, ("scenario", "solve", "metrics", "grid", "zip", "random"), "sweep")
    if not isinstance(table.get("scenario"), str):
        got = table.get("scenario")
        raise where.error("sweep.scenario", f"expected the base scenario's path (a string), got {got!r}")
    scenario_path = Path(base_dir) / table["scenario"]
    try:
        scenario_text = scenario_path.read_text(encoding="utf-8")
        document = tomllib.loads(scenario_text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise where.error("sweep.scenario", f"cannot read the scenario {str(scenario_path)!r}: {err}") from None

    solve = where.choice(table, "solve", "sweep", tuple(SOLVES), "time")
    metrics = _metrics(where, table.get("metrics"), solve)
    grid = _values(where, table.get("grid", {}), "grid")
    zipped = _values(where, table.get("zip", {}), "zip")
    lengths = {len(v) for v in zipped.values()}
    if len(lengths) > 1:
        sizes = ", ".join(f"{path}: {len(v)}" for path, v in zipped.items())
        raise where.error("sweep.zip", f"the arrays must have equal lengths, got {sizes}")
    random_paths, random_points = (
        _random_points(where, where.table(table["random"], "sweep.random")) if "random" in table else ([], [{}])
    )
    keys = {
        **{p: f"sweep.grid.{p}" for p in grid},
        **{p: f"sweep.zip.{p}" for p in zipped},
        **{p: f"sweep.random.{p}" for p in random_paths},
    }
    if len(keys) != len(grid) + len(zipped) + len(random_paths):
        twice = next(p for p in keys if sum(p in axis for axis in (grid, zipped, random_paths)) > 1)
        raise where.error(keys[twice], "this path is swept by more than one of grid, zip and random")
    if not keys:
        raise where.error("sweep", "expected at least one axis: [sweep.grid], [sweep.zip] or [sweep.random]")
    n_zip = len(next(iter(zipped.values()))) if zipped else 1
    n_runs = math.prod(len(values) for values in grid.values()) * n_zip * len(random_points)
    if n_runs > MAX_RUNS:
        sizes = [*(f"{len(values):,} values of sweep.grid.{path}" for path, values in grid.items()),
                 *([f"{n_zip:,} of sweep.zip"] if zipped else []),
                 *([f"{len(random_points):,} samples"] if random_paths else [])]
        raise where.error("sweep", f"{n_runs:,} runs ({' x '.join(sizes)}); a sweep may have at most {MAX_RUNS:,}: "
                                   "split it into several sweeps")
    new = {key: fields for path, key in keys.items() if (fields := _check_path(where, document, path, key))}
    grid_points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    zip_points = [dict(zip(zipped, values)) for values in zip(*zipped.values())] or [{}]
    runs, files = _runs(document, solve, scenario_path.resolve().parent, grid_points, zip_points, random_points)
    sweep = Sweep(
        source=source,
        text=text,
        scenario_path=scenario_path,
        scenario_text=scenario_text,
        document=document,
        metrics=metrics,
        parameters=tuple(keys),
        runs=runs,
        solve=solve,
        files=files,
    )
    if new:
        _check_new_fields(where, sweep, new)
    if "busbw_Bps" in metrics:
        try:
            _only_collective(sweep.task(runs[0]).document)
        except InputError as err:
            raise where.error(f"sweep.metrics[{metrics.index('busbw_Bps')}]", str(err)) from None
    return sweep


def load_sweep(path: str | os.PathLike) -> Sweep:
    """Load a sweep spec; its ``scenario`` path is relative to the spec file.

    Raises
    ------
    InputError
        When the file cannot be read or its content is bad (see :func:`parse_sweep`).
    """
    path = Path(path)
    text = read_text_file(path, "the sweep spec")
    return parse_sweep(text, source=str(path), base_dir=path.parent)


# --- one run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """Outcome of one run: ``status`` is ``"ok"`` or ``"error"`` (with ``error`` its text;
    metrics are then NaN); ``wall_s`` is the seconds the run took in its worker (with
    ``solve = "rates"``: its build and metric time plus its share of its batch's solve)."""

    key: str
    params: dict[str, Any]
    status: str
    error: str
    metrics: dict[str, float]
    wall_s: float

    def to_json(self) -> str:
        """One journal line (without the newline)."""
        return json.dumps(
            {"key": self.key, "params": self.params, "status": self.status, "error": self.error,
             "metrics": self.metrics, "wall_s": self.wall_s},
            ensure_ascii=False, default=str,
        )


def simulate_run(task: RunTask) -> dict[str, float]:
    """The default runner: build the task's scenario, simulate it, compute its metrics.

    Parameters
    ----------
    task : RunTask

    Returns
    -------
    dict
        Metric name -> value, for each of ``task.metrics``.

    Raises
    ------
    InputError
        When the scenario is bad for these parameter values, or a metric does not apply
        (``busbw_Bps`` of a workload that is not one collective).
    """
    scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    run = run_scenario(scenario)
    metrics = {name: float(_METRIC_FUNCTIONS[name](run, task.document)) for name in task.metrics}
    if task.trace_path is not None:
        write_trace(task.trace_path, scenario.topology, scenario.workload, run.routes, run.result,
                    scenario_text=task.text)
    return metrics


def execute(runner: Runner, task: RunTask) -> RunRecord:
    """Run one task with ``runner`` and time it; an exception becomes an ``"error"`` record.

    Any exception is caught on purpose: one failing run must not stop the sweep, and its
    text is kept in the results.
    """
    start = time.perf_counter()
    try:
        values = runner(task)
        missing = [name for name in task.metrics if name not in values]
        if missing:
            raise InputError(f"the runner returned no value for metric {missing[0]!r}")
        metrics = {name: float(values[name]) for name in task.metrics}
    except Exception as err:  # noqa: BLE001 - recorded in the run's row
        return _failed(task.key, task.params, task.metrics, err, time.perf_counter() - start)
    return RunRecord(task.key, task.params, "ok", "", metrics, time.perf_counter() - start)


def _failed(key: str, params: dict[str, Any], metrics: Sequence[str], err: Exception, wall_s: float) -> RunRecord:
    """The ``"error"`` record of a run that raised ``err``: an input error reads as its own
    text, anything else with its type first."""
    error = str(err) if isinstance(err, InputError) else f"{type(err).__name__}: {err}"
    return RunRecord(key, params, "error", error, {name: math.nan for name in metrics}, wall_s)


# --- rates mode: runs built here, solved in batches that share routes ----------------------


@dataclass(frozen=True)
class _RatesRun:
    """A rates-mode run built and checked on its own, waiting for its batch.

    ``build_s`` is the seconds building it took; the arrays are its links' capacities (B/s)
    and tiers, and its flows' weights, caps (B/s) and sizes (bytes).
    """

    run: RunSpec
    build_s: float
    capacity_Bps: np.ndarray
    link_tier: np.ndarray
    weight: np.ndarray
    cap_Bps: np.ndarray
    size_bytes: np.ndarray

    @property
    def n_values(self) -> int:
        """Values it holds until solved: two per link, four per flow (its rates included)."""
        return 2 * self.capacity_Bps.size + 4 * self.weight.size


def _build_rates_run(sweep: Sweep, run: RunSpec) -> tuple[FairShareProblem, _RatesRun]:
    """Build ``run``'s scenario and routes, and check its max-min problem on its own (the
    problem is returned: its routes and their transpose serve the run's batch).

    Raises
    ------
    InputError
        Naming the scenario file, when the scenario is bad for these parameter values, a
        flow cannot be routed, or a flow has neither a route nor a rate cap.
    """
    start = time.perf_counter()
    task = sweep.task(run)
    scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    flows, problem = rates_problem(scenario)
    built = _RatesRun(run, time.perf_counter() - start, problem.capacity_Bps, scenario.topology.link_tier,
                      problem.weight, problem.cap_Bps, scenario.workload.size_bytes[flows])
    return problem, built


@dataclass
class _Batch:
    """Runs over the same routes, waiting to be solved together: ``first`` is the first run's
    checked problem, whose routes and transpose the batch uses; ``n_values`` counts the runs'
    values and the routes' flow-link crossings twice (the CSR and its transpose)."""

    first: FairShareProblem
    runs: list[_RatesRun]
    n_values: int

    @property
    def routes(self) -> Routes:
        return self.first.routes


def _solve_batch(batch: _Batch, metrics: Sequence[str], backend: str) -> list[RunRecord]:
    """Solve a batch with one :meth:`BatchProblem.solve` and compute each run's metrics.

    Each run was checked when it was built, so the batch is not checked again. Each run's
    ``wall_s`` is its build time, its metric time and an equal share of the batch's solve
    time. Should the solve fail (a GPU error), every run of the batch records the error.
    """
    start = time.perf_counter()
    runs = batch.runs
    try:
        problem = BatchProblem.from_checked(
            batch.first,
            np.stack([r.capacity_Bps for r in runs]),
            _once_or_stacked([r.weight for r in runs]),
            _once_or_stacked([r.cap_Bps for r in runs]),
        )
        rates = problem.solve(backend)
    except Exception as err:  # noqa: BLE001 - recorded in every row of the batch
        share = (time.perf_counter() - start) / len(runs)
        return [_failed(r.run.key, r.run.params, metrics, err, r.build_s + share) for r in runs]
    share = (time.perf_counter() - start) / len(runs)
    records = []
    for built, rate in zip(runs, rates, strict=True):
        begin = time.perf_counter()
        allocation = _Allocation(batch.routes, rate, batch.routes.per_link_sum(rate), built.capacity_Bps,
                                 built.link_tier, built.size_bytes)
        values = {name: _RATE_METRIC_FUNCTIONS[name](allocation) for name in metrics}
        wall_s = built.build_s + share + time.perf_counter() - begin
        records.append(RunRecord(built.run.key, built.run.params, "ok", "", values, wall_s))
    return records


def _once_or_stacked(rows: list[np.ndarray]) -> np.ndarray:
    """One row when every run has the same values (as in a sweep over capacities), which a
    batch keeps once for all its instances; else one row per run."""
    if all(np.array_equal(row, rows[0]) for row in rows[1:]):
        return rows[0]
    return np.stack(rows)


class _RatesSolver:
    """Builds rates-mode runs one by one and solves them in batches of shared routes.

    A batch is solved when it holds :data:`BATCH_RUNS` runs, the largest one whenever the
    waiting runs pass :data:`BATCH_VALUES` values, and the rest once every run is built.
    ``n_batches`` counts the batches solved.
    """

    def __init__(self, sweep: Sweep, backend: str) -> None:
        self.sweep, self.backend = sweep, backend
        self.waiting: dict[tuple[int, bytes, bytes], _Batch] = {}
        self.n_values = 0
        self.n_batches = 0

    def records(self, runs: Iterable[RunSpec]) -> Iterator[list[RunRecord]]:
        """Yield a failed build's record at once, and a batch's records when it is solved."""
        for run in runs:
            start = time.perf_counter()
            try:
                problem, built = _build_rates_run(self.sweep, run)
            except Exception as err:  # noqa: BLE001 - recorded in the run's row
                yield [_failed(run.key, run.params, self.sweep.metrics, err, time.perf_counter() - start)]
                continue
            routes = problem.routes
            key = (routes.n_links, routes.flow_link_indptr.tobytes(), routes.flow_link_indices.tobytes())
            if key not in self.waiting:
                self.waiting[key] = _Batch(problem, [], 2 * routes.n_incidences)
                self.n_values += 2 * routes.n_incidences
            batch = self.waiting[key]
            batch.runs.append(built)
            batch.n_values += built.n_values
            self.n_values += built.n_values
            if len(batch.runs) >= BATCH_RUNS:
                yield self._solve(key)
            while self.n_values > BATCH_VALUES:
                yield self._solve(max(self.waiting, key=lambda k: self.waiting[k].n_values))
        while self.waiting:
            yield self._solve(next(iter(self.waiting)))

    def _solve(self, key: tuple[int, bytes, bytes]) -> list[RunRecord]:
        batch = self.waiting.pop(key)
        self.n_values -= batch.n_values
        self.n_batches += 1
        return _solve_batch(batch, self.sweep.metrics, self.backend)


# --- journal and results --------------------------------------------------------------------


def journal_path(output: str | os.PathLike) -> Path:
    """The journal next to a results file: ``results.h5`` -> ``results.h5.journal``."""
    output = Path(output)
    return output.with_name(output.name + ".journal")


def read_journal(path: str | os.PathLike) -> dict[str, RunRecord]:
    """Records of a journal by key (a later line for a key wins); {} if there is no file.

    A last line without its newline (a write cut short) is ignored.

    Raises
    ------
    InputError
        When a complete line is not a journal record.
    """
    path = Path(path)
    if not path.exists():
        return {}
    records = {}
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    for number, line in enumerate(lines[:-1], start=1):
        if not line:
            continue
        try:
            row = json.loads(line)
            record = RunRecord(row["key"], row["params"], row["status"], row["error"], row["metrics"], row["wall_s"])
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}: line {number}: not a sweep journal record ({err})") from None
        records[record.key] = record
    return records


class _Journal:
    """Appends records as JSON lines; first drops a torn last line.

    Every append is flushed to the operating system at once, so killing the sweep (even
    with SIGKILL) loses no appended record. ``fsync`` (against a machine crash) runs at most
    every ``fsync_interval_s`` and on close: one fsync per record (about 2 ms on a virtual
    disk) would double the time of a small run.
    """

    def __init__(self, path: Path, fsync_interval_s: float = 0.2) -> None:
        self.file = open(path, "a+b")  # noqa: SIM115 - closed by close()
        self.file.seek(0)
        data = self.file.read()
        if data and not data.endswith(b"\n"):
            self.file.truncate(data.rfind(b"\n") + 1)
        self.fsync_interval_s = fsync_interval_s
        self.synced = time.monotonic()

    def append(self, records: Sequence[RunRecord]) -> None:
        self.file.write(b"".join(record.to_json().encode() + b"\n" for record in records))
        self.file.flush()
        if time.monotonic() - self.synced >= self.fsync_interval_s:
            self.sync()

    def sync(self) -> None:
        os.fsync(self.file.fileno())
        self.synced = time.monotonic()

    def close(self) -> None:
        self.sync()
        self.file.close()


def _column(values: list) -> np.ndarray:
    """Values of one parameter as a typed column; mixed or structured values as JSON text."""
    if all(isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.bool_)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.int64)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.float64)
    return np.array([v if isinstance(v, str) else canonical_json(v) for v in values], dtype=object)


def _table(sweep: Sweep, records: Mapping[str, RunRecord]) -> dict[str, np.ndarray]:
    """Columns of the finished runs, in index order; parameter dtypes follow all runs."""
    rows = [run for run in sweep.runs if run.key in records]
    done = np.array([run.key in records for run in sweep.runs], dtype=bool)
    columns: dict[str, np.ndarray] = {
        "index": np.array([run.index for run in rows], dtype=np.int64),
        "key": np.array([run.key for run in rows], dtype=object),
    }
    for path in sweep.parameters:
        columns[path] = _column([run.params[path] for run in sweep.runs])[done]
    for name in sweep.metrics:
        columns[name] = np.array([records[run.key].metrics.get(name, math.nan) for run in rows], dtype=np.float64)
    columns["status"] = np.array([records[run.key].status for run in rows], dtype=object)
    columns["error"] = np.array([records[run.key].error for run in rows], dtype=object)
    columns["wall_s"] = np.array([records[run.key].wall_s for run in rows], dtype=np.float64)
    return columns


def write_results(path: str | os.PathLike, sweep: Sweep, records: Mapping[str, RunRecord]) -> Path:
    """Write the table of ``sweep``'s finished runs to HDF5, atomically.

    Parameters
    ----------
    path : str or path-like
        Target file; replaced if it exists.
    sweep : Sweep
    records : mapping
        Key -> :class:`RunRecord`; runs of ``sweep`` without a record are left out.

    Returns
    -------
    Path

    Notes
    -----
    Layout: group ``/runs`` holds one dataset per column, one row per finished run in
    index order: ``index`` (int64), ``key``, one per parameter path (bool, int64, float64
    or UTF-8 text; arrays and tables as JSON text), one per metric (float64, NaN for a
    failed run), ``status``, ``error`` (UTF-8) and ``wall_s`` (float64). Its ``columns``
    attribute lists them in order. File attributes: ``format``, ``flowsim_version``,
    ``created_utc``, ``sweep_source``, ``sweep_text``, ``scenario_text``, ``n_runs`` (in the
    spec), ``parameters`` and ``metrics`` (JSON arrays). The file is written whole or not at
    all (:func:`flowsim.files.replaced_atomically`).
    """
    target = Path(path)
    columns = _table(sweep, records)
    with replaced_atomically(target) as tmp:
        with h5py.File(tmp, "w") as root:
            root.attrs.update({
                "format": FORMAT,
                "flowsim_version": flowsim.__version__,
                "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "sweep_source": sweep.source,
                "sweep_text": sweep.text,
                "scenario_text": sweep.scenario_text,
                "n_runs": len(sweep.runs),
                "parameters": json.dumps(sweep.parameters),
                "metrics": json.dumps(sweep.metrics),
            })
            group = root.create_group("runs")
            group.attrs["columns"] = json.dumps(list(columns))
            for name, values in columns.items():
                dtype = h5py.string_dtype("utf-8") if values.dtype == object else values.dtype
                group.create_dataset(name, data=values, dtype=dtype)
    return target


@dataclass(frozen=True)
class SweepTable:
    """A results file read back: ``columns`` maps each column name to its array (text as
    ``str`` objects), in the file's order; ``attrs`` holds the file attributes."""

    columns: dict[str, np.ndarray]
    attrs: dict[str, Any]

    def __len__(self) -> int:
        return len(self.columns["index"])

    def to_pandas(self):
        """The table as a :class:`pandas.DataFrame` (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.columns)


def read_results(path: str | os.PathLike) -> SweepTable:
    """Read a results file written by :func:`write_results`.

    Raises
    ------
    InputError
        When the file cannot be opened or is not a sweep results file.
    """
    path = Path(path)
    try:
        root = h5py.File(path, "r")
    except OSError as err:
        raise InputError(f"{path}: cannot open the results: {err}") from None
    with root:
        if root.attrs.get("format") != FORMAT:
            raise InputError(f"{path}: not a flowsim sweep results file (format {root.attrs.get('format')!r})")
        group = root["runs"]
        columns = {}
        for name in json.loads(group.attrs["columns"]):
            dataset = group[name]
            columns[name] = dataset.asstr()[()] if h5py.check_string_dtype(dataset.dtype) else dataset[()]
        attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in root.attrs.items()}
    return SweepTable(columns, attrs)


# --- execution ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepOutcome:
    """What :func:`run_sweep` did: ``n_runs`` in the spec (``n_unique`` distinct keys),
    ``n_skipped`` found in the journal, ``n_ran`` now; ``n_failed`` rows with status
    ``"error"`` in the results (old and new). With ``solve = "rates"``, ``backend`` is where
    the batches ran (``"cpu"`` or ``"cuda"``) and ``n_batches`` how many were solved now;
    with ``solve = "time"`` they are None and 0. ``n_retraced`` of the skipped runs ran again
    to write the trace asked for; ``untraced`` says, for each of those that failed, which run
    and why (its row keeps the journal's result)."""

    output: Path
    journal: Path
    n_runs: int
    n_unique: int
    n_skipped: int
    n_ran: int
    n_failed: int
    backend: str | None = None
    n_batches: int = 0
    n_retraced: int = 0
    untraced: tuple[str, ...] = ()


def _execute_batch(runner: Runner, tasks: Sequence[RunTask]) -> list[RunRecord]:
    """:func:`execute` each task in turn: one pool or Dask task for several short runs."""
    return [execute(runner, task) for task in tasks]


def _batches(tasks: Iterator[RunTask], n_tasks: int, parallelism: int) -> Iterator[list[RunTask]]:
    """Tasks in lists of about ``n_tasks / (16 parallelism)``, from 1 to 32: enough runs to
    amortise the per-task cost of a pool or Dask, few enough to balance the tail."""
    size = max(1, min(32, n_tasks // (16 * parallelism)))
    return iter(lambda: list(itertools.islice(tasks, size)), [])


def _windowed(submit: Callable[[list[RunTask]], Any], wait_first: Callable[[set], set],
              batches: Iterator[list[RunTask]], window: int,
              collect: Callable[[Any, list[RunTask]], list[RunRecord]] = lambda future, batch: future.result(),
              ) -> Iterator[list[RunRecord]]:
    """Keep at most ``window`` batches in flight; yield their records (``collect``) as they
    finish."""
    pending: dict = {}
    for batch in itertools.chain(batches, [None]):
        if batch is not None:
            pending[submit(batch)] = batch
            if len(pending) < window:
                continue
        while pending and (batch is None or len(pending) >= window):
            for future in wait_first(set(pending)):
                yield collect(future, pending.pop(future))


#: An engine runs tasks (``n_tasks`` of them) on ``workers`` and yields records as they finish.
_Engine = Callable[[Runner, Iterator[RunTask], int, int], Iterator[list[RunRecord]]]


def _serial(runner: Runner, tasks: Iterator[RunTask], n_tasks: int, workers: int) -> Iterator[list[RunRecord]]:
    for task in tasks:
        yield [execute(runner, task)]


def _process_pool(runner: Runner, tasks: Iterator[RunTask], n_tasks: int, workers: int) -> Iterator[list[RunRecord]]:
    """Run batches on a pool of ``workers`` processes.

    A worker that dies (killed, or out of memory) breaks the pool and every batch in flight
    with it. The pool is then replaced: the runs that were in flight run again one at a
    time, so that a run that kills its worker again is known and recorded as failed, and
    the batches not yet started follow on the new pool.
    """
    batches: Iterator[list[RunTask]] = _batches(tasks, n_tasks, workers)
    while True:
        lost: list[RunTask] = []  # in flight when the pool broke
        later: list[list[RunTask]] = []  # taken from ``batches`` after it broke
        with _pool(workers) as pool:

            def submit(batch: list[RunTask]) -> concurrent.futures.Future:
                if not lost:
                    try:
                        return pool.submit(_execute_batch, runner, batch)
                    except BrokenProcessPool:
                        pass
                later.append(batch)
                return _done([])

            def collect(future: concurrent.futures.Future, batch: list[RunTask]) -> list[RunRecord]:
                try:
                    return future.result()
                except BrokenProcessPool:
                    lost.extend(batch)
                    return []

            yield from _windowed(submit, _first_done, batches, 4 * workers, collect)
        if not lost:
            return
        yield from _one_at_a_time(runner, lost)
        batches = iter(later)


def _one_at_a_time(runner: Runner, tasks: list[RunTask]) -> Iterator[list[RunRecord]]:
    """Run ``tasks`` one after the other in a worker process, replaced when one dies; the
    run it was running is then recorded as failed."""
    remaining = iter(tasks)
    for first in remaining:
        with _pool(1) as pool:
            for task in itertools.chain([first], remaining):
                try:
                    yield pool.submit(_execute_batch, runner, [task]).result()
                except BrokenProcessPool:
                    yield [_died(task)]
                    break


def _died(task: RunTask) -> RunRecord:
    """The failed record of a run whose worker process died running it."""
    died = RuntimeError("the worker process running it died (killed, or out of memory?)")
    return _failed(task.key, task.params, task.metrics, died, math.nan)


def _first_done(futures: set) -> set:
    return concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED).done


@contextlib.contextmanager
def _pool(workers: int) -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_interrupts
    )
    try:
        yield pool
    except BaseException:
        # Interrupted, or the caller stopped reading: the batches in flight would be lost
        # anyway, so their workers are stopped rather than waited for. (Python 3.14 names
        # this ProcessPoolExecutor.terminate_workers; before, the processes are only in
        # ``_processes``.)
        for process in list(pool._processes.values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _done(result: object) -> concurrent.futures.Future:
    """A future that has finished with ``result``."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(result)
    return future


def _ignore_interrupts() -> None:
    """Pool workers leave Ctrl-C to the sweep, which stops them (see :func:`_process_pool`).

    Ctrl-C in a terminal interrupts every process of its group. A worker interrupted while
    sending a result can die holding the result queue's lock, and the other workers, and the
    pool's shutdown with them, then wait for it forever.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _dask(address: str, workers: int) -> Iterator[_Engine]:
    """An engine running batches on a Dask cluster: a LocalCluster of ``workers`` processes
    started here (``"local"``), or the scheduler at ``address``. Connects on entry, so that
    an unreachable scheduler fails before the sweep writes anything; lets go on exit."""
    try:
        import distributed
    except ImportError:
        raise InputError("--dask needs the 'distributed' package: pip install 'flowsim[dask]'") from None
    with contextlib.ExitStack() as resources:
        cluster = None
        if address == "local":
            # Any free port for the HTTP server the scheduler always starts: 8787 may be taken.
            cluster = resources.enter_context(distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            ))
        try:
            client = resources.enter_context(distributed.Client(cluster if cluster is not None else address))
        except (OSError, TimeoutError, ValueError) as err:
            raise InputError(f"cannot reach the Dask scheduler at {address!r}: {err}") from None

        def engine(runner: Runner, tasks: Iterator[RunTask], n_tasks: int, workers: int) -> Iterator[list[RunRecord]]:
            threads = max(1, sum(client.nthreads().values()))
            lost: list[RunTask] = []

            def collect(future, batch: list[RunTask]) -> list[RunRecord]:
                # Dask retries a task whose worker died on other workers, then gives up.
                try:
                    return future.result()
                except distributed.KilledWorker:
                    lost.extend(batch)
                    return []

            def submit(batch: list[RunTask]):
                return client.submit(_execute_batch, runner, batch, pure=False)

            def first_done(futures: set) -> set:
                return distributed.wait(futures, return_when="FIRST_COMPLETED").done

            yield from _windowed(submit, first_done, _batches(tasks, n_tasks, threads), 4 * threads, collect)

            def collect_alone(future, batch: list[RunTask]) -> list[RunRecord]:
                try:
                    return future.result()
                except distributed.KilledWorker:
                    return [_died(batch[0])]

            # The runs of the batches given up on, one at a time: a task queued on a worker
            # that dies is given up on too, so only a run in flight alone that kills its
            # worker is known to be the one, and recorded as failed.
            yield from _windowed(submit, first_done, ([task] for task in lost), 1, collect_alone)

        yield engine


class _ProgressBar:
    """``done/total``, a bar, rate and ETA on a stream; redrawn in place on a terminal,
    otherwise a line every few seconds."""

    def __init__(self, stream: TextIO | None, total: int, done: int) -> None:
        self.stream, self.total, self.done = stream, total, done
        self.start_done, self.failed = done, 0
        self.start = self.last = time.monotonic()
        self.tty = stream is not None and stream.isatty()
        self.draw(final=False)

    def update(self, records: Sequence[RunRecord]) -> None:
        self.done += len(records)
        self.failed += sum(record.status != "ok" for record in records)
        now = time.monotonic()
        if self.tty or now - self.last >= 5.0 or self.done == self.total:
            self.last = now
            self.draw(final=False)

    def draw(self, final: bool) -> None:
        if self.stream is None:
            return
        elapsed = time.monotonic() - self.start
        ran = self.done - self.start_done
        rate = ran / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.nan
        filled = 24 * self.done // max(self.total, 1)
        line = (f"sweep {self.done}/{self.total} [{'#' * filled}{'.' * (24 - filled)}] {rate:.2f} runs/s "
                f"ETA {'--' if math.isnan(eta) else datetime.timedelta(seconds=round(eta))}"
                + (f", {self.failed} failed" if self.failed else ""))
        end = "\n" if final or not self.tty else ""
        print(("\r" if self.tty else "") + line, end=end, file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            self.draw(final=True)


def run_sweep(
    sweep: Sweep,
    output: str | os.PathLike,
    *,
    workers: int | None = None,
    dask: str | None = None,
    traces: str | os.PathLike | None = None,
    runner: Runner = simulate_run,
    progress: TextIO | None = None,
    backend: str | None = None,
) -> SweepOutcome:
    """Run every run of ``sweep`` not yet in the journal and write the results table.

    Parameters
    ----------
    sweep : Sweep
    output : str or path-like
        The HDF5 results file; the journal is ``<output>.journal`` (:func:`journal_path`).
    workers : int, optional
        Local worker processes (default: :func:`os.cpu_count`); 1 runs serially in this
        process. With ``dask="local"``, the LocalCluster's worker count. Time mode only, as
        are ``dask``, ``traces`` and ``runner``.
    dask : str, optional
        ``"local"`` to start a :class:`distributed.LocalCluster` (processes, one thread
        each), or a scheduler address (``"tcp://host:8786"``) to use an existing cluster.
    traces : str or path-like, optional
        A directory to write each run's full trace to (``<key>.h5``); created if its parent
        exists. A run found in the journal whose trace is not there runs again to write it
        (its row stays the journal's); a failed run has no trace.
    runner : callable
        ``runner(task) -> {metric: value}`` for one :class:`RunTask`; must pickle (a
        module-level function) for a pool or Dask. Default :func:`simulate_run`.
    progress : text stream, optional
        Where to draw the progress bar (``sys.stderr``); None draws nothing.
    backend : {"cpu", "cuda", "auto"}, optional
        Rates mode only: where the batches are solved (default ``"cpu"``, every core);
        ``"auto"`` is ``"cuda"`` where it can run. Time mode simulates on CPU workers and
        takes none.

    Returns
    -------
    SweepOutcome

    Raises
    ------
    InputError
        Before any run, when ``output`` or its journal cannot be written or would replace an
        input file (:func:`flowsim.errors.output_file`), ``traces`` is not a directory and
        cannot be made one, ``workers`` is not positive, or an argument does not apply to the
        sweep's ``solve`` mode.
    BackendUnavailable
        ``backend="cuda"`` without numba-cuda installed or without a GPU.
    KeyboardInterrupt
        Passed on after the results table has been written from the journal.

    Notes
    -----
    Runs with equal keys (equal parameters) run once and share their row values. Results
    arrive in any order; the table is ordered by run index, so it does not depend on the
    worker count (except ``wall_s``). With ``solve = "rates"`` the runs are built and solved
    in this process (see the module docstring); ``wall_s`` then holds a share of each batch's
    solve time.
    """
    inputs = (sweep.source, sweep.scenario_path, *sweep.files)
    output = output_file(output, "the results table", inputs=inputs)
    journal = output_file(journal_path(output), "the sweep journal", inputs=inputs)
    if sweep.solve == "rates":
        time_only = (("workers", workers), ("dask", dask), ("traces", traces))
        given = [name for name, value in time_only if value is not None]
        if runner is not simulate_run:
            given.append("runner")
        if given:
            raise InputError(
                f"{sweep.source}: {', '.join(given)}: for sweeps with solve = 'time' only; with solve = 'rates' "
                f"the runs are built in this process and each batch is solved on the backend"
            )
        solver: _RatesSolver | None = _RatesSolver(sweep, resolve_backend("cpu" if backend is None else backend))
    else:
        solver = None
        if backend is not None:
            raise InputError(
                f"{sweep.source}: a backend applies to sweeps with solve = 'rates'; this sweep simulates "
                f"over time (solve = 'time') on CPU workers (workers, dask)"
            )
        if workers is None:
            workers = os.cpu_count() or 1
        workers = whole_number("workers", workers)
    trace_dir = None if traces is None else _trace_directory(traces, output, journal)
    records = read_journal(journal)
    first: dict[str, RunSpec] = {}
    for run in sweep.runs:
        first.setdefault(run.key, run)
    unique = list(first.values())
    # A journalled run lacking a metric this spec asks for (an earlier spec's) runs again.
    todo = [run for run in unique if run.key not in records or not set(sweep.metrics) <= set(records[run.key].metrics)]
    retrace: list[RunSpec] = []
    if trace_dir is not None:
        # A journalled run keeps its row, but a trace asked for now is written by running it
        # again; a failed run has no trace to write.
        pending = {run.key for run in todo}
        retrace = [run for run in unique if run.key not in pending and records[run.key].status == "ok"
                   and not _trace_path(trace_dir, run.key).exists()]
    retracing = {run.key for run in retrace}
    untraced: list[str] = []
    with contextlib.ExitStack() as resources:
        results: Iterator[list[RunRecord]]
        if solver is not None:
            results = solver.records(todo)
        else:
            engine: _Engine
            work = todo + retrace
            if dask is not None:
                engine = resources.enter_context(_dask(dask, workers))
            else:
                engine = _serial if workers == 1 or len(work) <= 1 else _process_pool
                workers = min(workers, len(work))
            results = engine(runner, (sweep.task(run, trace_dir) for run in work), len(work), workers)
        if trace_dir is not None:
            trace_dir.mkdir(exist_ok=True)
        bar = _ProgressBar(progress, len(unique), len(unique) - len(todo) - len(retrace))
        writer = _Journal(journal)
        try:
            for finished in results:
                ran = [record for record in finished if record.key not in retracing]
                untraced += [f"run {first[record.key].index} ({record.key}): {record.error}"
                             for record in finished if record.key in retracing and record.status != "ok"]
                writer.append(ran)
                records.update((record.key, record) for record in ran)
                bar.update(finished)
        finally:
            writer.close()
            bar.close()
            # The journal is the record of what finished: an interrupt can land between a
            # batch reaching it and reaching ``records``.
            records = read_journal(journal)
            write_results(output, sweep, records)
    n_failed = sum(records[run.key].status != "ok" for run in sweep.runs)
    return SweepOutcome(output, journal, len(sweep.runs), len(unique), len(unique) - len(todo), len(todo), n_failed,
                        None if solver is None else solver.backend, 0 if solver is None else solver.n_batches,
                        len(retrace), tuple(untraced))


def _trace_directory(traces: str | os.PathLike, output: Path, journal: Path) -> Path:
    """``traces`` as a directory the runs can write their traces into (made by the caller if
    missing); an :class:`InputError` naming it otherwise, before any run starts."""
    directory = Path(traces)
    if os.path.lexists(directory) and not directory.is_dir():
        raise InputError(f"{directory}: the traces must go to a directory, and this is a file")
    existing = directory if directory.is_dir() else directory.parent
    if not existing.is_dir():
        raise InputError(f"{directory}: cannot create the traces directory: {str(existing)!r} does not exist")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{directory}: the directory {str(existing)!r} is not writable")
    for path, what in ((output, "the results table"), (journal, "the sweep journal")):
        if directory.resolve() == path.resolve():
            raise InputError(f"{directory}: the traces directory is also {what}")
    return directory
