"""Batched max-min solving on CPU cores: against the serial kernel, the slow twin and the
hand-computed cases of docs/model.md."""

import math
import re
import subprocess
import sys

import numba
import numpy as np
import pytest

from flowsim import InputError, Routes, batched, max_min_rates
from flowsim.batched import BackendUnavailable, BatchProblem, available_backends, resolve_backend, solve_batch
from flowsim.fairshare import FairShareProblem
from instances import parking_lot_kernel_arguments, random_batch
from reference import max_min_reference

G = 1e9  # docs/model.md's hand-computed cases are in units of 1e9 bytes and 1e9 B/s


# --- docs/model.md's hand-computed cases, one per instance ---------------------------------

def test_spec_parking_lot_with_link_b_varied():
    # Case 3: A (1) carries f1, f2; B carries f1, f3. B's capacity only changes what f3 gets
    # once A has frozen f1 and f2 at 0.5.
    rates = solve_batch([["A", "B"], ["A"], ["B"]], [[1 * G, 2 * G], [1 * G, 3 * G]], link_names=["A", "B"])
    np.testing.assert_allclose(rates, [[0.5 * G, 0.5 * G, 1.5 * G], [0.5 * G, 0.5 * G, 2.5 * G]], rtol=1e-15)


def test_spec_cap_and_weight_cases_side_by_side():
    # Case 6 (cap 0.3 on f1) as instance 0, case 7 (weights 1 and 3) as instance 1.
    rates = solve_batch(
        [[0], [0]], [[1 * G], [1 * G]], weights=[[1, 1], [1, 3]], caps_Bps=[[0.3 * G, math.inf], [math.inf] * 2]
    )
    np.testing.assert_allclose(rates, [[0.3 * G, 0.7 * G], [0.25 * G, 0.75 * G]], rtol=1e-15)


# --- against the serial kernel and the slow twin -----------------------------------------------

@pytest.mark.parametrize(
    "n_instances, n_flows, n_links, max_hops",
    [(1, 10, 3, 2), (7, 100, 20, 4), (16, 500, 60, 6), (3, 3000, 200, 6)],
    ids=lambda v: str(v),
)
def test_cpu_batch_is_the_serial_kernel_bit_for_bit(rng, n_instances, n_flows, n_links, max_hops):
    routes, capacity, weight, cap = random_batch(rng, n_instances, n_flows, n_links, max_hops)
    rates = solve_batch(routes, capacity, weight, cap)
    assert rates.shape == (n_instances, n_flows) and rates.dtype == np.float64
    for i in range(n_instances):
        np.testing.assert_array_equal(rates[i], max_min_rates(routes, capacity[i], weight[i], cap[i]))


@pytest.mark.parametrize("n_flows, n_links, max_hops", [(12, 4, 3), (150, 25, 5)], ids=lambda v: str(v))
def test_cpu_batch_matches_twin(rng, n_flows, n_links, max_hops):
    routes, capacity, weight, cap = random_batch(rng, 5, n_flows, n_links, max_hops)
    rates = solve_batch(routes, capacity, weight, cap)
    for i in range(5):
        np.testing.assert_allclose(rates[i], max_min_reference(routes, capacity[i], weight[i], cap[i]), rtol=1e-9)


def test_cpu_batch_matches_twin_with_many_ties(rng):
    # Integer capacities and unit weights: many links saturate at exactly the same level.
    routes = [rng.choice(10, size=rng.integers(1, 4), replace=False).tolist() for _ in range(300)]
    capacity = rng.integers(1, 4, (4, 10)).astype(float) * 40.0
    rates = solve_batch(routes, capacity)
    for i in range(4):
        np.testing.assert_allclose(rates[i], max_min_reference(routes, capacity[i]), rtol=1e-9)


def test_shared_weights_and_caps_are_repeated_rows(rng):
    routes, capacity, weight, cap = random_batch(rng, 6, 80, 12, 3)
    shared = solve_batch(routes, capacity, weight[0], cap[0])
    repeated = solve_batch(routes, capacity, np.tile(weight[0], (6, 1)), np.tile(cap[0], (6, 1)))
    np.testing.assert_array_equal(shared, repeated)
    defaults = solve_batch(routes, capacity)
    np.testing.assert_array_equal(defaults, solve_batch(routes, capacity, np.ones(80), np.full(80, np.inf)))


