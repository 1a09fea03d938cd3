"""Flow classes (docs/model.md "Flow classes"): repeated link ids count once per listing,
colour refinement against its slow twin, and simulations solved by classes against the
full problem, on hand cases and on collectives over symmetric and broken fabrics."""

from __future__ import annotations

import numpy as np
import pytest

import flowsim
from flowsim.collectives import collective_time
from flowsim.fabrics import build_cluster
from flowsim.failures import apply_failures
from flowsim.routing import Router
from flowsim_kernels.classes import _dense, fold_keys, is_equitable, refine_classes
from reference import equitable_classes_reference, max_min_reference

# --- a flow listed n times on a link counts n times in its load ------------------------------


def test_a_flow_listed_twice_on_a_link_takes_two_shares_of_it():
    # Link of 3e9 B/s; flow 0 lists it twice, flow 1 once: weight sum 2 + 1 = 3, level
    # 3e9 / 3 = 1e9 for each flow; the link carries 2 x 1e9 + 1e9 = 3e9.
    assert flowsim.max_min_rates([[0, 0], [0]], [3e9]) == pytest.approx([1e9, 1e9], rel=1e-12)
    assert max_min_reference([[0, 0], [0]], [3e9]) == pytest.approx([1e9, 1e9], rel=1e-12)
    # Sizes 1e9 at 1e9 B/s each: both finish at 1.0; the link records 3e9 B/s throughout.
    result = flowsim.simulate([[0, 0], [0]], [3e9], [1e9, 1e9], record_links=True)
    assert result.finish_s == pytest.approx([1.0, 1.0], rel=1e-12)
    assert result.link_segments(0)[2] == pytest.approx([3e9], rel=1e-12)


def test_a_repeated_link_in_the_full_and_the_incremental_engine_alike():
    # Link 0 of 4e9 B/s: flow 0 listed twice (size 2e9), flow 1 once (1e9), flow 2 once (1e9,
    # from t = 0.5). Until 0.5: weight sum 2 + 1 = 3, level 4e9/3; left: flow 0 4e9/3, flow 1
    # 1e9/3. Then weight sum 4, level 1e9: flow 1 done after 1/3, at 0.8333; left: flow 0
    # 1e9, flow 2 2e9/3. Then weight sum 3, level 4e9/3: flow 2 done after 0.5, at 1.3333;
    # flow 0 has 1e9/3 left. Alone, weight 2, level 4e9/2 = 2e9: done after 1/6, at 1.5.
    for mode in ("incremental", "full"):
        result = flowsim.simulate([[0, 0], [0], [0]], [4e9], [2e9, 1e9, 1e9], start_s=[0, 0, 0.5], mode=mode)
        assert result.finish_s == pytest.approx([1.5, 0.5 + 1 / 3, 0.5 + 1 / 3 + 0.5], rel=1e-12)


# --- colour refinement ---------------------------------------------------------------------


def _refine(flow_key, link_key, routes, deps, transfers, cyclic=False):
    routes_obj = flowsim.Routes.from_lists(routes, len(link_key))
    lf_indptr, lf_indices = routes_obj.transpose()
    dep_indptr = np.zeros(len(deps) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in deps], out=dep_indptr[1:])
    dep_indices = np.array([d for ds in deps for d in ds], dtype=np.int64)
    flow_class = np.empty(len(routes), dtype=np.int64)
    link_class = np.empty(len(link_key), dtype=np.int64)
    n_fc, n_lc, _ = refine_classes(
        np.array(flow_key, dtype=np.uint64), np.array(link_key, dtype=np.uint64), routes_obj.flow_link_indptr,
        routes_obj.flow_link_indices, lf_indptr, lf_indices, dep_indptr, dep_indices,
        np.array(transfers, dtype=bool), cyclic, len(routes), flow_class, link_class,
    )
    equitable = is_equitable(
        flow_class, link_class, n_fc, n_lc, routes_obj.flow_link_indptr, routes_obj.flow_link_indices, lf_indptr,
        lf_indices, dep_indptr, dep_indices, np.array(transfers, dtype=bool),
    )
    return flow_class.tolist(), link_class.tolist(), equitable


