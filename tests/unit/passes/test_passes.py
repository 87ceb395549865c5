"""The pre-segmentation passes: their order and record, dead-code removal, and
allocation order as requirements (a user's stride_order) and hints (inferred)."""

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, load_repro
from fuser_core.ir.printer import print_math
from fuser_core.passes import PRESEGMENTATION_PASSES, run_presegmentation_passes
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.reference import evaluate_fusion


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape, dtype=np.float32)


def reduction_pow() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        fd.ops.mul(fd.define_scalar(0.5, dtype=DataType.Double), t1)  # dead, as in nvFuser #785
        fd.add_output(fd.ops.sum(t0, dims=[0, 1]))
        fd.add_output(fd.ops.pow(t1, fd.define_scalar(3.0, dtype=DataType.Double)))
    return fd


def column_major_relu() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        fd.add_output(fd.ops.relu(x))
    return fd


def router_logits() -> FusionDefinition:
    """out[m, n] = sum_k x[m, k] * w[n, k] with a column-major x: x maps m but not n."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        xb = fd.ops.broadcast_in_dim(x, shape=[8, 4, 16], broadcast_dims=[0, 2])
        wb = fd.ops.broadcast_in_dim(w, shape=[8, 4, 16], broadcast_dims=[1, 2])
        fd.add_output(fd.ops.sum(fd.ops.mul(xb, wb), dims=[2]))
    return fd


def test_the_passes_run_in_their_documented_order_and_are_recorded():
    fd = reduction_pow()
    fusion, _ = fd.fusion.clone()
    records = run_presegmentation_passes(fusion)
    assert [r.name for r in records] == [name for name, _, _ in PRESEGMENTATION_PASSES]
    assert [r.name for r in records] == [
        "dead_code_removal",
        "consecutive_cast_folding",
        "noop_removal",
        "output_stride_order",
        "allocation_order_inference",
    ]
    assert all(why for _, _, why in PRESEGMENTATION_PASSES)
    assert [r.changed for r in records] == [True, False, False, False, False]
    assert all(r.seconds >= 0 and r.ir_after == print_math(fusion) for r in records)


def test_dead_code_leaves_the_use_lists_and_names_stay():
    fd = reduction_pow()
    fusion, _ = fd.fusion.clone()
    t1 = fusion.inputs[1]
    assert len(t1.uses) == 2
    before = print_math(fusion)
    run_presegmentation_passes(fusion)
    assert [u.op_name for u in t1.uses] == ["pow"]
    assert print_math(fusion) == before  # nothing an output needs changed, names included


def test_a_user_stride_order_is_a_requirement_the_output_is_returned_with():
    (loaded,) = load_repro("sample_fusions/transpose_add.py").definitions
    x = np.asfortranarray(rand(64, 48))
    y = rand(64, 48)
    runtime = loaded.fd.runtime_for([x, y])
    t2, t4 = runtime.segmented.complete.outputs
    assert [d.name for d in t2.domain.allocation] == [t2.logical[1].name, t2.logical[0].name]
    assert not t2.domain.allocation_is_hint and not t4.domain.allocation_is_hint
    out2, out4 = loaded.fd.execute([x, y])
    assert out2.flags.f_contiguous and out4.flags.c_contiguous
    np.testing.assert_allclose(out2, x + y)
    np.testing.assert_allclose(out4, np.maximum(y.T, 0))


def test_an_output_mapping_every_axis_of_a_column_major_input_gets_its_layout_as_a_hint():
    fd = column_major_relu()
    x = np.asfortranarray(rand(6, 10))
    runtime = fd.runtime_for([x])
    (out_tv,) = runtime.segmented.complete.outputs
    assert out_tv.domain.allocation_is_hint
    assert [d.name for d in out_tv.domain.allocation] == [out_tv.logical[1].name, out_tv.logical[0].name]
    (input_tv,) = runtime.segmented.complete.inputs
    assert not input_tv.domain.allocation_is_hint  # inputs keep the layout they arrive in
    (out,) = fd.execute([x])
    assert out.flags.f_contiguous  # the pointwise kernel kept the hint
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_no_hint_when_the_input_maps_only_some_axes_issue_2425():
    fd = router_logits()
    x, w = np.asfortranarray(rand(8, 16)), rand(4, 16)
    runtime = fd.runtime_for([x, w])
    (out_tv,) = runtime.segmented.complete.outputs
    assert out_tv.domain.allocation is None  # naive inference would have proposed (n, m)
    (out,) = fd.execute([x, w])
    assert out.flags.c_contiguous
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-5)


def test_linear_output_order_sample_is_not_permuted():
    (loaded,) = load_repro("sample_fusions/linear_output_order.py").definitions
    inputs = [rand(4, 2048, 1024), rand(8, 1024), rand(8)]
    runtime = loaded.fd.runtime_for(inputs)
    (out_tv,) = runtime.segmented.complete.outputs
    assert out_tv.domain.allocation is None


def test_a_reduction_kernel_drops_a_hint_and_says_why():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        y = fd.ops.relu(x)
        fd.add_output(y)
        fd.add_output(fd.ops.sum(x, dims=[1]))
    x = np.asfortranarray(rand(8, 16))
    runtime = fd.runtime_for([x])
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "reduction"
    assert group.record is not None and group.record.dropped_hints is not None
    (drop,) = group.record.dropped_hints
    assert drop.tensor == f"T{runtime.segmented.complete.outputs[0].name}"
    assert "writes outputs in logical order" in drop.reason
    relu, total = fd.execute([x])
    assert relu.flags.c_contiguous  # the dropped hint is not what the kernel writes
    np.testing.assert_allclose(total, x.sum(axis=1), rtol=1e-5)


def cast_chain(src: DataType, middle: DataType, dst: DataType) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=src)
        fd.add_output(fd.ops.cast(fd.ops.cast(x, middle), dst))
    return fd


CHAINS = [
    (DataType.BFloat16, DataType.Float, DataType.Half, True),  # bf16 fits in float: one rounding
    (DataType.Half, DataType.Double, DataType.Float, True),
    (DataType.Int32, DataType.Int, DataType.Float, True),
    (DataType.Float, DataType.Half, DataType.Double, False),  # half rounds: must stay
    (DataType.Double, DataType.Float, DataType.BFloat16, False),  # two roundings differ from one
    (DataType.Int, DataType.Int32, DataType.Double, False),  # int32 may wrap
]


@pytest.mark.parametrize(("src", "middle", "dst", "folds"), CHAINS)
def test_consecutive_casts_fold_only_when_the_first_loses_nothing(src, middle, dst, folds):
    fd = cast_chain(src, middle, dst)
    fusion, _ = fd.fusion.clone()
    run_presegmentation_passes(fusion)
    casts = [e for e in fusion.exprs() if e.op_name == "cast"]
    assert len(casts) == (1 if folds else 2)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(257) * 40 + 1e-3).astype(src.numpy)
    if src.is_integral:  # int64 values beyond int32 make the narrowing chain visible
        x = rng.integers(-(2**40), 2**40, 257).astype(src.numpy)
    (out,) = fd.execute([x])  # the pipeline runs the folded fusion
    reference = evaluate_fusion(fd.fusion, bind_args(fd.fusion, convert_inputs(fd.fusion, [x])))[0]
    np.testing.assert_array_equal(out, reference)


def test_a_cast_there_and_back_through_a_wider_type_is_a_copy_and_is_removed():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        y = fd.ops.cast(fd.ops.cast(x, DataType.Float), DataType.BFloat16)
        fd.add_output(fd.ops.neg(y))
    fusion, _ = fd.fusion.clone()
    run_presegmentation_passes(fusion)
    # What is left: neg's own promotion of its bf16 operand, read straight from the input.
    cast, neg = fusion.exprs()
    assert (cast.op_name, neg.op_name) == ("cast", "neg")
    assert cast.inputs[0] is fusion.inputs[0]


def test_noop_ops_are_removed_but_an_output_copy_stays():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
        same = fd.ops.reshape(x, [2, 3])
        copy = fd.ops.set(fd.ops.relu(same))
        fd.add_output(fd.ops.exp(copy))
        fd.add_output(fd.ops.set(x))
        fd.add_output(fd.ops.segment_set(fd.ops.neg(x)))
    fusion, _ = fd.fusion.clone()
    run_presegmentation_passes(fusion)
    ops = sorted(e.op_name for e in fusion.exprs())
    assert ops == ["exp", "neg", "relu", "segment_set", "set"]  # the output copy and the hint stay
    x = rand(2, 3)
    out = fd.execute([x])
    np.testing.assert_allclose(out[0], np.exp(np.maximum(x, 0)), rtol=1e-6)
    np.testing.assert_array_equal(out[1], x)
