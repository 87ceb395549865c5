"""A fuzzed fusion as plain data: inputs, an op list in `fd.ops` terms, and outputs.

The same op list builds the FusionDefinition (build.py) and is evaluated by torch eager
(torch_ref.py), so the two can only disagree where the compiler does. Shapes follow
from the inputs by `infer`, which also checks every op's constraints: the generator
only emits ops that pass it, and the shrinker keeps a smaller program only if it does.

Operands are `Ref(vid)` (a tensor or scalar value of the program), Python numbers
(constants), or, where an op takes sizes, ints, `Size(vid, axis)` (`fd.ops.size`) and
`Extent` (a product of those, for merged axes): symbolic sizes in the definition.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

FLOATS = ("Float", "Double", "Half", "BFloat16")
NARROW = ("Half", "BFloat16")
INTS = ("Int", "Int32")
DTYPES = (*FLOATS, *INTS, "Bool")

# Ops computed element by element: output shape is the broadcast of the tensor operands.
UNARY = [
    "abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "sigmoid", "silu", "relu", "sqrt", "rsqrt", "reciprocal", "erf", "erfc",
    "lgamma", "floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "isfinite", "logical_not", "bitwise_not",
    "acosh", "asinh", "atanh", "erfinv", "erfcinv", "frac", "signbit", "isneginf", "isposinf", "isreal"
]  # fmt: skip
BINARY = [
    "add", "sub", "mul", "div", "truediv", "mod", "fmod", "remainder", "pow", "atan2", "maximum", "minimum", "eq",
    "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "nextafter", "gcd", "logical_right_shift"
]  # fmt: skip
TERNARY = ["where", "lerp", "clamp", "threshold", "add_alpha", "sub_alpha", "addcmul"]
COPIES = ["cast", "set", "segment_set", "stride_order"]
RANDOM = ["rand_like", "randn_like"]  # Philox draws of the operand's shape (explicit rng_seed, rng_offset)
ELEMENTWISE = frozenset(UNARY + BINARY + TERNARY + COPIES + RANDOM)
REDUCTIONS = ("sum", "prod", "max", "min")


class Invalid(ValueError):
    """An op whose operands break its constraints (a generator or shrinker bug, or a
    shrink candidate to drop)."""


@dataclass(frozen=True)
class Ref:
    vid: int


@dataclass(frozen=True)
class Size:
    """`fd.ops.size(value, axis)`: a symbolic extent."""

    vid: int
    axis: int


@dataclass(frozen=True)
class Extent:
    """The product of its parts (ints and Sizes), built with `fd.ops.mul`."""

    parts: tuple[Any, ...]


@dataclass
class TensorIn:
    """A tensor input: `order` is the memory order (outermost axis first), `expanded`
    marks stride-0 axes, `gap` pads the innermost memory axis (a non-contiguous view),
    `static` marks axes whose size the definition spells out instead of -1."""

    vid: int
    shape: tuple[int, ...]
    dtype: str
    static: tuple[bool, ...]
    order: tuple[int, ...]
    expanded: tuple[bool, ...]
    gap: int = 0

    def layout(self) -> str:
        if any(self.expanded):
            return "expanded"
        if self.gap:
            return "strided"
        if list(self.order) != sorted(self.order):
            return "permuted"
        return "contiguous"


@dataclass
class ScalarIn:
    """A symbolic scalar input (`define_scalar(None, dtype)`) and the value it is run with."""

    vid: int
    dtype: str
    value: Any


@dataclass
class Op:
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    outs: tuple[int, ...] = ()
    tag: str = ""  # the pattern it belongs to (softmax, layer_norm, ...) or ""


@dataclass
class Output:
    vid: int
    stride_order: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Meta:
    """A tensor value's concrete shape, and which axes are broadcasts (size 1, and free
    to meet any size in an element-wise op)."""

    shape: tuple[int, ...]
    bcast: tuple[bool, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class Program:
    seed: int
    index: int
    inputs: list[TensorIn | ScalarIn] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    dtypes: dict[int, str] = field(default_factory=dict)  # every value's dtype, as fuser_core infers it
    note: str = ""  # what a shrink did

    def op_names(self) -> list[str]:
        return [op.name for op in self.ops]

    def tensor_inputs(self) -> list[TensorIn]:
        return [i for i in self.inputs if isinstance(i, TensorIn)]

    def scalar_value(self, vid: int) -> Any:
        return next(i.value for i in self.inputs if isinstance(i, ScalarIn) and i.vid == vid)


# -- shape inference ---------------------------------------------------------------------


def extent_value(entry: Any, metas: dict[int, Meta], program: Program | None = None) -> int:
    if isinstance(entry, bool):
        raise Invalid(f"a size cannot be {entry!r}")
    if isinstance(entry, int):
        return entry
    if isinstance(entry, Size):
        return metas[entry.vid].shape[entry.axis]
    if isinstance(entry, Extent):
        return math.prod(extent_value(p, metas, program) for p in entry.parts)
    if isinstance(entry, Ref) and program is not None:
        return int(program.scalar_value(entry.vid))
    raise Invalid(f"not a size: {entry!r}")


def infer(program: Program) -> dict[int, Meta]:
    """Every tensor value's Meta; raises Invalid where an op's constraints fail."""
    metas: dict[int, Meta] = {}
    for inp in program.inputs:
        if isinstance(inp, TensorIn):
            metas[inp.vid] = Meta(tuple(inp.shape), tuple(s == 1 for s in inp.shape))
    for op in program.ops:
        for vid, meta in zip(op.outs, infer_op(op, metas, program), strict=True):
            metas[vid] = meta
    for out in program.outputs:
        if out.vid not in metas:
            raise Invalid(f"output v{out.vid} is not a tensor of the program")
    return metas


def infer_op(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    if op.name in ELEMENTWISE:
        tensors = [metas[a.vid] for a in op.args if isinstance(a, Ref) and a.vid in metas]
        return [broadcast_metas(tensors, op.name)]
    rule = _RULES.get(op.name)
    if rule is None:
        raise Invalid(f"no shape rule for {op.name}")
    return rule(op, metas, program)


def broadcast_metas(tensors: list[Meta], what: str = "op") -> Meta:
    if not tensors:
        raise Invalid(f"{what}: no tensor operand")
    rank = tensors[0].rank
    if any(t.rank != rank for t in tensors):
        raise Invalid(f"{what}: ranks differ {[t.rank for t in tensors]}")
    shape, bcast = [], []
    for axis in range(rank):
        sizes = {t.shape[axis] for t in tensors if not t.bcast[axis]}
        if len(sizes) > 1:
            raise Invalid(f"{what}: axis {axis} sizes {sorted(sizes)} differ")
        shape.append(sizes.pop() if sizes else 1)
        bcast.append(all(t.bcast[axis] for t in tensors))
    return Meta(tuple(shape), tuple(bcast))


def _reduce_meta(meta: Meta, dims: list[int], keepdim: bool) -> Meta:
    if not dims or len(set(dims)) != len(dims) or any(not 0 <= d < meta.rank for d in dims):
        raise Invalid(f"bad reduction axes {dims} of a rank-{meta.rank} tensor")
    if keepdim:
        return Meta(
            tuple(1 if a in dims else s for a, s in enumerate(meta.shape)),
            tuple(True if a in dims else b for a, b in enumerate(meta.bcast)),
        )
    keep = [a for a in range(meta.rank) if a not in dims]
    return Meta(tuple(meta.shape[a] for a in keep), tuple(meta.bcast[a] for a in keep))


def _reduction(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta = metas[op.args[0].vid]
    out = _reduce_meta(meta, list(op.kwargs["dims"]), bool(op.kwargs.get("keepdim", False)))
    if op.name in ("var", "var_mean") and op.kwargs.get("correction", 0) >= _count(meta, op.kwargs["dims"]):
        raise Invalid("correction is not below the reduced count")
    return [out, out] if op.name == "var_mean" else [out]


def _count(meta: Meta, dims: Any) -> int:
    return math.prod(meta.shape[d] for d in dims)


def _welford(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    out = _reduce_meta(metas[op.args[0].vid], list(op.kwargs["dims"]), False)
    return [out, out, out]


def _broadcast(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta, flags = metas[op.args[0].vid], list(op.kwargs["is_broadcast_dim"])
    if len(flags) - sum(flags) != meta.rank:
        raise Invalid("broadcast flags do not match the rank")
    shape, bcast, it = [], [], iter(zip(meta.shape, meta.bcast, strict=True))
    for flag in flags:
        s, b = (1, True) if flag else next(it)
        shape.append(s)
        bcast.append(b)
    return [Meta(tuple(shape), tuple(bcast))]


def _broadcast_in_dim(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta = metas[op.args[0].vid]
    target = [extent_value(e, metas) for e in op.kwargs["shape"]]
    dims = list(op.kwargs["broadcast_dims"])
    if len(dims) != meta.rank or sorted(dims) != dims or len(set(dims)) != len(dims):
        raise Invalid(f"broadcast_dims {dims} for a rank-{meta.rank} tensor")
    if any(not 0 <= d < len(target) for d in dims) or any(t < 1 for t in target):
        raise Invalid(f"broadcast_in_dim to {target} by {dims}")
    bcast = [isinstance(e, int) and e == 1 for e in op.kwargs["shape"]]
    for j, d in enumerate(dims):
        if meta.bcast[j]:
            bcast[d] = target[d] == 1
        elif meta.shape[j] != target[d]:
            raise Invalid(f"broadcast_in_dim: axis {j} of size {meta.shape[j]} to {target[d]}")
        else:
            bcast[d] = False
    return [Meta(tuple(target), tuple(bcast))]


def _expand(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta = metas[op.args[0].vid]
    target = [extent_value(e, metas) for e in op.kwargs["shape"]]
    if len(target) != meta.rank:
        raise Invalid("expand keeps the rank")
    for a, (s, b, t) in enumerate(zip(meta.shape, meta.bcast, target, strict=True)):
        if (not b and s != t) or t < 1:
            raise Invalid(f"expand: axis {a} of size {s} to {t}")
    return [Meta(tuple(target), tuple(b and t == 1 for b, t in zip(meta.bcast, target, strict=True)))]


def _reshape(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta = metas[op.args[0].vid]
    entries = op.kwargs["new_shape"]
    target = [extent_value(e, metas) for e in entries]
    if math.prod(target) != meta.numel or any(t < 1 for t in target):
        raise Invalid(f"reshape {meta.shape} to {target}")
    return [Meta(tuple(target), tuple(isinstance(e, int) and e == 1 for e in entries))]


def _squeeze(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta, dims = metas[op.args[0].vid], list(op.kwargs["dims"])
    if not dims or any(not 0 <= d < meta.rank or not meta.bcast[d] for d in dims) or len(set(dims)) != len(dims):
        raise Invalid(f"squeeze {dims} of {meta}")
    keep = [a for a in range(meta.rank) if a not in dims]
    return [Meta(tuple(meta.shape[a] for a in keep), tuple(meta.bcast[a] for a in keep))]


def _permute(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta, dims = metas[op.args[0].vid], list(op.kwargs["dims"])
    if sorted(dims) != list(range(meta.rank)):
        raise Invalid(f"permute {dims} of a rank-{meta.rank} tensor")
    return [Meta(tuple(meta.shape[d] for d in dims), tuple(meta.bcast[d] for d in dims))]


def _slice(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta = metas[op.args[0].vid]
    starts = [extent_value(e, metas, program) for e in op.kwargs["start_indices"]]
    ends = [extent_value(e, metas, program) for e in op.kwargs["end_indices"]]
    if len(starts) != meta.rank or len(ends) != meta.rank:
        raise Invalid("slice bounds need one entry per axis")
    shape = []
    for s, e, n in zip(starts, ends, meta.shape, strict=True):
        if not 0 <= s < e <= n:
            raise Invalid(f"slice [{s}:{e}] of an axis of size {n}")
        shape.append(e - s)
    # Whether a resized axis stays a broadcast is the compiler's business: taken as
    # not one, which only forbids meeting other sizes (valid either way).
    return [Meta(tuple(shape), tuple(False for _ in shape))]


def pad_widths(op: Op, metas: dict[int, Meta], program: Program) -> list[tuple[int, int]]:
    """Per axis (left, right), from nvFuser's innermost-first flat list."""
    meta = metas[op.args[0].vid]
    flat = [extent_value(e, metas, program) for e in op.kwargs["pad_widths"]]
    if len(flat) % 2 or len(flat) // 2 > meta.rank:
        raise Invalid(f"pad widths {flat} for a rank-{meta.rank} tensor")
    widths = [(0, 0)] * meta.rank
    for k in range(len(flat) // 2):
        widths[meta.rank - 1 - k] = (flat[2 * k], flat[2 * k + 1])
    return widths


def _pad(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    meta = metas[op.args[0].vid]
    widths = pad_widths(op, metas, program)
    shape = []
    for (lo, hi), s, b in zip(widths, meta.shape, meta.bcast, strict=True):
        if (lo, hi) != (0, 0) and b:
            raise Invalid("pad of a broadcast axis")
        if s + lo + hi < 1 or lo < -s or hi < -s:
            raise Invalid(f"pad ({lo}, {hi}) of an axis of size {s}")
        shape.append(s + lo + hi)
    return [Meta(tuple(shape), tuple(False for _ in shape))]


def _cat(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    pieces = [metas[r.vid] for r in op.args[0]]
    dim = op.kwargs["dim"]
    rank = pieces[0].rank
    if len(pieces) < 2 or any(p.rank != rank for p in pieces) or not 0 <= dim < rank:
        raise Invalid("cat needs two or more tensors of one rank")
    for axis in range(rank):
        if axis != dim and len({(p.shape[axis], p.bcast[axis]) for p in pieces}) != 1:
            raise Invalid(f"cat: axis {axis} differs between the pieces")
    if any(p.bcast[dim] for p in pieces):
        raise Invalid("cat along a broadcast axis")
    shape = list(pieces[0].shape)
    shape[dim] = sum(p.shape[dim] for p in pieces)
    return [Meta(tuple(shape), tuple(False if a == dim else pieces[0].bcast[a] for a in range(rank)))]


def _full(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    shape = tuple(extent_value(e, metas) for e in op.kwargs["shape"])
    if any(s < 1 for s in shape):
        raise Invalid(f"full of shape {shape}")
    return [Meta(shape, tuple(False for _ in shape))]


def _iota(op: Op, metas: dict[int, Meta], program: Program) -> list[Meta]:
    length = extent_value(op.kwargs["length"], metas)
    if length < 1:
        raise Invalid("iota of no element")
    return [Meta((length,), (False,))]


_RULES = {
    **dict.fromkeys(REDUCTIONS, _reduction),
    "var": _reduction,
    "var_mean": _reduction,
    "welford": _welford,
    "broadcast": _broadcast,
    "broadcast_in_dim": _broadcast_in_dim,
    "expand": _expand,
    "reshape": _reshape,
    "squeeze": _squeeze,
    "permute": _permute,
    "slice": _slice,
    "pad": _pad,
    "cat": _cat,
    "full": _full,
    "iota": _iota,
}


def used_values(program: Program) -> set[int]:
    """The values the outputs depend on (tensors and scalars), through the ops."""
    producer = {vid: op for op in program.ops for vid in op.outs}
    live: set[int] = set()
    stack = [o.vid for o in program.outputs]
    while stack:
        vid = stack.pop()
        if vid in live:
            continue
        live.add(vid)
        op = producer.get(vid)
        if op is not None:
            stack.extend(v for v in operand_vids(op) if v not in live)
    return live


PRECISION = ("BFloat16", "Half", "Float", "Double")  # least precise first


def computed_precision(program: Program, vid: int) -> str | None:
    """The least precise float dtype among the values computed on the way to `vid` (its
    own included; inputs are exact data): the precision its value can be trusted to."""
    producer = {v: op for op in program.ops for v in op.outs}
    seen: set[int] = set()
    stack, found = [vid], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        op = producer.get(v)
        if op is None:
            continue
        if program.dtypes.get(v) in PRECISION and op.name not in ("set", "segment_set", "stride_order"):
            found.add(program.dtypes[v])
        stack.extend(operand_vids(op))
    return next((d for d in PRECISION if d in found), None)


def operand_vids(op: Op) -> list[int]:
    found: list[int] = []
    _collect(list(op.args) + list(op.kwargs.values()), found)
    return found


def _collect(item: Any, found: list[int]) -> None:
    if isinstance(item, Ref | Size):
        found.append(item.vid)
    elif isinstance(item, Extent):
        _collect(list(item.parts), found)
    elif isinstance(item, list | tuple):
        for x in item:
            _collect(x, found)


def without_dead_ops(program: Program) -> Program:
    """The program with ops no output needs removed (inputs are kept: they are the
    fusion's signature)."""
    live = used_values(program)
    ops = [op for op in program.ops if any(v in live for v in op.outs)]
    return Program(program.seed, program.index, list(program.inputs), ops, list(program.outputs), dict(program.dtypes))


def without_unused_inputs(program: Program) -> Program:
    """The program without the inputs nothing uses (which changes its data: inputs draw
    their values in order)."""
    used = {v for op in program.ops for v in operand_vids(op)} | {o.vid for o in program.outputs}
    inputs = [i for i in program.inputs if i.vid in used]
    return Program(program.seed, program.index, inputs, list(program.ops), list(program.outputs), dict(program.dtypes))


# -- JSON -----------------------------------------------------------------------------------


def _encode(item: Any) -> Any:
    if isinstance(item, Ref):
        return {"ref": item.vid}
    if isinstance(item, Size):
        return {"size": [item.vid, item.axis]}
    if isinstance(item, Extent):
        return {"extent": [_encode(p) for p in item.parts]}
    if isinstance(item, list | tuple):
        return [_encode(x) for x in item]
    if isinstance(item, dict):
        return {k: _encode(v) for k, v in item.items()}
    return item


def _decode(item: Any) -> Any:
    if isinstance(item, dict):
        if set(item) == {"ref"}:
            return Ref(item["ref"])
        if set(item) == {"size"}:
            return Size(*item["size"])
        if set(item) == {"extent"}:
            return Extent(tuple(_decode(p) for p in item["extent"]))
        return {k: _decode(v) for k, v in item.items()}
    if isinstance(item, list):
        return [_decode(x) for x in item]
    return item


def to_json(program: Program) -> str:
    inputs = []
    for inp in program.inputs:
        if isinstance(inp, TensorIn):
            inputs.append({"tensor": _encode(inp.__dict__)})
        else:
            inputs.append({"scalar": _encode(inp.__dict__)})
    data = {
        "seed": program.seed,
        "index": program.index,
        "inputs": inputs,
        "ops": [{"name": o.name, "args": _encode(o.args), "kwargs": _encode(o.kwargs), "outs": o.outs, "tag": o.tag}
                for o in program.ops],
        "outputs": [{"vid": o.vid, "stride_order": o.stride_order} for o in program.outputs],
        "note": program.note,
    }  # fmt: skip
    return json.dumps(data, indent=1)


def from_json(text: str) -> Program:
    data = json.loads(text)
    inputs: list[TensorIn | ScalarIn] = []
    for item in data["inputs"]:
        if "tensor" in item:
            t = item["tensor"]
            inputs.append(
                TensorIn(
                    t["vid"],
                    tuple(t["shape"]),
                    t["dtype"],
                    tuple(t["static"]),
                    tuple(t["order"]),
                    tuple(t["expanded"]),
                    t["gap"],
                )
            )
        else:
            s = item["scalar"]
            inputs.append(ScalarIn(s["vid"], s["dtype"], s["value"]))
    ops = [
        Op(o["name"], tuple(_decode(o["args"])), _decode(o["kwargs"]), tuple(o["outs"]), o["tag"]) for o in data["ops"]
    ]
    outputs = [Output(o["vid"], tuple(o["stride_order"]) if o["stride_order"] else None) for o in data["outputs"]]
    return Program(data["seed"], data["index"], inputs, ops, outputs, note=data.get("note", ""))
