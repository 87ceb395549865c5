"""The CUDA compiler driver: NVRTC through ctypes, and loading its output through CuPy.

NVRTC is found without CuPy: the `nvidia-cuda-nvrtc` wheel of the dev extra (it installs
`site-packages/nvidia/cu13/lib/libnvrtc.so.13` and its `libnvrtc-builtins`), a CUDA
toolkit (`CUDA_PATH`, `CUDA_HOME`, the `nvcc` on PATH, as CuPy's `get_cuda_path` looks),
the standard system directories, then the dynamic loader (`ctypes.util.find_library`).
`FUSER_NVRTC_LIBRARY=/path/to/libnvrtc.so` replaces the search (only that file is tried).

    >>> from fuser_core.runtime import nvrtc
    >>> module = nvrtc.compile_program(source, ["nvfuser_pointwise_f0_c1_r0_g0"], arch="sm_90")
    >>> module.ptx, module.cubin, module.log, module.compile_seconds

A compile error is a `KernelCompileError` (a FuserError) whose message holds NVRTC's log
and the kernel source around each failing line. `fuser_core.runtime.kernel_cache` puts
the on-disk and in-process caches in front of `compile_program`; `load_module` turns a
CompiledModule into launchable CuPy functions (CuPy is imported there and only there).

CUDA headers: NVRTC 13.3 and later bundle the toolkit's headers (cuda_fp16.h, cuda_bf16.h,
cuda_fp8.h, CCCL's cuda/std/...) in libnvrtc-builtins. When a source has an `#include`,
they are extracted once per NVRTC version under the user's cache directory and put on the
include path. Older NVRTCs get the include directory of the toolkit they came with, if any.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuser_core.errors import FuserError

# Options for fast, correct kernels. `--use_fast_math` is left off: it flushes denormals
# and approximates division, exp and friends, so results would drift from the reference.
DEFAULT_OPTIONS: tuple[str, ...] = ("--std=c++17", "-default-device")
DEFAULT_FILENAME = "kernel.cu"
LIBRARY_ENV = "FUSER_NVRTC_LIBRARY"
# Source lines shown on each side of a failing line, and at most this many failing lines.
CONTEXT_LINES = 2
MAX_FAILING_LINES = 8

_NVRTC_SUCCESS = 0
_NVRTC_ERROR_COMPILATION = 6
_NVRTC_ERROR_NAMES = {
    0: "NVRTC_SUCCESS",
    1: "NVRTC_ERROR_OUT_OF_MEMORY",
    2: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
    3: "NVRTC_ERROR_INVALID_INPUT",
    4: "NVRTC_ERROR_INVALID_PROGRAM",
    5: "NVRTC_ERROR_INVALID_OPTION",
    6: "NVRTC_ERROR_COMPILATION",
    7: "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
    8: "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    9: "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
    11: "NVRTC_ERROR_INTERNAL_ERROR",
}


# ---------------------------------------------------------------------------------------
# Finding and loading libnvrtc
# ---------------------------------------------------------------------------------------


class NvrtcNotFoundError(FuserError):
    """No loadable libnvrtc: the message lists every place that was searched."""


def _version_of(path: Path) -> tuple[int, ...]:
    """`libnvrtc.so.13.5.37` -> (13, 5, 37); `nvrtc64_130_0.dll` -> (130, 0); else ()."""
    return tuple(int(n) for n in re.findall(r"\d+", path.name.split("nvrtc", 1)[-1]))


def _libraries_in(directory: Path) -> list[Path]:
    """The libnvrtc files of one directory, newest version first (never the builtins)."""
    if not directory.is_dir():
        return []
    found = [*directory.glob("libnvrtc.so*"), *directory.glob("nvrtc64_*.dll"), *directory.glob("libnvrtc*.dylib")]
    found = [p for p in found if "builtins" not in p.name and "static" not in p.name]
    return sorted(found, key=lambda p: (_version_of(p), -len(p.name)), reverse=True)


def _toolkit_roots() -> list[tuple[str, Path]]:
    """CUDA toolkit roots in CuPy's order: CUDA_PATH, CUDA_HOME, the nvcc on PATH, /usr/local/cuda."""
    roots: list[tuple[str, Path]] = []
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            roots.append((f"${var}", Path(os.environ[var])))
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(("nvcc on PATH", Path(nvcc).resolve().parent.parent))
    roots.append(("standard location", Path("/usr/local/cuda")))
    roots.extend(("standard location", p) for p in sorted(Path("/usr/local").glob("cuda-*"), reverse=True))
    return roots


