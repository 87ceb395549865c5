"""The squeeze and cat regressions of tests/unit/codegen/test_squeeze_and_cat_lowering.py
(nvFuser issues 1691, 1953, 2275, a reshape-squeeze concretization, and softmax beside a
squeeze of a row of one) through the cuda backend, against the reference backend. bf16
inputs go in as torch tensors (CuPy has no bfloat16)."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import FusionDefinition, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_squeeze_and_cat_lowering import CASES  # noqa: E402


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_backend_matches_the_reference(name):
    cupy = pytest.importorskip("cupy")
    build, make_inputs = CASES[name]
    inputs = make_inputs()
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    with use_options(backend="cuda"):
        got = fd.execute([_on_device(cupy, x) for x in inputs])
    report = fd.executor_cache.last_report
    assert report.runtime.backend_name == "cuda"
    assert report.runtime.kernels, "no generated kernel ran"
    for g, e in zip(got, expected, strict=True):
        e = np.asarray(e)
        if hasattr(g, "cpu"):  # a torch tensor: the outputs of torch inputs
            g = g.float() if e.dtype == ml_dtypes.bfloat16 else g
            g = g.cpu().numpy()
        elif hasattr(g, "get"):
            g = g.get()
        if e.dtype == ml_dtypes.bfloat16:
            e = e.astype(np.float32)
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5, err_msg=name)


def _on_device(cupy, x):
    if x.dtype != ml_dtypes.bfloat16:
        return cupy.asarray(x)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
