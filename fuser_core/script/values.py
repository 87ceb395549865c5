"""The values a repro script may hold besides numbers, lists and frontend handles.

The repro interpreter calls nothing but `SafeFunction`s and the script's own
functions, and reads attributes only through `Namespace`s and per-type whitelists, so
every value a script can reach is one of these or one made by our own frontend.
`flat_size` and `nested_size` measure values for the interpreter's work budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.script.input_spec import TensorSpec


@dataclass(frozen=True, eq=False)
class SafeFunction:
    """A callable a script may call: one of ours, or a whitelisted frontend method.
    `shallow` ones look at their arguments' own items only, never at lists inside them,
    so the interpreter charges a call what the arguments hold at their top level."""

    name: str
    impl: Callable[..., Any]
    shallow: bool = False


@dataclass(frozen=True, eq=False)
class Ignored:
    """A call that is skipped without evaluating its arguments (print, assertions, timing)."""

    name: str


@dataclass(frozen=True, eq=False)
class Namespace:
    """A module-like name (`torch`, `nvfuser`) whose members are listed, nothing more."""

    name: str
    members: Mapping[str, Any]

    def member(self, attr: str) -> Any:
        if attr in self.members:
            return self.members[attr]
        raise FuserError(f"`{self.name}.{attr}` is not in the subset of Python a repro script may use")


@dataclass(frozen=True)
class Unavailable:
    """A name the loader refused to provide (a refused import or assignment); using it
    fails with `reason`."""

    name: str
    reason: str

    def error(self) -> FuserError:
        return FuserError(f"`{self.name}` is not available: {self.reason}")


@dataclass(frozen=True)
class Opaque:
    """A value the loader does not compute, such as what `fd.execute` returns."""

    what: str


@dataclass(frozen=True)
class PassContext:
    """A context manager with no effect on loading (`with torch.no_grad():`)."""

    name: str


@dataclass(frozen=True)
class Marker:
    """A named constant with no value of its own (`torch.channels_last`)."""

    name: str


def flat_size(value: Any) -> int:
    """The items of a list, tuple, dict or string, or the data written out for a tensor."""
    if isinstance(value, (list, tuple, str, dict)):
        return len(value)
    if isinstance(value, TensorSpec) and value.data is not None:
        return len(value.data)
    return 0


def nested_size(values: tuple[Any, ...], limit: int) -> int:
    """The items of `values` and of the lists inside them, a list counted each time it
    appears (as `==` may scan it), capped just past `limit`. Each distinct list is
    measured once, so lists doubled in a loop, or a list that holds itself, are cheap."""
    sizes: dict[int, int] = {}  # id of a measured list -> its capped size
    total = 0
    for value in values:
        total = min(total + _measure(value, limit, sizes), limit + 1)
    return total


_CONTAINERS = (list, tuple, dict)
_SIZED = (list, tuple, dict, str, TensorSpec)


def _measure(root: Any, limit: int, sizes: dict[int, int]) -> int:
    if not isinstance(root, _CONTAINERS):
        return flat_size(root)
    stack = [root]
    open_lists: dict[int, list[Any]] = {}  # lists whose items are being measured: their sized items
    while stack:
        node = stack[-1]
        if id(node) in sizes:
            stack.pop()
            continue
        if id(node) not in open_lists:
            items = node.values() if isinstance(node, dict) else node
            open_lists[id(node)] = sized = [v for v in items if isinstance(v, _SIZED)]
            inner = [v for v in sized if isinstance(v, _CONTAINERS) and id(v) not in sizes]
            if any(id(v) in open_lists for v in inner):
                return limit + 1  # it holds itself: as good as infinite
            if inner:
                stack.extend(inner)
                continue
        sized = open_lists.pop(id(node))
        size = len(node) + sum(sizes[id(v)] if isinstance(v, _CONTAINERS) else flat_size(v) for v in sized)
        sizes[id(node)] = min(size, limit + 1)
        stack.pop()
    return sizes[id(root)]
