#!/usr/bin/env bash
# `make bench`: every benchmark, one after the other (the simulator and live benches take minutes).
# Results are recorded by hand in bench/RESULTS.md with the command that produced them; this machine
# is shared, so compare ratios measured in one run.
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
"$build/bin/bench_plan"
"$build/bin/bench_search"
[ -x "$build/bin/bench_gui_timeline" ] && QT_QPA_PLATFORM=offscreen "$build/bin/bench_gui_timeline"
bash "$here/sim_bench.sh" "$build"
bash "$here/live_bench.sh" "$build"
bash "$here/sweep_bench.sh" "$build"
bash "$here/fidelity.sh" "$build"
