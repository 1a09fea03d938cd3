"""Damaged entries of Numba's on-disk cache are compiled again, not an error on every run.

Numba reads a cached kernel with :mod:`pickle` and passes on whatever that raises, so a
cache file cut short (a full disk, a killed process, a copy interrupted) gives an
``UnpicklingError`` at every run until someone deletes the cache. Importing this module
(``flowsim_kernels`` does) makes a cache entry that cannot be loaded a cache miss: the
kernel is compiled, a line on stderr says so once per entry, and Numba's own save then
writes a good entry over the damaged one. This applies to every function cached by Numba in
the process, flowsim's or not: a damaged entry is of no use to anyone.
"""

import functools
import sys
from typing import Any

from numba.core import caching

__all__ = ["install"]

_reported: set[str] = set()
_installed = [False]


def _say(entry: str, err: Exception) -> None:
    if entry in _reported:
        return
    _reported.add(entry)
    print(
        f"flowsim: the Numba cache entry {entry} is damaged ({type(err).__name__}: {err}); compiling it again",
        file=sys.stderr,
        flush=True,
    )


def install() -> None:
    """Make damaged cache entries a cache miss (once per process; see the module docstring)."""
    if _installed[0]:
        return
    _installed[0] = True
    load_overload = caching.Cache.load_overload
    load_index = caching.IndexDataCacheFile._load_index

    @functools.wraps(load_overload)
    def load_overload_or_miss(self, sig, target_context):
        try:
            return load_overload(self, sig, target_context)
        except Exception as err:  # a damaged data file: unpickling or rebuilding it failed
            name = getattr(self._py_func, "__qualname__", self._name)
            _say(f"of {name} in {self._cache_path}", err)
            return None

    @functools.wraps(load_index)
    def load_index_or_empty(self):
        try:
            return load_index(self)
        except Exception as err:  # a damaged index: start a new one
            _say(self._index_path, err)
            return {}

    # Replaced on the classes, which every cached dispatcher's cache object uses.
    cache_class: Any = caching.Cache
    index_class: Any = caching.IndexDataCacheFile
    cache_class.load_overload = load_overload_or_miss
    index_class._load_index = load_index_or_empty
