"""Soak one store: concurrent writers and readers, killed at random, checked after each kill.

    python benchmarks/soak_store.py [--seconds 120] [--writers 3] [--readers 2] [--kill-every 2.0]

Writers run `wsperf analyze REPORT --db STORE --label ...` over the real fixture
reports, readers `wsperf history` and `wsperf sql` on the same store, all as real
processes, restarted as they end. Every `--kill-every` seconds on average one running
process gets SIGKILL or SIGTERM (at random). After each kill the store is opened
read-only (waiting for the lock like any wsperf) and checked whole
(`store.check_store`: every table read, every reference resolved), and at the end:

- every writer that exited 0 has its run in the store, with its reports;
- no run is recorded without its reports, no report without its launches;
- a writer ended by SIGTERM exits 143 and leaves no temporary copy behind (SIGKILL
  cannot clean up: those copies are counted, not failed);
- no process outlives the soak.

Exit status 1 when any check fails. Runs on a CPU machine with the fixture reports.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import ALL_REPORTS, wsperf_exe  # noqa: E402
from wsperf.collectors.errors import StoreError  # noqa: E402
from wsperf.collectors.store import check_store, open_store  # noqa: E402


class Soak:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.db = work / "soak.duckdb"
        self.tmp = work / "tmp"  # the children's TMPDIR: what a killed load leaves is visible here
        self.tmp.mkdir()
        self.rnd = random.Random(args.seed)
        self.procs: dict[subprocess.Popen, tuple[str, str]] = {}  # process -> (role, label)
        self.stats: collections.Counter = collections.Counter()
        self.ok_labels: set[str] = set()
        self.problems: list[str] = []
        self.check_s: list[float] = []
        self.serial = 0

    def start(self, role: str) -> None:
        self.serial += 1
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        if role == "writer":
            label = f"soak-{self.serial}"
            report = self.rnd.choice(ALL_REPORTS)
            argv = ["analyze", str(report), "--db", str(self.db), "--label", label, "--lock-timeout", "600"]
        else:
            label = ""
            argv = self.rnd.choice([["history", "--db", str(self.db), "--format", "csv", "--lock-timeout", "600"],
                                    ["sql", "SELECT count(*) FROM runs", "--db", str(self.db), "--format", "csv"]])
        p = subprocess.Popen([wsperf_exe(), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        self.procs[p] = (role, label)
        self.stats[f"{role}s started"] += 1

    def reap(self) -> None:
        for p in [p for p in self.procs if p.poll() is not None]:
            role, label = self.procs.pop(p)
            err = p.stderr.read().decode("utf-8", "replace") if p.stderr else ""
            p.stderr.close()
            if "Traceback" in err:
                self.problems.append(f"{role} {label}: traceback:\n{err[-1500:]}")
            if p.returncode == 0:
                self.stats[f"{role}s ok"] += 1
                if role == "writer":
                    self.ok_labels.add(label)
            elif p.returncode in (-signal.SIGKILL, 128 + signal.SIGTERM, -signal.SIGTERM):
                # -SIGTERM: the signal came while Python was still importing, before wsperf
                # code ran (nothing to clean up yet).
                how = {-signal.SIGKILL: "SIGKILL", -signal.SIGTERM: "SIGTERM at start-up"}.get(p.returncode,
                                                                                             "SIGTERM -> 143")
                self.stats[f"{role}s killed ({how})"] += 1
            elif p.returncode == 2 and role == "reader" and "no runs are recorded" in err:
                self.stats["readers before the first run"] += 1
            else:
                self.stats[f"{role}s exit {p.returncode}"] += 1
                if p.returncode != 2 or err.count("Error:") != 1:
                    self.problems.append(f"{role} {label}: exit {p.returncode}: {err[-500:]}")

    def kill_one(self) -> None:
        running = [p for p in self.procs if p.poll() is None]
        if not running:
            return
        p = self.rnd.choice(running)
        sig = self.rnd.choice([signal.SIGKILL, signal.SIGTERM])
        p.send_signal(sig)
        self.stats[f"sent {sig.name}"] += 1
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.problems.append(f"{self.procs[p]} did not end within 60 s of {sig.name}")
            p.kill()
            p.wait()
        if sig == signal.SIGTERM and p.returncode not in (128 + signal.SIGTERM, -signal.SIGTERM, 0, 2):
            self.problems.append(f"{self.procs[p]}: SIGTERM gave exit {p.returncode}, not 143")
        self.reap()
        self.check()

    def check(self) -> None:
        if not self.db.exists():
            return
        t0 = time.monotonic()
        try:
            con = open_store(self.db, read_only=True, lock_timeout=600, on_wait=lambda m: None)
        except StoreError as e:
            self.problems.append(f"store cannot be opened after a kill: {e}")
            return
        try:
            found = check_store(con)
            self.problems += [f"after a kill: {f}" for f in found]
            labels = {r[0] for r in con.execute("SELECT label FROM runs").fetchall()}
            lost = self.ok_labels - labels
            if lost:
                self.problems.append(f"runs reported recorded (exit 0) but absent: {sorted(lost)}")
            self.stats["runs in the store"] = len(labels)
        except StoreError as e:
            self.problems.append(f"store unreadable after a kill: {e}")
        finally:
            con.close()
        self.stats["store checks"] += 1
        self.check_s.append(time.monotonic() - t0)

    def run(self) -> int:
        a = self.args
        end = time.monotonic() + a.seconds
        next_kill = time.monotonic() + self.rnd.expovariate(1 / a.kill_every)
        while time.monotonic() < end:
            self.reap()
            roles = collections.Counter(r for r, _ in self.procs.values())
            for role, want in (("writer", a.writers), ("reader", a.readers)):
                for _ in range(want - roles[role]):
                    self.start(role)
            if time.monotonic() >= next_kill:
                self.kill_one()
                next_kill = time.monotonic() + self.rnd.expovariate(1 / a.kill_every)
            time.sleep(0.05)
        for p in list(self.procs):  # let the last ones finish
            try:
                p.wait(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.problems.append(f"{self.procs[p]} still running 600 s after the soak")
        self.reap()
        self.check()
        left = [d for d in self.tmp.iterdir()]
        self.stats["temporary dirs left (SIGKILL only)"] = len(left)
        if len(left) > self.stats["sent SIGKILL"]:
            self.problems.append(f"{len(left)} temporary dirs left, more than the {self.stats['sent SIGKILL']} SIGKILLs")
        return 1 if self.problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="how long to soak (default 120)")
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--kill-every", type=float, default=2.0, help="mean seconds between kills (default 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the store and TMPDIR (printed) for inspection")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wsperf-soak-"))
    t0 = time.monotonic()
    soak = Soak(args, work)
    try:
        code = soak.run()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - t0
    print(f"soak of {took:.0f} s: {args.writers} writers, {args.readers} readers, a kill every ~{args.kill_every:g} s "
          f"(seed {args.seed}){f'; kept in {work}' if args.keep else ''}")
    for k, v in sorted(soak.stats.items()):
        print(f"  {k:40} {v}")
    if soak.check_s:
        print(f"  store check after a kill: median {sorted(soak.check_s)[len(soak.check_s) // 2]:.2f} s, "
              f"max {max(soak.check_s):.2f} s (includes waiting for the writer's lock)")
    print(f"problems: {len(soak.problems)}")
    for p in soak.problems[:20]:
        print("  " + p.replace("\n", "\n    "))
    return code


if __name__ == "__main__":
    sys.exit(main())
