"""Scenario files: the examples load, and every bad input names the file and the key."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import types
import typing
from pathlib import Path

import numpy as np
import pytest

from flowsim import scenario as scenario_module
from flowsim.collectives.builders import check_algorithm, check_protocol
from flowsim.collectives.placement import check_nvswitch
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.presets import preset_info, preset_names
from flowsim.scenario import load_scenario, parse_scenario, read_flow_csv, run_scenario
from flowsim.workload import Workload

# Examples with [[workload.collective]] tables need flowsim.collectives.
EXAMPLES = [
    path
    for path in sorted((Path(__file__).parents[1] / "data" / "scenarios").glob("*.toml"))
    if importlib.util.find_spec("flowsim.collectives") or "[[workload.collective]]" not in path.read_text()
]

TWO_GPUS = """
[topology]
servers = [{name = "box"}]
nodes = [{name = "a", kind = "gpu", server = "box"}, {name = "b", kind = "gpu", server = "box"}]
links = [{src = "a", dst = "b", capacity_Bps = 1e9, latency_s = 0.5, technology = "nvlink4", duplex = true}]
"""
FLOWS = "name,src,dst,size_bytes,depends_on,job\nx,a,b,1e9,,train\ny,b,a,5e8,x,\n"


def _scenario(tmp_path: Path, text: str, csv_text: str = FLOWS) -> Path:
    (tmp_path / "flows.csv").write_text(csv_text)
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {"pcie_server_all_to_all.toml", "dgx_h100_all_to_all.toml", "rail_optimized_cluster.toml",
            "storage_during_training.toml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_load(path):
    scenario = load_scenario(path)
    assert scenario.source == str(path) and scenario.text == path.read_text()
    assert scenario.name == path.stem and scenario.description
    assert len(scenario.workload) > 0 and scenario.topology.n_links > 0


def test_explicit_topology_runs_as_computed_by_hand(tmp_path):
    """x: 1e9 B over 1e9 B/s after 0.5 s latency; y waits for x, then 5e8 B after 0.5 s."""
    scenario = load_scenario(_scenario(tmp_path, TWO_GPUS + '[workload]\nflows = "flows.csv"\n'))
    assert scenario.topology.link_names == ("a->b", "b->a")
    assert scenario.workload.tags == {"job": ("train", "")}
    result = run_scenario(scenario).result
    np.testing.assert_allclose(result.ready_s, [0.0, 1.5])
    np.testing.assert_allclose(result.transfer_start_s, [0.5, 2.0])
    np.testing.assert_allclose(result.finish_s, [1.5, 2.5])


def test_preset_parameters_reach_the_builder(tmp_path):
    text = '[topology]\npreset = "pcie_server"\nfigure = "nominal"\np2p = false\n[workload]\nflows = "flows.csv"\n'
    csv_text = "name,src,dst,size_bytes\nx,gpu0,gpu7,1e6\n"
    scenario = load_scenario(_scenario(tmp_path, text, csv_text))
    assert not scenario.topology.server_p2p[0]
    links = run_scenario(scenario).routes.route(0)
    assert any("mem" in scenario.topology.link_names[link] for link in links)


_TOML_TYPES = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def _file_keys(builder, fixed):
    """A builder's parameters as scenario.py's key tables write them, from its signature."""
    keys = {}
    for name, p in inspect.signature(builder, eval_str=True).parameters.items():
        if name in fixed or p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        (kind,) = set(typing.get_args(p.annotation) or (p.annotation,)) - {type(None)}
        default = scenario_module._REQUIRED if p.default is inspect.Parameter.empty else p.default
        keys[name] = scenario_module._Key(_TOML_TYPES[kind], default)
    return keys


def test_cluster_keys_are_build_clusters_parameters():
    # The keys are the file format: a renamed or retyped parameter must fail here, not
    # silently change what scenario files mean.
    # The one default of its own: the fabric's, "auto" as on the command line.
    expected = _file_keys(build_cluster, {"system", "figure"})
    expected["fabric"] = scenario_module._Key(expected["fabric"].types, "auto")
    assert scenario_module._CLUSTER_KEYS == expected


def _collective_on(topology: str) -> str:
    return f'[topology]\n{topology}\nfigure = "effective"\n[[workload.collective]]\nop = "all_reduce"\nsize_bytes = 1048576\n'


def test_a_cluster_without_a_fabric_key_takes_the_command_lines_auto():
    # One GB200 NVL72 rack: its 72 rail leaves fit no 64-port spines, so the rail-optimized
    # default stopped the scenario that `flowsim collective` runs; one server gets no fabric.
    rack = parse_scenario(_collective_on('cluster = "gb200_nvl72"\nn_nodes = 1')).topology
    assert not any(name.startswith("ib.") for name in rack.node_names)
    alone = parse_scenario(_collective_on('cluster = "dgx_h100"\nn_nodes = 1'))
    assert alone.topology.node_names == build_cluster("dgx_h100", 1, figure="effective", fabric="none").node_names
    # More servers: the rail-optimized fabric as before, node for node and link for link.
    two = parse_scenario(_collective_on('cluster = "dgx_h100"\nn_nodes = 2\nsu_size = 1')).topology
    rails = parse_scenario(_collective_on('cluster = "dgx_h100"\nn_nodes = 2\nsu_size = 1\nfabric = "rail_optimized"'))
    assert (two.node_names, two.link_names) == (rails.topology.node_names, rails.topology.link_names)
    assert "ib.su1.rail0" in two.node_names


def test_a_rail_fabric_named_for_one_rack_says_that_it_needs_none():
    with pytest.raises(InputError, match=re.escape(
            "topology: rail_optimized compute fabric of 1 gb200_nvl72 servers: a pod of 72 leaves with 32 uplinks "
            "each does not fit 64-port spines; one server needs none for its own collectives: fabric none (or auto)")):
        parse_scenario(_collective_on('cluster = "gb200_nvl72"\nn_nodes = 1\nfabric = "rail_optimized"'))


@pytest.mark.parametrize("name", preset_names())
def test_preset_keys_are_the_preset_builders_parameters(name):
    assert scenario_module._PRESET_KEYS[name] == _file_keys(preset_info(name).build, {"figure"})
    assert not set(scenario_module._PRESET_KEYS[name]) & set(scenario_module._CLUSTER_KEYS)


def test_every_preset_has_its_keys():
    assert set(scenario_module._PRESET_KEYS) == set(preset_names())


@pytest.mark.parametrize(("table", "valid"), [
    ('preset = "pcie_server"', "intersocket, memory, p2p, pcie"),
    ('cluster = "dgx_h100"\nn_nodes = 2', "ethernet_switch, fabric, n_nodes, oversubscription, p2p, "
                                           "storage_targets, storage_technology, su_size, switch"),
])
def test_unknown_topology_key_names_the_valid_ones(tmp_path, table, valid):
    text = f'[topology]\n{table}\nfigure = "nominal"\nlanes = 16\n[workload]\nflows = "flows.csv"\n'
    path = _scenario(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert str(err.value) == f"{path}: topology.lanes: unknown key; expected one of {valid}"


def test_options_defaults_and_values(tmp_path):
    base = TWO_GPUS + '[workload]\nflows = "flows.csv"\n'
    assert load_scenario(_scenario(tmp_path, base)).options.routing == "auto"
    options = load_scenario(
        _scenario(tmp_path, base + '[options]\nrouting = "dmodk"\nseed = 3\nrecord_flows = true\nmode = "full"\n')
    ).options
    assert (options.routing, options.seed, options.record_flows, options.mode) == ("dmodk", 3, True, "full")
    assert options.time_rel_tol == 1e-12
    assert options.classes is True and load_scenario(_scenario(tmp_path, base + "[options]\nclasses = false\n")).options.classes is False


def test_classes_option_solves_symmetric_flows_once_with_the_same_times(tmp_path):
    # Four equal flows, two on each of two equal links: by classes, one flow and one link;
    # each flow gets half of 1 GB/s, so 1 GB takes 2 s either way.
    text = ('[topology]\nservers = [{name = "box"}]\n'
            'nodes = [' + ", ".join(f'{{name = "{n}", kind = "gpu", server = "box"}}' for n in "abcd") + ']\n'
            'links = [{src = "a", dst = "b", capacity_Bps = 1e9, technology = "nvlink4"}, '
            '{src = "c", dst = "d", capacity_Bps = 1e9, technology = "nvlink4"}]\n'
            '[workload]\nflows = "flows.csv"\n')
    flows = "name,src,dst,size_bytes\nw,a,b,1e9\nx,a,b,1e9\ny,c,d,1e9\nz,c,d,1e9\n"
    by_classes = run_scenario(load_scenario(_scenario(tmp_path, text, flows))).result
    every_flow = run_scenario(load_scenario(_scenario(tmp_path, text + "[options]\nclasses = false\n", flows))).result
    assert (by_classes.n_flow_classes, by_classes.n_link_classes) == (1, 1)
    assert every_flow.n_flow_classes is None
    np.testing.assert_array_equal(by_classes.finish_s, every_flow.finish_s)
    np.testing.assert_allclose(by_classes.finish_s, [2.0] * 4, rtol=1e-12)


def test_time_rel_tol_option_reaches_the_engine(tmp_path):
    # Two flows over one 1 GB/s link, 1 GB and 1.001 GB: exactly, z finishes 1 ms after w
    # (alone at full rate); with a 1e-3 window its completion at 2.002 s joins w's instant at
    # 2.0 s, so it finishes at its predicted time at half rate.
    text = ('[topology]\nservers = [{name = "box"}]\n'
            'nodes = [{name = "a", kind = "gpu", server = "box"}, {name = "b", kind = "gpu", server = "box"}]\n'
            'links = [{src = "a", dst = "b", capacity_Bps = 1e9, technology = "nvlink4"}]\n'
            '[workload]\nflows = "flows.csv"\n')
    flows = "name,src,dst,size_bytes\nw,a,b,1e9\nz,a,b,1.001e9\n"
    exact = run_scenario(load_scenario(_scenario(tmp_path, text, flows)))
    coarse = run_scenario(load_scenario(_scenario(tmp_path, text + "[options]\ntime_rel_tol = 1e-3\n", flows)))
    np.testing.assert_allclose(exact.result.finish_s, [2.0, 2.001], rtol=1e-12)
    np.testing.assert_allclose(coarse.result.finish_s, [2.0, 2.002], rtol=1e-12)


def test_csv_defaults_and_tags(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("name,src,dst,size_bytes,start_s,weight,cap_Bps,step\nx,a,b,10,,,,0\ny,a,b,20,1.5,2,3e9,1\n")
    w = read_flow_csv(path)
    np.testing.assert_array_equal(w.start_s, [0.0, 1.5])
    np.testing.assert_array_equal(w.weight, [1.0, 2.0])
    np.testing.assert_array_equal(w.cap_Bps, [np.inf, 3e9])
    assert w.tags == {"step": ("0", "1")}


BAD_SCENARIOS = [
    ("[topology\n", "", "not valid TOML"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[optionz]\n', "optionz", "unknown key"),
    ('[workload]\nflows = "flows.csv"\n', "topology", "missing"),
    (TWO_GPUS, "workload", "missing"),
    ('[topology]\npreset = "dgx_h100"\ncluster = "dgx_h100"\nfigure = "nominal"\n', "topology", "exactly one"),
    ('[topology]\nfigure = "nominal"\n', "topology", "found none"),
    ('[topology]\npreset = "dgx_h999"\nfigure = "nominal"\n', "topology.preset", "'dgx_h100'"),
    ('[topology]\npreset = "dgx_h100"\n', "topology.figure", "missing"),
    ('[topology]\npreset = "dgx_h100"\nfigure = "peak"\n', "topology.figure", "'nominal', 'effective'"),
    ('[topology]\npreset = "pcie_server"\nfigure = "nominal"\nlanes = 16\n', "topology.lanes", "unknown key"),
    ('[topology]\npreset = "pcie_server"\nfigure = "nominal"\np2p = "yes"\n', "topology.p2p", "expected bool"),
    ('[topology]\npreset = "pcie_server"\nfigure = "nominal"\npcie = "pcie9"\n', "topology", "pcie9"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\n', "topology.n_nodes", "missing"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\nn_nodes = "4"\n', "topology.n_nodes", "expected int"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\nn_nodes = 2\nfabric = "torus"\n', "topology",
     "unknown fabric 'torus'"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\nn_nodes = 2\noversubscription = 2.5\n', "topology",
     "oversubscription"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "b", kind = "quantum"}]\n'
     'links = [{src = "a", dst = "b", capacity_Bps = 1e9, technology = "pcie4"}]\n',
     "topology.nodes[1].kind", "'gpu'"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu", server = "box"}]\n'
     'links = [{src = "a", dst = "a", capacity_Bps = 1e9, technology = "pcie4"}]\n',
     "topology.nodes[0].server", "unknown server 'box'"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "a", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "a", capacity_Bps = 1e9, technology = "pcie4"}]\n',
     "topology.nodes[1]", "duplicate node name 'a'"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu", nic = "z"}]\n'
     'links = [{src = "a", dst = "a", capacity_Bps = 1e9, technology = "pcie4"}]\n',
     "topology.nodes[0].nic", "unknown node 'z'"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "z", capacity_Bps = 1e9, technology = "pcie4"}]\n',
     "topology.links[0]", "unknown node 'z'"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "b", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "b", capacity_Bps = "fast", technology = "pcie4"}]\n',
     "topology.links[0].capacity_Bps", "expected a number, got a string 'fast'"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "b", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "b", capacity_Bps = 1e9}]\n',
     "topology.links[0].technology", "missing"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "b", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "b", capacity_Bps = 1e9, technology = "pcie4", speed = 3}]\n',
     "topology.links[0].speed", "unknown key"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "b", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "b", capacity_Bps = -1.0, technology = "pcie4"}]\n',
     "topology", "capacities must be finite and > 0"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}, {name = "b", kind = "gpu"}]\n'
     'links = [{src = "a", dst = "b", capacity_Bps = 1e9, technology = "pcie4", duplex = true, name = "x"}]\n',
     "topology.links[0]", "duplex"),
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}]\nlinks = []\n', "topology.links", "non-empty array"),
    ("[topology]\nnodes = 3\nlinks = []\n", "topology.nodes", "non-empty array of tables"),
    (TWO_GPUS + "[workload]\n", "workload", "expected 'flows'"),
    (TWO_GPUS + '[workload]\nflows = "nope.csv"\n', "workload.flows", "no such flow list"),
    (TWO_GPUS + '[workload]\nflows = 7\n', "workload.flows", "expected a string, got an integer 7"),
    (TWO_GPUS + '[workload]\nflowz = "flows.csv"\n', "workload.flowz", "unknown key"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\nrouting = "random"\n', "options.routing", "'ecmp'"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\nseed = -1\n', "options.seed", "non-negative"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\nrecord_links = 1\n', "options.record_links",
     "true or false"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\nthreads = 4\n', "options.threads", "unknown key"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\nclasses = "yes"\n', "options.classes", "true or false"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\ntime_rel_tol = 1.5\n', "options.time_rel_tol",
     "in [0, 1), got"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[options]\ntime_rel_tol = "fine"\n', "options.time_rel_tol",
     "expected a number"),
    (TWO_GPUS + '[workload]\nflows = "flows.csv"\n[scenario]\nname = 3\n', "scenario.name", "expected a string"),
    # Found by using scenario files as a new user would (2026-12-07): messages that named a
    # Python type, a directory for an empty name, or nothing of which variable was wrong.
    ('[topology]\nnodes = [{name = "a", kind = "gpu"}]\n', "topology.links",
     "missing; expected a non-empty array of tables ([[topology.links]])"),
    (TWO_GPUS + '[workload]\nflows = ""\n', "workload.flows", "expected the flow list's file name, got a string ''"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\nn_nodes = 1\n[[workload.collective]]\n'
     'op = "all_reduce"\nsize_bytes = 1024\nnccl_env = {NCCL_ALGO = "Ring", NCCL_MAX_NCHANNELS = 8}\n',
     "workload.collective[0].nccl_env.NCCL_MAX_NCHANNELS", 'expected a string ("8"), got an integer 8'),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\nn_nodes = 1\n[[workload.collective]]\n'
     'op = "all_reduce"\nsize_bytes = 1024\n[[workload.collective]]\nop = "all_reduce"\nsize_bytes = 1024\n',
     "workload.collective[1]", "its flows are named as workload.collective[0]'s ("),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "nominal"\nn_nodes = 2\n[workload.training]\nmodel = "llama3_8b"\n'
     'mfu = 0.4\ntp = 8\npp = 2\nsequence_parallel = 1\n', "workload.training.sequence_parallel",
     "expected true or false, got an integer 1"),
    # Found by an audit (2026-12-07): messages that named a Python call, no key, or a key
    # missing where a misspelt one stood.
    ('[topology]\ncluster = "dgx_h100"\nfigure = "effective"\nn_node = 2\n', "topology.n_node",
     "unknown key; expected one of"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "effective"\nn_nodes = 2\n[workload.training]\nlayers = 2\n'
     'layer_backward_s = 2e-3\nlayer_grad_bytes = 1e8\ncheckpoint_bytes_per_rank = 1e9\n', "workload.training",
     "checkpoint writes need storage targets in the topology: give topology.storage_targets"),
    ('[topology]\ncluster = "dgx_h100"\nfigure = "effective"\nn_nodes = 2\n[workload.training]\nlayers = 2\n'
     'layer_forward_s = 1e-3\nlayer_backward_s = 2e-3\nlayer_grad_bytes = 1e8\ntp_all_reduce_bytes = 1e7\ntp = 8\n'
     'tp_algorithm = "nvls_sharp"\n', "workload.training",
     "tp_algorithm = 'nvls_sharp': nvls_sharp_all_reduce: the ranks are in one server"),
]


@pytest.mark.parametrize(("text", "key", "message"), BAD_SCENARIOS, ids=[f"{k or 'toml'}-{i}" for i, (_, k, _)
                                                                        in enumerate(BAD_SCENARIOS)])
def test_bad_scenario_names_file_and_key(tmp_path, text, key, message):
    path = _scenario(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    text = str(err.value)
    assert text.startswith(f"{path}: {key + ': ' if key else ''}"), text
    assert message in text


BAD_FLOW_LISTS = [
    ("name,src,dst\nx,a,b\n", "line 1", "lacks column 'size_bytes'"),
    ("name,src,dst,size_bytes\nx,a,b,10\ny,a,b,ten\n", "line 3, column 'size_bytes'", "expected a number, got 'ten'"),
    ("name,src,dst,size_bytes\nx,a,b,\n", "line 2, column 'size_bytes'", "empty"),
    ("name,src,dst,size_bytes\nx,a,c,10\n", "line 2, column 'dst'", "'c' is not a node"),
    ("name,src,dst,size_bytes\nx,a,b,10,3\n", "line 2", "5 cells for 4 columns"),
    ("name,src,dst,size_bytes,name\nx,a,b,10,y\n", "line 1", "unique"),
    ("name,src,dst,size_bytes,depends_on\nx,a,b,10,z\n", "flow 'x' depends on unknown flow 'z'", ""),
    ("name,src,dst,size_bytes\nx,a,b,-5\n", "flow 'x' has size_bytes -5.0", ""),
    ("name,src,dst,size_bytes\nx,a,b,1\nx,b,a,1\n", "flow name 'x' is used twice", ""),
]


@pytest.mark.parametrize(("csv_text", "where", "message"), BAD_FLOW_LISTS)
def test_bad_flow_list_names_file_line_and_column(tmp_path, csv_text, where, message):
    path = _scenario(tmp_path, TWO_GPUS + '[workload]\nflows = "flows.csv"\n', csv_text)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'flows.csv'}: {where}"), text
    assert message in text


def test_dependency_cycle_names_scenario_and_flow(tmp_path):
    csv_text = "name,src,dst,size_bytes,depends_on\nx,a,b,1,y\ny,b,a,1,x\n"
    scenario = load_scenario(_scenario(tmp_path, TWO_GPUS + '[workload]\nflows = "flows.csv"\n', csv_text))
    with pytest.raises(InputError, match=rf"^{tmp_path / 's.toml'}: dependency cycle through flow '[xy]'"):
        run_scenario(scenario)


def test_unreadable_scenario(tmp_path):
    with pytest.raises(InputError, match="missing.toml: cannot read the scenario"):
        load_scenario(tmp_path / "missing.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"# caf\xe9\n")
    with pytest.raises(InputError, match="latin1.toml: cannot read the scenario"):
        load_scenario(bad)


COLLECTIVE = TWO_GPUS + '[workload]\n[[workload.collective]]\nop = "all_to_all"\nsize_bytes = 1e6\n'


def test_collective_without_the_module_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "flowsim.collectives", None)
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[0\]: collectives need the module "
                                         r"flowsim\.collectives"):
        load_scenario(_scenario(tmp_path, COLLECTIVE))


@pytest.fixture
def fake_collectives(monkeypatch):
    """A stand-in flowsim.collectives with the contract the scenario relies on: COLLECTIVES,
    collective_name(text), check_nvswitch(topology, name), check_algorithm(collective, name),
    check_protocol(name) and collective_workload(topology, collective, size_bytes,
    *, ranks, gpudirect, **options) returning a plan with a ``workload``; it records its calls
    (and the scenario's ``gpudirect`` apart)."""
    module = types.ModuleType("flowsim.collectives")
    module.COLLECTIVES = ("all_to_all", "send")
    module.calls = []
    module.check_nvswitch = check_nvswitch
    module.check_algorithm = check_algorithm
    module.check_protocol = check_protocol

    def collective_name(text):
        if text not in module.COLLECTIVES:
            raise InputError(f"unknown collective {text!r}")
        return text

    module.collective_name = collective_name

    module.gpudirect = []

    def collective_workload(topology, collective, size_bytes, *, ranks=None, gpudirect=None, **options):
        module.calls.append((collective, ranks, size_bytes, options))
        module.gpudirect.append(gpudirect)
        refused = sorted(set(options) - {"algorithm", "channels", "servers"})
        if refused:
            raise InputError(f"bad parameters for {collective}: it takes no {', '.join(refused)}")
        if ranks is None:
            ranks = [topology.node_names[g] for g in topology.gpus()]
        channels = options.get("channels", 1)
        pairs = [(s, d) for s in ranks for d in ranks if s != d]
        workload = Workload.build([f"{collective}.{s}.{d}" for s, d in pairs], [s for s, _ in pairs],
                                  [d for _, d in pairs], np.full(len(pairs), size_bytes / channels),
                                  depends_on=[[] if i == 0 else [0] for i in range(len(pairs))],
                                  tags={"collective": [collective] * len(pairs)})
        return types.SimpleNamespace(workload=workload)

    module.collective_workload = collective_workload
    monkeypatch.setitem(sys.modules, "flowsim.collectives", module)
    return module


def test_collective_dispatches_by_name_after_the_flow_list(tmp_path, fake_collectives):
    text = COLLECTIVE.replace("[workload]\n", '[workload]\nflows = "flows.csv"\n')
    w = load_scenario(_scenario(tmp_path, text)).workload
    assert fake_collectives.calls == [("all_to_all", None, 1e6, {})]
    assert fake_collectives.gpudirect == [True]  # the scenario's options.gpudirect, for NCCL's choice
    assert w.names == ("x", "y", "all_to_all.a.b", "all_to_all.b.a")
    np.testing.assert_array_equal(w.size_bytes, [1e9, 5e8, 1e6, 1e6])
    assert w.tags["collective"] == ("", "", "all_to_all", "all_to_all")
    assert [w.dependencies(i).tolist() for i in range(4)] == [[], [0], [], [2]]


def test_collective_name_start_ranks_and_options(tmp_path, fake_collectives):
    text = COLLECTIVE + 'ranks = ["b", "a"]\nname = "moe"\nstart_s = 0.25\nchannels = 2\nalgorithm = "p2p"\n'
    text += '[[workload.collective]]\nop = "send"\nsize_bytes = 8.0\n'
    w = load_scenario(_scenario(tmp_path, text)).workload
    assert fake_collectives.calls[0] == ("all_to_all", ["b", "a"], 1e6, {"algorithm": "p2p", "channels": 2})
    assert fake_collectives.calls[1] == ("send", None, 8.0, {})
    assert w.names == ("moe.all_to_all.b.a", "moe.all_to_all.a.b", "send.a.b", "send.b.a")
    np.testing.assert_array_equal(w.start_s, [0.25, 0.25, 0.0, 0.0])
    np.testing.assert_array_equal(w.size_bytes, [5e5, 5e5, 8.0, 8.0])
    assert w.dependencies(1).tolist() == [0] and w.dependencies(3).tolist() == [2]


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ('op = "all_reduce"\nsize_bytes = 1\n', r"\.op", "expected one of 'all_to_all', 'send', got 'all_reduce'"),
        ('op = "all_to_all"\n', r"\.size_bytes", "missing; expected a number"),
        ('op = "all_to_all"\nsize_bytes = 1\nslices = 4\n', "", "bad parameters for all_to_all: .*slices"),
        ('op = "all_to_all"\nsize_bytes = 1\nranks = ["a", "z"]\n', r"\.ranks", "'z' is not a node"),
        ('op = "all_to_all"\nsize_bytes = 1\nranks = "a"\n', r"\.ranks", "expected an array of node names"),
        ('op = "all_to_all"\nsize_bytes = 1\nname = 3\n', r"\.name", "expected a string"),
        ("size_bytes = 1\n", r"\.op", "missing"),
        ('op = "all_to_all"\nsize_bytes = 1\nservers = 5\n', r"\.servers",
         r"expected a table of rank = server name \(strings\), got an integer 5"),
        ('op = "all_to_all"\nsize_bytes = 1\nservers = {a = 1, b = 2}\n', r"\.servers", "expected a table"),
        ('op = "all_to_all"\nsize_bytes = 1\nswitch = "bogus"\n', r"\.switch", "'bogus' is not a node of the topology"),
        ('op = "all_to_all"\nsize_bytes = 1\nswitch = "a"\n', r"\.switch", "'a' is a gpu node, not an NVSwitch"),
        ('op = "all_to_all"\nsize_bytes = 1\nalgorithm = "ring"\n', r"\.algorithm",
         "no algorithm 'ring' for all_to_all; valid ones: auto, p2p"),
        ('op = "all_to_all"\nsize_bytes = 1\nalgorithm = 3\n', r"\.algorithm", "expected a string, got an integer 3"),
        ('op = "all_to_all"\nsize_bytes = 1\nprotocol = "LL64"\n', r"\.protocol",
         "unknown protocol 'LL64'; valid ones: auto, ll, ll128, simple"),
        ('op = "all_to_all"\nsize_bytes = 1\ndtype = "fp16"\n', r"\.dtype", "expected one of 'int8', 'uint8'"),
        ('op = "all_to_all"\nsize_bytes = 1\nredop = "mean"\n', r"\.redop", "expected one of 'sum', 'prod'"),
    ],
)
def test_bad_collective_names_the_table(tmp_path, fake_collectives, table, key, message):
    text = TWO_GPUS + "[workload]\n[[workload.collective]]\n" + table
    with pytest.raises(InputError, match=rf"s\.toml: workload\.collective\[0\]{key}: {message}"):
        load_scenario(_scenario(tmp_path, text))


