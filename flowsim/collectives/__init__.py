"""Collectives: NCCL's algorithms as flow DAGs, placed on a topology and reported as
nccl-tests does.

The package's rooms, in the order they depend on each other:

- :mod:`~flowsim.collectives.constants`: NCCL's tuning constants, per NCCL version.
- :mod:`~flowsim.collectives.costs`: NCCL's software costs (latencies, protocol wire
  efficiency) and protocols.
- :mod:`~flowsim.collectives.dag`: the flow-DAG building blocks (messages, rings, chains,
  trees), channels, slices and the step/stream layouts.
- :mod:`~flowsim.collectives.builders`: one builder per algorithm over a list of GPU node
  names, and :data:`ALGORITHM_TABLE`, which says what each algorithm takes (ring orders,
  channels, a root, an NVSwitch).
- :mod:`~flowsim.collectives.rings`: ring orders per channel (rotated per server, or found
  on a GPU mesh's direct links).
- :mod:`~flowsim.collectives.tuner`: what NCCL would run (algorithm, protocol, channels),
  from NCCL's topology search, cost model and channel shrink.
- :mod:`~flowsim.collectives.placement`: one placement on a topology for every caller
  (``flowsim collective``, ``flowsim check``, scenario files, sweeps, training steps):
  ranks, channels, ring orders, costs and the NVLS switch chosen from the hardware.
- :mod:`~flowsim.collectives.report`: algbw, busbw and nccl-tests' tables.

Adding an algorithm is a builder and a row of :data:`ALGORITHM_TABLE`.
"""

from flowsim.collectives.builders import (
    ALGORITHM_TABLE,
    ALGORITHMS,
    COLLECTIVES,
    PEER_SPLIT,
    Algorithm,
    algorithm_of,
    all_gather,
    all_reduce,
    all_to_all,
    all_to_all_v,
    all_to_all_v_bytes,
    broadcast,
    build_collective,
    check_algorithm,
    check_protocol,
    collective_name,
    collnet_chain_all_reduce,
    collnet_direct_all_gather,
    collnet_direct_all_reduce,
    collnet_direct_reduce_scatter,
    gather,
    hierarchical_all_reduce,
    hypercube,
    nvls_all_gather,
    nvls_all_reduce,
    nvls_reduce_scatter,
    nvls_sharp_all_gather,
    nvls_sharp_all_reduce,
    nvls_sharp_reduce_scatter,
    nvls_tree_all_reduce,
    pat_all_gather,
    pat_reduce_scatter,
    reduce,
    reduce_scatter,
    resolve_algorithm,
    scatter,
    send,
    tree_all_reduce,
)
from flowsim.collectives.chunks import NVLS_CHUNK_BYTES
from flowsim.collectives.costs import (
    NVLS_BUSBW_CEILING_GBPS,
    NVLS_EFFICIENCY,
    P2P_NVLINK_EFFICIENCY,
    PROTOCOLS,
    CollectiveCosts,
    nccl_costs,
    nvls_costs,
    nvls_sharp_costs,
    nvls_tree_costs,
    pat_costs,
)
from flowsim.collectives.dag import (
    MAX_PIPELINE_SLICES,
    MAX_RING_SLICES,
    MODELS,
    NCCL_SLOT_BYTES,
    STEP_MESSAGE_LIMIT,
)
from flowsim.collectives.placement import (
    CollectivePlan,
    CollectiveRun,
    check_nvswitch,
    collective_time,
    collective_workload,
    rank_servers,
    send_pair,
)
from flowsim.collectives.rings import mesh_rings, rotated_rings

__all__ = [
    "ALGORITHMS",
    "ALGORITHM_TABLE",
    "COLLECTIVES",
    "PEER_SPLIT",
    "MAX_PIPELINE_SLICES",
    "MAX_RING_SLICES",
    "MODELS",
    "NCCL_SLOT_BYTES",
    "NVLS_BUSBW_CEILING_GBPS",
    "NVLS_CHUNK_BYTES",
    "NVLS_EFFICIENCY",
    "P2P_NVLINK_EFFICIENCY",
    "PROTOCOLS",
    "STEP_MESSAGE_LIMIT",
    "Algorithm",
    "CollectiveCosts",
    "CollectivePlan",
    "CollectiveRun",
    "algorithm_of",
    "check_nvswitch",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "all_to_all_v_bytes",
    "broadcast",
    "check_algorithm",
    "check_protocol",
    "build_collective",
    "collective_name",
    "collective_time",
    "collective_workload",
    "gather",
    "hierarchical_all_reduce",
    "hypercube",
    "mesh_rings",
    "nccl_costs",
    "nvls_all_gather",
    "nvls_all_reduce",
    "nvls_costs",
    "nvls_reduce_scatter",
    "nvls_sharp_all_gather",
    "nvls_sharp_all_reduce",
    "nvls_sharp_reduce_scatter",
    "collnet_chain_all_reduce",
    "collnet_direct_all_gather",
    "collnet_direct_all_reduce",
    "collnet_direct_reduce_scatter",
    "nvls_sharp_costs",
    "nvls_tree_all_reduce",
    "nvls_tree_costs",
    "pat_all_gather",
    "pat_costs",
    "pat_reduce_scatter",
    "rank_servers",
    "reduce",
    "reduce_scatter",
    "resolve_algorithm",
    "rotated_rings",
    "scatter",
    "send",
    "send_pair",
    "tree_all_reduce",
]