def test_refinement_splits_a_chain_by_depth_and_links_by_their_load():
    # Links 0, 1, 2 alike. Flows 0 and 1 alone on links 0 and 1; flows 2 and 3 on link 2.
    # Flow 4 waits for flow 0, flow 5 for flow 1 (both zero-byte, no links), flow 6 for flow 4.
    routes = [[0], [1], [2], [2], [], [], []]
    deps = [[], [], [], [], [0], [1], [4]]
    transfers = [True, True, True, True, False, False, False]
    flow_key = [7, 7, 7, 7, 9, 9, 9]
    link_key = [1, 1, 1]
    # Link 2 carries two flows, links 0 and 1 one each: link classes {0, 1}, {2}; so flows
    # {0, 1}, {2, 3}; flows 4 and 5 wait for class {0, 1}: alike; flow 6 waits for 4: apart.
    expected = ([0, 0, 1, 1, 2, 2, 3], [0, 0, 1])
    flow_class, link_class, equitable = _refine(flow_key, link_key, routes, deps, transfers)
    assert (flow_class, link_class) == expected
    assert equitable
    assert equitable_classes_reference(flow_key, link_key, routes, deps, transfers) == expected


def test_is_equitable_refuses_classes_that_count_differently():
    # Flow 0 on link 0 alone, flows 1 and 2 on link 1: one class of links is not equitable
    # (link 0 carries one flow of the class, link 1 two).
    routes = flowsim.Routes.from_lists([[0], [1], [1]], 2)
    lf_indptr, lf_indices = routes.transpose()
    no_deps = np.zeros(4, dtype=np.int64), np.empty(0, dtype=np.int64)
    transfers = np.ones(3, dtype=bool)
    args = (routes.flow_link_indptr, routes.flow_link_indices, lf_indptr, lf_indices, *no_deps, transfers)
    assert not is_equitable(np.zeros(3, dtype=np.int64), np.zeros(2, dtype=np.int64), 1, 1, *args)
    assert is_equitable(np.array([0, 1, 1]), np.array([0, 1]), 2, 2, *args)


@pytest.mark.parametrize("seed", range(6))
def test_refinement_matches_its_slow_twin_on_random_dags(seed):
    rng = np.random.default_rng(seed)
    n_flows, n_links = 40, 8
    routes = [sorted(rng.choice(n_links, size=rng.integers(0, 3), replace=False).tolist()) for _ in range(n_flows)]
    deps = [sorted(set(rng.integers(0, f, size=rng.integers(0, 3)).tolist())) if f else [] for f in range(n_flows)]
    transfers = [bool(r) for r in routes]
    flow_key = rng.integers(0, 2, size=n_flows).tolist()
    link_key = rng.integers(0, 2, size=n_links).tolist()
    flow_class, link_class, equitable = _refine(flow_key, link_key, routes, deps, transfers)
    assert equitable
    assert (flow_class, link_class) == equitable_classes_reference(flow_key, link_key, routes, deps, transfers)


def test_cyclic_refinement_carries_a_difference_around_a_ring():
    # Six hops of a ring, each waiting for the one before it (5 -> 0 closes the ring), each
    # on its own link; link 3 is slower. Its hop differs, so does the hop after it, and so
    # on around: every hop is a class of its own, one round per hop it travels, and so is
    # every link (each carries a class of its own).
    routes = [[i] for i in range(6)]
    deps = [[5], [0], [1], [2], [3], [4]]
    link_key = [1, 1, 1, 2, 1, 1]
    flow_class, link_class, equitable = _refine([7] * 6, link_key, routes, deps, [True] * 6, cyclic=True)
    assert equitable
    assert sorted(flow_class) == sorted(link_class) == list(range(6))
    # Links 1 and 4 slower instead: hops three apart are alike, 3 classes.
    flow_class, _, equitable = _refine([7] * 6, [1, 2, 1, 1, 2, 1], routes, deps, [True] * 6, cyclic=True)
    assert equitable
    assert flow_class == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("seed", range(6))
def test_cyclic_refinement_matches_its_slow_twin_on_random_graphs_with_cycles(seed):
    rng = np.random.default_rng(200 + seed)
    n_flows, n_links = 40, 8
    routes = [sorted(rng.choice(n_links, size=rng.integers(0, 3), replace=False).tolist()) for _ in range(n_flows)]
    # Dependencies on any flow, itself included: cycles of every length.
    deps = [sorted(set(rng.integers(0, n_flows, size=rng.integers(0, 3)).tolist())) for _ in range(n_flows)]
    transfers = [bool(r) for r in routes]
    flow_key = rng.integers(0, 2, size=n_flows).tolist()
    link_key = rng.integers(0, 2, size=n_links).tolist()
    flow_class, link_class, equitable = _refine(flow_key, link_key, routes, deps, transfers, cyclic=True)
    assert equitable
    assert (flow_class, link_class) == equitable_classes_reference(flow_key, link_key, routes, deps, transfers)


