"""Rename-insensitive diffs: a pure renumbering shows no change, a one-token change
shows as one changed line in the new run's names, and two runs' stages are summarized."""

from __future__ import annotations

from fuser_core import FusionDefinition
from workbench.diff import diff_artifacts, diff_texts, rename, skeleton, timing_lines
from workbench.session import Session


def build(unused_ops: int, op: str = "sin") -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        for _ in range(unused_ops):  # unused: dropped from the print, but they take names
            fd.ops.mul(t0, t0)
        t1 = getattr(fd.ops, op)(t0)
        t2 = fd.ops.sum(t1, dims=[1])
        fd.add_output(t2)
    return fd


def test_a_pure_renumbering_shows_no_change():
    old, new = build(0).fusion_ir(), build(3).fusion_ir()
    assert old != new and "T4_l" in new and "T1_l" in old  # the names did move
    found = diff_texts(old, new)
    assert found.same and found.unified == "" and found.changed_lines == 0


def test_a_one_token_change_is_one_line_in_the_new_names():
    old, new = build(0).fusion_ir(), build(3, "cos").fusion_ir()
    found = diff_texts(old, new)
    assert found.changed_lines == 1
    removed = [line for line in found.unified.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in found.unified.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == ["+   = cosf(T0_g[ iS0{i0}, iS1{i1} ]);"]
    assert removed == ["-   = sinf(T0_g[ iS0{i0}, iS1{i1} ]);"]
    defined = next(line for line in new.splitlines() if line.startswith("T4_l["))
    assert f"\n {defined}\n" in found.unified  # context lines carry the new run's names
    assert "T1_l" not in found.unified and "T1_l" in old


def test_the_skeleton_keeps_an_iterdomains_kind_and_drops_every_counter():
    line = "T7_l[ iblockIdx.x50{( ceilDiv(i2, 4) )}, iS7{i17} ] = f0_c1_r0 (12)"
    assert skeleton(line) == "<tensor>_l[ iblockIdx.x#{( ceilDiv(<scalar>, 4) )}, iS#{<scalar>} ] = <runtime> (12)"


def test_renaming_keeps_an_iterdomains_parallel_type():
    mapping = {("id", "5"): "iS9", ("tensor", "T1"): "T3"}
    assert rename("T1_l[ iblockIdx.x5{4} ] T10", mapping) == "T3_l[ iblockIdx.x9{4} ] T10"


def test_two_runs_summarize_every_stage_and_show_what_changed(resize_runs):
    on, off = resize_runs
    result = diff_artifacts(off.artifacts, on.artifacts)
    summary = result.summary_lines()
    assert "original IR: same" in summary
    assert "arguments: same" in summary
    assert any(line.startswith("concretization: ") and line.endswith("lines changed") for line in summary)
    concretization = next(s for s in result.stages if s.label == "concretization")
    assert "-ConcretizationInfo (concretize_resize_extents=off)" in concretization.diff.unified
    assert "+ConcretizationInfo (concretize_resize_extents=on)" in concretization.diff.unified
    assert "+    T2 axis 2: (2, 1, 1) -> Iteration" in concretization.diff.unified
    assert summary[-1].startswith("time: reference backend: nothing launched")
    assert "wall time of the run" in summary[-1] and "->" in summary[-1]


def test_the_same_run_twice_is_the_same_everywhere_but_the_cache(resize_runs):
    on, _ = resize_runs
    result = diff_artifacts(on.artifacts, on.artifacts)
    assert result.changed == []
    assert all(line.endswith(": same") for line in result.summary_lines()[:-1])


def test_per_kernel_times_are_compared_by_group(pow_run):
    from dataclasses import replace

    from fuser_core import LaunchParams, LaunchRecord

    def launch(group: int, seconds: float) -> LaunchRecord:
        return LaunchRecord(
            group,
            f"k{group}",
            LaunchParams((1, 1, 1), (128, 1, 1)),
            4096,
            4096,
            seconds,
            32,
            0,
            3.35e12,
            "memory-bound",
        )

    a = replace(pow_run.artifacts, launches=(launch(0, 35.1e-6), launch(1, 2e-6)))
    b = replace(pow_run.artifacts, launches=(launch(0, 8.2e-6),))
    assert timing_lines(a, b) == ("time g0: 35.1 µs -> 8.2 µs", "time g1: 2.0 µs -> not launched")


def test_two_compilations_of_the_same_fusion_are_the_same_though_their_pass_times_differ():
    runs = []
    for _ in range(2):  # two sessions: two caches, so the passes run twice
        session = Session.open("issue785_reduction_pow")
        session.set_shapes([(4, 8, 64), (4, 8, 64)])
        runs.append(session.run().artifacts)
    assert [p.seconds for p in runs[0].passes] != [p.seconds for p in runs[1].passes]
    result = diff_artifacts(runs[0], runs[1])
    assert [s.label for s in result.changed] == []


def test_a_runtime_name_inside_a_kernel_name_is_renamed_too():
    old = "===== g0 pointwise: nvfuser_pointwise_f0_c1_r0_g0 =====\n  reference: 3\n"
    new = "===== g0 pointwise: nvfuser_pointwise_f0_c2_r0_g0 =====\n  reference: 3\n"
    assert diff_texts(old, new).same
    changed = diff_texts(old, new.replace("reference: 3", "reference: 4"))
    assert changed.changed_lines == 1 and "-  reference: 3" in changed.unified
