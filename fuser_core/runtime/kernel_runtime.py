"""A FusionKernelRuntime: one concretized fusion made runnable by a backend.

The backend turns a concretized Fusion into something that runs it. The reference
backend evaluates it with NumPy; the CUDA backend will segment, schedule, compile
and launch behind the same protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fuser_core.dynamic.concretization_info import ConcretizationInfo
from fuser_core.ir.fusion import Fusion
from fuser_core.runtime.arguments import bind_args
from fuser_core.runtime.reference import evaluate_fusion
from fuser_core.runtime.signature import InputSignature


class Executable(Protocol):
    def run(self, args: Sequence[Any]) -> list[Any]: ...


class Backend(Protocol):
    name: str

    def compile(self, fusion: Fusion, signature: InputSignature) -> Executable: ...


class _ReferenceExecutable:
    def __init__(self, fusion: Fusion) -> None:
        self.fusion = fusion
        self.exprs = fusion.exprs()  # the order is fixed once compiled

    def run(self, args: Sequence[Any]) -> list[Any]:
        return evaluate_fusion(self.fusion, bind_args(self.fusion, args), self.exprs)


class ReferenceBackend:
    """Runs fusions with NumPy on the host: every op, every dtype, no GPU."""

    name = "reference"

    def compile(self, fusion: Fusion, signature: InputSignature) -> Executable:
        return _ReferenceExecutable(fusion)


@dataclass
class FusionKernelRuntime:
    fusion_id: int
    concretization_id: int  # 1-based, per (device, concretization) key
    runtime_id: int  # 0-based, under that key
    info: ConcretizationInfo
    fusion: Fusion  # the concretized fusion this runtime runs
    signature: InputSignature
    executable: Executable

    @property
    def name(self) -> str:
        return f"f{self.fusion_id}_c{self.concretization_id}_r{self.runtime_id}"

    def accepts(self, signature: InputSignature) -> bool:
        return signature == self.signature

    def run(self, args: Sequence[Any]) -> list[Any]:
        return self.executable.run(args)
