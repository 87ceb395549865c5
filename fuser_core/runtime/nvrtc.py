"""The CUDA compiler driver: NVRTC's compile of a kernel source, and loading its output
through CuPy.

    >>> from fuser_core.runtime import nvrtc
    >>> module = nvrtc.compile_program(source, ["nvfuser_pointwise_f0_c1_r0_g0"], arch="sm_90")
    >>> module.ptx, module.cubin, module.log, module.compile_seconds

A compile error is a `KernelCompileError` (a FuserError) whose message holds NVRTC's log
and the kernel source around each failing line. `fuser_core.runtime.kernel_cache` puts
the on-disk and in-process caches in front of `compile_program`; `load_module` turns a
CompiledModule into launchable CuPy functions (CuPy is imported there and only there).
Which libnvrtc is used, and the CUDA headers a source with an `#include` gets, is
`fuser_core.runtime.nvrtc_library`'s business.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.runtime.nvrtc_library import NVRTC_SUCCESS, NvrtcLibrary, include_options, load_nvrtc, supported_archs

# Options for fast, correct kernels. `--use_fast_math` is left off: it flushes denormals
# and approximates division, exp and friends, so results would drift from the reference.
DEFAULT_OPTIONS: tuple[str, ...] = ("--std=c++17", "-default-device")
DEFAULT_FILENAME = "kernel.cu"
# Source lines shown on each side of a failing line, and at most this many failing lines.
CONTEXT_LINES = 2
MAX_FAILING_LINES = 8

_NVRTC_ERROR_COMPILATION = 6


# ---------------------------------------------------------------------------------------
# Architectures and options
# ---------------------------------------------------------------------------------------


def arch_for(device: Any, supported: Sequence[int] | None = None) -> str:
    """NVRTC's `--gpu-architecture` for a device: `(9, 0)` or a DeviceProperties -> "sm_90".

    A CUBIN for sm_XY runs on compute capability X.z with z >= Y, so where NVRTC lacks the
    device's exact architecture the newest of its major version is taken; a device newer
    than NVRTC gets PTX only (`compute_XY`), which the driver compiles at load time.
    """
    major, minor = device.compute_capability if hasattr(device, "compute_capability") else device
    wanted = int(major) * 10 + int(minor)
    archs = tuple(supported) if supported is not None else supported_archs()
    if wanted in archs:
        return f"sm_{wanted}"
    same_major = [a for a in archs if a // 10 == int(major) and a <= wanted]
    if same_major:
        return f"sm_{max(same_major)}"
    older = [a for a in archs if a <= wanted]
    if older:
        return f"compute_{max(older)}"
    raise FuserError(
        f"compute capability {major}.{minor} is older than any architecture this NVRTC supports"
        f" ({', '.join(f'sm_{a}' for a in archs)})"
    )


def default_options(*, line_info: bool = False, fast_math: bool = False) -> tuple[str, ...]:
    """DEFAULT_OPTIONS, plus `-lineinfo` (for profilers and compute-sanitizer) and fast math on request."""
    return DEFAULT_OPTIONS + (("-lineinfo",) if line_info else ()) + (("--use_fast_math",) if fast_math else ())


# ---------------------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompiledModule:
    """What NVRTC made of one source: PTX, CUBIN where the architecture is real, and its log.

    `cache` says where this object came from on this call: "compiled" (NVRTC ran),
    "memory" (this process compiled it before) or "disk" (the on-disk cache); a run
    whose modules all have `cache_hit` compiled nothing. `compile_seconds` is the NVRTC
    wall time of the compile that made it, whenever and wherever that was.
    """

    names: tuple[str, ...]  # the name expressions asked for, e.g. "nvfuser_pointwise_f0_c1_r0_g0"
    lowered_names: Mapping[str, str]  # name expression -> symbol in the module (mangled for templates)
    arch: str  # "sm_90", or "compute_90" for PTX only
    options: tuple[str, ...]  # the options asked for (no architecture, no include directories)
    ptx: str
    cubin: bytes | None
    log: str  # NVRTC's log: warnings, or empty
    compile_seconds: float
    nvrtc_version: tuple[int, int]
    key: str = ""  # the cache key (kernel_cache.cache_key); empty when compiled uncached
    cache: str = "compiled"  # "compiled", "memory" or "disk"
    cache_note: str = ""  # why a disk entry could not be used, when one was there

    @property
    def cache_hit(self) -> bool:
        return self.cache != "compiled"

    def symbol(self, name: str | None = None) -> str:
        """The module symbol of a name expression (the only one when `name` is None)."""
        if name is None:
            if len(self.names) != 1:
                raise FuserError(f"this module has {len(self.names)} kernels {list(self.names)}: name one")
            name = self.names[0]
        if name in self.lowered_names:
            return self.lowered_names[name]
        if name in self.lowered_names.values():
            return name
        raise FuserError(f"no kernel {name!r} in this module; it has {list(self.names)}")

    def image(self, prefer_cubin: bool = True) -> bytes:
        """The bytes `cuModuleLoadData` takes: the CUBIN, else NUL-terminated PTX."""
        if prefer_cubin and self.cubin:
            return self.cubin
        return self.ptx.encode() + b"\x00"


class KernelCompileError(FuserError):
    """NVRTC rejected a kernel. `log` is NVRTC's; the message adds the source around each failing line."""

    def __init__(self, message: str, *, log: str, source: str, failing_lines: tuple[int, ...]) -> None:
        super().__init__(message)
        self.log = log
        self.source = source
        self.failing_lines = failing_lines


