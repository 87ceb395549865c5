"""Library ops through torch, on torch tensors of any device: one ATen call per op, the
one nvFuser's expr_eval segments make, so the results are nvFuser's.

| op                         | ATen call                                                 |
| -------------------------- | --------------------------------------------------------- |
| matmul / linear            | torch.matmul / torch.nn.functional.linear                 |
| index_select               | torch.index_select                                        |
| select                     | torch.select (copied: the output owns its storage)        |
| gather / take_along_axis   | torch.gather / torch.take_along_dim                       |
| scatter                    | torch.scatter (tensor or scalar src)                      |
| index_put_accumulate       | torch.index_put(accumulate=True)                          |
| embedding_fwd              | torch.embedding                                           |
| topk / argsort             | torch.topk / torch.argsort(stable=...)                    |
| cumsum / triu              | torch.cumsum(dtype=the output's) / torch.triu             |
| sdpfa_fwd / sdpfa_bwd      | aten._scaled_dot_product_flash_attention(_backward)       |

Indices are checked before the call (one device reduction and one sync per index
tensor), so a bad one never reaches a kernel: the op is then handed to the NumPy
reference, which raises its own FuserError (same op, tensor, value and position).
So are a k or a select index out of range, a gather index larger than the input,
and a scatter index (or src) of other sizes off `dim`, where NumPy broadcasts and
ATen does not: the reference stays the ground truth of semantics.

Attention: flash where it computes what the reference does (CUDA sm80+, no dropout,
query's head dimension equal to value's and at most 256, zero-padded to a multiple
of 8 as ATen's sdpa pads it, no empty axis, causal only for a square mask: flash
aligns a non-square one bottom-right, the reference top-left). Elsewhere the math
path: the reference's formulas in float32 on the tensors' device, dropout with the
reference's own Philox mask keyed by (seed, offset) (drawn on the host), so a forward
here and a backward on the reference, or the other way round, drop the same entries.
The seed and offset outputs are the reference's (0-D Int, both 0 without dropout),
not ATen's rng_state, which the IR has no place for.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.base import Expr, ScalarEvaluator
from fuser_core.ir.dtype import DataType, torch_name
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.indexing import (
    EmbeddingFwdOp,
    GatherOp,
    IndexPutAccumulateOp,
    IndexSelectOp,
    ScatterOp,
    SelectOp,
)
from fuser_core.ir.library import (
    ArgsortOp,
    CumsumOp,
    SdpaBwdOp,
    SdpaFwdOp,
    TopKOp,
    TriuOp,
    _default_scale,
    dropout_keep,
)
from fuser_core.ir.rng import fresh_seed
from fuser_core.ir.tensor_exprs import MatmulOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.reference import bind_leaves

Run = Callable[[Any, Any, list[Any], ScalarEvaluator], list[Any]]  # (torch, expr, args, ev) -> outputs

_FLOATS = frozenset({DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double})
_INDEX = frozenset({DataType.Int, DataType.Int32})
_ORDERED = _FLOATS | _INDEX
_ALL = _ORDERED | {DataType.Bool, DataType.ComplexFloat, DataType.ComplexDouble}
_FLASH_HEAD_DIM = 256


@dataclass(frozen=True)
class TorchRule:
    """How one op runs through torch, and the dtypes (of all its tensors) it takes."""

    run: Run
    dtypes: frozenset[DataType]


def tensor_exprs(fusion: Fusion) -> list[Expr]:
    """The group's ops that make tensors (scalar arithmetic is left to the evaluator)."""
    return [e for e in fusion.exprs() if any(isinstance(o, TensorView) for o in e.outputs)]


def torch_takes(fusion: Fusion) -> bool:
    """Whether every tensor op of the group has a torch rule taking its dtypes."""
    exprs = tensor_exprs(fusion)
    return bool(exprs) and all(_takes(e) for e in exprs)


def _takes(expr: Expr) -> bool:
    rule = TORCH_RULES.get(type(expr))
    dtypes = {v.dtype for v in [*expr.inputs, *expr.outputs] if isinstance(v, TensorView)}
    return rule is not None and dtypes <= rule.dtypes


def run_torch(fusion: Fusion, tensors: dict[int, Any], leaves: dict[int, Any]) -> None:
    """Compute the group's tensors into `tensors` (torch tensors by tensor name), op by
    op, its scalars (dim, k, dropout_p, ...) from the run's leaf scalars."""
    torch = sys.modules["torch"]
    ev = bind_leaves(fusion, leaves)
    for expr in tensor_exprs(fusion):
        args = [tensors[v.name] if isinstance(v, TensorView) else ev.evaluate(v) for v in expr.inputs]
        results = _call(torch, expr, args, ev)
        for out, result in zip(expr.outputs, results, strict=True):
            if isinstance(out, TensorView):
                _check_extents(expr, out, result, ev)
                tensors[out.name] = result


