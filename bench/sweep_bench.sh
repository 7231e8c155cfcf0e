#!/usr/bin/env bash
# Sweep throughput: points per second of `paratwin sweep` on the 100-point sweep bench/sweep-100.yaml
# (GPT 1.7B, plan fixed but dp, 4 clusters x 5 sizes x 5 global batches), evaluated analytically and
# simulated, with 1 and 2 worker processes and on 2 MPI ranks; and of the capacity example, whose
# points each search a plan. Wall time counts the workers' start (about 0.2 s each); CPU time is
# that of every process of the sweep (coordinator, workers, simulations).
# Usage: bench/sweep_bench.sh [BUILD_DIR]   (prints a Markdown table to paste into bench/RESULTS.md)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin/paratwin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)

run() {  # label, then the command line
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" --json "$tmp/out.json" >/dev/null 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; exit 1; }
  python3 - "$tmp/out.json" "$label" $(cat "$tmp/time") <<'PY'
import json, sys
results, label = json.load(open(sys.argv[1])), sys.argv[2]
wall, cpu = float(sys.argv[3]), float(sys.argv[4]) + float(sys.argv[5])
points = results["sweep"]["points"]
ok = sum(p["status"] == "ok" for p in results["points"])
print("| %-46s | %6d | %5d | %8.2f | %8.1f | %8.1f |" % (label, points, ok, wall, points / wall, points / cpu))
PY
}

sweep100="$root/bench/sweep-100.yaml"
capacity="$root/scenarios/capacity-llama3-70b.yaml"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo
echo "| sweep | points | ok | wall s | points/s | points per CPU-s |"
echo "|---|---:|---:|---:|---:|---:|"
run "sweep-100, analytic, --jobs 1" "$bin" sweep "$sweep100"
run "sweep-100, analytic, --jobs 2" "$bin" sweep "$sweep100" --jobs 2
run "sweep-100, analytic, mpirun -np 2" "${mpi[@]}" "$bin" sweep "$sweep100"
run "sweep-100, simulated, --jobs 1" "$bin" sweep "$sweep100" --set sweep.simulate=true
run "sweep-100, simulated, --jobs 2" "$bin" sweep "$sweep100" --set sweep.simulate=true --jobs 2
run "capacity-llama3-70b (plan searched), --jobs 2" "$bin" sweep "$capacity" --jobs 2
