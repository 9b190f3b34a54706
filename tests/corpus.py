"""Broken inputs for tests/test_bad_inputs.py and tests/test_fuzz.py, made at test time
from the real fixtures (nothing binary is committed): every kind of file wsperf reads,
emptied, cut, scrambled, swapped for a valid container of something else, blown up, or
made hostile. Each generator returns (label, bytes) pairs; the tests write them where
they need them.

The cuts are at fixed fractions of the file, so a failure names a reproducible offset.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"
COMPARE = ROOT / "fixtures" / "compare"
CORRECTNESS = ROOT / "fixtures" / "correctness"
PTX = ROOT / "fixtures" / "ptx"
CUBINS = ROOT / "fixtures" / "cubins"

# The smallest report (no source counters: every verdict that needs them is no_data) and
# a report with source counters and SASS (the loader's disassembly path).
BASIC = REPORTS / "gemm_wgmma_tma_basic.ncu-rep"
WITH_SASS = REPORTS / "ws_stream_healthy.ncu-rep"
GZ = COMPARE / "cmp_healthy_a.ncu-rep.gz"
XML = CORRECTNESS / "oob_write.memcheck.xml"
RACE_XML = CORRECTNESS / "smem_race.racecheck.xml"
CAPTURE = CORRECTNESS / "ws_deadlock.cudagdb.txt"
SASS = CORRECTNESS / "ws_deadlock.sass.txt"
PTX_FILE = PTX / "ws_stream.ptx"
CUBIN = CUBINS / "gemm.sm_90a.cubin"

Case = tuple[str, bytes]


def cuts(data: bytes, n: int = 20) -> list[Case]:
    """`data` cut at `n` offsets spread over the file (the first inside its header)."""
    offsets = sorted({7, *(len(data) * k // n for k in range(1, n))} - {0, len(data)})
    return [(f"cut at {o} of {len(data)}", data[:o]) for o in offsets[:n]]


def noise(seed: int, sizes: tuple[int, ...] = (1, 100, 4096, 1 << 16)) -> list[Case]:
    rnd = random.Random(seed)
    return [(f"{n} random bytes", rnd.randbytes(n)) for n in sizes]


def flips(data: bytes, seed: int, n: int) -> list[Case]:
    """`n` copies of `data`, each with 1 to 16 bytes set to random values."""
    rnd = random.Random(seed)
    out = []
    for k in range(n):
        b = bytearray(data)
        for _ in range(rnd.randint(1, 16)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        out.append((f"bytes changed #{k} (seed {seed})", bytes(b)))
    return out


def a_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("report.ncu-rep", "not a report inside a zip")
    return buf.getvalue()


def elf() -> bytes:
    """A real ELF that is not a report and holds no CUDA code: the Python interpreter's
    first 64 KiB would do, but a fixture cubin is an ELF of the wrong kind and smaller."""
    return CUBIN.read_bytes()


def common_wrong_kinds() -> list[Case]:
    """Valid files of some other kind, shared by every loader."""
    return [
        ("empty", b""),
        ("whitespace", b" \n\t\n"),
        ("text", b"==PROF== Connected to process 4242\n==PROF== Disconnected from process 4242\n"),
        ("zip", a_zip()),
        ("ELF cubin", elf()),
        ("compute-sanitizer XML", XML.read_bytes()),
        ("JSON", json.dumps({"format": 1, "runs": []}).encode()),
        ("NUL bytes", b"\0" * 4096),
        ("UTF-16 text", "wsperf".encode("utf-16")),
        ("invalid UTF-8", b"\xff\xfe\xfa" * 100),
    ]


# -- Nsight Compute reports -------------------------------------------------------------


def concatenated_report(launches: int, source: Path = BASIC) -> bytes:
    """A report of `launches` launches built from real data: an .ncu-rep is the 'NVR\\0'
    magic, a 4-byte length and a 2-byte file header, then self-delimiting blocks; the
    blocks of one report repeated after one header read back (ncu_report 2025.3 and
    2026.3) as one range of that many launches."""
    data = source.read_bytes()
    head = 4 + 4 + int.from_bytes(data[4:8], "little")
    return data + data[head:] * (launches - 1)


def renamed_kernel(byte: bytes) -> bytes:
    """BASIC with one byte of every copy of its kernel's mangled name replaced."""
    data = BASIC.read_bytes()
    name = re.search(rb"_Z\w{20,}", data).group(0)
    return data.replace(name, name[:8] + byte + name[9:])


