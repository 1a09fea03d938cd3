"""Numba kernels behind flowsim: NumPy arrays and scalars in, arrays out.

Nothing here imports :mod:`flowsim`; inputs are assumed already validated. Importing the
package first makes damaged Numba cache entries a cache miss
(:mod:`flowsim_kernels.cache`), before any kernel is loaded from the cache.
"""

from flowsim_kernels.cache import install as _install_cache_repair

_install_cache_repair()
