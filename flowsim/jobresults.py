"""What sharing the cluster did to each job: its iterations shared and alone, its slowdown,
and the links where jobs contended.

:func:`job_results` reads a scenario run (:func:`flowsim.scenario.run_scenario`) with
``[[job]]`` tables (:mod:`flowsim.jobs`) and simulates each job once more *alone*: its own
flows only, over the same routes, with nothing else on the fabric. A job's slowdown is its
mean iteration time shared over its mean iteration time alone (1 when no other traffic
touched it, more when max-min sharing gave its flows less bandwidth).

A link is *contended* when flows of two or more jobs moved bytes on it at the same time
(their transfer intervals, from transfer start to finish, overlap); flows of the scenario's
``[workload]`` count as one more party, ``(workload)``. For each such link the report gives
the time two or more parties were moving bytes on it together, and each party's bytes on it
and busy time (the union of its flows' transfer intervals there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flowsim.formatting import format_bytes, format_seconds
from flowsim.jobs import Job
from flowsim.pipeline import simulate_routed
from flowsim.routes import Routes
from flowsim.scenario import ScenarioRun
from flowsim.workload import Workload

__all__ = ["JOB_METRICS", "JobResult", "JobsReport", "LinkContention", "WORKLOAD_PARTY", "job_results"]

#: The party of the flows outside every job (the scenario's ``[workload]``) in contention rows.
WORKLOAD_PARTY = "(workload)"
#: Per-job figures a sweep may keep as ``job.NAME.<figure>`` (see :meth:`JobResult.metric`).
JOB_METRICS = ("slowdown", "iteration_s", "alone_iteration_s", "exposed_communication_s",
               "alone_exposed_communication_s")


@dataclass(frozen=True)
class JobResult:
    """One job's iterations shared and alone.

    Attributes
    ----------
    job : Job
    iteration_s, alone_iteration_s : numpy.ndarray
        float64[iterations]: each iteration's time in the scenario and with the job alone.
    """

    job: Job
    iteration_s: np.ndarray
    alone_iteration_s: np.ndarray

    @property
    def mean_iteration_s(self) -> float:
        return float(self.iteration_s.mean())

    @property
    def alone_mean_iteration_s(self) -> float:
        return float(self.alone_iteration_s.mean())

    @property
    def slowdown(self) -> float:
        """Mean iteration time shared / alone (NaN when alone takes no time)."""
        alone = self.alone_mean_iteration_s
        return self.mean_iteration_s / alone if alone > 0 else math.nan

    @property
    def exposed_communication_s(self) -> float:
        """Of a training job: mean iteration time less its compute (NaN for other kinds)."""
        return self.mean_iteration_s - self.job.compute_s if self.job.kind == "training" else math.nan

    @property
    def alone_exposed_communication_s(self) -> float:
        return self.alone_mean_iteration_s - self.job.compute_s if self.job.kind == "training" else math.nan

    def metric(self, figure: str) -> float:
        """A figure of :data:`JOB_METRICS` by name (``iteration_s`` is the mean)."""
        if figure == "iteration_s":
            return self.mean_iteration_s
        if figure == "alone_iteration_s":
            return self.alone_mean_iteration_s
        return float(getattr(self, figure))


@dataclass(frozen=True)
class LinkContention:
    """A link that flows of two or more parties (jobs, or ``(workload)``) crossed at once.

    Attributes
    ----------
    link : int
        Link id.
    name : str
    overlap_s : float
        Time two or more parties were moving bytes on it together.
    parties : tuple of str
        Job names (and :data:`WORKLOAD_PARTY`), in job order.
    bytes : numpy.ndarray
        float64: each party's bytes on the link.
    busy_s : numpy.ndarray
        float64: each party's time moving bytes on it.
    """

    link: int
    name: str
    overlap_s: float
    parties: tuple[str, ...]
    bytes: np.ndarray
    busy_s: np.ndarray


@dataclass(frozen=True)
class JobsReport:
    """Every job's result and the contended links, busiest overlap first."""

    jobs: tuple[JobResult, ...]
    contention: tuple[LinkContention, ...]

    def job(self, name: str) -> JobResult:
        """The result of the job called ``name``; a ``KeyError`` naming the jobs if none."""
        for result in self.jobs:
            if result.job.name == name:
                return result
        raise KeyError(f"no job named {name!r}; jobs: {', '.join(r.job.name for r in self.jobs)}")

    def format_text(self, most_links: int = 5) -> str:
        """The per-job table and the ``most_links`` contended links with the longest overlap."""
        header = ("job", "kind", "GPUs", "placement", "iters", "alone", "shared", "slowdown",
                  "exposed comm alone/shared")
        rows = []
        for r in self.jobs:
            exposed = ""
            if r.job.kind == "training":
                alone, shared = r.alone_exposed_communication_s, r.exposed_communication_s
                exposed = f"{format_seconds(alone)} / {format_seconds(shared)}"
            rows.append((
                r.job.name, r.job.kind, str(len(r.job.ranks)), r.job.placement, str(r.job.iterations),
                format_seconds(r.alone_mean_iteration_s), format_seconds(r.mean_iteration_s), f"{r.slowdown:.3f}",
                exposed,
            ))
        widths = [max(len(row[c]) for row in (header, *rows)) for c in range(len(header))]
        right = {2, 4, 5, 6, 7}

        def line(row: tuple[str, ...]) -> str:
            cells = [
                cell.rjust(w) if c in right else cell.ljust(w)
                for c, (cell, w) in enumerate(zip(row, widths, strict=True))
            ]
            return "  " + "  ".join(cells).rstrip()

        out = ["jobs (iteration time, mean; alone: the job by itself on the same GPUs and routes; "
               "slowdown = shared / alone):", line(header), *map(line, rows)]
        if not self.contention:
            out.append("no link carried two jobs' bytes at the same time")
            return "\n".join(out)
        out.append("contended links (time two or more jobs moved bytes on it together: each job's bytes, busy time):")
        for c in self.contention[:most_links]:
            shares = ", ".join(
                f"{party} {format_bytes(float(b))} ({format_seconds(float(t))})"
                for party, b, t in zip(c.parties, c.bytes, c.busy_s, strict=True)
            )
            out.append(f"  {c.name}  {format_seconds(c.overlap_s)}: {shares}")
        if len(self.contention) > most_links:
            out.append(f"  ... and {len(self.contention) - most_links:,} more")
        return "\n".join(out)

    def table(self) -> dict[str, np.ndarray]:
        """The columns a trace stores in ``/jobs`` (see :mod:`flowsim.trace`)."""
        jobs = self.jobs
        index = {r.job.name: i for i, r in enumerate(jobs)}
        rows = [(c, p, b, t) for c in self.contention for p, b, t in zip(c.parties, c.bytes, c.busy_s, strict=True)]
        return {
            "name": np.array([r.job.name for r in jobs], dtype=object),
            "kind": np.array([r.job.kind for r in jobs], dtype=object),
            "placement": np.array([r.job.placement for r in jobs], dtype=object),
            "n_gpus": np.array([len(r.job.ranks) for r in jobs], dtype=np.int64),
            "iterations": np.array([r.job.iterations for r in jobs], dtype=np.int64),
            "start_s": np.array([r.job.start_s for r in jobs], dtype=np.float64),
            "compute_s": np.array([r.job.compute_s for r in jobs], dtype=np.float64),
            "mean_iteration_s": np.array([r.mean_iteration_s for r in jobs], dtype=np.float64),
            "alone_mean_iteration_s": np.array([r.alone_mean_iteration_s for r in jobs], dtype=np.float64),
            "slowdown": np.array([r.slowdown for r in jobs], dtype=np.float64),
            "exposed_communication_s": np.array([r.exposed_communication_s for r in jobs], dtype=np.float64),
            "alone_exposed_communication_s": np.array([r.alone_exposed_communication_s for r in jobs],
                                                      dtype=np.float64),
            "iteration_indptr": np.concatenate([[0], np.cumsum([r.job.iterations for r in jobs])]).astype(np.int64),
            "iteration_s": np.concatenate([r.iteration_s for r in jobs]) if jobs else np.empty(0),
            "alone_iteration_s": np.concatenate([r.alone_iteration_s for r in jobs]) if jobs else np.empty(0),
            "contention_link": np.array([c.link for c, _, _, _ in rows], dtype=np.int64),
            "contention_job": np.array([index.get(p, -1) for _, p, _, _ in rows], dtype=np.int64),
            "contention_bytes": np.array([b for _, _, b, _ in rows], dtype=np.float64),
            "contention_busy_s": np.array([t for _, _, _, t in rows], dtype=np.float64),
            "contention_overlap_s": np.array([c.overlap_s for c, _, _, _ in rows], dtype=np.float64),
        }


