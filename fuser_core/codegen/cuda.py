"""CUDA C++ from the kernel IR: one printer, of the kernel and of its translation unit.

A translation unit is the index typedef, the runtime header (`codegen.runtime_header`:
the Tensor struct, 16-bit float types, the device functions element-wise ops print as,
block and grid reductions), the random-number header where the kernel draws random
numbers, and the kernel; `cuda_full` prints all of it, `cuda_kernel` the kernel alone.
"""

from __future__ import annotations

import math

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.runtime_header import RNG_HEADER, RUNTIME_HEADER
from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.dtype import DataType

# Ops whose CUDA spelling differs from their printed name, per compute type.
_FLOAT_SUFFIX = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "sqrt", "rsqrt", "erf", "erfc", "lgamma", "floor", "ceil", "nearbyint", "trunc",
    "fmod", "atan2", "pow", "asinh", "acosh", "atanh", "erfinv", "erfcinv", "nextafter",
}  # fmt: skip
_RENAMED = {"fmax": "fuser_fmax", "fmin": "fuser_fmin"}
MAX_UNROLL = 16  # serial loops of a constant extent up to this are unrolled

_STORAGE = {
    DataType.Half: "__half",
    DataType.BFloat16: "__bfloat",
}


def ctype(dtype: DataType) -> str:
    if dtype in (DataType.Float8_e4m3fn, DataType.Float8_e5m2) or dtype.is_complex:
        raise FuserError(f"{dtype!r} has no CUDA code generation yet", op="codegen")
    return _STORAGE.get(dtype, dtype.cuda)


def _call_name(node: k.Call) -> str:
    fn = node.fn
    arg = node.args[-1].dtype if node.args else node.dtype
    if fn == "abs":
        return "fabsf" if arg == DataType.Float else ("fabs" if arg == DataType.Double else "abs")
    if fn == "pow" and arg.is_integral:
        return "fuser_ipow"
    if fn == "remainder" and arg.is_integral:
        return "fuser_iremainder"
    if fn == "fmod" and (arg.is_integral or arg.is_boolean):
        return "fuser_ifmod"
    if fn in _FLOAT_SUFFIX and arg == DataType.Float:
        return fn + "f"
    return _RENAMED.get(fn, fn)


def expr(node: k.Node) -> str:
    if isinstance(node, k.Const):
        return _const(node)
    if isinstance(node, k.Var | k.ScalarParam):
        return node.name
    if isinstance(node, k.TensorField):
        return f"{node.tensor}.{node.field}[{node.axis}]"
    if isinstance(node, k.Bin):
        if node.op in _SHIFTS:
            return f"{_SHIFTS[node.op]}({expr(node.a)}, {expr(node.b)})"
        return f"({expr(node.a)} {node.op} {expr(node.b)})"
    if isinstance(node, k.Un):
        return f"({node.op}{_operand_of_unary(expr(node.a))})"
    if isinstance(node, k.Call):
        # ceilDiv's template takes two types; the others deduce one type from the arguments.
        args = [expr(a) if node.fn == "ceilDiv" else _typed_arg(a) for a in node.args]
        return f"{_call_name(node)}({', '.join(args)})"
    if isinstance(node, k.FastDiv):
        if isinstance(node.divisor, int):
            return f"((nvfuser_index_t)((unsigned)({expr(node.a)}) {node.op} {node.divisor}u))"
        return f"{k.FAST_DIVISION[node.op]}({expr(node.a)}, {node.divisor.name})"
    if isinstance(node, k.Cast):
        return _cast(node.a.dtype, node.dtype, expr(node.a))
    if isinstance(node, k.Read):
        return f"{node.buffer}[{expr(node.index)}]"
    raise TypeError(f"unknown kernel IR expression {node!r}")


def _operand_of_unary(text: str) -> str:
    """A unary operator's operand: a negative literal (`-2`, as a `full` of -2 prints) is
    parenthesized, since `-` before it would read as the decrement `--2`."""
    return f"({text})" if text.startswith("-") else text


