"""The kernel IR: a small loop-nest language between a scheduled group and its CUDA text.

Lowering (`lower/`) builds it from the schedule's loop domains; the CUDA printer
(`cuda.py`) and the CPU interpreter (`interpreter/`) are two readers of the same tree,
so what CI interprets is what the GPU runs. Expressions are frozen dataclasses with
structural equality: equal index math is one value, which is how lowering shares work.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

from fuser_core.ir.dtype import DataType

# -- expressions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    dtype: DataType


@dataclass(frozen=True)
class Const(Node):
    value: int | float | bool


@dataclass(frozen=True)
class Var(Node):
    """A named scalar: a loop index, a hardware index, a local value."""

    name: str


@dataclass(frozen=True)
class TensorField(Node):
    """A run-time fact of a tensor argument: `T0.logical_size[1]`, `T0.alloc_stride[0]`."""

    tensor: str
    field: str  # "logical_size" or "alloc_stride"
    axis: int


@dataclass(frozen=True)
class ScalarParam(Node):
    """A scalar input of the fusion, passed by value."""

    name: str


# Operators printed infix; the interpreter gives each its C meaning.
INFIX = ("+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "&", "|", "^", ">>", "<<")


@dataclass(frozen=True)
class Bin(Node):
    op: str
    a: Node
    b: Node


@dataclass(frozen=True)
class Un(Node):
    op: str  # "-", "!", "~"
    a: Node


@dataclass(frozen=True)
class Call(Node):
    """A device function of the runtime header (`exp`, `fmax`, `where`, `ceilDiv`, ...)."""

    fn: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Cast(Node):
    a: Node


@dataclass(frozen=True)
class FastDiv(Node):
    """`a / divisor.extent` (op "/") or `a % divisor.extent` (op "%") of a non-negative
    32-bit index, as a multiply-high and a shift by the divisor parameter's magic numbers
    (`codegen.magic_division`): a GPU has no integer divider. A constant divisor is
    divided unsigned: NVRTC's own magic numbers, without a signed division's corrections
    for a negative dividend."""

    op: str
    a: Node
    divisor: DivisorArg | int


@dataclass(frozen=True)
class Read(Node):
    """One element of a buffer: a global tensor, a register array or shared memory."""

    buffer: str
    index: Node


# -- statements -----------------------------------------------------------------------


class LoopKind(enum.Enum):
    serial = "serial"
    unroll = "unroll"  # fully unrolled (`#pragma unroll`)
    group = "group"  # unrolled; its block reductions reduce all iterations at once (lower/row_groups.py)
    unswitch = "unswitch"
    vectorize = "vectorize"  # lanes of one vector access, unrolled where not one access
    block = "block"  # bound to blockIdx.*: no loop, one block per index
    thread = "thread"  # bound to threadIdx.*


class Memory(enum.Enum):
    global_ = "global"
    local = "local"
    shared = "shared"


@dataclass
class Stmt:
    pass


@dataclass
class For(Stmt):
    index: Var
    extent: Node
    kind: LoopKind
    body: list[Stmt] = field(default_factory=list)
    hardware: str | None = None  # "blockIdx.x", "threadIdx.x", ... for bound loops
    # A bound loop whose extent is smaller than the launch dimension is predicated.
    guarded: bool = False
    label: str = ""  # the IterDomain it comes from, for the kernel_ir dump


@dataclass
class If(Stmt):
    cond: Node
    then: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] = field(default_factory=list)


@dataclass
class Alloc(Stmt):
    buffer: str
    dtype: DataType
    size: int
    memory: Memory
    zero: bool = False  # zero-filled, so that predicated-off loads read a defined value
    init: Node | None = None  # every element starts as this value (a reduction's initial value)
    # Shared only: its byte offset in the kernel's dynamic shared memory; None: a static array.
    dynamic_offset: int | None = None


@dataclass
class Define(Stmt):
    var: Var
    value: Node


@dataclass
class Store(Stmt):
    buffer: str
    index: Node
    value: Node


@dataclass
class VectorCopy(Stmt):
    """`width` consecutive elements from `src[src_index]` to `dst[dst_index]` in one
    access (16 bytes at most); one side is global memory, the other a register array."""

    dst: str
    dst_index: Node
    src: str
    src_index: Node
    width: int
    dtype: DataType
    streaming: bool = False  # a store to global memory marked evict-first (`st.global.cs`)


@dataclass
class Sync(Stmt):
    pass


# What `ParallelReduce.op` may be: a binary op's printed name, or Welford's triple.
REDUCE_OPS = ("add", "mul", "fmax", "fmin", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor",
              "logical_and", "logical_or", "welford")  # fmt: skip


@dataclass
class ParallelReduce(Stmt):
    """Combine `count` consecutive elements from `index` of each of `buffers` across the
    threads of a block along `thread_dims` (a block reduction) and, when `block_dims` is
    not empty, across the blocks along them (a grid reduction). A block reduction leaves
    the result in every thread of its group (an allreduce). A grid reduction leaves it in
    the last block to arrive, and defines `last` true there; partial results go through
    the global `work` buffers, arrival is counted in `semaphores` (reset by the last
    block). `op` "welford" combines (avg, M2, N) triples held in three buffers; every
    other op combines one buffer. Whole blocks must reach it: it synchronizes."""

    op: str
    buffers: tuple[str, ...]
    index: Node
    dtypes: tuple[DataType, ...]
    thread_dims: tuple[str, ...]
    block_dims: tuple[str, ...] = ()
    count: int = 1
    workspace: tuple[str, ...] = ()  # shared memory, one per buffer
    work: tuple[str, ...] = ()  # global work buffers of a grid reduction, one per buffer
    semaphores: str = ""
    last: Var | None = None
    # Several grid reductions of one kernel arrive once: each but the last stores its
    # partials and is `deferred`; the last arrives and, in its last block, also combines
    # those it lists in `combines` (so one block holds every result, where `last` is true).
    deferred: bool = False
    combines: tuple[ParallelReduce, ...] = ()
    # Two independent block reductions of one scope reduce together (one round of barriers,
    # not two): the earlier one is `joined` (its statement stays, for the interpreter and
    # the dump, and prints nothing); the later one names it as `paired` and prints both.
    joined: bool = False
    paired: ParallelReduce | None = None
    # The rows of a group loop (LoopKind.group), `count` elements reduced in one round of
    # barriers (lower/row_groups.py), not one block reduction per element.
    grouped: bool = False
    warps: int = 0  # blockDim.x / 32 where the launch fixes it (a grouped reduction's template), else 0
    # A grid reduction of a one-wave grid (every block resident at once, the kernel launched
    # cooperatively): the blocks wait for each other at a grid barrier and each folds a share
    # of the partials, instead of the last ones to arrive folding them all. Its result is
    # still in the last block, where `last` is true.
    cooperative: bool = False


# -- the kernel -----------------------------------------------------------------------


@dataclass(frozen=True)
class Workspace:
    """Global scratch memory a grid reduction needs, passed after the scalars: `per_thread`
    elements for every thread of the launch (`per_block` for every block). The runtime
    allocates it; semaphores start zeroed and the kernel leaves them zeroed."""

    name: str
    dtype: DataType
    per_thread: int = 0
    per_block: int = 0
    zeroed: bool = False


@dataclass(frozen=True)
class TensorArg:
    name: str  # "T0"
    dtype: DataType
    ndim: int  # logical axes (no reductions)
    alloc_ndim: int
    is_output: bool
    fusion_position: int  # position among the group fusion's inputs or outputs
    vectorized: int = 1  # widest vector access made on it (alignment checked at launch)
    shape: tuple[Node, ...] = ()  # its logical extents, from the arguments (outputs are allocated so)


@dataclass(frozen=True)
class ScalarArg:
    name: str
    dtype: DataType
    fusion_position: int  # -1 for a run leaf (below)
    # A scalar the run supplies, not the caller: the Philox seed and base offset of
    # unseeded random ops, by the leaf Scalar's name (the same in every group's copy).
    leaf: int | None = None


@dataclass(frozen=True)
class DivisorArg:
    """A run-time extent that 32-bit indices are divided by, passed after the scalars as a
    `FastDivisor` (the extent and its magic numbers, computed on the host from the sizes)."""

    name: str  # "T1_div4"
    extent: Node  # T1.logical_size[4], or a product of extents


# Random draws print as the runtime header's `fuser_rng_<kind>_<suffix>(seed, offset,
# linear index, params...)`; the interpreter reads the kind and dtype back from the name.
RNG_SUFFIX = {DataType.Float: "f32", DataType.Double: "f64", DataType.Half: "f16", DataType.BFloat16: "bf16"}


_RNG_DTYPE = {suffix: dtype for dtype, suffix in RNG_SUFFIX.items()}


def rng_function(kind_value: str, dtype: DataType) -> str | None:
    """The device function drawing `dtype` values of an RNGOp kind ("rng_uniform", ...),
    or None for a dtype with no random draw."""
    suffix = RNG_SUFFIX.get(dtype)
    return None if suffix is None else f"fuser_{kind_value}_{suffix}"


def parse_rng_function(fn: str) -> tuple[str, DataType] | None:
    """(kind value, dtype) of a `rng_function` name; None for any other function."""
    if not fn.startswith("fuser_rng_"):
        return None
    kind_value, _, suffix = fn.removeprefix("fuser_").rpartition("_")
    dtype = _RNG_DTYPE.get(suffix)
    return None if dtype is None else (kind_value, dtype)


@dataclass(frozen=True)
class LaunchDim:
    """The extent one hardware index must cover, as an expression of the arguments."""

    hardware: str  # "blockIdx.x", ...
    extent: Node
    padded: bool = False  # a constant the schedule pads the axis to: it bounds every extent of `hardware`


@dataclass
class Kernel:
    name: str
    tensors: list[TensorArg]
    scalars: list[ScalarArg]
    body: list[Stmt]
    launch: list[LaunchDim]
    index_type: DataType  # Int32 or Int (int64)
    shared_bytes: int = 0  # static and dynamic
    vectorized: bool = False  # whether any VectorCopy is in the body
    workspaces: list[Workspace] = field(default_factory=list)
    max_threads: int = 0  # an upper bound of the block size (`__launch_bounds__`); 0: unknown
    min_blocks: int = 0  # blocks per SM the registers must allow (`__launch_bounds__`' second argument); 0: any
    dynamic_shared_bytes: int = 0  # what the launch asks for (past 48 KiB the function must opt in)
    divisors: list[DivisorArg] = field(default_factory=list)  # of the FastDivs in the body
    cooperative: bool = False  # its grid reductions wait for every block: launched cooperatively

    @property
    def params(self) -> list[TensorArg | ScalarArg]:
        return [*self.tensors, *self.scalars]


def walk(stmts: list[Stmt]) -> Iterator[Stmt]:
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, For):
            yield from walk(stmt.body)
        elif isinstance(stmt, If):
            yield from walk(stmt.then)
            yield from walk(stmt.orelse)


def subexpressions(node: Node) -> Iterator[Node]:
    """`node` and every expression inside it, a read's index included."""
    yield node
    if isinstance(node, Read):
        yield from subexpressions(node.index)
    elif isinstance(node, Bin):
        yield from subexpressions(node.a)
        yield from subexpressions(node.b)
    elif isinstance(node, Un | Cast | FastDiv):
        yield from subexpressions(node.a)
    elif isinstance(node, Call):
        for arg in node.args:
            yield from subexpressions(arg)


