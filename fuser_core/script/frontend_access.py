"""The parts of our frontend a repro script may reach, and the old spellings it may use.

Attributes of FusionDefinition, fd.ops and the Tensor/Scalar/Vector handles are read
only through these whitelists; `fd.from_pytorch(x)` takes an input spec instead of a
torch tensor; keywords of the 2023 frontend are renamed to today's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.frontend.operators import Operators
from fuser_core.script.input_spec import TensorSpec
from fuser_core.script.objects import ScriptClass, ScriptObject
from fuser_core.script.values import Namespace, SafeFunction


def kind_of(value: Any) -> str:
    names = {
        Tensor: "fusion tensor", Scalar: "fusion scalar", Vector: "fusion vector",
        TensorSpec: "input tensor", FusionDefinition: "FusionDefinition", Operators: "fd.ops",
    }  # fmt: skip
    for cls, name in names.items():
        if isinstance(value, cls):
            return name
    if isinstance(value, Namespace):
        return f"module {value.name}"
    if isinstance(value, ScriptObject):
        return value.kind
    if isinstance(value, ScriptClass):
        return f"class {value.name}"
    return type(value).__name__


HANDLE_ATTRIBUTES: dict[type, frozenset[str]] = {
    Tensor: frozenset({"ndim", "dtype"}),
    Scalar: frozenset({"dtype"}),
    Vector: frozenset({"size"}),
}
HANDLE_METHODS: dict[type, frozenset[str]] = {Tensor: frozenset({"size", "shape"})}
FD_METHODS = frozenset({"define_scalar", "define_constant", "add_output", "fusion_ir"})
MAX_VECTOR = 10_000  # define_vector(n) makes n scalar inputs

# Keywords of the 2023 frontend that old bug reports still use; None drops the keyword.
OLD_KEYWORDS: dict[str, dict[str, str | None]] = {
    "define_tensor": {"symbolic_sizes": "shape", "contiguous": "contiguity"},
    "broadcast_in_dim": {"output_shape": "shape"},
    "reshape": {"original_shape": None},
    "view": {"original_shape": None},
}


def fd_attribute(fd: FusionDefinition, name: str) -> Any:
    if name == "ops":
        return fd.ops
    if name == "id":
        return fd.id
    special: dict[str, Callable[..., Any]] = {
        "define_tensor": _define_tensor,
        "define_vector": _define_vector,
        "from_pytorch": _from_pytorch,
    }
    if name in special:
        return SafeFunction(name, functools.partial(special[name], fd))
    if name in FD_METHODS:
        return SafeFunction(name, getattr(fd, name))
    raise FuserError(f"`fd.{name}` is not in the subset of the frontend a repro script may use")


def ops_attribute(ops: Operators, name: str) -> SafeFunction:
    try:
        method = getattr(ops, name)
    except AttributeError as err:
        raise FuserError(str(err), op=name) from None
    if not callable(method):
        raise FuserError(f"`fd.ops.{name}` is not an op", op=name)
    if name in OLD_KEYWORDS:
        return SafeFunction(name, functools.partial(_with_new_keywords, name, method))
    return SafeFunction(name, method)


def _with_new_keywords(name: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    for old, new in OLD_KEYWORDS[name].items():
        if old in kwargs:
            value = kwargs.pop(old)
            if new is not None:
                kwargs[new] = value
    return method(*args, **kwargs)


def handle_attribute(handle: Tensor | Scalar | Vector, name: str) -> Any:
    cls = type(handle)
    if name in HANDLE_ATTRIBUTES.get(cls, ()):
        return getattr(handle, name)
    if name in HANDLE_METHODS.get(cls, ()):
        return SafeFunction(name, getattr(handle, name))
    raise FuserError(f"`.{name}` of a {kind_of(handle)} is not in the subset a repro script may use")


def _define_tensor(fd: FusionDefinition, *args: Any, **kwargs: Any) -> Any:
    return _with_new_keywords("define_tensor", fd.define_tensor, *args, **kwargs)


def _define_vector(fd: FusionDefinition, values: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(values, int) and values > MAX_VECTOR:
        raise FuserError(f"a vector of {values} scalars is too long for a repro script", op="define_vector")
    return fd.define_vector(values, *args, **kwargs)


def _from_pytorch(fd: FusionDefinition, tensor: Any, static_sizes: bool = False) -> Any:
    if not isinstance(tensor, TensorSpec):
        raise FuserError(
            f"needs an input tensor made with torch in the script, got a {kind_of(tensor)}", op="from_pytorch"
        )
    return fd.define_tensor(
        sizes=list(tensor.shape), strides=list(tensor.strides or ()), dtype=tensor.dtype, static_sizes=static_sizes
    )
