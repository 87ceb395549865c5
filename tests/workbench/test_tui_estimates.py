"""The Run tab shows every kernel's roofline estimate even on the reference backend,
where nothing is launched or timed."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import NO_GPU, POW_SMALL, SIZE, make_app, settle, show

from workbench.tui import pipeline


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


def test_the_run_tab_shows_the_roofline_estimate_of_every_kernel_without_a_gpu():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            text = await show(pilot, "run")
            assert "No per-kernel timings" in text
            assert "Roofline estimates on NVIDIA H100 SXM5" in text
            rows = [line for line in text.splitlines() if line.startswith(("│ g0", "│ g1"))]
            cells = [[cell.strip() for cell in line.split("│")[1:9]] for line in rows]
            assert cells == [
                ["g0", "reduction", "8448", "2048", "memory", "2.52 ns", "-", "-"],
                ["g1", "pointwise", "16384", "2048", "memory", "4.89 ns", "-", "-"],
            ]

    asyncio.run(main())