def test_collective_and_training_ranks_must_be_gpus(tmp_path, fake_collectives):
    with_memory = TWO_GPUS.replace('{name = "b", kind = "gpu", server = "box"}',
                                   '{name = "b", kind = "gpu", server = "box"}, {name = "m", kind = "host_memory"}')
    collective = with_memory + ('[workload]\n[[workload.collective]]\nop = "all_to_all"\nsize_bytes = 1\n'
                                'ranks = ["a", "m"]\n')
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[0\]\.ranks: 'm' is not a GPU "
                                         r"\(a host_memory node\)$"):
        load_scenario(_scenario(tmp_path, collective))
    training = with_memory + ('[workload.training]\nlayers = 1\nlayer_backward_s = 1e-3\nlayer_grad_bytes = 1e6\n'
                              'ranks = ["m", "a"]\n')
    with pytest.raises(InputError, match=r"s\.toml: workload\.training\.ranks: 'm' is not a GPU "
                                         r"\(a host_memory node\)$"):
        load_scenario(_scenario(tmp_path, training))
    assert fake_collectives.calls == []


def test_two_collectives_with_the_same_flow_names_need_a_name(tmp_path, fake_collectives):
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[1\]: its flows are named as "
                                         r"workload\.collective\[0\]'s \('all_to_all\.a\.b', \.\.\.\); give one of "
                                         r"them a name"):
        load_scenario(_scenario(tmp_path, COLLECTIVE + COLLECTIVE.split("[workload]\n")[1]))
    # A later start alone is no name: its flows keep the op's names (they once took the op's
    # name twice, 'all_to_all.all_to_all.a.b', and two collectives shared a tag).
    with pytest.raises(InputError, match=r"workload\.collective\[1\]: its flows are named as "
                                         r"workload\.collective\[0\]'s \('all_to_all\.a\.b'"):
        load_scenario(_scenario(tmp_path, COLLECTIVE + COLLECTIVE.split("[workload]\n")[1] + "start_s = 1e-3\n"))
    later = load_scenario(_scenario(tmp_path, COLLECTIVE + "start_s = 1e-3\n")).workload
    assert later.names[0] == "all_to_all.a.b" and later.start_s[0] == 1e-3


