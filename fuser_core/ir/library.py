"""Library ops evaluated by the reference: topk, argsort, cumsum, triu and scaled
dot-product flash attention (forward and backward). No generated kernel holds them:
the segmenter gives each its own expr_eval group, as nvFuser runs them through ATen.

Attention computes in float32 on NumPy (float64 inside the backward), with the
dropout mask drawn from Philox4x32-10 keyed by the forward's seed and offset, so the
backward regenerates exactly the mask the forward used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir.base import ScalarEvaluator
from fuser_core.ir.dtype import DataType, to_storage
from fuser_core.ir.indexing import LibraryOp, _arr, _wide
from fuser_core.ir.rng import RNGOpType, fresh_seed, random_values
from fuser_core.ir.tensor_view import TensorView


def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).astype(np.float64) if x.dtype.kind == "V" or x.itemsize < 4 else x.astype(np.float64)


class TopKOp(LibraryOp):
    """The k largest (or smallest) entries along `dim` and their indices; `sorted`
    orders them, else their order is unspecified (we give them sorted anyway)."""

    op_name = "topk"

    def __init__(
        self, values: TensorView, indices: TensorView, inp: TensorView, k: Any, dim: int, largest: bool, sorted_: bool
    ) -> None:
        self.dim, self.largest, self.sorted = dim, largest, sorted_
        self.ties = [(0, a, a, o) for o in (0, 1) for a in range(inp.ndim) if a != dim]
        super().__init__([inp, k], [values, indices])

    def to_string(self) -> str:
        values, indices = self.outputs
        inp, k = self.inputs
        flags = f"dim = {self.dim}, largest = {str(self.largest).lower()}, sorted = {str(self.sorted).lower()}"
        return f"( {values}, {indices} )\n   = topk( {inp}, {k.to_inline_string()}, {flags} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, k = _arr(values[0]), int(values[1])
        size = x.shape[self.dim]
        if not 0 <= k <= size:
            raise FuserError(
                f"k = {k} is out of range for axis {self.dim} of {self._tv(0)} of size {size}",
                op=self.op_name,
                tensor=self._tv(0),
                location=self.location,
            )
        keys = _f64(x) if x.dtype.kind in "fV" else x.astype(np.int64)
        if self.largest:  # NaN counts as the largest, as in torch; ties keep index order
            keys = np.where(np.isnan(keys), -np.inf, -keys) if keys.dtype.kind == "f" else -keys
        order = np.argsort(keys, axis=self.dim, kind="stable")
        index = np.take(order, np.arange(k), axis=self.dim)
        return [np.take_along_axis(x, index, axis=self.dim), index.astype(np.int64)]


class ArgsortOp(LibraryOp):
    """Indices that sort `dim` (ascending, or descending); `stable` keeps ties in order."""

    op_name = "argsort"

    def __init__(self, out: TensorView, inp: TensorView, dim: int, descending: bool, stable: bool) -> None:
        self.dim, self.descending, self.stable = dim, descending, stable
        self.ties = [(0, a, a) for a in range(inp.ndim)]
        super().__init__([inp], [out])

    def to_string(self) -> str:
        flags = f"dim = {self.dim}, descending = {str(self.descending).lower()}, stable = {str(self.stable).lower()}"
        return f"{self.output}\n   = argsort( {self.input}, {flags} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _arr(values[0])
        keys = _f64(x) if x.dtype.kind == "V" else x
        if self.descending:
            # Stable descending: ties stay in index order, NaN first as in torch.
            flipped = np.flip(keys, axis=self.dim)
            order = np.argsort(flipped, axis=self.dim, kind="stable")
            order = x.shape[self.dim] - 1 - np.flip(order, axis=self.dim)
        else:
            order = np.argsort(keys, axis=self.dim, kind="stable")
        return [order.astype(np.int64)]


class CumsumOp(LibraryOp):
    """Inclusive prefix sum along `dim`, accumulated in 64 bits and stored in the
    output's dtype (integers and bools sum to Int, as torch.cumsum)."""

    op_name = "cumsum"

    def __init__(self, out: TensorView, inp: TensorView, dim: int) -> None:
        self.dim = dim
        self.ties = [(0, a, a) for a in range(inp.ndim)]
        super().__init__([inp], [out])

    def to_string(self) -> str:
        return f"{self.output}\n   = cumsum( {self.input}, dim = {self.dim} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _arr(values[0])
        wide = x.astype(np.int64) if x.dtype.kind == "b" else _wide(x)
        return [to_storage(np.cumsum(wide, axis=self.dim), self.output.dtype)]


class TriuOp(LibraryOp):
    """The upper triangle of the last two axes: entries with col - row >= diagonal
    kept, the others zero."""

    op_name = "triu"

    def __init__(self, out: TensorView, inp: TensorView, diagonal: Any) -> None:
        self.ties = [(0, a, a) for a in range(inp.ndim)]
        super().__init__([inp, diagonal], [out])

    def to_string(self) -> str:
        return f"{self.output}\n   = triu( {self.input}, {self.inputs[1].to_inline_string()} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _arr(values[0])
        return [np.triu(x, k=int(values[1])) if x.size else x.copy()]


def _scores(q: np.ndarray, k: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if causal:
        rows, cols = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((rows, cols), bool)), scores, -np.inf)
    return scores


