"""Inputs that live on the GPU (CuPy arrays, torch CUDA tensors) run on the reference
backend with the same results as NumPy inputs (the cuda backend is tested in
test_cuda_backend.py)."""

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def reference_backend():
    with use_options(backend="reference"):
        yield


def softmax_like() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        t1 = fd.ops.cast(t0, DataType.Float)
        m = fd.ops.max(t1, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(t1, m))
        s = fd.ops.sum(e, dims=[1], keepdim=True)
        fd.add_output(fd.ops.cast(fd.ops.div(e, s), DataType.BFloat16))
    return fd


def expected(x32: np.ndarray) -> np.ndarray:
    e = np.exp(x32 - x32.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_cupy_inputs():
    import cupy  # optional dependency, present where gpu tests run

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 257), dtype=np.float32)
    x_gpu = cupy.asarray(x)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.exp(fd.define_tensor(shape=[-1, -1], contiguity=True)))
    (out,) = fd.execute([x_gpu])
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)


def test_torch_cuda_bf16_inputs():
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 257, device="cuda", dtype=torch.bfloat16)
    fd = softmax_like()
    (out,) = fd.execute([x])
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and out.is_cuda  # torch in, torch out
    got = out.float().cpu().numpy()
    reference = torch.softmax(x.float(), dim=1).cpu().numpy()
    np.testing.assert_allclose(got, reference, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(got, expected(x.float().cpu().numpy()), rtol=1e-2, atol=1e-3)


def test_torch_non_contiguous_cuda_input_keeps_its_stride_order():
    torch = pytest.importorskip("torch")
    x = torch.randn(32, 48, device="cuda").t()
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(shape=[-1, -1], contiguity=False)))
    (out,) = fd.execute([x])
    np.testing.assert_array_equal(out.cpu().numpy(), -x.cpu().numpy())
    signature = fd.executor_cache.last_runtime.signature
    assert signature.inputs[0].stride_order == (0, 1)
