"""`wsperf collect -- CMD` on repros that misbehave outside any kernel: crash, fail,
flood their output, leave processes behind, hang. On this machine there is no GPU and
no NVIDIA tool, so collect runs the plain run, records it in the bundle and ends with
one `Error:` line naming what to install (exit 2), or with the deadlock report and
exit 4 for a hang; what the repro printed before its fault is kept in the bundle, and
no process it started survives (checked by pid and by process group).

The repros are small C programs compiled with gcc at test time (Python ones where gcc is
absent). The faults only a GPU can show (an illegal address in a kernel, a hang inside
one) are the `gpu` tests at the end, run by scripts/gpu-tests.sh."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import ENV, ROOT, wsperf_exe
from wsperf.collectors.bundle import read_bundle
from wsperf.collectors.process import HEAD, TAIL

LIMIT_S = 180  # per collect run


def collect(tmp: Path, *argv: str | Path, timeout: str = "10", measure: bool = False):
    """Run `wsperf collect` on `argv`; (process, bundle, peak RSS in KiB of wsperf and
    what it ran, when `measure`)."""
    out = tmp / "bundle"
    cmd = [wsperf_exe(), "collect", "--out", str(out), "--timeout", timeout, "--", *map(str, argv)]
    if measure:  # a fresh parent, so that RUSAGE_CHILDREN covers wsperf and its children only
        cmd = [sys.executable, "-c", "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)",
               *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT_S, errors="replace", env=ENV)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return p, out


def errors(p) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("Error:")]


def plain_run(out: Path):
    (run,) = [r for r in read_bundle(out).runs if r.phase == "run"]
    return run


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is ended: it only waits to be reaped by its parent.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


needs_no_gpu = pytest.mark.skipif(shutil.which("compute-sanitizer") is not None or shutil.which("nvidia-smi") is not None,
                                  reason="the NVIDIA tools are installed here: collect would go on to them")


def c_program(tmp: Path, name: str, source: str) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    src, exe = tmp / f"{name}.c", tmp / name
    src.write_text(source)
    subprocess.run([gcc, "-O0", "-o", str(exe), str(src)], check=True, capture_output=True, timeout=120)
    return exe


@needs_no_gpu
def test_a_segfault_is_recorded_with_its_signal_and_what_came_before(tmp_path):
    exe = c_program(tmp_path, "segv", r"""
#include <stdio.h>
int main(void) {
    printf("before the fault\n"); fflush(stdout);
    fprintf(stderr, "about to crash\n");
    volatile int *p = 0; *p = 1;
    return 0;
}""")
    p, out = collect(tmp_path, exe)
    assert p.returncode == 5 and len(errors(p)) == 1 and "compute-sanitizer" in errors(p)[0]
    warnings = [line for line in p.stderr.splitlines() if line.startswith("Warning:")]
    assert any("killed by SIGSEGV" in w for w in warnings), p.stderr
    run = plain_run(out)
    assert run.exit_code == -11 and not run.timed_out and run.note == "was killed by SIGSEGV"
    assert (out / run.stdout).read_text() == "before the fault\n"
    assert (out / run.stderr).read_text() == "about to crash\n"
    assert read_bundle(out).manifest["outcome"] == "unverified"


@needs_no_gpu
def test_an_abort_and_a_nonzero_exit_are_recorded(tmp_path):
    exe = c_program(tmp_path, "abrt", '#include <stdlib.h>\nint main(void) { abort(); }\n')
    p, out = collect(tmp_path / "a", exe)
    assert p.returncode == 5 and plain_run(out).note == "was killed by SIGABRT"
    exe = c_program(tmp_path, "fail", '#include <stdio.h>\nint main(void) { puts("no device"); return 3; }\n')
    p, out = collect(tmp_path / "f", exe)
    assert p.returncode == 5 and len(errors(p)) == 1
    assert any("exit 3 in its plain run" in line for line in p.stderr.splitlines() if line.startswith("Warning:"))
    run = plain_run(out)
    assert run.exit_code == 3 and (out / run.stdout).read_text() == "no device\n"


@needs_no_gpu
def test_a_flood_of_hundreds_of_megabytes_is_bounded_in_memory_and_on_disk(tmp_path):
    # 384 MiB on stdout and 64 MiB on stderr at once, from C (a Python writer would
    # dominate the time).
    exe = c_program(tmp_path, "flood", r"""
