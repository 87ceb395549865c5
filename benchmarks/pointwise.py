"""The bundled samples on the GPU: this project against torch eager and torch.compile.

Run on a machine with an NVIDIA GPU, CuPy, torch and Triton, from the repository root:

    PYTHONPATH=. python benchmarks/pointwise.py [--quick | --only NAME[,NAME...]]

By default every sample of sample_fusions/ runs; --only picks some by name, --quick runs
rope_issue2795 and gelu_tanh_fwd. For each sample at its bundled (GPU-filling) size it
prints the median time (CUDA events, triton.testing.do_bench, L2 flushed between runs),
GB/s over the minimal bytes (each input read once, each output written once) and the
fraction of a device-to-device copy measured in the same run, for: this project end to
end (`fd.execute`, host overhead included), this project's kernels alone (events around
each launch), torch eager, and torch.compile with static and with dynamic shapes. The
torch versions of the samples are in benchmarks/torch_refs.py. Every result is checked
against torch eager first (samples with a reduction get a looser tolerance: the order of
their sums differs).

Then, per kernel of this project: registers and local (spill) bytes per thread, static
shared memory per block, block and grid size, and the theoretical occupancy (active warps
per SM of the most blocks an SM can hold, over the most warps an SM can hold) from the
driver's occupancy calculator. A group with no generated kernel (expr_eval, or an op
codegen has no CUDA form for) runs on the host with the reference backend: it is listed
with the reason, and the sample's end-to-end time is marked, since it includes that host
work and the copies around it.

Then the host overhead of a cache-hit call of a 1k-element fusion beside CuPy's own
RawKernel launch, and cold and warm compile times.
"""

from __future__ import annotations

import argparse
import math
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
from run_sample import to_torch  # noqa: E402
from torch_refs import REDUCTIONS, TORCH  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from fuser_core import EnableOption, load_repro, use_options  # noqa: E402

SAMPLES = ROOT / "sample_fusions"
SAMPLE_NAMES = sorted(p.stem for p in SAMPLES.glob("*.py"))
QUICK = ["rope_issue2795", "gelu_tanh_fwd"]
HOST_MARK = "*"  # after a sample's end-to-end label when part of it ran on the host


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def bench(fn):
    return do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e-3  # seconds


