"""Properties of segmentation and scheduling on random fusions.

Each example is a small DAG of 1-3 float inputs of rank 1-3 (sizes 1, 3, 5, 7; a
size-1 axis is declared 1, so it broadcasts) and up to a dozen frontend ops: unary
and binary pointwise ops, broadcast_in_dim (from a lower-rank tensor or a reduction
result, often to the shape of a tensor already there), sum/max reductions with or
without keepdim, softmax-like reduce-broadcast-combine chains, static reshapes that
factor their input, permutes and segment_set hints; several outputs, and
intermediates nobody uses. For each, with the runtime its inputs get:

1. every tensor expression of the complete fusion is in exactly one group;
2. the group graph is acyclic: group ids are positions and every edge goes forward;
3. a group reads only fusion inputs and outputs of earlier groups;
4. running kernel by kernel equals running the unsegmented fusion, at the shapes the
   generator's model predicts;
5. every scheduled group passes the loop-domain check;
6. each group's scheduler is the one the registry proposes for it and takes it again
   with the same parameters; the segmentation prints, each group marked; and building
   the same fusion twice gives the same text (log, marked IR, scheduled IR).

A second property test runs wider sizes (33, 35, 64). Failures found are kept below as
regression tests.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.dumps import print_scheduled
from fuser_core.runtime.kernel_runtime import FusionKernelRuntime
from fuser_core.runtime.reference import bind_leaves, evaluate_fusion, leaf_values
from fuser_core.scheduler.base import SchedulerType
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.loop_check import loop_domain_problems
from fuser_core.scheduler.registry import BY_TYPE, propose
from fuser_core.segmenter.printer import print_presched, print_segmented_fusion, print_segmenter_log

SIZES = (3, 5, 7)
UNARY = ("neg", "abs", "sin", "tanh", "sigmoid", "exp")
BINARY = ("add", "mul", "sub", "maximum")
REDUCERS = ("sum", "max")

# The model of a tensor the generator keeps: one (size, kind) per axis. Kinds:
# "iter" (a plain axis), "bcast" (a size-1 broadcast), "expanded" (a broadcast
# expanded to `size`), "one" (size 1 from a reshape: a broadcast or not, so it meets
# only other size-1 axes).
Axis = tuple[int, str]
Shape = tuple[Axis, ...]


# -- the programs ------------------------------------------------------------------------
@dataclass(frozen=True)
class Program:
    """A fusion as data: input shapes, ops on tensor indices (inputs first, then one
    tensor per op), the outputs, and the seed of the input data."""

    inputs: tuple[tuple[int, ...], ...]
    ops: tuple[tuple, ...]
    outputs: tuple[int, ...]
    seed: int

    def __repr__(self) -> str:  # a constructor to paste into a test, then the program as code
        lines = [f"Program({self.inputs!r}, {self.ops!r}, {self.outputs!r}, seed={self.seed})"]
        lines += [f"  # t{i} = input {list(shape)}" for i, shape in enumerate(self.inputs)]
        lines += [f"  # t{len(self.inputs) + k} = {_op_text(op)}" for k, op in enumerate(self.ops)]
        lines.append(f"  # outputs {[f't{i}' for i in self.outputs]}")
        return "\n".join(lines)


def _op_text(op: tuple) -> str:
    kind, *args = op
    if kind in ("unary", "binary"):
        name, *srcs = args
        return f"{name}({', '.join(f't{s}' for s in srcs)})"
    if kind == "reduce":
        name, src, axes, keepdim = args
        return f"{name}(t{src}, dims={list(axes)}, keepdim={keepdim})"
    if kind == "broadcast":
        src, shape, dims = args
        return f"broadcast_in_dim(t{src}, shape={list(shape)}, broadcast_dims={list(dims)})"
    src, shape = args
    return f"{kind}(t{src}, {list(shape)})"


def input_shape_model(shape: Sequence[int]) -> Shape:
    return tuple((s, "bcast" if s == 1 else "iter") for s in shape)


def _meets(a: Axis, b: Axis) -> bool:
    """Whether a binary op may combine the two axes."""
    return a[0] == b[0] or a[1] == "bcast" or b[1] == "bcast"


def _combined(a: Axis, b: Axis) -> Axis:
    for kind in ("iter", "one", "expanded"):
        for axis in (a, b):
            if axis[1] == kind:
                return axis
    return a


def _broadcast_axis(src: Axis, size: int) -> Axis | None:
    """What a source axis becomes at an output axis of `size`, or None if it cannot."""
    if src[1] == "bcast":
        return (1, "bcast") if size == 1 else (size, "expanded")
    return src if src[0] == size else None


def _embeddings(src: Shape, target: Shape) -> list[tuple[int, ...]]:
    """Increasing positions of `target` that `src`'s axes can be broadcast to."""
    found = []
    for dims in itertools.combinations(range(len(target)), len(src)):
        if all(_broadcast_axis(s, target[d][0]) is not None for s, d in zip(src, dims, strict=True)):
            found.append(dims)
    return found


