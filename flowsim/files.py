"""Output files written whole or not at all, and serialized updates of a shared file."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from flowsim.errors import STREAM_KINDS, InputError, cannot_create_reason, file_kind
from flowsim.formatting import format_bytes
from flowsim_kernels.progress import deferred_interrupt

try:
    import fcntl
except ImportError:  # Windows: no advisory locks through fcntl
    fcntl = None  # type: ignore[assignment]  # the module or None; `locked` checks which

__all__ = ["hdf5_format", "held_exclusively", "locked", "refuse_foreign", "replaced_atomically"]

#: The first bytes of every HDF5 file (the HDF5 specification's format signature).
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def refuse_foreign(target: Path, expected_format: str, what: str) -> None:
    """Refuse to replace an existing regular file ``target`` that is not one flowsim writes
    as ``what`` (its root ``format`` attribute ``expected_format``): a text file, or an HDF5
    file of other data (another command's output, a user's), is named in one line and left as
    it is, where replacing ``what`` of an earlier run is what re-running does. An empty file
    is taken.

    Raises
    ------
    InputError
        Naming ``target`` and what it holds.
    """
    if not target.is_file() or target.stat().st_size == 0:
        return
    with open(target, "rb") as handle:
        signature = handle.read(len(_HDF5_SIGNATURE))
    if signature != _HDF5_SIGNATURE:
        found = "not an HDF5 file"
    else:
        try:
            format_ = _root_format(target)
        except OSError as err:
            raise InputError(f"{target}: cannot read the existing file to replace it with {what}: {err}") from None
        if format_ == expected_format:
            return
        found = ("an HDF5 file without flowsim's 'format' attribute" if format_ is None
                 else f"an HDF5 file of format {format_!r}")
    raise InputError(f"{target}: exists and is {found}, not {what} flowsim would replace: remove it or name another "
                     "output")


def hdf5_format(path: str | os.PathLike) -> object:
    """The root ``format`` attribute that flowsim writes on each HDF5 file it makes (a trace,
    a sweep's results table, a check history), or None: a file without one, not HDF5, or
    unreadable."""
    try:
        return _root_format(path)
    except (OSError, ValueError):
        return None


def _root_format(path: str | os.PathLike) -> object:
    import h5py  # only where an HDF5 file is there to look at

    with h5py.File(path, "r") as f:
        return f.attrs.get("format")


@contextlib.contextmanager
def replaced_atomically(
    path: str | os.PathLike, *, copy_existing: bool = False, needs_bytes: int = 0
) -> Iterator[str]:
    """Write ``path`` through a temporary file: yields the temporary file's name.

    The temporary file is hidden next to ``path`` (same directory, so the rename below is
    atomic on POSIX and Windows). When the block ends, it is flushed to disk and renamed over
    ``path`` (:func:`os.replace`). If the block raises, Ctrl-C included, the temporary file
    is removed and ``path`` is untouched: a reader sees the old file or the new one, never
    part of one.

    Only a regular file is ever renamed over. A symbolic link is replaced where it points
    (the link stays). An existing character device or FIFO (``/dev/null``, a named pipe) is
    written through: the temporary file goes to the system's temporary directory and, once
    complete, is copied into it. Anything else that is not a regular file (a block device, a
    socket), and a device or FIFO with ``copy_existing``, raise :class:`InputError` before
    anything is written.

    A rename the system refuses (an immutable file, a sticky directory another user owns)
    raises :class:`InputError` naming ``path``, with the temporary file removed.

    ``needs_bytes``, when given, is the most the file can take: if the temporary file's
    file system has less free, :class:`OSError` (``ENOSPC``) is raised before anything is
    written, saying how much is needed and free, and nothing is left behind.

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
    kind = _existing_kind(target)
    if kind is not None:
        if copy_existing or kind not in STREAM_KINDS:
            raise InputError(f"{target}: is {kind}, not a regular file, and is left as it is")
        with _written_through(target, needs_bytes) as tmp_name:
            yield tmp_name
        return
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if not target.parent.is_dir():
        raise InputError(f"{target}: the directory {str(target.parent)!r} does not exist")
    with deferred_interrupt() as interrupted:
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        except OSError as err:  # name the file asked for, not the hidden temporary one
            raise type(err)(err.errno, cannot_create_reason(err), str(target)) from None
        os.close(fd)
        try:
            _check_space(tmp_name, needs_bytes, target)
            if copy_existing and target.exists():
                shutil.copyfile(target, tmp_name)
                shutil.copymode(target, tmp_name)
            else:
                os.chmod(tmp_name, _new_file_mode())
            yield tmp_name
            _fsync(tmp_name)
            if interrupted():
                raise KeyboardInterrupt
            try:
                os.replace(tmp_name, target)
            except OSError as err:  # an immutable file, a directory's sticky bit: name the output
                raise InputError(f"{path}: cannot replace it: {err.strerror or err}") from None
        except BaseException:
            os.unlink(tmp_name)
            raise


def _existing_kind(target: Path) -> str | None:
    """What ``target`` is (:func:`flowsim.errors.file_kind`, links followed) when it exists
    and is not a regular file; None when it is one or does not exist."""
    try:
        mode = target.stat().st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else file_kind(mode)


@contextlib.contextmanager
def _written_through(target: Path, needs_bytes: int) -> Iterator[str]:
    """:func:`replaced_atomically` for a device or FIFO: write a temporary file in the
    system's temporary directory, then copy it into ``target``. The copy runs outside the
    Ctrl-C deferral: a FIFO waits for a reader, and a Ctrl-C must end that wait."""
    with deferred_interrupt() as interrupted:
        fd, tmp_name = tempfile.mkstemp(prefix=f"flowsim-{target.name}.", suffix=".tmp")
        os.close(fd)
        try:
            _check_space(tmp_name, needs_bytes, target)
            yield tmp_name
            if interrupted():
                raise KeyboardInterrupt
        except BaseException:
            os.unlink(tmp_name)
            raise
    try:
        with open(tmp_name, "rb") as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink)
    finally:
        os.unlink(tmp_name)


def _check_space(tmp_name: str, needs_bytes: int, target: Path) -> None:
    """Raise ``OSError(ENOSPC)`` naming ``target`` when the file system of ``tmp_name`` has
    less than ``needs_bytes`` free."""
    if needs_bytes <= 0:
        return
    free = shutil.disk_usage(tmp_name).free
    if needs_bytes > free:
        raise OSError(
            errno.ENOSPC,
            f"not enough free space: writing it needs up to {format_bytes(needs_bytes)}, and "
            f"{os.path.dirname(tmp_name) or '.'} has {format_bytes(free)} free",
            str(target),
        )


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
    with open(_lock_path(target), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def held_exclusively(path: str | os.PathLike, holder: str) -> Iterator[None]:
    """Hold the lock of ``path`` (the one :func:`locked` waits for) while the block runs,
    without waiting: an :class:`InputError` when another process holds it.

    For outputs one process at a time must own (a sweep's table and journal): a second
    ``holder`` ("sweep") is told that another holds it, with that process's id, and does
    nothing. The id is written into the lock file for that message. Where ``fcntl`` does not
    exist (Windows) nothing is locked.
    """
    target = Path(path)
    if fcntl is None:
        yield
        return
    with open(_lock_path(target), "a+") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            pid = lock.read().strip()
            process = f" (process {pid})" if pid.isdigit() else ""
            raise InputError(
                f"{target}: another {holder}{process} holds it and is writing it; wait for that one to end, "
                f"or give another output"
            ) from None
        try:
            lock.truncate(0)
            lock.write(str(os.getpid()))
            lock.flush()
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


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
