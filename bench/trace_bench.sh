#!/usr/bin/env bash
# Trace formats: size of `paratwin plan --trace` in each format and the time it adds to the command
# (the best of N runs with the trace minus the best of N without), for the 175B/1024 scenario and the
# 405B/16K scenario with the fixed plan of docs/simulator.md.
# Usage: bench/trace_bench.sh [BUILD_DIR] [RUNS]   (prints a Markdown table for bench/RESULTS.md)
set -euo pipefail
build=${1:-build}
runs=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin/paratwin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plan16k='plan={tp: 8, pp: 16, dp: 128, micro_batch: 1, schedule: interleaved, virtual_stages: 2, recompute: full, sequence_parallel: true}'

best_ms() {  # best wall time in ms of RUNS runs of the command
  local best=""
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    local ms=$(((t1 - t0) / 1000000))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
  done
  echo "$best"
}

echo "| scenario | format | bytes | command ms (best of $runs) | trace adds ms |"
echo "|---|---|---:|---:|---:|"
for case in 175b 16k; do
  if [ "$case" = 175b ]; then
    args=("$root/scenarios/gpt3-175b-1024-a100.yaml")
  else
    args=("$root/scenarios/failures-16k-h100.yaml" --set "$plan16k")
  fi
  base=$(best_ms "$bin" plan "${args[@]}")
  echo "| $case | (no trace) | - | $base | - |"
  for ext in json json.gz pftrace; do
    file="$tmp/trace.$ext"
    ms=$(best_ms "$bin" plan "${args[@]}" --trace "$file")
    echo "| $case | $ext | $(stat -c %s "$file") | $ms | $((ms - base)) |"
  done
done
