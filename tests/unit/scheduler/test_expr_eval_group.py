"""A matmul or linear is never fused: it becomes an expr_eval kernel of its own between
generated kernels, and the legend says why its neighbours were not merged with it."""

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition
from fuser_core.segmenter.printer import print_presched


@pytest.mark.parametrize("op", ["matmul", "linear"])
def test_a_library_op_is_its_own_kernel_between_generated_ones(op):
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        activated = fd.ops.relu(a)
        product = fd.ops.matmul(activated, b) if op == "matmul" else fd.ops.linear(activated, b)
        fd.add_output(fd.ops.mul(product, product))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16), dtype=np.float32)
    w = rng.standard_normal((16, 4) if op == "matmul" else (4, 16), dtype=np.float32)
    runtime = fd.runtime_for([x, w])
    segmented = runtime.segmented
    assert [g.scheduler.value for g in segmented.groups] == ["pointwise", "expr_eval", "pointwise"]
    assert [(e.producer, e.consumer) for e in segmented.edges] == [(0, 1), (1, 2)]
    assert {r.category.value for r in segmented.reasons} == {"expr-eval op"}
    assert f"{op} producing T" in print_presched(segmented)
    (out,) = fd.execute([x, w])
    product = np.maximum(x, 0) @ (w if op == "matmul" else w.T)
    np.testing.assert_allclose(out, product * product, rtol=1e-5)
