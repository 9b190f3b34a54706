"""How wsperf fits under an address-space limit (`ulimit -v`, RLIMIT_AS).

Why: DuckDB, pyarrow and their threads reserve far more address space than they touch.
Measured on a 2-core machine (DuckDB 2.0, pyarrow 26): DuckDB ~0.75 GiB once connected,
~1.3 GiB with 16 threads; pyarrow's mimalloc pool ~1 GiB at its first allocation; and
glibc's malloc arenas, 64 MiB for each thread that allocates (`scripts/address-space.py`
measures it: a one-report analyze needed ~1.4 GiB on 2 cores, ~2.6 GiB on 16). Under a
limit too low for that, a one-report `wsperf analyze` failed wherever the address space
ran out: a library that could not be mapped while importing (an ImportError), OpenBLAS
giving up with its own message (exit 1), DuckDB's "Out of Memory Error" read as an
unwritable store, or the dynamic loader aborting the process before Python could say
anything ("cannot allocate memory for thread-local data: ABORT", exit 127; seen at
1.2-1.5 GiB); on the 16-core machine, between 1.2 and 2.3 GiB, segmentation faults and
aborts (a C++ thread that could not start: "Resource temporarily unavailable"). So,
under a limit:

- below `min_address_space()` the console script does not start the command: one `Error:`
  line, exit 2 (cli/entry.py; `--help` and `--version` still run);
- above it wsperf reserves less: pyarrow allocates from the system allocator, OpenBLAS
  and pyarrow start fewer threads, glibc keeps two malloc arenas (`fit_process`), and
  DuckDB runs at most LEAN_THREADS threads with a memory limit of a
  third of the address space (`duckdb_config`), so that a store too big for it ends in
  DuckDB's own out-of-memory error, which the error boundary reports as such.

Without a limit only DuckDB's spill to disk is bounded (MAX_SPILL). Standard library
only: the console script reads it before anything heavy is imported.
"""

from __future__ import annotations

import os
from typing import Any

try:
    import resource
except ImportError:  # Windows: no rlimits
    resource = None  # type: ignore[assignment]

# The floor, in bytes: 2 GiB, more on machines of over 64 cores (DuckDB starts a thread per
# core as it imports, before any setting can apply). With the settings below a one-report
# analyze needed 600 MiB on 2 cores and 800 MiB on 16 (scripts/address-space.py).
MIN_ADDRESS_SPACE = 2 << 30
PER_CORE = 16 << 20
LEAN_THREADS = 4  # DuckDB threads under a limit (each one reserves its own arenas)
ARROW_POOL = "ARROW_DEFAULT_MEMORY_POOL"
# numpy's OpenBLAS starts a thread per core, each with its buffers, when numpy imports
# (pyarrow and pandas import it); wsperf does no linear algebra
OPENBLAS_THREADS = "OPENBLAS_NUM_THREADS"
OMP_THREADS = "OMP_NUM_THREADS"  # pyarrow's thread pool: a thread (and its stack) per core otherwise
# glibc gives each thread that allocates an arena of its own, reserving 64 MiB each, up to
# 8 per core: on a 16-core machine wsperf needed ~2.6 GiB without a cap, ~1.4 GiB with 2
ARENAS, LEAN_ARENAS, _M_ARENA_MAX = "MALLOC_ARENA_MAX", 2, -8
_SET: dict[str, str] = {}  # environment variables fit_process set, and to what


def address_space_limit() -> int | None:
    """The soft RLIMIT_AS of this process in bytes; None when there is none."""
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def too_little_address_space() -> str | None:
    """What to say when the limit is below what wsperf needs to start; else None."""
    limit, floor = address_space_limit(), min_address_space()
    if limit is None or limit >= floor:
        return None
    return (f"out of memory: the address-space limit (`ulimit -v`) is {limit >> 20} MiB, under the "
            f"{floor >> 20} MiB wsperf needs on this machine (DuckDB, pyarrow and their threads reserve that "
            f"much before a report is read); raise it (`ulimit -v {floor >> 10}` or more) or lift it")


def min_address_space() -> int:
    """The least RLIMIT_AS wsperf starts a command under, in bytes (see MIN_ADDRESS_SPACE)."""
    return max(MIN_ADDRESS_SPACE, MIN_ADDRESS_SPACE // 2 + PER_CORE * (os.cpu_count() or 1))


# What DuckDB may spill to disk beside a store (`<store>.tmp/`) or in memory-only work, in
# bytes: DuckDB's own default is 90% of the free disk, which one `wsperf sql` sorting a big
# join could fill. Past it the query ends in DuckDB's out-of-memory error, said as an
# `Error:` line. WSPERF_MAX_SPILL (e.g. `16GiB`) raises it.
MAX_SPILL = "4GiB"


def duckdb_config() -> dict[str, Any]:
    """`duckdb.connect(config=...)` for this process: the spill bound, and under an
    address-space limit fewer threads and a memory limit."""
    spill = {"max_temp_directory_size": os.environ.get("WSPERF_MAX_SPILL") or MAX_SPILL}
    limit = address_space_limit()
    if limit is None:
        return spill
    return {**spill, "threads": max(1, min(os.cpu_count() or 1, LEAN_THREADS)),
            "memory_limit": f"{max(limit // 3, 128 << 20) >> 20}MiB"}


def fit_process() -> None:
    """Under a limit, have pyarrow allocate from the system allocator in this process and
    the readers it starts (ARROW_DEFAULT_MEMORY_POOL: its default pool reserves ~1 GiB
    of address space at its first allocation), OpenBLAS start no threads, pyarrow's
    pool at most LEAN_THREADS and glibc at most LEAN_ARENAS malloc arenas, unless the
    user set these. Called by the console script before anything imports pyarrow;
    `repro_environ` takes them out again for the user's own program."""
    if address_space_limit() is None:
        return
    for name, value in ((ARROW_POOL, "system"), (OPENBLAS_THREADS, "1"), (OMP_THREADS, str(LEAN_THREADS)),
                        (ARENAS, str(LEAN_ARENAS))):
        if name not in os.environ:
            os.environ[name] = _SET[name] = value
    # glibc read MALLOC_ARENA_MAX when this process started: tell it directly
    if os.environ[ARENAS] == str(LEAN_ARENAS):
        _cap_arenas(LEAN_ARENAS)


def _cap_arenas(n: int) -> None:
    """mallopt(M_ARENA_MAX, n) where the C library is glibc; nothing elsewhere."""
    try:
        import ctypes  # here, not above: only a process under a limit pays for it (start-up time)

        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, n)
    except (ImportError, OSError, AttributeError):
        pass


def repro_environ() -> dict[str, str]:
    """os.environ without what `fit_process` put there: the environment a repro runs in
    is the user's."""
    return {k: v for k, v in os.environ.items() if not (k in _SET and _SET[k] == v)}
