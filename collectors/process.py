"""Run an untrusted program (the repro, or a tool running it) without letting it hang,
flood or crash wsperf.

- argument lists only, never a shell string;
- the child leads a new process group (session), and on timeout or interruption that
  group is killed by its id (SIGTERM, then SIGKILL), which takes grandchildren with it
  (compute-sanitizer and ncu run the repro as their child);
- stdout and stderr are drained by threads as they come, so a child never blocks on a
  full pipe, and only the first `HEAD` and last `TAIL` bytes of each are kept (with the
  total count): a repro that prints gigabytes costs a few hundred KiB;
- `on_timeout(pid)` runs while the timed-out child is still alive (the hang capture
  attaches to it), before the group is killed;
- a descendant that left the group (setsid: a daemon) is ended too: on Linux this
  process becomes a child subreaper, so such orphans are re-parented to it instead of
  to init, and whatever child of it appeared during the run is killed and reaped once
  the group is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Callable

HEAD = 64 << 10  # bytes kept from the start of a stream
TAIL = 256 << 10  # bytes kept from its end
_CHUNK = 64 << 10
_GRACE_S = 3.0  # between SIGTERM and SIGKILL of a group


@dataclass(frozen=True)
class Completed:
    argv: list[str]
    exit_code: int | None  # None: killed after the timeout
    seconds: float
    timed_out: bool
    stdout: bytes  # head + marker + tail when the stream was longer than HEAD + TAIL
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int
    pid: int


class _Drain(threading.Thread):
    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream, self.head, self.tail, self.total = stream, bytearray(), bytearray(), 0

    def run(self) -> None:
        while chunk := self.stream.read1(_CHUNK) if hasattr(self.stream, "read1") else self.stream.read(_CHUNK):
            self.total += len(chunk)
            room = HEAD - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > TAIL:
                    del self.tail[:len(self.tail) - TAIL]

    def text(self) -> bytes:
        skipped = self.total - len(self.head) - len(self.tail)
        if skipped <= 0:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n[... {skipped:,} bytes not kept by wsperf ...]\n".encode() + bytes(self.tail)


def kill_group(pgid: int, leader: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group `pgid`, then SIGKILL what is left of it. `leader` is
    reaped as it goes (a zombie leader still counts as a member of its group)."""
    for sig, wait in ((signal.SIGTERM, _GRACE_S), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if leader is not None:
                leader.poll()
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def run_bounded(argv: list[str], *, timeout: float, cwd: str | os.PathLike[str] | None = None,
                env: dict[str, str] | None = None,
                on_timeout: Callable[[int], None] | None = None, stdout_file: Path | None = None) -> Completed:
    """Run `argv` under `timeout` seconds (see the module docstring). `stdout_file`:
    write stdout whole to that file (for NVIDIA's own tools, whose output is the
    product: a SASS dump, a capture), not bounded. Raises OSError when the program
    cannot be started, ValueError for a timeout that is not a positive finite number."""
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive finite number of seconds, not {timeout!r}")
    t0 = time.monotonic()
    reaping = _become_subreaper()
    before = _children() if reaping else set()
    sink = None
    if stdout_file is not None:
        stdout_file.parent.mkdir(parents=True, exist_ok=True)
        sink = open(stdout_file, "wb")
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink or subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=cwd, env=env, start_new_session=True)
    finally:
        if sink is not None:
            sink.close()  # the child holds its own descriptor
    pgid = p.pid  # the new session's leader: its pid is the group id
    drains = [_Drain(p.stdout) if sink is None else _Drain(None), _Drain(p.stderr)]
    for d in drains:
        if d.stream is not None:
            d.start()
    timed_out = False
    try:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            if on_timeout is not None:
                on_timeout(p.pid)
    finally:
        # Whatever happened (timeout, Ctrl-C, a bug in on_timeout), nothing of the group
        # outlives this call; a leader that exited may have left children running.
        kill_group(pgid, p)
        p.wait()
        if reaping:
            _end_strays(before | {p.pid})
        for d in drains:
            if d.stream is not None:
                d.join(timeout=5)
    out, errs = drains
    if stdout_file is not None:
        out.total = stdout_file.stat().st_size
    return Completed(list(argv), None if timed_out else p.returncode, round(time.monotonic() - t0, 3), timed_out,
                     out.text(), errs.text(), out.total, errs.total, p.pid)


