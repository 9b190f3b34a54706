#!/usr/bin/env bash
# Run the GPU-only tests (pytest -m gpu) on a machine with an NVIDIA GPU, ncu and nvcc.
# Needs wsperf's Python dependencies there; on a machine without package access, put
# wheels in ./.whl (duckdb at least) and this script installs them into /tmp/wsperf-site.
# ncu_report is taken from the Nsight Compute installation when no wheel provides it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/site-env.sh
# Only the modules holding GPU tests: the others may import what the GPU machine lacks
# (altair, vl-convert for the charts).
mapfile -t files < <(grep -l "pytest.mark.gpu" tests/test_*.py)
python3 -m pytest -q -m gpu -p no:cacheprovider "${files[@]}" "$@"
