"""Whose finding is it: the user's kernel, a library kernel, or the sanitizer's own
kernel filter. `collect` (whether to stop) and the correctness report (what to list)
decide it here, the same way.

Kernels that ship in NVIDIA's and PyTorch's libraries are recognised by name.

compute-sanitizer reports races and uninitialized reads inside production
warp-specialized kernels that a user did not write: on the H200 (compute-sanitizer
2025.3.1), racecheck names cuBLAS's `nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT`
(from a bf16 `torch.matmul`, 6 records, ~96,000 hazards) and cuDNN's
`cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_*` (from
`scaled_dot_product_attention`, 4 records). Such a finding is listed as a
`vendor-kernel` finding, with the library, and does not stop a repro whose own kernel is
clean, unless `--kernel` targets that kernel.

The sanitizer's XML names the kernel, not its module, so the name decides. The patterns
are the libraries' own naming schemes; a user kernel named like them is taken as a
library's (say so with `--kernel`).

What the sanitizer checks in the first place (`SanitizerScope`): a Python repro's own
kernels are the ones it compiled itself, which Triton's cache in the bundle names (its
`.json` per kernel, Gluon's too), CuTe DSL's dump (the `.entry` names of its PTX; set
up by collect; fixtures/evidence/cute_ring, run on the H200), and
the torch extensions built during the run in the bundle's TORCH_EXTENSIONS_DIR (the
mangled `Function :` names of each `.so`'s SASS), and TVM's CUDA modules (the
`extern "C" __global__` functions of each module's source, kept by wsperf's
sitecustomize: `collectors/generated.py`). Extensions installed ahead of the run are not
named: such a repro is checked whole. By default
collect checks the named ones, every launch of them, and no other kernel: on the H200 a scoped run of each tool took 8-24 s on a Triton matmul,
a Gluon kernel timed by `do_bench` and a PyTorch program around it, where the unscoped
initcheck of the same matmul did not finish in 250 s (it checks PyTorch's fp32 reference
matmul too). A launch count is not part of the default: racecheck's records on Triton's
partition table came from later launches only (0 of 9 in the first 2 launches of a
Gluon kernel, 1 in the first 5), so checking one launch would miss what racecheck can
see. `--kernel` narrows the scope to a regular expression, `--all-kernels` widens it to
every kernel.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from wsperf.collectors.cudagdb import SASS_FUNCTION
from wsperf.collectors.sanitizer import Handoff, SanitizerFinding, is_error

# (library, pattern on the demangled or mangled name); first match wins.
_LIBRARIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((lib, re.compile(p)) for lib, p in (
    ("cuBLAS", r"^(nvjet_|sm\d+_xmma_|cublas|cublasLt|gemv2[NT]_kernel|gemvNSP_kernel|gemmk1_kernel|"
               r"(void )?gemmSN_|splitKreduce_kernel|dot_kernel|reduce_1Block_kernel)"),
    ("cuDNN", r"^(cudnn|void cudnn|sm\d+_cudnn|cutlass_cudnn|xmma_cudnn)"),
    ("NCCL", r"^(void )?nccl(Dev)?Kernel"),
    ("FlashAttention", r"(^|[ :])(flash_fwd_|flash_bwd_|pytorch_flash::|flash::)"),
    ("CUTLASS library", r"^(void )?cutlass_\d+_"),
    ("PyTorch ATen", r"(^|[ <])at::native::|^(void )?at_cuda_detail::|(^|[ <])at::cuda::"),
))
# A mangled name: the same schemes inside the Itanium encoding.
_MANGLED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("PyTorch ATen", re.compile(r"^_ZN2at6native|^_ZN2at4cuda|^_ZN\d*at_cuda_detail")),
    ("FlashAttention", re.compile(r"^_Z\w*flash_(fwd|bwd)_|^_ZN\d*pytorch_flash")),
    ("NCCL", re.compile(r"^_Z\d+nccl")),
)


def vendor_library(kernel: str | None) -> str | None:
    """The library whose kernel `kernel` is, or None for the user's own."""
    if not kernel:
        return None
    name = kernel.strip()
    for lib, pat in _LIBRARIES:
        if pat.search(name):
            return lib
    for lib, pat in _MANGLED:
        if pat.search(name):
            return lib
    return None


