#!/usr/bin/env bash
# Every GPU check in one go, for a machine with an NVIDIA GPU and numba-cuda:
# the CUDA tests on the real device, the rates sweep and `flowsim rates` on the cuda
# backend, then the GPU-against-CPU throughput table for blocks of up to 256, 512 and 1024
# threads (the launcher's default is the 1024 column), and once more with weights and caps
# shared by all instances, as in a sweep over capacities; then the time sweep of collectives
# on the cuda backend and 10,000 collectives' time simulations, GPU against all CPU cores
# (a run per thread, and the default of runs under 32 classes per thread, the others per block
# of 64 threads). Logs go to DIR (default gpu-logs/).
#
#   bash benchmarks/gpu/check_gpu.sh [DIR]
#   FLOWSIM_WHEELS=.whl bash benchmarks/gpu/check_gpu.sh [DIR]
#
# FLOWSIM_WHEELS names a folder of wheels installed first into a temporary folder ahead of the
# machine's packages, for a machine that cannot reach a package index: numba-cuda 0.30 fails
# to import under numpy 2.5 (np.row_stack is gone), so an image with numpy 2.5 needs
# numpy<2.5 and numba-cuda there (2026-12-04's H200: numpy-2.4.6 and numba_cuda-0.30.4 wheels).
#
# Runs from the repository root without installing flowsim (PYTHONPATH=.:kernels), with a
# fresh Numba cache, so compile times are those of a first run. Exit status: the first
# step that failed, 0 when all passed.
set -uo pipefail
logs=${1:-gpu-logs}
mkdir -p "$logs"
if [[ -n "${FLOWSIM_WHEELS:-}" ]]; then
    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$FLOWSIM_WHEELS"/*.whl || exit 3
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NUMBA_CACHE_DIR="$(mktemp -d)"
status=0
step() {  # step NAME COMMAND...: run, log to DIR/NAME.log, remember the first failure
    local name=$1
    shift
    echo "== $name: $*"
    local start=$SECONDS
    "$@" 2>&1 | tee "$logs/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc after $((SECONDS - start)) s"
    if [[ $rc -ne 0 && $status -eq 0 ]]; then status=$rc; fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
python3 -c "import sys, numba, numpy; print(sys.version.split()[0], 'numba', numba.__version__, 'numpy', numpy.__version__)"
python3 -c "import importlib.metadata as m; print('numba-cuda', m.version('numba-cuda'))"

step tests python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_batched.py \
    tests/test_sweep.py tests/test_timeline.py -k "not sweep or rates_on_cuda or example_rates_sweep or time_on_cuda"
step sweep python3 -m flowsim.cli sweep data/sweeps/rail_cluster_rates.toml \
    -o "$logs/rail_cluster_rates.h5" --backend cuda
step rates python3 -m flowsim.cli rates data/scenarios/rail_optimized_cluster.toml \
    --backend cuda --scale 0.5 1 2 4
step bench python3 benchmarks/gpu/bench_gpu.py --threads 256 512 1024 --resident
step bench-shared python3 benchmarks/gpu/bench_gpu.py --shared
step time-sweep python3 -m flowsim.cli sweep data/sweeps/two_dgx_collectives.toml \
    -o "$logs/two_dgx_collectives.h5" --backend cuda
step bench-time python3 benchmarks/gpu/bench_time_gpu.py --runs 10000 --threads-per-run 1 64
exit $status
