"""Several reductions in one kernel on the GPU (issues 18 and 19): a Welford beside a sum,
grid Welford reductions, two grid reductions arriving once (layer-norm backward's weight
and bias gradients), outputs of a reduction's input, against the reference backend on
random data. Each runs as a generated kernel, not on the host; grid reductions run several
times, so their semaphores are shown to be left zeroed between launches."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import FusionDefinition, use_options
from fuser_core.runtime.group_lowering import lowered_groups

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_cuda_backend import _compare, _host, _to_device  # noqa: E402
from test_grouped_reductions import CASES  # noqa: E402


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_reductions_on_the_gpu(name):
    build, make = CASES[name]
    inputs = make()
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    for _ in range(3):  # the grid reductions' semaphores must be zero again after each launch
        with use_options(backend="cuda"):
            got = fd.execute([_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs])
        runtime = fd.executor_cache.last_runtime
        assert runtime.backend_name == "cuda"
        assert lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1] == {}
        for g, e, tv in zip(got, expected, fd.fusion.outputs, strict=True):
            g = _host(g, tv.dtype)
            e = np.asarray(e)
            if e.dtype.kind == "f" and e.dtype.itemsize >= 4:
                # float sums over up to 1e5 elements reassociate across threads and blocks
                scale = max(1.0, float(np.abs(e).max(initial=0)))
                np.testing.assert_allclose(g.astype(np.float64), e, rtol=2e-4, atol=2e-4 * scale)
            else:
                _compare(g, e, f"T{tv.name}", tv.dtype)
