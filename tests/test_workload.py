"""Workload.build's dependencies: the one-pass path for integer indices against the checks
flow by flow (its twin: the same lists given as NumPy integers take that path), and the
errors naming the flow either way."""

import numpy as np
import pytest

from flowsim.errors import InputError
from flowsim.workload import Workload


def _build(deps):
    n = len(deps)
    return Workload.build([f"f{i}" for i in range(n)], ["a"] * n, ["b"] * n, [1.0] * n, depends_on=deps)


@pytest.mark.parametrize("seed", range(5))
def test_integer_dependencies_equal_those_checked_flow_by_flow(seed):
    rng = np.random.default_rng(seed)
    n = 400
    deps = [sorted(set(rng.integers(0, i, size=rng.integers(0, 4)).tolist())) if i else [] for i in range(n)]
    fast = _build(deps)
    slow = _build([[np.int64(d) for d in row] for row in deps])  # not plain ints: flow by flow
    assert np.array_equal(fast.dep_indptr, slow.dep_indptr) and np.array_equal(fast.dep_indices, slow.dep_indices)
    assert fast.dep_indptr[-1] == sum(map(len, deps))
    assert [fast.dependencies(i).tolist() for i in range(n)] == deps
    assert not fast.dep_indices.flags.writeable and not fast.dep_indptr.flags.writeable


@pytest.mark.parametrize(("deps", "message"), [
    ([[], [2]], "flow 'f1' depends on unknown flow 2 (flows are 0..1)"),
    ([[], [-1]], "flow 'f1' depends on unknown flow -1 (flows are 0..1)"),
    ([[], [1]], "flow 'f1' depends on itself"),
    ([[], [True]], "flow 'f1' depends on True; name a flow or give its index (an integer)"),
    ([[], ["f9"]], "flow 'f1' depends on unknown flow 'f9'"),
])
def test_bad_dependencies_name_the_flow(deps, message):
    pattern = "^" + message.replace("(", r"\(").replace(")", r"\)") + "$"
    with pytest.raises(InputError, match=pattern):
        _build(deps)
    if not any(isinstance(d, (bool, str)) for row in deps for d in row):  # CSR holds indices only
        with pytest.raises(InputError, match=pattern):
            _build_csr(deps)


def _build_csr(deps):
    n = len(deps)
    indptr = np.cumsum([0] + [len(row) for row in deps])
    indices = np.array([d for row in deps for d in row], dtype=np.int64)
    return Workload.build([f"f{i}" for i in range(n)], ["a"] * n, ["b"] * n, [1.0] * n,
                          dependency_csr=(indptr, indices))


@pytest.mark.parametrize("seed", range(3))
def test_csr_dependencies_equal_the_lists(seed):
    rng = np.random.default_rng(seed)
    n = 300
    deps = [sorted(set(rng.integers(0, i, size=rng.integers(0, 4)).tolist())) if i else [] for i in range(n)]
    lists, csr = _build(deps), _build_csr(deps)
    assert np.array_equal(lists.dep_indptr, csr.dep_indptr) and np.array_equal(lists.dep_indices, csr.dep_indices)
    assert not csr.dep_indices.flags.writeable and not csr.dep_indptr.flags.writeable


@pytest.mark.parametrize(("indptr", "indices", "message"), [
    ([0, 0], [], r"dependency_csr: indptr has shape \(2,\) for 3 flows"),
    ([0, 0, 1, 0], [0], "dependency_csr: indptr must rise from 0 to 1"),
    ([0, 0, 2, 1], [0], "dependency_csr: indptr must rise from 0 to 1"),
])
def test_a_malformed_csr_is_refused(indptr, indices, message):
    with pytest.raises(InputError, match=message):
        Workload.build(["a", "b", "c"], ["x"] * 3, ["y"] * 3, [1.0] * 3,
                       dependency_csr=(np.array(indptr), np.array(indices, dtype=np.int64)))
    with pytest.raises(InputError, match="not both"):
        Workload.build(["a"], ["x"], ["y"], [1.0], depends_on=[[]], dependency_csr=(np.zeros(2), np.zeros(0)))


def test_names_and_indices_mix():
    w = _build([[], ["f0"], [0, "f1"]])
    assert w.dependencies(2).tolist() == [0, 1]


