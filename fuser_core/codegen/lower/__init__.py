"""Lowering: a scheduled group's fusion becomes a kernel IR loop nest.

Everything here is read off the schedule; nothing is decided per scheduler:

- **Loops** are the tensors' loop domains. Loop IDs replayed from the reference share
  its loops (their *concrete* ID is the end of the `replayed_from` chain); a tensor
  inlined at `ca_pos` k is computed inside the first k loops it shares with its consumers,
  and its other loop IDs become loops of its own. Parallel types bind loops to
  blockIdx/threadIdx, `V` makes one vector access, `UR` an unrolled loop.
- **Materialized** tensors (outputs, shared-memory tensors, and tensors inlined at
  `ca_pos` < their loop count) get a loop nest and a buffer: a register array over their
  own serial loops, a shared-memory tile, or the global output. Fully inlined tensors are
  scalar values computed where a consumer needs them.
- **Coordinates**: an output or a shared-memory tile computes its logical coordinates
  from its own loop indices, walking its Split/Merge/Resize transforms backward (with a
  bounds predicate where a split may not divide); every producer's coordinates come from
  its consumer's through the op (a broadcast reads 0, a slice or pad shifts by the Resize
  offset and a pad selects its value outside the input, a reshape inverts the consumer's
  rfactor transforms). A tensor needed at two different coordinate functions (RoPE's
  halves of one input) is computed once per function.
- **Indices** linearize coordinates with the allocation strides: literals when
  concretization made extents constant, `T0.logical_size[i]`/`alloc_stride[i]` otherwise;
  zero for broadcast axes.

`Lowering` is one class built as a stack of layers, one module each; a layer calls only
itself and the layers below it, so a method is found in the module of its concept:

- `arguments`: the lowering's state, kernel arguments, scalars and extents, what is materialized
- `loops`: the loop nest, scopes, thread/block bindings and launch dimensions
- `predicates`: bounds checks, overflow propagation, write predicates, `if` emission
- `indexing`: coordinates (backward), demanded instances, forward and global indices
- `buffers`: register arrays and shared tiles: allocated IDs, sizes, slots, padding
- `compute`: values: input loads, buffer reads, element-wise ops, cat, pad, iota, full, random
- `reductions`: serial accumulation, block/grid/Welford reductions, scratch and workspaces
- `stores`: materializing a tensor: vector width, global/shared/register stores
- `lowering`: refusals, emission, checks of the result, the `Kernel`, `lower_group`

beside plain helpers: `model` (loop IDs, instances, scopes), `elementwise` (op typing and
casts), `order` (the order materialized tensors are emitted in) and `fast_division` (the
last step of a 32-bit kernel: index divisions by run-time extents by magic numbers).
"""

from fuser_core.codegen.lower.lowering import Lowering, lower_group
from fuser_core.codegen.lower.model import (
    HARDWARE,
    INDEX,
    LOOP_KIND,
    TRUE,
    Coords,
    Instance,
    _loop_vars,
    concrete,
    loop_var,
)
from fuser_core.codegen.lower.reductions import MAX_BLOCK_THREADS, REDUCTION_MAX_THREADS

__all__ = [
    "HARDWARE",
    "INDEX",
    "LOOP_KIND",
    "MAX_BLOCK_THREADS",
    "REDUCTION_MAX_THREADS",
    "TRUE",
    "Coords",
    "Instance",
    "Lowering",
    "_loop_vars",
    "concrete",
    "loop_var",
    "lower_group",
]