def node_reads(node: Node, with_vars: bool = False) -> Iterator[str]:
    """The buffers an expression reads (and, with `with_vars`, the variables it uses)."""
    for sub in subexpressions(node):
        if isinstance(sub, Read):
            yield sub.buffer
        elif with_vars and isinstance(sub, Var):
            yield sub.name


# -- the kernel_ir dump ---------------------------------------------------------------

# How a FastDiv prints, in the dump and in CUDA (the runtime header's device functions).
FAST_DIVISION = {"/": "fastDiv", "%": "fastMod"}


def expr_text(node: Node) -> str:
    if isinstance(node, Const):
        if isinstance(node.value, bool):
            return "true" if node.value else "false"
        return repr(node.value)
    if isinstance(node, Var):
        return node.name
    if isinstance(node, ScalarParam):
        return node.name
    if isinstance(node, TensorField):
        return f"{node.tensor}.{node.field}[{node.axis}]"
    if isinstance(node, Bin):
        return f"({expr_text(node.a)} {node.op} {expr_text(node.b)})"
    if isinstance(node, Un):
        operand = expr_text(node.a)  # `--2` would read as a decrement
        return f"{node.op}({operand})" if operand.startswith("-") else f"{node.op}{operand}"
    if isinstance(node, Call):
        return f"{node.fn}({', '.join(expr_text(a) for a in node.args)})"
    if isinstance(node, FastDiv):
        if isinstance(node.divisor, int):
            return f"(unsigned){expr_text(node.a)} {node.op} {node.divisor}u"
        return f"{FAST_DIVISION[node.op]}({expr_text(node.a)}, {node.divisor.name})"
    if isinstance(node, Cast):
        return f"({node.dtype.cuda}) {expr_text(node.a)}"
    if isinstance(node, Read):
        return f"{node.buffer}[{expr_text(node.index)}]"
    raise TypeError(f"unknown kernel IR expression {node!r}")


