"""The max-min fair-share kernel against docs/model.md's hand-computed cases, its slow twin and
invariants."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowsim
from flowsim import FairShareProblem, InputError, Routes, max_min_rates
from reference import max_min_reference

G = 1e9  # docs/model.md's hand-computed cases are in units of 1e9 bytes and 1e9 B/s


# --- docs/model.md "Hand-computed cases" as instantaneous allocations ---------------------

def test_spec_case1_one_flow_gets_the_link():
    assert max_min_rates([[0]], [1 * G]).tolist() == [1 * G]


def test_spec_case2_two_flows_split_the_link():
    assert max_min_rates([[0], [0]], [1 * G]).tolist() == [0.5 * G, 0.5 * G]


def test_spec_case3_parking_lot():
    # A (cap 1) carries f1, f2; B (cap 2) carries f1, f3. A saturates first at level 0.5,
    # then f3 takes what B has left: 2 - 0.5 = 1.5.
    rates = max_min_rates([["A", "B"], ["A"], ["B"]], [1 * G, 2 * G], link_names=["A", "B"])
    np.testing.assert_allclose(rates, [0.5 * G, 0.5 * G, 1.5 * G], rtol=1e-15)


def test_spec_case3_after_f2_leaves():
    # f1 and f3 share B (cap 2) at 1 each; A is no longer a bottleneck.
    np.testing.assert_allclose(max_min_rates([[0, 1], [1]], [1 * G, 2 * G]), [1 * G, 1 * G], rtol=1e-15)


def test_spec_case6_cap():
    rates = max_min_rates([[0], [0]], [1 * G], caps_Bps=[0.3 * G, math.inf])
    np.testing.assert_allclose(rates, [0.3 * G, 0.7 * G], rtol=1e-15)


def test_spec_case7_weights():
    rates = max_min_rates([[0], [0]], [1 * G], weights=[1, 3])
    np.testing.assert_allclose(rates, [0.25 * G, 0.75 * G], rtol=1e-15)


def test_links_saturating_at_the_same_level_freeze_together():
    # Two independent links both saturate at level 1; a flow over both gets 1 as well.
    rates = max_min_rates([[0], [1], [0, 1]], [2.0, 2.0])
    np.testing.assert_allclose(rates, [1.0, 1.0, 1.0])


def test_weights_far_apart_keep_their_digits():
    # Link 0 (capacity 1) carries a flow of weight 1e3, held to 1e-6 by link 1, and one of
    # weight 1e-3, which gets the rest. Taking 1e3 back out of the running weight sum 1e3 +
    # 1e-3 leaves 1e-3 to about 1e-10 relative: the fill must sum the weight left afresh, or
    # the second flow gets too little and link 0 is left short of saturation.
    rates = max_min_rates([[0, 1], [0]], [1.0, 1e-6], weights=[1e3, 1e-3])
    np.testing.assert_allclose(rates, [1e-6, 1.0 - 1e-6], rtol=1e-13)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        # Weights 1e6 and 1e-6 on one link, the heavy flow capped a relative 1e-12 above its
        # share: the light flow's rate is a difference of numbers 1e12 apart.
        (
            dict(routes=[[0], [0]], capacity_Bps=[1e9], weights=[1e6, 1e-6], caps_Bps=[1e9, math.inf]),
            "flow 0 has weight 1000000.0 and flow 1 1e-06, 1e+12 times less; flowsim takes weights at most "
            '1e+06 apart (docs/model.md "Supported range")',
        ),
        (
            dict(routes=[["a", "b"], ["b"]], capacity_Bps=[1e15, 1e8], link_names=["a", "b"]),
            "link 'a' has capacity 1e+15 B/s and link 'b' has capacity 1e+08 B/s, 1e+07 times less; "
            'flowsim takes capacities and caps at most 1e+06 apart (docs/model.md "Supported range")',
        ),
        (
            dict(routes=[[0], [0]], capacity_Bps=[1e9], caps_Bps=[math.inf, 1e2], flow_names=["x", "y"]),
            "link 0 has capacity 1e+09 B/s and flow 'y' has rate cap 100 B/s, 1e+07 times less",
        ),
    ],
)
def test_weights_or_rates_too_far_apart_for_float64_are_refused_naming_both(kwargs, message):
    # Issue 30: weights 1e11 apart loaded links over capacity, 1e16 apart divided by zero.
    with pytest.raises(InputError, match=re.escape(message)):
        max_min_rates(**kwargs)
    with pytest.raises(InputError, match=re.escape(message)):
        flowsim.simulate(size_bytes=[1.0] * len(kwargs["routes"]), **kwargs)


def test_weights_and_rates_at_the_supported_ratios_are_taken():
    # A cap level a relative 1e-6 above the link's, weights 1e6 apart (the limit): the light
    # flow gets the level times its weight.
    level = 1e9 / (1e3 + 1e-3)
    rates = max_min_rates([[0], [0]], [1e9], weights=[1e3, 1e-3], caps_Bps=[1e9 * 1.000001, 1.1e3])
    np.testing.assert_allclose(rates, [level * 1e3, level * 1e-3], rtol=1e-13)


@pytest.mark.parametrize("tol", [-1e-12, math.nan, math.inf, 1.0, True, "1e-12"])
def test_a_tie_tolerance_outside_0_to_1_is_an_input_error(tol):
    # A negative or NaN tolerance kept the fill from ever freezing a link: it hung.
    problem = FairShareProblem.build([[0, 1], [0], [1]], [1.0, 2.0])
    with pytest.raises(InputError, match=r"tie_rel_tol must be a number in \[0, 1\), got"):
        problem.solve(tie_rel_tol=tol)


@pytest.mark.parametrize(("capacity", "weight", "message"), [
    ([], [1.0], "routes are over 1 links but capacity_Bps has 0"),
    ([2.0], [1.0, 1.0], r"weights must have one value per flow \(1\)"),
    ([-2.0], [1.0], "capacity"),
])
def test_a_problem_constructed_directly_is_checked(capacity, weight, message):
    # FairShareProblem's constructor handed its arrays to the kernel unchecked: a short
    # capacity array read past its end (a rate of 6.9e-310) and a bad transpose crashed Python.
    routes = Routes.from_csr(np.array([0, 1]), np.array([0]), 1)
    with pytest.raises(InputError, match=message):
        FairShareProblem(routes, np.array(capacity), np.array(weight), np.array([math.inf]))


def test_a_problem_constructed_directly_transposes_its_routes():
    problem = FairShareProblem(Routes.from_csr(np.array([0, 2, 3]), np.array([0, 1, 1]), 2),
                               np.array([1.0, 3.0]), np.array([1.0, 1.0]), np.array([math.inf, math.inf]))
    np.testing.assert_allclose(problem.solve(), [1.0, 2.0])
    np.testing.assert_allclose(problem.with_capacities([2.0, 3.0]).solve(), [1.5, 1.5])
    np.testing.assert_allclose(problem.solve(), [1.0, 2.0])


def test_empty_route_is_limited_by_its_cap_only():
    np.testing.assert_allclose(max_min_rates([[], [0]], [5.0], caps_Bps=[2.0, math.inf]), [2.0, 5.0])


def test_csr_input_and_returned_rates_are_float64():
    routes = Routes.from_csr(np.array([0, 2, 3]), np.array([0, 1, 1]), n_links=2)
    rates = max_min_rates(routes, [1.0, 2.0])
    assert rates.dtype == np.float64
    np.testing.assert_allclose(rates, [1.0, 1.0])


# --- degenerate inputs ---------------------------------------------------------------------

def test_one_link_one_hundred_thousand_flows():
    n = 100_000
    routes = Routes.from_csr(np.arange(n + 1), np.zeros(n, dtype=np.int64), n_links=1)
    rates = max_min_rates(routes, [400e9])
    assert np.all(rates == 400e9 / n)


def test_all_flows_capped_below_capacity():
    caps = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(max_min_rates([[0], [0], [0, 1]], [100.0, 100.0], caps_Bps=caps), caps)


def test_flows_alone_on_their_links_get_their_narrowest_link():
    rates = max_min_rates([[0, 1], [2], [3, 4, 5]], [5.0, 3.0, 7.0, 9.0, 2.0, 4.0])
    np.testing.assert_array_equal(rates, [3.0, 7.0, 2.0])


def test_links_without_flows_are_ignored():
    rates = max_min_rates([[3]], [1.0, 2.0, 3.0, 4.0])
    assert rates.tolist() == [4.0]


def test_no_flows():
    assert max_min_rates([], [1.0]).shape == (0,)


def test_problem_is_reusable_with_other_capacities():
    problem = FairShareProblem.build([[0, 1], [0], [1]], [1.0, 2.0])
    np.testing.assert_allclose(problem.solve(), [0.5, 0.5, 1.5])
    np.testing.assert_allclose(problem.with_capacities([2.0, 4.0]).solve(), [1.0, 1.0, 3.0])


# --- bad input: clear errors naming the offending item --------------------------------------

@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(routes=[[0], [7]], capacity_Bps=[1.0]), "flow 1 routes over unknown link 7"),
        (dict(routes=[[0], ["nvl9"]], capacity_Bps=[1.0], link_names=["nvl0"]), "unknown link 'nvl9'"),
        (dict(routes=[[0], []], capacity_Bps=[1.0]), "flow 1 has an empty route and no rate cap"),
        (dict(routes=[[0]], capacity_Bps=[0.0]), "link 0 has capacity 0.0"),
        (dict(routes=[[0]], capacity_Bps=[-1.0]), "link 0 has capacity -1.0"),
        (dict(routes=[[1]], capacity_Bps=[1.0, math.inf], link_names=["a", "b"]), "link 'b' has capacity inf"),
        (dict(routes=[[0]], capacity_Bps=[math.nan]), "link 0 has capacity nan"),
        (dict(routes=[[0], [0]], capacity_Bps=[1.0], weights=[1.0, 0.0]), "flow 1 has weight 0.0"),
        (dict(routes=[[0], [0]], capacity_Bps=[1.0], weights=[1.0, math.nan]), "flow 1 has weights NaN"),
        (dict(routes=[[0], [0]], capacity_Bps=[1.0], caps_Bps=[math.nan, 1.0]), "flow 0 has caps_Bps NaN"),
        (dict(routes=[[0]], capacity_Bps=[1.0], caps_Bps=[0.0]), "flow 0 has rate cap 0.0"),
        (dict(routes=[[0]], capacity_Bps=[1.0], weights=[1.0, 2.0]), "one value per flow"),
        (dict(routes=[[0], [True]], capacity_Bps=[1.0, 1.0]), "link ids must be integers or names"),
        (
            dict(routes=[[0], [0]], capacity_Bps=[1.0], weights=[1.0, -2.0], flow_names=["ar.r0", "ar.r1"]),
            "flow 'ar.r1' has weight -2.0",
        ),
        (dict(routes=[[0]], capacity_Bps=[1.0], flow_names=[]), "0 flow names for 1 flows"),
        (dict(routes=[[0], None], capacity_Bps=[1.0]), "flow 1 has route None; a route is a sequence of links"),
        (dict(routes=[0], capacity_Bps=[1.0]), "flow 0 has route 0; a route is a sequence of links"),
        (
            dict(routes=["nvl0"], capacity_Bps=[1.0], link_names=["nvl0"]),
            "flow 0 has route 'nvl0'; a route is a sequence of links",
        ),
        (dict(routes=([0] for _ in range(2)), capacity_Bps=[1.0]), "routes must be a sequence with one route per flow"),
        # Weights whose levels (rate / weight) or sums leave float64 gave wrong rates silently.
        (dict(routes=[[0]], capacity_Bps=[1e9], weights=[1e-300]), "flow 0 has weight 1e-300: with rates up to 1e+09 B/s"),
        (
            dict(routes=[[0]], capacity_Bps=[1e9], weights=[1e-292], caps_Bps=[1e12]),
            "flow 0 has weight 1e-292: with rates up to 1e+12 B/s",
        ),
        (dict(routes=[[0], [0]], capacity_Bps=[1e9], weights=[1e308, 1e308]), "the flows' weights add up to inf"),
    ],
)
def test_bad_input_names_the_culprit(kwargs, message):
    with pytest.raises(InputError, match=re.escape(message)):
        max_min_rates(**kwargs)


def test_flows_without_links_get_their_caps():
    np.testing.assert_array_equal(max_min_rates([[], []], [], caps_Bps=[3.0, 4.0], weights=[1.0, 2.0]), [3.0, 4.0])


def test_weights_only_count_relative_to_each_other_over_float64s_range():
    # Down to the limits checked above: scaled weights give the same rates.
    routes, capacity = [[0, 1], [0], [1], [1]], [1e9, 3e9]
    expected = max_min_rates(routes, capacity, weights=[1.0, 2.0, 1.0, 4.0])
    for scale in (1e-280, 1e280):
        scaled = max_min_rates(routes, capacity, weights=np.array([1.0, 2.0, 1.0, 4.0]) * scale)
        np.testing.assert_allclose(scaled, expected, rtol=1e-12)


def test_bad_csr_names_the_flow():
    with pytest.raises(InputError, match="flow 1 routes over unknown link 5"):
        Routes.from_csr(np.array([0, 1, 2]), np.array([0, 5]), n_links=2)
    with pytest.raises(InputError, match="decreases at flow 1"):
        Routes.from_csr(np.array([0, 2, 1, 2]), np.array([0, 1]), n_links=2)
    with pytest.raises(InputError, match="ends at 3"):
        Routes.from_csr(np.array([0, 3]), np.array([0, 1]), n_links=2)


@pytest.mark.parametrize(
    "routes, message",
    [
        # array("q") takes bools as 0 and 1, and NumPy would take floats and digit strings
        # as numbers: each must still be refused, and named with its flow.
        ([[1], [0, 1], [0, False]], "flow 2: link ids must be integers or names, got False"),
        ([(1,), (True, 0)], "flow 1: link ids must be integers or names, got True"),
        ([[0], [1.0]], "flow 1: link ids must be integers or names, got 1.0"),
        ([[0], [np.float64(1.0)]], "flow 1: link ids must be integers or names, got np.float64(1.0)"),
        ([[0], [np.True_]], "flow 1: link ids must be integers or names, got np.True_"),
        ([[0], ["1"]], "flow 1 routes over unknown link '1'"),
        ([[0], [None]], "flow 1: link ids must be integers or names, got None"),
        ([[0], [2**70]], f"flow 1 routes over unknown link {2**70} (links are 0..1)"),
        ([[0, 1], [1, -1]], "flow 1 routes over unknown link -1 (links are 0..1)"),
        # The first wrong link in flow order is the one named.
        ([[0], [2], [True]], "flow 1 routes over unknown link 2"),
        ([[False], [2]], "flow 0: link ids must be integers or names, got False"),
    ],
)
def test_bad_links_in_lists_are_named_with_their_flow(routes, message):
    with pytest.raises(InputError, match=re.escape(message)):
        Routes.from_lists(routes, n_links=2)


def test_lists_tuples_and_numpy_ids_give_the_csr_arrays(rng):
    # Ragged random routes, links 0 and 1 (the values a bool would take) and the last link
    # included, as lists, tuples and NumPy integers: the CSR arrays written out by hand.
    n_links = 7
    lengths = rng.integers(0, 5, size=200)
    links = rng.integers(0, n_links, size=int(lengths.sum()))
    links[:3] = [0, 1, n_links - 1]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    as_lists = [[int(x) for x in links[a:b]] for a, b in zip(indptr[:-1], indptr[1:])]
    for routes in (as_lists, [tuple(r) for r in as_lists], [links[a:b] for a, b in zip(indptr[:-1], indptr[1:])],
                   [[np.int32(x) for x in r] for r in as_lists]):
        built = Routes.from_lists(routes, n_links)
        np.testing.assert_array_equal(built.flow_link_indptr, indptr)
        np.testing.assert_array_equal(built.flow_link_indices, links)
        assert built.flow_link_indices.dtype == np.int64 and not built.flow_link_indices.flags.writeable
    empty = Routes.from_lists([], n_links)
    assert empty.flow_link_indptr.tolist() == [0] and empty.flow_link_indices.shape == (0,)
    names = [f"l{i}" for i in range(n_links)]
    mixed = [[names[x] if k % 2 else x for k, x in enumerate(r)] for r in as_lists]
    built = Routes.from_lists(mixed, n_links, {name: i for i, name in enumerate(names)})
    np.testing.assert_array_equal(built.flow_link_indices, links)


def test_input_error_is_a_value_error():
    assert issubclass(flowsim.InputError, ValueError)


# --- seeded random instances against the slow twin -------------------------------------------

def random_instance(rng, n_flows, n_links, max_hops, p_capped=0.2, weighted=True):
    routes = [
        rng.choice(n_links, size=rng.integers(1, max_hops + 1), replace=False).tolist()
        for _ in range(n_flows)
    ]
    capacity = rng.uniform(1.0, 100.0, n_links)
    weight = rng.choice([1.0, 2.0, 0.5, 3.0], n_flows) if weighted else np.ones(n_flows)
    cap = np.where(rng.random(n_flows) < p_capped, rng.uniform(0.01, 20.0, n_flows), np.inf)
    return routes, capacity, weight, cap


@pytest.mark.parametrize(
    "n_flows, n_links, max_hops",
    [(10, 3, 2), (100, 20, 4), (500, 60, 6), (3000, 200, 6)],
    ids=lambda v: str(v),
)
def test_matches_twin_on_random_instances(rng, n_flows, n_links, max_hops):
    routes, capacity, weight, cap = random_instance(rng, n_flows, n_links, max_hops)
    expected = max_min_reference(routes, capacity, weight, cap)
    got = max_min_rates(routes, capacity, weight, cap)
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def test_matches_twin_with_many_ties(rng):
    # Integer capacities and unit weights make many links saturate at exactly the same level.
    routes = [rng.choice(10, size=rng.integers(1, 4), replace=False).tolist() for _ in range(400)]
    capacity = rng.integers(1, 4, 10).astype(float) * 40.0
    np.testing.assert_allclose(max_min_rates(routes, capacity), max_min_reference(routes, capacity), rtol=1e-9)


# --- properties (Hypothesis) -------------------------------------------------------------------

@st.composite
def instances(draw):
    n_links = draw(st.integers(1, 8))
    n_flows = draw(st.integers(1, 25))
    routes = [
        draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True))
        for _ in range(n_flows)
    ]
    capacity = draw(st.lists(st.floats(0.1, 1000.0), min_size=n_links, max_size=n_links))
    weight = draw(st.lists(st.floats(0.1, 10.0), min_size=n_flows, max_size=n_flows))
    cap = draw(
        st.lists(st.one_of(st.just(math.inf), st.floats(0.01, 500.0)), min_size=n_flows, max_size=n_flows)
    )
    return routes, np.array(capacity), np.array(weight), np.array(cap)


def link_loads(routes, rates, n_links):
    load = np.zeros(n_links)
    for route, r in zip(routes, rates):
        load[route] += r
    return load


@settings(max_examples=200, deadline=None)
@given(instances())
def test_feasible_and_every_uncapped_flow_has_a_bottleneck(instance):
    routes, capacity, weight, cap = instance
    rates = max_min_rates(routes, capacity, weight, cap)
    load = link_loads(routes, rates, len(capacity))
    assert np.all(rates > 0)
    assert np.all(load <= capacity * (1 + 1e-9))
    assert np.all(rates <= cap * (1 + 1e-12))
    level = rates / weight
    for f, route in enumerate(routes):
        if rates[f] >= cap[f] * (1 - 1e-9):
            continue
        bottlenecks = [
            link
            for link in route
            if load[link] >= capacity[link] * (1 - 1e-9)
            and all(level[f] >= level[g] * (1 - 1e-9) for g, r in enumerate(routes) if link in r)
        ]
        assert bottlenecks, f"flow {f} is below its cap and has no bottleneck link"


@settings(max_examples=100, deadline=None)
@given(instances(), st.randoms(use_true_random=False))
def test_relabelling_flows_and_links_permutes_rates(instance, rnd):
    routes, capacity, weight, cap = instance
    n_flows, n_links = len(routes), len(capacity)
    flow_perm = list(range(n_flows))
    link_perm = list(range(n_links))
    rnd.shuffle(flow_perm)
    rnd.shuffle(link_perm)
    new_id = {old: new for new, old in enumerate(link_perm)}
    routes2 = [[new_id[link] for link in routes[f]] for f in flow_perm]
    rates = max_min_rates(routes, capacity, weight, cap)
    rates2 = max_min_rates(routes2, capacity[link_perm], weight[flow_perm], cap[flow_perm])
    np.testing.assert_allclose(rates2, rates[flow_perm], rtol=1e-9)


@settings(max_examples=100, deadline=None)
@given(instances(), st.floats(1e-3, 1e3))
def test_scaling_capacities_and_caps_scales_rates(instance, scale):
    routes, capacity, weight, cap = instance
    rates = max_min_rates(routes, capacity, weight, cap)
    scaled = max_min_rates(routes, capacity * scale, weight, cap * scale)
    np.testing.assert_allclose(scaled, rates * scale, rtol=1e-9)


@settings(max_examples=100, deadline=None)
@given(instances())
def test_matches_twin_on_hypothesis_instances(instance):
    routes, capacity, weight, cap = instance
    np.testing.assert_allclose(
        max_min_rates(routes, capacity, weight, cap), max_min_reference(routes, capacity, weight, cap), rtol=1e-9
    )


@settings(max_examples=300, deadline=None)
@given(instances(), st.data())
def test_a_flow_leaving_at_level_r_moves_no_flow_below_r(instance, data):
    # What the event engine's partial re-solve rests on: when a flow at level r (rate /
    # weight) leaves, every flow below r keeps its rate. None of its links saturates below r
    # (it would have frozen there), so without it the filling below r runs as before. Read
    # backwards, a flow that arrives and settles at level r moves no flow below r. Checked
    # on the textbook twin, so that it does not rest on the kernels it justifies.
    routes, capacity, weight, cap = instance
    leaving = data.draw(st.integers(0, len(routes) - 1))
    before = np.asarray(max_min_reference(routes, capacity, weight, cap))
    r = before[leaving] / weight[leaving]
    stay = np.flatnonzero(np.arange(len(routes)) != leaving)
    after = np.asarray(max_min_reference([routes[g] for g in stay], capacity, weight[stay], cap[stay]))
    below = before[stay] / weight[stay] < r * (1 - 1e-9)
    np.testing.assert_allclose(after[below], before[stay][below], rtol=1e-9)


def test_a_flow_leaving_moves_flows_at_or_above_its_level():
    # The bound is tight: in the parking lot f2 leaves A at level 0.5, and f1 at that level
    # rises (to 1) while f3 above it drops (to 1).
    after = np.asarray(max_min_reference([[0, 1], [1]], [1.0, 2.0]))
    np.testing.assert_allclose(max_min_reference([[0, 1], [0], [1]], [1.0, 2.0]), [0.5, 0.5, 1.5])
    np.testing.assert_allclose(after, [1.0, 1.0])


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 33, 100, 257])
def test_sort_pairs_is_a_stable_sort_in_place(rng, n):
    # The fill's own sort (no allocation): runs of 16 by insertion, then merges through the
    # scratch space. Few distinct keys, so stability shows.
    from flowsim_kernels.maxmin import _sort_pairs

    lo, spare = 3, 3 + n + 2
    keys = np.full(spare + n + 1, -7.0)
    items = np.full(spare + n + 1, -7, dtype=np.int64)
    keys[lo:lo + n] = rng.integers(0, 5, n).astype(np.float64)
    items[lo:lo + n] = np.arange(n)
    expected = np.argsort(keys[lo:lo + n], kind="stable")
    _sort_pairs(keys, items, lo, n, spare)
    np.testing.assert_array_equal(items[lo:lo + n], expected)
    assert np.all(np.diff(keys[lo:lo + n]) >= 0)
    assert np.all(keys[:lo] == -7.0) and np.all(keys[lo + n:spare] == -7.0) and keys[-1] == -7.0