def report_cases() -> list[Case]:
    basic, sass = BASIC.read_bytes(), WITH_SASS.read_bytes()
    return [
        *common_wrong_kinds(),
        *noise(1),
        ("NVR magic then random bytes", b"NVR\0\x02\0\0\0" + random.Random(2).randbytes(8192)),
        *[(f"no source counters, {label}", d) for label, d in cuts(basic)],
        *[(f"with SASS, {label}", d) for label, d in cuts(sass)],
        *[(f"no source counters, {label}", d) for label, d in flips(basic, 3, 8)],
        *[(f"with SASS, {label}", d) for label, d in flips(sass, 4, 8)],
        ("kernel name with invalid UTF-8", renamed_kernel(b"\xff")),
        ("kernel name with ESC", renamed_kernel(b"\x1b")),
        ("kernel name with NUL", renamed_kernel(b"\0")),
    ]


def gzip_cases() -> list[Case]:
    whole = GZ.read_bytes()
    return [
        *[(f"gzip {label}", d) for label, d in cuts(whole, 8) if len(d) >= 2],
        ("gzip of nothing", gzip.compress(b"")),
        ("gzip of random bytes", gzip.compress(random.Random(5).randbytes(1 << 16))),
        ("gzip of text", gzip.compress(b"not a report\n" * 100)),
        ("gzip of a cut report", gzip.compress(BASIC.read_bytes()[:50_000])),
        ("gzip magic then garbage", b"\x1f\x8b" + random.Random(6).randbytes(1000)),
    ]


# -- compute-sanitizer XML ----------------------------------------------------------------


def _with_func(data: bytes, func: bytes) -> bytes:
    return re.sub(rb"<func>[^<]*</func>", b"<func>" + func + b"</func>", data)


BILLION_LAUGHS = (b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
                  + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                             for i in range(1, 10))
                  + b"]>\n<ComputeSanitizerOutput>&lol9;</ComputeSanitizerOutput>\n")
EXTERNAL_ENTITY = (b'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n'
                   b"<ComputeSanitizerOutput><record><kind>Api</kind><level>Error</level><what><text>&e;</text>"
                   b"</what></record></ComputeSanitizerOutput>\n")
PARAMETER_ENTITY = (b'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>\n'
                    b"<ComputeSanitizerOutput/>\n")


def newer_schema() -> bytes:
    """A file as a newer compute-sanitizer might write it: a new record kind, new
    elements inside known records, attributes; read as far as it is understood."""
    data = XML.read_bytes()
    data = data.replace(b"<ComputeSanitizerOutput>", b'<ComputeSanitizerOutput version="2099.1" schema="9">', 1)
    data = data.replace(b"<what>", b"<what><future_field unit=\"ns\">42</future_field>")
    return data.replace(b"</ComputeSanitizerOutput>", b"<record><kind>QuantumCheck</kind><level>Warning</level>"
                        b"<what><text>a kind this wsperf does not know</text></what></record>"
                        b"</ComputeSanitizerOutput>")


def many_records(n: int, source: Path = XML) -> bytes:
    """`source` with its first record repeated `n` times: a real record, a huge file."""
    data = source.read_bytes()
    start, end = data.index(b"<record>"), data.index(b"</record>") + len(b"</record>")
    return data[:start] + data[start:end] * n + data[data.rindex(b"</record>") + len(b"</record>"):]


