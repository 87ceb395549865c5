"""FusionExecutorCache: from inputs to a runtime that can run them, in three levels.

1. input key: the input signature (contiguity, stride order, size-1 axes, index
   type) plus the values that concretization depends on: a hit goes straight to a
   runtime (an LRU of the most recent keys, as nvFuser's InputsIdLookup);
2. concretization: the ConcretizationInfo of the inputs; equal infos share a
   concretized fusion;
3. runtime reuse: under one concretization, a runtime built for the same signature.

Every execution leaves a RunReport whose CacheEvent says hit or miss, at which level,
and why: the difference between the new key and the nearest of the recent keys.

On the cuda backend a call like an earlier one replays that call's FastPlan (the fast
path). The last plan replayed comes with a guard that compares the inputs with its key
in place, so a repeated call replays it without making the key; a hit records a small
tuple, made into its RunReport when `reports` (or `events`, `last_report`...) is read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuser_core.dynamic.concretization_info import ConcretizationInfo, compute_info
from fuser_core.dynamic.concretize import concretize
from fuser_core.dynamic.initial_info import analyze_fusion
from fuser_core.errors import FuserError
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.printer import print_kernel, print_math
from fuser_core.ir.rng import recording_run_seeds
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView
from fuser_core.options import (
    DisableOption,
    DumpOption,
    EnableOption,
    Options,
    current_options,
    emit_dump,
    use_options,
)
from fuser_core.runtime.arguments import TensorArg, bind_args, check_mapped_sizes, convert_inputs
from fuser_core.runtime.artifacts import LaunchRecord
from fuser_core.runtime.dumps import emit_runtime_dumps, print_launches
from fuser_core.runtime.fast_path import generated, guard_lines, input_key
from fuser_core.runtime.kernel_choice import KernelChoice, choice_records, settled, with_kernel_choice
from fuser_core.runtime.kernel_runtime import (
    Backend,
    CompileFlags,
    FusionKernelRuntime,
    ReferenceBackend,
    compile_fusion,
)
from fuser_core.runtime.launch_errors import CudaFaultError
from fuser_core.runtime.roofline import RooflineEstimate, estimate_group
from fuser_core.runtime.signature import InputSignature
from fuser_core.runtime.streams import replay_stream_check
from fuser_core.scheduler.device import select_device

LEVELS = ("input key", "concretization", "runtime")
# Enable options the cache-hit fast path works under: the kernel choice's trials run
# through the full path, and the fast path replays the kernel kept.
FAST_PATH_ENABLES = frozenset({EnableOption.kernel_choice})
INPUT_KEY_CAPACITY = 256  # level-1 entries kept (least recently used go first)
REASON_CANDIDATES = 32  # recent keys a miss is compared with to explain it
REPORTS_KEPT = 1024


@dataclass(frozen=True)
class CacheEvent:
    hit: bool
    level: str  # the level that answered a hit, or the first one that missed
    runtime: str  # f<F>_c<C>_r<R> of the runtime that ran
    reasons: tuple[str, ...] = ()
    # What the run did for the kernel choice (kernel_choice): a candidate timed, the choice made.
    choices: tuple[str, ...] = ()

    def line(self) -> str:
        why = "; ".join(self.reasons)
        if self.hit:
            line = f"cache: hit at {self.level} -> {self.runtime}" + (f" ({why})" if why else "")
        else:
            line = f"cache: miss at {self.level}: {why} -> new runtime {self.runtime}"
        return "; ".join((line, *self.choices))


@dataclass(frozen=True)
class RunReport:
    """What one execution did: the artifacts views and dumps read."""

    index: int  # 0-based count of executions of this cache
    event: CacheEvent
    runtime: FusionKernelRuntime  # its concretization info and concretized fusion
    arguments: tuple[str, ...]  # one line per input: dtype, shape, strides or value
    seconds: float  # wall time of the backend's run
    launches: tuple[LaunchRecord, ...] = ()  # per kernel launch, on the cuda backend
    compiles: tuple[str, ...] = ()  # on a miss that built a runtime: what each kernel's compile did
    rng_seed: int | None = None  # the seed drawn for unseeded random ops (replays the run)
    rng_offset: int = 0  # and their base Philox offset (op i draws at rng_offset + i)
    estimates: tuple[RooflineEstimate, ...] = ()  # each kernel's roofline estimate at this run's sizes
    choices: tuple[KernelChoice, ...] = ()  # kernel_choice: each group's candidates, their times, the one kept

    def repeated(self, index: int, seconds: float, launches: tuple[LaunchRecord, ...]) -> RunReport:
        """This report (a fast-path template) as the report of run `index`: a copy of its
        fields without dataclasses.replace's per-field checks (one per hit, made when
        the reports are read)."""
        report = object.__new__(RunReport)
        report.__dict__.update(self.__dict__)
        report.__dict__.update(index=index, seconds=seconds, launches=launches)
        return report

    def compile_summary(self) -> str:
        """`compiled 2 kernels (0.41 s)`, or `warm start: compiled nothing` when every
        kernel came from the on-disk or in-process cache."""
        kernels = [c for c in self.compiles if "on the host reference" not in c and "library call" not in c]
        if not kernels:
            return "no kernels compiled in this run"
        fresh = [c for c in kernels if ": compiled " in c]
        if not fresh:
            return f"warm start: compiled nothing ({len(kernels)} kernels from the kernel cache)"
        return f"compiled {len(fresh)} of {len(kernels)} kernels"


@dataclass
class _FastEntry:
    """A plan of the fast path: the options it was made under, the report its hits
    repeat, and `replay`, the whole of a hit on inputs its guard accepts."""

    made_under: Options
    plan: Any  # FastPlan
    template: RunReport
    replay: Callable[[Sequence[Any]], list[Any] | None] = field(init=False)
    # The Options object `replay` takes: the one it was made under, or the last equal one a
    # lookup found it with (a new use_options block makes a new object).
    options: Options = field(init=False)

    def __post_init__(self) -> None:
        self.options = self.made_under


def _no_replay(inputs: Sequence[Any]) -> None:
    return None


# A fast-path hit of one plan (FusionExecutorCache._replayer): the options object itself
# (comparing Options costs more than the guard; a lookup that finds the plan with an
# equal one sets entry.options), the guard, the plan's run timed, the hit counted.
_REPLAY = """\
def replay(inputs):
    if current_options() is not entry.options:
        return None
{guard}
    start = perf_counter()
    try:
        outputs = run(inputs, current_stream().ptr)
    except CudaFaultError as err:
        err.runtime = runtime
        raise
    if plan.fell_back:
        hit(plan, template, perf_counter() - start)
    else:
        append((template, perf_counter() - start, None))
        executor._runs += 1
    return outputs
