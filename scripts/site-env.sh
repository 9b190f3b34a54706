# Sourced by scripts/gpu-tests.sh, gpu-e2e.sh and gpu-nightly.sh (from the repository root):
# installs wsperf into /tmp/wsperf-site (wheels from ./.whl first, for machines without
# package access), takes ncu_report from the Nsight Compute installation when no wheel
# provides it, and puts both on PYTHONPATH/PATH. `wsperf` is then a shell function
# running that install (no console script is needed on PATH).
site=/tmp/wsperf-site
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" .whl/*.whl
fi
# A wheel unpacked and packed again as .tar.xz (duckdb 1.4.1: 14 MB against 20 MB as a
# wheel) keeps the tree a device call carries under its size limit.
for t in .whl/*.tar.xz; do
  [ -f "$t" ] && mkdir -p "$site" && tar xJf "$t" -C "$site"
done
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$site" . 2>/dev/null \
  || python3 -m pip install -q --no-deps --no-build-isolation --upgrade --target "$site" .
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import ncu_report" 2>/dev/null; then
  ncu_py=$(dirname "$(readlink -f "$(command -v ncu)")")/extras/python
  [ -d "$ncu_py" ] || ncu_py=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | tail -1)
  export PYTHONPATH="$PYTHONPATH:$ncu_py"
fi
export PATH="$site/bin:$PATH"
wsperf() { python3 -c 'from wsperf.cli.main import app; app()' "$@"; }
