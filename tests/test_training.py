"""Training steps: overlap of gradient all-reduces with backward compute, and the
tensor/pipeline/data parallel layout with its schedules, hand-computed."""

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from flowsim import InputError, NodeKind, TopologyBuilder, build_cluster, preset
from flowsim.collectives import CollectiveCosts
from flowsim.hardware import LinkTier
from flowsim.scenario import load_scenario, parse_scenario, run_scenario, scenario_from_document
from flowsim.training import SCHEDULES, data_parallel_step, parallel_layout, parallel_step, run_training_step

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
        # Strings, bools and a bare rank name raised TypeError, or were taken as numbers or letters.
        (dict(layer_backward_s=[1.0], layer_grad_bytes=[1.0], forward_s="1"), "forward_s must be a number, got '1'"),
        (dict(layer_backward_s=[1.0], layer_grad_bytes=[1.0], bucket_bytes=True), "bucket_bytes must be a number"),
        (dict(layer_backward_s=[1.0], layer_grad_bytes=["a"]), "layer_grad_bytes must be numbers, one per layer"),
        (dict(layer_backward_s=[1.0], layer_grad_bytes=[1.0], ranks="g0"), "ranks must be a sequence of GPU names"),
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
        ("layers = 1\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\nalgorithm = 'p2p'",
         "workload.training.algorithm: no algorithm 'p2p' for all_reduce; valid ones: auto, ring, tree,"),
        ("layers = 1\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\nprotocol = 'LL64'",
         "workload.training.protocol: unknown protocol 'LL64'; valid ones: auto, ll, ll128, simple"),
    ],
)
def test_bad_training_tables_name_the_key(training, message):
    text = f'[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload.training]\n{training}\n'
    with pytest.raises(InputError, match=re.escape(f"step.toml: {message}")):
        parse_scenario(text, source="step.toml")


# --- tensor, pipeline and data parallel steps ---------------------------------------------


def gpu_chain(n, rate_Bps=1 * G, servers=1):
    """GPUs g0..g{n-1}, split evenly over ``servers`` servers, a full-duplex cable between
    neighbours (zero latency)."""
    b = TopologyBuilder()
    ids = [b.add_server(f"s{k}") for k in range(servers)]
    for i in range(n):
        b.add_node(f"g{i}", NodeKind.GPU, server=ids[i * servers // n])
    for i in range(n - 1):
        b.add_cable(f"g{i}", f"g{i + 1}", rate_Bps, technology="nvlink4")
    return b.build()


def phase_of(step, phase):
    return np.array(step.workload.tags["phase"]) == phase


def call_spans(step, result, keep):
    """Each collective call's [first start, last finish] by its name before the collective's
    own part (``fsdp.s0.t0.mb0.F.l0.gather``), for the flows whose names ``keep`` accepts."""
    run = result.run.result
    spans: dict[str, list[float]] = {}
    for name, start, finish in zip(step.workload.names, run.transfer_start_s, run.finish_s, strict=True):
        if keep(name):
            call = re.sub(r"\.(all_gather|reduce_scatter|all_reduce)\..*", "", name)
            span = spans.setdefault(call, [np.inf, 0.0])
            span[:] = [min(span[0], start), max(span[1], finish)]
    return spans


def test_layout_is_megatron_order_tp_then_dp_then_pp():
    layout = parallel_layout(gpu_chain(8, servers=2), tp=2, pp=2)
    assert (layout.tp, layout.pp, layout.dp) == (2, 2, 2)
    assert [layout.tp_group(s, d) for s in range(2) for d in range(2)] == [
        ("g0", "g1"), ("g2", "g3"), ("g4", "g5"), ("g6", "g7")
    ]
    assert [layout.dp_group(t, s) for s in range(2) for t in range(2)] == [
        ("g0", "g2"), ("g1", "g3"), ("g4", "g6"), ("g5", "g7")
    ]
    cluster = parallel_layout(build_cluster("dgx_h100", 4, figure="nominal"), tp=8, pp=2)
    assert cluster.tp_group(1, 1) == tuple(f"n3.gpu{i}" for i in range(8))
    assert cluster.dp_group(5, 0) == ("n0.gpu5", "n1.gpu5")
    assert cluster.rank(2, 1, 0) == "n2.gpu2"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tp=3), "tp x pp = 3 x 1 = 3 does not divide the 8 ranks"),
        (dict(tp=2, pp=2, dp=3), "tp x pp x dp = 2 x 2 x 3 = 12, but there are 8 ranks"),
        (dict(tp=8), "spans 2 servers"),
        (dict(tp=0), "tp must be a positive integer, got 0"),
        (dict(pp=True), "pp must be a positive integer, got True"),
        (dict(ranks=["g0", "g1", "g0", "g2"]), "rank 'g0' appears twice"),
        (dict(ranks=["g0", "gpu9"]), "unknown node 'gpu9'"),
    ],
)
def test_bad_layouts(kwargs, message):
    with pytest.raises(InputError, match=re.escape(message)):
        parallel_layout(gpu_chain(8, servers=2), **kwargs)


def test_tp_groups_may_span_servers_when_asked():
    layout = parallel_layout(gpu_chain(8, servers=2), tp=8, tp_across_servers=True)
    assert layout.tp_group(0, 0) == tuple(f"g{i}" for i in range(8))


def test_two_stages_one_microbatch_by_hand():
    # Stage 0 (g0) forward 1 s, activations 1 GB over the 1 GB/s cable (1 s), stage 1 (g1)
    # forward 1 s and backward 2 s, gradients back (1 s), stage 0 backward 2 s: 8 s, of which
    # 6 s compute; each stage idles 3 s of the 6 (bubble (pp - 1) / (m + pp - 1) = 1/2).
    step = parallel_step(
        gpu_chain(2), pp=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0], layer_grad_bytes=[0.0, 0.0],
        activation_bytes=1 * G, costs=FREE,
    )
    result = run_training_step(gpu_chain(2), step)
    assert (step.compute_s, step.bubble_s, step.bubble_fraction) == (6.0, 3.0, 0.5)
    np.testing.assert_allclose([result.step_s, result.exposed_communication_s, result.bubble_s], [8.0, 2.0, 3.0])
    sends = phase_of(step, "pp")
    np.testing.assert_allclose(result.run.result.transfer_start_s[sends], [1.0, 5.0])
    np.testing.assert_allclose(result.run.result.finish_s[sends], [2.0, 6.0])


def test_parallel_step_notes_each_stage_of_its_building():
    notes = []
    step = parallel_step(
        gpu_chain(2), pp=2, n_microbatches=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
        layer_grad_bytes=[0.0, 0.0], activation_bytes=1 * G, costs=FREE, progress=notes.append,
    )
    n = len(step.workload)
    assert notes[0] == "laying out 2 stages x 1 replicas x 2 microbatches (1f1b)"
    assert notes[1:] == [f"checking {n:,} flows and their dependencies", f"timing the compute through {n:,} flows"]


def test_1f1b_two_stages_two_microbatches_by_hand():
    # s0: F0 [0,1], sends a0 [1,2], F1 [2,3], then posts a1 with the receive of g0's gradients.
    # s1: F0 [2,3], B0 [3,5], then posts g0 with the receive of a1: both cross at [5,6] (a
    # send waits for its receiver's call). s0: B0 [6,8]; s1: F1 [6,7], B1 [7,9], g1 [9,10];
    # s0: B1 [10,12]. Without communication: (m + pp - 1)(f + b) = 9 s.
    step = parallel_step(
        gpu_chain(2), pp=2, n_microbatches=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
        layer_grad_bytes=[0.0, 0.0], activation_bytes=1 * G, costs=FREE,
    )
    result = run_training_step(gpu_chain(2), step)
    assert step.compute_s == 9.0
    np.testing.assert_allclose(result.step_s, 12.0)
    sends = phase_of(step, "pp")
    names = [n.split(".send")[0] for n, s in zip(step.workload.names, sends) if s]
    finish = dict(zip(names, result.run.result.finish_s[sends]))
    assert finish == pytest.approx({
        "pp.act.mb0.s0to1.d0.t0": 2.0, "pp.act.mb1.s0to1.d0.t0": 6.0,
        "pp.grad.mb0.s0to1.d0.t0": 6.0, "pp.grad.mb1.s0to1.d0.t0": 10.0,
    })


