"""Checks several schedulers share: ops no kernel holds, the reference tensor,
reduction signatures, persistence, and whether propagation reaches every tensor."""

from __future__ import annotations

from fuser_core.ir.elementwise import ElementwiseOp, UnaryOp
from fuser_core.ir.op_types import UnaryOpType
from fuser_core.ir.tensor_exprs import BroadcastOp, ExpandOp, downstream_uses
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import RejectCategory, Rejection, SchedulerType, reject
from fuser_core.scheduler.group_view import GroupView
from fuser_core.scheduler.id_map import ancestor_sets, broadcast_conflicts, concrete_sets, reduction_sets
from fuser_core.scheduler.propagation import CannotPropagate, narrowed_tensors, propagation_steps


def expr_eval_rejection(kind: SchedulerType, group: GroupView) -> Rejection | None:
    if group.expr_eval_ops:
        op = group.expr_eval_ops[0]
        return reject(
            kind,
            f"{op.op_name} producing T{op.outputs[0].name} runs through its library (expr_eval), never in a kernel",
            RejectCategory.expr_eval_op,
        )
    return None


def covering_output(group: GroupView, candidates: list[TensorView]) -> TensorView | None:
    """A tensor whose axes (and what they were reshaped or resized from) cover every
    iterating axis of the group: the reference the schedule is made on."""
    key = tuple(id(tv) for tv in candidates)
    if key not in group.references:
        needed: set[int] = set()
        for tv in group.tensors:
            needed |= concrete_sets(group.id_map, tv)
        # Among the covering tensors, the one iterating the most axes itself: a
        # broadcast-shaped output covers its broadcast only through a link, and its loops
        # would have extent 1 there.
        covering = [tv for tv in candidates if needed <= ancestor_sets(group.id_map, tv, group.links)]
        group.references[key] = max(
            covering, key=lambda tv: (len(concrete_sets(group.id_map, tv)), tv.ndim), default=None
        )
    return group.references[key]


def outputs_beyond_reference(group: GroupView, reference: TensorView) -> str | None:
    """An output iterating an axis the reference holds only as a broadcast (covered through
    a broadcast link, not by an axis of its own): the reference's loops run once along it,
    so that output would be written only in part."""
    own = ancestor_sets(group.id_map, reference)
    for tv in group.outputs:
        missing = concrete_sets(group.id_map, tv) - own
        if tv is not reference and missing:
            return (
                f"cannot find reference tensor: T{tv.name} iterates an axis that the reference "
                f"T{reference.name} holds only as a broadcast"
            )
    return None


def uncovered_message(group: GroupView, candidates: list[TensorView]) -> str:
    """Which tensor the best candidate misses, so the reason names something to look at."""
    if not candidates:
        return "cannot find reference tensor: the group has no output"
    best = max(candidates, key=lambda tv: tv.ndim)
    covered = ancestor_sets(group.id_map, best, group.links)
    missed = next(tv for tv in group.tensors if not concrete_sets(group.id_map, tv) <= covered)
    return f"cannot find reference tensor: T{missed.name} iterates axes that T{best.name} does not cover"


def uncovered_numbers(group: GroupView, candidates: list[TensorView]) -> tuple[tuple[str, str], ...]:
    """The two tensors whose iteration domains disagree, as printed: the one iterating
    axes the best candidate reference does not cover, and that candidate."""
    if not candidates:
        return ()
    best = max(candidates, key=lambda tv: tv.ndim)
    covered = ancestor_sets(group.id_map, best, group.links)
    missed = next(tv for tv in group.tensors if not concrete_sets(group.id_map, tv) <= covered)
    return (("iterates", str(missed)), ("reference candidate", str(best)))


def broadcast_rejection(kind: SchedulerType, group: GroupView) -> Rejection | None:
    conflicts = broadcast_conflicts(group.id_map, group.exprs)
    if conflicts:
        return reject(
            kind,
            f"Broadcasting dimension might be broadcasting to multiple sizes ({conflicts[0]})",
            RejectCategory.disjoint_domains,
            (("broadcast axis", str(conflicts[0])),),
        )
    return None


def propagation_rejection(kind: SchedulerType, group: GroupView, reference: TensorView) -> Rejection | None:
    return group.memo(f"propagation T{reference.name}", lambda: _propagation_rejection(kind, group, reference))


def _propagation_rejection(kind: SchedulerType, group: GroupView, reference: TensorView) -> Rejection | None:
    members = {id(e) for e in group.exprs}
    try:
        steps = propagation_steps(reference, lambda e: id(e) in members)
    except CannotPropagate as err:
        return reject(kind, str(err), RejectCategory.disjoint_domains)
    outputs = {id(tv) for tv in group.outputs}
    for tv in narrowed_tensors(steps):
        if id(tv) in outputs:
            return reject(
                kind,
                f"T{tv.name} is written whole, but the reference T{reference.name} iterates only a slice of it",
                RejectCategory.disjoint_domains,
            )
    return None


