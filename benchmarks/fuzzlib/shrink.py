"""Shrinking a failing program, and the repro script written for it.

`shrink` tries smaller programs that still fail the same way, cheapest first: one output
instead of several (the earliest value whose own computation fails), ops bypassed (an op
whose result has the shape of an operand replaced by that operand), unused inputs
dropped, then smaller input sizes; each candidate must pass `program.infer` before it is
run. `write_repro` writes `fd.repro_script_for(inputs)` under the failure message, and
the program as JSON for `fuzz_gpu.py --replay`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .build import build, make_inputs
from .program import (
    Extent,
    Op,
    Output,
    Program,
    Ref,
    Size,
    TensorIn,
    infer,
    to_json,
    without_dead_ops,
    without_unused_inputs,
)


def _valid(program: Program) -> bool:
    try:
        infer(program)
    except Exception:
        return False
    return True


def _with_outputs(program: Program, outputs: list[Output]) -> Program:
    smaller = Program(program.seed, program.index, list(program.inputs), list(program.ops), outputs)
    smaller = without_dead_ops(smaller)
    return smaller


def _resized(program: Program, old: int, new: int) -> Program:
    """Every input axis of size `old`, and every size constant equal to it, made `new`."""

    def swap(item: Any) -> Any:
        if isinstance(item, bool):
            return item
        if isinstance(item, int):
            return new if item == old else item
        if isinstance(item, list | tuple):
            return type(item)(swap(x) for x in item)
        return item

    inputs: list[Any] = []
    for inp in program.inputs:
        if isinstance(inp, TensorIn):
            inp = TensorIn(
                inp.vid, tuple(swap(list(inp.shape))), inp.dtype, inp.static, inp.order, inp.expanded, inp.gap
            )
        inputs.append(inp)
    ops = []
    for op in program.ops:
        kwargs = {
            k: swap(v) if k in ("shape", "new_shape", "end_indices", "length") else v for k, v in op.kwargs.items()
        }
        ops.append(type(op)(op.name, op.args, kwargs, op.outs, op.tag))
    return Program(program.seed, program.index, inputs, ops, list(program.outputs))


def _substitute(item: Any, old: int, new: int) -> Any:
    if isinstance(item, Ref) and item.vid == old:
        return Ref(new)
    if isinstance(item, Size) and item.vid == old:
        return Size(new, item.axis)
    if isinstance(item, Extent):
        return Extent(tuple(_substitute(p, old, new) for p in item.parts))
    if isinstance(item, list | tuple):
        return type(item)(_substitute(x, old, new) for x in item)
    if isinstance(item, dict):
        return {k: _substitute(v, old, new) for k, v in item.items()}
    return item


def _bypassed(program: Program, position: int, operand: int) -> Program:
    """The program with op `position` removed and its result replaced by its operand."""
    op = program.ops[position]
    old = op.outs[0]
    ops = list(program.ops[:position])
    for later in program.ops[position + 1 :]:
        ops.append(Op(later.name, _substitute(later.args, old, operand), _substitute(later.kwargs, old, operand),
                      later.outs, later.tag))  # fmt: skip
    outputs = []
    for out in program.outputs:
        vid = operand if out.vid == old else out.vid
        if all(o.vid != vid for o in outputs):
            outputs.append(Output(vid, out.stride_order if vid == out.vid else None))
    return without_dead_ops(Program(program.seed, program.index, list(program.inputs), ops, outputs))


def _bypasses(program: Program) -> list[Program]:
    """Each single-result op whose output has the shape of one of its tensor operands,
    bypassed (the last ops first)."""
    metas = infer(program)
    found = []
    for position in reversed(range(len(program.ops))):
        op = program.ops[position]
        if len(op.outs) != 1:
            continue
        operands = [a.vid for a in _refs(op.args) if a.vid in metas and metas[a.vid] == metas[op.outs[0]]]
        for vid in dict.fromkeys(operands):
            found.append(_bypassed(program, position, vid))
    return found


def _refs(items: Any) -> list[Ref]:
    out: list[Ref] = []
    for x in items:
        if isinstance(x, Ref):
            out.append(x)
        elif isinstance(x, list | tuple):
            out += _refs(x)
    return out


def shrink(program: Program, fails: Callable[[Program], bool], seconds: float = 60.0, tries: int = 60) -> Program:
    """A smaller program that still `fails`: fewer outputs, the shortest prefix of the op
    list one value of it needs, ops bypassed, unused inputs dropped, then smaller input
    sizes; within a time and try budget."""
    deadline = time.monotonic() + seconds
    budget = [tries]

    def attempt(candidate: Program) -> bool:
        if budget[0] <= 0 or time.monotonic() > deadline or not _valid(candidate):
            return False
        budget[0] -= 1
        try:
            return fails(candidate)
        except Exception:
            return False

    best = program
    computed = [v for op in program.ops for v in op.outs if program.dtypes.get(v) not in (None, "Index")]
    for vid in computed:  # the earliest value whose own computation fails
        if len(best.outputs) == 1 and best.outputs[0].vid == vid:
            break
        candidate = _with_outputs(best, [Output(vid)])
        if len(candidate.ops) < len(best.ops) and attempt(candidate):
            best = candidate
            break
    if len(best.outputs) > 1:
        for out in best.outputs:
            candidate = _with_outputs(best, [out])
            if attempt(candidate):
                best = candidate
                break
    while len(best.outputs) > 2:  # three or more, none failing alone: drop one at a time
        for out in best.outputs:
            candidate = _with_outputs(best, [o for o in best.outputs if o is not out])
            if attempt(candidate):
                best = candidate
                break
        else:
            break
    progress = True
    while progress and budget[0] > 0:
        progress = False
        for candidate in _bypasses(best):
            if attempt(candidate):
                best, progress = candidate, True
                break
    candidate = without_unused_inputs(best)
    if len(candidate.inputs) < len(best.inputs) and attempt(candidate):
        best = candidate
    sizes = sorted({s for i in best.tensor_inputs() for s in i.shape if s > 3}, reverse=True)
    for size in sizes:
        for new in sorted({size // 2, 16, 5, 3, 2}, reverse=True):
            if new < size and new > 1:
                candidate = _resized(best, size, new)
                if attempt(candidate):
                    best = candidate
                    break
    best.dtypes = dict(program.dtypes)
    return best


# -- repro scripts ---------------------------------------------------------------------------------


def repro_text(program: Program, status: str, message: str, original_ops: int, mode: str, json_name: str) -> str:
    fd = build(program)
    inputs = [h.view() for h in make_inputs(program)]
    try:
        script = fd.repro_script_for(inputs)
    except Exception as err:  # the definition alone, if the inputs cannot be written
        script = fd.repro_script_for() + f"\n# (inputs not written: {err})\n"
    flag = " --cpu" if mode == "cpu" else ""
    header = [
        f"# fuser_core fuzz failure: {status} ({mode} mode), seed {program.seed}, case {program.index}",
        f"# ops: {len(program.ops)} (shrunk from {original_ops}): {' '.join(program.op_names())}",
        f"# replay with the fuzzer's own data: PYTHONPATH=. python benchmarks/fuzz_gpu.py --replay {json_name}{flag}",
        "#",
        *("# " + line for line in message.splitlines()[:40]),
        "",
    ]
    return "\n".join(header) + script


def write_repro(out_dir: Path, program: Program, status: str, message: str, original_ops: int, mode: str) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{status}_s{program.seed}_c{program.index}"
    (out_dir / f"{stem}.json").write_text(to_json(program))
    (out_dir / f"{stem}.py").write_text(
        repro_text(program, status, message, original_ops, mode, str(out_dir / f"{stem}.json"))
    )
    return f"{stem}.py"
