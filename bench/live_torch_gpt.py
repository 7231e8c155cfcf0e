#!/usr/bin/env python3
"""The PyTorch reference of bench/live_bench.sh and bench/live_vs_peers.sh: a GPT-2-shaped model (tiny-gpt,
or GPT-2 124M with --model gpt2) trained as `paratwin run` trains it: byte tokens of the same corpus, the
same batch shape, AdamW (betas 0.9/0.95, weight decay 0.1), gradient clipping at 1, fp32. PyTorch's own
defaults otherwise, as a user would run it. Prints tokens/s over the steps after a warm-up, and which
BLAS PyTorch loaded.

  live_torch_gpt.py B T STEPS [DATA] [--model tiny|gpt2] [--threads N]
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"tiny": (4, 128, 4, 256, 128), "gpt2": (12, 768, 12, 50257, 1024)}  # layers, width, heads, vocab, max T

parser = argparse.ArgumentParser()
parser.add_argument("batch", type=int, nargs="?", default=4)
parser.add_argument("seq", type=int, nargs="?", default=64)
parser.add_argument("steps", type=int, nargs="?", default=20)
parser.add_argument("data", nargs="?", default="data/tiny-corpus.txt")
parser.add_argument("--model", choices=SHAPES, default="tiny")
parser.add_argument("--threads", type=int, default=1)
args = parser.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(1337)
L, C, H, V, MAXT = SHAPES[args.model]
B, T, STEPS = args.batch, args.seq, args.steps


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // H)
        att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(MAXT, C)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def blas_in_use():
    try:
        from threadpoolctl import threadpool_info
        found = [f"{i.get('internal_api')} {i.get('version')} ({i.get('threading_layer', '?')} threads)"
                 for i in threadpool_info() if i.get("user_api") == "blas"]
        return ", ".join(found) or "none found"
    except ImportError:
        return "unknown (threadpoolctl missing)"


def gpt2_init(module):
    # GPT-2's initialization, as paratwin's: normal(0, 0.02) weights, zero biases (LayerNorm's defaults).
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear):
        nn.init.zeros_(module.bias)


data = torch.tensor(list(open(args.data, "rb").read()), dtype=torch.long)
model = Gpt()
model.apply(gpt2_init)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
times = []
for step in range(STEPS):
    t0 = time.perf_counter()
    starts = [(step * B + i) * T for i in range(B)]
    x = torch.stack([data[s:s + T] for s in starts])
    y = torch.stack([data[s + 1:s + T + 1] for s in starts])
    loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    times.append(time.perf_counter() - t0)
mean = sum(times[1:]) / (len(times) - 1)
print(f"torch {torch.__version__} tokens_per_s {B * T / mean:.0f} step_ms {mean * 1e3:.2f} loss {loss.item():.4f}")
print(f"blas {blas_in_use()}")