# --- determinism ---------------------------------------------------------------------------------

def test_same_answer_twice_and_for_any_thread_count(rng):
    routes, capacity, weight, cap = random_batch(rng, 24, 400, 40, 5)
    problem = BatchProblem.build(routes, capacity, weight, cap)
    before = numba.get_num_threads()
    try:
        runs = []
        for threads in (numba.config.NUMBA_NUM_THREADS, 1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            runs.append(problem.solve())
    finally:
        numba.set_num_threads(before)
    for run in runs[1:]:
        np.testing.assert_array_equal(run, runs[0])


# --- shapes and corner cases -------------------------------------------------------------------

def test_problem_holds_checked_arrays_and_is_reusable():
    problem = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0], [2.0, 4.0]], weights=[1.0, 1.0, 2.0])
    assert (problem.n_instances, problem.n_flows, problem.n_links) == (2, 3, 2)
    for arr in (problem.capacity_Bps, problem.weight, problem.cap_Bps):
        assert arr.dtype == np.float64 and not arr.flags.writeable
    assert problem.capacity_Bps.flags.c_contiguous
    # Weights and caps given once are one row broadcast over the instances.
    assert problem.weight.shape == problem.cap_Bps.shape == (2, 3)
    assert problem.weight.strides == problem.cap_Bps.strides == (0, 8)
    own = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0], [2.0, 4.0]], weights=[[1.0, 1.0, 2.0]] * 2)
    assert own.weight.flags.c_contiguous and own.weight.strides == (24, 8)
    np.testing.assert_array_equal(own.solve(), problem.solve())
    np.testing.assert_array_equal(problem.solve(), problem.solve())
    np.testing.assert_allclose(problem.solve()[1], [1.0, 1.0, 3.0])


def test_from_checked_arranges_instances_checked_one_by_one():
    routes, capacity = [[0, 1], [0], [1]], np.array([[1.0, 2.0], [2.0, 4.0]])
    first = FairShareProblem.build(routes, capacity[0], [1.0, 1.0, 2.0], [math.inf, 0.5, math.inf])
    batch = BatchProblem.from_checked(first, capacity, first.weight, np.array([[math.inf, 0.5, math.inf]] * 2))
    assert batch.weight.strides == (0, 8) and batch.cap_Bps.flags.c_contiguous
    assert not (batch.capacity_Bps.flags.writeable or batch.weight.flags.writeable or batch.cap_Bps.flags.writeable)
    built = BatchProblem.build(routes, capacity, [1.0, 1.0, 2.0], [[math.inf, 0.5, math.inf]] * 2)
    np.testing.assert_array_equal(batch.solve(), built.solve())
    # Instance 1: B (4) shared by f0 and f2 (weight 2) at level 4/3, f1 capped at 0.5 on A.
    np.testing.assert_allclose(batch.solve()[1], [4 / 3, 0.5, 8 / 3])


def test_routes_object_empty_routes_and_idle_links():
    # f0 crosses link 3, f1 none (cap 2.5), f2 links 0 and 3; links 1 and 2 carry nothing.
    # Instance 1: link 0 (2) limits f2, and f0 takes the rest of link 3 (8).
    routes = Routes.from_csr(np.array([0, 1, 1, 3]), np.array([3, 0, 3]), n_links=4)
    rates = solve_batch(routes, [[6.0, 1.0, 1.0, 4.0], [2.0, 1.0, 1.0, 8.0]], caps_Bps=[math.inf, 2.5, math.inf])
    np.testing.assert_array_equal(rates, [[2.0, 2.5, 2.0], [6.0, 2.5, 2.0]])


def test_no_flows():
    assert solve_batch([], [[1.0], [2.0]]).shape == (2, 0)


def test_no_links_only_caps():
    rates = solve_batch([[], []], np.ones((2, 0)), caps_Bps=[[3.0, 4.0], [5.0, 6.0]])
    assert rates.tolist() == [[3.0, 4.0], [5.0, 6.0]]


# --- bad input: errors name the instance and the culprit ------------------------------------------

