"""Training steps broken down (critical path by kind, bubble, activity chart, tiers), stored in
traces, printed and plotted; model FLOPs; expert all-to-alls. Expected values by hand."""

import re

import numpy as np
import pytest

from flowsim import InputError, NodeKind, TopologyBuilder, build_cluster
from flowsim.budgets import budget_tag
from flowsim.collectives import P2P_NVLINK_EFFICIENCY, CollectiveCosts
from flowsim.hardware import gpu_peak_flops
from flowsim.models import MODEL_PRESETS, ModelShape, model_preset, step_shape
from flowsim.pipeline import run
from flowsim.scenario import parse_scenario
from flowsim.stepreport import ACTIVITIES, busiest_link, critical_path, link_groups, merged_intervals
from flowsim.trace import open_trace, write_trace
from flowsim.training import parallel_step, run_training_step
from flowsim.workload import Workload

G = 1e9
FREE = CollectiveCosts.zero()


def chain(n, rate_Bps=1 * G):
    """GPUs g0..g{n-1} of one server, each cabled to the next (zero latency)."""
    b = TopologyBuilder()
    server = b.add_server("s0")
    for i in range(n):
        b.add_node(f"g{i}", NodeKind.GPU, server=server)
    for i in range(n - 1):
        b.add_cable(f"g{i}", f"g{i + 1}", rate_Bps, technology="nvlink4")
    return b.build()


def mesh(n, rate_Bps=1 * G):
    """GPUs g0..g{n-1} of one server, every pair cabled."""
    b = TopologyBuilder()
    server = b.add_server("s0")
    for i in range(n):
        b.add_node(f"g{i}", NodeKind.GPU, server=server)
    for i in range(n):
        for j in range(i + 1, n):
            b.add_cable(f"g{i}", f"g{j}", rate_Bps, technology="nvlink4")
    return b.build()


def two_stages(**run_options):
    # Stage 0 (g0) forward 1 s, activations 1 GB over 1 GB/s (1 s), stage 1 (g1) forward 1 s
    # and backward 2 s, the gradients back (1 s), stage 0 backward 2 s: 8 s.
    topology = chain(2)
    step = parallel_step(
        topology, pp=2, layer_forward_s=[1.0, 1.0], layer_backward_s=[2.0, 2.0], layer_grad_bytes=[0.0, 0.0],
        activation_bytes=1 * G, costs=FREE,
    )
    return topology, step, run_training_step(topology, step, **run_options)


def test_two_stage_step_breaks_down_by_hand():
    _, step, result = two_stages()
    b = result.breakdown
    # Compute 6 s: the longest compute path; bubble (p - 1)(f + b) = 1 * 3 s, the fraction
    # (p - 1) / (m + p - 1) = 1 / 2 of it.
    assert (b.step_s, b.compute_s, b.bubble_s) == pytest.approx((8.0, 6.0, 3.0))
    assert step.bubble_fraction == 0.5
    # Critical path: F0 1 s, send 1 s, F1 + B1 3 s, gradient send 1 s, B0 2 s.
    assert b.critical_compute_s == pytest.approx(6.0)
    assert b.critical_communication_s["pp"] == pytest.approx(2.0)
    assert sum(v for k, v in b.critical_communication_s.items() if k != "pp") == 0.0
    # The parts add up to the step, and here the exposed time is all PP: 8 - 6 = 2 s.
    assert b.critical_path_s == pytest.approx(b.step_s)
    assert b.exposed_communication_s == pytest.approx(2.0)
    chart = sorted(zip(b.activity_stage.tolist(), [ACTIVITIES[k] for k in b.activity_kind.tolist()],
                       b.activity_start_s.tolist(), b.activity_end_s.tolist(), strict=True))
    # Each stage's forward and backward halves (attention, MLP) touch, so they merge.
    assert [row[:2] for row in chart] == [
        (0, "backward"), (0, "forward"), (0, "pp"), (1, "backward"), (1, "forward"), (1, "pp"),
    ]
    assert [row[2:] for row in chart] == [
        pytest.approx(span) for span in ((6.0, 8.0), (0.0, 1.0), (1.0, 2.0), (3.0, 5.0), (2.0, 3.0), (5.0, 6.0))
    ]


def test_critical_path_walks_dependencies_and_delays():
    # a: 1 GB over g0->g1 at 1 GB/s (1 s, TP); b waits for a plus 0.5 s of compute and
    # moves 2 GB (2 s, PP); c, a checkpoint write on g1->g2 from 0.2 s, is off the path.
    topology = chain(3)
    workload = Workload.build(
        ["a", "b", "c"], ["g0", "g0", "g1"], ["g1", "g1", "g2"], [1 * G, 2 * G, 0.1 * G],
        start_s=[0.0, 0.0, 0.2], depends_on=[[], ["a"], []], delay_s=[0.0, 0.5, 0.0],
        tags={"phase": ["tp", "pp", "checkpoint"]},
    )
    result = run(topology, workload).result
    compute, wait, communication = critical_path(workload, result)
    # 1 s TP + 0.5 s compute + 2 s PP = 3.5 s, the last finish.
    assert result.makespan_s == pytest.approx(3.5)
    assert (compute, wait) == pytest.approx((0.5, 0.0))
    assert communication == pytest.approx({"tp": 1.0, "pp": 2.0, "dp": 0.0, "ep": 0.0, "checkpoint": 0.0,
                                           "other": 0.0, "cp": 0.0})