def reduction_signature_rejection(kind: SchedulerType, group: GroupView) -> Rejection | None:
    """Every reduction of one kernel must reduce the same axes over the same iterations."""
    tvs = group.reduction_tvs()
    first = tvs[0]
    want = (reduction_sets(group.id_map, first), concrete_sets(group.id_map, first))
    for tv in tvs[1:]:
        have = (reduction_sets(group.id_map, tv), concrete_sets(group.id_map, tv))
        if have != want:
            return reject(
                kind,
                f"reductions T{first.name} and T{tv.name} do not reduce the same axes over the same iteration domain",
                RejectCategory.reduction_axes_mismatch,
                (("first reduction", str(first)), ("second reduction", str(tv))),
            )
    return None


def downstream_of_reductions(group: GroupView) -> list[TensorView]:
    """Tensors of the group computed from a reduction's result."""
    return group.memo("downstream", lambda: _downstream(group))


def _downstream(group: GroupView) -> list[TensorView]:
    reductions = {id(e) for e in group.reductions}
    tainted: set[int] = set()
    found: list[TensorView] = []
    for expr in group.exprs:
        is_reduction = id(expr) in reductions
        if not is_reduction and not any(id(v) in tainted for v in expr.inputs):
            continue
        for out in expr.outputs:
            if isinstance(out, TensorView):
                tainted.add(id(out))
                if not is_reduction:
                    found.append(out)
    return found


def needs_persistence(group: GroupView) -> bool:
    """Whether a tensor after a reduction iterates the reduced axes again (normalization),
    a window of them (an add of a slice of the rows a cat of slices summed reads those
    rows again: seed 16 case 973), or axes that a reshape made them from or into (a mean
    over a reshape of x to one axis, added back to x, reads all of x again: seed 17 case
    308)."""
    reduced = group.id_map.overlapping(reduction_sets(group.id_map, group.reduction_tvs()[0]))
    return any(concrete_sets(group.id_map, tv) & reduced for tv in downstream_of_reductions(group))


def persistent_buffers(group: GroupView) -> list[TensorView]:
    """Tensors read both by a reduction path and, after the reduction, again: they must
    stay in registers or shared memory across it."""
    return group.memo("buffers", lambda: _buffers(group))


def projected_buffers(group: GroupView, through_pointwise: bool = False) -> list[TensorView]:
    """The persistent buffers with each one that is a cast of a narrower group input (a
    bf16 row cast to float) replaced by that input: holding the input and casting it again
    where the buffer is read keeps half the bytes (nvFuser's projection of persistent
    buffers to inputs). With `through_pointwise`, also a buffer computed by pointwise ops
    from row inputs of fewer bytes an element and from broadcast ones (layer norm
    backward's (float(x) - mean) * rstd: x, as bf16; mean and rstd are per row), which is
    then computed again where read. The same list where nothing projects."""
    inputs = {id(tv) for tv in group.inputs}
    projected: list[TensorView] = []
    for tv in persistent_buffers(group):
        source = tv
        while id(source) not in inputs and isinstance(source.definition, UnaryOp):
            if source.definition.op_type != UnaryOpType.Cast or not isinstance(source.definition.inputs[0], TensorView):
                break
            source = source.definition.inputs[0]
        held = [source] if id(source) in inputs and source.dtype.itemsize < tv.dtype.itemsize else [tv]
        if held == [tv] and through_pointwise:
            rows = _row_sources(tv, inputs)
            if rows and sum(r.dtype.itemsize for r in rows) < tv.dtype.itemsize:
                held = rows
        for one in held:
            if all(one is not other for other in projected):
                projected.append(one)
    return projected


def _row_sources(tv: TensorView, inputs: set[int]) -> list[TensorView] | None:
    """The group inputs `tv` is computed from by pointwise ops alone, without those reached
    through a broadcast (per-row or per-column values); None where another op (a
    reduction, a random number, a reshape) computes it."""
    rows: list[TensorView] = []
    stack: list[tuple[TensorView, bool]] = [(tv, False)]
    seen: set[tuple[int, bool]] = set()
    while stack:
        current, broadcast = stack.pop()
        if (id(current), broadcast) in seen:
            continue
        seen.add((id(current), broadcast))
        if id(current) in inputs:
            if not broadcast and all(current is not r for r in rows):
                rows.append(current)
            continue
        expr = current.definition
        if isinstance(expr, ElementwiseOp):
            behind = broadcast
        elif isinstance(expr, BroadcastOp | ExpandOp):
            behind = True
        else:
            return None
        stack.extend((i, behind) for i in expr.inputs if isinstance(i, TensorView))
    return rows


class _Reads:
    """Which of a group's tensors a reduction path reads and which are read after a
    reduction: what decides that a row must be kept across a reduction."""

    def __init__(self, group: GroupView) -> None:
        self.after = {id(tv) for tv in downstream_of_reductions(group)}
        self.members = {id(e) for e in group.exprs}
        self.reductions = {id(e) for e in group.reductions}
        self.feeding = _exprs_feeding_reductions(group, self.members, self.reductions)

    def across_a_reduction(self, tv: TensorView) -> bool:
        """Whether `tv` is read both on a path to a reduction and after one."""
        uses = [u for u in tv.uses if id(u) in self.members]
        return any(id(u) in self.feeding for u in uses) and any(id(o) in self.after for u in uses for o in u.outputs)


