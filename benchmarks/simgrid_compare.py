"""flowsim's event engine against SimGrid's on one flow instance, in one process: the same
finish times, and each one's wall time.

The instance is one of the engine benchmarks' (``bench_engine.py``): random host pairs on a
k=16 fat-tree, Pareto(1.2) sizes, all at t=0 (``--load 0``, a burst) or Poisson arrivals at a
share of the host links' rate. SimGrid runs it in its ``raw`` network model (max-min sharing,
no TCP window, no cross traffic, no correction factors), each flow between two hosts of its
own in a star zone whose route is the flow's links, started by ``Comm.sendto_async``.

Three of SimGrid's rules set how the two are asked:

- SimGrid sizes comms in whole bytes, so both take the sizes rounded to them;
- SimGrid's CM02 family shares a link's capacity in inverse proportion to each flow's route
  latency (``sharing_penalty_ = latency`` in ``src/kernel/resource/models/network_cm02.cpp``,
  SimGrid 4.1; a flow of no latency has penalty 1), so with ``--latency 1`` flowsim takes
  weights of 1 / route latency; by default (``--latency 0``) the links' latencies are
  dropped and both share equally;
- SimGrid's event times are exact only to ``precision/timing`` (1e-9 s by default: events that
  close are taken together), so ``--precision`` sets it, by default to 1e-14 s, about 1e-12 of
  a 10 ms run, as flowsim's default ``time_rel_tol`` keeps times.

With latencies, SimGrid's default update (``network/optim:Lazy``) left 6 flows of a
1,000-flow burst 2-35% off the finish times that its ``Full`` update and flowsim agree on to
4e-15, and 7,834 of a 10,000-flow burst's off by more than 1e-9 (2026-12-08), so the timed
comparison drops latencies, where ``Lazy`` and flowsim agree.

Needs SimGrid's Python module, which is not a dependency of flowsim. ``pip`` builds it from
source, with Boost's headers (Debian's ``libboost-dev``) and a pybind11 older than 3 (3.0
refuses its bindings)::

    pip install "pybind11<3" setuptools wheel && pip install --no-build-isolation simgrid

Run from the repository's root::

    python benchmarks/simgrid_compare.py --flows 10000
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from flowsim.engine import simulate  # noqa: E402
from instances import fat_tree_traffic  # noqa: E402

K = 16


def load_simgrid():
    """SimGrid's module; its library is loaded first by path, as a wheel built by pip does not
    say where it lies."""
    spec = importlib.util.find_spec("simgrid")
    if spec is None or spec.origin is None:
        sys.exit("simgrid_compare: SimGrid's Python module is not installed (pip install simgrid)")
    libraries = sorted(Path(spec.origin).parent.glob("libsimgrid.so*"))
    if libraries:
        ctypes.CDLL(str(libraries[0]), mode=ctypes.RTLD_GLOBAL)
    import simgrid

    return simgrid


def instance(n_flows: int, load: float, seed: int, latency: bool):
    """``(indptr, indices, capacity, latency, size, start, routes)`` of the benchmark's instance."""
    topology, routes, size, start = fat_tree_traffic(K, n_flows, load, seed=seed)
    link_latency = np.asarray(topology.link_latency_s, dtype=float) if latency else np.zeros(topology.n_links)
    return (routes.flow_link_indptr, routes.flow_link_indices, np.asarray(topology.link_capacity_Bps, dtype=float),
            link_latency, np.rint(size), np.asarray(start, dtype=float), routes)


def run_flowsim(routes, capacity, link_latency, size, start, indptr, indices, repeat: int):
    # SimGrid's sharing penalty: the route latency, or 1 for a flow without one.
    route_latency = np.add.reduceat(link_latency[indices], indptr[:-1])
    penalty = np.where(route_latency > 0, route_latency, 1.0)
    weights = 1.0 / penalty
    kwargs = dict(start_s=start, latency_s=link_latency, weights=weights)
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = simulate(routes, capacity, size, **kwargs)
        times.append(time.perf_counter() - t)
    return result.finish_s, times


