"""The part of torch a repro script may use to make its inputs, as lazy TensorSpecs.

Nothing here imports torch: `torch.randn(2, 3, dtype=torch.bfloat16, device="cuda")`
becomes a TensorSpec with torch's shape, dtype, stride and fill rules, and tensor
methods (`.as_strided`, `.t()`, `.to(...)`, ...) become new specs. Torch dtypes are
our DataTypes, so `dtype=torch.float32` and `DataType.Float` mean the same thing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType
from fuser_core.script.input_spec import (
    MAX_EXTENT,
    MAX_RANK,
    RANDOM_KINDS,
    TensorSpec,
    contiguous_strides,
    is_non_overlapping_and_dense,
)
from fuser_core.script.values import Ignored, Marker, Namespace, PassContext, SafeFunction

TORCH_DTYPES: dict[str, DataType] = {
    "float32": DataType.Float, "float": DataType.Float, "float64": DataType.Double,
    "double": DataType.Double, "float16": DataType.Half, "half": DataType.Half,
    "bfloat16": DataType.BFloat16, "float8_e4m3fn": DataType.Float8_e4m3fn,
    "float8_e5m2": DataType.Float8_e5m2, "int64": DataType.Int, "long": DataType.Int,
    "int32": DataType.Int32, "int": DataType.Int32, "uint64": DataType.UInt64, "bool": DataType.Bool,
    "complex64": DataType.ComplexFloat, "cfloat": DataType.ComplexFloat,
    "complex128": DataType.ComplexDouble, "cdouble": DataType.ComplexDouble,
}  # fmt: skip

MEMORY_FORMATS: dict[str, tuple[int, ...] | None] = {"contiguous_format": None, "preserve_format": None}
MEMORY_FORMATS |= {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}

_OPTIONS = frozenset({"dtype", "device", "requires_grad", "memory_format"})
_IGNORED_OPTIONS = frozenset({"generator", "layout", "pin_memory", "non_blocking", "copy", "names"})
_VALUE_KINDS = frozenset({"ones", "zeros", "full"})  # filled the same whatever the layout
MAX_DATA = 1_000_000  # elements of explicit torch.tensor data
_FLIPPED = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}

Number = bool | int | float | complex


# -- arguments ----------------------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dims(op: str, values: Any, what: str = "size") -> tuple[int, ...]:
    items = values if isinstance(values, (list, tuple)) else (values,)
    if len(items) > MAX_RANK:
        raise FuserError(f"{len(items)} {what} entries: a tensor has at most {MAX_RANK} dimensions here", op=op)
    for v in items:
        if not _is_int(v):
            raise FuserError(f"{what} entries must be ints, got {v!r}", op=op)
        if not -MAX_EXTENT <= v < MAX_EXTENT:
            raise FuserError(f"{what} entry {v} does not fit an int64", op=op)
    return tuple(items)


def _sizes(op: str, args: Sequence[Any]) -> tuple[int, ...]:
    """torch's `*size`: ints, or a single list/tuple of ints; no negative sizes."""
    sizes = _dims(op, args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else tuple(args))
    if any(s < 0 for s in sizes):
        raise FuserError(f"negative size in {list(sizes)}", op=op)
    return sizes


def device_arg(value: Any, op: str = "device") -> str:
    if value is None:
        return "cpu"
    if _is_int(value):
        return f"cuda:{value}"
    if isinstance(value, str) and value.split(":")[0] in ("cpu", "cuda", "meta"):
        return value
    raise FuserError(f"unsupported device {value!r}", op=op)


def _dtype_arg(value: Any, op: str) -> DataType | None:
    if value is None or isinstance(value, DataType):
        return value
    raise FuserError(f"dtype must be a torch dtype, got {value!r}", op=op)


def _memory_format(value: Any, op: str) -> str | None:
    name = value.name if isinstance(value, Marker) else value
    if name is None or name in MEMORY_FORMATS:
        return name
    raise FuserError(f"unsupported memory_format {value!r}", op=op)


