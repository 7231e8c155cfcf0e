#!/usr/bin/env bash
# The twin against live tensor-, pipeline- and data-parallel runs on this machine: calibrate
# local-cpu once per model on a 1-rank and a 2-rank data-parallel run, then for several TP/PP/DP
# plans print the calibrated twin's iteration time beside the measured one. Prints a Markdown table.
#   bench/parallel_bench.sh [BUILD_DIR]      (default build/; STEPS=12 steps per run)
# Models: tiny-gpt (4 layers, hidden 128) and a small GPT (tiny-gpt with 8 layers of hidden 256).
# "measured (CPU)" is the median over steps of the most thread CPU time a rank of pipeline rank 0
# used (the step less the time other processes had the core: with more ranks than cores, wall time
# measures the scheduler); "measured (wall)" is the median step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
paratwin=$build/bin/paratwin
steps=${STEPS:-12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scenario=scenarios/live-cpu-tiny.yaml

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| model | plan | twin (calibrated) | measured (CPU) | error | measured (wall) |"
echo "|---|---|---:|---:|---:|---:|"

calibrate() {  # "model flags"
  local model=$1
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 $model --steps "$steps" --ranks 1 \
    --profile "$tmp/c1.json" > /dev/null
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 $model --steps "$steps" --ranks 2 \
    --profile "$tmp/c2.json" > /dev/null
  "$paratwin" calibrate "$tmp/c1.json" "$tmp/c2.json" --cluster local-cpu -o "$tmp/cal.yaml" > /dev/null
}

bench() {  # name "model flags" dp tp pp "plan flags"
  local name=$1 model=$2 dp=$3 tp=$4 pp=$5 flags=$6
  local world=$((dp * tp * pp))
  # shellcheck disable=SC2086
  "$paratwin" plan $scenario --set cluster="$tmp/cal.yaml" --set cluster.pools.local.gpus_per_node=$world \
    --set plan.dp=$dp --set plan.tp=$tp --set plan.pp=$pp --set training.global_batch=8 $model $flags \
    --json "$tmp/twin.json" > /dev/null
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 --set plan.tp=$tp --set plan.pp=$pp $model $flags \
    --steps "$steps" --ranks "$dp" --json "$tmp/r.json" > /dev/null
  python3 - "$name" "$dp" "$tp" "$pp" "$flags" "$tmp" << 'EOF2'
import json, statistics, sys
name, dp, tp, pp, flags, tmp = sys.argv[1:7]
r = json.load(open(f"{tmp}/r.json"))
twin = json.load(open(f"{tmp}/twin.json"))["metrics"]["iteration_time_s"]
p = r["plan"]
plan = f"dp {dp} tp {tp} pp {pp}" + (f" {p['schedule']}" if int(pp) > 1 else "") + \
       f", micro-batch {p['micro_batch']} x {p['num_microbatches']}"
busy, wall = statistics.median(r["iteration_busy_s"]), statistics.median(r["iteration_times_s"])
ms = lambda s: f"{s * 1e3:.1f} ms"
print(f"| {name} | {plan} | {ms(twin)} | {ms(busy)} | {100 * (twin / busy - 1):+.1f}% | {ms(wall)} |")
EOF2
}

tiny=""
small="--set model.layers=8 --set model.hidden=256 --set model.ffn_hidden=1024"
for model_name in tiny small; do
  model=${!model_name}
  calibrate "$model"
  bench "$model_name" "$model" 2 1 1 ""
  bench "$model_name" "$model" 1 2 1 ""
  bench "$model_name" "$model" 1 1 2 "--set plan.schedule=1f1b --set plan.micro_batch=2"
  bench "$model_name" "$model" 1 1 2 "--set plan.schedule=gpipe --set plan.micro_batch=2"
  bench "$model_name" "$model" 1 1 2 "--set plan.schedule=interleaved --set plan.virtual_stages=2 --set plan.micro_batch=2"
  bench "$model_name" "$model" 1 2 2 "--set plan.micro_batch=2"
  bench "$model_name" "$model" 2 2 1 ""
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