# Shifts print as the header's functions, defined for every shift amount.
_SHIFTS = {"<<": "fuser_lshift", ">>": "fuser_rshift"}
# Integer types whose literals C types as `int` whatever the node's type.
_WIDE_INTEGERS = frozenset({DataType.Int, DataType.UInt64, DataType.Index})


def _typed_arg(node: k.Node) -> str:
    """A device function's argument, spelled so that C gives it the node's own type: the
    header's templates deduce their type from the arguments, and a literal `0` is an `int`
    even where the node is an int64_t (`where(c, T0[i], 0)` would match no template)."""
    text = expr(node)
    if not (node.dtype.is_integral or node.dtype.is_boolean) or _c_typed_exactly(node):
        return text
    return f"(({ctype(node.dtype)})({text}))"


def _c_typed_exactly(node: k.Node) -> bool:
    """Whether C types `expr(node)` as `node.dtype` without a cast."""
    if isinstance(node, k.Const):
        return node.dtype not in _WIDE_INTEGERS
    if isinstance(node, k.Var | k.ScalarParam | k.TensorField | k.Read | k.Cast | k.FastDiv):
        return True
    if isinstance(node, k.Bin) and node.op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
        return node.dtype == DataType.Bool
    if isinstance(node, k.Bin | k.Un):  # C's arithmetic conversions: bools become int
        operands = (node.a, node.b) if isinstance(node, k.Bin) else (node.a,)
        return node.dtype != DataType.Bool and all(a.dtype == node.dtype and _c_typed_exactly(a) for a in operands)
    return False


def _const(node: k.Const) -> str:
    value = node.value
    if isinstance(value, bool) or node.dtype == DataType.Bool:
        return "true" if value else "false"
    if node.dtype in _STORAGE:
        convert = "__float2half" if node.dtype == DataType.Half else "__float2bfloat"
        return f"{convert}({_const(k.Const(DataType.Float, value))})"
    if node.dtype.is_floating:
        v = float(value)
        suffix = "f" if node.dtype != DataType.Double else ""
        if math.isnan(v):
            return "FUSER_NAN" if suffix else "FUSER_NAN_D"
        if math.isinf(v):
            inf = "FUSER_INF" if suffix else "FUSER_INF_D"
            return inf if v > 0 else f"(-{inf})"
        return f"{v!r}{suffix}" if "e" in repr(v) or "." in repr(v) else f"{v!r}.0{suffix}"
    iv = int(value)
    if node.dtype in (DataType.Int, DataType.UInt64) and not -(2**31) <= iv < 2**31:
        return f"{iv}LL"
    return str(iv)


def _cast(src: DataType, dst: DataType, text: str) -> str:
    if src == dst:
        return text
    if src in _STORAGE:
        name = "__half2float" if src == DataType.Half else "__bfloat2float"
        return _cast(DataType.Float, dst, f"{name}({text})")
    if dst == DataType.Half and src == DataType.Double:
        # One rounding, as the reference (NumPy) and nvFuser; BFloat16 goes through float,
        # as the reference (ml_dtypes) and torch do.
        return f"__double2half({text})"
    if dst in _STORAGE:
        name = "__float2half" if dst == DataType.Half else "__float2bfloat"
        inner = text if src == DataType.Float else f"(float)({text})"
        return f"{name}({inner})"
    return f"(({ctype(dst)})({text}))"


