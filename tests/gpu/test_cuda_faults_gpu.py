"""A real CUDA fault on the GPU becomes a FuserError naming the kernel, its launch and the
script line. Each case runs in a subprocess of its own, as a fault is sticky and leaves
the process's CUDA context unusable: the generated kernel of the first group is handed
its input's pointer plus 2 bytes, so its (vector or scalar) float loads are misaligned
and CUDA reports CUDA_ERROR_MISALIGNED_ADDRESS, or cudaErrorMisalignedAddress where a
synchronization reports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

# Lines 14 and 15 of the script hold the ops of g0, line 16 the op of g1.
SCRIPT = textwrap.dedent(
    """\
    import json, sys
    import cupy
    from fuser_core import FuserError, FusionDefinition, use_options
    from fuser_core.runtime import packed_args

    set_tensor = packed_args.PackedArgs.set_tensor
    def misaligned(self, position, pointer, sizes, strides):
        shift = 2 if pointer and self.kernel.name.endswith("_g0") and self.kernel.tensors[position].name == "T0" else 0
        set_tensor(self, position, pointer + shift, sizes, strides)
    packed_args.PackedArgs.set_tensor = misaligned

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        t1 = fd.ops.exp(t0)
        t2 = fd.ops.segment_set(t1)
        fd.add_output(fd.ops.mul(t2, t2))

    def report(err):
        fault = getattr(err, "fault", None)
        return {
            "message": str(err),
            "location": [err.location.lineno if err.location else None],
            "kernels": [[k.name, list(k.launch.grid), list(k.launch.block)] for k in (fault.kernels if fault else ())],
            "pinned": fault.pinned if fault else None,
            "sticky": fault.sticky if fault else None,
            "cuda": [k.name for k in err.runtime.kernels] if getattr(err, "runtime", None) else [],
        }

    x = cupy.ones((64, 1024), cupy.float32)
    found = []
    with use_options(backend="cuda"):
        if sys.argv[1] == "sync":
            try:
                fd.execute([x], _enable_options=["sync_launches"])
            except FuserError as err:
                found.append(report(err))
        else:
            outputs = fd.execute([x])
            try:
                fd.executor_cache.outputs_on_host(outputs)
            except FuserError as err:
                found.append(report(err))
            try:
                fd.execute([x])
            except FuserError as err:
                found.append(report(err))
    print("REPORT " + json.dumps(found))
    """
)


def run_script(tmp_path: Path, mode: str) -> list[dict]:
    script = tmp_path / "fault_script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FUSER_KERNEL_CACHE": str(tmp_path / "kernels")}
    done = subprocess.run(
        [sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("REPORT ")), None)
    assert line is not None, done.stdout + done.stderr
    return json.loads(line[len("REPORT ") :])


def test_sync_launches_pins_a_real_misaligned_address_fault_to_its_kernel_and_line(tmp_path):
    (found,) = run_script(tmp_path, "sync")
    message = found["message"]
    assert found["pinned"] and found["sticky"], message
    (kernel,) = found["kernels"]
    assert kernel[0] == "nvfuser_pointwise_f0_c1_r0_g0"
    assert "misaligned address" in message and "(sync_launches)" in message
    grid, block = tuple(kernel[1]), tuple(kernel[2])
    assert f"The kernel that faulted: g0 nvfuser_pointwise_f0_c1_r0_g0, pointwise scheduler: grid {grid}" in message
    assert f"block {block}" in message and "its ops at fault_script.py:14-15" in message
    assert found["location"] == [14] and message.startswith("fault_script.py:14: CUDA error ")
    assert "This is a sticky fault" in message
    assert found["cuda"] == ["nvfuser_pointwise_f0_c1_r0_g0", "nvfuser_pointwise_f0_c1_r0_g1"]


def test_without_the_option_the_copy_of_the_outputs_reports_the_fault_and_names_every_kernel(tmp_path):
    at_copy, next_run = run_script(tmp_path, "async")
    message = at_copy["message"]
    assert not at_copy["pinned"] and at_copy["sticky"], message
    assert [k[0] for k in at_copy["kernels"]] == ["nvfuser_pointwise_f0_c1_r0_g0", "nvfuser_pointwise_f0_c1_r0_g1"]
    assert "misaligned address, reported when copying the outputs to the host" in message
    assert "fault_script.py:14-15" in message and "fault_script.py:16" in message
    assert "run again with the enable option sync_launches" in message
    assert "already lost to an earlier sticky fault" in next_run["message"]
