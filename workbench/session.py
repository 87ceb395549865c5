"""The workbench's UI-free model: a fusion opened with these shapes and options, run,
and compared with the previous run. The CLI, the reports and the TUI all drive it.

    session = Session.open("resize_pad_to_broadcast_dynamic")
    session.set_shapes([(8, 3, 2, 5, 6), (8, 4, 4, 3, 5)])
    session.run()
    session.options = session.options.with_disabled("concretize_resize_extents")
    session.run()
    session.previous, session.current        # RunResult, each with its Artifacts

A run reads every stage from the executor cache's RunReport (workbench.artifacts);
the options it ran with are those in effect (the environment's included). Dumps that
fuser_core emits while running are captured into the run, never printed. A failed run
keeps the shapes and options and records the error with its script line; a CUDA fault
also keeps the kernels it names, each with its launch and its CUDA, and the repro script
of the run (with `sync_launches`, so that running it names the kernel that faulted).

The session is the one bridge to fuser_core (DESIGN.md): the rest of the workbench
reads RunResults.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fuser_core import (
    DEVICE_MODELS,
    Backend,
    DumpOption,
    ElementTrace,
    FuserError,
    FusionExecutorCache,
    LoadedDefinition,
    ReferenceBackend,
    ReproScript,
    ScalarSpec,
    TensorSpec,
    convert_inputs,
    dump_sink,
    load_repro,
    materialize_inputs,
    select_backend,
    trace_element,
    use_options,
)
from workbench.artifacts import Artifacts, Correctness, OutputCheck, collect
from workbench.samples import resolve_script
from workbench.why import Asker, ask, group_of, parse_ref

DEFAULT_MAX_INPUT_BYTES = 4 * 2**30
REFERENCE = "reference"
SYNC_LAUNCHES = "sync_launches"  # fuser_core's enable option that pins a CUDA fault to its kernel

# The steps of a run, in order, as `Session.run(progress=...)` reports them.
Progress = Callable[[str], None]
STEP_INPUTS = "making the inputs"
STEP_RUN = "concretizing, segmenting, scheduling and running on the {backend} backend"
STEP_CHECK = "checking the outputs against the reference"
STEP_COLLECT = "collecting the stages"


def _no_progress(step: str) -> None:
    pass


# Backends by name, each built for a device model. The session holds the backend as a
# name and builds it only to run; fuser_core's select_backend refuses cuda where no GPU
# and CuPy are, with the reason.
BACKENDS: dict[str, Callable[[str | None], Backend]] = {
    REFERENCE: lambda device_model: ReferenceBackend(),
    "cuda": lambda device_model: select_backend("cuda", device_model),
}


def make_backend(name: str, device_model: str | None = None) -> Backend:
    factory = BACKENDS.get(name)
    if factory is None:
        raise FuserError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    return factory(device_model)


def device_label(device: str, backend: str, gpu: str = "") -> str:
    """A run's device as a user should read it. A run records the device its heuristics
    were sized for; on the reference backend no GPU ran anything, so that name is only a
    device model (the option device_model, or H100 SXM by default), not a GPU found here.
    A cuda run sized for a named model ran on `gpu` all the same: both are named."""
    if backend == REFERENCE:
        return f"device model: {device} (no GPU; reference backend)"
    if gpu and gpu != device:
        return f"device: {gpu} (heuristics sized for device model {device})"
    return f"device: {device}"


def backend_problem(name: str, device_model: str | None = None) -> str | None:
    """Why the named backend cannot run here (no GPU, no CuPy), or None if it can."""
    try:
        make_backend(name, device_model)
    except FuserError as err:
        return err.message
    return None


# -- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    """Option names as the user gave them, the backend and the device model."""

    dump: frozenset[str] = frozenset()
    enable: frozenset[str] = frozenset()
    disable: frozenset[str] = frozenset()
    backend: str = REFERENCE
    device_model: str | None = None

    def with_disabled(self, *names: str) -> RunOptions:
        return replace(self, disable=self.disable | frozenset(names))

    def with_enabled(self, *names: str) -> RunOptions:
        return replace(self, enable=self.enable | frozenset(names))

    def toggled(self, name: str) -> RunOptions:
        """Flip a disable option (the only kind that exists today) on or off."""
        return replace(self, disable=self.disable ^ frozenset([name]))

    def describe(self) -> str:
        parts = [f"--{kind} {','.join(sorted(names))}" for kind, names in self._named() if names]
        parts.append(f"--backend {self.backend}")
        if self.device_model:
            parts.append(f"--device-model {self.device_model}")
        return " ".join(parts)

    def _named(self) -> list[tuple[str, frozenset[str]]]:
        return [("enable", self.enable), ("disable", self.disable)]


def split_names(text: str | Iterable[str] | None) -> frozenset[str]:
    if text is None:
        return frozenset()
    items = text.split(",") if isinstance(text, str) else list(text)
    return frozenset(item.strip() for item in items if item.strip())


def parse_shape(text: str) -> tuple[int, ...]:
    """`8x3x2` or `8,3,2` (or `[8, 3, 2]`); `()` or `scalar` for a 0-D tensor."""
    cleaned = text.strip().strip("[]()").replace(" ", "")
    if cleaned in ("", "scalar"):
        return ()
    parts = cleaned.replace(",", "x").split("x")
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        raise FuserError(f"not a shape: {text!r} (write sizes as 8x1024 or 8,1024)") from None


def parse_scalar(text: str) -> bool | int | float:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    raise FuserError(f"not a scalar value: {text!r}")


@dataclass(frozen=True)
class RunSettings:
    """Everything a run depends on besides the script."""

    definition: str
    shapes: tuple[tuple[int, ...], ...]  # one per tensor input, in input order
    scalars: tuple[Any, ...]  # one per scalar input, in input order
    options: RunOptions
    seed: int

    def describe(self) -> str:
        shapes = " ".join("x".join(map(str, s)) or "scalar" for s in self.shapes)
        text = f"shapes {shapes}"
        if self.scalars:
            text += " scalars " + ",".join(repr(s) for s in self.scalars)
        return text + f" {self.options.describe()} seed {self.seed}"


@dataclass(frozen=True)
class FaultKernel:
    """A kernel a CUDA fault names: its launch and its CUDA."""

    group_id: int
    label: str  # `g0 nvfuser_pointwise_f0_c1_r0_g0`, with `(scalar fallback)` where that form ran
    scheduler: str
    launch: str  # `grid (4, 1, 1), block (128, 1, 1), 0 bytes of shared memory`
    cuda: str  # the kernel's CUDA (the runtime's kernel artifact); "" where there is none

    @property
    def name(self) -> str:
        return self.label.split(" ")[1]


@dataclass(frozen=True)
class CudaFault:
    """What the workbench offers for a run that ended in a CUDA error."""

    error: str  # CUDA's words
    sticky: bool  # the process's CUDA context is lost: the cuda backend cannot run again here
    pinned: bool  # `kernels` is the one kernel that faulted (else every one that may have)
    kernels: tuple[FaultKernel, ...]
    repro: str  # the repro script of the run, with sync_launches on


@dataclass(frozen=True)
class RunError:
    message: str  # FuserError.one_line(): where, op, what
    location: str  # `file.py:12`, or the definition's line when the error names none
    line: str  # the script's text on that line
    fault: CudaFault | None = None  # the run ended in a CUDA error

    def text(self) -> str:
        return f"{self.message}\n    {self.location}: {self.line.strip()}" if self.line.strip() else self.message


@dataclass(frozen=True)
class RunResult:
    index: int  # 0-based count of the session's runs
    settings: RunSettings
    artifacts: Artifacts | None = None
    error: RunError | None = None
    effective: tuple[str, ...] = ()  # option names in effect, the environment's included
    # Answers "why not fused?" from the live segmenter state: not saved in a bundle (a
    # reopened bundle has the recorded answers only, and says so when asked).
    asker: Asker | None = field(default=None, compare=False, repr=False, metadata={"live": True})

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class InputSlot:
    """One input of the selected definition: its bundled spec and what the user set."""

    index: int
    label: str  # `T0`, `i2` ...
    spec: Any  # TensorSpec or ScalarSpec
    rank: int | None  # tensors only
    fixed: dict[int, int] = field(default_factory=dict)  # axis -> size the definition requires


# -- the session ------------------------------------------------------------------------


class Session:
    def __init__(self, script: ReproScript, path: str, definition: str | None = None) -> None:
        self.script = script
        self.path = path
        self.options = RunOptions()
        self.seed = 0
        self.max_input_bytes = DEFAULT_MAX_INPUT_BYTES
        self.current: RunResult | None = None
        self.previous: RunResult | None = None
        self._runs = 0
        self._caches: dict[tuple[str, str, str | None], FusionExecutorCache] = {}
        self.detached = False  # the script came from a bundle's text: no file on disk to reload
        self.select(definition or script.definitions[0].name)

    @classmethod
    def open(cls, name: str, definition: str | None = None) -> Session:
        """A script by path, or a bundled sample by name."""
        path = resolve_script(name)
        return cls(load_repro(path), str(path), definition)

    # -- definition and inputs ------------------------------------------------------------
    @property
    def definitions(self) -> list[str]:
        return [d.name for d in self.script.definitions]

    @property
    def loaded(self) -> LoadedDefinition:
        return self.script.definition(self.definition)

    def select(self, name: str) -> None:
        loaded = self.script.definition(name)
        if loaded.inputs is None:
            raise FuserError(f"{name} has no inputs in the script to run it with")
        self.definition = name
        self.slots = [
            _slot(i, v, s) for i, (v, s) in enumerate(zip(loaded.fd.fusion.inputs, loaded.inputs, strict=True))
        ]
        self.shapes = [s.spec.shape for s in self.tensor_slots]
        self.scalars = [s.spec.value for s in self.scalar_slots]

    @property
    def tensor_slots(self) -> list[InputSlot]:
        return [s for s in self.slots if s.rank is not None]

    @property
    def scalar_slots(self) -> list[InputSlot]:
        return [s for s in self.slots if s.rank is None]

    def set_shapes(self, shapes: Sequence[Sequence[int]]) -> None:
        """One shape per tensor input; checked against the definition before it is kept."""
        slots = self.tensor_slots
        if len(shapes) != len(slots):
            raise FuserError(f"{self.definition} has {len(slots)} tensor inputs; got {len(shapes)} shapes")
        checked = [_check_shape(slot, tuple(shape)) for slot, shape in zip(slots, shapes, strict=True)]
        self.shapes = checked

    def set_shape(self, position: int, shape: Sequence[int]) -> None:
        shapes = list(self.shapes)
        shapes[position] = tuple(shape)
        self.set_shapes(shapes)

    def set_scalars(self, values: Sequence[Any]) -> None:
        slots = self.scalar_slots
        if len(values) != len(slots):
            raise FuserError(f"{self.definition} has {len(slots)} scalar inputs; got {len(values)} values")
        for slot, value in zip(slots, values, strict=True):
            ScalarSpec(value)  # a FuserError for what is not a number
            if isinstance(slot.spec.value, bool) != isinstance(value, bool):
                raise FuserError(f"input {slot.index} ({slot.label}) takes {slot.spec.describe()}, not {value!r}")
        self.scalars = list(values)

    def check_shape(self, position: int, shape: Sequence[int]) -> tuple[int, ...]:
        """`shape` if tensor input `position` may take it; a FuserError naming the input if not."""
        return _check_shape(self.tensor_slots[position], tuple(shape))

    @property
    def bundled_shapes(self) -> list[tuple[int, ...]]:
        return [s.spec.shape for s in self.tensor_slots]

    @property
    def bundled_scalars(self) -> list[Any]:
        return [s.spec.value for s in self.scalar_slots]

    # -- the script on disk ---------------------------------------------------------------
    def changed_on_disk(self) -> bool:
        """Whether the script's file no longer holds the text this session loaded."""
        if self.detached:
            return False
        try:
            return Path(self.path).read_text(encoding="utf-8-sig") != self.script.text
        except (OSError, UnicodeDecodeError):
            return True  # reload() reports why it cannot be read

    def reload(self) -> list[str]:
        """Load the script again (after it was edited), keeping the definition, options,
        seed and the inputs the user changed, where they still fit. Returns one line per
        thing that could not be kept. A script that no longer loads raises its FuserError
        and leaves the session as it was."""
        kept = (self.script, self.definition, self.slots, self.shapes, self.scalars, self._caches)
        edited_shapes = self.shapes if self.shapes != self.bundled_shapes else None
        edited_scalars = self.scalars if self.scalars != self.bundled_scalars else None
        script = load_repro(Path(self.path))
        names = [d.name for d in script.definitions]
        name = self.definition if self.definition in names else names[0]
        self.script, self._caches = script, {}
        try:
            self.select(name)
        except FuserError:
            self.script, self.definition, self.slots, self.shapes, self.scalars, self._caches = kept
            raise
        notes = [] if name == kept[1] else [f"{kept[1]} is no longer in the script: showing {name}"]
        notes += self._keep("shapes", edited_shapes, self.set_shapes)
        notes += self._keep("scalars", edited_scalars, self.set_scalars)
        return notes

    def _keep(self, what: str, values: list[Any] | None, setter: Callable[[Any], None]) -> list[str]:
        if values is None:
            return []
        try:
            setter(values)
        except FuserError as err:
            return [f"your {what} no longer fit ({err.message}): the script's are used"]
        return []

    def settings(self) -> RunSettings:
        return RunSettings(self.definition, tuple(self.shapes), tuple(self.scalars), self.options, self.seed)

    def input_specs(
        self, shapes: Sequence[tuple[int, ...]] | None = None, scalars: Sequence[Any] | None = None
    ) -> list[Any]:
        """The inputs' specs at the session's shapes and scalars, or at those given."""
        shapes_left = iter(self.shapes if shapes is None else shapes)
        scalars_left = iter(self.scalars if scalars is None else scalars)
        specs: list[Any] = []
        for slot in self.slots:
            if slot.rank is None:
                specs.append(ScalarSpec(next(scalars_left)))
            else:
                specs.append(resized_spec(slot.spec, next(shapes_left)))
        return specs

    def repro_script(self, enable: Iterable[str] = ()) -> str:
        """nvFuser's repro of the selected definition with the current shapes, scalars and
        options: the printed definition, inputs like this session's, and the execute
        call with the enable/disable options that change what is compiled (and `enable`)."""
        inputs = _materialize(self.input_specs(), self.seed, self.max_input_bytes, self.loaded.name)
        opts = self.options
        enabled = sorted(opts.enable | frozenset(enable))
        return self.loaded.fd.repro_script_for(inputs, enable=enabled, disable=sorted(opts.disable))

    # -- running ------------------------------------------------------------------------
    def run(self, progress: Progress | None = None) -> RunResult:
        """Run with the current settings; `progress` is told each step as it starts (the
        TUI runs this in a worker and shows the step)."""
        settings = self.settings()
        try:
            result = self._run(settings, progress or _no_progress)
        except FuserError as err:
            result = RunResult(self._runs, settings, error=self._error(err))
        self._runs += 1
        self.previous, self.current = self.current, result
        return result

    def _run(self, settings: RunSettings, progress: Progress) -> RunResult:
        loaded = self.loaded
        progress(STEP_INPUTS)
        inputs = _materialize(self.input_specs(), settings.seed, self.max_input_bytes, loaded.name)
        captured: list[tuple[str, str]] = []
        opts = settings.options
        with (
            use_options(
                dump=sorted(opts.dump),
                enable=sorted(opts.enable),
                disable=sorted(opts.disable),
                source="the workbench options",
                device_model=opts.device_model,
            ) as effective,
            dump_sink(lambda option, text: captured.append((option.name, text))),
        ):
            progress(STEP_RUN.format(backend=opts.backend))
            cache = self._cache(loaded, opts.backend, opts.device_model)
            # Copying the outputs to the host ends the run on the device: a CUDA fault of
            # its kernels is reported by the run or by this copy.
            outputs = cache.outputs_on_host(cache.run(inputs))
            report = cache.last_report
            assert report is not None
            if opts.backend != REFERENCE:
                progress(STEP_CHECK)
            correctness = self._check(loaded, opts.backend, inputs, outputs)
            progress(STEP_COLLECT)
            artifacts = collect(report, loaded.fd.fusion_ir(), inputs, correctness, opts.backend, captured)
            runtime = report.runtime
            asker = Asker(runtime.segmented, runtime.runtime_info(convert_inputs(runtime.segmented.complete, inputs)))
        names = [o.name for o in sorted(effective.disable, key=lambda o: o.name)]
        names += [o.name for o in sorted(effective.enable, key=lambda o: o.name)]
        return RunResult(self._runs, settings, artifacts, effective=tuple(names), asker=asker)

    def why(self, first: str, second: str | None = None) -> Any:
        """Ask the segmenter about a kept run without changing it: why groups (or the groups
        of two expressions, by the tensors they write) `first` and `second` are separate
        kernels (a MergeAnswer); with one name, how that group would be cut without its
        scheduler (a SplitAnswer). Names: `g0`, `T7`, `2:g0` (of run 2)."""
        current = self.current.index + 1 if self.current is not None else None
        refs = [(run or current, name) for run, name in (parse_ref(n) for n in (first, second) if n is not None)]
        runs = {run for run, _ in refs}
        if len(runs) > 1:
            named = " and ".join(f"{name} of run {run}" for run, name in refs)
            raise FuserError(f"{named} are of different runs: ask about groups of one run")
        result = self._kept(runs.pop())
        assert result.artifacts is not None and result.asker is not None
        ids = [group_of(name, result.artifacts) for _, name in refs]
        if len(ids) == 2 and ids[0] == ids[1]:
            raise FuserError(f"{refs[0][1]} and {refs[1][1]} are both in g{ids[0]}: one kernel already")
        return ask(result.asker, ids[0], ids[1] if len(ids) == 2 else None)

    def _kept(self, run: int | None) -> RunResult:
        """The kept run numbered `run` (1-based, as the TUI shows it), or the current one."""
        kept = [r for r in (self.previous, self.current) if r is not None]
        if run is not None:
            kept = [r for r in kept if r.index + 1 == run]
            if not kept:
                numbers = ", ".join(str(r.index + 1) for r in (self.previous, self.current) if r is not None)
                raise FuserError(f"run {run} is not kept: the session keeps its last two runs ({numbers or 'none'})")
        result = kept[-1] if kept else None
        if result is None:
            raise FuserError("no run to ask about: run the fusion first")
        if result.asker is None and result.artifacts is not None:
            raise FuserError(
                f"run {result.index + 1} was reopened from a bundle, which keeps what was seen but not the "
                "segmenter's state: run it again here to ask why"
            )
        if result.asker is None:
            raise FuserError(f"run {result.index + 1} failed: there is no segmentation to ask about")
        return result

    def trace(self, tensor: str, index: Sequence[int], settings: RunSettings | None = None) -> ElementTrace:
        """Where `tensor[index]` came from, with `settings` (by default the current run's,
        or the session's own when there is none; the TUI passes those of the run it
        shows): the kernel that writes it interpreted for the block that writes it
        (fuser_core's trace_element)."""
        if settings is None:
            settings = self.current.settings if self.current is not None else self.settings()
        loaded = self.script.definition(settings.definition)
        specs = self.input_specs(settings.shapes, settings.scalars)  # the session's own stay as they are
        inputs = _materialize(specs, settings.seed, self.max_input_bytes, loaded.name)
        opts = settings.options
        with use_options(enable=sorted(opts.enable), disable=sorted(opts.disable), device_model=opts.device_model):
            runtime = self._cache(loaded, opts.backend, opts.device_model).runtime_for(inputs)
            return trace_element(runtime, inputs, _tensor_name(tensor), index)

    def _cache(self, loaded: LoadedDefinition, backend: str, device_model: str | None) -> FusionExecutorCache:
        key = (loaded.name, backend, device_model)
        if key not in self._caches:
            fd = loaded.fd
            built = make_backend(backend, device_model)
            self._caches[key] = FusionExecutorCache(fd.fusion, fusion_id=fd.id() or 0, backend=built)
        return self._caches[key]

    def _check(self, loaded: LoadedDefinition, backend: str, inputs: list[Any], outputs: list[Any]) -> Correctness:
        if backend == REFERENCE:
            return Correctness("reference backend: its outputs are the reference")
        expected = self._cache(loaded, REFERENCE, None).run(inputs)
        checks = tuple(_compare(i, got, want) for i, (got, want) in enumerate(zip(outputs, expected, strict=True)))
        bad = [c.index for c in checks if not c.ok]
        note = f"outputs {bad} differ from the reference" if bad else "every output matches the reference"
        return Correctness(note, checks)

    def _error(self, err: FuserError) -> RunError:
        location = err.location
        lines = self.script.text.split("\n")
        fault = self._fault(err)
        if location is not None:
            line = location.line or (lines[location.lineno - 1] if 0 < location.lineno <= len(lines) else "")
            return RunError(err.one_line(), str(location), line, fault)
        lineno = self.loaded.lineno
        where = f"{Path(self.path).name}:{lineno}"
        line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
        return RunError(f"{where}: {err.one_line()}", where, line, fault)

    def _fault(self, err: FuserError) -> CudaFault | None:
        """The kernels a CUDA error names, with their CUDA, and the run's repro; None for
        any other error. (fuser_core's CudaFaultError, read by its attributes: `fault`
        and the `runtime` whose kernel artifacts hold the CUDA.)"""
        fault = getattr(err, "fault", None)
        if fault is None:
            return None
        kernels = fault.kernels or fault.earlier
        cuda = _kernel_cuda(getattr(err, "runtime", None))
        found = tuple(
            FaultKernel(k.group_id, k.label, k.scheduler, k.launch_text(), cuda.get(k.name, "")) for k in kernels
        )
        try:
            repro = self.repro_script(enable=[SYNC_LAUNCHES])
        except FuserError as problem:
            repro = f"# no repro script: {problem.one_line()}\n"
        return CudaFault(fault.error, fault.sticky, fault.pinned, found, repro)


