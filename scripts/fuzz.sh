#!/usr/bin/env bash
# `make fuzz`: runs each reader's libFuzzer target (tests/fuzz) for a set time, one after the other, from
# its committed corpus (tests/fuzz/corpus/TARGET) and the catalog. New inputs land in BUILD/fuzz/corpus/;
# crashes, leaks and slow inputs in BUILD/fuzz/crashes/ (copy each one into
# tests/fuzz/regressions/TARGET/ once fixed, so that `make test` replays it). Each target's summary
# (runs, coverage, peak memory, slowest input) goes to BUILD/fuzz/summary.txt.
#   scripts/fuzz.sh BUILD SECONDS [TARGET...]
set -euo pipefail
build=${1:-build}
seconds=${2:-60}
shift $(( $# > 2 ? 2 : $# ))
root=$(cd "$(dirname "$0")/.." && pwd)
fuzz="$build/fuzz"
targets=("$@")
[ -x "$fuzz/fuzz_model" ] || { echo "fuzz: no fuzz targets in $fuzz (needs clang and libfuzzer-14-dev)" >&2; exit 1; }
# Every target built (tests/CMakeLists.txt's list) unless some are named.
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$fuzz"/fuzz_*; do [ -f "$f" ] && [ -x "$f" ] && targets+=("${f##*/fuzz_}"); done
fi
mkdir -p "$fuzz/crashes"
status=0
for target in "${targets[@]}"; do
  seeds=()
  case $target in model) seeds=("$root/models") ;; cluster) seeds=("$root/topologies") ;; scenario) seeds=("$root/scenarios") ;; esac
  [ -d "$root/tests/fuzz/regressions/$target" ] && seeds+=("$root/tests/fuzz/regressions/$target")
  mkdir -p "$fuzz/corpus/$target"
  echo "fuzz: $target for ${seconds}s"
  # -timeout=2: an input that takes longer than 2 s is a finding (a "timeout" artifact), as is a leak.
  log="$fuzz/$target.log"
  PARATWIN_HOME=$root "$fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=2 -rss_limit_mb=2048 -detect_leaks=1 \
    -artifact_prefix="$fuzz/crashes/$target-" -print_final_stats=1 \
    "$fuzz/corpus/$target" "$root/tests/fuzz/corpus/$target" "${seeds[@]}" >"$log" 2>&1 || status=1
  {
    echo "== $target (${seconds}s)"
    grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|stat::slowest_unit_time_sec|==[0-9]+==ERROR|SUMMARY|Done)' "$log" || true
  } | tee -a "$fuzz/summary.txt"
done
ls "$fuzz/crashes" 2>/dev/null | grep -q . && { echo "fuzz: findings in $fuzz/crashes" >&2; status=1; }
exit $status
