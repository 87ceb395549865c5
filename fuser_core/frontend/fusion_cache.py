"""`FusionCache`: nvFuser's process-wide cache of fusion definitions.

A completed FusionDefinition is looked up by its structure: the printed body of its
records (recording.py), which names every op, argument and input signature. The same
definition made twice gets the same fusion id and shares one FusionExecutorCache, so
the second compiles nothing. Ids count up from 0 in the order definitions are first
seen; `reset()` starts again.

`serialize(path)` writes the records of every cached definition as JSON (a format of
our own, versioned); `deserialize(path)` reads them back, and each definition is
rebuilt from its records when it is first used. The compiled kernels come from the
on-disk kernel cache, not from this file.
"""

from __future__ import annotations

import atexit
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.frontend.recording import Record, structural_key
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.executor_cache import FusionExecutorCache

FORMAT = "fuser-workbench-fusion-cache"
VERSION = 1
AUTOMATIC_ENV = "FUSER_FUSION_CACHE"  # where automatic serialization writes, if set
# The key prefix FusionDefinition gives a definition with its own schedule(): its entry is
# never shared with the plain definition, and its fusion goes to the user scheduler.
USER_SCHEDULE_MARK = "# user schedule\n"


@dataclass
class CachedFusion:
    """One definition in the cache: its records, and once built, its IR and executor."""

    id: int
    records: tuple[Record, ...]
    key: str
    fusion: Fusion | None = None
    aliases: list[tuple[TensorView, TensorView, int]] = field(default_factory=list)
    is_cpu: list[bool] = field(default_factory=list)  # per fusion input
    input_slots: list[int] = field(default_factory=list)  # fusion inputs per argument of execute
    # Made by executor() on first use; a plain attribute, read by every execute.
    executor_or_none: FusionExecutorCache | None = None
    plain_call: bool = False  # set by adopt

    @property
    def built(self) -> bool:
        return self.fusion is not None

    @property
    def user_scheduled(self) -> bool:
        return self.key.startswith(USER_SCHEDULE_MARK)

    def adopt(
        self,
        fusion: Fusion,
        aliases: list[tuple[TensorView, TensorView, int]],
        is_cpu: list[bool],
        input_slots: list[int],
    ) -> None:
        self.fusion, self.aliases = fusion, list(aliases)
        self.is_cpu, self.input_slots = list(is_cpu), list(input_slots)
        # execute's outputs are the executor's as they are: one argument per fusion input,
        # no aliased output written into an input, no input returned as an output.
        inputs = {id(v) for v in fusion.inputs}
        self.plain_call = (
            all(n == 1 for n in self.input_slots)
            and not self.aliases
            and not any(id(v) in inputs for v in fusion.outputs)
        )
        if self.user_scheduled:  # also when rebuilt from its records (deserialized)
            fusion.user_scheduled = True

    def executor(self) -> FusionExecutorCache:
        if self.fusion is None:
            raise FuserError(f"fusion {self.id} has not been rebuilt from its records yet")
        if self.executor_or_none is None:
            self.executor_or_none = FusionExecutorCache(self.fusion, fusion_id=self.id)
        return self.executor_or_none


class FusionCache:
    """The process's cache of definitions (`FusionCache.get()`), as nvFuser's."""

    _singleton: FusionCache | None = None

    def __init__(self, max_fusions: int = 16384) -> None:
        self.max_fusions = max_fusions
        self._entries: list[CachedFusion] = []
        self._by_key: dict[str, CachedFusion] = {}
        self.hits = 0
        self.misses = 0

    # -- nvFuser's API ---------------------------------------------------------------------
    @classmethod
    def get(cls, max_fusions: int = 16384, *args: Any, **kwargs: Any) -> FusionCache:
        if cls._singleton is None:
            cls._singleton = FusionCache(max_fusions)
            if _automatic and automatic_cache_path().is_file():
                try:
                    cls._singleton.deserialize(automatic_cache_path())
                except FuserError:  # a stale or foreign file: start empty, as with none
                    cls._singleton = FusionCache(max_fusions)
        return cls._singleton

    @classmethod
    def reset(cls) -> None:
        """Forget every definition; ids start again at 0. Definitions already made keep
        working with the executors they hold."""
        cls._singleton = FusionCache(cls._singleton.max_fusions if cls._singleton else 16384)

    def num_fusions(self) -> int:
        return len(self._entries)

    def stats(self) -> str:
        return f"FusionCache: {len(self._entries)} fusions, {self.hits} hits, {self.misses} misses"

    def serialize(self, path: str | os.PathLike[str]) -> None:
        data = {
            "format": FORMAT,
            "version": VERSION,
            "fusions": [
                {"id": e.id, "records": [r.to_json() for r in e.records], "user_schedule": e.user_scheduled}
                for e in self._entries
            ],
        }
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(target)

    def deserialize(self, path: str | os.PathLike[str]) -> None:
        """Read definitions written by `serialize`; they keep their ids. The cache must be
        empty (nvFuser's rule), so ids cannot collide."""
        if self._entries:
            raise FuserError("FusionCache.deserialize needs an empty cache: call FusionCache.reset() first")
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise FuserError(f"cannot read a serialized FusionCache from {path}: {err}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise FuserError(f"{path} is not a serialized FusionCache of fuser-workbench")
        if data.get("version", 0) > VERSION:
            raise FuserError(
                f"{path} was written by a newer fuser-workbench (format version {data['version']}, "
                f"this one reads up to {VERSION})"
            )
        for position, item in enumerate(data.get("fusions", [])):
            if item.get("id") != position:
                raise FuserError(f"{path}: fusion ids must count up from 0, found {item.get('id')} at {position}")
            records = tuple(Record.from_json(r) for r in item["records"])
            prefix = USER_SCHEDULE_MARK if item.get("user_schedule") else ""
            self._add(records, prefix + structural_key(records))

    # -- used by FusionDefinition -------------------------------------------------------
    def lookup_or_add(self, records: tuple[Record, ...], key: str) -> tuple[CachedFusion, bool]:
        """The entry of a definition with this structure, and whether it was there already."""
        entry = self._by_key.get(key)
        if entry is not None:
            self.hits += 1
            return entry, True
        self.misses += 1
        if len(self._entries) >= self.max_fusions:
            raise FuserError(f"the FusionCache is full ({self.max_fusions} fusions)")
        return self._add(records, key), False

    def entry(self, fusion_id: int) -> CachedFusion:
        if not (0 <= fusion_id < len(self._entries)):
            raise FuserError(f"fusion id {fusion_id} is not in the FusionCache ({len(self._entries)} fusions)")
        return self._entries[fusion_id]

    def _add(self, records: tuple[Record, ...], key: str | None = None) -> CachedFusion:
        if key is None:
            key = structural_key(records)
        entry = CachedFusion(len(self._entries), records, key)
        self._entries.append(entry)
        self._by_key.setdefault(key, entry)
        return entry


def automatic_cache_path() -> Path:
    configured = os.environ.get(AUTOMATIC_ENV, "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fuser-workbench" / "fusion_cache.json"


_automatic = False


def enable_automatic_serialization() -> None:
    """Save the FusionCache when the process exits, as nvFuser does; the next process
    reads it with `FusionCache.get().deserialize(automatic_cache_path())`."""
    global _automatic
    if not _automatic:
        _automatic = True
        atexit.register(_save_at_exit)


def _save_at_exit() -> None:
    cache = FusionCache._singleton
    if cache is None or not cache.num_fusions():
        return
    path = automatic_cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        cache.serialize(path)
    except OSError:
        pass  # a cache that cannot be written costs only the saving
