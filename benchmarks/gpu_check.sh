#!/usr/bin/env bash
# On the GPU machine: the gpu tests, then the codegen benchmark. Run from the repo root.
set -uo pipefail
export PYTHONPATH=.
export FUSER_KERNEL_CACHE=${FUSER_KERNEL_CACHE:-/tmp/fuser-kernels}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -m pytest -q -m gpu tests/gpu -p no:cacheprovider ${PYTEST_ARGS:-} 2>&1 | tail -40
if [ -n "${BENCH:-}" ]; then
  python benchmarks/pointwise.py ${BENCH_ARGS:-} 2>&1 | tail -60
fi