def test_interleaved_1f1b_two_stages_two_chunks_by_hand():
    # Layers l0..l3, one per virtual stage: v0 and v2 on g0, v1 and v3 on g1; F = 1 s, B = 2 s,
    # 1 GB sends over the 1 GB/s cable (1 s each way). Megatron's interleaved table for pp = 2,
    # m = 2: (mb0, chunk 0), (mb1, 0), (mb0, 1), (mb1, 1); g0 warms up with all 4 forwards,
    # g1 with 2. Sends do not block, a pass waits only for its input:
    # g0: F0v0 [0,1] a0 [1,2], F1v0 [1,2] a1 [2,3]; g1: F0v1 [2,3] -> [3,4], F1v1 [3,4] -> [4,5];
    # g0: F0v2 [4,5] -> [5,6], F1v2 [5,6] -> [6,7]; g1: F0v3 [6,7], B0v3 [7,9] -> grad [9,10],
    # F1v3 [9,10], B1v3 [10,12] -> [12,13]; g0: B0v2 [10,12] -> [12,13], B1v2 [13,15] ->
    # [15,16]; g1: B0v1 [13,15] -> [15,16], B1v1 [16,18] -> [18,19]; g0: B0v0 [16,18], B1v0
    # [19,21]. Without communication 15 s: 12 s of compute a rank and a bubble of
    # (pp - 1)(f + b) / v = 1 x 6 / 2 = 3 s.
    step = parallel_step(
        gpu_chain(2), pp=2, n_microbatches=2, virtual_stages=2, layer_forward_s=[1.0] * 4,
        layer_backward_s=[2.0] * 4, layer_grad_bytes=[0.0] * 4, activation_bytes=1 * G, costs=FREE,
    )
    assert (step.virtual_stages, step.compute_s, step.bubble_s) == (2, 15.0, 3.0)
    assert step.stage_busy_s.tolist() == [12.0, 12.0]
    result = run_training_step(gpu_chain(2), step)
    np.testing.assert_allclose(result.step_s, 21.0)
    sends = phase_of(step, "pp")
    names = [n.split(".send")[0].removesuffix(".d0.t0") for n, s in zip(step.workload.names, sends) if s]
    run = result.run.result
    times = {name: (float(start), float(end))
             for name, start, end in zip(names, run.transfer_start_s[sends], run.finish_s[sends], strict=True)}
    assert times == {
        "pp.act.mb0.v0to1": (1, 2), "pp.act.mb1.v0to1": (2, 3), "pp.act.mb0.v1to2": (3, 4),
        "pp.act.mb1.v1to2": (4, 5), "pp.act.mb0.v2to3": (5, 6), "pp.act.mb1.v2to3": (6, 7),
        "pp.grad.mb0.v2to3": (9, 10), "pp.grad.mb1.v2to3": (12, 13), "pp.grad.mb0.v1to2": (12, 13),
        "pp.grad.mb1.v1to2": (15, 16), "pp.grad.mb0.v0to1": (15, 16), "pp.grad.mb1.v0to1": (18, 19),
    }


@pytest.mark.parametrize("pp, v, m", [(2, 2, 2), (4, 2, 4), (4, 2, 8), (4, 4, 8), (2, 3, 4), (3, 2, 6)])
def test_interleaving_divides_the_bubble_by_the_virtual_stages(pp, v, m):
    # Narayanan et al. 2021 (Megatron-LM at scale), section 2.2.2: with equal stages the
    # interleaved schedule's bubble is (pp - 1)(f + b) / v, f and b a stage's forward and
    # backward of one microbatch (here v layers of 1 s and 2 s a stage).
    layers = pp * v
    step = parallel_step(
        gpu_chain(pp), pp=pp, n_microbatches=m, virtual_stages=v, layer_forward_s=[1.0] * layers,
        layer_backward_s=[2.0] * layers, layer_grad_bytes=[0.0] * layers, costs=FREE,
    )
    f, b = v * 1.0, v * 2.0
    assert step.stage_busy_s.tolist() == [m * (f + b)] * pp
    assert step.bubble_s == (pp - 1) * (f + b) / v
    assert step.bubble_fraction == pytest.approx((pp - 1) / (v * m + pp - 1))


def test_interleaved_chunks_reduce_their_gradient_buckets_apart():
    # pp = 2, dp = 2 (g0 g1 stage 0, g2 g3 stage 1), v = 2, m = 2, free sends: the compute
    # of the test above without communication. Each layer's 1 GB is a bucket, all-reduced
    # over its DP pair's 1 GB/s cable in 1 s once the last microbatch's backward of its
    # chunk has ended: l3 (stage 1, bucket 1) at 9 s, l2 (stage 0, bucket 1) at 11 s, l1
    # (stage 1, bucket 0) at 13 s, l0 (stage 0, bucket 0) at 15 s. The later chunks' buckets
    # are reduced while the earlier chunks' backward runs.
    b = TopologyBuilder()
    server = b.add_server("s0")
    for i in range(4):
        b.add_node(f"g{i}", NodeKind.GPU, server=server)
    for x, y in (("g0", "g1"), ("g2", "g3"), ("g0", "g2"), ("g1", "g3")):  # DP pairs, PP pairs
        b.add_cable(x, y, 1 * G, technology="nvlink4")
    topology = b.build()
    step = parallel_step(
        topology, pp=2, n_microbatches=2, virtual_stages=2, layer_forward_s=[1.0] * 4,
        layer_backward_s=[2.0] * 4, layer_grad_bytes=[1 * G] * 4, bucket_bytes=1 * G, costs=FREE,
    )
    assert step.layout.dp == 2 and step.compute_s == 15.0
    result = run_training_step(topology, step)
    grads = phase_of(step, "gradients")
    stages, buckets = np.array(step.workload.tags["stage"]), np.array(step.workload.tags["bucket"])
    ready, finish = result.run.result.ready_s, result.run.result.finish_s
    for (stage, bucket), (first, last) in {("1", "1"): (9, 10), ("0", "1"): (11, 12), ("1", "0"): (13, 14),
                                            ("0", "0"): (15, 16)}.items():
        these = grads & (stages == stage) & (buckets == bucket)
        np.testing.assert_allclose([ready[these].min(), finish[these].max()], [first, last])
    np.testing.assert_allclose([result.step_s, result.exposed_communication_s], [16.0, 1.0])


@pytest.mark.parametrize("kwargs, message", [
    (dict(virtual_stages=2, schedule="gpipe"), "virtual_stages = 2 runs Megatron's interleaved 1F1B; schedule must "
                                               "be '1f1b', not 'gpipe'"),
    (dict(virtual_stages=2, pp=1, n_microbatches=2), "virtual_stages = 2 interleaves pipeline stages; it needs pp >= 2"),
    (dict(virtual_stages=2, n_microbatches=3), "the interleaved schedule runs microbatches in groups of pp = 2: "
                                               "n_microbatches = 3 must be a multiple of it"),
    (dict(virtual_stages=3), "4 layers do not split evenly over virtual_stages x pp = 6 virtual stages"),
    (dict(virtual_stages=0), "virtual_stages must be a positive integer, got 0"),
])
def test_bad_interleaving_is_named(kwargs, message):
    arguments = {**dict(pp=2, n_microbatches=2, layer_forward_s=[1.0] * 4, layer_backward_s=[2.0] * 4,
                        layer_grad_bytes=[0.0] * 4, costs=FREE), **kwargs}
    with pytest.raises(InputError, match=re.escape(message)):
        parallel_step(gpu_chain(2), **arguments)


def test_context_parallel_attention_passes_keys_and_values_around_the_ring_by_hand():
    # cp = 2 on one 1 GB/s cable: g0 and g1 each hold half of every sequence. F = 2 s (the
    # attention block 1 s, as 2 steps of 0.5 s; the MLP 1 s), B = 4 s (the MLP 2 s, then the
    # attention 2 x 1 s). Each step but the last sends the rank's 1 GB of keys and values on
    # as it starts (2 GB with their gradients, backward): forward [0, 1] while step 0 runs
    # [0, .5], step 1 waits for it [1, 1.5], the MLP [1.5, 2.5]; backward MLP [2.5, 4.5],
    # send [4.5, 6.5] beside step 0 [4.5, 5.5], step 1 [6.5, 7.5]. 6 s of compute.
    step = parallel_step(
        two_gpus(), cp=2, layer_forward_s=[2.0], layer_backward_s=[4.0], layer_grad_bytes=[0.0],
        cp_kv_bytes=1 * G, costs=FREE,
    )
    assert (step.layout.dp, step.layout.cp, step.layout.data_parallel) == (2, 2, 1)
    assert step.layout.cp_group(0, 0, 1) == ("g0", "g1")
    result = run_training_step(two_gpus(), step)
    np.testing.assert_allclose([step.compute_s, result.step_s, result.exposed_communication_s], [6.0, 7.5, 1.5])
    run = result.run.result
    sends = phase_of(step, "cp")
    spans = {(name.split(".send")[0], src): (float(start), float(end)) for name, src, start, end in zip(
        np.array(step.workload.names)[sends], np.array(step.workload.src)[sends], run.transfer_start_s[sends],
        run.finish_s[sends], strict=True)}
    assert spans == {("cp.s0.d0.t0.mb0.F.l0.step0", "g0"): (0.0, 1.0), ("cp.s0.d1.t0.mb0.F.l0.step0", "g1"): (0.0, 1.0),
                     ("cp.s0.d0.t0.mb0.B.l0.step0", "g0"): (4.5, 6.5), ("cp.s0.d1.t0.mb0.B.l0.step0", "g1"): (4.5, 6.5)}
    # The critical path runs through both sends (1 + 2 s) instead of the step-0 compute
    # beside them (0.5 + 1 s): 3 s of CP communication, 4.5 s of compute.
    assert result.breakdown.critical_communication_s["cp"] == pytest.approx(3.0)
    assert result.breakdown.critical_compute_s == pytest.approx(4.5)


