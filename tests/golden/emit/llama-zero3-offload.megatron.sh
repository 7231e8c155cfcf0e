# Megatron-LM pretrain_gpt.py for quickstart: 32 GPUs = dp 16 x tp 2 x pp 1 x cp 1; 16 micro-batches of 1 per step
# On more than one node add torchrun's --node-rank and --master-addr (or --rdzv-*); replace
# --mock-data and NullTokenizer with your --data-path and tokenizer.
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
  --pipeline-model-parallel-size 1 \
  --sequence-parallel \
  --micro-batch-size 1 \
  --global-batch-size 256 \
  --recompute-granularity selective \
  --use-distributed-optimizer \
  --use-megatron-fsdp \
  --data-parallel-sharding-strategy optim_grads_params \
  --ckpt-format fsdp_dtensor \
  --optimizer-cpu-offload \
  --use-precision-aware-optimizer \
  --ddp-bucket-size 13107200 \
  --overlap-grad-reduce \
  --bf16 \
  --grad-reduce-in-bf16 \
  --optimizer adam \
  --train-iters 28611
