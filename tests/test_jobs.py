"""Jobs sharing a cluster (flowsim.jobs, flowsim.jobresults, a scenario's ``[[job]]`` tables):
placement, iterations, slowdown against the job alone worked out by hand, the trace's
``/jobs`` group, the run command's table, sweep metrics and the errors."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from flowsim import cli
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.jobresults import job_results
from flowsim.jobs import Placement, PlacementError, place_jobs, repeat_iterations
from flowsim.pipeline import run
from flowsim.scenario import load_scenario, parse_scenario, run_scenario
from flowsim.sweep import parse_sweep, simulate_run
from flowsim.topology import NodeKind, TopologyBuilder
from flowsim.trace import open_trace, write_trace
from flowsim.workload import Workload

DATA = Path(__file__).parents[1] / "data"

# Two one-GPU servers writing to one storage target through one Ethernet switch; every link
# 1e9 B/s each way, no latency: the switch -> storage link is the one both jobs' flows cross.
STORAGE_PAIR = """
[topology]
servers = [{name = "s0"}, {name = "s1"}]
nodes = [{name = "g0", kind = "gpu", server = "s0"}, {name = "g1", kind = "gpu", server = "s1"},
         {name = "sw", kind = "eth_switch"}, {name = "st", kind = "storage"}]
links = [{src = "g0", dst = "sw", capacity_Bps = 1e9, technology = "eth400g", duplex = true},
         {src = "g1", dst = "sw", capacity_Bps = 1e9, technology = "eth400g", duplex = true},
         {src = "sw", dst = "st", capacity_Bps = 1e9, technology = "eth400g", duplex = true}]
"""
TWO_JOBS = STORAGE_PAIR + """
[[job]]
name = "a"
ranks = ["g0"]
iterations = 2
storage = {bytes_per_gpu = 1e9}

