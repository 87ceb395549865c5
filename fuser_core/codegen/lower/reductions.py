"""Layer of `Lowering`: reductions. Accumulation in registers over the reduction's serial
loops (an op's combine or Welford's update), then the block or grid reduction across the
threads and blocks its reduced IDs are bound to, with its shared scratch and global
workspaces."""

from __future__ import annotations

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.compute import Compute
from fuser_core.codegen.lower.elementwise import _cast
from fuser_core.codegen.lower.model import HARDWARE, INDEX, THREADS, Instance
from fuser_core.codegen.simplify import const_value
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import ParallelType
from fuser_core.ir.op_types import BinaryOpType
from fuser_core.ir.tensor_exprs import ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.reduction import MAX_THREADS

MAX_BLOCK_THREADS = 1024
REGISTERS_PER_SM = 65536  # every architecture since Maxwell
# Registers per thread left beside a persistent kernel's arrays, at the least. ptxas on
# sm_90 used 9 to 30 more; where that overflows, a few registers spill, and the occupancy
# the scheduler sized the buffers for still wins (layer norm backward: 256 x 4 blocks at
# 64 registers with 8 bytes spilled ran 243 -> 220 us against 3 resident at 78, H100).
REGISTER_SLACK = 8
REDUCTION_MAX_THREADS = MAX_THREADS  # the reduction schedulers' largest block
_BLOCKS = (ParallelType.BIDx, ParallelType.BIDy, ParallelType.BIDz)


