#!/usr/bin/env bash
# Replay passes ncu needs for what `wsperf collect` profiles, against `--set full`, on a
# real warp-specialized kernel (fixtures/src/ws_stream.cu, healthy) and the wgmma GEMM
# (fixtures/src/gemm.cu). Runs on a machine with an NVIDIA GPU, ncu and nvcc, from the
# repository root, with wsperf importable (as scripts/gpu-tests.sh installs it).
# Prints one line per kernel and the ratio (target: at most 1/3 of full).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/site-env.sh
build=${BUILD:-/tmp/wsperf-passes}
mkdir -p "$build"
arch=(-gencode=arch=compute_90a,code=sm_90a)
nvcc "${arch[@]}" -O3 -lineinfo -o "$build/ws_stream" fixtures/src/ws_stream.cu 2>/dev/null
nvcc "${arch[@]}" -O3 -lineinfo -o "$build/gemm" fixtures/src/gemm.cu 2>/dev/null
read -r -a wsperf_args <<<"$(python3 -c 'from wsperf.collectors.collect import ncu_profile_args; print(" ".join(ncu_profile_args()))')"
passes() {  # ncu options..., then -- program args
  ncu --clock-control none -c 1 "$@" 2>&1 | grep -o '[0-9]* passes' | head -1 | cut -d' ' -f1
}
printf '%-28s %6s %6s %7s\n' kernel full wsperf ratio
for case in "ws_stream healthy:ws_stream" "gemm wgmma_tma:gemm_"; do
  prog=${case%%:*}; regex=${case##*:}
  read -r -a cmd <<<"$build/$prog"
  full=$(passes --set full -k "regex:$regex" -- "${cmd[@]}")
  ours=$(passes "${wsperf_args[@]}" -k "regex:$regex" -- "${cmd[@]}")
  printf '%-28s %6s %6s %7s\n' "$prog" "$full" "$ours" "$(python3 -c "print(f'{$ours/$full:.2f}')")"
done
