"""What a debugging session must verify first: the machine, the tools, their versions.

`wsperf doctor` prints this; `wsperf collect` (later) stamps it into every bundle. Tools
are run with argument lists and a short timeout; a tool that is absent or fails is
recorded as such, never raised: a CPU-only machine is a normal place to analyze.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from wsperf.collectors.files import find_binary

# Each tool: the argument list that prints its version, and a regex picking the version
# out of that text (tools print banners of several lines).
_TOOLS: dict[str, tuple[list[str], str]] = {
    "ncu": (["ncu", "--version"], r"Version\s+(\S+)"),
    "compute-sanitizer": (["compute-sanitizer", "--version"], r"Version\s+(\S+)"),
    "nvcc": (["nvcc", "--version"], r"release\s+([\d.]+)"),
    # 13.0: "NVIDIA (R) cuda-gdb 13.0" (fixtures/tools); older releases spell it CUDA-GDB
    "cuda-gdb": (["cuda-gdb", "--version"], r"(?:cuda-gdb|CUDA-GDB)\s+(?:.*?\s)?(\d+\.\d+\S*)"),
    "cuobjdump": (["cuobjdump", "--version"], r"release\s+([\d.]+)"),
    "nvdisasm": (["nvdisasm", "--version"], r"release\s+([\d.]+)"),
}

_PACKAGES = ("ncu-report", "duckdb", "pandas", "pyarrow", "typer", "rich", "altair", "torch", "triton", "tvm",
             "apache-tvm", "nvidia-cutlass-dsl")


@dataclass(frozen=True)
class Tool:
    """One external tool: where it is and what version it says it is."""

    name: str
    path: str | None
    version: str | None
    note: str = ""  # why version is missing, when it is


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str
    driver: str
    compute_capability: str  # "9.0"

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


@dataclass(frozen=True)
class Environment:
    """Everything `wsperf doctor` checks, in one value."""

    python: str
    platform: str
    wsperf: str
    packages: dict[str, str | None]
    tools: list[Tool]
    gpus: list[Gpu] = field(default_factory=list)
    gpu_note: str = ""


def _run(argv: list[str], timeout: float = 20.0) -> tuple[int | None, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe_tool(name: str) -> Tool:
    argv, pattern = _TOOLS[name]
    path = find_binary(argv[0])
    if path is None:
        return Tool(name, None, None, "not on PATH")
    rc, out = _run([path, *argv[1:]])
    version = tool_version(name, out)
    if version:
        return Tool(name, path, version)
    return Tool(name, path, None, f"version not understood (exit {rc})")


def tool_version(name: str, out: str) -> str | None:
    """The version a tool's own `--version` text gives, or None."""
    m = re.search(_TOOLS[name][1], out)
    return m.group(1) if m else None


def probe_gpus() -> tuple[list[Gpu], str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], "no nvidia-smi: no NVIDIA driver on this machine (analysis works without one)"
    rc, out = _run([smi, "--query-gpu=index,name,driver_version,compute_cap", "--format=csv,noheader"])
    if rc != 0:
        return [], f"nvidia-smi failed (exit {rc}): {out.strip()[:200]}"
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            gpus.append(Gpu(int(parts[0]), parts[1], parts[2], parts[3]))
    return gpus, "" if gpus else "nvidia-smi listed no GPU"


def probe() -> Environment:
    gpus, note = probe_gpus()
    return Environment(
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        wsperf=_version("wsperf") or "unknown",
        packages={p: _version(p) for p in _PACKAGES},
        tools=[probe_tool(t) for t in _TOOLS],
        gpus=gpus,
        gpu_note=note,
    )


def recorded(env: object, key: str) -> list[dict]:
    """The records under `key` (gpus, tools) of a bundle's environment.json as read back:
    the objects of its list, nothing else; a field of another kind (a damaged or foreign
    file) reads as no records."""
    items = env.get(key) if isinstance(env, dict) else None
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []
