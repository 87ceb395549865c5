"""A CUDA fault of a run becomes a FuserError that names the CUDA error, the kernels it
may come from (name, group, scheduler, grid, block, shared memory, the script lines of
their ops) and whether the CUDA context is lost; `sync_launches` pins the kernel that
faulted. All on the host: fake_cuda stands in for CuPy and the GPU, and makes a kernel
fault the way CUDA does (reported by a later call, and sticky)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from fake_cuda import (
    INVALID_VALUE,
    MISALIGNED,
    CUDADriverError,
    CUDARuntimeError,
    FakeCudaBackend,
    FakeDevice,
    install,
    on_device,
)

from fuser_core import FuserError, FusionDefinition, FusionExecutorCache, SourceLocation, use_options
from fuser_core.runtime import executor_cache
from fuser_core.runtime.artifacts import LaunchParams
from fuser_core.runtime.launch_errors import (
    CudaFaultError,
    FaultKernel,
    error_code,
    is_cuda_error,
    is_sticky,
    script_lines,
)

G0 = "nvfuser_pointwise_f0_c1_r0_g0"
G1 = "nvfuser_pointwise_f0_c1_r0_g1"
LAUNCH = "grid (4, 1, 1), block (128, 1, 1), 0 bytes of shared memory"
HERE = "test_cuda_faults.py"


def two_kernels() -> tuple[FusionDefinition, int, int]:
    """exp then square, cut in two kernels by a segment_set; the lines of the ops of each."""
    first = inspect.currentframe().f_lineno + 3  # type: ignore[union-attr]
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        t1 = fd.ops.exp(t0)  # g0
        t2 = fd.ops.segment_set(t1)  # g0
        fd.add_output(fd.ops.mul(t2, t2))  # g1
    return fd, first, first + 2


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    fake = FakeDevice()
    install(monkeypatch, fake)
    return fake


@pytest.fixture
def cache(device) -> tuple[FusionExecutorCache, int, int]:
    fd, g0_line, g1_line = two_kernels()
    return FusionExecutorCache(fd.fusion, backend=FakeCudaBackend()), g0_line, g1_line


X = np.ones((8, 256), np.float32)


# -- telling CUDA's errors apart ------------------------------------------------------------


def test_cuda_errors_are_told_apart_by_name_and_text():
    torch_style = RuntimeError(
        "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported"
    )
    assert is_cuda_error(CUDADriverError(716, MISALIGNED)) and is_cuda_error(torch_style)
    assert not is_cuda_error(FuserError("CUDA error in the user's words")) and not is_cuda_error(ValueError("x"))
    assert error_code(CUDADriverError(716, MISALIGNED)) == "CUDA_ERROR_MISALIGNED_ADDRESS"
    assert error_code(torch_style) == ""
    assert is_sticky(CUDADriverError(716, MISALIGNED)) and is_sticky(torch_style)
    assert is_sticky(CUDARuntimeError(700, "cudaErrorIllegalAddress: an illegal memory access was encountered"))
    assert not is_sticky(CUDADriverError(1, INVALID_VALUE))


def test_script_lines_join_runs_of_lines():
    lines = [SourceLocation("/x/softmax.py", n) for n in (14, 12, 13, 17, 12)]
    assert script_lines(lines) == "softmax.py:12-14,17"
    kernel = FaultKernel(2, "nvfuser_reduction_f0_c1_r0_g2", "reduction", LaunchParams((4, 2, 1), (128, 1, 1), 512))
    assert kernel.describe() == (
        "g2 nvfuser_reduction_f0_c1_r0_g2, reduction scheduler: grid (4, 2, 1), block (128, 1, 1), "
        "512 bytes of shared memory"
    )


# -- the first run of a signature (CudaExecutable.run) -------------------------------------


def test_without_sync_launches_a_run_never_synchronizes(cache, device):
    cache[0].run([X])
    assert device.calls == ["asarray", "empty", f"launch {G0}", "empty", f"launch {G1}"]


def test_a_fault_reported_when_the_outputs_are_copied_lists_every_kernel_of_the_run(cache, device):
    cache, g0_line, g1_line = cache
    device.fault(G1)
    outputs = cache.run([X])  # the kernel faults while it runs: nothing is reported yet
    with pytest.raises(CudaFaultError) as caught:
        cache.outputs_on_host(outputs)
    err = caught.value
    text = str(err)
    assert text.startswith(
        "CUDA error cudaErrorMisalignedAddress: misaligned address, reported when copying the outputs to the host."
    )
    assert "may come from any of the 2 kernels this run launched since its last synchronization" in text
    assert f"g0 {G0}, pointwise scheduler: {LAUNCH}; its ops at {HERE}:{g0_line}-{g0_line + 1}" in text
    assert f"g1 {G1}, pointwise scheduler: {LAUNCH}; its ops at {HERE}:{g1_line}" in text
    assert "run again with the enable option sync_launches (FUSER_ENABLE=sync_launches" in text
    assert "This is a sticky fault: this process's CUDA context is unusable now" in text
    fault = err.fault
    assert not fault.pinned and fault.sticky and fault.code == "cudaErrorMisalignedAddress"
    assert [k.name for k in err.kernels] == [G0, G1]
    assert err.kernels[0].launch == LaunchParams((4, 1, 1), (128, 1, 1), 0)
    assert err.runtime is cache.last_runtime and fault.runtime == "f0_c1_r0"
    assert [k.name for k in err.runtime.kernels] == [G0, G1]  # whose CUDA the workbench shows
    assert isinstance(err.__cause__, CUDARuntimeError)
    assert err.location is None  # several kernels, several lines


def test_sync_launches_pins_the_kernel_that_faulted(cache, device):
    cache, g0_line, _ = cache
    with use_options(enable="sync_launches"):
        cache.run([X])
        assert device.calls[2:] == [f"launch {G0}", "synchronize", "empty", f"launch {G1}", "synchronize"]
        device.fault(G0)
        with pytest.raises(CudaFaultError) as caught:
            cache.run([X])
    err = caught.value
    assert err.fault.pinned and [k.name for k in err.kernels] == [G0]
    assert device.launched()[-1] == G0  # g1 never launched
    text = str(err)
    assert f"reported when synchronizing after g0 {G0} (sync_launches)." in text
    assert f"The kernel that faulted: g0 {G0}, pointwise scheduler: {LAUNCH}; its ops at {HERE}:" in text
    assert G1 not in text and "run again with" not in text
    assert err.location is not None and err.location.lineno == g0_line
    assert str(err).startswith(f"{HERE}:{g0_line}: CUDA error") and "t1 = fd.ops.exp(t0)" in text


def test_a_fault_reported_by_the_next_launch_names_the_kernels_launched_before_it(cache, device):
    cache = cache[0]
    device.fault(G0)
    with pytest.raises(CudaFaultError) as caught:
        cache.run([X])
    err = caught.value
    assert [k.name for k in err.kernels] == [G0] and not err.fault.pinned
    text = str(err)
    assert f"CUDA error {MISALIGNED}, reported when launching g1 {G1}." in text
    assert "may come from the one kernel this run launched since its last synchronization" in text


def test_a_refused_launch_names_that_kernel_and_the_context_stays_usable(cache, device):
    cache = cache[0]
    device.refuse(G1)
    with pytest.raises(CudaFaultError) as caught:
        cache.run([X])
    err = caught.value
    assert err.fault.pinned and not err.fault.sticky and [k.name for k in err.kernels] == [G1]
    text = str(err)
    assert f"CUDA refused to launch this kernel: g1 {G1}, pointwise scheduler: {LAUNCH}" in text
    assert "The CUDA context is still usable." in text and "sticky" not in text
    device.refused.clear()
    assert len(cache.run([X])) == 1  # it is


# -- FusionDefinition.execute ---------------------------------------------------------------


def test_execute_names_the_script_line_and_later_runs_name_the_unsynchronized_kernels(device, monkeypatch):
    monkeypatch.setattr(executor_cache, "select_backend", lambda name, model: FakeCudaBackend())
    fd, g0_line, _ = two_kernels()
    device.fault(G0)
    with pytest.raises(CudaFaultError) as caught:
        fd.execute([X], _enable_options=["sync_launches"])
    assert caught.value.location.lineno == g0_line and f"The kernel that faulted: g0 {G0}" in str(caught.value)

    device.restart()  # now without the option
    device.fault(G1)
    fd.execute([X])  # faults, unreported: nothing synchronizes
    with pytest.raises(CudaFaultError) as caught:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        fd.execute([X])
    err = caught.value
    assert err.location is not None and err.location.lineno == line  # this call's line: no kernel ran
    text = str(err)
    assert "reported when preparing the run, before it launched any kernel." in text
    assert "most likely one of these kernels, launched before this run and not synchronized since:" in text
    assert f"  g0 {G0}" in text and f"  g1 {G1}" in text and "sync_launches" in text

    with pytest.raises(CudaFaultError) as caught:
        fd.execute([X])
    assert "This process's CUDA context was already lost to an earlier sticky fault (" in str(caught.value)


# -- the fast path (a replay of an earlier call's launches) ---------------------------------


def test_a_replay_names_what_it_launched(cache, device):
    cache = cache[0]
    x = on_device(device, X)
    cache.run([x])  # plans the fast path
    cache.run([x])
    assert cache.last_report.event.reasons == ("fast path",)
    device.refuse(G1)
    with pytest.raises(CudaFaultError) as caught:
        cache.run([x])
    err = caught.value
    assert err.fault.pinned and [k.name for k in err.kernels] == [G1] and err.runtime is cache.last_runtime
    assert f"CUDA refused to launch this kernel: g1 {G1}, pointwise scheduler: {LAUNCH}" in str(err)

    device.refused.clear()
    device.fault(G1)
    cache.run([x])  # faults, unreported
    with pytest.raises(CudaFaultError) as caught:
        cache.run([x])  # reported by the first call of the next replay
    text = str(caught.value)
    assert "reported when" in text and "launched before this run and not synchronized since:" in text
    assert f"  g0 {G0}" in text and f"  g1 {G1}" in text
    assert caught.value.runtime is cache.last_runtime


def test_a_run_that_built_its_runtime_reports_what_each_kernel_compile_did(cache, device):
    executor = cache[0]
    executor.run([X])
    first = executor.last_report
    assert not first.event.hit
    assert [line.split(":")[0] for line in first.compiles] == [G0, G1]
    executor.run([X])
    assert executor.last_report.event.hit and executor.last_report.compiles == ()
