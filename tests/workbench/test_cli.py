"""`fuser-wb`: dump, bundled names, the default, samples, dumps while running, options,
and one-line errors (unknown names, missing files, hostile or partly refused scripts).

Only samples with small bundled inputs are run (`--dump`): the others take seconds and
gigabytes each, and tests/samples runs them already.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fuser_core import DisableOption, DumpOption, TensorSpec, load_repro
from workbench import cli
from workbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = ROOT / "sample_fusions"
SAMPLES = sorted(SAMPLES_DIR.glob("*.py"))
RESIZE = SAMPLES_DIR / "resize_pad_to_broadcast_dynamic.py"
SMALL_INPUT_BYTES = 128 * 2**20
OPTION_VARIABLES = ("FUSER_DUMP", "FUSER_ENABLE", "FUSER_DISABLE", "NVFUSER_DUMP", "NVFUSER_ENABLE", "NVFUSER_DISABLE")
CONSTANT_RESIZE = re.compile(r"Resize: iS\d+\{3\}rf by -1 and -1 -> bS\d+\{1\}rf")


@pytest.fixture(autouse=True)
def no_options_from_the_environment(monkeypatch):
    for name in OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def run_cli_with_dumps(capsys, *argv: str) -> tuple[int, str]:
    """Exit code and everything printed: `out` and the dump sink (stdout) together."""
    code, text = run_cli(*argv)
    return code, text + capsys.readouterr().out


def first_header_line(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip()
        if line.startswith("#") and text:
            return text
    raise AssertionError(f"{path.name} has no header comment")


def expected_dump(path: Path) -> str:
    parts = []
    for loaded in load_repro(path).definitions:
        assert loaded.inputs is not None
        specs = "".join(f"  {index}: {spec.describe()}\n" for index, spec in enumerate(loaded.inputs))
        parts.append(f"== {loaded.name} (line {loaded.lineno})\n{loaded.fd.fusion_ir()}Input specs:\n{specs}")
    return "".join(parts)


def assert_small(path: Path) -> None:
    (loaded,) = load_repro(path).definitions
    size = sum(spec.nbytes for spec in loaded.inputs or () if isinstance(spec, TensorSpec))
    assert size <= SMALL_INPUT_BYTES, f"{path.name} has {size} bytes of inputs: too big to run in the CLI tests"


def one_error_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, f"expected one line on stderr, got {err!r}"
    assert err.startswith("fuser-wb: "), err
    return err


# -- printing scripts ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_dump_prints_each_definition_with_its_line_ir_and_input_specs(path, capsys):
    code, text = run_cli("dump", str(path))
    assert code == 0
    assert capsys.readouterr().err == ""
    lines = path.read_text(encoding="utf-8").splitlines()
    for loaded in load_repro(path).definitions:
        header = f"== {loaded.name} (line {loaded.lineno})\n"
        assert header in text
        assert "FusionDefinition()" in lines[loaded.lineno - 1]  # the line named is the definition's
        after = text.split(header, 1)[1]
        assert after.startswith(loaded.fd.fusion_ir())
        specs = after.split("Input specs:\n", 1)[1].splitlines()[: len(loaded.inputs or ())]
        for index, spec in enumerate(loaded.inputs or ()):
            assert specs[index] == f"  {index}: {spec.describe()}"
            if isinstance(spec, TensorSpec):
                assert specs[index].startswith(f"  {index}: tensor {list(spec.shape)} ")
    assert text == expected_dump(path)  # and nothing else: one line per input


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_a_bundled_sample_by_name_prints_what_dump_prints(path):
    by_name = run_cli(path.stem)
    assert by_name == (0, expected_dump(path))
    assert run_cli("dump", path.stem) == by_name
    assert run_cli(path.name) == by_name  # with `.py` too


def test_no_arguments_prints_the_default_samples_ir():
    code, text = run_cli()
    assert code == 0
    matches = [p.stem for p in SAMPLES if text == expected_dump(p)]
    assert len(matches) == 1, f"the default output is no bundled sample's dump: {text[:300]!r}"
    assert text.startswith("== ") and text.splitlines()[1] == "Inputs:"


def test_samples_lists_every_sample_with_its_headers_first_line(capsys):
    code, text = run_cli("samples")
    assert code == 0
    assert capsys.readouterr().err == ""
    lines = text.splitlines()
    assert len(lines) == len(SAMPLES)
    for path, line in zip(SAMPLES, lines, strict=True):
        name, _, description = line.partition(" ")
        assert name == path.stem
        assert description.strip() == first_header_line(path)


# -- running with dumps -------------------------------------------------------------------------


def test_dump_runs_the_script_and_prints_the_cache_event_and_concretized_fusion(capsys):
    assert_small(RESIZE)
    code, text = run_cli_with_dumps(capsys, "dump", str(RESIZE), "--dump", "cache_events,fusion_ir_concretized")
    assert code == 0
    assert "== nvfuser_fusion_id0 (line 46)\n" in text
    assert re.search(r"^cache: miss\b.*first execution", text, re.MULTILINE), text[-500:]
    assert "ConcretizationInfo (concretize_resize_extents=on)" in text
    concretized = text.split("Concretized Fusion:", 1)[1]
    assert CONSTANT_RESIZE.search(concretized), concretized
    assert "Resize: iS33{2}rf by 1 and 1 -> iS25{4}rf" in concretized
    assert "(nvfuser_index_t)" not in concretized
    assert "Input specs:" not in text  # running, not printing the script


def test_disabling_concretize_resize_extents_keeps_the_extents_symbolic(capsys):
    code, text = run_cli_with_dumps(
        capsys,
        "dump",
        str(RESIZE),
        "--dump",
        "cache_events,fusion_ir_concretized",
        "--disable",
        "concretize_resize_extents",
    )
    assert code == 0
    assert "ConcretizationInfo (concretize_resize_extents=off)" in text
    concretized = text.split("Concretized Fusion:", 1)[1]
    assert "(nvfuser_index_t)" in concretized
    assert not CONSTANT_RESIZE.search(concretized)
    assert re.search(r"^cache: miss\b", text, re.MULTILINE)


def test_dumps_are_written_to_the_out_stream_given_to_main(capsys):
    # main(argv, out) prints the `==` header to `out`; the dumps must follow it there,
    # not go to sys.stdout (a caller capturing `out` would get headers without dumps)
    code, text = run_cli("dump", str(RESIZE), "--dump", "cache_events")
    stray = capsys.readouterr().out
    assert code == 0
    assert re.search(r"^cache: miss\b", text, re.MULTILINE), f"out has {text!r}; sys.stdout got {stray!r}"
    assert stray == ""


def test_the_command_runs_as_a_module_and_prints_dumps_after_the_header():
    env = {k: v for k, v in os.environ.items() if k not in OPTION_VARIABLES} | {"PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "workbench.cli",
        "dump",
        str(RESIZE),
        "--dump",
        "cache_events,fusion_ir_concretized",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "== nvfuser_fusion_id0 (line 46)"
    assert lines[1] == "ConcretizationInfo (concretize_resize_extents=on)"
    assert lines.index("Concretized Fusion:") > 1
    assert lines[-1].startswith("cache: miss at concretization")


def test_a_small_sample_runs_with_every_dump(capsys):
    path = SAMPLES_DIR / "rope_issue2795.py"
    assert_small(path)
    code, text = run_cli_with_dumps(capsys, "dump", path.stem, "--dump", ",".join(DumpOption.__members__))
    assert code == 0
    assert capsys.readouterr().err == ""
    for marker in ("Concretized Fusion:", "TransformPrinter", "cache: miss"):
        assert marker in text


# -- errors -------------------------------------------------------------------------------------


def test_an_unknown_dump_name_is_a_one_line_error_listing_the_valid_names(capsys):
    code, text = run_cli("dump", str(RESIZE), "--dump", "cache_events,fusion_ir_concretised")
    captured = capsys.readouterr()
    assert code == 1
    message = one_error_line(captured.err)
    assert "fusion_ir_concretised" in message
    assert all(name in message for name in DumpOption.__members__)
    assert "cache:" not in text + captured.out  # nothing ran


def test_an_unknown_disable_name_is_a_one_line_error_listing_the_valid_names(capsys):
    code, _ = run_cli("dump", str(RESIZE), "--dump", "cache_events", "--disable", "concretize_resize")
    assert code == 1
    message = one_error_line(capsys.readouterr().err)
    assert "concretize_resize" in message
    assert all(name in message for name in DisableOption.__members__)


@pytest.mark.parametrize("argv", [["dump", "/no/such/dir/repro.py"], ["no_such_sample"], ["dump", "nope.py"]])
def test_a_missing_file_is_a_one_line_error(argv, capsys):
    code, text = run_cli(*argv)
    assert code == 1
    assert text == ""
    message = one_error_line(capsys.readouterr().err)
    assert argv[-1] in message


HOSTILE = """\
import os
from nvfuser import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    os.system("touch {marker}")
    T1 = fd.ops.exp(T0)
    fd.add_output(T1)

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)
"""


def test_a_hostile_script_is_refused_with_its_line_and_nothing_runs(tmp_path, capsys):
    marker = tmp_path / "pwned"
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE.format(marker=marker))
    code, text = run_cli("dump", str(script))
    assert (code, text) == (1, "")
    message = one_error_line(capsys.readouterr().err)
    assert "hostile.py:6:" in message and "os" in message
    assert not marker.exists()
    assert run_cli("dump", str(script), "--dump", "cache_events")[0] == 1
    assert not marker.exists()


def test_a_hostile_statement_outside_the_definition_is_skipped_and_never_run(tmp_path, capsys):
    marker = tmp_path / "pwned"
    script = tmp_path / "hostile_outside.py"
    text = HOSTILE.format(marker=marker).replace(f'    os.system("touch {marker}")\n', "")
    script.write_text(text + f'os.system("touch {marker}")\n')  # line 11, after the with-block
    code, out = run_cli("dump", str(script))
    assert code == 0
    assert "note: skipped hostile_outside.py:11: `os` is not available" in out
    assert "== nvfuser_fusion_id0 (line 9)" in out
    assert not marker.exists()


TIMED = """\
import torch
from nvfuser import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.sum(T0, dims=[1], keepdim=False, dtype=DataType.Null)
    fd.add_output(T1)

