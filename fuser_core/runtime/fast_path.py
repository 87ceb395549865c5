"""The cache-hit fast path of the cuda backend: a call whose inputs have the sizes,
strides and dtypes of an earlier call replays what that call worked out.

Everything that depends only on those (output shapes and strides, launch dimensions,
the packed size, stride and divisor fields of every kernel argument) is computed once,
when the plan is made; a call reads each input's data pointer, allocates the outputs
with the caller's framework (torch tensors for torch inputs, CuPy arrays otherwise, so
no DLPack exchange; a CuPy output the caller has dropped is given again:
RecycledOutput), writes the pointers into the packed arguments and launches. The only
per-call decision is the vector alignment of the pointers, which picks the vectorized
kernel or its scalar fallback. A plan's replay is Python generated for it (`plan.source`
shows it): straight-line code with every constant bound, since a cache hit's host time
is what the fast path is for. `guard_lines` generates the test that inputs have a plan's
key without making the key, for the executor cache's replay of its last plan.

A CUDA error of a replay (a refused launch, or a fault of an earlier kernel that CUDA
reports at a launch or an allocation) is a CudaFaultError naming the kernels the replay
had launched; a replay that succeeds leaves them in the executable's LaunchLog, for a
fault that a later synchronization reports. Neither costs a replay more than an
assignment or two: the replay never synchronizes.

A kernel's workspaces (grid reduction work buffers and semaphores) are allocated when
the plan is made, sized from its launch, and their pointers written into the packed
arguments then (for the fallback, when it is first packed); the plan keeps the buffers
alive, and a replay never writes those pointers. Semaphores start zeroed and every
launch leaves them zeroed, so one buffer serves every replay.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import itertools
import linecache
import sys
import sysconfig
import weakref
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from math import copysign
from typing import Any

import numpy as np

from fuser_core.ir.dtype import DataType
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.artifacts import LaunchParams
from fuser_core.runtime.launch_errors import FaultKernel, LaunchLog, is_cuda_error
from fuser_core.scheduler.device import DeviceProperties

_TORCH_DTYPES = {
    DataType.Float: "float32",
    DataType.Double: "float64",
    DataType.Half: "float16",
    DataType.BFloat16: "bfloat16",
    DataType.Bool: "bool",
    DataType.Int: "int64",
    DataType.Int32: "int32",
}


def input_key(inputs: Sequence[Any]) -> tuple[Any, ...] | None:
    """Sizes, strides and dtypes of tensor inputs and values of scalars; None for
    inputs the fast path does not take (host arrays, odd types). `input_guard` must
    agree with it."""
    key: list[Any] = []
    for x in inputs:
        module = type(x).__module__
        if module.startswith("torch"):
            if not x.is_cuda:
                return None
            # The device too: a plan's pointers and launch belong to one GPU.
            key.append((x.dtype, x.shape, x.stride(), x.get_device()))
        elif module.startswith("cupy"):
            key.append((x.dtype, x.shape, x.strides, x.data.device_id))  # (x.device makes a Device)
        elif isinstance(x, float):  # the sign too: -0.0 == 0.0, and 1 / -0.0 is -inf
            key.append((float, x, copysign(1.0, x)))
        elif isinstance(x, bool | int):
            key.append((type(x), x))
        else:
            return None
    return tuple(key)


def input_guard(inputs: Sequence[Any]) -> Callable[[Sequence[Any]], bool] | None:
    """A test that other inputs have the `input_key` of these (None where these have
    none): `guard_lines` as a function."""
    guard = guard_lines(inputs, "False")
    if guard is None:
        return None
    lines, names = guard
    return generated("accepts", "\n".join(["def accepts(inputs):", *lines, "    return True"]), names)  # type: ignore[no-any-return]


def guard_lines(inputs: Sequence[Any], miss: str) -> tuple[list[str], dict[str, Any]] | None:
    """Lines of a generated function of `inputs` (see `generated`) that return `miss`
    unless its inputs have the `input_key` of these, and the names they use; None where
    these have no key. Cheaper than making the key: each input's fields are compared
    with these values in place, and each input must be of the same type (a subclass is
    refused, and goes the way of `input_key`)."""
    key = input_key(inputs)
    if key is None:
        return None
    names: dict[str, Any] = {}
    lines = [f"    if len(inputs) != {len(inputs)}:", f"        return {miss}"]
    for p, (x, part) in enumerate(zip(inputs, key, strict=True)):
        names[f"type_{p}"] = type(x)
        checks = [f"type(x{p}) is type_{p}"]
        if type(x).__module__.startswith("torch"):
            names[f"dtype_{p}"], names[f"shape_{p}"], names[f"strides_{p}"], names[f"device_{p}"] = part
            checks += [f"x{p}.shape == shape_{p}", f"x{p}.stride() == strides_{p}", f"x{p}.dtype == dtype_{p}"]
            checks.append(f"x{p}.get_device() == device_{p}")  # -1 for a host tensor: never equal
        elif type(x).__module__.startswith("cupy"):
            names[f"dtype_{p}"], names[f"shape_{p}"], names[f"strides_{p}"], names[f"device_{p}"] = part
            checks += [f"x{p}.shape == shape_{p}", f"x{p}.strides == strides_{p}", f"x{p}.dtype == dtype_{p}"]
            checks.append(f"x{p}.data.device_id == device_{p}")
        else:
            names[f"value_{p}"] = part[1]
            checks.append(f"x{p} == value_{p}")
            if len(part) == 3:  # a float: its sign too (input_key)
                names["copysign"], names[f"sign_{p}"] = copysign, part[2]
                checks.append(f"copysign(1.0, x{p}) == sign_{p}")
        lines += [f"    x{p} = inputs[{p}]", f"    if not ({' and '.join(checks)}):", f"        return {miss}"]
    return lines, names


@dataclass
class PlannedOutput:
    name: int  # tensor name
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    dtype: DataType


@dataclass
class PlannedLaunch:
    function: Any  # vectorized kernel (or the only one)
    fallback: Any  # (function, packed) of the scalar fallback, compiled on first need; None if not vectorized
    packed: Any
    params: LaunchParams
    sources: list[tuple[str, int]]  # per tensor parameter: ("input", position) or ("tensor", name)
    checks: list[tuple[int, int]]  # (parameter position, byte alignment) for vectorized tensors
    outputs: list[PlannedOutput]
    # The device buffers the packed workspace pointers point into (by workspace), kept
    # alive here; the fallback adds its own when it is first packed.
    workspaces: dict[Any, Any] = field(default_factory=dict)
    kernel: FaultKernel | None = None  # how a CUDA error names this launch


class FastPlan:
    log: LaunchLog | None = None  # the executable's: the kernels launched and not synchronized
    # The stream whose launches alone may use the plan's workspace buffers (a grid
    # reduction's work and semaphores), by pointer; None for a plan without any.
    stream_bound: int | None = None
    # The replay: `run(inputs, stream_ptr)` launches the plan on these inputs (those of
    # the key it was made for) and returns its outputs. Generated for the plan (see
    # _replay_source), so that it does no more per call than its launches need.
    run: Callable[[Sequence[Any], int], list[Any]]

    def __init__(
        self,
        launches: list[PlannedLaunch],
        results: list[int],
        torch_out: bool,
        device: DeviceProperties,
        log: LaunchLog | None = None,
        inputs: Sequence[Any] = (),
        launch_kernel: Any = None,
        launch_cooperative: Any = None,
        result_shapes: Sequence[tuple[int, ...] | None] = (),
    ) -> None:
        """`results`: the tensors (by name) the call returns; `result_shapes`: for each, the
        shape it is returned in where it is a view of that tensor (a no_op group's reshape of a
        kernel's output), else None; `inputs`: the call's arguments the plan is made for
        (each tensor's framework says how a replay reads its pointer); `launch_kernel` and
        `launch_cooperative`: CuPy's cuLaunchKernel and cuLaunchCooperativeKernel unless
        given (tests), each on its own: a cooperative kernel never launches through None."""
        self.launches = launches
        self.log = log
        self._kernels = tuple(launch.kernel for launch in launches if launch.kernel is not None and _launched(launch))
        self.torch_out = torch_out
        self.device = device
        self.fell_back: list[int] = []  # launches of the last call that took the scalar fallback
        cooperative = any(launch.packed.kernel.cooperative for launch in launches if _launched(launch))
        if launch_kernel is None or (launch_cooperative is None and cooperative):
            from cupy.cuda import driver  # the plan exists only where CuPy runs kernels

            launch_kernel = launch_kernel or driver.launchKernel
            launch_cooperative = launch_cooperative or driver.launchCooperativeKernel
        self._launch_kernel = launch_kernel
        self._launch_cooperative = launch_cooperative
        # Torch's own lower-overhead allocator (what Inductor's generated code calls: 1.0 us a
        # call on an H100's host, where torch.empty_strided takes 2.1, a cache hit's largest
        # cost with torch inputs) allocates on the current device: a replay takes it only
        # while that is the plan's.
        self._torch_fast_empty: Any = None
        if torch_out:
            torch = sys.modules["torch"]
            self._torch_empty = torch.empty_strided
            self.torch_device = torch.device("cuda", torch.cuda.current_device())
            self._torch_dtypes = {d: getattr(torch, name) for d, name in _TORCH_DTYPES.items()}
            # It skips what torch.empty_strided's dispatch adds: a TorchDispatchMode, the
            # profiler's aten::empty_strided event, and under deterministic algorithms the
            # fill of uninitialized memory (every output element is written by a kernel).
            internals = getattr(torch, "_C", None)
            guards = getattr(getattr(internals, "_dynamo", None), "guards", None)
            self._torch_get_device = getattr(internals, "_cuda_getDevice", None)
            if self._torch_get_device is not None:
                self._torch_fast_empty = getattr(guards, "_empty_strided_cuda", None)
        # The replay names pointers by slot (its local p<slot>): the inputs' by position,
        # read as their framework says, then each output's as it is allocated; each
        # launch reads its tensor arguments by slot.
        self._input_kinds = [
            "torch" if hasattr(x, "data_ptr") else "cupy" if hasattr(x, "data") else "" for x in inputs
        ]
        torch_inputs = [p for p, kind in enumerate(self._input_kinds) if kind == "torch"]
        # Outputs the caller can take as they are: torch tensors on the device of the first
        # torch input (where the full path puts them), or CuPy arrays for CuPy inputs; with
        # no tensor input at all (iota) the frontend chooses the outputs' framework.
        if torch_out:
            self.final = inputs[torch_inputs[0]].get_device() == self.torch_device.index
        else:
            self.final = "cupy" in self._input_kinds
        slot_of = {("input", p): p for p in range(len(inputs))}
        # per launch: (slot, planned output, allocator) of each output
        self._outputs: list[list[tuple[int, PlannedOutput, Any]]] = []
        for launch in launches:
            allocated = []
            for out in launch.outputs:
                slot_of[("tensor", out.name)] = len(slot_of)
                allocated.append((slot_of[("tensor", out.name)], out, self._allocator(out)))
            self._outputs.append(allocated)
        self._sources = [[slot_of[source] for source in launch.sources] for launch in launches]
        self._results = [slot_of[("tensor", name)] for name in results]
        self._result_shapes = list(result_shapes) or [None] * len(results)
        lines, names = self._replay_source()
        self.source = "\n".join(lines)  # what `run` does, for a reader
        self.run = generated("run", self.source, names)
        self.source_elsewhere = ""  # with the fast torch allocator: the replay it falls back to
        if self._torch_fast_empty is not None:
            self._run_elsewhere = self.run  # torch.empty_strided, on the plan's device
            self.source_elsewhere = self.source
            lines, names = self._replay_source(fast_torch_empty=True)
            self.source = "\n".join(lines)
            self.run = generated("run", self.source, names)

    def _replay_source(self, fast_torch_empty: bool = False) -> tuple[list[str], dict[str, Any]]:
        """The source of `run` and the objects it names; with `fast_torch_empty`, torch
        outputs come from torch's lower-overhead allocator, and a call made while another
        device is current goes to the replay without it.

        Per launch, in order: allocate its outputs and read their pointers, pick the
        vectorized kernel or (a pointer misaligned for its vector width) the scalar
        fallback, write the pointers into its packed arguments, launch. `stage` says,
        for a CUDA error, which launch was under way (stage // 2) and whether its launch
        call was in flight (an odd stage)."""
        names: dict[str, Any] = {
            "plan": self,
            "launch_kernel": self._launch_kernel,
            "launch_cooperative": self._launch_cooperative,
        }
        named_log = self.log is not None
        can_fall_back = any(launch.checks for launch in self.launches)  # else fell_back stays []
        head = ["def run(inputs, stream_ptr):"]
        if fast_torch_empty:
            names["current_device"], names["run_elsewhere"] = self._torch_get_device, self._run_elsewhere
            head += [
                f"    if current_device() != {int(self.torch_device.index)}:",
                "        return run_elsewhere(inputs, stream_ptr)",
            ]
        if can_fall_back:
            head += ["    if plan.fell_back:", "        plan.fell_back = []"]
        used = {slot for sources in self._sources for slot in sources}
        for position in sorted(used & set(range(len(self._input_kinds)))):
            pointer = {"torch": "data_ptr()", "cupy": "data.ptr"}.get(self._input_kinds[position])
            head.append(f"    p{position} = inputs[{position}].{pointer}" if pointer else f"    p{position} = 0")
        body: list[str] = []
        read = "data_ptr()" if self.torch_out else "data.ptr"
        for index, (allocated, launch, sources) in enumerate(
            zip(self._outputs, self.launches, self._sources, strict=True)
        ):
            if index and named_log:
                body.append(f"stage = {2 * index}")
            for slot, out, make in allocated:
                names[f"allocate_{slot}"] = self._allocator(out, fast_torch_empty=True) if fast_torch_empty else make
                call = "()" if self.torch_out else "(stream_ptr)"  # a recycled CuPy output: its stream
                body += [f"a{slot} = allocate_{slot}{call}", f"p{slot} = a{slot}.{read}"]
            names[f"function_{index}"], names[f"address_{index}"] = launch.function.ptr, launch.packed.address
            aligned = [f"function, address = function_{index}, address_{index}"]
            for position, (struct, slot) in enumerate(zip(launch.packed.structs, sources, strict=True)):
                names[f"data_{index}_{position}"] = _data_field(struct)
                aligned.append(f"data_{index}_{position}[0] = p{slot}")
            if launch.checks:
                misaligned = " or ".join(f"p{sources[p]} % {int(align)}" for p, align in launch.checks)
                pointers = "".join(f"p{slot}, " for slot in sources).rstrip()
                body += [f"if {misaligned}:", f"    function, address = plan._fall_back({index}, ({pointers}))"]
                body += ["else:", *(f"    {line}" for line in aligned)]
            else:
                body += aligned
            if _launched(launch):
                g, b = (tuple(int(n) for n in dims) for dims in (launch.params.grid, launch.params.block))
                shared = int(launch.params.dynamic_shared_bytes)  # the static part is the function's own
                if named_log:
                    body.append(f"stage = {2 * index + 1}")
                call = f"(function, {g[0]}, {g[1]}, {g[2]}, {b[0]}, {b[1]}, {b[2]}, {shared}, stream_ptr, address"
                cooperative = launch.packed.kernel.cooperative  # its blocks meet at a grid barrier
                body.append(f"launch_cooperative{call})" if cooperative else f"launch_kernel{call}, 0)")
        results = ", ".join(
            f"a{slot}" if shape is None else f"a{slot}.reshape({shape})"
            for slot, shape in zip(self._results, self._result_shapes, strict=True)
        )
        if not named_log:
            return [*head, *(f"    {line}" for line in body), f"    return [{results}]"], names
        names["replayed"], names["kernels"] = self.log.replayed, self._kernels  # type: ignore[union-attr]
        return [
            *head,
            "    stage = 0",
            "    try:",
            *(f"        {line}" for line in body),
            "    except Exception as err:",
            "        fault = plan._fault_of(err, stage)",
            "        if fault is None:",
            "            raise",
            "        raise fault from err",
            f"    replayed(plan._launched_kernels({len(self.launches)}) if plan.fell_back else kernels)"
            if can_fall_back
            else "    replayed(kernels)",
            f"    return [{results}]",
        ], names

    def release_outputs(self) -> None:
        """Let the outputs kept for recycling go: another plan is replayed now."""
        for allocated in self._outputs:
            for _, _, make in allocated:
                if isinstance(make, RecycledOutput):
                    make.release()

    def _fall_back(self, index: int, pointers: tuple[int, ...]) -> tuple[int, int]:
        """Launch `index` takes its scalar fallback this time (packed on first need): its
        tensor arguments pointed at `pointers`; its function pointer and packed address."""
        self.fell_back.append(index)
        function, packed = self.launches[index].fallback()
        for struct, ptr in zip(packed.structs, pointers, strict=True):
            struct.data = ptr
        return function.ptr, packed.address

    def _fault_of(self, err: BaseException, stage: int) -> Exception | None:
        """The CudaFaultError of a replay's error at `stage` (see `_replay_source`); None
        where it is not CUDA's."""
        if self.log is None or not is_cuda_error(err):
            return None
        return self._fault(err, stage // 2, stage % 2 == 1)

    def _launched_kernels(self, count: int) -> tuple[FaultKernel, ...]:
        """How a CUDA error names the first `count` launches of the last replay (those
        that took the scalar fallback as such)."""
        found = []
        for index, launch in enumerate(self.launches[:count]):
            if launch.kernel is None or not _launched(launch):
                continue
            fell_back = index in self.fell_back
            found.append(dataclasses.replace(launch.kernel, form="scalar fallback") if fell_back else launch.kernel)
        return tuple(found)

    def _fault(self, err: BaseException, index: int, in_launch: bool) -> Exception:
        assert self.log is not None
        kernels = self._launched_kernels(index + 1 if in_launch else index)
        return self.log.replay_failed(err, kernels, in_launch)

    def _allocator(self, out: PlannedOutput, fast_torch_empty: bool = False) -> Callable[..., Any]:
        """What allocates `out` at each replay, everything but the allocation worked out now:
        a torch tensor (called with nothing; with `fast_torch_empty`, from torch's
        lower-overhead allocator on the current device), or a CuPy array, recycled where the
        caller dropped the last one (called with the stream: RecycledOutput)."""
        if self.torch_out:
            if fast_torch_empty:  # shape, strides (Python ints) and dtype, positionally
                return functools.partial(
                    self._torch_fast_empty,
                    tuple(int(n) for n in out.shape),
                    tuple(int(n) for n in out.strides),
                    self._torch_dtypes[out.dtype],
                )
            return functools.partial(
                self._torch_empty,
                out.shape,
                out.strides,
                dtype=self._torch_dtypes[out.dtype],
                device=self.torch_device,
            )
        import cupy

        itemsize = out.dtype.itemsize
        storage = np.dtype(np.uint16 if out.dtype == DataType.BFloat16 else out.dtype.numpy)
        nbytes = max(1, span_elements(out.shape, out.strides)) * itemsize
        byte_strides = tuple(st * itemsize for st in out.strides)
        ndarray, alloc, shape = cupy.ndarray, cupy.cuda.alloc, out.shape
        # CuPy's own layout: not passing the strides saves their validation (0.16 us of the
        # 1.75 us an output costs on the H100's host)
        row_major = out.strides == output_strides(shape, range(len(shape)))

        def make() -> Any:
            return (
                ndarray(shape, storage, alloc(nbytes))
                if row_major
                else ndarray(shape, storage, alloc(nbytes), byte_strides)
            )

        return RecycledOutput(make) if RECYCLING and nbytes <= RECYCLED_BYTES else lambda stream_ptr: make()


# Reference counts prove an object unobserved only where they are exact (not in a
# free-threaded build).
RECYCLING = not sysconfig.get_config_var("Py_GIL_DISABLED")
# The largest output recycled. A plan keeps its last one until its next hit, whichever
# sizes come next, so what plans of many shapes hold stays small; past this size the
# kernel writing it takes longer than a hit's host time, which it then hides.
RECYCLED_BYTES = 4 << 20


class RecycledOutput:
    """Makes a plan's CuPy output at each replay, or gives back the one it made last time
    where nothing but this object refers to it any more: not the caller, not a view of it
    (a view refers to its base), not a memory pointer into it (`out.data`, or one offset
    from it, refers to its memory), not a DLPack or `__cuda_array_interface__` consumer (each
    holds the array). Its reference counts, and its pointer's and its memory's, are then
    back to those taken just after it was made. On the same stream only: CuPy's pool would
    give the same memory back on that stream, ordered after what was queued there with
    it, but not to another stream. A cache hit's output allocation is the largest part
    of its host time after the launch (1.76 us of 8.4 on the H100's host). Outputs of up
    to RECYCLED_BYTES only.

    Nor where a weak reference to it is alive, or its shape was set in place: the caller
    would see the object again. A plan's recycled outputs are released when another plan
    of its executor is replayed (FastPlan.release_outputs), so an executor holds those of
    one plan at most.

    Torch outputs are not recycled: a torch view holds its base's storage from C++,
    where no Python reference count shows it."""

    __slots__ = ("_counts", "_last", "_make", "_shape", "_stream")

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._last: Any = None
        self._stream = 0
        self._shape: tuple[int, ...] = ()
        self._counts = (0, 0, 0)

    def __call__(self, stream_ptr: int) -> Any:
        last = self._last
        if last is not None and stream_ptr == self._stream:
            data = last.data
            if (
                (sys.getrefcount(last), sys.getrefcount(data), sys.getrefcount(data.mem)) == self._counts
                and not weakref.getweakrefcount(last)  # a weak reference still sees it
                and last.shape == self._shape  # (CuPy's shape setter reshapes in place)
            ):
                return last
        last = self._make()
        data = last.data
        self._last, self._stream, self._shape = last, stream_ptr, last.shape
        self._counts = (sys.getrefcount(last), sys.getrefcount(data), sys.getrefcount(data.mem))
        return last

    def release(self) -> None:
        """Let the last output go (its plan is no longer the one replayed)."""
        self._last = None


def generated(name: str, source: str, names: dict[str, Any]) -> Any:
    """The function `name` that `source` defines, its free names bound to `names`.

    Why generated code: a cache hit's host time is the product, and straight-line code
    with every constant bound (no loops over the plan's tables, no per-call lists) costs
    a few attribute reads less per argument. Only our own identifiers and integers are
    written into the source; every object it uses is passed in `names`."""
    namespace = dict(names)
    # Its own file name in linecache, so that a traceback through it shows its lines.
    filename = f"<fast path {name} {next(_GENERATED)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


_GENERATED = itertools.count()


def _data_field(struct: Any) -> Any:
    """A one-element ctypes array over the data pointer of a packed tensor argument:
    writing `view[0] = ptr` costs half of `struct.data = ptr` (ctypes' field descriptor)."""
    return (ctypes.c_void_p * 1).from_buffer(struct, type(struct).data.offset)


def span_elements(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements of memory a strided tensor reaches: one past the offset of its last
    element (every axis contributes its own span), 0 for an empty one."""
    if any(size == 0 for size in shape):
        return 0
    return sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True)) + 1


def _launched(launch: PlannedLaunch) -> bool:
    return all(launch.params.grid)


def torch_dtype_supported(dtype: DataType) -> bool:
    return dtype in _TORCH_DTYPES


def output_strides(shape: Sequence[int], alloc_order: Sequence[int], expanded: Collection[int] = ()) -> tuple[int, ...]:
    """Element strides of a tensor contiguous in its allocation order; an `expanded` axis
    (an expanded broadcast) has stride 0 and takes no memory."""
    strides = [0] * len(shape)
    running = 1
    for axis in reversed(list(alloc_order)):
        if axis in expanded:
            continue
        strides[axis] = running
        running *= max(shape[axis], 1)
    return tuple(strides)


__all__ = [
    "FastPlan",
    "TensorView",
    "generated",
    "guard_lines",
    "input_guard",
    "input_key",
    "output_strides",
    "span_elements",
    "torch_dtype_supported",
]
