"""The SASS of a report's kernels from the cubins the report embeds, by nvdisasm.

Why: the disassembly was most of a one-launch `wsperf analyze`. ncu_report's
`IAction.sass_by_pc` costs ~0.75 s of set-up in every process that calls it, then
~0.24 ms a PC (gemm_wgmma_tma, 1,779 PCs: ~1.2 s in all). An .ncu-rep holds each profiled
module's cubin as a plain ELF; nvdisasm lists its functions, in a process of its own,
beside the metric reading: ~0.35 s of its own start-up, then ~0.04 s per 1,000
instructions. Only the launched functions are listed (-fun, by their symbols' indices:
`selection`): a library's module holds dozens of instantiations besides the one that
ran (sglang's flash-attention module: 20 functions, 2.4 s of nvdisasm for all of them,
0.4 s for the launched one). What it printed is kept in a cache keyed by the cubin's
SHA-256 and the function (`cache_dir`), so a kernel seen before (a nightly job on
unchanged code, a report analyzed again with other options, the baseline of a compare)
is not disassembled again.

The text reads as `sass_by_pc` gives it: the guard padded to six columns (six spaces
without one), the instruction without its `;`, branch targets as absolute addresses
(nvdisasm prints labels; each becomes its instruction's address from the function's
start in the launch). nvdisasm's trailing annotations (`(*"SpillRefill"*)`) are dropped.
What differs is what differs between the disassemblers' versions anyway
(tests/test_loader.py compares every PC of every fixture report, with ncu_report 2026.3
and 2025.3): CUDA 13's nvdisasm marks some operands `.reuse` that theirs do not, prints
`R24, gsb0` for `R24.gsb0`, and a kernel's closing self-loop as `BRA 0x...` (2025.3's
form; 2026.3 writes "BRA `(.L_x_0) 0x..."); 2025.3 also orders LDGSTS's operands the other
way round. Guard, opcode and the set of operands agree on every PC.

The reader (collectors/ncu_reader.py) takes this path for a launch of one function whose
mangled name lies in exactly one distinct code section among the report's cubins, for
the PCs nvdisasm listed; any other PC (a report without cubins, a kernel compiled twice
into different code, nvdisasm missing, failing or too slow) goes to `sass_by_pc`.
Nothing here trusts the bytes: ELF headers are bounds-checked, nvdisasm runs with a
time limit, and a damaged cache file is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from wsperf.collectors.files import read_small


ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
MAX_CUBIN_BYTES = 256 << 20
NVDISASM_TIMEOUT_S = 120.0  # a cubin of many large functions takes seconds; more is a hang
# -c: code sections only. -ndf: no dataflow analysis, ~0.15 s of nvdisasm's ~0.55 s on an
# sm_90 cubin (CUDA 13.0); all it adds to the text is annotations such as (*"SpillRefill"*),
# which `parse` drops: every fixture's cubin parses the same with and without it
# (tests/test_cubin.py).
NVDISASM_ARGS = ("-c", "-ndf")
CACHE_FORMAT = 2  # 2: one file a function (1: a file a cubin)

_FUNC_HEADER = re.compile(r"^\s*\.text\.(\S+):\s*$")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*)$")  # the text's trailing " ;" goes in parse
_ANNOTATION = re.compile(r"\s*\(\*.*?\*\)\s*$")
_LABEL_REF = re.compile(r"`\((\.L_x_\d+)\)")
_TARGET = re.compile("\0(\\d+)\0")  # a resolved label: its instruction's offset in the function


@dataclass(frozen=True)
class Cubin:
    """One CUDA ELF found in a report's bytes."""

    data: bytes
    sha256: str
    code: dict[str, str]  # mangled function name -> SHA-256 of its .text section
    symbols: dict[str, int] = field(default_factory=dict)  # mangled function name -> its symbol's index (nvdisasm -fun)
    offset: int = field(default=-1, compare=False)  # where it starts in the bytes it was found in
    # mangled function name -> the 32-bit words of its constant bank 2 (`.nv.constant2.<name>`):
    # where ptxas keeps a BRX jump table, each entry a target's offset in the function
    constant2: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False)


