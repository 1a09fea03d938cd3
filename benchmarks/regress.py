"""Save the benchmark suites' timings as a baseline, and compare later runs against it.

Run from the repository root::

    python benchmarks/regress.py save NAME [--scale 0.05] [-k EXPR] [--note TEXT]
    python benchmarks/regress.py compare NAME [--floor 0.15] [--iqr-factor 3]

``save`` runs the suites (``benchmarks/bench_*.py``, or the files given with ``--suite``)
under pytest-benchmark with ``--benchmark-json``, in one pytest session with the
calibration workload of ``benchmarks/calibration.py``, which runs once before the suites
and once after. Each benchmark's minimum time divided by the calibration's smallest minimum
time is its *normalised* figure. These figures, the raw statistics, the pytest options used
and pytest-benchmark's machine description are written to ``benchmarks/baselines/NAME.json``.

``compare`` runs the same selection again (the baseline's ``--scale``, ``-k`` and suites,
unless given) and compares normalised figures. A benchmark has regressed when its figure
exceeds the baseline's by more than its threshold, ``max(floor, iqr_factor x relative
IQR)``, where the relative IQR (IQR over median of its rounds) is the larger of the
baseline's and this run's: a noisy benchmark, or a noisy run, gets a wider band, a steady
one the floor. When the two calibration runs of either session differ by more than the
floor, the machine's load changed during that session, and a warning says the verdicts
are unreliable; another warning names both CPUs when the baseline's (model name, vendor,
family and model) is not this run's, since the normalised figures hold only on one kind.
A table of the benchmarks the run selected is printed: a baseline benchmark that ``-k`` or
``--suite`` left out is not listed, one that was selected but did not run, or that is no
longer collected from its file, is ``MISSING`` (see :func:`expected_benchmarks`). The exit
status is 1 when any benchmark regressed or is missing (its code would otherwise go
untimed unnoticed), 0 otherwise, and 2 when the run or a file is unusable.

``--from-json RUN.json`` (both commands) uses a pytest-benchmark JSON file already written,
instead of running the suites; it must contain the calibration benchmark. ``benchmarks/conftest.py``
records in it the run's ``--flows-scale``, ``-k`` and files (``flowsim_run``), which ``save``
stores; for a file without that record, ``save`` needs ``--scale``, ``-k`` (``-k ''`` for none)
and ``--suite`` as the run had them, and refuses rather than guess.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from flowsim.errors import InputError, read_text_file
from flowsim.files import replaced_atomically

__all__ = [
    "BASELINE_FORMAT",
    "CALIBRATION_NAME",
    "Comparison",
    "compare",
    "expected_benchmarks",
    "format_table",
    "main",
    "make_baseline",
    "normalise",
    "threshold",
]

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
BASELINE_DIR = BENCH_DIR / "baselines"

#: ``format`` key of a baseline file; ``version`` is :data:`BASELINE_VERSION`.
BASELINE_FORMAT = "flowsim-benchmark-baseline"
BASELINE_VERSION = 1

#: Name of the calibration benchmark (``benchmarks/calibration.py``).
CALIBRATION_NAME = "test_calibration"

DEFAULT_FLOOR = 0.15
DEFAULT_IQR_FACTOR = 3.0


def _stats(entry: Mapping, source: str) -> dict:
    """min, median, IQR (s) and rounds of one pytest-benchmark entry."""
    name = entry.get("fullname", entry.get("name", "?"))
    try:
        stats = entry["stats"]
        values = {key: float(stats[key]) for key in ("min", "median", "iqr")}
        rounds = int(stats["rounds"])
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"{source}: benchmark {name!r} lacks a usable 'stats' entry ({err})") from None
    if not values["min"] > 0:
        raise InputError(f"{source}: benchmark {name!r} has a non-positive minimum time {values['min']!r}")
    return {"min_s": values["min"], "median_s": values["median"], "iqr_s": values["iqr"], "rounds": rounds}


def normalise(run: Mapping, source: str = "<run>") -> tuple[dict, dict]:
    """Calibration statistics and every other benchmark's figures from a pytest-benchmark run.

    Parameters
    ----------
    run : mapping
        pytest-benchmark's ``--benchmark-json`` document (``benchmarks`` list with ``name``,
        ``fullname`` and ``stats``).
    source : str
        Where ``run`` came from, for error messages.

    Returns
    -------
    calibration : dict
        ``min_s``, ``median_s``, ``iqr_s``, ``rounds`` of the calibration benchmark (of the
        run with the smallest minimum when it ran more than once), and ``drift``: the
        largest calibration minimum over the smallest, minus 1 (0 for one run), a measure
        of how much the machine's speed changed during the session.
    benchmarks : dict
        Per benchmark ``fullname``: the same statistics plus ``normalised`` (its minimum over
        the calibration's minimum) and ``rel_iqr`` (IQR over median, 0 for one round).

    Raises
    ------
    InputError
        When the calibration benchmark is missing or a benchmark has no usable statistics.
    """
    entries = run.get("benchmarks") if isinstance(run, Mapping) else None
    if not isinstance(entries, list):
        raise InputError(f"{source}: not a pytest-benchmark JSON document (no 'benchmarks' list)")
    calibrations = []
    benchmarks = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InputError(f"{source}: benchmarks[{i}] is {entry!r}, not a pytest-benchmark entry")
        if entry.get("name") == CALIBRATION_NAME:
            calibrations.append(_stats(entry, source))
        else:
            benchmarks[entry.get("fullname", entry.get("name"))] = _stats(entry, source)
    if not calibrations:
        raise InputError(
            f"{source}: no {CALIBRATION_NAME!r} benchmark; run benchmarks/calibration.py in the same session"
        )
    calibration = min(calibrations, key=lambda c: c["min_s"])
    mins = [c["min_s"] for c in calibrations]
    calibration["drift"] = max(mins) / min(mins) - 1.0
    for stats in benchmarks.values():
        stats["normalised"] = stats["min_s"] / calibration["min_s"]
        stats["rel_iqr"] = stats["iqr_s"] / stats["median_s"] if stats["median_s"] > 0 else 0.0
    return calibration, benchmarks


def threshold(rel_iqr: float, floor: float = DEFAULT_FLOOR, iqr_factor: float = DEFAULT_IQR_FACTOR) -> float:
    """Allowed relative slow-down: ``max(floor, iqr_factor x rel_iqr)``.

    >>> threshold(0.01), threshold(0.1)
    (0.15, 0.30000000000000004)
    """
    if not (floor >= 0 and iqr_factor >= 0):
        raise InputError(f"floor and iqr_factor must be >= 0, got {floor!r} and {iqr_factor!r}")
    return max(floor, iqr_factor * rel_iqr)


def make_baseline(run: Mapping, name: str, *, pytest_options: Mapping, note: str = "", source: str = "<run>") -> dict:
    """The baseline document of one pytest-benchmark run (see the module docstring).

    Parameters
    ----------
    run : mapping
        pytest-benchmark JSON document.
    name : str
        Baseline name (the file stem under ``benchmarks/baselines``).
    pytest_options : mapping
        ``scale``, ``keyword`` and ``suites`` the run used; ``compare`` reuses them.
    note : str
        Free text kept with the baseline (e.g. "other processes were running").
    source : str
        Where ``run`` came from, for error messages.

    Returns
    -------
    dict
        JSON-serialisable.
    """
    calibration, benchmarks = normalise(run, source)
    return {
        "format": BASELINE_FORMAT,
        "version": BASELINE_VERSION,
        "name": name,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "note": note,
        "pytest_options": dict(pytest_options),
        "machine": run.get("machine_info", {}),
        "commit": run.get("commit_info", {}),
        "calibration": calibration,
        "benchmarks": benchmarks,
    }


@dataclass(frozen=True)
class Comparison:
    """One benchmark's verdict.

    Attributes
    ----------
    name : str
        pytest-benchmark ``fullname``.
    baseline, current : float or None
        Normalised figures (benchmark minimum over calibration minimum); None where absent.
    threshold : float or None
        Allowed relative slow-down (from the baseline's and the run's noise).
    verdict : {"ok", "slower", "faster", "new", "missing"}
        ``slower`` (a regression) when ``current > baseline x (1 + threshold)``, ``faster``
        when ``current < baseline / (1 + threshold)``; ``missing`` for a baseline benchmark
        the run should have timed and did not.
    """

    name: str
    baseline: float | None
    current: float | None
    threshold: float | None
    verdict: str

    @property
    def change(self) -> float | None:
        """``current / baseline - 1``, or None."""
        if self.baseline is None or self.current is None:
            return None
        return self.current / self.baseline - 1.0


def compare(
    baseline: Mapping,
    current: Mapping,
    *,
    floor: float = DEFAULT_FLOOR,
    iqr_factor: float = DEFAULT_IQR_FACTOR,
    expected: Collection[str] | None = None,
) -> list[Comparison]:
    """Compare a run's normalised figures with a baseline's.

    Parameters
    ----------
    baseline : mapping
        ``benchmarks`` of a baseline document (name -> ``normalised``, ``rel_iqr``, ...).
    current : mapping
        Second return value of :func:`normalise` for the new run.
    floor, iqr_factor : float
        See :func:`threshold`; it is applied to the larger of the two relative IQRs.
    expected : collection of str, optional
        Baseline benchmarks the run should have timed (see :func:`expected_benchmarks`); one
        absent from ``current`` is ``missing`` if among them and left out otherwise. Default:
        every baseline benchmark.

    Returns
    -------
    list of Comparison
        Baseline benchmarks in name order, then benchmarks new in ``current``.
    """
    out = []
    for name in sorted(baseline):
        base = baseline[name]
        if name not in current and expected is not None and name not in expected:
            continue
        if name not in current:
            allowed = threshold(float(base.get("rel_iqr", 0.0)), floor, iqr_factor)
            out.append(Comparison(name, base["normalised"], None, allowed, "missing"))
            continue
        noise = max(float(base.get("rel_iqr", 0.0)), float(current[name].get("rel_iqr", 0.0)))
        allowed = threshold(noise, floor, iqr_factor)
        now = current[name]["normalised"]
        if now > base["normalised"] * (1.0 + allowed):
            verdict = "slower"
        elif now < base["normalised"] / (1.0 + allowed):
            verdict = "faster"
        else:
            verdict = "ok"
        out.append(Comparison(name, base["normalised"], now, allowed, verdict))
    for name in sorted(set(current) - set(baseline)):
        out.append(Comparison(name, None, current[name]["normalised"], None, "new"))
    return out


def expected_benchmarks(baseline: Collection[str], run: Mapping) -> set[str] | None:
    """The baseline benchmarks a run should have timed, from the selection it records.

    ``benchmarks/conftest.py`` records the node ids the run collected and those it selected
    (``flowsim_run``). A benchmark is expected when the run selected it, or when it was not
    collected though its file was (renamed or removed since the baseline); one that ``-k``
    deselected, whose file the run did not take, or that skipped on this machine (the Dask
    benchmarks without ``distributed``), is not.

    Parameters
    ----------
    baseline : collection of str
        The baseline's benchmark names (pytest node ids).
    run : mapping
        pytest-benchmark JSON document.

    Returns
    -------
    set of str or None
        None when the run does not record its selection.
    """
    record = run.get("flowsim_run")
    if not isinstance(record, Mapping):
        return None
    collected, selected = record.get("collected"), record.get("selected")
    if not (isinstance(collected, list) and isinstance(selected, list)):
        return None
    files = {str(node).partition("::")[0] for node in collected}
    skipped = set(record.get("skipped") or ())
    return {
        name
        for name in baseline
        if name not in skipped and (name in selected or (name not in collected and name.partition("::")[0] in files))
    }


def format_table(comparisons: Sequence[Comparison]) -> str:
    """Aligned text table: benchmark, baseline, current, change, threshold, verdict."""

    def number(value: float | None, pattern: str) -> str:
        return "-" if value is None else format(value, pattern)

    rows = [("benchmark", "baseline", "current", "change", "threshold", "verdict")]
    for c in comparisons:
        rows.append(
            (
                c.name,
                number(c.baseline, ".4g"),
                number(c.current, ".4g"),
                number(c.change, "+.1%"),
                number(c.threshold, ".0%"),
                c.verdict.upper() if c.verdict in ("slower", "missing") else c.verdict,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _load_json(path: Path, what: str) -> dict:
    # read_text_file refuses bytes that are not UTF-8 (an .h5 given for the JSON) in one line.
    text = read_text_file(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}, line {err.lineno}: {what} is not valid JSON: {err.msg}") from None


def _check_baseline(path: Path, baseline: object) -> None:
    """An :class:`InputError` naming ``path`` unless it holds what :func:`make_baseline`
    writes, so that a damaged file is reported as unusable (status 2), not as a crash."""
    if not isinstance(baseline, dict) or baseline.get("format") != BASELINE_FORMAT:
        found = baseline.get("format") if isinstance(baseline, dict) else type(baseline).__name__
        raise InputError(f"{path}: not a flowsim benchmark baseline (format {found!r})")
    expected = {"created": str, "machine": dict, "calibration": dict, "pytest_options": dict, "benchmarks": dict}
    for key, kind in expected.items():
        if not isinstance(baseline.get(key), kind):
            raise InputError(f"{path}: damaged baseline: {key!r} should be a {kind.__name__}")
    options = baseline["pytest_options"]
    if not isinstance(options.get("scale"), (int, float)) or not isinstance(options.get("keyword"), str) or not (
        isinstance(options.get("suites"), list) and all(isinstance(x, str) for x in options["suites"])
    ):
        raise InputError(f"{path}: damaged baseline: 'pytest_options' needs scale, keyword and suites")
    if not isinstance(baseline["calibration"].get("min_s"), (int, float)):
        raise InputError(f"{path}: damaged baseline: the calibration has no 'min_s'")
    for name, entry in baseline["benchmarks"].items():
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key, 0.0), (int, float)) for key in ("normalised", "rel_iqr")
        ) or "normalised" not in entry:
            raise InputError(f"{path}: damaged baseline: benchmark {name!r} needs numbers 'normalised' and 'rel_iqr'")


def _baseline_path(name: str) -> Path:
    if not name or os.sep in name or name.startswith("."):
        raise InputError(f"baseline name {name!r} must be a plain file stem such as 'ci-2cpu'")
    return BASELINE_DIR / f"{name}.json"


def _run_suites(options: Mapping) -> tuple[dict, str]:
    """Run calibration and suites in one pytest session; returns (JSON document, its name)."""
    suites = [str(REPO_ROOT / s) for s in options["suites"]]
    # Without an expression every benchmark runs; with one, the calibration runs as well.
    keyword = ["-k", f"{CALIBRATION_NAME} or ({options['keyword']})"] if options["keyword"] else []
    handle, json_path = tempfile.mkstemp(prefix="flowsim-bench-", suffix=".json")
    os.close(handle)
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(BENCH_DIR / "calibration.py"),
        *suites,
        str(BENCH_DIR / "calibration.py"),
        "--keep-duplicates",
        "-p",
        "no:cacheprovider",
        "-q",
        *keyword,
        f"--flows-scale={options['scale']}",
        f"--benchmark-json={json_path}",
    ]
    print("running: " + " ".join(command), file=sys.stderr, flush=True)
    try:
        status = subprocess.run(command, cwd=REPO_ROOT).returncode
        if status != 0:
            raise InputError(f"pytest exited with status {status}; no baseline or comparison made")
        return _load_json(Path(json_path), "pytest-benchmark output"), "pytest-benchmark output"
    finally:
        os.unlink(json_path)


def _default_suites() -> list[str]:
    return sorted(f"{BENCH_DIR.name}/{p.name}" for p in BENCH_DIR.glob("bench_*.py"))


def _suites_of(pytest_args: Sequence[str]) -> list[str]:
    """The files, folders or node ids a run gave pytest, less the calibration that
    :func:`_run_suites` adds around them."""
    calibration = BENCH_DIR / "calibration.py"
    suites = []
    for arg in pytest_args:
        if (REPO_ROOT / arg.partition("::")[0]).resolve() != calibration and arg not in suites:
            suites.append(arg)
    return suites


def _options_of_run(run: object, args: argparse.Namespace, source: str) -> dict:
    """``scale``, ``keyword`` and ``suites`` a pytest-benchmark run was made with.

    ``benchmarks/conftest.py`` records them in the run's JSON (``flowsim_run``); options on
    the command line must agree with the record. A JSON without it (written before the
    record, or by other suites) must be told all three: a guess would be stored, and
    ``compare`` would rerun at another size or other benchmarks than the run timed.
    """
    given = {"scale": args.scale, "keyword": args.keyword, "suites": args.suite}
    flags = {"scale": "--scale", "keyword": "-k", "suites": "--suite"}
    record = run.get("flowsim_run") if isinstance(run, dict) else None
    if record is None:
        unknown = [flags[key] for key, value in given.items() if value is None]
        if unknown:
            raise InputError(
                f"{source} does not record the --flows-scale, -k and files its run used; "
                f"give {', '.join(unknown)} as the run had them (-k '' for none)"
            )
        return given
    if not (
        isinstance(record, dict)
        and isinstance(record.get("flows_scale"), (int, float))
        and isinstance(record.get("keyword"), str)
        and isinstance(record.get("args"), list)
        and all(isinstance(arg, str) for arg in record["args"])
    ):
        raise InputError(f"{source}: damaged 'flowsim_run' record: it needs flows_scale, keyword and args")
    recorded = {"scale": record["flows_scale"], "keyword": record["keyword"], "suites": _suites_of(record["args"])}
    for key, value in given.items():
        if value is None:
            continue
        if (sorted(value) != sorted(recorded[key])) if key == "suites" else (value != recorded[key]):
            raise InputError(f"{source}: the run used {flags[key]} {recorded[key]!r}, not {value!r}")
    return recorded


def _save(args: argparse.Namespace) -> int:
    path = _baseline_path(args.name)
    if args.from_json is not None:
        run, source = _load_json(args.from_json, "pytest-benchmark output"), str(args.from_json)
        normalise(run, source)  # a file that is no benchmark run is told so, not asked for options
        options = _options_of_run(run, args, source)
    else:
        options = {
            "scale": args.scale if args.scale is not None else 1.0,
            "keyword": args.keyword or "",
            "suites": args.suite or _default_suites(),
        }
        run, source = _run_suites(options)
    baseline = make_baseline(run, args.name, pytest_options=options, note=args.note, source=source)
    if not baseline["benchmarks"]:
        raise InputError(f"{source}: no benchmark besides the calibration ran; check -k and --suite")
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(path) as tmp:
        Path(tmp).write_text(json.dumps(baseline, indent=2, sort_keys=True) + "\n")
    cal = baseline["calibration"]
    print(f"calibration: min {cal['min_s'] * 1e3:.2f} ms over {cal['rounds']} rounds")
    print(f"saved {len(baseline['benchmarks'])} benchmarks -> {path}")
    return 0


def _cpu_kind(machine: object) -> str:
    """Model name, vendor, family and model of the CPU in pytest-benchmark's ``machine_info``."""
    cpu = machine.get("cpu") if isinstance(machine, dict) else None
    cpu = cpu if isinstance(cpu, dict) else {}
    brand, vendor, family, model = (cpu.get(key, "?") for key in ("brand_raw", "vendor_id_raw", "family", "model"))
    return f"{brand} ({vendor}, family {family} model {model})"


def _compare(args: argparse.Namespace) -> int:
    path = _baseline_path(args.name)
    baseline = _load_json(path, "baseline")
    _check_baseline(path, baseline)
    options = dict(baseline["pytest_options"])
    if args.scale is not None:
        options["scale"] = args.scale
    if args.keyword is not None:
        options["keyword"] = args.keyword
    if args.suite:
        options["suites"] = args.suite
    if args.from_json is not None:
        run, source = _load_json(args.from_json, "pytest-benchmark output"), str(args.from_json)
        record = run.get("flowsim_run") if isinstance(run, dict) else None
        # The size the run was made at, where it says, not the one this command assumes.
        if isinstance(record, dict) and isinstance(record.get("flows_scale"), (int, float)):
            options["scale"] = record["flows_scale"]
    else:
        run, source = _run_suites(options)
    calibration, current = normalise(run, source)
    if options["scale"] != baseline["pytest_options"]["scale"]:
        print(f"warning: scale {options['scale']} differs from the baseline's", file=sys.stderr)
    expected = expected_benchmarks(baseline["benchmarks"], run)
    if expected is None:
        # Without the record, a benchmark -k left out cannot be told from one that is gone.
        expected = set()
        absent = len(set(baseline["benchmarks"]) - set(current))
        if absent:
            print(
                f"warning: {source} does not record which benchmarks its run selected; "
                f"the {absent} benchmark(s) of the baseline absent from it are not compared",
                file=sys.stderr,
            )
    record = run.get("flowsim_run") if isinstance(run, dict) else None
    skipped = sorted(set(baseline["benchmarks"]) & set(record.get("skipped") or ())) if isinstance(record, dict) else []
    if skipped:
        print(f"note: {len(skipped)} benchmark(s) of the baseline skipped on this machine, not compared: "
              f"{', '.join(skipped)}", file=sys.stderr)
    comparisons = compare(
        baseline["benchmarks"], current, floor=args.floor, iqr_factor=args.iqr_factor, expected=expected
    )
    print(
        f"baseline {args.name} ({baseline['created']}, machine {baseline['machine'].get('node', '?')}); "
        f"calibration {baseline['calibration']['min_s'] * 1e3:.2f} ms then, {calibration['min_s'] * 1e3:.2f} ms now"
    )
    print("figures are benchmark minimum / calibration minimum")
    for when, cal in (("the baseline's", baseline["calibration"]), ("this run's", calibration)):
        if cal.get("drift", 0.0) > args.floor:
            print(
                f"warning: the calibration changed by {cal['drift']:.0%} during {when} session "
                "(the machine's load changed); verdicts are unreliable",
                file=sys.stderr,
            )
    then, now = _cpu_kind(baseline["machine"]), _cpu_kind(run.get("machine_info"))
    if then != now:
        # Normalising by the calibration does not carry figures across kinds of CPU (README).
        print(
            f"warning: the baseline ran on {then}, this run on {now}; figures move by -20% to +65% "
            "between kinds of CPU, so compare against a baseline taken on this kind",
            file=sys.stderr,
        )
    print(format_table(comparisons))
    slower = [c.name for c in comparisons if c.verdict == "slower"]
    if slower:
        print(f"{len(slower)} benchmark(s) slower than the baseline beyond their threshold")
    # A benchmark gone from the selection would leave its code untimed ever after, unnoticed.
    missing = [c.name for c in comparisons if c.verdict == "missing"]
    if missing:
        print(
            f"{len(missing)} benchmark(s) of the baseline selected but not run (failed, renamed or removed; "
            f"save the baseline again if so): {', '.join(missing)}"
        )
    return 1 if slower or missing else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/regress.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, handler, text in (
        ("save", _save, "run the suites and store benchmarks/baselines/NAME.json"),
        ("compare", _compare, "run the suites and compare with benchmarks/baselines/NAME.json"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("name", help="baseline name, e.g. the machine ('ci-2cpu')")
        p.add_argument("--scale", type=float, default=None, help="--flows-scale for the suites (save: default 1)")
        p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression selecting benchmarks")
        p.add_argument("--suite", action="append", help="benchmark file (repeatable; default benchmarks/bench_*.py)")
        p.add_argument("--from-json", type=Path, default=None, help="use this pytest-benchmark JSON, do not run")
        p.set_defaults(func=handler)
        if name == "save":
            p.add_argument("--note", default="", help="free text stored with the baseline")
        else:
            p.add_argument("--floor", type=float, default=DEFAULT_FLOOR, help="smallest threshold (default 0.15)")
            p.add_argument(
                "--iqr-factor",
                type=float,
                default=DEFAULT_IQR_FACTOR,
                help="threshold per unit of the relative IQR, the baseline's or this run's if larger (default 3)",
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry; returns the exit status (0 ok, 1 regression, 2 unusable input)."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as err:
        print(f"regress.py: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
