"""Rename-insensitive diffs of every stage between two runs.

nvFuser's names (T7, iS24, i17, the runtime's f0_c1_r0, expression numbers) are
counters: one op more at the top of a fusion renumbers everything after it, and a
plain text diff of two dumps is all noise (Fuser#3311, #778). Here each line is
reduced to its skeleton, the line with every name replaced by its kind; the two
texts' skeletons are aligned, and the names on aligned lines are matched by where
they stand (the tensor a `= sin(...)` line defines, the IterDomains of its loop
domain, the scalars of its extents), so a name is matched by the expression that
produces it and its inputs. The old text is renamed into the new run's names and
diffed line by line: a pure renumbering shows no change, and a real change shows as
a unified diff in the new run's names.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.artifacts import Artifacts, Stage, stages

# Each kind of name: the pattern, and the group holding the part that is a counter.
_SCHEDULERS = "no_op|expr_eval|transpose|pointwise|reduction|inner_outer_persistent|inner_persistent|outer_persistent"
_PARALLEL = r"S|blockIdx\.[xyz]|threadIdx\.[xyz]|deviceIdx\.[xyz]|streamIdx|V|UR|US|MMA|G|B"
NAME_PATTERN = re.compile(
    r"(?P<runtime>(?<![A-Za-z0-9.])f\d+_c\d+_r\d+(?!\d))"
    rf"|(?P<id>(?<![\w.])[irbsnv?](?:{_PARALLEL})\d+(?=\{{))"
    r"|(?P<tensor>(?<![\w.])T\d+(?![\w.]))"
    r"|(?P<tensor_sfx>(?<![\w.])T\d+(?=_[lgst]\b|_[lgst]\[|_sym\b))"
    r"|(?P<scalar>(?<![\w.])[idfbc]\d+(?![\w.]))"
    r"|(?P<expr>^\(\d+\)$)"
    rf"|(?P<label>\b(?:{_SCHEDULERS})\{{[\d, ]+\}})",
    re.MULTILINE,
)


def _kind(match: re.Match[str]) -> str:
    kind = match.lastgroup or "?"
    return "tensor" if kind == "tensor_sfx" else kind


def _id_key(name: str) -> str:
    """IterDomains share one counter whatever their type: iS5 and iblockIdx.x5 are one."""
    return re.sub(r"^\D*?(\d+)$", r"\1", name.split("}")[0])


def tokens(line: str) -> list[tuple[str, str]]:
    return [(_kind(m), m.group(0)) for m in NAME_PATTERN.finditer(line)]


def skeleton(line: str) -> str:
    return NAME_PATTERN.sub(lambda m: f"<{_kind(m)}>" if _kind(m) != "id" else _id_skeleton(m.group(0)), line)


def _id_skeleton(name: str) -> str:
    return re.sub(r"\d+$", "#", name)


def _mapping(old: list[str], new: list[str]) -> dict[tuple[str, str], str]:
    """Old name -> new name, voted by the names standing at the same place in lines
    whose skeletons align."""
    old_skel = [skeleton(line) for line in old]
    new_skel = [skeleton(line) for line in new]
    votes: Counter[tuple[tuple[str, str], str]] = Counter()
    matcher = difflib.SequenceMatcher(None, old_skel, new_skel, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            weight = 2 if tag == "equal" else 1
            for a, b in zip(old[i1:i2], new[j1:j2], strict=True):
                _vote(votes, tokens(a), tokens(b), weight)
    mapping: dict[tuple[str, str], str] = {}
    taken: set[tuple[str, str]] = set()
    for ((kind, before), after), _count in sorted(votes.items(), key=lambda item: -item[1]):
        key = (kind, _key(kind, before))
        target = (kind, _key(kind, after))
        if key not in mapping and target not in taken:
            mapping[key] = after
            taken.add(target)
    return mapping


def _key(kind: str, name: str) -> str:
    return _id_key(name) if kind == "id" else name


def _vote(votes: Counter, a: list[tuple[str, str]], b: list[tuple[str, str]], weight: int) -> None:  # type: ignore[type-arg]
    if [k for k, _ in a] != [k for k, _ in b]:
        return
    for (kind, before), (_, after) in zip(a, b, strict=True):
        votes[((kind, before), after)] += weight


def rename(text: str, mapping: dict[tuple[str, str], str]) -> str:
    def replace(match: re.Match[str]) -> str:
        kind, name = _kind(match), match.group(0)
        after = mapping.get((kind, _key(kind, name)))
        if after is None:
            return name
        if kind == "id":  # keep this occurrence's own iter and parallel type
            return re.sub(r"\d+$", _id_key(after), name)
        return after

    return NAME_PATTERN.sub(replace, text)


@dataclass(frozen=True)
class TextDiff:
    unified: str  # empty when the texts differ only by names
    changed_lines: int

    @property
    def same(self) -> bool:
        return self.changed_lines == 0


def diff_texts(
    old: str,
    new: str,
    old_label: str = "a",
    new_label: str = "b",
    context: int = 2,
    keep: frozenset[str] = frozenset(),
) -> TextDiff:
    """`old` renamed into `new`'s names (but for names of the kinds in `keep`), then
    diffed line by line."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    mapping = {key: name for key, name in _mapping(old_lines, new_lines).items() if key[0] not in keep}
    renamed = rename(old, mapping).splitlines()
    matcher = difflib.SequenceMatcher(None, renamed, new_lines, autojunk=False)
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")
    if not changed:
        return TextDiff("", 0)
    lines = difflib.unified_diff(renamed, new_lines, old_label, new_label, n=context, lineterm="")
    return TextDiff("\n".join(lines) + "\n", changed)