"""


@dataclass
class _ConcretizationEntry:
    id: int
    info: ConcretizationInfo
    fusion: Fusion
    runtimes: list[FusionKernelRuntime] = field(default_factory=list)


def select_backend(name: str | None, device_model: str | None) -> Backend:
    """The backend an option names, else cuda where a GPU and CuPy are, else the reference."""
    from fuser_core.runtime.cuda_backend import CudaBackend, cuda_available

    if name == "reference":
        return ReferenceBackend()
    reason = cuda_available()
    if name == "cuda" and reason is not None:
        raise FuserError(f"the cuda backend needs an NVIDIA GPU with CuPy: {reason}")
    if reason is None:
        return CudaBackend(select_device(device_model))
    return ReferenceBackend()


class FusionExecutorCache:
    def __init__(self, fusion: Fusion, fusion_id: int = 0, backend: Backend | None = None) -> None:
        self.fusion = fusion
        self.fusion_id = fusion_id
        self.fixed_backend = backend  # None: chosen by the options of each run
        self.backend: Backend = backend if backend is not None else ReferenceBackend()
        self._backends: dict[tuple[str | None, str | None], Backend] = {}
        # cuda backend: input key -> the plans made for it under each options
        self._fast: dict[tuple[Any, ...], list[_FastEntry]] = {}
        self._current_stream: Any = None
        # The last plan hit or made: `run` tries it first; `replay_final(inputs)` (the
        # frontend's) is its replay where its outputs need no conversion, else None.
        self._last_fast: _FastEntry | None = None
        self.replay_final: Callable[[Sequence[Any]], list[Any] | None] = _no_replay
        self.initial_info = analyze_fusion(fusion)
        self._reports: deque[RunReport] = deque(maxlen=REPORTS_KEPT)
        # Fast-path hits since the reports were last read, each (template, seconds,
        # launches or None for the template's), the last of the runs counted by _runs.
        self._hits: deque[tuple[RunReport, float, tuple[LaunchRecord, ...] | None]] = deque(maxlen=REPORTS_KEPT)
        self._runs = 0
        self._by_input_key: OrderedDict[tuple[Any, ...], FusionKernelRuntime] = OrderedDict()
        self._by_info: dict[ConcretizationInfo, _ConcretizationEntry] = {}
        self._recent_infos: deque[ConcretizationInfo] = deque(maxlen=REASON_CANDIDATES)
        self._scalar_dtypes = [None if isinstance(v, TensorView) else v.dtype for v in fusion.inputs]
        self._leaf_labels = _leaf_labels(fusion)
        self._leaves = {flag: self.initial_info.leaves(include_static_resizes=flag) for flag in (False, True)}

    def fast_hit(self, inputs: Sequence[Any]) -> tuple[Any, RunReport] | None:
        """The plan and report template of an earlier call like this one under the
        options in effect, if the fast path took it (plans are made only under options
        the fast path works with, so finding one is the whole check)."""
        found = self._fast_lookup(input_key(inputs) if self._fast else None, current_options())
        return (found.plan, found.template) if found is not None else None

    def _fast_lookup(self, key: tuple[Any, ...] | None, options: Options) -> _FastEntry | None:
        found = self._fast.get(key) if key is not None else None
        if found is None:
            return None
        for entry in found:
            if entry.made_under is options or entry.made_under == options:
                bound = entry.plan.stream_bound
                if bound is not None and bound != self._current_stream().ptr:
                    return None  # its workspaces are another stream's: the full path, per stream
                entry.options = options
                self._use_last(entry)
                return entry
        return None

    def _use_last(self, entry: _FastEntry) -> None:
        if self._last_fast is not None and self._last_fast.plan is not entry.plan:
            self._last_fast.plan.release_outputs()  # an executor keeps one plan's outputs
        self._last_fast = entry
        self.replay_final = entry.replay if entry.plan.final else _no_replay

    def run_fast(self, hit: tuple[Any, RunReport], inputs: Sequence[Any]) -> list[Any]:
        """A call like an earlier one: its plan replayed, its report repeated as a hit."""
        plan, template = hit
        start = time.perf_counter()
        try:
            outputs = plan.run(inputs, self._current_stream().ptr)
        except CudaFaultError as err:
            err.runtime = template.runtime
            raise
        self._hit(plan, template, time.perf_counter() - start)
        return outputs

    def _hit(self, plan: Any, template: RunReport, seconds: float) -> None:
        """Count a hit; its report is made when the reports are read."""
        launches = None
        if plan.fell_back:  # misaligned pointers this time: say which kernels ran scalar
            launches = tuple(
                dataclasses.replace(r, kernel=r.kernel.split(" (")[0] + " (scalar fallback)")
                if i in plan.fell_back
                else r
                for i, r in enumerate(template.launches)
            )
        self._hits.append((template, seconds, launches))
        self._runs += 1

    def _replayer(self, entry: _FastEntry, inputs: Sequence[Any]) -> Callable[[Sequence[Any]], Any]:
        """A hit of the entry's plan (made for `inputs`) in one call: None where the inputs
        or the options in effect are not those it was made for (the caller then looks
        them up), else the outputs. This is the whole host time of a repeated call but
        for the plan's run, so it is generated with its guard inline (`_REPLAY`)."""
        guard = guard_lines(inputs, "None")
        if guard is None:
            return _no_replay
        lines, names = guard
        stream_lines, stream_names = replay_stream_check(inputs)
        lines, names = [*lines, *stream_lines], {**names, **stream_names}
        if entry.plan.stream_bound is not None:  # its workspaces are one stream's
            lines += [f"    if current_stream().ptr != {entry.plan.stream_bound}:", "        return None"]
        names.update(
            entry=entry,
            plan=entry.plan,
            template=entry.template,
            runtime=entry.template.runtime,
            run=entry.plan.run,
            current_options=current_options,
            current_stream=self._current_stream,
            perf_counter=time.perf_counter,
            CudaFaultError=CudaFaultError,
            executor=self,
            hit=self._hit,
            append=self._hits.append,
        )
        return generated("replay", _REPLAY.format(guard="\n".join(lines)), names)  # type: ignore[no-any-return]

    @property
    def reports(self) -> deque[RunReport]:
        """The reports of the last REPORTS_KEPT runs, oldest first: brought up to date when
        read (a fast-path hit records its report's fields and makes it here), so read it
        again after a run rather than keeping the deque. An executor is run from one
        thread at a time, as nvFuser's is: a plan's packed arguments are shared."""
        if self._hits:
            self._report_hits()
        return self._reports

    def _report_hits(self) -> None:
        """The RunReports of the fast-path hits counted since the reports were last read."""
        first = self._runs - len(self._hits)  # they are the last runs
        for offset, (template, seconds, launches) in enumerate(self._hits):
            self._reports.append(template.repeated(first + offset, seconds, launches or template.launches))
        self._hits.clear()

    @property
    def events(self) -> list[CacheEvent]:
        return [r.event for r in self.reports]

    @property
    def last_report(self) -> RunReport | None:
        reports = self.reports
        return reports[-1] if reports else None

    @property
    def last_runtime(self) -> FusionKernelRuntime | None:
        if self._hits:  # without making its report
            return self._hits[-1][0].runtime
        return self._reports[-1].runtime if self._reports else None

    @property
    def runtimes(self) -> list[FusionKernelRuntime]:
        return [r for entry in self._by_info.values() for r in entry.runtimes]

    def run(
        self,
        inputs: Sequence[Any],
        enable: Sequence[str] = (),
        disable: Sequence[str] = (),
        hit: tuple[Any, RunReport] | None = None,
    ) -> list[Any]:
        """Run on `inputs`; `hit`: what `fast_hit` found for them just now (replayed as is)."""
        if hit is not None:
            return self.run_fast(hit, inputs)
        if not enable and not disable and self._last_fast is not None:
            outputs = self._last_fast.replay(inputs)  # checks the options too
            if outputs is not None:
                return outputs
        base = current_options()
        fast_key = None
        if not enable and not disable and not base.dump and base.enable <= FAST_PATH_ENABLES:
            fast_key = input_key(inputs)
            if fast_key is not None:
                found = self._fast_lookup(fast_key, base)
                if found is not None:
                    return self.run_fast((found.plan, found.template), inputs)
        opts = base.merged(enable=enable, disable=disable, source="execute")
        args = convert_inputs(self.fusion, inputs)
        runtime, event = self._lookup(args, opts)
        start = time.perf_counter()
        # The backend reads this call's enable/disable options too (kernel_profile, sync_launches).
        call_options = (
            use_options(enable=enable, disable=disable, source="execute")
            if enable or disable
            else contextlib.nullcontext()
        )
        with recording_run_seeds() as drawn, _naming(runtime), call_options:
            outputs = runtime.run(args)
        seconds = time.perf_counter() - start
        seed, offset = drawn[0] if drawn else (None, 0)
        estimates = _estimates(runtime, args)
        choices = choice_records(
            runtime.segmented, runtime.executable, runtime.backend_name, runtime.name, built=not event.hit
        )
        news = tuple(c.line() for c in choices if c.news)
        report = RunReport(
            self._runs,
            dataclasses.replace(event, choices=news) if news else event,
            runtime,
            _describe_args(self.fusion, args),
            seconds,
            _with_estimates(runtime.launches, estimates),
            compiles=_compile_events(runtime) if not event.hit else (),
            rng_seed=seed,
            rng_offset=offset,
            estimates=estimates,
            choices=choices,
        )
        self.reports.append(report)  # after the hits before it
        self._runs += 1
        if fast_key is not None and hasattr(runtime.executable, "fast_plan"):
            with _naming(runtime):
                plan = runtime.executable.fast_plan(args)
            if plan is not None:
                import cupy  # the cuda backend ran, so CuPy is there

                self._current_stream = cupy.cuda.get_current_stream
                hit_event = CacheEvent(True, LEVELS[0], runtime.name, ("fast path",))
                template = dataclasses.replace(report, event=hit_event, compiles=(), choices=settled(choices))
                entry = _FastEntry(base, plan, template)
                entry.replay = self._replayer(entry, inputs)
                made = [m for m in self._fast.pop(fast_key, []) if m.made_under != base]
                self._fast[fast_key] = [*made, entry]
                self._use_last(entry)
                while len(self._fast) > INPUT_KEY_CAPACITY:
                    self._fast.pop(next(iter(self._fast)))
        emit_dump(opts, DumpOption.fusion_args, lambda: "Arguments:\n" + "".join(f"  {a}\n" for a in report.arguments))
        emit_dump(opts, DumpOption.cache_events, report.event.line)
        emit_dump(opts, DumpOption.kernel_metadata, lambda: print_launches(report.launches, runtime.backend_name))
        return outputs

    def outputs_on_host(self, outputs: Sequence[Any]) -> list[Any]:
        """The last run's outputs as NumPy arrays. On the cuda backend copying them is the
        synchronization that ends the run: a CUDA fault of its kernels is reported here,
        as a CudaFaultError naming them (the reference's outputs are on the host already)."""
        runtime = self.last_runtime
        to_host = getattr(runtime.executable, "to_host", None) if runtime is not None else None
        if runtime is None or to_host is None:
            return list(outputs)
        with _naming(runtime):
            return list(to_host(outputs))

    def runtime_for(
        self, inputs: Sequence[Any], enable: Sequence[str] = (), disable: Sequence[str] = ()
    ) -> FusionKernelRuntime:
        """The runtime (segments, schedules) these inputs would run with, built if need be,
        without running it: nvFuser's `scheduled_fusion_ir_for(inputs)`."""
        opts = current_options().merged(enable=enable, disable=disable, source="runtime_for")
        runtime, _ = self._lookup(convert_inputs(self.fusion, inputs), opts)
        return runtime

    def _backend_for(self, opts: Options) -> Backend:
        if self.fixed_backend is not None:
            return self.fixed_backend
        key = (opts.backend, opts.device_model)
        if key not in self._backends:
            self._backends[key] = select_backend(opts.backend, opts.device_model)
        self.backend = self._backends[key]
        return self.backend

    # -- the three levels -------------------------------------------------------------
    def compiled_runtime_for(self, inputs: Sequence[Any]) -> FusionKernelRuntime | None:
        """The runtime an earlier run built for inputs like these; None where these
        inputs would need a new one (nothing is built)."""
        opts = current_options().merged(source="runtime_for")
        args = convert_inputs(self.fusion, inputs)
        input_key, ev, signature, resize_extents = self._input_key(args, opts)
        runtime = self._by_input_key.get(input_key)
        if runtime is not None:
            return runtime
        entry = self._by_info.get(compute_info(self.initial_info, ev, resize_extents))
        if entry is None:
            return None
        flags = CompileFlags.of(opts)
        return next(
            (r for r in entry.runtimes if r.accepts(signature) and r.flags == flags and r.refusal(args) is None),
            None,
        )

    def _input_key(
        self, args: list[Any], opts: Options
    ) -> tuple[tuple[Any, ...], ExpressionEvaluator, InputSignature, bool]:
        resize_extents = not opts.is_disabled(DisableOption.concretize_resize_extents)
        ev = bind_args(self.fusion, args, values=False)
        signature = InputSignature.of(args, self._scalar_dtypes)
        flags = CompileFlags.of(opts)
        if flags.int64_index and signature.index_type != "int64":
            signature = dataclasses.replace(signature, index_type="int64")
        values = tuple(
            (self._leaf_labels.get(id(leaf), str(leaf)), ev.evaluate(leaf)) for leaf in self._leaves[resize_extents]
        )
        empties = tuple(ev.evaluate(s.extent) == 0 for s in self.initial_info.maybe_empty)
        sizes = tuple(a.shape for a in args if isinstance(a, TensorArg))
        input_key = (signature, values, empties, resize_extents, sizes, opts.device_model, opts.backend, flags)
        return input_key, ev, signature, resize_extents

    def _lookup(self, args: list[Any], opts: Options) -> tuple[FusionKernelRuntime, CacheEvent]:
        input_key, ev, signature, resize_extents = self._input_key(args, opts)
        runtime = self._by_input_key.get(input_key)
        if runtime is not None:
            self._by_input_key.move_to_end(input_key)
            return runtime, CacheEvent(True, LEVELS[0], runtime.name)
        key_reasons = self._input_key_reasons(input_key)
        info = compute_info(self.initial_info, ev, resize_extents)
        runtime, event = self._by_concretization(info, signature, key_reasons, opts, args)
        self._remember(input_key, runtime)
        return runtime, event

    def _by_concretization(
        self,
        info: ConcretizationInfo,
        signature: InputSignature,
        key_reasons: list[str],
        opts: Options,
        args: list[Any],
    ) -> tuple[FusionKernelRuntime, CacheEvent]:
        entry = self._by_info.get(info)
        if entry is not None and entry.fusion is not self.fusion:
            check_mapped_sizes(entry.fusion, args)
        if entry is None:
            reasons = self._concretization_reasons(info)
            entry = self._new_entry(info, opts, args)
            runtime = self._new_runtime(entry, signature, args, opts)
            return runtime, CacheEvent(False, LEVELS[1], runtime.name, tuple(reasons))
        self._recent_infos.append(info)
        device = select_device(opts.device_model)
        backend = self._backend_for(opts)
        same_signature = [
            r
            for r in entry.runtimes
            if r.accepts(signature)
            and r.compiled.device == device
            and r.backend_name == backend.name
            and r.flags == CompileFlags.of(opts)
        ]
        refusals: list[str] = []
        for candidate in same_signature:
            refusal = candidate.refusal(args)
            if refusal is None:
                return candidate, CacheEvent(True, LEVELS[1], candidate.name, tuple(key_reasons))
            refusals.append(f"{candidate.name}: {refusal}")
        reasons = refusals[-1:] or ["no runtime for this input signature"]
        if entry.runtimes and not refusals:  # none when building the first one failed
            nearest = min(entry.runtimes[-REASON_CANDIDATES:], key=lambda r: len(signature.diff(r.signature)))
            # Same signature but other options, device or backend: the input key says which.
            reasons = signature.diff(nearest.signature) or key_reasons or reasons
        runtime = self._new_runtime(entry, signature, args, opts)
        return runtime, CacheEvent(False, LEVELS[2], runtime.name, tuple(reasons))

    def _remember(self, input_key: tuple[Any, ...], runtime: FusionKernelRuntime) -> None:
        self._by_input_key[input_key] = runtime
        while len(self._by_input_key) > INPUT_KEY_CAPACITY:
            self._by_input_key.popitem(last=False)

    def _input_key_reasons(self, key: tuple[Any, ...]) -> list[str]:
        """Why the input key missed, against the most similar of the recent keys."""
        recent = list(self._by_input_key)[-REASON_CANDIDATES:]
        if not recent:
            return []
        return min((_input_key_diff(key, old) for old in recent), key=len)

    def _concretization_reasons(self, info: ConcretizationInfo) -> list[str]:
        if not self._by_info:
            return ["first execution: nothing cached"]
        return min((info.diff(old) for old in self._recent_infos), key=len)

    def _new_entry(self, info: ConcretizationInfo, opts: Options, args: list[Any]) -> _ConcretizationEntry:
        dynamic = self.initial_info.is_dynamic or info.empty_extents
        concrete = concretize(self.fusion, info) if dynamic else self.fusion
        if concrete is not self.fusion:  # refused inputs leave no entry behind (a later call is a first)
            check_mapped_sizes(concrete, args)
        entry = _ConcretizationEntry(len(self._by_info) + 1, info, concrete)
        self._by_info[info] = entry
        self._recent_infos.append(info)
        emit_dump(opts, DumpOption.fusion_ir_original, lambda: "Fusion IR (original):\n" + print_math(self.fusion))
        emit_dump(
            opts,
            DumpOption.fusion_ir_concretized,
            lambda: info.describe() + "\nConcretized Fusion:\n" + print_kernel(concrete),
        )
        return entry

    def _new_runtime(
        self, entry: _ConcretizationEntry, signature: InputSignature, args: list[Any], opts: Options
    ) -> FusionKernelRuntime:
        device = select_device(opts.device_model)
        flags = CompileFlags.of(opts)
        compiled = compile_fusion(entry.fusion, args, device, signature.index_type, flags)
        backend = self._backend_for(opts)
        name = f"f{self.fusion_id}_c{entry.id}_r{len(entry.runtimes)}"
        executable = backend.compile(compiled.segmented, signature, name)
        if flags.kernel_choice:  # a group's candidates, compiled and timed in turn
            executable = with_kernel_choice(executable, name, signature.index_type)
        runtime = FusionKernelRuntime(
            self.fusion_id,
            entry.id,
            len(entry.runtimes),
            entry.info,
            entry.fusion,
            signature,
            compiled,
            executable,
            backend.name,
            flags,
        )
        entry.runtimes.append(runtime)
        emit_runtime_dumps(opts, runtime)
        return runtime


