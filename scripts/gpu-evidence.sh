#!/usr/bin/env bash
# The joined evidence path on real repros, end to end on a machine with an NVIDIA GPU
# (Hopper, sm_90a), nvcc, compute-sanitizer, cuda-gdb, ncu, torch and triton: builds the
# fixture programs and runs `wsperf collect` on each, then `wsperf analyze BUNDLE -f json`
# offline, checking the outcome and the evidence (PASS/FAIL table; exit 1 when a row
# fails). The bundles (without their DuckDB file and Nsight Compute reports) are packed
# into $OUT/evidence.tar.gz when OUT is set: they are the committed fixtures in
# fixtures/evidence/.
#   bash scripts/gpu-evidence.sh             (bundles under $WORK, default /tmp/wsperf-evidence)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/site-env.sh

work=${WORK:-/tmp/wsperf-evidence}
build=${BUILD:-/tmp/wsperf-evidence-build}
rm -rf "$work" && mkdir -p "$work" "$build"
t_start=$SECONDS
ptx=(-gencode "arch=compute_90a,code=[sm_90a,compute_90a]")  # SASS and PTX embedded
sass=(-gencode arch=compute_90a,code=sm_90a)                 # SASS only: the worksheet needs --source
pids=()
nvcc "${ptx[@]}" -O3 -lineinfo -o "$build/ws_deadlock" fixtures/src/broken/ws_deadlock.cu & pids+=($!)
nvcc "${sass[@]}" -O3 -lineinfo -o "$build/ws_phase" fixtures/src/broken/ws_phase.cu & pids+=($!)
nvcc "${ptx[@]}" -O3 -o "$build/ws_deadlock_nolines" fixtures/src/broken/ws_deadlock.cu & pids+=($!)  # no -lineinfo
nvcc "${ptx[@]}" -O3 -lineinfo -o "$build/release_warp_synced" fixtures/src/ws_stream.cu & pids+=($!)
nvcc "${ptx[@]}" -O3 -lineinfo -DWS_RELEASE_PER_THREAD=1 -o "$build/release_per_thread" fixtures/src/ws_stream.cu & pids+=($!)
nvcc "${ptx[@]}" -O3 -lineinfo -DWS_RELEASE_UNSYNCED=1 -o "$build/release_unsynced" fixtures/src/ws_stream.cu & pids+=($!)
# The same three without PTX (code=sm_90a only): the release is classified from the SASS.
nvcc "${sass[@]}" -O3 -lineinfo -o "$build/release_warp_synced_sass" fixtures/src/ws_stream.cu & pids+=($!)
nvcc "${sass[@]}" -O3 -lineinfo -DWS_RELEASE_PER_THREAD=1 -o "$build/release_per_thread_sass" fixtures/src/ws_stream.cu & pids+=($!)
nvcc "${sass[@]}" -O3 -lineinfo -DWS_RELEASE_UNSYNCED=1 -o "$build/release_unsynced_sass" fixtures/src/ws_stream.cu & pids+=($!)
# A bulk-copy ring: its missing expect_tx and a collective inside a role both hang.
nvcc "${ptx[@]}" -O3 -lineinfo -DWS_BULK_MISSING_TX -o "$build/bulk_missing_tx" fixtures/src/broken/ws_bulk.cu & pids+=($!)
nvcc "${ptx[@]}" -O3 -lineinfo -DWS_BULK_COLLECTIVE -o "$build/bulk_collective" fixtures/src/broken/ws_bulk.cu & pids+=($!)
wait "${pids[@]}"

declare -A expect cmd
names=()
run() {  # name, expected exit code, collect arguments... (ONLY="a b": only those)
  local name=$1 code=$2; shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  names+=("$name")
  expect[$name]=$code
  cmd[$name]="wsperf collect --out $work/$name $*"
  ( t0=$SECONDS; wsperf collect --out "$work/$name" "$@" >"$work/$name.collect.txt" 2>&1; echo "$? $((SECONDS - t0))" \
      >"$work/$name.rc" ) &
}
run deadlock_ptx 4 --timeout 20 -- "$build/ws_deadlock"
run phase_source 4 --timeout 20 --source fixtures/src/broken/ws_phase.cu -- "$build/ws_phase"
# Without line info: the hang is tied to its barrier by the kernel's name and the SASS
# wait's shared-memory offset (Triton), or to the kernel's only flagged barrier (C++).
run deadlock_nolines 4 --timeout 20 -- "$build/ws_deadlock_nolines"
run gluon_count2_nolines 4 --timeout 40 -- env TRITON_DISABLE_LINE_INFO=1 python3 fixtures/src/gluon_ws_rowsum.py \
    --bug count2
