"""Training steps end to end: lay the step out (:func:`flowsim.training.parallel_step`), then
simulate it and break it down (:func:`flowsim.training.run_training_step`).

Full scale, compute and message sizes from the model's shape at 40% of the H100's peak:
Llama 3 70B on 8 DGX H100 (tp = 8, pp = 4, dp = 2, 8 microbatches) in 1F1B and, side by
side, in Megatron's interleaved 1F1B with two model chunks a rank (twice the pipeline
sends); Llama 3 8B on 4 DGX H100 (dp = 32, 2 microbatches) under FSDP's hybrid sharding;
Llama 3 8B on one DGX H100 with context parallelism (tp = 2, cp = 4, 32,768-token
sequences). ``--flows-scale`` shrinks the microbatches (the 3D steps) and the servers (FSDP).
``extra_info`` records the step's flows, its time and its compute. Each is run once before it
is timed: the first layout of a session loads compiled kernels and warms the router's caches.
"""

import pytest

from flowsim.fabrics import build_cluster
from flowsim.hardware import gpu_peak_flops
from flowsim.models import model_preset, step_shape
from flowsim.training import parallel_step, run_training_step

H100 = gpu_peak_flops("H100")


def lay_out_and_run(topology, **options):
    step = parallel_step(topology, slices=1, **options)
    return step, run_training_step(topology, step)


def record(benchmark, step, result):
    benchmark.extra_info.update(n_flows=len(step.workload), step_s=result.step_s, compute_s=step.compute_s)


@pytest.mark.parametrize("virtual_stages", [1, 2], ids=["1f1b", "interleaved"])
def test_llama3_70b_pipeline(benchmark, flows_scale, virtual_stages):
    topology = build_cluster("dgx_h100", 8, figure="effective")
    shape = step_shape(model_preset("llama3_70b"), peak_flops=H100, mfu=0.4, tp=8)
    microbatches = max(4, 4 * round(8 * flows_scale / 4))  # a multiple of pp, as interleaving needs
    step, result = benchmark.pedantic(
        lay_out_and_run, args=(topology,), rounds=1, iterations=1, warmup_rounds=1,
        kwargs=dict(tp=8, pp=4, n_microbatches=microbatches, virtual_stages=virtual_stages, **shape.as_arguments()),
    )
    record(benchmark, step, result)


def test_llama3_8b_fsdp_hybrid(benchmark, flows_scale):
    topology = build_cluster("dgx_h100", max(2, round(4 * flows_scale)), figure="effective")
    # FSDP's mixed precision reduces the gradients in the parameters' BF16 (flowsim.scenario).
    shape = step_shape(model_preset("llama3_8b"), peak_flops=H100, mfu=0.4, grad_dtype_bytes=2)
    step, result = benchmark.pedantic(
        lay_out_and_run, args=(topology,), rounds=1, iterations=1, warmup_rounds=1,
        kwargs=dict(fsdp=True, fsdp_sharding="hybrid", n_microbatches=2, **shape.as_arguments()),
    )
    record(benchmark, step, result)


def test_llama3_8b_context_parallel(benchmark):
    topology = build_cluster("dgx_h100", 1, figure="effective")
    shape = step_shape(model_preset("llama3_8b"), peak_flops=H100, mfu=0.4, tp=2, cp=4, seq_len=32768)
    step, result = benchmark.pedantic(
        lay_out_and_run, args=(topology,), rounds=1, iterations=1, warmup_rounds=1, kwargs=dict(tp=2, cp=4, **shape.as_arguments()),
    )
    record(benchmark, step, result)
