"""Index divisions by run-time extents in 32-bit kernels: the magic numbers against floor
division (exhaustively where it is cheap, and at the edges of [0, 2^31))."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core.codegen.magic_division import MagicDivisor, magic_quotient

INT32_END = 1 << 31
RNG = np.random.default_rng(11)


def quotients(n: np.ndarray, divisor: int) -> np.ndarray:
    magic = MagicDivisor.of(divisor)
    return magic_quotient(n, np.asarray(magic.magic), np.asarray(magic.shift)).astype(np.int64)


# -- the magic numbers ---------------------------------------------------------------------


def test_the_magic_numbers_of_the_small_divisors_and_the_powers_of_two():
    assert MagicDivisor.of(1) == MagicDivisor(1, 1, 0)  # (umulhi(n, 1) + n) >> 0 == n
    assert MagicDivisor.of(3) == MagicDivisor(3, 0x55555556, 2)
    assert MagicDivisor.of(7) == MagicDivisor(7, 0x24924925, 3)
    for shift in range(32):
        assert MagicDivisor.of(1 << shift) == MagicDivisor(1 << shift, 1, shift)


def test_every_dividend_up_to_2_to_the_16_for_every_divisor_up_to_1100():
    n = np.arange(1 << 16, dtype=np.int64)
    for divisor in range(1, 1100):
        np.testing.assert_array_equal(quotients(n, divisor), n // divisor, err_msg=f"d={divisor}")


EDGE_DIVISORS = sorted(
    {1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 25, 100, 641, 1000, 6700417, INT32_END - 1, INT32_END - 2}
    | {1 << s for s in range(32)}
    | {(1 << s) + 1 for s in range(31)}
    | {(1 << s) - 1 for s in range(2, 32)}
    | {3 << s for s in range(30)}
    | {7 << s for s in range(29)}
)


@pytest.mark.parametrize("divisor", EDGE_DIVISORS)
def test_dividends_near_2_to_the_31_and_at_multiples_of_the_divisor(divisor):
    top = np.arange(INT32_END - (1 << 14), INT32_END, dtype=np.int64)
    multiples = np.arange(0, INT32_END, max(divisor, INT32_END >> 12), dtype=np.int64)
    around = np.clip(np.concatenate([multiples - 1, multiples, multiples + 1]), 0, INT32_END - 1)
    random = RNG.integers(0, INT32_END, 1 << 14)
    for n in (top, around, random):
        np.testing.assert_array_equal(quotients(n, divisor), n // divisor, err_msg=f"d={divisor}")
    magic = MagicDivisor.of(divisor)
    assert 0 <= magic.magic < 1 << 32 and 0 <= magic.shift <= 31
    for n in (0, 1, divisor - 1, divisor, divisor + 1, INT32_END - 2, INT32_END - 1):
        if 0 <= n < INT32_END:
            assert magic.quotient(n) == n // divisor, (divisor, n)


def test_random_divisors_against_random_dividends():
    for divisor in RNG.integers(1, INT32_END, 300).tolist():
        n = RNG.integers(0, INT32_END, 4096)
        np.testing.assert_array_equal(quotients(n, divisor), n // divisor, err_msg=f"d={divisor}")


def test_a_divisor_past_every_32_bit_index_gives_quotient_zero():
    n = np.array([0, 1, 12345, INT32_END - 1])
    for divisor in (INT32_END, INT32_END + 5, (1 << 32) - 1, 1 << 40):
        np.testing.assert_array_equal(quotients(n, divisor), 0)
