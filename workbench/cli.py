"""`fuser-wb`: the workbench's command line.

    fuser-wb [FILE]                  open a repro script in the TUI (default: a bundled
                                     sample); when stdout is not a terminal, print
                                     its IR instead, as `dump` does
    fuser-wb tui [FILE]              the TUI, also with run options (--shapes ...)
    fuser-wb dump FILE               print each definition's IR and input specs
    fuser-wb dump FILE --dump NAMES  run each definition and print the named dumps,
                                     rich-rendered (plain text when not a terminal)
    fuser-wb diff FILE --a "--disable concretize_resize_extents" --b ""
                                     run twice and print what changed in every stage
    fuser-wb graph FILE -o out.dot   the segment graph as DOT (.svg/.png need `dot`)
    fuser-wb metrics FILE... -o runs.csv
                                     one row per kernel per run
    fuser-wb report FILE -o run.html every stage of a run in one HTML file (--json: data)
    fuser-wb export-repro FILE [-o repro.py]
                                     nvFuser's repro script of each definition, with
                                     the shapes, scalars and options given
    fuser-wb why FILE g0 g1          ask the segmenter why two groups (or the groups of
                                     two expressions, by tensor: T3 T9) are separate
                                     kernels: every scheduler's verdict with its figures
    fuser-wb why FILE g1             how g1 would be cut without its scheduler
    fuser-wb trace FILE T12 3,0,7    where one element of a tensor came from: the
                                     kernel that writes it, interpreted for one block
    fuser-wb save FILE [-o B.fwb.json] [--then "--disable X"]
                                     run (twice with --then) and save a bundle
    fuser-wb open BUNDLE             print every stage a bundle recorded (--tui: browse)
    fuser-wb samples                 list the bundled sample fusions

Running commands take --enable/--disable OPTS, --shapes (one AxBxC per tensor input),
--scalars (comma-separated), --backend reference|cuda, --device-model NAME, --seed N
and --definition NAME. FILE is a path or the name of a bundled sample (`rope_litgpt`).
Exit status is 0 when everything loaded (and ran), 1 with a one-line error otherwise
(set FUSER_TRACEBACK=1 to see the traceback of an internal error). A run that ends in a
CUDA fault says which kernels, with their launches, and writes the run's repro script
and those kernels' CUDA into --export-dir (default: here).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO

from rich.text import Text

from fuser_core import DumpOption, FuserError, LoadedDefinition, dump_sink, load_repro, use_options
from workbench.bundle import BUNDLE_SUFFIX, load_bundle, save_bundle
from workbench.diff import diff_artifacts
from workbench.exports import export_fault, export_repro, write_report
from workbench.graph import write_graph
from workbench.metrics import rows, write_csv
from workbench.render import make_console, render_dump, render_run
from workbench.render.diffs import render_run_diff
from workbench.render.trace import render_trace
from workbench.samples import SAMPLES_DIR, resolve_script
from workbench.session import (
    BACKENDS,
    DEFAULT_MAX_INPUT_BYTES,
    SYNC_LAUNCHES,
    RunOptions,
    RunResult,
    Session,
    SettingsArgs,
    apply_settings,
    make_backend,
    parse_index,
    parse_scalar,
    parse_settings_args,
    parse_shape,
    split_names,
)
from workbench.tui import Launch, WorkbenchApp
from workbench.why import answer_text

__all__ = ["DEFAULT_MAX_INPUT_BYTES", "SAMPLES_DIR", "main", "resolve_script"]
COMMANDS = (
    "tui",
    "dump",
    "diff",
    "graph",
    "metrics",
    "report",
    "export-repro",
    "why",
    "samples",
    "trace",
    "save",
    "open",
)
DEFAULT_SAMPLE = "issue785_reduction_pow"


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


# -- sessions from the command line -----------------------------------------------------


def _options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        dump=split_names(getattr(args, "dump", "")),
        enable=split_names(args.enable),
        disable=split_names(args.disable),
        backend=args.backend,
        device_model=args.device_model,
    )


def _settings_args(args: argparse.Namespace) -> SettingsArgs:
    shapes = tuple(parse_shape(s) for value in args.shapes or () for s in value.split(";") if s.strip())
    scalars = tuple(parse_scalar(v) for v in (args.scalars or "").split(",") if v.strip())
    return SettingsArgs(shapes=shapes or None, scalars=scalars or None)


def _check_backend(name: str, device_model: str | None = None) -> None:
    """An unavailable backend is refused before anything loads or runs."""
    make_backend(name, device_model)


def _sessions(args: argparse.Namespace, path: Path) -> Iterator[Session]:
    """A session per definition of the script (or the one `--definition` names), set up
    as the command line says."""
    session = Session.open(str(path), args.definition)
    names = [args.definition] if args.definition else session.definitions
    for name in names:
        session.select(name)
        session.seed = args.seed
        session.max_input_bytes = args.max_input_bytes
        apply_settings(session, _settings_args(args), _options(args))
        yield session


def _run(session: Session, args: argparse.Namespace) -> RunResult:
    result = session.run()
    if result.error is not None:
        raise FuserError(_failure(result, session, Path(args.export_dir)))
    return result


def _failure(result: RunResult, session: Session, export_dir: Path) -> str:
    """A failed run's error; for a CUDA fault, also where its repro script and the CUDA
    of the kernels it names were written."""
    error = result.error
    assert error is not None
    if error.fault is None:
        return error.message
    repro, *kernels = export_fault(result, session.path, export_dir)
    lines = [error.message, f"the run's repro script ({SYNC_LAUNCHES} on, to name the kernel that faults): {repro}"]
    with_cuda = [k for k in error.fault.kernels if k.cuda]
    lines += [f"the CUDA of {kernel.label}: {path}" for kernel, path in zip(with_cuda, kernels, strict=True)]
    return "\n".join(lines)


def _command_options(args: argparse.Namespace) -> AbstractContextManager[Any]:
    """Every option name checked (an unknown one lists the valid ones) before anything loads."""
    return use_options(
        dump=getattr(args, "dump", "") or "",
        enable=args.enable,
        disable=args.disable,
        source="the command line",
        device_model=args.device_model,
    )


def dump(args: argparse.Namespace, out: TextIO) -> int:
    if not args.dump and (args.shapes or args.scalars):
        # Without --dump the script is only printed: inputs given for a run would be ignored.
        raise FuserError("dump: --shapes and --scalars are the inputs of a run: add --dump NAMES to run with them")
    with _command_options(args):
        if args.dump:
            _check_backend(args.backend)
        path = resolve_script(args.file)
        repro = load_repro(path)
        for problem in repro.problems:
            out.write(f"note: skipped {problem.one_line()}\n")
        if not args.dump:
            with dump_sink(lambda option, text: _write_line(out, text)):
                for loaded in repro.definitions:
                    print_definition(loaded, out)
            return 0
        console = make_console(out, args.color)
        names = [name for name in DumpOption.__members__ if name in split_names(args.dump)]
        for session in _sessions(args, path):
            console.print(Text(f"== {session.loaded.name} (line {session.loaded.lineno})", style="bold"))
            artifacts = _run(session, args).artifacts
            assert artifacts is not None
            for name in names:
                console.print(render_dump(name, artifacts))
    return 0


def diff(args: argparse.Namespace, out: TextIO) -> int:
    with _command_options(args):
        _check_backend(args.backend)
        sides = [parse_settings_args(args.a), parse_settings_args(args.b)]
        for side in sides:
            if side.backend:
                _check_backend(side.backend)
        path = resolve_script(args.file)
        console = make_console(out, args.color)
        base = _options(args)
        for session in _sessions(args, path):
            console.print(Text(f"== {session.loaded.name} (line {session.loaded.lineno})", style="bold"))
            bundled = (list(session.shapes), list(session.scalars))
            results = []
            for side in sides:
                session.set_shapes(bundled[0])
                session.set_scalars(bundled[1])
                apply_settings(session, side, base)
                results.append(_run(session, args))
            a, b = (r.artifacts for r in results)
            assert a is not None and b is not None
            console.print(render_run_diff(diff_artifacts(a, b), results[0].settings, results[1].settings))
    return 0


def graph(args: argparse.Namespace, out: TextIO) -> int:
    with _command_options(args):
        _check_backend(args.backend)
        path = resolve_script(args.file)
        sessions = list(_sessions(args, path))[:1]
        session = sessions[0]
        artifacts = _run(session, args).artifacts
        assert artifacts is not None
        title = f"{path.name} :: {session.definition} ({artifacts.runtime})"
        for written in write_graph(artifacts, Path(args.output), title):
            out.write(f"wrote {written}\n")
    return 0


def metrics(args: argparse.Namespace, out: TextIO) -> int:
    with _command_options(args):
        _check_backend(args.backend)
        table = []
        for file in args.files:
            path = resolve_script(file)
            for session in _sessions(args, path):
                table += rows(path.name, _run(session, args))
        with open(args.output, "w", newline="", encoding="utf-8") as f:
            count = write_csv(f, table)
        out.write(f"wrote {count} rows to {args.output}\n")
    return 0


def report(args: argparse.Namespace, out: TextIO) -> int:
    with _command_options(args):
        _check_backend(args.backend)
        path = resolve_script(args.file)
        session = next(_sessions(args, path))
        result = session.run()  # a failed run is reported too: that is what a bug report needs
        output = write_report(result, str(path), Path(args.output), args.json)
        out.write(f"wrote {output}" + (f" (the run failed: {result.error.message})" if result.error else "") + "\n")
    return 0


def export_repro_command(args: argparse.Namespace, out: TextIO) -> int:
    with _command_options(args):
        path = resolve_script(args.file)
        for session in _sessions(args, path):
            written = export_repro(session, Path(args.export_dir), Path(args.output) if args.output else None)
            out.write(f"wrote {written}\n")
            if args.output:
                break
    return 0


def why(args: argparse.Namespace, out: TextIO) -> int:
    """Run the (first, or --definition's) definition and ask why its groups are apart."""
    with _command_options(args):
        _check_backend(args.backend)
        if len(args.names) > 2:
            raise FuserError(f"why takes one group (its split) or two (their merge), not {len(args.names)}")
        path = resolve_script(args.file)
        session = next(_sessions(args, path))
        _run(session, args)
        answer = session.why(*args.names)
        out.write(f"== {session.loaded.name} (line {session.loaded.lineno}): {session.settings().describe()}\n")
        out.write(answer_text(answer))
    return 0


def tui(args: argparse.Namespace, out: TextIO) -> int:
    """Open the TUI; the script and the settings are checked inside it, where an error
    is shown in place."""
    settings = _settings_args(args)
    launch = Launch(
        script=args.file,
        definition=args.definition,
        shapes=settings.shapes,
        scalars=settings.scalars,
        options=_options(args),
        seed=args.seed,
        max_input_bytes=args.max_input_bytes,
        export_dir=Path(args.export_dir),
    )
    with _command_options(args):  # an unknown option name is refused before the screen opens
        pass
    WorkbenchApp(launch).run()
    return 0


def _write_line(out: TextIO, text: str) -> None:
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


# -- trace and bundles --------------------------------------------------------------------


def trace(args: argparse.Namespace, out: TextIO) -> int:
    with _command_options(args):
        _check_backend(args.backend)
        session = next(_sessions(args, resolve_script(args.file)))
        traced = session.trace(args.tensor, parse_index(args.index))
        make_console(out, args.color).print(render_trace(traced))
    return 0


def save(args: argparse.Namespace, out: TextIO) -> int:
    """Run (a second time with --then's settings on top, if given) and save the bundle."""
    with _command_options(args):
        _check_backend(args.backend)
        session = next(_sessions(args, resolve_script(args.file)))
        log = [_run_line(session.run())]
        if args.then is not None:
            apply_settings(session, parse_settings_args(args.then), session.options)
            log.append(_run_line(session.run()))
        output = Path(args.output or f"{Path(session.path).stem}.{session.definition}{BUNDLE_SUFFIX}")
        save_bundle(session, output, log)
        out.write(f"wrote {output} ({len(log)} run{'s' if len(log) > 1 else ''})\n")
    return 0


def _run_line(result: RunResult) -> str:
    if result.error is not None:
        return f"run {result.index + 1} failed: {result.error.message}"
    assert result.artifacts is not None
    return f"run {result.index + 1}: {result.settings.describe()}: {result.artifacts.cache_line}"


def open_bundle(args: argparse.Namespace, out: TextIO) -> int:
    """Every stage the bundle recorded, as `report` prints them (the TUI with --tui)."""
    bundle = load_bundle(Path(args.bundle))
    if args.tui:
        WorkbenchApp(Launch(script=args.bundle, bundle=bundle)).run()
        return 0
    console = make_console(out, args.color)
    console.print(Text(bundle.banner(), style="bold"))
    for line in bundle.log:
        console.print(line, markup=False, highlight=False)
    for result in bundle.runs:
        console.print(Text(f"== run {result.index + 1}: {result.settings.describe()}", style="bold"))
        if result.artifacts is None:
            console.print(result.error.text() if result.error else "no artifacts", markup=False)
        else:
            console.print(render_run(result.artifacts))
    return 0


def _add_trace_and_bundle_parsers(sub: Any) -> None:
    trace_cmd = sub.add_parser("trace", help="where one element of a tensor came from (the kernel, interpreted)")
    trace_cmd.add_argument("file")
    trace_cmd.add_argument("tensor", help="an output of the fusion or a tensor between segments: T12")
    trace_cmd.add_argument("index", help="the element's index: 3,0,7")
    _add_run_options(trace_cmd)
    _add_color(trace_cmd)
    save_cmd = sub.add_parser("save", help="run and save a bundle: the script, settings and every stage")
    save_cmd.add_argument("file")
    save_cmd.add_argument("-o", "--output", help=f"the bundle to write (default: <script>.<definition>{BUNDLE_SUFFIX})")
    save_cmd.add_argument("--then", default=None, help='settings of a second run, e.g. "--disable X" (both are kept)')
    _add_run_options(save_cmd)
    open_cmd = sub.add_parser("open", help="show a saved bundle: every stage as it was recorded")
    open_cmd.add_argument("bundle")
    open_cmd.add_argument("--tui", action="store_true", help="browse it in the TUI (re-running runs here)")
    _add_color(open_cmd)


# -- the parser ---------------------------------------------------------------------------


EXPORT_DIR_HELP = (
    "where the TUI's exports, and a CUDA fault's repro script and kernel CUDA, are written (default: here)"
)


def _add_run_options(cmd: argparse.ArgumentParser, export_help: str = EXPORT_DIR_HELP) -> None:
    cmd.add_argument("--enable", default="", help="comma-separated enable options")
    cmd.add_argument("--disable", default="", help="comma-separated disable options")
    cmd.add_argument(
        "--device-model",
        default=None,
        help="size heuristics for this named device model (e.g. h200) instead of the GPU's own properties;"
        " an unknown name lists the valid ones",
    )
    cmd.add_argument("--backend", default="reference", help=f"where to run: {', '.join(BACKENDS)}")
    cmd.add_argument(
        "--shapes", nargs="+", default=None, help="one shape per tensor input, in order: 8x1024 4x8x1024 ..."
    )
    cmd.add_argument("--scalars", default=None, help="comma-separated values of the scalar inputs, in order")
    cmd.add_argument("--definition", default=None, help="the fusion definition to run (default: every one)")
    cmd.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    cmd.add_argument("--export-dir", default=".", help=export_help)
    cmd.add_argument(
        "--max-input-bytes",
        type=parse_bytes,
        default=DEFAULT_MAX_INPUT_BYTES,
        help="refuse to create more input data than this (default 4GiB)",
    )


def _add_color(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--color",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="colour even when not a terminal (--no-color: never); NO_COLOR is honoured",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fuser-wb", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    tui_cmd = sub.add_parser("tui", help="the interactive workbench (what `fuser-wb FILE` opens in a terminal)")
    tui_cmd.add_argument("file", nargs="?", default=DEFAULT_SAMPLE)
    _add_run_options(tui_cmd)
    dump_cmd = sub.add_parser("dump", help="print a script's fusions, or run them with dumps")
    dump_cmd.add_argument("file")
    dump_cmd.add_argument("--dump", default="", help="comma-separated dump names: " + ", ".join(DumpOption.__members__))
    _add_run_options(dump_cmd)
    _add_color(dump_cmd)
    diff_cmd = sub.add_parser("diff", help="run a fusion two ways and print what changed in every stage")
    diff_cmd.add_argument("file")
    diff_cmd.add_argument("--a", default="", help='settings of run a, e.g. "--disable concretize_resize_extents"')
    diff_cmd.add_argument("--b", default="", help='settings of run b, e.g. "--shapes 8x1024"')
    _add_run_options(diff_cmd)
    _add_color(diff_cmd)
    graph_cmd = sub.add_parser("graph", help="export the segment graph (.dot; .svg/.png with Graphviz)")
    graph_cmd.add_argument("file")
    graph_cmd.add_argument("-o", "--output", required=True)
    _add_run_options(graph_cmd)
    metrics_cmd = sub.add_parser("metrics", help="one CSV row per kernel per run")
    metrics_cmd.add_argument("files", nargs="+")
    metrics_cmd.add_argument("-o", "--output", required=True)
    _add_run_options(metrics_cmd)
    report_cmd = sub.add_parser("report", help="every stage of a run in one HTML file (or JSON)")
    report_cmd.add_argument("file")
    report_cmd.add_argument("-o", "--output", required=True)
    report_cmd.add_argument("--json", action="store_true", help="write the report as JSON data")
    _add_run_options(report_cmd)
    repro_cmd = sub.add_parser(
        "export-repro", help="write nvFuser's repro script of a fusion, with the shapes and options given"
    )
    repro_cmd.add_argument("file")
    repro_cmd.add_argument("-o", "--output", help="the file to write (default: <script>.<definition>.repro.py)")
    _add_run_options(repro_cmd, export_help="where the default-named files go (default: here)")
    # --output-dir was this command's own name for --export-dir: a hidden alias, so that
    # scripts written for it keep working (its default is --export-dir's).
    repro_cmd.add_argument("--output-dir", dest="export_dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    why_cmd = sub.add_parser(
        "why", help="why two groups were not fused (every scheduler's verdict), or how one would be split"
    )
    why_cmd.add_argument("file")
    why_cmd.add_argument("names", nargs="+", metavar="GROUP", help="g0 g1 (or tensors T3 T9); one group: its split")
    _add_run_options(why_cmd)
    sub.add_parser("samples", help="list the bundled sample fusions")
    _add_trace_and_bundle_parsers(sub)
    return parser


HANDLERS = {
    "tui": tui,
    "dump": dump,
    "diff": diff,
    "graph": graph,
    "metrics": metrics,
    "report": report,
    "export-repro": export_repro_command,
    "why": why,
    "trace": trace,
    "save": save,
    "open": open_bundle,
}


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    args_list = list(sys.argv[1:] if argv is None else argv)
    # `fuser-wb [FILE]`: the TUI in a terminal; printed text for scripts, pipes and CI.
    default = "tui" if _interactive(out) else "dump"
    if args_list and args_list[0] not in (*COMMANDS, "-h", "--help"):
        args_list = [default, *args_list]
    if not args_list:
        args_list = [default, DEFAULT_SAMPLE]
    args = _parser().parse_args(args_list)
    try:
        if args.command == "samples":
            return list_samples(out)
        return HANDLERS[args.command](args, out)
    except FuserError as err:
        sys.stderr.write(f"fuser-wb: {err.one_line()}\n")
        return 1
    except BrokenPipeError:  # the reader stopped early (`fuser-wb dump X | head`): not an error of ours
        if out is sys.stdout:  # the interpreter's exit flush would raise it again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as err:  # a bug of ours: one line, the traceback on request
        if os.environ.get("FUSER_TRACEBACK"):
            raise
        sys.stderr.write(f"fuser-wb: internal error, please report it: {type(err).__name__}: {err}\n")
        return 1


def _interactive(out: TextIO) -> bool:
    return out is sys.stdout and sys.stdout.isatty() and sys.stdin.isatty()


if __name__ == "__main__":
    sys.exit(main())