[[job]]
name = "b"
placement = "packed"
gpus = 1
start_s = 0.5
storage = {bytes_per_gpu = 3e9}
"""


def _run(text: str, source: str = "s.toml"):
    scenario_run = run_scenario(parse_scenario(text, source=source))
    return scenario_run, job_results(scenario_run)


# --- slowdown as max-min sharing says ------------------------------------------------------


def test_two_jobs_on_one_link_slow_down_as_max_min_sharing_says():
    # Alone, each job's writes get the whole 1e9 B/s: a takes 1 s per iteration, b 3 s.
    # Shared (a starts at 0, b at 0.5, on g1: the free GPU packed takes):
    #   0 - 0.5   a alone at 1e9: a has 0.5e9 left.
    #   0.5 - 1.5 both at 0.5e9: a's first iteration ends at 1.5 (1.5 s); b has moved 0.5e9.
    #   1.5 - 3.5 a's second iteration and b at 0.5e9: a ends at 3.5 (2.0 s); b has moved
    #             1.5e9, 1.5e9 left.
    #   3.5 - 5.0 b alone at 1e9: b ends at 5.0, 4.5 s after its start.
    # Slowdowns: a (1.5 + 2.0) / 2 / 1 = 1.75; b 4.5 / 3 = 1.5.
    scenario_run, report = _run(TWO_JOBS)
    a, b = report.jobs
    assert a.job.ranks == ("g0",) and b.job.ranks == ("g1",)
    assert a.iteration_s.tolist() == pytest.approx([1.5, 2.0], rel=1e-12)
    assert a.alone_iteration_s.tolist() == pytest.approx([1.0, 1.0], rel=1e-12)
    assert b.iteration_s.tolist() == pytest.approx([4.5], rel=1e-12)
    assert b.alone_iteration_s.tolist() == pytest.approx([3.0], rel=1e-12)
    assert (a.slowdown, b.slowdown) == (pytest.approx(1.75, rel=1e-12), pytest.approx(1.5, rel=1e-12))
    assert np.isnan(a.exposed_communication_s)  # not a training job
    # The one contended link: both jobs moved bytes on it together from 0.5 to 3.5; a was
    # busy there 0 - 3.5 (its second iteration starts as its first ends), b 0.5 - 5.0.
    (link,) = report.contention
    assert link.name == "sw->st" and link.parties == ("a", "b")
    assert link.overlap_s == pytest.approx(3.0, rel=1e-12)
    assert link.bytes.tolist() == [2e9, 3e9]
    assert link.busy_s.tolist() == pytest.approx([3.5, 4.5], rel=1e-12)
    assert scenario_run.result.makespan_s == pytest.approx(5.0, rel=1e-12)


def test_a_job_alone_is_not_slowed():
    # Job b alone in the scenario: shared and alone are the same run.
    text = TWO_JOBS[: TWO_JOBS.index("[[job]]")] + TWO_JOBS[TWO_JOBS.index('[[job]]\nname = "b"'):]
    _, report = _run(text)
    (b,) = report.jobs
    assert b.iteration_s.tolist() == pytest.approx([3.0], rel=1e-12) and b.slowdown == pytest.approx(1.0)
    assert report.contention == ()


# --- iterations ----------------------------------------------------------------------------


def _line():
    b = TopologyBuilder()
    box = b.add_server("box")
    b.add_node("a", NodeKind.GPU, server=box)
    b.add_node("b", NodeKind.GPU, server=box)
    b.add_link("a", "b", 1e9, technology="nvlink4")
    return b.build()


def test_iterations_keep_start_times_and_compute_relative_to_each_iteration():
    # One iteration: x (1e9 B) at 0.5; y (1e9 B) after x plus 0.1 s, but not before 2.0;
    # compute 1.0. x finishes at 1.5; y is ready at max(2.0, 1.5 + 0.1) = 2.0 and finishes at
    # 3.0; the iteration takes max(1.0, 3.0) = 3.0. From start_s = 1, iteration 0 runs
    # 1 - 4 and iteration 1 runs 4 - 7 (x ready at 4.5, y at 6.0).
    step = Workload.build(["x", "y"], ["a", "a"], ["b", "b"], [1e9, 1e9], start_s=[0.5, 2.0],
                          depends_on=[[], ["x"]], delay_s=[0.0, 0.1])
    workload, starts, ends = repeat_iterations(step, name="j", ranks=["a"], iterations=2, start_s=1.0, compute_s=1.0)
    result = run(_line(), workload).result
    assert result.finish_s[starts].tolist() == pytest.approx([1.0, 4.0], rel=1e-12)
    assert result.finish_s[ends].tolist() == pytest.approx([4.0, 7.0], rel=1e-12)
    y1 = workload.names.index("j.it1.y")
    assert result.ready_s[y1] == pytest.approx(6.0, rel=1e-12)
    assert set(workload.tags["job"]) == {"j"} and workload.tags["iteration"][y1] == "1"


def test_an_iteration_lasts_its_compute_when_that_is_longer():
    # Compute 5.0 > communication 3.0: iterations of 5.0 from 0, so the second x is ready at
    # 5.5.
    step = Workload.build(["x", "y"], ["a", "a"], ["b", "b"], [1e9, 1e9], start_s=[0.5, 2.0],
                          depends_on=[[], ["x"]], delay_s=[0.0, 0.1])
    workload, _, ends = repeat_iterations(step, name="j", ranks=["a"], iterations=2, start_s=0.0, compute_s=5.0)
    result = run(_line(), workload).result
    assert result.finish_s[ends].tolist() == pytest.approx([5.0, 10.0], rel=1e-12)
    assert result.ready_s[workload.names.index("j.it1.x")] == pytest.approx(5.5, rel=1e-12)


def test_a_training_job_without_communication_takes_its_compute_per_iteration():
    # forward 10 ms + 2 layers x 10 ms backward = 30 ms per iteration; no gradient bytes.
    text = STORAGE_PAIR + """
