"""The handoff rule, as every command that reads bundles applies it: a hang gets the
deadlock report (exit 4), sanitizer errors in the user's kernels the correctness report
(exit 3), incomplete sanitizer evidence the unverified report (exit 5); only then do
performance verdicts follow. Findings inside library kernels (cuBLAS, cuDNN, ...) and
acceptances recorded at collect time travel with the verdicts as caveats."""

from __future__ import annotations

import dataclasses

import json
import sys
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text

from wsperf.analyses.evidence import Evidence, Verification
from wsperf.cli import render
from wsperf.cli.common import emit, out
from wsperf.cli.render import OutputFormat, md, md_code, plain
from wsperf.cli.table import Table
from wsperf.collectors.errors import ExitCode

if TYPE_CHECKING:
    from wsperf.analyses.correctness import CorrectnessReport, DeadlockReport
    from wsperf.analyses.handoffs import RaceAccess, ReleaseClass

    # What a correctness stop prints: the findings, the bundle's verification, how each role
    # releases the stage racecheck names, and the PTX behind each side of each race.
    _Correctness = tuple[CorrectnessReport, Verification | None, tuple[ReleaseClass, ...], tuple[RaceAccess, ...]]


@dataclass(frozen=True)
class Caveat:
    """One caveat on the verdicts, as data: its kind, what it counts and where, and the
    sentence a reader gets (text, Markdown, REPORT.md). Kinds: `scope` (what the sanitizer
    checked), `sanitizer-retry` (a tool run again without its kernel filter),
    `vendor-kernel`, `filter-artifact`, `sass-artifact`, `toolchain-protocol`,
    `accepted-race`, `unverified`. JSON gives every field."""

    kind: str
    text: str
    tool: str | None = None
    kernel: str | None = None
    library: str | None = None
    findings: int | None = None
    hazards: int | None = None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Gate:
    """What the handoff rule decided: the exit code so far, and the caveats every
    verdict printed after it must carry."""

    code: int
    caveats: tuple[Caveat, ...]
    outcome: str = "clean"  # hang | correctness | unverified | clean
    markdown: str = ""  # the report the rule called for, as Markdown (REPORT.md quotes it)
    experiments: tuple[str, ...] = ()  # falsifiable checks of the causes it names
    # Inputs that may not belong together, when the report printed said so (JSON's `warnings`;
    # the caller says each on stderr)
    warnings: tuple[str, ...] = ()

    def allows_verdicts(self, allow_unverified: bool) -> bool:
        return self.code == ExitCode.OK or (self.code == ExitCode.UNVERIFIED and allow_unverified)


