"""flowsim: a flow-level network model of GPU clusters.

Run a scenario file into an HDF5 trace, inspect or plot a trace, list the hardware presets,
solve a scenario's rates all at once, sweep a scenario's parameters, time a collective over
message sizes the way nccl-tests does, or check nccl-tests measurements against the model.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from flowsim._version import __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``flowsim`` command; returns the exit status."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Outputs are written whole or not at all (a temporary file renamed into place), so
        # an interrupted command leaves what the user had; no traceback for a Ctrl-C, also
        # while the commands (NumPy, Numba, h5py) are still being imported.
        print("flowsim: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    from flowsim.commands import add_parsers
    from flowsim.errors import InputError
    from flowsim_kernels.progress import note_compiles

    parser = argparse.ArgumentParser(prog="flowsim", description=__doc__)
    parser.add_argument("--version", action="version", version=f"flowsim {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_parsers(subparsers)
    args = parser.parse_args(argv)
    try:
        with note_compiles(None if getattr(args, "quiet", False) else sys.stderr):
            return args.func(args)
    except (InputError, ImportError) as err:
        print(f"flowsim: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``flowsim inspect trace.h5 | head``): not a failure. Point
        # stdout at /dev/null so that flushing it at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError as err:
        # An allocation the checks before the run could not foresee (numpy's says how much it
        # asked for): one line, no traceback; outputs are written whole or not at all.
        detail = f" ({err})" if str(err) else ""
        print(f"flowsim: error: out of memory{detail}; make the run smaller (fewer nodes, ranks, sizes, "
              "channels or flows)", file=sys.stderr)
        return 1
    except OSError as err:
        # The system refused a read or write the checks before the run could not foresee
        # (a full disk, a file system that refuses the name): say which file, no traceback.
        where = f"{err.filename}: " if err.filename else ""
        print(f"flowsim: error: {where}{err.strerror or err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
