"""Library groups that run on the device in a cuda run: matmul and linear, and views.

A no_op group whose outputs are views of fusion inputs (fuser_core.scheduler.aliases)
runs no kernel: each output is its input's device array reshaped, sharing its storage,
as nvFuser returns aliased outputs.

nvFuser runs these through ATen (its expr_eval segments), so its results are torch's
bit for bit. Here the same: through torch when the caller has torch loaded, else
through CuPy's matmul (cuBLAS). A group with other ops, or a dtype neither path
takes (bf16 without torch), stays on the host reference.
"""

from __future__ import annotations

import sys
from typing import Any

from fuser_core.ir.dtype import DataType
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_exprs import MatmulOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.reference import bind_leaves
from fuser_core.scheduler.aliases import aliased_input

_CUPY_TYPES = frozenset({DataType.Half, DataType.Float, DataType.Double})
_TORCH_TYPES = _CUPY_TYPES | {DataType.BFloat16}


def device_path(fusion: Fusion) -> str | None:
    """ "view", "torch" or "cupy" where every op of the group has a device form, else None."""
    if _view_sources(fusion) is not None:
        return "view"
    exprs = fusion.exprs()
    if not exprs or not all(isinstance(e, MatmulOp) for e in exprs):
        return None
    dtypes = {v.dtype for e in exprs for v in [*e.inputs, *e.outputs] if isinstance(v, TensorView)}
    if "torch" in sys.modules and dtypes <= _TORCH_TYPES:
        return "torch"
    if dtypes <= _CUPY_TYPES:
        return "cupy"
    return None


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


def run_on_device(fusion: Fusion, path: str, tensors: dict[int, Any], cupy: Any, leaves: dict[int, Any]) -> None:
    """Compute the group's outputs into `tensors` (CuPy arrays by tensor name)."""
    if path == "view":
        ev = bind_leaves(fusion, leaves)
        for view, source in _view_sources(fusion) or []:
            shape = [int(ev.evaluate(d.maybe_expanded_extent)) for d in view.logical_no_reductions()]
            tensors[view.name] = tensors[source.name].reshape(shape)
        return
    for expr in fusion.exprs():
        assert isinstance(expr, MatmulOp)
        out: TensorView = expr.output  # type: ignore[assignment]
        arrays = [tensors[tv.name] for tv in expr.inputs]
        if path == "torch":
            tensors[out.name] = _torch_matmul(expr.kind, arrays, [tv.dtype for tv in expr.inputs], out.dtype, cupy)
        else:
            tensors[out.name] = _cupy_matmul(expr.kind, arrays, cupy)


def _torch_matmul(kind: str, arrays: list[Any], dtypes: list[DataType], out_dtype: DataType, cupy: Any) -> Any:
    torch = sys.modules["torch"]
    operands = [_as_torch(torch, a, d) for a, d in zip(arrays, dtypes, strict=True)]
    if kind == "matmul":
        result = torch.matmul(operands[0], operands[1])
    else:
        result = torch.nn.functional.linear(*operands)
    result = result.contiguous()
    if out_dtype == DataType.BFloat16:  # CuPy has no bf16: hand over the bits
        return cupy.from_dlpack(result.view(torch.int16)).view(cupy.uint16)
    return cupy.from_dlpack(result)


def _as_torch(torch: Any, array: Any, dtype: DataType) -> Any:
    tensor = torch.from_dlpack(array)
    return tensor.view(torch.bfloat16) if dtype == DataType.BFloat16 else tensor


def _cupy_matmul(kind: str, arrays: list[Any], cupy: Any) -> Any:
    if kind == "matmul":
        return cupy.ascontiguousarray(cupy.matmul(arrays[0], arrays[1]))
    result = cupy.matmul(arrays[0], cupy.swapaxes(arrays[1], -1, -2))
    if len(arrays) > 2:
        result = result + arrays[2]
    return cupy.ascontiguousarray(result)
