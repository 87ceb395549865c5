"""One fuzz case end to end: build, run, compare, classify.

Two runners share the classification:

- `CudaRunner` executes with `use_options(backend="cuda")` on torch CUDA inputs and
  compares every output with torch eager evaluating the same op list (torch_ref.py).
- `CpuRunner` runs the fusion on the reference backend, then every generated kernel on
  the kernel-IR interpreter against the reference's values of its group (the check of
  tests/unit/codegen/kernels_check.py); with `torch_check`, the reference's outputs are
  also compared with torch eager on the CPU, which tests the reference and this fuzzer's
  torch rules where there is no GPU.

Classes: `compile` (NVRTC refused a generated kernel), `fault` (a CUDA error, or an
interpreter KernelFault: an out-of-bounds or racing access), `mismatch`, `internal`
(InternalError or any unexpected exception inside fuser_core), `timeout` (the parent
killed a case that hung). `refused` (a FuserError) and `pass` are not failures, and
`harness` is an error of this fuzzer's own (its torch rules), reported apart.
"""

from __future__ import annotations

import importlib.util
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fuser_core import FuserError, use_options
from fuser_core.codegen import translation_unit
from fuser_core.frontend.fusion_cache import FusionCache
from fuser_core.runtime.group_lowering import generates_kernel, lowered_groups
from fuser_core.runtime.kernel_cache import KernelCache, compile_kernel
from fuser_core.runtime.nvrtc import KernelCompileError
from fuser_core.runtime.nvrtc_library import load_nvrtc

from .build import build, make_inputs
from .program import REDUCTIONS, Program, computed_precision
from .torch_ref import NeedsReference, TorchEval, compare, nudge_patterns, to_numpy, to_torch, torch_dtype

FAILURES = ("compile", "fault", "mismatch", "internal", "timeout")
ROOT = Path(__file__).resolve().parents[2]
HOST_MARK = "on the host reference"
_FAULT_TYPES = (
    "CUDARuntimeError",
    "CUDADriverError",
    "AcceleratorError",
    "CUDAError",
    "CudaFaultError",
    "OutOfMemoryError",
)
_FAULT_TEXT = ("CUDA error", "CUDA_ERROR", "cudaError", "illegal memory access", "misaligned address", "launch failure")


@dataclass
class Outcome:
    status: str
    message: str = ""
    host_groups: list[str] = field(default_factory=list)  # compile events of groups run on the host
    kernels: int = 0
    note: str = ""  # e.g. "the reference backend runs it" for a cuda-only refusal


def reset_fusion_cache() -> None:
    """Each case starts with an empty FusionCache (thousands of definitions otherwise
    pile up in the process)."""
    FusionCache.reset()


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


def is_cuda_fault(err: BaseException) -> bool:
    return any(type(e).__name__ in _FAULT_TYPES or any(t in str(e) for t in _FAULT_TEXT) for e in _chain(err))


def classify(err: BaseException) -> str:
    """The failure class of an exception raised while compiling or running a fusion."""
    if isinstance(err, KernelCompileError) or (isinstance(err, FuserError) and "NVRTC" in str(err)):
        return "compile"
    if is_cuda_fault(err) or type(err).__name__ == "KernelFault":
        return "fault"
    if isinstance(err, FuserError):
        return "refused"
    return "internal"


