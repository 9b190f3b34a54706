"""The wsperf trace file: the record layout of collectors/include/wsperf_trace.cuh.

A file is one line of JSON (the header), a newline, then 32-byte little-endian records:

    off size field  meaning
     0   8   t_ns   %globaltimer in ns (one clock for every SM)
     8   4   clk    low 32 bits of %clock64 on the recording SM
    12   4   sm     %smid
    16   4   cta    linear CTA index
    20   2   warp   warp index inside the CTA
    22   1   role   0 producer, 1 consumer, 2 epilogue, 3 other, >= 16 user (named in "roles")
    23   1   phase  0 instant, 1 begin, 2 end
    24   2   event  0 kernel, 1 wait, 2 copy, 3 compute, 4 epilogue, 5 release, >= 16 user
    26   2   stage  ring stage (0xffff: none)
    28   4   seq    the caller's iteration / tile counter

A record whose t_ns is 0 is an unused slot. The header names the kernel and the buffer's
shape (ctas, cta_stride, warps_per_cta, slots_per_warp) and maps role and event numbers to
names. A DSL's own profiler output converts to this format by writing the same header line
and records. This module is standard library only, so a GPU machine without the rest of
wsperf's dependencies can write traces with it (see `dump_tensor`)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

FORMAT = "wsperf-trace"
VERSION = 1
RECORD = struct.Struct("<QIIIHBBHHI")
RECORD_BYTES = RECORD.size  # 32
ROLES = {0: "producer", 1: "consumer", 2: "epilogue", 3: "other"}
EVENTS = {0: "kernel", 1: "wait", 2: "copy", 3: "compute", 4: "epilogue", 5: "release"}
PHASES = {0: "instant", 1: "begin", 2: "end"}
NO_STAGE = 0xFFFF
# The header line is short JSON; anything longer than this before a newline is not a trace.
MAX_HEADER_BYTES = 1 << 16


@dataclass(frozen=True)
class TraceHeader:
    """The JSON line at the top of a trace file."""

    kernel: str
    ctas: int
    cta_stride: int
    warps_per_cta: int
    slots_per_warp: int
    roles: dict[int, str]
    events: dict[int, str]


def trace_bytes(ctas: int, warps_per_cta: int, slots_per_warp: int, cta_stride: int = 1) -> int:
    """Size in bytes of the device buffer (same as wsperf_trace_bytes in the header)."""
    sampled = (ctas + cta_stride - 1) // cta_stride
    return sampled * warps_per_cta * slots_per_warp * RECORD_BYTES


def header_line(
    kernel: str,
    ctas: int,
    cta_stride: int,
    warps_per_cta: int,
    slots_per_warp: int,
    roles: dict[int, str] | None = None,
    events: dict[int, str] | None = None,
) -> bytes:
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "kernel": kernel,
        "record_bytes": RECORD_BYTES,
        "ctas": ctas,
        "cta_stride": cta_stride,
        "warps_per_cta": warps_per_cta,
        "slots_per_warp": slots_per_warp,
        "roles": {str(k): v for k, v in (roles or {}).items()},
        "events": {str(k): v for k, v in (events or {}).items()},
    }
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def dump_tensor(
    buffer,
    path: str | Path,
    kernel: str,
    ctas: int,
    warps_per_cta: int,
    slots_per_warp: int,
    cta_stride: int = 1,
    roles: dict[int, str] | None = None,
    events: dict[int, str] | None = None,
) -> Path:
    """Write a trace file from the device buffer a kernel filled.

    `buffer` is a PyTorch tensor (any dtype, on any device: it is copied to the host), a
    NumPy array, or bytes. Pass the kernel a wsperf_trace_t built from tensor.data_ptr()
    and the same shape numbers."""
    if hasattr(buffer, "cpu"):  # a torch tensor: to host memory, then its bytes
        buffer = buffer.cpu().contiguous().numpy()
    raw = bytes(memoryview(buffer).cast("B"))
    want = trace_bytes(ctas, warps_per_cta, slots_per_warp, cta_stride)
    if len(raw) != want:
        raise ValueError(f"the buffer holds {len(raw)} bytes; the shape given needs {want}")
    out = Path(path)
    out.write_bytes(header_line(kernel, ctas, cta_stride, warps_per_cta, slots_per_warp, roles, events) + raw)
    return out
