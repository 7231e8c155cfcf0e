#!/usr/bin/env bash
# ParaTwin's live CPU training of GPT-2 124M beside its peers on this machine, at 1 and 2 cores:
# PyTorch (Debian's python3-torch on OpenBLAS; installed here when missing) and, when LLMC_DIR names a
# copy of karpathy/llm.c, its CPU trainer train_gpt2.c. fp32, sequences of 64 tokens, 4 per core and
# step (1 core: 4 x 64; 2 cores: 8 x 64), AdamW, the same byte corpus. Each system runs alone, pinned
# to its cores with taskset, and the systems alternate round by round (ROUNDS, default 3), so that the
# machine's other load falls on all alike; the table gives each one's per-round tokens/s, the medians,
# the median peak memory (the resident sets of all its processes, summed) and the ratios to PyTorch.
#
#   bash bench/live_vs_peers.sh [BUILD]          (BUILD defaults to build; ROUNDS, STEPS, LLMC_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-3}
steps=${STEPS:-6}  # the first is a warm-up, left out of every system's mean
corpus=data/tiny-corpus.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# PyTorch on OpenBLAS: Debian's python3-torch takes BLAS through libblas.so.3, which is the reference
# BLAS unless OpenBLAS is installed.
need=()
/usr/bin/python3 -c "import torch" 2> /dev/null || need+=(python3-torch)
dpkg-query -W -f='${Status}' libopenblas0-pthread 2> /dev/null | grep -q "install ok" || need+=(libopenblas0-pthread)
/usr/bin/python3 -c "import threadpoolctl" 2> /dev/null || need+=(python3-threadpoolctl)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "live_vs_peers: run as root, or install them first: apt-get install ${need[*]}" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" > /dev/null
fi

# llm.c's train_gpt2.c, when given: a copy in $tmp with its batch, step count and file names set, and
# a GPT-2 124M checkpoint of random weights in its format (it has no initializer of its own).
llmc=""
if [ -n "${LLMC_DIR:-}" ]; then
  llmc=$tmp/llmc
  mkdir -p "$llmc"
  "$build/bin/paratwin" tokenize "$corpus" -o "$llmc/train.bin" > /dev/null
  cp "$llmc/train.bin" "$llmc/val.bin"
  /usr/bin/python3 bench/llmc_checkpoint.py "$llmc/gpt2_124M.bin"
  for b in 4 8; do
    sed -e "s|int B = 4;|int B = $b;|" -e "s|step <= 40;|step < $steps;|" \
      -e "s|int val_num_batches = 5;|int val_num_batches = 1;|" \
      -e "s|\"gpt2_124M.bin\"|\"$llmc/gpt2_124M.bin\"|" \
      -e "s|\"dev/data/tinyshakespeare/tiny_shakespeare_train.bin\"|\"$llmc/train.bin\"|" \
      -e "s|\"dev/data/tinyshakespeare/tiny_shakespeare_val.bin\"|\"$llmc/val.bin\"|" \
      -e "s|\"dev/data/tinystories/TinyStories_train.bin\"|\"$llmc/train.bin\"|" \
      -e "s|\"dev/data/tinystories/TinyStories_val.bin\"|\"$llmc/val.bin\"|" \
      "$LLMC_DIR/train_gpt2.c" > "$llmc/train_gpt2_b$b.c"
    gcc -O3 -Ofast -march=native -fopenmp -Wno-unused-result -I"$LLMC_DIR" "$llmc/train_gpt2_b$b.c" \
      -lm -o "$llmc/train_gpt2_b$b"
  done
fi

