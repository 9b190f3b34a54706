"""Static rows from compiled code, without a GPU: NVIDIA's `cuobjdump` disassembles the
cubins embedded in an executable, a shared library, a fatbin or a `.cubin`, and `nvcc`
compiles a `.cu` file to a cubin first. The result goes into the same tables as a
profile, where the shapes match:

- one `reports` row per inspected file, `kind = 'static'`, with the cubin's architecture
  (sm_100a -> arch 'sm_100', compute capability '10.0') and no device;
- one `launches` row per kernel: names, registers and static shared memory from
  `cuobjdump --dump-resource-usage`; every launch-only column (grid, duration,
  occupancy ...) NULL;
- one `sass` row per instruction: pc = offset in the function, opcode/guard parsed from
  the SASS line exactly as the profile loader does; every counter NULL.

`opcodes` stays empty: executed counts do not exist statically, and nothing may look as
if it ran. The tools run with argument lists and timeouts; the toolkit's binaries are
preferred, the `nvidia-cuda-cuobjdump` wheel's are the fallback.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from wsperf.collectors.errors import InputError, WsperfError
from wsperf.collectors.files import GiB, find_binary, input_stat, read_input, read_small
from wsperf.collectors.cubin import find_cubins, jump_tables, split_sass
from wsperf.collectors.store import transaction

TOOL_TIMEOUT_S = 120.0  # cuobjdump on a large library takes seconds; more is a hang
COMPILE_TIMEOUT_S = 600.0  # nvcc on one .cu file
DEFAULT_CU_ARCH = "sm_90a"

MAX_INPUT_BYTES = 2 * GiB  # a binary to inspect (its cubins are read whole)
_ARCH = re.compile(r"^sm_(\d+)([a-z]?)$")
_SECTION = re.compile(r"^\s*(?:arch = |code for )(sm_\w+)\s*$")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
# `/*0080*/   @P0 UTMALDG.2D [UR4], [UR8] ;   /* 0x00000004080075b4 */`
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?;)\s*/\* 0x[0-9a-fA-F]+ \*/\s*$")
_RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_RES_FIELD = re.compile(r"([A-Z_\[\]0-9]+):(\d+)")
# ptxas -v: "Compiling entry function '_Z..' for 'sm_100a'", "Used 40 registers",
# "704 bytes stack frame, 1240 bytes spill stores, 1240 bytes spill loads"
_PTXAS_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


class ToolError(WsperfError):
    """A disassembler or compiler wsperf needs is missing or failed."""


@dataclass(frozen=True)
class Instruction:
    pc: int  # offset in the function (bytes)
    opcode: str | None
    opcode_full: str | None
    guard: str | None
    text: str  # the instruction as disassembled, e.g. '@P0 UTMALDG.2D [UR4], [UR8] ;'


@dataclass(frozen=True)
class CompilerInfo:
    """What ptxas -v said about one kernel (only when wsperf compiled the .cu)."""

    registers: int | None
    stack_bytes: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None


@dataclass
class Kernel:
    """One kernel of one cubin: names, resources, SASS."""

    arch: str  # the cubin's, e.g. 'sm_100a'
    mangled: str
    instructions: list[Instruction] = field(default_factory=list)
    registers: int | None = None
    shared_bytes: int | None = None  # static shared memory per CTA
    stack_bytes: int | None = None
    local_bytes: int | None = None
    demangled: str | None = None
    compiler: CompilerInfo | None = None


@dataclass(frozen=True)
class StaticLoad:
    """What inspecting one file did."""

    report_id: int
    path: Path
    arch: str  # the cubin architecture inspected, e.g. 'sm_100a'
    archs: tuple[str, ...]  # every architecture the file holds
    kernels: int
    already_present: bool
    compiler_messages: tuple[str, ...]  # ptxas warnings/infos worth reading (compiled .cu only)
    kernel_info: dict[str, Kernel]  # by mangled name


def arch_parts(arch: str) -> tuple[str, str]:
    """('sm_100', '10.0') from 'sm_100a'."""
    m = _ARCH.match(arch)
    if not m:
        raise InputError(f"unknown architecture {arch!r}; give one like sm_90a or sm_100a")
    digits = m.group(1)
    return f"sm_{digits}", f"{digits[:-1]}.{digits[-1]}"


def find_tool(name: str) -> str:
    path = find_binary(name)
    if path is None:
        raise ToolError(f"{name} not found: install the CUDA toolkit, or `pip install nvidia-cuda-{name}`")
    return path


def _run(argv: list[str], timeout: float, what: str) -> subprocess.CompletedProcess:
    try:
        # stdin is /dev/null: a compiled file that includes /dev/stdin must not wait on wsperf's
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{what}: {Path(argv[0]).name} did not finish in {timeout:.0f} s") from None
    except OSError as e:
        raise ToolError(f"{what}: cannot run {argv[0]} ({e.strerror or e})") from None


# A temporary directory nvcc may be given: its path reaches the shell nvcc runs its stages
# through, so it must hold no character a shell reads.
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_./+-]+")


def _private_dir(prefix: str) -> str:
    tmp = tempfile.mkdtemp(prefix=prefix)
    if _SHELL_SAFE.fullmatch(tmp):
        return tmp
    os.rmdir(tmp)  # a TMPDIR with spaces or shell characters: the system's own /tmp instead
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_SCAN_FILES = 2000  # files the include scan opens at most
_SCAN_BYTES = 64 << 20  # bytes of one file it reads at most (a larger one is not scanned)


def check_includes(src: Path) -> None:
    """Refuse a source whose includes reach a file that is not a regular file: a FIFO (the
    preprocessor waits on it until the compile's time limit), `/dev/zero` (it reads until
    memory runs out), `/dev/stdin`, a directory. The user's own files are followed (quoted
    includes from the including file's directory and the source's, any absolute path), at
    most _SCAN_FILES of them, each only when it is a regular file; the toolkit's `<...>`
    headers are not. Raises InputError naming the include and the file that has it."""
    import stat as st_

    top = Path(src).resolve().parent
    seen: set[Path] = set()
    todo = [Path(src)]
    while todo and len(seen) < _SCAN_FILES:
        f = todo.pop()
        try:
            key = f.resolve()
        except (OSError, RuntimeError):
            continue
        if key in seen:
            continue
        seen.add(key)
        try:
            info = os.stat(f)
        except OSError:
            continue
        if not st_.S_ISREG(info.st_mode) or info.st_size > _SCAN_BYTES:
            continue
        try:
            with open(f, "rb") as fh:
                text = fh.read(_SCAN_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        for m in _INCLUDE.finditer(text):
            name = m.group(2).strip()
            cands = [Path(name)] if name.startswith("/") else \
                [f.parent / name, top / name] if m.group(1) == '"' else []
            for c in cands:
                try:
                    ci = os.stat(c)
                except OSError:
                    continue
                if not st_.S_ISREG(ci.st_mode):
                    kind = "a FIFO" if st_.S_ISFIFO(ci.st_mode) else "a device" if st_.S_ISCHR(ci.st_mode) or \
                        st_.S_ISBLK(ci.st_mode) else "a directory" if st_.S_ISDIR(ci.st_mode) else "not a regular file"
                    where = "" if f == Path(src) else f" (from {_printable_path(f)})"
                    raise InputError(f"{src}: #include {m.group(1)}{name}{'>' if m.group(1) == '<' else chr(34)}"
                                     f"{where} is {kind}, which a compile would wait on or read without end: not "
                                     "compiled; include regular files only")
                todo.append(c)
                break


def run_nvcc(src: Path, arch: str, mode: list[str], out: Path, needs: str, instead: str) -> list[str]:
    """Compile `src` for `arch` with the extra `mode` options into `out`; nvcc's and
    ptxas' output lines. No nvcc: a ToolError saying what `needs` it and what to give
    `instead`; a failed compile: an InputError with nvcc's first error lines.

    nvcc hands file names to a shell that runs its stages, so a user's name is never given
    to it: it compiles a private copy (`source.cu`) in a directory of its own, finds the
    copy's own includes through a link to the source's directory (`-I`, under a name as
    safe), writes `result` there, and the result is moved to `out`. What nvcc prints, and
    a PTX `.file` directive, name the user's file again."""
    check_includes(src)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise ToolError(f"{src}: {needs} needs nvcc, which is not on PATH: install the CUDA toolkit "
                        f"(12.8 or newer for sm_100a) and put its bin/ on PATH, or give {instead}")
    tmp = _private_dir("wsperf-nvcc-")
    try:
        copy = Path(tmp) / "source.cu"
        try:
            shutil.copyfile(src, copy)
        except OSError as e:
            raise InputError(f"{src}: cannot read ({e.strerror or e})") from None
        (Path(tmp) / "srcdir").symlink_to(Path(src).resolve().parent, target_is_directory=True)
        result = Path(tmp) / "result"
        proc = _run([nvcc, f"-arch={arch}", *mode, f"-I{tmp}/srcdir", "-o", str(result), str(copy)],
                    COMPILE_TIMEOUT_S, str(src))
        private = re.compile(re.escape(str(copy)) + "|" + re.escape(f"{tmp}/srcdir"))

        def named(text: str, where: Path) -> str:  # the private names back to the user's
            return private.sub(lambda m: _printable_path(where if m.group(0) == str(copy) else where.parent), text)

        lines = [named(ln, Path(src)) for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        if proc.returncode != 0 or not result.exists():
            errors = [ln for ln in lines if "error" in ln.lower()] or lines
            flags = " ".join([f"-arch={arch}", *(m for m in mode if m == "-ptx")])
            raise InputError(f"{src}: nvcc {flags} failed (exit {proc.returncode}): " + " | ".join(errors[:3])[:600])
        if "-ptx" in mode:  # .file "<tmp>/source.cu" names the user's file (absolute), as a direct compile would
            text = result.read_text(errors="replace")
            result.write_text(re.sub(r'^(\s*\.file\s+\d+\s+"[^"\n]*)', lambda m: named(m.group(1), Path(src).resolve()),
                                     text, flags=re.M))
        shutil.move(str(result), str(out))
        return lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _printable_path(p: Path) -> str:
    """`p` as a PTX string or a message may hold it: quotes, backslashes and control
    characters become '_'."""
    return re.sub(r'["\\\x00-\x1f\x7f]', "_", str(p))


def compile_cu(src: Path, arch: str, out_dir: Path) -> tuple[Path, list[str]]:
    """Compile `src` to a cubin for `arch` with `-Xptxas -v`; the cubin and ptxas' lines."""
    cubin = out_dir / (src.stem + f".{arch}.cubin")
    lines = run_nvcc(src, arch, ["-cubin", "-O3", "-Xptxas", "-v"], cubin, "compiling a .cu file",
                     "a compiled binary or .cubin")
    return cubin, lines


def parse_ptxas(lines: list[str]) -> tuple[dict[str, CompilerInfo], list[str]]:
    """Per-kernel registers/stack/spills, and the lines worth showing: warnings, and
    ptxas' performance notes (C7515 wgmma serialized, C7508 setmaxnreg ignored, ...)."""
    info: dict[str, dict[str, int]] = {}
    current = None
    notes = []
    for ln in lines:
        if m := _PTXAS_ENTRY.search(ln):
            current = m.group(1)
            info.setdefault(current, {})
        if current is not None and (m := _PTXAS_REGS.search(ln)):
            info[current]["registers"] = int(m.group(1))
        if current is not None and (m := _PTXAS_FRAME.search(ln)):
            info[current].update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                                 spill_load_bytes=int(m.group(3)))
        if "warning" in ln.lower() or re.search(r"\(C\d{4}\)", ln):
            notes.append(ln.strip())
    return {k: CompilerInfo(v.get("registers"), v.get("stack_bytes"), v.get("spill_store_bytes"),
                            v.get("spill_load_bytes")) for k, v in info.items()}, notes


