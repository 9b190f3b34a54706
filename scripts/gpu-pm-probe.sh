#!/usr/bin/env bash
# What Nsight Compute's PM sampling and timed warp sampling give on this GPU, for the
# ring kernel of fixtures/src/timeline (run on the GPU machine; writes into $OUT):
#   ring_pmsampling.ncu-rep   ncu --section PmSampling, two ring launches
#   ring_pcsamp.ncu-rep       ncu --section WarpStateStats --section SourceCounters, one launch
#   pm_probe2.txt             for each report: metric names with instances, by name prefix;
#                             IAction.timed_warp_samples() and timelines() of every launch;
#                             ncu's options and documentation that mention timed warp samples
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/out}; mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
B=$(mktemp -d)
P=$OUT/pm_probe2.txt
nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -lineinfo -I"$root/collectors/include" -o "$B/ring" \
  "$root/fixtures/src/timeline/ring.cu" || exit 1
{
  echo "# $("$NCU" --version | tail -1); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  timeout 60 "$NCU" --clock-control none --section PmSampling -k regex:ring_kernel -c 2 -f -o "$OUT/ring_pmsampling" \
    "$B/ring" trace "$B" 2>&1 | grep -E "==(PROF|WARNING|ERROR)==" | head -8
  timeout 60 "$NCU" --clock-control none --section WarpStateStats --section SourceCounters -k regex:ring_kernel -c 1 -f \
    -o "$OUT/ring_pcsamp" "$B/ring" trace "$B" 2>&1 | grep -E "==(PROF|WARNING|ERROR)==" | head -8
  NCUDIR=$(dirname "$(readlink -f "$NCU")")
  # the install's own ncu_report module (wherever this install keeps it)
  MOD=$(find "$NCUDIR/.." /usr/local/cuda/ /opt/nvidia -name ncu_report.py -path '*extras*' 2>/dev/null | head -1)
  PYTHONPATH="$(dirname "${MOD:-/nonexistent/x}")" python3 "$root/scripts/pm_probe_read.py" "$OUT/ring_pmsampling.ncu-rep" \
    "$OUT/ring_pcsamp.ncu-rep" "$root/fixtures/timeline/ring_pm.ncu-rep"
  echo "## ncu --help lines about warp/timed sampling"
  "$NCU" --help | grep -n -i -E "timed|warp-sampl|warp sampl|sampling-" | head -20
  echo "## files of the install that mention timed warp samples"
  grep -rIl -i "timed_warp_samples\|TimedWarpSample\|timed warp" "$NCUDIR" 2>/dev/null | head -10
  grep -rI -i -h -o ".\{0,160\}timed_warp_samples.\{0,200\}" "$NCUDIR/extras/python" 2>/dev/null | head -6
} >"$P" 2>&1
cat "$P"
ls -la "$OUT"
