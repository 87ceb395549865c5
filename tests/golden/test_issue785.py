"""The two fusions of nvFuser issue #785 (shared/seeds/nvfuser-issue785-segmented-ir-debug.txt)."""

import numpy as np

from fuser_core import DataType, FusionDefinition


def reduction_pow(fd: FusionDefinition) -> None:
    T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
    T8 = fd.ops.mul(S7, T6)  # noqa: F841 - dead in the seed too: it must not print
    S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
    T10 = fd.ops.pow(T6, S9)
    T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
    fd.add_output(T19)
    fd.add_output(T10)


def gelu_bias_bwd(fd: FusionDefinition) -> None:
    S0 = fd.define_scalar(None, dtype=DataType.Double)
    S1 = fd.define_scalar(None, dtype=DataType.Double)
    S2 = fd.define_scalar(None, dtype=DataType.Double)
    S3 = fd.define_scalar(None, dtype=DataType.Double)
    T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T5 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
    T8 = fd.ops.mul(S7, T6)
    S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
    T10 = fd.ops.pow(T6, S9)
    S11 = fd.define_scalar(0.0447150, dtype=DataType.Double)
    T12 = fd.ops.mul(S11, T10)
    T13 = fd.ops.add(T6, T12)
    S14 = fd.define_scalar(0.797885, dtype=DataType.Double)
    T15 = fd.ops.mul(S14, T13)
    T16 = fd.ops.tanh(T15)
    S17 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T18 = fd.ops.add(S17, T16)
    T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
    T20 = fd.ops.mul(T5, T18)
    T21 = fd.ops.mul(T5, T8)
    S22 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T23 = fd.ops.mul(S22, T21)
    T24 = fd.ops.mul(T16, T16)
    S25 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T26 = fd.ops.sub(S25, T24)
    T27 = fd.ops.mul(T23, T26)
    T28 = fd.ops.mul(T27, S3)
    S29 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T30 = fd.ops.mul(S29, T28)
    T31 = fd.ops.mul(T30, S2)
    T32 = fd.ops.mul(T31, S1)
    S33 = fd.define_scalar(2.00000, dtype=DataType.Double)
    T34 = fd.ops.pow(T6, S33)
    T35 = fd.ops.mul(T32, T34)
    T36 = fd.ops.add(T30, T35)
    T37 = fd.ops.mul(T20, S0)
    T38 = fd.ops.add(T36, T37)
    fd.add_output(T19)
    fd.add_output(T38)


def test_reduction_pow_prints_the_seed_presched_ir_exactly(golden):
    with FusionDefinition() as fd:
        reduction_pow(fd)
    assert fd.fusion_ir() == golden("issue785_reduction_pow.presched.txt")


def test_reduction_pow_runs_on_the_reference():
    with FusionDefinition() as fd:
        reduction_pow(fd)
    rng = np.random.default_rng(785)
    a, b = (rng.standard_normal((4, 8, 16), dtype=np.float32) for _ in range(2))
    total, cube = fd.execute([a, b])
    np.testing.assert_allclose(total, a.sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cube, b**3, rtol=1e-6)
    assert total.dtype == np.float32 and cube.dtype == np.float32


def test_gelu_bias_bwd_prints_every_op_and_matches_its_formula():
    with FusionDefinition() as fd:
        gelu_bias_bwd(fd)
    text = fd.fusion_ir()
    # Scalars share one counter with constants: d0..d3, the extents i4..i6, the shared 0 (7), i8..
    assert text.startswith("Inputs:\n  d0, double\n  d1, double\n  d2, double\n  d3, double\n  T0_g[ iS0{i4},")
    assert text.count("= tanhf(") == 1 and text.count("= reduction(") == 1
    assert "   = pow(T2_g[ iS6{i11}, iS7{i12}, iS8{i13} ]\n  , double(3));" in text
    assert "double(0.044714999999999998)" in text  # constants print at max_digits10

    rng = np.random.default_rng(6)
    s = [1.0, 2.0, 3.0, 4.0]
    t4, t5, t6 = (rng.standard_normal((4, 8, 32)).astype(np.float32) for _ in range(3))
    bias_grad, grad = fd.execute([*s, t4, t5, t6])

    x = t6.astype(np.float64)
    inner = 0.797885 * (x + 0.044715 * x**3)
    tanh = np.tanh(inner)
    t30 = t5 * (0.5 * x) * (1 - tanh * tanh) * s[3]
    expected = t30 + t30 * s[2] * s[1] * x**2 + t5 * (1 + tanh) * s[0]
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bias_grad, t4.sum(axis=(0, 1)), rtol=1e-5, atol=1e-4)
