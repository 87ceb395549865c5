"""Pointwise-family samples on the GPU: this project against torch eager and torch.compile.

Run on a machine with an NVIDIA GPU, CuPy, torch and Triton, from the repository root:

    PYTHONPATH=. python benchmarks/pointwise.py [--quick]

For each sample at its bundled (GPU-filling) size it prints the median time (CUDA events,
triton.testing.do_bench, L2 flushed between runs), GB/s over the minimal bytes (each
input read once, each output written once) and the fraction of a device-to-device copy
measured in the same run, for: this project end to end (`fd.execute`, host overhead
included), this project's kernels alone (events around each launch), torch eager, and
torch.compile with static and with dynamic shapes. Then the host overhead of a cache-hit
call of a 1k-element fusion beside CuPy's own RawKernel launch, and cold and warm
compile times. Every result is checked against torch eager first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import cupy  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from run_sample import to_torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from fuser_core import EnableOption, load_repro, use_options  # noqa: E402

SAMPLES = ROOT / "sample_fusions"


# -- torch versions of the samples (what eager PyTorch runs for the same math) --------------


def rope(x, cos, sin, n):
    half = n // 2
    head = x[..., :n].float()
    x1, x2 = x[..., :half], x[..., half:n]
    rotated = torch.cat([(-x2.float()).to(x.dtype), x1], dim=-1).float()
    roped = (head * cos.float() + rotated * sin.float()).to(x.dtype)
    return torch.cat([roped, x[..., n:]], dim=-1)


def rope_litgpt(x, cos, sin):
    return rope(x, cos, sin, 64)


def rope_issue2795(x, cos, sin):
    return rope(x, cos, sin, 8)


def gelu_tanh_fwd(x, bias):
    t = x.float() + bias.float()
    return (t * 0.5 * (torch.tanh((t + t * t * t * 0.044715) * 0.797885) + 1.0)).to(x.dtype)


def transpose_add(x, y):
    return x + y, torch.relu(y.permute(1, 0)).contiguous()


def resize_pad(x, y, *pads):
    return y * F.pad(x, list(pads))


TORCH = {
    "rope_litgpt": rope_litgpt,
    "rope_issue2795": rope_issue2795,
    "gelu_tanh_fwd": gelu_tanh_fwd,
    "transpose_add": transpose_add,
    "resize_pad_to_broadcast_dynamic": resize_pad,
}


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def bench(fn):
    return do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e-3  # seconds


def copy_bandwidth():
    src = torch.empty(2**28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    seconds = bench(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / seconds


def kernel_seconds(fd, inputs, runs=30):
    """Median over runs of the sum of this project's kernel times (events per launch)."""
    times = []
    with use_options(enable=[EnableOption.kernel_profile.name]):
        for _ in range(runs):
            fd.execute(inputs)
            launches = fd.executor_cache.last_report.launches
            times.append(sum(r.seconds for r in launches if r.seconds))
    return statistics.median(times)