def _kernel_cuda(runtime: Any) -> dict[str, str]:
    """The CUDA of each generated kernel of a runtime, by kernel name."""
    if runtime is None:
        return {}
    try:
        return {k.name: k.cuda for k in runtime.kernels}
    except FuserError:
        return {}


def _tensor_name(text: str) -> str:
    """`T12`, `t12` or `12` as `T12`."""
    name = text.strip()
    return f"T{name}" if name.isdigit() else name[:1].upper() + name[1:]


def parse_index(text: str) -> tuple[int, ...]:
    """`3,0,7` (or `[3, 0, 7]`, `3x0x7`) as an element index; `()` for a 0-D tensor."""
    cleaned = text.strip().strip("[]()").replace(" ", "").replace("x", ",")
    if not cleaned:
        return ()
    try:
        return tuple(int(p) for p in cleaned.split(","))
    except ValueError:
        raise FuserError(f"not an element index: {text!r} (write it as 3,0,7)") from None


# -- inputs -------------------------------------------------------------------------------


def _slot(index: int, val: Any, spec: Any) -> InputSlot:
    if not isinstance(spec, TensorSpec):
        return InputSlot(index, str(val), spec, None)
    axes = val.logical_no_reductions()
    fixed = {}
    for axis, dim in enumerate(axes):
        if dim.is_broadcast and not dim.has_expanded_extent:
            fixed[axis] = 1
        elif dim.extent.is_const:
            fixed[axis] = int(dim.extent.value)
    return InputSlot(index, f"T{val.name}", spec, len(axes), fixed)