#include <stdio.h>
#include <string.h>
int main(void) {
    static char out[1 << 16], err[1 << 16];
    memset(out, 'o', sizeof out); memset(err, 'e', sizeof err);
    for (int i = 0; i < 6144; i++) {
        fwrite(out, 1, sizeof out, stdout);
        if (i % 6 == 0) fwrite(err, 1, sizeof err, stderr);
    }
    printf("END\n");
    return 0;
}""")
    t0 = time.monotonic()
    p, out = collect(tmp_path, exe, timeout="120", measure=True)
    took = time.monotonic() - t0
    assert p.returncode == 5, p.stderr
    peak_kib = int(p.stderr.strip().splitlines()[-1])
    run = plain_run(out)
    assert run.stdout_bytes == 6144 * 65536 + 4 and run.stderr_bytes == 1024 * 65536
    for rel in (run.stdout, run.stderr):
        kept = (out / rel).read_bytes()
        assert len(kept) < HEAD + TAIL + 200 and b"not kept by wsperf" in kept
    assert (out / run.stdout).read_bytes().endswith(b"END\n")
    # wsperf (DuckDB, pyarrow and the rest loaded) stays far below the 448 MiB it was sent.
    assert peak_kib < 300 * 1024, (peak_kib, took)


@needs_no_gpu
def test_children_that_outlive_the_repro_are_ended(tmp_path):
    """The repro starts a child in its own process group and a daemon that left it
    (double fork + setsid), prints, and exits 0: neither may survive collect."""
    pids = tmp_path / "pids"
    exe = c_program(tmp_path, "leaver", r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    pid_t child = fork();
    if (child == 0) { sleep(300); _exit(0); }
    int fd[2]; pipe(fd);
    if (fork() == 0) {
        setsid();
        pid_t daemon = fork();
        if (daemon == 0) { sleep(300); _exit(0); }
        write(fd[1], &daemon, sizeof daemon);
        _exit(0);
    }
    pid_t daemon; read(fd[0], &daemon, sizeof daemon);
    fprintf(f, "%d %d %d\n", (int)getpid(), (int)child, (int)daemon); fclose(f);
    printf("started %d and %d\n", (int)child, (int)daemon);
    return 0;
}""")
    p, out = collect(tmp_path, exe, pids)
    assert p.returncode == 5 and len(errors(p)) == 1
    leader, child, daemon = map(int, pids.read_text().split())
    time.sleep(0.2)
    assert gone(child) and gone(daemon), (child, daemon)
    assert group_gone(leader) and group_gone(daemon)  # the repro's group, and the one the daemon made
    assert plain_run(out).exit_code == 0 and "started" in (out / plain_run(out).stdout).read_text()


@needs_no_gpu
def test_a_hang_outside_any_kernel_is_killed_with_everything_it_started(tmp_path):
    """A repro that ignores SIGTERM, hangs on the host with a child and a daemon:
    collect waits --timeout, cuda-gdb is missing (said in the Error line), the group is
    killed (SIGKILL after SIGTERM's grace), the daemon too, and the deadlock report
    says why it has no capture; exit 4."""
    pids = tmp_path / "pids"
    exe = c_program(tmp_path, "hang", r"""
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    signal(SIGTERM, SIG_IGN);
    pid_t child = fork();
    if (child == 0) { signal(SIGTERM, SIG_IGN); for (;;) pause(); }
    int fd[2]; pipe(fd);
    if (fork() == 0) {
        setsid();
        pid_t daemon = fork();
        if (daemon == 0) { for (;;) pause(); }
        write(fd[1], &daemon, sizeof daemon);
        _exit(0);
    }
    pid_t daemon; read(fd[0], &daemon, sizeof daemon);
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%d %d %d\n", (int)getpid(), (int)child, (int)daemon); fclose(f);
    printf("waiting for the device\n"); fflush(stdout);
    for (;;) pause();
}""")
    t0 = time.monotonic()
    p, out = collect(tmp_path, exe, pids, timeout="2")
    assert time.monotonic() - t0 < 60
    assert p.returncode == 4, p.stderr
    (line,) = errors(p)
    assert "cuda-gdb" in line and "install" in line
    assert "Deadlock" in p.stdout and "no cuda-gdb capture" in p.stdout
    leader, child, daemon = map(int, pids.read_text().split())
    time.sleep(0.2)
    assert gone(leader) and gone(child) and gone(daemon)
    assert group_gone(leader) and group_gone(daemon)
    run = plain_run(out)
    assert run.timed_out and run.exit_code is None
    assert (out / run.stdout).read_text() == "waiting for the device\n"
    assert read_bundle(out).manifest["outcome"] == "hang"


