"""Measured nccl-tests results against flowsim's prediction for the same cluster.

A cluster whose nccl-tests bus bandwidth falls well below what its fabric allows has
something broken (a degraded link, a wrong NCCL setting). :func:`check_nccl_log` parses the
output of one nccl-tests binary (``all_reduce_perf``, ``all_gather_perf``,
``reduce_scatter_perf``, ``alltoall_perf``, ``sendrecv_perf``; also ``broadcast_perf``,
``reduce_perf``, ``gather_perf``, ``scatter_perf``, ``hypercube_perf`` and
``alltoallv_perf``), predicts every row with :func:`flowsim.collectives.report.sweep` on a preset cluster
(:func:`flowsim.fabrics.build_cluster`) and flags rows whose measured busbw falls short of
the prediction by more than a threshold. :func:`append_history` keeps each check in an HDF5
file so trends over days show (:func:`append_checks` also compares each run with the
cluster's earlier run); :func:`plot_history` draws them. :func:`history_file` and
:func:`history_plot_file` check those two outputs, so that a command can refuse a bad path
before it runs the check.

Modules: :mod:`~flowsim.check.log` (what a parsed run holds), :mod:`~flowsim.check.parse`
(nccl-tests' text output), :mod:`~flowsim.check.nccl_json` (its JSON output, ``-J``),
:mod:`~flowsim.check.report` (the check and its report) and :mod:`~flowsim.check.history`
(the HDF5 history and its plot).
"""

from __future__ import annotations

from flowsim.check.history import (
    AppendedCheck,
    History,
    PastChange,
    append_checks,
    append_history,
    history_file,
    history_plot_file,
    plot_history,
    read_history,
)
from flowsim.check.parse import (
    BINARIES,
    Measurement,
    NcclTestLog,
    RankInfo,
    TestRow,
    parse_nccl_log,
    parse_nccl_logs,
)
from flowsim.check.report import CheckReport, RowCheck, check_log, check_nccl_log, default_system

__all__ = [
    "BINARIES",
    "AppendedCheck",
    "CheckReport",
    "History",
    "Measurement",
    "NcclTestLog",
    "PastChange",
    "RankInfo",
    "RowCheck",
    "TestRow",
    "append_checks",
    "append_history",
    "check_log",
    "check_nccl_log",
    "default_system",
    "history_file",
    "history_plot_file",
    "parse_nccl_log",
    "parse_nccl_logs",
    "plot_history",
    "read_history",
]
