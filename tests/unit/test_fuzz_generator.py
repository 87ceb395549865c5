"""The differential fuzzer of benchmarks/fuzz_gpu.py: its generator is deterministic and
covers every op family, what it generates builds and runs on the reference backend, and
its CPU mode (generated kernels on the kernel-IR interpreter against the reference, and
compiled by NVRTC where it is installed) passes on a fixed set of cases. No GPU and no
torch needed."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fuser_core import FuserError, InternalError, load_repro, use_options

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import fuzz_gpu  # noqa: E402
from fuzzlib.build import build, make_inputs  # noqa: E402
from fuzzlib.cases import classify, reset_fusion_cache  # noqa: E402
from fuzzlib.generator import EXCLUDABLE, generate  # noqa: E402
from fuzzlib.program import ELEMENTWISE, REDUCTIONS, from_json, infer, to_json  # noqa: E402
from fuzzlib.shrink import shrink, write_repro  # noqa: E402

SMALL = 4096  # the CPU mode's largest tensor

# Constructs that fuser_core fails on today (found by this fuzzer in CPU mode; the final
# report of the fuzzer's task has a minimal repro of each). Excluded where a test below
# must pass, each named with the bug it avoids. Fixed since and no longer excluded:
# full_reduction, resize_with_welford, cat, expand, scalar_input, welford_outer,
# double_min_max, integer_fmod, resize_of_expanded (tests/unit/codegen/test_fuzz_regressions.py).
REFERENCE_BUGS: list[str] = []
KERNEL_BUGS = [
    *REFERENCE_BUGS,
    "expanded_input",  # reshape of a stride-0 input vectorizes past its one-element storage
    "permuted_input",  # vectorized loads of a permuted input (reshape + sum) are misaligned
    "strided_input",  # a slice of a gapped (non-contiguous) input reads index -1
    "multi_output",  # a broadcast-shaped output beside a full one is left partly unwritten
    "broadcast_reduction",  # welford over dims including a broadcast axis writes var_sum 4 times
    "narrow_reduction",  # a Half reduction result is used unrounded inside its kernel
    "reduction_of_resize",  # a reduction of a slice vectorizes misaligned loads
    "stride_order",  # an output with stride_order [0, 1] gets a misaligned vector store
]


def test_every_excluded_construct_is_known_to_the_generator():
    assert set(KERNEL_BUGS) <= set(EXCLUDABLE)
    with pytest.raises(ValueError, match="cannot exclude"):
        generate(0, 0, exclude=["no_such_construct"])


def test_the_generator_is_deterministic_per_seed_and_case():
    for index in range(15):
        first = to_json(generate(3, index, SMALL))
        assert to_json(generate(3, index, SMALL)) == first
        assert to_json(from_json(first)) == first  # the JSON a repro is replayed from round-trips
    programs = {to_json(generate(seed, 0, SMALL)) for seed in range(10)}
    assert len(programs) == 10


def test_generated_programs_are_valid_and_small():
    for index in range(60):
        program = generate(5, index)
        metas = infer(program)
        assert 1 <= len(program.ops) <= 22
        assert all(m.numel <= 100_000 for m in metas.values())
        assert 1 <= len(program.outputs) <= 5


def test_the_generator_covers_every_op_family_and_layout():
    ops: Counter[str] = Counter()
    features: Counter[str] = Counter()
    for seed in range(400):
        program = generate(seed, 1, SMALL)
        ops.update(program.op_names())
        features.update(op.tag for op in program.ops if op.tag)
        features.update(f"layout {i.layout()}" for i in program.tensor_inputs())
        features.update(f"dtype {i.dtype}" for i in program.tensor_inputs())
        features.update(fuzz_gpu.features(program))
        features.update(["several outputs"] if len(program.outputs) > 1 else [])
    families = {
        "float unary": ["exp", "tanh", "sigmoid", "abs", "erf", "round"],
        "guarded unary": ["log", "sqrt", "rsqrt", "reciprocal", "asin", "erfinv"],
        "predicates": ["isnan", "isfinite", "signbit"],
        "integer and bool unary": ["bitwise_not", "logical_not"],
        "binary": ["add", "sub", "mul", "div", "maximum", "atan2", "pow", "fmod", "remainder"],
        "integer binary": ["bitwise_and", "bitwise_xor", "gcd", "bitwise_left_shift", "logical_right_shift"],
        "comparisons": ["eq", "lt", "ge"],
        "ternary": ["where", "clamp", "lerp", "threshold", "addcmul"],
        "casts": ["cast"],
        "broadcasts": ["broadcast", "broadcast_in_dim", "expand"],
        "views": ["reshape", "squeeze", "permute"],
        "resizes": ["slice", "pad", "cat"],
        "reductions": ["sum", "prod", "max", "min"],
        "variance": ["var", "var_mean", "welford"],
        "factories": ["full", "iota"],
        "copies": ["set", "segment_set", "stride_order"],
        "random (checked against the reference backend)": ["rand_like", "randn_like"],
    }
    for family, names in families.items():
        assert sum(ops[n] > 0 for n in names) >= len(names) - 1, f"{family}: only {[n for n in names if ops[n]]}"
    every = set(ELEMENTWISE) | set(REDUCTIONS) | {n for names in families.values() for n in names}
    assert len(every & set(ops)) >= len(every) - 3, sorted(every - set(ops))
    for feature in [
        "softmax",
        "layer_norm",
        "rms_norm",
        "dropout",
        "alias",
        "layout contiguous",
        "layout permuted",
        "layout strided",
        "layout expanded",
        *(f"dtype {d}" for d in ["Float", "Double", "Half", "BFloat16", "Int", "Int32", "Bool"]),
        "symbolic size (fd.ops.size) in an op",
        "scalar input used",
        "static input sizes",
        "output stride_order",
        "several outputs",
    ]:
        assert features[feature] > 0, f"{feature} never generated"


def test_every_generated_fusion_builds_and_runs_on_the_reference_backend():
    runs = 0
    for index in range(120):
        program = generate(21, index, SMALL, exclude=REFERENCE_BUGS)
        reset_fusion_cache()
        fd = build(program)
        inputs = [h.view() for h in make_inputs(program)]
        with use_options(backend="reference", device_model="h100_sxm"):
            outputs = fd.execute(inputs)
        metas = infer(program)
        for out, value in zip(program.outputs, outputs, strict=True):
            assert tuple(np.shape(value)) == metas[out.vid].shape
        runs += 1
    assert runs == 120


def test_the_cpu_mode_passes_with_the_known_bugs_excluded(tmp_path):
    args = fuzz_gpu.parse(
        [
            "--cpu",
            "--count",
            "30",
            "--seed",
            "4",
            "--out",
            str(tmp_path),
            "--jobs",
            "0",
            "--exclude",
            ",".join(KERNEL_BUGS),
        ]
    )
    results, device = fuzz_gpu.run_inline(args)
    assert "interpreter" in device
    bad = {r["index"]: r["message"][:300] for r in results if r["status"] != "pass"}
    assert not bad, bad
    assert sum(r["kernels"] for r in results) >= 30  # generated kernels were run, not only the host
    report = fuzz_gpu.render(results, {**vars(args), "date": "today", "device": device, "mode": "cpu",
                                       "first": 0, "wall": 1.0, "command": "test"})  # fmt: skip
    assert "| fusions run | 30 |" in report and "| passed | 30 |" in report


def test_a_failure_is_shrunk_and_written_as_a_loadable_repro(tmp_path):
    program = next(p for p in (generate(9, i, SMALL) for i in range(50)) if "exp" in p.op_names() and len(p.ops) > 4)

    def fails(candidate):
        return "exp" in candidate.op_names()

    smallest = shrink(program, fails)
    assert "exp" in smallest.op_names() and len(smallest.ops) < len(program.ops)
    infer(smallest)
    name = write_repro(tmp_path, smallest, "mismatch", "output 0 differs", len(program.ops), "cpu")
    text = (tmp_path / name).read_text()
    assert text.startswith("# fuser_core fuzz failure: mismatch (cpu mode)") and "# output 0 differs" in text
    (loaded,) = load_repro(tmp_path / name).definitions
    assert "exp" in repr(loaded.fd)
    assert to_json(from_json((tmp_path / name.replace(".py", ".json")).read_text())) == to_json(smallest)


def test_failures_are_classified():
    from fuser_core.runtime.nvrtc import KernelCompileError

    class CUDARuntimeError(RuntimeError):
        pass

    assert classify(KernelCompileError("bad", log="", source="", failing_lines=[])) == "compile"
    assert classify(FuserError("unsupported", op="x")) == "refused"
    assert classify(InternalError("broken")) == "internal"
    assert classify(KeyError(3)) == "internal"
    assert classify(CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access")) == "fault"
    wrapped = FuserError("launch failed")
    wrapped.__cause__ = CUDARuntimeError("x")
    assert classify(wrapped) == "fault"


def test_the_torch_rules_agree_with_the_reference_backend():
    """Where torch is installed (not on CI): torch eager of the op list against the
    reference backend on the CPU, which checks this fuzzer's torch rules."""
    pytest.importorskip("torch")
    from fuzzlib.cases import CpuRunner

    runner = CpuRunner(torch_check=True, nvrtc=False)
    runner.check = lambda runtime, inputs: []  # the kernels are the test above's business
    statuses = Counter()
    for index in range(40):
        outcome = runner.run(generate(31, index, SMALL, exclude=REFERENCE_BUGS))
        statuses[outcome.status] += 1
        assert outcome.status == "pass", (index, outcome.message[:500])
    assert statuses["pass"] == 40
