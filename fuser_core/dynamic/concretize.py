"""`concretize(fusion, info)`: a copy of a dynamic fusion with every Symbolic axis
resolved, as one ConcretizationInfo says. The input fusion is not changed.

Steps, in order:
1. empty input extents and (with `concretize_resize_extents`) the input extents and
   widths of resizes become constants;
2. each dynamic reshape is rebuilt from its decomposition (squeeze, merges and
   splits, broadcast);
3. resized, expanded and factory axes get their IterType; a resize by (0, 0) is
   dropped;
4. the remaining Symbolic axes, downstream of the above, take the IterType of the
   producer axes they map to;
5. the constants of step 1 are substituted throughout (extents fold).
Steps 2, 3 and 4 happen op by op in topological order, so each op sees concrete
producers.
"""

from __future__ import annotations

from fuser_core.dynamic.concretization_info import AxisEntry, ConcretizationInfo, ReshapeEntry, ResizeEntry
from fuser_core.dynamic.substitution import DomainIndex, substitute_scalars
from fuser_core.errors import InternalError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Expr
from fuser_core.ir.domain_map import producers_of
from fuser_core.ir.dtype import DataType
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, IterType, Resize
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops.creation import full
from fuser_core.ops.shape import apply_view


def concretize(fusion: Fusion, info: ConcretizationInfo) -> Fusion:
    concrete, _ = fusion.clone()
    with concrete.guard():
        _Concretizer(concrete, info).run()
    return concrete


