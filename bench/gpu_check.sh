#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine (one H200, 16 cores; about 10 minutes). It has NOT yet run
# on a GPU: it was written on a machine without one, so this is its first trial.
#   bash bench/gpu_check.sh [BUILD_DIR]        (default build-gpu; writes BUILD_DIR/gpu-check/)
# 1. builds paratwin, paratwin-rank and the GPU tests for sm_90 (the H200);
# 2. runs the GPU tests: every kernel against the CPU kernels, and training steps of a small GPT
#    against the CPU model, with explicit tolerances (max differences printed);
# 3. trains a 355M GPT and gpt2-124m on the GPU (`paratwin run --backend cuda`): tokens/s and MFU;
# 4. calibrates dgx-h200 on the 355M profiles and checks the twin's prediction of gpt2-124m's
#    iteration time against the measured one;
# 5. measures sustained bf16 and fp8 GEMM rates by shape (bench_gemm_sweep, about 2 minutes) and fits
#    the GPU's catalog device to them (paratwin calibrate --gemm-sweep): the component measurement the
#    catalog's H100 GEMM shares lack (docs/fidelity.md); keep OUT/gemm-sweep.csv.
# Targets: MFU >= 35% for the 355M model; prediction within 10%. Exit status 1 when a test fails or
# a target is missed. Paste the output into bench/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=$BUILD/gpu-check
STEPS=${STEPS:-20}
start=$(date +%s)
status=0
say() { printf '\n== %s (%ds)\n' "$1" $(( $(date +%s) - start )); }

say "GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "no GPU: nothing to check"; exit 1; }

