"""File names as an attacker writes them, and outputs that name an input.

- nvcc runs its stages through a shell, so a user's file name handed to it runs what the
  name holds: wsperf compiles a private copy under a safe name (collectors/disasm.py
  run_nvcc), in every command that compiles a .cu file (worksheet, inspect, analyze
  --source, collect --source). The sheet and the PTX still name the user's file.
- An output (--html, --out, --perfetto, --charts, --parquet) that is an input, a file of
  an input bundle, the store or another output is refused before any work (one Error line,
  exit 2), and the file named is left as it was."""

from __future__ import annotations

import json
import os
import shutil
import shutil as _sh
from pathlib import Path

import pytest

from support import REPORTS, ROOT, assert_one_error_line, wsperf

SRC = ROOT / "fixtures" / "src"
REPORT = REPORTS / "gemm_ffma.ncu-rep"
TRACES = ROOT / "fixtures" / "timeline"
needs_nvcc = pytest.mark.skipif(_sh.which("nvcc") is None, reason="nvcc is not on PATH")

# Shell syntax of every kind a name can hold: command substitution both ways, a separator,
# a pipe, a background job, a redirection, globbing and quotes.
HOSTILE = ["a$(touch PWNED1)b.cu", "c`touch PWNED2`d.cu", "e;touch PWNED3;f.cu", "g|touch PWNED4|h.cu",
           "i&touch PWNED5&j.cu", "k>PWNED6<l.cu", "m'n\"o *?.cu", "p q\tr.cu"]


def _hostile_copy(d: Path, name: str) -> Path:
    """ws_stream.cu under a hostile name, beside the header it includes."""
    shutil.copy(SRC / "common.cuh", d / "common.cuh")
    p = d / name
    shutil.copy(SRC / "ws_stream.cu", p)
    return p


def _planted(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("PWNED"))