def library_candidates() -> list[tuple[str, Path]]:
    """Every directory (or file) searched for libnvrtc, in order, with why it is searched."""
    if os.environ.get(LIBRARY_ENV):  # an explicit choice is the only one tried
        return [(f"${LIBRARY_ENV}", Path(os.environ[LIBRARY_ENV]))]
    places: list[tuple[str, Path]] = []
    # The nvidia-cuda-nvrtc wheel: nvidia/cu13/lib (CUDA 13), nvidia/cuda_nvrtc/lib (CUDA 12).
    seen: set[Path] = set()
    for entry in sys.path:
        nvidia = Path(entry or ".") / "nvidia"
        if nvidia in seen or not nvidia.is_dir():
            continue
        seen.add(nvidia)
        for sub in sorted(nvidia.iterdir(), reverse=True):
            for lib_dir in ("lib", "bin"):
                if (sub / lib_dir).is_dir():
                    places.append(("nvidia-cuda-nvrtc wheel", sub / lib_dir))
    for why, root in _toolkit_roots():
        for lib_dir in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "bin"):
            places.append((f"CUDA toolkit ({why})", root / lib_dir))
    for system_dir in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        places.append(("system library directory", Path(system_dir)))
    return places


@dataclass
class NvrtcLibrary:
    """A loaded libnvrtc: where it came from, its version, and typed entry points."""

    path: str
    version: tuple[int, int]
    handle: Any = field(repr=False)
    _archs: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def has_bundled_headers(self) -> bool:
        return hasattr(self.handle, "nvrtcInstallBundledHeaders")

    def error_name(self, code: int) -> str:
        try:
            name = self.handle.nvrtcGetErrorString(code)
            return name.decode() if name else _NVRTC_ERROR_NAMES.get(code, f"NVRTC error {code}")
        except Exception:  # an unknown code or a broken library still deserves a message
            return _NVRTC_ERROR_NAMES.get(code, f"NVRTC error {code}")

    def check(self, code: int, call: str) -> None:
        if code != _NVRTC_SUCCESS:
            raise FuserError(f"NVRTC call {call} failed with {self.error_name(code)} (libnvrtc at {self.path})")

    def supported_archs(self) -> tuple[int, ...]:
        if self._archs is None:
            self._archs = self._query_archs()
        return self._archs

    def _query_archs(self) -> tuple[int, ...]:
        count = ctypes.c_int()
        self.check(self.handle.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * count.value)()
        self.check(self.handle.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        return tuple(sorted(archs))

    def compile(
        self, source: bytes, filename: bytes, names: Sequence[str], options: Sequence[str]
    ) -> tuple[int, str, str, bytes | None, dict[str, str]]:
        """One NVRTC program: (status, log, ptx, cubin, lowered names). Always destroys it."""
        lib = self.handle
        program = ctypes.c_void_p()
        self.check(lib.nvrtcCreateProgram(ctypes.byref(program), source, filename, 0, None, None), "nvrtcCreateProgram")
        try:
            for name in names:
                self.check(lib.nvrtcAddNameExpression(program, name.encode()), f"nvrtcAddNameExpression({name!r})")
            encoded = [o.encode() for o in options]
            argv = (ctypes.c_char_p * max(1, len(encoded)))(*encoded)
            status = lib.nvrtcCompileProgram(program, len(encoded), argv)
            log = self._read(program, "ProgramLog").decode(errors="replace").rstrip("\x00")
            if status != _NVRTC_SUCCESS:
                return status, log, "", None, {}
            ptx = self._read(program, "PTX").rstrip(b"\x00").decode(errors="replace")
            cubin = self._read(program, "CUBIN", optional=True) or None
            lowered: dict[str, str] = {}
            for name in names:
                symbol = ctypes.c_char_p()
                self.check(
                    lib.nvrtcGetLoweredName(program, name.encode(), ctypes.byref(symbol)),
                    f"nvrtcGetLoweredName({name!r})",
                )
                lowered[name] = (symbol.value or b"").decode()
            return status, log, ptx, cubin, lowered
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))

    def _read(self, program: ctypes.c_void_p, what: str, *, optional: bool = False) -> bytes:
        size = ctypes.c_size_t()
        status = getattr(self.handle, f"nvrtcGet{what}Size")(program, ctypes.byref(size))
        if status != _NVRTC_SUCCESS and optional:
            return b""  # no CUBIN for a virtual architecture (compute_XY)
        self.check(status, f"nvrtcGet{what}Size")
        if size.value == 0:
            return b""
        buffer = ctypes.create_string_buffer(size.value)
        self.check(getattr(self.handle, f"nvrtcGet{what}")(program, buffer), f"nvrtcGet{what}")
        return buffer.raw

    def install_bundled_headers(self, directory: Path) -> str | None:
        """Extract NVRTC's bundled headers into `directory` (a no-op once done); None or why not."""
        if not self.has_bundled_headers:
            return f"NVRTC {self.version[0]}.{self.version[1]} bundles no headers (13.3 and later do)"
        error = ctypes.c_char_p()
        try:
            status = self.handle.nvrtcInstallBundledHeaders(str(directory).encode(), 0, ctypes.byref(error))
        except Exception as err:  # a ctypes failure must not break a compile that needs no header
            return f"nvrtcInstallBundledHeaders failed: {err}"
        if status != _NVRTC_SUCCESS:
            detail = f": {error.value.decode(errors='replace')}" if error.value else ""
            return f"nvrtcInstallBundledHeaders({directory}) failed with {self.error_name(status)}{detail}"
        return None