def handoff(evidence: Evidence, fmt: OutputFormat, allow_unverified: bool = False,
            missing: tuple[str, ...] = (), unrelated: Callable[[], tuple[str, ...]] = tuple) -> Gate:
    """Apply the rule to `evidence`, printing the report it calls for. `missing`: what this
    machine lacks for a check (collect's problems: no GPU, no compute-sanitizer), said first;
    `unrelated()`: warnings that the inputs may not belong together, asked for only when a
    report is printed (JSON carries them as `warnings`; the Gate hands them back)."""
    if evidence.hang is None and not evidence.sanitizer and evidence.verification is None:
        return Gate(ExitCode.OK, ())  # reports alone: they claim nothing about correctness
    warned: dict[str, tuple[str, ...]] = {}  # "unrelated": unrelated(), once a report is printed

    def report(value, text, as_json, as_markdown) -> None:  # type: ignore[no-untyped-def]
        if "unrelated" not in warned:
            warned["unrelated"] = tuple(unrelated())
        emit(fmt, value, text, with_warnings(as_json, warned["unrelated"]), as_markdown)

    # Imported only where there is evidence to judge (start-up time, not a cycle): the
    # sanitizer findings, the handoff worksheet and cuda-gdb's parser cost ~0.17 s to import,
    # a tenth of a one-report `wsperf analyze`.
    from wsperf.analyses.handoffs import accepted_races, deadlock, evidence_correctness, race_accesses, races

    code = ExitCode.OK
    said = ""
    if evidence.hang is not None:
        rep = deadlock(evidence)
        report(rep, _deadlock_text, render.deadlock_json, _deadlock_markdown)
        code, said = ExitCode.DEADLOCK, _deadlock_markdown(rep)
        tried = tuple(_deadlock_experiments(rep))
    corr = evidence_correctness(evidence)
    ver = evidence.verification
    excused = accepted_races(list(evidence.sheets), corr, ver.accepted) if ver is not None else ()
    if corr.broken and not excused:
        value = (corr, ver, races(evidence, corr), race_accesses(list(evidence.sheets), corr))
        report(value, _correctness_text, _correctness_json, _correctness_markdown)
        return Gate(code or ExitCode.CORRECTNESS, (), "hang" if code else "correctness",
                    said + _correctness_markdown(value),
                    (tried if code else ()) + tuple(dict.fromkeys(
                        f"{r.release.value} on {r.barrier} ({r.role}): {r.check}" for r in value[2])),
                    warnings=warned.get("unrelated", ()))
    caveats = _checked_caveats(ver) + _not_counted_caveats(corr)
    if excused:
        hazards = sum(g.findings for g in corr.groups)
        caveats.append(Caveat("accepted-race", f"accepted at collect time (--accept-race {', '.join(excused)}): "
                              f"{hazards} racecheck finding(s) on stages released that way did not stop this bundle; "
                              "the falsifiable check: " + "; ".join(dict.fromkeys(r.check for r in races(evidence, corr))),
                              tool="racecheck", findings=hazards))
    if code:
        return Gate(code, tuple(caveats), "hang", said, tried, warnings=warned.get("unrelated", ()))
    if ver is not None and not ver.verified:
        caveats = [Caveat("unverified", f"correctness unverified: {p}") for p in ver.problems] + caveats
        if not allow_unverified or fmt is not OutputFormat.json:
            report(ver, lambda v, console: _unverified_text(v, console, missing),
                   lambda v: _unverified_json(v, missing), lambda v: _unverified_markdown(v, missing))
        return Gate(ExitCode.UNVERIFIED, tuple(caveats), "unverified", _unverified_markdown(ver, missing),
                    warnings=warned.get("unrelated", ()))
    return Gate(ExitCode.OK, tuple(caveats))


def with_warnings(as_json, warnings: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """`as_json` with the `warnings` (inputs that may not belong together, said on stderr
    too) as the document's `warnings` list, when there are any."""
    if not warnings:
        return as_json

    def doc(value) -> str:  # type: ignore[no-untyped-def]
        d = json.loads(as_json(value))
        return json.dumps({**d, "warnings": list(warnings)} if isinstance(d, dict)
                          else {"result": d, "warnings": list(warnings)}, indent=2)

    return doc


def with_caveats(fmt: OutputFormat, caveats: tuple[Caveat, ...], verdicts, text, as_json, as_markdown,
                 warnings: tuple[str, ...] = ()) -> None:
    """Emit performance verdicts with the gate's caveats: a `caveats` list in JSON, a
    quoted paragraph in Markdown, yellow lines before the text; JSON also carries the
    `warnings` (with_warnings)."""
    as_json = with_warnings(as_json, warnings)
    if not caveats:
        emit(fmt, verdicts, text, as_json, as_markdown)
    elif fmt is OutputFormat.json:
        doc = json.loads(as_json(verdicts))
        items = [dataclasses.asdict(c) for c in caveats]
        doc = {"caveats": items, **doc} if isinstance(doc, dict) else {"caveats": items, "result": doc}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif fmt is OutputFormat.markdown:
        sys.stdout.write("".join(f"> **Caveat:** {md(c)}\n>\n" for c in caveats) + "\n" + as_markdown(verdicts))
    else:
        for c in caveats:
            out.print(Text.assemble(("Caveat: ", "bold yellow"), plain(c)), soft_wrap=True)
        text(verdicts, out)


def no_profile(fmt: OutputFormat, gate: Gate) -> None:
    """What a bundle without a profile gets: the outcome and its caveats (JSON: one
    document, `kernels` empty)."""
    said = ("The sanitizer found no error in your kernels" if gate.code == ExitCode.OK else "Correctness unverified") \
        + "; no Nsight Compute report to analyze."
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps({"outcome": "clean" if gate.code == ExitCode.OK else "unverified",
                                     "caveats": [dataclasses.asdict(c) for c in gate.caveats], "kernels": []},
                                    indent=2) + "\n")
        return
    for c in gate.caveats:
        out.print(Text.assemble(("Caveat: ", "bold yellow"), plain(c)), soft_wrap=True)
    out.print(plain(said))


