"""The workbench on top of fuser_core: CLI dumps now; rich rendering, graphviz export and
the Textual TUI come next. It uses only fuser_core's public API."""
