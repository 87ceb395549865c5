"""Questions asked of the segmenter after a run, without changing it.

`explain_merge` tries the merge of two groups of a segmented fusion now: every
scheduler's verdict on their union in priority order (not only those before the first
that accepts), the figures behind each rejection, the cycle the merge would close, the
segment_set hint it would cross, and the tensors it would keep out of global memory.

`explain_split` asks the converse of one group: had its scheduler not been there, would
a scheduler below it take the group whole, and if not, how would the segmenter have cut
it (the same finder, on the group's expressions, without that scheduler)?

Both return plain data with a `lines()` printer; nothing here prints or renders.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from fuser_core.errors import FuserError
from fuser_core.ir.base import Expr
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.aliases import aliased_input
from fuser_core.scheduler.base import RejectCategory, Rejection, Scheduler, SchedulerType, main_category
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.registry import BY_TYPE, SCHEDULERS, verdict
from fuser_core.segmenter.finder import SegmentCandidateFinder, crossed_hint
from fuser_core.segmenter.recompute import nbytes
from fuser_core.segmenter.segmented_fusion import SegmentedFusion, SegmentedGroup


@dataclass(frozen=True)
class Verdict:
    """One scheduler's answer for a candidate group."""

    scheduler: SchedulerType
    rejection: Rejection | None  # None: it takes the group

    @property
    def accepted(self) -> bool:
        return self.rejection is None

    def lines(self) -> list[str]:
        name = f"{self.scheduler.value:<17}"
        r = self.rejection
        if r is None:
            return [f"{name} accepts"]
        when = " at these sizes" if r.at_run_time else ""
        out = [f"{name} rejects{when} ({r.category.value}): {r.reason}"]
        return out + [f"{' ' * 19}{what}: {value}" for what, value in r.numbers]


@dataclass(frozen=True)
class TensorBytes:
    """A tensor handed between the two groups through global memory."""

    name: str
    nbytes: int


@dataclass(frozen=True)
class MergeAnswer:
    first: int  # group ids
    second: int
    first_label: str
    second_label: str
    verdicts: tuple[Verdict, ...]
    neighbours: bool  # an edge joins them
    cycle: tuple[int, ...]  # group ids of a path between them through another group; () if none
    hint: Rejection | None  # the segment_set hint the union would cross
    handed: tuple[TensorBytes, ...]  # tensors between them that the merge would keep on chip

    @property
    def scheduler(self) -> SchedulerType | None:
        """The first scheduler, in priority order, that takes the union."""
        return next((v.scheduler for v in self.verdicts if v.accepted), None)

    @property
    def category(self) -> RejectCategory:
        """What keeps them apart, as the segmenter's legend names it."""
        if self.cycle:
            return RejectCategory.would_create_cycle
        if self.hint is not None:
            return RejectCategory.segment_set
        if self.scheduler is not None:
            return RejectCategory.level_constraint
        return main_category([v.rejection for v in self.verdicts if v.rejection is not None])

    def conclusion(self) -> str:
        a, b = f"g{self.first}", f"g{self.second}"
        path = " -> ".join(f"g{g}" for g in self.cycle)
        if self.cycle:
            middle = ", ".join(f"g{g}" for g in self.cycle[1:-1])
            return f"{a} and {b} stay apart: merged, one kernel would both feed {middle} and wait for it ({path})"
        if self.hint is not None:
            return f"{a} and {b} stay apart: {self.hint.reason}"
        if self.scheduler is not None:
            why = (
                "the merge order (level constraint) kept them apart"
                if self.neighbours
                else ("they are not producer and consumer, and the segmenter only merges neighbours")
            )
            return f"{self.scheduler.value} would take {a} + {b} as one kernel, but {why}"
        best = min(
            (v.rejection for v in self.verdicts if v.rejection is not None),
            key=lambda r: list(RejectCategory).index(r.category),
        )
        return f"no scheduler takes {a} + {b}; the most telling reason: {best.scheduler.value}: {best.reason}"

    def lines(self) -> list[str]:
        out = [f"Why are g{self.first} and g{self.second} separate kernels?"]
        out += [f"  g{self.first}: {self.first_label}", f"  g{self.second}: {self.second_label}"]
        out.append(f"category: {self.category.value}")
        out.append(f"answer: {self.conclusion()}")
        out.append("producer/consumer: " + ("yes" if self.neighbours else "no edge joins them"))
        handed = ", ".join(f"{t.name} ({t.nbytes} B)" for t in self.handed)
        out.append("handed through global memory: " + (handed or "nothing"))
        out.append("cycle: " + (" -> ".join(f"g{g}" for g in self.cycle) if self.cycle else "none"))
        out.append("segment_set hint: " + (self.hint.reason if self.hint else "none"))
        out.append("every scheduler on the union, in priority order:")
        for v in self.verdicts:
            out += [f"  {line}" for line in v.lines()]
        return out


