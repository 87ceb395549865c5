"""Reductions of one kernel grouped. Two block reductions of one scope that do not read
each other (layer norm backward's two row sums) reduce together: one round of barriers
instead of two (`group_block_reductions`).

Several grid reductions in one kernel (layer-norm backward's weight and bias gradients,
two sums of one input over few rows). Each grid reduction alone finds the last block to
arrive with its own semaphore, and only there holds its result: with two, the last
blocks may differ, and nothing could be computed from both. So they arrive once: every
grid reduction but the last of the kernel stores its partials and is *deferred*; the last
one arrives and, in its last block, combines its own partials and the deferred ones. What
read a deferred result between the two (its output's store) moves after the last."""

from __future__ import annotations

from collections.abc import Iterator

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType


def group_grid_reductions(body: list[k.Stmt]) -> str | None:
    """Group the kernel's grid reductions in place; returns why they cannot be grouped
    (None once grouped, or when there are fewer than two)."""
    grids = [s for s in k.walk(body) if isinstance(s, k.ParallelReduce) and s.block_dims]
    if len(grids) < 2:
        return None
    final = grids[-1]
    scope = scope_of(body, final)
    if scope is None or any(not any(s is g for s in scope) for g in grids):
        return "its grid reductions are in different loops"
    if any(set(g.block_dims) != set(final.block_dims) or g.count != final.count for g in grids):
        return "its grid reductions reduce along different block dimensions"
    first = next(i for i, s in enumerate(scope) if s is grids[0])
    end = next(i for i, s in enumerate(scope) if s is final)
    deferred = grids[:-1]
    tainted: set[str] = {b for g in deferred for b in g.buffers}
    tainted |= {g.last.name for g in deferred if g.last is not None}
    kept: list[k.Stmt] = []
    moved: list[k.Stmt] = []
    for stmt in scope[first + 1 : end]:
        if isinstance(stmt, k.ParallelReduce) and any(stmt is g for g in deferred):
            kept.append(stmt)
            continue
        reads, writes = stmt_reads(stmt), stmt_writes(stmt)
        if reads & tainted:
            moved.append(stmt)
            tainted |= writes
        else:
            kept.append(stmt)
    for stmt in [*kept, final]:
        if stmt_reads(stmt) & tainted:
            return "a grid reduction reads the result of another"
    aliases: list[k.Stmt] = []
    for red in deferred:
        if red.last is not None:
            assert final.last is not None
            aliases.append(k.Define(red.last, final.last))
        red.deferred, red.last, red.semaphores = True, None, ""
    final.combines = tuple(deferred)
    scope[first + 1 :] = [*kept, final, *aliases, *moved, *scope[end + 1 :]]
    return None


def make_cooperative(body: list[k.Stmt]) -> bool:
    """Mark, in place, the kernel's grid reductions as folded by every block after a grid
    barrier (the caller knows every block is resident at once); returns whether it did.
    Only where each is reached once, by every block: at the top of the kernel's body (one
    in a loop would meet the barrier again before its count is reset, and one under a
    branch would leave the others waiting). Welford's triples keep the tree: their
    cooperative fold is not written."""
    grids = [s for s in k.walk(body) if isinstance(s, k.ParallelReduce) and s.block_dims]
    top = {id(s) for s in body}
    if not grids or any(g.op == "welford" or id(g) not in top for g in grids):
        return False
    for grid in grids:
        grid.cooperative = True
    return True


def group_block_reductions(body: list[k.Stmt]) -> None:
    """Pair, in place, each block reduction (one float or double element along threadIdx.x
    only) with the next one of its scope of the same dtype when nothing between them reads
    the first's result: the first moves down beside the second, which reduces both."""
    for scope in scopes(body):
        index = 0
        while index < len(scope):
            first = scope[index]
            if not _pairable(first):
                index += 1
                continue
            assert isinstance(first, k.ParallelReduce)
            later = next(
                (
                    j
                    for j in range(index + 1, len(scope))
                    if _pairable(scope[j]) or stmt_reads(scope[j]) & set(first.buffers)
                ),
                None,
            )
            second = scope[later] if later is not None else None
            if (
                not isinstance(second, k.ParallelReduce)
                or not _pairable(second)
                or second.dtypes != first.dtypes
                or set(first.buffers) & _writes_between(scope, index, later)  # type: ignore[arg-type]
            ):
                index += 1
                continue
            assert later is not None
            scope.insert(later - 1, scope.pop(index))
            first.joined, second.paired = True, first
            index = later + 1


def _pairable(stmt: k.Stmt) -> bool:
    return (
        isinstance(stmt, k.ParallelReduce)
        and not stmt.block_dims
        and stmt.thread_dims == ("threadIdx.x",)
        and stmt.count == 1
        and stmt.op != "welford"
        and stmt.dtypes[0] in (DataType.Float, DataType.Double)
        and not stmt.joined
        and stmt.paired is None
    )


def _writes_between(scope: list[k.Stmt], start: int, end: int) -> set[str]:
    names: set[str] = set()
    for stmt in scope[start + 1 : end]:
        names |= stmt_writes(stmt)
    return names


def scopes(stmts: list[k.Stmt]) -> Iterator[list[k.Stmt]]:
    yield stmts
    for stmt in stmts:
        if isinstance(stmt, k.For):
            yield from scopes(stmt.body)
        elif isinstance(stmt, k.If):
            yield from scopes(stmt.then)
            yield from scopes(stmt.orelse)


def scope_of(stmts: list[k.Stmt], target: k.Stmt) -> list[k.Stmt] | None:
    """The statement list `target` was emitted into (at any depth), or None."""
    if any(s is target for s in stmts):
        return stmts
    for stmt in stmts:
        inner: list[list[k.Stmt]] = []
        if isinstance(stmt, k.For):
            inner = [stmt.body]
        elif isinstance(stmt, k.If):
            inner = [stmt.then, stmt.orelse]
        for body in inner:
            found = scope_of(body, target)
            if found is not None:
                return found
    return None


def _names(node: k.Node) -> Iterator[str]:
    return k.node_reads(node, with_vars=True)


def stmt_reads(stmt: k.Stmt) -> set[str]:
    """Buffers and variables a statement (and what it encloses) reads."""
    names: set[str] = set()
    for s in k.walk([stmt]):
        if isinstance(s, k.Store):
            names |= {*_names(s.index), *_names(s.value)}
        elif isinstance(s, k.Define):
            names |= set(_names(s.value))
        elif isinstance(s, k.VectorCopy):
            names |= {s.src, *_names(s.src_index), *_names(s.dst_index)}
        elif isinstance(s, k.If):
            names |= set(_names(s.cond))
        elif isinstance(s, k.For):
            names |= set(_names(s.extent))
        elif isinstance(s, k.ParallelReduce):
            names |= {*s.buffers, *_names(s.index)}
        elif isinstance(s, k.Alloc) and s.init is not None:
            names |= set(_names(s.init))
    return names


def stmt_writes(stmt: k.Stmt) -> set[str]:
    """Buffers and variables a statement (and what it encloses) writes or defines."""
    names: set[str] = set()
    for s in k.walk([stmt]):
        if isinstance(s, k.Store):
            names.add(s.buffer)
        elif isinstance(s, k.Define):
            names.add(s.var.name)
        elif isinstance(s, k.VectorCopy):
            names.add(s.dst)
        elif isinstance(s, k.Alloc):
            names.add(s.buffer)
        elif isinstance(s, k.ParallelReduce):
            names |= set(s.buffers)
            if s.last is not None:
                names.add(s.last.name)
    return names