# -- two runs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageDiff:
    label: str
    key: str
    status: str  # "same", "changed", "added", "removed"
    diff: TextDiff | None = None

    def summary(self) -> str:
        if self.status == "changed" and self.diff is not None:
            count = self.diff.changed_lines
            return f"{self.label}: {count} line{'s' if count != 1 else ''} changed"
        if self.status in ("added", "removed"):
            return f"{self.label}: only in {'b' if self.status == 'added' else 'a'}"
        return f"{self.label}: same"


@dataclass(frozen=True)
class RunDiff:
    stages: tuple[StageDiff, ...]
    timing: tuple[str, ...]  # one line per kernel, or the wall time where nothing launched

    @property
    def changed(self) -> list[StageDiff]:
        return [s for s in self.stages if s.status != "same"]

    def summary_lines(self) -> list[str]:
        return [s.summary() for s in self.stages] + list(self.timing)


def diff_artifacts(a: Artifacts, b: Artifacts) -> RunDiff:
    old = {s.label: s for s in stages(a)}
    new = {s.label: s for s in stages(b)}
    found = [_stage_diff(old.get(label), new.get(label)) for label in _labels(old, new)]
    return RunDiff(tuple(found), timing_lines(a, b))


def _labels(old: dict[str, Stage], new: dict[str, Stage]) -> list[str]:
    labels = list(new)
    labels += [label for label in old if label not in new]
    return labels


# The cache stage says which runtime each run hit or built, as the Log does: there a
# runtime's name is the fact itself, not a counter to match. (Renamed, run 1's
# `new runtime f0_c1_r0` read f0_c1_r1, the runtime run 2 built.)
_KEEP_NAMES = {"cache_events": frozenset({"runtime"})}


def _stage_diff(old: Stage | None, new: Stage | None) -> StageDiff:
    if old is None:
        assert new is not None
        return StageDiff(new.label, new.key, "added", diff_texts("", new.text))
    if new is None:
        return StageDiff(old.label, old.key, "removed", diff_texts(old.text, ""))
    found = diff_texts(old.text, new.text, keep=_KEEP_NAMES.get(new.key, frozenset()))
    return StageDiff(new.label, new.key, "same" if found.same else "changed", found)


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "untimed"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def timing_lines(a: Artifacts, b: Artifacts) -> tuple[str, ...]:
    before = {r.group_id: r.seconds for r in a.launches}
    after = {r.group_id: r.seconds for r in b.launches}
    if not before and not after:
        wall = f"{format_seconds(a.wall_seconds)} -> {format_seconds(b.wall_seconds)}"
        return (f"time: {b.launches_note}; wall time of the run {wall}",)
    lines = []
    for group in sorted(set(before) | set(after)):
        old = format_seconds(before[group]) if group in before else "not launched"
        new = format_seconds(after[group]) if group in after else "not launched"
        lines.append(f"time g{group}: {old} -> {new}")
    return tuple(lines)


def names_in(text: str) -> list[str]:
    return [name for _, name in tokens(text)]


def same_up_to_names(old: str, new: str) -> bool:
    return diff_texts(old, new).same


def changed_labels(run_diff: RunDiff) -> Sequence[str]:
    return [s.label for s in run_diff.changed]
