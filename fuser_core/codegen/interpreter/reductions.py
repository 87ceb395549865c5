"""How a block or grid reduction combines values: the reduction ops as ufuncs, Chan's
parallel Welford combination, and a tree of pairwise steps within each group of lanes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# -- reductions -----------------------------------------------------------------------

# NaN-propagating, as the runtime's `fmax`/`fmin` reductions are.
_REDUCE_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "mul": np.multiply,
    "max": np.maximum,
    "fmax": np.maximum,
    "min": np.minimum,
    "fmin": np.minimum,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}

_Values = list[np.ndarray]


def _welford(a: _Values, b: _Values) -> _Values:
    """Chan's parallel combination of (avg, M2, N) partials; N == 0 is the identity."""
    avg_a, m2_a, n_a = a
    avg_b, m2_b, n_b = b
    n = n_a + n_b
    fa, fb = n_a.astype(avg_a.dtype), n_b.astype(avg_a.dtype)
    total = fa + fb
    ratio = fb / np.where(total == 0, np.ones((), total.dtype), total)
    delta = avg_b - avg_a
    avg = avg_a + delta * ratio
    m2 = m2_a + m2_b + delta * delta * fa * ratio
    empty_a, empty_b = n_a == 0, n_b == 0
    avg = np.where(empty_a, avg_b, np.where(empty_b, avg_a, avg))
    m2 = np.where(empty_a, m2_b, np.where(empty_b, m2_a, m2))
    return [avg, m2, n]


def _reduce_groups(op: str, group: np.ndarray, values: _Values) -> _Values:
    """Combine `values` (one array per buffer, sorted by `group`) within each group by a
    tree of pairwise steps, as a block reduction does; every member gets its group's result."""
    if op == "welford":
        combine: Callable[[_Values, _Values], _Values] = _welford
    else:
        ufunc = _REDUCE_UFUNCS[op]

        def combine(a: _Values, b: _Values) -> _Values:
            return [ufunc(a[0], b[0])]

    acc = [np.array(v) for v in values]
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    sizes = np.diff(np.append(starts, group.size))
    rank = np.arange(group.size) - np.repeat(starts, sizes)
    size_of = np.repeat(sizes, sizes)
    step = 1
    while step < sizes.max():
        left = np.flatnonzero((rank % (2 * step) == 0) & (rank + step < size_of))
        right = left + step
        for array, value in zip(acc, combine([v[left] for v in acc], [v[right] for v in acc]), strict=True):
            array[left] = value
        step *= 2
    return [np.repeat(array[starts], sizes) for array in acc]


def tree_steps(size: int) -> list[list[tuple[int, int]]]:
    """The pairs of ranks `_reduce_groups` combines at each step for a group of `size`
    lanes (rank r takes r + step into itself), for showing a reduction's combine order."""
    steps, step = [], 1
    while step < size:
        steps.append([(r, r + step) for r in range(0, size, 2 * step) if r + step < size])
        step *= 2
    return steps
