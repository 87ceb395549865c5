"""load_repro's limits: whatever a script asks of the loader (huge numbers, lists, strings,
loops, nesting, files, inputs), loading ends quickly in a FuserError naming the line.

Each refusal is also timed: LIMIT_S is a safety net that turns a hang into a failure,
not a performance assertion (a missing limit runs for minutes or forever; a busy
two-CPU machine took over 5 s for the longest script allowed, so the net is wide).
"""

import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fuser_core import DataType, FuserError, ScalarSpec, TensorSpec, load_repro
from fuser_core.script import expressions as repro_expressions
from fuser_core.script import interpreter as repro_interpreter
from fuser_core.script.expressions import (
    MAX_STEPS,
    MAX_WORK,
    LoadLimitExceeded,
    ScriptExpressions,
)
from fuser_core.script.input_spec import MAX_RANK, input_bytes, materialize_inputs
from fuser_core.script.interpreter import MAX_CALL_DEPTH, ReproInterpreter
from fuser_core.script.loader import MAX_SOURCE_CHARS, MAX_SOURCE_LINES, ReproScript
from fuser_core.script.safe_builtins import MAX_NDIGITS, length
from fuser_core.script.values import nested_size

LIMIT_S = 60.0

HEADER = """\
import math
import torch
from nvfuser import FusionDefinition, DataType
"""
FIRST = HEADER.count("\n") + 1  # the line of a script's first statement after HEADER

DEFINITION = """
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    s0 = fd.define_scalar(None, dtype=DataType.Double)
    fd.add_output(fd.ops.mul(t0, s0))
"""


