"""The lowering's shared vocabulary: a loop ID's concrete ID and index variable, the
hardware index each parallel type binds, a tensor's coordinate `Instance`, the scopes kernel
IR is emitted into, and small helpers over index expressions."""

from __future__ import annotations

from dataclasses import dataclass, field

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.simplify import add, rebuild
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, ParallelType
from fuser_core.ir.tensor_exprs import WelfordOp
from fuser_core.ir.tensor_view import MemoryType, TensorView
from fuser_core.scheduler.common import MAX_VECTOR_BYTES

INDEX = DataType.Index
HARDWARE = {
    ParallelType.BIDx: "blockIdx.x",
    ParallelType.BIDy: "blockIdx.y",
    ParallelType.BIDz: "blockIdx.z",
    ParallelType.TIDx: "threadIdx.x",
    ParallelType.TIDy: "threadIdx.y",
    ParallelType.TIDz: "threadIdx.z",
}
THREADS = (ParallelType.TIDx, ParallelType.TIDy, ParallelType.TIDz)
LOOP_KIND = {
    ParallelType.Serial: k.LoopKind.serial,
    ParallelType.Unroll: k.LoopKind.unroll,
    ParallelType.Group: k.LoopKind.group,
    ParallelType.Unswitch: k.LoopKind.unswitch,
    ParallelType.Vectorize: k.LoopKind.vectorize,
}

Coords = tuple[k.Node, ...]


@dataclass(frozen=True)
class Instance:
    """One coordinate function of a tensor: its logical coordinates and when they are valid."""

    coords: Coords
    valid: k.Node


TRUE = k.Const(DataType.Bool, True)


def concrete(dim: IterDomain) -> IterDomain:
    while dim.replayed_from is not None:
        dim = dim.replayed_from
    return dim


def padded_size(dim: IterDomain) -> int | None:
    """The constant thread count a loop ID (or the one it was replayed from) is padded to."""
    node: IterDomain | None = dim
    while node is not None:
        if node.padded_to is not None:
            return node.padded_to
        node = node.replayed_from
    return None


def buffer_layout(tv: TensorView) -> list[IterDomain]:
    """The loop IDs a register array or shared tile is laid out by, outermost first: the
    tensor's allocation domain where the schedule made it a permutation of its loop
    domain (nvFuser's allocation domain of a shared buffer), else its loop domain."""
    alloc = tv.domain.allocation
    if alloc is None or tv.memory_type == MemoryType.Global or len(alloc) != len(tv.loop):
        return tv.loop
    loop = {id(d) for d in tv.loop}
    return alloc if all(id(d) in loop for d in alloc) else tv.loop


def loop_var(dim: IterDomain) -> k.Var:
    return k.Var(INDEX, f"i{concrete(dim).name}")


@dataclass
class _Scope:
    body: list[k.Stmt]
    concrete_id: int | None  # name of the concrete loop ID; None for the kernel body
    memo: dict[tuple[int, Instance], k.Node] = field(default_factory=dict)
    # A loop a materialized tensor opened past its compute-at position: its own (its
    # buffer holds every iteration), shared with no other tensor's statements.
    owner: int | None = None


def _loop_vars(node: k.Node) -> set[str]:
    """The loop indices an expression reads (named `i<ID>`)."""
    if isinstance(node, k.Var):
        return {node.name} if node.name.startswith("i") else set()
    if isinstance(node, k.Bin):
        return _loop_vars(node.a) | _loop_vars(node.b)
    if isinstance(node, k.Un | k.Cast):
        return _loop_vars(node.a)
    if isinstance(node, k.Call):
        return set().union(*(_loop_vars(a) for a in node.args)) if node.args else set()
    if isinstance(node, k.Read):
        return _loop_vars(node.index)
    return set()


def _substitute(node: k.Node, subst: dict[str, k.Node]) -> k.Node:
    if isinstance(node, k.Var):
        return subst.get(node.name, node)
    if isinstance(node, k.Bin):
        return rebuild(node, _substitute(node.a, subst), _substitute(node.b, subst))
    if isinstance(node, k.Un):
        return k.Un(node.dtype, node.op, _substitute(node.a, subst))
    if isinstance(node, k.Call):
        return k.Call(node.dtype, node.fn, tuple(_substitute(a, subst) for a in node.args))
    if isinstance(node, k.Cast):
        return k.Cast(node.dtype, _substitute(node.a, subst))
    if isinstance(node, k.Read):
        return k.Read(node.dtype, node.buffer, _substitute(node.index, subst))
    return node


def _primary(tv: TensorView) -> TensorView:
    """A Welford's first output stands for all three (one loop nest computes them)."""
    expr = tv.definition
    if isinstance(expr, WelfordOp):
        first = expr.outputs[0]
        assert isinstance(first, TensorView)
        return first
    return tv


def first_reduction_position(tv: TensorView) -> int:
    """The position of a reduction tensor's first reduction loop (its loop count if none)."""
    return next((p for p, d in enumerate(tv.loop) if d.is_reduction), len(tv.loop))


def read_by_writers(tv: TensorView) -> bool:
    """Whether every consumer of the shared tensor `tv` reads each element in the thread
    that stored it: its threadIdx axes are the consumers' own (the same concrete loop IDs,
    so the same thread index addresses the same slot), and no barrier is needed between
    the store and the reads (nvFuser's rule for a shared-memory RAW sync, simplified)."""
    own = _thread_axes(tv)
    consumers = [out for expr in tv.uses for out in expr.outputs if isinstance(out, TensorView)]
    return bool(own) and bool(consumers) and all(_thread_axes(c) == own for c in consumers)


def _thread_axes(tv: TensorView) -> dict[ParallelType, int]:
    return {d.parallel_type: concrete(d).name for d in tv.loop if d.parallel_type in THREADS}


def copy_width(width: int, dtype: DataType) -> int:
    """Elements one copy of a `width`-wide vector of `dtype` moves (16 bytes at most): the
    alignment its tensor needs at launch is this many elements, not `width`."""
    return max(1, min(width, MAX_VECTOR_BYTES // dtype.itemsize))


def vector_copies(
    dst: str, dst_index: k.Node, src: str, src_index: k.Node, width: int, dtype: DataType, streaming: bool = False
) -> list[k.Stmt]:
    """`width` consecutive elements as copies of 16 bytes at most: a float tensor on the
    loops of a 16-bit one vectorized by 8 (an inner-outer kernel's float column sums beside
    its bf16 rows) is stored as two copies of 4. `streaming`: stores to global memory marked
    evict-first."""
    step = copy_width(width, dtype)
    return [
        k.VectorCopy(
            dst, add(dst_index, k.Const(INDEX, at)), src, add(src_index, k.Const(INDEX, at)), step, dtype, streaming
        )
        for at in range(0, width, step)
    ]
