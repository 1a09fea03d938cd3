"""``flowsim check`` on the JSON file nccl-tests' ``-J`` option writes (src/util.cu of
NVIDIA/nccl-tests, JSON_FILE_VERSION 3): the same run as its text output, a process that
drives several GPUs, a file cut short, older spellings, and bad files named by key."""

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from flowsim.check import check_nccl_log, parse_nccl_log
from flowsim.commands.check import add_parser
from flowsim.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
TEXT = DATA / "all_reduce_perf_dgx_h100_4node.txt"
JSON = DATA / "all_reduce_perf_dgx_h100_4node.json"


def _unplaced(item):
    """A rank or row without where it was read, which differs between text and JSON."""
    return dataclasses.replace(item, line=0, key="")


def _document():
    return json.loads(JSON.read_text())


def _written(document):
    """``document`` on one line, as nccl-tests writes it."""
    return json.dumps(document, separators=(",", ":"))


def test_json_output_reads_as_the_text_output_of_the_same_run():
    text, data = parse_nccl_log(TEXT), parse_nccl_log(JSON)
    assert (data.binary, data.collective, data.n_ranks, data.hosts) == (
        "all_reduce_perf", "all_reduce", 32, ("dgx-a01", "dgx-a02", "dgx-a03", "dgx-a04"))
    assert [_unplaced(r) for r in data.rows] == [_unplaced(r) for r in text.rows]
    assert [_unplaced(r) for r in data.ranks] == [_unplaced(r) for r in text.ranks]
    assert (data.n_threads, data.n_gpus, data.agg_iters, data.cuda_graph) == (1, 1, 1, 0)
    assert data.avg_busbw_GBps == 263.275 and data.nccl_version == "2.27.3" and data.warnings == ()
    # The environment's NCCL variables, in order; PATH and OMPI's are not NCCL's.
    assert [key for key, _ in data.nccl_env] == ["NCCL_DEBUG", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"]
    first = data.rows[0]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (1048576, 262144, "float", "sum", -1)
    assert (first.out_of_place.time_us, first.out_of_place.busbw_GBps, first.in_place.wrong) == (65.49, 31.02, 0)
    assert (first.key, data.ranks[9].key, data.ranks[9].bus) == ("results[0]", "config.devices[9]", "0000:2a:00")


def test_one_process_stands_for_its_threads_times_gpus_ranks():
    """nccl-tests lists one device per process (the first of its rank lines): a process run
    with -g 8 drives ranks 0-7 on devices 0-7 of its host."""
    document = _document()
    document["args"][0] = "/opt/nccl-tests/build/all_gather_perf_mpi"
    document["config"].update(ngpus=4, nthreads=2, devices=document["config"]["devices"][:1])
    for result in document["results"]:
        result["redop"] = "none"
        result["in_place"]["cpu_time"] = result["in_place"].pop("time")  # -C 1
        result["in_place"]["nwrong"] = None  # -c 0
    # Files before nccl-tests' commit 85ca91d spell the average this way.
    document["average_bus_bandwidith"] = {"bandwidith": 12.5, "okay": "unchecked"}
    del document["average_bus_bandwidth"]
    log = parse_nccl_log(_written(document))
    assert (log.binary, log.source, log.n_ranks, log.n_nodes) == ("all_gather_perf", "<text>", 8, 1)
    assert [(r.rank, r.device) for r in log.ranks] == [(i, i) for i in range(8)]
    assert [r.bus for r in log.ranks] == ["0000:18:00"] + [""] * 7
    assert {r.key for r in log.ranks} == {"config.devices[0]"}
    row = log.rows[0]
    assert (row.in_place.time_us, row.in_place.wrong, row.redop) == (65.23, None, "none")
    assert log.avg_busbw_GBps == 12.5


def test_a_file_cut_short_is_read_up_to_its_last_complete_result():
    whole = JSON.read_text()
    cut = whole[: whole.index('{"size":4194304')] + '{"size":4194304,"count":104'
    log = parse_nccl_log(cut)
    assert [r.size_bytes for r in log.rows] == [1048576, 2097152]
    assert log.avg_busbw_GBps is None
    assert len(log.warnings) == 1 and "cut short" in log.warnings[0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["results"][2]["out_of_place"].update(bus_bw="nan"),
         r"results\[2\]\.out_of_place\.bus_bw: expected a finite number >= 0 .* got \"nan\""),
        (lambda d: d["results"][0]["in_place"].update(alg_bw=-1.0), r"results\[0\]\.in_place\.alg_bw:"),
        (lambda d: d.pop("config"), r"key config is missing"),
        (lambda d: d["config"].update(ngpus=0), r"config\.ngpus: expected a whole number of at least 1, got 0"),
        (lambda d: d["config"]["devices"][5].update(rank=4), r"config\.devices\[5\]\.rank: rank 4 is listed twice"),
        (lambda d: d["config"]["devices"].pop(3), r"config\.devices: lists 31 ranks but not rank 3"),
        (lambda d: d["results"][1].update(out_of_place=None), r"results\[1\]: out_of_place is null"),
        (lambda d: d["results"][1].update(root=0), r"results\[1\]\.root: expected the root .* got 0"),
        (lambda d: d["results"][1].update(size=True), r"results\[1\]\.size: expected a whole number, got true"),
        (lambda d: d.update(results=[]), r"results: no results"),
    ],
)
def test_a_bad_file_is_refused_naming_the_key(change, message):
    document = _document()
    change(document)
    with pytest.raises(InputError, match=message):
        parse_nccl_log(_written(document))


