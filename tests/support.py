"""Shared by the test modules: where the real fixtures are, and running `wsperf` as a
user does (a real process, so exit codes and stderr are what a user sees)."""

from __future__ import annotations

import json
import os
import re
import signal
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"
ALL_REPORTS = sorted(REPORTS.glob("*.ncu-rep"))
# Reports and exports other people published (GPUs and tool versions the project never
# collected): not part of the repository, provided beside every clone, CI's included, at
# ../shared/public (ncu/, nsys/, each with its origin and licences). WSPERF_PUBLIC_DATA
# names another copy (a machine where the checkout travels alone). Tests reach it through
# the `public_data` fixture (conftest.py), which fails with a clear message when absent.
PUBLIC = Path(os.environ.get("WSPERF_PUBLIC_DATA") or ROOT.parent / "shared" / "public")


def wsperf_exe() -> str:
    """The `wsperf` console script of the Python running the tests (else the one on PATH)."""
    return shutil.which("wsperf", path=str(Path(sys.executable).parent)) or shutil.which("wsperf") or "wsperf"


# pytest's children see COLUMNS=80 / LINES=24; wsperf's piped output honours COLUMNS, so the
# tests run it as a pipe in a CI log would, without them (test_cli checks COLUMNS itself).
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


def wsperf(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess:
    return subprocess.run([wsperf_exe(), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**ENV, **(env or {})})


def kernels(*reports: Path, extra: tuple[str, ...] = ()) -> list[dict]:
    """`wsperf analyze --format json` of the reports: the list of launch objects."""
    p = wsperf("analyze", *reports, "--format", "json", *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["kernels"]


def assert_one_error_line(p: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    """The bad-input contract: exit `code`, one `Error:` line on stderr holding each needle, no traceback."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@contextmanager
def time_limit(seconds: int, message: str):
    """SIGALRM after `seconds`: a hanging input fails its test with `message` instead of
    stalling the run."""
    def expire(signum, frame):
        raise TimeoutError(message)

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def warps_of(spec: str) -> set[int]:
    """The warps a sheet's `warps 0-3, 8` names."""
    out: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def warp_roles(k) -> dict[int, set[str]]:
    """warp -> the role names a worksheet gives it (from items like 'epilogue (warps 4-7): ...')."""
    out: dict[int, set[str]] = {}
    for r in k.roles:
        m = re.match(r"([a-z][a-z+\- ]*?) \(warps? ([\d,\- ]+)\)", r.text)
        if m and m.group(1) != "shared":  # code that roles run in common: no role of its own
            for w in warps_of(m.group(2)):
                out.setdefault(w, set()).add(m.group(1))
    return out


def ptx_sheet(name: str):
    """The worksheet of the one kernel in fixtures/ptx/NAME.ptx."""
    from wsperf.analyses.worksheet import worksheet

    (k,) = worksheet([ROOT / "fixtures" / "ptx" / f"{name}.ptx"]).kernels
    return k


def evidence_flags(k) -> list:
    from wsperf.analyses.correctness import Basis

    return [f for f in k.flags if f.basis is Basis.EVIDENCE]


def assert_planted(name: str, codes: list[int], piece: str) -> None:
    """A planted bug raises exactly its own evidence flag(s), one of which names `piece`."""
    flags = evidence_flags(ptx_sheet(name))
    assert sorted(f.code for f in flags) == codes, (name, flags)
    assert any(piece in f.text for f in flags), [f.text for f in flags]


def case(*args):
    """A parametrized case named by its first value."""
    import pytest

    return pytest.param(*args, id=args[0])


def xfail_case(*args, reason: str):
    """A case that must still fail, and says why (strict: it fails the run once it passes)."""
    import pytest

    return pytest.param(*args, marks=pytest.mark.xfail(strict=True, reason=reason), id=args[0])
