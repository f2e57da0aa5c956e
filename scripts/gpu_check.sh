#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and CuPy: the GPU tests and the GPU benchmark in one
# command, from the repository root. What is printed last is a short summary; the logs go
# to $OUT (or /tmp/tracegrad-gpu).
#
# The machine needs python3 with numpy, cupy, pytest (and torch, for the peers). Wheels the
# project needs that are not there (gast; hypothesis and its dependencies for the property
# test) are installed from ./.whl when that folder exists, without the network:
#     python3 -m pip download --no-deps --only-binary=:all: -d .whl gast==0.7.0 \
#         hypothesis attrs sortedcontainers
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tracegrad-gpu}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps .whl/*.whl
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
python3 -c "import tracegrad, cupy; print('cupy', cupy.__version__, '| tracegrad sees a GPU:',
tracegrad.cuda.is_available())" | tee "$out/versions.txt"

# 1. the GPU tests: eager surface, compiled kernels, the op table and gradcheck on cuda,
#    every op compiled against eager and the random programs of the property test on cuda
TRACEGRAD_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider -rs \
    tests/test_cuda_eager.py tests/test_cuda_codegen.py tests/test_ops.py \
    tests/test_compile_ops.py tests/test_compile_property.py \
    tests/test_seeds.py tests/test_serialization.py >"$out/tests_cuda.log" 2>&1
echo "tests on cuda: $(tail -n 1 "$out/tests_cuda.log")"
grep -E "^(FAILED|ERROR)" "$out/tests_cuda.log" | head -n 20

# 2. the benchmark: W1-W4 against CuPy by hand, PyTorch eager and torch.compile
python3 benchmarks/gpu.py --verbose >"$out/gpu_benchmark.txt" 2>&1
tail -n 40 "$out/gpu_benchmark.txt"
