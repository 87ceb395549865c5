"""On the GPU, an output that is a view of an input shares the input's storage and no
kernel is launched (nvFuser's aliased outputs, test_mark_alias_pass)."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options

pytestmark = pytest.mark.gpu


def _reshape_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([2, 3, 4], contiguity=[True, True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(x, [2, 12]))
    return fd


def test_a_view_of_a_cupy_input_shares_its_memory() -> None:
    import cupy

    x = cupy.asarray(np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32))
    fd = _reshape_fusion()
    with use_options(backend="cuda"):
        (out,) = fd.execute([x])
        report = fd._executor.last_report  # type: ignore[union-attr]
    assert out.data.ptr == x.data.ptr
    np.testing.assert_array_equal(out.get(), x.get().reshape(2, 12))
    assert report.launches == ()  # no kernel ran


def test_a_view_of_a_torch_input_has_its_data_ptr() -> None:
    torch = pytest.importorskip("torch")
    x = torch.rand(2, 3, 4, device="cuda")
    fd = _reshape_fusion()
    with use_options(backend="cuda"):
        (out,) = fd.execute([x])
    assert isinstance(out, torch.Tensor)
    assert out.data_ptr() == x.data_ptr()
    assert torch.equal(out, x.reshape(2, 12))
