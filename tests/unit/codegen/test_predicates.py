"""Which bounds checks a kernel keeps: a split by 1 and a split the scheduler promised
divides (a vector width) never run past their input, so neither adds a check; a split
that may not divide keeps its check, and the interpreter proves the kept ones suffice."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import SAMPLES_DIR, check_generated_kernels, kernel_text


def _conditions(cuda: str) -> list[str]:
    return re.findall(r"if \((.*)\) \{", cuda)


def test_layer_norm_backward_checks_each_row_once_and_no_column():
    """The inner-outer kernel's rows: blocks take ceilDiv(N, blocks) rows each and the last
    ones run past N (checked); a block's rows grouped in twos (row_group) may run past its
    share by one, an odd one (checked, against that share); the split by threadIdx.y (1)
    and the row's split by the vector width (8 divides 1024) cannot run past (not
    checked). The kernel takes N at run time, so the checks stay where 2,000 rows happen to
    fill 125 blocks of 16 (row_blocks is a schedule constant; N is not)."""
    script = (SAMPLES_DIR / "layer_norm_bwd.py").read_text().replace("16384", "2000").replace("4096", "1024")
    cuda, runtime, inputs = kernel_text(script)
    conditions = _conditions(cuda)
    row_checks = [c for c in conditions if re.search(r"\) < T[0-3]\.logical_size\[0\]\)*$", c)]
    assert row_checks
    shares = [c for c in conditions if re.search(r"< ceilDiv\(T\d\.logical_size\[0\]", c)]
    assert shares and all(re.search(r"\(\(i\d+ \* 2\) \+ i\d+\) \+ i\d+\) < ceilDiv", c) for c in shares)
    assert not any(re.search(r"\* 8\) < T\d\.logical_size\[1\]", c) for c in conditions)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_row_per_block_needs_no_row_check():
    """cross_entropy_bwd: a row a block (blockIdx.x over N, split by threadIdx.y's 1): no
    row check; the vocabulary (32064, not a multiple of the 512 x 8 a step covers) keeps
    its check per vector."""
    script = (SAMPLES_DIR / "cross_entropy_bwd.py").read_text().replace("4096", "48")
    cuda, runtime, inputs = kernel_text(script)
    conditions = _conditions(cuda)
    assert not any("logical_size[0]" in c for c in conditions)
    assert any(re.search(r"\* 8\) < 32064\)*$", c) for c in conditions)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
