"""Finding the segments: nvFuser's SegmentCandidateFinder, in our words.

1. The whole fusion first: one kernel if a scheduler takes it (and no segment_set
   hint asks otherwise).
2. Otherwise one group per tensor expression, then rounds of pairwise merges between
   producer/consumer neighbours whose levels (longest path from the inputs) differ by
   one and that no group merged this round is within a level of: merging such pairs
   all at once cannot close a cycle (Herrmann et al., SIAM J. Sci. Comput. 2019). A
   merge is legal only if a scheduler accepts the union at these sizes.
3. A final merge of each producer with a consumer when no other path joins them.
4. Tensors crossing a cut that are cheap functions of fusion inputs are recomputed in
   their readers when that reads fewer bytes (recompute.py).
5. A horizontal merge of groups with no path between them that read a common fusion
   input, when a scheduler takes the union: that input is read once.

Every merge tried is kept with each scheduler's verdict; at the end each pair of
neighbouring groups is explained by a side-effect-free merge test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fuser_core.errors import FuserError
from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_exprs import CatOp, LoadStoreOp, PadOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import RejectCategory, Rejection, Scheduler, SchedulerType, main_category, reject
from fuser_core.scheduler.common import drop_output_hints
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.id_map import IdMap
from fuser_core.scheduler.registry import BY_TYPE, SCHEDULERS, propose
from fuser_core.segmenter.recompute import CutRecomputer
from fuser_core.segmenter.segmented_fusion import (
    MergeAttempt,
    NeighbourReason,
    SegmentedEdge,
    SegmentedFusion,
    SegmentedGroup,
    SegmenterStep,
)


def _initial_groups(exprs: Sequence[Expr]) -> list[list[Expr]]:
    """One group per tensor op, except that a cat starts together with the pads of its
    inputs: a cat reads its pieces through their pads' resizes, so a cut between a pad
    and its cat would hand the cat an unpadded global tensor."""
    cat_of: dict[int, Expr] = {}
    for expr in exprs:
        if isinstance(expr, CatOp):
            for piece in expr.inputs:
                pad = piece.definition
                if isinstance(pad, PadOp) and all(use is expr for use in piece.uses):
                    cat_of[id(pad)] = expr
    members: dict[int, list[Expr]] = {}
    groups: list[list[Expr]] = []
    for expr in exprs:
        if id(expr) in cat_of:
            continue
        members[id(expr)] = [expr]
        groups.append(members[id(expr)])
    for expr in exprs:
        if id(expr) in cat_of:
            members[id(cat_of[id(expr)])].append(expr)
    return groups


@dataclass(eq=False)
class _Group:
    key: int
    exprs: list[Expr]
    merged: bool = False
    level: int = 0
    producers: set[int] = field(default_factory=set)  # keys of neighbouring groups
    consumers: set[int] = field(default_factory=set)
    verdict: tuple[Scheduler | None, list[Rejection]] | None = None

    def label(self) -> str:
        scheduler = self.verdict[0] if self.verdict else None
        name = scheduler.type.value if scheduler is not None else "g"
        return f"{name}{{{', '.join(str(e.name) for e in sorted(self.exprs, key=lambda e: e.name))}}}"


class SegmentCandidateFinder:
    def __init__(
        self,
        fusion: Fusion,
        info: RuntimeInfo,
        exprs: Sequence[Expr] | None = None,
        schedulers: tuple[Scheduler, ...] = SCHEDULERS,
    ) -> None:
        """`exprs` (default: every tensor expression of `fusion`) are the ones to cut, and
        `schedulers` the ones that may take a group: a subset of either asks how the
        segmenter would have cut one group had its own scheduler not been there."""
        self.fusion = fusion
        self.info = info
        self.schedulers = schedulers
        self.exprs = list(exprs) if exprs is not None else [e for e in fusion.exprs() if e.is_tensor_op()]
        self.order = {id(e): i for i, e in enumerate(self.exprs)}
        self.fusion_outputs = {id(v) for v in fusion.outputs}
        self._fusion_inputs = {id(v) for v in fusion.inputs if isinstance(v, TensorView)}
        self.attempts: list[SegmenterStep] = []
        self.groups: dict[int, _Group] = {}
        self.owner: dict[int, int] = {}  # id(expr) -> group key
        self._next_key = 0
        self._tried: dict[frozenset[int], tuple[Scheduler | None, list[Rejection]]] = {}
        self.allow_segmentation = True

    # -- entry point --------------------------------------------------------------------
    def run(self) -> SegmentedFusion:
        if self.fusion.user_scheduled:  # the user scheduled it: one kernel, unsegmented
            group = self._new_group(self.exprs)
            group.verdict = (BY_TYPE[SchedulerType.user], [])
            return self._finish([group], ())
        has_hint = any(_is_segment_hint(e) for e in self.exprs)
        whole = GroupView.of(self.exprs, self.fusion_outputs)
        scheduler, rejections = propose(whole, self.info, self.schedulers)
        if scheduler is not None and not has_hint:
            group = self._new_group(self.exprs)
            group.verdict = (scheduler, rejections)
            return self._finish([group], ())
        if not self.allow_segmentation:
            reasons = "; ".join(r.line() for r in rejections)
            raise FuserError(
                "the fusion does not fit one kernel and segmentation is disabled"
                + (f": {reasons}" if reasons else " (it has a segment_set hint)"),
                op="segment",
            )
        note = "segment_set hint in the fusion" if has_hint and scheduler is not None else ""
        self.attempts.append(
            MergeAttempt(
                "whole fusion", "", False, None, tuple(rejections), main_category(rejections), "whole fusion", note
            )
        )
        for exprs in _initial_groups(self.exprs):
            self._new_group(exprs)
        self._connect()
        self._merge_rounds()
        self._final_merge()
        CutRecomputer(self).run()
        self._horizontal_merge()
        return self._finish(list(self.groups.values()), tuple(rejections))

    def split(self) -> list[tuple[list[Expr], Scheduler | None, list[Rejection]]]:
        """The groups these expressions would be cut into, producers first, each with its
        scheduler (None where no scheduler takes even one expression) and the rejections
        before it. The fusion's own segmentation is untouched."""
        scheduler, rejections = self._try(self.exprs)
        if scheduler is not None:
            return [(self.exprs, scheduler, rejections)]
        for expr in self.exprs:
            self._new_group([expr])
        self._connect()
        self._merge_rounds()
        self._final_merge()
        self._connect()
        return [(g.exprs, *self._verdict(g)) for g in self._levels()]

    # -- groups and edges ---------------------------------------------------------------
    def _new_group(self, exprs: Sequence[Expr]) -> _Group:
        group = _Group(self._next_key, sorted(exprs, key=lambda e: self.order[id(e)]))
        self._next_key += 1
        self.groups[group.key] = group
        for expr in group.exprs:
            self.owner[id(expr)] = group.key
        return group

    def _connect(self) -> None:
        for group in self.groups.values():
            group.producers.clear()
            group.consumers.clear()
        for group in self.groups.values():
            for expr in group.exprs:
                for val in expr.inputs:
                    source = self.owner.get(id(val.definition)) if val.definition is not None else None
                    if source is not None and source != group.key:
                        group.producers.add(source)
                        self.groups[source].consumers.add(group.key)

    def _levels(self) -> list[_Group]:
        """Groups in topological order, each with its longest path from the sources."""
        pending = {k: len(g.producers) for k, g in self.groups.items()}
        ready = sorted((k for k, n in pending.items() if n == 0), key=self._first_expr)
        ordered: list[_Group] = []
        while ready:
            key = ready.pop(0)
            group = self.groups[key]
            group.level = max((self.groups[p].level + 1 for p in group.producers), default=0)
            ordered.append(group)
            for consumer in sorted(group.consumers, key=self._first_expr):
                pending[consumer] -= 1
                if pending[consumer] == 0:
                    ready.append(consumer)
        return ordered

    def _refresh_order(self) -> None:
        """After the fusion changed (recomputation): its tensor expressions, producers first."""
        self.exprs = [e for e in self.fusion.exprs() if e.is_tensor_op()]
        self.order = {id(e): i for i, e in enumerate(self.exprs)}

    def _sorted(self, exprs: Sequence[Expr]) -> list[Expr]:
        return sorted(exprs, key=lambda e: self.order[id(e)])

    def _first_expr(self, key: int) -> int:
        return self.order[id(self.groups[key].exprs[0])]

    # -- merging --------------------------------------------------------------------------
    def _verdict(self, group: _Group) -> tuple[Scheduler | None, list[Rejection]]:
        if group.verdict is None:
            group.verdict = self._try(group.exprs)
        return group.verdict

    def _try(self, exprs: list[Expr]) -> tuple[Scheduler | None, list[Rejection]]:
        key = frozenset(id(e) for e in exprs)
        if key not in self._tried:
            hint = crossed_hint(exprs)
            if hint is not None:
                self._tried[key] = (None, [hint])
            else:
                self._tried[key] = propose(GroupView.of(exprs, self.fusion_outputs), self.info, self.schedulers)
        return self._tried[key]

    def _attempt(self, a: _Group, b: _Group, stage: str) -> bool:
        union = self._sorted([*a.exprs, *b.exprs])
        known = frozenset(id(e) for e in union) in self._tried
        scheduler, rejections = self._try(union)
        accepted = scheduler is not None
        if known and not accepted:
            return False  # tried in an earlier round: the log has it already
        category = None if accepted else main_category(rejections)
        self.attempts.append(
            MergeAttempt(
                a.label(),
                b.label(),
                accepted,
                scheduler.type if scheduler else None,
                tuple(rejections),
                category,
                stage,
            )
        )
        return accepted

    def _merge(self, a: _Group, b: _Group) -> _Group:
        del self.groups[a.key], self.groups[b.key]
        group = self._new_group([*a.exprs, *b.exprs])
        group.merged = True
        return group

    def _merge_rounds(self) -> None:
        while True:
            self._absorb_sources()
            ordered = self._levels()
            for group in ordered:
                self._verdict(group)
            pairs = self._pick_pairs(ordered)
            if not pairs:
                return
            for a, b in pairs:
                self._merge(a, b)
            self._connect()

    def _absorb_sources(self) -> None:
        """A group with no producers (ops on fusion inputs only, such as a weight's
        broadcast) joins a consumer whenever a scheduler accepts: no path can lead back
        into it, so this closes no cycle, unless another of its consumers reaches this
        one. nvFuser gets the same effect by forwarding such ops out of segmentation.
        Without it a large group would take in one such neighbour per round."""
        for key in list(self.groups):
            group = self.groups.get(key)
            if group is None or group.producers:
                continue
            for consumer_key in sorted(group.consumers, key=self._first_expr):
                consumer = self.groups[consumer_key]
                if not self._other_path(group, consumer) and self._attempt(group, consumer, "merge"):
                    self._merge(group, consumer)
                    self._connect()
                    break

    def _pick_pairs(self, ordered: list[_Group]) -> list[tuple[_Group, _Group]]:
        partner: dict[int, _Group] = {}
        pairs: list[tuple[_Group, _Group]] = []
        for group in ordered:
            if group.key in partner or not self._free(group, partner):
                continue
            for other_key in sorted(group.producers | group.consumers, key=self._first_expr):
                other = self.groups[other_key]
                if other.key in partner or abs(other.level - group.level) != 1:
                    continue
                if not self._free_pair(group, other, partner):
                    continue
                if self._attempt(group, other, "merge"):
                    partner[group.key], partner[other.key] = other, group
                    pairs.append((group, other))
                    break
        return pairs

    def _free(self, group: _Group, partner: dict[int, _Group]) -> bool:
        """No neighbour merged this round sits within a level of this group."""
        for key in group.producers | group.consumers:
            if key in partner:
                mate = partner[key]
                if abs(self.groups[key].level - group.level) <= 1 or abs(mate.level - group.level) <= 1:
                    return False
        return True

    def _free_pair(self, group: _Group, other: _Group, partner: dict[int, _Group]) -> bool:
        for key in other.producers | other.consumers:
            if key == group.key or key not in partner:
                continue
            near = (self.groups[key].level, partner[key].level)
            if any(abs(level - group.level) <= 1 or abs(level - other.level) <= 1 for level in near):
                return False
        return True

    def _final_merge(self) -> None:
        changed = True
        while changed:
            changed = False
            for group in self._levels():
                for consumer_key in sorted(group.consumers, key=self._first_expr):
                    consumer = self.groups[consumer_key]
                    if self._other_path(group, consumer):
                        continue
                    if self._attempt(group, consumer, "final merge"):
                        self._merge(group, consumer)
                        self._connect()
                        changed = True
                        break
                if changed:
                    break

    def _horizontal_merge(self) -> None:
        """Groups neither of which reaches the other and that read a common fusion input
        merge when a scheduler takes the union (nvFuser's CombineReductions merges
        reductions of one signature so): no cycle can close, and the input is read once."""
        changed = True
        while changed:
            changed = False
            self._connect()
            ordered = self._levels()
            for group in ordered:
                self._verdict(group)  # for the log's labels
            reads = {g.key: self.inputs_read(g) for g in ordered}
            for i, a in enumerate(ordered):
                for b in ordered[i + 1 :]:
                    if not reads[a.key] & reads[b.key] or self._reaches(a, b) or self._reaches(b, a):
                        continue
                    if self._attempt(a, b, "horizontal merge"):
                        self._merge(a, b)
                        changed = True
                        break
                if changed:
                    break

    def inputs_read(self, group: _Group) -> set[int]:
        """The ids of the fusion's input tensors the group's expressions read."""
        return {id(v) for e in group.exprs for v in e.inputs if id(v) in self._fusion_inputs}

    def _reaches(self, source: _Group, target: _Group) -> bool:
        return target.key in source.consumers or self._other_path(source, target)

    def _other_path(self, source: _Group, target: _Group) -> bool:
        """Whether `target` is reachable from `source` other than by their direct edge."""
        stack = [k for k in source.consumers if k != target.key]
        seen: set[int] = set()
        while stack:
            key = stack.pop()
            if key == target.key:
                return True
            if key in seen:
                continue
            seen.add(key)
            stack.extend(self.groups[key].consumers)
        return False

    # -- the result -----------------------------------------------------------------------
    def _finish(self, groups: list[_Group], whole: tuple[Rejection, ...]) -> SegmentedFusion:
        if len(groups) > 1:
            self._connect()
            groups = self._levels()
        chosen = []
        for group in groups:
            scheduler, _ = self._verdict(group)
            if scheduler is None:
                raise _unschedulable(group)
            view = GroupView.of(group.exprs, self.fusion_outputs)
            # Before any heuristics: a kernel that will not follow the inferred layout of
            # what it writes drops it now, so no kernel sizes itself for a layout that
            # then changes (a consumer reads it, and a cache hit must choose the same).
            drops = drop_output_hints(view.outputs, scheduler.type.value) if scheduler.drops_output_hints else []
            chosen.append((group, scheduler, view, drops))
        result: list[SegmentedGroup] = []
        maps: dict[int, IdMap] = {}
        for position, (group, scheduler, view, drops) in enumerate(chosen):
            maps[position] = view.id_map
            params = scheduler.heuristics(view, self.info)
            segmented_group = SegmentedGroup(
                position, group.exprs, view.inputs, view.outputs, scheduler.type, params, group.merged
            )
            segmented_group.dropped_hints = drops
            result.append(segmented_group)
        segmented = SegmentedFusion(self.fusion, result, _edges(result), self.attempts, whole, id_maps=maps)
        segmented.reasons = self._explain(groups, result)
        return segmented

    def _explain(self, groups: list[_Group], result: list[SegmentedGroup]) -> list[NeighbourReason]:
        position = {g.key: i for i, g in enumerate(groups)}
        reasons = []
        for group in groups:
            for key in sorted(group.consumers, key=lambda k: position[k]):
                reasons.append(self._reason(group, self.groups[key], position))
        if not reasons and len(groups) > 1:  # unconnected groups: explain each pair once
            for i, a in enumerate(groups):
                for b in groups[i + 1 :]:
                    reasons.append(self._reason(a, b, position))
        return reasons

    def _reason(self, a: _Group, b: _Group, position: dict[int, int]) -> NeighbourReason:
        if b.key in a.consumers and self._other_path(a, b):
            summary = "merging them would create a cycle: another kernel lies on a path between them"
            return NeighbourReason(position[a.key], position[b.key], RejectCategory.would_create_cycle, summary)
        union = sorted([*a.exprs, *b.exprs], key=lambda e: self.order[id(e)])
        scheduler, rejections = self._try(union)
        if scheduler is not None:
            summary = (
                f"{scheduler.type.value} accepts the union, but the merge order (level constraint) kept them apart"
            )
            return NeighbourReason(position[a.key], position[b.key], RejectCategory.level_constraint, summary)
        category = main_category(rejections)
        best = min(rejections, key=lambda r: list(RejectCategory).index(r.category))
        summary = f"{category.value}: {best.scheduler.value}: {best.reason}"
        return NeighbourReason(position[a.key], position[b.key], category, summary, tuple(rejections))