run gluon_phase_nolines 4 --timeout 40 -- env TRITON_DISABLE_LINE_INFO=1 python3 fixtures/src/gluon_ws_rowsum.py \
    --bug phase
# Deadlocks whose barriers live in static shared variables: their words are read at the
# addresses ptxas gives them (analyses/smem_layout.py).
run bulk_missing_tx 4 --timeout 20 -- "$build/bulk_missing_tx"
run bulk_collective 4 --timeout 20 -- "$build/bulk_collective"
run release_per_thread_sass 0 --kernel ws_stream --timeout 60 -- "$build/release_per_thread_sass" healthy
run release_warp_synced_sass 3 --kernel ws_stream --timeout 60 -- "$build/release_warp_synced_sass" healthy
run release_unsynced_sass 3 --kernel ws_stream --timeout 60 --accept-race warp-synced-single-lane-release \
    -- "$build/release_unsynced_sass" healthy
run release_per_thread 0 --kernel ws_stream --timeout 60 -- "$build/release_per_thread" healthy
run release_warp_synced 3 --kernel ws_stream --timeout 60 -- "$build/release_warp_synced" healthy
run release_warp_synced_accepted 0 --kernel ws_stream --timeout 60 --accept-race warp-synced-single-lane-release \
    -- "$build/release_warp_synced" healthy
run release_unsynced 3 --kernel ws_stream --timeout 60 --accept-race warp-synced-single-lane-release \
    -- "$build/release_unsynced" healthy
# The time target (scripts/evidence_check.py, TIME_TARGET_S): the 4096^3 two-launch TMA
# matmul, all four tools scoped to its kernel and the profile, run alone so that no other
# row shares the GPU while it is timed.
wait
run triton 0 --timeout 120 -- python3 fixtures/src/triton_matmul.py
wait
# Triton 3.6's own warp specialization with a 5-stage ring answers NaN (4 stages are right):
# the gate stops it (fixtures/evidence/README.md says what the race records are).
run triton_ws_race 3 --timeout 300 -- python3 fixtures/src/triton_ws_matmul.py ws --stages 5 --n 1024
# The same at 4 stages answers right: racecheck's records on Triton's partition table are the
# compiler's dispatch protocol, a caveat; and a correct Gluon warp-specialized kernel, profiled.
run triton_ws4 0 --no-profile --timeout 300 -- python3 fixtures/src/triton_ws_matmul.py ws --stages 4 --n 1024
# Triton 3.6's own sm_90 warp_specialize with BK = 128 copies each block as two boxes, one
# elected lane in each of two warps (fixtures/src/triton_tma/README.md); BK = 64, one box.
# Both answer right.
run triton_split 0 --no-profile --timeout 300 -- python3 fixtures/src/triton_tma/triton_ws_tma.py --run triton_ws_sm90_split \
    --timeout 300 --n 1024
run triton_split_ok 0 --no-profile --timeout 300 -- python3 fixtures/src/triton_tma/triton_ws_tma.py \
    --run triton_ws_sm90_desc --n 1024