@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(capacity_Bps=[[1.0, 2.0], [1.0, 0.0]]), "instance 1: link 1 has capacity 0.0"),
        (dict(capacity_Bps=[[1.0, 2.0], [math.nan, 2.0], [1.0, -3.0]]), "instance 1: link 0 has capacity nan"),
        (
            dict(capacity_Bps=[[1.0, 2.0], [1.0, math.inf]], link_names=["a", "b"]),
            "instance 1: link 'b' has capacity inf",
        ),
        (dict(capacity_Bps=[[1.0, 0.0], [1.0, 0.0]]), "link 1 has capacity 0.0"),
        (dict(capacity_Bps=[1.0, 2.0]), "capacity_Bps must be one row of link capacities per instance"),
        (dict(capacity_Bps=np.ones((0, 2))), "got shape (0, 2)"),
        (dict(capacity_Bps=[[1.0, 2.0]], link_names=["a"]), "1 link names for 2 capacities"),
        (dict(weights=[[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]]), "instance 1: flow 1 has weight 0.0"),
        (dict(weights=[1.0, -1.0, 1.0]), "flow 1 has weight -1.0"),
        (dict(weights=[[1.0, 1.0, 1.0]]), "weights has 1 rows for 2 instances"),
        (dict(weights=[[1.0, 1.0], [1.0, 1.0]]), "weights must have one value per flow (3)"),
        (dict(weights=np.ones((2, 3, 1))), "weights must be [n_flows] or [n_instances, n_flows]"),
        (dict(caps_Bps=[[1.0, 1.0, 1.0], [1.0, 1.0, math.nan]]), "instance 1: flow 2 has caps_Bps NaN"),
        (
            dict(caps_Bps=[[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]], flow_names=["x", "y", "z"]),
            "instance 1: flow 'x' has rate cap 0.0",
        ),
        (
            dict(routes=[[0], [], [1]], caps_Bps=[[1.0, 1.0, 1.0], [1.0, math.inf, 1.0]]),
            "instance 1: flow 1 has an empty route and no rate cap",
        ),
        (dict(routes=[[0], [], [1]]), "flow 1 has an empty route and no rate cap"),
        (dict(routes=[[0], [2], [1]]), "flow 1 routes over unknown link 2"),
        (dict(routes=Routes.from_lists([[0], [1]], 3)), "routes are over 3 links but capacity_Bps has 2"),
        (dict(weights=[[1.0, 1.0, 1.0], [1.0, 1e-300, 1.0]]), "instance 1: flow 1 has weight 1e-300"),
        # Only the second instance's capacities take flow 1's level out of range.
        (
            dict(capacity_Bps=[[1.0, 2.0], [1e296, 1.0]], weights=[1.0, 1e-5, 1.0]),
            "instance 1: flow 1 has weight 1e-05: with rates up to 1e+296 B/s",
        ),
        # Instance 0's capacities with instance 1's weights would be out of range, but each
        # instance is judged on its own: instance 2 has both.
        (
            dict(
                capacity_Bps=[[1e296, 1e296], [1.0, 1.0], [1e296, 1.0]],
                weights=[[1.0, 1.0, 1.0], [1.0, 1e-5, 1.0], [1.0, 1e-5, 1.0]],
            ),
            "instance 2: flow 1 has weight 1e-05: with rates up to 1e+296 B/s",
        ),
        (dict(weights=[[1.0, 1.0, 1.0], [1.0, 1.0]]), "weights must be numbers: setting an array element"),
        (dict(weights=["a", "b", "c"]), "weights must be real numbers, got 'a' (str)"),
        (dict(caps_Bps=[[1.0, 1.0, 1.0], [1.0]]), "caps_Bps must be numbers: setting an array element"),
        (dict(capacity_Bps=[[1.0, 2.0], [3.0]]), "capacity_Bps must be numbers: setting an array element"),
        (dict(capacity_Bps=[["1", "x"]]), "capacity_Bps must be real numbers, got '1' (str)"),
        (dict(routes=[[0], [5]], flow_names=["a"]), "1 flow names for 2 flows"),
    ],
)
def test_bad_input_names_the_culprit(kwargs, message):
    args = dict(routes=[[0, 1], [0], [1]], capacity_Bps=[[1.0, 2.0], [3.0, 4.0]]) | kwargs
    with pytest.raises(InputError, match=re.escape(message)) as err:
        solve_batch(**args)
    if not message.startswith("instance"):
        assert not str(err.value).startswith("instance")