class Reductions(Compute):
    """Emits reductions and sizes what they share."""

    # -- reductions ----------------------------------------------------------------------------
    def _materialize_reduction(
        self, tv: TensorView, expr: ReductionOp | WelfordOp, inst: Instance, number: int
    ) -> None:
        """Accumulate in registers over the reduction's loops, then combine across the
        threads and blocks its reduction IDs are bound to."""
        welford = isinstance(expr, WelfordOp)
        outs = [o for o in expr.outputs if isinstance(o, TensorView)] if welford else [tv]
        self._open_loops(tv, skip_vector=False)
        depth = self.alloc_depth[tv.name]
        size = self._buffer_size(tv)
        names, dtypes = [], []
        for position, out in enumerate(outs):
            name = f"T{out.name}" if number == 0 else f"T{out.name}_{number}"
            dtype = _accumulator(out.dtype)
            init = k.Const(dtype, 0) if welford else self.scalar(expr.init, dtype)  # type: ignore[union-attr]
            if welford and position == 2:
                init = k.Const(dtype, 0)
            self.buffers[(out.name, inst)] = name
            self.buffer_dtypes[name] = dtype
            self._alloc_for(tv, k.Alloc(name, dtype, size, k.Memory.local, init=init))
            names.append(name)
            dtypes.append(dtype)
        if welford:  # the running shifted sum the mean is taken from, and the shift (`_welford_update`)
            total, shift = f"{names[0]}_sum", f"{names[0]}_shift"
            for extra in (total, shift):
                self.buffer_dtypes[extra] = dtypes[0]
                self._alloc_for(tv, k.Alloc(extra, dtypes[0], size, k.Memory.local, init=k.Const(dtypes[0], 0)))
        producer = expr.inputs[0]
        assert isinstance(producer, TensorView)
        self.computing = tv
        p_inst = self.producer_instance(expr, tv, inst, producer)
        slot = self._slot(tv)
        with self._predicated(p_inst.valid):
            value = self.value(producer, p_inst)
            if welford:
                self._welford_update([*names, total, shift], dtypes, slot, value)
            else:
                acc = k.Read(dtypes[0], names[0], slot)
                operand = value if value.dtype == dtypes[0] else _cast(dtypes[0], value)
                self._emit(k.Store(names[0], slot, _combine(expr.op_type, acc, operand)))  # type: ignore[union-attr]
        self.computing = None
        thread_dims = tuple(HARDWARE[d.parallel_type] for d in tv.loop if d.is_reduction and d.parallel_type in THREADS)
        block_dims = tuple(HARDWARE[d.parallel_type] for d in tv.loop if d.is_reduction and d.parallel_type in _BLOCKS)
        if not thread_dims and not block_dims:
            # A serial partial (an rfactor) leaves its loops open: a sibling partial of the
            # same input shares them, and the input's register buffers with them.
            return
        reduce = k.ParallelReduce(
            "welford" if welford else expr.op_type.rule.name,  # type: ignore[union-attr]
            tuple(names),
            k.Const(INDEX, 0),
            tuple(dtypes),
            thread_dims,
            block_dims,
            count=size,
            workspace=tuple(self._reduce_scratch(d, position) for position, d in enumerate(dtypes)),
        )
        if block_dims:
            label = names[0]
            reduce.work = tuple(
                self._workspace(f"work_{n}", d, per_thread=size) for n, d in zip(names, dtypes, strict=True)
            )
            reduce.semaphores = self._workspace(f"sem_{label}", DataType.Int32, per_block=2, zeroed=True)
            reduce.last = k.Var(DataType.Bool, f"last_{label}")
            for hw in block_dims:
                self.grid_last[hw] = reduce
        # Emitted once its loops close: another reduction of the same input may accumulate
        # in them first (sum and max of a row in one pass).
        self.pending_reduces.append((depth, reduce))

    def _welford_update(self, names: list[str], dtypes: list[DataType], slot: k.Node, value: k.Node) -> None:
        """One element into a running (avg, M2, N), with the running sum of x - x0 and x0
        (the thread's first finite element) beside them: the mean is x0 plus that sum over
        the count, and M2 grows by Welford's (x - old mean) * (x - new mean). Shifted by
        x0, a thread's row of one repeated value sums to 0 and has exactly that value for
        its mean (a plain running sum of 21 copies of 7.7 rounded to an ulp off the mean,
        and (x - mean) * rsqrt(var + eps) of a constant gave 4.5e-4, not 0); where the sum is exact
        (integers, short rows of halves) the mean is the exact sum over the count rounded
        once or twice, as torch's and the reference's (the classic `mean += delta / n`
        rounds at every element: a row of integers summing to 0 got the mean 3e-8, not 0,
        and a var_sum divided by it 4e8, not inf). One division per element."""
        avg_t, m2_t, n_t = dtypes
        avg, m2, n, total, shift = (k.Read(d, b, slot) for b, d in zip(names, [*dtypes, avg_t, avg_t], strict=True))
        x = value if value.dtype == avg_t else _cast(avg_t, value)
        count = k.Var(n_t, self._local_name_for(names[2] + "_n"))
        self._emit(k.Define(count, k.Bin(n_t, "+", n, k.Const(n_t, 1))))
        first = k.Bin(
            DataType.Bool,
            "&&",
            k.Bin(DataType.Bool, "==", n, k.Const(n_t, 0)),
            k.Call(DataType.Bool, "isfinite", (x,)),  # an infinite x0 would make every x - x0 NaN
        )
        self._emit(k.Store(names[4], slot, k.Call(avg_t, "where", (first, x, shift))))
        delta = k.Var(avg_t, self._local_name_for(names[0] + "_delta"))
        self._emit(k.Define(delta, k.Bin(avg_t, "-", x, avg)))
        shifted = k.Bin(avg_t, "-", x, k.Read(avg_t, names[4], slot))
        self._emit(k.Store(names[3], slot, k.Bin(avg_t, "+", total, shifted)))
        quotient = k.Bin(avg_t, "/", k.Read(avg_t, names[3], slot), _cast(avg_t, count))
        self._emit(k.Store(names[0], slot, k.Bin(avg_t, "+", k.Read(avg_t, names[4], slot), quotient)))
        after = k.Read(avg_t, names[0], slot)
        self._emit(k.Store(names[1], slot, k.Bin(m2_t, "+", m2, k.Bin(m2_t, "*", delta, k.Bin(avg_t, "-", x, after)))))
        self._emit(k.Store(names[2], slot, count))

    def _local_name_for(self, base: str) -> str:
        count = self.local_names.get(base, 0)
        self.local_names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def _reduce_scratch(self, dtype: DataType, position: int) -> str:
        """Shared scratch for block reductions, one per dtype and buffer position (Welford
        combines three at once), reused by every reduction of the kernel and sized once the
        launch is known (`_size_reduce_scratch`)."""
        alloc = self.reduce_scratch.get((dtype, position))
        if alloc is None:
            suffix = f"_{position}" if position else ""
            alloc = k.Alloc(f"reduce_{dtype.cuda.replace(' ', '_')}{suffix}", dtype, 0, k.Memory.shared)
            self.reduce_scratch[(dtype, position)] = alloc
            self.body.insert(0, alloc)
        return alloc.buffer

    def _min_blocks(self) -> int:
        """The blocks per SM `__launch_bounds__` asks the registers to allow: the
        scheduler's target (fusion.min_blocks_per_sm), lowered to what the kernel's own
        register arrays leave room for, with REGISTER_SLACK registers per thread for
        indices, predicates and temporaries (ptxas may still spill a few bytes of those:
        8 to 12 on layer norm backward's rows, faster than a block fewer per SM)."""
        wanted = self.fusion.min_blocks_per_sm
        if wanted <= 0:
            return 0
        words = _live_register_words(self.body)
        per_thread = -(-(words + REGISTER_SLACK) // 8) * 8  # registers are allocated 8 at a time
        fits = REGISTERS_PER_SM // (max(self._max_threads(), 1) * per_thread)
        return max(1, min(wanted, fits))

    def _max_threads(self) -> int:
        """An upper bound of the block size: the product of the constant thread extents;
        a symbolic one (a persistent kernel's threads per row, the row length over a
        constant batch) is at most what the reduction heuristics ever launch."""
        threads = 1
        for hw in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            padded = [const_value(d.extent) for d in self.launch if d.hardware == hw and d.padded]
            extents = padded or [const_value(d.extent) for d in self.launch if d.hardware == hw]
            if any(e is None for e in extents):
                return REDUCTION_MAX_THREADS if self.reduce_scratch else MAX_BLOCK_THREADS
            threads *= max((int(e) for e in extents), default=1)  # type: ignore[arg-type]
        return min(threads, MAX_BLOCK_THREADS)

    def _size_reduce_scratch(self) -> None:
        threads = self._max_threads()
        for (dtype, _), alloc in self.reduce_scratch.items():
            alloc.size = threads
            self.shared_bytes += threads * dtype.itemsize

    def _workspace(
        self, name: str, dtype: DataType, per_thread: int = 0, per_block: int = 0, zeroed: bool = False
    ) -> str:
        self.workspaces.append(k.Workspace(name, dtype, per_thread, per_block, zeroed))
        return name


def _live_register_words(body: list[k.Stmt]) -> int:
    """The most 32-bit words of register arrays live at once: an array lives from its
    first use to its last, across the whole of any loop it is used in but allocated
    outside (its values carry from one iteration to the next). An inner-outer kernel's
    column sums exist only after its row loop, beside the partials they are combined
    from; counted throughout, they halved its blocks per SM."""
    words: dict[str, int] = {}
    spans: dict[str, list[int]] = {}
    position = 0

    def use(name: str) -> None:
        if name in words:
            span = spans.setdefault(name, [position, position])
            span[1] = position

    def visit(stmts: list[k.Stmt], enclosing: list[tuple[int, set[str]]]) -> None:
        nonlocal position
        for stmt in stmts:
            position += 1
            if isinstance(stmt, k.Alloc):
                if stmt.memory == k.Memory.local:
                    words[stmt.buffer] = -(-stmt.size * stmt.dtype.itemsize // 4)
                    for _, allocated in enclosing:
                        allocated.add(stmt.buffer)
                continue
            names: list[str] = []
            if isinstance(stmt, k.Store):
                names = [stmt.buffer, *k.node_reads(stmt.index), *k.node_reads(stmt.value)]
            elif isinstance(stmt, k.Define):
                names = list(k.node_reads(stmt.value))
            elif isinstance(stmt, k.VectorCopy):
                names = [stmt.dst, stmt.src]
            elif isinstance(stmt, k.ParallelReduce):
                names = list(stmt.buffers)
            elif isinstance(stmt, k.If):
                names = list(k.node_reads(stmt.cond))
            for name in names:
                use(name)
            if isinstance(stmt, k.For):
                start, inside = position, set[str]()
                visit(stmt.body, [*enclosing, (start, inside)])
                for name, span in spans.items():  # used inside, allocated outside: live throughout
                    if name not in inside and span[1] > start and span[0] <= position:
                        span[0], span[1] = min(span[0], start), max(span[1], position)
            elif isinstance(stmt, k.If):
                visit(stmt.then, enclosing)
                visit(stmt.orelse, enclosing)

    visit(body, [])
    events = sorted([(span[0], words[name]) for name, span in spans.items()] +
                    [(span[1] + 1, -words[name]) for name, span in spans.items()])  # fmt: skip
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def _accumulator(dtype: DataType) -> DataType:
    return DataType.Float if dtype.is_reduced_float else dtype


def _combine(op: BinaryOpType, a: k.Node, b: k.Node) -> k.Node:
    rule = op.rule
    if rule.inline:
        return k.Bin(a.dtype, rule.inline, a, b)
    return k.Call(a.dtype, rule.name, (a, b))
