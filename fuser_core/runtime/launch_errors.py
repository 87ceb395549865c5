"""CUDA faults of a run, as FuserErrors that say which kernel faulted, with what launch,
from which lines of the script.

A launch that CUDA refuses (too many threads or registers for a block, an invalid
argument) fails at once, in the call that launched it. A fault while a kernel runs (a
misaligned or illegal address, a device-side assert) is asynchronous: CUDA reports it at
a later call, the next launch or synchronization, and it is sticky: the process's CUDA
context stays unusable and every later call fails with the same error. So each
executable keeps a LaunchLog of the kernels it launched since its last successful
synchronization, and a CUDA error names all of them; with the `sync_launches` option the
backend synchronizes after every launch, and the error names the one kernel that
faulted. Without that option nothing here synchronizes: the log costs a small record per
launch where a run goes through CudaExecutable.run, and one call per replay on the fast
path.

CuPy raises CUDADriverError (`CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address`) and
CUDARuntimeError (`cudaErrorIllegalAddress: an illegal memory access was encountered`);
torch, for the outputs it allocates, a RuntimeError (`CUDA error: ...`). They are told
apart by their names and texts, so this module imports neither.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fuser_core.errors import FuserError, SourceLocation
from fuser_core.runtime.artifacts import LaunchParams

SYNC_OPTION = "sync_launches"
RERUN_HINT = (
    f"To name the kernel that faulted, run again with the enable option {SYNC_OPTION} "
    f'(FUSER_ENABLE={SYNC_OPTION}, use_options(enable="{SYNC_OPTION}") or --enable {SYNC_OPTION}): '
    "it synchronizes after every launch."
)
STICKY_NOTE = (
    "This is a sticky fault: this process's CUDA context is unusable now and every later CUDA call in it "
    "fails; restart the process to run on the GPU again."
)

_ERROR_TYPES = frozenset({"CUDADriverError", "CUDARuntimeError", "AcceleratorError"})
# CUresult / cudaError_t values (the same numbers in both) after which the context is lost.
_STICKY_CODES = frozenset({214, 700, 702, 710, 714, 715, 716, 717, 718, 719})
_STICKY_NAMES = frozenset(
    {
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_LAUNCH_FAILED",
        "cudaErrorECCUncorrectable",
        "cudaErrorIllegalAddress",
        "cudaErrorLaunchTimeout",
        "cudaErrorAssert",
        "cudaErrorHardwareStackError",
        "cudaErrorIllegalInstruction",
        "cudaErrorMisalignedAddress",
        "cudaErrorInvalidAddressSpace",
        "cudaErrorInvalidPc",
        "cudaErrorLaunchFailure",
    }
)
# How torch words the same faults (it gives no code).
_STICKY_TEXTS = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
    "device-side assert",
    "invalid program counter",
    "hardware stack error",
    "launch timed out",
    "invalid address space",
    "uncorrectable ecc",
)
_CODE = re.compile(r"^(CUDA_ERROR_[A-Z0-9_]+|cudaError[A-Za-z0-9]+)$")


def is_cuda_error(err: BaseException) -> bool:
    """Whether `err` is CUDA's (CuPy's driver or runtime error, torch's CUDA error), not ours."""
    if isinstance(err, FuserError):
        return False
    if {cls.__name__ for cls in type(err).__mro__} & _ERROR_TYPES:
        return True
    return isinstance(err, RuntimeError) and str(err).startswith("CUDA error")


def error_text(err: BaseException) -> str:
    """CUDA's words: the first line of the error (torch adds advice lines after it)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def error_code(err: BaseException) -> str:
    """`CUDA_ERROR_MISALIGNED_ADDRESS`, `cudaErrorIllegalAddress`; "" where CUDA's text has none."""
    head = error_text(err).split(":", 1)[0].strip()
    return head if _CODE.match(head) else ""


def is_sticky(err: BaseException) -> bool:
    """Whether the error leaves the process's CUDA context unusable."""
    status = getattr(err, "status", None)
    if isinstance(status, int) and status in _STICKY_CODES:
        return True
    if error_code(err) in _STICKY_NAMES:
        return True
    text = error_text(err).lower()
    return any(words in text for words in _STICKY_TEXTS)


def launch_blocking() -> bool:
    """CUDA_LAUNCH_BLOCKING=1 makes every launch wait for its kernel, so a launch reports its own fault."""
    return os.environ.get("CUDA_LAUNCH_BLOCKING", "") == "1"


