"""Finding and opening libnvrtc, with no CuPy: its ctypes entry points, its version and
architectures, and the CUDA headers it brings.

NVRTC is searched for in: the `nvidia-cuda-nvrtc` wheel of the dev extra (it installs
`site-packages/nvidia/cu13/lib/libnvrtc.so.13` and its `libnvrtc-builtins`), a CUDA
toolkit (`CUDA_PATH`, `CUDA_HOME`, the `nvcc` on PATH, as CuPy's `get_cuda_path` looks),
the standard system directories, then the dynamic loader (`ctypes.util.find_library`).
`FUSER_NVRTC_LIBRARY=/path/to/libnvrtc.so` replaces the search (only that file is tried).
No loadable library is a `NvrtcNotFoundError` that lists every place searched.

CUDA headers: NVRTC 13.3 and later bundle the toolkit's headers (cuda_fp16.h, cuda_bf16.h,
cuda_fp8.h, CCCL's cuda/std/...) in libnvrtc-builtins. When a source has an `#include`,
they are extracted once per NVRTC version under the user's cache directory and put on the
include path. Older NVRTCs get the include directory of the toolkit they came with, if any.

`fuser_core.runtime.nvrtc` compiles with the library found here.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuser_core.errors import FuserError

LIBRARY_ENV = "FUSER_NVRTC_LIBRARY"

NVRTC_SUCCESS = 0
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
        if code != NVRTC_SUCCESS:
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
            if status != NVRTC_SUCCESS:
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
        if status != NVRTC_SUCCESS and optional:
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
        if status != NVRTC_SUCCESS:
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
    if handle.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != NVRTC_SUCCESS:
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


def include_options(lib: NvrtcLibrary) -> tuple[list[str], str | None]:
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
