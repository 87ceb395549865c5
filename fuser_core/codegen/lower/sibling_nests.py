"""Adjacent loop nests of one loop structure merged into one (`merge_sibling_nests`).

The lowering emits each tensor's expression in its own nest of loops, under its own
predicates. Where consecutive tensors share the loops and the predicates (the element-wise
steps of a normalization's row), the CUDA compiler sees one branch per step and cannot
reuse a value one step computed in the next (each `bf16 -> float` of an input again, each
product again). Merged, `for i {A}; for i {B}` is `for i {A; B}` and `if (c) {A}; if (c) {B}`
is `if (c) {A; B}`: one scope the compiler can schedule and share values in.

Only adjacent statements merge, so nothing moves across a barrier or a reduction, and only
where no value can change and no load is held back:

- loops that iterate, and `if`s, only when neither body loads from or stores to global
  memory: merged, a later iteration's loads would follow an earlier one's stores, and the
  compiler cannot move them past (it cannot tell two tensors apart); merging nests of
  loads measured slower too (gelu's two inputs interleaved, RoPE's registers);
- a loop that iterates, when every buffer one body writes and the other reads or writes is
  accessed at one index c * i + (terms of inner loops spanning less than c) + terms fixed
  for the whole loop: iteration i of B reads only what iteration i of A wrote;
- an `if`, when the first body writes nothing the condition reads;
- scopes that run once (a thread or block index, a loop of one iteration) when something
  inside them then merges: the code is straight-line either way;
- a statement between two nests that would merge moves after them when neither it nor the
  second nest writes what the other reads or writes, and it stores nothing to global memory.

Neither side may declare a name the other declares or reads (one C++ scope), hold a barrier
or a reduction (whole blocks must reach those), or have an `else`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.simplify import const_value

Spelling = Callable[[k.Node], str]
_ONCE = (k.LoopKind.block, k.LoopKind.thread)
_ITERATING = (k.LoopKind.serial, k.LoopKind.unroll, k.LoopKind.group)


def merge_sibling_nests(body: list[k.Stmt], globals_: set[str], spelled: Spelling = k.expr_text) -> None:
    """Merge, in place and at every depth, the adjacent nests of `body` that may merge;
    `globals_` names the kernel's global tensors. Two `if`s are one condition when
    `spelled` writes them alike: the lowering's spelling reads every extent of a set the
    ops map exactly as one tensor's (a row's mean checked against `T3.logical_size[0]`,
    the row's x against `T0.logical_size[0]`: equal, and checked equal at launch)."""
    merged: list[k.Stmt] = []
    for stmt in body:
        if merged and _mergeable(merged[-1], stmt, globals_, spelled):
            merged[-1] = _merged(merged[-1], stmt)
        elif (
            len(merged) > 1 and _mergeable(merged[-2], stmt, globals_, spelled) and _commute(merged[-1], stmt, globals_)
        ):
            merged[-2] = _merged(merged[-2], stmt)  # stmt moves ahead of the one between
        else:
            merged.append(stmt)
    body[:] = merged
    for stmt in body:
        if isinstance(stmt, k.For):
            merge_sibling_nests(stmt.body, globals_, spelled)
        elif isinstance(stmt, k.If):
            merge_sibling_nests(stmt.then, globals_, spelled)
            merge_sibling_nests(stmt.orelse, globals_, spelled)


def _merged(a: k.Stmt, b: k.Stmt) -> k.Stmt:
    if isinstance(a, k.For) and isinstance(b, k.For):
        return k.For(a.index, a.extent, a.kind, [*a.body, *b.body], a.hardware, a.guarded, a.label)
    assert isinstance(a, k.If) and isinstance(b, k.If)
    return k.If(a.cond, [*a.then, *b.then])