def _check_shape(slot: InputSlot, shape: tuple[int, ...]) -> tuple[int, ...]:
    where = f"input {slot.index} ({slot.label})"
    if len(shape) != slot.rank:
        raise FuserError(f"{where} is {slot.rank}-D in the definition; the shape {list(shape)} has {len(shape)} sizes")
    for axis, size in enumerate(shape):
        if size < 0:
            raise FuserError(f"{where}: size {size} of axis {axis} is negative")
        need = slot.fixed.get(axis)
        if need is not None and size != need:
            raise FuserError(f"{where}: axis {axis} must have size {need} as the definition says, not {size}")
    return shape


def resized_spec(spec: TensorSpec, shape: tuple[int, ...]) -> TensorSpec:
    """The bundled spec at another shape: the same dtype, fill and stride order, dense."""
    if shape == spec.shape:
        return spec
    order = sorted(range(len(shape)), key=lambda a: spec.strides[a] if spec.strides else 0, reverse=True)
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(order):
        expanded = spec.strides is not None and spec.strides[axis] == 0 and spec.shape[axis] != 1
        strides[axis] = 0 if expanded else step
        step *= 1 if expanded else max(shape[axis], 1)
    base = spec
    while base.source is not None:
        base = base.source
    kind = "randn" if base.kind == "tensor" else base.kind
    return dataclasses.replace(
        base,
        shape=shape,
        dtype=spec.dtype,
        strides=tuple(strides),
        kind=kind,
        data=None,
        storage_offset=0,
        storage_size=None,
        source=None,
        source_strides=None,
        compare=None,
        operand=None,
    )