def test_a_checkpoint_start_is_waiting():
    # One 1 GB checkpoint write from 2 s at 1 GB/s: 2 s waiting, then 1 s of checkpoint.
    topology = chain(2)
    workload = Workload.build(["w"], ["g0"], ["g1"], [1 * G], start_s=[2.0], tags={"phase": ["checkpoint"]})
    compute, wait, communication = critical_path(workload, run(topology, workload).result)
    assert (compute, wait, communication["checkpoint"]) == pytest.approx((0.0, 2.0, 1.0))


def test_merged_intervals():
    lo, hi = merged_intervals(np.array([3.0, 0.0, 0.5, 2.0]), np.array([4.0, 1.0, 2.0, 2.5]))
    # [0, 1] and [0.5, 2] overlap, [2, 2.5] touches them: one interval [0, 2.5]; then [3, 4].
    assert lo.tolist() == [0.0, 3.0] and hi.tolist() == [2.5, 4.0]


def test_tier_groups_of_a_cluster():
    topology = build_cluster("dgx_h100", 2, figure="effective", storage_targets=1)
    names, group = link_groups(topology)
    assert names == ("nvlink", "host", "infiniband", "ethernet")
    nic_to_leaf = topology.link_names.index("n0.nic0->ib.su0.rail0")
    assert names[group[nic_to_leaf]] == "infiniband"


def switched(n, rate_Bps=1 * G):
    """GPUs g0..g{n-1} of one server, each cabled to an NVSwitch ``sw`` (zero latency)."""
    b = TopologyBuilder()
    server = b.add_server("s0")
    b.add_node("sw", NodeKind.NVSWITCH, server=server)
    for i in range(n):
        b.add_node(f"g{i}", NodeKind.GPU, server=server)
        b.add_cable(f"g{i}", "sw", rate_Bps, technology="nvlink4")
    return b.build()


def test_busiest_link_by_hand():
    # g0, g1, g2 on a switch at 1 GB/s a link: 1 GB from g0 and 1 GB from g1 to g2 share
    # sw->g2 at 0.5 GB/s each: 2 s. sw->g2 carried 2 GB in 2 s, all it could; g0->sw 1 GB.
    # Over 4 s it is half busy.
    topology = switched(3)
    w = Workload.build(["a", "b"], ["g0", "g1"], ["g2", "g2"], [1 * G, 1 * G])
    outcome = run(topology, w)
    assert outcome.makespan_s == pytest.approx(2.0, rel=1e-12)
    use = busiest_link(topology, w, outcome.result, 2.0)
    assert (use.name, use.tier) == ("sw->g2", "NVLink")
    assert use.utilization == pytest.approx(1.0, rel=1e-12)
    assert busiest_link(topology, w, outcome.result, 4.0).utilization == pytest.approx(0.5, rel=1e-12)
    # Nothing moved: no busiest link.
    empty = Workload.build(["a"], ["g0"], ["g2"], [0.0])
    assert busiest_link(topology, empty, run(topology, empty).result, 1.0) is None


def test_busiest_link_names_a_budget_that_holds_flows_below_their_links():
    # Two flows on links of their own (g0 -> g1, g2 -> g3 through the switch at 1 GB/s)
    # drawing on one budget of 1 GB/s: 0.5 GB/s each, 2 s for 1 GB each. The budget moved 2 GB
    # in 2 s, each link 1 GB.
    topology = switched(4)
    tag = budget_tag("nvls sw in", 1 * G)
    w = Workload.build(["a", "b"], ["g0", "g2"], ["g1", "g3"], [1 * G, 1 * G], tags={"shared_cap": [tag, tag]})
    outcome = run(topology, w)
    assert outcome.makespan_s == pytest.approx(2.0, rel=1e-12)
    use = busiest_link(topology, w, outcome.result, 2.0)
    assert (use.name, use.tier) == ("budget nvls sw in", "NVLS-budget")
    assert use.utilization == pytest.approx(1.0, rel=1e-12)


def test_busiest_link_of_equals_is_the_farthest_out():
    # A ring across two DGX H100 moves each GPU's network share over its PCIe link to the NIC
    # and the NIC's link, both 48 GB/s effective: equally busy, the NIC's link is named.
    topology = build_cluster("dgx_h100", 2, figure="effective")
    pcie = topology.link_names.index("n0.gpu0->n0.pcie0")
    nic = topology.link_names.index("n0.nic0->ib.su0.rail0")
    assert topology.link_capacity_Bps[pcie] == topology.link_capacity_Bps[nic]
    w = Workload.build(["a"], ["n0.gpu0"], ["n1.gpu0"], [1 * G])
    outcome = run(topology, w)
    use = busiest_link(topology, w, outcome.result, outcome.makespan_s)
    assert use.tier == "InfiniBand" and use.name.startswith("n0.nic0->")