def _compile_events(runtime: FusionKernelRuntime) -> tuple[str, ...]:
    """What building this runtime compiled, kernel by kernel, and why a group got no
    kernel (the cuda backend's compile events; the reference compiles nothing)."""
    events = getattr(runtime.executable, "compile_events", None)
    return tuple(events()) if events is not None else ()


@contextlib.contextmanager
def _naming(runtime: FusionKernelRuntime) -> Iterator[None]:
    """A CudaFaultError raised inside names the runtime that ran (its kernels' CUDA)."""
    try:
        yield
    except CudaFaultError as err:
        if err.runtime is None:
            err.runtime = runtime
        raise


def _input_key_diff(new: tuple[Any, ...], old: tuple[Any, ...]) -> list[str]:
    signature, values, empties, resize_extents, sizes, device_model, backend, flags = new
    found = signature.diff(old[0])
    found += [
        f"{label} {before} -> {now}" for (label, now), (_, before) in zip(values, old[1], strict=False) if now != before
    ]
    if empties != old[2]:
        found.append("an input became empty or non-empty")
    if resize_extents != old[3]:
        found.append(f"concretize_resize_extents turned {'on' if resize_extents else 'off'}")
    found += [
        f"input {i} shape {list(before)} -> {list(now)}"
        for i, (now, before) in enumerate(zip(sizes, old[4], strict=False))
        if now != before
    ]
    if device_model != old[5]:
        found.append(f"device model {old[5] or 'of the GPU'} -> {device_model or 'of the GPU'}")
    if flags != old[7]:
        found += [
            f"{name} {'on' if now else 'off'}"
            for name, now, before in zip(
                (
                    "allocation-order inference",
                    "vectorization",
                    "segmentation",
                    "int64 indexing",
                    "kernel choice",
                    "shared-memory persistence",
                    "re-reading rows",
                    "cooperative grid reductions",
                ),
                dataclasses.astuple(flags),
                dataclasses.astuple(old[7]),
                strict=True,
            )
            if now != before
        ]
    if backend != old[6]:
        found.append(f"backend {old[6] or 'automatic'} -> {backend or 'automatic'}")
    return found