inputs = [torch.randn(4, 8, device="cuda")]
with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

out = fd.execute(inputs)
import time
print(time.time())
"""


def test_a_refused_part_after_execute_is_a_note_and_the_rest_works(tmp_path, capsys):
    script = tmp_path / "timed.py"
    script.write_text(TIMED)
    code, text = run_cli("dump", str(script))
    assert code == 0
    assert capsys.readouterr().err == ""
    notes = [line for line in text.splitlines() if line.startswith("note: skipped ")]
    assert len(notes) == 1 and notes[0].startswith("note: skipped timed.py:14: import of `time` refused"), notes
    assert "== nvfuser_fusion_id0 (line 10)\n" in text
    assert "Input specs:\n  0: tensor [4, 8] Float" in text

    code, text = run_cli_with_dumps(capsys, "dump", str(script), "--dump", "cache_events")
    assert code == 0
    assert "note: skipped timed.py:14:" in text
    assert re.search(r"^cache: miss\b", text, re.MULTILINE)


def test_device_model_is_applied_through_the_options_and_an_unknown_one_is_a_one_line_error(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("FUSER_DEVICE_MODEL", raising=False)
    script = tmp_path / "timed.py"
    script.write_text(TIMED)
    in_effect = []
    use_options = cli.use_options

    @contextlib.contextmanager
    def recording(*args, **kwargs):
        with use_options(*args, **kwargs) as opts:
            in_effect.append(opts.device_model)
            yield opts

    monkeypatch.setattr(cli, "use_options", recording)
    code, text = run_cli_with_dumps(capsys, "dump", str(script), "--dump", "cache_events", "--device-model", "H200")
    assert code == 0 and in_effect == ["h200"]
    assert re.search(r"^cache: miss\b", text, re.MULTILINE)

    code, text = run_cli("dump", str(script), "--dump", "cache_events", "--device-model", "b200")
    captured = capsys.readouterr()
    assert code == 1 and in_effect == ["h200"]
    message = one_error_line(captured.err)
    assert "'b200' in the command line" in message and "h100_sxm" in message and "h200" in message
    assert "cache:" not in text + captured.out  # nothing ran


HUGE = """\
import torch
from nvfuser import FusionDefinition, DataType

