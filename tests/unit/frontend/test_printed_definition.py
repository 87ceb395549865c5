"""repr(fd) is nvFuser's printed definition, and it is faithful: executing the printed
text rebuilds the same fusion (the same printed IR, the same repr) for every bundled
sample and for random fusions. `repro_script_for` and `execute(print_repro=True)` print
a self-contained script that rebuilds the fusion and runs it."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition, load_repro
from fuser_core.frontend import execution
from fuser_core.frontend.fusion_cache import FusionCache

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from test_random_fusions import _build, fusions  # noqa: E402

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "sample_fusions"
SAMPLES = sorted(SAMPLES_DIR.glob("*.py"))


def rebuild(text: str, fusion_id: int | None) -> FusionDefinition:
    """Execute a printed definition, as a user pasting it does, into a new definition."""
    namespace: dict[str, Any] = {"FusionDefinition": FusionDefinition, "DataType": DataType}
    exec(text, namespace)
    with FusionDefinition() as fd:
        namespace[f"nvfuser_fusion_id{fusion_id}"](fd)
    return fd


def assert_round_trip(fd: FusionDefinition) -> None:
    """The printed text, executed in a fresh cache, builds a fusion with the same IR and
    the same printed text (under id 0), and in the same cache finds the same id."""
    text, ir, fusion_id = repr(fd), fd.fusion_ir(), fd.id()
    assert rebuild(text, fusion_id).id() == fusion_id
    FusionCache.reset()
    again = rebuild(text, fusion_id)
    assert again.fusion is not fd.fusion
    assert again.fusion_ir() == ir
    assert repr(again) == text.replace(f"nvfuser_fusion_id{fusion_id}(", "nvfuser_fusion_id0(")


def softmax_like() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
        t1 = fd.ops.cast(t0, dtype=DataType.Float)
        t2 = fd.ops.max(t1, dims=[1], keepdim=True)
        t3 = fd.ops.exp(fd.ops.sub(t1, t2))
        fd.add_output(fd.ops.cast(t3, dtype=DataType.Half))
    return fd


def many_argument_kinds() -> FusionDefinition:
    """Every kind of printed argument: symbolic and constant scalars (inf included), a
    vector input, unpacked multiple results, lists of scalars, output stride orders."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        t1 = fd.define_tensor(shape=[1, -1], contiguity=[None, True])
        s = fd.define_scalar(None, dtype=DataType.Double)
        v = fd.define_vector(2)
        c = fd.ops.cast(t0, DataType.Float)
        a, b = fd.ops.tensor_sizes(c)
        r = fd.ops.reshape(c, v)
        m = fd.ops.add(c, fd.ops.broadcast_in_dim(t1, shape=[a, b], broadcast_dims=[0, 1]))
        m = fd.ops.mul(fd.ops.minimum(m, fd.define_scalar(float("inf"))), s)
        var, mean = fd.ops.var_mean(m, dims=[1], correction=0, keepdim=False)
        sl = fd.ops.slice(m, start_indices=[0, 1], end_indices=[a, b], strides=[1, 1])
        fd.add_output(var)
        fd.add_output(mean)
        fd.add_output(fd.ops.pad(sl, [1, 0], fd.define_scalar(-0.5)))
        fd.add_output(r, stride_order=[0, 1])
    return fd


MANY_KINDS_TEXT = """
def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.Float, is_cpu=False, stride_order=[1, 0])
    S2 = fd.define_scalar(None, dtype=DataType.Double)
    V3 = fd.define_vector(2)
    T4 = fd.ops.cast(T0, dtype=DataType.Float)
    S5, S6 = fd.ops.tensor_sizes(T4)
    T7 = fd.ops.reshape(T4, new_shape=V3)
    T8 = fd.ops.broadcast_in_dim(T1, shape=[S5, S6], broadcast_dims=[0, 1])
    T9 = fd.ops.add(T4, T8)
    S10 = fd.define_scalar(float("inf"), dtype=DataType.Double)
    T11 = fd.ops.minimum(T9, S10)
    T12 = fd.ops.mul(T11, S2)
    T13, T14 = fd.ops.var_mean(T12, dims=[1], correction=0, keepdim=False)
    T15 = fd.ops.slice(T12, start_indices=[0, 1], end_indices=[S5, S6], strides=[1, 1])
    fd.add_output(T13)
    fd.add_output(T14)
    S16 = fd.define_scalar(-0.5, dtype=DataType.Double)
    T17 = fd.ops.pad(T15, pad_widths=[1, 0], value=S16)
    fd.add_output(T17)
    fd.add_output(T7, stride_order=[0, 1])
"""  # noqa: E501


# -- the printed format ------------------------------------------------------------------------
def test_repr_and_str_print_nvfusers_definition_with_the_real_id():
    for factor in (2.0, 3.0):
        with FusionDefinition() as filler:
            filler.add_output(fd_mul(filler, factor))
    fd = softmax_like()
    assert fd.id() == 2
    expected = (
        "\ndef nvfuser_fusion_id2(fd : FusionDefinition) -> None :\n"
        "    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half, is_cpu=False, "
        "stride_order=[1, 0])\n"
        "    T1 = fd.ops.cast(T0, dtype=DataType.Float)\n"
        "    T2 = fd.ops.max(T1, dims=[1], keepdim=True, dtype=DataType.Null)\n"
        "    T3 = fd.ops.sub(T1, T2)\n"
        "    T4 = fd.ops.exp(T3)\n"
        "    T5 = fd.ops.cast(T4, dtype=DataType.Half)\n"
        "    fd.add_output(T5)\n"
    )
    assert repr(fd) == expected
    assert str(fd) == expected


def fd_mul(fd: FusionDefinition, factor: float):
    t = fd.define_tensor(shape=[-1], contiguity=[True])
    return fd.ops.mul(t, fd.define_scalar(factor))


def test_every_kind_of_argument_prints_as_python_that_rebuilds_it():
    fd = many_argument_kinds()
    assert repr(fd) == MANY_KINDS_TEXT
    assert_round_trip(fd)


def test_an_aliased_output_prints_its_input_and_round_trips():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        t1 = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(fd.ops.add(t0, t1), alias_input=t0)
        fd.add_output(fd.ops.mul(t0, t1))
    assert repr(fd).splitlines()[-3:] == [
        "    fd.add_output(T2, T0)",
        "    T3 = fd.ops.mul(T0, T1)",
        "    fd.add_output(T3)",
    ]
    assert_round_trip(fd)


def test_a_definition_in_progress_prints_as_incomplete():
    with FusionDefinition() as fd:
        fd.define_tensor(shape=[-1], contiguity=[True])
        assert repr(fd).startswith("\ndef nvfuser_incomplete_fusion(fd : FusionDefinition) -> None :\n")
        fd.add_output(fd.ops.abs(fd.define_tensor(shape=[-1], contiguity=[True])))
    assert repr(fd).startswith("\ndef nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n    T0 = ")


def test_a_symbolic_scalar_prints_none_as_its_value_as_nvfuser_does():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(fd.ops.mul(t0, fd.define_scalar(None, dtype=DataType.Double)))
    assert "    S1 = fd.define_scalar(None, dtype=DataType.Double)\n" in repr(fd)


# -- round trips ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_sample_round_trips_through_its_printed_definition(path):
    script = load_repro(path)
    assert script.definitions, f"{path.name} has no definition"
    for loaded in script.definitions:
        assert_round_trip(loaded.fd)


def test_the_samples_are_found():
    assert len(SAMPLES) >= 17


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fusions())
def test_random_fusions_round_trip_through_their_printed_definition(case):
    FusionCache.reset()
    fd = _build(*case)
    assert fd.id() == 0
    assert_round_trip(fd)


# -- repro scripts -------------------------------------------------------------------------------
@pytest.fixture
def nvfuser_module(monkeypatch):
    """`import nvfuser` resolves to fuser_core for this test only (compat's modules, its
    torch-by-default flag undone afterwards)."""
    from fuser_core.compat.nvfuser_api import build_modules

    for name, module in build_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    yield
    execution.return_torch_by_default(False)


