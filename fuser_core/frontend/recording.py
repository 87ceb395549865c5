"""The record of a FusionDefinition: one entry per frontend call, as nvFuser keeps it.

Each call a user makes (`fd.define_tensor`, `fd.ops.add`, `fd.add_output`, ...) is
kept as a `Record`: the call's name, its arguments in a canonical form (handles by
name, constants as plain data) and the names of its results (`T3`, `S4`, `V5`,
numbered in order as nvFuser numbers its states). The records serve three ends:

- printing: `repr(fd)` is the records as a Python function, nvFuser's format;
- caching: the printed body is the structural key of `FusionCache`, so the same ops
  on the same input signatures give the same fusion id;
- rebuilding: `replay` calls the same methods again from the plain data, which is
  how a serialized cache is read back without executing any text.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuser_core.errors import FuserError, InternalError
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.ir.dtype import DataType, parse_dtype

if TYPE_CHECKING:
    from fuser_core.frontend.fusion_definition import FusionDefinition

# An argument in canonical form, JSON-ready:
#   ["ref", "T3"]            a handle by name
#   ["item", "V3", 0]        an element of a named vector
#   ["dtype", "Float"]       a DataType
#   ["list", [arg, ...]]     a list or tuple
#   ["float", "inf"]         a float Python cannot write as a literal (inf, nan)
#   ["complex", re, im]      a complex constant
#   ["lit", value]           None, a bool, an int, a float or a string
Arg = list[Any]


@dataclass(frozen=True)
class Record:
    """One frontend call: `outputs = target.name(*args, **kwargs)`."""

    target: str  # "fd" or "fd.ops"
    name: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    outputs: tuple[str, ...]
    unpack: bool = False  # the call returned a sequence, so even one output is unpacked

    def line(self) -> str:
        parts = [format_arg(a) for a in self.args] + [f"{k}={format_arg(v)}" for k, v in self.kwargs]
        call = f"{self.target}.{self.name}({', '.join(parts)})"
        if not self.outputs and not self.unpack:
            return call
        if not self.outputs:
            return f"_ = {call}"
        targets = ", ".join(self.outputs) + ("," if self.unpack and len(self.outputs) == 1 else "")
        return f"{targets} = {call}"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "name": self.name,
            "args": list(self.args),
            "kwargs": [[k, v] for k, v in self.kwargs],
            "outputs": list(self.outputs),
            "unpack": self.unpack,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Record:
        try:
            return Record(
                str(data["target"]),
                str(data["name"]),
                tuple(data["args"]),
                tuple((str(k), v) for k, v in data["kwargs"]),
                tuple(str(o) for o in data["outputs"]),
                bool(data.get("unpack", False)),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise FuserError(f"a serialized fusion record is malformed: {err}") from None


def format_arg(arg: Arg) -> str:
    kind = arg[0]
    if kind == "ref":
        return str(arg[1])
    if kind == "item":
        return f"{arg[1]}[{arg[2]}]"
    if kind == "dtype":
        return f"DataType.{arg[1]}"
    if kind == "list":
        return "[" + ", ".join(format_arg(a) for a in arg[1]) + "]"
    if kind == "float":
        return f'float("{arg[1]}")'
    if kind == "complex":
        return f"complex({_float_text(arg[1])}, {_float_text(arg[2])})"
    value = arg[1]
    if isinstance(value, float):
        return _float_text(value)
    return repr(value)


def _float_text(value: float) -> str:
    if math.isfinite(value):
        return repr(float(value))
    return f'float("{value}")'


@dataclass
class _Canonical:
    """A call's canonical form, given by the method itself while it runs."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class Recorder:
    """Keeps the records of one FusionDefinition while it is being defined."""

    records: list[Record] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # id(IR value) -> latest name
    vectors: dict[tuple[int, ...], str] = field(default_factory=dict)  # element ids -> vector name
    vector_items: dict[int, tuple[str, int]] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # the named values, so their ids stay unique
    unprintable: str | None = None  # why this definition cannot be printed, if it cannot
    depth: int = 0
    counter: int = 0
    _canonical: _Canonical | None = None

    # -- while a call runs ---------------------------------------------------------------
    def canonical(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """The running call is recorded as `name(*args, **kwargs)` (only for the outermost call)."""
        if self.depth == 1:
            self._canonical = _Canonical(name, tuple(args), dict(kwargs))

    def finish_call(
        self,
        owner_is_ops: bool,
        name: str,
        method: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
    ) -> None:
        canonical, self._canonical = self._canonical, None
        try:
            if canonical is not None:
                name, args, kwargs = canonical.name, canonical.args, canonical.kwargs
                positional, keywords = [self.arg(a) for a in args], [(k, self.arg(v)) for k, v in kwargs.items()]
            else:
                positional, keywords = self._bind(method, args, kwargs)
        except _Unprintable as why:
            self.unprintable = self.unprintable or f"{name}: {why}"
            positional, keywords = [], []
        outputs = self._name_outputs(result)
        unpack = isinstance(result, (list, tuple)) and not isinstance(result, Vector)
        target = "fd.ops" if owner_is_ops else "fd"
        self.records.append(Record(target, name, tuple(positional), tuple(keywords), outputs, unpack))

    def _bind(
        self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[list[Arg], list[tuple[str, Arg]]]:
        """Leading operands positionally, then every given argument by keyword: the
        spelling nvFuser prints (`fd.ops.cast(T0, dtype=DataType.Half)`)."""
        try:
            signature = inspect.signature(method)
            bound = signature.bind(*args, **kwargs)
        except (TypeError, ValueError):
            return [self.arg(a) for a in args], [(k, self.arg(v)) for k, v in kwargs.items()]
        positional: list[Arg] = []
        keywords: list[tuple[str, Arg]] = []
        leading = True
        for index, (pname, param) in enumerate(signature.parameters.items()):
            if pname not in bound.arguments:
                continue
            value = bound.arguments[pname]
            if param.kind is param.VAR_POSITIONAL:
                positional.extend(self.arg(v) for v in value)
                continue
            if param.kind is param.VAR_KEYWORD:
                keywords.extend((k, self.arg(v)) for k, v in value.items())
                continue
            operand = isinstance(value, (Tensor, Scalar)) or (index == 0)
            if leading and operand and param.kind is not param.KEYWORD_ONLY:
                positional.append(self.arg(value))
            else:
                leading = False
                keywords.append((pname, self.arg(value)))
        return positional, keywords

    # -- arguments -----------------------------------------------------------------------
    def arg(self, value: Any) -> Arg:
        if isinstance(value, (Tensor, Scalar)):
            return self._handle(value)
        if isinstance(value, Vector):
            name = self.vectors.get(tuple(id(v) for v in value.vals))
            if name is not None:
                return ["ref", name]
            return ["list", [self._handle(Scalar(value._fd, v)) for v in value.vals]]
        if isinstance(value, DataType):
            return ["dtype", value.name]
        if isinstance(value, (list, tuple)):
            return ["list", [self.arg(v) for v in value]]
        if type(value).__module__ == "numpy" and hasattr(value, "item"):
            value = value.item()
        if isinstance(value, complex):
            return ["complex", value.real, value.imag]
        if isinstance(value, float) and not math.isfinite(value):
            return ["float", str(value)]
        if value is None or isinstance(value, (bool, int, float, str)):
            return ["lit", value]
        if type(value).__module__.split(".")[0] == "torch" and type(value).__name__ == "dtype":
            return ["dtype", parse_dtype(value).name]
        raise _Unprintable(f"an argument of type {type(value).__name__} has no printed form")

    def _handle(self, handle: Tensor | Scalar) -> Arg:
        val = handle.tv if isinstance(handle, Tensor) else handle.val
        name = self.names.get(id(val))
        if name is not None:
            return ["ref", name]
        item = self.vector_items.get(id(val))
        if item is not None:
            return ["item", item[0], item[1]]
        if isinstance(handle, Scalar) and val.is_const:  # type: ignore[union-attr]
            return self.arg(val.value)  # type: ignore[union-attr]
        raise _Unprintable(f"{handle!r} was not made by a recorded call")

    # -- results -------------------------------------------------------------------------
    def _name_outputs(self, result: Any) -> tuple[str, ...]:
        if result is None:
            return ()
        if isinstance(result, (list, tuple)) and not isinstance(result, Vector):
            return tuple(n for r in result for n in self._name_outputs(r))
        if isinstance(result, Tensor):
            return (self._name("T", result.tv),)
        if isinstance(result, Scalar):
            return (self._name("S", result.val),)
        if isinstance(result, Vector):
            name = self._name("V", tuple(result.vals))
            self.vectors[tuple(id(v) for v in result.vals)] = name
            for i, v in enumerate(result.vals):
                self.vector_items.setdefault(id(v), (name, i))
                self.keep.append(v)
            return (name,)
        return ()

    def _name(self, prefix: str, val: Any) -> str:
        name = f"{prefix}{self.counter}"
        self.counter += 1
        self.keep.append(val)
        if not isinstance(val, tuple):
            self.names[id(val)] = name
        return name

    # -- printing ------------------------------------------------------------------------
    def body(self) -> str:
        return structural_key(self.records)


class _Unprintable(Exception):
    pass


def structural_key(records: Sequence[Record]) -> str:
    """What FusionCache compares: the printed body, which names every call, argument
    and input signature (and nothing else, such as the fusion id)."""
    return "".join(f"    {r.line()}\n" for r in records)


def print_definition(records: Sequence[Record], fusion_id: int | None) -> str:
    """nvFuser's printed definition: a leading newline, the `def` line, one line per call."""
    name = f"nvfuser_fusion_id{fusion_id}" if fusion_id is not None else "nvfuser_incomplete_fusion"
    lines = "".join(f"    {r.line()}\n" for r in records)
    return f"\ndef {name}(fd : FusionDefinition) -> None :\n{lines}"


def replay(fd: FusionDefinition, records: Sequence[Record]) -> None:
    """Make the recorded calls again on `fd` (inside its `with` block), from plain data."""
    values: dict[str, Any] = {}
    for record in records:
        owner: Any = fd.ops if record.target == "fd.ops" else fd
        if record.target not in ("fd", "fd.ops") or record.name.startswith("_"):
            raise FuserError(f"a serialized record calls {record.target}.{record.name}, which is not a frontend call")
        method = getattr(owner, record.name, None)
        if method is None or not callable(method):
            raise FuserError(f"a serialized record calls {record.target}.{record.name}, which does not exist")
        args = [_value(a, values) for a in record.args]
        kwargs = {k: _value(v, values) for k, v in record.kwargs}
        result = method(*args, **kwargs)
        _bind_outputs(record, result, values)


def _value(arg: Arg, values: dict[str, Any]) -> Any:
    kind = arg[0]
    if kind == "ref":
        if arg[1] not in values:
            raise FuserError(f"a serialized record uses {arg[1]} before it is defined")
        return values[arg[1]]
    if kind == "item":
        return values[arg[1]][int(arg[2])]
    if kind == "dtype":
        try:
            return DataType[arg[1]]
        except KeyError:
            raise FuserError(f"a serialized record names an unknown dtype {arg[1]!r}") from None
    if kind == "list":
        return [_value(a, values) for a in arg[1]]
    if kind == "float":
        return float(arg[1])
    if kind == "complex":
        return complex(arg[1], arg[2])
    if kind == "lit":
        return arg[1]
    raise InternalError(f"unknown argument kind {kind!r} in a record")


def _bind_outputs(record: Record, result: Any, values: dict[str, Any]) -> None:
    flat: list[Any] = []

    def walk(r: Any) -> None:
        if isinstance(r, (list, tuple)) and not isinstance(r, Vector):
            for x in r:
                walk(x)
        elif r is not None:
            flat.append(r)

    walk(result)
    if len(flat) != len(record.outputs):
        raise FuserError(f"{record.name} gave {len(flat)} results where its record names {len(record.outputs)}")
    values.update(zip(record.outputs, flat, strict=True))
