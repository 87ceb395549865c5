"""The Markdown summary of a fuzz run: outcomes, failures with their repros, host
fallbacks, refusals, and what the generated fusions covered."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from .cases import FAILURES


def signature(message: str) -> str:
    """A failure message's first line with numbers and tensor names blanked, so failures
    of one cause group together."""
    line = next((ln for ln in message.splitlines() if ln.strip()), "")
    nvrtc = re.search(r"error: (.*)", message)  # an NVRTC log: its first error says what failed
    if line.startswith("KernelCompileError") and nvrtc:
        line = "NVRTC: " + nvrtc.group(1)
    line = re.sub(r"^\S+\.py:\d+: ", "", line).split(";")[0]
    return re.sub(r"\d+", "N", line)[:160]


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    status = Counter(r["status"] for r in results)
    failures = [r for r in results if r["status"] in FAILURES]
    lines = [
        "# Fuser fuzz report",
        "",
        f"- date: {meta['date']}",
        f"- device: {meta['device']}",
        f"- mode: {meta['mode']} ({'cuda backend against torch eager' if meta['mode'] == 'cuda' else 'generated kernels on the kernel-IR interpreter against the reference backend'})",  # noqa: E501
        f"- seed {meta['seed']}, cases {meta['first']}..{meta['first'] + meta['count'] - 1} asked, {len(results)} run;"
        f" jobs {meta['jobs']}",
        f"- excluded constructs: {', '.join(meta.get('exclude') or []) or 'none'}",
        f"- wall time: {meta['wall']:.1f} s",
        f"- command: `{meta['command']}`",
        "",
        "## Outcomes",
        "",
    ]
    rows = [["fusions run", len(results)], ["passed", status["pass"]]]
    rows += [[f"**{c}** failures", status[c]] for c in FAILURES]
    rows += [["refused with a FuserError (not a failure)", status["refused"]]]
    rows += [["errors of the fuzzer itself (harness)", status["harness"]]]
    lines += _table(["outcome", "fusions"], rows)
    host = [r for r in results if r.get("host_groups")]
    n_groups = sum(len(r["host_groups"]) for r in host)
    lines += ["", f"Fusions with a group run on the host reference: {len(host)} ({n_groups} groups)."]
    lines += _reasons("Why groups ran on the host", [g for r in host for g in r["host_groups"]])
    lines += _reasons("Refusals (FuserError)", [r["message"] for r in results if r["status"] == "refused"])
    cuda_only = [r["index"] for r in results if r["status"] == "refused" and r.get("note")]
    if cuda_only:
        lines += ["", f"Refused by the cuda backend although the reference backend runs them: cases {cuda_only[:30]}"]
    lines += ["", "## Failures", ""]
    if not failures:
        lines.append("None.")
    else:
        by_sig: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in failures:
            by_sig.setdefault((r["status"], signature(r["message"])), []).append(r)
        rows = []
        for (cls, sig), rs in sorted(by_sig.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
            best = min(rs, key=lambda r: len(r.get("shrunk_ops") or r["ops"]) or 99)  # the smallest repro
            ops = " ".join(best.get("shrunk_ops") or best["ops"])
            rows.append([cls, len(rs), sig, ", ".join(str(r["index"]) for r in rs[:8]), best.get("repro", ""), ops])
        header = ["class", "cases", "first line (numbers blanked)", "case indices", "smallest repro", "its ops"]
        lines += _table(header, rows)
        lines += ["", "Every failure's repro (`fd.repro_script_for(inputs)` with the message) is beside this file."]
    harness = [r for r in results if r["status"] == "harness"]
    if harness:
        lines += ["", "## Fuzzer errors", ""]
        lines += [f"- case {r['index']}: {signature(r['message'])}" for r in harness[:20]]
    lines += ["", "## Coverage", ""]
    lines += _coverage(results)
    return "\n".join(lines) + "\n"


def _reasons(title: str, messages: list[str]) -> list[str]:
    if not messages:
        return []
    counts = Counter(signature(m) for m in messages)
    return ["", f"{title}:", ""] + [f"- {n} x {s}" for s, n in counts.most_common(12)]


def _coverage(results: list[dict[str, Any]]) -> list[str]:
    ops: Counter[str] = Counter()
    fusions: Counter[str] = Counter()
    for r in results:
        ops.update(r["ops"])
        fusions.update(set(r["ops"]))
    rows = [[name, fusions[name], ops[name]] for name in sorted(ops)]
    lines = _table(["op", "fusions", "uses"], rows)
    features: Counter[str] = Counter()
    for r in results:
        features.update(f"pattern: {t}" for t in set(r.get("tags", [])) if t)
        features.update(f"input layout: {x}" for x in set(r.get("layouts", [])))
        features.update(f"input dtype: {x}" for x in set(r.get("dtypes", [])))
        features.update(f"{n} outputs" if n > 1 else "1 output" for n in [r.get("outputs", 1)])
        features.update(f for f in r.get("features", []))
    lines += ["", *_table(["feature", "fusions"], [[k, v] for k, v in sorted(features.items())])]
    return lines
