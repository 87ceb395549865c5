"""Frontend semantics on the GPU that nvFuser's own tests check: an output that is a
view of an input shares its storage with no kernel (test_mark_alias_pass); an empty
user schedule runs one serial kernel named "user"; unseeded random ops follow torch's
CUDA generator (test_deterministic_random)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options

pytestmark = pytest.mark.gpu


def _reshape_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([2, 3, 4], contiguity=[True, True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(x, [2, 12]))
    return fd


def test_a_view_of_a_cupy_input_shares_its_memory() -> None:
    import cupy

    x = cupy.asarray(np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32))
    fd = _reshape_fusion()
    with use_options(backend="cuda"):
        (out,) = fd.execute([x])
        report = fd._executor.last_report  # type: ignore[union-attr]
    assert out.data.ptr == x.data.ptr
    np.testing.assert_array_equal(out.get(), x.get().reshape(2, 12))
    assert report.launches == ()  # no kernel ran


def test_a_view_of_a_torch_input_has_its_data_ptr() -> None:
    torch = pytest.importorskip("torch")
    x = torch.rand(2, 3, 4, device="cuda")
    fd = _reshape_fusion()
    with use_options(backend="cuda"):
        (out,) = fd.execute([x])
    assert isinstance(out, torch.Tensor)
    assert out.data_ptr() == x.data_ptr()
    assert torch.equal(out, x.reshape(2, 12))


def test_an_empty_user_schedule_runs_its_serial_kernel_on_the_device() -> None:
    torch = pytest.importorskip("torch")
    a, b = torch.randn(37, 19, device="cuda"), torch.randn(37, 19, device="cuda")

    class Mine(FusionDefinition):
        def definition(self) -> None:
            t0, t1 = self.from_pytorch(a), self.from_pytorch(b)
            self.add_output(self.ops.mul(self.ops.add(t0, t1), t1))

        def schedule(self) -> None:
            pass

    fd = Mine()
    with use_options(backend="cuda"):
        (out,) = fd.execute([a, b], profile=True)
    assert fd.profile().kernel_profiles[0].scheduler == "user"
    assert fd.profile().kernel_profiles[0].on_host is False
    torch.testing.assert_close(out, (a + b) * b)


def test_unseeded_random_follows_torchs_cuda_generator() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(5, 9, device="cuda")
    with FusionDefinition() as stateful:
        stateful.add_output(stateful.ops.mul(stateful.from_pytorch(x), stateful.ops.uniform(0.3, 1.7, [5, 9])))
    with FusionDefinition() as seeded:
        t = seeded.from_pytorch(x)
        seed, offset = seeded.define_scalar(DataType.Int), seeded.define_scalar(DataType.Int)
        seeded.add_output(seeded.ops.mul(t, seeded.ops.uniform(0.3, 1.7, [5, 9], rng_seed=seed, rng_offset=offset)))
    torch.manual_seed(1234)
    with use_options(backend="cuda"):
        runs = [stateful.execute([x])[0] for _ in range(3)]
        for k, run in enumerate(runs):
            torch.testing.assert_close(run, seeded.execute([x, 1234, k])[0])


def test_a_cupy_output_the_caller_dropped_is_given_again_and_a_reachable_one_is_not() -> None:
    """The fast path's RecycledOutput on CuPy itself: its reference counts are CuPy's."""
    import cupy

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t0, fd.define_scalar(2.0)))
    rng = np.random.default_rng(1)
    inputs = [cupy.asarray(rng.standard_normal((64, 256)).astype(np.float32)) for _ in range(3)]
    keepers = [lambda a: a[1:], lambda a: a.T, lambda a: a.data, lambda a: a.data + 4, lambda a: [a]]
    try:
        import torch

        keepers.append(lambda a: torch.from_dlpack(a))
    except ImportError:
        pass
    with use_options(backend="cuda"):
        fd.execute([inputs[0]])
        (out,) = fd.execute([inputs[0]])
        ptr, identity = out.data.ptr, id(out)
        del out
        (again,) = fd.execute([inputs[1]])
        # the same array (kept alive by the plan, so no other object has its id), new values
        assert id(again) == identity and again.data.ptr == ptr
        np.testing.assert_array_equal(again.get(), inputs[1].get() * 2)
        for index, keep in enumerate(keepers):
            kept, host, ptr = keep(again), again.get(), again.data.ptr
            del again
            x = inputs[2 - index % 2]  # other values than the kept output's
            (again,) = fd.execute([x])
            assert again.data.ptr != ptr  # still reachable: a new one
            np.testing.assert_array_equal(again.get(), x.get() * 2)
            if isinstance(kept, cupy.ndarray) and kept.shape == (63, 256):
                np.testing.assert_array_equal(kept.get(), host[1:])  # untouched
            del kept


def test_a_reshape_of_a_kernel_result_launches_no_second_kernel() -> None:
    import cupy

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "scheduler"))
    from test_aliases import flattened_softmax

    fd = flattened_softmax()
    a = np.random.default_rng(5).standard_normal((512, 1000)).astype(np.float32)
    with use_options(backend="cuda"):
        (out,) = fd.execute([cupy.asarray(a)])
        report = fd._executor.last_report  # type: ignore[union-attr]
    assert len(report.launches) == 1  # the softmax; the reshape is a view of its result
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.get(), (e / e.sum(axis=1, keepdims=True)).reshape(-1), rtol=1e-5, atol=1e-7)
