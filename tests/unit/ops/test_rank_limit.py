"""Tensors have at most 64 axes: every op that can raise the rank refuses more, naming
itself, and building ops on a rank-64 tensor takes time linear in the rank."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.tensor_view import MAX_TENSOR_RANK, TensorDomain, TensorView

assert MAX_TENSOR_RANK == 64


def tensor(fd: FusionDefinition, rank: int) -> Any:
    return fd.define_tensor([-1] * rank, [True] * rank)


def test_rank_64_tensors_work() -> None:
    shape = (2, 3) + (1,) * 62
    x = np.arange(6, dtype=np.float32).reshape(shape)
    with FusionDefinition() as fd:
        t = tensor(fd, 64)
        fd.add_output(fd.ops.add(t, t))
        fd.add_output(fd.ops.sum(t, [0]))
    doubled, summed = fd.execute([x])
    assert doubled.shape == shape
    np.testing.assert_array_equal(doubled, 2 * x)
    np.testing.assert_array_equal(summed, x.sum(axis=0))


def test_rank_64_add_builds_quickly() -> None:
    start = time.perf_counter()
    with FusionDefinition() as fd:
        t = tensor(fd, 64)
        for _ in range(20):
            t = fd.ops.add(t, t)
        fd.add_output(t)
    assert time.perf_counter() - start < 1.0


def test_add_reads_each_operand_domain_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """No per-axis rescans of an operand's axes (quadratic in the rank)."""
    calls = []
    original = TensorView.logical_no_reductions

    def counting(self: TensorView) -> list[IterDomain]:
        calls.append(self.name)
        return original(self)

    with FusionDefinition() as fd:
        a, b = tensor(fd, 64), tensor(fd, 64)
        monkeypatch.setattr(TensorView, "logical_no_reductions", counting)
        fd.ops.add(a, b)
    assert 0 < len(calls) <= 12


GROWING_OPS: list[tuple[str, Callable[[FusionDefinition], Any]]] = [
    ("define_tensor", lambda fd: tensor(fd, 65)),
    ("broadcast", lambda fd: fd.ops.broadcast(tensor(fd, 64), [True] + [False] * 64)),
    ("broadcast_in_dim", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, 1), [4] * 65, [64])),
    ("expand", lambda fd: fd.ops.expand(tensor(fd, 1), [1] * 64 + [-1])),
    ("reshape", lambda fd: fd.ops.reshape(fd.define_tensor([1], [None]), [1] * 65)),
    ("reshape", lambda fd: fd.ops.reshape(tensor(fd, 1), [1] * 64 + [-1])),
    ("full", lambda fd: fd.ops.full([1] * 65, 0.0, DataType.Float)),
]


@pytest.mark.parametrize(("op", "build"), GROWING_OPS, ids=[f"{op}-{i}" for i, (op, _) in enumerate(GROWING_OPS)])
def test_rank_65_is_refused(op: str, build: Callable[[FusionDefinition], Any]) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        build(fd)
    assert info.value.op == op
    assert "65 axes" in info.value.message and "at most 64" in info.value.message


def test_a_huge_define_tensor_is_refused_at_once() -> None:
    start = time.perf_counter()
    with pytest.raises(FuserError, match="at most 64"), FusionDefinition() as fd:
        tensor(fd, 20000)
    assert time.perf_counter() - start < 1.0


def test_tensor_domain_refuses_65_axes_whatever_built_it() -> None:
    with FusionDefinition() as fd, fd.fusion.guard():
        one = fd.fusion.one_val()
        TensorDomain([IterDomain(one) for _ in range(64)])
        with pytest.raises(FuserError, match="at most 64 axes; this one would have 65"):
            TensorDomain([IterDomain(one) for _ in range(65)])
