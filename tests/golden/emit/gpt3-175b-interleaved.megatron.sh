# Megatron-LM pretrain_gpt.py for gpt3-175b-1024-a100: 1024 GPUs = dp 16 x tp 8 x pp 8 x cp 1; 96 micro-batches of 1 per step
# On more than one node add torchrun's --node-rank and --master-addr (or --rdzv-*); replace
# --mock-data and NullTokenizer with your --data-path and tokenizer.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 128 --nproc-per-node 8 pretrain_gpt.py \
  --num-layers 96 \
  --hidden-size 12288 \
  --ffn-hidden-size 49152 \
  --num-attention-heads 96 \
  --max-position-embeddings 2048 \
  --seq-length 2048 \
  --vocab-size 51200 \
  --tokenizer-type NullTokenizer \
  --mock-data \
  --tensor-model-parallel-size 8 \
  --pipeline-model-parallel-size 8 \
  --sequence-parallel \
  --micro-batch-size 1 \
  --global-batch-size 1536 \
  --num-layers-per-virtual-pipeline-stage 6 \
  --recompute-granularity selective \
  --use-distributed-optimizer \
  --ddp-bucket-size 13107200 \
  --overlap-grad-reduce \
  --bf16 \
  --grad-reduce-in-bf16 \
  --optimizer adam \
  --train-iters 95368
