"""load_repro: a repro script's inputs become lazy specs with torch's shapes, strides, dtypes and fills."""

import numpy as np
import pytest
from script_helpers import DEFINITION, HEADER, element_strides, load, only

from fuser_core import DataType, ScalarSpec, TensorSpec


def test_inputs_assigned_before_the_definition_without_execute():
    ld = only(load(HEADER + "inputs = [torch.randn(2, 3), 2.0]\n" + DEFINITION))
    assert ld.inputs[0].shape == (2, 3) and ld.inputs[1] == ScalarSpec(2.0)


def test_ins_assigned_after_the_definition_without_execute():
    ld = only(load(HEADER + DEFINITION + "ins = [torch.randn(4, 1), 3.0]\n"))
    assert ld.inputs[0].shape == (4, 1)
    x, s = ld.materialize_inputs(0)
    np.testing.assert_allclose(ld.fd.execute([x, s])[0], x * 3.0)


def test_execute_before_inputs_are_assigned_pairs_them_afterwards():
    ld = only(load(HEADER + DEFINITION + "fd.execute(inputs)\ninputs = [torch.randn(5, 2), 1.0]\n"))
    assert ld.inputs[0].shape == (5, 2)


def test_inputs_written_directly_in_execute():
    script = load(HEADER + DEFINITION + "out = fd.execute([torch.randn(2, 3, device='cuda'), 0.25])\n")
    ld = only(script)
    assert ld.inputs == [TensorSpec((2, 3), device="cuda"), ScalarSpec(0.25)] and script.problems == []


def test_execute_with_keyword_inputs_and_a_for_loop_counts_as_execute():
    script = load(
        HEADER,
        DEFINITION,
        """
        x = torch.randn(6, 2)
        for _ in range(5):
            out = fd.execute(inputs=[x, 1.0], profile=False)
        """,
    )
    assert only(script).inputs[0].shape == (6, 2)


@pytest.mark.parametrize(
    ("literal", "value"), [("3", 3), ("2.5", 2.5), ("True", True), ("(-1)", -1), ("-0.5", -0.5), ("(1+2j)", 1 + 2j)]
)
def test_python_scalar_inputs(literal, value):
    ld = only(load(HEADER + DEFINITION + f"inputs = [torch.randn(1, 1), {literal}]\n"))
    spec = ld.inputs[1]
    assert spec == ScalarSpec(value) and type(spec.value) is type(value)


@pytest.mark.parametrize(
    ("expr", "shape"),
    [
        ("torch.randn(2, 3)", (2, 3)),
        ("torch.randn((2, 3))", (2, 3)),
        ("torch.randn([2, 3])", (2, 3)),
        ("torch.randn(size=(2, 3))", (2, 3)),
        ("torch.randn(16 * 128, 3072 // 64 % 7 - -1)", (2048, 7)),
        ("torch.randn(bsz, 16)", (2, 16)),
        ("torch.randn(*shape)", (2, 16)),
        ("torch.randn(())", ()),
    ],
)
def test_tensor_shapes_from_positional_tuple_list_keyword_and_arithmetic(expr, shape):
    ld = only(load(HEADER + "bsz = 2\nshape = (bsz, 16)\n" + DEFINITION + f"inputs = [{expr}, 1.0]\n"))
    assert ld.inputs[0].shape == shape