def test_context_parallel_gradients_are_reduced_over_dp_times_cp():
    # 8 GPUs, tp = 2, cp = 2: Megatron's dp = 2, and each stage's gradients over the 4 ranks
    # of a TP index (the DP x CP group); the CP groups are consecutive after TP.
    topology = preset("dgx_h100", figure="effective")
    step = parallel_step(topology, tp=2, cp=2, layer_forward_s=[1e-3], layer_backward_s=[2e-3],
                         layer_grad_bytes=[4e6], cp_kv_bytes=1e6)
    layout = step.layout
    assert (layout.dp, layout.data_parallel) == (4, 2)
    assert layout.cp_group(1, 0, 2) == ("gpu5", "gpu7") and layout.dp_group(1, 0) == ("gpu1", "gpu3", "gpu5", "gpu7")
    grads = phase_of(step, "gradients")
    assert {n.split(".")[2] for n in np.array(step.workload.names)[grads]} == {"t0", "t1"}
    assert set(np.array(step.workload.src)[grads]) == set(layout.ranks)


@pytest.mark.parametrize("kwargs, message", [
    (dict(cp=3), "cp = 3 does not divide the 8 ranks a stage has over tp = 1"),
    (dict(cp=2, ep=2, ep_all_to_all_bytes=1e6), "cp = 2 is laid out without experts and without fsdp"),
    (dict(cp=2, fsdp=True), "cp = 2 is laid out without experts and without fsdp"),
    (dict(cp=2, dp=3), "tp x cp x pp x dp = 1 x 2 x 1 x 3 = 6, but there are 8 ranks"),
    (dict(cp=2, cp_kv_bytes=-1.0), "cp_kv_bytes"),
    # Without context parallelism the keys and values were never sent, and nothing said so.
    (dict(cp_kv_bytes=1e6), "cp_kv_bytes = 1000000.0 is what context parallelism sends: give cp > 1 too"),
])
def test_bad_context_parallelism_is_named(kwargs, message):
    arguments = {**dict(layer_forward_s=[1e-3], layer_backward_s=[2e-3], layer_grad_bytes=[1e6]), **kwargs}
    with pytest.raises(InputError, match=re.escape(message)):
        parallel_step(preset("dgx_h100", figure="effective"), **arguments)


def test_tp_all_reduces_by_hand():
    # tp = 2 on one 1 GB/s cable: a 1 GB all-reduce is 2 ring steps of 0.5 GB each way, 1 s.
    # Forward: 0.5 s attention, all-reduce, 0.5 s MLP, all-reduce; backward the same with
    # 1 s blocks: 0.5 + 1 + 0.5 + 1 + 1 + 1 + 1 + 1 = 7 s, of which 3 s compute.
    step = parallel_step(
        gpu_chain(2), tp=2, layer_forward_s=[1.0], layer_backward_s=[2.0], layer_grad_bytes=[0.0],
        tp_all_reduce_bytes=1 * G, costs=FREE,
    )
    result = run_training_step(gpu_chain(2), step)
    assert step.compute_s == 3.0 and step.bubble_s == 0.0
    np.testing.assert_allclose([result.step_s, result.exposed_communication_s], [7.0, 4.0])
    tp = phase_of(step, "tp")
    ends: dict[str, float] = {}
    for name, finish in zip(np.array(step.workload.names)[tp], result.run.result.finish_s[tp]):
        block = name.split(".all_reduce")[0]
        ends[block] = max(ends.get(block, 0.0), finish)
    assert ends == pytest.approx({
        "tp.s0.d0.mb0.F.l0.attn": 1.5, "tp.s0.d0.mb0.F.l0.mlp": 3.0,
        "tp.s0.d0.mb0.B.l0.mlp": 5.0, "tp.s0.d0.mb0.B.l0.attn": 7.0,
    })


def test_sequence_parallel_tp_calls_by_hand():
    # The same step with sequence parallelism: each 1 s block is framed by an all-gather of
    # 1 GB (each rank sends its 0.5 GB, 0.5 s) and a reduce-scatter of 1 GB (0.5 s), in both
    # passes. Forward: 0.5 + 0.5 + 0.5 per block (AG, attention, RS), then the MLP: 3 s;
    # backward 0.5 + 1 + 0.5 per block: 4 s. The same 7 s and 4 s exposed as the all-reduces,
    # whose bytes the two calls move between them.
    kwargs = dict(tp=2, layer_forward_s=[1.0], layer_backward_s=[2.0], layer_grad_bytes=[0.0],
                  tp_all_reduce_bytes=1 * G, costs=FREE)
    step = parallel_step(gpu_chain(2), **kwargs, sequence_parallel=True)
    result = run_training_step(gpu_chain(2), step)
    np.testing.assert_allclose([result.step_s, result.exposed_communication_s], [7.0, 4.0])
    tp = phase_of(step, "tp")
    ends: dict[tuple[str, str], float] = {}
    for name, finish in zip(np.array(step.workload.names)[tp], result.run.result.finish_s[tp]):
        block, call = re.match(r"(.*)\.(all_gather|reduce_scatter)\.", name).groups()
        ends[block, call] = max(ends.get((block, call), 0.0), finish)
    assert ends == pytest.approx({
        ("tp.s0.d0.mb0.F.l0.attn", "all_gather"): 0.5, ("tp.s0.d0.mb0.F.l0.attn", "reduce_scatter"): 1.5,
        ("tp.s0.d0.mb0.F.l0.mlp", "all_gather"): 2.0, ("tp.s0.d0.mb0.F.l0.mlp", "reduce_scatter"): 3.0,
        ("tp.s0.d0.mb0.B.l0.mlp", "all_gather"): 3.5, ("tp.s0.d0.mb0.B.l0.mlp", "reduce_scatter"): 5.0,
        ("tp.s0.d0.mb0.B.l0.attn", "all_gather"): 5.5, ("tp.s0.d0.mb0.B.l0.attn", "reduce_scatter"): 7.0,
    })
    without = parallel_step(gpu_chain(2), **kwargs)
    assert step.workload.size_bytes[tp].sum() == without.workload.size_bytes[phase_of(without, "tp")].sum()
    # Without TP (tp = 1) or TP bytes, sequence parallelism changes nothing.
    for extra in ({"tp": 1}, {"tp_all_reduce_bytes": 0.0}):
        alone = parallel_step(gpu_chain(2), **{**kwargs, **extra}, sequence_parallel=True)
        assert alone.workload.names == parallel_step(gpu_chain(2), **{**kwargs, **extra}).workload.names


