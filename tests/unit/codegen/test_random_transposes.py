"""Random transposes (hypothesis), each generated kernel run on the kernel-IR interpreter
against the reference: ranks 2 to 4, two transposed axes of 32 to 100 elements (partial
tiles, odd extents, every vector width), the other axes short and in random memory
orders per input, float32 / bf16 / fp16 inputs, a third input in a random layout or
broadcast, outputs in the reference's layout, the staged input's, or their own; the
64-wide tiles too (their threshold of tiles per SM lowered so the interpreter can run
them). The sample fuzzers rarely build a transpose: this one always asks for one."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuser_core import DataType, FusionDefinition, use_options  # noqa: E402
from fuser_core.scheduler import transpose  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels  # noqa: E402

EXTENTS = [32, 33, 36, 38, 40, 48, 63, 64, 65, 72, 100]
DTYPES = [DataType.Float, DataType.BFloat16, DataType.Half]
UNARY = [None, "relu", "neg", "exp", "abs"]
BINARY = ["add", "mul", "sub", "maximum"]


@st.composite
def transposes(draw):
    rank = draw(st.sampled_from([2, 3, 4, 4]))  # rank 4: two outer axes, in either order
    shape = [draw(st.sampled_from([1, 2, 3, 5, 5])) for _ in range(rank)]
    a, b = draw(st.permutations(range(rank)))[:2]
    large = draw(st.booleans())  # 64-wide tiles: both transposed extents at least 64
    extents = [e for e in EXTENTS if e >= transpose.LARGE_TILE] if large else EXTENTS
    shape[a], shape[b] = draw(st.sampled_from(extents)), draw(st.sampled_from(extents))
    # memory orders, outermost first: x runs along a, y along b, z anywhere or broadcast
    orders = []
    for inner in (a, b, draw(st.integers(0, rank - 1))):
        others = draw(st.permutations([d for d in range(rank) if d != inner]))
        orders.append([*others, inner])
    z_kind = draw(st.sampled_from(["none", "full", "broadcast"]))
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in range(3)]
    unary = [draw(st.sampled_from(UNARY)) for _ in range(3)]
    binary = [draw(st.sampled_from(BINARY)) for _ in range(2)]
    outputs = draw(st.lists(st.sampled_from(["x_layout", "y_layout", "default"]), min_size=1, max_size=3))
    return rank, shape, a, b, orders, z_kind, dtypes, unary, binary, outputs, large


def _stride_order(order: list[int]) -> list[int]:
    """nvFuser's stride_order of a memory order given outermost first (0: innermost)."""
    rank = len(order)
    result = [0] * rank
    for pos, axis in enumerate(order):
        result[axis] = rank - 1 - pos
    return result


def _laid_out(rng, shape, order, dtype):
    base = (rng.standard_normal([shape[d] for d in order]) + 0.25).astype(dtype.numpy)
    return base.transpose(np.argsort(order))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transposes(), st.integers(0, 2**31 - 1))
def test_random_transposes_match_the_reference(case, seed):
    rank, shape, _, b, orders, z_kind, dtypes, unary, binary, outputs, large = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transpose, "LARGE_TILE_MIN_TILES_PER_SM", 0 if large else transpose.LARGE_TILE_MIN_TILES_PER_SM)
        _check(rank, shape, b, orders, z_kind, dtypes, unary, binary, outputs, np.random.default_rng(seed))


def _check(rank, shape, b, orders, z_kind, dtypes, unary, binary, outputs, rng):
    inputs = [_laid_out(rng, shape, orders[i], dtypes[i]) for i in range(2)]
    if z_kind == "full":
        inputs.append(_laid_out(rng, shape, orders[2], dtypes[2]))
    elif z_kind == "broadcast":  # constant along one of the transposed axes
        inputs.append((rng.standard_normal(shape[b]) + 0.25).astype(dtypes[2].numpy))

    with FusionDefinition() as fd:
        tvs = []
        for i, array in enumerate(inputs):
            if array.ndim == rank:
                order = _stride_order(orders[i])
                tvs.append(fd.define_tensor(shape=[-1] * rank, contiguity=True, dtype=dtypes[i], stride_order=order))
            else:
                bias = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtypes[i])
                full = fd.ops.broadcast_in_dim(bias, shape=tvs[0].shape(), broadcast_dims=[b])
                tvs.append(full)
        values = []
        for i, tv in enumerate(tvs):
            value = fd.ops.cast(tv, DataType.Float)
            values.append(getattr(fd.ops, unary[i])(value) if unary[i] else value)
        total = values[0]
        for op, value in zip(binary, values[1:], strict=False):
            total = getattr(fd.ops, op)(total, value)
        for kind in outputs:
            result = fd.ops.cast(total, dtypes[0])
            if kind == "default":
                fd.add_output(result)
            else:
                fd.add_output(result, stride_order=_stride_order(orders[0 if kind == "x_layout" else 1]))

    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    assert check_generated_kernels(runtime, inputs)
    assert check_generated_kernels(runtime, inputs, vectorize=False)  # a misaligned call's kernel
