#!/usr/bin/env bash
# Set up a virtual environment from the project's own files and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[test,scipy,threads,onnx]"
# MPI for tests/test_distributed.py; without it those tests skip with the reason.
.venv/bin/python -m pip install -q -e ".[test,scipy,threads,distributed]" \
    || echo "note: could not install mpi4py/mpich; the multi-process tests will skip"
if [ -n "${TRACEGRAD_EXTRA_TEST_DEPS:-}" ]; then
    # Optional oracles (PyTorch): tests that need them skip when they are missing.
    .venv/bin/python -m pip install -q ${TRACEGRAD_EXTRA_TEST_DEPS} \
        || echo "note: could not install ${TRACEGRAD_EXTRA_TEST_DEPS}; oracle tests will skip"
fi
# The sweeps over PyTorch's OpInfo and ModuleInfo samples (marker "opinfo", minutes) run
# where asked:
# TRACEGRAD_OPINFO=1 (as .ci/run sets it) runs them after the default run.
if [ -n "${TRACEGRAD_OPINFO:-}" ]; then
    .venv/bin/python -m pytest -q -p no:cacheprovider -m "not opinfo" "$@"
    exec .venv/bin/python -m pytest -q -p no:cacheprovider -m opinfo tests/test_opinfo.py \
        tests/test_moduleinfo.py tests/test_optiminfo.py tests/test_lr_scheduler_sweep.py
fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider -m "not opinfo" "$@"