def short_name(mangled: str) -> str | None:
    """The unqualified name of an Itanium-mangled function (`_Z12block_rowsumPKfPfi` ->
    block_rowsum, `_ZN2ns6kernelEv` -> kernel), as compute-sanitizer's records name a kernel;
    None for a name that is not mangled or not read."""
    m = re.match(r"_Z(N)?", mangled)
    if not m:
        return None
    at, last = m.end(), None
    while at < len(mangled) and mangled[at].isdigit():
        n = re.match(r"\d+", mangled[at:])
        size = int(n.group(0))
        start = at + len(n.group(0))
        last = mangled[start:start + size]
        at = start + size
        if not m.group(1):
            break
        if mangled[at:at + 1] == "I":  # template arguments follow the name: it is the last
            break
    return last if last and _PLAIN_NAME.match(last) else None


class Scope(StrEnum):
    USER = "user"  # the user's kernel: an error stops the repro short of a profile
    VENDOR = "vendor-kernel"  # inside a library kernel --kernel does not target: listed, not judged
    FILTER = "filter-artifact"  # caused by the sanitizer's kernel filter itself: listed, not counted


def finding_scope(f: SanitizerFinding, kernel_filter: str | None) -> Scope:
    """Where an error finding `f` belongs, for a sanitizer run under `kernel_filter` (the
    repro's --kernel, or None). Under --kernel-name, initcheck does not track what the
    kernels it leaves unchecked write, so a host read of that memory (a cudaMemcpy after
    them: a finding with no kernel, kind InitcheckApiError) is reported uninitialized:
    measured on the H200 with compute-sanitizer 2025.3.1 (fixtures/evidence/torch_filter)."""
    # A library kernel the filter does not name, or any kernel the scope does not hold (seen in
    # a run once more without the filter: PyTorch's ATen kernels have short names no library
    # pattern tells apart).
    if f.kernel and not _targets(kernel_filter, f.kernel) and (kernel_filter or vendor_library(f.kernel)):
        return Scope.VENDOR
    if kernel_filter and not f.kernel and (f.classification is Handoff.UNINITIALIZED or f.tool == "initcheck"
                                           or f.kind.startswith("Initcheck")):
        # e.g. kind InitcheckApiError, "Host API uninitialized memory access ... by
        # cudaMemcpy source": a copy out of memory an unchecked kernel wrote.
        return Scope.FILTER
    return Scope.USER


def stops(f: SanitizerFinding, kernel_filter: str | None) -> bool:
    """An error of the user's kernel: the repro gets the correctness report, no profile."""
    return is_error(f) and finding_scope(f, kernel_filter) is Scope.USER


def _targets(pattern: str | None, name: str | None) -> bool:
    """Whether --kernel `pattern` names `name` (a library kernel named so is judged as
    the user's own). Names are short; the pattern was accepted by --kernel's check."""
    if not pattern or not name:
        return False
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


