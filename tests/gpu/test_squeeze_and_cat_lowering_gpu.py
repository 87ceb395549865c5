"""The squeeze and cat regressions of tests/unit/codegen/test_squeeze_and_cat_lowering.py
(nvFuser issues 1691, 1953, 2275 and a reshape-squeeze concretization) through the cuda
backend, against the reference backend."""

from __future__ import annotations

import sys
from pathlib import Path

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
        got = fd.execute([cupy.asarray(x) for x in inputs])
    report = fd.executor_cache.last_report
    assert report.runtime.backend_name == "cuda"
    assert report.runtime.kernels, "no generated kernel ran"
    for g, e in zip(got, expected, strict=True):
        g = g.get() if hasattr(g, "get") else np.asarray(g)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5, err_msg=name)
