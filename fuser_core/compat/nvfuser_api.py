"""The `nvfuser` module fuser_core stands in as: the names nvFuser's Python package
exports, each backed by fuser_core's own implementation."""

from __future__ import annotations

import functools
import re
import types
from importlib import metadata
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.frontend.execution import return_torch_by_default
from fuser_core.frontend.fusion_cache import FusionCache, enable_automatic_serialization
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.ir.dtype import DataType, dtype_from_torch_name, parse_dtype
from fuser_core.ir.layout import compute_contiguity, compute_tensor_descriptor


@functools.total_ordering
class Version:
    """A release number compared part by part, against another Version or a string."""

    def __init__(self, text: str) -> None:
        match = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
        if match is None:
            raise ValueError(f"not a version: {text!r}")
        self.text = str(text)
        self.parts = tuple(int(p) for p in match.group(1).split("."))

    def _key(self, other: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        other = other if isinstance(other, Version) else Version(str(other))
        width = max(len(self.parts), len(other.parts))
        pad = lambda p: p + (0,) * (width - len(p))  # noqa: E731
        return pad(self.parts), pad(other.parts)

    def __eq__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine == theirs

    def __lt__(self, other: Any) -> bool:
        mine, theirs = self._key(other)
        return mine < theirs

    def __hash__(self) -> int:
        return hash(self.parts)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Version({self.text!r})"


def version() -> Version:
    """This fuser-workbench's version (nvFuser's `nvfuser.version()`)."""
    try:
        return Version(metadata.version("fuser-workbench"))
    except metadata.PackageNotFoundError:  # run from a source tree
        return Version("0.1.0")


# Python scalar types, as nvFuser's pytorch_utils maps them
_PYTHON_TYPES = {complex: DataType.ComplexDouble, float: DataType.Double, int: DataType.Int, bool: DataType.Bool}


def torch_dtype_to_nvfuser_dtype(dtype: Any) -> DataType:
    """The DataType of a torch dtype (read by name: torch is not imported) or of a
    Python scalar type (float is Double, int is Int)."""
    if isinstance(dtype, type) and dtype in _PYTHON_TYPES:
        return _PYTHON_TYPES[dtype]
    found = dtype_from_torch_name(str(dtype))
    if found is not None:
        return found
    try:
        return parse_dtype(dtype)
    except (ValueError, TypeError) as err:
        raise FuserError(f"no nvFuser DataType for {dtype!r}: {err}", op="torch_dtype_to_nvfuser_dtype") from None


def disable_automatic_serialization() -> None:
    """Accepted for nvFuser compatibility: nothing is saved unless enabled."""


def build_modules() -> dict[str, types.ModuleType]:
    return_torch_by_default(True)
    nvfuser = types.ModuleType("nvfuser", "fuser_core standing in for nvFuser (fuser_core.compat)")
    nvfuser.__path__ = []  # a package, so `import nvfuser.pytorch_utils` works
    names = {
        "FusionCache": FusionCache,
        "FusionDefinition": FusionDefinition,
        "DataType": DataType,
        "Tensor": Tensor,
        "Scalar": Scalar,
        "Vector": Vector,
        "version": version,
        "compute_contiguity": compute_contiguity,
        "compute_tensor_descriptor": compute_tensor_descriptor,
        "enable_automatic_serialization": enable_automatic_serialization,
        "disable_automatic_serialization": disable_automatic_serialization,
        "__version__": str(version()),
    }
    nvfuser.__dict__.update(names)
    pytorch_utils = types.ModuleType("nvfuser.pytorch_utils")
    pytorch_utils.torch_dtype_to_nvfuser_dtype = torch_dtype_to_nvfuser_dtype  # type: ignore[attr-defined]
    nvfuser_version = types.ModuleType("nvfuser.nvfuser_version")
    nvfuser_version.Version = Version  # type: ignore[attr-defined]
    nvfuser_version.version = version  # type: ignore[attr-defined]
    nvfuser.pytorch_utils = pytorch_utils  # type: ignore[attr-defined]
    nvfuser.nvfuser_version = nvfuser_version  # type: ignore[attr-defined]
    return {"nvfuser": nvfuser, "nvfuser.pytorch_utils": pytorch_utils, "nvfuser.nvfuser_version": nvfuser_version}
