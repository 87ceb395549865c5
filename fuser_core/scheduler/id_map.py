"""Which IterDomains of different tensors are the same axis.

Two maps over the IterDomains of a set of expressions, as nvFuser's ComputeAtMap:

- **exact**: axes tied one to one by an op (element-wise operands, a reduction's input
  and its `r` axis, a permute's root); always equal extents;
- **permissive**: exact, plus a broadcast axis tied to the axis it is broadcast to.

Each candidate group the segmenter tries gets its own map, built from the group's
expressions only, as nvFuser builds ID graphs per segment: an op outside the group ties
nothing inside it. One map of the whole fusion would: `t0 + sum(t0, [1])[None, :]` ties
t0's two axes through the sum, a self mapping no schedule of t0 can honour, though the
kernel of the add alone (the sum handed in) has none. Broadcast links are kept per
expression, so a group sees only the broadcasts it resolves itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from fuser_core.ir.base import Expr
from fuser_core.ir.domain_map import root_pairs
from fuser_core.ir.iter_domain import IterDomain, Merge, Resize, Split
from fuser_core.ir.tensor_exprs import SqueezeOp
from fuser_core.ir.tensor_view import TensorView

_Span = tuple[str, int, int]  # how a set's index holds the source's (_IndexFlow says the forms)


class _DisjointSets:
    def __init__(self) -> None:
        self._parent: dict[int, int] = {}

    def find(self, key: int) -> int:
        parent = self._parent.setdefault(key, key)
        if parent == key:
            return key
        root = self.find(parent)
        self._parent[key] = root
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)


class IdMap:
    """Exact sets of IterDomains, and the broadcast links of each expression."""

    def __init__(self, exprs: Iterable[Expr]) -> None:
        self._exact = _DisjointSets()
        self._keys: dict[int, int] = {}  # id(IterDomain) -> small int key
        self._ids: list[IterDomain] = []
        self._sources: dict[int, list[int]] = {}
        # Per expression: (broadcast axis, the axis it is tied to) pairs.
        self.broadcast_links: dict[int, list[tuple[IterDomain, IterDomain]]] = {}
        self._squeezed: list[IterDomain] = []  # axes a squeeze removes: size 1, iterated by nothing
        self._squeezed_sets: set[int] | None = None
        self._windows: dict[int, set[int]] | None = None  # Resize ties, both ways (windows_of)
        self._made_into: dict[int, list[int]] | None = None  # _sources inverted (overlapping)
        self._uses: dict[int, list[Split | Merge]] | None = None  # splits/merges by input set
        for expr in exprs:
            self._add_expr(expr)
        self._sources = self._rf_sources()

    def _key(self, dim: IterDomain) -> int:
        key = self._keys.get(id(dim))
        if key is None:
            key = len(self._ids)
            self._keys[id(dim)] = key
            self._ids.append(dim)
        return key

    def _add_expr(self, expr: Expr) -> None:
        for val in (*expr.inputs, *expr.outputs):
            if isinstance(val, TensorView):  # every axis, reshape/resize ones included, has a set
                for dim in val.domain.all_ids():
                    self._key(dim)
        if isinstance(expr, SqueezeOp):
            squeezed: TensorView = expr.inputs[0]  # type: ignore[assignment]
            dims = squeezed.logical_no_reductions()
            self._squeezed += [d for d, flag in zip(dims, expr.flags, strict=True) if flag]
        for consumer in expr.outputs:
            if not isinstance(consumer, TensorView):
                continue
            for producer in expr.inputs:
                if isinstance(producer, TensorView):
                    self._tie(expr, producer, consumer)

    def _tie(self, expr: Expr, producer: TensorView, consumer: TensorView) -> None:
        for p, c in root_pairs(expr, producer, consumer):
            if p.is_broadcast == c.is_broadcast:
                self._exact.union(self._key(p), self._key(c))
            else:
                self.broadcast_links.setdefault(id(expr), []).append((p, c))

    def knows(self, dim: IterDomain) -> bool:
        """Whether `dim` is an axis of a tensor of the map's expressions."""
        return id(dim) in self._keys

    def exact(self, dim: IterDomain) -> int:
        """The exact set of `dim` (a stable small integer)."""
        return self._exact.find(self._key(dim))

    def member(self, key: int) -> IterDomain:
        """An IterDomain of set `key` (every member has its extent)."""
        return next(dim for dim in self._ids if self.exact(dim) == key)

    def squeezed_sets(self) -> set[int]:
        if self._squeezed_sets is None:
            self._squeezed_sets = {self.exact(d) for d in self._squeezed}
        return self._squeezed_sets

    def made_from(self, key: int) -> list[int]:
        """Exact sets that any axis of set `key` was reshaped or resized from: a cat's
        output axis is made, through its inputs' pads, from what they padded."""
        return self._sources.get(key, [])

    def inner_source(self, key: int) -> int | None:
        """The exact set whose consecutive elements make consecutive elements of set `key`
        (the inner axis of a merge, the axis an inner split or a resize came from); None
        when consecutive elements of `key` are not consecutive in what it came from (the
        outer output of a split) or it came from nothing."""
        for member in self._ids:
            if self.exact(member) != key:
                continue
            definition = member.definition
            if isinstance(definition, Merge):
                return self.exact(definition.inputs[1])  # type: ignore[arg-type]
            if isinstance(definition, Split):
                return self.exact(definition.inputs[0]) if member is definition.outputs[1] else None  # type: ignore[arg-type]
            if isinstance(definition, Resize):
                return self.exact(definition.inputs[0])  # type: ignore[arg-type]
        return None

    def resized_sets(self) -> set[int]:
        """Exact sets of axes a pad, slice or cat resized: where they start in memory is a
        run-time offset (a pad width, a piece boundary)."""
        return {self.exact(d) for d in self._ids if isinstance(d.definition, Resize)}

    def windows_of(self, keys: Iterable[int]) -> set[int]:
        """`keys` and every exact set tied to them through pads, slices and cats, either
        way: windows of one axis (a cat of two slices of an input sums that input's rows)."""
        if self._windows is None:
            self._windows = {}
            for member in self._ids:
                if isinstance(member.definition, Resize):
                    a, b = self.exact(member), self.exact(member.definition.inputs[0])  # type: ignore[arg-type]
                    self._windows.setdefault(a, set()).add(b)
                    self._windows.setdefault(b, set()).add(a)
        found: set[int] = set()
        stack = list(keys)
        while stack:
            key = stack.pop()
            if key not in found:
                found.add(key)
                stack.extend(self._windows.get(key, ()))
        return found

    def overlapping(self, keys: Iterable[int]) -> set[int]:
        """The windows of `keys` (windows_of), and every exact set holding some of their
        elements: what they were reshaped or resized from, and what was made from them,
        up or down a chain of transforms, never sideways (the two halves of a split share
        no element). A sum over a reshape of [i0, i1] to [i0 * i1] reduces i0 and i1."""
        start = self.windows_of(keys)
        return start | self._closure(start, self.made_from) | self._closure(start, self._made_into_of)

    @property
    def reshaped_or_resized(self) -> bool:
        """Whether any axis of the map's tensors is made by a reshape or resize transform."""
        return bool(self._sources)

    def index_flows(self, key: int, extents: dict[int, int] | None = None) -> set[int]:
        """Exact sets whose index is computed from set `key`'s: its windows (windows_of),
        and down the splits and merges from them, the sets that receive some of its digits.

        A set's index is read in mixed radix: `key`'s digits sit at place values [lo, hi)
        of it (a merge's outer input moves up by the inner input's extent; a split by f
        keeps the digits under f in its inner output, the rest, divided by f, in its outer
        one). So a flat axis split into [r, c], and an [r, b] merged back onto it, give r's
        digits to r alone, not to c: a row sum broadcast along b and reshaped onto the flat
        axis reads its own row. `extents` gives sets' extents (set_extents of the run's
        sizes; by default the constant ones). Where one is unknown, or a split does not fall on the
        digits' boundaries, both outputs count whole (a resize's too); a merge of exactly
        those two outputs undoes the split, and a merge split again with `key`'s set in
        the same place gives it back alone."""
        flow = _IndexFlow(self, self.set_extents(_constant_extent) if extents is None else extents)
        return flow.run(key)

    def set_extents(self, extent_of: Callable[[IterDomain], int | None]) -> dict[int, int]:
        """Exact set -> the one extent its axes have, where `extent_of` gives one and they
        agree (not an expanded broadcast beside its extent-1 producer)."""
        extents: dict[int, set[int]] = {}
        for member in self._ids:
            extent = extent_of(member)
            if extent is not None:
                extents.setdefault(self.exact(member), set()).add(extent)
        return {key: next(iter(found)) for key, found in extents.items() if len(found) == 1}

    def _transform_uses(self) -> dict[int, list[Split | Merge]]:
        """Exact set -> the splits and merges (reshape transforms) taking one of its axes."""
        if self._uses is None:
            self._uses = {}
            recorded: set[int] = set()
            for member in self._ids:
                definition = member.definition
                if isinstance(definition, (Split, Merge)) and id(definition) not in recorded:
                    recorded.add(id(definition))
                    for source in definition.inputs:
                        if isinstance(source, IterDomain):
                            self._uses.setdefault(self.exact(source), []).append(definition)
        return self._uses

    def _closure(self, keys: set[int], step: Callable[[int], list[int]]) -> set[int]:
        found: set[int] = set()
        stack = list(keys)
        while stack:
            for key in self.windows_of(step(stack.pop())):
                if key not in found:
                    found.add(key)
                    stack.append(key)
        return found

    def _made_into_of(self, key: int) -> list[int]:
        if self._made_into is None:
            self._made_into = {}
            for made, sources in self._sources.items():
                for source in sources:
                    self._made_into.setdefault(source, []).append(made)
        return self._made_into.get(key, [])

    def _rf_sources(self) -> dict[int, list[int]]:
        sources: dict[int, list[int]] = {}
        for member in list(self._ids):
            definition = member.definition
            if isinstance(definition, (Split, Merge, Resize)):
                inputs = [self.exact(v) for v in definition.inputs if isinstance(v, IterDomain)]
                sources.setdefault(self.exact(member), []).extend(inputs)
        return sources

    def self_mapping(self, tensors: Iterable[TensorView]) -> tuple[TensorView, IterDomain, IterDomain] | None:
        """The first tensor with two of its (non-broadcast) logical axes in one exact set,
        and those axes: no loop nest can give both one index (nvFuser's hasSelfMapping)."""
        for tv in tensors:
            seen: dict[int, IterDomain] = {}
            for dim in tv.logical:
                if dim.is_broadcast:
                    continue
                twin = seen.setdefault(self.exact(dim), dim)
                if twin is not dim:
                    return tv, twin, dim
        return None

    def links_of(self, exprs: Sequence[Expr]) -> dict[int, list[int]]:
        """The broadcast ties these expressions make, both ways, by exact set: a
        broadcast tied to an axis (a pad to size 1 meeting a full axis) is iterated by it."""
        links: dict[int, list[int]] = {}
        for expr in exprs:
            for p, c in self.broadcast_links.get(id(expr), []):
                links.setdefault(self.exact(p), []).append(self.exact(c))
                links.setdefault(self.exact(c), []).append(self.exact(p))
        return links