@dataclass(frozen=True)
class SplitPart:
    exprs: tuple[int, ...]  # expression names
    scheduler: SchedulerType | None  # None: no scheduler below takes even this part
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class SplitAnswer:
    group: int
    label: str
    scheduler: SchedulerType  # the group's own
    verdicts: tuple[Verdict, ...]  # the schedulers below it, on the whole group
    parts: tuple[SplitPart, ...]  # how the segmenter would cut it without its scheduler
    handed: tuple[TensorBytes, ...]  # tensors the parts would hand through global memory

    @property
    def whole(self) -> SchedulerType | None:
        """The next scheduler down that takes the whole group, if any."""
        return next((v.scheduler for v in self.verdicts if v.accepted), None)

    def conclusion(self) -> str:
        own = self.scheduler.value
        if self.whole is not None:
            return f"without {own}, {self.whole.value} would take g{self.group} whole: no split"
        if any(p.scheduler is None for p in self.parts):
            return f"without {own}, some expressions of g{self.group} fit no other scheduler: no split can run"
        moved = sum(t.nbytes for t in self.handed)
        return f"without {own}, g{self.group} would become {len(self.parts)} kernels, handing {moved} B between them"

    def lines(self) -> list[str]:
        out = [f"What would g{self.group} be without its scheduler ({self.scheduler.value})?"]
        out += [f"  g{self.group}: {self.label}", f"answer: {self.conclusion()}"]
        if self.verdicts:
            out.append("the schedulers below it, on the whole group, in priority order:")
            for v in self.verdicts:
                out += [f"  {line}" for line in v.lines()]
        else:
            out.append(f"no scheduler comes after {self.scheduler.value} in priority order to take the group whole")
        stuck = [e for p in self.parts if p.scheduler is None for e in p.exprs]
        if stuck:
            out.append(f"expressions no other scheduler takes alone: {{{', '.join(str(e) for e in sorted(stuck))}}}")
        elif self.whole is None:
            out.append("the split the segmenter would make:")
            for i, part in enumerate(self.parts):
                name = part.scheduler.value if part.scheduler else "no scheduler"
                exprs = ", ".join(str(e) for e in part.exprs)
                out.append(f"  part {i}: {name} {{{exprs}}} -> {', '.join(part.outputs) or 'nothing'}")
            handed = ", ".join(f"{t.name} ({t.nbytes} B)" for t in self.handed)
            out.append("handed through global memory: " + (handed or "nothing"))
        return out


# -- merge ----------------------------------------------------------------------------------


def explain_merge(segmented: SegmentedFusion, info: RuntimeInfo, first: int, second: int) -> MergeAnswer:
    """Every scheduler's verdict on the union of groups `first` and `second` (ids), and
    what else keeps them apart; the segmentation is not changed."""
    a, b = _group(segmented, first), _group(segmented, second)
    if a is b:
        raise FuserError(f"g{first} is one group: pick two different groups to ask why they were not merged")
    union = _ordered(segmented, [*a.exprs, *b.exprs])
    view = GroupView.of(union, {id(v) for v in segmented.complete.outputs})
    handed = tuple(
        TensorBytes(f"T{e.val.name}", nbytes(e.val, info))
        for e in segmented.edges
        if {e.producer, e.consumer} == {first, second}
    )
    return MergeAnswer(
        first,
        second,
        _label(a),
        _label(b),
        tuple(Verdict(s.type, verdict(s, view, info)) for s in SCHEDULERS),
        bool(handed),
        _cycle(segmented, first, second) or _cycle(segmented, second, first),
        crossed_hint(union),
        handed,
    )


def _group(segmented: SegmentedFusion, group_id: int) -> SegmentedGroup:
    for group in segmented.groups:
        if group.id == group_id:
            return group
    valid = ", ".join(f"g{g.id}" for g in segmented.groups)
    raise FuserError(f"no group g{group_id} in this run; its groups are {valid}")