def _slice(workload: Workload, lo: int, hi: int) -> Workload:
    """Flows ``lo:hi`` of ``workload``, which depend on none outside them (a job's)."""
    d_lo, d_hi = int(workload.dep_indptr[lo]), int(workload.dep_indptr[hi])
    return Workload(
        workload.names[lo:hi], workload.src[lo:hi], workload.dst[lo:hi], workload.size_bytes[lo:hi],
        workload.start_s[lo:hi], workload.dep_indptr[lo : hi + 1] - d_lo, workload.dep_indices[d_lo:d_hi] - lo,
        workload.delay_s[lo:hi], workload.overhead_s[lo:hi], workload.weight[lo:hi], workload.cap_Bps[lo:hi],
        {key: values[lo:hi] for key, values in workload.tags.items()},
    )


def _routes_slice(routes: Routes, lo: int, hi: int) -> Routes:
    indptr = routes.flow_link_indptr
    return Routes(indptr[lo : hi + 1] - indptr[lo], routes.flow_link_indices[indptr[lo] : indptr[hi]], routes.n_links)


def _iterations(finish_s: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    return finish_s[ends] - finish_s[starts]


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _overlap_s(unions: list[list[tuple[float, float]]]) -> float:
    """Time two or more of ``unions`` (each a party's disjoint intervals) cover together."""
    events = sorted([(s, 1) for u in unions for s, _ in u] + [(e, -1) for u in unions for _, e in u])
    active, since, total = 0, 0.0, 0.0
    for time, step in events:  # at one instant an end (-1) sorts before a start (+1)
        if active >= 2:
            total += time - since
        active += step
        since = time
    return total


def _contention(run: ScenarioRun) -> tuple[LinkContention, ...]:
    scenario, routes, result = run.scenario, run.routes, run.result
    jobs = scenario.jobs
    party = np.full(len(scenario.workload), len(jobs), dtype=np.int64)  # flows outside jobs: the last party
    for j, job in enumerate(jobs):
        party[job.lo : job.hi] = j
    names = [job.name for job in jobs] + [WORKLOAD_PARTY]
    moving = (scenario.workload.size_bytes > 0) & (result.finish_s > result.transfer_start_s)
    hops = routes.hop_counts()
    links = routes.flow_link_indices
    flow_of = np.repeat(np.arange(len(party)), hops)
    keep = moving[flow_of]
    links, flow_of = links[keep], flow_of[keep]
    n_parties = len(names)
    crosses = np.zeros((n_parties, routes.n_links), dtype=bool)
    crosses[party[flow_of], links] = True
    shared = np.flatnonzero(crosses.sum(axis=0) >= 2)
    if not shared.size:
        return ()
    on_shared = np.isin(links, shared)
    out = []
    by_link: dict[int, list[int]] = {}
    for link, flow in zip(links[on_shared].tolist(), flow_of[on_shared].tolist(), strict=True):
        by_link.setdefault(link, []).append(flow)
    start, finish, size = result.transfer_start_s, result.finish_s, scenario.workload.size_bytes
    for link, flows in by_link.items():
        intervals: dict[int, list[tuple[float, float]]] = {}
        carried: dict[int, float] = {}
        for f in flows:
            p = int(party[f])
            intervals.setdefault(p, []).append((float(start[f]), float(finish[f])))
            carried[p] = carried.get(p, 0.0) + float(size[f])
        unions = {p: _union(iv) for p, iv in intervals.items()}
        overlap = _overlap_s(list(unions.values()))
        if overlap <= 0:
            continue
        order = sorted(unions)
        out.append(LinkContention(
            link, scenario.topology.link_names[link], overlap, tuple(names[p] for p in order),
            np.array([carried[p] for p in order]), np.array([sum(e - s for s, e in unions[p]) for p in order]),
        ))
    out.sort(key=lambda c: (-c.overlap_s, c.link))
    return tuple(out)


def job_results(run: ScenarioRun, progress: Callable[[str], None] | None = None) -> JobsReport:
    """Each job of ``run``'s scenario shared (from ``run``) and alone (simulated here, with
    the scenario's options: by flow classes unless ``classes = false``), and the contended
    links (see the module docstring).

    Parameters
    ----------
    run : ScenarioRun
    progress : callable, optional
        Called with a short note before each job's run alone.

    Returns
    -------
    JobsReport
    """
    note = progress or (lambda message: None)
    scenario, o = run.scenario, run.scenario.options
    results = []
    for job in scenario.jobs:
        note(f"simulating job {job.name} alone ({job.hi - job.lo:,} flows)")
        alone = simulate_routed(
            scenario.topology, _slice(scenario.workload, job.lo, job.hi), _routes_slice(run.routes, job.lo, job.hi),
            record_links=False, mode=o.mode, time_rel_tol=o.time_rel_tol, classes=o.classes,
        )
        results.append(JobResult(
            job,
            _iterations(run.result.finish_s, job.start_marker, job.end_marker),
            _iterations(alone.finish_s, job.start_marker - job.lo, job.end_marker - job.lo),
        ))
    return JobsReport(tuple(results), _contention(run))
