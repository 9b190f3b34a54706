"""PTX text -> kernels (`.entry`), their shared-memory declarations and their statements,
for `wsperf worksheet`.

Why a parser at all: PTX is the only form of a kernel where mbarrier addresses, init
counts and the warp/thread conditions of role branches are still readable without a GPU
(SASS has lost the symbols), and NVIDIA ships no PTX reader. So this is a small, strict
line parser for the subset nvcc and inline asm emit, not a PTX front end:

- a statement is `[@[!]pred] opcode[.mod...] operands ;` (a `call` may span lines), a
  label `name:`, a `{` / `}` scope, or a directive (`.reg`, `.shared`, `.local`, `.pragma`
  ...). Inline asm blocks and nvcc's `{ .reg .b64 %tmp; ... }` reuse register and label
  names, so both are scoped: a register declared inside a `{ }` is renamed `name$sN` (N:
  the scope), a label is resolved from the branch's scope outwards;
- a line that is none of those is kept in `Entry.unparsed` with its line number: the
  worksheet turns each one into an `assumption` item saying what it could not read,
  instead of guessing;
- `.func` bodies are parsed too, and each direct `call` to one whose body is in the module
  is expanded in place (registers renamed `name$cK`, `.param` arguments and return values
  turned into `mov`s, `ret` into a branch past the body), so what a non-inlined device
  function does runs under its caller's conditions. Calls that cannot be followed
  (indirect, extern, recursive) are listed in `Entry.calls` as not followed.

The PTX comes from a `.ptx` file, from `nvcc -ptx` on a `.cu` file, or from
`cuobjdump -ptx` on a binary / cubin / fatbin that embeds it.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from wsperf.collectors.disasm import DEFAULT_CU_ARCH, TOOL_TIMEOUT_S, _run, find_tool, run_nvcc
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import GiB, input_stat, open_input, read_input

MAX_INPUT_BYTES = 2 * GiB  # PTX text or a binary holding it (bigger is not one kernel's code)

# A block comment left open runs to the end of the text: matched in one pass (waiting
# for a `*/` that never comes made every later `/*` rescan the rest: quadratic).
_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(")
_FUNC = re.compile(r"\.func\s+(?:\(([^)]*)\)\s*)?([\w$.]+)")
_MAP_PARAM = re.compile(r"\.param\s+\.align\s+64\s+\.b8\s+[\w$]+_param_(\d+)\s*\[\s*128\s*\]")
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?(?:\.ptr\S*\s+)*\.\w+\s+([\w$]+)")
_NTID = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_NCTA = re.compile(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_SHARED = re.compile(r"^(?:\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$.]+)(?:\[(\d*)\])?\s*;$")
_LABEL = re.compile(r"^([\w$]+):$")
_BRANCHTARGETS = re.compile(r"\.branchtargets\s+([\w$]+(?:\s*,\s*[\w$]+)*)\s*;")
# operands follow the opcode after whitespace, or right after it when they open with a vector
# or an address (CUTLASS's `tcgen05.ld.sync.aligned.32x32b.x32.b32{%r1, ...}, [%r2];`)
_STMT = re.compile(r"^(?:@(!?)(%?[\w$]+)\s+)?([a-z][\w.:]*)(?:(?:\s+|(?=[{\[]))(.*?))?\s*;$")
_DIRECTIVE = re.compile(r"^\.(reg|local|param|pragma|loc|file|section|const|global|maxnreg|minnctapersm|"
                        r"maxnctapersm|noreturn|explicitcluster|reqnctapercluster|maxclusterrank)\b")
_REG = re.compile(r"^\.reg\s+(?:\.v\d\s+)?\.\w+\s+(.+?)\s*;$")
_TARGET = re.compile(r"^\s*\.target\s+([\w,\s]+?)\s*$", re.M)
_TOKEN = re.compile(r"(?<![\w$%.])(%?[A-Za-z_$][\w$]*)")
# special registers keep their names when a function body is expanded into its caller
_SPECIAL = re.compile(r"^%(tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|lanemask_\w+|clock\w*|"
                      r"globaltimer\w*|pm\d\w*|envreg\d+|\w*smem_size|reserved_smem\w*|cluster\w*|nclusterid|"
                      r"is_explicit_cluster|current_graph_exec)$")
_MAX_CALL_DEPTH = 8


@dataclass(frozen=True)
class Stmt:
    line: int  # in the PTX text, 1-based
    opcode: str  # with every modifier: 'mbarrier.try_wait.parity.shared::cta.b64'
    operands: tuple[str, ...]
    guard: str | None = None  # predicate register, e.g. '%p1' or 'P1'
    negated: bool = False  # '@!%p1'
    scope: int = 0  # the `{ }` scope it sits in (0: the entry's body)
    via: int = 0  # expanded from a `.func`: the line of the kernel's call that led here (0: the kernel's own)


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


@dataclass(frozen=True)
class Call:
    """A `call` in a kernel (or in a function it calls) and what became of it."""
    line: int
    callee: str
    followed: bool
    statements: int = 0  # statements expanded in place
    why: str = ""  # why it was not followed


@dataclass
class Entry:
    name: str
    line: int
    target: str | None
    ntid: tuple[int, int, int] | None = None  # .reqntid, else .maxntid
    ntid_kind: str | None = None  # 'reqntid' | 'maxntid'
    cluster: tuple[int, int, int] | None = None  # .reqnctapercluster: the cluster shape it is launched with
    shared: list[SharedDecl] = field(default_factory=list)  # own and module-level
    body: list[Stmt | tuple[str, int, int]] = field(default_factory=list)  # Stmt or (label, scope, line)
    parents: dict[int, int] = field(default_factory=dict)  # scope -> enclosing scope
    unparsed: list[tuple[int, str]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    # `L: .branchtargets A, B, ...;` (the jump tables `brx.idx` reads): L -> [A, B, ...]
    branchtargets: dict[str, list[str]] = field(default_factory=dict)
    # N of each parameter declared `.param .align 64 .b8 <name>_param_N[128]`, in order: a
    # tensor map passed by value (CUtensorMap), as Triton passes its tensor descriptors
    tensor_map_params: list[int] = field(default_factory=list)


@dataclass
class Func(Entry):
    """A `.func` with a body: its `.param` names in order (arguments, return values)."""
    params: list[str] = field(default_factory=list)
    rets: list[str] = field(default_factory=list)


def parse(text: str) -> list[Entry]:
    """Every `.entry` of a PTX module, in order, with the calls into the module's `.func`
    bodies expanded. Raises InputError when `text` is not PTX."""
    if not re.search(r"^\s*\.version\s+\d", text, re.M) or not _TARGET.search(text):
        raise InputError("not PTX: no `.version` / `.target` directive")
    clean = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    lines = clean.split("\n")
    entries: list[Entry] = []
    funcs: dict[str, Func] = {}
    module_shared: list[SharedDecl] = []
    target = None
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith(".target") and len(s.split()) > 1:  # a bare `.target` line names nothing
            target = s.split()[1].rstrip(",")
        m = _ENTRY.search(s)
        fm = None if m else _FUNC.search(s)
        if m or fm:
            # header up to the opening brace (params, .maxntid / .reqntid), or up to the
            # `;` of a declaration without a body (a prototype, an .extern .func)
            start, header = i, []
            while i < len(lines) and "{" not in lines[i] and not lines[i].rstrip().endswith(";"):
                header.append(lines[i])
                i += 1
            if i >= len(lines) or "{" not in lines[i]:
                i += 1
                continue
            header.append(lines[i].split("{")[0])
            lines[i] = lines[i][lines[i].index("{"):]  # the body starts at its brace, even on the header's line
            text_h = " ".join(header)
            if m:
                entry: Entry = Entry(m.group(1), start + 1, target)
                for nm in _NTID.finditer(text_h):
                    if entry.ntid_kind != "reqntid":
                        entry.ntid = tuple(int(g) if g else 1 for g in nm.groups()[1:])  # type: ignore[assignment]
                        entry.ntid_kind = nm.group(1)
                if cm := _NCTA.search(text_h):
                    entry.cluster = tuple(int(g) if g else 1 for g in cm.groups())  # type: ignore[assignment]
                entry.tensor_map_params = [int(n) for n in _MAP_PARAM.findall(text_h)]
            else:
                hm = _FUNC.search(text_h)
                assert hm is not None
                rest = text_h[hm.end():]
                entry = Func(hm.group(2), start + 1, target, params=_PARAM.findall(rest),
                             rets=_PARAM.findall(hm.group(1) or ""))
            i = _body(lines, i, entry)
            entry.shared = module_shared + entry.shared
            if isinstance(entry, Func):
                funcs[entry.name] = entry
            else:
                entries.append(entry)
            continue
        sm = _SHARED.match(re.sub(r"^\.(?:visible|weak)\s+", "", s))
        if sm:
            module_shared.append(_shared(sm, i + 1, s.startswith(".extern")))
        i += 1
    if not entries:
        raise InputError("the PTX holds no kernel (.entry)")
    expanded: dict[str, Func] = {}
    for e in entries:
        _expand_calls(e, funcs, expanded, ())
    return entries


def _shared(m: re.Match, line: int, extern: bool) -> SharedDecl:
    align, elem, name, count = m.groups()
    return SharedDecl(name, elem, int(count) if count else None, int(align) if align else None, line, extern)


def _reg_names(decl: str) -> list[str]:
    """`p`, `%tmp`, `%r<4>` (-> %r0..%r3) declared by one `.reg` directive."""
    out: list[str] = []
    for part in decl.split(","):
        part = part.strip()
        rm = re.fullmatch(r"(%?[\w$]+)<(\d+)>", part)
        if rm:
            out += [f"{rm.group(1)}{k}" for k in range(min(int(rm.group(2)), 4096))]
        elif re.fullmatch(r"%?[\w$]+", part):
            out.append(part)
    return out


def _rename(text: str, fn) -> str:
    return _TOKEN.sub(lambda m: fn(m.group(1)), text)


def _body(lines: list[str], i: int, entry: Entry) -> int:
    """Parse from the line holding the body's `{` to its matching `}`; the next index."""
    depth = 0
    stack: list[int] = []
    next_scope = 0
    renames: dict[int, dict[str, str]] = {}  # scope -> {declared name: scoped name}
    pending, pending_line = "", 0  # a statement continued on the next line (call ... ;)

    def scoped(name: str, scope: int) -> str:
        while True:
            r = renames.get(scope)
            if r and name in r:
                return r[name]
            if scope == 0:
                return name
            scope = entry.parents.get(scope, 0)

    while i < len(lines):
        raw = lines[i].strip()
        lineno = i + 1
        i += 1
        if pending and raw.startswith(("{", "}")):
            entry.unparsed.append((pending_line, pending))
            pending = ""
        elif pending:
            raw, lineno = pending + " " + raw, pending_line
            pending = ""
        # a line may hold several statements (inline asm); braces stand alone or lead
        pieces = _pieces(raw)
        if pieces and _continues(pieces[-1]):
            pending, pending_line = pieces.pop(), lineno
        for piece in pieces:
            if piece == "{":
                depth += 1
                if depth > 1:
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
            scope = stack[-1] if stack else 0
            lm = _LABEL.match(piece)
            if lm:
                entry.body.append((lm.group(1), scope, lineno))
                continue
            if piece.startswith(".branchtargets"):
                bt = _BRANCHTARGETS.fullmatch(piece)
                if bt and entry.body and isinstance(entry.body[-1], tuple):
                    name = entry.body.pop()[0]  # the table's label is no place control reaches
                    entry.branchtargets[name] = [x.strip() for x in bt.group(1).split(",") if x.strip()]
                else:
                    entry.unparsed.append((lineno, piece))
                continue
            if piece.startswith("."):
                sm = _SHARED.match(piece)
                rm = _REG.match(piece)
                if sm:
                    entry.shared.append(_shared(sm, lineno, False))
                elif rm and scope:
                    renames.setdefault(scope, {}).update({n: f"{n}$s{scope}" for n in _reg_names(rm.group(1))})
                elif not _DIRECTIVE.match(piece):
                    entry.unparsed.append((lineno, piece))
                continue
            st = _STMT.match(piece)
            if not st:
                entry.unparsed.append((lineno, piece))
                continue
            neg, guard, opcode, ops = st.groups()
            operands = tuple(_operands(ops or ""))
            if len(operands) < _least_operands(opcode) or _HUGE_NUMBER.search(ops or ""):
                # (a literal of more digits than any PTX integer or float has: not read, listed)
                entry.unparsed.append((lineno, piece))
                continue
            if renames:
                operands = tuple(_rename(o, lambda n: scoped(n, scope)) for o in operands)
                guard = scoped(guard, scope) if guard else guard
            entry.body.append(Stmt(lineno, opcode, operands, guard, neg == "!", scope))
    raise InputError("the PTX ends inside a kernel body (unbalanced braces)")


