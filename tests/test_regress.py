"""benchmarks/regress.py: normalisation by the calibration run, thresholds and verdicts, on
synthetic pytest-benchmark documents (nothing is timed here)."""

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from flowsim.errors import InputError

REGRESS_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "regress.py"
_spec = importlib.util.spec_from_file_location("flowsim_bench_regress", REGRESS_PATH)
regress = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = regress  # dataclasses look their module up while the file runs
_spec.loader.exec_module(regress)


def entry(name, minimum, median=None, iqr=0.0, rounds=5):
    median = minimum if median is None else median
    return {
        "name": name.rsplit("::", 1)[-1],
        "fullname": name,
        "stats": {"min": minimum, "median": median, "iqr": iqr, "rounds": rounds, "max": median * 2},
    }


def run(calibration_s, *benchmarks):
    """A pytest-benchmark document: calibration first, then ``(fullname, min, median, iqr)``,
    with the options and selection benchmarks/conftest.py records (every benchmark selected)."""
    entries = [entry("benchmarks/calibration.py::test_calibration", calibration_s)] + [entry(*b) for b in benchmarks]
    names = [e["fullname"] for e in entries]
    return {
        "machine_info": {"node": "testbox", "cpu": {"brand_raw": "Synthetic CPU"}},
        "commit_info": {"id": "abc"},
        "flowsim_run": {
            "flows_scale": 0.05,
            "keyword": "",
            "args": ["benchmarks"],
            "collected": names,
            "selected": names,
        },
        "benchmarks": entries,
    }


SOLVE = "benchmarks/bench_maxmin.py::test_max_min_solve[k=16-n_flows=10000]"
ENGINE = "benchmarks/bench_engine.py::test_burst"


def test_normalise_divides_minimum_by_the_calibration_minimum():
    calibration, benchmarks = regress.normalise(run(0.05, (SOLVE, 0.02, 0.025, 0.005), (ENGINE, 0.5)))
    assert calibration == {"min_s": 0.05, "median_s": 0.05, "iqr_s": 0.0, "rounds": 5, "drift": 0.0}
    assert benchmarks[SOLVE]["normalised"] == pytest.approx(0.4)
    assert benchmarks[SOLVE]["rel_iqr"] == pytest.approx(0.2)
    assert benchmarks[ENGINE]["normalised"] == pytest.approx(10.0)
    assert benchmarks[ENGINE]["rel_iqr"] == 0.0
    assert "test_calibration" not in " ".join(benchmarks)


def test_a_uniformly_slower_machine_normalises_to_the_same_figures():
    fast = regress.normalise(run(0.05, (SOLVE, 0.02), (ENGINE, 0.5)))[1]
    slow = regress.normalise(run(0.08, (SOLVE, 0.032), (ENGINE, 0.8)))[1]
    for name in (SOLVE, ENGINE):
        assert slow[name]["normalised"] == pytest.approx(fast[name]["normalised"])


def test_normalise_needs_the_calibration_and_stats():
    with pytest.raises(InputError, match="no 'test_calibration' benchmark"):
        regress.normalise({"benchmarks": [entry(SOLVE, 0.1)]}, "run.json")
    with pytest.raises(InputError, match="run.json: not a pytest-benchmark JSON document"):
        regress.normalise({"results": []}, "run.json")
    broken = run(0.05, (SOLVE, 0.02))
    del broken["benchmarks"][1]["stats"]["iqr"]
    with pytest.raises(InputError, match=r"run.json: benchmark '.*n_flows=10000\]' lacks a usable 'stats'"):
        regress.normalise(broken, "run.json")
    with pytest.raises(InputError, match="non-positive minimum"):
        regress.normalise(run(0.0), "run.json")


@pytest.mark.parametrize(
    "rel_iqr, floor, factor, expected",
    [
        (0.0, 0.15, 3.0, 0.15),
        (0.04, 0.15, 3.0, 0.15),
        (0.1, 0.15, 3.0, 0.3),
        (0.1, 0.5, 3.0, 0.5),
        (0.2, 0.1, 1.0, 0.2),
    ],
)
def test_threshold_is_the_floor_or_the_scaled_noise(rel_iqr, floor, factor, expected):
    assert regress.threshold(rel_iqr, floor, factor) == pytest.approx(expected)


