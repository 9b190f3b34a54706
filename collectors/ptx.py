"""PTX text -> kernels (`.entry`), their shared-memory declarations and their statements,
for `wsperf worksheet`.

Why a parser at all: PTX is the only form of a kernel where mbarrier addresses, init
counts and the warp/thread conditions of role branches are still readable without a GPU
(SASS has lost the symbols), and NVIDIA ships no PTX reader. So this is a small, strict
line parser for the subset nvcc and inline asm emit, not a PTX front end:

- a statement is `[@[!]pred] opcode[.mod...] operands ;`, a label `name:`, a `{` / `}`
  scope (inline asm blocks reuse label names, so labels are resolved per scope), or a
  directive (`.reg`, `.shared`, `.local`, `.pragma` ...);
- a line that is none of those is kept in `Entry.unparsed` with its line number: the
  worksheet turns each one into an `assumption` item saying what it could not read,
  instead of guessing;
- `.func` bodies are not followed (a `call` into one is reported, not analysed).

The PTX comes from a `.ptx` file, from `nvcc -ptx` on a `.cu` file, or from
`cuobjdump -ptx` on a binary / cubin / fatbin that embeds it.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from wsperf.collectors.disasm import DEFAULT_CU_ARCH, TOOL_TIMEOUT_S, _run, find_tool, run_nvcc
from wsperf.collectors.errors import InputError

_COMMENT = re.compile(r"//.*?$|/\*.*?\*/", re.S | re.M)
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(")
_FUNC = re.compile(r"\.func\s+(?:\([^)]*\)\s*)?([\w$.]+)")
_NTID = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_SHARED = re.compile(r"^(?:\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$.]+)(?:\[(\d*)\])?\s*;$")
_LABEL = re.compile(r"^([\w$]+):$")
_STMT = re.compile(r"^(?:@(!?)(%?[\w$]+)\s+)?([a-z][\w.:]*)(?:\s+(.*?))?\s*;$")
_DIRECTIVE = re.compile(r"^\.(reg|local|param|pragma|loc|file|section|const|global|maxnreg|minnctapersm|"
                        r"maxnctapersm|noreturn|explicitcluster|reqnctapercluster|maxclusterrank)\b")
_TARGET = re.compile(r"^\s*\.target\s+([\w,\s]+?)\s*$", re.M)


@dataclass(frozen=True)
class Stmt:
    line: int  # in the PTX text, 1-based
    opcode: str  # with every modifier: 'mbarrier.try_wait.parity.shared::cta.b64'
    operands: tuple[str, ...]
    guard: str | None = None  # predicate register, e.g. '%p1' or 'P1'
    negated: bool = False  # '@!%p1'
    scope: int = 0  # the `{ }` scope it sits in (0: the entry's body)


@dataclass(frozen=True)
class SharedDecl:
    name: str
    elem: str  # b8, b64, u32 ...
    count: int | None  # array length; None for `[]` (dynamic shared memory)
    align: int | None
    line: int
    extern: bool = False

    @property
    def size(self) -> int | None:
        width = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4, "u32": 4, "s32": 4,
                 "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}.get(self.elem)
        if width is None or self.count is None:
            return None
        return width * self.count


@dataclass
class Entry:
    name: str
    line: int
    target: str | None
    ntid: tuple[int, int, int] | None = None  # .reqntid, else .maxntid
    ntid_kind: str | None = None  # 'reqntid' | 'maxntid'
    shared: list[SharedDecl] = field(default_factory=list)  # own and module-level
    body: list[Stmt | tuple[str, int, int]] = field(default_factory=list)  # Stmt or (label, scope, line)
    parents: dict[int, int] = field(default_factory=dict)  # scope -> enclosing scope
    unparsed: list[tuple[int, str]] = field(default_factory=list)


def parse(text: str) -> list[Entry]:
    """Every `.entry` of a PTX module, in order. Raises InputError when `text` is not PTX."""
    if not re.search(r"^\s*\.version\s+\d", text, re.M) or not _TARGET.search(text):
        raise InputError("not PTX: no `.version` / `.target` directive")
    clean = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    lines = clean.split("\n")
    entries: list[Entry] = []
    module_shared: list[SharedDecl] = []
    target = None
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith(".target"):
            target = s.split()[1].rstrip(",")
        m = _ENTRY.search(s)
        fm = None if m else _FUNC.search(s)
        if m or fm:
            # header up to the opening brace: params, .maxntid / .reqntid
            entry = Entry(m.group(1), i + 1, target) if m else None
            while i < len(lines) and "{" not in lines[i].split("//")[0]:
                nm = _NTID.search(lines[i])
                if nm and entry is not None and (entry.ntid_kind != "reqntid"):
                    entry.ntid = tuple(int(g) if g else 1 for g in nm.groups()[1:])  # type: ignore[assignment]
                    entry.ntid_kind = nm.group(1)
                i += 1
            i = _body(lines, i, entry)
            if entry is not None:
                entry.shared = module_shared + entry.shared
                entries.append(entry)
            continue
        sm = _SHARED.match(re.sub(r"^\.(?:visible|weak)\s+", "", s))
        if sm:
            module_shared.append(_shared(sm, i + 1, s.startswith(".extern")))
        i += 1
    if not entries:
        raise InputError("the PTX holds no kernel (.entry)")
    return entries


def _shared(m: re.Match, line: int, extern: bool) -> SharedDecl:
    align, elem, name, count = m.groups()
    return SharedDecl(name, elem, int(count) if count else None, int(align) if align else None, line, extern)


def _body(lines: list[str], i: int, entry: Entry | None) -> int:
    """Parse from the line holding the entry's `{` to its matching `}`; the next index."""
    depth = 0
    stack: list[int] = []
    next_scope = 0
    while i < len(lines):
        raw = lines[i].strip()
        lineno = i + 1
        i += 1
        # a line may hold several statements (inline asm); braces stand alone or lead
        for piece in _pieces(raw):
            if piece == "{":
                depth += 1
                if depth > 1 and entry is not None:
                    next_scope += 1
                    entry.parents[next_scope] = stack[-1] if stack else 0
                    stack.append(next_scope)
                continue
            if piece == "}":
                depth -= 1
                if depth == 0:
                    return i
                if stack:
                    stack.pop()
                continue
            if entry is None:
                continue
            scope = stack[-1] if stack else 0
            lm = _LABEL.match(piece)
            if lm:
                entry.body.append((lm.group(1), scope, lineno))
                continue
            if piece.startswith("."):
                sm = _SHARED.match(piece)
                if sm:
                    entry.shared.append(_shared(sm, lineno, False))
                elif not _DIRECTIVE.match(piece):
                    entry.unparsed.append((lineno, piece))
                continue
            st = _STMT.match(piece)
            if not st:
                entry.unparsed.append((lineno, piece))
                continue
            neg, guard, opcode, ops = st.groups()
            entry.body.append(Stmt(lineno, opcode, tuple(_operands(ops or "")), guard, neg == "!", scope))
    raise InputError("the PTX ends inside a kernel body (unbalanced braces)")


