"""Data types with nvFuser's names, their CUDA spellings, NumPy storage and promotion."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fuser_core.errors import FuserError


@dataclass(frozen=True)
class _TypeInfo:
    cuda: str  # how nvFuser prints the type (`float`, `__bfloat`, ...)
    prefix: str  # symbolic scalar name prefix (`i0`, `d3`, `f7`, `b13`)
    numpy: np.dtype | None
    kind: str  # "bool", "int", "float", "complex" or "null"
    itemsize: int
    short: str  # name in half-precision cast helpers (`__float2bfloat`)


class DataType(enum.Enum):
    Null = _TypeInfo("null_type", "v", None, "null", 0, "null")
    Bool = _TypeInfo("bool", "b", np.dtype(np.bool_), "bool", 1, "bool")
    Double = _TypeInfo("double", "d", np.dtype(np.float64), "float", 8, "double")
    Float = _TypeInfo("float", "f", np.dtype(np.float32), "float", 4, "float")
    Half = _TypeInfo("__half", "f", np.dtype(np.float16), "float", 2, "half")
    BFloat16 = _TypeInfo("__bfloat", "f", np.dtype(ml_dtypes.bfloat16), "float", 2, "bfloat")
    Float8_e4m3fn = _TypeInfo("__e4m3", "f", np.dtype(ml_dtypes.float8_e4m3fn), "float", 1, "e4m3")
    Float8_e5m2 = _TypeInfo("__e5m2", "f", np.dtype(ml_dtypes.float8_e5m2), "float", 1, "e5m2")
    Int = _TypeInfo("int64_t", "i", np.dtype(np.int64), "int", 8, "int")
    Int32 = _TypeInfo("int", "i", np.dtype(np.int32), "int", 4, "int32")
    UInt64 = _TypeInfo("uint64_t", "i", np.dtype(np.uint64), "int", 8, "uint")
    Index = _TypeInfo("nvfuser_index_t", "i", np.dtype(np.int64), "int", 8, "index")
    ComplexFloat = _TypeInfo("std::complex<float>", "c", np.dtype(np.complex64), "complex", 8, "cfloat")
    ComplexDouble = _TypeInfo("std::complex<double>", "c", np.dtype(np.complex128), "complex", 16, "cdouble")

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    __str__ = __repr__

    @property
    def cuda(self) -> str:
        return self.value.cuda

    @property
    def prefix(self) -> str:
        return self.value.prefix

    @property
    def numpy(self) -> np.dtype:
        if self.value.numpy is None:
            raise ValueError(f"{self!r} has no storage type")
        return self.value.numpy

    @property
    def itemsize(self) -> int:
        return self.value.itemsize

    @property
    def is_floating(self) -> bool:
        return self.value.kind == "float"

    @property
    def is_integral(self) -> bool:
        return self.value.kind == "int"

    @property
    def is_boolean(self) -> bool:
        return self.value.kind == "bool"

    @property
    def is_complex(self) -> bool:
        return self.value.kind == "complex"

    @property
    def is_reduced_float(self) -> bool:
        """Types nvFuser computes in float and only stores narrow."""
        return self in _REDUCED_FLOATS

    @property
    def compute_numpy(self) -> np.dtype:
        """The NumPy type the reference computes in for values of this type."""
        return np.dtype(np.float32) if self.is_reduced_float else self.numpy


_REDUCED_FLOATS = frozenset({DataType.Half, DataType.BFloat16, DataType.Float8_e4m3fn, DataType.Float8_e5m2})

# Types a fusion tensor may hold (Index and Null are internal).
TENSOR_DTYPES = tuple(dt for dt in DataType if dt not in (DataType.Null, DataType.Index))

_BY_NUMPY = {dt.value.numpy: dt for dt in TENSOR_DTYPES if dt.value.numpy is not None}


def dtype_from_numpy(dtype: np.dtype) -> DataType | None:
    return _BY_NUMPY.get(np.dtype(dtype))


def dtype_of_python_scalar(value: object) -> DataType:
    """The DataType nvFuser's frontend gives a Python literal."""
    if isinstance(value, (bool, np.bool_)):
        return DataType.Bool
    if isinstance(value, (int, np.integer)):
        return DataType.Int
    if isinstance(value, (float, np.floating)):
        return DataType.Double
    if isinstance(value, (complex, np.complexfloating)):
        return DataType.ComplexDouble
    raise TypeError(f"{type(value).__name__} is not a scalar")


_TORCH_DTYPES = {
    "torch.float32": DataType.Float,
    "torch.float64": DataType.Double,
    "torch.float16": DataType.Half,
    "torch.bfloat16": DataType.BFloat16,
    "torch.float8_e4m3fn": DataType.Float8_e4m3fn,
    "torch.float8_e5m2": DataType.Float8_e5m2,
    "torch.int64": DataType.Int,
    "torch.int32": DataType.Int32,
    "torch.uint64": DataType.UInt64,
    "torch.bool": DataType.Bool,
    "torch.complex64": DataType.ComplexFloat,
    "torch.complex128": DataType.ComplexDouble,
}


