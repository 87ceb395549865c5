"""A seeded differential fuzzer of fuser_core.

    PYTHONPATH=. python benchmarks/fuzz_gpu.py --count 5000 --seed 0 --out DIR
    PYTHONPATH=. python benchmarks/fuzz_gpu.py --cpu --count 500 --seed 0 --out DIR
    PYTHONPATH=. python benchmarks/fuzz_gpu.py --replay DIR/mismatch_s0_c12.json [--cpu]
    PYTHONPATH=. python benchmarks/fuzz_gpu.py --replay 0:12 [--cpu]     # seed:case

Each case is a random fusion of up to --max-ops ops (pointwise math in every dtype, casts,
broadcasts, views, slices, pads, cats, reductions, variance and Welford, softmax and
layer/RMS norm patterns, factories, random ops) on inputs of up to --max-elems elements,
in contiguous, permuted, gapped or stride-0 layouts, with symbolic and static sizes.

- GPU mode (the default): the fusion runs with `use_options(backend="cuda")` on torch
  CUDA tensors and each output is compared with torch eager evaluating the same op list
  (fuzzlib/torch_ref.py: exact for integers and bools, float tolerances by dtype, looser
  after a reduction, and as loose as a float64 evaluation says an element is
  ill-conditioned). Fusions with random ops are compared with the reference backend.
- CPU mode (--cpu, no GPU or torch needed): the fusion runs on the reference backend and
  each generated kernel on the kernel-IR interpreter against it, after NVRTC compiled it
  for sm_90 where NVRTC is installed.

Failures are classified (compile, fault, mismatch, internal, timeout; a FuserError is a
refusal, not a failure). Cases run in child processes, a chunk each, so a CUDA fault
(which poisons the process's CUDA context) costs only that case: the child records it
and exits, and a fresh child goes on from the next case; a case that hangs past
--case-timeout is killed. Each failure is shrunk (fewer outputs, fewer ops, smaller
sizes, while it still fails the same way) and written to DIR as a repro script
(`fd.repro_script_for(inputs)` under the failure message) beside the program as JSON.
DIR/fuzz_report.md summarizes the run: outcomes, failures by class and cause, groups run
on the host, refusals, op coverage. --exclude leaves out constructs of known bugs.

Case i of seed s is the same program and data on every machine, for the same
--max-elems, --max-ops and --exclude (--cpu defaults to smaller tensors).
The generator, the torch rules and the runners live in benchmarks/fuzzlib/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (str(ROOT), str(ROOT / "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

from fuzzlib.build import build, make_inputs  # noqa: E402
from fuzzlib.cases import FAILURES, CpuRunner, CudaRunner, describe, is_cuda_fault  # noqa: E402
from fuzzlib.generator import EXCLUDABLE, generate  # noqa: E402
from fuzzlib.program import Extent, Program, Ref, ScalarIn, Size, from_json  # noqa: E402
from fuzzlib.report import render, signature  # noqa: E402
from fuzzlib.shrink import shrink, write_repro  # noqa: E402

CPU_MAX_ELEMS = 4096  # the interpreter runs every thread in NumPy: small tensors
GPU_MAX_ELEMS = 100_000


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=1000, help="fusions to run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first", type=int, default=0, help="the first case index")
    p.add_argument("--out", type=Path, default=Path("fuzz_out"))
    p.add_argument("--cpu", action="store_true", help="the kernel-IR interpreter against the reference (no GPU)")
    p.add_argument("--torch-check", action="store_true", help="--cpu: also compare the reference with torch on the CPU")
    p.add_argument(
        "--dry-run", action="store_true", help="the GPU mode's path on torch CPU tensors and the reference backend"
    )
    p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="child processes (0: in this one)")
    p.add_argument("--chunk", type=int, default=0, help="cases per child process (default: count / jobs / 4)")
    p.add_argument("--max-elems", type=int, default=0, help="largest tensor (default 1e5 GPU, 4096 --cpu)")
    p.add_argument("--max-ops", type=int, default=12)
    p.add_argument(
        "--exclude",
        default="",
        help="comma-separated constructs not to generate, to fuzz around known bugs: " + ", ".join(sorted(EXCLUDABLE)),
    )
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--shrink-seconds", type=float, default=20.0, help="time to shrink one failure")
    p.add_argument("--shrink-per-cause", type=int, default=3, help="failures shrunk per class and message")
    p.add_argument("--case-timeout", type=float, default=180.0, help="seconds before a case is killed")
    p.add_argument("--max-seconds", type=float, default=0, help="stop starting cases after this long (0: never)")
    p.add_argument("--replay", nargs="+", help="program JSONs written beside repros (or folders of them), SEED:CASE")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # START:STOP, run by the parent
    p.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.exclude = sorted({x.strip() for x in args.exclude.split(",") if x.strip()})
    unknown = set(args.exclude) - set(EXCLUDABLE)
    if unknown:
        p.error(f"--exclude: unknown {sorted(unknown)}; choose from {sorted(EXCLUDABLE)}")
    if not args.max_elems:
        args.max_elems = CPU_MAX_ELEMS if args.cpu else GPU_MAX_ELEMS
    return args


def make_runner(args: argparse.Namespace) -> Any:
    if args.cpu:
        return CpuRunner(torch_check=args.torch_check)
    return CudaRunner(device="cpu", backend="reference") if args.dry_run else CudaRunner()


# -- one case --------------------------------------------------------------------------------


def features(program: Program) -> list[str]:
    found = set()
    for op in program.ops:
        items = list(op.args) + list(op.kwargs.values())
        flat = _flatten(items)
        if any(isinstance(x, Size | Extent) for x in flat):
            found.add("symbolic size (fd.ops.size) in an op")
        if any(isinstance(x, Ref) and isinstance(_input(program, x.vid), ScalarIn) for x in flat):
            found.add("scalar input used")
        if op.tag == "alias":
            found.add("output is a view of an input")
    for inp in program.tensor_inputs():
        if any(inp.static):
            found.add("static input sizes")
        if 1 in inp.shape:
            found.add("broadcast (size-1) input axis")
    if any(o.stride_order for o in program.outputs):
        found.add("output stride_order")
    if any(o.vid in {i.vid for i in program.inputs} for o in program.outputs):
        found.add("input given as output")
    return sorted(found)


def _flatten(items: Any) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if isinstance(x, list | tuple):
            out += _flatten(x)
        elif isinstance(x, Extent):
            out += [x, *_flatten(x.parts)]
        else:
            out.append(x)
    return out


def _input(program: Program, vid: int) -> Any:
    return next((i for i in program.inputs if i.vid == vid), None)


def record(program: Program | None, index: int, status: str, message: str, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"index": index, "status": status, "message": message[:4000], "ops": [], "tags": []}
    if program is not None:
        rec.update(
            ops=program.op_names(),
            tags=sorted({op.tag for op in program.ops if op.tag}),
            layouts=[i.layout() for i in program.tensor_inputs()],
            dtypes=[i.dtype for i in program.tensor_inputs()],
            outputs=len(program.outputs),
            features=features(program),
        )
    rec.update(extra)
    return rec


def run_case(runner: Any, args: argparse.Namespace, index: int) -> dict[str, Any]:
    start = time.monotonic()
    try:
        program = generate(args.seed, index, args.max_elems, args.max_ops, args.exclude)
    except Exception as err:
        return record(None, index, "harness", "generator: " + describe(err))
    try:
        outcome = runner.run(program)
    except Exception as err:  # outside the compile and run: inputs, building
        runner.poisoned = is_cuda_fault(err)
        return record(program, index, "fault" if runner.poisoned else "harness", describe(err))
    rec = record(program, index, outcome.status, outcome.message, host_groups=outcome.host_groups,
                 kernels=outcome.kernels, note=outcome.note)  # fmt: skip
    if outcome.status in FAILURES:
        smallest, message = program, outcome.message
        kind = (outcome.status, signature(message))
        SHRUNK[kind] = SHRUNK.get(kind, 0) + 1
        if not args.no_shrink and not runner.poisoned and SHRUNK[kind] <= args.shrink_per_cause:
            smallest, message = shrink_failure(runner, program, outcome.status, message, args.shrink_seconds)
        rec["repro"] = write_repro(args.out, smallest, outcome.status, message, len(program.ops), runner.mode)
        rec["shrunk_ops"] = smallest.op_names()
    rec["seconds"] = round(time.monotonic() - start, 3)
    return rec


# Failures shrunk so far in this process, by (class, message signature): a cause met again
# and again is shrunk only --shrink-per-cause times, the rest keep their whole program.
SHRUNK: dict[tuple[str, str], int] = {}


def shrink_failure(runner: Any, program: Program, status: str, message: str, seconds: float) -> tuple[Program, str]:
    """The smallest program that still fails as `status`, and its message (the program
    itself when nothing smaller fails, or when a shrink candidate faulted the GPU)."""

    def fails(candidate: Program) -> bool:
        return not runner.poisoned and runner.run(candidate).status == status

    smallest = shrink(program, fails, seconds=seconds)
    if smallest is program or runner.poisoned:
        return program, message
    final = runner.run(smallest) if not runner.poisoned else None
    if final is None or final.status != status:
        return program, message
    return smallest, final.message


# -- the child process -------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    first, stop = (int(x) for x in args.worker.split(":"))
    with open(args.progress, "a") as log:

        def emit(item: dict[str, Any]) -> None:
            log.write(json.dumps(item) + "\n")
            log.flush()

        runner = make_runner(args)
        emit({"event": "hello", "device": runner.device_name})
        for index in range(first, stop):
            emit({"event": "start", "index": index})
            rec = run_case(runner, args, index)
            emit({"event": "done", **rec})
            if runner.poisoned:
                return 3  # the CUDA context is gone: the parent starts a fresh child
    return 0


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    first: int
    stop: int
    progress: Path
    offset: int = 0
    current: int | None = None
    since: float = 0.0
    done: set[int] = field(default_factory=set)


class Parent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.results: dict[int, dict[str, Any]] = {}
        self.device = ""
        self.work = args.out / "progress"
        self.work.mkdir(parents=True, exist_ok=True)
        self.launches = 0

    def spawn(self, first: int, stop: int) -> Child:
        a = self.args
        self.launches += 1
        progress = self.work / f"child{self.launches}_{first}-{stop}.jsonl"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{first}:{stop}", "--progress",
                   str(progress), "--seed", str(a.seed), "--out", str(a.out), "--max-elems", str(a.max_elems),
                   "--max-ops", str(a.max_ops)]  # fmt: skip
        command += ["--exclude", ",".join(a.exclude)] * bool(a.exclude)
        command += ["--cpu"] * a.cpu + ["--torch-check"] * a.torch_check + ["--no-shrink"] * a.no_shrink
        command += ["--dry-run"] * a.dry_run
        command += ["--shrink-seconds", str(a.shrink_seconds), "--shrink-per-cause", str(a.shrink_per_cause)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        env.setdefault("FUSER_KERNEL_CACHE", "off")  # every fuzzed kernel is new: no disk cache to fill
        env.setdefault("PYTHONWARNINGS", "ignore")
        log = open(self.work / f"child{self.launches}.log", "wb")  # noqa: SIM115 (the child owns it)
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        log.close()
        return Child(proc, first, stop, progress)

    def read(self, child: Child) -> None:
        if not child.progress.exists():
            return
        with open(child.progress) as f:
            f.seek(child.offset)
            for line in f:
                if not line.endswith("\n"):
                    break
                child.offset += len(line.encode())
                item = json.loads(line)
                if item["event"] == "hello":
                    self.device = self.device or item["device"]
                elif item["event"] == "start":
                    child.current, child.since = item["index"], time.monotonic()
                else:
                    item.pop("event")
                    self.results[item["index"]] = item
                    child.done.add(item["index"])
                    child.current = None

    def lost(self, child: Child, status: str, message: str) -> None:
        """The case a child was in when it died or was killed: recorded with a repro."""
        index = child.current
        if index is None:
            return
        program = None
        try:
            program = generate(self.args.seed, index, self.args.max_elems, self.args.max_ops, self.args.exclude)
            repro = write_repro(
                self.args.out, program, status, message, len(program.ops), "cpu" if self.args.cpu else "cuda"
            )
        except Exception as err:
            repro, message = "", f"{message}; repro not written: {err}"
        self.results[index] = record(program, index, status, message, repro=repro)
        child.done.add(index)
        child.current = None

    def stop(self, running: list[Child]) -> None:
        _stop_children(self, running)
        print(f"  --max-seconds {self.args.max_seconds:.0f} reached: stopped", flush=True)

    def run(self) -> None:
        a = self.args
        chunk = a.chunk or max(5, min(250, a.count // max(a.jobs * 4, 1)))
        queue = deque((s, min(s + chunk, a.first + a.count)) for s in range(a.first, a.first + a.count, chunk))
        running: list[Child] = []
        started = last_print = time.monotonic()
        while queue or running:
            if a.max_seconds and time.monotonic() - started > a.max_seconds:
                self.stop(running)
                break
            while queue and len(running) < a.jobs:
                running.append(self.spawn(*queue.popleft()))
            time.sleep(0.2)
            for child in list(running):
                self.read(child)
                rc = child.proc.poll()
                if rc is None and child.current is not None and time.monotonic() - child.since > a.case_timeout:
                    child.proc.kill()
                    child.proc.wait()
                    self.read(child)
                    self.lost(child, "timeout", f"case ran past {a.case_timeout:.0f} s and was killed")
                    rc = -9
                if rc is None:
                    continue
                self.read(child)
                if child.current is not None:
                    self.lost(child, "fault", f"the child process died (exit status {rc}) in this case")
                running.remove(child)
                rest = [i for i in range(child.first, child.stop) if i not in child.done]
                if rest:
                    queue.appendleft((rest[0], child.stop))
            if time.monotonic() - last_print > 10:
                last_print = time.monotonic()
                bad = sum(1 for r in self.results.values() if r["status"] in FAILURES)
                print(f"  {len(self.results)}/{a.count} cases, {bad} failures", flush=True)


def _stop_children(parent: Parent, running: list[Child]) -> None:
    """Out of time: the children are killed and the cases they were in left unrun."""
    for child in running:
        child.proc.kill()
        child.proc.wait()
        parent.read(child)


def run_inline(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    """Every case in this process (--jobs 0, and the tests)."""
    runner = make_runner(args)
    results = []
    start = time.monotonic()
    for index in range(args.first, args.first + args.count):
        if args.max_seconds and time.monotonic() - start > args.max_seconds:
            break
        results.append(run_case(runner, args, index))
        if runner.poisoned:
            runner = make_runner(args)
    return results, runner.device_name


def fuzz(args: argparse.Namespace, argv: list[str] | None) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if args.jobs == 0:
        results, device = run_inline(args)
    else:
        parent = Parent(args)
        parent.run()
        results, device = [parent.results[i] for i in sorted(parent.results)], parent.device
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "device": device or "unknown",
        "mode": "cpu" if args.cpu else "cuda",
        "seed": args.seed,
        "first": args.first,
        "count": args.count,
        "jobs": args.jobs,
        "exclude": args.exclude,
        "wall": time.monotonic() - start,
        "command": "python benchmarks/fuzz_gpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    text = render(results, meta)
    (args.out / "fuzz_report.md").write_text(text)
    (args.out / "fuzz_results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    print(text)
    return 1 if any(r["status"] in FAILURES for r in results) else 0


def replay(args: argparse.Namespace) -> int:
    """Each program named (JSON files beside repros, folders of them, or SEED:CASE), run
    once and its outcome printed; after a CUDA fault the rest go on in a fresh process."""
    items = []
    for item in args.replay:
        path = Path(item)
        items += sorted(str(p) for p in path.glob("*.json")) if path.is_dir() else [item]
    runner = make_runner(args)
    failed = False
    for k, item in enumerate(items):
        if Path(item).is_file():
            program = from_json(Path(item).read_text())
        else:
            seed, index = (int(x) for x in item.split(":"))
            program = generate(seed, index, args.max_elems, args.max_ops, args.exclude)
        if len(items) == 1:
            print(build(program).repro_script_for([h.view() for h in make_inputs(program)]))
        try:
            outcome = runner.run(program)
            status, message, host = outcome.status, outcome.message, outcome.host_groups
        except Exception as err:
            runner.poisoned = is_cuda_fault(err)
            status, message, host = ("fault" if runner.poisoned else "harness"), describe(err), []
        failed |= status in FAILURES
        print(f"{item}: {status}: {message}" if len(items) > 1 else f"{status}: {message}", flush=True)
        for line in host:
            print("  " + line)
        if runner.poisoned and k + 1 < len(items):
            rest = [a for a in sys.argv[1:] if a not in args.replay and a != "--replay"]
            command = [sys.executable, str(Path(__file__).resolve()), *rest, "--replay", *items[k + 1 :]]
            return subprocess.call(command) or int(failed)
    return int(failed)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        return worker(args)
    if args.replay:
        return replay(args)
    return fuzz(args, argv)


if __name__ == "__main__":
    sys.exit(main())