def parse_sass(text: str) -> dict[str, dict[str, Kernel]]:
    """Kernels by architecture and mangled name, from `cuobjdump -sass` output (the
    first copy of a kernel wins when a binary embeds the same cubin twice)."""
    out: dict[str, dict[str, Kernel]] = {}
    arch = None
    cur: Kernel | None = None
    for ln in text.splitlines():
        if m := _SECTION.match(ln):
            arch, cur = m.group(1), None
            out.setdefault(arch, {})
        elif m := _FUNCTION.match(ln):
            if arch is None:
                raise InputError("cuobjdump printed a function before any architecture; its output is not understood")
            cur = Kernel(arch, m.group(1))
            if cur.mangled in out[arch]:
                cur = None  # a duplicate copy: skip its instructions
            else:
                out[arch][cur.mangled] = cur
        elif cur is not None and (m := _INSTR.match(ln)):
            text_ = " ".join(m.group(2).split())
            guard, full = split_sass(text_)
            cur.instructions.append(Instruction(int(m.group(1), 16), full.split(".", 1)[0] if full else None,
                                                full, guard, text_))
    return {a: ks for a, ks in out.items() if ks}


def parse_resource_usage(text: str) -> dict[tuple[str | None, str], dict[str, int]]:
    """REG/STACK/SHARED/LOCAL per (architecture or None, mangled name)."""
    out: dict[tuple[str | None, str], dict[str, int]] = {}
    arch = None
    name = None
    for ln in text.splitlines():
        if m := _SECTION.match(ln):
            arch = m.group(1)
        elif m := _RES_FUNCTION.match(ln):
            name = m.group(1)
        elif name is not None and "REG:" in ln:
            out.setdefault((arch, name), {k: int(v) for k, v in _RES_FIELD.findall(ln)})
            name = None
    return out