def _pick(draw, tensors: list[Shape]) -> int:
    """A tensor index, mostly one of the last few (deep graphs), shrinking towards the
    most recent one."""
    back = draw(st.integers(0, 3))
    if back == 3:
        back = draw(st.integers(0, len(tensors) - 1))
    return len(tensors) - 1 - min(back, len(tensors) - 1)


def _draw_unary(draw, tensors):
    src = _pick(draw, tensors)
    return ("unary", draw(st.sampled_from(UNARY)), src), tensors[src]


def _draw_segment_set(draw, tensors):
    src = _pick(draw, tensors)
    return ("unary", "segment_set", src), tensors[src]


def _draw_binary(draw, tensors):
    src = _pick(draw, tensors)
    a = tensors[src]
    partners = [
        i for i, b in enumerate(tensors) if len(b) == len(a) and all(_meets(x, y) for x, y in zip(a, b, strict=True))
    ]
    others = [i for i in partners if i != src] or partners  # itself only when nothing else fits
    other = others[len(others) - 1 - draw(st.integers(0, len(others) - 1))]
    shape = tuple(_combined(x, y) for x, y in zip(a, tensors[other], strict=True))
    return ("binary", draw(st.sampled_from(BINARY)), src, other), shape


def _draw_reduce(draw, tensors):
    ranked = [i for i, t in enumerate(tensors) if t]
    if not ranked:
        return None
    src = ranked[len(ranked) - 1 - min(draw(st.integers(0, 3)), len(ranked) - 1)]
    a = tensors[src]
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(a) - 1), min_size=1, max_size=len(a)))))
    keepdim = draw(st.booleans())
    if keepdim:
        shape = tuple((1, "bcast") if i in axes else axis for i, axis in enumerate(a))
    else:
        shape = tuple(axis for i, axis in enumerate(a) if i not in axes)
    return ("reduce", draw(st.sampled_from(REDUCERS)), src, axes, keepdim), shape


def _draw_broadcast(draw, tensors, pool: Sequence[int]):
    """New axes take sizes from `pool` (or 1); nothing grows past max(pool) ** 3 elements."""
    low = [i for i, t in enumerate(tensors) if len(t) < 3]
    if not low:
        return None
    src = low[len(low) - 1 - min(draw(st.integers(0, 3)), len(low) - 1)]
    a = tensors[src]
    targets = [(t, dims) for t in tensors if len(t) > len(a) for dims in _embeddings(a, t)]
    if targets and draw(st.booleans()):  # the shape of a tensor already there
        target, dims = targets[draw(st.integers(0, len(targets) - 1))]
        sizes = [axis[0] for axis in target]
    else:
        rank = draw(st.integers(len(a) + 1, 3))
        dims = tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=len(a), max_size=len(a)))))
        sizes = [draw(st.sampled_from((1, *sorted(set(pool))))) for _ in range(rank)]
        for axis, d in zip(a, dims, strict=True):
            if axis[1] != "bcast":
                sizes[d] = axis[0]
        if math.prod(sizes) > max(pool) ** 3:
            return None
    shape = [(1, "bcast") if s == 1 else (s, "expanded") for s in sizes]
    for axis, d in zip(a, dims, strict=True):
        made = _broadcast_axis(axis, sizes[d])
        assert made is not None
        shape[d] = made
    return ("broadcast", src, tuple(sizes), tuple(dims)), tuple(shape)


