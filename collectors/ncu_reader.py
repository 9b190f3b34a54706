"""The report reader process: `python -m wsperf.collectors.ncu_reader --serve`.

Every ncu_report call of wsperf happens here, in a process of its own (collectors/ncu.py
says why, and runs these processes). A reader opens the report it is told to, reads the
launch parts it is handed (a launch's metrics, or its code: disassembly, source lines and
ncu's rule results) into staging columns, and writes them out as CSV files, one per staged
table (collectors/staging.py), for the parent to insert. No native library but ncu_report's
is loaded here (staging.py says why). The JSON-lines protocol is in `_serve`.
"""

from __future__ import annotations

import json
import os
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from wsperf.collectors import cubin, staging
from wsperf.collectors.errors import ReportError
from wsperf.collectors.files import why
from wsperf.collectors.prestart import PC_METRIC_WORDS
from wsperf.collectors.reader_sass import SassListings
from wsperf.collectors.staging import ALL, CODE, LAUNCH_METRICS, METRICS, METRICS_TABLES, SASS_METRICS, STAGES, same_read


DURATION = "gpu__time_duration.sum"
NS_PER_UNIT = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}

STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
PCSAMP_PREFIX = "smsp__pcsamp_"
PC_METRICS = frozenset(SASS_METRICS.values())  # a launch with none of these, nor PC sampling, has no code to read
NOT_ISSUED = "_not_issued"
OPCODE_METRIC = "sass__inst_executed_per_opcode"  # instances keyed by opcode name (text correlation ids)
OPCODE_THREAD_METRIC = "sass__thread_inst_executed_true_per_opcode"
FUNCTION_PCS = "launch__function_pcs"  # instance values: start address of each function of the launch
START_TIMESTAMP = "profiler__timestamp_workload_start"  # correlation id: GPU global timer (ns)
# A metric is per-PC when its correlation ids all lie in [function start, start + 4 GiB):
# no kernel's code is that large, and the other numeric ids ncu uses (indices from 0,
# GPU timestamps) are far outside. Both parts of a launch apply the same test.
MAX_CODE_BYTES = 1 << 32

# Slots of a value: which staging column holds it.
FLOAT, INT, TEXT, MIXED, NONE = range(5)


class _Damaged(Exception):
    """An action that ncu_report cannot read completely."""