def _declare(handle: Any) -> None:
    """Argument and result types, so a wrong call is a ctypes TypeError, not memory corruption."""
    c_int, c_char_p, c_void_p, c_size_t = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t
    p = ctypes.POINTER
    signatures: dict[str, tuple[list[Any], Any]] = {
        "nvrtcGetErrorString": ([c_int], c_char_p),
        "nvrtcVersion": ([p(c_int), p(c_int)], c_int),
        "nvrtcGetNumSupportedArchs": ([p(c_int)], c_int),
        "nvrtcGetSupportedArchs": ([p(c_int)], c_int),
        "nvrtcCreateProgram": ([p(c_void_p), c_char_p, c_char_p, c_int, c_void_p, c_void_p], c_int),
        "nvrtcDestroyProgram": ([p(c_void_p)], c_int),
        "nvrtcCompileProgram": ([c_void_p, c_int, p(c_char_p)], c_int),
        "nvrtcGetPTXSize": ([c_void_p, p(c_size_t)], c_int),
        "nvrtcGetPTX": ([c_void_p, c_char_p], c_int),
        "nvrtcGetCUBINSize": ([c_void_p, p(c_size_t)], c_int),
        "nvrtcGetCUBIN": ([c_void_p, c_char_p], c_int),
        "nvrtcGetProgramLogSize": ([c_void_p, p(c_size_t)], c_int),
        "nvrtcGetProgramLog": ([c_void_p, c_char_p], c_int),
        "nvrtcAddNameExpression": ([c_void_p, c_char_p], c_int),
        "nvrtcGetLoweredName": ([c_void_p, c_char_p, p(c_char_p)], c_int),
        "nvrtcInstallBundledHeaders": ([c_char_p, ctypes.c_uint, p(c_char_p)], c_int),
    }
    for name, (argtypes, restype) in signatures.items():
        if hasattr(handle, name):
            function = getattr(handle, name)
            function.argtypes, function.restype = argtypes, restype


def _open(path: str) -> NvrtcLibrary:
    handle = ctypes.CDLL(path)
    if not hasattr(handle, "nvrtcCompileProgram"):
        raise OSError("it has no nvrtcCompileProgram")
    _declare(handle)
    major, minor = ctypes.c_int(), ctypes.c_int()
    if handle.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != _NVRTC_SUCCESS:
        raise OSError("nvrtcVersion failed")
    return NvrtcLibrary(path=path, version=(major.value, minor.value), handle=handle)