def ancestor_sets(id_map: IdMap, tv: TensorView, links: dict[int, list[int]] | None = None) -> set[int]:
    """Exact sets of `tv`'s logical axes and of every axis they were made from by
    reshape/resize transforms, or are tied to by the broadcasts in `links`: what a
    reference tensor covers."""
    found: set[int] = set()
    stack = [id_map.exact(d) for d in tv.logical]
    while stack:
        key = stack.pop()
        if key in found:
            continue
        found.add(key)
        stack.extend(id_map.made_from(key))
        if links:
            stack.extend(links.get(key, ()))
    return found


def symbolic_axes(id_map: IdMap, tensors: Iterable[TensorView]) -> Iterator[tuple[TensorView, int, IterDomain, int]]:
    """(tensor, axis, IterDomain, exact set) of every axis of `tensors` that the map's
    expressions hold whose extent is symbolic (no broadcast, no constant): the axes whose
    sizes arrive with the inputs, equal wherever one set holds two of them."""
    for tv in tensors:
        for axis, dim in enumerate(tv.logical_no_reductions()):
            if dim.is_broadcast or dim.maybe_expanded_extent.is_const or not id_map.knows(dim):
                continue
            yield tv, axis, dim, id_map.exact(dim)


def constant_axes(id_map: IdMap, tensors: Iterable[TensorView]) -> dict[int, dict[int, IterDomain]]:
    """Exact set -> {constant extent: an axis of the set that has it}: the static sizes its
    axes have (a static define_tensor axis, a pad or slice whose widths concretization made
    static, an iota's length). More than one is a fusion no input can satisfy."""
    found: dict[int, dict[int, IterDomain]] = {}
    for tv in tensors:
        for dim in (*tv.root, *tv.logical):
            extent = dim.maybe_expanded_extent
            if dim.is_broadcast or dim.is_symbolic or not extent.is_const or not id_map.knows(dim):
                continue
            found.setdefault(id_map.exact(dim), {}).setdefault(int(extent.value), dim)  # type: ignore[arg-type]
    return found


