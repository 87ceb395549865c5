"""Dump, enable and disable options, as nvFuser's NVFUSER_DUMP/ENABLE/DISABLE.

Set them with the environment (`FUSER_DUMP=cache_events,fusion_ir_concretized`;
the `NVFUSER_` names work too, so habits carry over), with `with use_options(...)`, or
per call: `fd.execute(inputs, _disable_options=["concretize_resize_extents"])`.
An unknown name is an error listing the valid ones.

The device model the schedulers size their heuristics for is an option too:
`FUSER_DEVICE_MODEL=h200` or `use_options(device_model="h200")`; without one they use
the GPU's own properties, or H100 SXM where there is no GPU. The backend too:
`FUSER_BACKEND=cuda|reference` or `use_options(backend="reference")`; without one, cuda
runs where a GPU and CuPy are, the NumPy reference elsewhere.

Dumps are written to a sink (stdout by default) that the TUI and tests can swap.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuser_core.errors import FuserError


class DumpOption(enum.Enum):
    fusion_ir_original = "the fusion as defined, before concretization"
    fusion_ir_concretized = "the concretization info and the concretized fusion with its transforms"
    fusion_ir_preseg = "each pre-segmentation pass (changed or not, time) and the fusion IR after them"
    fusion_ir_presched = "the fusion IR with each expression marked by its segment, and a legend of why segments split"
    segmented_fusion = "nvFuser's Segmented_Fusion{ groups, edges, group details } dump"
    segmenter_logging = "every merge the segmenter tried, accepted or rejected with each scheduler's reason"
    scheduler_params = "each segment's scheduler and heuristic parameters"
    fusion_ir_math = "the math of each scheduled segment, under a header naming its kernel"
    fusion_ir = "each scheduled segment with its TransformPrinter block (loop domains, ca_pos)"
    fusion_args = "the inputs of each execution: shapes, strides, dtypes, scalar values"
    cache_events = "one line per execution: cache hit or miss, at which level and why"
    kernel_ir = "each generated kernel's kernel IR: loops, predicates, buffers, loads and stores"
    cuda_kernel = "the CUDA C++ of each generated kernel"
    cuda_full = "each kernel's whole translation unit (runtime header included), as NVRTC compiles it"
    launch_param = "each kernel launch's grid, block and shared memory"
    kernel_metadata = "per launch: bytes moved, registers, spills, time, GB/s and fraction of peak"


class EnableOption(enum.Enum):
    kernel_profile = "time every kernel launch with CUDA events (synchronizes after each kernel)"
    int64_index = "index every kernel with 64-bit integers, even where 32 bits would do"
    sync_launches = "synchronize after every kernel launch, so that a CUDA fault names the kernel that caused it (slow)"
    kernel_choice = "time each candidate schedule (persistent or not, grid split or not) on the GPU, keep the fastest"


class DisableOption(enum.Enum):
    concretize_resize_extents = "keep pad/slice/cat extents symbolic; concretize only their IterType (nvFuser PR #2835)"
    allocation_order_inference = "skip the pass that proposes allocation-order hints (users' stride_order still holds)"
    vectorization = "schedule every global access element by element (vector width 1)"
    segmentation = "refuse a fusion that does not fit one kernel instead of cutting it, naming each scheduler's reason"
    shared_persistence = "keep inner persistent rows in registers even where they spill (not in shared memory)"
    rereading = "keep every inner normalization persistent: never re-read its rows after a reduction instead"
    cooperative_grid = (
        "fold a one-wave grid's reductions in the last blocks to arrive, not in every block after a grid barrier"
    )


# Device models the schedulers can size heuristics for instead of the GPU's own
# properties; fuser_core.scheduler.device holds their figures under these names.
DEVICE_MODELS = ("h100_sxm", "h200")
DEVICE_MODEL_ALIASES = {"h100": "h100_sxm"}
DEVICE_MODEL_ENV = "FUSER_DEVICE_MODEL"
BACKENDS = ("cuda", "reference")
BACKEND_ENV = "FUSER_BACKEND"

_ENV = {
    DumpOption: ("FUSER_DUMP", "NVFUSER_DUMP"),
    EnableOption: ("FUSER_ENABLE", "NVFUSER_ENABLE"),
    DisableOption: ("FUSER_DISABLE", "NVFUSER_DISABLE"),
}


def _split(text: str) -> list[str]:
    """`a,b(x,y),c` -> ["a", "b(x,y)", "c"]: commas inside parentheses belong to args."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def parse_names(kind: type[enum.Enum], names: Iterable[Any] | str, source: str) -> frozenset[Any]:
    if isinstance(names, str):
        names = _split(names)
    result: set[Any] = set()
    for raw in names:
        name = raw.split("(", 1)[0].strip() if isinstance(raw, str) else raw
        if isinstance(name, kind):
            result.add(name)
            continue
        if name not in kind.__members__:
            valid = ", ".join(kind.__members__) or "(none yet)"
            raise FuserError(f"unknown {kind.__name__} {name!r} in {source}; valid: {valid}")
        result.add(kind[name])
    return frozenset(result)