@functools.cache
def load_nvrtc() -> NvrtcLibrary:
    """The first libnvrtc that loads, searched as the module docstring says; cached per process."""
    tried: list[str] = []
    for why, place in library_candidates():
        files = [place] if place.is_file() else _libraries_in(place)
        if not files:
            tried.append(f"  {place} ({why}): {'no libnvrtc there' if place.exists() else 'does not exist'}")
        for file in files:
            try:
                return _open(str(file))
            except OSError as err:
                tried.append(f"  {file} ({why}): cannot load it: {err}")
    if not os.environ.get(LIBRARY_ENV):
        name = ctypes.util.find_library("nvrtc")
        if name is None:
            tried.append("  ctypes.util.find_library('nvrtc'): the dynamic loader knows no libnvrtc")
        else:
            try:
                return _open(name)
            except OSError as err:
                tried.append(f"  {name} (ctypes.util.find_library): cannot load it: {err}")
    raise NvrtcNotFoundError(
        "NVRTC (libnvrtc) was not found, so CUDA kernels cannot be compiled. Install it with"
        " `pip install 'nvidia-cuda-nvrtc>=13.3,<14'` (the dev extra has it), or point"
        f" {LIBRARY_ENV} at a libnvrtc.so. Searched:\n" + "\n".join(tried)
    )


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC in use, e.g. (13, 5)."""
    return load_nvrtc().version


def supported_archs() -> tuple[int, ...]:
    """The real architectures this NVRTC compiles for, e.g. (75, 80, ..., 90, 100, 120)."""
    return load_nvrtc().supported_archs()


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
# Headers
# ---------------------------------------------------------------------------------------


def headers_root() -> Path:
    """Where NVRTC's bundled headers are extracted: `$XDG_CACHE_HOME/fuser-workbench/nvrtc-headers`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fuser-workbench" / "nvrtc-headers"


def header_source(lib: NvrtcLibrary) -> str:
    """What `#include <cuda_fp16.h>` resolves to; part of the cache key. Calls no NVRTC function."""
    if lib.has_bundled_headers:
        return f"bundled:{lib.version[0]}.{lib.version[1]}"
    toolkit = _toolkit_include_dir(lib.path)
    return f"toolkit:{toolkit}" if toolkit else "none"


def _toolkit_include_dir(library_path: str) -> Path | None:
    library = Path(library_path).resolve()
    for up in (library.parent.parent, library.parent.parent.parent.parent):
        if (up / "include" / "cuda_fp16.h").is_file():
            return up / "include"
    return None


def _include_options(lib: NvrtcLibrary) -> tuple[list[str], str | None]:
    """(-I options, why there are none) for a source with an `#include`."""
    if lib.has_bundled_headers:
        directory = headers_root() / f"{lib.version[0]}.{lib.version[1]}"
        problem = lib.install_bundled_headers(directory)
        if problem is not None:  # an unwritable cache directory: extract to a private temp dir
            directory = (
                Path(tempfile.gettempdir()) / f"fuser-workbench-{getattr(os, 'getuid', lambda: 0)()}" / directory.name
            )
            problem = lib.install_bundled_headers(directory)
        if problem is None:
            return [f"-I{directory}", f"-I{directory / 'cccl'}"], None
        return [], problem
    toolkit = _toolkit_include_dir(lib.path)
    if toolkit is not None:
        return [f"-I{toolkit}"], None
    return [], (
        f"NVRTC {lib.version[0]}.{lib.version[1]} at {lib.path} bundles no headers and no CUDA toolkit"
        " include directory was found next to it"
    )


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
    NvrtcNotFoundError when there is no NVRTC. Include directories for the CUDA headers
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
    includes, include_problem = _include_options(lib) if "#include" in source else ([], None)
    start = time.perf_counter()
    status, log, ptx, cubin, lowered = lib.compile(
        source.encode(), filename.encode(), names, [arch_option, *options, *includes]
    )
    seconds = time.perf_counter() - start
    if status != _NVRTC_SUCCESS:
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


def _load_kernel(module: Any, name: str, symbol: str, kind: str, cuda_driver: Any) -> LoadedKernel:
    function = module.get_function(symbol)
    attributes = {key: int(cuda_driver.funcGetAttribute(code, function.ptr)) for key, code in _FUNC_ATTRIBUTES.items()}
    return LoadedKernel(name=name, symbol=symbol, function=function, loaded_from=kind, **attributes)
