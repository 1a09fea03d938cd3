"""The progress bar of a running sweep."""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Sequence
from typing import TextIO

from flowsim.sweep.runs import RunRecord

__all__ = ["ProgressBar"]


class ProgressBar:
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
