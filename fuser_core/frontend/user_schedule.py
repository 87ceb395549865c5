"""`fd.sched`: nvFuser's user-schedule namespace.

fuser-workbench schedules every fusion with its own schedulers, so a user schedule
is not applied: calling any scheduling op of `fd.sched` is a FuserError that names
the op. `schedule()` methods that call none (an empty schedule) run as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fuser_core.errors import FuserError
from fuser_core.ir.printer import print_kernel

if TYPE_CHECKING:
    from fuser_core.frontend.fusion_definition import FusionDefinition


class UserSchedule:
    def __init__(self, fd: FusionDefinition) -> None:
        self._fd = fd
        self.running = False  # inside the definition's schedule()

    def user_schedule_ir(self) -> str:
        """The fusion a user schedule acts on, with its transforms."""
        return print_kernel(self._fd.fusion, include_transforms=True)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise FuserError(
                f"user schedules are not supported: fd.sched.{name} is not applied; fuser-workbench "
                "schedules every fusion with its own schedulers (drop schedule() to use them)",
                op=f"sched.{name}",
            )

        return refuse
