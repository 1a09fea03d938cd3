"""Shared rate budgets (flowsim.budgets): flows tagged with one budget share its capacity as
they would share a link, and results show the topology's links only."""

from __future__ import annotations

import numpy as np
import pytest

from flowsim.budgets import SHARED_CAP_TAG, budget_links, budget_tag
from flowsim.engine import simulate
from flowsim.errors import InputError
from flowsim.pipeline import run
from flowsim.routes import Routes
from flowsim.routing import Router
from flowsim.strings import CodedStrings
from flowsim.timeline import run_many
from flowsim.topology import NodeKind, TopologyBuilder
from flowsim.workload import Workload

G = 1e9


def _star(extra_link: bool = False):
    """g0..g3 cabled to one switch at 10 GB/s each way; with ``extra_link``, a switch ``pool``
    behind a 4 GB/s link each way, standing for a budget as a real link."""
    b = TopologyBuilder()
    s = b.add_server("box")
    b.add_node("sw", NodeKind.NVSWITCH, server=s)
    for i in range(4):
        b.add_node(f"g{i}", NodeKind.GPU, server=s)
        b.add_cable(f"g{i}", "sw", 10 * G, technology="nvlink4")
    if extra_link:
        b.add_node("pool", NodeKind.NVSWITCH, server=s)
        b.add_cable("sw", "pool", 4 * G, technology="nvlink4")
    return b.build()


def _two_flows(tags):
    # g0 -> g1 and g2 -> g3 cross no link in common: 10 GB/s each, alone.
    return Workload.build(["a", "b"], ["g0", "g2"], ["g1", "g3"], [8 * G, 4 * G], tags={SHARED_CAP_TAG: tags})


def test_flows_on_one_budget_share_it_as_a_link():
    # Budget 4 GB/s: 2 GB/s each until b's 4 GB end at 2 s, then a alone at 4 GB/s: its
    # remaining 4 GB take 1 s more.
    budget = budget_tag("pool", 4 * G)
    out = run(_star(), _two_flows([budget, budget]))
    assert out.result.finish_s.tolist() == pytest.approx([3.0, 2.0], rel=1e-12)
    # Each on its own budget, or none: the links' 10 GB/s, and the budgets' 4 GB/s.
    assert run(_star(), _two_flows(["", ""])).result.finish_s.tolist() == pytest.approx([0.8, 0.4])
    apart = run(_star(), _two_flows([budget_tag("x", 4 * G), budget_tag("y", 4 * G)]))
    assert apart.result.finish_s.tolist() == pytest.approx([2.0, 1.0])
    # One group tagged with two capacities takes the smaller.
    both = run(_star(), _two_flows([budget_tag("pool", 4 * G), budget_tag("pool", 8 * G)]))
    assert both.result.finish_s.tolist() == pytest.approx([3.0, 2.0])


