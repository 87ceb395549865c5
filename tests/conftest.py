"""Test-suite wiring: `gpu` tests run only where CuPy sees an NVIDIA GPU; hypothesis is
derandomized on CI."""

import importlib.util
import os

import pytest

# On CI, property tests draw the same examples every run, so a landing never depends on
# luck; locally they explore new ones each time (`--hypothesis-seed=N` replays a run).
# The GPU machine may lack hypothesis: its gpu tests do not need it.
if importlib.util.find_spec("hypothesis") is not None:
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


def _gpu_unavailable_reason() -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (install the 'cuda' extra on a machine with an NVIDIA GPU)"
    try:
        import cupy  # heavy and optional: only probed when collecting gpu tests

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy found no CUDA device"
    except Exception as err:  # any CUDA driver/runtime failure means no usable GPU
        return f"no usable CUDA device: {err}"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_unavailable_reason()
    if reason is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _fresh_fusion_cache():
    """Each test starts with an empty FusionCache, as nvFuser's own tests reset it: a
    definition made by an earlier test must not turn this test's compile into a hit."""
    from fuser_core.frontend.fusion_cache import FusionCache

    FusionCache.reset()
    yield
