"""The kernel choice at run time (Inductor's multi-kernel), behind the enable option
`kernel_choice`.

With the option on, a group whose best schedule depends on sizes has candidate
schedules (fuser_core.scheduler.candidates: persistent or not, grid split or not), each
scheduled when the runtime is built. On the cuda backend each candidate is lowered and
compiled separately (the heuristic's own keeps the group's kernel name, an alternative
`i` is named `..._g<G>_alt<i>`), and a ChoiceGroup takes the group's place among the
executable's steps: its runs launch the candidates in turn, each launch timed, until
every candidate has TRIALS timed launches; from then on it launches the fastest (the
least of each one's best time), and the cache-hit fast path replays that one. Each run
computes its outputs with one candidate, so nothing is launched twice and a trial run
is as correct as any other; only the trial runs synchronize (to read their time).

Every run's report carries a KernelChoice per group with candidates: which ran, each
one's best time so far, which was kept and by how much it beat the runner-up; or why no
choice was made (the reference backend times nothing and runs the heuristic's own; a
group codegen refuses runs on the host; a candidate codegen or NVRTC refuses is out of
the running, with the reason). The cache event of the run that timed a candidate or
made the choice says so in its line.

Timing goes through a TrialTimer, CUDA events by default; `use_trial_timer` swaps it,
so the choice can be tested without a GPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fuser_core.codegen.cuda import translation_unit
from fuser_core.codegen.lower import lower_group
from fuser_core.errors import FuserError
from fuser_core.runtime.artifacts import LaunchParams
from fuser_core.runtime.generated_group import GeneratedGroup
from fuser_core.runtime.group_lowering import index_dtype
from fuser_core.segmenter.printer import candidate_kernel_name
from fuser_core.segmenter.segmented_fusion import ScheduledCandidate, SegmentedFusion, SegmentedGroup

TRIALS = 3  # timed launches of each candidate before the fastest is kept


@dataclass(frozen=True)
class CandidateTiming:
    """One candidate kernel of a group, and what its timed launches gave."""

    kernel: str  # its kernel name
    label: str  # "persistent", "non-persistent", "grid split 4", "no grid split"
    scheduler: str
    seconds: float | None = None  # the best of its timed launches (None: not timed)
    launches: int = 0  # its timed launches so far
    refusal: str = ""  # why it is out of the running (codegen or NVRTC refused it)

    def name(self) -> str:
        return f"{self.kernel} ({self.label})"


@dataclass(frozen=True)
class KernelChoice:
    """The kernel choice of one group as one run left it."""

    group_id: int
    candidates: tuple[CandidateTiming, ...]  # the heuristic's own first
    state: str  # "timing", "kept" or "none" (no choice made: `note` says why)
    kept: int | None = None  # the candidate kept, once every one was timed
    ran: int | None = None  # the candidate this run launched (None: no kernel was launched)
    note: str = ""
    news: bool = False  # this run timed a candidate, made the choice, or found none could be made

    @property
    def speedup(self) -> float | None:
        """The runner-up's best time over the kept one's: how much the choice gained."""
        runner = self.runner_up
        if self.kept is None or runner is None:
            return None
        best, other = self.candidates[self.kept].seconds, self.candidates[runner].seconds
        return other / best if best and other else None

    @property
    def runner_up(self) -> int | None:
        timed = [i for i, c in enumerate(self.candidates) if c.seconds is not None and i != self.kept]
        return min(timed, key=lambda i: self.candidates[i].seconds or 0.0) if timed else None

    def line(self) -> str:
        """`g0 kept nvfuser_..._g0 (persistent) at 8.1 us, 1.52x faster than ..._alt1 (non-persistent) at 12.3 us`"""
        head = f"kernel choice g{self.group_id}"
        if self.state == "kept" and self.kept is not None:
            kept = self.candidates[self.kept]
            text = f"{head}: kept {kept.name()} at {_us(kept.seconds)}"
            runner, speedup = self.runner_up, self.speedup
            if runner is not None and speedup is not None:
                other = self.candidates[runner]
                text += f", {speedup:.2f}x faster than {other.name()} at {_us(other.seconds)}"
            return text
        if self.state == "timing" and self.ran is not None:
            ran = self.candidates[self.ran]
            launches = "launch" if ran.launches == 1 else "launches"
            return f"{head}: timing {ran.name()}: best {_us(ran.seconds)} of {ran.launches} {launches} ({self.note})"
        return f"{head}: no choice made: {self.note}"


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f} us"


# -- timing ----------------------------------------------------------------------------------


class TrialTimer(Protocol):
    def __call__(self, kernel: str, launch: Callable[[Any], Any], cupy: Any, events: Any) -> tuple[Any, float]:
        """Run `launch(events)` (it records events[0] and events[1] around the kernel
        launch) and return its result and the kernel's time in seconds. `events` is the
        kernel_profile pair when that option is on, else None."""
        ...


def cuda_event_timer(kernel: str, launch: Callable[[Any], Any], cupy: Any, events: Any) -> tuple[Any, float]:
    """Time one launch with CUDA events (synchronizes on the second)."""
    pair = events if events is not None else (cupy.cuda.Event(), cupy.cuda.Event())
    result = launch(pair)
    pair[1].synchronize()
    return result, cupy.cuda.get_elapsed_time(pair[0], pair[1]) * 1e-3


_timer: contextvars.ContextVar[TrialTimer] = contextvars.ContextVar("fuser_trial_timer", default=cuda_event_timer)


@contextlib.contextmanager
def use_trial_timer(timer: TrialTimer) -> Iterator[None]:
    """Time the kernel choice's trial launches with `timer` inside the block (tests)."""
    token = _timer.set(timer)
    try:
        yield
    finally:
        _timer.reset(token)