@needs_no_gpu
def test_a_repro_that_closes_its_output_and_keeps_running_is_a_hang(tmp_path):
    exe = c_program(tmp_path, "quiet", "#include <unistd.h>\nint main(void) { close(1); close(2); sleep(300); }\n")
    p, out = collect(tmp_path, exe, timeout="1")
    assert p.returncode == 4 and plain_run(out).timed_out


@needs_no_gpu
def test_a_repro_that_cannot_run_is_one_error(tmp_path):
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    p, out = collect(tmp_path, script)
    assert p.returncode == 2 and len(errors(p)) == 1 and "cannot run" in errors(p)[0]
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF" + b"\0" * 60)
    garbage.chmod(0o755)
    p, out = collect(tmp_path / "g", garbage)
    assert p.returncode == 2 and len(errors(p)) == 1


# -- on a GPU machine (scripts/gpu-tests.sh) --------------------------------------------------


def _have_gpu() -> bool:
    if not (shutil.which("nvcc") and shutil.which("nvidia-smi") and shutil.which("compute-sanitizer")):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def _nvcc(tmp: Path, src: Path) -> Path:
    exe = tmp / src.stem
    build = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-lineinfo", "-o", str(exe),
                            str(src)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    return exe


ILLEGAL_ADDRESS = r"""
#include <cstdio>
__global__ void wild(float *out) { out[threadIdx.x + (1ull << 40)] = 1.0f; }  // far outside any allocation
int main() {
    float *d; cudaMalloc(&d, 256 * sizeof(float));
    wild<<<1, 32>>>(d);
    cudaError_t e = cudaDeviceSynchronize();
    printf("sync: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
"""


@pytest.mark.gpu
@pytest.mark.skipif(not _have_gpu(), reason="needs an NVIDIA GPU, nvcc and compute-sanitizer")
def test_gpu_an_illegal_address_gets_the_correctness_report(tmp_path):
    src = tmp_path / "wild.cu"
    src.write_text(ILLEGAL_ADDRESS)
    exe = _nvcc(tmp_path, src)
    p, out = collect(tmp_path, exe, timeout="120")
    assert p.returncode == 3, p.stderr
    run = plain_run(out)
    assert run.exit_code == 1 and "illegal" in (out / run.stdout).read_text().lower()
    assert "out-of-bounds-or-misaligned" in p.stdout
    assert not any(r.phase == "profile" for r in read_bundle(out).runs)  # no profile of a broken kernel


@pytest.mark.gpu
@pytest.mark.skipif(not _have_gpu() or not shutil.which("cuda-gdb"), reason="needs a GPU, nvcc and cuda-gdb")
def test_gpu_a_hang_inside_a_kernel_is_captured_and_nothing_survives(tmp_path):
    exe = _nvcc(tmp_path, ROOT / "fixtures" / "src" / "broken" / "ws_deadlock.cu")
    p, out = collect(tmp_path, exe, timeout="20")
    assert p.returncode == 4, p.stderr
    b = read_bundle(out)
    run = plain_run(out)
    assert run.timed_out and b.files("hang", "capture") and b.files("hang", "sass")
    assert "mbarrier-try-wait" in p.stdout
    stray = subprocess.run(["pgrep", "-f", str(exe)], capture_output=True, text=True).stdout.split()
    assert not stray, stray
