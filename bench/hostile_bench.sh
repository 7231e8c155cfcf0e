#!/usr/bin/env bash
# Hostile input: what `paratwin` does with each of the inputs of issue 20 and a few more of the kind:
# its outcome (exit status and the first words of its message), the peak resident memory of the
# command and every process it started, and the wall time. With a second binary (the build before the
# change), the same inputs on it too, each under a 60 s and 4 GB cap.
# Usage: bench/hostile_bench.sh [BUILD_DIR] [OLD_PARATWIN]   (prints a Markdown table for bench/RESULTS.md)
set -uo pipefail
build=${1:-build}
old=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin/paratwin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick="$root/scenarios/quickstart.yaml"

python3 - "$tmp" "$quick" <<'PY'
import sys
tmp, quick = sys.argv[1], sys.argv[2]
scenario = open(quick).read()
bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    "a%d: &a%d [%s]\n" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10)) for i in range(1, 9))
files = {
    "bomb.yaml": bomb,
    "flat-list.yaml": scenario + "extra: [" + ",".join(["0"] * 400000) + "]\n",
    "many-keys.yaml": "name: m\n" + "".join("k%d: 1\n" % i for i in range(80000)),
    "long-grid.yaml": scenario + "sweep:\n  grid:\n    training.global_batch: [" +
                      ",".join(str(512 + i) for i in range(120000)) + "]\n",
    "long-list.yaml": scenario + "sweep:\n  list:\n" +
                      "".join("    - {training.global_batch: %d}\n" % (512 + i) for i in range(25000)),
    "alias-list.yaml": scenario + "sweep:\n  list:\n    - &e {cluster: {from: dgx-a100-80g, nodes: 4}}\n" +
                       "    - *e\n" * 70000,
    "deep.yaml": "layers: " + "[" * 300000 + "]" * 300000 + "\n",
}
for name, text in files.items():
    open(tmp + "/" + name, "w").write(text)
# A token file whose header promises 2^31 - 1 tokens in 1 KiB.
import struct
open(tmp + "/lie.bin", "wb").write(struct.pack("<256i", 20240520, 1, 2147483647, *([0] * 253)))
PY
seq_values() { seq -s, "$1" "$2"; }
grid8="--grid cluster.nodes=$(seq_values 1 10000) --grid training.global_batch=$(seq_values 1 10000)"
grid5="--grid training.global_batch=$(seq_values 1 1000) --grid training.seq_len=$(seq_values 1 100)"

cases=(
  "alias bomb, 8 levels of 10 (issue)|validate $tmp/bomb.yaml"
  "400,000-value list, 0.8 MB|validate $tmp/flat-list.yaml"
  "80,000 unknown keys, 0.9 MB|validate $tmp/many-keys.yaml"
  "grid axis of 120,000 values, 0.9 MB|validate $tmp/long-grid.yaml"
  "sweep list of 25,000 points, 1 MB|validate $tmp/long-list.yaml"
  "70,000 aliases of a point (490,000 nodes), 0.6 MB|validate $tmp/alias-list.yaml"
  "300,000 nested lists, 0.6 MB|validate $tmp/deep.yaml"
  "grid of 10^8 points|sweep $quick $grid8 --json $tmp/g8.json"
  "grid of 10^5 points, --jobs 2|sweep $quick $grid5 --jobs 2 --json $tmp/g5.json --csv $tmp/g5.csv"
  "--set training.global_batch=10^12 (issue)|plan $quick --set training.global_batch=1000000000000"
  "134M micro-batches per step|plan $quick --set training.global_batch=2147483632 --set plan.micro_batch=1"
  "simulate, horizon 10000 d, GPU MTBF 1 min|simulate $quick --set failures.gpu.mtbf=1min --horizon 10000d"
  "simulate gpt3-175b, 1000 iterations|simulate $root/scenarios/gpt3-175b-1024-a100.yaml --iterations 1000"
  "run --data: header promises 2^31 tokens|run $root/scenarios/live-cpu-tiny.yaml --ranks 2 --steps 2 --data $tmp/lie.bin"
)

measure() {  # binary, arguments: prints "status|peak MiB|wall s|first line of stderr"
  local binary=$1
  shift
  ( ulimit -v 4194304; timeout 60 /usr/bin/time -f "%x %M %e" -o "$tmp/time" $binary "$@" >/dev/null 2>"$tmp/err" )
  read -r status kib wall < <(tail -1 "$tmp/time" 2>/dev/null) || { status=killed; kib=0; wall=60; }
  [ "$status" = 124 ] && status="killed at 60 s"
  local said
  said=$(grep -m1 -E 'error|sweep .*points|done' "$tmp/err" | sed -E 's|/tmp/[^ :]*/||g' | cut -c1-110)
  printf '%s|%d|%s|%s' "$status" "$((kib / 1024))" "$wall" "$said"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo
if [ -n "$old" ]; then
  echo "| input | outcome | peak MiB | s | before: outcome | peak MiB | s |"
  echo "|---|---|---:|---:|---|---:|---:|"
else
  echo "| input | outcome | peak MiB | s |"
  echo "|---|---|---:|---:|"
fi
for c in "${cases[@]}"; do
  label=${c%%|*}
  args=${c#*|}
  IFS='|' read -r status mib wall said <<<"$(measure "$bin" $args)"
  row="| $label | exit $status: ${said:-(no message)} | $mib | $wall |"
  if [ -n "$old" ]; then
    IFS='|' read -r ostatus omib owall osaid <<<"$(measure "$old" $args)"
    row+=" exit $ostatus: ${osaid:-(no message)} | $omib | $owall |"
  fi
  echo "$row"
done