def script_lines(locations: Iterable[SourceLocation]) -> str:
    """`softmax.py:12-14,17`: the lines, by file, with runs of lines joined."""
    by_file: dict[str, list[int]] = {}
    for loc in locations:
        by_file.setdefault(os.path.basename(loc.filename), []).append(loc.lineno)
    return "; ".join(f"{name}:{_runs(sorted(set(lines)))}" for name, lines in by_file.items())


def _runs(lines: list[int]) -> str:
    parts: list[str] = []
    start = previous = lines[0]
    for line in [*lines[1:], None]:
        if line is not None and line == previous + 1:
            previous = line
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if line is not None:
            start = previous = line
    return ",".join(parts)


def op_locations(exprs: Iterable[Any]) -> tuple[SourceLocation, ...]:
    """The script lines of a group's expressions (those the frontend or the repro loader
    recorded), in line order."""
    found = {e.location for e in exprs if getattr(e, "location", None) is not None}
    return tuple(sorted(found, key=lambda loc: (loc.filename, loc.lineno)))


@dataclass(frozen=True)
class FaultKernel:
    """One kernel launch a CUDA error may come from."""

    group_id: int
    name: str  # nvfuser_<scheduler>_f<F>_c<C>_r<R>_g<G>
    scheduler: str
    launch: LaunchParams
    form: str = ""  # "scalar fallback" where the vectorized kernel's fallback was launched
    lines: tuple[SourceLocation, ...] = ()  # where the group's ops are in the script

    @property
    def label(self) -> str:
        return f"g{self.group_id} {self.name}" + (f" ({self.form})" if self.form else "")

    def launch_text(self) -> str:
        p = self.launch
        return f"grid {p.grid}, block {p.block}, {p.shared_bytes} bytes of shared memory"

    def describe(self) -> str:
        text = f"{self.label}, {self.scheduler} scheduler: {self.launch_text()}"
        where = script_lines(self.lines)
        return text + (f"; its ops at {where}" if where else "")


@dataclass(frozen=True)
class CudaFault:
    """A CUDA error of a run, and the kernels it may come from."""

    error: str  # CUDA's words: "CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address"
    code: str  # "CUDA_ERROR_MISALIGNED_ADDRESS", or "" where CUDA's text has no code
    sticky: bool  # the process's CUDA context is unusable now
    where: str  # what the backend was doing when CUDA reported it
    kernels: tuple[FaultKernel, ...]  # the kernel that faulted when pinned, else each that may have
    pinned: bool  # `kernels` is the one kernel the error belongs to
    runtime: str  # f<F>_c<C>_r<R> of the runtime that ran
    synchronized_launches: bool = False  # the run had sync_launches on
    earlier: tuple[FaultKernel, ...] = ()  # launched before this run and not synchronized since
    lost_before: str = ""  # an earlier sticky fault of this process, in one line

    def summary(self) -> str:
        """One line: the error and the kernel(s) it may come from."""
        named = self.kernels or self.earlier
        if not named:
            return f"{self.error}, from GPU work before run {self.runtime}"
        where = "in" if self.pinned or len(named) == 1 else "in one of"
        return f"{self.error} {where} {', '.join(k.label for k in named)}"

    def message(self) -> str:
        lines = [f"CUDA error {self.error}, reported when {self.where}."]
        lines += self._culprits()
        lines.append(STICKY_NOTE if self.sticky else "The CUDA context is still usable.")
        return "\n".join(lines)

    def _culprits(self) -> list[str]:
        if self.pinned and not self.sticky and self.where.startswith("launching"):
            return [f"CUDA refused to launch this kernel: {self.kernels[0].describe()}."]
        if self.pinned:
            return [f"The kernel that faulted: {self.kernels[0].describe()}."]
        if self.lost_before:
            return [f"This process's CUDA context was already lost to an earlier sticky fault ({self.lost_before})."]
        if not self.kernels:
            return self._before_the_run()
        count = len(self.kernels)
        lines = [
            "CUDA reports a fault of a running kernel at a later call, so it may come from "
            + ("the one kernel" if count == 1 else f"any of the {count} kernels")
            + " this run launched since its last synchronization:",
            *(f"  {k.describe()}" for k in self.kernels),
        ]
        if not self.synchronized_launches:
            lines.append(RERUN_HINT)
        return lines

    def _before_the_run(self) -> list[str]:
        lines = ["This run had launched no kernel yet: the fault comes from"]
        if not self.earlier:
            lines[0] += " GPU work before it (an earlier run, a library call or the caller's own)."
            return lines
        lines[0] += " GPU work before it, most likely one of these kernels, launched before this run and not"
        lines[0] += " synchronized since:"
        lines += [f"  {k.describe()}" for k in self.earlier]
        lines.append(RERUN_HINT)
        return lines


