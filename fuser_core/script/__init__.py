"""The safe reader of untrusted repro scripts.

A repro script pasted from a bug report is read from its AST by a small evaluator
(a subset of Python, of torch and of the test helpers nvFuser's scripts use); it is
never executed. What it yields is the FusionDefinitions it builds and the specs of
the inputs it would make.
"""

from fuser_core.script.input_spec import InputSpec, ScalarSpec, TensorSpec
from fuser_core.script.loader import LoadedDefinition, ReproScript, load_repro

__all__ = ["InputSpec", "LoadedDefinition", "ReproScript", "ScalarSpec", "TensorSpec", "load_repro"]
