"""A grouped loop's block reductions run once for all its iterations (nvFuser's
ParallelType::Group).

The inner-outer scheduler groups a block's rows in twos (`ReductionParams.row_group`):
`[BIDx, rows / G, G (Group), TIDy, ...]`. Lowered as any unrolled loop, each row would
load, reduce (two barriers) and write in turn. Here the group's loop is split at its
block reductions: the global loads of the G rows, then their partial sums (`_loads_first`),
then one reduction of all G rows' partials (one round of barriers), then the G rows'
outputs. What crosses from one loop to the next lives in the group loop's register
arrays, each made G times longer and indexed by the row of the group. H100, layer norm
backward of bf16 [16384, 4096]: 205.7 us one row at a time, 202.1 grouped with each
row's loads beside its sums, 187.6 with the loads first (RESULTS.md, seventeenth and
eighteenth parts).

Left as it is (still correct, only not grouped): a group loop with anything but register
arrays, thread loops and statements around one run of block reductions along the
threads alone."""

from __future__ import annotations

import dataclasses

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.grid_groups import scopes, stmt_reads, stmt_writes
from fuser_core.codegen.lower.model import INDEX
from fuser_core.codegen.simplify import add, const_value, mul

MAX_GROUPED_ELEMENTS = 8  # a reduction's elements over the group: its scratch holds 2 x 8 per warp


def group_loop_reductions(body: list[k.Stmt], launch: list[k.LaunchDim], globals_: set[str]) -> None:
    """Split, in place, every group loop of `body` at its block reductions (above);
    `globals_` names the kernel's global tensors."""
    warps = _fixed_warps(launch)
    for scope in list(scopes(body)):
        for position in reversed(range(len(scope))):
            stmt = scope[position]
            if isinstance(stmt, k.For) and stmt.kind == k.LoopKind.group:
                split = _split(stmt, warps, globals_)
                if split is not None:
                    scope[position : position + 1] = split


def _fixed_warps(launch: list[k.LaunchDim]) -> int:
    """blockDim.x / 32 where every launch of the kernel has it (a padded constant bounds
    the others), else 0."""
    dims = [d for d in launch if d.hardware == "threadIdx.x"]
    padded = [const_value(d.extent) for d in dims if d.padded]
    values = padded or [const_value(d.extent) for d in dims]
    if not values or any(not isinstance(v, int) or isinstance(v, bool) for v in values):
        return 0
    threads = max(values)  # type: ignore[type-var]
    return threads // 32 if isinstance(threads, int) and threads % 32 == 0 else 0


def _split(loop: k.For, warps: int, globals_: set[str]) -> list[k.Stmt] | None:
    group = const_value(loop.extent)
    if not isinstance(group, int) or isinstance(group, bool) or group < 2:
        return None
    wrappers: list[k.For] = []  # thread loops between the group loop and its statements
    body = loop.body
    while len(body) == 1 and isinstance(body[0], k.For) and body[0].kind == k.LoopKind.thread:
        if body[0].guarded:  # a predicated thread loop: not every thread would reach the barriers
            return None
        wrappers.append(body[0])
        body = body[0].body
    reduces = [i for i, s in enumerate(body) if isinstance(s, k.ParallelReduce)]
    if not reduces or reduces != list(range(reduces[0], reduces[-1] + 1)):
        return None
    first, last = reduces[0], reduces[-1] + 1
    before, reductions, after = body[:first], body[first:last], body[last:]
    if any(isinstance(s, k.ParallelReduce | k.Sync) for s in k.walk([*before, *after])):
        return None
    arrays = {s.buffer: s for s in before if isinstance(s, k.Alloc)}
    if any(a.memory != k.Memory.local or a.dynamic_offset is not None for a in arrays.values()):
        return None
    for red in reductions:
        assert isinstance(red, k.ParallelReduce)
        if (
            red.block_dims
            or red.op == "welford"
            or const_value(red.index) != 0
            or any(b not in arrays or arrays[b].size != red.count for b in red.buffers)
            or red.count * group > MAX_GROUPED_ELEMENTS
        ):
            return None
    defined = {s.var.name for s in before if isinstance(s, k.Define)}
    if any(stmt_reads(s) & defined for s in after):  # a scalar of one iteration read in the other loop
        return None
    # Whatever crosses the reduction must be a grown array: a buffer allocated outside the
    # loop (a row in shared memory) would hold the group's last row when the first is read.
    written = {name for s in before for name in stmt_writes(s)} - set(arrays) - defined
    own = {s.buffer for s in k.walk(after) if isinstance(s, k.Alloc)}  # the outputs' own temporaries
    own |= {s.var.name for s in k.walk(after) if isinstance(s, k.Define)}
    if any(stmt_reads(s) & written - own for s in [*reductions, *after]):
        return None
    row = loop.index
    shifted = {name: mul(row, k.Const(INDEX, alloc.size)) for name, alloc in arrays.items()}
    grown = [dataclasses.replace(a, size=a.size * group) for a in arrays.values()]
    kept = [_shift_stmt(s, shifted) for s in before if not isinstance(s, k.Alloc)]
    outputs = [_shift_stmt(s, shifted) for s in after]
    for red in reductions:
        assert isinstance(red, k.ParallelReduce)
        red.count *= group
        red.grouped, red.warps = True, warps
    loads, partials = _loads_first(kept, set(arrays), globals_)
    inner: list[k.Stmt] = [
        *grown,
        *(k.For(row, loop.extent, k.LoopKind.group, part, label=loop.label) for part in (loads, partials) if part),
        *reductions,
        k.For(row, loop.extent, k.LoopKind.group, outputs, label=loop.label),
    ]
    for wrapper in reversed(wrappers):
        inner = [dataclasses.replace(wrapper, body=inner)]
    return inner


