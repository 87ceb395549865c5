"""A kernel's index expressions evaluated on the host: its launch dimensions, the extents
of the outputs it writes, and the elements its workspaces need, from one call's sizes,
strides and scalars.

Both launch paths of the cuda backend (a full run and the fast path's plan) and the
dumps of a run that never reaches a GPU (`kernel_artifacts`) size a launch here, so they
agree on what a kernel is launched with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fuser_core.codegen import kernel_ir as k
from fuser_core.errors import FuserError
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.artifacts import LaunchParams


def evaluate(
    node: k.Node, sizes: Mapping[str, Sequence[int]], strides: Mapping[str, Sequence[int]], scalars: Mapping[str, Any]
) -> int:
    if isinstance(node, k.Const):
        return int(node.value)
    if isinstance(node, k.TensorField):
        table = sizes if node.field == "logical_size" else strides
        return int(table[node.tensor][node.axis])
    if isinstance(node, k.ScalarParam):
        return int(scalars[node.name])
    if isinstance(node, k.Bin):
        a, b = evaluate(node.a, sizes, strides, scalars), evaluate(node.b, sizes, strides, scalars)
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if node.op == "/":
            return int(a / b) if b else 0
        if node.op == "%":
            return int(np.fmod(a, b)) if b else 0
    if isinstance(node, k.Call) and node.fn == "ceilDiv":
        a, b = (evaluate(x, sizes, strides, scalars) for x in node.args)
        return -(-a // b)
    if isinstance(node, k.Cast):
        return evaluate(node.a, sizes, strides, scalars)
    raise FuserError(f"cannot evaluate {k.expr_text(node)} on the host", op="launch")


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
    # The kernel's static `__shared__` arrays, for the dumps ("Smem Size"): launches pass
    # no dynamic shared memory (DYNAMIC_SHARED_BYTES), as no kernel declares `extern __shared__`.
    return LaunchParams(grid, block, kernel.shared_bytes)


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
