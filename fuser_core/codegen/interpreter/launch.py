"""A launch of the interpreter: the fault it raises, the tensors bound to it, the record
of which lane wrote each output element, and its lanes with their hardware indices."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fuser_core.errors import InternalError

Dim3 = tuple[int, int, int]

_AXES = ("x", "y", "z")
HARDWARE = tuple(f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx") for axis in _AXES)


class KernelFault(InternalError):
    """A kernel did what a GPU would get wrong or leave undefined (a bug of the lowering);
    the message names the kernel, the buffer, the index and the lane."""


# -- the launch's inputs and outputs ---------------------------------------------------


@dataclass(frozen=True)
class TensorBinding:
    """A tensor argument: flat storage (element offsets index it) and the run-time facts
    `TensorField` reads. Writes to an output go into `storage` itself."""

    storage: np.ndarray
    logical_size: tuple[int, ...]
    alloc_stride: tuple[int, ...]

    @classmethod
    def of(cls, array: np.ndarray) -> TensorBinding:
        """A C-contiguous array whose allocation axes are its logical axes; its storage is
        a view, so an output's results land in `array`."""
        if not array.flags.c_contiguous:
            raise ValueError("TensorBinding.of needs a C-contiguous array; build a TensorBinding for other layouts")
        strides = tuple(s // array.itemsize for s in array.strides)
        return cls(array.reshape(-1), tuple(array.shape), strides)


@dataclass
class LaneWrites:
    """Which thread wrote each element of each output; `interpret` fills it when given one.

    `lane[name][e]` is the lane that last wrote element `e` of output `name`'s storage
    (-1: none did) and `count[name][e]` how many writes it received.
    """

    grid: Dim3 = (1, 1, 1)
    block: Dim3 = (1, 1, 1)
    lane: dict[str, np.ndarray] = field(default_factory=dict)
    count: dict[str, np.ndarray] = field(default_factory=dict)

    def writer(self, buffer: str, element: int) -> tuple[Dim3, Dim3] | None:
        """(blockIdx, threadIdx) of the last write to `buffer[element]`, None if never written."""
        row = self.coordinates(buffer)[element]
        if row[0] < 0:
            return None
        return (int(row[0]), int(row[1]), int(row[2])), (int(row[3]), int(row[4]), int(row[5]))

    def coordinates(self, buffer: str) -> np.ndarray:
        """`[elements, 6]`: blockIdx.x/y/z, threadIdx.x/y/z of each element's last writer, -1 if none."""
        lanes = self.lane[buffer]
        threads = math.prod(self.block)
        coords = np.concatenate([_unravel(lanes // threads, self.grid), _unravel(lanes % threads, self.block)], axis=1)
        coords[lanes < 0] = -1
        return coords


def _unravel(linear: np.ndarray, dims: Dim3) -> np.ndarray:
    """x-fastest linear indices as `[n, 3]` (x, y, z) coordinates."""
    x, y = dims[0], dims[1]
    return np.stack([linear % x, linear // x % y, linear // (x * y)], axis=1)


class _Launch:
    """The lanes of a launch and each one's hardware indices."""

    def __init__(self, grid: Dim3, block: Dim3, only_blocks: np.ndarray | None = None) -> None:
        """Every block of the grid, or only the x-fastest linear block ids `only_blocks`
        (a tracer runs the few blocks that matter; lanes and shared-memory rows then
        number those blocks alone, while blockIdx and gridDim stay the launch's)."""
        self.grid, self.block = grid, block
        block_ids = np.arange(math.prod(grid), dtype=np.int64) if only_blocks is None else only_blocks
        self.blocks, self.threads = len(block_ids), math.prod(block)
        self.count = self.blocks * self.threads
        lane = np.arange(self.count, dtype=np.int64)
        self.block_of, self.thread_of = lane // self.threads, lane % self.threads
        self.lanes = lane
        self.dims: dict[str, int] = {}
        self.index: dict[str, np.ndarray] = {}
        grid_block = block_ids[self.block_of]
        for kind, linear, dims in (("blockIdx", grid_block, grid), ("threadIdx", self.thread_of, block)):
            coords = _unravel(linear, dims)
            for a, axis in enumerate(_AXES):
                self.dims[f"{kind}.{axis}"] = dims[a]
                self.index[f"{kind}.{axis}"] = coords[:, a]

    def describe(self, lane: int) -> str:
        b = tuple(int(self.index[f"blockIdx.{axis}"][lane]) for axis in _AXES)
        t = tuple(int(self.index[f"threadIdx.{axis}"][lane]) for axis in _AXES)
        return f"blockIdx={b} threadIdx={t}"
