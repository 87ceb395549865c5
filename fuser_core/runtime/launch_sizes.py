"""A kernel's index expressions evaluated on the host: its launch dimensions, the extents
of the outputs it writes, and the elements its workspaces need, from one call's sizes,
strides and scalars.

Both launch paths of the cuda backend (a full run and the fast path's plan) and the
dumps of a run that never reaches a GPU (`kernel_artifacts`) size a launch here, so they
agree on what a kernel is launched with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fuser_core.codegen import kernel_ir as k
from fuser_core.errors import FuserError
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.artifacts import LaunchParams


def evaluate(
    node: k.Node, sizes: Mapping[str, Sequence[int]], strides: Mapping[str, Sequence[int]], scalars: Mapping[str, Any]
) -> int:
    """The value of an index expression (integer arithmetic as C's: `/` and `%` truncate),
    with the comparisons, selects and clamps a slice's run-time bounds are made of."""
    value = _value(node, sizes, strides, scalars)
    return int(value)


def _value(
    node: k.Node, sizes: Mapping[str, Sequence[int]], strides: Mapping[str, Sequence[int]], scalars: Mapping[str, Any]
) -> Any:
    def of(x: k.Node) -> Any:
        return _value(x, sizes, strides, scalars)

    if isinstance(node, k.Const):
        return node.value
    if isinstance(node, k.TensorField):
        table = sizes if node.field == "logical_size" else strides
        return int(table[node.tensor][node.axis])
    if isinstance(node, k.ScalarParam):
        return scalars[node.name]
    if isinstance(node, k.Bin):
        if node.op in _LOGICAL:
            return _LOGICAL[node.op](lambda: of(node.a), lambda: of(node.b))
        a, b = of(node.a), of(node.b)
        if node.op in _BINARY:
            return _BINARY[node.op](a, b)
    if isinstance(node, k.Un) and node.op in _UNARY:
        return _UNARY[node.op](of(node.a))
    if isinstance(node, k.Call):
        if node.fn == "where" and len(node.args) == 3:
            cond, yes, no = node.args
            return of(yes) if of(cond) else of(no)
        if node.fn in _CALLS:
            return _CALLS[node.fn](*(of(x) for x in node.args))
    if isinstance(node, k.Cast):
        inner = of(node.a)
        if node.dtype.is_boolean:
            return bool(inner)
        return int(inner) if node.dtype.is_integral else inner
    raise FuserError(f"cannot evaluate {k.expr_text(node)} on the host", op="launch")


def _c_div(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return a / b if b else 0
    if not b:
        return 0
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _c_mod(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(a, b) if b else 0
    return a - _c_div(a, b) * b if b else 0


_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _c_div,
    "%": _c_mod,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_LOGICAL = {
    "&&": lambda a, b: bool(a()) and bool(b()),
    "||": lambda a, b: bool(a()) or bool(b()),
}
_UNARY = {"-": lambda a: -a, "!": lambda a: not a, "~": lambda a: ~int(a)}
_CALLS: dict[str, Callable[..., Any]] = {
    "ceilDiv": lambda a, b: -(-a // b) if b else 0,
    "fmax": max,
    "fmin": min,
    "max": max,
    "min": min,
    "abs": abs,
}


def launch_params(
    kernel: k.Kernel,
    sizes: Mapping[str, Sequence[int]],
    strides: Mapping[str, Sequence[int]],
    scalars: Mapping[str, Any],
) -> LaunchParams:
    dims = {"blockIdx.x": 1, "blockIdx.y": 1, "blockIdx.z": 1, "threadIdx.x": 1, "threadIdx.y": 1, "threadIdx.z": 1}
    for dim in kernel.launch:
        dims[dim.hardware] = max(dims[dim.hardware], evaluate(dim.extent, sizes, strides, scalars))
    grid = (dims["blockIdx.x"], dims["blockIdx.y"], dims["blockIdx.z"])
    block = (dims["threadIdx.x"], dims["threadIdx.y"], dims["threadIdx.z"])
    # All the kernel's shared memory for the dumps ("Smem Size"); the launch asks only for
    # the dynamic part (a static `__shared__` array is reserved by the function itself).
    return LaunchParams(grid, block, kernel.shared_bytes, kernel.dynamic_shared_bytes)


def workspace_elements(workspace: k.Workspace, params: LaunchParams) -> int:
    """Elements of `workspace` one launch with `params` needs: `per_thread` for every
    launched thread and `per_block` for every block."""
    blocks = math.prod(params.grid)
    return blocks * (math.prod(params.block) * workspace.per_thread + workspace.per_block)


def extent_node(kernel: k.Kernel, tv: TensorView, axis: int) -> k.Node:
    for t in kernel.tensors:
        if t.name == f"T{tv.name}" and t.shape:
            return t.shape[axis]
    raise FuserError(f"kernel {kernel.name} does not know the shape of output T{tv.name}", op="launch")