def test_instances_are_judged_on_their_own_extremes():
    # Instance 0's large capacities (or cap) with instance 1's small weight would take a level
    # out of float64's range, but no instance has both.
    routes, weights = [[0, 1], [0], [1]], [[1.0, 1.0, 1.0], [1.0, 1e-5, 1.0]]
    for capacity, caps, instance_0 in [
        ([[1e296, 1e296], [1.0, 1.0]], None, [0.5e296] * 3),
        ([[1e296, 1e296], [1.0, 1.0]], [[1e296, math.inf, math.inf], [math.inf] * 3], [0.5e296] * 3),
    ]:
        rates = solve_batch(routes, capacity, weights, caps)
        np.testing.assert_allclose(rates, [instance_0, [0.5, 0.5, 0.5]], rtol=1e-9)
        for i in range(2):
            np.testing.assert_array_equal(
                rates[i], max_min_rates(routes, capacity[i], weights[i], None if caps is None else caps[i])
            )


@pytest.mark.parametrize("tie_rel_tol", [-1e-12, math.nan, math.inf, 1.0, "1e-12", None, True])
def test_tie_rel_tol_must_be_a_number_in_0_1(tie_rel_tol):
    # A negative or NaN tolerance used to make the CPU kernel spin forever.
    problem = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0]])
    with pytest.raises(InputError, match=re.escape(f"tie_rel_tol must be a number in [0, 1), got {tie_rel_tol!r}")):
        problem.solve(tie_rel_tol=tie_rel_tol)


def test_tie_rel_tol_takes_any_real_number_in_0_1():
    problem = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0]])
    for tie_rel_tol in (0, 0.0, np.float32(1e-6), np.float64(0.5)):
        np.testing.assert_array_equal(problem.solve(tie_rel_tol=tie_rel_tol), [[0.5, 0.5, 1.5]])


@pytest.mark.parametrize(
    "arrays, message",
    [
        (dict(weight=np.ones((3, 3))), "weight has shape (3, 3); 2 instances of 3 flows need (2, 3)"),
        (dict(cap_Bps=np.ones((2, 4))), "cap_Bps has shape (2, 4); 2 instances of 3 flows need (2, 3)"),
        (dict(weight=np.ones(2)), "weight has shape (2,); 2 instances of 3 flows need (2, 3), or a row of 3 shared"),
        (dict(capacity_Bps=np.ones(2)), "capacity_Bps has shape (2,); a batch over 2 links needs"),
        (dict(capacity_Bps=np.ones((2, 3))), "capacity_Bps has shape (2, 3); a batch over 2 links needs"),
        (dict(capacity_Bps=np.ones((0, 2))), "capacity_Bps has shape (0, 2)"),
    ],
)
def test_from_checked_refuses_arrays_of_the_wrong_shape(arrays, message):
    # The kernels read rows unchecked: too few rows read past the end, and used to hang.
    problem = FairShareProblem.build([[0, 1], [0], [1]], [1.0, 2.0])
    args = dict(capacity_Bps=np.ones((2, 2)), weight=np.ones((2, 3)), cap_Bps=np.full((2, 3), np.inf)) | arrays
    with pytest.raises(InputError, match=re.escape(message)):
        BatchProblem.from_checked(problem, **args)


def test_from_checked_holds_a_single_row_once():
    problem = FairShareProblem.build([[0, 1], [0], [1]], [1.0, 2.0])
    batch = BatchProblem.from_checked(problem, np.array([[1.0, 2.0], [2.0, 4.0]]), np.ones((1, 3)), problem.cap_Bps)
    assert batch.weight.shape == (2, 3) and batch.weight.strides == (0, 8)
    np.testing.assert_array_equal(batch.solve(), [[0.5, 0.5, 1.5], [1.0, 1.0, 3.0]])


def test_batch_problem_checks_shapes_however_built():
    good = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0], [2.0, 4.0]])
    fields = dict(vars(good))
    with pytest.raises(InputError, match=re.escape("weight has shape (1, 3); 2 instances of 3 flows need (2, 3)")):
        BatchProblem(**fields | dict(weight=good.weight[:1]))
    with pytest.raises(InputError, match="link_flow_indptr and link_flow_indices have shapes"):
        BatchProblem(**fields | dict(link_flow_indptr=good.link_flow_indptr[:-1]))