def _draw_reshape(draw, tensors):
    src = _pick(draw, tensors)
    numel = math.prod(axis[0] for axis in tensors[src])
    alike = [t for t in tensors if t != tensors[src] and math.prod(a[0] for a in t) == numel and t]
    if alike and draw(st.booleans()):  # the sizes of a tensor already there
        sizes = [axis[0] for axis in alike[draw(st.integers(0, len(alike) - 1))]]
    else:
        primes = _prime_factors(numel)
        sizes = [1] * draw(st.integers(1, 3))
        for p in primes:
            sizes[draw(st.integers(0, len(sizes) - 1))] *= p
    shape = tuple((s, "one") if s == 1 else (s, "iter") for s in sizes)
    return ("reshape", src, tuple(sizes)), shape


def _draw_permute(draw, tensors):
    ranked = [i for i, t in enumerate(tensors) if len(t) > 1]
    if not ranked:
        return None
    src = ranked[len(ranked) - 1 - min(draw(st.integers(0, 3)), len(ranked) - 1)]
    dims = tuple(draw(st.permutations(range(len(tensors[src])))))
    return ("permute", src, dims), tuple(tensors[src][d] for d in dims)


def _prime_factors(n: int) -> list[int]:
    found, p = [], 2
    while n > 1:
        while n % p == 0:
            found.append(p)
            n //= p
        p += 1
    return found


KINDS = (
    "binary",
    "reduce",
    "broadcast",
    "unary",
    "reshape",
    "permute",
    "normalization",
    "segment_set",
    "binary",
    "broadcast",
)
DRAWERS = {
    "unary": _draw_unary,
    "binary": _draw_binary,
    "reduce": _draw_reduce,
    "reshape": _draw_reshape,
    "permute": _draw_permute,
    "segment_set": _draw_segment_set,
}


def _draw_normalization(draw, tensors):
    """A reduction broadcast back to its input's shape and combined with it (softmax's
    pattern): three ops."""
    made = _draw_reduce(draw, tensors)
    if made is None:
        return []
    reduce_op, reduced = made
    _, _, src, axes, keepdim = reduce_op
    full = tensors[src]
    kept = [i for i in range(len(full)) if keepdim or i not in axes]
    sizes = tuple(axis[0] for axis in full)
    broadcast_op = ("broadcast", len(tensors), sizes, tuple(kept))
    tensors.append(reduced)
    tensors.append(_model_of(broadcast_op, tensors))
    binary_op = ("binary", draw(st.sampled_from(BINARY)), src, len(tensors) - 1)
    return [reduce_op, broadcast_op, binary_op]


@st.composite
def programs(draw, max_ops: int = 12, sizes: tuple[int, ...] = SIZES, ones: bool = True) -> Program:
    """Programs of 1 to about `max_ops` frontend ops (each one to three IR expressions);
    inputs share their sizes (drawn from `sizes`), so binary ops find partners; `ones`
    lets inputs have size-1 (broadcast) axes."""
    pool = draw(st.lists(st.sampled_from(sizes), min_size=3, max_size=3))  # sizes the inputs share
    n_inputs = draw(st.integers(1, 3))
    inputs = []
    for _ in range(n_inputs):
        rank = draw(st.integers(1, 3))
        inputs.append(tuple(draw(st.sampled_from((1, *pool) if ones else pool)) for _ in range(rank)))
    tensors: list[Shape] = [input_shape_model(s) for s in inputs]
    ops: list[tuple] = []
    for _ in range(draw(st.integers(1, max_ops))):
        if len(ops) >= max_ops:
            break
        kind = draw(st.sampled_from(KINDS))
        if kind == "normalization":
            made = _draw_normalization(draw, tensors)
            ops += made
            if made:
                tensors.append(_model_of(made[-1], tensors))
            continue
        drawn = _draw_broadcast(draw, tensors, pool) if kind == "broadcast" else DRAWERS[kind](draw, tensors)
        if drawn is not None:
            ops.append(drawn[0])
            tensors.append(drawn[1])
    if not ops:
        ops.append(("unary", "neg", 0))
        tensors.append(tensors[0])
    last = len(tensors) - 1
    others = draw(st.sets(st.sampled_from(range(n_inputs, last + 1)), max_size=2))
    outputs = tuple(sorted({last, *others}))
    return Program(tuple(inputs), tuple(ops), outputs, draw(st.integers(0, 2**16)))