def test_the_repro_of_numpy_inputs_names_cuda_tensors_and_loads_with_the_same_fusion():
    fd = softmax_like()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(np.float16)
    text = fd.repro_script_for([x])
    assert text.startswith(
        "# fuser-workbench repro: runs under nvFuser or `python -m fuser_core.compat`\n"
        "import torch\nfrom nvfuser import FusionDefinition, DataType\n"
    )
    assert repr(fd).strip("\n") in text
    assert text.endswith(
        "with FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n\ninputs = [\n"
        "    torch.testing.make_tensor((4, 6), dtype=torch.float16, device='cuda:0'),\n"
        "]\nfd.execute(inputs)\n"
    )
    loaded = load_repro(text)
    assert not loaded.problems
    (definition,) = loaded.definitions
    assert definition.fd.fusion_ir() == fd.fusion_ir() and definition.fd.id() == fd.id()
    inputs = definition.materialize_inputs(seed=1)
    assert [(i.shape, i.dtype) for i in inputs] == [((4, 6), np.float16)]
    np.testing.assert_array_equal(definition.fd.execute(inputs)[0], fd.execute(inputs)[0])


def test_the_repro_of_scalar_and_vector_inputs_writes_them_as_python_values():
    fd = many_argument_kinds()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(DataType.BFloat16.numpy)
    y = rng.standard_normal((1, 6)).astype(np.float32)
    text = fd.repro_script_for([x, y, 1.5, [6, 4]])
    assert text.endswith(
        "inputs = [\n"
        "    torch.testing.make_tensor((4, 6), dtype=torch.bfloat16, device='cuda:0'),\n"
        "    torch.testing.make_tensor((1, 6), dtype=torch.float32, device='cuda:0'),\n"
        "    1.5,\n    [6, 4],\n]\nfd.execute(inputs)\n"
    )


def test_a_repro_with_a_vector_input_loads():
    fd = many_argument_kinds()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(DataType.BFloat16.numpy)
    y = rng.standard_normal((1, 6)).astype(np.float32)
    loaded = load_repro(fd.repro_script_for([x, y, 1.5, [6, 4]]))
    assert not loaded.problems
    (definition,) = loaded.definitions
    assert definition.fd.fusion_ir() == fd.fusion_ir()
    outs = definition.fd.execute(definition.materialize_inputs(seed=1))
    assert [np.shape(o) for o in outs] == [(4,), (4,), (4, 6), (6, 4)]


def test_a_strided_input_is_written_as_strided_and_options_go_to_execute():
    fd = softmax_like()
    base = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float16)
    text = fd.repro_script_for([base.T], enable=["kernel_profile"], disable=["vectorization"])
    assert "torch.testing.make_tensor((24,), dtype=torch.float16, device='cuda:0').as_strided((4, 6), (1, 4))," in text
    assert text.endswith("fd.execute(inputs, _enable_options=['kernel_profile'], _disable_options=['vectorization'])\n")


def test_a_repro_without_inputs_is_the_definition_and_its_with_block():
    fd = softmax_like()
    text = fd.repro_script_for()
    assert text.endswith("with FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n")
    assert "inputs" not in text


def test_an_input_the_repro_cannot_write_is_a_fuser_error():
    fd = softmax_like()
    with pytest.raises(FuserError, match="cannot write an input of type object into a repro"):
        fd.repro_script_for([object()])


def test_running_the_printed_repro_rebuilds_the_same_fusion_and_runs_it(nvfuser_module):
    torch = pytest.importorskip("torch")
    fd = softmax_like()
    x = torch.randn(5, 7).half()
    expected = torch.exp(x.float() - x.float().max(1, keepdim=True).values)
    out = fd.execute([x])[0]
    torch.testing.assert_close(out.float(), expected, rtol=2e-3, atol=2e-3)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        again = fd.execute([x], print_repro=True)[0]
    assert torch.equal(again, out)
    text = fd.repro_script_for([x])
    assert printed.getvalue() == text + "\n"
    assert "torch.testing.make_tensor((5, 7), dtype=torch.float16, device='cpu')," in text

    namespace: dict[str, Any] = {}
    exec(text, namespace)
    rebuilt = namespace["fd"]
    assert rebuilt.id() == fd.id() and repr(rebuilt) == repr(fd)
    # the repro's run found the runtime compiled for these inputs: a cache hit
    events = rebuilt.executor_cache.events
    assert [e.hit for e in events] == [False, True, True]

    FusionCache.reset()  # in a fresh process the repro builds and compiles its own
    namespace = {}
    exec(text, namespace)
    fresh = namespace["fd"]
    assert fresh.fusion_ir() == fd.fusion_ir()
    assert [e.hit for e in fresh.executor_cache.events] == [False]
    y = torch.randn(5, 7).half()
    torch.testing.assert_close(fresh.execute([y])[0], fd.execute([y])[0])
