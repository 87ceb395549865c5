"""A stand-in for CuPy and the GPU, enough for the cuda backend to run a fusion on the
host: arrays are NumPy arrays that CuPy's module name and `.data.ptr` make look like
CuPy's, NVRTC compiles nothing, and a launch runs nothing.

A kernel can be made to fault the way CUDA faults: `device.fault("..._g1")` makes its
launch succeed and leave the context poisoned, so the error is reported by the next
CUDA call (a launch, a synchronization, a copy between host and device), and by every
call after it (a sticky fault), as CuPy reports it, with its exception types' names and
texts. Allocations come from CuPy's memory pool, which calls no CUDA here.
`device.refuse("..._g0")` makes the launch itself fail, as a launch CUDA refuses does,
and leaves the context usable.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from fuser_core.codegen.interpreter import TensorBinding, interpret
from fuser_core.codegen.magic_division import MagicDivisor
from fuser_core.runtime import cuda_backend, launch_errors
from fuser_core.runtime.cuda_backend import CudaExecutable
from fuser_core.runtime.generated_group import GeneratedGroup, _Compiled
from fuser_core.runtime.packed_args import PackedArgs
from fuser_core.scheduler.device import select_device

MISALIGNED = "CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address"
MISALIGNED_RUNTIME = "cudaErrorMisalignedAddress: misaligned address"
INVALID_VALUE = "CUDA_ERROR_INVALID_VALUE: invalid argument"


class CUDADriverError(RuntimeError):
    """Shaped like cupy.cuda.driver.CUDADriverError: a status and `NAME: description`."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


class CUDARuntimeError(RuntimeError):
    """Shaped like cupy.cuda.runtime.CUDARuntimeError."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


@dataclass
class FakeDevice:
    """What the fake GPU was asked to do, and the faults it was told to make."""

    faulty: set[str] = field(default_factory=set)  # kernels whose run faults (asynchronously); "*": any
    refused: set[str] = field(default_factory=set)  # kernels whose launch CUDA refuses
    poisoned: bool = False
    calls: list[str] = field(default_factory=list)  # "launch NAME", "synchronize", "get", ...
    names: dict[int, str] = field(default_factory=dict)  # function pointer -> kernel name
    cooperative: list[str] = field(default_factory=list)  # kernels launched cooperatively, in order
    resident_per_sm: int = 64  # what the occupancy calculator says any kernel fits an SM
    sm_count: int = 132
    _pointers: Any = field(default_factory=lambda: itertools.count(0x1000, 0x10))

    def fault(self, name: str) -> None:
        self.faulty.add(name)

    def refuse(self, name: str) -> None:
        self.refused.add(name)

    def allocate(self, call: str) -> None:
        """An allocation from the memory pool: no CUDA call, so nothing is reported."""
        self.calls.append(call)

    def check(self, call: str, runtime: bool = True) -> None:
        """A CUDA call: a poisoned context reports its fault (every time: it is sticky)."""
        self.calls.append(call)
        if self.poisoned:
            raise CUDARuntimeError(716, MISALIGNED_RUNTIME) if runtime else CUDADriverError(716, MISALIGNED)

    def restart(self) -> None:
        """A fresh process: a usable context, and no fault on record."""
        self.poisoned = False
        self.faulty.clear()
        launch_errors._LOST[0] = None
        launch_errors._LATEST[0] = None

    def launch(self, function: int, *args: Any) -> None:
        name = self.names[function]
        self.check(f"launch {name}", runtime=False)
        if name in self.refused:
            raise CUDADriverError(1, INVALID_VALUE)
        if name in self.faulty or "*" in self.faulty:
            self.poisoned = True  # the kernel faults while it runs: reported later

    def launch_cooperative(self, function: int, *args: Any) -> None:
        self.launch(function, *args)
        self.cooperative.append(self.names[function])

    def resident(self, function: int, threads: int, dynamic_shared: int) -> int:
        self.check(f"occupancy {self.names[function]}", runtime=False)
        return self.resident_per_sm

    def function(self, name: str) -> SimpleNamespace:
        ptr = next(self._pointers)
        self.names[ptr] = name
        return SimpleNamespace(function=SimpleNamespace(ptr=ptr), num_regs=32, local_size_bytes=0)

    def launched(self) -> list[str]:
        return [c.split(" ", 1)[1] for c in self.calls if c.startswith("launch ")]


class FakeArray(np.ndarray):
    """A NumPy array that the backend takes for a CuPy array."""

    __module__ = "cupy"
    fake_device: FakeDevice | None = None
    gpu = 0  # the GPU it is on, as CuPy's `array.data.device_id`

    def __array_finalize__(self, obj: Any) -> None:
        self.fake_device = getattr(obj, "fake_device", None)

    @property
    def data(self) -> Any:  # type: ignore[override]
        """CuPy's MemoryPointer: one per array, kept, into the memory of the array it views."""
        found = self.__dict__.get("_memory_pointer")
        if found is None:
            base = self.base if isinstance(self.base, FakeArray) else None
            memory = base.data.mem if base is not None else SimpleNamespace()
            found = SimpleNamespace(ptr=self.ctypes.data, device_id=self.gpu, mem=memory)
            self.__dict__["_memory_pointer"] = found
        return found

    @property
    def device(self) -> Any:  # type: ignore[override]
        return SimpleNamespace(id=self.gpu)  # CuPy's Device

    def get(self) -> np.ndarray:
        assert self.fake_device is not None
        self.fake_device.check("get")
        return np.array(self)


