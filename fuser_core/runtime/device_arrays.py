"""Device arrays of the cuda backend, and their way to and from the host and torch.

CuPy has no dtype for bf16 and fp8, so their device arrays hold the bits (uint16,
uint8) and are viewed as their own dtype on the host. An expanded broadcast axis (size
past 1, stride 0) keeps stride 0 on every crossing, as nvFuser allocates and returns it:
one element is stored and copied, never a materialized copy. Outputs are allocated
contiguous in their allocation order; workspaces zero-filled where the kernel needs it.
CuPy and torch are passed in, or found in sys.modules, never imported here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.arguments import TensorArg
from fuser_core.runtime.reference import compact_index, expanded_view


def bits_only(dtype: DataType) -> bool:
    """Types CuPy has no dtype for (bf16, fp8): their device arrays hold the bits."""
    return dtype.is_reduced_float and dtype != DataType.Half


def _cupy_dtype(dtype: DataType) -> Any:
    if bits_only(dtype):
        return np.uint16 if dtype.itemsize == 2 else np.uint8
    return dtype.numpy


def empty_array(
    cupy: Any, shape: Sequence[int], dtype: DataType, alloc_order: Sequence[int], expanded: frozenset[int] = frozenset()
) -> Any:
    """A device array with the strides of its allocation order (contiguous in it). Along an
    expanded broadcast axis it holds one element and has stride 0, as nvFuser allocates it:
    the kernel writes only that element."""
    storage = _cupy_dtype(dtype)
    compact = [1 if axis in expanded else size for axis, size in enumerate(shape)]
    permuted = cupy.empty([compact[a] for a in alloc_order], dtype=storage)
    inverse = [alloc_order.index(axis) for axis in range(len(shape))]
    array = permuted.transpose(inverse) if list(alloc_order) != sorted(alloc_order) else permuted
    return cupy.broadcast_to(array, tuple(shape)) if expanded else array


def _stride0_axes(array: Any) -> frozenset[int]:
    """The axes of a device or host array that repeat one element (stride 0, size past 1)."""
    return frozenset(a for a in range(array.ndim) if array.strides[a] == 0 and array.shape[a] > 1)


def stored_elements(array: Any) -> int:
    """Elements an array's memory holds: an axis of stride 0 holds one."""
    return math.prod(1 if axis in _stride0_axes(array) else n for axis, n in enumerate(array.shape))


def allocate_workspace(cupy: Any, workspace: k.Workspace, elements: int) -> Any:
    """A device buffer of `elements` (at least one) of the workspace's dtype; zero-filled
    for a zeroed workspace (semaphores), on the current stream."""
    make = cupy.zeros if workspace.zeroed else cupy.empty
    return make(max(elements, 1), dtype=_cupy_dtype(workspace.dtype))


def to_host_array(array: Any, dtype: DataType) -> np.ndarray:
    """A device array on the host; an axis of stride 0 stays stride 0 (one element copied)."""
    expanded = _stride0_axes(array)
    host = (array[compact_index(array.ndim, expanded)] if expanded else array).get()
    host = host.view(dtype.numpy) if bits_only(dtype) else host
    return expanded_view(host, array.shape) if expanded else host


def to_device_array(cupy: Any, host: np.ndarray, dtype: DataType, expanded: frozenset[int] = frozenset()) -> Any:
    """A host array on the device; along the `expanded` axes only its first element is
    copied, and the device array has stride 0 there."""
    compact = host[compact_index(host.ndim, expanded)] if expanded else host
    if bits_only(dtype):
        # (np.ascontiguousarray would make a 0-dim result, a full reduction, 1-dim)
        compact = np.asarray(compact, order="C").view(np.uint16 if dtype.itemsize == 2 else np.uint8)
    device = cupy.asarray(compact)
    return cupy.broadcast_to(device, host.shape) if expanded else device


def on_host(value: Any, out: Any) -> Any:
    """An output on the host: a NumPy array of its dtype (CuPy and torch hold bf16 as bits)."""
    module = type(value).__module__.split(".")[0]
    if not isinstance(out, TensorView) or module not in ("cupy", "torch"):
        return value
    if module == "cupy":
        return to_host_array(value, out.dtype)
    torch = sys.modules["torch"]
    tensor = value.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).cpu().numpy().view(out.dtype.numpy)
    return tensor.cpu().numpy()


def device_array(cupy: Any, arg: TensorArg) -> Any:
    """A tensor input on the device: the caller's CuPy array as it is, a CUDA torch tensor
    through DLPack, a host array uploaded (bf16 and fp8 as their bits)."""
    source = arg.device
    if source is None:
        host = arg.array
        if bits_only(arg.dtype):
            host = host.view(np.uint16 if arg.dtype.itemsize == 2 else np.uint8)
        return _upload(cupy, host)
    if arg.origin == "torch":
        torch = sys.modules["torch"]
        if bits_only(arg.dtype):
            source = source.view(torch.int16 if arg.dtype.itemsize == 2 else torch.uint8)
        return cupy.from_dlpack(source.detach())
    return source


def _upload(cupy: Any, host: np.ndarray) -> Any:
    """A host array on the device in the layout it has: an axis of stride 0 (an expanded
    input) stays stride 0, as the kernel indexes it (cupy.asarray would materialize it)."""
    expanded = {a for a in range(host.ndim) if host.strides[a] == 0 and host.shape[a] > 1}
    if not expanded:
        return cupy.asarray(host)
    compact = host[tuple(slice(0, 1) if a in expanded else slice(None) for a in range(host.ndim))]
    return cupy.broadcast_to(cupy.asarray(compact), host.shape)


def to_torch(array: Any, dtype: DataType) -> Any:
    """A device array as a torch tensor of the same memory; an axis of stride 0 (an
    expanded output) is a torch `expand` of its one element, as nvFuser returns it."""
    torch = sys.modules["torch"]
    expanded = _stride0_axes(array)
    tensor = torch.from_dlpack(array[compact_index(array.ndim, expanded)] if expanded else array)
    if dtype == DataType.BFloat16:
        tensor = tensor.view(torch.bfloat16)
    elif dtype == DataType.Half:
        tensor = tensor.view(torch.float16)
    return tensor.expand(array.shape) if expanded else tensor
