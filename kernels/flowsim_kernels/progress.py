"""Progress lines and Ctrl-C for long compiled loops, and the note that kernels compile.

Plain Python. A compiled loop calls :func:`poll` from a ``numba.objmode`` block every so many
iterations; it prints nothing for a run's first two seconds, then at most twice a second on
a terminal (once every five seconds in a log), so the check costs the loop next to nothing.
:func:`note_compiles` says once when a kernel compiles rather than loads from Numba's cache.

Ctrl-C needs care around compiled code. CPython runs a signal's Python handler only between
bytecodes, so a SIGINT arriving inside a kernel waits, and then fires inside whatever Python
code Numba runs next: often the unpickling of a dtype while it boxes the kernel's returned
arrays, where the ``KeyboardInterrupt`` crashes the process (numba/numba#2324). Raised from
an ``objmode`` block instead, it leaks the kernel's arrays. So :func:`deferred_interrupt`
holds SIGINT back while a kernel runs, a polling loop sees it through :func:`poll` and
returns early, and the handler installed before gets the signal once the kernel has
returned.

The same deferral guards flowsim's file writes (:func:`flowsim.files.replaced_atomically`):
a Ctrl-C raised at once could land in a callback that only prints it (h5py closes objects
from weakref callbacks) and the interrupted write would carry on. It lives here, where the
kernels can reach it, since kernels never import flowsim.
"""

import contextlib
import signal
import sys
import threading
import time

from numba.core import event
from numba.core.dispatcher import LiftedCode

_INTERVAL_S = 0.5
_LOG_INTERVAL_S = 5.0
# No line for a run shorter than this: progress is for waits a person notices.
_DELAY_S = 2.0
_last_print = [0.0]
_begun = [0.0]

# The handler SIGINT had before deferral (None while none is active), and whether a SIGINT
# arrived since.
_deferred = {"previous": None, "pending": False}


def begin():
    """Start a run's progress: :func:`report` prints nothing for its first two seconds."""
    _begun[0] = time.monotonic()


def report(n_finished, n_flows, now_s, n_events):
    """Print how far a simulation has got, from two seconds after :func:`begin`: on a
    terminal one line redrawn at most every half second, elsewhere (a log) a line every five
    seconds."""
    clock = time.monotonic()
    tty = sys.stderr.isatty()
    if clock - _last_print[0] < (_INTERVAL_S if tty else _LOG_INTERVAL_S) or clock - _begun[0] < _DELAY_S:
        return
    _last_print[0] = clock
    share = n_finished / n_flows if n_flows else 1.0
    print(
        ("\r\x1b[K" if tty else "")  # ANSI: erase the line, whatever was drawn on it
        + f"  {share:6.1%} of {n_flows:,} flows done at simulated t = {now_s:.6g} s ({n_events:,} events)",
        end="" if tty else "\n",
        file=sys.stderr,
        flush=True,
    )


def finish():
    """Erase the progress line, if one was drawn on a terminal: what comes next (a stage
    note, a table row on the same terminal) starts on a clean line."""
    if _last_print[0] > 0.0 and sys.stderr.isatty():
        print("\r\x1b[K", end="", file=sys.stderr, flush=True)
    _last_print[0] = 0.0


def poll(show, n_finished, n_flows, now_s, n_events):
    """A compiled loop's check: report progress if ``show``; True if it should stop because
    :func:`deferred_interrupt` holds back a Ctrl-C."""
    if show:
        report(n_finished, n_flows, now_s, n_events)
    return _deferred["pending"]


class _CompileNote(event.Listener):
    """Says once, on the stream :func:`note_compiles` set for its block, that flowsim's
    kernels compile."""

    def __init__(self):
        self.stream = None
        self.said = False

    def on_start(self, ev):
        dispatcher = ev.data["dispatcher"]
        # An objmode block (the progress poll) is lifted out of its kernel and compiled in
        # object mode in every process, in milliseconds and never cached: not news.
        if isinstance(dispatcher, LiftedCode):
            return
        module = getattr(dispatcher.py_func, "__module__", None) or ""
        if self.stream is not None and not self.said and module.split(".")[0] == __name__.split(".")[0]:
            self.said = True
            print(
                "flowsim: compiling the simulation kernels this command needs (the first runs after an install or "
                "an update; up to a minute, cached for later runs)",
                file=self.stream,
                flush=True,
            )

    def on_end(self, ev):
        pass


_compile_note = _CompileNote()
_registered = [False]


@contextlib.contextmanager
def note_compiles(stream):
    """While the block runs, say once on ``stream`` (None: nowhere) when Numba starts
    compiling a kernel.

    The first run after an install or an update compiles the kernels for about a minute, and
    the line says why nothing else moves. Numba raises its ``numba:compile`` event only where
    its cache had no usable copy of the kernel, so with a warm cache nothing is said.
    """
    if not _registered[0]:
        event.register("numba:compile", _compile_note)
        _registered[0] = True
    previous = _compile_note.stream
    _compile_note.stream = stream
    try:
        yield
    finally:
        _compile_note.stream = previous


def _hold(signum, frame):
    _deferred["pending"] = True


@contextlib.contextmanager
def deferred_interrupt():
    """Hold SIGINT back while the block runs; yields a function that says whether one arrived.

    The block is not cut short: it may look (a kernel through :func:`poll`, a file write
    before it replaces its target) and stop early. A held-back Ctrl-C stops the work all the
    same: when the block ends, however it ends, the handler SIGINT had before gets the signal,
    and ``KeyboardInterrupt`` is raised if that handler returns instead of raising (a kernel
    that polls has stopped early and its outputs are partial; a write has been abandoned).

    Active only in the main thread (the only one Python delivers signals to) and only while
    SIGINT has a Python handler: an ignored SIGINT stays ignored, a default one still ends
    the process, and elsewhere the function always says no. Nested uses defer to the
    outermost, which hands the signal to the handler; an inner one whose block saw a
    Ctrl-C raises ``KeyboardInterrupt`` when it ends, so partial outputs go no further.
    """
    if _deferred["previous"] is not None:
        try:
            yield _arrived
        finally:
            if _deferred["pending"]:
                raise KeyboardInterrupt
        return
    if threading.current_thread() is not threading.main_thread() or not callable(signal.getsignal(signal.SIGINT)):
        yield _never
        return
    previous = signal.signal(signal.SIGINT, _hold)
    _deferred["previous"] = previous
    try:
        yield _arrived
    finally:
        signal.signal(signal.SIGINT, previous)
        pending = _deferred["pending"]
        _deferred["previous"] = None
        _deferred["pending"] = False
        if pending:
            previous(signal.SIGINT, None)
            raise KeyboardInterrupt


def _arrived():
    return _deferred["pending"]


def _never():
    return False