_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_subreaper: bool | None = None


def _become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux; once). False where
    that is not possible: then a descendant that left the group can outlive the run."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux") and os.path.isdir("/proc"):
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                pass
    return _subreaper


def _children() -> set[int]:
    """The pids whose parent is this process (Linux /proc)."""
    me, out = os.getpid(), set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.add(int(entry.name))
    return out


def _end_strays(known: set[int]) -> None:
    """Kill and reap every child of this process not in `known`: descendants of the run
    that left its process group and were re-parented here when their parent ended.
    Killing one may orphan its own children to us, so repeat (bounded)."""
    for _ in range(50):
        strays = _children() - known
        if not strays:
            return
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # reaped elsewhere (a Popen of this process)
                known.add(pid)


def save(data: bytes, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


_received: int | None = None  # the signal signals_as_exceptions turned into Terminated


def received_signal() -> int | None:
    """The SIGTERM/SIGHUP/SIGINT that was turned into Terminated, if one was. DuckDB runs
    signal handlers inside a query and reports their exception as its own
    `RuntimeError: Query interrupted`: this says what really happened."""
    return _received


class Terminated(BaseException):
    """SIGTERM, SIGHUP or SIGINT arrived (`timeout`, a CI runner cancelling a job, a closed
    terminal, Ctrl-C). Raised in the main thread like KeyboardInterrupt, so that
    every `finally` runs: temporary copies are removed, a repro's process group is
    killed (`run_bounded`), a store transaction is rolled back. Not an Exception: only the
    CLI's boundary catches it, and turns it into exit 128 + signal (143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """While inside, SIGTERM, SIGHUP and SIGINT (where Python's own handler is set) raise
    Terminated in the main thread, each remembered (`received_signal`). Outside the main thread, or where a handler is
    set already (an embedding program), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        global _received
        _received = signum
        if _deferring or _in_native_init(frame) or _in_swallowing_callback(frame):
            # An exception raised into a native module's initialization (DuckDB's, as
            # Python code it calls runs this handler) ends the process with SIGABRT
            # (seen: 3 times in 30 SIGTERMs 0.05 s into `wsperf analyze`). Deliver the
            # signal again a little later, once the import is through.
            threading.Timer(0.02, os.kill, (os.getpid(), signum)).start()
            return
        raise Terminated(signum)

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            old[sig] = signal.signal(sig, raise_terminated)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # Terminated, not KeyboardInterrupt: Typer and Click catch that one themselves and
        # exit 130 without a word (while a command's module imports, while they parse).
        old[signal.SIGINT] = signal.signal(signal.SIGINT, raise_terminated)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """A signal that `signals_as_exceptions` turns into Terminated, arriving inside this
    block, is delivered again once the block is over (~20 ms later): for a few steps
    that must not stop half-way, such as tempfile's first look for a writable directory
    (it writes and removes a probe file, which a signal between the two leaves behind)."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1


_deferring = 0


def _in_swallowing_callback(frame: FrameType | None) -> bool:
    """Whether `frame` is the import system's module-lock weakref callback, where Python
    prints an exception as "Exception ignored in" with its traceback and goes on (seen once
    in CI: SIGTERM 0.2 s into `wsperf analyze` on a loaded machine)."""
    return frame is not None and frame.f_code.co_name == "cb" and "importlib._bootstrap" in frame.f_code.co_filename


def _in_native_init(frame: FrameType | None) -> bool:
    """Whether `frame` runs inside an extension module's initialization (below the
    import system's ExtensionFileLoader)."""
    while frame is not None:
        if frame.f_code.co_name in ("exec_module", "create_module") \
                and type(frame.f_locals.get("self")).__name__ == "ExtensionFileLoader":
            return True
        frame = frame.f_back
    return False


def is_elf(path: str) -> bool:
    """Whether `path` is an ELF file (an executable or library that may hold CUDA code)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def signal_words(signum: int) -> str:
    """How an Error line names the signal that stopped the command."""
    return "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"terminated by {signal.Signals(signum).name}"
