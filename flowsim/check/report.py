"""A parsed nccl-tests run checked against flowsim's prediction for the same cluster, and
the report of the check.

Prediction choices: rank ``r`` on the ``i``-th host named in the rank lines, device ``d``,
is GPU ``n{i}.gpu{d}`` of the cluster, passed to flowsim in rank order. A
``sendrecv_perf`` run shifts data around the ring of ranks, every rank sending ``S`` to the
next at once; it is predicted as one ``send`` between the pair the ring waits for
(:func:`flowsim.pipeline.send_pair`: the first ring neighbours on different hosts, or ranks
0 and 1 on one host), assuming the other pairs do not share its links.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import asdict, dataclass, field

from flowsim.check.parse import NcclTestLog, RankInfo, line_error, parse_nccl_log
from flowsim.collectives import resolve_algorithm
from flowsim.collectives.placement import send_pair
from flowsim.collectives.report import busbw_Bps, sweep
from flowsim.errors import InputError, whole_number
from flowsim.fabrics import build_cluster

__all__ = ["CheckReport", "RowCheck", "check_log", "check_nccl_log"]


@dataclass(frozen=True)
class RowCheck:
    """Measured against predicted for one size.

    ``ratio_*`` is measured busbw over predicted busbw; ``short`` when either is below
    ``1 - threshold``; ``wrong`` when nccl-tests counted wrong elements. Predicted fields
    are None for rows not predicted (size 0 or below ``min_bytes``).
    """

    size_bytes: int
    measured_busbw_out_GBps: float
    measured_busbw_in_GBps: float
    measured_time_out_us: float
    measured_time_in_us: float
    predicted_time_us: float | None
    predicted_busbw_GBps: float | None
    ratio_out: float | None
    ratio_in: float | None
    short: bool
    wrong: bool

    @property
    def flagged(self) -> bool:
        """Short of the prediction, or wrong elements counted."""
        return self.short or self.wrong


@dataclass(frozen=True)
class CheckReport:
    """One nccl-tests run checked against flowsim.

    Attributes
    ----------
    log : NcclTestLog
    system : str
        Preset name (``"dgx_h100"``).
    nodes : int
    threshold : float
        A row is short when measured busbw < predicted x (1 - threshold).
    algorithm, protocol, figure, fabric : str
        How the prediction was made (see :func:`flowsim.collectives.collective_time`).
    rows : tuple of RowCheck
    checked_at : str
        UTC time of the check, ISO 8601.
    """

    log: NcclTestLog
    system: str
    nodes: int
    threshold: float
    algorithm: str
    protocol: str
    figure: str
    fabric: str
    rows: tuple[RowCheck, ...]
    checked_at: str = field(default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat())

    @property
    def flagged(self) -> tuple[RowCheck, ...]:
        """Rows flagged, in log order."""
        return tuple(r for r in self.rows if r.flagged)

    @property
    def ok(self) -> bool:
        """No row flagged."""
        return not self.flagged

    def to_dict(self) -> dict:
        """JSON-ready summary: the check's settings, the log's description and every row."""
        log = self.log
        return {
            "source": log.source,
            "binary": log.binary,
            "collective": log.collective,
            "ranks": log.n_ranks,
            "hosts": list(log.hosts),
            "system": self.system,
            "nodes": self.nodes,
            "threshold": self.threshold,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "figure": self.figure,
            "fabric": self.fabric,
            "checked_at": self.checked_at,
            "avg_busbw_GBps": log.avg_busbw_GBps,
            "n_flagged": len(self.flagged),
            "rows": [{**asdict(r), "flagged": r.flagged} for r in self.rows],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)

    def format_text(self) -> str:
        """A table: size, predicted busbw, measured busbw and ratio (out-of-place, in-place), flag."""
        log = self.log
        lines = [
            f"# {log.source}: {log.binary}, {log.n_ranks} ranks on {log.n_nodes} node(s)",
            f"# predicted: {self.nodes} x {self.system}, {self.algorithm} algorithm, {self.protocol} protocol, "
            f"{self.figure} link rates, {self.fabric} fabric",
            # Not '.0%': a threshold of 0.005 would read "below 100%".
            f"# flag: measured busbw below {100 * (1 - self.threshold):.12g}% of predicted, or #wrong > 0",
            "#       size   predicted    out-of-place       in-place",
            "#        (B)  busbw(GB/s)  busbw(GB/s) ratio  busbw(GB/s) ratio  flag",
        ]
        for r in self.rows:
            predicted = "-" if r.predicted_busbw_GBps is None else f"{r.predicted_busbw_GBps:.2f}"
            ratios = ["-" if x is None else f"{x:.2f}" for x in (r.ratio_out, r.ratio_in)]
            flag = ",".join(name for name, on in (("SHORT", r.short), ("WRONG", r.wrong)) if on)
            lines.append(
                f"{r.size_bytes:12d}  {predicted:>11}  {r.measured_busbw_out_GBps:11.2f} {ratios[0]:>5}  "
                f"{r.measured_busbw_in_GBps:11.2f} {ratios[1]:>5}  {flag}".rstrip()
            )
        lines.append(self._summary())
        return "\n".join(lines)

    def _summary(self) -> str:
        """The closing line: flagged sizes among those predicted, and why the others were not."""
        predicted = [r for r in self.rows if r.predicted_busbw_GBps is not None]
        left_out = [r for r in self.rows if r.predicted_busbw_GBps is None]
        n = sum(r.flagged for r in predicted)
        if n:
            summary = f"# {n} of {len(predicted)} predicted size{'s' if len(predicted) != 1 else ''} flagged"
        elif len(predicted) > 1:
            summary = f"# all {len(predicted)} predicted sizes OK"
        else:
            summary = "# the predicted size is OK" if predicted else "# no size predicted"
        if left_out:
            zero = sum(r.size_bytes == 0 for r in left_out)
            counts = ((len(left_out) - zero, "below min-bytes"), (zero, "of 0 bytes"))
            wrong = sum(r.wrong for r in left_out)
            summary += f"; not predicted: {', '.join(f'{k} {why}' for k, why in counts if k)}"
            summary += f" ({wrong} flagged WRONG)" if wrong else ""
        return summary


def _rank_gpus(log: NcclTestLog, system: str, topology) -> list[str]:
    """GPU node names of the ranks: host ``i`` (first-appearance order) is server ``n{i}``.

    An :class:`InputError` names a device the server lacks, or two ranks on one GPU.
    """
    host_index = {host: i for i, host in enumerate(log.hosts)}
    names = set(topology.node_names)
    gpus: dict[str, RankInfo] = {}
    for r in log.ranks:
        gpu = f"n{host_index[r.host]}.gpu{r.device}"
        if gpu not in names:
            raise line_error(
                log.source, r.line, f"rank {r.rank} uses device {r.device}, which a {system} server does not have"
            )
        if gpu in gpus:
            first = gpus[gpu]
            raise line_error(
                log.source,
                r.line,
                f"ranks {first.rank} (line {first.line}) and {r.rank} (line {r.line}) both name device {r.device} "
                f"on host {r.host}: two ranks on one GPU, or device numbers counted per process "
                "(CUDA_VISIBLE_DEVICES set per rank); flowsim needs each rank's own GPU",
            )
        gpus[gpu] = r
    return list(gpus)


def check_log(
    log: NcclTestLog,
    *,
    system: str,
    nodes: int | None = None,
    threshold: float = 0.1,
    algorithm: str | None = None,
    protocol: str = "auto",
    figure: str = "effective",
    fabric: str = "rail_optimized",
    min_bytes: int = 1,
) -> CheckReport:
    """Predict each row of a parsed run and compare.

    Parameters
    ----------
    log : NcclTestLog
        From :func:`parse_nccl_log`.
    system, nodes, threshold, algorithm, protocol, figure, fabric, min_bytes
        As :func:`check_nccl_log`.

    Returns
    -------
    CheckReport
    """
    system = system.replace("-", "_")
    if nodes is None:
        nodes = log.n_nodes
    nodes = whole_number("nodes", nodes)
    if nodes != log.n_nodes:
        raise InputError(
            f"{log.source}: the rank lines name {log.n_nodes} host(s) ({', '.join(log.hosts)}), not {nodes}"
        )
    if not 0 <= threshold < 1:
        raise InputError(f"threshold must be in [0, 1), got {threshold!r}")
    if log.n_ranks < 2:
        raise InputError(f"{log.source}: {log.n_ranks} rank; flowsim predicts collectives of 2 or more ranks")
    algorithm = resolve_algorithm(log.collective, algorithm)
    topology = build_cluster(system, nodes, figure=figure, fabric=fabric)
    gpus = _rank_gpus(log, system, topology)
    ranks = send_pair(topology, gpus) if log.collective == "send" else gpus
    predicted_sizes = sorted({r.size_bytes for r in log.rows if r.size_bytes >= max(min_bytes, 1)})
    predictions = sweep(
        topology, log.collective, predicted_sizes, dtype="int8", ranks=ranks, algorithm=algorithm, protocol=protocol
    )
    time_us = {size: p.time_us for size, p in zip(predicted_sizes, predictions, strict=True)}
    checks = []
    for row in log.rows:
        predicted_time = time_us.get(row.size_bytes)
        predicted_busbw = ratio_out = ratio_in = None
        short = False
        if predicted_time is not None:
            predicted_busbw = busbw_Bps(log.collective, row.size_bytes, predicted_time * 1e-6, log.n_ranks) / 1e9
            ratio_out = row.out_of_place.busbw_GBps / predicted_busbw
            ratio_in = row.in_place.busbw_GBps / predicted_busbw
            short = min(ratio_out, ratio_in) < 1.0 - threshold
        wrong = any(m.wrong for m in (row.out_of_place, row.in_place))
        checks.append(
            RowCheck(
                row.size_bytes,
                row.out_of_place.busbw_GBps,
                row.in_place.busbw_GBps,
                row.out_of_place.time_us,
                row.in_place.time_us,
                predicted_time,
                predicted_busbw,
                ratio_out,
                ratio_in,
                short,
                wrong,
            )
        )
    return CheckReport(log, system, nodes, float(threshold), algorithm, protocol, figure, fabric, tuple(checks))


def check_nccl_log(
    path_or_text: str | os.PathLike,
    *,
    system: str,
    nodes: int | None = None,
    threshold: float = 0.1,
    collective: str | None = None,
    algorithm: str | None = None,
    protocol: str = "auto",
    figure: str = "effective",
    fabric: str = "rail_optimized",
    min_bytes: int = 1,
) -> CheckReport:
    """Parse nccl-tests output, predict every row with flowsim and flag shortfalls.

    Parameters
    ----------
    path_or_text : str or path-like
        A file, or the output itself (a ``str`` holding a newline).
    system : str
        Server preset (``"dgx-h100"`` or ``"dgx_h100"``).
    nodes : int, optional
        Servers in the cluster; must equal the hosts named in the rank lines (default: that
        count).
    threshold : float
        Flag a row when measured busbw < predicted busbw x (1 - threshold), in either the
        out-of-place or the in-place column.
    collective : str, optional
        See :func:`parse_nccl_log`.
    algorithm : str, optional
        flowsim algorithm (default: the collective's first, ring or p2p).
    protocol : {"auto", "simple", "ll", "ll128"}
        NCCL protocol costs; ``"auto"`` keeps the fastest, as NCCL's tuner does.
    figure : {"effective", "nominal"}
        Link rates.
    fabric : str
        Compute fabric between servers (:data:`flowsim.fabrics.FABRICS`).
    min_bytes : int
        Rows below this size are reported but not predicted (small sizes are latency-bound
        and take as long to simulate as large ones).

    Returns
    -------
    CheckReport

    Examples
    --------
    >>> report = check_nccl_log("data/nccl_tests/all_gather_perf_dgx_h100_1node.txt",
    ...                         system="dgx-h100", min_bytes=1 << 30)  # doctest: +SKIP
    >>> report.ok  # doctest: +SKIP
    True
    """
    log = parse_nccl_log(path_or_text, collective=collective)
    return check_log(
        log,
        system=system,
        nodes=nodes,
        threshold=threshold,
        algorithm=algorithm,
        protocol=protocol,
        figure=figure,
        fabric=fabric,
        min_bytes=min_bytes,
    )
