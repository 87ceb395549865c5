"""What `FusionDefinition.execute` does around the executor cache, as nvFuser does it:
vector inputs given as lists, outputs in the caller's framework and on its device,
aliased outputs written into their inputs in place, and the profile of a run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType, torch_name
from fuser_core.ir.rng import seeds_from
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.executor_cache import RunReport
from fuser_core.segmenter.printer import kernel_name

# Set by fuser_core.compat: callers that think they talk to nvFuser get torch tensors
# even from fusions with no tensor input (iota, scalar-only), as nvFuser returns them.
_torch_by_default = False


def return_torch_by_default(flag: bool = True) -> None:
    global _torch_by_default
    _torch_by_default = flag


def flatten_inputs(inputs: Sequence[Any], slots: Sequence[int]) -> list[Any]:
    """One argument per fusion input: a vector input (`define_vector(n)`) is given as a
    list or tuple of n ints, as nvFuser takes it."""
    if not isinstance(inputs, (list, tuple)):
        raise FuserError(f"inputs must be a list or tuple, got {type(inputs).__name__}", op="execute")
    if len(inputs) != len(slots) or all(n == 1 for n in slots):
        return list(inputs)
    flat: list[Any] = []
    for position, (value, count) in enumerate(zip(inputs, slots, strict=True)):
        if count == 1:
            flat.append(value)
            continue
        items = _vector_items(value)
        if items is None or len(items) != count:
            raise FuserError(
                f"input {position} is a vector of {count} ints: give a list or tuple of {count}, got {value!r}",
                op="execute",
            )
        flat.extend(items)
    return flat


def _vector_items(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) == 1:
        return list(value.tolist())
    return None


def wants_torch(inputs: Sequence[Any], device: Any) -> bool:
    if any(_framework(v) == "torch" for v in inputs):
        return True
    if any(_framework(v) in ("numpy", "cupy") and hasattr(v, "shape") for v in inputs):
        return False
    return "torch" in sys.modules and (_torch_by_default or device is not None)


def torch_philox_state(n_ops: int) -> tuple[int, int]:
    """The Philox state of an execution with `n_ops` unseeded random ops, from torch's
    generator as nvFuser takes it: the CUDA generator's seed, and its offset counted in
    groups of four words, advanced by four per op; so `torch.manual_seed(s)` then the
    k-th execution draws what `rng_seed=s, rng_offset=k * n_ops` draws. Without a GPU,
    a seed drawn from torch's CPU generator and offset 0."""
    torch = sys.modules["torch"]
    if torch.cuda.is_available():
        torch.cuda.initial_seed()  # initializes CUDA's default generators
        generator = torch.cuda.default_generators[torch.cuda.current_device()]
        offset = int(generator.get_offset())
        generator.set_offset(offset + 4 * n_ops)
        return int(generator.initial_seed()), offset // 4
    return int(torch.randint(0, 2**62, (), dtype=torch.int64).item()), 0


def seed_source_for(inputs: Sequence[Any], device: Any) -> contextlib.AbstractContextManager[None]:
    return seeds_from(torch_philox_state) if wants_torch(inputs, device) else contextlib.nullcontext()


def target_device(inputs: Sequence[Any], device: Any) -> Any:
    """The torch device outputs go to: `device=` if given, else the first CUDA tensor
    input's, else CUDA when torch sees a GPU, else the CPU."""
    torch = sys.modules["torch"]
    if device is not None:
        return torch.device(f"cuda:{device}" if isinstance(device, int) else device)
    for value in inputs:
        if _framework(value) == "torch" and value.is_cuda:
            return value.device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_torch(value: Any, dtype: DataType, device: Any) -> Any:
    """An output as a torch tensor of its nvFuser dtype (bf16 and fp8 included) on `device`."""
    torch = sys.modules["torch"]
    wanted = _torch_dtype(torch, dtype)
    repeated = _repeated_axes(value)
    if repeated:  # an expanded output: its one element along the axis, seen with stride 0
        compact = value[tuple(slice(0, 1) if a in repeated else slice(None) for a in range(value.ndim))]
        return to_torch(compact, dtype, device).expand(tuple(value.shape))
    if _framework(value) == "torch":
        tensor = value
    elif _framework(value) == "cupy":
        tensor = torch.from_dlpack(value)
    else:
        array = np.asarray(value)
        if dtype.is_reduced_float:  # NumPy cannot hand these to torch: move the bits
            array = array.view(np.uint16 if dtype.itemsize == 2 else np.uint8)
        # torch takes NumPy's strides as they are (an output's stride order is kept);
        # only negative strides, which torch has not, need a copy
        laid = array if array.ndim and min(array.strides) >= 0 else np.ascontiguousarray(array)
        tensor = torch.from_numpy(laid if array.ndim else array.reshape(()).copy())
    if wanted is not None and tensor.dtype != wanted:
        # bf16 and fp8 arrive as their bits (uint16/uint8) from NumPy and CuPy
        same_size = tensor.element_size() == wanted.itemsize
        tensor = tensor.view(wanted) if same_size and dtype.is_reduced_float else tensor.to(wanted)
    return tensor.to(device) if tensor.device != device else tensor


