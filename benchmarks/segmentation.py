"""Time the compile half of the pipeline (pre-segmentation passes, segmentation and
scheduling) on large fusions, at several op counts, with the growth between sizes.

    .venv/bin/python benchmarks/segmentation.py             # 250 .. 2000 ops, median of 3
    .venv/bin/python benchmarks/segmentation.py --quick     # a smoke run: small sizes, one run
    .venv/bin/python benchmarks/segmentation.py --profile   # cProfile of one 1000-op case
    .venv/bin/python benchmarks/segmentation.py --profile --kind "segment_set h64"

Each phase is timed as `compile_fusion` (fuser_core/runtime/kernel_runtime.py) runs it:
clone the fusion, run the pre-segmentation passes on the clone (recording the IR after
each, as the runtime does), bind the inputs, segment, schedule every group. Every run
builds a fresh FusionDefinition, so no executor cache or memo from an earlier run helps.

The fusions are chains of transformer-like blocks on a [rows, hidden] activation: a
layer norm (sum, sub, mul, rsqrt, broadcast_in_dim, an affine weight and bias), a
tanh-approximated GELU and a residual add. How many kernels they become depends on the
persistent-buffer budget, so the same chain is run at three widths:

- hidden 64: every norm's buffers fit, the whole chain is one persistent kernel;
- hidden 1024: about 20 blocks share a kernel, so a few large kernels;
- hidden 16384: about one kernel per two blocks;

plus the hidden-64 chain with a `segment_set` after each block (one kernel per block,
by hint) and a pure pointwise chain of the same op count (one kernel). Inputs are small
(8 rows): sizes matter to segmentation only through the persistent-buffer budget.

Times are wall clock (time.perf_counter); the `cpu` column is the process's CPU time
for the same phases: well below `total` means other processes shared the cores.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import math
import pstats
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fuser_core import DataType, FusionDefinition, Tensor
from fuser_core.ir.tensor_view import TensorView
from fuser_core.passes import run_presegmentation_passes
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.scheduler.device import select_device
from fuser_core.scheduler.group_view import RuntimeInfo
from fuser_core.segmenter.finder import segment
from fuser_core.segmenter.scheduling import schedule_groups

ROWS = 8
DEVICE_MODEL = "h100_sxm"
SIZES = (250, 500, 1000, 2000)
QUICK_SIZES = (100, 200)
REPEATS = 3
TARGET_OPS = 1000
TARGET_SECONDS = 2.0
OPS_PER_BLOCK = 29  # tensor ops of one transformer block (+1 with a segment_set)
OPS_PER_POINTWISE_STEP = 4
PHASES = ("clone", "passes", "segment", "schedule")


# -- the fusions ------------------------------------------------------------------------
def layer_norm(fd: FusionDefinition, x: Tensor, weight: Tensor, bias: Tensor, hidden: int) -> Tensor:
    """Layer norm over the last axis, written out as Thunder decomposes it."""
    mean = fd.ops.mul(fd.ops.sum(x, dims=[1]), 1.0 / hidden)
    centered = fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape=x.shape(), broadcast_dims=[0]))
    var = fd.ops.mul(fd.ops.sum(fd.ops.mul(centered, centered), dims=[1]), 1.0 / hidden)
    rstd = fd.ops.rsqrt(fd.ops.add(var, 1e-5))
    normed = fd.ops.mul(centered, fd.ops.broadcast_in_dim(rstd, shape=x.shape(), broadcast_dims=[0]))
    scaled = fd.ops.mul(normed, fd.ops.broadcast_in_dim(weight, shape=x.shape(), broadcast_dims=[1]))
    return fd.ops.add(scaled, fd.ops.broadcast_in_dim(bias, shape=x.shape(), broadcast_dims=[1]))


def gelu_tanh(fd: FusionDefinition, x: Tensor) -> Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    cubic = fd.ops.mul(fd.ops.mul(x, fd.ops.mul(x, x)), 0.044715)
    inner = fd.ops.mul(fd.ops.add(x, cubic), math.sqrt(2.0 / math.pi))
    return fd.ops.mul(fd.ops.mul(x, 0.5), fd.ops.add(fd.ops.tanh(inner), 1.0))


def transformer_chain(ops: int, hidden: int, hint: bool) -> FusionDefinition:
    """Blocks of layer norm, GELU and residual add; a segment_set after each if `hint`."""
    with FusionDefinition() as fd:
        h = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        weight = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        for _ in range(max(1, round(ops / (OPS_PER_BLOCK + int(hint))))):
            h = fd.ops.add(h, gelu_tanh(fd, layer_norm(fd, h, weight, bias, hidden)))
            if hint:
                h = fd.ops.segment_set(h)
        fd.add_output(h)
    return fd


def pointwise_chain(ops: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        h = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        for _ in range(max(1, round(ops / OPS_PER_POINTWISE_STEP))):
            h = fd.ops.add(fd.ops.mul(fd.ops.tanh(h), h), fd.ops.neg(h))
        fd.add_output(h)
    return fd


@dataclass(frozen=True)
class Workload:
    name: str
    hidden: int
    build: Callable[[int], FusionDefinition]

    def inputs(self, fd: FusionDefinition, seed: int = 0) -> list[np.ndarray]:
        """Random float32 inputs: [ROWS, hidden] activations, [hidden] weights."""
        rng = np.random.default_rng(seed)
        ranks = [v.ndim if isinstance(v, TensorView) else 0 for v in fd.fusion.inputs]
        shapes = [(ROWS, self.hidden) if rank == 2 else (self.hidden,) for rank in ranks]
        return [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]


def _transformer(hidden: int, hint: bool = False) -> Workload:
    name = f"{'segment_set' if hint else 'transformer'} h{hidden}"
    return Workload(name, hidden, lambda ops: transformer_chain(ops, hidden, hint))


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        _transformer(64),
        _transformer(1024),
        _transformer(16384),
        _transformer(64, hint=True),
        Workload("pointwise h64", 64, pointwise_chain),
    )
}


# -- timing -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    ops: int
    kernels: int
    merges: int
    seconds: dict[str, float]  # wall time per phase
    cpu: float  # process CPU time of all phases: near `total` unless the machine is busy

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def tensor_ops(fd: FusionDefinition) -> int:
    return len([e for e in fd.fusion.exprs() if e.is_tensor_op()])


def measure(workload: Workload, ops: int) -> Measurement:
    """One compile of a fresh definition, phase by phase, as compile_fusion does it."""
    fd = workload.build(ops)
    args = convert_inputs(fd.fusion, workload.inputs(fd))
    device = select_device(DEVICE_MODEL)
    cpu = time.process_time()
    marks = [time.perf_counter()]
    fusion, _ = fd.fusion.clone()
    marks.append(time.perf_counter())
    run_presegmentation_passes(fusion)
    marks.append(time.perf_counter())
    segmented = segment(fusion, RuntimeInfo(bind_args(fusion, args), device))
    marks.append(time.perf_counter())
    schedule_groups(segmented)
    marks.append(time.perf_counter())
    cpu = time.process_time() - cpu
    seconds = {phase: end - start for phase, (start, end) in zip(PHASES, itertools.pairwise(marks), strict=True)}
    return Measurement(tensor_ops(fd), len(segmented.groups), len(segmented.attempts), seconds, cpu)


def median_run(workload: Workload, ops: int, repeats: int) -> Measurement:
    """The run whose total is the median (its phases add up to its total)."""
    runs = sorted((measure(workload, ops) for _ in range(repeats)), key=lambda m: m.total)
    return runs[len(runs) // 2]


def growth(previous: Measurement | None, current: Measurement) -> tuple[float, float] | None:
    """(measured exponent, the exponent n log n would show) between two sizes."""
    if previous is None:
        return None
    ratio = math.log(current.ops / previous.ops)
    nlogn = math.log(current.ops * math.log(current.ops) / (previous.ops * math.log(previous.ops)))
    return math.log(current.total / previous.total) / ratio, nlogn / ratio


# -- reporting --------------------------------------------------------------------------
HEADER = (
    f"{'fusion':18} {'ops':>5} {'kernels':>7} {'merges':>6} {'clone':>7} {'passes':>7} {'segment':>8} "
    f"{'schedule':>8} {'total':>8} {'cpu':>7} {'growth':>6} {'nlogn':>6}"
)


def row(name: str, m: Measurement, exponents: tuple[float, float] | None) -> str:
    s = m.seconds
    grown = f"{exponents[0]:6.2f} {exponents[1]:6.2f}" if exponents else f"{'':6} {'':6}"
    return (
        f"{name:18} {m.ops:5d} {m.kernels:7d} {m.merges:6d} {s['clone']:6.2f}s {s['passes']:6.2f}s "
        f"{s['segment']:7.2f}s {s['schedule']:7.2f}s {m.total:7.2f}s {m.cpu:6.2f}s {grown}"
    )


def run_workload(workload: Workload, sizes: Sequence[int], repeats: int) -> list[Measurement]:
    results: list[Measurement] = []
    for ops in sizes:
        current = median_run(workload, ops, repeats)
        print(row(workload.name, current, growth(results[-1] if results else None, current)), flush=True)
        results.append(current)
    return results


def verdict(name: str, results: list[Measurement]) -> str:
    """Against the target: TARGET_OPS in under TARGET_SECONDS, growth no worse than n log n."""
    near = min(results, key=lambda m: abs(m.ops - TARGET_OPS))
    pairs = [g for a, b in itertools.pairwise(results) if (g := growth(a, b)) is not None]
    worst = max(pairs, key=lambda g: g[0] - g[1], default=None)
    fast = near.total < TARGET_SECONDS
    text = f"{name:18} {near.ops} ops in {near.total:.2f}s ({'met' if fast else 'MISSED'})"
    if worst is not None:
        ok = worst[0] <= worst[1] + 0.1
        text += f"; worst growth n^{worst[0]:.2f} vs n log n's n^{worst[1]:.2f} ({'met' if ok else 'MISSED'})"
    return text


def report(names: Sequence[str], sizes: Sequence[int], repeats: int) -> None:
    print(f"device model {DEVICE_MODEL}, {ROWS} rows, median of {repeats} run(s)")
    print(HEADER)
    verdicts = [verdict(name, run_workload(WORKLOADS[name], sizes, repeats)) for name in names]
    print(f"\ntarget: {TARGET_OPS} ops in under {TARGET_SECONDS:.0f} s, growth no worse than n log n")
    print("\n".join(verdicts))


def profile(name: str, ops: int = TARGET_OPS, top: int = 25) -> None:
    profiler = cProfile.Profile()
    result = profiler.runcall(measure, WORKLOADS[name], ops)
    print(HEADER)
    print(row(name, result, None))
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, one run each")
    parser.add_argument("--profile", action="store_true", help=f"cProfile the {TARGET_OPS}-op case of --kind")
    parser.add_argument(
        "--kind", choices=list(WORKLOADS), help="one fusion only (default: all; for --profile: transformer h1024)"
    )
    args = parser.parse_args()
    if args.profile:
        profile(args.kind or "transformer h1024")
        return
    names = [args.kind] if args.kind else list(WORKLOADS)
    if args.quick:
        report(names, QUICK_SIZES, repeats=1)
    else:
        report(names, SIZES, repeats=REPEATS)


if __name__ == "__main__":
    main()
