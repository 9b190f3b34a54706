#!/usr/bin/env bash
# End-to-end `wsperf collect` on a machine with an NVIDIA GPU (Hopper, sm_90a), nvcc,
# compute-sanitizer, cuda-gdb and ncu: builds the fixtures in fixtures/src/broken and
# runs collect on each, checking the exit code (0 clean / 3 correctness / 4 deadlock),
# what the bundle holds, and that `wsperf analyze BUNDLE` offline gives the same
# outcome. Prints a PASS/FAIL table; exits 1 when any row fails. About 3-5 minutes.
#   bash scripts/gpu-e2e.sh            (bundles under $WORK, default /tmp/wsperf-e2e)
# wsperf is installed as scripts/gpu-tests.sh installs it.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/site-env.sh

out=${WORK:-/tmp/wsperf-e2e}
build=${BUILD:-/tmp/wsperf-e2e-build}
limit=${TIMEOUT_S:-30}   # --timeout: each run of the repro; ws_deadlock hangs for this long
rm -rf "$out" && mkdir -p "$out" "$build"
t_start=$SECONDS
declare -A expect=([clean]=0 [oob_write]=3 [smem_race]=3 [uninit_read]=3 [barrier_misuse]=3 [ws_deadlock]=4)
declare -A class=([oob_write]=out-of-bounds-or-misaligned [smem_race]=race-between-roles
                  [uninit_read]=uninitialized-read [barrier_misuse]=barrier-misuse)
order=(clean oob_write smem_race uninit_read barrier_misuse ws_deadlock)
rows=()
fail=0
row() {  # name, PASS|FAIL, detail
  rows+=("$(printf '%-16s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = PASS ] || fail=1
}

pids=()
for f in "${order[@]}"; do
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -lineinfo -o "$build/$f" "fixtures/src/broken/$f.cu" \
    >"$out/$f.build.txt" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"

for f in "${order[@]}"; do
  if [ ! -x "$build/$f" ]; then row "$f" FAIL "build failed: $(tail -c 300 "$out/$f.build.txt")"; continue; fi
  b="$out/$f"
  t0=$SECONDS
  wsperf collect --out "$b" --timeout "$limit" --kernel ws_pipeline -- "$build/$f" >"$out/$f.collect.txt" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  why=""
  [ "$rc" = "${expect[$f]}" ] || why="collect exit $rc, expected ${expect[$f]} (see $out/$f.collect.txt)"
  [ -f "$b/bundle.json" ] && [ -f "$b/environment.json" ] || why="${why:+$why; }no bundle.json/environment.json"
  case "${expect[$f]}" in
    0) [ -s "$b/profile/report.ncu-rep" ] || why="${why:+$why; }no profile/report.ncu-rep"
       for t in memcheck racecheck initcheck synccheck; do
         [ -s "$b/sanitizer/$t.xml" ] || why="${why:+$why; }no sanitizer/$t.xml"
       done ;;
    3) [ ! -e "$b/profile/report.ncu-rep" ] || why="${why:+$why; }profiled a broken kernel"
       got=$(wsperf analyze "$b" --format json 2>/dev/null \
             | python3 -c 'import json,sys; print(",".join(sorted(h["handoff"] for h in json.load(sys.stdin)["handoffs"])))')
       [ "$got" = "${class[$f]}" ] || why="${why:+$why; }handoff classes '$got', expected '${class[$f]}'" ;;
    4) [ -s "$b/hang/cudagdb.txt" ] && [ -s "$b/hang/sass.txt" ] || why="${why:+$why; }no hang/cudagdb.txt or hang/sass.txt"
       got=$(wsperf analyze "$b" --format json 2>/dev/null \
             | python3 -c 'import json,sys; d=json.load(sys.stdin); print(",".join(sorted(str(g["role"]) for g in d["groups"])), d["resident_warps"])')
       [ "$got" = "consumer,producer 6" ] || why="${why:+$why; }waits per role '$got', expected 'consumer,producer 6'" ;;
  esac
  wsperf analyze "$b" >/dev/null 2>&1
  arc=$?
  [ "$arc" = "${expect[$f]}" ] || why="${why:+$why; }offline analyze exit $arc"
  if [ -z "$why" ]; then row "$f" PASS "exit $rc in ${secs}s"; else row "$f" FAIL "$why"; fi
done

echo
echo "wsperf collect end-to-end ($((SECONDS - t_start)) s; bundles in $out)"
printf '%-16s %-5s %s\n' fixture result detail
printf '%s\n' "${rows[@]}"
[ "$fail" = 0 ] && echo "ALL PASS" || echo "SOME FAILED"
exit "$fail"
