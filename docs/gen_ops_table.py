"""Writes docs/ops.md: every op of nvFuser's Python frontend (`fd.ops`), whether this
project supports it, how the reference computes it, which scheduler takes it, and
the CUDA it needs. Run `python docs/gen_ops_table.py`; a test checks the file is current.

Support is read from the frontend itself (an op refused by `fd.ops` is "no"), so the
table cannot claim an op the frontend refuses.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fuser_core.frontend.operators import BINARY_OPS, UNARY_OPS, UNSUPPORTED_OPS, Operators

# nvFuser's legacy frontend ops (python_bindings.cpp, 2024) plus the indexing ops of later versions.
NVFUSER_OPS = """
abs acos acosh add add_alpha addcmul argsort asin asinh atan atan2 atanh batch_norm bitwise_and
bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor broadcast broadcast_in_dim
cast cat ceil clamp cos cosh cumsum div embedding_fwd eq erf erfc erfcinv erfinv exp exp2 expand expm1
floor fmod frac full gather gcd ge grouped_mm gt imag index_put_accumulate index_select iota isfinite
isinf isnan isneginf isposinf isreal le lerp lgamma linear log log10 log1p log2 logical_and
logical_not logical_or logical_right_shift lt matmul max maximum min minimum mod mul ne neg nextafter
normal pad permute pow prod rand_like randn_like real reciprocal relu remainder reshape round rsqrt
scaled_mm scatter sdpfa_bwd sdpfa_fwd segment_set select set shape sigmoid sign signbit silu sin sinh
size slice sqrt squeeze stride_order sub sub_alpha sum take_along_axis tan tanh tensor_sizes threshold
topk triu truediv trunc uniform var var_mean where welford
""".split()  # noqa: SIM905

EXPR_EVAL = {"matmul", "linear", "index_select", "select", "gather", "take_along_axis", "scatter"}
EXPR_EVAL |= {"index_put_accumulate", "embedding_fwd"}
LIBRARY = {
    "topk": "NumPy (stable sort)",
    "argsort": "NumPy (stable, NaN largest)",
    "cumsum": "NumPy",
    "triu": "NumPy",
    "sdpfa_fwd": "NumPy attention, Philox dropout mask",
    "sdpfa_bwd": "NumPy attention gradients, the forward's mask",
}
HOST = "not generated yet: runs on the host reference in a cuda run"
REDUCTION = {"sum", "prod", "max", "min", "var", "var_mean", "welford"}
WELFORD = {"var_mean", "welford"}  # var is a mean and a sum of squares
RANDOM = {"uniform", "normal", "rand_like", "randn_like"}
COMPOSITE = {"add_alpha", "sub_alpha", "addcmul", "logical_right_shift", "truediv"}
NORMALIZATION = {"batch_norm"}
SHAPE = {"broadcast", "broadcast_in_dim", "cat", "expand", "pad", "permute", "reshape", "slice", "squeeze"}
SHAPE |= {"set", "segment_set", "full", "iota", "size", "shape", "tensor_sizes", "cast", "where", "lerp"}
SHAPE |= {"clamp", "threshold", "real", "imag"}

WHY_NOT = {
    "scaled_mm": "fp8 scaled matmul: no reference for its scaling modes yet",
    "grouped_mm": "grouped matmul: not built yet",
}


def _supported(name: str) -> bool:
    return name not in UNSUPPORTED_OPS and (name in UNARY_OPS or name in BINARY_OPS or hasattr(Operators, name))


def _row(name: str) -> str:
    if not _supported(name):
        return f"| `{name}` | no | | | | {WHY_NOT.get(name, 'not built yet')} |"
    if name in UNARY_OPS:
        rule = UNARY_OPS[name].rule
        return f"| `{name}` | yes | NumPy element-wise | pointwise | `{rule.name}` | |"
    if name in BINARY_OPS:
        rule = BINARY_OPS[name].rule
        cuda = f"`{rule.inline}`" if rule.inline else f"`{rule.name}`"
        return f"| `{name}` | yes | NumPy element-wise | pointwise | {cuda} | |"
    if name in EXPR_EVAL:
        return f"| `{name}` | yes | NumPy (index range checked) | expr_eval | none (library op) | |"
    if name in LIBRARY:
        return f"| `{name}` | yes | {LIBRARY[name]} | expr_eval | none (library op) | |"
    if name in RANDOM:
        return f"| `{name}` | yes | Philox4x32-10 as nvFuser's runtime | pointwise | {HOST} | |"
    if name in REDUCTION:
        cuda = "Welford update, `blockWelford`/`gridWelfordCombine`"
        if name not in WELFORD:
            cuda = "register accumulation, `blockReduce`/`gridReduce`"
        return f"| `{name}` | yes | NumPy, 64-bit accumulation | reduction / persistent | {cuda} | |"
    if name in NORMALIZATION:
        note = "Welford + element-wise ops; training running stats are aliased outputs written into the inputs"
        route = "reduction / persistent | Welford update, `blockWelford`"
        return f"| `{name}` | yes | composed (Welford, NumPy) | {route} | {note} |"
    if name == "stride_order":
        note = "a Set whose output has a required allocation domain (never an inferred hint)"
        return f"| `{name}` | yes | NumPy copy, output laid out as required | pointwise / no_op | copy | {note} |"
    if name in COMPOSITE:
        return f"| `{name}` | yes | composed of element-wise ops | pointwise | its parts | composite |"
    return f"| `{name}` | yes | NumPy | pointwise / no_op | index math of the kernel (`where` for pad and cat) | |"


def table() -> str:
    lines = [
        "# nvFuser frontend ops",
        "",
        "Generated by `docs/gen_ops_table.py` from the frontend itself; do not edit by hand.",
        "Route is the scheduler that takes a group holding the op; CUDA is the device",
        "function or operator a generated kernel prints; reductions accumulate in registers and",
        "combine across threads and blocks with the runtime header's `blockReduce`, `gridReduce`",
        "and `blockWelford` (several grid reductions of one kernel arrive once: `gridStore`,",
        "`gridArriveGroup`, `gridCombineGroup`, `gridArriveTop`, `gridCombine`, and the Welford",
        "forms; blocks combine in a two-level tree). Random ops are not generated yet: a",
        "cuda run runs their groups on the host reference and says so.",
        "",
        "| op | supported | reference | scheduler route | CUDA | note |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_row(name) for name in sorted(set(NVFUSER_OPS))]
    done = sum(_supported(n) for n in set(NVFUSER_OPS))
    lines += ["", f"{done} of {len(set(NVFUSER_OPS))} ops supported."]
    return "\n".join(lines) + "\n"


def main() -> None:
    target = Path(__file__).with_name("ops.md")
    target.write_text(table())
    sys.stdout.write(f"wrote {target}\n")


if __name__ == "__main__":
    main()
