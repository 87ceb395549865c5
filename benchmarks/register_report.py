"""Registers, spills and launch bounds of every sample's kernels, without a GPU.

Each sample at its bundled size is scheduled for the named H100 model, lowered, and
compiled by NVRTC for sm_90 with `-Xptxas -v`; ptxas' own report gives the registers
per thread, the spill stores and loads, and the stack frame. `words` is what the kernel's
register arrays take (32-bit words per thread), which `__launch_bounds__` is sized from.

    python benchmarks/register_report.py [sample ...]

Options come from the environment: `FUSER_DISABLE=shared_persistence` reports the inner
persistent kernels as they are with their rows kept in registers (spilling).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "codegen"))

from kernels_check import SAMPLES, runtime_and_inputs  # noqa: E402

from fuser_core.codegen import kernel_ir as k  # noqa: E402
from fuser_core.codegen import lower_group, translation_unit  # noqa: E402
from fuser_core.runtime import nvrtc  # noqa: E402
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype  # noqa: E402


def register_words(kernel: k.Kernel) -> int:
    return sum(
        -(-s.size * s.dtype.itemsize // 4)
        for s in k.walk(kernel.body)
        if isinstance(s, k.Alloc) and s.memory == k.Memory.local
    )


def report(name: str) -> list[str]:
    runtime, _ = runtime_and_inputs(ROOT / "sample_fusions" / f"{name}.py")
    lines = []
    for group in runtime.segmented.groups:
        if not generates_kernel(group):
            continue
        kernel = lower_group(group.fusion, f"{name}_g{group.id}", index_dtype(runtime.signature.index_type))
        options = (*nvrtc.DEFAULT_OPTIONS, "-Xptxas", "-v")
        log = nvrtc.compile_program(translation_unit(kernel), [kernel.name], arch="sm_90", options=options).log
        regs = re.search(r"Used (\d+) registers", log)
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        stack = re.search(r"(\d+) bytes stack frame", log)
        bounds = f"({kernel.max_threads}, {kernel.min_blocks})" if kernel.max_threads else "-"
        lines.append(
            f"{name:28s} g{group.id} {group.scheduler.value:17s} words {register_words(kernel):4d}"
            f"  launch_bounds {bounds:12s} regs {regs.group(1) if regs else '?':>3s}"
            f"  spill {spill.group(1) if spill else '?'}/{spill.group(2) if spill else '?'}"
            f"  stack {stack.group(1) if stack else '?'}"
        )
    return lines


def main(names: list[str]) -> None:
    for name in names or SAMPLES:
        for line in report(name):
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
