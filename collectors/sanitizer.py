"""Read compute-sanitizer's XML output into typed findings and the wsperf store.

`compute-sanitizer --tool T --xml --save FILE` writes one <record> per finding under a
<ComputeSanitizerOutput> root. `read_sanitizer_xml(path)` parses such a file into a
`SanitizerOutput` (frozen dataclasses, one `SanitizerFinding` per row);
`load_sanitizer_xml(con, path)` also writes it to the `sanitizer_runs` and
`sanitizer_findings` tables (`queries/sanitizer_schema.sql`, every column documented
there) in one transaction.

Record kinds, as compute-sanitizer 2025.3 writes them (fixtures/correctness/ holds a real
file of each):
  Precise    memcheck: an access out of bounds or misaligned (<who>, <what> with space,
             size, direction, error and address, <where> with func, path, line, pc)
  Api        any tool: a CUDA API call failed (<api>, <error>, <result>); it follows a
             kernel the tool stopped, so it breaks no handoff by itself
  Initcheck  initcheck: a read of global memory nothing wrote
  Synccheck  synccheck: a barrier reached wrongly (<type> says how)
  Analysis   racecheck (default report): a race between one access and one or more
             others, each with its hazard count
  Hazard     racecheck --racecheck-report hazard: one hazard between two threads
Other kinds are kept as written, with no classification.

Each finding is classified into the handoff of a warp-specialized kernel that it breaks
(`Handoff`): a buffer bound, storage shared between roles, a barrier, or data that was
never produced. The XML does not name its tool; it is taken from the caller or from the
record kinds, and a caller's tool that the records contradict is an error.

Safety: compute-sanitizer writes UTF-8 and no DTD. A file in another encoding (a BOM
or declaration of UTF-16, UTF-32 or anything not ASCII-compatible, where a DOCTYPE
would not show as bytes) is refused, then any DOCTYPE or ENTITY declaration is, so
entity-expansion bombs and external entities never reach the standard library's
expat-based parser. The file is parsed as a stream, one <record> at a time, each
dropped once read: memory follows the findings, not the file's element tree (a 185 MB
file of 100,000 records, tests/test_bad_inputs.py). Numbers must fit their columns.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa

from wsperf.collectors.errors import InputError
from wsperf.collectors.files import GiB, read_input
from wsperf.collectors.store import transaction

SCHEMA = "sanitizer_schema.sql"
MAX_XML_BYTES = 2 * GiB  # 100,000 records are 185 MB; bigger is not one repro's findings
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ROOT = "ComputeSanitizerOutput"

# Record kinds that only one tool writes. 'Api' records come from any tool.
_KIND_TOOL = {"Precise": "memcheck", "Initcheck": "initcheck", "Synccheck": "synccheck",
              "Analysis": "racecheck", "Hazard": "racecheck"}
# The only memory each of these tools checks (compute-sanitizer documentation).
_TOOL_SPACE = {"racecheck": "__shared__", "initcheck": "__global__"}


class SanitizerOutputError(InputError):
    """A file is not complete compute-sanitizer XML output."""


class Handoff(StrEnum):
    """The handoff of a warp-specialized kernel that a finding breaks."""

    OUT_OF_BOUNDS = "out-of-bounds-or-misaligned"  # a tile or buffer bound (memcheck)
    RACE = "race-between-roles"  # shared storage reused too early, a missing wait or fence (racecheck)
    BARRIER = "barrier-misuse"  # a barrier reached by the wrong threads or in the wrong way (synccheck)
    UNINITIALIZED = "uninitialized-read"  # data read before anything produced it (initcheck)


Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class SanitizerFinding:
    """One row of `sanitizer_findings` (the columns are documented in
    queries/sanitizer_schema.sql; None is SQL NULL: the record does not say)."""

    record_idx: int
    part_idx: int
    tool: str | None
    kind: str
    severity: str | None
    classification: Handoff | None
    message: str
    error_type: str | None
    kernel: str | None
    source_file: str | None
    source_line: int | None
    pc_offset: int | None
    block: Dim3 | None
    thread: Dim3 | None
    address: int | None
    memory_space: str | None
    access: str | None
    access_size: int | None
    other_access: str | None = None
    other_thread: Dim3 | None = None
    other_source_file: str | None = None
    other_source_line: int | None = None
    other_pc_offset: int | None = None
    hazard_count: int | None = None
    grid_id: int | None = None
    api_call: str | None = None


@dataclass(frozen=True)
class SanitizerOutput:
    """A parsed XML file: its tool and its findings, in file order."""

    tool: str | None  # None: not given, and no record names it (an empty output)
    records: int  # <record> elements in the file
    findings: tuple[SanitizerFinding, ...]

    def by_class(self) -> dict[Handoff | None, int]:
        """Findings per classification (racecheck analysis records count once per pair)."""
        out: dict[Handoff | None, int] = {}
        for f in self.findings:
            out[f.classification] = out.get(f.classification, 0) + 1
        return out


# compute-sanitizer's own failures, as it prints them (2025.3.1 on the H200: "Internal
# Sanitizer Error: The Sanitizer failed to handle a hardware exception"; "Error: Target
# application terminated before first instrumented API call"). Findings also print as
# "Error: ..." ("Error: Race reported between ..."), so only the tool's own failures are
# named here.
_TOOL_FAILURE = re.compile(rb"^=+ (Internal Sanitizer Error.*|Error: (?:Target application terminated before first "
                           rb"instrumented API call|No attachable process|Device not supported|The Sanitizer|Failed to"
                           rb"|Could not|Unable to|Out of memory).*)$", re.MULTILINE)


def tool_failure(output: bytes) -> str | None:
    """The failure compute-sanitizer reports of itself in its stdout/stderr, or None."""
    m = _TOOL_FAILURE.search(output)
    return m.group(1).decode("utf-8", "replace").strip()[:200] if m else None


# What compute-sanitizer prints when the program under it exits with an error of its own.
_TARGET_FAILED = re.compile(rb"^=+ Target application returned an error\s*$", re.MULTILINE)


def target_failed(output: bytes, exit_code: int | None) -> bool:
    """Whether the program under the tool ended with an error of its own (its own check
    failed, or it crashed) rather than the tool: compute-sanitizer says so and exits with
    the program's code. On the H200 a Gluon kernel that releases a stage before reading it
    answers right in its plain run and wrong under memcheck, racecheck and synccheck, none
    of which names the race (fixtures/evidence/gluon_early_release)."""
    return exit_code not in (0, None) and _TARGET_FAILED.search(output) is not None


def failed_under(tools: list[str], files: list[str]) -> str:
    """What a repro whose own check failed only under the tools `tools` means (one sentence)."""
    return (f"the repro's own check failed under compute-sanitizer --tool {', '.join(tools)} (its output: "
            f"{', '.join(files)}) though its plain run passed: its answer depends on the timing the tools change, the "
            "mark of a race between roles that no tool named; look for a stage read after its release or before its "
            "wait")


def is_error(f: SanitizerFinding) -> bool:
    """A finding that stops the kernel short of a profile: it breaks a handoff, or the
    tool reports it as an error (a failed API call follows a kernel the tool stopped)."""
    return f.classification is not None or f.severity == "error" or f.kind == "Api"


@dataclass(frozen=True)
class SanitizerLoad:
    """What loading one XML file did."""

    run_id: int  # sanitizer_runs.run_id of the new run
    path: Path
    sha256: str
    output: SanitizerOutput


def read_sanitizer_xml(path: str | os.PathLike[str], *, tool: str | None = None) -> SanitizerOutput:
    """Parse the compute-sanitizer XML file at `path`. `tool` ('memcheck', ...) is what
    the caller ran; without it the tool is inferred from the records. Raises
    SanitizerOutputError for a missing, empty, truncated or foreign file."""
    p = Path(path)
    return parse_sanitizer_xml(_read(p), tool=tool, source=str(p))


def _read(p: Path) -> bytes:
    # A regular file, bounded (a FIFO or /dev/zero would hang or fill memory).
    return read_input(p, kind="the file written by `compute-sanitizer --xml --save FILE`", limit=MAX_XML_BYTES,
                      error=SanitizerOutputError)


def parse_sanitizer_xml(data: bytes, *, tool: str | None = None, source: str = "<bytes>") -> SanitizerOutput:
    """Parse compute-sanitizer XML held in `data` (see `read_sanitizer_xml`)."""
    if tool is not None and tool not in TOOLS:
        raise SanitizerOutputError(f"{source}: unknown tool {tool!r}; use one of {', '.join(TOOLS)}")
    # Python's cycle collector rescans every finding built so far, again and again: 4x the
    # time of a 100,000-record file. The parse makes no reference cycles; pause it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(data, tool, source)
    finally:
        if collecting:
            gc.enable()


def _parse(data: bytes, tool: str | None, source: str) -> SanitizerOutput:
    implied: set[str] = set()
    findings: list[SanitizerFinding] = []
    records = 0
    for i, rec in enumerate(_records(data, source)):
        records += 1
        kind = _text(rec, "kind")
        if not kind:
            raise SanitizerOutputError(f"{source}: record {i} has no <kind>; the file is not compute-sanitizer output")
        implied |= {_KIND_TOOL[kind]} if kind in _KIND_TOOL else set()
        if len(implied) > 1:
            raise SanitizerOutputError(f"{source}: records of several tools ({', '.join(sorted(implied))}) in one "
                                       "file; compute-sanitizer writes one tool's records per run")
        if tool is not None and implied and implied != {tool}:
            raise SanitizerOutputError(f"{source}: records are {implied.pop()} records, not {tool}; "
                                       "give the tool that wrote the file")
        try:
            findings.extend(_findings(rec, i, kind, tool))
        except ValueError as e:
            raise SanitizerOutputError(f"{source}: record {i} ({kind}): {e}") from None
    run_tool = tool or (implied.pop() if implied else None)
    if run_tool != tool:  # inferred from the records: known only once they are all read
        findings = [replace(f, tool=run_tool) for f in findings]
    return SanitizerOutput(run_tool, records, tuple(findings))


def sanitizer_schema_sql() -> str:
    """The DDL of the sanitizer tables (idempotent)."""
    return (resources.files("wsperf.queries") / SCHEMA).read_text(encoding="utf-8")


def load_sanitizer_xml(con: Any, path: str | os.PathLike[str], *, tool: str | None = None,
                       command: str | None = None) -> SanitizerLoad:
    """Parse the XML at `path` and add it to the store `con` (from `store.open_store`) as
    a new run, in one transaction: a file that fails to parse or load leaves the store
    as it was. `command`, when given, is stored as the command that wrote the file."""
    p = Path(path)
    data = _read(p)
    output = parse_sanitizer_xml(data, tool=tool, source=str(p))
    digest = hashlib.sha256(data).hexdigest()
    table = _arrow(output.findings)
    with transaction(con, f"sanitizer output {p}"):
        con.execute(sanitizer_schema_sql())
        ((run_id,),) = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM sanitizer_runs").fetchall()
        con.execute("INSERT INTO sanitizer_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [run_id, _shown(p.resolve()), digest, len(data), output.tool, _shown(command), output.records,
                     datetime.now(timezone.utc).replace(tzinfo=None)])
        con.register("_wsperf_sanitizer", table)
        try:
            con.execute("INSERT INTO sanitizer_findings BY NAME SELECT $run_id AS run_id, * FROM _wsperf_sanitizer",
                        {"run_id": run_id})
        finally:
            con.unregister("_wsperf_sanitizer")
    return SanitizerLoad(run_id, p, digest, output)


# ---------------------------------------------------------------------------------------


_CHUNK = 64 << 10  # bytes fed to the parser at a time (larger chunks parse slower)
# The encodings in which a DOCTYPE would not show as ASCII bytes: refused (see the module
# docstring); an XML declaration may name only these.
_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")
_DECLARED = re.compile(rb"^(?:\xef\xbb\xbf)?<\?xml[^>]*?\bencoding\s*=\s*[\"']([^\"']*)[\"']")
_ROOT_TAG = re.compile(rb"(?:\xef\xbb\xbf)?(?:\s+|<\?.*?\?>|<!--.*?-->)*<([^\s/>?!]+)", re.S)
_ASCII_COMPATIBLE = {"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1", "latin1"}


def _records(data: bytes, source: str) -> Iterator[ET.Element]:
    """The <record> elements under the root, each complete, in file order; each is
    emptied once the caller has it."""
    how = "give the file written by `compute-sanitizer --xml --save FILE`"
    if not data.strip():
        raise SanitizerOutputError(f"{source}: is empty; {how}")
    declared = _DECLARED.match(data[:512])
    if data.startswith(_BOMS) or b"\x00" in data[:4] or (
            declared and declared.group(1).decode("ascii", "replace").lower() not in _ASCII_COMPATIBLE):
        raise SanitizerOutputError(f"{source}: is not UTF-8 text (compute-sanitizer writes UTF-8); {how}")
    # compute-sanitizer never declares a DTD; refusing one keeps entity expansion (and
    # external entities) out of the parser.
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise SanitizerOutputError(f"{source}: declares a DOCTYPE or ENTITY, which compute-sanitizer output "
                                   f"never does; refusing to parse it; {how}")
    # The root's tag from the prolog (a declaration, comments, processing instructions),
    # so that a foreign file stops before its body is parsed; parsing then reports only
    # the ends of elements (twice as fast as starts and ends on a large file).
    sniffed = _ROOT_TAG.match(data[:_CHUNK])
    if sniffed and sniffed.group(1) != ROOT.encode():
        raise SanitizerOutputError(f"{source}: is XML but not compute-sanitizer output (root "
                                   f"<{_shown(sniffed.group(1).decode('utf-8', 'replace'))}>, expected <{ROOT}>); {how}")
    parser = ET.XMLPullParser(events=("end",))
    last: ET.Element | None = None
    try:
        for at in range(0, len(data), _CHUNK):
            parser.feed(data[at:at + _CHUNK])
            for _, last in parser.read_events():
                if last.tag == "record":
                    yield last
                    last.clear()  # an empty element stays behind: ~100 bytes a record
        parser.close()
        for _, last in parser.read_events():
            pass
        if last is None or last.tag != ROOT:  # the last element to end is the root
            raise SanitizerOutputError(f"{source}: is XML but not compute-sanitizer output (root "
                                       f"<{_shown(last.tag) if last is not None else ''}>, expected <{ROOT}>); {how}")
    except ET.ParseError as e:
        raise SanitizerOutputError(f"{source}: is not complete XML ({e}); the run may have been cut short; "
                                   f"{how}") from None
    except (LookupError, ValueError) as e:  # an encoding expat does not know, or a multi-byte one
        raise SanitizerOutputError(f"{source}: cannot be decoded ({e}); compute-sanitizer writes UTF-8; "
                                   f"{how}") from None


def _shown(text: str | os.PathLike[str] | None) -> str | None:
    """`text` storable as UTF-8: undecodable bytes of a file name (surrogates) as \\xNN."""
    if text is None:
        return None
    return str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _findings(rec: ET.Element, idx: int, kind: str, tool: str | None) -> list[SanitizerFinding]:
    what = rec.find("what")
    if what is None:
        raise ValueError("no <what> element")
    level = _text(rec, "level")
    base: dict[str, Any] = {
        "record_idx": idx, "part_idx": 0, "tool": tool, "kind": kind,
        "severity": level.lower() if level else None,
        "message": _capped(_text(what, "text") or ""),
        "memory_space": _text(what, "space") or _TOOL_SPACE.get(_KIND_TOOL.get(kind, "")),
    }
    if kind == "Analysis":
        src = what.find("source")
        if src is None:
            raise ValueError("a race report without a <source> access")
        where = _where(src.find("where"))
        one = {**base, **where, "classification": Handoff.RACE, "error_type": None, "block": None, "thread": None,
               "address": None, "access": _lower(_text(src, "direction")), "access_size": None}
        dests = what.findall("destination")
        if not dests:
            return [SanitizerFinding(**one)]
        rows = []
        for j, d in enumerate(dests):
            other = _where(d.find("where"))
            rows.append(SanitizerFinding(**{
                **one, "part_idx": j, "other_access": _lower(_text(d, "direction")),
                "other_source_file": other["source_file"], "other_source_line": other["source_line"],
                "other_pc_offset": other["pc_offset"], "hazard_count": _int(d, "count")}))
        return rows
    if kind == "Hazard":
        common, t0, t1 = what.find("common"), what.find("thread0"), what.find("thread1")
        if common is None or t0 is None or t1 is None:
            raise ValueError("a hazard without <common>, <thread0> and <thread1>")
        other = _where(t1.find("where"))
        return [SanitizerFinding(**{
            **base, **_where(t0.find("where")), "classification": Handoff.RACE,
            "error_type": _text(common, "type"), "block": _dim3(common.find("blockIdx")),
            "thread": _dim3(t0.find("threadIdx")), "address": _int(common, "address"),
            "access": _lower(_text(t0, "access")), "access_size": None,
            "other_access": _lower(_text(t1, "access")), "other_thread": _dim3(t1.find("threadIdx")),
            "other_source_file": other["source_file"], "other_source_line": other["source_line"],
            "other_pc_offset": other["pc_offset"], "hazard_count": 1, "grid_id": _int(common, "gridid")})]
    who = rec.find("who")
    error_type = _text(what, "error") or _text(what, "type")
    return [SanitizerFinding(**{
        **base, **_where(rec.find("where")), "classification": _classify(kind, error_type, base["message"]),
        "error_type": error_type,
        "block": _dim3(who.find("blockIdx")) if who is not None else None,
        "thread": _dim3(who.find("threadIdx")) if who is not None else None,
        "address": _int(what, "address"), "access": _lower(_text(what, "direction")),
        "access_size": _int(what, "size"), "api_call": _text(what, "api")})]


def _classify(kind: str, error_type: str | None, message: str) -> Handoff | None:
    if kind == "Precise":
        # memcheck's access errors; its other reports (leaks, API errors) have other kinds.
        err = (error_type or message).lower()
        return Handoff.OUT_OF_BOUNDS if ("out of bounds" in err or "misaligned" in err) else None
    if kind == "Initcheck":
        # initcheck also warns about allocations never used; only reads break a handoff.
        return Handoff.UNINITIALIZED if message.lower().startswith("uninitialized") else None
    if kind == "Synccheck":
        return Handoff.BARRIER
    return None


def _where(w: ET.Element | None) -> dict[str, Any]:
    if w is None:
        return {"kernel": None, "source_file": None, "source_line": None, "pc_offset": None}
    return {"kernel": _text(w, "func"), "source_file": _text(w, "path"), "source_line": _int(w, "line"),
            "pc_offset": _int(w, "pc")}


# A message longer than this is cut where it is read: nothing a reader needs from
# compute-sanitizer's text runs that long, and a hostile 24 MB one rendered quadratically
# (4 MB: 5 s, 50 MB: over 14 minutes). The whole text stays in the XML.
MESSAGE_CAP = 4096


def _capped(text: str) -> str:
    if len(text) <= MESSAGE_CAP:
        return text
    return f"{text[:MESSAGE_CAP]} … ({len(text) - MESSAGE_CAP:,} more characters: the whole text is in the XML)"


def _text(e: ET.Element, tag: str) -> str | None:
    c = e.find(tag)
    if c is None or c.text is None:
        return None
    return c.text.strip() or None


def _lower(s: str | None) -> str | None:
    return s.lower() if s else None


def _int(e: ET.Element, tag: str) -> int | None:
    s = _text(e, tag)
    if s is None:
        return None
    try:
        # Addresses and PCs are hex ('0x8e0'); lines, sizes, counts and indices decimal.
        v = int(s, 16) if s.lower().startswith("0x") else int(s)
    except ValueError:
        raise ValueError(f"<{tag}> is {s[:40]!r}, not a number") from None
    limit = _LIMITS.get(tag, 1 << 63)
    if not 0 <= v < limit:
        raise ValueError(f"<{tag}> is {s[:40]!r}, outside 0 .. {limit - 1}")
    return v


# The largest value + 1 each element may hold: the width of its column (pc, address:
# UBIGINT; line, size and thread/block indices: INTEGER; counts and grid ids: BIGINT).
_LIMITS = {"pc": 1 << 64, "address": 1 << 64, "line": 1 << 31, "size": 1 << 31,
           "x": 1 << 31, "y": 1 << 31, "z": 1 << 31}


def _dim3(e: ET.Element | None) -> Dim3 | None:
    if e is None:
        return None
    x, y, z = (_int(e, a) for a in "xyz")
    if x is None or y is None or z is None:
        raise ValueError(f"<{e.tag}> lacks one of x, y, z")
    return (x, y, z)


_COLUMNS = pa.schema([
    ("record_idx", pa.int32()), ("part_idx", pa.int32()), ("tool", pa.string()), ("kind", pa.string()),
    ("severity", pa.string()), ("classification", pa.string()), ("message", pa.string()),
    ("error_type", pa.string()), ("kernel", pa.string()), ("source_file", pa.string()),
    ("source_line", pa.int32()), ("pc_offset", pa.uint64()),
    ("block_x", pa.int32()), ("block_y", pa.int32()), ("block_z", pa.int32()),
    ("thread_x", pa.int32()), ("thread_y", pa.int32()), ("thread_z", pa.int32()),
    ("address", pa.uint64()), ("memory_space", pa.string()), ("access", pa.string()),
    ("access_size", pa.int32()), ("other_access", pa.string()),
    ("other_thread_x", pa.int32()), ("other_thread_y", pa.int32()), ("other_thread_z", pa.int32()),
    ("other_source_file", pa.string()), ("other_source_line", pa.int32()), ("other_pc_offset", pa.uint64()),
    ("hazard_count", pa.int64()), ("grid_id", pa.int64()), ("api_call", pa.string()),
])
_DIM3_FIELDS = {"block", "thread", "other_thread"}  # stored as <name>_x, <name>_y, <name>_z


def _arrow(findings: tuple[SanitizerFinding, ...]) -> pa.Table:
    cols: dict[str, list[Any]] = {f.name: [] for f in _COLUMNS}
    names = [field.name for field in fields(SanitizerFinding)]
    for f in findings:
        for name in names:
            v = getattr(f, name)
            if name in _DIM3_FIELDS:
                for axis, x in zip("xyz", v or (None, None, None)):
                    cols[f"{name}_{axis}"].append(x)
            else:
                cols[name].append(v.value if isinstance(v, Handoff) else v)
    return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in _COLUMNS], schema=_COLUMNS)
