"""A tiny GPT (pre-LayerNorm, learned positions) with a KV cache for fast decoding.

Shapes: B batch, T time, C = d_model channels, H heads, D = C // H head size, V vocabulary.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 18
    """number of token ids"""
    d_model: int = 64
    """residual stream width"""
    n_layers: int = 4
    """transformer blocks"""
    n_heads: int = 4
    """attention heads per block"""
    max_len: int = 24
    """longest sequence (learned position table size)"""


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, cache: "KVCache | None" = None, layer: int = 0,
                mask: torch.Tensor | None = None, keep: torch.Tensor | None = None, grid: tuple | None = None,
                out: torch.Tensor | None = None, last: bool = False, kv_only: bool = False) -> torch.Tensor | None:
        """keep (N,): x is the (N, C) real tokens of a padded (B, T) batch, whose shape is grid's (plain causal) or
        the mask's (additive, from GPT.forward: (B, H, T, T) up to PACKED_BMM_T positions, else (B, 1, T, T));
        out: the flat positions (a subset of keep) whose outputs are wanted, default keep.
        With a cache: last gives the output of the block's last position alone ((B, 1, C)); kv_only writes the keys
        and values and gives nothing (a prefill's last layer: GPT.forward's `last`, GPT.fill)."""
        qkv = self.qkv(x)
        if keep is not None:   # x holds the (N, C) real tokens of a padded (B, T) batch: pad them for attention only
            B, T = grid if grid is not None else (mask.shape[0], mask.shape[-1])
            qkv = qkv.new_zeros(B * T, qkv.shape[-1]).index_copy(0, keep, qkv).view(B, T, -1)
        B, T, C = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        qkv = qkv.view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D)
        q, k, v = qkv
        if keep is not None and (mask is None or T <= PACKED_BMM_T):
            # training (GPT.loss: plain causal) and scoring packed rows (RL: the mask, per head): three batched
            # GEMM-sized ops run forward + backward in 3/4 of the time of SDPA's CPU flash kernel at T <= 24,
            # which tiles for long sequences, and in less at RL's masked rows
            H, D = self.n_heads, C // self.n_heads
            q, k, v = qkv.reshape(3, B * H, T, D)            # one copy for the three
            bias = _causal(T, q.device, q.dtype).expand(B * H, T, T) if mask is None else mask.view(B * H, T, T)
            s = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=D ** -0.5)
            y = s.softmax(-1).bmm(v).view(B, H, T, D).permute(0, 2, 1, 3)   # (B, T, H, D), a view
            idx = keep if out is None else out
            # gather the wanted positions straight from the view: one copy, not a reshape's and then a select's
            return self.proj(y[idx // T, idx % T].reshape(len(idx), C))
        elif cache is None:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        else:
            kt, vt = cache.append(layer, qkv[1:])             # (pos, B, H, D): everything so far, time-major
            if kv_only:
                return None
            if last and T > 1:    # the block's last query sees every key so far: no mask
                q, T = q[:, :, -1:], 1
            if T == 1 and B >= DECODE_ROWS:    # a decode step over many rows: one query against <= 24 keys
                y = _decode_attention(q[:, :, 0], kt, vt)[:, :, None]
            elif cache.start == 0 and T > 1:                  # a first block (the prompt): plainly causal
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:          # a few decoding rows, or a block after cached ones (prompt heads shared)
                mask = None if T == 1 else cache.block_mask(q.device)
                y = F.scaled_dot_product_attention(q, kt.permute(1, 2, 0, 3), vt.permute(1, 2, 0, 3), attn_mask=mask)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y if keep is None else y.view(B * T, C).index_select(0, keep if out is None else out))


PACKED_BMM_T = 64
"""Packed rows up to this long attend through baddbmm (GRPO from the base model packs 30-43 positions a row); longer
ones through SDPA, whose flash kernel tiles and is faster there than materialised scores."""

DECODE_ROWS = 256
"""From this many rows a decode step's attention is _decode_attention; below it SDPA. Alone the elementwise form is
faster from ~64 rows at 2 threads, but RL's rollouts, whose decode steps run ~50 distinct prefixes, cost the same
with either."""


def _decode_attention(q: torch.Tensor, kt: torch.Tensor, vt: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v for one query per row and head: q (B, H, D), kt and vt (pos, B, H, D) -> (B, H, D).
    Attention written for <= 24 positions, as elementwise products and sums over the time-major cache (contiguous
    slabs): at a thousand rows about twice as fast as SDPA's CPU flash kernel, which runs a tiny GEMM per row and
    head."""
    p = (kt * q).sum(-1).mul_(q.shape[-1] ** -0.5).softmax(0)     # (pos, B, H)
    return (p[..., None] * vt).sum(0)


