"""Graphviz export (checked structurally), the metrics CSV, and the HTML and JSON reports."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace

import pytest

from fuser_core import FuserError, load_repro
from workbench.artifacts import stages
from workbench.graph import segment_graph, write_graph
from workbench.metrics import COLUMNS, rows, write_csv
from workbench.report import html_report, json_report
from workbench.session import RunOptions, Session, device_label

EXPECTED_COLUMNS = [
    "fusion",
    "definition",
    "run",
    "group",
    "scheduler",
    "kernel",
    "shapes",
    "options",
    "backend",
    "device",
    "time_us",
    "bytes",
    "gbps",
    "fraction_of_peak",
    "registers",
    "spills",
    "estimate",
    "estimate_us",
    "bound",
    "flops",
    "of_estimate",
    "note",
]


def cluster(source: str, group: int) -> str:
    return source.split(f"subgraph cluster_g{group} {{", 1)[1].split("\n\t}", 1)[0]


SEGMENT_SET = """\
import torch
from nvfuser import FusionDefinition, DataType

with FusionDefinition() as fd:
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.exp(T0)
    T2 = fd.ops.segment_set(T1)
    T3 = fd.ops.sum(T2, dims=[1], keepdim=False, dtype=DataType.Null)
    fd.add_output(T3)

