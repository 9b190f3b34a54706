"""Render typed results for their reader: a terminal (Rich), machines (JSON), pull
requests (Markdown). Kernel names and rule messages are untrusted text: they go into Rich
as `Text` (never parsed as markup) and into Markdown escaped."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from typing import Any, Iterable

from rich.console import Console
from rich.text import Text

import wsperf
from wsperf.analyses.analyze import KernelAnalysis, group_identical
from wsperf.analyses.summary import LaunchSummary
from wsperf.cli.table import Table
from wsperf.collectors.environment import Environment

# Characters that would start Markdown or HTML syntax inside a table cell or paragraph.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")
_CODE_SPAN = re.compile(r"`([^`]+)`")
# C0 controls but tab and newline, DEL, the C1 controls (U+0080-U+009F: CSI, OSC, NEL ...
# that a terminal may act on) and the bidirectional overrides and isolates, which make
# a name read differently from what it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def md(text: object) -> str:
    """Escape text for a Markdown table cell or paragraph (no HTML, no links). A code span
    in it (`...` on one line: the evidence and remedies write commands that way) stays a
    code span, inert by itself; only its pipes are escaped, which GitHub's tables need
    even there. Everything else has its Markdown characters escaped."""
    s = _CONTROL.sub("", str(text)).replace("\n", " ")
    out, at = [], 0
    for m in _CODE_SPAN.finditer(s):
        out += [_MD_SPECIAL.sub(r"\\\1", s[at:m.start()]), "`", m.group(1).replace("|", "\\|"), "`"]
        at = m.end()
    out.append(_MD_SPECIAL.sub(r"\\\1", s[at:]))
    return "".join(out)


def md_code(text: object) -> str:
    """Text as one Markdown code span: nothing escaped inside (a backslash would show), so
    backticks become quotes, pipes are escaped for tables and control characters dropped."""
    clean = "".join(ch for ch in str(text) if ch.isprintable()).replace("`", "'").replace("|", "\\|")
    return f"`{clean}`" if clean else "``"


def plain(text: object) -> Text:
    """Untrusted text for the terminal: control characters (ANSI escapes) removed and
    no markup interpretation."""
    return Text(_CONTROL.sub("", str(text)))


def dims(d: tuple[int, int, int]) -> str:
    if any(v is None for v in d):  # static code (wsperf inspect): no launch
        return "n/a"
    return "x".join(str(v) for v in d)


def duration(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} us"


def _cluster(s: LaunchSummary) -> str:
    if any(v > 1 for v in s.cluster):
        return dims(s.cluster)
    # static code (wsperf inspect): the cluster is a launch attribute the cubin does not hold
    return "n/a" if any(v is None for v in s.grid) else "none"


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


class OutputFormat(str, enum.Enum):
    """What a command prints: a terminal table, JSON for machines, Markdown for PRs."""

    text = "text"
    json = "json"
    markdown = "markdown"


_STATUS_STYLE = {"confirmed": "bold red", "rejected": "green", "no_data": "yellow"}
# A launch's headline: a finding is red, nothing found on evidence green, no data yellow
# (never green: no evidence is not good news).
_OUTCOME_STYLE = {"confirmed": "bold red", "clear": "green", "no_data": "yellow"}


def _summary_table(s: LaunchSummary, ws: str) -> Table:
    t = Table(title=Text.assemble(("launch ", "bold"), (str(s.launch_id), "bold"), "  ", plain(s.name)),
              show_header=False, title_justify="left", box=None, pad_edge=False)
    t.add_column(style="cyan", no_wrap=True)
    t.add_column()
    if s.is_kernel:
        t.add_row("kernel", plain(fold_name(s.demangled)))
    else:
        t.add_row("workload", plain(workload_text(s)))
    t.add_row("report", plain(str(s.report).replace("\n", "\u23ce").replace("\t", " ")))  # one line, a newline shown
    t.add_row("device", plain(f"{s.device or 'unknown'} ({s.arch or '?'})"))
    if s.is_kernel:  # several kernels have no one launch shape
        t.add_row("grid / block / cluster", f"{dims(s.grid)} / {dims(s.block)} / {_cluster(s)}")
        t.add_row("registers / smem", regs_smem(s))
    t.add_row("duration", duration(s.duration_ns))
    for k, v in _families_line(s):
        t.add_row(k, v)
    t.add_row("warp-specialized", ws)
    return t


# A demangled name longer than this is folded for people (CUTLASS names run to thousands
# of characters); JSON keeps it whole (`demangled`).
_MAX_NAME = 100
_MAX_TEMPLATE = 40  # a template argument list this short is kept when a name is folded


def fold_name(name: str | None) -> str:
    """A long C++ name with its template arguments (and then its parameters) folded to
    `<...>` / `(...)`: `void cutlass::device_kernel<...>(...)`. Short names are kept, and so
    are short template argument lists, which tell instances apart (`void gemm_ws<true>(...)`
    and `void gemm_ws<false>(...)`)."""
    name = name or "?"
    if len(name) <= _MAX_NAME:
        return name
    out, depth, held = [], 0, []
    for c in name:  # keep the outermost brackets; what they hold only when it is short
        if c == "<":
            if depth == 0:
                held = []
            else:
                held.append(c)
            depth += 1
        elif c == ">" and depth:
            depth -= 1
            if depth == 0:
                inner = "".join(held)
                out.append(f"<{inner}>" if len(inner) <= _MAX_TEMPLATE and "<" not in inner else "<...>")
            else:
                held.append(c)
        elif depth:
            held.append(c)
        else:
            out.append(c)
    folded = "".join(out)
    if len(folded) > _MAX_NAME:
        level = 0
        for i, c in enumerate(folded):  # the parameters: the first "(" outside template brackets
            level += (c == "<") - (c == ">")
            if c == "(" and level == 0:
                folded = folded[:i] + "(...)"
                break
    return folded


def distinct_names(names: Iterable[str | None]) -> list[str]:
    """fold_name of each name, where two different names would fold alike, each followed by
    the part that tells it apart: `void clover::par_ranged2d_kernel<...>(...) [instance 5]`
    (four lambdas of one template whose folded names were identical). The part is the
    shortest bracketed group around the first difference, else the word there."""
    names = ["?" if n is None else str(n) for n in names]
    folded = [fold_name(n) for n in names]
    groups: dict[str, set[str]] = {}
    for n, f in zip(names, folded):
        groups.setdefault(f, set()).add(n)
    out = []
    for n, f in zip(names, folded):
        same = groups[f]
        out.append(f if len(same) == 1 or f == n else f"{f} [{_telling_part(n, same)}]")
    return out


def _telling_part(name: str, group: set[str]) -> str:
    """What of `name` tells it from each other name of its group (distinct_names): per other
    name, the short bracketed group or the word around the first difference; each part once,
    in the name's order."""
    parts: dict[int, str] = {}
    for other in group:
        if other != name:
            at, part = _part_vs(name, other)
            if part not in parts.values():
                parts[at] = part
    return ", ".join(parts[k] for k in sorted(parts))


