"""Compact string columns (flowsim.strings): they read exactly as the tuples they replace."""

import pickle
import re

import numpy as np
import pytest

from flowsim.collectives import collective_workload
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.strings import CodedStrings, JoinedStrings, PackedStrings, coded, first_duplicate, prefixed, utf8_chunks
from flowsim.workload import Workload


def _first_duplicate_twin(values):
    """Slow twin: the first row equal to an earlier one, by a scan with a dict."""
    seen = {}
    for i, value in enumerate(values):
        if value in seen:
            return seen[value], i
        seen[value] = i
    return None


def test_packed_strings_read_as_their_tuple():
    values = ("a", "bé", "ccc", "")
    packed = PackedStrings.from_strings(values)
    assert len(packed) == 4
    assert packed[0] == "a" and packed[1] == "bé" and packed[-1] == "" and packed[-2] == "ccc"
    assert packed[1:3] == ("bé", "ccc") and isinstance(packed[1:3], tuple)
    assert packed[::2] == ("a", "ccc") and packed[3:1] == ()
    assert list(packed) == list(values)
    assert packed == values and packed == list(values) and values == packed
    assert packed != ("a", "bé", "ccc") and packed != ("a", "bé", "ccc", "d")
    assert packed + ("d",) == (*values, "d") and ("z",) + packed == ("z", *values)
    assert packed + CodedStrings.from_strings(["e"]) == (*values, "e")
    with pytest.raises(TypeError):
        packed + ["d"]
    assert packed.nbytes == 7 + 8 * 5  # "a", "bé" (3 bytes of UTF-8), "ccc", "": 7 bytes; 5 offsets
    with pytest.raises(IndexError):
        packed[4]
    with pytest.raises(IndexError):
        packed[-5]


def test_packed_strings_across_chunks():
    values = [f"flow{i}" for i in range(150_001)]  # more than two chunks of 65,536
    packed = PackedStrings.from_strings(iter(values))  # from an iterator, batched
    assert len(packed) == len(values)
    assert list(packed) == values
    assert packed[65_535:65_538] == ("flow65535", "flow65536", "flow65537")
    assert packed[150_000] == "flow150000"


def test_packed_and_coded_columns_join_with_lists_as_their_strings_would():
    # Chunks that are compact columns are taken as they are, between lists of strings.
    packed = PackedStrings.from_chunks([["a", "bé"], PackedStrings.from_strings(["", "cd", "é"]), ["f"]])
    assert tuple(packed) == ("a", "bé", "", "cd", "é", "f")
    # A coded chunk's categories join in the order its rows first show them; a category with
    # no row and a repeated one (a lookup table of endpoints) do not disturb the codes.
    chunk = CodedStrings(("u", "x", "y", "x"), np.array([2, 3, 1, 2]))
    joined = CodedStrings.from_chunks([["x", "z"], chunk, CodedStrings.constant("z", 2), []])
    assert tuple(joined) == ("x", "z", "y", "x", "x", "y", "z", "z")
    assert joined.categories == ("x", "z", "y")
    assert joined == CodedStrings.from_strings(tuple(joined))


def test_coded_strings_read_as_their_tuple():
    values = ("x", "y", "x", "z", "y")
    coded = CodedStrings.from_strings(values)
    assert coded.categories == ("x", "y", "z")  # in the order they first appear
    assert coded.codes.tolist() == [0, 1, 0, 2, 1]
    assert not coded.codes.flags.writeable
    assert coded == values and list(coded) == list(values)
    assert coded[3] == "z" and coded[-1] == "y" and coded[1:4] == ("y", "x", "z")
    constant = CodedStrings.constant("all_reduce", 1_000_000)
    assert constant.codes.strides == (0,)  # no memory per row
    assert constant[999_999] == "all_reduce" and constant[10:12] == ("all_reduce", "all_reduce")
    with pytest.raises(ValueError, match="codes must lie in 0 .. 1"):
        CodedStrings(("a", "b"), np.array([0, 2]))


def test_columns_pickle():
    packed = PackedStrings.from_strings(["a", "bé"])
    coded = CodedStrings.from_strings(["a", "b", "a"])
    assert pickle.loads(pickle.dumps(packed)) == ("a", "bé")
    loaded = pickle.loads(pickle.dumps(coded))
    assert loaded == ("a", "b", "a") and not loaded.codes.flags.writeable  # read-only after a round trip too
    assert pickle.loads(pickle.dumps(CodedStrings.constant("x", 3))) == ("x", "x", "x")


def test_joined_strings_read_as_their_tuple():
    joined = JoinedStrings(("tp.", "pp.", "x"), np.array([0, 0, 1, 2]), ("a", "b.c", ""), np.array([0, 1, 0, 2]))
    values = ("tp.a", "tp.b.c", "pp.a", "x")
    assert len(joined) == 4 and joined == values and joined[1:3] == values[1:3] and joined[-1] == "x"
    assert pickle.loads(pickle.dumps(joined)) == values
    assert set(joined.parts[0]) | set(joined.parts[1]) >= {"tp.", "pp.", "x", "a", "b.c"}
    with pytest.raises(ValueError, match="head_codes must lie in 0 .. 2"):
        JoinedStrings(("a", "b", "c"), np.array([3]), ("",), np.array([0]))