def _serve() -> int:
    """`python -m wsperf.collectors.ncu_reader --serve`: the reader process. Messages, one JSON
    object a line; each is answered on stdout:

      {"open": PATH, "name": NAME, "out": DIR, "reader": I, "readers": R, "coder": bool,
       "units": bool}              -> {"opened": {"launches": N, "warm": bool, "listed": bool,
                                                  "listings": {SHA256: [FILE, [FUNCTION, ...]]}}}
                         (listed: nvdisasm serves this report's code, started here by
                         the coder, into FILEs that the other readers read too;
                         units: false leaves every metric's unit NULL but the duration's,
                         see _Reader; absent means true)
      {"task": [launch, part], "listings": {...}}  -> {"did": [launch, part, kernel name]}
                         (listings, optional: the coder's, to read instead of running
                         nvdisasm again)
      {"finish": true}   write <table>.<I>.csv into DIR    -> {"done": {report facts}}
      {"abort": true}    drop the report                  -> {"done": null}
      {"prefetch": OPEN, "listings": {SHA256: [FILE, [FUNCTION, ...]]}}
                         OPEN: an "open" message of one reader ("readers": 1): read all of
                         that report now (metrics first, then code) and keep it for the
                         "open" that repeats OPEN, whose tasks are then answered at once;
                         nvdisasm's listing of those functions of the cubin SHA256 is
                         (or will be) FILE (collectors/cubin.py, start_output)
                                   -> {"staged": {"spec": OPEN, "meta": {report facts}}}
                         (as soon as the metrics parts' tables are written: the load
                         inserts them while the code is read), then {"warmed": bool}
      {"ahead": OPEN}    OPEN: an "open" message: open that report now (the coder lists
                         its code) and keep it for the "open" that repeats OPEN
                                                                   -> {"warmed": bool}
      {"warm": PATH}     start disassembling the kernels of the report at PATH (nvdisasm
                         in the background; without nvdisasm, ncu_report's set-up on one
                         PC), then forget the report           -> {"warmed": bool}

    A damaged report is answered with {"error": "..."} and dropped. Exits at end of input."""
    try:
        import resource
    except ImportError:  # Windows has none: there readers are never retired for size
        resource = None  # type: ignore[assignment]

    # Answers go to a private copy of stdout; fd 1 then points at stderr, so whatever
    # the native library prints cannot corrupt them.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(**msg: object) -> None:
        channel.write(json.dumps(msg) + "\n")

    reader: _Reader | None = None
    prefetched: tuple[dict, _Reader] | None = None  # the "prefetch" message and its reader
    ahead: tuple[dict, _Reader, dict | None] | None = None  # the "ahead" message, its reader and listings
    name = "the report"  # as the user named it, for messages
    warm = False  # this process has disassembled before
    for line in sys.stdin:
        msg = json.loads(line)
        name = msg.get("name", name) if "open" in msg else name
        try:
            if "warm" in msg:
                warm = warm or _warm_up(msg["warm"])
                emit(warmed=warm)
            elif "prefetch" in msg:
                # nvdisasm may be running for this report already, started by prestart.
                _SASS.external.update({sha: (Path(p), list(fs)) for sha, (p, fs) in msg.get("listings", {}).items()})
                prefetched = _prefetch(msg["prefetch"], emit)
                warm = warm or prefetched is not None
                emit(warmed=warm)
            elif "ahead" in msg:
                ahead = _ahead(msg["ahead"])
                warm = warm or (ahead is not None and ahead[2] is not None)
                emit(warmed=warm)
            elif "open" in msg and prefetched is not None and same_read(prefetched[0], msg):
                # The load of what was prefetched, by this reader alone: all of it is read.
                reader, prefetched = prefetched[1], None
                emit(opened={"launches": reader.launches, "warm": warm, "listed": True})
            elif "open" in msg:
                prefetched = None
                if ahead is not None and same_read(ahead[0], msg):  # opened (and listed) already
                    _, reader, listings = ahead
                else:
                    reader = _Reader(msg["open"], msg["name"], Path(msg["out"]), msg["reader"],
                                     units=msg.get("units", True))
                    # The reader chosen for the code parts starts nvdisasm on the report's
                    # kernels now, in the background (or finds it started by "warm").
                    listings = reader.list_code() if msg.get("coder") else None
                ahead = None
                if _SASS.tool is None and not warm and reader.launches >= 2 * msg["readers"]:
                    # No nvdisasm; enough launches to go round whole: worth ncu_report's
                    # set-up now, so that no launch is opened twice (metrics here,
                    # disassembly elsewhere). With nvdisasm, the coder's listings serve.
                    warm = reader.warm_up()
                emit(opened={"launches": reader.launches, "warm": warm, "listed": listings is not None,
                             "listings": listings or {}})
            elif "task" in msg:
                _SASS.borrow(msg.get("listings", {}))
                idx, part = msg["task"]
                emit(did=[idx, part, reader.read(idx, part)])  # type: ignore[union-attr]
                warm |= part != METRICS
            elif "finish" in msg:
                meta = reader.finish()  # type: ignore[union-attr]
                if resource is not None:  # peak resident size; Linux counts KiB
                    meta["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                reader = None
                emit(done=meta)
                _SASS.settle()  # after the answer: the load goes on meanwhile
            else:
                reader = None
                emit(done=None)
        except ReportError as e:
            reader = None
            emit(error=str(e))
        except OSError as e:  # writing the staged tables: a full or unwritable TMPDIR
            reader = None
            emit(error=f"{name}: cannot stage its tables in the temporary directory ({why(e)}); free space there "
                       "or point TMPDIR elsewhere")
    return 0


def _warm_up(path: str) -> bool:
    """Start the disassembly of the report at `path` (the load then finds it under way or
    done, by the cubins' content), or get ncu_report's disassembler set up (~0.75 s,
    once per process) where nvdisasm cannot serve; the report's data is then dropped.
    Whether either happened. Never fails: a report that cannot be read here is read (and
    reported on) by the load."""
    try:
        reader = _Reader(path, path, Path(os.devnull), 0)
        return reader.list_code() is not None or reader.warm_up()
    except Exception:  # noqa: BLE001 - only speed is at stake
        return False
    finally:
        _SASS.forget(path)  # the jobs stay: the load's snapshot holds the same cubins


def _ahead(spec: dict) -> tuple[dict, _Reader, dict | None] | None:
    """Open the report of "open" message `spec` now, and list its code if this reader is
    the coder (`list_code`: nvdisasm starts, and ncu_report parses every launch); the
    load's "open" that repeats `spec` finds it done. None when anything fails (the load
    then opens the report anew and says what is wrong)."""
    try:
        reader = _Reader(spec["open"], spec["name"], Path(spec["out"]), spec["reader"], units=spec.get("units", True))
        return spec, reader, reader.list_code() if spec.get("coder") else None
    except Exception:  # noqa: BLE001 - only speed is at stake here
        return None


def _prefetch(spec: dict, emit: Callable[..., None]) -> tuple[dict, _Reader] | None:
    """Read all of the report of "open" message `spec` (one reader: it gets every task),
    saying with `emit` when the metrics parts are staged; None when anything fails (the
    load then opens the report anew and reports it; what it stages again is the same)."""
    if spec.get("readers") != 1 or spec.get("reader") != 0:
        return None
    try:
        reader = _Reader(spec["open"], spec["name"], Path(spec["out"]), 0, units=spec.get("units", True))
        reader.list_code()  # nvdisasm works while the metrics are read
        for idx in range(reader.launches):
            reader.read(idx, METRICS)
        reader.stage_metrics()
        emit(staged={"spec": spec, "meta": dict(reader.meta)})
        for idx in range(reader.launches):
            reader.read(idx, CODE)
    except Exception:  # noqa: BLE001 - the load reads it again and says what is wrong
        return None
    return spec, reader


_SASS = SassListings()


def _metric(by_name: Callable[[str], Any], name: str) -> Any:
    """The metric `name` of an action, or _Damaged when the report cannot give it."""
    try:
        m = by_name(name)
    except TypeError:  # the name is not valid UTF-8: metric_by_name refuses it
        raise _Damaged() from None
    if m is None:
        raise _Damaged()
    return m


class _Reader:
    """One report open in a reader process: reads the launch parts it is given into
    staging columns, and writes them out at the end."""

    def __init__(self, path: str, name: str, out: Path, reader: int, *, units: bool = True) -> None:
        """Open report `path` (called `name` in messages) as reader number `reader`,
        which writes its tables into `out`. With `units` false, the metrics' units are
        not asked for (NULL), except the duration's, which scales duration_ns: the first
        IMetric.unit() of each metric costs ncu_report ~0.1 ms, ~0.13 s for a `--set full`
        launch's 2,200 metrics, a sixth of a one-launch analyze that never shows them."""
        try:
            import ncu_report  # only ever imported in the reader processes
        except ImportError as e:
            raise ReportError(f"{name}: cannot be read: the Python module ncu_report cannot be imported ({e}); "
                              "install it (`pip install ncu-report`) or put Nsight Compute's extras/python on "
                              "PYTHONPATH (`wsperf doctor` shows what it finds); nothing was stored") from None

        self.nr = ncu_report
        self.path, self.report, self.out, self.reader, self.units = path, name, out, reader, units
        im = ncu_report.IMetric
        # IMetric.as_double & co. only forward to the extension's flat functions; calling
        # those directly saves a Python frame per value, ~10% of a load.
        flat = getattr(ncu_report, "_ncu_report", None)
        as_double = getattr(flat, "IMetric_as_double", im.as_double)
        as_uint64 = getattr(flat, "IMetric_as_uint64", im.as_uint64)
        as_string = getattr(flat, "IMetric_as_string", im.as_string)
        self.getters = {
            im.ValueKind_DOUBLE: (as_double, FLOAT),
            im.ValueKind_FLOAT: (as_double, FLOAT),
            im.ValueKind_UINT32: (as_uint64, INT),
            im.ValueKind_UINT64: (as_uint64, INT),
            im.ValueKind_STRING: (as_string, TEXT),
        }
        self.uint_kinds = {im.ValueKind_UINT32, im.ValueKind_UINT64}
        self.metric_types = {im.MetricType_COUNTER: "counter", im.MetricType_RATIO: "ratio",
                             im.MetricType_THROUGHPUT: "throughput", im.MetricType_OTHER: "other"}
        # Older ncu_report modules (the one Nsight Compute 2025.3 ships in extras/python)
        # lack some of these names: map what the module has, so any ncu 2025.x reader works.
        ia = ncu_report.IAction
        self.workload_types = {getattr(ia, f"WorkloadType_{n.upper()}"): n
                               for n in ("kernel", "range", "graph", "cmdlist", "subgrid_schedule")
                               if hasattr(ia, f"WorkloadType_{n.upper()}")}
        self.msg_types = {int(t): t.name.lower() for t in getattr(ncu_report, "MsgType", ())}
        self.speedup_types = {int(t): t.name.lower() for t in getattr(ncu_report, "SpeedupType", ())}
        self.cols: dict[str, dict[str, list]] = {t: {c: [] for c, _ in cols} for t, cols in STAGES.items()}
        self.written: dict[str, int] = {}  # staged table -> its rows when it was written
        self.metric_keys: dict[str, int] = {}  # metric name -> key of its (name, unit, type) in metric_info
        self.metric_info: list[tuple[str, str, str]] = []
        # Keep the context alive as long as its ranges and actions are used: older
        # ncu_report modules (2025.3) free the report with it, and a range of a freed
        # report crashes on first use.
        self.context = ncu_report.load_report(path)
        self.slots = self._slots(self.context)
        self.launches = len(self.slots)
        self.meta: dict[str, Any] = {"total": self.launches, "first": None, "start_ns": None}
        self.pcs: dict[int, set[int]] = {}  # per launch whose metrics part was read here: its PCs
        self.done: dict[tuple[int, str], str] = {}  # (launch, part) read -> kernel name

    def read(self, idx: int, part: str) -> str:
        """Read part METRICS, CODE or ALL of launch `idx`; its kernel name. A part read
        before (a prefetch) is not read again."""
        parts = (METRICS, CODE) if part == ALL else (part,)
        if all((idx, p) in self.done for p in parts):
            return self.done[(idx, parts[0])]
        name = self._read(idx, part)
        self.done.update({(idx, p): name for p in parts})
        return name

    def _read(self, idx: int, part: str) -> str:
        ri, ai, rng = self.slots[idx]
        try:
            action = rng.action_by_idx(ai)
            name = action.name(self.nr.IAction.NameBase_FUNCTION) if action is not None else None
            if name is None:  # what the last result of a truncated report looks like
                raise _Damaged()
            pcs = None
            if part != CODE:
                first, start_ns, pcs = self._read_launch(action, idx, ri, ai)
                if self.meta["first"] is None or first["launch_idx"] < self.meta["first"]["launch_idx"]:
                    self.meta["first"] = first
                if start_ns is not None:
                    self.meta["start_ns"] = min(start_ns, self.meta["start_ns"] or start_ns)
                if part == METRICS:  # its code part may come here too: no need to find them again
                    self.pcs[idx] = pcs
            if part != METRICS:
                # Rules first: ncu_report's alone, they need not wait for nvdisasm.
                self._read_rules(action, idx)
                self._read_code(action, idx, pcs if pcs is not None else self.pcs.pop(idx, None))
        except _Damaged as e:
            raise ReportError(f"{self.report}: report is truncated or damaged: action {idx} unreadable; collect "
                              "it again (or check it by opening it in Nsight Compute)") from e
        return name

    def finish(self) -> dict:
        _SASS.forget(self.path)
        self._write()
        return self.meta

    def list_code(self) -> dict[str, tuple[str, list[str]]] | None:
        """Start nvdisasm on the launched functions whose code the load reads PC by PC
        (collectors/cubin.py): a launch with per-PC metrics and one function. None when
        it serves none; else what the other readers of the report read instead of listing
        them again (SassListings.borrow), {} where no launch has code to read (a --set
        basic report: nothing to disassemble, by nvdisasm or ncu_report)."""
        try:
            with open(self.path, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        if not any(k in blob for k in PC_METRIC_WORDS):
            # No launch has per-PC metrics (the names are in the report's bytes): spared
            # asking ncu_report, which parses every launch for it (~0.7 ms each).
            return {}
        del blob
        mangled = self.nr.IAction.NameBase_MANGLED
        names, needed = set(), False
        for _ri, ai, rng in self.slots:
            action = rng.action_by_idx(ai)
            if action is None or not any(n in PC_METRICS or n.startswith(PCSAMP_PREFIX) for n in action.metric_names()):
                continue
            needed = True
            fpcs = action.metric_by_name(FUNCTION_PCS)
            if fpcs is not None and fpcs.num_instances() == 1:
                names.add(action.name(mangled))
        return _SASS.start(self.path, names - {None}) if needed else {}

    def warm_up(self) -> bool:
        """Disassemble one instruction, to get ncu_report's set-up done; whether it was."""
        ri, ai, rng = self.slots[0]
        action = rng.action_by_idx(ai)
        starts = action.metric_by_name(FUNCTION_PCS) if action is not None else None
        if starts is None or not starts.num_instances() or starts.kind(0) not in self.uint_kinds:
            return False
        return bool(action.sass_by_pc(starts.as_uint64(0)))

    def _slots(self, ctx: Any) -> list[tuple[int, int, Any]]:
        if ctx.num_ranges() == 0:
            # What an empty, text or early-truncated file gives: a context with no ranges.
            raise ReportError(f"{self.report}: not an Nsight Compute report, or truncated before its first result "
                              "(ncu_report finds nothing in it); give a .ncu-rep written by ncu -o")
        slots = []
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            if rng is None:
                raise ReportError(f"{self.report}: report is truncated or damaged: range {ri} unreadable; collect it again")
            slots.extend((ri, ai, rng) for ai in range(rng.num_actions()))
        if not slots:
            raise ReportError(f"{self.report}: holds no profiled kernel launch (truncated, or ncu profiled nothing); "
                              "collect it again")
        return slots

    # -- the metrics part of a launch --------------------------------------------------

    def _read_launch(self, action: Any, idx: int, ri: int, ai: int) -> tuple[dict, int | None, set[int]]:
        """launches, metrics, sass_counts, stalls and opcodes rows of one launch; the
        device facts and the start timestamp for the reports row, and the PCs."""
        scalars, instanced, n_metrics = self._read_metrics(action, idx)
        ia = self.nr.IAction
        duration = _number(scalars.get(DURATION))
        scale = NS_PER_UNIT.get(self.metric_info[self.metric_keys[DURATION]][1]) if DURATION in self.metric_keys else None
        self._append("launches", [{
            "launch_idx": idx, "range_idx": ri, "action_idx": ai,
            "kernel_mangled": action.name(ia.NameBase_MANGLED), "kernel_demangled": action.name(ia.NameBase_DEMANGLED),
            "kernel_function": action.name(ia.NameBase_FUNCTION),
            "workload_type": self.workload_types.get(action.workload_type()),
            "num_metrics": n_metrics,
            "duration_ns": duration * scale if duration is not None and scale else None,
            **{col: _number(scalars.get(metric)) for col, metric in LAUNCH_METRICS.items()},
        }])

        fstarts = sorted(v for v in instanced.get(FUNCTION_PCS, ((), (), NONE))[1] if isinstance(v, int))
        ie = instanced.get("inst_executed")
        anchor = _anchor(fstarts, ie[0] if ie and ie[2] == INT else ())
        per_pc = {name: dict(zip(ids, values)) for name, (ids, values, islot) in instanced.items()
                  if islot == INT and _is_code(ids, anchor)}
        pcs: set[int] = set().union(*per_pc.values())
        if per_pc:
            self._sass_counts(idx, per_pc, pcs, fstarts)
        self._opcodes(idx, instanced)

        first = {"launch_idx": idx, "device_name": _text(scalars.get("device__attribute_display_name")),
                 "cc_major": scalars.get("device__attribute_compute_capability_major"),
                 "cc_minor": scalars.get("device__attribute_compute_capability_minor")}
        starts = [t for name, (ids, _, slot) in instanced.items()
                  if name.startswith(START_TIMESTAMP) and slot == INT for t in ids]
        return first, min(starts) if starts else None, pcs

    def _read_metrics(self, action: Any, idx: int) -> tuple[dict, dict, int]:
        """Every metric of the action into the metrics staging columns: the aggregate
        row, then one row per instance. Returns the aggregate values by name, the
        instanced metrics as name -> (correlation ids, values, id slot), and the number
        of metrics."""
        names = action.metric_names()
        if not names:
            raise _Damaged()
        c = self.cols["metrics"]
        c_key, c_inst, c_cid, c_cname = c["key"], c["instance"], c["correlation_id"], c["correlation_name"]
        c_f, c_i, c_s = c["v_float"], c["v_int"], c["value_string"]
        by_name, getters, keys = action.metric_by_name, self.getters, self.metric_keys
        scalars: dict[str, Any] = {}
        instanced: dict[str, tuple[list, list, int]] = {}
        rows = 0
        for name in names:
            m = _metric(by_name, name)
            got = getters.get(m.kind())
            value = got[0](m) if got is not None else None
            if not value and not m.has_value():  # held without a value: reads as 0, stored as NULL
                value = None
            slot = got[1] if value is not None else NONE
            scalars[name] = value
            # name, unit and type are stored once (the staged metric_info) and every row of
            # the metric refers to them by key; a metric's unit and type are the same in
            # every launch of a report, so they are asked for once.
            key = keys.get(name)
            if key is None:
                key = keys[name] = len(keys)
                unit = m.unit() if self.units or name == DURATION else None
                self.metric_info.append((name, unit, self.metric_types.get(m.metric_type(), "other")))
            k = m.num_instances()
            rows += 1 + k
            c_key.extend([key] * (k + 1))
            c_inst.append(None)
            c_cid.append(None)
            c_cname.append(None)
            c_f.append(value if slot == FLOAT else None)
            c_i.append(value if slot == INT else None)
            c_s.append(value if slot == TEXT else None)
            if not k:
                continue
            # An instance's kind can differ from the aggregate's (launch__occupancy_per_*:
            # double aggregate, integer instances; numa__*: integer aggregate, text instances).
            values, vslot = self._instances(m, k)
            ids_metric = m.correlation_ids()
            ids, islot = self._instances(ids_metric, k) if ids_metric is not None else ([None] * k, NONE)
            instanced[name] = (ids, values, islot)
            nones = [None] * k
            c_inst.extend(range(k))
            c_cid.extend(ids if islot == INT else nones)
            c_cname.extend(ids if islot == TEXT else nones)
            if vslot == MIXED:
                c_f.extend(v if isinstance(v, float) else None for v in values)
                c_i.extend(v if isinstance(v, int) else None for v in values)
                c_s.extend(v if isinstance(v, str) else None for v in values)
            else:
                c_f.extend(values if vslot == FLOAT else nones)
                c_i.extend(values if vslot == INT else nones)
                c_s.extend(values if vslot == TEXT else nones)
        c["launch_idx"].extend([idx] * rows)
        return scalars, instanced, len(names)

    def _instances(self, m: Any, k: int) -> tuple[list, int]:
        first = m.kind(0)
        got = self.getters.get(first)
        if got is None:
            return [None] * k, NONE
        if k > 1 and m.kind(k - 1) != first:
            # Not seen in ncu 2025.3 reports; read each instance by its own kind.
            return [m.value(j) for j in range(k)], MIXED
        get, slot = got
        return [get(m, j) for j in range(k)], slot

    def _sass_counts(self, idx: int, per_pc: dict[str, dict], pcs: set[int], fstarts: list[int]) -> None:
        """The counter columns of sass, and stalls, from the per-PC metrics."""
        stalls: dict[tuple[int, str], list[int]] = {}
        for name, by_pc in per_pc.items():
            if not name.startswith(STALL_PREFIX):
                continue
            reason, col = name[len(STALL_PREFIX):], 0
            if reason.endswith(NOT_ISSUED):
                reason, col = reason[: -len(NOT_ISSUED)], 1
            for pc, v in by_pc.items():
                if v:
                    stalls.setdefault((pc, reason), [0, 0])[col] += int(v)
        not_issued: dict[int, int] = {}
        for (pc, _), (_, ni) in stalls.items():
            not_issued[pc] = not_issued.get(pc, 0) + ni
        have_stalls = any(name.startswith(STALL_PREFIX) for name in per_pc)

        rows = []
        lowest = min(pcs)
        for pc in sorted(pcs):
            k = bisect_right(fstarts, pc) - 1
            start = fstarts[k] if k >= 0 else lowest
            row = {"launch_idx": idx, "pc": pc, "function_pc": start, "func_offset": pc - start,
                   "pcsamp_samples_not_issued": not_issued.get(pc, 0) if have_stalls else None}
            for col, metric in SASS_METRICS.items():
                # A PC that a collected metric does not list did not count for it: 0.
                row[col] = _integer(per_pc[metric].get(pc, 0)) if metric in per_pc else None
            rows.append(row)
        self._append("sass_counts", rows)
        self._append("stalls", [
            {"launch_idx": idx, "pc": pc, "reason": reason, "samples": s, "samples_not_issued": ni}
            for (pc, reason), (s, ni) in sorted(stalls.items())
        ])

    def _opcodes(self, idx: int, instanced: dict) -> None:
        """ncu's per-opcode counts (InstructionStats). Without them the parent sums
        sass.inst_executed by opcode instead (source 'sass')."""
        ids, values, islot = instanced.get(OPCODE_METRIC, ((), (), NONE))
        if islot != TEXT:
            return
        tids, tvalues, tslot = instanced.get(OPCODE_THREAD_METRIC, ((), (), NONE))
        threads = dict(zip(tids, tvalues)) if tslot == TEXT else {}
        self._append("opcodes", [
            {"launch_idx": idx, "opcode": op, "executed": _integer(v), "thread_executed": _integer(threads.get(op)),
             "source": "ncu"} for op, v in zip(ids, values) if v is not None
        ])

    # -- the code part of a launch -----------------------------------------------------

    def _read_code(self, action: Any, idx: int, pcs: set[int] | None = None) -> None:
        """sass_code rows: disassembly and source line of every PC that a per-PC metric
        lists (`pcs`, when the metrics part just read them in this process)."""
        if pcs is None:
            pcs = self._code_pcs(action)
        ordered = sorted(pcs)
        # The source lines first (ncu_report's), then the listing, which nvdisasm may still
        # be writing.
        lines = []
        for pc in ordered:
            info = action.source_info(pc)
            lines.append((info.file_name(), info.line()) if info is not None else (None, None))
        base, listing = self._listing(action) if pcs else (0, None)
        rows = []
        for pc, (file, line) in zip(ordered, lines):
            known = listing.get(pc - base) if listing is not None else None
            # What nvdisasm did not list (or a launch it cannot place) is ncu_report's to say.
            text = cubin.as_ncu(known, base) if known is not None else action.sass_by_pc(pc) or ""
            guard, full = cubin.split_sass(text)
            rows.append({"launch_idx": idx, "pc": pc, "opcode": full.split(".", 1)[0] if full else None,
                         "opcode_full": full, "guard": guard, "sass": text or None,
                         "source_file": file, "source_line": line})
        self._append("sass_code", rows)

    def _listing(self, action: Any) -> tuple[int, dict[int, str] | None]:
        """(start address, {offset: text}) of the launch's function by nvdisasm, where the
        launch runs one function; else (0, None)."""
        fpcs = action.metric_by_name(FUNCTION_PCS)
        if fpcs is None or fpcs.num_instances() != 1 or fpcs.kind(0) not in self.uint_kinds:
            return 0, None
        name = action.name(self.nr.IAction.NameBase_MANGLED)
        return fpcs.as_uint64(0), _SASS.function(self.path, name) if name else None

    def _code_pcs(self, action: Any) -> set[int]:
        """The PCs the per-PC metrics list, reading only correlation ids (the values are
        the metrics part's, maybe in another process)."""
        by_name, uint_kinds = action.metric_by_name, self.uint_kinds
        fpcs = by_name(FUNCTION_PCS)
        fstarts = sorted(fpcs.as_uint64(j) for j in range(fpcs.num_instances())) if fpcs is not None else []
        ie = by_name("inst_executed")
        ie_ids = ie.correlation_ids() if ie is not None and ie.num_instances() else None
        anchor = _anchor(fstarts, [ie_ids.as_uint64(j) for j in range(ie.num_instances())]
                         if ie_ids is not None and ie_ids.kind(0) in uint_kinds else ())
        pcs: set[int] = set()
        if anchor is None:
            return pcs
        for name in action.metric_names():
            m = _metric(by_name, name)
            k = m.num_instances()
            ids_metric = m.correlation_ids() if k else None
            # Look at the first id before reading them all: most instanced metrics are
            # indexed from 0 or by timestamp and fail at once.
            if ids_metric is None or ids_metric.kind(0) not in uint_kinds \
                    or not 0 <= ids_metric.as_uint64(0) - anchor < MAX_CODE_BYTES:
                continue
            ids = [ids_metric.as_uint64(j) for j in range(k)]
            if _is_code(ids, anchor):
                pcs.update(ids)
        return pcs

    def _read_rules(self, action: Any, idx: int) -> None:
        rows = []
        for k, rule in enumerate(action.rule_results()):
            msg = rule.rule_message() if rule.has_rule_message() else {}
            speedup = rule.speedup_estimation() if rule.has_speedup_estimation() else None
            rows.append({
                "launch_idx": idx, "rule_idx": k, "rule_id": rule.rule_identifier(),
                "section_id": rule.section_identifier(), "name": rule.name(),
                "title": msg.get("title"), "message": msg.get("message"),
                "msg_type": self.msg_types.get(msg["type"], str(msg["type"])) if "type" in msg else None,
                "speedup_type": self.speedup_types.get(speedup["type"], str(speedup["type"])) if speedup else None,
                "estimated_speedup": speedup["speedup"] if speedup else None,
            })
        self._append("ncu_rules", rows)

    # -- output -----------------------------------------------------------------------

    def _append(self, table: str, rows: list[dict]) -> None:
        for name, col in self.cols[table].items():
            col.extend(row[name] for row in rows)

    def stage_metrics(self) -> None:
        """Write the tables of the metrics parts now (a prefetch): the load inserts them
        while nvdisasm lists the code and this reader reads it."""
        self._write(METRICS_TABLES)

    def _write(self, tables: Iterable[str] = STAGES) -> None:
        # A metric's name, unit and type are staged once (metric_info); its rows name it by key.
        self.cols["metric_info"] = {"key": list(range(len(self.metric_info))),
                                    **{col: [info[i] for info in self.metric_info]
                                       for i, col in enumerate(("name", "unit", "metric_type"))}}
        for table in tables:
            rows = len(next(iter(self.cols[table].values())))
            if self.written.get(table) == rows:  # written before, and no row came since
                continue
            try:
                longest = staging.write(staging.stage_file(self.out, table, self.reader), table, self.cols[table])
                self.meta["longest_row"] = max(self.meta.get("longest_row", 0), longest)
            except staging.StagingError as e:
                raise ReportError(f"{self.report}: report is damaged: {e}; collect it again") from e
            self.written[table] = rows


def _anchor(fstarts: list[int], inst_executed_pcs: Iterable[int]) -> int | None:
    """Lowest address of the launch's code: its first function's start, else the lowest
    PC inst_executed lists; None when neither is known (then no metric is per-PC)."""
    return fstarts[0] if fstarts else min(inst_executed_pcs, default=None)


def _is_code(ids: list, anchor: int | None) -> bool:
    return anchor is not None and bool(ids) and anchor <= min(ids) and max(ids) - anchor < MAX_CODE_BYTES


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def _integer(v: Any) -> int | None:
    return int(round(v)) if isinstance(v, (int, float)) else None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


if __name__ == "__main__":
    if sys.argv[1:] != ["--serve"]:
        sys.exit("usage: python -m wsperf.collectors.ncu_reader --serve  (wsperf's report reader; see collectors/ncu.py)")
    sys.exit(_serve())
