"""fuser_core: a fusion compiler modelled on nvFuser.

The public API: `FusionDefinition` and `DataType` (as in nvFuser's frontend), the
error types, the repro loader and the options. Nothing here imports rich, textual,
graphviz or CuPy.
"""

from fuser_core.errors import FuserError, InternalError, SourceLocation
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.frontend.input_spec import ScalarSpec, TensorSpec
from fuser_core.frontend.repro_loader import LoadedDefinition, ReproScript, load_repro
from fuser_core.ir.dtype import DataType
from fuser_core.options import DisableOption, DumpOption, EnableOption, dump_sink, use_options

__all__ = [
    "DataType",
    "DisableOption",
    "DumpOption",
    "EnableOption",
    "FuserError",
    "FusionDefinition",
    "InternalError",
    "LoadedDefinition",
    "ReproScript",
    "Scalar",
    "ScalarSpec",
    "SourceLocation",
    "Tensor",
    "TensorSpec",
    "Vector",
    "dump_sink",
    "load_repro",
    "use_options",
]
