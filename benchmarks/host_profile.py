"""Where the host time of a cache-hit call goes: cProfile over many fast-path calls.

PYTHONPATH=. python benchmarks/host_profile.py
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from fuser_core import DataType, FusionDefinition, use_options


def main() -> None:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t0))
    x = torch.randn(1024, device="cuda")
    with use_options(backend="cuda"):
        for _ in range(100):
            fd.execute([x])
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(5000):
            fd.execute([x])
        profile.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profile).sort_stats("tottime")
    stats.print_stats(14)


if __name__ == "__main__":
    main()