@pytest.mark.parametrize(
    ("expr", "kind", "dtype", "check"),
    [
        ("torch.randn(50, 40)", "randn", DataType.Float, lambda a: a.std() > 0.5),
        ("torch.rand(50, 40, dtype=torch.float64)", "rand", DataType.Double, lambda a: a.min() >= 0 and a.max() < 1),
        ("torch.ones(3, 4, dtype=torch.float16)", "ones", DataType.Half, lambda a: (a == 1).all()),
        ("torch.zeros(3, 4)", "zeros", DataType.Float, lambda a: (a == 0).all()),
        ("torch.empty(50, 40, device='cuda')", "empty", DataType.Float, lambda a: np.count_nonzero(a) > 1900),
        ("torch.full((3, 4), 7)", "full", DataType.Int, lambda a: (a == 7).all()),
        ("torch.full([3, 4], -1.5, dtype=torch.bfloat16)", "full", DataType.BFloat16, lambda a: (a == -1.5).all()),
        ("torch.randint(5, (50, 40))", "randint", DataType.Int, lambda a: a.min() == 0 and a.max() == 4),
        ("torch.randint(-2, 3, (50, 40), dtype=torch.int32)", "randint", DataType.Int32, lambda a: a.min() == -2),
        ("torch.randint(low=1, high=4, size=(50, 40))", "randint", DataType.Int, lambda a: a.max() == 3),
        ("torch.tensor([[1, 2], [3, 4]])", "tensor", DataType.Int, lambda a: a.tolist() == [[1, 2], [3, 4]]),
        ("torch.tensor([True, False])", "tensor", DataType.Bool, lambda a: a.tolist() == [True, False]),
        ("torch.tensor(1.5, dtype=torch.float64, device='cpu')", "tensor", DataType.Double, lambda a: a == 1.5),
        ("torch.arange(5)", "arange", DataType.Int, lambda a: a.tolist() == [0, 1, 2, 3, 4]),
        ("torch.arange(1, 2, 0.25)", "arange", DataType.Float, lambda a: a.tolist() == [1, 1.25, 1.5, 1.75]),
        (
            "torch.randn(3, 4, requires_grad=True, generator=None, dtype=torch.float32)",
            "randn",
            DataType.Float,
            lambda a: a.shape == (3, 4),
        ),
    ],
)
def test_torch_factories(expr, kind, dtype, check):
    script = load(
        HEADER
        + f"inputs = [{expr}]\n"
        + DEFINITION.replace("s0 = fd.define_scalar(None, dtype=DataType.Double)", "s0 = 2")
    )
    spec = only(script).inputs[0]
    assert (spec.kind, spec.dtype) == (kind, dtype)
    value = spec.materialize(0)
    assert value.dtype == dtype.numpy and check(value)


@pytest.mark.parametrize(
    "line",
    [
        "from torch.testing import make_tensor\n"
        "inputs = [make_tensor((500,), dtype=torch.float32, device='cuda', low=-1, high=1)]",
        "inputs = [torch.testing.make_tensor(500, dtype=torch.float32, device='cuda:0', low=-1, high=1)]",
    ],
)
def test_make_tensor_with_bounds(line):
    spec = only(load(HEADER + line + "\n" + DEFINITION)).inputs[0]
    assert (spec.kind, spec.shape, spec.low, spec.high) == ("make_tensor", (500,), -1, 1)
    value = spec.materialize(0)
    assert -1 <= value.min() < -0.9 and 0.9 < value.max() < 1


