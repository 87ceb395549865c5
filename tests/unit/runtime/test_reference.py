"""The reference backend checks every result against the IR's extents and frees
intermediates after their last use."""

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.runtime.arguments import bind_inputs
from fuser_core.runtime.reference import evaluate_fusion


def test_a_size_one_axis_defined_minus_one_does_not_broadcast():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=True)
        b = fd.define_tensor(shape=[-1], contiguity=True)
        fd.add_output(fd.ops.add(a, b))
    with pytest.raises(FuserError) as err:
        fd.execute([np.ones(1, np.float32), np.ones(4, np.float32)])
    assert err.value.op == "add"
    assert "define it with size 1 to broadcast" in str(err.value)
    assert err.value.location.filename.endswith("test_reference.py")


def test_a_mismatch_after_rank_alignment_says_the_lower_rank_operand_was_aligned_right():
    # mul of [N, H] by a [N] row sum: the [N] operand is aligned to the right, as nvFuser
    # broadcasts it, so its N meets H; the error says so (the size-1 hint, which does not
    # apply to sizes 6 and 4, is left out)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.mul(x, fd.ops.sum(x, dims=[1])))
    with pytest.raises(FuserError) as err:
        fd.execute([np.ones((6, 4), np.float32)])
    assert err.value.op == "mul"
    assert "operands have ranks 2 and 1: the lower-rank one is aligned to the right" in str(err.value)
    assert "size 1 to broadcast" not in str(err.value)
    assert err.value.location.filename.endswith("test_reference.py")


def test_a_manual_slice_past_the_end_is_an_error_not_a_short_result():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True)
        fd.add_output(fd.ops.slice(t, [0], [10], manual_normalization=True))
    with pytest.raises(FuserError, match=r"shape \[5\].*extents \[10\]"):
        fd.execute([np.ones(5, np.float32)])


def test_expanding_a_non_broadcast_axis_to_another_size_is_an_error():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True)
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.expand(t, [s]))
    np.testing.assert_array_equal(fd.execute([np.arange(3, dtype=np.float32), 3])[0], np.arange(3))
    with pytest.raises(FuserError, match=r"expand: an axis of size 5, from the scalar inputs, .* size 3 \(input 0"):
        fd.execute([np.arange(3, dtype=np.float32), 5])


def test_intermediates_are_freed_after_their_last_use():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True)
        t1 = fd.ops.exp(t0)
        t2 = fd.ops.neg(t1)
        fd.add_output(fd.ops.mul(t2, 2.0))
    x = np.random.default_rng(0).standard_normal(8).astype(np.float32)
    _, ev = bind_inputs(fd.fusion, [x])
    (out,) = evaluate_fusion(fd.fusion, ev)
    np.testing.assert_allclose(out, -2 * np.exp(x), rtol=1e-6)
    assert not ev.is_bound(t1.tv) and not ev.is_bound(t2.tv)
    assert ev.is_bound(fd.fusion.inputs[0]) and ev.is_bound(fd.fusion.outputs[0])
