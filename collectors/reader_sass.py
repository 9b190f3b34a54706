"""The SASS a report reader process holds (collectors/ncu_reader.py): nvdisasm's listings of
the launched functions of the reports it reads, started in the background and kept for the
life of the process (collectors/cubin.py runs nvdisasm and parses its output)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from wsperf.collectors import cubin
from wsperf.collectors.files import find_binary

MAX_LISTINGS = 64  # nvdisasm listings a reader keeps (of distinct functions, by their cubin's content)
MAX_LENT = 16  # output files of this process's nvdisasm kept for other readers (one per cubin listed)


class SassListings:
    """The SASS of the reports this process reads, by nvdisasm (collectors/cubin.py): the
    launched functions of each cubin in one background disassembly, kept for the life of
    the process, so the early start (`warm`) serves the load of the same content, and a
    function met again in another report is not disassembled twice."""

    def __init__(self) -> None:
        self.tool = find_binary("nvdisasm")
        self.jobs: dict[tuple[str, str], cubin.Disassembly] = {}  # by (cubin SHA-256, mangled name)
        self.reports: dict[str, dict[str, cubin.Cubin | None]] = {}  # path -> mangled name -> its cubin
        # cubin SHA-256 -> (where another process's nvdisasm writes, the functions it lists)
        self.external: dict[str, tuple[Path, list[str]]] = {}
        self.borrowed: set[str] = set()  # those of `external` another reader lent: its to keep (settle)
        # cubin SHA-256 -> (the file this process's nvdisasm writes, the functions it lists):
        # what the other readers of the same report read instead of running nvdisasm again
        self.lent: dict[str, tuple[Path, list[str]]] = {}

    def start(self, path: str, names: Iterable[str]) -> dict[str, tuple[str, list[str]]] | None:
        """Start on functions `names` of report `path`, one nvdisasm a cubin, writing to a
        file in the temporary directory; None when no disassembly is under way or done for
        them, else what other readers of the report may borrow (`borrow`): {cubin SHA-256:
        (the file, the functions it lists)}."""
        by_cubin: dict[str, tuple[cubin.Cubin, list[str]]] = {}
        for name in names:
            found = self._cubin(path, name)
            if found is not None:
                by_cubin.setdefault(found.sha256, (found, []))[1].append(name)
        for found, functions in by_cubin.values():
            self._lend(found, functions)
            self._jobs(found, functions)
        if not by_cubin:
            return None
        return {sha: (str(out), listed) for sha, (out, listed) in self.lent.items() if sha in by_cubin}

    def borrow(self, listings: Mapping[str, Sequence]) -> None:
        """Read the cubins of `listings` (from another reader's `start`) from its nvdisasm's
        files, as they come, rather than list them again."""
        for sha, (out, listed) in listings.items():
            if sha not in self.lent and sha not in self.external:
                self.external[sha] = (Path(out), list(listed))
                self.borrowed.add(sha)

    def _lend(self, found: cubin.Cubin, functions: list[str]) -> None:
        """Start nvdisasm on those of `functions` that no listing holds yet, into a file
        that the other readers of the report can read too."""
        if self.tool is None or found.sha256 in self.external:
            return
        left = [f for f in cubin.uncached(found, self.tool, functions) if (found.sha256, f) not in self.jobs]
        if not left:
            return
        out = Path(tempfile.mkdtemp(prefix="sass-")) / f"{found.sha256}.sass"
        if cubin.start_output(found, left, self.tool, out) is None:
            out.parent.rmdir()
            return
        self.external[found.sha256] = (out, left)
        earlier = self.lent.pop(found.sha256, None)  # other functions of it, listed for a load before
        if earlier is not None:
            _remove(earlier[0])
        self.lent[found.sha256] = (out, left)
        while len(self.lent) > MAX_LENT:  # the oldest goes (its load is over)
            _remove(self.lent.pop(next(iter(self.lent)))[0])

    def function(self, path: str, name: str) -> dict[int, str] | None:
        """{offset: text} of function `name` of report `path`; None when nvdisasm cannot
        say (no such cubin, ambiguous, no nvdisasm, failed)."""
        found = self._cubin(path, name)
        return self._jobs(found, [name])[name].listing().get(name) if found is not None else None

    def forget(self, path: str) -> None:
        self.reports.pop(path, None)

    def settle(self) -> None:
        """Keep in the disassembly cache what another process's nvdisasm has listed that
        no load here asked for: a function named in the report but whose launch has no
        per-PC metrics (a report mixing section sets). The early start cannot tell; cached,
        it is not listed again by the next command on the same report."""
        for sha, (out, _listed) in list(self.external.items()):
            if sha in self.borrowed:  # its lender keeps it
                del self.external[sha]
                self.borrowed.discard(sha)
            elif out.is_file() and self.tool is not None:
                del self.external[sha]
                cubin.keep_output(sha, self.tool, out)

    def _cubin(self, path: str, name: str) -> cubin.Cubin | None:
        if self.tool is None:
            return None
        if path not in self.reports:
            if len(self.reports) >= 4:  # reports dropped unfinished (an error, an abort)
                self.reports.clear()
            try:
                with open(path, "rb") as f:
                    self.reports[path] = cubin.functions(cubin.find_cubins(f.read()))
            except Exception:  # noqa: BLE001 - unreadable or unforeseen bytes: ncu_report disassembles instead
                self.reports[path] = {}
        return self.reports[path].get(name)

    def _jobs(self, found: cubin.Cubin, names: list[str]) -> dict[str, cubin.Disassembly]:
        """The disassemblies of functions `names` of cubin `found`: another process's
        where it lists them, the one under way, or one started now for those left."""
        if found.sha256 in self.external:  # started before this process opened the report, or by another reader
            out, listed = self.external.pop(found.sha256)
            self.borrowed.discard(found.sha256)
            self._add(found, listed, cubin.Disassembly(found, listed, self.tool, ready=out))  # type: ignore[arg-type]
        left = sorted({n for n in names if (found.sha256, n) not in self.jobs})
        if left:
            self._add(found, left, cubin.Disassembly(found, left, self.tool))  # type: ignore[arg-type]
        return {n: self.jobs[(found.sha256, n)] for n in names}

    def _add(self, found: cubin.Cubin, names: list[str], job: cubin.Disassembly) -> None:
        for name in names:
            self.jobs.setdefault((found.sha256, name), job)
        while len(self.jobs) > MAX_LISTINGS:  # the oldest goes (the disk cache still has it)
            old = self.jobs.pop(next(iter(self.jobs)))
            if old not in self.jobs.values():
                old.stop()


def _remove(out: Path) -> None:
    """Remove a lent listing's file and its directory (what nvdisasm left there too)."""
    for f in out.parent.iterdir() if out.parent.is_dir() else ():
        f.unlink(missing_ok=True)
    try:
        out.parent.rmdir()
    except OSError:
        pass
