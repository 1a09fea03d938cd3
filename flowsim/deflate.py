"""A trace's numeric columns compressed on worker threads and written as HDF5 chunks.

h5py runs HDF5's filter pipeline on the thread that writes, holding the GIL: a training
step's trace has 3.3 million flows, whose numeric columns take about a second of deflate on
one core, and whose flow names, written as variable-length strings, keep that core busy
for as long again. :class:`ColumnWriter` runs the pipeline of the trace's numeric datasets
(flowsim.trace: shuffle, deflate, Fletcher-32) itself, chunk by chunk, on worker threads
(NumPy's copies, zlib and the checksum kernel release the GIL), and hands each filtered
chunk to HDF5 as it is (``H5Dwrite_chunk``). The caller goes on meanwhile: the trace writes
its flow names while the columns are compressed.

A chunk is what HDF5's own filters make of it ([HDF5] ``src/H5Zshuffle.c``,
``src/H5Zdeflate.c``, ``src/H5Zfletcher32.c``; docs/hardware.md, Sources):

- **shuffle**: the chunk, padded to its full length with the fill value 0, byte ``b`` of
  every element, for ``b`` = 0 to the element size - 1, one after another;
- **deflate**: zlib's ``compress2`` at the dataset's level (a zlib stream; zlib builds may
  encode one input differently, and every decoder reads each);
- **Fletcher-32**: :func:`flowsim_kernels.checksum.fletcher32` of that, appended
  little-endian.

``tests/test_deflate.py`` holds chunks written here to HDF5's: the same values read back
through HDF5's checks, the same filter mask, and each stage equal to what HDF5 stored.
"""

from __future__ import annotations

import collections
import itertools
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import h5py
import numpy as np

from flowsim_kernels.checksum import fletcher32

__all__ = ["ColumnWriter", "filtered_chunk"]

#: Chunks compressed ahead of their writing, per worker: enough to keep the workers busy
#: between the caller's polls, few enough to hold little memory (a chunk is 512 KiB raw).
_AHEAD_PER_WORKER = 8


def filtered_chunk(values: np.ndarray, dtype: np.dtype, chunk_length: int, level: int) -> bytes:
    """``values`` as ``dtype``, one chunk of a dataset of ``chunk_length`` elements a chunk,
    as HDF5's shuffle, deflate (``level``) and Fletcher-32 filters store it (see the module
    docstring)."""
    values = np.ascontiguousarray(values, dtype=dtype)
    if values.shape[0] < chunk_length:  # the last chunk: HDF5 fills the rest with 0
        padded = np.zeros(chunk_length, dtype=values.dtype)
        padded[: values.shape[0]] = values
        values = padded
    width = values.dtype.itemsize
    raw = values.view(np.uint8).reshape(-1, width)
    shuffled = raw.T.tobytes() if width > 1 and chunk_length > 1 else raw.tobytes()
    deflated = zlib.compress(shuffled, level)
    return deflated + int(fletcher32(np.frombuffer(deflated, dtype=np.uint8))).to_bytes(4, "little")


class ColumnWriter:
    """Writes whole numeric datasets as filtered chunks, compressed on worker threads.

    :meth:`put` queues a dataset's values and returns; :meth:`poll` writes the chunks
    compressed so far, in the order they were queued; :meth:`finish` writes the rest. Use it
    as a context manager: leaving it stops the workers (dropping the chunks not written when
    an error leaves it).

    Parameters
    ----------
    workers : int, optional
        Threads that compress; by default the processors this process may use, at most 4.
    """

    def __init__(self, workers: int | None = None) -> None:
        if workers is None:
            workers = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flowsim-deflate")
        self._ahead = _AHEAD_PER_WORKER * workers
        self._jobs: Iterator[tuple[h5py.Dataset, int, np.ndarray, int, int]] = iter(())
        self._running: collections.deque[tuple[h5py.Dataset, int, Future[bytes]]] = collections.deque()

    def __enter__(self) -> ColumnWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def put(self, dataset: h5py.Dataset, values: np.ndarray) -> None:
        """Queue every chunk of ``dataset`` (1-D, chunked, with the trace's numeric filters),
        whose rows are ``values`` (converted to its dtype)."""
        if dataset.ndim != 1 or dataset.chunks is None:
            raise ValueError(f"{dataset.name}: not a 1-D chunked dataset")
        if not (dataset.shuffle and dataset.compression == "gzip" and dataset.fletcher32) or dataset.scaleoffset:
            raise ValueError(f"{dataset.name}: filters other than shuffle, deflate and Fletcher-32")
        values = np.asarray(values)  # converted chunk by chunk, so that no copy is held whole
        if values.shape != dataset.shape:
            raise ValueError(f"{dataset.name}: {values.shape[0]} values for {dataset.shape[0]} rows")
        step = dataset.chunks[0]
        level = int(dataset.compression_opts)
        chunks = ((dataset, lo, values[lo : lo + step], step, level) for lo in range(0, values.shape[0], step))
        self._jobs = itertools.chain(self._jobs, chunks)
        self._start()

    def poll(self) -> None:
        """Write the chunks compressed so far, up to the first one still being compressed."""
        while self._running and self._running[0][2].done():
            self._write_first()
        self._start()

    def finish(self) -> None:
        """Write every chunk queued, waiting for those still being compressed."""
        self._start()
        while self._running:
            self._write_first()
            self._start()

    def _start(self) -> None:
        while len(self._running) < self._ahead:
            job = next(self._jobs, None)
            if job is None:
                return
            dataset, lo, values, step, level = job
            future = self._pool.submit(filtered_chunk, values, dataset.dtype, step, level)
            self._running.append((dataset, lo, future))

    def _write_first(self) -> None:
        dataset, lo, future = self._running.popleft()
        dataset.id.write_direct_chunk((lo,), future.result(), 0)  # 0: every filter applied
