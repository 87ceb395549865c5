"""Where an element came from: the traced value of an element agrees with the
reference's for every bundled sample (shrunk, as the generated-kernel checks run them),
the writer, loops, predicates, reads and reductions a trace reports, and its errors."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuser_core import FuserError, FusionDefinition, trace_element

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import SAMPLES, runtime_and_inputs, shrunk_sample


@cache
def shrunk(name: str) -> tuple[Any, list[Any]]:
    return runtime_and_inputs(shrunk_sample(name))


def outputs(runtime: Any) -> list[str]:
    return [f"T{o.name}" for o in runtime.segmented.complete.outputs]


def close(got: Any, want: Any) -> bool:
    return bool(np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True))


@pytest.mark.parametrize("name", SAMPLES)
def test_traced_value_is_the_references_for_random_elements(name: str) -> None:
    runtime, inputs = shrunk(name)
    rng = np.random.default_rng(7)
    for tensor in outputs(runtime):
        shape = trace_element(runtime, inputs, tensor, [0] * len(runtime_shape(runtime, tensor))).shape
        for _ in range(1):
            index = tuple(int(rng.integers(size)) for size in shape)
            traced = trace_element(runtime, inputs, tensor, index)
            assert close(traced.value, traced.reference), (name, tensor, index, traced.value, traced.reference)
            if traced.kernel is None:
                assert "runs on the host" in (traced.host or "")
                continue
            k = traced.kernel
            assert all(0 <= t < b for t, b in zip(k.thread_idx, k.block, strict=True))
            assert all(0 <= t < g for t, g in zip(k.block_idx, k.grid, strict=True))
            assert 1 <= k.blocks_run <= np.prod(k.grid)  # distinct blocks, at most the grid


def runtime_shape(runtime: Any, tensor: str) -> list[Any]:
    (tv,) = [o for o in runtime.segmented.complete.outputs if f"T{o.name}" == tensor]
    return tv.logical_no_reductions()


def test_a_pointwise_element_reads_exactly_its_operands() -> None:
    runtime, inputs = shrunk("gelu_tanh_fwd")
    traced = trace_element(runtime, inputs, "T16", (5, 33))
    assert [(r.tensor, r.index) for r in traced.reads] == [("T0", (5, 33)), ("T1", (33,))]
    x = np.asarray(inputs[0], np.float32)[5, 33] + np.asarray(inputs[1], np.float32)[33]
    assert traced.reads[0].value == float(np.asarray(inputs[0])[5, 33])
    gelu = 0.5 * x * (1 + np.tanh(0.797885 * (x + 0.044715 * x**3)))
    assert abs(traced.value - gelu) < 2e-2
    k = traced.kernel
    assert k is not None and k.reductions == ()
    assert k.blocks_run == 1  # found in the first block tried (then followed: the same block)
    assert k.statement.startswith("vector x8 T16[")
    assert any(kind == "threadIdx.x" for _, kind, _ in k.loops)
    assert len(k.predicates) == 1 and "<" in k.predicates[0]


def test_a_block_reduction_shows_its_partials_and_combine_order() -> None:
    runtime, inputs = shrunk("softmax")
    traced = trace_element(runtime, inputs, "T12", (1, 2, 3, 4))
    k = traced.kernel
    assert k is not None
    ops = [r.op for r in k.reductions]
    assert ops == ["fmax", "add"]
    row = np.asarray(inputs[0], np.float32)[1, 2, 3]
    assert {r.index for r in traced.reads} == {(1, 2, 3, j) for j in range(row.size)}
    fmax, add = k.reductions
    assert fmax.result[0] == max(p[2][0] for p in fmax.partials)
    assert add.result[0] == pytest.approx(sum(p[2][0] for p in add.partials), rel=1e-5)
    n = len(fmax.partials)
    top = 2 ** (len(fmax.steps) - 1)
    assert fmax.steps[0][0] == (0, 1) and fmax.steps[-1] == ((0, top),) and top < n <= 2 * top


def fusion_with_matmul() -> Any:
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True)
        b = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.relu(fd.ops.matmul(a, b)))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32)]
    return fd.runtime_for(inputs), inputs


def test_an_output_of_a_host_group_says_so() -> None:
    runtime, inputs = fusion_with_matmul()
    hosts = [g for g in runtime.segmented.groups if g.scheduler.value in ("expr_eval",)]
    assert hosts, "the fusion has a host (expr_eval) group"
    tensor = f"T{hosts[0].unscheduled.outputs[0].name}"
    traced = trace_element(runtime, inputs, tensor, [0] * len(hosts[0].unscheduled.outputs[0].logical_no_reductions()))
    assert traced.kernel is None
    assert traced.host == f"expr_eval group g{hosts[0].id} runs on the host: it has no generated kernel"
    assert traced.value == traced.reference


def test_errors_name_the_tensor_and_the_index() -> None:
    runtime, inputs = shrunk("gelu_tanh_fwd")
    with pytest.raises(FuserError, match=r"unknown tensor 'T99': no segment writes it \(outputs: T16\)"):
        trace_element(runtime, inputs, "T99", (0, 0))
    with pytest.raises(FuserError, match=r"T16 is 2-D \(shape \[40, 72\]\); the index \[1\] has 1"):
        trace_element(runtime, inputs, "T16", (1,))
    with pytest.raises(FuserError, match=r"index 72 out of range for axis 1 of T16 \(shape \[40, 72\]\)"):
        trace_element(runtime, inputs, "T16", (0, 72))


def test_a_grid_reduction_runs_one_column_of_blocks() -> None:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.sum(t0, [0]))
    x = np.random.default_rng(0).standard_normal((2048, 4096)).astype(np.float32)
    runtime = fd.runtime_for([x])
    traced = trace_element(runtime, [x], outputs(runtime)[0], (5,))
    assert traced.value == pytest.approx(float(x[:, 5].sum()), rel=1e-4)
    assert {r.index for r in traced.reads} == {(i, 5) for i in range(2048)}
    k = traced.kernel
    assert k is not None and k.grid[0] > 1 and k.grid[1] > 1
    assert k.blocks_run == k.grid[1]  # the first column tried holds it (found, then followed)
