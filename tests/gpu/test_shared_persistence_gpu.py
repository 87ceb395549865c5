"""Cross-entropy backward rows too long for registers (32768 and GPT-2's 50257 floats):
the inner persistent kernel keeps them in shared memory (dynamic, past 48 KiB, one row
per block) and its output matches NumPy's softmax(logits) - one_hot(labels), times grad."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import load_repro, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_cuda_backend import _host, _to_device  # noqa: E402
from test_shared_persistence import cross_entropy  # noqa: E402

from fuser_core.ir.dtype import DataType  # noqa: E402


def _numpy_reference(logits: np.ndarray, labels: np.ndarray, grad: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    softmax = e / e.sum(axis=1, keepdims=True)
    one_hot = np.arange(x.shape[1])[None, :] == labels[:, None]
    return (softmax - one_hot) * grad.astype(np.float64)[:, None]


@pytest.mark.parametrize(("rows", "cols"), [(264, 49152), (300, 50257)])
def test_cross_entropy_bwd_with_its_rows_in_shared_memory_matches_numpy(rows, cols):
    # bf16 logits cast to float: the float row is the buffer (an input kept as read stays
    # in registers). The reference takes the same bf16 values exactly; the output is bf16.
    (loaded,) = load_repro(cross_entropy(rows, cols)).definitions
    pytest.importorskip("torch")  # bf16 device arrays go through torch
    rng = np.random.default_rng(7)
    logits = (rng.standard_normal((rows, cols)) * 3).astype(DataType.BFloat16.numpy)
    labels = rng.integers(0, cols, rows).astype(np.int64)
    grad = rng.standard_normal(rows).astype(DataType.BFloat16.numpy)
    # held in shared memory only with re-reading disabled (scheduler.rereading re-reads bf16 rows)
    with use_options(backend="cuda", disable=["rereading"]):
        (got,) = loaded.fd.execute([_to_device(logits), _to_device(labels), _to_device(grad)])
    report = loaded.fd.executor_cache.last_report
    assert report.runtime.backend_name == "cuda"
    (group,) = report.runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent" and group.params.buffer_in_shared_memory
    expected = _numpy_reference(logits, labels, grad)
    np.testing.assert_allclose(_host(got, DataType.BFloat16).astype(np.float64), expected, rtol=2**-7, atol=1e-6)
    # and re-read, as it runs by default
    with use_options(backend="cuda"):
        (got,) = loaded.fd.execute([_to_device(logits), _to_device(labels), _to_device(grad)])
    (group,) = loaded.fd.executor_cache.last_report.runtime.segmented.groups
    assert group.scheduler.value == "reduction" and not group.params.persistent
    assert group.params.streaming_stores  # its output stored evict-first (vectorized where aligned)
    np.testing.assert_allclose(_host(got, DataType.BFloat16).astype(np.float64), expected, rtol=2**-7, atol=1e-6)