def describe(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    if not isinstance(err, FuserError):
        text += "\n" + "".join(traceback.format_exception(err)[-6:])
    return text.strip()


def loose(program: Program) -> bool:
    """Whether a reduction feeds the outputs (its order of summation is the compiler's)."""
    return any(op.name in (*REDUCTIONS, "var", "var_mean", "welford") for op in program.ops)


class CudaRunner:
    """The cuda backend on torch CUDA tensors, against torch eager on the same GPU.

    `CudaRunner(device="cpu", backend="reference")` runs the same path on torch CPU
    tensors through the reference backend: a dry run of this runner where there is no GPU."""

    mode = "cuda"

    def __init__(self, device: str = "cuda", backend: str = "cuda") -> None:
        import torch  # heavy and optional: only the GPU mode needs it

        self.torch = torch
        self.device, self.backend = device, backend
        if device == "cuda":
            if not torch.cuda.is_available():
                raise SystemExit("the GPU mode needs torch with CUDA and a GPU (use --cpu elsewhere)")
            self.device_name = torch.cuda.get_device_name()
        else:
            self.device_name = f"{device} (dry run on the {backend} backend)"
        self.poisoned = False

    def synchronize(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def run(self, program: Program) -> Outcome:
        torch = self.torch
        reset_fusion_cache()
        hosts = make_inputs(program)
        fd = build(program)
        inputs = [to_torch(torch, h, self.device) for h in hosts]
        try:
            with use_options(backend=self.backend):
                outs = fd.execute(inputs)
            self.synchronize()
        except Exception as err:
            status = classify(err)
            self.poisoned = status == "fault"
            outcome = Outcome(status, describe(err))
            if status == "refused":
                outcome.note = self._reference_note(fd, hosts)
            return outcome
        events = compile_events(fd)
        host = [e for e in events if HOST_MARK in e]
        against = "torch"
        try:
            want = TorchEval(torch, program).run(inputs)
            wide = TorchEval(torch, program, wide=True).run(inputs)
            nudged = [TorchEval(torch, program, nudge=p).run(inputs) for p in nudge_patterns(program)]
        except NeedsReference:  # random ops: torch cannot draw nvFuser's Philox stream
            against = "the reference backend"
            nudged = []
            try:
                with use_options(backend="reference"):
                    want = wide = fd.execute([h.view() for h in hosts])
            except Exception as err:
                return Outcome(classify(err), "reference backend: " + describe(err), host)
        except Exception as err:
            return Outcome("harness", "torch reference: " + describe(err), host, len(events) - len(host))
        for k, (out, got) in enumerate(zip(program.outputs, outs, strict=True)):
            dtype = program.dtypes[out.vid]
            problem = _output_dtype_problem(torch, got, dtype)
            if problem is None:
                problem = compare(to_numpy(torch, got), to_numpy(torch, want[k]), to_numpy(torch, wide[k]),
                                  dtype, loose(program), computed_precision(program, out.vid),
                                  [to_numpy(torch, n[k]) for n in nudged])  # fmt: skip
            if problem is not None:
                where = f"output {k} (T{_tv_name(fd, k)}, {dtype}) against {against}"
                return Outcome("mismatch", f"{where}: {problem}", host)
        return Outcome("pass", "", host, len(events) - len(host))

    def _reference_note(self, fd: Any, hosts: list[Any]) -> str:
        try:
            with use_options(backend="reference"):
                fd.execute([h.view() for h in hosts])
        except Exception:
            return ""
        return "the reference backend runs it"


def compile_events(fd: Any) -> list[str]:
    """What the last run did per group ("...: compiled", "...: on the host reference (why)"):
    the run report's compile events, or where a report has none, its executable's."""
    report = fd.executor_cache.last_report if fd.executor_cache is not None else None
    if report is None:
        return []
    events = list(getattr(report, "compiles", ()) or ())
    executable = getattr(report.runtime, "executable", None)
    if not events and hasattr(executable, "compile_events"):
        events = list(executable.compile_events())
    return events


def _tv_name(fd: Any, k: int) -> str:
    try:
        return str(fd.fusion.outputs[k].name)
    except Exception:
        return "?"


def _output_dtype_problem(torch: Any, got: Any, dtype: str) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"returned {type(got).__name__}, not a torch tensor"
    if got.dtype != torch_dtype(torch, dtype):
        return f"dtype {got.dtype}, the fusion declares {dtype}"
    return None


class CpuRunner:
    """The reference backend, and every generated kernel on the kernel-IR interpreter."""

    mode = "cpu"
    poisoned = False

    def __init__(self, torch_check: bool = False, nvrtc: bool = True) -> None:
        self.reducing: set[str] = set()  # kernels of the case being checked that reduce
        self.check = _private_kernel_check(self.close)
        self.nvrtc_cache = _nvrtc_cache() if nvrtc else None
        compiled = "compiled for sm_90 by NVRTC" if self.nvrtc_cache is not None else "not compiled (no NVRTC)"
        self.device_name = f"CPU: generated kernels on the kernel-IR interpreter, {compiled}"
        self.torch: Any = None
        if torch_check:
            import torch  # optional: compares the reference backend with torch on the CPU

            self.torch = torch

    def run(self, program: Program) -> Outcome:
        reset_fusion_cache()
        hosts = make_inputs(program)
        inputs = [h.view() for h in hosts]
        fd = build(program)
        try:
            with use_options(device_model="h100_sxm", backend="reference"):
                outs = fd.execute(inputs)
                runtime = fd.runtime_for(inputs)
            lowered, refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)
        except Exception as err:
            return Outcome(classify(err), describe(err))
        host = [
            f"g{g.id} {g.scheduler.value}: {HOST_MARK} ({refused[g.id]})"
            for g in runtime.segmented.groups
            if g.id in refused
        ]
        kernels = sum(1 for g in runtime.segmented.groups if generates_kernel(g) and g.id not in refused)
        self.reducing = {f"kernel_g{g.id}" for g in runtime.segmented.groups if g.scheduler.value in REDUCING}
        try:
            self.compile(lowered.values())
        except Exception as err:
            return Outcome(classify(err), describe(err), host, kernels)
        try:
            self.check(runtime, inputs)
        except AssertionError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            if len(lines) > 2 and lines[0].startswith(("Not equal", "Arrays are not")):  # NumPy's: name on line 2
                lines = [f"{lines[1]} differs", *lines[2:6], lines[0]]
            return Outcome("mismatch", "kernel against the reference: " + "; ".join(lines[:6]), host, kernels)
        except Exception as err:
            return Outcome(classify(err) if type(err).__name__ == "KernelFault" else "internal", describe(err), host)
        if self.torch is not None:
            problem = self._against_torch(program, hosts, outs)
            if problem is not None:
                return Outcome(problem[0], problem[1], host, kernels)
        return Outcome("pass", "", host, kernels)

    def compile(self, kernels: Iterable[Any]) -> None:
        """Each kernel as the cuda backend compiles it (NVRTC, for sm_90), where NVRTC is
        installed: no GPU is needed to find a kernel NVRTC rejects."""
        if self.nvrtc_cache is None:
            return
        for kernel in kernels:
            compile_kernel(translation_unit(kernel), kernel.name, arch="sm_90", cache=self.nvrtc_cache)

    def close(self, got: Any, want: Any, what: str) -> None:
        """The kernel's values against the reference's: integers and bools exactly, floats
        within 1e-5 (2^-7 for Half and BFloat16) of each value; a reduction's within that
        fraction of the output's largest magnitude too, since a kernel sums in its own
        order and in float where the reference sums in 64 bits."""
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=what)
            return
        g, w = got.astype(np.float64), want.astype(np.float64)
        rtol = 1e-5 if want.dtype.itemsize >= 4 else 2**-7
        finite = np.isfinite(w)
        scale = float(np.abs(w[finite]).max()) if finite.any() else 0.0
        atol = rtol * (max(scale, 1.0) if what.split()[0] in self.reducing else 1.0)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)

    def _against_torch(self, program: Program, hosts: list[Any], outs: list[Any]) -> tuple[str, str] | None:
        torch = self.torch
        inputs = [to_torch(torch, h, "cpu") for h in hosts]
        try:
            want = TorchEval(torch, program).run(inputs)
            wide = TorchEval(torch, program, wide=True).run(inputs)
            nudged = [TorchEval(torch, program, nudge=p).run(inputs) for p in nudge_patterns(program)]
        except NeedsReference:  # random ops: the reference is the only judge, and it ran above
            return None
        except Exception as err:
            return "harness", "torch reference: " + describe(err)
        for k, out in enumerate(program.outputs):
            dtype = program.dtypes[out.vid]
            got = to_numpy(torch, outs[k])
            precision = computed_precision(program, out.vid)
            moved = [to_numpy(torch, n[k]) for n in nudged]
            problem = compare(
                got, to_numpy(torch, want[k]), to_numpy(torch, wide[k]), dtype, loose(program), precision, moved
            )
            if problem is not None:
                return "mismatch", f"reference backend against torch, output {k} ({dtype}): {problem}"
        return None


REDUCING = ("reduction", "inner_persistent", "outer_persistent")


def _nvrtc_cache() -> Any:
    """An in-memory kernel cache of this process (so fuzzing writes no disk cache), or
    None where NVRTC cannot be loaded."""
    try:
        load_nvrtc()
    except Exception:
        return None
    return KernelCache(disk=False)


def _private_kernel_check(close: Callable[[Any, Any, str], None]) -> Callable[..., Any]:
    """`check_generated_kernels` of tests/unit/codegen/kernels_check.py, from a private
    copy of that module whose float comparison is `close` (the tests' own module, and
    its tolerance, stay as they are)."""
    path = ROOT / "tests" / "unit" / "codegen" / "kernels_check.py"
    spec = importlib.util.spec_from_file_location("fuzzlib_kernels_check", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._assert_close = close
    return module.check_generated_kernels  # type: ignore[no-any-return]
