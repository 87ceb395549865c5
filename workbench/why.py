""" "Why not fused?": the workbench's side of asking the segmenter about a run.

A question names groups as the legend does (`g0`), or an expression by the tensor it
writes as the IR tab prints it (`T7`: the group holding the expression that writes T7),
optionally of a kept run by its number as the TUI shows it (`2:g0`, run 2). The answer
is fuser_core's (MergeAnswer, SplitAnswer): every scheduler's verdict with its figures,
computed from the run's segmented fusion at the run's sizes, without changing the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fuser_core import FuserError, MergeAnswer, SplitAnswer, explain_merge, explain_split
from workbench.artifacts import Artifacts

_REF = re.compile(r"^(?:(\d+):)?([gGtT])(\d+)$")


@dataclass(frozen=True)
class Asker:
    """What a successful run keeps to answer questions: its segmented fusion and the
    sizes its schedulers saw (fuser_core's SegmentedFusion and RuntimeInfo)."""

    segmented: Any
    info: Any


def parse_ref(text: str) -> tuple[int | None, str]:
    """`g0`, `T7`, `2:g0` -> (run number or None, `g0`); a FuserError for anything else."""
    match = _REF.match(text.strip())
    if match is None:
        raise FuserError(
            f"not a group or tensor: {text!r}; name a group as the legend does (g0), a tensor an expression"
            " writes (T7), optionally of a run (2:g0)"
        )
    run, kind, number = match.groups()
    return (int(run) if run else None), f"{kind.lower() if kind in 'gG' else 'T'}{number}"


def group_of(name: str, a: Artifacts) -> int:
    """The id of group `g<N>`, or of the group whose expression writes tensor `T<N>`."""
    groups = ", ".join(f"g{g.id}" for g in a.groups)
    if name.startswith("g"):
        group = int(name[1:])
        if all(g.id != group for g in a.groups):
            raise FuserError(f"no group {name} in this run; its groups are {groups}")
        return group
    for expr in a.exprs:
        if name in expr.outputs and expr.group is not None:
            return expr.group
    raise FuserError(f"no expression of this run writes {name} (a fusion input is written by none); groups: {groups}")


def ask(asker: Asker, first: int, second: int | None) -> MergeAnswer | SplitAnswer:
    if second is None:
        return explain_split(asker.segmented, asker.info, first)
    return explain_merge(asker.segmented, asker.info, first, second)


def answer_text(answer: MergeAnswer | SplitAnswer) -> str:
    return "\n".join(answer.lines()) + "\n"
