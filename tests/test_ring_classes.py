"""Large rings, laid out by classes of hops (flowsim.collectives.symmetry):
every message of the full step DAG finishes when its class's message does, the links carry
what they carry in the full DAG, and where the hops have no classes worth it the model
decides as before."""

from __future__ import annotations

import re

import numpy as np
import pytest

import flowsim.collectives.dag as dag_module
from flowsim.collectives import collective_time
from flowsim.collectives.symmetry import RingClasses
from flowsim.errors import InputError
from flowsim.fabrics import build_cluster
from flowsim.failures import apply_failures
from flowsim.routing import Router

_LABEL = re.compile(r"^(?P<what>\w+)\.ch(?P<lane>\d+)\.step(?P<step>\d+)\.r(?P<rank>\d+)\.sl(?P<slice>\d+)(?P<due>\.due)?$")


class _Spy:
    """Records the hops and classes :class:`RingClasses` finds."""

    def __init__(self, monkeypatch):
        self.found = []
        original = RingClasses.classes

        def classes(symmetry, hops, most):
            found = original(symmetry, hops, most)
            self.found.append((hops, found, symmetry))
            return found

        monkeypatch.setattr(RingClasses, "classes", classes)


def _by_classes(topology, collective, size, monkeypatch, **options):
    """The collective as the full step DAG, then laid out by classes of hops (from 10
    pieces on, ``model="steps"``)."""
    router = Router(topology)
    monkeypatch.setattr(dag_module, "CLASS_LAYOUT_FROM", 10**12)
    full = collective_time(topology, collective, size, router=router, **options)
    assert full.model == "steps" and full.flows == len(full.run.workload)
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(dag_module, "CLASS_LAYOUT_FROM", 10)
    quotient = collective_time(topology, collective, size, router=router, model="steps", **options)
    return full, quotient, spy


def _hop_class_of_labels(hops, classes, symmetry):
    """(lane, rank index of the sender) of every hop -> the (lane, rank index) of its class's
    first hop."""
    flow_class = symmetry._grouped.flow_class
    rep = classes.representative
    return {
        (int(hops.lane[h]), int(hops.position[h])): (int(hops.lane[rep[c]]), int(hops.position[rep[c]]))
        for h, c in enumerate(flow_class.tolist())
    }


@pytest.mark.parametrize(
    ("system", "nodes", "su_size", "collective", "size"),
    [
        ("dgx_h100", 4, None, "all_reduce", 64e6),  # Simple, 16 channels as 8 lanes
        ("dgx_h100", 4, None, "all_reduce", 1e6),  # LL128: every hop's latency in a .due message
        ("dgx_h100", 6, 2, "all_gather", 16e6),  # hops between scalable units cross the spines
        ("dgx_a100", 3, None, "reduce_scatter", 8e6),
        ("dgx_h100", 1, None, "all_reduce", 4e6),  # inside one NVSwitch server
        ("pcie_server", 2, None, "all_reduce", 64e6),  # PCIe switches, the CPUs' link
        ("dgx_h100", 2, None, "all_reduce", 0),  # nothing to move: latencies alone
    ],
)
def test_every_message_of_the_full_step_dag_finishes_with_its_class(monkeypatch, system, nodes, su_size, collective,
                                                                   size):
    fabric = {} if nodes > 1 else {"fabric": "none"}
    topology = build_cluster(system, nodes, figure="effective", su_size=su_size, **fabric)
    full, quotient, spy = _by_classes(topology, collective, size, monkeypatch, algorithm="ring")
    # Laid out by classes: one message per class of hops, step and slice.
    assert quotient.model == "steps"
    assert len(spy.found) == 1 and spy.found[0][1] is not None
    hops, classes, symmetry = spy.found[0]
    assert len(quotient.run.workload) == quotient.flow_classes < full.flows
    assert quotient.flows == full.flows
    assert quotient.solved_over == f"classes: {quotient.flow_classes:,} of {full.flows:,} flows"
    assert classes.size.sum() == len(hops)
    assert quotient.time_s == pytest.approx(full.time_s, rel=1e-9)
    # Every message of the full DAG: its class's message's times.
    of_class = _hop_class_of_labels(hops, classes, symmetry)
    finish = dict(zip(quotient.run.workload.names, quotient.run.result.finish_s.tolist(), strict=True))
    ready = dict(zip(quotient.run.workload.names, quotient.run.result.ready_s.tolist(), strict=True))
    matched = 0
    for name, end, start in zip(full.run.workload.names, full.run.result.finish_s.tolist(),
                                full.run.result.ready_s.tolist(), strict=True):
        parts = _LABEL.match(name)
        assert parts is not None, name
        lane, rank = of_class[int(parts["lane"]), int(parts["rank"])]
        twin = f"{parts['what']}.ch{lane}.step{parts['step']}.r{rank}.sl{parts['slice']}{parts['due'] or ''}"
        assert finish[twin] == pytest.approx(end, rel=1e-9, abs=1e-15), name
        assert ready[twin] == pytest.approx(start, rel=1e-9, abs=1e-15), name
        matched += 1
    assert matched == full.flows
    # Every link carries what it carries in the full DAG.
    np.testing.assert_allclose(quotient.run.result.link_bytes, full.run.result.link_bytes, rtol=1e-9, atol=1e-3)
    # Every message's route is the one the router gives its endpoints.
    routed = Router(topology).route(quotient.run.workload.src, quotient.run.workload.dst, gpudirect=quotient.gpudirect)
    np.testing.assert_array_equal(quotient.run.routes.flow_link_indptr, routed.flow_link_indptr)
    np.testing.assert_array_equal(quotient.run.routes.flow_link_indices, routed.flow_link_indices)


