"""Run one bundled sample on the cuda backend (for ncu and compute-sanitizer).

    PYTHONPATH=. python benchmarks/run_sample.py NAME [--shrunk] [--runs N]

--shrunk runs it at the small sizes the CI interpreter uses (tests/unit/codegen)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "codegen"))

import torch  # noqa: E402

from fuser_core import load_repro, use_options  # noqa: E402


def to_torch(x):
    if isinstance(x, np.ndarray):
        if x.dtype.itemsize == 2 and x.dtype != np.float16:
            return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
        return torch.from_numpy(x).cuda()
    return x


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--shrunk", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    if args.shrunk:
        from kernels_check import shrunk_sample

        script = shrunk_sample(args.name)
    else:
        script = ROOT / "sample_fusions" / f"{args.name}.py"
    (loaded,) = load_repro(script).definitions
    inputs = [to_torch(x) for x in loaded.materialize_inputs(seed=0)]
    with use_options(backend="cuda"):
        for _ in range(args.runs):
            outputs = loaded.fd.execute(inputs)
    torch.cuda.synchronize()
    print(args.name, [tuple(o.shape) for o in outputs], "ok")


if __name__ == "__main__":
    main()