def xml_cases() -> list[Case]:
    data = XML.read_bytes()
    numbers = {b"huge number": b"99999999999999999999999", b"negative number": b"-1",
               b"hex too wide": b"0x" + b"f" * 20}
    return [
        *common_wrong_kinds(),
        *noise(7),
        *[(f"memcheck XML {label}", d) for label, d in cuts(data)],
        *[(f"racecheck XML {label}", d) for label, d in cuts(RACE_XML.read_bytes(), 10)],
        *[(f"memcheck XML {label}", d) for label, d in flips(data, 8, 10)],
        ("HTML", b"<html><body>not a sanitizer file</body></html>"),
        ("billion laughs", BILLION_LAUGHS),
        ("billion laughs in UTF-16", BILLION_LAUGHS.decode().encode("utf-16")),
        ("external entity", EXTERNAL_ENTITY),
        ("external entity in UTF-16", EXTERNAL_ENTITY.decode().encode("utf-16")),
        ("parameter entity", PARAMETER_ENTITY),
        ("unknown encoding", data.replace(b'encoding="utf-8"', b'encoding="utk-8"', 1)),
        ("EBCDIC declared", data.replace(b'encoding="utf-8"', b'encoding="cp500"', 1)),
        ("invalid UTF-8 in a kernel name", _with_func(data, b"kernel_\xff\xfe")),
        *[(label.decode(), re.sub(rb"<(line|pc|size|address|x)>[^<]*<", lambda m: b"<" + m.group(1) + b">" + v + b"<",
                                  data)) for label, v in numbers.items()],
        ("deeply nested", b"<ComputeSanitizerOutput>" + b"<a>" * 100_000 + b"</a>" * 100_000
         + b"</ComputeSanitizerOutput>"),
    ]


# -- cuda-gdb captures, cuobjdump SASS ------------------------------------------------------


def capture_cases() -> list[Case]:
    data = CAPTURE.read_bytes()
    return [*common_wrong_kinds(), *noise(9), *cuts(data), *flips(data, 10, 10),
            ("SASS listing as a capture", SASS.read_bytes()),
            ("invalid UTF-8 in a table", data.replace(b"Active", b"Act\xffve", 1))]


def sass_cases() -> list[Case]:
    data = SASS.read_bytes()
    return [*common_wrong_kinds(), *cuts(data, 10), ("capture as a SASS listing", CAPTURE.read_bytes())]


# -- PTX --------------------------------------------------------------------------------------


def ptx_cases() -> list[Case]:
    data = PTX_FILE.read_bytes()
    head = b".version 8.0\n.target sm_90a\n.address_size 64\n"
    return [
        *[(label, d) for label, d in common_wrong_kinds() if label != "ELF cubin"],
        *noise(11),
        *cuts(data),
        *flips(data, 12, 10),
        ("unclosed comments", head + b"/*\n" * 200_000),
        ("an empty kernel", head + b".visible .entry k()\n{\n}\n"),
        ("a kernel of one unreadable line", head + b".visible .entry k()\n{\n" + b"x" * 200_000 + b"\n}\n"),
        ("unbalanced braces", head + b".visible .entry k()\n{\n{\n{\n"),
        ("mbarrier statements without operands", head + b".visible .entry k()\n{\n" + b"".join(
            op + b";\n" for op in (b"mbarrier.init.shared::cta.b64", b"mbarrier.arrive.shared::cta.b64 %rd1",
                                   b"mbarrier.try_wait.parity.shared::cta.b64 %p1", b"mbarrier.inval.shared.b64",
                                   b"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1]",
                                   b"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1]",
                                   b"tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64"))
         + b"}\n"),
        ("invalid UTF-8 and ESC in statements", data.replace(b"mbarrier.init", b"mbarrier.\xff\x1b[31minit", 1)),
        ("60 copies of its kernels", data + b"".join(
            data[data.index(b".visible .entry"):].replace(b".entry _Z", b".entry k%d_Z" % i) for i in range(60))),
    ]


# -- cubins and binaries (wsperf inspect) -----------------------------------------------------