def _ordered(segmented: SegmentedFusion, exprs: list[Expr]) -> list[Expr]:
    order = {id(e): i for i, e in enumerate(segmented.complete.exprs())}
    return sorted(exprs, key=lambda e: order[id(e)])


def _label(group: SegmentedGroup) -> str:
    outputs = ", ".join(f"T{tv.name}" for tv in group.outputs)
    count = len(group.exprs)
    label = f"{group.scheduler.value}, {count} expression{'s' * (count != 1)}, writes {outputs}"
    if group.scheduler is SchedulerType.no_op:  # a view of another group's result runs no kernel
        views = [(tv, aliased_input(tv, group.inputs)) for tv in group.outputs]
        if views and all(source is not None for _, source in views):
            label += " (no kernel: " + "; ".join(f"T{tv.name} is a view of T{s.name}" for tv, s in views if s) + ")"
    return label


def _cycle(segmented: SegmentedFusion, source: int, target: int) -> tuple[int, ...]:
    """A path source -> ... -> target through at least one other group: the cycle their
    merge would close. () when every path between them is their direct edge."""
    consumers: dict[int, set[int]] = {}
    for edge in segmented.edges:
        consumers.setdefault(edge.producer, set()).add(edge.consumer)
    parent: dict[int, int] = {}
    queue = deque(sorted(c for c in consumers.get(source, ()) if c != target))
    for start in queue:
        parent[start] = source
    while queue:
        key = queue.popleft()
        for nxt in sorted(consumers.get(key, ())):
            if nxt in parent:
                continue
            parent[nxt] = key
            if nxt == target:
                return _path(parent, source, target)
            queue.append(nxt)
    return ()


def _path(parent: dict[int, int], source: int, target: int) -> tuple[int, ...]:
    path = [target]
    while path[-1] != source:
        path.append(parent[path[-1]])
    return tuple(reversed(path))


# -- split ------------------------------------------------------------------------------------


def explain_split(segmented: SegmentedFusion, info: RuntimeInfo, group_id: int) -> SplitAnswer:
    """How group `group_id` would have been cut had its scheduler not been there."""
    group = _group(segmented, group_id)
    own = BY_TYPE[group.scheduler]
    if own not in SCHEDULERS:
        raise FuserError(f"g{group_id} is {group.scheduler.value}-scheduled: the segmenter did not choose it")
    below = SCHEDULERS[SCHEDULERS.index(own) + 1 :]
    others = tuple(s for s in SCHEDULERS if s is not own)
    view = GroupView(group.exprs, group.inputs, group.outputs, segmented.id_maps[group.id])
    verdicts = tuple(Verdict(s.type, verdict(s, view, info)) for s in below)
    finder = SegmentCandidateFinder(segmented.complete, info, group.exprs, others)
    cut = finder.split()
    parts = tuple(_part(exprs, scheduler, segmented) for exprs, scheduler, _ in cut)
    return SplitAnswer(group_id, _label(group), group.scheduler, verdicts, parts, _handed(cut, info))


def _part(exprs: list[Expr], scheduler: Scheduler | None, segmented: SegmentedFusion) -> SplitPart:
    view = GroupView.of(exprs, {id(v) for v in segmented.complete.outputs})
    kind = scheduler.type if scheduler is not None else None
    names = tuple(sorted(int(e.name) for e in exprs))
    return SplitPart(names, kind, tuple(f"T{tv.name}" for tv in view.outputs))


Cut = list[tuple[list[Expr], Scheduler | None, list[Rejection]]]  # the finder's split()


def _handed(cut: Cut, info: RuntimeInfo) -> tuple[TensorBytes, ...]:
    """Tensors one part writes and another reads."""
    owner = {id(e): i for i, (exprs, _, _) in enumerate(cut) for e in exprs}
    found: dict[int, TensorView] = {}
    for i, (exprs, _, _) in enumerate(cut):
        for expr in exprs:
            for val in expr.inputs:
                source = owner.get(id(val.definition)) if val.definition is not None else None
                if isinstance(val, TensorView) and source is not None and source != i:
                    found.setdefault(id(val), val)
    return tuple(TensorBytes(f"T{tv.name}", nbytes(tv, info)) for tv in sorted(found.values(), key=lambda t: t.name))
