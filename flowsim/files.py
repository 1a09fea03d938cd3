"""Output files written whole or not at all, and serialized updates of a shared file."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from flowsim_kernels.progress import deferred_interrupt

try:
    import fcntl
except ImportError:  # Windows: no advisory locks through fcntl
    fcntl = None  # type: ignore[assignment]  # the module or None; `locked` checks which

__all__ = ["locked", "replaced_atomically"]


@contextlib.contextmanager
def replaced_atomically(path: str | os.PathLike, *, copy_existing: bool = False) -> Iterator[str]:
    """Write ``path`` through a temporary file: yields the temporary file's name.

    The temporary file is hidden next to ``path`` (same directory, so the rename below is
    atomic on POSIX and Windows). When the block ends, it is flushed to disk and renamed over
    ``path`` (:func:`os.replace`). If the block raises, Ctrl-C included, the temporary file
    is removed and ``path`` is untouched: a reader sees the old file or the new one, never
    part of one.

    A Ctrl-C while the block runs takes effect when it ends: the temporary file is removed
    and :class:`KeyboardInterrupt` raised instead of the rename. Raised at once, it could
    land in a callback that only prints it (h5py closes objects from weakref callbacks), and
    the interrupted write would carry on and replace ``path``. The rule is the kernels'
    (:func:`flowsim_kernels.progress.deferred_interrupt`): in the main thread while SIGINT
    has a Python handler, which gets the signal once the temporary file is gone.

    ``copy_existing`` starts the temporary file as a copy of ``path`` (to add to it), with
    its permissions; otherwise it gets a new file's permissions under the current umask.
    """
    target = Path(path)
    with deferred_interrupt() as interrupted:
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        except OSError as err:  # name the file asked for, not the hidden temporary one
            raise type(err)(err.errno, err.strerror, str(target)) from None
        os.close(fd)
        try:
            if copy_existing and target.exists():
                shutil.copyfile(target, tmp_name)
                shutil.copymode(target, tmp_name)
            else:
                os.chmod(tmp_name, _new_file_mode())
            yield tmp_name
            _fsync(tmp_name)
            if interrupted():
                raise KeyboardInterrupt
            os.replace(tmp_name, target)
        except BaseException:
            os.unlink(tmp_name)
            raise


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive advisory lock for updates of ``path`` while the block runs.

    Processes that update the same file through this wait for each other, so that each
    reads what the one before wrote (a copy-and-rename update would otherwise lose the
    other's change). The lock is a hidden ``.NAME.lock`` file next to ``path``, left in
    place (removing it could let a third process lock a different file). Where ``fcntl``
    does not exist (Windows) updates are not serialized.
    """
    target = Path(path)
    if fcntl is None:
        yield
        return
    with open(target.with_name(f".{target.name}.lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _new_file_mode() -> int:
    """Permissions of a newly created file under the current umask (mkstemp uses 0600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