# Operands that every form of these instructions has (PTX ISA); a statement with fewer is
# kept as unparsed, so the worksheet never reads an operand that is not there.
_LEAST_OPERANDS = (("mbarrier.init", 2), ("mbarrier.arrive", 2), ("mbarrier.try_wait", 2),
                   ("mbarrier.test_wait", 2), ("mbarrier.inval", 1), ("tcgen05.alloc", 2), ("tcgen05.dealloc", 2),
                   ("tcgen05.commit", 1), ("cp.async.mbarrier.arrive", 1))


_HUGE_NUMBER = re.compile(r"\d{40}")  # 2^64 has 20 digits, an 0x / 0d literal 16


def _least_operands(opcode: str) -> int:
    if opcode.startswith("clusterlaunchcontrol.try_cancel"):  # [response], [mbar]
        return 2
    if "mbarrier::complete_tx" in opcode:  # cp.async.bulk[.tensor] dst, src..., [mbar]
        return 3
    return next((n for prefix, n in _LEAST_OPERANDS if opcode.startswith(prefix)), 0)


def _continues(piece: str) -> bool:
    """An unfinished `call` (nvcc writes its callee and each argument on a line of their
    own) or `.branchtargets` list (one label a line)."""
    if piece in ("{", "}") or piece.endswith(";"):
        return False
    return bool(re.match(r"^(@!?%?[\w$]+\s+)?call(\.uni)?\b|^\.branchtargets\b", piece))


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
# calls into .func bodies