_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s()][^()]*)\((?P<line>\d+)\): (?P<kind>[a-z ]*(?:error|warning))", re.M)


def failing_lines(log: str, filename: str = DEFAULT_FILENAME) -> tuple[int, ...]:
    """The source lines NVRTC reports errors at (`kernel.cu(12): error: ...`), in order, once each."""
    lines: list[int] = []
    for match in _DIAGNOSTIC.finditer(log):
        if match["file"] == filename and "error" in match["kind"] and int(match["line"]) not in lines:
            lines.append(int(match["line"]))
    return tuple(lines)


def source_excerpt(source: str, lines: Sequence[int], context: int = CONTEXT_LINES) -> str:
    """Numbered source lines around each of `lines`, each marked with `>`, gaps shown as `...`."""
    text = source.splitlines()
    shown: set[int] = set()
    for line in lines[:MAX_FAILING_LINES]:
        shown.update(range(max(1, line - context), min(len(text), line + context) + 1))
    width = len(str(max(shown, default=1)))
    out: list[str] = []
    previous = 0
    for number in sorted(shown):
        if previous and number != previous + 1:
            out.append("  " + " " * width + " ...")
        mark = ">" if number in lines else " "
        out.append(f"{mark} {number:>{width}} | {text[number - 1]}")
        previous = number
    if len(lines) > MAX_FAILING_LINES:
        out.append(f"  ({len(lines) - MAX_FAILING_LINES} more failing lines not shown)")
    return "\n".join(out)


def _compile_error(
    source: str, filename: str, arch: str, options: Sequence[str], lib: NvrtcLibrary, status: int, log: str, hint: str
) -> KernelCompileError:
    lines = failing_lines(log, filename)
    status_name = "" if status == _NVRTC_ERROR_COMPILATION else f" ({lib.error_name(status)})"
    message = (
        f"NVRTC {lib.version[0]}.{lib.version[1]} could not compile {filename} for {arch}{status_name}"
        f" with options {' '.join(options) or '(none)'}:\n{log.strip() or '(empty log)'}"
    )
    if lines:
        message += f"\n\n{filename}, around the failing line{'s' if len(lines) > 1 else ''}:\n"
        message += source_excerpt(source, lines)
    if hint:
        message += f"\n\n{hint}"
    return KernelCompileError(message, log=log, source=source, failing_lines=lines)


def _arch_option(arch: str) -> str:
    if not re.fullmatch(r"(sm|compute)_\d+[af]?", arch):
        raise FuserError(f"architecture {arch!r} is not of the form sm_90 or compute_90")
    return f"--gpu-architecture={arch}"


