"""Where did this element come from: one element of a tensor a segment writes, traced
through the kernel that writes it on the kernel-IR interpreter.

    trace = trace_element(runtime, inputs, "T12", (3, 0, 7))
    trace.kernel.thread_idx, trace.kernel.reads, trace.reference

The groups before the one that writes the tensor run on the reference (their outputs
are the kernel's inputs, as in a run); that group's kernel is lowered as the cuda
backend lowers it and interpreted for the blocks that matter only
(`fuser_core.codegen.interpreter.trace`). A group with no kernel (an expr_eval group, or
one codegen refuses) runs on the host: the trace says so and gives the reference value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuser_core.codegen.cuda import translation_unit
from fuser_core.codegen.interpreter import TensorBinding, launch_dims
from fuser_core.codegen.interpreter.trace import KernelTrace, trace_kernel_element
from fuser_core.codegen.kernel_ir import Kernel
from fuser_core.codegen.lower import lower_group
from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.rng import bind_run_seed
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.generated_group import alloc_order
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype, kernel_name
from fuser_core.runtime.reference import bind_leaves, evaluate_fusion, leaf_values
from fuser_core.segmenter.segmented_fusion import SegmentedGroup


@dataclass(frozen=True)
class InputRead:
    """One element of a kernel input the traced value was computed from."""

    tensor: str
    index: tuple[int, ...]  # logical index (0 along an expanded axis)
    value: Any


@dataclass(frozen=True)
class ElementTrace:
    tensor: str
    index: tuple[int, ...]
    shape: tuple[int, ...]
    group: int
    scheduler: str
    reference: Any  # the reference backend's value of the element
    host: str | None  # why the group runs on the host (no kernel to trace); None if it has a kernel
    kernel: KernelTrace | None
    reads: tuple[InputRead, ...]

    @property
    def value(self) -> Any:
        """The value the kernel wrote (the reference's value for a host group)."""
        return self.reference if self.kernel is None else self.kernel.value


def trace_element(runtime: Any, inputs: Sequence[Any], tensor: str, index: Sequence[int]) -> ElementTrace:
    """How `tensor[index]` is computed by the FusionKernelRuntime `runtime` on `inputs`.
    `tensor` is `T12` (an output of the fusion or a tensor between segments)."""
    segmented = runtime.segmented
    group, position = _producer(segmented, tensor)
    values, leaves, scalars = _inputs_of(segmented, inputs, group)
    fusion = group.unscheduled
    assert fusion is not None  # every group of a runtime is scheduled
    group_ev = bind_leaves(fusion, leaves)
    for val in fusion.inputs:
        if isinstance(val, TensorView):
            group_ev.bind(val, values[val.name])
    expected = [np.asarray(v) for v in evaluate_fusion(fusion, group_ev)]
    target = expected[position]
    element = _checked_index(tensor, index, target.shape)
    reference = target[element].item() if target.ndim else target.item()
    base = {
        "tensor": tensor,
        "index": element,
        "shape": target.shape,
        "group": group.id,
        "scheduler": group.scheduler.value,
        "reference": reference,
    }
    kernel, host = _kernel_of(runtime, group)
    if kernel is None:
        return ElementTrace(**base, host=host, kernel=None, reads=())
    return _trace_kernel(kernel, group, values, scalars, leaves, expected, tensor, element, base)


def _producer(segmented: Any, tensor: str) -> tuple[SegmentedGroup, int]:
    for group in segmented.groups:
        for position, out in enumerate(group.unscheduled.outputs):
            if f"T{out.name}" == tensor:
                return group, position
    outputs = ", ".join(f"T{o.name}" for o in segmented.complete.outputs if isinstance(o, TensorView))
    between = sorted({f"T{e.val.name}" for e in segmented.edges} - set(outputs.split(", ")))
    also = f"; between segments: {', '.join(between)}" if between else ""
    raise FuserError(f"unknown tensor {tensor!r}: no segment writes it (outputs: {outputs}{also})")


def _checked_index(tensor: str, index: Sequence[int], shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(index) != len(shape):
        raise FuserError(f"{tensor} is {len(shape)}-D (shape {list(shape)}); the index {list(index)} has {len(index)}")
    for axis, (i, size) in enumerate(zip(index, shape, strict=True)):
        if not 0 <= i < size:
            raise FuserError(f"index {i} out of range for axis {axis} of {tensor} (shape {list(shape)})")
    return tuple(int(i) for i in index)


def _inputs_of(
    segmented: Any, inputs: Sequence[Any], target: SegmentedGroup
) -> tuple[dict[int, Any], dict[int, Any], dict[int, Any]]:
    """The reference values of every tensor up to `target`'s inputs, the leaf scalars and
    the scalar inputs (by name), the groups before it run as a run runs them."""
    complete = segmented.complete
    args = convert_inputs(complete, list(inputs))
    ev = bind_args(complete, args)
    bind_run_seed(complete.exprs(), ev)
    leaves = leaf_values(complete, ev)
    values = {tv.name: ev.evaluate(tv) for tv in complete.inputs if isinstance(tv, TensorView)}
    scalars = {v.name: a for v, a in zip(complete.inputs, args, strict=True) if not isinstance(v, TensorView)}
    for group in segmented.groups:
        if group is target:
            break
        fusion = group.unscheduled
        group_ev = bind_leaves(fusion, leaves)
        for val in fusion.inputs:
            if isinstance(val, TensorView):
                group_ev.bind(val, values[val.name])
        for out, value in zip(fusion.outputs, evaluate_fusion(fusion, group_ev), strict=True):
            values[out.name] = value
    return values, leaves, scalars


def _kernel_of(runtime: Any, group: SegmentedGroup) -> tuple[Kernel | None, str | None]:
    """The group's kernel as the cuda backend lowers it, or why it has none."""
    if not generates_kernel(group) or group.fusion is None:
        return None, f"{group.scheduler.value} group g{group.id} runs on the host: it has no generated kernel"
    name = kernel_name(group.scheduler, runtime.name, group.id)
    try:
        kernel = lower_group(group.fusion, name, index_dtype(runtime.signature.index_type))
        translation_unit(kernel)
    except FuserError as err:
        return None, f"group g{group.id} runs on the host: codegen refuses it ({err.one_line()})"
    return kernel, None


def _trace_kernel(
    kernel: Kernel,
    group: SegmentedGroup,
    values: dict[int, Any],
    scalars: dict[int, Any],
    leaves: dict[int, Any],
    expected: list[np.ndarray],
    tensor: str,
    element: tuple[int, ...],
    base: dict[str, Any],
) -> ElementTrace:
    scheduled = group.fusion
    assert scheduled is not None
    bindings: dict[str, TensorBinding] = {}
    orders: dict[str, list[int]] = {}
    for tv in scheduled.inputs:
        if isinstance(tv, TensorView):
            orders[f"T{tv.name}"] = alloc_order(tv)
            bindings[f"T{tv.name}"] = _bind_input(np.asarray(values[tv.name]), orders[f"T{tv.name}"])
    offset = 0
    for tv, value in zip(scheduled.outputs, expected, strict=True):
        assert isinstance(tv, TensorView)
        order = alloc_order(tv)
        laid = [value.shape[a] for a in order]
        storage = np.zeros(value.size, value.dtype)
        strides: list[int] = np.cumprod([1, *laid[::-1]])[:-1][::-1].tolist() if laid else []
        bindings[f"T{tv.name}"] = TensorBinding(storage, tuple(value.shape), tuple(int(s) for s in strides))
        if f"T{tv.name}" == tensor:
            offset = int(np.ravel_multi_index([element[a] for a in order], laid)) if laid else 0
    by_name = {f"s{name}": value for name, value in scalars.items()}
    by_name.update({s.name: leaves[s.leaf] for s in kernel.scalars if s.leaf is not None})
    by_name = {s.name: by_name[s.name] for s in kernel.scalars if s.name in by_name}
    grid, block = launch_dims(kernel, bindings, by_name)
    traced = trace_kernel_element(kernel, bindings, by_name, tensor, offset, grid, block)
    if traced is None:
        raise InternalError(f"kernel {kernel.name}: no thread writes {tensor}{list(element)}")
    reads = tuple(
        InputRead(name, _logical_index(bindings[name], orders[name], off), value)
        for name, off, value in traced.reads
        if name in orders
    )
    return ElementTrace(**base, host=None, kernel=traced, reads=reads)


def _bind_input(array: np.ndarray, order: list[int]) -> TensorBinding:
    """The array laid out contiguously in its allocation order, as the runtime passes it;
    an expanded axis (stride 0) keeps stride 0 and one element of storage."""
    expanded = {a for a in range(array.ndim) if array.strides[a] == 0 and array.shape[a] > 1}
    compact = array[tuple(slice(0, 1) if a in expanded else slice(None) for a in range(array.ndim))]
    laid = np.ascontiguousarray(np.transpose(compact, order)) if array.ndim else np.ascontiguousarray(array)
    strides = [0 if order[k] in expanded else s // max(laid.itemsize, 1) for k, s in enumerate(laid.strides)]
    return TensorBinding(laid.reshape(-1), tuple(array.shape), tuple(strides))


def _logical_index(binding: TensorBinding, order: list[int], offset: int) -> tuple[int, ...]:
    """The logical index of a storage offset (0 along an expanded axis)."""
    index = [0] * len(binding.logical_size)
    for k, stride in sorted(enumerate(binding.alloc_stride), key=lambda kv: -kv[1]):
        if stride > 0:
            index[order[k]], offset = divmod(offset, stride)
    return tuple(index)