def test_distributed_optimizer_by_hand():
    # dp = 2 on one 1 GB/s cable, two layers of 1 GB of gradients, a bucket each. Megatron's
    # distributed optimizer all-gathers each bucket's parameters at the start (each rank
    # sends its 0.5 GB: 0.5 s), in forward order: layer 0's [0, 0.5], layer 1's [0.5, 1].
    # Forward: layer 0 waits for its gather, [0.5, 1.5], layer 1 [1.5, 2.5] (its gather done
    # at 1). Backward: layer 1 [2.5, 4.5], its gradients reduce-scattered [4.5, 5] (0.5 GB
    # each way); layer 0 [4.5, 6.5], reduce-scattered [6.5, 7]. The all-reduces take the
    # same 7 s (1 s each, after [2, 4] and [4, 6]): half the bytes each, and the second
    # gather behind the first layer's forward.
    kwargs = dict(dp=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0], layer_grad_bytes=[1 * G, 1 * G],
                  bucket_bytes=1 * G, costs=FREE)
    step = parallel_step(gpu_chain(2), **kwargs, distributed_optimizer=True)
    result = run_training_step(gpu_chain(2), step)
    np.testing.assert_allclose([result.step_s, result.compute_s], [7.0, 4.0 + 2.0])
    names = np.array(step.workload.names)
    spans: dict[str, list[float]] = {}
    for phase in ("params", "gradients"):
        for i in np.flatnonzero(phase_of(step, phase) & (step.workload.size_bytes > 0)):
            call = names[i].split(".all_gather")[0].split(".reduce_scatter")[0]
            span = spans.setdefault(call, [np.inf, 0.0])
            span[0] = min(span[0], result.run.result.transfer_start_s[i])
            span[1] = max(span[1], result.run.result.finish_s[i])
    assert spans == {
        "params.s0.t0.bucket1": pytest.approx([0.0, 0.5]), "params.s0.t0.bucket0": pytest.approx([0.5, 1.0]),
        "dp.s0.t0.bucket0": pytest.approx([4.5, 5.0]), "dp.s0.t0.bucket1": pytest.approx([6.5, 7.0]),
    }
    # On the critical path: layer 0's gather before the forward and its reduce-scatter after
    # the backward; layer 1's run beside compute.
    assert result.breakdown.critical_communication_s["dp"] == pytest.approx(1.0)
    plain = run_training_step(gpu_chain(2), parallel_step(gpu_chain(2), **kwargs))
    assert plain.step_s == pytest.approx(7.0)
    # Without data parallelism there is nothing to shard.
    alone = parallel_step(gpu_chain(2), **{**kwargs, "dp": 1, "pp": 2}, distributed_optimizer=True)
    assert not any(n.startswith("params.") for n in alone.workload.names)


def test_distributed_optimizer_gathers_bf16_parameters_of_fp32_gradients():
    # As test_distributed_optimizer_by_hand, the 1 GB of gradients a layer reduced in FP32
    # and its parameters gathered in BF16 (param_to_grad_bytes = 0.5, Megatron's default with
    # --bf16): each gather sends 0.25 GB, 0.25 s; layer 0's [0, 0.25], layer 1's [0.25, 0.5].
    # Forward [0.25, 2.25], backward of layer 1 [2.25, 4.25], of layer 0 [4.25, 6.25], its
    # reduce-scatter of 0.5 GB each way [6.25, 6.75].
    kwargs = dict(dp=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0], layer_grad_bytes=[1 * G, 1 * G],
                  bucket_bytes=1 * G, costs=FREE, distributed_optimizer=True)
    step = parallel_step(gpu_chain(2), **kwargs, param_to_grad_bytes=0.5)
    assert run_training_step(gpu_chain(2), step).step_s == pytest.approx(6.75)
    sizes = step.workload.size_bytes
    assert sizes[phase_of(step, "params")].sum() == pytest.approx(sizes[phase_of(step, "gradients")].sum() / 2)
    with pytest.raises(InputError, match="param_to_grad_bytes must be"):
        parallel_step(gpu_chain(2), **kwargs, param_to_grad_bytes=0.0)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("pp, m", [(2, 1), (4, 4), (4, 8), (3, 5)])
def test_free_communication_leaves_the_textbook_bubble(schedule, pp, m):
    # Zero-byte sends, no software costs, zero-latency links: the step is its compute,
    # (m + pp - 1)(f + b), and the bubble (pp - 1) / (m + pp - 1) of it.
    topology = gpu_chain(pp)
    step = parallel_step(
        topology, pp=pp, n_microbatches=m, schedule=schedule, layer_forward_s=[1.0] * pp,
        layer_backward_s=[2.0] * pp, layer_grad_bytes=[0.0] * pp, costs=FREE,
    )
    result = run_training_step(topology, step)
    assert step.compute_s == pytest.approx((m + pp - 1) * 3.0, rel=1e-12)
    assert step.bubble_fraction == pytest.approx((pp - 1) / (m + pp - 1), rel=1e-12)
    assert result.step_s == pytest.approx(step.compute_s, rel=1e-12)
    assert result.exposed_communication_s == pytest.approx(0.0, abs=1e-12)


def test_one_stage_has_no_bubble_and_one_rank_no_data_parallel_step():
    # With pp = 1 the bubble was the few ulps between two float sums (1.4e-17 s), printed as
    # "pipeline bubble 0.000 ns"; a data-parallel step of one rank failed inside the
    # all-reduce ("all_reduce needs at least 2 ranks, got 1").
    topology = build_cluster("dgx_h100", 2, figure="effective")
    step = parallel_step(topology, tp=8, dp=2, n_microbatches=2, layer_forward_s=[1e-3 / 3] * 4,
                         layer_backward_s=[2e-3 / 3] * 4, layer_grad_bytes=[1e6] * 4)
    assert step.bubble_s == 0.0
    with pytest.raises(InputError, match=r"^ranks: a data-parallel step needs 2 or more ranks .* \(got 1\)"):
        data_parallel_step(topology, ranks=["n0.gpu0"], layer_backward_s=[1e-3], layer_grad_bytes=[1e6])


def test_uneven_stages_bubble_is_the_busiest_stage_idling():
    # Stage 1 twice as slow (f = 2, b = 4) as stage 0 (f = 1, b = 2), 2 microbatches, 1F1B:
    # s1 runs F0 [1,3], B0 [3,7], F1 [7,9], B1 [9,13]; s0 ends with B1 [13,15]. Stage 1
    # computes 12 s of the 15.
    step = parallel_step(
        gpu_chain(2), pp=2, n_microbatches=2, layer_forward_s=[1.0, 2.0], layer_backward_s=[2.0, 4.0],
        layer_grad_bytes=[0.0, 0.0], costs=FREE,
    )
    assert step.stage_busy_s.tolist() == [6.0, 12.0]
    assert (step.compute_s, step.bubble_s) == (15.0, 3.0)


def test_gradient_buckets_overlap_only_the_last_microbatch_backward():
    # dp = 2, two microbatches of F = 2 s and B = 4 s over two layers. The last layer's
    # gradients are final once the second backward has done it, at 2 + 4 + 2 + 2 = 10 s;
    # its bucket is all-reduced [10, 11] while layer 0's backward runs [10, 12], whose bucket
    # follows [12, 13].
    topology = gpu_chain(2)
    step = parallel_step(
        topology, n_microbatches=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
        layer_grad_bytes=[1 * G, 1 * G], bucket_bytes=1 * G, costs=FREE,
    )
    assert step.layout.dp == 2
    result = run_training_step(topology, step)
    grads = phase_of(step, "gradients")
    buckets = np.array(step.workload.tags["bucket"])
    ready, finish = result.run.result.ready_s, result.run.result.finish_s
    for bucket, (first, last) in {"0": (10.0, 11.0), "1": (12.0, 13.0)}.items():
        these = grads & (buckets == bucket)
        np.testing.assert_allclose([ready[these].min(), finish[these].max()], [first, last])
    np.testing.assert_allclose([step.compute_s, result.step_s, result.exposed_communication_s], [12.0, 13.0, 1.0])


def test_fsdp_gathers_before_each_pass_and_scatters_after_each_backward_by_hand():
    # dp = 2 on one 1 GB/s cable, two layers of 1 GB parameters, F = 1 s, B = 2 s a layer.
    # A 2-rank all-gather or reduce-scatter of 1 GB sends 0.5 GB each way: 0.5 s. The
    # gathers, in order F l0, F l1, B l1, B l0, run one after another, each once the pass two
    # gathers back has ended: [0, .5], [.5, 1], then B l1's after F l0 [0.5, 1.5]: [1.5, 2],
    # B l0's after F l1 [1.5, 2.5]: [2.5, 3]. B l1 [2.5, 4.5] then its reduce-scatter [4.5, 5];
    # B l0 [4.5, 6.5], its reduce-scatter [6.5, 7]. 6 s of compute, 1 s exposed.
    topology = two_gpus()
    step = parallel_step(
        topology, fsdp=True, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
        layer_grad_bytes=[1 * G, 1 * G], costs=FREE,
    )
    result = run_training_step(topology, step)
    np.testing.assert_allclose([step.compute_s, result.step_s, result.exposed_communication_s], [6.0, 7.0, 1.0])
    assert call_spans(step, result, lambda name: name.startswith("fsdp.")) == {
        "fsdp.s0.t0.mb0.F.l0.gather": [0.0, 0.5], "fsdp.s0.t0.mb0.F.l1.gather": [0.5, 1.0],
        "fsdp.s0.t0.mb0.B.l1.gather": [1.5, 2.0], "fsdp.s0.t0.mb0.B.l0.gather": [2.5, 3.0],
        "fsdp.s0.t0.mb0.B.l1.scatter": [4.5, 5.0], "fsdp.s0.t0.mb0.B.l0.scatter": [6.5, 7.0],
    }
    phases = np.array(step.workload.tags["phase"])
    assert set(phases[np.char.startswith(np.array(step.workload.names), "fsdp.")]) == {"params", "gradients"}


