"""The self-mapped fusion `t0 + sum(t0, [1])[None, :]` on the GPU: cut in two kernels,
both generated, and right (one persistent kernel used to give wrong values)."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import FusionDefinition, use_options

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [7, 256, 1031])
def test_transposed_row_sums_on_the_gpu(n):
    cupy = pytest.importorskip("cupy")
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.add(t0, fd.ops.broadcast(fd.ops.sum(t0, [1]), [True, False])))
    x = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    with use_options(backend="cuda"):
        (out,) = fd.execute([cupy.asarray(x)])
    runtime = fd.executor_cache.last_report.runtime
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction", "pointwise"]
    assert not runtime.executable.host_reasons
    np.testing.assert_allclose(cupy.asnumpy(out), x + x.sum(1, dtype=np.float64)[None, :], rtol=1e-4, atol=1e-3)
