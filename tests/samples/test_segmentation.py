"""How every bundled sample is cut into kernels at its bundled sizes, why, and what each
scheduler did: decisions, reasons, the loop-domain check on every scheduled tensor,
and golden texts of the dumps (regenerate with FUSER_UPDATE_GOLDENS=1 and review the
diff).

Runtimes are built with `fd.runtime_for(inputs)` (no execution) for the H100 SXM
device model, so the texts do not depend on the machine.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from fuser_core import load_repro, use_options
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.dumps import print_scheduled
from fuser_core.runtime.kernel_runtime import FusionKernelRuntime
from fuser_core.runtime.reference import bind_leaves, leaf_values
from fuser_core.scheduler.loop_check import loop_domain_problems
from fuser_core.segmenter.printer import print_presched, print_scheduler_params, print_segmented_fusion

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "sample_fusions"
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.py"))
GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "data" / "samples"

# The kernels each sample becomes, in run order: the issue's expectations.
EXPECTED_SCHEDULERS = {
    "bias_residual_layer_norm": ["inner_persistent"],
    "cross_entropy_bwd": ["reduction"],
    "dynamic_reshape": ["inner_persistent"],
    "gelu_tanh_fwd": ["pointwise"],
    "issue785_gelu_bias_bwd": ["reduction", "pointwise"],
    "issue785_reduction_pow": ["reduction", "pointwise"],
    "layer_norm_bwd": ["inner_outer_persistent"],
    "layer_norm_fwd": ["inner_persistent"],
    "linear_output_order": ["reduction"],
    "resize_pad_to_broadcast_dynamic": ["pointwise"],
    "rms_norm_fwd": ["inner_persistent"],
    "rope_issue2795": ["pointwise"],
    "rope_litgpt": ["pointwise"],
    "segment_set_log_softmax": ["pointwise", "inner_persistent"],
    "softmax": ["reduction"],
    "transpose_add": ["transpose"],
    "var_mean": ["inner_persistent"],
}


@cache
def sample_runtime(name: str) -> tuple[FusionKernelRuntime, dict[int, object]]:
    (loaded,) = load_repro(SAMPLES_DIR / f"{name}.py").definitions
    inputs = loaded.materialize_inputs(seed=0)
    with use_options(device_model="h100_sxm"):
        runtime = loaded.fd.runtime_for(inputs)
    complete = runtime.segmented.complete
    leaves = leaf_values(complete, bind_args(complete, convert_inputs(complete, inputs)))
    return runtime, leaves


def test_every_sample_has_an_expectation():
    assert sorted(EXPECTED_SCHEDULERS) == SAMPLES


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_segments_into_the_expected_kernels(name):
    runtime, _ = sample_runtime(name)
    schedulers = [g.scheduler.value for g in runtime.segmented.groups]
    assert schedulers == EXPECTED_SCHEDULERS[name]
    complete = runtime.segmented.complete
    tensor_exprs = [e for e in complete.exprs() if e.is_tensor_op()]
    placed = [e for g in runtime.segmented.groups for e in g.exprs]
    assert sorted(e.name for e in placed) == sorted(e.name for e in tensor_exprs)
    assert all(edge.producer < edge.consumer for edge in runtime.segmented.edges)


@pytest.mark.parametrize("name", SAMPLES)
def test_every_scheduled_tensor_passes_the_loop_domain_check(name):
    runtime, leaves = sample_runtime(name)
    for group in runtime.segmented.groups:
        assert group.fusion is not None
        ev = bind_leaves(group.fusion, leaves)

        def extent(dim, ev=ev):
            if dim.is_broadcast and dim.expanded_extent is None:
                return 1
            return int(ev.evaluate(dim.maybe_expanded_extent))

        assert loop_domain_problems(group.fusion, extent) == [], f"g{group.id} {group.scheduler.value}"


def test_issue785_reduction_pow_says_why_its_two_kernels_were_not_merged():
    runtime, _ = sample_runtime("issue785_reduction_pow")
    (reason,) = runtime.segmented.reasons
    assert (reason.first, reason.second) == (0, 1)
    assert reason.category.value == "disjoint iteration domains"
    text = print_presched(runtime.segmented)
    assert "  // g0 reduction\n   = reduction( T0_g" in text
    assert "  // g1 pointwise\n   = pow(" in text
    assert "not merged with g1: disjoint iteration domains" in text
    assert "Scheduler _pointwise_ ***rejected*** because : no support for reduction ops" in text


def test_layer_norm_bwd_is_one_inner_outer_kernel():
    """At its 16384 rows, one kernel reads x and grad_out once: a wave of blocks of 512, two
    an SM (fewer rows stay two kernels: tests/unit/scheduler/test_inner_outer). 256 blocks of
    32 row pairs: the 264 the SMs hold would leave the busiest with as many iterations."""
    runtime, _ = sample_runtime("layer_norm_bwd")
    (group,) = runtime.segmented.groups
    assert group.params.row_blocks == 256  # type: ignore[attr-defined]
    assert group.params.padded_threads == 512 and group.params.min_blocks_per_sm == 2  # type: ignore[attr-defined]


def test_segment_set_hint_is_the_reason_for_the_cut():
    runtime, _ = sample_runtime("segment_set_log_softmax")
    (reason,) = runtime.segmented.reasons
    assert reason.category.value == "segment_set hint"


def test_transpose_stages_the_transposed_input_through_shared_memory():
    runtime, _ = sample_runtime("transpose_add")
    (group,) = runtime.segmented.groups
    text = print_scheduled(runtime, transforms=False)
    assert "T6_s[" in text and "= Set( T1_g" in text
    assert group.record is not None and group.record.notes == ["staged through shared memory: T6"]


def test_inner_persistent_keeps_the_row_in_registers_and_reads_it_once():
    runtime, _ = sample_runtime("layer_norm_fwd")
    (group,) = runtime.segmented.groups
    params = group.params
    assert params.persistent and params.inner and not params.buffer_in_shared_memory  # type: ignore[attr-defined]
    assert params.vectorize == 8  # 16-byte bf16 loads  # type: ignore[attr-defined]
    row = group.fusion.inputs[0]
    reads = [e for e in group.fusion.exprs() if e.op_name == "set" and e.inputs[0] is row]
    assert len(reads) == 1  # the row is loaded once, then reused after the reductions


def test_softmax_re_reads_its_bf16_rows():
    """An exp normalization of 16-bit rows of 1024 takes the non-persistent schedule
    (scheduler.rereading): the row is read again after each reduction, nothing is held."""
    runtime, _ = sample_runtime("softmax")
    (group,) = runtime.segmented.groups
    params = group.params
    assert group.scheduler.value == "reduction" and not params.persistent and params.buffers == ()  # type: ignore[attr-defined]
    assert params.vectorize == 8 and params.grid_reduction == 1  # type: ignore[attr-defined]


DUMPS = {
    "presched": lambda rt: print_presched(rt.segmented),
    "segmented_fusion": lambda rt: print_segmented_fusion(rt.segmented),
    "scheduler_params": lambda rt: print_scheduler_params(rt.segmented, rt.name),
    "fusion_ir": lambda rt: print_scheduled(rt, transforms=True),
}


@pytest.mark.parametrize("dump", sorted(DUMPS))
@pytest.mark.parametrize("name", SAMPLES)
def test_sample_dump_matches_its_golden_text(name, dump):
    runtime, _ = sample_runtime(name)
    text = DUMPS[dump](runtime)
    path = GOLDEN_DIR / f"{name}.{dump}.txt"
    if os.environ.get("FUSER_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden {path.name}: run with FUSER_UPDATE_GOLDENS=1 and review it"
    assert text == path.read_text()