inputs = [torch.randn(64, 128, device="cuda")]
"""


@pytest.fixture(scope="module")
def edge_run(tmp_path_factory):
    """A pointwise kernel handing T2 to a reduction kernel through global memory."""
    script = tmp_path_factory.mktemp("graph") / "segment_set.py"
    script.write_text(SEGMENT_SET)
    result = Session.open(str(script)).run()
    assert result.ok, result.error
    return result


def test_the_dot_has_a_cluster_per_segment_coloured_by_scheduler(pow_run):
    source = segment_graph(pow_run.artifacts).source
    g0, g1 = (cluster(source, n) for n in (0, 1))
    assert 'label="g0 reduction"' in g0 and 'fillcolor="#fb8072"' in g0 and "style=filled" in g0
    assert 'label="g1 pointwise"' in g1 and 'fillcolor="#8dd3c7"' in g1
    assert re.search(r"\be\d+ \[label=reduction shape=box\]", g0) and "T4 [label=T4" in g0
    assert re.search(r"\be\d+ \[label=pow shape=box\]", g1) and "T3 [label=T3" in g1
    assert "T0 [label=T0" not in g0 and "T0 [label=T0" in source  # inputs stand outside the clusters
    assert re.search(r"\bT0 -> e\d+", source) and re.search(r"e\d+ -> T4", source)


def test_a_rejected_merge_is_a_dashed_edge_with_its_reason(pow_run):
    source = segment_graph(pow_run.artifacts).source
    line = next(line for line in source.splitlines() if "g0_anchor -> g1_anchor" in line)
    assert "style=dashed" in line and "disjoint iteration domains" in line
    assert "ltail=cluster_g0" in line and "lhead=cluster_g1" in line


def test_an_edge_across_segments_is_labelled_with_the_tensor_and_its_bytes(edge_run):
    a = edge_run.artifacts
    assert [(e.producer, e.consumer, e.tensor, e.shape, e.nbytes) for e in a.edges] == [(0, 1, "T2", (64, 128), 32768)]
    source = segment_graph(a).source
    crossing = [line for line in source.splitlines() if re.search(r"\bT2 -> e\d+", line)]
    assert len(crossing) == 1 and 'label="T2 (32.0 KiB)"' in crossing[0] and "color=red" in crossing[0]
    inside = [line for line in source.splitlines() if re.search(r"\bT0 -> e\d+", line)]
    assert inside and "label=" not in inside[0]


def test_dot_is_always_written_and_svg_without_dot_says_how_to_install_it(pow_run, tmp_path, monkeypatch):
    written = write_graph(pow_run.artifacts, tmp_path / "g.dot")
    assert written == [tmp_path / "g.dot"] and (tmp_path / "g.dot").read_text().startswith("digraph segments {")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no `dot` here
    with pytest.raises(FuserError) as caught:
        write_graph(pow_run.artifacts, tmp_path / "g.svg")
    message = caught.value.one_line()
    assert "Graphviz's `dot` program" in message and "apt-get install graphviz" in message
    assert str(tmp_path / "g.dot") in message
    with pytest.raises(FuserError, match=r"use \.dot, \.svg or \.png"):
        write_graph(pow_run.artifacts, tmp_path / "g.pdf")


def test_the_csv_has_one_row_per_kernel_per_run_with_every_column(pow_run, tmp_path):
    assert list(COLUMNS) == EXPECTED_COLUMNS
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as f:
        assert write_csv(f, rows("issue785_reduction_pow.py", pow_run)) == 2
    with open(path, newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["group"] for r in table] == ["g0", "g1"]
    assert [r["scheduler"] for r in table] == ["reduction", "pointwise"]
    assert table[0]["shapes"] == "4x8x64 4x8x64" and table[0]["backend"] == "reference"
    assert table[1]["kernel"] == "nvfuser_pointwise_f0_c1_r0_g1"
    assert table[0]["time_us"] == "" and "nothing launched" in table[0]["note"]
    # no time on the reference backend, but the roofline estimate of every kernel
    reduction, pointwise = table
    assert (reduction["bytes"], reduction["flops"], reduction["bound"]) == ("8448", "2048", "memory")
    assert reduction["estimate"] == (
        "memory-bound: 2.52 ns (8448 B at 3350 GB/s: 2.52 ns; 2048 flop at 67000 GFLOP/s: 30.6 ps)"
    )
    assert reduction["estimate_us"] == "0.0025" and reduction["of_estimate"] == ""
    assert (pointwise["bytes"], pointwise["flops"], pointwise["estimate_us"]) == ("16384", "2048", "0.0049")


def test_the_csv_numbers_runs_from_1_as_the_tui_and_the_log_do():
    session = Session.open("issue785_reduction_pow")
    session.set_shapes([(4, 8, 64), (4, 8, 64)])
    first, second = session.run(), session.run()
    assert [r["run"] for r in rows("p.py", first) + rows("p.py", second)] == ["1", "1", "2", "2"]


def test_the_csv_device_of_a_reference_run_is_a_device_model_and_of_a_cuda_run_the_gpu(pow_run):
    # no GPU ran a reference run: its device is only the model the heuristics were sized for
    reference = {r["device"] for r in rows("p.py", pow_run)}
    assert reference == {"device model: NVIDIA H100 SXM5 (no GPU; reference backend)"}
    session = Session.open("issue785_reduction_pow")
    session.set_shapes([(4, 8, 64), (4, 8, 64)])
    session.options = RunOptions(device_model="h200")
    assert {r["device"] for r in rows("p.py", session.run())} == {
        "device model: NVIDIA H200 (no GPU; reference backend)"
    }
    on_gpu = replace(pow_run, artifacts=replace(pow_run.artifacts, backend="cuda", device="NVIDIA H100 80GB HBM3"))
    assert {r["device"] for r in rows("p.py", on_gpu)} == {"NVIDIA H100 80GB HBM3"}


def test_the_html_report_is_self_contained_with_every_stages_heading(pow_run):
    page = html_report("issue785_reduction_pow.py", pow_run)
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert "<link" not in page and "<script" not in page and "http" not in page.split("<body>")[0]
    text = re.sub(r"<[^>]+>", "", page).replace("&gt;", ">").replace("&lt;", "<").replace("&quot;", '"')
    for stage in stages(pow_run.artifacts):
        assert stage.label in text, stage.label
    for heading in ("kernels", "launches and timing", "correctness", "Roofline estimates on NVIDIA H100 SXM5"):
        assert heading in text
    assert "Fuser Workbench report: issue785_reduction_pow.py :: nvfuser_fusion_id6" in text
    assert "// g1 pointwise" in text
    assert '<span style="color: #008080; text-decoration-color: #008080; font-weight: bold">T4_g</span>' in page


def test_a_failed_run_still_makes_a_report_with_its_error():
    session = Session.open("softmax")
    session.set_shapes([(4, 16, 64, 64)])
    result = session.run()
    assert not result.ok
    page = html_report("softmax.py", result)
    assert "softmax.py:" in page and "combines it with an axis broadcast to size 1024" in page


def test_the_json_report_holds_the_same_stages_as_data(pow_run):
    data = json.loads(json.dumps(json_report("issue785_reduction_pow.py", pow_run), default=str))
    assert [s["label"] for s in data["stages"]] == [s.label for s in stages(pow_run.artifacts)]
    assert data["settings"]["shapes"] == [[4, 8, 64], [4, 8, 64]]
    assert [g["scheduler"] for g in data["artifacts"]["groups"]] == ["reduction", "pointwise"]
    assert data["artifacts"]["reasons"][0]["category"] == "disjoint iteration domains"
    assert [k["name"] for k in data["artifacts"]["kernels"]] == [k.name for k in pow_run.artifacts.kernels]
    assert data["notes"]["launches"].startswith("reference backend: nothing launched")
    estimates = data["artifacts"]["estimates"]
    assert [(e["group_id"], e["bytes_moved"], e["flops"], e["bound"]) for e in estimates] == [
        (0, 8448, 2048, "memory"),
        (1, 16384, 2048, "memory"),
    ]
    assert estimates[0]["seconds"] == pytest.approx(8448 / 3350e9) and estimates[0]["line"].startswith("memory-bound")
    assert data["error"] is None


def test_exports_name_the_run_and_say_where_they_wrote(tmp_path, pow_run):
    from workbench.exports import export_dumps, export_graph, export_name, export_report

    script = "sample_fusions/issue785_reduction_pow.py"
    stem = f"issue785_reduction_pow.{pow_run.settings.definition}.run1"
    assert export_name(script, pow_run, "dot") == f"{stem}.dot"
    assert export_graph(pow_run, script, tmp_path) == [tmp_path / f"{stem}.dot"]
    assert "cluster_g1" in (tmp_path / f"{stem}.dot").read_text()
    report = export_report(pow_run, script, tmp_path, as_json=True)
    # the JSON names the run its file's name does (run1), not the run's 0-based index
    assert report == tmp_path / f"{stem}.json" and json.loads(report.read_text())["run"] == 1
    dumps = export_dumps(pow_run, script, tmp_path).read_text()
    assert dumps.startswith("== issue785_reduction_pow.py :: ") and "// g1 pointwise" in dumps
    assert "\x1b[" not in dumps  # plain text
    with pytest.raises(FuserError, match="no graph format 'gif'"):
        export_graph(pow_run, script, tmp_path, "gif")


def test_a_failed_run_exports_its_report_but_no_graph(tmp_path):
    from workbench.exports import export_graph, export_report

    session = Session.open("softmax")
    session.set_shapes([(2, 4, 8, 64)])
    failed = session.run()
    assert not failed.ok
    with pytest.raises(FuserError, match="no segment graph to export: run 1 failed"):
        export_graph(failed, session.path, tmp_path)
    assert "softmax.py:22" in export_report(failed, session.path, tmp_path).read_text()


def test_export_repro_writes_the_sessions_definition_shapes_and_options(tmp_path):
    from workbench.exports import export_repro

    session = Session.open("resize_pad_to_broadcast_dynamic")
    session.set_shapes([(8, 3, 2, 5, 6), (8, 4, 4, 3, 5)])
    session.options = session.options.toggled("concretize_resize_extents")
    path = export_repro(session, tmp_path)
    assert path == tmp_path / f"resize_pad_to_broadcast_dynamic.{session.definition}.repro.py"
    text = path.read_text()
    assert text == session.repro_script()
    assert text.endswith("fd.execute(inputs, _disable_options=['concretize_resize_extents'])\n")
    (again,) = load_repro(path).definitions
    assert again.fd.fusion_ir() == session.loaded.fd.fusion_ir()
    tensors, scalars = again.inputs[:2], again.inputs[2:]
    assert [spec.shape for spec in tensors] == [(8, 3, 2, 5, 6), (8, 4, 4, 3, 5)]
    assert [spec.value for spec in scalars] == list(session.scalars)
    named = export_repro(session, tmp_path, tmp_path / "mine.py")
    assert named == tmp_path / "mine.py" and named.read_text() == text


def test_a_cuda_run_sized_for_a_named_model_names_the_gpu_and_the_model(pow_run):
    # `device` is what sized the heuristics; a cuda run records the GPU it ran on beside it
    sized = replace(pow_run.artifacts, backend="cuda", device="NVIDIA H200", gpu="NVIDIA H100 80GB HBM3")
    cell = {r["device"] for r in rows("p.py", replace(pow_run, artifacts=sized))}
    assert cell == {"NVIDIA H100 80GB HBM3 (heuristics sized for device model NVIDIA H200)"}
    assert device_label(sized.device, sized.backend, sized.gpu) == (
        "device: NVIDIA H100 80GB HBM3 (heuristics sized for device model NVIDIA H200)"
    )
    own = replace(sized, device="NVIDIA H100 80GB HBM3")
    assert {r["device"] for r in rows("p.py", replace(pow_run, artifacts=own))} == {"NVIDIA H100 80GB HBM3"}
    assert device_label(own.device, own.backend, own.gpu) == "device: NVIDIA H100 80GB HBM3"
    assert pow_run.artifacts.gpu == ""  # no GPU ran the reference run
