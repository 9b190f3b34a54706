"""What `wsperf analyze` was given, sorted and checked: sanitizer outputs, a recorded hang,
Nsight Compute reports, and whether the sanitizer evidence may be called clean.

The gate's rule: an outcome is `clean` only when every sanitizer tool the bundle asked
for ran to its end and left a whole, readable XML file. Evidence that is missing, empty,
unreadable, not a regular file (a FIFO, a device, a directory), cut short by a timeout,
written by a tool that failed inside itself ("Internal Sanitizer Error"), or that
contradicts the manifest makes the bundle `unverified`: never clean, no performance
verdicts unless asked for (`--allow-unverified`), exit code 5 (docs/exit-codes.md).
A bundle in which no sanitizer ran at all is unverified too. Reports given directly
(not in a bundle) carry no claim about correctness and are not judged here.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from wsperf.collectors.bundle import Bundle, BundleError, RunRecord, is_bundle, read_bundle, resolve
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import GiB, input_stat

if TYPE_CHECKING:
    from wsperf.analyses.handoffs import GeneratedSheet
    from wsperf.collectors.sanitizer import SanitizerOutput

# How much of a sanitizer run's stdout/stderr is searched for the tool's own failure.
_TOOL_LOG_BYTES = 1 << 20


@dataclass(frozen=True)
class Verification:
    """Whether the sanitizer evidence of the bundles given may be called clean."""

    verified: bool
    problems: tuple[str, ...]  # why not, one sentence each, naming the file or run
    tools: tuple[str, ...]  # tools whose whole XML was read
    accepted: tuple[str, ...] = ()  # release classes the user accepted at collect time (--accept-race)
    # What the sanitizer checked, in a sentence (collectors/scope.py), when not every kernel;
    # and each tool that failed under the kernel filter and was run again without it.
    scope: str | None = None
    retried: tuple[str, ...] = ()
    scope_kernels: tuple[str, ...] = ()  # the kernels the scope names (its --kernel regex, for that mode)


@dataclass(frozen=True)
class Evidence:
    """What `wsperf analyze` was given, loaded: sanitizer outputs, a hang, reports."""

    sanitizer: tuple[tuple[str, SanitizerOutput], ...]
    reports: tuple[Path, ...]
    hang: RunRecord | None = None  # the run that outlived --timeout
    capture: Path | None = None
    sass: Path | None = None
    bundle: Path | None = None
    verification: Verification | None = None  # None: no bundle given (nothing claimed)
    kernel_filter: str | None = None  # the regex the sanitizer was restricted to: --kernel's, or the compiled kernels'
    generated: tuple[tuple[str, Path], ...] = field(default_factory=tuple)  # (kind, path) of generated code
    sheets: tuple[GeneratedSheet, ...] = ()  # the handoff worksheet of every kernel in it (analyses/handoffs.py)
    sheet_problems: tuple[str, ...] = ()  # generated files the worksheet could not read
    timelines: tuple[Path, ...] = ()  # Nsight Systems exports of the bundle (collect --nsys), not loaded
    # The repro's plain run ended with an error (its own check failed, or it crashed):
    # how, and where its output is. A correctness outcome whatever the sanitizer says.
    repro_failed: str | None = None
    mbarriers: Path | None = None  # the barrier words cuda-gdb read during the hang (hang/mbarriers.txt)


def _handoffs() -> Any:
    """analyses.handoffs, imported only for bundles and --source (start-up time, not a
    cycle: with the correctness modules it pulls in, ~0.17 s of a one-report analyze)."""
    from wsperf.analyses import handoffs

    return handoffs


def _sanitizer() -> Any:
    """collectors.sanitizer, imported only for bundles and --sanitizer (start-up time, not
    a cycle: with the XML parser, ~0.05 s of a one-report analyze)."""
    from wsperf.collectors import sanitizer

    return sanitizer


def _generated() -> Any:
    """collectors.generated, imported only for --source (start-up time, not a cycle: with
    the PTX and disassembly modules it pulls in, ~0.04 s of a one-report analyze)."""
    from wsperf.collectors import generated

    return generated


def gather(con: Any, inputs: Iterable[Path], sanitizer_xml: Iterable[Path] = (), sources: Iterable[Path] = ()
           ) -> Evidence:
    """Sort `inputs` into bundles (directories written by collect) and reports, load
    every sanitizer XML into the store `con`, find a recorded hang, check each bundle's
    sanitizer evidence (`Verification`), and fill the handoff worksheet of the generated
    code (the bundle's, and `sources`) into `con` (ws_* tables). Reports are returned,
    not loaded: the caller loads them (with progress) only when the kernel is correct."""
    outputs: list[tuple[str, SanitizerOutput]] = []
    reports: list[Path] = []
    hang = capture = sass = bundle = mbarriers = None
    repro_failed = None
    problems: list[str] = []
    tools: list[str] = []
    accepted: list[str] = []
    generated: list[tuple[str, Path]] = []
    timelines: list[Path] = []
    bundles = 0
    kernel_filter = None
    scope = None
    scope_kernels: tuple[str, ...] = ()
    retried: list[str] = []
    for p in inputs:
        if p.is_dir():
            if not is_bundle(p):
                raise InputError(f"{p}: a directory but not a bundle (no bundle.json); give a directory written by "
                                 "`wsperf collect --out DIR`, or report files")
            b = read_bundle(p)
            bundles += 1
            bundle = p
            got, probs = _bundle_sanitizer(con, b)
            outputs += got
            tools += [o.tool for _, o in got if o.tool]
            problems += probs
            opts = b.manifest.get("options") if isinstance(b.manifest.get("options"), dict) else {}
            if isinstance(opts.get("kernel"), str) and opts["kernel"]:
                kernel_filter = opts["kernel"]
            sc = _scope_of(b.manifest)
            if sc is not None:
                kernel_filter = sc.judged or kernel_filter
                scope = sc.describe() or scope
                scope_kernels = sc.kernels or tuple(filter(None, [sc.pattern])) or scope_kernels
            retried += _retried(b)
            acc = b.manifest.get("accepted")
            if isinstance(acc, list):
                accepted += [a for a in acc if isinstance(a, str)]
            reports += [path for _, path in b.files("profile", "report")]
            timelines += [path for _, path in b.files("nsys", "export")]
            generated += _handoffs().generated_files(b)
            # (a bundle whose sanitizer evidence is itself in doubt is not read for wrong answers)
            repro_failed = _failed_run(b, {} if probs else dict(got)) or repro_failed
            h = _hang(b)
            if h is not None:
                hang = h
                capture = next((path for _, path in b.files("hang", "capture")), None)
                sass = next((path for _, path in b.files("hang", "sass")), None)
                mbarriers = next((path for _, path in b.files("hang", "mbarriers")), None)
        else:
            reports.append(p)
    for x in sanitizer_xml:
        outputs.append(_load_xml(con, x, None, None, label=str(x)))
    sources = list(sources)
    for p in sources:  # a --source that is not a file is the user's mistake, not a damaged bundle's problem
        input_stat(p, kind="generated code (a .cu, .ptx, .cubin, fatbin or binary file)", limit=2 * GiB)
    generated += [(_generated().source_kind(p), p) for p in sources]
    gs, sheet_problems = (_handoffs().sheets(generated, bundle.resolve() if bundle is not None else None)
                          if generated else ([], []))
    if gs:
        _handoffs().store_sheets(con, gs)
        if mbarriers is not None and not _not_regular(mbarriers):
            try:
                _handoffs().store_mbarrier_words(con, mbarriers, gs)
            except OSError as e:
                sheet_problems.append(f"{mbarriers}: {e.strerror or e}")
    verification = None
    if bundles:
        verification = Verification(not problems, tuple(dict.fromkeys(problems)), tuple(dict.fromkeys(tools)),
                                    tuple(dict.fromkeys(accepted)), scope, tuple(dict.fromkeys(retried)),
                                    scope_kernels)
    return Evidence(tuple(outputs), tuple(reports), hang, capture, sass, bundle, verification, kernel_filter,
                    tuple(generated), tuple(gs), tuple(sheet_problems), tuple(timelines), repro_failed, mbarriers)


def _bundle_sanitizer(con: Any, b: Bundle) -> tuple[list[tuple[str, SanitizerOutput]], list[str]]:
    """Load each sanitizer XML the manifest names and say what is wrong with the rest."""
    outputs: list[tuple[str, SanitizerOutput]] = []
    problems: list[str] = []
    opts = b.manifest.get("options") if isinstance(b.manifest.get("options"), dict) else {}
    asked = [t for t in opts.get("tools", []) if isinstance(t, str)] if isinstance(opts.get("tools"), list) else []
    runs = [r for r in b.runs if r.phase == "sanitizer"]
    hung = any(r.timed_out and r.phase == "run" for r in b.runs)
    if not runs and not hung:
        problems.append(f"{b.root}: no sanitizer ran in this bundle (compute-sanitizer missing, or collect was "
                        "stopped before it): correctness is unverified")
    for t in asked:
        if t in _sanitizer().TOOLS and not any(r.tool == t for r in runs) and not hung:
            problems.append(f"{b.root}: compute-sanitizer --tool {t} was asked for but the manifest records no "
                            "run of it")
    for r in runs:
        where = f"{b.root}: compute-sanitizer --tool {r.tool}"
        if r.timed_out:
            problems.append(f"{where} did not finish ({r.note or 'killed at the time limit'})")
            continue
        failure = _tool_failure(b, r)
        if failure:
            problems.append(f"{where} failed inside the tool ({failure}); that is a tool failure, not a finding")
            continue
        rel = r.outputs.get("xml")
        if rel is None:
            problems.append(f"{where} wrote no XML (exit {r.exit_code})")
            continue
        path = resolve(b.root, rel)
        bad = _not_regular(path)
        if bad:
            problems.append(f"{where}: {rel} {bad}")
            continue
        label = str(Path(rel))
        try:
            outputs.append(_load_xml(con, path, r.tool, " ".join(r.argv), label=label))
        except InputError as e:
            problems.append(f"{where}: {rel} cannot be read ({e})")
    recorded = b.manifest.get("outcome")
    # Any error finding at all: a newer wsperf may judge an old bundle's findings otherwise
    # (a library kernel's, a filter's), which is no sign of a changed bundle.
    broken = any(_sanitizer().is_error(f) for _, o in outputs for f in o.findings)
    if recorded == "correctness" and not broken and not problems:
        problems.append(f"{b.root}: the manifest records sanitizer errors (outcome 'correctness') but the XML files "
                        "hold none: the bundle was changed after collect")
    if recorded == "unverified" and not problems:
        problems.append(f"{b.root}: collect recorded the outcome 'unverified' "
                        f"({'; '.join(p for p in b.manifest.get('problems', []) if isinstance(p, str)) or 'no reason'})")
    return outputs, problems


def _not_regular(path: Path) -> str | None:
    """Why `path` is not a whole regular file, or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "is missing"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, device or directory)"
    if st.st_size == 0:
        return "is empty"
    return None


