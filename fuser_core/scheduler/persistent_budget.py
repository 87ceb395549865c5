"""How an inner persistent kernel splits a row: persistent batch, threads, rows per block,
chosen against the register budget (the rules of nvFuser's inner-persistent heuristic,
csrc/scheduler/normalization_inner_non_tma.cpp, in our own terms).

A row of `lanes` vectors is split as `[batch, threads, vector]`: every thread holds
`batch` vectors of every persistent buffer in registers across the reduction. For each
batch size from the smallest the block limit allows to the largest the register budget
allows, the candidate's threads are padded to a warp multiple, short rows get several
rows per block, and the registers per thread follow from the occupancy the candidate
can reach. The chosen one, in order of preference:

1. reaches the target occupancy (enough warps per SM to hide the memory latency);
2. reduces a row within one warp (a short row, several to a block: warp shuffles and no
   block barrier, the two reductions of a softmax cost a few instructions);
3. splits the row evenly (no batch slots past the row's end);
4. leaves registers beyond the buffers for the rest of the kernel, in a block of at most
   512 threads (a small batch in a huge block reduces slowly);
5. reaches the higher occupancy;
6. holds the larger batch (more loads in flight per thread).

The registers per thread it settles on become `__launch_bounds__(threads, blocks per SM)`,
nvFuser's `maxrregcount`: the compiler is asked to fit exactly that budget. Once every
other choice is made (what stays in shared memory, which results are kept), the chosen
split takes as many blocks per SM as the estimated registers allow (`with_most_blocks`):
the target occupancy is a floor, not a ceiling (H100, layer norm of bf16 rows of 4096:
4 blocks of 256 with 64 registers allowed, 109.2 us; 5 at 48, 102.3 us, no spill).

When the buffers live in shared memory instead (`shared_bytes_per_row` > 0: the row did
not fit the registers), `bytes_per_lane` counts only what stays in registers, and the
shared memory caps the rows per block and the blocks per SM.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fuser_core.scheduler.device import DeviceProperties

TARGET_WARPS_PER_SM = 28  # nvFuser's figure for softmax/layer norm on A100 and H100
REGISTER_OVERHEAD = 16  # registers a thread needs besides its persistent buffers
REGISTER_OVERHEAD_EXP = 32  # ... when the kernel evaluates exp (longer live ranges)
MAX_BATCH = 10  # a larger batch lowers occupancy for little gain
MIN_THREADS_PER_BLOCK = 128
WARP_ROWS_MIN_WAVES = 4  # rows per SM from which a short row may take one warp
OPT_MAX_THREADS_PER_BLOCK = 512
REGISTER_GRANULARITY = 256  # registers are allocated per warp in units of 256
SM_PARTITIONS = 4  # warps are spread over four schedulers, registers split evenly
SHARED_RESERVED_PER_BLOCK = 1024  # shared memory the system keeps per resident block (sm_80+)
BYTES_PER_REGISTER = 4
# The raise (with_most_blocks) leaves a thread at least this many: where the buffers are
# small the overhead is more than REGISTER_OVERHEAD. ptxas (sm_90) on layer norm of bf16
# rows of 2048 and 3072 needs 40-43 registers, with 16 of buffers; capped at 32 it spilled
# 36 bytes, at 40 nothing did (66 persistent kernels scanned: layer norm, RMS norm and
# softmax, rows of 512 to 16384, bf16 and float).
MIN_RAISED_REGISTERS = 40
WARP = 32


@dataclass(frozen=True)
class PersistentSplit:
    batch: int  # vectors of the row each thread holds
    threads_x: int  # threads along the row (ceilDiv(lanes, batch))
    padded_x: int  # threads_x rounded up to a warp multiple: the launched blockDim.x
    rows_per_block: int  # blockDim.y
    registers: int  # registers per thread the kernel is compiled for
    warps_per_sm: int  # the occupancy those registers allow
    tails: int  # batch slots past the row's end
    spare_registers: int  # registers besides the buffers

    @property
    def threads(self) -> int:
        return self.padded_x * self.rows_per_block

    @property
    def blocks_per_sm(self) -> int:
        return max(1, self.warps_per_sm * 32 // self.threads)


def registers_per_thread(threads_per_sm: int, device: DeviceProperties) -> int:
    """The most registers each thread may use with `threads_per_sm` threads resident."""
    warps = max(1, -(-threads_per_sm // device.warp_size))
    per_partition = -(-warps // SM_PARTITIONS)
    per_warp = device.registers_per_sm // SM_PARTITIONS // per_partition
    per_warp -= per_warp % REGISTER_GRANULARITY
    return min(device.max_registers_per_thread, per_warp // device.warp_size)


def threads_per_sm(registers: int, device: DeviceProperties) -> int:
    """How many threads fit an SM when each uses `registers` registers."""
    per_warp = -(-registers * device.warp_size // REGISTER_GRANULARITY) * REGISTER_GRANULARITY
    warps = SM_PARTITIONS * (device.registers_per_sm // SM_PARTITIONS // max(per_warp, 1))
    return min(device.max_threads_per_sm, warps * device.warp_size)


def choose_split(
    lanes: int,
    rows: int,
    bytes_per_lane: int,
    has_exp: bool,
    device: DeviceProperties,
    shared_bytes_per_row: int = 0,
    row_registers: int = 0,
) -> PersistentSplit:
    """The split of a row of `lanes` vectors whose persistent buffers take `bytes_per_lane`
    bytes of registers per vector, for `rows` rows; with `shared_bytes_per_row` bytes of
    each row in shared memory, and `row_registers` held once per row whatever the batch
    (the values of per-row inputs)."""
    overhead = REGISTER_OVERHEAD_EXP if has_exp else REGISTER_OVERHEAD
    target_threads = min(TARGET_WARPS_PER_SM * device.warp_size, device.max_threads_per_sm)
    # Too few rows to fill the GPU: big blocks make the most of the SMs that get one.
    min_threads = MIN_THREADS_PER_BLOCK if rows >= device.sm_count else device.max_threads_per_block
    batch_min = max(1, -(-lanes // device.max_threads_per_block))
    budget = (registers_per_thread(target_threads, device) - overhead) * BYTES_PER_REGISTER
    batch_by_registers = max(1, budget // max(bytes_per_lane, 1))
    # With rows to spare a block holds several rows, so one row needs no more than a warp.
    row_threads = device.warp_size if rows >= WARP_ROWS_MIN_WAVES * device.sm_count else min_threads
    batch_by_threads = max(1, -(-lanes // row_threads))
    batch_max = max(batch_min, min(batch_by_threads, batch_by_registers, MAX_BATCH))
    # Rows per block: no more than the rows give each SM, nor than the registers hold.
    row_bytes = max(1, lanes * bytes_per_lane)
    max_rows = max(1, min(device.registers_per_sm * BYTES_PER_REGISTER // 2 // row_bytes, -(-rows // device.sm_count)))
    if shared_bytes_per_row:
        max_rows = max(1, min(max_rows, device.shared_memory_per_block // shared_bytes_per_row))
    candidates = [
        _candidate(lanes, batch, bytes_per_lane, overhead, target_threads, min_threads, max_rows, device, row_registers)
        for batch in range(batch_min, batch_max + 1)
    ]
    if shared_bytes_per_row:
        candidates = [_within_shared_memory(c, shared_bytes_per_row, device) for c in candidates]
    best_warps = max(c.warps_per_sm for c in candidates)
    target_warps = target_threads // device.warp_size
    if best_warps < target_warps:
        return next(c for c in candidates if c.warps_per_sm == best_warps)
    return max(candidates, key=lambda c: _preference(c, overhead, target_warps))


def _candidate(
    lanes: int,
    batch: int,
    bytes_per_lane: int,
    overhead: int,
    target_threads: int,
    min_threads: int,
    max_rows: int,
    device: DeviceProperties,
    row_registers: int = 0,
) -> PersistentSplit:
    warp = device.warp_size
    threads_x = -(-lanes // batch)
    padded_x = -(-threads_x // warp) * warp
    rows_per_block = max(1, min(min_threads // padded_x, max_rows, device.max_threads_per_block // padded_x))
    threads = padded_x * rows_per_block
    buffer_registers = -(-batch * bytes_per_lane // BYTES_PER_REGISTER) + row_registers
    needed = buffer_registers + overhead
    blocks = max(1, min(-(-target_threads // threads), device.max_threads_per_sm // threads))
    registers = registers_per_thread(threads * blocks, device)
    if registers < needed:  # the target occupancy leaves too few registers: fewer blocks
        blocks = max(1, threads_per_sm(needed, device) // threads)
        registers = registers_per_thread(threads * blocks, device)
    return PersistentSplit(
        batch=batch,
        threads_x=threads_x,
        padded_x=padded_x,
        rows_per_block=rows_per_block,
        registers=registers,
        warps_per_sm=threads * blocks // warp,
        tails=threads_x * batch - lanes,
        spare_registers=registers - buffer_registers,
    )


def _within_shared_memory(c: PersistentSplit, shared_bytes_per_row: int, device: DeviceProperties) -> PersistentSplit:
    """`c` with no more blocks per SM than the SM's shared memory holds, and the registers
    the fewer threads then allow."""
    per_block = c.rows_per_block * shared_bytes_per_row + SHARED_RESERVED_PER_BLOCK
    blocks = max(1, min(c.blocks_per_sm, device.shared_memory_per_sm // per_block))
    if blocks == c.blocks_per_sm:
        return c
    registers = registers_per_thread(c.threads * blocks, device)
    spare = c.spare_registers + registers - c.registers
    return replace(c, registers=registers, warps_per_sm=c.threads * blocks // device.warp_size, spare_registers=spare)


def _preference(c: PersistentSplit, overhead: int, target_warps: int) -> tuple[bool, bool, bool, bool, int, int]:
    return (
        c.warps_per_sm >= target_warps,
        c.padded_x == WARP,  # a row reduced within one warp: shuffles, no block barrier
        c.tails == 0,
        c.spare_registers > overhead and c.padded_x <= OPT_MAX_THREADS_PER_BLOCK,
        c.warps_per_sm,
        c.batch,
    )


def with_most_blocks(
    c: PersistentSplit, has_exp: bool, device: DeviceProperties, rows: int, reserved_registers: int = 0
) -> PersistentSplit:
    """`c` with as many blocks per SM as its buffers, `reserved_registers` more (results
    kept beside them) and the kernel's overhead leave registers for, within the SM's block
    limit and no more than the `rows` give each SM; `c` where that is no more than it has.
    Codegen lowers the blocks again where the kernel's own register arrays need more
    (codegen/lower/reductions.py, `_min_blocks`)."""
    overhead = REGISTER_OVERHEAD_EXP if has_exp else REGISTER_OVERHEAD
    needed = max(c.registers - c.spare_registers + reserved_registers + overhead, MIN_RAISED_REGISTERS)
    by_rows = -(-rows // (c.rows_per_block * device.sm_count))
    blocks = min(threads_per_sm(needed, device) // c.threads, device.max_blocks_per_sm, by_rows)
    if blocks <= c.blocks_per_sm:
        return c
    registers = registers_per_thread(c.threads * blocks, device)
    spare = c.spare_registers + registers - c.registers
    return replace(c, registers=registers, warps_per_sm=c.threads * blocks // device.warp_size, spare_registers=spare)
