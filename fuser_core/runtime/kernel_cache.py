"""Compiled kernels, cached in this process and on disk, so a re-opened fusion compiles nothing.

    >>> from fuser_core.runtime.kernel_cache import compile_kernel
    >>> module = compile_kernel(source, "nvfuser_pointwise_f0_c1_r0_g0", arch="sm_90")
    >>> module.cache  # "compiled", then "memory" in this process, "disk" in the next one

The key is the sha256 of the source, the architecture, the NVRTC version, the options, the
kernel names and what `#include <cuda_fp16.h>` resolves to (`nvrtc_library.header_source`). An
entry is one file, `<dir>/<key[:2]>/<key>.kernel`, written to a temporary file in the same
directory and renamed into place, so a reader never sees half an entry. An entry that is
unreadable, truncated, fails its checksum or belongs to another key is compiled again and
rewritten, never an error; a directory that cannot be written only costs the caching.

The directory is `$FUSER_KERNEL_CACHE`, else `$XDG_CACHE_HOME/fuser-workbench/kernels`,
else `~/.cache/fuser-workbench/kernels`; `FUSER_KERNEL_CACHE=off` (or `0`) disables the
disk cache. A hit on either level calls no NVRTC compile function (only `nvrtcVersion`,
once per process, for the key).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from fuser_core.runtime import nvrtc, nvrtc_library
from fuser_core.runtime.nvrtc import DEFAULT_FILENAME, DEFAULT_OPTIONS, CompiledModule

CACHE_ENV = "FUSER_KERNEL_CACHE"
DISABLED_VALUES = ("off", "0")
FORMAT = 1  # bump when the entry layout or the key material changes
_MAGIC = b"FUSERKERNEL\x00"
_LENGTH = struct.Struct("<Q")


def default_cache_dir() -> Path | None:
    """The on-disk cache directory from the environment; None when the disk cache is off."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    if configured.lower() in DISABLED_VALUES:
        return None
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fuser-workbench" / "kernels"


