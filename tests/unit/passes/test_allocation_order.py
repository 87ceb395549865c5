"""Allocation order: a user's stride_order is a requirement; inferred layouts are hints,
proposed only from an input that maps every axis (nvFuser #2425); inputs never change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core import DataType, FusionDefinition, load_repro
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.tensor_view import TensorView
from fuser_core.passes import run_presegmentation_passes
from fuser_core.passes.allocation_order import infer_allocation_hints, require_output_stride_orders

from ._helpers import assert_same_results, column_major, random_values

F = DataType.Float


def input_layouts(fusion: Fusion) -> list[tuple[object, ...]]:
    layouts: list[tuple[object, ...]] = []
    for tv in fusion.inputs:
        if isinstance(tv, TensorView):
            domain = tv.domain
            alloc = None if domain.allocation is None else [id(d) for d in domain.allocation]
            layouts.append((alloc, list(domain.contiguity), domain.allocation_is_hint))
    return layouts


def passed(fd: FusionDefinition) -> Fusion:
    """A copy of the fusion after the whole list; its inputs' layouts checked unchanged."""
    fusion, _ = fd.fusion.clone()
    before = input_layouts(fusion)
    run_presegmentation_passes(fusion)
    assert input_layouts(fusion) == before  # the data arrives as the inputs say
    return fusion


def names(ids: Sequence[IterDomain] | None) -> list[int] | None:
    return None if ids is None else [d.name for d in ids]


def allocation_of(tv: TensorView) -> tuple[list[int] | None, bool]:
    return names(tv.domain.allocation), tv.domain.allocation_is_hint


def logical_in(tv: TensorView, *positions: int) -> list[int]:
    return [tv.logical[p].name for p in positions]


def tensor(fd: FusionDefinition, rank: int, stride_order: list[int] | None = None) -> Any:
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=F, stride_order=stride_order)


# -- requirements ------------------------------------------------------------------------


def test_transpose_add_outputs_get_their_stride_order_as_requirements():
    (loaded,) = load_repro("sample_fusions/transpose_add.py").definitions
    fusion = passed(loaded.fd)
    t2, t4 = fusion.outputs
    assert allocation_of(t2) == (logical_in(t2, 1, 0), False)  # column-major, as asked
    assert allocation_of(t4) == (logical_in(t4, 0, 1), False)  # row-major, but required
    assert t4.domain.contiguity == [True, True]


def test_transpose_add_returns_its_outputs_in_the_required_layouts():
    (loaded,) = load_repro("sample_fusions/transpose_add.py").definitions
    x, y = column_major(random_values([64, 48], F, 1)), random_values([64, 48], F, 2)
    out2, out4 = loaded.fd.execute([x, y])
    assert out2.flags.f_contiguous and out4.flags.c_contiguous
    np.testing.assert_array_equal(out2, x + y)
    np.testing.assert_array_equal(out4, np.maximum(y.T, 0))


def test_a_reduction_output_requirement_keeps_its_reduction_axis_last():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(tensor(fd, 3), dims=[1]), stride_order=[0, 1])
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (logical_in(out, 2, 0, 1), False)
    assert out.domain.contiguity == [True, True, None]
    x = random_values([4, 5, 6], F)
    (result,) = fd.execute([x])
    assert result.flags.f_contiguous
    np.testing.assert_allclose(result, x.sum(axis=1, dtype=np.float64), rtol=1e-5)


def test_inference_leaves_a_requirement_alone():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.relu(tensor(fd, 2, [0, 1])), stride_order=[1, 0])
    fusion, _ = fd.fusion.clone()
    assert require_output_stride_orders(fusion)
    assert not infer_allocation_hints(fusion)
    (out,) = fusion.outputs
    assert allocation_of(out) == (logical_in(out, 0, 1), False)


# -- hints -------------------------------------------------------------------------------


def test_an_output_mapping_every_axis_of_a_column_major_input_gets_its_order_as_a_hint():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.relu(tensor(fd, 2, [0, 1])))
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (logical_in(out, 1, 0), True)
    x = column_major(random_values([6, 10], F))
    (result,) = fd.execute([x])
    assert result.flags.f_contiguous  # the pointwise kernel kept the hint
    np.testing.assert_array_equal(result, np.maximum(x, 0))


def test_a_hint_follows_any_permuted_input_and_intermediates_get_one_too():
    with FusionDefinition() as fd:
        x = tensor(fd, 3, [1, 2, 0])  # memory order: axis 1, axis 0, axis 2
        inner = fd.ops.relu(x)
        fd.add_output(fd.ops.exp(inner))
    fusion = passed(fd)
    (out,) = fusion.outputs
    relu = out.definition.inputs[0]
    assert allocation_of(out) == (logical_in(out, 1, 0, 2), True)
    assert allocation_of(relu) == (logical_in(relu, 1, 0, 2), True)
    assert_same_results(fd.fusion, fusion, [np.transpose(random_values([5, 4, 6], F), (1, 0, 2))])


def test_a_permuted_copy_of_a_row_major_input_is_proposed_as_a_plain_copy():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.relu(fd.ops.permute(tensor(fd, 2), [1, 0])))
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (logical_in(out, 1, 0), True)  # the input's memory order