def _mergeable(a: k.Stmt, b: k.Stmt, globals_: set[str], spelled: Spelling = k.expr_text) -> bool:
    if isinstance(a, k.For) and isinstance(b, k.For):
        if _header(a) != _header(b) or not _free_to_share_a_scope(a.body, b.body):
            return False
        if a.kind in _ONCE or const_value(a.extent) == 1:
            return _junction_merges(a.body, b.body, globals_, spelled)
        if _touch_global(a.body, globals_) or _touch_global(b.body, globals_):
            return False
        return a.kind in _ITERATING and _iterations_commute(a.index, a.body, b.body)
    if isinstance(a, k.If) and isinstance(b, k.If):
        if a.orelse or b.orelse or not _free_to_share_a_scope(a.then, b.then):
            return False
        if a.cond != b.cond and spelled(a.cond) != spelled(b.cond):
            return False
        if _touch_global(a.then, globals_) or _touch_global(b.then, globals_):
            return False
        return not set(k.node_reads(a.cond)) & _writes(a.then)
    return False


def _header(loop: k.For) -> tuple[object, ...]:
    """What makes two loops the same loop (the label is only the dump's)."""
    return (loop.index, loop.extent, loop.kind, loop.hardware, loop.guarded)


def _synchronizes(stmts: list[k.Stmt]) -> bool:
    """Whether `stmts` hold a barrier or a block reduction: whole blocks must reach those."""
    return any(isinstance(s, k.Sync | k.ParallelReduce) for s in k.walk(stmts))


def _touch_global(stmts: list[k.Stmt], globals_: set[str]) -> bool:
    """Whether `stmts` load from or store to global memory."""
    return bool((_reads(stmts) | _writes(stmts)) & globals_)


def _junction_merges(a: list[k.Stmt], b: list[k.Stmt], globals_: set[str], spelled: Spelling) -> bool:
    """Whether joining two scopes that run once lets something inside them merge: the
    code is straight-line either way, and ptxas allocates registers differently for
    scopes merged to no purpose (RoPE's kernel: 40 -> 54)."""
    if not a or not b:
        return False
    if _mergeable(a[-1], b[0], globals_, spelled):
        return True
    return len(a) > 1 and _mergeable(a[-2], b[0], globals_, spelled) and _commute(a[-1], b[0], globals_)


def _commute(a: k.Stmt, b: k.Stmt, globals_: set[str]) -> bool:
    """Whether `a; b` may run as `b; a`: neither writes (or declares) what the other reads
    or writes, neither synchronizes, and `b` stores nothing to global memory (the compiler
    cannot move a later load ahead of a store: a store moved up would hold loads back)."""
    if _synchronizes([a, b]):
        return False
    writes_a, writes_b = _writes([a]) | _declared([a]), _writes([b]) | _declared([b])
    if writes_b & globals_:
        return False
    uses_a, uses_b = _reads([a], with_vars=True), _reads([b], with_vars=True)
    return not (writes_a & (uses_b | writes_b)) and not (writes_b & uses_a)


def _free_to_share_a_scope(a: list[k.Stmt], b: list[k.Stmt]) -> bool:
    if _synchronizes(a + b):
        return False
    declared_a, declared_b = _declared(a), _declared(b)
    if declared_a & declared_b:
        return False
    # In one scope, a name the first declares would capture the second's read of an outer one.
    return not declared_a & _reads(b, with_vars=True)


def _declared(stmts: list[k.Stmt]) -> set[str]:
    names: set[str] = set()
    for s in k.walk(stmts):
        if isinstance(s, k.Alloc):
            names.add(s.buffer)
        elif isinstance(s, k.Define):
            names.add(s.var.name)
    return names


def _iterations_commute(index: k.Var, a: list[k.Stmt], b: list[k.Stmt]) -> bool:
    """Whether `for i {A}; for i {B}` may run as `for i {A; B}`."""
    writes_a, writes_b = _writes(a), _writes(b)
    declared = _declared(a + b)  # per iteration: each iteration has its own
    # Values that change inside the loop: an index built from one could reach anywhere.
    varying = declared | writes_a | writes_b
    inner: dict[str, list[k.For]] = {}
    for s in k.walk(a + b):
        if isinstance(s, k.For):
            inner.setdefault(s.index.name, []).append(s)
    shared = ((writes_a & (_reads(b) | writes_b)) | (writes_b & _reads(a))) - declared
    for buffer in shared:
        indices = set(_accesses(a + b, buffer))
        if len(indices) != 1:
            return False
        (only,) = indices
        if not _one_iteration_per_element(only, index, inner, varying):
            return False
    return True