def _deadlock_experiments(rep: DeadlockReport) -> list[str]:
    """One check per cause the worksheet decided: the change, and what must then happen."""
    out = []
    for h in rep.handoffs:
        if h is None:
            continue
        for f in h.flags:
            if "init with " in f:
                n = f.rsplit("init with ", 1)[1].split()[0].rstrip(".;")
                out.append(f"initialize {h.barrier} with count {n} (not {', '.join(map(str, dict.fromkeys(h.init_counts)))}):"
                           " the repro must finish within --timeout and `wsperf collect` exit 0 or go on to the "
                           "sanitizer")
    if not out and any(c.basis.value == "evidence" and "parity" in c.text for c in rep.causes):
        waits = [h for h in rep.handoffs if h is not None]
        out.append("make each role's first wait on a fresh barrier pass at once (the producer waits on "
                   + ", ".join(sorted({h.barrier for h in waits if h.role.startswith("producer")}) or {"empty"})
                   + " for parity ((k / STAGES) & 1) ^ 1): the repro must finish within --timeout")
    return list(dict.fromkeys(out))


def _not_counted(corr: CorrectnessReport) -> list[str]:
    """Findings that did not stop the bundle, one line each: inside library kernels, caused
    by the sanitizer's kernel filter, or answered by the machine code."""
    return _vendor_caveats(corr) + [a.text for a in corr.set_aside]


def _checked_caveats(ver: Verification | None) -> list[Caveat]:
    """`_checked` as caveats: the sanitizer's scope, and each tool run again unfiltered."""
    if ver is None:
        return []
    return ([Caveat("scope", ver.scope, kernel=", ".join(ver.scope_kernels) or None)] if ver.scope else []) + [
        Caveat("sanitizer-retry", r, tool=next((t for t in ("memcheck", "racecheck", "initcheck", "synccheck")
                                                if t in r), None)) for r in ver.retried]


def _not_counted_caveats(corr: CorrectnessReport) -> list[Caveat]:
    """`_not_counted` as caveats, each with its kind, tool, kernel, counts and (for a
    library kernel) library."""
    return [Caveat("vendor-kernel", text, tool=v.tool, kernel=v.kernel, library=None if v.library == "?" else v.library,
                   findings=v.findings, hazards=v.hazards or None)
            for v, text in zip(corr.vendor, _vendor_caveats(corr))] + \
        [Caveat(a.kind, a.text, tool=a.tool, kernel=a.kernel, findings=a.findings, hazards=a.hazards or None)
         for a in corr.set_aside]


def _vendor_caveats(corr: CorrectnessReport) -> list[str]:
    return [f"{v.tool or 'the sanitizer'} reported {v.findings} finding(s)"
            + (f" ({v.hazards:,} hazards)" if v.hazards else "")
            + (f" inside {v.library}'s kernel {v.kernel}: a library kernel" if v.library != "?" else
               f" inside {v.kernel}, a kernel the repro did not compile (PyTorch's or a library's)")
            + ", not a handoff of yours; listed, not judged (name it with --kernel to judge it)" for v in corr.vendor]


# ---------------------------------------------------------------------------------------
# renderers: the correctness report with what the gate adds, and the unverified report