@needs_nvcc
def test_a_hostile_name_reaches_no_shell_and_the_sheet_is_the_plain_names(tmp_path):
    plain = _hostile_copy(tmp_path, "plain.cu")
    p = wsperf("worksheet", plain, "--format", "json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    want = p.stdout
    for name in HOSTILE:
        src = _hostile_copy(tmp_path, name)
        p = wsperf("worksheet", src.name, "--format", "json", cwd=tmp_path)
        assert p.returncode == 0, (name, p.stderr)
        assert _planted(tmp_path) == [], name
        # the same sheet as under a plain name: the user's name is shown, never the private copy's
        shown = json.dumps(src.name)[1:-1]
        assert p.stdout.replace(shown, "plain.cu") == want.replace(str(plain), "plain.cu"), name
        assert "source.cu" not in p.stdout and "wsperf-nvcc-" not in p.stdout


@needs_nvcc
def test_every_command_that_compiles_a_cu_file_compiles_a_private_copy(tmp_path):
    names = HOSTILE[:4]
    for name in names:
        src = _hostile_copy(tmp_path, name)
        for args in (("inspect", src.name), ("analyze", REPORT, "--source", src.name),
                     ("collect", "--source", src.name, "--out", tmp_path / f"bundle-{names.index(name)}", "--",
                      "true")):
            wsperf(*args, cwd=tmp_path)
            assert _planted(tmp_path) == [], (name, args)
    # collect kept the source and its PTX, under the user's name
    kept = sorted(p.name for p in (tmp_path / "bundle-0" / "generated" / "sources").iterdir())
    assert kept == sorted([names[0], Path(names[0]).with_suffix(".ptx").name]), kept


@needs_nvcc
def test_a_failed_compile_names_the_users_file(tmp_path):
    src = tmp_path / "x$(touch PWNED7).cu"
    src.write_text('#include "missing_header.cuh"\n__global__ void k() {}\n')
    p = wsperf("worksheet", src.name, cwd=tmp_path)
    assert_one_error_line(p, 2, src.name, "missing_header.cuh")
    assert "source.cu" not in p.stderr and _planted(tmp_path) == []


@needs_nvcc
def test_a_cu_file_that_reads_stdin_does_not_wait_on_wsperf(tmp_path):
    src = tmp_path / "stdin.cu"
    src.write_text('#include "/dev/stdin"\n__global__ void k() {}\n')
    import subprocess

    from support import ENV, wsperf_exe

    # wsperf's stdin is a pipe nobody writes to: nvcc must get /dev/null, not this
    proc = subprocess.Popen([wsperf_exe(), "worksheet", str(src)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode in (0, 2), err


def test_a_cu_file_including_dev_zero_is_refused_before_any_compile(tmp_path):
    # the preprocessor reads /dev/zero until memory runs out: refused, no nvcc needed
    src = tmp_path / "zero.cu"
    src.write_text('#include "/dev/zero"\n__global__ void k() {}\n')
    p = wsperf("worksheet", src.name, cwd=tmp_path)
    assert_one_error_line(p, 2, "zero.cu", '#include "/dev/zero"', "a device")


def test_a_fifo_included_through_a_header_is_refused(tmp_path):
    # a FIFO two includes down: the compile would wait on it until its 600 s limit
    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "inner.cuh").write_text('#include "pipe.h"\n')
    src = tmp_path / "outer.cu"
    src.write_text('#include <cuda.h>\n#include "inner.cuh"\n__global__ void k() {}\n')
    for args in (("worksheet", src.name), ("inspect", src.name)):
        p = wsperf(*args, cwd=tmp_path)
        assert_one_error_line(p, 2, "outer.cu", '#include "pipe.h"', "from inner.cuh", "a FIFO")


# -- outputs over inputs -------------------------------------------------------------------

@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    r = tmp_path / "r.ncu-rep"
    shutil.copy(REPORT, r)
    r2 = tmp_path / "r2.ncu-rep"
    shutil.copy(REPORT, r2)
    trace = tmp_path / "t.wsperf-trace"
    shutil.copy(sorted(TRACES.glob("*.wsperf-trace"))[0], trace)
    db = tmp_path / "runs.duckdb"
    assert wsperf("analyze", r, "--db", db).returncode == 0
    bundle = ROOT / "fixtures" / "evidence" / "deadlock_ptx"
    b = tmp_path / "bundle"
    shutil.copytree(bundle, b)
    return {"r": r, "r2": r2, "trace": trace, "db": db, "bundle": b, "link": tmp_path / "link.ncu-rep"}


def _cases(f: dict[str, Path]) -> list[tuple[tuple, Path, str]]:
    """(argv, the file that must stay as it was, what the Error line names)."""
    f["link"].symlink_to(f["r"])
    inner = next(p for p in sorted(f["bundle"].rglob("*")) if p.is_file())
    return [
        (("analyze", f["r"], "--db", f["db"], "--html", f["db"]), f["db"], "is the store"),
        (("analyze", f["r"], "--html", f["r"]), f["r"], "is the input"),
        (("analyze", f["r"], "--html", f["link"]), f["r"], "is the input"),
        (("analyze", f["bundle"], "--html", inner), inner, "a file of the input"),
        (("analyze", f["r"], "--charts", f["db"], "--db", f["db"]), f["db"], "is the store"),
        (("chart", f["r"], "--out", f["r"]), f["r"], "is the input"),
        (("compare", f["r"], f["r2"], "--out", f["r"]), f["r"], "is the input"),
        (("compare", f["r"], f["r2"], "--out", f["r2"]), f["r2"], "is the input"),
        (("compare", f["r"], f["r2"], "--html", f["r2"]), f["r2"], "is the input"),
        (("compare", f["r"], f["r2"], "--db", f["db"], "--out", f["db"]), f["db"], "is the store"),
        (("timeline", f["trace"], "--perfetto", f["trace"]), f["trace"], "is the input"),
        (("timeline", f["trace"], "--report", f["r"], "--perfetto", f["r"]), f["r"], "is the input"),
        (("timeline", f["trace"], "--db", f["db"], "--perfetto", f["db"]), f["db"], "is the store"),
        (("export", "--db", f["db"], "--parquet", f["db"]), f["db"], "is the store"),
        (("history", "--db", f["db"], "--charts", f["db"]), f["db"], "is the store"),
    ]


def test_an_output_over_an_input_is_refused_and_the_input_kept(files):
    for argv, kept, needle in _cases(files):
        before = kept.read_bytes()
        p = wsperf(*argv)
        assert_one_error_line(p, 2, needle)
        assert kept.read_bytes() == before, argv


def test_a_new_store_named_as_an_output_is_refused_before_it_exists(files, tmp_path):
    new = tmp_path / "new.duckdb"
    assert_one_error_line(wsperf("analyze", files["r"], "--db", new, "--html", new), 2, "is the store")
    assert not new.exists()


def test_two_outputs_of_one_command_cannot_share_a_path(files, tmp_path):
    out = tmp_path / "x.md"
    assert_one_error_line(wsperf("compare", files["r"], files["r2"], "--out", out, "--html", out), 2,
                          "path of its own")
    assert not out.exists()


def test_outputs_beside_the_inputs_are_still_written(files, tmp_path):
    html = tmp_path / "page.html"
    p = wsperf("analyze", files["r"], "--db", files["db"], "--html", html)
    assert p.returncode == 0, p.stderr
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
