"""`Session.why` and `fuser-wb why`: the segmenter's answer for the bundled samples, one
golden text per rejection category the samples reach (regenerate with
FUSER_UPDATE_GOLDENS=1 and review the diff), and clear errors for bad questions."""

from __future__ import annotations

import io
import os
from functools import cache
from pathlib import Path

import pytest

from fuser_core import FuserError, use_options
from workbench.cli import main
from workbench.session import Session
from workbench.why import answer_text

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "data" / "why"

# (golden name, sample, shapes or None for the bundled ones, question, category)
CASES = [
    ("gelu_bias_bwd_g0_g1", "issue785_gelu_bias_bwd", None, ("g0", "g1"), "disjoint iteration domains"),
    ("segment_set_log_softmax_g0_g1", "segment_set_log_softmax", None, ("g0", "g1"), "segment_set hint"),
    ("var_mean_long_rows_g0_g1", "var_mean", [(32, 1, 131072)], ("g0", "g1"), "persistent buffer too large"),
]
SPLITS = [
    ("layer_norm_bwd_g0_split", "layer_norm_bwd", None, "g0"),
    ("transpose_add_g0_split", "transpose_add", None, "g0"),
    ("gelu_bias_bwd_g1_split", "issue785_gelu_bias_bwd", None, "g1"),
]


@cache
def _session(sample: str, shapes: tuple[tuple[int, ...], ...] | None) -> Session:
    session = Session.open(sample)
    if shapes is not None:
        session.set_shapes(shapes)
    with use_options(device_model="h100_sxm"):
        result = session.run()
    assert result.ok, result.error
    return session


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / f"{name}.txt"
    if os.environ.get("FUSER_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden {path.name}: run with FUSER_UPDATE_GOLDENS=1 and review it"
    assert text == path.read_text()


@pytest.mark.parametrize(("name", "sample", "shapes", "question", "category"), CASES, ids=[c[0] for c in CASES])
def test_why_two_groups_stay_apart_matches_its_golden(name, sample, shapes, question, category):
    session = _session(sample, tuple(shapes) if shapes else None)
    answer = session.why(*question)
    assert answer.category.value == category
    _check_golden(name, answer_text(answer))


@pytest.mark.parametrize(("name", "sample", "shapes", "group"), SPLITS, ids=[c[0] for c in SPLITS])
def test_the_split_without_a_groups_scheduler_matches_its_golden(name, sample, shapes, group):
    answer = _session(sample, tuple(shapes) if shapes else None).why(group)
    _check_golden(name, answer_text(answer))


def test_gelu_bias_bwd_g0_g1_names_the_domains_that_disagree():
    answer = _session("issue785_gelu_bias_bwd", None).why("g0", "g1")
    reduction = next(v for v in answer.verdicts if v.scheduler.value == "reduction")
    assert reduction.rejection is not None
    assert dict(reduction.rejection.numbers) == {
        "iterates": "T2_g[ iS6{i11}, iS7{i12}, iS8{i13} ]",
        "reference candidate": "T10_g[ rS30{i4}, rS31{i5}, iS32{i6} ]",
    }
    assert not answer.neighbours and answer.cycle == () and answer.hint is None


def test_long_rows_give_the_buffer_bytes_against_the_budget():
    answer = _session("var_mean", ((32, 1, 131072),)).why("g0", "g1")
    inner = next(v for v in answer.verdicts if v.scheduler.value == "inner_persistent")
    assert inner.rejection is not None and inner.rejection.at_run_time
    numbers = dict(inner.rejection.numbers)
    assert numbers["persistent buffer bytes per row"] == str(131072 * 4)
    assert numbers["budget: shared memory per block"] == str(227 * 1024)


def test_expressions_are_named_by_the_tensors_they_write():
    session = _session("issue785_gelu_bias_bwd", None)
    assert session.why("T10", "T25") == session.why("g0", "g1")


@pytest.mark.parametrize(
    ("question", "message"),
    [
        (("g0", "g7"), "no group g7 in this run; its groups are g0, g1"),
        (("g0", "x1"), "not a group or tensor: 'x1'"),
        (("T10", "T0"), "no expression of this run writes T0"),
        (("T25", "T7"), "T25 and T7 are both in g1: one kernel already"),
        (("g0", "9:g1"), "g0 of run 1 and g1 of run 9 are of different runs"),
        (("9:g0", "9:g1"), "run 9 is not kept: the session keeps its last two runs"),
    ],
)
def test_bad_questions_are_clear_errors(question, message):
    session = _session("issue785_gelu_bias_bwd", None)
    with pytest.raises(FuserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        session.why(*question)


def test_why_before_any_run_says_to_run_first():
    with pytest.raises(FuserError, match="no run to ask about: run the fusion first"):
        Session.open("issue785_gelu_bias_bwd").why("g0", "g1")


def test_cli_why_prints_the_answer(capsys):
    out = io.StringIO()
    assert main(["why", "issue785_gelu_bias_bwd", "g0", "g1", "--device-model", "h100_sxm"], out) == 0
    text = out.getvalue()
    first, rest = text.split("\n", 1)
    assert first.startswith("== nvfuser_fusion_id6 (line 69): shapes 16x512x4096")
    assert rest == (GOLDEN_DIR / "gelu_bias_bwd_g0_g1.txt").read_text()


def test_cli_why_refuses_three_groups_and_unknown_ones(capsys):
    assert main(["why", "issue785_gelu_bias_bwd", "g0", "g1", "g2"], io.StringIO()) == 1
    assert "why takes one group (its split) or two (their merge), not 3" in capsys.readouterr().err
    assert main(["why", "issue785_gelu_bias_bwd", "g0", "g4"], io.StringIO()) == 1
    assert "no group g4 in this run; its groups are g0, g1" in capsys.readouterr().err
