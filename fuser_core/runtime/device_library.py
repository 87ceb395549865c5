"""Library groups that run on the device in a cuda run: matmul and linear.

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

_CUPY_TYPES = frozenset({DataType.Half, DataType.Float, DataType.Double})
_TORCH_TYPES = _CUPY_TYPES | {DataType.BFloat16}


def device_path(fusion: Fusion) -> str | None:
    """ "torch" or "cupy" where every op of the group has a device form, else None."""
    exprs = fusion.exprs()
    if not exprs or not all(isinstance(e, MatmulOp) for e in exprs):
        return None
    dtypes = {v.dtype for e in exprs for v in [*e.inputs, *e.outputs] if isinstance(v, TensorView)}
    if "torch" in sys.modules and dtypes <= _TORCH_TYPES:
        return "torch"
    if dtypes <= _CUPY_TYPES:
        return "cupy"
    return None


def run_on_device(fusion: Fusion, path: str, tensors: dict[int, Any], cupy: Any) -> None:
    """Compute the group's outputs into `tensors` (CuPy arrays by tensor name)."""
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