def test_real_collectives_build_a_hierarchical_all_reduce(tmp_path):
    pytest.importorskip("flowsim.collectives")
    text = ('[topology]\ncluster = "dgx_h100"\nn_nodes = 2\nfigure = "effective"\n'
            '[[workload.collective]]\nop = "all_reduce"\nalgorithm = "hierarchical"\nsize_bytes = 1.6e7\n')
    w = load_scenario(_scenario(tmp_path, text)).workload
    assert set(w.tags["collective"]) == {"all_reduce"}
    assert {s.split(".")[0] for s in w.src} == {"n0", "n1"}


def test_a_collectives_type_and_reduction_decide_whether_nvls_runs(tmp_path):
    # One DGX H100, 64 MiB: NCCL's NVLS (its flows share the NVSwitch's budget, a shared_cap
    # tag) for a float sum; a ring for int8, which the NVSwitch does not reduce.
    pytest.importorskip("flowsim.collectives")
    text = ('[topology]\ncluster = "dgx_h100"\nn_nodes = 1\nfigure = "effective"\n'
            '[[workload.collective]]\nop = "all_reduce"\nsize_bytes = 6.7e7\n')
    assert "shared_cap" in load_scenario(_scenario(tmp_path, text)).workload.tags
    typed = load_scenario(_scenario(tmp_path, text + 'dtype = "int8"\nredop = "sum"\n')).workload
    assert "shared_cap" not in typed.tags and set(typed.tags["collective"]) == {"all_reduce"}


