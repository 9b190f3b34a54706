"""The generated code of a repro, kept in its bundle (`generated/`): what the debugging
method reads next to the symptom (PTX, SASS), and what `wsperf analyze` fills the handoff
worksheet from.

Three sources, each recorded in the manifest as a `generated` run whose outputs map
`<kind>:<name>` to a bundle-relative file:

- the repro's own executable (an ELF with CUDA code): `cuobjdump -ptx` (the PTX modules
  it embeds; none when it was built with `code=sm_XXa` only) and `cuobjdump -sass`;
- Triton: every run of the repro gets `TRITON_CACHE_DIR=<bundle>/generated/triton`, so
  Triton writes each kernel's .ttir/.ttgir/.llir/.ptx/.cubin/.json there (and the
  sanitizer and ncu runs reuse them instead of compiling again);
- CuTe DSL: every run gets `CUTE_DSL_KEEP=ptx,cubin` and `CUTE_DSL_DUMP_DIR=<bundle>/generated/cute`
  (unless the user set a dump directory), so the DSL writes each compiled module's .ptx
  and .cubin there (checked on CPU with CuTe DSL 4.8.1: one `<module>.sm_90a.ptx` and
  `.cubin` per `cute.compile`);
- torch extensions: every run gets `TORCH_EXTENSIONS_DIR=<bundle>/generated/torch_extensions`
  (unless the user set one: then that directory is read), so `torch.utils.cpp_extension.load`
  and `load_inline` build there; each extension's `.so` is listed with `cuobjdump -ptx` and
  `-sass` into generated/torch_ext/. An extension installed ahead of the run (`setup.py`,
  a wheel) is not built there and not named: `--kernel` scopes to it;
- TVM (apache-tvm built with CUDA, apache-tvm-tirx): TVM compiles in memory and writes
  nothing, so every run gets `WSPERF_TVM_DUMP=<bundle>/generated/tvm` and wsperf's
  `sitecustomize` first on PYTHONPATH (`collectors/pyhook/`). It keeps, through TVM's own
  callbacks, each CUDA module's source when TVM builds it and the binary its compiler
  (nvrtc or nvcc) made when the module is first loaded; collect compiles each source to
  PTX here (`nvcc -ptx -lineinfo`) for the worksheet. A repro run with `python -I` or
  `-S` (no sitecustomize) keeps nothing;
- `--source FILE` (repeatable): .cu, .ptx, .cubin or a fatbin, copied as given: TVM/TIRx
  generated CUDA, a CUTLASS build, the source of a binary built without PTX.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from wsperf.collectors.bundle import RunRecord
from wsperf.collectors.disasm import DEFAULT_CU_ARCH
from wsperf.collectors.errors import InputError, WsperfError
from wsperf.collectors.files import input_stat
from wsperf.collectors.process import is_elf, run_bounded
from wsperf.collectors.ptx import compile_ptx

GENERATED = "generated"
TRITON_CACHE = "generated/triton"
CUTE_DUMP = "generated/cute"
TORCH_EXTENSIONS = "generated/torch_extensions"
TORCH_EXT_LISTINGS = "generated/torch_ext"
TVM_DUMP = "generated/tvm"
# wsperf's sitecustomize for Python repros (keeps TVM's in-memory CUDA modules)
PYHOOK = Path(__file__).resolve().parent / "pyhook"
_MAX_TVM_MODULES = 16
SOURCES = "generated/sources"
# What a --source may be, by suffix; anything else is refused before the repro runs.
SOURCE_SUFFIXES = (".cu", ".cuh", ".ptx", ".cubin", ".fatbin", ".o", ".so", ".ptx.txt")
MAX_SOURCE_BYTES = 1 << 30
# Triton's cache holds a folder per compiled kernel; these are the files kept per kernel.
TRITON_KINDS = {".ptx": "ptx", ".cubin": "cubin", ".ttgir": "ttgir", ".ttir": "ttir", ".llir": "llir",
                ".json": "json", ".source": "source"}
_TOOL_S = 120
_MAX_EXTENSIONS = 16


def check_sources(sources: tuple[str, ...]) -> None:
    """Refuse a --source that is not a readable regular file of a known kind."""
    for s in sources:
        p = Path(s)
        if not any(p.name.endswith(x) for x in SOURCE_SUFFIXES):
            raise InputError(f"--source {s}: not a kind wsperf reads ({', '.join(SOURCE_SUFFIXES)})")
        input_stat(p, kind="a --source file", limit=MAX_SOURCE_BYTES)


def keep_binary_code(st: Any, exe: str, cuobjdump: str | None) -> None:
    """`cuobjdump -ptx` and `-sass` of the repro's executable into generated/."""
    if cuobjdump is None or not is_elf(exe) or not (st.target.get("sass") or st.target.get("ptx")):
        return  # the target check's listing found no CUDA code in it (a Python interpreter, say)
    name = Path(exe).name
    outputs = _listings(st, cuobjdump, exe, f"{GENERATED}/{name}", name, f"{GENERATED}/cuobjdump")
    if "sass:" + name in outputs and "ptx:" + name not in outputs:
        st.warnings.append(f"{exe} embeds no PTX (built with code=sm_XXa only?): the handoff worksheet needs the "
                           "kernel's PTX or source: give it with --source FILE (.cu or .ptx)")
    st.generated.update(outputs)