def test_a_budget_leaves_the_topologys_links_and_records_as_a_link_would():
    # The same two flows, once through a real 4 GB/s link (sw -> pool -> sw is not a route,
    # so each flow's route gets that link appended by hand) and once on a 4 GB/s budget:
    # the same times, the same pieces on every link of the topology, the same flow pieces.
    topology = _star(extra_link=True)
    budget = budget_tag("pool", 4 * G)
    tagged = run(topology, _two_flows([budget, budget]), record_links=True, record_flows=True).result
    routes = Router(topology).route(topology.node_ids(["g0", "g2"]), topology.node_ids(["g1", "g3"]))
    pool = topology.link_between("sw", "pool")
    indptr = routes.flow_link_indptr + np.array([0, 1, 2])
    indices = np.insert(routes.flow_link_indices, routes.flow_link_indptr[1:], pool)
    plain = simulate(Routes.from_csr(indptr, indices, topology.n_links), topology.link_capacity_Bps,
                     np.array([8 * G, 4 * G]), record_links=True, record_flows=True)
    np.testing.assert_allclose(tagged.finish_s, plain.finish_s, rtol=1e-12)
    assert tagged.link_bytes.shape == (topology.n_links,)
    assert tagged.link_bytes[pool] == 0.0  # the budget is not the real link
    for link in range(topology.n_links):
        if link != pool:
            for got, want in zip(tagged.link_segments(link), plain.link_segments(link), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12)
    for flow in range(2):
        for got, want in zip(tagged.flow_segments(flow), plain.flow_segments(flow), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_runs_prepared_for_a_batch_leave_budgets_out_too():
    budget = budget_tag("pool", 4 * G)
    (out,) = run_many([(_star(), _two_flows([budget, budget]))])
    assert out.result.finish_s.tolist() == pytest.approx([3.0, 2.0], rel=1e-12)
    assert out.result.link_bytes.shape == (_star().n_links,)


@pytest.mark.parametrize("tag", ["pool", "pool=", "=4e9", "pool=-1", "pool=inf", "pool=nan", "pool=fast"])
@pytest.mark.parametrize("column", [list, CodedStrings.from_strings], ids=["tuple", "coded"])
def test_a_malformed_budget_names_its_flow(tag, column):
    with pytest.raises(InputError, match=f"flow 'b' has shared_cap '{tag}'; expected GROUP=CAPACITY"):
        budget_links(_two_flows(column(["", tag])), 10)


def test_budgets_of_a_coded_column_are_those_of_its_values():
    budget = budget_tag("pool", 4 * G)
    plain = budget_links(_two_flows(["", budget]), 10)
    coded = budget_links(_two_flows(CodedStrings.from_strings(["", budget])), 10)
    assert plain.link_of_flow.tolist() == coded.link_of_flow.tolist() == [-1, 10]
    assert plain.capacity_Bps.tolist() == coded.capacity_Bps.tolist() == [4 * G]


def test_budget_tags_refuse_what_they_could_not_read_back():
    assert budget_tag("nvls sw in", 2.5e12) == "nvls sw in=2500000000000.0"
    with pytest.raises(InputError, match="group must be a non-empty name without '='"):
        budget_tag("a=b", 1.0)
    with pytest.raises(InputError, match="capacity must be finite and > 0"):
        budget_tag("a", 0.0)
    assert budget_links(_two_flows(["", ""]), 10) is None


def test_a_flow_lists_shared_cap_column_puts_its_flows_on_one_budget(tmp_path):
    # Two 1 GB reads on disjoint NVLinks of a DGX H100 share a 4 GB/s budget: 2 GB/s each,
    # 0.5 s (the links' few microseconds of latency aside); without it, microseconds.
    from flowsim.scenario import parse_scenario, run_scenario

    (tmp_path / "flows.csv").write_text(
        "name,src,dst,size_bytes,shared_cap\nread0,gpu0,gpu1,1e9,disk=4e9\nread1,gpu2,gpu3,1e9,disk=4e9\n")
    text = '[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload]\nflows = "flows.csv"\n'
    result = run_scenario(parse_scenario(text, base_dir=tmp_path)).result
    assert result.finish_s.tolist() == pytest.approx([0.5, 0.5], rel=1e-4)
    (tmp_path / "flows.csv").write_text("name,src,dst,size_bytes,shared_cap\nread0,gpu0,gpu1,1e9,disk\n")
    with pytest.raises(InputError, match="flow 'read0' has shared_cap 'disk'; expected GROUP=CAPACITY"):
        run_scenario(parse_scenario(text, base_dir=tmp_path))


def test_a_time_sweep_of_nvls_all_reduces_on_the_cpu_batch_equals_the_engine(tmp_path):
    # One and two DGX H100, NVLS and NVLSTree at two sizes: the batch prepares runs with
    # their budgets as the engine simulates them, and both leave the budgets out of the links.
    from flowsim.sweep import load_sweep, read_results, run_sweep

    (tmp_path / "nvls.toml").write_text(
        '[topology]\ncluster = "dgx_h100"\nn_nodes = 1\nfigure = "effective"\n'
        '[[workload.collective]]\nop = "all_reduce"\nsize_bytes = 67108864\n')
    (tmp_path / "sweep.toml").write_text(
        '[sweep]\nscenario = "nvls.toml"\nmetrics = ["makespan_s", "max_link_utilization", '
        '"utilization_mean_scale_up"]\n[sweep.grid]\n"topology.n_nodes" = [1, 2]\n'
        '"workload.collective.0.size_bytes" = [67108864, 1073741824]\n')
    sweep = load_sweep(tmp_path / "sweep.toml")
    batched = run_sweep(sweep, tmp_path / "batch.h5", backend="cpu", workers=1)
    engine = run_sweep(sweep, tmp_path / "engine.h5", workers=1)
    assert (batched.n_failed, engine.n_failed) == (0, 0)
    got, want = read_results(batched.output).columns, read_results(engine.output).columns
    assert list(got["ran_on"]) == ["cpu"] * 4
    for metric in sweep.metrics:
        np.testing.assert_allclose(got[metric], want[metric], rtol=1e-9, err_msg=metric)