def expected_shapes(program: Program) -> list[tuple[int, ...]]:
    """The output shapes the generator's model gives (expanded axes at their size)."""
    tensors = [input_shape_model(s) for s in program.inputs]
    for op in program.ops:
        tensors.append(_model_of(op, tensors))
    return [tuple(axis[0] for axis in tensors[i]) for i in program.outputs]


def _model_of(op: tuple, tensors: list[Shape]) -> Shape:
    kind, *args = op
    if kind == "unary":
        return tensors[args[1]]
    if kind == "binary":
        return tuple(_combined(x, y) for x, y in zip(tensors[args[1]], tensors[args[2]], strict=True))
    if kind == "reduce":
        _, src, axes, keepdim = args
        if keepdim:
            return tuple((1, "bcast") if i in axes else a for i, a in enumerate(tensors[src]))
        return tuple(a for i, a in enumerate(tensors[src]) if i not in axes)
    if kind == "broadcast":
        src, sizes, dims = args
        shape = [(1, "bcast") if s == 1 else (s, "expanded") for s in sizes]
        for axis, d in zip(tensors[src], dims, strict=True):
            shape[d] = _broadcast_axis(axis, sizes[d])  # type: ignore[assignment]
        return tuple(shape)
    if kind == "permute":
        return tuple(tensors[args[0]][d] for d in args[1])
    return tuple((s, "one") if s == 1 else (s, "iter") for s in args[1])


# -- building and running -------------------------------------------------------------------
def define_input(fd: FusionDefinition, shape: Sequence[int]):
    return fd.define_tensor(
        shape=[1 if s == 1 else -1 for s in shape],
        contiguity=[None if s == 1 else True for s in shape],
        dtype=DataType.Float,
    )


def build(program: Program) -> FusionDefinition:
    with FusionDefinition() as fd:
        tensors = [define_input(fd, shape) for shape in program.inputs]
        for op in program.ops:
            tensors.append(_apply(fd, op, tensors))
        for i in program.outputs:
            fd.add_output(tensors[i])
    return fd


def _apply(fd: FusionDefinition, op: tuple, tensors: list):
    kind, *args = op
    if kind == "unary":
        return getattr(fd.ops, args[0])(tensors[args[1]])
    if kind == "binary":
        return getattr(fd.ops, args[0])(tensors[args[1]], tensors[args[2]])
    if kind == "reduce":
        name, src, axes, keepdim = args
        return getattr(fd.ops, name)(tensors[src], dims=list(axes), keepdim=keepdim)
    if kind == "broadcast":
        src, shape, dims = args
        return fd.ops.broadcast_in_dim(tensors[src], shape=list(shape), broadcast_dims=list(dims))
    if kind == "permute":
        return fd.ops.permute(tensors[args[0]], list(args[1]))
    src, shape = args
    return fd.ops.reshape(tensors[src], list(shape))


