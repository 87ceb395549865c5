"""The session model: every sample opened, run with its shapes changed and an option
toggled; stages read from the run report; bad shapes and failed runs keep the user's
settings; backends chosen by name, an unavailable one refused clearly."""

from __future__ import annotations

import re

import numpy as np
import pytest
from shrinkable import SHRINKABLE

from fuser_core import FuserError, ReferenceBackend, print_presched
from workbench import session as session_module
from workbench.artifacts import stages
from workbench.samples import sample_paths
from workbench.session import RunOptions, Session, parse_settings_args, resized_spec

RESIZE_SMALL = [(8, 3, 2, 5, 6), (8, 4, 4, 3, 5)]

SAMPLES = sample_paths()


def shrunk(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(1, s // 16) if s >= 64 else s for s in shape)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_sample_runs_with_changed_shapes_or_keeps_them_with_the_error_and_its_line(path):
    session = Session.open(str(path))
    small = [shrunk(s) for s in session.shapes]
    session.set_shapes(small)
    session.options = session.options.toggled("concretize_resize_extents")
    result = session.run()
    assert session.shapes == small and "concretize_resize_extents" in session.options.disable
    if path.stem not in SHRINKABLE:
        # these definitions hold their bundled sizes in broadcast_in_dim shapes
        assert result.error is not None and result.artifacts is None
        assert result.error.location.startswith(path.name + ":")
        lineno = int(result.error.location.split(":")[1])
        assert result.error.line == path.read_text().splitlines()[lineno - 1]
        # refused before anything runs (an input axis against the static size it meets),
        # or when the reference evaluates the op
        message = result.error.message
        assert " has size " in message or "cannot evaluate on inputs of shapes" in message, message
        return
    assert result.ok, result.error
    a = result.artifacts
    assert result.effective == ("concretize_resize_extents",)
    assert "ConcretizationInfo (concretize_resize_extents=off)" in a.concretization
    tensor_args = [line for line in a.arguments if "shape [" in line]
    assert [line.split("shape ")[1].split(" strides")[0] for line in tensor_args] == [str(list(s)) for s in small]
    assert a.groups and all(f"// g{g.id} {g.scheduler}" in a.presched for g in a.groups)
    assert a.cache_hit is False and a.cache_reasons == ("first execution: nothing cached",)
    assert [s.label for s in stages(a)][:3] == ["original IR", "concretization", "cache"]

    session.options = session.options.toggled("concretize_resize_extents")
    again = session.run()
    assert again.ok and session.previous is result and session.current is again
    assert "concretize_resize_extents=on" in again.artifacts.concretization
    assert again.effective == ()


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in SAMPLES if p.stem not in SHRINKABLE], ids=lambda p: p.stem)
def test_samples_with_fixed_sizes_run_at_their_bundled_shapes_with_an_option_toggled(path):
    session = Session.open(str(path))
    session.options = RunOptions(disable=frozenset({"concretize_resize_extents"}))
    result = session.run()
    assert result.ok, result.error
    assert "concretize_resize_extents=off" in result.artifacts.concretization
    assert len(result.artifacts.groups) >= 1


def test_stages_are_read_from_the_run_report_not_recomputed(pow_run, monkeypatch):
    a = pow_run.artifacts
    assert a.presched.startswith("Inputs:\n") and "Segments: 2 kernels" in a.presched
    assert [g.scheduler for g in a.groups] == ["reduction", "pointwise"]
    assert [(r.first, r.second, r.category) for r in a.reasons] == [(0, 1, "disjoint iteration domains")]
    assert a.groups[0].kernel == "nvfuser_reduction_f0_c1_r0_g0"
    assert ("threads_x", "128") in a.groups[1].params
    assert a.launches == ()  # the reference backend launches nothing
    assert a.launches_note == "reference backend: nothing launched, so there are no per-kernel times"
    assert a.correctness.note == "reference backend: its outputs are the reference"
    tensors = [b.tensor.split("[")[0] for b in a.groups[1].tensors]
    assert tensors == ["T1_g", "T5_l", "T6_l", "T3_g"]
    assert a.groups[1].tensors[0].lines[0] == ("logical domain", "iS3{i4}, iS4{i5}, iS5{i6}")


def test_the_presched_text_is_the_one_fuser_core_prints_for_that_runtime():
    session = Session.open("issue785_reduction_pow")
    session.set_shapes([(2, 4, 32), (2, 4, 32)])
    result = session.run()
    cache = session._caches[(session.definition, "reference", None)]
    runtime = cache.last_report.runtime
    assert result.artifacts.presched == print_presched(runtime.segmented)
    assert result.artifacts.runtime == runtime.name
    assert result.artifacts.kernels == tuple(runtime.kernels)  # what codegen left, as it left it


