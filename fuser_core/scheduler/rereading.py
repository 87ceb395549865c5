"""When an inner normalization re-reads its row instead of holding it.

A persistent kernel reads its row once and holds it (as float) across the reductions; the
non-persistent one (the reduction scheduler's inner schedule) holds nothing and reads the
row again for each pass, mostly from L1 and L2, which a row just read is still in. Which
is faster depends on what the persistent kernel holds against what a pass re-reads.

Measured on an H100 (2026-11-26, 64 Mi elements per tensor, rows of 256 to 32768, the two
schedules forced in turn in one run on softmax, layer norm and RMS norm; the table is in
benchmarks/RESULTS.md, "Normalization, sixth part"):

- an exp normalization (softmax, cross-entropy) of 16-bit rows of 1024 elements or more
  re-read ran at 0.70-0.96 of the persistent time (cross-entropy's 32064-wide rows, held
  in shared memory at one block per SM, 0.82): the persistent kernel holds its row as float,
  twice the bytes a pass re-reads, beside the exp's live ranges, and its two dependent
  block reductions leave the memory idle that many re-reading blocks keep busy;
- float rows (a re-read costs as many bytes as the row held), rows of 256, and every layer
  norm (its non-persistent Welford divides per element) ran slower re-read: 1.02-1.71;
- RMS norm of 16-bit rows, without exp, came out even (0.87-1.04): it stays persistent.
"""

from __future__ import annotations

from fuser_core.ir.tensor_exprs import WelfordOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo

MIN_ROW = 1024  # elements: shorter rows measured faster held
MAX_ITEMSIZE = 2  # 16-bit rows: a pass re-reads half the bytes the persistent kernel holds


def has_exp(group: GroupView) -> bool:
    return any(getattr(getattr(e, "op_type", None), "name", "") in ("Exp", "Exp2", "Expm1") for e in group.exprs)


def why_hold(group: GroupView, info: RuntimeInfo, reference: TensorView) -> str | None:
    """Why the inner normalization `group` should hold its row (None: re-reading it is
    faster). `reference` is its first reduction tensor."""
    if not info.rereading:
        return "the disable option rereading is set"
    rows = max(1, info.numel(reference))
    length = max(1, info.numel(reference, include_reductions=True) // rows)
    if length < MIN_ROW:
        return f"rows of {length} elements, under {MIN_ROW}, are faster held"
    if not has_exp(group):
        return "no exp: re-reading the row measured no faster than holding it"
    if any(isinstance(e, WelfordOp) for e in group.exprs):
        return "a Welford: its non-persistent form divides per element"
    full = rows * length
    wide = [tv for tv in group.inputs if isinstance(tv, TensorView) and tv.dtype.itemsize > MAX_ITEMSIZE]
    wide = [tv for tv in wide if info.numel(tv) >= full]
    if wide:
        names = ", ".join(f"T{tv.name}" for tv in wide)
        return f"{names} read in {wide[0].dtype.itemsize}-byte elements: a re-read costs what holding it saves"
    return None