def test_parse_scenario_from_text_names_the_source():
    with pytest.raises(InputError, match="^<string>: topology: missing"):
        parse_scenario("[workload]\n")


def test_files_saved_with_a_byte_order_mark_read_as_without(tmp_path):
    # Excel's "CSV UTF-8" starts the file with U+FEFF; so do some Windows editors.
    text = TWO_GPUS + '[workload]\nflows = "flows.csv"\n'
    plain = load_scenario(_scenario(tmp_path, text)).workload
    (tmp_path / "flows.csv").write_bytes(b"\xef\xbb\xbf" + FLOWS.encode())
    assert read_flow_csv(tmp_path / "flows.csv").names == ("x", "y")
    (tmp_path / "s.toml").write_bytes(b"\xef\xbb\xbf" + text.encode())
    marked = load_scenario(tmp_path / "s.toml").workload
    assert marked.names == plain.names and marked.tags == plain.tags


@pytest.mark.parametrize(("record_links", "record_flows"), [(False, True), (True, True), (True, False), (False, False)])
def test_recording_options_give_what_they_ask(tmp_path, record_links, record_flows):
    options = f"[options]\nrecord_links = {str(record_links).lower()}\nrecord_flows = {str(record_flows).lower()}\n"
    text = TWO_GPUS + '[workload]\nflows = "flows.csv"\n' + options
    result = run_scenario(load_scenario(_scenario(tmp_path, text))).result
    assert (result.link_segment_indptr is not None) == record_links
    assert (result.flow_segment_indptr is not None) == record_flows
    if record_flows:
        # x (1e9 B) and y (5e8 B, after x) each run alone at the 1e9 B/s link's full rate.
        for flow, (start_s, end_s) in enumerate([(0.5, 1.5), (2.0, 2.5)]):
            assert [a.tolist() for a in result.flow_segments(flow)] == [[start_s], [end_s], [1e9]]


