"""Opening untrusted input files and writing outputs, safely: the one place wsperf
touches a path it was given.

Reading (`open_input`, `read_input`). Every file wsperf reads comes from a user, a CI
artifact or a bundle, so before a byte is read:
- the path is stat'ed: only a regular file is opened (a FIFO would block the open or
  the read forever, /dev/zero never ends, a directory is not a file); a symlink loop, a
  name over the system's limit or a NUL in the path is one error naming the path;
- its size is checked against the cap of its kind (a 1 TB sparse file is refused
  without reading it);
- it is opened non-blocking and stat'ed again through the descriptor, so a FIFO swapped
  in after the first check cannot block the open, and what is read is that regular file;
- `magic` (the first bytes every file of the kind starts with) is checked before the
  rest is read or hashed;
- reads stop at the cap even when the file grows meanwhile.

Writing (`write_output`). An output (a chart, a page, a Markdown file) is written to a
new temporary file in the target's directory and renamed over the target: a link at the
target is replaced, never followed (a planted `charts/x.png -> ../victim` stays
untouched), and a write that fails (disk full) leaves the previous file or nothing,
never a truncated one. A target that exists and is neither a regular file nor a link (a
FIFO, a device, a directory) is refused.

Writing many files into a directory (`staged_into`: `wsperf export --parquet`). They are
written into a new private directory inside the target directory and renamed into place
name by name only once all were written: what is at a name (a file, a link, a previous
export's directory) is replaced, never followed, and a write that fails or is
interrupted leaves the previous files, never a partial one. The target directory itself
must not be a link.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from wsperf.collectors.errors import InputError, WsperfError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# Compressed files an input may arrive as (a report attached to an issue as .ncu-rep.xz):
# (magic, format, the command that expands it). Where an input accepts one of these (a
# gzipped report or export) its own magic matches first.
COMPRESSED = ((b"\xfd7zXZ\x00", "xz", "xz -d"), (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
              (b"\x1f\x8b", "gzip", "gzip -d"), (b"BZh", "bzip2", "bzip2 -d"))


def why(e: OSError | ValueError) -> str:
    """A short reason for a failed file operation, for an error message."""
    if isinstance(e, ValueError):  # a NUL byte in the path
        return "the path holds a NUL byte"
    if e.errno == errno.ELOOP:
        return "too many levels of symbolic links (a link loop)"
    if e.errno == errno.ENAMETOOLONG:
        return "the file name is too long for the file system"
    return e.strerror or str(e)


def input_stat(path: str | os.PathLike[str], *, kind: str, limit: int,
               error: type[WsperfError] = InputError) -> os.stat_result:
    """stat() of `path` when it is a regular file of at most `limit` bytes; else `error`
    saying why, naming the path and `kind` (e.g. 'an Nsight Compute report')."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such file; check the path") from None
    except (OSError, ValueError) as e:
        raise error(f"{path}: cannot read it ({why(e)}); give {kind}") from None
    _check_kind(path, st, kind, limit, error)
    return st


def _check_kind(path: object, st: os.stat_result, kind: str, limit: int, error: type[WsperfError]) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path}: is a directory, not {kind}")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: is not a regular file (a FIFO, device or socket), not {kind}; give the file itself")
    if st.st_size > limit:
        raise error(f"{path}: is {st.st_size:,} bytes, more than the {limit:,} that {kind} can plausibly be; "
                    "give the file itself")


