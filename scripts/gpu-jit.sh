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
#                                    (scripts/unpack-parts.sh, which says how they are made)
# Then `bash scripts/gpu-jit.sh ROW...` runs those rows of gpu-evidence.sh (no rows: only
# unpacks). Exit 9 when the site lacks duckdb (a fresh machine: carry it again).
set -uo pipefail
cd "$(dirname "$0")/.."
site=/tmp/wsperf-site
jit=/tmp/wsperf-jit
mkdir -p "$site" "$jit"
for t in .whl/*.tar.xz; do [ -f "$t" ] && tar xJf "$t" -C "$site"; done
bash scripts/unpack-parts.sh .whl "$jit" "$site"
export PYTHONPATH="$site:$site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import duckdb" 2>/dev/null || { echo "COLD: no duckdb in $site (a fresh machine)"; exit 9; }
python3 -c "import tvm_tirx" 2>/dev/null && echo "tvm_tirx importable"
python3 -c "import cutlass.cute" 2>/dev/null && echo "cutlass.cute importable"
[ $# -eq 0 ] && exit 0
ONLY="$*" bash scripts/gpu-evidence.sh
