#!/usr/bin/env bash
# `make fuzz`: runs each loader's libFuzzer target for a set time. Crashes land in BUILD/fuzz/crashes/;
# copy each one into tests/fuzz/regressions/<target>/ once fixed, so that `make test` replays it.
set -euo pipefail
build=${1:-build}
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
fuzz="$build/fuzz"
[ -x "$fuzz/fuzz_model" ] || { echo "fuzz: no fuzz targets in $fuzz (needs clang and libfuzzer-14-dev)" >&2; exit 1; }
mkdir -p "$fuzz/crashes"
status=0
for target in model cluster scenario; do
  case $target in model) seeds=$root/models ;; cluster) seeds=$root/topologies ;; scenario) seeds=$root/scenarios ;; esac
  mkdir -p "$fuzz/corpus/$target"
  echo "fuzz: $target for ${seconds}s"
  PARATWIN_HOME=$root "$fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$fuzz/crashes/$target-" -print_final_stats=1 \
    "$fuzz/corpus/$target" "$seeds" "$root/tests/fuzz/regressions/$target" 2>&1 | grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)' || status=1
done
ls "$fuzz/crashes" 2>/dev/null | grep -q . && { echo "fuzz: crashes found in $fuzz/crashes" >&2; status=1; }
exit $status
