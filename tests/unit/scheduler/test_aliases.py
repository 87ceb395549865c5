"""Outputs that are views of a group input (a fusion input, or a result another kernel
wrote) go to the no_op scheduler (no kernel), as nvFuser's alias analysis sends them;
anything that moves elements does not."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition


def _schedulers(fd: FusionDefinition, inputs: list[np.ndarray]) -> list[str]:
    return [g.scheduler.value for g in fd.runtime_for(inputs).segmented.groups]


def test_a_reshape_of_a_contiguous_input_is_a_view_with_no_kernel() -> None:
    with FusionDefinition() as fd:
        x = fd.define_tensor([2, 3, 4], contiguity=[True, True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(x, [2, 12]))
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    runtime = fd.runtime_for([a])
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "no_op"
    assert group.record is not None and "T1 is a view of T0" in group.record.notes
    (out,) = fd.execute([a])
    np.testing.assert_array_equal(out, a.reshape(2, 12))


def test_a_chain_of_squeeze_broadcast_and_reshape_is_a_view() -> None:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 1, -1], contiguity=[True, None, True], dtype=DataType.Half)
        y = fd.ops.squeeze(x, [1])
        z = fd.ops.broadcast_in_dim(y, [fd.ops.size(y, 0), 1, fd.ops.size(y, 1)], [0, 2])
        fd.add_output(fd.ops.reshape(z, [-1]))
    a = np.random.default_rng(1).standard_normal((5, 1, 6)).astype(np.float16)
    assert _schedulers(fd, [a]) == ["no_op"]
    (out,) = fd.execute([a])
    np.testing.assert_array_equal(out, a.reshape(-1))


@pytest.mark.parametrize(
    "case",
    ["permute", "non-contiguous input", "arithmetic", "permuted input layout"],
)
def test_what_moves_or_computes_elements_is_not_a_view(case: str) -> None:
    with FusionDefinition() as fd:
        contiguity = [False, True] if case == "non-contiguous input" else [True, True]
        order = [0, 1] if case == "permuted input layout" else None
        x = fd.define_tensor([-1, -1], contiguity=contiguity, dtype=DataType.Float, stride_order=order)
        if case == "permute":
            out = fd.ops.permute(x, [1, 0])
        elif case == "arithmetic":
            out = fd.ops.reshape(fd.ops.neg(x), [-1])
        else:
            out = fd.ops.reshape(x, [-1])
        fd.add_output(out)
    a = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    if case == "non-contiguous input":
        a = np.random.default_rng(2).standard_normal((4, 12)).astype(np.float32)[:, :6]
    if case == "permuted input layout":
        a = np.asfortranarray(a)
    assert "no_op" not in _schedulers(fd, [a])


def flattened_softmax() -> FusionDefinition:
    """A softmax over rows, returned reshaped to one axis."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], contiguity=[True, True], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, [1], keepdim=True)))
        fd.add_output(fd.ops.reshape(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)), [-1]))
    return fd


def test_a_reshape_of_a_kernel_result_is_a_view_of_it() -> None:
    # The persistent kernel writes the softmax and the reshape is a view of that (nvFuser's
    # no-op segment after a group norm whose reshape is moved to the output), not a second
    # kernel copying it.
    fd = flattened_softmax()
    a = np.random.default_rng(3).standard_normal((64, 48)).astype(np.float32)
    runtime = fd.runtime_for([a])
    persistent, view = runtime.segmented.groups
    assert [persistent.scheduler.value, view.scheduler.value] == ["inner_persistent", "no_op"]
    assert view.record is not None and any("is a view of" in note for note in view.record.notes)
    (out,) = fd.execute([a])
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, (e / e.sum(axis=1, keepdims=True)).reshape(-1), rtol=1e-6)