def _part_vs(name: str, other: str) -> tuple[int, str]:
    """(position, text) of the part of `name` around its first difference from `other`."""
    start = next((i for i, (a, b) in enumerate(zip(name, other)) if a != b), min(len(name), len(other)))
    start = min(start, len(name) - 1)
    pairs = {"(": ")", "<": ">", "[": "]"}
    for lo in range(start - 1, -1, -1):  # the innermost bracket open before the difference
        close = pairs.get(name[lo])
        if close is None:
            continue
        depth = 0
        for hi in range(lo, len(name)):
            depth += (name[hi] == name[lo]) - (name[hi] == close)
            if depth == 0:
                break
        inner = name[lo + 1:hi]
        if len(inner) <= _MAX_TEMPLATE:
            return lo + 1, inner
        break
    lo = max(name.rfind(c, 0, start + 1) for c in " ,(<[") + 1
    his = [i for i in (name.find(c, start) for c in " ,()<>[]") if i >= 0]
    return lo, name[lo:min(his) if his else len(name)] or name[start]


def version() -> str:
    """The wsperf version every JSON output and `doctor` carry."""
    return wsperf.version()


def regs_smem(s: LaunchSummary) -> str:
    def b(v: int | None) -> str:
        return "n/a" if v is None else f"{v:,} B"
    return f"{_num(s.registers_per_thread)} per thread / {b(s.static_smem_bytes)} static + {b(s.dynamic_smem_bytes)} dynamic"