def random_inputs(shapes: Sequence[Sequence[int]], seed: int) -> list[np.ndarray]:
    """Values in +-[0.5, 1.5): never zero, never constant."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in shapes:
        magnitude = rng.uniform(0.5, 1.5, tuple(shape))
        sign = rng.choice(np.array([-1.0, 1.0]), size=tuple(shape))
        arrays.append((magnitude * sign).astype(np.float32))
    return arrays


def unsegmented(fd: FusionDefinition, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    fusion = fd.fusion
    return evaluate_fusion(fusion, bind_args(fusion, convert_inputs(fusion, inputs)))


# -- the properties ----------------------------------------------------------------------------
def check_partition(runtime: FusionKernelRuntime) -> None:
    """1: every tensor expression of the complete fusion is in exactly one group."""
    segmented = runtime.segmented
    count: dict[int, int] = {}
    for group in segmented.groups:
        assert group.exprs, f"g{group.id} is empty"
        for expr in group.exprs:
            assert expr.is_tensor_op(), f"g{group.id} holds {expr}, not a tensor op"
            count[id(expr)] = count.get(id(expr), 0) + 1
    tensor_exprs = [e for e in segmented.complete.exprs() if e.is_tensor_op()]
    for expr in tensor_exprs:
        assert count.get(id(expr)) == 1, f"{expr.to_string()} is in {count.get(id(expr), 0)} groups"
    assert sum(count.values()) == len(tensor_exprs), "a group holds an expression the fusion does not"


def check_order(runtime: FusionKernelRuntime) -> None:
    """2 and 3: ids are run positions, edges go forward, inputs come from before."""
    segmented = runtime.segmented
    groups = segmented.groups
    assert [g.id for g in groups] == list(range(len(groups)))
    for edge in segmented.edges:
        assert edge.producer < edge.consumer, f"edge g{edge.producer} -> g{edge.consumer} goes backwards"
        assert any(tv is edge.val for tv in groups[edge.producer].outputs)
        assert any(tv is edge.val for tv in groups[edge.consumer].inputs)
    available = {id(tv) for tv in segmented.complete.inputs}
    for group in groups:
        for tv in group.inputs:
            assert id(tv) in available, f"g{group.id} reads T{tv.name} before any group makes it"
        available |= {id(tv) for tv in group.outputs}
    for out in segmented.complete.outputs:
        assert id(out) in available, f"output T{out.name} is made by no group"


def check_loop_domains(runtime: FusionKernelRuntime, inputs: Sequence[np.ndarray]) -> None:
    """5: every scheduled group's loops trace to its data, cover it, and inline legally."""
    complete = runtime.segmented.complete
    leaves = leaf_values(complete, bind_args(complete, convert_inputs(complete, inputs)))
    for group in runtime.segmented.groups:
        assert group.fusion is not None, f"g{group.id} was not scheduled"
        ev = bind_leaves(group.fusion, leaves)

        def extent(dim: IterDomain, ev=ev) -> int:
            if dim.is_broadcast and dim.expanded_extent is None:
                return 1
            return int(ev.evaluate(dim.maybe_expanded_extent))

        problems = loop_domain_problems(group.fusion, extent)
        assert problems == [], f"g{group.id} {group.scheduler.value}: {problems}"


def hints_dropped(runtime: FusionKernelRuntime) -> bool:
    """Whether scheduling dropped an inferred allocation hint of the complete fusion."""
    return any(g.record is not None and g.record.dropped_hints for g in runtime.segmented.groups)


def check_schedulers(runtime: FusionKernelRuntime, inputs: Sequence[np.ndarray]) -> None:
    """6: each group's scheduler is the one the registry proposes for it, and it accepts
    the group again, at the same sizes, with the same parameters."""
    segmented = runtime.segmented
    complete = segmented.complete
    info = RuntimeInfo(
        bind_args(complete, convert_inputs(complete, inputs)), runtime.compiled.device, runtime.signature.index_type
    )
    assert sorted(segmented.id_maps) == [g.id for g in segmented.groups]  # one ID map per group
    for group in segmented.groups:
        assert isinstance(group.scheduler, SchedulerType)
        assert group.params.scheduler is group.scheduler
        view = GroupView(group.exprs, group.inputs, group.outputs, segmented.id_maps[group.id])
        assert view.self_mapping is None, f"g{group.id}"
        scheduler = BY_TYPE[group.scheduler]
        assert scheduler.compile_time_check(view) is None, f"g{group.id}"
        assert scheduler.run_time_check(view, info) is None, f"g{group.id}"
        assert scheduler.heuristics(view, info) == group.params, f"g{group.id}"
        proposed, _ = propose(view, info)
        assert proposed is not None and proposed.type == group.scheduler, f"g{group.id}"
    assert segmented.refusal(info) is None


