"""`fuser-wb`: the workbench's command line.

    fuser-wb [FILE]                  open a repro script (the TUI is not built yet:
                                     for now this prints its IR, as `dump` does)
    fuser-wb dump FILE               print each definition's IR and input specs
    fuser-wb dump FILE --dump NAMES  run each definition on its script's inputs
                                     (reference backend) and print the named dumps
    fuser-wb dump FILE --device-model h200
                                     size heuristics for a named device, not the GPU
    fuser-wb samples                 list the bundled sample fusions

FILE is a path or the name of a bundled sample (`rope_litgpt`). Exit status is 0 when
everything loaded (and ran), 1 with a one-line error otherwise (set FUSER_TRACEBACK=1
to see the traceback of an internal error).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from fuser_core import DumpOption, FuserError, LoadedDefinition, dump_sink, load_repro, use_options

# In a clone (or an editable install) the samples sit beside the package; a regular
# install puts them under the environment's share/ directory.
_SAMPLE_DIRS = (
    Path(__file__).resolve().parent.parent / "sample_fusions",
    Path(sys.prefix) / "share" / "fuser-workbench" / "sample_fusions",
)
SAMPLES_DIR = next((d for d in _SAMPLE_DIRS if d.is_dir()), _SAMPLE_DIRS[0])
DEFAULT_MAX_INPUT_BYTES = 4 * 2**30


def resolve_script(name: str) -> Path:
    """A path as given, or a bundled sample by name (with or without `.py`)."""
    path = Path(name)
    if path.exists():
        return path
    candidate = SAMPLES_DIR / (name if name.endswith(".py") else f"{name}.py")
    if candidate.exists():
        return candidate
    raise FuserError(f"no such file or bundled sample: {name} (try `fuser-wb samples`)")


def parse_bytes(text: str) -> int:
    """`4GiB`, `512M`, `1e9` or a plain number of bytes."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMGT]?)(i?B?)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4GiB, 512M, 1000000)")
    number, unit, binary = match.groups()
    base = 1024 if binary.startswith("i") else 1000
    return int(float(number) * base ** "_KMGT".index(unit or "_"))


def list_samples(out: TextIO) -> int:
    for path in sorted(SAMPLES_DIR.glob("*.py")):
        out.write(f"{path.stem:36} {_first_comment(path)}\n")
    return 0


def _first_comment(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip().lstrip("#").strip()
        if line.startswith("#") and text:
            return text
    return ""


def print_definition(loaded: LoadedDefinition, out: TextIO) -> None:
    out.write(f"== {loaded.name} (line {loaded.lineno})\n")
    out.write(loaded.fd.fusion_ir())
    if loaded.inputs is None:
        out.write("Input specs: none in the script\n")
        return
    out.write("Input specs:\n")
    for index, spec in enumerate(loaded.inputs):
        out.write(f"  {index}: {spec.describe()}\n")


def dump(args: argparse.Namespace, out: TextIO) -> int:
    with use_options(
        dump=args.dump,
        enable=args.enable,
        disable=args.disable,
        source="the command line",
        device_model=args.device_model,
    ):
        # Names are checked above, before anything loads; dumps go where `out` goes.
        repro = load_repro(resolve_script(args.file))
        for problem in repro.problems:
            out.write(f"note: skipped {problem.one_line()}\n")
        with dump_sink(lambda option, text: _write_line(out, text)):
            for loaded in repro.definitions:
                if args.dump:
                    run_definition(loaded, args.max_input_bytes, out)
                else:
                    print_definition(loaded, out)
    return 0


def run_definition(loaded: LoadedDefinition, max_bytes: int, out: TextIO) -> None:
    if loaded.inputs is None:
        raise FuserError(f"{loaded.name} has no inputs in the script to run it with")
    out.write(f"== {loaded.name} (line {loaded.lineno})\n")
    loaded.fd.execute(loaded.materialize_inputs(seed=0, max_bytes=max_bytes))


def _write_line(out: TextIO, text: str) -> None:
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fuser-wb", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    dump_cmd = sub.add_parser("dump", help="print a script's fusions, or run them with dumps")
    dump_cmd.add_argument("file")
    dump_cmd.add_argument("--dump", default="", help="comma-separated dump names: " + ", ".join(DumpOption.__members__))
    dump_cmd.add_argument("--enable", default="", help="comma-separated enable options")
    dump_cmd.add_argument("--disable", default="", help="comma-separated disable options")
    dump_cmd.add_argument(
        "--device-model",
        default=None,
        help="size heuristics for this named device model (e.g. h200) instead of the GPU's own properties;"
        " an unknown name lists the valid ones",
    )
    dump_cmd.add_argument(
        "--max-input-bytes",
        type=parse_bytes,
        default=DEFAULT_MAX_INPUT_BYTES,
        help="refuse to create more input data than this (default 4GiB)",
    )
    sub.add_parser("samples", help="list the bundled sample fusions")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] not in ("dump", "samples", "-h", "--help"):
        args_list = ["dump", *args_list]  # `fuser-wb FILE`: the TUI's place, printing for now
    if not args_list:
        args_list = ["dump", "issue785_reduction_pow"]
    args = _parser().parse_args(args_list)
    try:
        if args.command == "samples":
            return list_samples(out)
        return dump(args, out)
    except FuserError as err:
        sys.stderr.write(f"fuser-wb: {err.one_line()}\n")
        return 1
    except Exception as err:  # a bug of ours: one line, the traceback on request
        if os.environ.get("FUSER_TRACEBACK"):
            raise
        sys.stderr.write(f"fuser-wb: internal error, please report it: {type(err).__name__}: {err}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