def test_the_cache_answers_across_runs_as_the_sample_says(resize_runs):
    on, off = resize_runs
    assert "T2 axis 2: (2, 1, 1) -> Iteration" in on.artifacts.concretization
    assert "(nvfuser_index_t)" not in on.artifacts.concretized_ir
    assert "(nvfuser_index_t)" in off.artifacts.concretized_ir
    assert off.artifacts.cache_level == "concretization"
    assert "concretize_resize_extents turned off" in off.artifacts.cache_reasons


def test_a_scalar_change_is_a_cache_hit_with_the_option_off_and_a_miss_with_it_on():
    session = Session.open("resize_pad_to_broadcast_dynamic")
    session.set_shapes(RESIZE_SMALL)
    session.options = session.options.toggled("concretize_resize_extents")
    session.run()
    session.set_scalars([0, -1, 0, -4, 2, 2, -1, -1])
    session.set_shape(1, (8, 4, 6, 3, 5))
    off = session.run()
    assert off.ok, off.error
    assert off.artifacts.cache_hit
    session.options = session.options.toggled("concretize_resize_extents")
    session.run()
    session.set_scalars([0, -1, 0, -4, 1, 1, -1, -1])
    session.set_shape(1, (8, 4, 4, 3, 5))
    on = session.run()
    assert not on.artifacts.cache_hit and on.artifacts.cache_level == "concretization"


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ([(8, 3, 2, 5), (8, 4, 4, 3, 5)], "input 0 (T0) is 5-D in the definition; the shape [8, 3, 2, 5] has 4 sizes"),
        ([(8, 3, 2, 5, 6)], "has 2 tensor inputs; got 1 shapes"),
        ([(8, -3, 2, 5, 6), (8, 4, 4, 3, 5)], "size -3 of axis 1 is negative"),
    ],
)
def test_a_bad_shape_is_a_clear_error_and_the_shapes_stay(shapes, message):
    session = Session.open("resize_pad_to_broadcast_dynamic")
    before = list(session.shapes)
    with pytest.raises(FuserError, match=re.escape(message)):
        session.set_shapes(shapes)
    assert session.shapes == before


def test_a_size_the_definition_fixes_is_checked():
    session = Session.open("layer_norm_bwd")  # input 2 is [N, 1]: axis 1 a broadcast
    shapes = list(session.shapes)
    shapes[2] = (16384, 4)
    with pytest.raises(FuserError, match=r"input 2 \(T2\): axis 1 must have size 1"):
        session.set_shapes(shapes)


def test_a_wrong_scalar_kind_is_refused():
    session = Session.open("resize_pad_to_broadcast_dynamic")
    with pytest.raises(FuserError, match="has 8 scalar inputs; got 2"):
        session.set_scalars([1, 2])
    with pytest.raises(FuserError, match="must be a Python number"):
        session.set_scalars(["x"] * 8)


def test_resized_specs_keep_dtype_and_stride_order():
    session = Session.open("transpose_add")
    spec = session.tensor_slots[0].spec  # [4096, 8192] with strides [1, 4096]: column-major
    small = resized_spec(spec, (64, 32))
    assert small.shape == (64, 32) and small.strides == (1, 64) and small.dtype == spec.dtype
    array = small.materialize(0)
    assert array.strides == (4, 256)


def cuda_unavailable() -> str | None:
    try:
        session_module.make_backend("cuda")
    except FuserError as err:
        return err.one_line()
    return None


def test_an_unavailable_cuda_backend_is_a_clear_error_and_the_options_stay():
    reason = cuda_unavailable()
    if reason is None:
        pytest.skip("the cuda backend is available here")
    session = Session.open("issue785_reduction_pow")
    session.set_shapes([(2, 4, 32), (2, 4, 32)])
    session.options = RunOptions(backend="cuda")
    result = session.run()
    assert result.error is not None and "the cuda backend needs an NVIDIA GPU with CuPy" in result.error.message
    assert session.options.backend == "cuda" and session.shapes == [(2, 4, 32), (2, 4, 32)]


def test_a_backend_plugs_in_by_name_and_is_checked_against_the_reference(monkeypatch):
    class PerturbingBackend(ReferenceBackend):
        """Stands in for a GPU backend whose second output is wrong by 1."""

        name = "cuda"

        def compile(self, segmented, signature, runtime_name=""):
            inner = super().compile(segmented, signature, runtime_name)

            class Wrong:
                def run(self, args):
                    outputs = inner.run(args)
                    return [o if i == 0 else o + np.float32(1) for i, o in enumerate(outputs)]

            return Wrong()

    monkeypatch.setitem(session_module.BACKENDS, "cuda", lambda device_model: PerturbingBackend())
    session = Session.open("issue785_reduction_pow")  # two outputs
    session.set_shapes([(2, 4, 32), (2, 4, 32)])
    session.options = RunOptions(backend="cuda")
    result = session.run()
    assert result.ok, result.error
    checks = result.artifacts.correctness.checks
    assert [c.ok for c in checks] == [True, False]
    assert checks[1].max_abs_error == pytest.approx(1.0, rel=1e-2)
    assert result.artifacts.correctness.note == "outputs [1] differ from the reference"