@dataclass(frozen=True)
class Options:
    dump: frozenset[DumpOption] = field(default_factory=frozenset)
    enable: frozenset[EnableOption] = field(default_factory=frozenset)
    disable: frozenset[DisableOption] = field(default_factory=frozenset)
    device_model: str | None = None  # one of DEVICE_MODELS; None reads the GPU, else H100 SXM
    backend: str | None = None  # one of BACKENDS; None: cuda where a GPU and CuPy are, else reference

    def dumps(self, option: DumpOption) -> bool:
        return option in self.dump

    def is_disabled(self, option: DisableOption) -> bool:
        return option in self.disable

    def is_enabled(self, option: EnableOption) -> bool:
        return option in self.enable

    def merged(
        self,
        dump: Iterable[str] | str = (),
        enable: Iterable[str] | str = (),
        disable: Iterable[str] | str = (),
        source: str = "options",
        device_model: str | None = None,
        backend: str | None = None,
    ) -> Options:
        return Options(
            self.dump | parse_names(DumpOption, dump, source),
            self.enable | parse_names(EnableOption, enable, source),
            self.disable | parse_names(DisableOption, disable, source),
            device_model_key(device_model, source) if device_model else self.device_model,
            backend_key(backend, source) if backend else self.backend,
        )


def backend_key(name: str, source: str) -> str:
    key = name.strip().lower()
    if key not in BACKENDS:
        raise FuserError(f"unknown backend {name!r} in {source}; valid: {', '.join(BACKENDS)}")
    return key


def device_model_key(name: str, source: str) -> str:
    """The registry name of a device model: case-insensitive, `h100` for `h100_sxm`;
    an unknown one is an error naming `source` and listing the valid ones."""
    key = name.strip().lower()
    key = DEVICE_MODEL_ALIASES.get(key, key)
    if key not in DEVICE_MODELS:
        raise FuserError(f"unknown device model {name!r} in {source}; valid: {', '.join(DEVICE_MODELS)}")
    return key


def options_from_env(env: Mapping[str, str] | None = None) -> Options:
    env = os.environ if env is None else env
    found: dict[type, frozenset] = {}  # type: ignore[type-arg]
    for kind, names in _ENV.items():
        values: frozenset = frozenset()  # type: ignore[type-arg]
        for var in names:
            if env.get(var):
                values |= parse_names(kind, env[var], var)
        found[kind] = values
    model = env.get(DEVICE_MODEL_ENV) or None
    device = device_model_key(model, DEVICE_MODEL_ENV) if model else None
    backend = env.get(BACKEND_ENV) or None
    chosen = backend_key(backend, BACKEND_ENV) if backend else None
    return Options(found[DumpOption], found[EnableOption], found[DisableOption], device, chosen)


_override: contextvars.ContextVar[Options | None] = contextvars.ContextVar("fuser_options", default=None)
_env_cache: dict[tuple[str, ...], Options] = {}


_ENV_VARIABLES = [v for names in _ENV.values() for v in names] + [DEVICE_MODEL_ENV, BACKEND_ENV]
# Every call reads the environment (a test or a user may change it between runs), and
# os.environ.get costs a cache hit more than its launch: on POSIX, os.environ keeps its
# bytes in a plain dict, read here directly by the encoded names.
_ENV_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
_ENV_KEYS = [os.environ.encodekey(v) for v in _ENV_VARIABLES] if _ENV_DATA is not None else []


def _environment_key() -> tuple[Any, ...]:
    if _ENV_DATA is not None:
        return tuple(map(_ENV_DATA.get, _ENV_KEYS))
    return tuple(os.environ.get(v, "") for v in _ENV_VARIABLES)


def current_options() -> Options:
    """Options in effect: those of the innermost `use_options(...)` block, else the environment."""
    override = _override.get()
    if override is not None:
        return override
    key = _environment_key()
    found = _env_cache.get(key)
    if found is None:
        found = _env_cache[key] = options_from_env()
    return found


@contextlib.contextmanager
def use_options(
    dump: Iterable[str] | str = (),
    enable: Iterable[str] | str = (),
    disable: Iterable[str] | str = (),
    source: str = "use_options()",
    device_model: str | None = None,
    backend: str | None = None,
) -> Iterator[Options]:
    """Add options for the duration of a `with` block; `source` names where they came
    from in the error an unknown name raises."""
    merged = current_options().merged(dump, enable, disable, source, device_model, backend)
    token = _override.set(merged)
    try:
        yield merged
    finally:
        _override.reset(token)


DumpSink = Callable[[DumpOption, str], None]


def _stdout_sink(option: DumpOption, text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


_sink: contextvars.ContextVar[DumpSink] = contextvars.ContextVar("fuser_dump_sink", default=_stdout_sink)


@contextlib.contextmanager
def dump_sink(sink: DumpSink) -> Iterator[None]:
    """Send dumps to `sink(option, text)` instead of stdout inside the block."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def emit_dump(opts: Options, option: DumpOption, make_text: Callable[[], str]) -> None:
    """Write a dump if `option` is on; the text is only built when it is."""
    if opts.dumps(option):
        _sink.get()(option, make_text())
