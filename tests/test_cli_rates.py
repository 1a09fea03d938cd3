"""``flowsim rates``: a scenario's flows all at once, per capacity scale and backend."""

from pathlib import Path

import pytest

from flowsim.batched import available_backends
from flowsim.cli import main
from flowsim.commands.inspect import format_rate
from flowsim.hardware import nvlink_per_gpu

SCENARIO = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "dgx_h100_all_to_all.toml"


def test_all_to_all_in_a_dgx_h100_fills_every_gpu_link(capsys):
    # 8 GPUs each send to the 7 others through the NVSwitch: every GPU's link to the switch
    # carries 7 flows each way, so each flow gets 1/7 of it and the total is 8 GPU links.
    per_gpu = nvlink_per_gpu("nvlink4", figure="effective")
    assert main(["rates", str(SCENARIO), "--scale", "1", "2"]) == 0
    out = capsys.readouterr().out
    assert f"capacity x1: total {format_rate(8 * per_gpu)}" in out
    assert f"capacity x2: total {format_rate(16 * per_gpu)}" in out
    assert "16 saturated links" in out


@pytest.mark.skipif("cuda" in available_backends(), reason="a CUDA backend is usable here")
def test_cuda_backend_without_numba_cuda_or_a_gpu_says_what_is_missing(capsys):
    assert main(["rates", str(SCENARIO), "--backend", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "flowsim: error: backend 'cuda'" in err


@pytest.mark.parametrize("rows", ["", "a,gpu0,gpu1,0\n"], ids=["no flows", "zero-byte flows"])
def test_nothing_to_solve_is_said_plainly(tmp_path, capsys, rows):
    scenario = tmp_path / "idle.toml"
    scenario.write_text('[topology]\npreset = "dgx_h100"\nfigure = "nominal"\n[workload]\nflows = "f.csv"\n')
    (tmp_path / "f.csv").write_text("name,src,dst,size_bytes\n" + rows)
    assert main(["rates", str(scenario)]) == 0
    n = len(rows.splitlines())
    assert capsys.readouterr().out == f"# idle: 0 flows with bytes to move (of {n}): nothing to solve\n"


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("--scale", "0", "a positive finite number"),
    ("--scale", "-2", "a positive finite number"),
    ("--scale", "inf", "a positive finite number"),
    ("--scale", "nan", "a positive finite number"),
    ("--top", "-1", "a non-negative integer"),
    ("--top", "1.5", "a non-negative integer"),
])
def test_bad_options_are_named(capsys, option, value, expected):
    with pytest.raises(SystemExit):
        main(["rates", str(SCENARIO), option, value])
    assert f"argument {option}: expected {expected}, got '{value}'" in capsys.readouterr().err


def test_a_scale_out_of_range_is_named(capsys):
    # The capacities' overflow said "link ... has capacity inf B/s", and 1e-300 on a scenario
    # whose flows have rate caps named a link by its index; neither named the option.
    assert main(["rates", str(SCENARIO), "--scale", "1", "1e300"]) == 2
    err = capsys.readouterr().err
    assert err == ("flowsim: error: --scale 1e+300: link 'gpu0->nvswitch' would have 3.708e+11 x 1e+300 B/s, "
                   "past float64's range\n")
    capped = SCENARIO.parent / "collective_dgx_h100.toml"  # NCCL's channel caps on its flows
    assert main(["rates", str(capped), "--scale", "1e-300"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flowsim: error: --scale 1e-300: flow '") and "and link 'n0." in err
    assert len(err.splitlines()) == 1
    # Without caps the tiny capacities are solved, and shown as they are, not as 0 B/s.
    assert main(["rates", str(SCENARIO), "--scale", "1e-300"]) == 0
    assert "capacity x1e-300: total 2.97e-288 B/s" in capsys.readouterr().out


def test_top_zero_lists_no_links(capsys):
    assert main(["rates", str(SCENARIO), "--top", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].endswith("16 saturated links") and len(out) == 2