def test_breakdown_round_trips_through_the_trace(tmp_path):
    topology, step, result = two_stages()
    outcome = result.run
    path = write_trace(tmp_path / "t.h5", topology, step.workload, outcome.routes, outcome.result,
                       training=result.breakdown)
    back = open_trace(path).training
    b = result.breakdown
    assert back is not None
    assert (back.step_s, back.compute_s, back.bubble_s, back.critical_compute_s) == (
        b.step_s, b.compute_s, b.bubble_s, b.critical_compute_s)
    assert back.critical_communication_s == b.critical_communication_s
    assert back.layout == {"tp": 1, "pp": 2, "dp": 1, "ep": 1, "n_microbatches": 1, "virtual_stages": 1, "cp": 1}
    for column in ("activity_stage", "activity_kind", "activity_start_s", "activity_end_s"):
        np.testing.assert_array_equal(getattr(back, column), getattr(b, column))
    assert [(t.tier, t.top_links) for t in back.tiers] == [(t.tier, t.top_links) for t in b.tiers]
    # A trace written without a step has no breakdown.
    plain = write_trace(tmp_path / "p.h5", topology, step.workload, outcome.routes, outcome.result)
    assert open_trace(plain).training is None


def test_gantt_and_tiers_plots(tmp_path):
    pytest.importorskip("matplotlib")
    from flowsim.plot import plot_trace

    topology, step, result = two_stages(record_links=True)
    outcome = result.run
    trace = open_trace(write_trace(tmp_path / "t.h5", topology, step.workload, outcome.routes, outcome.result,
                                   training=result.breakdown))
    for kind in ("gantt", "tiers"):
        assert plot_trace(trace, kind, tmp_path / f"{kind}.png").stat().st_size > 0
    plain = open_trace(write_trace(tmp_path / "p.h5", topology, step.workload, outcome.routes, outcome.result))
    with pytest.raises(InputError, match="no training step in this trace"):
        plot_trace(plain, "gantt", tmp_path / "x.png")


# --- FLOPs from the model's shape ---------------------------------------------------------


def test_tiny_model_flops_by_hand():
    # h = 4, f = 16, 2 heads (no GQA), V = 10, plain MLP; b = 1, s = 8.
    # Attention matrices 4 h^2 = 64, MLP 2 h f = 128: 2 * 8 tokens * 192 = 3072 FLOPs, plus
    # 4 b s^2 h = 4 * 64 * 4 = 1024 for the scores: 4096. Narayanan et al. eq. 3's forward
    # part, 24 b s h^2 (1 + s / 6h) = 24 * 8 * 16 * (4 / 3) = 4096. Logits 2 b s h V = 640.
    model = ModelShape(2, 4, 16, 2, 2, 10, gated_mlp=False, seq_len=8)
    assert model.layer_forward_flops(1, 8) == 4096.0
    assert model.logits_forward_flops(1, 8) == 640.0
    # At 1000 FLOP/s, MFU 0.5, tp 2: 1000 FLOP/s per layer. Gradients per rank and layer,
    # reduced in FP32 (Megatron-LM's default with --bf16): 192 params / 2 * 4 B = 384 B,
    # plus the embedding (first layer) and the output matrix (last), 10 * 4 / 2 * 4 = 80 B;
    # the parameters gathered are BF16, half those bytes. Messages: b s h * 2 B = 64 B.
    shape = step_shape(model, peak_flops=1000.0, mfu=0.5, tp=2, micro_batch=1)
    assert shape.layer_forward_s == pytest.approx((4.096, 4.736))
    assert shape.layer_backward_s == pytest.approx((8.192, 9.472))
    assert shape.layer_grad_bytes == (464.0, 464.0) and shape.param_to_grad_bytes == 0.5
    bf16 = step_shape(model, peak_flops=1000.0, mfu=0.5, tp=2, micro_batch=1, grad_dtype_bytes=2)
    assert bf16.layer_grad_bytes == (232.0, 232.0) and bf16.param_to_grad_bytes == 1.0
    with pytest.raises(InputError, match="grad_dtype_bytes must be a finite number > 0, got 0"):
        step_shape(model, peak_flops=1000.0, mfu=0.5, grad_dtype_bytes=0)
    assert (shape.activation_bytes, shape.tp_all_reduce_bytes, shape.ep_all_to_all_bytes) == (64.0, 64.0, 0.0)
    # Sequence parallelism: each TP rank holds and sends on its 8 / 2 tokens (32 B); the TP
    # calls still carry the whole 64 B; compute and gradients are the same.
    split = step_shape(model, peak_flops=1000.0, mfu=0.5, tp=2, micro_batch=1, sequence_parallel=True)
    assert (split.activation_bytes, split.tp_all_reduce_bytes, split.ep_all_to_all_bytes) == (32.0, 64.0, 0.0)
    assert (split.layer_forward_s, split.layer_grad_bytes) == (shape.layer_forward_s, shape.layer_grad_bytes)
    with pytest.raises(InputError, match="seq_len 8 is not a multiple of tp"):
        step_shape(model, peak_flops=1000.0, mfu=0.5, tp=3, sequence_parallel=True)
    # Context parallelism over 2 ranks: each computes and sends its 4 of the 8 tokens (half
    # the FLOPs, the scores' too: its queries against all 8 keys), and holds their keys and
    # values, 2 x 4 tokens x 2 heads x 2 per head / tp 2 x 2 B = 32 B.
    halves = step_shape(model, peak_flops=1000.0, mfu=0.5, tp=2, micro_batch=1, cp=2)
    assert halves.layer_forward_s == pytest.approx((2.048, 2.368))
    assert (halves.activation_bytes, halves.tp_all_reduce_bytes, halves.cp_kv_bytes) == (32.0, 32.0, 32.0)
    assert halves.layer_grad_bytes == shape.layer_grad_bytes and shape.cp_kv_bytes == 0.0
    with pytest.raises(InputError, match="splits each sequence into 2 x cp = 6 chunks: seq_len 8 is not a multiple"):
        step_shape(model, peak_flops=1000.0, mfu=0.5, cp=3)


