"""Shared fixtures of the workbench tests: small runs of bundled samples."""

from __future__ import annotations

import pytest

from fuser_core.frontend.fusion_cache import FusionCache
from workbench.session import Session

OPTION_VARIABLES = ("FUSER_DUMP", "FUSER_ENABLE", "FUSER_DISABLE", "NVFUSER_DUMP", "NVFUSER_ENABLE", "NVFUSER_DISABLE")
RESIZE_SMALL = [(8, 3, 2, 5, 6), (8, 4, 4, 3, 5)]
REDUCTION_POW_SMALL = [(4, 8, 64), (4, 8, 64)]


@pytest.fixture(autouse=True)
def no_options_from_the_environment(monkeypatch):
    for name in OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FUSER_DEVICE_MODEL", raising=False)


def small_session(sample: str, shapes) -> Session:
    # Module fixtures are made before the per-test FusionCache reset: start from an empty
    # cache here too, so fusion ids (f0 in kernel names) do not depend on test order.
    FusionCache.reset()
    session = Session.open(sample)
    session.set_shapes(shapes)
    return session


@pytest.fixture(scope="module")
def pow_run():
    """issue785_reduction_pow at a small size: two segments, each with its reason."""
    session = small_session("issue785_reduction_pow", REDUCTION_POW_SMALL)
    result = session.run()
    assert result.ok, result.error
    return result


@pytest.fixture(scope="module")
def resize_runs():
    """resize_pad_to_broadcast_dynamic run with concretize_resize_extents on, then off."""
    session = small_session("resize_pad_to_broadcast_dynamic", RESIZE_SMALL)
    on = session.run()
    session.options = session.options.toggled("concretize_resize_extents")
    off = session.run()
    assert on.ok and off.ok, (on.error, off.error)
    return on, off