[[job]]
name = "t"
ranks = ["g0", "g1"]
iterations = 3
start_s = 0.25
training = {layers = 2, forward_s = 0.01, layer_backward_s = 0.01, layer_grad_bytes = 0}
"""
    _, report = _run(text)
    (t,) = report.jobs
    assert t.iteration_s.tolist() == pytest.approx([0.03] * 3, rel=1e-12)
    assert t.exposed_communication_s == pytest.approx(0.0, abs=1e-15)


# --- placement -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def four_dgx():
    return build_cluster("dgx_h100", 4, figure="effective")


def _servers(ranks):
    return sorted({r.split(".")[0] for r in ranks})


def test_policies_choose_servers(four_dgx):
    # 4 servers of 8 GPUs; 16 GPUs are 2 whole servers.
    packed, spread = place_jobs(four_dgx, [("p", Placement(policy="packed", gpus=16)),
                                           ("s", Placement(policy="spread", gpus=8))])
    assert _servers(packed) == ["n0", "n1"] and packed[:2] == ("n0.gpu0", "n0.gpu1")
    # spread among the 2 servers left (n2, n3), 1 server: candidate 0 * 2 // 1 = n2.
    assert _servers(spread) == ["n2"]
    (spread,) = place_jobs(four_dgx, [("s", Placement(policy="spread", gpus=16))])
    assert _servers(spread) == ["n0", "n2"]  # candidates 0 * 4 // 2 and 1 * 4 // 2
    (half,) = place_jobs(four_dgx, [("h", Placement(policy="spread", gpus=16, gpus_per_server=4))])
    assert _servers(half) == ["n0", "n1", "n2", "n3"] and half[:4] == ("n0.gpu0", "n0.gpu1", "n0.gpu2", "n0.gpu3")
    first, again = (place_jobs(four_dgx, [("r", Placement(policy="random", gpus=16, seed=3))])[0] for _ in range(2))
    assert first == again and len(_servers(first)) == 2


def test_explicit_placements_go_first_and_policies_take_whole_free_servers(four_dgx):
    # The policy job comes first in the file, but b's GPU on n0 is taken first, so packed
    # skips n0 (7 free GPUs, fewer than 8).
    packed, explicit = place_jobs(four_dgx, [("a", Placement(policy="packed", gpus=8)),
                                             ("b", Placement(ranks=("n0.gpu5",)))])
    assert _servers(packed) == ["n1"] and explicit == ("n0.gpu5",)


@pytest.mark.parametrize(
    ("placements", "job", "message"),
    [
        ([("a", Placement(servers=("n0",))), ("b", Placement(ranks=("n0.gpu2",)))], 1,
         "ranks: GPU 'n0.gpu2' is job 'a''s too; a GPU runs one job"),
        ([("a", Placement(policy="packed", gpus=40))], 0,
         "gpus: 40 GPUs need 5 servers with 8 free GPUs, the cluster has 4"),
        ([("a", Placement(servers=("n0", "n1"))), ("b", Placement(policy="packed", gpus=24))], 1,
         "gpus: 24 GPUs need 3 servers with 8 free GPUs, the cluster has 2; jobs a hold 16 of its 32 GPUs"),
        ([("a", Placement(policy="packed", gpus=12))], 0,
         "gpus: 12 GPUs do not split evenly into servers of 8; set gpus_per_server to a divisor"),
        # It said "18 GPUs need 2 servers with 9 free GPUs, the cluster has 0", blaming gpus.
        ([("a", Placement(policy="packed", gpus=18, gpus_per_server=9))], 0,
         "gpus_per_server: 9, but a server of this cluster has 8 GPUs"),
        ([("a", Placement(ranks=("n0.nic0",)))], 0, "ranks: 'n0.nic0' is not a GPU"),
        ([("a", Placement(servers=("n9",)))], 0, "servers: 'n9' is not a server of the topology"),
    ],
)
def test_placement_errors_name_the_job_and_the_key(four_dgx, placements, job, message):
    with pytest.raises(PlacementError) as caught:
        place_jobs(four_dgx, placements)
    assert caught.value.job == job and str(caught.value).startswith(message)


# --- scenario errors -----------------------------------------------------------------------

JOB = '[[job]]\nname = "a"\n'


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ('placement = "tight"\ngpus = 1\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': placement: expected one of 'packed', 'spread', 'random', got 'tight'"),
        ('placement = "packed"\ngpus = 3\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': gpus: 3 GPUs need 3 servers with 1 free GPUs, the cluster has 2"),
        ('placement = "packed"\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': gpus: missing; expected the number of GPUs placement = 'packed' places"),
        ('placement = "packed"\ngpus = 1\nseed = 2\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': seed: is for placement = 'random'"),
        ('ranks = ["g0"]\ngpus = 1\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': gpus: is for a placement policy (placement = packed | spread | random)"),
        ('ranks = ["g0"]\nservers = ["s0"]\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': expected exactly one of 'placement' (a policy: packed, spread, random), "
         "'ranks' (GPU names) or 'servers' (server names); found ranks, servers"),
        ('ranks = ["g0"]', "s.toml: job[0] 'a': expected exactly one of [job.training], [job.collective] or "
         "[job.storage]; found none"),
        ('ranks = ["g0"]\nstorage = {bytes_per_gpu = -1}',
         "s.toml: job[0] 'a': storage: bytes_per_gpu: expected a number > 0, got -1"),
        ('ranks = ["g0"]\ncollective = {op = "all_reduce", size_bytes = 1e6, ranks = ["g0"]}',
         "s.toml: job[0] 'a': collective.ranks: is set by the job's placement (ranks, servers or placement)"),
        ('ranks = ["g0"]\nstart_s = -1\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': start_s: expected a number >= 0, got an integer -1"),
        ('ranks = ["g0"]\niterations = 0\nstorage = {bytes_per_gpu = 1}',
         "s.toml: job[0] 'a': iterations: expected an integer >= 1, got an integer 0"),
        ('ranks = ["g0"]\ncolour = 1\nstorage = {bytes_per_gpu = 1}', "s.toml: job[0] 'a': colour: unknown key"),
    ],
)
def test_bad_jobs_are_one_line_naming_the_job_and_key(job, message):
    with pytest.raises(InputError) as caught:
        parse_scenario(STORAGE_PAIR + JOB + job, source="s.toml")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_job_names_are_unique_and_plain():
    twice = STORAGE_PAIR + (JOB + 'ranks = ["g0"]\nstorage = {bytes_per_gpu = 1}\n') + (
        JOB + 'ranks = ["g1"]\nstorage = {bytes_per_gpu = 1}\n')
    with pytest.raises(InputError, match=r"^s.toml: job\[1\].name: job 'a' is defined twice$"):
        parse_scenario(twice, source="s.toml")
    with pytest.raises(InputError, match=r"^s.toml: job\[0\].name: expected letters, digits"):
        parse_scenario(STORAGE_PAIR + '[[job]]\nname = "a/b"\nranks = ["g0"]\nstorage = {bytes_per_gpu = 1}',
                       source="s.toml")


def test_jobs_need_no_workload_table_but_a_scenario_needs_one_or_the_other():
    assert len(parse_scenario(TWO_JOBS).workload) > 0
    with pytest.raises(InputError, match=r"^s.toml: workload: missing; expected a \[workload\] table$"):
        parse_scenario(STORAGE_PAIR, source="s.toml")


# --- traces ------------------------------------------------------------------------------


def test_the_trace_keeps_each_flows_job_and_a_job_summary(tmp_path):
    scenario_run, report = _run(TWO_JOBS)
    s = scenario_run.scenario
    path = write_trace(tmp_path / "t.h5", s.topology, s.workload, scenario_run.routes, scenario_run.result,
                       scenario_text=s.text, jobs=report.table())
    trace = open_trace(path)
    assert sorted(set(trace.tags["job"])) == ["a", "b"]
    jobs = trace.jobs
    assert jobs["name"].tolist() == ["a", "b"] and jobs["placement"].tolist() == ["ranks g0", "packed"]
    assert jobs["slowdown"].tolist() == pytest.approx([1.75, 1.5], rel=1e-12)
    assert jobs["iteration_indptr"].tolist() == [0, 2, 3]
    assert jobs["iteration_s"].tolist() == pytest.approx([1.5, 2.0, 4.5], rel=1e-12)
    assert jobs["alone_iteration_s"].tolist() == pytest.approx([1.0, 1.0, 3.0], rel=1e-12)
    assert [trace.topology.link_names[i] for i in jobs["contention_link"]] == ["sw->st", "sw->st"]
    assert jobs["contention_job"].tolist() == [0, 1]
    # A trace without jobs has none, as every trace written before jobs existed.
    plain = write_trace(tmp_path / "p.h5", s.topology, s.workload, scenario_run.routes, scenario_run.result)
    assert open_trace(plain).jobs is None
    # The checksums cover the group: a changed value or attribute is found.
    with h5py.File(path, "r+") as f:
        f["jobs"].attrs["n_jobs"] = 3
    with pytest.raises(InputError, match="damaged trace"):
        open_trace(path)


def test_run_prints_each_job_alone_shared_and_its_slowdown(tmp_path, capsys):
    scenario = tmp_path / "two_jobs.toml"
    scenario.write_text(TWO_JOBS)
    assert cli.main(["run", str(scenario), "-o", str(tmp_path / "t.h5"), "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "jobs (iteration time, mean; alone: the job by itself on the same GPUs and routes; "
        "slowdown = shared / alone):",
        "  job  kind     GPUs  placement  iters    alone   shared  slowdown  exposed comm alone/shared",
        "  a    storage     1  ranks g0       2  1.000 s  1.750 s     1.750",
        "  b    storage     1  packed         1  3.000 s  4.500 s     1.500",
        "contended links (time two or more jobs moved bytes on it together: each job's bytes, busy time):",
        "  sw->st  3.000 s: a 2.00 GB (3.500 s), b 3.00 GB (4.500 s)",
    ]
    assert open_trace(tmp_path / "t.h5").jobs is not None


def test_a_training_step_beside_jobs_is_broken_down_on_its_own_flows(tmp_path, capsys):
    # A data-parallel step on n0's 8 GPUs (NVLink only) and a storage job on n1 (its NICs and
    # the Ethernet to storage): nothing is shared, so the step breaks down as it does alone,
    # although the job's flows follow the step's in the workload.
    step = """
