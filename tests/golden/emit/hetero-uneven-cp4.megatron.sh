# Megatron-LM pretrain_gpt.py for hetero-h100-a100: 128 GPUs = dp 4 x tp 2 x pp 4 x cp 4; 256 micro-batches of 1 per step
# On more than one node add torchrun's --node-rank and --master-addr (or --rdzv-*); replace
# --mock-data and NullTokenizer with your --data-path and tokenizer.
# Pipeline ranks 0..3 run on pools a100, a100, h100, h100: give torchrun the nodes in that order.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 16 --nproc-per-node 8 pretrain_gpt.py \
  --num-layers 80 \
  --hidden-size 8192 \
  --ffn-hidden-size 28672 \
  --num-attention-heads 64 \
  --group-query-attention \
  --num-query-groups 8 \
  --max-position-embeddings 4096 \
  --seq-length 4096 \
  --position-embedding-type rope \
  --normalization RMSNorm \
  --swiglu \
  --untie-embeddings-and-output-weights \
  --disable-bias-linear \
  --attention-dropout 0 \
  --hidden-dropout 0 \
  --vocab-size 32000 \
  --tokenizer-type NullTokenizer \
  --mock-data \
  --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 4 \
  --context-parallel-size 4 \
  --cp-comm-type allgather \
  --sequence-parallel \
  --micro-batch-size 1 \
  --global-batch-size 1024 \
  --pipeline-model-parallel-layout "E,t*11|t*11|t*29|t*29,L" \
  --use-distributed-optimizer \
  --ddp-bucket-size 13107200 \
  --overlap-grad-reduce \
  --bf16 \
  --grad-reduce-in-bf16 \
  --optimizer adam \
  --train-iters 476838