def test_collective_servers_table_reaches_the_builder(tmp_path, fake_collectives):
    load_scenario(_scenario(tmp_path, COLLECTIVE + 'servers = {a = "left", b = "right"}\n'))
    assert fake_collectives.calls[0][3] == {"servers": {"a": "left", "b": "right"}}


def test_real_collective_refuses_an_option_its_algorithm_does_not_take(tmp_path):
    text = ('[topology]\npreset = "dgx_h100"\nfigure = "effective"\n'
            '[[workload.collective]]\nop = "all_to_all"\nsize_bytes = 1e6\nslices = 4\n')
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[0\]: bad parameters for all_to_all: "
                                         r"p2p takes no slices \(it takes servers\)"):
        load_scenario(_scenario(tmp_path, text))


def test_real_gather_takes_its_root_as_nccl_tests_spells_it(tmp_path):
    text = ('[topology]\npreset = "dgx_h100"\nfigure = "effective"\n'
            '[[workload.collective]]\nop = "gather_perf"\nsize_bytes = 8e6\nroot = {}\n')
    w = load_scenario(_scenario(tmp_path, text.format(3))).workload
    assert set(w.dst) == {"gpu3"} and len(w) == 7 and w.size_bytes.min() >= 1e6
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[0\]: gather: root must be a rank index "
                                         r"in 0\.\.7, got 8"):
        load_scenario(_scenario(tmp_path, text.format(8)))