def test_text_that_is_not_json_is_refused_with_its_line_and_column():
    with pytest.raises(InputError, match=r"<text>, line 2, column 1: not valid JSON"):
        parse_nccl_log('{"version": 3,\n]')
    # Two documents: nccl-tests writes one per file.
    with pytest.raises(InputError, match=r"line 1, column 3: not valid JSON \(Extra data\)"):
        parse_nccl_log("{}{}")


def test_an_array_of_runs_is_refused_in_json_terms(tmp_path, capsys):
    # Two -J files put in a list: each run is one object, in a file of its own.
    path = tmp_path / "runs.json"
    path.write_text("[\n" + JSON.read_text().strip() + ",\n" + JSON.read_text().strip() + "\n]\n")
    message = (f"{path}: a JSON array at the top level, where nccl-tests' -J output is one JSON object (its run); "
               "give each run's object as a file of its own")
    with pytest.raises(InputError) as refused:
        parse_nccl_log(path)
    assert str(refused.value) == message
    with pytest.raises(InputError, match=r"<text>: a JSON array at the top level"):
        parse_nccl_log("[]")
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", str(path), "--system", "dgx-h100"])
    assert args.func(args) == 2
    assert capsys.readouterr().err == f"flowsim check: error: {message}\n"
    # A launcher's tag before each text line is not an array.
    assert parse_nccl_log("\n".join("[1,0]<stdout>:" + line for line in TEXT.read_text().splitlines())).n_ranks == 32


def test_flowsim_check_reads_a_json_file(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="flowsim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", str(JSON), "--system", "dgx-h100", "--min-bytes", "4G"])
    args.func(args)
    out = capsys.readouterr().out
    assert f"# {JSON}: all_reduce_perf, 32 ranks on 4 node(s) (NVIDIA H100 80GB HBM3)" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 14
    # The predicted sizes show what ran (algorithm, protocol, channels), then the prediction,
    # then the file's measured busbw (out-of-place and in-place).
    assert [(r[0], r[5], r[7]) for r in rows[-2:]] == [("4294967296", "369.02", "370.49"),
                                                      ("8589934592", "369.51", "368.03")]


def test_options_the_file_contradicts_are_warned():
    # args[0] is ./build/all_reduce_perf and config.devices puts 8 ranks on each of 4 hosts.
    log = parse_nccl_log(JSON, collective="all_gather", gpus_per_node=4)
    assert (log.binary, log.n_ranks, log.n_nodes) == ("all_reduce_perf", 32, 4)
    assert log.warnings[-2:] == (
        "the log's rank lines put 8 GPU(s) on each host, not 4 (--gpus-per-node): predicting the ranks they name",
        "args[0]: the log names its test all_reduce_perf, not all_gather_perf (--collective): checking it as the "
        "all_reduce_perf it names",
    )
    assert parse_nccl_log(JSON, collective="all_reduce", gpus_per_node=8).warnings == parse_nccl_log(JSON).warnings


def test_a_result_whose_count_does_not_make_its_size_is_warned_by_its_key():
    # results[0]: 1048576 B of float, 262144 x 4 B; 262145 make 1048580 B.
    document = _document()
    assert (document["results"][0]["size"], document["results"][0]["count"]) == (1048576, 262144)
    document["results"][0]["count"] = 262145
    assert parse_nccl_log(_written(document)).warnings[-1] == (
        "results[0]: count 262145 of float (4 B) makes 1048580 B, not the 1048576 B of the size column: a row "
        "edited or garbled; predicting the size")


def test_a_device_the_system_lacks_is_named_by_its_key():
    document = _document()
    document["config"]["devices"][7]["device"] = 9
    with pytest.raises(InputError, match=r"^<text>, config\.devices\[7\]: rank 7 uses device 9, which a dgx"):
        check_nccl_log(_written(document), system="dgx-h100", min_bytes=8 << 30)
    # The same GPU (device and bus) twice; with other bus ids it would read as one GPU per
    # process under CUDA_VISIBLE_DEVICES.
    document["config"]["devices"][7].update(device=6, device_hex=document["config"]["devices"][6]["device_hex"])
    with pytest.raises(InputError, match=r"ranks 6 \(config\.devices\[6\]\) and 7 \(config\.devices\[7\]\) both"):
        check_nccl_log(_written(document), system="dgx-h100", min_bytes=8 << 30)


def test_text_output_after_a_json_log_line_is_read_as_text():
    # A launcher that logs in JSON puts its own line before nccl-tests' text output.
    text = '{"level": "info", "msg": "job started"}\n' + TEXT.read_text()
    assert [_unplaced(r) for r in parse_nccl_log(text).rows] == [_unplaced(r) for r in parse_nccl_log(TEXT).rows]
