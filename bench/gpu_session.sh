#!/usr/bin/env bash
# Everything gpuan checks and measures on a lent GPU machine, in as few calls of the device tool as the
# time allows (30 minutes of device time, 10 a call). The GPU machine has torch, CuPy, numba-CUDA, pyarrow
# and pandas but no network, so:
#
#   bash bench/gpu_session.sh prepare     # here, first: wheels of what the GPU machine lacks into .whl/
#                                         # (MPICH and mpi4py in .whl/mpi), ../shared/data and
#                                         # ../shared/tools into .shared/ (all git-ignored)
#   device run, carry [".whl", ".shared"], one call each, in this order (correctness first):
#     GPUAN_COMMIT=$(git rev-parse --short HEAD) bash bench/gpu_session.sh env tests nvcc    # ~8 min
#     GPUAN_COMMIT=... bash bench/gpu_session.sh bench                                     # ~9 min
#     GPUAN_COMMIT=... bash bench/gpu_session.sh ingest1g streams                          # ~9 min
#     GPUAN_COMMIT=... bash bench/gpu_session.sh ingest5g                                  # if time is left
#
# Steps, run in the order given (all of them when none is given):
#   env       the GPU, driver, torch / CuPy / numba-CUDA versions, and which engine gpuan picks
#   tests     the test files with GPU twins (CuPy, numba-CUDA and the CUDA C kernels for real), the GPU
#             reader against the CPU's, replay's device-buffer exchanges under mpiexec -n 2
#   nvcc      compile every cuda_kernels/*.cu for sm_90
#   bench     the GPU rows of the cycles, compare, sol, tensors and replay benchmarks
#   ingest1g  the GPU reader against the CPU reader (16 cores) on a 1 GB generated trace, .json and .gz
#   ingest5g  the same on 5 GB
#   streams   record 1-stream and 2/4/8-stream runs with the PyTorch profiler (bench/record_streams.py),
#             predict each from its 1-stream trace (bench/streams.py --recorded)
# Each step writes <step>.log under $OUT and one line to $OUT/summary.txt; benchmark reports go to
# $OUT/results (copy them to bench/results/ and commit them), the recorded traces to $OUT/streams.
set -u
cd "$(dirname "$0")/.."

if [ "${1:-}" = prepare ]; then
    mkdir -p .whl .shared && rm -f .whl/*.whl  # both are in .gitignore
    # gpuan's dependencies that the GPU machine's image does not hold (and gguf's), for its Python 3.12
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl isal xlsxwriter plotly gguf || exit 1
    # MPI for replay's exchanges, apart: MPICH's wheel must be installed with --prefix (--target drops its lib/)
    mkdir -p .whl/mpi && rm -f .whl/mpi/*.whl
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl/mpi mpi4py mpich || exit 1
    rm -rf .shared/data .shared/tools && cp -r ../shared/data .shared/data && cp -r ../shared/tools .shared/tools || exit 1
    du -sh .whl .shared
    exit 0
fi

OUT=${OUT:-/tmp/gpuan-gpu}
mkdir -p "$OUT/results"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 1
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ls .whl/mpi/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --ignore-installed --prefix /tmp/mpi .whl/mpi/*.whl || exit 1
    export PATH="/tmp/mpi/bin:$PATH" LD_LIBRARY_PATH="/tmp/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    PYTHONPATH="$(echo /tmp/mpi/lib/python3*/site-packages):$PYTHONPATH"
fi
export GPUAN_COMMIT=${GPUAN_COMMIT:-unknown}
# the tests and benchmarks look for ../shared/data beside the checkout
if [ ! -d ../shared/data ] && [ -d .shared/data ]; then
    ln -s "$PWD/.shared" ../shared
fi

step() {  # step NAME TIMEOUT_S COMMAND...: run it, log it, one summary line
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - t0)) s ($*)" | tee -a "$OUT/summary.txt"
    tail -n 5 "$OUT/$name.log"
    return $rc
}

run_env() {
    step env 120 nvidia-smi
    step env 120 python3 -c "
import torch, cupy, numba, numba.cuda
print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))
print('cupy', cupy.__version__, 'numba', numba.__version__, 'numba.cuda', numba.cuda.is_available())
import gpuan.engine as e
print('gpuan engine:', e.current().name)"
}

run_streams() {
    step streams 240 python3 bench/record_streams.py "$OUT/streams" --streams 2,4,8 --orders breadth,depth &&
        step streams 240 python3 bench/streams.py --recorded "$OUT/streams" --out "$OUT/results"
}

run_tests() {
    step tests 420 python3 -m pytest -q -rs -p no:cacheprovider tests/test_engine.py tests/test_gpu_twins.py \
        tests/test_cuda_kernels.py tests/test_kineto_gpu.py tests/test_cycles_gpu.py tests/test_cycles_unit.py \
        tests/test_compare_gpu.py tests/test_sol_real.py tests/test_tensors.py tests/test_replay_exchange.py \
        tests/test_replay_aggregates.py tests/test_replay_mpi.py tests/test_streams_rules.py
}

run_nvcc() {
    local found=0
    for f in cuda_kernels/*.cu; do
        [ -e "$f" ] || continue
        found=1
        step nvcc 120 nvcc -arch=sm_90 -c "$f" -o "/tmp/$(basename "$f" .cu).o"
    done
    [ $found = 1 ] || echo "nvcc: no .cu files in cuda_kernels/" | tee -a "$OUT/summary.txt"
}

run_bench() {
    step bench 150 python3 bench/cycles.py --gpu --out "$OUT/results"
    step bench 90 python3 bench/compare.py --gpu --out "$OUT/results"
    step bench 100 python3 bench/sol.py --out "$OUT/results"
    step bench 120 python3 bench/tensors.py --out "$OUT/results"
    step bench 120 python3 bench/replay.py --ranks 8 --events 250000 --steps 20 --procs 1,2 --device gpu \
        --exchange-records 2000000 --out "$OUT/results"
}

run_ingest1g() {
    step ingest1g 300 python3 bench/ingest.py --gpu --gpu-sizes 1024 --repeat 2 --out "$OUT/results"
}

run_ingest5g() {
    step ingest5g 580 python3 bench/ingest.py --gpu --gpu-sizes 5120 --repeat 1 --out "$OUT/results"
}

for s in "${@:-env tests nvcc bench ingest1g streams ingest5g}"; do
    for one in $s; do
        case $one in
            env | tests | nvcc | bench | ingest1g | ingest5g | streams) "run_$one" ;;
            *) echo "gpu_session.sh: unknown step $one (env tests nvcc bench ingest1g ingest5g streams, or prepare)" >&2; exit 2 ;;
        esac
    done
done
cat "$OUT/summary.txt"