def find_cubins(blob: bytes) -> list[Cubin]:
    """Every well-formed 64-bit little-endian CUDA ELF inside `blob`."""
    found, at = [], blob.find(ELF_MAGIC)
    while at >= 0:
        cubin = _cubin_at(blob, at)
        if cubin is not None:
            found.append(cubin)
        at = blob.find(ELF_MAGIC, at + (len(cubin.data) if cubin is not None else 4))
    return found


def functions(cubins: list[Cubin]) -> dict[str, Cubin | None]:
    """Mangled name -> the cubin holding its code, or None where cubins hold different
    code under that name (a kernel compiled twice: which one ran is not known here)."""
    found: dict[str, Cubin | None] = {}
    code: dict[str, str] = {}
    for c in cubins:
        for name, digest in c.code.items():
            if name not in found:
                found[name], code[name] = c, digest
            elif code[name] != digest:
                found[name] = None
    return found


def _cubin_at(blob: bytes, at: int) -> Cubin | None:
    try:
        if blob[at + 4] != 2 or blob[at + 5] != 1:  # ELFCLASS64, little endian
            return None
        (machine,) = struct.unpack_from("<H", blob, at + 0x12)
        if machine != EM_CUDA:
            return None
        phoff, shoff = struct.unpack_from("<QQ", blob, at + 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", blob, at + 0x36)
        if shentsize != 64 or not 0 < shnum < 1 << 16 or shstrndx >= shnum:
            return None
        end = shoff + shnum * shentsize
        if end > MAX_CUBIN_BYTES or at + end > len(blob):
            return None
        sections = [struct.unpack_from("<IIQQQQIIQQ", blob, at + shoff + k * 64) for k in range(shnum)]
        for _name, typ, _fl, _addr, off, size, *_ in sections:
            if typ != 8:  # SHT_NOBITS has no bytes in the file
                end = max(end, off + size)
        if phnum and phentsize != 56:
            return None
        for k in range(phnum):
            _t, _f, off, _va, _pa, filesz, *_ = struct.unpack_from("<IIQQQQQQ", blob, at + phoff + k * phentsize)
            end = max(end, off + filesz)
        if end > MAX_CUBIN_BYTES or at + end > len(blob):
            return None
        data = blob[at:at + end]
        code = _function_code(data, sections, shstrndx)
        return Cubin(data, hashlib.sha256(data).hexdigest(), code, _function_symbols(data, sections, shstrndx, code), at,
                     _constant2(data, sections, shstrndx))
    except (struct.error, IndexError, ValueError):
        return None


def _function_code(data: bytes, sections: list[tuple], shstrndx: int) -> dict[str, str]:
    """Mangled name -> SHA-256 of the bytes of its `.text.<name>` section."""
    stroff, strsize = sections[shstrndx][4], sections[shstrndx][5]
    names = data[stroff:stroff + strsize]
    code = {}
    for sh_name, typ, _fl, _addr, off, size, *_ in sections:
        end = names.find(b"\0", sh_name)
        if typ != 1 or end < 0:  # SHT_PROGBITS
            continue
        name = names[sh_name:end]
        if name.startswith(b".text.") and off + size <= len(data):
            code[name[6:].decode("utf-8", "replace")] = hashlib.sha256(data[off:off + size]).hexdigest()
    return code


def _constant2(data: bytes, sections: list[tuple], shstrndx: int) -> dict[str, tuple[int, ...]]:
    """Mangled name -> the little-endian 32-bit words of its `.nv.constant2.<name>` section
    (at most 4,096: a bank this large is no jump table)."""
    stroff, strsize = sections[shstrndx][4], sections[shstrndx][5]
    names = data[stroff:stroff + strsize]
    out = {}
    for sh_name, typ, _fl, _addr, off, size, *_ in sections:
        end = names.find(b"\0", sh_name)
        if typ != 1 or end < 0 or not names[sh_name:end].startswith(b".nv.constant2."):
            continue
        if off + size <= len(data) and size % 4 == 0 and size <= 4 * 4096:
            out[names[sh_name + 14:end].decode("utf-8", "replace")] = struct.unpack_from(f"<{size // 4}I", data, off)
    return out


def jump_tables(insns: dict[int, str], words: tuple[int, ...] | None, marker: bool = True) -> dict[int, str]:
    """A function's instructions with each `BRX` told the words of the function's constant
    bank 2, where its jump table is (`LDC R, c[0x2][R']` reads the entry, a target's offset
    in the function): ` (*"c[0x2] T0,T1,..."*)` appended, each target a NUL-offset-NUL marker
    (`as_ncu` places it, as it does branch targets) or, with `marker` False, the offset in
    hex. nvdisasm prints these targets only with its data-flow analysis, which `-ndf` skips."""
    if not words:
        return insns
    fmt = (lambda w: f"\0{w}\0") if marker else hex
    note = ' (*"c[0x2] ' + ",".join(fmt(w) for w in words) + '"*)'
    return {pc: (t + note if (split_sass(t)[1] or "").split(".")[0] == "BRX" and "(*" not in t else t)
            for pc, t in insns.items()}


def _function_symbols(data: bytes, sections: list[tuple], shstrndx: int, code: dict[str, str]) -> dict[str, int]:
    """Mangled name -> index in the symbol table of the function symbol (STT_FUNC) whose
    section is `.text.<name>`, for the functions of `code`: what nvdisasm's -fun takes.
    A function without one is left out (then the whole cubin is disassembled)."""
    stroff, strsize = sections[shstrndx][4], sections[shstrndx][5]
    names = data[stroff:stroff + strsize]
    found: dict[str, int] = {}
    for _n, typ, _fl, _addr, off, size, link, _info, _al, entsize in sections:
        if typ != 2 or entsize != 24 or link >= len(sections):  # SHT_SYMTAB, Elf64_Sym
            continue
        str_off, str_size = sections[link][4], sections[link][5]
        strings = data[str_off:str_off + str_size]
        for k in range(min(size, len(data) - off) // 24):
            st_name, st_info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, off + 24 * k)
            if st_info & 0xF != 2 or shndx >= len(sections):  # STT_FUNC
                continue
            end = strings.find(b"\0", st_name)
            sec_end = names.find(b"\0", sections[shndx][0])
            if end < 0 or sec_end < 0:
                continue
            name = strings[st_name:end].decode("utf-8", "replace")
            if name in code and names[sections[shndx][0]:sec_end] == b".text." + strings[st_name:end]:
                found.setdefault(name, k)
        break
    return found


# -- nvdisasm -------------------------------------------------------------------------

Listing = dict[str, dict[int, str]]
"""mangled function -> {offset in the function: instruction text, branch targets kept as
NUL-offset-NUL markers until `as_ncu` places the function}"""


def selection(cubin: Cubin, functions: Iterable[str]) -> list[str]:
    """nvdisasm's arguments beyond NVDISASM_ARGS to list `functions` of `cubin`: -fun with
    their symbols' indices, or nothing (the whole cubin) when that is all of its functions
    or one of them has no symbol."""
    wanted = sorted(set(functions))
    if set(wanted) >= set(cubin.code) or any(f not in cubin.symbols for f in wanted):
        return []
    return ["-fun", ",".join(str(cubin.symbols[f]) for f in wanted)]


def _start(cubin: Cubin, functions: list[str], nvdisasm: str, src: Path, done: Callable[[bytes], None],
           timeout_s: float) -> subprocess.Popen | None:
    """nvdisasm on `functions` of `cubin` (its bytes written to `src` first), in the
    background: a thread hands what it printed to `done`, or b"" when it failed or ran out
    of time, and then removes `src`. None when it cannot start."""
    try:
        src.write_bytes(cubin.data)
        proc = subprocess.Popen([nvdisasm, *NVDISASM_ARGS, *selection(cubin, functions), str(src)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None

    def finish() -> None:
        try:
            text, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            text = b""
        src.unlink(missing_ok=True)
        done(text if proc.returncode == 0 else b"")

    threading.Thread(target=finish, daemon=True).start()
    return proc


def uncached(cubin: Cubin, nvdisasm: str, functions: Iterable[str]) -> list[str]:
    """Those of `functions` (of `cubin`) whose listing by `nvdisasm` is not in the cache."""
    return sorted(f for f in set(functions) & set(cubin.code) if not _is_cached(cubin.sha256, nvdisasm, f))


def start_output(cubin: Cubin, functions: list[str], nvdisasm: str, out: Path,
                 timeout_s: float = NVDISASM_TIMEOUT_S) -> subprocess.Popen | None:
    """Start nvdisasm on `functions` of `cubin` for another process (`Disassembly(...,
    ready=out)`): a thread of this one writes `out` once nvdisasm is done, with what it
    printed, or empty when it failed or ran out of time. The process, for the caller to
    stop if it ends first; None when nothing was started (no function to list, or
    nvdisasm cannot run)."""
    if not functions:
        return None

    def write(text: bytes) -> None:
        part = out.with_suffix(".part")
        try:
            part.write_bytes(text)
            os.replace(part, out)  # whole, or not there
        except OSError:
            pass

    return _start(cubin, functions, nvdisasm, out.with_suffix(".cubin"), write, timeout_s)


class Disassembly:
    """nvdisasm on some functions of one cubin, running in the background from
    construction (but for those in the cache); `listing()` waits for it. With `ready`,
    another process runs it (`start_output`, on the same functions) and `listing()` waits
    for that file."""

    def __init__(self, cubin: Cubin, functions: Iterable[str], nvdisasm: str,
                 timeout_s: float = NVDISASM_TIMEOUT_S, ready: Path | None = None) -> None:
        self.sha256 = cubin.sha256  # not the cubin: its bytes are nvdisasm's to read, not ours to keep
        self.functions = sorted(set(functions) & set(cubin.code))
        self._bank2 = {f: cubin.constant2[f] for f in self.functions if f in cubin.constant2}
        self.tool = nvdisasm
        self.deadline = time.monotonic() + timeout_s
        self._result: Listing = {}
        self._ready = ready
        self._printed: list[bytes] = []
        self._done = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._pending = False  # nvdisasm's output is still to be read
        missing = []
        for f in self.functions:
            cached = load_cached(cubin.sha256, nvdisasm, f)
            if cached is None:
                missing.append(f)
            else:
                self._result[f] = cached
        if not missing:
            return
        self._pending = True
        if ready is not None:
            return
        tmp = tempfile.mkdtemp(prefix="wsperf-cubin-")

        def keep(text: bytes) -> None:
            self._printed.append(text)
            shutil.rmtree(tmp, ignore_errors=True)
            self._done.set()

        self._proc = _start(cubin, missing, nvdisasm, Path(tmp) / "module.cubin", keep, timeout_s)
        if self._proc is None:
            keep(b"")

    def listing(self) -> Listing:
        """The functions listed (of those asked for, and any others nvdisasm printed with
        them); none when nvdisasm failed or ran out of time."""
        if self._pending:
            self._pending = False
            text = self._from_file(self._ready) if self._ready is not None else self._from_thread()
            listed = parse(text.decode("utf-8", "replace")) if text else {}
            for f, insns in listed.items():
                if f not in self._result:
                    self._result[f] = insns
                    store_cached(self.sha256, self.tool, f, insns)
        return {f: jump_tables(insns, self._bank2.get(f)) for f, insns in self._result.items()}

    def _from_thread(self) -> bytes:
        self._done.wait(max(0.0, self.deadline - time.monotonic()))
        return self._printed[0] if self._printed else b""

    def _from_file(self, path: Path) -> bytes:
        while not path.exists() and time.monotonic() < self.deadline:
            time.sleep(0.005)
        try:
            return path.read_bytes()
        except OSError:
            return b""

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()


def keep_output(sha256: str, nvdisasm: str, out: Path) -> None:
    """Store in the cache the functions that `start_output` listed into `out` (for a cubin
    of that SHA-256), where nobody read them; nothing when the file is empty or unreadable."""
    try:
        text = out.read_bytes()
    except OSError:
        return
    for function, insns in (parse(text.decode("utf-8", "replace")) if text else {}).items():
        store_cached(sha256, nvdisasm, function, insns)


def split_sass(text: str) -> tuple[str | None, str | None]:
    """('@!P0', 'SYNCS.PHASECHK.TRANS64.TRYWAIT') from '@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R3+URZ+0x8], R2 ;'."""
    parts = text.split()
    guard = parts.pop(0) if parts and parts[0].startswith("@") else None
    return guard, parts[0].rstrip(";") if parts else None


def parse(out: str) -> Listing:
    """nvdisasm -c output -> {function: {offset: text}}, labels resolved within each function."""
    funcs: dict[str, list[tuple[int, str]]] = {}
    labels: dict[str, dict[str, int]] = {}
    current: list[tuple[int, str]] | None = None
    cur_labels: dict[str, int] = {}
    pending: list[str] = []
    for line in out.splitlines():
        # One pattern a line, chosen by how the line starts (a line of code starts with its
        # offset in a comment): three tries a line were most of the time taken here.
        first = line.lstrip()[:2]
        if first == "/*":
            m = _INSN.match(line) if current is not None else None
            if m:
                offset = int(m.group(1), 16)
                for name in pending:
                    cur_labels[name] = offset
                pending = []
                text = m.group(2).rstrip()
                text = text[:-1].rstrip() if text.endswith(";") else text
                current.append((offset, (_ANNOTATION.sub("", text) if "(*" in text else text).rstrip(" ;")))
        elif first == ".L" and current is not None:
            m = _LABEL.match(line)
            if m:
                pending.append(m.group(1))
        elif first == ".t":
            m = _FUNC_HEADER.match(line)
            if m:
                current = funcs.setdefault(m.group(1), [])
                cur_labels = labels.setdefault(m.group(1), {})
                pending = []
    # Code refers to labels of its own function only (calls name the function).
    return {f: {off: _LABEL_REF.sub(lambda r, L=labels[f]: f"\0{L[r.group(1)]}\0" if r.group(1) in L
                                    else r.group(0), text) if "`(" in text else text for off, text in insns}
            for f, insns in funcs.items()}


def as_ncu(text: str, base: int) -> str:
    """An instruction of `parse` in sass_by_pc's form, for a function loaded at `base`."""
    text = _TARGET.sub(lambda m: hex(base + int(m.group(1))), text)
    guard, _, rest = text.partition(" ") if text.startswith("@") else ("", "", text)
    return f"{guard:<6}{rest}" if guard else f"      {rest}"


# -- the cache -----------------------------------------------------------------------

def cache_dir() -> Path | None:
    """Where listings are kept: $WSPERF_CACHE_DIR, else $XDG_CACHE_HOME/wsperf, else
    ~/.cache/wsperf (each listing under sass/); None when WSPERF_NO_CACHE is set."""
    if os.environ.get("WSPERF_NO_CACHE"):
        return None
    given = os.environ.get("WSPERF_CACHE_DIR")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    try:
        return Path(xdg) / "wsperf" if xdg else Path.home() / ".cache" / "wsperf"
    except RuntimeError:  # no home directory
        return None


def _cache_file(sha256: str, tool: str, function: str) -> Path | None:
    root = cache_dir()
    if root is None:
        return None
    try:
        st = os.stat(tool)
    except OSError:
        return None
    # The disassembler is part of the key: another nvdisasm may print another text.
    who = hashlib.sha256(f"{os.path.realpath(tool)}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:16]
    fn = hashlib.sha256(function.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return root / "sass" / f"{sha256}-{fn}-{who}.json"


def _is_cached(sha256: str, tool: str, function: str) -> bool:
    path = _cache_file(sha256, tool, function)
    return path is not None and path.is_file()


# The largest cache entry read back: a function's listing as JSON (sglang's flash-attention
# kernel, the largest seen, is ~1 MB); anything larger is not ours.
_MAX_CACHE_ENTRY = 256 << 20


def load_cached(sha256: str, tool: str, function: str) -> dict[int, str] | None:
    """The listing of `function` of this cubin stored for this disassembler, or None
    (absent, unreadable, or damaged: its content digest or its names do not match)."""
    path = _cache_file(sha256, tool, function)
    if path is None:
        return None
    raw = read_small(path, _MAX_CACHE_ENTRY)  # a FIFO, a link to /dev/zero or a huge file: a miss
    if raw is None:
        return None
    try:
        head, body = raw.split(b"\n", 1)
        meta = json.loads(head)
        if meta.get("format") != CACHE_FORMAT or meta.get("cubin") != sha256 or meta.get("function") != function \
                or meta.get("digest") != hashlib.sha256(body).hexdigest():
            return None
        return {int(off): text for off, text in json.loads(body)}
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):
        return None


def store_cached(sha256: str, tool: str, function: str, insns: dict[int, str]) -> None:
    """Keep the listing of `function` for next time; silently nothing where the cache
    cannot be written."""
    path = _cache_file(sha256, tool, function)
    if path is None or not insns:
        return
    body = json.dumps(sorted(insns.items())).encode()
    head = json.dumps({"format": CACHE_FORMAT, "cubin": sha256, "function": function,
                       "digest": hashlib.sha256(body).hexdigest()}).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head + b"\n" + body)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
