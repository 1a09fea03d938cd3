"""Many max-min fair-share instances over one set of routes, solved on all CPU cores."""

import numpy as np
from numba import njit, prange

from flowsim_kernels.maxmin import max_min_fair


@njit(cache=True, parallel=True)
def max_min_fair_batch(
    flow_link_indptr,
    flow_link_indices,
    link_flow_indptr,
    link_flow_indices,
    capacity_Bps,
    weight,
    cap_Bps,
    tie_rel_tol,
    rate_Bps,
):
    """Weighted max-min fair rates of a batch of instances that share their routes.

    Parameters
    ----------
    flow_link_indptr : int64[n_flows + 1]
    flow_link_indices : int64[n_incidences]
        Flow -> link CSR: the links each flow crosses, the same in every instance. Not mutated.
    link_flow_indptr : int64[n_links + 1]
    link_flow_indices : int64[n_incidences]
        Its transpose: the flows crossing each link. Not mutated.
    capacity_Bps : float64[n_instances or 1, n_links]
        Link capacities (B/s) of each instance, finite and > 0; one row serves every
        instance. C-contiguous. Not mutated.
    weight : float64[n_instances or 1, n_flows]
        Flow weights of each instance, finite and > 0; one row serves every instance.
        C-contiguous. Not mutated.
    cap_Bps : float64[n_instances or 1, n_flows]
        Flow rate caps (B/s) of each instance, > 0; ``inf`` for none; one row serves every
        instance. A flow with no link must have a finite cap. C-contiguous. Not mutated.
    tie_rel_tol : float
        Links (and caps) whose fair level is within this relative distance of the lowest one
        are frozen in the same round; in [0, 1).
    rate_Bps : float64[n_instances, n_flows]
        Output: each flow's rate (B/s) in each instance. C-contiguous. Mutated.

    Raises
    ------
    ValueError
        ``capacity_Bps``, ``weight`` or ``cap_Bps`` has neither one row per instance nor one
        row, or rows of the wrong length; or ``tie_rel_tol`` is not in [0, 1).

    Notes
    -----
    Instances are independent: each one is solved by the serial kernel
    :func:`flowsim_kernels.maxmin.max_min_fair` (progressive filling over lazily ordered link
    levels), the instances spread over Numba's threads by ``prange``. Every instance reads
    only its own rows and writes only its own row of ``rate_Bps``, so the result is
    bit-for-bit that of the serial kernel, whatever the number of threads or the schedule.

    Routes are shared because that is the batch a sweep produces (one topology and traffic
    pattern, many capacities, weights or caps) and it keeps the routes and their transpose
    in memory once. Instances with different routes are separate batches.

    Cost: the serial kernel's per instance, O(I + N_L log N_L + R log R + F_c log F_c) for I
    incidences, N_L links carrying flows, R re-queued links and F_c capped flows, divided
    among the threads; each instance allocates its own O(n_flows + n_links) work arrays.
    """
    # Rows are read unchecked below: a missing one would be memory past the array's end. A
    # negative or NaN tolerance would keep the serial kernel from ever freezing a link.
    if not 0.0 <= tie_rel_tol < 1.0:
        raise ValueError("tie_rel_tol must be in [0, 1)")
    n_instances, n_flows = rate_Bps.shape
    if not _fits(capacity_Bps, n_instances, link_flow_indptr.shape[0] - 1):
        raise ValueError("capacity_Bps must have one row per instance, or one for all, of one value per link")
    if not _fits(weight, n_instances, n_flows):
        raise ValueError("weight must have one row per instance, or one for all, of one value per flow")
    if not _fits(cap_Bps, n_instances, n_flows):
        raise ValueError("cap_Bps must have one row per instance, or one for all, of one value per flow")
    for i in prange(n_instances):
        max_min_fair(
            flow_link_indptr,
            flow_link_indices,
            link_flow_indptr,
            link_flow_indices,
            capacity_Bps[_row(capacity_Bps, i)],
            weight[_row(weight, i)],
            cap_Bps[_row(cap_Bps, i)],
            tie_rel_tol,
            rate_Bps[i],
        )


@njit(cache=True, inline="always")
def _row(values, i):
    """Row of instance ``i`` in per-instance ``values``: its own, or the one row shared by all."""
    return np.int64(i) if values.shape[0] > 1 else np.int64(0)  # prange's index may be unsigned


@njit(cache=True, inline="always")
def _fits(values, n_instances, n_columns):
    """Whether per-instance ``values`` has one row per instance, or one for all, of ``n_columns``."""
    return values.shape[1] == n_columns and (values.shape[0] == n_instances or values.shape[0] == 1)
