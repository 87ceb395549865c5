"""Execution arguments: converting user inputs and checking them against the fusion.

Inputs may be NumPy arrays, Python or NumPy scalars, and torch or CuPy arrays when
those are installed (recognised by type, never imported here). Tensors are copied
to host NumPy arrays for the reference backend; their original strides are kept
for the cache key. A wrong input count, dtype or rank, or a size that contradicts a
static or broadcast axis, strides that contradict the declared contiguity, or two
sizes of axes that the fusion's ops map together (an add of [4, 3] and [1, 3] inputs
defined as [-1, -1]: no implicit broadcast, as in nvFuser), is a FuserError naming the
inputs.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuser_core.dynamic.initial_info import symbolic_leaves
from fuser_core.errors import FuserError
from fuser_core.ir.base import Expr, Val
from fuser_core.ir.dtype import DataType, dtype_from_framework
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.scalar import Scalar, normalize_value
from fuser_core.ir.tensor_exprs import BroadcastOp
from fuser_core.ir.tensor_view import TensorView, tensors_of
from fuser_core.scheduler.id_map import IdMap, constant_axes, constant_extents, symbolic_axes


@dataclass(frozen=True)
class TensorArg:
    """A tensor input: the caller's array plus the layout it arrived with. A device
    array (CuPy, torch on CUDA) is copied to the host only when the reference backend
    reads its values; the CUDA backend uses it where it is."""

    host: np.ndarray | None  # None until `array` is first read, for a device array
    dtype: DataType
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements, as the caller's array had them
    origin: str  # "numpy", "torch" or "cupy"
    device: Any = field(default=None, compare=False)  # the caller's CuPy array or CUDA torch tensor

    @property
    def array(self) -> np.ndarray:
        if self.host is None:
            object.__setattr__(self, "host", _to_host(self.device, self.dtype))
        assert self.host is not None
        return self.host


def _to_host(value: Any, dtype: DataType) -> np.ndarray:
    if type(value).__module__.split(".")[0] == "cupy":
        return value.get()  # type: ignore[no-any-return]
    return _torch_to_numpy(value.detach().to("cpu"), dtype)


def _torch_to_numpy(host: Any, dtype: DataType) -> np.ndarray:
    torch = sys.modules["torch"]
    if dtype.is_reduced_float:  # NumPy has no bf16/fp8: reinterpret the bits
        bits = torch.int16 if dtype.itemsize == 2 else torch.uint8
        return host.view(bits).numpy().view(dtype.numpy)  # type: ignore[no-any-return]
    return host.numpy()  # type: ignore[no-any-return]


def _input_label(index: int, val: Val) -> str:
    return f"input {index} ({_short_name(val)})"


def to_tensor_arg(value: Any, label: str = "a tensor input") -> TensorArg | None:
    try:
        return _to_tensor_arg(value)
    except ValueError as err:
        raise FuserError(f"{label}: {err}") from None


def _to_tensor_arg(value: Any) -> TensorArg | None:
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        return _from_torch(value)
    if module == "cupy":
        strides = tuple(s // value.itemsize for s in value.strides)
        return TensorArg(None, dtype_from_framework(value), tuple(value.shape), strides, "cupy", value)
    if isinstance(value, np.ndarray):
        strides = tuple(s // value.itemsize if value.itemsize else 0 for s in value.strides)
        return TensorArg(value, dtype_from_framework(value), tuple(value.shape), strides, "numpy")
    return None


def _from_torch(tensor: Any) -> TensorArg:
    dtype = dtype_from_framework(tensor)
    strides = tuple(tensor.stride())
    if tensor.device.type == "cuda":
        return TensorArg(None, dtype, tuple(tensor.shape), strides, "torch", tensor)
    return TensorArg(_torch_to_numpy(tensor.detach(), dtype), dtype, tuple(tensor.shape), strides, "torch")


def _to_scalar(value: Any) -> Any | None:
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return value.item() if isinstance(value, np.generic) else value
    if type(value).__module__.split(".")[0] == "torch" and getattr(value, "ndim", None) == 0:
        return value.item()
    return None


def convert_inputs(fusion: Fusion, inputs: Sequence[Any]) -> list[Any]:
    """One TensorArg or Python scalar per fusion input, checked against its definition."""
    expected = fusion.inputs
    if len(inputs) != len(expected):
        names = ", ".join(_short_name(v) for v in expected)
        raise FuserError(f"expected {len(expected)} inputs ({names}), got {len(inputs)}")
    args: list[Any] = []
    for index, (val, value) in enumerate(zip(expected, inputs, strict=True)):
        if isinstance(val, TensorView):
            arg = to_tensor_arg(value, _input_label(index, val))
            if arg is None:
                raise FuserError(f"{_input_label(index, val)} must be a tensor, got {type(value).__name__}")
            _check_tensor_type(index, val, arg)
            args.append(arg)
        else:
            args.append(_check_scalar(index, val, value))  # type: ignore[arg-type]
    check_mapped_sizes(fusion, args)
    return args


# Per fusion: groups of (input position, axis) whose axes the ops map exactly, with
# extents of their own (kernels index them all by one of those extents), and the
# constant size an axis of their set has, if one has (kernels index them by it); and the
# sets with two different constant sizes (no input satisfies them).
_MAPPED_AXES: weakref.WeakKeyDictionary[Fusion, _MappedAxes] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _MappedAxes:
    groups: list[tuple[list[tuple[int, int]], int | None]]
    conflicts: list[tuple[IterDomain, IterDomain]]
    # Axes whose size is computed (by scalar inputs alone: `full([n])`, `iota(n)`; or from
    # inputs' sizes: a reshape's [-1] is a product, a pad's width a sum), with what their
    # set holds them to: the set's constant, else an input axis (position, axis) of the set.
    scalar_sized: list[tuple[IterDomain, int | tuple[int, int]]] = field(default_factory=list)
    # Input axes an op combines with a broadcast expanded to a constant size (an
    # `iota(n)` broadcast to a hard-coded [4096, n] and compared with labels of [N]):
    # (input position, axis), the constant, the broadcast axis, the op that combines them.
    expanded: list[tuple[tuple[int, int], int, IterDomain, Expr]] = field(default_factory=list)


def check_mapped_sizes(fusion: Fusion, args: Sequence[Any]) -> None:
    """Inputs whose axes the ops tie have equal sizes there, and the size a static axis
    of the same set has: an error naming the op, not a kernel reading out of bounds. A
    concretized fusion is checked too: its static resized axes (a pad's widths made
    static) tie input axes to constants the original has not; and an axis that may still
    become a broadcast (Symbolic, before concretization) ties nothing yet."""
    mapped = _MAPPED_AXES.get(fusion)
    if mapped is None:
        mapped = _MAPPED_AXES[fusion] = _mapped_axes(fusion)
    if mapped.conflicts:
        _raise_conflict(fusion, *mapped.conflicts[0])
    for group, constant in mapped.groups:
        (p0, a0), *rest = group
        size = args[p0].shape[a0]
        if constant is not None and size != constant:
            _raise_not_constant(fusion, (p0, a0, size), constant)
        for p, a in rest:
            if args[p].shape[a] != size:
                _raise_mismatch(fusion, (p0, a0, size), (p, a, args[p].shape[a]))
    if mapped.scalar_sized:
        _check_scalar_sizes(fusion, args, mapped.scalar_sized)
    for (p, a), constant, broadcast, op in mapped.expanded:
        size = args[p].shape[a]
        if size != constant:
            raise _error_at(
                op,
                f"{_input_label(p, fusion.inputs[p])} axis {a} has size {size}, but {op.user_name} combines it "
                f"with an axis broadcast to size {constant}{_made_at(fusion, broadcast)}",
            )


def _made_at(fusion: Fusion, dim: IterDomain) -> str:
    """Where the op making a tensor with axis `dim` was written, as ` (by OP at FILE:LINE)`."""
    for expr in fusion.exprs():
        if any(isinstance(out, TensorView) and dim in out.logical for out in expr.outputs):
            where = f" at {expr.location}" if expr.location is not None else ""
            return f" (by {expr.user_name}{where})"
    return ""


def _check_scalar_sizes(
    fusion: Fusion, args: Sequence[Any], checks: list[tuple[IterDomain, int | tuple[int, int]]]
) -> None:
    """An axis a scalar input sizes has the size its set is held to: kernels index the
    set by that constant or input size, so another value would not be honoured."""
    ev = bind_args(fusion, args, values=False)
    for dim, held in checks:
        size = ev.evaluate(dim.maybe_expanded_extent)
        want = held if isinstance(held, int) else args[held[0]].shape[held[1]]
        if int(size) == want:
            continue
        what = (
            f"{want}"
            if isinstance(held, int)
            else f"{want} ({_input_label(held[0], fusion.inputs[held[0]])} axis {held[1]})"
        )
        op = _tying_op_of_set(fusion, dim)
        scalars = {id(v) for v in fusion.inputs if not isinstance(v, TensorView)}
        source = "from the scalar inputs"
        if not _from_scalar_inputs(dim.maybe_expanded_extent, scalars):
            source = f"computed from the inputs' sizes{_made_at(fusion, dim)}"
        raise _error_at(op, f"an axis of size {int(size)}, {source}, is combined with one of size {what}")


def _tying_op_of_set(fusion: Fusion, dim: IterDomain) -> Expr | None:
    """The first op after which `dim` is mapped with any other axis of a held size."""
    tensors = _tensors_of(fusion)

    def tied(id_map: IdMap) -> bool:
        key = id_map.exact(dim)
        return any(
            id_map.knows(d) and id_map.exact(d) == key and d is not dim and not d.is_broadcast
            for tv in tensors
            for d in tv.logical
            if d.maybe_expanded_extent.is_const or tv in fusion.inputs
        )

    return _tying_op(fusion, [dim], tied)


def _tying_op(fusion: Fusion, dims: list[IterDomain], tied: Callable[[IdMap], bool]) -> Expr | None:
    """The first op (from the start) by which `tied` holds of the map: the op that ties them."""
    exprs = [e for e in fusion.exprs() if e.is_tensor_op()]
    for end in range(1, len(exprs) + 1):
        id_map = IdMap(exprs[:end])
        if all(id_map.knows(d) for d in dims) and tied(id_map):
            return exprs[end - 1]
    return exprs[-1] if exprs else None


def _raise_not_constant(fusion: Fusion, axis: tuple[int, int, int], constant: int) -> None:
    p, a, size = axis
    dim = fusion.inputs[p].logical_no_reductions()[a]  # type: ignore[attr-defined]

    tensors = _tensors_of(fusion)

    def tied(id_map: IdMap) -> bool:
        return constant_extents(id_map, tensors).get(id_map.exact(dim)) == constant

    op = _tying_op(fusion, [dim], tied)
    raise _error_at(
        op,
        f"{_input_label(p, fusion.inputs[p])} axis {a} has size {size}, but the axis it is combined with "
        f"has size {constant}",
    )


def _raise_conflict(fusion: Fusion, a: IterDomain, b: IterDomain) -> None:
    op = _tying_op(fusion, [a, b], lambda id_map: id_map.exact(a) == id_map.exact(b))
    raise _error_at(
        op,
        f"axes of sizes {a.extent} and {b.extent} are combined: no inputs can run this fusion",
    )


def _tensors_of(fusion: Fusion) -> list[TensorView]:
    return tensors_of(e for e in fusion.exprs() if e.is_tensor_op())


def _error_at(op: Expr | None, message: str) -> FuserError:
    """`message` as an error of `op` (its name, output and script line)."""
    if op is None:
        return FuserError(message)
    return FuserError(message, op=op.user_name, tensor=str(op.outputs[0]), location=op.location)


def _raise_mismatch(fusion: Fusion, first: tuple[int, int, int], other: tuple[int, int, int]) -> None:
    """The error for two mapped input axes of different sizes, naming the op that maps them."""
    dims = [fusion.inputs[p].logical_no_reductions()[a] for p, a, _ in (first, other)]  # type: ignore[attr-defined]
    op = _tying_op(fusion, dims, lambda id_map: id_map.exact(dims[0]) == id_map.exact(dims[1]))
    (p0, a0, s0), (p1, a1, s1) = first, other
    message = (
        f"{_input_label(p1, fusion.inputs[p1])} axis {a1} has size {s1}, but "
        f"{_input_label(p0, fusion.inputs[p0])} axis {a0}, which it is combined with, has size {s0}"
    )
    if 1 in (s0, s1):
        message += (
            ": an axis defined with -1 is not broadcast even when its size is 1: define it with size 1 to broadcast"
        )
    raise _error_at(op, message + _rank_alignment_note(op))


def _rank_alignment_note(op: Expr | None) -> str:
    """Where the op aligned a lower-rank operand to the right (as nvFuser's element-wise
    ops broadcast it), the ranks of its operands as written (in the script's order: the
    fusion's tensor names differ from the script's): the usual cause of a mismatch there
    is an operand one expected to be aligned to the left."""
    if op is None:
        return ""
    written = []
    for value in op.inputs:
        if not isinstance(value, TensorView):
            continue
        definition = value.definition
        aligned = isinstance(definition, BroadcastOp) and definition.rank_alignment
        written.append((definition.inputs[0] if aligned else value, aligned))  # type: ignore[union-attr]
    if not any(aligned for _, aligned in written):
        return ""
    ranks = " and ".join(str(tv.ndim) for tv, _ in written)  # type: ignore[union-attr]
    return (
        f" ({op.user_name}'s operands have ranks {ranks}: the lower-rank one is aligned to the right, "
        "its axes combined with the last ones of the other; broadcast_in_dim places them elsewhere)"
    )


def _mapped_axes(fusion: Fusion) -> _MappedAxes:
    id_map = IdMap([e for e in fusion.exprs() if e.is_tensor_op()])
    tensors = _tensors_of(fusion)
    # A Symbolic axis (a dynamic reshape's, a pad's before concretization) may turn out a
    # broadcast: what its set ties is known only once the fusion is concretized.
    undecided = {id_map.exact(d) for tv in tensors for d in (*tv.root, *tv.logical) if d.is_symbolic}
    constants = {k: v for k, v in constant_axes(id_map, tensors).items() if k not in undecided}
    position = {id(v): p for p, v in enumerate(fusion.inputs)}
    inputs = [v for v in fusion.inputs if isinstance(v, TensorView)]
    by_set: dict[int, list[tuple[int, int]]] = {}
    extents: dict[int, set[int]] = {}
    for tv, axis, dim, key in symbolic_axes(id_map, inputs):
        if key in undecided:
            continue
        by_set.setdefault(key, []).append((position[id(tv)], axis))
        extents.setdefault(key, set()).add(id(dim.maybe_expanded_extent))
    single = {k: next(iter(v)) for k, v in constants.items() if len(v) == 1}
    groups = [(group, single.get(key)) for key, group in by_set.items() if len(extents[key]) > 1 or key in single]
    conflicts = [tuple(list(v.values())[:2]) for v in constants.values() if len(v) > 1]
    scalar_sized: list[tuple[IterDomain, int | tuple[int, int]]] = []
    scalars = {id(v) for v in fusion.inputs if not isinstance(v, TensorView)}
    seen: set[int] = set()
    for tv in tensors:
        if tv in inputs:
            continue
        for dim in (*tv.root, *tv.logical):
            extent = dim.maybe_expanded_extent
            if id(extent) in seen or extent.is_const or dim.is_symbolic or not id_map.knows(dim):
                continue
            seen.add(id(extent))
            key = id_map.exact(dim)
            if key in undecided or not (extent.definition is not None or _from_scalar_inputs(extent, scalars)):
                continue
            if key in single:
                scalar_sized.append((dim, single[key]))
            elif key in by_set:
                scalar_sized.append((dim, by_set[key][0]))
    return _MappedAxes(groups, conflicts, scalar_sized, _expanded_ties(fusion, id_map, by_set, undecided))  # type: ignore[arg-type]


def _expanded_ties(
    fusion: Fusion, id_map: IdMap, by_set: dict[int, list[tuple[int, int]]], undecided: set[int]
) -> list[tuple[tuple[int, int], int, IterDomain, Expr]]:
    """Input axes that an op combines with a broadcast expanded to a constant size: that
    size is what the input axis must have (a broadcast is not a size-1 axis any longer
    once expanded; the reference would fail on NumPy's broadcast error instead)."""
    found: list[tuple[tuple[int, int], int, IterDomain, Expr]] = []
    seen: set[tuple[int, int]] = set()
    for expr in fusion.exprs():
        for p, c in id_map.broadcast_links.get(id(expr), []):
            broadcast, axis = (p, c) if p.is_broadcast else (c, p)
            extent = broadcast.expanded_extent
            if extent is None or not extent.is_const or extent.value == 1 or axis.is_broadcast:
                continue
            key = id_map.exact(axis)
            if key in undecided or key not in by_set or (key, int(extent.value)) in seen:  # type: ignore[arg-type]
                continue
            seen.add((key, int(extent.value)))  # type: ignore[arg-type]
            found.append((by_set[key][0], int(extent.value), broadcast, expr))  # type: ignore[arg-type]
    return found


def _from_scalar_inputs(value: Scalar, scalars: set[int]) -> bool:
    """Whether `value` is computed from scalar inputs (and constants) alone, one at least."""
    leaves = symbolic_leaves([value])
    return bool(leaves) and all(id(leaf) in scalars for leaf in leaves)


def bind_args(fusion: Fusion, args: Sequence[Any], values: bool = True) -> ExpressionEvaluator:
    """An evaluator with every input, extent and scalar of `fusion` bound to `args`;
    tensors' values too unless `values` is False (sizes are all a schedule needs)."""
    ev = ExpressionEvaluator()
    for index, (val, arg) in enumerate(zip(fusion.inputs, args, strict=True)):
        if isinstance(val, TensorView):
            _bind_sizes(index, val, arg, ev)
            if values:
                ev.bind(val, arg.array)
        else:
            ev.bind(val, arg)
    return ev


def bind_inputs(fusion: Fusion, inputs: Sequence[Any]) -> tuple[list[Any], ExpressionEvaluator]:
    args = convert_inputs(fusion, inputs)
    return args, bind_args(fusion, args)


def _short_name(val: Val) -> str:
    return f"T{val.name}" if isinstance(val, TensorView) else str(val)


def _check_scalar(index: int, val: Scalar, value: Any) -> Any:
    plain = _to_scalar(value)
    label = _input_label(index, val)
    if plain is None:
        raise FuserError(f"{label} must be a scalar ({val.dtype!r}), got {type(value).__name__}")
    kind_ok = (
        (val.dtype.is_boolean and isinstance(plain, bool))
        or (val.dtype.is_integral and isinstance(plain, int) and not isinstance(plain, bool))
        or (val.dtype.is_floating and isinstance(plain, (int, float)) and not isinstance(plain, bool))
        or (val.dtype.is_complex and isinstance(plain, (int, float, complex)) and not isinstance(plain, bool))
    )
    if not kind_ok:
        raise FuserError(f"{label} is defined as {val.dtype!r} but got {type(plain).__name__} {plain!r}")
    return normalize_value(plain, val.dtype)


def _check_tensor_type(index: int, tv: TensorView, arg: TensorArg) -> None:
    label = _input_label(index, tv)
    if arg.dtype != tv.dtype:
        raise FuserError(f"{label} has dtype {arg.dtype!r} but the fusion defines it as {tv.dtype!r}")
    rank = tv.ndim
    if len(arg.shape) != rank:
        raise FuserError(f"{label} has {len(arg.shape)} dimensions {list(arg.shape)} but the fusion defines {rank}")
    _check_contiguity(label, tv, arg)


def _bind_sizes(index: int, tv: TensorView, arg: TensorArg, ev: ExpressionEvaluator) -> None:
    label = _input_label(index, tv)
    for axis, (dim, size) in enumerate(zip(tv.logical_no_reductions(), arg.shape, strict=True)):
        if dim.is_broadcast and dim.expanded_extent is None and size != 1:
            raise FuserError(f"{label} axis {axis} has size {size} but the fusion defines it as a broadcast (size 1)")
        target = dim.maybe_expanded_extent
        if not ev.bind_or_check(target, size):
            raise FuserError(f"{label} axis {axis} has size {size} but the fusion fixes it to {ev.evaluate(target)}")


def _check_contiguity(label: str, tv: TensorView, arg: TensorArg) -> None:
    """Axes declared contiguous must have exactly the stride their inner neighbour implies."""
    if 0 in arg.shape:  # no element, no layout to contradict (NumPy gives such arrays 0 strides)
        return
    domain = tv.domain
    logical = domain.logical
    alloc = domain.maybe_allocation
    positions = [next(p for p, d in enumerate(logical) if d is a) for a in alloc]
    expected = None
    for k in reversed(range(len(alloc))):
        pos, contiguous = positions[k], domain.contiguity[k]
        size, stride = arg.shape[pos], arg.strides[pos]
        if contiguous is None or size == 1:
            continue
        want = 1 if expected is None else expected
        if contiguous and stride != want:
            layout = "row-major" if domain.allocation is None else f"in the stride order {_stride_order(tv)}"
            raise FuserError(
                f"{label} axis {pos} has stride {stride} but the fusion declares it contiguous "
                f"(stride {want}): pass an array laid out {layout}, or define it with contiguity False"
            )
        expected = stride * size


def _stride_order(tv: TensorView) -> list[int]:
    """The declared stride order: entry i ranks axis i's stride (0 = fastest)."""
    alloc = tv.domain.maybe_allocation
    rank = len(alloc)
    return [rank - 1 - next(k for k, a in enumerate(alloc) if a is d) for d in tv.domain.logical]
