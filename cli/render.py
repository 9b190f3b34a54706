"""Render typed results for their reader: a terminal (Rich), machines (JSON), pull
requests (Markdown). Kernel names and rule messages are untrusted text: they go into Rich
as `Text` (never parsed as markup) and into Markdown escaped."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from wsperf.analyses.summary import LaunchSummary
from wsperf.collectors.environment import Environment

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def md(text: object) -> str:
    """Escape text for a Markdown table cell or paragraph (no HTML, no links)."""
    s = _CONTROL.sub("", str(text)).replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", s)


def plain(text: object) -> Text:
    """Untrusted text for the terminal: control characters (ANSI escapes) removed and
    no markup interpretation."""
    return Text(_CONTROL.sub("", str(text)))


def dims(d: tuple[int, int, int]) -> str:
    return "x".join(str(v) for v in d)


def duration(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} us"


def _cluster(s: LaunchSummary) -> str:
    return dims(s.cluster) if any(v > 1 for v in s.cluster) else "none"


UNKNOWN_FAMILIES = ("unknown: the report has no source counters or instruction statistics "
                    "(collect with --set full, or --section SourceCounters --section InstructionStats)")


def _yes(b: bool | None) -> str:
    return "unknown" if b is None else ("yes" if b else "no")


def _copies(f) -> str:
    return "unknown" if f.copies is None else (", ".join(f.copies) or "none")


def _families_line(s: LaunchSummary) -> list[tuple[str, str]]:
    f = s.families
    if not f.known:
        return [("instructions", UNKNOWN_FAMILIES)]
    return [
        ("tensor", f.tensor),
        ("copies", _copies(f)),
        ("mbarrier", _yes(f.mbarrier)),
        ("setmaxnreg", _yes(f.setmaxnreg)),
        ("cluster barrier", _yes(f.cluster_barrier)),
        ("local memory", _yes(f.local_memory)),
    ]


def summaries_text(summaries: list[LaunchSummary], console: Console) -> None:
    for s in summaries:
        t = Table(title=Text.assemble(("launch ", "bold"), (str(s.launch_id), "bold"), "  ", plain(s.name)),
                  show_header=False, title_justify="left", box=None, pad_edge=False)
        t.add_column(style="cyan", no_wrap=True)
        t.add_column()
        t.add_row("kernel", plain(s.demangled))
        t.add_row("report", plain(s.report))
        t.add_row("device", plain(f"{s.device or 'unknown'} ({s.arch or '?'})"))
        t.add_row("grid / block / cluster", f"{dims(s.grid)} / {dims(s.block)} / {_cluster(s)}")
        t.add_row("registers / smem", f"{s.registers_per_thread} per thread / "
                  f"{s.static_smem_bytes} B static + {s.dynamic_smem_bytes} B dynamic")
        t.add_row("duration", duration(s.duration_ns))
        for k, v in _families_line(s):
            t.add_row(k, v)
        console.print(t)
        console.print()


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    return obj


def summaries_json(summaries: list[LaunchSummary]) -> str:
    kernels = []
    for s in summaries:
        d = _jsonable(s)
        kernels.append({
            "report": s.report,
            "launch_id": s.launch_id,
            "name": s.name,
            "demangled": s.demangled,
            "mangled": s.mangled,
            "arch": s.arch,
            "device": s.device,
            "grid": list(s.grid),
            "block": list(s.block),
            "cluster": list(s.cluster),
            "registers_per_thread": s.registers_per_thread,
            "static_smem_bytes": s.static_smem_bytes,
            "dynamic_smem_bytes": s.dynamic_smem_bytes,
            "duration_ns": s.duration_ns,
            "families": d["families"],
            "ncu_rules": d["ncu_rules"],
        })
    return json.dumps({"kernels": kernels}, indent=2)


def summaries_markdown(summaries: list[LaunchSummary]) -> str:
    out = ["| launch | kernel | grid / block / cluster | duration | tensor | copies | mbarrier | setmaxnreg | local memory |",
           "| ---: | --- | --- | ---: | --- | --- | --- | --- | --- |"]
    for s in summaries:
        f = s.families
        out.append(
            f"| {s.launch_id} | {md(s.name)} | {dims(s.grid)} / {dims(s.block)} / {_cluster(s)} | "
            f"{duration(s.duration_ns)} | {f.tensor} | {_copies(f)} | "
            f"{_yes(f.mbarrier)} | {_yes(f.setmaxnreg)} | {_yes(f.local_memory)} |"
        )
    return "\n".join(out) + "\n"


def environment_text(env: Environment, console: Console) -> None:
    t = Table(title="wsperf doctor", title_justify="left")
    t.add_column("check", style="cyan")
    t.add_column("found")
    t.add_column("where / note")
    t.add_row("python", env.python, env.platform)
    t.add_row("wsperf", env.wsperf, "")
    for name, version in env.packages.items():
        if version or name in ("ncu-report", "duckdb"):
            t.add_row(name, version or Text("MISSING", style="red"), "")
    for tool in env.tools:
        t.add_row(tool.name, tool.version or Text("not found", style="yellow"), plain(tool.path or tool.note))
    if env.gpus:
        for g in env.gpus:
            t.add_row(f"gpu {g.index}", plain(g.name), f"{g.arch} (cc {g.compute_capability}), driver {g.driver}")
    else:
        t.add_row("gpu", Text("none", style="yellow"), plain(env.gpu_note))
    console.print(t)


def environment_json(env: Environment) -> str:
    d = _jsonable(env)
    d["gpus"] = [dict(_jsonable(g), arch=g.arch) for g in env.gpus]
    return json.dumps(d, indent=2)


def records_table(columns: list[str], rows: Iterable[tuple], console: Console) -> None:
    t = Table(*[plain(c) for c in columns])
    for r in rows:
        t.add_row(*[plain("NULL" if v is None else v) for v in r])
    console.print(t)
