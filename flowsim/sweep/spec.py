"""A sweep spec: checked, its base scenario read, and expanded into keyed runs.

The format is described in :mod:`flowsim.sweep`. A run's key covers its parameters, the base
scenario and the content of every file it reads, so that it names the run whatever the
order, the worker count or the machine.
"""

from __future__ import annotations

import copy
import hashlib
import io
import itertools
import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flowsim.errors import InputError, open_regular, read_text_file, unstorable_text
from flowsim.jobresults import JOB_METRICS
from flowsim.scenario import check_outline, scenario_from_document
from flowsim.sweep.metrics import SOLVES, TRAINING_METRICS, job_metric, only_collective, only_training
from flowsim.systemfile import is_system_file
from flowsim.tomlcheck import Where

__all__ = ["DISTRIBUTIONS", "FILE_FIELDS", "MAX_RUNS", "RunSpec", "RunTask", "Sweep", "apply_params",
           "canonical_json", "load_sweep", "parse_sweep", "trace_file"]


#: Random-axis distributions a ``[sweep.random]`` field may use.
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform", "choice")

#: Most runs a sweep may have: every run is built (parameters and key, about 0.8 kB) before
#: the first one starts, which takes about 9 s for a million.
MAX_RUNS = 1_000_000

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
            trace_path=None if traces is None else str(trace_file(traces, run.key)),
        )


def trace_file(traces: str | os.PathLike, key: str) -> Path:
    """Where the trace of the run keyed ``key`` goes in the directory ``traces``."""
    return Path(traces) / f"{key}.h5"


def canonical_json(value: object) -> str:
    """``value`` as JSON with sorted keys and no spaces: the same text for equal values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _flatten(where: Where, table: Mapping, prefix: str, key: str, is_leaf: Callable[[object], bool],
             expected: str) -> dict:
    """Dotted path -> leaf value of a (possibly nested) axis table; a value that is neither a
    leaf nor a table is reported as not being ``expected``."""
    out: dict[str, object] = {}
    for name, value in table.items():
        path = f"{prefix}.{name}" if prefix else name
        _check_storable(where, f"{key}.{path}", name, "the name")
        if is_leaf(value):
            _check_storable(where, f"{key}.{path}", value, "the value")
            _check_new_path(where, key, path, out)
            out[path] = value
        elif isinstance(value, dict):
            for inner, leaf in _flatten(where, value, path, key, is_leaf, expected).items():
                _check_new_path(where, key, inner, out)
                out[inner] = leaf
        else:
            raise where.error(f"{key}.{path}", f"expected {expected}, got {value!r}")
    return out


def _path_parts(path: str) -> tuple[str, ...]:
    """A swept path's parts as the scenario reads them: an index as its number (``00`` is 0)."""
    return tuple(str(int(part)) if part.isascii() and part.isdigit() else part for part in path.split("."))


