"""Session bundles: one file holding what a user saw (the script, the settings and every
stage of the last two runs), to attach to a bug report and reopen anywhere, without a
GPU. The format is JSON, versioned and described in docs/bundle-format.md.

    save_bundle(session, Path("run.fwb.json"), log=["run 1: ..."])
    bundle = load_bundle(Path("run.fwb.json"))
    bundle.session.current.artifacts    # exactly the stages that were recorded
    bundle.banner()                     # where and when it was recorded
    bundle.session.run()                # a new run, from its script and settings
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import platform
import socket
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuser_core import FuserError, load_repro
from workbench.session import RunOptions, RunResult, Session, device_label

BUNDLE_FORMAT = "fuser-workbench-bundle"
BUNDLE_VERSION = 1
BUNDLE_SUFFIX = ".fwb.json"


@dataclass(frozen=True)
class Recorded:
    """Where and when a bundle was recorded."""

    at: str  # ISO 8601, UTC
    host: str
    platform: str
    backend: str
    device: str  # the device the last run's heuristics were sized for
    gpu: str = ""  # the GPU the last run ran on (cuda backend)

    def banner(self, path: str) -> str:
        return (
            f"bundle {path}: recorded {self.at} on {self.host} ({self.platform}), {self.backend} backend, "
            f"{device_label(self.device, self.backend, self.gpu)}; "
            "what it shows is what was seen there, re-running runs here"
        )


@dataclass
class Bundle:
    path: str
    version: int
    recorded: Recorded
    script_path: str
    session: Session  # holding the recorded runs as `previous` and `current`
    log: list[str]

    def banner(self) -> str:
        return self.recorded.banner(self.path)

    @property
    def runs(self) -> list[RunResult]:
        return [r for r in (self.session.previous, self.session.current) if r is not None]


def save_bundle(session: Session, path: Path, log: typing.Sequence[str] = (), now: str | None = None) -> Path:
    """Write `session`'s script, settings and last two runs into `path`."""
    current = session.current
    if current is None:
        raise FuserError("nothing to save: no run has finished (run first, then save the bundle)")
    ran = current.artifacts
    data = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "recorded": _plain(
            Recorded(
                at=now or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                host=socket.gethostname(),
                platform=f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
                backend=current.settings.options.backend,
                device=ran.device if ran is not None else "unknown (the run failed)",
                gpu=ran.gpu if ran is not None else "",
            )
        ),
        "script": {"path": session.path, "text": session.script.text},
        "definition": session.definition,
        "shapes": [list(s) for s in session.shapes],
        "scalars": list(session.scalars),
        "seed": session.seed,
        "options": _plain(session.options),
        "runs": [_plain(r) for r in (session.previous, session.current) if r is not None],
        "log": list(log),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


def load_bundle(path: Path) -> Bundle:
    """A bundle written by `save_bundle`; a FuserError for a file that is not one, or
    one a newer version wrote."""
    data = _read(path)
    try:
        script = load_repro(data["script"]["text"])
        session = Session(script, data["script"]["path"], data["definition"])
        session.detached = True  # the script is the bundle's text, not a file to watch
        session.set_shapes([tuple(s) for s in data["shapes"]])
        session.set_scalars(list(data["scalars"]))
        session.seed = int(data["seed"])
        session.options = _decode(RunOptions, data["options"])
        runs = [_decode(RunResult, r) for r in data["runs"]]
        recorded = _decode(Recorded, data["recorded"])
    except (KeyError, TypeError, ValueError) as err:
        raise FuserError(f"{path} is a damaged workbench bundle: {type(err).__name__}: {err}") from err
    session.previous, session.current = ([None, *runs])[-2:]
    session._runs = max((r.index for r in runs), default=-1) + 1
    return Bundle(str(path), data["version"], recorded, data["script"]["path"], session, list(data.get("log", [])))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise FuserError(f"cannot read bundle {path}: {err.strerror or err}") from err
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FuserError(f"{path} is not a workbench bundle (not JSON: {err})") from err
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise FuserError(f'{path} is not a workbench bundle (no "format": "{BUNDLE_FORMAT}")')
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise FuserError(f"{path}: bundle version {version!r} is not a positive integer")
    if version > BUNDLE_VERSION:
        raise FuserError(
            f"{path} was written by a newer fuser-wb (bundle format version {version}; this one reads "
            f"versions up to {BUNDLE_VERSION}): upgrade fuser-wb to open it"
        )
    return data


# -- dataclasses to JSON and back ----------------------------------------------------------


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if not f.metadata.get("live")}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def _decode(tp: Any, value: Any) -> Any:
    """`value` (JSON data) as the type `tp`: dataclasses by their fields' hints, tuples,
    frozensets, optionals and plain values."""
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {f.name: _decode(hints[f.name], value[f.name]) for f in dataclasses.fields(tp) if f.name in value}
        return typing.cast(Any, tp)(**kwargs)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _decode(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True)) if args else tuple(value)
    if origin is frozenset:
        return frozenset(_decode(args[0], v) for v in value)
    if origin is list:
        return [_decode(args[0], v) for v in value]
    if tp is float and isinstance(value, int):
        return float(value)
    return value