def compile_program(
    source: str,
    names: str | Sequence[str] = (),
    *,
    arch: str = "sm_90",
    options: Sequence[str] = DEFAULT_OPTIONS,
    filename: str = DEFAULT_FILENAME,
) -> CompiledModule:
    """Compile `source` with NVRTC, uncached. `names` are the kernels' name expressions.

    Raises KernelCompileError (a FuserError) when NVRTC rejects the source or an option,
    NvrtcNotFoundError (nvrtc_library) when there is no NVRTC. Include directories for the CUDA headers
    are added only for a source that has an `#include`.
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    options = tuple(options)
    for option in options:
        if option.startswith(("--gpu-architecture", "-arch")):
            raise FuserError(f"pass the architecture as arch=..., not as the option {option!r}")
    if "\x00" in source:
        raise FuserError("a kernel source cannot contain a NUL character")
    arch_option = _arch_option(arch)
    lib = load_nvrtc()
    includes, include_problem = include_options(lib) if "#include" in source else ([], None)
    start = time.perf_counter()
    status, log, ptx, cubin, lowered = lib.compile(
        source.encode(), filename.encode(), names, [arch_option, *options, *includes]
    )
    seconds = time.perf_counter() - start
    if status != NVRTC_SUCCESS:
        hint = ""
        if include_problem and "source file" in log:
            hint = f"CUDA headers are unavailable: {include_problem}."
        if "__nv_name_map" in log:
            hint = f"A kernel name asked for is not defined in the source: {list(names)}."
        if status == 5 and "gpu-architecture" in log:
            hint = f"This NVRTC supports {', '.join(f'sm_{a}' for a in lib.supported_archs())}."
        raise _compile_error(source, filename, arch, options, lib, status, log, hint)
    return CompiledModule(
        names=names,
        lowered_names=lowered,
        arch=arch,
        options=options,
        ptx=ptx,
        cubin=cubin if arch.startswith("sm_") else None,
        log=log.strip(),
        compile_seconds=seconds,
        nvrtc_version=lib.version,
    )


# ---------------------------------------------------------------------------------------
# Loading on a GPU (CuPy)
# ---------------------------------------------------------------------------------------

# CUfunction_attribute values of the CUDA driver API (stable across CUDA versions).
_FUNC_ATTRIBUTES = {
    "max_threads_per_block": 0,
    "shared_size_bytes": 1,
    "const_size_bytes": 2,
    "local_size_bytes": 3,
    "num_regs": 4,
    "ptx_version": 5,
    "binary_version": 6,
}


@dataclass(frozen=True)
class LoadedKernel:
    """One kernel of a loaded module, with the attributes the run report shows.

    Call it as CuPy's Function: `kernel((blocks,), (threads,), (x, y, n))`.
    """

    name: str  # the name expression
    symbol: str
    function: Any = field(repr=False)  # cupy.cuda.function.Function
    num_regs: int  # registers per thread
    local_size_bytes: int  # local memory per thread: spills (and local arrays)
    shared_size_bytes: int  # static shared memory per block
    const_size_bytes: int
    max_threads_per_block: int  # the most threads a block of this kernel can have
    ptx_version: int
    binary_version: int
    loaded_from: str  # "cubin" or "ptx"

    def __call__(
        self,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        args: Sequence[Any],
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        self.function(tuple(grid), tuple(block), tuple(args), shared_mem=shared_mem, stream=stream)


@dataclass(frozen=True)
class LoadedModule:
    """A CompiledModule loaded into the current CUDA context (one device)."""

    compiled: CompiledModule = field(repr=False)
    module: Any = field(repr=False)  # cupy.cuda.function.Module; keeps the code loaded
    kernels: Mapping[str, LoadedKernel]

    def __getitem__(self, name: str) -> LoadedKernel:
        if name in self.kernels:
            return self.kernels[name]
        raise FuserError(f"no kernel {name!r} in this module; it has {list(self.kernels)}")


def load_module(compiled: CompiledModule) -> LoadedModule:
    """Load a CompiledModule on the current device through CuPy, without recompiling.

    The CUBIN is loaded where there is one; if the driver refuses it (a device of another
    architecture), the PTX is, and the driver compiles it. Raises FuserError when CuPy is
    missing or the driver accepts neither.
    """
    try:
        import cupy  # heavy and optional: only a machine that runs kernels has it
        from cupy.cuda import driver as cuda_driver
        from cupy.cuda import function as cuda_function
    except ImportError as err:
        raise FuserError(f"loading a CUDA kernel needs CuPy (the 'cuda' extra): {err}") from err

    attempts: list[tuple[str, bytes]] = []
    if compiled.cubin:
        attempts.append(("cubin", compiled.cubin))
    if compiled.ptx:
        attempts.append(("ptx", compiled.image(prefer_cubin=False)))
    failures: list[str] = []
    for kind, image in attempts:
        module = cuda_function.Module()
        try:
            module.load(image)
        except Exception as err:  # CUDADriverError and friends: report them, try the next image
            failures.append(f"{kind}: {err}")
            continue
        try:
            kernels = {
                name: _load_kernel(module, name, compiled.symbol(name), kind, cuda_driver) for name in compiled.names
            }
        except FuserError:
            raise
        except Exception as err:
            raise FuserError(f"the loaded {compiled.arch} module has no usable kernel: {err}") from err
        return LoadedModule(compiled=compiled, module=module, kernels=kernels)
    device = cupy.cuda.Device()
    raise FuserError(
        f"the CUDA driver could not load the kernels {list(compiled.names)} compiled for {compiled.arch}"
        f" (NVRTC {compiled.nvrtc_version[0]}.{compiled.nvrtc_version[1]}) on device {device.id}"
        f" (compute capability {device.compute_capability}): " + "; ".join(failures or ["no CUBIN or PTX"])
    )


# CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES of the CUDA driver API.
_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024  # what a launch may ask for without opting in


def allow_dynamic_shared_memory(kernel: LoadedKernel, nbytes: int) -> None:
    """Let `kernel` launch with `nbytes` of dynamic shared memory: past 48 KiB the function
    must opt in (up to the device's sharedMemPerBlockOptin) before its first launch."""
    if nbytes <= DEFAULT_DYNAMIC_SHARED_LIMIT:
        return
    from cupy.cuda import driver as cuda_driver  # heavy and optional: only where kernels run

    cuda_driver.funcSetAttribute(kernel.function.ptr, _MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)


def _load_kernel(module: Any, name: str, symbol: str, kind: str, cuda_driver: Any) -> LoadedKernel:
    function = module.get_function(symbol)
    attributes = {key: int(cuda_driver.funcGetAttribute(code, function.ptr)) for key, code in _FUNC_ATTRIBUTES.items()}
    return LoadedKernel(name=name, symbol=symbol, function=function, loaded_from=kind, **attributes)