def _listings(st: Any, cuobjdump: str, binary: str, stem: str, name: str, run_name: str,
              note: str = "") -> dict[str, str]:
    """`cuobjdump -ptx` and `-sass` of `binary` into `stem`.ptx / .sass (bundle-relative),
    one recorded run each (`run_name` + the flag); the outputs (`ptx:<name>`,
    `sass:<name>`) of those that hold code."""
    outputs = {}
    for flag, kind in (("-ptx", "ptx"), ("-sass", "sass")):
        rel = f"{stem}.{kind}"
        done = run_bounded([cuobjdump, flag, binary], timeout=_TOOL_S, stdout_file=st.root / rel)
        out = {f"{kind}:{name}": rel} if done.exit_code == 0 and _holds(st.root / rel, kind) else {}
        st.record("generated", "cuobjdump", done, f"{run_name}{flag}", outputs=out, stdout_at=rel, note=note)
        outputs.update(out)
    return outputs


def keep_sources(st: Any, sources: tuple[str, ...], arch: str = DEFAULT_CU_ARCH) -> None:
    """Copy each --source file into generated/sources/ and record where it came from. A
    .cu file is also compiled to PTX here (`nvcc -ptx -lineinfo`, where its includes
    resolve), since the copy alone may not compile elsewhere."""
    if not sources:
        return
    dest = st.root / SOURCES
    dest.mkdir(parents=True, exist_ok=True)
    outputs = {}
    for i, s in enumerate(sources):
        p = Path(s)
        target = dest / (p.name if not (dest / p.name).exists() else f"{i}-{p.name}")
        shutil.copyfile(p, target)
        kind = source_kind(p)
        if kind == "cu":
            outputs[f"source:{p.name}"] = str(target.relative_to(st.root))
            ptx = target.with_suffix(".ptx")
            try:
                ptx.write_text(compile_ptx(p, arch), encoding="utf-8")
                outputs[f"ptx:{ptx.name}"] = str(ptx.relative_to(st.root))
            except WsperfError as e:
                st.warnings.append(f"--source {s}: not compiled to PTX ({e}); the worksheet will lack it")
        else:
            outputs[f"{kind}:{p.name}"] = str(target.relative_to(st.root))
    st.runs.append(RunRecord("generated", "source", ["--source", *sources], 0, 0.0, outputs=outputs,
                             note="copied from " + ", ".join(str(Path(s).resolve()) for s in sources)))
    st.generated.update(outputs)
    st.flush()


def keep_triton_cache(st: Any) -> None:
    """Record what Triton compiled into generated/triton during the plain run."""
    cache = st.root / TRITON_CACHE
    if not cache.is_dir():
        return
    outputs = {}
    for f in sorted(cache.rglob("*")):
        kind = TRITON_KINDS.get(f.suffix)
        if kind is None or not f.is_file() or f.is_symlink():
            continue
        if f.name.startswith("__grp__"):  # Triton's index of a kernel's files, not a kernel's
            continue
        outputs[f"{kind}:{f.parent.name}/{f.name}"] = str(f.relative_to(st.root))
    if outputs:
        st.runs.append(RunRecord("generated", "triton", [], 0, 0.0, outputs=outputs,
                                 note=f"Triton's cache (TRITON_CACHE_DIR={TRITON_CACHE}) after the plain run"))
        st.generated.update(outputs)
        st.flush()


def keep_cute_dump(st: Any) -> None:
    """Record what CuTe DSL dumped into generated/cute during the plain run."""
    dump = st.root / CUTE_DUMP
    if not dump.is_dir():
        return
    outputs = {f"{'ptx' if f.suffix == '.ptx' else 'cubin'}:cute/{f.name}": str(f.relative_to(st.root))
               for f in sorted(dump.iterdir()) if f.suffix in (".ptx", ".cubin") and f.is_file() and not f.is_symlink()}
    if outputs:
        st.runs.append(RunRecord("generated", "cute-dsl", [], 0, 0.0, outputs=outputs,
                                 note=f"CuTe DSL's dump (CUTE_DSL_DUMP_DIR={CUTE_DUMP}) after the plain run"))
        st.generated.update(outputs)
        st.flush()


