#!/usr/bin/env bash
# The nightly recipe of examples/ run for real on a machine with an NVIDIA GPU (sm_90a),
# nvcc, compute-sanitizer and ncu, on the ws_stream fixture kernel: three "nights"
# collected with `wsperf collect` (sanitizer first, then ncu, 6 launches each) and
# recorded into one history store, then compared as the gate does:
#   night-1  ws_stream healthy          (the base)
#   night-2  ws_stream healthy again    -> compare night-1 night-2 must exit 0
#   night-3  ws_stream serialized       -> compare night-2 night-3 must exit 1 (slower,
#                                          serialized-roles newly confirmed)
# plus the pull-request form on the bundles (Markdown). Prints PASS/FAIL per step and
# exits 1 when any fails. About 2-3 minutes.
#   bash scripts/gpu-nightly.sh        (work under $WORK, default /tmp/wsperf-nightly)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/site-env.sh

out=${WORK:-/tmp/wsperf-nightly}
build=${BUILD:-/tmp/wsperf-nightly-build}
rm -rf "$out" && mkdir -p "$out" "$build"
# Per-thread release of each stage (-DWS_RELEASE_PER_THREAD=1): racecheck reports the
# default build's __syncwarp + lane-0 release as a shared-memory race (fixtures/README.md,
# "racecheck and the one-lane release"), and collect rightly stops at any sanitizer error.
nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -lineinfo -DWS_RELEASE_PER_THREAD=1 -o "$build/ws_stream" \
  fixtures/src/ws_stream.cu || exit 1
db="$out/history.duckdb"
fail=0
check() {  # what, expected exit, actual exit, log
  if [ "$2" = "$3" ]; then echo "PASS $1 (exit $3)"; else echo "FAIL $1: exit $3, expected $2 (see $4)"; fail=1; fi
}

night() {  # n, variant
  local b="$out/bundle-$1"
  wsperf collect --out "$b" --launch-count 6 --kernel ws_stream -- "$build/ws_stream" "$2" 7 \
    >"$out/collect-$1.txt" 2>&1
  check "collect night-$1 ($2)" 0 $? "$out/collect-$1.txt"
  wsperf analyze "$b" --db "$db" --tag nightly --label "night-$1" --branch main --commit "fixture-$2" \
    --format json >"$out/analyze-$1.json" 2>"$out/analyze-$1.err"
  check "record night-$1" 0 $? "$out/analyze-$1.err"
}
night 1 healthy
night 2 healthy
night 3 serialized

wsperf compare --db "$db" night-1 night-2 --format json --out "$out/compare-1-2.json" 2>"$out/compare-1-2.err"
check "compare night-1 night-2 (re-collection)" 0 $? "$out/compare-1-2.err"
wsperf compare --db "$db" night-2 night-3 --format junit --out "$out/compare-2-3.xml" 2>"$out/compare-2-3.err"
check "compare night-2 night-3 (serialized)" 1 $? "$out/compare-2-3.err"
grep -q 'hypothesis:serialized-roles' "$out/compare-2-3.xml" && grep -q '<failure' "$out/compare-2-3.xml" \
  || { echo "FAIL junit lacks the serialized-roles failure"; fail=1; }
wsperf compare "$out/bundle-1" "$out/bundle-3" --format markdown --out "$out/comment.md" 2>"$out/comment.err"
check "pull-request compare of the bundles" 1 $? "$out/comment.err"
wsperf history --db "$db" --tag nightly >"$out/history.txt" 2>&1
check "history" 0 $? "$out/history.txt"

echo "---- history"; cat "$out/history.txt"
echo "---- PR comment"; head -20 "$out/comment.md"
[ $fail = 0 ] && echo "ALL PASS" || echo "SOME FAILED"
exit $fail