# -- the group with several kernels ------------------------------------------------------------


@dataclass
class _Entry:
    kernel: str
    label: str
    scheduler: str
    member: GeneratedGroup | None  # None: refused
    refusal: str = ""
    times: list[float] = field(default_factory=list)

    def summary(self) -> CandidateTiming:
        best = min(self.times) if self.times else None
        return CandidateTiming(self.kernel, self.label, self.scheduler, best, len(self.times), self.refusal)


class ChoiceGroup(GeneratedGroup):
    """A group's candidate kernels in the place of its one GeneratedGroup. Every attribute
    of a GeneratedGroup (its kernel, fusion, compiled forms, workspaces) is that of the
    candidate that runs: the one on trial, then the one kept."""

    def __init__(self, group_id: int, entries: list[_Entry], trials: int = TRIALS) -> None:
        # No GeneratedGroup.__init__: each candidate is a GeneratedGroup of its own.
        self.entries = entries
        self.group_id = group_id
        self.trials = trials
        self.current = 0
        self.kept: int | None = None
        self.runs = 0  # runs that launched through this group
        self.news = False

    def __getattr__(self, name: str) -> Any:
        if name in ("entries", "current"):  # not set yet: never delegate these
            raise AttributeError(name)
        return getattr(self.member, name)

    @property
    def member(self) -> GeneratedGroup:
        member = self.entries[self.current].member
        assert member is not None
        return member

    @property
    def members(self) -> list[GeneratedGroup]:
        """The candidates in the running (compiled), the heuristic's own first."""
        return [e.member for e in self.entries if e.member is not None]

    def compiled(self, vectorized: bool) -> Any:
        return self.member.compiled(vectorized)

    def run(
        self,
        tensors: dict[int, Any],
        scalars: dict[int, Any],
        leaves: dict[int, Any],
        cupy: Any,
        stream: Any,
        events: Any = None,
        log: Any = None,
    ) -> tuple[LaunchParams, bool]:
        self.news = False
        self.current = self._next()
        self.runs += 1
        member = self.member
        if not self.choosing:
            self.news = self.runs == 1  # no choice to make: said once, when the runtime is new
        if self.kept is not None or not self.choosing:
            return member.run(tensors, scalars, leaves, cupy, stream, events, log)

        def launch(pair: Any) -> tuple[LaunchParams, bool]:
            return member.run(tensors, scalars, leaves, cupy, stream, pair, log)

        result, seconds = _timer.get()(member.kernel.name, launch, cupy, events)
        self._observe(seconds)
        return result

    @property
    def choosing(self) -> bool:
        """Whether there is a choice to make: two or more candidates compiled."""
        return len(self.members) > 1

    @property
    def timing(self) -> bool:
        """Whether the choice is still being made (the fast path waits for it)."""
        return self.choosing and self.kept is None

    def _next(self) -> int:
        """The candidate this run launches: the one timed least so far, the heuristic's own
        first; once every one has its trials, the fastest, kept from then on. (The choice
        is made as the run after the last trial starts, so that a run's launch record and
        the fast path's plan made after it name the kernel that run launched.)"""
        if self.kept is not None:
            return self.kept
        running = [(i, e) for i, e in enumerate(self.entries) if e.member is not None]
        if len(running) > 1 and all(len(e.times) >= self.trials for _, e in running):
            self.kept = min(running, key=lambda p: (min(p[1].times), p[0]))[0]
            self.news = True
            return self.kept
        return min(running, key=lambda p: (len(p[1].times), p[0]))[0]

    def _observe(self, seconds: float) -> None:
        self.entries[self.current].times.append(seconds)
        self.news = True

    def record(self) -> KernelChoice:
        candidates = tuple(e.summary() for e in self.entries)
        ran = self.current if self.runs else None
        group = self.group_id
        if not self.choosing:
            refused = "; ".join(f"{e.kernel}: {e.refusal}" for e in self.entries if e.member is None)
            note = f"only the heuristic's own kernel compiled ({refused})"
            return KernelChoice(group, candidates, "none", None, ran, note, self.news)
        if self.kept is not None:
            return KernelChoice(group, candidates, "kept", self.kept, ran, "", self.news)
        done = sum(min(len(e.times), self.trials) for e in self.entries if e.member is not None)
        note = f"{done} of {self.trials * len(self.members)} trial launches"
        return KernelChoice(group, candidates, "timing", None, ran, note, self.news)


