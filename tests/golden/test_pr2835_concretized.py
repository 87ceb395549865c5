"""The concretized ResizePadToBroadcastDynamic fusion of nvFuser PR #2835, printed with
and without `concretize_resize_extents`, against the seed's text modulo numbering."""

import re

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.printer import print_kernel

PAD_WIDTHS = [0, -1, 0, -4, 1, 1, -1, -1]  # innermost first: dims 4, 3, 2, 1


def pad_to_broadcast() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1] * 5, contiguity=[False] * 5, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1] * 5, contiguity=[False] * 5, dtype=DataType.Float)
        widths = [fd.define_scalar(None, dtype=DataType.Int) for _ in PAD_WIDTHS]
        fd.add_output(fd.ops.mul(t1, fd.ops.pad(t0, widths)))
    return fd


def normalize(text: str) -> list[str]:
    """Names differ between builds (the seed's C++ test made other values first):
    compare with every statement number replaced."""
    return [re.sub(r"(?<=[A-Za-z?])\d+", "#", line) for line in text.splitlines()]


def run(disable: list[str]) -> tuple[FusionDefinition, np.ndarray, np.ndarray]:
    fd = pad_to_broadcast()
    rng = np.random.default_rng(2835)
    x = rng.standard_normal((7, 3, 2, 5, 6), dtype=np.float32)
    y = rng.standard_normal((7, 1, 4, 1, 5), dtype=np.float32)
    (out,) = fd.execute([x, y, *PAD_WIDTHS], _disable_options=disable)
    expected = y * np.pad(x[:, 1:2, :, 0:1, 0:5], [(0, 0), (0, 0), (1, 1), (0, 0), (0, 0)])
    return fd, out, expected


@pytest.mark.parametrize(
    ("disable", "golden_name", "seed_is_complete"),
    [
        # The seed's second example is cut before its closing line; the first is whole.
        ([], "pr2835_concretized_option_on.txt", False),
        (["concretize_resize_extents"], "pr2835_concretized_option_off.txt", True),
    ],
)
def test_concretized_fusion_matches_the_seed(disable, golden_name, seed_is_complete, golden):
    fd, out, expected = run(disable)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    printed = print_kernel(fd.executor_cache.last_runtime.fusion)
    seed = normalize(golden(golden_name))
    ours = normalize(printed)
    assert ours[0] == ""  # print_kernel starts with a blank line, as nvFuser's print
    assert ours[1 : 1 + len(seed)] == seed
    if seed_is_complete:
        assert len(ours) == 1 + len(seed)
    else:
        assert ours[1 + len(seed) :] == ["} // %kernel"]


def test_with_the_option_on_the_resized_extents_are_literal_constants():
    fd, _, _ = run([])
    printed = print_kernel(fd.executor_cache.last_runtime.fusion)
    assert "Resize: iS" in printed and "by -1 and -1 -> bS" in printed
    assert "{0, 0, -1, -1, 1, 1, 0, -4, 0, -1}" in printed
    assert "(nvfuser_index_t)" not in printed