def _correctness_text(value: _Correctness, console) -> None:
    corr, ver, rel, acc = value
    render.correctness_text(corr, console)
    if rel:
        t = Table(title="how each role releases the stage it read (from the generated PTX)", title_justify="left")
        for c in ("kernel", "barrier", "role", "release", "evidence", "check"):
            t.add_column(c)
        for r, name in zip(rel, render.distinct_names(r.kernel for r in rel)):
            t.add_row(plain(name), plain(r.barrier), plain(r.role),
                      Text(r.release.value, style="yellow" if r.release.value == "warp-synced-single-lane-release"
                           else "red" if r.release.value == "unsynced-single-lane-release" else ""),
                      plain(r.evidence + (f" ({r.source})" if r.source else "")), plain(r.check))
        console.print(t)
    if acc:
        t = Table(title="the racing accesses in the generated PTX (racecheck's source lines)", title_justify="left")
        for c in ("kernel", "access", "source", "PTX", "what"):
            t.add_column(c)
        for a, name in zip(acc, render.distinct_names(a.kernel for a in acc)):
            t.add_row(plain(name), plain(a.access), plain(a.source),
                      plain("; ".join(f"line {n}: {i}" for n, i in zip(a.ptx_lines, a.instructions))
                            + (f"; {'after' if a.access == 'read' else 'before'} {a.barrier}" if a.barrier else "")),
                      plain(a.what))
        console.print(t)
    for c in _not_counted(corr):
        console.print(Text.assemble(("not counted: ", "bold yellow"), plain(c)), soft_wrap=True)
    for c in _checked(ver):
        console.print(Text.assemble(("scope: ", "bold yellow"), plain(c)), soft_wrap=True)
    if ver is not None and not ver.verified:
        for p in ver.problems:
            console.print(Text.assemble(("also unverified: ", "bold yellow"), plain(p)), soft_wrap=True)


def _checked(ver: Verification | None) -> list[str]:
    """What the sanitizer checked (when not every kernel) and what ran again without its filter."""
    return ([ver.scope] if ver.scope else []) + list(ver.retried) if ver is not None else []


def _deadlock_text(rep: DeadlockReport, console) -> None:
    render.deadlock_text(rep, console)
    rows = [(g, h) for g, h in zip(rep.groups, rep.handoffs) if h is not None]
    if rows:
        t = Table(title="the barrier each group waits on (worksheet of the generated code)", title_justify="left")
        for c in ("role", "barrier", "init count", "arrivals/phase", "parity", "PTX wait", "arrivers"):
            t.add_column(c)
        for g, h in rows:
            t.add_row(plain(h.role), plain(h.barrier), ", ".join(str(c) for c in dict.fromkeys(h.init_counts)),
                      str(h.arrivals_per_phase if h.arrivals_per_phase is not None else "?"), plain(h.parity or "?"),
                      plain(f"line {h.ptx_line} ({h.source})"), plain("; ".join(h.arrivers)))
        console.print(t)
    if rep.settle:
        console.print(Text.assemble(("to settle it: ", "bold yellow"), plain(rep.settle)), soft_wrap=True)


def _deadlock_markdown(rep: DeadlockReport) -> str:
    out = render.deadlock_markdown(rep)
    rows = [(g, h) for g, h in zip(rep.groups, rep.handoffs) if h is not None]
    if rows:
        out += "\n| role | barrier | init count | arrivals/phase | parity | PTX wait |\n| --- | --- | --- | --- | --- | --- |\n"
        out += "".join(f"| {md(h.role)} | {md(h.barrier)} | {', '.join(str(c) for c in dict.fromkeys(h.init_counts))} "
                       f"| {h.arrivals_per_phase if h.arrivals_per_phase is not None else '?'} | {md(h.parity or '?')} "
                       f"| line {h.ptx_line} ({md(h.source)}) |\n" for _, h in rows)
    if rep.settle:
        out += f"\n*To settle it:* {md(rep.settle)}\n"
    return out


def _gate_fields(corr: CorrectnessReport, ver: Verification | None) -> dict:
    return {"vendor_findings": [v.__dict__ for v in corr.vendor], "filter_artifacts": list(corr.filter_artifacts),
            "sass_artifacts": list(corr.sass_artifacts),
            "toolchain_protocol": list(corr.toolchain_protocol),
            "kernel_filter": corr.kernel_filter,
            "verification": None if ver is None else {"verified": ver.verified, "problems": list(ver.problems),
                                                      "tools": list(ver.tools), "accepted": list(ver.accepted),
                                                      "scope": ver.scope, "retried": list(ver.retried)}}


