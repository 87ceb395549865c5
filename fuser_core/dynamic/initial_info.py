"""What in a fusion is dynamic, found once per Fusion before any inputs are seen.

Reshapes to sizes known only at run time, resizes (pad/slice/cat) whose extents or
widths are not constants, expands of Symbolic axes, factories of Symbolic size, and
input extents that might be zero. It also collects the leaf values (scalar inputs
and input extents) those depend on: the values that matter for the cache key.
Sites are recorded by statement name, which clones keep, so concretization can
find them again in a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fuser_core.errors import SourceLocation
from fuser_core.ir.base import Val
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import Resize
from fuser_core.ir.rng import RNGOp
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import ExpandOp, FullOp, IotaOp, ViewOp
from fuser_core.ir.tensor_view import TensorView, transforms_between


@dataclass(frozen=True)
class ReshapeSite:
    tv: int  # name of the reshape's output tensor
    in_extents: tuple[Scalar, ...]
    out_extents: tuple[Scalar, ...]
    inferred_axis: int | None  # the axis given as -1
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ResizeSite:
    tv: int  # the resized tensor
    axis: int  # logical position of the resized axis
    in_extent: Scalar
    left: Scalar
    right: Scalar
    symbolic: bool  # the output IterType is unknown until run time
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AxisSite:
    """A Symbolic axis of an expand or factory output."""

    tv: int
    axis: int
    extent: Scalar  # the axis size (for an expand: the requested size)
    source: Scalar | None  # an expand's input axis extent


@dataclass(frozen=True)
class ExtentSite:
    input_index: int
    axis: int
    extent: Scalar


@dataclass(frozen=True)
class DynamicTransformInitialInfo:
    reshapes: tuple[ReshapeSite, ...]
    resizes: tuple[ResizeSite, ...]
    expands: tuple[AxisSite, ...]
    factories: tuple[AxisSite, ...]
    maybe_empty: tuple[ExtentSite, ...]

    @property
    def is_dynamic(self) -> bool:
        return bool(self.reshapes or self.resizes or self.expands or self.factories)

    def leaves(self, include_static_resizes: bool) -> list[Scalar]:
        """Symbolic leaf values (scalar inputs, input extents) the sites depend on."""
        roots: list[Val] = []
        for r in self.reshapes:
            roots += [*r.in_extents, *r.out_extents]
        for z in self.resizes:
            if z.symbolic or include_static_resizes:
                roots += [z.in_extent, z.left, z.right]
        for a in (*self.expands, *self.factories):
            roots += [a.extent] + ([a.source] if a.source is not None else [])
        return symbolic_leaves(roots)


def symbolic_leaves(roots: list[Val]) -> list[Scalar]:
    """The non-constant leaf scalars (scalar inputs, tensor extents) `roots` are made of."""
    found: dict[int, Scalar] = {}
    stack = list(roots)
    seen: set[int] = set()
    while stack:
        val = stack.pop()
        if id(val) in seen:
            continue
        seen.add(id(val))
        if val.definition is not None:
            stack.extend(val.definition.inputs)
        elif isinstance(val, Scalar) and not val.is_const:
            found[id(val)] = val
    return sorted(found.values(), key=lambda s: s.name)


def analyze_fusion(fusion: Fusion) -> DynamicTransformInitialInfo:
    reshapes, resizes, expands, factories = [], [], [], []
    for tv in fusion.used_tensors():
        expr = tv.definition
        if isinstance(expr, ViewOp) and (expr.dynamic or any(d.is_symbolic for d in tv.logical)):
            src: TensorView = expr.input  # type: ignore[assignment]
            reshapes.append(
                ReshapeSite(
                    tv.name,
                    tuple(d.maybe_expanded_extent for d in src.logical_no_reductions()),
                    tuple(d.extent for d in tv.logical),
                    expr.inferred_axis,
                    expr.location,
                )
            )
        if tv.domain.root is not None:
            resizes += _resize_sites(tv)
        if isinstance(expr, ExpandOp):
            src = expr.input  # type: ignore[assignment]
            for axis, (d, s) in enumerate(zip(tv.logical, src.logical_no_reductions(), strict=True)):
                if d.is_symbolic:
                    expands.append(AxisSite(tv.name, axis, d.extent, s.extent))
        if isinstance(expr, (FullOp, IotaOp, RNGOp)):
            for axis, d in enumerate(tv.logical):
                if d.is_symbolic:
                    factories.append(AxisSite(tv.name, axis, d.extent, None))
    return DynamicTransformInitialInfo(
        tuple(reshapes), tuple(resizes), tuple(expands), tuple(factories), tuple(_maybe_empty(fusion))
    )


def _resize_sites(tv: TensorView) -> list[ResizeSite]:
    sites = []
    resizes = [e for e in transforms_between(tv.domain.root or [], tv.logical) if isinstance(e, Resize)]
    for expr in resizes:
        out = expr.output
        axis = next((p for p, d in enumerate(tv.logical) if d is out), None)
        if axis is None:
            continue
        in_extent = expr.inputs[0].maybe_expanded_extent  # type: ignore[attr-defined]
        static = in_extent.is_const and expr.left.is_const and expr.right.is_const
        if not static:
            location = tv.definition.location if tv.definition is not None else None
            sites.append(ResizeSite(tv.name, axis, in_extent, expr.left, expr.right, out.is_symbolic, location))  # type: ignore[attr-defined]
    return sites


def _maybe_empty(fusion: Fusion) -> list[ExtentSite]:
    sites = []
    for index, val in enumerate(fusion.inputs):
        if isinstance(val, TensorView):
            for axis, d in enumerate(val.logical_no_reductions()):
                extent = d.maybe_expanded_extent
                if not extent.is_const and extent.definition is None:
                    sites.append(ExtentSite(index, axis, extent))
    return sites
