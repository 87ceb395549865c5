"""Division of a non-negative 32-bit index by a run-time extent, as a multiply-high and a
shift by magic numbers the host computes once per launch.

A GPU has no integer divider: `n / d` by a run-time `d` is a ~20-instruction subroutine,
and a non-contiguous input's index divides by several extents per element. For
`0 <= n < 2^31` and `d >= 1`, with `shift = ceil(log2 d)` and
`magic = floor(2^32 * (2^shift - d) / d) + 1` (which fits 32 bits), the quotient is
`(umulhi(n, magic) + n) >> shift` (Granlund and Montgomery's unsigned division; the sum
cannot overflow 32 bits because `umulhi(n, magic) <= n < 2^31`). This module is the host
side: the numbers the runtime packs into a kernel's `FastDivisor` parameters, and the
same arithmetic in Python and NumPy for the interpreter and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MASK = (1 << 32) - 1


@dataclass(frozen=True)
class MagicDivisor:
    """A divisor and its magic numbers, as a kernel's `FastDivisor` parameter holds them."""

    divisor: int
    magic: int
    shift: int

    @staticmethod
    def of(divisor: int) -> MagicDivisor:
        """The magic numbers of `divisor`. Past 2^31 every 32-bit index is below it (the
        quotient is 0: magic 0, shift 31); 0 (a loop over an empty axis, never entered)
        gets harmless numbers."""
        if divisor <= 0:
            return MagicDivisor(divisor, 0, 0)
        if divisor > 1 << 31:
            return MagicDivisor(divisor, 0, 31)
        shift = (divisor - 1).bit_length()  # ceil(log2 divisor)
        magic = ((1 << 32) * ((1 << shift) - divisor)) // divisor + 1
        return MagicDivisor(divisor, magic, shift)


def magic_quotient(n: np.ndarray, magic: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """`n // divisor` as the device computes it (32-bit unsigned arithmetic), on arrays (the
    interpreter's lanes) of `n` in [0, 2^31)."""
    n64 = n.astype(np.uint64)
    high = (n64 * magic.astype(np.uint64)) >> np.uint64(32)
    return ((high + n64) & np.uint64(_MASK)) >> shift.astype(np.uint64)
