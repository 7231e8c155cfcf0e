#!/usr/bin/env bash
# `make bench`: every benchmark, one after the other. Results are recorded by hand in bench/RESULTS.md
# with the command that produced them; this machine is shared, so compare ratios measured in one run.
set -euo pipefail
build=${1:-build}
"$build/bin/bench_plan"