def constant_extents(id_map: IdMap, tensors: Iterable[TensorView]) -> dict[int, int]:
    """Exact set -> the one constant extent its axes have: every axis of the set has that
    size, so a kernel may index a symbolic one by it. The runtime refuses inputs whose
    size differs there, tensors' and sizes made from scalar inputs (`full([n])`) alike
    (arguments.check_mapped_sizes)."""
    return {key: next(iter(values)) for key, values in constant_axes(id_map, tensors).items() if len(values) == 1}


def concrete_sets(id_map: IdMap, tv: TensorView) -> set[int]:
    """Exact sets of the axes of `tv` that iterate (no broadcasts, no reductions, none
    that a squeeze removes)."""
    found = {id_map.exact(d) for d in tv.logical if not d.is_broadcast and not d.is_reduction}
    return found - id_map.squeezed_sets()


def reduction_sets(id_map: IdMap, tv: TensorView) -> frozenset[int]:
    return frozenset(id_map.exact(d) for d in tv.logical if d.is_reduction)


def broadcast_conflicts(id_map: IdMap, exprs: Sequence[Expr]) -> list[IterDomain]:
    """Broadcast axes that the expressions tie to two different axes: one value
    broadcast to several sizes, which no single loop nest can cover."""
    targets: dict[int, set[int]] = {}
    dims: dict[int, IterDomain] = {}
    for expr in exprs:
        for p, c in id_map.broadcast_links.get(id(expr), []):
            bcast, other = (p, c) if p.is_broadcast else (c, p)
            key = id_map.exact(bcast)
            targets.setdefault(key, set()).add(id_map.exact(other))
            dims[key] = bcast
    return [dims[k] for k, t in targets.items() if len(t) > 1]