def test_auto_lays_out_by_classes_within_the_limit_and_streams_past_it(monkeypatch):
    # 4 DGX H100, 64 MiB on NCCL's ring (LL128): 8 lanes x 62 steps x 32 hops x 1 slice =
    # 15,872 pieces; the hops are 8 classes (a server's 8 positions, alike on every server
    # and lane), so 8 x 62 = 496 pieces laid out by classes. Under a limit of 400 pieces the
    # search stops past 400 // 62 = 6 classes, and the ring streams.
    topology = build_cluster("dgx_h100", 4, figure="effective")
    router = Router(topology)
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(dag_module, "CLASS_LAYOUT_FROM", 10)
    monkeypatch.setattr(dag_module, "STEP_MESSAGE_LIMIT", 1_000)
    within = collective_time(topology, "all_reduce", 64 << 20, algorithm="ring", router=router)
    monkeypatch.setattr(dag_module, "STEP_MESSAGE_LIMIT", 400)
    past = collective_time(topology, "all_reduce", 64 << 20, algorithm="ring", router=router)
    assert [None if found is None else found.size.tolist() for _, found, _ in spy.found] == [[32] * 8, None]
    assert within.model == "steps" and len(within.run.workload) < within.flows == 31_488
    assert int((within.run.workload.size_bytes > 0).sum()) == 496
    assert past.model == "stream"


def test_hops_without_classes_leave_the_model_to_decide(monkeypatch):
    # A failed NIC sends one server's hops on another rail: what differs travels around the
    # ring, and nearly every hop is a class of its own. The step DAG is laid out in full
    # under "steps", and streamed past the limit under "auto".
    broken = apply_failures(build_cluster("dgx_h100", 4, figure="effective"), fail=["n1.nic2"])
    full, laid_out, spy = _by_classes(broken, "all_reduce", 32e6, monkeypatch, algorithm="ring")
    # "auto" under a limit of 10 pieces (62 steps, 1 slice) has room for no class, and does
    # not look; under 10,000 (15,872 in full) it looks, finds none and streams.
    monkeypatch.setattr(dag_module, "STEP_MESSAGE_LIMIT", 10)
    unsought = collective_time(broken, "all_reduce", 32e6, algorithm="ring")
    monkeypatch.setattr(dag_module, "STEP_MESSAGE_LIMIT", 10_000)
    sought = collective_time(broken, "all_reduce", 32e6, algorithm="ring")
    assert [found for _, found, _ in spy.found] == [None, None]
    assert laid_out.flows == len(laid_out.run.workload) == full.flows
    assert laid_out.time_s == full.time_s
    assert unsought.model == sought.model == "stream"


def test_a_layout_by_classes_larger_than_memory_is_refused_or_streamed(monkeypatch):
    # 4 DGX H100, 64 MiB: 496 pieces by classes and a .due message before 488 of them, 984
    # flows at 300 bytes: 295,200 bytes, more than a machine of 200,000.
    topology = build_cluster("dgx_h100", 4, figure="effective")
    monkeypatch.setattr(dag_module, "CLASS_LAYOUT_FROM", 10)
    monkeypatch.setattr(dag_module, "STEP_MESSAGE_LIMIT", 1_000)
    monkeypatch.setattr(dag_module, "physical_memory_bytes", lambda: 200_000)
    with pytest.raises(InputError, match=r"984 messages, about .* at 300 bytes a message"):
        collective_time(topology, "all_reduce", 64 << 20, algorithm="ring", model="steps")
    assert collective_time(topology, "all_reduce", 64 << 20, algorithm="ring").model == "stream"


def test_a_large_ring_is_laid_out_by_classes_by_default(monkeypatch):
    # 16 DGX H100, 1 GiB on NCCL's ring (Simple, 16 channels as 8 lanes, 2 slices): 8 x 254
    # steps x 128 hops x 2 = 520,192 pieces, past CLASS_LAYOUT_FROM: laid out by the 8
    # classes of hops (8 x 254 x 2 = 4,064 pieces), with the times of its full step DAG.
    topology = build_cluster("dgx_h100", 16, figure="effective")
    router = Router(topology)
    by_classes = collective_time(topology, "all_reduce", 1 << 30, algorithm="ring", router=router)
    monkeypatch.setattr(dag_module, "CLASS_LAYOUT_FROM", 10**12)
    full = collective_time(topology, "all_reduce", 1 << 30, algorithm="ring", router=router)
    assert by_classes.model == full.model == "steps"
    assert int((by_classes.run.workload.size_bytes > 0).sum()) == 4_064
    assert len(by_classes.run.workload) < by_classes.flows == full.flows == len(full.run.workload)
    assert by_classes.time_s == pytest.approx(full.time_s, rel=1e-9)
    np.testing.assert_allclose(by_classes.run.result.link_bytes, full.run.result.link_bytes, rtol=1e-9, atol=1e-3)
