"""Rich renderables of every artifact of a run, for the CLI, the reports and the TUI.

`render_dump(name, artifacts)` renders one dump option's stage; `RENDERERS` holds one
renderer per dump name. In a console without colour they print the same text as
fuser_core's FUSER_DUMP (tables aside), so a dump reads the same everywhere.
"""

from workbench.render.dumps import RENDERERS, render_dump, render_run
from workbench.render.text import GROUP_COLORS, SCHEDULER_COLORS, code_text, ir_text, make_console

__all__ = [
    "GROUP_COLORS",
    "RENDERERS",
    "SCHEDULER_COLORS",
    "code_text",
    "ir_text",
    "make_console",
    "render_dump",
    "render_run",
]
