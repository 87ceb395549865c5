"""Loading nvFuser repro scripts as pasted, without running them.

    script = load_repro("repro.py")          # or the script's text
    for ld in script.definitions:
        print(ld.name, ld.fd.fusion_ir())
        outputs = ld.fd.execute(ld.materialize_inputs(seed=0))

The script is parsed with `ast` and interpreted (repro_interpreter): its fd calls
build our real FusionDefinition, its torch calls become lazy input specs, and nothing
in it is imported, executed or evaluated by Python. What it does outside the subset is
refused: outside a definition the refusal is kept in `problems` and loading goes on;
a definition that cannot be built is a problem too, unless no definition could be
built at all, in which case loading raises its FuserError. A script longer than
MAX_SOURCE_CHARS or MAX_SOURCE_LINES is refused before it is parsed, and one that
exceeds the interpreter's step or work limit stops loading at that line.
"""

from __future__ import annotations

import ast
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any

from fuser_core.errors import FuserError, SourceLocation
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.script.expressions import shown_line
from fuser_core.script.input_spec import InputSpec, materialize_inputs
from fuser_core.script.interpreter import DefinitionRecord, ReproInterpreter, to_input_specs

TEXT_SOURCE = "<repro>"
MAX_SOURCE_CHARS = 1_000_000  # Python's parser takes about a second per megabyte
MAX_SOURCE_LINES = 50_000


@dataclass
class LoadedDefinition:
    """One fusion of the script: its name (the definition function's, or the with-block's
    variable), the completed FusionDefinition, the line it starts on, and its inputs."""

    name: str
    fd: FusionDefinition
    lineno: int
    inputs: list[InputSpec] | None = None

    def materialize_inputs(self, seed: int = 0, max_bytes: int | None = None) -> list[Any]:
        """NumPy arrays and Python scalars for `fd.execute`, each input from its own stream;
        refused with a FuserError, before anything is allocated, when they would take
        more than `max_bytes`."""
        if self.inputs is None:
            raise FuserError(f"the script gives no inputs for {self.name}")
        return materialize_inputs(self.inputs, seed, max_bytes=max_bytes, owner=self.name)


@dataclass
class ReproScript:
    source: str
    definitions: list[LoadedDefinition]
    inputs: list[InputSpec] | None = None
    problems: list[FuserError] = field(default_factory=list)
    text: str = ""

    def definition(self, name: str) -> LoadedDefinition:
        for ld in self.definitions:
            if ld.name == name:
                return ld
        raise FuserError(f"{self.source} has no definition {name!r}; it has {[d.name for d in self.definitions]}")


def load_repro(path_or_text: str | os.PathLike[str]) -> ReproScript:
    """Load a repro script from a file path or from its text. Raises only FuserError."""
    source = TEXT_SOURCE
    try:
        source, text = _read(path_or_text)
        lines = text.split("\n")
        interpreter = ReproInterpreter(source, lines)
        interpreter.run(_parse(text, source, lines))
        return _assemble(source, text, interpreter)
    except FuserError:
        raise
    except Exception as err:  # a bug of ours must still reach the user as one line
        raise FuserError(f"internal error while loading {source}: {type(err).__name__}: {err}") from err


def _read(path_or_text: str | os.PathLike[str]) -> tuple[str, str]:
    if isinstance(path_or_text, os.PathLike):
        path = os.fspath(path_or_text)
    elif isinstance(path_or_text, str) and "\n" not in path_or_text and os.path.isfile(path_or_text):
        path = path_or_text
    elif isinstance(path_or_text, str):
        return TEXT_SOURCE, _text(TEXT_SOURCE, path_or_text)
    else:
        raise FuserError(f"load_repro takes a path or a script's text, got {type(path_or_text).__name__}")
    try:
        with open(path, encoding="utf-8-sig") as f:
            raw = f.read(MAX_SOURCE_CHARS + 1)  # enough to see that it is too long
    except UnicodeDecodeError as err:
        raise FuserError(f"{path} is not UTF-8 text: {err.reason} at byte {err.start}") from err
    except OSError as err:
        raise FuserError(f"cannot read {path}: {err.strerror or err}") from err
    return str(path), _text(str(path), raw)


def _text(source: str, raw: str) -> str:
    """The script cleaned; one too long to parse quickly is refused where it passes the limit."""
    text = _clean(raw[:MAX_SOURCE_CHARS])
    lines = text.split("\n")
    if len(raw) > MAX_SOURCE_CHARS:
        message = f"the script is longer than {MAX_SOURCE_CHARS} characters, the most a repro script may have"
        raise FuserError(message, location=_location(source, lines, len(lines)))
    if len(lines) > MAX_SOURCE_LINES:
        message = f"the script has {len(lines)} lines; a repro script may have at most {MAX_SOURCE_LINES}"
        raise FuserError(message, location=_location(source, lines, MAX_SOURCE_LINES + 1))
    return text


