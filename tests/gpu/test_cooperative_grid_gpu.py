"""An inner-outer kernel's column sums folded by every block after a grid barrier (a
cooperative launch, runtime header gridSync/gridFold) on the GPU, against the reference
backend on random data and against the two-level tree the disable option
`cooperative_grid` keeps: at hidden sizes whose blocks fold one chunk of columns (4096)
and several (1536 at 1 block an SM, 768), launched several times over the same semaphores,
the two forms interleaved."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import load_repro, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_cuda_backend import _compare, _host, _to_device  # noqa: E402
from test_row_groups import _layer_norm_backward  # noqa: E402


@pytest.mark.parametrize(
    "rows, hidden, dtype", [(16384, 4096, "BFloat16"), (8192, 1536, "BFloat16"), (4001, 768, "Float")]
)
def test_folded_in_every_block_it_matches_the_reference_and_the_tree(rows, hidden, dtype):
    (loaded,) = load_repro(_layer_norm_backward(rows, hidden, dtype)).definitions
    inputs = loaded.materialize_inputs(seed=8)
    fd = loaded.fd
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    on_gpu = [_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs]
    results = {}
    for _ in range(3):  # each form's semaphores are left zeroed for its next launch
        for form, disable in (("cooperative", []), ("tree", ["cooperative_grid"])):
            with use_options(backend="cuda", disable=disable):
                got = fd.execute(on_gpu)
            # what the kernel does, not only what the scheduler asked for (codegen keeps the
            # tree where the registers do not allow the blocks per SM it assumed)
            (kernel,) = fd.executor_cache.last_runtime.kernels
            assert ("gridSync<" in kernel.cuda) == (form == "cooperative"), form
            outs = [_host(g, tv.dtype) for g, tv in zip(got, fd.fusion.outputs, strict=True)]
            for out, want, tv in zip(outs, expected, fd.fusion.outputs, strict=True):
                _compare(out, want, f"{form} T{tv.name}", tv.dtype)
            if form in results:  # the same bits every launch: the fold order is the launch's
                assert all(np.array_equal(a, b) for a, b in zip(results[form], outs, strict=True)), form
            results[form] = outs
    # the input gradient does not go through the grid reduction: the same in both forms
    assert np.array_equal(results["cooperative"][0], results["tree"][0])
