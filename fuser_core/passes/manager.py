"""The pre-segmentation passes, in order, and the manager that runs and records them."""

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

# (name, pass, why it stands here)
PRESEGMENTATION_PASSES: tuple[tuple[str, Pass, str], ...] = (
    (
        "dead_code_removal",
        remove_dead_code,
        "first: no later pass, and not the segmenter, may count a use no output needs",
    ),
    (
        "consecutive_cast_folding",
        fold_consecutive_casts,
        "before no-op removal: folding x -> float -> x leaves a copy for it to remove",
    ),
    (
        "noop_removal",
        remove_noop_ops,
        "after folding, before layouts: tensors that are only copies must not get a layout",
    ),
    (
        "output_stride_order",
        require_output_stride_orders,
        "once the set of tensors is final: a user's stride_order becomes the output's "
        "required allocation domain, before inference, which must not touch it",
    ),
    (
        "allocation_order_inference",
        infer_allocation_hints,
        "last: it proposes hints from the inputs' layouts for the tensors that remain",
    ),
)


@dataclass(frozen=True)
class PassRecord:
    name: str
    seconds: float
    changed: bool
    ir_after: str | None


def run_presegmentation_passes(fusion: Fusion, *, record_ir: bool = True) -> list[PassRecord]:
    records = []
    for name, function, _ in PRESEGMENTATION_PASSES:
        start = time.perf_counter()
        changed = function(fusion)
        seconds = time.perf_counter() - start
        records.append(PassRecord(name, seconds, changed, print_math(fusion) if record_ir else None))
    return records