def _is_segment_hint(expr: Expr) -> bool:
    return isinstance(expr, LoadStoreOp) and expr.op_type == "SegmenterSet"


def crossed_hint(exprs: list[Expr]) -> Rejection | None:
    """A segment_set's output starts a new segment: no group may hold both the hint and
    a use of its output."""
    members = {id(e) for e in exprs}
    for expr in exprs:
        if _is_segment_hint(expr) and any(id(use) in members for use in expr.output.uses):
            return reject(
                SchedulerType.pointwise,
                f"segment_set T{expr.output.name} asks for a new segment after it",
                RejectCategory.segment_set,
                (("segment_set", f"T{expr.output.name} = segment_set(T{expr.inputs[0].name})"),),
            )
    return None


def _edges(groups: list[SegmentedGroup]) -> list[SegmentedEdge]:
    producer_of: dict[int, int] = {}
    for group in groups:
        for tv in group.outputs:
            producer_of[id(tv)] = group.id
    edges = []
    for group in groups:
        for tv in group.inputs:
            source = producer_of.get(id(tv))
            if source is not None:
                edges.append(SegmentedEdge(source, group.id, tv))
    return sorted(edges, key=lambda e: (e.producer, e.consumer, e.val.name))


def _unschedulable(group: _Group) -> FuserError:
    expr = group.exprs[0]
    reasons = "; ".join(r.line() for r in (group.verdict[1] if group.verdict else []))
    return FuserError(
        f"no scheduler accepts it: {reasons}",
        op=expr.op_name,
        tensor=f"T{expr.outputs[0].name}",
        location=expr.location,
    )


def segment(fusion: Fusion, info: RuntimeInfo, allow_segmentation: bool = True) -> SegmentedFusion:
    """Cut `fusion` into kernels; with `allow_segmentation` False, one kernel or a FuserError."""
    finder = SegmentCandidateFinder(fusion, info)
    finder.allow_segmentation = allow_segmentation
    return finder.run()
