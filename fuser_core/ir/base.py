"""Statements of the IR: values and the expressions that define them.

Every statement belongs to one container (a `Fusion`) which numbers it. Values are
numbered per category (tensors, IterDomains, scalars: `T3`, `iS7`, `i2`) and
expressions by one counter, all in creation order, so printed names are
deterministic for a given definition.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from fuser_core.errors import InternalError, SourceLocation, current_location
from fuser_core.ir.dtype import DataType

if TYPE_CHECKING:
    from fuser_core.ir.fusion import Fusion


class ScalarEvaluator(Protocol):
    def evaluate(self, val: Val) -> Any: ...


_current_container: contextvars.ContextVar[Fusion | None] = contextvars.ContextVar("fuser_current_fusion", default=None)


def current_fusion() -> Fusion:
    fusion = _current_container.get()
    if fusion is None:
        raise InternalError("no active Fusion: build IR inside `with fusion.guard():`")
    return fusion


@contextlib.contextmanager
def fusion_guard(fusion: Fusion) -> Iterator[Fusion]:
    token = _current_container.set(fusion)
    try:
        yield fusion
    finally:
        _current_container.reset(token)


class Statement:
    """A node of the IR, owned and named by one container."""

    fusion: Fusion
    name: int

    def to_string(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.to_string()}>"


class Val(Statement):
    """A value: a scalar, an IterDomain or a TensorView."""

    # Which counter names this kind of value: "tv", "id" or "scalar".
    name_category = "scalar"

    def __init__(self, dtype: DataType, fusion: Fusion | None = None) -> None:
        self.fusion = fusion if fusion is not None else current_fusion()
        self.dtype = dtype
        self.definition: Expr | None = None
        self.uses: list[Expr] = []
        self.name = self.fusion.register_statement(self, self.name_category)

    def to_inline_string(self) -> str:
        return self.to_string()


class Expr(Statement):
    """An operation with input and output values. Subclasses add attributes."""

    # The name nvFuser's frontend and printers use for the op (for messages).
    op_name = "expr"
    # The frontend op that made this expression, where it is another (expand of an axis
    # already that long is a set): what errors about it name.
    user_op: str | None = None

    @property
    def user_name(self) -> str:
        """The op as the user wrote it: `user_op`, else `op_name`."""
        return self.user_op or self.op_name

    def __init__(
        self,
        inputs: Sequence[Val],
        outputs: Sequence[Val],
        fusion: Fusion | None = None,
    ) -> None:
        self.fusion = fusion if fusion is not None else current_fusion()
        self.inputs: list[Val] = list(inputs)
        self.outputs: list[Val] = list(outputs)
        self.location: SourceLocation | None = current_location()
        for val in self.inputs + self.outputs:
            if val.fusion is not self.fusion:
                raise InternalError(f"{val} belongs to another fusion than {self.op_name}")
        for out in self.outputs:
            out.definition = self
        for inp in self.inputs:
            inp.uses.append(self)
        self.name = self.fusion.register_statement(self, "expr")

    @property
    def input(self) -> Val:
        return self.inputs[0]

    @property
    def output(self) -> Val:
        return self.outputs[0]

    def is_tensor_op(self) -> bool:
        return any(v.name_category == "tv" for v in self.outputs)

    def to_inline_string(self) -> str:
        raise InternalError(f"{self.op_name} cannot be printed inline")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        """The reference semantics: output values from input values (NumPy arrays
        for tensors, Python numbers for scalars). `ev` evaluates scalars such as
        output extents."""
        raise InternalError(f"{type(self).__name__} has no reference rule")

    def replace_input(self, old: Val, new: Val) -> None:
        self.fusion.invalidate()
        for i, inp in enumerate(self.inputs):
            if inp is old:
                self.inputs[i] = new
                if self in old.uses:
                    old.uses.remove(self)
                if self not in new.uses:
                    new.uses.append(self)


def indent(level: int) -> str:
    return "  " * level