def test_dense_layers_of_a_mixture_of_experts_by_hand():
    # The tiny model with 4 experts of 128 parameters, top 2, ep 2, tp 1, FP32 gradients;
    # layer 0 dense (moe_layers), layer 1 the experts. Forward: layer 0 one MLP, 2 * 8 *
    # (64 + 128) + 1024 = 4096 FLOPs; layer 1 two experts a token, 2 * 8 * (64 + 256) + 1024
    # = 6144, plus the logits' 640; at 1000 * 0.5 FLOP/s 8.192 s and 13.568 s. Gradients:
    # layer 0 (64 + 128) * 4 B = 768, none of them experts'; layer 1 (64 + 2 * 128) * 4 B =
    # 1280, 1024 of them its 2 experts'; each plus the embedding's 10 * 4 * 4 B = 160.
    model = ModelShape(2, 4, 16, 2, 2, 10, gated_mlp=False, experts=4, top_k=2, seq_len=8)
    shape = step_shape(model, peak_flops=1000.0, mfu=0.5, ep=2, moe_layers=[False, True])
    assert shape.layer_forward_s == pytest.approx((8.192, 13.568))
    assert (shape.layer_grad_bytes, shape.layer_expert_grad_bytes) == ((928.0, 1440.0), (0.0, 1024.0))
    every = step_shape(model, peak_flops=1000.0, mfu=0.5, ep=2)
    assert every.layer_forward_s == pytest.approx((12.288, 13.568)) and every.layer_expert_grad_bytes == (1024.0,) * 2
    with pytest.raises(InputError, match=r"moe_layers needs one value per layer \(2\)"):
        step_shape(model, peak_flops=1000.0, mfu=0.5, moe_layers=[True])
    # In a scenario, moe_layers = false makes the step a dense model's: no all-to-alls, no
    # expert buckets, the compute of one MLP a layer.
    text = """
[topology]
cluster = "dgx_h100"
n_nodes = 1
figure = "effective"
[workload.training]
model = {layers = 2, hidden = 4, ffn = 16, heads = 2, vocab = 10, gated_mlp = false, seq_len = 8, experts = 4, top_k = 2}
mfu = 0.5
dp = 8
ep = 2
slices = 1
"""
    dense = parse_scenario(text + "moe_layers = false\n").training
    assert not any(".experts" in n or n.startswith("ep.") for n in dense.workload.names)
    assert dense.compute_s == pytest.approx(3 * (4096 + 4096 + 640) / (989e12 * 0.5), rel=1e-9)
    assert any(".experts" in n for n in parse_scenario(text).training.workload.names)


def test_llama3_8b_has_8_billion_parameters():
    # Per layer: attention 2 * 4096^2 + 2 * 4096 * 1024 = 41,943,040; SwiGLU MLP
    # 3 * 4096 * 14336 = 176,160,768. 32 layers: 6,979,321,856; embedding and output
    # 2 * 128256 * 4096 = 1,050,673,152. Total 8,029,995,008 (norms aside): "8B".
    m = MODEL_PRESETS["llama3_8b"]
    assert m.layers * (m.attention_params + m.expert_params) + 2 * m.vocab * m.hidden == 8_029_995_008


def test_model_presets_as_people_write_them():
    # '-' and '_' alike, case ignored, as system names are.
    assert model_preset("Llama3-8B") is model_preset("llama3_8b") is MODEL_PRESETS["llama3_8b"]
    assert model_preset("mixtral-8x7b") is MODEL_PRESETS["mixtral_8x7b"]
    with pytest.raises(InputError, match="unknown model 'llama3-9b'; presets: llama3_8b, "):
        model_preset("llama3-9b")


