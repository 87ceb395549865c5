"""Metric tables: one row per kernel per run, as Inductor's metric tables keep them.

Each group of a run is a row; the launch columns come from the run report's launch
records (the cuda backend), and are empty with a note where nothing was launched. The
roofline estimate (bytes over peak bandwidth, flops over peak throughput, and which
bound applies) is there on every backend; with a measured time, `of_estimate` is the
estimate over it (1.0 runs at the roofline).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import TextIO

from fuser_core import RooflineEstimate
from workbench.artifacts import Artifacts
from workbench.session import RunResult, device_label

COLUMNS = (
    "fusion",
    "definition",
    "run",
    "group",
    "scheduler",
    "kernel",
    "shapes",
    "options",
    "backend",
    "device",
    "time_us",
    "bytes",
    "gbps",
    "fraction_of_peak",
    "registers",
    "spills",
    "estimate",
    "estimate_us",
    "bound",
    "flops",
    "of_estimate",
    "note",
)


def _blank(value: object) -> str:
    return "" if value is None else str(value)


def rows(fusion: str, result: RunResult) -> list[dict[str, str]]:
    settings = result.settings
    base = {
        "fusion": fusion,
        "definition": settings.definition,
        "run": str(result.index + 1),  # numbered from 1, as the TUI, the Log and exports' names number runs
        "shapes": " ".join("x".join(map(str, s)) or "scalar" for s in settings.shapes),
        "options": ",".join(result.effective),
        "backend": settings.options.backend,
    }
    a = result.artifacts
    if a is None:
        assert result.error is not None
        return [{**dict.fromkeys(COLUMNS, ""), **base, "note": f"run failed: {result.error.message}"}]
    launches = {r.group_id: r for r in a.launches}
    out = []
    for g in a.groups:
        r = launches.get(g.id)
        row = {**dict.fromkeys(COLUMNS, ""), **base, "group": f"g{g.id}", "scheduler": g.scheduler}
        row |= {"kernel": g.kernel, "device": _device(a)}
        row |= _estimate_columns(a.estimate(g.id), r.seconds if r is not None else None)
        if r is None:
            row["note"] = a.launches_note
        else:
            row |= {
                "time_us": "" if r.seconds is None else f"{r.seconds * 1e6:.3f}",
                "bytes": str(r.bytes_moved),
                "gbps": "" if r.gbps is None else f"{r.gbps:.2f}",
                "fraction_of_peak": "" if r.fraction_of_peak is None else f"{r.fraction_of_peak:.4f}",
                "registers": _blank(r.registers),
                "spills": _blank(r.spills),
            }
        out.append(row)
    return out


def _device(a: Artifacts) -> str:
    """The GPU's name where the cuda backend ran (and the device model that sized its
    heuristics, where one was named); on the reference backend the name is only the device
    model the heuristics were sized for, and the cell says so."""
    return device_label(a.device, a.backend, a.gpu).removeprefix("device: ")


def _estimate_columns(e: RooflineEstimate | None, measured: float | None) -> dict[str, str]:
    if e is None:
        return {}
    seconds, fraction = e.seconds, e.fraction_of(measured)
    return {
        "bytes": str(e.bytes_moved),
        "estimate": e.line(),
        "estimate_us": "" if seconds is None else f"{seconds * 1e6:.4f}",
        "bound": e.bound,
        "flops": str(e.flops),
        "of_estimate": "" if fraction is None else f"{fraction:.4f}",
    }


def write_csv(out: TextIO, table: Iterable[dict[str, str]]) -> int:
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    count = 0
    for row in table:
        writer.writerow(row)
        count += 1
    return count
