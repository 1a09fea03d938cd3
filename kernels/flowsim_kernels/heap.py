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


# An indexed min-heap: each item (an int in [0, n)) is in the heap at most once, and
# ``position[item]`` says where (-1 when absent), so an item's key can be changed or the
# item removed in O(log size). The heap's size never exceeds the number of distinct items.


@njit(cache=True)
def iheap_set(keys, items, position, size, item, key):
    """Insert ``item`` with ``key``, or move it to ``key`` if present; return the new size.

    ``keys`` (float64), ``items`` (int64) and ``position`` (int64, -1 for absent items) are
    mutated. O(log size).
    """
    pos = position[item]
    if pos < 0:
        pos = size
        size += 1
    elif key > keys[pos]:
        _isift_down(keys, items, position, size, pos, key, item)
        return size
    _isift_up(keys, items, position, pos, key, item)
    return size


@njit(cache=True)
def iheap_remove(keys, items, position, size, item):
    """Remove ``item`` if present; return the new size. O(log size)."""
    pos = position[item]
    if pos < 0:
        return size
    position[item] = -1
    size -= 1
    if pos == size:
        return size
    last_key = keys[size]
    last_item = items[size]
    if pos > 0 and last_key < keys[(pos - 1) >> 1]:
        _isift_up(keys, items, position, pos, last_key, last_item)
    else:
        _isift_down(keys, items, position, size, pos, last_key, last_item)
    return size


@njit(cache=True)
def _isift_up(keys, items, position, pos, key, item):
    while pos > 0:
        parent = (pos - 1) >> 1
        if keys[parent] <= key:
            break
        keys[pos] = keys[parent]
        items[pos] = items[parent]
        position[items[pos]] = pos
        pos = parent
    keys[pos] = key
    items[pos] = item
    position[item] = pos


@njit(cache=True)
def _isift_down(keys, items, position, size, pos, key, item):
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
        position[items[pos]] = pos
        pos = child
    keys[pos] = key
    items[pos] = item
    position[item] = pos
