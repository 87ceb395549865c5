"""The values a repro script may hold besides numbers, lists and frontend handles.

The repro interpreter calls nothing but `SafeFunction`s and the script's own
functions, and reads attributes only through `Namespace`s and per-type whitelists, so
every value a script can reach is one of these or one made by our own frontend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fuser_core.errors import FuserError


@dataclass(frozen=True, eq=False)
class SafeFunction:
    """A callable a script may call: one of ours, or a whitelisted frontend method."""

    name: str
    impl: Callable[..., Any]


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
