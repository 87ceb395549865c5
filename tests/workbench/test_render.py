"""Rich renderers through a recording console: the text they print, and the styles
they give names, segments, verdicts and diffs."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from fuser_core import DumpOption, KernelArtifact, LaunchParams, LaunchRecord
from workbench.diff import diff_artifacts
from workbench.render import RENDERERS, make_console, render_dump
from workbench.render.diffs import render_run_diff
from workbench.render.tables import group_color, presched_ir
from workbench.render.text import THEME, code_text, ir_text


def recording() -> Console:
    return Console(
        record=True, file=io.StringIO(), width=200, force_terminal=True, color_system="truecolor", theme=THEME
    )


def styled(renderable) -> list[tuple[str, str]]:
    """(text, style) of every piece the console renders."""
    console = recording()
    return [(seg.text, str(seg.style or "")) for seg in console.render(renderable)]


def style_of(renderable, piece: str) -> str:
    found = [style for text, style in styled(renderable) if piece in text]
    assert found, f"{piece!r} was not rendered"
    return found[0]


def plain(renderable) -> str:
    out = io.StringIO()
    make_console(out, color=False).print(renderable)
    return out.getvalue()


def test_every_dump_option_has_a_renderer():
    assert set(DumpOption.__members__) <= set(RENDERERS)


def test_ir_names_are_styled_and_the_text_is_unchanged():
    text = ir_text("T2_l[ iS10{i0} ]\n   = sin(T1_g[ iblockIdx.x4{i3} ])\n")
    assert text.plain == "T2_l[ iS10{i0} ]\n   = sin(T1_g[ iblockIdx.x4{i3} ])"
    spans = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert spans["T2_l"] == "ir.tensor" and spans["T1_g"] == "ir.tensor"
    assert spans["iS10"] == "ir.iterdomain" and spans["iblockIdx.x4"] == "ir.iterdomain"
    assert spans["i0"] == "ir.scalar" and spans["i3"] == "ir.scalar"
    assert style_of(text, "T2_l") == "bold cyan"


def test_cuda_is_highlighted_by_pygments():
    text = code_text("__global__ void kernel(float* T0) {\n  T0[threadIdx.x] = 1.0f;\n}\n")
    assert text.plain.startswith("__global__ void kernel")
    keyword = [s for s in text.spans if text.plain[s.start : s.end] in ("void", "float")]
    assert keyword and all(str(s.style) for s in keyword)


def test_plain_dumps_print_what_fuser_core_prints(pow_run, resize_runs):
    on, _ = resize_runs
    a = on.artifacts
    assert (
        plain(render_dump("fusion_ir_concretized", a))
        == a.concretization + "\nConcretized Fusion:\n" + a.concretized_ir
    )
    assert plain(render_dump("cache_events", a)) == a.cache_line + "\n"
    assert plain(render_dump("segmenter_logging", pow_run.artifacts)) == pow_run.artifacts.segmenter_log
    assert plain(render_dump("fusion_ir_math", pow_run.artifacts)) == pow_run.artifacts.scheduled_math


def test_presched_marks_each_expression_in_its_segments_colour(pow_run):
    text = presched_ir(pow_run.artifacts.presched)
    assert "} // %kernel_math" in text.plain and "Segments:" not in text.plain  # the legend is a table
    assert style_of(text, "// g0 reduction") == f"bold reverse {group_color(0)}"
    assert style_of(text, "// g1 pointwise") == f"bold reverse {group_color(1)}"
    pieces = styled(text)
    pow_line = [style for piece, style in pieces if "pow(" in piece]
    assert pow_line and group_color(1) in pow_line[0]
    assert group_color(0) != group_color(1)


def test_the_legend_is_a_table_with_each_groups_reason(pow_run):
    text = plain(render_dump("fusion_ir_presched", pow_run.artifacts))
    rows = [line for line in text.splitlines() if line.startswith("│ g")]
    assert len(rows) == 2
    assert "reduction" in rows[0] and "[T0] -> [T4]" in rows[0] and "g1: disjoint iteration domains" in rows[0]
    assert "the whole fusion as one kernel:" in text
    assert style_of(render_dump("fusion_ir_presched", pow_run.artifacts), "g1").startswith("bold")


def test_segments_params_and_passes_are_tables(pow_run):
    a = pow_run.artifacts
    segments = plain(render_dump("segmented_fusion", a))
    assert "│ g0    │ reduction │ nvfuser_reduction_f0_c1_r0_g0 │" in segments
    assert "no edges: no tensor passes from one kernel to another" in segments
    assert "Segmented_Fusion{" in segments
    params = plain(render_dump("scheduler_params", a))
    assert "g1 pointwise: nvfuser_pointwise_f0_c1_r0_g1" in params
    assert any(line.startswith("│ threads_x") and "128" in line for line in params.splitlines())
    passes = render_dump("fusion_ir_preseg", a)
    assert "│ dead_code_removal" in plain(passes)
    assert style_of(passes, "changed") == "bold yellow"


def test_transforms_are_trees_per_tensor(pow_run):
    text = plain(render_dump("fusion_ir", pow_run.artifacts))
    assert "===== g1 pointwise: nvfuser_pointwise_f0_c1_r0_g1 =====" in text
    assert "├── logical domain : (iS3{i4}, iS4{i5}, iS5{i6})" in text
    assert "│   ├── Merge: iS3{i4} and iS4{i5} -> " in text
    assert "└── loop domain : (" in text


def test_kernel_views_say_why_they_are_empty_and_fill_from_the_artifacts(pow_run):
    a = replace(pow_run.artifacts, kernels=())
    for name in ("cuda_kernel", "kernel_ir", "launch_param", "cuda_full"):
        assert plain(render_dump(name, a)).startswith("no kernels generated yet"), name
    assert "reference backend: nothing launched" in plain(render_dump("kernel_metadata", a))
    launch = LaunchParams((64, 1, 1), (128, 1, 1))
    kernel = KernelArtifact(
        1, "nvfuser_pointwise_f0_c1_r0_g1", "pointwise", "%Kernel {", "__global__ void k() {}", launch, "int"
    )
    record = LaunchRecord(1, kernel.name, launch, 2048, 1024, 1e-5, 40, 0, 3.35e12, "memory-bound")
    filled = replace(a, kernels=(kernel,), launches=(record,))
    cuda = plain(render_dump("cuda_kernel", filled))
    assert "g1 pointwise: nvfuser_pointwise_f0_c1_r0_g1" in cuda and "__global__ void k() {}" in cuda
    assert "BlockDim.x = 128" in plain(render_dump("launch_param", filled))
    metadata = plain(render_dump("kernel_metadata", filled))
    row = next(line for line in metadata.splitlines() if line.startswith("│ g1"))
    assert "10.0 µs" in row and "3072" in row and "0.3" in row and "40" in row and "memory-bound" in row


def test_cache_hits_and_misses_have_their_own_styles(resize_runs):
    on, _ = resize_runs
    assert style_of(render_dump("cache_events", on.artifacts), "cache: miss") == "bold yellow"
    hit = replace(on.artifacts, cache_hit=True, cache_line="cache: hit at input key -> f0_c1_r0")
    assert style_of(render_dump("cache_events", hit), "cache: hit") == "bold green"


def test_a_diff_renders_its_summary_and_coloured_lines(resize_runs):
    on, off = resize_runs
    rendered = render_run_diff(diff_artifacts(off.artifacts, on.artifacts))
    text = plain(rendered)
    assert "original IR: same\n" in text
    assert "+ConcretizationInfo (concretize_resize_extents=on)" in text
    assert style_of(rendered, "+ConcretizationInfo") == "green"
    assert style_of(rendered, "-ConcretizationInfo") == "red"
    assert style_of(rendered, "original IR: same") == "dim"


@pytest.mark.parametrize("color", [False, None])
def test_plain_consoles_write_no_escape_codes(pow_run, color, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = io.StringIO()
    make_console(out, color=color).print(render_dump("fusion_ir_presched", pow_run.artifacts))
    assert "\x1b[" not in out.getvalue()
    out = io.StringIO()
    make_console(out, color=True).print(ir_text("T0_g"))
    assert "\x1b[" in out.getvalue()


def test_presched_groups_gives_each_line_of_the_math_its_segment(pow_run):
    from workbench.render.tables import presched_groups

    a = pow_run.artifacts
    lines = a.presched.split("} // %kernel_math", 1)[0].splitlines()
    owners = presched_groups(a.presched)
    assert len(owners) == len(lines) + 1
    for line, owner in zip(lines, owners, strict=False):
        if "// g0 reduction" in line or line.lstrip().startswith("= reduction("):
            assert owner == 0, line
        elif "// g1 pointwise" in line or line.lstrip().startswith(("= pow(", ", double(3))")):
            assert owner == 1, line
        else:
            assert owner is None, line


def test_presched_ir_with_a_highlight_dims_the_other_groups(pow_run):
    text = presched_ir(pow_run.artifacts.presched, highlight=1)
    assert "dim" in style_of(text, "= reduction(") and "dim" not in style_of(text, "= pow(")
    assert "bold" in style_of(text, "= pow(")
    plain_default = presched_ir(pow_run.artifacts.presched).plain
    assert text.plain == plain_default


def test_merges_table_has_one_row_per_pair_with_its_category(pow_run):
    from workbench.render.tables import merges_table

    out = plain(merges_table(pow_run.artifacts))
    assert out.count("g0 + g1") == 1 and "disjoint iteration domains" in out
    assert "Scheduler _pointwise_" in out and "schedulers' rejections" in out


def test_the_kernel_views_give_each_groups_reason_from_codegen(pow_run):
    a = pow_run.artifacts
    assert a.kernel_refusals == ()  # the reduction and the pointwise group both have kernels
    assert [k.group_id for k in a.kernels] == [0, 1]
    refused = replace(a, kernels=(), kernel_refusals=((0, "no generated kernel for expr_eval groups"),))
    note = "no kernels generated yet: g0 no generated kernel for expr_eval groups"
    assert refused.kernels_note == note
    assert plain(render_dump("cuda_kernel", refused)).startswith(note)


def test_presched_exprs_gives_each_expression_its_lines_group_and_first_tensor(pow_run):
    from workbench.render.tables import ExprLines, presched_exprs

    a = pow_run.artifacts
    exprs = presched_exprs(a.presched)
    assert exprs == [ExprLines(8, 10, 0, "T4"), ExprLines(10, 13, 1, "T3")]
    lines = a.presched.splitlines()
    assert lines[8].startswith("T4_g[") and lines[9].lstrip().startswith("= reduction(")
    assert lines[12].strip() == ", double(3));" and lines[13] == "} // %kernel_math"
    assert [e.tensor for e in exprs] == [x.outputs[0] for x in a.exprs]
