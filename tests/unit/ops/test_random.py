"""Random ops: the Philox4x32-10 generator against its published test vectors, the
values nvFuser's formulas give, their distributions (mean, variance, KS), dropout
reproducibility with a seed, and a fresh seed per execution without one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ir.rng import philox4x32_10, philox_words
from fuser_core.runtime.reference import evaluate_fusion

from ._helpers import as_float64

FLOAT_TYPES = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)

# Random123's known-answer vectors for philox4x32 with 10 rounds (kat_vectors).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox_known_answers(counter: tuple[int, ...], key: tuple[int, ...], expected: tuple[int, ...]) -> None:
    assert [int(v) for v in philox4x32_10(counter, key)] == list(expected)


def test_philox_vectorized_equals_one_at_a_time() -> None:
    counters = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0xFFFFFFFF, 0, 1]], dtype=np.uint64)
    block = philox4x32_10(counters, (11, 12))
    for i in range(3):
        assert list(block[:, i]) == list(philox4x32_10(counters[:, i], (11, 12)))


def test_seed_offset_and_index_are_placed_as_nvfuser_does() -> None:
    """key = (seed lo, seed hi); counter = (offset lo, offset hi, index / 4 lo, hi)."""
    seed, offset = 0x123456789ABCDEF0, 0x0000000500000007
    words, comp = philox_words(seed, offset, 9, 4)
    for index in (0, 3, 4, 8):
        expected = philox4x32_10((7, 5, index // 4, 0), (0x9ABCDEF0, 0x12345678))
        assert list(words[:, index]) == list(expected)
        assert comp[index] == index % 4


def _uniform_float_from_word(word: int) -> float:
    scale = np.float32(2.0**-32)
    value = np.float32(word) * scale + np.float32(0.5) * scale
    return 0.0 if value == 1.0 else float(value)


def _dropout_fd(p: float) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1])
        seed = fd.define_scalar(None, dtype=DataType.Int)
        r = fd.ops.rand_like(x, rng_seed=seed, rng_offset=3)
        keep = fd.ops.lt(r, 1 - p)
        fd.add_output(fd.ops.where(keep, fd.ops.mul(x, 1 / (1 - p)), 0.0))
        fd.add_output(r)
    return fd


def test_dropout_with_a_seed_is_exact_and_reproducible() -> None:
    x = np.random.default_rng(1).uniform(1, 2, (5, 7)).astype(np.float32)
    fd = _dropout_fd(0.25)
    out, rand = fd.execute([x, 2024])
    again, rand_again = fd.execute([x, 2024])
    np.testing.assert_array_equal(out, again)
    np.testing.assert_array_equal(rand, rand_again)
    words, _ = philox_words(2024, 3, x.size, 4)
    expected_rand = [_uniform_float_from_word(int(words[i % 4, i])) for i in range(x.size)]
    np.testing.assert_array_equal(rand.reshape(-1), np.array(expected_rand, dtype=np.float32))
    keep = rand < np.float32(0.75)
    np.testing.assert_allclose(out, np.where(keep, x * np.float32(1 / 0.75), 0), rtol=1e-6)
    assert 0 < keep.sum() < keep.size
    other, _ = fd.execute([x, 2025])
    assert not np.array_equal(other, out)


def _ks_statistic(sample: np.ndarray, cdf: np.ndarray) -> float:
    n = sample.size
    order = np.argsort(sample)
    c = cdf[order]
    ranks = np.arange(1, n + 1)
    return float(max(np.max(ranks / n - c), np.max(c - (ranks - 1) / n)))


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=lambda d: d.name)
def test_uniform_distribution(dtype: DataType) -> None:
    n = 20001
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(-2.0, 3.0, [n], rng_seed=7, rng_offset=0, dtype=dtype))
    (out,) = fd.execute([])
    assert out.dtype == dtype.numpy and out.shape == (n,)
    v = as_float64(out)
    assert v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.05  # sd of the mean is 5 / sqrt(12 n) = 0.01
    assert abs(v.var() - 25 / 12) < 0.1
    ks = _ks_statistic(v, (v + 2.0) / 5.0)
    # 1.63 / sqrt(n) is the 1% critical value; narrow types add their rounding step.
    assert ks < 1.63 / math.sqrt(n) + (0.02 if dtype in (DataType.Half, DataType.BFloat16) else 0)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=lambda d: d.name)
def test_normal_distribution(dtype: DataType) -> None:
    n = 20001
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.normal(1.5, 2.0, [n], rng_seed=11, rng_offset=5, dtype=dtype))
    (out,) = fd.execute([])
    v = as_float64(out)
    assert np.isfinite(v).all()
    assert abs(v.mean() - 1.5) < 0.07  # sd of the mean: 2 / sqrt(n) = 0.014
    assert abs(v.std() - 2.0) < 0.06
    z = (v - 1.5) / 2.0
    cdf = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    assert _ks_statistic(v, cdf) < 1.63 / math.sqrt(n) + (0.01 if dtype == DataType.BFloat16 else 0)


def test_randn_like_double_uses_four_words_per_pair() -> None:
    """A Double normal: u from words 0-1, v from words 2-3; sin for even indices, cos for odd."""
    x = np.zeros((3, 3), dtype=np.float64) + 1.0
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.Double)
        fd.add_output(fd.ops.randn_like(t, rng_seed=99, rng_offset=1))
    (out,) = fd.execute([x])
    words, _ = philox_words(99, 1, 9, 2)
    for i in range(9):
        w = [int(v) for v in words[:, i]]
        u = ((w[0] ^ (w[1] << 21)) + 0.5) * 2.0**-53
        v = ((w[2] ^ (w[3] << 21)) + 0.5) * 2.0**-53 * 6.2831853071795860
        trig = math.sin(v) if i % 2 == 0 else math.cos(v)
        assert out.reshape(-1)[i] == pytest.approx(math.sqrt(-2 * math.log(u)) * trig, rel=1e-14)


def test_two_unseeded_ops_differ_and_each_run_draws_a_fresh_seed() -> None:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1])
        fd.add_output(fd.ops.rand_like(x))
        fd.add_output(fd.ops.rand_like(x))
    x = np.ones(64, np.float32)
    a1, b1 = fd.execute([x])
    a2, _ = fd.execute([x])
    assert not np.array_equal(a1, b1)  # offsets 0 and 1 of one seed
    assert not np.array_equal(a1, a2)  # a new seed per execution
    assert "rng_uniform({i0}, float);" in fd.fusion_ir()


def test_an_unseeded_run_records_its_seed_and_replays() -> None:
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.normal(0.0, 1.0, [17]))
    ev = ExpressionEvaluator()
    (first,) = evaluate_fusion(fd.fusion, ev)
    assert ev.rng_seed is not None
    replay = ExpressionEvaluator()
    seed_val = next(e for e in fd.fusion.exprs()).seed  # type: ignore[attr-defined]
    replay.bind(seed_val, ev.rng_seed)
    (second,) = evaluate_fusion(fd.fusion, replay)
    np.testing.assert_array_equal(first, second)
    assert replay.rng_seed is None  # nothing was drawn: the bound seed was used


def test_the_run_report_records_each_executions_seed_and_it_replays_the_run() -> None:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1])
        fd.add_output(fd.ops.rand_like(x))
        fd.add_output(fd.ops.randn_like(x))
    x = np.ones(33, np.float32)
    first = fd.execute([x])
    second = fd.execute([x])
    reports = fd.executor_cache.reports  # type: ignore[union-attr]
    seeds = [r.rng_seed for r in reports]
    assert all(isinstance(s, int) for s in seeds) and seeds[0] != seeds[1]
    for outputs, seed in zip((first, second), seeds, strict=True):
        with FusionDefinition() as replay:
            y = replay.define_tensor([-1])
            replay.add_output(replay.ops.rand_like(y, rng_seed=seed, rng_offset=0))
            replay.add_output(replay.ops.randn_like(y, rng_seed=seed, rng_offset=1))
        for got, expected in zip(replay.execute([x]), outputs, strict=True):
            np.testing.assert_array_equal(got, expected)
        assert replay.executor_cache.reports[-1].rng_seed is None  # type: ignore[union-attr]  # seeded: none drawn


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=lambda d: d.name)
def test_odd_and_empty_shapes(dtype: DataType) -> None:
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(0.0, 1.0, [3, 7], rng_seed=1, rng_offset=0, dtype=dtype))
        fd.add_output(fd.ops.normal(0.0, 1.0, [0, 5], rng_seed=1, rng_offset=0, dtype=dtype))
    odd, empty = fd.execute([])
    assert odd.shape == (3, 7) and empty.shape == (0, 5)
    assert len(np.unique(as_float64(odd))) > 15


def test_printing_follows_nvfuser() -> None:
    with FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.uniform(0.0, 2.0, [4, 6], rng_seed=s, rng_offset=0))
    assert "   = rng_uniform_range({4, 6}, float(0), float(2), float, i0);\n" in fd.fusion_ir()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda fd, t: fd.ops.rand_like(t, rng_seed=1), "together"),
        (lambda fd, t: fd.ops.uniform(0.0, 1.0, [3], dtype=DataType.Int), "only made in"),
        (lambda fd, t: fd.ops.rand_like(fd.ops.cast(t, DataType.Int)), "only made in"),
        (lambda fd, t: fd.ops.normal(0.0, 1.0, [3], rng_seed=1.5, rng_offset=0), "rng_seed must be an integer"),
        (lambda fd, t: fd.ops.uniform(t, 1.0, [3]), "expected a scalar"),
    ],
)
def test_definition_errors(call: object, message: str) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        call(fd, t)  # type: ignore[operator]
    assert message in str(info.value)
    assert info.value.op in ("rand_like", "uniform", "normal")


class _FakeGenerator:
    """torch's CUDA generator as nvFuser reads it: a seed and an offset in words."""

    def __init__(self, seed: int) -> None:
        self.seed, self.offset = seed, 0

    def initial_seed(self) -> int:
        return self.seed

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, offset: int) -> None:
        self.offset = offset


