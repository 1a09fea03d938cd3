"""Data-parallel training steps: overlap of gradient all-reduces with backward compute."""

import re
from pathlib import Path

import numpy as np
import pytest

from flowsim import InputError, NodeKind, TopologyBuilder, build_cluster
from flowsim.collectives import CollectiveCosts
from flowsim.scenario import load_scenario, parse_scenario, run_scenario
from flowsim.training import data_parallel_step, run_training_step

G = 1e9
FREE = CollectiveCosts.zero()


def two_gpus(rate_Bps=1 * G):
    b = TopologyBuilder()
    server = b.add_server("s0")
    b.add_node("g0", NodeKind.GPU, server=server)
    b.add_node("g1", NodeKind.GPU, server=server)
    b.add_cable("g0", "g1", rate_Bps, technology="nvlink4")
    return b.build()


def test_one_layer_exposes_the_whole_all_reduce():
    # A 2-rank ring all-reduce of S moves 2 steps of S/2 each way: S / B = 1 s at 1 GB/s,
    # all of it after the only layer's backward (0.5 s).
    step = data_parallel_step(
        two_gpus(), layer_backward_s=[0.5], layer_grad_bytes=[1 * G], bucket_bytes=1 * G, costs=FREE
    )
    result = run_training_step(two_gpus(), step)
    assert result.compute_s == 0.5
    np.testing.assert_allclose(result.step_s, 1.5, rtol=1e-12)
    np.testing.assert_allclose(result.exposed_communication_s, 1.0, rtol=1e-12)


def test_buckets_overlap_the_backward_pass_and_run_one_after_another():
    # Two layers, 1 s of backward and 1 GB of gradients each, one bucket per layer. The last
    # layer's bucket is ready at 1 s and all-reduced from 1 to 2 s while the first layer's
    # backward runs; the first layer's bucket is ready at 2 s and done at 3 s. Without the
    # overlap the step would take 4 s.
    topology = two_gpus()
    step = data_parallel_step(
        topology, layer_backward_s=[1.0, 1.0], layer_grad_bytes=[1 * G, 1 * G], bucket_bytes=1 * G, costs=FREE
    )
    assert step.bucket_ready_s.tolist() == [1.0, 2.0]
    assert step.bucket_bytes.tolist() == [1 * G, 1 * G]
    result = run_training_step(topology, step)
    np.testing.assert_allclose([result.step_s, result.exposed_communication_s], [3.0, 1.0], rtol=1e-12)
    first = np.array([n.startswith("bucket1.") for n in step.workload.names])
    finish = result.run.result.finish_s
    ready = result.run.result.ready_s
    assert ready[first].min() >= finish[~first].max() - 1e-12, "bucket 1 started before bucket 0 finished"


def test_small_gradients_share_a_bucket():
    step = data_parallel_step(
        two_gpus(), layer_backward_s=[1.0, 1.0, 1.0], layer_grad_bytes=[2.0, 1.0, 1.0], bucket_bytes=2.0, costs=FREE
    )
    # Backward order: layer 2 (1 B), layer 1 (1 B) -> a 2-byte bucket ready at 2 s; layer 0.
    assert step.bucket_bytes.tolist() == [2.0, 2.0]
    assert step.bucket_ready_s.tolist() == [2.0, 3.0]


def test_checkpoint_writes_go_to_storage_and_show_in_the_tiers():
    topology = build_cluster("dgx_h100", 2, figure="effective", storage_targets=2)
    step = data_parallel_step(
        topology, layer_backward_s=[1e-3] * 4, layer_grad_bytes=[64 * 2**20] * 4,
        checkpoint_bytes_per_rank=256 * 2**20,
    )
    tags = step.workload.tags["phase"]
    assert tags.count("checkpoint") == 16
    result = run_training_step(topology, step)
    assert result.step_s >= result.compute_s
    assert set(result.tier_utilization) == {"scale_up", "host", "scale_out"}
    assert all(0 < top <= 1 + 1e-9 for top, _ in result.tier_utilization.values())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(layer_backward_s=[1.0], layer_grad_bytes=[1.0, 2.0]), "one value per layer"),
        (dict(layer_backward_s=[-1.0], layer_grad_bytes=[1.0]), "layer_backward_s[0] is -1.0"),
        (dict(layer_backward_s=[1.0], layer_grad_bytes=[1.0], bucket_bytes=0.0), "bucket_bytes must be"),
        (dict(layer_backward_s=[1.0], layer_grad_bytes=[1.0], checkpoint_bytes_per_rank=1.0), "storage targets"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        data_parallel_step(two_gpus(), costs=FREE, **kwargs)


SCENARIOS = Path(__file__).resolve().parents[1] / "data" / "scenarios"


def test_training_step_from_a_scenario_file_matches_the_api():
    scenario = load_scenario(SCENARIOS / "training_step_two_dgx_h100.toml")
    topology = scenario.topology
    step = data_parallel_step(
        topology, layer_backward_s=[3e-3] * 24, layer_grad_bytes=[40e6] * 24, forward_s=30e-3,
        bucket_bytes=26214400, checkpoint_bytes_per_rank=536870912,
    )
    assert scenario.compute_s == step.compute_s == pytest.approx(30e-3 + 24 * 3e-3)
    assert scenario.workload.names == step.workload.names
    from_file = run_scenario(scenario).result
    direct = run_training_step(topology, step)
    np.testing.assert_allclose(from_file.finish_s, direct.run.result.finish_s, rtol=1e-12)


@pytest.mark.parametrize(
    "training, message",
    [
        ("layers = 2\nlayer_backward_s = [1e-3]\nlayer_grad_bytes = 1e6", "workload.training.layer_backward_s: expected 2 values"),
        ("layers = 0\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6", "workload.training.layers: expected an integer >= 1"),
        ("layers = 1\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\ncolour = 1", "workload.training.colour: unknown key"),
        ("layers = 1\nlayer_backward_s = 1e-3", "workload.training.layer_grad_bytes: missing"),
    ],
)
def test_bad_training_tables_name_the_key(training, message):
    text = f'[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload.training]\n{training}\n'
    with pytest.raises(InputError, match=re.escape(f"step.toml: {message}")):
        parse_scenario(text, source="step.toml")
