"""Lazy inputs of a repro script: what `torch.randn(...)` and its friends describe,
turned into NumPy data only when `materialize` is called.

A spec is a storage (how many elements, and how they are filled) plus a view into it
(shape, element strides, offset), as a torch tensor is. So `as_strided`, `t()` and
`expand` only change the view, and a 3 GB input costs nothing until it is run. A spec
with a `source` is a copy of another spec's values (a comparison, a dtype conversion,
`contiguous()`), laid out in its own storage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType, dtype_of_python_scalar

TENSOR_KINDS = frozenset(
    {"randn", "rand", "ones", "zeros", "empty", "full", "randint", "tensor", "arange", "make_tensor"}
)
RANDOM_KINDS = frozenset({"randn", "rand", "empty", "randint", "make_tensor"})

COMPARISONS = {"gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal}
COMPARISONS |= {"eq": np.equal, "ne": np.not_equal}
COMPARISON_SYMBOLS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}

# Integer ranges for random kinds that torch gives no range for (make_tensor's is torch's own).
_DEFAULT_INT_RANGE = {"make_tensor": (-9, 10)}
_INT_RANGE = (0, 10)
_MAKE_TENSOR_FLOAT_RANGE = (-9.0, 9.0)

MAX_RANK = 64  # dimensions of an input tensor
MAX_EXTENT = 2**63  # sizes, strides and offsets are int64s, as in torch
MAX_COPY_CHAIN = 32  # specs copied from specs copied from ... (`x = x > 0` in a loop)

PythonScalar = bool | int | float | complex


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides, as torch computes them (size-0 axes count as 1)."""
    strides: list[int] = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def storage_extent(shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> int:
    """How many storage elements a view needs: one past its largest index."""
    if any(size == 0 for size in shape):
        return offset
    return offset + 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))


