"""Time of the compile half of the pipeline on large fusions: pre-segmentation passes,
segmentation and scheduling, at several op counts, with the growth between sizes.

    .venv/bin/python benchmarks/segmentation.py            # 250 .. 2000 ops
    .venv/bin/python benchmarks/segmentation.py --quick    # a smoke run
    .venv/bin/python benchmarks/segmentation.py --profile  # cProfile of the 1000-op case

Two fusions: a chain of normalization blocks whose reductions alternate between the
two axes (so no two neighbouring blocks share a kernel and the segmenter must cut the
fusion into about one kernel per block), and a pointwise chain of the same length
(one kernel, found by the whole-fusion check). Inputs are small: segmentation depends
on sizes only through the persistent-buffer budget.
"""

from __future__ import annotations

import argparse
import cProfile
import math
import pstats
import statistics
import time
from collections.abc import Callable

import numpy as np

from fuser_core import DataType, FusionDefinition
from fuser_core.passes import run_presegmentation_passes
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.scheduler.device import select_device
from fuser_core.scheduler.group_view import RuntimeInfo
from fuser_core.segmenter.finder import segment
from fuser_core.segmenter.scheduling import schedule_groups

OPS_PER_NORM_BLOCK = 11
OPS_PER_POINTWISE_BLOCK = 4


def norm_blocks(ops: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        h = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        for block in range(max(1, ops // OPS_PER_NORM_BLOCK)):
            axis = [block % 2]
            centered = fd.ops.sub(h, fd.ops.sum(h, dims=axis, keepdim=True))
            var = fd.ops.sum(fd.ops.mul(centered, centered), dims=axis, keepdim=True)
            normed = fd.ops.mul(centered, fd.ops.rsqrt(var))
            h = fd.ops.add(h, fd.ops.mul(normed, fd.ops.tanh(normed)))
        fd.add_output(h)
    return fd


def pointwise_chain(ops: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        h = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        for _ in range(max(1, ops // OPS_PER_POINTWISE_BLOCK)):
            h = fd.ops.add(fd.ops.mul(fd.ops.tanh(h), h), fd.ops.neg(h))
        fd.add_output(h)
    return fd


FUSIONS: dict[str, Callable[[int], FusionDefinition]] = {"norm blocks": norm_blocks, "pointwise": pointwise_chain}


def measure(build: Callable[[int], FusionDefinition], ops: int) -> dict[str, float]:
    """One run of each phase on a fresh definition (nothing cached)."""
    fd = build(ops)
    fusion, _ = fd.fusion.clone()
    args = convert_inputs(fusion, [np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)])
    start = time.perf_counter()
    run_presegmentation_passes(fusion, record_ir=False)
    passes = time.perf_counter()
    segmented = segment(fusion, RuntimeInfo(bind_args(fusion, args), select_device("h100_sxm")))
    segmented_at = time.perf_counter()
    schedule_groups(segmented)
    done = time.perf_counter()
    return {
        "ops": len([e for e in fusion.exprs() if e.is_tensor_op()]),
        "groups": len(segmented.groups),
        "attempts": len(segmented.attempts),
        "passes": passes - start,
        "segment": segmented_at - passes,
        "schedule": done - segmented_at,
        "total": done - start,
    }


def median_of(build: Callable[[int], FusionDefinition], ops: int, repeats: int) -> dict[str, float]:
    runs = [measure(build, ops) for _ in range(repeats)]
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def report(sizes: list[int], repeats: int) -> None:
    print(f"{'fusion':12} {'ops':>5} {'kernels':>7} {'merges':>6} {'passes':>7} {'segment':>8} {'schedule':>8} "
          f"{'total':>7} {'growth':>6}")  # fmt: skip
    for name, build in FUSIONS.items():
        previous: dict[str, float] | None = None
        for ops in sizes:
            row = median_of(build, ops, repeats)
            growth = ""
            if previous is not None:
                growth = f"{math.log(row['total'] / previous['total']) / math.log(row['ops'] / previous['ops']):.2f}"
            print(
                f"{name:12} {row['ops']:5.0f} {row['groups']:7.0f} {row['attempts']:6.0f} {row['passes']:6.2f}s "
                f"{row['segment']:7.2f}s {row['schedule']:7.2f}s {row['total']:6.2f}s {growth:>6}"
            )
            previous = row


def profile(ops: int) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(measure, norm_blocks, ops)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run each")
    parser.add_argument("--profile", action="store_true", help="cProfile the 1000-op norm-blocks case")
    args = parser.parse_args()
    if args.profile:
        profile(1000)
    elif args.quick:
        report([100, 200], repeats=1)
    else:
        report([250, 500, 1000, 2000], repeats=3)


if __name__ == "__main__":
    main()