def check_printers(runtime: FusionKernelRuntime) -> None:
    """6: the segmentation prints, every group marked in the IR and in the legend."""
    segmented = runtime.segmented
    presched = print_presched(segmented)
    details = print_segmented_fusion(segmented)
    assert details.endswith("} //Segmented_Fusion\n")
    for group in segmented.groups:
        assert f"// g{group.id} {group.scheduler.value}" in presched
        assert f"  g{group.id} {group.scheduler.value}: " in presched  # the legend
        assert f"group id: {group.id}\n" in details
    assert f"Segments: {len(segmented.groups)} kernel" in presched
    assert print_segmenter_log(segmented).startswith("Segmenter log:")
    if not segmented.is_segmented:
        assert not segmented.edges
        assert not segmented.reasons


def check_values(fd: FusionDefinition, inputs: Sequence[np.ndarray], shapes: Sequence[tuple[int, ...]]) -> None:
    """4: kernel by kernel equals the unsegmented reference, at the shapes the model gives."""
    got = fd.execute(list(inputs))
    want = unsegmented(fd, inputs)
    assert len(got) == len(want) == len(shapes)
    for i, (actual, expected, shape) in enumerate(zip(got, want, shapes, strict=True)):
        assert np.shape(actual) == shape, f"output {i}"
        assert np.shape(expected) == shape, f"output {i}"
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=f"output {i}")


def segmentation_text(runtime: FusionKernelRuntime) -> str:
    segmented = runtime.segmented
    return print_segmenter_log(segmented) + print_presched(segmented) + print_scheduled(runtime, True)


def check_all(program: Program, twice: bool = False) -> FusionKernelRuntime:
    fd = build(program)
    inputs = random_inputs(program.inputs, program.seed)
    runtime = fd.runtime_for(inputs)
    if twice:  # names are deterministic per fusion: so is every decision and its text
        assert segmentation_text(build(program).runtime_for(inputs)) == segmentation_text(runtime)
    check_partition(runtime)
    check_order(runtime)
    check_loop_domains(runtime, inputs)
    check_schedulers(runtime, inputs)
    check_printers(runtime)
    check_values(fd, inputs, expected_shapes(program))
    return runtime


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs())
def test_random_fusions_segment_and_schedule_consistently(program: Program) -> None:
    check_all(program, twice=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(max_ops=8, sizes=(33, 35, 64), ones=False))
def test_random_wide_fusions_segment_and_schedule_consistently(program: Program) -> None:
    """Sizes past a 32-wide tile and a 4-wide vector: other heuristics, and the
    transpose scheduler past its run-time check."""
    check_all(program)


# -- cases worth keeping ----------------------------------------------------------------------
def schedulers_of(runtime: FusionKernelRuntime) -> list[str]:
    return [g.scheduler.value for g in runtime.segmented.groups]


def test_softmax_pattern_is_one_persistent_kernel() -> None:
    program = Program(
        ((5, 7),),
        (
            ("reduce", "max", 0, (1,), False),
            ("broadcast", 1, (5, 7), (0,)),
            ("binary", "sub", 0, 2),
            ("unary", "exp", 3),
            ("reduce", "sum", 4, (1,), True),
            ("broadcast", 5, (5, 7), (0, 1)),
            ("binary", "mul", 4, 6),
        ),
        (7,),
        seed=1,
    )
    assert schedulers_of(check_all(program, twice=True)) == ["inner_persistent"]


