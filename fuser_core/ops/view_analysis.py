"""How a reshape decomposes into squeezes, merges, splits and broadcasts.

Given the input sizes and the requested sizes, size-1 input axes are squeezed,
size-1 output axes are inserted as broadcasts, and the remaining axes are grouped
left to right into runs of equal element count; each run merges its input axes and
splits the result into its output axes. The analysis is plain data: static reshapes
apply it at definition time, dynamic ones store it in their concretization key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fuser_core.errors import FuserError


@dataclass(frozen=True)
class ViewAnalysis:
    squeeze: tuple[bool, ...]  # per input axis: removed before the reshape
    transforms: tuple[tuple[str, int, int], ...]  # ("merge", pos, 0) / ("split", pos, factor)
    broadcast: tuple[bool, ...]  # per output axis: inserted after the reshape
    out_sizes: tuple[int, ...] = field(compare=False)  # the requested shape, -1 resolved

    def describe(self) -> str:
        parts = []
        if any(self.squeeze):
            parts.append(f"squeeze {[i for i, s in enumerate(self.squeeze) if s]}")
        for kind, pos, factor in self.transforms:
            parts.append(f"merge({pos})" if kind == "merge" else f"split({pos}, {factor})")
        if any(self.broadcast):
            parts.append(f"broadcast {[i for i, b in enumerate(self.broadcast) if b]}")
        return " ".join(parts) or "identity"


def resolve_shape(in_sizes: Sequence[int], new_sizes: Sequence[int], op: str = "reshape") -> list[int]:
    """Replace a -1 in `new_sizes` by the size that keeps the element count."""
    numel = 1
    for s in in_sizes:
        numel *= s
    wildcards = [i for i, s in enumerate(new_sizes) if s == -1]
    if len(wildcards) > 1:
        raise FuserError(f"at most one -1 may be given, got {list(new_sizes)}", op=op)
    for s in new_sizes:
        if s < -1:
            raise FuserError(f"invalid size {s} in {list(new_sizes)}", op=op)
    known = 1
    for s in new_sizes:
        if s != -1:
            known *= s
    sizes = list(new_sizes)
    if wildcards:
        if known == 0 or numel % known:
            raise FuserError(
                f"cannot infer the -1 in {list(new_sizes)} for {numel} elements of shape {list(in_sizes)}",
                op=op,
            )
        sizes[wildcards[0]] = numel // known
    elif known != numel:
        raise FuserError(
            f"cannot reshape {list(in_sizes)} ({numel} elements) into {sizes} ({known} elements)",
            op=op,
        )
    return sizes


def analyze_view(in_sizes: Sequence[int], new_sizes: Sequence[int], op: str = "reshape") -> ViewAnalysis:
    out_sizes = resolve_shape(in_sizes, new_sizes, op)
    squeeze = tuple(s == 1 for s in in_sizes)
    broadcast = tuple(s == 1 for s in out_sizes)
    ins = [s for s in in_sizes if s != 1]
    outs = [s for s in out_sizes if s != 1]
    if 0 in ins or 0 in outs:
        raise FuserError("empty tensors are reshaped with full(), not analyzed", op=op)
    transforms: list[tuple[str, int, int]] = []
    i = j = 0
    pos = 0  # position in the working domain of the current group's first axis
    while i < len(ins):
        group_in, prod_in = 1, ins[i]
        while not _fits(prod_in, outs, j):
            prod_in *= ins[i + group_in]
            transforms.append(("merge", pos, 0))
            group_in += 1
        # Split the merged axis into as many output axes as it covers.
        remaining = prod_in
        while remaining != outs[j]:
            transforms.append(("split", pos, outs[j]))
            remaining //= outs[j]
            j += 1
            pos += 1
        j += 1
        pos += 1
        i += group_in
    return ViewAnalysis(squeeze, tuple(transforms), broadcast, tuple(out_sizes))


def _fits(prod_in: int, outs: Sequence[int], j: int) -> bool:
    """Whether `prod_in` is exactly the product of some run of outputs from `j`."""
    total = 1
    for s in outs[j:]:
        total *= s
        if total == prod_in:
            return True
        if total > prod_in:
            return False
    return False
