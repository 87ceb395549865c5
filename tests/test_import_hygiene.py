"""fuser_core stays free of UI libraries and of GPU/framework imports."""

import subprocess
import sys

FORBIDDEN = ("rich", "textual", "graphviz", "cupy", "torch", "workbench")


def test_importing_fuser_core_loads_no_ui_or_gpu_library():
    code = (
        "import sys, fuser_core, fuser_core.options, fuser_core.runtime.executor_cache\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_running_a_fusion_on_the_reference_imports_no_gpu_library():
    code = (
        "import sys, numpy as np\n"
        "from fuser_core import FusionDefinition\n"
        "with FusionDefinition() as fd:\n"
        "    fd.add_output(fd.ops.exp(fd.define_tensor(shape=[-1], contiguity=True)))\n"
        "fd.execute([np.ones(3, np.float32)])\n"
        f"print(','.join(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
