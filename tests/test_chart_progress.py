"""`wsperf chart` over many launches shows how far it is: a transient progress bar on a
terminal's stderr (never in piped output)."""

from __future__ import annotations

import os
import pty
import subprocess

from support import REPORTS, wsperf, wsperf_exe


def test_chart_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path):
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    p = subprocess.Popen([wsperf_exe(), "chart", str(REPORTS / "gemm_wgmma_tma.ncu-rep"), "--out", str(tmp_path / "a")],
                         stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the pty is closed once the process exits
            break
        if not chunk:
            break
        seen += chunk
    out, _ = p.communicate(timeout=300)
    os.close(master)
    assert p.returncode == 0
    written = out.decode().split()
    assert written and all(os.path.exists(f) for f in written)
    assert b"wrote chart" in seen
    piped = wsperf("chart", REPORTS / "gemm_wgmma_tma.ncu-rep", "--out", tmp_path / "b")
    assert piped.returncode == 0 and "wrote chart" not in piped.stderr