def _format_strides(shape: tuple[int, ...], memory_format: str | None, op: str) -> tuple[int, ...] | None:
    order = MEMORY_FORMATS.get(memory_format or "contiguous_format")
    if order is None:
        return None
    if len(order) != len(shape):
        raise FuserError(f"{memory_format} needs a {len(order)}-D tensor, got shape {list(shape)}", op=op)
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def _options(op: str, kwargs: dict[str, Any], extra: Sequence[str] = ()) -> dict[str, Any]:
    unknown = set(kwargs) - _OPTIONS - _IGNORED_OPTIONS - set(extra)
    if unknown:
        raise FuserError(f"unsupported argument(s) {', '.join(sorted(unknown))}", op=op)
    return {
        "dtype": _dtype_arg(kwargs.get("dtype"), op),
        "device": device_arg(kwargs.get("device"), op),
        "requires_grad": bool(kwargs.get("requires_grad", False)),
        "memory_format": _memory_format(kwargs.get("memory_format"), op),
    }


def _natural_dtype(values: Sequence[Any]) -> DataType:
    """The dtype torch gives Python data: complex, then float, then bool-only, else int64."""
    if any(isinstance(v, complex) for v in values):
        return DataType.ComplexFloat
    if any(isinstance(v, float) for v in values):
        return DataType.Float
    if values and all(isinstance(v, bool) for v in values):
        return DataType.Bool
    return DataType.Int if values else DataType.Float


def _number(value: Any, op: str, what: str) -> Number:
    if not isinstance(value, (bool, int, float, complex)):
        raise FuserError(f"{what} must be a number, got {value!r}", op=op)
    return value


def _spec(
    op: str, kind: str, shape: tuple[int, ...], opts: dict[str, Any], default: DataType, **fill: Any
) -> TensorSpec:
    dtype = opts["dtype"] or default
    if kind in ("randn", "rand") and not (dtype.is_floating or dtype.is_complex):
        raise FuserError(f"needs a floating-point dtype, got {dtype.name}", op=op)
    strides = _format_strides(shape, opts["memory_format"], op)
    return TensorSpec(shape, dtype, strides, opts["device"], kind, requires_grad=opts["requires_grad"], **fill)


# -- factories ------------------------------------------------------------------------------
def _simple_factory(kind: str) -> Callable[..., TensorSpec]:
    def make(*size: Any, **kwargs: Any) -> TensorSpec:
        op = f"torch.{kind}"
        args = (kwargs.pop("size"),) if "size" in kwargs else size
        return _spec(op, kind, _sizes(op, args), _options(op, kwargs), DataType.Float)

    return make


def full(*args: Any, **kwargs: Any) -> TensorSpec:
    op = "torch.full"
    names = ("size", "fill_value")
    values = dict(zip(names, args, strict=False)) | {k: kwargs.pop(k) for k in names if k in kwargs}
    if len(args) > 2 or set(values) != set(names):
        raise FuserError("takes (size, fill_value)", op=op)
    fill = _number(values["fill_value"], op, "fill_value")
    return _spec(op, "full", _sizes(op, (values["size"],)), _options(op, kwargs), _natural_dtype([fill]), fill=fill)


def randint(*args: Any, **kwargs: Any) -> TensorSpec:
    op = "torch.randint"
    positional = list(args)
    size = kwargs.pop("size", None)
    if size is None and positional and isinstance(positional[-1], (list, tuple)):
        size = positional.pop()
    bounds = {"low": 0}
    bounds |= dict(zip(["low", "high"] if len(positional) == 2 else ["high"], positional, strict=False))
    bounds |= {k: kwargs.pop(k) for k in ("low", "high") if k in kwargs}
    if size is None or "high" not in bounds or len(positional) > 2:
        raise FuserError("takes (low=0, high, size)", op=op)
    low, high = (_number(bounds[k], op, k) for k in ("low", "high"))
    opts = _options(op, kwargs)
    if not low < high:  # type: ignore[operator]
        raise FuserError(f"empty range [{low}, {high})", op=op)
    return _spec(op, "randint", _sizes(op, (size,)), opts, DataType.Int, low=low, high=high)


def tensor(data: Any, **kwargs: Any) -> TensorSpec:
    op = "torch.tensor"
    shape = _data_shape(data)
    if _product(shape) > MAX_DATA:
        raise FuserError(f"data of shape {list(shape)} is too large to write in a script", op=op)
    values: list[Any] = []
    _flatten(data, shape, values, op)
    opts = _options(op, kwargs)
    return _spec(op, "tensor", shape, opts, _natural_dtype(values), data=tuple(values))


def _data_shape(data: Any) -> tuple[int, ...]:
    shape: list[int] = []
    while isinstance(data, (list, tuple)):
        if len(shape) == MAX_RANK:
            raise FuserError(f"data nests more than {MAX_RANK} lists deep", op="torch.tensor")
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return tuple(shape)


