"""The interpreter's memory: global, shared and register buffers, the scopes that hold
them, and the checks of every access (bounds, writes to inputs, data races, reads of
another thread's unsynced shared write, vector alignment)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from fuser_core.codegen.interpreter.launch import KernelFault, LaneWrites, TensorBinding, _Launch, _unravel
from fuser_core.codegen.interpreter.values import ScalarValue, _typed
from fuser_core.codegen.kernel_ir import Kernel, Memory
from fuser_core.codegen.magic_division import MagicDivisor
from fuser_core.ir.dtype import DataType

# The widest vector access a GPU makes (LDG.128 / STG.128).
MAX_VECTOR_BYTES = 16


@dataclass
class _Buffer:
    """Global storage `[size]`, a register array `[lanes, size]` or shared memory `[blocks, size]`."""

    name: str
    dtype: DataType
    memory: Memory
    data: np.ndarray
    writable: bool = True
    # Shared memory: the thread of its block that wrote each slot since the last Sync, or -1.
    unsynced: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.data.shape[-1])


@dataclass
class _Frame:
    """What a statement sees: the variables and buffers in scope and the active lanes."""

    vars: dict[str, np.ndarray]
    buffers: dict[str, _Buffer]
    mask: np.ndarray

    def child(self, mask: np.ndarray) -> _Frame:
        """A nested C block: its declarations end with it."""
        return _Frame(dict(self.vars), dict(self.buffers), mask)

    def masked(self, mask: np.ndarray) -> _Frame:
        """The same scope on fewer lanes (for the right side of `&&`/`||`)."""
        return _Frame(self.vars, self.buffers, mask)


def _offset_in_allocation(data: np.ndarray) -> int:
    """Bytes from the start of the allocation `data` views (its outermost base) to its
    first element, modulo 16: allocations are 16-byte aligned."""
    root = data
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return start % MAX_VECTOR_BYTES


class _Memory:
    """The machine's state and memory: the kernel's arguments bound as global buffers,
    and every read and write checked as a GPU needs it to be."""

    def __init__(
        self,
        kernel: Kernel,
        launch: _Launch,
        tensors: Mapping[str, TensorBinding],
        scalars: Mapping[str, ScalarValue],
        lane_writes: LaneWrites | None,
        divisors: Mapping[str, MagicDivisor] | None = None,
    ) -> None:
        self.kernel = kernel
        self.launch = launch
        self.bindings = dict(tensors)
        self.scalars = dict(scalars)
        self.lane_writes = lane_writes
        # The FastDivisor parameters as given (the runtime's packing); when none are given,
        # each is computed from its extent when first read, as the runtime computes it.
        self.divisors = dict(divisors or {})
        self.derive_divisors = divisors is None
        self.globals = self._bind_arguments()

    def fail(self, message: str) -> NoReturn:
        raise KernelFault(f"kernel {self.kernel.name}: {message}")

    def root_frame(self) -> _Frame:
        return _Frame({}, dict(self.globals), np.ones(self.launch.count, dtype=bool))

    def _bind_arguments(self) -> dict[str, _Buffer]:
        buffers = {}
        for arg in self.kernel.tensors:
            binding = self.bindings.get(arg.name)
            if binding is None:
                self.fail(f"tensor argument {arg.name} is not bound")
            storage = binding.storage
            if storage.ndim != 1 or storage.dtype != arg.dtype.numpy:
                self.fail(
                    f"{arg.name} is bound to a {storage.ndim}-d {storage.dtype} array; "
                    f"it needs flat {arg.dtype.numpy} storage"
                )
            if len(binding.logical_size) != arg.ndim or len(binding.alloc_stride) != arg.alloc_ndim:
                self.fail(
                    f"{arg.name} has {arg.ndim} logical and {arg.alloc_ndim} allocated axes; the binding gives "
                    f"logical_size {binding.logical_size} and alloc_stride {binding.alloc_stride}"
                )
            buffers[arg.name] = _Buffer(arg.name, arg.dtype, Memory.global_, storage, writable=arg.is_output)
        for scalar in self.kernel.scalars:
            if scalar.name not in self.scalars:
                self.fail(f"scalar argument {scalar.name} is not given")
        for divisor in self.kernel.divisors:
            if not self.derive_divisors and divisor.name not in self.divisors:
                self.fail(f"divisor argument {divisor.name} is not given")
        return buffers

    def first(self, bad: np.ndarray) -> int:
        """The first lane where `bad` holds."""
        return int(np.flatnonzero(np.broadcast_to(bad, (self.launch.count,)))[0])

    # -- memory -----------------------------------------------------------------------

    def buffer(self, name: str, frame: _Frame) -> _Buffer:
        buf = frame.buffers.get(name)
        if buf is None:
            self.fail(f"buffer {name} is neither a tensor argument nor allocated in scope")
        return buf

    def rows(self, buf: _Buffer) -> np.ndarray | None:
        """The row of a register array or shared buffer each lane accesses (None: global)."""
        if buf.memory is Memory.local:
            return self.launch.lanes
        if buf.memory is Memory.shared:
            return self.launch.block_of
        return None

    def offsets(self, buf: _Buffer, index: np.ndarray, mask: np.ndarray, access: str, width: int = 1) -> np.ndarray:
        """One element offset per lane: active lanes must cover `[index, index + width)`
        inside the buffer; inactive ones are clamped into it."""
        if index.dtype.kind not in "iu":
            self.fail(f"{access} of {buf.name} has a non-integer index of type {index.dtype}")
        idx = np.broadcast_to(index, mask.shape).astype(np.int64)
        bad = mask & ((idx < 0) | (idx > buf.size - width))
        if bad.any():
            lane = self.first(bad)
            span = f"[{idx[lane]}]" if width == 1 else f"[{idx[lane]} .. {idx[lane] + width - 1}]"
            self.fail(
                f"{access} {buf.name}{span} out of bounds ({buf.memory.value} buffer of {buf.size} elements) "
                f"on {self.launch.describe(lane)}"
            )
        return np.clip(idx, 0, max(buf.size - width, 0))

    def read(self, buf: _Buffer, index: np.ndarray, mask: np.ndarray) -> np.ndarray:
        idx = self.offsets(buf, index, mask, "read of")
        if buf.size == 0:  # no lane is active here: offsets() would have failed
            return np.zeros(self.launch.count, buf.data.dtype)
        rows = self.rows(buf)
        if buf.unsynced is not None and rows is not None:
            self.check_synced(buf, rows, idx, mask)
        return buf.data[idx] if rows is None else buf.data[rows, idx]

    def write(self, buf: _Buffer, index: np.ndarray, value: np.ndarray, mask: np.ndarray) -> None:
        if not buf.writable:
            self.fail(f"writes to input {buf.name}")
        idx = self.offsets(buf, index, mask, "write to")
        lanes = np.flatnonzero(mask)
        if lanes.size == 0:
            return
        idx = idx[lanes]
        values = _typed(np.broadcast_to(value, mask.shape)[lanes], buf.dtype)
        rows = self.rows(buf)
        if rows is None:
            self.check_race(buf, idx, values, lanes)
            buf.data[idx] = values
            self.record(buf, idx, lanes)
            return
        if buf.memory is Memory.shared:
            self.check_race(buf, rows[lanes] * buf.size + idx, values, lanes)
        buf.data[rows[lanes], idx] = values
        if buf.unsynced is not None:
            buf.unsynced[rows[lanes], idx] = self.launch.thread_of[lanes]

    def check_race(self, buf: _Buffer, slots: np.ndarray, values: np.ndarray, lanes: np.ndarray) -> None:
        """Two threads writing different values (bit for bit) to one slot is a data race."""
        order = np.argsort(slots, kind="stable")
        slots, values, lanes = slots[order], values[order], lanes[order]
        same_slot = slots[1:] == slots[:-1]
        if not same_slot.any():
            return
        bits = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), -1)
        clash = same_slot & (bits[1:] != bits[:-1]).any(axis=1)
        if clash.any():
            j = int(np.flatnonzero(clash)[0])
            element = int(slots[j]) % max(buf.size, 1)
            self.fail(
                f"data race: {self.launch.describe(int(lanes[j]))} and {self.launch.describe(int(lanes[j + 1]))} "
                f"write different values ({values[j]}, {values[j + 1]}) to {buf.name}[{element}]"
            )

    def check_synced(self, buf: _Buffer, rows: np.ndarray, idx: np.ndarray, mask: np.ndarray) -> None:
        """Reading a shared slot another thread wrote since the last Sync is a race."""
        assert buf.unsynced is not None
        writer = buf.unsynced[rows, idx]
        stale = mask & (writer >= 0) & (writer != self.launch.thread_of)
        if stale.any():
            lane = self.first(stale)
            other = _unravel(writer[lane : lane + 1], self.launch.block)[0]
            self.fail(
                f"{self.launch.describe(lane)} reads shared {buf.name}[{idx[lane]}] written by threadIdx="
                f"{tuple(int(c) for c in other)} with no Sync between"
            )

    def record(self, buf: _Buffer, idx: np.ndarray, lanes: np.ndarray) -> None:
        if self.lane_writes is not None and buf.name in self.lane_writes.lane:
            self.lane_writes.lane[buf.name][idx] = lanes
            np.add.at(self.lane_writes.count[buf.name], idx, 1)

    def check_aligned(self, buf: _Buffer, index: np.ndarray, width: int, mask: np.ndarray) -> None:
        """The byte address of a vector access must be a multiple of its size. Allocations
        are taken as 16-byte aligned; a tensor bound to a view (a slice of a larger array)
        starts where the view starts in its allocation."""
        itemsize = buf.dtype.itemsize
        address = _offset_in_allocation(buf.data) + np.broadcast_to(index, mask.shape).astype(np.int64) * itemsize
        misaligned = mask & (address % (width * itemsize) != 0)
        if misaligned.any():
            lane = self.first(misaligned)
            self.fail(
                f"vector x{width} access to {buf.name}[{np.broadcast_to(index, mask.shape)[lane]}] is not aligned "
                f"to {width} elements ({width * itemsize} bytes; byte {address[lane]} of its allocation) "
                f"on {self.launch.describe(lane)}"
            )
