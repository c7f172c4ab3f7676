#!/usr/bin/env bash
# Hardware counters of chosen kernels of a tc training step, on the GPU
# machine (Nsight Compute; the Firecracker runtime reads the counters, gVisor
# does not: then this says so and exits 3):
#
#   scripts/gpu-ncu.sh TC_RUN ARTIFACT.tca DATA.bin OUT_DIR REGEX [COUNT]
#
# runs ARTIFACT for 3 steps on DATA (tc-run's --data tokens) under ncu and
# profiles the first COUNT (default 6) launches whose kernel name matches the
# regular expression REGEX (mangled names: generated kernels are named after
# their tcx kernel, e.g. train_step_fusion_12; the hand-written ones by their
# template, e.g. wgFwdKernel, flashBwdDkDvKernel), skipping the first step's
# (warm-up) launches of them. The clocks stay as they are (--clock-control
# none). Writes OUT_DIR/ncu.txt (speed of light, occupancy, launch
# statistics, warp stall reasons, memory workload per kernel) and prints a
# one-line summary of each
# profiled kernel: duration, DRAM and SM throughput (% of peak), achieved
# occupancy, registers per thread.
set -uo pipefail
if [ $# -lt 5 ]; then
  sed -n '2,18p' "$0"
  exit 2
fi
TCRUN="$1" ART="$2" DATA="$3" OUT="$4" REGEX="$5" COUNT="${6:-6}"
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)"
[ -n "$NCU" ] && [ -x "$NCU" ] || { echo "gpu-ncu: no ncu on this machine"; exit 3; }
for f in "$TCRUN" "$ART" "$DATA"; do
  [ -e "$f" ] || { echo "gpu-ncu: $f not found"; exit 2; }
done
mkdir -p "$OUT"
# The matching launches of the first step are skipped: count them with a
# one-step run of ncu that only lists names (no counters collected).
first=$("$NCU" --clock-control none --kernel-name "regex:$REGEX" --metrics gpu__time_duration.sum \
  --csv "$TCRUN" "$ART" --device cuda --steps 1 --data "$DATA" 2>"$OUT/ncu.count.log" |
  grep -c '"gpu__time_duration.sum"')
"$NCU" --clock-control none --kernel-name "regex:$REGEX" --launch-skip "$first" \
  --launch-count "$COUNT" --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis \
  "$TCRUN" "$ART" --device cuda --steps 3 --data "$DATA" >"$OUT/ncu.txt" 2>"$OUT/ncu.log"
rc=$?
if grep -q -i "ERR_NVGPUCTRPERM\|LibraryNotLoaded\|Failed to initialize the profiler" "$OUT/ncu.txt" "$OUT/ncu.log"; then
  echo "gpu-ncu: ncu cannot read the hardware counters on this machine (see $OUT/ncu.log)"
  exit 3
fi
python3 - "$OUT/ncu.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.split(r"\n  (?=\S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))", text)
def metric(b, name):
    m = re.search(r"^\s+" + re.escape(name) + r"\s+(\S+)\s+([\d.,]+)", b, re.M)
    return f"{m.group(2)} {m.group(1)}" if m else "?"
for b in blocks[1:]:
    name = b.split("(")[0].strip()[:70]
    print(f"  {name}: {metric(b, 'Duration')}, DRAM {metric(b, 'DRAM Throughput')}, "
          f"SM {metric(b, 'Compute (SM) Throughput')}, occupancy {metric(b, 'Achieved Occupancy')}, "
          f"registers {metric(b, 'Registers Per Thread')}")
PY
echo "gpu-ncu: exit status $rc; report $OUT/ncu.txt"
exit $rc
