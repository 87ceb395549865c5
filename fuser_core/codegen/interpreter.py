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
  their printed names (`fuser_core.ir.op_types`), plus `where` and `ceilDiv`.

Usage::

    out = np.full(n, np.nan, np.float32)
    tensors = {"T0": TensorBinding.of(x), "T1": TensorBinding.of(out)}
    interpret(kernel, tensors, {"s0": 2.0})  # grid and block from kernel.launch
    writes = LaneWrites()
    interpret(kernel, tensors, grid=(8, 1, 1), block=(128, 1, 1), lane_writes=writes)
    writes.writer("T1", 5)  # ((0, 0, 0), (5, 0, 0)): blockIdx, threadIdx
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from fuser_core.codegen.kernel_ir import (
    REDUCE_OPS,
    Alloc,
    Bin,
    Call,
    Cast,
    Const,
    Define,
    For,
    If,
    Kernel,
    Memory,
    Node,
    ParallelReduce,
    Read,
    ScalarParam,
    Stmt,
    Store,
    Sync,
    TensorField,
    Un,
    Var,
    VectorCopy,
    expr_text,
    parse_rng_function,
)
from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.dtype import DataType, promote_type, to_storage
from fuser_core.ir.elementwise import _convert
from fuser_core.ir.op_types import BinaryOpType, OpRule, TernaryOpType, UnaryOpType
from fuser_core.ir.rng import RNGOpType, random_at

Dim3 = tuple[int, int, int]
ScalarValue = int | float | bool

