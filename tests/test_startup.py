"""Start-up and repeat-analyze speed, kept honest: the lazy command list says what the
commands' docstrings say, the command line imports nothing heavy before a command runs,
the process that loads reports never imports pyarrow, and the disassembly cache
(collectors/sass_cache.py) is used when whole and ignored, then rebuilt, when damaged."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from support import REPORTS, wsperf
from wsperf.cli import main
from wsperf.collectors import sass_cache
from wsperf.collectors.ncu import _reader_version, load_report
from wsperf.collectors.store import open_store

REPORT = REPORTS / "ws_stream_healthy.ncu-rep"  # one launch, with SASS and PC samples
DIGEST = hashlib.sha256(REPORT.read_bytes()).hexdigest()
VERSION = _reader_version()  # the ncu_report version: part of an entry's name
NAME = sass_cache._name(DIGEST, VERSION)


@pytest.mark.parametrize("name", sorted(main._COMMANDS))
def test_the_lazy_command_list_says_each_docstrings_first_sentence(name):
    real = main.command(name)
    assert real.short_help == main._short(real.callback) == main._COMMANDS[name][2]


def _modules_after(code: str) -> set[str]:
    p = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                       capture_output=True, text=True, check=True)
    return set(p.stdout.split())


def test_the_command_line_imports_no_heavy_library_before_a_command_runs():
    loaded = _modules_after("import wsperf.cli.main")
    assert not loaded & {"duckdb", "pyarrow", "pandas", "numpy", "altair", "wsperf.analyses.analyze"}


def test_the_loading_process_never_imports_pyarrow():
    loaded = _modules_after("from wsperf.collectors.store import open_store\n"
                            "from wsperf.collectors.ncu import load_report\n"
                            f"load_report(open_store(None), {str(REPORT)!r})")
    assert "pyarrow" not in loaded and "pandas" not in loaded


def test_help_lists_every_command_and_a_command_still_runs():
    h = wsperf("--help")
    assert h.returncode == 0
    for name in main._COMMANDS:
        assert f" {name} " in h.stdout
    assert wsperf("nosuch").returncode == 2
    p = wsperf("sql", "SELECT 41 + 1 AS answer", "--report", REPORTS / "gemm_wgmma_tma_basic.ncu-rep")
    assert p.returncode == 0 and "42" in p.stdout, p.stderr


def _sass(monkeypatch, cache) -> dict[int, str]:
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(cache))
    con = open_store(None)
    load_report(con, REPORT)
    return dict(con.execute("SELECT pc, sass FROM sass").fetchall())


def test_a_report_read_again_takes_its_disassembly_from_the_cache(tmp_path, monkeypatch):
    first = _sass(monkeypatch, tmp_path)
    entry = tmp_path / NAME
    assert entry.is_file() and sass_cache.read(entry, DIGEST) == {0: {pc: t or "" for pc, t in first.items()}}
    assert _sass(monkeypatch, tmp_path) == first
    # Proof that the second read used the entry: a whole entry with one text changed shows up.
    pc = min(first)
    sass_cache.write(DIGEST, VERSION, {0: {**{k: v or "" for k, v in first.items()}, pc: "MARKED ;"}})
    assert _sass(monkeypatch, tmp_path)[pc] == "MARKED ;"


@pytest.mark.parametrize("damage", ["truncated", "flipped", "other report", "not json", "wrong shape", "empty"])
def test_a_damaged_cache_entry_is_ignored_and_rebuilt(tmp_path, monkeypatch, damage):
    truth = _sass(monkeypatch, tmp_path / "clean")
    entry = tmp_path / NAME
    good = (tmp_path / "clean" / entry.name).read_bytes()
    doc = json.loads(good)
    bad = {
        "truncated": good[: len(good) // 2],
        "flipped": good.replace(b"SYNCS", b"SYNCX", 1),
        "other report": json.dumps({**doc, "sha256": "0" * 64}).encode(),
        "not json": b"\x00\xffNVR",
        "wrong shape": json.dumps({**doc, "launches": [1, 2]}).encode(),
        "empty": b"",
    }[damage]
    assert bad != good
    entry.write_bytes(bad)
    assert _sass(monkeypatch, tmp_path) == truth
    assert sass_cache.read(entry, DIGEST) is not None, "the damaged entry is written again"


def test_the_cache_stays_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sass_cache, "MAX_ENTRIES", 3)
    for k in range(5):
        sass_cache.write(f"{k:064x}", VERSION, {0: {k: "NOP ;"}})
    assert len(list(tmp_path.glob("*.json"))) == 3
    assert sass_cache.read(sass_cache.entry(f"{4:064x}", VERSION), f"{4:064x}") == {0: {4: "NOP ;"}}
    assert sass_cache.entry(f"{4:064x}", "another version") is None


def test_an_empty_cache_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPERF_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    assert sass_cache.cache_dir() is None and sass_cache.entry(DIGEST, VERSION) is None
    sass_cache.write(DIGEST, VERSION, {0: {1: "NOP ;"}})
    assert not list(tmp_path.iterdir())