def fake_cupy(device: FakeDevice) -> ModuleType:
    """The `cupy` module the backend imports: arrays, streams and the driver's launch."""

    def wrap(array: np.ndarray, call: str) -> FakeArray:
        (device.check if call == "asarray" else device.allocate)(call)
        out = array.view(FakeArray)
        out.fake_device = device
        return out

    stream = SimpleNamespace(ptr=7, synchronize=lambda: device.check("synchronize"))
    cupy = ModuleType("cupy")
    cupy.asarray = lambda host: wrap(np.array(host), "asarray")  # type: ignore[attr-defined]
    cupy.empty = lambda shape, dtype: wrap(np.zeros(shape, dtype), "empty")  # type: ignore[attr-defined]
    cupy.zeros = lambda shape, dtype: wrap(np.zeros(shape, dtype), "zeros")  # type: ignore[attr-defined]
    cupy.broadcast_to = lambda a, shape: wrap(np.broadcast_to(a, shape), "broadcast_to")  # type: ignore[attr-defined]
    driver = ModuleType("cupy.cuda.driver")
    driver.launchKernel = device.launch  # type: ignore[attr-defined]
    driver.launchCooperativeKernel = device.launch_cooperative  # type: ignore[attr-defined]
    driver.occupancyMaxActiveBlocksPerMultiprocessor = device.resident  # type: ignore[attr-defined]
    driver.CUDADriverError = CUDADriverError  # type: ignore[attr-defined]
    runtime = ModuleType("cupy.cuda.runtime")
    runtime.CUDARuntimeError = CUDARuntimeError  # type: ignore[attr-defined]
    runtime.getDeviceProperties = _no_properties  # type: ignore[attr-defined]
    cuda = ModuleType("cupy.cuda")
    cuda.driver = driver  # type: ignore[attr-defined]
    cuda.runtime = runtime  # type: ignore[attr-defined]
    cuda.get_current_stream = lambda: stream  # type: ignore[attr-defined]
    cuda.alloc = lambda n: device.allocate("alloc")  # type: ignore[attr-defined]
    cuda.Device = lambda: SimpleNamespace(id=0, attributes={"MultiProcessorCount": device.sm_count})  # type: ignore[attr-defined]
    cupy.cuda = cuda  # type: ignore[attr-defined]
    # The fast path's outputs: cupy.ndarray(shape, dtype, memory[, strides]), with the
    # strides asked for (0 along an expanded axis), else in C order.
    cupy.ndarray = lambda shape, dtype, memory, strides=None: wrap(  # type: ignore[attr-defined]
        _strided(shape, dtype, strides) if strides is not None else np.zeros(shape, dtype), "ndarray"
    )
    return cupy


