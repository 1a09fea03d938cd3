"""Exceptions raised for bad user input, and the input readers that raise them."""

import codecs
import errno
import inspect
import io
import numbers
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeGuard

import numpy as np


class InputError(ValueError):
    """Input that flowsim cannot model; the message names the offending item."""


class FieldError(InputError):
    """An :class:`InputError` about one field of a record, :attr:`field` its attribute's name,
    so that a reader of a file that describes the record can name the file's own key."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@contextmanager
def blame(field: str) -> Iterator[None]:
    """Raise an :class:`InputError` raised inside as a :class:`FieldError` about ``field``;
    one about a field already keeps its own."""
    try:
        yield
    except FieldError:
        raise
    except InputError as err:
        raise FieldError(field, str(err)) from None


#: The file name that stands for standard input on the command line, as Unix tools take it.
STDIN = "-"


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for messages: "a regular file", "a FIFO
    (named pipe)", "a directory", ..."""
    kinds = (
        (stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike, what: str, *, piped: bool = False) -> io.BufferedReader:
    """``path`` opened for reading in binary; an :class:`InputError` naming the file unless
    it is a regular file (a link to one is fine).

    A FIFO, a device or a socket is refused saying which it is, without waiting: the file is
    opened non-blocking (opening a FIFO otherwise waits for a writer) and judged by what was
    opened, so it cannot change between the check and the read. With ``piped`` (a command
    that reads ``what`` from standard input as :data:`STDIN`) the message says so: a process
    substitution such as ``<(ssh host cat log)`` is a FIFO.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise InputError(f"{path}: cannot read {what}: {err.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            # A directory's files are named one by one (DIR/*.log); other kinds are read piped.
            pipe = ("; name a file in it instead" if stat.S_ISDIR(mode) else
                    f"; pipe it in and name it '{STDIN}' instead") if piped else ""
            raise InputError(f"{path}: cannot read {what}: it is {file_kind(mode)}, not a regular file{pipe}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text_file(path, what: str) -> str:
    """The UTF-8 text of ``path``; an :class:`InputError` naming the file if it cannot be read
    or is not a regular file (:func:`open_regular`).

    ``what`` says what the file was meant to be ("the scenario", "the sweep spec", ...). A
    leading byte order mark (Excel's "CSV UTF-8" and some Windows editors write one) is
    dropped, so that it does not become part of the first column name or TOML key.
    """
    with io.TextIOWrapper(open_regular(path, what), encoding="utf-8-sig") as handle:
        try:
            return handle.read()
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: cannot read {what}: {err}") from None


# Bytes after a UTF-16 byte order mark looked at to tell UTF-16 text from other bytes.
_UTF16_PROBE = 256


def decoded_output(data: bytes) -> str:
    """A program's output saved as bytes, as text: UTF-16 where a UTF-16 byte order mark
    starts it and ASCII follows (Windows PowerShell 5's ``>`` writes ``nvidia-smi topo -m >
    topo.txt`` so: every other byte zero), else UTF-8. Bytes that do not decode are replaced
    (a pasted log keeps its lines) and a leading byte order mark is dropped."""
    for bom, high in ((codecs.BOM_UTF16_LE, 3), (codecs.BOM_UTF16_BE, 2)):
        zeros = data[high:_UTF16_PROBE:2]
        if data.startswith(bom) and zeros and zeros.count(0) >= 0.9 * len(zeros):
            return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def read_output_file(path: str | os.PathLike, what: str, *, piped: bool = False) -> str:
    """A program's output saved in ``path`` (nccl-tests', ``nvidia-smi topo -m``'s), as text
    (:func:`decoded_output`); an :class:`InputError` naming the file if it cannot be read or
    is not a regular file (:func:`open_regular`, ``piped`` as there)."""
    with open_regular(path, what, piped=piped) as handle:
        try:
            return decoded_output(handle.read())
        except OSError as err:
            raise InputError(f"{path}: cannot read {what}: {err.strerror}") from None


def read_stdin(what: str) -> str:
    """Standard input read to its end as text: ``what`` piped in (``nvidia-smi topo -m |
    flowsim system import - ...``), decoded as :func:`decoded_output` does; an
    :class:`InputError` where there is no standard input to read."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"'{STDIN}' names standard input, and this process has none to read {what} from")
    try:
        if sys.stdin.isatty():  # typed or pasted: say how to end it
            print(f"flowsim: reading {what} from the terminal: paste it, then press Ctrl-D", file=sys.stderr)
        data = stream.read()
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read {what} from standard input: {err}") from None
    return decoded_output(data)


def unstorable_text(text: str) -> str | None:
    """Why an HDF5 string (a trace's, a sweep table's) cannot hold ``text``, or None when it
    can."""
    if "\0" in text:
        return f"it has a NUL character (at character {text.index(chr(0))}), where HDF5 strings end"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"it has a lone surrogate (at character {err.start}), which UTF-8 cannot encode"
    return None


def path_argument(value: object, what: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`; an :class:`InputError` naming ``what`` unless
    it is a path (a string or path-like), as a Python caller's mistake would otherwise be a
    TypeError from deep inside."""
    if not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{what} must be a file path (a str or os.PathLike), got {value!r} ({type(value).__name__})")
    return Path(value)


def relative_tolerance(name: str, value: object) -> float:
    """``value`` as a float; an :class:`InputError` naming ``name`` unless it is a real number
    (not a bool) in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise InputError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def whole_number(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an int; an :class:`InputError` naming ``name`` unless it is an integer
    (Python's or NumPy's, not a bool) of at least ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < minimum:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
        raise InputError(f"{name} must be {kind}, got {value!r}")
    return int(value)


def is_real(value: object) -> bool:
    """Whether ``value`` is a real number (Python's or NumPy's), not a bool or a string."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def flag(name: str, value: object) -> bool:
    """``value`` as a bool; an :class:`InputError` naming ``name`` unless it is one (Python's
    or NumPy's): a string such as ``"no"`` or ``"false"`` is truthy, so it would mean yes."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_options(options: Mapping[str, object], allowed: Iterable[str], what: str,
                  required: Iterable[str] = ()) -> None:
    """An :class:`InputError` naming the first key of ``options`` that is not in ``allowed``
    (a misspelt option would otherwise be a ``TypeError`` deep inside, or ignored), or the
    first of ``required`` missing; ``what`` says whose options they are."""
    allowed = tuple(allowed)
    for key in options:
        if key not in allowed:
            valid = ", ".join(sorted(allowed)) or "none"
            raise InputError(f"{what}: unknown option {key!r}; valid ones: {valid}")
    for key in required:
        if key not in options:
            raise InputError(f"{what}: option {key!r} is required")


def keyword_options(fn: Callable[..., object], skip: int = 0) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(allowed, required)``: the parameters of ``fn`` a caller may pass by keyword, past
    its first ``skip`` parameters, and those of them without a default."""
    params = list(inspect.signature(fn).parameters.values())[skip:]
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = [p for p in params if p.kind in kinds]
    return tuple(p.name for p in named), tuple(p.name for p in named if p.default is inspect.Parameter.empty)


def item_label(kind: str, i: int, names: Sequence[str] | None) -> str:
    """How errors name item ``i`` of a ``kind`` ("flow", "link"): by its name when there
    are names, else by its index."""
    return f"{kind} {names[i]!r}" if names is not None else f"{kind} {i}"


def first_repeat(values: Sequence[object]) -> tuple[int, int] | None:
    """Positions ``(i, j)``, ``i < j``, of the first value that repeats an earlier one (the
    smallest such ``j``); None when all differ."""
    if len(set(values)) == len(values):  # the usual case, in one pass of C
        return None
    first: dict[object, int] = {}
    for j, value in enumerate(values):
        i = first.setdefault(value, j)
        if i != j:
            return i, j
    return None


#: Kinds of existing file an output is written through to rather than replaced: a stream
#: such as /dev/null, a terminal or a named pipe another program reads.
STREAM_KINDS = ("a character device", "a FIFO (named pipe)")


def output_file(
    path: str | os.PathLike, what: str, *, inputs: Iterable[str | os.PathLike] = (), streams: bool = True
) -> Path:
    """``path`` as a :class:`~pathlib.Path` flowsim can write ``what`` to; an
    :class:`InputError` naming it otherwise.

    Checked before any work is done, so that a run does not fail only when it has finished:
    the path names a file (not a directory), its directory exists and takes new files (the
    temporary file :func:`flowsim.files.replaced_atomically` renames into place), and it is
    none of ``inputs`` (writing there would replace a file the run reads). An existing file
    that is not a regular file is never replaced: with ``streams`` a character device or a
    FIFO (:data:`STREAM_KINDS`, ``-o /dev/null``) is written through to; anything else, and
    any of them without ``streams`` (an output that is read back, such as a history), is
    refused saying what it is. A symbolic link is written where it points.
    """
    target = Path(path)
    try:
        if str(path) == "" or target.is_dir():
            raise InputError(f"{str(path)!r}: {what} must be a file name, not a directory")
        if target.exists():
            kind = file_kind(target.stat().st_mode)
            if kind != "a regular file":
                if streams and kind in STREAM_KINDS:
                    return target
                must = "a regular file" if not streams else "a regular file, a character device or a FIFO"
                raise InputError(f"{target}: is {kind}, not a regular file: {what} must be {must} (left as it is)")
        parent = Path(os.path.realpath(target)).parent if target.is_symlink() else target.parent
        if not parent.is_dir():
            raise InputError(f"{target}: the directory {str(parent)!r} does not exist")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{target}: the directory {str(parent)!r} is not writable")
        _check_creatable(target, parent, what)
        for source in inputs:
            if _same_file(target, Path(source)):
                raise InputError(f"{target}: {what} would replace the input file {source}")
    except OSError as err:  # a name too long, a loop of links, ...
        raise InputError(f"{target}: cannot write {what} there: {err.strerror}") from None
    return target


def cannot_create_reason(err: OSError) -> str:
    """Why a file could not be created in an existing directory, for messages: a file system
    such as /proc answers "No such file or directory", which would send the user looking for
    a missing directory."""
    if err.errno == errno.ENOENT:
        return "the file system there does not allow new files"
    return err.strerror or str(err)


def _check_creatable(target: Path, parent: Path, what: str) -> None:
    """Create and remove a hidden file in ``parent``, as the write will: permissions are not
    all (a read-only mount, /proc, /sys refuse files that ``os.access`` allows)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
    except OSError as err:
        raise InputError(
            f"{target}: cannot create {what} in the directory {str(parent)!r}: {cannot_create_reason(err)}"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _same_file(a: Path, b: Path) -> bool:
    """Are ``a`` and ``b`` one file: the same existing file (links included), or the same
    path to a file not made yet (an output that another output of the run creates)?"""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def image_file(path: str | os.PathLike, what: str, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """``path`` as an image file matplotlib can save ``what`` to: one that passes
    :func:`output_file` and ends in an image format matplotlib writes (without a suffix it
    would add ``.png`` and save to another file than the one named); an :class:`InputError`
    naming it otherwise. Needs matplotlib: callers say how to install it first.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    target = output_file(path, what, inputs=inputs)
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = target.suffix.removeprefix(".").lower()
    if suffix not in formats:
        why = f"{target.suffix!r} is not an image format matplotlib writes" if suffix else "no extension names a format"
        raise InputError(
            f"{target}: {what} needs a file name ending in an image format; {why}; use one of {', '.join(formats)}"
        )
    if suffix == "pgf":
        # matplotlib writes PGF by running LaTeX, and fails only once the figure is drawn.
        from matplotlib import rcParams

        texsystem = rcParams["pgf.texsystem"]
        if shutil.which(texsystem) is None:
            raise InputError(
                f"{target}: matplotlib writes .pgf with {texsystem}, which is not on PATH; use .pdf or .svg"
            )
    return target


def float_array(values, what: str) -> np.ndarray:
    """``values`` as a fresh C-contiguous float64 array, of any shape; an
    :class:`InputError` naming ``what`` if they are not real numbers in a regular (not
    ragged) array.

    Strings (``"1e9"``), bools, complex numbers, mappings and sets are refused rather than
    converted: NumPy would read ``"1e9"`` as a number and ``True`` as 1, so a mistake in a
    caller's data would pass for a value.
    """
    if not isinstance(values, np.ndarray) or values.dtype.kind == "O":
        bad = _first_non_real(values)
        if bad is not None:
            raise InputError(f"{what} must be real numbers, got {bad!r} ({type(bad).__name__})")
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # ragged
        raise InputError(f"{what} must be numbers: {exc}") from None
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{what} must be real numbers, got an array of {arr.dtype}")
    return np.array(arr, dtype=np.float64, order="C")


#: Types of the numbers builders put in lists by the million (NumPy's scalars from arrays'
#: items): a list of only these needs no walk.
_PLAIN_NUMBERS = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})


def _first_non_real(values: object) -> object | None:
    """The first item of ``values`` (nested sequences walked) that is not a real number
    (bools excluded); None when all are."""
    if isinstance(values, (list, tuple)) and set(map(type, values)) <= _PLAIN_NUMBERS:
        return None  # a flat list of plain numbers, as builders give millions of: one C-speed pass
    stack = [values]
    while stack:
        item = stack.pop()
        if type(item) is float or type(item) is int:
            continue
        if isinstance(item, (bool, np.bool_)):
            return item
        if isinstance(item, numbers.Real):
            continue
        if hasattr(item, "__array__") and not isinstance(item, np.ndarray):
            item = np.asarray(item)  # a pandas column, an array of another library
        if isinstance(item, np.ndarray):
            if item.dtype.kind in "fiu":
                continue
            if item.dtype.kind != "O":
                return item.flat[0] if item.size else item
            if item.ndim == 0:
                return item.item()
        elif isinstance(item, (str, bytes)) or not isinstance(item, Sequence):
            return item
        stack.extend(reversed(list(item)))
    return None


def is_frozen(values: object, dtype: type) -> TypeGuard[np.ndarray]:
    """Whether ``values`` is a C-contiguous ``dtype`` array that owns its data and is
    read-only: one nobody can change, so that checked inputs may keep it rather than a copy."""
    return (isinstance(values, np.ndarray) and values.dtype == dtype and values.flags.c_contiguous
            and not values.flags.writeable and values.base is None)


def float_column(
    values: Sequence[float] | np.ndarray | None,
    n: int,
    default: float,
    what: str,
    kind: str = "flow",
    *,
    scalar: bool = False,
) -> np.ndarray:
    """``values`` as a fresh C-contiguous float64 array of one value per ``kind`` (``n``),
    or ``values`` itself where it is one already and frozen: read-only and owning its data
    (a :class:`~flowsim.workload.Workload`'s columns), so that no copy can differ from it.

    ``None`` gives ``default`` for every item; with ``scalar=True`` one number is repeated
    too. Only the type and shape are checked: callers judge the values. Errors name ``what``.
    """
    if values is None:
        return np.full(n, default, dtype=np.float64)
    if is_frozen(values, np.float64) and values.shape == (n,):
        return values
    arr = float_array(values, what)
    if scalar and arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise InputError(f"{what} must have one value per {kind} ({n}), got shape {arr.shape}")
    return arr
