"""A self mapping: `t0 + sum(t0, [1])[None, :]` ties t0's two axes together through the
sum, so no single kernel can index t0 (one loop would serve both axes). Like nvFuser,
the segmenter rejects such a candidate for every scheduler and cuts it; each group is
then judged on an ID map of its own expressions, where the tie is gone. Before, one map
of the whole fusion was used and a persistent kernel gave wrong values."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import FusionDefinition, use_options
from fuser_core.runtime.arguments import convert_inputs
from fuser_core.scheduler.base import RejectCategory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(17)


def transposed_row_sums(fd: FusionDefinition) -> None:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
    fd.add_output(fd.ops.add(t0, fd.ops.broadcast(fd.ops.sum(t0, [1]), [True, False])))


def _run(build, x):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="reference", device_model="h100_sxm"):
        (out,) = fd.execute([x])
        runtime = fd.runtime_for([x])
    return out, runtime


@pytest.mark.parametrize("n", [1, 7, 64, 130])
def test_a_self_mapped_fusion_is_cut_in_two_and_each_kernel_is_right(n):
    x = RNG.standard_normal((n, n)).astype(np.float32)
    out, runtime = _run(transposed_row_sums, x)
    np.testing.assert_allclose(out, x + x.sum(1)[None, :], rtol=1e-5, atol=1e-4)
    segmented = runtime.segmented
    assert [g.scheduler.value for g in segmented.groups] == ["reduction", "pointwise"]
    whole = segmented.whole_fusion_rejections
    assert whole and all(r.category == RejectCategory.self_mapping for r in whole)
    assert "T0 has two axes mapped to each other (iS0{i0} and iS1{i1}): a self mapping" in whole[0].reason
    assert [r.category for r in segmented.reasons] == [RejectCategory.self_mapping]
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, [x], vectorize=vectorize) == ["kernel_g0", "kernel_g1"]


def test_each_group_has_its_own_id_map_with_no_self_mapping():
    x = RNG.standard_normal((16, 16)).astype(np.float32)
    _out, runtime = _run(transposed_row_sums, x)
    segmented = runtime.segmented
    for group in segmented.groups:
        id_map = segmented.id_maps[group.id]
        tensors = [*group.inputs, *(o for e in group.exprs for o in e.outputs if hasattr(o, "domain"))]
        assert id_map.self_mapping(tensors) is None
    # new values of the same size reuse the runtime: the groups' own maps give the same heuristics
    y = RNG.standard_normal((16, 16)).astype(np.float32)
    assert runtime.refusal(convert_inputs(segmented.complete, [y])) is None


def test_a_fusion_without_the_tie_stays_one_kernel():
    def row_sums(fd: FusionDefinition) -> None:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.add(t0, fd.ops.broadcast(fd.ops.sum(t0, [1]), [False, True])))

    x = RNG.standard_normal((8, 33)).astype(np.float32)
    out, runtime = _run(row_sums, x)
    np.testing.assert_allclose(out, x + x.sum(1)[:, None], rtol=1e-5, atol=1e-4)
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_persistent"]