def _param_ref(op: str) -> tuple[str, int] | None:
    """`[param0+8]` -> ('param0', 8)."""
    m = re.fullmatch(r"\[\s*([\w$]+)\s*(?:\+\s*(-?\d+))?\s*\]", op.strip())
    return (m.group(1), int(m.group(2) or 0)) if m else None


def _call_parts(operands: tuple[str, ...]) -> tuple[str | None, list[str], list[str]]:
    """`call (ret), f, (a, b)` -> ('f', ['ret'], ['a', 'b']); the callee may be a register."""
    callee, rets, args = None, [], []
    for o in operands:
        if o.startswith("("):
            names = [x.strip() for x in o.strip("()").split(",") if x.strip()]
            if callee is None:
                rets = names
            else:
                args = names
                break
        elif callee is None:
            callee = o
    return callee, rets, args


def _expand_calls(e: Entry, funcs: dict[str, Func], done: dict[str, Func], stack: tuple[str, ...]) -> None:
    """Expand, in `e.body`, every direct call to a `.func` of the module (depth first)."""
    body: list[Stmt | tuple[str, int, int]] = []
    stored: dict[tuple[int, str, int], str] = {}  # (scope, .param name, offset) -> operand the caller stored
    returned: dict[tuple[int, str, int], str | None] = {}  # the same for values the callee returned
    next_scope = max(e.parents, default=0) + 1
    calls: list[Call] = []
    k = 0
    for item in e.body:
        if isinstance(item, tuple):
            body.append(item)
            continue
        op = item.opcode
        if op.startswith("st.param") and len(item.operands) == 2 and (ref := _param_ref(item.operands[0])):
            stored[(item.scope, *ref)] = item.operands[1]
        elif op.startswith("ld.param") and len(item.operands) == 2 and (ref := _param_ref(item.operands[1])) \
                and returned.get((item.scope, *ref)):
            item = replace(item, opcode="mov." + op.split(".")[-1],
                           operands=(item.operands[0], returned[(item.scope, *ref)]))
        body.append(item)
        if op.split(".")[0] != "call":
            continue
        callee, ret_names, arg_names = _call_parts(item.operands)
        f = funcs.get(callee or "")
        why = ("indirect (through a register)" if not callee or callee.startswith("%") else
               "its body is not in this PTX (.extern, or another module)" if f is None else
               "recursive" if callee in stack else
               f"calls nested deeper than {_MAX_CALL_DEPTH}" if len(stack) >= _MAX_CALL_DEPTH else "")
        if why or f is None:
            calls.append(Call(item.line, callee or " ".join(item.operands), False, why=why))
            continue
        fx = done.get(f.name)
        if fx is None:
            fx = replace(f, body=list(f.body), parents=dict(f.parents), unparsed=list(f.unparsed), calls=[])
            _expand_calls(fx, funcs, done, stack + (f.name,))
            done[f.name] = fx
        k += 1
        tag, base = f"$c{k}", next_scope  # the callee's scope j becomes base + j
        next_scope = base + max(fx.parents, default=0) + 1
        e.parents[base] = item.scope
        e.parents.update({base + j: base + p for j, p in fx.parents.items()})

        def ren(n: str, tag: str = tag) -> str:
            return n + tag if (n.startswith("%") and not _SPECIAL.match(n)) or re.search(r"\$s\d", n) else n

        via = item.via or item.line
        if item.guard:  # a predicated call: the body runs where the predicate holds
            body.append(Stmt(item.line, "bra", ("$ret",), item.guard, not item.negated, base, via))
        n = 0
        for x in fx.body:
            if isinstance(x, tuple):
                body.append((x[0], base + x[1], x[2]))
                continue
            st = replace(x, operands=tuple(_rename(o, ren) for o in x.operands),
                         guard=ren(x.guard) if x.guard else None, scope=base + x.scope, via=via)
            ref = _param_ref(x.operands[-1]) if x.operands else None
            if x.opcode.startswith("ld.param") and ref and ref[0] in fx.params:
                idx = fx.params.index(ref[0])
                val = stored.get((item.scope, arg_names[idx], ref[1])) if idx < len(arg_names) else None
                if val is not None:
                    st = replace(st, opcode="mov." + x.opcode.split(".")[-1], operands=(st.operands[0], val))
            elif x.opcode.startswith("st.param") and (ref := _param_ref(x.operands[0])) and ref[0] in fx.rets:
                idx = fx.rets.index(ref[0])
                if idx < len(ret_names):
                    key = (item.scope, ret_names[idx], ref[1])
                    returned[key] = None if key in returned else st.operands[1]  # two returns: not followed
            elif x.opcode.split(".")[0] == "ret":
                st = replace(st, opcode="bra.uni", operands=("$ret",))
            body.append(st)
            n += 1
        body.append(("$ret", base, item.line))
        calls.append(Call(item.line, f.name, True, n))
        calls += fx.calls
        e.unparsed += [u for u in fx.unparsed if u not in e.unparsed]
        e.shared += [d for d in fx.shared if d.name not in {s.name for s in e.shared}]
    e.body = body
    e.calls = calls