def is_non_overlapping_and_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Every element exactly once in a gap-free block: torch keeps such layouts on copies."""
    step = 1
    for size, stride in sorted(((s, t) for s, t in zip(shape, strides, strict=True) if s != 1), key=lambda p: p[1]):
        if stride != step:
            return False
        step *= size
    return True


def format_bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


@dataclass(frozen=True)
class ScalarSpec:
    """A scalar input: a Python value, passed as is."""

    value: PythonScalar

    def __post_init__(self) -> None:
        if not isinstance(self.value, (bool, int, float, complex)):
            raise FuserError(f"a scalar input must be a Python number or bool, got {type(self.value).__name__}")

    @property
    def dtype(self) -> DataType:
        return dtype_of_python_scalar(self.value)

    @property
    def nbytes(self) -> int:
        return self.dtype.itemsize

    def materialize(self, seed: int = 0) -> PythonScalar:
        return self.value

    def describe(self) -> str:
        return f"scalar {self.dtype.name} {self.value!r}"


@dataclass(frozen=True)
class TensorSpec:
    """A tensor input described, not allocated. `strides` are in elements; None means
    row-major. Fill parameters: `low`/`high` (randint, make_tensor), `fill` (full's
    value, arange's start), `step` (arange), `data` (torch.tensor: the storage's values
    in order). A spec with a `source` holds a copy of the source's values, compared
    with `operand` when `compare` is set, laid out with `source_strides`."""

    shape: tuple[int, ...]
    dtype: DataType = DataType.Float
    strides: tuple[int, ...] | None = None
    device: str = "cpu"
    kind: str = "randn"
    low: float | None = None
    high: float | None = None
    fill: Any = None
    step: Any = None
    data: tuple[Any, ...] | None = None
    storage_offset: int = 0
    storage_size: int | None = None
    source: TensorSpec | None = None
    source_strides: tuple[int, ...] | None = None
    compare: str | None = None
    operand: Any = None
    requires_grad: bool = False

    def __post_init__(self) -> None:
        if len(self.shape) > MAX_RANK:
            raise FuserError(f"a tensor of {len(self.shape)} dimensions has more than {MAX_RANK}")
        shape = _int_tuple(self.shape, "shape")
        strides = contiguous_strides(shape) if self.strides is None else _int_tuple(self.strides, "strides")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        if len(strides) != len(shape):
            raise FuserError(f"strides {list(strides)} do not match shape {list(shape)}")
        if self.kind not in TENSOR_KINDS:
            raise FuserError(f"unknown tensor kind {self.kind!r}; known: {', '.join(sorted(TENSOR_KINDS))}")
        if self.compare is not None and self.compare not in COMPARISONS:
            raise FuserError(f"unknown comparison {self.compare!r}")
        if self.copy_depth > MAX_COPY_CHAIN:
            raise FuserError(f"a tensor copied from a copy more than {MAX_COPY_CHAIN} times deep is not supported")
        if self.storage_size is None:
            object.__setattr__(self, "storage_size", self._default_storage_size())
        self._check_storage()

    def _default_storage_size(self) -> int:
        if self.source is not None and self.source_strides is not None:
            return storage_extent(self.source.shape, self.source_strides)
        if self.data is not None:
            return len(self.data)
        return storage_extent(self.shape, self.strides or (), self.storage_offset)

    def _check_storage(self) -> None:
        assert self.strides is not None and self.storage_size is not None
        if self.storage_offset < 0 or any(s < 0 for s in self.strides):
            raise FuserError(f"negative strides or offset are not supported: strides {list(self.strides)}")
        need = storage_extent(self.shape, self.strides, self.storage_offset)
        if need > self.storage_size:
            raise FuserError(
                f"a view of shape {list(self.shape)}, strides {list(self.strides)} and offset "
                f"{self.storage_offset} needs {need} elements but the storage has {self.storage_size}"
            )
        if (self.source is None) != (self.source_strides is None):
            raise FuserError("source and source_strides go together")
        if self.source is None and self.data is not None and len(self.data) != self.storage_size:
            raise FuserError(f"data has {len(self.data)} values for a storage of {self.storage_size}")

    # -- what it is ---------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def copy_depth(self) -> int:
        """How many copies lie between this spec and the one whose values are drawn."""
        depth, source = 0, self.source
        while source is not None and depth <= MAX_COPY_CHAIN:
            depth, source = depth + 1, source.source
        return depth

    @property
    def nbytes(self) -> int:
        """Bytes of the storage that `materialize` allocates for this tensor."""
        assert self.storage_size is not None
        return self.storage_size * self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        expected = contiguous_strides(self.shape)
        return all(size == 1 or s == e for size, s, e in zip(self.shape, self.strides or (), expected, strict=True))

    def describe(self) -> str:
        offset = f" offset {self.storage_offset}" if self.storage_offset else ""
        return (
            f"tensor {list(self.shape)} {self.dtype.name} strides {list(self.strides or ())}{offset} "
            f"{self.device} {self.fill_description()} ({format_bytes(self.nbytes)})"
        )

    def fill_description(self) -> str:
        if self.source is not None:
            base = self.source.fill_description()
            if self.compare is not None:
                return f"{base} {COMPARISON_SYMBOLS[self.compare]} {self.operand!r}"
            return base if self.source.dtype == self.dtype else f"{base} as {self.dtype.name}"
        if self.kind == "full":
            return f"full {self.fill!r}"
        if self.kind == "randint" or (self.kind in ("make_tensor", "rand") and (self.low, self.high) != (None, None)):
            return f"{self.kind} [{self.low}, {self.high})"
        if self.kind == "arange":
            return f"arange from {self.fill} step {self.step}"
        if self.kind == "tensor":
            shown = ", ".join(repr(v) for v in (self.data or ())[:4])
            return f"tensor data [{shown}{', ...' if len(self.data or ()) > 4 else ''}]"
        return self.kind

    # -- making it ----------------------------------------------------------------------
    def materialize(self, seed: int = 0) -> np.ndarray:
        """NumPy data with exactly this shape, dtype and element strides."""
        return self._materialize(np.random.default_rng(seed))

    def _materialize(self, rng: np.random.Generator) -> np.ndarray:
        assert self.strides is not None
        return _strided_view(self._storage(rng), self.shape, self.strides, self.storage_offset)

    def _storage(self, rng: np.random.Generator) -> np.ndarray:
        assert self.storage_size is not None
        if self.source is None:
            return _fill(self, rng, self.storage_size)
        values = self.source._materialize(rng)
        if self.compare is not None:
            values = COMPARISONS[self.compare](values.astype(self.source.dtype.compute_numpy), self.operand)
        buffer = np.zeros(self.storage_size, dtype=self.dtype.numpy)
        assert self.source_strides is not None
        target = _strided_view(buffer, self.source.shape, self.source_strides, 0)
        target[...] = values.astype(self.dtype.numpy)
        return buffer


InputSpec = TensorSpec | ScalarSpec


def materialize_inputs(
    specs: Sequence[InputSpec], seed: int = 0, *, max_bytes: int | None = None, owner: str = "the fusion"
) -> list[Any]:
    """Each input from its own stream, so two same-shaped randn inputs differ. Refused
    before anything is allocated when they need more than `max_bytes`; running out of
    memory on the way is a FuserError too. `owner` names the fusion in those errors."""
    need = input_bytes(specs)
    if max_bytes is not None and need > max_bytes:
        raise FuserError(
            f"{owner}'s inputs need {format_bytes(need)}; the limit is {format_bytes(max_bytes)} (--max-input-bytes)"
        )
    out: list[Any] = []
    for index, spec in enumerate(specs):
        stream = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        try:
            out.append(spec.materialize(stream))
        except MemoryError as err:  # numpy's _ArrayMemoryError among them
            raise FuserError(
                f"out of memory making input {index} of {owner} ({spec.describe()}); "
                f"its inputs need {format_bytes(need)} in all"
            ) from err
        except (ValueError, OverflowError) as err:  # a fill value that does not fit the dtype
            raise FuserError(f"cannot make input {index} of {owner} ({spec.describe()}): {err}") from err
    return out


def input_bytes(specs: Sequence[InputSpec]) -> int:
    """Bytes that materializing `specs` allocates: each storage, and the storages of the
    tensors a copy is made from."""
    total = 0
    for spec in specs:
        source: InputSpec | None = spec
        while source is not None:
            total += source.nbytes
            source = source.source if isinstance(source, TensorSpec) else None
    return total


def _int_tuple(values: Sequence[Any], what: str) -> tuple[int, ...]:
    result = tuple(values)
    for v in result:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise FuserError(f"{what} entries must be ints, got {v!r} in {list(result)}")
        if v < 0:
            raise FuserError(f"{what} entries must not be negative, got {list(result)}")
        if v >= MAX_EXTENT:
            raise FuserError(f"{what} entry {v} does not fit an int64")
    return tuple(int(v) for v in result)


def _strided_view(storage: np.ndarray, shape: tuple[int, ...], strides: Sequence[int], offset: int) -> np.ndarray:
    # The bounds were checked when the spec was made; overlapping views (expand) are
    # read-only so that writing one element cannot silently change others.
    item = storage.itemsize
    writeable = _non_overlapping(shape, strides)
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=shape, strides=tuple(s * item for s in strides), writeable=writeable
    )


def _non_overlapping(shape: Sequence[int], strides: Sequence[int]) -> bool:
    reach = 0
    for size, stride in sorted(((s, t) for s, t in zip(shape, strides, strict=True) if s > 1), key=lambda p: p[1]):
        if stride <= reach:
            return False
        reach += (size - 1) * stride
    return True


def _fill(spec: TensorSpec, rng: np.random.Generator, count: int) -> np.ndarray:
    dtype = spec.dtype.numpy
    if spec.kind in ("ones", "zeros", "full"):
        value = {"ones": 1, "zeros": 0}.get(spec.kind, spec.fill)
        return np.full(count, value, dtype=dtype)
    if spec.kind == "tensor":
        return np.array(spec.data, dtype=dtype).reshape(count)
    if spec.kind == "arange":
        return _arange(spec, count).astype(dtype)
    return _random(spec, rng, count).astype(dtype)


def _arange(spec: TensorSpec, count: int) -> np.ndarray:
    start, step = spec.fill or 0, 1 if spec.step is None else spec.step
    exact_ints = all(isinstance(v, int) for v in (start, step))
    index = np.arange(count, dtype=np.int64 if exact_ints else np.float64)
    return start + step * index


def _random(spec: TensorSpec, rng: np.random.Generator, count: int) -> np.ndarray:
    dt = spec.dtype
    if dt.is_boolean:
        return rng.integers(0, 2, count).astype(np.bool_)
    if dt.is_integral or spec.kind == "randint":
        low, high = _int_range(spec)
        return rng.integers(low, high, count, dtype=np.int64)
    wide = dt in (DataType.Double, DataType.ComplexDouble)
    real = np.float64 if wide else np.float32
    if dt.is_complex:
        scale = np.sqrt(0.5)  # torch.randn's complex parts each have variance 1/2
        return (rng.standard_normal(count, real) + 1j * rng.standard_normal(count, real)) * scale
    if spec.kind == "rand":
        start = 0.0 if spec.low is None else float(spec.low)
        width = (1.0 if spec.high is None else float(spec.high)) - start
        return (start + width * rng.random(count, real)).astype(real)
    if spec.kind == "make_tensor" and (spec.low, spec.high) != (None, None):
        bottom = _MAKE_TENSOR_FLOAT_RANGE[0] if spec.low is None else float(spec.low)
        top = _MAKE_TENSOR_FLOAT_RANGE[1] if spec.high is None else float(spec.high)
        return rng.uniform(bottom, top, count).astype(real)
    return rng.standard_normal(count, real)


def _int_range(spec: TensorSpec) -> tuple[int, int]:
    default_low, default_high = _DEFAULT_INT_RANGE.get(spec.kind, _INT_RANGE)
    low = default_low if spec.low is None else math.ceil(spec.low)
    high = default_high if spec.high is None else math.ceil(spec.high)
    if spec.dtype == DataType.UInt64:
        low = max(low, 0)
    if high <= low:
        raise FuserError(f"{spec.kind}: empty integer range [{low}, {high})")
    return low, high