def _releases(rel: tuple[ReleaseClass, ...]) -> list[dict]:
    return [{"kernel": r.kernel, "barrier": r.barrier, "role": r.role, "release": r.release.value,
             "ptx_line": r.arrive_line, "source": r.source, "evidence": r.evidence, "check": r.check} for r in rel]


def _accesses(acc: tuple[RaceAccess, ...]) -> list[dict]:
    return [{"kernel": a.kernel, "access": a.access, "source": a.source, "ptx_lines": list(a.ptx_lines),
             "instructions": list(a.instructions), "what": a.what, "barrier": a.barrier} for a in acc]


def _correctness_json(value: _Correctness) -> str:
    corr, ver, rel, acc = value
    return json.dumps({**json.loads(render.correctness_json(corr)), **_gate_fields(corr, ver),
                       "releases": _releases(rel), "race_accesses": _accesses(acc)}, indent=2)


def _correctness_markdown(value: _Correctness) -> str:
    corr, ver, rel, acc = value
    extra = [f"- not counted: {md(c)}" for c in _not_counted(corr)] + [f"- scope: {md(c)}" for c in _checked(ver)]
    extra += [f"- release on {md_code(r.barrier)} by {md(r.role)}: **{r.release.value}** ({md(r.evidence)}); check: "
              f"{md(r.check)}" for r in rel]
    extra += [f"- racing {a.access} at {md_code(a.source)}: PTX "
              + ", ".join(f"line {n} {md_code(i)}" for n, i in zip(a.ptx_lines, a.instructions))
              + (f", {'after' if a.access == 'read' else 'before'} {md_code(a.barrier)}" if a.barrier else "")
              + f": {md(a.what)}" for a in acc]
    if ver is not None and not ver.verified:
        extra += [f"- also unverified: {md(p)}" for p in ver.problems]
    return render.correctness_markdown(corr) + ("\n" + "\n".join(extra) + "\n" if extra else "")


_UNVERIFIED = ("Correctness is unverified: the sanitizer's evidence is incomplete, so no performance verdicts "
               "are given (exit 5).")
_NEXT = ("Collect again (a larger --timeout, or --kernel to check only your kernel), or pass --allow-unverified "
         "to see the verdicts marked unverified.")


def _missing_lines(missing: tuple[str, ...]) -> tuple[str, str]:
    """The headline and the next step when this machine lacks what a check needs."""
    return (f"Correctness cannot be checked on this machine: {'; '.join(missing)}.",
            "Install what is missing (or run collect on a machine with an NVIDIA GPU and the CUDA toolkit), "
            "then collect again.")


def _unverified_text(ver: Verification, console, missing: tuple[str, ...] = ()) -> None:
    head, after = _missing_lines(missing) if missing else (_UNVERIFIED, _NEXT)
    console.print(Text(head, style="bold red" if missing else "bold yellow"), soft_wrap=bool(missing))
    # what the bundle lacks follows from what the machine lacks: one line, not a bullet per tool
    for p in ver.problems[:1] if missing else ver.problems:
        console.print(Text.assemble("  - ", plain(p)), soft_wrap=True)
    if ver.tools:
        console.print(plain(f"  read whole: {', '.join(ver.tools)}"))
    console.print(plain(after))


def _unverified_json(ver: Verification, missing: tuple[str, ...] = ()) -> str:
    return json.dumps({"outcome": "unverified", "exit_code": ExitCode.UNVERIFIED, "missing": list(missing),
                       "problems": list(ver.problems), "tools_read": list(ver.tools),
                       "next": _missing_lines(missing)[1] if missing else _NEXT}, indent=2)


def _unverified_markdown(ver: Verification, missing: tuple[str, ...] = ()) -> str:
    head, after = _missing_lines(missing) if missing else (_UNVERIFIED, _NEXT)
    lines = [f"**{md(head)}**", ""] + [f"- {md(p)}" for p in ver.problems]
    if ver.tools:
        lines += ["", f"Read whole: {', '.join(ver.tools)}."]
    return "\n".join(lines + ["", after, ""])
