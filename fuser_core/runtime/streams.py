"""The stream a run launches on: CuPy's current stream, unless the inputs are CUDA torch
tensors and torch's current stream on their device is another one. nvFuser launches on
torch's current stream (`at::cuda::getCurrentCUDAStream()`): a run inside
`with torch.cuda.stream(s):` is ordered after the work queued on `s` that made its
inputs, and its outputs are ready for what is queued on `s` after it. Here that stream
becomes CuPy's current stream for the run, so that the kernels, the allocations of
CuPy's pool (ordered per stream) and the events of a profile all use it.

torch and CuPy are found in sys.modules, never imported here.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

# CuPy's handle on each torch stream met, by (device, stream pointer).
_EXTERNAL: dict[tuple[int, int], Any] = {}


def torch_launch_stream(inputs: Sequence[Any]) -> Any | None:
    """CuPy's handle on torch's current stream where the first tensor input is a CUDA
    torch tensor and that stream is neither torch's default stream nor CuPy's current
    one; else None (nothing to do: CuPy or host inputs, torch's default stream, or both
    libraries on the same stream)."""
    found = _first_cuda_tensor(inputs)
    if found is None:
        return None
    torch, tensor = found
    device = tensor.get_device()
    pointer = _stream_reader(torch)(device)
    # torch on its default (legacy) stream, as almost every call is: CuPy's current stream
    # is taken as it is, with no call into CuPy (a cache hit's host time is microseconds).
    cupy = sys.modules.get("cupy")
    if pointer == 0 or cupy is None or pointer == cupy.cuda.get_current_stream().ptr:
        return None
    if device != cupy.cuda.runtime.getDevice():
        return None  # a stream of another device than CuPy's current one: left as it was
    stream = _EXTERNAL.get((device, pointer))
    if stream is None:
        with warnings.catch_warnings():
            # CuPy 14 deprecates ExternalStream for Stream.from_external, which takes a
            # `__cuda_stream__` object rather than a pointer and device; both wrap it alike.
            warnings.simplefilter("ignore", DeprecationWarning)
            stream = cupy.cuda.ExternalStream(pointer, device)
        _EXTERNAL[(device, pointer)] = stream
    return stream


def replay_stream_check(inputs: Sequence[Any]) -> tuple[list[str], dict[str, Any]]:
    """Lines of a fast-path replay (executor_cache._REPLAY) that decline the call (return
    None) where torch's current stream on the first CUDA torch input's device is neither
    its default stream nor CuPy's current one: the caller then runs it again with that
    stream made CuPy's (torch_launch_stream). On torch's default stream, one call."""
    found = _first_cuda_tensor(inputs)
    if found is None:
        return [], {}
    torch, tensor = found
    cupy = sys.modules["cupy"]  # a replay launches through CuPy
    names = {"torch_stream": _stream_reader(torch), "cupy_stream": cupy.cuda.get_current_stream}
    lines = [
        f"    stream = torch_stream({tensor.get_device()})",
        "    if stream and stream != cupy_stream().ptr:",
        "        return None",
    ]
    return lines, names


def _first_cuda_tensor(inputs: Sequence[Any]) -> tuple[Any, Any] | None:
    """torch and the first tensor input, where that is a CUDA torch tensor; else None."""
    tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)  # (a stand-in may lack it)
    if tensor_type is None or not inputs:
        return None
    tensor = next((v for v in inputs if isinstance(v, tensor_type)), None)
    if tensor is None or not tensor.is_cuda:
        return None
    return sys.modules["torch"], tensor


def _stream_reader(torch: Any) -> Callable[[int], int]:
    """device -> the pointer of torch's current stream there: torch's own raw accessor
    (what Triton's launcher reads) where it has one, no Stream object made per call."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw  # type: ignore[no-any-return]
    return lambda device: int(torch.cuda.current_stream(device).cuda_stream)