def keep_tvm_dump(st: Any, arch: str = DEFAULT_CU_ARCH) -> None:
    """Record the CUDA modules TVM built during the plain run (generated/tvm, written by
    collectors/pyhook/sitecustomize.py): each module's source, the binary TVM's compiler
    made for it where the module was loaded, and its PTX compiled here for the worksheet."""
    dump = st.root / TVM_DUMP
    if not dump.is_dir():
        return
    sources = sorted(f for f in dump.glob("tvm_*.cu") if f.is_file() and not f.is_symlink())
    outputs: dict[str, str] = {}
    for cu in sources[:_MAX_TVM_MODULES]:
        outputs[f"source:tvm/{cu.name}"] = str(cu.relative_to(st.root))
        for suffix, kind in ((".cubin", "cubin"), (".fatbin", "cubin"), (".ptx", "ptx")):
            made = cu.with_suffix(suffix)
            if made.is_file() and not made.is_symlink():
                outputs[f"{kind}:tvm/{made.name}"] = str(made.relative_to(st.root))
        if f"ptx:tvm/{cu.stem}.ptx" not in outputs:
            ptx = cu.with_name(cu.stem + ".lineinfo.ptx")
            try:
                ptx.write_text(compile_ptx(cu, arch), encoding="utf-8")
                outputs[f"ptx:tvm/{ptx.name}"] = str(ptx.relative_to(st.root))
            except WsperfError as e:
                st.warnings.append(f"TVM's module {cu.name}: not compiled to PTX ({e}); the worksheet will lack it")
    if len(sources) > _MAX_TVM_MODULES:
        st.warnings.append(f"TVM built {len(sources)} CUDA modules: the first {_MAX_TVM_MODULES} are kept")
    if outputs:
        st.runs.append(RunRecord("generated", "tvm", [], 0, 0.0, outputs=outputs,
                                 note=f"TVM's CUDA modules (WSPERF_TVM_DUMP={TVM_DUMP}) after the plain run"))
        st.generated.update(outputs)
        st.flush()


def torch_extensions_dir(root: Path, env: dict[str, str]) -> Path:
    """Where the repro's torch extensions are built: the user's TORCH_EXTENSIONS_DIR, else
    the bundle's."""
    return Path(env["TORCH_EXTENSIONS_DIR"]) if env.get("TORCH_EXTENSIONS_DIR") else root / TORCH_EXTENSIONS


def keep_torch_extensions(st: Any, build_dir: Path, cuobjdump: str | None) -> None:
    """List the CUDA code of each extension torch built during the plain run (every `.so`
    under its build directory holding a fatbin): `cuobjdump -ptx` and `-sass` into
    generated/torch_ext/, one run each. The SASS's `Function :` lines name the repro's
    own kernels (`scope.jit_kernels`); the listings map a hang's PCs."""
    if cuobjdump is None or not build_dir.is_dir():
        return
    outputs: dict[str, str] = {}
    libs = [so for so in sorted(build_dir.rglob("*.so")) if so.is_file() and not so.is_symlink() and is_elf(str(so))]
    for so in libs[:_MAX_EXTENSIONS]:
        name = so.parent.name if so.stem == so.parent.name else f"{so.parent.name}-{so.stem}"
        (st.root / TORCH_EXT_LISTINGS).mkdir(parents=True, exist_ok=True)
        outputs.update(_listings(st, cuobjdump, str(so), f"{TORCH_EXT_LISTINGS}/{name}", f"torch_ext/{name}",
                                 f"{TORCH_EXT_LISTINGS}/cuobjdump-{name}", note=f"the torch extension {so}"))
    if len(libs) > _MAX_EXTENSIONS:
        st.warnings.append(f"{len(libs)} torch extensions under {build_dir}: the first {_MAX_EXTENSIONS} are listed")
    st.generated.update(outputs)
    st.flush()


def source_kind(p: Path) -> str:
    """The kind a generated file is recorded as, by its name: ptx, cu, cubin or binary."""
    for suffix, kind in ((".ptx", "ptx"), (".cu", "cu"), (".cuh", "cu"), (".cubin", "cubin")):
        if p.name.endswith(suffix):
            return kind
    return "binary"


def _holds(path: Path, kind: str) -> bool:
    """Whether cuobjdump's output holds code: for a binary without PTX, `-ptx` still prints
    a "Fatbin elf code" header per cubin (exit 0), with no `.version` module."""
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    if kind == "ptx":
        return re.search(rb"^\s*\.version\s+\d", head, re.M) is not None
    return bool(head.strip())
