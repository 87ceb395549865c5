#!/usr/bin/env bash
# nvFuser conformance in one command on the GPU machine:
#   benchmarks/conformance.sh SNAPSHOT_DIR [--out docs/conformance.md]
# SNAPSHOT_DIR is an NVIDIA/Fuser git directory or checkout, or a folder that
# `benchmarks/conformance.py extract` filled; the test files are copied to a temporary
# folder, run with `pytest -p fuser_core.compat`, and the result written to the report.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source_dir="$1"; shift
if [ -f "$source_dir/test_python_frontend.py" ]; then
  exec python3 "$here/benchmarks/conformance.py" run "$source_dir" "$@"
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 "$here/benchmarks/conformance.py" extract "$source_dir" --to "$tmp"
python3 "$here/benchmarks/conformance.py" run "$tmp" "$@"