def _tool_failure(b: Bundle, r: RunRecord) -> str | None:
    for rel in (r.stdout, r.stderr):
        if not rel:
            continue
        try:
            p = resolve(b.root, rel)
            if _not_regular(p):
                continue
            with open(p, "rb") as f:
                head = f.read(_TOOL_LOG_BYTES)
        except (OSError, BundleError):
            continue
        failure = _sanitizer().tool_failure(head)
        if failure:
            return failure
    return None


def _load_xml(con: Any, path: Path, tool: str | None, command: str | None, label: str) -> tuple[str, SanitizerOutput]:
    sanitizer = _sanitizer()
    return label, sanitizer.load_sanitizer_xml(con, path, tool=tool if tool in sanitizer.TOOLS else None,
                                               command=command).output


def _scope_of(manifest: dict) -> Any:
    """The manifest's sanitizer scope (collectors/scope.py), or None."""
    if "scope" not in manifest:
        return None
    from wsperf.collectors.scope import SanitizerScope

    return SanitizerScope.from_json(manifest["scope"])


def _failed_run(b: Bundle, read: dict[str, SanitizerOutput]) -> str | None:
    """How the repro's plain run failed ('exit 1', 'was killed by SIGSEGV'), with its
    output files, or that its own check failed under a sanitizer tool only; None when it
    succeeded, timed out (a hang) or is not recorded, and when no sanitizer ran (no GPU or
    no compute-sanitizer: the environment is what failed)."""
    if not any(r.phase == "sanitizer" for r in b.runs):
        return None
    for r in b.runs:
        if r.phase == "run" and r.tool == "repro" and not r.timed_out and r.exit_code not in (0, None):
            where = ", ".join(x for x in (r.stdout, r.stderr) if x)
            return (f"the repro's plain run ended with {r.note or f'exit {r.exit_code}'}: its own check failed or it "
                    f"crashed" + (f" (its output: {where})" if where else ""))
    # A tool's own error findings explain a failure under it (memcheck stops a kernel that
    # writes out of bounds); only a run whose XML was read whole and holds none counts.
    wrong = [r for r in b.runs if r.phase == "sanitizer" and not r.timed_out and r.stdout
             and str(Path(r.outputs.get("xml", ""))) in read
             and not any(_sanitizer().is_error(f) for f in read[str(Path(r.outputs["xml"]))].findings)
             and _sanitizer().target_failed(_head_tail(b, r.stdout), r.exit_code)]
    if wrong:
        return _sanitizer().failed_under([r.tool for r in wrong], [r.stdout for r in wrong])
    return None