def binary_cases() -> list[Case]:
    data = CUBIN.read_bytes()
    return [
        *[(label, d) for label, d in common_wrong_kinds() if label not in ("empty", "ELF cubin")],
        *noise(13, (100, 4096)),
        *[(f"cubin {label}", d) for label, d in cuts(data, 10)],
        *[(f"cubin {label}", d) for label, d in flips(data, 14, 4)],
    ]


# -- config TOML --------------------------------------------------------------------------------


def config_cases() -> list[Case]:
    return [
        ("invalid UTF-8", b'expect = ["\xff"]\n'),
        ("not TOML", b"expect: [tma]\n"),
        ("a cut table", b"[thresholds.producer-bound\n"),
        ("unknown key", b'expcet = ["tma"]\n'),
        ("unknown expectation", b'expect = ["warp-drive"]\n'),
        ("expect not a list", b'expect = "tma"\n'),
        ("unknown hypothesis", b"[thresholds.too-slow]\nx = 1\n"),
        ("unknown threshold", b"[thresholds.producer-bound]\nmin_wait = 0.5\n"),
        ("threshold not a table", b"[thresholds]\nproducer-bound = 3\n"),
        ("NUL bytes", b"\0" * 100),
        ("random bytes", random.Random(15).randbytes(4096)),
        ("JSON", b'{"expect": ["tma"]}'),
    ]