def _materialize(specs: list[Any], seed: int, max_bytes: int, owner: str) -> list[Any]:
    return materialize_inputs(specs, seed, max_bytes=max_bytes, owner=owner)


def _compare(index: int, got: Any, want: Any) -> OutputCheck:
    a = np.asarray(got, dtype=np.float64)
    b = np.asarray(want, dtype=np.float64)
    if a.shape != b.shape:
        return OutputCheck(index, float("inf"), False)
    diff = np.abs(a - b)
    error = float(np.nanmax(diff)) if diff.size else 0.0
    ok = bool(np.allclose(a, b, rtol=1e-2, atol=1e-2, equal_nan=True))
    return OutputCheck(index, error, ok)


# -- command-line forms of settings -------------------------------------------------------


@dataclass(frozen=True)
class SettingsArgs:
    """What `--a "..."` / `--b "..."` of `fuser-wb diff` may say."""

    enable: frozenset[str] = frozenset()
    disable: frozenset[str] = frozenset()
    backend: str | None = None
    device_model: str | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    scalars: tuple[Any, ...] | None = None


def parse_settings_args(text: str) -> SettingsArgs:
    words = shlex.split(text)
    found: dict[str, Any] = {}
    position = 0
    while position < len(words):
        word = words[position]
        key, _, inline = word.partition("=")
        if key not in ("--enable", "--disable", "--backend", "--device-model", "--shapes", "--scalars"):
            raise FuserError(
                f"unknown setting {word!r} in {text!r}; use --enable, --disable, --backend, "
                "--device-model, --shapes or --scalars"
            )
        values = [inline] if inline else []
        position += 1
        while not values or (key == "--shapes" and position < len(words) and not words[position].startswith("--")):
            if position >= len(words) or words[position].startswith("--"):
                if values:
                    break
                raise FuserError(f"{key} needs a value in {text!r}")
            values.append(words[position])
            position += 1
        found[key] = values
    return _settings_args(found)