@pytest.mark.parametrize("seed", range(3))
def test_refinement_is_the_same_whichever_order_flows_are_listed_in(seed):
    # The same random DAG, its flows listed in a random order: dependencies now point
    # forward as well as back, so the refinement sorts the flows first. Each flow keeps its
    # class (numbered by first appearance, so compared as partitions).
    rng = np.random.default_rng(100 + seed)
    n_flows, n_links = 40, 8
    routes = [sorted(rng.choice(n_links, size=rng.integers(0, 3), replace=False).tolist()) for _ in range(n_flows)]
    deps = [sorted(set(rng.integers(0, f, size=rng.integers(0, 3)).tolist())) if f else [] for f in range(n_flows)]
    flow_key = rng.integers(0, 2, size=n_flows).tolist()
    link_key = rng.integers(0, 2, size=n_links).tolist()
    transfers = [bool(r) for r in routes]
    listed = rng.permutation(n_flows)  # position -> original flow
    at = np.argsort(listed)  # original flow -> position
    assert any(at[d] > at[f] for f in range(n_flows) for d in deps[f])
    moved = _refine([flow_key[f] for f in listed], link_key, [routes[f] for f in listed],
                    [sorted(int(at[d]) for d in deps[f]) for f in listed], [transfers[f] for f in listed])
    kept = _refine(flow_key, link_key, routes, deps, transfers)
    assert moved[2] and kept[2] and moved[1] == kept[1]
    pairs = {(kept[0][f], moved[0][int(at[f])]) for f in range(n_flows)}
    assert len(pairs) == len(set(kept[0])) == len(set(moved[0]))  # the same partition


@pytest.mark.parametrize("n_distinct", [1, 31, 32, 33, 5000])
def test_dense_numbers_keys_by_first_appearance_as_a_dict_would(n_distinct):
    # Around and far past the first table's room (64 slots, half full at 32 keys).
    rng = np.random.default_rng(n_distinct)
    pool = rng.integers(0, 2**63, size=n_distinct, dtype=np.uint64)
    keys = pool[rng.integers(0, n_distinct, size=20_000)]
    ids = np.empty(keys.size, dtype=np.int64)
    first: dict[int, int] = {}
    expected = [first.setdefault(int(k), len(first)) for k in keys]
    assert _dense(keys, ids) == len(first)
    assert ids.tolist() == expected


def test_no_flows_solve_by_classes_as_no_classes():
    result = flowsim.simulate([], [1e9, 2e9], [], classes=True)
    assert (result.n_flows, result.n_flow_classes, result.makespan_s) == (0, 0, 0.0)
    np.testing.assert_array_equal(result.link_bytes, [0.0, 0.0])


def test_folded_keys_are_equal_for_equal_rows_and_differ_for_rows_that_differ():
    rng = np.random.default_rng(3)
    table = rng.choice([0.0, 1.0, 2.5, np.inf], size=(2_000, 3))
    keys = np.zeros(table.shape[0], dtype=np.uint64)
    for column in table.T:
        fold_keys(keys, np.ascontiguousarray(column).view(np.uint64))
    rows = [tuple(row) for row in table.tolist()]
    by_row = {}
    for row, key in zip(rows, keys.tolist(), strict=True):
        assert by_row.setdefault(row, key) == key  # equal rows, equal keys
    assert len(set(by_row.values())) == len(by_row) == 64  # 4**3 distinct rows, as many keys
    # The order of the columns counts: (a, b) and (b, a) hash apart.
    swapped = np.zeros(table.shape[0], dtype=np.uint64)
    for column in table.T[::-1]:
        fold_keys(swapped, np.ascontiguousarray(column).view(np.uint64))
    asymmetric = table[:, 0] != table[:, 2]
    assert np.all(swapped[asymmetric] != keys[asymmetric])


# --- simulations by classes equal the full problem -------------------------------------------


def test_symmetric_flows_solve_as_one_class_with_a_repeated_link():
    # Two links of 1e9 B/s, two flows of 1e9 B on each: one flow class, one link class; the
    # class's flow lists the link class twice; every flow at 0.5e9 B/s finishes at 2.0.
    result = flowsim.simulate([[0], [0], [1], [1]], [1e9, 1e9], [1e9] * 4, classes=True, record_links=True)
    assert (result.n_flow_classes, result.n_link_classes) == (1, 1)
    assert result.finish_s == pytest.approx([2.0] * 4, rel=1e-12)
    for link in (0, 1):
        assert result.link_segments(link)[2] == pytest.approx([1e9], rel=1e-12)


def test_the_parking_lot_has_no_symmetry_and_keeps_its_times():
    # docs/model.md case 3: finishes 1.5, 1.0, 2.0; every flow its own class.
    result = flowsim.simulate([[0, 1], [0], [1]], [1e9, 2e9], [1e9, 0.5e9, 3e9], classes=True)
    assert result.finish_s == pytest.approx([1.5, 1.0, 2.0], rel=1e-12)
    assert result.n_flow_classes == 3


