"""The reader processes of a load (collectors/readers.py, collectors/prestart.py): nothing
they start outlives the command, whether it succeeds, fails on a damaged report or is
stopped by a signal while they read; a report's launches are shared so that no reader
idles while another has work."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from support import ENV, REPORTS, wsperf_exe
from wsperf.collectors.readers import Schedule
from wsperf.collectors.staging import ALL, CODE, METRICS

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

BIG = REPORTS / "multi_launch.ncu-rep"  # 8.6 MB: two readers share it, one lists its code with nvdisasm
SMALL = REPORTS / "gemm_ffma.ncu-rep"  # 3.7 MB: one reader, started and fed before the command imports


def _stat(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None  # gone meanwhile
    # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses
    return [data[:data.rfind(b")")].split(b"(", 1)[1].decode(errors="replace"),
            *data[data.rfind(b")") + 2:].decode().split()]


def _left(session: int, marker: str) -> list[str]:
    """Processes of the command's session (zombies too: a process is not gone until it is
    reaped), or that carry the command's environment marker (a descendant that left the
    session)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        fields = _stat(d)
        try:
            marked = marker.encode() in Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            marked = False
        if fields is not None and (int(fields[4]) == session or marked):
            found.append(f"{d} {fields[0]} (state {fields[1]}, parent {fields[2]})")
    return found


def _start(report: Path, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """`wsperf analyze REPORT` in a session of its own, with an empty disassembly cache (so
    that nvdisasm runs), marked by an environment variable."""
    marker = f"WSPERF_TEST_MARK={uuid.uuid4().hex}"
    key, value = marker.split("=")
    env = {**ENV, key: value, "WSPERF_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([wsperf_exe(), "analyze", str(report), "--format", "json"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    return proc, marker


def _finish(proc: subprocess.Popen, marker: str) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _left(proc.pid, marker) == [], err
    return proc.returncode, err


def _reading(session: int, *, cpu_s: float, timeout_s: float = 60) -> list[str]:
    """Wait until the readers of the command in `session` have used `cpu_s` seconds of
    CPU between them: they are reading. What runs in the session then."""
    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        members = [f for d in os.listdir("/proc") if d.isdigit() and (f := _stat(d)) and int(f[4]) == session]
        readers = [f for f in members if f[0] == "python" or "python" in f[0]]
        if sum(int(f[12]) + int(f[13]) for f in readers) / tick >= cpu_s:
            return [f[0] for f in members]
        time.sleep(0.02)
    raise AssertionError("the readers never started reading")


@needs_proc
def test_nothing_outlives_a_command_that_succeeds(tmp_path):
    proc, marker = _start(BIG, tmp_path)
    code, err = _finish(proc, marker)
    assert code == 0, err


@needs_proc
def test_nothing_outlives_a_command_that_fails_on_a_damaged_report(tmp_path):
    cut = tmp_path / "cut.ncu-rep"
    data = SMALL.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 5])  # its cubins whole, its launch cut
    proc, marker = _start(cut, tmp_path)
    code, err = _finish(proc, marker)
    assert code == 2 and "truncated or damaged" in err, err


@needs_proc
@pytest.mark.parametrize("report", [BIG, SMALL], ids=["shared", "prefetched"])
@pytest.mark.parametrize("sig, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "Ctrl-C"])
def test_nothing_outlives_a_command_stopped_while_its_readers_read(tmp_path, report, sig, to_group):
    # Ctrl-C at a terminal signals the command's whole process group; `kill` the command alone.
    proc, marker = _start(report, tmp_path)
    running = _reading(proc.pid, cpu_s=0.4)
    (os.killpg if to_group else os.kill)(proc.pid, sig)
    code, err = _finish(proc, marker)
    assert code == 128 + sig, (running, err)


# -- how a report's launches are shared (readers.Schedule) ------------------------------


class _Reader:
    """What Schedule looks at of a reader (readers.Worker), without a process behind it."""

    def __init__(self, warm: bool, listed: bool, state: str) -> None:
        self.code_warm, self.listed, self.state = warm, listed, state


def _reader(*, warm: bool = False, listed: bool = False, state: str = "opened") -> _Reader:
    return _Reader(warm, listed, state)


def _drain(schedule: Schedule, readers: list) -> dict[int, list]:
    """Ask the readers in turn, as each finishes a task, until all are told to finish:
    the tasks each got."""
    got: dict[int, list] = {i: [] for i in range(len(readers))}
    live = set(range(len(readers)))
    while live:
        for i in sorted(live):
            task = schedule.next(readers[i])
            if task is None:
                live.discard(i)
            else:
                got[i].append(tuple(task))
    return got


def _parts(got: dict[int, list]) -> list:
    """Every (launch, part) read, a launch read whole counted as its two parts."""
    return sorted((idx, p) for tasks in got.values() for idx, part in tasks
                  for p in ((METRICS, CODE) if part == ALL else (part,)))


def test_listed_code_lets_every_reader_read_whole_launches():
    # The coder lists the code with nvdisasm for everyone: no reader waits on another.
    coder, other = _reader(listed=True), _reader()
    got = _drain(Schedule(460, 2, coder), [coder, other])
    assert len(got[0]) == len(got[1]) == 230
    assert {part for tasks in got.values() for _, part in tasks} == {ALL}
    assert _parts(got) == sorted((i, p) for i in range(460) for p in (METRICS, CODE))


def test_a_reader_that_cannot_read_code_leaves_it_to_those_that_can():
    # No nvdisasm: ncu_report disassembles, so a cold reader reads metrics only; its code
    # parts are served once the launches are out, and nobody stops while some are left.
    coder, cold = _reader(), _reader()
    schedule = Schedule(10, 2, coder)
    got = _drain(schedule, [coder, cold])
    assert {part for _, part in got[1]} == {METRICS}
    assert _parts(got) == sorted((i, p) for i in range(10) for p in (METRICS, CODE))


def test_readers_before_the_coder_read_metrics_and_the_coder_takes_their_code():
    coder = _reader(state="opening")
    early = _reader(warm=True)  # warm from an earlier load: still, nvdisasm may serve
    schedule = Schedule(4, 2, coder)
    first = [schedule.next(early) for _ in range(4)]
    assert [part for _, part in first] == [METRICS] * 4
    assert schedule.next(early) is None  # nothing it may do yet: it finishes
    coder.state, coder.listed = "opened", True
    assert sorted(tuple(schedule.next(coder)) for _ in range(4)) == [(i, CODE) for i in range(4)]
    assert schedule.next(coder) is None


def test_fewer_launches_than_readers_are_shared_part_by_part():
    readers = [_reader(listed=True), _reader(), _reader()]
    schedule = Schedule(1, 3, readers[0])
    assert schedule.next(readers[0]) == [0, METRICS]
    assert schedule.next(readers[1]) == [0, CODE]  # at once, beside the metrics
    assert schedule.next(readers[2]) is None


def test_a_reader_alone_reads_the_metrics_first():
    alone = _reader(listed=True)
    got = _drain(Schedule(3, 1, alone), [alone])
    assert got[0] == [(0, METRICS), (1, METRICS), (2, METRICS), (0, CODE), (1, CODE), (2, CODE)]