# -- building them ------------------------------------------------------------------------------


def with_kernel_choice(executable: Any, runtime_name: str, index_type: str) -> Any:
    """`executable` with a ChoiceGroup in the place of each generated group that has
    candidates (a backend that has no steps, the reference, is returned as it is)."""
    steps = getattr(executable, "steps", None)
    if not steps:
        return executable
    for position, step in enumerate(steps):
        if type(step) is GeneratedGroup and step.group.candidates:
            steps[position] = ChoiceGroup(step.group.id, _entries(step, runtime_name, index_type))
    return executable


def _entries(own: GeneratedGroup, runtime_name: str, index_type: str) -> list[_Entry]:
    group = own.group
    entries = []
    for position, candidate in enumerate(group.candidates):
        name = candidate_kernel_name(group, position, runtime_name)
        entry = _Entry(name, candidate.label, candidate.scheduler.value, own if position == 0 else None)
        if position > 0:
            entry.member, entry.refusal = _member(own, candidate, name, index_type)
        entries.append(entry)
    return entries


def _member(
    own: GeneratedGroup, candidate: ScheduledCandidate, name: str, index_type: str
) -> tuple[GeneratedGroup | None, str]:
    """The candidate lowered and compiled as a kernel of its own, or why it cannot be."""
    if candidate.fusion is None:
        return None, "it has no scheduled fusion"
    try:
        kernel = lower_group(candidate.fusion, name, index_dtype(index_type))
        translation_unit(kernel)  # a type or op with no CUDA form is refused here, not by NVRTC
        if _reads_leaves(kernel) and not _reads_leaves(own.kernel):
            return None, "it needs run-time values the group's own kernel does not"
        group = dataclasses.replace(
            own.group,
            scheduler=candidate.scheduler,
            params=candidate.params,
            fusion=candidate.fusion,
            record=candidate.record,
            candidates=(),
        )
        member = GeneratedGroup(group, kernel, own.device, index_type)
        member.compiled(kernel.vectorized)
    except FuserError as err:
        return None, str(err)
    return member, ""


def _reads_leaves(kernel: Any) -> bool:
    """Whether a kernel takes scalars the run computes (extents, a Philox state)."""
    return any(s.leaf is not None for s in kernel.scalars)


# -- what a run reports -----------------------------------------------------------------------


def choice_records(
    segmented: SegmentedFusion, executable: Any, backend: str, runtime_name: str, built: bool
) -> tuple[KernelChoice, ...]:
    """The kernel choice of every group with candidates after a run; `built`: this run
    built the runtime (a choice that cannot be made is news then)."""
    steps = {step.group.id: step for step in getattr(executable, "steps", ())}
    found = []
    for group in segmented.groups:
        if not group.candidates:
            continue
        step = steps.get(group.id)
        if isinstance(step, ChoiceGroup):
            found.append(step.record())
            continue
        found.append(_unchosen(group, runtime_name, backend, built))
    return tuple(found)


def _unchosen(group: SegmentedGroup, runtime_name: str, backend: str, built: bool) -> KernelChoice:
    """A group whose candidates are not timed: on the reference backend, or on the host."""
    candidates = tuple(
        CandidateTiming(candidate_kernel_name(group, i, runtime_name), c.label, c.scheduler.value)
        for i, c in enumerate(group.candidates)
    )
    if backend != "cuda":
        why = f"the {backend} backend times nothing, so the heuristic's own {candidates[0].name()} stands"
    else:
        why = "codegen made no kernel for this group, so it runs on the host"
    return KernelChoice(group.id, candidates, "none", None, None, why, built)


def settled(choices: Sequence[KernelChoice]) -> tuple[KernelChoice, ...]:
    """The same choices as a later run that changes nothing would report them."""
    return tuple(dataclasses.replace(c, news=False) for c in choices)
