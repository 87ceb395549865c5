"""Index arithmetic that folds as it builds: constants, identities, and offsets that
cancel (`(i - 64) + 64` is `i`), so the kernel reads as the schedule means and equal
indices are equal expressions."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TypeGuard

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType

INDEX = DataType.Index
BOOL = DataType.Bool

# Loop indices' extents while a kernel is lowered: index math on a loop index that stays
# under a divisor folds (`(8 * i + lane) % 128` is `(8 * i) % 128 + lane` for a vector
# lane under 8). Indices are never negative where their value is used (predicates keep
# out-of-range lanes from reading or writing), which these rules rely on.
_bounds: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("kernel_index_bounds", default=None)


@contextlib.contextmanager
def index_bounds() -> Iterator[dict[str, int]]:
    """A fresh table of loop extents for one kernel (name -> exclusive bound)."""
    table: dict[str, int] = {}
    token = _bounds.set(table)
    try:
        yield table
    finally:
        _bounds.reset(token)


def bound(node: k.Node) -> int | None:
    """An exclusive upper bound of a non-negative index expression, when one is known."""
    if isinstance(node, k.Const) and is_int(node.value):
        return node.value + 1 if node.value >= 0 else None
    if isinstance(node, k.Var):
        table = _bounds.get()
        return table.get(node.name) if table is not None else None
    if isinstance(node, k.Bin) and node.dtype == INDEX:
        a, b = bound(node.a), bound(node.b)
        if node.op == "%" and b is not None:
            return min(b - 1, a) if a is not None else b - 1
        if a is None or b is None:
            return None
        if node.op == "+":
            return a + b - 1
        if node.op == "*":
            return (a - 1) * (b - 1) + 1
        if node.op == "/" and isinstance(node.b, k.Const) and int(node.b.value) > 0:
            return (a - 1) // int(node.b.value) + 1
    return None


def _factor(node: k.Node) -> int:
    """A constant the expression is known to be a multiple of (1 when none)."""
    if isinstance(node, k.Const) and is_int(node.value):
        return abs(node.value) or 1 << 30
    if isinstance(node, k.Bin) and node.op == "*":
        return _factor(node.a) * _factor(node.b)
    if isinstance(node, k.Bin) and node.op in "+-":
        fa, fb = _factor(node.a), _factor(node.b)
        while fb:
            fa, fb = fb, fa % fb
        return fa
    return 1


def _split_sum(node: k.Node, m: int) -> tuple[k.Node, k.Node] | None:
    """`p + q` with p a multiple of `m`... or of a divisor c of `m` with q under c:
    (the multiple part, the small part)."""
    if not (isinstance(node, k.Bin) and node.op == "+"):
        return None
    for p, q in ((node.a, node.b), (node.b, node.a)):
        c = _factor(p)
        q_bound = bound(q)
        if c % m == 0 or (m % c == 0 and q_bound is not None and q_bound <= c):
            return p, q
    return None


def is_int(value: object) -> TypeGuard[int]:
    """An integer literal's value (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def const_value(node: k.Node) -> int | float | bool | None:
    return node.value if isinstance(node, k.Const) else None


def _c(value: int) -> k.Const:
    return k.Const(INDEX, value)


def _offset(node: k.Node) -> tuple[k.Node | None, int]:
    """`x + c` as (x, c); a constant as (None, c)."""
    if isinstance(node, k.Const) and is_int(node.value):
        return None, node.value
    if isinstance(node, k.Bin) and node.op in "+-" and isinstance(node.b, k.Const):
        value = node.b.value
        if is_int(value):
            return node.a, value if node.op == "+" else -value
    return node, 0


def add(a: k.Node, b: k.Node) -> k.Node:
    base_a, off_a = _offset(a)
    base_b, off_b = _offset(b)
    if base_b is not None and base_a is None:
        base_a, base_b = base_b, None
    total = off_a + off_b
    if base_b is not None:
        assert base_a is not None
        base: k.Node = k.Bin(INDEX, "+", base_a, base_b)
    elif base_a is None:
        return _c(total)
    else:
        base = base_a
    if total == 0:
        return base
    return k.Bin(INDEX, "+" if total > 0 else "-", base, _c(abs(total)))


def sub(a: k.Node, b: k.Node) -> k.Node:
    value = const_value(b)
    if is_int(value):
        return add(a, _c(-value))
    if a == b:
        return _c(0)
    return k.Bin(INDEX, "-", a, b)