# One run; prints "TOKENS_PER_S PEAK_MIB FINAL_LOSS".
run_paratwin() {  # cores ranks threads batch
  local json=$tmp/report.json
  /usr/bin/python3 bench/peak_rss.py taskset -c "$(seq -s, 0 $(($1 - 1)))" \
    "$build/bin/paratwin" run scenarios/live-cpu-gpt2.yaml --ranks "$2" --threads "$3" --steps "$steps" \
    --set training.global_batch="$4" --set plan.micro_batch=$(($4 / $2)) --json "$json" \
    > "$tmp/out.txt" 2> "$tmp/err.txt"
  grep -o 'GEMMs on .*' "$tmp/out.txt" | head -1 > "$tmp/paratwin_gemm.txt"
  /usr/bin/python3 -c "import json,sys; r=json.load(open('$json')); print(round(r['metrics']['tokens_per_s'], 1), end=' ')"
  sed -n 's/^peak_rss_mib //p' "$tmp/err.txt" | tr '\n' ' '
  /usr/bin/python3 -c "import json; print(round(json.load(open('$json'))['loss'][-1], 4))"
}
run_torch() {  # cores batch
  /usr/bin/python3 bench/peak_rss.py taskset -c "$(seq -s, 0 $(($1 - 1)))" /usr/bin/python3 bench/live_torch_gpt.py \
    "$2" 64 "$steps" "$corpus" --model gpt2 --threads "$1" > "$tmp/out.txt" 2> "$tmp/err.txt"
  grep -q '^blas ' "$tmp/out.txt" && sed -n 's/^blas //p' "$tmp/out.txt" > "$tmp/torch_blas.txt"
  read -r _ version _ tps _ _ _ loss < <(grep '^torch ' "$tmp/out.txt")
  echo "$version" > "$tmp/torch_version.txt"
  echo "$tps $(sed -n 's/^peak_rss_mib //p' "$tmp/err.txt") $loss"
}
run_llmc() {  # cores batch
  (cd "$llmc" && OMP_NUM_THREADS=$1 /usr/bin/python3 "$OLDPWD/bench/peak_rss.py" \
    taskset -c "$(seq -s, 0 $(($1 - 1)))" "./train_gpt2_b$2" > "$tmp/out.txt" 2> "$tmp/err.txt")
  /usr/bin/python3 - "$tmp/out.txt" "$2" "$(sed -n 's/^peak_rss_mib //p' "$tmp/err.txt")" << 'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
steps = [(float(m.group(2)), float(m.group(1))) for m in
         (re.search(r"train loss ([0-9.]+) \(took ([0-9.]+) ms\)", l) for l in lines) if m]
ms = [t for t, _ in steps[1:]]
print(round(int(sys.argv[2]) * 64 / (sum(ms) / len(ms) / 1e3), 1), sys.argv[3], steps[-1][1])
PY
}

# The systems at each core count: name | command.
configs=(
  "1|ParaTwin, 1 rank x 1 thread|run_paratwin 1 1 1 4"
  "1|PyTorch, 1 thread|run_torch 1 4"
  "2|ParaTwin, 1 rank x 2 threads|run_paratwin 2 1 2 8"
  "2|ParaTwin, 2 ranks x 1 thread (dp 2)|run_paratwin 2 2 1 8"
  "2|PyTorch, 2 threads|run_torch 2 8"
)
if [ -n "$llmc" ]; then
  configs+=("1|llm.c train_gpt2.c, 1 thread|run_llmc 1 4" "2|llm.c train_gpt2.c, 2 threads|run_llmc 2 8")
fi

declare -A tps mem loss
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((round = 1; round <= rounds; round++)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r cores name command <<< "$c"
    read -r t m l < <($command)
    tps[$name]+="$t "
    mem[$name]+="$m "
    loss[$name]=$l
    echo "round $round: $name: $t tokens/s, peak $m MiB, final loss $l (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
echo "GPT-2 124M, fp32, 64-token sequences, 4 per core and step; $steps steps a run (the first left out), $rounds rounds."
echo "PyTorch $(cat "$tmp/torch_version.txt") on $(cat "$tmp/torch_blas.txt"); ParaTwin's $(cat "$tmp/paratwin_gemm.txt")."
echo
echo "| cores | system | tokens/s per round | median tokens/s | vs PyTorch | median peak memory MiB | vs PyTorch | final loss |"
echo "|---|---|---|---|---|---|---|---|"
declare -A torch_tps torch_mem
for c in "${configs[@]}"; do
  IFS='|' read -r cores name _ <<< "$c"
  if [[ $name == PyTorch* ]]; then
    torch_tps[$cores]=$(median <<< "${tps[$name]}")
    torch_mem[$cores]=$(median <<< "${mem[$name]}")
  fi
done
for c in $(for i in "${!configs[@]}"; do echo "${configs[$i]%%|*} $i"; done | sort -n -s -k1,1 | cut -d' ' -f2); do
  IFS='|' read -r cores name _ <<< "${configs[$c]}"
  t=$(median <<< "${tps[$name]}")
  m=$(median <<< "${mem[$name]}")
  echo "| $cores | $name | ${tps[$name]% } | $t | $(awk "BEGIN {printf \"%.2fx\", $t / ${torch_tps[$cores]}}") | $m | $(awk "BEGIN {printf \"%.2fx\", $m / ${torch_mem[$cores]}}") | ${loss[$name]} |"
done
