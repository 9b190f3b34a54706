"""Start the report readers of a command before the command's own modules import.

Why: a one-launch `wsperf analyze REPORT` used to run its phases one after the other:
~0.6 s importing its modules (DuckDB, pyarrow, the analyses, Rich), then ~0.2 s for a
reader process to start (the interpreter, pyarrow, ncu_report), then the disassembly and
the reading (~0.5 s on 2 cores). Started here, all of that runs while the command imports.

What runs early is only this: for the first argument that names an existing regular
`.ncu-rep` file starting with the report magic, at most MAX_REPORT_BYTES long, the
readers the load will use start (`reader_count`). A small report, which one reader
reads, is copied here into a private snapshot (as the load would copy it), nvdisasm is
started here on its cubins (unless the disassembly cache has them), and that reader reads
all of it at once ("prefetch": metrics first, while nvdisasm lists the code); the load
then takes the snapshot (`prefetched`) and finds the reading done or under way. A larger
report is copied the same way, and each of its readers opens the snapshot at once
("ahead"), the first listing its code (nvdisasm in the background, the launches parsed);
the load finds them open. Where the copy fails, the first reader is asked to start
disassembling the report's kernels instead (`warm`), and the load reads its own snapshot
(collectors/ncu.py). A reader that the
command never takes is stopped, and the snapshot removed, when the process exits. The
standard library and wsperf's standard-library-only modules only: this runs before the
command's module is imported, on every `wsperf analyze` / `wsperf chart`."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wsperf.collectors import cubin
from wsperf.collectors.errors import WsperfError
from wsperf.collectors.files import find_binary, open_input
from wsperf.collectors.process import _become_subreaper, signals_deferred

# What a report file is, for this module and collectors/ncu.py, which imports them from here
# (ncu.py imports pyarrow, which this module must not).
REPORT_MAGIC = b"NVR\0"  # every .ncu-rep starts with it (see tests/corpus.py, concatenated_report)
MAX_REPORT_BYTES = 8 << 30  # on disk (the 1,000-launch report of the benchmarks is 312 MB)
COMMANDS = frozenset({"analyze", "chart"})
MAX_READERS = 4  # reader processes per report, at most
BYTES_PER_READER = 4 << 20  # one more reader per 4 MiB of report
MAX_EARLY_CUBIN_BYTES = 2 << 20  # a larger module's disassembly waits until the reader knows it is needed
# Words of the per-PC metrics' names (SourceCounters, PC sampling): a report without any
# reads no code PC by PC, and nvdisasm has nothing to do for it.
PC_METRIC_WORDS = (b"thread_inst_executed", b"pcsamp")


@dataclass(frozen=True)
class Snapshot:
    """A private copy of a report, taken before the command imported."""

    given: str  # the report's path as given, made absolute
    path: Path  # the copy
    sha256: str  # of the copy's bytes
    size: int
    out: Path  # where the reader writes the staged tables


_started: list[tuple[subprocess.Popen, Path]] = []
_snapshots: list[Snapshot] = []
_dir: list[Path] = []
_registered: list[bool] = []  # stop() is registered to run at exit
_listers: list[subprocess.Popen] = []  # nvdisasm started here (_listings), stopped by stop() if still running


def start_for(command: str, args: list[str]) -> int:
    """Start readers when `command` loads reports and `args` name a readable .ncu-rep;
    how many were started (0 for any other command line, --help included)."""
    if command not in COMMANDS or _started or os.environ.get("WSPERF_NO_PRESTART"):
        return 0
    if any(a in ("--help", "-h") for a in args):
        return 0
    report = next((a for a in args if a.endswith(".ncu-rep") and _is_report(a)), None)
    if report is None:
        return 0
    try:
        for _ in range(reader_count(os.stat(report).st_size)):
            _started.append(_spawn())
        tasks: list[dict] = [{"warm": os.path.abspath(report)}]
        try:
            spec = _snapshot(report, units=needs_units(command, args), readers=len(_started))
            if len(_started) == 1:  # a small report: its reader reads all of it now
                tasks = [{"prefetch": spec, "listings": _listings(Path(spec["open"]))}]
            else:  # each reader opens it now, and the first lists its code
                tasks = [{"ahead": {**spec, "reader": i, "coder": i == 0}} for i in range(len(_started))]
        except (WsperfError, OSError):  # changed since, or no room: the load copies it itself
            pass
        for (proc, _), task in zip(_started, tasks):
            proc.stdin.write(json.dumps(task).encode() + b"\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
    except OSError:  # cannot start a process or a temporary directory: the load starts its own
        stop()
        return 0
    except BaseException:  # a signal (Terminated) or Ctrl-C: nothing left behind
        stop()
        raise
    return len(_started)


def prefetched(path: str | os.PathLike[str]) -> Snapshot | None:
    """The snapshot taken here of the report at `path`, which the readers started here
    have opened (a small report's one reader is reading it, or has read it, into `out`);
    None for any other path. Given once: the load that takes it owns its files."""
    key = os.path.abspath(path)
    found = next((s for s in _snapshots if s.given == key), None)
    if found is not None:
        _snapshots.remove(found)
    return found


def _listings(snapshot: Path) -> dict[str, tuple[str, list[str]]]:
    """Start nvdisasm now on the launched functions of each cubin of the snapshot
    (collectors/cubin.py), but those in the disassembly cache: {cubin SHA-256: (the file
    its output goes to, the functions it lists)}, for the reader, which would otherwise
    start it only once it has imported and opened the report."""
    tool = find_binary("nvdisasm")
    if tool is None:
        return {}
    started = {}
    try:
        blob = snapshot.read_bytes()
        if not any(k in blob for k in PC_METRIC_WORDS):  # no launch has code to read (--set basic)
            return {}
        modules = cubin.find_cubins(blob)
        launched = named_outside(blob, modules)
    except Exception:  # noqa: BLE001 - only speed is at stake: the reader looks again, and the load reports
        return {}
    for module in modules:
        if len(module.data) > MAX_EARLY_CUBIN_BYTES:
            continue
        out = snapshot.parent / f"{module.sha256}.sass"
        functions = cubin.uncached(module, tool, launched & set(module.code))
        proc = cubin.start_output(module, functions, tool, out)
        if proc is not None:
            _listers.append(proc)
            started[module.sha256] = (str(out), functions)
    return started


def named_outside(blob: bytes, modules: list[cubin.Cubin]) -> set[str]:
    """The functions of `modules` whose mangled names the report's bytes hold outside the
    cubins: a launch record names its kernel; a function only compiled beside it is
    named in its cubin alone. Before ncu_report has read anything, which functions to
    disassemble. A launched function missed here (a report that stores names otherwise)
    is disassembled by the reader once it knows; one named but not launched is listed
    for nothing."""
    spans = [(m.offset, m.offset + len(m.data)) for m in modules]
    found = set()
    for name in {f for m in modules for f in m.code}:
        key, at = name.encode("utf-8", "surrogateescape"), 0
        while (at := blob.find(key, at)) >= 0:
            if not any(lo <= at < hi for lo, hi in spans):
                found.add(name)
                break
            at += 1
    return found


def _snapshot(report: str, *, units: bool, readers: int = 1) -> dict:
    """Copy `report` into this module's directory, as the load does (collectors/ncu.py:
    the readers read a private copy, identified by the SHA-256 of what was copied), and
    the first reader's "open" message for it, of `readers` (with the metrics' units when
    `units`)."""
    d = Path(tempfile.mkdtemp(prefix="snapshot-", dir=_dir[0]))  # one per start (a process may start twice)
    path, staged = d / "report.ncu-rep", d / "staged"
    h = hashlib.sha256()
    size = 0
    with open_input(report, kind="an Nsight Compute report", limit=MAX_REPORT_BYTES, magic=(REPORT_MAGIC,)) as f, \
            open(path, "xb") as out:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            out.write(chunk)
            size += len(chunk)
    staged.mkdir()
    _snapshots.append(Snapshot(os.path.abspath(report), path, h.hexdigest(), size, staged))
    return {"open": str(path), "name": str(Path(report)), "out": str(staged), "reader": 0, "readers": readers,
            "coder": True, "units": units}


def needs_units(command: str, args: list[str]) -> bool:
    """Whether the load of `command args` reads the metrics' units: only into a store that
    outlives the command (`--db`); analyze's and chart's in-memory store never shows them.
    The command decides for itself (cli/analyze.py); where this guessed otherwise, the
    load reads the report again, with or without them."""
    return any(a == "--db" or a.startswith("--db=") for a in args)


def reader_count(size: int) -> int:
    """How many reader processes read a report of `size` bytes: one per 4 MiB, up to one
    per CPU and MAX_READERS. Where nvdisasm lists the code (collectors/cubin.py, in a
    process of its own) a small report needs one; without it, two even for a small
    report: a launch's metrics and its disassembly by ncu_report go in parallel."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    least = 1 if find_binary("nvdisasm") else 2
    return max(1, min(cpus, MAX_READERS, max(least, 1 + size // BYTES_PER_READER)))


def take() -> list[tuple[subprocess.Popen, Path]]:
    """The readers started here, each with its stderr file; the caller owns them now."""
    taken = list(_started)
    _started.clear()
    return taken


def stop() -> None:
    """Stop readers nobody took and the nvdisasm started here, and remove their directory
    once no reader writes there."""
    for proc, _ in take():
        end_reader(proc)
    while _listers:
        proc = _listers.pop()
        if proc.poll() is None:  # done long ago, most often: its output was read
            proc.kill()
        proc.wait()
    if _dir and not _started:
        _snapshots.clear()
        shutil.rmtree(_dir.pop(), ignore_errors=True)


def _is_report(path: str) -> bool:
    try:
        with open_input(path, kind="an Nsight Compute report", limit=MAX_REPORT_BYTES, magic=(REPORT_MAGIC,)):
            return True
    except (WsperfError, OSError, ValueError):
        return False  # the load says why, in its own words


def _spawn() -> tuple[subprocess.Popen, Path]:
    if not _dir:
        # In this order, so that a signal at any point (they arrive between any two lines:
        # SIGTERM in the first second is tested) still has the directory removed at exit.
        if not _registered:
            atexit.register(stop)
            _registered.append(True)
        with signals_deferred():  # its first call writes and removes a probe file
            base = tempfile.gettempdir()
        d = Path(base) / f"wsperf-readers-{os.getpid()}-{os.urandom(6).hex()}"
        _dir.append(d)
        d.mkdir(mode=0o700)
    path = _dir[0] / f"prestarted-{len(_started) + 1}.stderr"
    return spawn_reader(path), path


def spawn_reader(stderr_path: Path) -> subprocess.Popen:
    """A reader process (`python -m wsperf.collectors.ncu_reader --serve`) whose stderr goes
    to `stderr_path`. Its temporary files (nvdisasm's input) go into that file's directory,
    which this process removes as it ends: a reader killed mid-task (the command
    interrupted, a reader that hung) leaves nothing behind in TMPDIR.

    The reader leads a process group of its own, which the nvdisasm it starts join:
    `end_reader` kills them all at once. (A Ctrl-C at a terminal, sent to the command's
    group, so reaches the command alone, which stops its readers.) This process becomes
    the subreaper of its descendants (Linux), so that the nvdisasm of a reader killed
    mid-listing come to it, to be reaped, rather than to init."""
    _become_subreaper()
    with open(stderr_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "wsperf.collectors.ncu_reader", "--serve"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                env={**os.environ, "TMPDIR": str(stderr_path.parent)}, **_OWN_GROUP)


# Where process groups exist (POSIX); elsewhere a reader is killed alone.
_OWN_GROUP: dict = {"process_group": 0} if hasattr(os, "killpg") else {}


def end_reader(proc: subprocess.Popen) -> None:
    """Kill reader `proc` (from spawn_reader) with every process of its group, and reap
    them: when this returns, nothing it started runs or waits to be reaped. A killed
    process is not gone until its parent has waited for it (a reader holding ~1 GB takes
    a while to free it): not waited for, it was still in the command's process group after
    the command had exited."""
    if not _OWN_GROUP:
        proc.kill()
        proc.wait()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group outlives a leader that ended: its nvdisasm
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    while True:  # its children, re-parented here (a subreaper) as it died
        try:
            os.waitpid(-proc.pid, 0)
        except ChildProcessError:
            return
