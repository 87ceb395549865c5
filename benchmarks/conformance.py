"""Run nvFuser's own Python frontend tests against fuser_core and write the result.

    python benchmarks/conformance.py extract SNAPSHOT [--commit C] --to DIR
        copy the test files out of an NVIDIA/Fuser snapshot (a git directory, or a
        checkout) into DIR, to carry them to the GPU machine
    python benchmarks/conformance.py run DIR [--out docs/conformance.md]
        run each file with `pytest -p fuser_core.compat` (nvfuser resolving to
        fuser_core), the tests unmodified and their own torch comparisons deciding,
        and write pass / fail / skip per test with the first error line

The test files are nvFuser's and are never committed here: they are read from the
snapshot at run time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

COMMIT = "612b6d77e"  # 2024-07-15: the printer era fuser_core reproduces
FILES = ("tests/python/test_python_frontend.py", "tests/python/test_pointwise.py", "tests/python/test_nan.py")
ROOT = Path(__file__).resolve().parent.parent


def extract(snapshot: Path, commit: str, target: Path) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name in FILES:
        out = target / Path(name).name
        if (snapshot / name).is_file() and not (snapshot / "HEAD").is_file():
            shutil.copyfile(snapshot / name, out)
        else:
            text = subprocess.run(
                ["git", f"--git-dir={snapshot}", "show", f"{commit}:{name}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            out.write_text(text)
        written.append(out)
    (target / "COMMIT").write_text(commit + "\n")
    return written


def run(source: Path, out: Path, timeout: int, workers: int = 0, keep: Path | None = None, per_test: int = 0) -> int:
    results: list[tuple[str, str, str, str]] = []  # file, test, outcome, first line
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        for name in FILES:
            test_file = source / Path(name).name
            copy = Path(tmp) / test_file.name
            shutil.copyfile(test_file, copy)
            junit = Path(tmp) / (copy.stem + ".xml")
            extra = ["-n", str(workers)] if workers else []
            if per_test:  # a test past this is failed (pytest-timeout), so one hang cannot stop the run
                extra += [f"--timeout={per_test}", "--timeout-method=thread", "--durations=15"]
            _pytest([str(copy)], junit, Path(tmp), env, extra, timeout)
            rows = _read_junit(copy.name, junit)
            results.extend(_rerun_failures_alone(rows, copy, Path(tmp), env, per_test, max(workers, 1)))
            if keep is not None and junit.is_file():
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(junit, keep / junit.name)
    commit = (source / "COMMIT").read_text().strip() if (source / "COMMIT").is_file() else COMMIT
    out.write_text(_report(results, commit))
    print(f"wrote {out}")
    failed = sum(1 for r in results if r[2] == "fail")
    print(f"conformance: {len(results) - failed} passed or skipped, {failed} failed")
    return 0


def _pytest(targets: list[str], junit: Path, tmp: Path, env: dict[str, str], extra: list[str], timeout: int) -> None:
    command = [sys.executable, "-m", "pytest", "-p", "fuser_core.compat", "-q", "-p", "no:cacheprovider"]
    command += ["-o", "addopts=", f"--junitxml={junit}", f"--rootdir={tmp}", *extra, *targets]
    print("+", " ".join(command), flush=True)
    try:
        subprocess.run(command, cwd=tmp, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"{' '.join(targets)}: timed out after {timeout} s", flush=True)


def _rerun_failures_alone(
    rows: list[tuple[str, str, str, str]], copy: Path, tmp: Path, env: dict[str, str], per_test: int, workers: int
) -> list[tuple[str, str, str, str]]:
    """Each failed test again in a process of its own: a CUDA fault poisons the context of
    the process it happens in, so the tests after it in that worker fail too. The fault
    stays on the test that caused it (it fails alone as well); a test that passes alone
    is reported as passing, with a note that it failed in the shared run."""
    failed = [r for r in rows if r[2] == "fail" and r[1] != "(whole file)"]
    if not failed:
        return rows

    def alone(row: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
        junit = tmp / f"alone-{row[1]}.xml"
        extra = [f"--timeout={per_test}", "--timeout-method=thread"] if per_test else []
        _pytest([f"{copy}::{_class_of(copy, row[1])}{row[1]}"], junit, tmp, env, extra, max(per_test * 2, 600))
        again = _read_junit(row[0], junit)
        if again and again[0][2] == "pass":
            return (row[0], row[1], "pass", f"passed alone; failed in the shared run: {row[3]}")
        return again[0] if again and again[0][1] == row[1] else row

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        redone = dict(zip((r[1] for r in failed), pool.map(alone, failed), strict=True))
    return [redone.get(r[1], r) if r[2] == "fail" else r for r in rows]


def _class_of(copy: Path, test: str) -> str:
    """`TestClass::` for a test method of a unittest class in `copy`, else ''."""
    current = ""
    for line in copy.read_text().splitlines():
        if line.startswith("class "):
            current = line[len("class ") :].split("(")[0].split(":")[0].strip()
        elif line.strip().startswith(f"def {test}(") and line.startswith("    "):
            return f"{current}::"
    return ""


def _read_junit(file: str, junit: Path) -> list[tuple[str, str, str, str]]:
    if not junit.is_file():
        return [(file, "(whole file)", "fail", "pytest wrote no report (crashed or timed out)")]
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "?")
        outcome, line = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "fail"
                line = _first_line(child.get("message") or child.text or "")
                break
            if child.tag == "skipped":
                outcome, line = "skip", _first_line(child.get("message") or "")
        rows.append((file, name, outcome, line))
    return rows


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:200].replace("|", "\\|")
    return ""


def _device() -> str:
    try:
        import torch  # the GPU machine has it; only its name is read

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return "no GPU"


def _report(results: list[tuple[str, str, str, str]], commit: str) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        "# nvFuser conformance",
        "",
        f"nvFuser's Python frontend tests (NVIDIA/Fuser `{commit}`) run unmodified against",
        "fuser_core with `benchmarks/conformance.py` (`pytest -p fuser_core.compat`); the",
        "tests' own torch comparisons decide.",
        "",
        f"Run on {_device()}, {today}. To run it again on a GPU machine:",
        "`python benchmarks/conformance.py extract SNAPSHOT --to DIR` (SNAPSHOT: an NVIDIA/Fuser",
        "git directory or checkout), then `python benchmarks/conformance.py run DIR --out",
        "docs/conformance.md` (`--workers N` with pytest-xdist; each failure is rerun alone).",
        "",
        "| file | passed | failed | skipped | total |",
        "|---|---|---|---|---|",
    ]
    for file in dict.fromkeys(r[0] for r in results):
        rows = [r for r in results if r[0] == file]
        counts = {k: sum(1 for r in rows if r[2] == k) for k in ("pass", "fail", "skip")}
        lines.append(f"| {file} | {counts['pass']} | {counts['fail']} | {counts['skip']} | {len(rows)} |")
    sections = (
        ("Failures", "fail"),
        ("Passed alone, failed in the shared run (after another test's CUDA fault)", "pass"),
        ("Skipped", "skip"),
    )
    for title, outcome in sections:
        chosen = [r for r in results if r[2] == outcome and (outcome != "pass" or r[3])]
        lines += ["", f"## {title}", ""]
        if not chosen:
            lines.append("None.")
            continue
        lines += ["| file | test | first error line |", "|---|---|---|"]
        lines += [f"| {f} | `{t}` | {why} |" for f, t, _, why in chosen]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ext = sub.add_parser("extract")
    ext.add_argument("snapshot", type=Path)
    ext.add_argument("--commit", default=COMMIT)
    ext.add_argument("--to", type=Path, required=True)
    run_cmd = sub.add_parser("run")
    run_cmd.add_argument("source", type=Path)
    run_cmd.add_argument("--out", type=Path, default=ROOT / "docs" / "conformance.md")
    run_cmd.add_argument("--timeout", type=int, default=1500)
    run_cmd.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (0: none)")
    run_cmd.add_argument("--keep", type=Path, help="copy each file's JUnit XML here")
    run_cmd.add_argument("--per-test", type=int, default=0, help="seconds one test may take (pytest-timeout)")
    args = parser.parse_args(argv)
    if args.command == "extract":
        for path in extract(args.snapshot, args.commit, args.to):
            print(path)
        return 0
    return run(args.source, args.out, args.timeout, args.workers, args.keep, args.per_test)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