def test_reductions_over_different_axes_are_two_kernels_in_order() -> None:
    """x - sum(x, 0) + max(x, 1), each broadcast back: no kernel holds both reductions.
    Each candidate is judged on its own ID map (as nvFuser's segments are), so the max
    with the final add is not one kernel: nothing inside it ties x - sum(x, 0), handed
    in, to the max's reduced axis. The max goes first and hands its broadcast on."""
    program = Program(
        ((5, 7),),
        (
            ("reduce", "sum", 0, (0,), False),
            ("reduce", "max", 0, (1,), False),
            ("broadcast", 1, (5, 7), (1,)),
            ("broadcast", 2, (5, 7), (0,)),
            ("binary", "sub", 0, 3),
            ("binary", "add", 5, 4),
        ),
        (6,),
        seed=2,
    )
    runtime = check_all(program, twice=True)
    segmented = runtime.segmented
    assert schedulers_of(runtime) == ["reduction", "outer_persistent"]
    assert [(e.producer, e.consumer) for e in segmented.edges] == [(0, 1)]
    assert [r.category.value for r in segmented.reasons] == ["reduction axes do not match"]
    assert "not merged with g1: reduction axes do not match" in print_presched(segmented)


def test_chained_reductions_with_outputs_between_them() -> None:
    """A max over axis 0 of a sum over axis 2, broadcast back and subtracted from the
    sum: the sum is its own kernel, handed to the normalization, and is an output too."""
    program = Program(
        ((3, 5, 7),),
        (
            ("reduce", "sum", 0, (2,), False),
            ("reduce", "max", 1, (0,), True),
            ("broadcast", 2, (3, 5), (0, 1)),
            ("binary", "sub", 1, 3),
            ("unary", "tanh", 4),
        ),
        (1, 2, 5),
        seed=3,
    )
    runtime = check_all(program, twice=True)
    assert schedulers_of(runtime) == ["reduction", "outer_persistent"]
    assert [(e.producer, e.consumer, e.val.name) for e in runtime.segmented.edges] == [(0, 1, 1)]


def test_reshape_of_an_expanded_broadcast_beside_a_reduction_of_it() -> None:
    """The reshape kernel alone must find a reference (fixed in IdMap: every axis has
    an exact set before reshape ancestry is read)."""
    program = Program(
        ((5, 3), (5,)),
        (
            ("reduce", "sum", 0, (0,), False),
            ("broadcast", 2, (5, 3), (1,)),
            ("reduce", "sum", 3, (1,), False),
            ("reshape", 3, (15,)),
        ),
        (4, 5),
        seed=4,
    )
    check_all(program, twice=True)


def test_full_reduction_broadcast_back_and_passthrough_outputs() -> None:
    """x / sum(x) over every axis (a rank-0 intermediate), with the input itself and the
    rank-0 sum also returned, and an unused input."""
    with FusionDefinition() as fd:
        t0 = define_input(fd, (5, 7))
        define_input(fd, (3,))
        total = fd.ops.sum(t0, dims=[0, 1])
        scaled = fd.ops.div(t0, fd.ops.broadcast_in_dim(total, shape=[5, 7], broadcast_dims=[]))
        fd.add_output(scaled)
        fd.add_output(total)
        fd.add_output(t0)
        fd.add_output(scaled)
    inputs = random_inputs([(5, 7), (3,)], 5)
    runtime = fd.runtime_for(inputs)
    check_partition(runtime)
    check_order(runtime)
    check_loop_domains(runtime, inputs)
    check_schedulers(runtime, inputs)
    check_printers(runtime)
    got = fd.execute(inputs)
    np.testing.assert_allclose(got[0], inputs[0] / inputs[0].astype(np.float64).sum(), rtol=1e-5)
    np.testing.assert_allclose(got[1], inputs[0].astype(np.float64).sum(), rtol=1e-5)
    np.testing.assert_array_equal(got[2], inputs[0])
    np.testing.assert_array_equal(got[3], got[0])


