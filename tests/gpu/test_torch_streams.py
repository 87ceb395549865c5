"""Torch inputs run on torch's current stream, as nvFuser's do: inside
`with torch.cuda.stream(s):` a run waits for the work queued on `s` before it (the copy
that made its input) and what is queued after it waits for the run, on the compiled
path and on its fast-path replays."""

import numpy as np
import pytest

from fuser_core import FusionDefinition, use_options

pytestmark = pytest.mark.gpu

N = 1 << 22
SLEEP_CYCLES = 1_000_000_000  # ~0.5 s at the H100's clock: the copy after it is late


@pytest.fixture(autouse=True)
def cuda_backend():
    with use_options(backend="cuda"):
        yield


def scaled_exp() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True)
        fd.add_output(fd.ops.mul(fd.ops.exp(t0), fd.define_scalar(0.5)))
    return fd


def _under_a_stream(torch, fd, calls):
    """Each call inside `with torch.cuda.stream(s):`, its input copied on `s` behind a
    sleep and its output doubled on `s` after it; both checked once `s` is done."""
    stale = torch.randn(N, device="cuda")
    stream = torch.cuda.Stream()  # torch's streams do not wait for the default one
    for call in range(calls):
        fresh = torch.randn(N, device="cuda", generator=torch.Generator("cuda").manual_seed(call))
        x = stale.clone()
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            torch.cuda._sleep(SLEEP_CYCLES)
            x.copy_(fresh)  # queued on `stream` behind the sleep
            (out,) = fd.execute([x])
            doubled = out * 2  # queued on `stream` after the run
        stream.synchronize()
        want = np.exp(fresh.cpu().numpy())
        np.testing.assert_allclose(doubled.cpu().numpy(), want, rtol=1e-5)
        np.testing.assert_allclose(out.cpu().numpy(), want / 2, rtol=1e-5)


def test_a_first_call_under_a_torch_stream_waits_for_the_work_queued_there():
    """The compiled path (no plan for these sizes yet; the kernel compiled by a call of
    other sizes, so that the launch comes well inside the sleep). Its inputs and outputs
    cross to and from CuPy through DLPack, which orders them with the consumer's stream:
    this path waited before the launch followed torch's stream too; the replays did not."""
    torch = pytest.importorskip("torch")
    fd = scaled_exp()
    fd.execute([torch.randn(N + 1024, device="cuda")])
    _under_a_stream(torch, fd, calls=1)


def test_replays_under_a_torch_stream_wait_for_the_work_queued_there():
    torch = pytest.importorskip("torch")
    fd = scaled_exp()
    fd.execute([torch.randn(N, device="cuda")])  # the fast path's plan, made outside
    _under_a_stream(torch, fd, calls=3)


def test_a_run_on_the_default_stream_is_unchanged():
    torch = pytest.importorskip("torch")
    fd = scaled_exp()
    x = torch.randn(N, device="cuda")
    for _ in range(2):
        (out,) = fd.execute([x])
        np.testing.assert_allclose(out.cpu().numpy(), np.exp(x.cpu().numpy()) / 2, rtol=1e-5)


def test_a_grid_reduction_on_two_streams_in_turn_sums_right():
    """A sum over 2^24 floats reduces across blocks through work buffers and semaphores;
    each stream has its own (runs on two streams may overlap), and a plan made on one
    stream is not replayed on the other. Calls alternate between two side streams and
    the default one; every sum is checked."""
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1], contiguity=True), dims=[0]))
    streams = [torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.default_stream()]
    x = torch.rand(1 << 24, device="cuda", dtype=torch.float32)
    want = float(x.double().sum())
    results = []
    for round_ in range(3):
        for stream in streams:
            stream.wait_stream(torch.cuda.default_stream())
            with torch.cuda.stream(stream):
                (out,) = fd.execute([x])
                results.append((round_, out))
    torch.cuda.synchronize()
    for round_, out in results:
        assert abs(float(out) - want) <= 1e-4 * want, round_
