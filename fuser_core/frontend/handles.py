"""What the frontend hands back to user code: Tensor, Scalar and Vector handles.

They wrap IR values of one FusionDefinition and forward Python operators to
`fd.ops`, so `T0 + T1`, `-T0`, `S0 * 2` and `T0 > 0` build IR as nvFuser's
frontend does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, overload

from fuser_core.ir.dtype import DataType
from fuser_core.ir.scalar import Scalar as IrScalar
from fuser_core.ir.tensor_view import TensorView

if TYPE_CHECKING:
    from fuser_core.frontend.fusion_definition import FusionDefinition


class _Operand:
    """Python operators shared by Tensor and Scalar handles."""

    _fd: FusionDefinition

    def _binary(self, name: str, other: Any, reverse: bool = False) -> Any:
        op = getattr(self._fd.ops, name)
        return op(other, self) if reverse else op(self, other)

    def __add__(self, o: Any) -> Any:
        return self._binary("add", o)

    def __radd__(self, o: Any) -> Any:
        return self._binary("add", o, True)

    def __sub__(self, o: Any) -> Any:
        return self._binary("sub", o)

    def __rsub__(self, o: Any) -> Any:
        return self._binary("sub", o, True)

    def __mul__(self, o: Any) -> Any:
        return self._binary("mul", o)

    def __rmul__(self, o: Any) -> Any:
        return self._binary("mul", o, True)

    def __truediv__(self, o: Any) -> Any:
        return self._binary("div", o)

    def __rtruediv__(self, o: Any) -> Any:
        return self._binary("div", o, True)

    def __mod__(self, o: Any) -> Any:
        return self._binary("mod", o)

    def __rmod__(self, o: Any) -> Any:
        return self._binary("mod", o, True)

    def __pow__(self, o: Any) -> Any:
        return self._binary("pow", o)

    def __rpow__(self, o: Any) -> Any:
        return self._binary("pow", o, True)

    def __and__(self, o: Any) -> Any:
        return self._binary("bitwise_and", o)

    def __rand__(self, o: Any) -> Any:
        return self._binary("bitwise_and", o, True)

    def __or__(self, o: Any) -> Any:
        return self._binary("bitwise_or", o)

    def __ror__(self, o: Any) -> Any:
        return self._binary("bitwise_or", o, True)

    def __xor__(self, o: Any) -> Any:
        return self._binary("bitwise_xor", o)

    def __lshift__(self, o: Any) -> Any:
        return self._binary("bitwise_left_shift", o)

    def __rlshift__(self, o: Any) -> Any:
        return self._binary("bitwise_left_shift", o, True)

    def __rshift__(self, o: Any) -> Any:
        return self._binary("bitwise_right_shift", o)

    def __rrshift__(self, o: Any) -> Any:
        return self._binary("bitwise_right_shift", o, True)

    def __rxor__(self, o: Any) -> Any:
        return self._binary("bitwise_xor", o, True)

    def __lt__(self, o: Any) -> Any:
        return self._binary("lt", o)

    def __le__(self, o: Any) -> Any:
        return self._binary("le", o)

    def __gt__(self, o: Any) -> Any:
        return self._binary("gt", o)

    def __ge__(self, o: Any) -> Any:
        return self._binary("ge", o)

    def __eq__(self, o: Any) -> Any:  # type: ignore[override]
        return self._binary("eq", o)

    def __ne__(self, o: Any) -> Any:  # type: ignore[override]
        return self._binary("ne", o)

    def __neg__(self) -> Any:
        return self._fd.ops.neg(self)

    def __abs__(self) -> Any:
        return self._fd.ops.abs(self)

    def __invert__(self) -> Any:
        return self._fd.ops.bitwise_not(self)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("a fusion value has no truth value while the fusion is being defined")


class Tensor(_Operand):
    def __init__(self, fd: FusionDefinition, tv: TensorView) -> None:
        self._fd = fd
        self.tv = tv

    @property
    def ndim(self) -> int:
        return self.tv.ndim

    @property
    def dtype(self) -> DataType:
        return self.tv.dtype

    @property
    def index(self) -> int:
        return self.tv.name

    def size(self, dim: int) -> Scalar:
        return self._fd.ops.size(self, dim)  # type: ignore[no-any-return]

    def shape(self) -> Vector:
        return self._fd.ops.shape(self)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Tensor(T{self.tv.name}, ndim={self.ndim}, dtype={self.dtype!r})"


class Scalar(_Operand):
    def __init__(self, fd: FusionDefinition, val: IrScalar) -> None:
        self._fd = fd
        self.val = val

    @property
    def dtype(self) -> DataType:
        return self.val.dtype

    @property
    def index(self) -> int:
        return self.val.name

    def __repr__(self) -> str:
        return f"Scalar({self.val}, dtype={self.dtype!r})"


class Vector:
    """A list of scalars, as `define_vector` and `fd.ops.shape` return."""

    def __init__(self, fd: FusionDefinition, vals: list[IrScalar]) -> None:
        self._fd = fd
        self.vals = vals

    @property
    def size(self) -> int:
        return len(self.vals)

    def __len__(self) -> int:
        return len(self.vals)

    @overload
    def __getitem__(self, i: int) -> Scalar: ...

    @overload
    def __getitem__(self, i: slice) -> Vector: ...

    def __getitem__(self, i: int | slice) -> Scalar | Vector:
        if isinstance(i, slice):
            return Vector(self._fd, self.vals[i])
        return Scalar(self._fd, self.vals[i])

    def __iter__(self) -> Iterator[Scalar]:
        return (Scalar(self._fd, v) for v in self.vals)

    def __repr__(self) -> str:
        return f"Vector([{', '.join(str(v) for v in self.vals)}])"
