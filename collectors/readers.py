"""The reader processes of a load, from the parent's side: starting them, handing out a
report's launches, collecting their answers (collectors/ncu_reader.py is the other side,
and documents the JSON-lines protocol in `_serve`).

`pool()` is this process's ReaderPool. Readers are kept between loads, so a process's
start, imports and nvdisasm listings are paid once; those started before the command's
imports (collectors/prestart.py) are adopted on the first load. A report larger than
4 MiB is shared by several readers (`Schedule`). A reader that crashes, hangs or grows
too large is stopped; what that means for the load (a ReportError naming the report)
is decided here, and collectors/ncu.py (why readers exist at all) only asks `read`.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from wsperf.collectors import prestart
from wsperf.collectors.errors import ReportError
from wsperf.collectors.staging import ALL, CODE, METRICS, READER_MAX_RSS, same_read

Progress = Callable[[int, int, str], None]
"""progress(done, total, label): `done` of `total` launches of the current report read;
`label` is '<file name>: <kernel>'. Called from the calling thread."""

Staged = Callable[[dict], None]
"""staged(meta): the tables of the metrics parts (staging.METRICS_TABLES) are written, the
code parts not yet; `meta` holds the report facts known so far (launch count, first launch,
start time, longest row). Called from the calling thread, at most once a load."""


class Worker:
    """One reader process (`python -m wsperf.collectors.ncu_reader --serve`), spoken to in
    JSON lines on its stdin and stdout; it exits at the end of its input."""

    def __init__(self, stderr_path: Path, events: queue.Queue, proc: subprocess.Popen | None = None) -> None:
        """A new reader process, or `proc`: one started early (collectors/prestart.py)."""
        self.stderr_path = stderr_path
        self.state = "idle"  # idle | opening | opened | working | finishing | dead
        self.code_warm = False  # has disassembled before: ncu_report's set-up is behind it
        self.listed = False  # started nvdisasm on the report it has open (it is the coder)
        self.borrowed = False  # has been given the coder's nvdisasm listings of this load
        self.retire = False  # grown too large: stop it after this load
        self.proc = proc if proc is not None else prestart.spawn_reader(stderr_path)
        threading.Thread(target=self._pump, args=(events,), daemon=True).start()

    def _pump(self, events: queue.Queue) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            events.put((self, json.loads(line)))
        events.put((self, None))

    def send(self, msg: dict, state: str) -> None:
        self.state = state
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except BrokenPipeError:
            # The reader is gone (killed from outside, or crashed): its end of output comes
            # as an event, and the load says why from its exit status.
            pass

    def stop(self) -> None:
        """Kill the reader, with what it started (nvdisasm), and reap them all
        (prestart.end_reader). Even an idle reader is killed, not let finish its input: it
        holds nothing unsaved, and its interpreter and ncu_report take ~0.1 s to tear down
        (more for a large report)."""
        prestart.end_reader(self.proc)

    def stderr_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]


class Schedule:
    """Hands out a report's work one task at a time, to whichever reader is free, from
    the moment it has the report open.

    A task is a launch's METRICS part, its CODE part (disassembly, source lines, rules)
    or ALL of it. Whole launches go round: a launch is parsed once, in one process
    (ncu_report parses an action anew each time it is asked for it: ~0.8 ms a launch of
    the default set). A reader that cannot read code cheaply reads a launch's metrics
    part and leaves its code part in a queue; once no launch is left, readers serve their
    own queue first (the launch parsed there already, its PCs known), then the longest
    queue of another, so that no reader idles while another has work. Code goes to any
    reader where nvdisasm lists for all of them (collectors/cubin.py: the coder started
    it as it opened the report, into files the others read too) or there is no code to
    disassemble; otherwise ncu_report disassembles, with ~0.75 s of set-up in each
    process, and code goes to the coder and to readers that have disassembled before.
    With fewer launches than readers every launch is split, so that two readers share
    one; a reader alone reads every metrics part first, while nvdisasm lists the code."""

    def __init__(self, launches: int, readers: int, coder: Worker) -> None:
        self.coder = coder
        self.split = launches < readers or readers == 1
        self.launches = collections.deque(range(launches))  # not handed out yet
        self.code: dict[Worker, collections.deque] = {}  # code parts left, by who read the launch's metrics

    def next(self, w: Worker) -> list | None:
        # Until the coder has opened the report, nobody knows whether nvdisasm lists it.
        codes = w is self.coder or self.coder.listed or (w.code_warm and self.coder.state != "opening")
        if self.launches:
            idx = self.launches.popleft()
            if codes and not self.split:
                return [idx, ALL]
            self.code.setdefault(w, collections.deque()).append(idx)
            return [idx, METRICS]
        if not codes:
            return None
        own = self.code.get(w)
        if own:
            return [own.popleft(), CODE]
        longest = max(self.code.values(), key=len, default=None)
        return [longest.pop(), CODE] if longest else None


class ReaderPool:
    """Reader processes, kept between loads. Each pays its start-up (~0.2 s: the interpreter,
    ncu_report, pyarrow) and, where nvdisasm cannot serve, ncu_report's disassembler set-up
    (~0.75 s) once, not once per report; one that crashes, hangs or grows too large is
    stopped and replaced on the next load."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: queue.Queue = queue.Queue()
        self.idle: list[Worker] = []
        self.dir: Path | None = None
        self.spawned = 0
        self.adopted = False  # has taken readers started early (their directory is prestart's)

    def read(self, p: Path, out: Path, n: int, timeout_s: float, progress: Progress | None, *,
             shown: Path | None = None, units: bool = True, staged: Staged | None = None) -> list[dict]:
        """Have `n` readers read report `p` into `out` (the metrics' units too, when
        `units`); their metadata, by reader. Messages name `shown` (the path the user
        gave) when `p` is a decompressed copy. `staged` is called when a reader that
        prefetched the report (collectors/prestart.py) has written its metrics parts,
        before the code parts (what the caller can do meanwhile); other loads write all
        tables at the end and never call it."""
        with self.lock:
            workers = self._take(n)
            try:
                return self._run(workers, p, out, timeout_s, progress, shown or p, units, staged)
            finally:
                # Whoever finished cleanly goes back; the rest are stopped (crashed,
                # hung, or interrupted mid-task and so out of step with us).
                for w in workers:
                    if w.state == "idle" and w.proc.poll() is None and not w.retire:
                        self.idle.append(w)
                    else:
                        w.stop()

    def _take(self, n: int) -> list[Worker]:
        # Readers started before the command's imports (a warm-up may be under way in the
        # first: its answer comes before that of anything sent after it).
        adopted = [Worker(path, self.events, proc) for proc, path in prestart.take()]
        if adopted and not self.adopted:
            self.adopted = True
            atexit.register(self.close)
        self.idle.extend(adopted)
        alive = sorted((w for w in self.idle if w.proc.poll() is None), key=lambda w: not w.code_warm)
        for w in self.idle:
            if w not in alive:
                w.stop()
        self.idle = alive[n:]
        taken = alive[:n]
        if len(taken) < n and self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="wsperf-readers-"))
            atexit.register(self.close)
        while len(taken) < n:
            self.spawned += 1
            taken.append(Worker(self.dir / f"reader-{self.spawned}.stderr", self.events))  # type: ignore[operator]
        return taken

    def _run(self, workers: list[Worker], src: Path, out: Path, timeout_s: float, progress: Progress | None,
             p: Path, units: bool, staged: Staged | None) -> list[dict]:
        opens = []
        for i, w in enumerate(workers):
            w.borrowed = False
            # The reader may not share our working directory for long: an absolute path
            # to open, and the path as given for its messages.
            # The first reader (a warm one, when there is one: `_take`) serves the code.
            opens.append({"open": os.path.abspath(src), "name": str(p), "out": str(out), "reader": i,
                          "readers": len(workers), "coder": i == 0, "units": units})
            w.send(opens[-1], "opening")
        index = {id(w): i for i, w in enumerate(workers)}
        metas: list[dict | None] = [None] * len(workers)
        error: str | None = None
        schedule: Schedule | None = None
        total = done = 0
        deadline = time.monotonic() + timeout_s

        coder = workers[0]  # the first reader (a warm one, when there is one: `_take`) lists the code
        listings: dict = {}  # the coder's nvdisasm output files, for the others to read

        def dispatch(w: Worker) -> None:
            task = schedule.next(w) if schedule is not None and error is None else None
            if error is not None:
                w.send({"abort": True}, "finishing")
            elif task is None:
                w.send({"finish": True}, "finishing")
            elif task[1] != METRICS and listings and not w.borrowed and w is not coder:
                w.borrowed = True
                w.send({"task": task, "listings": listings}, "working")
            else:
                w.send({"task": task}, "working")

        while any(w.state not in ("idle", "dead") for w in workers):
            try:
                w, msg = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ReportError(f"{p}: reading it took longer than {timeout_s:.0f} s and was stopped; the report "
                                  "may be damaged (or very large: raise the time limit)") from None
            i = index.get(id(w))
            if i is None:
                continue  # a reader stopped during an earlier load
            if msg is None:
                w.state = "dead"
                error = error or "a reader died"
            elif "warmed" in msg:  # the early warm-up (prestart) is done; nothing to hand out
                w.code_warm |= bool(msg["warmed"])
            elif "staged" in msg:
                # A prefetch wrote its metrics parts: this load's, when it asks for that very
                # read (else the reader reads anew on our "open", and writes them again).
                if staged is not None and error is None and same_read(msg["staged"]["spec"], opens[i]):
                    staged(msg["staged"]["meta"])
                    staged = None
            elif "opened" in msg:
                w.state = "opened"
                total, w.code_warm = msg["opened"]["launches"], msg["opened"]["warm"]
                w.listed = bool(msg["opened"].get("listed"))
                if w is coder:
                    listings = msg["opened"].get("listings") or {}
                if schedule is None:
                    schedule = Schedule(total, len(workers), coder)
                dispatch(w)  # at once: readers open at their own pace (the coder lists first)
            elif "did" in msg:
                _, part, label = msg["did"]
                w.code_warm |= part != METRICS
                if part != CODE:
                    done += 1
                    if progress is not None:
                        progress(done, total, f"{p.name}: {label}")
                dispatch(w)
            elif "error" in msg:  # the reader dropped the report and is idle again
                w.state = "idle"
                error = error or msg["error"]
            else:
                w.state = "idle"
                metas[i] = msg["done"]
                w.retire = (metas[i] or {}).get("rss", 0) > READER_MAX_RSS

        for w in workers:
            if w.state == "dead":
                rc = w.proc.wait()
                if rc < 0 and -rc not in _CRASHES:
                    # Not a crash: a signal from outside (the system's out-of-memory killer
                    # sends SIGKILL); the report is not to blame.
                    raise ReportError(f"{p}: its reader process was killed ({_signal_name(-rc)}) while reading it, "
                                      "not by wsperf: most often by the system's out-of-memory killer (reading a "
                                      "report takes several times its size in memory; `dmesg` says), else by "
                                      "another process; nothing was stored")
                if rc < 0:
                    raise ReportError(f"{p}: ncu_report crashed ({_signal_name(-rc)}) while reading it: the report "
                                      "is damaged; collect it again, or check it by opening it in Nsight Compute")
                # Not a damaged report (those are answered with an "error"): a bug.
                raise RuntimeError(f"report reader for {p} exited with status {rc}:\n{w.stderr_tail()}")
        if error is not None:
            raise ReportError(error)
        return metas  # type: ignore[return-value]

    def close(self) -> None:
        with self.lock:
            # All are killed before any is waited for: the system frees their memory at once.
            for w in self.idle:
                w.proc.kill()
            for w in self.idle:
                w.stop()
            self.idle = []
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None


_POOLS: dict[int, ReaderPool] = {}


def pool() -> ReaderPool:
    # By process id: a forked copy of this process must not talk to its parent's readers.
    return _POOLS.setdefault(os.getpid(), ReaderPool())


# What a process does to itself when its code fails (a damaged report makes ncu_report
# read out of bounds: SIGSEGV); any other signal came from outside.
_CRASHES = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL, signal.SIGSYS,
            signal.SIGTRAP}


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
