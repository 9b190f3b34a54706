"""A cache of the disassembly of reports already read, keyed by the report's SHA-256.

Why: ncu_report's first `IAction.sass_by_pc` call in a process sets up its disassembler,
0.8-1.0 s on a 2-core machine, more than reading every metric of a one-launch report;
the next ~2,000 PCs cost ~0.2 s more. Analyzing the same report again (the usual loop:
analyze, change a threshold or a --kernel filter, analyze again) then reads its SASS text
from here and never starts the disassembler. Source lines, metrics and rules are still
read from the report itself.

An entry is named by the report's digest and the ncu_report version that disassembled it.
Where: $WSPERF_CACHE_DIR, else $XDG_CACHE_HOME/wsperf/sass, else ~/.cache/wsperf/sass
(WSPERF_CACHE_DIR set to an empty string turns the cache off). Bounded: beyond
MAX_ENTRIES files or MAX_BYTES in all, the least recently used entries are removed.

Safe against a damaged cache: an entry is one JSON file written by rename (never seen
half-written) holding the report's digest and a SHA-256 of its own payload; an entry that
does not parse, names another report or fails its checksum is ignored (the disassembly
comes from ncu_report, and the entry is written again). A PC the entry lacks is
disassembled by ncu_report. Failing to write the cache (read-only home, full disk) only
costs the next run its speed, so it is not an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

FORMAT = 1
MAX_ENTRIES = 64
MAX_BYTES = 256 << 20  # all entries together
MAX_ENTRY_BYTES = 64 << 20  # an entry beyond this is neither written nor read

Disassembly = dict[int, dict[int, str]]
"""launch index in the report -> PC -> SASS text ('' where ncu_report had none)."""


def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is turned off."""
    env = os.environ.get("WSPERF_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "wsperf" / "sass"


def _name(digest: str, reader: str | None) -> str:
    # The disassembly is ncu_report's: another version of it may disassemble otherwise.
    return f"{digest}.{re.sub(r'[^0-9A-Za-z.+-]', '_', reader or 'unknown')}.json"


def entry(digest: str, reader: str | None) -> Path | None:
    """The entry of the report with SHA-256 `digest` as ncu_report version `reader`
    disassembled it, when there is one (it may still be damaged: `read` checks it)."""
    d = cache_dir()
    if d is None:
        return None
    p = d / _name(digest, reader)
    try:
        if not p.is_file() or p.stat().st_size > MAX_ENTRY_BYTES:
            return None
        os.utime(p)  # recently used: evicted last
    except OSError:
        return None
    return p


def read(path: str | os.PathLike[str], digest: str) -> Disassembly | None:
    """The disassembly in the entry at `path` when it is whole and of report `digest`;
    None otherwise."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(MAX_ENTRY_BYTES + 1))
        payload = doc["launches"]
        if doc.get("format") != FORMAT or doc.get("sha256") != digest or doc.get("check") != _check(payload):
            return None
        return {int(idx): {int(pc): str(text) for pc, text in pcs} for idx, pcs in payload.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def write(digest: str, reader: str | None, disassembly: Disassembly) -> None:
    """Store the disassembly of report `digest` by ncu_report version `reader` (by
    rename), then keep the cache bounded."""
    d = cache_dir()
    if d is None:
        return
    payload = {str(idx): sorted(pcs.items()) for idx, pcs in disassembly.items()}
    data = json.dumps({"format": FORMAT, "sha256": digest, "check": _check(payload), "launches": payload}).encode()
    if len(data) > MAX_ENTRY_BYTES:
        return
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".partial-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / _name(digest, reader))
        except BaseException:
            os.unlink(tmp)
            raise
        _evict(d)
    except OSError:
        return  # only a speed-up is lost (see the module docstring)


def _check(payload: object) -> str:
    # JSON lists of [pc, text] pairs come back as lists: the same text as written.
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _evict(d: Path) -> None:
    entries = []
    for p in d.glob("*.json"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, p))
    entries.sort(reverse=True)  # most recently used first
    total = 0
    for k, (_, size, p) in enumerate(entries):
        total += size
        if k >= MAX_ENTRIES or total > MAX_BYTES:
            try:
                p.unlink()
            except OSError:
                pass
