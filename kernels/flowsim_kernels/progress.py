"""Progress lines on stderr for long compiled loops, called from ``numba.objmode`` blocks.

Plain Python: the compiled loop calls :func:`report` every so many iterations, and it
prints at most twice a second, so the check costs the loop next to nothing.
"""

import sys
import time

_INTERVAL_S = 0.5
_last_print = [0.0]


def report(n_finished, n_flows, now_s, n_events):
    """Print (at most every half second) how far a simulation has got."""
    clock = time.monotonic()
    if clock - _last_print[0] < _INTERVAL_S:
        return
    _last_print[0] = clock
    share = n_finished / n_flows if n_flows else 1.0
    print(
        f"\r  {share:6.1%} of {n_flows:,} flows done at simulated t = {now_s:.6g} s "
        f"({n_events:,} events)",
        end="",
        file=sys.stderr,
        flush=True,
    )


def finish():
    """End the progress line, if one was printed."""
    if _last_print[0] > 0.0:
        print(file=sys.stderr, flush=True)
        _last_print[0] = 0.0