def _flatten(data: Any, shape: tuple[int, ...], out: list[Any], op: str) -> None:
    if not shape:
        if isinstance(data, (list, tuple)):
            raise FuserError("data is ragged: every row must have the same shape", op=op)
        out.append(_number(data, op, "data"))
        return
    if not isinstance(data, (list, tuple)) or len(data) != shape[0]:
        raise FuserError("data is ragged: every row must have the same shape", op=op)
    for item in data:
        _flatten(item, shape[1:], out, op)


def arange(*args: Any, **kwargs: Any) -> TensorSpec:
    op = "torch.arange"
    names = ["end"] if len(args) == 1 else ["start", "end", "step"]
    bounds = {"start": 0, "step": 1} | dict(zip(names, args, strict=False))
    bounds |= {k: kwargs.pop(k) for k in ("start", "end", "step") if k in kwargs}
    if "end" not in bounds or len(args) > 3:
        raise FuserError("takes (start=0, end, step=1)", op=op)
    start, end, step = (_number(bounds[k], op, k) for k in ("start", "end", "step"))
    if step == 0 or any(isinstance(v, complex) for v in (start, end, step)):
        raise FuserError(f"invalid range start={start}, end={end}, step={step}", op=op)
    length = max(0, -(-(end - start) // step))  # type: ignore[operator]
    natural = _natural_dtype([start, end, step])
    return _spec(op, "arange", (int(length),), _options(op, kwargs), natural, fill=start, step=step)


def empty_strided(size: Any, stride: Any, **kwargs: Any) -> TensorSpec:
    op = "torch.empty_strided"
    opts = _options(op, kwargs)
    spec = _spec(op, "empty", _sizes(op, (size,)), opts, DataType.Float)
    return replace(spec, strides=_dims(op, stride, "stride"), storage_size=None)


def make_tensor(*shape: Any, **kwargs: Any) -> TensorSpec:
    """torch.testing.make_tensor: random values, in [low, high) when bounds are given."""
    op = "make_tensor"
    extra = ("low", "high", "noncontiguous", "exclude_zero")
    if "shape" in kwargs:
        shape = (kwargs.pop("shape"),)
    opts = _options(op, kwargs, extra)
    if opts["dtype"] is None:
        raise FuserError("needs dtype=", op=op)
    low, high = (kwargs.get(k) for k in ("low", "high"))
    bounds = {k: _number(v, op, k) for k, v in (("low", low), ("high", high)) if v is not None}
    spec = _spec(op, "make_tensor", _sizes(op, shape), opts, DataType.Float, **bounds)
    if kwargs.get("noncontiguous") and spec.numel > 1:
        spec = _noncontiguous(spec)
    return spec


def _noncontiguous(spec: TensorSpec) -> TensorSpec:
    # As make_tensor does it: every other element of a tensor twice as wide.
    wide = (*spec.shape[:-1], spec.shape[-1] * 2)
    return replace(spec, strides=(*contiguous_strides(wide)[:-1], 2), storage_size=spec.numel * 2)


def _like(kind: str) -> Callable[..., TensorSpec]:
    """torch.randn_like(x) and friends: x's shape, dtype and device, and its layout if dense."""

    def make(source: Any, *args: Any, **kwargs: Any) -> TensorSpec:
        op = f"torch.{kind}_like"
        if not isinstance(source, TensorSpec):
            raise FuserError(f"needs an input tensor, got {source!r}", op=op)
        fill = {}
        if kind == "full":
            value = args[0] if args else kwargs.pop("fill_value", None)
            fill = {"fill": _number(value, op, "fill_value")}
        opts = _options(op, kwargs) | ({} if "device" in kwargs else {"device": source.device})
        spec = _spec(op, kind, source.shape, opts, source.dtype, **fill)
        if opts["memory_format"] in (None, "preserve_format"):
            spec = replace(spec, strides=_dense_or_contiguous(source), storage_size=None)
        return spec

    return make


def _dense_or_contiguous(spec: TensorSpec) -> tuple[int, ...]:
    assert spec.strides is not None
    return spec.strides if is_non_overlapping_and_dense(spec.shape, spec.strides) else contiguous_strides(spec.shape)


def torch_device(*args: Any, **kwargs: Any) -> str:
    """torch.device("cuda"), torch.device("cuda", 1), torch.device(type="cuda", index=1)."""
    values = dict(zip(("type", "index"), args, strict=False)) | kwargs
    if len(args) > 2 or set(values) - {"type", "index"} or "type" not in values:
        raise FuserError("takes (type, index=None)", op="torch.device")
    text = device_arg(values["type"], "torch.device")
    index = values.get("index")
    return text if index is None else device_arg(f"{text.split(':')[0]}:{index}", "torch.device")


# -- tensor methods -------------------------------------------------------------------------
def cast(spec: TensorSpec, dtype: DataType) -> TensorSpec:
    """`.to(dtype)`: values converted; torch keeps a dense layout and compacts others."""
    if dtype == spec.dtype:
        return spec
    same_kind = (spec.dtype.is_floating and dtype.is_floating) or (spec.dtype.is_integral and dtype.is_integral)
    if spec.source is None and same_kind and spec.kind in RANDOM_KINDS | _VALUE_KINDS:
        return replace(spec, dtype=dtype)  # a random fill drawn in the new type is the same draw
    return _copy(spec, dtype=dtype)


def compare(op: str, left: Any, right: Any) -> TensorSpec:
    """`torch.randn(...) > 0`: a Bool spec that remembers the comparison."""
    if isinstance(right, TensorSpec) and not isinstance(left, TensorSpec):
        left, right, op = right, left, _FLIPPED[op]
    if not isinstance(left, TensorSpec) or not isinstance(right, (bool, int, float)):
        raise FuserError("input tensors can only be compared with a Python number", op=op)
    return _copy(left, dtype=DataType.Bool, compare=op, operand=right)


def _copy(
    spec: TensorSpec, *, dtype: DataType | None = None, strides: tuple[int, ...] | None = None, **how: Any
) -> TensorSpec:
    strides = strides or _dense_or_contiguous(spec)
    return TensorSpec(
        spec.shape, dtype or spec.dtype, strides, spec.device, spec.kind,
        source=spec, source_strides=strides, requires_grad=spec.requires_grad, **how,
    )  # fmt: skip


def contiguous(spec: TensorSpec, memory_format: Any = None) -> TensorSpec:
    fmt = _memory_format(memory_format, ".contiguous")
    target = _format_strides(spec.shape, fmt, ".contiguous") or contiguous_strides(spec.shape)
    if spec.strides == target:
        return spec
    if spec.source is None and spec.kind in RANDOM_KINDS | _VALUE_KINDS:
        return replace(spec, strides=target, storage_offset=0, storage_size=None)
    return _copy(spec, strides=target)


def to(spec: TensorSpec, *args: Any, **kwargs: Any) -> TensorSpec:
    dtype, dev = kwargs.pop("dtype", None), kwargs.pop("device", None)
    for arg in args:
        if isinstance(arg, DataType):
            dtype = arg
        elif isinstance(arg, (str, int)) and not isinstance(arg, bool):
            dev = arg
        else:
            raise FuserError(f"unsupported argument {arg!r}", op=".to")
    fmt = kwargs.pop("memory_format", None)
    _options(".to", kwargs)
    result = spec if dtype is None else cast(spec, _dtype_arg(dtype, ".to") or spec.dtype)
    if fmt is not None:
        result = contiguous(result, fmt)
    return result if dev is None else replace(result, device=device_arg(dev, ".to"))


def _axis(op: str, dim: Any, ndim: int) -> int:
    if not _is_int(dim) or not -max(ndim, 1) <= dim < max(ndim, 1):
        raise FuserError(f"dim {dim!r} is out of range for a {ndim}-D tensor", op=op)
    return dim % max(ndim, 1)


def permute(spec: TensorSpec, *dims: Any) -> TensorSpec:
    order = [_axis(".permute", d, spec.ndim) for d in _sizes_or_list(dims)]
    if sorted(order) != list(range(spec.ndim)):
        raise FuserError(f"{list(dims)} is not a permutation of the {spec.ndim} axes", op=".permute")
    assert spec.strides is not None
    return replace(spec, shape=tuple(spec.shape[d] for d in order), strides=tuple(spec.strides[d] for d in order))


def _sizes_or_list(args: Sequence[Any]) -> Sequence[Any]:
    return args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args


def transpose(spec: TensorSpec, dim0: Any, dim1: Any) -> TensorSpec:
    order = list(range(spec.ndim))
    a, b = _axis(".transpose", dim0, spec.ndim), _axis(".transpose", dim1, spec.ndim)
    if spec.ndim == 0:
        return spec
    order[a], order[b] = order[b], order[a]
    return permute(spec, order)


def t(spec: TensorSpec) -> TensorSpec:
    if spec.ndim > 2:
        raise FuserError(f"needs a tensor of at most 2 dimensions, got {spec.ndim}", op=".t")
    return spec if spec.ndim < 2 else permute(spec, [1, 0])


def expand(spec: TensorSpec, *sizes: Any) -> TensorSpec:
    """New and size-1 axes get stride 0; -1 keeps an axis."""
    want = _dims(".expand", _sizes_or_list(sizes))
    extra = len(want) - spec.ndim
    if extra < 0:
        raise FuserError(f"cannot expand a {spec.ndim}-D tensor to {list(want)}", op=".expand")
    assert spec.strides is not None
    shape, strides = list(want[:extra]), [0] * extra
    for size, (old, stride) in zip(want[extra:], zip(spec.shape, spec.strides, strict=True), strict=True):
        if size in (-1, old):
            shape.append(old)
            strides.append(stride)
        elif old == 1 and size >= 0:
            shape.append(size)
            strides.append(0)
        else:
            raise FuserError(f"cannot expand shape {list(spec.shape)} to {list(want)}", op=".expand")
    if any(s < 0 for s in shape):
        raise FuserError(f"invalid size in {list(want)}", op=".expand")
    return replace(spec, shape=tuple(shape), strides=tuple(strides))


def unsqueeze(spec: TensorSpec, dim: Any) -> TensorSpec:
    pos = _axis(".unsqueeze", dim, spec.ndim + 1)
    assert spec.strides is not None
    stride = spec.shape[pos] * spec.strides[pos] if pos < spec.ndim else 1
    shape = (*spec.shape[:pos], 1, *spec.shape[pos:])
    return replace(spec, shape=shape, strides=(*spec.strides[:pos], stride, *spec.strides[pos:]))


def view(spec: TensorSpec, *shape: Any, op: str = ".view") -> TensorSpec:
    want = list(_dims(op, _sizes_or_list(shape)))
    if want.count(-1) > 1 or any(s < -1 for s in want):
        raise FuserError(f"invalid shape {want}", op=op)
    if -1 in want:
        known = max(1, -_product(want))
        want[want.index(-1)] = spec.numel // known if spec.numel % known == 0 else -1
    if _product(want) != spec.numel or -1 in want:
        raise FuserError(f"shape {list(shape)} does not fit {spec.numel} elements", op=op)
    if not spec.is_contiguous:
        raise FuserError("only contiguous tensors can be viewed with a new shape here", op=op)
    return replace(spec, shape=tuple(want), strides=contiguous_strides(want))


def _product(values: Sequence[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def reshape(spec: TensorSpec, *shape: Any) -> TensorSpec:
    return view(contiguous(spec), *shape, op=".reshape")


def as_strided(spec: TensorSpec, size: Any, stride: Any, storage_offset: Any = None) -> TensorSpec:
    offset = spec.storage_offset if storage_offset is None else storage_offset
    shape, strides = _dims(".as_strided", size), _dims(".as_strided", stride, "stride")
    if len(shape) != len(strides) or not _is_int(offset):
        raise FuserError(
            f"size {list(shape)} and stride {list(strides)} must have one entry per axis", op=".as_strided"
        )
    return replace(spec, shape=shape, strides=strides, storage_offset=offset)


def cuda(spec: TensorSpec, device: Any = None, **kwargs: Any) -> TensorSpec:
    return replace(spec, device="cuda" if device is None else device_arg(device, ".cuda"))


def _size(spec: TensorSpec, dim: Any = None) -> Any:
    return spec.shape if dim is None else spec.shape[_axis(".size", dim, spec.ndim)]


def _stride(spec: TensorSpec, dim: Any = None) -> Any:
    assert spec.strides is not None
    return spec.strides if dim is None else spec.strides[_axis(".stride", dim, spec.ndim)]


def _refill(spec: TensorSpec, kind: str, **fill: Any) -> TensorSpec:
    """In-place fills (`.fill_(v)`, `.uniform_()`): same layout, new values."""
    cleared = {"source": None, "source_strides": None, "compare": None, "operand": None, "data": None}
    cleared |= {"low": None, "high": None, "fill": None, "step": None}
    return replace(spec, kind=kind, **(cleared | fill))


def _normal(spec: TensorSpec, mean: Any = 0, std: Any = 1, **kwargs: Any) -> TensorSpec:
    if (mean, std) != (0, 1):
        raise FuserError(f"only the standard normal is supported, got mean={mean}, std={std}", op=".normal_")
    return _refill(spec, "randn")


def _uniform(spec: TensorSpec, low: Any = 0, high: Any = 1, **kwargs: Any) -> TensorSpec:
    bounds = (_number(low, ".uniform_", "from"), _number(high, ".uniform_", "to"))
    return _refill(spec, "rand", low=bounds[0], high=bounds[1])


def _caster(dtype: DataType) -> Callable[..., TensorSpec]:
    return lambda spec, **kwargs: cast(spec, dtype)


SPEC_METHODS: dict[str, Callable[..., Any]] = {
    "as_strided": as_strided, "contiguous": contiguous, "to": to, "permute": permute,
    "transpose": transpose, "t": t, "expand": expand, "unsqueeze": unsqueeze, "view": view,
    "reshape": reshape, "cuda": cuda, "cpu": lambda s: replace(s, device="cpu"),
    "clone": lambda s, memory_format=None: _copy(s), "detach": lambda s: s,
    "requires_grad_": lambda s, requires_grad=True: replace(s, requires_grad=bool(requires_grad)),
    "float": _caster(DataType.Float), "half": _caster(DataType.Half),
    "bfloat16": _caster(DataType.BFloat16), "double": _caster(DataType.Double),
    "int": _caster(DataType.Int32), "long": _caster(DataType.Int), "bool": _caster(DataType.Bool),
    "size": _size, "stride": _stride, "dim": lambda s: s.ndim, "numel": lambda s: s.numel,
    "is_contiguous": lambda s, memory_format=None: s.is_contiguous,
    "fill_": lambda s, value: _refill(s, "full", fill=_number(value, ".fill_", "value")),
    "zero_": lambda s: _refill(s, "zeros"), "normal_": _normal, "uniform_": _uniform,
}  # fmt: skip

SPEC_PROPERTIES: dict[str, Callable[[TensorSpec], Any]] = {
    "shape": lambda s: s.shape, "dtype": lambda s: s.dtype, "ndim": lambda s: s.ndim,
    "device": lambda s: s.device, "requires_grad": lambda s: s.requires_grad,
    "T": lambda s: permute(s, list(reversed(range(s.ndim)))),
}  # fmt: skip


def spec_attribute(spec: TensorSpec, name: str) -> Any:
    if name in SPEC_PROPERTIES:
        return SPEC_PROPERTIES[name](spec)
    if name in SPEC_METHODS:
        return SafeFunction(f".{name}", functools.partial(SPEC_METHODS[name], spec))
    raise FuserError(f"`.{name}` on an input tensor is not in the subset of torch a repro script may use")


# -- the namespaces -------------------------------------------------------------------------
def _functions(table: dict[str, Callable[..., Any]], prefix: str) -> dict[str, SafeFunction]:
    return {name: SafeFunction(f"{prefix}{name}", fn) for name, fn in table.items()}


FACTORIES: dict[str, Callable[..., Any]] = {
    kind: _simple_factory(kind) for kind in ("randn", "rand", "ones", "zeros", "empty")
} | {"full": full, "randint": randint, "tensor": tensor, "arange": arange, "empty_strided": empty_strided}
FACTORIES |= {f"{kind}_like": _like(kind) for kind in ("randn", "rand", "ones", "zeros", "empty", "full")}

TESTING = Namespace(
    "torch.testing",
    {"make_tensor": SafeFunction("make_tensor", make_tensor), "assert_close": Ignored("torch.testing.assert_close")},
)

CUDA = Namespace(
    "torch.cuda",
    {name: Ignored(f"torch.cuda.{name}") for name in ("synchronize", "manual_seed", "manual_seed_all", "empty_cache")},
)

TORCH = Namespace(
    "torch",
    _functions(FACTORIES, "torch.")
    | dict(TORCH_DTYPES)
    | {name: Marker(name) for name in MEMORY_FORMATS}
    | {
        "device": SafeFunction("torch.device", torch_device),
        "Size": SafeFunction("torch.Size", lambda sizes=(): tuple(_dims("torch.Size", sizes))),
        "no_grad": SafeFunction("torch.no_grad", lambda: PassContext("torch.no_grad")),
        "inference_mode": SafeFunction("torch.inference_mode", lambda mode=True: PassContext("torch.inference_mode")),
        "manual_seed": Ignored("torch.manual_seed"),
        "testing": TESTING,
        "cuda": CUDA,
    },
)
