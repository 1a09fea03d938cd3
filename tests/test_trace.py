"""HDF5 traces: round trip, plain-h5py reading, atomic writes and bad files."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import flowsim
from flowsim import trace as trace_module
from flowsim.engine import simulate
from flowsim.errors import InputError
from flowsim.files import hdf5_format
from flowsim.presets import preset
from flowsim.routing import route
from flowsim.strings import CodedStrings, PackedStrings
from flowsim.trace import FORMAT, SCHEMA_VERSION, open_trace, write_trace
from flowsim.workload import Workload

SCENARIO_TEXT = '[scenario]\nname = "Zürich ✓"\n'


def _run(*, record_links=True, record_flows=True, n_flows=12):
    """A DGX H100 with ``n_flows`` flows: tags, dependencies, caps, weights, delays."""
    topology = preset("dgx_h100", figure="effective")
    rng = np.random.default_rng(7)
    endpoints = ["gpu0", "gpu1", "gpu2", "gpu5", "mem0", "mem1", "nic3"]
    src = [endpoints[i % len(endpoints)] for i in range(n_flows)]
    n = len(endpoints)
    dst = [endpoints[(i + 1 + (i // n) % (n - 1)) % n] for i in range(n_flows)]
    workload = Workload.build(
        [f"f{i}.é" for i in range(n_flows)],
        src,
        dst,
        rng.uniform(1e6, 1e9, n_flows),
        start_s=rng.uniform(0, 1e-3, n_flows),
        depends_on=[[] if i < 3 else [i - 3, i - 1] for i in range(n_flows)],
        delay_s=np.full(n_flows, 1e-4),
        overhead_s=np.full(n_flows, 2e-6),
        weight=1.0 + (np.arange(n_flows) % 3),
        cap_Bps=np.where(np.arange(n_flows) % 4 == 0, 1e10, np.inf),
        tags={"collective": ["all_reduce" if i % 2 else "send" for i in range(n_flows)],
              "step": [str(i // 5) for i in range(n_flows)]},
    )
    routes = route(topology, workload.src, workload.dst)
    result = simulate(
        routes, topology.link_capacity_Bps, workload.size_bytes, latency_s=topology.link_latency_s,
        start_s=workload.start_s, weights=workload.weight, caps_Bps=workload.cap_Bps,
        depends_on=(workload.dep_indptr, workload.dep_indices), delay_s=workload.delay_s,
        overhead_s=workload.overhead_s, record_links=record_links, record_flows=record_flows,
    )
    return topology, workload, routes, result


@pytest.fixture(scope="module")
def run():
    return _run()


@pytest.fixture
def trace_path(tmp_path, run):
    return write_trace(tmp_path / "run.h5", *run, scenario_text=SCENARIO_TEXT)


def test_round_trip_of_every_field(trace_path, run):
    topology, workload, routes, result = run
    t = open_trace(trace_path)
    assert t.scenario_text == SCENARIO_TEXT
    assert t.metadata["format"] == FORMAT and t.metadata["schema_version"] == SCHEMA_VERSION
    assert t.metadata["flowsim_version"] == flowsim.__version__
    assert t.metadata["numpy_version"] == np.__version__ and t.metadata["h5py_version"] == h5py.__version__
    for name in ("node_names", "server_names", "link_names", "link_technology"):
        assert getattr(t.topology, name) == getattr(topology, name)
    for name in ("node_kind", "node_server", "node_nic", "server_p2p", "server_net_latency_s", "server_gpu_sm",
                 "server_step_latency_s", "server_nic_ports", "link_src", "link_dst", "link_capacity_Bps", "link_latency_s", "link_tier", "link_shared"):
        np.testing.assert_array_equal(getattr(t.topology, name), getattr(topology, name))
    assert t.names.tolist() == list(workload.names)
    assert [topology.node_names[i] for i in t.src] == list(workload.src)
    assert [topology.node_names[i] for i in t.dst] == list(workload.dst)
    for name in ("size_bytes", "start_s", "delay_s", "overhead_s", "weight", "cap_Bps", "dep_indptr", "dep_indices"):
        np.testing.assert_array_equal(getattr(t, name), getattr(workload, name))
    for name in ("ready_s", "transfer_start_s", "finish_s", "link_capacity_Bps", "link_bytes"):
        np.testing.assert_array_equal(getattr(t, name), getattr(result, name))
    np.testing.assert_array_equal(t.flow_link_indptr, routes.flow_link_indptr)
    np.testing.assert_array_equal(t.flow_link_indices, routes.flow_link_indices)
    assert {k: v.tolist() for k, v in t.tags.items()} == {k: list(v) for k, v in workload.tags.items()}
    np.testing.assert_array_equal(t.link_segment_indptr, result.link_segment_indptr)
    for link in range(topology.n_links):
        for ours, theirs in zip(t.link_segments(link), result.link_segments(link)):
            np.testing.assert_array_equal(ours, theirs)
    for flow in range(len(workload)):
        lo, hi = t.flow_segment_indptr[flow], t.flow_segment_indptr[flow + 1]
        for column, theirs in zip(("start_s", "end_s", "rate_Bps"), result.flow_segments(flow)):
            np.testing.assert_array_equal(getattr(t, f"flow_segment_{column}")[lo:hi], theirs)
    expected = result.summary()
    assert t.summary == pytest.approx({**expected, "n_links": topology.n_links,
                                       "n_rate_updates": result.n_rate_updates,
                                       "n_rates_resolved": result.n_rates_resolved,
                                       "n_rates_changed": result.n_rates_changed})
    assert t.makespan_s == result.makespan_s
    np.testing.assert_allclose(t.link_utilization(), result.link_utilization())


def test_without_segments_the_reader_says_so(tmp_path):
    path = write_trace(tmp_path / "plain.h5", *_run(record_links=False, record_flows=False))
    t = open_trace(path)
    assert t.link_segment_indptr is None and t.flow_segment_indptr is None
    with h5py.File(path) as f:
        assert not f["links"].attrs["segments_recorded"] and "segment_indptr" not in f["links"]
    with pytest.raises(InputError, match="link rates were not recorded"):
        t.link_segments(0)


def test_chunk_boundaries_do_not_change_the_data(tmp_path, monkeypatch):
    run = _run(n_flows=50)
    monkeypatch.setattr(trace_module, "WRITE_CHUNK", 7)
    t = open_trace(write_trace(tmp_path / "chunked.h5", *run))
    topology, workload, routes, result = run
    assert t.names.tolist() == list(workload.names)
    assert {k: v.tolist() for k, v in t.tags.items()} == {k: list(v) for k, v in workload.tags.items()}
    np.testing.assert_array_equal(t.finish_s, result.finish_s)
    np.testing.assert_array_equal(t.flow_link_indices, routes.flow_link_indices)
    with h5py.File(tmp_path / "chunked.h5") as f:
        assert f["flows/finish_s"].chunks == (7,)


def test_empty_workload_round_trips(tmp_path):
    topology = preset("pcie_server", figure="nominal")
    workload = Workload.build([], [], [], [])
    routes = route(topology, [], [])
    result = simulate(routes, topology.link_capacity_Bps, workload.size_bytes, record_links=True)
    t = open_trace(write_trace(tmp_path / "empty.h5", topology, workload, routes, result))
    assert t.n_flows == 0 and t.makespan_s == 0.0 and t.busiest_links(3).size == 0
    assert t.link_segment_indptr.tolist() == [0] * (topology.n_links + 1)


def test_plain_h5py_reads_everything(trace_path, run):
    topology, workload, routes, result = run
    with h5py.File(trace_path, "r") as f:
        assert f.attrs["format"] == "flowsim-trace" and f.attrs["schema_version"] == 1
        assert f.attrs["scenario_text"] == SCENARIO_TEXT
        assert h5py.check_string_dtype(f["flows/name"].dtype).encoding == "utf-8"
        assert f["flows/name"].asstr()[:].tolist() == list(workload.names)
        for name in ("flows/finish_s", "flows/name", "links/segment_rate_Bps", "topology/link_name"):
            assert f[name].compression == "gzip" and f[name].chunks is not None
        node_names = f["topology/node_name"].asstr()[:]
        link_names = f["topology/link_name"].asstr()[:]
        indptr, indices = f["flows/link_indptr"][:], f["flows/link_indices"][:]
        for flow in range(len(workload)):
            hops = link_names[indices[indptr[flow] : indptr[flow + 1]]]
            assert hops.tolist() == [topology.link_names[link] for link in routes.route(flow)]
        assert node_names[f["flows/src"][0]] == "gpu0" and link_names[indices[0]].startswith("gpu0->")
        categories = f["flows/tags/collective/categories"].asstr()[:]
        assert categories[f["flows/tags/collective/codes"][:]].tolist() == list(workload.tags["collective"])
        assert list(f["topology"].attrs["node_kinds"])[f["topology/node_kind"][0]] == "GPU"
        assert f["summary"].attrs["makespan_s"] == result.makespan_s


def test_failed_write_leaves_no_file(tmp_path, run, monkeypatch):
    def crash(*args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(trace_module, "_write_links", crash)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_trace(tmp_path / "run.h5", *run)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_named_with_the_path_asked_for(tmp_path, run):
    # The error named the hidden temporary file (".run.h5.x8f2k.tmp"), then said "the file
    # system there does not allow new files", as for /proc.
    target = tmp_path / "nodir" / "run.h5"
    message = f"{target}: the directory {str(tmp_path / 'nodir')!r} does not exist"
    with pytest.raises(InputError, match=re.escape(message)):
        write_trace(target, *run)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_previous_trace(trace_path, run, monkeypatch):
    before = trace_path.read_bytes()
    monkeypatch.setattr(trace_module, "_write_flows", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        write_trace(trace_path, *run)
    assert trace_path.read_bytes() == before
    assert open_trace(trace_path).n_flows == len(run[1])


def test_crash_mid_write_never_leaves_a_complete_looking_file(tmp_path):
    """A process killed while writing (no cleanup runs) leaves only a hidden temporary file."""
    target = tmp_path / "crash.h5"
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from test_trace import _run
        from flowsim import trace
        def die(*args):
            os._exit(3)
        trace._write_links = die
        trace.write_trace({str(target)!r}, *_run())
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert not target.exists()
    leftovers = list(tmp_path.iterdir())
    assert all(p.name.startswith(".crash.h5.") and p.suffix == ".tmp" for p in leftovers)


def test_truncated_file_is_reported(trace_path, tmp_path):
    data = trace_path.read_bytes()
    for n_bytes in (len(data) // 2, 600):
        cut = tmp_path / f"cut{n_bytes}.h5"
        cut.write_bytes(data[:n_bytes])
        with pytest.raises(InputError, match=rf"cut{n_bytes}\.h5: .*(truncated|damaged)"):
            open_trace(cut)


def test_foreign_files_are_reported(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("hello")
    with pytest.raises(InputError, match="notes.h5: not a readable HDF5 file"):
        open_trace(text)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(InputError, match="other.h5: not a flowsim trace"):
        open_trace(other)
    with pytest.raises(InputError, match="missing.h5: no such trace file"):
        open_trace(tmp_path / "missing.h5")


def test_hdf5_format_names_a_flowsim_file_and_nothing_else(tmp_path, trace_path):
    text = tmp_path / "notes.h5"
    text.write_text("hello")
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.attrs["format"] = "someone-else"
    assert hdf5_format(trace_path) == FORMAT
    assert hdf5_format(other) == "someone-else"
    assert [hdf5_format(p) for p in (text, tmp_path / "missing.h5", tmp_path)] == [None, None, None]


def test_newer_schema_is_refused(trace_path):
    with h5py.File(trace_path, "r+") as f:
        f.attrs["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(InputError, match=rf"schema version {SCHEMA_VERSION + 1} is newer .* upgrade flowsim"):
        open_trace(trace_path)


def test_missing_group_is_reported_as_damage(trace_path):
    with h5py.File(trace_path, "r+") as f:
        del f["links"]
    with pytest.raises(InputError, match="damaged or incomplete flowsim trace"):
        open_trace(trace_path)


def test_mismatched_parts_are_refused(tmp_path, run):
    topology, workload, routes, result = run
    other = _run(n_flows=5)
    with pytest.raises(InputError, match="flow count: workload 12, routes 5"):
        write_trace(tmp_path / "bad.h5", topology, workload, other[2], result)
    assert list(tmp_path.iterdir()) == []


def test_busiest_links_are_sorted_and_carry_traffic(trace_path):
    t = open_trace(trace_path)
    busiest = t.busiest_links(5)
    util = t.link_utilization()
    assert busiest.size == 5 and np.all(np.diff(util[busiest]) <= 0)
    assert util[busiest[0]] == util.max() > 0


def test_to_pandas(trace_path, run):
    pd = pytest.importorskip("pandas")
    frames = open_trace(trace_path).to_pandas()
    flows, links, nodes = frames["flows"], frames["links"], frames["nodes"]
    topology, workload, _, result = run
    assert len(flows) == len(workload) and len(links) == topology.n_links and len(nodes) == topology.n_nodes
    assert flows["src"].tolist() == list(workload.src)
    assert isinstance(flows["collective"].dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(flows["fct_s"], result.fct_s)
    assert nodes.loc[0, "kind"] == "GPU"


def test_to_pandas_without_pandas_says_how_to_install(trace_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        open_trace(trace_path).to_pandas()


def test_inconsistent_topology_is_reported_with_the_file(trace_path):
    with h5py.File(trace_path, "r+") as f:
        f["topology/link_capacity_Bps"][0] = -1.0
    with pytest.raises(InputError, match=r"run\.h5: damaged topology in trace: link 'gpu0->nvswitch' has capacity"):
        open_trace(trace_path)


def _resize(name, rows):
    def damage(f):
        f[name].resize((rows,))
    return damage


def _set(name, row, value):
    def damage(f):
        f[name][row] = value
    return damage


def _replace(name, values):
    def damage(f):
        del f[name]
        f[name] = values
    return damage


def _set_attribute(group, name, value):
    def damage(f):
        f[group].attrs[name] = value
    return damage


@pytest.mark.parametrize(("damage", "match"), [
    pytest.param(_resize("flows/finish_s", 5), r"/flows/finish_s has 5 rows, expected 12 \(n_flows of /flows\)",
                 id="short flow column"),
    pytest.param(_resize("flows/name", 13), r"/flows/name has 13 rows, expected 12", id="long names"),
    pytest.param(_resize("links/bytes", 3), r"/links/bytes has 3 rows, expected \d+ \(n_links of /links\)",
                 id="short link column"),
    pytest.param(_resize("flows/tags/step/codes", 11), r"/flows/tags/step/codes has 11 rows, expected 12",
                 id="short tag codes"),
    pytest.param(_set("flows/tags/collective/codes", 0, 2),
                 r"/flows/tags/collective/codes row 0 is 2, not one of the 2 categories", id="tag code out of range"),
    pytest.param(_set("flows/src", 3, -1), r"/flows/src row 3 is -1, not one of the \d+ nodes", id="bad src"),
    pytest.param(_set("flows/link_indices", 0, 10**6),
                 r"/flows/link_indices row 0 is 1000000, not one of the \d+ links", id="bad link id"),
    pytest.param(_set("flows/dep_indices", 0, 12), r"/flows/dep_indices row 0 is 12, not one of the 12 flows",
                 id="bad dependency"),
    pytest.param(_set("flows/dep_indptr", 0, 1), r"/flows/dep_indptr is not a valid index pointer",
                 id="indptr not from 0"),
    pytest.param(_set("flows/link_indptr", 1, 10**6), r"/flows/link_indptr is not a valid index pointer",
                 id="indptr decreasing"),
    pytest.param(_resize("flows/link_indices", 3), r"/flows/link_indptr is not a valid index pointer: .* end at 3",
                 id="indptr past the indices"),
    pytest.param(_resize("links/segment_indptr", 5),
                 r"/links/segment_indptr has 5 rows, expected \d+ \(one more than n_links", id="short segment indptr"),
    pytest.param(_resize("flows/segment_rate_Bps", 1),
                 r"/flows/segment_rate_Bps has 1 rows, expected \d+ \(segments\)", id="short segment column"),
    pytest.param(_replace("flows/finish_s", np.array(["late"] * 12, dtype=object)),
                 r"/flows/finish_s has dtype object, expected numbers", id="strings for numbers"),
    pytest.param(_replace("flows/src", np.zeros((12, 2), dtype=np.int64)),
                 r"/flows/src has shape \(12, 2\), expected one dimension", id="two-dimensional"),
    pytest.param(_set_attribute("flows", "n_flows", -3),
                 r"/flows attribute 'n_flows' is -3, expected a non-negative integer", id="negative n_flows"),
    pytest.param(_set_attribute("links", "n_links", 5), r"/links has n_links 5 but the topology has \d+ links",
                 id="n_links off the topology"),
])
def test_columns_that_disagree_with_the_counts_are_reported(trace_path, damage, match):
    with h5py.File(trace_path, "r+") as f:
        damage(f)
    with pytest.raises(InputError, match=rf"run\.h5: damaged trace: {match}"):
        open_trace(trace_path)


def _tagged(tags, names=("p", "q")):
    """A two-flow run on a DGX H100 whose workload has ``tags`` and flow ``names``."""
    topology = preset("dgx_h100", figure="nominal")
    workload = Workload.build(list(names), ["gpu0", "gpu1"], ["gpu1", "gpu2"], [1e6, 2e6], tags=tags)
    return flowsim.run(topology, workload)


@pytest.mark.parametrize("key", ["job/step", "/job", "a/", ".", "", "%2F", "100%", "..", " x "])
def test_any_tag_name_round_trips(tmp_path, key):
    run = _tagged({key: ["1", "2"], "plain": ["a", "b"]})
    path = write_trace(tmp_path / "t.h5", run.topology, run.workload, run.routes, run.result)
    assert {k: v.tolist() for k, v in open_trace(path).tags.items()} == {key: ["1", "2"], "plain": ["a", "b"]}
    with h5py.File(path) as f:  # a plain name stays readable by its own path
        assert f["flows/tags/plain"].attrs["name"] == "plain"


def test_tags_of_traces_written_without_their_name_attribute_are_read(trace_path, run):
    with h5py.File(trace_path, "r+") as f:
        for tag in f["flows/tags"].values():
            del tag.attrs["name"]
        _reseal(f)
    assert {k: v.tolist() for k, v in open_trace(trace_path).tags.items()} == {
        k: list(v) for k, v in run[1].tags.items()
    }


@pytest.mark.parametrize(("names", "tags", "match"), [
    pytest.param(["x\x00one", "q"], {}, r"flow name 'x\\x00one' cannot be stored in a trace: it has a NUL",
                 id="flow name"),
    pytest.param(["p", "q"], {"job": ["a", "b\x00"]}, r"flow 'q': tag 'job': value 'b\\x00' cannot be stored",
                 id="tag value"),
    pytest.param(["p", "q"], {"jo\x00b": ["a", "b"]}, r"tag name 'jo\\x00b' cannot be stored", id="tag name"),
    pytest.param(["\ud800", "q"], {}, r"flow name '\\ud800' cannot be stored in a trace: it has a lone surrogate",
                 id="surrogate"),
])
def test_strings_a_trace_cannot_hold_are_refused_before_writing(tmp_path, names, tags, match):
    run = _tagged(tags, names)
    with pytest.raises(InputError, match=match):
        trace_module.check_writable(run.topology, run.workload)
    with pytest.raises(InputError, match=match):
        write_trace(tmp_path / "t.h5", run.topology, run.workload, run.routes, run.result)
    assert list(tmp_path.iterdir()) == []


class _InterruptWhenCollected:
    """Sends SIGINT from ``__del__``, where Python only prints an exception: as h5py's
    weakref callbacks, which a Ctrl-C during a write often lands in."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_during_the_write_keeps_the_previous_trace(trace_path, run, monkeypatch):
    before = trace_path.read_bytes()
    write_links = trace_module._write_links

    def interrupted(*args):
        _InterruptWhenCollected()
        write_links(*args)

    monkeypatch.setattr(trace_module, "_write_links", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_trace(trace_path, *run)
    assert trace_path.read_bytes() == before
    assert [p.name for p in trace_path.parent.iterdir()] == [trace_path.name]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_to_pandas_keeps_result_columns_and_tags_named_like_them(tmp_path):
    pytest.importorskip("pandas")
    tags = {"finish_s": ["late", "early"], "src": ["x", "y"], "hops": ["1", "2"], "tag:hops": ["u", "v"]}
    run = _tagged(tags)
    trace = open_trace(write_trace(tmp_path / "t.h5", run.topology, run.workload, run.routes, run.result))
    assert {k: v.tolist() for k, v in trace.tags.items()} == tags
    flows = trace.to_pandas()["flows"]
    np.testing.assert_array_equal(flows["finish_s"], run.result.finish_s)
    assert flows["src"].tolist() == ["gpu0", "gpu1"] and flows["hops"].tolist() == [2, 2]
    assert flows["tag:finish_s"].tolist() == ["late", "early"] and flows["tag:src"].tolist() == ["x", "y"]
    assert flows["tag:hops"].tolist() == ["u", "v"] and flows["tag:tag:hops"].tolist() == ["1", "2"]


def test_summary_counts_are_integers(trace_path, run):
    with h5py.File(trace_path) as f:
        for name in ("n_flows", "n_links", "n_events", "n_rate_updates", "n_rates_resolved", "n_rates_changed"):
            assert f["summary"].attrs[name].dtype == np.int64, name
        assert f["summary"].attrs["makespan_s"].dtype == np.float64
    summary = open_trace(trace_path).summary
    assert summary["n_flows"] == 12 and isinstance(summary["n_flows"], int)
    assert isinstance(summary["makespan_s"], float)


def test_float_counts_of_older_traces_are_read_as_integers(trace_path, run):
    with h5py.File(trace_path, "r+") as f:
        for name in ("n_flows", "n_events"):
            f["summary"].attrs[name] = float(f["summary"].attrs[name])
        _reseal(f)
    summary = open_trace(trace_path).summary
    assert summary["n_flows"] == 12 and isinstance(summary["n_flows"], int)
    assert summary["n_events"] == run[3].n_events and isinstance(summary["n_events"], int)


def _reseal(f):
    """Update the checksums of trace ``f`` to its edited content, as a writer of that content
    would have stored them: the schema checks, not the checksums, then judge the edit."""
    def update(name, item):
        if isinstance(item, h5py.Dataset) and "sha256" in item.attrs:
            digest = hashlib.sha256()
            if item.shape[0]:
                digest.update(("\0".join(item.asstr()[:].tolist()) + "\0").encode())
            item.attrs["sha256"] = digest.hexdigest()
    f.visititems(update)
    f.attrs["metadata_sha256"] = trace_module._metadata_digest(trace_module._objects(Path(f.filename), f))


def _delete_attribute(group, name):
    def damage(f):
        del f[group].attrs[name]
    return damage


def _replace_with_group(name):
    def damage(f):
        del f[name]
        f.create_group(name)
    return damage


@pytest.mark.parametrize(("damage", "match"), [
    pytest.param(_set("links/capacity_Bps", 0, 0.0), r"/links/capacity_Bps row 0 is 0.0, expected a finite number > 0",
                 id="zero capacity"),
    pytest.param(_set("flows/finish_s", 2, np.nan), r"/flows/finish_s row 2 is nan, expected a finite number >= 0",
                 id="NaN finish"),
    pytest.param(_set("flows/weight", 1, -1.0), r"/flows/weight row 1 is -1.0, expected a finite number > 0",
                 id="negative weight"),
    pytest.param(_set("flows/name", 5, "f1.é"), r"/flows/name rows 1 and 5 are both 'f1.é'; they must be unique",
                 id="duplicate flow names"),
    pytest.param(_replace("topology/node_kind", np.full(1, 4.7)),
                 r"/topology/node_kind has dtype float64, expected integers", id="float node kinds"),
    pytest.param(_replace("topology/link_name", np.arange(3)), r"/topology/link_name has dtype int64, expected strings",
                 id="integer link names"),
    pytest.param(_replace("topology/server_p2p", np.array(["yes"], dtype=object)),
                 r"/topology/server_p2p has dtype object, expected booleans", id="text for booleans"),
    pytest.param(_resize("topology/node_nic", 2), r"/topology/node_nic has 2 rows, expected \d+ \(nodes in ",
                 id="short topology column"),
    pytest.param(_delete_attribute("summary", "n_rates_resolved"), r"/summary lacks the attribute 'n_rates_resolved'",
                 id="summary attribute missing"),
    pytest.param(_set_attribute("summary", "makespan_s", "soon"),
                 r"/summary attribute 'makespan_s' is 'soon', expected a number", id="summary attribute text"),
    pytest.param(_set_attribute("summary", "n_events", 2.5),
                 r"/summary attribute 'n_events' is 2.5, expected a non-negative integer", id="fractional count"),
    pytest.param(_set_attribute("summary", "n_flows", 11), r"/summary has n_flows 11 but /flows has 12",
                 id="summary off the flows"),
    pytest.param(_replace("flows/tags/step", np.arange(12)), r"/flows/tags/step is not a group", id="tag not a group"),
    pytest.param(_replace_with_group("flows/finish_s"), r"/flows/finish_s is not a dataset", id="column not a dataset"),
    pytest.param(_set_attribute("flows/tags/step", "name", "collective"),
                 r"/flows/tags/step is a second group of tag 'collective'", id="tag named twice"),
    pytest.param(_resize("links/segment_start_s", 10**13),
                 r"/links/segment_start_s has 10000000000000 rows but stores only \d+ bytes", id="vast row count"),
])
def test_values_types_and_attributes_off_the_schema_are_reported(trace_path, damage, match):
    with h5py.File(trace_path, "r+") as f:
        damage(f)
        _reseal(f)
    with pytest.raises(InputError, match=rf"run\.h5: damaged trace: {match}"):
        open_trace(trace_path)


@pytest.mark.parametrize(("attribute", "value", "match"), [
    ("schema_version", True, r"schema_version True is not an integer"),
    ("scenario_text", 5, r"damaged trace: the root attribute 'scenario_text' is 5, expected text"),
])
def test_root_attributes_of_the_wrong_type_are_reported(trace_path, attribute, value, match):
    with h5py.File(trace_path, "r+") as f:
        f.attrs[attribute] = value
    with pytest.raises(InputError, match=rf"run\.h5: .*{match}"):
        open_trace(trace_path)


def test_errors_h5py_raises_for_damaged_headers_are_input_errors(trace_path, monkeypatch):
    def damaged(path, root):
        raise RuntimeError("Error iterating over attributes (bad version number for attribute message)")

    monkeypatch.setattr(trace_module, "_check_header", damaged)
    with pytest.raises(InputError, match=r"run\.h5: damaged or incomplete flowsim trace: .*bad version number"):
        open_trace(trace_path)


# --- checksums, files a trace must not reach, a full disk ----------------------------------


def _same_content(a, b) -> bool:
    """Do traces ``a`` and ``b`` hold the same names, values and attributes (paths aside)?"""
    for name, value in vars(a).items():
        other = getattr(b, name)
        if name == "path":
            continue
        if isinstance(value, np.ndarray):
            if value.dtype != other.dtype or not np.array_equal(value, other, equal_nan=value.dtype.kind == "f"):
                return False
        elif name == "tags":
            if list(value) != list(other) or any(not np.array_equal(value[k], other[k]) for k in value):
                return False
        elif name == "topology":
            if any(not np.array_equal(np.asarray(getattr(value, f)), np.asarray(getattr(other, f)))
                   for f in ("node_names", "link_names", "link_technology", "link_capacity_Bps", "link_src")):
                return False
        elif value != other:
            return False
    return True


def test_every_dataset_is_checksummed(trace_path):
    with h5py.File(trace_path, "r") as f:
        assert isinstance(f.attrs["metadata_sha256"], str)
        datasets = []
        f.visititems(lambda name, item: datasets.append(item) if isinstance(item, h5py.Dataset) else None)
        for ds in datasets:
            if h5py.check_string_dtype(ds.dtype) is not None:
                assert len(ds.attrs["sha256"]) == 64, ds.name
            else:
                assert ds.fletcher32, ds.name


def test_a_changed_flow_name_is_reported_as_damage(trace_path):
    # Variable-length strings live in HDF5's global heap, which no HDF5 checksum covers.
    data = bytearray(trace_path.read_bytes())
    at = data.find("f11.é".encode())
    assert at >= 0 and data.find("f11.é".encode(), at + 1) < 0
    data[at + 2] ^= 0x04  # "f11.é" -> "f15.é": unique, so no schema check minds
    trace_path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"run\.h5: damaged trace: /flows/name does not match its checksum"):
        open_trace(trace_path)