class _Printer:
    def __init__(self, body: list[k.Stmt] | None = None) -> None:
        self.lines: list[str] = []
        self.registers = {s.buffer for s in k.walk(body or []) if isinstance(s, k.Alloc) and s.memory == k.Memory.local}

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmts(self, stmts: list[k.Stmt], depth: int) -> None:
        for stmt in stmts:
            self.stmt(stmt, depth)

    def stmt(self, stmt: k.Stmt, depth: int) -> None:
        if isinstance(stmt, k.For):
            self._for(stmt, depth)
        elif isinstance(stmt, k.If):
            self.emit(depth, f"if ({expr(stmt.cond)}) {{")
            self.stmts(stmt.then, depth + 1)
            if stmt.orelse:
                self.emit(depth, "} else {")
                self.stmts(stmt.orelse, depth + 1)
            self.emit(depth, "}")
        elif isinstance(stmt, k.Alloc):
            self._alloc(stmt, depth)
        elif isinstance(stmt, k.Define):
            self.emit(depth, f"{ctype(stmt.var.dtype)} {stmt.var.name} = {expr(stmt.value)};")
        elif isinstance(stmt, k.Store):
            self.emit(depth, f"{stmt.buffer}[{expr(stmt.index)}] = {expr(stmt.value)};")
        elif isinstance(stmt, k.VectorCopy):
            dst = f"&{stmt.dst}[{expr(stmt.dst_index)}]"
            src = f"&{stmt.src}[{expr(stmt.src_index)}]"
            copy = "vectorStoreStreaming" if stmt.streaming else "vectorCopy"
            self.emit(depth, f"{copy}<{ctype(stmt.dtype)}, {stmt.width}>({dst}, {src});")
        elif isinstance(stmt, k.Sync):
            self.emit(depth, "__syncthreads();")
        elif isinstance(stmt, k.ParallelReduce):
            self._reduce(stmt, depth)
        else:
            raise TypeError(f"unknown kernel IR statement {stmt!r}")

    def _for(self, loop: k.For, depth: int) -> None:
        name = loop.index.name
        if loop.hardware is not None:
            self.emit(depth, f"{{  // {loop.label}")
            self.emit(depth + 1, f"const nvfuser_index_t {name} = {loop.hardware};")
            if loop.guarded:
                self.emit(depth + 1, f"if ({name} < {expr(loop.extent)}) {{")
                self.stmts(loop.body, depth + 2)
                self.emit(depth + 1, "}")
            else:
                self.stmts(loop.body, depth + 1)
            self.emit(depth, "}")
            return
        constant = isinstance(loop.extent, k.Const) and int(loop.extent.value) <= MAX_UNROLL
        # A serial loop around the scheduler's unrolled axis (a reduction's steps over a
        # static row) stays a loop: the unrolled axis is where the scheduler asked for loads
        # in flight, and unrolling the steps too would hold every step's loads at once
        # (cross-entropy's two steps: 40 -> 52 registers, two blocks an SM, not three).
        stepping = loop.kind == k.LoopKind.serial and constant and _around_unrolled(loop)
        if loop.kind in (k.LoopKind.unroll, k.LoopKind.group, k.LoopKind.vectorize) or (
            loop.kind == k.LoopKind.serial and constant and (not stepping or self._indexes_registers(loop))
        ):
            # Register arrays stay in registers only when every index is a constant.
            self.emit(depth, "#pragma unroll")
        elif loop.kind == k.LoopKind.unswitch or stepping:
            self.emit(depth, "#pragma unroll 1")
        header = f"for (nvfuser_index_t {name} = 0; {name} < {expr(loop.extent)}; ++{name}) {{  // {loop.label}"
        self.emit(depth, header)
        self.stmts(loop.body, depth + 1)
        self.emit(depth, "}")

    def _indexes_registers(self, loop: k.For) -> bool:
        """Whether a register array is indexed by `loop`'s index inside it (then only
        unrolling keeps the array in registers)."""
        name = loop.index.name
        for stmt in k.walk(loop.body):
            if isinstance(stmt, k.ParallelReduce):
                return True  # reads its buffers at `index`: keep the loop unrolled
            for node, buffer in _accesses(stmt):
                if buffer in self.registers and _uses(node, name):
                    return True
                reads = (sub for sub in k.subexpressions(node) if isinstance(sub, k.Read))
                if any(read.buffer in self.registers and _uses(read.index, name) for read in reads):
                    return True
        return False

    def _alloc(self, stmt: k.Alloc, depth: int) -> None:
        t = ctype(stmt.dtype)
        if stmt.memory == k.Memory.shared and stmt.dynamic_offset is not None:
            # every extern __shared__ array starts at the block's dynamic shared memory
            self.emit(depth, f"extern __shared__ __align__(16) char {stmt.buffer}_dynamic[];")
            cast = f"reinterpret_cast<{t}*>({stmt.buffer}_dynamic + {stmt.dynamic_offset})"
            self.emit(depth, f"{t}* __restrict__ {stmt.buffer} = {cast};  // {stmt.size} elements")
            return
        if stmt.memory == k.Memory.shared:
            self.emit(depth, f"__shared__ alignas(16) {t} {stmt.buffer}[{stmt.size}];")
            return
        if stmt.init is not None:
            self.emit(depth, f"alignas(16) {t} {stmt.buffer}[{stmt.size}];")
            value = expr(stmt.init if stmt.init.dtype == stmt.dtype else k.Cast(stmt.dtype, stmt.init))
            self.emit(depth, "#pragma unroll")
            self.emit(depth, f"for (int k = 0; k < {stmt.size}; ++k) {stmt.buffer}[k] = {value};")
            return
        init = " = {}" if stmt.zero else ""
        self.emit(depth, f"alignas(16) {t} {stmt.buffer}[{stmt.size}]{init};")

    def _per_element(self, count: int, statement: str, depth: int) -> None:
        """`statement` for each k of the `count` consecutive elements a reduction combines."""
        self.emit(depth, "#pragma unroll")
        self.emit(depth, f"for (int k = 0; k < {count}; ++k) {{")
        self.emit(depth + 1, statement)
        self.emit(depth, "}")

    def _reduce(self, stmt: k.ParallelReduce, depth: int) -> None:
        threads = ", ".join("true" if f"threadIdx.{a}" in stmt.thread_dims else "false" for a in "xyz")
        at = expr(stmt.index)
        if stmt.op == "welford":
            avg, m2, n = stmt.buffers
            s_avg, s_m2, s_n = stmt.workspace
            if stmt.thread_dims or not stmt.block_dims:
                call = (
                    f"blockWelford<{threads}>({avg}[{at} + k], {m2}[{at} + k], {n}[{at} + k], {s_avg}, {s_m2}, {s_n});"
                )
                self._per_element(stmt.count, call, depth)
            if stmt.block_dims:
                self._grid(stmt, depth)
            return
        (buffer,) = stmt.buffers
        if stmt.joined:  # reduced by the next block reduction's call (paired)
            return
        if stmt.grouped:  # a group loop's rows at once (row_groups.py); with the paired sums too
            first = stmt.paired if stmt.paired is not None else stmt
            pair = "true" if stmt.paired is not None else "false"
            self.emit(
                depth,
                f"blockReduceGroup<{threads}, {stmt.count}, {pair}, {stmt.warps}>(&{first.buffers[0]}"
                f"[{expr(first.index)}], &{buffer}[{at}], {stmt.workspace[0]}, {_op(first)}, {_op(stmt)});",
            )
            return
        if stmt.paired is not None:
            other, other_at = stmt.paired.buffers[0], expr(stmt.paired.index)
            self.emit(
                depth,
                f"blockReducePair<{threads}>({other}[{other_at}], {buffer}[{at}], {stmt.workspace[0]}, "
                f"{_op(stmt.paired)}, {_op(stmt)});",
            )
            return
        if stmt.thread_dims:
            call = f"{buffer}[{at} + k] = blockReduce<{threads}>({buffer}[{at} + k], {stmt.workspace[0]}, {_op(stmt)});"
            self._per_element(stmt.count, call, depth)
        if not stmt.block_dims:
            return
        if stmt.deferred or stmt.combines or stmt.cooperative:
            self._grid(stmt, depth)
            return
        assert stmt.last is not None
        blocks = _blocks(stmt)
        self.emit(depth, f"bool {stmt.last.name};")
        self.emit(
            depth,
            f"gridReduce<{blocks}, {stmt.count}>(&{buffer}[{at}], {stmt.work[0]}, {stmt.semaphores}, {_op(stmt)}, "
            f"{stmt.last.name});",
        )

    def _grid(self, stmt: k.ParallelReduce, depth: int) -> None:
        """A grid reduction in steps: partials stored; arrival in groups of blocks, the last
        of each group folding its group's partials (of this reduction and of the deferred
        ones it groups); arrival of those blocks; in the last of them, the combination."""
        blocks, at = _blocks(stmt), expr(stmt.index)
        for buffer, work in zip(stmt.buffers, stmt.work, strict=True):
            self.emit(depth, f"gridStore<{blocks}, {stmt.count}>(&{buffer}[{at}], {work});")
        if stmt.deferred:
            return
        assert stmt.last is not None
        if stmt.cooperative:
            self._grid_cooperative(stmt, depth)
            return
        group_last = f"{stmt.last.name}_group"
        self.emit(depth, f"bool {stmt.last.name}, {group_last};")
        self.emit(depth, f"gridArriveGroup<{blocks}>({stmt.semaphores}, {group_last});")
        self.emit(depth, f"if ({group_last}) {{")
        for red in (*stmt.combines, stmt):
            self._grid_combine_group(red, depth + 1)
        self.emit(depth, "}")
        self.emit(depth, f"gridArriveTop<{blocks}>({stmt.semaphores}, {group_last}, {stmt.last.name});")
        self.emit(depth, f"if ({stmt.last.name}) {{")
        for red in (*stmt.combines, stmt):
            self._grid_combine(red, depth + 1)
        self.emit(depth, "}")

    def _grid_cooperative(self, stmt: k.ParallelReduce, depth: int) -> None:
        """The arrival and combination of a one-wave grid's reductions (partials stored):
        a grid barrier; each block folds its share of every reduction's partials; the last
        block to finish its share loads the folded values."""
        assert stmt.last is not None
        blocks = _blocks(stmt)
        reductions = (*stmt.combines, stmt)
        self.emit(depth, f"bool {stmt.last.name};")
        self.emit(depth, f"gridSync<{blocks}>({stmt.semaphores});")
        for which, red in enumerate(reductions):
            if red.op == "welford":
                raise InternalError(f"{red.buffers[0]}: a cooperative grid Welford is not generated")
            fold = f"gridFold<{blocks}, {red.count}>({red.work[0]}, {red.workspace[0]}, {_op(red)}, {which});"
            self.emit(depth, fold)
        self.emit(depth, f"gridArriveFolded<{blocks}>({stmt.semaphores}, {stmt.last.name});")
        self.emit(depth, f"if ({stmt.last.name}) {{")
        for red in reductions:
            at = expr(red.index)
            self.emit(depth + 1, f"gridLoadFolded<{blocks}, {red.count}>(&{red.buffers[0]}[{at}], {red.work[0]});")
        self.emit(depth, "}")

    def _grid_combine_group(self, stmt: k.ParallelReduce, depth: int) -> None:
        blocks = _blocks(stmt)
        if stmt.op == "welford":
            self.emit(depth, f"gridWelfordCombineGroup<{blocks}, {stmt.count}>({', '.join(stmt.work)});")
            return
        self.emit(depth, f"gridCombineGroup<{blocks}, {stmt.count}>({stmt.work[0]}, {_op(stmt)});")

    def _grid_combine(self, stmt: k.ParallelReduce, depth: int) -> None:
        blocks, at = _blocks(stmt), expr(stmt.index)
        if stmt.op == "welford":
            values = ", ".join(f"&{b}[{at}]" for b in stmt.buffers)
            self.emit(depth, f"gridWelfordCombine<{blocks}, {stmt.count}>({values}, {', '.join(stmt.work)});")
            return
        (buffer,) = stmt.buffers
        self.emit(depth, f"gridCombine<{blocks}, {stmt.count}>(&{buffer}[{at}], {stmt.work[0]}, {_op(stmt)});")


