#!/usr/bin/env python3
"""Writes a GPT-2 124M checkpoint of random weights in llm.c's format (train_gpt2.c's
gpt2_build_from_checkpoint: a 256-int header, magic 20240326, version 3, then the parameters in its
order), for bench/live_vs_peers.sh: llm.c's CPU trainer starts only from a checkpoint, and the
published weights are not downloaded here. GPT-2's initialization: normal(0, 0.02) matrices and
embeddings, residual projections 0.02 / sqrt(2 L), norm weights 1, biases 0.

  llmc_checkpoint.py OUT.bin
"""
import ctypes
import struct
import sys

import torch

maxT, V, L, NH, C, Vp = 1024, 50257, 12, 12, 768, 50304
torch.manual_seed(1337)
residual = 0.02 / (2 * L) ** 0.5
tensors = [  # (count, kind) in llm.c's order: wte wpe ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb
    (Vp * C, 0.02), (maxT * C, 0.02), (L * C, "one"), (L * C, "zero"), (L * 3 * C * C, 0.02), (L * 3 * C, "zero"),
    (L * C * C, residual), (L * C, "zero"), (L * C, "one"), (L * C, "zero"), (L * 4 * C * C, 0.02),
    (L * 4 * C, "zero"), (L * C * 4 * C, residual), (L * C, "zero"), (C, "one"), (C, "zero")]
with open(sys.argv[1], "wb") as out:
    out.write(struct.pack("256i", *([20240326, 3, maxT, V, L, NH, C, Vp] + [0] * 248)))
    for count, kind in tensors:
        t = torch.ones(count) if kind == "one" else torch.zeros(count) if kind == "zero" else torch.randn(count) * kind
        out.write(ctypes.string_at(t.data_ptr(), count * 4))
