"""The fuzzer's comparison with torch: a compiler may sum in its own order, so a Half sum
may round to the neighbour of torch's; where an op after it is discontinuous (fmod) or
cancels it (x - mean, summed), the answer legitimately moves by far more than the
dtype's tolerance. The nudged torch runs give exactly those elements room, and nothing
else: a wrong answer still fails. Needs torch (skips without it, as on CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from fuzzlib.build import build, make_inputs  # noqa: E402
from fuzzlib.cases import loose  # noqa: E402
from fuzzlib.program import Op, Output, Program, Ref, TensorIn, computed_precision  # noqa: E402
from fuzzlib.torch_ref import TorchEval, compare, nudge_patterns, to_numpy, to_torch  # noqa: E402


def _program(ops: list[Op], out: int, shape: tuple[int, ...], dtype: str) -> Program:
    rank = len(shape)
    inp = TensorIn(1, shape, dtype, (False,) * rank, tuple(range(rank)), (False,) * rank, 0)
    program = Program(0, 0, [inp], ops, [Output(out)])
    build(program)  # records every value's dtype
    return program


def _judge(program: Program, got: np.ndarray) -> str | None:
    inputs = [to_torch(torch, h, "cpu") for h in make_inputs(program)]
    want = TorchEval(torch, program).run(inputs)[0]
    wide = TorchEval(torch, program, wide=True).run(inputs)[0]
    nudged = [TorchEval(torch, program, nudge=p).run(inputs)[0] for p in nudge_patterns(program)]
    out = program.outputs[0].vid
    return compare(
        got,
        to_numpy(torch, want),
        to_numpy(torch, wide),
        program.dtypes[out],
        loose(program),
        computed_precision(program, out),
        [to_numpy(torch, n) for n in nudged],
    )


def _fmod_of_half_sum() -> Program:
    ops = [
        Op("sum", (Ref(1),), {"dims": [0], "keepdim": True}, (2,)),
        Op("fmod", (Ref(2), Ref(1)), {}, (3,)),
    ]
    return _program(ops, 3, (64, 16), "Half")


def _fmod_of(program: Program, sums: np.ndarray) -> np.ndarray:
    x = to_numpy(torch, to_torch(torch, make_inputs(program)[0], "cpu")).astype(np.float32)
    rounded = sums.astype(np.float16).astype(np.float32)
    return np.fmod(np.broadcast_to(rounded, x.shape), x).astype(np.float64)


def test_a_half_sum_rounded_to_its_neighbour_passes_through_fmod():
    program = _fmod_of_half_sum()
    x = to_numpy(torch, to_torch(torch, make_inputs(program)[0], "cpu")).astype(np.float64)
    exact = x.sum(axis=0, keepdims=True)
    # every sum one Half step away from torch's: what a compiler summing in another
    # order may store where the float sum lies near a rounding midpoint
    neighbour = np.nextafter(exact.astype(np.float16), np.float16(np.inf))
    assert _judge(program, _fmod_of(program, neighbour.astype(np.float64))) is None


def test_a_wrong_fmod_of_a_half_sum_still_fails():
    program = _fmod_of_half_sum()
    x = to_numpy(torch, to_torch(torch, make_inputs(program)[0], "cpu")).astype(np.float64)
    # the sum over the wrong axis: the values a broken reduction would give
    wrong = np.resize(x.sum(axis=1), (1, x.shape[1]))
    problem = _judge(program, _fmod_of(program, wrong))
    assert problem is not None and "elements differ" in problem


def test_a_sum_of_deviations_from_the_mean_is_judged_by_its_terms():
    ops = [
        Op("var_mean", (Ref(1),), {"dims": [1], "correction": 0, "keepdim": True}, (2, 3)),
        Op("sub", (Ref(1), Ref(3)), {}, (4,)),
        Op("sum", (Ref(4),), {"dims": [1], "keepdim": False}, (5,)),
    ]
    program = _program(ops, 5, (16, 127), "Float")
    x = to_numpy(torch, to_torch(torch, make_inputs(program)[0], "cpu")).astype(np.float32)
    # float32 in another order: the mean by pairwise halves, the deviations summed backwards
    mean = (x[:, :64].sum(axis=1) + x[:, 64:].sum(axis=1)) / np.float32(127)
    got = (x - mean[:, None])[:, ::-1].cumsum(axis=1, dtype=np.float32)[:, -1]
    assert _judge(program, got.astype(np.float64)) is None
    # an answer off by one term's size is not rounding
    assert _judge(program, got.astype(np.float64) + 1.0) is not None


def test_a_reduction_free_program_is_not_nudged():
    program = _program([Op("exp", (Ref(1),), {}, (2,))], 2, (8, 8), "Float")
    assert nudge_patterns(program) == []