def timed(fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        assert time.perf_counter() - start < LIMIT_S, "the loader took too long: a limit is missing"


def load(text: str) -> ReproScript:
    return timed(lambda: load_repro(text))


def refusal(body: str) -> FuserError:
    """The one problem of `body` run at the top of a script with a good definition after it."""
    script = load(HEADER + textwrap.dedent(body) + DEFINITION)
    assert [d.name for d in script.definitions] == ["fd"]
    assert len(script.problems) == 1, [p.one_line() for p in script.problems]
    return script.problems[0]


def load_error(text: str) -> FuserError:
    with pytest.raises(FuserError) as info:
        load(text)
    assert "\n" not in info.value.one_line()
    return info.value


def value_of(expression: str) -> Any:
    """What the loader computes for `expression`, seen as the script's scalar input."""
    script = load(HEADER + DEFINITION + f"inputs = [torch.randn(2, 2), {expression}]\n")
    assert script.problems == [], [p.one_line() for p in script.problems]
    scalar = script.definitions[0].inputs[1]
    assert isinstance(scalar, ScalarSpec)
    return scalar.value


# -- 1. sum ---------------------------------------------------------------------------------------------
def test_sum_of_lists_is_refused_at_once_instead_of_copying_quadratically():
    error = refusal("row = [0] * 3000\nrows = [row] * 3000\nflat = sum(rows, [])\n")
    assert error.location.lineno == FIRST + 2
    assert error.one_line().endswith("sum: start must be a number, got a list (sum joins no lists)")


def test_sum_refuses_items_that_are_not_numbers():
    error = refusal("x = sum([[1], [2]])\n")
    assert error.location.lineno == FIRST and "sums numbers and fusion values, got a list" in error.message


def test_sum_of_numbers_still_works():
    assert value_of("sum([1, 2.5], 1)") == 4.5
    assert value_of("sum(range(5))") == 10


def test_sum_of_fusion_values_inside_a_definition_still_works():
    script = load(
        HEADER
        + "with FusionDefinition() as fd:\n"
        + "    a = fd.define_tensor([-1], [True])\n"
        + "    fd.add_output(sum([a, a, a]))\n"
        + "inputs = [torch.ones(3)]\n"
    )
    ld = script.definitions[0]
    np.testing.assert_array_equal(ld.fd.execute(ld.materialize_inputs(0))[0], [3.0, 3.0, 3.0])


# -- 2. numbers, sequences and strings ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "x = round(7, -10**7)",
            f"round: ndigits -10000000 is out of range for a repro script (at most {MAX_NDIGITS})",
        ),
        ("x = round(7.5, 10**9)", "round: ndigits 1000000000 is out of range"),
        ("x = round(7, 2.5)", "round: ndigits must be an int"),
        ("x = round('7')", "round: takes a number, got a str"),
        ("x = 10 ** 10 ** 7", "`10 ** 10000000` is too large for a repro script"),
        ("x = 2 ** (2 ** 30)", "`2 ** 1073741824` is too large for a repro script"),
        ("x = 1 << 10 ** 9", "`1 << 1000000000` is too large for a repro script"),
        ("x = (1 << 1000) << 100", "is too large for a repro script"),
        ("x = (1 << 1000) * (1 << 1000)", "is too large for a repro script"),
        ("x = [0] * 10 ** 9", "`* 1000000000` makes a list too long for a repro script (at most 100000 items)"),
        ("x = 10 ** 9 * [0, 1]", "`* 1000000000` makes a list too long"),
        ("x = [] * 10 ** 100", "makes a list too long"),
        ("x = (0,) * 10 ** 9", "makes a list too long"),
        ("x = 'a' * 10 ** 9", "`* 1000000000` makes a string too long for a repro script (at most 100000 characters)"),
        ("x = 10 ** 9 * 'ab'", "makes a string too long"),
        ("x = '' * 10 ** 100", "makes a string too long"),
        ("x = 'a' * 2.0", "`*` between a str and a float is not supported"),
        ("s = '9' * 100000\nx = int(s)", "int: a number of 100000 characters is too long for a repro script"),
        ("s = '1' * 5000\nx = float(s)", "float: a number of 5000 characters is too long"),
        ("x = int('f' * 300, 16)", "the result of int is too large for a repro script (ints have at most 1024 bits)"),
        ("x = 0x" + "f" * 300, "this int literal is too large for a repro script"),
        ("x = " + "9" * 1000, "this int literal is too large"),
        ("x = list(range(10 ** 18))", "a range of 1000000000000000000 items is too long to pass to list"),
        ("x = len(range(10 ** 20))", "a range of 100000000000000000000 items is too long to pass to len"),
        ("x = math.factorial(10 ** 6)", "`math.factorial` is not in the subset"),
        ("x = pow(3, 10 ** 100, 7)", "name `pow` is not defined"),
        ("x = math.pow(10, 10 ** 6)", "`math.pow` is not in the subset"),
        ("x = math.ceil(1e308) * 2", "is too large for a repro script"),
        ("x = math.floor(float('inf'))", "OverflowError"),
        ("x = 2.0 ** (1 << 1000)", "`2.0 ** 1071508607...(302 digits)`: (34, 'Numerical result out of range')"),
    ],
)
def test_numeric_and_sequence_blowups_are_refused_quickly_naming_the_line(body, message):
    error = refusal(body + "\n")
    assert error.location.lineno == FIRST + body.count("\n")
    assert message in error.one_line()


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("round(7, -400)", 0),
        ("round(1234, -2)", 1200),
        ("round(2.5)", 2),
        ("round(3.14159, 2)", 3.14),
        ("len('ab' * 3)", 6),
        ("len(3 * [1, 2])", 6),
        ("len([1] * -2)", 0),
        ("int('ff', 16)", 255),
        ("float('1.5e3')", 1500.0),
        ("(1 << 1000) >> 999", 2),
        ("1 >> 10 ** 100", 0),
        ("len(str(1 << 1000))", 302),
        ("(-1) ** (1 << 1000)", 1),
        ("5 in range(10 ** 18)", True),
        ("math.floor(1e308) > 0", True),
    ],
)
def test_numbers_within_the_limits_keep_their_python_values(expression, value):
    assert value_of(expression) == value


def test_a_float_looked_up_in_a_huge_range_stops_at_the_work_limit():
    error = load_error(HEADER + "x = 0.5 in range(10 ** 18)\n" + DEFINITION)
    assert isinstance(error, LoadLimitExceeded) and error.location.lineno == FIRST
    assert f"work limit at line {FIRST}" in error.message


