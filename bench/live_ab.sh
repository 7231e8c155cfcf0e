#!/usr/bin/env bash
# Live CPU throughput of two builds side by side: bench/live_bench.sh on BEFORE and AFTER, alternated
# round by round in one session (this VM's speed drifts with the other jobs on it), then the median
# per row. A build is a directory holding bin/paratwin and bin/paratwin-rank.
#   bench/live_ab.sh BEFORE_BUILD AFTER_BUILD     (ROUNDS=3 rounds; STEPS as live_bench.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1
after=$2
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    build=$before
    [ "$side" = after ] && build=$after
    # The two paratwin rows of the table: tokens/s and final loss of 1 and 2 ranks.
    bash bench/live_bench.sh "$build" | grep '^| paratwin run' |
      awk -F'|' -v side="$side" -v round="$round" '{gsub(/ /, "", $3); gsub(/ /, "", $6); print side, round, ($2 ~ /1 rank/ ? 1 : 2), $3, $6}' \
        >> "$tmp/rows.txt"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/rows.txt" "$rounds" << 'EOF2'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
rounds = int(sys.argv[2])
print()
print("| ranks | before: tokens/s per round | after: tokens/s per round | median before | median after | after / before | final loss before, after |")
print("|---|---|---|---|---|---|---|")
for ranks in ("1", "2"):
    b = [float(r[3]) for r in rows if r[0] == "before" and r[2] == ranks]
    a = [float(r[3]) for r in rows if r[0] == "after" and r[2] == ranks]
    lb = [r[4] for r in rows if r[0] == "before" and r[2] == ranks][-1]
    la = [r[4] for r in rows if r[0] == "after" and r[2] == ranks][-1]
    mb, ma = statistics.median(b), statistics.median(a)
    print(f"| {ranks} | {', '.join(f'{x:.0f}' for x in b)} | {', '.join(f'{x:.0f}' for x in a)} | "
          f"{mb:.0f} | {ma:.0f} | {ma / mb:.2f} | {lb}, {la} |")
EOF2
