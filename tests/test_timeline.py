"""The batched time engine (flowsim.timeline, flowsim_kernels.timeline) against a hand case,
the slow twin, the CPU engine and the CPU engine's flow classes."""

import dataclasses

import numpy as np
import pytest

from flowsim import InputError, simulate
from flowsim.collectives import collective_workload
from flowsim.engine import prepare
from flowsim.fabrics import build_cluster
from flowsim.pipeline import run
from flowsim.timeline import run_many, simulate_prepared
from reference import simulate_reference
from test_engine import engine_kwargs, random_scenario

G = 1e9


def test_hand_case_shares_then_follows_a_dependency():
    # f0 (1 GB) and f1 (2 GB) share link 0 (1 GB/s): 0.5 GB/s each, f0 done at 2 s, then f1
    # alone at 1 GB/s for its last 1 GB: 3 s. f2 (0.5 GB on link 1, 1 GB/s, 0.1 s latency)
    # waits for f0 and 0.5 s: ready 2.5 s, transfers from 2.6 s, done 3.1 s. f3, zero bytes on
    # no link, waits for f2 and f1: ready, transferring and done at 3.1 s.
    prepared = prepare([[0], [0], [1], []], [1 * G, 1 * G], [1 * G, 2 * G, 0.5 * G, 0.0], latency_s=[0.0, 0.1],
                       depends_on=[[], [], [0], [2, 1]], delay_s=[0, 0, 0.5, 0])
    (result,) = simulate_prepared([prepared])
    np.testing.assert_allclose(result.finish_s, [2.0, 3.0, 3.1, 3.1], rtol=1e-12)
    np.testing.assert_allclose(result.ready_s, [0.0, 0.0, 2.5, 3.1], rtol=1e-12)
    np.testing.assert_allclose(result.transfer_start_s, [0.0, 0.0, 2.6, 3.1], rtol=1e-12)
    # Instants: 0 (both start), 2 (f0 done), 2.5 (f2 ready), 2.6 (f2 starts), 3 (f1), 3.1 (f2, f3).
    assert result.n_rate_updates == 6
    # Readiness, transfer start and completion of each flow.
    assert result.n_events == 12


@pytest.mark.parametrize("seed", range(6))
def test_a_batch_of_random_scenarios_matches_the_twin_and_the_engine(seed):
    rng = np.random.default_rng(seed)
    scenarios = [random_scenario(rng, n_flows=int(rng.integers(1, 60)), n_links=int(rng.integers(3, 9)))
                 for _ in range(5)]
    prepared = [prepare(routes, capacity, size, **engine_kwargs(kw)) for routes, capacity, size, kw in scenarios]
    batch = simulate_prepared(prepared)
    for (routes, capacity, size, kw), result in zip(scenarios, batch, strict=True):
        ready, transfer, finish = simulate_reference(routes, capacity, size, **kw)
        np.testing.assert_allclose(result.ready_s, ready, rtol=1e-9)
        np.testing.assert_allclose(result.transfer_start_s, transfer, rtol=1e-9)
        np.testing.assert_allclose(result.finish_s, finish, rtol=1e-9)
        engine = simulate(routes, capacity, size, **engine_kwargs(kw))
        np.testing.assert_allclose(result.finish_s, engine.finish_s, rtol=1e-9)
        np.testing.assert_array_equal(result.link_bytes, engine.link_bytes)


def collective_runs():
    two = build_cluster("dgx_h100", 2, figure="effective")
    one = build_cluster("dgx_a100", 1, figure="effective")
    runs = []
    for topology, collective, size in ((two, "all_reduce", 1 << 20), (two, "all_gather", 1 << 24),
                                       (one, "all_reduce", 1 << 26), (one, "all_to_all", 1 << 22),
                                       (two, "broadcast", 1 << 23)):
        runs.append((topology, collective_workload(topology, collective, size).workload))
    return runs


def test_collectives_by_classes_match_the_cpu_engine():
    runs = collective_runs()
    batch = run_many(runs)
    by_classes = 0
    for (topology, workload), got in zip(runs, batch, strict=True):
        want = run(topology, workload, classes=True)
        assert got.result.n_flow_classes == want.result.n_flow_classes
        by_classes += got.result.n_flow_classes < len(workload)
        np.testing.assert_allclose(got.result.finish_s, want.result.finish_s, rtol=1e-9)
        np.testing.assert_allclose(got.result.transfer_start_s, want.result.transfer_start_s, rtol=1e-9)
        assert got.makespan_s == pytest.approx(want.makespan_s, rel=1e-9)
    assert by_classes >= 3  # the rings and the all-to-all; the chain is asymmetric


def test_a_bad_run_is_named_before_anything_runs():
    topology = build_cluster("dgx_h100", 1, figure="effective")
    good = collective_workload(topology, "all_reduce", 1 << 20).workload
    other = build_cluster("dgx_a100", 2, figure="effective")
    bad = collective_workload(other, "all_reduce", 1 << 20).workload
    with pytest.raises(InputError, match=r"^run 1: flow '.*': (source|destination) 'n1\.gpu\d' is no node"):
        run_many([(topology, good), (topology, bad)])
    with pytest.raises(InputError, match="backend"):
        run_many([(topology, good)], backend="tpu")
    assert run_many([]) == []


def test_times_beyond_float64_are_named():
    prepared = prepare([[0]], [1e-300], [1e300], flow_names=["huge"])
    with pytest.raises(InputError, match=r"^run 0: flow 'huge'.*beyond float64"):
        simulate_prepared([prepared])


def _makespans_with_jitter(collective: str, n_nodes: int, size: int, figure: str, seeds=(1, 2, 3, 4)):
    """The CPU batch's makespan of ``collective`` as built, then with every link capacity
    scaled by its own random factor within 1 +- 1e-13, once per seed."""
    base = build_cluster("dgx_h100", n_nodes, figure=figure)
    workload = collective_workload(base, collective, size).workload
    topologies = [base] + [
        dataclasses.replace(base, link_capacity_Bps=base.link_capacity_Bps
                            * (1 + 1e-13 * np.random.default_rng(seed).uniform(-1, 1, base.n_links)))
        for seed in seeds]
    return np.array([got.makespan_s for got in run_many([(t, workload) for t in topologies])])


def test_a_pipelined_reduce_across_servers_turns_on_rounding_where_an_all_reduce_does_not():
    # docs/model.md "Time", schedules that turn on rounding: a 1e-13 jitter of the link
    # capacities leaves the all-reduce where it was (to rounding) and moves the reduce's
    # makespan by a few tenths of a percent; the GPU's block engine, summing in another order, lands
    # on another of its schedules.
    steady = _makespans_with_jitter("all_reduce", 2, 1 << 32, "nominal")
    np.testing.assert_allclose(steady, steady[0], rtol=1e-12)
    moved = _makespans_with_jitter("reduce", 2, 1 << 32, "nominal")
    spread = (moved.max() - moved.min()) / moved[0]
    assert 1e-4 < spread < 0.05, spread
