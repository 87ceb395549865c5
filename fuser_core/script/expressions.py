"""Expressions of a repro script, evaluated from its AST.

Nothing of the script is compiled or executed. Each node is interpreted here: names
resolve only to the script's own values, the builtins of script_builtins and the
namespaces it may import; attributes are read only through per-type whitelists; and
only SafeFunctions and the script's own functions are ever called.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import itertools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fuser_core.errors import FuserError, SourceLocation, at_location, current_location
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.frontend.operators import Operators
from fuser_core.ir.dtype import DataType
from fuser_core.script.frontend_access import fd_attribute, handle_attribute, kind_of, ops_attribute
from fuser_core.script.input_spec import TensorSpec
from fuser_core.script.objects import BoundMethod, ScriptClass, ScriptObject, has_decorator
from fuser_core.script.safe_builtins import (
    MAX_INT_BITS,
    MAX_SEQUENCE,
    MAX_STRING,
    REFUSED_BUILTINS,
    bounded,
    check_int,
    length,
)
from fuser_core.script.torch_subset import compare as compare_specs
from fuser_core.script.torch_subset import spec_attribute
from fuser_core.script.values import (
    Ignored,
    Namespace,
    Opaque,
    SafeFunction,
    Unavailable,
    flat_size,
    nested_size,
)

MAX_STEPS = 500_000  # AST nodes evaluated in one load: bounds loops (about a second)
MAX_WORK = 2_000_000  # list, string and data items a script may create or scan in one load
MAX_LINE_SHOWN = 200  # characters of a script line that an error quotes
MAX_UNPARSED = 100  # AST nodes that an error message quotes as source text

BINARY_OPERATORS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv), ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod), ast.Pow: ("**", operator.pow), ast.LShift: ("<<", operator.lshift),
    ast.RShift: (">>", operator.rshift), ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_), ast.BitXor: ("^", operator.xor), ast.MatMult: ("@", operator.matmul),
}  # fmt: skip

UNARY_OPERATORS: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}

COMPARE_OPERATORS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("eq", operator.eq), ast.NotEq: ("ne", operator.ne), ast.Lt: ("lt", operator.lt),
    ast.LtE: ("le", operator.le), ast.Gt: ("gt", operator.gt), ast.GtE: ("ge", operator.ge),
}  # fmt: skip

CONSTRUCTS: dict[type, str] = {
    ast.Lambda: "lambda", ast.GeneratorExp: "a generator expression", ast.NamedExpr: "`:=`",
    ast.Dict: "a dict", ast.Set: "a set", ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield from", ast.Starred: "`*` here", ast.While: "a while loop (it could run forever)",
    ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Raise: "raise", ast.Match: "match",
    ast.AsyncFunctionDef: "async def", ast.AsyncFor: "async for", ast.AsyncWith: "async with",
}  # fmt: skip


def construct_name(node: ast.AST) -> str:
    return CONSTRUCTS.get(type(node), f"`{type(node).__name__}`")


def refusal(node: ast.AST) -> FuserError:
    return FuserError(f"{construct_name(node)} is not supported in repro scripts")


def source_text(node: ast.AST, limit: int = 60) -> str:
    if next(itertools.islice(ast.walk(node), MAX_UNPARSED, None), None) is not None:
        return f"<a long {type(node).__name__.lower()}>"  # unparsing it could take long
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_handle(value: Any) -> bool:
    return isinstance(value, (Tensor, Scalar))


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex))


@dataclass(eq=False)
class Scope:
    """Names of one function call (or the module), looked up through its parents."""

    names: dict[str, Any] = field(default_factory=dict)
    parent: Scope | None = None

    def find(self, name: str) -> tuple[bool, Any]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return True, scope.names[name]
            scope = scope.parent
        return False, None

    def child(self) -> Scope:
        return Scope({}, self)


@dataclass(frozen=True, eq=False)
class ScriptFunction:
    """A `def` of the script: its body is interpreted when it is called."""

    node: ast.FunctionDef
    closure: Scope

    @property
    def name(self) -> str:
        return self.node.name


class LoadLimitExceeded(FuserError):
    """The script needs more steps or work than one load may take. Loading stops here:
    every later statement would fail the same way."""


class ScriptExpressions:
    """Evaluates a script's expression nodes; the statement interpreter builds on it."""

    def __init__(self, filename: str, lines: list[str]) -> None:
        self.filename = filename
        self.lines = lines
        self.steps = 0
        self.work = 0
        self._locations: dict[int, SourceLocation] = {}
        self._calls_inside: dict[ast.AST, bool] = {}  # f-string parts: walked once, not per loop

    # -- hooks of the statement interpreter -------------------------------------------
    def call_script(self, fn: ScriptFunction, args: list[Any], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def instantiate(self, cls: ScriptClass, args: list[Any], kwargs: dict[str, Any]) -> ScriptObject:
        raise NotImplementedError

    def intercept_method(self, owner: Any, name: str, node: ast.Call, scope: Scope) -> tuple[bool, Any]:
        return False, None

    def extra_attribute(self, owner: Any, name: str) -> Any:
        raise FuserError(f"attribute `.{name}` of a {kind_of(owner)} is not in the subset a repro script may use")

    # -- bookkeeping ------------------------------------------------------------------
    def location(self, lineno: int) -> SourceLocation:
        if lineno not in self._locations:
            line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
            self._locations[lineno] = SourceLocation(self.filename, lineno, shown_line(line))
        return self._locations[lineno]

    @contextlib.contextmanager
    def at_line(self, lineno: int) -> Iterator[None]:
        here = current_location()
        if here is not None and here.lineno == lineno and here.filename == self.filename:
            yield
            return
        with at_location(self.location(lineno)):
            yield

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise limit_exceeded("step", f"it takes more than {MAX_STEPS} steps (loops this long are not supported)")

    def charge_count(self, count: int) -> None:
        self.work += count
        if self.work > MAX_WORK:
            raise limit_exceeded("work", f"it makes or scans more than {MAX_WORK} list items")

    def charge(self, *values: Any) -> None:
        """Count the items a step makes or scans, so no loop can spin on huge lists."""
        self.charge_count(sum(flat_size(v) for v in values))

    def charge_nested(self, *values: Any) -> None:
        """Count the items of `values` and of every list inside them, each time it
        appears: what a comparison may scan, or a function handed them may walk."""
        self.charge_count(nested_size(values, MAX_WORK - self.work))

    # -- evaluation -------------------------------------------------------------------
    def eval(self, node: ast.AST, scope: Scope) -> Any:
        self.step()
        handler = getattr(self, f"_eval_{type(node).__name__}", None)
        if handler is None:
            raise refusal(node)
        return handler(node, scope)

    def _eval_Constant(self, node: ast.Constant, scope: Scope) -> Any:
        return check_int(node.value, "this int literal")

    def _eval_Name(self, node: ast.Name, scope: Scope) -> Any:
        if node.id == "__name__":  # a loaded script is the main script
            return "__main__"
        found, value = scope.find(node.id)
        if not found:
            raise unknown_name(node.id)
        if isinstance(value, Unavailable):
            raise value.error()
        return value

    def _eval_Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        return self.attribute(self.eval(node.value, scope), node.attr)

    def attribute(self, owner: Any, name: str) -> Any:
        if name.startswith("_"):
            raise FuserError(f"attribute `.{name}` is refused: private and special attributes are never read")
        value = self._attribute(owner, name)
        if isinstance(value, Unavailable):
            raise value.error()
        return value

    def _attribute(self, owner: Any, name: str) -> Any:
        if isinstance(owner, Namespace):
            return owner.member(name)
        if owner is DataType:
            if name in DataType.__members__:
                return DataType[name]
            raise FuserError(f"DataType has no member {name!r} in fuser-workbench")
        if isinstance(owner, TensorSpec):
            return spec_attribute(owner, name)
        if isinstance(owner, FusionDefinition):
            return fd_attribute(owner, name)
        if isinstance(owner, Operators):
            return ops_attribute(owner, name)
        if isinstance(owner, (Tensor, Scalar, Vector)):
            return handle_attribute(owner, name)
        if isinstance(owner, list) and name in ("append", "extend"):
            return SafeFunction(f"list.{name}", functools.partial(self._grow, owner, name), shallow=True)
        if isinstance(owner, Opaque):
            raise FuserError(f"`.{name}` of {owner.what}: loading a script does not run it")
        if isinstance(owner, (ScriptObject, ScriptClass)):
            return self._member(owner, name)
        return self.extra_attribute(owner, name)

    def _member(self, owner: ScriptObject | ScriptClass, name: str) -> Any:
        """An instance's own attribute, else its class's; methods come bound, a
        @property is called, as Python reads them."""
        if isinstance(owner, ScriptObject) and name in owner.attrs:
            return owner.attrs[name]
        cls = owner.cls if isinstance(owner, ScriptObject) else owner
        found, value = cls.lookup(name) if cls is not None else (False, None)
        if not found:
            what = owner.kind if isinstance(owner, ScriptObject) else f"class {owner.name}"
            raise FuserError(f"{what} has no attribute {name!r}")
        if not isinstance(value, ScriptFunction):
            return value
        if has_decorator(value.node, "staticmethod"):
            return value
        if has_decorator(value.node, "classmethod"):
            return BoundMethod(value, cls)
        if isinstance(owner, ScriptClass):
            return value  # a plain function: `Config.method(obj)`
        if has_decorator(value.node, "property", "cached_property"):
            return self.call_script(value, [owner], {})
        return BoundMethod(value, owner)

    def set_attribute(self, owner: Any, name: str, value: Any) -> None:
        """`obj.x = value` on the script's own objects and classes only."""
        if name.startswith("__"):
            raise FuserError(f"assigning to `.{name}` is refused: special attributes are never written")
        if isinstance(owner, ScriptObject):
            if owner.frozen:
                raise FuserError(f"cannot assign to field {name!r}: {owner.kind} is a frozen dataclass")
            owner.attrs[name] = value
        elif isinstance(owner, ScriptClass):
            owner.attrs[name] = value
        else:
            raise FuserError(f"assigning to an attribute of a {kind_of(owner)} is not supported in repro scripts")

    def _grow(self, items: list[Any], how: str, value: Any) -> None:
        new = [value] if how == "append" else bounded(value, "extend a list with")
        self.charge_count(len(new))
        items.extend(new)

    def _eval_Call(self, node: ast.Call, scope: Scope) -> Any:
        with self.at_line(node.lineno):
            func = node.func
            if isinstance(func, ast.Attribute):
                owner = self.eval(func.value, scope)
                handled, value = self.intercept_method(owner, func.attr, node, scope)
                if handled:
                    return value
                fn = self.attribute(owner, func.attr)
            else:
                fn = self.eval(func, scope)
            if isinstance(fn, Ignored):  # print(...), assertions: arguments never evaluated
                return None
            args, kwargs = self.arguments(node, scope)
            return self.invoke(fn, args, kwargs, node)

    def arguments(self, node: ast.Call, scope: Scope) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                items = bounded(self.eval(arg.value, scope), "unpack")
                self.charge_count(len(items))
                args.extend(items)
            else:
                args.append(self.eval(arg, scope))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise FuserError("`**` arguments are not supported in repro scripts")
            kwargs[kw.arg] = self.eval(kw.value, scope)
        return args, kwargs

    def invoke(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
        if isinstance(fn, ScriptFunction):
            return self.call_script(fn, args, kwargs)
        if isinstance(fn, BoundMethod):
            return self.call_script(fn.function, [fn.owner, *args], kwargs)
        if isinstance(fn, ScriptClass):
            return self.instantiate(fn, args, kwargs)
        if not isinstance(fn, SafeFunction):
            raise FuserError(f"`{source_text(node.func)}` ({kind_of(fn)}) cannot be called in a repro script")
        for value in [*args, *kwargs.values()]:
            if isinstance(value, range) and length(value) > MAX_SEQUENCE:
                raise FuserError(f"a range of {length(value)} items is too long to pass to {fn.name}")
        (self.charge if fn.shallow else self.charge_nested)(*args, *kwargs.values())
        try:
            result = fn.impl(*args, **kwargs)
        except FuserError:
            raise
        except Exception as err:
            raise FuserError(f"{type(err).__name__}: {err}", op=fn.name) from err
        self.charge(result)
        return check_int(result, f"the result of {fn.name}")

    # -- operators ----------------------------------------------------------------------
    def _eval_BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
        return self.binary(type(node.op), self.eval(node.left, scope), self.eval(node.right, scope))

    def binary(self, op: type, left: Any, right: Any) -> Any:
        symbol, fn = BINARY_OPERATORS[op]
        if isinstance(left, TensorSpec) or isinstance(right, TensorSpec):
            raise FuserError(
                f"`{symbol}` on input tensors is not supported: only a comparison with a number, "
                "as in `torch.randn(...) > 0`"
            )
        if is_handle(left) or is_handle(right):
            return _handle_operator(symbol, fn, left, right)
        if is_number(left) and is_number(right):
            return _number_operator(op, symbol, fn, left, right)
        return self._sequence_operator(op, symbol, left, right)

    def _sequence_operator(self, op: type, symbol: str, left: Any, right: Any) -> Any:
        if op is ast.Add and isinstance(left, str) and isinstance(right, str):
            if len(left) + len(right) > MAX_STRING:
                raise FuserError("string too long for a repro script")
            self.charge_count(len(left) + len(right))
            return left + right
        if op is ast.Add and isinstance(left, (list, tuple)) and type(left) is type(right):
            self.charge_count(len(left) + len(right))
            return left + right  # type: ignore[operator]
        if op is ast.Mult and isinstance(left, (list, tuple, str)) != isinstance(right, (list, tuple, str)):
            return self._repeat(*((left, right) if isinstance(left, (list, tuple, str)) else (right, left)))
        raise FuserError(f"`{symbol}` between a {kind_of(left)} and a {kind_of(right)} is not supported")

    def _repeat(self, items: list[Any] | tuple[Any, ...] | str, count: Any) -> Any:
        """`[0] * n` and `"=" * n`, bounded before anything is made."""
        if isinstance(count, bool) or not isinstance(count, int):
            raise FuserError(f"`*` between a {kind_of(items)} and a {kind_of(count)} is not supported")
        total = len(items) * count
        what, most = ("a string", MAX_STRING) if isinstance(items, str) else ("a list", MAX_SEQUENCE)
        if total > most or count > most:
            unit = "characters" if isinstance(items, str) else "items"
            raise FuserError(f"`* {_short(count)}` makes {what} too long for a repro script (at most {most} {unit})")
        self.charge_count(max(total, 0))
        return items * count

    def _eval_UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not self.truth(value)
        fn: Callable[[Any], Any] = UNARY_OPERATORS[type(node.op)]
        if not (is_number(value) or is_handle(value)):
            raise FuserError(f"unary `{source_text(node, 20)}` on a {kind_of(value)} is not supported")
        try:
            return fn(value)
        except TypeError as err:
            raise FuserError(f"`{source_text(node, 20)}` is not supported on a {kind_of(value)}") from err

    def truth(self, value: Any) -> bool:
        if is_handle(value) or isinstance(value, (TensorSpec, Vector, Opaque, FusionDefinition)):
            raise FuserError(f"a {kind_of(value)} has no truth value while a script is loaded")
        return bool(value)

    def _eval_BoolOp(self, node: ast.BoolOp, scope: Scope) -> Any:
        stop_when = isinstance(node.op, ast.Or)
        result: Any = None
        for value_node in node.values:
            result = self.eval(value_node, scope)
            if self.truth(result) == stop_when:
                return result
        return result

    def _eval_Compare(self, node: ast.Compare, scope: Scope) -> Any:
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, scope)
            result = self.compare(op, left, right)
            if len(node.ops) == 1:
                return result
            if not self.truth(result):
                return False
            left = right
        return True

    def compare(self, op: ast.cmpop, left: Any, right: Any) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)):
            return (left is right) == isinstance(op, ast.Is)
        self.charge_nested(left, right)
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(right, range) and type(left) not in (int, bool):  # only ints are found without a scan
                self.charge_count(min(length(right), MAX_WORK + 1))
            if not isinstance(right, (list, tuple, str, range, dict)):
                raise FuserError(f"`in` a {kind_of(right)} is not supported")
            try:
                return (left in right) == isinstance(op, ast.In)
            except TypeError as err:
                raise FuserError(f"cannot look for a {kind_of(left)} in a {kind_of(right)}") from err
        name, fn = COMPARE_OPERATORS[type(op)]
        if isinstance(left, TensorSpec) or isinstance(right, TensorSpec):
            return compare_specs(name, left, right)
        try:
            return fn(left, right)
        except TypeError as err:
            raise FuserError(f"cannot compare a {kind_of(left)} with a {kind_of(right)}") from err

    def _eval_IfExp(self, node: ast.IfExp, scope: Scope) -> Any:
        return self.eval(node.body if self.truth(self.eval(node.test, scope)) else node.orelse, scope)

    # -- containers ---------------------------------------------------------------------
    def _items(self, nodes: list[ast.expr], scope: Scope) -> list[Any]:
        items: list[Any] = []
        for item in nodes:
            if isinstance(item, ast.Starred):
                items.extend(bounded(self.eval(item.value, scope), "unpack"))
            else:
                items.append(self.eval(item, scope))
        self.charge_count(len(items))
        return items

    def _eval_List(self, node: ast.List, scope: Scope) -> list[Any]:
        return self._items(node.elts, scope)

    def _eval_Tuple(self, node: ast.Tuple, scope: Scope) -> tuple[Any, ...]:
        return tuple(self._items(node.elts, scope))

    def _eval_Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
        value, index = self.eval(node.value, scope), self.eval(node.slice, scope)
        if isinstance(value, Opaque):
            return value
        valid = isinstance(index, slice) or (isinstance(index, int) and not isinstance(index, bool))
        if isinstance(value, dict) and isinstance(index, str):
            valid = True
        elif not isinstance(value, (list, tuple, str, range, Vector)) or not valid:
            raise FuserError(f"indexing a {kind_of(value)} with a {kind_of(index)} is not supported")
        if isinstance(value, Vector) and isinstance(index, slice):
            raise FuserError("slicing a fusion vector is not supported")
        try:
            result = value[index]
        except (IndexError, KeyError) as err:
            raise FuserError(f"index {index!r} is out of range for a {kind_of(value)} of {length(value)}") from err
        if isinstance(index, slice):
            self.charge(result)
        return result

    def _eval_Slice(self, node: ast.Slice, scope: Scope) -> slice:
        parts = [None if n is None else self.eval(n, scope) for n in (node.lower, node.upper, node.step)]
        if any(p is not None and (isinstance(p, bool) or not isinstance(p, int)) for p in parts):
            raise FuserError(f"slice bounds must be ints, got {parts}")
        return slice(*parts)

    def _eval_ListComp(self, node: ast.ListComp, scope: Scope) -> list[Any]:
        inner = scope.child()
        out: list[Any] = []
        self._comprehension(node, 0, inner, out)
        return out

    def _comprehension(self, node: ast.ListComp, level: int, scope: Scope, out: list[Any]) -> None:
        if level == len(node.generators):
            self.charge_count(1)
            out.append(self.eval(node.elt, scope))
            return
        gen = node.generators[level]
        if gen.is_async:
            raise FuserError("async comprehensions are not supported in repro scripts")
        for item in self.iterate(self.eval(gen.iter, scope)):
            self.assign(gen.target, item, scope)
            if all(self.truth(self.eval(cond, scope)) for cond in gen.ifs):
                self._comprehension(node, level + 1, scope, out)

    def iterate(self, value: Any) -> Iterator[Any]:
        if isinstance(value, (list, tuple, range, str, Vector)):
            return iter(value)
        raise FuserError(f"cannot loop over a {kind_of(value)} in a repro script")

    def _eval_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> str:
        # Only for printing: calls inside are not made, whatever fails reads "?".
        parts: list[str] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                parts.append(self._formatted(part.value, scope))
        text = "".join(parts)[:MAX_STRING]
        self.charge(text)
        return text

    def _formatted(self, node: ast.expr, scope: Scope) -> str:
        if node not in self._calls_inside:
            self._calls_inside[node] = any(isinstance(n, ast.Call) for n in ast.walk(node))
        if self._calls_inside[node]:
            return "?"
        try:
            value = self.eval(node, scope)
        except LoadLimitExceeded:
            raise
        except FuserError:
            return "?"
        return str(value) if value is None or isinstance(value, (str, bool, int, float, complex)) else "?"

    # -- assignment -----------------------------------------------------------------------
    def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
        if isinstance(target, ast.Name):
            scope.names[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            values = unpack(value, len(target.elts))
            for item, item_value in zip(target.elts, values, strict=True):
                self.assign(item, item_value, scope)
            return
        if isinstance(target, ast.Attribute):
            self.set_attribute(self.eval(target.value, scope), target.attr, value)
            return
        raise FuserError(f"assigning to `{source_text(target)}` is not supported in repro scripts")


def limit_exceeded(kind: str, what: str) -> LoadLimitExceeded:
    here = current_location()
    at = f" at line {here.lineno}" if here is not None else ""
    return LoadLimitExceeded(f"script exceeds the loader's {kind} limit{at}: {what}")


def shown_line(line: str) -> str:
    return line if len(line) <= MAX_LINE_SHOWN else line[: MAX_LINE_SHOWN - 3] + "..."


def unpack(value: Any, count: int) -> list[Any]:
    if isinstance(value, Opaque):
        return [value] * count
    if not isinstance(value, (list, tuple, Vector)):
        raise FuserError(f"cannot unpack a {kind_of(value)} into {count} names")
    items = list(value)
    if len(items) != count:
        raise FuserError(f"cannot unpack {len(items)} values into {count} names")
    return items


def unknown_name(name: str) -> FuserError:
    if name in REFUSED_BUILTINS or name.startswith("__"):
        return FuserError(f"`{name}` is refused: a repro script is read, never run, and cannot reach Python itself")
    return FuserError(f"name `{name}` is not defined (or not in the subset of Python a repro script may use)")


def _handle_operator(symbol: str, fn: Callable[[Any, Any], Any], left: Any, right: Any) -> Any:
    other = right if is_handle(left) else left
    if not (is_handle(other) or is_number(other)):
        raise FuserError(f"`{symbol}` between a fusion value and a {kind_of(other)} is not supported")
    try:
        return fn(left, right)
    except TypeError as err:
        raise FuserError(f"`{symbol}` is not supported on fusion values") from err


def _number_operator(op: type, symbol: str, fn: Callable[[Any, Any], Any], left: Any, right: Any) -> Any:
    check_int(left, f"the left operand of `{symbol}`")
    check_int(right, f"the right operand of `{symbol}`")
    shown = f"`{_short(left)} {symbol} {_short(right)}`"
    ints = isinstance(left, int) and isinstance(right, int)
    if ints and op is ast.Pow and right > 0 and abs(left) > 1 and right * abs(left).bit_length() > MAX_INT_BITS:
        raise FuserError(f"{shown} is too large for a repro script")
    if ints and op is ast.LShift and right > MAX_INT_BITS:
        raise FuserError(f"{shown} is too large for a repro script")
    try:
        result = fn(left, right)
    except (ArithmeticError, ValueError, TypeError) as err:
        raise FuserError(f"{shown}: {err}") from err
    if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
        raise FuserError(f"{shown} is too large for a repro script")
    return result


def _short(number: Any) -> str:
    text = repr(number)
    return text if len(text) <= 24 else f"{text[:10]}...({len(text)} digits)"