@pytest.mark.parametrize("cluster, gpu, peak", [("hgx-h800", "H800", 989e12), ("hgx-a800", "A800", 312e12),
                                                ("dgx-b300", "B300", 2.25e15)])
def test_a_model_computes_on_the_gpus_of_the_shipped_systems(cluster, gpu, peak):
    # A model step on a system file's GPU takes its datasheet's dense BF16 rate
    # (docs/hardware.md §9.1): one layer's forward of a tiny model at mfu 1 on 8 ranks.
    text = f"""
[topology]
cluster = "{cluster}"
n_nodes = 1
figure = "effective"
[workload.training]
model = {{layers = 1, hidden = 4, ffn = 16, heads = 2, vocab = 10, gated_mlp = false, seq_len = 8}}
mfu = 1.0
tp = 8
"""
    step = parse_scenario(text).training
    assert gpu_peak_flops(gpu) == peak
    assert step.compute_s == pytest.approx(3 * (4096 + 640) / (8 * peak), rel=1e-9)


@pytest.mark.parametrize("gpu, message", [
    ("V100", "no peak BF16 FLOP/s for GPU 'V100': V100 has no BF16 tensor cores; for an FP16 step give peak_flops = "
             "125e12"),
    ("H20", "no peak BF16 FLOP/s for GPU 'H20': NVIDIA publishes no datasheet for the H20; give peak_flops"),
])
def test_gpus_without_a_sourced_bf16_peak_are_named(gpu, message):
    with pytest.raises(InputError, match=re.escape(message)):
        gpu_peak_flops(gpu)


def test_bad_model_input():
    with pytest.raises(InputError, match=re.escape("mfu must lie in (0, 1]")):
        step_shape(MODEL_PRESETS["llama3_8b"], peak_flops=1e15, mfu=1.5)
    with pytest.raises(InputError, match="kv_heads"):
        ModelShape(2, 4, 16, 2, 3, 10)


def test_scenario_takes_compute_from_the_model():
    text = """
[topology]
cluster = "dgx_h100"
n_nodes = 1
figure = "effective"
[workload.training]
model = {layers = 2, hidden = 4, ffn = 16, heads = 2, vocab = 10, gated_mlp = false, seq_len = 8}
mfu = 0.5
tp = 2
pp = 2
dp = 2
slices = 1
"""
    scenario = parse_scenario(text)
    step = scenario.training
    # The H100 of the dgx_h100 preset: 989e12 FLOP/s * 0.5 * tp 2 = 989e12 per layer's FLOPs.
    # 1F1B, one microbatch, 2 stages of one layer: F0 + F1 + B1 + B0, 3 * (4096 + 4736) FLOPs.
    assert step.compute_s == pytest.approx(3 * (4096 + 4736) / 989e12, rel=1e-9)
    tp_sizes = {float(s) for s, p in zip(step.workload.size_bytes, step.workload.tags["phase"], strict=True)
                if p == "tp"}
    assert max(tp_sizes) <= 64.0
    # With sequence parallelism each rank sends the next stage its 4 of the 8 tokens: 32 B,
    # where it sent 64.
    pp_bytes = []
    for extra in ("", "sequence_parallel = true\n"):
        shaped = parse_scenario(text + extra).training.workload
        sends = np.array(shaped.tags["phase"]) == "pp"
        pp_bytes.append(shaped.size_bytes[sends].sum())
    assert pp_bytes[1] == pytest.approx(pp_bytes[0] / 2, rel=1e-12) and pp_bytes[0] > 0
    # The distributed optimizer reduce-scatters FP32 gradients and gathers BF16 parameters,
    # half the bytes; grad_dtype_bytes = 2 (--grad-reduce-in-bf16) gathers as many as it
    # reduces, and so does FSDP by default (its MixedPrecision reduces in param_dtype).
    for extra, ratio in (("distributed_optimizer = true\n", 0.5),
                         ("distributed_optimizer = true\ngrad_dtype_bytes = 2\n", 1.0),
                         ("fsdp = true\n", 1.0), ("fsdp = true\ngrad_dtype_bytes = 4\n", 0.5)):
        shaped = parse_scenario(text.replace("pp = 2", "pp = 1").replace("dp = 2", "dp = 4") + extra).training.workload
        phase = np.array(shaped.tags["phase"])
        gathered, reduced = (shaped.size_bytes[phase == p].sum() for p in ("params", "gradients"))
        assert gathered > 0 and gathered / reduced == pytest.approx(ratio * (2 if "fsdp" in extra else 1)), extra
    with pytest.raises(InputError, match=r"workload\.training\.layers: is set by model"):
        parse_scenario(text.replace("mfu = 0.5", "mfu = 0.5\nlayers = 2"))
    with pytest.raises(InputError, match=r"workload\.training\.model: unknown model 'llama9'"):
        parse_scenario(re.sub(r"^model = .*$", 'model = "llama9"', text, flags=re.M))


