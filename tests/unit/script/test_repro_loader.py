"""load_repro: nvFuser repro scripts load as pasted, interpreted and never executed."""

import textwrap

import ml_dtypes
import numpy as np
import pytest
from script_helpers import DEFINITION, HEADER, element_strides, load, only

from fuser_core import DataType, FuserError, ScalarSpec, TensorSpec, load_repro

PRINT_REPRO = """\
# CUDA devices:
#  0: NVIDIA H100 80GB HBM3
# torch version: 2.5.0a0+gitunknown
# cuda version: 12.6
# nvfuser version: 0.2.10+git36bdc8b
# Größe der Eingaben: klein — ✓ non-ASCII comment
import torch
from nvfuser import FusionDefinition, DataType

def nvfuser_fusion_id6(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[False], dtype=DataType.Float, is_cpu=False, stride_order=[0])
    S2 = fd.define_scalar(None, dtype=DataType.Double)
    T3 = fd.ops.cast(T0, dtype=DataType.Float)
    S4, S5 = fd.ops.tensor_sizes(T3)
    T6 = fd.ops.broadcast_in_dim(T1, shape=[S4, S5], broadcast_dims=[1])
    T7 = fd.ops.add(T3, T6)
    T8 = fd.ops.mul(T7, S2)
    T9, T10 = fd.ops.var_mean(T8, dims=[1], correction=0, keepdim=False)
    fd.add_output(T9)
    fd.add_output(T10)

with FusionDefinition() as fd:
    nvfuser_fusion_id6(fd)

inputs = [
    torch.testing.make_tensor((4, 8), dtype=torch.bfloat16, device='cuda:0'),
    torch.randn((16,), dtype=torch.float32, device='cuda:0').as_strided((8,), (2,)),
    1.5,
]
fd.execute(inputs)
"""  # noqa: E501


def run(ld) -> list:
    return ld.fd.execute(ld.materialize_inputs(seed=0))


def simple(body: str, inputs: str = "[torch.randn(2, 3)]") -> str:
    """A script with one with-block whose body is `body` (4-space indented)."""
    indented = textwrap.indent(textwrap.dedent(body), "    ")
    return f"{HEADER}with FusionDefinition() as fd:\n{indented}\ninputs = {inputs}\nfd.execute(inputs)\n"


# -- the print_repro format --------------------------------------------------------------------
def test_print_repro_script_loads_with_its_definition_function_and_inputs():
    script = load_repro(PRINT_REPRO)
    ld = only(script)
    assert script.problems == [] and script.source == "<repro>"
    assert ld.name == "nvfuser_fusion_id6" and ld.lineno == 23
    ir = ld.fd.fusion_ir()
    assert "T0_g[ iS0{i0}, iS1{i1} ], __bfloat" in ir and "Welford" in ir
    assert [type(s) for s in ld.inputs] == [TensorSpec, TensorSpec, ScalarSpec]
    made, strided, scalar = ld.inputs
    assert (made.kind, made.shape, made.dtype, made.device) == ("make_tensor", (4, 8), DataType.BFloat16, "cuda:0")
    assert (strided.shape, strided.strides, strided.storage_size) == ((8,), (2,), 16)
    assert scalar == ScalarSpec(1.5)
    assert script.inputs is ld.inputs