def test_comparing_lists_of_equal_but_distinct_lists_is_charged_for_what_it_scans():
    body = "a = [0] * 100000\nb = [a] * 100000\nc = [list(a)] * 100000\nx = b == c\n"
    error = load_error(HEADER + body + DEFINITION)
    assert isinstance(error, LoadLimitExceeded) and error.location.lineno == FIRST + 3


def test_lists_doubled_in_a_loop_cost_no_more_than_the_budget_to_compare():
    body = """\
    with FusionDefinition() as fd:
        a, b = [0], [0]
        for i in range(200):
            a, b = [a, b], [b, a]
        x = a == b
    """
    error = load_error(HEADER + textwrap.dedent(body))
    assert isinstance(error, LoadLimitExceeded) and error.location.lineno == FIRST + 4


def test_nested_size_counts_a_shared_list_each_time_and_measures_it_once():
    row = [0] * 10
    assert nested_size(([row] * 10,), 10**9) == 10 + 10 * 10
    assert nested_size(([], "abc", {"k": [1, 2]}, ([1], [2, 3])), 100) == 3 + 1 + 2 + 2 + 1 + 2
    a, b = [0], [0]
    for _ in range(200):
        a, b = [a, b], [b, a]
    assert timed(lambda: nested_size((a, b), 1000)) == 1001
    looped: list[Any] = [1]
    looped.append([looped])
    assert nested_size((looped,), 100) == 101


def test_a_list_that_holds_itself_cannot_hang_a_comparison():
    error = load_error(HEADER + "with FusionDefinition() as fd:\n    a = [0]\n    a.append(a)\n    x = a == [a]\n")
    assert error.location.lineno == FIRST + 3


@pytest.mark.parametrize(
    "body",
    [
        "x = [i for i in range(10 ** 18)]",
        "x = [0 for i in range(10 ** 9) for j in range(10 ** 9)]",
    ],
)
def test_consuming_a_huge_range_stops_at_the_step_limit(body):
    error = load_error(HEADER + body + "\n" + DEFINITION)
    assert isinstance(error, LoadLimitExceeded) and error.location.lineno == FIRST
    assert f"step limit at line {FIRST}: it takes more than {MAX_STEPS} steps" in error.message


def test_a_huge_loop_inside_a_definition_stops_at_the_step_limit():
    text = HEADER + "with FusionDefinition() as fd:\n    for i in range(10 ** 18):\n        x = i\n"
    error = load_error(text)
    assert isinstance(error, LoadLimitExceeded) and error.location.lineno in (FIRST + 1, FIRST + 2)


def test_length_of_ranges_matches_len_and_never_overflows():
    for r in (range(0), range(5), range(1, 10, 3), range(10, 0, -3), range(5, 0), range(0, 5, -1), range(-7, 7, 2)):
        assert length(r) == len(r), r
    assert length(range(10**20)) == 10**20


# -- 2. nesting and long scripts ------------------------------------------------------------------------
def test_parentheses_nested_past_the_parser_limit_are_a_syntax_error_naming_the_line():
    error = load_error(HEADER + "x = " + "(" * 300 + "1" + ")" * 300 + "\n" + DEFINITION)
    assert error.location.lineno == FIRST and "too many nested parentheses" in error.message


@pytest.mark.parametrize(
    "expression",
    ["-" * 100_000 + "1", "+".join(["1"] * 200_000), "not " * 100_000 + "1", "x" + ".a" * 100_000],
    ids=["unary minus", "additions", "nots", "attributes"],
)
def test_an_expression_too_deep_for_pythons_parser_names_its_line(expression):
    error = load_error(HEADER + "y = 1\nx = " + expression + "\n" + DEFINITION)
    assert error.location.lineno == FIRST + 1
    assert "nests too deeply for Python's parser" in error.message
    assert len(error.location.line) <= 200


