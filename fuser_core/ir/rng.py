"""Random numbers as nvFuser's kernels draw them: Philox4x32-10, keyed by the seed,
the offset and each element's linear index, turned into uniform or normal values by
the formulas of nvFuser's runtime (runtime/random_numbers.cu).

Every element is a pure function of (seed, offset, linear index), so the reference
and a generated kernel give the same bits for the same seed, and a dropout mask can
be checked exactly. A value of a Float, Half or BFloat16 tensor takes one 32-bit word
of a Philox block (four values per block); a Double takes two (two per block).
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from fuser_core.ir.base import Expr, ScalarEvaluator, Val
from fuser_core.ir.dtype import DataType, to_storage
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView

_MUL = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_WEYL = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))
_LOW32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter: Sequence[Any], key: Sequence[Any]) -> np.ndarray:
    """Philox4x32 with 10 rounds (Salmon et al., SC'11) on arrays of counters:
    `counter` is four uint32 arrays (or ints), `key` two. Returns a (4, ...) uint32 array."""
    c = [np.asarray(v, dtype=np.uint64) & _LOW32 for v in counter]
    k = [np.asarray(v, dtype=np.uint64).astype(np.uint32) for v in key]
    with np.errstate(over="ignore"):
        for round_ in range(10):
            p0, p1 = _MUL[0] * c[0], _MUL[1] * c[2]
            hi0, lo0 = p0 >> np.uint64(32), p0 & _LOW32
            hi1, lo1 = p1 >> np.uint64(32), p1 & _LOW32
            c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
            if round_ < 9:
                k = [k[0] + _WEYL[0], k[1] + _WEYL[1]]
    return np.stack(np.broadcast_arrays(*[v.astype(np.uint32) for v in c]))


def philox_words(seed: int, offset: int, numel: int, per_block: int) -> tuple[np.ndarray, np.ndarray]:
    """For each linear index < numel: its Philox block (4 words, axis 0) and its
    component (which value of the block it is); `per_block` values per block."""
    return philox_words_at(seed, offset, np.arange(numel, dtype=np.uint64), per_block)


def philox_words_at(seed: Any, offset: Any, index: np.ndarray, per_block: int) -> tuple[np.ndarray, np.ndarray]:
    """`philox_words` at the given linear indices (seed and offset may be arrays of the
    same shape, as a kernel's lanes give them)."""
    index = np.asarray(index).astype(np.uint64)
    subseq, component = index // np.uint64(per_block), (index % np.uint64(per_block)).astype(np.int64)
    seed, offset = _as_u64(seed), _as_u64(offset)
    counter = (offset & _LOW32, offset >> np.uint64(32), subseq & _LOW32, subseq >> np.uint64(32))
    return philox4x32_10(counter, (seed & _LOW32, seed >> np.uint64(32))), component


def _as_u64(value: Any) -> np.ndarray:
    """An integer (or an array of them, signed or not) as its 64 bits, unsigned."""
    if isinstance(value, int):
        return np.asarray(value & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    array = np.asarray(value)
    return array.astype(np.uint64) if array.dtype.kind == "u" else array.astype(np.int64).astype(np.uint64)


def _uniform_float(x: np.ndarray) -> np.ndarray:
    """nvFuser's uniformf: (float)x * 2^-32 + 2^-33 in float arithmetic, 1 mapped to 0: [0, 1)."""
    scale = np.float32(1.0 / 2**32)
    raw = x.astype(np.float32) * scale + np.float32(0.5) * scale
    return np.where(raw == np.float32(1.0), np.float32(0.0), raw)


def _raw_uniform_float(x: np.ndarray) -> np.ndarray:
    scale = np.float32(1.0 / 2**32)
    return x.astype(np.float32) * scale + np.float32(0.5) * scale


def _uniform_double(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """nvFuser's uniform(x, y): 53 random bits `x ^ (y << 21)` scaled to [0, 1)."""
    z = x.astype(np.uint64) ^ (y.astype(np.uint64) << np.uint64(21))
    scale = 1.0 / 2**53
    raw = z.astype(np.float64) * scale + 0.5 * scale
    return np.where(raw == 1.0, 0.0, raw)


def _pick(words: np.ndarray, row: np.ndarray) -> np.ndarray:
    return np.take_along_axis(words, row[None, :], axis=0)[0]


class RNGOpType(enum.Enum):
    Uniform = "rng_uniform"  # [0, 1)
    UniformRange = "rng_uniform_range"  # [low, high)
    NormalStandard = "rng_normal_standard"
    NormalGeneral = "rng_normal_general"  # mean, std

    @property
    def is_normal(self) -> bool:
        return self in (RNGOpType.NormalStandard, RNGOpType.NormalGeneral)


def random_values(
    kind: RNGOpType, dtype: DataType, numel: int, seed: int, offset: int, params: Sequence[float] = ()
) -> np.ndarray:
    """`numel` values (flat, row-major linear index order) as nvFuser's RNGOp computes them."""
    return random_at(kind, dtype, np.arange(numel, dtype=np.uint64), seed, offset, params)


def random_at(
    kind: RNGOpType, dtype: DataType, index: np.ndarray, seed: Any, offset: Any, params: Sequence[Any] = ()
) -> np.ndarray:
    """The values at linear indices `index` (any shape): what a kernel's lanes draw, each
    a pure function of (seed, offset, index)."""
    double = dtype == DataType.Double
    shape = np.shape(index)
    words, comp = philox_words_at(seed, offset, np.ravel(index), 2 if double else 4)
    flat = [np.ravel(np.broadcast_to(p, shape)) if np.ndim(p) else p for p in params]
    if kind.is_normal:
        values = _normal_double(words, comp) if double else _normal_float(words, comp)
        if kind == RNGOpType.NormalGeneral:
            ftype = np.float64 if double else np.float32
            values = values * np.asarray(flat[1]).astype(ftype) + np.asarray(flat[0]).astype(ftype)
        return to_storage(values, dtype).reshape(shape)
    if double:
        u = _uniform_double(_pick(words, comp * 2), _pick(words, comp * 2 + 1))
        if kind != RNGOpType.Uniform:
            low, high = (np.asarray(p, dtype=np.float64) for p in flat)
            u = low + (high - low) * u
        return u.reshape(shape)
    return _uniform_narrow(kind, dtype, _pick(words, comp), flat).reshape(shape)


def _uniform_narrow(kind: RNGOpType, dtype: DataType, word: np.ndarray, params: Sequence[Any]) -> np.ndarray:
    if dtype == DataType.Float:
        u = _uniform_float(word)
        if kind == RNGOpType.Uniform:
            return u
        low, high = (np.asarray(p).astype(np.float32) for p in params)
        return low + (high - low) * u
    raw = _raw_uniform_float(word)  # Half / BFloat16: rounded, and the top end folded back
    if kind == RNGOpType.Uniform:
        stored = to_storage(raw, dtype)
        return np.where(stored.astype(np.float32) == 1.0, to_storage(np.float32(0), dtype), stored)
    low, high = (np.asarray(p).astype(np.float32) for p in params)
    stored = to_storage(low + (high - low) * raw, dtype)
    top = to_storage(high, dtype).astype(np.float32)
    return np.where(stored.astype(np.float32) == top, to_storage(low, dtype), stored)


def _normal_float(words: np.ndarray, comp: np.ndarray) -> np.ndarray:
    """Box-Muller on two words of the block (sin for even components, cos for odd)."""
    pair = comp // 2 * 2
    u = _uniform_float(_pick(words, pair))
    v = _uniform_float(_pick(words, pair + 1)) * np.float32(6.2831855)
    with np.errstate(divide="ignore"):
        radius = np.sqrt(np.float32(-2.0) * np.log(u))
    return np.where(comp % 2 == 0, radius * np.sin(v), radius * np.cos(v)).astype(np.float32)


def _normal_double(words: np.ndarray, comp: np.ndarray) -> np.ndarray:
    u = _uniform_double(words[0], words[1])
    v = _uniform_double(words[2], words[3]) * 6.2831853071795860
    with np.errstate(divide="ignore"):
        radius = np.sqrt(-2.0 * np.log(u))
    return np.where(comp % 2 == 0, radius * np.sin(v), radius * np.cos(v))


# A source of Philox states: given how many unseeded random ops one execution has, it
# returns (seed, base offset) and advances its own state past them.
PhiloxSource = Callable[[int], tuple[int, int]]
_seed_source: contextvars.ContextVar[PhiloxSource | None] = contextvars.ContextVar("fuser_seed_source", default=None)


def fresh_state(n_ops: int = 1) -> tuple[int, int]:
    """(seed, base offset) for an execution whose `n_ops` random ops name no seed: from
    the caller's generator where one is set (`seeds_from`), else a 63-bit seed from the
    OS and offset 0. Unseeded op i draws at offset `base + i`."""
    source = _seed_source.get()
    if source is None:
        return secrets.randbits(63), 0
    seed, offset = source(n_ops)
    return seed & (2**63 - 1), offset


def fresh_seed() -> int:
    return fresh_state(1)[0]


@contextlib.contextmanager
def seeds_from(source: PhiloxSource) -> Iterator[None]:
    """Draw the Philox states of unseeded random ops from `source` inside the block
    (torch's generator for torch callers, so `torch.manual_seed` makes a run repeatable
    and matches nvFuser's numbers, as nvFuser reads the same generator)."""
    token = _seed_source.set(source)
    try:
        yield
    finally:
        _seed_source.reset(token)


class RNGOp(Expr):
    """A random tensor: inputs are the shape's extents, the distribution's parameters,
    then the seed and offset (user scalars, or the run's own Philox state)."""

    op_name = "rng"

    def __init__(
        self,
        kind: RNGOpType,
        out: TensorView,
        shape: Sequence[Scalar],
        params: Sequence[Val],
        seed: Scalar,
        offset: Scalar,
        user_seeded: bool,
    ) -> None:
        self.kind = kind
        self.rank = len(shape)
        self.n_params = len(params)
        self.user_seeded = user_seeded
        super().__init__([*shape, *params, seed, offset], [out])

    @property
    def shape(self) -> list[Val]:
        return self.inputs[: self.rank]

    @property
    def params(self) -> list[Val]:
        return self.inputs[self.rank : self.rank + self.n_params]

    @property
    def seed(self) -> Val:
        return self.inputs[-2]

    @property
    def offset(self) -> Val:
        return self.inputs[-1]

    def to_string(self) -> str:
        """nvFuser's RNGOp::toString: shape, parameters, dtype and a user seed."""
        shape = ", ".join(v.to_inline_string() for v in self.shape)
        params = "".join(f"{p.to_inline_string()}, " for p in self.params)
        seed = f", {self.seed.to_inline_string()}" if self.user_seeded else ""
        return f"{self.output}\n   = {self.kind.value}({{{shape}}}, {params}{self.output.dtype.cuda}{seed});\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        shape = [int(v) for v in values[: self.rank]]
        params = [float(v) for v in values[self.rank : self.rank + self.n_params]]
        seed, offset = int(values[-2]), int(values[-1])
        numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
        flat = random_values(self.kind, self.output.dtype, numel, seed, offset, params)
        return [to_storage(np.asarray(flat).reshape(shape), self.output.dtype)]


def unbound_rng_states(exprs: Sequence[Expr]) -> list[tuple[Scalar, Scalar, int]]:
    """(seed, base offset, index) of each RNGOp with no user seed: the run supplies the
    seed and the base offset, symbolic scalars shared by those ops (op i draws at
    `base + i`)."""
    found: list[tuple[Scalar, Scalar, int]] = []
    for expr in exprs:
        if isinstance(expr, RNGOp) and not expr.user_seeded:
            found.append((expr.seed, _base_offset(expr.offset), len(found)))  # type: ignore[arg-type]
    return found


def _base_offset(offset: Val) -> Val:
    """The run's base-offset leaf under an unseeded op's `base + i`."""
    while offset.definition is not None:
        offset = next(v for v in offset.definition.inputs if not (isinstance(v, Scalar) and v.is_const))
    return offset


_drawn_seeds: contextvars.ContextVar[list[tuple[int, int]] | None] = contextvars.ContextVar(
    "fuser_drawn_seeds", default=None
)


@contextlib.contextmanager
def recording_run_seeds() -> Iterator[list[tuple[int, int]]]:
    """The seeds `bind_run_seed` draws while the block runs (for the run report, whose
    executor never sees the backend's evaluator)."""
    drawn: list[tuple[int, int]] = []
    token = _drawn_seeds.set(drawn)
    try:
        yield drawn
    finally:
        _drawn_seeds.reset(token)


def bind_run_seed(exprs: Sequence[Expr], ev: Any) -> None:
    """Give the unseeded random ops of one execution a fresh Philox state: seed and base
    offset (kept in `ev.rng_seed` and `ev.rng_offset`, so the run can be replayed). An
    already bound seed stays; its base offset is `ev.rng_offset` (0 unless set)."""
    states = unbound_rng_states(exprs)
    for seed, base, _ in states:
        if not ev.is_bound(seed):
            ev.rng_seed, ev.rng_offset = fresh_state(len(states))
            ev.bind(seed, ev.rng_seed)
            recorder = _drawn_seeds.get()
            if recorder is not None:
                recorder.append((ev.rng_seed, ev.rng_offset))
        if not ev.is_bound(base):
            ev.bind(base, ev.rng_offset)
