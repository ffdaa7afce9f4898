"""A tiny GPT: pre-LayerNorm blocks, learned positions, written to be read (nanoGPT's model.py at this size).

Shapes: B batch, T time, C = d_model channels, H heads, D = C // H head size, V vocabulary.

This file is the model as it is defined. The lab runs it through the fast paths in core/fast.py (decoding with a KV
cache, several sequences packed into one row, a training loss that skips what no target needs): functions that run
this model's own modules and are tested equal to GPT.forward (tests/core/test_fast.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import Count


@dataclass
class GPTConfig:
    vocab_size: int = 18
    """number of token ids"""
    d_model: int = 64
    """residual stream width"""
    n_layers: Count = 4
    """transformer blocks"""
    n_heads: Count = 4
    """attention heads per block"""
    max_len: int = 24
    """longest sequence (learned position table size)"""


class Attention(nn.Module):
    """Causal multi-head self-attention: each position mixes the values of itself and of the positions before it."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)   # queries, keys and values of every head in one matmul
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)                 # (B, T, C) each
        q = q.view(B, T, H, C // H).transpose(1, 2)           # (B, H, T, D)
        k = k.view(B, T, H, C // H).transpose(1, 2)           # (B, H, T, D)
        v = v.view(B, T, H, C // H).transpose(1, 2)           # (B, H, T, D)
        # Decoding writes one token at a time. Rerunning the whole sequence at every step would recompute k and v
        # of the earlier positions, which never change (attention is causal: a position's k and v depend on the
        # tokens up to it only). A KV cache stores them, per layer, row and position, so that a decoding step runs
        # the new token alone, its query attending to the cached keys: one position's work a step, not the whole
        # sequence's. core/fast.py has the cache (fast.KVCache) and the forward that fills and reads it
        # (fast.forward(model, ids, cache=cache)).

        # softmax(q k^T / sqrt(D)) v, each query seeing itself and the keys before it, in one fused kernel; in full:
        #   att = (q @ k.transpose(-2, -1)) * (C // H) ** -0.5                           # (B, H, T, T)
        #   att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
        #   y = att @ v
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, C)                # the heads side by side again
        return self.proj(y)


class MLP(nn.Sequential):
    """Position-wise feed-forward: widen to 4C, GELU, back to C (a Sequential: its weights are mlp.0 and mlp.2)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model))


class Block(nn.Module):
    """A transformer block: attention, then a position-wise MLP, each added to the residual stream x."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))     # (B, T, C)
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size: int = 18, d_model: int = 64, n_layers: int = 4, n_heads: int = 4, max_len: int = 24):
        super().__init__()
        self.cfg = GPTConfig(vocab_size, d_model, n_layers, n_heads, max_len)
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(self.cfg) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        # PyTorch's default init (N(0, 1) embeddings, U(+-1/sqrt(fan_in)) linears), not GPT-2's N(0, 0.02): at
        # d = 64 the small init leaves attention uniform and the model sits on a plateau for hundreds of steps
        # before it finds the digit it must add.

    def config(self) -> dict:
        return asdict(self.cfg)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None):
        """ids (B, T) -> logits (B, T, V), and the mean cross-entropy against targets (B, T) (IGNORE = -100
        skipped; None without targets)."""
        B, T = ids.shape
        if T > self.cfg.max_len:
            raise ValueError(f"sequence of {T} tokens exceeds max_len {self.cfg.max_len}")
        x = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))   # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))                                     # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-100)
        return logits, loss