def mul(a: k.Node, b: k.Node) -> k.Node:
    va, vb = const_value(a), const_value(b)
    if va is not None and vb is not None:
        return _c(int(va) * int(vb))
    if va == 0 or vb == 0:
        return _c(0)
    if va == 1:
        return b
    if vb == 1:
        return a
    return k.Bin(INDEX, "*", a, b)


def div(a: k.Node, b: k.Node) -> k.Node:
    va, vb = const_value(a), const_value(b)
    if vb == 1:
        return a
    if va == 0:
        return _c(0)
    if va is not None and vb is not None and int(vb) != 0 and int(va) >= 0 and int(vb) > 0:
        return _c(int(va) // int(vb))
    if is_int(vb) and vb > 0:
        a_bound = bound(a)
        if a_bound is not None and a_bound <= vb:
            return _c(0)
        if isinstance(a, k.Bin) and a.op == "*" and isinstance(a.b, k.Const):
            c = int(a.b.value)
            if c % vb == 0:
                return mul(a.a, _c(c // vb))
            if vb % c == 0:
                return div(a.a, _c(vb // c))
        parts = _split_sum(a, vb)
        if parts is not None:
            p, q = parts
            if _factor(p) % vb == 0:
                return add(div(p, b), div(q, b))
            return div(p, b)
    return k.Bin(INDEX, "/", a, b)


def mod(a: k.Node, b: k.Node) -> k.Node:
    va, vb = const_value(a), const_value(b)
    if vb == 1 or va == 0:
        return _c(0)
    if va is not None and vb is not None and int(vb) > 0 and int(va) >= 0:
        return _c(int(va) % int(vb))
    if is_int(vb) and vb > 0:
        a_bound = bound(a)
        if a_bound is not None and a_bound <= vb:
            return a
        if _factor(a) % vb == 0:
            return _c(0)
        if isinstance(a, k.Bin) and a.op == "*" and isinstance(a.b, k.Const) and vb % int(a.b.value) == 0:
            c = int(a.b.value)
            return mul(mod(a.a, _c(vb // c)), a.b)
        parts = _split_sum(a, vb)
        if parts is not None:
            p, q = parts
            if _factor(p) % vb == 0:
                return mod(q, b)
            return add(mod(p, b), q)
    return k.Bin(INDEX, "%", a, b)


def lt(a: k.Node, b: k.Node) -> k.Node:
    va, vb = const_value(a), const_value(b)
    if va is not None and vb is not None:
        return k.Const(BOOL, bool(va < vb))
    a_bound = bound(a)
    if a_bound is not None and is_int(vb) and a_bound <= vb:
        return k.Const(BOOL, True)
    divisor = const_value(a.b) if isinstance(a, k.Bin) else None
    if isinstance(a, k.Bin) and a.op == "/" and a.dtype.is_integral and (divisor is None or divisor > 0):
        # x / n < e exactly when x < e * n for x >= 0 (a loop index's), and for any x
        # where e >= 1 (an extent's): no division in the check.
        return lt(a.a, mul(b, a.b))
    return k.Bin(BOOL, "<", a, b)


def land(a: k.Node, b: k.Node) -> k.Node:
    if const_value(a) is True:
        return b
    if const_value(b) is True:
        return a
    if const_value(a) is False or const_value(b) is False:
        return k.Const(BOOL, False)
    if a == b:
        return a
    if isinstance(b, k.Bin) and b.op == "&&":  # conjunct by conjunct, so none is checked twice
        return land(land(a, b.a), b.b)
    if b in conjuncts(a):
        return a
    return k.Bin(BOOL, "&&", a, b)


def conjuncts(node: k.Node) -> list[k.Node]:
    """The terms of a chain of `&&` (none for a literal true)."""
    if isinstance(node, k.Bin) and node.op == "&&":
        return [*conjuncts(node.a), *conjuncts(node.b)]
    return [] if const_value(node) is True else [node]


def rebuild(node: k.Bin, a: k.Node, b: k.Node) -> k.Node:
    """`node` with new operands, folded again (after substituting a loop index)."""
    if node.dtype == INDEX:
        builders = {"+": add, "-": sub, "*": mul, "/": div, "%": mod}
        if node.op in builders:
            return builders[node.op](a, b)
    if node.op == "<":
        return lt(a, b)
    if node.op == "&&":
        return land(a, b)
    return k.Bin(node.dtype, node.op, a, b)