def _leaf_labels(fusion: Fusion) -> dict[int, str]:
    """How cache reasons name the values that matter: `scalar i11`, `T0 axis 2 (i3)`."""
    labels: dict[int, str] = {}
    for val in fusion.inputs:
        if isinstance(val, TensorView):
            for axis, dim in enumerate(val.logical_no_reductions()):
                extent = dim.maybe_expanded_extent
                labels.setdefault(id(extent), f"T{val.name} axis {axis} ({extent})")
        elif isinstance(val, Scalar):
            labels[id(val)] = f"scalar {val}"
    return labels


def _describe_args(fusion: Fusion, args: Sequence[Any]) -> tuple[str, ...]:
    lines = []
    for index, (val, arg) in enumerate(zip(fusion.inputs, args, strict=True)):
        if isinstance(arg, TensorArg):
            layout = f"shape {list(arg.shape)} strides {list(arg.strides)}"
            lines.append(f"{index}: T{val.name} {arg.dtype!r} {layout} ({arg.origin})")
        else:
            lines.append(f"{index}: {val} = {arg!r}")
    return tuple(lines)


def _estimates(runtime: FusionKernelRuntime, args: Sequence[Any]) -> tuple[RooflineEstimate, ...]:
    """Each group's roofline estimate at these inputs' sizes (none for a group whose sizes
    only its run computes)."""
    info = runtime.runtime_info(args)
    found = []
    for group in runtime.segmented.groups:
        try:
            found.append(estimate_group(group, info))
        except Exception:  # an extent only the run computes (a data-dependent size)
            continue
    return tuple(found)


def _with_estimates(
    launches: tuple[LaunchRecord, ...], estimates: tuple[RooflineEstimate, ...]
) -> tuple[LaunchRecord, ...]:
    """The launches with their kernel's roofline estimate beside the measurement."""
    by_group = {e.group_id: e for e in estimates}
    return tuple(
        dataclasses.replace(r, estimate=by_group[r.group_id].line(), estimate_seconds=by_group[r.group_id].seconds)
        if r.group_id in by_group
        else r
        for r in launches
    )