@pytest.fixture(scope="module")
def two_dgx():
    return build_cluster("dgx_h100", 2, figure="effective")


@pytest.mark.parametrize(
    ("algorithm", "size", "routing"),
    [
        ("ring", 64e6, "dmodk"),
        ("ring", 1e6, "dmodk"),
        ("tree", 4e6, "ecmp"),
        ("nvls_tree", 256e6, "ecmp"),
    ],
)
def test_a_collective_by_classes_equals_its_full_step_dag(two_dgx, algorithm, size, routing):
    router = Router(two_dgx)
    options = dict(algorithm=algorithm, routing=routing, router=router)
    full = collective_time(two_dgx, "all_reduce", size, classes=False, **options)
    grouped = collective_time(two_dgx, "all_reduce", size, **options)
    np.testing.assert_allclose(grouped.run.result.finish_s, full.run.result.finish_s, rtol=1e-9, atol=0)
    np.testing.assert_allclose(grouped.run.result.ready_s, full.run.result.ready_s, rtol=1e-9, atol=0)
    assert full.flow_classes == len(full.run.workload)
    assert grouped.flow_classes < len(grouped.run.workload) / 4
    assert grouped.solved_over.startswith("classes: ")


def test_an_all_to_all_across_units_is_three_classes_on_infiniband_and_exact():
    # 12 DGX H100 in 3 scalable units of 4: every pair between units crosses the spines. The
    # default routing (D-mod-k on InfiniBand) keeps the 9,120 flows symmetric, 3 classes;
    # ECMP's hashed spine paths keep each apart. By classes the times are the full problem's.
    topology = build_cluster("dgx_h100", 12, figure="nominal", su_size=4)
    router = Router(topology)
    grouped = collective_time(topology, "all_to_all", 4 << 20, router=router)
    full = collective_time(topology, "all_to_all", 4 << 20, router=router, classes=False)
    hashed = collective_time(topology, "all_to_all", 4 << 20, router=router, routing="ecmp")
    assert len(grouped.run.workload) == 96 * 95
    assert grouped.flow_classes <= 3
    assert hashed.flow_classes == len(hashed.run.workload)
    np.testing.assert_allclose(grouped.run.result.finish_s, full.run.result.finish_s, rtol=1e-9, atol=0)


def test_a_failed_nic_makes_classes_finer_and_the_times_stay_exact(two_dgx):
    broken = apply_failures(two_dgx, fail=["n0.nic3"])
    options = dict(algorithm="nvls_tree", routing="ecmp")
    intact = collective_time(two_dgx, "all_reduce", 256e6, **options)
    full = collective_time(broken, "all_reduce", 256e6, classes=False, **options)
    grouped = collective_time(broken, "all_reduce", 256e6, **options)
    np.testing.assert_allclose(grouped.run.result.finish_s, full.run.result.finish_s, rtol=1e-9, atol=0)
    assert intact.flow_classes < grouped.flow_classes < len(grouped.run.workload)


def test_link_rates_by_classes_equal_the_full_problems(two_dgx):
    options = dict(algorithm="ring", routing="dmodk")
    full = collective_time(two_dgx, "all_reduce", 16e6, classes=False, **options)
    w, routes = full.run.workload, full.run.routes
    by_classes = flowsim.simulate(
        routes, two_dgx.link_capacity_Bps, w.size_bytes, latency_s=two_dgx.link_latency_s,
        caps_Bps=w.cap_Bps, depends_on=(w.dep_indptr, w.dep_indices), overhead_s=w.overhead_s,
        record_links=True, classes=True,
    )
    plain = flowsim.simulate(
        routes, two_dgx.link_capacity_Bps, w.size_bytes, latency_s=two_dgx.link_latency_s,
        caps_Bps=w.cap_Bps, depends_on=(w.dep_indptr, w.dep_indices), overhead_s=w.overhead_s,
        record_links=True,
    )
    assert by_classes.n_flow_classes < len(w)
    horizon = plain.makespan_s
    times = np.linspace(0, horizon, 97)[1:-1]
    for link in np.flatnonzero(plain.link_bytes)[:40]:
        for result in (plain, by_classes):
            start, end, rate = result.link_segments(int(link))
            assert np.all(np.diff(start) >= 0)
        a = _rate_at(plain, int(link), times)
        b = _rate_at(by_classes, int(link), times)
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-3)


def _rate_at(result, link, times):
    start, end, rate = result.link_segments(link)
    out = np.zeros_like(times)
    for s, e, r in zip(start, end, rate, strict=True):
        out[(times >= s) & (times < e)] += r
    return out
