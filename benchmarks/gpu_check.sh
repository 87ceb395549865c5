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
if [ -n "${PROFILE:-}" ]; then
  # sm__cycles_active.avg well under sm__cycles_elapsed.avg: SMs left without a block
  # (a tail, such as a grid reduction's serial fold after the last block's rows)
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__cycles_elapsed.avg
  for s in $PROFILE; do
    ncu --clock-control none --kernel-name regex:nvfuser --launch-skip 1 --launch-count 1 --metrics $metrics python benchmarks/run_sample.py $s 2>&1 | grep -E "nvfuser|duration|throughput|conflicts|warps_active|inst_executed|registers|cycles_" | head -14
  done
fi
if [ -n "${SANITIZE:-}" ]; then
  for s in $SANITIZE; do
    for tool in memcheck racecheck; do
      echo "$tool $s:"
      compute-sanitizer --tool $tool --print-limit 5 python benchmarks/run_sample.py $s --shrunk --runs 1 2>&1 | tail -3
    done
  done
fi
