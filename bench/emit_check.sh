#!/usr/bin/env bash
# Do Megatron-LM and DeepSpeed accept the plans ParaTwin emits, and run what the plan says? Every catalog
# scenario's plan and a cross product of plan features go through `paratwin plan --emit megatron|deepspeed`
# and then through the frameworks' own checks (bench/emit_check.py): Megatron-LM's parser, validate_args
# and config classes, its micro-batch count and each pipeline chunk's layers; DeepSpeed's config classes,
# checkpointing.configure and engine checks. Plans DeepSpeed cannot run must be refused by ParaTwin (exit 2,
# with the reason) and by DeepSpeed's own checks too.
# Usage: MEGATRON_DIR=... DEEPSPEED_DIR=... bench/emit_check.sh [BUILD_DIR]
#   MEGATRON_DIR: a checkout of NVIDIA/Megatron-LM; DEEPSPEED_DIR: one of deepspeedai/DeepSpeed (its
#   deepspeed/ package and op_builder/ suffice). Python 3.11 with pydantic 2, and Debian's python3-torch,
#   python3-yaml, python3-packaging, python3-msgpack, python3-psutil, python3-cpuinfo, python3-tqdm.
# Prints a Markdown table (case, Megatron-LM, DeepSpeed, problems and refusals) and the stubs used; exits 1
# when a case is not accepted by a framework (or refused by both ParaTwin and DeepSpeed).
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin/paratwin"
: "${MEGATRON_DIR:?set MEGATRON_DIR to a Megatron-LM checkout}"
: "${DEEPSPEED_DIR:?set DEEPSPEED_DIR to a DeepSpeed checkout}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "${EMIT_CHECK_KEEP:-}" ] && trap - EXIT && echo "cases and logs in $tmp" >&2  # keep them to look into
mkdir "$tmp/cases"

emit() {  # case name, scenario, then --set arguments
  local name=$1 scenario=$2 dir="$tmp/cases/$1"
  shift 2
  mkdir "$dir"
  "$bin" plan "$scenario" "$@" --emit plan >"$dir/plan.yaml"
  "$bin" plan "$scenario" "$@" --emit megatron >"$dir/megatron.sh"
  set +e
  "$bin" plan "$scenario" "$@" --emit deepspeed >"$dir/deepspeed.json" 2>"$dir/deepspeed.err"
  echo $? >"$dir/deepspeed.rc"
  set -e
}