def demangle(names: list[str]) -> dict[str, str]:
    """Itanium names through c++filt (binutils) when present; else names stay as they are.
    CUTLASS's names nest templates deeper than c++filt's default recursion limit, past
    which it prints the name unchanged: `--no-recurse-limit` lifts it; a c++filt without
    that option (older binutils, cu++filt) refuses it, and is run again without."""
    filt = shutil.which("c++filt") or shutil.which("cu++filt")
    if filt is None or not names:
        return {n: n for n in names}
    for options in (["--no-recurse-limit"], []):
        try:
            proc = subprocess.run([filt, *options], input="\n".join(names) + "\n", capture_output=True, text=True,
                                  timeout=TOOL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return {n: n for n in names}
        out = proc.stdout.splitlines()
        if proc.returncode == 0 and len(out) == len(names):
            return dict(zip(names, out))
    return {n: n for n in names}


def _function_name(demangled: str) -> str:
    """'gemm_ws' from 'void gemm_ws<true>(CUtensorMap_st, ...)' (ncu's NameBase_FUNCTION)."""
    head = demangled.split("(", 1)[0]
    depth, name = 0, []
    for ch in head:
        depth += ch == "<"
        if depth == 0:
            name.append(ch)
        depth -= ch == ">"
    return "".join(name).split()[-1] if "".join(name).split() else demangled


def disassemble(path: Path, arch: str | None = None) -> tuple[str, tuple[str, ...], dict[str, Kernel]]:
    """(architecture inspected, all architectures in the file, its kernels). Without
    `arch`, a file holding several architectures is inspected for the newest."""
    cuobjdump = find_tool("cuobjdump")
    proc = _run([cuobjdump, "-sass", str(path)], TOOL_TIMEOUT_S, str(path))
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        reason = reason.replace("cuobjdump info    : ", "").replace("cuobjdump fatal   : ", "")
        raise InputError(f"{path}: no CUDA device code to disassemble ({reason}); give an executable, "
                         "shared library, fatbin or .cubin with SASS for the GPU, or a .cu file")
    by_arch = parse_sass(proc.stdout)
    if not by_arch:
        raise InputError(f"{path}: holds no SASS (PTX only, or no kernels); compile it with -arch=sm_XXa or "
                         "-gencode ...,code=sm_XXa")
    archs = tuple(sorted(by_arch, key=lambda a: int(_ARCH.match(a).group(1)) if _ARCH.match(a) else 0))
    if arch is None:
        arch = archs[-1]
    elif arch not in by_arch:
        raise InputError(f"{path}: holds no SASS for {arch}; it holds {', '.join(archs)}")
    kernels = by_arch[arch]
    res = _run([cuobjdump, "--dump-resource-usage", str(path)], TOOL_TIMEOUT_S, str(path))
    usage = parse_resource_usage(res.stdout) if res.returncode == 0 else {}
    names = demangle(list(kernels))
    for k in kernels.values():
        u = usage.get((arch, k.mangled)) or usage.get((None, k.mangled)) or {}
        k.registers, k.shared_bytes = u.get("REG"), u.get("SHARED")
        k.stack_bytes, k.local_bytes = u.get("STACK"), u.get("LOCAL")
        k.demangled = names.get(k.mangled, k.mangled)
    return arch, archs, kernels


def _read_jump_tables(blob: bytes, kernels: dict[str, Kernel]) -> None:
    """Tell each kernel's `BRX` where its jump table points (`cubin.jump_tables`), from the
    kernel's constant bank 2 in the ELF `blob` holds (a .cubin, or a binary whose fatbin
    keeps it uncompressed), where exactly one such ELF holds the kernel's code. Otherwise
    the text stays as cuobjdump printed it and the partitions take the targets in address
    order, an assumption they state."""
    brx = [k for k in kernels.values() if any(i.opcode == "BRX" for i in k.instructions)]
    if not brx:
        return
    banks: dict[str, set[tuple[int, ...]]] = {}
    for c in find_cubins(blob):
        for name, words in c.constant2.items():
            if name in c.code:
                banks.setdefault(name, set()).add(words)
    for k in brx:
        words = banks.get(k.mangled)
        if not words or len(words) != 1:
            continue
        texts = jump_tables({i.pc: i.text for i in k.instructions}, next(iter(words)), marker=False)
        k.instructions = [Instruction(i.pc, i.opcode, i.opcode_full, i.guard, texts[i.pc]) for i in k.instructions]




def load_static(con: duckdb.DuckDBPyConnection, path: str | Path, arch: str | None = None) -> StaticLoad:
    """Inspect one file into the store (one transaction). A `.cu` file is compiled for
    `arch` (default sm_90a) first; its identity is then the cubin's bytes. A file that
    holds several architectures is identified by its bytes and the one inspected."""
    p = Path(path)
    if arch is not None:
        arch_parts(arch)
    # A regular file (a FIFO would hang cuobjdump), of bounded size.
    if input_stat(p, kind="an executable, shared library, fatbin, .cubin or .cu file", limit=MAX_INPUT_BYTES).st_size == 0:
        raise InputError(f"{p}: is empty (0 bytes), not CUDA code")
    cuobjdump_version = _tool_version("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="wsperf-inspect-") as tmp:
        messages: list[str] = []
        compiler: dict[str, CompilerInfo] = {}
        target = p
        if p.suffix == ".cu":
            target, lines = compile_cu(p, arch or DEFAULT_CU_ARCH, Path(tmp))
            compiler, messages = parse_ptxas(lines)
        chosen, archs, kernels = disassemble(target, arch)
        # read once: its identity, and the jump tables in its ELF's constant banks
        data = read_input(target, kind="an executable, shared library, fatbin, .cubin or .cu file",
                          limit=MAX_INPUT_BYTES)
        _read_jump_tables(data, kernels)
        salt = "" if len(archs) == 1 else f"\0{chosen}"
        digest, size = hashlib.sha256(data + salt.encode()).hexdigest(), len(data)
        for name, k in kernels.items():
            k.compiler = compiler.get(name)
        found = con.execute("SELECT report_id FROM reports WHERE sha256 = ?", [digest]).fetchall()
        if found:
            return StaticLoad(found[0][0], p, chosen, archs, len(kernels), True, tuple(messages), kernels)
        short, cc = arch_parts(chosen)
        with transaction(con, f"static rows of {p}"):
            ((report_id, base),) = con.execute(
                "SELECT (SELECT coalesce(max(report_id), 0) + 1 FROM reports),"
                " (SELECT coalesce(max(launch_id), 0) + 1 FROM launches)").fetchall()
            con.execute(
                "INSERT INTO reports BY NAME SELECT ? AS report_id, ? AS path, ? AS sha256, ? AS size_bytes, "
                "? AS reader_version, ? AS compute_capability, ? AS arch, ? AS num_launches, ? AS loaded_at, "
                "'static' AS kind",
                [report_id, str(p.resolve()), digest, size, cuobjdump_version, cc, short, len(kernels),
                 dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)])
            launch_rows, sass_rows = [], []
            dynamic = _triton_dynamic_smem(p)
            for idx, k in enumerate(kernels.values()):
                lid = base + idx
                launch_rows.append((lid, report_id, 0, idx, k.mangled, k.demangled, _function_name(k.demangled or k.mangled),
                                    "kernel", k.registers, k.shared_bytes, dynamic.get(k.mangled), 0))
                sass_rows += [(lid, i.pc, 0, i.pc, i.opcode, i.opcode_full, i.guard, i.text) for i in k.instructions]
            con.executemany(
                "INSERT INTO launches (launch_id, report_id, range_idx, action_idx, kernel_mangled, kernel_demangled, "
                "kernel_function, workload_type, registers_per_thread, static_smem_bytes, dynamic_smem_bytes, "
                "num_metrics) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", launch_rows)
            if sass_rows:
                import pyarrow as pa

                table = pa.table(list(zip(*sass_rows)), names=["launch_id", "pc", "function_pc", "func_offset",
                                                               "opcode", "opcode_full", "guard", "sass"])
                con.register("_wsperf_static_sass", table)
                try:
                    con.execute("INSERT INTO sass BY NAME SELECT * FROM _wsperf_static_sass")
                finally:
                    con.unregister("_wsperf_static_sass")
    return StaticLoad(report_id, p, chosen, archs, len(kernels), False, tuple(messages), kernels)


def _triton_dynamic_smem(p: Path) -> dict[str, int]:
    """{kernel: dynamic shared memory bytes} from Triton's metadata beside a cubin (its cache
    keeps `name.cubin` with `name.json`, whose `shared` is what the launch asks for): a
    static cubin does not say it, the launch does."""
    for meta in (p.with_suffix(".json"), p.parent / (p.name.split(".")[0] + ".json")):
        raw = read_small(meta, 1 << 20)
        if raw is None:
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("name"), str) and isinstance(doc.get("shared"), int) \
                and not isinstance(doc.get("shared"), bool) and 0 <= doc["shared"] < 1 << 31:
            return {doc["name"]: doc["shared"]}
    return {}


def _tool_version(name: str) -> str | None:
    proc = _run([find_tool(name), "--version"], TOOL_TIMEOUT_S, name)
    m = re.search(r"release ([\d.]+), V([\d.]+)", proc.stdout)
    return f"{name} {m.group(2)}" if m else None