def test_print_repro_script_runs_on_materialized_inputs():
    ld = only(load_repro(PRINT_REPRO))
    values = ld.materialize_inputs(seed=0)
    assert values[0].dtype == ml_dtypes.bfloat16 and element_strides(values[1]) == (2,)
    var, mean = ld.fd.execute(values)
    x = values[0].astype(np.float32) + values[1]
    np.testing.assert_allclose(mean, (x * 1.5).mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(var, (x * 1.5).var(axis=1), rtol=1e-4)


def test_load_from_a_path_string_and_a_pathlib_path(tmp_path):
    path = tmp_path / "repro_bug.py"
    path.write_text(PRINT_REPRO, encoding="utf-8")
    for arg in (str(path), path):
        script = load_repro(arg)
        assert script.source == str(path) and only(script).name == "nvfuser_fusion_id6"
    assert load_repro(PRINT_REPRO).text == PRINT_REPRO


def test_a_missing_path_object_is_a_fuser_error(tmp_path):
    with pytest.raises(FuserError, match="cannot read"):
        load_repro(tmp_path / "missing.py")


@pytest.mark.parametrize("module", ["nvfuser", "nvfuser_direct"])
def test_imports_from_nvfuser_and_nvfuser_direct(module):
    script = load(f"""\
        from {module} import FusionDefinition, DataType
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half)
            fd.add_output(fd.ops.cast(t, DataType.Float))
        """)
    assert "T0_g[ iS0{i0} ], __half" in only(script).fd.fusion_ir()


def test_import_nvfuser_module_attributes():
    script = load("""\
        import nvfuser
        with nvfuser.FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=nvfuser.DataType.Half)
            fd.add_output(fd.ops.cast(t, dtype=nvfuser.DataType.Float))
        """)
    assert only(script).fd.fusion.inputs[0].dtype == DataType.Half


def test_two_space_indentation():
    script = load_repro(
        "from nvfuser import FusionDefinition, DataType\n"
        "def f(fd):\n"
        "  t = fd.define_tensor(shape=[-1], contiguity=[True])\n"
        "  fd.add_output(fd.ops.exp(t))\n"
        "with FusionDefinition() as fd:\n"
        "  f(fd)\n"
    )
    assert only(script).name == "f" and "= expf(T0_g[ iS0{i0} ])" in only(script).fd.fusion_ir()


def test_pasted_with_markdown_fences_a_common_indent_and_windows_newlines():
    pasted = "```python\n" + textwrap.indent(PRINT_REPRO, "    ") + "```\n"
    script = load_repro(pasted.replace("\n", "\r\n"))
    assert only(script).name == "nvfuser_fusion_id6" and only(script).lineno == 24


# -- where definitions are ---------------------------------------------------------------------
def test_ops_written_directly_in_the_with_block():
    ld = only(
        load(simple("t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])\nfd.add_output(fd.ops.neg(t0))"))
    )
    assert ld.name == "fd" and ld.lineno == 3
    (out,) = run(ld)
    np.testing.assert_array_equal(out, -ld.materialize_inputs(0)[0])


def test_a_definition_naming_an_id_not_in_the_fusion_cache_is_refused_with_its_line():
    # nvFuser refuses to define into an id of its FusionCache; one that is not there is named.
    with pytest.raises(FuserError, match=r"<repro>:3: fusion id 3 is not in the FusionCache"):
        load(HEADER + "with FusionDefinition(id=3) as fd:\n    fd.add_output(fd.define_tensor([-1], [True]))\n")


def test_uncalled_pytest_test_function_with_a_with_block():
    script = load(
        HEADER,
        """
        def test_relu():
            inputs = [torch.randn(4, device="cuda")]
            with FusionDefinition() as fd:
                t = fd.define_tensor(shape=[-1], contiguity=[True])
                fd.add_output(fd.ops.relu(t))
            out = fd.execute(inputs)
            assert out[0].shape == (4,)
        """,
    )
    ld = only(script)
    assert ld.name == "test_relu" and ld.inputs[0].shape == (4,) and script.problems == []
    assert (run(ld)[0] >= 0).all()


def test_test_methods_of_a_test_class():
    script = load(
        HEADER,
        """
        class TestOps:
            def helper(self):
                raise RuntimeError("never run")

            def test_exp(self):
                with FusionDefinition() as fd:
                    t = fd.define_tensor(shape=[-1], contiguity=[True])
                    fd.add_output(fd.ops.exp(t))
                fd.execute([torch.zeros(3)])
                self.assertEqual(1, 2)
        """,
    )
    ld = only(script)
    assert ld.name == "TestOps.test_exp" and script.problems == []
    np.testing.assert_array_equal(run(ld)[0], np.ones(3, np.float32))


def test_nvfuser_test_suite_style_exec_nvfuser():
    script = load(
        HEADER,
        """
        class TestNvFuserFrontend:
            def test_add(self):
                inputs = [torch.randn(2, 4, device="cuda"), torch.randn(2, 4, device="cuda")]

                def fusion_func(fd: FusionDefinition):
                    t0 = fd.from_pytorch(inputs[0])
                    t1 = fd.from_pytorch(inputs[1])
                    fd.add_output(fd.ops.add(t0, t1))

                nvf_out, _ = self.exec_nvfuser(fusion_func, inputs)
                self.assertEqual(nvf_out[0], inputs[0] + inputs[1])
        """,
    )
    ld = only(script)
    assert ld.name == "TestNvFuserFrontend.test_add" and len(ld.inputs) == 2
    a, b = ld.materialize_inputs(0)
    np.testing.assert_allclose(ld.fd.execute([a, b])[0], a + b)


def test_code_under_if_name_main():
    script = load(
        HEADER,
        """
        def define(fd):
            fd.add_output(fd.ops.abs(fd.define_tensor(shape=[-1], contiguity=[True])))

        def main():
            with FusionDefinition() as fd:
                define(fd)
            fd.execute([torch.randn(5)])

        if __name__ == "__main__":
            main()
        """,
    )
    ld = only(script)
    assert ld.name == "define" and ld.inputs[0].shape == (5,)


def test_several_definitions_are_listed_in_order_with_their_own_inputs():
    script = load(
        HEADER,
        """
        def first(fd):
            fd.add_output(fd.ops.sin(fd.define_tensor(shape=[-1], contiguity=[True])))

        def second(fd):
            t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
            fd.add_output(fd.ops.sum(t, dims=[0]))

        with FusionDefinition() as fd:
            first(fd)
        inputs = [torch.randn(3)]
        fd.execute(inputs)

        with FusionDefinition() as fd:
            second(fd)
        inputs = [torch.randn(4, 5)]
        fd.execute(inputs)

        with FusionDefinition() as fd2:
            fd2.add_output(fd2.define_tensor([-1, -1], [True, True]))
        """,
    )
    names = [d.name for d in script.definitions]
    assert names == ["first", "second", "fd2"]
    assert [d.inputs[0].shape for d in script.definitions[:2]] == [(3,), (4, 5)]
    assert script.definitions[2].inputs[0].shape == (4, 5)  # the last `inputs` before it
    assert [run(d)[0].shape for d in script.definitions] == [(3,), (5,), (4, 5)]


def test_a_definition_function_pasted_alone_is_built():
    script = load(
        HEADER,
        """
        def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
            T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
            fd.add_output(fd.ops.sqrt(T0))
        """,
    )
    ld = only(script)
    assert (ld.name, ld.lineno, ld.inputs) == ("nvfuser_fusion_id0", 4, None)
    with pytest.raises(FuserError, match="no inputs for nvfuser_fusion_id0"):
        ld.materialize_inputs()


# -- fd calls ---------------------------------------------------------------------------------------
def test_keyword_and_positional_forms_of_fd_calls():
    ld = only(
        load(
            simple(
                """\
        t0 = fd.define_tensor([-1, -1], [True, True], DataType.Float)
        t1 = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)
        s0 = fd.define_scalar(2.0, DataType.Double)
        s1 = fd.define_scalar(value=3, dtype=DataType.Int)
        s2 = fd.define_scalar(None, dtype=DataType.Double)
        t2 = fd.ops.mul(fd.ops.add(t0, t1), s0)
        t3 = fd.ops.add(arg1=t2, arg2=s1)
        t4 = fd.ops.sum(t3, [1], False, DataType.Float)
        t5 = fd.ops.sum(t3, dims=[0], keepdim=True)
        fd.add_output(fd.ops.mul(t4, s2))
        fd.add_output(t5, stride_order=[0, 1])
        """,
                "[torch.randn(2, 3), torch.randn(1, 3), 0.5]",
            )
        )
    )
    x, y, s = ld.materialize_inputs(0)
    out4, out5 = ld.fd.execute([x, y, s])
    np.testing.assert_allclose(out4, ((x + y) * 2 + 3).sum(axis=1) * 0.5, rtol=1e-5)
    np.testing.assert_allclose(out5, ((x + y) * 2 + 3).sum(axis=0, keepdims=True), rtol=1e-5)


def test_unsupported_op_in_the_only_definition_raises_one_line_naming_op_and_line():
    with pytest.raises(FuserError) as info:
        load(
            simple("""\
            q = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
            out = fd.ops.scaled_mm(q, q, q)
            fd.add_output(out)
            """)
        )
    assert info.value.one_line() == "<repro>:5: scaled_mm: is not supported by fuser-workbench yet"
    assert "\n" not in info.value.one_line()


def test_unknown_op_is_a_fuser_error_naming_it():
    with pytest.raises(FuserError, match=r"fd\.ops has no op 'frobnicate'") as info:
        load(simple("t = fd.define_tensor([-1], [True])\nfd.add_output(fd.ops.frobnicate(t))"))
    assert info.value.location.lineno == 5


def test_a_misspelled_op_is_named_with_the_closest_one():
    with pytest.raises(FuserError, match=r"fd\.ops has no op 'rsqrtt': did you mean 'rsqrt'\?") as info:
        load(simple("t = fd.define_tensor([-1], [True])\nfd.add_output(fd.ops.rsqrtt(t))"))
    assert info.value.op == "rsqrtt" and info.value.location.lineno == 5


def test_wrong_arguments_to_an_op_become_a_fuser_error():
    with pytest.raises(FuserError, match="TypeError") as info:
        load(simple("t = fd.define_tensor([-1], [True])\nfd.add_output(fd.ops.add(t))"))
    assert info.value.op == "add" and info.value.location.lineno == 5


def test_tensor_sizes_and_var_mean_unpack():
    ld = only(
        load(
            simple("""\
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s0, s1 = fd.ops.tensor_sizes(t0)
        v, m = fd.ops.var_mean(t0, dims=[1], correction=1)
        t1 = fd.ops.broadcast_in_dim(m, shape=[s0, s1], broadcast_dims=[0])
        fd.add_output(fd.ops.sub(t0, t1))
        fd.add_output(v)
        """)
        )
    )
    (x,) = ld.materialize_inputs(0)
    centered, var = ld.fd.execute([x])
    np.testing.assert_allclose(centered, x - x.mean(axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(var, x.var(axis=1, ddof=1), rtol=1e-5)


def test_from_pytorch_uses_the_input_specs_layout():
    script = load(
        HEADER,
        """
        x = torch.randn(3, 4, device="cuda").t()
        with FusionDefinition() as fd:
            t0 = fd.from_pytorch(x)
            fd.add_output(fd.ops.mul(t0, 2.0))
        out = fd.execute([x])
        """,
    )
    ld = only(script)
    assert ld.inputs[0].strides == (1, 4)
    domain = ld.fd.fusion.inputs[0].domain
    assert domain.allocation == domain.logical[::-1] and domain.contiguity == [True, True]
    (x,) = ld.materialize_inputs(0)
    assert element_strides(x) == (1, 4)
    np.testing.assert_allclose(ld.fd.execute([x])[0], x * 2)


def test_python_literals_as_operands():
    ld = only(
        load(
            simple(
                """\
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        a = fd.ops.where(fd.ops.gt(t, 0.0), t, float("-inf"))
        b = fd.ops.add(1.0, fd.ops.maximum(a, float('inf') * -1))
        c = fd.ops.where(fd.ops.isnan(t), float("nan"), b)
        d = fd.ops.mul(c, -2)
        e = fd.ops.broadcast_in_dim(d, (2, 4), [1])
        fd.add_output(fd.ops.sum(e, dims=(0,)))
        """,
                "[torch.tensor([-1.0, 0.5, 2.0, -3.0])]",
            )
        )
    )
    np.testing.assert_array_equal(run(ld)[0], np.array([np.inf, -6.0, -12.0, np.inf], np.float32))


def test_datatype_attributes_and_torch_dtypes_in_definitions():
    ld = only(
        load(
            simple(
                """\
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half)
        fd.add_output(fd.ops.cast(t, dtype=torch.float32))
        """,
                "[torch.ones(3, dtype=torch.half)]",
            )
        )
    )
    assert ld.fd.fusion.outputs[0].dtype == DataType.Float
    assert run(ld)[0].dtype == np.float32


def test_unknown_datatype_member_is_refused():
    with pytest.raises(FuserError, match="DataType has no member 'Float4_e2m1fn'"):
        load(simple("fd.add_output(fd.define_tensor([-1], [True], DataType.Float4_e2m1fn))"))


def test_operator_overloading_on_tensors_and_scalars():
    ld = only(
        load(
            simple(
                """\
        T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        S0 = fd.define_scalar(None, dtype=DataType.Double)
        T2 = -(T0 + T1) * 2 - T0 / (S0 / 2)
        T3 = T0 > T1
        fd.add_output(T2)
        fd.add_output(T3)
        """,
                "[torch.randn(2, 3), torch.randn(2, 3), 4.0]",
            )
        )
    )
    x, y, s = ld.materialize_inputs(0)
    t2, t3 = ld.fd.execute([x, y, s])
    np.testing.assert_allclose(t2, -(x + y) * 2 - x / (s / 2), rtol=1e-6)
    np.testing.assert_array_equal(t3, x > y)


def test_unsupported_operator_on_tensors_is_refused():
    with pytest.raises(FuserError, match="`//` is not supported on fusion values"):
        load(simple("t = fd.define_tensor([-1], [True])\nfd.add_output(t // 2)"))


def test_subscripts_into_lists_tuples_and_vectors():
    ld = only(
        load(
            simple("""\
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        sizes = fd.ops.shape(t0)
        v = fd.define_vector([sizes[1], sizes[0]], dtype=DataType.Int)
        dims = (1, 0)
        t1 = fd.ops.permute(t0, dims=[dims[0], dims[-1]])
        t2 = fd.ops.reshape(t1, [v[0], v[1]])
        pair = [t2, t1]
        fd.add_output(pair[0])
        """)
        )
    )
    (x,) = ld.materialize_inputs(0)
    np.testing.assert_array_equal(ld.fd.execute([x])[0], x.T)


def test_local_variables_print_and_f_strings_are_ignorable_in_definitions():
    ld = only(
        load(
            simple(
                """\
        n = 2
        eps = 1e-5
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        print(f"defining {t} with eps={eps:.1e}", fd.ops.exp(t))
        label = f"n={n}"
        fd.add_output(fd.ops.add(t, eps * n))
        """,
                "[torch.randn(3)]",
            )
        )
    )
    assert "exp" not in ld.fd.fusion_ir()  # print's arguments were never evaluated
    (x,) = ld.materialize_inputs(0)
    np.testing.assert_allclose(ld.fd.execute([x])[0], x + 2e-5, rtol=1e-6)


def test_2023_frontend_keywords_as_in_old_bug_reports():
    ld = only(
        load(
            HEADER,
            """
        def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
            T0 = fd.define_tensor(symbolic_sizes=[-1, -1], contiguous=[True, True], dtype=DataType.Float, is_cpu=False)
            T1 = fd.ops.max(T0, axes=[1], keepdim=False, dtype=DataType.Null)
            T2 = fd.ops.broadcast_in_dim(T1, output_shape=[3, 1], broadcast_dims=[0])
            T3 = fd.ops.reshape(T2, original_shape=[3, 1], new_shape=[3])
            fd.add_output(T3)

        with FusionDefinition() as fd:
            nvfuser_fusion_id0(fd)

        # Generate similar inputs to reproduce:
        inputs = [
            torch.randn((3, 3), dtype=torch.float32, device='cuda:0').as_strided((3, 3), (3, 1)),
        ]
        """,
        )
    )
    (x,) = ld.materialize_inputs(0)
    np.testing.assert_array_equal(ld.fd.execute([x])[0], x.max(axis=1))


def test_execute_inside_the_with_block_fails_that_definition():
    with pytest.raises(FuserError, match="needs a complete definition"):
        load(simple("t = fd.define_tensor([-1], [True])\nfd.add_output(t)\nfd.execute([torch.randn(2)])"))


def test_a_loop_inside_a_definition_runs_every_iteration():
    ld = only(
        load(
            simple(
                """\
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        for _ in range(3):
            t = fd.ops.add(t, 1.0)
        fd.add_output(t)
        """,
                "[torch.zeros(4)]",
            )
        )
    )
    np.testing.assert_array_equal(run(ld)[0], np.full(4, 3.0, np.float32))


def test_return_inside_a_with_block_in_a_function_completes_the_definition():
    script = load(
        HEADER,
        """
        def build():
            with FusionDefinition() as fd:
                fd.add_output(fd.define_tensor([-1], [True]))
                return fd
        built = build()
        built.execute([torch.randn(3)])
        """,
    )
    assert only(script).name == "build" and only(script).inputs[0].shape == (3,)
    assert script.problems == []


def test_test_function_with_fixtures_is_loaded_until_a_fixture_is_used():
    script = load(
        HEADER,
        """
        def test_with_fixture(tmp_path, dtype=torch.float16):
            with FusionDefinition() as fd:
                t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half)
                fd.add_output(t)
            fd.execute([torch.randn(2, dtype=dtype)])
            fd.execute([tmp_path])
        """,
    )
    assert only(script).inputs[0].dtype == DataType.Half
    assert "pytest fixture" in script.problems[0].one_line()


def test_script_inputs_are_the_first_definitions():
    script = load_repro(PRINT_REPRO)
    assert script.inputs == script.definitions[0].inputs


def test_every_loaded_definition_runs_on_its_materialized_inputs():
    texts = [PRINT_REPRO, simple("fd.add_output(fd.ops.exp(fd.define_tensor([-1, -1], [True, True])))")]
    texts.append(
        HEADER
        + "x = torch.randn(8, 4).t()\n"
        + DEFINITION.replace("fd.define_tensor(shape=[-1, -1], contiguity=[True, True])", "fd.from_pytorch(x)")
        + "fd.execute([x, -2.0])\n"
    )
    shapes = []
    for text in texts:
        for ld in load_repro(text).definitions:
            outputs = ld.fd.execute(ld.materialize_inputs(seed=0))
            assert all(isinstance(o, np.ndarray) for o in outputs)
            shapes.append([o.shape for o in outputs])
    assert shapes == [[(4,), (4,)], [(2, 3)], [(4, 8)]]


def test_definitions_can_be_looked_up_by_name():
    script = load_repro(PRINT_REPRO)
    assert script.definition("nvfuser_fusion_id6") is script.definitions[0]
    with pytest.raises(FuserError, match="has no definition 'other'"):
        script.definition("other")