def open_input(path: str | os.PathLike[str], *, kind: str, limit: int, magic: tuple[bytes, ...] = (),
               error: type[WsperfError] = InputError) -> BinaryIO:
    """`path` opened for reading (binary) when it is a regular file of at most `limit`
    bytes that starts with one of `magic` (when given; an empty file is left to the
    caller to name). The position is at 0. See the module docstring."""
    input_stat(path, kind=kind, limit=limit, error=error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:
        raise error(f"{path}: cannot read it ({why(e)}); check its permissions") from None
    try:
        _check_kind(path, os.fstat(fd), kind, limit, error)  # the file opened is the one checked
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    if magic:
        try:
            head = f.read(max(len(m) for m in (*magic, *(c[0] for c in COMPRESSED))))
        except OSError as e:
            f.close()
            raise error(f"{path}: cannot read it ({why(e)})") from None
        if head and not any(head.startswith(m) for m in magic):
            f.close()
            packed = next((c for c in COMPRESSED if head.startswith(c[0])), None)
            if packed is not None:
                raise error(f"{path}: is {packed[1]}-compressed, not {kind} itself; decompress it first "
                            f"(`{packed[2]} {path}`) and give the file it expands to")
            raise error(f"{path}: is not {kind} (it does not start like one)")
        f.seek(0)
    return f


def read_input(path: str | os.PathLike[str], *, kind: str, limit: int, magic: tuple[bytes, ...] = (),
               error: type[WsperfError] = InputError) -> bytes:
    """The bytes of `path`, read through `open_input`, at most `limit` of them (a file
    that grew past the cap while it was read is refused)."""
    with open_input(path, kind=kind, limit=limit, magic=magic, error=error) as f:
        try:
            # Not f.read(limit + 1): that reserves the whole cap up front (2 GiB for an
            # executable), which alone exceeded an address-space limit wsperf otherwise fits
            # under. Read what the file holds, and at most one byte past the cap.
            data = f.read(os.fstat(f.fileno()).st_size + 1)
            while len(data) <= limit and (more := f.read(min(1 << 20, limit + 1 - len(data)))):
                data += more
        except OSError as e:
            raise error(f"{path}: cannot read it ({why(e)})") from None
    if len(data) > limit:
        raise error(f"{path}: grew past {limit:,} bytes while it was read; give a file that is not being written")
    return data


def read_small(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of a side file wsperf reads for itself (a bundle's environment.json, a
    cache entry), or None when it is not a regular file (a FIFO that would block, a link
    to /dev/zero that never ends), is larger than `limit` (a sparse 3 GB file), or cannot
    be read: such a file is treated as absent, never waited on or read whole."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO swapped in: no wait
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None  # replaced by something else between the stat and the open
            data = f.read(limit + 1)
    except (OSError, ValueError):
        return None
    return data if len(data) <= limit else None


def write_output(path: str | os.PathLike[str], content: bytes | str, *, what: str = "the output",
                 error: type[WsperfError] = InputError) -> Path:
    """Write `content` (str: UTF-8) to `path` through a temporary file in its directory
    renamed into place (see the module docstring). Creates missing parent directories.
    Returns `path`."""
    p = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    check_output(p, what=what, error=error)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name[:100]}.", suffix=".tmp")
    except (OSError, ValueError) as e:
        raise error(f"{p}: cannot write {what} ({why(e)}); give a writable path") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; an output is a normal file
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)  # replaces a link at `p` itself, never its target
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise error(f"{p}: cannot write {what} ({why(e)}); nothing was written there") from None
        raise
    return p


def check_output(path: str | os.PathLike[str], *, what: str = "the output",
                 error: type[WsperfError] = InputError) -> None:
    """Refuse an output path that exists as something other than a regular file or a
    link (a directory, a FIFO, a device): it is checked before any work is done."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as e:
        raise error(f"{path}: cannot write {what} there ({why(e)})") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path}: is a directory; give a file name for {what}")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise error(f"{path}: is not a regular file (a FIFO, device or socket); give a file name for {what}")


def check_output_dir(directory: str | os.PathLike[str], *, what: str = "the output",
                     error: type[WsperfError] = InputError) -> bool:
    """Refuse an output directory that is a link or exists as something else than a
    directory, before any work is done. Returns whether it exists."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as e:
        raise error(f"{directory}: cannot write {what} there ({why(e)})") from None
    if stat.S_ISLNK(st.st_mode):
        raise error(f"{directory}: is a symbolic link; give the directory itself for {what} (wsperf does not "
                    "write through links)")
    if not stat.S_ISDIR(st.st_mode):
        raise error(f"{directory}: exists and is not a directory; give a new or empty directory for {what}")
    return True


# How many entries of an input directory (a bundle) are looked at for an output that is one
# of its files: a bundle holds tens; a hostile tree cannot make the check slow.
_MAX_INPUT_ENTRIES = 10_000


def _identity(path: str | os.PathLike[str]) -> tuple[tuple[int, int] | None, str]:
    """(device, inode) of what `path` names (None when it does not exist or cannot be
    looked at) and its real path: the two ways one file has two names."""
    try:
        st = os.stat(path)
        ident = (st.st_dev, st.st_ino)
    except (OSError, ValueError):
        ident = None
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        real = os.fspath(path)
    return ident, real