def _clean(text: str) -> str:
    """As pasted: Windows newlines, Markdown code fences and a common indent are dropped
    (fence lines become blank, so line numbers stay those of the paste)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = ["" if line.lstrip().startswith("```") else line for line in lines]
    return textwrap.dedent("\n".join(lines))


def _location(source: str, lines: list[str], lineno: int) -> SourceLocation:
    line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
    return SourceLocation(source, lineno, shown_line(line))


def _parse(text: str, source: str, lines: list[str]) -> ast.Module:
    try:
        return ast.parse(text, filename=source)
    except SyntaxError as err:
        location = _location(source, lines, err.lineno or 1)
        raise FuserError(f"syntax error: {err.msg}", location=location) from err
    except (RecursionError, MemoryError) as err:
        # Python's parser says neither where nor why; the longest line is the likely culprit.
        lineno = max(range(len(lines)), key=lambda i: len(lines[i])) + 1
        message = "the script nests too deeply for Python's parser (probably on this line, its longest)"
        raise FuserError(message, location=_location(source, lines, lineno)) from err
    except ValueError as err:
        raise FuserError(f"cannot parse {source}: {err}") from err


def _assemble(source: str, text: str, interpreter: ReproInterpreter) -> ReproScript:
    records = sorted(interpreter.records, key=lambda r: r.lineno)
    stopped = interpreter.limit_error  # loading stopped there: it is why anything is missing
    if not records:
        raise stopped or _no_definition(source, interpreter.problems)
    built = [r for r in records if r.error is None]
    if not built:
        raise stopped or records[0].error  # type: ignore[misc]
    problems = list(interpreter.problems) + [r.error for r in records if r.error is not None]
    if stopped is not None and all(r.error is not stopped for r in records):
        problems.append(stopped)
    definitions = []
    names = _unique_names([r.name for r in built])
    for record, name in zip(built, names, strict=True):
        inputs = record.inputs if record.inputs is not None else _nearby_inputs(record, records, interpreter, problems)
        _check_count(record, inputs, interpreter, problems)
        definitions.append(LoadedDefinition(name, record.fd, record.lineno, inputs))
    problems.sort(key=lambda e: e.location.lineno if e.location else 0)
    first_inputs = definitions[0].inputs
    return ReproScript(source, definitions, first_inputs, problems, text)


def _unique_names(names: list[str]) -> list[str]:
    """A name made twice (two definitions in one test function, two `fd` blocks) gets
    `#2`, `#3`... after its first use, so each definition can be picked by name."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


def _no_definition(source: str, problems: list[FuserError]) -> FuserError:
    message = f"{source} has no fusion definition: expected `with FusionDefinition() as fd:`"
    refused = [p for p in problems if "FusionDefinition" in (p.location.line if p.location else "")]
    if refused:  # the definition is there, but its `with` was refused
        message += f" ({refused[0].one_line()})"
    return FuserError(message)


def _nearby_inputs(
    record: DefinitionRecord, records: list[DefinitionRecord], interpreter: ReproInterpreter, problems: list[FuserError]
) -> list[InputSpec] | None:
    """`inputs = [...]` / `ins = [...]` that the script never passed to execute, assigned
    in the same function call (or at module level) as the definition: the first after
    it (before the next one), else the last before it."""
    end = min((r.lineno for r in records if r.lineno > record.lineno), default=None)
    same_call = [a for a in interpreter.input_assignments if a[2] == record.frame]
    after = [a for a in same_call if a[0] > record.lineno and (end is None or a[0] < end)]
    before = [a for a in same_call if a[0] < record.lineno]
    chosen = after[0] if after else (before[-1] if before else None)
    if chosen is None:
        return None
    try:
        return to_input_specs(chosen[1], "inputs")
    except FuserError as err:
        err.location = interpreter.location(chosen[0])
        problems.append(err)
        return None


def _check_count(
    record: DefinitionRecord, inputs: list[InputSpec] | None, interpreter: ReproInterpreter, problems: list[FuserError]
) -> None:
    if inputs is None:
        return
    expected = len(record.fd.fusion.inputs)
    if len(inputs) != expected:
        message = f"{record.name} takes {expected} inputs but the script gives {len(inputs)}"
        problems.append(FuserError(message, location=interpreter.location(record.lineno)))
