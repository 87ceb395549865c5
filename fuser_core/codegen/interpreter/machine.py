"""The machine: runs kernel IR statements and expressions on every lane of a launch at
once, under a mask of active lanes, and block and grid reductions by their meaning."""

from __future__ import annotations

from typing import Any

import numpy as np

from fuser_core.codegen.interpreter.launch import HARDWARE
from fuser_core.codegen.interpreter.memory import MAX_VECTOR_BYTES, _Buffer, _Frame, _Memory
from fuser_core.codegen.interpreter.reductions import _reduce_groups
from fuser_core.codegen.interpreter.values import (
    _ARITHMETIC,
    _COMPARISONS,
    _DIVISIONS,
    _operand_type,
    _poison,
    _typed,
    _widen,
    device_function,
)
from fuser_core.codegen.kernel_ir import (
    REDUCE_OPS,
    Alloc,
    Bin,
    Call,
    Cast,
    Const,
    Define,
    DivisorArg,
    FastDiv,
    For,
    If,
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
from fuser_core.codegen.magic_division import MagicDivisor, magic_quotient
from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import _convert
from fuser_core.ir.rng import RNGOpType, random_at


class _Machine(_Memory):
    """Executes a kernel in SIMT lock-step (the model is in the package docstring)."""

    def run(self) -> None:
        self.block(self.kernel.body, self.root_frame())

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
        reached = np.zeros(int(group.max()) + 1, bool)
        reached[group[lanes]] = True
        missing = reached[group] & ~arrived
        if missing.any():
            lane = self.first(missing)
            self.fail(
                f"{what} over {', '.join(red.block_dims)} is not reached by {self.launch.describe(lane)}: "
                "the grid reduction would wait for it forever"
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
        if isinstance(node, FastDiv):
            return self.fast_divide(node, frame)
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

    def fast_divide(self, node: FastDiv, frame: _Frame) -> np.ndarray:
        """The quotient (or remainder) by the divisor parameter's magic numbers, computed
        as the device does: wrong numbers give a wrong index here too."""
        n = self.eval(node.a, frame).astype(np.int64)
        if isinstance(node.divisor, int):
            magic = MagicDivisor.of(node.divisor)  # NVRTC's numbers differ; the results do not
        else:
            magic = self.magic_divisor(node.divisor)
        outside = frame.mask & ((n < 0) | (n >= 1 << 31))
        if outside.any():
            lane = self.first(outside)
            value = int(np.broadcast_to(n, outside.shape)[lane])
            self.fail(f"{expr_text(node)} of {value}, outside [0, 2^31), on {self.launch.describe(lane)}")
        if magic.divisor == 0 and frame.mask.any():
            self.fail(
                f"integer division by zero in {expr_text(node)} on {self.launch.describe(self.first(frame.mask))}"
            )
        n = np.clip(n, 0, (1 << 31) - 1)  # inactive lanes
        quotient = magic_quotient(n, np.asarray(magic.magic), np.asarray(magic.shift)).astype(np.int64)
        result = quotient if node.op == "/" else n - quotient * magic.divisor
        return _typed(result, node.dtype)

    def magic_divisor(self, divisor: DivisorArg) -> MagicDivisor:
        found = self.divisors.get(divisor.name)
        if found is None:  # none given: the runtime's numbers, from the extent's value
            extent = self.uniform(divisor.extent, self.root_frame(), f"divisor {divisor.name}")
            found = self.divisors[divisor.name] = MagicDivisor.of(extent)
        return found

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
