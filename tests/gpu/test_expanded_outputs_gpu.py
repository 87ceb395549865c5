"""Outputs with an expanded broadcast axis on the GPU, as nvFuser returns them: the kernel
writes the compact data, the output holds one element along each expanded axis and has
stride 0 there (a torch caller gets a torch view of that memory, as `expand` gives), and
no group runs on the host for it. Each fusion of tests/unit/codegen/test_expanded_outputs.py
(every scheduler) runs through the cuda backend on torch and CuPy inputs, twice (the
second call takes the fast path), against the reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import FusionDefinition, use_options

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_expanded_outputs import CASES

pytestmark = pytest.mark.gpu


def _fusion(build) -> FusionDefinition:
    with FusionDefinition() as fd:
        build(fd)
    return fd


def _host_reasons(fd: FusionDefinition) -> list[str]:
    report = fd._executor.last_report  # type: ignore[union-attr]
    return [line for line in report.compiles if "on the host reference" in line]


@pytest.mark.parametrize("name", list(CASES))
def test_an_expanded_output_on_torch_inputs(name):
    torch = pytest.importorskip("torch")
    build, make, _scheduler, strides = CASES[name]
    inputs = make()
    with use_options(backend="reference"):
        expected = _fusion(build).execute(inputs)  # the reference (NumPy)
    fd = _fusion(build)
    device_inputs = [
        torch.from_numpy(np.ascontiguousarray(x)).cuda() if isinstance(x, np.ndarray) else x for x in inputs
    ]
    with use_options(backend="cuda"):
        for call in range(2):
            outputs = fd.execute(device_inputs)
            if call == 0:
                assert _host_reasons(fd) == []
            assert [tuple(o.stride()) for o in outputs] == strides
            for got, want in zip(outputs, expected, strict=True):
                assert isinstance(got, torch.Tensor) and got.is_cuda
                np.testing.assert_allclose(
                    got.float().cpu().numpy(), np.asarray(want, np.float32), rtol=2e-3, atol=2e-3
                )
                if 0 in got.stride():  # one element of memory along each expanded axis
                    assert got.untyped_storage().nbytes() < got.numel() * got.element_size()


@pytest.mark.parametrize("name", ["reduction_keepdim", "beside_a_full_output", "inner_persistent"])
def test_an_expanded_output_on_cupy_inputs(name):
    cupy = pytest.importorskip("cupy")
    build, make, _scheduler, strides = CASES[name]
    inputs = make()
    with use_options(backend="reference"):
        expected = _fusion(build).execute(inputs)
    fd = _fusion(build)
    with use_options(backend="cuda"):
        for _ in range(2):
            outputs = fd.execute([cupy.asarray(x) for x in inputs])
            assert [tuple(s // o.itemsize for s in o.strides) for o in outputs] == strides
            for got, want in zip(outputs, expected, strict=True):
                np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=1e-4, atol=1e-4)


def test_a_later_kernel_reads_an_expanded_output_with_stride_zero():
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s = fd.ops.sum(t0, [1], keepdim=True)
        e = fd.ops.expand(s, [t0.size(0), t1.size(1)])
        fd.add_output(e)
        fd.add_output(fd.ops.mul(fd.ops.segment_set(e), t1))
    x, y = torch.randn(300, 70, device="cuda"), torch.randn(300, 130, device="cuda")
    with use_options(backend="cuda"):
        expanded, product = fd.execute([x, y])
        assert _host_reasons(fd) == []
    want = x.sum(1, keepdim=True)
    assert expanded.stride() == (1, 0)
    torch.testing.assert_close(expanded, want.expand(300, 130), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(product, want * y, rtol=1e-4, atol=1e-4)
