"""The two error types of the project and the source locations they point at.

`FuserError` is for what a user did (a bad script, an unsupported op, a shape or
dtype mismatch, wrong inputs); `InternalError` is for a broken invariant of ours.
User-facing messages name the op, the tensor and the script line.
"""

from __future__ import annotations

import contextlib
import contextvars
import linecache
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A line of the user's script: where an op was defined or an error arose."""

    filename: str
    lineno: int
    line: str = ""

    def __str__(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"


class FuserError(RuntimeError):
    """Something the user did cannot be compiled or run; the message says what and where.

    A RuntimeError, as every error of nvFuser's frontend is, so code written against
    nvFuser catches it."""

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        tensor: str | None = None,
        location: SourceLocation | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.tensor = tensor
        self.location = location if location is not None else current_location()

    def one_line(self) -> str:
        where = f"{self.location}: " if self.location else ""
        what = f"{self.op}: " if self.op else ""
        return f"{where}{what}{self.message}"

    def __str__(self) -> str:
        text = self.one_line()
        if self.location and self.location.line.strip():
            text += f"\n    {self.location.line.strip()}"
        return text


class FuserValueError(FuserError, ValueError):
    """A FuserError where nvFuser raises ValueError (a CPU tensor given to
    `from_pytorch`, `profile()` before a profiled run)."""


class InternalError(RuntimeError):
    """A broken invariant inside fuser_core: a bug of ours, never the user's."""


# The location of the user code currently being turned into IR. The frontend sets it
# around each call it makes on the user's behalf; the repro loader sets it per AST node.
_current_location: contextvars.ContextVar[SourceLocation | None] = contextvars.ContextVar(
    "fuser_current_location", default=None
)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def current_location() -> SourceLocation | None:
    return _current_location.get()


@contextlib.contextmanager
def at_location(location: SourceLocation | None) -> Iterator[None]:
    token = _current_location.set(location)
    try:
        yield
    finally:
        _current_location.reset(token)


def caller_location() -> SourceLocation | None:
    """The innermost stack frame outside fuser_core: the user's line calling into us."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            return SourceLocation(filename, frame.f_lineno, _read_line(filename, frame.f_lineno))
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _read_line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).rstrip("\n")