def test_fsdp_gathers_of_a_microbatch_wait_for_the_backward_before_it_by_hand():
    # As above with two microbatches. Microbatch 1's forward begins with the root's
    # pre-forward, whose gathers' stream waits for the compute before it: its first gather
    # starts when microbatch 0's last backward ends (6.5 s), not when the pass two gathers
    # back did (4.5 s), and shares the cable with that backward's reduce-scatter: both
    # [6.5, 7.5]. Then F l1's gather [7.5, 8]; F l0 [7.5, 8.5], F l1 [8.5, 9.5]; B l1's gather
    # after F l0 [8.5, 9], B l0's after F l1 [9.5, 10]; B l1 [9.5, 11.5], its reduce-scatter
    # [11.5, 12]; B l0 [11.5, 13.5], its reduce-scatter [13.5, 14].
    topology = two_gpus()
    arguments = dict(fsdp=True, n_microbatches=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
                     layer_grad_bytes=[1 * G, 1 * G], costs=FREE)
    step = parallel_step(topology, **arguments)
    result = run_training_step(topology, step)
    np.testing.assert_allclose([step.compute_s, result.step_s], [12.0, 14.0])
    spans = call_spans(step, result, lambda name: name.startswith("fsdp.s0.t0.mb1."))
    assert spans == {
        "fsdp.s0.t0.mb1.F.l0.gather": [6.5, 7.5], "fsdp.s0.t0.mb1.F.l1.gather": [7.5, 8.0],
        "fsdp.s0.t0.mb1.B.l1.gather": [8.5, 9.0], "fsdp.s0.t0.mb1.B.l0.gather": [9.5, 10.0],
        "fsdp.s0.t0.mb1.B.l1.scatter": [11.5, 12.0], "fsdp.s0.t0.mb1.B.l0.scatter": [13.5, 14.0],
    }
    # SHARD_GRAD_OP keeps the parameters from the forward to the backward, which gathers
    # nothing; a microbatch's gathers go out together as its forward begins, one after the
    # other: microbatch 0's [0, .5], [.5, 1]; microbatch 1's [6.5, 7.5] (beside the
    # reduce-scatter) and [7.5, 8]. The passes run as under FULL_SHARD.
    kept = parallel_step(topology, fsdp_sharding="grad_op", **arguments)
    result = run_training_step(topology, kept)
    np.testing.assert_allclose([kept.compute_s, result.step_s], [12.0, 14.0])
    assert call_spans(kept, result, lambda name: ".gather." in name) == {
        "fsdp.s0.t0.mb0.F.l0.gather": [0.0, 0.5], "fsdp.s0.t0.mb0.F.l1.gather": [0.5, 1.0],
        "fsdp.s0.t0.mb1.F.l0.gather": [6.5, 7.5], "fsdp.s0.t0.mb1.F.l1.gather": [7.5, 8.0],
    }
    assert len(call_spans(kept, result, lambda name: ".scatter." in name)) == 4


def test_fsdp_no_sync_reduces_after_the_last_microbatch_only_by_hand():
    # The two microbatches above, gradients accumulated under no_sync() but for the last.
    # FULL_SHARD: microbatch 0's backwards reduce-scatter nothing, so microbatch 1's first
    # gather has the cable to itself: [6.5, 7], F l1's [7, 7.5]; F l0 [7, 8], F l1 [8, 9]; B l1's
    # gather [8, 8.5], B l0's [9, 9.5]; B l1 [9, 11], its reduce-scatter [11, 11.5]; B l0
    # [11, 13], its reduce-scatter [13, 13.5]. SHARD_GRAD_OP keeps microbatch 0's gathers
    # ([0, .5], [.5, 1]) through microbatch 1, which gathers nothing: F l0 [6.5, 7.5],
    # F l1 [7.5, 8.5], B l1 [8.5, 10.5] and its reduce-scatter [10.5, 11], B l0 [10.5, 12.5]
    # and its reduce-scatter [12.5, 13].
    topology = two_gpus()
    arguments = dict(fsdp=True, fsdp_no_sync=True, n_microbatches=2, layer_forward_s=[1.0, 1.0],
                     layer_backward_s=[2.0, 2.0], layer_grad_bytes=[1 * G, 1 * G], costs=FREE)
    step = parallel_step(topology, **arguments)
    result = run_training_step(topology, step)
    np.testing.assert_allclose([step.compute_s, result.step_s], [12.0, 13.5])
    assert call_spans(step, result, lambda name: name.startswith("fsdp.s0.t0.mb1.")) == {
        "fsdp.s0.t0.mb1.F.l0.gather": [6.5, 7.0], "fsdp.s0.t0.mb1.F.l1.gather": [7.0, 7.5],
        "fsdp.s0.t0.mb1.B.l1.gather": [8.0, 8.5], "fsdp.s0.t0.mb1.B.l0.gather": [9.0, 9.5],
        "fsdp.s0.t0.mb1.B.l1.scatter": [11.0, 11.5], "fsdp.s0.t0.mb1.B.l0.scatter": [13.0, 13.5],
    }
    assert not call_spans(step, result, lambda name: ".mb0." in name and ".scatter." in name)
    kept = parallel_step(topology, fsdp_sharding="grad_op", **arguments)
    result = run_training_step(topology, kept)
    np.testing.assert_allclose([kept.compute_s, result.step_s], [12.0, 13.0])
    assert call_spans(kept, result, lambda name: name.startswith("fsdp.")) == {
        "fsdp.s0.t0.mb0.F.l0.gather": [0.0, 0.5], "fsdp.s0.t0.mb0.F.l1.gather": [0.5, 1.0],
        "fsdp.s0.t0.mb1.B.l1.scatter": [10.5, 11.0], "fsdp.s0.t0.mb1.B.l0.scatter": [12.5, 13.0],
    }


def test_fsdp_calls_every_microbatch_and_takes_no_buckets():
    # 2 microbatches x 3 layers: 12 gathers (a forward and a backward each) and 6
    # reduce-scatters, over each of the tp = 2 indices' DP groups; no bucket all-reduces.
    topology = preset("dgx_h100", figure="effective")
    step = parallel_step(
        topology, tp=2, fsdp=True, n_microbatches=2, layer_forward_s=[1e-3] * 3, layer_backward_s=[2e-3] * 3,
        layer_grad_bytes=[8e6] * 3,
    )
    assert step.layout.dp == 4
    names = step.workload.names
    calls = {re.sub(r"\.(all_gather|reduce_scatter)\..*", "", n) for n in names if n.startswith("fsdp.")}
    assert len(calls) == 2 * (12 + 6)
    assert sum(c.endswith(".gather") for c in calls) == 2 * 12
    assert not any(n.startswith("dp.") for n in names)
    result = run_training_step(topology, step)
    assert result.step_s > step.compute_s == pytest.approx(2 * 3 * 3e-3)


