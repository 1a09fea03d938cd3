"""One run of a sweep: simulated and measured by a runner, timed, and recorded as ok or failed."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowsim.errors import InputError
from flowsim.jobresults import JobsReport, job_results
from flowsim.scenario import ScenarioRun, run_scenario, scenario_from_document
from flowsim.sweep.metrics import METRIC_FUNCTIONS, job_metric
from flowsim.sweep.spec import RunTask
from flowsim.trace import write_trace

__all__ = ["RunRecord", "Runner", "execute", "failed_record", "measure", "simulate_run"]


#: A runner: one :class:`RunTask` in, metric name -> value out (see :func:`simulate_run`).
Runner = Callable[["RunTask"], Mapping[str, float]]

@dataclass(frozen=True)
class RunRecord:
    """Outcome of one run: ``status`` is ``"ok"`` or ``"error"`` (with ``error`` its text;
    metrics are then NaN); ``wall_s`` is the seconds the run took in its worker (with
    ``solve = "rates"`` or a time sweep on a backend: its build and metric time plus its
    share of its batch's solve); ``ran_on`` is where a time sweep on a backend simulated it
    (``"cpu"`` or ``"cuda"``: in a batch; ``"engine"``: on the CPU engine), else empty."""

    key: str
    params: dict[str, Any]
    status: str
    error: str
    metrics: dict[str, float]
    wall_s: float
    ran_on: str = ""

    def to_json(self) -> str:
        """One journal line (without the newline)."""
        row = {"key": self.key, "params": self.params, "status": self.status, "error": self.error,
               "metrics": self.metrics, "wall_s": self.wall_s}
        if self.ran_on:
            row["ran_on"] = self.ran_on
        return json.dumps(row, ensure_ascii=False, default=str)


def simulate_run(task: RunTask) -> dict[str, float]:
    """The default runner: build the task's scenario, simulate it, compute its metrics.

    Parameters
    ----------
    task : RunTask

    Returns
    -------
    dict
        Metric name -> value, for each of ``task.metrics``; a job metric
        (``job.NAME.slowdown``, ...) runs each job once more alone (:func:`flowsim.jobresults.job_results`).

    Raises
    ------
    InputError
        When the scenario is bad for these parameter values, or a metric does not apply
        (``busbw_Bps`` of a workload that is not one collective).
    """
    scenario = scenario_from_document(task.document, text=task.text, source=task.source, base_dir=task.base_dir)
    run = run_scenario(scenario)
    jobs = job_results(run) if scenario.jobs else None
    metrics = measure(task, run, jobs)
    if task.trace_path is not None:
        write_trace(task.trace_path, scenario.topology, scenario.workload, run.routes, run.result,
                    scenario_text=task.text, jobs=None if jobs is None else jobs.table())
    return metrics


def measure(task: RunTask, run: ScenarioRun, jobs: JobsReport | None = None) -> dict[str, float]:
    """``task``'s metrics of a simulated ``run`` (and of its ``jobs``, for job metrics).

    Raises
    ------
    InputError
        A metric does not apply: a job metric without ``[[job]]`` tables or naming no job,
        ``busbw_Bps`` of a workload that is not one collective.
    """
    metrics = {}
    for name in task.metrics:
        parsed = job_metric(name)
        if parsed is None:
            metrics[name] = float(METRIC_FUNCTIONS[name](run, task.document))
            continue
        if jobs is None:
            raise InputError(f"metric {name!r}: the scenario has no [[job]] tables")
        try:
            metrics[name] = jobs.job(parsed[0]).metric(parsed[1])
        except KeyError as err:
            raise InputError(f"metric {name!r}: {err.args[0]}") from None
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
        return failed_record(task.key, task.params, task.metrics, err, time.perf_counter() - start)
    return RunRecord(task.key, task.params, "ok", "", metrics, time.perf_counter() - start)


def failed_record(key: str, params: dict[str, Any], metrics: Sequence[str], err: Exception, wall_s: float) -> RunRecord:
    """The ``"error"`` record of a run that raised ``err``: an input error reads as its own
    text, anything else with its type first."""
    error = str(err) if isinstance(err, InputError) else f"{type(err).__name__}: {err}"
    return RunRecord(key, params, "error", error, {name: math.nan for name in metrics}, wall_s)