# A name compute-sanitizer's `kne=` (the full mangled name) and ncu's `regex:` can take
# as it is: no ',' (the filter's separator) and nothing a regular expression reads.
_PLAIN_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([^\s(]+)", re.M)
# A kernel in TVM's generated CUDA: `extern "C" __global__ void __launch_bounds__(N) name(`
_TVM_GLOBAL = re.compile(r'^extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(',
                         re.M)
# Substrings of library kernels' names a fallback run checks beside the user's kernels
# (`SanitizerScope.fallbacks`): cuBLAS's nvjet kernels (measured), cuBLAS's and cuDNN's
# other families (the same naming as _LIBRARIES).
LIBRARY_FILTERS = ("nvjet", "cublas", "cudnn", "xmma")


def checked_by(argv: list[str]) -> str:
    """What a compute-sanitizer command line checks, read from its own options: every
    kernel, or the kernels its `--kernel-name` filters name, and at most how many launches."""
    names, subs, regexes, exclude, count = [], [], [], [], None
    for opt, val in zip(argv, argv[1:]):
        if opt == "--kernel-name":
            kind, _, what = val.partition("=")
            (names if kind == "kne" else subs if kind == "kns" else regexes).append(what)
        elif opt == "--kernel-name-exclude":
            exclude.append(val.partition("=")[2])
        elif opt == "--launch-count" and val.isdigit():
            count = int(val)
    parts = [f"named {', '.join(names)}"] * bool(names) + [f"whose names contain {', '.join(subs)}"] * bool(subs) \
        + [f"matching the regular expression {' or '.join(regexes)}"] * bool(regexes)
    said = ("the kernels " + " or ".join(parts)) if parts else "every kernel"
    if exclude:
        said += f" but those whose names contain {', '.join(exclude)}"
    if count:
        said += f", at most {count} launch{'es' if count != 1 else ''} of them" if parts else \
            f", the first {count} launch{'es' if count != 1 else ''}"
    return said


# At most this many kernels are named one by one; a repro that compiled more is checked whole.
MAX_SCOPED_KERNELS = 64


class ScopeMode(StrEnum):
    KERNEL = "kernel"  # --kernel REGEX
    USER = "user-kernels"  # the kernels the repro compiled itself (a JIT cache in the bundle)
    ALL = "all"  # every kernel the repro launches


@dataclass(frozen=True)
class SanitizerScope:
    """Which kernels the sanitizer checks, and why; recorded in the manifest (`scope`)."""

    mode: ScopeMode
    kernels: tuple[str, ...] = ()  # USER: their names
    pattern: str | None = None  # KERNEL: the user's regex
    why: str = ""

    @property
    def judged(self) -> str | None:
        """The regular expression a finding's kernel is judged against (None: any kernel):
        a library kernel it does not name is listed, not judged (`finding_scope`)."""
        if self.mode is ScopeMode.KERNEL:
            return self.pattern
        if self.mode is ScopeMode.USER:
            # a finding names its kernel by the short name (`<func>` in the XML: block_rowsum
            # for _Z12block_rowsumPKfPfi): both forms
            return "^(" + "|".join(dict.fromkeys([*self.kernels, *filter(None, map(short_name, self.kernels))])) + ")$"
        return None

    def sanitizer_args(self, launch_count: int | None) -> list[str]:
        """compute-sanitizer's options for this scope: `--kernel-name kne=NAME` per kernel
        (the filters add up), or `regex=` for --kernel; a launch count only when asked
        for (--kernel's default is 1)."""
        if self.mode is ScopeMode.KERNEL:
            return ["--kernel-name", f"regex={self.pattern}", "--launch-count", str(launch_count or 1)]
        if self.mode is ScopeMode.USER:
            argv = [a for k in self.kernels for a in ("--kernel-name", f"kne={k}")]
            return argv + (["--launch-count", str(launch_count)] if launch_count else [])
        return ["--launch-count", str(launch_count)] if launch_count else []

    def fallbacks(self, launch_count: int | None) -> list[tuple[str, list[str]]]:
        """What a tool that failed inside itself under this scope's kernel filter tries next,
        in order: (how it is said, its compute-sanitizer options). Measured on the H200
        (compute-sanitizer 2025.3.1, racecheck on fixtures/src/torch_gluon_mix.py, where the
        filter `kne=gluon_ws_rowsum` fails with "failed to handle a hardware exception":
        scripts/gpu-filter-probe.sh): the same kernel named by `kns=` or `regex=`, or with
        `--launch-count 1`, fails the same way, and so does every kernel but cuBLAS's
        `nvjet_*`; the user's kernel together with `kns=nvjet` works (9 s), and so does every
        kernel (12 s). An unchecked library kernel that faults is what breaks the tool, so
        first the user's kernels with the libraries' kernels beside them (checked, their
        findings listed, not judged), then every kernel, then, least evidence last, one
        launch of the user's kernels."""
        if self.mode is ScopeMode.ALL:
            return []
        named = self.sanitizer_args(launch_count)
        forms: list[tuple[str, list[str]]] = []
        if self.mode is ScopeMode.USER and not launch_count:
            # (with a launch count, library launches would use up the count: not this form)
            forms.append(("with the libraries' kernels checked beside them",
                          named + [a for sub in LIBRARY_FILTERS for a in ("--kernel-name", f"kns={sub}")]))
        forms.append(("without the filter", []))  # every launch: a launch count would count others' launches
        if self.mode is ScopeMode.USER and launch_count != 1:
            forms.append(("on one launch of the filtered kernels", self.sanitizer_args(1)))
        return forms

    def describe(self) -> str | None:
        """One sentence on what was checked and what was not; None for every kernel."""
        if self.mode is ScopeMode.USER:
            n = len(self.kernels)
            return (f"compute-sanitizer checked the {n} kernel{'s' if n != 1 else ''} the repro compiled itself "
                    f"({', '.join(self.kernels)}; {self.why}), every launch; not checked: every other kernel it "
                    "launched (PyTorch's, cuBLAS's, cuDNN's and other libraries'): `wsperf collect --all-kernels` "
                    "checks them, `--kernel REGEX` narrows the check")
        if self.mode is ScopeMode.KERNEL:
            return (f"compute-sanitizer checked only kernels matching --kernel {self.pattern!r}; not checked: every "
                    "other kernel")
        return None

    def as_json(self) -> dict:
        return {"mode": self.mode.value, "kernels": list(self.kernels), "pattern": self.pattern, "why": self.why}

    @classmethod
    def from_json(cls, doc: object) -> "SanitizerScope | None":
        """The manifest's `scope`, or None when it is absent or not one wsperf wrote."""
        if not isinstance(doc, dict):
            return None
        try:
            mode = ScopeMode(doc.get("mode"))
        except ValueError:
            return None
        kernels = doc.get("kernels") if isinstance(doc.get("kernels"), list) else []
        names = tuple(k for k in kernels if isinstance(k, str) and _PLAIN_NAME.match(k))
        pattern = doc.get("pattern") if isinstance(doc.get("pattern"), str) else None
        if (mode is ScopeMode.USER and (not names or len(names) != len(kernels))) or \
                (mode is ScopeMode.KERNEL and not pattern):
            return None
        return cls(mode, names, pattern, doc.get("why") if isinstance(doc.get("why"), str) else "")


def jit_kernels(root: Path, generated: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The kernels a JIT compiled into the bundle during the plain run, by name (Triton's
    cache: the `name` of each kernel's `.json`; CuTe DSL's dump: the `.entry` names of its
    PTX; a torch extension: the `Function :` names of its SASS, mangled; TVM: the `extern "C"
    __global__` functions of each module's source), and the names
    that cannot be a filter as they are. Sorted, each once."""
    names: set[str] = set()
    odd: set[str] = set()
    # listings whose kernels a pattern names: (key prefix, pattern, bytes read at most)
    listings = (("sass:torch_ext/", SASS_FUNCTION, 256 << 20), ("ptx:cute/", _ENTRY, 64 << 20),
                ("source:tvm/", _TVM_GLOBAL, 64 << 20))
    for key, rel in generated.items():
        listing = next((x for x in listings if key.startswith(x[0])), None)
        if listing is not None:
            try:
                with open(root / rel, "rb") as f:
                    text = f.read(listing[2]).decode("utf-8", "replace")
            except OSError:
                continue
            for name in listing[1].findall(text):
                (names if _PLAIN_NAME.match(name) else odd).add(name)
            continue
        if not key.startswith("json:"):
            continue
        try:
            with open(root / rel, "rb") as f:
                doc = json.loads(f.read(1 << 20))
        except (OSError, ValueError):
            continue
        name = doc.get("name") if isinstance(doc, dict) else None
        if isinstance(name, str) and name:
            (names if _PLAIN_NAME.match(name) else odd).add(name)
    return tuple(sorted(names)), tuple(sorted(odd))


def choose_scope(kernel: str | None, all_kernels: bool, root: Path, generated: dict[str, str]) -> SanitizerScope:
    """The scope of a repro's sanitizer runs: --kernel's, every kernel with --all-kernels,
    else the kernels the repro compiled itself when a JIT cache names them, else every kernel."""
    if kernel:
        return SanitizerScope(ScopeMode.KERNEL, pattern=kernel, why="--kernel")
    if all_kernels:
        return SanitizerScope(ScopeMode.ALL, why="--all-kernels")
    names, odd = jit_kernels(root, generated)
    if odd:
        return SanitizerScope(ScopeMode.ALL, why=f"a kernel the repro compiled has a name no filter takes as it is "
                                                 f"({odd[0]!r}): every kernel is checked")
    if len(names) > MAX_SCOPED_KERNELS:
        return SanitizerScope(ScopeMode.ALL, why=f"the repro compiled {len(names)} kernels: every kernel is checked")
    if names:
        return SanitizerScope(ScopeMode.USER, names, why="named by " + " and ".join(
            w for w, hit in (("Triton's cache", any(k.startswith("json:") for k in generated)),
                             ("CuTe DSL's dump", any(k.startswith("ptx:cute/") for k in generated)),
                             ("TVM's CUDA modules", any(k.startswith("source:tvm/") for k in generated)),
                             ("the torch extensions it built", any(k.startswith("sass:torch_ext/") for k in generated)))
            if hit)
            + " in the bundle")
    return SanitizerScope(ScopeMode.ALL, why="no JIT cache in the bundle names the repro's own kernels: every kernel "
                                             "is checked")
