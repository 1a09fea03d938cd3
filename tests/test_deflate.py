"""Chunks filtered on worker threads (flowsim.deflate) against HDF5's own filters."""

import zlib

import h5py
import numpy as np
import pytest

from flowsim.deflate import ColumnWriter, filtered_chunk
from flowsim_kernels.checksum import fletcher32
from reference import fletcher32_reference


def _checksum(data: bytes) -> int:
    return int(fletcher32(np.frombuffer(data, dtype=np.uint8)))


def test_fletcher32_by_hand():
    # Words 0x0102, 0x0304: sum1 = 0x0102 then 0x0406; sum2 = 0x0102 then 0x0508.
    assert _checksum(b"\x01\x02\x03\x04") == 0x05080406
    # An odd last byte is a word's high byte: 0x0300; sum1 = 0x0402, sum2 = 0x0102 + 0x0402.
    assert _checksum(b"\x01\x02\x03") == 0x05040402
    # Words 0xffff, 0x0001: sum1 = 0x10000, sum2 = 0xffff + 0x10000 = 0x1ffff; the block's
    # fold gives sum1 = 0x0001, sum2 = 0xffff + 0x1 = 0x10000; the last fold sum2 = 0x0001.
    assert _checksum(b"\xff\xff\x00\x01") == 0x00010001
    assert _checksum(b"\x00") == 0


@pytest.mark.parametrize("seed", range(4))
def test_fletcher32_against_twin(seed):
    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 719, 720, 721, 1441, int(rng.integers(2000, 9000))):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert _checksum(data) == fletcher32_reference(data), n


@pytest.mark.parametrize("n", [720, 721, 1440, 5000, 20001])
def test_fletcher32_where_the_32_bit_sum_wraps(n):
    # Words of 0xffff throughout: HDF5's second sum passes 2**32 in the second block of 360.
    data = b"\xff" * n
    assert _checksum(data) == fletcher32_reference(data)


def _dataset(f, name, values, chunk):
    return f.create_dataset(name, shape=values.shape, maxshape=(None,), dtype=values.dtype, chunks=(chunk,),
                            compression="gzip", compression_opts=1, shuffle=True, fletcher32=True)


_COLUMNS = [
    pytest.param(np.cumsum(np.random.default_rng(1).uniform(0, 1e-3, 1000)), id="float64"),
    pytest.param(np.random.default_rng(2).integers(-5, 3000, 1000), id="int64"),
    pytest.param(np.random.default_rng(3).random(1000) < 0.3, id="bool"),
    # Random 64-bit patterns do not compress: deflate's stream is longer than the chunk.
    pytest.param(np.random.default_rng(4).integers(-2**63, 2**63 - 1, 1000, dtype=np.int64), id="incompressible"),
    pytest.param(np.array([2.5]), id="one-row"),
]


@pytest.mark.parametrize("values", _COLUMNS)
@pytest.mark.parametrize("chunk", [1000, 256, 7, 1])
def test_chunks_are_what_hdf5_filters_make(tmp_path, values, chunk):
    chunk = min(chunk, values.shape[0])
    with h5py.File(tmp_path / "h.h5", "w") as f, ColumnWriter(workers=2) as columns:
        ours, theirs = _dataset(f, "ours", values, chunk), _dataset(f, "theirs", values, chunk)
        theirs[:] = values  # through HDF5's filter pipeline
        columns.put(ours, values)
        columns.finish()
        for lo in range(0, values.shape[0], chunk):
            their_mask, their_chunk = theirs.id.read_direct_chunk((lo,))
            our_mask, our_chunk = ours.id.read_direct_chunk((lo,))
            assert our_mask == their_mask == 0
            # HDF5's checksum is the kernel's, stored little-endian, on both.
            assert int.from_bytes(their_chunk[-4:], "little") == _checksum(their_chunk[:-4])
            assert int.from_bytes(our_chunk[-4:], "little") == _checksum(our_chunk[:-4])
            # The shuffled chunk, padded with zeros, is HDF5's (the deflate streams may differ
            # between two zlib builds; both decode to it).
            assert zlib.decompress(our_chunk[:-4]) == zlib.decompress(their_chunk[:-4])
            assert our_chunk == filtered_chunk(values[lo : lo + chunk], values.dtype, chunk, 1)
    with h5py.File(tmp_path / "h.h5", "r") as f:  # read back through HDF5's checks
        assert np.array_equal(f["ours"][:], values) and f["ours"].dtype == values.dtype


def test_a_damaged_chunk_fails_hdf5s_checksum(tmp_path):
    values = np.arange(100, dtype=np.float64)
    with h5py.File(tmp_path / "d.h5", "w") as f, ColumnWriter(workers=1) as columns:
        ds = _dataset(f, "x", values, 100)
        data = bytearray(filtered_chunk(values, values.dtype, 100, 1))
        data[-5] ^= 0x01  # the deflate stream's last byte
        ds.id.write_direct_chunk((0,), bytes(data), 0)
        columns.put(_dataset(f, "y", values, 100), values)
        columns.finish()
    with h5py.File(tmp_path / "d.h5", "r") as f:
        with pytest.raises(OSError):
            f["x"][:]
        assert np.array_equal(f["y"][:], values)


def test_column_writer_writes_in_the_background_and_in_order(tmp_path):
    rng = np.random.default_rng(5)
    columns_in = [rng.random(10_000) for _ in range(6)] + [rng.integers(0, 9, 3_001)]
    with h5py.File(tmp_path / "w.h5", "w") as f, ColumnWriter(workers=3) as columns:
        for k, values in enumerate(columns_in):
            columns.put(_dataset(f, f"c{k}", values, 512), values)
            columns.poll()
        columns.finish()
        columns.finish()  # nothing left: a no-op
    with h5py.File(tmp_path / "w.h5", "r") as f:
        for k, values in enumerate(columns_in):
            assert np.array_equal(f[f"c{k}"][:], values)


def test_column_writer_refuses_datasets_it_cannot_filter(tmp_path):
    with h5py.File(tmp_path / "r.h5", "w") as f, ColumnWriter(workers=1) as columns:
        plain = f.create_dataset("plain", shape=(10,), dtype="f8", chunks=(5,), compression="gzip")
        with pytest.raises(ValueError, match="plain: filters other than shuffle, deflate and Fletcher-32"):
            columns.put(plain, np.zeros(10))
        contiguous = f.create_dataset("contiguous", shape=(10,), dtype="f8")
        with pytest.raises(ValueError, match="contiguous: not a 1-D chunked dataset"):
            columns.put(contiguous, np.zeros(10))
        good = _dataset(f, "good", np.zeros(10), 5)
        with pytest.raises(ValueError, match=r"good: 9 values for 10 rows"):
            columns.put(good, np.zeros(9))