@pytest.mark.parametrize(
    "expression",
    ["1 + " * 900 + "1", "-" * 900 + "1", "x" + "[0]" * 2000],
    ids=["additions", "unary minus", "subscripts"],
)
def test_an_expression_too_deep_to_interpret_is_a_problem_naming_its_line(expression):
    script = load(HEADER + "x = [0]\ny = " + expression + "\n" + DEFINITION)
    assert script.definitions[0].name == "fd"
    assert [p.one_line() for p in script.problems] == [
        f"<repro>:{FIRST + 1}: the script nests too deeply to be interpreted"
    ]


@pytest.mark.parametrize("expression", ["f(" * 150 + "1" + ")" * 150, "[" * 150 + "]" * 150], ids=["calls", "lists"])
def test_nesting_up_to_the_parsers_limit_of_parentheses_is_interpreted(expression):
    script = load(HEADER + "def f(v):\n    return v\ny = " + expression + "\n" + DEFINITION)
    assert script.problems == []


def test_a_script_longer_than_the_limit_is_refused_before_it_is_parsed():
    text = HEADER + DEFINITION + "x = 1\n" * (MAX_SOURCE_CHARS // 6 + 10)
    error = load_error(text)
    assert f"longer than {MAX_SOURCE_CHARS} characters" in error.message
    assert error.location.lineno == text.count("\n", 0, MAX_SOURCE_CHARS) + 1


def test_a_script_of_one_huge_line_is_refused_and_the_line_is_not_quoted_whole():
    error = load_error(HEADER + "x = [" + "1, " * MAX_SOURCE_CHARS + "]\n" + DEFINITION)
    assert error.location.lineno == FIRST and len(error.location.line) <= 200


def test_a_script_with_too_many_lines_is_refused_at_the_first_line_past_the_limit():
    error = load_error(HEADER + DEFINITION + "\n" * MAX_SOURCE_LINES)
    assert f"a repro script may have at most {MAX_SOURCE_LINES}" in error.message
    assert error.location.lineno == MAX_SOURCE_LINES + 1


def test_a_huge_file_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "huge.py"
    path.write_text(HEADER + DEFINITION + "# padding\n" * 2_000_000)
    error = load_error(str(path))
    assert "longer than" in error.message and error.location.filename == str(path)


def test_the_longest_script_allowed_still_loads():
    line = "x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # padding\n"
    padding = line * ((MAX_SOURCE_CHARS - 2000) // len(line))
    script = load(HEADER + DEFINITION + padding)
    assert [d.name for d in script.definitions] == ["fd"] and script.problems == []


def test_an_error_on_a_very_long_line_quotes_only_its_start():
    error = refusal("x = [" + "1, " * 5000 + "] + 'a'\n")
    assert error.location.lineno == FIRST and len(error.location.line) <= 200
    assert error.location.line.endswith("...")


def test_an_error_about_a_huge_expression_does_not_unparse_it():
    error = refusal("x = -[" + "1, " * 50_000 + "]\n")
    assert "unary `<a long unaryop>` on a list is not supported" in error.message


# -- 2. torch inputs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x = torch.randn([2] * 100)", f"100 size entries: a tensor has at most {MAX_RANK} dimensions here"),
        ("x = torch.randn(2 ** 70)", "size entry 1180591620717411303424 does not fit an int64"),
        ("x = torch.randn(2, 2).expand([1] * 65)", f"at most {MAX_RANK} dimensions"),
        ("x = torch.arange(2 ** 64)", "does not fit an int64"),
        ("x = torch.ones(1).view([1] * 80)", f"at most {MAX_RANK} dimensions"),
    ],
)
def test_input_shapes_beyond_torchs_are_refused(body, message):
    error = refusal(body + "\n")
    assert error.location.lineno == FIRST and message in error.one_line()


def test_ranks_grown_in_a_loop_stop_at_the_rank_limit():
    body = "    x = torch.randn(2)\n    for i in range(10**5):\n        x = x.unsqueeze(0)\n"
    error = load_error(HEADER + "with FusionDefinition() as fd:\n" + body)
    assert error.location.lineno == FIRST + 3 and f"more than {MAX_RANK}" in error.message


