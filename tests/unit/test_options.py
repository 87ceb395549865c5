"""Dump/enable/disable options: environment, aliases, context, per-call, errors, sink."""

import pytest

from fuser_core import FuserError
from fuser_core.options import (
    DisableOption,
    DumpOption,
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
    with pytest.raises(FuserError, match="none yet"):
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