def _strided(shape: Any, dtype: Any, strides: Any) -> np.ndarray:
    """A zeroed array of `shape` with byte `strides`, over just the memory they reach."""
    itemsize = np.dtype(dtype).itemsize
    elements = 1 + sum((n - 1) * s // itemsize for n, s in zip(shape, strides, strict=True)) if all(shape) else 1
    return np.lib.stride_tricks.as_strided(np.zeros(max(elements, 1), dtype), tuple(shape), tuple(strides))


def _no_properties(device_id: int) -> Any:
    raise CUDARuntimeError(100, "cudaErrorNoDevice: no CUDA-capable device is detected")


def install(monkeypatch: Any, device: FakeDevice) -> ModuleType:
    """Make `import cupy` find the fake, and compile every kernel into a fake function.
    The process-wide record of faults (the last unsynchronized launches, a lost context)
    starts empty and is put back afterwards."""
    monkeypatch.setattr(launch_errors, "_LATEST", [None])
    monkeypatch.setattr(launch_errors, "_LOST", [None])
    cupy = fake_cupy(device)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.driver", cupy.cuda.driver)

    def compiled(self: GeneratedGroup, vectorized: bool) -> _Compiled:
        found = self._compiled.get(vectorized)
        if found is None:
            module = SimpleNamespace(cache_hit=True, cache="fake", compile_seconds=0.0)
            found = _Compiled(device.function(self.kernel.name), module, PackedArgs(self.kernel))
            self._compiled[vectorized] = found
        return found

    monkeypatch.setattr(GeneratedGroup, "compiled", compiled)
    return cupy


def interpret_launches(monkeypatch: Any, device: FakeDevice, cupy: ModuleType) -> None:
    """Make every launch also run its kernel on the kernel-IR interpreter, over the memory
    its packed arguments point to (the fake device's arrays): what the runtime packed is
    what the kernel reads."""
    packed_at: dict[int, PackedArgs] = {}
    post_init = PackedArgs.__post_init__

    def remember(self: PackedArgs) -> None:
        post_init(self)
        packed_at[self.address] = self

    def interpreting_launch(function, gx, gy, gz, bx, by, bz, shared, stream, address, extra) -> None:
        device.launch(function, gx, gy, gz, bx, by, bz, shared, stream, address, extra)
        _interpret(packed_at[address], (gx, gy, gz), (bx, by, bz))

    def interpreting_cooperative(function, gx, gy, gz, bx, by, bz, shared, stream, address) -> None:
        device.launch_cooperative(function, gx, gy, gz, bx, by, bz, shared, stream, address)
        _interpret(packed_at[address], (gx, gy, gz), (bx, by, bz))

    monkeypatch.setattr(PackedArgs, "__post_init__", remember)
    monkeypatch.setattr(cupy.cuda.driver, "launchKernel", interpreting_launch)
    monkeypatch.setattr(cupy.cuda.driver, "launchCooperativeKernel", interpreting_cooperative)


def interpreted_device(monkeypatch: Any) -> FakeDevice:
    """A fake device installed in place of CuPy whose launches also run on the kernel-IR
    interpreter (interpret_launches)."""
    device = FakeDevice()
    interpret_launches(monkeypatch, device, install(monkeypatch, device))
    return device


def _interpret(packed: PackedArgs, grid: Any, block: Any) -> None:
    kernel = packed.kernel
    tensors = {}
    for t, struct in zip(kernel.tensors, packed.structs, strict=False):
        sizes = tuple(struct.logical_size[: t.ndim])
        strides = tuple(struct.alloc_stride[: t.alloc_ndim])
        # Logical and allocation axes are the same here (no stride order): the extent of
        # the memory is the largest offset plus one.
        elements = 1 + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) if all(sizes) else 0
        # ctypes has no bfloat16: such memory is read as unsigned integers of its width
        words = np.dtype(t.dtype.numpy) if np.dtype(t.dtype.numpy).kind != "V" else np.dtype(f"u{t.dtype.itemsize}")
        ctype = np.ctypeslib.as_ctypes_type(words)
        raw = np.ctypeslib.as_array((ctype * max(elements, 1)).from_address(struct.data))
        storage = raw.view(t.dtype.numpy)
        tensors[t.name] = TensorBinding(storage, sizes, strides)
    scalars = {s.name: value.value for s, value in zip(kernel.scalars, packed.scalars, strict=True)}
    divisors = {
        d.name: MagicDivisor(s.divisor, s.magic, s.shift) for d, s in zip(kernel.divisors, packed.divisors, strict=True)
    }
    interpret(kernel, tensors, scalars, grid, block, divisors=divisors)


class FakeCudaBackend:
    """The cuda backend on the fake device (CudaBackend itself asks CuPy for a GPU)."""

    name = "cuda"

    def __init__(self, device: Any = None) -> None:
        self.device = device if device is not None else select_device("h100_sxm")

    def compile(self, segmented: Any, signature: Any, runtime_name: str = "f0_c0_r0") -> CudaExecutable:
        return cuda_backend.CudaExecutable(segmented, signature, runtime_name, self.device)


def on_device(device: FakeDevice, host: np.ndarray) -> FakeArray:
    """A caller's CuPy array on the fake device (an input the fast path takes)."""
    out = np.array(host).view(FakeArray)
    out.fake_device = device
    return out