def workload_text(s: LaunchSummary) -> str:
    """What a result that is not one kernel launch is (a range, a graph, ...)."""
    return f"{s.workload} result: the work of several kernels, profiled as one"


def ws_text(a: KernelAnalysis) -> str:
    """warp-specialized yes/no/unknown, saying when it rests on the code alone."""
    if not a.summary.is_kernel:
        return "n/a (several kernels)"
    if a.warp_specialized is not None and a.warp_specialized_basis == "static":
        return _yes(a.warp_specialized) + (" (static: producer and consumer code paths in the SASS)"
                                           if a.warp_specialized else " (static: one code path holds the work)")
    return _yes(a.warp_specialized)


def _roles_table(a: KernelAnalysis) -> Table:
    if a.warp_specialized and a.partitions:
        return _partitions_table(a)
    t = Table(title=a.roles_title(), title_justify="left")
    for c in ("role" if a.warp_specialized else "code", "instructions", "executed", "samples",
              "waiting on mbarrier", "top stalls"):
        t.add_column(c, justify="left" if c in ("role", "code", "top stalls") else "right")
    for r in a.roles:
        t.add_row(a.role_label(r.role), _num(r.instructions), _num(r.executed), _num(r.samples),
                  "n/a" if r.wait_share is None else f"{100 * r.wait_share:.1f}%", _stalls(r.top_stalls))
    return t


def registers_text(a: KernelAnalysis, registers: int | None) -> str:
    """A partition's register budget: its setmaxnreg, else the kernel's registers."""
    if registers is not None:
        return f"{registers} (setmaxnreg)"
    return f"{_num(a.summary.registers_per_thread)} (kernel)" if a.summary.registers_per_thread else "n/a"


def partitions_note(a: KernelAnalysis) -> str | None:
    """The line under the partitions that says when their warps rest on an assumption."""
    if any(p.basis == "assumption" for p in a.partitions):
        return ("(assumption) warps: read through what the SASS does not hold (a warp table's values as its constant stores give them, a "
                "BRX jump table's targets in address order where the cubin's constant bank is not at hand, or a CTA size a "
                "profile would give: 'N+')")
    return None


def _partitions_table(a: KernelAnalysis) -> Table:
    t = Table(title=a.roles_title(), title_justify="left")
    for c in ("role", "job", "registers", "instructions", "executed", "samples", "waiting on mbarrier", "top stalls"):
        t.add_column(c, justify="left" if c in ("role", "job", "registers", "top stalls") else "right")
    for p in a.partitions:
        t.add_row(plain(p.partition), plain(p.job or "-"), registers_text(a, p.registers) if p.job else "-",
                  _num(p.instructions), _num(p.executed), _num(p.samples),
                  "n/a" if p.wait_share is None else f"{100 * p.wait_share:.1f}%", _stalls(p.top_stalls))
    return t


def _stalls(top: Iterable[tuple[str, int]]) -> Text:
    """`branch_resolving 2,027, ...`: each reason with its samples."""
    return plain(", ".join(f"{reason} {_num(n)}" for reason, n in top))