def _head_tail(b: Bundle, rel: str) -> bytes:
    """The start and the end of a run's saved output (collect bounds it; a changed bundle may not)."""
    try:
        p = resolve(b.root, rel)
        if _not_regular(p):
            return b""
        with open(p, "rb") as f:
            head = f.read(_TOOL_LOG_BYTES)
            f.seek(max(os.fstat(f.fileno()).st_size - _TOOL_LOG_BYTES, len(head)))
            return head + b"\n" + f.read(_TOOL_LOG_BYTES)
    except (OSError, BundleError):
        return b""


def _retried(b: Bundle) -> list[str]:
    """Per tool whose first run did not decide (`sanitizer-attempt` runs): why each attempt
    did not, and what the run that decides checked, read from its own command line."""
    from wsperf.collectors.scope import checked_by  # here: scope imports pyarrow, which analyze need not load

    said = []
    for tool in dict.fromkeys(r.tool for r in b.runs if r.phase == "sanitizer-attempt" and r.note):
        why = "; then ".join(r.note for r in b.runs if r.phase == "sanitizer-attempt" and r.tool == tool and r.note)
        final = next((r for r in reversed(b.runs) if r.phase == "sanitizer" and r.tool == tool), None)
        checked = f"; the run that decides checked {checked_by(final.argv)}" if final is not None else ""
        said.append(f"compute-sanitizer --tool {tool} {why}{checked}")
    return said


def _hang(b: Bundle) -> RunRecord | None:
    for r in b.runs:
        if r.timed_out and r.phase in ("run", "profile"):
            return r
    return next((r for r in b.runs if r.phase == "hang"), None)