def test_cpu_kernel_refuses_missing_rows_and_bad_tolerances():
    from flowsim_kernels.batched import max_min_fair_batch

    routes, (capacity, weight, cap), rate = parking_lot_kernel_arguments(3)
    for bad, message in [
        ((capacity[:2], weight, cap), "capacity_Bps must have one row per instance"),
        ((capacity, weight[:2], cap), "weight must have one row per instance"),
        ((capacity, weight, cap[:, :2]), "cap_Bps must have one row per instance"),
    ]:
        with pytest.raises(ValueError, match=message):
            max_min_fair_batch(*routes, *bad, 1e-12, rate)
    for tie_rel_tol in (-1e-12, math.nan, 1.0):
        with pytest.raises(ValueError, match=re.escape("tie_rel_tol must be in [0, 1)")):
            max_min_fair_batch(*routes, capacity, weight, cap, tie_rel_tol, rate)
    max_min_fair_batch(*routes, capacity[:1], weight[:1], cap, 0.0, rate)
    np.testing.assert_array_equal(rate, [[0.5, 0.5, 1.5]] * 3)


# --- backends ------------------------------------------------------------------------------------

def test_unknown_backend():
    with pytest.raises(InputError, match="backend must be one of 'cpu', 'cuda', 'auto'; got 'gpu'"):
        solve_batch([[0]], [[1.0]], backend="gpu")


def test_cpu_backend_needs_nothing(monkeypatch):
    monkeypatch.setattr(batched, "_numba_cuda_installed", lambda: False)
    assert resolve_backend("cpu") == "cpu"
    assert available_backends() == ("cpu",)


def test_cuda_without_numba_cuda_says_what_to_install(monkeypatch):
    monkeypatch.setattr(batched, "_numba_cuda_installed", lambda: False)
    with pytest.raises(BackendUnavailable, match=re.escape("pip install 'flowsim[cuda]'")):
        solve_batch([[0]], [[1.0]], backend="cuda")
    assert resolve_backend("auto") == "cpu"
    assert solve_batch([[0]], [[1.0]], backend="auto").tolist() == [[1.0]]


def test_cuda_without_a_gpu_says_no_device_was_found(monkeypatch):
    monkeypatch.setattr(batched, "_numba_cuda_installed", lambda: True)
    monkeypatch.setattr(batched, "_cuda_device_found", lambda: False)
    with pytest.raises(BackendUnavailable, match="found no CUDA GPU"):
        resolve_backend("cuda")
    assert resolve_backend("auto") == "cpu"
    assert available_backends() == ("cpu",)


def test_backend_unavailable_is_an_input_error():
    assert issubclass(BackendUnavailable, InputError)


@pytest.mark.skipif("cuda" in available_backends(), reason="a CUDA device (or the simulator) is usable here")
def test_cuda_here_fails_with_a_clear_reason():
    with pytest.raises(BackendUnavailable, match=r"pip install 'flowsim\[cuda\]'|found no CUDA GPU"):
        solve_batch([[0]], [[1.0]], backend="cuda")


def test_cpu_path_never_imports_the_cuda_target():
    # The package must import and run without numba-cuda: the CPU path must not touch it.
    code = (
        "import sys; from flowsim.batched import solve_batch; "
        "solve_batch([[0]], [[1.0]], backend='cpu'); "
        "print(sorted(m for m in sys.modules if m.startswith(('numba.cuda', 'numba_cuda', 'flowsim_kernels.cuda'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_instance_with_rates_too_far_apart_is_refused_naming_it():
    # Issue 30: each instance is judged on its own extremes (docs/model.md "Supported range").
    with pytest.raises(InputError, match=re.escape(
        "instance 1: link 0 has capacity 1e+09 B/s and link 1 has capacity 100 B/s, 1e+07 times less"
    )):
        solve_batch([[0, 1], [0], [1]], [[1e9, 1e8], [1e9, 1e2], [1.0, 1.0]])
    with pytest.raises(InputError, match=re.escape("instance 2: flow 0 has weight 10000000.0 and flow 1 1.0, 1e+07 times less")):
        solve_batch([[0, 1], [0], [1]], [[1.0, 1.0]] * 3, [[1.0] * 3, [1e6, 1.0, 1.0], [1e7, 1.0, 1.0]])
