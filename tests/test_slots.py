"""The engine's per-link slot blocks, against a list of flows per link."""

import numpy as np
import pytest

from flowsim_kernels.slots import BLOCK, grow_block, initial_blocks


class Pool:
    """Adds and removes flows the way the engine does, through the kernels under test."""

    def __init__(self, routes):
        self.routes = routes  # per flow, its links; incidence k is flow f's i-th link
        self.inc_of = []
        k = 0
        for links in routes:
            self.inc_of.append(list(range(k, k + len(links))))
            k += len(links)
        self.link_of_inc = np.array([link for links in routes for link in links], dtype=np.int64)
        n_links = int(self.link_of_inc.max()) + 1
        self.total = np.bincount(self.link_of_inc, minlength=n_links).astype(np.int64)
        self.start, self.cap, self.end = initial_blocks(self.total)
        self.count = np.zeros(n_links, dtype=np.int64)
        n_inc = self.link_of_inc.size
        self.slot_flow = np.full(n_inc, -1, dtype=np.int64)
        self.slot_inc = np.full(n_inc, -1, dtype=np.int64)
        self.slot_val = np.full((n_inc, 3), np.nan)
        self.inc_slot = np.full(n_inc, -1, dtype=np.int64)
        self.repacks = 0

    def add(self, f):
        for k, link in zip(self.inc_of[f], self.routes[f]):
            if self.count[link] == self.cap[link]:
                # A repack is the only way the end in use ends up short of the doubled block.
                wanted = self.end + min(2 * self.cap[link], self.total[link])
                self.end = grow_block(
                    link, self.start, self.count, self.cap, self.total,
                    self.slot_flow, self.slot_inc, self.slot_val, self.inc_slot, self.end,
                )
                self.repacks += self.end < wanted
            s = self.start[link] + self.count[link]
            self.count[link] += 1
            self.slot_flow[s] = f
            self.slot_inc[s] = k
            self.inc_slot[k] = s
            self.slot_val[s] = (f, k, -f)

    def remove(self, f):
        for k, link in zip(self.inc_of[f], self.routes[f]):
            last = self.start[link] + self.count[link] - 1
            s = self.inc_slot[k]
            moved = self.slot_inc[last]
            self.slot_flow[s] = self.slot_flow[last]
            self.slot_inc[s] = moved
            self.slot_val[s] = self.slot_val[last]
            self.inc_slot[moved] = s
            self.count[link] -= 1

    def flows_on(self, link):
        return self.slot_flow[self.start[link] : self.start[link] + self.count[link]].tolist()


def swap_remove(flows, f):
    """The list twin of Pool.remove: the link's last flow takes the leaving one's place."""
    i = flows.index(f)
    flows[i] = flows[-1]
    flows.pop()


def check(pool, twin):
    blocks = sorted((pool.start[link], pool.cap[link]) for link in range(pool.total.size) if pool.cap[link] > 0)
    for (a, n), (b, _) in zip(blocks, blocks[1:]):
        assert a + n <= b, "blocks overlap"
    assert blocks[-1][0] + blocks[-1][1] <= pool.end <= pool.slot_flow.size
    assert np.all(pool.count <= pool.cap) and np.all(pool.cap <= pool.total)
    for link, flows in enumerate(twin):
        assert pool.flows_on(link) == flows
        for s in range(pool.start[link], pool.start[link] + pool.count[link]):
            f, k = pool.slot_flow[s], pool.slot_inc[s]
            assert pool.inc_slot[k] == s and pool.link_of_inc[k] == link
            assert pool.slot_val[s].tolist() == [f, k, -f]


def test_initial_blocks_hand_case():
    start, cap, end = initial_blocks(np.array([0, 2, 9, 4], dtype=np.int64))
    assert cap.tolist() == [0, 2, BLOCK, 4]
    assert start.tolist() == [0, 0, 2, 2 + BLOCK]
    assert end == 6 + BLOCK


def test_one_busy_link_grows_then_takes_its_whole_row():
    # Ten flows over link 0, one over link 1: the pool has 11 slots, 4 + 1 in use. At its
    # 5th flow link 0 needs 8 slots; the pool's end has no room (5 + 8 > 11), so the blocks
    # are packed again, with room for twice their flows up to their totals: 8 and 1. At its
    # 9th flow it needs min(16, 10) = 10 slots: no room again, and packing with 10 and 1
    # would leave less than a quarter of the pool free, so each link takes its whole row.
    pool = Pool([[0]] * 10 + [[1]])
    twin = [[], []]
    pool.add(10)
    twin[1].append(10)
    for f in range(10):
        pool.add(f)
        twin[0].append(f)
        check(pool, twin)
    assert pool.cap.tolist() == [10, 1] and pool.start.tolist() == [0, 10] and pool.repacks == 2


def test_repack_keeps_room_for_twice_the_flows():
    # Links 0 and 1 are crossed by 20 flows each, link 2 by 40 (never at once): the pool
    # has 80 slots, blocks of 4 from 0, 4 and 8. Link 0 grows to 8 slots at 12, link 1 to 8
    # at 20 then 16 at 28, link 0 to 16 at 44, link 1 to its 20 at 60 (the pool is full). At
    # its 17th flow link 0 needs 20 more: the blocks are packed again in their order (links
    # 2, 0, 1) with room for twice their flows up to their totals: 4, 20 and 20 slots.
    pool = Pool([[0]] * 20 + [[1]] * 20 + [[2]] * 40)
    twin = [[], [], []]
    for flows in (range(0, 5), range(20, 29), range(5, 9), range(29, 37), range(9, 17)):
        for f in flows:
            pool.add(f)
            twin[f // 20].append(f)
            check(pool, twin)
    assert pool.repacks == 1
    assert pool.start.tolist() == [4, 24, 0] and pool.cap.tolist() == [20, 20, 4] and pool.end == 44


@pytest.mark.parametrize("seed", range(8))
def test_random_arrivals_and_departures_match_lists(seed):
    # Up to a random number of flows at once, so that some runs repack with room to spare
    # and some fall back to whole rows.
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(3, 12))
    routes = [rng.choice(n_links, int(rng.integers(1, 4)), replace=False).tolist() for _ in range(300)]
    most_active = int(rng.integers(20, 250))
    pool = Pool(routes)
    twin = [[] for _ in range(n_links)]
    active = []
    waiting = list(rng.permutation(len(routes)))
    while waiting or active:
        if waiting and len(active) < most_active and (not active or rng.random() < 0.8):
            f = int(waiting.pop())
            pool.add(f)
            for link in routes[f]:
                twin[link].append(f)
            active.append(f)
        else:
            f = active.pop(int(rng.integers(len(active))))
            pool.remove(f)
            for link in routes[f]:
                swap_remove(twin[link], f)
        check(pool, twin)