@pytest.mark.parametrize("seed", range(5))
def test_first_duplicate_of_joined_strings_against_twin(seed):
    # Heads that are no prefix of one another are decided by codes; "a." + "b.c" and
    # "a.b." + "c" (a head a prefix of another) by the strings; heads and tails repeated.
    rng = np.random.default_rng(seed)
    for heads, tails in ((("s0.", "s1.", "s10.", "s1."), ("a", "b", "c.d", "a")), (("a.", "a.b.", ""), ("b.c", "c", "a.b.c"))):
        n = 40
        head_codes, tail_codes = rng.integers(0, len(heads), size=n), rng.integers(0, len(tails), size=n)
        joined = JoinedStrings(heads, head_codes, tails, tail_codes)
        values = [heads[h] + tails[t] for h, t in zip(head_codes, tail_codes, strict=True)]
        assert first_duplicate(joined) == _first_duplicate_twin(values)
        firsts = list(dict.fromkeys(zip(head_codes.tolist(), tail_codes.tolist(), strict=True)))  # distinct pairs
        distinct = JoinedStrings(heads, np.array([h for h, _ in firsts]), tails, np.array([t for _, t in firsts]))
        assert first_duplicate(distinct) == _first_duplicate_twin(list(distinct))
    assert first_duplicate(JoinedStrings(("a.", "a.b."), np.array([0, 1]), ("b.c", "c"), np.array([0, 1]))) == (0, 1)
    assert JoinedStrings(("a.", "a.b."), np.array([0]), ("b",), np.array([0])).distinct_codes() is None


@pytest.mark.parametrize("seed", range(5))
def test_first_duplicate_against_twin(seed):
    rng = np.random.default_rng(seed)
    values = [f"n{v}" for v in rng.integers(0, 400, size=300)]  # some repeat
    distinct = [f"n{v}" for v in rng.permutation(300)]
    for column in (values, distinct):
        expected = _first_duplicate_twin(column)
        assert first_duplicate(tuple(column)) == expected
        assert first_duplicate(PackedStrings.from_strings(column)) == expected
        assert first_duplicate(CodedStrings.from_strings(column)) == expected
    assert _first_duplicate_twin(distinct) is None


def test_workload_names_a_duplicate_in_packed_names():
    names = PackedStrings.from_strings(["a", "b", "c", "b"])
    with pytest.raises(InputError, match=r"flow name 'b' is used twice \(flows 1 and 3\)"):
        Workload.build(names, ["g0"] * 4, ["g1"] * 4, [1.0] * 4)


def test_collective_workload_is_compact_and_reads_as_before():
    topology = build_cluster("dgx_h100", 2, figure="effective")
    workload = collective_workload(topology, "all_reduce", 64 << 20, algorithm="ring", protocol="simple").workload
    # A ring's labels: one head per channel and step, one tail per hop, slice and .due.
    assert isinstance(workload.names, JoinedStrings)
    heads, tails = workload.names.parts
    steps = {name.split(".")[2] for name in workload.names}
    channels = {name.split(".")[1] for name in workload.names}
    assert len(heads) == len(steps) * len(channels) and len(tails) <= 2 * 16 * 4
    assert workload.names.distinct_codes() is not None  # heads split where no head is another's start
    assert all(re.fullmatch(r"all_reduce\.ch\d+\.step\d+\.r\d+\.sl\d+(\.due)?", name) for name in workload.names)
    assert isinstance(workload.src, CodedStrings) and isinstance(workload.tags["step"], CodedStrings)
    assert workload.names[0] == "all_reduce.ch0.step0.r0.sl0"
    assert len(set(workload.names)) == len(workload)
    assert workload.tags["collective"] == ("all_reduce",) * len(workload)
    # Endpoint ids: looked up once per distinct name, the same as name by name.
    ids = topology.node_ids(workload.src)
    assert ids.tolist() == [topology.node_index[name] for name in tuple(workload.src)]


def test_coded_gives_distinct_values_and_codes():
    categories, codes = coded(("b", "a", "b", "c"))
    assert categories == ("b", "a", "c") and codes.tolist() == [0, 1, 0, 2]
    column = CodedStrings(("x", "y"), np.array([1, 1, 0]))
    categories, codes = coded(column)  # a coded column's own
    assert categories == ("x", "y") and codes is column.codes


@pytest.mark.parametrize("seed", range(3))
def test_in_order_of_appearance_codes_as_from_strings(seed):
    # Rows given as codes into any list of categories (some unused) come out coded as
    # from_strings codes the same rows (the twin): categories that appear, in that order.
    rng = np.random.default_rng(seed)
    categories = [f"c{k}" for k in range(200)]
    codes = rng.integers(40, 180, size=500)
    column = CodedStrings.in_order_of_appearance(categories, codes)
    twin = CodedStrings.from_strings([categories[c] for c in codes])
    assert column.categories == twin.categories
    assert column.codes.tolist() == twin.codes.tolist() and column.codes.dtype == twin.codes.dtype


