"""Recomputing at the cut: a tensor one kernel writes only so that another reads it back
is often a cheap function of fusion inputs (a cast, `(x - mean) * rstd`). Reading those
inputs again in the reader can move fewer bytes than writing the tensor and reading it
back: a float [N, H] crossing the cut costs 4 bytes an element twice, a bf16 input 2.

For each tensor crossing from a producer group P to a consumer group C, after the merges:

1. its chain, the expressions from fusion inputs to it, must all be cheap pointwise
   ones (casts, unary/binary/ternary ops, broadcast, expand);
2. the fusion inputs C would newly read must be fewer bytes than the tensor;
3. the chain is cloned into C (real IR with fresh names, so every expression stays in
   one group), C's uses point at the clone, and a scheduler must still take C, and P
   without what only fed the tensor. Otherwise every change is undone.

nvFuser forwards unary chains off fusion inputs into each consumer for a similar end.
Each offer is recorded (`Recompute`) with its bytes, accepted or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fuser_core.ir.base import Expr, Val
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_exprs import BroadcastOp, ExpandOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.scheduler.base import Rejection, Scheduler
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.registry import propose
from fuser_core.segmenter.segmented_fusion import Recompute

if TYPE_CHECKING:
    from fuser_core.segmenter.finder import SegmentCandidateFinder, _Group

# Ops worth repeating in a reader: elementwise math and broadcasts, computed again per
# element (a transcendental included: these kernels are bound by memory, not math).
# Reductions, RNG, resize/pad/slice/cat, gathers and library ops are not.
CHEAP_OPS: tuple[type, ...] = (UnaryOp, BinaryOp, TernaryOp, BroadcastOp, ExpandOp)


def cheap_chain(tv: TensorView) -> list[Expr] | None:
    """The expressions computing `tv` from fusion inputs, producers first, if all are
    cheap; None otherwise (or if `tv` is itself a fusion input)."""
    if tv.definition is None:
        return None
    ordered: list[Expr] = []
    seen: set[int] = set()

    def visit(val: Val) -> bool:
        expr = val.definition
        if expr is None or not isinstance(val, TensorView) or id(expr) in seen:
            return True  # a fusion input, a scalar (extents stay shared) or done already
        if not _is_cheap(expr):
            return False
        seen.add(id(expr))
        if not all(visit(inp) for inp in expr.inputs):
            return False
        ordered.append(expr)
        return True

    return ordered if visit(tv) else None


def _is_cheap(expr: Expr) -> bool:
    outputs_plain = all(isinstance(v, TensorView) and not v.domain.has_root for v in expr.outputs)
    return isinstance(expr, CHEAP_OPS) and outputs_plain


def chain_sources(chain: list[Expr]) -> list[TensorView]:
    """The fusion input tensors a chain reads, in the order it first reads them."""
    found: dict[int, TensorView] = {}
    for expr in chain:
        for val in expr.inputs:
            if isinstance(val, TensorView) and val.definition is None:
                found.setdefault(id(val), val)
    return list(found.values())


def nbytes(tv: TensorView, info: RuntimeInfo) -> int:
    """Bytes of a tensor's logical elements at these sizes (an expanded axis at its
    expanded extent): what the segmenter counts for a tensor crossing a cut."""
    return info.numel(tv) * tv.dtype.itemsize


class _Edit:
    """Tentative changes to the fusion, with what undoing them needs: the uses and
    definitions of the values touched, the inputs of the expressions rewired, and the
    statement count before the clones."""

    def __init__(self, fusion: Fusion) -> None:
        self.fusion = fusion
        self.mark = fusion.mark()
        self.vals: dict[int, tuple[Val, list[Expr], Expr | None]] = {}
        self.exprs: dict[int, tuple[Expr, list[Val]]] = {}

    def save(self, val: Val) -> None:
        self.vals.setdefault(id(val), (val, list(val.uses), val.definition))

    def replace_input(self, expr: Expr, old: Val, new: Val) -> None:
        self.exprs.setdefault(id(expr), (expr, list(expr.inputs)))
        self.save(old)
        expr.replace_input(old, new)

    def remove(self, expr: Expr) -> None:
        for val in [*expr.inputs, *expr.outputs]:
            self.save(val)
        self.fusion.remove_expr(expr)

    def undo(self) -> None:
        for val, uses, definition in self.vals.values():
            val.uses, val.definition = uses, definition
        for expr, inputs in self.exprs.values():
            expr.inputs = inputs
        self.fusion.discard_since(self.mark)


def _fresh_tv(tv: TensorView) -> TensorView:
    """A tensor like `tv` with a new name and new IterDomains (same extents)."""
    ids = {id(d): d.clone_with() for d in tv.logical}
    allocation = tv.domain.allocation
    if allocation is not None and not all(id(d) in ids for d in allocation):
        allocation = None
    domain = TensorDomain(
        [ids[id(d)] for d in tv.logical],
        allocation=[ids[id(d)] for d in allocation] if allocation is not None else None,
        contiguity=list(tv.domain.contiguity) if allocation is not None or tv.domain.allocation is None else None,
    )
    domain.allocation_is_hint = tv.domain.allocation_is_hint and allocation is not None
    return TensorView(domain, tv.dtype)


def _clone_expr(expr: Expr, inputs: list[Val], outputs: list[Val]) -> Expr:
    """`expr` again on other values. Cheap ops hold only plain attributes besides their
    values (an op type, broadcast flags), so a copy of those and Expr's own constructor
    (which registers the clone and links uses and definitions) make the clone."""
    copy = object.__new__(type(expr))
    for key, value in vars(expr).items():
        if key not in ("inputs", "outputs", "name", "fusion"):
            setattr(copy, key, list(value) if isinstance(value, list) else value)
    Expr.__init__(copy, inputs, outputs, expr.fusion)
    copy.location = expr.location
    return copy


class CutRecomputer:
    """The recompute step of one finder: offers every crossing tensor to its readers."""

    def __init__(self, finder: SegmentCandidateFinder) -> None:
        self.finder = finder
        self.fusion = finder.fusion
        self.info = finder.info
        self.schedulers: tuple[Scheduler, ...] = finder.schedulers
        # (consumer group key, id(original tensor)) -> its clone there, so two chains
        # that share a tensor share its clone too.
        self.clones: dict[tuple[int, int], TensorView] = {}

    def run(self) -> None:
        finder = self.finder
        finder._connect()
        for consumer in finder._levels():
            for tv in self._crossing_into(consumer):
                if consumer.key in finder.groups and self._still_crosses(tv, consumer):
                    self._offer(tv, consumer)

    def _crossing_into(self, group: _Group) -> list[TensorView]:
        owner = self.finder.owner
        found: dict[int, TensorView] = {}
        for expr in group.exprs:
            for val in expr.inputs:
                source = owner.get(id(val.definition)) if val.definition is not None else None
                if isinstance(val, TensorView) and source is not None and source != group.key:
                    found.setdefault(id(val), val)
        return list(found.values())

    def _still_crosses(self, tv: TensorView, group: _Group) -> bool:
        members = {id(e) for e in group.exprs}
        return tv.definition is not None and any(id(use) in members for use in tv.uses)

    def _offer(self, tv: TensorView, consumer: _Group) -> None:
        chain = cheap_chain(tv)
        if chain is None:
            return
        finder = self.finder
        producer = finder.groups[finder.owner[id(tv.definition)]]
        sources = chain_sources(chain)
        reads = finder.inputs_read(consumer)
        new_bytes = sum(nbytes(s, self.info) for s in sources if id(s) not in reads)
        record = Recompute(
            f"T{tv.name}",
            producer.label(),
            consumer.label(),
            tuple(f"T{s.name}" for s in sources),
            new_bytes,
            nbytes(tv, self.info),
            accepted=False,
        )
        if new_bytes >= record.crossing_bytes:
            finder.attempts.append(record.rejected("not cheaper"))
            return
        finder.attempts.append(self._recompute(tv, chain, consumer, record))

    def _recompute(self, tv: TensorView, chain: list[Expr], consumer: _Group, record: Recompute) -> Recompute:
        finder = self.finder
        edit = _Edit(self.fusion)
        for expr in chain:
            for val in [*expr.inputs, *expr.outputs]:
                edit.save(val)
        made: dict[int, TensorView] = {}
        new_exprs = self._clone_chain(chain, consumer.key, made)
        clone = made[id(tv)]
        for expr in consumer.exprs:
            if any(v is tv for v in expr.inputs):
                edit.replace_input(expr, tv, clone)
        dead = self._drop_dead(chain, edit)
        finder._refresh_order()
        contents = self._contents_after(chain, consumer, new_exprs, dead)
        verdicts = {key: self._propose(exprs) for key, exprs in contents.items() if exprs}
        refused = [(key, v[1]) for key, v in verdicts.items() if v[0] is None]
        if refused:
            edit.undo()
            finder._refresh_order()
            key, rejections = next(((k, r) for k, r in refused if k == consumer.key), refused[0])
            who = "the reader" if key == consumer.key else "the writer"
            return record.rejected(f"no scheduler accepts {who} with it", rejections)
        self.clones.update({(consumer.key, k): v for k, v in made.items()})
        self._commit(contents, verdicts)
        scheduler = verdicts[consumer.key][0]
        return record.accepted_as(scheduler.type if scheduler else None, clone)

    def _clone_chain(self, chain: list[Expr], consumer_key: int, made: dict[int, TensorView]) -> list[Expr]:
        """Clones of `chain`'s expressions (those the consumer does not hold a clone of
        already); `made` maps each original tensor to its clone."""
        new_exprs: list[Expr] = []
        with self.fusion.guard():
            for expr in chain:
                outputs = [v for v in expr.outputs if isinstance(v, TensorView)]
                known = [self.clones.get((consumer_key, id(v))) for v in outputs]
                if all(k is not None for k in known):
                    made.update({id(v): k for v, k in zip(outputs, known, strict=True) if k is not None})
                    continue
                inputs: list[Val] = [made.get(id(v), v) for v in expr.inputs]
                fresh = [_fresh_tv(v) for v in outputs]
                made.update({id(v): f for v, f in zip(outputs, fresh, strict=True)})
                new_exprs.append(_clone_expr(expr, inputs, list(fresh)))
        return new_exprs

    def _drop_dead(self, chain: list[Expr], edit: _Edit) -> list[Expr]:
        """Chain expressions nothing uses any more (and no fusion output needs): removed
        from the fusion, consumers first, so their producers may follow."""
        outputs = self.finder.fusion_outputs
        dead: list[Expr] = []
        for expr in reversed(chain):
            if all(not v.uses and id(v) not in outputs for v in expr.outputs):
                edit.remove(expr)
                dead.append(expr)
        return dead

    def _contents_after(
        self, chain: list[Expr], consumer: _Group, new_exprs: list[Expr], dead: list[Expr]
    ) -> dict[int, list[Expr]]:
        """The expressions of each group the change touches: the consumer with the clones,
        and every group that held a chain expression, without the dead ones."""
        finder = self.finder
        gone = {id(e) for e in dead}
        contents = {consumer.key: finder._sorted([*consumer.exprs, *new_exprs])}
        for expr in chain:
            key = finder.owner[id(expr)]
            if key not in contents:
                contents[key] = [e for e in finder.groups[key].exprs if id(e) not in gone]
        return contents

    def _propose(self, exprs: list[Expr]) -> tuple[Scheduler | None, list[Rejection]]:
        return propose(GroupView.of(exprs, self.finder.fusion_outputs), self.info, self.schedulers)

    def _commit(
        self, contents: dict[int, list[Expr]], verdicts: dict[int, tuple[Scheduler | None, list[Rejection]]]
    ) -> None:
        finder = self.finder
        finder._tried.clear()  # uses changed: a cached view may have other outputs now
        for key, exprs in contents.items():
            group = finder.groups[key]
            for expr in group.exprs:
                finder.owner.pop(id(expr), None)
            if not exprs:  # it only computed what its readers now recompute
                del finder.groups[key]
                continue
            group.exprs = exprs
            group.verdict = verdicts[key]
            for expr in exprs:
                finder.owner[id(expr)] = key
        finder._connect()  # other groups keep their verdicts: their outputs did not change
