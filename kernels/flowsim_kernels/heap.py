"""A binary min-heap of (key, item) pairs kept in two flat arrays.

Callers own the arrays and the current size, so a kernel can hold several heaps without
allocating per operation. Stale entries are the caller's business: the usual pattern is to
push a new entry when an item's key changes and to skip popped entries whose key no longer
matches the item's current one (lazy deletion).
"""

from numba import njit


@njit(cache=True)
def heap_push(keys, items, size, key, item):
    """Insert ``(key, item)`` into the heap of ``size`` entries; return the new size.

    ``keys`` (float64) and ``items`` (int64) are mutated and must have room for one more.
    O(log size).
    """
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if keys[parent] <= key:
            break
        keys[pos] = keys[parent]
        items[pos] = items[parent]
        pos = parent
    keys[pos] = key
    items[pos] = item
    return size + 1


@njit(cache=True)
def heap_pop(keys, items, size):
    """Remove the smallest entry of a non-empty heap; return the new size.

    Read the entry from ``keys[0]``, ``items[0]`` before calling. O(log size).
    """
    size -= 1
    if size > 0:
        heap_replace_top(keys, items, size, keys[size], items[size])
    return size


@njit(cache=True)
def heap_replace_top(keys, items, size, key, item):
    """Replace the smallest entry of a non-empty heap by ``(key, item)``.

    Cheaper than a pop followed by a push: one sift-down. O(log size).
    """
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= key:
            break
        keys[pos] = keys[child]
        items[pos] = items[child]
        pos = child
    keys[pos] = key
    items[pos] = item
