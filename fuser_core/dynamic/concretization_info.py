"""`ConcretizationInfo`: how one set of inputs resolves a fusion's dynamic sites.

A frozen, hashable value: the executor cache keys runtimes by it, and two inputs
with equal infos can share a concretized fusion. Entries compare by what changes
the concretized IR only (a reshape by its split/merge decomposition, not by sizes
that merges absorb), and print the sizes that led to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fuser_core.dynamic.initial_info import DynamicTransformInitialInfo, ReshapeSite, ResizeSite
from fuser_core.errors import FuserError
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ops.view_analysis import ViewAnalysis, analyze_view, resolve_shape


@dataclass(frozen=True)
class ReshapeEntry:
    tv: int
    analysis: ViewAnalysis | None  # None: the tensor is empty and becomes a full()
    in_sizes: tuple[int, ...] = field(compare=False)
    out_sizes: tuple[int, ...] = field(compare=False)
    # An empty tensor's reshape becomes full() of this constant shape, so the shape is
    # part of the key; a real reshape's sizes are not (its analysis is).
    empty_shape: tuple[int, ...] | None = None

    @property
    def label(self) -> str:
        return f"reshape T{self.tv}"

    def describe(self) -> str:
        how = self.analysis.describe() if self.analysis is not None else "empty: full()"
        return f"T{self.tv}: {list(self.in_sizes)} -> {list(self.out_sizes)}: {how}"


@dataclass(frozen=True)
class ResizeEntry:
    """With `concretize_resize_extents` the key is (input extent, left, right); without
    it, only the output IterType (or "trivial" when both widths are zero). The two
    kinds of key have different shapes, so they can never be confused."""

    tv: int
    axis: int
    key: tuple[object, ...]

    @property
    def label(self) -> str:
        return f"resize T{self.tv} axis {self.axis}"

    @property
    def is_trivial(self) -> bool:
        return self.key == ("trivial",) or (self.key[0] == "extents" and self.key[2:] == (0, 0))

    @property
    def iter_type(self) -> str:
        if self.key[0] == "extents":
            return "Broadcast" if sum(self.key[1:]) == 1 else "Iteration"  # type: ignore[arg-type]
        return "Iteration" if self.key == ("trivial",) else str(self.key[1])

    def value_text(self) -> str:
        if self.key[0] == "extents":
            return str(tuple(self.key[1:]))
        return "trivial" if self.key == ("trivial",) else str(self.key[1])

    def describe(self) -> str:
        if self.key[0] == "extents":
            return f"T{self.tv} axis {self.axis}: {self.value_text()} -> {self.iter_type}"
        return f"T{self.tv} axis {self.axis}: {self.value_text()}"


@dataclass(frozen=True)
class AxisEntry:
    kind: str  # "expand" or "factory"
    tv: int
    axis: int
    iter_type: str  # "Iteration", "Broadcast" or, for an expand, "Expanded"

    @property
    def label(self) -> str:
        return f"{self.kind} T{self.tv} axis {self.axis}"

    def value_text(self) -> str:
        return self.iter_type

    def describe(self) -> str:
        return f"T{self.tv} axis {self.axis}: {self.iter_type}"


@dataclass(frozen=True)
class ConcretizationInfo:
    reshapes: tuple[ReshapeEntry, ...] = ()
    resizes: tuple[ResizeEntry, ...] = ()
    expands: tuple[AxisEntry, ...] = ()
    factories: tuple[AxisEntry, ...] = ()
    empty_extents: tuple[tuple[int, int], ...] = ()  # (input index, axis) of size 0
    concretize_resize_extents: bool = True

    def describe(self) -> str:
        lines = [
            "ConcretizationInfo (concretize_resize_extents=" + ("on" if self.concretize_resize_extents else "off") + ")"
        ]
        sections: list[tuple[str, list[str]]] = [
            ("Empty tensor extents:", [f"input {i} axis {a}" for i, a in self.empty_extents]),
            ("Reshape:", [e.describe() for e in self.reshapes]),
            ("Resize:", [e.describe() for e in self.resizes]),
            ("Expand:", [e.describe() for e in self.expands]),
            ("Factory Output IterTypes:", [e.describe() for e in self.factories]),
        ]
        for title, entries in sections:
            lines.append(f"  {title}")
            lines += [f"    {e}" for e in entries]
        return "\n".join(lines) + "\n"

    def diff(self, old: ConcretizationInfo) -> list[str]:
        """What changed from `old` to this info, one reason per entry."""
        reasons = []
        if self.concretize_resize_extents != old.concretize_resize_extents:
            state = "on" if self.concretize_resize_extents else "off"
            reasons.append(f"concretize_resize_extents turned {state}")
        reasons += _reshape_reasons(self.reshapes, old.reshapes)
        reasons += _entry_reasons(self.resizes, old.resizes)
        reasons += _entry_reasons(self.expands, old.expands)
        reasons += _entry_reasons(self.factories, old.factories)
        for idx, axis in sorted(set(self.empty_extents) ^ set(old.empty_extents)):
            now = "empty" if (idx, axis) in self.empty_extents else "non-empty"
            reasons.append(f"input {idx} axis {axis} became {now}")
        return reasons or ["the concretization differs"]


def _reshape_reasons(new: tuple[ReshapeEntry, ...], old: tuple[ReshapeEntry, ...]) -> list[str]:
    before = {e.label: e for e in old}
    reasons = []
    for entry in new:
        prev = before.get(entry.label)
        if prev is None or prev == entry:
            continue
        if prev.out_sizes != entry.out_sizes:
            reasons.append(f"{entry.label}: {list(prev.out_sizes)} -> {list(entry.out_sizes)}")
        else:
            reasons.append(f"{entry.label}: input {list(prev.in_sizes)} -> {list(entry.in_sizes)}")
    return reasons


def _entry_reasons(new: Sequence[ResizeEntry | AxisEntry], old: Sequence[ResizeEntry | AxisEntry]) -> list[str]:
    before = {e.label: e for e in old}
    return [
        f"{e.label}: {before[e.label].value_text()} -> {e.value_text()}"
        for e in new
        if e.label in before and before[e.label] != e
    ]


def compute_info(
    initial: DynamicTransformInitialInfo,
    ev: ExpressionEvaluator,
    concretize_resize_extents: bool,
) -> ConcretizationInfo:
    """The ConcretizationInfo of the inputs bound in `ev`."""
    reshapes = tuple(_reshape_entry(site, ev) for site in initial.reshapes)
    resizes = tuple(
        entry for site in initial.resizes if (entry := _resize_entry(site, ev, concretize_resize_extents)) is not None
    )
    expands = tuple(
        AxisEntry("expand", s.tv, s.axis, _expand_type(ev.evaluate(s.source), ev.evaluate(s.extent)))  # type: ignore[arg-type]
        for s in initial.expands
    )
    factories = tuple(
        AxisEntry("factory", s.tv, s.axis, "Broadcast" if ev.evaluate(s.extent) == 1 else "Iteration")
        for s in initial.factories
    )
    empty = tuple((s.input_index, s.axis) for s in initial.maybe_empty if ev.evaluate(s.extent) == 0)
    return ConcretizationInfo(reshapes, resizes, expands, factories, empty, concretize_resize_extents)


def _reshape_entry(site: ReshapeSite, ev: ExpressionEvaluator) -> ReshapeEntry:
    in_sizes = tuple(int(ev.evaluate(e)) for e in site.in_extents)
    requested = [int(ev.evaluate(e)) for e in site.out_extents]
    if site.inferred_axis is not None:
        requested[site.inferred_axis] = -1
    try:
        if 0 in in_sizes:
            out = tuple(resolve_shape(in_sizes, [0 if s == -1 else s for s in requested]))
            return ReshapeEntry(site.tv, None, in_sizes, out, empty_shape=out)
        analysis = analyze_view(in_sizes, requested)
    except FuserError as err:
        raise FuserError(err.message, op="reshape", tensor=f"T{site.tv}", location=site.location) from None
    return ReshapeEntry(site.tv, analysis, in_sizes, analysis.out_sizes)


def _resize_entry(site: ResizeSite, ev: ExpressionEvaluator, extents: bool) -> ResizeEntry | None:
    in_extent, left, right = (int(ev.evaluate(v)) for v in (site.in_extent, site.left, site.right))
    out = in_extent + left + right
    if out < 0:
        raise FuserError(
            f"axis {site.axis} would have size {out} (size {in_extent} resized by {left} and {right})",
            op="pad/slice/cat",
            tensor=f"T{site.tv}",
            location=site.location,
        )
    if extents:
        return ResizeEntry(site.tv, site.axis, ("extents", in_extent, left, right))
    if not site.symbolic:
        return None
    if left == 0 and right == 0:
        return ResizeEntry(site.tv, site.axis, ("trivial",))
    return ResizeEntry(site.tv, site.axis, ("iter_type", "Broadcast" if out == 1 else "Iteration"))


def _expand_type(source_size: int, size: int) -> str:
    return "Expanded" if source_size == 1 and size != 1 else "Iteration"