def _findings_table(a: KernelAnalysis) -> Table:
    t = Table(title="hypotheses", title_justify="left")
    t.add_column("hypothesis", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    t.add_column("evidence")
    for f in a.findings:
        t.add_row(f.id, Text(f.status.value, style=_STATUS_STYLE[f.status.value]), plain(f.summary))
    return t


# Nsight Compute's rule messages carry their own markup (@section:Name:...@ links); a
# line shows the text only, and the first sentence of the message.
_NCU_MARKUP = re.compile(r"@[a-z]+:([^:@]*)(?::[^@]*)?@")
_NCU_RULES_SHOWN = 3


def ncu_text(message: str | None) -> str:
    """A rule message as plain text: `@section:WarpStateStats:Warp State@` -> `Warp State`
    (the link's label when it has one, else its target)."""
    return _NCU_MARKUP.sub(lambda m: m.group(0).strip("@").split(":")[-1] or m.group(1), message or "")


def ncu_rule_lines(s: LaunchSummary) -> list[str]:
    """The relevant Nsight Compute rules of a launch, briefly: warnings and optimization
    hints with the most estimated speedup first, at most three, one sentence each."""
    rules = [r for r in s.ncu_rules if (r.msg_type or "").upper() in ("WARNING", "OPTIMIZATION", "OPT")
             or r.estimated_speedup]
    out = []
    for r in [r for r in rules if r.message][:_NCU_RULES_SHOWN]:
        text = " ".join(ncu_text(r.message).split())
        first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
        speed = f" (est. speedup {r.estimated_speedup:.0f}%)" if r.estimated_speedup else ""
        out.append(f"{r.title or r.rule_id}{speed}: {first[:200]}")
    return out


def _num(v: int | None) -> str:
    return "n/a" if v is None else f"{v:,}"


def counted(n: int, noun: str) -> str:
    """`1 kernel`, `6 launches`, `1,024 run_date partitions`: the count with its digits
    grouped and the noun (its last word) in the number the count asks for."""
    if n == 1:
        return f"{n:,} {noun}"
    return f"{n:,} {noun}{'es' if noun.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


# Past this many identical launches their durations read as a range, not one by one (a
# report of 105 launches of one kernel gave a seven-line list of durations).
_SAME_DURATIONS_LISTED = 6


def id_ranges(ids: Iterable[int]) -> str:
    """Launch ids with runs of consecutive ones shortened: 2, 3, 4, 5, 9 -> '2-5, 9'."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def same_as_line(first: KernelAnalysis, others: tuple[KernelAnalysis, ...]) -> str:
    """The line that stands for launches identical to `first` (kernel, report, launch
    shape, verdicts): their ids and durations (their range when there are many)."""
    ids = id_ranges(o.summary.launch_id for o in others)
    ns = [o.summary.duration_ns for o in others]
    known = [d for d in ns if d is not None]
    if len(ns) <= _SAME_DURATIONS_LISTED or not known:
        durs = "duration " + ", ".join(duration(d) for d in ns)
    else:
        unknown = f", {len(ns) - len(known)} n/a" if len(known) < len(ns) else ""
        durs = f"durations {duration(min(known))} to {duration(max(known))}{unknown}"
    same = "kernel, launch shape" if first.summary.is_kernel else first.summary.workload
    return (f"launch{'es' if len(others) > 1 else ''} {ids}: the same {same} and verdicts as "
            f"launch {first.summary.launch_id} ({durs})")


def analyses_text(analyses: list[KernelAnalysis], console: Console) -> None:
    for a, same in group_identical(analyses):
        console.print(_summary_table(a.summary, ws_text(a)))
        if same:  # under the launch it repeats, as Markdown puts it under its heading
            console.print(Text(same_as_line(a, same), style="bold"))
        if a.roles:
            console.print(_roles_table(a))
            note = partitions_note(a) if a.warp_specialized and a.partitions else None
            if note:
                console.print(Text(note, style="yellow"))
        if a.summary.is_kernel:  # else every row would repeat the headline's reason
            console.print(_findings_table(a))
        console.print(Text(a.headline(), style=_OUTCOME_STYLE[a.outcome.value]))
        for line in a.look_next():
            console.print(plain(line))
        for line in ncu_rule_lines(a.summary):
            console.print(Text.assemble(("ncu ", "dim"), plain(line)))
        gains = a.gains()
        for g in gains:
            console.print(Text.assemble(("gain ", "bold"), (g.finding, "bold red"), ": ", plain(f"{g.text()}: {g.basis}")))
        if len(gains) > 1:
            console.print(plain(OVERLAP), style="dim")
        for f in a.by_gain():
            console.print(Text.assemble(("remedy ", "bold"), (f.id, "bold red"), ": ", plain(f.remedy)))
        console.print()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None  # JSON has no NaN; strict parsers reject it
    if dataclasses.is_dataclass(obj):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    return obj


def analyses_json(analyses: list[KernelAnalysis]) -> str:
    return json.dumps({"wsperf_version": version(), "kernels": [analysis_dict(a) for a in analyses]}, indent=2,
                      default=str, allow_nan=False)


# Two findings of one launch often read one cause (consumers waiting: producer-bound and
# partition-bound); their estimates are not to be added.
OVERLAP = "each estimate is for fixing that finding alone; they overlap and do not add up"


def gain_dict(g: Any) -> dict[str, Any] | None:
    """A finding's estimated gain for JSON: shares of the launch's duration and nanoseconds."""
    if g is None:
        return None
    ns = g.ns
    return {"low": round(g.low, 4), "high": round(g.high, 4), "ns_low": round(ns[0]) if ns else None,
            "ns_high": round(ns[1]) if ns else None, "basis": g.basis}


def analysis_dict(a: KernelAnalysis) -> dict[str, Any]:
    s = a.summary
    gains = {g.finding: g for g in a.gains()}
    return {
        "report": s.report,
        "launch_id": s.launch_id,
        "name": s.name,
        "demangled": s.demangled,
        "mangled": s.mangled,
        "workload": s.workload,
        "arch": s.arch,
        "device": s.device,
        "grid": list(s.grid),
        "block": list(s.block),
        "cluster": list(s.cluster),
        "registers_per_thread": s.registers_per_thread,
        "static_smem_bytes": s.static_smem_bytes,
        "dynamic_smem_bytes": s.dynamic_smem_bytes,
        "duration_ns": _jsonable(s.duration_ns),
        "families": _jsonable(s.families),
        "warp_specialized": a.warp_specialized,
        "warp_specialized_basis": a.warp_specialized_basis,
        "outcome": a.outcome.value,
        "headline": a.headline(),
        "look_next": a.look_next(),
        "roles": [dict(_jsonable(r), label=a.role_label(r.role), top_stalls=[{"reason": x, "samples": n} for x, n in r.top_stalls])
                  for r in a.roles],
        "partitions": [dict(_jsonable(p), top_stalls=[{"reason": x, "samples": n} for x, n in p.top_stalls])
                       for p in a.partitions],
        "findings": [{"id": f.id, "status": f.status.value, "summary": f.summary,
                      "evidence": _jsonable(f.evidence), "remedy": f.remedy, "gain": gain_dict(gains.get(f.id))}
                     for f in a.findings],
        "fix_first": [f.id for f in a.by_gain()],
        "ncu_rules": _jsonable(s.ncu_rules),
    }


def analyses_markdown(analyses: list[KernelAnalysis]) -> str:
    # Several reports: each launch says which one it came from.
    several = len({a.summary.report for a in analyses}) > 1
    out = ["| launch | " + ("report | " if several else "") + "kernel | grid / block / cluster | duration | tensor | "
           "copies | warp-specialized | verdict |",
           "| ---: | " + ("--- | " if several else "") + "--- | --- | ---: | --- | --- | --- | --- |"]
    for a in analyses:
        s, f = a.summary, a.summary.families
        confirmed = md(a.headline())
        report = f"{md(s.report.rsplit('/', 1)[-1])} | " if several else ""
        out.append(
            f"| {s.launch_id} | {report}{md(s.name if s.is_kernel else workload_text(s))} | "
            f"{f'{dims(s.grid)} / {dims(s.block)} / {_cluster(s)}' if s.is_kernel else 'n/a'} | "
            f"{duration(s.duration_ns)} | {f.tensor} | {_copies(f)} | {md(ws_text(a))} | {confirmed} |"
        )
    for a, same in group_identical(analyses):
        out += ["", f"### launch {a.summary.launch_id}: {md(a.summary.name)}", ""]
        out += [f"*{md(same_as_line(a, same))}*", ""] if same else []
        if a.summary.is_kernel:  # else every row would repeat the headline's reason
            out += ["| hypothesis | verdict | evidence |", "| --- | --- | --- |"]
            out += [f"| {f.id} | **{f.status.value}** | {md(f.summary)} |" for f in a.findings]
        else:
            out += [md(a.headline())]
        out += ["", *[f"- {md(line)}" for line in a.look_next()]] if a.look_next() else []
        rules = ncu_rule_lines(a.summary)
        out += ["", "Nsight Compute's rules:", "", *[f"- {md(line)}" for line in rules]] if rules else []
        gains = a.gains()
        out += ["", "Estimated gains, the biggest first" + (f" ({OVERLAP})" if len(gains) > 1 else "") + ":", "",
                *[f"- **{g.finding}**: {md(g.text())}: {md(g.basis)}" for g in gains]] if gains else []
        for f in a.by_gain():
            out += ["", f"*Remedy for {f.id}:* {md(f.remedy)}"]
    return "\n".join(out) + "\n"


def _static_lines(k: Any) -> list[str]:
    c = k.compiler
    lines = [f"cubin {k.cubin_arch}: stack {_num(k.stack_bytes)} B, local {_num(k.local_bytes)} B per thread"]
    if c is not None:
        lines.append(f"ptxas: {_num(c.registers)} registers, {_num(c.stack_bytes)} B stack frame, "
                     f"{_num(c.spill_store_bytes)} B spill stores, {_num(c.spill_load_bytes)} B spill loads")
    return lines


def inspection_text(ins: Any, console: Console) -> None:
    """`wsperf inspect`: each file's compiler notes, then every kernel as `analyze` shows a
    launch, with what only the binary and the compiler tell."""
    for f in ins.files:
        others = [a for a in f.archs if a != f.arch]
        console.print(plain(f"{f.path}: {f.arch}" + (f" (also holds {', '.join(others)}; pick one with --arch)"
                                                     if others else "")))
        for m in f.compiler_messages:
            console.print(Text.assemble(("compiler ", "yellow"), plain(m)))
    console.print()
    for k in ins.kernels:
        for line in _static_lines(k):
            console.print(plain(f"{k.analysis.summary.name}: {line}"))
        analyses_text([k.analysis], console)


def inspection_json(ins: Any) -> str:
    kernels = [dict(analysis_dict(k.analysis), cubin_arch=k.cubin_arch, stack_bytes=k.stack_bytes,
                    local_bytes=k.local_bytes, compiler=_jsonable(k.compiler)) for k in ins.kernels]
    return json.dumps({"files": _jsonable(ins.files), "kernels": kernels}, indent=2, default=str)


def inspection_markdown(ins: Any) -> str:
    notes = [f"- {md(f.path)}: {md(m)}" for f in ins.files for m in f.compiler_messages]
    head = ["Compiler notes:", "", *notes, ""] if notes else []
    return "\n".join(head) + analyses_markdown([k.analysis for k in ins.kernels])


def environment_text(env: Environment, console: Console) -> None:
    t = Table(title="wsperf doctor", title_justify="left")
    t.add_column("check", style="cyan")
    t.add_column("found")
    t.add_column("where / note")
    t.add_row("python", env.python, env.platform)
    t.add_row("wsperf", env.wsperf, "")
    for name, version in env.packages.items():
        found = _package_found(name, version)
        t.add_row(name, version or Text(found, style="red" if found == "MISSING" else "yellow"), "")
    for tool in env.tools:
        t.add_row(tool.name, plain(tool.version) if tool.version else Text("not found", style="yellow"),
                  plain(tool.path or tool.note))
    if env.gpus:
        for g in env.gpus:
            t.add_row(f"gpu {g.index}", plain(g.name), f"{g.arch} (cc {g.compute_capability}), driver {g.driver}")
    else:
        t.add_row("gpu", Text("none", style="yellow"), plain(env.gpu_note))
    console.print(t)


def _package_found(name: str, version: str | None) -> str:
    """A package's version; else MISSING for one wsperf needs, `not installed` for one a
    repro may use (torch, triton, TVM, CuTe DSL), as JSON's null says."""
    return version or ("MISSING" if name in ("ncu-report", "duckdb") else "not installed")


def environment_json(env: Environment) -> str:
    d = _jsonable(env)
    d["gpus"] = [dict(_jsonable(g), arch=g.arch) for g in env.gpus]
    return json.dumps({"wsperf_version": version(), **d}, indent=2)


def environment_markdown(env: Environment) -> str:
    """`wsperf doctor -f markdown`: the same checks as a table for an issue or a PR."""
    rows = [("python", env.python, env.platform), ("wsperf", env.wsperf, "")]
    rows += [(n, _package_found(n, v), "") for n, v in env.packages.items()]
    rows += [(t.name, t.version or "not found", t.path or t.note) for t in env.tools]
    rows += ([(f"gpu {g.index}", g.name, f"{g.arch} (cc {g.compute_capability}), driver {g.driver}")
              for g in env.gpus] or [("gpu", "none", env.gpu_note)])
    out = ["| check | found | where / note |", "| --- | --- | --- |"]
    out += [f"| {md(a)} | {md(b)} | {md(c or '')} |" for a, b, c in rows]
    return "\n".join(out) + "\n"


def records_table(columns: list[str], rows: Iterable[tuple], console: Console) -> None:
    t = Table()
    for c in columns:
        t.add_column(plain(c))  # Table(*headers) takes Text for a Column
    for r in rows:
        t.add_row(*[plain("NULL" if v is None else v) for v in r])
    console.print(t)


# ---------------------------------------------------------------------------------------
# the correctness path (exit 3) and the deadlock path (exit 4)

_BASIS_STYLE = {"evidence": "green", "assumption": "yellow"}


def _site_where(s: Any) -> str:
    f = s.source_file.rsplit("/", 1)[-1] if s.source_file else "?"
    return f"{f}:{s.source_line if s.source_line is not None else '?'}"


def _worksheet_table(items: Iterable[Any], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("item", style="cyan", no_wrap=True)
    t.add_column("basis", no_wrap=True)
    t.add_column("says")
    for i in items:
        t.add_row(i.aspect, Text(i.basis.value, style=_BASIS_STYLE[i.basis.value]), plain(i.text))
    return t


def _correctness_headline(rep: Any) -> str:
    """Who found the errors: the sanitizer, the repro's own check, or both."""
    by = {r.tool for r in rep.runs if r.errors}
    if by == {"repro"}:
        return "The repro's own run failed: no performance advice until it passes."
    if "repro" in by:
        return "The sanitizer found correctness errors, and the repro's own run failed: no performance advice " \
               "until they are fixed."
    return "The sanitizer found correctness errors: no performance advice until they are fixed."


def correctness_text(rep: Any, console: Console) -> None:
    console.print(Text(_correctness_headline(rep), style="bold red"))
    t = Table(title="sanitizer runs", title_justify="left")
    for c in ("tool", "file", "records", "errors"):
        t.add_column(c, justify="right" if c in ("records", "errors") else "left")
    for r in rep.runs:
        t.add_row(r.tool or "?", plain(r.source), str(r.records),
                  Text(str(r.errors), style="bold red" if r.errors else "green"))
    console.print(t)
    for g in rep.groups:
        console.print()
        console.print(Text.assemble(("handoff broken: ", "bold"), (g.handoff.value, "bold red"),
                                    f"  ({g.findings} finding{'s' if g.findings != 1 else ''} in {g.records} "
                                    f"record{'s' if g.records != 1 else ''}; {', '.join(g.tools)}; "
                                    "kernels: ", plain(", ".join(g.kernels) or "?"), ")"))
        for m in g.messages:
            console.print(Text.assemble("  ", plain(m)))
        st = Table(title="sites", title_justify="left")
        for c in ("kernel", "line", "access", "warps", "role", "findings", "source"):
            st.add_column(c)
        for s in g.sites:
            role = Text(f"{s.role} ({s.role_basis.value})", style=_BASIS_STYLE[s.role_basis.value]) if s.role \
                else Text("unknown", style="yellow")
            st.add_row(plain(s.kernel or "?"), plain(_site_where(s)), plain(s.access or "-"),
                       ", ".join(map(str, s.warps)) or "-", role, str(s.findings), plain(s.source_text or ""))
        console.print(st)
        console.print(_worksheet_table(g.worksheet, f"worksheet: {g.handoff.value}"))
    for m in rep.other_errors:
        console.print(Text.assemble(("also: ", "bold"), plain(m)))


def correctness_json(rep: Any) -> str:
    return json.dumps({"outcome": "correctness", "exit_code": 3, "sanitizer_runs": _jsonable(rep.runs),
                       "handoffs": _jsonable(rep.groups), "other_errors": list(rep.other_errors)}, indent=2)


def correctness_markdown(rep: Any) -> str:
    out = [f"**{_correctness_headline(rep)}**", "",
           "| tool | file | records | errors |", "| --- | --- | ---: | ---: |"]
    out += [f"| {r.tool or '?'} | {md(r.source)} | {r.records} | {r.errors} |" for r in rep.runs]
    for g in rep.groups:
        out += ["", f"### {g.handoff.value} ({g.findings} findings; {', '.join(g.tools)})", "",
                "| kernel | line | access | warps | role | findings |", "| --- | --- | --- | --- | --- | ---: |"]
        out += [f"| {md(s.kernel or '?')} | {md(_site_where(s))} | {md(s.access or '-')} | "
                f"{', '.join(map(str, s.warps)) or '-'} | "
                f"{s.role + ' (' + s.role_basis.value + ')' if s.role else 'unknown'} | {s.findings} |"
                for s in g.sites]
        out += ["", "| item | basis | says |", "| --- | --- | --- |"]
        out += [f"| {i.aspect} | {i.basis.value} | {md(i.text)} |" for i in g.worksheet]
    out += ["", *[f"- also: {md(m)}" for m in rep.other_errors]]
    return "\n".join(out) + "\n"


def _warps(ws: Iterable[tuple[tuple[int, int, int], int]]) -> str:
    """Warps grouped by the blocks that hold the same ones, ranges shortened: 'blocks 0-7:
    warps 0-3 (32 warps)' for what was 32 items of 'block (x,y,z) warp w'."""
    by_block: dict[tuple[int, int, int], set[int]] = {}
    for b, w in ws:
        by_block.setdefault(tuple(b), set()).add(w)
    groups: dict[frozenset[int], list[tuple[int, int, int]]] = {}
    for b in sorted(by_block):
        groups.setdefault(frozenset(by_block[b]), []).append(b)
    parts = []
    for warps, blocks in groups.items():
        if all(b[1] == 0 and b[2] == 0 for b in blocks):
            where = ("block " if len(blocks) == 1 else "blocks ") + id_ranges(b[0] for b in blocks)
        else:
            where = ("block " if len(blocks) == 1 else "blocks ") + ", ".join(f"({x},{y},{z})" for x, y, z in blocks)
        parts.append(f"{where}: {'warp' if len(warps) == 1 else 'warps'} {id_ranges(warps)}")
    n = sum(len(w) for w in by_block.values())
    return "; ".join(parts) + (f" ({n} warps)" if len(parts) > 1 or n > 1 else "")


def deadlock_text(rep: Any, console: Console) -> None:
    console.print(Text.assemble(("Deadlock: ", "bold red"), plain(rep.hung)))
    if rep.kernels:
        console.print(Text.assemble("kernels: ", plain(", ".join(rep.kernels)),
                                    f"; resident warps: {rep.resident_warps}"))
    if rep.note:
        console.print(Text.assemble(("note: ", "yellow"), plain(rep.note)))
    if rep.groups:
        t = Table(title="where each role waits", title_justify="left")
        for c in ("role", "waits on", "instruction", "offset", "source", "warps"):
            t.add_column(c)
        for g in rep.groups:
            role = Text(f"{g.role} ({g.role_basis.value})", style="yellow") if g.role else Text("unknown")
            t.add_row(role, g.wait.value, plain(g.instruction), f"{g.offset:#x}", plain(g.source or "?"),
                      plain(_warps(g.warps)))
        console.print(t)
    console.print(_worksheet_table(rep.causes, "likely causes"))


def deadlock_json(rep: Any) -> str:
    return json.dumps({"outcome": "deadlock", "exit_code": 4, **_jsonable(rep)}, indent=2)


def deadlock_markdown(rep: Any) -> str:
    out = [f"**Deadlock:** {md(rep.hung)}", ""]
    if rep.note:
        out += [f"*note:* {md(rep.note)}", ""]
    if rep.groups:
        out += ["| role | waits on | instruction | offset | source | warps |", "| --- | --- | --- | --- | --- | --- |"]
        out += [f"| {g.role + ' (' + g.role_basis.value + ')' if g.role else 'unknown'} | {g.wait.value} | {md(g.instruction)} | "
                f"{g.offset:#x} | {md(g.source or '?')} | {md(_warps(g.warps))} |" for g in rep.groups]
        out.append("")
    out += ["| item | basis | says |", "| --- | --- | --- |"]
    out += [f"| {i.aspect} | {i.basis.value} | {md(i.text)} |" for i in rep.causes]
    return "\n".join(out) + "\n"