# --- experts ------------------------------------------------------------------------------


def test_expert_gradients_are_reduced_over_the_ranks_holding_the_same_experts():
    # dp = 4, ep = 2 on a mesh of 4 (1 GB/s a cable): ranks 0 and 2 hold the same experts,
    # and so do 1 and 3 (Megatron's expert-data-parallel groups, dp / ep = 2 ranks). One
    # layer of 1 GB of gradients, 0.6 GB of them its experts'. Forward 1 s; the backward's
    # MLP half ends at 2 s and the experts' 0.6 GB are all-reduced in each pair over its
    # own cable (2 x 1/2 x 0.6 GB, 0.6 s: 2.6 s); the attention half ends at 3 s and the
    # other 0.4 GB are all-reduced over the 4 ranks, alone by then (as long as that
    # all-reduce takes by itself).
    from flowsim.collectives import collective_time

    topology = mesh(4)
    dense = collective_time(topology, "all_reduce", 0.4 * G, ranks=["g0", "g1", "g2", "g3"], costs=FREE).time_s
    layout_of = parallel_step(topology, dp=4, ep=2, layer_forward_s=[1.0], layer_backward_s=[2.0],
                              layer_grad_bytes=[1 * G], costs=FREE).layout
    assert [layout_of.edp_group(0, 0, p) for p in range(2)] == [("g0", "g2"), ("g1", "g3")]
    step = parallel_step(topology, dp=4, ep=2, layer_forward_s=[1.0], layer_backward_s=[2.0],
                         layer_grad_bytes=[1 * G], layer_expert_grad_bytes=[0.6 * G], costs=FREE)
    result = run_training_step(topology, step)
    assert result.step_s == pytest.approx(3.0 + dense, rel=1e-9)
    names = np.array(step.workload.names)
    grads = np.array(step.workload.tags["phase"]) == "gradients"
    ends: dict[str, float] = {}
    for name, finish in zip(names[grads], result.run.result.finish_s[grads]):
        stream = name.split(".all_reduce")[0]
        ends[stream] = max(ends.get(stream, 0.0), finish)
    assert ends == pytest.approx({"dp.s0.t0.experts0.bucket0": 2.6, "dp.s0.t0.experts1.bucket0": 2.6,
                                  "dp.s0.t0.bucket0": 3.0 + dense})
    # Each rank sends its pair 2 x 1/2 x 0.6 GB of expert gradients; a ring all-reduce of the
    # other 0.4 GB, 2 x 3/4 of them.
    experts = grads & np.array([".experts" in n for n in names])
    assert step.workload.size_bytes[experts].sum() == pytest.approx(4 * 0.6 * G)
    assert step.workload.size_bytes[grads & ~experts].sum() == pytest.approx(4 * 0.6 * G)
    # With ep = dp every rank holds experts of its own: only the other 0.4 GB are reduced.
    alone = parallel_step(topology, dp=4, ep=4, layer_forward_s=[1.0], layer_backward_s=[2.0],
                          layer_grad_bytes=[1 * G], layer_expert_grad_bytes=[0.6 * G], costs=FREE)
    phase = np.array(alone.workload.tags["phase"]) == "gradients"
    assert alone.workload.size_bytes[phase].sum() == pytest.approx(4 * 2 * 3 / 4 * 0.4 * G)
    assert not any(".experts" in n for n in alone.workload.names)
    with pytest.raises(InputError, match=re.escape("layer_expert_grad_bytes[0] = 2000000000.0 is more than layer "
                                                   "0's gradients, layer_grad_bytes[0] = 1000000000.0")):
        parallel_step(topology, dp=4, ep=2, layer_forward_s=[1.0], layer_backward_s=[2.0],
                      layer_grad_bytes=[1 * G], layer_expert_grad_bytes=[2 * G], costs=FREE)


def test_expert_all_to_alls_follow_the_skew():
    # dp = ep = 4 ranks, 1 layer, 1 microbatch: forward dispatch and combine, backward combine
    # and dispatch, 4 all-to-alls of 4 * 3 flows. 4 MB dispatched per rank; skew 2: rank 0
    # of the group takes 2/4 of every rank's tokens, the other three 1/6 each. A flow to
    # (dispatch) or from (combine) rank 0 carries 2 MB, any other 4/6 MB.
    topology = mesh(4)
    step = parallel_step(
        topology, dp=4, ep=4, layer_forward_s=[1.0], layer_backward_s=[2.0], layer_grad_bytes=[0.0],
        ep_all_to_all_bytes=4e6, ep_skew=2.0, costs=FREE,
    )
    w = step.workload
    # (Each all-to-all also ends in one zero-byte ".done" flow: 4 of them.)
    ep = [i for i, p in enumerate(w.tags["phase"]) if p == "ep" and not w.names[i].endswith(".done")]
    assert len(ep) == 48
    assert sum(p == "ep" for p in w.tags["phase"]) == 52
    for i in ep:
        expert = w.dst[i] if "dispatch" in w.names[i] else w.src[i]
        assert w.size_bytes[i] == pytest.approx(2e6 if expert == "g0" else 4e6 / 6)
    result = run_training_step(topology, step)
    assert result.breakdown.critical_communication_s["ep"] > 0
    assert result.breakdown.critical_path_s == pytest.approx(result.step_s)


