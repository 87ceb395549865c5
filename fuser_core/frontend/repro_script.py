"""The repro script of a fusion: its printed definition, inputs like the caller's, and
the call, as nvFuser's `print_repro` writes it. The script is plain nvFuser Python:
it runs under nvFuser, under `python -m fuser_core.compat`, and loads in the workbench.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.ir.dtype import dtype_from_framework, torch_name


def repro_script(
    definition: str,
    fusion_id: int | None,
    inputs: Sequence[Any] | None,
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
) -> str:
    name = f"nvfuser_fusion_id{fusion_id}" if fusion_id is not None else "nvfuser_incomplete_fusion"
    lines = [
        "# fuser-workbench repro: runs under nvFuser or `python -m fuser_core.compat`",
        "import torch",
        "from nvfuser import FusionDefinition, DataType",
        definition.rstrip("\n"),
        "",
        "with FusionDefinition() as fd:",
        f"    {name}(fd)",
        "",
    ]
    if inputs is None:
        return "\n".join(lines)
    lines.append("inputs = [")
    lines.extend(f"    {input_expression(value)}," for value in inputs)
    lines.append("]")
    options = "".join(
        f", {key}={list(names)!r}"
        for key, names in (("_enable_options", enable), ("_disable_options", disable))
        if names
    )
    lines.append(f"fd.execute(inputs{options})")
    return "\n".join(lines) + "\n"


def input_expression(value: Any) -> str:
    """Python that makes an input like `value`: its shape, strides, dtype and device,
    with random values."""
    if isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f'float("{value}")'
    if isinstance(value, complex):
        return f"complex({value.real!r}, {value.imag!r})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(input_expression(v) for v in value) + "]"
    if not hasattr(value, "shape"):
        raise FuserError(f"cannot write an input of type {type(value).__name__} into a repro", op="repro_script_for")
    dtype = dtype_from_framework(value)
    torch_dtype = torch_name(dtype)
    if torch_dtype is None:
        raise FuserError(f"torch has no dtype for {dtype!r}", op="repro_script_for")
    shape = tuple(int(s) for s in value.shape)
    strides = _element_strides(value)
    device = _device(value)
    if len(shape) == 0:
        return f"torch.testing.make_tensor((), dtype={torch_dtype}, device={device!r})"
    dense = _contiguous_strides(shape)
    if all(s == d or n == 1 for s, d, n in zip(strides, dense, shape, strict=True)):
        return f"torch.testing.make_tensor({shape!r}, dtype={torch_dtype}, device={device!r})"
    storage = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if n > 0)
    return (
        f"torch.testing.make_tensor(({storage},), dtype={torch_dtype}, device={device!r})"
        f".as_strided({shape!r}, {strides!r})"
    )


def _element_strides(value: Any) -> tuple[int, ...]:
    stride = value.stride() if callable(getattr(value, "stride", None)) else None
    if stride is not None:
        return tuple(int(s) for s in stride)
    return tuple(int(s) // value.itemsize for s in value.strides)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))


def _device(value: Any) -> str:
    device = getattr(value, "device", None)
    if device is not None and type(device).__module__.split(".")[0] == "torch":
        return str(device) if device.type != "cuda" else f"cuda:{device.index or 0}"
    return "cuda:0"  # NumPy and CuPy inputs: nvFuser takes them as CUDA tensors
