"""nvFuser's Python frontend (FusionDefinition) and the repro-script loader."""

from fuser_core.frontend.input_spec import InputSpec, ScalarSpec, TensorSpec
from fuser_core.frontend.repro_loader import LoadedDefinition, ReproScript, load_repro

__all__ = ["InputSpec", "LoadedDefinition", "ReproScript", "ScalarSpec", "TensorSpec", "load_repro"]