def test_permuted_operands_go_to_the_transpose_scheduler() -> None:
    program = Program(((33, 35), (35, 33)), (("permute", 1, (1, 0)), ("binary", "add", 0, 2)), (3,), seed=6)
    assert schedulers_of(check_all(program, twice=True)) == ["transpose"]


def test_outer_product_below_a_tile_is_pointwise() -> None:
    program = Program(((31, 1), (1, 31)), (("binary", "add", 0, 1),), (2,), seed=7)
    assert schedulers_of(check_all(program, twice=True)) == ["pointwise"]


@pytest.mark.parametrize(
    "program",
    [
        Program(((32, 1), (1, 32)), (("binary", "add", 0, 1),), (2,), seed=8),
        Program(
            ((64, 64), (64, 64, 64)),
            (("broadcast", 0, (64, 64, 1), (0, 1)), ("binary", "add", 1, 2)),
            (3,),
            seed=9,
        ),
    ],
    ids=["outer-product", "bias-broadcast-along-the-inner-axis"],
)
def test_staged_input_without_the_inner_axis_schedules(program: Program) -> None:
    """Found by the wide property test: an input broadcast along the reference's inner
    axis was staged through shared memory and crashed the tiling; it is not staged."""
    check_all(program)


def test_permuted_output_reduced_drops_its_allocation_hint() -> None:
    """The reduction kernel writes the permuted output in logical order, dropping the
    hint inferred from the input's layout."""
    with FusionDefinition() as fd:
        t0 = define_input(fd, (3, 5))
        t1 = fd.ops.permute(t0, [1, 0])
        fd.add_output(t1)
        fd.add_output(fd.ops.sum(t1, dims=[0]))
    inputs = random_inputs([(3, 5)], 9)
    runtime = fd.runtime_for(inputs)
    assert schedulers_of(runtime) == ["reduction"]
    assert hints_dropped(runtime)
    check_values(fd, inputs, [(5, 3), (3,)])


def test_runtime_accepts_its_own_sizes_after_a_hint_is_dropped() -> None:
    """Found by the property test: inner or outer was read from a hint the kernel then
    dropped, so the runtime refused its own sizes; it now reads the input's layout."""
    with FusionDefinition() as fd:
        t0 = define_input(fd, (3, 5))
        t1 = fd.ops.permute(t0, [1, 0])
        fd.add_output(t1)
        fd.add_output(fd.ops.sum(t1, dims=[0]))
    inputs = random_inputs([(3, 5)], 9)
    runtime = fd.runtime_for(inputs)
    assert runtime.refusal(convert_inputs(runtime.segmented.complete, inputs)) is None


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        (Program(((0, 5),), (("unary", "neg", 0),), (1,), 10), ["no_op"]),
        (Program(((0, 5),), (("reduce", "sum", 0, (0,), False),), (1,), 11), ["reduction"]),
        (
            Program(
                ((5, 0),),
                (
                    ("reduce", "max", 0, (1,), False),
                    ("broadcast", 1, (5, 0), (0,)),
                    ("binary", "sub", 0, 2),
                    ("reduce", "sum", 3, (0,), False),
                ),
                (1, 3, 4),
                12,
            ),
            ["inner_persistent", "no_op"],
        ),
    ],
    ids=["empty-pointwise", "sum-over-empty-axis", "max-over-empty-axis-then-empty-outputs"],
)
def test_empty_tensors(program: Program, expected: list[str]) -> None:
    """Size-0 axes: empty outputs need no kernel; a reduction over an empty axis still
    writes its initial value."""
    assert schedulers_of(check_all(program, twice=True)) == expected


def test_segment_set_splits_where_it_stands() -> None:
    program = Program(
        ((5, 7),),
        (("unary", "exp", 0), ("unary", "segment_set", 1), ("reduce", "sum", 2, (1,), False), ("unary", "neg", 3)),
        (1, 4),
        seed=13,
    )
    runtime = check_all(program, twice=True)
    assert schedulers_of(runtime) == ["pointwise", "reduction"]
    assert [r.category.value for r in runtime.segmented.reasons] == ["segment_set hint"]