def test_a_broadcast_axis_stays_behind_the_axis_before_it():
    with FusionDefinition() as fd:
        x = tensor(fd, 2, [0, 1])
        fd.add_output(fd.ops.relu(fd.ops.broadcast_in_dim(x, shape=[-1, 1, -1], broadcast_dims=[0, 2])))
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (logical_in(out, 2, 0, 1), True)
    assert out.domain.contiguity == [True, True, None]


def test_a_reduction_hint_keeps_the_reduction_axis_last():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(tensor(fd, 3, [0, 1, 2]), dims=[1]))
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (logical_in(out, 2, 0, 1), True)


def test_a_resize_keeps_the_mapping_and_a_reshape_ends_it():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[4, 6], contiguity=[True, True], dtype=F, stride_order=[0, 1])
        fd.add_output(fd.ops.pad(x, [1, 1, 0, 0]))
        fd.add_output(fd.ops.relu(fd.ops.reshape(x, [2, 12])))
    padded, reshaped = passed(fd).outputs
    assert allocation_of(padded) == (logical_in(padded, 1, 0), True)
    assert allocation_of(reshaped) == (None, False)


# -- the reference: the highest-rank input, and only if it maps every axis (#2425) -----


def test_linear_output_order_gets_no_permuted_output():
    (loaded,) = load_repro("sample_fusions/linear_output_order.py").definitions
    fusion = passed(loaded.fd)
    (out,) = fusion.outputs
    assert allocation_of(out) == (None, False)
    assert all(tv.domain.allocation is None for tv in fusion.used_tensors())


def test_no_hint_when_the_highest_rank_input_maps_only_some_axes():
    """out[m, n] = sum_k x[m, k] * w[n, k] with a column-major x: the naive rule would
    have laid the output out (n, m)."""
    with FusionDefinition() as fd:
        x, w = tensor(fd, 2, [0, 1]), tensor(fd, 2)
        xb = fd.ops.broadcast_in_dim(x, shape=[8, 4, 16], broadcast_dims=[0, 2])
        wb = fd.ops.broadcast_in_dim(w, shape=[8, 4, 16], broadcast_dims=[1, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(xb, wb), dims=[2]))
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (None, False)
    product = out.definition.inputs[0]  # [m, n, k]: x maps m and k, not n
    assert allocation_of(product) == (None, False)
    x_broadcast = product.definition.inputs[0]  # [m, 1, k]: all of x, so x's order
    assert allocation_of(x_broadcast) == (logical_in(x_broadcast, 2, 0, 1), True)
    x, w = column_major(random_values([8, 16], F)), random_values([4, 16], F, 1)
    (result,) = fd.execute([x, w])
    assert result.flags.c_contiguous
    np.testing.assert_allclose(result, x.astype(np.float64) @ w.T, rtol=1e-5)


def test_a_lower_rank_input_that_maps_every_axis_is_not_the_reference():
    with FusionDefinition() as fd:
        x, w = tensor(fd, 2, [0, 1]), tensor(fd, 3)
        scale = fd.ops.broadcast_in_dim(fd.ops.sum(w, dims=[1, 2]), shape=[-1, 1], broadcast_dims=[0])
        fd.add_output(fd.ops.mul(x, scale))
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (None, False)  # w (rank 3) misses the second axis


def test_between_inputs_of_one_rank_the_first_is_the_reference():
    def added(column_major_first: bool) -> FusionDefinition:
        with FusionDefinition() as fd:
            if column_major_first:
                col, row = tensor(fd, 2, [0, 1]), tensor(fd, 2)
            else:
                row, col = tensor(fd, 2), tensor(fd, 2, [0, 1])
            fd.add_output(fd.ops.add(col, row))  # the same operands either way
        return fd

    (out,) = passed(added(column_major_first=True)).outputs
    assert allocation_of(out) == (logical_in(out, 1, 0), True)
    (out,) = passed(added(column_major_first=False)).outputs
    assert allocation_of(out) == (None, False)  # the row-major input comes first


def test_a_reduction_kernel_drops_a_hint_and_says_why():
    with FusionDefinition() as fd:
        x = tensor(fd, 2, [0, 1])
        fd.add_output(fd.ops.relu(x))
        fd.add_output(fd.ops.sum(x, dims=[1]))
    x = column_major(random_values([8, 16], F))
    runtime = fd.runtime_for([x])
    relu_tv = runtime.segmented.complete.outputs[0]
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "reduction"
    assert group.record is not None and group.record.dropped_hints is not None
    (drop,) = group.record.dropped_hints
    assert drop.tensor == f"T{relu_tv.name}"
    assert "writes outputs in logical order" in drop.reason
    relu, total = fd.execute([x])
    assert relu.flags.c_contiguous  # the dropped hint is not what the kernel writes
    np.testing.assert_array_equal(relu, np.maximum(x, 0))
    np.testing.assert_allclose(total, x.sum(axis=1, dtype=np.float64), rtol=1e-5)


def test_a_long_chain_is_mapped_end_to_end():
    with FusionDefinition() as fd:
        t = tensor(fd, 2, [0, 1])
        for _ in range(500):
            t = fd.ops.neg(fd.ops.abs(t))
        fd.add_output(t)
    (out,) = passed(fd).outputs
    assert allocation_of(out) == (logical_in(out, 1, 0), True)