class _Concretizer:
    def __init__(self, fusion: Fusion, info: ConcretizationInfo) -> None:
        self.fusion = fusion
        self.info = info
        self.tensors = {tv.name: tv for tv in fusion.tensors()}
        self.substitutions: dict[int, Scalar] = {}
        self.index = DomainIndex(fusion)

    def run(self) -> None:
        """One pass in topological order: every op sees concrete producers."""
        self._empty_extents()
        reshapes = {e.tv: e for e in self.info.reshapes}
        resizes: dict[int, list[ResizeEntry]] = {}
        for r in self.info.resizes:
            resizes.setdefault(r.tv, []).append(r)
        axes: dict[int, list[AxisEntry]] = {}
        for a in (*self.info.expands, *self.info.factories):
            axes.setdefault(a.tv, []).append(a)
        for expr in self.fusion.exprs():
            outputs = [o for o in expr.outputs if isinstance(o, TensorView)]
            if len(outputs) == 1 and outputs[0].name in reshapes:
                self._reshape(outputs[0].name, reshapes[outputs[0].name])
                continue
            for out in outputs:
                for axis_entry in axes.get(out.name, []):  # factories have no producer to follow
                    self._axis(axis_entry)
                self._resolve_outputs(expr, out)
                for resize in resizes.get(out.name, []):  # after its root axes are resolved
                    self._resize(resize)
        if self.substitutions:
            substitute_scalars(self.fusion, self.substitutions, self.index)
        self._check_no_symbolic()

    def _tv(self, name: int) -> TensorView:
        return self.tensors[name]

    def _constant(self, val: Scalar, value: int) -> None:
        if not val.is_const:
            self.substitutions[id(val)] = sm.const(value, DataType.Index)

    def _empty_extents(self) -> None:
        for index, axis in self.info.empty_extents:
            tv: TensorView = self.fusion.inputs[index]  # type: ignore[assignment]
            self._constant(tv.logical_no_reductions()[axis].maybe_expanded_extent, 0)

    def _reshape(self, name: int, entry: ReshapeEntry) -> None:
        old = self._tv(name)
        view = old.definition
        assert view is not None
        source: TensorView = view.input  # type: ignore[assignment]
        if entry.empty_shape is not None:
            shape = [sm.const(s, DataType.Index) for s in entry.empty_shape]
            new = full(shape, sm.const(0, old.dtype), old.dtype)
        else:
            assert entry.analysis is not None
            new = apply_view(source, entry.analysis)
        # Downstream axes copied the placeholder's extents: give them the real ones. An
        # extent the reshape took from upstream (`fd.ops.size(t, 2)` as a new size) is
        # upstream's too, and stays.
        # An axis the reshape left an expanded broadcast has the expanded extent's elements:
        # a sum over it adds that many (its broadcast extent, 1, would add one).
        upstream = _upstream_extents(source)
        for before, after in zip(old.logical, new.logical_no_reductions(), strict=True):
            if before.extent.definition is not None and id(before.extent) not in upstream:
                self.substitutions[id(before.extent)] = after.maybe_expanded_extent
        self.fusion.replace_val(old, new)
        self.fusion.remove_expr(view)
        self.tensors[new.name] = new

    def _resize(self, entry: ResizeEntry) -> None:
        tv = self._tv(entry.tv)
        out_id = tv.logical[entry.axis]
        resize = out_id.definition
        if not isinstance(resize, Resize):
            raise InternalError(f"{out_id} of T{tv.name} is not made by a Resize")
        in_id: IterDomain = resize.inputs[0]  # type: ignore[assignment]
        if entry.key[0] == "extents":
            _, in_extent, left, right = entry.key
            self._constant(in_id.maybe_expanded_extent, in_extent)  # type: ignore[arg-type]
            self._constant(resize.left, left)  # type: ignore[arg-type]
            self._constant(resize.right, right)  # type: ignore[arg-type]
        if entry.is_trivial:
            self.fusion.remove_expr(resize)
            self.index.replace(out_id, in_id)
            return
        iter_type = IterType.Broadcast if entry.iter_type == "Broadcast" else IterType.Iteration
        if entry.key[0] == "extents":
            size = sum(entry.key[1:])  # type: ignore[arg-type]
            new = out_id.clone_with(extent=sm.const(size, DataType.Index), iter_type=iter_type)
        else:  # only the IterType is known: the extent stays an expression
            new = out_id.clone_with(iter_type=iter_type)
        self.index.replace(out_id, new)

    def _axis(self, entry: AxisEntry) -> None:
        tv = self._tv(entry.tv)
        old = tv.logical[entry.axis]
        if entry.iter_type == "Expanded":
            new = old.clone_with(extent=self.fusion.one_val(), iter_type=IterType.Broadcast, expanded_extent=old.extent)
        elif entry.iter_type == "Broadcast":
            new = old.clone_with(extent=self.fusion.one_val(), iter_type=IterType.Broadcast)
        else:
            new = old.clone_with(iter_type=IterType.Iteration)
        self.index.replace(old, new)

    def _resolve_outputs(self, expr: Expr, out: TensorView) -> None:
        producers = producers_of(expr, out)
        for dim in list(out.domain.maybe_root):
            if not dim.is_symbolic:
                continue
            sources = producers.get(id(dim), [])
            data = [p for p in sources if p.is_iteration]
            if data:
                new = dim.clone_with(extent=data[0].extent, iter_type=IterType.Iteration)
            elif sources and all(p.is_broadcast for p in sources):
                expanded = next((p.expanded_extent for p in sources if p.expanded_extent is not None), None)
                new = dim.clone_with(
                    extent=self.fusion.one_val(), iter_type=IterType.Broadcast, expanded_extent=expanded
                )
            else:
                raise InternalError(f"cannot resolve {dim} of T{out.name}: producers {sources}")
            self.index.replace(dim, new)

    def _check_no_symbolic(self) -> None:
        for tv in self.fusion.used_tensors():
            for dim in tv.domain.all_ids():
                if dim.is_symbolic:
                    raise InternalError(f"{dim} of T{tv.name} is still Symbolic after concretization")


def _upstream_extents(tv: TensorView) -> set[int]:
    """The extents (by id) of every IterDomain of `tv` and of the tensors it is computed from."""
    extents: set[int] = set()
    stack, seen = [tv], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        extents.update(id(d.extent) for d in current.domain.all_ids())
        if current.definition is not None:
            stack.extend(v for v in current.definition.inputs if isinstance(v, TensorView))
    return extents