@functools.lru_cache(maxsize=16)
def _causal(T: int, device, dtype) -> torch.Tensor:
    """(T, T) additive causal mask (0 on and below the diagonal, -inf above), built once per shape."""
    return additive(torch.ones(T, T, dtype=torch.bool, device=device).tril(), dtype)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model))

    def forward(self, x: torch.Tensor, cache: "KVCache | None" = None, layer: int = 0,
                mask: torch.Tensor | None = None, keep: torch.Tensor | None = None, grid: tuple | None = None,
                sub: torch.Tensor | None = None, last: bool = False, kv_only: bool = False) -> torch.Tensor | None:
        """sub (with keep): only rows sub of x go on past attention (every row still gives its key and value).
        With a cache: last, only the last position goes on past attention ((B, 1, C)); kv_only, the block writes
        its keys and values and gives nothing."""
        if kv_only:
            return self.attn(self.ln1(x), cache, layer, kv_only=True)
        h = self.attn(self.ln1(x), cache, layer, mask, keep, grid, None if sub is None else keep[sub], last=last)
        x = (x[:, -1:] if last else x if sub is None else x.index_select(0, sub)) + h
        return x + self.mlp(self.ln2(x))


def additive(allowed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """A boolean attention mask (True = may attend) as 0 / -inf scores: the form SDPA uses inside, so converting
    once per pass, not once per layer, gives the same numbers and saves a third of a masked forward on CPU."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))


class KVCache:
    """Preallocated keys and values for every layer, time-major: (L, 2, max_len, B, H, D) (2: key, value), filled
    left to right. A decode step writes one contiguous (B, H, D) slab per layer and position, and its attention
    reads (pos, B, H, D) blocks of such slabs. `capacity` >= B rows are allocated so that `grow` can add rows in
    place; kv is the view of the first B rows of `store`."""

    def __init__(self, cfg: GPTConfig, batch: int, device=None, dtype=torch.float32, capacity: int | None = None):
        shape = (cfg.n_layers, 2, cfg.max_len, max(batch, capacity or 0), cfg.n_heads, cfg.d_model // cfg.n_heads)
        self.store = torch.empty(shape, device=device, dtype=dtype)
        self.kv = self.store[:, :, :, :batch]
        self.start = 0  # position of the block being written by the current forward
        self.pos = 0    # positions filled once the current forward has run

    @property
    def batch(self) -> int:
        return self.kv.shape[3]

    @property
    def capacity(self) -> int:
        return self.store.shape[3]

    def append(self, layer: int, kv: torch.Tensor):
        """Write the new block's keys and values (2, B, H, T, D) in one copy; return all keys and values so far,
        (pos, B, H, D) each."""
        if layer == 0:
            self.start, self.pos = self.pos, self.pos + kv.shape[3]
        self.kv[layer, :, self.start:self.pos] = kv.permute(0, 3, 1, 2, 4)
        return self.kv[layer, :, :self.pos].unbind(0)

    def block_mask(self, device) -> torch.Tensor:
        """(pos - start, pos) additive mask for the block just appended: query i (absolute start + i) sees keys up
        to start + i. Built once per forward and shared by the layers."""
        memo = getattr(self, "_mask", None)
        if memo is None or memo[0] != (self.start, self.pos):
            rows = torch.arange(self.start, self.pos, device=device)[:, None]
            self._mask = ((self.start, self.pos), additive(torch.arange(self.pos, device=device)[None, :] <= rows, self.kv.dtype))
        return self._mask[1]

    def _with(self, kv: torch.Tensor, store: torch.Tensor | None = None) -> "KVCache":
        """A cache holding kv (a view of store, default kv itself), at this cache's positions."""
        out = KVCache.__new__(KVCache)
        out.kv, out.store, out.start, out.pos = kv, kv if store is None else store, self.start, self.pos
        return out

    def rows(self, a: int, b: int) -> "KVCache":
        """A cache over rows a..b-1 of this one that writes into this cache's storage (a forward in row chunks)."""
        return self._with(self.kv[:, :, :, a:b])

    def select(self, rows: torch.Tensor, capacity: int | None = None) -> "KVCache":
        """A cache whose row i is this cache's row rows[i] (prefixes that branch, or rows that are kept), in a new
        allocation of `capacity` rows (default len(rows))."""
        L, two, T, _, H, D = self.kv.shape
        store = self.kv.new_empty((L, two, T, max(len(rows), capacity or 0), H, D))
        out = self._with(store[:, :, :, :len(rows)], store)
        # only the filled positions, one block of slabs in this layout (a third of the time of the whole cache in
        # the (B, H, T, D) layout), gathered straight into place (out=), not through a copy
        _gather(self.kv[:, :, :self.pos], rows, out.kv[:, :, :self.pos])
        return out

    def grow(self, src: torch.Tensor) -> None:
        """Add rows after the last one, copies of rows src (prefixes that branched), in the spare capacity: the
        other rows stay where they are, where `select` would copy them all."""
        R, e = self.batch, len(src)
        if R + e > self.capacity:
            raise ValueError(f"grow: {R} + {e} rows exceed the capacity of {self.capacity}")
        self.kv = self.store[:, :, :, :R + e]
        _gather(self.kv[:, :, :self.pos, :R], src, self.kv[:, :, :self.pos, R:])


def _gather(src: torch.Tensor, rows: torch.Tensor, out: torch.Tensor) -> None:
    """out = src.index_select(3, rows), written in place (out= takes no autograd: a cache filled with gradients on
    is copied the plain way)."""
    if src.requires_grad and torch.is_grad_enabled():
        out[:] = src.index_select(3, rows)
    else:
        torch.index_select(src, 3, rows, out=out)


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

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None, cache: KVCache | None = None,
                reduction: str = "mean", pos: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                keep: torch.Tensor | None = None, last: bool = False, want: torch.Tensor | None = None,
                shift: torch.Tensor | None = None):
        """ids (B, T) -> logits (B, T, V), and the cross-entropy against targets (B, T) (IGNORE = -100 skipped).

        With a cache, ids continue the cached sequence: their positions start where the cache ends. Without one,
        pos (B, T) and mask (B, 1, T, T) (additive 0 / -inf, or boolean True = may attend) can replace the
        positions 0..T-1 and the causal mask: several sequences packed into one row (sampling.output_logits).
        Every query must be allowed at least one key (a row of -inf alone gives NaN).
        keep (N,) (with pos and mask) lists the real positions of the flattened (B * T) batch: only they run through
        the per-token layers, padded back for attention alone, and the logits are (N, V) ("unpadding", as in
        flash-attn's bert_padding.unpad_input; a quarter of a packed batch is padding). want (M,) (with keep): the
        indices among those N positions whose logits are wanted, sorted; the last block goes on past attention only
        there and the logits are (M, V) (a packed RL row wants none of its prompt's but the last).
        last (with a cache, no targets): the logits of the last position alone, (B, 1, V). The other positions are
        needed for their keys and values only, so the last block goes on past them only at the last position: a
        prefill of a 10-token prompt does a fifth less work.
        shift (B, T, C) (without keep or a cache): added to the token embeddings, a reading that differs per row
        (methods.readers).
        """
        B, T = ids.shape
        if keep is not None and (pos is None or mask is None or mask.shape[0] != B or targets is not None
                                 or cache is not None):
            raise ValueError("keep needs pos and a (B, 1, T, T) mask, and gives logits only (no targets, no cache)")
        if want is not None and keep is None:
            raise ValueError("want needs keep")
        if shift is not None and (keep is not None or cache is not None
                                  or shift.shape != (*ids.shape, self.cfg.d_model)):
            raise ValueError("shift is (B, T, C) and goes without keep or a cache")
        if last and (cache is None or targets is not None):
            raise ValueError("last needs a cache and gives logits only (no targets)")
        start = cache.pos if cache is not None else 0
        if pos is None:
            pos = torch.arange(start, start + T, device=ids.device)
            if start + T > self.cfg.max_len:
                raise ValueError(f"sequence of {start + T} tokens exceeds max_len {self.cfg.max_len}")
        elif pos.numel() and int(pos.max()) >= self.cfg.max_len:
            raise ValueError(f"position {int(pos.max())} exceeds max_len {self.cfg.max_len}")
        if keep is not None:
            ids, pos = ids.reshape(-1)[keep], pos.reshape(-1)[keep]
            dtype = self.tok.weight.dtype
            mask = additive(mask, dtype) if mask.dtype == torch.bool else mask.to(dtype)
            if T <= PACKED_BMM_T:   # one per head, once for every layer: the bmm attention adds it to its scores
                mask = mask.expand(B, self.cfg.n_heads, T, T).contiguous()
        x = self.tok(ids) + self.pos(pos)  # (B, T, C), or (N, C) with keep
        if shift is not None:
            x = x + shift
        final = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, mask, keep, sub=want if i == final else None, last=last and i == final)
        logits = self.head(self.ln_f(x))  # (B, T, V), (B, 1, V) with last, or (N, V) / (M, V) with keep
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-100, reduction=reduction)
            if reduction == "none":
                loss = loss.view(B, T)
        return logits, loss

    def fill(self, ids: torch.Tensor, cache: KVCache) -> None:
        """Write the keys and values of ids (B, T), which continue the cached sequence, into the cache, and nothing
        else: a prompt head whose cache rows are copied out before the rest of the prompt runs (sampling._prefill).
        The last block stops at its keys and values."""
        if cache.pos + ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence of {cache.pos + ids.shape[1]} tokens exceeds max_len {self.cfg.max_len}")
        x = self.tok(ids) + self.pos(torch.arange(cache.pos, cache.pos + ids.shape[1], device=ids.device))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, kv_only=i == len(self.blocks) - 1)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """forward(ids, targets)[1] (mean cross-entropy, IGNORE = -100 skipped) for training, with less work.

        Only what the counted targets depend on runs: each row up to its last counted target (the padding after
        it cannot reach them: attention is causal) goes through the per-token layers unpadded (padded back for
        attention alone), and the last block continues past its attention only at the counted positions (the
        prompt is there for its keys and values). A base-recipe batch has 3/4 of its positions real and about
        half of those counted. Same loss as forward up to float rounding (another summation order).
        """
        counted = targets != -100
        return F.cross_entropy(self.logits_at(ids, counted), targets[counted])

    def logits_at(self, ids: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
        """forward(ids)[0][counted] ((N, V), row-major order) with loss's saving: the work `counted` positions need.
        The training path of GPT.loss and of a verifier's BCE."""
        B, T = ids.shape
        if T > self.cfg.max_len:
            raise ValueError(f"sequence of {T} tokens exceeds max_len {self.cfg.max_len}")
        needed = counted.flip(1).cumsum(1).flip(1) > 0          # a counted target at or after this position
        keep = needed.view(-1).nonzero().squeeze(1)             # (N,) flat positions that run
        sub = counted.view(-1)[keep].nonzero().squeeze(1)       # which of them are counted
        x = self.tok(ids.reshape(-1)[keep]) + self.pos(keep % T)
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, None, i, None, keep, (B, T), sub if i == last else None)
        return self.head(self.ln_f(x))