@pytest.mark.parametrize("seed", range(3))
def test_zero_time_finish_equals_its_twin(seed):
    from flowsim_kernels.dag import zero_time_finish
    from reference import zero_time_finish_reference

    rng = np.random.default_rng(seed)
    n = 500
    deps = [sorted(set(rng.integers(0, i, size=rng.integers(0, 4)).tolist())) if i else [] for i in range(n)]
    start = rng.choice([0.0, 1.0, 2.5], size=n)
    delay = rng.exponential(0.3, size=n)
    w = Workload.build([f"f{i}" for i in range(n)], ["a"] * n, ["b"] * n, [1.0] * n, start_s=start, delay_s=delay,
                       depends_on=deps)
    got = zero_time_finish(w.start_s, w.delay_s, w.dep_indptr, w.dep_indices)
    assert got.tolist() == zero_time_finish_reference(start.tolist(), delay.tolist(), deps)
    # A chain by hand: 0 starts at 1; 1 waits for it then 2 s; 2 starts at 5, after 1 (at 3) and 0.5 s.
    chain = zero_time_finish(np.array([1.0, 0.0, 5.0]), np.array([0.0, 2.0, 0.5]), np.array([0, 0, 1, 2]),
                             np.array([0, 1]))
    assert chain.tolist() == [1.0, 3.0, 5.0]


def test_zero_time_finish_refuses_a_later_dependency():
    from flowsim_kernels.dag import zero_time_finish

    with pytest.raises(ValueError, match="later flow"):
        zero_time_finish(np.zeros(2), np.zeros(2), np.array([0, 1, 1]), np.array([1]))


def test_concat_moves_each_parts_dependencies_past_the_parts_before_it():
    first = Workload.build(["a", "b"], ["x", "x"], ["y", "y"], [1.0, 2.0], depends_on=[[], [0]],
                           tags={"job": ["j", "j"]})
    second = Workload.build(["c", "d", "e"], ["y", "y", "y"], ["x", "x", "x"], [3.0, 4.0, 5.0],
                            depends_on=[[], [0], [0, 1]])
    both = Workload.concat([first, second])
    assert list(both.names) == ["a", "b", "c", "d", "e"]
    # By hand: b waits for a; d for c (2); e for c and d (2, 3).
    assert [both.dependencies(i).tolist() for i in range(5)] == [[], [0], [], [2], [2, 3]]
    assert list(both.tags["job"]) == ["j", "j", "", "", ""]
    assert both.size_bytes.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(Workload.concat([])) == 0


def test_renamed_prefixes_every_name_and_delays_every_start():
    original = Workload.build(["a", "b"], ["x", "x"], ["y", "y"], [1.0, 2.0], start_s=[0.0, 1.5],
                              depends_on=[[], [0]], tags={"job": ["j", "k"]})
    moved = original.renamed("grad.", 0.25)
    assert list(moved.names) == ["grad.a", "grad.b"]
    assert moved.start_s.tolist() == [0.25, 1.75] and not moved.start_s.flags.writeable
    assert [moved.dependencies(i).tolist() for i in range(2)] == [[], [0]]
    assert list(moved.tags["job"]) == ["j", "k"] and list(moved.src) == ["x", "x"]
    assert original.start_s.tolist() == [0.0, 1.5] and list(original.names) == ["a", "b"]
    with pytest.raises(InputError, match=r"flow 'late\.a' has start_s -1\.0; it must be >= 0"):
        original.renamed("late.", -1.0)


def _on_a_cycle(deps, f):
    """Whether flow ``f`` can reach itself along "waits for" links (a depth-first twin)."""
    seen, stack = set(), list(deps[f])
    while stack:
        g = stack.pop()
        if g == f:
            return True
        if g not in seen:
            seen.add(g)
            stack.extend(deps[g])
    return False


@pytest.mark.parametrize("seed", range(40))
def test_find_cycle_member_equals_its_twin(seed):
    from flowsim_kernels.dag import find_cycle_member
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    # Half the graphs wait only for earlier flows (the one-pass case); the rest anywhere.
    later = seed % 2 == 1
    deps = [sorted({int(d) for d in rng.integers(0, n if later else max(f, 1), size=rng.integers(0, 3))}
                   if later or f > 0 else set()) for f in range(n)]
    indptr = np.concatenate([[0], np.cumsum([len(d) for d in deps])]).astype(np.int64)
    indices = np.array([d for ds in deps for d in ds], dtype=np.int64)
    member = find_cycle_member(indptr, indices)
    if any(_on_a_cycle(deps, f) for f in range(n)):
        assert member >= 0 and _on_a_cycle(deps, member)
    else:
        assert member == -1


@pytest.mark.parametrize(("deps", "cyclic"), [
    ([[], [0], [0, 1]], False),  # in order
    ([[2], [], [1]], False),  # a DAG out of order
    ([[], [1]], True),  # waits for itself
    ([[], [2], [1]], True),  # a cycle after an acyclic start
])
def test_find_cycle_member_hand_cases(deps, cyclic):
    from flowsim_kernels.dag import find_cycle_member
    indptr = np.concatenate([[0], np.cumsum([len(d) for d in deps])]).astype(np.int64)
    indices = np.array([d for ds in deps for d in ds], dtype=np.int64)
    member = find_cycle_member(indptr, indices)
    assert (member >= 0) == cyclic and (not cyclic or _on_a_cycle(deps, member))
