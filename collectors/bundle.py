"""The bundle: one directory holding everything `wsperf collect` ran and saw, so that
`wsperf analyze BUNDLE` can redo the analysis offline and a user can rerun any step by
hand.

Layout (every path in the manifest is relative to the bundle directory):

    bundle.json            the manifest: format, the repro's argv, options, the target
                           check, and one entry per tool run (`RunRecord`: phase, tool,
                           argv, exit code, seconds, timed out, stdout/stderr files and
                           the files it wrote), then the outcome
    environment.json       `environment.probe()` at collection time
    target.txt             `cuobjdump --list-elf` of the repro's executable (when an ELF)
    run/                   the plain run of the repro: stdout.txt, stderr.txt
    sanitizer/<tool>.xml   `compute-sanitizer --tool <tool> --xml --save`; beside it
                           <tool>.stdout.txt and <tool>.stderr.txt
    hang/probe.txt         first cuda-gdb attach (kernels, blocks, SMs, threads)
    hang/cudagdb.txt       second attach: every resident block and warp in focus
    hang/sass.txt          `cuobjdump -sass` of the repro, to map the waiting PCs
    profile/report.ncu-rep the Nsight Compute report; ncu.stdout.txt, ncu.stderr.txt
    nsys/report.nsys-rep   `collect --nsys`: the Nsight Systems report, and beside it
    nsys/report.sqlite     its `nsys export --type sqlite` (profile/export .stdout/.stderr)
    wsperf.duckdb          the sanitizer findings and the report, loaded

stdout/stderr files are bounded: the first and last bytes of a flood are kept and the
manifest records how many bytes the stream had in all.

Paths read from a manifest are untrusted: `resolve` refuses absolute paths and any
path (symbolic links included) that leads out of the bundle.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wsperf.collectors.errors import InputError

MANIFEST = "bundle.json"
FORMAT = 1
ENVIRONMENT = "environment.json"
DATABASE = "wsperf.duckdb"


class BundleError(InputError):
    """A bundle directory is missing its manifest, or the manifest is damaged or unsafe."""


@dataclass(frozen=True)
class RunRecord:
    """One process that collect ran: enough to rerun it by hand and to find its files."""

    phase: str  # run | sanitizer | sanitizer-attempt (a run done again without its kernel filter) | hang | profile | target
    tool: str  # the program or tool name: repro, memcheck, cuda-gdb, ncu, cuobjdump
    argv: list[str]
    exit_code: int | None  # None: killed after the timeout (or never started)
    seconds: float
    timed_out: bool = False
    stdout: str | None = None  # bundle-relative file holding the (bounded) output
    stderr: str | None = None
    stdout_bytes: int = 0  # bytes the stream had in all (the file may hold fewer)
    stderr_bytes: int = 0
    outputs: dict[str, str] = field(default_factory=dict)  # role -> bundle-relative file
    note: str = ""


@dataclass(frozen=True)
class Bundle:
    """A bundle read back from disk."""

    root: Path
    manifest: dict[str, Any]
    runs: tuple[RunRecord, ...]

    def files(self, phase: str, output: str) -> list[tuple[RunRecord, Path]]:
        """Each run of `phase` that wrote an `output` file that exists, with its path."""
        found = []
        for r in self.runs:
            if r.phase == phase and output in r.outputs:
                p = resolve(self.root, r.outputs[output])
                if p.is_file():
                    found.append((r, p))
        return found


def resolve(root: Path, rel: str) -> Path:
    """`rel` inside the bundle `root`; BundleError when it is absolute or escapes."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or rel.startswith("~") or "\0" in rel:
        raise BundleError(f"{root / MANIFEST}: path {rel!r} is not relative to the bundle")
    base = root.resolve()
    try:
        p = (base / rel).resolve()
    except (OSError, RuntimeError) as e:  # a symbolic link loop
        raise BundleError(f"{root / MANIFEST}: path {rel!r} cannot be resolved ({e})") from None
    if p != base and base not in p.parents:
        raise BundleError(f"{root / MANIFEST}: path {rel!r} leads out of the bundle; refusing to read it")
    return p


def is_bundle(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def read_bundle(root: str | os.PathLike[str]) -> Bundle:
    """Read the manifest of the bundle at `root` (see the module docstring)."""
    root = Path(root)
    where = root / MANIFEST
    if not root.is_dir():
        raise BundleError(f"{root}: not a directory; give a bundle written by `wsperf collect --out DIR`")
    try:
        with open(where, "rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
        if len(raw) > MAX_MANIFEST_BYTES:
            raise BundleError(f"{where}: larger than {MAX_MANIFEST_BYTES >> 20} MiB; collect writes a few KiB: "
                              "not a manifest written by `wsperf collect`")
        doc = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{root}: no {MANIFEST}: not a bundle written by `wsperf collect --out DIR`") from None
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: JSON nested too deeply
        raise BundleError(f"{where}: cannot read the manifest ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("runs"), list):
        raise BundleError(f"{where}: not a wsperf bundle manifest of format {FORMAT}")
    if len(doc["runs"]) > MAX_RUNS:
        raise BundleError(f"{where}: {len(doc['runs']):,} runs; collect writes a few dozen at most (each tool, its "
                          f"retry, the profile): more than {MAX_RUNS:,} is not a manifest collect wrote")
    known = set(RunRecord.__dataclass_fields__)
    runs = []
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict):
            raise BundleError(f"{where}: run {i} is {type(r).__name__}, not an object")
        try:
            rec = RunRecord(**{k: v for k, v in r.items() if k in known})
        except TypeError as e:
            raise BundleError(f"{where}: run {i} is incomplete ({e})") from None
        wrong = [name for name, ok in _RUN_TYPES.items() if not ok(getattr(rec, name))]
        if wrong:
            raise BundleError(f"{where}: run {i} has {', '.join(wrong)} of the wrong type; the manifest is damaged "
                              "or not written by `wsperf collect`")
        for rel in [rec.stdout, rec.stderr, *rec.outputs.values()]:
            if rel is not None:
                resolve(root, rel)
        runs.append(rec)
    return Bundle(root, doc, tuple(runs))


MAX_MANIFEST_BYTES = 16 << 20
# A manifest lists each run of a tool: a handful of phases, four sanitizer tools with one
# retry each, the profile. 20,000 runs (under the size cap) took minutes to check, one
# sanitizer XML read per run.
MAX_RUNS = 1000


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# What each RunRecord field may hold when read back (JSON types).
_RUN_TYPES = {
    "phase": lambda v: isinstance(v, str),
    "tool": lambda v: isinstance(v, str),
    "argv": lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
    "exit_code": lambda v: v is None or _is_int(v),
    "seconds": lambda v: (_is_int(v) or isinstance(v, float)),
    "timed_out": lambda v: isinstance(v, bool),
    "stdout": lambda v: v is None or isinstance(v, str),
    "stderr": lambda v: v is None or isinstance(v, str),
    "stdout_bytes": _is_int,
    "stderr_bytes": _is_int,
    "outputs": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "note": lambda v: isinstance(v, str),
}


def write_manifest(root: Path, doc: dict[str, Any], runs: list[RunRecord]) -> None:
    """Write (or rewrite) the manifest atomically: a collect cut short leaves the last
    complete one."""
    body = {**doc, "format": FORMAT, "runs": [asdict(r) for r in runs]}
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, root / MANIFEST)