# Config files that crash analyses/config.py (a traceback, not an Error line): see the
# xfail in test_bad_inputs.py.
CONFIG_CRASHES = [
    ("thresholds not a table", b'thresholds = "x"\n'),
    ("arrays nested 100,000 deep", b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
]


# -- bundles ------------------------------------------------------------------------------------


def manifest_cases(valid: bytes) -> list[Case]:
    """Damaged manifests, from the `valid` manifest of a real bundle."""
    doc = json.loads(valid)
    run = doc["runs"][-1]

    def with_runs(*runs) -> bytes:
        return json.dumps({**doc, "runs": list(runs)}).encode()

    return [
        *[(label, d) for label, d in common_wrong_kinds() if label != "JSON"],  # that one is a valid empty manifest
        *cuts(valid, 10),
        ("format 2", json.dumps({**doc, "format": 2}).encode()),
        ("runs not a list", json.dumps({**doc, "runs": {"a": 1}}).encode()),
        ("a run that is a number", with_runs(1)),
        ("a run that is null", with_runs(None)),
        ("a run without fields", with_runs({})),
        ("argv not a list", with_runs({**run, "argv": "repro --flag"})),
        ("argv of numbers", with_runs({**run, "argv": [1, 2]})),
        ("outputs a list", with_runs({**run, "outputs": ["sanitizer/memcheck.xml"]})),
        ("exit code a string", with_runs({**run, "exit_code": "0"})),
        ("an output path out of the bundle", with_runs({**run, "outputs": {"xml": "../../../../etc/passwd"}})),
        ("an absolute output path", with_runs({**run, "outputs": {"xml": "/etc/passwd"}})),
        ("a home-relative output path", with_runs({**run, "outputs": {"xml": "~/.ssh/id_rsa"}})),
        ("a NUL in an output path", with_runs({**run, "outputs": {"xml": "sanitizer/a\u0000b.xml"}})),
        ("a stdout path out of the bundle", with_runs({**run, "stdout": "../outside.txt"})),
        ("nested 100,000 deep", b'{"format": 1, "runs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        ("17 MiB of padding", json.dumps({**doc, "pad": "x" * (17 << 20)}).encode()),
        # under the size cap; each run checked (its XML read) took minutes in all
        ("20,000 runs", with_runs(*[run] * 20_000)),
    ]


# -- fuzz targets (tests/test_fuzz.py in CI, benchmarks/fuzz_loaders.py for long runs) --------
#
# Each target feeds bytes to one loader, as wsperf reads them, and returns "error" (a
# WsperfError: the documented outcome for bad input) or "ok"; any other exception is a
# finding and propagates.

# Bytes that mean something to one of the formats: markup, entities, numbers out of
# range, table separators, escape sequences, invalid UTF-8.
TOKENS = (b"<", b">", b"</", b"&amp;", b"&#0;", b"]]>", b"<!DOCTYPE x>", b'"', b"'", b"\0", b"\n", b"\r\n",
          b"\x1b[31m", b"\xff\xfe", b"\xc3", b"-1", b"0x", b"9" * 25, b"0xffffffffffffffffff", b"{", b"}", b";",
          b",", b"[", b"]", b"(", b")", b"@%p1 ", b"==== info cuda warps\n", b"==== x/2i $pc\n", b"Device 0 SM 0\n",
          b"%r1", b".entry k(\n)\n{\n", b"mbarrier.init.shared.b64 ", b"\\", b"NaN", b"true", b"null", b"[[", b"]]")


def mutations():
    """A hypothesis strategy: a function applying 1-8 byte-level edits (set, insert,
    delete, cut, duplicate a span, insert a token) to the bytes it is given."""
    from hypothesis import strategies as st

    edit = st.tuples(st.sampled_from(("set", "insert", "delete", "cut", "dup", "token")),
                     st.floats(0, 1, allow_nan=False), st.integers(0, 255), st.integers(1, 512),
                     st.sampled_from(TOKENS))
    return st.lists(edit, min_size=1, max_size=8).map(Mutation)


# Targets whose input is JSON (a wsperf trace: its header line) also get json_mutations
JSON_TARGETS = frozenset({"timeline", "environment", "manifest"})


def mutations_for(target: str):
    """The mutation strategy for a fuzz target: byte-level edits, and for JSON inputs also
    values of the wrong kind set inside them (the trace fields that gave tracebacks:
    list-valued args, timestamps of 1e400, CTAs of 1e30, counts of 2^64-1)."""
    from hypothesis import strategies as st

    return st.one_of(mutations(), json_mutations()) if target in JSON_TARGETS else mutations()


def json_mutations():
    """A hypothesis strategy, aware of JSON: a function that parses what it is given (a
    JSON document, or a wsperf trace's JSON header line), sets 1-4 values at paths inside
    it to values of the wrong kind or out of range (numbers of 2^64 and more, infinities,
    NaN, lone surrogates, nested lists and objects), and writes it back. Bytes that are
    not JSON are returned as they were."""
    from hypothesis import strategies as st

    leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.sampled_from(
        [2 ** 64 - 1, 2 ** 63, -1, 0, 10 ** 30]), st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8), st.sampled_from(["\ud800", "", "x" * 300, "producer", "0"]))
    value = st.recursive(leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                         max_leaves=6)
    where = st.floats(0, 1, allow_nan=False)
    edit = st.tuples(where, where, value, st.booleans())
    return st.lists(edit, min_size=1, max_size=4).map(JsonMutation)


class JsonMutation:
    """Values to set inside a JSON document; its repr lists them."""

    def __init__(self, edits) -> None:
        self.edits = edits

    def __call__(self, data: bytes) -> bytes:
        head, sep, rest = data.partition(b"\n") if data.startswith(b'{"format":"wsperf-trace"') else (data, b"", b"")
        try:
            doc = json.loads(head)
        except (ValueError, RecursionError):
            return data
        for level, where, value, as_key in self.edits:
            # a depth first, then a value at it: the few top-level fields are hit as often as
            # the many deep ones
            levels: dict[int, list] = {}
            for d, slot in _slots(doc):
                levels.setdefault(d, []).append(slot)
            if not levels:
                break
            slots = levels[sorted(levels)[min(int(level * len(levels)), len(levels) - 1)]]
            parent, key = slots[min(int(where * len(slots)), len(slots) - 1)]
            if as_key and isinstance(parent, dict) and isinstance(value, str):
                parent[value] = parent.pop(key)  # the value renamed: a key wsperf looks for goes missing
            else:
                parent[key] = value
        return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass") + sep + rest

    def __repr__(self) -> str:
        return f"JsonMutation({self.edits!r})"


