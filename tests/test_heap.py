"""The heaps behind the solver and the engine, against Python's heapq and a dict."""

import heapq

import numpy as np

from flowsim_kernels.heap import heap_pop, heap_push, heap_replace_top, iheap_remove, iheap_set


def test_heap_pops_in_key_order(rng):
    keys = np.empty(200)
    items = np.empty(200, dtype=np.int64)
    size = 0
    values = rng.uniform(0, 1, 200)
    for i, v in enumerate(values):
        size = heap_push(keys, items, size, v, i)
    popped = []
    while size:
        popped.append(items[0])
        size = heap_pop(keys, items, size)
    assert popped == list(np.argsort(values, kind="stable"))


def test_replace_top_matches_heapreplace(rng):
    keys = np.empty(50)
    items = np.empty(50, dtype=np.int64)
    size = 0
    twin = []
    for i, v in enumerate(rng.uniform(0, 1, 50)):
        size = heap_push(keys, items, size, v, i)
        heapq.heappush(twin, v)
    for v in rng.uniform(0.5, 2, 30):
        heap_replace_top(keys, items, size, v, -1)
        heapq.heapreplace(twin, v)
        assert keys[0] == twin[0]


def test_indexed_heap_against_a_dict(rng):
    n = 64
    keys = np.empty(n)
    items = np.empty(n, dtype=np.int64)
    position = np.full(n, -1, dtype=np.int64)
    size = 0
    twin = {}
    for _ in range(2000):
        item = int(rng.integers(n))
        if rng.random() < 0.3:
            size = iheap_remove(keys, items, position, size, item)
            twin.pop(item, None)
        else:
            key = float(rng.uniform(0, 10))
            size = iheap_set(keys, items, position, size, item, key)
            twin[item] = key
        assert size == len(twin)
        if twin:
            assert keys[0] == min(twin.values())
            assert twin[items[0]] == keys[0]
        for pos in range(size):
            assert position[items[pos]] == pos
            assert twin[items[pos]] == keys[pos]
