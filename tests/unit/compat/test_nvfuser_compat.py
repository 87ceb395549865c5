"""fuser_core.compat: `import nvfuser` resolves to fuser_core only where it was asked for
(an import, `python -m fuser_core.compat`, `pytest -p fuser_core.compat`), and never by
importing fuser_core alone. Every case runs in a subprocess so this process's
sys.modules stays clean."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# What a script written for nvFuser does: import it, define, run, and check the values.
NVFUSER_SCRIPT = """\
import numpy as np
import nvfuser
from nvfuser import FusionDefinition, DataType
from nvfuser.pytorch_utils import torch_dtype_to_nvfuser_dtype
import fuser_core

assert nvfuser.FusionDefinition is fuser_core.FusionDefinition
assert nvfuser.FusionCache.get().num_fusions() == 0
assert nvfuser.compute_contiguity([4, 3], [1, 4]) == [False, False]
assert nvfuser.compute_tensor_descriptor([4, 3], [1, 4]) == ([True, True], [0, 1])
assert torch_dtype_to_nvfuser_dtype(float) is DataType.Double
assert torch_dtype_to_nvfuser_dtype("torch.bfloat16") is DataType.BFloat16
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1], contiguity=[True])
    fd.add_output(fd.ops.mul(t0, t0))
x = np.random.default_rng(7).standard_normal(9).astype(np.float32)
out = fd.execute([x])[0]
assert np.allclose(out, x * x), (out, x)
print("nvfuser is", nvfuser.__name__, "id", fd.id(), "version", nvfuser.version())
"""


def python(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_importing_fuser_core_alone_makes_no_nvfuser_module():
    probe = (
        "import sys, fuser_core, fuser_core.frontend.fusion_definition\n"
        "print(sorted(m for m in sys.modules if 'nvfuser' in m))"
    )
    done = python("-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_importing_the_compat_module_makes_nvfuser_and_its_submodules_resolve_to_fuser_core():
    done = python("-c", "import fuser_core.compat\n" + NVFUSER_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("nvfuser is nvfuser id 0 version ")


def test_python_dash_m_compat_runs_an_unchanged_nvfuser_script_with_its_arguments(tmp_path):
    script = tmp_path / "nvf_script.py"
    script.write_text(NVFUSER_SCRIPT + "import sys\nprint('argv', sys.argv[1:])\n")
    plain = python(str(script))
    assert plain.returncode != 0 and "No module named 'nvfuser'" in plain.stderr
    done = python("-m", "fuser_core.compat", str(script), "--flag", "3")
    assert done.returncode == 0, done.stderr
    assert "nvfuser is nvfuser id 0" in done.stdout
    assert "argv ['--flag', '3']" in done.stdout


def test_python_dash_m_compat_on_a_repro_without_torch_says_what_to_do(tmp_path):
    # a repro script makes its inputs with torch: without it, one line naming the way out
    # (the workbench builds inputs from the script's shapes), not a traceback
    script = tmp_path / "repro.py"
    script.write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    done = python("-m", "fuser_core.compat", str(script))
    assert done.returncode == 1
    assert "the script imports torch, which is not installed here" in done.stderr
    assert f"fuser-wb dump {script} --dump fusion_ir" in done.stderr
    assert "Traceback" not in done.stderr


def test_python_dash_m_compat_without_a_script_prints_its_usage_and_fails():
    done = python("-m", "fuser_core.compat")
    assert done.returncode == 2
    assert done.stdout.startswith("usage: python -m fuser_core.compat SCRIPT")


def test_pytest_plugin_flag_lets_nvfuser_tests_import_it(tmp_path):
    test_file = tmp_path / "test_uses_nvfuser.py"
    body = textwrap.indent(NVFUSER_SCRIPT, "    ")
    test_file.write_text(f"def test_nvfuser_runs():\n{body}\n")
    # the flag, not the test file, makes nvfuser importable
    without = python("-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file), cwd=tmp_path)
    assert without.returncode == 1 and "No module named 'nvfuser'" in without.stdout
    done = python(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fuser_core.compat", str(test_file), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("nvfuser.version() >= '0.0.1'", "True"),
        ("nvfuser.version() < '999'", "True"),
        ("str(nvfuser.version()) == nvfuser.__version__", "True"),
        ("nvfuser.nvfuser_version.Version('0.2.10') > '0.2.9'", "True"),
        ("nvfuser.nvfuser_version.Version('1.2') == '1.2.0'", "True"),
    ],
)
def test_version_compares_part_by_part_as_nvfusers(expression, expected):
    done = python("-c", f"import fuser_core.compat, nvfuser\nprint({expression})")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_compat_outputs_are_torch_tensors_even_without_tensor_inputs():
    pytest.importorskip("torch")
    code = """\
import fuser_core.compat
import torch
from nvfuser import FusionDefinition, DataType
with FusionDefinition() as fd:
    fd.add_output(fd.ops.iota(fd.define_scalar(5, dtype=DataType.Int), dtype=DataType.Int))
out = fd.execute([])[0]
print(type(out).__name__, out.tolist())
"""
    done = python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Tensor [0, 1, 2, 3, 4]"


def test_automatic_serialization_saves_the_cache_at_exit_and_the_next_process_reads_it(tmp_path):
    cache_file = tmp_path / "fusion_cache.json"
    first = """\
import fuser_core.compat, nvfuser
from nvfuser import FusionDefinition
nvfuser.enable_automatic_serialization()
with FusionDefinition() as fd:
    fd.add_output(fd.ops.exp(fd.define_tensor(shape=[-1], contiguity=[True])))
print(fd.id())
"""
    second = """\
import numpy as np
import fuser_core.compat, nvfuser
from nvfuser import FusionCache, FusionDefinition
nvfuser.enable_automatic_serialization()
print(FusionCache.get().num_fusions())
x = np.random.default_rng(2).standard_normal(5).astype(np.float32)
assert np.allclose(FusionDefinition(0).execute([x])[0], np.exp(x))
print(repr(FusionDefinition(0)).splitlines()[3])
"""
    env = {**os.environ, "FUSER_FUSION_CACHE": str(cache_file)}
    done = subprocess.run([sys.executable, "-c", first], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == "0\n", done.stderr
    assert cache_file.is_file()
    done = subprocess.run(
        [sys.executable, "-c", second], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n    T1 = fd.ops.exp(T0)\n"