def _slots(doc):
    """(depth, (container, key)) of the values inside `doc`: 5 levels, 200 per container,
    2,000 in all."""
    stack, n = [(doc, 0)], 0
    while stack and n < 2000:
        node, d = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in list(items)[:200]:
            yield d, (node, k)
            n += 1
            if d < 4 and isinstance(v, (dict, list)):
                stack.append((v, d + 1))


class Mutation:
    """Edits to apply to bytes; its repr (what hypothesis prints for a finding) lists them."""

    def __init__(self, edits) -> None:
        self.edits = edits

    def __call__(self, data: bytes) -> bytes:
        return _apply(data, self.edits)

    def __repr__(self) -> str:
        return f"Mutation({self.edits!r})"


def _apply(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for op, where, byte, span, token in edits:
        i = min(int(where * len(b)), max(len(b) - 1, 0))
        if op == "set" and b:
            b[i] = byte
        elif op == "insert":
            b[i:i] = bytes([byte]) * (span % 8 + 1)
        elif op == "delete":
            del b[i:i + span]
        elif op == "cut":
            del b[i:]
        elif op == "dup":
            b[i:i] = b[i:i + span]
        else:
            b[i:i] = token
    return bytes(b)


class Targets:
    """The loaders, each taking bytes. `tmp` is a scratch directory; `store` an open
    wsperf store (reports and sanitizer runs are added to it)."""

    def __init__(self, tmp: Path, store) -> None:
        self.tmp, self.store = tmp, store
        self.sass = None
        self.bundle: Path | None = None

    def _write(self, name: str, data: bytes) -> Path:
        p = self.tmp / name
        p.write_bytes(data)
        return p

    def sanitizer_xml(self, data: bytes) -> str:
        from wsperf.collectors.sanitizer import load_sanitizer_xml

        return _outcome(lambda: load_sanitizer_xml(self.store, self._write("f.xml", data)))

    def cudagdb(self, data: bytes) -> str:
        from wsperf.collectors.cudagdb import map_waits, parse_cudagdb, parse_cuobjdump_sass

        if self.sass is None:
            self.sass = parse_cuobjdump_sass(SASS.read_text())
        return _outcome(lambda: map_waits(parse_cudagdb(data.decode("utf-8", "replace")), self.sass))

    def ptx(self, data: bytes) -> str:
        from wsperf.analyses.worksheet import worksheet

        return _outcome(lambda: worksheet([self._write("f.ptx", data)]))

    def config(self, data: bytes) -> str:
        from wsperf.analyses.config import load_config

        return _outcome(lambda: load_config(self._write("f.toml", data)))

    def manifest(self, data: bytes) -> str:
        from wsperf.analyses.evidence import gather
        from wsperf.collectors.bundle import MANIFEST

        if self.bundle is None:
            self.bundle = a_bundle(self.tmp / "target")
        (self.bundle / MANIFEST).write_bytes(data)
        return _outcome(lambda: gather(self.store, [self.bundle]))

    def ncu_report(self, data: bytes) -> str:
        from wsperf.collectors.ncu import load_report

        return _outcome(lambda: load_report(self.store, self._write("f.ncu-rep", data), timeout_s=120))

    def timeline(self, data: bytes) -> str:
        """A trace as `wsperf timeline` takes it: loaded, summarized and exported."""
        from wsperf.analyses.timeline import export_timeline, load_timelines, summarize_timeline

        # the name decides the reader: the wsperf format's suffix only where the seed had it
        name = "f.wsperf-trace" if data.startswith(b'{"format":"wsperf-trace"') else "f.json"

        def run() -> None:
            for t in load_timelines(self.store, [self._write(name, data)]):
                summarize_timeline(self.store, t.timeline_id)
                export_timeline(self.store, t.timeline_id, limit=10_000)
        return _outcome(run)

    def environment(self, data: bytes) -> str:
        """A bundle's environment.json, read where wsperf reads it: a stored run's driver
        and ncu version (`analyze BUNDLE --db`), and REPORT.md's environment lines."""
        from wsperf.analyses.history import _bundle_environment
        from wsperf.cli.report_md import _environment
        from wsperf.collectors.bundle import ENVIRONMENT

        b = self.tmp / "env-bundle"
        b.mkdir(exist_ok=True)
        (b / ENVIRONMENT).write_bytes(data)
        return _outcome(lambda: (_bundle_environment([b]), _environment(b)))

    def nsys(self, data: bytes) -> str:
        """An Nsight Systems SQLite export, loaded and analyzed as `wsperf nsys` does."""
        from wsperf.analyses.nsys import summarize_nsys, timeline
        from wsperf.collectors.nsys import load_nsys_export

        def run() -> None:
            loaded = load_nsys_export(self.store, self._write("f.sqlite", data), timeout_s=60)
            summarize_nsys(self.store, [loaded.export_id])
            timeline(self.store, [loaded.export_id])
        return _outcome(run)


# Target name -> the real files its mutations start from.
SEEDS = {
    "sanitizer_xml": [XML, RACE_XML, CORRECTNESS / "uninit_read.initcheck.xml", CORRECTNESS / "barrier_misuse.synccheck.xml",
                      CORRECTNESS / "smem_race.racecheck-hazards.xml"],
    "cudagdb": [CAPTURE, CORRECTNESS / "ws_deadlock.collect-probe.txt"],
    "ptx": sorted(PTX.glob("*.ptx")),
    "config": [],  # seeded with CONFIG_SEED below
    "manifest": [],  # seeded with the manifest of a real bundle (Targets.manifest)
    "ncu_report": [BASIC, WITH_SASS],
    # the project's own traces: the wsperf format (a clean and a cut one) and Proton's Chrome JSON
    "timeline": [ROOT / "fixtures" / "timeline" / n for n in ("ring1.wsperf-trace", "ring4_slots64.wsperf-trace",
                                                               "proton_staged.chrome_trace")],
    "environment": [],  # seeded with the environment.json of a real bundle (Targets.environment)
    "nsys": [],  # seeded with public exports, inflated (`seeds`)
}
CONFIG_SEED = (b'expect = ["tma", "tensor-core"]\n\n[thresholds.producer-bound]\nmin_consumer_wait_share = 0.25\n\n'
               b"[compare.thresholds]\nalpha = 0.01\nduration_ns = 5.0\n")


def seeds(target: str, tmp: Path) -> list[bytes]:
    if target == "config":
        return [CONFIG_SEED]
    if target == "manifest":
        from wsperf.collectors.bundle import MANIFEST

        return [(a_bundle(tmp / "seed") / MANIFEST).read_bytes()]
    if target == "environment":  # what collect wrote on the H200 (Triton and Gluon bundles)
        return [(ROOT / "fixtures" / "evidence" / b / "environment.json").read_bytes()
                for b in ("triton_plain_desc", "gluon_ws_rowsum")]
    if target == "nsys":
        import gzip

        from support import PUBLIC

        # the two smallest public exports: one with kernels (schema 3.24, cluster columns),
        # one whose capture ran none
        return [gzip.decompress((PUBLIC / "nsys" / n).read_bytes())
                for n in ("vecadd_rtx3060_nsys2025.5.sqlite.gz", "cublas_test_rtx5060_nsys2025.1_no_kernels.sqlite.gz")]
    return [p.read_bytes() for p in SEEDS[target]]


def a_bundle(tmp: Path) -> Path:
    """The real oob_write sanitizer bundle (tests/bundles.py; tests/ must be on sys.path)."""
    from bundles import sanitizer_bundle

    return sanitizer_bundle(tmp, "oob_write")


def _outcome(fn) -> str:
    from wsperf.collectors.errors import WsperfError

    try:
        fn()
    except WsperfError as e:
        assert str(e) and "\n" not in str(e), repr(str(e))  # one Error line
        return "error"
    return "ok"


# -- paths that are not plain files, and stores that are not wsperf's --------------------


def special_paths(tmp: Path) -> list[tuple[str, Path]]:
    """Paths that must be refused before a byte is read, quickly: a FIFO (blocks open and
    read forever), /dev/zero (never ends), a 1 TB sparse file (hashing it takes hours),
    a symlink loop, a name over 255 bytes, a directory."""
    import os

    tmp.mkdir(parents=True, exist_ok=True)
    fifo = tmp / "fifo.ncu-rep"
    if not fifo.exists():
        os.mkfifo(fifo)
    sparse = tmp / "sparse.ncu-rep"
    with open(sparse, "wb") as f:
        f.truncate(1 << 40)
    loop1, loop2 = tmp / "loop1", tmp / "loop2"
    for a, b in ((loop1, loop2), (loop2, loop1)):
        if not a.is_symlink():
            a.symlink_to(b.name)
    return [("FIFO", fifo), ("/dev/zero", Path("/dev/zero")), ("1 TB sparse file", sparse),
            ("symlink loop", loop1), ("name of 300 bytes", tmp / ("n" * 300)), ("directory", tmp)]


def zeros_gzip(mib: int = 64) -> bytes:
    """A gzip of zeros (64 MiB -> 64 KiB): refused from its first decompressed MiB."""
    return gzip.compress(b"\0" * (mib << 20), compresslevel=9)


def foreign_databases(tmp: Path) -> list[tuple[str, Path]]:
    """Files a --db must refuse without changing them: other formats DuckDB would open
    as an empty in-memory database, DuckDB files of other programs, and a wsperf store of
    a newer layout (made from a real store by `make_store`, see `newer_layout`)."""
    import duckdb

    tmp.mkdir(parents=True, exist_ok=True)
    out = []
    parquet = tmp / "runs.parquet"
    with duckdb.connect() as c:
        c.execute(f"COPY (SELECT 1 AS a) TO '{parquet}' (FORMAT PARQUET)")
    out.append(("Parquet", parquet))
    (tmp / "runs.csv").write_text("a,b\n1,2\n")
    out.append(("CSV", tmp / "runs.csv"))
    (tmp / "runs.json").write_text('[{"a": 1}]\n')
    out.append(("JSON", tmp / "runs.json"))
    for label, ddl in (("DuckDB with views only", "CREATE VIEW v AS SELECT 42 AS answer"),
                       ("DuckDB with tables in another schema", "CREATE SCHEMA app; CREATE TABLE app.t (a INT)"),
                       ("DuckDB with a macro only", "CREATE MACRO twice(a) AS a * 2")):
        p = tmp / (label.replace(" ", "_") + ".duckdb")
        with duckdb.connect(str(p)) as c:
            c.execute(ddl)
        out.append((label, p))
    return out


def newer_layout(store: Path) -> None:
    """Make the wsperf store at `store` look written by a later wsperf (layout 99), with a
    `roles` table where this version has a view: opening it must change nothing."""
    import duckdb

    with duckdb.connect(str(store)) as c:
        c.execute("UPDATE wsperf_meta SET value = '99' WHERE key = 'schema_version'")
        c.execute("DROP VIEW IF EXISTS roles")
        c.execute("CREATE TABLE roles (launch_id BIGINT, role VARCHAR, layout99 VARCHAR)")
        c.execute("DROP TABLE IF EXISTS role_pcs")


# Regular expressions for --kernel that Python's `re` takes exponential time on, or
# cannot compile, or that overflow: RE2 (DuckDB's regexp_matches) runs or refuses them at once.
HOSTILE_REGEXES = [r"(\w+)+!", r"(a|aa)+$", r"(.*a){20}", r"(a)\1", r"a{4294967296}", "[", "(?P<x>a)(?P=x)"]

# Numbers a config or option must refuse.
NOT_FINITE = ["nan", "inf", "-inf", "+nan"]
SHARES_OUT_OF_RANGE = ["-0.1", "1.5", "1e300"]
