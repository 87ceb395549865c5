"""fuser_core: a fusion compiler modelled on nvFuser.

The public API: `FusionDefinition` and `DataType` (as in nvFuser's frontend), the
error types, the repro loader and the options. Nothing here imports rich, textual,
graphviz or CuPy.
"""

from fuser_core.codegen.interpreter.trace import KernelTrace, ReductionTrace
from fuser_core.errors import FuserError, InternalError, SourceLocation
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.ir.dtype import DataType
from fuser_core.ir.printer import print_kernel, print_math
from fuser_core.options import DEVICE_MODELS, DisableOption, DumpOption, EnableOption, dump_sink, use_options
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.artifacts import KernelArtifact, LaunchParams, LaunchRecord
from fuser_core.runtime.element_trace import ElementTrace, InputRead, trace_element
from fuser_core.runtime.executor_cache import CacheEvent, FusionExecutorCache, RunReport, select_backend
from fuser_core.runtime.kernel_choice import CandidateTiming, KernelChoice
from fuser_core.runtime.kernel_runtime import Backend, FusionKernelRuntime, ReferenceBackend
from fuser_core.runtime.roofline import RooflineEstimate
from fuser_core.scheduler.device import gpu_name
from fuser_core.script.input_spec import ScalarSpec, TensorSpec, materialize_inputs
from fuser_core.script.loader import LoadedDefinition, ReproScript, load_repro
from fuser_core.segmenter.printer import (
    kernel_name,
    print_presched,
    print_scheduler_params,
    print_segmented_fusion,
    print_segmenter_log,
    recompute_lines,
)
from fuser_core.segmenter.printer import print_scheduled as print_scheduled_groups
from fuser_core.segmenter.segmented_fusion import SegmentedFusion
from fuser_core.segmenter.why import MergeAnswer, SplitAnswer, explain_merge, explain_split

__all__ = [
    "DEVICE_MODELS",
    "Backend",
    "CacheEvent",
    "CandidateTiming",
    "DataType",
    "DisableOption",
    "DumpOption",
    "ElementTrace",
    "EnableOption",
    "FuserError",
    "FusionDefinition",
    "FusionExecutorCache",
    "FusionKernelRuntime",
    "InputRead",
    "InternalError",
    "KernelArtifact",
    "KernelChoice",
    "KernelTrace",
    "LaunchParams",
    "LaunchRecord",
    "LoadedDefinition",
    "MergeAnswer",
    "ReductionTrace",
    "ReferenceBackend",
    "ReproScript",
    "RooflineEstimate",
    "RunReport",
    "Scalar",
    "ScalarSpec",
    "SegmentedFusion",
    "SourceLocation",
    "SplitAnswer",
    "Tensor",
    "TensorSpec",
    "Vector",
    "bind_args",
    "convert_inputs",
    "dump_sink",
    "explain_merge",
    "explain_split",
    "gpu_name",
    "kernel_name",
    "load_repro",
    "materialize_inputs",
    "print_kernel",
    "print_math",
    "print_presched",
    "print_scheduled_groups",
    "print_scheduler_params",
    "print_segmented_fusion",
    "print_segmenter_log",
    "recompute_lines",
    "select_backend",
    "trace_element",
    "use_options",
]