def _loads_first(stmts: list[k.Stmt], grown: set[str], globals_: set[str]) -> tuple[list[k.Stmt], list[k.Stmt]]:
    """`stmts` (one row's part before the reduction) as its global loads and the rest, where
    every row's loads may run before any row's arithmetic: all the group's loads are then
    in flight at once, where one row's loads would otherwise wait behind the last row's
    sums (layer norm backward, H100: 202.8 -> 186.9 us, hand-edited generated kernel).

    A load reads global memory and nothing the loop writes, and writes only grown arrays
    that no other statement writes and no statement before it reads."""
    writes_of = [stmt_writes(s) for s in stmts]
    written = set().union(grown, *writes_of)
    loads: list[k.Stmt] = []
    rest: list[k.Stmt] = []
    read_by_rest: set[str] = set()
    for position, stmt in enumerate(stmts):
        own = {s.buffer for s in k.walk([stmt]) if isinstance(s, k.Alloc)}
        own |= {s.var.name for s in k.walk([stmt]) if isinstance(s, k.Define)}
        reads, writes = stmt_reads(stmt) - own, writes_of[position] - own
        is_load = (
            bool(reads & globals_)
            and bool(writes)
            and writes <= grown
            and not reads & written  # global tensors too: an output stored earlier in the row
            and not any(w & writes for other, w in enumerate(writes_of) if other != position)
            and not read_by_rest & writes
        )
        if is_load:
            loads.append(stmt)
        else:
            rest.append(stmt)
            read_by_rest |= stmt_reads(stmt)
    return (loads, rest) if rest else ([], loads)


def _shift_stmt(stmt: k.Stmt, shifted: dict[str, k.Node]) -> k.Stmt:
    """`stmt` with every access to a grown array moved to the group row's part of it."""
    if isinstance(stmt, k.For):
        return dataclasses.replace(
            stmt, extent=_shift(stmt.extent, shifted), body=[_shift_stmt(s, shifted) for s in stmt.body]
        )
    if isinstance(stmt, k.If):
        return k.If(
            _shift(stmt.cond, shifted),
            [_shift_stmt(s, shifted) for s in stmt.then],
            [_shift_stmt(s, shifted) for s in stmt.orelse],
        )
    if isinstance(stmt, k.Define):
        return k.Define(stmt.var, _shift(stmt.value, shifted))
    if isinstance(stmt, k.Store):
        return k.Store(stmt.buffer, _at(stmt.buffer, _shift(stmt.index, shifted), shifted), _shift(stmt.value, shifted))
    if isinstance(stmt, k.VectorCopy):
        return dataclasses.replace(
            stmt,
            dst_index=_at(stmt.dst, _shift(stmt.dst_index, shifted), shifted),
            src_index=_at(stmt.src, _shift(stmt.src_index, shifted), shifted),
        )
    if isinstance(stmt, k.Alloc):
        return stmt  # an array of an inner scope: one per iteration already
    raise AssertionError(f"unexpected statement in a group loop: {type(stmt).__name__}")


def _at(buffer: str, index: k.Node, shifted: dict[str, k.Node]) -> k.Node:
    return add(shifted[buffer], index) if buffer in shifted else index


def _shift(node: k.Node, shifted: dict[str, k.Node]) -> k.Node:
    if isinstance(node, k.Read):
        return k.Read(node.dtype, node.buffer, _at(node.buffer, _shift(node.index, shifted), shifted))
    if isinstance(node, k.Bin):
        return k.Bin(node.dtype, node.op, _shift(node.a, shifted), _shift(node.b, shifted))
    if isinstance(node, k.Un):
        return k.Un(node.dtype, node.op, _shift(node.a, shifted))
    if isinstance(node, k.Cast):
        return k.Cast(node.dtype, _shift(node.a, shifted))
    if isinstance(node, k.FastDiv):
        return dataclasses.replace(node, a=_shift(node.a, shifted))
    if isinstance(node, k.Call):
        return k.Call(node.dtype, node.fn, tuple(_shift(a, shifted) for a in node.args))
    return node