def disagreement(ours, theirs):
    """The worst relative error between two sets of outputs, or None within tolerance."""
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    theirs = theirs if isinstance(theirs, (list, tuple)) else [theirs]
    worst = None
    for a, b in zip(ours, theirs, strict=True):
        limit = 1e-5 if a.dtype == torch.float32 else 1e-2
        a, b = a.float(), b.float()
        err = (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()
        if not err < limit or not torch.isfinite(a).all():
            worst = max(worst or 0.0, err)
    return worst


def run_sample(name, copy_bw, rows):
    (loaded,) = load_repro(SAMPLES / f"{name}.py").definitions
    host_inputs = loaded.materialize_inputs(seed=1)
    inputs = [to_torch(x) for x in host_inputs]
    fd = loaded.fd
    with use_options(backend="cuda"):
        ours = fd.execute(inputs)
        fn = TORCH[name]
        eager = fn(*inputs)
        wrong = disagreement(ours, eager)
        if wrong is not None:
            raise SystemExit(f"{name}: this project and torch eager disagree (relative error {wrong:.2e})")
        moved = nbytes(inputs) + nbytes(ours)
        timings = {"fuser (end to end)": bench(lambda: fd.execute(inputs))}
        timings["fuser (kernels)"] = kernel_seconds(fd, inputs)
    timings["torch eager"] = bench(lambda: fn(*inputs))
    for label, dynamic in (("torch.compile static", False), ("torch.compile dynamic", True)):
        torch._dynamo.reset()
        compiled = torch.compile(fn, dynamic=dynamic)
        wrong = disagreement(ours, compiled(*inputs))
        if wrong is not None:  # reported, not timed as if it were right
            label += f" WRONG (rel. err. {wrong:.1e})"
        timings[label] = bench(lambda c=compiled: c(*inputs))
    for label, seconds in timings.items():
        gbps = moved / seconds / 1e9
        rows.append((name, label, seconds * 1e6, gbps, moved / seconds / copy_bw))


def host_overhead():
    """Wall time per cache-hit call of a 1k-element one-kernel fusion, and per CuPy RawKernel launch."""
    from fuser_core import DataType, FusionDefinition

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t0))
    x = cupy.random.standard_normal(1024, dtype=cupy.float32)
    xt = torch.from_dlpack(x)
    raw = cupy.RawKernel(
        'extern "C" __global__ void k(const float* x, float* y, int n) {'
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] + x[i]; }",
        "k",
    )
    y = cupy.empty_like(x)
    results = {}
    with use_options(backend="cuda"):
        for label, call in (
            ("fd.execute, CuPy input", lambda: fd.execute([x])),
            ("fd.execute, torch input", lambda: fd.execute([xt])),
            ("CuPy RawKernel launch", lambda: raw((8,), (128,), (x, y, np.int32(1024)))),
        ):
            for _ in range(200):
                call()
            cupy.cuda.Device().synchronize()
            n = 3000
            start = time.perf_counter()
            for _ in range(n):
                call()
            cupy.cuda.Device().synchronize()
            results[label] = (time.perf_counter() - start) / n
    return results


COMPILE_SCRIPT = """
import time, sys
sys.path.insert(0, {root!r})
from fuser_core import load_repro, use_options
(loaded,) = load_repro({path!r}).definitions
inputs = loaded.materialize_inputs(seed=0)
start = time.perf_counter()
with use_options(backend="cuda"):
    rt = loaded.fd.runtime_for(inputs)
print(round(time.perf_counter() - start, 3), "|", "; ".join(rt.executable.compile_events()))
"""


def compile_times(names):
    """Building the runtime (passes, segmentation, scheduling, lowering, NVRTC) in a new
    process with an empty kernel cache (cold), then again with the cache it left (warm)."""
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FUSER_KERNEL_CACHE": cache}
        for name in names:
            script = COMPILE_SCRIPT.format(root=str(ROOT), path=str(SAMPLES / f"{name}.py"))
            for label in ("cold", "warm"):
                out = subprocess.run(
                    [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
                )
                rows.append((name, label, out.stdout.strip()))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="only rope_issue2795 and gelu_tanh_fwd")
    args = parser.parse_args()
    names = ["rope_issue2795", "gelu_tanh_fwd"] if args.quick else list(TORCH)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(f"device: {props['name'].decode()}, driver {cupy.cuda.runtime.driverGetVersion()}, torch {torch.__version__}")
    copy_bw = copy_bandwidth()
    print(f"device-to-device copy: {copy_bw / 1e9:.0f} GB/s")
    rows = []
    for name in names:
        run_sample(name, copy_bw, rows)
    print(f"\n{'sample':34} {'what':24} {'us':>9} {'GB/s':>7} {'of copy':>8}")
    for name, label, us, gbps, frac in rows:
        print(f"{name:34} {label:24} {us:9.1f} {gbps:7.0f} {frac:8.2f}")
    print("\nhost time per call (cache hit, 1k elements):")
    for label, seconds in host_overhead().items():
        print(f"  {label:28} {seconds * 1e6:7.1f} us")
    print("\nbuilding a runtime in a new process (seconds | compile events):")
    for name, label, text in compile_times(names):
        print(f"  {name:34} {label:5} {text}")


if __name__ == "__main__":
    main()