def _overlap(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name the same value, or one lies inside the other."""
    x, y = _path_parts(a), _path_parts(b)
    return x[: len(y)] == y or y[: len(x)] == x


def _check_new_path(where: Where, key: str, path: str, paths: Mapping[str, object]) -> None:
    """Raise an :class:`InputError` naming ``path`` if it names a value that a path already in
    ``paths`` (the same axis, ``key``) names, or holds, or lies in: TOML's quoted and dotted
    keys spell one path two ways, and one of the two would be dropped."""
    other = next((p for p in paths if _overlap(p, path)), None)
    if other == path:
        raise where.error(f"{key}.{path}", f"given twice in {key} (a quoted key and a dotted one spell the same "
                          "path); give it once")
    if other is not None:
        raise where.error(f"{key}.{path}", f"sweeps what {key}.{other} sweeps; give each value once")


def _check_storable(where: Where, key: str, value: object, what: str) -> None:
    """Raise an :class:`InputError` naming ``key`` if a string in ``value`` (or in its arrays
    and tables) cannot be stored in the results table, checked now rather than once every
    run has finished (a NUL, which HDF5 strings cannot hold, escapes as \\u0000 in TOML)."""
    if isinstance(value, str):
        why = unstorable_text(value)
        if why is not None:
            raise where.error(key, f"{what} {value!r} cannot be stored in the results table: {why}")
    elif isinstance(value, list):
        for item in value:
            _check_storable(where, key, item, what)
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_storable(where, key, name, what)
            _check_storable(where, key, item, what)


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
    # Where.integer's last argument is the least value allowed; the defaults are 1 and 0.
    samples = where.integer(table, "samples", "sweep.random", 1) if "samples" in table else 1
    if samples > MAX_RUNS:
        raise where.error("sweep.random.samples", f"{samples:,} samples; a sweep may have at most {MAX_RUNS:,} runs")
    seed = where.integer(table, "seed", "sweep.random", 0) if "seed" in table else 0
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
    return [int(part) if part.isascii() and part.isdigit() else part for part in path.split(".")]


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
                index = next((i for i, p in enumerate(parts) if i > len(walked) and isinstance(p, int)), None)
                if index is not None:
                    # Created, the missing field would be a table of "0", "1", ... keys.
                    raise where.error(key, f"the scenario has no {_scenario_key(parts[:index])} to index with "
                                           f"{parts[index]}; sweep {_scenario_key(parts[:index])} itself, or give it "
                                           "in the scenario")
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
        if solve == "time" and job_metric(name) is not None:
            continue
        if name not in valid:
            other = next((mode for mode, names in SOLVES.items() if name in names), None)
            what = f"{name!r} is a metric of solve = {other!r}" if other else f"unknown metric {name!r}"
            jobs = ", and job.NAME.FIGURE (FIGURE: " + ", ".join(JOB_METRICS) + ")" if solve == "time" else ""
            raise where.error(
                f"sweep.metrics[{i}]", f"{what}; valid ones with solve = {solve!r}: {', '.join(valid)}{jobs}"
            )
    if len(set(metrics)) != len(metrics):
        raise where.error("sweep.metrics", f"a metric is listed twice: {metrics!r}")
    return tuple(metrics)


#: Scenario fields that name a file a run reads, relative to the scenario file (see
#: :mod:`flowsim.scenario`): a run's key covers the content of each (``topology.cluster``
#: when it names a system file rather than a preset).
FILE_FIELDS = ("workload.flows", "topology.cluster")


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
            if isinstance(name, str) and (field != "topology.cluster" or is_system_file(name)):
                path = base_dir / name
                if path not in digests:
                    digests[path] = _digest(path)
                files[field] = digests[path]
        read = f"files={canonical_json(files)}\n" if files else ""
        key = hashlib.sha256(f"{salt}\n{mode}{read}{canonical_json(params)}".encode()).hexdigest()
        runs.append(RunSpec(index, key, params))
    return tuple(runs), tuple(path for path, digest in digests.items() if digest is not None)


def _digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes; None when it cannot be read or is not a regular file (the
    run then says why)."""
    try:
        with open_regular(path, "the file") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except (OSError, InputError):  # not a regular file: never waits on a FIFO
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
        with io.TextIOWrapper(open_regular(scenario_path, "the scenario"), encoding="utf-8") as file:
            scenario_text = file.read()
        document = tomllib.loads(scenario_text)
    except InputError as err:  # not a regular file (a FIFO would block the read), or unreadable
        raise where.error("sweep.scenario", str(err)) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise where.error("sweep.scenario", f"cannot read the scenario {str(scenario_path)!r}: {err}") from None
    # A misspelt section or option of the base scenario would fail every run alike.
    check_outline(document, source=str(scenario_path))

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
    axes = [(kind, list(paths)) for kind, paths in (("grid", grid), ("zip", zipped), ("random", random_paths))]
    for i, (kind, paths) in enumerate(axes):
        for other_kind, others in axes[i + 1:]:
            clash = next(((p, q) for p in paths for q in others if _overlap(p, q)), None)
            if clash is not None:
                raise where.error(f"sweep.{other_kind}.{clash[1]}",
                                  f"sweeps what sweep.{kind}.{clash[0]} sweeps (one lies in the other); give each "
                                  "value in one axis")
    if not keys:
        raise where.error("sweep", "expected at least one axis: [sweep.grid], [sweep.zip] or [sweep.random]")
    n_zip = len(next(iter(zipped.values()))) if zipped else 1
    n_runs = math.prod(len(values) for values in grid.values()) * n_zip * len(random_points)
    if n_runs > MAX_RUNS:
        factors = [*(f"{len(values):,} values of sweep.grid.{path}" for path, values in grid.items()),
                 *([f"{n_zip:,} of sweep.zip"] if zipped else []),
                 *([f"{len(random_points):,} samples"] if random_paths else [])]
        raise where.error("sweep", f"{n_runs:,} runs ({' x '.join(factors)}); a sweep may have at most {MAX_RUNS:,}: "
                                   "split it into several sweeps")
    new = {key: fields for path, key in keys.items() if (fields := _check_path(where, document, path, key))}
    grid_points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    zip_points = [dict(zip(zipped, values, strict=True)) for values in zip(*zipped.values(), strict=True)] or [{}]
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
    _check_job_metrics(where, metrics, sweep.task(runs[0]).document)
    if "busbw_Bps" in metrics:
        try:
            only_collective(sweep.task(runs[0]).document)
        except InputError as err:
            raise where.error(f"sweep.metrics[{metrics.index('busbw_Bps')}]", str(err)) from None
    for i, metric in enumerate(metrics):
        if metric in TRAINING_METRICS:
            try:
                only_training(sweep.task(runs[0]).document, metric)
            except InputError as err:
                raise where.error(f"sweep.metrics[{i}]", str(err)) from None
    return sweep


def _check_job_metrics(where: Where, metrics: tuple[str, ...], document: Mapping) -> None:
    """Job metrics name jobs of the first run's scenario (a sweep that varies the job mix
    finds a job missing from a later run in that run's error)."""
    jobs = document.get("job")
    names = [j.get("name") for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []
    for i, metric in enumerate(metrics):
        parsed = job_metric(metric)
        if parsed is not None and parsed[0] not in names:
            have = f"its jobs: {', '.join(map(str, names))}" if names else "it has no [[job]] tables"
            raise where.error(f"sweep.metrics[{i}]", f"no job named {parsed[0]!r} in the scenario; {have}")


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