@pytest.mark.parametrize(
    ("expr", "shape", "strides", "dtype", "device"),
    [
        ("torch.randn(20, dtype=torch.float32).as_strided((2, 3), (1, 2))", (2, 3), (1, 2), DataType.Float, "cpu"),
        ("torch.randn(2, 3).cuda()", (2, 3), (3, 1), DataType.Float, "cuda"),
        ("torch.randn(2, 3).to('cuda:1')", (2, 3), (3, 1), DataType.Float, "cuda:1"),
        ("torch.randn(2, 3).to(dtype=torch.float16)", (2, 3), (3, 1), DataType.Half, "cpu"),
        ("torch.randn(2, 3).to(torch.bfloat16)", (2, 3), (3, 1), DataType.BFloat16, "cpu"),
        ("torch.randn(2, 3).to('cuda', torch.float64)", (2, 3), (3, 1), DataType.Double, "cuda"),
        ("torch.randn(2, 3).half().float()", (2, 3), (3, 1), DataType.Float, "cpu"),
        ("torch.randn(2, 3).bfloat16()", (2, 3), (3, 1), DataType.BFloat16, "cpu"),
        ("torch.randn(2, 3).t()", (3, 2), (1, 3), DataType.Float, "cpu"),
        ("torch.randn(2, 3).t().contiguous()", (3, 2), (2, 1), DataType.Float, "cpu"),
        ("torch.randn(2, 3, 4).transpose(0, -1)", (4, 3, 2), (1, 4, 12), DataType.Float, "cpu"),
        ("torch.randn(2, 3, 4).permute(2, 0, 1)", (4, 2, 3), (1, 12, 4), DataType.Float, "cpu"),
        ("torch.randn(2, 3, 4).permute([2, 0, 1])", (4, 2, 3), (1, 12, 4), DataType.Float, "cpu"),
        ("torch.randn(3, 1).expand(2, 3, 4)", (2, 3, 4), (0, 1, 0), DataType.Float, "cpu"),
        ("torch.randn(3, 1).expand(-1, 5)", (3, 5), (1, 0), DataType.Float, "cpu"),
        ("torch.randn(2, 3).unsqueeze(1)", (2, 1, 3), (3, 3, 1), DataType.Float, "cpu"),
        ("torch.randn(6).view(2, 3)", (2, 3), (3, 1), DataType.Float, "cpu"),
        ("torch.randn(2, 3).t().reshape(-1)", (6,), (1,), DataType.Float, "cpu"),
        (
            "torch.randn(2, 3, 4, 5, memory_format=torch.channels_last)",
            (2, 3, 4, 5),
            (60, 1, 15, 3),
            DataType.Float,
            "cpu",
        ),
        ("torch.randn(2, 3).int()", (2, 3), (3, 1), DataType.Int32, "cpu"),
        ("torch.randn(2, 3).long().bool()", (2, 3), (3, 1), DataType.Bool, "cpu"),
        ("torch.randn(2, 3, device=torch.device('cuda'))", (2, 3), (3, 1), DataType.Float, "cuda"),
        ("torch.randn(2, 3, device=torch.device('cuda', 1))", (2, 3), (3, 1), DataType.Float, "cuda:1"),
        ("torch.empty_strided((2, 3), (1, 2), device='cuda')", (2, 3), (1, 2), DataType.Float, "cuda"),
        ("torch.empty_strided((2, 3), (1, 4))", (2, 3), (1, 4), DataType.Float, "cpu"),
        (
            "torch.testing.make_tensor((2, 3), dtype=torch.float32, device='cpu', noncontiguous=True)",
            (2, 3),
            (6, 2),
            DataType.Float,
            "cpu",
        ),
    ],
)
def test_tensor_methods_adjust_shape_strides_dtype_and_device(expr, shape, strides, dtype, device):
    spec = only(load(HEADER + f"inputs = [{expr}]\n" + DEFINITION)).inputs[0]
    assert (spec.shape, spec.strides, spec.dtype, spec.device) == (shape, strides, dtype, device)
    value = spec.materialize(0)
    assert value.shape == shape and element_strides(value) == strides and value.dtype == dtype.numpy


def test_layout_methods_keep_the_values_of_explicit_data():
    spec = only(load(HEADER + "inputs = [torch.arange(6).as_strided((2, 2), (3, 1), 1).t()]\n" + DEFINITION)).inputs[0]
    np.testing.assert_array_equal(spec.materialize(0), [[1, 4], [2, 5]])
    contiguous = only(load(HEADER + "inputs = [torch.tensor([[1, 2], [3, 4]]).t().contiguous()]\n" + DEFINITION))
    value = contiguous.inputs[0].materialize(0)
    assert value.tolist() == [[1, 3], [2, 4]] and element_strides(value) == (2, 1)


@pytest.mark.parametrize("expr", ["torch.randn(40, 50) > 0", "0 < torch.randn(40, 50)", "torch.rand(40, 50) <= 0.5"])
def test_comparison_of_an_input_gives_a_bool_spec(expr):
    spec = only(load(HEADER + f"inputs = [{expr}]\n" + DEFINITION)).inputs[0]
    assert spec.dtype == DataType.Bool and spec.compare in ("gt", "le") and spec.source.kind in ("randn", "rand")
    value = spec.materialize(0)
    assert value.dtype == np.bool_ and 0.4 < value.mean() < 0.6


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("float32", DataType.Float), ("float", DataType.Float), ("bfloat16", DataType.BFloat16),
        ("float16", DataType.Half), ("half", DataType.Half), ("int64", DataType.Int), ("long", DataType.Int),
        ("int32", DataType.Int32), ("int", DataType.Int32), ("bool", DataType.Bool), ("float64", DataType.Double),
        ("double", DataType.Double), ("complex64", DataType.ComplexFloat), ("complex128", DataType.ComplexDouble),
        ("float8_e4m3fn", DataType.Float8_e4m3fn),
    ],
)  # fmt: skip
def test_torch_dtypes(name, dtype):
    spec = only(load(HEADER + f"inputs = [torch.empty(2, dtype=torch.{name})]\n" + DEFINITION)).inputs[0]
    assert spec.dtype == dtype and spec.materialize(0).dtype == dtype.numpy


