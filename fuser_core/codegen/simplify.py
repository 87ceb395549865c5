"""Index arithmetic that folds as it builds: constants, identities, and offsets that
cancel (`(i - 64) + 64` is `i`), so the kernel reads as the schedule means and equal
indices are equal expressions."""

from __future__ import annotations

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType

INDEX = DataType.Index
BOOL = DataType.Bool


def const_value(node: k.Node) -> int | float | bool | None:
    return node.value if isinstance(node, k.Const) else None


def _c(value: int) -> k.Const:
    return k.Const(INDEX, value)


def _offset(node: k.Node) -> tuple[k.Node | None, int]:
    """`x + c` as (x, c); a constant as (None, c)."""
    if isinstance(node, k.Const) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return None, node.value
    if isinstance(node, k.Bin) and node.op in "+-" and isinstance(node.b, k.Const):
        value = node.b.value
        if isinstance(value, int) and not isinstance(value, bool):
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
    if isinstance(value, int) and not isinstance(value, bool):
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
    return k.Bin(INDEX, "/", a, b)


def mod(a: k.Node, b: k.Node) -> k.Node:
    va, vb = const_value(a), const_value(b)
    if vb == 1 or va == 0:
        return _c(0)
    if va is not None and vb is not None and int(vb) > 0 and int(va) >= 0:
        return _c(int(va) % int(vb))
    return k.Bin(INDEX, "%", a, b)


def lt(a: k.Node, b: k.Node) -> k.Node:
    va, vb = const_value(a), const_value(b)
    if va is not None and vb is not None:
        return k.Const(BOOL, bool(va < vb))
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
    return k.Bin(BOOL, "&&", a, b)


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
