"""The op families of the generator: each method adds one op (or a short pattern of
ops) on operands that fit it, or returns False when the values made so far have none.

Math with a restricted domain gets its operand guarded first (`log(|x| + 0.5)`,
`asin(0.9 * tanh(x))`), integer division a nonzero divisor, float-to-integer casts a
clamp, so every result is a number torch and the compiler must agree on. Constructs
named in `Generator.exclude` (see generator.EXCLUDABLE) are not generated.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from .program import INTS, NARROW, Extent, Meta, Ref, Size

MAX_RANK = 5
DTYPE_WEIGHTS = {"Float": 6, "Half": 3, "BFloat16": 3, "Double": 2, "Int": 2, "Int32": 2, "Bool": 1}

FLOAT_UNARY = [
    "abs", "neg", "exp", "exp2", "expm1", "sin", "cos", "atan", "tanh", "sigmoid", "silu", "relu", "erf", "erfc",
    "floor", "ceil", "round", "trunc", "sign", "frac", "asinh", "sinh", "cosh"
]  # fmt: skip
FLOAT_PREDICATES = ["isnan", "isinf", "isfinite", "isneginf", "isposinf", "signbit", "isreal"]
# op -> the guard that puts any real operand into its domain: (op, constant) steps
GUARDED_UNARY: dict[str, list[tuple[str, float]]] = {
    "log": [("abs", 0), ("add", 0.5)],
    "log2": [("abs", 0), ("add", 0.5)],
    "log10": [("abs", 0), ("add", 0.5)],
    "sqrt": [("abs", 0), ("add", 0.5)],
    "rsqrt": [("abs", 0), ("add", 0.5)],
    "reciprocal": [("abs", 0), ("add", 0.5)],
    "lgamma": [("abs", 0), ("add", 0.5)],
    "log1p": [("abs", 0)],
    "acosh": [("abs", 0), ("add", 1.25)],
    "asin": [("tanh", 0), ("mul", 0.9)],
    "acos": [("tanh", 0), ("mul", 0.9)],
    "atanh": [("tanh", 0), ("mul", 0.9)],
    "erfinv": [("tanh", 0), ("mul", 0.9)],
    "tan": [("tanh", 0), ("mul", 1.2)],
    "erfcinv": [("tanh", 0), ("mul", 0.9), ("add", 1.0)],
}
INT_UNARY = ["abs", "neg", "bitwise_not", "sign", "relu"]
BOOL_UNARY = ["logical_not", "bitwise_not"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "truediv", "maximum", "minimum", "atan2"]
INT_BINARY = ["add", "sub", "mul", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "gcd"]
BOOL_BINARY = ["logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
REDUCTION_OPS = ("sum", "prod", "max", "min")


class Families:
    """Mixed into Generator (generator.py), whose plumbing these methods use."""

    def guard(self, x: int, steps: list[tuple[str, float]]) -> int:
        for name, c in steps:
            x = self.one(name, [Ref(x)] if name in ("abs", "tanh") else [Ref(x), c])
        return x

    def unary(self) -> bool:
        x = self.pick(lambda v: True)
        if x is None:
            return False
        kind = self.kind(x)
        if kind == "float":
            r = self.rng.random()
            if r < 0.55:
                self.one(self.rng.choice(FLOAT_UNARY), [Ref(x)])
            elif r < 0.9:
                name = self.rng.choice(sorted(GUARDED_UNARY))
                self.one(name, [Ref(self.guard(x, GUARDED_UNARY[name]))])
            else:
                self.one(self.rng.choice(FLOAT_PREDICATES), [Ref(x)])
        else:
            self.one(self.rng.choice(INT_UNARY if kind == "int" else BOOL_UNARY), [Ref(x)])
        return True

    def binary(self) -> bool:
        a = self.pick(lambda v: True)
        if a is None:
            return False
        kind = self.kind(a)
        if self.rng.random() < 0.2:
            name = self.rng.choice(COMPARISONS if kind != "bool" else ["eq", "ne"])
            b = self.other_operand(a, kind)
            args = [Ref(a), b] if self.rng.random() < 0.8 else [b, Ref(a)]
            self.one(name, args)
            return True
        if kind == "float":
            return self.float_binary(a)
        if kind == "int":
            return self.int_binary(a)
        self.one(self.rng.choice(BOOL_BINARY), [Ref(a), self.other_operand(a, "bool")])
        return True

    def float_binary(self, a: int) -> bool:
        r = self.rng.random()
        if r < 0.6:
            b = self.other_operand(a, "float")
            args = [Ref(a), b] if self.rng.random() < 0.8 else [b, Ref(a)]
            self.one(self.rng.choice(FLOAT_BINARY), args)
        elif r < 0.7:
            base = self.guard(a, [("abs", 0), ("add", 0.5)])
            exponent = self.rng.choice([2, 3, 0.5, -1.5, 2.0])
            self.one("pow", [Ref(base), exponent])
        elif r < 0.8:
            divisor = self.other_operand(a, "float", need_tensor=self.rng.random() < 0.5)
            if isinstance(divisor, Ref) and divisor.vid in self.metas:
                divisor = Ref(self.guard(divisor.vid, [("abs", 0), ("add", 0.5)]))
            elif not isinstance(divisor, Ref):
                divisor = self.rng.choice([1.5, -0.75, 2.0])
            else:
                divisor = 1.75
            self.one(self.rng.choice(["fmod", "remainder", "mod"]), [Ref(a), divisor])
        elif r < 0.9:
            b = self.other_operand(a, "float")
            self.one(self.rng.choice(["add_alpha", "sub_alpha"]), [Ref(a), b, self.rng.choice([0.5, 2.0, -1.0])])
        elif self.dtype(a) in ("Float", "Double"):
            b = self.pick(lambda v: v != a and self.dtype(v) == self.dtype(a) and self.compatible(a, v))
            self.one("nextafter", [Ref(a), Ref(b) if b is not None else self.constant("float")])
        else:
            self.one("mul", [Ref(a), self.other_operand(a, "float")])
        return True

    def int_binary(self, a: int) -> bool:
        r = self.rng.random()
        if r < 0.55:
            self.one(self.rng.choice(INT_BINARY), [Ref(a), self.other_operand(a, "int")])
        elif r < 0.75:
            names = ["div", "mod", "remainder"] + ["fmod"] * ("integer_fmod" not in self.exclude)
            name = self.rng.choice(names)
            b = self.pick(lambda v: v != a and self.kind(v) == "int" and self.compatible(a, v))
            if b is not None and self.rng.random() < 0.5:  # |b| + 1 is never 0
                divisor: Any = Ref(self.guard(b, [("abs", 0), ("add", 1)]))
            else:
                divisor = self.rng.choice([3, -4, 7, 2])
            self.one(name, [Ref(a), divisor])
        elif r < 0.9:
            name = self.rng.choice(["bitwise_left_shift", "bitwise_right_shift", "logical_right_shift"])
            self.one(name, [Ref(a), self.rng.randint(0, 7)])
        else:
            self.one("pow", [Ref(a), self.rng.randint(0, 3)])
        return True

    def ternary(self) -> bool:
        a = self.pick(lambda v: self.kind(v) != "bool")
        if a is None:
            return False
        kind = self.kind(a)
        r = self.rng.random()
        if r < 0.4:
            cond = self.pick(lambda v: self.kind(v) == "bool" and self.compatible(a, v))
            if cond is None:
                cond = self.one(self.rng.choice(["gt", "lt", "ge"]), [Ref(a), self.constant(kind)])
            args = [Ref(a), self.other_operand(a, kind, also=(Ref(cond),))]
            self.rng.shuffle(args)
            self.one("where", [Ref(cond), *args])
        elif r < 0.6:
            lo = self.constant(kind)
            hi = lo + (self.rng.choice([1.0, 2.5]) if kind == "float" else self.rng.randint(1, 6))
            self.one("clamp", [Ref(a), lo, hi])
        elif r < 0.75:
            self.one("threshold", [Ref(a), self.constant(kind), self.constant(kind)])
        elif kind == "float" and r < 0.88:
            end = self.other_operand(a, "float", need_tensor=True)
            weight = (
                self.rng.choice([0.25, 0.75, 0.5])
                if self.rng.random() < 0.6
                else self.other_operand(a, "float", also=(end,))
            )
            self.one("lerp", [Ref(a), end, weight])
        elif kind == "float":
            b = self.other_operand(a, "float", need_tensor=True)
            c = self.other_operand(a, "float", need_tensor=True, also=(b,))
            self.one("addcmul", [Ref(a), b, c, self.rng.choice([0.5, -2.0, 1.0])])
        else:
            self.one("add_alpha", [Ref(a), self.other_operand(a, "int"), self.rng.choice([2, -1, 3])])
        return True

    def cast(self) -> bool:
        x = self.pick(lambda v: True)
        if x is None:
            return False
        target = self.rng.choice([d for d in DTYPE_WEIGHTS if d != self.dtype(x)])
        if self.kind(x) == "float" and target in INTS:
            x = self.one("clamp", [Ref(x), -1000.0, 1000.0])
        self.one("cast", [Ref(x)], {"dtype": target})
        return True

    def reduction(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank >= 1 and self.kind(v) != "bool" and self.reducible(v))
        if x is None:
            return False
        dims = self.reduction_dims(self.metas[x])
        if dims is None:
            return False
        if "narrow_reduction" in self.exclude and self.dtype(x) in NARROW:
            x = self.as_float(x)
        meta = self.metas[x]
        name = self.rng.choice(REDUCTION_OPS)
        if name == "prod" and math.prod(meta.shape[d] for d in dims) > 64:
            name = "sum"
        if name in ("max", "min") and self.dtype(x) == "Double" and "double_min_max" in self.exclude:
            name = "sum"
        kwargs: dict[str, Any] = {"dims": dims, "keepdim": self.rng.random() < 0.35}
        if name == "sum" and self.dtype(x) != "Double" and self.rng.random() < 0.15:
            kwargs["dtype"] = "Float" if self.kind(x) == "float" else "Int"
        self.one(name, [Ref(x)], kwargs)
        return True

    def reduction_dims(self, meta: Meta) -> list[int] | None:
        """Axes to reduce (one, several or all), within the exclusions; None if none fit."""
        for _ in range(4):
            r = self.rng.random()
            if r < 0.15 or meta.rank == 1:
                dims = list(range(meta.rank))
            elif r < 0.75:
                dims = [self.rng.randrange(meta.rank)]
            else:
                dims = sorted(self.rng.sample(range(meta.rank), self.rng.randint(1, meta.rank)))
            if self.axes_ok(meta, dims):
                return dims
        return None

    def as_float(self, x: int) -> int:
        if self.dtype(x) in ("Float", "Double"):
            return x
        return self.one("cast", [Ref(x)], {"dtype": "Float"})

    def variance(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank >= 1 and self.metas[v].numel >= 2 and self.reducible(v, True))
        if x is None:
            return False
        dims = self.reduction_dims(self.metas[x])
        rank = self.metas[x].rank
        if dims is None or ("welford_outer" in self.exclude and dims != list(range(rank - len(dims), rank))):
            return False
        x = self.as_float(x)
        meta = self.metas[x]
        count = math.prod(meta.shape[d] for d in dims)
        correction = 1 if count >= 2 and self.rng.random() < 0.5 else 0
        r = self.rng.random()
        keepdim = self.rng.random() < 0.3
        if r < 0.35:
            self.one("var", [Ref(x)], {"dims": dims, "correction": correction, "keepdim": keepdim})
        elif r < 0.7:
            self.emit("var_mean", [Ref(x)], {"dims": dims, "correction": correction, "keepdim": keepdim}, 2)
        else:
            _avg, var_sum, n = self.emit("welford", [Ref(x)], {"dims": dims}, 3)
            if self.rng.random() < 0.4:
                self.one("div", [Ref(var_sum), Ref(n)])
        return True

    def spread(self, vid: int, axis: int) -> Any:
        """The size a broadcast axis is given along `vid`'s `axis`: that axis's extent, or 1
        where expanded broadcasts are excluded (the result then broadcasts implicitly)."""
        return 1 if "expand" in self.exclude else self.size_entry(vid, axis)

    def kept_shape(self, x: int, dims: list[int]) -> tuple[list[Any], list[int]]:
        meta = self.metas[x]
        shape = [self.spread(x, a) if a in dims else self.size_entry(x, a) for a in range(meta.rank)]
        return shape, [a for a in range(meta.rank) if a not in dims]

    def softmax(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank >= 1 and self.kind(v) == "float" and self.reducible(v))
        if x is None:
            return False
        axis = self.rng.randrange(self.metas[x].rank)
        if not self.axes_ok(self.metas[x], [axis]):
            return False
        if self.dtype(x) == "Double" and "double_min_max" in self.exclude:
            return False
        if "narrow_reduction" in self.exclude and self.dtype(x) in NARROW:
            x = self.as_float(x)
        if self.rng.random() < 0.5:
            m = self.one("max", [Ref(x)], {"dims": [axis], "keepdim": True}, tag="softmax")
            e = self.one("exp", [Ref(self.one("sub", [Ref(x), Ref(m)], tag="softmax"))], tag="softmax")
            s = self.one("sum", [Ref(e)], {"dims": [axis], "keepdim": True}, tag="softmax")
            self.one("div", [Ref(e), Ref(s)], tag="softmax")
            return True
        shape, kept = self.kept_shape(x, [axis])
        m = self.one("max", [Ref(x)], {"dims": [axis], "keepdim": False}, tag="softmax")
        mb = self.one("broadcast_in_dim", [Ref(m)], {"shape": shape, "broadcast_dims": kept}, tag="softmax")
        e = self.one("exp", [Ref(self.one("sub", [Ref(x), Ref(mb)], tag="softmax"))], tag="softmax")
        s = self.one("sum", [Ref(e)], {"dims": [axis], "keepdim": False}, tag="softmax")
        sb = self.one("broadcast_in_dim", [Ref(s)], {"shape": shape, "broadcast_dims": kept}, tag="softmax")
        self.one("div", [Ref(e), Ref(sb)], tag="softmax")
        return True

    def layer_norm(self) -> bool:
        x = self.pick(
            lambda v: (
                self.metas[v].rank >= 1
                and self.kind(v) == "float"
                and self.metas[v].shape[-1] >= 2
                and self.reducible(v, True)
            )
        )
        if x is None:
            return False
        meta = self.metas[x]
        dims = [meta.rank - 1] if meta.rank == 1 or self.rng.random() < 0.7 else [meta.rank - 2, meta.rank - 1]
        if not self.axes_ok(meta, dims):
            return False
        x = self.as_float(x)
        shape, kept = self.kept_shape(x, dims)
        if self.rng.random() < 0.4:  # RMS norm: x * rsqrt(mean(x * x) + eps)
            sq = self.one("mul", [Ref(x), Ref(x)], tag="rms_norm")
            total = self.one("sum", [Ref(sq)], {"dims": dims, "keepdim": False}, tag="rms_norm")
            count = Size(x, dims[0]) if len(dims) == 1 else math.prod(meta.shape[d] for d in dims)
            mean = self.one("div", [Ref(total), count], tag="rms_norm")
            inv = self.one("rsqrt", [Ref(self.one("add", [Ref(mean), 1e-6], tag="rms_norm"))], tag="rms_norm")
            invb = self.one("broadcast_in_dim", [Ref(inv)], {"shape": shape, "broadcast_dims": kept}, tag="rms_norm")
            self.one("mul", [Ref(x), Ref(invb)], tag="rms_norm")
            return True
        var, mean = self.emit("var_mean", [Ref(x)], {"dims": dims, "correction": 0, "keepdim": False}, 2, "layer_norm")
        meanb = self.one("broadcast_in_dim", [Ref(mean)], {"shape": shape, "broadcast_dims": kept}, tag="layer_norm")
        inv = self.one("rsqrt", [Ref(self.one("add", [Ref(var), 1e-5], tag="layer_norm"))], tag="layer_norm")
        invb = self.one("broadcast_in_dim", [Ref(inv)], {"shape": shape, "broadcast_dims": kept}, tag="layer_norm")
        y = self.one("mul", [Ref(self.one("sub", [Ref(x), Ref(meanb)], tag="layer_norm")), Ref(invb)], tag="layer_norm")
        if self.rng.random() < 0.5:  # an affine weight, a new input along the last axis
            w = self.tensor_input([meta.shape[-1]], self.dtype(x))
            last = meta.rank - 1
            along = [self.spread(x, a) for a in range(last)] + [self.size_entry(x, last)]
            wb = self.one("broadcast_in_dim", [Ref(w)], {"shape": along, "broadcast_dims": [last]}, tag="layer_norm")
            self.one("mul", [Ref(y), Ref(wb)], tag="layer_norm")
        return True

    def broadcast(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank < MAX_RANK - 1)
        if x is None:
            return False
        rank = self.metas[x].rank
        flags = [False] * rank
        for _ in range(self.rng.randint(1, 2)):
            flags.insert(self.rng.randint(0, len(flags)), True)
        y = self.one("broadcast", [Ref(x)], {"is_broadcast_dim": flags})
        other = self.pick(lambda v: v != y and self.compatible(y, v) and self.kind(v) == self.kind(y))
        if other is not None and self.rng.random() < 0.7:
            self.one("add" if self.kind(y) != "bool" else "logical_or", [Ref(other), Ref(y)])
        return True

    def broadcast_in_dim(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank < MAX_RANK)
        if x is None:
            return False
        mx = self.metas[x]
        targets = [v for v in self.pool if self.metas[v].rank > mx.rank and self.embeds(mx, self.metas[v]) is not None]
        if targets and self.rng.random() < 0.75:
            y = self.rng.choice(targets)
            dims = self.embeds(mx, self.metas[y])
            assert dims is not None
            sized = {d for j, d in enumerate(dims) if not mx.bcast[j]}
            shape = [self.size_entry(y, a) if a in sized else self.spread(y, a) for a in range(self.metas[y].rank)]
            b = self.one("broadcast_in_dim", [Ref(x)], {"shape": shape, "broadcast_dims": dims})
            if self.kind(b) == self.kind(y) and self.kind(y) != "bool":
                self.one(self.rng.choice(["add", "mul", "sub"]), [Ref(y), Ref(b)])
            return True
        rank = mx.rank + self.rng.randint(1, 2)
        dims = sorted(self.rng.sample(range(rank), mx.rank))
        shape: list[Any] = [1] * rank
        budget = self.max_elems // max(mx.numel, 1)
        for j, d in enumerate(dims):
            shape[d] = self.size_entry(x, j) if not mx.bcast[j] else 1
        for d in range(rank):
            if d not in dims and self.rng.random() < 0.5 and "expand" not in self.exclude:
                shape[d] = self.choose_size(max(budget, 1))
                budget //= shape[d]
        self.one("broadcast_in_dim", [Ref(x)], {"shape": shape, "broadcast_dims": dims})
        return True

    def embeds(self, small: Meta, big: Meta) -> list[int] | None:
        """Increasing axes of `big` that `small`'s axes can map onto, if any."""
        for dims in itertools.combinations(range(big.rank), small.rank):
            if all(small.bcast[j] or small.shape[j] == big.shape[d] for j, d in enumerate(dims)):
                return list(dims)
        return None

    def expand(self) -> bool:
        x = self.pick(lambda v: any(self.metas[v].bcast))
        if x is None or "expand" in self.exclude:
            return False
        meta = self.metas[x]
        shape: list[Any] = [self.size_entry(x, a) for a in range(meta.rank)]
        budget = self.max_elems // max(meta.numel, 1)
        for a in range(meta.rank):
            if meta.bcast[a] and self.rng.random() < 0.8 and budget >= 2:
                size = self.choose_size(budget)
                shape[a] = size
                budget //= size
        self.one("expand", [Ref(x)], {"shape": shape})
        return True

    def reshape(self) -> bool:
        x = self.pick(lambda v: True)
        if x is None:
            return False
        meta = self.metas[x]
        r = self.rng.random()
        shape: list[Any]
        if meta.rank >= 2 and r < 0.35:  # merge two neighbouring axes
            a = self.rng.randrange(meta.rank - 1)
            merged: Any = meta.shape[a] * meta.shape[a + 1]
            if self.rng.random() < 0.5:
                merged = Extent((Size(x, a), Size(x, a + 1)))
            shape = [self.size_entry(x, i) for i in range(a)] + [merged]
            shape += [self.size_entry(x, i) for i in range(a + 2, meta.rank)]
        elif r < 0.6 and meta.rank < MAX_RANK:
            splittable = [a for a in range(meta.rank) if _divisors(meta.shape[a])]
            if not splittable:
                return False
            a = self.rng.choice(splittable)
            f = self.rng.choice(_divisors(meta.shape[a]))
            shape = [*list(meta.shape[:a]), f, meta.shape[a] // f, *list(meta.shape[a + 1 :])]
        elif r < 0.8 and meta.rank < MAX_RANK:
            shape = list(meta.shape)
            shape.insert(self.rng.randint(0, len(shape)), 1)
        else:
            shape = [meta.numel]
        self.one("reshape", [Ref(x)], {"new_shape": shape})
        return True

    def squeeze(self) -> bool:
        x = self.pick(lambda v: any(self.metas[v].bcast))
        if x is None:
            return False
        # an axis expanded to a run-time extent (a slice of a stride-0 axis) is size 1 here
        # but not a squeezable broadcast: nvFuser refuses it without squeeze_expanded
        dims_of = self.builder.handles[x].tv.logical_no_reductions()
        axes = [a for a, b in enumerate(self.metas[x].bcast) if b and not dims_of[a].has_expanded_extent]
        if not axes:
            return False
        dims = sorted(self.rng.sample(axes, self.rng.randint(1, len(axes))))
        self.one("squeeze", [Ref(x)], {"dims": dims})
        return True

    def permute(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank >= 2)
        if x is None:
            return False
        dims = list(range(self.metas[x].rank))
        while dims == sorted(dims):
            self.rng.shuffle(dims)
        self.one("permute", [Ref(x)], {"dims": dims})
        return True

    def slice(self) -> bool:
        x = self.pick(lambda v: any(s >= 2 for s in self.metas[v].shape) and self.resizable(v))
        if x is None:
            return False
        meta = self.metas[x]
        starts: list[Any] = [0] * meta.rank
        ends: list[Any] = [self.size_entry(x, a) for a in range(meta.rank)]
        axes = [a for a in range(meta.rank) if meta.shape[a] >= 2]
        for a in self.rng.sample(axes, min(len(axes), self.rng.randint(1, 2))):
            n = meta.shape[a]
            start = self.rng.randint(0, n - 1)
            ends[a] = self.rng.randint(start + 1, n)
            starts[a] = start
            ints = [s for s in self.scalar_inputs("int") if start < s.value <= n]
            if ints and self.rng.random() < 0.5:
                ends[a] = Ref(ints[0].vid)
        self.one("slice", [Ref(x)], {"start_indices": starts, "end_indices": ends})
        return True

    def pad(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank >= 1 and not self.metas[v].bcast[-1] and self.resizable(v))
        if x is None:
            return False
        meta = self.metas[x]
        flat: list[Any] = []
        for k in range(self.rng.randint(1, min(2, meta.rank))):
            axis = meta.rank - 1 - k
            if meta.bcast[axis]:
                flat += [0, 0]
                continue
            n = meta.shape[axis]
            lo = self.rng.choice([0, 1, 2, 3, -1]) if n > 2 else self.rng.choice([0, 1, 2])
            hi = self.rng.choice([0, 1, 4, -1]) if n > 2 else self.rng.choice([1, 2])
            flat += [lo, hi]
        ints = self.scalar_inputs("int")
        if ints and self.rng.random() < 0.4:
            flat[1] = Ref(ints[0].vid)
        grown = meta.numel // max(meta.shape[-1], 1) * (meta.shape[-1] + 8) * (2 if meta.rank > 1 else 1)
        if grown > self.max_elems:
            return False
        self.one("pad", [Ref(x)], {"pad_widths": flat, "value": self.constant(self.kind(x))})
        return True

    def cat(self) -> bool:
        if "cat" in self.exclude:
            return False
        x = self.pick(
            lambda v: (
                any(not b for b in self.metas[v].bcast)
                and 2 * self.metas[v].numel <= self.max_elems
                and self.resizable(v)
            )
        )
        if x is None:
            return False
        meta = self.metas[x]
        dim = self.rng.choice([a for a in range(meta.rank) if not meta.bcast[a]])

        def fits(v: int) -> bool:
            m = self.metas[v]
            return (
                v != x
                and self.resizable(v)
                and self.dtype(v) == self.dtype(x)
                and m.rank == meta.rank
                and not m.bcast[dim]
                and all(a == dim or (m.shape[a], m.bcast[a]) == (meta.shape[a], meta.bcast[a]) for a in range(m.rank))
            )

        other = self.pick(fits)
        if other is not None and self.rng.random() < 0.7:
            pieces = [Ref(x), Ref(other)]
            self.rng.shuffle(pieces)
        elif meta.shape[dim] >= 2:  # a rotation: x[k:] then x[:k]
            n, k = meta.shape[dim], self.rng.randint(1, meta.shape[dim] - 1)
            full = [self.size_entry(x, a) for a in range(meta.rank)]
            head = self.one(
                "slice", [Ref(x)], {"start_indices": [0] * meta.rank, "end_indices": [*full[:dim], k, *full[dim + 1 :]]}
            )
            tail = self.one(
                "slice",
                [Ref(x)],
                {
                    "start_indices": [0] * dim + [k] + [0] * (meta.rank - dim - 1),
                    "end_indices": [*full[:dim], n, *full[dim + 1 :]],
                },
            )
            pieces = [Ref(tail), Ref(head)]
        else:
            pieces = [Ref(x), Ref(x)]
        self.one("cat", [pieces], {"dim": dim})
        return True

    def factory(self) -> bool:
        x = self.pick(lambda v: self.metas[v].rank >= 1 and self.kind(v) != "bool")
        if x is None:
            return False
        meta = self.metas[x]
        if self.rng.random() < 0.5:
            shape = [self.size_entry(x, a) for a in range(meta.rank)]
            f = self.one(
                "full", [], {"shape": shape, "fill_value": self.constant(self.kind(x)), "dtype": self.dtype(x)}
            )
            self.one("add", [Ref(x), Ref(f)])
            return True
        axis = self.rng.randrange(meta.rank)
        if meta.bcast[axis]:
            return False
        length = self.size_entry(x, axis)
        start, step = self.rng.choice([(0, 1), (2, 3), (-5, 1)])
        it = self.one("iota", [], {"length": length, "start": start, "step": step, "dtype": "Int"})
        shape = [self.size_entry(x, a) if a == axis else self.spread(x, a) for a in range(meta.rank)]
        b = self.one("broadcast_in_dim", [Ref(it)], {"shape": shape, "broadcast_dims": [axis]})
        self.one("add" if self.kind(x) != "bool" else "ne", [Ref(x), Ref(b)])
        return True

    def random(self) -> bool:
        """Dropout (rand_like < p) or noise (x + 0.1 * randn_like) with a fixed seed: torch
        cannot draw nvFuser's Philox stream, so such fusions are checked against the
        reference backend, which draws it bit for bit (torch_ref.NeedsReference)."""
        x = self.pick(lambda v: self.kind(v) == "float")
        if x is None or "random" in self.exclude:
            return False
        state = {"rng_seed": self.rng.randint(0, 2**20), "rng_offset": self.rng.choice([0, 4, 8])}
        if self.rng.random() < 0.6:
            keep = self.one("lt", [Ref(self.one("rand_like", [Ref(x)], state, tag="dropout")), 0.8], tag="dropout")
            self.one("where", [Ref(keep), Ref(self.one("mul", [Ref(x), 1.25], tag="dropout")), 0.0], tag="dropout")
        else:
            noise = self.one("mul", [Ref(self.one("randn_like", [Ref(x)], state)), 0.1])
            self.one("add", [Ref(x), Ref(noise)])
        return True

    def copy(self) -> bool:
        x = self.pick(lambda v: True)
        if x is None:
            return False
        r = self.rng.random()
        if r < 0.25 and self.metas[x].rank >= 2 and "stride_order" not in self.exclude:
            order = list(range(self.metas[x].rank))
            self.rng.shuffle(order)
            self.one("stride_order", [Ref(x)], {"stride_order": order})
        else:
            self.one("segment_set" if r < 0.7 else "set", [Ref(x)])
        return True


def _divisors(n: int) -> list[int]:
    return [f for f in range(2, min(n, 64)) if n % f == 0]
