"""`wsperf collect`: run a repro under NVIDIA's tools, sanitizer first, into a bundle
(layout: collectors/bundle.py).

Phases, each recorded in the manifest with its argv, exit code, seconds and output:

1. environment: `environment.probe()` into environment.json, and the target check: the
   SASS architectures in the repro's executable (`cuobjdump --list-elf`) against the
   GPU's; a binary that cannot run on this GPU stops here (`TargetError`).
2. run: the repro once, plainly: its own verdict, and the cheapest way to see a hang.
3. sanitizer: each requested tool in a fresh process,
   `compute-sanitizer --tool T SCOPE --show-backtrace no --print-limit 20 --xml --save sanitizer/T.xml -- CMD`,
   parsed into the bundle's DuckDB file. SCOPE (collectors/scope.py, recorded as the
   manifest's `scope`): --kernel's regex; for a repro that compiled its own kernels (Triton's
   cache), those kernels by name; else every kernel. A tool that fails inside itself under a
   kernel filter tries the scope's other forms in turn (`SanitizerScope.fallbacks`: the
   libraries' kernels checked beside the user's, no filter, one launch), each failed run
   recorded as phase `sanitizer-attempt`. Any error ends collection here: a broken kernel gets the
   correctness report, never a profile.
4. profile (sanitizer clean): ncu with the sections the hypotheses read, one report, of
   the same kernels (one launch of each compiled kernel by default).

Hang: when the repro outlives --timeout in the plain run, cuda-gdb attaches to it by pid
(twice: once to learn the grid and which blocks run, once with each resident block and
warp in focus, because `info cuda warps` lists only the SM in focus), the SASS is dumped
for mapping the PCs, and the process group is killed by id. A tool that is missing is
recorded; the phases that do not need it still run, and the caller reports it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from wsperf.collectors import environment, generated, metrics
from wsperf.collectors.bundle import DATABASE, ENVIRONMENT, RunRecord, write_manifest
from wsperf.collectors.disasm import DEFAULT_CU_ARCH
from wsperf.collectors.cudagdb import CudaGdbOutputError, parse_cudagdb
from wsperf.collectors.errors import ExitCode, InputError, WsperfError
from wsperf.collectors.limits import repro_environ
from wsperf.collectors.process import Completed, is_elf, run_bounded, save
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.nsys_capture import (BUNDLE_EXPORT, BUNDLE_REPORT, NSYS_MIN_TIMEOUT_S, NSYS_TIMEOUT_FACTOR,
                                    PROFILE_FLAGS as NSYS_FLAGS, probe_nsys, profile_nsys)
from wsperf.collectors.sanitizer import (TOOLS, Handoff, failed_under, is_error, load_sanitizer_xml, read_sanitizer_xml,
                                         target_failed, tool_failure)
from wsperf.collectors.scope import SanitizerScope, ScopeMode, checked_by, choose_scope, stops
from wsperf.collectors.store import open_store

# What the hypotheses and the launch summary read (queries/*.sql), and no more: launch
# shape (LaunchStats), occupancy limits (Occupancy), per-PC SASS, executed counts and
# PC-sampling stalls (SourceCounters), plus the few figures of other sections the SQL
# names: DRAM throughput and duration-level counters (SpeedOfLight's), SM activity, and
# executed opcodes (InstructionStats'). On the H200 this is 5 replay passes for
# ws_stream healthy against 38 for `--set full` (benchmarks/profile_passes.sh).
NCU_SECTIONS = ("LaunchStats", "Occupancy", "SourceCounters")
# `--timeline`: ncu's own time series of warp states (pmsampling:smsp__warps_issue_stalled_*,
# about 400 samples per metric on the H200 with ncu 2025.3.1), read by the pm_samples view.
PM_SECTION = "PmSampling_WarpStates"
# The metric names come from the per-architecture mapping (collectors/metrics.py): on
# Blackwell (sm_100) also the tcgen05 pipe and tensor memory. NCU_METRICS is Hopper's list,
# the one the H200 fixtures were collected with (fixtures/collect_compare.sh).
NCU_METRICS = metrics.ncu_metrics("sm_90")


def ncu_profile_args(*archs: str) -> list[str]:
    """The ncu options that select what `wsperf collect` profiles on GPUs of `archs`
    (e.g. 'sm_100'; none: Hopper's names)."""
    argv = []
    for s in NCU_SECTIONS:
        argv += ["--section", s]
    return [*argv, "--metrics", ",".join(metrics.ncu_metrics(*archs) if archs else NCU_METRICS)]


# ncu replays each kernel once per pass: the profile gets this many times --timeout.
PROFILE_TIMEOUT_FACTOR = 4
# Without --kernel every kernel the repro launches is profiled, up to this many launches
# (a PyTorch repro's first launches are often RNG fills and copies, not the kernel).
PROFILE_CAP = 50
# A sanitizer run may take this many times the plain run (when longer than --timeout),
# but never more than MAX_SANITIZER_S.
SANITIZER_SLOWDOWN = 40
MAX_SANITIZER_S = 1800.0
# The hang capture: at most this many resident blocks and warps per block in focus.
MAX_BLOCKS = 8
MAX_WARPS = 32
_GDB_PRELUDE = ["-batch", "-nx", "-ex", "set pagination off", "-ex", "set width 0", "-ex", "set confirm off"]
_INSTALL = {
    "compute-sanitizer": "compute-sanitizer not found: install the CUDA toolkit (it ships compute-sanitizer) "
                         "and put its bin/ on PATH",
    "ncu": "ncu not found: install Nsight Compute (CUDA toolkit or the nsight-compute package) and put it on PATH",
    "cuda-gdb": "cuda-gdb not found: install the CUDA toolkit's cuda-gdb to capture where the warps wait",
    "gpu": "no NVIDIA GPU: nvidia-smi lists none; run collect on a machine with a GPU and driver",
}


class TargetError(WsperfError):
    """The repro's binary holds no code this GPU can run."""


class CollectError(WsperfError):
    """collect could not do what was asked (a missing tool, a phase that failed); the
    exit code is the outcome's when the kernel was found broken or hung."""

    def __init__(self, message: str, exit_code: int = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Options:
    out: Path
    timeout: float = 120.0
    tools: tuple[str, ...] = TOOLS
    kernel: str | None = None
    launch_count: int | None = None  # None: 1 with --kernel, one per compiled kernel, else PROFILE_CAP launches
    profile: bool = True
    sources: tuple[str, ...] = ()  # --source files kept in generated/ (.cu, .ptx, .cubin, fatbins)
    accept_race: tuple[str, ...] = ()  # release classes whose racecheck findings do not stop (recorded)
    allow_unverified: bool = False  # profile even when the sanitizer's evidence is incomplete
    nsys: bool = False  # also record the timeline with nsys (5. below the profile; a warning when none works)
    timeline: bool = False  # also profile --section PmSampling_WarpStates (stall reasons over time)
    all_kernels: bool = False  # check and profile every kernel, not only the ones a JIT repro compiled


# The sanitizer's judgement, given by the caller (the layer that judges: collect runs the
# tools, analyses decide what a finding means): (bundle root, the outputs read) ->
# (broken, what was accepted). The default stops on any error of the user's kernels.
Judge = Callable[[Path, list], tuple[bool, list[str]]]
# Where the hung kernel's mbarriers are, given by the layer that reads the generated code:
# (bundle root) -> [(label "kernel:barrier[slot]", shared-window address)].
BarrierSites = Callable[[Path], list[tuple[str, int]]]
# The hang capture reads each barrier's word in at most this many of the resident blocks.
MAX_READ_BLOCKS = 4
MAX_READS = 256
# ... and the registers of each warp's wait (its barrier's address and the parity it asks
# for) in at most this many blocks
MAX_WAIT_BLOCKS = 2


@dataclass(frozen=True)
class Result:
    bundle: Path
    outcome: str  # hang | correctness | clean | unverified (a sanitizer tool missing, failed or cut short)
    problems: tuple[str, ...] = ()  # missing tools and failed phases, for the Error line
    warnings: tuple[str, ...] = ()
    report: Path | None = None


@dataclass
class _State:
    root: Path
    argv: list[str]
    opts: Options
    progress: Callable[[str], None]
    runs: list[RunRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    target: dict = field(default_factory=dict)
    gpu_archs: list[str] = field(default_factory=list)  # environment probe's GPUs: which metric names to request
    plain_seconds: float = 0.0  # how long the plain run took: the sanitizer's limit scales with it
    accepted: list[str] = field(default_factory=list)  # --accept-race classes that applied
    generated: dict[str, str] = field(default_factory=dict)  # kind:name -> bundle-relative file
    scope: SanitizerScope | None = None  # which kernels the sanitizer and ncu look at (after the plain run)
    barrier_sites: BarrierSites | None = None

    def env(self) -> dict[str, str]:
        """The repro's environment: Triton's cache directed into the bundle, so that the
        generated code (.ptx, .cubin, .ttgir, .json per kernel) is kept; the sanitizer and
        ncu runs reuse it instead of compiling again."""
        env = {**repro_environ(), "TRITON_CACHE_DIR": str((self.root / generated.TRITON_CACHE).resolve())}
        if "CUTE_DSL_DUMP_DIR" not in env:  # CuTe DSL keeps what it compiles (the dump must exist)
            dump = self.root / generated.CUTE_DUMP
            dump.mkdir(parents=True, exist_ok=True)
            env.update({"CUTE_DSL_DUMP_DIR": str(dump.resolve()), "CUTE_DSL_KEEP": "ptx,cubin"})
        if not env.get("TORCH_EXTENSIONS_DIR"):  # torch builds the repro's extensions in the bundle
            env["TORCH_EXTENSIONS_DIR"] = str((self.root / generated.TORCH_EXTENSIONS).resolve())
        # TVM's in-memory CUDA modules, kept by wsperf's sitecustomize (collectors/pyhook/)
        tvm = self.root / generated.TVM_DUMP
        tvm.mkdir(parents=True, exist_ok=True)
        env["WSPERF_TVM_DUMP"] = str(tvm.resolve())
        env["PYTHONPATH"] = os.pathsep.join([str(generated.PYHOOK), *filter(None, [env.get("PYTHONPATH")])])
        return env

    def record(self, phase: str, tool: str, done: Completed, name: str, outputs: dict[str, str] | None = None,
               note: str = "", stdout_at: str | None = None) -> RunRecord:
        """Save a finished process's bounded output under `name`.stdout.txt/.stderr.txt
        (stdout: `stdout_at` when the process wrote it there itself)."""
        out, err = stdout_at or f"{name}.stdout.txt", f"{name}.stderr.txt"
        if stdout_at is None:
            save(done.stdout, self.root / out)
        save(done.stderr, self.root / err)
        r = RunRecord(phase, tool, done.argv, done.exit_code, done.seconds, done.timed_out, out, err,
                      done.stdout_bytes, done.stderr_bytes, outputs or {}, note)
        self.runs.append(r)
        self.flush()
        return r

    def flush(self, outcome: str | None = None) -> None:
        write_manifest(self.root, {"argv": self.argv, "created": datetime.now(timezone.utc).isoformat(),
                                   "options": {**dataclasses.asdict(self.opts), "out": str(self.opts.out)},
                                   "target": self.target, "outcome": outcome, "problems": self.problems,
                                   "warnings": self.warnings, "accepted": self.accepted,
                                   **({"scope": self.scope.as_json()} if self.scope else {})}, self.runs)


def collect(argv: list[str], opts: Options, progress: Callable[[str], None] = lambda _: None,
            judge: Judge | None = None, barrier_sites: BarrierSites | None = None) -> Result:
    """Run every phase for the repro `argv` into the bundle `opts.out`. `judge` decides
    whether the sanitizer's findings stop the repro (default: any error of the user's own
    kernels, `collectors/scope.py`)."""
    if not argv:
        raise InputError("no command to run: give it after `--`, e.g. `wsperf collect -- ./repro --size 4096`")
    bad = [t for t in opts.tools if t not in TOOLS]
    if bad:
        raise InputError(f"unknown sanitizer tool(s) {', '.join(bad)}; use some of {','.join(TOOLS)}")
    root = _bundle_dir(opts.out)
    st = _State(root, list(argv), opts, progress)
    st.barrier_sites = barrier_sites

    progress("environment: probing tools and GPUs")
    env = environment.probe()
    (root / ENVIRONMENT).write_text(json.dumps(dataclasses.asdict(env), indent=2) + "\n", encoding="utf-8")
    tools = {t.name: t.path for t in env.tools}
    exe = shutil.which(argv[0]) or argv[0]
    if not env.gpus:
        st.problems.append(_INSTALL["gpu"])
    st.gpu_archs = [g.arch for g in env.gpus]
    _target_check(st, exe, tools.get("cuobjdump"), st.gpu_archs)
    generated.keep_binary_code(st, exe, tools.get("cuobjdump"))
    generated.keep_sources(st, opts.sources, _cu_arch(st.gpu_archs))

    progress(f"run: {' '.join(argv)} (limit {opts.timeout:g} s)")
    hang_files: dict[str, str] = {}
    try:
        done = run_bounded(argv, timeout=opts.timeout, env=st.env(),
                           on_timeout=lambda pid: hang_files.update(_capture_hang(st, pid, tools.get("cuda-gdb"))))
    except OSError as e:
        raise InputError(f"cannot run {argv[0]!r}: {e.strerror or e}") from None
    note = _ended(done) if not done.timed_out else f"still running after {opts.timeout:g} s: killed"
    if not done.timed_out and done.exit_code != 0:
        # Not an error of collect's: the tools still run, and the sanitizer may say why.
        st.warnings.append(f"the repro {note} in its plain run; its output is in run/repro.stdout.txt and "
                           "run/repro.stderr.txt")
    st.record("run", "repro", done, "run/repro", note=note)
    st.plain_seconds = done.seconds
    progress(f"run: {note} ({done.stdout_bytes:,} bytes of stdout)")
    generated.keep_triton_cache(st)
    generated.keep_cute_dump(st)
    generated.keep_tvm_dump(st, _cu_arch(st.gpu_archs))
    generated.keep_torch_extensions(st, generated.torch_extensions_dir(root, st.env()), tools.get("cuobjdump"))
    if done.timed_out:
        # The code the hung warps run: the executable's own cubins, or, for a JIT repro (Python),
        # the cubins its compiler left in the bundle (Triton's cache), never the interpreter's.
        jit = [root / rel for key, rel in sorted(st.generated.items()) if key.startswith("cubin:")]
        listed = [root / rel for key, rel in sorted(st.generated.items()) if key.startswith("sass:torch_ext/")]
        if "capture" in hang_files and listed and not jit:
            progress(f"hang: the SASS of the {len(listed)} torch extension(s) the repro built, to map the waiting PCs")
            _listed_sass(st, listed)
        elif "capture" in hang_files and tools.get("cuobjdump") and (is_elf(exe) and not jit):
            progress("hang: cuobjdump -sass, to map the waiting PCs")
            sass = run_bounded([tools["cuobjdump"], "-sass", exe], timeout=120, stdout_file=root / "hang/sass.txt")
            st.record("hang", "cuobjdump", sass, "hang/cuobjdump", outputs={"sass": "hang/sass.txt"},
                      stdout_at="hang/sass.txt")
        elif "capture" in hang_files and tools.get("cuobjdump") and jit:
            progress(f"hang: cuobjdump -sass of the {len(jit)} cubin(s) the JIT compiled, to map the waiting PCs")
            _jit_sass(st, tools["cuobjdump"], jit)
        elif "capture" in hang_files:
            st.warnings.append(f"{exe} is not an ELF executable with CUDA code and the bundle keeps no JIT cubin "
                               "(or cuobjdump is missing): the waiting PCs are not mapped to SASS")
        st.flush("hang")
        return Result(root, "hang", tuple(st.problems), tuple(st.warnings))

    st.scope = choose_scope(opts.kernel, opts.all_kernels, root, st.generated)
    if st.scope.mode is ScopeMode.USER:
        progress(f"scope: the {len(st.scope.kernels)} kernel(s) the repro compiled ({', '.join(st.scope.kernels)}); "
                 "--all-kernels checks every kernel")
    st.flush()
    con = open_store(root / DATABASE)
    outcome = "unverified"
    if tools.get("compute-sanitizer") is None:
        st.problems.append(_INSTALL["compute-sanitizer"])
    else:
        outcome = _sanitize(st, con, tools["compute-sanitizer"], judge or _default_judge(st.scope.judged))
    if outcome in ("clean", "unverified") and done.exit_code != 0 and st.gpu_archs and \
            tools.get("compute-sanitizer") is not None:  # (without them the environment is the problem)
        # the repro's own check failed (or it crashed): a correctness outcome, not a profile
        st.problems.append(f"the repro's plain run ended with {note}: the kernel is not known to be right")
        outcome = "correctness"
    if outcome == "correctness":
        con.close()
        st.flush(outcome)
        return Result(root, outcome, tuple(st.problems), tuple(st.warnings))

    report = None
    if opts.profile and outcome == "unverified" and not opts.allow_unverified:
        st.warnings.append("correctness is unverified, so the repro was not profiled (--allow-unverified profiles "
                           "it anyway)")
    elif opts.profile:
        if tools.get("ncu") is None:
            st.problems.append(_INSTALL["ncu"])
        else:
            report = _profile(st, tools["ncu"])
            if report is not None:
                progress("profile: loading the report")
                load_reports(con, [report])
    if opts.nsys and (outcome == "clean" or opts.allow_unverified):
        _nsys(st)
    con.close()
    st.flush(outcome)
    return Result(root, outcome, tuple(st.problems), tuple(st.warnings), report)


def _jit_sass(st: "_State", cuobjdump: str, cubins: list[Path]) -> None:
    """hang/sass.txt: `cuobjdump -sass` of each cubin a JIT compiler kept, one after another
    (each lists its own functions), recorded as one run per cubin."""
    out = st.root / "hang" / "sass.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for k, cubin in enumerate(cubins):
        rel = f"hang/sass-{k}.txt"
        done = run_bounded([cuobjdump, "-sass", str(cubin)], timeout=120, stdout_file=st.root / rel)
        st.record("hang", "cuobjdump", done, f"hang/cuobjdump-{k}", outputs={"jit-sass": rel}, stdout_at=rel,
                  note=f"the JIT's cubin {cubin.relative_to(st.root)}")
        if done.exit_code == 0:
            parts.append((st.root / rel).read_text(errors="replace"))
    if parts:
        out.write_text("\n".join(parts))
        st.runs[-1].outputs["sass"] = "hang/sass.txt"
        st.flush()


def _listed_sass(st: "_State", listings: list[Path]) -> None:
    """hang/sass.txt: the SASS listings collect already made (a torch extension's), one after
    another."""
    out = st.root / "hang" / "sass.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(p.read_text(errors="replace") for p in listings))
    st.runs.append(RunRecord("hang", "sass", [], 0, 0.0, outputs={"sass": "hang/sass.txt"},
                             note="the SASS listings of " + ", ".join(str(p.relative_to(st.root)) for p in listings)))
    st.flush()


def _cu_arch(gpu_archs: list[str]) -> str:
    """The arch a --source .cu file is compiled for: the GPU's, arch-specific (sm_90a)."""
    return (gpu_archs[0] + "a") if gpu_archs and gpu_archs[0] in ("sm_90", "sm_100", "sm_103") else DEFAULT_CU_ARCH


def _ended(done: Completed) -> str:
    """How a finished process ended: 'exit N', or 'was killed by SIGSEGV' for a signal."""
    if done.exit_code is not None and done.exit_code < 0:
        try:
            name = signal.Signals(-done.exit_code).name
        except ValueError:
            name = f"signal {-done.exit_code}"
        return f"was killed by {name}"
    return f"exit {done.exit_code}"


def _bundle_dir(out: Path) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out}: exists and is not an empty directory; give a new --out DIR")
    out.mkdir(parents=True, exist_ok=True)
    return out


_ELF_ARCH = re.compile(r"\bsm_(\d+)([af]?)\b")


def _target_check(st: _State, exe: str, cuobjdump: str | None, gpu_archs: list[str]) -> None:
    """SASS in the binary vs the GPU: no runnable code -> TargetError before anything runs."""
    if not is_elf(exe):
        st.target = {"checked": False, "why": f"{exe} is not an ELF executable"}
        return
    if cuobjdump is None:
        st.target = {"checked": False, "why": "no cuobjdump (CUDA toolkit, or pip install nvidia-cuda-cuobjdump)"}
        return
    st.progress("environment: cuobjdump --list-elf / --list-ptx")
    elf = run_bounded([cuobjdump, "--list-elf", exe], timeout=60)
    ptx = run_bounded([cuobjdump, "--list-ptx", exe], timeout=60)
    st.record("target", "cuobjdump", elf, "target/list-elf")
    st.record("target", "cuobjdump", ptx, "target/list-ptx")
    sass = sorted({(int(m.group(1)), m.group(2)) for m in _ELF_ARCH.finditer(elf.stdout.decode(errors="replace"))})
    ptxs = sorted({int(m.group(1)) for m in re.finditer(r"\bsm_(\d+)", ptx.stdout.decode(errors="replace"))})
    st.target = {"checked": bool(gpu_archs), "sass": [f"sm_{a}{s}" for a, s in sass], "ptx": [f"sm_{a}" for a in ptxs],
                 "gpus": gpu_archs}
    if not gpu_archs or not (sass or ptxs):
        return
    for arch in dict.fromkeys(gpu_archs):
        g = int(arch[3:])
        # SASS runs on its own major with an equal or newer minor; 'a' (arch-specific)
        # SASS only on exactly its arch; PTX is JIT-compiled for any newer GPU.
        runs = any((s == "" and a // 10 == g // 10 and a <= g) or a == g for a, s in sass) or any(
            a <= g for a in ptxs)
        if not runs:
            have = ", ".join(st.target["sass"] + [f"PTX {p}" for p in st.target["ptx"]])
            st.flush("target")
            raise TargetError(f"{exe} holds code for {have} only; this GPU is {arch}: rebuild with "
                              f"-gencode arch=compute_{g}a,code={arch}a (or code={arch})")
        if g == 90 and (90, "a") not in sass:
            st.warnings.append(f"{exe} has no sm_90a SASS: wgmma, setmaxnreg and TMA multicast need "
                               "-gencode arch=compute_90a,code=sm_90a; without it the kernel takes slower paths")


def _default_judge(kernel: str | None) -> Judge:
    def judge(root: Path, outputs: list) -> tuple[bool, list[str]]:
        return any(stops(f, kernel) for _, out in outputs for f in out.findings), []
    return judge


def sanitizer_limit(opts: Options, plain_seconds: float) -> float:
    """Seconds one sanitizer run may take: --timeout, or SANITIZER_SLOWDOWN times the plain
    run when that is longer (the tools slow a repro down 10-100x; a Python repro, whose whole
    process is instrumented, the most), at most MAX_SANITIZER_S."""
    return min(max(opts.timeout, SANITIZER_SLOWDOWN * plain_seconds), max(opts.timeout, MAX_SANITIZER_S))


def sanitizer_args(opts: Options, scope: SanitizerScope | None = None) -> list[str]:
    """The compute-sanitizer options that scope a run (`scope`; without one, --kernel's):
    with --kernel, only the matching kernels are checked (`--kernel-name regex=`), at most
    --launch-count launches of them; a JIT repro's own kernels by name, every launch."""
    if scope is None:
        scope = choose_scope(opts.kernel, True, Path("."), {})
    return scope.sanitizer_args(opts.launch_count)


def _sanitizer_run(st: _State, sanitizer: str, tool: str, scope_args: list[str], xml: Path,
                   limit: float) -> tuple[list[str], Completed, str | None]:
    # No host backtraces: wsperf reads a record's kernel, PC and source line, never its host
    # frames, and symbolizing them per record is what made initcheck never finish on a PyTorch
    # repro (torch_ext_mix.py on the H200: with backtraces still running after 200 s, without
    # them 6 s, the same 20 records saved; its user kernel reads what unchecked kernels wrote).
    argv = [sanitizer, "--tool", tool, *scope_args, "--show-backtrace", "no", "--print-limit", "20", "--xml", "--save",
            str(xml.resolve()), "--", *st.argv]
    done = run_bounded(argv, timeout=limit, env=st.env())
    return argv, done, tool_failure(done.stdout[:1 << 20] + b"\n" + done.stderr[:1 << 20])


def _keep_attempt(st: _State, tool: str, done: Completed, xml: Path, name: str, note: str) -> None:
    """Keep a run that does not decide as a `sanitizer-attempt`: its XML as <tool>.<name>.xml,
    its output as sanitizer/<tool>.<name>.*."""
    kept = {}
    if xml.is_file():
        xml.replace(xml.with_name(f"{tool}.{name}.xml"))
        kept = {"xml": f"sanitizer/{tool}.{name}.xml"}
    st.record("sanitizer-attempt", tool, done, f"sanitizer/{tool}.{name}", outputs=kept, note=note)


def _unfiltered(st: _State, sanitizer: str, tool: str, done: Completed, xml: Path, limit: float,
                first: str) -> tuple[list[str], Completed, str | None]:
    """Keep a scoped run as a `sanitizer-attempt` (its XML as <tool>.scoped.xml), say why in
    a warning, and run the tool once more without the kernel filter: that run decides."""
    _keep_attempt(st, tool, done, xml, "scoped", first)
    st.progress(f"sanitizer {tool}: {first}; once more without the filter")
    st.warnings.append(f"compute-sanitizer --tool {tool} {first}: it ran again without the filter, checking every "
                       "kernel, which decides (library kernels' findings are listed, not judged); the first run's "
                       f"output is in sanitizer/{tool}.scoped.stdout.txt")
    return _sanitizer_run(st, sanitizer, tool, [], xml, limit)


def _fallback(st: _State, sanitizer: str, tool: str, done: Completed, xml: Path, limit: float, scope: SanitizerScope,
              failure: str) -> tuple[list[str], Completed, str | None]:
    """A tool failed inside itself under the kernel filter: try the scope's other forms in
    turn (`SanitizerScope.fallbacks`), each failed run kept as a `sanitizer-attempt`. The
    first that works decides, and a warning says what it checked; when none works, the
    last one's failure is returned."""
    why = f"failed inside the tool under the kernel filter ({failure})"
    tried = [why]
    argv: list[str] = []
    kept: list[str] = []
    for k, (label, args) in enumerate(scope.fallbacks(st.opts.launch_count)):
        name = "scoped" if k == 0 else f"attempt-{k}"
        kept.append(f"sanitizer/{tool}.{name}.*")
        _keep_attempt(st, tool, done, xml, name, why)
        st.progress(f"sanitizer {tool}: {why}; once more {label}")
        argv, done, failure = _sanitizer_run(st, sanitizer, tool, args, xml, limit)
        if failure is None and not done.timed_out:
            st.warnings.append(f"compute-sanitizer --tool {tool} {'; then '.join(tried)}: it ran again {label}, "
                               f"checking {checked_by(args)}, which decides (library kernels' findings are listed, "
                               f"not judged); the runs that failed are kept as {' and '.join(kept)}")
            return argv, done, None
        if failure is None:  # killed at the time limit: no form that checks more will finish
            return argv, done, None
        why = f"failed inside the tool {label} ({failure})"
        tried.append(why)
    return argv, done, "; then ".join(tried)


def _filtered_reads(xml: Path) -> int:
    """Uninitialized reads a run reported inside kernels (not host API copies): under a
    kernel filter, reads of memory the unchecked kernels may have written."""
    if not xml.is_file():
        return 0
    try:
        out = read_sanitizer_xml(xml, tool="initcheck")
    except InputError:
        return 0
    return sum(1 for f in out.findings if f.kernel and f.classification is Handoff.UNINITIALIZED and is_error(f))


def _sanitize(st: _State, con, sanitizer: str, judge: Judge) -> str:
    outputs = []
    limit = sanitizer_limit(st.opts, st.plain_seconds)
    failed = False
    wrong: list[str] = []  # tools under which the repro's own check failed
    scope = st.scope or choose_scope(st.opts.kernel, True, st.root, {})
    scoped = scope.sanitizer_args(st.opts.launch_count)
    for i, tool in enumerate(st.opts.tools, 1):
        st.progress(f"sanitizer {tool} ({i}/{len(st.opts.tools)}, limit {limit:g} s)")
        xml = st.root / "sanitizer" / f"{tool}.xml"
        xml.parent.mkdir(exist_ok=True)
        argv, done, failure = _sanitizer_run(st, sanitizer, tool, scoped, xml, limit)
        note = ""
        retried = False
        reads = _filtered_reads(xml) if (tool == "initcheck" and "--kernel-name" in scoped and not failure
                                         and not done.timed_out) else 0
        if reads:
            # Measured on the H200 (compute-sanitizer 2025.3.1, fixtures/src/torch_ext_mix.py):
            # under a kernel filter initcheck does not track what the unchecked kernels write, so
            # the extension's kernel reading a tensor an ATen copy kernel wrote reports every read
            # uninitialized; checking every kernel, none in it (the copy's own reads of cuBLAS's
            # output are listed as library findings).
            first = (f"reported {reads} uninitialized read(s) in the checked kernels under the kernel filter, "
                     "which does not track what the kernels it leaves unchecked write")
            argv, done, failure = _unfiltered(st, sanitizer, tool, done, xml, limit, first)
            retried = True
        if failure and "--kernel-name" in scoped and not retried:
            # Measured on the H200 (compute-sanitizer 2025.3.1): racecheck under a kernel filter
            # fails in a PyTorch program ("failed to handle a hardware exception"), and cuBLAS's
            # unchecked nvjet kernel then faults; the scope's fallbacks say what was tried.
            argv, done, failure = _fallback(st, sanitizer, tool, done, xml, limit, scope, failure)
            if failure:
                note = failure
                st.problems.append(f"compute-sanitizer --tool {tool} {note} (a tool failure, not a finding, under "
                                   f"every form tried); run it by hand on one kernel to see which evidence it can "
                                   f"give: {shlex.join([*argv[:3], *scope.sanitizer_args(1), '--', *st.argv])}; "
                                   f"or collect with --tools "
                                   f"{','.join(t for t in st.opts.tools if t != tool) or 'memcheck'} and "
                                   "--allow-unverified")
                failed = True
        elif failure:
            note = f"failed inside the tool: {failure}"
            st.problems.append(f"compute-sanitizer --tool {tool} {note} (a tool failure, not a finding)")
            failed = True
        if not failure and done.timed_out:  # the first run's, or the fallback's that decides
            # No cuda-gdb capture here: on the H200 (driver 580.159.04) attaching cuda-gdb to a
            # repro running under compute-sanitizer fails ("The CUDA driver hit an internal
            # error while attaching to the application: CUresult=10"). A deadlock shows in the
            # plain run before this phase, where the capture works.
            note = f"did not finish in {limit:g} s under {tool}: killed; raise --timeout or scope it with --kernel"
            st.problems.append(f"compute-sanitizer --tool {tool}: {note}")
            failed = True
        under = not failure and not done.timed_out and target_failed(done.stdout, done.exit_code)
        st.record("sanitizer", tool, done, f"sanitizer/{tool}",
                  outputs={"xml": f"sanitizer/{tool}.xml"} if xml.is_file() else {}, note=note)
        if failed and (failure or done.timed_out):
            continue
        if xml.is_file():
            try:
                outputs.append((f"sanitizer/{tool}.xml",
                                load_sanitizer_xml(con, xml, tool=tool, command=" ".join(argv)).output))
                if under and not any(is_error(f) for f in outputs[-1][1].findings):
                    # the tool found nothing, yet the repro's own check failed under it
                    wrong.append(tool)
                    st.runs[-1] = dataclasses.replace(st.runs[-1], note=f"the repro ended with exit {done.exit_code} "
                                                                        "under the tool")
                    st.flush()
            except InputError as e:
                st.problems.append(f"compute-sanitizer --tool {tool}: {e}")
                failed = True
        else:
            st.problems.append(f"compute-sanitizer --tool {tool} wrote no XML (exit {done.exit_code}); see "
                               f"sanitizer/{tool}.stderr.txt")
            failed = True
    broken, accepted = judge(st.root, outputs)
    if accepted:
        st.accepted = accepted
        st.warnings.append("racecheck findings accepted (--accept-race): " + ", ".join(accepted))
    if wrong and all(r.exit_code == 0 for r in st.runs if r.phase == "run"):
        st.problems.append(failed_under(wrong, [f"sanitizer/{t}.stdout.txt" for t in wrong]))
        return "correctness"
    if broken:
        return "correctness"
    return "unverified" if failed or not outputs else "clean"


def _profile(st: _State, ncu: str) -> Path | None:
    out = st.root / "profile" / "report"
    out.parent.mkdir(exist_ok=True)
    args = ncu_profile_args(*st.gpu_archs) + (["--section", PM_SECTION] if st.opts.timeline else [])
    argv = [ncu, *args]
    scope = st.scope
    user = scope is not None and scope.mode is ScopeMode.USER
    count = st.opts.launch_count or (1 if st.opts.kernel else len(scope.kernels) if user else PROFILE_CAP)
    argv += ["--import-source", "yes", "--clock-control", "none", "-c", str(count)]
    if st.opts.kernel:
        argv += ["-k", f"regex:{st.opts.kernel}"]
    elif user:  # the names are mangled (a C++ extension's `_Z...`; Triton's and CuTe's are plain C names)
        argv += ["--kernel-name-base", "mangled", "-k", f"regex:{scope.judged}"]
    argv += ["-f", "-o", str(out.resolve()), "--", *st.argv]
    limit = st.opts.timeout * PROFILE_TIMEOUT_FACTOR
    st.progress(f"profile: ncu {' '.join(args)} (limit {limit:g} s)")
    done = run_bounded(argv, timeout=limit, env=st.env())
    rep = out.with_suffix(".ncu-rep")
    st.record("profile", "ncu", done, "profile/ncu", outputs={"report": "profile/report.ncu-rep"} if rep.is_file()
              else {}, note="timed out: killed" if done.timed_out else "")
    if done.timed_out:
        st.problems.append(f"ncu did not finish in {limit:g} s; raise --timeout (the profile gets "
                           f"{PROFILE_TIMEOUT_FACTOR}x it)")
    elif not rep.is_file():
        st.problems.append(f"ncu wrote no report (exit {done.exit_code}): no kernel matched --kernel or "
                           "--launch-count, or ncu failed; see profile/ncu.stdout.txt")
    return rep if rep.is_file() else None


def _nsys(st: _State) -> None:
    """The timeline (`--nsys`): nsys is first tried on a tiny run that must yield a report
    (`probe_nsys`), never trusted from its path. No working nsys is a warning and the step
    is skipped: the timeline adds to the verdicts, which do not need it. A working nsys
    that fails on the repro is a problem, as a failed ncu is."""
    st.progress("nsys: trying nsys on a tiny run")
    probe = probe_nsys()
    if not probe.works:
        tried = probe.reason if probe.exe is None else f"{probe.exe}: {probe.reason}"
        st.warnings.append(f"no working nsys ({tried}): the Nsight Systems step was skipped; install Nsight "
                           "Systems (its bin/ on PATH) for the timeline, or collect without --nsys")
        return
    limit = max(st.opts.timeout * NSYS_TIMEOUT_FACTOR, NSYS_MIN_TIMEOUT_S)
    st.progress(f"nsys: {probe.version or probe.exe} profile {' '.join(NSYS_FLAGS)} (limit {limit:g} s)")
    cap = profile_nsys(st.argv, st.root / "nsys", timeout_s=limit, probe=probe, env=st.env())
    st.record("nsys", "nsys", cap.profile, "nsys/profile", outputs={"report": BUNDLE_REPORT} if cap.report else {},
              note="timed out: killed" if cap.profile.timed_out else "")
    if cap.export is not None:
        st.record("nsys", "nsys-export", cap.export, "nsys/export",
                  outputs={"export": BUNDLE_EXPORT} if cap.sqlite else {})
    if cap.problem:
        st.problems.append(f"{cap.problem}; see nsys/profile.stderr.txt")


def _capture_hang(st: _State, pid: int, cudagdb: str | None) -> dict[str, str]:
    """Attach cuda-gdb to the hung `pid` (still alive) and save what it says."""
    if cudagdb is None:
        st.problems.append(_INSTALL["cuda-gdb"])
        return {}
    st.progress(f"hang: the repro outlived {st.opts.timeout:g} s; attaching cuda-gdb to pid {pid}")
    probe_cmds = ["info cuda kernels", "info cuda blocks", "info cuda sms", "info cuda threads"]
    probe = _gdb(st, cudagdb, pid, probe_cmds, "hang/probe")
    try:
        cap = parse_cudagdb(probe.stdout.decode(errors="replace"), source="hang/probe.txt")
    except CudaGdbOutputError as e:
        st.problems.append(f"cuda-gdb could not read the hung kernel: {e}")
        return {"probe": "hang/probe.txt"}
    if not cap.kernels:
        st.problems.append("cuda-gdb attached but saw no running kernel (the hang is on the host?); "
                           "see hang/probe.txt")
        return {"probe": "hang/probe.txt"}
    bx, by, _ = cap.kernels[0].block_dim
    threads = bx * by * cap.kernels[0].block_dim[2]
    blocks = []
    for b in cap.blocks:
        if b.state != "running":
            continue
        for k in range(b.count):  # coalesced ranges run along x, then y, then z
            gx, gy, _ = cap.kernels[0].grid_dim
            lin = b.first[0] + b.first[1] * gx + b.first[2] * gx * gy + k
            blocks.append((lin % gx, (lin // gx) % gy, lin // (gx * gy)))
            if len(blocks) >= MAX_BLOCKS:
                break
    cmds = ["info cuda kernels", "info cuda blocks", "info cuda sms", "info cuda threads",
            "set cuda coalescing off", "info cuda threads"]
    for blk in blocks:
        for w in range(min((threads + 31) // 32, MAX_WARPS)):
            t = w * 32
            cmds.append(f"cuda block ({blk[0]},{blk[1]},{blk[2]}) thread ({t % bx},{(t // bx) % by},{t // (bx * by)})")
            if w == 0:
                cmds.append("info cuda warps")
            cmds += ["info cuda lanes", "x/2i $pc", "info line *$pc", "bt"]
    _gdb(st, cudagdb, pid, cmds, "hang/cudagdb", capture=st.root / "hang/cudagdb.txt")
    _read_barriers(st, cudagdb, pid, blocks, threads, (bx, by))
    return {"capture": "hang/cudagdb.txt"}


def _read_barriers(st: _State, cudagdb: str, pid: int, blocks: list[tuple[int, int, int]], threads: int = 0,
                   dims: tuple[int, int] = (1, 1)) -> None:
    """hang/mbarriers.txt: each mbarrier's 64-bit word in a few of the hung blocks, read
    with cuda-gdb while the process is still attached-to (collectors/mbarrier.py decodes
    them); the addresses come from the generated code (`barrier_sites`). Then, in the same
    session, each warp of the first blocks: the instructions before its PC (the try-wait
    it spins on) and its registers, which hold the barrier's address and the parity the
    wait asks for (`mbarrier.parse_waits`)."""
    try:
        sites = st.barrier_sites(st.root) if st.barrier_sites is not None else []
    except WsperfError as e:
        st.warnings.append(f"the hung kernel's barrier addresses could not be read: {e}")
        sites = []
    if not blocks:
        return
    from wsperf.collectors.mbarrier import read_commands, wait_commands

    cmds: list[str] = []
    for blk in blocks[:MAX_READ_BLOCKS] if sites else []:
        cmds.append(f"cuda block ({blk[0]},{blk[1]},{blk[2]}) thread (0,0,0)")
        for label, addr in sites[:MAX_READS]:
            cmds += read_commands(label, blk, addr)
    bx, by = dims
    for blk in blocks[:MAX_WAIT_BLOCKS]:
        for w in range(min((threads + 31) // 32, MAX_WARPS)):
            t = w * 32
            cmds.append(f"cuda block ({blk[0]},{blk[1]},{blk[2]}) thread ({t % bx},{(t // bx) % by},{t // (bx * by)})")
            cmds += wait_commands(blk, w)
    if not cmds:
        return
    st.progress(f"hang: reading {min(len(sites), MAX_READS)} mbarrier word(s) in "
                f"{min(len(blocks), MAX_READ_BLOCKS) if sites else 0} block(s), and the registers of each warp's "
                f"wait in {min(len(blocks), MAX_WAIT_BLOCKS)}")
    argv = [cudagdb, "-p", str(pid), *_GDB_PRELUDE]
    for c in cmds:
        argv += ["-ex", c]
    done = run_bounded(argv, timeout=max(st.opts.timeout, 120), stdout_file=st.root / "hang/mbarriers.txt")
    st.record("hang", "cuda-gdb", done, "hang/mbarriers", outputs={"mbarriers": "hang/mbarriers.txt"},
              stdout_at="hang/mbarriers.txt", note="the mbarrier words of the hung blocks")


def _gdb(st: _State, cudagdb: str, pid: int, commands: list[str], name: str, capture: Path | None = None) -> Completed:
    argv = [cudagdb, "-p", str(pid), *_GDB_PRELUDE]
    for c in commands:
        # Each command is preceded by an echo of itself: how collectors/cudagdb.py splits
        # the capture (fixtures/collect_correctness.sh does the same).
        argv += ["-ex", f"echo ==== {c}\\n", "-ex", c]
    done = run_bounded(argv, timeout=max(st.opts.timeout, 120), stdout_file=capture)
    rel = "hang/cudagdb.txt" if capture else None
    st.record("hang", "cuda-gdb", done, name, outputs={"capture": rel} if rel else None, stdout_at=rel)
    return done
