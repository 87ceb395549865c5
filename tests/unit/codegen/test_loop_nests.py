"""Where loops go: an element-by-element input load in its own unrolled nest before the
first use (no consumer shares a producer's own loops), and which constant serial loops
NVRTC is told to unroll."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import SAMPLES_DIR, check_generated_kernels, kernel_text


def test_an_unrolled_pointwise_kernel_issues_every_load_before_its_first_store():
    """resize_pad reads its non-contiguous inputs element by element: each input's loads get
    a nest of their own, and the output's stores come after all of them (they could not
    pass a store: nothing tells NVRTC the tensors do not alias)."""
    script = (SAMPLES_DIR / "resize_pad_to_broadcast_dynamic.py").read_text().replace("65536", "2000")
    cuda, runtime, inputs = kernel_text(script)  # 480,000 elements: unrolled 4 times
    loads = [m.start() for m in re.finditer(r"= T[01]\[", cuda)]
    stores = [m.start() for m in re.finditer(r"\bT3\[", cuda)]
    assert len(loads) == 2 and stores
    assert max(loads) < min(stores)
    unrolled = re.findall(r"for \(nvfuser_index_t (i\d+) = 0; \1 < 4; \+\+\1\) \{  // iUR", cuda)
    assert len(unrolled) == 3  # two load nests, one compute
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def _pragmas_before(cuda: str, loop_header: str) -> set[str]:
    lines = cuda.splitlines()
    return {lines[at - 1].strip() for at, line in enumerate(lines) if loop_header in line}


def test_a_static_rows_steps_around_the_unrolled_axis_stay_a_loop():
    """cross_entropy_bwd's vocabulary is static (the iota meets the logits): its row's two
    steps have a constant count. Around the scheduler's unrolled axis they stay a loop
    (unrolled, every step's loads would be held at once)."""
    cuda, _, _ = kernel_text((SAMPLES_DIR / "cross_entropy_bwd.py").read_text())
    steps = re.findall(r"for \(nvfuser_index_t (i\d+) = 0; \1 < 2; \+\+\1\) \{  // rS", cuda)
    assert steps
    for index in set(steps):
        assert _pragmas_before(cuda, f"for (nvfuser_index_t {index} = 0; {index} < 2;") == {"#pragma unroll 1"}
    assert "T0.logical_size[1]" not in cuda and "32064" in cuda


def test_a_constant_loop_indexing_registers_is_unrolled():
    """bias_residual_layer_norm's persistent batch (2 steps) indexes its register buffers:
    unrolled, so that they stay registers."""
    cuda, _, _ = kernel_text((SAMPLES_DIR / "bias_residual_layer_norm.py").read_text())
    headers = re.findall(r"for \(nvfuser_index_t (i\d+) = 0; \1 < 2; \+\+\1\)", cuda)
    assert headers
    for index in set(headers):
        assert _pragmas_before(cuda, f"for (nvfuser_index_t {index} = 0; {index} < 2;") == {"#pragma unroll"}


def test_a_transpose_loads_its_other_input_after_the_tile_all_before_its_stores():
    """transpose_add stages y through shared memory; x is read in x's own order, after the
    tile's barrier (not held across the tile), every load before the first store."""
    from kernels_check import shrunk_sample

    cuda, runtime, inputs = kernel_text(shrunk_sample("transpose_add"))
    barrier = cuda.index("__syncthreads();")
    x_loads = [m.start() for m in re.finditer(r"(= |&)T0\[", cuda)]  # element or vector loads
    stores = [m.start() for m in re.finditer(r"&T[24]\[|\bT[24]\[[^;]*\] =", cuda)]
    assert x_loads and stores
    assert barrier < min(x_loads) and max(x_loads) < min(stores)
    nests = [m.start() for m in re.finditer(r"for \(nvfuser_index_t (i\d+) = 0;", cuda)]
    loads_nest = max(n for n in nests if n < min(x_loads))
    assert loads_nest > barrier  # the loads have a nest of their own after the tile
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def _loops_open_at(cuda: str, pattern: str) -> list[int]:
    """For each line matching `pattern`, how many `for` loops enclose it."""
    depths, scopes = [], []
    for line in cuda.splitlines():
        if re.search(pattern, line):
            depths.append(sum(scopes))
        for char in line:
            if char == "{":
                scopes.append(line.lstrip().startswith("for ("))
            elif char == "}":
                scopes.pop()
    return depths


def test_a_per_row_input_is_loaded_once_per_row_outside_the_row_loops():
    """cross-entropy's label and gradient are one value per row, broadcast along the
    vocabulary: each is loaded once, outside the loops over the row, not under every
    element's check in the output's loop (NVRTC cannot move a global load past the row's
    stores: it loaded both for each element), and before the row's first loop (in flight
    with the row's first loads). With several rows a block (100-wide rows) the load keeps
    its row's check."""
    text = (SAMPLES_DIR / "cross_entropy_bwd.py").read_text()
    for rows, vocab in [("40", "3000"), ("1000", "100")]:
        cuda, runtime, inputs = kernel_text(text.replace("4096", rows).replace("32064", vocab))
        first_loop = cuda.index("for (nvfuser_index_t")
        for name in ("T1", "T2"):
            assert _loops_open_at(cuda, rf"= {name}\[") == [0], (rows, vocab, name)
            assert cuda.index(f"= {name}[") < first_loop, (rows, vocab, name)
        assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_an_input_read_at_all_its_consumers_loops_is_not_taken_for_a_per_row_value():
    """A [1024, 1] input broadcast in the middle and reduced: its consumer runs leading
    broadcast loops before the input's own, then no loop of its own inside them. The input
    is not a per-row value (its loops are not a prefix of the consumer's by position only):
    it is loaded once, where it is read, not also in a nest of its own that nothing reads."""
    from fuser_core import DataType, FusionDefinition, use_options
    from fuser_core.codegen import print_kernel
    from fuser_core.codegen.lower import lower_group
    from fuser_core.runtime.group_lowering import index_dtype

    with FusionDefinition() as fd:
        t1 = fd.define_tensor(shape=[1024, 1], contiguity=[True, None], dtype=DataType.Double)
        fd.add_output(fd.ops.min(fd.ops.broadcast(t1, [False, True, False]), [0, 2]))
    inputs = [np.random.default_rng(3).standard_normal((1024, 1))]
    with use_options(device_model="h100_sxm", backend="reference"):
        fd.execute(inputs)
        runtime = fd.runtime_for(inputs)
    (group,) = runtime.segmented.groups
    cuda = print_kernel(lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type)))
    assert len(re.findall(r"= T0\[", cuda)) == 1
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
