#!/usr/bin/env bash
# Live fault tolerance benchmark: a longer `paratwin run` of tiny-gpt on 4 CPU ranks with 20 random
# kills (--chaos), recovered by the supervisor; then the same with shrinking to 3 ranks while a killed
# rank's slot is down. Prints a Markdown table: recoveries, time to recover, checkpoint overhead, the
# measured goodput and the twin's goodput predicted from the run's failure trace.
#   bench/fault_bench.sh [BUILD_DIR]       (default build/); STEPS, KILLS, MTBF, SEED override
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
paratwin=$build/bin/paratwin
steps=${STEPS:-800}
kills=${KILLS:-20}
mtbf=${MTBF:-4s}
seed=${SEED:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

job=(scenarios/live-cpu-tiny.yaml --ranks 4 --steps "$steps" --set training.global_batch=12
  --set plan.micro_batch=1 --checkpoint-every 20 --chaos "$seed" --chaos-kills "$kills" --chaos-mtbf "$mtbf"
  --max-restarts 100)

run() {  # name extra-flags... -> a table row
  local name=$1
  shift
  local start=$SECONDS
  if ! "$paratwin" run "${job[@]}" --checkpoint-dir "$tmp/$name" --json "$tmp/$name.json" "$@" > "$tmp/$name.log" 2>&1; then
    grep -v '^step' "$tmp/$name.log" | tail -20 >&2
    exit 1
  fi
  python3 - "$tmp/$name.json" "$name" $((SECONDS - start)) << 'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["reliability"]
p = r["predicted"]
ttr = [x["time_to_recover_s"] for x in r["recoveries"] if x["time_to_recover_s"] >= 0]
print(f"| {sys.argv[2]} | {sys.argv[3]} s | {r['failures']} | {r['restarts']} | {r['shrinks']}/{r['grows']} "
      f"| {sum(ttr) / len(ttr):.2f} s (max {max(ttr):.2f} s) | {r['lost_steps']} ({r['lost_work_s']:.1f} s) "
      f"| {100 * r['checkpoint_overhead']:.2f}% ({1e3 * r['checkpoint_snapshot_s']:.0f} ms + "
      f"{1e3 * r['checkpoint_write_s']:.0f} ms behind) | {r['goodput']:.3f} | {p['goodput']:.3f} "
      f"| {100 * (p['goodput'] - r['goodput']) / r['goodput']:+.1f}% | {p['lost_work_s']:.1f} s |")
EOF
}

echo "| run | wall time | failures | recovered | shrinks/grows | time to recover (mean) | steps lost (work) | checkpoint overhead of step time (snapshot + write) | goodput measured | goodput predicted | predicted vs measured | lost work predicted |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
run "restart on 4 ranks"
run "shrink to 3 while down 10 s" --min-ranks 3 --down-time 10s
