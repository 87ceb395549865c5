"""CUDA code generation: scheduled group -> kernel IR -> CUDA C++ (and a CPU interpreter)."""

from fuser_core.codegen.cuda import print_kernel, translation_unit
from fuser_core.codegen.kernel_ir import Kernel, print_kernel_ir
from fuser_core.codegen.lower import lower_group

__all__ = ["Kernel", "lower_group", "print_kernel", "print_kernel_ir", "translation_unit"]
