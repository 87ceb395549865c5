"""Fusions the differential fuzzer (benchmarks/fuzz_gpu.py) found failing, in the small
form its shrinker gave: each runs on the reference backend, every generated kernel on
the kernel-IR interpreter against it (vectorized and scalar), and compiles for sm_90."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType
from fuser_core.codegen.kernel_ir import VectorCopy, walk
from fuser_core.codegen.lower import lower_group
from fuser_core.options import use_options
from fuser_core.runtime.group_lowering import index_dtype, lowered_groups

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels
from test_nvfuser_regressions import _check, _runtime

RNG = np.random.default_rng(669)


def _check_kernels_codegen_takes(build, inputs) -> list:
    """As `_check`, where a group may still run on the host (its refusal is tested apart)."""
    runtime, expected = _runtime(build, inputs)
    for vectorize in (True, False):
        check_generated_kernels(runtime, inputs, vectorize=vectorize)
    return expected


def _check_split_for_a_tie(build, x):
    """The fusion's reduction refused for a tie of its iteration axis to its reduced axis,
    run as a reduction and a pointwise kernel, each checked: the outputs."""
    runtime, _ = _runtime(build, [x])
    assert "is resized or reshaped onto its own reduced axis" in " ".join(
        r.reason for a in runtime.segmented.attempts for r in a.rejections
    )
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction", "pointwise"]
    return _check(build, [x])


def test_an_unused_welford_sibling_is_concretized_with_the_padded_one():
    # welford then pad of its variance: concretization gave the pad's path constant
    # extents but left Welford's unused avg and count on the symbolic one ("i1 has no value")
    def build(fd):
        t0 = fd.define_tensor(shape=[2, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        _, var, _ = fd.ops.welford(t0, dims=[0])
        fd.add_output(fd.ops.pad(var, pad_widths=[1, 4], value=0.5))

    x = RNG.standard_normal((16, 2)).astype(np.float32).T
    (out,) = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_allclose(out[1:-4], x.var(axis=0) * 2, rtol=1e-5)
    assert (out[[0, -4, -3, -2, -1]] == 0.5).all()


def test_a_cat_keeps_the_pads_of_its_pieces_in_its_segment():
    # a segment_set before one piece of a cat: the segmenter put that piece's pad in the
    # producer's segment, and the cat then read an unpadded global tensor
    def build(fd):
        t0 = fd.define_tensor(shape=[1], contiguity=[None], dtype=DataType.Half)
        t1 = fd.ops.broadcast_in_dim(t0, shape=[8, 129, 1], broadcast_dims=[2])
        fd.add_output(fd.ops.cat([fd.ops.segment_set(t1), t1], dim=0))

    x = RNG.standard_normal(1).astype(np.float16)
    runtime, _ = _runtime(build, [x])
    cat_group = next(g for g in runtime.segmented.groups if any(type(e).__name__ == "CatOp" for e in g.exprs))
    assert sum(type(e).__name__ == "PadOp" for e in cat_group.exprs) == 2
    (out,) = _check_kernels_codegen_takes(build, [x])
    assert out.shape == (16, 129, 1) and (out == x[0]).all()


def test_a_pad_of_an_expanded_axis_keeps_every_expanded_element():
    # the pad's bounds check used the broadcast's extent 1, not its expanded extent: all
    # but the first column read the pad value
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, None], dtype=DataType.Half)
        s1 = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.pad(t0, pad_widths=[0, s1], value=3.0))

    x = np.broadcast_to(RNG.standard_normal((5, 1)).astype(np.float16), (5, 8))
    (out,) = _check(build, [x, 3])
    np.testing.assert_array_equal(out[:, :8], x)
    assert (out[:, 8:] == 3.0).all()


def test_a_reduction_vector_stays_within_a_short_input_row():
    # an input of 2 elements broadcast along a sliced axis merged into the reduction:
    # the reduction read it in vectors of 4 (past its end); a side output before the
    # expand was resized to a negative extent
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        t2 = fd.ops.cast(fd.ops.broadcast(t0, is_broadcast_dim=[True, True, False]), dtype=DataType.BFloat16)
        t3 = fd.ops.pad(t2, pad_widths=[2, 1], value=-0.75)
        t4 = fd.ops.expand(t2, shape=[31, 16, 2])
        t7 = fd.ops.slice(t4, start_indices=[0, 1, 0], end_indices=[fd.ops.size(t4, dim=0), 11, fd.ops.size(t4, dim=2)])
        fd.add_output(fd.ops.sum(t7, dims=[0, 1, 2], keepdim=False, dtype=DataType.Null))
        fd.add_output(t3)

    x = np.array([3, -2], dtype=np.int32)
    runtime, _ = _runtime(build, [x])
    refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1]
    assert all(g.id not in refused for g in runtime.segmented.groups if g.scheduler.value == "reduction")
    total, padded = _check_kernels_codegen_takes(build, [x])
    assert float(total) == 31 * 10 * 1
    np.testing.assert_array_equal(padded.astype(np.float32).ravel(), [-0.75, -0.75, 3, -2, -0.75])


def test_an_output_before_a_slice_is_written_whole():
    # the pointwise kernel iterated the slice's window (its reference) and wrote only
    # that window of the output the slice was taken from
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Double)
        t1 = fd.ops.add(0.5, t0)
        t2 = fd.ops.pad(t1, pad_widths=[2, 0, 0, 2], value=0.001)
        fd.add_output(fd.ops.slice(t2, start_indices=[0, 285], end_indices=[4, 511]))
        fd.add_output(t1)

    x = RNG.standard_normal((2, 511))
    runtime, _ = _runtime(build, [x])
    assert len(runtime.segmented.groups) == 2
    reasons = " ".join(r.reason for a in runtime.segmented.attempts for r in a.rejections)
    assert "is written whole, but the reference" in reasons
    sliced, shifted = _check(build, [x])
    np.testing.assert_array_equal(shifted, x + 0.5)
    np.testing.assert_array_equal(sliced[:2], (x + 0.5)[:, 283:509])


def test_an_outer_welford_accumulates_across_its_serial_loops():
    # var_mean over the outer axis: Welford's running (avg, M2, N) was declared inside the
    # serial reduction loops (reset every iteration) and stored once per iteration
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 16], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(t0, dims=[0], correction=1, keepdim=False)
        fd.add_output(var)
        fd.add_output(mean)

    x = RNG.standard_normal((37, 16)).astype(np.float32)
    var, mean = _check(build, [x])
    np.testing.assert_allclose(var, x.var(axis=0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(mean, x.mean(axis=0), rtol=1e-5, atol=1e-6)


def test_a_reshape_to_an_upstream_size_keeps_that_size():
    # reshape(t, [size(t,0) * size(t,1), size(t,2)]) after a pad: concretizing the reshape
    # replaced the pad's own extent, shared as the new size, and left it unbound
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Double)
        t2 = fd.ops.abs(fd.ops.pad(t0, pad_widths=[3, 0], value=0.5))
        rows = fd.ops.mul(fd.ops.size(t2, dim=0), fd.ops.size(t2, dim=1))
        fd.add_output(fd.ops.reshape(t2, new_shape=[rows, fd.ops.size(t2, dim=2)]))

    x = RNG.standard_normal((3, 127, 3))
    (out,) = _check(build, [x])
    assert out.shape == (381, 6)
    np.testing.assert_array_equal(out[:, 3:], np.abs(x).reshape(381, 3))


def test_a_broadcast_shaped_output_is_not_the_reference_of_a_bigger_one():
    # [1, 5] and [31, 5] outputs: the [1, 5] one covered the other only through its
    # broadcast, yet was chosen, and the kernel launched for 5 elements of 155
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t2 = fd.define_tensor(shape=[1, 5], contiguity=[None, True], dtype=DataType.Float)
        t3 = fd.ops.sin(t2)
        fd.add_output(fd.ops.remainder(t0, t3))
        fd.add_output(t3)

    x0 = RNG.standard_normal((31, 5)).astype(np.float32)
    x2 = RNG.standard_normal((1, 5)).astype(np.float32)
    runtime, _ = _runtime(build, [x0, x2])
    assert runtime.segmented.groups[0].params.elements == 155
    _check(build, [x0, x2])


def test_a_reduction_broadcast_back_along_its_own_reduced_axis_is_split():
    # sum over axis 1 of [1, S1, S2] keeps the size-1 axis, which `where` then broadcasts
    # along S1, the reduced axis: the reduction kernel wrote S2 of the S1 * S2 elements
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t3 = fd.ops.broadcast_in_dim(
            t0, shape=[1, fd.ops.size(t0, dim=0), fd.ops.size(t0, dim=1)], broadcast_dims=[1, 2]
        )
        t4 = fd.ops.sum(t3, dims=[1], keepdim=False, dtype=DataType.Null)
        fd.add_output(fd.ops.where(fd.ops.lt(t0, -1.25), t4, t0))

    x = RNG.standard_normal((64, 16)).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    assert "broadcast along its own reduced axis" in " ".join(
        r.reason for a in runtime.segmented.attempts for r in a.rejections
    )
    (out,) = _check(build, [x])
    np.testing.assert_allclose(out, np.where(x < -1.25, x.sum(axis=0), x), rtol=1e-5, atol=1e-5)


def test_reduction_vectors_follow_each_input_through_reshapes():
    # a permuted input reshaped to 1-D was read in vectors of 4 along its outer axis; an
    # input broadcast along the vector axis was read as 8 consecutive elements
    def permuted(fd):
        t1 = fd.define_tensor(shape=[3, 8], contiguity=[True, True], dtype=DataType.Int32)
        flat = fd.ops.reshape(fd.ops.permute(t1, dims=[1, 0]), new_shape=[24])
        fd.add_output(fd.ops.max(flat, dims=[0], keepdim=False, dtype=DataType.Null))

    def broadcast(fd):
        t0 = fd.define_tensor(shape=[7], contiguity=[True], dtype=DataType.Half)
        t2 = fd.ops.broadcast_in_dim(t0, shape=[7, 32], broadcast_dims=[0])
        t7 = fd.ops.reshape(t2, new_shape=[7, 8, 4])
        fd.add_output(fd.ops.sum(t7, dims=[0, 1, 2], keepdim=False, dtype=DataType.Null))

    x = RNG.integers(-100, 100, (3, 8)).astype(np.int32)
    assert _check(permuted, [x])[0] == x.max()
    h = RNG.standard_normal(7).astype(np.float16)
    np.testing.assert_allclose(_check(broadcast, [h])[0], h.astype(np.float32).sum() * 32, rtol=1e-2)


def test_an_output_in_the_users_stride_order_is_stored_along_its_innermost_axis():
    # an output given stride_order [0, 1] got vector stores along its logical inner axis
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        t3 = fd.ops.cast(fd.ops.reshape(t0, new_shape=[2, 4]), dtype=DataType.Float)
        total = fd.ops.sum(fd.ops.mul(t3, t3), dims=[0, 1], keepdim=False, dtype=DataType.Null)
        scale = fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(fd.ops.div(total, 8), 1e-06)), [2, 4], [])
        fd.add_output(fd.ops.mul(t3, scale))
        fd.add_output(t3, stride_order=[0, 1])

    x = RNG.standard_normal(8).astype(DataType.BFloat16.numpy)
    _check(build, [x])


def test_a_half_reduction_is_rounded_to_half_before_its_consumers():
    # max of Half accumulates in float; a cat of two slices of it mixed float and Half in
    # one `where` (NVRTC: no instance of "where"), and consumers saw the unrounded value
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 128], contiguity=[True, True], dtype=DataType.Half, stride_order=[0, 1])
        t1 = fd.ops.max(t0, dims=[1], keepdim=True, dtype=DataType.Null)
        t4 = fd.ops.cat([fd.ops.slice(t1, [1, 0], [3, 1]), fd.ops.slice(t1, [0, 0], [1, 1])], dim=0)
        fd.add_output(fd.ops.sub_alpha(t4, t1, -1.0))

    x = np.asfortranarray(RNG.standard_normal((3, 128)).astype(np.float16))
    _check(build, [x])


def test_a_reduction_reading_an_input_directly_and_through_a_cat_of_its_slices_is_scalar():
    # the input was read in vectors of 4 both directly and at the cat's offset 97: the
    # second read ran past the end of the buffer
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        rows = fd.ops.size(t0, dim=0)
        t6 = fd.ops.cat([fd.ops.slice(t0, [0, 97], [rows, 128]), fd.ops.slice(t0, [0, 0], [rows, 97])], dim=1)
        t7 = fd.ops.tanh(t0)
        fd.add_output(fd.ops.sum(fd.ops.cast(fd.ops.gt(t6, t7), dtype=DataType.Half), dims=[1], keepdim=False))
        fd.add_output(t7)

    x = RNG.standard_normal((5, 128)).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    assert runtime.segmented.groups[0].params.vectorize == 1
    _check(build, [x])


def test_an_output_iterating_what_the_reference_only_broadcasts_gets_its_own_kernel():
    # outputs pad(T1) [N, 1, 11] and ne(T0, T1) [8, N, 5]: the pad output covered the other
    # only through its size-1 axis and was chosen, so ne's output was written in part
    def build(fd):
        t0 = fd.define_tensor(shape=[8, -1, -1], contiguity=[True, True, True], dtype=DataType.Double)
        t1 = fd.define_tensor(shape=[-1, 1, 5], contiguity=[True, None, True], dtype=DataType.Double)
        fd.add_output(fd.ops.pad(t1, pad_widths=[2, 4, 0, 0], value=0.001))
        fd.add_output(fd.ops.ne(t0, t1))

    x0, x1 = RNG.standard_normal((8, 3, 5)), RNG.standard_normal((8, 1, 5))
    runtime, _ = _runtime(build, [x0, x1])
    assert len(runtime.segmented.groups) == 2
    _padded, unequal = _check(build, [x0, x1])
    np.testing.assert_array_equal(unequal, x0 != x1)


def test_a_welford_over_a_size_1_axis_is_read_by_its_consumers():
    # var_mean over a broadcast axis, its mean summed: reading the Welford result walked the
    # loop transforms of the reduced axis, which had no index (KeyError in lowering)
    def build(fd):
        t0 = fd.define_tensor(shape=[2], contiguity=[None], dtype=DataType.Double)
        _, mean = fd.ops.var_mean(fd.ops.broadcast(t0, is_broadcast_dim=[True, False]), dims=[0], correction=0)
        fd.add_output(fd.ops.sum(mean, dims=[0], keepdim=True, dtype=DataType.Null))

    x = np.broadcast_to(RNG.standard_normal(1), (2,))
    (out,) = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_allclose(out, [2 * x[0]])


def test_a_permuted_output_beside_a_reduction_over_a_broadcast_axis_is_stored_element_by_element():
    # welford over every axis of [1024, N, 1]: the vector axis was the reduced size-1 axis,
    # which no output holds, so a permuted output [N, 1, 1024] got vector stores (misaligned
    # on the GPU, and two elements 1024 apart written as neighbours)
    def build(fd):
        t0 = fd.define_tensor(shape=[64, -1, 1], contiguity=[True, True, None], dtype=DataType.Double)
        t1 = fd.ops.cast(t0, dtype=DataType.Float)
        avg, _, _ = fd.ops.welford(t1, dims=[0, 1, 2])
        fd.add_output(fd.ops.permute(fd.ops.permute(t1, dims=[2, 0, 1]), dims=[2, 0, 1]))
        fd.add_output(avg)
        fd.add_output(fd.ops.squeeze(t0, dims=[2]))

    x = RNG.standard_normal((64, 6, 1))
    runtime, _ = _runtime(build, [x])
    assert runtime.segmented.groups[0].params.vectorize == 1
    permuted, avg, squeezed = _check(build, [x])
    np.testing.assert_array_equal(permuted, x.astype(np.float32).transpose(1, 2, 0))
    np.testing.assert_allclose(avg, x.mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(squeezed, x[:, :, 0])


def test_a_half_sum_split_across_threads_adds_its_partials_in_float():
    # the rfactor partial of a Half sum was a Half tensor: each thread's partial sum was
    # rounded to Half before the block added them, so the sum was rounded twice, and an
    # fmod of it (discontinuous) differed from the reference in 44% of its elements
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=DataType.Half)
        t1 = fd.ops.sum(t0, dims=[0], keepdim=True, dtype=DataType.Null)
        fd.add_output(t1)
        fd.add_output(fd.ops.fmod(t1, t0))

    x = (RNG.standard_normal((64, 16, 1)) * 4).astype(np.float16)
    total, _ = _check(build, [x])
    np.testing.assert_array_equal(total, x.astype(np.float64).sum(axis=0, keepdims=True).astype(np.float16))


def test_a_reduction_output_beside_an_expanded_one_is_written_outside_the_serial_reduction_loops():
    # var_mean over an expanded axis, with x - mean as an output expanded along it: the
    # variance was written inside the reduction's serial unrolled loop, twice per element
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=DataType.Float)
        t1 = fd.ops.expand(t0, shape=[128, 3, 3])
        var, mean = fd.ops.var_mean(t1, dims=[2], correction=0, keepdim=False)
        fd.add_output(fd.ops.sub(t1, fd.ops.broadcast_in_dim(mean, shape=[128, 3, 3], broadcast_dims=[0, 1])))
        fd.add_output(var)

    x = RNG.standard_normal((128, 3, 1)).astype(np.float32)
    centered, var = _check(build, [x])
    np.testing.assert_allclose(var, np.zeros((128, 3)), atol=1e-6)
    np.testing.assert_allclose(centered, np.zeros((128, 3, 3)), atol=1e-6)


def test_an_input_broadcast_to_different_axes_of_two_outputs_carries_no_transforms_between_them():
    # a [1, 1, 5-expanded] input added to a [B, R, C] tensor and to a sum over R: the sum's
    # output took its transforms through the input's broadcast axis from R, and was
    # indexed by the reduction's loops (every element wrong)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Double)
        t1 = fd.define_tensor(shape=[1, 1, 5], contiguity=[None, None, None], dtype=DataType.Double)
        fd.add_output(fd.ops.add(t1, fd.ops.broadcast(fd.ops.sum(t0, dims=[1]), is_broadcast_dim=[False, False, True])))
        fd.add_output(fd.ops.addcmul(t1, t0, t0, 1.0))

    x = RNG.standard_normal((2, 5, 5))
    row = np.broadcast_to(RNG.standard_normal((1, 1, 1)), (1, 1, 5))
    plus_sum, _ = _check(build, [x, row])
    np.testing.assert_allclose(plus_sum, row + x.sum(axis=1)[:, :, None], rtol=1e-12)


def test_an_output_written_after_a_grid_reduction_closes_is_written_by_the_first_block():
    # a permuted [1, 1, 1] output beside a grid sum: its write was predicated on the grid
    # reduction's `last` flag outside the scope that declares it (NVRTC: last_T8 undefined)
    def build(fd):
        t0 = fd.define_tensor(shape=[1, 1, 1], contiguity=[None, None, None], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Int32)
        fd.add_output(fd.ops.sum(fd.ops.permute(t1, dims=[0, 2, 1]), dims=[2], keepdim=False))
        fd.add_output(fd.ops.permute(t0, dims=[2, 1, 0]))

    x0 = RNG.standard_normal((1, 1, 1)).astype(np.float32)
    x1 = RNG.integers(-9, 9, (7, 256, 5)).astype(np.int32)
    total, same = _check_kernels_codegen_takes(build, [x0, x1])
    np.testing.assert_array_equal(total, x1.sum(axis=1))
    np.testing.assert_array_equal(same, x0)


def test_an_expanded_output_upstream_of_slices_of_its_expanded_axis_gets_its_own_kernel():
    # expand(t0) as an output, its comparison sliced at 15 and catted and padded as the
    # other: the expanded output was to be written where its sliced index was first valid,
    # which the padded loops never reached, so it was not written at all (seed 6 case 4200)
    def build(fd):
        t0 = fd.define_tensor(shape=[1, 1, 1], contiguity=[None, None, None], dtype=DataType.Float)
        t5 = fd.ops.expand(t0, shape=[64, 33, 2])
        t6 = fd.ops.ge(t5, t0)
        t10 = fd.ops.slice(t6, start_indices=[0, 0, 0], end_indices=[64, 15, 2])
        t12 = fd.ops.slice(t6, start_indices=[0, 15, 0], end_indices=[64, 33, 2])
        fd.add_output(fd.ops.pad(fd.ops.cat([t12, t10], dim=1), pad_widths=[1, 2, 2, 4], value=True))
        fd.add_output(t5)

    x = RNG.standard_normal((1, 1, 1)).astype(np.float32)
    padded, expanded = _check_kernels_codegen_takes(build, [x])
    assert (expanded == x[0, 0, 0]).all() and expanded.shape == (64, 33, 2)
    assert padded.shape == (64, 39, 5) and padded.all()


def test_a_transpose_of_a_reshaped_reduction_input_is_stored_element_by_element():
    # prod over reshape(T1) [32], with the transpose of T1 as an output: the vector axis
    # (the reshape's) reaches the transpose only through its inner component, which is not
    # the transpose's innermost axis; it got misaligned vector stores (seed 7 case 2164)
    def build(fd):
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        flat = fd.ops.reshape(t1, new_shape=[32])
        fd.add_output(fd.ops.prod(flat, dims=[0]))
        fd.add_output(flat)
        fd.add_output(fd.ops.permute(t1, dims=[1, 0]))

    x = (RNG.standard_normal((4, 8)) * 0.5 + 1).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    assert runtime.segmented.groups[0].params.vectorize == 1
    product, _, transposed = _check(build, [x])
    np.testing.assert_allclose(product, np.prod(x.astype(np.float64)), rtol=1e-5)
    np.testing.assert_array_equal(transposed, x.T)


def test_a_staged_transpose_input_that_broadcasts_an_iterated_axis_is_not_tiled():
    # minimum of [1, 64, 32, 3] (permuted layout) and [1, 64, 32, 1]: the second was staged
    # through shared memory with a block index of its own axes, so blocks past the first
    # along the broadcast axis loaded no tile and wrote 0 (seed 7 case 1769)
    def build(fd):
        t0 = fd.define_tensor(shape=[1, 64, -1, -1], contiguity=[True, True, None, True], dtype=DataType.Float,
                              stride_order=[1, 0, 2, 3])  # fmt: skip
        t1 = fd.define_tensor(shape=[1, -1, -1, 1], contiguity=[None, None, True, True], dtype=DataType.Float,
                              stride_order=[3, 1, 0, 2])  # fmt: skip
        fd.add_output(fd.ops.minimum(t0, t1))

    base = RNG.standard_normal(6144).astype(np.float32)
    x0 = np.lib.stride_tricks.as_strided(base, (1, 64, 32, 3), (4, 4, 256, 8192))
    x1 = RNG.standard_normal((1, 64, 32, 1)).astype(np.float32)
    runtime, _ = _runtime(build, [x0, x1])
    assert [g.scheduler.value for g in runtime.segmented.groups] != ["transpose"]
    (out,) = _check(build, [x0, x1])
    np.testing.assert_array_equal(out, np.minimum(x0, x1))


def test_a_var_mean_over_an_expanded_axis_stays_a_welford():
    # var_mean over [N, 3-expanded]: its two-pass translation summed the expanded axis as a
    # scaled squeeze, so the kernel had no reduction to schedule from (IndexError, seed 9
    # case 2196)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, None], dtype=DataType.Float)
        _, mean = fd.ops.var_mean(t0, dims=[0, 1], correction=0, keepdim=False)
        fd.add_output(fd.ops.sub(t0, fd.ops.broadcast_in_dim(mean, shape=[512, 3], broadcast_dims=[])))

    x = np.broadcast_to(RNG.standard_normal((512, 1)).astype(np.float32), (512, 3))
    (out,) = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_allclose(out, x - x.mean(), rtol=1e-5, atol=1e-5)


def test_an_output_expanded_along_the_reduction_vector_is_stored_element_by_element():
    # var_mean over [.., i6, 2-expanded] with x - mean as an output expanded along that
    # axis: the vector ran along the expanded axis, which the output stores once (vector
    # stores past its end), and a tensor lacking that axis took the vector split's bounds
    # check once per vector though the split does not divide its shorter axis (seed 10
    # case 2000)
    def build(fd):
        t1 = fd.define_tensor(shape=[512, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        t4 = fd.ops.broadcast_in_dim(t1, shape=[3, 512, 3, 2], broadcast_dims=[1, 2])
        t5 = fd.ops.cast(t4, dtype=DataType.Double)
        _, mean = fd.ops.var_mean(t5, dims=[2, 3], correction=0, keepdim=False)
        fd.add_output(fd.ops.sub(t5, fd.ops.broadcast_in_dim(mean, shape=[3, 512, 3, 2], broadcast_dims=[0, 1])))

    x = RNG.standard_normal((512, 3)).astype(DataType.BFloat16.numpy)
    runtime, _ = _runtime(build, [x])
    assert runtime.segmented.groups[0].params.vectorize == 1
    (out,) = _check_kernels_codegen_takes(build, [x])
    wide = x.astype(np.float64)
    np.testing.assert_allclose(out[0, :, :, 0], wide - wide.mean(axis=1, keepdims=True), rtol=1e-6, atol=1e-6)


def test_an_outer_persistent_kernel_keeps_its_buffers_where_its_lowering_expects_them():
    # min over the padded rows, compared back against every element: the outer persistent
    # scheduler's estimate that its buffer outgrows registers moved the buffer into shared
    # memory, a layout only the inner persistent schedule makes (lowering: KeyError; seed
    # 16 case 1739 on the H200)
    def build(fd):
        t0 = fd.define_tensor(shape=[1025, -1], contiguity=[True, True], dtype=DataType.Double)
        t2 = fd.ops.pad(fd.ops.cos(t0), pad_widths=[3, 0, 3, -1], value=2.0)
        t7 = fd.ops.neg(fd.ops.acosh(fd.ops.add(fd.ops.abs(t2), 1.25)))
        t9 = fd.ops.lt(fd.ops.min(t7, dims=[0], keepdim=True, dtype=DataType.Null), t7)
        fd.add_output(fd.ops.slice(fd.ops.permute(t9, dims=[1, 0]), start_indices=[6, 614], end_indices=[7, 800]))
        fd.add_output(t7)

    x = RNG.standard_normal((1025, 5))
    sliced, t7 = _check_kernels_codegen_takes(build, [x])
    assert t7.shape == (1027, 8) and sliced.shape == (1, 186)


def test_a_reduction_of_a_reshape_stores_a_stride_ordered_output_along_its_innermost_axis():
    # min over the flattened [8, 32] input beside relu of the input stored with stride_order
    # [0, 1]: the vector ran along the reshape's inner component (32), which that output
    # holds last in logical order but strided in memory; vector stores of 2 went along it
    # (misaligned on the H100, wrong elements besides: seed 16 case 839)
    def build(fd):
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int)
        flat = fd.ops.reshape(t1, new_shape=[fd.ops.mul(fd.ops.size(t1, dim=0), fd.ops.size(t1, dim=1))])
        fd.add_output(fd.ops.min(flat, dims=[0], keepdim=True, dtype=DataType.Null))
        fd.add_output(fd.ops.relu(t1), stride_order=[0, 1])

    x = RNG.integers(-100, 100, (8, 32)).astype(np.int64)
    smallest, relu = _check_kernels_codegen_takes(build, [x])
    assert smallest[0] == x.min()
    np.testing.assert_array_equal(relu, np.maximum(x, 0))


def test_a_slice_of_the_rows_a_cat_summed_is_read_again_after_the_sum():
    # the tail slice of the rows plus the column sums of a cat of both slices: the slice's
    # axis is a window of the summed cat axis, which persistence did not see, so the plain
    # reduction scheduler split the rows over blockIdx.y and every block but the grid
    # reduction's last added its own partial sum (seed 16 case 973)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 8], contiguity=[True, True], dtype=DataType.Int32)
        head = fd.ops.slice(t0, start_indices=[0, 0], end_indices=[1295, 8])
        tail = fd.ops.slice(t0, start_indices=[1295, 0], end_indices=[2048, 8])
        total = fd.ops.sum(fd.ops.cat([tail, head], dim=0), dims=[0], keepdim=True, dtype=DataType.Null)
        fd.add_output(fd.ops.add_alpha(tail, total, arg3=3))

    x = RNG.integers(-100, 100, (2048, 8)).astype(np.int32)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["outer_persistent"]  # one block per column
    (out,) = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_array_equal(out, x[1295:] + 3 * x.sum(axis=0, dtype=np.int64))


# -- seed 16 on the H100: cases 2905, 3427 and 3678 ---------------------------------------


def test_a_value_computed_from_a_grid_reduction_outside_its_loops_is_written_by_its_last_block():
    # var_mean over every axis as a grid Welford, erf of the mean, then a sum over the one
    # (broadcast) axis left, a squeeze: the output, written outside the loops the grid
    # reduction closes, was written by block 0 with its own partial mean instead of by the
    # last block, the one that holds the combined result (seed 16 case 3678)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=DataType.Double)
        _, mean = fd.ops.var_mean(t0, dims=[0, 1], correction=1, keepdim=False)
        fd.add_output(fd.ops.sum(fd.ops.erf(mean), dims=[0], keepdim=True, dtype=DataType.Null))

    x = RNG.standard_normal((2048, 5, 1)) + 0.25
    runtime, _ = _runtime(build, [x])
    assert runtime.segmented.groups[0].params.grid_reduction > 1
    (out,) = _check(build, [x])  # and compiles: the flag is read outside its scope
    np.testing.assert_allclose(out, [math.erf(x.mean())], rtol=1e-12)


def test_a_welford_mean_of_integers_is_their_sum_over_their_count():
    # welford of an int32 row cast to float, then var_sum / avg: the serial update
    # `avg += delta / n` rounded at every element, so the row [-1, -1, 3, -1] got the
    # mean 3e-8 and the quotient 4e8 where the reference (and torch) have 0 and inf
    # (seed 16 case 2905)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 4], contiguity=[True, True, True], dtype=DataType.Int32)
        avg, var_sum, _ = fd.ops.welford(fd.ops.cast(t0, dtype=DataType.Float), dims=[2])
        fd.add_output(fd.ops.truediv(var_sum, avg))
        fd.add_output(avg)

    x = RNG.integers(-9, 10, (3, 64, 4)).astype(np.int32)
    x[2, 20] = [-1, -1, 3, -1]
    x[0, 5] = [7, -3, -3, -1]
    quotient, avg = _check(build, [x])
    np.testing.assert_array_equal(avg, x.sum(axis=2) / np.float32(4))
    assert np.isinf(quotient[2, 20]) and np.isinf(quotient[0, 5])


def test_a_welford_mean_of_one_repeated_value_is_that_value():
    # var_mean over every axis of an expanded scalar (a grid Welford: 21 elements a
    # thread), then (x - mean) * rsqrt(var + eps): each thread's running sum of 21 copies
    # of the value rounded, its mean was an ulp off, and the kernel's output 1e-4 where
    # the reference (and torch, nvFuser) have 0 (CPU fuzzer seed 12 case 257); a row-wise
    # Welford of constant rows likewise (the kernels' outputs are checked against these)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[None, None], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(t0, dims=[0, 1], correction=0, keepdim=False)
        scale = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5, dtype=DataType.Double)))
        fd.add_output(fd.ops.mul(fd.ops.sub(t0, mean), scale))
        fd.add_output(mean)

    x = np.broadcast_to(np.float32(7.7), (32, 31))
    normalized, mean = _check(build, [x])
    assert mean == np.float32(7.7) and not normalized.any()

    def rows(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        avg, var_sum, _ = fd.ops.welford(t0, dims=[1])
        fd.add_output(avg)
        fd.add_output(var_sum)

    y = np.repeat((RNG.standard_normal((6, 1)) * 5).astype(np.float32), 999, axis=1)
    avg, var_sum = _check(rows, [y])
    np.testing.assert_array_equal(avg, y[:, 0])
    assert not var_sum.any()
    # rows of four, a thread's each: an infinite first element is not the shift (every
    # x - inf would be NaN): the mean stays inf
    z = np.repeat(np.float32([[1.5], [np.inf], [-np.inf]]), 4, axis=1)
    z[1:, 1:] = 2.0
    avg, _ = _check(rows, [z])
    np.testing.assert_array_equal(avg, [1.5, np.inf, -np.inf])


def test_a_float_past_the_integer_range_converts_as_the_gpu_converts_it():
    # two products of halves over overflowing rows, cast to Int32: the reference and the
    # interpreter converted NaN and +inf (and any float past the range) to INT_MIN, NumPy's
    # x86 answer; a kernel's C cast on the GPU (and torch on CUDA) saturates and takes NaN
    # to 0 (seed 16 case 3427: inf * 0 in the kernel's product order, 0 in torch's)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
        t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        product = fd.ops.prod(fd.ops.cast(t0, dtype=DataType.Float), dims=[0], keepdim=False, dtype=DataType.Null)
        fd.add_output(fd.ops.cast(product, dtype=DataType.Int32))
        fd.add_output(fd.ops.cast(t1, dtype=DataType.Int32))
        fd.add_output(fd.ops.cast(t1, dtype=DataType.Int))

    rows = np.ones((16, 8), np.float16)
    rows[:, 0] = 300  # 300**16: +inf in float
    rows[:, 1] = 300
    rows[0, 1] = -300  # -inf
    rows[:, 2] = 300
    rows[9, 2] = 0  # inf * 0 (NaN) or 0, by the order of the products
    rows[3, 3], rows[5, 4] = 2.5, -2.5
    special = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -0.75, 7.5], np.float32)
    product, as_int32, as_int64 = _check(build, [rows, special])
    big, small = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    np.testing.assert_array_equal(product, [big, small, 0, 2, -2, 1, 1, 1])
    np.testing.assert_array_equal(as_int32, [0, big, small, big, small, big, 0, 7])
    np.testing.assert_array_equal(as_int64[:5], [0, 2**63 - 1, -(2**63), 3_000_000_000, -3_000_000_000])
    np.testing.assert_array_equal(as_int64[5:], [2**63 - 1, 0, 7])


# -- seed 17 on the H100: case 308 --------------------------------------------------------


def test_a_mean_over_a_reshape_added_back_to_its_unreshaped_input_is_persistent():
    # var_mean of a [16, 511] input reshaped to one axis, its mean broadcast back and added
    # to the input: the add iterates the axes the reshape merged into the reduced one, which
    # persistence did not see through the reshape, so the plain reduction scheduler split
    # the row over blockIdx.y and the first block added its own partial mean to its half
    # of the output (seed 17 case 308)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        _, mean = fd.ops.var_mean(fd.ops.reshape(t0, new_shape=[8176]), dims=[0], correction=1, keepdim=False)
        wide = fd.ops.broadcast_in_dim(mean, shape=[fd.ops.size(t0, dim=0), 511], broadcast_dims=[])
        fd.add_output(fd.ops.add(t0, wide))

    x = RNG.standard_normal((16, 511)).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_persistent"]  # one block per row
    (out,) = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_allclose(out, x + x.mean(dtype=np.float64), rtol=1e-5, atol=1e-5)


# -- seed 17 on the H100: case 3939 -------------------------------------------------------


def test_an_input_times_the_sum_of_its_flattened_padded_elements_is_persistent():
    # x [16, 1024] times the sum of pad(reshape(x, [16384])): the product iterates the two
    # axes the reshape merged (and the pad widened) into the reduced one, which persistence
    # did not see through the reshape, so the plain reduction scheduler split the row over
    # blockIdx.y and every block but the last multiplied x by its own partial sum (seed 17
    # case 3939; the same cause as case 308, with a pad between the reshape and the sum)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 1, 1], contiguity=[True, True, None, None], dtype=DataType.Int32)
        flat = fd.ops.reshape(t0, new_shape=[16384])
        total = fd.ops.sum(fd.ops.pad(flat, [3, 2], value=1), dims=[0], keepdim=True, dtype=DataType.Null)
        fd.add_output(fd.ops.mul(t0, fd.ops.broadcast_in_dim(total, shape=[16, 1024, 1, 1], broadcast_dims=[0])))

    x = RNG.integers(-9, 10, (16, 1024, 1, 1)).astype(np.int32)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_persistent"]  # one block per row
    (out,) = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_array_equal(out, x.astype(np.int64) * (int(x.sum()) + 5))  # + 3 and 2 pad ones


# -- seed 18 on the H100: case 258 --------------------------------------------------------


def test_the_negation_of_a_negative_full_compiles():
    # neg of full(-2): the printer put the unary minus straight before the literal, and
    # `(--2)` is a decrement of a constant (NVRTC: expression must be a modifiable lvalue;
    # seed 18 case 258)
    def build(fd):
        t0 = fd.ops.full([1, 7], fill_value=2, dtype=DataType.Int32)
        t2 = fd.ops.full([1, fd.ops.size(t0, dim=1)], fill_value=-2, dtype=DataType.Int32)
        fd.add_output(fd.ops.neg(t2))

    (out,) = _check(build, [])  # and compiles
    np.testing.assert_array_equal(out, np.full((1, 7), 2, np.int32))


# -- seed 18 on the H100: case 460 --------------------------------------------------------


def test_a_cache_read_by_a_reduction_it_is_not_scheduled_with_is_filled_over_its_own_loop():
    # x cached once, read by a serial prod over its own loop and by the max of its
    # broadcast, which the reduction scheduler split over threadIdx.x: the cache got a
    # second copy filled over its own loop at the max's coordinates, in the loop indices of
    # the max's loops, not open there (NVRTC: identifier "i15" is undefined; seed 18 case 460)
    def build(fd):
        t0 = fd.define_tensor(shape=[5], contiguity=[True], dtype=DataType.Int)
        t1 = fd.ops.prod(t0, dims=[0], keepdim=False, dtype=DataType.Null)
        t2 = fd.ops.broadcast(t0, is_broadcast_dim=[True, True, False])
        t3 = fd.ops.max(t2, dims=[0, 1, 2], keepdim=False, dtype=DataType.Null)
        fd.add_output(fd.ops.fmod(t3, t1))

    x = np.array([3, -1, 2, 1, -2], np.int64)  # max 3 and prod 12: fmod gives 3
    (out,) = _check(build, [x])  # and compiles
    assert out == 3
    x = np.array([-3, -1, 1, 1, -1], np.int64)  # max 1 and prod -3: fmod gives 1
    (out,) = _check(build, [x])
    assert out == 1


# -- seed 19 on the H100: case 2619 -------------------------------------------------------


def test_an_output_strided_along_a_reductions_vector_axis_keeps_the_width_at_one():
    # sum over dim 0 of the transpose of x reshaped to [2, 2], beside the transpose and x
    # itself as outputs: the vector ran along the kept axis, the reshape's outer component,
    # whose consecutive elements are 2 apart in x; the copy of x does not hold that axis,
    # so no check saw it, and it was stored in vectors starting at x's odd elements
    # (misaligned on the H100, wrong elements besides: seed 19 case 2619)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half, stride_order=[0])
        t10 = fd.ops.reshape(t0, new_shape=[2, 2])
        fd.add_output(fd.ops.sum(fd.ops.permute(t10, dims=[1, 0]), dims=[0], keepdim=False, dtype=DataType.Null))
        fd.add_output(fd.ops.permute(t10, dims=[1, 0]))
        fd.add_output(fd.ops.reshape(t0, new_shape=[4]))

    x = RNG.standard_normal(4).astype(np.float16)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction"]
    assert runtime.segmented.groups[0].params.vectorize == 1
    total, transposed, flat = _check_kernels_codegen_takes(build, [x])
    np.testing.assert_allclose(total, x.reshape(2, 2).astype(np.float32).sum(axis=1), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(transposed, x.reshape(2, 2).T)
    np.testing.assert_array_equal(flat, x)


# -- seed 25 on the H100: cases 811 and 662 -------------------------------------------------


def test_an_input_also_read_through_a_broadcast_along_the_vector_axis_is_read_element_by_element():
    # x [3, 2] broadcast to [3, 1, 2] or-ed with not(not(x)) reshaped to [6] and broadcast
    # to [1, 6, 1]: the vectors walk the inner 2, which x holds, so x was loaded in vectors;
    # but on the reshaped path both lanes stand for one element of x, and the load there
    # read it and its neighbour (past the end at the last one: misaligned on the H100,
    # wrong values besides; seed 25 case 811)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool, stride_order=[1, 0])
        t3 = fd.ops.broadcast(t0, is_broadcast_dim=[False, True, False])
        t5 = fd.ops.reshape(fd.ops.logical_not(fd.ops.bitwise_not(t0)), new_shape=[6])
        t9 = fd.ops.broadcast(fd.ops.reshape(t5, new_shape=[6]), is_broadcast_dim=[True, False, True])
        fd.add_output(fd.ops.logical_or(t3, t9))
        fd.add_output(t5)

    x = RNG.random((3, 2)) < 0.5
    runtime, _ = _runtime(build, [x])
    params = runtime.segmented.groups[0].params
    assert params.vectorize == 2  # the output is still stored in vectors
    out, flat = _check(build, [x])
    np.testing.assert_array_equal(out, x[:, None, :] | x.reshape(6)[None, :, None])
    np.testing.assert_array_equal(flat, x.reshape(6))


def test_a_permuted_input_read_through_a_reshape_in_logical_order_is_read_element_by_element():
    # x [2, 5] stored column-major, compared with reshape(reshape(x, [10]), [5, 2]) against
    # permute(x) [5, 2]: the vectors walk x's storage order, which the permute reads, so
    # the copy of x is loaded in vectors there; the reshaped path reads x in logical order
    # (k / 5 + (k % 5) * 2 for element k) and its copy was loaded in vectors too: lanes that
    # are not neighbours in memory (misaligned; CPU fuzzer seed 47 case 952)
    def build(fd):
        t0 = fd.define_tensor(shape=[2, -1], contiguity=[True, True], dtype=DataType.BFloat16, stride_order=[0, 1])
        t1 = fd.ops.permute(t0, dims=[1, 0])
        t3 = fd.ops.reshape(fd.ops.reshape(t0, new_shape=[10]), new_shape=[5, 2])
        fd.add_output(fd.ops.eq(t3, t1))

    x = RNG.standard_normal((5, 2)).astype(ml_dtypes.bfloat16).T
    x[1, 2] = x[1, 0]  # so that one element besides the corners compares equal
    runtime, _ = _runtime(build, [x])
    assert runtime.segmented.groups[0].params.vectorize == 2
    (group,) = runtime.segmented.groups
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    assert any(isinstance(s, VectorCopy) and s.src == "T0" for s in walk(kernel.body))  # the permuted path
    (same,) = _check(build, [x])
    np.testing.assert_array_equal(same, x.reshape(10).reshape(5, 2) == x.T)
    assert same.any() and not same.all()


@pytest.mark.parametrize("rows, hidden", [(6, 1000), (64, 768)])
def test_a_bias_read_along_a_flattened_axis_is_still_loaded_in_vectors(rows, hidden):
    # x [rows, hidden] + b[hidden] under the 1-D pointwise schedule (break_point 0): the
    # bias's copy is read at (flat + lane) % hidden, not at its own coordinates; its lanes
    # are neighbours (hidden is a multiple of the width), so it stays one vector load
    # (the check above must not take it for a scattered read)
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        bias = fd.ops.broadcast_in_dim(b, shape=x.shape(), broadcast_dims=[1])
        total = fd.ops.add(fd.ops.cast(x, DataType.Float), fd.ops.cast(bias, DataType.Float))
        fd.add_output(fd.ops.cast(total, DataType.BFloat16))

    x = RNG.standard_normal((rows, hidden)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal(hidden).astype(ml_dtypes.bfloat16)
    runtime, _ = _runtime(build, [x, b])
    (group,) = runtime.segmented.groups
    assert (group.params.break_point, group.params.vectorize) == (0, 8)
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    assert {s.src for s in walk(kernel.body) if isinstance(s, VectorCopy)} >= {"T0", "T1"}
    (out,) = _check(build, [x, b])
    want = (x.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_an_output_without_a_reductions_vector_axis_is_stored_element_by_element():
    # min(y, 5) [129, 2] is an output beside the sum over dim 1 of x [129, 2, 2] plus its
    # broadcast: the outer sum's vectors walk x's inner 2, which the output lacks, so its
    # lanes were rows 2 elements apart, stored as one vector of consecutive elements
    # (misaligned on the H100, past the end at the last row; seed 25 case 662)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 2], contiguity=[True, True, True], dtype=DataType.Int32)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        t2 = fd.ops.minimum(t1, fd.define_scalar(5, dtype=DataType.Int32))
        t6 = fd.ops.broadcast_in_dim(t2, shape=[t0.size(0), t0.size(1), t0.size(2)], broadcast_dims=[0, 1])
        fd.add_output(fd.ops.sum(fd.ops.add(t0, t6), dims=[1], keepdim=False, dtype=DataType.Null))
        fd.add_output(t2)

    x = RNG.integers(-9, 9, (129, 2, 2)).astype(np.int32)
    y = RNG.integers(-9, 9, (129, 2)).astype(np.int32)
    total, low = _check(build, [x, y])
    np.testing.assert_array_equal(low, np.minimum(y, 5))
    np.testing.assert_array_equal(total, (x + np.minimum(y, 5)[:, :, None]).sum(axis=1))


def test_a_kernel_reading_a_scalar_tensor_binds_it_as_one_element():
    # The mean of a var_mean over every axis, across a segment_set, is a 0-d input of the
    # cast's kernel: the harness laid it out with np.ascontiguousarray, which makes a 0-d
    # array 1-d, and failed binding its strides (an IndexError; seed 23 case 168)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1], contiguity=[None, True], dtype=DataType.Half, stride_order=[0, 1])
        var, mean = fd.ops.var_mean(fd.ops.cast(t0, dtype=DataType.Float), dims=[0, 1], correction=0, keepdim=False)
        fd.add_output(fd.ops.cast(fd.ops.segment_set(mean), dtype=DataType.Half))
        fd.add_output(var)

    x = RNG.standard_normal((37, 1)).astype(np.float16)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction", "pointwise"]
    half_mean, var = _check(build, [x])
    np.testing.assert_allclose(half_mean, x.astype(np.float32).mean(), rtol=1e-3)
    np.testing.assert_allclose(var, x.astype(np.float32).var(), rtol=1e-5)


# -- seed 13 on the CPU: case 224 ---------------------------------------------------------


def test_a_buffer_read_outside_its_loops_along_a_sliced_expanded_axis_is_read_where_they_computed_it():
    # the sum over the expanded axis of x [1024, 1] (a product by 1024 of one element of a
    # register buffer) beside a slice of x from 405: the buffer is filled in the slice's
    # loops, which start at x's row 405, and the product, outside them, read it at row 0's
    # slot, 405 before their start (T2[-405 % 2], past the buffer; seed 13 case 224). With
    # the slice's offset symbolic, its first position is chosen at run time
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1], contiguity=[None, None], dtype=DataType.Float, stride_order=[1, 0])
        t1 = fd.ops.min(t0, dims=[1], keepdim=True, dtype=DataType.Null)
        fd.add_output(fd.ops.sum(t1, dims=[0], keepdim=True, dtype=DataType.Null))
        fd.add_output(fd.ops.slice(t0, start_indices=[405, 0], end_indices=[635, 1]))

    x = np.lib.stride_tricks.as_strided(np.float32([2.5]), (1024, 1), (0, 4))
    for disable in ((), ("concretize_resize_extents",)):
        with use_options(disable=disable):
            total, sliced = _check(build, [x])
        assert total.shape == (1, 1) and total[0, 0] == np.float32(2560.0)
        assert sliced.shape == (230, 1) and (sliced == np.float32(2.5)).all()


# -- seed 14 on the CPU: cases 104, 377, 534, 637, 709, 935 and 1405 ----------------------


def test_a_squeeze_of_a_reduction_over_broadcast_iteration_axes_is_generated():
    # prod over the rows of an [N, 1] max, then min over the size-1 axis left (a squeeze
    # and a broadcast): the product's register buffer lived inside the loops of its
    # broadcast axis (a block and a thread index, one pass each) and the squeeze, which
    # has no such axis, read it outside them; codegen refused the group and it ran on the
    # host (7 of 1500 fusions of seed 14). The buffer is now allocated outside them
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t3 = fd.ops.max(t0, dims=[1], keepdim=True, dtype=DataType.Null)
        t4 = fd.ops.prod(t3, dims=[0], keepdim=False, dtype=DataType.Null)
        fd.add_output(fd.ops.min(t4, dims=[0], keepdim=True, dtype=DataType.Null))
        fd.add_output(fd.ops.add(t0, fd.define_scalar(0.1, dtype=DataType.Double)))
        fd.add_output(t3)

    x = (RNG.standard_normal((37, 16)) * 0.3 + 1.0).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    kernels, refused = lowered_groups(runtime.segmented, runtime.name, "int32")
    assert not refused and len(kernels) == len(runtime.segmented.groups)
    smallest, _, _ = _check(build, [x])
    np.testing.assert_allclose(smallest, [np.prod(x.max(axis=1), dtype=np.float32)], rtol=1e-5)


# -- seed 16 on the CPU: case 248 ---------------------------------------------------------


def test_a_sum_over_a_reshape_that_leaves_an_expanded_broadcast_counts_every_element():
    # x [512, 1], an expanded scalar, reshaped to [512] (concretized as a squeeze of the
    # size-1 axis, which leaves the expanded broadcast) and summed: the sum's axis took
    # the broadcast's extent, 1, for the reshape's size, and the kernel added one element
    # (4, not 2048; seed 16 case 248)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1], contiguity=[None, None], dtype=DataType.Int)
        size = fd.ops.mul(fd.ops.size(t0, dim=0), fd.ops.size(t0, dim=1))
        t5 = fd.ops.reshape(t0, new_shape=[size])
        fd.add_output(fd.ops.sum(t5, dims=[0], keepdim=False, dtype=DataType.Int))

    x = np.lib.stride_tricks.as_strided(np.int64([4]), (512, 1), (0, 8))
    (total,) = _check(build, [x])
    assert total == 2048


def test_a_value_read_from_a_welfords_variance_and_count_is_computed_after_the_welford():
    # var * n / n of an int column, beside another output that shares the input's load:
    # the division read the Welford's variance and count, not its average (the one output
    # materialized), so it looked computed "from inputs alone" and was emitted before the
    # Welford, reading buffers not yet allocated (a KeyError in lowering; seed 17 case 634)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1, 1, 1], contiguity=[True, None, None, None], dtype=DataType.Int)
        t1 = fd.ops.cast(t0, dtype=DataType.Float)
        _, m2, n = fd.ops.welford(t1, dims=[0, 1, 2])
        fd.add_output(fd.ops.max(fd.ops.div(m2, n), dims=[0], keepdim=False))
        fd.add_output(fd.ops.reshape(t0, new_shape=[512]))

    x = RNG.integers(-50, 50, (512, 1, 1, 1))
    variance, flat = _check(build, [x])
    np.testing.assert_allclose(variance, x.astype(np.float64).var(), rtol=1e-5)
    np.testing.assert_array_equal(flat, x.reshape(512))


def test_an_input_cache_read_by_a_one_wide_slice_and_another_slice_holds_each_unrolled_step():
    # x[:, 6:7] and x[:, 0:6] of one input, concatenated and summed along the sliced axis:
    # the input's cache took its loops from the one-wide slice (its axis resized to one
    # element, concretized as a broadcast), so its register buffer held one vector for
    # both unrolled steps of the other slice's loads, and the first step summed the
    # second's values (seed 20 case 170)
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.BFloat16)
        rows = fd.ops.size(t0, dim=0)
        last = fd.ops.slice(t0, start_indices=[0, 6, 0], end_indices=[rows, 7, 2])
        first = fd.ops.slice(t0, start_indices=[0, 0, 0], end_indices=[rows, 6, 2])
        fd.add_output(fd.ops.sum(fd.ops.cat([last, first], dim=1), dims=[1], keepdim=True))

    x = RNG.standard_normal((3, 7, 2)).astype(np.float32)
    (total,) = _check(build, [x.astype(DataType.BFloat16.numpy)])
    np.testing.assert_allclose(
        total.astype(np.float32),
        x.astype(DataType.BFloat16.numpy).astype(np.float32).sum(1, keepdims=True),
        rtol=2e-2,
        atol=2e-2,
    )


def test_a_float_output_on_the_loops_of_a_16_bit_row_vectorized_by_8_is_stored_in_16_byte_copies():
    # a bf16 row normalized and its float column sums, in one inner-outer kernel: the column
    # sums took the row's vector of 8 and were stored as one 32-byte copy, wider than any
    # access (the interpreter refused it; seed 62 case 1252, found by a review)
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        rows = fd.ops.sum(xf, [1])
        shape = [fd.ops.size(x, 0), fd.ops.size(x, 1)]
        fd.add_output(fd.ops.cast(fd.ops.sub(xf, fd.ops.broadcast_in_dim(rows, shape, [0])), DataType.BFloat16))
        fd.add_output(fd.ops.sum(xf, [0]))

    x = RNG.standard_normal((2049, 128)).astype(DataType.BFloat16.numpy)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_outer_persistent"]
    (group,) = runtime.segmented.groups
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    widths = {(c.dtype, c.width) for c in walk(kernel.body) if isinstance(c, VectorCopy)}
    assert (DataType.Float, 4) in widths and (DataType.BFloat16, 8) in widths
    assert all(width * dtype.itemsize <= 16 for dtype, width in widths)
    # the alignment checked at launch is a copy's, 16 bytes, not the row's 8 floats
    assert {t.dtype: t.vectorized for t in kernel.tensors} == {DataType.BFloat16: 8, DataType.Float: 4}
    _check(build, [x])


def test_a_reduction_padded_onto_its_own_reduced_axis_is_split():
    # each of 3 rows' min over 6 columns, padded by 3 in front to 6 values and added along
    # the columns: column j needs row j - 3's min. The inner persistent kernel took it, and
    # each row added its own min (seed 23 case 770); the reduction now gets a kernel apart
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.ops.slice(t0, start_indices=[0, 2], end_indices=[3, 8])
        t3 = fd.ops.pad(fd.ops.min(t1, dims=[1]), pad_widths=[3, 0], value=0.001)
        fd.add_output(fd.ops.add(t1, fd.ops.broadcast_in_dim(t3, shape=[3, 6], broadcast_dims=[1])))

    x = RNG.standard_normal((5, 8)).astype(np.float32)
    (out,) = _check_split_for_a_tie(build, x)
    window = x[:3, 2:8]
    padded = np.concatenate([np.full(3, 0.001, np.float32), window.min(axis=1)])
    np.testing.assert_allclose(out, window + padded[None, :], rtol=1e-6)


def test_a_one_wide_column_of_an_input_read_in_vectors_is_loaded_lane_by_lane():
    # x - x[:, k] summed along the rows, and a bf16 row scaled by its first column then
    # normalized: the input is read in vectors along the columns, and the one-wide slice's
    # copy took the same vector load at column k, so its lanes held columns k..k+3 (wrong
    # sums), or faulted where k is not a multiple of the vector (a review; older than it)
    def column_difference(k):
        def build(fd):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
            column = fd.ops.expand(fd.ops.slice(x, [0, k], [32, k + 1]), [32, 64])
            fd.add_output(fd.ops.sum(fd.ops.sub(x, column), [1]))

        return build

    x = RNG.standard_normal((32, 64)).astype(np.float32)
    for k in (5, 8):
        (sums,) = _check(column_difference(k), [x])
        np.testing.assert_allclose(sums, (x - x[:, k : k + 1]).sum(1), rtol=1e-5, atol=1e-4)

    def scaled_norm(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        y = fd.ops.mul(xf, fd.ops.expand(fd.ops.slice(xf, [0, 0], [64, 1]), [64, 128]))
        rows = fd.ops.broadcast_in_dim(fd.ops.sum(y, [1]), shape=[64, 128], broadcast_dims=[0])
        fd.add_output(fd.ops.cast(fd.ops.sub(y, rows), DataType.BFloat16))

    _check(scaled_norm, [RNG.standard_normal((64, 128)).astype(DataType.BFloat16.numpy)])


@pytest.mark.parametrize("middle", [[2, 3], [3, 2]])
def test_a_reduction_reshaped_onto_its_own_reduced_axis_is_split(middle):
    # each of 6 rows' min, reshaped to [2, 3] (or [3, 2]) and back to [6], added along the
    # 6 columns: column j needs row j's min. The reshape round trip hid the tie from the
    # pad/slice check, and the inner persistent kernel added each row's own min (30 of 36
    # wrong). [3, 2] cuts the rows' digits, which the check must still follow
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        mins = fd.ops.reshape(fd.ops.reshape(fd.ops.min(t0, dims=[1]), new_shape=middle), new_shape=[6])
        fd.add_output(fd.ops.add(t0, fd.ops.broadcast_in_dim(mins, shape=[6, 6], broadcast_dims=[1])))

    x = RNG.standard_normal((6, 6)).astype(np.float32)
    (out,) = _check_split_for_a_tie(build, x)
    np.testing.assert_allclose(out, x + x.min(axis=1)[None, :], rtol=1e-6)


def test_a_group_norm_with_a_residual_stays_one_persistent_kernel():
    # [8, 64, 8, 8] grouped as [8, 4, 1024], centred per group, reshaped back and added to
    # the input: the residual ties the output's channels to the input's, which the groups
    # were split from. The group index reaches the channels' top digits only, never the
    # reduced 1024, so the kernel stays one (the first reshape check refused it)
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
        groups = fd.ops.reshape(x, new_shape=[8, 4, 1024])
        mean = fd.ops.broadcast_in_dim(fd.ops.sum(groups, dims=[2]), shape=[8, 4, 1024], broadcast_dims=[0, 1])
        centred = fd.ops.reshape(fd.ops.sub(groups, mean), new_shape=[8, 64, 8, 8])
        fd.add_output(fd.ops.add(centred, x))

    x = RNG.standard_normal((8, 64, 8, 8)).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_persistent"]
    (out,) = _check(build, [x])
    grouped = x.reshape(8, 4, 1024)
    expected = (grouped - grouped.sum(axis=2, keepdims=True)).reshape(x.shape) + x
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_rows_of_a_view_across_the_input_rows_reshaped_back_stay_one_persistent_kernel():
    # [64, 96] viewed as [48, 128] (rows across the input's rows), centred per row,
    # reshaped back and added to the input: the reshape back splits the 48 rows' digits
    # and merges them again, which is the row index unchanged, never the reduced axis
    # (the first digit walk lost it at the split and split the kernel; found by a review)
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        rows = fd.ops.reshape(x, new_shape=[48, 128])
        mean = fd.ops.mul(fd.ops.sum(rows, dims=[1]), fd.define_scalar(1 / 128))
        centred = fd.ops.sub(rows, fd.ops.broadcast_in_dim(mean, shape=[48, 128], broadcast_dims=[0]))
        fd.add_output(fd.ops.add(fd.ops.reshape(centred, new_shape=[64, 96]), x))

    x = RNG.standard_normal((64, 96)).astype(np.float32)
    runtime, _ = _runtime(build, [x])
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_persistent"]
    (out,) = _check(build, [x])
    rows = x.reshape(48, 128)
    np.testing.assert_allclose(out, (rows - rows.mean(axis=1, keepdims=True)).reshape(64, 96) + x, rtol=1e-5, atol=1e-5)


# -- seed 68 on the GPU: case 273 ---------------------------------------------------------


def output_of_a_hoisted_load_beside_a_grid_sum(fd):
    """A sum down a padded [N, 1, 31] half (a grid reduction: few columns, many rows) beside
    an output computed from a [1, 1, 1] input alone."""
    t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True], dtype=DataType.Half)
    t1 = fd.define_tensor(shape=[1, 1, 1], contiguity=[None, None, None], dtype=DataType.Int32)
    fd.add_output(fd.ops.sum(fd.ops.pad(t0, pad_widths=[3, -1], value=-1.25), dims=[0]))
    fd.add_output(fd.ops.bitwise_not(fd.ops.stride_order(t1, stride_order=[2, 0, 1])))


def test_an_output_of_a_hoisted_load_goes_before_the_loops_a_grid_reduction_shares():
    # The [1, 1, 1] copy and its output were emitted between the grid reduction's serial
    # partial and the grid reduction, closing the loops they share: codegen refused ("T11
    # would be read outside the loops that compute it") and the group ran on the host.
    # What is computed outside every loop from hoisted loads alone is now hoisted with them.
    x = (RNG.standard_normal((1025, 1, 31)) * 0.5).astype(np.float16)
    m = np.array([[[7]]], dtype=np.int32)
    runtime, _ = _runtime(output_of_a_hoisted_load_beside_a_grid_sum, [x, m])
    _, refused = lowered_groups(runtime.segmented, runtime.name, "int32")
    assert not refused and [g.scheduler.value for g in runtime.segmented.groups] == ["reduction"]
    total, inverted = _check(output_of_a_hoisted_load_beside_a_grid_sum, [x, m])
    padded = np.pad(x[..., :-1].astype(np.float64), ((0, 0), (0, 0), (3, 0)), constant_values=-1.25)
    np.testing.assert_allclose(total.astype(np.float64), padded.sum(axis=0), rtol=2e-3, atol=0.1)
    assert inverted.reshape(-1).tolist() == [~7]
