#!/usr/bin/env bash
# The twin against live tensor-, pipeline- and data-parallel runs on this machine: for each of several
# TP/PP/DP plans, calibrate local-cpu for the model on data-parallel runs (1 rank at micro-batch 4
# and 1, which separates the per-kernel cost from the GEMM rate, and 2 ranks for the all-reduce), then
# print the calibrated twin's iteration time beside the plan's measured one. Prints a Markdown table.
#   bench/parallel_bench.sh [BUILD_DIR]      (default build/; STEPS=12 steps per run, ROUNDS=3)
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
rounds=${ROUNDS:-3}

calibrate() {  # "model flags"
  local model=$1
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 $model --steps "$steps" --ranks 1 \
    --profile "$tmp/c1.json" > /dev/null
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 --set plan.micro_batch=1 $model --steps "$steps" \
    --ranks 1 --profile "$tmp/c1b.json" > /dev/null
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 $model --steps "$steps" --ranks 2 \
    --profile "$tmp/c2.json" > /dev/null
  "$paratwin" calibrate "$tmp/c1.json" "$tmp/c1b.json" "$tmp/c2.json" --cluster local-cpu -o "$tmp/cal.yaml" \
    > /dev/null
}

# Appends one JSON line (round, model, plan, twin, measured CPU and wall) to $tmp/rows.jsonl.
bench() {  # round name "model flags" dp tp pp "plan flags"
  local round=$1 name=$2 model=$3 dp=$4 tp=$5 pp=$6 flags=$7
  local world=$((dp * tp * pp))
  calibrate "$model"
  # shellcheck disable=SC2086
  "$paratwin" plan $scenario --set cluster="$tmp/cal.yaml" --set cluster.pools.local.gpus_per_node=$world \
    --set plan.dp=$dp --set plan.tp=$tp --set plan.pp=$pp --set training.global_batch=8 $model $flags \
    --json "$tmp/twin.json" > /dev/null
  # shellcheck disable=SC2086
  "$paratwin" run $scenario --set training.global_batch=8 --set plan.tp=$tp --set plan.pp=$pp $model $flags \
    --steps "$steps" --ranks "$dp" --json "$tmp/r.json" > /dev/null
  python3 - "$round" "$name" "$dp" "$tp" "$pp" "$tmp" >> "$tmp/rows.jsonl" << 'EOF2'
import json, statistics, sys
round_, name, dp, tp, pp, tmp = sys.argv[1:7]
r = json.load(open(f"{tmp}/r.json"))
p = r["plan"]
plan = f"dp {dp} tp {tp} pp {pp}" + (f" {p['schedule']}" if int(pp) > 1 else "") + \
       f", micro-batch {p['micro_batch']} x {p['num_microbatches']}"
print(json.dumps({"round": int(round_), "model": name, "plan": plan,
                  "twin": json.load(open(f"{tmp}/twin.json"))["metrics"]["iteration_time_s"],
                  "busy": statistics.median(r["iteration_busy_s"]),
                  "wall": statistics.median(r["iteration_times_s"])}))
EOF2
}

tiny=""
small="--set model.layers=8 --set model.hidden=256 --set model.ffn_hidden=1024"
# Rounds repeat every plan, so that a burst of load on this shared machine moves one round's
# figures and not the medians. Each plan is calibrated for right before it runs: this VM's speed
# drifts by 10-15% within minutes, and a calibration made at the start of a round put the round's
# later plans off by that much.
for round in $(seq 1 "$rounds"); do
  for model_name in tiny small; do
    model=${!model_name}
    bench "$round" "$model_name" "$model" 2 1 1 ""
    bench "$round" "$model_name" "$model" 1 2 1 ""
    bench "$round" "$model_name" "$model" 1 1 2 "--set plan.schedule=1f1b --set plan.micro_batch=2"
    bench "$round" "$model_name" "$model" 1 1 2 "--set plan.schedule=gpipe --set plan.micro_batch=2"
    bench "$round" "$model_name" "$model" 1 1 2 "--set plan.schedule=interleaved --set plan.virtual_stages=2 --set plan.micro_batch=2"
    bench "$round" "$model_name" "$model" 1 2 2 "--set plan.micro_batch=2"
    bench "$round" "$model_name" "$model" 2 2 1 ""
  done
  echo "round $round of $rounds done" >&2
done

echo
python3 - "$tmp/rows.jsonl" "$rounds" << 'EOF3'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = list(dict.fromkeys((r["model"], r["plan"]) for r in rows))
print(f"{sys.argv[2]} rounds; medians over rounds of: the calibrated twin, the measured step (CPU, wall), "
      "and the error (each round's twin against the run right after its calibration)")
print()
print("| model | plan | twin (calibrated) | measured (CPU) | error | error per round | measured (wall) |")
print("|---|---|---:|---:|---:|---|---:|")
ms = lambda s: f"{s * 1e3:.1f} ms"
for model, plan in keys:
    mine = [r for r in rows if (r["model"], r["plan"]) == (model, plan)]
    twin, busy = statistics.median(r["twin"] for r in mine), statistics.median(r["busy"] for r in mine)
    wall = statistics.median(r["wall"] for r in mine)
    errors = [r["twin"] / r["busy"] - 1 for r in mine]
    per_round = " ".join(f"{100 * e:+.0f}%" for e in errors)
    print(f"| {model} | {plan} | {ms(twin)} | {ms(busy)} | {100 * statistics.median(errors):+.1f}% | {per_round} | {ms(wall)} |")
EOF3
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
