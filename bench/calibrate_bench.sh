#!/usr/bin/env bash
# The twin loop on this machine: calibrate local-cpu on live runs, then compare the twin's predicted
# iteration time with the measured one for other plans. Prints a Markdown table.
#   bench/calibrate_bench.sh [BUILD_DIR]      (default build/; STEPS=20 steps per run)
# Calibration runs: 1 rank, micro-batch 4 x 2, sequences of 64 (compute), and for 2-rank plans also
# 2 ranks of micro-batch 4 (the all-reduce). "measured (CPU)" is the median over steps of the most
# thread CPU time a rank used, which leaves out time the scheduler gave to other processes; the errors
# are the uncalibrated / 1-run / 2-run twins' against it; "measured (wall)" is the median step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
paratwin=$build/bin/paratwin
steps=${STEPS:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scenario=scenarios/live-cpu-tiny.yaml

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| plan | uncalibrated twin | twin calibrated on 1 run | on 2 runs | measured (CPU) | errors | measured (wall) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
# One row: the calibration runs, then the plan, back to back, so that the load of other processes
# is the same for both sides of the comparison. "1 run": 1 rank, micro-batch 4 x 2, sequences of 64;
# "2 runs": also micro-batch 1 x 8, which tells the per-kernel cost from the memory traffic. 2-rank
# plans add a 2-rank run of micro-batch 4 to both (the all-reduce).
bench() {  # ranks "flags"
  local ranks=$1 flags=$2 extra=""
  run() { "$paratwin" run $scenario --set training.global_batch=8 --steps "$steps" "$@" > /dev/null; }
  run --ranks 1 --profile "$tmp/p4.json"
  run --ranks 1 --set plan.micro_batch=1 --profile "$tmp/p1.json"
  if [ "$ranks" -gt 1 ]; then
    run --ranks 2 --profile "$tmp/p2.json"
    extra="$tmp/p2.json"
  fi
  # shellcheck disable=SC2086
  "$paratwin" calibrate "$tmp/p4.json" $extra --cluster local-cpu -o "$tmp/one.yaml" > "$tmp/calibrate.txt"
  # shellcheck disable=SC2086
  "$paratwin" calibrate "$tmp/p4.json" "$tmp/p1.json" $extra --cluster local-cpu -o "$tmp/two.yaml" > /dev/null
  for cluster in local-cpu "$tmp/one.yaml" "$tmp/two.yaml"; do
    # shellcheck disable=SC2086
    "$paratwin" plan $scenario --set cluster="$cluster" --set plan.dp="$ranks" \
      --set cluster.pools.local.gpus_per_node="$ranks" --set training.global_batch=8 $flags \
      --json "$tmp/$(basename "$cluster" .yaml).json" > /dev/null
  done
  # shellcheck disable=SC2086
  run --ranks "$ranks" $flags --json "$tmp/r.json"
  python3 - "$ranks" "$flags" "$tmp" << 'EOF2'
import json, statistics, sys
ranks, flags, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.load(open(f"{tmp}/r.json"))
twin = {k: json.load(open(f"{tmp}/{k}.json"))["metrics"]["iteration_time_s"] for k in ("local-cpu", "one", "two")}
p = r["plan"]
seq = [f.split("=")[1] for f in flags.split() if f.startswith("training.seq_len")] or ["64"]
bucket = [f.split("=")[1] for f in flags.split() if f.startswith("plan.bucket_size")]
plan = f"{ranks} rank(s), micro-batch {p['micro_batch']} x {p['num_microbatches']}, seq {seq[0]}" + \
       (f", buckets {bucket[0]}" if bucket else "")
busy, wall = statistics.median(r["iteration_busy_s"]), statistics.median(r["iteration_times_s"])
ms = lambda s: f"{s * 1e3:.1f} ms"
err = lambda k: f"{100 * (twin[k] / busy - 1):+.1f}%"
print(f"| {plan} | {ms(twin['local-cpu'])} | {ms(twin['one'])} | {ms(twin['two'])} | {ms(busy)} | "
      f"{err('local-cpu')} / {err('one')} / {err('two')} | {ms(wall)} |")
EOF2
}
bench 1 ""
bench 1 "--set plan.micro_batch=2 --set training.seq_len=128"
bench 1 "--set plan.micro_batch=1"
bench 1 "--set plan.micro_batch=8 --set training.seq_len=32"
bench 2 ""
bench 2 "--set plan.micro_batch=2 --set training.seq_len=128"
bench 2 "--set plan.bucket_size=256KiB"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "The last calibration on 1 run (of the 1- and 2-rank plans):"
sed 's/^/    /' "$tmp/calibrate.txt"
