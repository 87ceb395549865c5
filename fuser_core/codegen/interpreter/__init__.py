"""A CPU interpreter of the kernel IR: runs a kernel for every block and thread of a launch.

On a machine with no GPU, CI runs every generated kernel here at small sizes and compares
its outputs with the reference backend: indexing, predicates and vectorization are checked
on the same tree the CUDA printer prints.

Execution model (SIMT in lock-step, vectorized with NumPy):

- A *lane* is one thread of one block; every lane of the launch runs at once. Lanes are
  numbered block-major: `lane = block * threads_per_block + thread`, with blocks and
  threads linearized x-fastest as CUDA does.
- Every expression evaluates to a NumPy array over the lanes (shape `[lanes]`), or to a
  0-d array when it is the same on every lane (constants, arguments, serial loop indices).
- Statements act under a mask of *active* lanes. A `For` bound to hardware binds its index
  to each lane's `blockIdx.*`/`threadIdx.*` and, when `guarded`, deactivates lanes whose
  index is at or past the extent; an `If` narrows the mask for each branch; `&&`/`||`
  evaluate their right side only on the lanes C would. Other `For` kinds (serial, unroll,
  unswitch, vectorize) iterate in Python and need an extent that is the same on every
  active lane.
- Inactive lanes may compute garbage but never fail: their reads are clamped into the
  buffer and their divisions by zero are silenced. Active lanes fail loudly (`KernelFault`)
  on an out-of-bounds access, an unaligned vector access, an integer division by zero, a
  data race (two threads writing different values to one element), a read of shared
  memory written by another thread with no `Sync` between, a `Sync` reached by only part
  of a block, or a write to an input.
- A `ParallelReduce` runs by its meaning, not through its work buffers and semaphores:
  it is a barrier (whole blocks reach it; a grid reduction, every block along its block
  dimensions), combines the values of each group of lanes (the lanes that differ only
  along its reduced dimensions) and leaves the result in every lane of the group, or for
  a grid reduction in the lanes of the group's last block (the one at gridDim - 1 along
  every reduced dimension), where it defines `last` true.
- An `Alloc` with an `init` fills the buffer with it (per lane for a register array).
- Arithmetic follows C in each node's dtype: the operands of a binary operator meet at
  their common type (half types compute in float), integer `/` and `%` truncate toward
  zero, comparisons give bool. Values are held in their storage type (bfloat16 values in
  bfloat16) and widened to float for arithmetic. `Call` evaluates the element-wise ops by
  their printed names (`fuser_core.ir.op_types`), plus `where` and `ceilDiv`. A
  `FastDiv` multiplies by its divisor's magic numbers as the device does, and fails on an
  active lane whose dividend is outside [0, 2^31), where the numbers are not exact.

The package holds one concept a module: `launch` (bindings, lanes, `KernelFault`),
`values` (C typing, operators, device functions), `reductions` (how a reduction combines
values), `memory` (buffers, scopes and the checks of every access) and `machine`
(statements, expressions and reductions on the lanes); the entry points are here.

Usage::

    out = np.full(n, np.nan, np.float32)
    tensors = {"T0": TensorBinding.of(x), "T1": TensorBinding.of(out)}
    interpret(kernel, tensors, {"s0": 2.0})  # grid and block from kernel.launch
    writes = LaneWrites()
    interpret(kernel, tensors, grid=(8, 1, 1), block=(128, 1, 1), lane_writes=writes)
    writes.writer("T1", 5)  # ((0, 0, 0), (5, 0, 0)): blockIdx, threadIdx
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fuser_core.codegen.interpreter.launch import HARDWARE, Dim3, KernelFault, LaneWrites, TensorBinding, _Launch
from fuser_core.codegen.interpreter.machine import _Machine
from fuser_core.codegen.interpreter.memory import MAX_VECTOR_BYTES
from fuser_core.codegen.interpreter.values import ScalarValue, device_function
from fuser_core.codegen.kernel_ir import Kernel
from fuser_core.codegen.magic_division import MagicDivisor

__all__ = [
    "HARDWARE",
    "MAX_VECTOR_BYTES",
    "Dim3",
    "KernelFault",
    "LaneWrites",
    "ScalarValue",
    "TensorBinding",
    "device_function",
    "interpret",
    "launch_dims",
]

# -- entry points ---------------------------------------------------------------------


def interpret(
    kernel: Kernel,
    tensors: Mapping[str, TensorBinding],
    scalars: Mapping[str, ScalarValue] | None = None,
    grid: Dim3 | None = None,
    block: Dim3 | None = None,
    *,
    lane_writes: LaneWrites | None = None,
    divisors: Mapping[str, MagicDivisor] | None = None,
) -> None:
    """Run `kernel` on every block and thread of a `grid` x `block` launch, writing the
    outputs into their bound storage. `tensors` binds every tensor argument by name and
    `scalars` every scalar argument; `grid`/`block` default to `launch_dims`. `divisors`
    gives every `FastDivisor` argument (as the runtime packed them); by default each is
    computed from its extent, as the runtime computes it. A launch with an empty
    dimension runs nothing. Raises `KernelFault` where a GPU would misbehave."""
    scalars = scalars or {}
    if grid is None or block is None:
        default_grid, default_block = launch_dims(kernel, tensors, scalars)
        grid, block = grid or default_grid, block or default_block
    for dim in (*grid, *block):
        if dim < 0:
            raise KernelFault(f"kernel {kernel.name}: negative launch dimension in grid {grid}, block {block}")
    if lane_writes is not None:
        _start_recording(lane_writes, kernel, tensors, grid, block)
    if 0 in grid or 0 in block:
        return
    machine = _Machine(kernel, _Launch(grid, block), tensors, scalars, lane_writes, divisors)
    with np.errstate(all="ignore"):
        machine.run()


def launch_dims(
    kernel: Kernel, tensors: Mapping[str, TensorBinding], scalars: Mapping[str, ScalarValue] | None = None
) -> tuple[Dim3, Dim3]:
    """The grid and block that `kernel.launch` asks for with these arguments: the largest
    extent given for each hardware index (its guarded loops cover less), 1 where unbound."""
    machine = _Machine(kernel, _Launch((1, 1, 1), (1, 1, 1)), tensors, scalars or {}, None)
    extents: dict[str, list[int]] = {hw: [] for hw in HARDWARE}
    for dim in kernel.launch:
        if dim.hardware not in extents:
            machine.fail(f"launch dimension {dim.hardware!r} is not one of {', '.join(HARDWARE)}")
        with np.errstate(all="ignore"):
            extents[dim.hardware].append(machine.uniform(dim.extent, machine.root_frame(), f"launch {dim.hardware}"))
    dims = {hw: max(values, default=1) for hw, values in extents.items()}
    grid = (dims["blockIdx.x"], dims["blockIdx.y"], dims["blockIdx.z"])
    block = (dims["threadIdx.x"], dims["threadIdx.y"], dims["threadIdx.z"])
    return grid, block


def _start_recording(
    writes: LaneWrites, kernel: Kernel, tensors: Mapping[str, TensorBinding], grid: Dim3, block: Dim3
) -> None:
    writes.grid, writes.block = grid, block
    for arg in kernel.tensors:
        if arg.is_output and arg.name in tensors:
            size = tensors[arg.name].storage.size
            writes.lane[arg.name] = np.full(size, -1, np.int64)
            writes.count[arg.name] = np.zeros(size, np.int64)