class CudaFaultError(FuserError):
    """A CUDA error of a run: `fault` holds the error and the kernels with their launch
    parameters, `runtime` the FusionKernelRuntime that ran them (its `kernels` hold their
    CUDA), set by the executor cache."""

    def __init__(self, fault: CudaFault, location: SourceLocation | None = None) -> None:
        super().__init__(fault.message(), location=location)
        self.fault = fault
        self.runtime: Any = None

    @property
    def kernels(self) -> tuple[FaultKernel, ...]:
        return self.fault.kernels


# The log that launched last in this process (kernels of another runtime can be what a
# run finds faulted), and the first sticky fault this process saw.
_LATEST: list[LaunchLog | None] = [None]
_LOST: list[CudaFault | None] = [None]


class LaunchLog:
    """The kernels one executable launched since its last successful synchronization,
    and what it was doing; `error` turns a CUDA error into a CudaFaultError."""

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        self.pending: Sequence[FaultKernel] = ()
        self.earlier: tuple[FaultKernel, ...] = ()
        self.where = ""
        self.in_launch: FaultKernel | None = None  # its launch call is in flight
        self.syncing: FaultKernel | None = None  # synchronizing right after its launch
        self.sync = False

    def begin(self, sync: bool = False) -> None:
        """A run starts: what the last run of any executable left unsynchronized is `earlier`."""
        latest = _LATEST[0]
        self.earlier = tuple(latest.pending) if latest is not None else ()
        _LATEST[0] = self
        self.pending = []
        self.in_launch = self.syncing = None
        self.sync = sync
        self.where = "preparing the run, before it launched any kernel"

    def launching(self, kernel: FaultKernel) -> None:
        assert isinstance(self.pending, list)
        self.pending.append(kernel)
        self.in_launch = kernel
        self.where = f"launching {kernel.label}"

    def launched(self) -> None:
        kernel, self.in_launch = self.in_launch, None
        if kernel is not None:
            self.where = f"running the host code after launching {kernel.label}"

    def synchronizing(self) -> None:
        """Synchronizing after the last launch (sync_launches)."""
        self.syncing = self.pending[-1] if self.pending else None
        if self.syncing is not None:
            self.where = f"synchronizing after {self.syncing.label} ({SYNC_OPTION})"

    def synchronized(self) -> None:
        self.pending = []
        self.syncing = None

    def replayed(self, kernels: Sequence[FaultKernel]) -> None:
        """The fast path replayed these launches (and did not synchronize)."""
        self.pending = kernels
        _LATEST[0] = self

    def replay_failed(self, err: BaseException, kernels: Sequence[FaultKernel], in_launch: bool) -> CudaFaultError:
        """The fast path's replay met a CUDA error after launching `kernels` (the last
        one's launch call raised it when `in_launch`)."""
        self.begin()
        for kernel in kernels:
            self.launching(kernel)
            self.launched()
        if in_launch and kernels:
            self.in_launch = kernels[-1]
            self.where = f"launching {kernels[-1].label}"
        elif kernels:
            self.where = f"allocating outputs after launching {kernels[-1].label}"
        return self.error(err)

    def error(self, err: BaseException) -> CudaFaultError:
        sticky = is_sticky(err)
        pending = tuple(self.pending)
        pinned = True
        if self.in_launch is not None and (not sticky or launch_blocking()):
            kernels: tuple[FaultKernel, ...] = (self.in_launch,)
        elif self.syncing is not None:
            kernels = (self.syncing,)
        else:
            # A launch reports the faults of the work before it, never its own.
            kernels, pinned = (pending[:-1] if self.in_launch is not None else pending), False
        lost = _LOST[0]
        fault = CudaFault(
            error_text(err),
            error_code(err),
            sticky,
            self.where,
            kernels,
            pinned,
            self.runtime,
            self.sync,
            self.earlier,
            lost.summary() if lost is not None and sticky and not kernels else "",
        )
        if sticky and lost is None:
            _LOST[0] = fault
        self.in_launch = self.syncing = None
        return CudaFaultError(fault, _location(kernels))


def _location(kernels: tuple[FaultKernel, ...]) -> SourceLocation | None:
    """The script line an error of these kernels points at: the first op of the one kernel."""
    if len(kernels) == 1 and kernels[0].lines:
        return kernels[0].lines[0]
    return None