def test_an_unknown_backend_lists_the_valid_ones():
    with pytest.raises(FuserError, match="unknown backend 'tpu'; valid: reference, cuda"):
        session_module.make_backend("tpu")


def test_dumps_fuser_core_emits_during_a_run_are_captured_not_printed(monkeypatch, capsys):
    monkeypatch.setenv("FUSER_DUMP", "cache_events")
    session = Session.open("rope_issue2795")
    session.set_shapes([(2, 16, 64, 32), (64, 8), (64, 8)])
    result = session.run()
    assert capsys.readouterr().out == ""
    assert [option for option, _ in result.artifacts.core_dumps] == ["cache_events"]
    assert result.artifacts.core_dumps[0][1] == result.artifacts.cache_line


def test_settings_strings_of_the_diff_command_parse():
    args = parse_settings_args("--disable concretize_resize_extents --shapes 8x3 4,5 --scalars 1,-2 --backend cuda")
    assert args.disable == frozenset({"concretize_resize_extents"})
    assert args.shapes == ((8, 3), (4, 5)) and args.scalars == (1, -2) and args.backend == "cuda"
    assert parse_settings_args("") == parse_settings_args("  ")
    with pytest.raises(FuserError, match="unknown setting '--fast'"):
        parse_settings_args("--fast")
    with pytest.raises(FuserError, match="--disable needs a value"):
        parse_settings_args("--disable")


# -- what the TUI needs of the session ------------------------------------------------------


def test_run_reports_each_step_as_it_starts():
    session = Session.open("resize_pad_to_broadcast_dynamic")
    session.set_shapes(RESIZE_SMALL)
    steps = []
    assert session.run(progress=steps.append).ok
    assert steps == [
        session_module.STEP_INPUTS,
        session_module.STEP_RUN.format(backend="reference"),
        session_module.STEP_COLLECT,
    ]


def test_check_shape_names_the_input_and_keeps_nothing():
    session = Session.open("softmax")
    assert session.check_shape(0, (2, 4, 8, 1024)) == (2, 4, 8, 1024)
    with pytest.raises(FuserError, match=r"input 0 \(T0\) is 4-D in the definition"):
        session.check_shape(0, (2, 4))
    assert session.shapes == session.bundled_shapes == [(4, 16, 1024, 1024)]


def test_reload_keeps_the_users_inputs_and_options_and_a_broken_script_changes_nothing(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text((session_module.resolve_script("resize_pad_to_broadcast_dynamic")).read_text())
    session = Session.open(str(script))
    session.set_shapes(RESIZE_SMALL)
    session.options = session.options.toggled("concretize_resize_extents")
    assert session.run().ok and not session.changed_on_disk()

    good = script.read_text()
    script.write_text(good.replace("fd.ops.pad(", "fd.ops.not_an_op(", 1))
    assert session.changed_on_disk()
    with pytest.raises(FuserError, match="not_an_op"):
        session.reload()
    assert session.shapes == RESIZE_SMALL and "not_an_op" not in session.script.text

    script.write_text(good.replace("65536", "1024"))  # the script's own shapes change too
    assert session.reload() == []
    assert session.shapes == RESIZE_SMALL and "concretize_resize_extents" in session.options.disable
    assert session.bundled_shapes[0][0] == 1024 and not session.changed_on_disk()
    result = session.run()
    assert result.ok and result.artifacts.cache_reasons == ("first execution: nothing cached",)


def test_reload_takes_the_scripts_new_shapes_when_the_user_kept_the_old_ones(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text((session_module.resolve_script("transpose_add")).read_text())
    session = Session.open(str(script))
    script.write_text(script.read_text().replace("8192, 4096", "128, 64").replace("4096, 8192", "64, 128"))
    assert session.reload() == [] and session.shapes == [(64, 128), (64, 128)]


def test_reload_says_what_it_could_not_keep(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text((session_module.resolve_script("transpose_add")).read_text())
    session = Session.open(str(script))
    old_name = session.definition
    session.set_shapes([(8, 16), (8, 16)])
    script.write_text(script.read_text().replace(old_name, "renamed_fusion"))
    notes = session.reload()
    assert notes == [f"{old_name} is no longer in the script: showing renamed_fusion"]
    assert session.definition == "renamed_fusion" and session.shapes == [(8, 16), (8, 16)]


def test_backend_problem_says_why_cuda_cannot_run_or_nothing():
    assert session_module.backend_problem("reference") is None
    problem = session_module.backend_problem("cuda")
    try:
        session_module.make_backend("cuda")
    except FuserError as err:
        assert problem == err.message and "NVIDIA GPU" in problem
    else:
        assert problem is None
    assert "unknown backend 'tpu'" in session_module.backend_problem("tpu")
