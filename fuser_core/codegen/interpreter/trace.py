"""Where one output element came from: the kernel run on the interpreter for only the
blocks that matter, following the values that flow into that one element.

`trace_kernel_element(kernel, tensors, scalars, "T3", offset)`:

1. finds the block that writes `T3[offset]` without running the whole grid: blocks run
   lazily, the one whose share of the output holds the element first, then ever larger
   batches around it, each run stopped at the first write of the element. A kernel with
   a grid reduction runs whole columns of blocks (every block along its reduced block
   dimensions) as one unit, since its result needs them all;
2. runs that block (unit) again with the value flow followed: every register, shared
   and global slot and every defined variable carries the set of input elements its
   value was computed from, and each block or grid reduction the set of its members'
   partials. At the store of the element it records the writing thread, the enclosing
   loops' indices, the predicates that held on the way, and every input element read.

Only the lanes that may feed the writer carry sets: those that differ from it only along
reduced dimensions, or every lane of the unit where the kernel moves data between threads
through shared or global scratch memory (a transpose).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuser_core.codegen.interpreter.launch import Dim3, TensorBinding, _Launch, _unravel
from fuser_core.codegen.interpreter.machine import _Machine
from fuser_core.codegen.interpreter.memory import _Buffer, _Frame
from fuser_core.codegen.interpreter.reductions import tree_steps
from fuser_core.codegen.interpreter.values import ScalarValue, _widen
from fuser_core.codegen.kernel_ir import (
    Alloc,
    Bin,
    Call,
    Cast,
    Define,
    FastDiv,
    For,
    If,
    Kernel,
    Memory,
    Node,
    ParallelReduce,
    Read,
    Stmt,
    Store,
    Un,
    Var,
    VectorCopy,
    expr_text,
    walk,
)
from fuser_core.errors import InternalError

MAX_BATCH_LANES = 1 << 16  # the most lanes one search batch runs at once (its memory)
Deps = dict[int, frozenset[tuple[Any, ...]]]  # lane -> the input elements (and reductions) behind a value
_REDUCE = "#reduce"  # the first field of a dependency that is a reduction, not an input element


@dataclass(frozen=True)
class ReductionTrace:
    """One block or grid reduction the element's value went through: each member's
    partial (in rank order) and the pairs of ranks combined at each step of the tree."""

    op: str
    buffers: tuple[str, ...]
    over: tuple[str, ...]  # the hardware dimensions reduced
    partials: tuple[tuple[Dim3, Dim3, tuple[Any, ...]], ...]  # (blockIdx, threadIdx, a value per buffer)
    steps: tuple[tuple[tuple[int, int], ...], ...]
    result: tuple[Any, ...]


@dataclass(frozen=True)
class KernelTrace:
    """How one element of an output was written."""

    kernel: str
    grid: Dim3
    block: Dim3
    blocks_run: int  # distinct blocks interpreted to find and follow the writer (of math.prod(grid))
    block_idx: Dim3
    thread_idx: Dim3
    statement: str  # the kernel IR statement that wrote it
    value: Any
    loops: tuple[tuple[str, str, int], ...]  # (index, kind or hardware, value), outermost first
    predicates: tuple[str, ...]  # the conditions that held on the way to the store
    reads: tuple[tuple[str, int, Any], ...]  # (tensor, storage offset, value) of every input element behind it
    reductions: tuple[ReductionTrace, ...]


class _Found(Exception):
    """Raised by the tracing machine at the write of the element: nothing after it matters."""


@dataclass
class _ReduceEvent:
    red: ParallelReduce
    lanes: np.ndarray  # active lanes, in rank order within each group
    group: np.ndarray  # each of those lanes' group
    partials: list[np.ndarray]  # per buffer, per lane of `lanes`
    results: list[np.ndarray] | None = None
    holds: np.ndarray | None = None  # which of `lanes` hold the result (a grid reduction: the last block's)


def trace_kernel_element(
    kernel: Kernel,
    tensors: Mapping[str, TensorBinding],
    scalars: Mapping[str, ScalarValue],
    buffer: str,
    offset: int,
    grid: Dim3,
    block: Dim3,
) -> KernelTrace | None:
    """How `kernel` writes `buffer[offset]` (a storage offset), on a `grid` x `block`
    launch; None where no thread of the launch writes it. Output storage is overwritten
    by the blocks that run."""
    units = _units(kernel, grid)
    size = max(tensors[buffer].storage.size, 1)
    guess = min(offset * len(units) // size, len(units) - 1) if units else 0
    order = sorted(range(len(units)), key=lambda u: (abs(u - guess), u))
    most = max(1, MAX_BATCH_LANES // max(math.prod(block) * (len(units[0]) if units else 1), 1))
    run, start, batch = 0, 0, 1
    while start < len(order):
        chosen = [units[u] for u in order[start : start + batch]]
        blocks = np.concatenate(chosen)
        run += len(blocks)
        hit = _run(kernel, tensors, scalars, grid, block, blocks, buffer, offset, None)
        if hit is not None:
            writer = next(u for u in chosen if hit.block_id in u)  # run again, not counted again
            followed = _run(kernel, tensors, scalars, grid, block, writer, buffer, offset, hit)
            if followed is None:
                raise InternalError(f"kernel {kernel.name}: {buffer}[{offset}] is written in a batch but not alone")
            return followed.finish(kernel.name, grid, block, run)
        start, batch = start + batch, min(batch * 2, most)
    return None


def _units(kernel: Kernel, grid: Dim3) -> list[np.ndarray]:
    """The linear block ids that run together: one block each, or for a kernel with a
    grid reduction, the blocks that differ only along its reduced block dimensions."""
    reduced = {hw for s in walk(kernel.body) if isinstance(s, ParallelReduce) for hw in s.block_dims}
    ids = np.arange(math.prod(grid), dtype=np.int64)
    coords = _unravel(ids, grid)
    key = np.zeros(ids.size, np.int64)
    for a in reversed(range(3)):
        if f"blockIdx.{'xyz'[a]}" not in reduced:
            key = key * grid[a] + coords[:, a]
    if ids.size == 0:
        return []
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.concatenate([[True], key[order][1:] != key[order][:-1]]))
    return [np.sort(part) for part in np.split(order, starts[1:])]


def _run(
    kernel: Kernel,
    tensors: Mapping[str, TensorBinding],
    scalars: Mapping[str, ScalarValue],
    grid: Dim3,
    block: Dim3,
    blocks: np.ndarray,
    buffer: str,
    offset: int,
    writer: _Hit | None,
) -> _Hit | None:
    """Runs `blocks` until the element is written; with the `writer` a first run found,
    follows the value flow of the lanes that may feed it."""
    launch = _Launch(grid, block, blocks)
    machine = _TracingMachine(kernel, launch, tensors, scalars, None)
    machine.target, machine.offset = buffer, offset
    if writer is not None:
        machine.follow = True
        machine.followed = _feeding_lanes(kernel, launch, writer)
    with np.errstate(all="ignore"):
        try:
            machine.run()
        except _Found:
            return machine.hit
    return None


def _feeding_lanes(kernel: Kernel, launch: _Launch, writer: _Hit) -> np.ndarray:
    """The lanes whose values may flow into the writer's: every lane where the kernel
    exchanges data through shared or global scratch memory; else (data moves between
    threads only through reductions) the lanes that differ from the writer only along
    the dimensions some reduction reduces."""
    stmts = list(walk(kernel.body))
    workspaces = {name for s in stmts if isinstance(s, ParallelReduce) for name in (*s.workspace, *s.work)}
    scratch = [s for s in stmts if isinstance(s, Alloc) and s.memory is not Memory.local and s.buffer not in workspaces]
    lanes = np.ones(launch.count, bool)
    if scratch:
        return lanes
    reduced = {hw for s in stmts if isinstance(s, ParallelReduce) for hw in (*s.thread_dims, *s.block_dims)}
    coords = {**{f"blockIdx.{a}": c for a, c in zip("xyz", writer.block_idx, strict=True)},
              **{f"threadIdx.{a}": c for a, c in zip("xyz", writer.thread_idx, strict=True)}}  # fmt: skip
    for hw, value in coords.items():
        if hw not in reduced:
            lanes &= launch.index[hw] == value
    return lanes


@dataclass
class _Hit:
    """What the tracing machine saw at the write of the element."""

    block_id: int
    block_idx: Dim3
    thread_idx: Dim3
    statement: str
    value: Any
    loops: tuple[tuple[str, str, int], ...]
    predicates: tuple[str, ...]
    reads: tuple[tuple[str, int, Any], ...]
    reductions: tuple[ReductionTrace, ...]

    def finish(self, name: str, grid: Dim3, block: Dim3, run: int) -> KernelTrace:
        return KernelTrace(
            name,
            grid,
            block,
            run,
            self.block_idx,
            self.thread_idx,
            self.statement,
            self.value,
            self.loops,
            self.predicates,
            self.reads,
            self.reductions,
        )


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Bin):
        return (node.a, node.b)
    if isinstance(node, (Un, Cast, FastDiv)):
        return (node.a,)
    if isinstance(node, Call):
        return node.args
    return ()


def _scalar(value: Any) -> Any:
    return np.asarray(value).item()


class _TracingMachine(_Machine):
    """The machine, watching for the write of one element and (when `follow`) carrying
    with every value the input elements it was computed from."""

    target = ""
    offset = 0
    follow = False
    followed: np.ndarray  # the lanes whose values are followed (set with `follow`)
    hit: _Hit | None = None

    def run(self) -> None:
        self.path: list[tuple[str, ...]] = []  # ("loop", index, kind) and ("pred", text) around the statement
        self.var_deps: dict[str, Deps] = {}
        self.slot_deps: dict[str, dict[tuple[int, int], frozenset[tuple[Any, ...]]]] = {}
        self.reduce_log: list[_ReduceEvent] = []
        self.expands: dict[tuple[Any, ...], frozenset[tuple[Any, ...]]] = {}
        super().run()

    # -- where the statement is ----------------------------------------------------------

    def serial_loop(self, loop: For, frame: _Frame) -> None:
        self.path.append(("loop", loop.index.name, loop.kind.value))
        super().serial_loop(loop, frame)
        self.path.pop()

    def parallel_loop(self, loop: For, frame: _Frame) -> None:
        assert loop.hardware is not None
        pushed: list[tuple[str, ...]] = [("loop", loop.index.name, loop.hardware)]
        if loop.guarded:
            pushed.append(("pred", f"{loop.index.name} < {expr_text(loop.extent)}"))
        self.path.extend(pushed)
        super().parallel_loop(loop, frame)
        del self.path[-len(pushed) :]

    def branch(self, stmt: If, frame: _Frame) -> None:
        cond = self.eval(stmt.cond, frame).astype(bool)
        text = expr_text(stmt.cond)
        for body, mask, shown in ((stmt.then, frame.mask & cond, text), (stmt.orelse, frame.mask & ~cond, f"!{text}")):
            if body and mask.any():
                self.path.append(("pred", shown))
                self.block(body, frame.child(mask))
                self.path.pop()

    # -- statements ------------------------------------------------------------------------

    def stmt(self, stmt: Stmt, frame: _Frame) -> None:
        if isinstance(stmt, Store) and stmt.buffer == self.target:
            self.store_target(stmt, frame)
        elif isinstance(stmt, VectorCopy) and stmt.dst == self.target:
            self.copy_target(stmt, frame)
        elif not self.follow or isinstance(stmt, (For, If)):
            super().stmt(stmt, frame)
        elif isinstance(stmt, Define):
            self.follow_define(stmt, frame)
        elif isinstance(stmt, Store):
            deps, index = self.deps(stmt.value, frame), self.eval(stmt.index, frame)
            super().stmt(stmt, frame)
            self.assign(self.buffer(stmt.buffer, frame), index, frame.mask, deps)
        elif isinstance(stmt, VectorCopy):
            self.follow_copy(stmt, frame)
        elif isinstance(stmt, ParallelReduce):
            self.follow_reduce(stmt, frame)
        else:
            super().stmt(stmt, frame)
            if isinstance(stmt, Alloc):
                self.slot_deps[stmt.buffer] = {}

    def follow_define(self, stmt: Define, frame: _Frame) -> None:
        deps = self.deps(stmt.value, frame)
        super().stmt(stmt, frame)
        mask = frame.mask & self.followed
        kept = {lane: s for lane, s in self.var_deps.get(stmt.var.name, {}).items() if not mask[lane]}
        kept.update({lane: s for lane, s in deps.items() if mask[lane]})
        self.var_deps[stmt.var.name] = kept

    def follow_copy(self, copy: VectorCopy, frame: _Frame) -> None:
        src, dst = self.buffer(copy.src, frame), self.buffer(copy.dst, frame)
        src_index, dst_index = self.eval(copy.src_index, frame), self.eval(copy.dst_index, frame)
        moved = [self.slot_values(src, src_index + k, frame.mask) for k in range(copy.width)]
        super().stmt(copy, frame)
        for k, deps in enumerate(moved):
            self.assign(dst, dst_index + k, frame.mask, deps)

    def follow_reduce(self, red: ParallelReduce, frame: _Frame) -> None:
        """Records every member's partial, runs the reduction, and gives each result slot
        the union of its group's dependencies plus the reduction itself."""
        buffers = [self.buffer(name, frame) for name in red.buffers]
        lanes = np.flatnonzero(frame.mask)
        group = self.reduction_groups(red)
        lanes = lanes[np.argsort(group[lanes], kind="stable")]
        index = np.broadcast_to(self.eval(red.index, frame), frame.mask.shape)
        before = []
        for k in range(red.count):
            partials = [_widen(self.read(buf, index + k, frame.mask))[lanes] for buf in buffers]
            deps = [self.slot_values(buf, index + k, frame.mask) for buf in buffers]
            before.append((_ReduceEvent(red, lanes, group[lanes], partials), deps))
        super().stmt(red, frame)
        last = np.ones(self.launch.count, bool)
        for hw in red.block_dims:
            last &= self.launch.index[hw] == self.launch.dims[hw] - 1
        for k, (event, deps) in enumerate(before):
            event.results = [_widen(self.read(buf, index + k, frame.mask))[lanes] for buf in buffers]
            event.holds = last[lanes]
            self.reduce_log.append(event)
            merged = self.group_deps(event, len(self.reduce_log) - 1, deps)
            for buf in buffers:
                self.assign(buf, index + k, frame.mask & last, merged)

    def group_deps(self, event: _ReduceEvent, number: int, deps: list[Deps]) -> Deps:
        """Each followed member's result depends on the reduction alone (one token); the
        token stands for the union of the group's dependencies, kept in `self.expands`
        (so that values after a reduction do not carry whole rows)."""
        followed = self.followed[event.lanes]
        lanes, groups = event.lanes[followed].tolist(), event.group[followed].tolist()
        by_group: dict[int, set[tuple[Any, ...]]] = {}
        for lane, g in zip(lanes, groups, strict=True):
            found = by_group.setdefault(g, set())
            for per_buffer in deps:
                found.update(per_buffer.get(lane, ()))
        tokens = {}
        for g, found in by_group.items():
            token = (_REDUCE, number, g)
            self.expands[token] = frozenset(found)
            tokens[g] = frozenset({token})
        return {lane: tokens[g] for lane, g in zip(lanes, groups, strict=True)}

    def expand(self, deps: frozenset[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The input elements and reductions behind `deps`, reductions' tokens opened."""
        seen: set[tuple[Any, ...]] = set()
        todo = list(deps)
        while todo:
            item = todo.pop()
            if item not in seen:
                seen.add(item)
                todo.extend(self.expands.get(item, ()))
        return sorted(seen, key=lambda d: (d[0], d[1:]))

    # -- the element's write -----------------------------------------------------------------

    def store_target(self, stmt: Store, frame: _Frame) -> None:
        deps = self.deps(stmt.value, frame) if self.follow else {}
        index = np.broadcast_to(self.eval(stmt.index, frame), frame.mask.shape)
        super().stmt(stmt, frame)
        self.check_hit(frame, frame.mask & (index == self.offset), deps, f"{stmt.buffer}[{expr_text(stmt.index)}]")

    def copy_target(self, copy: VectorCopy, frame: _Frame) -> None:
        dst_index = np.broadcast_to(self.eval(copy.dst_index, frame), frame.mask.shape)
        lane_k = self.offset - dst_index
        hit = frame.mask & (lane_k >= 0) & (lane_k < copy.width)
        deps: Deps = {}
        if self.follow and hit.any():
            k = int(lane_k[self.first(hit)])
            deps = self.slot_values(self.buffer(copy.src, frame), self.eval(copy.src_index, frame) + k, frame.mask)
        super().stmt(copy, frame)
        text = f"vector x{copy.width} {copy.dst}[{expr_text(copy.dst_index)}] = {copy.src}[{expr_text(copy.src_index)}]"
        self.check_hit(frame, hit, deps, text)

    def check_hit(self, frame: _Frame, hit: np.ndarray, deps: Deps, statement: str) -> None:
        if not hit.any():
            return
        lane = self.first(hit)
        found = self.expand(deps.get(lane, frozenset()))
        reads = tuple((d[0], d[1], _scalar(self.globals[d[0]].data[d[1]])) for d in found if d[0] != _REDUCE)
        reductions = tuple(self.reduction_trace(d[1], d[2]) for d in found if d[0] == _REDUCE)
        self.hit = _Hit(
            self.linear_block(lane),
            self.coords("blockIdx", lane),
            self.coords("threadIdx", lane),
            statement,
            _scalar(self.globals[self.target].data[self.offset]),
            self.loops(frame, lane),
            tuple(entry[1] for entry in self.path if entry[0] == "pred"),
            reads,
            reductions,
        )
        raise _Found

    def coords(self, kind: str, lane: int) -> Dim3:
        x, y, z = (int(self.launch.index[f"{kind}.{axis}"][lane]) for axis in "xyz")
        return (x, y, z)

    def linear_block(self, lane: int) -> int:
        x, y, z = self.coords("blockIdx", lane)
        grid = self.launch.grid
        return x + grid[0] * (y + grid[1] * z)

    def loops(self, frame: _Frame, lane: int) -> tuple[tuple[str, str, int], ...]:
        found = []
        for entry in self.path:
            if entry[0] == "loop" and entry[1] in frame.vars:
                value = frame.vars[entry[1]]
                found.append((entry[1], entry[2], int(value if value.ndim == 0 else value[lane])))
        return tuple(found)

    def reduction_trace(self, number: int, group: int) -> ReductionTrace:
        event = self.reduce_log[number]
        members = np.flatnonzero(event.group == group)
        lanes = event.lanes[members]
        partials = tuple(
            (
                self.coords("blockIdx", int(lane)),
                self.coords("threadIdx", int(lane)),
                tuple(_scalar(p[m]) for p in event.partials),
            )
            for lane, m in zip(lanes.tolist(), members.tolist(), strict=True)
        )
        assert event.results is not None and event.holds is not None
        holder = members[event.holds[members]][0]
        result = tuple(_scalar(r[holder]) for r in event.results)
        steps = tuple(tuple(step) for step in tree_steps(len(members)))
        red = event.red
        return ReductionTrace(red.op, red.buffers, (*red.thread_dims, *red.block_dims), partials, steps, result)

    # -- value flow ------------------------------------------------------------------------

    def deps(self, node: Node, frame: _Frame, memo: dict[int, Deps] | None = None) -> Deps:
        """The input elements (and reductions) each active lane's value of `node` comes
        from. Lowering shares equal subexpressions, so each node is visited once."""
        memo = {} if memo is None else memo
        found = memo.get(id(node))
        if found is not None:
            return found
        if isinstance(node, Var):
            found = self.var_deps.get(node.name, {})
        elif isinstance(node, Read):
            found = self.slot_values(self.buffer(node.buffer, frame), self.eval(node.index, frame), frame.mask)
        else:
            found = {}
            for child in _children(node):
                for lane, more in self.deps(child, frame, memo).items():
                    have = found.get(lane)
                    found[lane] = more if have is None or have is more else have | more
        memo[id(node)] = found
        return found

    def slot_values(self, buf: _Buffer, index: np.ndarray, mask: np.ndarray) -> Deps:
        idx = np.broadcast_to(index, mask.shape)
        lanes = np.flatnonzero(mask & self.followed)
        if buf.memory is Memory.global_ and not buf.writable:
            name = buf.name
            return {
                lane: frozenset({(name, off)}) for lane, off in zip(lanes.tolist(), idx[lanes].tolist(), strict=True)
            }
        slots = self.slot_deps.get(buf.name, {})
        if not slots:
            return {}
        rows = self.slot_rows(buf, lanes)
        found = {}
        for lane, row, off in zip(lanes.tolist(), rows, idx[lanes].tolist(), strict=True):
            deps = slots.get((row, off))
            if deps is not None:
                found[lane] = deps
        return found

    def slot_rows(self, buf: _Buffer, lanes: np.ndarray) -> list[int]:
        rows = self.rows(buf)
        return [-1] * lanes.size if rows is None else rows[lanes].tolist()

    def assign(self, buf: _Buffer, index: np.ndarray, mask: np.ndarray, deps: Deps) -> None:
        slots = self.slot_deps.setdefault(buf.name, {})
        lanes = np.flatnonzero(mask & self.followed)
        idx = np.broadcast_to(index, mask.shape)[lanes].tolist()
        for lane, row, off in zip(lanes.tolist(), self.slot_rows(buf, lanes), idx, strict=True):
            found = deps.get(lane)
            if found is None:
                slots.pop((row, off), None)
            else:
                slots[(row, off)] = found