[topology]
cluster = "dgx_h100"
n_nodes = 2
figure = "effective"
storage_targets = 1

[workload.training]
ranks = [{}]
layers = 2
forward_s = 1e-3
layer_backward_s = 1e-3
layer_grad_bytes = 1e9
bucket_bytes = 1e9
""".format(", ".join(f'"n0.gpu{i}"' for i in range(8)))
    job = '\n[[job]]\nname = "ckpt"\nservers = ["n1"]\nstorage = {bytes_per_gpu = 1e9}\n'
    (tmp_path / "alone.toml").write_text(step)
    (tmp_path / "shared.toml").write_text(step + job)
    for name in ("alone", "shared"):
        assert cli.main(["run", str(tmp_path / f"{name}.toml"), "-o", str(tmp_path / f"{name}.h5"), "-q"]) == 0
    out = capsys.readouterr().out
    alone, shared = (open_trace(tmp_path / f"{name}.h5").training for name in ("alone", "shared"))
    assert alone is not None and shared is not None
    assert shared.step_s == alone.step_s and shared.critical_communication_s == alone.critical_communication_s
    assert shared.critical_communication_s["dp"] > 0 and shared.layout["dp"] == 8
    assert out.count("critical path") == 2 and "  ckpt " in out


# --- sweeps ------------------------------------------------------------------------------


def test_job_metrics_are_sweep_metrics(tmp_path):
    # b starting at 0 instead of 0.5: both at 0.5e9 until a's first iteration ends at 2.0
    # (b has moved 1e9); a's second iteration shares with b until 4.0 (b 1e9 left); b alone
    # ends at 5.0. a: (2 + 2) / 2 / 1 = 2.0; b: 5 / 3.
    (tmp_path / "two_jobs.toml").write_text(TWO_JOBS)
    sweep = parse_sweep(
        '[sweep]\nscenario = "two_jobs.toml"\nmetrics = ["job.a.slowdown", "job.b.slowdown", "job.b.iteration_s"]\n'
        '[sweep.grid]\n"job.1.start_s" = [0.0, 0.5]\n', base_dir=tmp_path,
    )
    rows = [simulate_run(sweep.task(r)) for r in sweep.runs]
    assert [r["job.a.slowdown"] for r in rows] == pytest.approx([2.0, 1.75], rel=1e-12)
    assert [r["job.b.slowdown"] for r in rows] == pytest.approx([5 / 3, 1.5], rel=1e-12)
    assert [r["job.b.iteration_s"] for r in rows] == pytest.approx([5.0, 4.5], rel=1e-12)


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("job.c.slowdown", r"sweep.metrics\[0\]: no job named 'c' in the scenario; its jobs: a, b"),
        ("job.a.speed", r"sweep.metrics\[0\]: unknown metric 'job.a.speed'; .*job.NAME.FIGURE \(FIGURE: slowdown"),
    ],
)
def test_job_metrics_name_jobs_of_the_scenario(tmp_path, metric, message):
    (tmp_path / "two_jobs.toml").write_text(TWO_JOBS)
    with pytest.raises(InputError, match=message):
        parse_sweep(f'[sweep]\nscenario = "two_jobs.toml"\nmetrics = ["{metric}"]\n[sweep.grid]\n"job.1.gpus" = [1]\n',
                    base_dir=tmp_path)


# --- the 16-node example -------------------------------------------------------------------


def test_the_16_node_example_runs_two_training_jobs_and_a_storage_job():
    # Packed, each training job has a scalable unit to itself and nothing slows it; the
    # storage job shares the storage targets' ports with dp's checkpoint writes.
    scenario = load_scenario(DATA / "scenarios" / "jobs_sharing_16_dgx_h100.toml")
    assert scenario.topology.n_servers == 16
    report = job_results(run_scenario(scenario))
    dp, mp, ckpt = report.jobs
    assert [j.job.kind for j in report.jobs] == ["training", "training", "storage"]
    assert (dp.slowdown, mp.slowdown) == (pytest.approx(1.0, rel=1e-9), pytest.approx(1.0, rel=1e-9))
    assert ckpt.slowdown > 1.05
    assert {p for c in report.contention for p in c.parties} == {"dp", "ckpt"}


def test_the_placement_sweep_varies_the_policy():
    sweep = parse_sweep((DATA / "sweeps" / "job_placement.toml").read_text(), base_dir=DATA / "sweeps")
    assert [r.params["job.0.placement"] for r in sweep.runs] == ["packed", "spread", "random"]
    assert "job.mp.slowdown" in sweep.metrics


def test_a_collective_job_repeats_the_collective_a_scenario_lays_out():
    # Each iteration of a repeated all-reduce alone takes what the same collective takes as a
    # [[workload.collective]] (the same layout, flowsim.collectives.collective_workload), and
    # with nothing else on the fabric shared and alone are the same.
    cluster = '[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "effective"\n'
    collective = 'op = "all_reduce", size_bytes = 67108864, nccl_env = {NCCL_ALGO = "Ring"}'
    once = run_scenario(parse_scenario(cluster + f"[[workload.collective]]\n{collective.replace(', ', chr(10))}\n"))
    _, report = _run(cluster + f'[[job]]\nname = "ar"\nservers = ["n0", "n1"]\niterations = 3\n'
                     f"collective = {{{collective}}}\n")
    (ar,) = report.jobs
    assert ar.alone_iteration_s.tolist() == pytest.approx([once.result.makespan_s] * 3, rel=1e-12)
    assert ar.iteration_s.tolist() == pytest.approx(ar.alone_iteration_s.tolist(), rel=1e-12)


# --- a training job's step broken down -----------------------------------------------------

STEP_KEYS = """tp = 4
pp = 2
dp = 2
layers = 4
layer_forward_s = 1e-3
layer_backward_s = 2e-3
layer_grad_bytes = 100e6
n_microbatches = 2
activation_bytes = 4194304
tp_all_reduce_bytes = 4194304
"""
TWO_DGX = '[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "effective"\n'


def test_a_training_jobs_step_is_broken_down_as_the_same_step_in_the_workload(tmp_path):
    # Alone on the cluster, a job's first iteration is the [workload.training] step on the
    # same GPUs, started later and framed by markers that cross no link: the same breakdown,
    # its times from the iteration's start.
    from flowsim.training import job_breakdowns, training_breakdown

    plain = parse_scenario(TWO_DGX + "[workload.training]\n" + STEP_KEYS)
    assert plain.training is not None
    step = training_breakdown(plain.topology, plain.training, plain.workload, run_scenario(plain).result)
    text = TWO_DGX + '[[job]]\nname = "t"\nservers = ["n0", "n1"]\niterations = 2\nstart_s = 0.25\n[job.training]\n'
    job_run = run_scenario(parse_scenario(text + STEP_KEYS))
    (name, got), = job_breakdowns(job_run.scenario.topology, job_run.scenario.jobs, job_run.scenario.workload,
                                   job_run.result, job_run.routes).items()
    assert name == "t" and got.step_s < 0.25  # the iteration's own time, not from the run's start
    assert got.step_s == pytest.approx(step.step_s) and got.compute_s == step.compute_s
    assert got.bubble_s == step.bubble_s and got.layout == step.layout
    assert got.critical_communication_s == pytest.approx(step.critical_communication_s)
    np.testing.assert_array_equal(got.activity_stage, step.activity_stage)
    np.testing.assert_array_equal(got.activity_kind, step.activity_kind)
    np.testing.assert_allclose(got.activity_start_s, step.activity_start_s, atol=1e-12)
    np.testing.assert_allclose(got.activity_end_s, step.activity_end_s, atol=1e-12)


def test_flowsim_run_keeps_each_training_jobs_step_and_plot_draws_them(tmp_path):
    # Two training jobs and a storage job: a trace of them had no step for --kind gantt.
    pytest.importorskip("matplotlib")
    from flowsim.plot import plot_trace

    text = (TWO_DGX.replace("figure", "storage_targets = 1\nfigure") + '[[job]]\nname = "b"\nservers = ["n1"]\n'
            '[job.training]\nlayers = 2\nforward_s = 1e-3\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e8\n'
            '[[job]]\nname = "a"\nservers = ["n0"]\n[job.training]\n' + STEP_KEYS.replace("pp = 2\ndp = 2", "pp = 2")
            + '[[job]]\nname = "w"\nplacement = "packed"\ngpus = 2\ngpus_per_server = 2\nstorage = {bytes_per_gpu = 1e6}\n')
    text = text.replace('servers = ["n1"]', 'ranks = ["n1.gpu0", "n1.gpu1"]')
    scenario = _write(tmp_path / "j.toml", text)
    assert cli.main(["run", str(scenario), "-o", str(tmp_path / "j.h5"), "-q"]) == 0
    trace = open_trace(tmp_path / "j.h5")
    assert trace.training is None
    assert list(trace.job_training) == ["b", "a"]  # the file's order, training jobs only
    assert trace.job_training["a"].layout["pp"] == 2 and trace.job_training["b"].layout["dp"] == 2
    assert plot_trace(trace, "gantt", tmp_path / "g.png").stat().st_size > 0
    with h5py.File(tmp_path / "j.h5", "r") as f:
        assert sorted(f["job_training"]) == ["a", "b"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
