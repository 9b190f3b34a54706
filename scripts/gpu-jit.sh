#!/usr/bin/env bash
# The JIT rows of scripts/gpu-evidence.sh (a TVM TIRx kernel, CuTe DSL rings) on a GPU
# machine whose image has neither package. Their wheels, unpacked and packed again as
# .tar.xz for the machine's Python (apache-tvm-tirx 0.1.0a4 with apache-tvm-ffi and its
# ORC JIT: 45 MB; nvidia-cutlass-dsl 4.8.1 for CPython 3.12 with -libs-base, -libs-cu12,
# -libs-core, cuda-bindings, cuda-pathfinder and protobuf, their C++ sources and the IKET
# profiler removed: 68 MB, three parts of 22.6 MB), are more than one call of a size-capped
# transfer carries, so they may travel over several calls to the same machine, in parts:
#   .whl/NAME.tar.xz                 unpacked into /tmp/wsperf-site at once
#   .whl/NAME.tar.xz.part-KofN       kept in /tmp/wsperf-jit; unpacked once all N are there
#     (made here with: split -n N --numeric-suffixes=1 NAME.tar.xz NAME.tar.xz.part- , then
#      renamed part-01 -> part-1ofN ...)
# Then `bash scripts/gpu-jit.sh ROW...` runs those rows of gpu-evidence.sh (no rows: only
# unpacks). Exit 9 when the site lacks duckdb (a fresh machine: carry it again).
set -uo pipefail
cd "$(dirname "$0")/.."
site=/tmp/wsperf-site
jit=/tmp/wsperf-jit
mkdir -p "$site" "$jit"
for p in .whl/*.part-*; do [ -f "$p" ] && cp "$p" "$jit/"; done
for t in .whl/*.tar.xz; do [ -f "$t" ] && tar xJf "$t" -C "$site"; done
for first in "$jit"/*.part-1of*; do
  [ -f "$first" ] || continue
  stem=${first%.part-1of*}; n=${first##*of}
  [ -f "$stem.done" ] && continue
  parts=(); for k in $(seq 1 "$n"); do parts+=("$stem.part-${k}of$n"); done
  if ls "${parts[@]}" >/dev/null 2>&1; then
    cat "${parts[@]}" | tar xJf - -C "$site" && touch "$stem.done" && echo "unpacked $(basename "$stem")"
  else
    echo "$(basename "$stem"): $(ls "$stem".part-* | wc -l) of $n parts here"
  fi
done
export PYTHONPATH="$site:$site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import duckdb" 2>/dev/null || { echo "COLD: no duckdb in $site (a fresh machine)"; exit 9; }
python3 -c "import tvm_tirx" 2>/dev/null && echo "tvm_tirx importable"
python3 -c "import cutlass.cute" 2>/dev/null && echo "cutlass.cute importable"
[ $# -eq 0 ] && exit 0
ONLY="$*" bash scripts/gpu-evidence.sh