def test_copies_of_copies_in_a_loop_stop_at_the_copy_limit():
    body = "with FusionDefinition() as fd:\n    x = torch.randn(2)\n    for i in range(100000):\n        x = x > 0\n"
    error = load_error(HEADER + body)
    assert error.location.lineno == FIRST + 3 and "copied from a copy" in error.message


def test_nested_data_deeper_than_a_tensor_can_be_is_refused():
    body = (
        "with FusionDefinition() as fd:\n    a = 0\n    for i in range(99):\n        a = [a]\n    t = torch.tensor(a)\n"
    )
    error = load_error(HEADER + body)
    assert error.location.lineno == FIRST + 4 and "data nests more than 64 lists deep" in error.message


# -- 3. the step and work limits stop loading and say so ------------------------------------------------
def test_the_work_limit_before_any_definition_is_the_error_reported():
    body = "a = [0] * 100000\nb = [a] * 10\nx = b == [list(a)] * 10\n"  # 2 million ints to compare
    error = load_error(HEADER + body + DEFINITION)
    assert isinstance(error, LoadLimitExceeded)
    assert error.one_line() == (
        f"<repro>:{FIRST + 2}: script exceeds the loader's work limit at line {FIRST + 2}: "
        f"it makes or scans more than {MAX_WORK} list items"
    )
    assert "has no fusion definition" not in str(error)


def test_the_work_limit_after_a_definition_keeps_it_and_stops_loading():
    body = "a = [0] * 100000\nb = [a] * 100000\nx = b == [list(a)] * 100000\n"
    script = load(HEADER + DEFINITION + body + DEFINITION.replace("fd", "fd2"))
    assert [d.name for d in script.definitions] == ["fd"]  # fd2 comes after the limit
    assert [p.location.lineno for p in script.problems] == [FIRST + 7]
    assert isinstance(script.problems[0], LoadLimitExceeded)


def test_the_work_limit_inside_a_definition_is_that_definitions_error():
    body = "with FusionDefinition() as fd:\n    a = [0] * 100000\n    for i in range(100):\n        b = a == list(a)\n"
    error = load_error(HEADER + body)
    assert isinstance(error, LoadLimitExceeded) and error.location.lineno == FIRST + 3


def test_the_step_limit_in_a_test_function_stops_loading_with_a_kept_definition():
    body = (
        "def test_loop():\n    with FusionDefinition() as fd2:\n        for i in range(10 ** 9):\n            x = i\n"
    )
    script = load(HEADER + DEFINITION + body)
    assert [d.name for d in script.definitions] == ["fd"]
    assert len(script.problems) == 1 and "step limit" in script.problems[0].message


def test_a_limit_reached_inside_an_fstring_is_not_swallowed():
    body = "with FusionDefinition() as fd:\n    for i in range(10 ** 9):\n        x = f'{i}'\n"
    error = load_error(HEADER + body)
    assert isinstance(error, LoadLimitExceeded)


def test_a_refused_with_statement_is_named_when_no_definition_is_left():
    error = load_error("x = 1\n" + DEFINITION)
    assert "has no fusion definition" in error.message
    assert "name `FusionDefinition` is not defined" in error.message


# -- 4. names -------------------------------------------------------------------------------------------
def test_the_loaders_evaluator_has_its_own_name():
    assert issubclass(ReproInterpreter, ScriptExpressions)
    assert not hasattr(repro_expressions, "ExpressionEvaluator")
    assert not hasattr(repro_interpreter, "ExpressionEvaluator")
    interpreter = ReproInterpreter("<repro>", [])
    assert not hasattr(interpreter, "_loops")
    assert interpreter._call_depth == 0 and interpreter._loop_depths == [0]


