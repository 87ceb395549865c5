"""The Textual TUI of the workbench: `fuser-wb [FILE]` in a terminal."""

from workbench.tui.app import Launch, WorkbenchApp

__all__ = ["Launch", "WorkbenchApp"]