say "build (CUDA architecture 90)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPARATWIN_GUI=OFF -DPARATWIN_FUZZERS=OFF >"$BUILD.configure.log" 2>&1 || { tail -30 "$BUILD.configure.log"; exit 1; }
grep -q "CUDA+cuBLAS+NCCL: found" "$BUILD.configure.log" || { echo "the CUDA toolkit, cuBLASLt or NCCL was not found"; grep CUDA "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target paratwin paratwin-rank test_cuda_host test_cuda_kernels test_cuda_gpt \
  bench_gemm_sweep \
  >"$BUILD.build.log" 2>&1 || { grep -B2 -A12 -m3 "error" "$BUILD.build.log"; exit 1; }
mkdir -p "$OUT"
BIN=$BUILD/bin

say "GPU tests: kernels and training steps against the CPU backend"
for t in test_cuda_host test_cuda_kernels test_cuda_gpt; do
  "$BIN/$t" --log_level=message --report_level=short || { echo "FAILED: $t"; status=1; }
done

# One live run on the GPU; prints its report's figures. $1 name, $2 scenario, the rest paratwin flags.
run_live() {
  local name=$1 scenario=$2; shift 2
  "$BIN/paratwin" run "$scenario" --backend cuda --ranks 1 --steps "$STEPS" --json "$OUT/$name.json" "$@" \
    >"$OUT/$name.log" 2>&1 || { echo "FAILED: paratwin run $scenario $*"; tail -20 "$OUT/$name.log"; status=1; return 1; }
  tail -3 "$OUT/$name.log"
}
# Median of the report's measured busy iteration times, and its MFU and tokens/s.
figures() {
  python3 - "$1" <<'PY'
import json, sys, statistics
r = json.load(open(sys.argv[1]))
busy = sorted(r.get("iteration_busy_s") or [r["metrics"]["iteration_time_s"]])
m = r["metrics"]
print(f'{statistics.median(busy):.6f} {m["mfu"]:.4f} {m["tokens_per_s"]:.0f} {r["predicted"]["iteration_time_s"]:.6f}')
PY
}

M350=bench/gpu/live-gpu-350m.yaml
G124=scenarios/live-gpu-gpt2.yaml
say "355M GPT: 16 x 1024 tokens per step (calibration run 1)"
run_live m350 "$M350" --profile "$OUT/p350a.json"
say "355M GPT: 16 x 512 tokens per step (calibration run 2)"
run_live m350b "$M350" --set training.seq_len=512 --profile "$OUT/p350b.json"
say "gpt2-124m: 16 x 1024 tokens per step"
run_live g124 "$G124"

say "calibrate dgx-h200 on the 355M profiles"
"$BIN/paratwin" calibrate "$OUT/p350a.json" "$OUT/p350b.json" --cluster dgx-h200 -o "$OUT/h200-calibrated.yaml" \
  || { echo "FAILED: paratwin calibrate"; status=1; }
predict() {  # the calibrated twin's iteration time of a scenario on one GPU
  "$BIN/paratwin" plan "$1" --set cluster="$OUT/h200-calibrated.yaml" --set cluster.nodes=1 \
    --set cluster.pools.dgx.gpus_per_node=1 --set plan.dp=1 --json "$OUT/predicted.json" >/dev/null \
    && python3 -c "import json;print(json.load(open('$OUT/predicted.json'))['metrics']['iteration_time_s'])"
}

say "summary"
read -r m350_s m350_mfu m350_tps m350_pred < <(figures "$OUT/m350.json")
read -r g124_s g124_mfu g124_tps g124_pred < <(figures "$OUT/g124.json")
g124_cal=$(predict "$G124")
python3 - "$m350_s" "$m350_mfu" "$m350_tps" "$m350_pred" "$g124_s" "$g124_mfu" "$g124_tps" "$g124_pred" "${g124_cal:-nan}" <<'PY' || status=1
import sys
m_s, m_mfu, m_tps, m_pred, g_s, g_mfu, g_tps, g_pred, g_cal = map(float, sys.argv[1:])
print(f"{'run':<26}{'iteration':>12}{'tokens/s':>12}{'MFU':>8}{'twin before':>14}{'twin calibrated':>17}")
print(f"{'355M, 16 x 1024':<26}{m_s*1e3:>10.1f}ms{m_tps:>12.0f}{m_mfu*100:>7.1f}%{m_pred*1e3:>12.1f}ms{'(fitted here)':>17}")
print(f"{'gpt2-124m, 16 x 1024':<26}{g_s*1e3:>10.1f}ms{g_tps:>12.0f}{g_mfu*100:>7.1f}%{g_pred*1e3:>12.1f}ms{g_cal*1e3:>15.1f}ms")
error = abs(g_cal / g_s - 1)
ok_mfu, ok_pred = m_mfu >= 0.35, error <= 0.10
print(f"target MFU >= 35% on the 355M model: {m_mfu*100:.1f}% {'PASS' if ok_mfu else 'MISS'}")
print(f"target calibrated prediction within 10% (gpt2-124m): {error*100:.1f}% {'PASS' if ok_pred else 'MISS'}")
sys.exit(0 if ok_mfu and ok_pred else 1)
PY
say "sustained GEMM rates by shape (bench_gemm_sweep), fitted to the catalog's device"
nvidia-smi --query-gpu=name,power.limit,power.default_limit,clocks.max.sm --format=csv,noheader
"$BIN/bench_gemm_sweep" -o "$OUT/gemm-sweep.csv" || { echo "FAILED: bench_gemm_sweep"; status=1; }
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) catalog=dgx-h200 ;; *H100*) catalog=dgx-h100 ;; *A100*) catalog=dgx-a100-80g ;; *) catalog= ;;
esac
if [ -n "$catalog" ] && [ -f "$OUT/gemm-sweep.csv" ]; then
  "$BIN/paratwin" calibrate --cluster "$catalog" --gemm-sweep "$OUT/gemm-sweep.csv" -o "$OUT/gemm-calibrated.yaml" \
    || { echo "FAILED: paratwin calibrate --gemm-sweep"; status=1; }
fi

say "done (status $status)"
exit $status