# Every catalog scenario as written (plan: auto ones are searched).
# (A scenario of several jobs has no one plan to emit.)
for f in "$root"/scenarios/*.yaml; do
  grep -q "^jobs:" "$f" && continue
  emit "catalog-$(basename "$f" .yaml)" "$f"
done
emit catalog-quickstart-auto "$root/scenarios/quickstart.yaml" --set plan=auto

# A cross product of plan features on Llama 3 8B (GQA, SwiGLU, RMSNorm, RoPE, untied, no bias) over 32 A100s.
q="$root/scenarios/quickstart.yaml"
llama=(--set model=llama3-8b --set training.global_batch=256 --set training.seq_len=4096 --set plan.micro_batch=1)
dense() { emit "$1" "$q" "${llama[@]}" "${@:2}"; }
for zero in 0 1 2 3; do
  dense "zero$zero-pp1" --set plan.zero=$zero --set plan.tp=2 --set plan.pp=1 --set plan.dp=16
  dense "zero$zero-pp4" --set plan.zero=$zero --set plan.tp=2 --set plan.pp=4 --set plan.dp=4
done
for r in none selective full; do
  dense "recompute-$r" --set plan.recompute=$r --set plan.tp=2 --set plan.pp=2 --set plan.dp=8
done
dense sp-off-tp4 --set plan.sequence_parallel=false --set plan.tp=4 --set plan.pp=1 --set plan.dp=8
dense overlap-tp --set plan.overlap.tp=true --set plan.tp=4 --set plan.pp=1 --set plan.dp=8
dense interleaved-even --set plan.tp=2 --set plan.pp=4 --set plan.dp=4 --set plan.schedule=interleaved \
  --set plan.virtual_stages=2
dense interleaved-uneven --set plan.tp=2 --set plan.pp=4 --set plan.dp=4 --set plan.schedule=interleaved \
  --set plan.virtual_stages=3
dense pp3-uneven --set cluster.nodes=3 --set plan.tp=2 --set plan.pp=3 --set plan.dp=4
dense gpipe --set plan.tp=2 --set plan.pp=4 --set plan.dp=4 --set plan.schedule=gpipe
dense order-tp-cp-pp-dp --set plan.tp=2 --set plan.pp=4 --set plan.dp=4 --set plan.order=tp-cp-pp-dp
dense cp2 --set plan.tp=2 --set plan.cp=2 --set plan.pp=1 --set plan.dp=8
dense cp2-order-tp-dp-cp-pp --set plan.tp=2 --set plan.cp=2 --set plan.pp=1 --set plan.dp=8 \
  --set plan.order=tp-dp-cp-pp
dense offload-optimizer-zero1 --set plan.offload.optimizer=true --set plan.zero=1 --set plan.tp=2 --set plan.pp=1 \
  --set plan.dp=16
dense offload-optimizer-zero3 --set plan.offload.optimizer=true --set plan.zero=3 --set plan.tp=2 --set plan.pp=1 \
  --set plan.dp=16
dense offload-activations --set plan.offload.activations=true --set plan.recompute=none --set plan.tp=2 \
  --set plan.pp=1 --set plan.dp=16
dense offload-activations-full --set plan.offload.activations=true --set plan.recompute=full --set plan.tp=2 \
  --set plan.pp=1 --set plan.dp=16
dense topk --set plan.compression.kind=topk --set plan.compression.ratio=0.01 --set plan.tp=2 --set plan.pp=1 \
  --set plan.dp=16
dense fp16 --set training.precision=fp16 --set plan.tp=2 --set plan.pp=2 --set plan.dp=8

# Mixtral 8x7B (8 experts, top 2) over 64 A100s: ep, ZeRO and pipelines.
moe=(--set model=mixtral-8x7b --set cluster.nodes=8 --set training.global_batch=256 --set training.seq_len=4096
  --set plan.micro_batch=1 --set plan.tp=2)
emit moe-ep4-zero1 "$q" "${moe[@]}" --set plan.ep=4 --set plan.zero=1 --set plan.pp=1 --set plan.dp=32
emit moe-ep2-zero2-pp2 "$q" "${moe[@]}" --set plan.ep=2 --set plan.zero=2 --set plan.pp=2 --set plan.dp=16
emit moe-ep2-zero3 "$q" "${moe[@]}" --set plan.ep=2 --set plan.zero=3 --set plan.pp=1 --set plan.dp=32
emit moe-ep8-cp2 "$q" "${moe[@]}" --set plan.ep=8 --set plan.cp=2 --set plan.pp=1 --set plan.dp=16

# GPT-3 175B: 126 layers over pp 16, and 96 layers at v = 5 (the uneven layouts of issue 28).
g="$root/scenarios/gpt3-175b-1024-a100.yaml"
emit gpt3-126-layers-pp16 "$g" --set model.layers=126 --set plan.pp=16 --set plan.dp=8 --set plan.schedule=1f1b \
  --set plan.virtual_stages=1
emit gpt3-v5 "$g" --set plan.virtual_stages=5

run() {
  PYTHONPATH="$1:$root/bench" python3 "$root/bench/emit_check.py" "$2" "$tmp/cases" >"$tmp/$2.tsv" 2>"$tmp/$2.log" ||
    { tail -20 "$tmp/$2.log" >&2; exit 1; }
}
run "$MEGATRON_DIR" megatron
run "$DEEPSPEED_DIR" deepspeed

python3 - "$tmp" <<'PY'
import sys
tmp = sys.argv[1]
def table(name):
    rows, stubs = {}, []
    for line in open('%s/%s.tsv' % (tmp, name)):
        case, verdict, problems = (line.rstrip('\n').split('\t') + [''])[:3]
        (stubs.append((verdict, problems)) if case == 'stub' else rows.__setitem__(case, (verdict, problems)))
    return rows, stubs
megatron, megatron_stubs = table('megatron')
deepspeed, deepspeed_stubs = table('deepspeed')
bad = 0
print('| case | Megatron-LM | DeepSpeed | problems, refusals (ParaTwin; the framework) |')
print('|---|---|---|---|')
for case in sorted(megatron):
    (m, mp), (d, dp) = megatron[case], deepspeed[case]
    refused_by_both = d == 'refused' and dp.count('DeepSpeed: ') == 1
    bad += m != 'accepted' or not (d == 'accepted' or refused_by_both)
    print('| %s | %s | %s | %s |' % (case, m, d, '; '.join(x for x in (mp, dp) if x).replace('|', '\\|')))
print('\n%d cases: %d accepted by Megatron-LM; %d accepted by DeepSpeed, %d refused by ParaTwin and DeepSpeed alike'
      % (len(megatron), sum(v[0] == 'accepted' for v in megatron.values()),
         sum(v[0] == 'accepted' for v in deepspeed.values()), sum(v[0] == 'refused' for v in deepspeed.values())))
def grouped(title, stubs):
    print('\nstubs (%s), by what they stand for:' % title)
    for why in dict.fromkeys(w for w, _ in stubs):
        names = [n for w, n in stubs if w == why]
        print('- %s (%d): %s' % (why, len(names), ', '.join(names)))
grouped('Megatron-LM', megatron_stubs)
grouped('DeepSpeed', deepspeed_stubs)
sys.exit(1 if bad else 0)
PY
