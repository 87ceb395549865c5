"""The pre-segmentation passes, in order, and the manager that runs and records them.

A pass is a named function `(fusion) -> bool` that rewrites the fusion in place and
says whether it changed anything. The order is one visible list, each entry with the
reason it stands where it does; the manager times every pass and keeps the printed IR
after it, which the workbench's per-stage views read (the core never calls the UI).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.printer import print_math
from fuser_core.passes.allocation_order import infer_allocation_hints, require_output_stride_orders
from fuser_core.passes.cast_folding import fold_consecutive_casts
from fuser_core.passes.dead_code import remove_dead_code
from fuser_core.passes.noop_removal import remove_noop_ops

Pass = Callable[[Fusion], bool]

# (name, pass, why it stands here), run top to bottom.
PRESEGMENTATION_PASSES: tuple[tuple[str, Pass, str], ...] = (
    (
        "dead_code_removal",
        remove_dead_code,
        "first: no later pass, and not the segmenter, may see or count a use that no "
        "output needs (the later passes remove what they make dead themselves)",
    ),
    (
        "consecutive_cast_folding",
        fold_consecutive_casts,
        "before no-op removal: folding x -> float -> x leaves a plain copy for it to remove",
    ),
    (
        "noop_removal",
        remove_noop_ops,
        "after cast folding, before any layout: a tensor that is only a copy must not be given an allocation domain",
    ),
    (
        "output_stride_order",
        require_output_stride_orders,
        "once the set of tensors is final (no-op removal may have changed which tensor is "
        "an output): a user's stride_order becomes that output's required allocation "
        "domain, before inference, which must leave requirements alone",
    ),
    (
        "allocation_order_inference",
        infer_allocation_hints,
        "last: it must see the final set of tensors and every requirement, and proposes "
        "hints from the inputs' layouts for the tensors that have none",
    ),
)


@dataclass(frozen=True)
class PassRecord:
    """One pass's run: its name, wall time, whether it changed the IR, and the IR after
    it (`print_math`) when recorded."""

    name: str
    seconds: float
    changed: bool
    ir_after: str | None
    skipped: bool = False  # turned off by an option


def run_presegmentation_passes(
    fusion: Fusion, *, record_ir: bool = True, skip: frozenset[str] = frozenset()
) -> list[PassRecord]:
    """Run every pass in order on `fusion` (in place) and record each; those in `skip`
    are recorded as skipped."""
    records = []
    for name, function, _why in PRESEGMENTATION_PASSES:
        if name in skip:
            records.append(PassRecord(name, 0.0, False, print_math(fusion) if record_ir else None, skipped=True))
            continue
        start = time.perf_counter()
        changed = function(fusion)
        seconds = time.perf_counter() - start
        records.append(PassRecord(name, seconds, changed, print_math(fusion) if record_ir else None))
    return records