def _one_iteration_per_element(node: k.Node, index: k.Var, inner: dict[str, list[k.For]], varying: set[str]) -> bool:
    """Whether the elements iteration i reaches at `node` are reached by no other iteration:
    node = c * i + the d * j of inner loops' indices j + terms fixed for the whole loop,
    with c > 0 and the inner terms spanning less than c (i * 8 + j, j < 8)."""
    used = set(k.node_reads(node, with_vars=True))
    if used & varying:
        return False
    coefficient = _coefficient(node, index)
    if coefficient is None or coefficient <= 0:
        return False
    span = 0
    for name in used & set(inner):
        extents = [const_value(loop.extent) for loop in inner[name]]
        d = _coefficient(node, inner[name][0].index)
        whole = [e for e in extents if isinstance(e, int)]
        if d is None or len(whole) != len(extents):
            return False
        span += abs(d) * (max(whole) - 1)
    return span < coefficient


def _writes(stmts: list[k.Stmt]) -> set[str]:
    found: set[str] = set()
    for s in k.walk(stmts):
        if isinstance(s, k.Store):
            found.add(s.buffer)
        elif isinstance(s, k.VectorCopy):
            found.add(s.dst)
    return found


def _nodes(stmt: k.Stmt) -> Iterator[k.Node]:
    if isinstance(stmt, k.Store):
        yield from (stmt.index, stmt.value)
    elif isinstance(stmt, k.Define):
        yield stmt.value
    elif isinstance(stmt, k.If):
        yield stmt.cond
    elif isinstance(stmt, k.For):
        yield stmt.extent
    elif isinstance(stmt, k.VectorCopy):
        yield from (stmt.dst_index, stmt.src_index)
    elif isinstance(stmt, k.Alloc) and stmt.init is not None:
        yield stmt.init


def _reads(stmts: list[k.Stmt], with_vars: bool = False) -> set[str]:
    found: set[str] = set()
    for s in k.walk(stmts):
        for node in _nodes(s):
            found.update(k.node_reads(node, with_vars))
        if isinstance(s, k.VectorCopy):
            found.add(s.src)
    return found


def _accesses(stmts: list[k.Stmt], buffer: str) -> Iterator[k.Node]:
    """Every index `buffer` is read or written at in `stmts`."""
    for s in k.walk(stmts):
        if isinstance(s, k.Store) and s.buffer == buffer:
            yield s.index
        if isinstance(s, k.VectorCopy):
            if s.dst == buffer:
                yield s.dst_index
            if s.src == buffer:
                yield s.src_index
        for node in _nodes(s):
            for sub in k.subexpressions(node):
                if isinstance(sub, k.Read) and sub.buffer == buffer:
                    yield sub.index


def _coefficient(node: k.Node, var: k.Var) -> int | None:
    """The constant c with node = c * var + (terms without var), or None where the node is
    not of that form (a division, a product of two terms with var, a read)."""
    if node == var:
        return 1
    if isinstance(node, k.Const | k.TensorField | k.ScalarParam) or (isinstance(node, k.Var) and node.name != var.name):
        return 0
    if isinstance(node, k.Bin) and node.op in ("+", "-"):
        left, right = _coefficient(node.a, var), _coefficient(node.b, var)
        if left is None or right is None:
            return None
        return left + right if node.op == "+" else left - right
    if isinstance(node, k.Bin) and node.op == "*":
        left, right = _coefficient(node.a, var), _coefficient(node.b, var)
        if left is None or right is None:
            return None
        if left and right:  # var * var
            return None
        if not left and not right:
            return 0
        factor = const_value(node.b) if left else const_value(node.a)
        return (left or right) * factor if isinstance(factor, int) else None
    if var.name in set(k.node_reads(node, with_vars=True)):
        return None
    return 0
