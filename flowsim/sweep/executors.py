"""Where the runs of a time-mode sweep execute: serially here, on a local process pool that
is replaced when a worker dies, or on a Dask cluster; runs go in batches to amortise each
task's cost."""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import itertools
import logging
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from flowsim.errors import InputError
from flowsim.sweep.runs import Runner, RunRecord, execute, failed_record
from flowsim.sweep.spec import RunTask

__all__ = ["Engine", "dask_engine", "process_pool", "serial"]


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
Engine = Callable[[Runner, Iterator[RunTask], int, int], Iterator[list[RunRecord]]]


def serial(runner: Runner, tasks: Iterator[RunTask], n_tasks: int, workers: int) -> Iterator[list[RunRecord]]:
    for task in tasks:
        yield [execute(runner, task)]


def process_pool(runner: Runner, tasks: Iterator[RunTask], n_tasks: int, workers: int) -> Iterator[list[RunRecord]]:
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
        yield from _on_one_pool(functools.partial(_execute_batch, runner), batches, workers, lost, later)
        if not lost:
            return
        yield from _one_at_a_time(runner, lost)
        batches = iter(later)


def _on_one_pool(
    work: Callable[[list[RunTask]], list],
    batches: Iterator[list[RunTask]],
    workers: int,
    lost: list[RunTask],
    later: list[list[RunTask]],
) -> Iterator[list]:
    """``work(batch)`` (a function the workers can unpickle) for each of ``batches`` on a new
    pool, results as they come; if the pool breaks, the batches in flight are added to
    ``lost`` and those taken after it broke to ``later``."""
    with _pool(workers) as pool:

        def submit(batch: list[RunTask]) -> concurrent.futures.Future:
            if not lost:
                try:
                    with _sigint_held():  # a submit may start a worker
                        return pool.submit(work, batch)
                except BrokenProcessPool:
                    pass
            later.append(batch)
            return _done([])

        def collect(future: concurrent.futures.Future, batch: list[RunTask]) -> list:
            try:
                return future.result()
            except BrokenProcessPool:
                lost.extend(batch)
                return []

        yield from _windowed(submit, _first_done, batches, 4 * workers, collect)


def _one_at_a_time(runner: Runner, tasks: list[RunTask]) -> Iterator[list[RunRecord]]:
    """Run ``tasks`` one after the other in a worker process, replaced when one dies; the
    run it was running is then recorded as failed."""
    remaining = iter(tasks)
    for first in remaining:
        with _pool(1) as pool:
            for task in itertools.chain([first], remaining):
                try:
                    with _sigint_held():  # a submit may start the worker
                        future = pool.submit(_execute_batch, runner, [task])
                    yield future.result()
                except BrokenProcessPool:
                    yield [_died(task)]
                    break


def _died(task: RunTask) -> RunRecord:
    """The failed record of a run whose worker process died running it."""
    died = RuntimeError("the worker process running it died (killed, or out of memory?)")
    return failed_record(task.key, task.params, task.metrics, died, math.nan)


def _first_done(futures: set) -> set:
    return concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED).done


@contextlib.contextmanager
def _pool(workers: int) -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=(os.getpid(),)
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


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold Ctrl-C back from this thread while it starts worker processes, which inherit the
    hold: a worker interrupted while Python starts, before :func:`_start_worker` ignores
    SIGINT, printed its traceback. The sweep gets the signal when the hold ends."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C in this process while processes are started that inherit it (an ignored
    signal stays ignored across exec, and Python then installs no handler of its own); from
    the main thread only, where Python handles signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def _start_worker(parent: int) -> None:
    """Set up a pool worker: it ignores Ctrl-C and dies with the sweep process ``parent``.

    Pool workers leave Ctrl-C to the sweep, which stops them (see :func:`process_pool`).
    Ctrl-C in a terminal interrupts every process of its group. A worker interrupted while
    sending a result can die holding the result queue's lock, and the other workers, and the
    pool's shutdown with them, then wait for it forever. So a worker ignores SIGINT for good,
    rather than holding it back as :func:`flowsim_kernels.progress.deferred_interrupt` does
    around a kernel or a file write: the worker is not the one to act on it.

    A sweep killed outright (``kill -9``, out of memory) cannot stop its workers, which
    would run on, orphaned, with their memory. On Linux the kernel kills a worker when the
    thread that started it ends (``PR_SET_PDEATHSIG``, prctl(2)); the sweep starts its pools
    from the thread that runs it and waits for them there, so that is when the sweep dies.
    Elsewhere, and should the sweep have died before the worker got this far, a watchdog
    thread ends the worker once its parent is gone (it is given another one).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # started with SIGINT held (_sigint_held): ignored now
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_exit_with, args=(parent,), name="flowsim-parent-watchdog", daemon=True).start()


# prctl(2)'s option number, from <linux/prctl.h>.
_PR_SET_PDEATHSIG = 1
# How often the watchdog looks for its parent (s): a worker outlives a killed sweep by at
# most this much where PR_SET_PDEATHSIG is missing, or a kernel call holds the GIL longer.
_WATCH_EVERY_S = 0.5


def _exit_with(parent: int) -> None:
    """End this process once ``parent`` is no longer its parent."""
    while os.getppid() == parent:
        time.sleep(_WATCH_EVERY_S)
    os._exit(1)


@contextlib.contextmanager
def dask_engine(address: str, workers: int) -> Iterator[Engine]:
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
            # Its workers are started while this process ignores Ctrl-C, which they inherit
            # (Dask starts them from threads of its own, so a held signal is not passed on):
            # a Ctrl-C then reaches the sweep alone, which stops the cluster, and no worker
            # prints its traceback. One pressed during those few seconds is lost.
            # Dask's logs as it cancels a stopped sweep's tasks, kills its busy workers or loses
            # a heartbeat to a scheduler closing first are not the user's to act on (a run
            # that fails reaches the sweep through its future, and the table): critical only.
            with _sigint_ignored():
                local = distributed.LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                    silence_logs=logging.CRITICAL,
                )
            cluster = resources.enter_context(local)
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
