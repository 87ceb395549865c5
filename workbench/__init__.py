"""The workbench on top of fuser_core: the session model, stage diffs, rich renderers,
exports, the `fuser-wb` command line and the Textual TUI. It uses only fuser_core's
public API."""
