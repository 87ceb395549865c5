"""Layer of `Lowering`: the loop nest. A tensor's loops (reusing the open ones it shares
with its producers and consumers), loops bound to blockIdx/threadIdx and the launch
dimensions they ask for, and the scopes statements and buffers are emitted into."""

from __future__ import annotations

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.arguments import Arguments
from fuser_core.codegen.lower.model import (
    HARDWARE,
    INDEX,
    LOOP_KIND,
    _Scope,
    concrete,
    first_reduction_position,
    loop_var,
    padded_size,
)
from fuser_core.codegen.simplify import const_value
from fuser_core.ir.iter_domain import IterDomain, ParallelType, Resize
from fuser_core.ir.tensor_exprs import ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import TensorView, tensors_of, transforms_between

SERIAL_TYPES = (ParallelType.Serial, ParallelType.Unroll, ParallelType.Group)


class Loops(Arguments):
    """Opens loops and emits statements into the innermost scope."""

    _any_resize: bool | None = None

    # -- loops ---------------------------------------------------------------------------
    def _open_loops(self, tv: TensorView, skip_vector: bool) -> None:
        """Reuse the open loops this tensor shares with its producers and consumers (its
        first max(ca_pos, produce_pos) loop IDs, in order; open loops over IDs it does
        not have, its broadcasts, are stayed in), then open its own loops."""
        # Loops before ca_pos are its consumers' (shared with any sibling producer emitted
        # before it); past that, only those its materialized producers need.
        cap = max(min(tv.compute_at_pos, len(tv.loop)), self._reuse_cap(tv))
        if skip_vector and tv.loop and tv.loop[-1].parallel_type == ParallelType.Vectorize:
            # The lanes of a vector access are its own loop: an open loop left over the same
            # ID (an earlier store's) would run the whole access once per lane.
            cap = min(cap, len(tv.loop) - 1)
        wanted = [concrete(d).name for d in tv.loop]
        matched, keep = 0, 0
        depth_of: dict[int, int] = {}
        owner = id(tv.definition)
        for depth in range(1, len(self.stack)):
            cid = self.stack[depth].concrete_id
            if self.stack[depth].owner not in (None, owner):
                break  # another tensor's own loop (past its compute-at position): not shared
            if matched < cap and cid == wanted[matched]:
                depth_of[matched] = depth
                matched += 1
                keep = depth
            elif cid not in wanted and matched < cap:
                loop = self.stack[depth - 1].body[-1]
                if isinstance(loop, k.For) and loop.hardware is not None:
                    keep = depth
                elif isinstance(loop, k.For) and const_value(loop.extent) != 1:
                    # a serial loop over an ID it does not have runs it more than once:
                    # nothing inside it is this tensor's (a reduction's serial loops around
                    # an output that only its expanded sibling iterates)
                    break
            else:
                break
        self._close_loops(keep)
        for pos in range(matched, len(tv.loop)):
            dim = tv.loop[pos]
            if skip_vector and dim.parallel_type == ParallelType.Vectorize and pos == len(tv.loop) - 1:
                break
            # Past the loops it shares, a serial broadcast axis holds one value: one
            # iteration, not the extent its concrete axis has (layer norm backward's [N, 1]
            # rstd was loaded 16 times a row, once per element of the thread's batch).
            # (Not beside a Resize: a pad's check may fail at the first iteration only.)
            single = pos >= cap and dim.is_broadcast and dim.parallel_type in SERIAL_TYPES and not self._resized()
            self._open(dim, single=single)
            depth_of[pos] = len(self.stack) - 1
            if pos >= tv.compute_at_pos and tv in self.materialized and tv not in self.outputs:
                self.stack[-1].owner = owner
        ca = tv.compute_at_pos
        if isinstance(tv.definition, ReductionOp | WelfordOp):
            # A partial result lives inside the iteration loops before the reduction's, and
            # outside all of the reduction's loops (an outer reduction not split by an
            # rfactor has its thread and vector iteration loops inside its serial ones).
            ca = first_reduction_position(tv)
            # Nor inside the loops of its broadcast axes (each one iteration, or a hardware
            # index): a squeeze of the result, computed without them, reads it outside.
            while ca > 0 and tv.loop[ca - 1].is_broadcast and self._one_pass(depth_of.get(ca - 1)):
                ca -= 1
        self.alloc_depth[tv.name] = depth_of.get(ca - 1, len(self.stack) - 1) if ca > 0 else 0

    def _one_pass(self, depth: int | None) -> bool:
        """Whether the loop opened at stack `depth` runs its body once per thread: a block
        or thread index, or a serial loop of one iteration."""
        if depth is None or depth < 1:
            return False
        loop = self.stack[depth - 1].body[-1]
        return isinstance(loop, k.For) and (loop.hardware is not None or const_value(loop.extent) == 1)

    def _resized(self) -> bool:
        """Whether any tensor of the kernel, inlined ones too (a pad of the [N, 1] input
        itself), is padded, sliced or concatenated: a Resize between its root and loop
        domains."""
        if self._any_resize is None:
            self._any_resize = any(
                isinstance(t, Resize)
                for tv in tensors_of(self.fusion.exprs())
                for t in transforms_between(tv.domain.maybe_root, tv.loop)
            )
        return self._any_resize

    def _reuse_cap(self, tv: TensorView) -> int:
        """How many of the tensor's loops it must share with what was emitted before it:
        those its materialized producers are computed in (their ca_pos, in this tensor's
        positions), since their buffers hold one iteration of those loops. Its other
        loops are its own, so all of a thread's loads are issued before the first use."""
        positions = {concrete(d).name: p for p, d in enumerate(tv.loop)}
        cap = 0
        stack = [v for v in (tv.definition.inputs if tv.definition else []) if isinstance(v, TensorView)]
        seen: set[int] = set()
        while stack:
            producer = stack.pop()
            if producer.name in seen or producer.definition is None:
                continue
            seen.add(producer.name)
            if producer in self.materialized and producer not in self.outputs:
                ca = producer.compute_at_pos
                if ca > 0:
                    cap = max(cap, positions.get(concrete(producer.loop[ca - 1]).name, -1) + 1)
                continue
            stack.extend(v for v in producer.definition.inputs if isinstance(v, TensorView))
        return min(cap, len(tv.loop))

    def _close_loops(self, keep: int) -> None:
        """Close the scopes past `keep`; a block or grid reduction waiting for the loops it
        follows to close (`pending_reduces`) is emitted after them."""
        waiting = []
        for depth, reduce in self.pending_reduces:
            if depth >= keep:
                self.stack[depth].body.append(reduce)
            else:
                waiting.append((depth, reduce))
        self.pending_reduces = waiting
        del self.stack[keep + 1 :]

    def _open(self, dim: IterDomain, single: bool = False) -> None:
        c = concrete(dim)
        extent = k.Const(INDEX, 1) if single else self.extent(c)
        hardware = HARDWARE.get(dim.parallel_type)
        kind = LOOP_KIND.get(dim.parallel_type, k.LoopKind.serial)
        if hardware is not None:
            kind = k.LoopKind.block if hardware.startswith("block") else k.LoopKind.thread
            self._launch_dim(hardware, extent)
            padded = padded_size(dim)
            if padded is not None:  # a warp-multiple block: the lanes past the extent are guarded
                self._launch_dim(hardware, k.Const(INDEX, padded), padded=True)
        elif kind == k.LoopKind.vectorize and not self.vectorize:
            kind = k.LoopKind.unroll
        loop = k.For(loop_var(dim), extent, kind, hardware=hardware, label=c.to_string())
        if not single:  # the index is shared with the other loops over the ID: keep their bound
            self._bound(loop.index, extent)
        self.stack[-1].body.append(loop)
        # A single iteration is this tensor's alone: no consumer may reuse it as the loop over c.
        self.stack.append(_Scope(loop.body, ~c.name if single else c.name))

    def _bound(self, index: k.Var, extent: k.Node) -> None:
        value = const_value(extent)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.bounds[index.name] = value

    def _launch_dim(self, hardware: str, extent: k.Node, padded: bool = False) -> None:
        if not any(d.hardware == hardware and d.extent == extent for d in self.launch):
            self.launch.append(k.LaunchDim(hardware, extent, padded))

    def _finish_guards(self) -> None:
        """A bound loop narrower than its launch dimension is predicated."""
        by_hw: dict[str, int] = {}
        for dim in self.launch:
            by_hw[dim.hardware] = by_hw.get(dim.hardware, 0) + 1
        for stmt in k.walk(self.body):
            if isinstance(stmt, k.For) and stmt.hardware is not None:
                stmt.guarded = by_hw.get(stmt.hardware, 0) > 1

    def _emit(self, stmt: k.Stmt) -> None:
        self.stack[-1].body.append(stmt)

    def _alloc_for(self, tv: TensorView, stmt: k.Alloc) -> None:
        """A buffer goes to the top of the scope inside the loops it shares (ca_pos)."""
        scope = self.stack[self.alloc_depth[tv.name]].body
        scope.insert(0, stmt)
        self.alloc_scopes[stmt.buffer] = scope

    def _in_scope(self, buffer: str) -> bool:
        """Whether a register buffer's allocation encloses what is emitted now: a loop nest
        reopened after its own was closed (a second reduction's, an output written after a
        reduction) does not see the buffers of the first."""
        scope = self.alloc_scopes.get(buffer)
        return scope is None or any(s.body is scope for s in self.stack)
