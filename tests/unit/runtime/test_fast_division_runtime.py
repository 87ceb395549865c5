"""The cuda backend's packing of FastDivisor parameters, on the host: fake_cuda stands in
for CuPy, and each launch (the first run's and the fast path's replays) runs its kernel on
the kernel-IR interpreter with the magic numbers the runtime packed, so a divisor packed
wrong (or left unpacked) gives wrong outputs here."""

from __future__ import annotations

import numpy as np
import pytest
from fake_cuda import FakeCudaBackend, FakeDevice, interpreted_device, on_device

from fuser_core import FusionDefinition, FusionExecutorCache

RNG = np.random.default_rng(7)


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    return interpreted_device(monkeypatch)


def strided(device: FakeDevice, shape: tuple[int, int, int]):
    """A device array of `shape` cut from a larger one, so that no stride is the product of
    the inner sizes: an index decomposed wrong reads another element."""
    a, b, c = shape
    wide = RNG.standard_normal((a, b + 1, 2 * c + 3)).astype(np.float32)
    return on_device(device, wide)[:, 1:, : 2 * c : 2]


def test_non_contiguous_inputs_are_indexed_through_the_packed_divisors_on_every_path(device):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[False, False, False])
        t1 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[False, False, False])
        fd.add_output(fd.ops.add(fd.ops.mul(t0, t1), t0))
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    # A second shape: a new plan, with new magic numbers (the runtime is size-generic).
    for shape in ((5, 7, 9), (3, 11, 6)):
        x, y = strided(device, shape), strided(device, shape)
        for call in range(3):  # the first run, then the fast path's replays
            (out,) = cache.run([x, y])
            np.testing.assert_allclose(np.asarray(out), np.asarray(x) * np.asarray(y) + np.asarray(x), rtol=1e-6)
            if call:
                assert cache.last_report.event.reasons == ("fast path",)
    (kernel,) = cache.last_report.runtime.kernels
    assert kernel.index_type == "int"
    assert "FastDivisor T0_div2, FastDivisor T0_div1" in kernel.cuda
    assert "divisor T0_div2 = T0.logical_size[2]" in kernel.kernel_ir