run gluon_ws_rowsum 0 --timeout 300 -- python3 fixtures/src/gluon_ws_rowsum.py
# Three partitions (TMA load warp, four compute warps, TMA store warp; two rings): clean,
# profiled, its partitions named with their jobs; with the store made 8 times as long, the
# store warp is the partition the others wait for.
run gluon_3part 0 --timeout 300 -- python3 fixtures/src/gluon_ws_3part.py --rows 4096
run gluon_3part_slow 0 --timeout 300 -- python3 fixtures/src/gluon_ws_3part.py --rows 4096 --slow-store
# Its planted deadlocks: a hang in JIT code, mapped with the cubins Triton's cache kept.
run gluon_count2 4 --timeout 40 -- python3 fixtures/src/gluon_ws_rowsum.py --bug count2
run gluon_phase 4 --timeout 40 -- python3 fixtures/src/gluon_ws_rowsum.py --bug phase
# A real race on a ring stage (the consumer releases it before reading it): still a stop.
run gluon_early_release 3 --timeout 300 -- python3 fixtures/src/gluon_ws_rowsum.py --bug early_release
# The Gluon kernel inside a PyTorch program (bf16 matmul, SDPA): scoped to it by default and
# by --kernel; racecheck fails inside itself under a kernel filter there and runs again unscoped.
run torch_gluon 0 --timeout 300 -- python3 fixtures/src/torch_gluon_mix.py
run torch_gluon_kernel 0 --kernel gluon_ws_rowsum --timeout 300 -- python3 fixtures/src/torch_gluon_mix.py
# The same loop without warp_specialize (device-side descriptors too): initcheck's reads
# are the atomic exchanges that publish each tensor map, read from the kept cubin: clean.
run triton_plain_desc 0 --no-profile --timeout 300 -- python3 fixtures/src/triton_ws_matmul.py plain --n 1024
# A torch extension built at run time (load_inline) next to cuBLAS and cuDNN: scoped to its
# kernel by default, all four tools; initcheck under the filter reports the reads of a tensor
# an unchecked ATen kernel wrote and runs once more checking every kernel. The same extension
# with a planted shared-memory race still stops.
run torch_ext 0 --timeout 300 -- python3 fixtures/src/torch_ext_mix.py
run torch_ext_race 3 --tools memcheck,racecheck,synccheck --timeout 300 -- python3 fixtures/src/torch_ext_mix.py \
    --bug race
run torch_vendor 0 --all-kernels --tools racecheck --no-profile --timeout 120 -- python3 fixtures/src/torch_mix.py
run torch_vendor4096 0 --all-kernels --tools racecheck --no-profile --timeout 120 -- python3 fixtures/src/torch_mix.py --n 4096
run torch_filter 0 --kernel scale_rows --tools initcheck --no-profile --timeout 120 -- python3 fixtures/src/torch_mix.py
# JIT modules other than Triton's: a TVM TIRx kernel in a PyTorch program (kept through
# wsperf's sitecustomize; with a planted shared-memory race), and a CuTe DSL TMA ring with its
# planted count and phase deadlocks (kept through the DSL's dump). Each needs its package on
# PYTHONPATH (scripts/gpu-jit.sh carries them); a row whose package is missing is left out.
if python3 -c "import tvm_tirx" 2>/dev/null; then
  run tvm_block_sum 0 --timeout 300 -- python3 fixtures/src/tvm/tvm_block_sum_mix.py
  run tvm_block_sum_race 3 --tools memcheck,racecheck --timeout 300 -- python3 fixtures/src/tvm/tvm_block_sum_mix.py \
      --bug race
fi
if python3 -c "import cutlass.cute" 2>/dev/null; then
  run cute_ring 0 --timeout 300 -- python3 fixtures/src/cute/cute_ws_ring_run.py
  run cute_ring_count 4 --timeout 60 -- python3 fixtures/src/cute/cute_ws_ring_run.py --variant cute_ws_ring_count
  run cute_ring_phase 4 --timeout 60 -- python3 fixtures/src/cute/cute_ws_ring_run.py --variant cute_ws_ring_phase
fi
wait

fail=0
rows=()
for name in "${names[@]}"; do
  read -r rc secs <"$work/$name.rc"
  wsperf analyze "$work/$name" --format json >"$work/$name.analyze.json" 2>"$work/$name.analyze.err"
  arc=$?
  detail=$(python3 scripts/evidence_check.py "$name" "$work/$name" "$work/$name.analyze.json" "$secs" 2>&1)
  ok=PASS
  [ "$rc" = "${expect[$name]}" ] || { ok=FAIL; detail="collect exit $rc, expected ${expect[$name]}; $detail"; }
  [ "$arc" = "${expect[$name]}" ] || [ "$name" = torch_filter ] || { ok=FAIL; detail="analyze exit $arc; $detail"; }
  case "$detail" in FAIL*) ok=FAIL ;; esac
  [ "$ok" = PASS ] || fail=1
  rows+=("$(printf '%-30s %-5s %4ss  %s' "$name" "$ok" "$secs" "$detail")")
done
printf '%s\n' "${rows[@]}"
if [ -n "${OUT:-}" ]; then
  tar -C "$work" --exclude='*.duckdb' --exclude='*.ncu-rep' --exclude='*.duckdb.wal' -czf "$OUT/evidence.tar.gz" .
fi
echo "$([ $fail = 0 ] && echo ALL PASS || echo SOME FAILED) in $((SECONDS - t_start)) s"
exit $fail