def read_before_reductions(group: GroupView, tv: TensorView) -> bool:
    """Whether the group reads `tv` on a path to one of its reductions."""
    reads = _reads(group)
    return any(id(u) in reads.feeding for u in tv.uses if id(u) in reads.members)


def read_after_reductions(group: GroupView, tv: TensorView) -> bool:
    """Whether something the group computes from `tv` also reads a reduction's result."""
    reads = _reads(group)
    return any(id(out) in reads.after for _, out in downstream_uses(tv, reads.members))


def _reads(group: GroupView) -> _Reads:
    return group.memo("reads", lambda: _Reads(group))


def _buffers(group: GroupView) -> list[TensorView]:
    reads = _reads(group)
    reduced = set().union(*(reduction_sets(group.id_map, tv) for tv in group.reduction_tvs()))
    buffers = []
    for tv in group.tensors:
        if id(tv) in reads.after or (tv.definition is not None and id(tv.definition) in reads.reductions):
            continue  # a reduction's result is one value per row, not a row to keep
        if not concrete_sets(group.id_map, tv) & reduced:
            # One value per row (RMS norm backward's rstd expanded along the row): read again
            # where used. Held in shared memory, its one value a row was written to one slot
            # and read from all (all-NaN input gradients at 16384 wide).
            continue
        if reads.across_a_reduction(tv):
            buffers.append(tv)
    return buffers


# Transcendental ops: recomputing one per element after a reduction costs more than the
# registers that keep its result (the special-function unit is 1/8 of the FMA rate).
_COSTLY = frozenset(
    UnaryOpType[name]
    for name in ("Exp", "Exp2", "Expm1", "Log", "Log2", "Log10", "Log1p", "Sin", "Cos", "Tan", "Tanh",
                 "Sinh", "Cosh", "Sigmoid", "Erf", "Erfc", "Erfinv", "Erfcinv", "Lgamma")
)  # fmt: skip


def costly_between_reductions(group: GroupView) -> list[TensorView]:
    """Full rows computed from one reduction's result by a transcendental op and read
    both by a later reduction and after it (softmax's exp(x - max), read by the sum and
    by the division): a persistent kernel keeps them rather than computing each element
    twice. They replace the buffer they are computed from, which is dead once they are."""
    return group.memo("costly", lambda: _costly(group))


def _costly(group: GroupView) -> list[TensorView]:
    reads = _reads(group)
    reduced = set().union(*(reduction_sets(group.id_map, tv) for tv in group.reduction_tvs()))
    found = []
    for tv in group.tensors:
        expr = tv.definition
        if id(tv) not in reads.after or not isinstance(expr, UnaryOp) or expr.op_type not in _COSTLY:
            continue
        if not concrete_sets(group.id_map, tv) & reduced:
            continue  # one value per row: nothing to keep
        if reads.across_a_reduction(tv):
            found.append(tv)
    return found


def a_reduction_reads_another(group: GroupView) -> bool:
    """Whether a reduction's result reaches another reduction of the group (softmax's sum
    reads its max)."""
    reads = _reads(group)
    return any(
        id(use) in reads.feeding
        for expr in group.reductions
        for out in expr.outputs
        for use in out.uses
        if id(use) in reads.members
    )


def _exprs_feeding_reductions(group: GroupView, members: set[int], reductions: set[int]) -> set[int]:
    """Expressions of the group whose result reaches a reduction (one backward pass)."""
    feeding: set[int] = set()
    for expr in reversed(group.exprs):
        if id(expr) in reductions or any(
            id(use) in feeding for out in expr.outputs for use in out.uses if id(use) in members
        ):
            feeding.add(id(expr))
    return feeding


def is_inner_reduction(group: GroupView, reduction: TensorView) -> bool:
    """Whether the reduced axes are the innermost in memory: of the largest group input
    that holds them (its layout is how the data really lies; an inferred hint on an
    intermediate is not, and a scheduler may drop it), else of the reduction's input.
    Largest by the axes it iterates: a [N, 1] per-row mean beside x [N, H] is not x."""
    reduced = reduction_sets(group.id_map, reduction)
    holders = [tv for tv in group.inputs if concrete_sets(group.id_map, tv) & reduced]
    source: TensorView = (
        max(holders, key=lambda tv: (sum(not d.is_broadcast for d in tv.logical), tv.ndim))
        if holders
        else reduction.definition.inputs[0]  # type: ignore[union-attr, assignment]
    )
    required = holders and not source.domain.allocation_is_hint  # a hint is dropped by some kernels
    layout = source.domain.maybe_allocation if required else source.logical
    alloc = [d for d in layout if not d.is_broadcast and not d.is_reduction]
    return bool(alloc) and group.id_map.exact(alloc[-1]) in reduced