def cache_key(
    source: str,
    arch: str,
    nvrtc_version: tuple[int, int],
    options: Sequence[str],
    names: Sequence[str] = (),
    headers: str = "",
    filename: str = DEFAULT_FILENAME,
) -> str:
    """sha256 (hex) of everything that decides what NVRTC produces."""
    material = {
        "format": FORMAT,
        "source": source,
        "arch": arch,
        "nvrtc": list(nvrtc_version),
        "options": list(options),
        "names": list(names),
        "headers": headers,
        "filename": filename,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


class CorruptEntry(Exception):
    """A disk entry that cannot be used; the message says why."""


def encode_entry(module: CompiledModule) -> bytes:
    """One entry: magic, header length, JSON header (metadata and payload checksum), PTX, CUBIN."""
    ptx = module.ptx.encode()
    cubin = module.cubin or b""
    header = asdict(module)
    del header["ptx"], header["cubin"], header["cache"], header["cache_note"]
    header.update(
        lowered_names=dict(module.lowered_names),
        ptx_bytes=len(ptx),
        cubin_bytes=len(cubin) if module.cubin is not None else -1,
        payload_sha256=hashlib.sha256(ptx + cubin).hexdigest(),
    )
    encoded = json.dumps(header, sort_keys=True).encode()
    return _MAGIC + _LENGTH.pack(len(encoded)) + encoded + ptx + cubin


def decode_entry(data: bytes, key: str) -> CompiledModule:
    """The module of an entry; CorruptEntry when anything about it is off."""
    if not data.startswith(_MAGIC):
        raise CorruptEntry("not a kernel cache entry (bad magic)")
    at = len(_MAGIC)
    try:
        (length,) = _LENGTH.unpack_from(data, at)
        header: dict[str, Any] = json.loads(data[at + _LENGTH.size : at + _LENGTH.size + length])
        payload = data[at + _LENGTH.size + length :]
        ptx_bytes, cubin_bytes = int(header["ptx_bytes"]), int(header["cubin_bytes"])
        if len(payload) != ptx_bytes + max(cubin_bytes, 0):
            raise CorruptEntry(f"truncated: {len(payload)} payload bytes, expected {ptx_bytes + max(cubin_bytes, 0)}")
        if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
            raise CorruptEntry("checksum mismatch")
        if header["key"] != key:
            raise CorruptEntry(f"entry of another key ({header['key'][:12]}...)")
        return CompiledModule(
            names=tuple(header["names"]),
            lowered_names=dict(header["lowered_names"]),
            arch=str(header["arch"]),
            options=tuple(header["options"]),
            ptx=payload[:ptx_bytes].decode(),
            cubin=payload[ptx_bytes:] if cubin_bytes >= 0 else None,
            log=str(header["log"]),
            compile_seconds=float(header["compile_seconds"]),
            nvrtc_version=(int(header["nvrtc_version"][0]), int(header["nvrtc_version"][1])),
            key=key,
            cache="disk",
        )
    except CorruptEntry:
        raise
    except (ValueError, KeyError, TypeError, IndexError, struct.error, UnicodeDecodeError) as err:
        raise CorruptEntry(f"unreadable header: {type(err).__name__}: {err}") from err


class KernelCache:
    """The in-process dict in front of the on-disk directory.

    `directory=None` follows the environment at each call (default_cache_dir);
    `disk=False` keeps the cache in memory only. `compiles` counts NVRTC compiles made
    through this cache, `disk_hits` and `memory_hits` the hits.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, disk: bool = True) -> None:
        self._directory = Path(directory) if directory is not None else None
        self._disk = disk
        self._memory: dict[tuple[Any, ...], CompiledModule] = {}
        self._lock = threading.Lock()
        self.compiles = 0
        self.memory_hits = 0
        self.disk_hits = 0

    @property
    def directory(self) -> Path | None:
        if not self._disk:
            return None
        return self._directory if self._directory is not None else default_cache_dir()

    def entry_path(self, key: str) -> Path | None:
        directory = self.directory
        return None if directory is None else directory / key[:2] / f"{key}.kernel"

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()

    def compile(
        self,
        source: str,
        names: str | Sequence[str] = (),
        *,
        arch: str = "sm_90",
        options: Sequence[str] = DEFAULT_OPTIONS,
        filename: str = DEFAULT_FILENAME,
    ) -> CompiledModule:
        """nvrtc.compile_program, unless this process or the disk has the result already."""
        names = (names,) if isinstance(names, str) else tuple(names)
        options = tuple(options)
        memory_key = (source, arch, options, names, filename)
        found = self._memory.get(memory_key)  # entries are stored as their memory hit
        if found is not None:
            self.memory_hits += 1
            return found

        lib = nvrtc_library.load_nvrtc()
        key = cache_key(source, arch, lib.version, options, names, nvrtc_library.header_source(lib), filename)
        path = self.entry_path(key)
        note = ""
        if path is not None:
            module, note = self._read(path, key)
            if module is not None:
                with self._lock:
                    self.disk_hits += 1
                    self._memory[memory_key] = replace(module, cache="memory")
                return module

        module = nvrtc.compile_program(source, names, arch=arch, options=options, filename=filename)
        module = replace(module, key=key, cache="compiled", cache_note=note)
        with self._lock:
            self.compiles += 1
            self._memory[memory_key] = replace(module, cache="memory", cache_note="")
        if path is not None:
            self._write(path, module)
        return module

    @staticmethod
    def _read(path: Path, key: str) -> tuple[CompiledModule | None, str]:
        """(module, "") on a hit; (None, why it was unusable) or (None, "") when absent."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None, ""
        except OSError as err:
            return None, f"disk entry {path} unreadable ({err}); recompiled"
        try:
            return decode_entry(data, key), ""
        except CorruptEntry as err:
            return None, f"disk entry {path} unusable ({err}); recompiled"

    @staticmethod
    def _write(path: Path, module: CompiledModule) -> None:
        """Atomically: a temporary file in the same directory, renamed over the entry."""
        temporary: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(descriptor, "wb") as file:
                file.write(encode_entry(module))
            os.replace(temporary, path)
            temporary = None
        except OSError as err:
            warnings.warn(f"kernel cache: could not write {path}: {err}", RuntimeWarning, stacklevel=3)
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)


_default_cache = KernelCache()


def default_cache() -> KernelCache:
    """The process-wide cache compile_kernel uses: one dict, the directory from the environment."""
    return _default_cache


def compile_kernel(
    source: str,
    names: str | Sequence[str] = (),
    *,
    arch: str | Any = "sm_90",
    options: Sequence[str] = DEFAULT_OPTIONS,
    filename: str = DEFAULT_FILENAME,
    cache: KernelCache | None = None,
) -> CompiledModule:
    """Compile through the cache. `arch` is "sm_90", a compute capability `(9, 0)`, or a
    DeviceProperties (nvrtc.arch_for picks the architecture). Raises what
    nvrtc.compile_program raises."""
    if not isinstance(arch, str):
        arch = nvrtc.arch_for(arch)
    return (cache or _default_cache).compile(source, names, arch=arch, options=options, filename=filename)
