"""Shared helpers of the pass tests: random inputs, a pass applied to a copy of a
fusion, the NumPy reference before and after, and what the IR holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fuser_core import DataType
from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.reference import evaluate_fusion

_NARROW_FLOATS = frozenset(dt.numpy for dt in DataType if dt.is_reduced_float)


def random_values(shape: Sequence[int], dtype: DataType, seed: int = 0) -> np.ndarray:
    """Random data of `dtype`, never zeros: wide ranges, so that a cast that narrows or
    rounds shows it (integers beyond int32 and 2**24, floats from 1e-6 to 1e5)."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    if dtype.is_boolean:
        values = np.arange(size) % 3 != 0  # both values, whatever the size
    elif dtype.is_integral:
        info = np.iinfo(dtype.numpy)
        values = rng.integers(info.min // 2, info.max // 2, size, dtype=dtype.numpy)
        values[values == 0] = 7
    else:
        scale = 10.0 ** rng.integers(-6, 6, size)
        values = rng.uniform(0.5, 2.0, size) * scale * rng.choice([-1.0, 1.0], size)
        with np.errstate(over="ignore"):  # beyond a narrow type's range: infinity, a value too
            values = values.astype(dtype.numpy)
    return np.asarray(values).reshape(shape)


def column_major(array: np.ndarray) -> np.ndarray:
    return np.asfortranarray(array)


def reference(fusion: Fusion, inputs: Sequence[Any]) -> list[Any]:
    """The NumPy reference's outputs of `fusion` (a narrowing cast may overflow to inf:
    that is the value, not a problem)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return evaluate_fusion(fusion, bind_args(fusion, convert_inputs(fusion, inputs)))


def applied(fusion: Fusion, function: Callable[[Fusion], bool]) -> tuple[Fusion, bool]:
    """`function` run on a copy of `fusion` (names kept); the copy and whether it changed."""
    copy, _ = fusion.clone()
    return copy, function(copy)


def assert_same_results(before: Fusion, after: Fusion, inputs: Sequence[Any]) -> None:
    """Both fusions give bit-identical outputs (NaN included) of the same dtype."""
    expected, actual = reference(before, inputs), reference(after, inputs)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(_comparable(a), _comparable(e))


def _comparable(array: np.ndarray) -> np.ndarray:
    """ml_dtypes' narrow floats compare NaN unequal to NaN: compare them as float64."""
    return array.astype(np.float64) if array.dtype in _NARROW_FLOATS else array


def op_names(fusion: Fusion) -> list[str]:
    return [e.op_name for e in fusion.exprs() if e.is_tensor_op()]


def domains_by_name(fusion: Fusion) -> dict[int, str]:
    """Each tensor in use, by name, with its printed domain (IterDomain names and
    extents): a pass that renumbered anything would change it."""
    return {tv.name: tv.domain.to_string() for tv in fusion.used_tensors()}


def assert_names_kept(before: Fusion, after: Fusion) -> None:
    """Every tensor left is one of before's, with the same name and domain."""
    old, new = domains_by_name(before), domains_by_name(after)
    assert new.items() <= old.items()


def tensor_uses(tv: Any) -> list[Expr]:
    """The tensor-producing uses of a value (extent arithmetic left out)."""
    return [u for u in tv.uses if any(isinstance(o, TensorView) for o in u.outputs)]


def output_names(fusion: Fusion) -> list[str]:
    return [f"T{v.name}" for v in fusion.outputs]