_AXES = ("x", "y", "z")
HARDWARE = tuple(f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx") for axis in _AXES)

# The widest vector access a GPU makes (LDG.128 / STG.128).
MAX_VECTOR_BYTES = 16


class KernelFault(InternalError):
    """A kernel did what a GPU would get wrong or leave undefined (a bug of the lowering);
    the message names the kernel, the buffer, the index and the lane."""


# -- the launch's inputs and outputs ---------------------------------------------------


@dataclass(frozen=True)
class TensorBinding:
    """A tensor argument: flat storage (element offsets index it) and the run-time facts
    `TensorField` reads. Writes to an output go into `storage` itself."""

    storage: np.ndarray
    logical_size: tuple[int, ...]
    alloc_stride: tuple[int, ...]

    @classmethod
    def of(cls, array: np.ndarray) -> TensorBinding:
        """A C-contiguous array whose allocation axes are its logical axes; its storage is
        a view, so an output's results land in `array`."""
        if not array.flags.c_contiguous:
            raise ValueError("TensorBinding.of needs a C-contiguous array; build a TensorBinding for other layouts")
        strides = tuple(s // array.itemsize for s in array.strides)
        return cls(array.reshape(-1), tuple(array.shape), strides)


@dataclass
class LaneWrites:
    """Which thread wrote each element of each output; `interpret` fills it when given one.

    `lane[name][e]` is the lane that last wrote element `e` of output `name`'s storage
    (-1: none did) and `count[name][e]` how many writes it received.
    """

    grid: Dim3 = (1, 1, 1)
    block: Dim3 = (1, 1, 1)
    lane: dict[str, np.ndarray] = field(default_factory=dict)
    count: dict[str, np.ndarray] = field(default_factory=dict)

    def writer(self, buffer: str, element: int) -> tuple[Dim3, Dim3] | None:
        """(blockIdx, threadIdx) of the last write to `buffer[element]`, None if never written."""
        row = self.coordinates(buffer)[element]
        if row[0] < 0:
            return None
        return (int(row[0]), int(row[1]), int(row[2])), (int(row[3]), int(row[4]), int(row[5]))

    def coordinates(self, buffer: str) -> np.ndarray:
        """`[elements, 6]`: blockIdx.x/y/z, threadIdx.x/y/z of each element's last writer, -1 if none."""
        lanes = self.lane[buffer]
        threads = math.prod(self.block)
        coords = np.concatenate([_unravel(lanes // threads, self.grid), _unravel(lanes % threads, self.block)], axis=1)
        coords[lanes < 0] = -1
        return coords


def _unravel(linear: np.ndarray, dims: Dim3) -> np.ndarray:
    """x-fastest linear indices as `[n, 3]` (x, y, z) coordinates."""
    x, y = dims[0], dims[1]
    return np.stack([linear % x, linear // x % y, linear // (x * y)], axis=1)


# -- entry points ---------------------------------------------------------------------


def interpret(
    kernel: Kernel,
    tensors: Mapping[str, TensorBinding],
    scalars: Mapping[str, ScalarValue] | None = None,
    grid: Dim3 | None = None,
    block: Dim3 | None = None,
    *,
    lane_writes: LaneWrites | None = None,
) -> None:
    """Run `kernel` on every block and thread of a `grid` x `block` launch, writing the
    outputs into their bound storage. `tensors` binds every tensor argument by name and
    `scalars` every scalar argument; `grid`/`block` default to `launch_dims`. A launch with
    an empty dimension runs nothing. Raises `KernelFault` where a GPU would misbehave."""
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
    machine = _Machine(kernel, _Launch(grid, block), tensors, scalars, lane_writes)
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


# -- lanes, buffers, scopes -----------------------------------------------------------


class _Launch:
    """The lanes of a launch and each one's hardware indices."""

    def __init__(self, grid: Dim3, block: Dim3) -> None:
        self.grid, self.block = grid, block
        self.blocks, self.threads = math.prod(grid), math.prod(block)
        self.count = self.blocks * self.threads
        lane = np.arange(self.count, dtype=np.int64)
        self.block_of, self.thread_of = lane // self.threads, lane % self.threads
        self.lanes = lane
        self.dims: dict[str, int] = {}
        self.index: dict[str, np.ndarray] = {}
        for kind, linear, dims in (("blockIdx", self.block_of, grid), ("threadIdx", self.thread_of, block)):
            coords = _unravel(linear, dims)
            for a, axis in enumerate(_AXES):
                self.dims[f"{kind}.{axis}"] = dims[a]
                self.index[f"{kind}.{axis}"] = coords[:, a]

    def describe(self, lane: int) -> str:
        b = tuple(int(self.index[f"blockIdx.{axis}"][lane]) for axis in _AXES)
        t = tuple(int(self.index[f"threadIdx.{axis}"][lane]) for axis in _AXES)
        return f"blockIdx={b} threadIdx={t}"


@dataclass
class _Buffer:
    """Global storage `[size]`, a register array `[lanes, size]` or shared memory `[blocks, size]`."""

    name: str
    dtype: DataType
    memory: Memory
    data: np.ndarray
    writable: bool = True
    # Shared memory: the thread of its block that wrote each slot since the last Sync, or -1.
    unsynced: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.data.shape[-1])


@dataclass
class _Frame:
    """What a statement sees: the variables and buffers in scope and the active lanes."""

    vars: dict[str, np.ndarray]
    buffers: dict[str, _Buffer]
    mask: np.ndarray

    def child(self, mask: np.ndarray) -> _Frame:
        """A nested C block: its declarations end with it."""
        return _Frame(dict(self.vars), dict(self.buffers), mask)

    def masked(self, mask: np.ndarray) -> _Frame:
        """The same scope on fewer lanes (for the right side of `&&`/`||`)."""
        return _Frame(self.vars, self.buffers, mask)


def _typed(value: Any, dtype: DataType) -> np.ndarray:
    """A value stored as `dtype` (rounded, fp8 saturated), as an array."""
    return np.asarray(to_storage(value, dtype))


def _widen(value: np.ndarray) -> np.ndarray:
    """Half, bfloat16 and fp8 values compute in float."""
    if value.dtype.kind == "V" or value.dtype == np.float16:
        return value.astype(np.float32)
    return value


def _offset_in_allocation(data: np.ndarray) -> int:
    """Bytes from the start of the allocation `data` views (its outermost base) to its
    first element, modulo 16: allocations are 16-byte aligned."""
    root = data
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return start % MAX_VECTOR_BYTES


def _poison(dtype: DataType) -> Any:
    """What a never-written register or shared slot holds, so that tests see it."""
    if dtype.is_floating or dtype.is_complex:
        return np.nan
    if dtype.is_integral:
        return np.iinfo(dtype.numpy).min
    return True


# -- operators ------------------------------------------------------------------------

_ARITHMETIC: dict[str, Callable[..., Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
    ">>": np.right_shift,
    "<<": np.left_shift,
}
_COMPARISONS: dict[str, Callable[..., Any]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
# C's `/` and `%`: integers truncate toward zero (the reference's own rules).
_DIVISIONS: dict[str, Callable[..., Any]] = {"/": BinaryOpType.Div.value.numpy, "%": BinaryOpType.Mod.value.numpy}
# Operators whose bool operands C promotes to int.
_INT_PROMOTING = frozenset({"+", "-", "*", "/", "%", ">>", "<<"})

# Device functions by printed name, from the op tables: a new op there works here.
_DEVICE_FUNCTIONS: dict[str, OpRule] = {
    rule.name: rule for kind in (UnaryOpType, BinaryOpType, TernaryOpType) for rule in (op.value for op in kind)
}


def device_function(name: str) -> OpRule | None:
    """The rule of a `Call.fn`: an op's printed name, or it with the `f` of a float variant."""
    rule = _DEVICE_FUNCTIONS.get(name)
    if rule is None and name.endswith("f"):
        base = _DEVICE_FUNCTIONS.get(name[:-1])
        if base is not None and base.float_suffix:
            rule = base
    return rule


def _operand_type(node: Bin) -> np.dtype:
    """C's usual arithmetic conversions: the operands' common type (half types in float;
    bools of arithmetic become int)."""
    try:
        common = promote_type(node.a.dtype, node.b.dtype)
    except FuserError:  # e.g. uint64 with a signed type: C goes unsigned; trust the node
        common = node.dtype
    if common == DataType.Bool and node.op in _INT_PROMOTING:
        common = DataType.Int32
    return common.compute_numpy


# -- reductions -----------------------------------------------------------------------

# NaN-propagating, as the runtime's `fmax`/`fmin` reductions are.
_REDUCE_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "mul": np.multiply,
    "max": np.maximum,
    "fmax": np.maximum,
    "min": np.minimum,
    "fmin": np.minimum,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}

_Values = list[np.ndarray]


def _welford(a: _Values, b: _Values) -> _Values:
    """Chan's parallel combination of (avg, M2, N) partials; N == 0 is the identity."""
    avg_a, m2_a, n_a = a
    avg_b, m2_b, n_b = b
    n = n_a + n_b
    fa, fb = n_a.astype(avg_a.dtype), n_b.astype(avg_a.dtype)
    total = fa + fb
    ratio = fb / np.where(total == 0, np.ones((), total.dtype), total)
    delta = avg_b - avg_a
    avg = avg_a + delta * ratio
    m2 = m2_a + m2_b + delta * delta * fa * ratio
    empty_a, empty_b = n_a == 0, n_b == 0
    avg = np.where(empty_a, avg_b, np.where(empty_b, avg_a, avg))
    m2 = np.where(empty_a, m2_b, np.where(empty_b, m2_a, m2))
    return [avg, m2, n]


def _reduce_groups(op: str, group: np.ndarray, values: _Values) -> _Values:
    """Combine `values` (one array per buffer, sorted by `group`) within each group by a
    tree of pairwise steps, as a block reduction does; every member gets its group's result."""
    if op == "welford":
        combine: Callable[[_Values, _Values], _Values] = _welford
    else:
        ufunc = _REDUCE_UFUNCS[op]

        def combine(a: _Values, b: _Values) -> _Values:
            return [ufunc(a[0], b[0])]

    acc = [np.array(v) for v in values]
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    sizes = np.diff(np.append(starts, group.size))
    rank = np.arange(group.size) - np.repeat(starts, sizes)
    size_of = np.repeat(sizes, sizes)
    step = 1
    while step < sizes.max():
        left = np.flatnonzero((rank % (2 * step) == 0) & (rank + step < size_of))
        right = left + step
        for array, value in zip(acc, combine([v[left] for v in acc], [v[right] for v in acc]), strict=True):
            array[left] = value
        step *= 2
    return [np.repeat(array[starts], sizes) for array in acc]


# -- the machine ----------------------------------------------------------------------


class _Machine:
    def __init__(
        self,
        kernel: Kernel,
        launch: _Launch,
        tensors: Mapping[str, TensorBinding],
        scalars: Mapping[str, ScalarValue],
        lane_writes: LaneWrites | None,
    ) -> None:
        self.kernel = kernel
        self.launch = launch
        self.bindings = dict(tensors)
        self.scalars = dict(scalars)
        self.lane_writes = lane_writes
        self.globals = self._bind_arguments()

    def fail(self, message: str) -> NoReturn:
        raise KernelFault(f"kernel {self.kernel.name}: {message}")

    def run(self) -> None:
        self.block(self.kernel.body, self.root_frame())

    def root_frame(self) -> _Frame:
        return _Frame({}, dict(self.globals), np.ones(self.launch.count, dtype=bool))

    def _bind_arguments(self) -> dict[str, _Buffer]:
        buffers = {}
        for arg in self.kernel.tensors:
            binding = self.bindings.get(arg.name)
            if binding is None:
                self.fail(f"tensor argument {arg.name} is not bound")
            storage = binding.storage
            if storage.ndim != 1 or storage.dtype != arg.dtype.numpy:
                self.fail(
                    f"{arg.name} is bound to a {storage.ndim}-d {storage.dtype} array; "
                    f"it needs flat {arg.dtype.numpy} storage"
                )
            if len(binding.logical_size) != arg.ndim or len(binding.alloc_stride) != arg.alloc_ndim:
                self.fail(
                    f"{arg.name} has {arg.ndim} logical and {arg.alloc_ndim} allocated axes; the binding gives "
                    f"logical_size {binding.logical_size} and alloc_stride {binding.alloc_stride}"
                )
            buffers[arg.name] = _Buffer(arg.name, arg.dtype, Memory.global_, storage, writable=arg.is_output)
        for scalar in self.kernel.scalars:
            if scalar.name not in self.scalars:
                self.fail(f"scalar argument {scalar.name} is not given")
        return buffers

    def first(self, bad: np.ndarray) -> int:
        """The first lane where `bad` holds."""
        return int(np.flatnonzero(np.broadcast_to(bad, (self.launch.count,)))[0])

    def uniform(self, node: Node, frame: _Frame, what: str) -> int:
        """An integer that must be the same on every active lane (a loop or launch extent)."""
        value = self.eval(node, frame)
        if value.ndim == 0:
            return int(value)
        active = frame.mask.nonzero()[0]
        differs = value[active] != value[active[0]]
        if differs.any():
            a, b = active[0], active[int(np.flatnonzero(differs)[0])]
            self.fail(
                f"{what} ({expr_text(node)}) differs across lanes: {value[a]} on {self.launch.describe(a)}, "
                f"{value[b]} on {self.launch.describe(b)}"
            )
        return int(value[active[0]])

    # -- statements -------------------------------------------------------------------

    def block(self, stmts: list[Stmt], frame: _Frame) -> None:
        for stmt in stmts:
            self.stmt(stmt, frame)

    def stmt(self, stmt: Stmt, frame: _Frame) -> None:
        if isinstance(stmt, For):
            if stmt.hardware is None:
                self.serial_loop(stmt, frame)
            else:
                self.parallel_loop(stmt, frame)
        elif isinstance(stmt, If):
            self.branch(stmt, frame)
        elif isinstance(stmt, Alloc):
            frame.buffers[stmt.buffer] = self.allocate(stmt, frame)
        elif isinstance(stmt, Define):
            frame.vars[stmt.var.name] = _typed(self.eval(stmt.value, frame), stmt.var.dtype)
        elif isinstance(stmt, Store):
            buf = self.buffer(stmt.buffer, frame)
            self.write(buf, self.eval(stmt.index, frame), self.eval(stmt.value, frame), frame.mask)
        elif isinstance(stmt, VectorCopy):
            self.vector_copy(stmt, frame)
        elif isinstance(stmt, Sync):
            self.sync(frame)
        elif isinstance(stmt, ParallelReduce):
            self.parallel_reduce(stmt, frame)
        else:
            raise TypeError(f"unknown kernel IR statement {stmt!r}")

    def serial_loop(self, loop: For, frame: _Frame) -> None:
        """serial, unroll, unswitch and vectorize loops: one iteration at a time, on all lanes."""
        extent = self.uniform(loop.extent, frame, f"extent of {loop.kind.value} loop {loop.index.name}")
        for i in range(extent):
            inner = frame.child(frame.mask)
            inner.vars[loop.index.name] = _typed(i, loop.index.dtype)
            self.block(loop.body, inner)

    def parallel_loop(self, loop: For, frame: _Frame) -> None:
        """A loop bound to blockIdx/threadIdx: its index is each lane's hardware index."""
        hardware = str(loop.hardware)
        if hardware not in self.launch.dims:
            self.fail(f"loop {loop.index.name} is bound to {hardware!r}, not one of {', '.join(HARDWARE)}")
        launched = self.launch.dims[hardware]
        extent = self.uniform(loop.extent, frame, f"extent of {hardware} loop {loop.index.name}")
        if extent > launched:
            self.fail(f"{hardware} loop {loop.index.name} needs {extent} but the launch has {launched}")
        if extent < launched and not loop.guarded:
            self.fail(
                f"{hardware} loop {loop.index.name} has extent {extent} < launched {launched} "
                "but is not guarded: the extra threads would run past it"
            )
        index = self.launch.index[hardware]
        mask = frame.mask & (index < extent) if loop.guarded else frame.mask
        if not mask.any():
            return
        inner = frame.child(mask)
        inner.vars[loop.index.name] = _typed(index, loop.index.dtype)
        self.block(loop.body, inner)

    def branch(self, stmt: If, frame: _Frame) -> None:
        cond = self.eval(stmt.cond, frame).astype(bool)
        for body, mask in ((stmt.then, frame.mask & cond), (stmt.orelse, frame.mask & ~cond)):
            if body and mask.any():
                self.block(body, frame.child(mask))

    def allocate(self, alloc: Alloc, frame: _Frame) -> _Buffer:
        rows = {Memory.local: (self.launch.count,), Memory.shared: (self.launch.blocks,), Memory.global_: ()}
        shape = (*rows[alloc.memory], alloc.size)
        fill = 0 if alloc.zero else _poison(alloc.dtype)
        data = np.full(shape, fill, dtype=alloc.dtype.numpy)
        if alloc.init is not None:
            data[...] = self.initial_value(alloc, frame)
        unsynced = np.full(shape, -1, np.int64) if alloc.memory is Memory.shared else None
        return _Buffer(alloc.buffer, alloc.dtype, alloc.memory, data, unsynced=unsynced)

    def initial_value(self, alloc: Alloc, frame: _Frame) -> np.ndarray:
        """`alloc.init` in the buffer's type, shaped to fill it: per lane for a register
        array; shared and global memory need one value for all the lanes that allocate it."""
        assert alloc.init is not None
        value = _widen(self.eval(alloc.init, frame))
        value = _typed(_convert(value, alloc.init.dtype, alloc.dtype), alloc.dtype)
        if value.ndim == 0:
            return value
        if alloc.memory is Memory.local:
            return value[:, None]
        active = np.flatnonzero(frame.mask)
        if active.size == 0:
            return value[0]
        bits = np.ascontiguousarray(value[active]).view(np.uint8).reshape(active.size, -1)
        differs = (bits != bits[0]).any(axis=1)
        if differs.any():
            a, b = active[0], active[int(np.flatnonzero(differs)[0])]
            self.fail(
                f"initial value of {alloc.memory.value} {alloc.buffer} ({expr_text(alloc.init)}) differs across "
                f"lanes: {value[a]} on {self.launch.describe(a)}, {value[b]} on {self.launch.describe(b)}"
            )
        return value[active[0]]

    def sync(self, frame: _Frame) -> None:
        """`__syncthreads()`. Lock-step execution already finishes every statement on all
        lanes before the next, so it moves no data; it checks that whole blocks reach it
        and ends the window in which reading another thread's shared-memory write is a race."""
        self.end_race_window(self.whole_blocks(frame, "Sync"), frame)

    def whole_blocks(self, frame: _Frame, what: str) -> np.ndarray:
        """Which blocks reach a barrier; a block that only part of reaches is a fault."""
        per_block = frame.mask.reshape(self.launch.blocks, self.launch.threads)
        arrived = np.asarray(per_block.any(axis=1))
        partial = arrived & ~per_block.all(axis=1)
        if partial.any():
            lane = self.first(np.repeat(partial, self.launch.threads) & ~frame.mask)
            self.fail(
                f"{what} reached by only part of a block (not by {self.launch.describe(lane)}): divergent barrier"
            )
        return arrived

    def end_race_window(self, arrived: np.ndarray, frame: _Frame) -> None:
        for buf in frame.buffers.values():
            if buf.unsynced is not None:
                buf.unsynced[arrived] = -1

    # -- block and grid reductions ----------------------------------------------------

    def parallel_reduce(self, red: ParallelReduce, frame: _Frame) -> None:
        """A block (or grid) reduction, by its meaning rather than its work buffers: the
        values of each group of lanes are combined at once, and every lane of the group
        gets the result (a grid reduction: every lane of the group in its last block, the
        one at gridDim - 1 along every reduced block dimension, where `last` is true)."""
        what = f"{'grid' if red.block_dims else 'block'} reduction of {', '.join(red.buffers)}"
        buffers = self.check_reduction(red, frame, what)
        for names, kind in ((red.workspace, "shared scratch"), (red.work, "work buffer")):
            if len(set(names)) != len(names):  # the CUDA form would combine into one array twice
                self.fail(f"{what} gives one {kind} to two of its buffers: {', '.join(names)}")
        arrived = self.whole_blocks(frame, f"ParallelReduce ({what})")
        group = self.reduction_groups(red)
        lanes = np.flatnonzero(frame.mask)
        if red.block_dims:
            self.check_whole_grid(red, group, lanes, what)
        last = np.ones(self.launch.count, bool)
        for hw in red.block_dims:
            last &= self.launch.index[hw] == self.launch.dims[hw] - 1
        index = self.eval(red.index, frame)
        results = []
        if lanes.size:
            order = np.argsort(group[lanes], kind="stable")
            members = lanes[order]
            for k in range(red.count):
                values = [_widen(self.read(buf, index + k, frame.mask))[members] for buf in buffers]
                results.append((members, _reduce_groups(red.op, group[members], values)))
        self.end_race_window(arrived, frame)  # the reduction synchronizes
        target = frame.mask & last
        for k, (members, reduced) in enumerate(results):
            for buf, value in zip(buffers, reduced, strict=True):
                full = np.zeros(self.launch.count, value.dtype)
                full[members] = value
                self.write(buf, index + k, full, target)
        self.end_race_window(arrived, frame)  # every thread of the group may read the result
        if red.last is not None:
            frame.vars[red.last.name] = _typed(last, red.last.dtype)

    def check_reduction(self, red: ParallelReduce, frame: _Frame, what: str) -> list[_Buffer]:
        if red.op not in REDUCE_OPS:
            self.fail(f"{what}: unknown reduction op {red.op!r} (one of {', '.join(REDUCE_OPS)})")
        expected = 3 if red.op == "welford" else 1
        if len(red.buffers) != expected or len(red.dtypes) != expected:
            self.fail(f"{what}: op {red.op} combines {expected} buffer(s), given {red.buffers} typed {red.dtypes}")
        if red.count < 1:
            self.fail(f"{what}: count {red.count} < 1")
        for kind, dims in (("threadIdx", red.thread_dims), ("blockIdx", red.block_dims)):
            for hw in dims:
                if hw not in self.launch.dims or not hw.startswith(kind + "."):
                    self.fail(f"{what}: {hw!r} is not one of {kind}.x, {kind}.y, {kind}.z")
        buffers = [self.buffer(name, frame) for name in red.buffers]
        for buf, dtype in zip(buffers, red.dtypes, strict=True):
            if buf.dtype != dtype:
                self.fail(f"{what}: {buf.name} ({buf.dtype.cuda}) is typed {dtype.cuda}")
        if red.op.startswith("bitwise") and not (buffers[0].dtype.is_integral or buffers[0].dtype.is_boolean):
            self.fail(f"{what}: {red.op} of {buffers[0].dtype.cuda}")
        return buffers

    def reduction_groups(self, red: ParallelReduce) -> np.ndarray:
        """Each lane's group: its coordinates along the dimensions not reduced (all of its
        block's when no block dimension is), as one mixed-radix number."""
        reduced = {*red.thread_dims, *red.block_dims}
        group = np.zeros(self.launch.count, np.int64)
        for hw in HARDWARE:
            if hw not in reduced:
                group = group * self.launch.dims[hw] + self.launch.index[hw]
        return group

    def check_whole_grid(self, red: ParallelReduce, group: np.ndarray, lanes: np.ndarray, what: str) -> None:
        """A grid reduction waits for every block along its dimensions: one that never
        arrives leaves the last block waiting forever."""
        arrived = np.zeros(self.launch.count, bool)
        arrived[lanes] = True
        reached = np.zeros(self.launch.count, bool)
        reached[group[lanes]] = True
        missing = reached[group] & ~arrived
        if missing.any():
            lane = self.first(missing)
            self.fail(
                f"{what} over {', '.join(red.block_dims)} is not reached by {self.launch.describe(lane)}: "
                "the grid reduction would wait for it forever"
            )

    # -- memory -----------------------------------------------------------------------

    def buffer(self, name: str, frame: _Frame) -> _Buffer:
        buf = frame.buffers.get(name)
        if buf is None:
            self.fail(f"buffer {name} is neither a tensor argument nor allocated in scope")
        return buf

    def rows(self, buf: _Buffer) -> np.ndarray | None:
        """The row of a register array or shared buffer each lane accesses (None: global)."""
        if buf.memory is Memory.local:
            return self.launch.lanes
        if buf.memory is Memory.shared:
            return self.launch.block_of
        return None

    def offsets(self, buf: _Buffer, index: np.ndarray, mask: np.ndarray, access: str, width: int = 1) -> np.ndarray:
        """One element offset per lane: active lanes must cover `[index, index + width)`
        inside the buffer; inactive ones are clamped into it."""
        if index.dtype.kind not in "iu":
            self.fail(f"{access} of {buf.name} has a non-integer index of type {index.dtype}")
        idx = np.broadcast_to(index, mask.shape).astype(np.int64)
        bad = mask & ((idx < 0) | (idx > buf.size - width))
        if bad.any():
            lane = self.first(bad)
            span = f"[{idx[lane]}]" if width == 1 else f"[{idx[lane]} .. {idx[lane] + width - 1}]"
            self.fail(
                f"{access} {buf.name}{span} out of bounds ({buf.memory.value} buffer of {buf.size} elements) "
                f"on {self.launch.describe(lane)}"
            )
        return np.clip(idx, 0, max(buf.size - width, 0))

    def read(self, buf: _Buffer, index: np.ndarray, mask: np.ndarray) -> np.ndarray:
        idx = self.offsets(buf, index, mask, "read of")
        if buf.size == 0:  # no lane is active here: offsets() would have failed
            return np.zeros(self.launch.count, buf.data.dtype)
        rows = self.rows(buf)
        if buf.unsynced is not None and rows is not None:
            self.check_synced(buf, rows, idx, mask)
        return buf.data[idx] if rows is None else buf.data[rows, idx]

    def write(self, buf: _Buffer, index: np.ndarray, value: np.ndarray, mask: np.ndarray) -> None:
        if not buf.writable:
            self.fail(f"writes to input {buf.name}")
        idx = self.offsets(buf, index, mask, "write to")
        lanes = np.flatnonzero(mask)
        if lanes.size == 0:
            return
        idx = idx[lanes]
        values = _typed(np.broadcast_to(value, mask.shape)[lanes], buf.dtype)
        rows = self.rows(buf)
        if rows is None:
            self.check_race(buf, idx, values, lanes)
            buf.data[idx] = values
            self.record(buf, idx, lanes)
            return
        if buf.memory is Memory.shared:
            self.check_race(buf, rows[lanes] * buf.size + idx, values, lanes)
        buf.data[rows[lanes], idx] = values
        if buf.unsynced is not None:
            buf.unsynced[rows[lanes], idx] = self.launch.thread_of[lanes]

    def check_race(self, buf: _Buffer, slots: np.ndarray, values: np.ndarray, lanes: np.ndarray) -> None:
        """Two threads writing different values (bit for bit) to one slot is a data race."""
        order = np.argsort(slots, kind="stable")
        slots, values, lanes = slots[order], values[order], lanes[order]
        same_slot = slots[1:] == slots[:-1]
        if not same_slot.any():
            return
        bits = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), -1)
        clash = same_slot & (bits[1:] != bits[:-1]).any(axis=1)
        if clash.any():
            j = int(np.flatnonzero(clash)[0])
            element = int(slots[j]) % max(buf.size, 1)
            self.fail(
                f"data race: {self.launch.describe(int(lanes[j]))} and {self.launch.describe(int(lanes[j + 1]))} "
                f"write different values ({values[j]}, {values[j + 1]}) to {buf.name}[{element}]"
            )

    def check_synced(self, buf: _Buffer, rows: np.ndarray, idx: np.ndarray, mask: np.ndarray) -> None:
        """Reading a shared slot another thread wrote since the last Sync is a race."""
        assert buf.unsynced is not None
        writer = buf.unsynced[rows, idx]
        stale = mask & (writer >= 0) & (writer != self.launch.thread_of)
        if stale.any():
            lane = self.first(stale)
            other = _unravel(writer[lane : lane + 1], self.launch.block)[0]
            self.fail(
                f"{self.launch.describe(lane)} reads shared {buf.name}[{idx[lane]}] written by threadIdx="
                f"{tuple(int(c) for c in other)} with no Sync between"
            )

    def record(self, buf: _Buffer, idx: np.ndarray, lanes: np.ndarray) -> None:
        if self.lane_writes is not None and buf.name in self.lane_writes.lane:
            self.lane_writes.lane[buf.name][idx] = lanes
            np.add.at(self.lane_writes.count[buf.name], idx, 1)

    def vector_copy(self, copy: VectorCopy, frame: _Frame) -> None:
        """`width` consecutive elements in one access: in bounds as a whole, and aligned to
        `width` elements on the global (or shared) side."""
        src, dst = self.buffer(copy.src, frame), self.buffer(copy.dst, frame)
        if copy.width * copy.dtype.itemsize > MAX_VECTOR_BYTES:
            self.fail(f"vector x{copy.width} of {copy.dtype.cuda} from {src.name} to {dst.name} exceeds 16 bytes")
        for buf in (src, dst):
            if buf.dtype != copy.dtype:
                self.fail(f"vector copy of {copy.dtype.cuda} uses {buf.name} of {buf.dtype.cuda}")
        src_index, dst_index = self.eval(copy.src_index, frame), self.eval(copy.dst_index, frame)
        for buf, index in ((src, src_index), (dst, dst_index)):
            self.offsets(buf, index, frame.mask, f"vector x{copy.width} access to", copy.width)
            if buf.memory is not Memory.local:
                self.check_aligned(buf, index, copy.width, frame.mask)
        values = [self.read(src, src_index + k, frame.mask) for k in range(copy.width)]
        for k, value in enumerate(values):
            self.write(dst, dst_index + k, value, frame.mask)

    def check_aligned(self, buf: _Buffer, index: np.ndarray, width: int, mask: np.ndarray) -> None:
        """The byte address of a vector access must be a multiple of its size. Allocations
        are taken as 16-byte aligned; a tensor bound to a view (a slice of a larger array)
        starts where the view starts in its allocation."""
        itemsize = buf.dtype.itemsize
        address = _offset_in_allocation(buf.data) + np.broadcast_to(index, mask.shape).astype(np.int64) * itemsize
        misaligned = mask & (address % (width * itemsize) != 0)
        if misaligned.any():
            lane = self.first(misaligned)
            self.fail(
                f"vector x{width} access to {buf.name}[{np.broadcast_to(index, mask.shape)[lane]}] is not aligned "
                f"to {width} elements ({width * itemsize} bytes; byte {address[lane]} of its allocation) "
                f"on {self.launch.describe(lane)}"
            )

    # -- expressions ------------------------------------------------------------------

    def eval(self, node: Node, frame: _Frame) -> np.ndarray:
        """`node`'s value on every lane (0-d when uniform), in its dtype's storage type."""
        if isinstance(node, Const):
            return _typed(node.value, node.dtype)
        if isinstance(node, Var):
            value = frame.vars.get(node.name)
            if value is None and node.name in self.launch.index:  # `threadIdx.x` etc., read directly
                value = _typed(self.launch.index[node.name], node.dtype)
            if value is None:
                self.fail(f"variable {node.name} is read outside its scope or before its definition")
            return value
        if isinstance(node, ScalarParam):
            if node.name not in self.scalars:
                self.fail(f"scalar {node.name} is not given")
            return _typed(self.scalars[node.name], node.dtype)
        if isinstance(node, TensorField):
            return _typed(self.tensor_field(node), node.dtype)
        if isinstance(node, Bin):
            return self.binary(node, frame)
        if isinstance(node, Un):
            return self.unary(node, frame)
        if isinstance(node, Call):
            return self.call(node, frame)
        if isinstance(node, Cast):
            value = _widen(self.eval(node.a, frame))
            return _typed(_convert(value, node.a.dtype, node.dtype), node.dtype)
        if isinstance(node, Read):
            buf = self.buffer(node.buffer, frame)
            if buf.dtype != node.dtype:
                self.fail(f"read of {buf.name} ({buf.dtype.cuda}) is typed {node.dtype.cuda}")
            return self.read(buf, self.eval(node.index, frame), frame.mask)
        raise TypeError(f"unknown kernel IR expression {node!r}")

    def tensor_field(self, node: TensorField) -> int:
        binding = self.bindings.get(node.tensor)
        if binding is None or node.field not in ("logical_size", "alloc_stride"):
            self.fail(f"{expr_text(node)} names no tensor argument field")
        values = getattr(binding, node.field)
        if not 0 <= node.axis < len(values):
            self.fail(f"{expr_text(node)}: {node.tensor} has {len(values)} axes in {node.field}")
        return int(values[node.axis])

    def binary(self, node: Bin, frame: _Frame) -> np.ndarray:
        if node.op in ("&&", "||"):
            return self.logical(node, frame)
        operand = _operand_type(node)
        a = self.eval(node.a, frame).astype(operand)
        b = self.eval(node.b, frame).astype(operand)
        if node.op in _COMPARISONS:
            result = _COMPARISONS[node.op](a, b)
        elif node.op in _DIVISIONS:
            result = self.divide(node, a, b, frame.mask)
        elif node.op in _ARITHMETIC:
            result = _ARITHMETIC[node.op](a, b)
        else:
            self.fail(f"unknown operator {node.op!r} in {expr_text(node)}")
        return _typed(result, node.dtype)

    def divide(self, node: Bin, a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> Any:
        if b.dtype.kind in "iu":
            zero = mask & (b == 0)
            if zero.any():
                self.fail(f"integer division by zero in {expr_text(node)} on {self.launch.describe(self.first(zero))}")
            b = np.where(b == 0, np.ones((), b.dtype), b)  # inactive lanes
        return _DIVISIONS[node.op](a, b)

    def logical(self, node: Bin, frame: _Frame) -> np.ndarray:
        """`&&` and `||` short-circuit: the right side runs only where the left does not decide."""
        a = self.eval(node.a, frame).astype(bool)
        undecided = frame.mask & (a if node.op == "&&" else ~a)
        b = self.eval(node.b, frame.masked(undecided)).astype(bool) if undecided.any() else np.zeros((), bool)
        result = a & b if node.op == "&&" else a | b
        return _typed(result, node.dtype)

    def unary(self, node: Un, frame: _Frame) -> np.ndarray:
        a = self.eval(node.a, frame)
        if node.op == "!":
            return _typed(np.logical_not(a.astype(bool)), node.dtype)
        if node.op not in ("-", "~"):
            self.fail(f"unknown operator {node.op!r} in {expr_text(node)}")
        operand = DataType.Int32 if node.a.dtype == DataType.Bool else node.a.dtype
        fn = np.negative if node.op == "-" else np.invert
        return _typed(fn(a.astype(operand.compute_numpy)), node.dtype)

    def call(self, node: Call, frame: _Frame) -> np.ndarray:
        drawn = parse_rng_function(node.fn)
        if drawn is not None:
            seed, offset, index, *params = (self.eval(arg, frame) for arg in node.args)
            return random_at(RNGOpType(drawn[0]), drawn[1], index, seed, offset, params)
        rule = device_function(node.fn)
        if rule is None:
            self.fail(f"unknown device function {node.fn!r} in {expr_text(node)}")
        args = [_widen(self.eval(arg, frame)) for arg in node.args]
        return _typed(rule.numpy(*args), node.dtype)
