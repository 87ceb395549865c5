"""Dump/enable/disable options and the device model: environment, aliases, context,
per-call, errors, sink."""

import pytest

from fuser_core import FuserError
from fuser_core.options import (
    DEVICE_MODELS,
    DisableOption,
    DumpOption,
    Options,
    current_options,
    dump_sink,
    emit_dump,
    options_from_env,
    use_options,
)


def test_env_names_and_nvfuser_aliases():
    opts = options_from_env({"FUSER_DUMP": "cache_events", "NVFUSER_DUMP": "fusion_ir_math"})
    assert opts.dump == {DumpOption.cache_events, DumpOption.fusion_ir_math}
    opts = options_from_env({"NVFUSER_DISABLE": "concretize_resize_extents"})
    assert opts.is_disabled(DisableOption.concretize_resize_extents)


def test_arguments_in_parentheses_are_accepted_and_commas_inside_them_kept():
    opts = options_from_env({"FUSER_DUMP": "cache_events(verbose,x), fusion_ir"})
    assert opts.dump == {DumpOption.cache_events, DumpOption.fusion_ir}


def test_unknown_names_are_errors_listing_the_valid_ones():
    with pytest.raises(FuserError) as err:
        options_from_env({"FUSER_DUMP": "fusion_ir_math,segmented_fusoin"})
    message = str(err.value)
    assert "segmented_fusoin" in message and "FUSER_DUMP" in message
    assert all(name in message for name in DumpOption.__members__)
    with pytest.raises(FuserError, match="valid: kernel_profile"):
        options_from_env({"NVFUSER_ENABLE": "fuse_matmul"})


def test_the_context_manager_adds_and_restores(monkeypatch):
    monkeypatch.delenv("FUSER_DUMP", raising=False)
    monkeypatch.delenv("NVFUSER_DUMP", raising=False)
    assert not current_options().dump
    with use_options(dump="cache_events"):
        assert current_options().dumps(DumpOption.cache_events)
        with use_options(disable=["concretize_resize_extents"]):
            assert current_options().dumps(DumpOption.cache_events)
            assert current_options().is_disabled(DisableOption.concretize_resize_extents)
    assert not current_options().dump


def test_environment_changes_are_seen(monkeypatch):
    monkeypatch.setenv("FUSER_DUMP", "fusion_args")
    assert current_options().dumps(DumpOption.fusion_args)
    monkeypatch.setenv("FUSER_DUMP", "fusion_ir")
    assert current_options().dump == {DumpOption.fusion_ir}


def test_dumps_go_to_the_sink_and_are_built_only_when_on():
    seen = []
    built = []

    def make() -> str:
        built.append(1)
        return "text"

    with dump_sink(lambda option, text: seen.append((option, text))):
        emit_dump(current_options().merged(dump="fusion_ir"), DumpOption.fusion_ir, make)
        emit_dump(current_options().merged(), DumpOption.fusion_ir, make)
    assert seen == [(DumpOption.fusion_ir, "text")]
    assert built == [1]


# -- the device model ----------------------------------------------------------------------------


def test_the_device_model_comes_from_the_environment_in_any_case():
    assert options_from_env({}).device_model is None
    assert options_from_env({"FUSER_DEVICE_MODEL": "H200"}).device_model == "h200"
    assert options_from_env({"FUSER_DEVICE_MODEL": "h100"}).device_model == "h100_sxm"
    for name in DEVICE_MODELS:
        assert options_from_env({"FUSER_DEVICE_MODEL": name}).device_model == name


def test_changes_of_the_device_model_variable_are_seen(monkeypatch):
    monkeypatch.setenv("FUSER_DEVICE_MODEL", "h200")
    assert current_options().device_model == "h200"
    monkeypatch.setenv("FUSER_DEVICE_MODEL", "h100_sxm")
    assert current_options().device_model == "h100_sxm"
    monkeypatch.delenv("FUSER_DEVICE_MODEL")
    assert current_options().device_model is None


def test_use_options_sets_the_device_model_and_an_inner_block_without_one_keeps_it(monkeypatch):
    monkeypatch.delenv("FUSER_DEVICE_MODEL", raising=False)
    with use_options(device_model="H200") as opts:
        assert opts.device_model == current_options().device_model == "h200"
        with use_options(dump="cache_events"):
            assert current_options().device_model == "h200"
        with use_options(device_model="h100_sxm"):
            assert current_options().device_model == "h100_sxm"
    assert current_options().device_model is None


def test_use_options_overrides_the_environments_device_model(monkeypatch):
    monkeypatch.setenv("FUSER_DEVICE_MODEL", "h100_sxm")
    with use_options(device_model="h200"):
        assert current_options().device_model == "h200"
    assert current_options().device_model == "h100_sxm"


def test_merged_replaces_the_device_model_when_given_and_keeps_it_otherwise():
    base = Options(device_model="h200")
    assert base.merged(dump="fusion_ir").device_model == "h200"
    assert base.merged(dump="fusion_ir").dump == {DumpOption.fusion_ir}
    assert base.merged(device_model="h100").device_model == "h100_sxm"
    assert Options().merged(device_model="h200").device_model == "h200"
    assert Options().merged().device_model is None


@pytest.mark.parametrize(
    ("make", "source"),
    [
        (lambda: options_from_env({"FUSER_DEVICE_MODEL": "b200"}), "FUSER_DEVICE_MODEL"),
        (lambda: use_options(device_model="b200").__enter__(), "use_options()"),
        (lambda: Options().merged(device_model="b200", source="the command line"), "the command line"),
    ],
)
def test_an_unknown_device_model_is_an_error_naming_its_source_and_the_valid_ones(make, source):
    with pytest.raises(FuserError) as err:
        make()
    message = str(err.value)
    assert "'b200'" in message and source in message
    assert all(name in message for name in DEVICE_MODELS)


def test_backend_option_from_env_and_use_options():
    assert options_from_env({"FUSER_BACKEND": "Reference"}).backend == "reference"
    assert options_from_env({}).backend is None
    with pytest.raises(FuserError, match="unknown backend 'gpu' in FUSER_BACKEND; valid: cuda, reference"):
        options_from_env({"FUSER_BACKEND": "gpu"})
    with use_options(backend="cuda") as opts:
        assert opts.backend == "cuda"


def test_a_changed_environment_changes_the_options_of_the_next_call(monkeypatch):
    monkeypatch.delenv("NVFUSER_DUMP", raising=False)
    assert DumpOption.cuda_kernel not in current_options().dump
    monkeypatch.setenv("NVFUSER_DUMP", "cuda_kernel")
    assert DumpOption.cuda_kernel in current_options().dump
    monkeypatch.setenv("NVFUSER_DUMP", "")
    assert DumpOption.cuda_kernel not in current_options().dump