def copy_bandwidth():
    src = torch.empty(2**28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    seconds = bench(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / seconds


def kernel_seconds(fd, inputs, runs=10):
    """Median over runs of the sum of this project's kernel times (events per launch);
    None when nothing was launched (every group ran on the host)."""
    times = []
    with use_options(enable=[EnableOption.kernel_profile.name]):
        for _ in range(runs):
            fd.execute(inputs)
            launches = fd.executor_cache.last_report.launches
            times.append(sum(r.seconds for r in launches if r.seconds))
    seconds = statistics.median(times)
    return seconds or None


def disagreement(ours, theirs, reduction=False):
    """The worst relative error (norm of the difference over the norm of theirs) between two
    sets of outputs, or None within tolerance: 1e-5 for float32 and 1e-2 for reduced
    precision outputs, 1e-4 and 2e-2 for a sample with a reduction. A different number of
    outputs, or a shape that differs, is an infinite error."""
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    theirs = theirs if isinstance(theirs, (list, tuple)) else [theirs]
    if len(ours) != len(theirs):
        return math.inf
    worst = None
    for a, b in zip(ours, theirs, strict=True):
        if tuple(a.shape) != tuple(b.shape):
            worst = math.inf
            continue
        if a.dtype == torch.float32:
            limit = 1e-4 if reduction else 1e-5
        else:
            limit = 2e-2 if reduction else 1e-2
        a, b = a.float(), b.float()
        err = (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()
        if not err < limit or not torch.isfinite(a).all():
            worst = max(worst or 0.0, err)
    return worst


# -- the kernels of a run: resources and occupancy -------------------------------------------


def device_limits():
    """The per-SM limits the occupancy fallback needs (H100 values where the device does not say)."""
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return {
        "sms": props.get("multiProcessorCount", 132),
        "warp": props.get("warpSize", 32),
        "threads_per_sm": props.get("maxThreadsPerMultiProcessor", 2048),
        "blocks_per_sm": props.get("maxBlocksPerMultiProcessor", 32),
        "regs_per_sm": props.get("regsPerMultiprocessor", 65536),
        "smem_per_sm": props.get("sharedMemPerMultiprocessor", 228 * 1024),
        "smem_reserved_per_block": props.get("reservedSharedMemPerBlock", 1024),
    }


def blocks_per_sm_from_limits(limits, threads, registers, shared_bytes):
    """The most resident blocks of a kernel on one SM, from its registers (allocated per
    warp, in units of 256), its shared memory (plus the driver's reserve per block, in
    units of 128 bytes) and the SM's thread and block limits."""
    warps = -(-threads // limits["warp"])
    by_threads = limits["threads_per_sm"] // (warps * limits["warp"])
    regs_per_warp = -(-max(registers, 1) * limits["warp"] // 256) * 256
    by_registers = (limits["regs_per_sm"] // regs_per_warp) // warps
    smem = -(-(shared_bytes + limits["smem_reserved_per_block"]) // 128) * 128
    by_shared = limits["smem_per_sm"] // smem
    return max(0, min(by_threads, by_registers, by_shared, limits["blocks_per_sm"]))


def loaded_kernel(executable, record):
    """The nvrtc.LoadedKernel a LaunchRecord launched: the group's vectorized kernel, or its
    scalar fallback where the record says that ran."""
    for step in getattr(executable, "steps", ()):
        kernel = getattr(step, "kernel", None)
        if kernel is not None and step.group.id == record.group_id:
            vectorized = kernel.vectorized and "(scalar fallback)" not in record.kernel
            return step.compiled(vectorized).function
    return None


def kernel_rows(name, fd, limits):
    """One row per kernel the last run launched and per group that ran on the host; and
    whether any group ran on the host."""
    report = fd.executor_cache.last_report
    runtime = report.runtime
    rows = []
    for record in report.launches:
        loaded = loaded_kernel(runtime.executable, record)
        threads = math.prod(record.launch.block)
        registers = loaded.num_regs if loaded else record.registers or 0
        local = loaded.local_size_bytes if loaded else record.spills
        dynamic = record.launch.dynamic_shared_bytes
        shared = loaded.shared_size_bytes if loaded else record.launch.shared_bytes - dynamic  # static part
        blocks = None
        if loaded is not None:
            occupancy_api = getattr(cupy.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor", None)
            if occupancy_api is not None:
                try:
                    blocks = occupancy_api(loaded.function.ptr, threads, dynamic)
                except Exception:  # a driver without it: computed below from the limits
                    blocks = None
        how = "driver"
        if blocks is None:
            blocks = blocks_per_sm_from_limits(limits, threads, registers, shared + dynamic)
            how = "computed"
        warps = blocks * -(-threads // limits["warp"])
        max_warps = limits["threads_per_sm"] // limits["warp"]
        waves = math.prod(record.launch.grid) / max(blocks * limits["sms"], 1)
        rows.append(
            (
                name,
                record.kernel,
                str(registers),
                "-" if local is None else str(local),
                str(shared),
                "x".join(map(str, record.launch.block)),
                "x".join(map(str, record.launch.grid)),
                f"{warps}/{max_warps} = {warps / max_warps:.0%} ({blocks} blk/SM, {how})",
                f"{waves:.1f}",
            )
        )
    refusals = runtime.kernel_refusals
    for group in runtime.segmented.groups:
        if group.id in refusals:
            reason = refusals[group.id]
            rows.append((name, f"g{group.id} {group.scheduler.value}: ON THE HOST ({reason})", *["-"] * 7))
    return rows, bool(refusals)


# -- one sample ----------------------------------------------------------------------------------


def run_sample(name, copy_bw, rows, kernels, limits, peers=True):
    (loaded,) = load_repro(SAMPLES / f"{name}.py").definitions
    host_inputs = loaded.materialize_inputs(seed=1)
    inputs = [to_torch(x) for x in host_inputs]
    del host_inputs
    fd = loaded.fd
    fn = TORCH[name]
    reduction = name in REDUCTIONS
    with use_options(backend="cuda"):
        ours = fd.execute(inputs)
        sample_kernels, on_host = kernel_rows(name, fd, limits)
        kernels.extend(sample_kernels)
        eager = fn(*inputs)
        wrong = disagreement(ours, eager, reduction)
        if wrong is not None:
            raise SystemExit(f"{name}: this project and torch eager disagree (relative error {wrong:.2e})")
        del eager
        moved = nbytes(inputs) + nbytes(ours)
        end_to_end = "fuser (end to end)" + (HOST_MARK if on_host else "")
        timings = {end_to_end: bench(lambda: fd.execute(inputs))}
        timings["fuser (kernels)"] = kernel_seconds(fd, inputs)
    if peers:
        timings.update(peer_timings(fn, inputs, ours, reduction))
    for label, seconds in timings.items():
        if seconds is None:  # no kernel launched: every group ran on the host
            rows.append((name, label, None, None, None))
            continue
        gbps = moved / seconds / 1e9
        rows.append((name, label, seconds * 1e6, gbps, moved / seconds / copy_bw))
    return on_host


def peer_timings(fn, inputs, ours, reduction):
    """torch eager, and torch.compile with static and with dynamic shapes (each checked
    against our outputs: a wrong one is reported, not timed as if it were right)."""
    timings = {"torch eager": bench(lambda: fn(*inputs))}
    for label, dynamic in (("torch.compile static", False), ("torch.compile dynamic", True)):
        torch._dynamo.reset()
        compiled = torch.compile(fn, dynamic=dynamic)
        wrong = disagreement(ours, compiled(*inputs), reduction)
        if wrong is not None:
            label += f" WRONG (rel. err. {wrong:.1e})"
        timings[label] = bench(lambda c=compiled: c(*inputs))
    torch._dynamo.reset()
    return timings


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

    def timed(label, call):
        for _ in range(200):
            call()
        cupy.cuda.Device().synchronize()
        n = 3000
        start = time.perf_counter()
        for _ in range(n):
            call()
        cupy.cuda.Device().synchronize()
        results[label] = (time.perf_counter() - start) / n

    with use_options(backend="cuda"):
        timed("fd.execute, CuPy input", lambda: fd.execute([x]))
        timed("fd.execute, torch input", lambda: fd.execute([xt]))
        timed("CuPy RawKernel launch", lambda: raw((8,), (128,), (x, y, np.int32(1024))))
    # As a user runs it: the backend from the environment, no use_options block.
    saved = os.environ.get("FUSER_BACKEND")
    os.environ["FUSER_BACKEND"] = "cuda"
    try:
        timed("fd.execute, torch input, options from the environment", lambda: fd.execute([xt]))
    finally:
        if saved is None:
            del os.environ["FUSER_BACKEND"]
        else:
            os.environ["FUSER_BACKEND"] = saved
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


def sample_names(args):
    if args.quick:
        return list(QUICK)
    if not args.only:
        return list(SAMPLE_NAMES)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SAMPLE_NAMES]
    if unknown:
        raise SystemExit(f"no sample {', '.join(unknown)}; the samples are: {', '.join(SAMPLE_NAMES)}")
    return names


def main():
    parser = argparse.ArgumentParser()
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="only " + " and ".join(QUICK))
    which.add_argument("--only", metavar="NAME[,NAME]", help="only these samples (default: every sample)")
    parser.add_argument(
        "--fuser-only",
        action="store_true",
        help="time only this project (torch eager still runs once, to check our outputs; no torch timings,"
        " host overhead or compile times): for comparing two checkouts",
    )
    parser.add_argument("--no-compile-times", action="store_true", help="skip the cold and warm compile times")
    args = parser.parse_args()
    names = sample_names(args)
    missing = [n for n in SAMPLE_NAMES if n not in TORCH]
    if missing:
        raise SystemExit(f"benchmarks/torch_refs.py has no torch version of {', '.join(missing)}")
    # linear_output_order's torch version is a GEMM: full float32, as this project computes it.
    torch.backends.cuda.matmul.allow_tf32 = False
    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(f"device: {props['name'].decode()}, driver {cupy.cuda.runtime.driverGetVersion()}, torch {torch.__version__}")
    copy_bw = copy_bandwidth()
    print(f"device-to-device copy: {copy_bw / 1e9:.0f} GB/s")
    limits = device_limits()
    rows, kernels, on_host = [], [], []
    started = time.perf_counter()
    for name in names:
        sample_start = time.perf_counter()
        if run_sample(name, copy_bw, rows, kernels, limits, peers=not args.fuser_only):
            on_host.append(name)
        print(f"  {name}: {time.perf_counter() - sample_start:.1f} s", flush=True)
    print(f"samples took {time.perf_counter() - started:.0f} s")
    print(f"\n{'sample':34} {'what':24} {'us':>9} {'GB/s':>7} {'of copy':>8}")
    for name, label, us, gbps, frac in rows:
        if us is None:
            print(f"{name:34} {label:24} {'-':>9} {'-':>7} {'-':>8}")
        else:
            print(f"{name:34} {label:24} {us:9.1f} {gbps:7.0f} {frac:8.2f}")
    if on_host:
        print(
            f"{HOST_MARK} part of {', '.join(on_host)} ran on the host (reference backend, with copies to"
            " and from the device): its end-to-end time includes that; 'fuser (kernels)' does not"
        )
    print(
        f"\nkernels ({limits['sms']} SMs; occupancy: active warps per SM / max warps per SM,"
        " from the resident blocks per SM; waves: grid blocks / (blocks per SM x SMs)):"
    )
    header = ("sample", "kernel", "regs", "local B", "smem B", "block", "grid", "occupancy", "waves")
    launched = [r for r in kernels if "ON THE HOST" not in r[1]]
    widths = [max(len(str(r[i])) for r in [header, *launched]) for i in range(len(header))]
    for row in [header, *kernels]:
        if "ON THE HOST" in row[1]:
            print(f"{row[0]:{widths[0]}}  {row[1]}")
            continue
        print("  ".join(f"{cell:{'<' if i < 2 else '>'}{widths[i]}}" for i, cell in enumerate(row)))
    if args.fuser_only:
        return
    print("\nhost time per call (cache hit, 1k elements):")
    for label, seconds in host_overhead().items():
        print(f"  {label:28} {seconds * 1e6:7.1f} us")
    if args.no_compile_times:
        return
    print("\nbuilding a runtime in a new process (seconds | compile events):")
    for name, label, text in compile_times(names):
        print(f"  {name:34} {label:5} {text}")


if __name__ == "__main__":
    main()
