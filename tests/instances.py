"""Seeded random inputs that several test modules and the benchmarks draw from (pytest puts
this directory on ``sys.path``: ``pythonpath`` in pyproject.toml)."""

import numpy as np


def random_batch(rng, n_instances, n_flows, n_links, max_hops, p_capped=0.2):
    """Shared random routes; capacities, weights and caps drawn per instance."""
    routes = [
        rng.choice(n_links, size=rng.integers(1, max_hops + 1), replace=False).tolist() for _ in range(n_flows)
    ]
    capacity = rng.uniform(1.0, 100.0, (n_instances, n_links))
    weight = rng.choice([0.5, 1.0, 2.0, 3.0], (n_instances, n_flows))
    cap = np.where(
        rng.random((n_instances, n_flows)) < p_capped, rng.uniform(0.01, 20.0, (n_instances, n_flows)), np.inf
    )
    return routes, capacity, weight, cap


def parking_lot_kernel_arguments(n_instances):
    """The parking lot of docs/model.md case 3 (rates 0.5, 0.5, 1.5) as the batch kernels take
    it: the route CSR pair and its transpose, then capacities, weights and caps, one
    C-contiguous row per instance, and a rate array to fill."""
    from flowsim.batched import BatchProblem

    problem = BatchProblem.build([[0, 1], [0], [1]], [[1.0, 2.0]] * n_instances)
    routes = (problem.routes.flow_link_indptr, problem.routes.flow_link_indices,
              problem.link_flow_indptr, problem.link_flow_indices)
    values = tuple(np.ascontiguousarray(a) for a in (problem.capacity_Bps, problem.weight, problem.cap_Bps))
    return routes, values, np.empty((n_instances, 3))


#: Mean of the Pareto(1.2) flow sizes of :func:`fat_tree_traffic` (minimum 200 kB).
MEAN_SIZE_BYTES = 1.2e6


def fat_tree_random_pairs(k, n_flows, seed):
    """A k-ary fat-tree (NDR links, nominal) and ECMP routes (hash seed ``seed``) of random
    distinct host pairs: ``(topology, routes)``."""
    from flowsim.fabrics import fat_tree
    from flowsim.routing import Router
    from flowsim.topology import NodeKind

    topology = fat_tree(k, figure="nominal")
    hosts = topology.nodes_of_kind(NodeKind.NIC)
    rng = np.random.default_rng(seed)
    src, dst = rng.choice(hosts, n_flows), rng.choice(hosts, n_flows)
    clash = src == dst
    dst[clash] = hosts[(np.searchsorted(hosts, dst[clash]) + 1) % hosts.size]
    return topology, Router(topology).route(src, dst, method="ecmp", seed=seed)


def fat_tree_traffic(k, n_flows, load, seed):
    """:func:`fat_tree_random_pairs`, Pareto(1.2) sizes of at least 200 kB, and Poisson
    arrivals at ``load`` of the host links' rate (all at t=0 for load 0):
    ``(topology, routes, size_bytes, start_s)``.

    Sizes and arrivals come from a second generator seeded with the same ``seed``, as the
    engine benchmarks have always drawn them, so that their instances stay the ones the
    stored baselines (benchmarks/baselines) timed.
    """
    from flowsim.topology import NodeKind

    topology, routes = fat_tree_random_pairs(k, n_flows, seed)
    rng = np.random.default_rng(seed)
    size = (rng.pareto(1.2, n_flows) + 1.0) * 200e3
    if load == 0:
        return topology, routes, size, np.zeros(n_flows)
    n_hosts = topology.nodes_of_kind(NodeKind.NIC).size
    arrivals_per_s = load * topology.link_capacity_Bps.max() * n_hosts / MEAN_SIZE_BYTES
    return topology, routes, size, np.cumsum(rng.exponential(1.0 / arrivals_per_s, n_flows))


def two_host_h100_log(info=(), busbw="150.00", time_us="13421.8"):
    """A constructed ``all_reduce_perf`` output of 16 H100 on two hosts (nccl-tests' layout,
    ``src/util.cu``; not a measurement): one 1 GiB row at ``busbw`` (algbw = busbw x 8/15)
    and ``time_us``, with ``info`` lines (NCCL's INFO texts, as a run with NCCL_DEBUG=INFO
    prints them) before the table."""
    lines = ["# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902",
             "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on     box-{r // 8} device  {r % 8} [0000:{r:02x}:00] "
              "NVIDIA H100 80GB HBM3" for r in range(16)]
    lines += [f"box-0:100:110 [0] NCCL INFO {line}" for line in info]
    algbw = f"{float(busbw) * 8 / 15:.2f}"
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
              "algbw   busbw #wrong", "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)",
              f"  1073741824     268435456     float     sum      -1  {time_us:>7}  {algbw:>6}  {busbw:>6}      0  "
              f"{time_us:>7}  {algbw:>6}  {busbw:>6}      0"]
    return "\n".join(lines) + "\n"
