"""The differential fuzzer behind `benchmarks/fuzz_gpu.py`.

- `program`: a fusion as plain data (inputs, an op list, outputs), its shape rules and JSON;
- `generator`, `families`: random programs, valid by construction, deterministic per
  (seed, index), with named constructs that can be excluded (to fuzz around a known bug);
- `build`: a program as a `FusionDefinition`, and its input arrays (layouts included);
- `torch_ref`: the same op list evaluated by torch eager, and the tolerant comparison;
- `cases`: one case run end to end (cuda against torch, or the kernel-IR interpreter
  against the reference backend) and its failure class;
- `shrink`: a smaller failing program, and the repro script written for it;
- `report`: the Markdown summary.

Nothing here imports torch or CuPy at module level: the CPU mode runs without them.
"""