with FusionDefinition() as fd:
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    fd.add_output(fd.ops.exp(T0))

inputs = [torch.randn(2**20, 2**20, device="cuda")]
fd.execute(inputs)
"""


def test_inputs_bigger_than_the_limit_are_refused_before_anything_is_made(tmp_path, capsys):
    script = tmp_path / "huge.py"
    script.write_text(HUGE)
    code, _ = run_cli("dump", str(script), "--dump", "cache_events")
    assert code == 1
    message = one_error_line(capsys.readouterr().err)
    assert "4.0 TiB" in message and "--max-input-bytes" in message


def test_an_internal_error_is_one_line_unless_a_traceback_is_asked_for(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("an invariant broke")

    monkeypatch.setattr("workbench.cli.load_repro", broken)
    assert run_cli("dump", "softmax") == (1, "")
    message = one_error_line(capsys.readouterr().err)
    assert "internal error" in message and "RuntimeError: an invariant broke" in message
    monkeypatch.setenv("FUSER_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="an invariant broke"):
        run_cli("dump", "softmax")


def test_a_reader_that_stops_early_is_no_internal_error(capsys):
    # `fuser-wb dump softmax | head`: the pipe closes while the dump is written
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    from workbench.cli import main

    assert main(["dump", "softmax"], out=ClosedPipe()) == 1
    assert capsys.readouterr().err == ""


# -- diff, graph, metrics, report, rich dumps --------------------------------------------------

RESIZE_SHAPES = ["--shapes", "8x3x2x5x6", "8x4x4x3x5"]


def test_diff_prints_a_summary_per_stage_and_the_diff_of_what_changed(capsys):
    code, text = run_cli(
        "diff", RESIZE.stem, *RESIZE_SHAPES, "--a", "--disable concretize_resize_extents", "--b", "", "--no-color"
    )
    assert code == 0, capsys.readouterr().err
    lines = text.splitlines()
    assert lines[0] == "== nvfuser_fusion_id0 (line 46)"
    assert lines[1].startswith("a: shapes 8x3x2x5x6 8x4x4x3x5 ") and "--disable concretize_resize_extents" in lines[1]
    assert "original IR: same" in lines and "arguments: same" in lines
    assert any(re.fullmatch(r"concretization: \d+ lines changed", line) for line in lines)
    assert any(line.startswith("time: reference backend: nothing launched") for line in lines)
    assert "+ConcretizationInfo (concretize_resize_extents=on)" in lines
    assert "original IR: same ─" not in text  # only changed stages get a diff


def test_diff_of_two_shape_sets(capsys):
    code, text = run_cli(
        "diff", RESIZE.stem, "--a", "--shapes 8x3x2x5x6 8x4x4x3x5", "--b", "--shapes 16x3x2x5x6 16x4x4x3x5"
    )
    assert code == 0, capsys.readouterr().err
    assert "arguments: 2 lines changed" in text
    assert re.search(r"^\+  0: T0 .*shape \[16, 3, 2, 5, 6\]", text, re.MULTILINE)
    assert "original IR: same" in text and "segmenter log: same" in text


def test_dump_takes_shapes_and_renders_tables(capsys):
    code, text = run_cli_with_dumps(
        capsys, "dump", RESIZE.stem, *RESIZE_SHAPES, "--dump", "fusion_ir_presched,fusion_args"
    )
    assert code == 0
    assert "T2_l[ iS10{i0}, bS24{1}rf, iS25{4}rf, bS26{1}rf, iS27{5}rf ]" in text
    assert "┃ group ┃ scheduler ┃" in text
    assert "shape [8, 4, 4, 3, 5]" in text


def test_dump_in_colour_when_asked(capsys):
    code, text = run_cli("dump", RESIZE.stem, *RESIZE_SHAPES, "--dump", "cache_events", "--color")
    assert code == 0
    assert "\x1b[" in text and "cache: miss" in text


def test_an_unavailable_backend_is_a_one_line_error_and_nothing_runs(capsys):
    from fuser_core import FuserError, select_backend

    try:
        select_backend("cuda", None)
        pytest.skip("the cuda backend is available here")
    except FuserError:
        pass
    code, text = run_cli("dump", RESIZE.stem, "--dump", "cache_events", "--backend", "cuda")
    captured = capsys.readouterr()
    assert code == 1 and "cache:" not in text + captured.out
    message = one_error_line(captured.err)
    assert "the cuda backend needs an NVIDIA GPU with CuPy" in message


def test_a_bad_shape_on_the_command_line_is_a_one_line_error(capsys):
    code, _ = run_cli("dump", RESIZE.stem, "--dump", "cache_events", "--shapes", "8x3x2x5", "8x4x4x3x5")
    assert code == 1
    assert "input 0 (T0) is 5-D in the definition" in one_error_line(capsys.readouterr().err)


def test_graph_writes_dot_and_an_svg_without_dot_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "segments.dot"
    code, text = run_cli("graph", "issue785_reduction_pow", "--shapes", "4x8x64", "4x8x64", "-o", str(out))
    assert code == 0 and text == f"wrote {out}\n"
    source = out.read_text()
    assert "subgraph cluster_g0" in source and "subgraph cluster_g1" in source and "style=dashed" in source
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    code, _ = run_cli("graph", "issue785_reduction_pow", "--shapes", "4x8x64", "4x8x64", "-o", str(tmp_path / "g.png"))
    assert code == 1
    message = one_error_line(capsys.readouterr().err)
    assert "needs Graphviz's `dot` program" in message and "apt-get install graphviz" in message
    assert (tmp_path / "g.dot").exists()


def test_metrics_writes_one_row_per_kernel_per_run(tmp_path):
    out = tmp_path / "runs.csv"
    code, text = run_cli("metrics", "rope_issue2795", "issue785_reduction_pow", "-o", str(out), "--seed", "1")
    assert code == 0 and text == f"wrote 3 rows to {out}\n"
    lines = out.read_text().splitlines()
    assert lines[0].startswith("fusion,definition,run,group,scheduler,kernel,shapes,options,backend,device,time_us")
    assert [line.split(",")[:5] for line in lines[1:]] == [
        ["rope_issue2795.py", "nvfuser_fusion_id0", "1", "g0", "pointwise"],
        ["issue785_reduction_pow.py", "nvfuser_fusion_id6", "1", "g0", "reduction"],
        ["issue785_reduction_pow.py", "nvfuser_fusion_id6", "1", "g1", "pointwise"],
    ]


def test_report_writes_html_and_json(tmp_path):
    html = tmp_path / "run.html"
    code, text = run_cli("report", "issue785_reduction_pow", "--shapes", "4x8x64", "4x8x64", "-o", str(html))
    assert code == 0 and text == f"wrote {html}\n"
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "pre-scheduled IR" in page and "segmenter log" in page
    data_path = tmp_path / "run.json"
    code, _ = run_cli(
        "report", "issue785_reduction_pow", "--shapes", "4x8x64", "4x8x64", "-o", str(data_path), "--json"
    )
    assert code == 0
    import json

    data = json.loads(data_path.read_text())
    assert data["source"] == "issue785_reduction_pow.py" and len(data["artifacts"]["groups"]) == 2


def test_export_repro_writes_a_script_that_loads_back_with_the_same_ir_shapes_and_options(tmp_path):
    code, text = run_cli(
        "export-repro", "issue785_reduction_pow", "--shapes", "4x8x64", "4x8x64", "--disable", "vectorization",
        "--export-dir", str(tmp_path),
    )  # fmt: skip
    written = tmp_path / "issue785_reduction_pow.nvfuser_fusion_id6.repro.py"
    assert code == 0 and text == f"wrote {written}\n"
    script = written.read_text()
    assert script.startswith("# fuser-workbench repro: runs under nvFuser or `python -m fuser_core.compat`\n")
    assert script.endswith(
        "inputs = [\n"
        "    torch.testing.make_tensor((4, 8, 64), dtype=torch.float32, device='cuda:0'),\n"
        "    torch.testing.make_tensor((4, 8, 64), dtype=torch.float32, device='cuda:0'),\n"
        "]\nfd.execute(inputs, _disable_options=['vectorization'])\n"
    )
    (original,) = load_repro(SAMPLES_DIR / "issue785_reduction_pow.py").definitions
    loaded = load_repro(written)
    assert not loaded.problems
    (again,) = loaded.definitions
    assert again.fd.fusion_ir() == original.fd.fusion_ir()
    assert [(spec.shape, spec.dtype) for spec in again.inputs] == [((4, 8, 64), original.inputs[0].dtype)] * 2


def test_export_repro_to_a_named_file(tmp_path):
    out = tmp_path / "bug.py"
    code, text = run_cli("export-repro", str(SAMPLES_DIR / "softmax.py"), "-o", str(out))
    assert code == 0 and text == f"wrote {out}\n"
    (original,) = load_repro(SAMPLES_DIR / "softmax.py").definitions
    (again,) = load_repro(out).definitions
    assert again.fd.fusion_ir() == original.fd.fusion_ir()
    assert [spec.shape for spec in again.inputs] == [spec.shape for spec in original.inputs]


def test_export_repro_writes_into_export_dir_as_every_command_names_it_and_output_dir_still_works(tmp_path, capsys):
    # --export-dir was silently ignored here (the files went to the current directory)
    # while the command's own --output-dir took its place; that one stays, hidden
    name = "issue785_reduction_pow.nvfuser_fusion_id6.repro.py"
    for flag, folder in (("--export-dir", tmp_path / "canonical"), ("--output-dir", tmp_path / "alias")):
        folder.mkdir()
        code, text = run_cli("export-repro", "issue785_reduction_pow", flag, str(folder))
        assert code == 0 and text == f"wrote {folder / name}\n"
        assert (folder / name).read_text().startswith("# fuser-workbench repro:")
    with pytest.raises(SystemExit):
        main(["export-repro", "--help"])
    usage = capsys.readouterr().out
    assert "--export-dir EXPORT_DIR" in usage and "where the default-named files go" in usage
    assert "--output-dir" not in usage


def test_dump_without_dump_names_refuses_run_inputs_it_would_ignore(capsys):
    # without --dump the script is only printed: --shapes (even a malformed one) was
    # silently ignored and the bundled inputs printed
    for extra in (["--shapes", "8x1024"], ["--shapes", "4x16xax1024"], ["--scalars", "3"]):
        code, text = run_cli("dump", "softmax", *extra)
        assert code == 1 and text == ""
        assert "--shapes and --scalars are the inputs of a run: add --dump NAMES" in capsys.readouterr().err
