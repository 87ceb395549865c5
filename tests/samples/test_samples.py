"""Every bundled sample fusion loads cleanly, documents itself, and computes the right
values at its full bundled input size on the reference backend.

The samples are found by globbing sample_fusions/, so a new sample is covered at once,
and it must bring a NumPy reference in references.py: a sample without one fails.
The full-size runs are marked `slow` (up to ~15 s and ~5 GB each); each test runs one
sample and keeps nothing between tests, so memory goes back after each.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import TensorSpec, load_repro

from .references import REFERENCES, check, check_rows, torch_pad

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "sample_fusions"
SAMPLES = sorted(SAMPLES_DIR.glob("*.py"))
# dtype names as the headers write them: `bf16[16384, 4096]`, `float32[8, 1024]`
HEADER_SHAPE = re.compile(
    r"\b(?:bf16|bfloat16|float16|half|float32|float64|float|double|int64|int32|bool)\[([\d, ]+)\]"
)


def header_lines(path: Path) -> list[str]:
    """The comment block the sample starts with, without the `#` marks."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return lines


def documented_input_shapes(path: Path) -> list[tuple[int, ...]]:
    """The tensor shapes the header's `Inputs:` part names (up to an `Output:`)."""
    text = " ".join(header_lines(path))
    inputs_part = re.split(r"\bOutputs?:", text.partition("Inputs:")[2])[0]
    return [tuple(int(n) for n in m.split(",")) for m in HEADER_SHAPE.findall(inputs_part)]


def declared_output_count(path: Path) -> int:
    return sum(line.strip().startswith("fd.add_output(") for line in path.read_text(encoding="utf-8").splitlines())


def test_the_samples_are_found():
    assert len(SAMPLES) >= 17, f"expected the bundled samples in {SAMPLES_DIR}, found {len(SAMPLES)}"


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_loads_cleanly_with_a_header_and_prints_its_ir(path):
    repro = load_repro(path)
    assert [p.one_line() for p in repro.problems] == []
    assert repro.definitions, f"{path.name} has no definition"

    header = header_lines(path)
    assert header and header[0], f"{path.name} must start with a comment saying what it is"
    assert any("What to look at" in line for line in header), f"{path.name}'s header says nothing to look at"

    lines = path.read_text(encoding="utf-8").splitlines()
    for loaded in repro.definitions:
        assert "FusionDefinition()" in lines[loaded.lineno - 1], (loaded.name, loaded.lineno)
        ir = loaded.fd.fusion_ir()
        assert ir.startswith("Inputs:") and "\nOutputs:\n" in ir, ir[:200]
        assert loaded.inputs is not None, f"{path.name} gives no inputs for {loaded.name}"
        assert len(loaded.inputs) == len(loaded.fd.fusion.inputs)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_header_states_the_bundled_input_shapes(path):
    (loaded,) = load_repro(path).definitions
    spec_shapes = {spec.shape for spec in loaded.inputs or () if isinstance(spec, TensorSpec)}
    documented = documented_input_shapes(path)
    assert documented, f"{path.name}'s header has no `Inputs:` line with shapes like bf16[4096, 16384]"
    assert set(documented) <= spec_shapes, f"header says {documented}, the script makes {sorted(spec_shapes)}"


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_has_a_numpy_reference(path):
    if path.stem not in REFERENCES:
        pytest.fail(f"no reference check for sample {path.stem}: add one to tests/samples/references.py")


def test_every_reference_belongs_to_a_sample():
    assert set(REFERENCES) <= {p.stem for p in SAMPLES}