def test_a_changed_summary_attribute_is_reported_as_damage(trace_path):
    makespan = open_trace(trace_path).summary["makespan_s"]
    data = bytearray(trace_path.read_bytes())
    packed = np.float64(makespan).tobytes()
    at = data.find(packed)
    assert at >= 0
    data[at] ^= 0x01  # the last bit of the makespan
    trace_path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"run\.h5: damaged trace: / attributes or dataset types do not match"):
        open_trace(trace_path)


def test_single_bit_flips_are_reported_or_change_nothing(trace_path):
    """60 seeded single-bit flips over the whole file: each opens to the same content or is
    refused as an InputError; none opens with changed names or values."""
    original = open_trace(trace_path)
    clean = trace_path.read_bytes()
    rng = np.random.default_rng(31)
    changed = []
    for bit in rng.integers(0, 8 * len(clean), 60):
        data = bytearray(clean)
        data[bit // 8] ^= 1 << (bit % 8)
        trace_path.write_bytes(bytes(data))
        try:
            trace = open_trace(trace_path)
        except InputError:
            continue
        if not _same_content(trace, original):
            changed.append(int(bit))
    assert changed == []


def test_an_unchecksummed_file_with_checksummed_datasets_is_damaged(trace_path):
    with h5py.File(trace_path, "r+") as f:
        del f.attrs["metadata_sha256"]
    with pytest.raises(InputError, match=r"damaged trace: / lacks the attribute 'metadata_sha256'"):
        open_trace(trace_path)


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.bin"
    path.write_bytes(np.arange(12, dtype=np.float64).tobytes())
    return path


def _external_storage(f, secret):
    del f["flows/size_bytes"]
    f["flows"].create_dataset("size_bytes", shape=(12,), dtype=np.float64, external=[(str(secret), 0, 96)])


def _external_link(f, secret):
    other = secret.with_name("other.h5")
    with h5py.File(other, "w") as g:
        g["size_bytes"] = np.arange(12, dtype=np.float64)
    del f["flows/size_bytes"]
    f["flows/size_bytes"] = h5py.ExternalLink(str(other), "/size_bytes")


def _virtual(f, secret):
    other = secret.with_name("other.h5")
    with h5py.File(other, "w") as g:
        g["size_bytes"] = np.arange(12, dtype=np.float64)
    layout = h5py.VirtualLayout(shape=(12,), dtype=np.float64)
    layout[:] = h5py.VirtualSource(str(other), "size_bytes", shape=(12,))
    del f["flows/size_bytes"]
    f["flows"].create_virtual_dataset("size_bytes", layout)


@pytest.mark.parametrize(("craft", "match"), [
    pytest.param(_external_storage, r"dataset /flows/size_bytes stores its data in other files \('.*secret\.bin'\)",
                 id="external storage"),
    pytest.param(_external_link, r"/flows/size_bytes is an external link to '.*other\.h5'", id="external link"),
    pytest.param(_virtual, r"dataset /flows/size_bytes is a virtual dataset", id="virtual dataset"),
])
def test_traces_that_read_other_files_are_refused(trace_path, secret, craft, match, capsys):
    with h5py.File(trace_path, "r+") as f:
        craft(f, secret)
    with pytest.raises(InputError, match=rf"run\.h5: refused: {match}"):
        open_trace(trace_path)
    from flowsim import cli

    assert cli.main(["inspect", str(trace_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused" in err


def test_a_trace_is_not_written_where_the_disk_lacks_room(tmp_path, run, monkeypatch):
    target = tmp_path / "run.h5"
    target.write_bytes(b"the previous trace")
    needs = trace_module.trace_bytes(*run, SCENARIO_TEXT)
    # The fixed allowance for HDF5's metadata is 256 KiB; 12 flows' columns add a few kB.
    assert 1 << 18 < needs < (1 << 18) + 100_000
    # An upper bound: the trace written takes less.
    assert write_trace(tmp_path / "bound.h5", *run, scenario_text=SCENARIO_TEXT).stat().st_size < needs
    (tmp_path / "bound.h5").unlink()
    real = shutil.disk_usage

    def nearly_full(path):
        return real(path)._replace(free=needs - 1)

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    with pytest.raises(OSError, match=r"not enough free space: writing it needs up to .* free") as caught:
        write_trace(target, *run, scenario_text=SCENARIO_TEXT)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"]
    assert target.read_bytes() == b"the previous trace"


@pytest.mark.parametrize("where", ["_write_links", "ColumnWriter._write_first"])
def test_a_disk_that_fills_up_while_writing_gives_enospc_and_no_file(tmp_path, run, monkeypatch, where):
    # A group written by h5py, or a numeric column's chunk from flowsim.deflate's writer
    # (its failure stops the workers): either reads as a full disk.
    from flowsim.deflate import ColumnWriter

    def full(*args):
        # What h5py raises when HDF5's write(2) fails (its text, with the errno inside).
        raise RuntimeError("Can't write data (file write failed: errno = 28, error message = 'No space left on device')")

    if where == "_write_links":
        monkeypatch.setattr(trace_module, "_write_links", full)
    else:
        monkeypatch.setattr(ColumnWriter, "_write_first", full)
    target = tmp_path / "run.h5"
    with pytest.raises(OSError, match="the disk filled up while writing the trace; nothing was written") as caught:
        write_trace(target, *run, scenario_text=SCENARIO_TEXT)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


def test_an_output_that_cannot_be_replaced_is_named_not_its_temporary_file(tmp_path, run, monkeypatch):
    # As 'chattr +i run.h5' makes the rename fail: the error named the hidden temporary file.
    target = tmp_path / "run.h5"
    target.write_bytes(b"the previous trace")

    def refused(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted", src, dst)

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(InputError, match=rf"^{re.escape(str(target))}: cannot replace it: Operation not permitted$"):
        write_trace(target, *run, scenario_text=SCENARIO_TEXT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"]
    assert target.read_bytes() == b"the previous trace"


def test_open_trace_names_a_fifo_without_waiting(make_fifo):
    fifo = make_fifo("t.h5")
    with pytest.raises(InputError, match=r"t\.h5: is a FIFO \(named pipe\), not a trace file"):
        open_trace(fifo)


def _two_servers_topology_trace(tmp_path, system_name):
    """A trace file holding only the topology of two servers of ``system_name``; returns its
    path and a reader of its topology."""
    from flowsim.deflate import ColumnWriter
    from flowsim.fabrics import build_cluster
    from flowsim.systemfile import resolve_system
    from flowsim.trace import _read_topology, _write_topology

    system, _, _ = resolve_system(system_name)
    topology = build_cluster(system, 2, figure="nominal", fabric="rail_optimized")
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f, ColumnWriter() as columns:
        _write_topology(columns, f, topology)
        columns.finish()

    def read():
        with h5py.File(path, "r") as f:
            return _read_topology(path, f["topology"])

    return path, read


def test_a_servers_latencies_and_gpu_model_survive_the_trace(tmp_path):
    # aws-p4d: aws-ofi-nccl's 75 us, A100 compute capability 8.0.
    path, read = _two_servers_topology_trace(tmp_path, "aws-p4d")
    topology = read()
    assert topology.server_net_latency_s.tolist() == [75e-6, 75e-6]
    assert topology.server_step_latency_s.tolist() == [23e-6, 23e-6]
    assert topology.server_gpu_sm.tolist() == [80, 80]
    # Traces written before the step latency read it as the network latency, and those
    # written before all three as 0.
    with h5py.File(path, "a") as f:
        del f["topology/server_step_latency_s"]
    assert read().server_step_latency_s.tolist() == [75e-6, 75e-6]
    with h5py.File(path, "a") as f:
        del f["topology/server_net_latency_s"], f["topology/server_gpu_sm"]
    topology = read()
    assert topology.server_net_latency_s.tolist() == [0.0, 0.0] and topology.server_gpu_sm.tolist() == [0, 0]
    assert topology.server_step_latency_s.tolist() == [0.0, 0.0]


def test_a_servers_nic_ports_survive_the_trace(tmp_path):
    # OCI BM.GPU4.8: NICs of two ports, which NCCL before 2.20 takes apart (tests/test_tuner.py).
    path, read = _two_servers_topology_trace(tmp_path, "oci-bm-gpu4-8")
    assert read().server_nic_ports.tolist() == [2, 2]
    # Traces written before the column read one port a NIC.
    with h5py.File(path, "a") as f:
        del f["topology/server_nic_ports"]
    assert read().server_nic_ports.tolist() == [1, 1]


def test_compact_columns_write_the_same_trace(tmp_path, run):
    # A workload whose names are packed and whose endpoints and tags are coded
    # (flowsim.strings, as collectives and training steps build them) stores what the same
    # workload as tuples stores, dataset for dataset.
    topology, workload, routes, result = run
    compact = dataclasses.replace(
        workload,
        names=PackedStrings.from_strings(workload.names),
        src=CodedStrings.from_strings(workload.src),
        dst=CodedStrings.from_strings(workload.dst),
        tags={key: CodedStrings.from_strings(values) for key, values in workload.tags.items()},
    )
    plain = write_trace(tmp_path / "plain.h5", topology, workload, routes, result)
    coded = write_trace(tmp_path / "coded.h5", topology, compact, routes, result)
    with h5py.File(plain) as a, h5py.File(coded) as b:
        datasets: list[str] = []
        a.visititems(lambda name, item: datasets.append(name) if isinstance(item, h5py.Dataset) else None)
        assert "flows/tags/collective/codes" in datasets
        for name in datasets:
            assert a[name].dtype == b[name].dtype
            assert a[name][...].tolist() == b[name][...].tolist(), name


def test_a_coded_tag_that_cannot_be_stored_names_its_first_flow(tmp_path, run):
    topology, workload, routes, result = run
    values = ["ok"] * len(workload)
    values[5] = values[9] = "bad\0"
    bad = dataclasses.replace(workload, tags={"step": CodedStrings.from_strings(values)})
    with pytest.raises(InputError, match=r"flow 'f5\.é': tag 'step': value 'bad\\x00' cannot be stored"):
        write_trace(tmp_path / "bad.h5", topology, bad, routes, result)
    assert not (tmp_path / "bad.h5").exists()
