"""Start-up speed, kept honest: the lazy command list says what the commands' docstrings
say, and the command line imports nothing heavy before a command runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support import REPORTS, wsperf
from wsperf.cli import main

REPORT = REPORTS / "ws_stream_healthy.ncu-rep"  # one launch, with SASS and PC samples


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


def test_help_lists_every_command_and_a_command_still_runs():
    h = wsperf("--help")
    assert h.returncode == 0
    for name in main._COMMANDS:
        assert f" {name} " in h.stdout
    assert wsperf("nosuch").returncode == 2
    p = wsperf("sql", "SELECT 41 + 1 AS answer", "--report", REPORTS / "gemm_wgmma_tma_basic.ncu-rep")
    assert p.returncode == 0 and "42" in p.stdout, p.stderr
