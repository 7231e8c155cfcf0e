#!/usr/bin/env bash
# Live CPU benchmark: tokens/s of `paratwin run` on tiny-gpt (1 and 2 ranks) against PyTorch on one
# CPU thread with the same model, batch and optimizer (when python3-torch is installed), and the
# model FLOP/s reached against Eigen's measured fp32 GEMM rate on this machine.
#   bench/live_bench.sh [BUILD_DIR]        (default build/); prints a Markdown table
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
paratwin=$build/bin/paratwin
steps=${STEPS:-30}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

g++ -O3 -DNDEBUG -march=native -I/usr/include/eigen3 bench/live_gemm_peak.cpp -o "$tmp/gemm"
"$tmp/gemm" > "$tmp/gemm.txt"
peak=$(awk '/256x128x512/ {print $3}' "$tmp/gemm.txt")

run() {  # ranks global_batch -> "tokens/s model_GFLOP/s_per_rank final_loss predicted_tokens/s"
  "$paratwin" run scenarios/live-cpu-tiny.yaml --backend cpu --ranks "$1" --steps "$steps" \
    --set training.global_batch="$2" --set plan.micro_batch=4 --json "$tmp/r.json" > /dev/null
  python3 -c "import json; r=json.load(open('$tmp/r.json')); m=r['metrics']; \
print(f\"{m['tokens_per_s']:.0f} {m['model_tflops_per_gpu']*1e3:.2f} {r['loss'][-1]:.3f} {r['predicted']['tokens_per_s']:.0f}\")"
}
read -r t1 f1 l1 p1 <<< "$(run 1 4)"
read -r t2 f2 l2 p2 <<< "$(run 2 8)"

echo "| what | tokens/s | model GFLOP/s per rank | of GEMM rate | final loss | twin's prediction |"
echo "|---|---|---|---|---|---|"
echo "| paratwin run, 1 rank, 4 x 64 tokens/step | $t1 | $f1 | $(python3 -c "print(f'{$f1/$peak:.0%}')") | $l1 | $p1 tokens/s |"
echo "| paratwin run, 2 ranks, 8 x 64 tokens/step | $t2 | $f2 | $(python3 -c "print(f'{$f2/$peak:.0%}')") | $l2 | $p2 tokens/s |"
if /usr/bin/python3 -c "import torch" 2> /dev/null; then
  read -r _ ver _ tt _ tms _ tl <<< "$(/usr/bin/python3 bench/live_torch_gpt.py 4 64 "$steps")"
  echo "| PyTorch $ver, 1 thread, 4 x 64 tokens/step | $tt | | | $tl | |"
else
  echo "| PyTorch | not installed (apt-get install python3-torch) | | | | |"
fi
echo
echo "Eigen fp32 GEMM on one core (-march=native):"
sed 's/^/    /' "$tmp/gemm.txt"
