"""Fusion-level printers, in nvFuser's debug text of the pre-2024-09 era.

`print_math` is `fusion_ir_math` (and `fd.fusion_ir()`); `print_kernel` is the
`%kernel { ... } // %kernel` form with an optional TransformPrinter block.
All return strings.
"""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView, transforms_between


def _io_line(val: object) -> str:
    return f"  {val}, {val.dtype.cuda}\n"  # type: ignore[attr-defined]


def print_math(fusion: Fusion) -> str:
    text = "Inputs:\n" + "".join(_io_line(v) for v in fusion.inputs)
    text += "Outputs:\n" + "".join(_io_line(v) for v in fusion.outputs)
    text += "\n%kernel_math {\n"
    text += "".join(expr.to_string() for expr in fusion.exprs())
    return text + "}\n"


def print_kernel(fusion: Fusion, include_transforms: bool = True) -> str:
    text = "\n%kernel {\n" + "".join(expr.to_string() for expr in fusion.exprs())
    if include_transforms:
        text += "\nTransformPrinter : \n" + print_transforms(fusion)
    return text + "} // %kernel\n"


def print_transforms(fusion: Fusion) -> str:
    return "".join(tensor_transforms(tv) for tv in fusion.used_tensors())


def _ids(ids: list) -> str:  # type: ignore[type-arg]
    return ", ".join(i.to_string() for i in ids)


def tensor_transforms(tv: TensorView) -> str:
    """One tensor's block of the TransformPrinter: its domains and the transforms
    between them."""
    domain = tv.domain
    text = f"{tv}\n"
    if domain.root is not None:
        text += f" root domain : ({_ids(domain.root)})\n"
        text += "".join(f"  {e.to_string()}" for e in transforms_between(domain.root, domain.logical))
    text += f" logical domain : ({_ids(domain.logical)})\n"
    if domain.allocation is not None:
        text += f" allocation domain : ({_ids(domain.allocation)})\n"
    text += f" contiguity: {domain.contiguity_string()}\n"
    text += "".join(f"  {e.to_string()}" for e in transforms_between(domain.logical, domain.loop))
    text += f" loop domain : ({_ids(domain.loop)})\n"
    return text
