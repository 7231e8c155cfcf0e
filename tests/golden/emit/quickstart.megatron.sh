# Megatron-LM pretrain_gpt.py for quickstart: 32 GPUs = dp 16 x tp 2 x pp 1 x cp 1; 8 micro-batches of 4 per step
# On more than one node add torchrun's --node-rank and --master-addr (or --rdzv-*); replace
# --mock-data and NullTokenizer with your --data-path and tokenizer.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py \
  --num-layers 24 \
  --hidden-size 2304 \
  --ffn-hidden-size 9216 \
  --num-attention-heads 24 \
  --max-position-embeddings 2048 \
  --seq-length 2048 \
  --vocab-size 51200 \
  --tokenizer-type NullTokenizer \
  --mock-data \
  --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 1 \
  --sequence-parallel \
  --micro-batch-size 4 \
  --global-batch-size 512 \
  --recompute-granularity selective \
  --use-distributed-optimizer \
  --ddp-bucket-size 13107200 \
  --overlap-grad-reduce \
  --bf16 \
  --grad-reduce-in-bf16 \
  --optimizer adam \
  --train-iters 28611