def dropout_keep(seed: int, offset: int, shape: tuple[int, ...], p: float) -> np.ndarray:
    """Which attention probabilities survive dropout: a uniform draw >= p per entry,
    keyed by seed, offset and the entry's linear index."""
    numel = int(np.prod(shape, dtype=np.int64))
    uniform = random_values(RNGOpType.Uniform, DataType.Float, numel, seed, offset)
    return np.asarray(uniform).reshape(shape) >= np.float32(p)


def _default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim) if head_dim else 1.0


class SdpaFwdOp(LibraryOp):
    """Flash attention forward: (output, logsumexp, philox_seed, philox_offset) of
    query [N, H, L, E], key [N, H, S, E], value [N, H, S, Ev]; logsumexp [N, H, L] in
    Float; the seed is drawn per execution when dropout_p > 0 (else 0)."""

    op_name = "sdpfa_fwd"

    def __init__(
        self,
        outputs: Sequence[TensorView],
        q: TensorView,
        k: TensorView,
        v: TensorView,
        dropout_p: Any,
        is_causal: Any,
        scale: Any | None,
    ) -> None:
        self.has_scale = scale is not None
        self.ties = [(0, a, a, 0) for a in range(3)] + [(2, 3, 3, 0)] + [(0, a, a, 1) for a in range(3)]
        super().__init__([q, k, v, dropout_p, is_causal] + ([scale] if scale is not None else []), list(outputs))

    def to_string(self) -> str:
        out, lse, seed, offset = self.outputs
        q, k, v, p, causal = self.inputs[:5]
        scale = self.inputs[5].to_inline_string() if self.has_scale else "None"
        return (
            f"{out},\n          {lse},\n          {seed},\n          {offset}\n"
            f"   = sdpa({q},\n          {k},\n          {v},\n"
            f"          dropout_p = {p.to_inline_string()},\n"
            f"          is_causal = {causal.to_inline_string()},\n          scale = {scale})\n"
        )

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        q, k, v = (_f64(_arr(x)) for x in values[:3])
        p, causal = float(values[3]), bool(values[4])
        scale = float(values[5]) if self.has_scale else _default_scale(q.shape[-1])
        scores = _scores(q, k, scale, causal)
        peak = np.max(scores, axis=-1, keepdims=True) if scores.shape[-1] else np.zeros((*scores.shape[:-1], 1))
        peak = np.where(np.isfinite(peak), peak, 0.0)
        weights = np.exp(scores - peak)
        total = weights.sum(axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            lse = (np.log(total) + peak)[..., 0]
            probs = weights / total
        seed, offset = (fresh_seed(), 0) if p > 0 else (0, 0)
        if p > 0:
            probs = probs * dropout_keep(seed, offset, probs.shape, p) / (1.0 - p)
        out = np.matmul(probs, v)
        return [
            to_storage(out, self.outputs[0].dtype),
            lse.astype(np.float32),
            np.array(seed, np.int64),
            np.array(offset, np.int64),
        ]


class SdpaBwdOp(LibraryOp):
    """Flash attention backward: (grad_query, grad_key, grad_value), recomputing the
    probabilities from logsumexp and the dropout mask from the forward's seed."""

    op_name = "sdpfa_bwd"

    def __init__(self, outputs: Sequence[TensorView], inputs: Sequence[Any], has_scale: bool) -> None:
        self.has_scale = has_scale
        # grad_output, query, key, value, output, logsumexp, dropout_p, is_causal, seed, offset[, scale]
        self.ties = [(pos, a, a, o) for o, pos in ((0, 1), (1, 2), (2, 3)) for a in range(4)]
        super().__init__(list(inputs), list(outputs))

    def to_string(self) -> str:
        gq, gk, gv = self.outputs
        names = ("grad_output", "query", "key", "value", "output", "logsumexp")
        args = ",\n          ".join(f"{n} = {v}" for n, v in zip(names, self.inputs[:6], strict=True))
        p, causal, seed, offset = self.inputs[6:10]
        scale = self.inputs[10].to_inline_string() if self.has_scale else "None"
        return (
            f"( {gq},\n          {gk},\n          {gv} )\n   = sdpa_bwd({args},\n"
            f"          dropout_p = {p.to_inline_string()},\n          is_causal = {causal.to_inline_string()},\n"
            f"          philox_seed = {seed},\n          philox_offset = {offset},\n          scale = {scale})\n"
        )

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        d_out, q, k, v = (_f64(_arr(x)) for x in values[:4])
        lse = _arr(values[5]).astype(np.float64)
        p, causal = float(values[6]), bool(values[7])
        seed, offset = int(np.asarray(values[8])), int(np.asarray(values[9]))
        scale = float(values[10]) if self.has_scale else _default_scale(q.shape[-1])
        scores = _scores(q, k, scale, causal)
        with np.errstate(invalid="ignore", over="ignore"):
            probs = np.exp(scores - lse[..., None])
        probs = np.where(np.isfinite(probs), probs, 0.0)
        keep = dropout_keep(seed, offset, probs.shape, p) / (1.0 - p) if p > 0 else np.ones_like(probs)
        d_v = np.matmul(np.swapaxes(probs * keep, -1, -2), d_out)
        d_probs = np.matmul(d_out, np.swapaxes(v, -1, -2)) * keep
        d_scores = probs * (d_probs - np.sum(d_probs * probs, axis=-1, keepdims=True))
        d_q = np.matmul(d_scores, k) * scale
        d_k = np.matmul(np.swapaxes(d_scores, -1, -2), q) * scale
        return [to_storage(g, out.dtype) for g, out in zip((d_q, d_k, d_v), self.outputs, strict=True)]
