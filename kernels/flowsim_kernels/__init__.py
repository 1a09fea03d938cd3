"""Numba kernels behind flowsim: NumPy arrays and scalars in, arrays out.

Nothing here imports :mod:`flowsim`; inputs are assumed already validated.
"""