def _pieces(raw: str) -> list[str]:
    out: list[str] = []
    buf = ""
    for ch in raw:
        if ch in "{}" and not buf.strip():
            out.append(ch)
            buf = ""
            continue
        buf += ch
        if ch == ";":
            out.append(buf.strip())
            buf = ""
        elif ch == ":" and _LABEL.match(buf.strip()):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def _operands(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


# ---------------------------------------------------------------------------------------
# getting PTX


def read_ptx(path: Path, arch: str | None = None) -> list[tuple[str, str]]:
    """(label, PTX text) pairs for `path`: a .ptx file as is, a .cu file through
    `nvcc -ptx -arch=ARCH`, anything else through `cuobjdump -ptx`."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: a directory; give a .ptx, .cu, cubin, fatbin or binary file")
    suffix = path.suffix.lower()
    if suffix == ".ptx":
        text = path.read_text(errors="replace")
        if "\0" in text:
            raise InputError(f"{path}: binary data, not PTX text")
        return [(str(path), text)]
    if suffix in (".cu", ".cuh"):
        return [(f"{path} (nvcc -ptx -arch={arch or DEFAULT_CU_ARCH})", compile_ptx(path, arch or DEFAULT_CU_ARCH))]
    head = path.read_bytes()[:4096]
    if b"\0" not in head and re.search(rb"^\s*\.version\s+\d", head, re.M):
        return [(str(path), path.read_text(errors="replace"))]
    return _embedded(path, arch)


def compile_ptx(src: Path, arch: str) -> str:
    with tempfile.TemporaryDirectory(prefix="wsperf-ptx-") as tmp:
        out = Path(tmp) / (src.stem + ".ptx")
        run_nvcc(src, arch, ["-ptx", "-O3"], out, "reading a .cu file", "a .ptx file")
        return out.read_text()


def _embedded(path: Path, arch: str | None) -> list[tuple[str, str]]:
    cuobjdump = find_tool("cuobjdump")
    proc = _run([cuobjdump, "-ptx", str(path)], TOOL_TIMEOUT_S, str(path))
    if proc.returncode != 0:
        reason = (proc.stderr.strip() or proc.stdout.strip()).replace("cuobjdump fatal   : ", "")
        raise InputError(f"{path}: not PTX, a .cu file, or a binary/cubin/fatbin that cuobjdump can read "
                         f"({reason[:200] or 'exit ' + str(proc.returncode)})")
    # cuobjdump prints one `.version ... .target ...` module per embedded PTX
    chunks = re.split(r"(?=^\s*\.version\s+\d)", proc.stdout, flags=re.M)
    mods = [c for c in chunks if re.match(r"^\s*\.version", c)]
    if not mods:
        raise InputError(f"{path}: holds no PTX (only SASS?): rebuild with PTX embedded "
                         "(-gencode arch=compute_90a,code=compute_90a) or give the .ptx / .cu file")
    if arch:
        want = arch.replace("compute_", "sm_")
        sel = [m for m in mods if (t := _TARGET.search(m)) and want in t.group(1)]
        if not sel:
            have = sorted({t.group(1) for m in mods if (t := _TARGET.search(m))})
            raise InputError(f"{path}: no PTX for {arch}; it holds PTX for {', '.join(have)}")
        mods = sel
    return [(f"{path} (cuobjdump -ptx, module {k + 1})", m) for k, m in enumerate(mods)]