def test_bad_expert_input():
    with pytest.raises(InputError, match="ep = 3 does not divide dp = 4"):
        parallel_step(chain(4), dp=4, ep=3, layer_forward_s=[1.0], layer_backward_s=[1.0], layer_grad_bytes=[0.0])
    with pytest.raises(InputError, match=re.escape("ep_skew must lie in [1, ep = 2]")):
        parallel_step(chain(4), dp=4, ep=2, ep_skew=3.0, layer_forward_s=[1.0], layer_backward_s=[1.0],
                      layer_grad_bytes=[0.0])


def test_inspect_and_utilization_plot_show_each_tier(tmp_path):
    # One 1 GB flow from n0.gpu0 to n1.gpu0 crosses PCIe and InfiniBand, no NVLink or
    # front-end Ethernet; the
    # summary lists each tier's busiest links, and a utilization plot can keep to one tier.
    from flowsim.summary import describe

    topology = build_cluster("dgx_h100", 2, figure="effective")
    workload = Workload.build(["f"], ["n0.gpu0"], ["n1.gpu0"], [1 * G])
    outcome = run(topology, workload, record_links=True)
    trace = open_trace(write_trace(tmp_path / "t.h5", topology, workload, outcome.routes, outcome.result))
    lines = describe(trace).splitlines()
    tiers = lines[lines.index("busiest links per tier (top 3):") + 1:]
    assert [row.split()[0] for row in tiers] == ["NVLink", "PCIe/host", "InfiniBand", "Ethernet"]
    assert tiers[0].endswith("none carried traffic") and tiers[3].endswith("none carried traffic")
    assert "n0.nic0->ib.su0.rail0" in tiers[2]
    pytest.importorskip("matplotlib")
    from flowsim.plot import plot_trace

    assert plot_trace(trace, "utilization", tmp_path / "ib.png", tier="infiniband").stat().st_size > 0
    with pytest.raises(InputError, match="no link tier 'scale_out' in this trace; tiers: nvlink, host, infiniband, "):
        plot_trace(trace, "utilization", tmp_path / "x.png", tier="scale_out")


def test_tier_use_over_the_step_counts_the_steps_own_flows(tmp_path):
    # A data-parallel step of 2 GPUs of 2 DGX H100 (1 ms of backward, 1 MB of gradients), and
    # after it a send of 10 GB between the same GPUs. Over the step the links carry the step's
    # all-reduce alone: counting the send's bytes too gave them far more use than room.
    from flowsim.cli import main as run_main

    base = tmp_path / "s.toml"
    base.write_text(
        '[topology]\ncluster = "dgx_h100"\nfigure = "effective"\nn_nodes = 2\n'
        '[workload.training]\nlayers = 1\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\n'
        'ranks = ["n0.gpu0", "n1.gpu0"]\n'
    )
    late = tmp_path / "late.toml"
    late.write_text(base.read_text() + '[[workload.collective]]\nop = "send"\nsize_bytes = 1e10\nstart_s = 1.0\n'
                    'ranks = ["n0.gpu0", "n1.gpu0"]\nname = "late"\n')
    uses = []
    for scenario in (base, late):
        assert run_main(["run", str(scenario), "-o", str(tmp_path / f"{scenario.stem}.h5"), "-q"]) == 0
        tiers = open_trace(tmp_path / f"{scenario.stem}.h5").training.tiers
        uses.append([(t.tier, t.max_utilization) for t in tiers])
    assert uses[1] == uses[0] and all(u <= 1.0 for _, u in uses[1])


def test_tiny_mixture_of_experts_by_hand():
    # The tiny model of test_tiny_model_flops_by_hand with 4 experts, each token to 2:
    # matrices 64 + 2 * 128 = 320, 2 * 8 * 320 + 1024 = 6144 FLOPs per layer forward. On
    # ep = 2, a rank holds 4 / 2 experts: 64 + 2 * 128 = 320 params, * 2 B = 640 B per layer
    # of BF16 gradients (tp 1), plus the embedding 10 * 4 * 2 = 80 B on the first and last. A
    # dispatch sends b s h * 2 B * top_k = 64 * 2 = 128 B.
    model = ModelShape(2, 4, 16, 2, 2, 10, gated_mlp=False, experts=4, top_k=2, seq_len=8)
    assert model.layer_forward_flops(1, 8) == 6144.0
    shape = step_shape(model, peak_flops=1000.0, mfu=1.0, ep=2, grad_dtype_bytes=2)
    assert shape.layer_grad_bytes == (720.0, 720.0)
    # Of those, the two experts' 2 * 128 params * 2 B = 512 B per layer; none for a dense MLP.
    assert shape.layer_expert_grad_bytes == (512.0, 512.0)
    dense = ModelShape(2, 4, 16, 2, 2, 10, gated_mlp=False, seq_len=8)
    assert step_shape(dense, peak_flops=1000.0, mfu=1.0).layer_expert_grad_bytes == (0.0, 0.0)
    assert shape.ep_all_to_all_bytes == 128.0
    with pytest.raises(InputError, match="ep = 3 does not divide the model's 4 experts"):
        step_shape(model, peak_flops=1000.0, mfu=1.0, ep=3)