def run_simgrid(simgrid, capacity, link_latency, size, start, indptr, indices, precision: float,
                optim: str) -> tuple[np.ndarray, float, float]:
    """SimGrid's finish times, the seconds it took to build the platform and to run."""
    config = ["--cfg=network/model:raw", f"--cfg=network/optim:{optim}", f"--cfg=precision/timing:{precision!r}",
              "--log=root.thresh:critical"]
    t0 = time.perf_counter()
    engine = simgrid.Engine(["simgrid_compare", *config])
    root = engine.netzone_root
    star = root.add_netzone_star("flows")
    links = []
    for i, c in enumerate(capacity):
        link = star.add_link(f"l{i}", float(c))
        link.set_latency(float(link_latency[i]))
        links.append(link.seal())
    sources, targets = [], []
    for f in range(size.size):
        source, target = star.add_host(f"s{f}", 1.0), star.add_host(f"d{f}", 1.0)
        star.add_route(source, None, [simgrid.LinkInRoute(links[j]) for j in indices[indptr[f]:indptr[f + 1]]], False)
        star.add_route(None, target, [], False)
        sources.append(source)
        targets.append(target)
    star.seal()
    driver = root.add_host("driver", 1.0)
    root.seal()
    comms: list = [None] * size.size

    def start_all():
        pending = simgrid.ActivitySet()
        for f in np.argsort(start, kind="stable"):
            if start[f] > simgrid.Engine.clock:
                simgrid.this_actor.sleep_until(float(start[f]))
            comms[f] = simgrid.Comm.sendto_async(sources[f], targets[f], int(size[f]))
            pending.push(comms[f])
        pending.wait_all()

    driver.add_actor("driver", start_all)
    t1 = time.perf_counter()
    engine.run()
    return np.array([c.finish_time for c in comms]), t1 - t0, time.perf_counter() - t1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flows", type=int, default=10_000)
    parser.add_argument("--load", type=float, default=0.0, help="Poisson load of the host links; 0: a burst at t=0")
    parser.add_argument("--seed", type=int, default=3, help="the instance's seed (bench_engine's bursts: 3)")
    parser.add_argument("--latency", type=int, choices=(0, 1), default=0,
                        help="1: keep the links' latencies (flowsim then weights flows by 1 / route latency)")
    parser.add_argument("--precision", type=float, default=1e-14, help="SimGrid's precision/timing (s)")
    parser.add_argument("--optim", choices=("Lazy", "Full"), default="Lazy", help="SimGrid's network/optim")
    parser.add_argument("--repeat", type=int, default=3, help="flowsim runs timed (after one that compiles)")
    args = parser.parse_args(argv)
    simgrid = load_simgrid()
    indptr, indices, capacity, link_latency, size, start, routes = instance(args.flows, args.load, args.seed,
                                                                            bool(args.latency))
    run_flowsim(routes, capacity, link_latency, size, start, indptr, indices, 1)  # compiles
    finish, times = run_flowsim(routes, capacity, link_latency, size, start, indptr, indices, args.repeat)
    print(f"flowsim: {', '.join(f'{t:.3f}' for t in times)} s; makespan {finish.max():.9g} s", flush=True)
    theirs, build, run = run_simgrid(simgrid, capacity, link_latency, size, start, indptr, indices, args.precision,
                                     args.optim)
    gap = np.abs(theirs - finish) / finish
    print(f"SimGrid ({args.optim}, precision/timing {args.precision:g} s): {run:.3f} s to run "
          f"({build:.3f} s to build the platform before); {run / min(times):.1f}x flowsim's fastest run")
    print(f"finish times: {int((gap > 1e-9).sum())} of {finish.size} flows differ by more than 1e-9 (relative); "
          f"largest {gap.max():.3g}, median {np.median(gap):.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
