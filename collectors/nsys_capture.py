"""A working Nsight Systems: `probe_nsys` tries whether an nsys can record and export a
report (not guessed from its path: the nsys some Nsight Compute installs carry writes only
a .qdstrm), and `profile_nsys` records a repro with it for `wsperf collect --nsys` and
exports the SQLite file that collectors/nsys.py loads."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from wsperf.collectors.errors import InputError
from wsperf.collectors.files import why
from wsperf.collectors.nsys import EXPORT_TIMEOUT_S, SQLITE_MAGIC
from wsperf.collectors.process import run_bounded

# The flags reported to work in containers: no CPU sampling, no context-switch trace (both
# need perf_event access a container rarely grants).
PROFILE_FLAGS = ("--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none")
PROBE_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class NsysProbe:
    """Whether an nsys can record a report and export it: tried, not guessed from its path."""

    exe: str | None  # the nsys tried (None: none on PATH)
    version: str | None  # first line of `nsys --version`
    works: bool
    reason: str  # why not ('' when it works)


def probe_nsys(exe: str | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> NsysProbe:
    """Try `exe` (default: the nsys on PATH) on a tiny run: `nsys profile` of /bin/true
    must write a .nsys-rep, and `nsys export` must turn it into an SQLite export with
    nsys's metadata. An nsys that only writes a .qdstrm (its importer missing, as with the
    nsys binary some Nsight Compute installs carry) does not work."""
    exe = exe or shutil.which("nsys")
    if exe is None:
        return NsysProbe(None, None, False, "no nsys on PATH")
    try:
        ver = run_bounded([exe, "--version"], timeout=60)
    except OSError as e:
        return NsysProbe(exe, None, False, f"{exe} cannot run ({why(e)})")
    version = (ver.stdout.decode("utf-8", "replace").strip().splitlines() or [None])[0]
    with tempfile.TemporaryDirectory(prefix="wsperf-nsys-probe-") as tmp:
        out = Path(tmp) / "probe"
        try:
            prof = run_bounded([exe, "profile", "--trace=none", "--sample=none", "--cpuctxsw=none",
                                "--force-overwrite=true", "-o", str(out), "/bin/true"], timeout=timeout_s, cwd=tmp)
        except OSError as e:
            return NsysProbe(exe, version, False, f"`nsys profile` cannot run ({why(e)})")
        rep = out.with_suffix(".nsys-rep")
        if not rep.is_file():
            said = _said(prof)
            stream = " (it wrote a .qdstrm it could not import into a report)" if list(Path(tmp).glob("*.qdstrm")) else ""
            return NsysProbe(exe, version, False, f"`nsys profile` of a tiny run wrote no .nsys-rep{stream}: "
                                                  f"exit {prof.exit_code}{': ' + said if said else ''}")
        try:
            exp = run_bounded([exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output",
                               str(out.with_suffix(".sqlite")), str(rep)], timeout=timeout_s, cwd=tmp)
        except OSError as e:
            return NsysProbe(exe, version, False, f"`nsys export` cannot run ({why(e)})")
        db = out.with_suffix(".sqlite")
        if not db.is_file():
            return NsysProbe(exe, version, False, f"`nsys export` wrote no SQLite file: exit {exp.exit_code}"
                                                  + (f": {_said(exp)}" if _said(exp) else ""))
        with open(db, "rb") as f:
            if not f.read(16).startswith(SQLITE_MAGIC):
                return NsysProbe(exe, version, False, "`nsys export` wrote a file that is not SQLite")
    return NsysProbe(exe, version, True, "")


def _said(done: Any) -> str:
    text = (done.stderr or b"") + (done.stdout or b"")
    return " ".join(text.decode("utf-8", "replace").split())[-300:]


class NsysUnavailableError(InputError):
    """No working nsys: the step that needs one cannot run."""


# `collect --nsys`: nsys adds little to a run (no kernel replay), but its start and the
# report's import take seconds: the repro gets twice --timeout, at least this long.
NSYS_TIMEOUT_FACTOR = 2
NSYS_MIN_TIMEOUT_S = 120.0
# Where `collect --nsys` keeps the timeline in the bundle (collectors/bundle.py).
BUNDLE_REPORT = "nsys/report.nsys-rep"
BUNDLE_EXPORT = "nsys/report.sqlite"


@dataclass(frozen=True)
class NsysCapture:
    """What `profile_nsys` ran and wrote: both processes (for the bundle's manifest) and
    the files that exist afterwards."""

    profile: Any  # collectors.process.Completed of `nsys profile`
    export: Any | None  # of `nsys export` (None: the profile wrote no report)
    report: Path | None  # the .nsys-rep, when written
    sqlite: Path | None  # the SQLite export, when written and an SQLite file
    problem: str  # why there is no export ('' when there is one)


def profile_nsys(argv: list[str], out_dir: Path, *, timeout_s: float, probe: NsysProbe | None = None,
                 cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> NsysCapture:
    """Record `argv` with the working nsys of `probe` (default: `probe_nsys()`) using
    PROFILE_FLAGS into `out_dir/report.nsys-rep`, and export it to `out_dir/report.sqlite`.
    Raises NsysUnavailableError saying why when no nsys works (nothing is created); a run
    or an export that fails is returned with its `problem`, for the caller to record."""
    probe = probe or probe_nsys()
    if not probe.works or probe.exe is None:
        raise NsysUnavailableError(f"no working nsys ({probe.reason}); install Nsight Systems, or collect without "
                                   "--nsys")
    out_dir.mkdir(parents=True, exist_ok=True)
    rep, db = out_dir / "report.nsys-rep", out_dir / "report.sqlite"
    prof = run_bounded([probe.exe, "profile", *PROFILE_FLAGS, "--force-overwrite=true", "-o",
                        str(rep.with_suffix("").resolve()), *argv], timeout=timeout_s, cwd=cwd,
                       env=dict(env) if env is not None else None)
    if prof.timed_out or not rep.is_file():
        why_not = f"did not finish within {timeout_s:g} s" if prof.timed_out else f"wrote no report (exit {prof.exit_code})"
        return NsysCapture(prof, None, None, None, f"`nsys profile` {why_not}: {_said(prof) or 'no output'}")
    exp = run_bounded([probe.exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output",
                       str(db.resolve()), str(rep.resolve())], timeout=EXPORT_TIMEOUT_S)
    if not db.is_file():
        return NsysCapture(prof, exp, rep, None, f"`nsys export` of {rep.name} wrote no SQLite file "
                                                  f"(exit {exp.exit_code}): {_said(exp) or 'no output'}")
    with open(db, "rb") as f:
        if not f.read(16).startswith(SQLITE_MAGIC):
            return NsysCapture(prof, exp, rep, None, f"`nsys export` of {rep.name} wrote a file that is not SQLite")
    return NsysCapture(prof, exp, rep, db, "")
