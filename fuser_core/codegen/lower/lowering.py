"""The top of `Lowering`: the checks that refuse a schedule, the emission of every
materialized tensor in order, the checks of the result and the `Kernel`; `lower_group`, the
entry point."""

from __future__ import annotations

from collections.abc import Iterator

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.fast_division import use_fast_division
from fuser_core.codegen.lower.grid_groups import group_block_reductions, group_grid_reductions, make_cooperative
from fuser_core.codegen.lower.model import HARDWARE, concrete, loop_var
from fuser_core.codegen.lower.row_groups import group_loop_reductions
from fuser_core.codegen.lower.sibling_nests import merge_sibling_nests
from fuser_core.codegen.lower.stores import Stores
from fuser_core.codegen.simplify import const_value, index_bounds
from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import Resize
from fuser_core.ir.tensor_exprs import ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import TensorView, transforms_between
from fuser_core.scheduler.loop_check import loop_domain_problems

STATIC_SHARED_LIMIT = 48 * 1024  # the most `__shared__` arrays a kernel may declare


class Lowering(Stores):
    """A scheduled group's fusion lowered to one kernel: `Lowering(...).lower()`."""

    # -- emission ----------------------------------------------------------------------------------
    def lower(self) -> k.Kernel:
        with index_bounds() as self.bounds:
            return self._lower()

    def _lower(self) -> k.Kernel:
        problems = loop_domain_problems(self.fusion)
        if problems:  # a kernel from these loops would skip data: refuse it (the group runs on the host)
            raise FuserError(
                f"the schedule's loops do not cover the data ({problems[0]})", op="codegen", tensor=self.name
            )
        for tv in self.materialized:
            for dim in tv.loop:
                c = concrete(dim)
                if c.is_broadcast and not dim.is_broadcast and self.extent(c) != self.extent(dim):
                    raise FuserError(  # its loop would run once, not over the axis
                        f"the schedule's loops do not cover the data (T{tv.name}: {dim} is replayed from {c})",
                        op="codegen",
                        tensor=self.name,
                    )
        for tv in self.outputs:
            shrunk = _shrinking_resize(self, tv)
            if shrunk is not None:  # its loops run over a slice of it: the rest would go unwritten
                raise FuserError(
                    f"the schedule's loops do not cover the data (output T{tv.name} is iterated through {shrunk})",
                    op="codegen",
                    tensor=self.name,
                )
        for tv in self.materialized:
            if isinstance(tv.definition, ReductionOp | WelfordOp) and tv in self.outputs:
                raise FuserError(
                    "a reduction written straight to a fusion output is not generated: the scheduler caches it",
                    op=tv.definition.op_name,
                    tensor=f"T{tv.name}",
                )
            self.hardware_used.update(HARDWARE[d.parallel_type] for d in tv.loop if d.parallel_type in HARDWARE)
        # Every loop's extent is known before any index is built, so all index math folds alike.
        for tv in self.materialized:
            for dim in tv.loop:
                self._bound(loop_var(dim), self.extent(concrete(dim)))
        self.collect_instances()
        for tv in self.materialized:
            for number, inst in enumerate(self.instances.get(tv.name, [])):
                self._materialize(tv, inst, number)
        self._close_loops(0)
        self._finish_guards()
        self._size_reduce_scratch()
        dynamic_shared = _place_in_dynamic_shared_memory(self.body, self.shared_bytes)
        semaphores = {s.semaphores for s in k.walk(self.body) if isinstance(s, k.ParallelReduce)}
        group_block_reductions(self.body)
        why = group_grid_reductions(self.body)
        # A deferred grid reduction arrives with the last one: its semaphore is not needed.
        semaphores -= {s.semaphores for s in k.walk(self.body) if isinstance(s, k.ParallelReduce)}
        self.workspaces = [w for w in self.workspaces if w.name not in semaphores]
        if why is not None:
            # Each grid reduction's last block is found by its own semaphore: a value that
            # combined two of them could be read in a block that is last for one only.
            raise FuserError(
                f"a kernel with two grid reductions is not generated when {why}", op="codegen", tensor=self.name
            )
        unscoped = _unscoped_buffer(self.body, {t.name for t in self.tensor_args})
        if unscoped is not None:
            raise FuserError(
                f"{unscoped} would be read outside the loops that compute it (a reduction's result read "
                "by a tensor computed outside its loops, such as a squeeze of a reduction over "
                "broadcast iteration axes, is not generated yet)",
                op="codegen",
                tensor=self.name,
            )
        # The register budget is read from the nests as emitted, one per tensor, before they merge.
        max_threads = self._max_threads() if self.reduce_scratch else 0
        min_blocks = self._min_blocks() if self.reduce_scratch else 0
        # One wave as scheduled only if the registers still allow the blocks per SM it assumed.
        resident = self.fusion.cooperative_grid and 0 < self.fusion.min_blocks_per_sm <= min_blocks
        cooperative = resident and make_cooperative(self.body)
        globals_ = {t.name for t in self.tensor_args} | {w.name for w in self.workspaces}
        merge_sibling_nests(self.body, globals_, self.same_extent)
        group_loop_reductions(self.body, self.launch, globals_)
        # Last: every check above reads plain `/` and `%`.
        divisors = use_fast_division(self.body) if self.index_type == DataType.Int32 else []
        tensors = [
            k.TensorArg(
                t.name,
                t.dtype,
                t.ndim,
                t.alloc_ndim,
                t.is_output,
                t.fusion_position,
                self.vector_widths.get(t.name, 1),
                t.shape,
            )
            for t in self.tensor_args
        ]
        return k.Kernel(
            self.name,
            tensors,
            self.scalar_args,
            self.body,
            self.launch,
            self.index_type,
            self.shared_bytes,
            vectorized=bool(self.vector_widths),
            workspaces=self.workspaces,
            max_threads=max_threads,
            min_blocks=min_blocks,
            dynamic_shared_bytes=dynamic_shared,
            divisors=divisors,
            cooperative=cooperative,
        )


