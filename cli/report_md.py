"""REPORT.md: the method's last step, a reproducible report ready for an upstream issue,
written into every bundle `wsperf collect` makes (and again by `wsperf analyze BUNDLE
--write-report`).

Sections: environment and commands (from environment.json and the manifest), launch
shapes, where the generated code is, the symptom (expected / actual), the conclusion (the
report the handoff rule called for, or the verdicts, with evidence and assumptions
marked), and one falsifiable experiment per confirmed finding (the hypothesis header's
`experiment`), which `wsperf compare BEFORE AFTER` can then check."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from wsperf.analyses.evidence import Evidence
from wsperf.analyses.hypotheses import Status, catalogue
from wsperf.cli import render
from wsperf.cli.gate import Gate
from wsperf.cli.render import md, md_code
from wsperf.collectors.bundle import read_bundle
from wsperf.collectors.cudagdb import read_cudagdb
from wsperf.collectors.environment import recorded
from wsperf.collectors.errors import WsperfError
from wsperf.collectors.files import read_small, write_output

REPORT = "REPORT.md"

_EXPECTED = {
    "hang": "the repro finishes within --timeout",
    "correctness": "compute-sanitizer finds nothing in the user's kernels",
    "unverified": "every sanitizer tool asked for runs to its end",
    "clean": "the kernel uses the architecture's fast paths and overlaps copy with math",
}


def report_markdown(bundle: Path, ev: Evidence, gate: Gate, results: list | None) -> str:
    b = read_bundle(bundle)
    m = b.manifest
    out = [f"# wsperf report: {md_code(shlex.join(m.get('argv') or []))}", ""]
    out += ["## Environment and commands", ""] + _environment(bundle) + [""]
    for r in b.runs:
        if r.phase in ("run", "sanitizer-attempt", "sanitizer", "profile"):
            how = "timed out" if r.timed_out else f"exit {r.exit_code}"
            out.append(f"- {r.phase} ({r.tool}, {how}, {r.seconds:.0f} s): {md_code(shlex.join(r.argv))}")
    out += ["", "## Launch shapes", ""] + _shapes(ev, results) + [""]
    out += ["## Generated code", ""]
    gen = [f"- {md_code(str(p.relative_to(bundle.resolve())) if p.is_relative_to(bundle.resolve()) else str(p))} "
           f"({kind})" for kind, p in ev.generated]
    out += gen or ["- none kept: give the kernel's PTX or source with `--source FILE` (the worksheet needs it)"]
    if ev.sheets:
        out.append(f"- handoff worksheet filled for: {', '.join(md_code(g.sheet.kernel) for g in ev.sheets)}")
    out += ["", "## Symptom", "", f"- expected: {_EXPECTED.get(gate.outcome, '?')}", f"- actual: {_actual(gate, results)}"]
    out += ["", "## Conclusion", "", "Items marked *evidence* are what a tool said; *assumption* items are inferred: "
            "check them.", ""]
    if gate.markdown:
        out.append(gate.markdown)
    for c in gate.caveats:
        out.append(f"> **Caveat:** {md(c)}")
    if results:
        out += ["", render.analyses_markdown(results)]
    exps = [f"- {md(e)}" for e in gate.experiments] + _experiments(results)
    out += ["", "## Experiments", ""]
    out += exps or ["- none: no hypothesis confirmed" if gate.outcome == "clean" else
                    "- fix the handoff the conclusion names, change one handoff at a time, then collect again"]
    return "\n".join(out).rstrip() + "\n"


def write_report(bundle: Path, ev: Evidence, gate: Gate, results: list | None) -> Path:
    path = bundle / REPORT
    write_output(path, report_markdown(bundle, ev, gate, results).encode("utf-8"))
    return path


def _environment(bundle: Path) -> list[str]:
    raw = read_small(bundle / "environment.json", 1 << 20)  # not a FIFO to wait on, not read past 1 MiB
    try:
        env: dict[str, Any] = json.loads(raw.decode("utf-8", "replace")) if raw is not None else None
    except (ValueError, RecursionError):
        env = None
    if not isinstance(env, dict):
        return ["- environment.json missing or unreadable"]
    gpus = [f"{g.get('name')} (driver {g.get('driver')}, compute capability {g.get('compute_capability')})"
            for g in recorded(env, "gpus")]
    # a tool whose version could not be read: the note environment.json recorded for it
    tools = [f"{t.get('name')} {t.get('version') or ('(' + str(t['note']) + ')' if t.get('note') else '?')}"
             for t in recorded(env, "tools") if t.get("path")]
    pk = env.get("packages") if isinstance(env.get("packages"), dict) else {}
    return [f"- GPU: {md(', '.join(gpus) or 'none')}", f"- tools: {md(', '.join(tools) or 'none found')}",
            f"- Python {md(env.get('python'))}, wsperf {md(env.get('wsperf'))}; "
            + md(", ".join(f"{k} {v}" for k, v in pk.items() if v))]


def _shapes(ev: Evidence, results: list | None) -> list[str]:
    if results:
        seen = {}
        for a in results:
            s = a.summary
            key = (s.name, render.dims(s.grid), render.dims(s.block))
            seen.setdefault(key, (a, 0))
            seen[key] = (seen[key][0], seen[key][1] + 1)
        return [f"- {md_code(render.fold_name(a.summary.name))}"
                f": grid {g}, block {bl}, {render.regs_smem(a.summary)}" + (f" ({n} launches)" if n > 1 else "")
                for (_, g, bl), (a, n) in seen.items()]
    if ev.capture is not None:
        return [f"- from the hang capture: {md_code(k)}" for k in _capture_kernels(ev)] or ["- not known"]
    return ["- not profiled (no Nsight Compute report in the bundle)"]


def _capture_kernels(ev: Evidence) -> list[str]:
    try:
        return [k.invocation for k in read_cudagdb(ev.capture).kernels]
    except WsperfError:
        return []


def _actual(gate: Gate, results: list | None) -> str:
    if gate.outcome == "hang":
        return "the repro was still running at the time limit: every resident warp waits (see the conclusion)"
    if gate.outcome == "correctness":
        return "the sanitizer reports errors that break a handoff (see the conclusion)"
    if gate.outcome == "unverified":
        return "a sanitizer tool did not finish, or its evidence is damaged"
    # the biggest estimated gain of any launch first (analyses/gains.py)
    best: dict[str, float] = {}
    for a in results or []:
        gains = {g.finding: g.high for g in a.gains()}
        for f in a.by_gain():
            best[f.id] = max(best.get(f.id, -1.0), gains.get(f.id, -1.0))
    confirmed = sorted(best, key=lambda x: (-best[x], x))
    return ("confirmed: " + ", ".join(confirmed)) if confirmed else "no slow-kernel hypothesis confirmed"


def _experiments(results: list | None) -> list[str]:
    by_id = {h.id: h for h in catalogue()}
    out = []
    ranked_out: list[tuple[float, str]] = []
    for a in results or []:
        gains = {g.finding: g for g in a.gains()}
        for f in a.by_gain():
            h, g = by_id.get(f.id), gains.get(f.id)
            if h is not None and h.experiment:
                ranked_out.append((g.high if g else -1.0, f"- {md_code(render.fold_name(a.summary.name))}, {f.id}"
                                   + (f" ({md(g.text())})" if g else "") + f": {md(h.experiment)}"))
    # the experiment that could gain the most first
    out = [line for _, line in sorted(ranked_out, key=lambda x: -x[0])]
    return list(dict.fromkeys(out))