def test_narrowed_codes_take_the_smallest_type_and_read_the_same():
    few = CodedStrings.narrowed(("a", "b"), np.array([1, 0, 1], dtype=np.int32))
    assert few == ("b", "a", "b") and few._codes.dtype == np.int8 and not few._codes.flags.writeable
    many = CodedStrings.narrowed(tuple(map(str, range(300))), np.arange(300, dtype=np.int64))
    assert many._codes.dtype == np.int16 and many == tuple(map(str, range(300)))


@pytest.mark.parametrize("prefix", ["grad.", "", "é/"])
def test_a_prefixed_column_keeps_its_kind_and_reads_as_the_prefixed_tuple(prefix):
    values = ("a", "bé", "", "ccc", "a2")
    columns = [PackedStrings.from_strings(values), CodedStrings.from_strings(values),
               JoinedStrings(["a", "b", ""], np.array([0, 1, 2, 2, 0]), ["", "é", "ccc", "2"], np.array([0, 1, 0, 2, 3])),
               values]
    assert all(tuple(column) == values for column in columns)
    for column in columns:
        got = prefixed(column, prefix)
        assert type(got) is type(column)
        assert tuple(got) == tuple(prefix + value for value in values)  # by the slow way, string by string
    many = PackedStrings.from_strings(f"r{i}" for i in range(70_000))
    assert prefixed(many, prefix)[69_999] == f"{prefix}r69999" and len(prefixed(many, prefix)) == 70_000


_VALUES = ("a.b", "bé.", "", "ccc", "a.b", "日本.x", "bé.")


@pytest.mark.parametrize("column", [
    pytest.param(_VALUES, id="tuple"),
    pytest.param(PackedStrings.from_strings(_VALUES), id="packed"),
    pytest.param(PackedStrings.from_strings([v for v in _VALUES if v.isascii()]), id="packed-ascii"),
    pytest.param(CodedStrings.from_strings(_VALUES), id="coded"),
    pytest.param(JoinedStrings(("a.", "bé.", ""), np.array([0, 1, 2, 2, 0, 2, 1]),
                               ("b", "", "", "ccc", "日本.x"), np.array([0, 1, 2, 3, 0, 4, 2])), id="joined"),
])
@pytest.mark.parametrize("size", [1, 3, 100])
def test_utf8_chunks_are_each_row_encoded_in_order(column, size):
    chunks = list(utf8_chunks(column, size))
    assert all(0 < len(chunk) <= size for chunk in chunks)
    assert [b for chunk in chunks for b in chunk] == [value.encode("utf-8") for value in column]
    assert all(type(b) is bytes for chunk in chunks for b in chunk)


def test_utf8_chunks_refuse_a_lone_surrogate_as_encoding_does():
    packed = PackedStrings.from_strings(["ok", "bad\ud800"])  # packed with surrogatepass
    assert packed[1] == "bad\ud800"
    with pytest.raises(UnicodeEncodeError):
        list(utf8_chunks(packed, 8))
    with pytest.raises(UnicodeEncodeError):
        list(utf8_chunks(JoinedStrings(("\udc80",), np.array([0]), ("x",), np.array([0])), 8))
    assert list(utf8_chunks((), 8)) == [] and list(utf8_chunks(PackedStrings.from_strings([]), 8)) == []


def test_joined_from_chunks_keeps_parts_once_and_reads_as_the_rows():
    first = JoinedStrings(("a.", "b."), np.array([0, 1, 0]), ("x", "y"), np.array([0, 0, 1]))
    second = JoinedStrings(("b.", "c."), np.array([1, 0]), ("y", "z"), np.array([1, 0]))
    column = JoinedStrings.from_chunks([first, ["plain", "a.x"], second])
    assert tuple(column) == ("a.x", "b.x", "a.y", "plain", "a.x", "c.z", "b.y")
    assert column.parts == (("a.", "b.", "plain", "a.x", "c."), ("x", "y", "", "z"))
    assert column._head_codes.dtype == np.int8 and not column._head_codes.flags.writeable
    assert tuple(JoinedStrings.from_chunks([])) == ()


@pytest.mark.parametrize("seed", range(3))
def test_joined_from_chunks_equal_the_rows_end_to_end(seed):
    # The twin: every piece's rows as Python strings, one list after another.
    rng = np.random.default_rng(seed)
    pieces = []
    for _ in range(5):
        heads = [f"h{k}." for k in rng.integers(0, 30, size=6)]
        tails = [f"t{k}" for k in rng.integers(0, 30, size=4)]
        n = int(rng.integers(0, 50))
        pieces.append(JoinedStrings(heads, rng.integers(0, 6, size=n), tails, rng.integers(0, 4, size=n)))
    twin = [row for piece in pieces for row in piece]
    assert list(JoinedStrings.from_chunks(pieces)) == twin
    assert list(PackedStrings.from_chunks(pieces)) == twin  # a compact piece packed chunk by chunk
