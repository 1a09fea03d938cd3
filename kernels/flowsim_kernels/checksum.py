"""HDF5's Fletcher-32 checksum, for chunks that flowsim filters itself (flowsim.deflate)."""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def fletcher32(data):
    """The Fletcher-32 checksum HDF5's ``fletcher32`` filter appends to a chunk.

    Parameters
    ----------
    data : uint8[n]
        The chunk as the filter receives it (after shuffle and deflate); not mutated.

    Returns
    -------
    int
        The checksum, 0 to 2**32 - 1; the filter stores it little-endian after the data.

    Notes
    -----
    [HDF5] ``src/H5checksum.c`` ``H5_checksum_fletcher32`` (docs/hardware.md, Sources): the
    data as big-endian 16-bit words (an odd last byte as a word's high byte), ``sum1`` their
    sum and ``sum2`` the sum of the running ``sum1``, both from 0 (not 0xffff), each folded
    to 16 bits plus carry (``(s & 0xffff) + (s >> 16)``) after every 360 words and after the
    odd byte, then once more at the end; the result is ``sum2 << 16 | sum1``. HDF5 sums in
    32 bits; ``sum2`` can wrap there in the worst case of a block (words near 0xffff
    throughout), so it is wrapped here too. One pass: O(n).
    """
    n_words = data.shape[0] // 2
    sum1 = np.int64(0)
    sum2 = np.int64(0)
    k = 0
    while n_words > 0:
        block = min(n_words, 360)  # words between folds: HDF5's bound
        n_words -= block
        for _ in range(block):
            sum1 += (np.int64(data[k]) << 8) | np.int64(data[k + 1])
            sum2 = (sum2 + sum1) & 0xFFFFFFFF
            k += 2
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if data.shape[0] % 2:
        sum1 += np.int64(data[k]) << 8
        sum2 = (sum2 + sum1) & 0xFFFFFFFF
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return ((sum2 << 16) | sum1) & 0xFFFFFFFF
