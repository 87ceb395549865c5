"""Library groups that run on the device in a cuda run, and how; every other group
without a generated kernel stays on the host reference (NumPy): its inputs copied
down, its outputs copied back.

- "view": a no_op group whose outputs are views of fusion inputs
  (fuser_core.scheduler.aliases) runs no kernel: each output is its input's device
  array reshaped, sharing its storage, as nvFuser returns aliased outputs.
- "torch", when the caller has torch loaded, with CUDA: a group made only of library ops (matmul,
  linear, index_select, select, gather, take_along_axis, scatter, index_put_accumulate,
  embedding_fwd, topk, argsort, cumsum, triu, sdpfa_fwd, sdpfa_bwd) in dtypes their
  torch rule takes. Each op is the ATen call nvFuser's expr_eval segments make (the
  table in device_library_torch.py), on the CuPy arrays handed over through DLPack
  (bf16 as uint16 bits), so the results are torch's. Index tensors are checked on the
  device first: a bad index is the reference's FuserError, never a GPU fault. Attention
  is ATen's flash attention where that computes what the reference does (CUDA, no
  dropout, equal head dimensions, causal only when square), else the reference's math
  in float32 on the device, with the reference's Philox dropout mask.
- "cupy", without torch: matmul and linear through CuPy's matmul (cuBLAS), in Half,
  Float and Double.
- None (the host): a group with any other op; fp8 or UInt64 tensors; topk of Bool
  (ATen has none); index_put_accumulate of complex; matmul/linear of integers or
  complex; bf16 matmul, and every op but matmul/linear, when torch is not loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from fuser_core.ir.dtype import DataType
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_exprs import MatmulOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.device_library_torch import run_torch, tensor_exprs, torch_takes
from fuser_core.runtime.reference import bind_leaves
from fuser_core.scheduler.aliases import aliased_input

_CUPY_TYPES = frozenset({DataType.Half, DataType.Float, DataType.Double})


def device_path(fusion: Fusion) -> str | None:
    """ "view", "torch" or "cupy" where every op of the group has a device form, else None."""
    if _view_sources(fusion) is not None:
        return "view"
    if _torch_on_cuda() and torch_takes(fusion):
        return "torch"
    exprs = tensor_exprs(fusion)
    if not exprs or not all(isinstance(e, MatmulOp) for e in exprs):
        return None
    dtypes = {v.dtype for e in exprs for v in [*e.inputs, *e.outputs] if isinstance(v, TensorView)}
    return "cupy" if dtypes <= _CUPY_TYPES else None


def _torch_on_cuda() -> bool:
    """torch is loaded and sees the GPU (a CPU-only build cannot take CuPy's device arrays)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda.is_available())


def _view_sources(fusion: Fusion) -> list[tuple[TensorView, TensorView]] | None:
    """(output, the input it is a view of) for every output, or None."""
    inputs = [tv for tv in fusion.inputs if isinstance(tv, TensorView)]
    pairs: list[tuple[TensorView, TensorView]] = []
    for val in fusion.outputs:
        source = aliased_input(val, inputs) if isinstance(val, TensorView) else None
        if source is None:
            return None
        pairs.append((val, source))  # type: ignore[arg-type]
    return pairs or None


def view_shapes(fusion: Fusion, leaves: dict[int, Any]) -> list[tuple[int, int, tuple[int, ...]]]:
    """(output, the input it is a view of, the output's shape) by tensor name, for every
    output of a "view" group."""
    ev = bind_leaves(fusion, leaves)
    return [
        (view.name, source.name, tuple(int(ev.evaluate(d.maybe_expanded_extent)) for d in view.logical_no_reductions()))
        for view, source in _view_sources(fusion) or []
    ]


def run_on_device(fusion: Fusion, path: str, tensors: dict[int, Any], cupy: Any, leaves: dict[int, Any]) -> None:
    """Compute the group's outputs into `tensors` (CuPy arrays by tensor name)."""
    if path == "view":
        for view, source, shape in view_shapes(fusion, leaves):
            tensors[view] = tensors[source].reshape(shape)
    elif path == "torch":
        _run_through_torch(fusion, tensors, cupy, leaves)
    else:
        for expr in tensor_exprs(fusion):
            assert isinstance(expr, MatmulOp)
            tensors[expr.output.name] = _cupy_matmul(expr.kind, [tensors[tv.name] for tv in expr.inputs], cupy)


def _run_through_torch(fusion: Fusion, tensors: dict[int, Any], cupy: Any, leaves: dict[int, Any]) -> None:
    """The torch rules on the group's CuPy arrays, handed over (and back) through DLPack."""
    torch = sys.modules["torch"]
    values = {tv.name: _as_torch(torch, tensors[tv.name], tv.dtype) for tv in _tensors(fusion.inputs)}
    run_torch(fusion, values, leaves)
    for out in _tensors(fusion.outputs):
        tensors[out.name] = _as_cupy(torch, cupy, values[out.name], out.dtype)


def _tensors(vals: Sequence[Any]) -> list[TensorView]:
    return [v for v in vals if isinstance(v, TensorView)]


def _as_torch(torch: Any, array: Any, dtype: DataType) -> Any:
    """A torch view of a CuPy array (bf16 and bool arrive as their bits' types)."""
    tensor = torch.from_dlpack(array)
    if dtype == DataType.BFloat16:
        return tensor.view(torch.bfloat16)
    return tensor.view(torch.bool) if dtype == DataType.Bool and tensor.dtype != torch.bool else tensor


def _as_cupy(torch: Any, cupy: Any, tensor: Any, dtype: DataType) -> Any:
    """A CuPy view of a torch tensor; CuPy has no bf16, so bf16 goes over as uint16 bits."""
    if dtype == DataType.BFloat16:
        return cupy.from_dlpack(tensor.view(torch.int16)).view(cupy.uint16)
    if dtype == DataType.Bool:
        return cupy.from_dlpack(tensor.view(torch.uint8)).view(cupy.bool_)
    return cupy.from_dlpack(tensor)


def _cupy_matmul(kind: str, arrays: list[Any], cupy: Any) -> Any:
    if kind == "matmul":
        return cupy.asarray(cupy.matmul(arrays[0], arrays[1]), order="C")  # keeps a 0-dim result 0-dim
    result = cupy.matmul(arrays[0], cupy.swapaxes(arrays[1], -1, -2))
    if len(arrays) > 2:
        result = result + arrays[2]
    return cupy.asarray(result, order="C")