def print_kernel_ir(kernel: Kernel) -> str:
    lines = [f"%kernel {kernel.name} {{"]
    for t in kernel.tensors:
        role = "output" if t.is_output else "input"
        lines.append(f"  {role} {t.name}: {t.dtype.cuda}[{t.ndim} axes, {t.alloc_ndim} allocated]")
    for s in kernel.scalars:
        lines.append(f"  scalar {s.name}: {s.dtype.cuda}")
    for d in kernel.divisors:
        lines.append(f"  divisor {d.name} = {expr_text(d.extent)}")
    for dim in kernel.launch:
        lines.append(f"  launch {dim.hardware} = {expr_text(dim.extent)}")
    for w in kernel.workspaces:
        per = f"{w.per_thread} per thread" if w.per_thread else f"{w.per_block} per block"
        lines.append(f"  workspace {w.name}: {w.dtype.cuda}[{per}]{' zeroed' if w.zeroed else ''}")
    lines.append(f"  index type: {kernel.index_type.cuda}")
    _stmts(kernel.body, 1, lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _stmts(stmts: list[Stmt], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    for stmt in stmts:
        if isinstance(stmt, For):
            if stmt.hardware is not None:
                guard = f" if {stmt.index.name} < {expr_text(stmt.extent)}" if stmt.guarded else ""
                lines.append(f"{pad}PARALLEL {stmt.index.name} = {stmt.hardware}{guard}  // {stmt.label}")
            else:
                lines.append(
                    f"{pad}FOR {stmt.index.name} in 0 .. {expr_text(stmt.extent)} ({stmt.kind.value})  // {stmt.label}"
                )
            _stmts(stmt.body, depth + 1, lines)
        elif isinstance(stmt, If):
            lines.append(f"{pad}IF {expr_text(stmt.cond)}:")
            _stmts(stmt.then, depth + 1, lines)
            if stmt.orelse:
                lines.append(f"{pad}ELSE:")
                _stmts(stmt.orelse, depth + 1, lines)
        elif isinstance(stmt, Alloc):
            zero = f" = {expr_text(stmt.init)}" if stmt.init is not None else " = 0" if stmt.zero else ""
            lines.append(f"{pad}ALLOCATE {stmt.buffer}: {stmt.dtype.cuda}[{stmt.size}] {stmt.memory.value}{zero}")
        elif isinstance(stmt, Define):
            lines.append(f"{pad}{stmt.var.dtype.cuda} {stmt.var.name} = {expr_text(stmt.value)}")
        elif isinstance(stmt, Store):
            lines.append(f"{pad}{stmt.buffer}[{expr_text(stmt.index)}] = {expr_text(stmt.value)}")
        elif isinstance(stmt, VectorCopy):
            lines.append(
                f"{pad}VECTOR x{stmt.width} {stmt.dst}[{expr_text(stmt.dst_index)}] = "
                f"{stmt.src}[{expr_text(stmt.src_index)}]{' (evict-first)' if stmt.streaming else ''}"
            )
        elif isinstance(stmt, Sync):
            lines.append(f"{pad}SYNC threads")
        elif isinstance(stmt, ParallelReduce):
            where = ", ".join((*stmt.thread_dims, *stmt.block_dims))
            span = f"[{expr_text(stmt.index)}]" if stmt.count == 1 else f"[{expr_text(stmt.index)} +: {stmt.count}]"
            kind = "GRID" if stmt.block_dims else "BLOCK"
            last = f" -> {stmt.last.name}" if stmt.last is not None else ""
            if stmt.deferred:
                last = " (combined by a later grid reduction)"
            elif stmt.combines:
                last += f" (also combines {', '.join(r.buffers[0] for r in stmt.combines)})"
            if stmt.joined:
                last += " (reduced with the next block reduction)"
            elif stmt.paired is not None:
                last += f" (together with {stmt.paired.buffers[0]})"
            if stmt.grouped:
                last += " (a group loop's rows at once)"
            if stmt.cooperative:
                last += " (folded by every block after a grid barrier)"
            lines.append(f"{pad}{kind} REDUCE {stmt.op} {', '.join(stmt.buffers)}{span} over {where}{last}")
        else:
            raise TypeError(f"unknown kernel IR statement {stmt!r}")