def _constant_extent(dim: IterDomain) -> int | None:
    """A constant extent (a broadcast's expanded one counts: a reshape merges it as such)."""
    extent = dim.maybe_expanded_extent
    return int(extent.value) if extent.is_const and extent.value is not None else None  # type: ignore[arg-type]


class _IndexFlow:
    """IdMap.index_flows' walk: (set, span) states, a span being how the set's index holds
    the source's: ("digits", lo, hi), its digits at place values [lo, hi); ("placed",
    source set, 0 or 1), the whole source as a merge's outer or inner input (extents
    unknown); ("whole", 0, 0), all of it, extent unknown; ("cut", cut, side), the outer
    (0) or inner (1) output of a split that cut the digits (`cuts[cut]`: both outputs and
    the split input's span), whole but for a merge of exactly those two outputs, which
    gives the split input's span back (a reshape of [6] to [4, ...] and back)."""

    def __init__(self, id_map: IdMap, extents: dict[int, int]) -> None:
        self.id_map = id_map
        self.extents = extents
        self.cuts: list[tuple[int, int, _Span]] = []

    def run(self, key: int) -> set[int]:
        id_map = self.id_map
        uses = id_map._transform_uses()
        found: set[int] = set()
        seen: set[tuple[int, _Span]] = set()
        stack: list[tuple[int, _Span]] = [(k, self._whole(k)) for k in id_map.windows_of([key])]
        while stack:
            current, span = stack.pop()
            if (current, span) in seen:
                continue
            seen.add((current, span))
            found.add(current)
            for expr in uses.get(current, ()):
                if isinstance(expr, Merge):
                    stack.append(self._through_merge(expr, current, span))
                else:
                    stack.extend(self._through_split(expr, current, span))
            for window in id_map.windows_of([current]) - {current}:
                stack.append((window, self._whole(window)))
        return found

    def _through_merge(self, merge: Merge, current: int, span: _Span) -> tuple[int, _Span]:
        out = self.id_map.exact(merge.outputs[0])  # type: ignore[arg-type]
        outer, inner = (self.id_map.exact(d) for d in merge.inputs)  # type: ignore[arg-type]
        place = 0 if outer == current else 1
        if span[0] == "cut":
            cut_outer, cut_inner, original = self.cuts[span[1]]
            if (outer, inner) == (cut_outer, cut_inner):
                return out, original  # the split undone: its input's index again
            span = self._whole(current)
        if span[0] == "digits":
            if place == 1:
                return out, span  # the inner input's digits keep their place values
            below = self.extents.get(inner)
            if below is not None:
                return out, ("digits", span[1] * below, span[2] * below)
        if span == self._whole(current):
            return out, ("placed", current, place)
        return out, self._whole(out)

    def _through_split(self, split: Split, current: int, span: _Span) -> list[tuple[int, _Span]]:
        outer, inner = (self.id_map.exact(d) for d in split.outputs)  # type: ignore[arg-type]
        f = self.extents.get(inner)
        if span[0] == "cut":
            span = self._whole(current)
        if span[0] == "placed":
            if (outer, inner)[span[2]] == span[1]:
                return []  # the merge undone: the digits land back in their own set
        elif span[0] == "digits" and f and span[1] and span[2]:
            lo, hi = span[1], span[2]
            if f % hi == 0:
                return [(inner, ("digits", lo, hi))]
            if lo % f == 0:
                return [(outer, ("digits", lo // f, hi // f))]
            if f % lo == 0 and hi % f == 0:
                return [(inner, ("digits", lo, f)), (outer, ("digits", 1, hi // f))]
        cut = (outer, inner, span)
        if cut not in self.cuts:
            self.cuts.append(cut)
        at = self.cuts.index(cut)
        return [(outer, ("cut", at, 0)), (inner, ("cut", at, 1))]

    def _whole(self, key: int) -> _Span:
        """The span of a set whose whole index depends on the source's."""
        extent = self.extents.get(key)
        return ("digits", 1, extent) if extent is not None else ("whole", 0, 0)