def two_servers_of_two_gpus(network_Bps=1 * G):
    """g0 g1 in server s0, g2 g3 in s1: 1 GB/s cables g0-g1 and g2-g3 inside them, and one
    of ``network_Bps`` from each GPU to a network switch (zero latency)."""
    b = TopologyBuilder()
    servers = [b.add_server("s0"), b.add_server("s1")]
    for i in range(4):
        b.add_node(f"g{i}", NodeKind.GPU, server=servers[i // 2])
    b.add_node("leaf", NodeKind.IB_LEAF)
    for g in ((0, 1), (2, 3)):
        b.add_cable(f"g{g[0]}", f"g{g[1]}", 1 * G, technology="nvlink4")
    for i in range(4):
        b.add_cable(f"g{i}", "leaf", network_Bps, technology="ib_ndr")
    return b.build()


def test_hybrid_fsdp_shards_inside_servers_and_all_reduces_the_shards_across_by_hand():
    # dp = 4 over two servers: FSDP's HYBRID_SHARD shards over (g0, g1) and (g2, g3) and
    # replicates over (g0, g2) and (g1, g3). One layer of 1 GB, F = 1 s, B = 2 s: each
    # server's all-gathers move 0.5 GB each way over its cable, [0, .5] (forward) and [.5, 1]
    # (backward); F [.5, 1.5], B [1.5, 3.5]; the reduce-scatter inside each server [3.5, 4];
    # then each 0.5 GB shard's all-reduce across the servers, 2 steps of 0.25 GB, [4, 4.5].
    topology = two_servers_of_two_gpus()
    step = parallel_step(
        topology, fsdp=True, fsdp_sharding="hybrid", layer_forward_s=[1.0], layer_backward_s=[2.0],
        layer_grad_bytes=[1 * G], costs=FREE,
    )
    assert step.layout.dp == 4
    result = run_training_step(topology, step)
    np.testing.assert_allclose([step.compute_s, result.step_s], [3.0, 4.5])
    expected = {}
    for g in (0, 1):
        expected |= {f"fsdp.s0.t0.g{g}.mb0.F.l0.gather": [0.0, 0.5], f"fsdp.s0.t0.g{g}.mb0.B.l0.gather": [0.5, 1.0],
                     f"fsdp.s0.t0.g{g}.mb0.B.l0.scatter": [3.5, 4.0], f"fsdp.s0.t0.r{g}.mb0.B.l0.replicate": [4.0, 4.5]}
    assert call_spans(step, result, lambda name: name.startswith("fsdp.")) == expected
    # _HYBRID_SHARD_ZERO2 shards and replicates alike but gathers for the forward only.
    kept = parallel_step(
        topology, fsdp=True, fsdp_sharding="hybrid_grad_op", layer_forward_s=[1.0], layer_backward_s=[2.0],
        layer_grad_bytes=[1 * G], costs=FREE,
    )
    result = run_training_step(topology, kept)
    assert call_spans(kept, result, lambda name: name.startswith("fsdp.")) == {
        name: span for name, span in expected.items() if ".B.l0.gather" not in name}


@pytest.mark.parametrize("kwargs, message", [
    (dict(pp=2), "fsdp lays out one pipeline stage; got pp = 2"),
    (dict(distributed_optimizer=True), "fsdp shards the parameters, which the distributed optimizer gathers"),
    (dict(ep=2, ep_all_to_all_bytes=1e6), "fsdp has no expert parallelism here"),
    (dict(layer_expert_grad_bytes=[1e6, 0.0]), "fsdp has no expert parallelism here"),
    (dict(fsdp="yes"), "fsdp must be true or false, got 'yes'"),
    (dict(fsdp_sharding="zero3"), "unknown fsdp_sharding 'zero3'; valid ones: full, hybrid, grad_op, hybrid_grad_op"),
    (dict(fsdp=False, fsdp_sharding="hybrid"), "fsdp_sharding = 'hybrid' is how FSDP shards: give fsdp = true"),
    (dict(fsdp=False, fsdp_no_sync=True), "fsdp_no_sync is how FSDP accumulates gradients: give fsdp = true"),
    (dict(fsdp_no_sync="yes"), "fsdp_no_sync must be true or false, got 'yes'"),
])
def test_bad_fsdp_is_named(kwargs, message):
    arguments = {**dict(fsdp=True, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
                        layer_grad_bytes=[1e6, 1e6], costs=FREE), **kwargs}
    with pytest.raises(InputError, match=re.escape(message)):
        parallel_step(gpu_chain(4), **arguments)


def test_data_parallel_only_matches_data_parallel_step():
    topology = preset("dgx_h100", figure="effective")
    layers = dict(layer_backward_s=[1e-3, 2e-3, 1e-3, 3e-3], layer_grad_bytes=[30e6, 10e6, 20e6, 40e6])
    old = run_training_step(topology, data_parallel_step(topology, forward_s=4e-3, **layers))
    step = parallel_step(topology, layer_forward_s=[4e-3, 0.0, 0.0, 0.0], **layers)
    new = run_training_step(topology, step)
    assert step.layout.dp == 8 and step.bubble_s == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(
        [new.step_s, new.compute_s, new.exposed_communication_s],
        [old.step_s, old.compute_s, old.exposed_communication_s], rtol=1e-12,
    )
    # Each bucket's all-reduce ends in one zero-byte ".done" flow the step adds (what comes
    # after waits for it): it ends with the bucket's last message.
    done = np.char.endswith(np.array(step.workload.names), ".done")
    grads = phase_of(step, "gradients")
    finish = new.run.result.finish_s
    np.testing.assert_allclose(np.sort(finish[grads & ~done]), np.sort(old.run.result.finish_s), rtol=1e-12)
    assert done[grads].sum() == 3 and np.all(np.isin(finish[grads & done], finish[grads & ~done]))


def test_3d_step_on_a_cluster_keeps_tp_on_nvlink_and_takes_at_least_its_compute():
    topology = build_cluster("dgx_h100", 2, figure="effective", storage_targets=2)
    step = parallel_step(
        topology, tp=4, pp=2, n_microbatches=3, layer_forward_s=[0.2e-3] * 4, layer_backward_s=[0.4e-3] * 4,
        layer_grad_bytes=[20e6] * 4, activation_bytes=8e6, tp_all_reduce_bytes=8e6, slices=1,
        checkpoint_bytes_per_rank=16e6,
    )
    assert step.layout.dp == 2
    assert step.compute_s == pytest.approx((3 + 2 - 1) * 2 * 0.6e-3, rel=1e-12)
    result = run_training_step(topology, step)
    assert result.step_s >= step.compute_s and result.exposed_communication_s > 0
    phases = np.array(step.workload.tags["phase"])
    assert set(phases) == {"tp", "pp", "gradients", "compute", "checkpoint"}
    markers = phases == "compute"
    assert (step.workload.size_bytes[markers] == 0).all() and np.isinf(step.workload.cap_Bps[markers]).all()
    assert sum(n.startswith("end.") for n in step.workload.names) == 16
    routes = result.run.routes
    tiers = {
        phase: set(topology.link_tier[routes.flow_link_indices[
            np.concatenate([np.arange(routes.flow_link_indptr[f], routes.flow_link_indptr[f + 1])
                            for f in np.flatnonzero(phases == phase)])
        ]].tolist())
        for phase in ("tp", "pp", "gradients")
    }
    # Megatron's order on 2 x 8 GPUs: node 0 holds stage 0 (both DP replicas), node 1 stage 1.
    assert tiers["tp"] == tiers["gradients"] == {LinkTier.SCALE_UP}
    assert LinkTier.SCALE_OUT in tiers["pp"]
    assert set(result.tier_utilization) == {"scale_up", "host", "scale_out"}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(pp=2, layer_forward_s=[1.0] * 3), "3 layers do not split evenly over pp = 2 stages"),
        (dict(layer_forward_s=[1.0] * 3, layer_backward_s=[1.0] * 2), "need one value per layer, got 3, 2 and 3"),
        (dict(schedule="interleaved"), "unknown schedule 'interleaved'; valid ones: 1f1b, gpipe"),
        (dict(n_microbatches=0), "n_microbatches must be a positive integer, got 0"),
        (dict(activation_bytes=-1.0), "activation_bytes must be finite and >= 0, got -1.0"),
        (dict(bucket_bytes="25M"), "bucket_bytes must be a number, got '25M'"),
        (dict(layer_forward_s=[1.0, float("nan"), 1.0]), "layer_forward_s[1] is nan"),
    ],
)
def test_bad_parallel_steps(kwargs, message):
    layers = dict(layer_forward_s=[1.0] * 3, layer_backward_s=[1.0] * 3, layer_grad_bytes=[1.0] * 3)
    with pytest.raises(InputError, match=re.escape(message)):
        parallel_step(gpu_chain(2), costs=FREE, **{**layers, **kwargs})


THREE_D = """
[topology]
preset = "dgx_h100"
figure = "effective"

[workload.training]
tp = 4
pp = 2
layers = 4
layer_forward_s = [1e-3, 1e-3, 2e-3, 2e-3]
layer_backward_s = 2e-3
layer_grad_bytes = 1e6
n_microbatches = 2
schedule = "gpipe"
activation_bytes = 4e6
tp_all_reduce_bytes = 4e6
"""


@pytest.mark.parametrize("sequence_parallel, distributed_optimizer, tp",
                         [(False, False, 4), (True, False, 4), (False, True, 2)])
