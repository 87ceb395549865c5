"""`python -m fuser_core.compat script.py [args]` or `... -m module [args]`: run an
nvFuser script or tool (pytest, say) with `nvfuser` resolving to fuser_core."""

from __future__ import annotations

import runpy
import sys

from fuser_core.compat import install

USAGE = "usage: python -m fuser_core.compat SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except ModuleNotFoundError as err:
        if err.name != "torch":
            raise
        # A repro script makes its inputs with torch: without it, the workbench can still
        # run the script (`fuser-wb dump`), building the inputs from the script's shapes.
        print(
            f"{argv[0]}: the script imports torch, which is not installed here: install torch "
            f"to run it as written, or run `fuser-wb dump {argv[0]} --dump fusion_ir` (inputs from its shapes)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