def _blocks(stmt: k.ParallelReduce) -> str:
    return ", ".join("true" if f"blockIdx.{a}" in stmt.block_dims else "false" for a in "xyz")


def _op(stmt: k.ParallelReduce) -> str:
    """The reduction's combine as a C++ lambda."""
    dtype = stmt.dtypes[0]
    a, b = k.Var(dtype, "a"), k.Var(dtype, "b")
    combined = expr(_reduce_expr(stmt.op, a, b))
    return f"[](const {ctype(dtype)} a, const {ctype(dtype)} b) {{ return {combined}; }}"


def _reduce_expr(op: str, a: k.Node, b: k.Node) -> k.Node:
    """How a reduction's op combines two partial results (the ops' printed names)."""
    if op in ("max", "min"):
        return k.Call(a.dtype, "fmax" if op == "max" else "fmin", (a, b))
    inline = {"add": "+", "mul": "*", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
              "logical_and": "&&", "logical_or": "||"}.get(op)  # fmt: skip
    return k.Bin(a.dtype, inline, a, b) if inline else k.Call(a.dtype, op, (a, b))


def kernel_signature(kernel: k.Kernel) -> str:
    params = [f"Tensor<{ctype(t.dtype)}, {t.ndim}, {t.alloc_ndim}> {t.name}" for t in kernel.tensors]
    params += [f"{ctype(s.dtype)} {s.name}" for s in kernel.scalars]
    params += [f"FastDivisor {d.name}" for d in kernel.divisors]
    params += [f"{ctype(w.dtype)}* {w.name}" for w in kernel.workspaces]
    bounds = ""
    if kernel.max_threads:
        blocks = f", {kernel.min_blocks}" if kernel.min_blocks else ""
        bounds = f"__launch_bounds__({kernel.max_threads}{blocks}) "
    return f'extern "C" __global__ void {bounds}{kernel.name}({", ".join(params)})'