def _call(torch: Any, expr: Expr, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    try:
        return TORCH_RULES[type(expr)].run(torch, expr, args, ev)
    except (FuserError, InternalError):
        raise
    except (RuntimeError, ValueError, IndexError, TypeError) as err:
        shapes = [list(a.shape) for a in args if hasattr(a, "shape")]
        raise FuserError(
            f"cannot evaluate through torch on inputs of shapes {shapes}: {err}",
            op=expr.op_name,
            tensor=f"T{expr.outputs[0].name}",
            location=expr.location,
        ) from err


def _check_extents(expr: Expr, out: TensorView, result: Any, ev: ScalarEvaluator) -> None:
    """The result must have the extents the IR gives (later kernels index by them)."""
    expected = [int(ev.evaluate(d.maybe_expanded_extent)) for d in out.logical_no_reductions()]
    if list(result.shape) != expected:
        raise FuserError(
            f"T{out.name} comes out with shape {list(result.shape)}, but the fusion gives it extents {expected}",
            op=expr.op_name,
            tensor=f"T{out.name}",
            location=expr.location,
        )


# -- the reference, for what ATen would read differently ----------------------------------------------------
def on_reference(torch: Any, expr: Expr, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    """The op on the NumPy reference (its checks raise its FuserErrors), back on the device."""
    host = [
        _to_numpy(torch, a, v.dtype) if isinstance(v, TensorView) else a for a, v in zip(args, expr.inputs, strict=True)
    ]
    results = expr.evaluate(host, ev)
    device = next(a.device for a in args if hasattr(a, "device"))
    return [
        _from_numpy(torch, np.asarray(r), o.dtype, device) if isinstance(o, TensorView) else r
        for r, o in zip(results, expr.outputs, strict=True)
    ]


def _refused(torch: Any, expr: Expr, args: list[Any], ev: ScalarEvaluator) -> InternalError:
    """The reference's error for inputs the device check refused (it must raise one)."""
    on_reference(torch, expr, args, ev)
    return InternalError(f"{expr.op_name}: the device check refused inputs the reference accepts")


def _to_numpy(torch: Any, tensor: Any, dtype: DataType) -> np.ndarray:
    host = tensor.detach().cpu()
    if dtype == DataType.BFloat16:  # NumPy has no bf16: the bits, read back as ml_dtypes'
        return host.view(torch.int16).numpy().view(dtype.numpy)  # type: ignore[no-any-return]
    return host.numpy()  # type: ignore[no-any-return]


def _from_numpy(torch: Any, array: np.ndarray, dtype: DataType, device: Any) -> Any:
    array = np.array(array.astype(dtype.numpy, copy=False), order="C")
    if dtype == DataType.BFloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(array).to(device)


def torch_dtype(torch: Any, dtype: DataType) -> Any:
    name = torch_name(dtype)
    if name is None:
        raise InternalError(f"torch has no dtype for {dtype!r}")
    return getattr(torch, name.removeprefix("torch."))


# -- indexing ----------------------------------------------------------------------------------------------
def _in_range(index: Any, size: int) -> bool:
    """Every entry in [0, size): one reduction on the device, one sync."""
    return index.numel() == 0 or not bool(((index < 0) | (index >= size)).any().item())


def _check_index(torch: Any, expr: Expr, args: list[Any], ev: ScalarEvaluator, position: int, size: int) -> None:
    if not _in_range(args[position], size):
        raise _refused(torch, expr, args, ev)


def _index_select(torch: Any, expr: IndexSelectOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    x, index = args
    _check_index(torch, expr, args, ev, 1, x.shape[expr.dim])
    return [torch.index_select(x, expr.dim, index.reshape(-1))]


def _select(torch: Any, expr: SelectOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    x, index = args[0], int(args[1])
    if not -x.shape[expr.dim] <= index < x.shape[expr.dim]:
        raise _refused(torch, expr, args, ev)
    return [torch.select(x, expr.dim, index).clone(memory_format=torch.contiguous_format)]


def _off_dim(a: Any, b: Any, dim: int) -> list[tuple[int, int]]:
    return [(a.shape[d], b.shape[d]) for d in range(a.ndim) if d != dim]


def _gather(torch: Any, expr: GatherOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    x, index = args
    _check_index(torch, expr, args, ev, 1, x.shape[expr.dim])
    sizes = _off_dim(index, x, expr.dim)
    if any(i > s for i, s in sizes):
        raise _refused(torch, expr, args, ev)
    if expr.exact_sizes and all(i == s for i, s in sizes):
        return [torch.take_along_dim(x, index.long(), expr.dim)]
    return [torch.gather(x, expr.dim, index.long())]  # a smaller index: the reference trims x, as gather does


def _scatter(torch: Any, expr: ScatterOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    x, index, src = args
    _check_index(torch, expr, args, ev, 1, x.shape[expr.dim])
    fits = not isinstance(expr.inputs[2], TensorView) or all(
        i <= s for i, s in zip(index.shape, src.shape, strict=True)
    )
    if not fits or any(i != s for i, s in _off_dim(index, x, expr.dim)):
        return on_reference(torch, expr, args, ev)  # NumPy broadcasts a size-1 axis where ATen does not
    return [torch.scatter(x, expr.dim, index.long(), src)]  # a scalar src takes the value overload


def _index_put_accumulate(torch: Any, expr: IndexPutAccumulateOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    acc, index, value = args
    _check_index(torch, expr, args, ev, 1, acc.shape[0])
    return [torch.index_put(acc, (index.reshape(-1).long(),), value, accumulate=True)]


def _embedding(torch: Any, expr: EmbeddingFwdOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    index, weight = args[0], args[1]
    _check_index(torch, expr, args, ev, 0, weight.shape[0])
    return [torch.embedding(weight, index)]  # padding_idx changes only the gradient


# -- sorting, scans, triangles ---------------------------------------------------------------------------------
def _topk(torch: Any, expr: TopKOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    x, k = args[0], int(args[1])
    if not 0 <= k <= x.shape[expr.dim]:
        raise _refused(torch, expr, args, ev)
    values, indices = torch.topk(x, k, expr.dim, expr.largest, expr.sorted)
    return [values, indices]


def _argsort(torch: Any, expr: ArgsortOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    return [torch.argsort(args[0], dim=expr.dim, descending=expr.descending, stable=expr.stable)]


def _cumsum(torch: Any, expr: CumsumOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    return [torch.cumsum(args[0], expr.dim, dtype=torch_dtype(torch, expr.output.dtype))]


def _triu(torch: Any, expr: TriuOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    return [torch.triu(args[0], int(args[1]))]


def _matmul(torch: Any, expr: MatmulOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    if expr.kind == "matmul":
        return [torch.matmul(args[0], args[1]).contiguous()]
    return [torch.nn.functional.linear(*args).contiguous()]


# -- attention -------------------------------------------------------------------------------------------------
def flash_attention_fits(torch: Any, q: Any, k: Any, v: Any, dropout_p: float, causal: bool) -> bool:
    """Whether ATen's flash attention computes what the reference does: CUDA (sm80+), no
    dropout, equal head dimensions of at most 256 (padded to a multiple of 8), no empty
    axis, and causal only for a square mask (flash aligns a non-square one bottom-right,
    the reference top-left)."""
    if dropout_p != 0.0 or q.device.type != "cuda" or torch.cuda.get_device_capability(q.device) < (8, 0):
        return False
    head = q.shape[-1]
    square = q.shape[2] == k.shape[2]
    return (
        v.shape[-1] == head and 0 < head <= _FLASH_HEAD_DIM and min(*q.shape, *k.shape) > 0 and (square or not causal)
    )


def _pad_head(torch: Any, tensor: Any) -> Any:
    """The head dimension zero-padded to a multiple of 8, as ATen's sdpa pads it for
    flash (zeros add nothing to q·k, and the padded output columns are cut off)."""
    pad = -tensor.shape[-1] % 8
    return torch.nn.functional.pad(tensor, (0, pad)) if pad else tensor


def _sdpa_scalars(expr: Any, args: list[Any], first: int, head_dim: int) -> tuple[float, bool, float]:
    p, causal = float(args[first]), bool(args[first + 1])
    scale = float(args[-1]) if expr.has_scale else _default_scale(head_dim)
    return p, causal, scale


def _sdpa_fwd(torch: Any, expr: SdpaFwdOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    q, k, v = (t.contiguous() for t in args[:3])
    p, causal, scale = _sdpa_scalars(expr, args, 3, q.shape[-1])
    zero = torch.zeros((), dtype=torch.int64, device=q.device)
    if flash_attention_fits(torch, q, k, v, p, causal):
        padded = [_pad_head(torch, t) for t in (q, k, v)]
        found = torch.ops.aten._scaled_dot_product_flash_attention(*padded, 0.0, causal, False, scale=scale)
        out = found[0][..., : v.shape[-1]].contiguous()
        return [out, found[1][..., : q.shape[2]].contiguous(), zero, zero.clone()]
    seed = fresh_seed() if p > 0 else 0
    out, lse = _math_attention(torch, q, k, v, causal, scale, _keep(torch, seed, 0, q, k, p))
    return [out.to(q.dtype), lse, torch.full((), seed, dtype=torch.int64, device=q.device), zero]


def _keep(torch: Any, seed: int, offset: int, q: Any, k: Any, p: float) -> Any | None:
    """The reference's dropout mask scaled by 1/(1-p) (None without dropout)."""
    if p <= 0:
        return None
    shape = (*q.shape[:3], k.shape[2])
    mask = torch.from_numpy(dropout_keep(seed, offset, shape, p)).to(q.device)
    return mask.to(torch.float32) / (1.0 - p)


def _scores(torch: Any, q: Any, k: Any, causal: bool, scale: float) -> Any:
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if causal:
        rows, cols = scores.shape[-2:]
        allowed = torch.ones((rows, cols), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores


def _math_attention(torch: Any, q: Any, k: Any, v: Any, causal: bool, scale: float, keep: Any | None) -> Any:
    """(output in float32, logsumexp): SdpaFwdOp.evaluate's steps in float32."""
    scores = _scores(torch, q, k, causal, scale)
    if scores.shape[-1]:
        peak = scores.amax(dim=-1, keepdim=True)
    else:
        peak = scores.new_zeros((*scores.shape[:-1], 1))
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    weights = torch.exp(scores - peak)
    total = weights.sum(dim=-1, keepdim=True)
    lse = (torch.log(total) + peak)[..., 0]
    probs = weights / total
    if keep is not None:
        probs = probs * keep
    return torch.matmul(probs, v.float()), lse.contiguous()


def _sdpa_bwd(torch: Any, expr: SdpaBwdOp, args: list[Any], ev: ScalarEvaluator) -> list[Any]:
    d_out, q, k, v, out, lse = (t.contiguous() for t in args[:6])
    p, causal, scale = _sdpa_scalars(expr, args, 6, q.shape[-1])
    if flash_attention_fits(torch, q, k, v, p, causal):
        padded = [_pad_head(torch, t) for t in (d_out, q, k, v, out)]
        grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
            *padded, lse, None, None, q.shape[2], k.shape[2], 0.0, causal, args[8], args[9], scale=scale
        )
        return [g[..., : t.shape[-1]].contiguous() for g, t in zip(grads, (q, k, v), strict=True)]
    keep = _keep(torch, int(args[8].item()), int(args[9].item()), q, k, p) if p > 0 else None
    grads = _math_attention_grads(torch, d_out, q, k, v, lse, causal, scale, keep)
    return [g.to(t.dtype) for g, t in zip(grads, (q, k, v), strict=True)]


def _math_attention_grads(
    torch: Any, d_out: Any, q: Any, k: Any, v: Any, lse: Any, causal: bool, scale: float, keep: Any | None
) -> tuple[Any, Any, Any]:
    """SdpaBwdOp.evaluate's steps in float32: probabilities from logsumexp, then the chain rule."""
    scores = _scores(torch, q, k, causal, scale)
    probs = torch.exp(scores - lse.float()[..., None])
    probs = torch.where(torch.isfinite(probs), probs, torch.zeros_like(probs))
    keep = keep if keep is not None else torch.ones_like(probs)
    d_out = d_out.float()
    d_v = torch.matmul((probs * keep).transpose(-1, -2), d_out)
    d_probs = torch.matmul(d_out, v.float().transpose(-1, -2)) * keep
    d_scores = probs * (d_probs - (d_probs * probs).sum(dim=-1, keepdim=True))
    d_q = torch.matmul(d_scores, k.float()) * scale
    d_k = torch.matmul(d_scores.transpose(-1, -2), q.float()) * scale
    return d_q, d_k, d_v


_ATTENTION = frozenset({DataType.Half, DataType.BFloat16, DataType.Float, DataType.Int})

# One entry per op: its torch call and the dtypes of the tensors it takes (any other
# dtype leaves the group on the host).
TORCH_RULES: dict[type, TorchRule] = {
    MatmulOp: TorchRule(_matmul, _FLOATS),
    IndexSelectOp: TorchRule(_index_select, _ALL),
    SelectOp: TorchRule(_select, _ALL),
    GatherOp: TorchRule(_gather, _ALL),
    ScatterOp: TorchRule(_scatter, _ALL),
    IndexPutAccumulateOp: TorchRule(_index_put_accumulate, _ORDERED),
    EmbeddingFwdOp: TorchRule(_embedding, _ALL),
    TopKOp: TorchRule(_topk, _ORDERED),
    ArgsortOp: TorchRule(_argsort, _ORDERED | {DataType.Bool}),
    CumsumOp: TorchRule(_cumsum, _ALL),
    TriuOp: TorchRule(_triu, _ALL),
    SdpaFwdOp: TorchRule(_sdpa_fwd, _ATTENTION),
    SdpaBwdOp: TorchRule(_sdpa_bwd, _ATTENTION),
}
