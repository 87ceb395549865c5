"""Random programs, valid by construction and deterministic per (seed, index).

Each step picks an op family (families.py: pointwise math, casts, shape ops, reductions,
normalization patterns, factories) and operands from the values made so far whose
shapes and dtypes fit it: element-wise operands broadcast (same rank; sizes equal or one
side a declared broadcast), reductions take legal axes, slices and pads stay in bounds,
reshapes keep the element count. Each op is applied to a live FusionDefinition as it is
chosen, which gives the dtype fuser_core infers for its result (nvFuser's promotion
rules). The program depends only on (seed, index, max_elems, max_ops, exclude).

`exclude` names constructs not to generate (EXCLUDABLE), to fuzz around a known bug.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from fuser_core import FusionDefinition

from .build import Builder
from .families import DTYPE_WEIGHTS, Families
from .program import FLOATS, INTS, Meta, Op, Output, Program, Ref, ScalarIn, Size, TensorIn, infer_op, operand_vids

SIZES = [1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 33, 64, 127, 128, 129, 255, 256, 257, 511, 1024, 1025, 2048, 4097]
SIZE_WEIGHTS = [6, 5, 6, 4, 4, 4, 4, 3, 4, 3, 3, 3, 3, 3, 2, 2, 2, 1, 1, 1, 2, 2, 1, 1]

EXCLUDABLE = {
    "expanded_input": "no input with a stride-0 (expanded) axis",
    "permuted_input": "no input in a permuted memory order",
    "strided_input": "no non-contiguous (gapped) input",
    "multi_output": "one output per fusion, never an input or a view of one",
    "full_reduction": "no reduction over every axis of its operand",
    "broadcast_reduction": "no reduction over a broadcast axis",
    "narrow_reduction": "no reduction of a Half or BFloat16 value (cast to Float first)",
    "resize_of_expanded": "no slice, pad or cat of a value with an expanded axis",
    "resize_with_welford": "no slice, pad or cat in a fusion with var, var_mean or welford",
    "reduction_of_resize": "no reduction of a value computed from a slice, pad or cat",
    "cat": "no cat",
    "stride_order": "no fd.ops.stride_order and no output with a stride_order",
    "expand": "no expand, and broadcast_in_dim only to size 1 on its new axes (binary ops broadcast them)",
    "scalar_input": "no symbolic scalar inputs (define_scalar(None))",
    "welford_outer": "var, var_mean and welford only over innermost axes",
    "double_min_max": "no max or min reduction of a Double value",
    "integer_fmod": "no fmod of integers",
    "random": "no rand_like or randn_like",
}

FAMILIES: dict[str, tuple[float, int]] = {  # weight, and the most ops a step of it adds
    "unary": (24, 4),
    "binary": (22, 3),
    "ternary": (6, 2),
    "cast": (8, 2),
    "reduction": (8, 1),
    "variance": (3, 3),
    "softmax": (3, 7),
    "layer_norm": (4, 9),
    "broadcast": (4, 2),
    "broadcast_in_dim": (4, 2),
    "expand": (2, 1),
    "reshape": (4, 1),
    "squeeze": (2, 1),
    "permute": (4, 1),
    "slice": (3, 1),
    "pad": (3, 1),
    "cat": (3, 3),
    "factory": (2, 3),
    "copy": (1.5, 1),
    "random": (1.5, 4),
}


class TooBig(Exception):
    """An op whose result would pass max_elems: the step tries another."""


class Generator(Families):
    """Builds one program; `generate()` is the entry point."""

    def __init__(
        self, seed: int, index: int, fd: FusionDefinition, max_elems: int, max_ops: int, exclude: Iterable[str] = ()
    ) -> None:
        unknown = set(exclude) - set(EXCLUDABLE)
        if unknown:
            raise ValueError(f"cannot exclude {sorted(unknown)}: choose from {sorted(EXCLUDABLE)}")
        self.exclude = frozenset(exclude)
        self.origin: dict[int, frozenset[str]] = {}  # what each value was computed from (see `traits`)
        self.rng = random.Random(f"fuser-fuzz/{seed}/{index}")
        self.program = Program(seed, index)
        self.builder = Builder(fd, self.program.dtypes)
        self.metas: dict[int, Meta] = {}
        self.pool: list[int] = []  # tensor values usable as operands, oldest first
        self.next_vid = 0
        self.max_elems = max_elems
        self.max_ops = max_ops

    # -- plumbing ----------------------------------------------------------------------------
    def vid(self) -> int:
        self.next_vid += 1
        return self.next_vid - 1

    def dtype(self, vid: int) -> str:
        return self.program.dtypes[vid]

    def emit(
        self, name: str, args: list[Any], kwargs: dict[str, Any] | None = None, n_out: int = 1, tag: str = ""
    ) -> list[int]:
        op = Op(name, tuple(args), dict(kwargs or {}), tuple(self.vid() for _ in range(n_out)), tag)
        metas = infer_op(op, self.metas, self.program)
        if any(m.numel > self.max_elems for m in metas):  # an outer product by broadcasting, say
            raise TooBig(f"{name} would make {max(m.numel for m in metas)} elements")
        self.builder.apply(op)
        self.program.ops.append(op)
        traits = self.traits(op, metas)
        for vid, meta in zip(op.outs, metas, strict=True):
            self.metas[vid] = meta
            self.origin[vid] = traits
            if self.dtype(vid) != "Index":
                self.pool.append(vid)
        return list(op.outs)

    def one(self, name: str, args: list[Any], kwargs: dict[str, Any] | None = None, tag: str = "") -> int:
        return self.emit(name, args, kwargs, 1, tag)[0]

    def pick(self, ok: Callable[[int], bool]) -> int | None:
        candidates = [v for v in self.pool if ok(v)]
        if not candidates:
            return None
        if self.rng.random() < 0.5:
            return candidates[-1]
        return self.rng.choice(candidates)

    def traits(self, op: Op, metas: list[Meta]) -> frozenset[str]:
        """Its operands' traits, and "expanded" (a broadcast made to a size), "resize"
        (slice, pad, cat) or "welford" for what this op adds."""
        found: set[str] = set()
        for vid in operand_vids(op):
            found |= self.origin.get(vid, frozenset())
        if op.name in ("slice", "pad", "cat"):
            found.add("resize")
        if op.name in ("var", "var_mean", "welford"):
            found.add("welford")
        if op.name == "expand" or (op.name == "broadcast_in_dim" and self.expands(op, metas[0])):
            found.add("expanded")
        return frozenset(found)

    def expands(self, op: Op, out: Meta) -> bool:
        """Whether a broadcast_in_dim makes a broadcast axis (new or of its operand) a size."""
        source = self.metas[op.args[0].vid]
        dims = list(op.kwargs["broadcast_dims"])
        new = [d for d in range(out.rank) if d not in dims and out.shape[d] > 1]
        return bool(new) or any(source.bcast[j] and out.shape[d] > 1 for j, d in enumerate(dims))

    def has_op(self, *names: str) -> bool:
        return any(op.name in names for op in self.program.ops)

    def resizable(self, vid: int) -> bool:
        """Whether the exclusions let `vid` be sliced, padded or concatenated."""
        if "resize_of_expanded" in self.exclude and "expanded" in self.origin.get(vid, ()):
            return False
        return not ("resize_with_welford" in self.exclude and self.has_op("var", "var_mean", "welford"))

    def reducible(self, vid: int, welford: bool = False) -> bool:
        """Whether the exclusions let `vid` be reduced (by a Welford op, with `welford`)."""
        if "reduction_of_resize" in self.exclude and "resize" in self.origin.get(vid, ()):
            return False
        if welford and "resize_with_welford" in self.exclude and self.has_op("slice", "pad", "cat"):
            return False
        return not ("full_reduction" in self.exclude and self.metas[vid].rank < 2)

    def axes_ok(self, meta: Meta, dims: list[int]) -> bool:
        if "full_reduction" in self.exclude and len(dims) == meta.rank:
            return False
        return not ("broadcast_reduction" in self.exclude and any(meta.bcast[d] for d in dims))

    def kind(self, vid: int) -> str:
        d = self.dtype(vid)
        return "float" if d in FLOATS else "int" if d in (*INTS, "Index") else "bool"

    def compatible(self, a: int, b: int) -> bool:
        ma, mb = self.metas[a], self.metas[b]
        if ma.rank != mb.rank:
            return False
        return all(x == y or bx or by for x, y, bx, by in zip(ma.shape, mb.shape, ma.bcast, mb.bcast, strict=True))

    def numel_after(self, *metas: Meta) -> int:
        return max(m.numel for m in metas)

    def size_entry(self, vid: int, axis: int) -> Any:
        """An axis's extent as the definition spells it: symbolic or a constant."""
        meta = self.metas[vid]
        if meta.bcast[axis] or self.rng.random() < 0.5:
            return meta.shape[axis]
        return Size(vid, axis)

    def scalar_inputs(self, dtype_kind: str) -> list[ScalarIn]:
        want = ("Double",) if dtype_kind == "float" else ("Int",)
        return [i for i in self.program.inputs if isinstance(i, ScalarIn) and i.dtype in want]

    def constant(self, kind: str) -> Any:
        if kind == "float":
            return self.rng.choice([0.5, -1.25, 2.0, 0.1, 3.0, -0.75, 1e-3])
        if kind == "int":
            return self.rng.choice([1, 2, 3, -2, 5, 7])
        return self.rng.choice([True, False])

    def other_operand(self, a: int, kind: str, need_tensor: bool = False, also: tuple[Any, ...] = ()) -> Any:
        """A further operand for `a`: a tensor of the same kind that broadcasts with `a`
        (and with the tensors in `also`), a scalar input, or a constant."""
        r = self.rng.random()
        meet = [a] + [x.vid for x in also if isinstance(x, Ref) and x.vid in self.metas]
        b = self.pick(lambda v: v != a and self.kind(v) == kind and all(self.compatible(m, v) for m in meet))
        if b is not None and (r < 0.65 or need_tensor):
            return Ref(b)
        if need_tensor:
            return Ref(a)
        scalars = self.scalar_inputs(kind)
        if scalars and r < 0.8:
            return Ref(self.rng.choice(scalars).vid)
        return self.constant(kind)

    # -- inputs ------------------------------------------------------------------------------
    def choose_size(self, budget: int) -> int:
        options = [(s, w) for s, w in zip(SIZES, SIZE_WEIGHTS, strict=True) if s <= budget]
        return self.rng.choices([s for s, _ in options], [w for _, w in options])[0]

    def base_shape(self) -> list[int]:
        rank = self.rng.choices([1, 2, 3, 4], [2, 4, 3, 1])[0]
        shape, budget = [], max(self.max_elems // 3, 1)
        for _ in range(rank):
            size = self.choose_size(budget)
            shape.append(size)
            budget = max(budget // size, 1)
        return shape

    def tensor_input(self, shape: list[int], dtype: str) -> int:
        rank = len(shape)
        order = list(range(rank))
        expanded = [False] * rank
        gap = 0
        r = self.rng.random()
        big = [a for a in range(rank) if shape[a] > 1]
        if r < 0.12 and big and "expanded_input" not in self.exclude:
            for a in self.rng.sample(big, self.rng.randint(1, len(big))):
                expanded[a] = True
        elif 0.12 <= r < 0.34 and rank >= 2 and "permuted_input" not in self.exclude:
            while order == sorted(order):
                self.rng.shuffle(order)
        elif 0.34 <= r < 0.46 and rank >= 1 and "strided_input" not in self.exclude:
            gap = self.rng.choice([1, 3, 8])
            if rank >= 2 and self.rng.random() < 0.4 and "permuted_input" not in self.exclude:
                self.rng.shuffle(order)
        static = tuple(s > 1 and self.rng.random() < 0.2 for s in shape)
        vid = self.vid()
        inp = TensorIn(vid, tuple(shape), dtype, static, tuple(order), tuple(expanded), gap)
        self.program.inputs.append(inp)
        self.builder.add_input(inp)
        self.metas[vid] = Meta(tuple(shape), tuple(s == 1 for s in shape))
        self.origin[vid] = frozenset({"expanded"} if any(expanded) else ())
        self.pool.append(vid)
        return vid

    def random_dtype(self) -> str:
        return self.rng.choices(list(DTYPE_WEIGHTS), list(DTYPE_WEIGHTS.values()))[0]

    def make_inputs(self) -> None:
        base = self.base_shape()
        first = self.random_dtype()
        self.tensor_input(base, first)
        for _ in range(int(self.rng.random() < 0.6) + int(self.rng.random() < 0.25)):
            dtype = first if self.rng.random() < 0.6 else self.random_dtype()
            r = self.rng.random()
            if r < 0.5:
                shape = list(base)
            elif r < 0.8:
                shape = [1 if self.rng.random() < 0.5 else s for s in base]
            else:
                keep = sorted(self.rng.sample(range(len(base)), self.rng.randint(1, len(base))))
                shape = [base[a] for a in keep]
            self.tensor_input(shape, dtype)
        scalars = "scalar_input" not in self.exclude
        if self.rng.random() < 0.3 and scalars:
            self.scalar_input("Double", round(self.rng.uniform(-2, 2), 3))
        if self.rng.random() < 0.25 and scalars:
            self.scalar_input("Int", self.rng.randint(1, 3))

    def scalar_input(self, dtype: str, value: Any) -> None:
        inp = ScalarIn(self.vid(), dtype, value)
        self.program.inputs.append(inp)
        self.builder.add_input(inp)

    def step(self, budget: int) -> None:
        names = [n for n, (_, cost) in FAMILIES.items() if cost <= budget] or ["unary"]
        weights = [FAMILIES[n][0] for n in names]
        for _ in range(20):
            try:
                if getattr(self, self.rng.choices(names, weights)[0])():
                    return
            except TooBig:
                continue
        self.one("abs" if self.kind(self.pool[-1]) != "bool" else "logical_not", [Ref(self.pool[-1])])

    # -- outputs -----------------------------------------------------------------------------
    def finish(self) -> None:
        computed = [v for op in self.program.ops for v in op.outs if self.dtype(v) != "Index"]
        last = computed[-1]
        narrow = [i.dtype for i in self.program.tensor_inputs() if i.dtype in ("Half", "BFloat16")]
        if narrow and self.dtype(last) == "Float" and self.rng.random() < 0.6:
            last = self.one("cast", [Ref(last)], {"dtype": narrow[0]})
        outs = [last]
        single = "multi_output" in self.exclude
        for v in self.rng.sample(computed, min(len(computed), self.rng.randint(0, 2))):
            if v not in outs and not single:
                outs.append(v)
        if self.rng.random() < 0.15 and not single:
            outs.append(self.alias_of_input())
        if self.rng.random() < 0.04 and not single:
            outs.append(self.program.tensor_inputs()[0].vid)
        for v in outs:
            order = None
            if self.metas[v].rank >= 2 and self.rng.random() < 0.08 and "stride_order" not in self.exclude:
                perm = list(range(self.metas[v].rank))
                self.rng.shuffle(perm)
                order = tuple(perm)
            self.program.outputs.append(Output(v, order))
        self.builder.add_outputs(self.program)

    def alias_of_input(self) -> int:
        """A view of an input (reshape, permute or squeeze of it): an output that can
        alias the input's storage."""
        inp = self.rng.choice(self.program.tensor_inputs())
        meta = self.metas[inp.vid]
        if any(meta.bcast) and self.rng.random() < 0.4:
            return self.one(
                "squeeze", [Ref(inp.vid)], {"dims": [a for a, b in enumerate(meta.bcast) if b]}, tag="alias"
            )
        if meta.rank >= 2 and self.rng.random() < 0.4:
            return self.one("permute", [Ref(inp.vid)], {"dims": list(reversed(range(meta.rank)))}, tag="alias")
        return self.one("reshape", [Ref(inp.vid)], {"new_shape": [meta.numel]}, tag="alias")

    def generate(self) -> Program:
        self.make_inputs()
        target = self.rng.randint(1, self.max_ops)
        while len(self.program.ops) < target:
            self.step(target - len(self.program.ops))
        self.finish()
        return self.program


def generate(
    seed: int, index: int, max_elems: int = 100_000, max_ops: int = 12, exclude: Iterable[str] = ()
) -> Program:
    """The program of (seed, index): the same op list, shapes and layouts on every call."""
    with FusionDefinition() as fd:
        program = Generator(seed, index, fd, max_elems, max_ops, exclude).generate()
    return program
