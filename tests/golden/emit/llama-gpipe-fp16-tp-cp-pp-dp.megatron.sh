# Megatron-LM pretrain_gpt.py for quickstart: 32 GPUs = dp 4 x tp 2 x pp 4 x cp 1; 64 micro-batches of 1 per step
# On more than one node add torchrun's --node-rank and --master-addr (or --rdzv-*); replace
# --mock-data and NullTokenizer with your --data-path and tokenizer.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py \
  --num-layers 32 \
  --hidden-size 4096 \
  --ffn-hidden-size 14336 \
  --num-attention-heads 32 \
  --group-query-attention \
  --num-query-groups 8 \
  --max-position-embeddings 8192 \
  --seq-length 4096 \
  --position-embedding-type rope \
  --normalization RMSNorm \
  --swiglu \
  --untie-embeddings-and-output-weights \
  --disable-bias-linear \
  --attention-dropout 0 \
  --hidden-dropout 0 \
  --vocab-size 128256 \
  --tokenizer-type NullTokenizer \
  --mock-data \
  --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 4 \
  --use-tp-pp-dp-mapping \
  --sequence-parallel \
  --micro-batch-size 1 \
  --global-batch-size 256 \
  --recompute-granularity full \
  --recompute-method uniform \
  --recompute-num-layers 1 \
  --use-distributed-optimizer \
  --ddp-bucket-size 13107200 \
  --overlap-grad-reduce \
  --fp16 \
  --optimizer adam \
  --train-iters 28611
# not expressible as Megatron-LM arguments (what runs differs from the plan):
#   - schedule gpipe: Megatron-LM's pipeline runs 1F1B (the same work, fewer micro-batches in flight)