def test_a_torch_dtype_without_datatype_is_a_problem_outside_definitions():
    script = load(HEADER + DEFINITION + "inputs = [torch.empty(2, dtype=torch.uint8)]\n")
    assert only(script).inputs is None
    assert [p.location.lineno for p in script.problems] == [8]
    assert "torch.uint8" in script.problems[0].one_line()


def test_randn_with_an_integer_dtype_is_refused_like_torch():
    script = load(HEADER + DEFINITION + "inputs = [torch.randn(2, dtype=torch.int64), 1.0]\n")
    assert "needs a floating-point dtype" in script.problems[0].one_line()


def test_list_comprehension_and_append_build_inputs():
    script = load(HEADER + DEFINITION + "inputs = [torch.randn(n, 2) for n in (3,)]\ninputs.append(1.0)\n")
    assert [type(s) for s in only(script).inputs] == [TensorSpec, ScalarSpec]


def test_input_count_mismatch_is_a_problem():
    script = load(HEADER + DEFINITION + "inputs = [torch.randn(2, 2)]\n")
    assert only(script).inputs is not None
    assert [p.one_line() for p in script.problems] == ["<repro>:4: fd takes 2 inputs but the script gives 1"]


@pytest.mark.parametrize(
    ("expr", "kind", "dtype", "strides", "device"),
    [
        ("torch.randn_like(x)", "randn", DataType.Half, (1, 2), "cuda"),
        ("torch.zeros_like(x, dtype=torch.float32)", "zeros", DataType.Float, (1, 2), "cuda"),
        ("torch.ones_like(x, device='cpu')", "ones", DataType.Half, (1, 2), "cpu"),
        ("torch.empty_like(x, memory_format=torch.contiguous_format)", "empty", DataType.Half, (3, 1), "cuda"),
        ("torch.full_like(x, 4)", "full", DataType.Half, (1, 2), "cuda"),
        ("torch.rand_like(torch.randn(2, 1).expand(2, 5))", "rand", DataType.Float, (5, 1), "cpu"),
    ],
)
def test_like_factories_take_shape_dtype_device_and_dense_layout(expr, kind, dtype, strides, device):
    script = load(
        HEADER + "x = torch.randn(3, 2, device='cuda', dtype=torch.half).t()\n" + f"inputs = [{expr}]\n" + DEFINITION
    )
    spec = only(script).inputs[0]
    assert (spec.kind, spec.dtype, spec.strides, spec.device) == (kind, dtype, strides, device)


@pytest.mark.parametrize(
    ("expr", "check"),
    [
        ("torch.empty(400).fill_(2.5)", lambda a: (a == 2.5).all()),
        ("torch.randn(400).zero_()", lambda a: (a == 0).all()),
        ("torch.empty(400).uniform_(-3, -2)", lambda a: a.min() >= -3 and a.max() < -2),
        ("torch.zeros(400).normal_()", lambda a: a.std() > 0.5),
        ("(torch.randn(400) > 0).fill_(True)", lambda a: a.dtype == np.bool_ and a.all()),
    ],
)
def test_in_place_fills_replace_the_values(expr, check):
    spec = only(load(HEADER + f"inputs = [{expr}]\n" + DEFINITION)).inputs[0]
    assert spec.shape == (400,) and check(spec.materialize(0))


def test_validate_records_inputs_and_never_evaluates_its_reference():
    script = load(HEADER + DEFINITION + "fd.validate([torch.randn(3, 3), 2.0], [torch.nn.functional.gelu(x)])\n")
    assert only(script).inputs[0].shape == (3, 3) and script.problems == []
