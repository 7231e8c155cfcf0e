#!/usr/bin/env bash
# How accurate the twin is on published training runs (bench/fidelity/, issue 19): per checked run the
# measured and predicted iteration time and the signed error; mean, P90 and max absolute error per
# source, per device, per kind of run and overall; the twin's peak memory against published peaks and
# out-of-memory configurations; the runs that are not expressible, apart; the test_fidelity guards;
# and the picture of predicted against measured. The analytic evaluator, well under a minute.
#   bench/fidelity.sh [BUILD] [OUT] [--simulate]   writes OUT/fidelity.{md,json,png} (OUT: BUILD/fidelity);
#   --simulate also runs every checked run through the simulator (about 4 min on 2 cores)
# docs/fidelity.md shows OUT/fidelity.png as docs/fidelity.png and the tables of OUT/fidelity.md.
set -euo pipefail
build=${1:-build}
out=${2:-$build/fidelity}
mkdir -p "$out"
cmake --build "$build" --target bench_fidelity >/dev/null
"$build/bin/bench_fidelity" --json "$out/fidelity.json" --png "$out/fidelity.png" "${@:3}" | tee "$out/fidelity.md"
echo
echo "wrote $out/fidelity.md, $out/fidelity.json and $out/fidelity.png"
