#!/usr/bin/env bash
# The live CPU optimizer step of GPT-2 124M against this machine's memory bandwidth, on 1 core and on
# 2 (1 rank x 2 threads). The fused AdamW pass reads each parameter's gradient, two moments and weight
# and writes the weight and moments back: 28 bytes a parameter; the gradient norm's pass before it
# reads the gradients once more: 32 bytes a parameter in the "optimizer step" task. Each round measures
# a plain copy's bandwidth (numpy, 512 MiB arrays, one process per core, pinned like the run) and then
# the median "optimizer step" task of a short profiled run; the table gives the step's bytes over its
# time beside the copy's, and the run's set-up (model and optimizer state before the first step).
#
#   bash bench/live_adamw_bandwidth.sh [BUILD]         (ROUNDS, default 3; STEPS, default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-3}
steps=${STEPS:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

copy_gbps() {  # cores: the copy's bytes read and written per second on that many cores, one process each
  local cores=$1
  for ((c = 0; c < cores; ++c)); do
    taskset -c "$c" /usr/bin/python3 -c "
import numpy as np, time
a = np.ones(1 << 27, np.float32); b = np.empty_like(a); np.copyto(b, a)
t = time.perf_counter()
for _ in range(5): np.copyto(b, a)
print(5 * 2 * a.nbytes / (time.perf_counter() - t) / 1e9)" > "$tmp/copy$c.txt" &
  done
  wait
  cat "$tmp"/copy*.txt | awk '{s += $1} END {printf "%.1f", s}'
  rm -f "$tmp"/copy*.txt
}

optimizer_gbps() {  # cores: prints "SET_UP_S SECONDS GB/s": the set-up, the median optimizer step
  taskset -c "$(seq -s, 0 $(($1 - 1)))" "$build/bin/paratwin" run scenarios/live-cpu-gpt2.yaml \
    --ranks 1 --threads "$1" --steps "$steps" --profile "$tmp/p.json" --json "$tmp/r.json" > "$tmp/out.txt" 2>&1
  echo -n "$(sed -n 's/.*model and optimizer set up in \([0-9.]*\)s/\1/p' "$tmp/out.txt") "
  /usr/bin/python3 - "$tmp/p.json" "$tmp/r.json" << 'PY'
import json, sys
step = next(t for t in json.load(open(sys.argv[1]))["tasks"] if t["task"].startswith("optimizer step"))
params = json.load(open(sys.argv[2]))["memory_measured"]["ranks"][0]["parameters"] / 4  # fp32 weights
print(f"{step['median_s']:.3f} {32 * params / step['median_s'] / 1e9:.1f}")
PY
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| round | cores | set-up s | copy GB/s | optimizer step s | its 32 B/parameter in GB/s | share of the copy's |"
echo "|---|---|---|---|---|---|---|"
for ((round = 1; round <= rounds; round++)); do
  for cores in 1 2; do
    bw=$(copy_gbps "$cores")
    read -r setup s gbps < <(optimizer_gbps "$cores")
    echo "| $round | $cores | $setup | $bw | $s | $gbps | $(awk "BEGIN {printf \"%.0f%%\", 100 * $gbps / $bw}") |"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
