#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and CuPy: the GPU tests and the GPU benchmarks in one
# command, from the repository root. What is printed last is a short summary; the logs go
# to $OUT (or /tmp/tracegrad-gpu).
#
#     bash scripts/gpu_check.sh                   # tests, benchmark, model zoo
#     bash scripts/gpu_check.sh tests bench       # some of the three parts
#     TESTS="tests/test_cuda_eager.py" bash scripts/gpu_check.sh tests   # other test files
#
# Each part has a time cap (TESTS_S, NCCL_S, BENCH_S, ZOO_S seconds), so that one slow part
# cannot take the others' time; the logs keep what ran before a cap.
#
# The machine needs python3 with numpy, cupy, pytest (and torch, for the peers; pytest-xdist
# spreads the tests over the cores when it is there). Wheels the project needs that are not
# there (gast; mpich and mpi4py for the NCCL jobs) are installed from ./.whl when that folder
# exists, without the network:
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --platform manylinux_2_28_x86_64 -d .whl gast==0.7.0 mpich mpi4py
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tracegrad-gpu}
mkdir -p "$out"
parts=${*:-tests bench zoo}
has() { [[ " $parts " == *" $1 "* ]]; }
py=${PYTHON:-python3}
if [[ -z "${SKIP_INSTALL:-}" ]]; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        $py -m pip install -q --no-index --no-deps --no-compile .whl/*.whl 2>&1 | tail -n 3
    fi
    $py -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -n 3
fi
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
$py -c "import tracegrad, cupy, numpy; print('cupy', cupy.__version__, '| numpy',
numpy.__version__, '| tracegrad sees a GPU:', tracegrad.cuda.is_available(),
'|', cupy.cuda.runtime.getDeviceProperties(0)['name'].decode())" | tee "$out/versions.txt"
workers=""
if $py -c "import xdist" 2>/dev/null; then
    workers="-n ${WORKERS:-14}"
fi
if $py -c "import pytest_timeout" 2>/dev/null; then
    workers="$workers --timeout 120"
fi

# 1. the GPU tests: eager surface, compiled kernels, the op table and gradcheck on cuda,
#    every op compiled against eager and the random programs of the property test on cuda,
#    the seeds' .cuda() examples; then the NCCL jobs (1 and 2 processes on the GPU)
if has tests; then
    tests=${TESTS:-"tests/test_cuda_eager.py tests/test_cuda_compiled.py
        tests/test_cuda_codegen.py tests/test_ops.py tests/test_compile_ops.py
        tests/test_compile_property.py tests/test_seeds.py tests/test_serialization.py
        tests/test_cuda_graphs.py"}
    # shellcheck disable=SC2086
    # -v: each result is logged as it comes, so a cap still leaves the names of failures
    TRACEGRAD_TEST_DEVICE=cuda timeout "${TESTS_S:-900}" $py -m pytest -v --tb=short -rfEs \
        -p no:cacheprovider $workers $tests >"$out/tests_cuda.log" 2>&1
    echo "tests on cuda (exit $?): $(tail -n 1 "$out/tests_cuda.log")"
    if grep -qE "^(FAILED|ERROR) " "$out/tests_cuda.log"; then
        grep -E "^(FAILED|ERROR) " "$out/tests_cuda.log" | cut -c1-300 | head -n 40
    else
        grep -E " (FAILED|ERROR) " "$out/tests_cuda.log" | cut -c1-200 | head -n 40
    fi
    timeout "${NCCL_S:-300}" $py -m pytest -q -rs -p no:cacheprovider \
        tests/test_distributed_nccl.py >"$out/tests_nccl.log" 2>&1
    echo "NCCL jobs (exit $?): $(tail -n 1 "$out/tests_nccl.log")"
    grep -E "^(FAILED|ERROR|SKIPPED)" "$out/tests_nccl.log" | cut -c1-300 | head -n 10
fi

# 2. the benchmark: W1-W4 against CuPy by hand, PyTorch eager and torch.compile
if has bench; then
    timeout "${BENCH_S:-900}" $py benchmarks/gpu.py --verbose ${BENCH_ARGS:-} \
        >"$out/gpu_benchmark.txt" 2>"$out/gpu_benchmark_err.txt"
    echo "benchmark (exit $?):"
    cat "$out/gpu_benchmark.txt"
fi

# 3. the model zoo on the GPU: one model per run, so that a cap keeps the finished ones
if has zoo; then
    for model in ${ZOO_MODELS:-gpt_small gpt_large resnet18}; do
        timeout "${ZOO_S:-600}" $py benchmarks/models.py --device cuda --models "$model" \
            --rounds 1 --seconds "${ZOO_SECONDS:-1}" ${ZOO_ARGS:-} --systems \
            "${ZOO_SYSTEMS:-PyTorch eager,torch.compile,tracegrad eager,tracegrad compiled,tracegrad whole-step}" \
            >"$out/zoo_$model.txt" 2>&1
        echo "zoo $model (exit $?):"
        grep -E "^# " "$out/zoo_$model.txt" | cut -c1-200
        sed -n '/^threads/,$p' "$out/zoo_$model.txt" | head -n 12
    done
fi