def test_threshold_rejects_negative_settings():
    with pytest.raises(InputError, match="must be >= 0"):
        regress.threshold(0.1, -0.1, 3.0)


def baseline_of(*benchmarks, calibration_s=0.05):
    return regress.make_baseline(
        run(calibration_s, *benchmarks), "testbox", pytest_options={"scale": 0.05, "keyword": "", "suites": []}
    )


def test_compare_verdicts():
    # SOLVE is steady (floor 15%); ENGINE is noisy (rel IQR 0.1 -> 30%).
    baseline = baseline_of((SOLVE, 0.02), (ENGINE, 0.5, 0.5, 0.05), ("gone", 1.0))
    current = regress.normalise(run(0.05, (SOLVE, 0.0236), (ENGINE, 0.62), ("added", 1.0)))[1]
    verdicts = {c.name: c for c in regress.compare(baseline["benchmarks"], current)}
    assert verdicts[SOLVE].verdict == "slower"  # +18% > 15%
    assert verdicts[SOLVE].change == pytest.approx(0.18)
    assert verdicts[ENGINE].verdict == "ok"  # +24% < 30%
    assert verdicts[ENGINE].threshold == pytest.approx(0.3)
    assert verdicts["gone"].verdict == "missing" and verdicts["gone"].current is None
    assert verdicts["added"].verdict == "new" and verdicts["added"].change is None
    faster = regress.normalise(run(0.05, (SOLVE, 0.015), (ENGINE, 0.5)))[1]
    verdicts = {c.name: c.verdict for c in regress.compare(baseline["benchmarks"], faster)}
    assert verdicts[SOLVE] == "faster" and verdicts[ENGINE] == "ok"


def test_just_inside_and_just_outside_the_threshold():
    baseline = baseline_of((SOLVE, 0.02))
    inside = regress.normalise(run(0.05, (SOLVE, 0.02 * 1.149)))[1]
    outside = regress.normalise(run(0.05, (SOLVE, 0.02 * 1.151)))[1]
    assert regress.compare(baseline["benchmarks"], inside)[0].verdict == "ok"
    assert regress.compare(baseline["benchmarks"], outside)[0].verdict == "slower"


def test_baseline_document_keeps_machine_options_and_raw_stats():
    baseline = baseline_of((SOLVE, 0.02, 0.025, 0.005))
    assert baseline["format"] == regress.BASELINE_FORMAT and baseline["name"] == "testbox"
    assert baseline["machine"]["cpu"]["brand_raw"] == "Synthetic CPU"
    assert baseline["pytest_options"]["scale"] == 0.05
    assert baseline["benchmarks"][SOLVE]["min_s"] == 0.02
    json.dumps(baseline)


def test_table_marks_regressions():
    table = regress.format_table(
        [regress.Comparison(SOLVE, 0.4, 0.5, 0.15, "slower"), regress.Comparison(ENGINE, None, 2.0, None, "new")]
    ).splitlines()
    assert table[0].split() == ["benchmark", "baseline", "current", "change", "threshold", "verdict"]
    assert set(table[1]) == {"-"}
    assert table[2].split()[1:] == ["0.4", "0.5", "+25.0%", "15%", "SLOWER"]
    assert table[3].split()[1:] == ["-", "2", "-", "-", "new"]
    assert regress.format_table([regress.Comparison(SOLVE, 0.4, None, 0.15, "missing")]).split()[-1] == "MISSING"


@pytest.fixture
def baseline_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(regress, "BASELINE_DIR", tmp_path / "baselines")
    return tmp_path


def test_save_then_compare_from_json_files(baseline_dir, capsys):
    first = baseline_dir / "first.json"
    first.write_text(json.dumps(run(0.05, (SOLVE, 0.02), (ENGINE, 0.5))))
    assert regress.main(["save", "box", "--from-json", str(first), "--scale", "0.05", "--note", "busy"]) == 0
    stored = json.loads((baseline_dir / "baselines" / "box.json").read_text())
    assert stored["note"] == "busy" and stored["machine"]["node"] == "testbox"
    same_on_slower_machine = baseline_dir / "second.json"
    same_on_slower_machine.write_text(json.dumps(run(0.1, (SOLVE, 0.04), (ENGINE, 1.0))))
    assert regress.main(["compare", "box", "--from-json", str(same_on_slower_machine)]) == 0
    regressed = baseline_dir / "third.json"
    regressed.write_text(json.dumps(run(0.05, (SOLVE, 0.03), (ENGINE, 0.5))))
    assert regress.main(["compare", "box", "--from-json", str(regressed)]) == 1
    out = capsys.readouterr().out
    assert "SLOWER" in out and "1 benchmark(s) slower" in out