def _repeated_axes(value: Any) -> list[int]:
    """The axes of stride 0 and size past 1 of a NumPy or CuPy array (an expanded output)."""
    if _framework(value) not in ("numpy", "cupy") or not getattr(value, "ndim", 0):
        return []
    return [a for a in range(value.ndim) if value.strides[a] == 0 and value.shape[a] > 1]


def _torch_dtype(torch: Any, dtype: DataType) -> Any:
    name = torch_name(dtype)
    return getattr(torch, name.split(".")[1], None) if name else None


def scalar_to_torch(value: Any, dtype: DataType, device: Any) -> Any:
    torch = sys.modules["torch"]
    return torch.tensor(value, dtype=_torch_dtype(torch, dtype), device=device)


def write_alias(target: Any, value: Any, label: str) -> None:
    """Write an aliased output into its input in place: NumPy, CuPy or torch (CPU or CUDA)."""
    framework = _framework(target)
    if framework == "torch":
        torch = sys.modules["torch"]
        source = to_torch(value, _dtype_of_torch(torch, target.dtype), target.device)
        with torch.no_grad():
            target.copy_(source.reshape(target.shape))
        return
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        target[...] = cupy.asarray(value).astype(target.dtype, copy=False).reshape(target.shape)
        return
    if isinstance(target, np.ndarray) and target.flags.writeable:
        host = value.get() if _framework(value) == "cupy" else np.asarray(value)
        np.copyto(target, host.astype(target.dtype, copy=False).reshape(target.shape))
        return
    raise FuserError(f"{label} must be a writable array or tensor: an aliased output is written into it", op="execute")


def _dtype_of_torch(torch: Any, torch_dtype: Any) -> DataType:
    for dtype in DataType:
        if _torch_dtype(torch, dtype) == torch_dtype:
            return dtype
    raise FuserError(f"no fusion dtype for torch dtype {torch_dtype}", op="execute")


def _framework(value: Any) -> str:
    module = type(value).__module__.split(".")[0]
    if module == "torch" and hasattr(value, "is_cuda"):
        return "torch"
    if module == "cupy":
        return "cupy"
    if isinstance(value, np.ndarray):
        return "numpy"
    return "other"


def convert_outputs(outputs: Sequence[Any], values: Sequence[Val], inputs: Sequence[Any], device: Any) -> list[Any]:
    if not wants_torch(inputs, device):
        return list(outputs)
    where = target_device(inputs, device)
    return [
        to_torch(o, v.dtype, where) if isinstance(v, TensorView) else scalar_to_torch(o, v.dtype, where)
        for o, v in zip(outputs, values, strict=True)
    ]


@dataclass(frozen=True)
class KernelProfile:
    """One segment of a profiled run: nvFuser's `KernelProfile` fields we can measure."""

    name: str
    segment_id: int
    scheduler: str
    time_ms: float | None  # CUDA-event time; None for a segment not run as a kernel
    bytes_read: int
    bytes_written: int
    effective_bandwidth_gbs: float | None
    percentage_peak_bandwidth: float | None
    registers: int | None
    on_host: bool  # run by the host reference, not as a generated kernel


@dataclass(frozen=True)
class FusionProfile:
    """`fd.profile()` after `execute(..., profile=True)`."""

    fusion_id: int
    segments: int
    kernel_profiles: tuple[KernelProfile, ...]
    host_time_ms: float

    @property
    def kernel_time_ms(self) -> float:
        return sum(k.time_ms or 0.0 for k in self.kernel_profiles)


def profile_of(report: RunReport, fusion_id: int) -> FusionProfile:
    runtime = report.runtime
    launches = {r.group_id: r for r in report.launches}
    kernels = []
    for group in runtime.segmented.groups:
        launch = launches.get(group.id)
        seconds = launch.seconds if launch is not None else None
        kernels.append(
            KernelProfile(
                name=launch.kernel if launch is not None else kernel_name(group, runtime.name),
                segment_id=group.id,
                scheduler=group.scheduler.value,
                time_ms=None if seconds is None else seconds * 1e3,
                bytes_read=launch.bytes_read if launch else 0,
                bytes_written=launch.bytes_written if launch else 0,
                effective_bandwidth_gbs=launch.gbps if launch else None,
                percentage_peak_bandwidth=(launch.fraction_of_peak * 100)
                if launch and launch.fraction_of_peak is not None
                else None,
                registers=launch.registers if launch else None,
                on_host=launch is None,
            )
        )
    return FusionProfile(fusion_id, len(kernels), tuple(kernels), report.seconds * 1e3)