def test_real_hypercube_needs_a_power_of_two_ranks(tmp_path):
    text = ('[topology]\npreset = "dgx_h100"\nfigure = "effective"\n'
            '[[workload.collective]]\nop = "hypercube_perf"\nsize_bytes = 8e6\nranks = {}\n')
    four = load_scenario(_scenario(tmp_path, text.format('["gpu0", "gpu1", "gpu2", "gpu3"]'))).workload
    assert len(four) == 4 * 2 and set(four.size_bytes) == {2e6, 4e6}  # S / 4, then S / 2
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[0\]: hypercube pairs rank r with r XOR "
                                         r"2\^k, so it needs a power-of-two number of ranks, got 3"):
        load_scenario(_scenario(tmp_path, text.format('["gpu0", "gpu1", "gpu2"]')))


def test_real_nvls_collective_checks_its_switch(tmp_path):
    pytest.importorskip("flowsim.collectives")
    text = ('[topology]\npreset = "dgx_h100"\nfigure = "effective"\n'
            '[[workload.collective]]\nop = "all_reduce"\nalgorithm = "nvls"\nsize_bytes = 1e6\nswitch = "{}"\n')
    assert len(load_scenario(_scenario(tmp_path, text.format("nvswitch"))).workload) > 0
    with pytest.raises(InputError, match=r"s\.toml: workload\.collective\[0\]\.switch: 'bogus' is not a node"):
        load_scenario(_scenario(tmp_path, text.format("bogus")))