# ---------------------------------------------------------------------------------------
# getting PTX


def read_ptx(path: Path, arch: str | None = None) -> list[tuple[str, str]]:
    """(label, PTX text) pairs for `path`: a .ptx file as is, a .cu file through
    `nvcc -ptx -arch=ARCH`, anything else through `cuobjdump -ptx`."""
    kind = "a .ptx, .cu, cubin, fatbin or binary file"
    input_stat(path, kind=kind, limit=MAX_INPUT_BYTES)  # a regular file: a FIFO would hang nvcc or cuobjdump
    suffix = path.suffix.lower()
    if suffix == ".ptx":
        text = read_input(path, kind=kind, limit=MAX_INPUT_BYTES).decode(errors="replace")
        if "\0" in text:
            raise InputError(f"{path}: binary data, not PTX text")
        return [(str(path), text)]
    if suffix in (".cu", ".cuh"):
        return [(f"{path} (nvcc -ptx -arch={arch or DEFAULT_CU_ARCH})", compile_ptx(path, arch or DEFAULT_CU_ARCH))]
    with open_input(path, kind=kind, limit=MAX_INPUT_BYTES) as f:
        head = f.read(4096)
    if b"\0" not in head and re.search(rb"^\s*\.version\s+\d", head, re.M):
        return [(str(path), read_input(path, kind=kind, limit=MAX_INPUT_BYTES).decode(errors="replace"))]
    return _embedded(path, arch)


def compile_ptx(src: Path, arch: str) -> str:
    with tempfile.TemporaryDirectory(prefix="wsperf-ptx-") as tmp:
        out = Path(tmp) / (src.stem + ".ptx")
        # -lineinfo: .loc directives, so a wait site maps to its source line (the hang capture's)
        run_nvcc(src, arch, ["-ptx", "-O3", "-lineinfo"], out, "reading a .cu file", "a .ptx file")
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
