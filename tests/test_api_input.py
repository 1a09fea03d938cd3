"""Bad values given to the public API: one InputError naming what is wrong, never a silent
reading of the value nor a raw exception (issue 30, items 3, 8, 9 and 16)."""

import re

import numpy as np
import pytest

import flowsim
from flowsim import InputError, Routes, max_min_rates, simulate, solve_batch
from flowsim.collectives import all_to_all, build_collective, hierarchical_all_reduce
from flowsim.training import MAX_LAYER_PASSES, MAX_LAYERS

RANKS = ["g0", "g1", "g2", "g3"]


@pytest.fixture(scope="module")
def cluster():
    return flowsim.build_cluster("dgx_h100", 2, figure="nominal")


@pytest.fixture(scope="module")
def step(cluster):
    return flowsim.data_parallel_step(cluster, layer_backward_s=[1e-3] * 2, layer_grad_bytes=[1e6] * 2)


def one_cable(capacity_Bps):
    b = flowsim.TopologyBuilder()
    b.add_node("a", flowsim.NodeKind.GPU)
    b.add_node("b", flowsim.NodeKind.GPU)
    b.add_cable("a", "b", capacity_Bps, technology="nvlink4")
    return b.build()


CASES = {
    # Item 3: values NumPy or Python would have read as something else.
    "p2p as a string": (
        lambda c, s: flowsim.preset("dgx_h100", figure="nominal", p2p="no"),
        "server 'dgx_h100': p2p must be True or False, got 'no'",
    ),
    "capacity as a string": (lambda c, s: max_min_rates([[0]], ["1e9"]), "capacity_Bps must be real numbers, got '1e9' (str)"),
    "capacity as a bool": (lambda c, s: max_min_rates([[0]], [True]), "capacity_Bps must be real numbers, got True (bool)"),
    "batched capacity as a bool": (
        lambda c, s: solve_batch([[0]], [[1.0], [True]]), "capacity_Bps must be real numbers, got True (bool)"
    ),
    "link capacity as a string": (
        lambda c, s: one_cable("1e9"), "link 'a->b': capacity_Bps and latency_s must be numbers, got '1e9' and 0.0"
    ),
    "link capacity as a bool": (
        lambda c, s: one_cable(True), "link 'a->b': capacity_Bps and latency_s must be numbers, got True and 0.0"
    ),
    "size as a string": (lambda c, s: simulate([[0]], [1.0], ["1"]), "size_bytes must be real numbers, got '1' (str)"),
    "fractional n_links": (lambda c, s: Routes.from_lists([[0]], 1.5), "n_links must be a non-negative integer, got 1.5"),
    "negative n_links": (
        lambda c, s: Routes.from_csr(np.array([0, 0]), np.array([], dtype=np.int64), -3),
        "n_links must be a non-negative integer, got -3",
    ),
    "duplicate link names": (
        lambda c, s: max_min_rates([["a"]], [1.0, 2.0], link_names=["a", "a"]),
        "link names 0 and 1 are both 'a'; each link needs its own name",
    ),
    "a set as a route": (
        lambda c, s: max_min_rates([{0, 1}], [1.0, 2.0]),
        "flow 0 has route {0, 1}; a route is a sequence of links in order (a list or tuple)",
    ),
    "record_links as a string": (
        lambda c, s: simulate([[0]], [1.0], [1.0], record_links="no"), "record_links must be True or False, got 'no'"
    ),
    # Item 8: a Routes built directly reaches the kernels, which do not check bounds.
    "Routes with an unknown link": (
        lambda c, s: Routes(np.array([0, 1]), np.array([5]), 1), "flow 0 routes over unknown link 5 (links are 0..0)"
    ),
    "Routes with pointers past the indices": (
        lambda c, s: Routes(np.array([0, 3]), np.array([0]), 1), "flow_link_indptr ends at 3 but flow_link_indices has 1"
    ),
    "Routes of floats": (
        lambda c, s: Routes(np.array([0.0, 1.0]), np.array([0]), 1), "flow_link_indptr must be a 1-d integer array"
    ),
    # Item 9: bounded before anything is built.
    "a hundred million layers": (
        lambda c, s: flowsim.data_parallel_step(c, layer_backward_s=[1e-3] * 100_000_000, layer_grad_bytes=[1e6]),
        f"100,000,000 layers is more than the {MAX_LAYERS:,} a training step takes",
    ),
    "layers times microbatches": (
        lambda c, s: flowsim.parallel_step(
            c, tp=8, layer_forward_s=[1e-3] * 1000, layer_backward_s=[1e-3] * 1000, layer_grad_bytes=[1.0] * 1000,
            n_microbatches=10_000,
        ),
        f"1,000 layers times 10,000 microbatches is 10,000,000 layer passes, more than the {MAX_LAYER_PASSES:,}",
    ),
    # Item 16: raw exceptions before.
    "capacity that is no number": (lambda c, s: max_min_rates([[0]], ["abc"]), "capacity_Bps must be real numbers, got 'abc'"),
    "complex capacity": (lambda c, s: max_min_rates([[0]], [1 + 2j]), "capacity_Bps must be real numbers, got (1+2j)"),
    "capacities as a dict": (lambda c, s: max_min_rates([[0]], {0: 1.0}), "capacity_Bps must be real numbers, got {0: 1.0}"),
    "n_links as a string": (lambda c, s: Routes.from_lists([[0]], "2"), "n_links must be a non-negative integer, got '2'"),
    "a dependency list that is None": (
        lambda c, s: simulate([[0], [0]], [1.0], [1.0, 1.0], depends_on=[None, [0]]),
        "flow 0 depends on None; give a list of flow indices (empty for none)",
    ),
    "unknown option to build_cluster": (
        lambda c, s: flowsim.build_cluster("dgx_h100", 2, figure="nominal", bogus=1),
        "preset 'dgx_h100': unknown option 'bogus'; valid ones: p2p",
    ),
    "unknown option to a collective": (
        lambda c, s: build_collective("all_reduce", RANKS, 1e6, chanels=2),
        "all_reduce (all_reduce): unknown option 'chanels'; valid ones: cap_Bps, channels,",
    ),
    "unknown option to run_training_step": (
        lambda c, s: flowsim.run_training_step(c, s, bogus=1),
        "run: unknown option 'bogus'; valid ones: classes, mode, progress, record_flows, record_links, time_rel_tol",
    ),
    "oversubscription as a string": (
        lambda c, s: flowsim.build_cluster("dgx_h100", 2, figure="nominal", oversubscription="2"),
        "oversubscription must be a number >= 1, got '2'",
    ),
    "ranks None": (lambda c, s: build_collective("all_reduce", None, 1e6), "all_reduce: ranks must be a sequence of node names, got None"),
    "servers as a list": (
        lambda c, s: all_to_all(RANKS, 1e6, servers=["a", "b"]),
        "all_to_all: servers must map each rank name to its server (a dict), got list",
    ),
    "servers as a list, hierarchical": (
        lambda c, s: hierarchical_all_reduce(RANKS, 1e6, servers=["a", "b"]),
        "hierarchical_all_reduce: servers must map each rank name to its server (a dict), got list",
    ),
    "hierarchical without servers": (
        lambda c, s: build_collective("all_reduce", RANKS, 1e6, algorithm="hierarchical"),
        "all_reduce (hierarchical_all_reduce): option 'servers' is required",
    ),
    "a seed beyond int64": (
        lambda c, s: flowsim.collective_time(c, "all_reduce", 1e6, seed=2**70),
        "seed must be at most 2**63 - 1 (an int64), got 1180591620717411303424",
    ),
    "a training step that is None": (
        lambda c, s: flowsim.run_training_step(c, None),
        "step must be a TrainingStep or ParallelStep (from data_parallel_step or parallel_step), got NoneType",
    ),
    # The public entry points raised AttributeError, TypeError (naming an internal function)
    # or ValueError, or read the value as something else.
    "collective_time on a preset's name": (
        lambda c, s: flowsim.collective_time("dgx_h100", "all_reduce", 1e6),
        "collective_time: topology must be a flowsim Topology (flowsim.preset, flowsim.build_cluster, ...), "
        "got 'dgx_h100' (str)",
    ),
    "an unknown keyword to collective_time": (
        lambda c, s: flowsim.collective_time(c, "all_reduce", 1e6, foo=1),
        "collective_time: unknown option 'foo'; valid ones: algorithm, calls, channels,",
    ),
    "nccl_env as a list": (
        lambda c, s: flowsim.collective_time(c, "all_reduce", 1e6, nccl_env=["NCCL_ALGO=Ring"]),
        "nccl_env must be a mapping of NCCL variable to value ({'NCCL_ALGO': 'Ring'}), got ['NCCL_ALGO=Ring']",
    ),
    "a collective's size as a bool": (
        lambda c, s: flowsim.collective_time(c, "all_reduce", True), "all_reduce: size_bytes must be a number, got True"
    ),
    "a collective's size as a string": (
        lambda c, s: flowsim.collective_time(c, "all_reduce", "1000"),
        "all_reduce: size_bytes must be a number, got '1000'",
    ),
    "run_scenario of None": (
        lambda c, s: flowsim.run_scenario(None),
        "run_scenario takes a Scenario (flowsim.load_scenario(path) gives one), got None (NoneType)",
    ),
    "open_trace of None": (
        lambda c, s: flowsim.open_trace(None),
        "open_trace: path must be a file path (a str or os.PathLike), got None (NoneType)",
    ),
    "load_scenario of a dict": (
        lambda c, s: flowsim.load_scenario({"topology": {}}),
        "load_scenario takes a scenario file's path; for a parsed TOML document (a dict) call "
        "flowsim.scenario.scenario_from_document",
    ),
    "duplicate flow names": (
        lambda c, s: simulate([[0, 1], [0], [1]], [1e9, 2e9], [1.0, 1.0, 1.0], flow_names=["a", "a", "b"]),
        "flow names 0 and 1 are both 'a'; each flow needs its own name",
    ),
    "duplicate flow names to max_min_rates": (
        lambda c, s: max_min_rates([[0], [0]], [1e9], flow_names=["a", "a"]),
        "flow names 0 and 1 are both 'a'; each flow needs its own name",
    ),
    # Found by running the API as a new user (2026-12-07): each message named the wrong thing.
    "a flow to no node": (
        lambda c, s: flowsim.run(c, flowsim.Workload.build(["a", "b"], ["n0.gpu0"] * 2, ["n0.gpu1", "n9.gpu9"], [1e6] * 2)),
        "flow 'b': destination 'n9.gpu9' is no node of the topology",
    ),
    "a flow to no node, in a batch": (
        lambda c, s: flowsim.run_many([(c, flowsim.Workload.build(["a"], ["n0.gpu0"], ["n9.gpu9"], [1e6]))]),
        "run 0: flow 'a': destination 'n9.gpu9' is no node of the topology",
    ),
    "no links at all": (
        lambda c, s: max_min_rates([[0]], []),
        "flow 0 routes over unknown link 0 (there are no links)",
    ),
    "a node kind that is none": (
        lambda c, s: flowsim.TopologyBuilder().add_node("x", "tpu"),
        "node 'x': unknown kind 'tpu' (a NodeKind, or one of its names: gpu, cpu,",
    ),
}


@pytest.mark.parametrize("call, message", CASES.values(), ids=CASES.keys())
def test_a_bad_value_is_one_input_error_naming_it(cluster, step, call, message):
    with pytest.raises(InputError, match=re.escape(message)):
        call(cluster, step)


def test_good_values_of_the_kinds_now_checked_still_pass(cluster, step):
    # NumPy scalars and arrays of any real dtype, tuples and ranges as routes, NumPy bools.
    rates = max_min_rates([(0,), range(2)], np.array([1, 2], dtype=np.int32), [np.float32(1.0), 1])
    np.testing.assert_array_equal(rates, [0.5, 0.5])
    assert simulate([[0]], [np.float64(2.0)], [2], record_links=np.bool_(True)).finish_s.tolist() == [1.0]
    assert Routes.from_lists([[0]], np.int64(1)).n_links == 1
    assert flowsim.preset("dgx_h100", figure="nominal", p2p=np.bool_(False)).server_p2p.tolist() == [False]
    assert flowsim.run_training_step(cluster, step, mode="full").step_s > 0
    # A node kind by its name, as scenario files give it.
    assert flowsim.TopologyBuilder().add_node("x", "gpu") == 0