def test_a_flow_without_a_route_is_named(tmp_path):
    # One-way link a -> b: the flow back has no route. The error named only the two nodes,
    # which thousands of flows may share.
    one_way = TWO_GPUS.replace(", duplex = true", "")
    flows = "name,src,dst,size_bytes\nthere,a,b,1e9\nback,b,a,1e9\n"
    scenario = load_scenario(_scenario(tmp_path, one_way + '[workload]\nflows = "flows.csv"\n', flows))
    with pytest.raises(InputError, match=r"s\.toml: routing: flow 'back': no route from 'b' to 'a'"):
        run_scenario(scenario)


@pytest.mark.parametrize(("csv_text", "where", "message"), [
    ("name,src,dst,size_bytes\nx,a,b,1_000\n", "line 2, column 'size_bytes'",
     "expected a number in ASCII digits without '_', got '1_000'"),
    ("name,src,dst,size_bytes\nx,a,b,\u0661\u0660\n", "line 2, column 'size_bytes'",
     "expected a number in ASCII digits without '_', got '\u0661\u0660'"),
    ("name,src,dst,size_bytes,start_s\nx,a,b,1,\uff11\n", "line 2, column 'start_s'",
     "expected a number in ASCII digits without '_', got '\uff11'"),
    ("name,src,dst,size_bytes,note\nx,a,b,1,short\ny,a,b,2," + "n" * 131_073 + "\n", "line 3",
     "a cell is longer than 131,072 characters, the most a flow list cell may hold"),
    ("name,src,dst,size_bytes" + "," + "c" * 131_073 + "\n", "line 1",
     "a cell is longer than 131,072 characters, the most a flow list cell may hold"),
], ids=["underscore", "arabic-indic digits", "fullwidth digit", "long cell", "long header"])
def test_flow_list_cells_python_would_misread_or_choke_on_are_one_line(tmp_path, csv_text, where, message):
    path = _scenario(tmp_path, TWO_GPUS + '[workload]\nflows = "flows.csv"\n', csv_text)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert str(err.value) == f"{tmp_path / 'flows.csv'}: {where}: {message}"


def test_a_fifo_as_flow_list_is_refused_without_waiting(tmp_path, make_fifo):
    path = _scenario(tmp_path, TWO_GPUS + '[workload]\nflows = "flows.csv"\n', "")
    (tmp_path / "flows.csv").unlink()
    make_fifo("flows.csv")
    with pytest.raises(InputError, match=r"flows\.csv: cannot read the flow list: it is a FIFO \(named pipe\), not a "
                                         r"regular file"):
        load_scenario(path)


@pytest.mark.parametrize("spelling", ["all_to_all", "alltoall", "AllToAll", "alltoall_perf", "all-to-all"])
def test_collective_op_takes_nccl_and_nccl_tests_spellings(tmp_path, spelling):
    text = COLLECTIVE.replace('op = "all_to_all"', f'op = "{spelling}"')
    workload = load_scenario(_scenario(tmp_path, text)).workload
    assert set(workload.tags["collective"]) == {"all_to_all"}