def test_unseeded_runs_take_torchs_generator_state_as_nvfuser_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """After `torch.manual_seed(s)`, the k-th execution of a fusion with n unseeded ops
    draws what `rng_seed=s, rng_offset=k*n + i` draws for its op i (nvFuser's note
    "divide offset by 4"), and the generator's offset moves by 4 per op."""
    import sys
    import types

    from fuser_core.frontend.execution import torch_philox_state
    from fuser_core.ir.rng import seeds_from

    generator = _FakeGenerator(seed=987654321)
    cuda = types.SimpleNamespace(
        is_available=lambda: True, initial_seed=lambda: 0, current_device=lambda: 0, default_generators=[generator]
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    with FusionDefinition() as stateful:
        stateful.add_output(stateful.ops.uniform(0.0, 1.0, [6, 5]))
        stateful.add_output(stateful.ops.normal(0.0, 1.0, [7]))
    with FusionDefinition() as seeded:
        seed, offset = seeded.define_scalar(DataType.Int), seeded.define_scalar(DataType.Int)
        one = seeded.define_scalar(1, DataType.Int)
        seeded.add_output(seeded.ops.uniform(0.0, 1.0, [6, 5], rng_seed=seed, rng_offset=offset))
        seeded.add_output(seeded.ops.normal(0.0, 1.0, [7], rng_seed=seed, rng_offset=seeded.ops.add(offset, one)))
    with seeds_from(torch_philox_state):
        runs = [stateful.execute([]) for _ in range(3)]
    assert generator.offset == 3 * 2 * 4
    for k, (uniform, normal) in enumerate(runs):
        want_uniform, want_normal = seeded.execute([generator.seed, 2 * k])
        np.testing.assert_array_equal(uniform, want_uniform)
        np.testing.assert_array_equal(normal, want_normal)
    assert not np.array_equal(runs[0][0], runs[1][0])