@pytest.mark.slow
@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_runs_at_full_size_and_matches_numpy(path):
    if path.stem not in REFERENCES:
        pytest.fail(f"no reference check for sample {path.stem}: add one to tests/samples/references.py")
    failure = _run_and_check(path)  # a message, so that no traceback keeps the arrays alive
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def _run_and_check(path: Path) -> str | None:
    try:
        repro = load_repro(path)
        assert not repro.problems, [p.one_line() for p in repro.problems]
        returned = 0
        for loaded in repro.definitions:
            assert loaded.inputs is not None
            inputs = loaded.materialize_inputs(seed=0)
            for spec, value in zip(loaded.inputs, inputs, strict=True):
                if isinstance(spec, TensorSpec):  # the full bundled size, not a scaled one
                    assert value.shape == spec.shape and value.nbytes == spec.nbytes, (spec.describe(), value.shape)
            outputs = loaded.fd.execute(inputs)
            assert isinstance(outputs, list) and outputs, f"execute returned {type(outputs).__name__}"
            assert all(isinstance(o, np.ndarray) for o in outputs), [type(o).__name__ for o in outputs]
            assert len(outputs) == len(loaded.fd.fusion.outputs)
            returned += len(outputs)
            REFERENCES[path.stem](inputs, outputs, loaded.fd)
            del inputs, outputs
        assert returned == declared_output_count(path), f"{returned} outputs for {declared_output_count(path)}"
    except Exception:
        return traceback.format_exc(limit=-4)
    return None


# -- the reference helpers can fail -----------------------------------------------------------


def test_check_catches_one_wrong_bf16_element_and_names_it():
    expected = np.linspace(-3.0, 3.0, 12).reshape(3, 4)
    actual = expected.astype(ml_dtypes.bfloat16)
    check("ok", actual, expected, np.dtype(ml_dtypes.bfloat16))
    actual[2, 1] = actual[2, 1] * 1.05
    with pytest.raises(AssertionError, match=r"1 of 12 elements .* worst at \(2, 1\)"):
        check("bad", actual, expected, np.dtype(ml_dtypes.bfloat16))


def test_check_rejects_nan_wrong_dtype_and_wrong_shape():
    expected = np.ones((4, 3))
    with_nan = np.ones((4, 3), np.float32)
    with_nan[1, 2] = np.nan
    with pytest.raises(AssertionError, match=r"1 of 12 .* worst at \(1, 2\)"):
        check("nan", with_nan, expected, np.dtype(np.float32))
    with pytest.raises(AssertionError, match="dtype float64"):
        check("dtype", expected, expected, np.dtype(np.float32))
    with pytest.raises(AssertionError, match="shape"):
        check("shape", np.ones((3, 4), np.float32), expected, np.dtype(np.float32))


def test_check_rows_compares_every_chunk(monkeypatch):
    from . import references

    monkeypatch.setattr(references, "CHUNK_ELEMENTS", 8)  # 2 rows of 4 per chunk
    actual = np.arange(40, dtype=np.float32).reshape(10, 4)
    check_rows("ok", actual, (10, 4), lambda rows: np.arange(40.0).reshape(10, 4)[rows], np.dtype(np.float32))
    actual[9, 3] = -1
    with pytest.raises(AssertionError, match=r"worst at \(9, 3\)"):
        check_rows(
            "last chunk", actual, (10, 4), lambda rows: np.arange(40.0).reshape(10, 4)[rows], np.dtype(np.float32)
        )


def test_torch_pad_trims_and_pads_from_the_last_axis():
    a = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    padded = torch_pad(a, [1, -2, -1, 1])  # last axis: one zero before, trim two after; axis 1: trim one, pad one
    assert padded.shape == (2, 3, 3)
    assert padded[0].tolist() == [[0, 4, 5], [0, 8, 9], [0, 0, 0]]


def test_finite_differences_accept_the_true_gradient_and_catch_a_wrong_one():
    from .references import check_partials_by_finite_differences

    x = np.linspace(-1.0, 1.0, 24).reshape(3, 8)
    weights = np.arange(1.0, 9.0)

    def loss(i: int, row: np.ndarray) -> float:
        return float((weights * np.sin(row)).sum())

    gradient = (weights * np.cos(x)).astype(np.float32)
    args = (loss, lambda i: x[i], lambda i: list(range(8)), [0, 2], np.dtype(np.float32))
    check_partials_by_finite_differences("right", gradient, *args)
    gradient[2, 5] *= 1.001
    with pytest.raises(AssertionError, match=r"1 partial derivatives are off: \[2, 5\]"):
        check_partials_by_finite_differences("wrong", gradient, *args)