def test_3d_step_from_a_scenario_matches_the_api(sequence_parallel, distributed_optimizer, tp):
    # tp = 2 leaves dp = 2 on the server's 8 GPUs, whose buckets the distributed optimizer shards.
    flags = {"sequence_parallel": sequence_parallel, "distributed_optimizer": distributed_optimizer}
    text = THREE_D.replace("tp = 4", f"tp = {tp}")
    scenario = parse_scenario(text + "".join(f"{key} = {str(value).lower()}\n" for key, value in flags.items()))
    step = parallel_step(
        scenario.topology, tp=tp, pp=2, layer_forward_s=[1e-3, 1e-3, 2e-3, 2e-3], layer_backward_s=[2e-3] * 4,
        layer_grad_bytes=[1e6] * 4, n_microbatches=2, schedule="gpipe", activation_bytes=4e6,
        tp_all_reduce_bytes=4e6, algorithm="ring", tp_algorithm="ring", **flags,
    )
    assert scenario.workload.names == step.workload.names
    assert any(n.startswith("tp.") and ".reduce_scatter." in n for n in step.workload.names) == sequence_parallel
    assert any(n.startswith("params.") for n in step.workload.names) == distributed_optimizer
    assert scenario.compute_s == step.compute_s
    from_file = run_scenario(scenario).result
    direct = run_training_step(scenario.topology, step)
    np.testing.assert_allclose(from_file.finish_s, direct.run.result.finish_s, rtol=1e-12)


def test_hybrid_fsdp_all_reduces_on_a_stream_of_their_own():
    # As above with two layers and a 0.1 GB/s network: the shards' all-reduces take 5 s.
    # Gathers [0, .5], [.5, 1], [1.5, 2], [2.5, 3]; F l0 [.5, 1.5], F l1 [1.5, 2.5], B l1
    # [2.5, 4.5], its reduce-scatter [4.5, 5] and all-reduce [5, 10]; B l0 [4.5, 6.5] and
    # its reduce-scatter [6.5, 7], not waiting for l1's all-reduce (FSDP's all-reduce stream
    # is not its post-backward stream); l0's all-reduce after l1's, [10, 15].
    topology = two_servers_of_two_gpus(network_Bps=0.1 * G)
    step = parallel_step(
        topology, fsdp=True, fsdp_sharding="hybrid", layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0],
        layer_grad_bytes=[1 * G, 1 * G], costs=FREE,
    )
    result = run_training_step(topology, step)
    np.testing.assert_allclose(result.step_s, 15.0)
    spans = call_spans(step, result, lambda name: (name.startswith("fsdp.s0.t0.g0.") and ".scatter" in name)
                       or name.startswith("fsdp.s0.t0.r0."))
    assert spans == {
        "fsdp.s0.t0.g0.mb0.B.l1.scatter": [4.5, 5.0], "fsdp.s0.t0.r0.mb0.B.l1.replicate": [5.0, 10.0],
        "fsdp.s0.t0.g0.mb0.B.l0.scatter": [6.5, 7.0], "fsdp.s0.t0.r0.mb0.B.l0.replicate": [10.0, 15.0],
    }


