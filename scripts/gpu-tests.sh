#!/usr/bin/env bash
# Run the GPU-only tests (pytest -m gpu) on a machine with an NVIDIA GPU, ncu and nvcc.
# Needs wsperf's Python dependencies there; on a machine without package access, put
# wheels in ./.whl (duckdb at least) and this script installs them into /tmp/wsperf-site.
# ncu_report is taken from the Nsight Compute installation when no wheel provides it.
set -euo pipefail
cd "$(dirname "$0")/.."
site=/tmp/wsperf-site
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" .whl/*.whl
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$site" . 2>/dev/null \
  || python3 -m pip install -q --no-deps --no-build-isolation --target "$site" .
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import ncu_report" 2>/dev/null; then
  ncu_py=$(dirname "$(readlink -f "$(command -v ncu)")")/extras/python
  [ -d "$ncu_py" ] || ncu_py=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | tail -1)
  export PYTHONPATH="$PYTHONPATH:$ncu_py"
fi
export PATH="$site/bin:$PATH"
python3 -m pytest -q -m gpu -p no:cacheprovider tests "$@"