def _around_unrolled(loop: k.For) -> bool:
    return any(
        isinstance(s, k.For)
        and s.kind in (k.LoopKind.unroll, k.LoopKind.group)
        and s.hardware is None
        and isinstance(s.extent, k.Const)
        and int(s.extent.value) > 1
        for s in k.walk(loop.body)
    )


def _accesses(stmt: k.Stmt) -> list[tuple[k.Node, str | None]]:
    """The expressions of a statement, each with the buffer it indexes (None: a value)."""
    if isinstance(stmt, k.Store):
        return [(stmt.index, stmt.buffer), (stmt.value, None)]
    if isinstance(stmt, k.VectorCopy):
        return [(stmt.dst_index, stmt.dst), (stmt.src_index, stmt.src)]
    if isinstance(stmt, k.Define):
        return [(stmt.value, None)]
    if isinstance(stmt, k.If):
        return [(stmt.cond, None)]
    if isinstance(stmt, k.For):
        return [(stmt.extent, None)]
    if isinstance(stmt, k.Alloc) and stmt.init is not None:
        return [(stmt.init, None)]
    return []


def _uses(node: k.Node, var: str) -> bool:
    return any(isinstance(sub, k.Var) and sub.name == var for sub in k.subexpressions(node))


def print_kernel(kernel: k.Kernel) -> str:
    """The kernel function alone (the `cuda_kernel` dump)."""
    printer = _Printer(kernel.body)
    printer.emit(0, kernel_signature(kernel) + " {")
    printer.stmts(kernel.body, 1)
    printer.emit(0, "}")
    return "\n".join(printer.lines) + "\n"


def runtime_prelude(index_type: DataType) -> str:
    """What every kernel's translation unit starts with: integer types, the index type and
    the runtime header (not the RNG's, which only kernels that draw numbers include)."""
    index = "int" if index_type == DataType.Int32 else "long long int"
    return (
        "#ifdef __CUDACC_RTC__\ntypedef long long int int64_t;\ntypedef unsigned long long int uint64_t;\n"
        f"#else\n#include <cstdint>\n#endif\ntypedef {index} nvfuser_index_t;\n{RUNTIME_HEADER}"
    )


def translation_unit(kernel: k.Kernel) -> str:
    """Everything NVRTC (or nvcc) compiles: the `cuda_full` dump."""
    body = print_kernel(kernel)
    rng = RNG_HEADER if "fuser_rng_" in body else ""
    return f"{runtime_prelude(kernel.index_type)}{rng}\n{body}"