def test_hybrid_fsdp_needs_as_many_ranks_on_every_server():
    # 3 GPUs of one server and 1 of another in one DP group.
    b = TopologyBuilder()
    servers = [b.add_server("s0"), b.add_server("s1")]
    for i in range(4):
        b.add_node(f"g{i}", NodeKind.GPU, server=servers[i // 3])
    for x, y in (("g0", "g1"), ("g1", "g2"), ("g2", "g3")):
        b.add_cable(x, y, 1 * G, technology="nvlink4")
    with pytest.raises(InputError, match=re.escape("fsdp_sharding = 'hybrid' shards over each server's ranks of a "
                                                   "DP group, but the group of 'g0' has 1 to 3 ranks a server")):
        parallel_step(b.build(), fsdp=True, fsdp_sharding="hybrid", layer_forward_s=[1.0],
                      layer_backward_s=[2.0], layer_grad_bytes=[1e6], costs=FREE)


def test_an_fsdp_step_from_a_scenario_matches_the_api():
    text = THREE_D.replace("pp = 2\n", "").replace('schedule = "gpipe"', 'schedule = "1f1b"\nfsdp = true')
    scenario = parse_scenario(text)
    step = parallel_step(
        scenario.topology, tp=4, layer_forward_s=[1e-3, 1e-3, 2e-3, 2e-3], layer_backward_s=[2e-3] * 4,
        layer_grad_bytes=[1e6] * 4, n_microbatches=2, activation_bytes=4e6, tp_all_reduce_bytes=4e6, fsdp=True,
    )
    assert scenario.workload.names == step.workload.names
    assert any(n.startswith("fsdp.") for n in step.workload.names)
    np.testing.assert_allclose(run_scenario(scenario).result.finish_s,
                               run_training_step(scenario.topology, step).run.result.finish_s, rtol=1e-12)
    # ZeRO-2 under no_sync(), by key as by argument.
    kept = parse_scenario(text.replace("fsdp = true", 'fsdp = true\nfsdp_sharding = "grad_op"\nfsdp_no_sync = true'))
    step = parallel_step(
        scenario.topology, tp=4, layer_forward_s=[1e-3, 1e-3, 2e-3, 2e-3], layer_backward_s=[2e-3] * 4,
        layer_grad_bytes=[1e6] * 4, n_microbatches=2, activation_bytes=4e6, tp_all_reduce_bytes=4e6, fsdp=True,
        fsdp_sharding="grad_op", fsdp_no_sync=True,
    )
    assert kept.workload.names == step.workload.names
    assert not any(".mb1." in n and (".gather." in n or ".scatter." not in n and n.startswith("fsdp."))
                   for n in step.workload.names)


def test_an_interleaved_step_from_a_scenario_matches_the_api_and_its_trace_says_so(tmp_path):
    import h5py

    from flowsim.cli import main
    from flowsim.trace import _metadata_digest, _objects, open_trace

    text = THREE_D.replace('schedule = "gpipe"', 'schedule = "1f1b"\nvirtual_stages = 2')
    scenario = parse_scenario(text)
    step = parallel_step(
        scenario.topology, tp=4, pp=2, layer_forward_s=[1e-3, 1e-3, 2e-3, 2e-3], layer_backward_s=[2e-3] * 4,
        layer_grad_bytes=[1e6] * 4, n_microbatches=2, virtual_stages=2, activation_bytes=4e6,
        tp_all_reduce_bytes=4e6,
    )
    assert step.virtual_stages == 2 and scenario.workload.names == step.workload.names
    assert any(".v2to3." in n for n in step.workload.names)  # sends between virtual stages
    assert scenario.compute_s == step.compute_s
    path = tmp_path / "vp.toml"
    path.write_text(text)
    trace = tmp_path / "vp.h5"
    assert main(["run", str(path), "-o", str(trace), "-q"]) == 0
    assert open_trace(trace).training.layout["virtual_stages"] == 2
    # Traces written before flowsim stored it have no such attribute: one model chunk a rank.
    with h5py.File(trace, "r+") as root:
        del root["training"].attrs["virtual_stages"]
        root.attrs["metadata_sha256"] = _metadata_digest(_objects(trace, root))
    assert open_trace(trace).training.layout["virtual_stages"] == 1
    bad = text.replace("virtual_stages = 2", "virtual_stages = 2\nn_microbatches = 3").replace(
        "n_microbatches = 2\n", "", 1)
    with pytest.raises(InputError, match=re.escape("n_microbatches = 3 must be a multiple of it")):
        parse_scenario(bad, source="vp.toml")


def test_a_context_parallel_step_from_a_model_matches_the_api_and_older_traces_read_back(tmp_path):
    import h5py

    from flowsim.cli import main
    from flowsim.models import model_preset, step_shape
    from flowsim.trace import _metadata_digest, _objects, open_trace

    text = ('[topology]\ncluster = "dgx_h100"\nn_nodes = 1\nfigure = "effective"\n[workload.training]\n'
            'model = "llama3_8b"\nseq_len = 8192\nmfu = 0.4\ntp = 2\ncp = 2\nslices = 1\n')
    scenario = parse_scenario(text)
    shape = step_shape(model_preset("llama3_8b"), peak_flops=989e12, mfu=0.4, tp=2, seq_len=8192, cp=2)
    assert shape.cp_kv_bytes == 2 * 4096 * 8 * 128 / 2 * 2  # 2 (K, V) x tokens x kv heads x head size / tp x 2 B
    step = parallel_step(scenario.topology, tp=2, cp=2, slices=1, **shape.as_arguments())
    assert scenario.workload.names == step.workload.names and any(n.startswith("cp.") for n in step.workload.names)
    path, trace = tmp_path / "cp.toml", tmp_path / "cp.h5"
    path.write_text(text)
    assert main(["run", str(path), "-o", str(trace), "-q"]) == 0
    layout = open_trace(trace).training.layout
    assert (layout["cp"], layout["dp"]) == (2, 2)
    # Traces written before the kind "cp" and the attribute cp: the kinds and activities
    # without "cp", which reads as none.
    with h5py.File(trace, "r+") as root:
        g = root["training"]
        g.attrs["communication_kinds"] = list(g.attrs["communication_kinds"])[:-1]
        g.attrs["critical_communication_s"] = g.attrs["critical_communication_s"][:-1]
        g.attrs["activities"] = list(g.attrs["activities"])[:-1]
        del g.attrs["cp"]
        root.attrs["metadata_sha256"] = _metadata_digest(_objects(trace, root))
    older = open_trace(trace).training
    assert older.critical_communication_s["cp"] == 0.0 and older.layout["cp"] == 1


def test_a_step_without_gradient_bytes_writes_a_trace_that_reads_back(tmp_path):
    # Its ranks were counted from its gradient flows, of which it has none: the trace said
    # dp = 0, and 'flowsim inspect' refused it as damaged.
    from flowsim.cli import main
    from flowsim.trace import open_trace

    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "effective"\nstorage_targets = 2\n'
                        "[workload.training]\nlayers = 2\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 0\n"
                        "checkpoint_bytes_per_rank = 1e6\n")
    assert main(["run", str(scenario), "-o", str(tmp_path / "t.h5"), "-q"]) == 0
    assert open_trace(tmp_path / "t.h5").training.layout["dp"] == 16
    assert main(["inspect", str(tmp_path / "t.h5")]) == 0


def test_3d_example_scenario_runs_cut_down():
    path = SCENARIOS / "training_step_3d_dgx_h100.toml"
    doc = tomllib.loads(path.read_text())
    training = doc["workload"]["training"]
    assert (training["tp"], training["pp"], training["dp"]) == (8, 2, 2)
    training.update(layers=4, n_microbatches=2)  # the full step has ~3 million flows
    scenario = scenario_from_document(doc, text="", source=str(path), base_dir=path.parent)
    f, b = 2 * training["layer_forward_s"], 2 * training["layer_backward_s"]  # two layers per stage
    assert scenario.compute_s == pytest.approx((2 + 2 - 1) * (f + b), rel=1e-12)
    assert run_scenario(scenario).result.makespan_s > scenario.compute_s


@pytest.mark.parametrize(
    "training, message",
    [
        ("tp = 2\nforward_s = 1e-3", "workload.training.forward_s: is for a data-parallel step"),
        ("tp = 0\nlayer_forward_s = 1e-3", "workload.training.tp: expected an integer >= 1, got an integer 0"),
        ("pp = 2\nlayer_forward_s = 1e-3\nschedule = 'zb'",
         "workload.training.schedule: expected one of '1f1b', 'gpipe'"),
        ("tp = 2", "workload.training.layer_forward_s: missing; expected a number"),
        ("tp = 3\nlayer_forward_s = 1e-3", "workload.training: tp x pp = 3 x 1 = 3 does not divide the 8 ranks"),
        ("tp = 2\nlayer_forward_s = 1e-3\ntp_across_servers = 1",
         "workload.training.tp_across_servers: expected true or false"),
        ("pp = 2\nlayer_forward_s = 1e-3\nmicrobatches = 4", "workload.training.microbatches: unknown key"),
        ("tp = 2\nlayer_forward_s = 1e-3\ntp_algorithm = 'ringg'",
         "workload.training.tp_algorithm: no algorithm 'ringg' for all_reduce; valid ones: auto, ring,"),
        ("tp = 2\nlayer_forward_s = 1e-3\nsequence_parallel = 'yes'",
         "workload.training.sequence_parallel: expected true or false"),
        ("tp = 2\nlayer_forward_s = 1e-3\ndistributed_optimizer = 1",
         "workload.training.distributed_optimizer: expected true or false"),
    ],
)
def test_bad_3d_training_tables_name_the_key(training, message):
    text = (f'[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload.training]\nlayers = 2\n'
            f"layer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\n{training}\n")
    with pytest.raises(InputError, match=re.escape(f"step.toml: {message}")):
        parse_scenario(text, source="step.toml")


@pytest.mark.parametrize("algorithm", ["ring", "tree", "nvls_tree"])
def test_a_collective_template_opens_where_its_sender_waits_for_nothing_of_its_own(algorithm):
    # The opening flows, found at once over the CSR, against their definition flow by flow.
    from flowsim.collectives import collective_workload
    from flowsim.training import _Template

    topology = build_cluster("dgx_h100", n_nodes=2, figure="effective")
    w = collective_workload(topology, "all_reduce", 64 << 20, algorithm=algorithm).workload
    template = _Template.of(w)
    deps = [w.dependencies(i).tolist() for i in range(len(w))]
    assert template.opens == tuple(i for i, own in enumerate(deps) if all(w.src[d] != w.src[i] for d in own))
    assert 0 < len(template.opens) < len(w)


@pytest.mark.parametrize("algorithm", ["ring", "nvls_tree"])
def test_a_placed_collective_waits_for_its_senders_moments_as_its_twin_says(algorithm):
    from flowsim.collectives import collective_workload
    from flowsim.training import _Flows, _Point, _Template
    from reference import placed_dependencies_reference

    topology = build_cluster("dgx_h100", n_nodes=2, figure="effective")
    w = collective_workload(topology, "all_reduce", 64 << 20, algorithm=algorithm).workload
    template = _Template.of(w)
    flows = _Flows()
    senders = sorted(template.senders)
    before = [flows.marker(rank, _Point(), ("compute", "", "", "")) for rank in senders]
    # Senders in another order than the flows', each with two moments (one its own marker).
    points = {rank: _Point((before[k], before[k - 1]), 0.0, 0.0) for k, rank in reversed(list(enumerate(senders)))}
    offset = len(flows)
    flows.place(template, "", points, ("tp", "", "", ""))
    placed = flows.workload()
    expected = placed_dependencies_reference(template, offset, points)
    # The template is the collective's flows and its ".done" end, waiting for their sinks.
    assert len(template.names) == len(w) + 1 and template.names[-1].endswith(".done")
    assert [placed.dependencies(offset + i).tolist() for i in range(len(template.names))] == expected
    assert any(template.dep_indptr[i] == template.dep_indptr[i + 1] for i in template.opens)  # rows without own deps


def test_a_tp_all_reduce_in_a_step_takes_what_it_takes_alone_nvls_budget_included():
    # One layer, tp = 8 on each of 2 DGX H100 (dp = 2): its forward is two halves of 0.5 ms,
    # each followed by a 256 MiB TP all-reduce over NVLS, alone on the server's switch. The
    # step copies the collective in with its shared NVLS budgets (flowsim.budgets): the
    # forward's second all-reduce ends at 1 ms plus twice what flowsim's collective alone takes.
    from flowsim.collectives import collective_time

    two = build_cluster("dgx_h100", 2, figure="effective")
    size = 256 * 2**20
    step = parallel_step(two, tp=8, layer_forward_s=[1e-3], layer_backward_s=[2e-3], layer_grad_bytes=[0.0],
                         tp_all_reduce_bytes=size)
    result = run_training_step(two, step)
    tags = step.workload.tags
    first = np.array([n.startswith("tp.s0.d0.") for n in step.workload.names]) & (np.array(tags["phase"]) == "tp")
    first &= np.array(tags["microbatch"]) == "0"
    assert {t.split("=")[0] for t in np.array(tags["shared_cap"])[first] if t} == {"nvls n0.nvswitch in",
                                                                                  "nvls n0.nvswitch out"}
    group = [f"n0.gpu{i}" for i in range(8)]
    alone = collective_time(two, "all_reduce", size, ranks=group)
    assert alone.algorithm == "nvls"
    # The forward's all-reduces of d0 (the backward's follow its 2 ms of compute).
    forward = first & (result.run.result.finish_s < 2e-3 + 2 * alone.time_s)
    assert result.run.result.finish_s[forward].max() == pytest.approx(1e-3 + 2 * alone.time_s, rel=1e-9)


def test_gradient_buckets_keep_their_nvls_budget():
    # One layer's 1 GiB bucket all-reduced over NVLS on one DGX H100, after 1 ms of backward:
    # the step ends when the collective alone would, 1 ms later, its budgets included.
    from flowsim.collectives import collective_time

    one = build_cluster("dgx_h100", 1, figure="effective")
    step = data_parallel_step(one, layer_backward_s=[1e-3], layer_grad_bytes=[2.0**30], bucket_bytes=2.0**30)
    assert any(step.workload.tags["shared_cap"])
    alone = collective_time(one, "all_reduce", 2**30)
    assert alone.algorithm == "nvls"
    assert run_training_step(one, step).step_s == pytest.approx(1e-3 + alone.time_s, rel=1e-9)
