"""Configuration objects and pytest forms of a repro script, as interpreted values.

Scripts often keep their sizes in one module-level object and read them back:

    @dataclass                                   class Config:
    class Config:                                    BATCH = 4
        batch: int = 4                               SEQ = 128
        seq: int = 128
    CONFIG = Config(seq=64)                      CONFIG = SimpleNamespace(batch=4, seq=128)
    B, S = CONFIG.batch, CONFIG.seq

A `class` statement becomes a `ScriptClass` (its body interpreted as the script's other
statements are), an instance a `ScriptObject`, and `SimpleNamespace(...)` a
`ScriptObject` with no class. Methods are the script's own functions, interpreted when
called; nothing of Python's class machinery runs. `pytest.mark.parametrize` and
`pytest.fixture` are markers the interpreter reads to give a test its first case.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.script.values import Marker, Namespace, SafeFunction, Unavailable

MISSING = object()


@dataclass(eq=False)
class FieldSpec:
    """`dataclasses.field(default=..., default_factory=...)` in a dataclass body."""

    default: Any = MISSING
    default_factory: Any = None

    def value(self, owner: str, name: str) -> Any:
        if self.default is not MISSING:
            return self.default
        if self.default_factory is not None:
            factory = self.default_factory
            if isinstance(factory, SafeFunction):
                return factory.impl()
            raise FuserError(f"field {name!r} of {owner}: default_factory must be a builtin such as list")
        return MISSING


@dataclass(eq=False)
class ScriptClass:
    """A class of the script: its attributes (class-body names, methods as ScriptFunctions)
    and, for a dataclass, its fields in order with their defaults."""

    name: str
    attrs: dict[str, Any]
    lineno: int
    bases: list[ScriptClass] = field(default_factory=list)
    fields: list[tuple[str, Any]] | None = None  # None: not a dataclass
    frozen: bool = False

    def lookup(self, name: str) -> tuple[bool, Any]:
        if name in self.attrs:
            return True, self.attrs[name]
        for base in self.bases:
            found, value = base.lookup(name)
            if found:
                return True, value
        return False, None

    def all_fields(self) -> list[tuple[str, Any]]:
        """Dataclass fields of the bases first, as Python orders them."""
        fields: dict[str, Any] = {}
        for base in reversed(self.bases):
            fields.update(base.all_fields())
        fields.update(self.fields or [])
        return list(fields.items())

    @property
    def is_dataclass(self) -> bool:
        return self.fields is not None or any(b.is_dataclass for b in self.bases)


@dataclass(eq=False)
class ScriptObject:
    """An instance of a script class, or a SimpleNamespace (`cls` None)."""

    cls: ScriptClass | None
    attrs: dict[str, Any]

    @property
    def kind(self) -> str:
        return f"{self.cls.name} object" if self.cls is not None else "SimpleNamespace"

    @property
    def frozen(self) -> bool:
        return self.cls is not None and self.cls.frozen


@dataclass(frozen=True, eq=False)
class BoundMethod:
    """`obj.method`: the script function with its `self` (or `cls`) already given."""

    function: Any  # a ScriptFunction
    owner: Any


@dataclass(frozen=True, eq=False)
class DataclassOptions:
    """What `@dataclass(frozen=True, ...)` evaluates to."""

    frozen: bool = False


@dataclass(frozen=True, eq=False)
class ParamCase:
    """`pytest.param(*values, marks=..., id=...)`: one case of a parametrized test."""

    values: tuple[Any, ...]


def decorator_name(node: ast.expr) -> str:
    """`dataclass` for `@dataclass`, `@dataclasses.dataclass(...)`; `mark.parametrize`
    for `@pytest.mark.parametrize(...)`: the dotted tail of what a decorator names."""
    func = node.func if isinstance(node, ast.Call) else node
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def has_decorator(node: ast.FunctionDef | ast.ClassDef, *names: str) -> bool:
    return any(decorator_name(d).split(".")[-1] in names for d in node.decorator_list)


def _dataclass(cls: Any = None, **options: Any) -> Any:
    if cls is not None:
        raise FuserError("use @dataclass as a decorator", op="dataclass")
    return DataclassOptions(frozen=bool(options.get("frozen", False)))


def _field(*, default: Any = MISSING, default_factory: Any = None, **ignored: Any) -> FieldSpec:
    return FieldSpec(default, default_factory)


def _replace(obj: Any, **changes: Any) -> ScriptObject:
    if not isinstance(obj, ScriptObject) or obj.cls is None or not obj.cls.is_dataclass:
        raise FuserError(f"takes a dataclass instance, got a {type(obj).__name__}", op="dataclasses.replace")
    names = {name for name, _ in obj.cls.all_fields()}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise FuserError(f"{obj.cls.name} has no field {unknown[0]!r}", op="dataclasses.replace")
    return ScriptObject(obj.cls, {**obj.attrs, **changes})


def _simple_namespace(**attrs: Any) -> ScriptObject:
    return ScriptObject(None, dict(attrs))


def _param(*values: Any, **ignored: Any) -> ParamCase:
    return ParamCase(tuple(values))


DATACLASSES = Namespace(
    "dataclasses",
    {
        "dataclass": SafeFunction("dataclass", _dataclass, shallow=True),
        "field": SafeFunction("dataclasses.field", _field, shallow=True),
        "replace": SafeFunction("dataclasses.replace", _replace, shallow=True),
    },
)

TYPES = Namespace("types", {"SimpleNamespace": SafeFunction("SimpleNamespace", _simple_namespace, shallow=True)})

# Decorators are read by the interpreter, never called: these names only need to exist.
PYTEST = Namespace(
    "pytest",
    {
        "param": SafeFunction("pytest.param", _param, shallow=True),
        "mark": Namespace("pytest.mark", {}),
        "fixture": Unavailable("pytest.fixture", "pytest.fixture is read only as a decorator"),
    },
)

# Names of `typing` a configuration class may use: a NamedTuple base is read as a frozen
# dataclass; the others appear only in annotations, which are never evaluated.
NAMED_TUPLE = Marker("typing.NamedTuple")
ANNOTATION_NAMES = ("Any", "ClassVar", "Dict", "List", "Optional", "Sequence", "Tuple", "Union")
TYPING = Namespace(
    "typing",
    {"NamedTuple": NAMED_TUPLE}
    | {
        name: Marker(f"typing.{name}")
        for name in ["Any", "ClassVar", "Dict", "List", "Optional", "Sequence", "Tuple", "Union"]
    },
)