def torch_name(dtype: DataType) -> str | None:
    """`torch.float32` for DataType.Float; None for a type torch does not have."""
    return next((name for name, d in _TORCH_DTYPES.items() if d == dtype), None)


def dtype_from_torch_name(name: str) -> DataType | None:
    """The DataType of a torch dtype given by its name (`torch.float16`), or None."""
    return _TORCH_DTYPES.get(name)


def dtype_from_framework(array: Any) -> DataType:
    """The DataType of a NumPy, CuPy or torch array (torch is read by name, not imported)."""
    name = str(getattr(array, "dtype", ""))
    if name in _TORCH_DTYPES:
        return _TORCH_DTYPES[name]
    try:
        found = dtype_from_numpy(np.dtype(array.dtype))
    except TypeError:
        found = None
    if found is None:
        raise ValueError(f"unsupported array dtype {name or type(array).__name__}")
    return found


# C++'s std::common_type over the types with a native C++ spelling, as a chain:
# the common type of two of them is the later one (nvFuser's HANDLE_TYPE_PROMOTION).
_NATIVE_ORDER = {
    DataType.Bool: 0,
    DataType.Int32: 1,
    DataType.Int: 2,
    DataType.Float: 3,
    DataType.Double: 4,
    DataType.ComplexFloat: 5,
    DataType.ComplexDouble: 6,
}


def promote_type(a: DataType, b: DataType) -> DataType:
    """The common type of two types, as nvFuser's `promoteType` (csrc/type.h) gives it.

    Symmetric in its arguments. Index absorbs the other integer types; Double with
    ComplexFloat is ComplexDouble (ATen's rule, not C++'s); the native C++ types meet
    at std::common_type; narrow floats meet other floats at Float (Double wins) and
    lose to complex types; any float beats an integer or Bool. UInt64 with a signed
    integer or Bool (and Index with Bool) has no common type, in nvFuser as in PyTorch:
    a FuserError. Null is "no type yet" and gives the other one.
    """
    if a == b or b == DataType.Null:
        return a
    if a == DataType.Null:
        return b
    if DataType.Index in (a, b) and a.is_integral and b.is_integral:
        return DataType.Index
    if {a, b} == {DataType.Double, DataType.ComplexFloat}:
        return DataType.ComplexDouble
    if a in _NATIVE_ORDER and b in _NATIVE_ORDER:
        return a if _NATIVE_ORDER[a] > _NATIVE_ORDER[b] else b
    if a.is_floating and b.is_floating:
        return DataType.Double if DataType.Double in (a, b) else DataType.Float
    for kind in ("complex", "float"):  # a narrow float or UInt64 meets a higher category
        if a.value.kind == kind:
            return a
        if b.value.kind == kind:
            return b
    raise FuserError(f"{a!r} and {b!r} have no common type; cast one of them first")


def complex_of(dtype: DataType) -> DataType:
    """The complex type with `dtype`'s precision (nvFuser's getComplexTypeFromType):
    only Float and Double (or complex types) have one."""
    if dtype in (DataType.Float, DataType.ComplexFloat):
        return DataType.ComplexFloat
    if dtype in (DataType.Double, DataType.ComplexDouble):
        return DataType.ComplexDouble
    raise FuserError(f"there is no complex type of {dtype!r} precision; cast to Float or Double first")


def real_of(dtype: DataType) -> DataType:
    if dtype == DataType.ComplexDouble:
        return DataType.Double
    if dtype == DataType.ComplexFloat:
        return DataType.Float
    return dtype


# nvFuser converts to fp8 with `cvt.rn.satfinite` (runtime/fp8_support.cu): a value
# beyond the largest finite one, infinity included, becomes that value; NaN stays NaN.
FP8_MAX = {DataType.Float8_e4m3fn: 448.0, DataType.Float8_e5m2: 57344.0}


def saturate(values: Any, dtype: DataType) -> Any:
    """`values` clamped to the finite range of `dtype` if it is an fp8 type."""
    limit = FP8_MAX.get(dtype)
    if limit is None:
        return values
    arr = np.asarray(values)
    if arr.dtype == dtype.numpy:
        return values
    if arr.dtype.kind == "V":  # ml_dtypes' narrow floats are exact in float32
        arr = arr.astype(np.float32)
    return np.clip(arr, -limit, limit)


def to_storage(values: Any, dtype: DataType) -> np.ndarray:
    """An array of `dtype`'s storage type, converted as nvFuser's kernels store it."""
    return np.asarray(saturate(values, dtype)).astype(dtype.numpy, copy=False)


def parse_dtype(value: object) -> DataType:
    """Accept a DataType, its name, or a NumPy dtype."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        name = value.removeprefix("DataType.")
        if name in DataType.__members__:
            return DataType[name]
        raise ValueError(f"unknown dtype {value!r}; valid: {', '.join(DataType.__members__)}")
    if str(value) in _TORCH_DTYPES:  # a torch dtype, read by name (torch is not imported)
        return _TORCH_DTYPES[str(value)]
    try:
        found = dtype_from_numpy(np.dtype(value))  # type: ignore[call-overload]
    except TypeError:
        found = None
    if found is None:
        raise ValueError(f"no DataType for {value!r}")
    return found
