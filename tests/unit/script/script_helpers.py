"""Shared helpers of the loader tests: building scripts from parts."""

import textwrap

import numpy as np

from fuser_core import load_repro
from fuser_core.script.loader import LoadedDefinition, ReproScript

HEADER = """\
import torch
from nvfuser import FusionDefinition, DataType
"""

DEFINITION = """
with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    s0 = fd.define_scalar(None, dtype=DataType.Double)
    fd.add_output(fd.ops.mul(t0, s0))
"""


def load(*parts: str) -> ReproScript:
    """The script made of `parts`, each dedented on its own."""
    return load_repro("".join(textwrap.dedent(part) for part in parts))


def only(script: ReproScript) -> LoadedDefinition:
    assert len(script.definitions) == 1, [d.name for d in script.definitions]
    return script.definitions[0]


def element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)