def _settings_args(found: dict[str, list[str]]) -> SettingsArgs:
    shapes = None
    if "--shapes" in found:
        shapes = tuple(parse_shape(s) for value in found["--shapes"] for s in value.split(";") if s.strip())
    scalars = None
    if "--scalars" in found:
        scalars = tuple(parse_scalar(v) for v in found["--scalars"][0].split(",") if v.strip())
    model = found.get("--device-model", [None])[0]
    if model is not None and model.lower() not in DEVICE_MODELS and model.lower() != "h100":
        raise FuserError(f"unknown device model {model!r}; valid: {', '.join(DEVICE_MODELS)}")
    return SettingsArgs(
        enable=split_names(",".join(found.get("--enable", []))),
        disable=split_names(",".join(found.get("--disable", []))),
        backend=found.get("--backend", [None])[0],
        device_model=model,
        shapes=shapes,
        scalars=scalars,
    )


def apply_settings(session: Session, args: SettingsArgs, base: RunOptions) -> None:
    """Set a session's options (on top of `base`) and inputs as the args say."""
    session.options = RunOptions(
        dump=base.dump,
        enable=base.enable | args.enable,
        disable=base.disable | args.disable,
        backend=args.backend or base.backend,
        device_model=args.device_model or base.device_model,
    )
    if args.shapes is not None:
        session.set_shapes(args.shapes)
    if args.scalars is not None:
        session.set_scalars(args.scalars)


def dump_names() -> list[str]:
    return list(DumpOption.__members__)
