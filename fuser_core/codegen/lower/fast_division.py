"""The last step of lowering a kernel with 32-bit indices: each index division or modulo
by a run-time tensor extent becomes a `FastDiv` (a multiply-high and a shift by magic
numbers the host computes, `codegen.magic_division`), one `DivisorArg` per extent.

A non-contiguous input is indexed by dividing the linear index by its extents one by
one; by a run-time extent each `/` or `%` is a ~20-instruction subroutine on a GPU, and
an element-wise kernel over such inputs is bound by them. Only index math qualifies: an
`Index`-typed division (user-level integer ops keep C's semantics on negative values)
whose dividend is provably non-negative (the magic numbers are exact on [0, 2^31)) and
whose divisor is a product of `logical_size`s. A constant divisor NVRTC divides by its own
magic numbers; such a division is made unsigned (fewer instructions than a signed one,
which corrects for a negative dividend). Int64 kernels keep plain `/` and `%`.
"""

from __future__ import annotations

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.model import HARDWARE, INDEX
from fuser_core.codegen.simplify import const_value, is_int


def use_fast_division(body: list[k.Stmt]) -> list[k.DivisorArg]:
    """Rewrites `body` in place; returns the divisor parameters its FastDivs read."""
    rewriter = _Rewriter({s.index.name for s in k.walk(body) if isinstance(s, k.For)} | set(HARDWARE.values()))
    for stmt in k.walk(body):
        rewriter.stmt(stmt)
    return list(rewriter.divisors.values())


class _Rewriter:
    def __init__(self, indices: set[str]) -> None:
        self.indices = indices  # loop and hardware indices: never negative
        self.divisors: dict[k.Node, k.DivisorArg] = {}
        # By id: lowering shares equal subexpressions, and hashing a deep index is costly.
        self.done: dict[int, k.Node] = {}
        self.signs: dict[int, bool] = {}
        self.kept: list[k.Node] = []  # keeps the memo's ids alive

    def stmt(self, stmt: k.Stmt) -> None:
        if isinstance(stmt, k.For):
            stmt.extent = self.node(stmt.extent)
        elif isinstance(stmt, k.If):
            stmt.cond = self.node(stmt.cond)
        elif isinstance(stmt, k.Alloc) and stmt.init is not None:
            stmt.init = self.node(stmt.init)
        elif isinstance(stmt, k.Define):
            stmt.value = self.node(stmt.value)
        elif isinstance(stmt, k.Store):
            stmt.index, stmt.value = self.node(stmt.index), self.node(stmt.value)
        elif isinstance(stmt, k.VectorCopy):
            stmt.dst_index, stmt.src_index = self.node(stmt.dst_index), self.node(stmt.src_index)
        elif isinstance(stmt, k.ParallelReduce):
            for red in (stmt, *stmt.combines):
                red.index = self.node(red.index)

    def node(self, node: k.Node) -> k.Node:
        found = self.done.get(id(node))
        if found is None:
            found = self._node(node)
            self.done[id(node)] = found
            self.kept.append(node)
        return found

    def _node(self, node: k.Node) -> k.Node:
        if isinstance(node, k.Bin):
            a, b = self.node(node.a), self.node(node.b)
            if node.op in k.FAST_DIVISION and node.dtype == INDEX and self.non_negative(a):
                if _is_extent_product(b):
                    return k.FastDiv(INDEX, node.op, a, self.divisor(b))
                constant = const_value(b)
                if is_int(constant) and constant > 1:
                    return k.FastDiv(INDEX, node.op, a, constant)
            return node if a is node.a and b is node.b else k.Bin(node.dtype, node.op, a, b)
        if isinstance(node, k.Un | k.Cast | k.Read):
            inner = node.index if isinstance(node, k.Read) else node.a
            new = self.node(inner)
            if new is inner:
                return node
            if isinstance(node, k.Read):
                return k.Read(node.dtype, node.buffer, new)
            return k.Un(node.dtype, node.op, new) if isinstance(node, k.Un) else k.Cast(node.dtype, new)
        if isinstance(node, k.Call):
            args = tuple(self.node(a) for a in node.args)
            return (
                node if all(a is b for a, b in zip(args, node.args, strict=True)) else k.Call(node.dtype, node.fn, args)
            )
        return node

    def non_negative(self, node: k.Node) -> bool:
        """Whether an index expression (rewritten) is never negative."""
        found = self.signs.get(id(node))
        if found is None:
            found = self.signs[id(node)] = self._non_negative(node)
            self.kept.append(node)
        return found

    def _non_negative(self, node: k.Node) -> bool:
        if isinstance(node, k.Const):
            return isinstance(node.value, int) and not isinstance(node.value, bool) and node.value >= 0
        if isinstance(node, k.Var):
            return node.name in self.indices
        if isinstance(node, k.TensorField):
            return node.field == "logical_size"
        if isinstance(node, k.FastDiv):
            return True  # made only of a non-negative dividend
        if isinstance(node, k.Bin) and node.op in ("+", "*", "/", "%"):
            return self.non_negative(node.a) and self.non_negative(node.b)
        return False

    def divisor(self, extent: k.Node) -> k.DivisorArg:
        found = self.divisors.get(extent)
        if found is None:
            name = _divisor_name(extent)
            taken = {d.name for d in self.divisors.values()}
            unique, n = name, 1
            while unique in taken:  # equal names of differently built products
                n += 1
                unique = f"{name}_{n}"
            found = self.divisors[extent] = k.DivisorArg(unique, extent)
        return found


def _is_extent_product(node: k.Node) -> bool:
    """Whether `node` is a tensor's run-time extent, or a product of them."""
    if isinstance(node, k.TensorField):
        return node.field == "logical_size"
    if isinstance(node, k.Bin) and node.op == "*":
        return _is_extent_product(node.a) and _is_extent_product(node.b)
    return False


def _factors(node: k.Node) -> list[k.TensorField]:
    if isinstance(node, k.Bin):
        return [*_factors(node.a), *_factors(node.b)]
    assert isinstance(node, k.TensorField)
    return [node]


def _divisor_name(extent: k.Node) -> str:
    """`T1_div4` for `T1.logical_size[4]`; `T1_div3_4` for the product of axes 3 and 4."""
    axes: dict[str, list[str]] = {}
    for field in _factors(extent):
        axes.setdefault(field.tensor, []).append(str(field.axis))
    return "_".join(f"{tensor}_div{'_'.join(found)}" for tensor, found in axes.items())