def test_unusable_inputs_exit_2(baseline_dir, capsys):
    assert regress.main(["compare", "absent", "--from-json", "x.json"]) == 2
    assert "absent.json: cannot read baseline" in capsys.readouterr().err
    bad = baseline_dir / "bad.json"
    bad.write_text('{"benchmarks": [\n  {"name": }\n]}')
    assert regress.main(["save", "box", "--from-json", str(bad)]) == 2
    assert "bad.json, line 2: pytest-benchmark output is not valid JSON" in capsys.readouterr().err
    assert regress.main(["save", "../escape", "--from-json", str(bad)]) == 2
    assert "must be a plain file stem" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["save", "compare"])
def test_a_file_that_is_not_text_is_unusable_not_a_crash(baseline_dir, capsys, command):
    # An HDF5 trace given for the JSON raised UnicodeDecodeError with a traceback.
    good = baseline_dir / "run.json"
    good.write_text(json.dumps(run(0.05, (SOLVE, 0.02))))
    assert regress.main(["save", "box", "--from-json", str(good)]) == 0
    capsys.readouterr()
    trace = baseline_dir / "trace.h5"
    trace.write_bytes(b"\x89HDF\r\n\x1a\n\x00\x00\xff")
    assert regress.main([command, "box", "--from-json", str(trace)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"regress.py: error: {trace}: cannot read pytest-benchmark output: ")
    assert "can't decode byte 0x89" in err[0]


def test_calibration_before_and_after_the_suites(capsys, baseline_dir):
    document = run(0.05, (SOLVE, 0.02))
    document["benchmarks"].append(entry("benchmarks/calibration.py::test_calibration", 0.04))
    calibration, benchmarks = regress.normalise(document)
    assert calibration["min_s"] == 0.04 and calibration["drift"] == pytest.approx(0.25)
    assert benchmarks[SOLVE]["normalised"] == pytest.approx(0.5)
    path = baseline_dir / "drifting.json"
    path.write_text(json.dumps(document))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    assert "calibration changed by 25% during the baseline's session" in capsys.readouterr().err


def test_a_noisy_current_run_widens_the_threshold():
    baseline = baseline_of((SOLVE, 0.02))
    steady = regress.normalise(run(0.05, (SOLVE, 0.025)))[1]
    noisy = regress.normalise(run(0.05, (SOLVE, 0.025, 0.03, 0.03)))[1]  # rel IQR 1.0
    assert regress.compare(baseline["benchmarks"], steady)[0].verdict == "slower"
    widened = regress.compare(baseline["benchmarks"], noisy)[0]
    assert widened.verdict == "ok" and widened.threshold == pytest.approx(3.0)


@pytest.mark.parametrize(
    "document, message",
    [
        ({"format": "flowsim-benchmark-baseline"}, "damaged baseline: 'created' should be a str"),
        ([1, 2], "not a flowsim benchmark baseline (format 'list')"),
        ("box", "damaged baseline: benchmark 'x' needs numbers 'normalised' and 'rel_iqr'"),
        ("options", "damaged baseline: 'pytest_options' needs scale, keyword and suites"),
    ],
)
def test_a_damaged_baseline_is_unusable_not_a_crash(baseline_dir, capsys, document, message):
    # These raised KeyError, AttributeError or TypeError with status 1, the status of a regression.
    current = baseline_dir / "run.json"
    current.write_text(json.dumps(run(0.05, (SOLVE, 0.02))))
    if isinstance(document, str):
        assert regress.main(["save", "box", "--from-json", str(current)]) == 0
        stored = json.loads((baseline_dir / "baselines" / "box.json").read_text())
        if document == "box":
            stored["benchmarks"]["x"] = {"normalised": "fast"}
        else:
            del stored["pytest_options"]["suites"]
        document = stored
    (baseline_dir / "baselines").mkdir(exist_ok=True)
    (baseline_dir / "baselines" / "damaged.json").write_text(json.dumps(document))
    assert regress.main(["compare", "damaged", "--from-json", str(current)]) == 2
    assert message in capsys.readouterr().err


def test_a_run_entry_that_is_not_a_benchmark_is_unusable(baseline_dir, capsys):
    current = baseline_dir / "run.json"
    current.write_text(json.dumps({"benchmarks": [1]}))
    assert regress.main(["save", "box", "--from-json", str(current)]) == 2
    assert "benchmarks[0] is 1, not a pytest-benchmark entry" in capsys.readouterr().err


def test_a_selection_without_benchmarks_saves_nothing(baseline_dir, capsys):
    # A -k that matched nothing used to save a baseline no comparison could ever flag.
    current = baseline_dir / "run.json"
    current.write_text(json.dumps(run(0.05)))
    assert regress.main(["save", "box", "--from-json", str(current)]) == 2
    assert "no benchmark besides the calibration ran" in capsys.readouterr().err
    assert not (baseline_dir / "baselines" / "box.json").exists()


@pytest.mark.parametrize("keyword, expected", [("", []), ("engine", ["-k", "test_calibration or (engine)"])])
def test_suites_run_every_benchmark_unless_an_expression_selects(monkeypatch, keyword, expected):
    # Without -k only the calibration ran: -k test_calibration was passed alone.
    seen = {}

    def fake_run(command, cwd):
        seen["command"] = command
        json_path = next(a for a in command if a.startswith("--benchmark-json=")).split("=", 1)[1]
        Path(json_path).write_text(json.dumps(run(0.05, (SOLVE, 0.02))))
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(regress.subprocess, "run", fake_run)
    regress._run_suites({"suites": ["benchmarks/bench_maxmin.py"], "keyword": keyword, "scale": 0.05})
    command = seen["command"]
    assert [a for i, a in enumerate(command) if a == "-k" or (i and command[i - 1] == "-k")] == expected


def test_save_from_json_stores_the_options_the_run_used(baseline_dir, monkeypatch, capsys):
    # A run at --flows-scale 0.05 -k open_trace was saved as scale 1, no -k and every suite,
    # and compare reran at scale 1: test_open_trace 0.714 -> 5.339, +648% SLOWER.
    document = run(0.05, ("benchmarks/bench_trace.py::test_open_trace", 0.036))
    document["flowsim_run"] = {
        "flows_scale": 0.05,
        "keyword": "test_calibration or open_trace",
        "args": ["benchmarks/calibration.py", "benchmarks/bench_trace.py", "benchmarks/calibration.py"],
    }
    path = baseline_dir / "run.json"
    path.write_text(json.dumps(document))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    stored = json.loads((baseline_dir / "baselines" / "box.json").read_text())
    assert stored["pytest_options"] == {
        "scale": 0.05,
        "keyword": "test_calibration or open_trace",
        "suites": ["benchmarks/bench_trace.py"],
    }
    seen = {}

    def fake_run(command, cwd):
        seen["command"] = command
        json_path = next(a for a in command if a.startswith("--benchmark-json=")).split("=", 1)[1]
        Path(json_path).write_text(json.dumps(document))
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(regress.subprocess, "run", fake_run)
    assert regress.main(["compare", "box"]) == 0
    assert "--flows-scale=0.05" in seen["command"]
    assert str(regress.REPO_ROOT / "benchmarks/bench_trace.py") in seen["command"]
    assert not any("bench_engine" in a for a in seen["command"])


def test_save_from_json_refuses_to_guess_options_it_does_not_record(baseline_dir, capsys):
    document = run(0.05, (SOLVE, 0.02))
    del document["flowsim_run"]
    path = baseline_dir / "old.json"
    path.write_text(json.dumps(document))
    assert regress.main(["save", "box", "--from-json", str(path), "--scale", "0.05"]) == 2
    err = capsys.readouterr().err
    assert "old.json does not record the --flows-scale, -k and files its run used; give -k, --suite as" in err
    assert len(err.splitlines()) == 1 and not (baseline_dir / "baselines" / "box.json").exists()
    told = ["--scale", "0.05", "-k", "", "--suite", "benchmarks/bench_maxmin.py"]
    assert regress.main(["save", "box", "--from-json", str(path), *told]) == 0
    stored = json.loads((baseline_dir / "baselines" / "box.json").read_text())
    assert stored["pytest_options"] == {"scale": 0.05, "keyword": "", "suites": ["benchmarks/bench_maxmin.py"]}


def test_save_from_json_refuses_options_the_run_did_not_use(baseline_dir, capsys):
    path = baseline_dir / "run.json"
    path.write_text(json.dumps(run(0.05, (SOLVE, 0.02))))
    assert regress.main(["save", "box", "--from-json", str(path), "--scale", "1"]) == 2
    assert "run.json: the run used --scale 0.05, not 1.0" in capsys.readouterr().err
    assert regress.main(["save", "box", "--from-json", str(path), "--suite", "benchmarks"]) == 0
    damaged = run(0.05, (SOLVE, 0.02))
    damaged["flowsim_run"]["args"] = "benchmarks"
    path.write_text(json.dumps(damaged))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 2
    assert "run.json: damaged 'flowsim_run' record: it needs flows_scale, keyword and args" in capsys.readouterr().err


def test_compare_from_json_checks_the_scale_the_run_used(baseline_dir, capsys):
    path = baseline_dir / "run.json"
    path.write_text(json.dumps(run(0.05, (SOLVE, 0.02))))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    larger = run(0.05, (SOLVE, 0.02))
    larger["flowsim_run"]["flows_scale"] = 1.0
    path.write_text(json.dumps(larger))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    assert "warning: scale 1.0 differs from the baseline's" in capsys.readouterr().err


def test_the_benchmarks_conftest_records_the_run_options(tmp_path):
    spec = importlib.util.spec_from_file_location("flowsim_bench_conftest", REGRESS_PATH.parent / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    root = REGRESS_PATH.parents[1]
    config = SimpleNamespace(
        getoption={"--flows-scale": 0.05, "keyword": "open_trace"}.get,
        args=[str(root / "benchmarks" / "calibration.py"), "bench_trace.py::test_open_trace", str(tmp_path)],
        invocation_params=SimpleNamespace(dir=root / "benchmarks"),
        rootpath=root,
        stash=pytest.Stash(),
    )
    items = [SimpleNamespace(nodeid=name) for name in (TRACE, WRITE)]
    conftest.pytest_collection_modifyitems(config, items)
    conftest.pytest_collection_finish(SimpleNamespace(config=config, items=items[:1]))
    conftest.pytest_runtest_logreport(SimpleNamespace(nodeid=TRACE, skipped=True))
    output = {}
    conftest.pytest_benchmark_update_json(config, [], output)
    assert output["flowsim_run"] == {
        "flows_scale": 0.05,
        "keyword": "open_trace",
        "args": ["benchmarks/calibration.py", "benchmarks/bench_trace.py::test_open_trace", str(tmp_path)],
        "collected": [TRACE, WRITE],
        "selected": [TRACE],
        "skipped": [TRACE],
    }


def test_compare_warns_when_the_baseline_comes_from_another_kind_of_cpu(baseline_dir, capsys):
    # The verdict came without a word, though figures move -20% to +65% between kinds of CPU.
    epyc = {"brand_raw": "AMD EPYC", "vendor_id_raw": "AuthenticAMD", "family": 26, "model": 2}
    xeon = {"brand_raw": "Intel(R) Xeon(R) Processor", "vendor_id_raw": "GenuineIntel", "family": 6, "model": 167}
    path = baseline_dir / "run.json"
    document = run(0.05, (SOLVE, 0.02))
    document["machine_info"]["cpu"] = epyc
    path.write_text(json.dumps(document))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    assert "warning" not in capsys.readouterr().err
    document["machine_info"]["cpu"] = xeon
    path.write_text(json.dumps(document))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: the baseline ran on AMD EPYC (AuthenticAMD, family 26 model 2), this run on "
        "Intel(R) Xeon(R) Processor (GenuineIntel, family 6 model 167); figures move by -20% to +65% "
        "between kinds of CPU, so compare against a baseline taken on this kind"
    ]


TRACE = "benchmarks/bench_trace.py::test_open_trace"
WRITE = "benchmarks/bench_trace.py::test_write_trace"


def test_expected_benchmarks_are_those_selected_or_gone_from_a_file_the_run_took():
    document = run(0.05, (TRACE, 0.03))
    document["flowsim_run"]["collected"] = ["benchmarks/calibration.py::test_calibration", TRACE, WRITE, SOLVE]
    document["flowsim_run"]["selected"] = ["benchmarks/calibration.py::test_calibration", TRACE, SOLVE]
    gone = "benchmarks/bench_trace.py::test_read_trace"
    baseline = [TRACE, WRITE, SOLVE, ENGINE, gone]
    # WRITE: deselected by -k; ENGINE: its file not run; SOLVE: selected, no timing; gone: not collected.
    assert regress.expected_benchmarks(baseline, document) == {TRACE, SOLVE, gone}
    del document["flowsim_run"]["selected"]
    assert regress.expected_benchmarks(baseline, document) is None


def test_compare_lists_only_the_selection_and_fails_on_a_selected_benchmark_that_did_not_run(baseline_dir, capsys):
    # With -k open_trace, the 50 benchmarks it left out were each listed as missing.
    path = baseline_dir / "run.json"
    path.write_text(json.dumps(run(0.05, (TRACE, 0.03), (WRITE, 0.4), (SOLVE, 0.02))))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    capsys.readouterr()
    selection = run(0.05, (TRACE, 0.03))
    everything = ["benchmarks/calibration.py::test_calibration", TRACE, WRITE, SOLVE]
    selection["flowsim_run"].update(keyword="test_calibration or open_trace", collected=everything)
    path.write_text(json.dumps(selection))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    out = capsys.readouterr().out
    assert TRACE in out and WRITE not in out and SOLVE not in out and "missing" not in out.lower()
    # The selection takes test_write_trace as well, which did not run (failed, say).
    selection["flowsim_run"]["selected"].append(WRITE)
    path.write_text(json.dumps(selection))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{WRITE}  " in out and "MISSING" in out and SOLVE not in out
    assert "1 benchmark(s) of the baseline selected but not run (failed, renamed or removed; " in out
    # A benchmark of a file the run took that is no longer collected there is gone.
    selection["flowsim_run"]["selected"].remove(WRITE)
    selection["flowsim_run"]["collected"].remove(WRITE)
    path.write_text(json.dumps(selection))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 1
    assert f"selected but not run (failed, renamed or removed; save the baseline again if so): {WRITE}" in (
        capsys.readouterr().out
    )


def test_a_benchmark_skipped_on_this_machine_is_noted_not_missing(baseline_dir, capsys):
    # The Dask benchmarks skip where distributed is not installed: selected, not run, not gone.
    path = baseline_dir / "run.json"
    path.write_text(json.dumps(run(0.05, (TRACE, 0.03), (WRITE, 0.4))))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    capsys.readouterr()
    skipping = run(0.05, (TRACE, 0.03))
    skipping["flowsim_run"].update(collected=["benchmarks/calibration.py::test_calibration", TRACE, WRITE],
                                   selected=["benchmarks/calibration.py::test_calibration", TRACE, WRITE],
                                   skipped=[WRITE])
    path.write_text(json.dumps(skipping))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    captured = capsys.readouterr()
    assert "MISSING" not in captured.out and WRITE not in captured.out
    assert f"note: 1 benchmark(s) of the baseline skipped on this machine, not compared: {WRITE}" in captured.err


def test_compare_with_a_run_that_does_not_record_its_selection(baseline_dir, capsys):
    path = baseline_dir / "run.json"
    path.write_text(json.dumps(run(0.05, (TRACE, 0.03), (SOLVE, 0.02))))
    assert regress.main(["save", "box", "--from-json", str(path)]) == 0
    capsys.readouterr()
    older = run(0.05, (TRACE, 0.03))
    del older["flowsim_run"]
    path.write_text(json.dumps(older))
    assert regress.main(["compare", "box", "--from-json", str(path)]) == 0
    captured = capsys.readouterr()
    assert SOLVE not in captured.out
    assert captured.err.splitlines() == [
        f"warning: {path} does not record which benchmarks its run selected; "
        "the 1 benchmark(s) of the baseline absent from it are not compared"
    ]
