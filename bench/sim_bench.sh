#!/usr/bin/env bash
# Simulator speed (issue 21): wall and CPU time, simulated ranks, activities (executions, flows,
# delays) and peak memory of `paratwin simulate` for one iteration of
#   - gpt3-175b on 1,024 A100, folded and with every rank simulated (--all-ranks);
#   - the optimizer's plan of failures-16k-h100 (16,384 H100; target < 60 s), and its 54-day horizon
#     (target: < 10 s more than the iteration);
#   - llama3-405b on 98,304 H100 (h100-roce resized, the optimizer's plan; target < 5 min);
#   - mixtral-8x7b with ep 8 on 16,384 H100 (target < 5 min);
#   - one plan family (tp 4, cp 8, pp 16 interleaved, dp grown) from 1K to 98K GPUs, folded, and
#     with every rank at 1K (EVERY_RANK_UP_TO_DP=8 adds 4K, about 5 CPU minutes): the scaling curve
#     (CPU seconds against GPUs), drawn into OUT/sim-scaling.png.
# Targets: on one core, peak memory < 4 GB. CPU time is user + system of the command and its
# simulation child, the figure to compare on a shared machine.
# Usage: bench/sim_bench.sh [BUILD_DIR] [OUT_DIR]   (prints a Markdown table for bench/RESULTS.md)
set -euo pipefail
build=${1:-build}
out=${2:-$build/sim-bench}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin/paratwin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
: >"$tmp/curve"

run() {  # name, curve label or -, GPUs for the curve, then the arguments of `paratwin simulate`
  local name=$1 label=$2 gpus=$3
  shift 3
  taskset -c 0 /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$bin" simulate "$@" --json "$tmp/run.json" >/dev/null
  read -r wall user sys rss <"$tmp/time"
  python3 - "$tmp/run.json" "$name" "$wall" "$user" "$sys" "$rss" <<'PY'
import json, sys
report, name = json.load(open(sys.argv[1])), sys.argv[2]
wall, cpu, rss = float(sys.argv[3]), float(sys.argv[4]) + float(sys.argv[5]), int(sys.argv[6]) / 1024
sim, plan = report["simulation"], report["plan"]
rel = report.get("reliability")
extra = "goodput %.1f%%, %d failures" % (100 * rel["goodput"], rel["failures"]) if rel else ""
shape = "tp %d cp %d pp %d dp %d ep %d" % (plan["tp"], plan["cp"], plan["pp"], plan["dp"], plan["ep"])
print("| %-34s | %-28s | %7.1f | %7.1f | %6d | %10.0f | %6.0f | %.3f s | %s |" % (
    name, shape, wall, cpu, sim["simulated_ranks"], sim["activities"], rss,
    report["metrics"]["iteration_time_s"], extra))
PY
  [ "$label" = - ] || echo "$label $gpus $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" >>"$tmp/curve"
}

echo "| run | plan | wall s | CPU s | simulated ranks | activities | peak MiB | simulated iteration | horizon |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
run "gpt3-175b, 1,024 A100" - 0 "$root/scenarios/gpt3-175b-1024-a100.yaml"
run "gpt3-175b, 1,024 A100, every rank" - 0 "$root/scenarios/gpt3-175b-1024-a100.yaml" --all-ranks
run "failures-16k-h100, optimizer's plan" - 0 "$root/scenarios/failures-16k-h100.yaml"
run "the same, 54-day horizon" - 0 "$root/scenarios/failures-16k-h100.yaml" --horizon 54d --seed 1
run "llama3-405b, 98,304 H100" - 0 "$root/scenarios/failures-16k-h100.yaml" --set cluster.nodes=12288 \
  --set training.global_batch=12288
cat >"$tmp/mixtral.yaml" <<'YAML'
name: mixtral-16k
model: mixtral-8x7b
cluster: h100-roce
training: {global_batch: 8192, seq_len: 4096, precision: bf16}
plan: {tp: 2, pp: 16, dp: 512, ep: 8, micro_batch: 1, schedule: 1f1b, sequence_parallel: true, zero: 1}
YAML
run "mixtral-8x7b ep 8, 16,384 H100" - 0 "$tmp/mixtral.yaml"

# One plan family: llama3-405b, tp 4 x cp 8 x pp 16 interleaved (the optimizer's shape at 16K),
# dp = GPUs / 512, 64 micro-batches per replica, two straggler hosts.
cat >"$tmp/family.yaml" <<'YAML'
name: llama3-405b-family
model: llama3-405b
cluster: h100-roce
training: {global_batch: 2048, seq_len: 8192, precision: bf16}
plan: {tp: 4, cp: 8, pp: 16, dp: 32, micro_batch: 1, schedule: interleaved, virtual_stages: 4,
       sequence_parallel: true, zero: 1}
failures: {stragglers: {count: 2, slowdown: 1.3}}
YAML
for dp in ${FAMILY_DP:-2 8 32 96 192}; do
  gpus=$((dp * 512))
  sets=(--set plan.dp=$dp --set cluster.nodes=$((gpus / 8)) --set training.global_batch=$((dp * 64)))
  run "family, $gpus GPUs" folded $gpus "$tmp/family.yaml" "${sets[@]}"
  if [ $dp -le "${EVERY_RANK_UP_TO_DP:-2}" ]; then
    run "family, $gpus GPUs, every rank" every-rank $gpus "$tmp/family.yaml" "${sets[@]}" --all-ranks
  fi
done
if [ -x "$build/bin/plot_scaling" ]; then
  "$build/bin/plot_scaling" "simulate: CPU s per iteration (llama3-405b plan family)" \
    "$out/sim-scaling.png" <"$tmp/curve"
  echo
  echo "wrote $out/sim-scaling.png"
fi
