#!/usr/bin/env bash
# Which compute-sanitizer scoping forms work where a tool fails inside itself under a
# kernel filter: the measurement behind collect's fallback order (collectors/collect.py,
# FALLBACKS). On the GPU machine, for each tool given (default racecheck) and each form
# below, runs the tool on the PyTorch program that mixes cuBLAS and cuDNN with a Gluon
# kernel (fixtures/src/torch_gluon_mix.py) and prints one row: the form, the exit
# status, the seconds, and the tool's own failure line or its summary.
#   bash scripts/gpu-filter-probe.sh [TOOL...]
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/site-env.sh
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
work=${WORK:-/tmp/wsperf-filter-probe}
rm -rf "$work" && mkdir -p "$work"
export TRITON_CACHE_DIR=$work/triton
python3 fixtures/src/torch_gluon_mix.py >"$work/plain.txt" 2>&1 || { echo "the plain run failed:"; tail -5 "$work/plain.txt"; exit 1; }
k=gluon_ws_rowsum
declare -a forms=(
  "kne=$k|--kernel-name kne=$k"
  "kns=$k|--kernel-name kns=$k"
  "regex=$k|--kernel-name regex=$k"
  "kne=$k, 1 launch|--kernel-name kne=$k --launch-count 1"
  "kne=$k + kns=nvjet|--kernel-name kne=$k --kernel-name kns=nvjet"
  "all but kns=nvjet|--kernel-name-exclude kns=nvjet"
  "all kernels|"
)
for tool in "${@:-racecheck}"; do
  for f in "${forms[@]}"; do
    label=${f%%|*}; args=${f#*|}
    t0=$SECONDS
    # shellcheck disable=SC2086
    "$sanitizer" --tool "$tool" $args --show-backtrace no --print-limit 20 -- python3 fixtures/src/torch_gluon_mix.py \
        >"$work/out.txt" 2>&1
    rc=$?
    what=$(grep -m1 -E "Internal Sanitizer Error|^=+ Error:|ERROR SUMMARY|RACECHECK SUMMARY" "$work/out.txt" | sed 's/^=* *//')
    printf '%-10s %-34s rc=%-3s %4ss  %s\n' "$tool" "$label" "$rc" "$((SECONDS - t0))" "${what:-?}"
  done
done