def test_scenario_expert_keys():
    text = """
[topology]
cluster = "dgx_h100"
n_nodes = 1
figure = "effective"
[workload.training]
tp = 2
dp = 4
ep = 2
layers = 2
layer_forward_s = 1e-3
layer_backward_s = 2e-3
layer_grad_bytes = 0
ep_all_to_all_bytes = 1e6
ep_skew = 1.5
moe_layers = [true, false]
sequence_parallel = true
slices = 1
"""
    step = parse_scenario(text).training
    # Only layer 0 is MoE: 4 all-to-alls per microbatch, for each of 2 TP indices and 2 EP
    # groups, each 2 * 1 flows: 32 flows. Skew 1.5 on 2 ranks: shares 0.75 and 0.25 of a
    # rank's 1e6 dispatched bytes, so a flow to (or from) the first rank carries 0.75e6
    # bytes, one to (or from) the second 0.25e6: over NVLink, that payload over
    # P2P_NVLINK_EFFICIENCY on the wire. (Each all-to-all also ends in one zero-byte ".done" flow.)
    sizes = sorted(float(size) for size, phase in zip(step.workload.size_bytes, step.workload.tags["phase"],
                                                      strict=True) if phase == "ep" and size > 0)
    wire = [0.25e6 / P2P_NVLINK_EFFICIENCY] * 16 + [0.75e6 / P2P_NVLINK_EFFICIENCY] * 16
    assert sizes == pytest.approx(wire, rel=1e-15)
    with pytest.raises(InputError, match=r"workload\.training\.moe_layers: expected true, false or a list of 2"):
        parse_scenario(text.replace("moe_layers = [true, false]", "moe_layers = [true]"))
    # Megatron-LM's MoE layers refuse tensor parallelism without sequence parallelism
    # (MoELayer.forward): so does the step, unless no layer has experts.
    plain = text.replace("sequence_parallel = true\n", "")
    with pytest.raises(InputError, match=re.escape("workload.training: experts with tp = 2 need sequence_parallel = "
                                                   "true, as Megatron-LM's MoE layers do under tensor parallelism")):
        parse_scenario(plain)
    assert parse_scenario(plain.replace("moe_layers = [true, false]", "moe_layers = false")).training.layout.tp == 2
    # The experts' share of the gradients, per layer: all-reduced over each pair of DP
    # indices at the same place in their expert groups (0 and 2, 1 and 3), the rest over
    # all four; per stream one bucket (2 layers of 2e6 bytes fit 25 MiB).
    grads = text.replace("layer_grad_bytes = 0", "layer_grad_bytes = 2e6\nlayer_expert_grad_bytes = [1e6, 0]")
    step = parse_scenario(grads).training
    w = step.workload
    calls = {n.split(".all_reduce")[0] for n, p in zip(w.names, w.tags["phase"], strict=True) if p == "gradients"}
    assert calls == {f"dp.s0.t{t}.{kind}bucket0" for t in range(2) for kind in ("", "experts0.", "experts1.")}
    expert_flows = [i for i, n in enumerate(w.names) if ".experts" in n and w.size_bytes[i] > 0]
    assert {frozenset((w.src[i], w.dst[i])) for i in expert_flows} == {
        frozenset(("n0.gpu0", "n0.gpu4")), frozenset(("n0.gpu1", "n0.gpu5")),  # t0, t1 of EP position 0
        frozenset(("n0.gpu2", "n0.gpu6")), frozenset(("n0.gpu3", "n0.gpu7")),  # and of position 1
    }
    with pytest.raises(InputError, match=re.escape("workload.training: layer_expert_grad_bytes[0] = 3000000.0 is "
                                                   "more than layer 0's gradients")):
        parse_scenario(grads.replace("[1e6, 0]", "[3e6, 0]"))
    with pytest.raises(InputError, match=r"workload\.training\.layer_expert_grad_bytes: is set by model"):
        parse_scenario("[topology]\ncluster = 'dgx_h100'\nn_nodes = 1\nfigure = 'effective'\n[workload.training]\n"
                       "model = 'mixtral_8x7b'\nmfu = 0.4\ndp = 8\nep = 4\nlayer_expert_grad_bytes = 0\n")
