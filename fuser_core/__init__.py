"""fuser_core: a fusion compiler modelled on nvFuser.

The public API: `FusionDefinition` and `DataType` (as in nvFuser's frontend), the
error types, the repro loader and the options. Nothing here imports rich, textual,
graphviz or CuPy.
"""

from fuser_core.errors import FuserError, InternalError, SourceLocation
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.ir.dtype import DataType

__all__ = [
    "DataType",
    "FuserError",
    "FusionDefinition",
    "InternalError",
    "Scalar",
    "SourceLocation",
    "Tensor",
    "Vector",
]
