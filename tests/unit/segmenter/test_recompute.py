"""Recomputing at the cut (segmenter/recompute.py) and the horizontal merge after it:
layer_norm_bwd's decision and values, and the two refusals (not cheaper; no scheduler
takes the reader with the recomputation), each recorded with its bytes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from fuser_core import DataType, FusionDefinition, load_repro, use_options
from fuser_core.passes import run_presegmentation_passes
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.reference import evaluate_fusion
from fuser_core.scheduler.base import Rejection, Scheduler, SchedulerType, reject
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.registry import SCHEDULERS
from fuser_core.segmenter.finder import SegmentCandidateFinder
from fuser_core.segmenter.printer import print_segmented_fusion, print_segmenter_log
from fuser_core.segmenter.segmented_fusion import Recompute, SegmentedFusion

sys.path.insert(0, str(Path(__file__).parents[1] / "codegen"))
from kernels_check import check_generated_kernels, shrunk_sample


def _layer_norm_bwd() -> tuple[Any, Any, list[Any]]:
    """The shrunk sample ([72, 40]): its definition, its runtime and its inputs."""
    (loaded,) = load_repro(shrunk_sample("layer_norm_bwd")).definitions
    inputs = loaded.materialize_inputs(seed=0)
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = loaded.fd.runtime_for(inputs)
    return loaded.fd, runtime, inputs


def _records(segmented: SegmentedFusion) -> list[Recompute]:
    return [a for a in segmented.attempts if isinstance(a, Recompute)]


def _names(tvs: list[Any]) -> list[str]:
    return sorted(f"T{tv.name}" for tv in tvs)


def test_layer_norm_bwd_recomputes_its_float_intermediates_and_merges_its_reductions():
    _, runtime, _ = _layer_norm_bwd()
    segmented = runtime.segmented
    assert [g.scheduler for g in segmented.groups] == [SchedulerType.inner_persistent, SchedulerType.reduction]
    g0, g1 = segmented.groups
    assert _names(g0.outputs) == ["T28"]  # no longer T9 and T10
    assert _names(g1.inputs) == ["T0", "T1", "T2", "T3"] and _names(g1.outputs) == ["T31", "T33"]
    assert segmented.edges == [] and segmented.intermediates() == []
    # T10 = cast(T0) recomputed in each reduction, T9 = (cast(T1) - T2) * T3 in the first.
    done = [(r.tensor, r.sources, r.new_bytes, r.crossing_bytes) for r in segmented.recomputes]
    n, h = 72, 40
    assert done == [
        ("T10", ("T0",), n * h * 2, n * h * 4),
        ("T9", ("T1", "T2", "T3"), n * h * 2 + 2 * n * 4, n * h * 4),
        ("T10", ("T0",), n * h * 2, n * h * 4),
    ]
    assert all(r.accepted and r.scheduler == SchedulerType.reduction for r in segmented.recomputes)
    # Every expression in exactly one group, the clones included; the originals stay in g0.
    placed = [e for g in segmented.groups for e in g.exprs]
    assert sorted(e.name for e in placed) == sorted(e.name for e in segmented.complete.exprs() if e.is_tensor_op())
    for record in segmented.recomputes:
        assert record.clone is not None and segmented.group_of(record.clone.definition) is g1
    t9 = next(tv for tv in segmented.complete.tensors() if tv.name == 9)
    assert all(segmented.group_of(use) is g0 for use in t9.uses)


def test_layer_norm_bwd_decision_is_printed():
    _, runtime, _ = _layer_norm_bwd()
    log = print_segmenter_log(runtime.segmented)
    assert "[recompute] T9 of inner_persistent{" in log
    assert "recomputed from T1, T2, T3 as T39: reads 6.2 KiB of new inputs instead of 11.2 KiB" in log
    assert "[horizontal merge] reduction{24, 25, 26, 29, 30, 31, 32, 33, 34} + reduction{27, 28, 35}: " in log
    dump = print_segmented_fusion(runtime.segmented)
    assert (
        "recomputed at the cut:\n  T10 in g1 from T0 as T34: reads 5.6 KiB of new inputs instead of 11.2 KiB\n" in dump
    )


def test_layer_norm_bwd_values_on_the_reference_backend_and_the_interpreter():
    fd, runtime, inputs = _layer_norm_bwd()
    with use_options(device_model="h100_sxm", backend="reference"):
        outputs = fd.execute(inputs)
    definition = fd.fusion  # the unsegmented definition
    expected = evaluate_fusion(definition, bind_args(definition, convert_inputs(definition, inputs)))
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-2, atol=1e-2)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0", "kernel_g1"]


def _two_reductions(fd: FusionDefinition) -> None:
    """c = bf16(a + b) of two float inputs, reduced over each axis: two kernels, c between."""
    a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    b = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    c = fd.ops.cast(fd.ops.add(a, b), DataType.BFloat16)
    fd.add_output(fd.ops.sum(c, dims=[1]))
    fd.add_output(fd.ops.sum(c, dims=[0]))


def test_a_bf16_tensor_of_two_float_inputs_is_not_recomputed():
    with FusionDefinition() as fd:
        _two_reductions(fd)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((64, 48)).astype(np.float32) for _ in range(2)]
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    segmented = runtime.segmented
    assert len(segmented.groups) == 2 and segmented.recomputes == []
    (record,) = _records(segmented)
    assert not record.accepted and record.note == "not cheaper"
    assert (record.sources, record.new_bytes, record.crossing_bytes) == (("T0", "T1"), 2 * 64 * 48 * 4, 64 * 48 * 2)
    (edge,) = segmented.edges
    assert f"T{edge.val.name}" == record.tensor
    assert "not recomputed from T0, T1 (not cheaper): reads 24 KiB of new inputs instead of 6 KiB" in (
        print_segmenter_log(segmented)
    )


@dataclass(frozen=True)
class _NoColumnSumOfT1:
    """A scheduler as it is, except that it refuses a reduction over axis 0 in a group
    that reads fusion input T1: a stand-in for a limit the recomputation runs into."""

    inner: Scheduler

    @property
    def type(self) -> SchedulerType:
        return self.inner.type

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        reads_t1 = any(tv.name == 1 and tv.definition is None for tv in group.inputs)
        column_sum = any(e.outputs[0].logical[0].is_reduction for e in group.reductions)
        if reads_t1 and column_sum:
            return reject(self.type, "test: no column sum of T1")
        return self.inner.compile_time_check(group)


def test_a_recomputation_no_scheduler_accepts_is_undone():
    _, runtime, inputs = _layer_norm_bwd()
    fusion, _ = runtime.fusion.clone()
    run_presegmentation_passes(fusion)
    info = RuntimeInfo(
        bind_args(fusion, convert_inputs(fusion, inputs), values=False),
        runtime.compiled.device,
        runtime.signature.index_type,
    )
    before = fusion.statement_count()
    schedulers = tuple(_NoColumnSumOfT1(s) for s in SCHEDULERS)
    segmented = SegmentCandidateFinder(fusion, info, schedulers=schedulers).run()  # type: ignore[arg-type]
    t9 = [r for r in _records(segmented) if r.tensor == "T9"]
    assert [(r.accepted, r.note) for r in t9] == [(False, "no scheduler accepts the reader with it")]
    assert any(r.reason == "test: no column sum of T1" for r in t9[0].rejections)
    # T9 still crosses from g0; T10 is recomputed (twice); nothing of the T9 attempt is left.
    assert [f"T{e.val.name}" for e in segmented.edges] == ["T9"]
    assert [r.tensor for r in segmented.recomputes] == ["T10", "T10"]
    assert fusion.statement_count() == before + 2 * 5  # two casts: expr, tensor, domain, 2 IterDomains
    assert {tv.name for tv in fusion.tensors()} == {tv.name for tv in fusion.used_tensors()}
    assert [g.scheduler for g in segmented.groups] == [SchedulerType.inner_persistent, SchedulerType.reduction]


def test_the_refused_fusion_still_computes_the_right_values():
    with FusionDefinition() as fd:
        _two_reductions(fd)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((64, 48)).astype(np.float32) for _ in range(2)]
    with use_options(device_model="h100_sxm", backend="reference"):
        outputs = fd.execute(inputs)
    c = (inputs[0] + inputs[1]).astype(ml_dtypes.bfloat16).astype(np.float64)
    for got, axis in zip(outputs, (1, 0), strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), c.sum(axis=axis), rtol=2e-2, atol=2e-1)