def refuse_overwrite(outputs: dict[str, str | os.PathLike[str] | None],
                     inputs: Iterable[str | os.PathLike[str] | None], *, store: str | os.PathLike[str] | None = None,
                     error: type[WsperfError] = InputError) -> None:
    """Refuse, before any work, an output that would be written over what the command
    reads: an output path (`outputs`, by option name) that is the same file (by inode, or
    by real path when it does not exist yet) as an input, a file inside an input
    directory (a bundle), the store, or another output. A directory given as an output is
    refused when it is an input or the store itself."""
    named: dict[tuple[int, int] | str, str] = {}

    def note(path: str | os.PathLike[str], what: str) -> None:
        ident, real = _identity(path)
        named.setdefault(real, what)
        if ident is not None:
            named.setdefault(ident, what)

    for p in inputs:
        if p is None or not os.fspath(p):
            continue
        note(p, f"the input {p}")
        if os.path.isdir(p) and not os.path.islink(p):
            for k, (root, _, files) in enumerate(os.walk(p)):
                if k >= _MAX_INPUT_ENTRIES:
                    break
                for f in files[:_MAX_INPUT_ENTRIES]:
                    note(os.path.join(root, f), f"{os.path.join(root, f)}, a file of the input {p}")
    if store is not None:
        note(store, f"the store {store}")
    for option, out in outputs.items():
        if out is None or not os.fspath(out):
            continue
        ident, real = _identity(out)
        clash = named.get(ident) if ident is not None else None
        clash = clash or named.get(real)
        if clash is not None:
            rule = ("wsperf writes each output to a path of its own" if clash.startswith("also ")
                    else "wsperf never writes an output over what it reads")
            raise error(f"{option} {out}: is {clash}; {rule}: give another path")
        named[real] = f"also the path of {option}"
        if ident is not None:
            named[ident] = f"also the path of {option}"


@contextmanager
def staged_into(directory: str | os.PathLike[str], *, what: str = "the output",
                error: type[WsperfError] = InputError) -> Iterator[Path]:
    """Yield a new empty directory (mode 0700) inside `directory` (created when missing)
    to write into; when the block ends without an exception, each entry written there is
    renamed to the same name in `directory`, replacing what was there (see the module
    docstring). If the block raises (a failed write, a signal that unwinds it), nothing
    in `directory` changes and the staging directory is removed."""
    d = Path(directory)
    existed = check_output_dir(d, what=what, error=error)
    try:
        d.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(dir=d, prefix=".wsperf-staging-"))
    except (OSError, ValueError) as e:
        raise error(f"{d}: cannot write {what} there ({why(e)}); give a writable directory") from None
    done = False
    try:
        yield stage
        old = stage / ".replaced"  # what the renames displace, removed with the staging directory
        old.mkdir()
        for entry in sorted(p for p in stage.iterdir() if p != old):
            _rename_over(entry, d / entry.name, old / entry.name)
        done = True
    except OSError as e:
        raise error(f"{d}: cannot write {what} ({why(e)})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # never follows a link inside it
        if not existed and not done:
            try:
                os.rmdir(d)  # the directory this call made, when nothing else went there meanwhile
            except OSError:
                pass


def _rename_over(new: Path, target: Path, aside: Path) -> None:
    """Rename `new` to `target`, replacing what is there (a file, a link as a link, a
    directory); if that fails, what was there is put back."""
    displaced = os.path.lexists(target)
    if displaced:
        os.rename(target, aside)
    try:
        os.rename(new, target)
    except BaseException:
        if displaced:
            os.rename(aside, target)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def find_binary(name: str) -> str | None:
    """A CUDA tool (cuobjdump, nvdisasm): the toolkit's on PATH, else the one of the
    nvidia-cuda-* wheel; None when neither is there."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia  # noqa: PLC0415 - the namespace package of NVIDIA's wheels: optional, looked up on demand
    except ImportError:
        return None
    for base in getattr(nvidia, "__path__", []):
        for sub in ("cu13/bin", "cuda_nvdisasm/bin", "cuda_cuobjdump/bin"):
            cand = os.path.join(base, sub, name)
            if os.access(cand, os.X_OK):
                return cand
    return None


def is_nsys_input(path: str | os.PathLike[str]) -> bool:
    """Whether `path` names an Nsight Systems input by its suffix (.sqlite, .sqlite.gz,
    .nsys-rep, .qdrep, .qdstrm): how commands tell it from an Nsight Compute report."""
    name = Path(path).name.lower()
    return name.endswith((".sqlite", ".sqlite.gz", ".nsys-rep", ".qdrep", ".qdstrm"))


def split_inputs(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(Nsight Systems exports, the rest) of `paths`, by file name."""
    return [p for p in paths if is_nsys_input(p)], [p for p in paths if not is_nsys_input(p)]
