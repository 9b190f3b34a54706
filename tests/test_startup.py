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


def test_analyze_loads_neither_pyarrow_nor_numpy_in_the_command():
    # The readers hand their tables over as Parquet files that DuckDB reads itself
    # (collectors/staging.py): ~0.2-0.45 s of CPU at every start, on a one-report analyze's
    # path, that the command no longer spends. The JSON is the whole answer, not a part.
    code = ("import io, json, contextlib, sys\n"
            f"sys.argv = ['wsperf', 'analyze', {str(REPORT)!r}, '-f', 'json']\n"
            "from wsperf.cli.main import app\n"
            "buf = io.StringIO()\n"
            "try:\n    with contextlib.redirect_stdout(buf):\n        app()\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "doc = json.loads(buf.getvalue())\n"
            "assert len(doc['kernels'][0]['findings']) >= 5, doc\n")
    loaded = _modules_after(code)
    assert "duckdb" in loaded and "wsperf.analyses.analyze" in loaded
    assert not loaded & {"pyarrow", "pandas", "numpy"}, sorted(loaded & {"pyarrow", "pandas", "numpy"})