@pytest.mark.parametrize(("depth", "refused"), [(MAX_CALL_DEPTH, False), (MAX_CALL_DEPTH + 1, True)])
def test_call_depth_is_counted_apart_from_loops(depth, refused):
    body = f"def f(n):\n    for i in range(1):\n        pass\n    return 0 if n == 1 else f(n - 1)\nk = f({depth})\n"
    script = load(HEADER + body + DEFINITION)
    messages = [p.one_line() for p in script.problems]
    expected = [f"<repro>:{FIRST + 3}: f: functions nest more than {MAX_CALL_DEPTH} calls deep"] if refused else []
    assert messages == expected


def test_break_in_a_function_called_from_a_loop_has_no_loop_to_leave():
    body = "def helper():\n    break\nfor i in range(3):\n    helper()\n"
    script = load(HEADER + body + DEFINITION)
    assert [p.one_line() for p in script.problems] == [f"<repro>:{FIRST + 1}: `break` outside a function or loop"]


def test_return_from_a_loop_inside_a_function_returns():
    body = "def g():\n    for i in range(3):\n        return i + 7\n"
    script = load(HEADER + body + DEFINITION + "inputs = [torch.randn(2, 2), g()]\n")
    assert script.definitions[0].inputs[1] == ScalarSpec(7)


@pytest.mark.parametrize("annotation", ["FusionDefinition", "nvfuser.FusionDefinition"])
def test_definition_functions_are_found_by_their_annotation(annotation):
    body = f"import nvfuser\ndef build(f: {annotation}) -> None:\n    f.add_output(f.define_tensor([-1], [True]))\n"
    script = load(HEADER + body)
    assert [d.name for d in script.definitions] == ["build"]


# -- 5. materializing inputs ----------------------------------------------------------------------------
HUGE_INPUTS = """\
def nvfuser_fusion_id0(fd: FusionDefinition) -> None:
    t = fd.define_tensor([-1, -1], [True, True])
    fd.add_output(fd.ops.neg(t))
inputs = [torch.randn(2**20, 2**20, device="cuda")]
"""


def test_inputs_over_max_bytes_are_refused_before_anything_is_allocated():
    ld = load(HEADER + HUGE_INPUTS).definitions[0]
    with pytest.raises(FuserError) as info:
        timed(lambda: ld.materialize_inputs(seed=0, max_bytes=4 << 30))
    assert info.value.one_line() == "nvfuser_fusion_id0's inputs need 4.0 TiB; the limit is 4.0 GiB (--max-input-bytes)"


def test_inputs_within_max_bytes_are_made():
    ld = load(HEADER + DEFINITION + "inputs = [torch.ones(2, 3), 2.0]\n").definitions[0]
    x, s = ld.materialize_inputs(seed=0, max_bytes=24 + 8)
    np.testing.assert_array_equal(x, np.ones((2, 3), np.float32))
    assert s == 2.0
    with pytest.raises(FuserError, match=r"fd's inputs need 32 B; the limit is 31 B"):
        ld.materialize_inputs(seed=0, max_bytes=31)


def test_input_bytes_count_the_tensors_a_copy_is_made_from():
    script = load(HEADER + DEFINITION + "inputs = [torch.randn(2, 2) > 0, 1.0]\n")
    specs = script.definitions[0].inputs
    assert input_bytes(specs) == 4 + 16 + 8  # the bool copy, its float source, the double scalar


def test_running_out_of_memory_while_materializing_is_a_fuser_error():
    # 2**58 float32s are an exbibyte: no allocator can give them, so nothing is allocated.
    spec = TensorSpec((2**58,), DataType.Float, kind="zeros")
    with pytest.raises(FuserError) as info:
        timed(lambda: materialize_inputs([ScalarSpec(1.0), spec], seed=0, owner="big"))
    assert info.value.one_line().startswith("out of memory making input 1 of big (tensor [288230376151711744]")
    assert isinstance(info.value.__cause__, MemoryError)


def test_running_out_of_memory_through_a_loaded_definition_names_it():
    ld = load(HEADER + DEFINITION + "inputs = [torch.zeros(2**29, 2**29), 1.0]\n").definitions[0]
    with pytest.raises(FuserError, match=r"^out of memory making input 0 of fd \(tensor"):
        ld.materialize_inputs(seed=0)