def _place_in_dynamic_shared_memory(body: list[k.Stmt], shared_bytes: int) -> int:
    """Past the 48 KiB a kernel may declare statically (a persistent row in shared memory),
    its shared arrays are laid out in dynamic shared memory, 16-byte aligned; returns the
    bytes to launch with."""
    if shared_bytes <= STATIC_SHARED_LIMIT:
        return 0
    offset = 0
    for stmt in body:
        if isinstance(stmt, k.Alloc) and stmt.memory == k.Memory.shared:
            stmt.dynamic_offset = offset
            offset += -(-stmt.size * stmt.dtype.itemsize // 16) * 16
    return offset


def _shrinking_resize(lowering: Stores, tv: TensorView) -> Resize | None:
    """A Resize between `tv`'s logical and loop domains that may cut elements off one of its
    iterated axes (a slice's, or widths unknown until run time), or None. Along a broadcast
    axis (an expanded one) there is one element to write, which any window holds."""
    iterated = {id(d) for d in tv.logical if not d.is_broadcast}
    for expr in transforms_between(tv.logical, tv.loop):
        if not any(id(i) in iterated for i in expr.inputs):
            continue
        iterated.update(id(o) for o in expr.outputs)
        if isinstance(expr, Resize):
            widths = [const_value(lowering.scalar(w, DataType.Index)) for w in (expr.left, expr.right)]
            if any(w is None or w < 0 for w in widths):
                return expr
    return None


def _unscoped_buffer(body: list[k.Stmt], globals_: set[str]) -> str | None:
    """The first register or shared buffer read or written outside the scope it is
    allocated in, or None: a lowering that reopened loops past a buffer's must not print."""

    reads = k.node_reads

    def used(stmt: k.Stmt) -> Iterator[str]:
        if isinstance(stmt, k.Store):
            yield stmt.buffer
            yield from reads(stmt.index)
            yield from reads(stmt.value)
        elif isinstance(stmt, k.Define):
            yield from reads(stmt.value)
        elif isinstance(stmt, k.VectorCopy):
            yield from (stmt.dst, stmt.src)
        elif isinstance(stmt, k.ParallelReduce):
            yield from (*stmt.buffers, *stmt.workspace)
        elif isinstance(stmt, k.If):
            yield from reads(stmt.cond)

    def visit(stmts: list[k.Stmt], scope: set[str]) -> str | None:
        scope = set(scope)
        for stmt in stmts:
            if isinstance(stmt, k.Alloc):
                scope.add(stmt.buffer)
                continue
            for name in used(stmt):
                if name not in scope and name not in globals_:
                    return name
            if isinstance(stmt, k.For):
                found = visit(stmt.body, scope)
            elif isinstance(stmt, k.If):
                found = visit(stmt.then, scope) or visit(stmt.orelse, scope)
            else:
                found = None
            if found is not None:
                return found
        return None

    return visit(body, set())


def lower_group(fusion: Fusion, name: str, index_type: DataType, vectorize: bool = True) -> k.Kernel:
    return Lowering(fusion, name, index_type, vectorize).lower()
